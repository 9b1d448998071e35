//! Rendering lab results: a terminal table sorted by median, histograms with `--detail`, the
//! `lab-ipc` JSON document, and Markdown. Every value says its unit; JSON is in ns.

use std::fmt::Write;

use serde_json::{Value, json};

use super::clock::TimerOverhead;
use super::pattern::Stop;
use super::run::Outcome;
use super::usage::Usage;
use super::{Pattern, Settings, bytes};
use crate::stats::{Distribution, Unit};

/// Everything a lab run reports.
#[derive(Debug, Clone)]
pub struct LabReport<'a> {
    /// what each configuration measured
    pub outcomes: &'a [Outcome],
    /// the clock's own cost
    pub timer: TimerOverhead,
    /// counts and limits
    pub settings: &'a Settings,
    /// configurations that did not run, with the reason
    pub skipped: &'a [(String, String)],
    /// Ctrl-C cut the run short
    pub interrupted: bool,
}

/// A duration with a unit that fits it: `31 ns`, `4.57 µs`, `12.3 ms`.
pub fn human(ns: u64) -> String {
    let v = ns as f64;
    let (value, unit) = if ns < 1_000 {
        return format!("{ns} ns");
    } else if ns < 1_000_000 {
        (v / 1e3, "µs")
    } else if ns < 1_000_000_000 {
        (v / 1e6, "ms")
    } else {
        (v / 1e9, "s")
    };
    let decimals = if value < 10.0 {
        2
    } else if value < 100.0 {
        1
    } else {
        0
    };
    format!("{value:.decimals$} {unit}")
}

fn per_msg(total: u64, messages: u64) -> f64 {
    if messages == 0 {
        0.0
    } else {
        total as f64 / messages as f64
    }
}

fn sorted(outcomes: &[Outcome]) -> Vec<&Outcome> {
    let mut rows: Vec<&Outcome> = outcomes.iter().collect();
    rows.sort_by_key(|o| {
        (
            o.latency.value_at_quantile(0.5).unwrap_or(u64::MAX),
            o.config.payload,
        )
    });
    rows
}

fn stop_note(o: &Outcome) -> Option<String> {
    if let Some(error) = o.failed() {
        return Some(format!(
            "FAILED after {} of the messages were sent ({} received): {error}",
            o.sent, o.received
        ));
    }
    match o.stop {
        Stop::Interrupted => Some("interrupted (Ctrl-C): partial".to_string()),
        _ => None,
    }
}

/// The header lines: what was run and what the clock costs.
pub fn header(report: &LabReport<'_>) -> String {
    let s = report.settings;
    let t = &report.timer;
    format!(
        "latscope lab ipc: up to {} messages per configuration after {} warm-up, at most {} each\n\
         timer: CLOCK_MONOTONIC, {} per read (median of {} back-to-back reads; min {}; resolution {}); it is inside every figure below\n\
         latency: ping-pong = round trip; open-loop = round trip from the intended send time; stream, burst, segments = one way (the writer starts sending → the peer has the whole message)\n\
         msgs/s and MB/s: throughput over the measured phase (not 1/latency); cs/msg and CPU/msg: context switches and CPU time per message, client + peer + broker\n",
        s.count,
        s.warmup,
        human(s.max_time_ns),
        human(t.median_ns),
        t.reads,
        human(t.min_ns),
        human(t.resolution_ns),
    )
}

/// The terminal table, one row per configuration, fastest median first.
pub fn text(report: &LabReport<'_>, detail: bool) -> String {
    let mut out = header(report);
    let _ = writeln!(
        out,
        "\n{:<15} {:<8} {:<21} {:>8} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>9} {:>7} {:>9}",
        "transport",
        "peer",
        "pattern",
        "payload",
        "n",
        "min",
        "p50",
        "p99",
        "p99.9",
        "max",
        "msgs/s",
        "MB/s",
        "cs/msg",
        "CPU/msg"
    );
    for o in sorted(report.outcomes) {
        let _ = writeln!(out, "{}", row(o));
        if let Some(note) = stop_note(o) {
            let _ = writeln!(out, "  ! {note}");
        }
    }
    out.push_str(&open_loop_notes(report.outcomes));
    for (config, why) in report.skipped {
        let _ = writeln!(out, "skipped {config}: {why}");
    }
    if report.interrupted {
        let _ = writeln!(
            out,
            "warning: interrupted (Ctrl-C); the results above are partial"
        );
    }
    if detail {
        for o in sorted(report.outcomes) {
            out.push_str(&histogram(o));
        }
    }
    out
}

fn cells(d: &Distribution) -> [String; 5] {
    let s = d.summary();
    let q = |q: f64| d.value_at_quantile(q).map_or("–".to_string(), human);
    [
        s.min().map_or("–".to_string(), human),
        q(0.5),
        q(0.99),
        q(0.999),
        s.max().map_or("–".to_string(), human),
    ]
}

fn row(o: &Outcome) -> String {
    let [min, p50, p99, p999, max] = cells(&o.latency);
    let n = o.messages();
    let total = o.total();
    let rate = o.msgs_per_s();
    format!(
        "{:<15} {:<8} {:<21} {:>8} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10.0} {:>9.1} {:>7.2} {:>9}",
        o.config.transport.name(),
        o.config.peer.name(),
        o.config.pattern.to_string(),
        bytes(o.config.payload),
        n,
        min,
        p50,
        p99,
        p999,
        max,
        rate,
        rate * o.config.payload as f64 / 1e6,
        per_msg(total.context_switches(), n),
        human(per_msg(total.cpu_ns, n).round() as u64),
    )
}

fn open_loop_notes(outcomes: &[Outcome]) -> String {
    let mut out = String::new();
    for o in outcomes {
        let (Some(u), Pattern::OpenLoop { rate }) = (&o.uncorrected, o.config.pattern) else {
            continue;
        };
        let q = |d: &Distribution, q: f64| d.value_at_quantile(q).map_or("–".into(), human);
        let _ = writeln!(
            out,
            "open-loop {} ({}) {} at {rate}/s: p50 {} / p99 {} / max {} from the intended send time; {} / {} / {} from the actual send time (what a closed-loop tool would report)",
            o.config.transport.name(),
            o.config.peer.name(),
            bytes(o.config.payload),
            q(&o.latency, 0.5),
            q(&o.latency, 0.99),
            o.latency.summary().max().map_or("–".into(), human),
            q(u, 0.5),
            q(u, 0.99),
            u.summary().max().map_or("–".into(), human),
        );
    }
    out
}

fn histogram(o: &Outcome) -> String {
    format!(
        "\n@{} {} ({}), {} (ns):\n{}",
        o.config.transport.name(),
        o.config.pattern,
        o.config.peer.name(),
        bytes(o.config.payload),
        crate::report::log2::render(o.latency.log2(Unit::Ns))
    )
}

fn summary_json(d: &Distribution) -> Value {
    let s = d.summary();
    let q = |q: f64| d.value_at_quantile(q);
    json!({
        "count": d.count(), "min": s.min(), "p50": q(0.5), "p90": q(0.9), "p99": q(0.99),
        "p999": q(0.999), "max": s.max(), "mean": s.mean(),
    })
}

fn side_json(u: Option<Usage>, n: u64) -> Value {
    match u {
        Some(u) => json!({
            "cpu_ns_per_msg": per_msg(u.cpu_ns, n),
            "ctx_switches_per_msg": per_msg(u.context_switches(), n),
            "voluntary_ctx_switches": u.voluntary, "involuntary_ctx_switches": u.involuntary,
            "cpu_ns": u.cpu_ns,
        }),
        None => Value::Null,
    }
}

fn pattern_params(p: &Pattern) -> Value {
    match *p {
        Pattern::PingPong => json!({}),
        Pattern::Stream { flush_bytes } => json!({ "flush_bytes": flush_bytes }),
        Pattern::Burst { n } => json!({ "burst": n }),
        Pattern::Segments { k } => json!({ "segments": k }),
        Pattern::OpenLoop { rate } => json!({ "rate_per_s": rate }),
    }
}

/// One result as JSON (all times in ns).
pub fn outcome_json(o: &Outcome) -> Value {
    let n = o.messages();
    let mut v = summary_json(&o.latency);
    let total = o.total();
    let extra = json!({
        "transport": o.config.transport.name(), "peer": o.config.peer.name(),
        "pattern": o.config.pattern.kind(), "params": pattern_params(&o.config.pattern),
        "payload": o.config.payload,
        "latency": if o.config.pattern.one_way() { "one-way" } else { "round-trip" },
        "msgs_per_s": o.msgs_per_s(), "bytes_per_s": o.msgs_per_s() * o.config.payload as f64,
        "ctx_switches_per_msg": per_msg(total.context_switches(), n),
        "cpu_ns_per_msg": per_msg(total.cpu_ns, n),
        "sides": { "client": side_json(Some(o.client), n), "peer": side_json(o.peer, n), "broker": side_json(o.broker, n) },
        "uncorrected": o.uncorrected.as_ref().map(summary_json),
        "elapsed_ns": o.elapsed_ns, "sent": o.sent, "received": o.received,
        "stop": match o.stop { Stop::Done => "done", Stop::TimeUp => "max-time", Stop::Interrupted => "interrupted", Stop::Failed(_) => "failed" },
        "error": o.failed(),
        "hdr": { "significant_digits": crate::stats::SIGNIFICANT_DIGITS, "encoding": "hdrhistogram-v2-base64", "data": o.latency.hdr_base64() },
    });
    if let (Value::Object(base), Value::Object(more)) = (&mut v, extra) {
        base.extend(more);
    }
    v
}

/// The `lab-ipc` document.
pub fn json(report: &LabReport<'_>) -> Value {
    let s = report.settings;
    json!({
        "kind": "lab-ipc", "unit": "ns",
        "timer_overhead_ns": report.timer.median_ns,
        "timer": { "clock": "CLOCK_MONOTONIC", "median_ns": report.timer.median_ns, "min_ns": report.timer.min_ns, "reads": report.timer.reads, "resolution_ns": report.timer.resolution_ns },
        "settings": { "count": s.count, "warmup": s.warmup, "max_time_ns": s.max_time_ns, "slots": s.slots, "ring_bytes": s.ring_bytes, "verify": s.verify },
        "interrupted": report.interrupted,
        "skipped": report.skipped.iter().map(|(c, why)| json!({"config": c, "reason": why})).collect::<Vec<_>>(),
        "results": sorted(report.outcomes).into_iter().map(outcome_json).collect::<Vec<_>>(),
    })
}

/// A Markdown table (ns).
pub fn markdown(report: &LabReport<'_>) -> String {
    let mut out = format!(
        "Timer overhead: {} ns per read (CLOCK_MONOTONIC). Latency in ns.\n\n| transport | peer | pattern | payload | n | min [ns] | p50 [ns] | p99 [ns] | p99.9 [ns] | max [ns] | msgs/s | cs/msg | CPU/msg [ns] |\n|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n",
        report.timer.median_ns
    );
    for o in sorted(report.outcomes) {
        let d = &o.latency;
        let q = |q: f64| d.value_at_quantile(q).map_or("–".into(), |v| v.to_string());
        let n = o.messages();
        let total = o.total();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {n} | {} | {} | {} | {} | {} | {:.0} | {:.2} | {:.0} |",
            o.config.transport.name(),
            o.config.peer.name(),
            o.config.pattern,
            bytes(o.config.payload),
            d.summary().min().map_or("–".into(), |v| v.to_string()),
            q(0.5),
            q(0.99),
            q(0.999),
            d.summary().max().map_or("–".into(), |v| v.to_string()),
            o.msgs_per_s(),
            per_msg(total.context_switches(), n),
            per_msg(total.cpu_ns, n),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_get_a_unit_that_fits() {
        assert_eq!(human(31), "31 ns");
        assert_eq!(human(4_567), "4.57 µs");
        assert_eq!(human(45_670), "45.7 µs");
        assert_eq!(human(456_700), "457 µs");
        assert_eq!(human(12_300_000), "12.3 ms");
        assert_eq!(human(2_000_000_000), "2.00 s");
    }
}
