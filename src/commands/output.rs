//! What `wayland`, `spans` and `demo` print and write alike: the rendering of a spans report,
//! its HTML page, and the progress bar of a long read.

use anyhow::Result;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::cli::{Format, OutputArgs};
use latscope::report::json::Json;
use latscope::report::markdown::Markdown;
use latscope::report::text::Text;
use latscope::report::{Renderer, SpansReport};

/// Inputs larger than this get a progress bar (when stderr is a terminal).
const PROGRESS_MIN_BYTES: u64 = 256 << 20;

/// Where an HTML report goes.
pub enum ReportTo {
    /// `--report FILE`, checked before the run.
    Output(latscope::files::Output),
    /// The caller makes the page of the document (the demo's, of all its parts).
    Page(Box<dyn FnOnce(latscope::doc::spans::SpansDoc) -> Result<()>>),
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
