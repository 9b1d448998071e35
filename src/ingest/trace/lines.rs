//! A trace's lines read in order, one at a time, into its statistics and the pairer: the
//! serial reader, and the part of the parallel reader ([`super::parallel`]) that follows the
//! input's order.

use super::babeltrace::Babeltrace;
use super::rules::Pairer;
use super::shape::RowShapes;
use super::stats::{TraceError, TraceStats};
use super::syscalls::{Syscalls, Tracer};
use super::table::{Columns, Csv, RowKeys, json_line};
use super::{Event, Format, Parsed};
use crate::ingest::Location;
use crate::span::SpanSink;

/// Whether `format`'s lines are read as tokens split by spaces, and so given as
/// [`Line::Plain`](crate::ingest::lines::Line::Plain) where a block has no other white space.
pub(super) fn splits_on_spaces(format: Format) -> bool {
    matches!(format, Format::Perf | Format::Ftrace)
}

/// The serial reading of lines: every line in order, into the statistics and the pairer. The
/// parallel reader ([`super::parallel`]) keeps the same statistics, and reads a chunk here
/// when its workers could not (a babeltrace chunk of two kinds of stamps or past the most
/// midnights, a chunk of too much text) or should not (`--strict`'s chunk to stop in).
pub(super) struct Lines<'r> {
    pub(super) file: &'r str,
    pub(super) strict: bool,
    pub(super) stats: TraceStats,
    /// the first malformed line with --strict: the lines after it are not read
    pub(super) failure: Option<TraceError>,
    pub(super) state: LineState<'r>,
}

impl Lines<'_> {
    /// One line, numbered `no`.
    pub(super) fn line(
        &mut self,
        no: u64,
        line: crate::ingest::lines::Line<'_>,
        pairer: &mut Pairer,
        sink: &mut impl SpanSink,
    ) {
        if self.failure.is_some() {
            return;
        }
        let (text, plain) = match line {
            crate::ingest::lines::Line::Plain(text) => (text, true),
            crate::ingest::lines::Line::Str(text) => (text, false),
            crate::ingest::lines::Line::Text(bytes) => match std::str::from_utf8(bytes) {
                Ok(text) => (text, false),
                Err(_) => {
                    self.stats.not_utf8 += 1;
                    return;
                }
            },
            crate::ingest::lines::Line::TooLong { .. } => {
                note_malformed(&mut self.stats, self.file, no, TOO_LONG);
                return;
            }
        };
        let state = &mut self.state;
        let format = state.format;
        let parsed = match format {
            Format::Strace => state.syscalls.line(Tracer::Strace, text, pairer, sink),
            Format::PerfTrace => state.syscalls.line(Tracer::PerfTrace, text, pairer, sink),
            _ => state.parse_line(text, plain),
        };
        match parsed {
            Parsed::Skip => self.stats.skipped += 1,
            Parsed::Malformed(reason) => {
                if self.strict {
                    self.failure = Some(self.malformed(no, reason));
                }
                note_malformed(&mut self.stats, self.file, no, reason);
            }
            Parsed::Event if matches!(format, Format::Strace | Format::PerfTrace) => {
                self.stats.events += 1;
            }
            Parsed::Event => {
                self.stats.events += 1;
                state.check_order(&mut self.stats, self.file, no);
                let line = state.line(text);
                pairer.event(line, &state.ev, no, sink);
            }
        }
    }

    /// The --strict error of line `no`.
    pub(super) fn malformed(&self, no: u64, reason: &'static str) -> TraceError {
        TraceError::Malformed {
            location: Location {
                file: self.file.to_string(),
                line: no,
            },
            format: self.state.format.name(),
            reason,
        }
    }
}

/// Why a line longer than the read buffer is not read.
pub(super) const TOO_LONG: &str = "a line longer than 1 MiB";

pub(super) fn note_malformed(stats: &mut TraceStats, file: &str, line: u64, reason: &'static str) {
    stats.malformed += 1;
    stats.first_malformed.get_or_insert((
        Location {
            file: file.to_string(),
            line,
        },
        reason,
    ));
}

/// A line format's parser and what it keeps across lines.
pub(super) struct LineState<'c> {
    pub(super) format: Format,
    pub(super) babeltrace: Babeltrace,
    csv: Csv,
    pub(super) columns: &'c Columns,
    /// the fields rules read (JSON lines skip the others)
    pub(super) wanted: Vec<String>,
    /// the keys of a JSON-lines row that are read
    row_keys: RowKeys,
    /// the shapes of the JSON-lines rows read so far
    row_shapes: RowShapes,
    pub(super) syscalls: Syscalls,
    scratch: String,
    /// the event's ranges point into `scratch` (not into the line)
    in_scratch: bool,
    pub(super) ev: Event,
    pub(super) last_ts: Option<u64>,
    /// whether a rule reads a field of perf's or ftrace's prefix (`common_pid`, ...)
    prefixed: bool,
}

impl<'c> LineState<'c> {
    pub(super) fn new(format: Format, columns: &'c Columns, wanted: Vec<String>) -> Self {
        LineState {
            prefixed: super::text::reads_prefix(&wanted),
            row_keys: RowKeys::new(columns, &wanted),
            row_shapes: RowShapes::default(),
            format,
            babeltrace: Babeltrace::default(),
            csv: Csv::default(),
            columns,
            wanted,
            syscalls: Syscalls::default(),
            scratch: String::new(),
            in_scratch: false,
            ev: Event::default(),
            last_ts: None,
        }
    }

    /// Parses one line into `self.ev`.
    /// `plain`: the line is known to hold no tab, `\r` or `\x0c`
    /// ([`Line::Plain`](crate::ingest::lines::Line::Plain)).
    pub(super) fn parse_line(&mut self, text: &str, plain: bool) -> Parsed {
        self.in_scratch = matches!(self.format, Format::Csv);
        match self.format {
            Format::Perf | Format::Ftrace if self.prefixed => {
                super::text::parse_lazy(text, &mut self.ev, plain)
            }
            Format::Perf | Format::Ftrace => {
                super::text::parse_lazy_unprefixed(text, &mut self.ev, plain)
            }
            Format::Babeltrace => self
                .babeltrace
                .parse_shaped(text, &mut self.ev, &self.wanted),
            Format::JsonLines => {
                let (columns, keys) = (self.columns, &self.row_keys);
                if let Some(parsed) = self.row_shapes.read(text, columns, keys, &mut self.ev) {
                    return parsed;
                }
                self.in_scratch = true;
                json_line(
                    text,
                    self.columns,
                    Some(&self.wanted),
                    &mut self.scratch,
                    &mut self.ev,
                )
            }
            Format::Csv => self
                .csv
                .parse(text, self.columns, &mut self.scratch, &mut self.ev),
            Format::Chrome | Format::Strace | Format::PerfTrace => Parsed::Skip,
        }
    }

    /// The text the event's ranges point into.
    pub(super) fn line<'a>(&'a self, text: &'a str) -> &'a str {
        if self.in_scratch { &self.scratch } else { text }
    }

    /// Counts an event stamped before the one before it. Inlined, its rare case apart (a call
    /// an event was a cost on every short JSON-lines row).
    #[inline(always)]
    fn check_order(&mut self, stats: &mut TraceStats, file: &str, line: u64) {
        let ts = self.ev.ts_ns;
        if self.last_ts.is_some_and(|last| ts < last) {
            backwards(stats, file, line);
        }
        self.last_ts = Some(ts);
    }
}

#[cold]
fn backwards(stats: &mut TraceStats, file: &str, line: u64) {
    stats.backwards += 1;
    stats.first_backwards.get_or_insert(Location {
        file: file.to_string(),
        line,
    });
}
