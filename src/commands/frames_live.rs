//! `latscope frames --live`: the stages of `frames` from uprobes on a running compositor and its
//! client, without WAYLAND_DEBUG's cost ([`latscope::frames::live`]).
//!
//! A mode of `frames` rather than of `live`: the result is the same stage table and `frames`
//! document as the logs give, and the user asks the same question (where a frame's time goes);
//! only the source differs. It runs bpftrace through `live`'s runner: a private program file,
//! bpftrace dying with latscope, the client held before `execve` until every probe is attached
//! (its process group ended at the end), and Ctrl-C or `--duration` keeping what was captured.

use std::cell::RefCell;

use anyhow::{Context, Result, bail};

use crate::cli::FramesArgs;
use crate::signals;
use latscope::frames::live::{self, Event, Spec};
use latscope::live::check;
use latscope::live::launch;
use latscope::live::output::Snapshot;
use latscope::live::runner::{self, RunOptions};

/// Runs `latscope frames --live`.
pub fn run(args: &FramesArgs) -> Result<()> {
    let Some(compositor) = args.compositor_pid else {
        usage("--live needs --compositor-pid");
    };
    if args.client_pid.is_none() && args.command.is_empty() {
        usage("--live needs the client: --client-pid PID, or its command after `--`");
    }
    let report_to = super::output_opt("--report", args.output.report.as_deref())?;
    let bpftrace = check::bpftrace()?;
    check::privileges()?;
    check::process(compositor)?;
    if let Some(pid) = args.client_pid {
        check::process(pid)?;
    }
    let libs = live::libraries(compositor, args.client_pid)?;
    let held = match args.command.first() {
        Some(argv0) => {
            let path = launch::resolve(argv0)?;
            latscope::process::reap_orphans_here();
            Some(launch::spawn_held(&path, &args.command)?)
        }
        None => None,
    };
    let client = held
        .as_ref()
        .map_or(args.client_pid.unwrap_or(0), |h| h.pid);
    let marker = super::live::marker();
    let spec = Spec {
        libs,
        compositor,
        client,
        marker: marker.as_ref().map(|m| (m.probe.to_string(), m.pid)),
        duration_s: args.duration,
    };
    let (events, lost) = capture(args, &spec, bpftrace, held)?;
    let analysis = live::analyse(&events, lost)?;
    let files = vec![
        format!("live: client {client}"),
        format!("live: compositor {compositor}"),
    ];
    let input = vec![
        ("frames", analysis.frames.len() as u64),
        ("probe_events", events.len() as u64),
        ("lost_events", lost),
    ];
    super::frames::write(args, &analysis, files, input, report_to)
}

/// Runs the program until `--duration`, Ctrl-C, or the client's (or compositor's) exit; the
/// events printed and how many bpftrace lost.
fn capture(
    args: &FramesArgs,
    spec: &Spec,
    bpftrace: std::path::PathBuf,
    held: Option<launch::Held>,
) -> Result<(Vec<Event>, u64)> {
    let events = RefCell::new(Vec::new());
    let lost = RefCell::new(0u64);
    let options = RunOptions {
        bpftrace,
        program: live::program(spec),
        // a running client is followed to its end; a started one ends the session itself
        pid: args.client_pid.or(Some(spec.compositor)),
        marker: spec.marker.is_some(),
        command: held,
        empty: Snapshot::new(0, 0, 0, false),
        cancel: signals::cancel_on_interrupt(),
        record: None,
        duration_s: args.duration,
    };
    let (client, compositor) = (spec.client, spec.compositor);
    let outcome = runner::run(options, |event| match event {
        runner::Event::Attached(n) => eprintln!(
            "latscope: tracing {n} probes in compositor {compositor} and client {client}; Ctrl-C ends the capture"
        ),
        runner::Event::Other(line) => match printed(line).and_then(|t| live::parse(&t)) {
            Some(e) => events.borrow_mut().push(e),
            None => eprintln!("{line}"),
        },
        runner::Event::Lost(n) => *lost.borrow_mut() += n,
        runner::Event::Interval { .. } => {}
    })
    .context("running bpftrace")?;
    if let Some(e) = outcome.launch_error {
        bail!(e);
    }
    if let Some(e) = outcome.error {
        bail!("bpftrace failed: {}", e.trim());
    }
    eprintln!("latscope: stopped: {}", outcome.stopped_by);
    Ok((events.into_inner(), lost.into_inner()))
}

/// The text of a `printf` line of bpftrace's JSON output.
fn printed(line: &str) -> Option<String> {
    let doc: serde_json::Value = serde_json::from_str(line).ok()?;
    if doc["type"] != "printf" {
        return None;
    }
    doc["data"].as_str().map(str::to_string)
}

fn usage(message: &str) -> ! {
    super::usage_error(
        "frames",
        clap::error::ErrorKind::MissingRequiredArgument,
        message,
    )
}
