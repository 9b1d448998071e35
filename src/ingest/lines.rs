//! What every reader of lines shares: a line as it is handed on ([`Line`]), what a read saw
//! ([`ReadSummary`]), the flag that stops a read ([`Cancel`]), and the block checks that make
//! a line text once per block instead of once per line. The reader itself is
//! [`crate::ingest::reader`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use crate::ingest::words::ascii_blanks;

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
    /// A [`Line::Text`] already known to be UTF-8 ([`LineReader::utf8`](crate::ingest::LineReader::utf8): checked a whole
    /// block of lines at a time, which costs far less than a check per short line).
    Str(&'a str),
    /// A [`Line::Str`] with no tab, `\r` or `\x0c` in it ([`LineReader::blanks`](crate::ingest::LineReader::blanks): its block
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

/// A read ended by an I/O error (a disk error, a mapped file that shrank), with what was read
/// before it: the lines before the error were given, and the output says how many beside the
/// spans they made, not `0 lines`.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct ReadError {
    /// what was read before the error
    pub read: ReadSummary,
    /// the error
    pub error: std::io::Error,
}

/// What a read saw, or the error that ended it after what it saw.
pub type ReadResult = Result<ReadSummary, ReadError>;

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
}
