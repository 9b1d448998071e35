//! Rendering lab results: a terminal table sorted by median, histograms with `--detail`, the
//! `lab-ipc` document ([`crate::doc::lab::LabIpcDoc`]), and Markdown. Every value says its
//! unit; the document is in ns.

use std::fmt::Write;

use super::clock::TimerOverhead;
use super::pattern::Stop;
use super::run::Outcome;
use super::usage::Usage;
use super::{Pattern, PatternKind, Settings, bytes};
use crate::doc::lab::{
    IpcResult, IpcSettings, LabIpcDoc, LatencyMeaning, PatternParams, SideUsage, Sides, Skipped,
    StopDoc, Timer,
};
use crate::doc::{Latency, Summary};
pub use crate::report::format::human;
use crate::report::format::markdown_cell;
use crate::stats::Log2Counts;

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

/// The pattern as shown (`stream/flush 4 KiB`), rebuilt from the document.
fn pattern_text(r: &IpcResult) -> String {
    let p = &r.params;
    let param = [p.flush_bytes, p.burst, p.segments, p.rate_per_s]
        .into_iter()
        .flatten()
        .next()
        .unwrap_or(0);
    PatternKind::from_name(&r.pattern)
        .map_or_else(|| r.pattern.clone(), |k| k.with_param(param).to_string())
}

fn stop_note(r: &IpcResult) -> Option<String> {
    if let Some(error) = &r.error {
        return Some(format!(
            "FAILED after {} of the messages were sent ({} received): {error}",
            r.sent, r.received
        ));
    }
    (r.stop == StopDoc::Interrupted).then(|| "interrupted (Ctrl-C): partial".to_string())
}

/// The header lines: what was run and what the clock costs.
pub fn header(doc: &LabIpcDoc) -> String {
    let s = &doc.settings;
    let t = &doc.timer;
    format!(
        "latscope lab ipc: up to {} messages per configuration after {} warm-up, at most {} each\n\
         timer: {}, {} per read (median of {} back-to-back reads; min {}; resolution {}); it is inside every figure below\n\
         latency: ping-pong = round trip; open-loop = round trip from the intended send time; stream, burst, segments = one way (the writer starts sending → the peer has the whole message)\n\
         msgs/s and MB/s: throughput over the measured phase (not 1/latency); cs/msg and CPU/msg: context switches and CPU time per message, client + peer + broker\n",
        s.count,
        s.warmup,
        human(s.max_time_ns),
        t.clock,
        human(t.median_ns),
        t.reads,
        human(t.min_ns),
        human(t.resolution_ns),
    )
}

/// The terminal table, one row per configuration, fastest median first (the document's order).
pub fn text(doc: &LabIpcDoc, detail: bool) -> String {
    let mut out = header(doc);
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
    for r in &doc.results {
        let _ = writeln!(out, "{}", row(r));
        if let Some(note) = stop_note(r) {
            let _ = writeln!(out, "  ! {note}");
        }
    }
    out.push_str(&open_loop_notes(&doc.results));
    for s in &doc.skipped {
        let _ = writeln!(out, "skipped {}: {}", s.config, s.reason);
    }
    if doc.interrupted {
        let _ = writeln!(
            out,
            "warning: interrupted (Ctrl-C); the results above are partial"
        );
    }
    if detail {
        for r in &doc.results {
            out.push_str(&histogram(r));
        }
    }
    out
}

fn cell(v: Option<u64>) -> String {
    v.map_or("–".to_string(), human)
}

fn row(r: &IpcResult) -> String {
    let s = &r.dist.summary;
    format!(
        "{:<15} {:<8} {:<21} {:>8} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10.0} {:>9.1} {:>7.2} {:>9}",
        r.transport,
        r.peer,
        pattern_text(r),
        bytes(r.payload as usize),
        s.count,
        cell(s.min),
        cell(s.p50),
        cell(s.p99),
        cell(s.p999),
        cell(s.max),
        r.msgs_per_s,
        r.bytes_per_s / 1e6,
        r.ctx_switches_per_msg,
        human(r.cpu_ns_per_msg.round() as u64),
    )
}

fn open_loop_notes(results: &[IpcResult]) -> String {
    let mut out = String::new();
    for r in results {
        let (Some(u), Some(rate)) = (&r.uncorrected, r.params.rate_per_s) else {
            continue;
        };
        let s = &r.dist.summary;
        let _ = writeln!(
            out,
            "open-loop {} ({}) {} at {rate}/s: p50 {} / p99 {} / max {} from the intended send time; {} / {} / {} from the actual send time (what a closed-loop tool would report)",
            r.transport,
            r.peer,
            bytes(r.payload as usize),
            cell(s.p50),
            cell(s.p99),
            cell(s.max),
            cell(u.p50),
            cell(u.p99),
            cell(u.max),
        );
    }
    out
}

fn histogram(r: &IpcResult) -> String {
    let mut log2 = Log2Counts::default();
    for b in &r.dist.histogram.buckets {
        log2.record_n(b.min, b.count);
    }
    format!(
        "\n@{} {} ({}), {} (ns):\n{}",
        r.transport,
        pattern_text(r),
        r.peer,
        bytes(r.payload as usize),
        crate::report::log2::render(&log2)
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
        kept: o.kept.clone(),
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
pub fn markdown(doc: &LabIpcDoc) -> String {
    let mut out = format!(
        "Timer overhead: {} ns per read ({}). Latency in ns.\n\n| transport | peer | pattern | payload | n | min [ns] | p50 [ns] | p99 [ns] | p99.9 [ns] | max [ns] | msgs/s | cs/msg | CPU/msg [ns] |\n|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n",
        doc.timer.median_ns, doc.timer.clock
    );
    let n = |v: Option<u64>| v.map_or("–".into(), |v| v.to_string());
    for r in &doc.results {
        let s = &r.dist.summary;
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0} | {:.2} | {:.0} |",
            markdown_cell(&r.transport),
            markdown_cell(&r.peer),
            markdown_cell(&pattern_text(r)),
            bytes(r.payload as usize),
            s.count,
            n(s.min),
            n(s.p50),
            n(s.p99),
            n(s.p999),
            n(s.max),
            r.msgs_per_s,
            r.ctx_switches_per_msg,
            r.cpu_ns_per_msg,
        );
    }
    out
}
