//! Reading one trace: detect its format from the first 64 KiB (unless told), then stream it
//! line by line (or, for Chrome JSON, element by element) into the [`Pairer`].

use std::io::{self, Read};

use super::babeltrace::Babeltrace;
use super::chrome::{Chrome, ChromeStats};
use super::detect::detect_layout;
use super::rules::Pairer;
use super::shape::RowShapes;
use super::syscalls::{Syscalls, Tracer};
use super::table::{Columns, Csv, RowKeys, json_line};
use super::{Event, Format, Parsed};
use crate::ingest::mapped::Mapped;
use crate::ingest::{Cancel, LineReader, Location};
use crate::span::SpanSink;

/// How to read.
#[derive(Debug, Clone, Default)]
pub struct TraceOptions {
    /// the format (`None`: detect it)
    pub format: Option<Format>,
    /// JSON lines / CSV columns
    pub columns: Columns,
    /// stop at Ctrl-C
    pub cancel: Option<Cancel>,
    /// fail at the first malformed line
    pub strict: bool,
    /// threads parsing line formats (0 and 1: the calling thread alone; see
    /// [`super::parallel`])
    pub threads: usize,
    /// bytes of input per chunk of the parallel reader (0: [`crate::ingest::chunks::CHUNK`])
    pub chunk_bytes: usize,
}

/// What reading a trace saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceStats {
    /// the format read
    pub format: Option<Format>,
    /// the producer and layout (`trace-cmd report -R`, `babeltrace2 --names=all`, ...)
    pub layout: Option<&'static str>,
    /// whether it was detected (not given)
    pub detected: bool,
    /// bytes read
    pub bytes: u64,
    /// lines read (line formats)
    pub lines: u64,
    /// events and spans read
    pub events: u64,
    /// headers, comments, blank lines
    pub skipped: u64,
    /// lines that should have been events and were not
    pub malformed: u64,
    /// the first of them, and why
    pub first_malformed: Option<(Location, &'static str)>,
    /// events stamped before the event before them
    pub backwards: u64,
    /// the first of them
    pub first_backwards: Option<Location>,
    /// lines that were not UTF-8
    pub not_utf8: u64,
    /// Chrome JSON only
    pub chrome: ChromeStats,
    /// Ctrl-C stopped the read
    pub interrupted: bool,
}

impl TraceStats {
    /// Adds the counts of `other` (another input) to these.
    pub fn merge(&mut self, other: &TraceStats) {
        self.bytes += other.bytes;
        self.lines += other.lines;
        self.events += other.events;
        self.skipped += other.skipped;
        self.malformed += other.malformed;
        self.backwards += other.backwards;
        self.not_utf8 += other.not_utf8;
        self.chrome.spans += other.chrome.spans;
        self.chrome.flows += other.chrome.flows;
        self.chrome.instants += other.chrome.instants;
        self.chrome.steps += other.chrome.steps;
        self.interrupted |= other.interrupted;
    }
}

/// A read of a trace that failed, with its counts where they are known: a trace whose lines
/// are mostly not events of its format, and `--strict`'s malformed line (its counts run to
/// that line; its bytes are those read, which the readers' read-ahead makes more).
pub type Failed = crate::ingest::Failed<TraceStats, TraceError>;

/// A trace could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// I/O
    #[error("error reading '{file}': {source}")]
    Read {
        /// the input
        file: String,
        /// the OS error
        source: io::Error,
    },
    /// no format recognised
    #[error(
        "{file}: not a trace latscope recognises (perf script, the tracefs trace file, trace-cmd report, babeltrace2 text, Chrome JSON, strace/ltrace -T, perf trace, JSON lines, CSV); give --input-format if it is one of them (see `latscope spans --help`)"
    )]
    Unknown {
        /// the input
        file: String,
    },
    /// a layout latscope recognises and cannot read
    #[error("{file}: {why}")]
    Refused {
        /// the input
        file: String,
        /// why, and what to do
        why: &'static str,
    },
    /// most lines are not events of the format
    #[error(
        "{location}: read as {layout} ({how}), but {malformed} of {lines} lines are not {layout} events; the first, here: {reason}; give --input-format if the file is another format (see `latscope spans --help`)"
    )]
    MostlyMalformed {
        /// the first bad line
        location: Location,
        /// the layout read
        layout: &'static str,
        /// detected or given
        how: &'static str,
        /// lines that were not events
        malformed: u64,
        /// lines read
        lines: u64,
        /// why the first was not
        reason: &'static str,
    },
    /// a malformed line with --strict
    #[error("{location}: malformed {format} line: {reason}")]
    Malformed {
        /// where
        location: Location,
        /// the format
        format: &'static str,
        /// why
        reason: &'static str,
    },
}

const HEAD: usize = 64 << 10;

/// Whether `format`'s lines are read as tokens split by spaces, and so given as
/// [`Line::Plain`](crate::ingest::lines::Line::Plain) where a block has no other white space.
pub(super) fn splits_on_spaces(format: Format) -> bool {
    matches!(format, Format::Perf | Format::Ftrace)
}

/// Reads the trace `reader` (named `file` in messages) into `pairer` and `sink`.
pub fn read(
    reader: impl Read + Send,
    file: &str,
    options: &TraceOptions,
    pairer: &mut Pairer,
    sink: &mut impl SpanSink,
    progress: impl FnMut(u64),
) -> Result<TraceStats, TraceError> {
    read_mapped(reader, None, file, options, pairer, sink, progress).map_err(|f| f.error)
}

/// [`read`] of a file whose map is `mapped` (the same file as `reader`, unread): its lines are
/// read in place ([`LineReader::mapped`], [`crate::ingest::chunks::Reader::mapped`]), after
/// its first bytes are read from `reader` to tell its format; the Chrome JSON readers read
/// `reader`.
pub fn read_mapped(
    mut reader: impl Read + Send,
    mapped: Option<Mapped>,
    file: &str,
    options: &TraceOptions,
    pairer: &mut Pairer,
    sink: &mut impl SpanSink,
    mut progress: impl FnMut(u64),
) -> Result<TraceStats, Failed> {
    let io_error = |source| TraceError::Read {
        file: file.to_string(),
        source,
    };
    let head = read_head(&mut reader, options.cancel.as_ref()).map_err(io_error)?;
    let detected_layout = detect_layout(&head).map_err(|why| TraceError::Refused {
        file: file.to_string(),
        why,
    });
    let (format, layout, detected) = match options.format {
        Some(f) => match detected_layout {
            Ok(Some((d, layout))) if d == f => (f, layout, false),
            _ => (f, f.layout(), false),
        },
        None => {
            let (f, layout) = detected_layout?.ok_or_else(|| TraceError::Unknown {
                file: file.to_string(),
            })?;
            (f, layout, true)
        }
    };
    let mut stats = TraceStats {
        format: Some(format),
        layout: Some(layout),
        detected,
        ..TraceStats::default()
    };
    // Ctrl-C during the first read: what was read is still analysed, nothing more is read.
    let interrupted = options.cancel.as_ref().is_some_and(Cancel::is_raised);
    let rest = reader.take(if interrupted { 0 } else { u64::MAX });
    let input = io::Cursor::new(head).chain(rest);
    if format == Format::Chrome {
        drop(mapped); // (read with `read`: its slot is free for another file)
        read_chrome(input, options, pairer, sink, &mut stats, progress).map_err(io_error)?;
        stats.interrupted |= interrupted;
        return Ok(stats);
    }
    let mut state = Lines {
        file,
        strict: options.strict,
        stats,
        failure: None,
        state: LineState::new(format, &options.columns, pairer.fields_read()),
    };
    let threads = options.threads.max(1);
    // (a Ctrl-C during the first read: nothing more is read, from the map either)
    let mapped = mapped.filter(|_| !interrupted);
    let (summary, read_error) = if threads > 1 && super::parallel::reads(format) {
        let cancel = options.cancel.as_ref().filter(|_| !interrupted);
        let reader =
            crate::ingest::chunks::Reader::new(input, options.chunk_bytes, cancel).mapped(mapped);
        match super::parallel::read(reader, threads, &mut state, pairer, sink, progress) {
            Ok(summary) => (summary, None),
            Err(e) => (crate::ingest::ReadSummary::default(), Some(e)),
        }
    } else {
        let mut lines = LineReader::new(input).utf8().mapped(mapped);
        if splits_on_spaces(format) {
            lines = lines.blanks();
        }
        if let Some(c) = options.cancel.as_ref().filter(|_| !interrupted) {
            lines = lines.cancel_on(c.clone());
        }
        // --strict: nothing after the first malformed line is read.
        let failed = Cancel::new();
        lines = lines.stop_when(failed.clone());
        let line = |no, line: crate::ingest::lines::Line<'_>| {
            state.line(no, line, pairer, sink);
            if state.failure.is_some() {
                failed.raise();
            }
        };
        match lines.for_each_line(line, &mut progress) {
            Ok(summary) => (summary, None),
            Err(e) => (crate::ingest::ReadSummary::default(), Some(e)),
        }
    };
    let mut stats = state.stats;
    stats.lines = summary.lines;
    stats.bytes = summary.bytes;
    stats.interrupted = summary.cancelled || interrupted;
    // A malformed line under --strict was read before any read error (nothing is read after
    // it), so it is the error, whatever the threads. Its counts run to the line, whatever
    // the threads (the lines after it are not counted; the bytes are those read).
    if let Some(e) = state.failure {
        if let TraceError::Malformed { location, .. } = &e {
            stats.lines = location.line;
        }
        return Err(Failed::after(stats, e));
    }
    if let Some(e) = read_error {
        return Err(io_error(e).into());
    }
    state.state.syscalls.finish(sink);
    match mostly_malformed(&stats, layout) {
        Ok(()) => Ok(stats),
        Err(e) => Err(Failed::after(stats, e)),
    }
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

/// A file whose lines are mostly not events of its format is not that format (or not one
/// latscope reads): an error naming the format and the first bad line, not a quiet result.
fn mostly_malformed(stats: &TraceStats, layout: &'static str) -> Result<(), TraceError> {
    let Some((location, reason)) = &stats.first_malformed else {
        return Ok(());
    };
    if stats.malformed <= stats.events {
        return Ok(());
    }
    Err(TraceError::MostlyMalformed {
        location: location.clone(),
        layout,
        how: if stats.detected { "detected" } else { "given" },
        malformed: stats.malformed,
        lines: stats.lines,
        reason,
    })
}

/// The first bytes, enough to detect the format: 64 KiB, the end of the input, or 16 whole
/// lines (a pipe from a live tracer must not wait for 64 KiB), whichever comes first. Ctrl-C
/// stops the wait.
fn read_head(reader: &mut impl Read, cancel: Option<&Cancel>) -> io::Result<Vec<u8>> {
    let mut head = vec![0u8; HEAD];
    let mut filled = 0;
    while filled < HEAD {
        match reader.read(&mut head[filled..]) {
            Ok(0) => break,
            Ok(n) => {
                filled += n;
                if memchr::memchr_iter(b'\n', &head[..filled]).count() >= 16 {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                if cancel.is_some_and(Cancel::is_raised) {
                    break;
                }
            }
            Err(e) => return Err(e),
        }
    }
    head.truncate(filled);
    Ok(head)
}

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
    syscalls: Syscalls,
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
    /// an event: 15 instructions of a JSON-lines row).
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

fn read_chrome(
    mut input: impl Read + Send,
    options: &TraceOptions,
    pairer: &mut Pairer,
    sink: &mut impl SpanSink,
    stats: &mut TraceStats,
    mut progress: impl FnMut(u64),
) -> io::Result<()> {
    let mut chrome = Chrome::default();
    if options.threads > 1 {
        let ended =
            super::parallel_chrome::read(input, options, &mut chrome, pairer, sink, progress)?;
        stats.bytes += ended.bytes;
        stats.interrupted |= ended.interrupted;
        finish_chrome(chrome, sink, stats);
        return Ok(());
    }
    let mut buf = vec![0u8; 1 << 20];
    let cancelled = || options.cancel.as_ref().is_some_and(Cancel::is_raised);
    loop {
        let n = match input.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted && !cancelled() => continue,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                stats.interrupted = true;
                break;
            }
            Err(e) => return Err(e),
        };
        stats.bytes += n as u64;
        chrome.feed(&buf[..n], pairer, sink);
        progress(stats.bytes);
        if cancelled() {
            stats.interrupted = true;
            break;
        }
    }
    finish_chrome(chrome, sink, stats);
    Ok(())
}

fn finish_chrome(mut chrome: Chrome, sink: &mut impl SpanSink, stats: &mut TraceStats) {
    chrome.finish(sink);
    stats.chrome = chrome.stats;
    stats.events = chrome.stats.elements;
    stats.malformed = chrome.stats.malformed;
}
