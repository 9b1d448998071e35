//! Rendering lab results: a terminal table sorted by median, histograms with `--detail`, the
//! `lab-ipc` document ([`crate::doc::lab::LabIpcDoc`]), and Markdown. Every value says its
//! unit; the document is in ns.

use std::fmt::Write;

use super::clock::TimerOverhead;
use super::pattern::Stop;
use super::run::Outcome;
use super::usage::Usage;
use super::{Pattern, Settings, bytes};
use crate::doc::lab::{
    IpcResult, IpcSettings, LabIpcDoc, LatencyMeaning, PatternParams, SideUsage, Sides, Skipped,
    StopDoc, Timer,
};
use crate::doc::{Latency, Summary};
pub use crate::report::format::human;
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

fn side(u: Option<Usage>, n: u64) -> Option<SideUsage> {
    u.map(|u| SideUsage {
        cpu_ns_per_msg: per_msg(u.cpu_ns, n),
        ctx_switches_per_msg: per_msg(u.context_switches(), n),
        voluntary_ctx_switches: u.voluntary,
        involuntary_ctx_switches: u.involuntary,
        cpu_ns: u.cpu_ns,
    })
}

fn pattern_params(p: &Pattern) -> PatternParams {
    let none = PatternParams::default();
    match *p {
        Pattern::PingPong => none,
        Pattern::Stream { flush_bytes } => PatternParams {
            flush_bytes: Some(flush_bytes as u64),
            ..none
        },
        Pattern::Burst { n } => PatternParams {
            burst: Some(n),
            ..none
        },
        Pattern::Segments { k } => PatternParams {
            segments: Some(k as u64),
            ..none
        },
        Pattern::OpenLoop { rate } => PatternParams {
            rate_per_s: Some(rate),
            ..none
        },
    }
}

/// One configuration's result (all times in ns).
pub fn result(o: &Outcome) -> IpcResult {
    let n = o.messages();
    let total = o.total();
    IpcResult {
        transport: o.config.transport.name().to_string(),
        peer: o.config.peer.name().to_string(),
        pattern: o.config.pattern.kind().to_string(),
        params: pattern_params(&o.config.pattern),
        payload: o.config.payload as u64,
        latency: if o.config.pattern.one_way() {
            LatencyMeaning::OneWay
        } else {
            LatencyMeaning::RoundTrip
        },
        dist: Latency::of(&o.latency),
        uncorrected: o.uncorrected.as_ref().map(Summary::of),
        msgs_per_s: o.msgs_per_s(),
        bytes_per_s: o.msgs_per_s() * o.config.payload as f64,
        ctx_switches_per_msg: per_msg(total.context_switches(), n),
        cpu_ns_per_msg: per_msg(total.cpu_ns, n),
        sides: Sides {
            client: side(Some(o.client), n),
            peer: side(o.peer, n),
            broker: side(o.broker, n),
        },
        elapsed_ns: o.elapsed_ns,
        sent: o.sent,
        received: o.received,
        stop: match o.stop {
            Stop::Done => StopDoc::Done,
            Stop::TimeUp => StopDoc::MaxTime,
            Stop::Interrupted => StopDoc::Interrupted,
            Stop::Failed(_) => StopDoc::Failed,
        },
        error: o.failed(),
    }
}

/// The `lab-ipc` document.
pub fn document(report: &LabReport<'_>) -> LabIpcDoc {
    let s = report.settings;
    let t = &report.timer;
    let timer = Timer {
        clock: "CLOCK_MONOTONIC".to_string(),
        median_ns: t.median_ns,
        min_ns: t.min_ns,
        reads: t.reads,
        resolution_ns: t.resolution_ns,
    };
    let settings = IpcSettings {
        count: s.count,
        warmup: s.warmup,
        max_time_ns: s.max_time_ns,
        slots: s.slots as u64,
        ring_bytes: s.ring_bytes as u64,
        verify: s.verify,
    };
    let mut doc = LabIpcDoc::new(timer, settings);
    doc.interrupted = report.interrupted;
    doc.skipped = report
        .skipped
        .iter()
        .map(|(config, reason)| Skipped {
            config: config.clone(),
            reason: reason.clone(),
        })
        .collect();
    doc.results = sorted(report.outcomes).into_iter().map(result).collect();
    doc
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
