//! The IPC lab: what each transport costs per message, measured side by side as distributions.
//!
//! Engineers choose between an in-process call and D-Bus, a socket and shared memory, a 4 KiB
//! and a 16 KiB flush buffer, mostly from folklore; the usual suites print an average. Here every
//! message is timed with one `CLOCK_MONOTONIC` (its cost printed), each configuration gets the
//! full histogram, throughput is reported apart from latency, and the CPU time and context
//! switches of both sides (and of a broker) are counted per message.
//!
//! * [`transport`]: how bytes move (one file per transport, behind [`transport::Endpoint`]);
//! * [`pattern`]: what is sent when, and what latency means for it (client drivers and the
//!   peer's reactions);
//! * [`peer`]: where the peer runs (a thread, a forked process, a fresh program for D-Bus) and
//!   the shared region where it records what it received;
//! * [`run`]: one configuration end to end; [`report`] renders the results.

pub mod clock;
pub mod pattern;
pub mod peer;
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

impl Pattern {
    /// The pattern's name without its parameter.
    pub fn kind(&self) -> &'static str {
        match self {
            Pattern::PingPong => "ping-pong",
            Pattern::Stream { .. } => "stream",
            Pattern::Burst { .. } => "burst",
            Pattern::Segments { .. } => "segments",
            Pattern::OpenLoop { .. } => "open-loop",
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
        match self {
            Pattern::PingPong => write!(f, "ping-pong"),
            Pattern::Stream { flush_bytes } => write!(f, "stream/flush {}", bytes(*flush_bytes)),
            Pattern::Burst { n } => write!(f, "burst/{n}"),
            Pattern::Segments { k } => write!(f, "segments/{k}"),
            Pattern::OpenLoop { rate } => write!(f, "open-loop/{rate}/s"),
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
        let unit = pattern::largest_unit(config);
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
