//! Rendering a comparison ([`CompareDoc`]): a terminal block per item, Markdown, and the JSON
//! document itself.

use std::fmt::Write;

use super::format::markdown_cell;
use crate::doc::Summary;
use crate::doc::compare::CompareDoc;
use crate::stats::Unit;

fn pct(p: Option<f64>) -> String {
    p.map_or_else(|| "–".to_string(), |p| format!("{p:+.1}%"))
}

fn change(b: Option<f64>, a: Option<f64>) -> String {
    pct(b
        .zip(a)
        .and_then(|(b, a)| crate::stats::ab::change_pct(b, a)))
}

/// The terminal report.
pub fn text(c: &CompareDoc, unit: Unit) -> String {
    let mut out = format!("before: {}\nafter:  {}\n", c.before, c.after);
    for note in &c.notes {
        let _ = writeln!(out, "note: {note}");
    }
    let n = |v: Option<u64>| v.map_or("–".to_string(), |v| unit.format(v));
    let mean = |v: Option<f64>| {
        v.map_or("–".to_string(), |v| {
            format!("{:.3} {}", unit.from_nanos(v), unit.symbol())
        })
    };
    let f = |v: Option<u64>| v.map(|v| v as f64);
    for i in &c.items {
        let _ = writeln!(
            out,
            "\n{}: {} ({})",
            i.label(),
            i.change.verdict.name(),
            i.change.basis.name()
        );
        let _ = writeln!(
            out,
            "  {:<8} {:>8} {:>14} {:>14} {:>14} {:>14} {:>16}",
            "", "count", "p50", "p90", "p99", "max", "mean"
        );
        for (label, s) in [("before", &i.before), ("after", &i.after)] {
            let _ = writeln!(
                out,
                "  {label:<8} {:>8} {:>14} {:>14} {:>14} {:>14} {:>16}",
                s.count,
                n(s.p50),
                n(s.p90),
                n(s.p99),
                n(s.max),
                mean(s.mean)
            );
        }
        let (b, a): (&Summary, &Summary) = (&i.before, &i.after);
        let _ = writeln!(
            out,
            "  {:<8} {:>8} {:>14} {:>14} {:>14} {:>14} {:>16}",
            "change",
            "",
            change(f(b.p50), f(a.p50)),
            change(f(b.p90), f(a.p90)),
            change(f(b.p99), f(a.p99)),
            change(f(b.max), f(a.max)),
            change(b.mean, a.mean)
        );
        let _ = writeln!(out, "  {}", i.change.reason);
    }
    if !c.only_before.is_empty() {
        let _ = writeln!(out, "\nonly before: {}", c.only_before.join(", "));
    }
    if !c.only_after.is_empty() {
        let _ = writeln!(out, "\nonly after: {}", c.only_after.join(", "));
    }
    if c.items.is_empty() {
        let _ = writeln!(out, "\nnothing in common to compare");
    }
    out
}

/// A Markdown table.
pub fn markdown(c: &CompareDoc, unit: Unit) -> String {
    let u = unit.symbol();
    let mut out = format!(
        "| item | p50 before [{u}] | p50 after [{u}] | p99 before [{u}] | p99 after [{u}] | Δp50 | Δp99 | verdict | basis |\n|---|--:|--:|--:|--:|--:|--:|---|---|\n"
    );
    let n = |v: Option<u64>| v.map_or("–".to_string(), |v| unit.format_number(v));
    for i in &c.items {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            markdown_cell(&i.label()),
            n(i.before.p50),
            n(i.after.p50),
            n(i.before.p99),
            n(i.after.p99),
            pct(i.change_pct.p50),
            pct(i.change_pct.p99),
            i.change.verdict.name(),
            i.change.basis.name()
        );
    }
    out
}
