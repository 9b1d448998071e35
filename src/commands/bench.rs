//! `latscope bench`: expand the commands, run the schedule with a progress bar, analyse, print.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::Value;

use crate::cli::{BenchArgs, BenchFormat};
use crate::signals;
use latscope::bench::analysis::{Thresholds, analyse};
use latscope::bench::counters::{DEFAULT_EVENTS, parse_event};
use latscope::bench::schedule::{self, BenchCommand, Measured, Schedule};
use latscope::bench::spawn::RunMeasure;
use latscope::bench::{callgrind, schedule::BenchError};
use latscope::report::bench as render;
use latscope::stats::{Unit, parse_duration};

/// Runs `latscope bench`.
pub fn run(args: &BenchArgs) -> Result<()> {
    if args.runs == Some(0) {
        use clap::CommandFactory;
        crate::cli::Cli::command()
            .error(
                clap::error::ErrorKind::ValueValidation,
                "--runs must be at least 1",
            )
            .exit();
    }
    let thresholds = Thresholds {
        noise: percent(&args.noise)?,
        ..Thresholds::default()
    };
    if let Some(files) = &args.compare {
        return compare(&files[0], &files[1], args, thresholds);
    }
    let lists = parameter_lists(&args.parameter_list)?;
    let commands =
        schedule::expand(&args.commands, &lists, args.shell).map_err(anyhow::Error::msg)?;
    let schedule = build_schedule(args)?;
    let callgrind = match args.instructions.as_deref() {
        Some("callgrind") => Some(
            commands
                .iter()
                .map(|c| callgrind::instructions(&c.argv))
                .collect::<Result<Vec<u64>, String>>()
                .map_err(anyhow::Error::msg)?,
        ),
        Some(other) => bail!("--instructions takes 'callgrind', not '{other}'"),
        None => None,
    };
    let bar = progress(&schedule, commands.len());
    let (measured, error) =
        schedule::run(&commands, &schedule, |done| bar.set_position(done as u64));
    bar.finish_and_clear();
    if measured.runs.iter().all(Vec::is_empty) {
        return Err(error.map_or_else(
            || anyhow::anyhow!("interrupted before any run"),
            anyhow::Error::from,
        ));
    }
    output(&commands, &measured, callgrind, args, thresholds)?;
    match error {
        Some(e @ BenchError::Failed { .. }) | Some(e @ BenchError::Spawn(_)) => Err(e.into()),
        None => Ok(()),
    }
}

fn output(
    commands: &[BenchCommand],
    m: &Measured,
    callgrind: Option<Vec<u64>>,
    args: &BenchArgs,
    t: Thresholds,
) -> Result<()> {
    let a = analyse(commands, &m.runs, callgrind, t);
    let doc = render::json(commands, m, &a);
    if let Some(path) = &args.save {
        std::fs::write(path, format!("{doc}\n"))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let text = match args.format {
        BenchFormat::Text => render::text(commands, m, &a, t.noise),
        BenchFormat::Json => format!("{doc}\n"),
        BenchFormat::Markdown => render::markdown(commands, &a),
        BenchFormat::Csv => render::csv(commands, m),
    };
    crate::commands::print(&text)
}

fn percent(text: &str) -> Result<f64> {
    let number = text.trim().trim_end_matches('%');
    let v: f64 = number
        .parse()
        .with_context(|| format!("--noise: '{text}' is not a percentage"))?;
    Ok(v / 100.0)
}

fn duration(name: &str, text: &str) -> Result<Duration> {
    let ns = parse_duration(text, Unit::S).map_err(|e| anyhow::anyhow!("--{name}: {e}"))?;
    Ok(Duration::from_nanos(ns))
}

fn parameter_lists(specs: &[String]) -> Result<Vec<(String, Vec<String>)>> {
    specs
        .iter()
        .map(|s| {
            let (name, values) = s
                .split_once('=')
                .with_context(|| format!("-L expects NAME=a,b,c, got '{s}'"))?;
            Ok((
                name.to_string(),
                values.split(',').map(str::to_string).collect(),
            ))
        })
        .collect()
}

fn build_schedule(args: &BenchArgs) -> Result<Schedule> {
    let mut names: Vec<String> = DEFAULT_EVENTS.iter().map(|s| s.to_string()).collect();
    names.extend(args.events.iter().filter(|e| !e.is_empty()).cloned());
    let parsed = names
        .iter()
        .map(|n| parse_event(n))
        .collect::<Result<Vec<_>, _>>()
        .map_err(anyhow::Error::msg)?;
    // One counter per event: `-e task-clock` or an alias (`cycles`/`cpu-cycles`) adds nothing.
    let mut events: Vec<latscope::bench::counters::Event> = Vec::new();
    for e in parsed {
        if !events
            .iter()
            .any(|x| x.kind == e.kind && x.config == e.config)
        {
            events.push(e);
        }
    }
    let prepare = match &args.prepare {
        Some(p) if args.shell => Some(vec!["sh".into(), "-c".into(), p.clone()]),
        Some(p) => Some(shell_words::split(p).with_context(|| format!("--prepare '{p}'"))?),
        None => None,
    };
    Ok(Schedule {
        warmup: args.warmup,
        runs: args.runs,
        min_runs: args.min_runs.max(2),
        min_time: duration("min-time", &args.min_time)?,
        max_time: args
            .max_time
            .as_deref()
            .map(|t| duration("max-time", t))
            .transpose()?,
        prepare,
        timeout: args
            .timeout
            .as_deref()
            .map(|t| duration("timeout", t))
            .transpose()?,
        ignore_failure: args.ignore_failure,
        events,
        seed: args.seed,
        cancel: Some(signals::cancel_on_interrupt()),
    })
}

fn progress(s: &Schedule, commands: usize) -> ProgressBar {
    let bar = match s.runs {
        Some(r) => ProgressBar::with_draw_target(
            Some(u64::from(r) * commands as u64),
            ProgressDrawTarget::stderr(),
        ),
        None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
    };
    let template = if s.runs.is_some() {
        "benchmarking [{bar:40}] {pos}/{len} runs, eta {eta}"
    } else {
        "benchmarking {spinner} {pos} runs, {elapsed}"
    };
    bar.set_style(
        ProgressStyle::with_template(template)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar
}

/// Reads a saved result back into commands and runs.
fn load(path: &std::path::Path) -> Result<(Vec<BenchCommand>, Vec<Vec<RunMeasure>>)> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let doc: Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    if doc["kind"] != "bench" {
        bail!(
            "{} is not a latscope bench result (its kind is {})",
            path.display(),
            doc["kind"]
        );
    }
    let mut commands = Vec::new();
    let mut runs = Vec::new();
    for c in doc["commands"].as_array().into_iter().flatten() {
        commands.push(BenchCommand {
            name: c["command"].as_str().unwrap_or("?").to_string(),
            argv: Vec::new(),
            parameters: Vec::new(),
        });
        let rs = c["runs"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| RunMeasure {
                wall_ns: r["wall_ns"].as_u64().unwrap_or(0),
                user_ns: r["user_ns"].as_u64().unwrap_or(0),
                sys_ns: r["sys_ns"].as_u64().unwrap_or(0),
                max_rss_kb: r["max_rss_kb"].as_u64().unwrap_or(0),
                exit_code: r["exit_code"].as_i64().map(|c| c as i32),
                timed_out: false,
                counters: r["counters"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_u64()?)))
                    .collect(),
            })
            .collect();
        runs.push(rs);
    }
    Ok((commands, runs))
}

/// `--compare OLD NEW`: each command of OLD against the same command (by position) of NEW.
fn compare(
    old: &std::path::Path,
    new: &std::path::Path,
    args: &BenchArgs,
    t: Thresholds,
) -> Result<()> {
    let (old_cmds, old_runs) = load(old)?;
    let (new_cmds, new_runs) = load(new)?;
    let mut text = String::new();
    for i in 0..old_cmds.len().min(new_cmds.len()) {
        let commands = vec![
            BenchCommand {
                name: format!("{} ({})", old_cmds[i].name, old.display()),
                ..old_cmds[i].clone()
            },
            BenchCommand {
                name: format!("{} ({})", new_cmds[i].name, new.display()),
                ..new_cmds[i].clone()
            },
        ];
        let m = Measured {
            runs: vec![old_runs[i].clone(), new_runs[i].clone()],
            ..Measured::default()
        };
        let a = analyse(&commands, &m.runs, None, t);
        text.push_str(&match args.format {
            BenchFormat::Json => format!("{}\n", render::json(&commands, &m, &a)),
            BenchFormat::Markdown => render::markdown(&commands, &a),
            BenchFormat::Csv => render::csv(&commands, &m),
            BenchFormat::Text => render::text(&commands, &m, &a, t.noise),
        });
    }
    crate::commands::print(&text)
}
