//! Reading one input on several cores, in its order: the engine the parallel readers share
//! (the trace line formats in [`crate::ingest::trace::parallel`], Chrome JSON in
//! [`crate::ingest::trace::parallel_chrome`], WAYLAND_DEBUG logs in `ingest::wayland`).
//!
//! The input is cut into chunks (of whole lines: [`Reader`]); each chunk is parsed by a
//! worker into what the reader needs, and the results are taken in the input's order on the
//! calling thread, which also reads the input ([`in_order`]). `--threads N` is N threads in
//! all: the calling thread and N - 1 workers. Chunks go out numbered on one queue that any
//! worker takes from and come back on one queue, put in order by their numbers; while the next
//! chunk in order is not back, the calling thread parses the chunks still queued itself
//! instead of waiting. Before, N workers beside a calling thread that reads and pairs (a
//! quarter of the work) were 3 threads on 2 cores, dealt chunks in turn: a worker the
//! scheduler left out held up the rest, and `--threads 2` read perf text 1.53-1.59× as fast as
//! one thread on the 2-core VM; then 1.71-2.12× in quiet runs (at a4b3b62). Each thread has
//! since got faster, so the ordered pairing is a larger share: 1.6-1.9× (the README's table).
//!
//! At most [`IN_FLIGHT`] chunks per thread are read and not yet taken, so memory is that many
//! chunks (of [`CHUNK`], plus the end of a line carried over) and their results. std's
//! threads, a mutex around the queue's receiving end (taken once per chunk) and bounded
//! channels are enough for this: one producer, one consumer, and work that needs no other
//! work.

use std::io::{self, Read};
use std::ops::ControlFlow;
use std::panic::AssertUnwindSafe;
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, sync_channel};
use std::sync::{Mutex, PoisonError};

use crate::ingest::Cancel;
use crate::ingest::lines::{DEFAULT_BUFFER, Line, text_of, trim_cr, trim_cr_str};
use crate::ingest::words::Positions;

/// Bytes of input per chunk (a chunk ends at the last newline of this many): with 2 threads on
/// 2 cores, chunks of 256 KiB read the 100 MB benchmark inputs 2.7-4.9% faster than chunks of
/// 1 MiB (medians of 7, every format; not profiled further: the likely reason is that a
/// chunk's records are still in cache when the pairing thread takes them).
pub const CHUNK: usize = 256 << 10;

/// The chunk size a reader uses when `asked` bytes (0: [`CHUNK`]; `--chunk-bytes`).
pub fn chunk_size(asked: usize) -> usize {
    if asked == 0 { CHUNK } else { asked }
}

/// Chunks per worker read and not yet paired: enough that a thread the scheduler leaves out
/// for a few time slices (a shared machine) does not stop the others at once.
pub const IN_FLIGHT: usize = 4;

/// What the calling thread has taken of the workers' results, kept for the next chunk a worker
/// parses to fill again: a chunk's records (32 to 232 bytes an event, by format) allocated
/// anew for every chunk and freed after it were pages faulted in and unmapped again for every
/// chunk, and each `munmap` interrupted the other core (two threads on the 100 MB perf input:
/// 2,054 page faults where one thread took 637; reused, 1,010). At most [`IN_FLIGHT`] per
/// thread are kept: no more than are out at once.
pub(crate) struct Spares<T> {
    kept: Mutex<Vec<T>>,
    most: usize,
}

impl<T> Spares<T> {
    /// Spares for `threads` threads.
    pub(crate) fn new(threads: usize) -> Spares<T> {
        Spares {
            kept: Mutex::new(Vec::new()),
            most: threads.max(1) * IN_FLIGHT,
        }
    }

    /// One kept result, if any.
    pub(crate) fn take(&self) -> Option<T> {
        self.kept
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
    }

    /// Keeps `used` for a later chunk (dropped when enough are kept).
    pub(crate) fn give(&self, used: T) {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.len() < self.most {
            kept.push(used);
        }
    }
}

/// A line this long or longer (without its newline) is skipped, as the serial reader's
/// buffer skips it ([`Line::TooLong`]).
const LONGEST: usize = DEFAULT_BUFFER;

/// Whole lines of the input, and whether a line too long to read ends just before them.
pub(crate) struct Job {
    pub(crate) buf: Vec<u8>,
    pub(crate) len: usize,
    pub(crate) lead_too_long: bool,
}

/// Cuts the input into chunks of whole lines.
pub struct Reader<'c, R> {
    inner: R,
    chunk: usize,
    cancel: Option<&'c Cancel>,
    /// the beginning of a line, read with the chunk before
    carry: Vec<u8>,
    /// inside a line too long to read (its bytes are dropped)
    skipping: bool,
    /// a line too long to read ended just before the next chunk
    lead: bool,
    done: bool,
    error: Option<io::Error>,
    pub(crate) cancelled: bool,
    pub(crate) bytes: u64,
    /// the input ended without a newline (the serial reader's `unterminated_last_line`)
    pub(crate) unterminated: bool,
}

impl<'c, R: Read> Reader<'c, R> {
    /// Chunks of about `chunk` bytes of `inner` (0: [`CHUNK`]); the read stops when
    /// `cancel` is raised.
    pub fn new(inner: R, chunk: usize, cancel: Option<&'c Cancel>) -> Self {
        Reader {
            inner,
            chunk: chunk_size(chunk),
            cancel,
            carry: Vec::new(),
            skipping: false,
            lead: false,
            done: false,
            error: None,
            cancelled: false,
            bytes: 0,
            unterminated: false,
        }
    }

    /// The next chunk, read into `buf`; `None` at the end. A read error comes after the
    /// whole lines read before it, as the serial reader delivers them.
    pub(crate) fn next(&mut self, mut buf: Vec<u8>) -> io::Result<Option<Job>> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        if self.done {
            return Ok(None);
        }
        // Exactly a chunk more than the carried part of a line (a buffer grown by a long line
        // keeps its memory, not its length).
        buf.resize(self.carry.len() + self.chunk, 0);
        let mut filled = self.carry.len();
        buf[..filled].copy_from_slice(&self.carry);
        self.carry.clear();
        loop {
            if self.cancel.is_some_and(Cancel::is_raised) {
                self.cancelled = true;
                self.done = true;
                return Ok(self.cut(buf, filled));
            }
            let n = match self.inner.read(&mut buf[filled..]) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.done = true;
                    // With no whole line to give first, the error is given now: kept for
                    // the next call, it would be lost behind the `None` that ends the read.
                    let Some(job) = self.cut(buf, filled) else {
                        return Err(e);
                    };
                    self.error = Some(e);
                    return Ok(Some(job));
                }
            };
            if n == 0 {
                self.done = true;
                self.unterminated = self.skipping || (filled > 0 && buf[filled - 1] != b'\n');
                let lead = std::mem::take(&mut self.lead) || self.skipping;
                let len = if self.skipping { 0 } else { filled };
                return Ok((len > 0 || lead).then_some(Job {
                    buf,
                    len,
                    lead_too_long: lead,
                }));
            }
            self.bytes += n as u64;
            if self.skipping {
                let Some(p) = memchr::memchr(b'\n', &buf[filled..filled + n]) else {
                    continue; // still inside the long line: its bytes are dropped
                };
                let from = filled + p + 1;
                buf.copy_within(from..filled + n, 0);
                filled = filled + n - from;
                self.skipping = false;
                self.lead = true;
            } else {
                filled += n;
            }
            if filled < buf.len() {
                continue;
            }
            match memchr::memrchr(b'\n', &buf[..filled]) {
                Some(p) => {
                    self.carry.extend_from_slice(&buf[p + 1..filled]);
                    return Ok(Some(self.job(buf, p + 1)));
                }
                None if filled >= LONGEST => {
                    self.skipping = true;
                    filled = 0;
                    if self.lead {
                        return Ok(Some(self.job(buf, 0)));
                    }
                }
                // A line longer than the chunk: room for more of it (doubling, so that it
                // is searched for its newline a bounded number of times).
                None => buf.resize(buf.len() + self.chunk.max(buf.len()), 0),
            }
        }
    }

    fn job(&mut self, buf: Vec<u8>, len: usize) -> Job {
        Job {
            buf,
            len,
            lead_too_long: std::mem::take(&mut self.lead),
        }
    }

    /// The whole lines of `buf[..filled]`, when the read stops early.
    fn cut(&mut self, buf: Vec<u8>, filled: usize) -> Option<Job> {
        let len = memchr::memrchr(b'\n', &buf[..filled]).map_or(0, |p| p + 1);
        let job = self.job(buf, len);
        (job.len > 0 || job.lead_too_long).then_some(job)
    }
}

/// Calls `f(n, line)` for every line of a chunk, numbered from 1, as the serial reader would
/// give them; returns how many there were. `UTF8`: lines are given as text where the chunk is
/// UTF-8 (a reader of bytes, as the WAYLAND_DEBUG one, skips the check); `blanks`: as
/// [`Line::Plain`] where the chunk has no tab, `\r` or `\x0c` ([`LineReader::blanks`](crate::ingest::LineReader::blanks)).
#[inline]
pub(crate) fn for_each_line<const UTF8: bool>(
    data: &[u8],
    lead_too_long: bool,
    blanks: bool,
    mut f: impl FnMut(u64, Line<'_>),
) -> u64 {
    // A chunk of UTF-8 (the usual) is checked at once; its lines are then given as text.
    let (text, plain) = if UTF8 {
        text_of(data, blanks)
    } else {
        (None, false)
    };
    let line = |start: usize, end: usize| -> Line<'_> {
        if end - start >= LONGEST {
            return Line::TooLong {
                len: (end - start) as u64,
            };
        }
        match text {
            Some(text) => Line::of_text(trim_cr_str(&text[start..end]), plain),
            None => Line::Text(trim_cr(&data[start..end])),
        }
    };
    let mut n = 0;
    if lead_too_long {
        n += 1;
        f(n, Line::TooLong { len: 0 });
    }
    let mut start = 0;
    for nl in Positions::of(b'\n', data) {
        n += 1;
        f(n, line(start, nl));
        start = nl + 1;
    }
    if start < data.len() {
        n += 1;
        f(n, line(start, data.len()));
    }
    n
}

/// What the three parallel readers share: the chunks `read` gives (into a spent buffer, to
/// reuse) are parsed on `threads` threads in all, each with a parser of its own from
/// `parser`, and `apply` takes the results in the order read and gives back their buffers, or
/// `Break` when it wants no more input (`--strict`'s first malformed line): nothing more is
/// read, and the chunks already out are still given to `apply`.
/// See the module docs: one queue of chunks that any worker takes, one of results put back in
/// order by number ([`InOrder`]), the calling thread parsing queued chunks while it would
/// wait, at most [`IN_FLIGHT`] chunks per thread out. A read error comes after every chunk
/// read before it was applied.
pub(crate) fn in_order<J, D, P>(
    threads: usize,
    mut read: impl FnMut(Vec<u8>) -> io::Result<Option<J>>,
    parser: impl Fn() -> P,
    mut apply: impl FnMut(D) -> ControlFlow<(), Vec<u8>>,
) -> io::Result<()>
where
    J: Send,
    D: Send,
    P: FnMut(J) -> D + Send,
{
    let cap = threads.max(1) * IN_FLIGHT;
    let (job_tx, job_rx) = sync_channel::<(usize, J)>(cap);
    let (done_tx, done_rx) = sync_channel::<(usize, Option<D>)>(cap);
    let job_rx = Mutex::new(job_rx);
    // The calling thread's own parser, for the chunks it parses while it would wait.
    let mut own = parser();
    std::thread::scope(|scope| {
        for _ in 0..threads.saturating_sub(1).max(1) {
            let (job_rx, done_tx, parse) = (&job_rx, done_tx.clone(), parser());
            scope.spawn(move || work(parse, job_rx, &done_tx));
        }
        drop(done_tx);
        // A queued chunk, parsed here. `try_lock`: a worker holds the lock while it waits
        // for a chunk, which only this thread can send.
        let mut help = || {
            let queued = job_rx.try_lock().ok()?.try_recv().ok();
            queued.map(|(seq, job)| (seq, own(job)))
        };
        let mut order = InOrder::new(done_rx, cap);
        let mut pool: Vec<Vec<u8>> = Vec::new();
        let mut sent = 0usize;
        let result = loop {
            if sent - order.taken == cap {
                let Some(done) = order.next(&mut help) else {
                    break Ok(()); // a worker panicked: the scope's join says so
                };
                match apply(done) {
                    ControlFlow::Continue(buf) => pool.push(buf),
                    ControlFlow::Break(()) => break Ok(()),
                }
            }
            match read(pool.pop().unwrap_or_default()) {
                Ok(Some(job)) => {
                    // Never blocks: at most `cap` chunks are out, queued or parsed.
                    if job_tx.send((sent, job)).is_err() {
                        break Ok(());
                    }
                    sent += 1;
                }
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            }
        };
        drop(job_tx);
        while order.taken < sent {
            let Some(done) = order.next(&mut help) else {
                break;
            };
            let _ = apply(done);
        }
        result
    })
}

/// A worker's loop: chunks from the shared queue until it closes. A panic is reported as a
/// missing result (the calling thread stops waiting), then goes on to the scope's join.
fn work<J, D>(
    mut parse: impl FnMut(J) -> D,
    jobs: &Mutex<Receiver<(usize, J)>>,
    done: &SyncSender<(usize, Option<D>)>,
) {
    loop {
        // The lock is held while waiting for a chunk, never while parsing one.
        let next = jobs.lock().unwrap_or_else(PoisonError::into_inner).recv();
        let Ok((seq, job)) = next else {
            return;
        };
        match std::panic::catch_unwind(AssertUnwindSafe(|| parse(job))) {
            Ok(chunk) => {
                if done.send((seq, Some(chunk))).is_err() {
                    return;
                }
            }
            Err(panic) => {
                let _ = done.send((seq, None));
                std::panic::resume_unwind(panic);
            }
        }
    }
}

/// Results as they come, given in the order of their sequence numbers.
struct InOrder<D> {
    results: Receiver<(usize, Option<D>)>,
    /// results come early in the slot `seq % len` (at most `len` are out at once)
    pending: Vec<Option<D>>,
    /// results given so far: the next one's sequence number
    taken: usize,
}

impl<D> InOrder<D> {
    /// Results from `results`, of which at most `cap` are out at once.
    fn new(results: Receiver<(usize, Option<D>)>, cap: usize) -> Self {
        InOrder {
            results,
            pending: (0..cap.max(1)).map(|_| None).collect(),
            taken: 0,
        }
    }

    /// The next result in order; `None` when a worker failed. While it is not there, the
    /// chunks still queued are parsed by `help` (the calling thread would otherwise wait idle
    /// for a worker that shares its core).
    fn next(&mut self, help: &mut impl FnMut() -> Option<(usize, D)>) -> Option<D> {
        let slot = self.taken % self.pending.len();
        let len = self.pending.len();
        while self.pending[slot].is_none() {
            let (seq, done) = match self.results.try_recv() {
                Ok((seq, done)) => (seq, done?),
                Err(TryRecvError::Disconnected) => return None,
                Err(TryRecvError::Empty) => match help() {
                    Some(helped) => helped,
                    None => {
                        let (seq, done) = self.results.recv().ok()?;
                        (seq, done?)
                    }
                },
            };
            self.pending[seq % len] = Some(done);
        }
        self.taken += 1;
        self.pending[slot].take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `data`, then an error.
    struct Failing<'a>(&'a [u8]);

    impl Read for Failing<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.0.is_empty() {
                return Err(io::Error::other("broken"));
            }
            let n = buf.len().min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    /// The chunks' whole lines, then the error (as text).
    fn chunks(data: &[u8], chunk: usize) -> (Vec<String>, Option<String>) {
        let mut reader = Reader::new(Failing(data), chunk, None);
        let mut out = Vec::new();
        loop {
            match reader.next(Vec::new()) {
                Ok(Some(job)) => out.push(String::from_utf8_lossy(&job.buf[..job.len]).into()),
                Ok(None) => return (out, None),
                Err(e) => return (out, Some(e.to_string())),
            }
        }
    }

    #[test]
    fn a_chunk_gives_plain_lines_only_when_asked_and_free_of_other_blanks() {
        let kinds = |data: &[u8], blanks: bool| {
            let mut kinds = String::new();
            for_each_line::<true>(data, false, blanks, |_, line| {
                kinds.push(match line {
                    Line::Plain(_) => 'p',
                    Line::Str(_) => 's',
                    Line::Text(_) => 't',
                    Line::TooLong { .. } => 'l',
                })
            });
            kinds
        };
        assert_eq!(kinds(b"a b\nc d\ne", true), "ppp");
        assert_eq!(kinds(b"a b\nc d\ne", false), "sss");
        for blank in [b'\t', b'\r', b'\x0c'] {
            let data = [&b"a b\nc d\ne"[..], &[blank]].concat();
            assert_eq!(kinds(&data, true), "sss", "{blank}");
        }
        assert_eq!(kinds(b"a\xff\nb\n", true), "tt");
    }

    #[test]
    fn a_read_error_after_the_last_whole_line_is_not_lost() {
        // The error comes with only the start of a line in the buffer (the carried "bb"),
        // or with nothing at all: the read must end with it, never with `None`.
        for (data, chunk) in [(&b"a\nbb"[..], 4), (b"a\nbb", 1), (b"a\n", 2), (b"", 8)] {
            let (_, error) = chunks(data, chunk);
            assert_eq!(
                error.as_deref(),
                Some("broken"),
                "{data:?} in chunks of {chunk}"
            );
        }
        // Whole lines read before the error still come first.
        let (lines, error) = chunks(b"a\nb\ncc", 64);
        assert_eq!(lines, ["a\nb\n"]);
        assert_eq!(error.as_deref(), Some("broken"));
    }
}
