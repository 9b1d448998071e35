//! Reading one trace: detect its format from the first 64 KiB (unless told), then stream it
//! line by line (or, for Chrome JSON, element by element) into the [`Pairer`].

use std::io::{self, Read};

use super::Format;
use super::chrome::Chrome;
use super::detect::detect_layout;
use super::lines::{LineState, Lines, splits_on_spaces};
use super::rules::Pairer;
pub use super::stats::{Failed, TraceError, TraceOptions, TraceStats};
use crate::ingest::Cancel;
use crate::ingest::drive::{Drive, LineFormat, drive};
use crate::ingest::source::Stream;
use crate::span::SpanSink;

const HEAD: usize = 64 << 10;

/// Reads the trace `input` (named `file` in messages) into `pairer` and `sink`: its format told
/// from its first bytes (read from `input.reader`), then its lines read in place when it is
/// mapped ([`crate::ingest::drive`]); the Chrome JSON readers read `input.reader`.
pub fn read(
    input: Stream<impl Read + Send>,
    file: &str,
    options: &TraceOptions,
    pairer: &mut Pairer,
    sink: &mut impl SpanSink,
    mut progress: impl FnMut(u64),
) -> Result<TraceStats, Failed> {
    let Stream {
        mut reader, mapped, ..
    } = input;
    let io_error = |source| TraceError::Read {
        file: file.to_string(),
        source,
    };
    // A read error in the first bytes comes after them, as it would later in the input: the
    // lines before it are read and counted.
    let (head, head_error) = read_head(&mut reader, options.cancel.as_ref());
    let head = match head_error {
        Some(e) if head.is_empty() => return Err(io_error(e).into()),
        _ => head,
    };
    let detected_layout = detect_layout(&head).map_err(|why| TraceError::Refused {
        file: file.to_string(),
        why,
    });
    let (format, layout, detected) = match options.format {
        Some(f) => match detected_layout {
            Ok(Some((d, layout))) if d == f => (f, layout, false),
            _ => (f, f.layout(), false),
        },
        // An empty input is said as such, not as a format not recognised (a capture whose
        // program printed nothing, a redirect that went elsewhere).
        None if head.is_empty() && !options.cancel.as_ref().is_some_and(Cancel::is_raised) => {
            return Err(TraceError::Empty {
                file: file.to_string(),
            }
            .into());
        }
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
    let failed = head_error.is_some();
    let rest = ErrorFirst {
        error: head_error,
        reader: reader.take(if interrupted || failed { 0 } else { u64::MAX }),
    };
    let input = io::Cursor::new(head).chain(rest);
    if format == Format::Chrome {
        drop(mapped); // (read with `read`: its slot is free for another file)
        let read = read_chrome(input, options, pairer, sink, &mut stats, progress);
        stats.interrupted |= interrupted;
        return match read {
            Ok(()) => Ok(stats),
            Err(e) => Err(Failed::after(stats, io_error(e))),
        };
    }
    let mut state = Lines {
        file,
        strict: options.strict,
        stats,
        failure: None,
        state: LineState::new(format, &options.columns, pairer.fields_read()),
    };
    let how = Drive {
        threads: options.threads,
        chunk_bytes: options.chunk_bytes,
        // (a Ctrl-C during the first read: nothing more is read, from the map either)
        cancel: options.cancel.as_ref().filter(|_| !interrupted),
        utf8: true,
        blanks: splits_on_spaces(format),
    };
    let input = Stream {
        mapped: mapped.filter(|_| !interrupted && !failed),
        ..Stream::of(input)
    };
    let mut reading = Reading {
        lines: &mut state,
        pairer,
    };
    let (summary, read_error) = match drive(input, &how, &mut reading, sink, &mut progress) {
        Ok(summary) => (summary, None),
        Err(e) => (e.read, Some(e.error)),
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
        return Err(Failed::after(stats, io_error(e)));
    }
    let syscalls = &mut state.state.syscalls;
    syscalls.finish(sink);
    (stats.in_progress, stats.detached) = (syscalls.in_progress, syscalls.detached);
    match mostly_malformed(&stats, layout) {
        Ok(()) => Ok(stats),
        Err(e) => Err(Failed::after(stats, e)),
    }
}

/// A trace's lines as the driver reads them: into the statistics and the pairer.
struct Reading<'a, 'r> {
    lines: &'a mut Lines<'r>,
    pairer: &'a mut Pairer,
}

impl<S: SpanSink> LineFormat<S> for Reading<'_, '_> {
    #[inline]
    fn line(&mut self, number: u64, line: crate::ingest::lines::Line<'_>, sink: &mut S) {
        self.lines.line(number, line, self.pairer, sink);
    }

    fn done(&self) -> bool {
        self.lines.failure.is_some()
    }

    fn parallel(&self) -> bool {
        super::parallel::reads(self.lines.state.format)
    }

    fn read_chunks<R: Read + Send>(
        &mut self,
        chunks: crate::ingest::reader::Reader<'_, R>,
        threads: usize,
        sink: &mut S,
        progress: &mut dyn FnMut(u64),
    ) -> crate::ingest::lines::ReadResult {
        super::parallel::read(chunks, threads, self.lines, self.pairer, sink, progress)
    }
}

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
/// A read error ends the head: it is returned beside the bytes read before it.
fn read_head(reader: &mut impl Read, cancel: Option<&Cancel>) -> (Vec<u8>, Option<io::Error>) {
    let mut head = vec![0u8; HEAD];
    let mut filled = 0;
    let mut error = None;
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
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    head.truncate(filled);
    (head, error)
}

/// `reader`, after `error` if there is one (the error that ended the head).
struct ErrorFirst<R> {
    error: Option<io::Error>,
    reader: R,
}

impl<R: Read> Read for ErrorFirst<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.error.take() {
            Some(e) => Err(e),
            None => self.reader.read(buf),
        }
    }
}

/// Reads Chrome JSON into `stats`, on one thread or several; what was read before a read error
/// is counted and paired (its events, its spans), then the error is returned.
fn read_chrome(
    input: impl Read + Send,
    options: &TraceOptions,
    pairer: &mut Pairer,
    sink: &mut impl SpanSink,
    stats: &mut TraceStats,
    progress: impl FnMut(u64),
) -> io::Result<()> {
    let mut chrome = Chrome::default();
    let read = if options.threads > 1 {
        let (ended, read) =
            super::parallel_chrome::read(input, options, &mut chrome, pairer, sink, progress);
        stats.bytes += ended.bytes;
        stats.interrupted |= ended.interrupted;
        read
    } else {
        read_chrome_serial(input, options, &mut chrome, (pairer, sink), stats, progress)
    };
    finish_chrome(chrome, sink, stats);
    read
}

fn read_chrome_serial(
    mut input: impl Read,
    options: &TraceOptions,
    chrome: &mut Chrome,
    (pairer, sink): (&mut Pairer, &mut impl SpanSink),
    stats: &mut TraceStats,
    mut progress: impl FnMut(u64),
) -> io::Result<()> {
    let mut buf = vec![0u8; 1 << 20];
    let cancelled = || options.cancel.as_ref().is_some_and(Cancel::is_raised);
    loop {
        let n = match input.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted && !cancelled() => continue,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                stats.interrupted = true;
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        stats.bytes += n as u64;
        chrome.feed(&buf[..n], pairer, sink);
        progress(stats.bytes);
        if cancelled() {
            stats.interrupted = true;
            return Ok(());
        }
    }
}

fn finish_chrome(mut chrome: Chrome, sink: &mut impl SpanSink, stats: &mut TraceStats) {
    chrome.finish(sink);
    stats.chrome = chrome.stats;
    stats.events = chrome.stats.elements;
    stats.malformed = chrome.stats.malformed;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::trace::rules::{Key, Repeat, Rule, parse_span};
    use crate::span::Aggregator;

    /// `data`, then an error.
    struct Failing(&'static [u8]);

    impl Read for Failing {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.0.is_empty() {
                return Err(io::Error::other("disk on fire"));
            }
            let n = buf.len().min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn a_read_error_keeps_the_spans_and_says_the_lines_and_events_before_it() {
        let text: &'static [u8] = b"{\"ts\": 1000, \"name\": \"begin\", \"id\": 1}\n\
            {\"ts\": 1500, \"name\": \"done\", \"id\": 1}\n\
            {\"ts\": 2000, \"name\": \"begin\", \"id\": 2}\n\
            {\"ts\": 2700, \"name\": \"done\", \"id\": 2}\n\
            {\"ts\": 3000, \"name\": \"be";
        let (name, start, end) = parse_span("req=begin..done").unwrap();
        let rule = Rule {
            span: 0,
            start,
            end,
            key: Key::parse("id").unwrap(),
        };
        let mut pairer = Pairer::new(vec![rule], vec![name], None, Repeat::KeepLast);
        let mut sink = Aggregator::new(Vec::new(), None);
        let options = TraceOptions::default();
        let failed = read(
            Stream::of(Failing(text)),
            "f",
            &options,
            &mut pairer,
            &mut sink,
            |_| {},
        )
        .unwrap_err();
        assert!(
            failed.error.to_string().contains("disk on fire"),
            "{}",
            failed.error
        );
        let read = failed.read.expect("what was read before the error");
        assert_eq!((read.lines, read.events), (4, 4));
        assert_eq!(read.bytes, text.len() as u64);
        let samples: u64 = sink
            .sorted()
            .iter()
            .map(|(_, s)| s.distribution.count())
            .sum();
        assert_eq!(samples, 2);
    }
}
