//! The JSON result, shared by every latency-producing command and read back by `compare`:
//!
//! ```json
//! {"kind":"spans","unit":"ns","input":{"lines":N,"skipped":N,...},"warnings":[...],
//!  "spans":[{"name":"commit_to_release","side":"client","group":null,"count":N,
//!            "min":..,"max":..,"mean":..,"stddev":..,"p50":..,"p90":..,"p99":..,"p999":..,
//!            "unmatched":N,"superseded":N,"orphan_ends":N,"discarded":N,"backwards":N,
//!            "histogram":{...}}]}
//! ```
//!
//! Every value is in nanoseconds. The histogram carries the exact log2 buckets (bpftrace's
//! `{"min","max","count"}` bucket objects, `max` inclusive as bpftrace prints it) and the full
//! HdrHistogram (V2 encoding, base64) so that a later tool can recompute any percentile.

use serde::Serialize;

use super::{Renderer, Row, SpansReport};
use crate::stats::{Log2Counts, Unit};

/// Renders the JSON document (one line, then a newline).
#[derive(Debug, Clone, Copy, Default)]
pub struct Json {
    /// indent for people
    pub pretty: bool,
}

#[derive(Serialize)]
struct Document<'a> {
    kind: &'static str,
    unit: &'static str,
    input: serde_json::Map<String, serde_json::Value>,
    warnings: &'a [String],
    spans: Vec<SpanJson<'a>>,
}

#[derive(Serialize)]
struct SpanJson<'a> {
    name: &'a str,
    side: Option<&'static str>,
    group: Option<String>,
    count: u64,
    min: Option<u64>,
    max: Option<u64>,
    mean: Option<f64>,
    stddev: Option<f64>,
    p50: Option<u64>,
    p90: Option<u64>,
    p99: Option<u64>,
    p999: Option<u64>,
    unmatched: u64,
    superseded: u64,
    orphan_ends: u64,
    discarded: u64,
    backwards: u64,
    histogram: HistogramJson,
}

#[derive(Serialize)]
struct HistogramJson {
    scheme: &'static str,
    unit: &'static str,
    buckets: Vec<BucketJson>,
    /// whether p50..p999 are the exact nearest-rank values
    percentiles_exact: bool,
    /// percentiles are at most this far above the exact nearest-rank value (relative)
    percentile_max_relative_error: f64,
    hdr: HdrJson,
}

#[derive(Serialize)]
struct HdrJson {
    significant_digits: u8,
    encoding: &'static str,
    data: String,
}

#[derive(Serialize)]
struct BucketJson {
    min: u64,
    max: u64,
    count: u64,
}

impl Renderer for Json {
    fn render(&self, report: &SpansReport<'_>) -> String {
        let input = report
            .input
            .iter()
            .map(|(k, v)| (k.to_string(), serde_json::Value::from(*v)))
            .collect();
        let doc = Document {
            kind: "spans",
            unit: "ns",
            input,
            warnings: &report.warnings,
            spans: report.rows().iter().map(span_json).collect(),
        };
        let mut text = if self.pretty {
            serde_json::to_string_pretty(&doc)
        } else {
            serde_json::to_string(&doc)
        }
        .unwrap_or_default();
        text.push('\n');
        text
    }
}

fn span_json<'a>(row: &Row<'a>) -> SpanJson<'a> {
    let d = row.distribution;
    let s = d.summary();
    let p = d.percentiles();
    let c = row.counters;
    SpanJson {
        name: row.name,
        side: row.side.map(|s| s.name()),
        group: row.group.clone(),
        count: d.count(),
        min: s.min(),
        max: s.max(),
        mean: s.mean(),
        stddev: s.stddev(),
        p50: p.map(|p| p.p50),
        p90: p.map(|p| p.p90),
        p99: p.map(|p| p.p99),
        p999: p.map(|p| p.p999),
        unmatched: c.unmatched,
        superseded: c.superseded,
        orphan_ends: c.orphan_ends,
        discarded: c.discarded,
        backwards: c.backwards,
        histogram: HistogramJson {
            scheme: "log2",
            unit: "ns",
            buckets: log2_buckets(d.log2(Unit::Ns)),
            percentiles_exact: d.percentiles_exact(),
            percentile_max_relative_error: d.percentile_max_relative_error(),
            hdr: HdrJson {
                significant_digits: crate::stats::SIGNIFICANT_DIGITS,
                encoding: "hdrhistogram-v2-base64",
                data: d.hdr_base64(),
            },
        },
    }
}

fn log2_buckets(counts: &Log2Counts) -> Vec<BucketJson> {
    let Some(range) = counts.occupied() else {
        return Vec::new();
    };
    range
        .map(|i| {
            let (lo, hi) = Log2Counts::bounds(i);
            BucketJson {
                min: lo,
                max: hi.map_or(u64::MAX, |h| h - 1),
                count: counts.counts()[i],
            }
        })
        .collect()
}
