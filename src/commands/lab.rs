//! `latscope lab queue`: build the parameter sets, run the model or the real pipeline, print.

use anyhow::{Result, bail};
use serde_json::{Value, json};

use crate::cli::{LabFormat, QueueArgs};
use latscope::lab::queue::model::{self, Params};
use latscope::lab::queue::real;
use latscope::lab::queue::report::{self, Row, RunReport, Sweep};
use latscope::stats::{Unit, parse_duration};

/// Runs `latscope lab queue`.
pub fn queue(args: &QueueArgs) -> Result<()> {
    let base = base_params(args)?;
    let configs = sweep_configs(base, &args.sweep)?;
    let unit = args.unit.unit();
    let mode = if args.real { "real" } else { "model" };
    let runs: Vec<Row> = configs
        .into_iter()
        .map(|(labels, p)| Row {
            labels,
            report: run_one(&p, args),
        })
        .collect();
    let text = if args.sweep.is_empty() {
        let report = &runs[0].report;
        match args.format {
            LabFormat::Text => report::text(report, unit),
            LabFormat::Json => format!("{}\n", report::json(report, mode, params_json(&base))),
            LabFormat::Markdown => Sweep { rows: runs }.markdown(unit),
        }
    } else {
        let sweep = Sweep { rows: runs };
        match args.format {
            LabFormat::Text => sweep.text(unit),
            LabFormat::Markdown => sweep.markdown(unit),
            LabFormat::Json => {
                let rows = sweep.json_rows(mode, |_| Value::Null);
                format!(
                    "{}\n",
                    json!({ "kind": "lab-queue", "unit": "ns", "mode": mode, "params": params_json(&base), "rows": rows })
                )
            }
        }
    };
    crate::commands::print(&text)
}

fn run_one(p: &Params, args: &QueueArgs) -> RunReport {
    if args.real {
        let o = real::run(p);
        RunReport::new(&o.requests, &o.completion_to_next, Vec::new())
    } else {
        let o = model::run(p, args.timeline);
        RunReport::new(&o.requests, &o.completion_to_next, o.timeline)
    }
}

fn duration(name: &str, text: &str) -> Result<u64> {
    parse_duration(text, Unit::Us).map_err(|e| anyhow::anyhow!("--{name}: {e}"))
}

fn base_params(args: &QueueArgs) -> Result<Params> {
    if args.batches == 0 {
        bail!("--batches must be at least 1");
    }
    if args.ring == Some(0) {
        bail!("--ring must be at least 1 (a ring of 0 slots can never take a request)");
    }
    Ok(Params {
        prep: duration("prep", &args.prep)?,
        submit: duration("submit", &args.submit)?,
        exec: duration("exec", &args.exec)?,
        irq: duration("irq", &args.irq)?,
        gap: duration("gap", &args.gap)?,
        batches: args.batches,
        ring: args.ring,
        engines: args.engines.max(1),
        burst: args.burst.max(1),
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

fn params_json(p: &Params) -> Value {
    json!({
        "prep_ns": p.prep, "submit_ns": p.submit, "exec_ns": p.exec, "irq_ns": p.irq, "gap_ns": p.gap,
        "batches": p.batches, "ring": p.ring, "engines": p.engines, "burst": p.burst,
    })
}
