//! Rendering results. Every renderer is pure: it takes a [`SpansReport`] and returns text; the
//! caller decides where it goes. One file per format behind the [`Renderer`] trait; CSV is the
//! exception because it streams raw samples as they are found ([`csv::CsvSink`]).

pub mod bench;
pub mod compare;
pub mod csv;
pub mod export;
pub mod format;
pub mod html;
pub mod hyperfine;
pub mod json;
pub mod linear;
pub mod live;
pub mod log2;
pub mod markdown;
pub mod perfetto;
pub mod plot;
pub mod text;
pub mod timeline;

use crate::span::{Aggregator, Counters, Group, Series, Side};
use crate::stats::{Distribution, Unit};

/// Everything a span report shows.
#[derive(Debug, Clone)]
pub struct SpansReport<'a> {
    /// the series
    pub aggregator: &'a Aggregator,
    /// counts describing the input, in display order (`lines`, `skipped`, ...)
    pub input: Vec<(&'static str, u64)>,
    /// warnings about the input, one sentence each
    pub warnings: Vec<String>,
    /// group labels, indexed like [`Group::Label`]
    pub labels: Vec<String>,
    /// input names, indexed like [`Group::File`]
    pub files: Vec<String>,
    /// unit for human-readable output (machine-readable output is always in ns)
    pub unit: Unit,
}

/// One series, ready to print.
#[derive(Debug, Clone)]
pub struct Row<'a> {
    /// span name, e.g. `commit_to_release`
    pub name: &'a str,
    /// client or server, when known
    pub side: Option<Side>,
    /// group label, `None` for the whole span
    pub group: Option<String>,
    /// the samples
    pub distribution: &'a Distribution,
    /// everything that did not make a sample
    pub counters: Counters,
}

impl<'a> SpansReport<'a> {
    /// The series in order of span, side and group.
    pub fn rows(&self) -> Vec<Row<'a>> {
        let aggregator = self.aggregator;
        aggregator
            .sorted()
            .into_iter()
            .map(|(key, series): (_, &'a Series)| Row {
                name: aggregator.span_name(key.span),
                side: key.side,
                group: self.group_label(key.group),
                distribution: &series.distribution,
                counters: series.counters,
            })
            .collect()
    }

    fn group_label(&self, group: Group) -> Option<String> {
        match group {
            Group::All => None,
            Group::Object(label) => Some(label.to_string()),
            Group::File(i) => Some(
                self.files
                    .get(i as usize)
                    .cloned()
                    .unwrap_or_else(|| i.to_string()),
            ),
            Group::Label(i) => Some(
                self.labels
                    .get(i as usize)
                    .cloned()
                    .unwrap_or_else(|| i.to_string()),
            ),
        }
    }
}

/// How a document is shown to people, one implementation per document type; its JSON form is
/// the document itself ([`crate::doc::to_json`]). The command line picks the method by
/// `--format`, so every command offers the same formats the same way.
pub trait Render {
    /// For a terminal; durations in `unit` where a fixed unit is used.
    fn text(&self, unit: Unit) -> String;
    /// A Markdown table.
    fn markdown(&self, unit: Unit) -> String;
}

impl Render for crate::doc::compare::CompareDoc {
    fn text(&self, unit: Unit) -> String {
        compare::text(self, unit)
    }

    fn markdown(&self, unit: Unit) -> String {
        compare::markdown(self, unit)
    }
}

impl Render for crate::doc::lab::LabIpcDoc {
    /// Durations get a unit that fits each (`human`), so `unit` is not used.
    fn text(&self, _unit: Unit) -> String {
        crate::lab::ipc::report::text(self, false)
    }

    fn markdown(&self, _unit: Unit) -> String {
        crate::lab::ipc::report::markdown(self)
    }
}

/// A format for a whole [`SpansReport`].
pub trait Renderer {
    /// The report as text in this format.
    fn render(&self, report: &SpansReport<'_>) -> String;
}
