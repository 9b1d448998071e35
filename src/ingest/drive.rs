//! One driver for every line format: it reads an input's lines on the calling thread, or its
//! chunks on several threads, and stops where the format says it is done.
//!
//! The formats (WAYLAND_DEBUG, perf script, ftrace, babeltrace2, JSON lines, CSV) differ in what
//! a line means and in how their workers pair events within a chunk; they do not differ in how
//! an input is read: the serial reader ([`LineReader`], in place when the input is mapped), the
//! parallel one ([`Chunks`]), Ctrl-C ([`Cancel`]), and `--strict`, whose first malformed line
//! is the last one read. A format plugs into [`drive`] through [`LineFormat`]; what it builds
//! of the lines (its statistics, its errors) stays its own.

use std::io::Read;

use crate::ingest::Cancel;
use crate::ingest::LineReader;
use crate::ingest::lines::{Line, ReadResult};
use crate::ingest::reader::Reader as Chunks;
use crate::ingest::source::Stream;

/// How an input's lines are read.
#[derive(Debug, Clone, Copy, Default)]
pub struct Drive<'c> {
    /// threads reading, in all (0 and 1: the calling thread alone)
    pub threads: usize,
    /// bytes per chunk of the parallel reader (0: [`crate::ingest::reader::CHUNK`])
    pub chunk_bytes: usize,
    /// stop at the next chunk when raised (Ctrl-C)
    pub cancel: Option<&'c Cancel>,
    /// serial reading: blocks of lines checked as UTF-8 together ([`LineReader::utf8`])
    pub utf8: bool,
    /// serial reading: blocks searched for other blanks than spaces ([`LineReader::blanks`])
    pub blanks: bool,
}

/// A line format as the driver reads it. `S` is where its results go (a span sink).
pub trait LineFormat<S: ?Sized> {
    /// Line `number` (the first is 1), in the input's order, on the calling thread.
    fn line(&mut self, number: u64, line: Line<'_>, sink: &mut S);

    /// Whether the format is done with the input (`--strict`'s first malformed line): the input
    /// is read no further than the block of lines in hand, whose lines after it the format is
    /// still given and ignores.
    fn done(&self) -> bool;

    /// Whether the input's lines can be read on several threads ([`LineFormat::read_chunks`]).
    fn parallel(&self) -> bool {
        false
    }

    /// The input's chunks, read on `threads` threads in all; the results those of
    /// [`LineFormat::line`] for every line in order. Called only where
    /// [`LineFormat::parallel`] says so: a format that reads on one thread implements neither.
    fn read_chunks<R: Read + Send>(
        &mut self,
        chunks: Chunks<'_, R>,
        threads: usize,
        sink: &mut S,
        progress: &mut dyn FnMut(u64),
    ) -> ReadResult {
        let _ = (chunks, threads, sink, progress);
        unreachable!("read_chunks of a format that reads on one thread (parallel() is false)")
    }
}

/// Reads `input` into `format` and `sink` as `how` says, calling `progress` with the bytes
/// read so far after each chunk. Returns what the read saw, or the I/O error that ended it
/// (what was read before it is in `format` and `sink`).
pub fn drive<R, S, F>(
    input: Stream<R>,
    how: &Drive<'_>,
    format: &mut F,
    sink: &mut S,
    mut progress: impl FnMut(u64),
) -> ReadResult
where
    R: Read + Send,
    S: ?Sized,
    F: LineFormat<S>,
{
    if how.threads > 1 && format.parallel() {
        let chunks = Chunks::new(input.reader, how.chunk_bytes, how.cancel).mapped(input.mapped);
        return format.read_chunks(chunks, how.threads, sink, &mut progress);
    }
    let mut lines = LineReader::new(input.reader).mapped(input.mapped);
    if how.utf8 {
        lines = lines.utf8();
    }
    if how.blanks {
        lines = lines.blanks();
    }
    if let Some(cancel) = how.cancel {
        lines = lines.cancel_on(cancel.clone());
    }
    let done = Cancel::new();
    lines = lines.stop_when(done.clone());
    let line = |number, line: Line<'_>| {
        format.line(number, line, sink);
        if format.done() {
            done.raise();
        }
    };
    lines.for_each_line(line, progress)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// Lines as text, up to and including the one named `stop`; chunks as the serial lines.
    #[derive(Default)]
    struct Said {
        lines: Vec<(u64, String)>,
        stop: Option<&'static str>,
        stopped: bool,
    }

    impl LineFormat<Vec<u64>> for Said {
        fn line(&mut self, number: u64, line: Line<'_>, sink: &mut Vec<u64>) {
            let text = match line {
                Line::Text(t) => String::from_utf8_lossy(t).into_owned(),
                Line::Str(t) | Line::Plain(t) => t.to_string(),
                Line::TooLong { len } => format!("<{len} bytes>"),
            };
            self.stopped |= Some(text.as_str()) == self.stop;
            self.lines.push((number, text));
            sink.push(number);
        }

        fn done(&self) -> bool {
            self.stopped
        }

        fn parallel(&self) -> bool {
            true
        }

        fn read_chunks<R: Read + Send>(
            &mut self,
            mut chunks: Chunks<'_, R>,
            _threads: usize,
            sink: &mut Vec<u64>,
            progress: &mut dyn FnMut(u64),
        ) -> ReadResult {
            // one thread is enough to check that the driver hands the chunks over
            let mut lines = 0;
            let ended = loop {
                let job = match chunks.next(Vec::new()) {
                    Ok(Some(job)) => job,
                    Ok(None) => break Ok(()),
                    Err(e) => break Err(e),
                };
                for line in job.data().split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
                    lines += 1;
                    self.line(lines, Line::Text(line), sink);
                }
                progress(chunks.bytes);
            };
            chunks.finish(lines, ended)
        }
    }

    fn read(text: &'static [u8], how: Drive<'_>, stop: Option<&'static str>) -> (Said, Vec<u64>) {
        let mut said = Said {
            stop,
            ..Said::default()
        };
        let mut sink = Vec::new();
        let summary = drive(Stream::of(text), &how, &mut said, &mut sink, |_| {}).unwrap();
        assert_eq!(summary.lines, said.lines.len() as u64);
        (said, sink)
    }

    #[test]
    fn every_line_reaches_the_format_in_order_with_its_number() {
        let (said, sink) = read(b"a\nb\n\nc", Drive::default(), None);
        let want: Vec<(u64, String)> = [(1, "a"), (2, "b"), (3, ""), (4, "c")]
            .into_iter()
            .map(|(n, t)| (n, t.to_string()))
            .collect();
        assert_eq!(said.lines, want);
        assert_eq!(sink, [1, 2, 3, 4]);
    }

    /// One line a read, and how many reads were made.
    struct OneLineARead<'a>(std::slice::Split<'a, u8, fn(&u8) -> bool>, &'a AtomicU32);

    impl Read for OneLineARead<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.1.fetch_add(1, Ordering::Relaxed);
            let Some(line) = self.0.next() else {
                return Ok(0);
            };
            buf[..line.len()].copy_from_slice(line);
            buf[line.len()] = b'\n';
            Ok(line.len() + 1)
        }
    }

    #[test]
    fn a_format_that_is_done_stops_the_read_after_the_lines_in_hand() {
        let reads = AtomicU32::new(0);
        let newline: fn(&u8) -> bool = |&b| b == b'\n';
        let input = OneLineARead(b"a\nstop\nb\nc".split(newline), &reads);
        let mut said = Said {
            stop: Some("stop"),
            ..Said::default()
        };
        drive(
            Stream::of(input),
            &Drive::default(),
            &mut said,
            &mut Vec::new(),
            |_| {},
        )
        .unwrap();
        assert_eq!(said.lines.last().unwrap(), &(2, "stop".to_string()));
        assert_eq!(reads.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn a_raised_cancel_reads_nothing() {
        let cancel = Cancel::new();
        cancel.raise();
        let how = Drive {
            cancel: Some(&cancel),
            ..Drive::default()
        };
        let (said, _) = read(b"a\nb\n", how, None);
        assert!(said.lines.is_empty());
    }

    #[test]
    fn utf8_lines_come_as_text_and_other_bytes_as_bytes() {
        let how = Drive {
            utf8: true,
            blanks: true,
            ..Drive::default()
        };
        let mut kinds = Vec::new();
        struct Kinds<'k>(&'k mut Vec<&'static str>);
        impl LineFormat<()> for Kinds<'_> {
            fn line(&mut self, _: u64, line: Line<'_>, _: &mut ()) {
                self.0.push(match line {
                    Line::Text(_) => "text",
                    Line::Str(_) => "str",
                    Line::Plain(_) => "plain",
                    Line::TooLong { .. } => "long",
                });
            }
            fn done(&self) -> bool {
                false
            }
        }
        for input in [&b"a b\n"[..], b"a\tb\n", b"\xff\n"] {
            let mut format = Kinds(&mut kinds);
            drive(Stream::of(input), &how, &mut format, &mut (), |_| {}).unwrap();
        }
        assert_eq!(kinds, ["plain", "str", "text"]);
    }

    #[test]
    fn several_threads_hand_the_chunks_to_the_format_in_order() {
        let how = Drive {
            threads: 2,
            chunk_bytes: 4,
            ..Drive::default()
        };
        let (said, sink) = read(b"one\ntwo\nthree\n", how, None);
        let texts: Vec<&str> = said.lines.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(texts, ["one", "two", "three"]);
        assert_eq!(sink, [1, 2, 3]);
    }
}
