//! WAYLAND_DEBUG logs: client-side and server-side, every libwayland dialect.
//!
//! [`analyze`] streams one input through four pure stages — [`drive`] (bytes to lines, on one
//! thread or several),
//! [`line::parse_line`] (a line to a message, and to what it means to the span rules; the
//! messages the rules read, in the layouts libwayland prints, are read straight to their
//! meaning by [`line::usual_head`] and [`spans::Meaning::of_usual`]), [`clock::Clock`]
//! (wrapping stamps to monotone nanoseconds) and [`spans::SpanTracker`] (messages to spans) —
//! and hands the spans to a [`SpanSink`]. Memory depends on the number of open spans and live
//! objects, never on the length of the log.

pub mod args;
pub mod clock;
pub mod line;
pub mod objects;
mod parallel;
pub mod spans;

use std::io::Read;

use crate::error::Error;
use crate::ingest::drive::{Drive, LineFormat, drive};
use crate::ingest::lines::Line;
use crate::ingest::source::Stream;
use crate::ingest::{Cancel, Failed, Location, ReadSummary};
use crate::span::SpanSink;

pub use spans::{GroupBy, SpanKind, SpanOptions, StreamStats};

/// How many malformed lines are kept as examples for the report.
pub const MALFORMED_EXAMPLES: usize = 5;

/// What was in the input, line by line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InputStats {
    /// input files read
    pub files: u64,
    /// bytes read
    pub bytes: u64,
    /// lines read
    pub lines: u64,
    /// protocol messages
    pub messages: u64,
    /// lines that are not WAYLAND_DEBUG output (toolkit warnings, compositor logging)
    pub skipped: u64,
    /// lines that look like WAYLAND_DEBUG output but break its grammar
    pub malformed: u64,
    /// the first few malformed lines: where, and why
    pub malformed_examples: Vec<(Location, String)>,
    /// `discarded [zombie]` lines: events for objects that no longer exist
    pub zombies: u64,
    /// lines longer than the read buffer, skipped
    pub too_long: u64,
    /// how many times a timestamp wrapped (2^32 µs, or midnight)
    pub clock_wraps: u64,
    /// inputs whose last line had no newline
    pub unterminated: u64,
    /// whether reading stopped early (Ctrl-C)
    pub interrupted: bool,
    /// protocol-level diagnostics
    pub stream: StreamStats,
}

impl InputStats {
    /// Adds the counts of another input.
    pub fn merge(&mut self, other: &InputStats) {
        self.files += other.files;
        self.bytes += other.bytes;
        self.lines += other.lines;
        self.messages += other.messages;
        self.skipped += other.skipped;
        self.malformed += other.malformed;
        let room = MALFORMED_EXAMPLES.saturating_sub(self.malformed_examples.len());
        self.malformed_examples
            .extend(other.malformed_examples.iter().take(room).cloned());
        self.zombies += other.zombies;
        self.too_long += other.too_long;
        self.clock_wraps += other.clock_wraps;
        self.unterminated += other.unterminated;
        self.interrupted |= other.interrupted;
        self.stream.unknown_callbacks += other.stream.unknown_callbacks;
        self.stream.reused_live_ids += other.stream.reused_live_ids;
        self.stream.reused_in_client_log += other.stream.reused_in_client_log;
        self.stream
            .first_id_reused
            .merge(other.stream.first_id_reused);
    }
}

/// How to read one input.
#[derive(Debug, Clone, Default)]
pub struct ReadOptions {
    /// spans and grouping
    pub spans: SpanOptions,
    /// stop at the first malformed line with an error
    pub strict: bool,
    /// stop reading when raised
    pub cancel: Option<Cancel>,
    /// threads reading the input, in all (0 and 1: the calling thread alone; see `parallel.rs`)
    pub threads: usize,
    /// bytes per chunk of the parallel reader (0: 256 KiB)
    pub chunk_bytes: usize,
}

/// Analyses one WAYLAND_DEBUG input named `file` (for messages), the `file_index`-th of the
/// inputs. Spans go to `sink`; `on_progress` gets the bytes read so far after each chunk.
///
/// Returns what the input contained. Partial results are already in `sink` when this returns
/// an error (an I/O error, or a malformed line under `strict`), and the error carries what was
/// read: `--strict`'s counts run to the malformed line, whatever the threads (its bytes are
/// those read, which the readers' read-ahead makes more).
pub fn analyze(
    input: Stream<impl Read + Send>,
    file: &str,
    file_index: u32,
    options: &ReadOptions,
    sink: &mut impl SpanSink,
    on_progress: impl FnMut(u64),
) -> Result<InputStats, Failed<InputStats, Error>> {
    let mut state = FileState {
        file,
        strict: options.strict,
        stats: InputStats {
            files: 1,
            ..InputStats::default()
        },
        clock: clock::Clock::new(),
        tracker: spans::SpanTracker::new(options.spans, file_index),
        scratch: Vec::new(),
        error: None,
    };
    let how = Drive {
        threads: options.threads,
        chunk_bytes: options.chunk_bytes,
        cancel: options.cancel.as_ref(),
        ..Drive::default()
    };
    let read = drive(input, &how, &mut state, sink, on_progress);
    state.tracker.finish(sink);
    // A malformed line under --strict was read before any read error (nothing is read after
    // it), so it is the error, whatever the threads.
    if let Some(error) = state.error.take() {
        let mut stats = state.stats_after(read.unwrap_or_else(|e| e.read));
        if let Error::Malformed { location, .. } = &error {
            // (up to the line: what the readers read after it, a last line's missing newline
            // included, is not said)
            stats.lines = location.line;
            stats.unterminated = 0;
        }
        return Err(Failed::after(stats, error));
    }
    match read {
        Ok(summary) => Ok(state.stats_after(summary)),
        Err(e) => {
            let error = Error::Read {
                file: file.to_string(),
                source: e.error,
            };
            Err(Failed::after(state.stats_after(e.read), error))
        }
    }
}

struct FileState<'f> {
    file: &'f str,
    strict: bool,
    stats: InputStats,
    clock: clock::Clock,
    tracker: spans::SpanTracker,
    scratch: Vec<u8>,
    error: Option<Error>,
}

impl<S: SpanSink> LineFormat<S> for FileState<'_> {
    #[inline]
    fn line(&mut self, number: u64, line: Line<'_>, sink: &mut S) {
        FileState::line(self, number, line, sink);
    }

    fn done(&self) -> bool {
        self.error.is_some()
    }

    fn parallel(&self) -> bool {
        true
    }

    fn read_chunks<R: Read + Send>(
        &mut self,
        chunks: crate::ingest::reader::Reader<'_, R>,
        threads: usize,
        sink: &mut S,
        progress: &mut dyn FnMut(u64),
    ) -> crate::ingest::lines::ReadResult {
        parallel::read(chunks, threads, self, sink, progress)
    }
}

impl FileState<'_> {
    /// The counts of the lines read, which `summary` sums up.
    fn stats_after(self, summary: ReadSummary) -> InputStats {
        let mut stats = self.stats;
        stats.bytes = summary.bytes;
        stats.lines = summary.lines;
        stats.unterminated = u64::from(summary.unterminated_last_line);
        stats.interrupted = summary.cancelled;
        stats.clock_wraps = self.clock.wraps();
        stats.stream = self.tracker.stats();
        stats
    }

    #[inline]
    fn line(&mut self, number: u64, line: Line<'_>, sink: &mut impl SpanSink) {
        if self.error.is_some() {
            return;
        }
        let text = match line {
            Line::Text(text) => text,
            Line::Str(text) | Line::Plain(text) => text.as_bytes(),
            Line::TooLong { .. } => {
                self.stats.too_long += 1;
                return;
            }
        };
        // The usual layout first, here rather than inside `parse_line`: there, the message
        // went through `Parsed` and the scratch line was taken for every line, a cost paid by
        // nearly every line of a log.
        if let Some(head) = line::usual_head(text) {
            // Most lines a span is measured in: their meaning read straight from the text,
            // not from a message built first, which was a large share of the reading.
            if let Some(meaning) = spans::Meaning::of_usual(&text[head.body..], head.sent) {
                return self.meaning(number, head.stamp, &meaning, sink);
            }
            if let Some(msg) = line::usual_body(text, head) {
                return self.message(number, &msg, sink);
            }
        }
        let mut scratch = std::mem::take(&mut self.scratch);
        match line::parse_line(text, &mut scratch) {
            line::Parsed::Message(msg) => self.message(number, &msg, sink),
            line::Parsed::Zombie(stamp) => self.zombie(number, stamp),
            line::Parsed::Other => self.stats.skipped += 1,
            line::Parsed::Malformed(reason) => self.malformed(number, reason),
        }
        self.scratch = scratch;
    }

    /// A protocol message of line `number`, in the order of the log (the clock and the
    /// objects follow it). A stamp the clock cannot place makes the line malformed.
    #[inline(always)]
    fn message(&mut self, number: u64, msg: &line::Message<'_>, sink: &mut impl SpanSink) {
        // The meaning before the clock: `SpanTracker::message`, which works it out after,
        // took more instructions for the same result.
        self.meaning(number, msg.stamp, &spans::Meaning::of(msg), sink);
    }

    /// A protocol message of line `number` stamped `stamp`, which means `meaning`.
    #[inline(always)]
    fn meaning(
        &mut self,
        number: u64,
        stamp: line::Stamp,
        meaning: &spans::Meaning,
        sink: &mut impl SpanSink,
    ) {
        let Some(ts) = self.clock.nanos(stamp) else {
            return self.malformed(number, line::Malformed::ClockTooFar);
        };
        self.stats.messages += 1;
        // (a message no rule reads that creates nothing moves only the clock: not the call)
        if meaning.matters() {
            self.tracker.message_meaning(meaning, ts, sink);
        }
    }

    /// An event for an object that no longer exists: only its stamp counts (for the clock).
    fn zombie(&mut self, number: u64, stamp: line::Stamp) {
        match self.clock.nanos(stamp) {
            Some(_) => self.stats.zombies += 1,
            None => self.malformed(number, line::Malformed::ClockTooFar),
        }
    }

    #[cold]
    fn malformed(&mut self, number: u64, reason: line::Malformed) {
        self.stats.malformed += 1;
        let location = Location {
            file: self.file.to_string(),
            line: number,
        };
        if self.stats.malformed_examples.len() < MALFORMED_EXAMPLES {
            let example = (location.clone(), reason.to_string());
            self.stats.malformed_examples.push(example);
        }
        if self.strict {
            self.error = Some(Error::Malformed {
                location,
                reason: reason.to_string(),
            });
        }
    }
}

impl InputStats {
    /// The counts shown in every report, in display order.
    pub fn fields(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("files", self.files),
            ("bytes", self.bytes),
            ("lines", self.lines),
            ("messages", self.messages),
            ("skipped", self.skipped),
            ("malformed", self.malformed),
            ("zombies", self.zombies),
            ("too_long", self.too_long),
            ("clock_wraps", self.clock_wraps),
            ("unknown_callbacks", self.stream.unknown_callbacks),
            ("reused_live_ids", self.stream.reused_live_ids),
        ]
    }

    /// What ids created again while alive say: a log of several connections, which stock
    /// libwayland does not tell apart. Said by the side that created them, since it means
    /// something else in each: requests received are a server's log of clients at once (their
    /// spans may pair across them); requests sent are a client's log of one process's
    /// connections, often one after another (`latscope lab wayland` opens one to list the
    /// globals, then one per pattern), which pair right since an id created again is read as
    /// a new object. A log of both sides (`WAYLAND_DEBUG=1` of a compositor that is also a
    /// client) gets both sentences.
    fn several_connections(&self) -> Vec<String> {
        let s = &self.stream;
        let by_server = s.reused_live_ids - s.reused_in_client_log;
        let mut out = Vec::new();
        if by_server > 0 {
            out.push(format!(
                "object ids were created again while still alive {by_server} times by requests received (a server's log): it holds at least {} clients, which stock libwayland cannot tell apart, so spans may pair across clients",
                s.first_id_reused.server + 1
            ));
        }
        if s.reused_in_client_log > 0 {
            out.push(format!(
                "object ids were created again while still alive {} times by requests sent (a client's log): it holds at least {} connections of one process, which stock libwayland does not tell apart; an id created again is read as a new object (the spans its old one left open are unmatched), so connections used one after another pair right, and spans of connections used at the same time may pair across them",
                s.reused_in_client_log,
                s.first_id_reused.client + 1
            ));
        }
        out
    }

    /// One sentence per thing about the input a user should know before trusting the numbers.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.interrupted {
            out.push("interrupted: these results cover only the input read so far".to_string());
        }
        if self.malformed > 0 {
            let examples: Vec<String> = self
                .malformed_examples
                .iter()
                .map(|(at, why)| format!("{at}: {why}"))
                .collect();
            out.push(format!(
                "{} malformed WAYLAND_DEBUG lines were counted, not read as messages (--strict makes the first fatal); first: {}",
                self.malformed,
                examples.join("; ")
            ));
        }
        if self.too_long > 0 {
            out.push(format!(
                "{} lines longer than 1 MiB were skipped",
                self.too_long
            ));
        }
        if self.unterminated > 0 {
            out.push(format!(
                "{} input(s) end without a newline (truncated, or still being written); the last line was read as it is",
                self.unterminated
            ));
        }
        out.extend(self.several_connections());
        if self.stream.unknown_callbacks > 0 {
            out.push(format!(
                "{} wl_callback.done events had no frame or sync request in the log (it started mid-stream?)",
                self.stream.unknown_callbacks
            ));
        }
        // (lines in the grammar's shape that break it are messages of a kind: said above)
        if self.files > 0 && self.messages == 0 && self.malformed == 0 {
            out.push("no WAYLAND_DEBUG messages found: was the program run with WAYLAND_DEBUG=1 (client) or WAYLAND_DEBUG=server, and its stderr captured?".to_string());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::span::Kept;

    fn stats_of(log: &'static str) -> InputStats {
        let source = crate::ingest::Source::Embedded("t.log", log.as_bytes());
        let opened = source.open(None).unwrap();
        let mut sink = Kept::new(10);
        analyze(
            opened,
            "t.log",
            0,
            &ReadOptions::default(),
            &mut sink,
            |_| {},
        )
        .unwrap()
    }

    #[test]
    fn ids_created_again_while_alive_are_said_by_the_side_that_created_them() {
        // two connections of one client, one after another: each begins with its id 2
        let client = stats_of(
            "\
[1000.000]  -> wl_display@1.get_registry(new id wl_registry@2)
[1000.010]  -> wl_display@1.sync(new id wl_callback@3)
[1000.020] wl_display@1.delete_id(3)
[1000.030] wl_callback@3.done(1)
[1001.000]  -> wl_display@1.get_registry(new id wl_registry@2)
[1001.010]  -> wl_display@1.sync(new id wl_callback@3)
",
        );
        assert_eq!(client.stream.reused_live_ids, 1);
        assert_eq!(client.stream.reused_in_client_log, 1);
        let said = client.warnings();
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].contains("1 times by requests sent (a client's log): it holds at least 2 connections of one process"), "{said:?}");
        // three clients of one server: their requests received
        let server = stats_of(
            "\
[1000.000] wl_display@1.get_registry(new id wl_registry@2)
[1000.100] wl_display@1.get_registry(new id wl_registry@2)
[1000.200] wl_compositor@3.create_surface(new id wl_surface@4)
[1000.300] wl_display@1.get_registry(new id wl_registry@2)
[1000.400] wl_compositor@3.create_surface(new id wl_surface@4)
",
        );
        assert_eq!(server.stream.reused_live_ids, 3);
        assert_eq!(server.stream.reused_in_client_log, 0);
        let said = server.warnings();
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(
            said[0].contains(
                "3 times by requests received (a server's log): it holds at least 3 clients"
            ),
            "{said:?}"
        );
        let mut both = client.clone();
        both.merge(&server);
        assert_eq!(both.warnings().len(), 2, "{:?}", both.warnings());
    }
}
