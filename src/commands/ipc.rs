//! `latscope lab ipc`: build the matrix of configurations, run it, print it.

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};

use crate::cli::{Format, IpcArgs, IpcPeerArgs};
use latscope::lab::ipc::clock::{Monotonic, TimerOverhead, timer_overhead};
use latscope::lab::ipc::report::{self, LabReport};
use latscope::lab::ipc::run::{Lab, Outcome, RunError, peer_main};
use latscope::lab::ipc::{Config, Pattern, Peer, Settings, Transport, validate};

/// A usage error: printed by clap, exit status 2.
fn usage(message: impl std::fmt::Display) -> ! {
    super::usage_error("lab ipc", clap::error::ErrorKind::ValueValidation, message)
}

/// The matrix: what runs, and what was asked for but cannot run here (with the reason).
pub struct Plan {
    /// configurations to run
    pub configs: Vec<Config>,
    /// (configuration, reason)
    pub skipped: Vec<(String, String)>,
    /// counts and limits
    pub settings: Settings,
}

fn transports(args: &IpcArgs) -> Vec<Transport> {
    if args.transport.is_empty() || args.transport.iter().any(|t| t == "all") {
        return Transport::ALL.to_vec();
    }
    args.transport
        .iter()
        .map(|name| {
            Transport::parse(name).unwrap_or_else(|| {
                let names: Vec<&str> = Transport::ALL.iter().map(|t| t.name()).collect();
                usage(format!(
                    "--transport: unknown transport '{name}' (one of: {})",
                    names.join(", ")
                ))
            })
        })
        .collect()
}

fn patterns(args: &IpcArgs) -> Vec<Pattern> {
    use latscope::lab::ipc::PatternKind;
    for p in &args.pattern {
        if p != "all" && PatternKind::from_name(p).is_none() {
            let names: Vec<&str> = PatternKind::ALL.iter().map(|k| k.name()).collect();
            usage(format!(
                "--pattern: unknown pattern '{p}' ({}, all)",
                names.join(", ")
            ));
        }
    }
    let all = args.pattern.iter().any(|p| p == "all");
    let wanted = |kind: PatternKind| all || args.pattern.iter().any(|p| p == kind.name());
    let mut out = Vec::new();
    for kind in PatternKind::ALL.into_iter().filter(|&k| wanted(k)) {
        match kind {
            PatternKind::PingPong => out.push(Pattern::PingPong),
            PatternKind::Stream => out.extend(
                args.flush_bytes
                    .iter()
                    .map(|&flush_bytes| Pattern::Stream { flush_bytes }),
            ),
            PatternKind::Burst => out.extend(args.burst.iter().map(|&n| Pattern::Burst { n })),
            PatternKind::Segments => out.extend(
                args.segments
                    .iter()
                    .map(|&k| Pattern::Segments { k: k as usize }),
            ),
            PatternKind::OpenLoop => {
                out.extend(args.rate.iter().map(|&rate| Pattern::OpenLoop { rate }))
            }
        }
    }
    out
}

fn peers(args: &IpcArgs) -> Vec<Peer> {
    args.peer
        .iter()
        .map(|p| match p.as_str() {
            "thread" => Peer::Thread,
            "process" => Peer::Process,
            other => usage(format!("--peer: unknown peer '{other}' (thread, process)")),
        })
        .collect()
}

fn settings(args: &IpcArgs) -> Settings {
    Settings {
        count: args.count,
        warmup: args.warmup,
        max_time_ns: u64::try_from(args.max_time.as_nanos()).unwrap_or(u64::MAX),
        slots: args.slots as usize,
        ring_bytes: args.ring_bytes,
        verify: args.verify,
        max_spans: args.max_spans.get(),
    }
}

/// Refuses, before building it, a matrix of more configurations than `--max-configs`: each one
/// runs for up to --max-time.
fn check_size(args: &IpcArgs) {
    let lists = [
        args.transport.len().max(Transport::ALL.len()),
        args.peer.len(),
        args.payload.len(),
        args.flush_bytes.len() + args.burst.len() + args.segments.len() + args.rate.len() + 1,
    ];
    let total = lists
        .iter()
        .fold(1u128, |n, &k| n.saturating_mul(k.max(1) as u128));
    if total > u128::from(args.max_configs) {
        usage(format!(
            "these lists make up to {total} configurations; at most {} (--max-configs raises the limit)",
            args.max_configs
        ));
    }
}

/// Builds the matrix from the command line; impossible options are usage errors.
pub fn plan(args: &IpcArgs) -> Plan {
    let settings = settings(args);
    let payloads = &args.payload;
    check_size(args);
    let peers = peers(args);
    let mut configs = Vec::new();
    let mut skipped = Vec::new();
    for transport in transports(args) {
        let mut places: Vec<Peer> = if transport == Transport::Inproc {
            vec![Peer::None]
        } else {
            peers.clone()
        };
        if transport.threads_only() && places.contains(&Peer::Process) {
            places.retain(|&p| p != Peer::Process);
            skipped.push((
                format!("{} (process)", transport.name()),
                "a channel cannot cross processes; it runs with --peer thread".to_string(),
            ));
        }
        for &peer in &places {
            for &pattern in &patterns(args) {
                for &payload in payloads {
                    let config = Config {
                        transport,
                        peer,
                        pattern,
                        payload,
                    };
                    if let Err(e) = validate(&config, &settings) {
                        usage(e);
                    }
                    configs.push(config);
                }
            }
        }
    }
    Plan {
        configs,
        skipped,
        settings,
    }
}

/// What a run of a plan gave.
pub struct Ran {
    /// one per configuration run
    pub outcomes: Vec<Outcome>,
    /// configurations not run, with the reason
    pub skipped: Vec<(String, String)>,
    /// the clock's cost
    pub timer: TimerOverhead,
    /// Ctrl-C
    pub interrupted: bool,
}

/// Runs every configuration of `plan`, with a progress bar on a terminal.
pub fn execute(mut plan: Plan) -> Result<Ran> {
    let cancel = crate::signals::cancel_on_interrupt();
    let timer = timer_overhead(&Monotonic, 100_000);
    let exe = std::env::current_exe().ok();
    let mut lab = Lab::new(plan.settings.clone(), cancel.clone(), exe);
    if plan.configs.iter().any(|c| c.transport == Transport::Dbus)
        && let Err(e) = lab.start_bus()
    {
        let before = plan.configs.len();
        plan.configs.retain(|c| c.transport != Transport::Dbus);
        eprintln!("latscope: warning: D-Bus skipped, the other transports still run: {e}");
        plan.skipped.push((
            format!("dbus ({} configurations)", before - plan.configs.len()),
            format!("{e}"),
        ));
    }
    let bar = ProgressBar::new(plan.configs.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{pos}/{len} {wide_msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut outcomes = Vec::new();
    for config in &plan.configs {
        if cancel.is_raised() {
            break;
        }
        bar.set_message(config.to_string());
        match lab.run(config) {
            Ok(o) => outcomes.push(o),
            Err(RunError::Config(e)) => usage(e),
            Err(e @ RunError::Setup { .. }) => plan
                .skipped
                .push((config.to_string(), format!("could not start: {e}"))),
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(Ran {
        outcomes,
        skipped: plan.skipped,
        timer,
        interrupted: cancel.is_raised(),
    })
}

/// Renders a run in `format`.
pub fn render(ran: &Ran, settings: &Settings, format: Format, detail: bool) -> String {
    let doc = document(ran, settings);
    match format {
        Format::Text => report::text(&doc, detail),
        Format::Json => latscope::doc::to_json(&doc, false),
        Format::Markdown => report::markdown(&doc),
        Format::Csv => crate::commands::unsupported("lab ipc", format),
    }
}

/// The `lab-ipc` document of a run.
pub fn document(ran: &Ran, settings: &Settings) -> latscope::doc::lab::LabIpcDoc {
    report::document(&LabReport {
        outcomes: &ran.outcomes,
        timer: ran.timer,
        settings,
        skipped: &ran.skipped,
        interrupted: ran.interrupted,
    })
}

/// Runs `latscope lab ipc`.
pub fn run(args: &IpcArgs) -> Result<()> {
    let plan = plan(args);
    let save = crate::commands::output_opt("--save", args.save.path())?;
    let settings = plan.settings.clone();
    let ran = execute(plan)?;
    crate::commands::print(&render(&ran, &settings, args.out.get(), args.detail))?;
    if let Some(save) = &save {
        let text = render(&ran, &settings, Format::Json, false);
        crate::commands::save_run(save, text.as_bytes(), !ran.outcomes.is_empty())?;
    }
    let failed: Vec<String> = ran
        .outcomes
        .iter()
        .filter_map(|o| o.failed().map(|e| format!("{}: {e}", o.config)))
        .collect();
    crate::commands::lab_outcome(
        failed,
        !ran.outcomes.is_empty(),
        ran.interrupted,
        &ran.skipped,
    )
}

/// Runs the hidden `latscope lab ipc-peer`.
pub fn peer(args: &IpcPeerArgs) -> Result<()> {
    peer_main(&args.spec).context("ipc peer")
}
