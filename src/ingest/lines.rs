//! A line reader that streams any `Read` in large chunks with constant memory.
//!
//! `BufRead::read_until` copies every line and grows without bound on a line with no newline;
//! here lines are slices of one fixed buffer found with `memchr`, and a line longer than the
//! buffer is reported as [`Line::TooLong`] and skipped, so a 10 MB line costs nothing but a
//! count. The reader also stops cleanly when a [`Cancel`] flag is raised (Ctrl-C), so whatever
//! was read so far can still be reported.

use std::io::{self, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use crate::ingest::mapped::{LineEnd, Mapped, shrunk_error};
use crate::ingest::words::{Positions, ascii_blanks};

/// Default size of the read buffer, and so the longest line delivered whole.
pub const DEFAULT_BUFFER: usize = 1 << 20;

/// A flag that asks readers to stop at the next chunk.
///
/// A read blocked on a pipe sees the flag only when a signal interrupts it, and a signal sent
/// to the process interrupts one thread: the main thread, where it is not blocked. The
/// parallel readers read on whichever thread parses the chunk ([`crate::ingest::chunks`]), so
/// the thread reading says so ([`Cancel::reading`]) and a signal handler passes its signal on
/// to it ([`Cancel::raise_from_signal`]): with `--threads 8` and a pipe held open, Ctrl-C
/// otherwise left a worker blocked in its read until the watchdog ended the process, and
/// what had been read was lost; and so did it, with any threads, where a decompressing thread
/// ([`crate::ingest::compressed`]) was the one blocked.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<Shared>);

#[derive(Debug, Default)]
struct Shared {
    raised: AtomicBool,
    /// the threads reading (their kernel ids; 0: a free slot): a parallel reader's and a
    /// decompressing thread's at once
    readers: [AtomicI32; READERS],
}

/// Threads that can say at once that they read ([`Cancel::reading`]; more are not told).
const READERS: usize = 4;

impl Cancel {
    /// A flag that is not raised.
    pub fn new() -> Self {
        Self::default()
    }

    /// Raises the flag.
    pub fn raise(&self) {
        self.0.raised.store(true, Ordering::SeqCst);
    }

    /// Raises the flag from the handler of `signal`, and sends `signal` on to the thread
    /// reading the input if that is another thread, so that its read returns `EINTR`. Only
    /// what is async-signal-safe: atomics and the `gettid`, `getpid` and `tgkill` system
    /// calls.
    pub fn raise_from_signal(&self, signal: libc::c_int) {
        self.raise();
        let here = this_thread();
        for slot in &self.0.readers {
            let reader = slot.load(Ordering::SeqCst);
            if reader != 0 && reader != here {
                // SAFETY: system calls with integer arguments; a thread that has ended since
                // makes tgkill fail with ESRCH, which is ignored.
                unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), reader, signal) };
            }
        }
    }

    /// Whether the flag is raised.
    pub fn is_raised(&self) -> bool {
        self.0.raised.load(Ordering::SeqCst)
    }

    /// Says that this thread reads the input until the guard is dropped (a signal is then
    /// passed on to it: [`Cancel::raise_from_signal`]). Check the flag after this and before
    /// each read.
    pub fn reading(&self) -> Reading<'_> {
        let here = this_thread();
        let slot = self.0.readers.iter().find(|slot| {
            slot.compare_exchange(0, here, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        });
        Reading(slot)
    }
}

/// This thread's kernel id.
fn this_thread() -> i32 {
    // SAFETY: gettid takes no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// A thread reading the input ([`Cancel::reading`]): its slot, freed when dropped (`None`:
/// every slot was taken).
#[derive(Debug)]
pub struct Reading<'a>(Option<&'a AtomicI32>);

impl Drop for Reading<'_> {
    fn drop(&mut self) {
        if let Some(slot) = self.0 {
            slot.store(0, Ordering::SeqCst);
        }
    }
}

/// One line handed to the caller.
#[derive(Debug, PartialEq, Eq)]
pub enum Line<'a> {
    /// A line without its `\n` (and without a `\r` before it).
    Text(&'a [u8]),
    /// A [`Line::Text`] already known to be UTF-8 ([`LineReader::utf8`]: checked a whole
    /// block of lines at a time, which costs far less than a check per short line).
    Str(&'a str),
    /// A [`Line::Str`] with no tab, `\r` or `\x0c` in it ([`LineReader::blanks`]: its block
    /// of lines was searched for them at once): its tokens are split by spaces alone.
    Plain(&'a str),
    /// A line longer than the buffer; its content is skipped, `len` bytes long.
    TooLong {
        /// length in bytes, without the newline
        len: u64,
    },
}

impl<'a> Line<'a> {
    /// A line of a UTF-8 block: [`Line::Plain`] when the block is `plain`.
    #[inline]
    pub(crate) fn of_text(text: &'a str, plain: bool) -> Line<'a> {
        match plain {
            true => Line::Plain(text),
            false => Line::Str(text),
        }
    }
}

/// What a whole read saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadSummary {
    /// lines delivered (including too-long ones and a last line with no newline)
    pub lines: u64,
    /// bytes read
    pub bytes: u64,
    /// whether the last line had no newline (a truncated file, or a writer still writing)
    pub unterminated_last_line: bool,
    /// whether the read stopped early because of a [`Cancel`]
    pub cancelled: bool,
}

/// Streams lines out of a reader. See the module docs.
pub struct LineReader<R> {
    inner: R,
    buf: Vec<u8>,
    cancel: Option<Cancel>,
    stop: Option<Cancel>,
    utf8: bool,
    blanks: bool,
    /// the input mapped: its lines read in place, then what follows the map read from the file
    mapped: Option<Mapped>,
}

impl<R: Read> LineReader<R> {
    /// A reader with the default 1 MiB buffer.
    pub fn new(inner: R) -> Self {
        Self::with_capacity(inner, DEFAULT_BUFFER)
    }

    /// A reader whose buffer (and longest whole line) is `capacity` bytes.
    pub fn with_capacity(inner: R, capacity: usize) -> Self {
        LineReader {
            inner,
            buf: vec![0; capacity.max(16)],
            cancel: None,
            stop: None,
            utf8: false,
            blanks: false,
            mapped: None,
        }
    }

    /// Reads the lines of `mapped` where they lie, then what the file holds past the map,
    /// instead of the reader (which is not read at all): the lines are those the reader would
    /// give of the same file.
    pub fn mapped(mut self, mapped: Option<Mapped>) -> Self {
        self.mapped = mapped;
        self
    }

    /// Checks the lines of each read as UTF-8 together: those of a block that is UTF-8 are
    /// given as [`Line::Str`] (or [`Line::Plain`]: [`LineReader::blanks`]), the others as
    /// [`Line::Text`].
    pub fn utf8(mut self) -> Self {
        self.utf8 = true;
        self
    }

    /// With [`LineReader::utf8`], also searches each block of lines for tabs, `\r` and `\x0c`
    /// together: the lines of a block with none are given as [`Line::Plain`] (a search per line
    /// for them was a measurable share of reading an ftrace line).
    pub fn blanks(mut self) -> Self {
        self.blanks = true;
        self
    }

    /// Stops reading when `cancel` is raised.
    pub fn cancel_on(mut self, cancel: Cancel) -> Self {
        self.cancel = Some(cancel);
        self
    }

    /// Stops reading, without calling it a cancel, when `stop` is raised: the caller is done
    /// with the input (`--strict`'s first malformed line), so the rest is not read at all.
    pub fn stop_when(mut self, stop: Cancel) -> Self {
        self.stop = Some(stop);
        self
    }

    fn cancelled(&self) -> bool {
        self.cancel.as_ref().is_some_and(Cancel::is_raised)
    }

    /// Reads everything, calling `on_line(line_number, line)` for each line (the first is line
    /// one) and `on_progress(total_bytes)` after each chunk. Stops early, without error, when
    /// the cancel flag is raised; an I/O error ends the read with that error.
    pub fn for_each_line(
        mut self,
        mut on_line: impl FnMut(u64, Line<'_>),
        mut on_progress: impl FnMut(u64),
    ) -> io::Result<ReadSummary> {
        let mut summary = ReadSummary::default();
        let Some(mapped) = self.mapped.take() else {
            return self.read_lines(None, (0, None), summary, on_line, on_progress);
        };
        let state = self.map_lines(&mapped, &mut summary, &mut on_line, &mut on_progress);
        let stopped = self.stop.as_ref().is_some_and(Cancel::is_raised);
        let read = match state {
            None => Err(shrunk_error()),
            Some(_) if summary.cancelled || stopped => Ok(summary),
            Some(state) => {
                let mut after = After {
                    mapped: &mapped,
                    at: summary.bytes,
                };
                self.read_lines(Some(&mut after), state, summary, on_line, on_progress)
            }
        };
        // however the read ended: whether the file shrank under it
        read.and_then(|summary| mapped.check().map(|()| summary))
    }

    /// The whole lines of `map`, in blocks of the buffer's size, as [`LineReader::read_lines`]
    /// gives them. Returns what [`LineReader::read_lines`] goes on from: the bytes of the
    /// unfinished last line, copied to the front of the buffer, and the length so far of a
    /// too-long line being skipped; `None` when a page past the file's end was read (it
    /// shrank: [`Mapped::shrunk`]), before any line of that block was given.
    fn map_lines(
        &mut self,
        mapped: &Mapped,
        summary: &mut ReadSummary,
        on_line: &mut impl FnMut(u64, Line<'_>),
        on_progress: &mut impl FnMut(u64),
    ) -> Option<(usize, Option<u64>)> {
        let (map, capacity) = (mapped.bytes(), self.buf.len());
        let mut at = 0;
        while at < map.len() {
            if self.cancelled() {
                summary.cancelled = true;
                return Some((0, None));
            }
            if self.stop.as_ref().is_some_and(Cancel::is_raised) {
                return Some((0, None));
            }
            let window = &map[at..map.len().min(at + capacity)];
            let Some(last) = memchr::memrchr(b'\n', window) else {
                if window.len() < capacity {
                    break; // the unfinished last line
                }
                // a line of the buffer's length or more, skipped as the reader skips it
                let cancel = self.cancel.clone();
                let cancelled = || cancel.as_ref().is_some_and(Cancel::is_raised);
                let nl = match mapped.line_end(at + capacity, cancelled) {
                    LineEnd::Newline(nl) => nl,
                    LineEnd::Stopped => {
                        summary.cancelled = true;
                        return Some((0, None));
                    }
                    // (cut short: the line is no line of the file, not one too long)
                    LineEnd::Shrunk => return None,
                    LineEnd::MapEnd => {
                        let skipped = (map.len() - at) as u64;
                        summary.bytes = map.len() as u64;
                        return Some((0, Some(skipped)));
                    }
                };
                summary.lines += 1;
                on_line(
                    summary.lines,
                    Line::TooLong {
                        len: (nl - at) as u64,
                    },
                );
                at = nl + 1;
                summary.bytes = at as u64;
                on_progress(summary.bytes);
                mapped.release(at);
                continue;
            };
            let (block, plain) = match self.utf8 {
                true => text_of(&window[..last], self.blanks),
                false => (None, false),
            };
            // (the block was read to its end: a page past the file's end is marked by now)
            if mapped.shrunk() {
                return None;
            }
            let mut start = 0;
            for nl in Positions::of(b'\n', &window[..=last]) {
                summary.lines += 1;
                let line = match block {
                    Some(text) => Line::of_text(trim_cr_str(&text[start..nl]), plain),
                    None => Line::Text(trim_cr(&window[start..nl])),
                };
                on_line(summary.lines, line);
                start = nl + 1;
            }
            at += last + 1;
            summary.bytes = at as u64;
            on_progress(summary.bytes);
            mapped.release(at);
        }
        let rest = &map[at..];
        self.buf[..rest.len()].copy_from_slice(rest);
        summary.bytes = map.len() as u64;
        Some((rest.len(), None))
    }

    /// The lines read from the reader, or from the file past its map (`after`), after `filled`
    /// bytes of an unfinished line at the front of the buffer and (`skipping`) the length so far
    /// of a too-long line being skipped.
    fn read_lines(
        mut self,
        mut after: Option<&mut After<'_>>,
        (mut filled, mut skipping): (usize, Option<u64>),
        mut summary: ReadSummary,
        mut on_line: impl FnMut(u64, Line<'_>),
        mut on_progress: impl FnMut(u64),
    ) -> io::Result<ReadSummary> {
        loop {
            if self.cancelled() {
                summary.cancelled = true;
                return Ok(summary);
            }
            if self.stop.as_ref().is_some_and(Cancel::is_raised) {
                return Ok(summary);
            }
            let read = match after.as_mut() {
                Some(after) => after.read(&mut self.buf[filled..]),
                None => self.inner.read(&mut self.buf[filled..]),
            };
            let n = match read {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if n == 0 {
                finish_last_line(&self.buf[..filled], skipping, &mut summary, &mut on_line);
                return Ok(summary);
            }
            summary.bytes += n as u64;
            let end = filled + n;
            let mut start = 0;
            let (block, plain) = match self.utf8 {
                true => match memchr::memrchr(b'\n', &self.buf[filled..end]) {
                    Some(last) => text_of(&self.buf[..filled + last], self.blanks),
                    None => (None, false),
                },
                false => (None, false),
            };
            for nl in Positions::of(b'\n', &self.buf[filled..end]) {
                let nl = filled + nl;
                summary.lines += 1;
                let line = match (skipping.take(), block) {
                    (Some(len), _) => Line::TooLong {
                        len: len + nl as u64,
                    },
                    (None, Some(text)) => Line::of_text(trim_cr_str(&text[start..nl]), plain),
                    (None, None) => Line::Text(trim_cr(&self.buf[start..nl])),
                };
                on_line(summary.lines, line);
                start = nl + 1;
            }
            filled = end - start;
            if start == 0 && end == self.buf.len() {
                // No newline in a full buffer: the line is too long. Drop what we have of it.
                skipping = Some(skipping.unwrap_or(0) + end as u64);
                filled = 0;
            } else {
                self.buf.copy_within(start..end, 0);
            }
            on_progress(summary.bytes);
        }
    }
}

/// What a file holds past its map, read from where the map ends.
struct After<'m> {
    mapped: &'m Mapped,
    at: u64,
}

impl Read for After<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.mapped.read_past(buf, &mut self.at)
    }
}

/// Whether `text` holds no tab, `\r` or `\x0c`: the white space other than spaces and newlines
/// that a line can hold and a token reader splits at.
pub(crate) fn no_other_blanks(text: &[u8]) -> bool {
    memchr::memchr3(b'\t', b'\r', b'\x0c', text).is_none()
}

/// A block of whole lines as text when it is UTF-8, and (`blanks`: asked) whether it holds
/// none of the blanks of [`no_other_blanks`]: an ASCII block (the usual) in one pass
/// ([`ascii_blanks`]), another decoded and searched.
#[inline]
pub(crate) fn text_of(block: &[u8], blanks: bool) -> (Option<&str>, bool) {
    let ascii = if blanks {
        ascii_blanks::<true>(block).map(|found| !found)
    } else {
        ascii_blanks::<false>(block)
    };
    match ascii {
        // SAFETY: every byte of `block` is below 0x80: ASCII, which is UTF-8.
        Some(plain) => (Some(unsafe { std::str::from_utf8_unchecked(block) }), plain),
        None => match std::str::from_utf8(block) {
            Ok(text) => (Some(text), blanks && no_other_blanks(block)),
            Err(_) => (None, false),
        },
    }
}

fn finish_last_line(
    rest: &[u8],
    skipping: Option<u64>,
    summary: &mut ReadSummary,
    on_line: &mut impl FnMut(u64, Line<'_>),
) {
    if rest.is_empty() && skipping.is_none() {
        return;
    }
    summary.lines += 1;
    summary.unterminated_last_line = true;
    match skipping {
        Some(len) => on_line(
            summary.lines,
            Line::TooLong {
                len: len + rest.len() as u64,
            },
        ),
        None => on_line(summary.lines, Line::Text(trim_cr(rest))),
    }
}

#[inline]
pub(crate) fn trim_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

#[inline]
pub(crate) fn trim_cr_str(line: &str) -> &str {
    line.strip_suffix('\r').unwrap_or(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reading_thread_takes_a_slot_until_it_is_done_and_extra_ones_are_not_told() {
        let cancel = Cancel::new();
        let taken = |c: &Cancel| {
            let ids = c.0.readers.iter().map(|s| s.load(Ordering::SeqCst));
            ids.filter(|&id| id != 0).collect::<Vec<_>>()
        };
        {
            let guards: Vec<Reading<'_>> = (0..READERS + 2).map(|_| cancel.reading()).collect();
            assert_eq!(taken(&cancel), vec![this_thread(); READERS]);
            assert_eq!(guards.iter().filter(|g| g.0.is_none()).count(), 2);
        }
        assert!(taken(&cancel).is_empty());
        // a signal handler with no other reader sends nothing (here: no signal at all)
        let _reading = cancel.reading();
        cancel.raise_from_signal(libc::SIGINT);
        assert!(cancel.is_raised());
    }

    #[test]
    fn lines_are_plain_only_from_a_reader_that_asks_and_a_block_with_no_other_blanks() {
        let kinds = |input: &[u8], blanks: bool| {
            let mut kinds = Vec::new();
            let mut reader = LineReader::new(input).utf8();
            if blanks {
                reader = reader.blanks();
            }
            reader
                .for_each_line(
                    |_, line| {
                        kinds.push(match line {
                            Line::Plain(_) => 'p',
                            Line::Str(_) => 's',
                            Line::Text(_) => 't',
                            Line::TooLong { .. } => 'l',
                        })
                    },
                    |_| {},
                )
                .unwrap();
            kinds.into_iter().collect::<String>()
        };
        assert_eq!(kinds(b"a b\nc d\n", true), "pp");
        assert_eq!(kinds(b"a b\nc d\n", false), "ss");
        for blank in [b'\t', b'\r', b'\x0c'] {
            let input = [&b"a b\nc"[..], &[blank], b"d\n"].concat();
            assert_eq!(kinds(&input, true), "ss", "{blank}");
        }
        // a CRLF file: the \r is cut from each line, but the block holds them
        assert_eq!(kinds(b"a b\r\nc d\r\n", true), "ss");
        assert_eq!(kinds(b"a\xff b\n", true), "t");
    }

    /// Collects lines as owned strings, with `TooLong` shown as `<too long: N>`.
    fn lines_of(input: &[u8], capacity: usize) -> (Vec<String>, ReadSummary) {
        let mut out = Vec::new();
        let summary = LineReader::with_capacity(input, capacity)
            .for_each_line(
                |n, line| {
                    out.push(match line {
                        Line::Text(t) => format!("{n}:{}", String::from_utf8_lossy(t)),
                        Line::Str(t) | Line::Plain(t) => format!("{n}:{t}"),
                        Line::TooLong { len } => format!("{n}:<too long: {len}>"),
                    })
                },
                |_| {},
            )
            .unwrap();
        (out, summary)
    }

    /// Every line and the summary of `reader`: each line's bytes, or its length when too long.
    /// Whether a line is given as text, as UTF-8 text or as plain text depends on the block it
    /// was read in (where the block begins: after a line too long, a block read holds its end)
    /// and says nothing of the line but that it is UTF-8 (checked), and plain (checked).
    fn said<R: Read>(reader: LineReader<R>) -> (Vec<String>, io::Result<ReadSummary>) {
        let mut out = Vec::new();
        let summary = reader.for_each_line(
            |n, line| {
                let bytes = match line {
                    Line::Plain(text) => {
                        assert!(no_other_blanks(text.as_bytes()), "{text:?}");
                        text.as_bytes()
                    }
                    Line::Str(text) => text.as_bytes(),
                    Line::Text(bytes) => bytes,
                    Line::TooLong { len } => return out.push(format!("{n} too long: {len}")),
                };
                out.push(format!("{n} {bytes:?}"))
            },
            |_| {},
        );
        (out, summary)
    }

    /// A file holding `bytes` (in a directory removed when the guard is dropped).
    fn file_of(bytes: &[u8]) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lines");
        std::fs::write(&path, bytes).unwrap();
        (dir, path)
    }

    /// Lines of every kind: short, empty, CRLF, with tabs, not UTF-8, as long as `capacity`
    /// and longer, and a last line with or without its newline.
    fn inputs(capacity: usize) -> Vec<Vec<u8>> {
        let pieces: [&[u8]; 8] = [
            b"a b c\n",
            b"\n",
            b"crlf\r\n",
            b"tab\there\n",
            b"\xff\xfe\n",
            b"\xc3\xa9t\xc3\xa9\n",
            b"x",
            b"12345",
        ];
        let mut inputs = Vec::new();
        for seed in 0..200u64 {
            let mut input = Vec::new();
            let mut state = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            for _ in 0..(seed % 40) {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let pick = (state >> 33) as usize;
                match pick % 11 {
                    0..8 => input.extend_from_slice(pieces[pick % 8]),
                    // a line as long as the buffer, one shorter, one longer, several times longer
                    8 => input.extend(std::iter::repeat_n(b'L', capacity - 1 + pick % 3)),
                    9 => input.extend(std::iter::repeat_n(b'M', capacity * (2 + pick % 3))),
                    _ => input.push(b'\n'),
                }
            }
            inputs.push(input);
        }
        inputs
    }

    #[test]
    fn a_mapped_file_gives_the_lines_its_reader_gives() {
        for capacity in [16, 64, 1000] {
            for input in inputs(capacity) {
                let (_dir, path) = file_of(&input);
                let file = std::fs::File::open(&path).unwrap();
                let Some(mapped) = crate::ingest::mapped::small_map(&file) else {
                    assert!(input.is_empty());
                    continue;
                };
                for (utf8, blanks) in [(false, false), (true, false), (true, true)] {
                    let make = || {
                        let mut r = LineReader::with_capacity(
                            std::fs::File::open(&path).unwrap(),
                            capacity,
                        );
                        if utf8 {
                            r = r.utf8();
                        }
                        if blanks {
                            r = r.blanks();
                        }
                        r
                    };
                    let file = std::fs::File::open(&path).unwrap();
                    let (read, read_summary) = said(make());
                    let (mapped_lines, mapped_summary) =
                        said(make().mapped(crate::ingest::mapped::small_map(&file)));
                    let context = format!("capacity {capacity}, {utf8} {blanks}: {input:?}");
                    assert_eq!(mapped_lines, read, "{context}");
                    assert_eq!(mapped_summary.unwrap(), read_summary.unwrap(), "{context}");
                }
                drop(mapped);
            }
        }
    }

    #[test]
    fn what_is_written_after_the_map_is_read_after_it_as_one_file() {
        for (before, after) in [
            (&b"one\ntw"[..], &b"o\nthree\n"[..]),
            (b"one\n", b"two"),
            (b"LLLLLLLLLLLLLLLLLLLLLLLL", b"LLLL\nnext\n"),
            (b"a\nLLLLLLLLLLLLLLLLLLLL", b"LL\n"),
            (b"a\n", b""),
        ] {
            let (_dir, path) = file_of(before);
            let file = std::fs::File::open(&path).unwrap();
            let mapped = crate::ingest::mapped::small_map(&file);
            crate::ingest::mapped::append_to(&path, after);
            let whole = [before, after].concat();
            let expected = said(LineReader::with_capacity(&whole[..], 16).utf8());
            let got = said(
                LineReader::with_capacity(io::empty(), 16)
                    .utf8()
                    .mapped(mapped),
            );
            assert_eq!(got.0, expected.0, "{before:?} + {after:?}");
            assert_eq!(got.1.unwrap(), expected.1.unwrap());
        }
    }

    #[test]
    fn a_file_truncated_while_its_lines_are_read_in_place_is_an_error() {
        let line = b"a line of the file\n";
        let bytes: Vec<u8> = line.iter().copied().cycle().take(1 << 22).collect();
        let (_dir, path) = file_of(&bytes);
        let file = std::fs::File::open(&path).unwrap();
        let mapped = crate::ingest::mapped::small_map(&file);
        let mut first = true;
        let result = LineReader::new(io::empty()).mapped(mapped).for_each_line(
            |_, _| {
                if std::mem::take(&mut first) {
                    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
                    f.set_len(4096).unwrap();
                }
            },
            |_| {},
        );
        let error = result.unwrap_err().to_string();
        assert!(error.contains("shrank while it was read"), "{error}");
    }

    #[test]
    fn a_file_cut_inside_its_last_page_while_mapped_is_an_error_too() {
        // no page past the new end is read (no SIGBUS): the size says it
        let bytes: Vec<u8> = b"a line\n"
            .iter()
            .copied()
            .cycle()
            .take((2 << 20) + 100)
            .collect();
        let (_dir, path) = file_of(&bytes);
        let file = std::fs::File::open(&path).unwrap();
        let mapped = crate::ingest::mapped::small_map(&file);
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(bytes.len() as u64 - 60).unwrap();
        let error = LineReader::new(io::empty())
            .mapped(mapped)
            .for_each_line(|_, _| {}, |_| {});
        let error = error.unwrap_err().to_string();
        assert!(error.contains("the file shrank"), "{error}");
    }

    #[test]
    fn lines_are_split_across_chunk_boundaries() {
        let (lines, summary) = lines_of(b"alpha\nbeta\r\ngamma\n", 16);
        assert_eq!(lines, ["1:alpha", "2:beta", "3:gamma"]);
        assert_eq!(summary.bytes, 18);
        assert!(!summary.unterminated_last_line);
    }

    #[test]
    fn a_last_line_without_newline_is_delivered_and_flagged() {
        let (lines, summary) = lines_of(b"one\ntw", 16);
        assert_eq!(lines, ["1:one", "2:tw"]);
        assert!(summary.unterminated_last_line);
    }

    #[test]
    fn a_line_longer_than_the_buffer_is_skipped_with_its_length() {
        let mut input = b"short\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', 100));
        input.extend(b"\nafter\n");
        let (lines, _) = lines_of(&input, 16);
        assert_eq!(lines, ["1:short", "2:<too long: 100>", "3:after"]);
    }

    #[test]
    fn an_empty_input_has_no_lines() {
        let (lines, summary) = lines_of(b"", 16);
        assert!(lines.is_empty());
        assert_eq!(summary, ReadSummary::default());
    }

    #[test]
    fn a_raised_cancel_flag_stops_the_read() {
        let cancel = Cancel::new();
        cancel.raise();
        let summary = LineReader::new(&b"a\nb\n"[..])
            .cancel_on(cancel)
            .for_each_line(|_, _| panic!("no line expected"), |_| {})
            .unwrap();
        assert!(summary.cancelled);
    }
}
