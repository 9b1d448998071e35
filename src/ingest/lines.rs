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
    /// block of lines at a time, which costs a tenth of a check per short line).
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
        }
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
    /// for them was a tenth of the instructions of reading an ftrace line).
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
        let mut filled = 0; // bytes of an incomplete line kept at the front of buf
        let mut skipping: Option<u64> = None; // length so far of a too-long line being skipped
        loop {
            if self.cancelled() {
                summary.cancelled = true;
                return Ok(summary);
            }
            if self.stop.as_ref().is_some_and(Cancel::is_raised) {
                return Ok(summary);
            }
            let n = match self.inner.read(&mut self.buf[filled..]) {
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
