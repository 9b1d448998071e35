//! Raw samples as CSV, streamed while the input is read: `span,side,group,start_ns,latency_ns`.
//!
//! The samples take standard output, so what the other formats say beside them (the input's
//! counts, what was not paired, the warnings) goes to standard error as one short block
//! ([`summary`]): a CSV run must not lose what a text run says.

use std::fmt::Write as _;
use std::io::Write;

use super::SpansReport;
use crate::span::{Group, Outcome, SeriesKey, SpanSink};

/// A [`SpanSink`] that writes one CSV line per sample. Write errors are kept and reported by
/// [`CsvSink::finish`] (a closed pipe must end the run, not panic).
pub struct CsvSink<W: Write> {
    out: W,
    names: Vec<String>,
    files: Vec<String>,
    labels: Labels,
    shared_names: Option<Labels>,
    error: Option<std::io::Error>,
}

/// Group labels that grow while the input is read (values of a `--by` field), shared with the
/// reader that finds them.
pub type Labels = std::rc::Rc<std::cell::RefCell<Vec<String>>>;

impl<W: Write> CsvSink<W> {
    /// Writes the header line and returns the sink.
    pub fn new(mut out: W, names: Vec<String>, files: Vec<String>) -> Self {
        let error = writeln!(out, "span,side,group,start_ns,latency_ns").err();
        CsvSink {
            out,
            names,
            files,
            labels: Labels::default(),
            shared_names: None,
            error,
        }
    }

    /// Names spans from `names`, which may grow while the input is read.
    pub fn with_span_names(mut self, names: Labels) -> Self {
        self.shared_names = Some(names);
        self
    }

    /// Names `Group::Label` groups from `labels`.
    pub fn with_labels(mut self, labels: Labels) -> Self {
        self.labels = labels;
        self
    }

    /// Flushes and returns the first write error, if any.
    pub fn finish(mut self) -> std::io::Result<()> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.out.flush()
    }

    fn group(&self, group: Group) -> String {
        match group {
            Group::All => String::new(),
            Group::Object(label) => quote(&label.to_string()),
            Group::File(i) => quote(self.files.get(i as usize).map_or("", String::as_str)),
            Group::Label(i) => quote(
                self.labels
                    .borrow()
                    .get(i as usize)
                    .map_or("", String::as_str),
            ),
        }
    }
}

impl<W: Write> SpanSink for CsvSink<W> {
    fn sample(&mut self, key: &SeriesKey, start_ns: u64, latency_ns: u64) {
        if self.error.is_some() {
            return;
        }
        let shared = self.shared_names.as_ref().map(|n| n.borrow());
        let names = shared.as_deref().unwrap_or(&self.names);
        let name = quote(names.get(key.span).map_or("?", String::as_str));
        let side = key.side.map_or("", |s| s.name());
        let group = self.group(key.group);
        let result = writeln!(self.out, "{name},{side},{group},{start_ns},{latency_ns}");
        drop(shared);
        if let Err(e) = result {
            self.error = Some(e);
        }
    }

    fn outcome(&mut self, _key: &SeriesKey, _outcome: Outcome) {}
}

/// What a CSV run says on standard error after its samples: how many were written, the input's
/// counts, a line per series with starts or ends that made no sample, and the warnings. The
/// counts are those of the text and JSON reports of the same input (`report` is built the same
/// way, from an [`crate::span::Aggregator`] fed beside the CSV).
pub fn summary(report: &SpansReport<'_>) -> String {
    let rows = report.rows();
    let samples: u64 = rows.iter().map(|r| r.distribution.count()).sum();
    let mut out = format!(
        "csv: {samples} samples of {} series written to standard output\n",
        rows.iter().filter(|r| r.distribution.count() > 0).count()
    );
    out.push_str(&super::text::input_line(report));
    for row in &rows {
        if let Some(counts) = super::text::counters_line(row) {
            let _ = writeln!(out, "not paired: {}: {counts}", super::text::title(row));
        }
    }
    for warning in &report.warnings {
        let _ = writeln!(out, "warning: {warning}");
    }
    out
}

/// Quotes a field when it contains a comma, a quote or a line break (RFC 4180).
fn quote(field: &str) -> String {
    if field.contains([',', '"', '\n', '\r']) {
        super::format::csv_field(field)
    } else {
        field.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::span::{ObjectLabel, Side};

    #[test]
    fn samples_become_csv_lines_with_quoted_groups() {
        let mut buf = Vec::new();
        let mut sink = CsvSink::new(
            &mut buf,
            vec!["commit_to_release".into()],
            vec!["a,b.log".into()],
        );
        let label = ObjectLabel {
            conn: None,
            interface: "wl_surface",
            id: 3,
            generation: 0,
        };
        sink.sample(
            &SeriesKey {
                span: 0,
                side: Some(Side::Client),
                group: Group::Object(label),
            },
            10,
            5,
        );
        sink.sample(
            &SeriesKey {
                span: 0,
                side: None,
                group: Group::File(0),
            },
            20,
            7,
        );
        sink.finish().unwrap();
        assert_eq!(
            String::from_utf8(buf).unwrap(),
            "span,side,group,start_ns,latency_ns\ncommit_to_release,client,wl_surface#3a,10,5\ncommit_to_release,,\"a,b.log\",20,7\n"
        );
    }

    #[test]
    fn the_summary_says_the_samples_the_input_what_was_not_paired_and_the_warnings() {
        let mut aggregator =
            crate::span::Aggregator::new(vec!["read".into(), "futex".into()], None);
        let key = |span| SeriesKey {
            span,
            side: None,
            group: Group::All,
        };
        aggregator.sample(&key(0), 0, 10);
        aggregator.sample(&key(0), 5, 20);
        aggregator.outcome(&key(1), Outcome::Unmatched);
        aggregator.outcome(&key(1), Outcome::OrphanEnd);
        let report = SpansReport {
            aggregator: &aggregator,
            input: vec![("lines", 4), ("malformed", 0)],
            warnings: vec!["strace detached".into()],
            labels: Vec::new(),
            files: Vec::new(),
            unit: crate::stats::Unit::Us,
        };
        assert_eq!(
            summary(&report),
            "csv: 2 samples of 1 series written to standard output\n\
             input: 4 lines, 0 malformed\n\
             not paired: futex: unmatched 1  orphan ends 1\n\
             warning: strace detached\n"
        );
    }
}
