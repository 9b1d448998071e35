//! The terminal report: an input summary, then per series a stats line, the bpftrace-style log2
//! histogram and, with `--linear`, the linear histogram.

use std::fmt::Write;

use super::{Renderer, Row, SpansReport, linear, log2};
use crate::stats::{PERCENTILES, Unit};

/// Renders for a terminal.
#[derive(Debug, Clone, Copy, Default)]
pub struct Text {
    /// also print the linear histogram (when the distributions carry linear counts)
    pub linear: bool,
    /// leave out the log2 histogram
    pub no_histogram: bool,
}

/// The `input:` line: the input's counts, each with its name.
pub(crate) fn input_line(report: &SpansReport<'_>) -> String {
    let input: Vec<String> = report
        .input
        .iter()
        .map(|(k, v)| format!("{v} {k}"))
        .collect();
    format!("input: {}\n", input.join(", "))
}

impl Renderer for Text {
    fn render(&self, report: &SpansReport<'_>) -> String {
        let mut out = input_line(report);
        for warning in &report.warnings {
            let _ = writeln!(out, "warning: {warning}");
        }
        let rows = report.rows();
        if rows.is_empty() {
            let _ = writeln!(
                out,
                "\nno spans found (see `latscope wayland --help` for what is paired)"
            );
        }
        for row in rows {
            out.push('\n');
            self.render_row(&mut out, &row, report.unit);
        }
        out
    }
}

impl Text {
    fn render_row(&self, out: &mut String, row: &Row<'_>, unit: Unit) {
        let title = title(row);
        let dist = row.distribution;
        let _ = writeln!(out, "{title}: {} samples", dist.count());
        if let Some(line) = stats_line(row, unit) {
            let _ = writeln!(out, "  {line}");
        }
        if let Some(line) = counters_line(row) {
            let _ = writeln!(out, "  {line}");
        }
        if dist.count() == 0 {
            return;
        }
        if !self.no_histogram {
            let _ = writeln!(out, "@{title} ({}):", unit.symbol());
            out.push_str(&log2::render(&dist.log2(unit)));
        }
        if self.linear {
            out.push_str(&linear::render(dist, unit));
        }
    }
}

/// `commit_to_release[client, wl_surface#3a]`
pub(super) fn title(row: &Row<'_>) -> String {
    let parts: Vec<String> = row
        .side
        .map(|s| s.to_string())
        .into_iter()
        .chain(row.group.clone())
        .collect();
    if parts.is_empty() {
        row.name.to_string()
    } else {
        format!("{}[{}]", row.name, parts.join(", "))
    }
}

fn stats_line(row: &Row<'_>, unit: Unit) -> Option<String> {
    let dist = row.distribution;
    let s = dist.summary();
    let (min, max, mean, sd) = (s.min()?, s.max()?, s.mean()?, s.stddev()?);
    let p = dist.percentiles()?;
    let mut parts = vec![format!("min {}", unit.format(min))];
    for ((name, _), value) in PERCENTILES.iter().zip(p.values()) {
        parts.push(format!("{name} {}", unit.format(value)));
    }
    parts.push(format!("max {}", unit.format(max)));
    parts.push(format!(
        "mean {:.3} {}",
        unit.from_nanos(mean),
        unit.symbol()
    ));
    parts.push(format!("sd {:.3} {}", unit.from_nanos(sd), unit.symbol()));
    Some(parts.join("  "))
}

pub(super) fn counters_line(row: &Row<'_>) -> Option<String> {
    let c = row.counters;
    let parts: Vec<String> = [
        ("unmatched", c.unmatched),
        ("superseded", c.superseded),
        ("orphan ends", c.orphan_ends),
        ("discarded", c.discarded),
        ("backwards", c.backwards),
    ]
    .iter()
    .filter(|(_, n)| *n > 0)
    .map(|(name, n)| format!("{name} {n}"))
    .collect();
    (!parts.is_empty()).then(|| parts.join("  "))
}
