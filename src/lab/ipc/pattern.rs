//! Patterns: what the client sends when, how the peer reacts, and what latency means.
//!
//! * ping-pong: send a message, wait for its echo; latency is the round trip.
//! * stream: messages one way, buffered by the writer and written once `flush_bytes` are
//!   buffered (Xlib/XCB flush a 4 KiB buffer); latency is one way.
//! * burst: `n` messages, then the peer acknowledges the burst; one way.
//! * segments: each payload goes into one of `k` shared-memory segments and is announced by a
//!   16-byte note over the transport; when all `k` are used the writer syncs (a round trip)
//!   before reusing them (Java2D's MIT-SHM mask upload); one way.
//! * open-loop: ping-pong on a fixed schedule; latency is measured from each message's
//!   *intended* send time (coordinated omission corrected, as wrk2 does), and also from its
//!   actual send time.
//!
//! One-way latency runs from the moment the writer starts sending a message (so it includes
//! waiting for buffer space, a flush or a sync) to the moment the peer holds all of it. The
//! writer records its start times and the peer its arrival times (into [`Record`]); the two
//! are paired by sequence number afterwards, so nothing but the payload crosses the transport.
//!
//! USDT probes (provider `latscope_ipc`) mark each message: `send(seq, len)` and
//! `recv(seq, len)` on the client, `peer_recv(seq, len)` and `peer_send(seq, len)` on the peer,
//! so `latscope live` can measure the same exchange from the kernel.
//!
//! Both sides of every pattern live here, client drivers and the peer's reactions, down to
//! the peer's receive loop ([`run_peer`]), so that a pattern's protocol is read in one place.
//! Where the peer runs (a thread, a forked process) is `peer.rs`'s business, and this module
//! does not import it: `run.rs` starts the peer with [`run_peer`] as its work. What the peer
//! measured goes into a [`Record`], which has its own module (`record.rs`) so that both can use
//! it without importing each other.

use std::io;

use probe::probe;

use super::clock::{Clock, Monotonic, tighten_timer_slack};
use super::record::Record;
use super::shared::Mapping;
use super::transport::inproc::Callee;
use super::transport::{Endpoint, recv_exact};
use super::usage::{self, Scope, Usage};
use super::wire::{
    ACK_BYTES, NOTE_BYTES, SYNC, check_full, check_quick, fill_body, first_difference, note, stamp,
};
use super::{Config, Pattern, Settings};
use crate::ingest::Cancel;

/// Why the client stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// every planned message was sent
    Done,
    /// `max_time` passed first
    TimeUp,
    /// Ctrl-C
    Interrupted,
    /// the exchange failed (the peer died, or bytes arrived wrong)
    Failed(String),
}

/// What the client measured.
#[derive(Debug, Clone, Default)]
pub struct ClientRun {
    /// round-trip patterns: the latency of each measured message; one-way patterns: the start
    /// time of every message, indexed by sequence number (warm-up included)
    pub samples: Vec<u64>,
    /// open-loop only: latency from the actual (not intended) send time
    pub uncorrected: Vec<u64>,
    /// round-trip patterns with `max_spans` > 0: the start of each measured message (its
    /// send time; open-loop: its intended send time), beside `samples`
    pub starts: Vec<u64>,
    /// messages sent, warm-up included
    pub sent: u64,
    /// clock at the start of the measured phase
    pub measured_start: Option<u64>,
    /// clock at the end of the client's last measured message
    pub measured_end: u64,
    /// the client's CPU time and context switches during the measured phase
    pub usage: Usage,
    /// why it stopped (`None` while running)
    pub stop: Option<Stop>,
}

/// Everything the client side needs.
pub struct Client<'a> {
    /// its end of the transport
    pub ep: &'a mut dyn Endpoint,
    /// the configuration
    pub config: Config,
    /// counts and limits
    pub settings: &'a Settings,
    /// the clock shared with the peer
    pub clock: &'a dyn Clock,
    /// the segments, for the segments pattern
    pub segments: Option<&'a Mapping>,
    /// Ctrl-C
    pub cancel: &'a Cancel,
    /// the client side's usage so far
    pub usage: &'a dyn Fn() -> Usage,
}

/// The phase bookkeeping shared by every driver.
struct Phase<'s> {
    settings: &'s Settings,
    cancel: &'s Cancel,
    usage: &'s dyn Fn() -> Usage,
    usage_start: Usage,
    run: ClientRun,
}

impl Phase<'_> {
    /// Whether to send message `seq`; `last` is the latest clock reading.
    fn proceed(&mut self, seq: u64, last: u64) -> bool {
        let s = self.settings;
        if seq == s.warmup {
            self.usage_start = (self.usage)();
        }
        if self.cancel.is_raised() {
            self.run.stop = Some(Stop::Interrupted);
            return false;
        }
        if seq >= s.warmup + s.count {
            self.run.stop = Some(Stop::Done);
            return false;
        }
        if let Some(start) = self.run.measured_start
            && seq > s.warmup
            && last.saturating_sub(start) >= s.max_time_ns
        {
            self.run.stop = Some(Stop::TimeUp);
            return false;
        }
        true
    }

    /// Notes the start time of the first measured message.
    fn started(&mut self, seq: u64, t: u64) {
        if seq == self.settings.warmup {
            self.run.measured_start = Some(t);
        }
    }

    /// Reads the start time of one-way message `seq` and records it.
    fn one_way_start(&mut self, seq: u64, clock: &dyn Clock) {
        let t = clock.now();
        self.started(seq, t);
        self.run.samples.push(t);
        self.run.measured_end = t;
    }

    fn finish(mut self, result: io::Result<()>) -> ClientRun {
        if let Err(e) = result {
            self.run.stop = Some(Stop::Failed(e.to_string()));
        }
        if self.run.sent > self.settings.warmup {
            self.run.usage = (self.usage)().since(&self.usage_start);
        }
        self.run
    }
}

fn corrupted(who: &str, msg: &[u8], seq: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "{who}: message {seq} ({} bytes) arrived wrong from byte {}",
            msg.len(),
            first_difference(msg, seq).unwrap_or(0)
        ),
    )
}

fn check(verify: bool, msg: &[u8], seq: u64) -> bool {
    if verify {
        check_full(msg, seq)
    } else {
        check_quick(msg, seq)
    }
}

fn closed() -> io::Error {
    super::transport::gone("the peer closed the connection")
}

impl Client<'_> {
    /// Runs the pattern to the end (or to the first error) and closes the client's side.
    pub fn run(self) -> ClientRun {
        let Client {
            ep,
            config,
            settings,
            clock,
            segments,
            cancel,
            usage,
        } = self;
        let mut phase = Phase {
            settings,
            cancel,
            usage,
            usage_start: Usage::default(),
            run: preallocated(&config, settings),
        };
        let result = match config.pattern {
            Pattern::PingPong => ping_pong(ep, &config, clock, &mut phase),
            Pattern::Stream { flush_bytes } => stream(ep, &config, flush_bytes, clock, &mut phase),
            Pattern::Burst { n } => burst(ep, &config, n, clock, &mut phase),
            Pattern::Segments { k } => match segments {
                Some(map) => segmented(ep, &config, k, map, clock, &mut phase),
                None => Err(io::Error::other(
                    "the segments pattern needs its shared segments",
                )),
            },
            Pattern::OpenLoop { rate } => open_loop(ep, &config, rate, clock, &mut phase),
        };
        let close = ep.close();
        phase.finish(result.and(close))
    }
}

/// Most samples room is made for before a run (8 bytes each: 32 MiB); past it, vectors grow.
const PREALLOCATED: u64 = 1 << 22;

/// A run with room for every sample (and start, when recording), so that no measured message
/// waits for a vector to grow or for a page of it to be faulted in.
fn preallocated(config: &Config, settings: &Settings) -> ClientRun {
    let n = (settings.warmup + settings.count).min(PREALLOCATED) as usize;
    let round_trip = !config.pattern.one_way();
    let open_loop = matches!(config.pattern, Pattern::OpenLoop { .. });
    ClientRun {
        samples: room(n),
        uncorrected: room(if open_loop { n } else { 0 }),
        starts: room(if round_trip && settings.max_spans > 0 {
            n
        } else {
            0
        }),
        ..ClientRun::default()
    }
}

/// An empty vector with room for `n`, its pages written once (a fresh allocation is mapped
/// lazily: the first write to each page would fault inside the timed loop).
fn room(n: usize) -> Vec<u64> {
    let mut v = Vec::with_capacity(n);
    v.resize(n, u64::MAX);
    v.clear();
    v
}

fn message(payload: usize) -> Vec<u8> {
    let mut m = vec![0; payload];
    fill_body(&mut m);
    m
}

/// One round trip of message `seq`; returns (start, end).
fn round_trip(
    ep: &mut dyn Endpoint,
    clock: &dyn Clock,
    msg: &[u8],
    reply: &mut [u8],
    seq: u64,
    verify: bool,
) -> io::Result<(u64, u64)> {
    let t0 = clock.now();
    probe!(latscope_ipc, send, seq as isize, msg.len() as isize);
    ep.send(msg)?;
    if !recv_exact(ep, reply)? {
        return Err(closed());
    }
    let t1 = clock.now();
    probe!(latscope_ipc, recv, seq as isize, reply.len() as isize);
    if !check(verify, reply, seq) {
        return Err(corrupted("echo", reply, seq));
    }
    Ok((t0, t1))
}

fn ping_pong(
    ep: &mut dyn Endpoint,
    config: &Config,
    clock: &dyn Clock,
    phase: &mut Phase<'_>,
) -> io::Result<()> {
    let mut msg = message(config.payload);
    let mut reply = vec![0; config.payload];
    let verify = phase.settings.verify;
    let warmup = phase.settings.warmup;
    let record = phase.settings.max_spans > 0;
    for seq in 0.. {
        if !phase.proceed(seq, phase.run.measured_end) {
            break;
        }
        stamp(&mut msg, seq);
        let (t0, t1) = round_trip(ep, clock, &msg, &mut reply, seq, verify)?;
        phase.run.sent = seq + 1;
        phase.started(seq, t0);
        phase.run.measured_end = t1;
        if seq >= warmup {
            phase.run.samples.push(t1 - t0);
            if record {
                phase.run.starts.push(t0);
            }
        }
    }
    Ok(())
}

fn stream(
    ep: &mut dyn Endpoint,
    config: &Config,
    flush_bytes: usize,
    clock: &dyn Clock,
    phase: &mut Phase<'_>,
) -> io::Result<()> {
    let mut msg = message(config.payload);
    let mut buffer = Vec::with_capacity(config.largest_unit());
    for seq in 0.. {
        if !phase.proceed(seq, phase.run.measured_end) {
            break;
        }
        phase.one_way_start(seq, clock);
        if !buffer.is_empty() && buffer.len() + msg.len() > flush_bytes {
            ep.send(&buffer)?;
            buffer.clear();
        }
        stamp(&mut msg, seq);
        probe!(latscope_ipc, send, seq as isize, msg.len() as isize);
        buffer.extend_from_slice(&msg);
        phase.run.sent = seq + 1;
        if buffer.len() >= flush_bytes {
            ep.send(&buffer)?;
            buffer.clear();
        }
    }
    if !buffer.is_empty() {
        ep.send(&buffer)?;
    }
    Ok(())
}

fn expect_ack(ep: &mut dyn Endpoint, expected: u64) -> io::Result<()> {
    let mut ack = [0u8; ACK_BYTES];
    if !recv_exact(ep, &mut ack)? {
        return Err(closed());
    }
    let got = u64::from_le_bytes(ack);
    if got != expected {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("the peer acknowledged {got} messages, {expected} were sent"),
        ));
    }
    Ok(())
}

fn burst(
    ep: &mut dyn Endpoint,
    config: &Config,
    n: u64,
    clock: &dyn Clock,
    phase: &mut Phase<'_>,
) -> io::Result<()> {
    let mut msg = message(config.payload);
    for seq in 0.. {
        if seq % n == 0 && !phase.proceed(seq, phase.run.measured_end) {
            break;
        }
        phase.one_way_start(seq, clock);
        stamp(&mut msg, seq);
        probe!(latscope_ipc, send, seq as isize, msg.len() as isize);
        ep.send(&msg)?;
        phase.run.sent = seq + 1;
        if (seq + 1) % n == 0 {
            expect_ack(ep, seq + 1)?;
        }
    }
    Ok(())
}

fn segmented(
    ep: &mut dyn Endpoint,
    config: &Config,
    k: usize,
    segments: &Mapping,
    clock: &dyn Clock,
    phase: &mut Phase<'_>,
) -> io::Result<()> {
    let mut msg = message(config.payload);
    let k = k as u64;
    for seq in 0.. {
        if !phase.proceed(seq, phase.run.measured_end) {
            break;
        }
        phase.one_way_start(seq, clock);
        if seq > 0 && seq % k == 0 {
            // Every segment is in use: wait until the peer has consumed them all.
            ep.send(&note(SYNC, seq))?;
            expect_ack(ep, seq)?;
        }
        let segment = seq % k;
        stamp(&mut msg, seq);
        let offset = segment as usize * config.payload;
        // SAFETY: the peer reads segment `segment` only after the note below, and never again
        // after the sync that precedes its reuse.
        unsafe { segments.slice_mut(offset, config.payload) }.copy_from_slice(&msg);
        probe!(latscope_ipc, send, seq as isize, msg.len() as isize);
        ep.send(&note(segment, seq))?;
        phase.run.sent = seq + 1;
    }
    Ok(())
}

fn open_loop(
    ep: &mut dyn Endpoint,
    config: &Config,
    rate: u64,
    clock: &dyn Clock,
    phase: &mut Phase<'_>,
) -> io::Result<()> {
    let mut msg = message(config.payload);
    let mut reply = vec![0; config.payload];
    let verify = phase.settings.verify;
    let warmup = phase.settings.warmup;
    let record = phase.settings.max_spans > 0;
    tighten_timer_slack();
    let mut anchor = 0;
    for seq in 0.. {
        if seq == warmup {
            anchor = clock.now();
            phase.run.measured_start = Some(anchor);
        }
        // The schedule, not the last reply, decides when time is up.
        let intended =
            anchor + ((seq.saturating_sub(warmup)) as u128 * 1_000_000_000 / rate as u128) as u64;
        let last = if seq > warmup {
            intended
        } else {
            phase.run.measured_end
        };
        if !phase.proceed(seq, last) {
            break;
        }
        stamp(&mut msg, seq);
        if seq >= warmup {
            clock.sleep_until(intended);
        }
        let (t0, t1) = round_trip(ep, clock, &msg, &mut reply, seq, verify)?;
        phase.run.sent = seq + 1;
        phase.run.measured_end = t1;
        if seq >= warmup {
            phase.run.samples.push(t1 - intended);
            phase.run.uncorrected.push(t1 - t0);
            if record {
                phase.run.starts.push(intended);
            }
        }
    }
    Ok(())
}

/// The peer's side of a pattern: frames what arrives into messages, checks them, records
/// arrival times, and answers (echoes, acknowledgements).
pub struct PeerLogic<'a> {
    config: Config,
    verify: bool,
    warmup: u64,
    record: &'a Record,
    segments: Option<&'a Mapping>,
    usage: &'a dyn Fn() -> Usage,
    unit: usize,
    partial: Vec<u8>,
    scratch: Vec<u8>,
    received: u64,
}

impl<'a> PeerLogic<'a> {
    /// The peer of `config`, recording into `record`.
    pub fn new(
        config: Config,
        settings: &Settings,
        record: &'a Record,
        segments: Option<&'a Mapping>,
        usage: &'a dyn Fn() -> Usage,
    ) -> Self {
        let unit = match config.pattern {
            Pattern::Segments { .. } => NOTE_BYTES,
            _ => config.payload,
        };
        PeerLogic {
            config,
            verify: settings.verify,
            warmup: settings.warmup,
            record,
            segments,
            usage,
            unit,
            partial: Vec::with_capacity(unit),
            scratch: vec![0; config.payload],
            received: 0,
        }
    }

    /// Whether arrival times are recorded (so the caller reads the clock per receive).
    pub fn needs_time(&self) -> bool {
        self.config.pattern.one_way()
    }

    /// Messages received so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// Handles `bytes` that arrived at `now`; `reply` sends a unit back.
    pub fn on_bytes(
        &mut self,
        mut bytes: &[u8],
        now: u64,
        reply: &mut dyn FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<()> {
        if !self.partial.is_empty() {
            let take = (self.unit - self.partial.len()).min(bytes.len());
            self.partial.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if self.partial.len() < self.unit {
                return Ok(());
            }
            let whole = std::mem::take(&mut self.partial);
            let result = self.on_message(&whole, now, reply);
            self.partial = whole;
            self.partial.clear();
            result?;
        }
        while bytes.len() >= self.unit {
            let (msg, rest) = bytes.split_at(self.unit);
            self.on_message(msg, now, reply)?;
            bytes = rest;
        }
        self.partial.extend_from_slice(bytes);
        Ok(())
    }

    /// The stream ended: records the peer's usage at the end.
    pub fn finish(&mut self) {
        self.record.set_end((self.usage)());
    }

    fn arrived(&mut self, seq: u64, now: Option<u64>) {
        if seq == self.warmup {
            self.record.set_start((self.usage)());
        }
        if let Some(t) = now {
            self.record.set_arrival(seq, t);
        }
        probe!(
            latscope_ipc,
            peer_recv,
            seq as isize,
            self.config.payload as isize
        );
        self.received = seq + 1;
        self.record.set_received(self.received);
    }

    fn check(&self, msg: &[u8], seq: u64) -> io::Result<()> {
        if check(self.verify, msg, seq) {
            Ok(())
        } else {
            Err(corrupted("peer", msg, seq))
        }
    }

    fn on_message(
        &mut self,
        msg: &[u8],
        now: u64,
        reply: &mut dyn FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<()> {
        let seq = self.received;
        match self.config.pattern {
            Pattern::PingPong | Pattern::OpenLoop { .. } => {
                self.check(msg, seq)?;
                self.arrived(seq, None);
                probe!(latscope_ipc, peer_send, seq as isize, msg.len() as isize);
                reply(msg)
            }
            Pattern::Stream { .. } => {
                self.check(msg, seq)?;
                self.arrived(seq, Some(now));
                Ok(())
            }
            Pattern::Burst { n } => {
                self.check(msg, seq)?;
                self.arrived(seq, Some(now));
                if (seq + 1).is_multiple_of(n) {
                    reply(&(seq + 1).to_le_bytes())?;
                }
                Ok(())
            }
            Pattern::Segments { k } => self.on_note(msg, seq, k, now, reply),
        }
    }

    fn on_note(
        &mut self,
        msg: &[u8],
        seq: u64,
        k: usize,
        now: u64,
        reply: &mut dyn FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<()> {
        let word = |i: usize| u64::from_le_bytes(msg[i..i + 8].try_into().unwrap_or([0; 8]));
        let (first, note_seq) = (word(0), word(8));
        if first == SYNC {
            return reply(&self.received.to_le_bytes());
        }
        if note_seq != seq || first >= k as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "peer: note for message {note_seq} in segment {first}, expected message {seq}"
                ),
            ));
        }
        let Some(segments) = self.segments else {
            return Err(io::Error::other("peer: no segments mapped"));
        };
        let offset = first as usize * self.config.payload;
        // SAFETY: the writer does not touch this segment again before the next sync.
        self.scratch
            .copy_from_slice(unsafe { segments.slice(offset, self.config.payload) });
        let data = std::mem::take(&mut self.scratch);
        let checked = self.check(&data, seq);
        self.scratch = data;
        checked?;
        self.arrived(seq, Some(now));
        Ok(())
    }
}

impl Callee for PeerLogic<'_> {
    fn needs_time(&self) -> bool {
        PeerLogic::needs_time(self)
    }

    fn on_bytes(
        &mut self,
        bytes: &[u8],
        now: u64,
        reply: &mut dyn FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<()> {
        PeerLogic::on_bytes(self, bytes, now, reply)
    }

    fn finish(&mut self) {
        PeerLogic::finish(self)
    }
}

/// The peer's loop: receive, react, until the client closes.
pub fn serve(
    ep: &mut dyn Endpoint,
    logic: &mut PeerLogic<'_>,
    clock: &dyn Clock,
    buffer: usize,
) -> io::Result<()> {
    let mut buf = vec![0u8; buffer];
    loop {
        let n = ep.recv(&mut buf)?;
        if n == 0 {
            break;
        }
        let now = if logic.needs_time() { clock.now() } else { 0 };
        logic.on_bytes(&buf[..n], now, &mut |unit| ep.send(unit))?;
    }
    logic.finish();
    Ok(())
}

/// The receive buffer a peer needs: whole units of message transports, and enough to drain a
/// stream in few reads.
pub fn buffer_for(config: &Config) -> usize {
    config.largest_unit().max(64 * 1024)
}

/// Runs the peer of `config` on `ep` to the end, recording into `record`.
pub fn run_peer(
    mut ep: Box<dyn Endpoint + Send>,
    config: Config,
    settings: &Settings,
    record: &Record,
    segments: Option<&Mapping>,
    scope: Scope,
) -> io::Result<()> {
    let usage = move || usage::current(scope);
    let mut logic = PeerLogic::new(config, settings, record, segments, &usage);
    let result = serve(ep.as_mut(), &mut logic, &Monotonic, buffer_for(&config));
    if let Err(e) = &result {
        record.set_error(&e.to_string());
    }
    let _ = ep.close();
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::ipc::clock::FakeClock;
    use crate::lab::ipc::run::one_way_latencies;
    use crate::lab::ipc::transport::inproc::InprocEndpoint;
    use crate::lab::ipc::{Peer, Transport};
    use crate::stats::Distribution;

    fn config(pattern: Pattern) -> Config {
        Config {
            transport: Transport::Inproc,
            peer: Peer::None,
            pattern,
            payload: 64,
        }
    }

    fn settings(count: u64, warmup: u64) -> Settings {
        Settings {
            count,
            warmup,
            max_time_ns: u64::MAX,
            verify: true,
            ..Settings::default()
        }
    }

    /// Runs `pattern` over the in-process transport on `clock`; returns the client's run and
    /// the peer's arrival times.
    fn run(pattern: Pattern, s: &Settings, clock: &FakeClock) -> (ClientRun, Vec<u64>) {
        let record = Record::new(s.warmup + s.count + 1).unwrap();
        let cfg = config(pattern);
        let segments = match pattern {
            Pattern::Segments { k } => Some(Mapping::new(k * cfg.payload).unwrap()),
            _ => None,
        };
        let no_usage = Usage::default;
        let logic = PeerLogic::new(cfg, s, &record, segments.as_ref(), &no_usage);
        let mut ep = InprocEndpoint::new(logic, clock);
        let run = Client {
            ep: &mut ep,
            config: cfg,
            settings: s,
            clock,
            segments: segments.as_ref(),
            cancel: &Cancel::new(),
            usage: &no_usage,
        }
        .run();
        let arrivals = record.arrivals(record.received());
        (run, arrivals)
    }

    fn distribution(values: &[u64]) -> Distribution {
        let mut d = Distribution::default();
        values.iter().for_each(|&v| d.record(v));
        d
    }

    #[test]
    fn ping_pong_latency_is_the_time_between_the_two_clock_reads() {
        // Reads alternate: send time (read 2i), echo time (read 2i+1). Round trip i of the
        // measured phase takes 10·(i+1) ns: 10, 20, ..., 1000.
        // The four warm-up round trips take 1 ns.
        let clock = FakeClock::new(|read| match (read % 2, read / 2) {
            (1, i) if i >= 4 => (i - 4) * 10 + 10,
            _ => 1,
        });
        let s = settings(100, 4);
        let (run, _) = run(Pattern::PingPong, &s, &clock);
        assert_eq!(run.stop, Some(Stop::Done));
        assert_eq!(run.sent, 104);
        let d = distribution(&run.samples);
        let p = d.percentiles().unwrap();
        // Nearest rank of 10, 20, ..., 1000: p50 = 500, p90 = 900, p99 = 990, p99.9 = 1000.
        assert_eq!((p.p50, p.p90, p.p99, p.p999), (500, 900, 990, 1000));
        assert_eq!(
            (d.summary().min(), d.summary().max()),
            (Some(10), Some(1000))
        );
        assert_eq!(d.summary().mean(), Some(505.0));
    }

    #[test]
    fn stream_latency_is_one_way_and_includes_waiting_in_the_writer_buffer() {
        // 64-byte messages, a 256-byte buffer: four messages per write. Every clock read
        // advances 100 ns. The writer reads once per message (its start time); the peer reads
        // once per write (arrival). Message j of a group of four waits for 3−j later messages.
        let clock = FakeClock::new(|_| 100);
        let s = settings(8, 0);
        let (run, arrivals) = run(Pattern::Stream { flush_bytes: 256 }, &s, &clock);
        assert_eq!(run.sent, 8);
        let latencies = one_way_latencies(&run.samples, &arrivals, 0);
        // Reads: starts 100..400, arrival 500; starts 600..900, arrival 1000.
        assert_eq!(latencies, [400, 300, 200, 100, 400, 300, 200, 100]);
    }

    #[test]
    fn open_loop_latency_counts_from_the_intended_send_time_through_a_stall() {
        // 1,000,000 messages/s: one intended every 1000 ns. Each reply takes 100 ns, except
        // that the reply to message 3 takes 5000 ns (a stall). Closed-loop timing sees one
        // slow message; the schedule sees every message that should have left during it.
        let clock = FakeClock::new(|read| {
            // Read 0 is the schedule's anchor; then per message: send, reply.
            if read == 0 {
                0
            } else if read % 2 == 0 {
                if read / 2 == 4 { 5000 } else { 100 }
            } else {
                0
            }
        });
        let s = settings(8, 0);
        let (run, _) = run(Pattern::OpenLoop { rate: 1_000_000 }, &s, &clock);
        assert_eq!(run.uncorrected, [100, 100, 100, 5000, 100, 100, 100, 100]);
        // Message 3 is sent at 3000 and answered at 8000; message 4 (intended 4000) leaves
        // late at 8000: 4100 from its intended time, and so on until the backlog is gone.
        assert_eq!(run.samples, [100, 100, 100, 5000, 4100, 3200, 2300, 1400]);
    }

    #[test]
    fn a_burst_is_acknowledged_once_and_every_message_arrives() {
        let clock = FakeClock::new(|_| 1);
        let s = settings(16, 0);
        let (run, arrivals) = run(Pattern::Burst { n: 8 }, &s, &clock);
        assert_eq!(
            (run.stop, run.sent, arrivals.len()),
            (Some(Stop::Done), 16, 16)
        );
        // With the in-process peer each message arrives one clock read after it starts.
        assert!(
            one_way_latencies(&run.samples, &arrivals, 0)
                .iter()
                .all(|&l| l == 1)
        );
    }

    #[test]
    fn segments_are_reused_only_after_a_sync_and_carry_the_right_bytes() {
        let clock = FakeClock::new(|_| 1);
        let s = settings(10, 0);
        let (run, arrivals) = run(Pattern::Segments { k: 3 }, &s, &clock);
        assert_eq!(
            (run.stop, run.sent, arrivals.len()),
            (Some(Stop::Done), 10, 10)
        );
    }

    #[test]
    fn the_peer_reports_a_corrupted_message() {
        let record = Record::new(4).unwrap();
        let s = settings(1, 0);
        let no_usage = Usage::default;
        let mut logic = PeerLogic::new(config(Pattern::PingPong), &s, &record, None, &no_usage);
        let mut msg = vec![0; 64];
        fill_body(&mut msg);
        stamp(&mut msg, 0);
        msg[40] ^= 0xff;
        let e = logic.on_bytes(&msg, 0, &mut |_| Ok(())).unwrap_err();
        assert!(
            e.to_string()
                .contains("message 0 (64 bytes) arrived wrong from byte 40"),
            "{e}"
        );
    }

    #[test]
    fn messages_split_across_reads_are_reassembled() {
        let record = Record::new(4).unwrap();
        let s = settings(2, 0);
        let no_usage = Usage::default;
        let mut logic = PeerLogic::new(
            config(Pattern::Stream { flush_bytes: 0 }),
            &s,
            &record,
            None,
            &no_usage,
        );
        let mut bytes = Vec::new();
        for seq in 0..2 {
            let mut m = vec![0; 64];
            fill_body(&mut m);
            stamp(&mut m, seq);
            bytes.extend(m);
        }
        for (i, chunk) in bytes.chunks(50).enumerate() {
            logic
                .on_bytes(chunk, 10 * (i as u64 + 1), &mut |_| Ok(()))
                .unwrap();
        }
        assert_eq!(logic.received(), 2);
        // Message 0 completes in the second read (t = 20), message 1 in the third (t = 30).
        assert_eq!(record.arrivals(2), [20, 30]);
    }
}
