//! `latscope wayland`: analyse WAYLAND_DEBUG logs.

use std::io;

use anyhow::{Context, Result};

use super::output::{ReportTo, progress_bar, render, write_html};
use crate::cli::{Format, OutputArgs, WaylandArgs};
use crate::signals;
use latscope::ingest::Source;
use latscope::ingest::wayland::{self, InputStats, ReadOptions, SpanKind};
use latscope::report::SpansReport;
use latscope::report::csv::CsvSink;
use latscope::span::{Aggregator, SpanSink};

/// Runs `latscope wayland`.
pub fn run(args: &WaylandArgs) -> Result<()> {
    let inputs = args.input.sources();
    let options = ReadOptions {
        spans: args.span_options(),
        strict: args.input.strict,
        cancel: None,
        threads: usize::from(args.input.threads),
        chunk_bytes: args.input.chunk_bytes,
    };
    analyse_and_print(&inputs, options, &args.output, None)
}

/// Analyses `inputs` and prints the report in the requested format. Shared with `demo`.
///
/// The HTML report goes to `report_to` when given (the demo makes its own page), else to
/// `--report`.
pub fn analyse_and_print(
    inputs: &[Source],
    options: ReadOptions,
    output: &OutputArgs,
    report_to: Option<ReportTo>,
) -> Result<()> {
    let linear = output.linear_spec()?;
    let report_to = match report_to {
        Some(to) => Some(to),
        None => super::output_opt("--report", output.report.as_deref())?.map(ReportTo::Output),
    };
    let names = SpanKind::result_names();
    let files: Vec<String> = inputs.iter().map(Source::name).collect();
    let options = ReadOptions {
        cancel: Some(signals::cancel_on_interrupt()),
        ..options
    };
    if output.format == Format::Csv {
        return csv(inputs, &options, names, files, output);
    }
    let mut aggregator = Aggregator::new(names, linear);
    let (stats, error) = read_all(inputs, &options, &mut aggregator);
    let report = report(&aggregator, &stats, files, output);
    // Whatever was read is printed, even when reading failed part-way.
    crate::commands::print(&render(&report, output))?;
    if let Some(to) = report_to {
        write_report(&report, to)?;
    }
    error.map_or(Ok(()), Err)
}

fn report<'a>(
    aggregator: &'a Aggregator,
    stats: &InputStats,
    files: Vec<String>,
    output: &OutputArgs,
) -> SpansReport<'a> {
    SpansReport {
        aggregator,
        input: stats.fields(),
        warnings: stats.warnings(),
        files,
        labels: Vec::new(),
        unit: output.unit.unit(),
    }
}

/// `--format csv`: every sample as it is paired, to standard output; the counts the other
/// formats give, to standard error.
fn csv(
    inputs: &[Source],
    options: &ReadOptions,
    names: Vec<String>,
    files: Vec<String>,
    output: &OutputArgs,
) -> Result<()> {
    let csv = CsvSink::new(
        io::BufWriter::new(io::stdout().lock()),
        names.clone(),
        files.clone(),
    );
    let mut sink = (csv, Aggregator::new(names, None));
    let (stats, error) = read_all(inputs, options, &mut sink);
    let (csv, aggregator) = sink;
    match csv.finish() {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(()),
        other => other.context("writing CSV to standard output")?,
    }
    let report = report(&aggregator, &stats, files, output);
    eprint!("{}", latscope::report::csv::summary(&report));
    error.map_or(Ok(()), Err)
}

/// Writes the HTML report of `report` (stats and plots).
fn write_report(report: &SpansReport<'_>, to: ReportTo) -> Result<()> {
    let doc = latscope::report::json::document(report);
    match to {
        ReportTo::Page(page) => page(doc),
        to => write_html(&doc, to, report.unit),
    }
}

/// Reads every input into `sink`. Returns what was read, and the error that stopped it, if any
/// (what was read before an error is kept: it is in `sink` and in the stats).
fn read_all(
    inputs: &[Source],
    options: &ReadOptions,
    sink: &mut impl SpanSink,
) -> (InputStats, Option<anyhow::Error>) {
    let mut total = InputStats::default();
    for (index, input) in inputs.iter().enumerate() {
        let name = input.name();
        let opened = match input.open(options.cancel.as_ref()) {
            Ok(opened) => opened,
            Err(e) => return (total, Some(e.into())),
        };
        let progress = progress_bar(&name, opened.size);
        let result = wayland::analyze(opened, &name, index as u32, options, sink, |bytes| {
            progress.set_position(bytes)
        });
        progress.finish_and_clear();
        match result {
            Ok(stats) => total.merge(&stats),
            Err(failed) => {
                if let Some(read) = &failed.read {
                    total.merge(read);
                }
                return (total, Some(failed.error.into()));
            }
        }
        if total.interrupted {
            break;
        }
    }
    (total, None)
}
