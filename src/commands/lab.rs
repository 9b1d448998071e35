//! `latscope lab queue`: build the parameter sets, run the model or the real pipeline, print.

use anyhow::{Result, bail};

use crate::cli::{Format, QueueArgs};
use latscope::doc::lab::{LabQueueDoc, QueueMode, QueueParams};
use latscope::lab::queue::model::{self, Params};
use latscope::lab::queue::real;
use latscope::lab::queue::report::{self, Row, RunReport, Sweep};
use latscope::stats::{Unit, parse_duration};

/// Runs `latscope lab queue`.
pub fn queue(args: &QueueArgs) -> Result<()> {
    let base = base_params(args)?;
    // A mistake in --sweep is a usage error, like any other option's (exit 2).
    let configs = sweep_configs(base, &args.sweep).unwrap_or_else(|e| {
        super::usage_error(
            "lab queue",
            clap::error::ErrorKind::ValueValidation,
            format!("{e:#}"),
        )
    });
    check_memory(&configs, args.max_spans.get());
    let cancel = crate::signals::cancel_on_interrupt();
    let unit = args.unit.unit();
    let mode = if args.real {
        QueueMode::Real
    } else {
        QueueMode::Model
    };
    let mut runs: Vec<Row> = Vec::new();
    let mut failed = None;
    let total = configs.len();
    for (labels, p) in configs {
        // A stop (Ctrl-C, SIGTERM) ends a real run's submissions; the rows run so far are
        // printed. The model's rows take no longer than their arithmetic.
        if cancel.is_raised() {
            break;
        }
        match run_one(&p, args, &cancel) {
            Ok(report) => runs.push(Row { labels, report }),
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    if runs.is_empty() {
        return Err(failed.unwrap_or_else(|| anyhow::anyhow!("interrupted before any run")));
    }
    if cancel.is_raised() {
        eprintln!(
            "latscope: interrupted: {} of {total} configuration(s) ran (the last one up to the stop); what they measured is printed",
            runs.len()
        );
    }
    let sweep = Sweep { rows: runs };
    let text = match args.out.get() {
        Format::Text if args.sweep.is_empty() => report::text(&sweep.rows[0].report, unit),
        Format::Text => sweep.text(unit),
        Format::Markdown => sweep.markdown(unit),
        Format::Json => {
            let doc = LabQueueDoc::new(mode, params_doc(&base), sweep.document_rows());
            latscope::doc::to_json(&doc, false)
        }
        Format::Csv => crate::commands::unsupported("lab queue", args.out.get()),
    };
    crate::commands::print(&text)?;
    match failed {
        Some(e) => Err(e.context(format!(
            "{} of {total} configuration(s) ran; what they measured is printed",
            sweep.rows.len()
        ))),
        None => Ok(()),
    }
}

/// Every request of a run is kept while it runs (its stages are reported), and every row keeps
/// up to `--max-spans` spans of each of its 4 series until the sweep is printed: refuse, before
/// any work, a run that would need more than half of this machine's memory.
fn check_memory(configs: &[Config], max_spans: usize) {
    // A request, plus the vectors that hold it while the model runs, about three times over.
    let per_request = 3 * std::mem::size_of::<model::Request>() as u128;
    // A kept span: its record, its series' name, its place in the recorder, its JSON text.
    let per_span = std::mem::size_of::<latscope::doc::spans::SpanRecord>() as u128 + 32 + 40 + 100;
    let batches = configs.iter().map(|(_, p)| p.batches).max().unwrap_or(0);
    let kept: u128 = configs
        .iter()
        .map(|(_, p)| 4 * u128::from(p.batches.min(max_spans as u64)))
        .sum();
    let need = u128::from(batches) * per_request + kept * per_span;
    // SAFETY: sysinfo fills the struct it is given.
    let mut info: libc::sysinfo = unsafe { std::mem::zeroed() };
    let total = if unsafe { libc::sysinfo(&mut info) } == 0 {
        u128::from(info.totalram) * u128::from(info.mem_unit)
    } else {
        return;
    };
    if need > total / 2 {
        let gib = |b: u128| b as f64 / f64::from(1u32 << 30);
        super::usage_error(
            "lab queue",
            clap::error::ErrorKind::ValueValidation,
            format!(
                "--batches {batches} with --max-spans {max_spans} over {} configuration(s) keeps every request of a run and the kept spans of every row: about {:.1} GiB, more than half of this machine's {:.1} GiB (at most {} batches a run here; fewer --max-spans or --sweep values need less)",
                configs.len(),
                gib(need),
                gib(total),
                total / 2 / per_request
            ),
        )
    }
}

fn run_one(p: &Params, args: &QueueArgs, cancel: &latscope::ingest::Cancel) -> Result<RunReport> {
    let (requests, mut report) = if args.real {
        let o = real::run(p, Some(cancel))?;
        let r = RunReport::new(&o.requests, &o.completion_to_next, Vec::new());
        (o.requests, r)
    } else {
        let o = model::run(p, args.timeline);
        let r = RunReport::new(&o.requests, &o.completion_to_next, o.timeline);
        (o.requests, r)
    };
    report.keep(&requests, args.max_spans.get());
    Ok(report)
}

fn duration(name: &str, text: &str) -> Result<u64> {
    parse_duration(text, Unit::Us).map_err(|e| anyhow::anyhow!("--{name}: {e}"))
}

fn base_params(args: &QueueArgs) -> Result<Params> {
    Ok(Params {
        prep: args.prep,
        submit: args.submit,
        exec: args.exec,
        irq: args.irq,
        gap: args.gap,
        batches: args.batches,
        ring: args.ring,
        engines: args.engines,
        burst: args.burst,
    })
}

/// Sets parameter `name` to `value` in `p`.
fn set(p: &mut Params, name: &str, value: &str) -> Result<()> {
    let number = || {
        value
            .parse::<u64>()
            .map_err(|_| anyhow::anyhow!("--sweep {name}: '{value}' is not a whole number"))
    };
    match name {
        "prep" => p.prep = duration(name, value)?,
        "submit" => p.submit = duration(name, value)?,
        "exec" => p.exec = duration(name, value)?,
        "irq" => p.irq = duration(name, value)?,
        "gap" => p.gap = duration(name, value)?,
        "batches" => p.batches = number()?.max(1),
        "engines" => p.engines = number()?.max(1),
        "burst" => p.burst = number()?.max(1),
        "ring" => {
            p.ring = if matches!(value, "none" | "all" | "unbounded") {
                None
            } else {
                Some(number()?.max(1))
            }
        }
        other => bail!(
            "--sweep: unknown parameter '{other}' (prep, submit, exec, irq, gap, batches, ring, engines, burst)"
        ),
    }
    Ok(())
}

type Config = (Vec<(String, String)>, Params);

/// The cross product of every `--sweep NAME=v1,v2,...` over `base`.
fn sweep_configs(base: Params, sweeps: &[String]) -> Result<Vec<Config>> {
    let mut configs: Vec<Config> = vec![(Vec::new(), base)];
    for sweep in sweeps {
        let Some((name, values)) = sweep.split_once('=') else {
            bail!("--sweep expects NAME=v1,v2,..., got '{sweep}'");
        };
        if values.split(',').all(|v| v.trim().is_empty()) {
            bail!("--sweep {name}= has no values: give NAME=v1,v2,...");
        }
        let mut next = Vec::new();
        for (labels, p) in &configs {
            for value in values.split(',').map(str::trim).filter(|v| !v.is_empty()) {
                let mut p = *p;
                set(&mut p, name, value)?;
                let mut labels = labels.clone();
                labels.push((name.to_string(), value.to_string()));
                next.push((labels, p));
            }
        }
        configs = next;
    }
    if configs.len() > 10_000 {
        bail!(
            "--sweep makes {} configurations; at most 10000",
            configs.len()
        );
    }
    Ok(configs)
}

fn params_doc(p: &Params) -> QueueParams {
    QueueParams {
        prep_ns: p.prep,
        submit_ns: p.submit,
        exec_ns: p.exec,
        irq_ns: p.irq,
        gap_ns: p.gap,
        batches: p.batches,
        ring: p.ring,
        engines: p.engines,
        burst: p.burst,
    }
}
