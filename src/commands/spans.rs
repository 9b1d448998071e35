//! `latscope spans`: latency from any trace.

use std::io;

use anyhow::{Context, Result};

use super::output::{ReportTo, progress_bar, render, write_html};
use crate::cli::{Format, SpansArgs};
use crate::signals;
use latscope::doc::spans::{Source as DocSource, SpanRecord};
use latscope::ingest::Source;
use latscope::ingest::trace::read::{TraceOptions, TraceStats, read};
use latscope::ingest::trace::rules::{Key, Pairer, Rule, parse_span};
use latscope::ingest::trace::table::Columns;
use latscope::ingest::trace::{Format as TraceFormat, rules::Endpoint};
use latscope::report::SpansReport;
use latscope::report::csv::CsvSink;
use latscope::report::format::human;
use latscope::span::{Aggregator, Group, Kept, Slow, Slowest, SpanSink};

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

/// What every input gave, summed, with one line per input on its format.
#[derive(Default)]
struct Totals {
    stats: TraceStats,
    formats: Vec<String>,
    notes: Vec<String>,
    missing_key: (u64, Option<String>),
}

impl Totals {
    fn add(&mut self, file: &str, s: &TraceStats) {
        self.stats.merge(s);
        let format = s.format.map_or("?", TraceFormat::name);
        let how = if s.detected { "detected" } else { "given" };
        self.formats.push(format.to_string());
        // What was read is said once, on standard error, not as a warning about the input.
        eprintln!("input: {file}: {} ({how})", s.layout.unwrap_or(format));
        if let Some((loc, why)) = &s.first_malformed {
            self.notes.push(format!(
                "{} line(s) of {file} are not {format} events; the first, {loc}: {why}",
                s.malformed
            ));
        }
        if let Some(loc) = &s.first_backwards {
            self.notes.push(format!(
                "{} event(s) of {file} are stamped before the event before them; the first at {loc}",
                s.backwards
            ));
        }
        if s.chrome.truncated {
            self.notes.push(format!(
                "{file} ends inside an event: every complete one was read"
            ));
        }
        if s.chrome.too_long > 0 {
            self.notes.push(format!(
                "{} event(s) of {file} are longer than 1 MiB: skipped unread (too_long)",
                s.chrome.too_long
            ));
        }
        if s.chrome.no_array {
            self.notes
                .push(format!("{file}: no traceEvents array was found"));
        }
    }

    /// The events that matched a rule and lacked a `--key` field, up to the end of the read.
    fn note_missing_key(&mut self, pairer: &Pairer) {
        let (n, line) = pairer.missing_key;
        self.missing_key = (n, line.map(|l| l.to_string()));
        if n > 0 {
            self.notes.push(format!(
                "{n} event(s) matched a rule but lack a --key field (the first on line {})",
                line.unwrap_or(0)
            ));
        }
    }

    fn input(&self) -> Vec<(&'static str, u64)> {
        let s = &self.stats;
        let mut input = vec![
            ("bytes", s.bytes),
            ("lines", s.lines),
            ("events", s.events),
            ("skipped", s.skipped),
            ("malformed", s.malformed),
            ("backwards", s.backwards),
            ("not_utf8", s.not_utf8),
            ("missing_key", self.missing_key.0),
        ];
        if self.formats.iter().any(|f| f == "chrome") {
            // Chrome JSON: what was counted and not paired.
            input.extend([("flows", s.chrome.flows), ("instants", s.chrome.instants)]);
        }
        input
    }
}

/// Reads every input into `sink` through `pairer`; what was read before an error is kept.
fn read_all(
    inputs: &[Source],
    options: &TraceOptions,
    pairer: &mut Pairer,
    sink: &mut impl SpanSink,
) -> (Totals, Option<anyhow::Error>) {
    let mut totals = Totals::default();
    for input in inputs {
        let name = input.name();
        let opened = match input.open(options.cancel.as_ref()) {
            Ok(opened) => opened,
            Err(e) => return (totals, Some(e.into())),
        };
        let progress = progress_bar(&name, opened.size);
        let result = read(opened, &name, options, pairer, sink, |b| {
            progress.set_position(b)
        });
        progress.finish_and_clear();
        pairer.finish(sink);
        match result {
            Ok(stats) => totals.add(&name, &stats),
            Err(failed) => {
                if let Some(read) = &failed.read {
                    totals.add(&name, read);
                }
                totals.note_missing_key(pairer);
                return (totals, Some(failed.error.into()));
            }
        }
        if totals.stats.interrupted {
            break;
        }
    }
    totals.note_missing_key(pairer);
    (totals, None)
}

fn records_of(spans: Vec<Slow>, names: &[String], labels: &[String]) -> Vec<SpanRecord> {
    spans
        .into_iter()
        .map(|s| SpanRecord {
            span: names.get(s.key.span).cloned().unwrap_or_default(),
            group: match s.key.group {
                Group::Label(i) => labels.get(i as usize).cloned(),
                _ => None,
            },
            start_ns: s.start_ns,
            latency_ns: s.latency_ns,
        })
        .collect()
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
        let files: Vec<String> = inputs.iter().map(Source::name).collect();
        let mut sink = CsvSink::new(io::BufWriter::new(io::stdout().lock()), Vec::new(), files)
            .with_span_names(pairer.span_names())
            .with_labels(pairer.labels());
        let (_, error) = read_all(&inputs, &options, &mut pairer, &mut sink);
        if let Some(note) = pairer.folded_note() {
            eprintln!("latscope: warning: {note}");
        }
        match sink.finish() {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(()),
            other => other.context("writing CSV to standard output")?,
        }
        return error.map_or(Ok(()), Err);
    }
    let linear = args.output.linear_spec()?;
    let mut sink = (
        Aggregator::new(Vec::new(), linear),
        (Slowest::new(args.slowest), Kept::new(args.max_spans.get())),
    );
    let (totals, error) = read_all(&inputs, &options, &mut pairer, &mut sink);
    let (mut aggregator, (slowest, kept)) = sink;
    let names = pairer.span_names().borrow().clone();
    let labels = pairer.labels().borrow().clone();
    aggregator.set_names(names.clone());
    let measured = |span: Option<usize>| {
        aggregator
            .sorted()
            .iter()
            .any(|(k, s)| span.is_none_or(|i| k.span == i) && s.distribution.count() > 0)
    };
    if !measured(None) {
        // Nothing silent: no span is an error that says why, never an empty result.
        if let Some(e) = error {
            return Err(e);
        }
        if no_rules
            && !totals
                .formats
                .iter()
                .any(|f| f == "chrome" || f == "strace" || f == "perf-trace")
        {
            usage(
                "no span to measure: give --span NAME=START..END or --start/--end (only Chrome JSON, strace/ltrace -T and perf trace carry spans themselves)",
            );
        }
        let mut why = format!(
            "no span measured in {} ({} events read)",
            inputs
                .iter()
                .map(Source::name)
                .collect::<Vec<_>>()
                .join(", "),
            totals.stats.events
        );
        for line in pairer.diagnose() {
            why.push_str("\n  ");
            why.push_str(&line);
        }
        why.push_str("\nsee `latscope spans --help` for the rule grammar");
        anyhow::bail!(why);
    }
    let silent: Vec<String> = pairer
        .diagnose()
        .into_iter()
        .filter(|line| {
            let span = line.split('\'').nth(1).unwrap_or("");
            let id = names.iter().position(|n| n == span);
            !measured(id)
        })
        .collect();
    let mut warnings = totals.notes.clone();
    if let Some(note) = pairer.folded_note() {
        eprintln!("latscope: warning: {note}");
        warnings.push(note);
    }
    warnings.extend(silent.into_iter().map(|l| format!("measured nothing: {l}")));
    if totals.stats.interrupted {
        warnings.push("interrupted: the spans read so far are reported".to_string());
    }
    let report = SpansReport {
        aggregator: &aggregator,
        input: totals.input(),
        warnings,
        files: inputs.iter().map(Source::name).collect(),
        labels,
        unit: args.output.unit.unit(),
    };
    let slow = records_of(slowest.sorted(), &names, &report.labels);
    let mut doc = latscope::report::json::document(&report);
    doc.source = DocSource::Trace;
    doc.format = Some(totals.formats.join(","));
    doc.slowest = slow;
    doc.records = records_of(kept.spans, &names, &report.labels);
    doc.records_dropped = kept.dropped;
    for s in &mut doc.spans {
        s.by = s.group.as_ref().and(args.by.clone());
    }
    let text = match args.output.format {
        Format::Json => latscope::doc::to_json(&doc, args.output.pretty),
        Format::Markdown => render(&report, &args.output),
        _ => render(&report, &args.output) + &slowest_text(&doc.slowest),
    };
    crate::commands::print(&text)?;
    if let Some(out) = report_to {
        write_html(&doc, ReportTo::Output(out), report.unit)?;
    }
    error.map_or(Ok(()), Err)
}
