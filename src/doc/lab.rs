//! The lab documents: `lab-ipc` (one result per transport × peer × pattern × payload) and
//! `lab-queue` (per-stage latency of a coalescing pipeline, per sweep row).

use serde::{Deserialize, Serialize};

use super::dist::{Latency, Nanoseconds, Summary};
use super::spans::SpanRecord;
use super::{Kind, VERSION};

/// Individual messages of one row, kept with `--max-spans N` (empty without it, and absent
/// from documents written before it): the first N of each series and the slowest of each,
/// for `latscope export --to chrome-json|perfetto` and the report's latency-against-time view.
/// Each record's `span` is its series (`round_trip`, `one_way`, ...), its `group` unset (the
/// row names it); `start_ns` is `CLOCK_MONOTONIC`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Records {
    /// the first N messages of each series, in the order they were sent
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub records: Vec<SpanRecord>,
    /// the slowest messages of each series, slowest first (also those past N)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slowest: Vec<SpanRecord>,
    /// messages not in `records` because N was reached
    #[serde(default, skip_serializing_if = "is_zero")]
    pub records_dropped: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Records {
    /// The kept messages: `records`, then those of `slowest` not among them, each with
    /// `group` set to `row` (so that every row is its own track in a timeline).
    pub fn spans(&self, row: &str) -> Vec<SpanRecord> {
        let mut out: Vec<SpanRecord> = self.records.clone();
        for s in &self.slowest {
            if !self.records.contains(s) {
                out.push(s.clone());
            }
        }
        for s in &mut out {
            s.group = Some(row.to_string());
        }
        out
    }
}

/// The clock every message is timed with, and its own cost.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timer {
    /// `CLOCK_MONOTONIC`
    pub clock: String,
    /// median cost of one read
    pub median_ns: u64,
    /// smallest cost seen
    pub min_ns: u64,
    /// reads made to measure it
    pub reads: u64,
    /// the resolution the kernel reports
    pub resolution_ns: u64,
}

/// Counts and limits of an IPC lab run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpcSettings {
    /// measured messages per configuration (at most)
    pub count: u64,
    /// messages before measuring
    pub warmup: u64,
    /// time limit per configuration
    pub max_time_ns: u64,
    /// shared-memory ring slots
    pub slots: u64,
    /// shared-memory ring bytes
    pub ring_bytes: u64,
    /// every byte compared
    pub verify: bool,
}

/// A configuration that did not run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    /// which
    pub config: String,
    /// why
    pub reason: String,
}

/// The pattern's own parameters (only the pattern's are set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PatternParams {
    /// stream: flush threshold
    pub flush_bytes: Option<u64>,
    /// burst: messages per acknowledgement
    pub burst: Option<u64>,
    /// segments: shared segments before a sync
    pub segments: Option<u64>,
    /// open-loop: intended rate
    pub rate_per_s: Option<u64>,
}

/// What a latency spans.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LatencyMeaning {
    /// send → echo received
    RoundTrip,
    /// the writer starts sending → the peer holds the whole message
    OneWay,
}

/// CPU and context switches of one side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideUsage {
    /// CPU time per message
    pub cpu_ns_per_msg: f64,
    /// context switches per message
    pub ctx_switches_per_msg: f64,
    /// the task blocked
    pub voluntary_ctx_switches: u64,
    /// the task was preempted
    pub involuntary_ctx_switches: u64,
    /// CPU time in all
    pub cpu_ns: u64,
}

/// Client, peer and broker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sides {
    /// the measuring side
    pub client: Option<SideUsage>,
    /// the echoing side
    pub peer: Option<SideUsage>,
    /// dbus-daemon
    pub broker: Option<SideUsage>,
}

/// Why a configuration stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StopDoc {
    /// every planned message was sent
    Done,
    /// the time limit came first
    MaxTime,
    /// Ctrl-C
    Interrupted,
    /// the exchange failed (see `error`)
    Failed,
}

/// One configuration's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IpcResult {
    /// transport name
    pub transport: String,
    /// `thread`, `process` or `none`
    pub peer: String,
    /// pattern name
    pub pattern: String,
    /// the pattern's parameters
    pub params: PatternParams,
    /// bytes per message
    pub payload: u64,
    /// round trip or one way
    pub latency: LatencyMeaning,
    /// summary (flattened) and histogram of every measured message
    #[serde(flatten)]
    pub dist: Latency,
    /// open-loop: from the actual send time (what a closed-loop tool would report)
    pub uncorrected: Option<Summary>,
    /// messages per second over the measured phase
    pub msgs_per_s: f64,
    /// bytes per second
    pub bytes_per_s: f64,
    /// all sides together
    pub ctx_switches_per_msg: f64,
    /// all sides together
    pub cpu_ns_per_msg: f64,
    /// per side
    pub sides: Sides,
    /// wall time of the measured phase
    pub elapsed_ns: u64,
    /// messages sent, warm-up included
    pub sent: u64,
    /// messages received, warm-up included
    pub received: u64,
    /// why it stopped
    pub stop: StopDoc,
    /// what failed
    pub error: Option<String>,
    /// individual messages (`--max-spans N`), series `round_trip` or `one_way`
    #[serde(flatten)]
    pub kept: Records,
}

impl IpcResult {
    /// `transport/peer/pattern[ param]/payload B`: how the configuration is named everywhere.
    pub fn label(&self) -> String {
        let p = &self.params;
        let param = [
            p.flush_bytes.map(|v| format!(" flush={v}")),
            p.burst.map(|v| format!(" burst={v}")),
            p.segments.map(|v| format!(" segments={v}")),
            p.rate_per_s.map(|v| format!(" rate={v}/s")),
        ]
        .into_iter()
        .flatten()
        .collect::<String>();
        format!(
            "{}/{}/{}{param}/{} B",
            self.transport, self.peer, self.pattern, self.payload
        )
    }
}

/// The `lab-ipc` document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabIpcDoc {
    /// `lab-ipc`
    pub kind: Kind,
    /// format version
    pub version: u32,
    /// ns
    pub unit: Nanoseconds,
    /// the clock and its cost
    pub timer: Timer,
    /// counts and limits
    pub settings: IpcSettings,
    /// Ctrl-C cut the run short
    pub interrupted: bool,
    /// configurations not run
    #[serde(default)]
    pub skipped: Vec<Skipped>,
    /// one per configuration, fastest median first
    pub results: Vec<IpcResult>,
}

impl LabIpcDoc {
    /// A document with no results yet.
    pub fn new(timer: Timer, settings: IpcSettings) -> LabIpcDoc {
        LabIpcDoc {
            kind: Kind::LabIpc,
            version: VERSION,
            unit: Nanoseconds::Ns,
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

/// Model or real threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QueueMode {
    /// the exact event-driven model
    Model,
    /// real threads with calibrated busy work
    Real,
}

/// The pipeline's parameters (the base of a sweep).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueParams {
    /// preparing a request
    pub prep_ns: u64,
    /// submitting a group
    pub submit_ns: u64,
    /// executing one request
    pub exec_ns: u64,
    /// completion handling per group
    pub irq_ns: u64,
    /// pause between requests
    pub gap_ns: u64,
    /// requests
    pub batches: u64,
    /// most requests outstanding (`None`: unbounded)
    pub ring: Option<u64>,
    /// engines
    pub engines: u64,
    /// consecutive requests per engine
    pub burst: u64,
}

/// A swept parameter's value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Label {
    /// parameter
    pub name: String,
    /// value as given
    pub value: String,
}

/// One stage of a request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stage {
    /// `queued`, `to_start`, `exec`, `completion_to_next_submit`
    pub name: String,
    /// summary (flattened) and histogram
    #[serde(flatten)]
    pub dist: Latency,
}

/// One configuration of a sweep (the only row without `--sweep`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueRow {
    /// the swept parameters (empty without `--sweep`)
    pub labels: Vec<Label>,
    /// last completion ÷ requests: what gem_exec_nop reports
    pub per_batch_ns: f64,
    /// end of prep → completion
    pub latency: Latency,
    /// per stage
    pub stages: Vec<Stage>,
    /// another row ranks the other way by per-batch time than by median latency
    pub disagrees: bool,
    /// rank by per-batch time (1 = best)
    pub rank_per_batch: u64,
    /// rank by median latency (1 = best)
    pub rank_latency: u64,
    /// individual requests (`--max-spans N`): series `latency`, `queued`, `to_start`, `exec`,
    /// starts in ns since the first prep started (the model's clock, or the real run's)
    #[serde(flatten)]
    pub kept: Records,
}

impl QueueRow {
    /// `name=value,...`, or `None` without labels.
    pub fn label(&self) -> Option<String> {
        (!self.labels.is_empty()).then(|| {
            self.labels
                .iter()
                .map(|l| format!("{}={}", l.name, l.value))
                .collect::<Vec<_>>()
                .join(",")
        })
    }
}

/// The `lab-queue` document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabQueueDoc {
    /// `lab-queue`
    pub kind: Kind,
    /// format version
    pub version: u32,
    /// ns
    pub unit: Nanoseconds,
    /// model or real
    pub mode: QueueMode,
    /// the base parameters
    pub params: QueueParams,
    /// one per configuration
    pub rows: Vec<QueueRow>,
}

impl LabQueueDoc {
    /// A document of `rows`.
    pub fn new(mode: QueueMode, params: QueueParams, rows: Vec<QueueRow>) -> LabQueueDoc {
        LabQueueDoc {
            kind: Kind::LabQueue,
            version: VERSION,
            unit: Nanoseconds::Ns,
            mode,
            params,
            rows,
        }
    }

    pub(super) fn check(&self) -> Result<(), String> {
        for row in &self.rows {
            let label = row.label().unwrap_or_default();
            row.latency
                .check()
                .map_err(|e| format!("row {label}: latency: {e}"))?;
            for s in &row.stages {
                s.dist
                    .check()
                    .map_err(|e| format!("row {label}: {}: {e}", s.name))?;
            }
        }
        Ok(())
    }
}
