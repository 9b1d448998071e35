//! Rendering a comparison: a terminal table per item, the `compare` JSON, a Markdown table.

use std::fmt::Write;

use serde_json::{Value, json};

use crate::compare::{Comparison, Figures, change_pct, change_text};
use crate::stats::Unit;

fn figures_json(f: &Figures) -> Value {
    json!({ "count": f.count, "p50": f.p50, "p90": f.p90, "p99": f.p99, "max": f.max, "mean": f.mean })
}

/// The `{"kind":"compare",...}` document (ns everywhere).
pub fn json(c: &Comparison, before: &str, after: &str) -> Value {
    let items: Vec<Value> = c
        .items
        .iter()
        .map(|i| {
            json!({
                "name": i.name, "group": i.group,
                "before": figures_json(&i.before), "after": figures_json(&i.after),
                "change_pct": {
                    "p50": change_pct(i.before.p50, i.after.p50),
                    "p99": change_pct(i.before.p99, i.after.p99),
                    "mean": change_pct(i.before.mean, i.after.mean),
                },
                "change_ci_pct": i.change_ci_pct.map(|[p50, p99]| json!({ "p50": [p50.0, p50.1], "p99": [p99.0, p99.1] })),
                "verdict": i.verdict, "basis": i.basis, "reason": i.reason,
            })
        })
        .collect();
    json!({ "kind": "compare", "unit": "ns", "before": before, "after": after, "items": items, "only_before": c.only_before, "only_after": c.only_after })
}

/// The terminal report.
pub fn text(c: &Comparison, before: &str, after: &str, unit: Unit) -> String {
    let mut out = format!("before: {before}\nafter:  {after}\n");
    let n = |v: f64| {
        format!(
            "{} {}",
            unit.format_number(v.round().max(0.0) as u64),
            unit.symbol()
        )
    };
    let pct = change_text;
    for i in &c.items {
        let title = i.label();
        let _ = writeln!(
            out,
            "\n{title}: {} ({})",
            format!("{:?}", i.verdict).to_lowercase(),
            i.basis
        );
        let _ = writeln!(
            out,
            "  {:<8} {:>8} {:>14} {:>14} {:>14} {:>14} {:>14}",
            "", "count", "p50", "p90", "p99", "max", "mean"
        );
        for (label, f) in [("before", &i.before), ("after", &i.after)] {
            let _ = writeln!(
                out,
                "  {label:<8} {:>8} {:>14} {:>14} {:>14} {:>14} {:>14}",
                f.count,
                n(f.p50),
                n(f.p90),
                n(f.p99),
                n(f.max),
                n(f.mean)
            );
        }
        let (b, a) = (&i.before, &i.after);
        let _ = writeln!(
            out,
            "  {:<8} {:>8} {:>14} {:>14} {:>14} {:>14} {:>14}",
            "change",
            "",
            pct(b.p50, a.p50),
            pct(b.p90, a.p90),
            pct(b.p99, a.p99),
            pct(b.max, a.max),
            pct(b.mean, a.mean)
        );
        let _ = writeln!(out, "  {}", i.reason);
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
pub fn markdown(c: &Comparison, unit: Unit) -> String {
    let u = unit.symbol();
    let mut out = format!(
        "| item | p50 before [{u}] | p50 after [{u}] | p99 before [{u}] | p99 after [{u}] | Δp50 | Δp99 | verdict | basis |\n|---|--:|--:|--:|--:|--:|--:|---|---|\n"
    );
    let n = |v: f64| unit.format_number(v.round().max(0.0) as u64);
    let pct = change_text;
    for i in &c.items {
        let name = i.label();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            name.replace('|', "\\|")
                .replace(['\n', '\r'], " ")
                .replace('<', "&lt;")
                .replace('>', "&gt;"),
            n(i.before.p50),
            n(i.after.p50),
            n(i.before.p99),
            n(i.after.p99),
            pct(i.before.p50, i.after.p50),
            pct(i.before.p99, i.after.p99),
            format!("{:?}", i.verdict).to_lowercase(),
            i.basis
        );
    }
    out
}
