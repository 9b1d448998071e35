//! `latscope wayland`: analyse WAYLAND_DEBUG logs.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::cli::{Format, OutputArgs, WaylandArgs};
use crate::signals;
use latscope::ingest::mapped::Mapped;
use latscope::ingest::wayland::{self, InputStats, ReadOptions, SpanKind};
use latscope::ingest::{Cancel, compressed};
use latscope::report::csv::CsvSink;
use latscope::report::json::Json;
use latscope::report::markdown::Markdown;
use latscope::report::text::Text;
use latscope::report::{Renderer, SpansReport};
use latscope::span::{Aggregator, SpanSink};

/// Inputs larger than this get a progress bar (when stderr is a terminal).
const PROGRESS_MIN_BYTES: u64 = 256 << 20;

/// An input: a name for messages and a way to open it.
pub enum Input {
    /// a file
    Path(PathBuf),
    /// standard input
    Stdin,
    /// bytes built into the binary
    Embedded(&'static str, &'static [u8]),
}

impl Input {
    pub fn from_path(path: &Path) -> Input {
        if path.as_os_str() == "-" {
            Input::Stdin
        } else {
            Input::Path(path.to_path_buf())
        }
    }

    pub fn name(&self) -> String {
        match self {
            Input::Path(p) => p.display().to_string(),
            Input::Stdin => "<stdin>".to_string(),
            Input::Embedded(name, _) => name.to_string(),
        }
    }

    /// The input, opened and decompressed when its first bytes say it is gzip, zstd or xz
    /// (on a thread of its own), with its size when it is a plain file (for the progress bar)
    /// and, when it is a plain file of a megabyte or more, its map (its lines are read in place:
    /// [`latscope::ingest::mapped`]). A decompressing thread stops at `cancel`.
    pub fn open(&self, cancel: Option<&Cancel>) -> Result<Opened, latscope::Error> {
        let open_error = |source| latscope::Error::Open {
            file: self.name(),
            source,
        };
        let (raw, size, mapped): (Box<dyn Read + Send>, _, _) = match self {
            Input::Path(p) => {
                let file = File::open(p).map_err(open_error)?;
                let meta = file.metadata().map_err(open_error)?;
                if meta.is_dir() {
                    return Err(open_error(io::Error::other("is a directory")));
                }
                let mapped = Mapped::of(&file);
                (Box::new(file), Some(meta.len()), mapped)
            }
            Input::Stdin => (Box::new(io::stdin()), None, None),
            Input::Embedded(_, bytes) => {
                return Ok(Opened {
                    reader: Box::new(*bytes),
                    size: None,
                    mapped: None,
                });
            }
        };
        let (reader, compression) = compressed::open(raw, cancel).map_err(open_error)?;
        Ok(Opened {
            reader,
            // The bar counts bytes after decompression: a compressed file's size says nothing.
            size: size.filter(|_| compression.is_none()),
            mapped: mapped.filter(|_| compression.is_none()),
        })
    }
}

/// An input opened ([`Input::open`]).
pub struct Opened {
    /// its bytes, decompressed
    pub reader: Box<dyn Read + Send>,
    /// its size, when it is a plain file
    pub size: Option<u64>,
    /// its map, when it is a plain file of a megabyte or more
    pub mapped: Option<Mapped>,
}

/// Runs `latscope wayland`.
pub fn run(args: &WaylandArgs) -> Result<()> {
    let inputs: Vec<Input> = args.files.iter().map(|p| Input::from_path(p)).collect();
    let options = ReadOptions {
        spans: args.span_options(),
        strict: args.strict,
        cancel: None,
        threads: usize::from(args.threads),
        chunk_bytes: args.chunk_bytes,
    };
    analyse_and_print(&inputs, options, &args.output, None)
}

/// Analyses `inputs` and prints the report in the requested format. Shared with `demo`.
///
/// The HTML report goes to `report_to` when given (the demo makes its own page), else to
/// `--report`.
pub fn analyse_and_print(
    inputs: &[Input],
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
    let files: Vec<String> = inputs.iter().map(Input::name).collect();
    let options = ReadOptions {
        cancel: Some(signals::cancel_on_interrupt()),
        ..options
    };
    if output.format == Format::Csv {
        let mut sink = CsvSink::new(io::BufWriter::new(io::stdout().lock()), names, files);
        let (_, error) = read_all(inputs, &options, &mut sink);
        match sink.finish() {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(()),
            other => other.context("writing CSV to standard output")?,
        }
        return error.map_or(Ok(()), Err);
    }
    let mut aggregator = Aggregator::new(names, linear);
    let (stats, error) = read_all(inputs, &options, &mut aggregator);
    let report = SpansReport {
        aggregator: &aggregator,
        input: stats.fields(),
        warnings: stats.warnings(),
        files,
        labels: Vec::new(),
        unit: output.unit.unit(),
    };
    // Whatever was read is printed, even when reading failed part-way.
    crate::commands::print(&render(&report, output))?;
    if let Some(to) = report_to {
        write_report(&report, to)?;
    }
    error.map_or(Ok(()), Err)
}

/// Where an HTML report goes.
pub enum ReportTo {
    /// `--report FILE`, checked before the run.
    Output(latscope::files::Output),
    /// The caller makes the page of the document (the demo's, of all its parts).
    Page(Box<dyn FnOnce(latscope::doc::spans::SpansDoc) -> Result<()>>),
}

/// Writes the HTML report of `report` (stats and plots).
fn write_report(report: &SpansReport<'_>, to: ReportTo) -> Result<()> {
    let doc = latscope::report::json::document(report);
    match to {
        ReportTo::Page(page) => page(doc),
        to => write_html(&doc, to, report.unit),
    }
}

/// Writes the HTML report of a `spans` document: statistics and plots per series, and latency
/// against time when it kept its spans (`latscope spans --max-spans`).
pub fn write_html(
    doc: &latscope::doc::spans::SpansDoc,
    to: ReportTo,
    unit: latscope::stats::Unit,
) -> Result<()> {
    let items = latscope::doc::items("this run", &latscope::doc::Document::Spans(doc.clone()))?;
    let page = latscope::report::html::report(&[("this run".to_string(), items)], None, unit);
    let page = latscope::report::html::with_time_views(page, doc);
    let path = match to {
        ReportTo::Output(out) => {
            out.write(page.as_bytes())?;
            out.path().to_path_buf()
        }
        ReportTo::Page(make) => return make(doc.clone()),
    };
    eprintln!("latscope: report written to {}", path.display());
    Ok(())
}

pub fn render(report: &SpansReport<'_>, output: &OutputArgs) -> String {
    match output.format {
        Format::Json => Json {
            pretty: output.pretty,
        }
        .render(report),
        Format::Markdown => Markdown.render(report),
        Format::Text | Format::Csv => Text {
            linear: output.linear.is_some(),
            no_histogram: output.no_histogram,
        }
        .render(report),
    }
}

/// Reads every input into `sink`. Returns what was read, and the error that stopped it, if any
/// (what was read before an error is kept: it is in `sink` and in the stats).
fn read_all(
    inputs: &[Input],
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
        let (reader, mapped) = (opened.reader, opened.mapped);
        let result = wayland::analyze_mapped(
            reader,
            mapped,
            &name,
            index as u32,
            options,
            sink,
            |bytes| progress.set_position(bytes),
        );
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

pub fn progress_bar(name: &str, size: Option<u64>) -> ProgressBar {
    match size {
        Some(size) if size >= PROGRESS_MIN_BYTES => {
            let bar = ProgressBar::with_draw_target(Some(size), ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template(
                "{msg} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
            bar.set_style(style);
            bar.set_message(name.to_string());
            bar
        }
        _ => ProgressBar::hidden(),
    }
}
