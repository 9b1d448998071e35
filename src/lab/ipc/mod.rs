//! The IPC lab: what each transport costs per message, measured side by side as distributions.
//!
//! Engineers choose between an in-process call and D-Bus, a socket and shared memory, a 4 KiB
//! and a 16 KiB flush buffer, mostly from folklore; the usual suites print an average. Here every
//! message is timed with one `CLOCK_MONOTONIC` (its cost printed), each configuration gets the
//! full histogram, throughput is reported apart from latency, and the CPU time and context
//! switches of both sides (and of a broker) are counted per message.
//!
//! * [`transport`]: how bytes move (one file per transport, behind [`transport::Endpoint`]);
//!   transports know nothing of patterns: what a transport must do differently for one (D-Bus
//!   method calls or one-way calls) is a plain parameter chosen by [`run`];
//! * [`pattern`]: what is sent when, and what latency means for it (client drivers and the
//!   peer's reactions);
//! * [`peer`]: where the peer runs (a thread, a forked process, a fresh program for D-Bus),
//!   whatever it runs;
//! * [`record`]: the shared region where the peer records what it received, apart from both
//!   [`pattern`] (which writes it) and [`peer`], so that neither needs the other;
//! * [`run`]: one configuration end to end, the one module that ties the others together;
//!   [`report`] renders the results.
//!
//! The modules import one another without a cycle, because the two modules of a cycle can
//! only be understood, tested and changed together: this module holds the vocabulary
//! ([`Config`], [`Pattern`], [`PatternKind`] with the one list of pattern names) and imports
//! only [`wire`], which imports nothing; [`run`] is the only module that imports both
//! [`pattern`] and [`peer`].

pub mod clock;
pub mod pattern;
pub mod peer;
pub mod record;
pub mod report;
pub mod run;
pub mod shared;
pub mod transport;
pub mod usage;
pub mod wire;

use std::fmt;

/// How the bytes move.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Transport {
    /// a direct function call in the same thread: the floor
    Inproc,
    /// two threads over std channels
    Channel,
    /// two pipes
    Pipe,
    /// a Unix stream socket pair
    UnixStream,
    /// a Unix seqpacket socket pair
    UnixSeqpacket,
    /// TCP on 127.0.0.1 with TCP_NODELAY
    Tcp,
    /// a shared-memory ring woken by futex
    ShmFutex,
    /// a shared-memory ring polled by spinning
    ShmSpin,
    /// D-Bus method calls through a private dbus-daemon
    Dbus,
}

impl Transport {
    /// Every transport, in the order of the issue.
    pub const ALL: [Transport; 9] = [
        Transport::Inproc,
        Transport::Channel,
        Transport::Pipe,
        Transport::UnixStream,
        Transport::UnixSeqpacket,
        Transport::Tcp,
        Transport::ShmFutex,
        Transport::ShmSpin,
        Transport::Dbus,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Inproc => "inproc",
            Transport::Channel => "channel",
            Transport::Pipe => "pipe",
            Transport::UnixStream => "unix-stream",
            Transport::UnixSeqpacket => "unix-seqpacket",
            Transport::Tcp => "tcp",
            Transport::ShmFutex => "shm-futex",
            Transport::ShmSpin => "shm-spin",
            Transport::Dbus => "dbus",
        }
    }

    /// The transport of a command-line name.
    pub fn parse(name: &str) -> Option<Transport> {
        Transport::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Whether its peer can only be a thread of latscope (a channel cannot cross processes).
    pub fn threads_only(self) -> bool {
        self == Transport::Channel
    }
}

/// Where the peer runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Peer {
    /// no peer: the in-process call
    None,
    /// a second thread of latscope
    Thread,
    /// a second process
    Process,
}

impl Peer {
    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Peer::None => "none",
            Peer::Thread => "thread",
            Peer::Process => "process",
        }
    }
}

/// What is sent when.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pattern {
    /// one message, its echo, the next: latency is the round trip
    PingPong,
    /// messages one way as fast as possible, buffered by the writer and flushed once
    /// `flush_bytes` are buffered (0: every message is written at once)
    Stream {
        /// the writer's buffer (Xlib/XCB: 4096; old Xlib: 16384)
        flush_bytes: usize,
    },
    /// `n` messages, then one acknowledgement from the peer
    Burst {
        /// messages per burst
        n: u64,
    },
    /// each payload in one of `k` shared-memory segments, announced by a small message;
    /// once all `k` are used, a sync (round trip) before reusing them (Java2D's mask upload)
    Segments {
        /// segments
        k: usize,
    },
    /// ping-pong at a fixed rate; latency from each message's intended send time
    OpenLoop {
        /// messages per second
        rate: u64,
    },
}

/// A pattern without its parameter. Its names are the one list of pattern names: `--pattern`,
/// the D-Bus peer program's arguments, [`Pattern`]'s `Display` and [`Pattern::kind`] (the
/// JSON) all take them from here, so a pattern cannot be spelled two ways.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PatternKind {
    /// [`Pattern::PingPong`]
    PingPong,
    /// [`Pattern::Stream`]
    Stream,
    /// [`Pattern::Burst`]
    Burst,
    /// [`Pattern::Segments`]
    Segments,
    /// [`Pattern::OpenLoop`]
    OpenLoop,
}

impl PatternKind {
    /// Every kind, in the order of the issue (and of a run's matrix).
    pub const ALL: [PatternKind; 5] = [
        PatternKind::PingPong,
        PatternKind::Stream,
        PatternKind::Burst,
        PatternKind::Segments,
        PatternKind::OpenLoop,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            PatternKind::PingPong => "ping-pong",
            PatternKind::Stream => "stream",
            PatternKind::Burst => "burst",
            PatternKind::Segments => "segments",
            PatternKind::OpenLoop => "open-loop",
        }
    }

    /// The kind of a command-line name.
    pub fn from_name(name: &str) -> Option<PatternKind> {
        PatternKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The kind of `pattern`.
    pub fn of(pattern: &Pattern) -> PatternKind {
        match pattern {
            Pattern::PingPong => PatternKind::PingPong,
            Pattern::Stream { .. } => PatternKind::Stream,
            Pattern::Burst { .. } => PatternKind::Burst,
            Pattern::Segments { .. } => PatternKind::Segments,
            Pattern::OpenLoop { .. } => PatternKind::OpenLoop,
        }
    }

    /// The pattern of this kind with parameter `param`, as [`Pattern::param`] gives it back
    /// (ping-pong has none and ignores it).
    pub fn with_param(self, param: u64) -> Pattern {
        match self {
            PatternKind::PingPong => Pattern::PingPong,
            PatternKind::Stream => Pattern::Stream {
                flush_bytes: param as usize,
            },
            PatternKind::Burst => Pattern::Burst { n: param },
            PatternKind::Segments => Pattern::Segments { k: param as usize },
            PatternKind::OpenLoop => Pattern::OpenLoop { rate: param },
        }
    }
}

impl fmt::Display for PatternKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Pattern {
    /// The pattern's name without its parameter ([`PatternKind::name`] of its kind).
    pub fn kind(&self) -> &'static str {
        PatternKind::of(self).name()
    }

    /// Its parameter as a number (flush bytes, burst length, segments, rate; 0 for ping-pong),
    /// which [`PatternKind::with_param`] turns back into the pattern.
    pub fn param(&self) -> u64 {
        match *self {
            Pattern::PingPong => 0,
            Pattern::Stream { flush_bytes } => flush_bytes as u64,
            Pattern::Burst { n } => n,
            Pattern::Segments { k } => k as u64,
            Pattern::OpenLoop { rate } => rate,
        }
    }

    /// Whether latency is one way (writer → peer) rather than a round trip.
    pub fn one_way(&self) -> bool {
        matches!(
            self,
            Pattern::Stream { .. } | Pattern::Burst { .. } | Pattern::Segments { .. }
        )
    }

    /// What the latency of this pattern measures, for reports.
    pub fn latency_meaning(&self) -> &'static str {
        match self {
            Pattern::PingPong => "round trip: send → echo received",
            Pattern::OpenLoop { .. } => {
                "round trip from the intended send time (coordinated omission corrected)"
            }
            _ => {
                "one way: the writer starts sending (incl. waiting for buffer, flush or sync) → the peer has the whole message"
            }
        }
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = self.kind();
        match self {
            Pattern::PingPong => f.write_str(kind),
            Pattern::Stream { flush_bytes } => write!(f, "{kind}/flush {}", bytes(*flush_bytes)),
            Pattern::Burst { n } => write!(f, "{kind}/{n}"),
            Pattern::Segments { k } => write!(f, "{kind}/{k}"),
            Pattern::OpenLoop { rate } => write!(f, "{kind}/{rate}/s"),
        }
    }
}

/// `1 KiB`, `64 KiB`, `8 B`: byte counts as people write them.
pub fn bytes(n: usize) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else if n >= 1024 && n.is_multiple_of(1024) {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} B")
    }
}

/// One configuration of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Config {
    /// how
    pub transport: Transport,
    /// where the peer runs
    pub peer: Peer,
    /// what is sent when
    pub pattern: Pattern,
    /// bytes per message
    pub payload: usize,
}

impl Config {
    /// The largest unit the client writes at once: a stream's whole buffer, a segments note,
    /// otherwise one message. Here rather than in [`pattern`] because [`validate`] needs it
    /// and this module imports no module that imports it.
    pub fn largest_unit(&self) -> usize {
        match self.pattern {
            Pattern::Stream { flush_bytes } => flush_bytes.max(self.payload),
            Pattern::Segments { .. } => wire::NOTE_BYTES,
            _ => self.payload,
        }
    }

    /// The largest unit the peer writes back: an echo, or an acknowledgement.
    pub fn reply_unit(&self) -> usize {
        match self.pattern {
            Pattern::PingPong | Pattern::OpenLoop { .. } => self.payload,
            _ => wire::ACK_BYTES,
        }
    }
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}) {} {}",
            self.transport.name(),
            self.peer.name(),
            self.pattern,
            bytes(self.payload)
        )
    }
}

/// Settings shared by every configuration of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// measured messages per configuration (at most)
    pub count: u64,
    /// messages before the measurement starts
    pub warmup: u64,
    /// stop measuring a configuration after this long, ns
    pub max_time_ns: u64,
    /// slots of a shared-memory ring
    pub slots: usize,
    /// bytes of a shared-memory ring (all slots)
    pub ring_bytes: usize,
    /// compare every byte of every message (otherwise the stamped header and last byte)
    pub verify: bool,
    /// individual messages to keep per configuration (`--max-spans`; 0: none, and no start
    /// times are taken)
    pub max_spans: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            count: 10_000,
            warmup: 200,
            max_time_ns: 500_000_000,
            slots: 16,
            ring_bytes: 1 << 20,
            verify: false,
            max_spans: 0,
        }
    }
}

impl Settings {
    /// Bytes a ring slot holds.
    pub fn slot_bytes(&self) -> usize {
        self.ring_bytes / self.slots.max(1)
    }
}

/// A configuration that cannot run as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// `--segments 0`, `--burst 0`, ...
    #[error("{0}")]
    Impossible(String),
}

/// Checks what can be known before running: sizes, counts, and whether units fit a ring slot.
pub fn validate(config: &Config, settings: &Settings) -> Result<(), ConfigError> {
    let bad = |m: String| Err(ConfigError::Impossible(m));
    if config.payload == 0 {
        return bad("a payload of 0 bytes carries nothing; use at least 1 byte".into());
    }
    match config.pattern {
        Pattern::Segments { k: 0 } => {
            return bad("--segments 0: at least one segment is needed to send anything".into());
        }
        Pattern::Burst { n: 0 } => {
            return bad("--burst 0: a burst must have at least one message".into());
        }
        Pattern::OpenLoop { rate: 0 } => {
            return bad("--rate 0: an open-loop rate must be at least 1 message/s".into());
        }
        _ => {}
    }
    if settings.slots == 0 {
        return bad("--slots 0: a ring needs at least one slot".into());
    }
    if matches!(config.transport, Transport::ShmFutex | Transport::ShmSpin) {
        let unit = config.largest_unit();
        if unit > settings.slot_bytes() {
            return bad(format!(
                "{}: a {} write unit is larger than a ring slot ({} ring / {} slots = {} per slot); raise --ring-bytes or lower --slots",
                config,
                bytes(unit),
                bytes(settings.ring_bytes),
                settings.slots,
                bytes(settings.slot_bytes())
            ));
        }
    }
    Ok(())
}

/// A size as people write it: `8`, `1KiB`, `64K`, `1MiB`, `4096B`.
pub fn parse_size(text: &str) -> Result<usize, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let n: usize = number
        .parse()
        .map_err(|_| format!("'{text}' is not a size (examples: 8, 1KiB, 64K, 1MiB)"))?;
    let scale = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" | "kb" => 1 << 10,
        "m" | "mib" | "mb" => 1 << 20,
        _ => {
            return Err(format!(
                "'{text}': unknown size unit '{unit}' (B, KiB, MiB)"
            ));
        }
    };
    n.checked_mul(scale)
        .ok_or_else(|| format!("'{text}' is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_units() {
        assert_eq!(parse_size("8"), Ok(8));
        assert_eq!(parse_size("1KiB"), Ok(1024));
        assert_eq!(parse_size("64K"), Ok(65536));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("3 parsecs").is_err());
    }

    fn config(transport: Transport, pattern: Pattern, payload: usize) -> Config {
        Config {
            transport,
            peer: Peer::Thread,
            pattern,
            payload,
        }
    }

    #[test]
    fn every_transport_name_parses_back() {
        for t in Transport::ALL {
            assert_eq!(Transport::parse(t.name()), Some(t));
        }
        assert_eq!(Transport::parse("carrier-pigeon"), None);
    }

    #[test]
    fn every_pattern_name_parses_back_to_its_kind() {
        for kind in PatternKind::ALL {
            assert_eq!(PatternKind::from_name(kind.name()), Some(kind));
        }
        assert_eq!(PatternKind::from_name("all"), None);
        assert_eq!(PatternKind::from_name("ping pong"), None);
    }

    #[test]
    fn the_five_pattern_names_are_distinct_and_spelled_as_on_the_command_line() {
        let names: Vec<&str> = PatternKind::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(
            names,
            ["ping-pong", "stream", "burst", "segments", "open-loop"]
        );
    }

    #[test]
    fn every_pattern_survives_its_kind_and_parameter() {
        let patterns = [
            Pattern::PingPong,
            Pattern::Stream { flush_bytes: 4096 },
            Pattern::Burst { n: 8 },
            Pattern::Segments { k: 3 },
            Pattern::OpenLoop { rate: 50_000 },
        ];
        for (p, kind) in patterns.into_iter().zip(PatternKind::ALL) {
            assert_eq!(PatternKind::of(&p), kind);
            assert_eq!(p.kind(), kind.name());
            assert_eq!(kind.with_param(p.param()), p);
        }
    }

    #[test]
    fn a_pattern_is_displayed_by_its_kind_and_parameter() {
        let shown = [
            Pattern::PingPong.to_string(),
            Pattern::Stream { flush_bytes: 4096 }.to_string(),
            Pattern::Burst { n: 8 }.to_string(),
            Pattern::Segments { k: 3 }.to_string(),
            Pattern::OpenLoop { rate: 1000 }.to_string(),
        ];
        assert_eq!(
            shown,
            [
                "ping-pong",
                "stream/flush 4 KiB",
                "burst/8",
                "segments/3",
                "open-loop/1000/s"
            ]
        );
    }

    #[test]
    fn zero_segments_are_refused_with_the_reason() {
        let e = validate(
            &config(Transport::Pipe, Pattern::Segments { k: 0 }, 8),
            &Settings::default(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("--segments 0"), "{e}");
    }

    #[test]
    fn a_payload_larger_than_a_ring_slot_is_refused() {
        let settings = Settings {
            ring_bytes: 64 * 1024,
            slots: 16,
            ..Settings::default()
        };
        let e = validate(
            &config(Transport::ShmFutex, Pattern::PingPong, 8192),
            &settings,
        )
        .unwrap_err();
        assert!(e.to_string().contains("4 KiB per slot"), "{e}");
        // The same payload fits a pipe.
        assert!(validate(&config(Transport::Pipe, Pattern::PingPong, 8192), &settings).is_ok());
    }

    #[test]
    fn byte_counts_are_written_in_binary_units() {
        assert_eq!(bytes(8), "8 B");
        assert_eq!(bytes(1024), "1 KiB");
        assert_eq!(bytes(65536), "64 KiB");
        assert_eq!(bytes(1000), "1000 B");
    }
}
