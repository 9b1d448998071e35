//! What a trace read is told ([`TraceOptions`]) and what it says ([`TraceStats`],
//! [`TraceError`]): shared by the serial reader ([`super::read`], [`super::lines`]) and the
//! parallel ones ([`super::parallel`], [`super::parallel_chrome`]), which is why they live apart
//! from all of them.

use std::io;

use super::Format;
use super::chrome::ChromeStats;
use super::table::Columns;
use crate::ingest::{Cancel, Location};

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
    /// bytes of input per chunk of the parallel reader (0: [`crate::ingest::reader::CHUNK`])
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
    /// strace and perf trace: calls in progress when the trace ended (never resumed or
    /// continued, or cut off by strace's detach), counted unmatched
    pub in_progress: u64,
    /// strace detached from the traced process (`strace -p` stopped)
    pub detached: bool,
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
        self.in_progress += other.in_progress;
        self.detached |= other.detached;
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
    /// nothing to read: the input holds no byte
    #[error("{file}: the input is empty (0 bytes): nothing to read")]
    Empty {
        /// the input
        file: String,
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
