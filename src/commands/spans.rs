//! `latscope spans`: latency from any trace.

use std::io;

use anyhow::{Context, Result};
use indicatif::ProgressBar;

use super::output::{ReportTo, progress_bar, render, write_html};
use crate::cli::{Format, SpansArgs};
use crate::signals;
use latscope::doc::spans::SpanRecord;
use latscope::ingest::Source;
use latscope::ingest::trace::inputs::{NothingMeasured, Progress, measured, read_all};
use latscope::ingest::trace::read::TraceOptions;
use latscope::ingest::trace::rules::{Endpoint, Key, Pairer, Rule, parse_span};
use latscope::ingest::trace::table::Columns;
use latscope::report::SpansReport;
use latscope::report::csv::CsvSink;
use latscope::report::format::human;
use latscope::report::json::TraceParts;
use latscope::span::{Aggregator, Kept, Slowest};

fn usage(message: impl std::fmt::Display) -> ! {
    super::usage_error("spans", clap::error::ErrorKind::ValueValidation, message)
}

/// The rules and span names of the command line; mistakes are usage errors.
fn rules(args: &SpansArgs) -> (Vec<Rule>, Vec<String>) {
    let mut specs: Vec<(String, Endpoint, Endpoint)> = args
        .span
        .iter()
        .map(|s| parse_span(s).unwrap_or_else(|e| usage(format!("--span: {e}"))))
        .collect();
    if let (Some(start), Some(end)) = (&args.start, &args.end) {
        let spec = match &args.span_name {
            Some(n) => format!("{n}={start}..{end}"),
            None => format!("{start}..{end}"),
        };
        specs.push(parse_span(&spec).unwrap_or_else(|e| usage(format!("--start/--end: {e}"))));
    }
    let keys: Vec<Key> = args
        .key
        .iter()
        .map(|k| Key::parse(k).unwrap_or_else(|e| usage(e)))
        .collect();
    if keys.len() > 1 && keys.len() != specs.len() {
        usage(format!(
            "{} --key options for {} spans: give one for all, or one per span in order",
            keys.len(),
            specs.len()
        ));
    }
    let mut names: Vec<String> = Vec::new();
    let rules = specs
        .into_iter()
        .enumerate()
        .map(|(i, (name, start, end))| {
            let span = names.iter().position(|n| *n == name).unwrap_or_else(|| {
                names.push(name.clone());
                names.len() - 1
            });
            let key = keys
                .get(if keys.len() == 1 { 0 } else { i })
                .cloned()
                .unwrap_or(Key {
                    start: Vec::new(),
                    end: Vec::new(),
                });
            Rule {
                span,
                start,
                end,
                key,
            }
        })
        .collect();
    (rules, names)
}

fn options(args: &SpansArgs) -> TraceOptions {
    TraceOptions {
        format: args.input_format,
        columns: Columns {
            time: args.time.clone(),
            scale: args.time_unit.nanos(),
            name: args.name_field.clone(),
        },
        cancel: Some(signals::cancel_on_interrupt()),
        strict: args.input.strict,
        threads: usize::from(args.input.threads),
        chunk_bytes: args.input.chunk_bytes,
    }
}

fn slowest_text(slow: &[SpanRecord]) -> String {
    if slow.is_empty() {
        return String::new();
    }
    let mut out = String::from("\nslowest spans (start in the trace's clock):\n");
    for s in slow {
        let label = latscope::doc::label(&s.span, s.group.as_deref());
        out.push_str(&format!(
            "  {:>10}  {label}  start {}.{:09} s\n",
            human(s.latency_ns),
            s.start_ns / 1_000_000_000,
            s.start_ns % 1_000_000_000
        ));
    }
    out
}

/// Runs `latscope spans`.
pub fn run(args: &SpansArgs) -> Result<()> {
    let (rules, names) = rules(args);
    let options = options(args);
    let report_to = super::output_opt("--report", args.output.report.as_deref())?;
    let inputs = args.input.sources();
    let no_rules = rules.is_empty();
    let mut pairer = Pairer::new(rules, names, args.by.clone(), args.keep)
        .with_max_series(args.max_series as usize);
    if args.output.format == Format::Csv {
        return csv(&inputs, &options, &mut pairer, args.output.unit.unit());
    }
    let linear = args.output.linear_spec()?;
    let mut sink = (
        Aggregator::new(Vec::new(), linear),
        (Slowest::new(args.slowest), Kept::new(args.max_spans.get())),
    );
    let (totals, error) = read_all(&inputs, &options, &mut pairer, &mut sink, show_progress());
    let (mut aggregator, (slowest, kept)) = sink;
    let names = pairer.span_names().borrow().clone();
    aggregator.set_names(names.clone());
    let files: Vec<String> = inputs.iter().map(Source::name).collect();
    if !measured(&aggregator, None) {
        // Nothing silent: no span is an error that says why, never an empty result.
        if let Some(e) = error {
            return Err(e.into());
        }
        match totals.nothing_measured(&files, &pairer, no_rules) {
            NothingMeasured::NoRule => usage(
                "no span to measure: give --span NAME=START..END or --start/--end (only Chrome JSON, strace/ltrace -T and perf trace carry spans themselves)",
            ),
            NothingMeasured::Why(why) => anyhow::bail!(why),
        }
    }
    if let Some(note) = pairer.folded_note() {
        eprintln!("latscope: warning: {note}");
    }
    let report = SpansReport {
        aggregator: &aggregator,
        input: totals.input(),
        warnings: totals.warnings(&pairer, &aggregator),
        files,
        labels: pairer.labels().borrow().clone(),
        unit: args.output.unit.unit(),
    };
    let parts = TraceParts {
        formats: totals.formats,
        names,
        slowest: slowest.sorted(),
        kept,
        by: args.by.clone(),
    };
    let doc = latscope::report::json::trace_document(&report, parts);
    let text = match args.output.format {
        Format::Json => latscope::doc::to_json(&doc, args.output.pretty),
        Format::Markdown => render(&report, &args.output),
        _ => render(&report, &args.output) + &slowest_text(&doc.slowest),
    };
    crate::commands::print(&text)?;
    if let Some(out) = report_to {
        write_html(&doc, ReportTo::Output(out), report.unit)?;
    }
    error.map_or(Ok(()), |e| Err(e.into()))
}

/// `--format csv`: every sample as it is paired, to standard output.
fn csv(
    inputs: &[Source],
    options: &TraceOptions,
    pairer: &mut Pairer,
    unit: latscope::stats::Unit,
) -> Result<()> {
    let files: Vec<String> = inputs.iter().map(Source::name).collect();
    let csv = CsvSink::new(
        io::BufWriter::new(io::stdout().lock()),
        Vec::new(),
        files.clone(),
    )
    .with_span_names(pairer.span_names())
    .with_labels(pairer.labels());
    // The aggregator beside the CSV counts what the other formats say (on standard error).
    let mut sink = (csv, Aggregator::new(Vec::new(), None));
    let (totals, error) = read_all(inputs, options, pairer, &mut sink, show_progress());
    let (csv, mut aggregator) = sink;
    match csv.finish() {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(()),
        other => other.context("writing CSV to standard output")?,
    }
    if !measured(&aggregator, None)
        && let Some(e) = error
    {
        // as the other formats: an error that stopped a read of nothing is said alone
        return Err(e.into());
    }
    aggregator.set_names(pairer.span_names().borrow().clone());
    let report = SpansReport {
        aggregator: &aggregator,
        input: totals.input(),
        warnings: totals.warnings(pairer, &aggregator),
        files,
        labels: pairer.labels().borrow().clone(),
        unit,
    };
    eprint!("{}", latscope::report::csv::summary(&report));
    error.map_or(Ok(()), |e| Err(e.into()))
}

/// What a read shows on standard error as it goes: a progress bar for a long input, and what
/// each input was read as.
fn show_progress() -> impl FnMut(Progress<'_>) {
    let mut bar = ProgressBar::hidden();
    move |progress| match progress {
        Progress::Opened { name, size } => bar = progress_bar(name, size),
        Progress::Read(bytes) => bar.set_position(bytes),
        Progress::Ended => bar.finish_and_clear(),
        Progress::ReadAs(line) => eprintln!("{line}"),
    }
}
