//! Rendering the X11 lab: the `lab-x11` document built from the outcomes, a terminal table
//! sorted by median, and Markdown. Every value says its unit; the document is in ns.

use std::fmt::Write;

use super::run::{Outcome, Stop};
use super::server::ServerInfo;
use super::x11perf::{self, Rates};
use super::{Method, Pattern, Settings, Via};
use crate::doc::Latency;
use crate::doc::lab::{SideUsage, Skipped, StopDoc, Timer};
use crate::doc::x11::{
    LabX11Doc, ServerDoc, WireDoc, X11Result, X11Settings, X11Sides, X11perfDoc,
};
use crate::lab::ipc::usage::Usage;
use crate::report::format::{human, markdown_cell};

fn per_op(total: u64, ops: u64) -> f64 {
    if ops == 0 {
        0.0
    } else {
        total as f64 / ops as f64
    }
}

fn side(u: &Usage, ops: u64) -> SideUsage {
    SideUsage {
        cpu_ns_per_msg: per_op(u.cpu_ns, ops),
        ctx_switches_per_msg: per_op(u.context_switches(), ops),
        voluntary_ctx_switches: u.voluntary,
        involuntary_ctx_switches: u.involuntary,
        cpu_ns: u.cpu_ns,
    }
}

/// The server as the document names it.
pub fn server_doc(info: &ServerInfo) -> ServerDoc {
    ServerDoc {
        display: info.display.clone(),
        vendor: info.vendor.clone(),
        release: info.release,
        private_xvfb: info.private_xvfb,
        extensions: info.extensions.clone(),
        max_request_bytes: info.max_request_bytes,
        shm: info.shm.map(|(a, b)| format!("{a}.{b}")),
        randr: info.randr.map(|(a, b)| format!("{a}.{b}")),
        root: info.root,
    }
}

/// One outcome as a document row.
pub fn result(o: &Outcome) -> X11Result {
    let sides = [Some(o.client), o.server, o.backend, o.broker];
    let total = sides
        .iter()
        .flatten()
        .fold(Usage::default(), |a, u| a.plus(u));
    let secs = o.elapsed_ns as f64 / 1e9;
    let rate = if secs > 0.0 { o.ops as f64 / secs } else { 0.0 };
    let (method, size, depth, segments, pipelined) = match o.pattern {
        Pattern::Upload(u) => (
            Some(u.method.name().to_string()),
            Some(format!("{}x{}", u.width, u.height)),
            Some(u.depth),
            (u.method == Method::Shm).then_some(if u.pipelined { 1 } else { u.segments }),
            u.pipelined,
        ),
        _ => (None, None, None, None, false),
    };
    let (via, cache) = match o.pattern {
        Pattern::Config { via, cache } => (Some(via.name().to_string()), Some(cache)),
        _ => (None, None),
    };
    X11Result {
        pattern: o.pattern.name().to_string(),
        method,
        size,
        depth,
        segments,
        pipelined,
        via,
        cache,
        latency_meaning: o.meaning.name().to_string(),
        completion: o.completion.map(str::to_string),
        dist: Latency::of(&o.latency),
        ops_per_s: rate,
        bytes_per_op: o.bytes_per_op,
        bytes_per_s: rate * o.bytes_per_op as f64,
        ctx_switches_per_op: per_op(total.context_switches(), o.ops),
        cpu_ns_per_op: per_op(total.cpu_ns, o.ops),
        sides: X11Sides {
            client: Some(side(&o.client, o.ops)),
            server: o.server.map(|u| side(&u, o.ops)),
            backend: o.backend.map(|u| side(&u, o.ops)),
            broker: o.broker.map(|u| side(&u, o.ops)),
        },
        max_in_flight: o.max_in_flight,
        verified: o.verified,
        ops: o.ops,
        elapsed_ns: o.elapsed_ns,
        stop: match o.stop {
            Stop::Done => StopDoc::Done,
            Stop::MaxTime => StopDoc::MaxTime,
            Stop::Interrupted => StopDoc::Interrupted,
            Stop::Failed => StopDoc::Failed,
        },
        error: o.error.clone(),
        kept: o.kept.clone(),
        wire: (o.wire.requests > 0).then_some(WireDoc {
            requests: o.wire.requests,
            writes: o.wire.writes,
            reads: o.wire.reads,
            bytes_out: o.wire.bytes_out,
        }),
        x11perf: None,
    }
}

/// Puts x11perf's rate beside every row it has a test for.
pub fn add_x11perf(doc: &mut LabX11Doc, outcomes: &[Outcome], rates: &Rates) {
    let root_depth = doc.server.root.0;
    for o in outcomes {
        let Some(test) = x11perf::test_for(&o.pattern, root_depth) else {
            continue;
        };
        let Some((before, after, mean)) = rates.mean(&test) else {
            continue;
        };
        let label = result(o).label();
        for r in doc.results.iter_mut().filter(|r| r.label() == label) {
            r.x11perf = Some(X11perfDoc {
                test: test.option.clone(),
                before_per_s: before,
                after_per_s: after,
                mean_per_s: mean,
                ratio: if mean > 0.0 {
                    r.ops_per_s / mean
                } else {
                    f64::NAN
                },
            });
        }
    }
}

/// Everything a run reports.
#[derive(Debug)]
pub struct X11Report<'a> {
    /// the server
    pub server: &'a ServerInfo,
    /// the clock and its cost
    pub timer: Timer,
    /// counts and limits
    pub settings: &'a Settings,
    /// what each configuration measured
    pub outcomes: &'a [Outcome],
    /// (configuration, reason) of those that did not run
    pub skipped: &'a [(String, String)],
    /// Ctrl-C
    pub interrupted: bool,
}

/// The `lab-x11` document: rows sorted by median (then by label, so ties are stable).
pub fn document(r: &X11Report<'_>) -> LabX11Doc {
    let settings = X11Settings {
        count: r.settings.count,
        warmup: r.settings.warmup,
        max_time_ns: r.settings.max_time_ns,
    };
    let mut doc = LabX11Doc::new(server_doc(r.server), r.timer.clone(), settings);
    doc.interrupted = r.interrupted;
    doc.skipped = r
        .skipped
        .iter()
        .map(|(config, reason)| Skipped {
            config: config.clone(),
            reason: reason.clone(),
        })
        .collect();
    doc.results = r.outcomes.iter().map(result).collect();
    doc.results
        .sort_by_key(|x| (x.dist.summary.p50.unwrap_or(u64::MAX), x.label()));
    doc
}

fn cell(v: Option<u64>) -> String {
    v.map_or("–".to_string(), human)
}

fn side_cs(s: &Option<SideUsage>) -> String {
    s.as_ref().map_or("–".to_string(), |s| {
        format!("{:.2}", s.ctx_switches_per_msg)
    })
}

fn side_cpu(s: &Option<SideUsage>) -> String {
    s.as_ref()
        .map_or("–".to_string(), |s| human(s.cpu_ns_per_msg.round() as u64))
}

/// The header lines: which server, what a sample means.
pub fn header(doc: &LabX11Doc) -> String {
    let s = &doc.server;
    let started = if s.private_xvfb {
        " (a private Xvfb latscope started)"
    } else {
        ""
    };
    format!(
        "latscope lab x11 on {}{started}: {} release {}, root {}x{} depth {}; MIT-SHM {}, RandR {}; requests up to {} B\n\
         extensions: {}\n\
         up to {} operations per configuration after {} warm-up, at most {} each; timer {} per read\n\
         latency: round-trip = request → reply; upload until-done = issue → the client knows the server is done with the data (put: XSync's GetInputFocus reply; shm: ShmCompletion event, then the segment is reused); pipelined = one request's issue → the next one's (the samples add up to the run; one sync at the end); config = the whole query as the caller sees it\n\
         ops/s and MB/s: throughput over the measured phase (not 1/latency); cs/op and CPU/op: client + X server (+ backend + dbus-daemon) per operation; X cs/op and X CPU/op: the X server's alone (from /proc), what the server can sustain whatever the client\n",
        s.display,
        s.vendor,
        s.release,
        s.root.1,
        s.root.2,
        s.root.0,
        s.shm.as_deref().unwrap_or("absent"),
        s.randr.as_deref().unwrap_or("absent"),
        s.max_request_bytes,
        s.extensions.join(" "),
        doc.settings.count,
        doc.settings.warmup,
        human(doc.settings.max_time_ns),
        human(doc.timer.median_ns),
    )
}

fn note(r: &X11Result) -> Option<String> {
    if let Some(e) = &r.error {
        return Some(format!("FAILED after {} operations: {e}", r.ops));
    }
    (r.stop == StopDoc::Interrupted).then(|| "interrupted: partial".to_string())
}

/// The terminal table, fastest median first.
pub fn text(doc: &LabX11Doc) -> String {
    let mut out = header(doc);
    let _ = writeln!(
        out,
        "\n{:<34} {:>7} {:>9} {:>9} {:>9} {:>9} {:>11} {:>8} {:>7} {:>9} {:>9} {:>9}",
        "configuration",
        "n",
        "min",
        "p50",
        "p99",
        "max",
        "ops/s",
        "MB/s",
        "cs/op",
        "X cs/op",
        "CPU/op",
        "X CPU/op"
    );
    for r in &doc.results {
        let s = &r.dist.summary;
        let _ = writeln!(
            out,
            "{:<34} {:>7} {:>9} {:>9} {:>9} {:>9} {:>11.0} {:>8.1} {:>7.2} {:>9} {:>9} {:>9}",
            r.label(),
            s.count,
            cell(s.min),
            cell(s.p50),
            cell(s.p99),
            cell(s.max),
            r.ops_per_s,
            r.bytes_per_s / 1e6,
            r.ctx_switches_per_op,
            side_cs(&r.sides.server),
            human(r.cpu_ns_per_op.round() as u64),
            side_cpu(&r.sides.server),
        );
        if let Some(x) = &r.x11perf {
            let _ = writeln!(
                out,
                "  x11perf {} on the same server: {:.0}/s (before {:.0}, after {:.0}); latscope/x11perf {:.2}",
                x.test, x.mean_per_s, x.before_per_s, x.after_per_s, x.ratio
            );
        }
        if let Some(n) = note(r) {
            let _ = writeln!(out, "  ! {n}");
        }
    }
    for s in &doc.skipped {
        let _ = writeln!(out, "skipped {}: {}", s.config, s.reason);
    }
    if doc.interrupted {
        let _ = writeln!(out, "warning: interrupted; the results above are partial");
    }
    out
}

/// A Markdown table of the same rows.
pub fn markdown(doc: &LabX11Doc) -> String {
    let s = &doc.server;
    let mut out = format!(
        "X server: {} on {} (release {}). Latency in ns.\n\n| configuration | meaning | n | min [ns] | p50 [ns] | p99 [ns] | max [ns] | ops/s | MB/s | cs/op | CPU/op [ns] |\n|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n",
        markdown_cell(&s.vendor),
        markdown_cell(&s.display),
        s.release
    );
    let num = |v: Option<u64>| v.map_or("–".to_string(), |v| v.to_string());
    for r in &doc.results {
        let m = &r.dist.summary;
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {:.0} | {:.1} | {:.2} | {:.0} |",
            markdown_cell(&r.label()),
            r.latency_meaning,
            m.count,
            num(m.min),
            num(m.p50),
            num(m.p99),
            num(m.max),
            r.ops_per_s,
            r.bytes_per_s / 1e6,
            r.ctx_switches_per_op,
            r.cpu_ns_per_op
        );
    }
    for s in &doc.skipped {
        let _ = writeln!(
            out,
            "\nSkipped {}: {}",
            markdown_cell(&s.config),
            markdown_cell(&s.reason)
        );
    }
    out
}

/// `inproc`/`dbus` as the command line names them (for the CLI's error messages).
pub fn via_names() -> [&'static str; 2] {
    [Via::Inproc.name(), Via::Dbus.name()]
}
