//! The `spans` document of a WAYLAND_DEBUG analysis (see [`crate::doc::spans`] for its fields):
//! every value in nanoseconds, each span with its exact log2 buckets and the whole
//! HdrHistogram, so that a later `compare`, `report` or `plot` works on the samples themselves.

use super::{Renderer, Row, SpansReport};
use crate::doc::spans::{Counters, Series, Source, SpanRecord, SpansDoc};
use crate::doc::{self, Latency};
use crate::span::{Group, Kept, Slow};

/// Renders the JSON document (one line, then a newline).
#[derive(Debug, Clone, Copy, Default)]
pub struct Json {
    /// indent for people
    pub pretty: bool,
}

/// The `spans` document of `report`.
pub fn document(report: &SpansReport<'_>) -> SpansDoc {
    let mut d = SpansDoc::new(Source::Wayland);
    d.input = report
        .input
        .iter()
        .map(|(k, v)| (k.to_string(), *v))
        .collect();
    d.warnings = report.warnings.clone();
    d.spans = report.rows().iter().map(series).collect();
    d
}

/// What a trace read adds to [`document`]: the spans kept one by one and the slowest of each
/// series, as `latscope spans` keeps them.
#[derive(Debug, Clone, Default)]
pub struct TraceParts {
    /// the formats read, one per input (`perf`, `chrome`, ...)
    pub formats: Vec<String>,
    /// the span names, indexed like [`crate::span::SeriesKey::span`]
    pub names: Vec<String>,
    /// the slowest spans of each series, slowest first
    pub slowest: Vec<Slow>,
    /// the first spans, kept one by one
    pub kept: Kept,
    /// the field `--by` split the series by, if any
    pub by: Option<String>,
}

/// The `spans` document of a trace read (`latscope spans`): [`document`] of `report`, with
/// what the trace read adds.
pub fn trace_document(report: &SpansReport<'_>, parts: TraceParts) -> SpansDoc {
    let records = |spans: Vec<Slow>| -> Vec<SpanRecord> {
        spans
            .into_iter()
            .map(|s| SpanRecord {
                span: parts.names.get(s.key.span).cloned().unwrap_or_default(),
                group: match s.key.group {
                    Group::Label(i) => report.labels.get(i as usize).cloned(),
                    _ => None,
                },
                start_ns: s.start_ns,
                latency_ns: s.latency_ns,
                frame: None,
            })
            .collect()
    };
    let mut doc = document(report);
    doc.source = Source::Trace;
    doc.format = Some(parts.formats.join(","));
    doc.slowest = records(parts.slowest);
    doc.records = records(parts.kept.spans);
    doc.records_dropped = parts.kept.dropped;
    for s in &mut doc.spans {
        s.by = s.group.as_ref().and(parts.by.clone());
    }
    doc
}

impl Renderer for Json {
    fn render(&self, report: &SpansReport<'_>) -> String {
        doc::to_json(&document(report), self.pretty)
    }
}

fn series(row: &Row<'_>) -> Series {
    let c = row.counters;
    Series {
        name: row.name.to_string(),
        side: row.side.map(|s| s.name().to_string()),
        by: None,
        group: row.group.clone(),
        latency: Latency::of(row.distribution),
        counters: Counters {
            unmatched: Some(c.unmatched),
            superseded: Some(c.superseded),
            orphan_ends: Some(c.orphan_ends),
            discarded: Some(c.discarded),
            backwards: Some(c.backwards),
        },
    }
}
