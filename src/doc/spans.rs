//! The `spans` document: latency spans from `latscope wayland` (WAYLAND_DEBUG logs) and
//! `latscope live` (kernel histograms), with live's rates and probe values.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::dist::{Latency, Nanoseconds};
use super::{Kind, VERSION};

/// Where the spans came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// WAYLAND_DEBUG logs (`latscope wayland`)
    Wayland,
    /// bpftrace, aggregated in the kernel (`latscope live`)
    Live,
    /// a trace of another tool (`latscope spans`: perf, ftrace, LTTng, Chrome JSON, ...)
    Trace,
}

/// What did not make a sample (WAYLAND_DEBUG spans; `None` where not counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Counters {
    /// started, never ended
    pub unmatched: Option<u64>,
    /// restarted before it ended
    pub superseded: Option<u64>,
    /// ended, never started
    pub orphan_ends: Option<u64>,
    /// ended as discarded (presentation feedback)
    pub discarded: Option<u64>,
    /// the clock went back
    pub backwards: Option<u64>,
}

/// One series: a span (or a probe value) for one side and group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Series {
    /// span name, e.g. `commit_to_release`
    pub name: String,
    /// `client` or `server`, when known
    pub side: Option<String>,
    /// what groups are split by (`tid`, `surface`, ...), when grouped
    pub by: Option<String>,
    /// the group, `None` for the whole span
    pub group: Option<String>,
    /// summary (flattened) and histogram
    #[serde(flatten)]
    pub latency: Latency,
    /// what did not make a sample (flattened)
    #[serde(flatten)]
    pub counters: Counters,
}

/// A probe's event count (live).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rate {
    /// the probe spec
    pub probe: String,
    /// what groups are split by
    pub by: Option<String>,
    /// the group
    pub group: Option<String>,
    /// events in all
    pub count: u64,
    /// events per interval
    pub per_interval: Vec<u64>,
}

/// How a live trace ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveRun {
    /// intervals printed
    pub intervals: u64,
    /// seconds per interval
    pub interval_s: u64,
    /// why it stopped (`Ctrl-C`, `--duration`, `the traced process exited`, ...)
    pub stopped_by: String,
    /// how often each span's start and end probe fired and passed its filters (a probe that
    /// never fired is named in the warnings)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<ProbeHits>,
    /// which processes were traced (`every process`, `pid 42 and its children`, ...)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traced: Option<String>,
}

/// One probe's hit count in a live trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeHits {
    /// the span
    pub span: String,
    /// `start` or `end`
    pub role: String,
    /// the probe and its filters, as given
    pub probe: String,
    /// times it fired and passed its filters
    pub hits: u64,
}

/// The `spans` document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpansDoc {
    /// `spans`
    pub kind: Kind,
    /// format version
    pub version: u32,
    /// ns
    pub unit: Nanoseconds,
    /// where the spans came from
    pub source: Source,
    /// counts describing the input (`lines`, `skipped`, ...)
    #[serde(default)]
    pub input: BTreeMap<String, u64>,
    /// how a live trace ran
    pub live: Option<LiveRun>,
    /// warnings about the input, one sentence each
    #[serde(default)]
    pub warnings: Vec<String>,
    /// the spans
    pub spans: Vec<Series>,
    /// probe event counts (live)
    #[serde(default)]
    pub rates: Vec<Rate>,
    /// probe argument distributions (live; values, not necessarily ns)
    #[serde(default)]
    pub values: Vec<Series>,
    /// the trace format read (`latscope spans`: `perf`, `ftrace`, `babeltrace`, ...)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// the slowest spans of each series, slowest first, with their start in the trace's clock
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slowest: Vec<SpanRecord>,
    /// individual spans in the order they ended (`latscope spans --max-spans N`): for timeline
    /// viewers (`latscope export --to chrome-json`)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub records: Vec<SpanRecord>,
    /// spans not kept in `records` because `--max-spans` was reached
    #[serde(default, skip_serializing_if = "is_zero")]
    pub records_dropped: u64,
    /// the results this one was merged from (`latscope merge`), in order
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged_from: Vec<MergedInput>,
    /// a frame's whole path (`latscope frames`): the join, the presentation clock, the pacing
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frames: Option<Box<super::frames::FramesSummary>>,
}

/// One input of a merged result: where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergedInput {
    /// the file, as given to `latscope merge`
    pub file: String,
    /// its source
    pub source: Source,
    /// the samples of its spans
    pub samples: u64,
    /// why its live trace stopped, for live results
    pub stopped_by: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One span: its name, group, start and length. A closed record (no flattened fields), so
/// serde refuses an unknown field itself, and a reader need not compare the (many) records
/// with their serialization (see `doc::read`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpanRecord {
    /// the span's name
    pub span: String,
    /// its group, if split
    pub group: Option<String>,
    /// when it started, ns in the trace's own clock
    pub start_ns: u64,
    /// how long it took
    pub latency_ns: u64,
    /// the frame it is a stage of (`latscope frames`: its commit's line in the client log), so
    /// that a frame's stages can be followed across processes (`export --to perfetto`)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frame: Option<u64>,
}

impl SpansDoc {
    /// An empty document from `source`.
    pub fn new(source: Source) -> SpansDoc {
        SpansDoc {
            kind: Kind::Spans,
            version: VERSION,
            unit: Nanoseconds::Ns,
            source,
            input: BTreeMap::new(),
            live: None,
            warnings: Vec::new(),
            spans: Vec::new(),
            rates: Vec::new(),
            values: Vec::new(),
            format: None,
            slowest: Vec::new(),
            records: Vec::new(),
            records_dropped: 0,
            merged_from: Vec::new(),
            frames: None,
        }
    }

    /// The individual spans this document kept: its `records`, else its slowest; an error
    /// that says how to keep some when it has none.
    pub fn kept(&self) -> Result<&[SpanRecord], String> {
        let spans = if self.records.is_empty() {
            &self.slowest
        } else {
            &self.records
        };
        if spans.is_empty() {
            return Err(
                "this result keeps no individual spans: make it with `latscope spans --max-spans N -f json` or `latscope live --save FILE --record-spans`"
                    .to_string(),
            );
        }
        Ok(spans)
    }

    pub(super) fn check(&self) -> Result<(), String> {
        for s in self.spans.iter().chain(&self.values) {
            s.latency
                .check()
                .map_err(|e| format!("span {}: {e}", s.name))?;
        }
        Ok(())
    }
}
