//! The GPU submission lab: seed 004's stages measured on a real accelerator.
//!
//! Why: `gem_exec_nop` reports one number, total time ÷ batches, and the [`queue`] lab shows
//! on a model why that hides what a request costs (queues coalesce work, so the number gets
//! better exactly when each request waits longer). This lab measures, per request and as full
//! distributions, where the time of one submission goes on a real device:
//!
//! | stage | from | to | clock |
//! |---|---|---|---|
//! | `launch_call` | host, before the launch call | host, after it returns | host |
//! | `submit_to_start` | host, before the launch call | the kernel's first instruction | both |
//! | `execute` | the kernel's first stamp | its last stamp | device |
//! | `end_to_host` | the kernel's last stamp | the host sees its flag | both |
//! | `end_to_sync` | the kernel's last stamp | the stream's synchronize returns | both |
//! | `total` | host, before the launch call | the stream's synchronize returns | host |
//!
//! and beside them, per row, gem_exec_nop's own figure: wall time ÷ requests.
//!
//! The stages that cross from one clock to the other need the device's timer mapped onto the
//! host's `CLOCK_MONOTONIC` ([`clock`]): calibrated before and after every run, outside the
//! timed loop, interpolated between the two. A duration that comes out negative (the mapping's
//! error is larger than the duration) is counted and reported beside its stage, never clamped
//! to zero, so that the error shows.
//!
//! One [`Backend`] trait is one submission path, so that DRM execbuf (i915/Xe, the seed's own
//! hardware) or HIP can follow the CUDA driver API ([`cuda`]) without touching the loop
//! ([`run`]). [`fake`] is a deterministic backend with known latencies that drives the whole lab
//! in tests, with no GPU and no driver. Everything the run needs (kernels compiled, streams,
//! host-mapped records for every request) is made in [`Backend::prepare`], before the timed
//! loop; the loop only reads the clock, launches, polls flags and synchronizes.
//!
//! [`queue`]: crate::lab::queue

pub mod clock;
pub mod cuda;
pub mod fake;
pub mod ptx;
pub mod report;
mod run;

pub use run::{Host, RunOutcome, Stage, Stages, run};

use std::ops::Range;

/// How requests are spaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    /// every group of streams × burst requests starts on an idle device: the previous group
    /// was seen, synchronized, and `spacing` passed
    Isolated,
    /// launches start every `spacing` from the start of the run (open loop)
    FixedRate,
    /// each launch starts `spacing` after the previous launch call returned
    BackToBack,
}

/// What each request runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// one block that stamps its entry and exit and sets its flag
    Nop,
    /// one block that spins on the device's timer for the given ns between its stamps
    Spin(u64),
    /// the nop on this many blocks (one thread each); the request ends with the last
    Grid(u32),
}

impl Kernel {
    /// Blocks a request launches.
    pub fn blocks(self) -> u32 {
        match self {
            Kernel::Grid(n) => n,
            _ => 1,
        }
    }

    /// Device time each block spins, ns.
    pub fn spin_ns(self) -> u64 {
        match self {
            Kernel::Spin(ns) => ns,
            _ => 0,
        }
    }
}

/// How a request is handed to the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launch {
    /// one launch call per request, on a stream
    Stream,
    /// one call launches a prebuilt graph of this many requests (CUDA Graphs)
    Graph(u32),
}

impl Launch {
    /// Requests one launch call submits.
    pub fn per_call(self) -> usize {
        match self {
            Launch::Stream => 1,
            Launch::Graph(g) => g as usize,
        }
    }
}

/// How the host waits in a synchronize (CUDA's context schedule flag).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncMode {
    /// spin on the CPU
    Spin,
    /// spin, yielding the CPU
    Yield,
    /// sleep until the driver wakes the thread
    Blocking,
}

/// One configuration of the lab (a row).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// how requests are spaced
    pub pattern: Pattern,
    /// the pattern's spacing, ns
    pub spacing_ns: u64,
    /// streams requests go round-robin over
    pub streams: u32,
    /// consecutive requests on one stream before the next
    pub burst: u32,
    /// what each request runs
    pub kernel: Kernel,
    /// how it is launched
    pub launch: Launch,
    /// how a synchronize waits
    pub sync: SyncMode,
    /// measured requests
    pub requests: u64,
    /// requests run before measuring (not reported)
    pub warmup: u64,
}

/// What a backend prepares before a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setup {
    /// the kernel every request runs
    pub kernel: Kernel,
    /// stream launches or graphs
    pub launch: Launch,
    /// how synchronizes wait
    pub sync: SyncMode,
    /// streams
    pub streams: u32,
    /// records (one per request, warm-up included), indexed by slot
    pub slots: usize,
    /// the first `warmup` slots are the warm-up's (launched in chunks of their own)
    pub warmup: usize,
}

/// A request's two device stamps (the device's timer, ns): its first block's entry and its
/// last block's exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DeviceStamps {
    /// the earliest entry stamp of its blocks
    pub start: u64,
    /// the latest exit stamp of its blocks
    pub end: u64,
}

/// What ran: for the document and the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// `cuda`, `fake`
    pub backend: String,
    /// the driver's version, as the driver reports it
    pub driver: String,
    /// the device's name
    pub device: String,
}

/// One submission path. The loop ([`run`]) calls [`Backend::prepare`] and
/// [`Backend::calibrate`] outside its timed part; inside it only [`Backend::now`],
/// [`Backend::launch`], [`Backend::done`], [`Backend::idle`] and [`Backend::sync`].
pub trait Backend {
    /// The backend, driver and device.
    fn info(&self) -> DeviceInfo;

    /// Compiles the kernel, creates streams, allocates and zeroes `setup.slots` records.
    fn prepare(&mut self, setup: &Setup) -> Result<(), GpuError>;

    /// The host's clock (`CLOCK_MONOTONIC` for a real device), ns.
    fn now(&self) -> u64;

    /// `pings` round trips through host-mapped memory (see [`clock`]).
    fn calibrate(&mut self, pings: u32) -> Result<Vec<clock::Ping>, GpuError>;

    /// Launches the requests of `slots` on `stream` in one call (one slot, or a graph's).
    fn launch(&mut self, stream: usize, slots: Range<usize>) -> Result<(), GpuError>;

    /// Whether the flag of `slot` is set (never blocks).
    fn done(&mut self, slot: usize) -> bool;

    /// One turn of a wait loop (a spin hint on a real device).
    fn idle(&mut self);

    /// Waits for everything launched on `stream`.
    fn sync(&mut self, stream: usize) -> Result<(), GpuError>;

    /// The device stamps of `slot`, once its flag is set.
    fn stamps(&self, slot: usize) -> DeviceStamps;
}

/// Limits checked before any work.
pub mod limits {
    /// measured requests
    pub const REQUESTS: u64 = 1_000_000;
    /// warm-up requests
    pub const WARMUP: u64 = 100_000;
    /// streams
    pub const STREAMS: u32 = 64;
    /// burst
    pub const BURST: u32 = 4_096;
    /// spacing, ns (1 s)
    pub const SPACING_NS: u64 = 1_000_000_000;
    /// a spin kernel's spin, ns (10 ms)
    pub const SPIN_NS: u64 = 10_000_000;
    /// blocks of a grid kernel
    pub const GRID: u32 = 1_024;
    /// requests in one graph
    pub const GRAPH: u32 = 1_024;
    /// graphs built before a run (each is instantiated outside the timed loop)
    pub const GRAPHS: u64 = 20_000;
    /// host-mapped memory for the records of a run, bytes (256 MiB)
    pub const RECORD_BYTES: u64 = 256 << 20;
}

/// Bytes of one request's record in host-mapped memory: a 16-byte header (the flag) and an
/// entry and exit stamp per block.
pub fn record_bytes(kernel: Kernel) -> u64 {
    16 + 16 * u64::from(kernel.blocks())
}

impl Config {
    /// For tests: `requests` (after `warmup`) isolated nop kernels on one stream, spinning.
    #[cfg(test)]
    pub(crate) fn isolated(requests: u64, warmup: u64) -> Config {
        Config {
            pattern: Pattern::Isolated,
            spacing_ns: 0,
            streams: 1,
            burst: 1,
            kernel: Kernel::Nop,
            launch: Launch::Stream,
            sync: SyncMode::Spin,
            requests,
            warmup,
        }
    }

    /// Refuses what the lab cannot run or should not (each message names its limit).
    pub fn check(&self) -> Result<(), String> {
        let too = |what: &str, v: u64, max: u64| -> Result<(), String> {
            if v > max {
                Err(format!("{what} {v} is more than the limit, {max}"))
            } else {
                Ok(())
            }
        };
        if self.requests == 0 {
            return Err("--requests 0: at least 1".to_string());
        }
        if self.streams == 0 || self.burst == 0 {
            return Err("--streams and --burst are at least 1".to_string());
        }
        too("--requests", self.requests, limits::REQUESTS)?;
        too("--warmup", self.warmup, limits::WARMUP)?;
        too("--streams", self.streams.into(), limits::STREAMS.into())?;
        too("--burst", self.burst.into(), limits::BURST.into())?;
        too("--spacing (ns)", self.spacing_ns, limits::SPACING_NS)?;
        too("spin:T (ns)", self.kernel.spin_ns(), limits::SPIN_NS)?;
        if self.kernel.blocks() == 0 {
            return Err("grid:0: a grid has at least 1 block".to_string());
        }
        too("grid:N", self.kernel.blocks().into(), limits::GRID.into())?;
        if let Launch::Graph(g) = self.launch {
            if g == 0 {
                return Err("graph:0: a graph has at least 1 request".to_string());
            }
            too("graph:G", g.into(), limits::GRAPH.into())?;
            let graphs = (self.requests + self.warmup).div_ceil(g.into());
            too(
                "graphs to build ((requests + warm-up) ÷ G)",
                graphs,
                limits::GRAPHS,
            )?;
        }
        let bytes = (self.requests + self.warmup) * record_bytes(self.kernel);
        too(
            "host-mapped memory for the records (bytes, requests + warm-up × (16 + 16 × blocks))",
            bytes,
            limits::RECORD_BYTES,
        )
    }

    /// `pattern spacing=… streams×burst kernel launch sync`: how a row is named.
    pub fn label(&self) -> String {
        format!(
            "{} spacing={} streams={} burst={} kernel={} launch={} sync={}",
            self.pattern.name(),
            duration_label(self.spacing_ns),
            self.streams,
            self.burst,
            self.kernel,
            self.launch,
            self.sync.name()
        )
    }
}

impl Pattern {
    /// Every pattern.
    pub const ALL: [Pattern; 3] = [Pattern::Isolated, Pattern::FixedRate, Pattern::BackToBack];

    /// Its name on the command line and in documents.
    pub fn name(self) -> &'static str {
        match self {
            Pattern::Isolated => "isolated",
            Pattern::FixedRate => "fixed-rate",
            Pattern::BackToBack => "back-to-back",
        }
    }
}

impl SyncMode {
    /// Every mode.
    pub const ALL: [SyncMode; 3] = [SyncMode::Spin, SyncMode::Yield, SyncMode::Blocking];

    /// Its name on the command line and in documents.
    pub fn name(self) -> &'static str {
        match self {
            SyncMode::Spin => "spin",
            SyncMode::Yield => "yield",
            SyncMode::Blocking => "blocking",
        }
    }
}

impl std::fmt::Display for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Kernel::Nop => write!(f, "nop"),
            Kernel::Spin(ns) => write!(f, "spin:{}", duration_label(*ns)),
            Kernel::Grid(n) => write!(f, "grid:{n}"),
        }
    }
}

impl std::fmt::Display for Launch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Launch::Stream => write!(f, "stream"),
            Launch::Graph(g) => write!(f, "graph:{g}"),
        }
    }
}

/// `ns` in the largest unit that holds it whole, as the command line takes it (`4us`, `1500ns`).
pub fn duration_label(ns: u64) -> String {
    use crate::stats::Unit;
    let unit = [Unit::S, Unit::Ms, Unit::Us]
        .into_iter()
        .find(|u| ns != 0 && ns.is_multiple_of(u.nanos()))
        .unwrap_or(Unit::Ns);
    format!("{}{}", ns / unit.nanos(), unit.name())
}

/// `T` of `spin:T` (a duration with a unit; bare numbers are ns) or `N` of `grid:N`.
fn value_after<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    text.strip_prefix(prefix).map(str::trim)
}

impl std::str::FromStr for Kernel {
    type Err = String;

    fn from_str(text: &str) -> Result<Kernel, String> {
        let text = text.trim();
        if text == "nop" {
            return Ok(Kernel::Nop);
        }
        if let Some(t) = value_after(text, "spin:") {
            return crate::stats::parse_duration(t, crate::stats::Unit::Ns)
                .map(Kernel::Spin)
                .map_err(|e| format!("spin:T: {e}"));
        }
        if let Some(n) = value_after(text, "grid:") {
            return n
                .parse()
                .map(Kernel::Grid)
                .map_err(|_| format!("grid:N: '{n}' is not a whole number"));
        }
        Err(format!(
            "unknown kernel '{text}' (nop, spin:T with T a duration, grid:N)"
        ))
    }
}

impl std::str::FromStr for Launch {
    type Err = String;

    fn from_str(text: &str) -> Result<Launch, String> {
        let text = text.trim();
        if text == "stream" {
            return Ok(Launch::Stream);
        }
        if let Some(g) = value_after(text, "graph:") {
            return g
                .parse()
                .map(Launch::Graph)
                .map_err(|_| format!("graph:G: '{g}' is not a whole number"));
        }
        Err(format!("unknown launch '{text}' (stream, graph:G)"))
    }
}

/// What went wrong, named so that the user can act on it.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    /// The driver library is not there.
    #[error(
        "cannot load {library}: {reason} (the NVIDIA driver's CUDA library; `lab gpu` needs a driver, not a CUDA toolkit)"
    )]
    Library {
        /// the library's name
        library: String,
        /// what dlopen said
        reason: String,
    },
    /// The driver library lacks a function the lab calls.
    #[error("{library} has no {symbol}: {reason} (a driver too old, or not NVIDIA's)")]
    Symbol {
        /// the library's name
        library: String,
        /// the function
        symbol: &'static str,
        /// what dlsym said
        reason: String,
    },
    /// A driver call failed.
    #[error("{call} failed: {name} ({description})")]
    Cuda {
        /// the function
        call: &'static str,
        /// the `CUresult`
        code: i32,
        /// `CUDA_ERROR_…`
        name: String,
        /// the driver's description
        description: String,
    },
    /// The driver cannot compile the lab's PTX.
    #[error(
        "the CUDA driver is version {have}; the lab's kernels (PTX ISA {isa}) need version {need} or newer"
    )]
    DriverTooOld {
        /// the driver's version
        have: String,
        /// the version needed
        need: String,
        /// the PTX ISA version of the kernels
        isa: &'static str,
    },
    /// The driver rejected the PTX.
    #[error("the CUDA driver could not compile the lab's PTX ({name}): {log}")]
    Jit {
        /// `CUDA_ERROR_…`
        name: String,
        /// the JIT's error log
        log: String,
    },
    /// No device to run on.
    #[error("no CUDA device: {0}")]
    NoDevice(String),
    /// The device may not be used by this process.
    #[error("CUDA device {index} ({device}) is in {mode} compute mode: {what}")]
    ComputeMode {
        /// its index
        index: i32,
        /// its name
        device: String,
        /// `exclusive-process`, `prohibited`
        mode: &'static str,
        /// what that means here
        what: String,
    },
    /// Calibrating the clocks failed.
    #[error("clock calibration: {0}")]
    Calibration(String),
    /// The device did not answer.
    #[error("{0}")]
    Timeout(String),
    /// Something this backend does not do (yet).
    #[error("{0}")]
    Unsupported(String),
    /// A configuration the lab refuses.
    #[error("{0}")]
    Config(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Config {
        Config::isolated(100, 10)
    }

    #[test]
    fn kernels_and_launches_read_back_their_own_names() {
        for k in [Kernel::Nop, Kernel::Spin(2_000), Kernel::Grid(8)] {
            assert_eq!(k.to_string().parse::<Kernel>(), Ok(k));
        }
        assert_eq!("spin:2us".parse::<Kernel>(), Ok(Kernel::Spin(2_000)));
        assert_eq!("spin:500".parse::<Kernel>(), Ok(Kernel::Spin(500)));
        for l in [Launch::Stream, Launch::Graph(16)] {
            assert_eq!(l.to_string().parse::<Launch>(), Ok(l));
        }
        assert!("grid:x".parse::<Kernel>().unwrap_err().contains("grid:N"));
        assert!("nope".parse::<Launch>().unwrap_err().contains("graph:G"));
    }

    #[test]
    fn absurd_configurations_are_refused_naming_the_limit() {
        let refused = |edit: &dyn Fn(&mut Config)| {
            let mut c = config();
            edit(&mut c);
            c.check().unwrap_err()
        };
        assert_eq!(
            refused(&|c| c.requests = 2_000_000),
            "--requests 2000000 is more than the limit, 1000000"
        );
        assert!(refused(&|c| c.streams = 65).contains("64"));
        assert!(refused(&|c| c.spacing_ns = 2_000_000_000).contains("1000000000"));
        assert!(refused(&|c| c.kernel = Kernel::Spin(u64::MAX)).contains("spin:T"));
        assert!(refused(&|c| c.kernel = Kernel::Grid(0)).contains("at least 1 block"));
        assert!(refused(&|c| c.launch = Launch::Graph(0)).contains("at least 1"));
        assert!(refused(&|c| c.requests = 0).contains("at least 1"));
        // 1 000 000 requests of 1 024 blocks: 16 KiB each, far past 256 MiB.
        let e = refused(&|c| {
            c.requests = 1_000_000;
            c.kernel = Kernel::Grid(1_024);
        });
        assert!(e.contains("268435456"), "{e}");
        assert_eq!(config().check(), Ok(()));
    }

    #[test]
    fn a_row_is_named_by_every_parameter() {
        let c = Config {
            kernel: Kernel::Spin(2_000),
            spacing_ns: 4_000,
            ..config()
        };
        assert_eq!(
            c.label(),
            "isolated spacing=4us streams=1 burst=1 kernel=spin:2us launch=stream sync=spin"
        );
    }
}
