//! Rendering live-tracing snapshots: a latencytop-style text block per interval, the final
//! totals, and the saved JSON (the `spans` document of `latscope wayland`, with log-linear
//! buckets and percentile error bounds, plus `rates` and `values`).

use std::collections::BTreeMap;
use std::fmt::Write;

use super::log2::BAR_WIDTH;
use crate::doc::Latency;
use crate::doc::spans::{Counters, LiveRun, ProbeHits, Rate, Series, Source, SpansDoc};
use crate::live::output::Snapshot;
use crate::live::program::Plan;
use crate::live::runner::Outcome;
use crate::stats::Unit;
use crate::stats::loglinear::{self, Bucketed};

/// The quantiles shown.
const QUANTILES: [(&str, f64); 4] = [("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p99.9", 0.999)];

/// Names of what a snapshot holds, in snapshot order.
#[derive(Debug, Clone, Default)]
pub struct Names {
    /// span names
    pub spans: Vec<String>,
    /// value names
    pub values: Vec<String>,
    /// rate probes
    pub rates: Vec<String>,
    /// what groups are split by (`tid`, `comm`, ...), if anything
    pub by: Option<String>,
}

/// One interval: what happened since `before` (or everything so far when `cumulative`).
pub fn interval_text(
    names: &Names,
    number: usize,
    seconds: u64,
    now: &Snapshot,
    before: &Snapshot,
    cumulative: bool,
    unit: Unit,
) -> String {
    let mut out = String::new();
    let what = if cumulative {
        "since start"
    } else {
        "in this interval"
    };
    let _ = writeln!(
        out,
        "── interval {number} ({}s, {what}) ──",
        number as u64 * seconds
    );
    let pick = |now: &Bucketed, before: Option<&Bucketed>| match (cumulative, before) {
        (false, Some(b)) => now.since(b),
        _ => now.clone(),
    };
    series_blocks(
        &mut out,
        names,
        &names.spans,
        &now.spans,
        &before.spans,
        &pick,
        Some(unit),
    );
    series_blocks(
        &mut out,
        names,
        &names.values,
        &now.values,
        &before.values,
        &pick,
        None,
    );
    for (i, probe) in names.rates.iter().enumerate() {
        for (group, &total) in now.rates.get(i).into_iter().flatten() {
            let earlier = before
                .rates
                .get(i)
                .and_then(|g| g.get(group))
                .copied()
                .unwrap_or(0);
            let delta = total.saturating_sub(earlier);
            let title = title(
                &format!("rate {probe}"),
                names.by.as_deref(),
                group.as_deref(),
            );
            let per_s = delta as f64 / seconds.max(1) as f64;
            let _ = writeln!(
                out,
                "{title}: {delta} events in this interval ({per_s:.1}/s), {total} in all"
            );
        }
    }
    out
}

type Pick<'a> = dyn Fn(&Bucketed, Option<&Bucketed>) -> Bucketed + 'a;

fn series_blocks(
    out: &mut String,
    names: &Names,
    labels: &[String],
    now: &[BTreeMap<Option<String>, Bucketed>],
    before: &[BTreeMap<Option<String>, Bucketed>],
    pick: &Pick<'_>,
    unit: Option<Unit>,
) {
    for (i, name) in labels.iter().enumerate() {
        let Some(groups) = now.get(i) else { continue };
        if groups.is_empty() {
            let _ = writeln!(out, "{name}: no samples yet");
        }
        for (group, b) in groups {
            let earlier = before.get(i).and_then(|g| g.get(group));
            let shown = pick(b, earlier);
            let title = title(name, names.by.as_deref(), group.as_deref());
            out.push_str(&series_text(&title, &shown, unit));
        }
    }
}

fn title(name: &str, by: Option<&str>, group: Option<&str>) -> String {
    match (by, group) {
        (Some(by), Some(g)) => format!("{name}[{by} {g}]"),
        _ => name.to_string(),
    }
}

/// The stats line (with each percentile's error bound) and the non-empty log-linear buckets.
/// `unit` is the time unit of a latency; `None` prints raw values (a probe argument).
pub fn series_text(title: &str, b: &Bucketed, unit: Option<Unit>) -> String {
    let mut out = String::new();
    if b.count == 0 {
        let _ = writeln!(out, "{title}: 0 samples");
        return out;
    }
    let number = |v: u64| unit.map_or_else(|| v.to_string(), |u| u.format_number(v));
    let symbol = unit.map_or("", Unit::symbol);
    let f = |v: u64| {
        format!(
            "{}{}{symbol}",
            number(v),
            if symbol.is_empty() { "" } else { " " }
        )
    };
    let mut parts = vec![
        format!("{title}: {} samples", b.count),
        format!("min {}", f(b.min)),
    ];
    for (label, q) in QUANTILES {
        if let Some(e) = b.percentile(q) {
            parts.push(format!(
                "{label} {} ±{}",
                f(e.value),
                number(e.error_bound())
            ));
        }
    }
    parts.push(format!("max {}", f(b.max)));
    let mean = b.mean().unwrap_or(0.0);
    parts.push(format!(
        "mean {:.3}{}",
        unit.map_or(mean, |u| u.from_nanos(mean)),
        if symbol.is_empty() {
            String::new()
        } else {
            format!(" {symbol}")
        }
    ));
    let _ = writeln!(out, "{}", parts.join("  "));
    let what = if symbol.is_empty() {
        "values".to_string()
    } else {
        symbol.to_string()
    };
    let _ = writeln!(
        out,
        "  histogram ({what}; 8 buckets per power of two, each at most 12.5% wide):"
    );
    let largest = b.counts.iter().copied().max().unwrap_or(1).max(1);
    for (i, &n) in b.counts.iter().enumerate().filter(|(_, n)| **n > 0) {
        let (lo, hi) = loglinear::bounds(i);
        let label = format!("[{}, {})", number(lo), number(hi));
        let bar = (u128::from(n) * u128::from(BAR_WIDTH) / u128::from(largest)) as usize;
        let _ = writeln!(
            out,
            "  {label:<24} {n:>8} |{:<width$}|",
            "@".repeat(bar),
            width = BAR_WIDTH as usize
        );
    }
    out
}

/// The saved result: the `spans` document with live's rates and values.
pub fn document(
    names: &Names,
    last: &Snapshot,
    rate_history: &[Vec<BTreeMap<Option<String>, u64>>],
    run: LiveRun,
    warnings: &[String],
) -> SpansDoc {
    let mut doc = SpansDoc::new(Source::Live);
    doc.live = Some(run);
    doc.warnings = warnings.to_vec();
    doc.spans = series_list(&names.spans, &last.spans, names.by.as_deref());
    doc.values = series_list(&names.values, &last.values, names.by.as_deref());
    for (i, probe) in names.rates.iter().enumerate() {
        for (group, &count) in last.rates.get(i).into_iter().flatten() {
            let mut previous = 0;
            let per_interval: Vec<u64> = rate_history
                .iter()
                .map(|totals| {
                    let total = totals
                        .get(i)
                        .and_then(|g| g.get(group))
                        .copied()
                        .unwrap_or(0);
                    let delta = total.saturating_sub(previous);
                    previous = total;
                    delta
                })
                .collect();
            doc.rates.push(Rate {
                probe: probe.clone(),
                by: names.by.clone(),
                group: group.clone(),
                count,
                per_interval,
            });
        }
    }
    doc
}

/// The document of a finished session (`outcome` of `plan`, whose series are `names`), which
/// traced `traced` every `interval_s` seconds, with `warnings`; its kept spans
/// (`--record-spans`) are taken out of `outcome`. Also what keeping them had to say, if
/// anything (then also among the document's warnings).
pub fn session_document(
    names: &Names,
    plan: &Plan,
    outcome: &mut Outcome,
    (interval_s, traced): (u64, &str),
    warnings: &[String],
) -> (SpansDoc, Option<String>) {
    let run = LiveRun {
        intervals: outcome.rate_history.len() as u64,
        interval_s,
        stopped_by: outcome.stopped_by.clone(),
        probes: probe_hits(plan, &outcome.last),
        traced: Some(traced.to_string()),
    };
    let mut doc = document(names, &outcome.last, &outcome.rate_history, run, warnings);
    let mut said = None;
    if let Some(record) = outcome.record.take() {
        said = record.fill(&mut doc, &names.spans);
        doc.warnings = warnings.iter().cloned().chain(said.clone()).collect();
    }
    (doc, said)
}

/// Each span's probes with their hit counts, for the saved document.
fn probe_hits(plan: &Plan, last: &Snapshot) -> Vec<ProbeHits> {
    plan.spans
        .iter()
        .zip(&last.hits)
        .flat_map(|(span, hits)| {
            [("start", &span.start, hits[0]), ("end", &span.end, hits[1])].map(|(role, site, n)| {
                ProbeHits {
                    span: span.name.clone(),
                    role: role.to_string(),
                    probe: site.label.clone(),
                    hits: n,
                }
            })
        })
        .collect()
}

fn series_list(
    names: &[String],
    series: &[BTreeMap<Option<String>, Bucketed>],
    by: Option<&str>,
) -> Vec<Series> {
    let mut out = Vec::new();
    for (i, name) in names.iter().enumerate() {
        for (group, b) in series.get(i).into_iter().flatten() {
            out.push(Series {
                name: name.clone(),
                side: None,
                by: by.map(str::to_string),
                group: group.clone(),
                latency: Latency::of_bucketed(b),
                counters: Counters::default(),
            });
        }
    }
    out
}

/// The final totals of a live run as text (`live --format text`): each span's and value's
/// series, then each rate's count, after a line that says why the run stopped.
pub fn totals_text(names: &Names, last: &Snapshot, stopped_by: &str, unit: Unit) -> String {
    let mut out = format!("── totals ({stopped_by}) ──\n");
    let blocks = [
        (&names.spans, &last.spans, Some(unit)),
        (&names.values, &last.values, None),
    ];
    for (labels, series, unit) in blocks {
        for (i, name) in labels.iter().enumerate() {
            for (group, b) in series.get(i).into_iter().flatten() {
                let title = match (&names.by, group) {
                    (Some(by), Some(g)) => format!("{name}[{by} {g}]"),
                    _ => name.clone(),
                };
                out.push_str(&series_text(&title, b, unit));
            }
        }
    }
    for (i, probe) in names.rates.iter().enumerate() {
        for (group, total) in last.rates.get(i).into_iter().flatten() {
            let title = match (&names.by, group) {
                (Some(by), Some(g)) => format!("rate {probe}[{by} {g}]"),
                _ => format!("rate {probe}"),
            };
            out.push_str(&format!("{title}: {total} events\n"));
        }
    }
    out
}

/// The totals of a live run as Markdown (`live --format markdown`): one table of spans
/// (latencies in `unit`), one of values (as traced, no unit) and one of rates.
pub fn markdown(doc: &SpansDoc, unit: Unit) -> String {
    let mut out = String::new();
    let series = |out: &mut String, title: &str, list: &[Series], unit: Option<Unit>| {
        if list.is_empty() {
            return;
        }
        let head = unit.map_or(String::new(), |u| format!(" ({u})"));
        let _ = writeln!(
            out,
            "### {title}
"
        );
        let _ = writeln!(
            out,
            "| series | count | min{head} | p50{head} | p90{head} | p99{head} | p99.9{head} | max{head} |"
        );
        out.push_str(
            "|---|---:|---:|---:|---:|---:|---:|---:|
",
        );
        for s in list {
            let m = &s.latency.summary;
            let cell = |v: Option<u64>| match (v, unit) {
                (None, _) => "-".to_string(),
                (Some(v), Some(u)) => u.format_number(v),
                (Some(v), None) => v.to_string(),
            };
            let label = crate::doc::label(&s.name, s.group.as_deref());
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                super::format::markdown_cell(&label),
                m.count,
                cell(m.min),
                cell(m.p50),
                cell(m.p90),
                cell(m.p99),
                cell(m.p999),
                cell(m.max)
            );
        }
        out.push('\n');
    };
    series(&mut out, "Spans", &doc.spans, Some(unit));
    series(&mut out, "Values", &doc.values, None);
    if !doc.rates.is_empty() {
        out.push_str("### Rates\n\n| probe | group | events |\n|---|---|---:|\n");
        for r in &doc.rates {
            let _ = writeln!(
                out,
                "| {} | {} | {} |",
                super::format::markdown_cell(&r.probe),
                super::format::markdown_cell(r.group.as_deref().unwrap_or("-")),
                r.count
            );
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot_with(values: &[u64]) -> Snapshot {
        let mut s = Snapshot::new(1, 0, 1, false);
        let b = s.spans[0].entry(None).or_default();
        values.iter().for_each(|&v| b.record(v));
        s.rates[0].insert(None, values.len() as u64);
        s
    }

    fn names() -> Names {
        Names {
            spans: vec!["req".into()],
            values: vec![],
            rates: vec!["usdt:/t:p:tick".into()],
            by: None,
        }
    }

    #[test]
    fn the_interval_text_shows_the_difference_since_the_last_interval() {
        let before = snapshot_with(&[50_000, 50_000]);
        let now = snapshot_with(&[50_000, 50_000, 200_000]);
        let text = interval_text(&names(), 2, 5, &now, &before, false, Unit::Us);
        assert!(
            text.contains("req: 1 samples  min 50 µs  p50 200 µs ±"),
            "{text}"
        );
        assert!(
            text.contains("rate usdt:/t:p:tick: 1 events in this interval (0.2/s), 3 in all"),
            "{text}"
        );
        let text = interval_text(&names(), 2, 5, &now, &before, true, Unit::Us);
        assert!(text.contains("req: 3 samples"), "{text}");
    }

    #[test]
    fn the_saved_json_has_the_spans_shape_with_buckets_error_bounds_and_rates() {
        let last = snapshot_with(&[50_000, 60_000, 1_000_000]);
        let at = |n: u64| vec![BTreeMap::from([(None, n)])];
        let history = vec![at(1), at(3)];
        let run = LiveRun {
            intervals: 2,
            interval_s: 5,
            stopped_by: "Ctrl-C".into(),
            probes: Vec::new(),
            traced: None,
        };
        let doc = document(&names(), &last, &history, run, &[]);
        let text = crate::doc::to_json(&doc, false);
        let crate::doc::Document::Spans(doc) = crate::doc::read("t", &text).unwrap() else {
            panic!("not spans")
        };
        let span = &doc.spans[0].latency;
        assert_eq!(
            (span.summary.count, span.summary.min, span.summary.max),
            (3, Some(50_000), Some(1_000_000))
        );
        assert_eq!(span.histogram.scheme, crate::doc::dist::Scheme::LogLinear8);
        let p99 = span.summary.p99.unwrap();
        let bound = span.histogram.percentile_error_bounds.unwrap().p99.unwrap();
        assert!(p99.abs_diff(1_000_000) <= bound);
        assert_eq!(doc.rates[0].per_interval, [1, 2]);
        assert_eq!(doc.rates[0].count, 3);
    }

    #[test]
    fn markdown_holds_a_row_per_series_and_rate_with_the_unit_in_the_header() {
        let mut doc = SpansDoc::new(Source::Live);
        let mut b = Bucketed::default();
        for v in [1_000, 2_000, 3_000] {
            b.record(v);
        }
        doc.spans.push(Series {
            name: "frame".into(),
            side: None,
            by: Some("comm".into()),
            group: Some("a|b".into()),
            latency: Latency::of_bucketed(&b),
            counters: Counters::default(),
        });
        doc.rates.push(Rate {
            probe: "tracepoint:sched:sched_switch".into(),
            by: None,
            group: None,
            count: 42,
            per_interval: vec![42],
        });
        let md = markdown(&doc, Unit::Us);
        assert!(
            md.contains("| series | count | min (µs) | p50 (µs)"),
            "{md}"
        );
        assert!(md.contains("a\\|b") && md.contains("| 3 |"), "{md}");
        assert!(
            md.contains("| tracepoint:sched:sched_switch | - | 42 |"),
            "{md}"
        );
        assert!(!md.contains("### Values"), "{md}");
    }

    fn plan() -> Plan {
        use crate::live::compile::{Request, compile};
        use crate::live::fields::Formats;
        use crate::live::program::Target;
        use crate::live::spec::{parse_endpoint, parse_span};
        let request = Request {
            spans: vec![parse_span("req=uprobe:/t:a..uretprobe:/t:a", None).unwrap()],
            rates: vec![parse_endpoint("uprobe:/t:tick").unwrap()],
            values: vec![],
            by: None,
            target: Target::Everything,
            interval_s: 5,
            duration_s: None,
            record: None,
            marker: None,
            ends_anywhere: false,
        };
        compile(&request, &Formats::new()).unwrap()
    }

    #[test]
    fn a_sessions_document_says_how_it_ran_and_what_each_probe_hit() {
        let mut last = snapshot_with(&[1000, 2000]);
        last.hits[0] = [3, 2];
        let mut outcome = Outcome {
            last,
            rate_history: vec![
                vec![BTreeMap::from([(None, 1)])],
                vec![BTreeMap::from([(None, 2)])],
            ],
            finished: true,
            error: None,
            stopped_by: "interrupted".to_string(),
            record: None,
            pids_full: false,
            launch_error: None,
        };
        let warnings = ["a warning".to_string()];
        let (doc, said) = session_document(
            &names(),
            &plan(),
            &mut outcome,
            (5, "every process"),
            &warnings,
        );
        assert_eq!(said, None);
        assert_eq!(doc.warnings, warnings);
        let run = doc.live.as_ref().unwrap();
        assert_eq!((run.intervals, run.interval_s), (2, 5));
        assert_eq!(run.stopped_by, "interrupted");
        assert_eq!(run.traced.as_deref(), Some("every process"));
        let hits: Vec<(&str, u64)> = run
            .probes
            .iter()
            .map(|p| (p.role.as_str(), p.hits))
            .collect();
        assert_eq!(hits, [("start", 3), ("end", 2)]);
        assert_eq!(doc.rates[0].per_interval, [1, 1]);
        let text = totals_text(&names(), &outcome.last, &outcome.stopped_by, Unit::Us);
        assert!(text.starts_with("── totals (interrupted) ──\n"), "{text}");
        assert!(text.ends_with("rate usdt:/t:p:tick: 2 events\n"), "{text}");
    }
}
