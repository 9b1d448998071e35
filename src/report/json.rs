//! The `spans` document of a WAYLAND_DEBUG analysis (see [`crate::doc::spans`] for its fields):
//! every value in nanoseconds, each span with its exact log2 buckets and the whole
//! HdrHistogram, so that a later `compare`, `report` or `plot` works on the samples themselves.

use super::{Renderer, Row, SpansReport};
use crate::doc::spans::{Counters, Series, Source, SpansDoc};
use crate::doc::{self, Latency};

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
