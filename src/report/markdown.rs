//! A Markdown table, one row per series, ready for a merge request or a wiki page, with every
//! count the other formats give: what did not pair (per series), what the input held, and the
//! warnings.

use std::fmt::Write;

use super::{Renderer, SpansReport};

/// Renders a GitHub-flavoured Markdown table.
#[derive(Debug, Clone, Copy, Default)]
pub struct Markdown;

impl Renderer for Markdown {
    fn render(&self, report: &SpansReport<'_>) -> String {
        let u = report.unit;
        let fmt = |v: Option<u64>| v.map_or_else(|| "–".to_string(), |v| u.format_number(v));
        let fmtf = |v: Option<f64>| {
            v.map_or_else(|| "–".to_string(), |v| format!("{:.3}", u.from_nanos(v)))
        };
        let mut out = String::new();
        let _ = writeln!(
            out,
            "| span | side | group | count | min [{u}] | p50 [{u}] | p90 [{u}] | p99 [{u}] | p99.9 [{u}] | max [{u}] | mean [{u}] | sd [{u}] | unmatched | superseded | orphan ends | discarded | backwards |"
        );
        let _ = writeln!(
            out,
            "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
        );
        for row in report.rows() {
            let d = row.distribution;
            let s = d.summary();
            let p = d.percentiles();
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                row.name,
                row.side.map_or("–", |s| s.name()),
                super::format::markdown_cell(row.group.as_deref().unwrap_or("all")),
                d.count(),
                fmt(s.min()),
                fmt(p.map(|p| p.p50)),
                fmt(p.map(|p| p.p90)),
                fmt(p.map(|p| p.p99)),
                fmt(p.map(|p| p.p999)),
                fmt(s.max()),
                fmtf(s.mean()),
                fmtf(s.stddev()),
                row.counters.unmatched,
                row.counters.superseded,
                row.counters.orphan_ends,
                row.counters.discarded,
                row.counters.backwards,
            );
        }
        if !report.input.is_empty() {
            let counts: Vec<String> = report
                .input
                .iter()
                .map(|(name, n)| format!("{name} {n}"))
                .collect();
            let _ = writeln!(out, "\nInput: {}.", counts.join(", "));
        }
        if !report.warnings.is_empty() {
            out.push('\n');
        }
        for w in &report.warnings {
            let _ = writeln!(out, "- warning: {}", super::format::markdown_cell(w));
        }
        out
    }
}
