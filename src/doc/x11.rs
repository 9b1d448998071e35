//! The `lab-x11` document: one result per configuration of `latscope lab x11`, and the server
//! they ran on.

use serde::{Deserialize, Serialize};

use super::dist::{Latency, Nanoseconds};
use super::lab::{SideUsage, Skipped, StopDoc, Timer};
use super::{Kind, VERSION};

/// The X server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerDoc {
    /// the display name
    pub display: String,
    /// the vendor string
    pub vendor: String,
    /// the vendor's release number
    pub release: u32,
    /// latscope started a private Xvfb
    pub private_xvfb: bool,
    /// the extensions it lists
    pub extensions: Vec<String>,
    /// the largest request, bytes
    pub max_request_bytes: u64,
    /// MIT-SHM `major.minor`
    pub shm: Option<String>,
    /// RandR `major.minor`
    pub randr: Option<String>,
    /// the root window: depth, width, height
    pub root: (u8, u16, u16),
}

/// Counts and limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct X11Settings {
    /// measured operations per configuration (at most)
    pub count: u64,
    /// operations before measuring
    pub warmup: u64,
    /// time limit per configuration
    pub max_time_ns: u64,
}

/// CPU and context switches of every side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct X11Sides {
    /// the measuring process
    pub client: Option<SideUsage>,
    /// the X server
    pub server: Option<SideUsage>,
    /// the D-Bus backend process
    pub backend: Option<SideUsage>,
    /// dbus-daemon
    pub broker: Option<SideUsage>,
}

/// One configuration's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct X11Result {
    /// `round-trip`, `upload` or `config`
    pub pattern: String,
    /// upload: `put` or `shm`
    pub method: Option<String>,
    /// upload: `WxH`
    pub size: Option<String>,
    /// upload: the pixmap's depth
    pub depth: Option<u8>,
    /// upload (shm): segments rotated
    pub segments: Option<u32>,
    /// upload: issued back to back, one sync at the end
    pub pipelined: bool,
    /// config: `inproc` or `dbus`
    pub via: Option<String>,
    /// config: answered from a cache refreshed on RandR events
    pub cache: Option<bool>,
    /// what a sample spans: `round-trip`, `until-done`, `issue`, `query`
    pub latency_meaning: String,
    /// how the client learns the server is done
    pub completion: Option<String>,
    /// summary (flattened) and histogram of every measured operation
    #[serde(flatten)]
    pub dist: Latency,
    /// operations per second over the measured phase
    pub ops_per_s: f64,
    /// image or configuration bytes per operation
    pub bytes_per_op: u64,
    /// bytes per second
    pub bytes_per_s: f64,
    /// all sides together
    pub ctx_switches_per_op: f64,
    /// all sides together
    pub cpu_ns_per_op: f64,
    /// per side
    pub sides: X11Sides,
    /// most uploads in flight at once
    pub max_in_flight: u64,
    /// the pixmap read back equals the last image
    pub verified: Option<bool>,
    /// operations measured
    pub ops: u64,
    /// wall time of the measured phase
    pub elapsed_ns: u64,
    /// why it stopped
    pub stop: StopDoc,
    /// what failed
    pub error: Option<String>,
    /// individual operations (`--max-spans N`), series named after `latency_meaning`
    #[serde(flatten)]
    pub kept: super::lab::Records,
    /// the lab's own connection in the measured phase (absent in documents before it)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wire: Option<WireDoc>,
    /// x11perf on the same server (`--compare-x11perf`, rows it has a test for)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub x11perf: Option<X11perfDoc>,
}

/// Requests and system calls of the lab's connection in the measured phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireDoc {
    /// requests sent (syncs included)
    pub requests: u64,
    /// `send`/`sendmsg` calls
    pub writes: u64,
    /// `recv` calls
    pub reads: u64,
    /// bytes sent
    pub bytes_out: u64,
}

/// x11perf's rate for the same requests on the same server, run before and after the lab.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct X11perfDoc {
    /// the x11perf option, `-putimage10`
    pub test: String,
    /// per second, the run before the lab (NaN: it gave none)
    pub before_per_s: f64,
    /// per second, the run after the lab
    pub after_per_s: f64,
    /// per second, the mean of the two
    pub mean_per_s: f64,
    /// the lab's operations per second over x11perf's mean
    pub ratio: f64,
}

impl X11Result {
    /// How the configuration is named everywhere: `upload shm 32x32x8 K=4`, `config dbus cached`.
    pub fn label(&self) -> String {
        let mut out = self.pattern.clone();
        if let Some(m) = &self.method {
            out.push_str(&format!(" {m}"));
        }
        if let (Some(size), Some(depth)) = (&self.size, self.depth) {
            out.push_str(&format!(" {size}x{depth}"));
        }
        if let (Some(k), false) = (self.segments, self.pipelined) {
            out.push_str(&format!(" K={k}"));
        }
        if self.pipelined {
            out.push_str(" pipelined");
        }
        if let Some(v) = &self.via {
            out.push_str(&format!(" {v}"));
        }
        if self.cache == Some(true) {
            out.push_str(" cached");
        }
        out
    }
}

/// The `lab-x11` document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabX11Doc {
    /// `lab-x11`
    pub kind: Kind,
    /// format version
    pub version: u32,
    /// ns
    pub unit: Nanoseconds,
    /// the server measured
    pub server: ServerDoc,
    /// the clock and its cost
    pub timer: Timer,
    /// counts and limits
    pub settings: X11Settings,
    /// Ctrl-C cut the run short
    pub interrupted: bool,
    /// configurations not run
    #[serde(default)]
    pub skipped: Vec<Skipped>,
    /// one per configuration, fastest median first
    pub results: Vec<X11Result>,
}

impl LabX11Doc {
    /// A document with no results yet.
    pub fn new(server: ServerDoc, timer: Timer, settings: X11Settings) -> LabX11Doc {
        LabX11Doc {
            kind: Kind::LabX11,
            version: VERSION,
            unit: Nanoseconds::Ns,
            server,
            timer,
            settings,
            interrupted: false,
            skipped: Vec::new(),
            results: Vec::new(),
        }
    }

    pub(super) fn check(&self) -> Result<(), String> {
        for r in &self.results {
            r.dist.check().map_err(|e| format!("{}: {e}", r.label()))?;
        }
        Ok(())
    }
}
