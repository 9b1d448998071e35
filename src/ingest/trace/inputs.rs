//! Several traces read one after the other into one [`Pairer`] (what `latscope spans` reads),
//! with what every input gave summed ([`Totals`]) and what is worth saying about them: the
//! notes about each input, why nothing was measured, the rules that measured nothing.

use super::Format;
use super::read::{TraceError, TraceOptions, TraceStats, read};
use super::rules::Pairer;
use crate::ingest::Source;
use crate::span::{Aggregator, SpanSink};

/// What a caller sees of [`read_all`] as it goes, to show it (a progress bar, a line per input).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress<'a> {
    /// An input is opened: its name, and its size when known.
    Opened {
        /// the input's name
        name: &'a str,
        /// its size in bytes
        size: Option<u64>,
    },
    /// The bytes of the input read so far.
    Read(u64),
    /// The input's read has ended (its spans still open are being closed).
    Ended,
    /// What the input was read as, said once per input read: `input: NAME: LAYOUT (detected)`.
    ReadAs(&'a str),
}

/// Why [`read_all`] stopped before the end of its inputs.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// An input could not be opened.
    #[error(transparent)]
    Open(#[from] crate::Error),
    /// An input could not be read (what was read of it before is kept).
    #[error(transparent)]
    Trace(#[from] TraceError),
}

/// What every input gave, summed, with what is worth saying about each.
#[derive(Debug, Default)]
pub struct Totals {
    /// the counts of every input, summed
    pub stats: TraceStats,
    /// each input's format, in the order read (`perf`, `chrome`, ...; `?` when unknown)
    pub formats: Vec<String>,
    /// one sentence per thing worth saying about an input (malformed or backwards lines, a
    /// truncated or odd Chrome JSON file, events that lack a key field)
    pub notes: Vec<String>,
    /// the events that matched a rule and lacked a `--key` field, and the first one's line
    pub missing_key: (u64, Option<String>),
}

/// Why nothing was measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NothingMeasured {
    /// No rule was given, and no input carries spans itself: a usage error.
    NoRule,
    /// Rules were given: what they met, one finding a line after the first.
    Why(String),
}

impl Totals {
    /// Adds what `file` gave; returns what it was read as, for the caller to say.
    pub fn add(&mut self, file: &str, s: &TraceStats) -> String {
        self.stats.merge(s);
        let format = s.format.map_or("?", Format::name);
        let how = if s.detected { "detected" } else { "given" };
        self.formats.push(format.to_string());
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
        if s.detached {
            self.notes.push(format!(
                "strace detached from the traced process in {file} (`strace -p` stopped): its {} call(s) then in progress were cut off, counted unmatched",
                s.in_progress
            ));
        } else if s.in_progress > 0 {
            self.notes.push(format!(
                "{} call(s) of {file} were still in progress at its end (never resumed or continued), counted unmatched",
                s.in_progress
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
        format!("input: {file}: {} ({how})", s.layout.unwrap_or(format))
    }

    /// The events that matched a rule and lacked a `--key` field, up to the end of the read.
    pub fn note_missing_key(&mut self, pairer: &Pairer) {
        let (n, line) = pairer.missing_key;
        self.missing_key = (n, line.map(|l| l.to_string()));
        if n > 0 {
            self.notes.push(format!(
                "{n} event(s) matched a rule but lack a --key field (the first on line {})",
                line.unwrap_or(0)
            ));
        }
    }

    /// The counts of the document's `input`, in display order.
    pub fn input(&self) -> Vec<(&'static str, u64)> {
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
        if self.formats.iter().any(|f| f == Format::Chrome.name()) {
            // Chrome JSON: what was counted and not paired.
            input.extend([("flows", s.chrome.flows), ("instants", s.chrome.instants)]);
        }
        input
    }

    /// Why `pairer` measured nothing in the inputs named `files`, which `no_rules` were given.
    pub fn nothing_measured(
        &self,
        files: &[String],
        pairer: &Pairer,
        no_rules: bool,
    ) -> NothingMeasured {
        let carry_spans = self
            .formats
            .iter()
            .any(|f| Format::parse(f).is_some_and(Format::carries_spans));
        if no_rules && !carry_spans {
            return NothingMeasured::NoRule;
        }
        // What was read, so that an input cut short (a file truncated under the read, a
        // `timeout` or Ctrl-C) is told from one read whole.
        let s = &self.stats;
        let mut why = format!(
            "no span measured in {} ({} events in {} lines, {} bytes read{})",
            files.join(", "),
            s.events,
            s.lines,
            s.bytes,
            if s.interrupted {
                ", then interrupted"
            } else {
                ""
            }
        );
        for line in pairer.diagnose() {
            why.push_str("\n  ");
            why.push_str(&line);
        }
        why.push_str("\nsee `latscope spans --help` for the rule grammar");
        NothingMeasured::Why(why)
    }

    /// The warnings of a run that measured something: the notes about the inputs, the series
    /// folded past `--max-series`, each rule that measured nothing, and an interruption.
    pub fn warnings(&self, pairer: &Pairer, aggregator: &Aggregator) -> Vec<String> {
        let mut warnings = self.notes.clone();
        warnings.extend(pairer.folded_note());
        warnings.extend(
            silent_rules(pairer, aggregator)
                .into_iter()
                .map(|l| format!("measured nothing: {l}")),
        );
        if self.stats.interrupted {
            warnings.push("interrupted: the spans read so far are reported".to_string());
        }
        warnings
    }
}

/// Whether `aggregator` holds a sample of span `span` (of any span: `None`).
pub fn measured(aggregator: &Aggregator, span: Option<usize>) -> bool {
    aggregator
        .sorted()
        .iter()
        .any(|(k, s)| span.is_none_or(|i| k.span == i) && s.distribution.count() > 0)
}

/// What the pairer found about the rules whose span has no sample in `aggregator`.
fn silent_rules(pairer: &Pairer, aggregator: &Aggregator) -> Vec<String> {
    let names = pairer.span_names().borrow().clone();
    pairer
        .diagnose()
        .into_iter()
        .filter(|line| {
            let span = line.split('\'').nth(1).unwrap_or("");
            let id = names.iter().position(|n| n == span);
            !measured(aggregator, id)
        })
        .collect()
}

/// Reads every input, in order, into `sink` through `pairer`, telling `watch` how it goes; what
/// was read before an error is kept, with the error. Ctrl-C (`options.cancel`) ends the read
/// after the input it interrupted.
pub fn read_all(
    inputs: &[Source],
    options: &TraceOptions,
    pairer: &mut Pairer,
    sink: &mut impl SpanSink,
    mut watch: impl FnMut(Progress<'_>),
) -> (Totals, Option<InputError>) {
    let mut totals = Totals::default();
    for input in inputs {
        let name = input.name();
        let opened = match input.open(options.cancel.as_ref()) {
            Ok(opened) => opened,
            Err(e) => return (totals, Some(e.into())),
        };
        watch(Progress::Opened {
            name: &name,
            size: opened.size,
        });
        let result = read(opened, &name, options, pairer, sink, |b| {
            watch(Progress::Read(b))
        });
        watch(Progress::Ended);
        pairer.finish(sink);
        match result {
            Ok(stats) => watch(Progress::ReadAs(&totals.add(&name, &stats))),
            Err(failed) => {
                if let Some(read) = &failed.read {
                    watch(Progress::ReadAs(&totals.add(&name, read)));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::trace::rules::{Key, Repeat, Rule, parse_span};

    const REQUESTS: &[u8] = b"{\"ts\": 1000, \"name\": \"begin\", \"id\": 1}\n\
        {\"ts\": 1500, \"name\": \"done\", \"id\": 1}\n\
        {\"ts\": 2000, \"name\": \"begin\", \"id\": 2}\n\
        {\"ts\": 2000, \"name\": \"done\"}\n\
        {\"ts\": 2700, \"name\": \"done\", \"id\": 2}\n";

    fn pairer(spec: &str) -> Pairer {
        let (name, start, end) = parse_span(spec).unwrap();
        let rule = Rule {
            span: 0,
            start,
            end,
            key: Key::parse("id").unwrap(),
        };
        Pairer::new(vec![rule], vec![name], None, Repeat::KeepLast)
    }

    fn read_two(pairer: &mut Pairer, sink: &mut Aggregator) -> (Totals, Vec<String>) {
        let inputs = [
            Source::Embedded("a.jsonl", REQUESTS),
            Source::Embedded("b.jsonl", REQUESTS),
        ];
        let mut said = Vec::new();
        let (totals, error) = read_all(&inputs, &TraceOptions::default(), pairer, sink, |p| {
            if let Progress::ReadAs(line) = p {
                said.push(line.to_string());
            }
        });
        assert!(error.is_none(), "{error:?}");
        (totals, said)
    }

    #[test]
    fn every_input_is_read_into_one_pairer_and_summed_with_a_line_each() {
        let mut pairer = pairer("req=begin..done");
        let mut sink = Aggregator::new(Vec::new(), None);
        let (totals, said) = read_two(&mut pairer, &mut sink);
        assert_eq!(
            said,
            [
                "input: a.jsonl: JSON lines (detected)",
                "input: b.jsonl: JSON lines (detected)"
            ]
        );
        assert_eq!(totals.formats, ["jsonl", "jsonl"]);
        assert!(measured(&sink, Some(0)));
        let input: Vec<(&str, u64)> = totals.input();
        assert!(input.contains(&("events", 10)), "{input:?}");
        // The `done` without an id, once in each input.
        assert_eq!(totals.missing_key.0, 2);
        assert!(
            totals.notes[0].contains("lack a --key field"),
            "{:?}",
            totals.notes
        );
        let warnings = totals.warnings(&pairer, &sink);
        assert_eq!(warnings, totals.notes);
    }

    #[test]
    fn nothing_measured_says_why_or_asks_for_a_rule() {
        let mut pairer = pairer("req=begin..never");
        let mut sink = Aggregator::new(Vec::new(), None);
        let (totals, _) = read_two(&mut pairer, &mut sink);
        assert!(!measured(&sink, None));
        let files = ["a.jsonl".to_string(), "b.jsonl".to_string()];
        let NothingMeasured::Why(why) = totals.nothing_measured(&files, &pairer, false) else {
            panic!("rules were given")
        };
        let newlines = REQUESTS.iter().filter(|&&b| b == b'\n').count();
        let (lines, bytes) = (newlines * 2, REQUESTS.len() * 2);
        let read = format!("(10 events in {lines} lines, {bytes} bytes read)");
        assert!(
            why.starts_with(&format!("no span measured in a.jsonl, b.jsonl {read}")),
            "{why}"
        );
        assert!(why.ends_with("for the rule grammar"), "{why}");
        assert_eq!(
            totals.nothing_measured(&files, &pairer, true),
            NothingMeasured::NoRule
        );
    }
}
