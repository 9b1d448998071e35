//! `latscope lab x11`: build the configurations, find or start the server, run, print.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};

use crate::cli::{Format, X11Args, X11BackendArgs};
use latscope::doc::lab::Timer;
use latscope::lab::ipc::clock::{Monotonic, timer_overhead};
use latscope::lab::x11::report::{self, X11Report};
use latscope::lab::x11::run::{Lab, Outcome, Stop};
use latscope::lab::x11::server::Server;
use latscope::lab::x11::{Method, Pattern, Settings, Upload, Via, X11Error, x11perf};

/// A usage error: printed by clap, exit status 2.
fn usage(message: impl std::fmt::Display) -> ! {
    super::usage_error("lab x11", clap::error::ErrorKind::ValueValidation, message)
}

const PATTERNS: [&str; 3] = ["round-trip", "upload", "config"];

fn parse_list<T>(
    option: &str,
    names: &[String],
    parse: impl Fn(&str) -> Option<T>,
    known: &str,
) -> Vec<T> {
    names
        .iter()
        .map(|n| {
            parse(n).unwrap_or_else(|| {
                usage(format!("{option}: unknown value '{n}' (one of: {known})"))
            })
        })
        .collect()
}

fn uploads(args: &X11Args) -> Vec<Pattern> {
    let methods = parse_list("--method", &args.method, Method::parse, "put, shm");
    let mut out = Vec::new();
    for &method in &methods {
        for &(width, height) in &args.size {
            for &depth in &args.depth {
                let segments: Vec<u32> = if method == Method::Shm && !args.pipelined {
                    args.segments.clone()
                } else {
                    vec![1]
                };
                for k in segments {
                    out.push(Pattern::Upload(Upload {
                        method,
                        width,
                        height,
                        depth,
                        segments: k,
                        pipelined: args.pipelined,
                    }));
                }
            }
        }
    }
    out
}

fn configs(args: &X11Args) -> Vec<Pattern> {
    let vias = parse_list("--via", &args.via, Via::parse, "inproc, dbus");
    let caches = parse_list(
        "--cache",
        &args.cache,
        |c| match c {
            "off" | "no" => Some(false),
            "on" | "yes" => Some(true),
            _ => None,
        },
        "off, on",
    );
    vias.iter()
        .flat_map(|&via| {
            caches
                .iter()
                .map(move |&cache| Pattern::Config { via, cache })
        })
        .collect()
}

/// Refuses, before building it, more configurations than `--max-configs`.
fn check_size(args: &X11Args) {
    let uploads = [
        args.method.len(),
        args.size.len(),
        args.depth.len(),
        args.segments.len(),
    ]
    .iter()
    .fold(1u128, |n, &k| n.saturating_mul(k.max(1) as u128));
    let total = uploads + (args.via.len() * args.cache.len()) as u128 + 1;
    if total > u128::from(args.max_configs) {
        usage(format!(
            "these lists make up to {total} configurations; at most {} (--max-configs raises the limit)",
            args.max_configs
        ));
    }
}

/// The configurations asked for, in the order given.
pub fn plan(args: &X11Args) -> Vec<Pattern> {
    check_size(args);
    for p in &args.patterns {
        if !PATTERNS.contains(&p.as_str()) {
            usage(format!(
                "unknown pattern '{p}' (one of: {})",
                PATTERNS.join(", ")
            ));
        }
    }
    let wanted = |name: &str| args.patterns.is_empty() || args.patterns.iter().any(|p| p == name);
    let mut out = Vec::new();
    if wanted("round-trip") {
        out.push(Pattern::RoundTrip);
    }
    if wanted("upload") {
        out.extend(uploads(args));
    }
    if wanted("config") {
        out.extend(configs(args));
    }
    out
}

fn settings(args: &X11Args) -> Settings {
    Settings {
        count: args.count,
        warmup: args.warmup,
        max_time_ns: u64::try_from(args.max_time.as_nanos()).unwrap_or(u64::MAX),
        max_spans: args.max_spans.get(),
        timeout_ns: u64::try_from(args.timeout.as_nanos()).unwrap_or(u64::MAX),
    }
}

/// What a run gave.
struct Ran {
    outcomes: Vec<Outcome>,
    skipped: Vec<(String, String)>,
    interrupted: bool,
    server_gone: bool,
    /// the server broke the protocol while a configuration was set up: no more are run on it
    broken: Option<String>,
}

fn execute(server: &Server, patterns: &[Pattern], settings: &Settings) -> Ran {
    let cancel = crate::signals::cancel_on_interrupt();
    let mut lab = Lab::new(
        server,
        settings.clone(),
        cancel.clone(),
        std::env::current_exe().ok(),
    );
    let bar = ProgressBar::new(patterns.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{pos}/{len} {wide_msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut ran = Ran {
        outcomes: Vec::new(),
        skipped: Vec::new(),
        interrupted: false,
        server_gone: false,
        broken: None,
    };
    for p in patterns {
        if cancel.is_raised() {
            break;
        }
        bar.set_message(p.to_string());
        match lab.run(p) {
            Ok(o) => {
                let failed = o.stop == Stop::Failed;
                ran.outcomes.push(o);
                if failed && server.gone_within(std::time::Duration::from_millis(500)) {
                    ran.server_gone = true;
                    break;
                }
            }
            Err(e) if server.gone_within(std::time::Duration::from_millis(500)) => {
                ran.skipped.push((p.to_string(), e.to_string()));
                ran.server_gone = true;
                break;
            }
            Err(e @ X11Error::Misbehaved(_)) => {
                ran.broken = Some(format!("{p}: {e}"));
                ran.skipped.push((p.to_string(), e.to_string()));
                break;
            }
            Err(e) => ran.skipped.push((p.to_string(), e.to_string())),
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    ran.interrupted = cancel.is_raised();
    ran
}

fn render(doc: &latscope::doc::x11::LabX11Doc, format: Format) -> String {
    match format {
        Format::Text => report::text(doc),
        Format::Json => latscope::doc::to_json(doc, false),
        Format::Markdown => report::markdown(doc),
        Format::Csv => crate::commands::unsupported("lab x11", format),
    }
}

/// The `lab-x11` document of a run, with the clock's cost measured over `reads` reads.
fn document(
    server: &Server,
    settings: &Settings,
    ran: &Ran,
    reads: usize,
) -> latscope::doc::x11::LabX11Doc {
    let t = timer_overhead(&Monotonic, reads);
    report::document(&X11Report {
        server: &server.info,
        timer: Timer {
            clock: "CLOCK_MONOTONIC".to_string(),
            median_ns: t.median_ns,
            min_ns: t.min_ns,
            reads: t.reads,
            resolution_ns: t.resolution_ns,
        },
        settings,
        outcomes: &ran.outcomes,
        skipped: &ran.skipped,
        interrupted: ran.interrupted,
    })
}

/// The x11perf tests mirroring `patterns` on `server` (each once); warns when there is none.
fn x11perf_tests(server: &Server, patterns: &[Pattern]) -> Vec<x11perf::Test> {
    let mut tests: Vec<x11perf::Test> = patterns
        .iter()
        .filter_map(|p| x11perf::test_for(p, server.info.root.0))
        .collect();
    tests.sort();
    tests.dedup();
    if tests.is_empty() {
        eprintln!(
            "latscope: --compare-x11perf: no configuration has an x11perf test (x11perf has pipelined square uploads of 10, 100 and 500 pixels at the root window's depth {}: --pipelined --size 10x10 --depth {})",
            server.info.root.0, server.info.root.0
        );
    }
    tests
}

/// x11perf's rates for `tests` on `server` (nothing to run: none).
fn run_x11perf(
    server: &Server,
    tests: &[x11perf::Test],
) -> Result<std::collections::BTreeMap<String, f64>> {
    if tests.is_empty() {
        return Ok(Default::default());
    }
    let bar = ProgressBar::new_spinner();
    bar.set_message(format!(
        "x11perf {}",
        tests
            .iter()
            .map(|t| t.option.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    ));
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    let rates = x11perf::run(tests, &server.client_env(), 1);
    bar.finish_and_clear();
    Ok(rates?)
}

/// Runs `latscope lab x11`.
pub fn run(args: &X11Args) -> Result<()> {
    let patterns = plan(args);
    let settings = settings(args);
    let save = crate::commands::output_opt("--save", args.save.path())?;
    let cancel = crate::signals::cancel_on_interrupt();
    let server = Server::open(
        args.display.as_deref(),
        &args.xvfb_arg,
        Duration::from_nanos(settings.timeout_ns),
        &cancel,
    )?;
    let tests = if args.compare_x11perf {
        x11perf_tests(&server, &patterns)
    } else {
        Vec::new()
    };
    let before = run_x11perf(&server, &tests)?;
    let ran = execute(&server, &patterns, &settings);
    let after = if ran.server_gone || ran.interrupted || ran.broken.is_some() {
        Default::default()
    } else {
        run_x11perf(&server, &tests)?
    };
    let mut doc = document(&server, &settings, &ran, 100_000);
    if !tests.is_empty() {
        let rates = x11perf::Rates { before, after };
        report::add_x11perf(&mut doc, &ran.outcomes, &rates);
    }
    crate::commands::print(&render(&doc, args.out.get()))?;
    if let Some(save) = &save {
        let text = latscope::doc::to_json(&doc, false);
        crate::commands::save_run(save, text.as_bytes(), !doc.results.is_empty())?;
    }
    if ran.server_gone {
        bail!(
            "the X server {} went away during the run; the rows measured before are printed above",
            server.info.display
        );
    }
    if let Some(why) = &ran.broken {
        bail!(
            "{why}; the configurations after it were not run on the X server {}, the rows measured before are printed above",
            server.info.display
        );
    }
    let failed: Vec<String> = doc
        .results
        .iter()
        .filter_map(|r| r.error.as_ref().map(|e| format!("{}: {e}", r.label())))
        .collect();
    crate::commands::lab_outcome(
        failed,
        !doc.results.is_empty(),
        ran.interrupted,
        &ran.skipped,
    )
}

/// The demo's X11 part: the Java2D and libkscreen questions on `$DISPLAY` or a private Xvfb,
/// as text; `None` when there is no X server to be had.
pub fn demo() -> Result<Option<latscope::doc::x11::LabX11Doc>> {
    use latscope::lab::x11::server::find_xvfb;
    let have_display = std::env::var_os("DISPLAY").is_some_and(|d| !d.is_empty());
    if !have_display && find_xvfb().is_none() {
        return Ok(None);
    }
    let mut patterns = vec![Pattern::RoundTrip];
    for (method, segments) in [
        (Method::Put, 1),
        (Method::Shm, 1),
        (Method::Shm, 4),
        (Method::Shm, 16),
    ] {
        patterns.push(Pattern::Upload(Upload {
            method,
            width: 32,
            height: 32,
            depth: 8,
            segments,
            pipelined: false,
        }));
    }
    for via in [Via::Inproc, Via::Dbus] {
        patterns.push(Pattern::Config { via, cache: false });
    }
    let settings = Settings {
        count: 3_000,
        warmup: 100,
        max_time_ns: 300_000_000,
        max_spans: 0,
        timeout_ns: 10_000_000_000,
    };
    let cancel = crate::signals::cancel_on_interrupt();
    let server = Server::open(
        None,
        &[],
        Duration::from_nanos(settings.timeout_ns),
        &cancel,
    )?;
    let ran = execute(&server, &patterns, &settings);
    Ok(Some(document(&server, &settings, &ran, 10_000)))
}

/// Runs the hidden `latscope lab x11-backend`.
pub fn backend(args: &X11BackendArgs) -> Result<()> {
    latscope::lab::x11::backend::serve(&args.address).context("x11 backend")
}
