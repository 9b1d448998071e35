//! A plain file read through a memory map: its lines are read where the page cache holds them,
//! not copied into a buffer first.
//!
//! Read with `read`, a large log spends a good part of its time in the kernel, most of it
//! copying the page cache into the reader's buffer; mapped, that copy is gone, and the faults
//! that map the pages cost less than it did. Formats whose blocks are checked as UTF-8 first
//! gain less, as that pass now reads the page cache where it read the copy. `grep -c`, the
//! floor these readers are measured against, copies the file with `read`.
//!
//! A map is only made of a regular file of at least [`SMALLEST`] bytes, as it is when opened;
//! what is written to it later is read after the map, with `pread` ([`Mapped::read_at`]), so a
//! log still being written reads as it does through `read`. A file truncated while mapped
//! would kill the process with `SIGBUS` at the first page read past its new end: a handler
//! (installed with the first map) puts a page of zeros there instead and notes it, and the
//! reader then reports that the file shrank ([`Mapped::shrunk`]) as a read error, with what
//! was read before kept, as with any read error; a file found shorter than its map when the
//! read ends is the same error ([`Mapped::check`]). The handler leaves any other `SIGBUS` (a
//! fault outside the maps, `kill -BUS`, a memory error) to the default action.
//!
//! A file rewritten in place while it is read (not appended to, not truncated) is another
//! matter: through `read`, the reader sees bytes of before or after each write; through a map,
//! a line checked as UTF-8 could change under the reader, which Rust's `str` does not allow
//! (as for every program that reads a map: ripgrep documents the same of its `--mmap`). Logs
//! and traces are appended to, not rewritten; such a file can be read from standard input
//! (`latscope spans < FILE`), which is read with `read`.
//!
//! Mapping is done with `memmap2`; the handler is written here with `libc`, as no crate keeps a
//! map readable once its file shrinks.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Once;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The smallest file mapped: below it, the one `read` of the reader's buffer is as cheap.
pub const SMALLEST: u64 = 1 << 20;

/// Maps that can be open at once (a slot each, for the `SIGBUS` handler); past them, files are
/// read with `read`.
const SLOTS: usize = 16;

/// Where each open map begins and ends (0, 0: a free slot), and whether a page past its file's
/// end was read.
static STARTS: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static ENDS: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static SHRUNK: [AtomicBool; SLOTS] = [const { AtomicBool::new(false) }; SLOTS];
static TAKEN: [AtomicBool; SLOTS] = [const { AtomicBool::new(false) }; SLOTS];
static PAGE: AtomicUsize = AtomicUsize::new(4096);
static HANDLER: Once = Once::new();

/// A file's bytes, mapped as they were when it was opened.
pub struct Mapped {
    map: memmap2::Mmap,
    file: File,
    slot: usize,
    /// the bytes before this were read and their pages given back ([`Mapped::release`])
    released: AtomicUsize,
}

/// Bytes read before their pages are given back at once ([`Mapped::release`]).
const RELEASED_AT_ONCE: usize = 4 << 20;

impl std::fmt::Debug for Mapped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mapped")
            .field("len", &self.map.len())
            .finish()
    }
}

impl Mapped {
    /// `file` mapped, when it is a regular file of at least [`SMALLEST`] bytes and a map can be
    /// made (`None` otherwise: read it with `read`).
    ///
    /// # Safety
    ///
    /// The map's bytes are the file's as they are now, not as they were when checked: the
    /// caller asserts that no other program rewrites the file in place, or truncates it, while
    /// the map lives. The readers check blocks of lines as UTF-8 once and then hand them out
    /// as `&str`; a byte changed after that check (a rewrite, or a truncation, whose pages past
    /// the new end the `SIGBUS` handler turns into zeros) can leave a `&str` that is not UTF-8
    /// (a character split by the zeros). A truncation is still caught and reported as a read
    /// error ([`Mapped::shrunk`], [`Mapped::check`]), and the process does not die of it; it is
    /// the validity of text already checked that the caller vouches for. ripgrep makes the same
    /// choice an `unsafe fn` (`MmapChoice::auto`) for the same reason.
    /// [`crate::ingest::source::open`] is the one caller outside tests.
    pub unsafe fn of(file: &File) -> Option<Mapped> {
        // SAFETY: the caller's word, passed on.
        unsafe { Mapped::at_least(file, SMALLEST) }
    }

    /// [`Mapped::of`] with another smallest size (the tests and the `mapped_reader` fuzz target
    /// map small files).
    ///
    /// # Safety
    ///
    /// As for [`Mapped::of`].
    pub unsafe fn at_least(file: &File, smallest: u64) -> Option<Mapped> {
        let meta = file.metadata().ok()?;
        if !meta.file_type().is_file() || meta.len() < smallest.max(1) {
            return None;
        }
        let len = usize::try_from(meta.len()).ok()?;
        HANDLER.call_once(install_handler);
        let slot = (0..SLOTS).find(|&i| {
            TAKEN[i]
                .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        })?;
        let file = match file.try_clone() {
            Ok(file) => file,
            Err(_) => return free(slot),
        };
        // SAFETY: the map is read only, and a page past a new end reads as zeros (the
        // handler) instead of killing the process. That the bytes do not change under a reader
        // that checked them (a rewrite in place, a truncation) is this function's caller's word
        // (its safety section).
        let map = match unsafe { memmap2::MmapOptions::new().len(len).map(&file) } {
            Ok(map) => map,
            Err(_) => return free(slot),
        };
        // (a hint: reading ahead of a sequential reader is what the kernel does anyway)
        let _ = map.advise(memmap2::Advice::Sequential);
        let start = map.as_ptr() as usize;
        SHRUNK[slot].store(false, Ordering::SeqCst);
        // published start first (see the handler)
        STARTS[slot].store(start, Ordering::SeqCst);
        ENDS[slot].store(start + len, Ordering::SeqCst);
        Some(Mapped {
            map,
            file,
            slot,
            released: AtomicUsize::new(0),
        })
    }

    /// Where the line that goes on at `from` ends, searched a few megabytes at a time, the
    /// pages searched given back behind (a line too long to read is skipped unread: its pages
    /// do not stay mapped, however long it is). `stop` is asked before each few megabytes
    /// (Ctrl-C); a file that shrank ends the search too (each page past its new end would be
    /// a SIGBUS of its own: two million for an 8 GB line).
    pub fn line_end(&self, from: usize, stop: impl Fn() -> bool) -> LineEnd {
        let map = self.bytes();
        let mut at = from;
        while at < map.len() {
            if stop() {
                return LineEnd::Stopped;
            }
            if self.shrunk() {
                return LineEnd::Shrunk;
            }
            let end = map.len().min(at + RELEASED_AT_ONCE);
            if let Some(nl) = memchr::memchr(b'\n', &map[at..end]) {
                self.forget(at..at + nl);
                return LineEnd::Newline(at + nl);
            }
            self.forget(at..end);
            at = end;
        }
        LineEnd::MapEnd
    }

    /// Gives back the whole pages of `range`, read and not to be read again.
    pub(crate) fn forget(&self, range: std::ops::Range<usize>) {
        let page = PAGE.load(Ordering::Relaxed);
        let from = (range.start + page - 1) & !(page - 1);
        self.give_back(from, range.end & !(page - 1));
    }

    /// Says that the bytes before `done` are read and will not be read again: their pages
    /// leave the process (they stay in the page cache), a few megabytes at a time. Without
    /// this, every page of the file stayed mapped until the end: reading a 100 MB log took
    /// 104 MB of memory (maximum resident set), where reading it through a buffer took 7 MB.
    pub fn release(&self, done: usize) {
        let page = PAGE.load(Ordering::Relaxed);
        let end = done.min(self.map.len()) & !(page - 1);
        let from = self.released.load(Ordering::Relaxed);
        if end >= from + RELEASED_AT_ONCE && self.give_back(from, end) {
            self.released.store(end, Ordering::Relaxed);
        }
    }

    /// Drops the pages from `from` to `to` (page-aligned) from the process; whether it did.
    fn give_back(&self, from: usize, to: usize) -> bool {
        if to <= from {
            return false;
        }
        // SAFETY: the range lies in the map and is read no more (the callers' word: bytes
        // read, or a line too long being skipped, which no other reader is given); its pages
        // are of a read-only map of the file, never written, so dropping them loses nothing: a
        // read of them would fault them in again from the page cache.
        let given = unsafe {
            self.map
                .unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, from, to - from)
        };
        given.is_ok()
    }

    /// The file's bytes, as many as it had when mapped.
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// Whether a page past the file's end was read (the file shrank while mapped): the bytes
    /// read there were zeros, not the file's.
    pub fn shrunk(&self) -> bool {
        SHRUNK[self.slot].load(Ordering::SeqCst)
    }

    /// The read's last word on the map: an error when a page past the file's end was read
    /// ([`Mapped::shrunk`]) or the file is now shorter than the map (a truncation inside the
    /// last page, or one after its pages were read, faults nothing: the bytes read there are
    /// zeros, or were the file's then). Every reader of a map calls it once it is done with
    /// the map, however it ends (its end, Ctrl-C, `--strict`).
    pub fn check(&self) -> io::Result<()> {
        let now = self.file.metadata()?.len();
        match self.shrunk() || now < self.map.len() as u64 {
            true => Err(shrunk_error()),
            false => Ok(()),
        }
    }

    /// Reads what the file holds at `*at`, past the map (what was written after it was made),
    /// and moves `*at` past what it read.
    pub fn read_past(&self, buf: &mut [u8], at: &mut u64) -> io::Result<usize> {
        let n = self.file.read_at(buf, *at)?;
        *at += n as u64;
        Ok(n)
    }
}

/// How the search of [`Mapped::line_end`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineEnd {
    /// at the line's newline, at this index of the map
    Newline(usize),
    /// the line runs to the end of the map
    MapEnd,
    /// `stop` said to stop
    Stopped,
    /// the file shrank under the search ([`Mapped::shrunk`])
    Shrunk,
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // the slot is cleared before the map goes (`memmap2` unmaps it after this), end first
        // (see the handler)
        ENDS[self.slot].store(0, Ordering::SeqCst);
        STARTS[self.slot].store(0, Ordering::SeqCst);
        TAKEN[self.slot].store(false, Ordering::SeqCst);
    }
}

fn free<T>(slot: usize) -> Option<T> {
    TAKEN[slot].store(false, Ordering::SeqCst);
    None
}

/// The error a read reports when its map's file shrank.
pub fn shrunk_error() -> io::Error {
    io::Error::other(
        "the file shrank while it was read (truncated by another program?), or a page of it could not be read: the lines past that point are not its",
    )
}

fn install_handler() {
    // SAFETY: sysconf takes an integer and returns one.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if let Ok(page) = usize::try_from(page)
        && page.is_power_of_two()
    {
        PAGE.store(page, Ordering::SeqCst);
    }
    // SAFETY: a zeroed sigaction is valid (no flags, an empty mask); the handler is an
    // `extern "C"` function of the SA_SIGINFO signature.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigbus as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut());
    }
}

/// A fault in an open map: a page of zeros is put where the file no longer has one, and the
/// map is marked; the faulting read then reads zeros. Any other fault: the default action
/// (the process ends with `SIGBUS`). Atomics and `mmap`/`sigaction` system calls alone.
extern "C" fn on_sigbus(signal: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo_t with SA_SIGINFO.
    let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
    let page = PAGE.load(Ordering::SeqCst);
    // A fault of a page the file no longer has is BUS_ADRERR; a `kill -BUS`, a memory error
    // or an alignment fault is not this handler's.
    for slot in (0..SLOTS).filter(|_| code == BUS_ADRERR) {
        // The end first, then the start: a map is published start first and withdrawn end
        // first, so a slot read half-published or half-withdrawn has an end of 0 or a start
        // of 0, and matches nothing.
        let end = ENDS[slot].load(Ordering::SeqCst);
        let start = STARTS[slot].load(Ordering::SeqCst);
        if start != 0 && start <= addr && addr < end {
            let at = addr & !(page - 1);
            // SAFETY: the page lies in this slot's map (mapped by us, still mapped while the
            // slot is set); a fixed anonymous map replaces it in place.
            let zeros = unsafe {
                libc::mmap(
                    at as *mut libc::c_void,
                    page,
                    libc::PROT_READ,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                    -1,
                    0,
                )
            };
            if zeros != libc::MAP_FAILED {
                SHRUNK[slot].store(true, Ordering::SeqCst);
                return;
            }
        }
    }
    // SAFETY: a zeroed sigaction with SIG_DFL restores the default action; the signal raised
    // again is delivered once this handler returns (it is blocked while the handler runs) and
    // ends the process, as it would have without the handler (a fault also re-runs the
    // faulting instruction).
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = libc::SIG_DFL;
        libc::sigaction(signal, &action, std::ptr::null_mut());
        libc::raise(signal);
    }
}

/// `si_code` of a SIGBUS for an address with no backing (Linux, asm-generic/siginfo.h).
const BUS_ADRERR: libc::c_int = 2;

/// `file` mapped whatever its size (tests: files of a few bytes).
#[cfg(test)]
pub(crate) fn small_map(file: &File) -> Option<Mapped> {
    // SAFETY: the tests' files are private temporary files; those truncated while mapped are
    // truncated on purpose, to check that the readers report it.
    unsafe { Mapped::at_least(file, 1) }
}

/// Appends `bytes` to the file at `path` (tests: a file written after it was mapped).
#[cfg(test)]
pub(crate) fn append_to(path: &std::path::Path, bytes: &[u8]) {
    let mut file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    std::io::Write::write_all(&mut file, bytes).unwrap();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`Mapped::of`] of a test's own file.
    fn map_of(file: &File) -> Option<Mapped> {
        // SAFETY: a private temporary file; those truncated while mapped are truncated on
        // purpose, to check that it is reported.
        unsafe { Mapped::of(file) }
    }

    fn file_of(bytes: &[u8]) -> (tempfile::TempDir, File) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, bytes).unwrap();
        let file = File::open(&path).unwrap();
        (dir, file)
    }

    #[test]
    fn a_file_below_the_smallest_size_is_not_mapped() {
        let (_dir, file) = file_of(&vec![b'x'; SMALLEST as usize - 1]);
        assert!(map_of(&file).is_none());
        let (_dir, file) = file_of(&vec![b'x'; SMALLEST as usize]);
        let mapped = map_of(&file).unwrap();
        assert_eq!(mapped.bytes().len(), SMALLEST as usize);
        assert!(!mapped.shrunk());
    }

    #[test]
    fn a_map_holds_the_file_as_opened_and_what_is_appended_is_read_after_it() {
        let bytes: Vec<u8> = (0..2 * SMALLEST).map(|i| (i % 251) as u8).collect();
        let (dir, file) = file_of(&bytes);
        let mapped = map_of(&file).unwrap();
        append_to(&dir.path().join("f"), b"more");
        assert_eq!(mapped.bytes(), bytes.as_slice());
        let (mut after, mut at) = ([0u8; 8], bytes.len() as u64);
        let n = mapped.read_past(&mut after, &mut at).unwrap();
        assert_eq!(&after[..n], b"more");
        assert_eq!(at, bytes.len() as u64 + 4);
    }

    #[test]
    fn a_file_truncated_while_mapped_reads_zeros_past_its_end_and_says_so() {
        let len = 4 * SMALLEST as usize;
        let (dir, file) = file_of(&vec![b'a'; len]);
        let mapped = map_of(&file).unwrap();
        let page = PAGE.load(Ordering::SeqCst);
        std::fs::OpenOptions::new()
            .write(true)
            .open(dir.path().join("f"))
            .unwrap()
            .set_len(page as u64)
            .unwrap();
        let bytes = mapped.bytes();
        // (read through a volatile load: a read the compiler could drop would not fault)
        let at = |i: usize| unsafe { std::ptr::read_volatile(&bytes[i]) };
        assert_eq!(at(0), b'a');
        assert!(
            !mapped.shrunk(),
            "the page still in the file reads as it was"
        );
        assert_eq!(at(len - 1), 0);
        assert_eq!(at(3 * page), 0);
        assert!(mapped.shrunk());
    }

    #[test]
    fn released_pages_read_again_as_the_file() {
        let bytes: Vec<u8> = (0..3 * RELEASED_AT_ONCE).map(|i| (i % 253) as u8).collect();
        let (_dir, file) = file_of(&bytes);
        let mapped = map_of(&file).unwrap();
        assert_eq!(mapped.bytes(), bytes.as_slice());
        mapped.release(RELEASED_AT_ONCE - 1);
        assert_eq!(
            mapped.released.load(Ordering::Relaxed),
            0,
            "less than a batch"
        );
        mapped.release(2 * RELEASED_AT_ONCE + 5);
        assert_eq!(
            mapped.released.load(Ordering::Relaxed),
            2 * RELEASED_AT_ONCE
        );
        assert_eq!(mapped.bytes(), bytes.as_slice());
    }

    #[test]
    fn slots_are_freed_when_maps_are_dropped() {
        let (_dir, file) = file_of(&vec![b'x'; SMALLEST as usize]);
        for _ in 0..3 * SLOTS {
            let mapped = map_of(&file);
            assert!(mapped.is_some());
        }
    }
}
