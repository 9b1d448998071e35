//! Raw samples as CSV, streamed while the input is read: `span,side,group,start_ns,latency_ns`.

use std::io::Write;

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
}
