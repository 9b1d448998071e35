//! `latscope live`: build the plan, check everything that can be checked, run bpftrace, print.

use anyhow::{Context, Result, bail};
use clap::CommandFactory;

use super::fleet::publish;
use crate::cli::{Cli, LiveArgs};
use crate::signals;
use latscope::doc::spans::LiveRun;
use latscope::live::output::Snapshot;
use latscope::live::program::{Plan, Target, program};
use latscope::live::record::Recorder;
use latscope::live::runner::{self, Event, RunOptions};
use latscope::live::spec::{Field, Probe, SpanSpec, ValueSpec, parse_group, parse_key};
use latscope::live::{check, spec::SpecError};
use latscope::report::live::{Names, document as live_document, interval_text, series_text};

/// Runs `latscope live`.
pub fn run(args: &LiveArgs) -> Result<()> {
    let plan = plan(args).unwrap_or_else(|e| usage(&e.to_string()));
    if plan.spans.is_empty() && plan.rates.is_empty() && plan.values.is_empty() {
        usage("nothing to trace: give at least one --span, --rate or --value");
    }
    let text = program(&plan);
    if args.print_program {
        return crate::commands::print(&text);
    }
    let save = crate::commands::output_opt("--save", args.save.as_deref())?;
    let bpftrace = check::bpftrace()?;
    check::privileges()?;
    for probe in probes_of(&plan) {
        check::probe(probe)?;
    }
    if let Some(pid) = args.pid {
        check::process(pid)?;
    }
    if !args.command.is_empty() {
        check::command(&args.command)?;
    }
    let names = names(&plan, args);
    let empty = Snapshot::new(
        plan.spans.len(),
        plan.values.len(),
        plan.rates.len(),
        plan.by.is_some(),
    );
    let options = RunOptions {
        bpftrace,
        program: text,
        pid: args.pid,
        command: (!args.command.is_empty()).then(|| args.command.clone()),
        empty,
        cancel: signals::cancel_on_interrupt(),
        record: args.record_spans.then(|| Recorder::new(args.max_spans)),
    };
    let unit = args.unit.unit();
    // Before tracing, so that a port in use is an error before anything is lost.
    let (_server, shared) = super::fleet::serve(args, &names)?;
    let outcome = runner::run(options, |event| match publish(&shared, event) {
        Event::Attached(n) => eprintln!("latscope: tracing {n} probes; Ctrl-C prints the totals"),
        Event::Interval {
            number,
            now,
            before,
        } if !args.quiet => {
            let text = interval_text(
                &names,
                number,
                args.interval,
                now,
                before,
                args.cumulative,
                unit,
            );
            let _ = crate::commands::print(&text);
        }
        Event::Interval { .. } => {}
    })
    .context("running bpftrace")?;
    let mut warnings = Vec::new();
    if !outcome.finished {
        warnings.push(
            "bpftrace stopped before its final snapshot: totals are from the last interval"
                .to_string(),
        );
    }
    crate::commands::print(&totals_text(
        &names,
        &outcome.last,
        outcome.stopped_by,
        unit,
    ))?;
    if let Some(save) = &save {
        let run = LiveRun {
            intervals: outcome.rate_history.len() as u64,
            interval_s: args.interval,
            stopped_by: outcome.stopped_by.to_string(),
        };
        let mut doc = live_document(&names, &outcome.last, &outcome.rate_history, run, &warnings);
        if let Some(record) = outcome.record {
            warnings.extend(record.fill(&mut doc, &names.spans));
            doc.warnings.clone_from(&warnings);
        }
        // bpftrace failed before its first interval: there is nothing to save.
        let measured = outcome.error.is_none() || !outcome.rate_history.is_empty();
        let text = latscope::doc::to_json(&doc, false);
        crate::commands::save_run(save, text.as_bytes(), measured)?;
    }
    for w in &warnings {
        eprintln!("latscope: warning: {w}");
    }
    match outcome.error {
        Some(error) => bail!("bpftrace failed: {}", error.trim()),
        None => Ok(()),
    }
}

pub(crate) fn usage(message: &str) -> ! {
    Cli::command()
        .error(clap::error::ErrorKind::ValueValidation, message)
        .exit()
}

fn plan(args: &LiveArgs) -> Result<Plan, SpecError> {
    let key = args.key.as_deref().map(parse_key).transpose()?;
    let spans = args
        .span
        .iter()
        .map(|s| SpanSpec::parse(s, key.as_deref()))
        .collect::<Result<Vec<_>, _>>()?;
    let rates = args
        .rate
        .iter()
        .map(|s| s.parse::<Probe>())
        .collect::<Result<Vec<_>, _>>()?;
    let values = args
        .value
        .iter()
        .map(|s| s.parse::<ValueSpec>())
        .collect::<Result<Vec<_>, _>>()?;
    let by = args.by.as_deref().map(parse_group).transpose()?;
    // `--by argN` is read at each span's end probe and at each rate's probe.
    let without_arguments = spans
        .iter()
        .map(|s| (s.name.clone(), &s.end))
        .chain(rates.iter().map(|r| (r.to_string(), r)))
        .find(|(_, probe)| !probe.has_arguments());
    if let (Some(Field::Arg(_)), Some((span, probe))) = (by, without_arguments) {
        return Err(SpecError::NoArguments {
            span,
            what: "--by",
            probe: probe.to_string(),
        });
    }
    let target = match (args.pid, args.command.is_empty()) {
        (Some(pid), _) => Target::Pid(pid),
        (None, false) => Target::Command,
        (None, true) => Target::Everything,
    };
    Ok(Plan {
        spans,
        rates,
        values,
        by,
        target,
        interval_s: args.interval.max(1),
        duration_s: args.duration,
        record: args.record_spans.then_some(args.max_spans as u64),
    })
}

fn probes_of(plan: &Plan) -> Vec<&Probe> {
    let mut probes: Vec<&Probe> = plan.spans.iter().flat_map(|s| [&s.start, &s.end]).collect();
    probes.extend(plan.rates.iter());
    probes.extend(plan.values.iter().map(|v| &v.probe));
    probes
}

fn names(plan: &Plan, args: &LiveArgs) -> Names {
    Names {
        spans: plan.spans.iter().map(|s| s.name.clone()).collect(),
        values: plan.values.iter().map(|v| v.name.clone()).collect(),
        rates: plan.rates.iter().map(Probe::to_string).collect(),
        by: args.by.clone(),
    }
}

fn totals_text(
    names: &Names,
    last: &Snapshot,
    stopped_by: &str,
    unit: latscope::stats::Unit,
) -> String {
    let mut out = format!("── totals ({stopped_by}) ──\n");
    let blocks = [
        (&names.spans, &last.spans, Some(unit)),
        (&names.values, &last.values, None),
    ];
    for (labels, series, unit) in blocks {
        for (i, name) in labels.iter().enumerate() {
            for (group, b) in series.get(i).into_iter().flatten() {
                let title = match (&names.by, group) {
                    (Some(by), Some(g)) => format!("{name}[{by} {g}]"),
                    _ => name.clone(),
                };
                out.push_str(&series_text(&title, b, unit));
            }
        }
    }
    for (i, probe) in names.rates.iter().enumerate() {
        for (group, total) in last.rates.get(i).into_iter().flatten() {
            let title = match (&names.by, group) {
                (Some(by), Some(g)) => format!("rate {probe}[{by} {g}]"),
                _ => format!("rate {probe}"),
            };
            out.push_str(&format!("{title}: {total} events\n"));
        }
    }
    out
}
