//! The Wayland lab: a native client that times its own protocol exchanges on a real compositor.
//!
//! Why: `latscope wayland` reads WAYLAND_DEBUG logs of clients someone else wrote, with
//! microsecond stamps taken after the fact. To ask "how does my compositor treat a client that
//! double- vs triple-buffers, at this size, with or without frame callbacks?" a user needs a
//! client that does exactly that. This one does, and stamps every request and event itself with
//! `CLOCK_MONOTONIC` in nanoseconds:
//!
//! * `round-trip`: `wl_display.sync` → `wl_callback.done`, the protocol floor;
//! * `frames`: an xdg-toplevel drawn from `wl_shm` buffers (a memfd pool of `--buffers`
//!   buffers): commit → `wl_buffer.release`, `wl_surface.frame` → `done`, commit →
//!   `wp_presentation_feedback.presented` (when offered), and how long the client waited for a
//!   free buffer — "the compositor holds buffers too long" shows up there;
//! * `outputs`: the screen-configuration query (bind every `wl_output` and
//!   `zxdg_output_manager_v1`, collect geometry, modes, scale and name until `done`), in
//!   process or answered by a helper process over a private D-Bus (the IPC lab's bus).
//!
//! The client uses libwayland (loaded at run time), so `WAYLAND_DEBUG=client` prints the
//! standard log that `latscope wayland` reads: the two measurements can be checked against each
//! other. (wayland-rs's pure-Rust backend prints its own, different format.)
//!
//! Modules: [`compositor`] finds or starts the compositor (a private weston headless), [`client`]
//! is the connection and its event loop, [`frames`], [`roundtrip`] and [`outputs`] are the
//! patterns, [`run`] runs one configuration and [`report`] builds the `lab-wayland` document
//! and renders it. What a configuration measured, the [`Outcome`] that the patterns fill, `run`
//! returns and `report` reads, is here, so that none of them imports another for it.

pub mod client;
pub mod compositor;
pub mod frames;
pub mod outputs;
pub mod report;
pub mod roundtrip;
pub mod run;

use std::fmt;

use crate::doc::lab::StopDoc;
use crate::doc::lab_wayland::{OutputDoc, PresentationDoc};

/// Why the lab could not run, or stopped.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// Nothing to talk to and nothing to start.
    #[error(
        "no Wayland compositor: neither --display nor $WAYLAND_DISPLAY is set, and weston is not installed to start a private one (Debian: apt-get install {package})",
        package = compositor::PACKAGE
    )]
    NoCompositor,
    /// The compositor, the library or a helper could not be set up.
    #[error("{0}")]
    Setup(String),
    /// The compositor sent a protocol error.
    #[error(
        "protocol error from the compositor: {interface}#{id}: error {code}{}",
        said(message)
    )]
    Protocol {
        /// the object's interface
        interface: String,
        /// the object's id
        id: u32,
        /// the interface's error code
        code: u32,
        /// what the compositor said
        message: String,
    },
    /// The connection broke: the compositor exited or closed it.
    #[error("the compositor closed the connection (did it exit?): {0}")]
    Gone(String),
    /// The socket closed the connection before answering the first round trip.
    #[error(
        "the socket closed the connection before answering the first wl_display.sync: not a Wayland compositor? ({0})"
    )]
    NotCompositor(String),
    /// A global the pattern needs is not offered.
    #[error("the compositor does not offer {0}")]
    Missing(String),
    /// Nothing happened for too long.
    #[error("{0}")]
    Stalled(String),
}

/// A protocol error's message. libwayland (the `system` backend) keeps it from the error it
/// returns and prints it itself, on the line latscope marks as libwayland's.
fn said(message: &str) -> String {
    if message.is_empty() {
        " (its message is on libwayland's line above)".to_string()
    } else {
        format!(": {message}")
    }
}

/// How frames are paced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// the next frame is drawn when the last frame callback is done (what toolkits do)
    FrameCallback,
    /// as fast as buffers come back
    FreeRun,
    /// at a fixed rate, frames per second
    Rate(u32),
}

impl fmt::Display for Pace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pace::FrameCallback => f.write_str("frame-callback"),
            Pace::FreeRun => f.write_str("free-run"),
            Pace::Rate(hz) => write!(f, "rate={hz}"),
        }
    }
}

impl Pace {
    /// `frame-callback`, `free-run` or `rate=HZ` (HZ from 1 to 10000).
    pub fn parse(text: &str) -> Option<Pace> {
        match text {
            "frame-callback" => Some(Pace::FrameCallback),
            "free-run" => Some(Pace::FreeRun),
            _ => {
                let hz: u32 = text.strip_prefix("rate=")?.parse().ok()?;
                (1..=10_000).contains(&hz).then_some(Pace::Rate(hz))
            }
        }
    }
}

/// How much of a buffer is redrawn and damaged each frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Damage {
    /// the whole buffer
    Full,
    /// a strip of an eighth of its height that moves down each frame
    Partial,
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Damage::Full => "full",
            Damage::Partial => "partial",
        })
    }
}

impl Damage {
    /// `full` or `partial`.
    pub fn parse(text: &str) -> Option<Damage> {
        match text {
            "full" => Some(Damage::Full),
            "partial" => Some(Damage::Partial),
            _ => None,
        }
    }
}

/// Where the output query runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// in latscope's own process
    Inproc,
    /// in a helper process, asked over a private D-Bus
    Dbus,
}

impl fmt::Display for Via {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Via::Inproc => "inproc",
            Via::Dbus => "dbus",
        })
    }
}

impl Via {
    /// `inproc` or `dbus`.
    pub fn parse(text: &str) -> Option<Via> {
        match text {
            "inproc" => Some(Via::Inproc),
            "dbus" => Some(Via::Dbus),
            _ => None,
        }
    }
}

/// The parameters of one `frames` configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameParams {
    /// buffers in the pool the client cycles through
    pub buffers: u32,
    /// width in pixels
    pub width: u32,
    /// height in pixels
    pub height: u32,
    /// frames to commit
    pub frames: u64,
    /// pacing
    pub pace: Pace,
    /// damage
    pub damage: Damage,
}

/// One configuration of the lab.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Config {
    /// `wl_display.sync` round trips
    RoundTrip {
        /// round trips
        count: u64,
    },
    /// frames drawn from shared-memory buffers
    Frames(FrameParams),
    /// the output query
    Outputs {
        /// queries
        count: u64,
        /// where it runs
        via: Via,
    },
}

impl fmt::Display for Config {
    /// The row label: the pattern and its parameters (`frames buffers=2 size=256x256 ...`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Config::RoundTrip { .. } => f.write_str("round-trip"),
            Config::Frames(p) => write!(
                f,
                "frames buffers={} size={}x{} pace={} damage={}",
                p.buffers, p.width, p.height, p.pace, p.damage
            ),
            Config::Outputs { via, .. } => write!(f, "outputs via={via}"),
        }
    }
}

impl Config {
    /// The pattern's name.
    pub fn pattern(&self) -> &'static str {
        match self {
            Config::RoundTrip { .. } => "round-trip",
            Config::Frames(_) => "frames",
            Config::Outputs { .. } => "outputs",
        }
    }
}

/// The pattern names, in the order of the issue.
pub const PATTERNS: [&str; 3] = ["round-trip", "frames", "outputs"];

/// What one configuration measured (every time in ns).
#[derive(Debug, Clone)]
pub struct Outcome {
    /// the configuration
    pub config: Config,
    /// each latency's samples, by name, in the order first measured
    pub metrics: Vec<(&'static str, Vec<u64>)>,
    /// each sample's start (`CLOCK_MONOTONIC`), beside `metrics`
    pub starts: Vec<Vec<u64>>,
    /// frames: commit times
    pub commits: Vec<u64>,
    /// frames: buffers held right after each commit
    pub in_flight: Vec<u64>,
    /// frames: what wp_presentation said
    pub presentation: Option<PresentationDoc>,
    /// outputs: the description returned
    pub outputs: Option<Vec<OutputDoc>>,
    /// what was skipped or worth knowing
    pub notes: Vec<String>,
    /// wall time
    pub elapsed_ns: u64,
    /// why it stopped
    pub stop: StopDoc,
    /// what failed
    pub error: Option<String>,
    /// the connection broke: later configurations cannot run
    pub compositor_gone: bool,
}

impl Outcome {
    fn new(config: Config) -> Outcome {
        Outcome {
            config,
            metrics: Vec::new(),
            starts: Vec::new(),
            commits: Vec::new(),
            in_flight: Vec::new(),
            presentation: None,
            outputs: None,
            notes: Vec::new(),
            elapsed_ns: 0,
            stop: StopDoc::Done,
            error: None,
            compositor_gone: false,
        }
    }

    /// The index of metric `name`, added empty when new.
    pub fn metric(&mut self, name: &'static str) -> usize {
        match self.metrics.iter().position(|(n, _)| *n == name) {
            Some(i) => i,
            None => {
                self.metrics.push((name, Vec::new()));
                self.starts.push(Vec::new());
                self.metrics.len() - 1
            }
        }
    }

    /// One sample of metric `metric` (an index from [`Outcome::metric`]).
    pub fn sample(&mut self, metric: usize, start_ns: u64, latency_ns: u64) {
        self.metrics[metric].1.push(latency_ns);
        self.starts[metric].push(start_ns);
    }

    /// The failure, if it failed.
    pub fn failed(&self) -> Option<&str> {
        self.error.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_protocol_error_without_its_message_says_where_the_message_is() {
        let error = |message: &str| LabError::Protocol {
            interface: "wl_registry".into(),
            id: 2,
            code: 0,
            message: message.into(),
        };
        assert_eq!(
            error("").to_string(),
            "protocol error from the compositor: wl_registry#2: error 0 (its message is on libwayland's line above)"
        );
        assert_eq!(
            error("bad").to_string(),
            "protocol error from the compositor: wl_registry#2: error 0: bad"
        );
    }

    #[test]
    fn paces_parse_and_print_the_same_words() {
        for text in ["frame-callback", "free-run", "rate=120"] {
            assert_eq!(Pace::parse(text).unwrap().to_string(), text);
        }
        for bad in ["rate=0", "rate=", "rate=x", "vsync", "rate=100000"] {
            assert_eq!(Pace::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_frames_label_names_every_parameter() {
        let c = Config::Frames(FrameParams {
            buffers: 2,
            width: 64,
            height: 32,
            frames: 10,
            pace: Pace::FreeRun,
            damage: Damage::Partial,
        });
        assert_eq!(
            c.to_string(),
            "frames buffers=2 size=64x32 pace=free-run damage=partial"
        );
    }
}
