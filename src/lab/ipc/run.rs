//! One configuration end to end: build the transport, start the peer, drive the pattern, and
//! turn both sides' records into an [`Outcome`].
//!
//! This is where the other modules meet: it hands [`pattern::run_peer`] to [`peer`] as the
//! peer's work, gives both the [`Record`], and turns a pattern into what a transport needs to
//! know (D-Bus: [`dbus_calls`]), so that none of them has to import the others.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::clock::Monotonic;
use super::pattern::{self, Client, ClientRun, PeerLogic, Stop};
use super::peer::{
    self, ENDPOINT_FDS, EndpointPeerSpec, PeerHandle, PeerSpec, READY_FD, RECORD_FD, SEGMENTS_FD,
};
use super::record::Record;
use super::shared::Mapping;
use super::transport::Endpoint;
use super::transport::channel::ChannelEndpoint;
use super::transport::dbus::{self, Bus, Calls};
use super::transport::fd::{FdEndpoint, FdKind};
use super::transport::inproc::InprocEndpoint;
use super::transport::shm::{RingShape, ShmEndpoint, Wake};
use super::usage::{self, Scope, Usage};
use super::{Config, ConfigError, Pattern, Peer, Settings, Transport, validate};
use crate::doc::lab::Records;
use crate::ingest::Cancel;
use crate::lab::records::Recorder;
use crate::stats::Distribution;

/// What one configuration measured.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// the configuration
    pub config: Config,
    /// per-message latency, ns (see [`Pattern::latency_meaning`])
    pub latency: Distribution,
    /// open-loop: latency from the actual send time (what a closed-loop tool reports)
    pub uncorrected: Option<Distribution>,
    /// wall time of the measured phase, ns
    pub elapsed_ns: u64,
    /// messages sent, warm-up included
    pub sent: u64,
    /// messages the peer received, warm-up included
    pub received: u64,
    /// the client side's CPU time and context switches (its process, minus a peer thread)
    pub client: Usage,
    /// the peer's (thread or process)
    pub peer: Option<Usage>,
    /// the broker's (dbus-daemon)
    pub broker: Option<Usage>,
    /// why the client stopped
    pub stop: Stop,
    /// how the peer failed, if it did
    pub peer_error: Option<String>,
    /// individual messages (`max_spans` > 0)
    pub kept: Records,
}

impl Outcome {
    /// Measured messages.
    pub fn messages(&self) -> u64 {
        self.latency.count()
    }

    /// Every side's usage together.
    pub fn total(&self) -> Usage {
        let mut t = self.client;
        for u in [self.peer, self.broker].into_iter().flatten() {
            t = t.plus(&u);
        }
        t
    }

    /// Messages per second over the measured phase.
    pub fn msgs_per_s(&self) -> f64 {
        if self.elapsed_ns == 0 {
            0.0
        } else {
            self.messages() as f64 * 1e9 / self.elapsed_ns as f64
        }
    }

    /// Whether something went wrong (a failure, not an interruption or a time limit).
    pub fn failed(&self) -> Option<String> {
        match (&self.stop, &self.peer_error) {
            (Stop::Failed(client), Some(peer)) => Some(format!("{client}; {peer}")),
            (Stop::Failed(client), None) => Some(client.clone()),
            (_, Some(peer)) => Some(peer.clone()),
            _ => None,
        }
    }
}

/// Why a configuration could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// impossible options
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// the transport or the peer could not be set up
    #[error("{config}: {source}")]
    Setup {
        /// which
        config: Config,
        /// why
        source: io::Error,
    },
}

/// One-way latencies of the measured messages: arrival − start, paired by sequence number.
pub fn one_way_latencies(starts: &[u64], arrivals: &[u64], warmup: u64) -> Vec<u64> {
    starts
        .iter()
        .zip(arrivals)
        .skip(warmup as usize)
        .map(|(&s, &a)| a.saturating_sub(s))
        .collect()
}

/// Messages the peer must have room for.
pub fn capacity(config: &Config, settings: &Settings) -> u64 {
    settings.warmup
        + settings.count
        + 1
        + match config.pattern {
            Pattern::Burst { n } => 2 * n,
            _ => 0,
        }
}

/// Settings rounded to whole bursts, so that every burst is acknowledged.
pub fn effective_settings(config: &Config, settings: &Settings) -> Settings {
    let mut s = settings.clone();
    if let Pattern::Burst { n } = config.pattern {
        s.warmup = s.warmup.div_ceil(n) * n;
        s.count = s.count.div_ceil(n) * n;
    }
    s
}

/// How D-Bus carries `pattern`: a round trip as method calls answered by returns, one-way
/// messages as calls that expect no reply.
pub fn dbus_calls(pattern: &Pattern) -> Calls {
    if pattern.one_way() {
        Calls::NoReply
    } else {
        Calls::WithReply
    }
}

/// Runs configurations; keeps a D-Bus daemon between them once one is needed.
pub struct Lab {
    settings: Settings,
    cancel: Cancel,
    peer_exe: Option<PathBuf>,
    bus: Option<Bus>,
}

impl Lab {
    /// A lab; `peer_exe` is a `latscope` binary for process peers.
    pub fn new(settings: Settings, cancel: Cancel, peer_exe: Option<PathBuf>) -> Self {
        Lab {
            settings,
            cancel,
            peer_exe,
            bus: None,
        }
    }

    /// The settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Starts the D-Bus daemon now (to learn early whether D-Bus can run here).
    pub fn start_bus(&mut self) -> io::Result<()> {
        if self.bus.is_none() {
            self.bus = Some(Bus::start()?);
        }
        Ok(())
    }

    /// Runs one configuration.
    pub fn run(&mut self, config: &Config) -> Result<Outcome, RunError> {
        validate(config, &self.settings)?;
        let settings = effective_settings(config, &self.settings);
        let setup = |source| RunError::Setup {
            config: *config,
            source,
        };
        let record = Arc::new(Record::new(capacity(config, &settings)).map_err(setup)?);
        let segments = match config.pattern {
            Pattern::Segments { k } => {
                Some(Arc::new(Mapping::new(k * config.payload).map_err(setup)?))
            }
            _ => None,
        };
        if config.transport == Transport::Inproc {
            return Ok(self.inproc(config, &settings, &record, segments.as_deref()));
        }
        let broker_pid = if config.transport == Transport::Dbus {
            self.start_bus().map_err(setup)?;
            self.bus.as_ref().map(Bus::pid)
        } else {
            None
        };
        let (mut client, handle) = self
            .connect(config, &settings, &record, segments.clone())
            .map_err(setup)?;
        client.watch_peer(handle.liveness());
        let broker = std::cell::RefCell::new(Vec::new());
        let usage = || {
            if let Some(pid) = broker_pid {
                broker
                    .borrow_mut()
                    .push(usage::of_process(pid).unwrap_or_default());
            }
            usage::current(Scope::Process)
        };
        let run = Client {
            ep: client.as_mut(),
            config: *config,
            settings: &settings,
            clock: &Monotonic,
            segments: segments.as_deref(),
            cancel: &self.cancel,
            usage: &usage,
        }
        .run();
        drop(client);
        let peer_error = handle.finish();
        let snaps = broker.borrow();
        let broker = (snaps.len() >= 2).then(|| snaps[snaps.len() - 1].since(&snaps[0]));
        let peer_usage = record.usage();
        let mut client_usage = run.usage;
        if config.peer == Peer::Thread
            && let Some(p) = peer_usage
        {
            client_usage = client_usage.since(&p);
        }
        let peer_error = match (peer_error, record.error()) {
            (Some(how), Some(why)) => Some(format!("{how}: {why}")),
            (how, why) => how.or(why),
        };
        Ok(outcome(
            config,
            &settings,
            run,
            &record,
            client_usage,
            peer_usage,
            broker,
            peer_error,
        ))
    }

    fn inproc(
        &self,
        config: &Config,
        settings: &Settings,
        record: &Record,
        segments: Option<&Mapping>,
    ) -> Outcome {
        let clock = Monotonic;
        let no_usage = Usage::default;
        let logic = PeerLogic::new(*config, settings, record, segments, &no_usage);
        let mut ep = InprocEndpoint::new(logic, &clock);
        let usage = || usage::current(Scope::Thread);
        let run = Client {
            ep: &mut ep,
            config: *config,
            settings,
            clock: &clock,
            segments,
            cancel: &self.cancel,
            usage: &usage,
        }
        .run();
        let client = run.usage;
        outcome(
            config,
            settings,
            run,
            record,
            client,
            None,
            None,
            record.error(),
        )
    }

    /// The client's endpoint, with the peer started on the other.
    fn connect(
        &self,
        config: &Config,
        settings: &Settings,
        record: &Arc<Record>,
        segments: Option<Arc<Mapping>>,
    ) -> io::Result<(Box<dyn Endpoint + Send>, PeerHandle)> {
        if config.transport == Transport::Dbus {
            return self.connect_dbus(config, settings, record, segments);
        }
        let (client, peer): (Box<dyn Endpoint + Send>, Box<dyn Endpoint + Send>) =
            match config.transport {
                Transport::Channel => {
                    let (a, b) = ChannelEndpoint::pair();
                    (Box::new(a), Box::new(b))
                }
                transport => {
                    if let Some(wake) = ring_wake(transport) {
                        let (a, b) = ShmEndpoint::pair(ring_shape(settings), wake)?;
                        (Box::new(a), Box::new(b))
                    } else {
                        let kind = fd_kind(transport).ok_or_else(|| {
                            io::Error::other(format!("{} has no endpoint pair", transport.name()))
                        })?;
                        let (a, b) = FdEndpoint::pair(kind)?;
                        (Box::new(a), Box::new(b))
                    }
                }
            };
        match config.peer {
            Peer::Process => {
                let handle =
                    self.exec_peer(config, settings, record, segments.as_deref(), &*peer)?;
                // The program has its copies: the client sees the end of the stream when it
                // ends.
                drop(peer);
                Ok((client, handle))
            }
            _ => {
                let handle = spawn_peer_thread(peer, config, settings, record, segments)?;
                Ok((client, handle))
            }
        }
    }

    fn connect_dbus(
        &self,
        config: &Config,
        settings: &Settings,
        record: &Arc<Record>,
        segments: Option<Arc<Mapping>>,
    ) -> io::Result<(Box<dyn Endpoint + Send>, PeerHandle)> {
        let address = self
            .bus
            .as_ref()
            .map(|b| b.address().to_string())
            .ok_or_else(|| io::Error::other("no bus"))?;
        let mut handle = None;
        let calls = dbus_calls(&config.pattern);
        let client = dbus::client(&address, calls, |client_name| {
            let h = match config.peer {
                Peer::Process => self.exec_dbus_peer(
                    &address,
                    client_name,
                    config,
                    settings,
                    record,
                    segments.as_deref(),
                )?,
                _ => {
                    let ep = dbus::peer(&address, client_name, calls)?;
                    spawn_peer_thread(Box::new(ep), config, settings, record, segments)?
                }
            };
            let alive = h.liveness();
            handle = Some(h);
            Ok(alive)
        });
        let handle = handle.ok_or_else(|| io::Error::other("the D-Bus peer was not started"))?;
        match client {
            Ok(ep) => Ok((Box::new(ep), handle)),
            Err(e) => {
                let detail = handle.finish();
                Err(io::Error::new(
                    e.kind(),
                    match detail {
                        Some(d) => format!("{e} ({d})"),
                        None => e.to_string(),
                    },
                ))
            }
        }
    }

    fn exec_dbus_peer(
        &self,
        address: &str,
        client: &str,
        config: &Config,
        settings: &Settings,
        record: &Record,
        segments: Option<&Mapping>,
    ) -> io::Result<PeerHandle> {
        let exe = self.exe("a D-Bus process peer needs the latscope binary")?;
        let spec = PeerSpec {
            address: address.to_string(),
            client: client.to_string(),
            config: *config,
            warmup: settings.warmup,
            verify: settings.verify,
            capacity: record.capacity(),
        };
        let mut fds = vec![(record.fd().as_fd(), RECORD_FD)];
        fds.extend(segments.map(|m| (m.fd().as_fd(), SEGMENTS_FD)));
        // No ready signal: the client waits for the peer on the bus.
        peer::start_process(exe, &spec.to_args(), &fds, false)
    }

    /// Starts the peer of a descriptor or shared-memory transport as a program, handed `ep`'s
    /// descriptors.
    fn exec_peer(
        &self,
        config: &Config,
        settings: &Settings,
        record: &Record,
        segments: Option<&Mapping>,
        ep: &dyn Endpoint,
    ) -> io::Result<PeerHandle> {
        let exe = self.exe("a process peer needs the latscope binary")?;
        let shape = ring_shape(settings);
        let spec = EndpointPeerSpec {
            config: *config,
            warmup: settings.warmup,
            verify: settings.verify,
            capacity: record.capacity(),
            slots: shape.slots,
            slot_bytes: shape.slot_bytes,
        };
        let mut fds = vec![(record.fd().as_fd(), RECORD_FD)];
        fds.extend(segments.map(|m| (m.fd().as_fd(), SEGMENTS_FD)));
        fds.extend(ep.descriptors().into_iter().zip(ENDPOINT_FDS));
        peer::start_process(exe, &spec.to_args(), &fds, true)
    }

    /// The latscope binary a peer program runs, or why there is none.
    fn exe(&self, why: &str) -> io::Result<&Path> {
        self.peer_exe
            .as_deref()
            .ok_or_else(|| io::Error::new(io::ErrorKind::Unsupported, why.to_string()))
    }
}

/// The rings of a shared-memory transport.
fn ring_shape(settings: &Settings) -> RingShape {
    RingShape {
        slots: settings.slots,
        slot_bytes: settings.slot_bytes(),
    }
}

/// How a shared-memory transport wakes its reader; `None` for the others.
fn ring_wake(transport: Transport) -> Option<Wake> {
    match transport {
        Transport::ShmFutex => Some(Wake::Futex),
        Transport::ShmSpin => Some(Wake::Spin),
        _ => None,
    }
}

/// The descriptor pair of a descriptor transport; `None` for the others.
fn fd_kind(transport: Transport) -> Option<FdKind> {
    match transport {
        Transport::Pipe => Some(FdKind::Pipe),
        Transport::UnixStream => Some(FdKind::UnixStream),
        Transport::UnixSeqpacket => Some(FdKind::UnixSeqpacket),
        Transport::Tcp => Some(FdKind::Tcp),
        _ => None,
    }
}

/// Starts the peer of `config` on a thread, serving `ep`.
fn spawn_peer_thread(
    ep: Box<dyn Endpoint + Send>,
    config: &Config,
    settings: &Settings,
    record: &Arc<Record>,
    segments: Option<Arc<Mapping>>,
) -> io::Result<PeerHandle> {
    let config = *config;
    let settings = settings.clone();
    let record = Arc::clone(record);
    peer::spawn_thread(ep, move |ep| {
        pattern::run_peer(
            ep,
            config,
            &settings,
            &record,
            segments.as_deref(),
            Scope::Thread,
        )
    })
}

#[allow(clippy::too_many_arguments)]
fn outcome(
    config: &Config,
    settings: &Settings,
    run: ClientRun,
    record: &Record,
    client: Usage,
    peer: Option<Usage>,
    broker: Option<Usage>,
    peer_error: Option<String>,
) -> Outcome {
    let received = record.received();
    let mut latency = Distribution::default();
    let mut uncorrected = None;
    let start = run.measured_start.unwrap_or(0);
    let mut end = run.measured_end;
    let one_way = config.pattern.one_way();
    let mut recorder = Recorder::new(
        settings.max_spans,
        &[if one_way { "one_way" } else { "round_trip" }],
    );
    if one_way {
        let arrivals = record.arrivals(received.min(run.sent));
        let latencies = one_way_latencies(&run.samples, &arrivals, settings.warmup);
        for l in &latencies {
            latency.record(*l);
        }
        if settings.max_spans > 0 {
            let starts = run.samples.iter().skip(settings.warmup as usize);
            for (&s, &l) in starts.zip(&latencies) {
                recorder.sample(0, s, l);
            }
        }
        end = arrivals.last().copied().unwrap_or(end).max(end);
    } else {
        run.samples.iter().for_each(|&l| latency.record(l));
        for (&s, &l) in run.starts.iter().zip(&run.samples) {
            recorder.sample(0, s, l);
        }
        if matches!(config.pattern, Pattern::OpenLoop { .. }) {
            let mut u = Distribution::default();
            run.uncorrected.iter().for_each(|&l| u.record(l));
            uncorrected = Some(u);
        }
    }
    Outcome {
        config: *config,
        latency,
        uncorrected,
        elapsed_ns: end.saturating_sub(start),
        sent: run.sent,
        received,
        client,
        peer,
        broker,
        stop: run.stop.unwrap_or(Stop::Done),
        peer_error,
        kept: recorder.finish(),
    }
}

/// The body of `latscope lab ipc-peer ARGS`: a peer program started by the lab, of D-Bus
/// ([`PeerSpec`]) or of a transport handed over as descriptors ([`EndpointPeerSpec`]).
pub fn peer_main(args: &[String]) -> io::Result<()> {
    match EndpointPeerSpec::from_args(args) {
        Some(spec) => endpoint_peer(&spec),
        None => dbus_peer(args),
    }
}

/// The record's and the segments' memfds (segments pattern), as the lab placed them.
fn placed_memory(capacity: u64, config: &Config) -> io::Result<(Record, Option<Mapping>)> {
    // SAFETY: the lab passes the record's memfd as descriptor RECORD_FD, owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(RECORD_FD) };
    let record = Record::open(fd, capacity)?;
    let segments = match config.pattern {
        Pattern::Segments { k } => {
            // SAFETY: the lab passes the segments' memfd as SEGMENTS_FD for this pattern.
            let fd = unsafe { OwnedFd::from_raw_fd(SEGMENTS_FD) };
            Some(Mapping::map(fd, k * config.payload)?)
        }
        _ => None,
    };
    Ok((record, segments))
}

fn dbus_peer(args: &[String]) -> io::Result<()> {
    let spec = PeerSpec::from_args(args)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "bad ipc-peer arguments"))?;
    let (record, segments) = placed_memory(spec.capacity, &spec.config)?;
    let settings = Settings {
        warmup: spec.warmup,
        verify: spec.verify,
        ..Settings::default()
    };
    let ep = dbus::peer(
        &spec.address,
        &spec.client,
        dbus_calls(&spec.config.pattern),
    )?;
    pattern::run_peer(
        Box::new(ep),
        spec.config,
        &settings,
        &record,
        segments.as_ref(),
        Scope::Process,
    )
}

fn endpoint_peer(spec: &EndpointPeerSpec) -> io::Result<()> {
    let (record, segments) = placed_memory(spec.capacity, &spec.config)?;
    let settings = Settings {
        warmup: spec.warmup,
        verify: spec.verify,
        ..Settings::default()
    };
    let transport = spec.config.transport;
    let [first, second] = ENDPOINT_FDS;
    let endpoint: Box<dyn Endpoint + Send> = if let Some(wake) = ring_wake(transport) {
        // SAFETY: for a ring the lab (`exec_peer`) passes the mapping's memfd as the first of
        // ENDPOINT_FDS, owned by nobody else; taken once, here.
        let fd = unsafe { OwnedFd::from_raw_fd(first) };
        let shape = RingShape {
            slots: spec.slots,
            slot_bytes: spec.slot_bytes,
        };
        Box::new(ShmEndpoint::peer_of(fd, shape, wake)?)
    } else if let Some(kind) = fd_kind(transport) {
        // SAFETY: for a descriptor transport the lab passes the read and the write descriptor
        // (of a socket: two of it) as ENDPOINT_FDS, owned by nobody else; taken once, here.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(first), OwnedFd::from_raw_fd(second)) };
        Box::new(FdEndpoint::from_fds(kind, read, write))
    } else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "ipc-peer: {} cannot be handed to a program",
                transport.name()
            ),
        ));
    };
    // SAFETY: the lab passes an endpoint peer the ready pipe's write end as READY_FD, owned by
    // nobody else; taken once, here.
    let ready = unsafe { File::from_raw_fd(READY_FD) };
    peer::say_ready(ready)?;
    pattern::run_peer(
        endpoint,
        spec.config,
        &settings,
        &record,
        segments.as_ref(),
        Scope::Process,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_way_latencies_pair_starts_and_arrivals_by_sequence_number() {
        let starts = [0, 10, 20, 30, 40];
        let arrivals = [5, 17, 29, 100];
        // warm-up 1: messages 1..=3 (message 4 never arrived).
        assert_eq!(one_way_latencies(&starts, &arrivals, 1), [7, 9, 70]);
    }

    #[test]
    fn dbus_answers_round_trips_with_method_returns_and_sends_the_rest_without_reply() {
        let calls = |p: Pattern| dbus_calls(&p);
        assert_eq!(calls(Pattern::PingPong), Calls::WithReply);
        assert_eq!(calls(Pattern::OpenLoop { rate: 1000 }), Calls::WithReply);
        assert_eq!(calls(Pattern::Stream { flush_bytes: 4096 }), Calls::NoReply);
        assert_eq!(calls(Pattern::Burst { n: 8 }), Calls::NoReply);
        assert_eq!(calls(Pattern::Segments { k: 4 }), Calls::NoReply);
    }

    #[test]
    fn bursts_are_rounded_up_to_whole_bursts() {
        let config = Config {
            transport: Transport::Pipe,
            peer: Peer::Thread,
            pattern: Pattern::Burst { n: 8 },
            payload: 8,
        };
        let s = effective_settings(
            &config,
            &Settings {
                warmup: 10,
                count: 100,
                ..Settings::default()
            },
        );
        assert_eq!((s.warmup, s.count), (16, 104));
    }
}
