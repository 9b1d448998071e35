//! Reading one input on several cores, in its order: the engine the parallel readers share
//! (the trace line formats in [`crate::ingest::trace::parallel`], Chrome JSON in
//! [`crate::ingest::trace::parallel_chrome`], WAYLAND_DEBUG logs in `ingest::wayland`).
//!
//! The input is cut into chunks (of whole lines: [`Reader`]); each chunk is read and parsed by
//! one thread into what the reader needs, and the results are taken in the input's order on
//! the calling thread ([`in_order`]). `--threads N` is N threads in all: the calling thread and
//! N - 1 workers. The reads are one at a time, under a lock, and number the chunks
//! ([`Feed`]); results come back on one queue, put in order by their numbers. While the next
//! chunk in order is not back, the calling thread reads and parses a chunk itself instead of
//! waiting. N workers beside a calling thread that only read and paired would be N + 1 threads
//! on N cores, dealt chunks in turn, and a worker the scheduler left out would hold up the
//! rest; a calling thread that read every chunk and handed it out would be the bottleneck on a
//! machine with many cores. How the thread counts scale is in docs/performance.md.
//!
//! At most [`in_flight`] chunks (4 a thread, 16 in all) are read and not yet taken, so memory
//! is that many chunks (of [`CHUNK`], plus the end of a line carried over) and their results.
//! std's threads, mutexes, a condition variable and a bounded channel are enough for this:
//! the locks are taken once per chunk, and the work needs no other work.

use std::io::{self, Read};
use std::ops::{ControlFlow, Range};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, sync_channel};
use std::sync::{Arc, Condvar, Mutex, PoisonError, TryLockError};

use crate::ingest::Cancel;
use crate::ingest::lines::{DEFAULT_BUFFER, Line, text_of, trim_cr, trim_cr_str};
use crate::ingest::mapped::{LineEnd, Mapped, shrunk_error};
use crate::ingest::words::Positions;

/// Bytes of input per chunk (a chunk ends at the last newline of this many): small enough that
/// a chunk's records are likely still in cache when the pairing thread takes them, which made
/// 256 KiB faster than 1 MiB in every format measured.
pub const CHUNK: usize = 256 << 10;

/// The chunk size a reader uses when `asked` bytes (0: [`CHUNK`]; `--chunk-bytes`).
pub fn chunk_size(asked: usize) -> usize {
    if asked == 0 { CHUNK } else { asked }
}

/// Chunks per thread read and not yet paired: enough that a thread the scheduler leaves out
/// for a few time slices (a shared machine) does not stop the others at once.
pub const IN_FLIGHT: usize = 4;

/// Chunks read and not yet paired, at most, however many threads: with many threads, more
/// chunks out only made the calling thread wait longer for the next chunk in order, so reading
/// was no faster and often slower. It also bounds memory whatever `--threads` asks: 4 MiB of
/// chunks, not 256 MiB with 256 threads.
pub const MOST_IN_FLIGHT: usize = 16;

/// Chunks read and not yet paired, at most, with `threads` threads.
pub fn in_flight(threads: usize) -> usize {
    (threads.max(1) * IN_FLIGHT).min(MOST_IN_FLIGHT)
}

/// What the calling thread has taken of the workers' results, kept for the next chunk a worker
/// parses to fill again: a chunk's records (32 to 232 bytes an event, by format) allocated
/// anew for every chunk and freed after it were pages faulted in and unmapped again for every
/// chunk, and each `munmap` interrupted the other core (the page faults of two threads were
/// several times one thread's until the records were reused). At most [`in_flight`] are kept:
/// no more than are out at once.
pub(crate) struct Spares<T> {
    kept: Mutex<Vec<T>>,
    most: usize,
}

impl<T> Spares<T> {
    /// Spares for `threads` threads.
    pub(crate) fn new(threads: usize) -> Spares<T> {
        Spares {
            kept: Mutex::new(Vec::new()),
            most: in_flight(threads),
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

/// Whole lines of the input, and whether a line too long to read ends just before them: read
/// into `buf`, or a range of the input's map.
pub(crate) struct Job {
    pub(crate) buf: Vec<u8>,
    pub(crate) len: usize,
    pub(crate) lead_too_long: bool,
    pub(crate) mapped: Option<(Arc<Mapped>, Range<usize>)>,
}

impl Job {
    /// The chunk's lines.
    #[inline]
    pub(crate) fn data(&self) -> &[u8] {
        match &self.mapped {
            Some((mapped, range)) => &mapped.bytes()[range.clone()],
            None => &self.buf[..self.len],
        }
    }

    /// Says that this chunk and every chunk before it are read ([`Mapped::release`]): called
    /// by the thread that takes the chunks in order, once it has taken this one.
    pub(crate) fn taken(&self) {
        if let Some((mapped, range)) = &self.mapped {
            mapped.release(range.end);
        }
    }
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
    /// the input's map: chunks are ranges of it, then what follows it is read from the file
    /// (not from `inner`, which is not read)
    mapped: Option<Arc<Mapped>>,
    /// where the next chunk of the map begins; past the map, where the next read of the file
    /// begins
    at: u64,
    past_map: bool,
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
            mapped: None,
            at: 0,
            past_map: false,
        }
    }

    /// Chunks of `mapped` where they lie, then of what the file holds past the map, instead
    /// of `inner`'s: the chunks end where `inner`'s would (lines too long are in them, to be
    /// given as [`Line::TooLong`]).
    pub fn mapped(mut self, mapped: Option<Mapped>) -> Self {
        self.mapped = mapped.map(Arc::new);
        self
    }

    /// The next chunk of the map; `None` when the map is done (its unfinished last line then
    /// carried, to be ended by what is read after it).
    fn next_mapped(&mut self, mapped: &Arc<Mapped>, buf: Vec<u8>) -> io::Result<Option<Job>> {
        if mapped.shrunk() {
            self.done = true;
            return Err(shrunk_error());
        }
        let map = mapped.bytes();
        let mut at = usize::try_from(self.at).unwrap_or(map.len()).min(map.len());
        let mut end = map.len().min(at + self.chunk);
        while at < map.len() {
            if let Some(p) = memchr::memrchr(b'\n', &map[at..end]) {
                self.at = (at + p + 1) as u64;
                self.bytes = self.at;
                return Ok(Some(Job {
                    buf,
                    len: 0,
                    lead_too_long: std::mem::take(&mut self.lead),
                    mapped: Some((Arc::clone(mapped), at..at + p + 1)),
                }));
            }
            if end - at >= LONGEST {
                // a line too long to read, skipped unread as the read chunks skip it: the
                // next chunk says that it ended before it. One that ended just before this
                // one is said first, by a chunk of no lines (the read chunks' order).
                if self.lead {
                    self.at = at as u64;
                    return Ok(Some(self.job(buf, 0)));
                }
                // (its first bytes, searched, are given back too: they are no chunk's)
                mapped.forget(at..end);
                let cancel = self.cancel;
                let cancelled = || cancel.is_some_and(Cancel::is_raised);
                let nl = match mapped.line_end(end, cancelled) {
                    LineEnd::Newline(nl) => nl,
                    LineEnd::Stopped => {
                        self.cancelled = true;
                        self.done = true;
                        return Ok(None);
                    }
                    // (cut short: the line is no line of the file, not one too long)
                    LineEnd::Shrunk => {
                        self.done = true;
                        return Err(shrunk_error());
                    }
                    LineEnd::MapEnd => {
                        at = map.len();
                        self.skipping = true;
                        break;
                    }
                };
                self.lead = true;
                at = nl + 1;
                end = map.len().min(at + self.chunk);
                continue;
            }
            if end == map.len() {
                break;
            }
            // a line longer than the chunk: twice the room (at most the longest line read),
            // searched again
            end = map.len().min(at + (2 * (end - at)).min(LONGEST));
        }
        self.past_map = true;
        self.bytes = map.len() as u64;
        self.at = map.len() as u64;
        // (a tail of LONGEST bytes or more was found too long above: it is being skipped)
        if !self.skipping {
            self.carry.extend_from_slice(&map[at..]);
        }
        Ok(None)
    }

    /// Once the chunks are all taken (however the read ended): an error when the mapped file
    /// shrank under the read ([`Mapped::check`]); workers read a chunk's pages after it was
    /// handed out, so this is known only now.
    pub(crate) fn check_mapped(&self) -> io::Result<()> {
        self.mapped.as_ref().map_or(Ok(()), |mapped| mapped.check())
    }

    /// Reads from the file past its map, or from `inner`.
    fn read_more(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match &self.mapped {
            Some(mapped) => mapped.read_past(buf, &mut self.at),
            None => self.inner.read(buf),
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
        if let Some(mapped) = self.mapped.clone()
            && !self.past_map
        {
            if self.cancel.is_some_and(Cancel::is_raised) {
                self.cancelled = true;
                self.done = true;
                return Ok(None);
            }
            if let Some(job) = self.next_mapped(&mapped, std::mem::take(&mut buf))? {
                return Ok(Some(job));
            }
        }
        // Any thread may be the one reading: a signal is passed on to it (a read blocked on a
        // pipe then returns at once).
        let _reading = self.cancel.map(Cancel::reading);
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
            let n = match self.read_more(&mut buf[filled..]) {
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
                    mapped: None,
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
            mapped: None,
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
    // `f` is called from one place, so that it is inlined: called for the lead, the lines and
    // the last line apart, it was a call with its frame for every line, a measurable cost on
    // short WAYLAND_DEBUG lines.
    let (mut lead, mut last) = (lead_too_long, data.last().is_some_and(|&b| b != b'\n'));
    let mut lines = Positions::of(b'\n', data);
    let (mut n, mut start) = (0, 0);
    loop {
        let next = if lead {
            lead = false;
            Line::TooLong { len: 0 }
        } else if let Some(nl) = lines.next() {
            let next = line(start, nl);
            start = nl + 1;
            next
        } else if last {
            last = false;
            line(start, data.len())
        } else {
            return n;
        };
        n += 1;
        f(n, next);
    }
}

/// What the three parallel readers share: the chunks `read` gives (into a spent buffer, to
/// reuse) are parsed on `threads` threads in all, each with a parser of its own from
/// `parser`, and `apply` takes the results in the order read and gives back their buffers, or
/// `Break` when it wants no more input (`--strict`'s first malformed line): nothing more is
/// read, and the chunks already out are still given to `apply`.
/// See the module docs: the thread that parses a chunk reads it ([`Feed`]), results are put
/// back in order by number ([`InOrder`]), the calling thread reads and parses chunks itself
/// while it would wait, at most [`in_flight`] chunks out. A read error comes after every
/// chunk read before it was applied.
pub(crate) fn in_order<J, D, P>(
    threads: usize,
    read: impl FnMut(Vec<u8>) -> io::Result<Option<J>> + Send,
    parser: impl Fn() -> P,
    mut apply: impl FnMut(D) -> ControlFlow<(), Vec<u8>>,
) -> io::Result<()>
where
    J: Send,
    D: Send,
    P: FnMut(J) -> D + Send,
{
    let workers = threads.saturating_sub(1).max(1);
    let feed = Feed::new(read, in_flight(threads), workers + 1);
    let (done_tx, done_rx) = sync_channel::<(usize, Option<(usize, D)>)>(feed.cap);
    // The calling thread's own parser, for the chunks it parses while it would wait.
    let mut own = parser();
    std::thread::scope(|scope| {
        // A worker that cannot be started (a process limit) is not waited for: the calling
        // thread reads and parses what the missing workers would have, and the result is
        // the same.
        let mut started = 0;
        for who in 1..=workers {
            let (feed, done_tx, parse) = (&feed, done_tx.clone(), parser());
            let worker = std::thread::Builder::new()
                .spawn_scoped(scope, move || work(who, parse, feed, &done_tx));
            if worker.is_err() {
                break;
            }
            started += 1;
        }
        drop(done_tx);
        // However this thread leaves (the end, a worker's panic, a panic here), the workers
        // waiting for room stop waiting, so that the scope's join returns.
        let _end = EndOnDrop(&feed);
        // A chunk read and parsed here, when there is room for one. With several workers,
        // only when no other thread is reading (`try_lock`): results of the others come
        // meanwhile. With one, after its read: waiting for its result instead, this thread
        // sat idle while it parsed its chunk, every time it found it reading, and two threads
        // read markedly more slowly.
        let one_worker = started <= 1;
        let mut help = || {
            let input = match one_worker {
                true => feed.input(),
                false => feed.try_input()?,
            };
            let (seq, job) = feed.next(0, input)?;
            Some((seq, (0, own(job))))
        };
        let mut order = InOrder::new(done_rx, feed.cap);
        while !feed.all_taken(order.taken) {
            // `None`: a worker panicked (the scope's join says so)
            let Some((who, done)) = order.next(&mut help) else {
                break;
            };
            let flow = apply(done);
            feed.taken(who, flow);
        }
        feed.error()
    })
}

/// The input and how far it has been read and taken, shared by the threads: a worker reads the
/// chunk it parses, into a buffer it read into before. The reads are one at a time, in order
/// (a lock), so chunks and their numbers are what one reader would make.
///
/// Read on the calling thread and parsed on another, a chunk was copied from the page cache by
/// one core and read again from that core's cache by the other, into buffers last written by
/// the other: two threads spent much longer than one in the kernel's copy and in the UTF-8
/// check; and with many threads the calling thread was busy all the time, reading and
/// pairing, so that more threads did not read faster.
///
/// The calling thread never waits for a read to count what it took: what was read and taken
/// are counters beside the input's lock, not under it, and spent buffers have a lock of
/// their own.
struct Feed<F> {
    input: Mutex<Input<F>>,
    /// chunks read: the next one's number (moved under `input`'s lock)
    sent: AtomicUsize,
    /// results taken (moved by the calling thread alone)
    taken: AtomicUsize,
    /// nothing more is read: the input ended or failed, `apply` wanted no more, or the
    /// calling thread left
    ended: AtomicBool,
    /// what a worker waiting for room holds while it looks; `room` is signalled under it
    /// when a result is taken or the read ends
    waiting: Mutex<()>,
    room: Condvar,
    /// spent buffers of each thread (the calling thread's first)
    pools: Mutex<Vec<Vec<Vec<u8>>>>,
    /// chunks read and not yet taken, at most
    cap: usize,
}

/// What is read under [`Feed`]'s lock.
struct Input<F> {
    read: F,
    error: Option<io::Error>,
}

type Guard<'a, F> = std::sync::MutexGuard<'a, Input<F>>;

/// Ends the read of a [`Feed`] when dropped.
struct EndOnDrop<'a, F>(&'a Feed<F>);

impl<F> Drop for EndOnDrop<'_, F> {
    fn drop(&mut self) {
        self.0.end();
    }
}

impl<F> Feed<F> {
    fn new(read: F, cap: usize, threads: usize) -> Self {
        Feed {
            input: Mutex::new(Input { read, error: None }),
            sent: AtomicUsize::new(0),
            taken: AtomicUsize::new(0),
            ended: AtomicBool::new(false),
            waiting: Mutex::new(()),
            room: Condvar::new(),
            pools: Mutex::new((0..threads).map(|_| Vec::new()).collect()),
            cap: cap.max(1),
        }
    }

    fn input(&self) -> Guard<'_, F> {
        self.input.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn try_input(&self) -> Option<Guard<'_, F>> {
        match self.input.try_lock() {
            Ok(guard) => Some(guard),
            Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    fn ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
    }

    /// Whether another chunk may be read.
    fn has_room(&self) -> bool {
        // `taken` first: it never passes `sent`, which only grows
        let taken = self.taken.load(Ordering::Acquire);
        self.sent.load(Ordering::Acquire) - taken < self.cap
    }

    /// Whether every chunk read has been taken and nothing more will be read.
    fn all_taken(&self, taken: usize) -> bool {
        self.ended() && self.sent.load(Ordering::Acquire) == taken
    }

    /// Ends the read and wakes every worker waiting for room.
    fn end(&self) {
        self.ended.store(true, Ordering::Release);
        let _waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        self.room.notify_all();
    }

    /// Counts a taken result of thread `who`'s, whose buffer `flow` gives back (or ends the
    /// read).
    fn taken(&self, who: usize, flow: ControlFlow<(), Vec<u8>>) {
        match flow {
            ControlFlow::Continue(buf) => {
                let mut pools = self.pools.lock().unwrap_or_else(PoisonError::into_inner);
                pools[who].push(buf);
            }
            ControlFlow::Break(()) => self.end(),
        }
        self.taken.fetch_add(1, Ordering::AcqRel);
        // One chunk's room, for one worker: waking every waiting worker for it (which all
        // then queue for the lock) slows a read with many threads down markedly.
        let _waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        self.room.notify_one();
    }

    /// The read's error, once every chunk read before it has been taken.
    fn error(&self) -> io::Result<()> {
        let mut input = self.input.lock().unwrap_or_else(PoisonError::into_inner);
        match input.error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl<F, J> Feed<F>
where
    F: FnMut(Vec<u8>) -> io::Result<Option<J>>,
{
    /// The next chunk and its number, read by thread `who` under the lock `input`; `None`
    /// when there is no room or the read has ended.
    fn next(&self, who: usize, mut input: Guard<'_, F>) -> Option<(usize, J)> {
        if self.ended() || !self.has_room() {
            return None;
        }
        // Its own spent buffer, else another thread's: a thread that reads more chunks than
        // it parses (the calling thread, which waits for the worker's read) otherwise read
        // into a new buffer, zeroed, its pages faulted in and unmapped again, every time.
        let spent = {
            let mut pools = self.pools.lock().unwrap_or_else(PoisonError::into_inner);
            let own = pools[who].pop();
            own.or_else(|| pools.iter_mut().find_map(Vec::pop))
        };
        let buf = spent.unwrap_or_default();
        let read = std::panic::catch_unwind(AssertUnwindSafe(|| (input.read)(buf)));
        match read {
            Ok(Ok(Some(job))) => {
                let seq = self.sent.load(Ordering::Acquire);
                self.sent.store(seq + 1, Ordering::Release);
                return Some((seq, job));
            }
            Ok(Ok(None)) => {}
            Ok(Err(e)) => input.error = Some(e),
            Err(panic) => {
                drop(input);
                self.end();
                std::panic::resume_unwind(panic);
            }
        }
        drop(input);
        self.end();
        None
    }

    /// The next chunk for worker `who`, waiting for room; `None` once the read has ended.
    fn wait_next(&self, who: usize) -> Option<(usize, J)> {
        loop {
            let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
            while !self.ended() && !self.has_room() {
                waiting = self
                    .room
                    .wait(waiting)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            drop(waiting);
            if self.ended() {
                return None;
            }
            let input = self.input();
            // `None` with the read going on: another thread took the room first
            if let Some(next) = self.next(who, input) {
                return Some(next);
            }
        }
    }
}

/// Worker `who`'s loop: a chunk read and parsed at a time, until the read ends. A panic is
/// reported as a missing result (the calling thread stops waiting), then goes on to the
/// scope's join.
fn work<F, J, D>(
    who: usize,
    mut parse: impl FnMut(J) -> D,
    feed: &Feed<F>,
    done: &SyncSender<(usize, Option<(usize, D)>)>,
) where
    F: FnMut(Vec<u8>) -> io::Result<Option<J>>,
{
    while let Some((seq, job)) = feed.wait_next(who) {
        match std::panic::catch_unwind(AssertUnwindSafe(|| parse(job))) {
            Ok(chunk) => {
                if done.send((seq, Some((who, chunk)))).is_err() {
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
                // No worker left (none could be started, or one failed): the calling thread
                // goes on alone; after a failure, until the missing result holds up the rest.
                Err(TryRecvError::Disconnected) => help()?,
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
                Ok(Some(job)) => out.push(String::from_utf8_lossy(job.data()).into()),
                Ok(None) => return (out, None),
                Err(e) => return (out, Some(e.to_string())),
            }
        }
    }

    /// Every line of every chunk of `reader`, numbered across chunks (a line too long as such,
    /// without its length: the read chunks drop its bytes), then whether the input ended
    /// without a newline, the bytes read and the error.
    fn lines_of_chunks<R: Read>(mut reader: Reader<'_, R>) -> (Vec<String>, bool, u64, String) {
        let (mut out, mut n) = (Vec::new(), 0);
        let error = loop {
            match reader.next(Vec::new()) {
                Ok(Some(job)) => {
                    let base = n;
                    n += for_each_line::<false>(job.data(), job.lead_too_long, false, |k, line| {
                        out.push(match line {
                            Line::TooLong { .. } => format!("{} too long", base + k),
                            Line::Text(t) => format!("{} {t:?}", base + k),
                            other => format!("{} {other:?}", base + k),
                        })
                    });
                }
                Ok(None) => break String::new(),
                Err(e) => break e.to_string(),
            }
        };
        (out, reader.unterminated, reader.bytes, error)
    }

    /// Inputs of short lines, empty lines, lines longer than a chunk and lines too long to
    /// read, ended with or without a newline.
    fn inputs() -> Vec<Vec<u8>> {
        let mut inputs = Vec::new();
        for seed in 0..60u64 {
            let mut state = seed;
            let mut input = Vec::new();
            for _ in 0..seed % 23 {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                match (state >> 33) % 9 {
                    0..5 => input.extend_from_slice(b"a short line\n"),
                    5 => input.push(b'\n'),
                    6 => input.extend(std::iter::repeat_n(b'c', 300)),
                    7 if seed % 5 == 0 => input.extend(std::iter::repeat_n(b'L', LONGEST)),
                    _ => input.extend_from_slice(b"x"),
                }
            }
            inputs.push(input);
        }
        inputs.push([vec![b'L'; LONGEST - 1], b"\nend".to_vec()].concat());
        inputs.push([b"a\n".to_vec(), vec![b'L'; LONGEST + 5]].concat());
        inputs
    }

    #[test]
    fn the_chunks_of_a_mapped_file_give_the_lines_its_read_chunks_give() {
        for input in inputs() {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("input");
            std::fs::write(&path, &input).unwrap();
            for chunk in [16, 100, 4096] {
                let read = lines_of_chunks(Reader::new(&input[..], chunk, None));
                let file = std::fs::File::open(&path).unwrap();
                let mapped = crate::ingest::mapped::small_map(&file);
                assert_eq!(mapped.is_some(), !input.is_empty());
                let from_map =
                    lines_of_chunks(Reader::new(io::empty(), chunk, None).mapped(mapped));
                assert_eq!(from_map, read, "chunks of {chunk}: {} bytes", input.len());
            }
        }
    }

    #[test]
    fn chunks_of_a_file_truncated_while_mapped_end_with_an_error() {
        let bytes: Vec<u8> = b"a line\n".iter().copied().cycle().take(4 << 20).collect();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("input");
        std::fs::write(&path, &bytes).unwrap();
        let mapped = crate::ingest::mapped::small_map(&std::fs::File::open(&path).unwrap());
        let mut reader = Reader::new(io::empty(), 1 << 16, None).mapped(mapped);
        // the first chunk is handed out, then the file is cut, then its lines are read
        let first = reader.next(Vec::new()).unwrap().unwrap();
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(4096).unwrap();
        assert!(first.data().starts_with(b"a line\n"));
        while let Ok(Some(job)) = reader.next(Vec::new()) {
            let _ = job.data().iter().map(|&b| u64::from(b)).sum::<u64>();
        }
        let error = reader.check_mapped().unwrap_err().to_string();
        assert!(error.contains("the file shrank"), "{error}");
    }

    #[test]
    fn what_is_written_after_the_map_is_chunked_after_it_as_one_file() {
        let (before, after) = (&b"one\ntwo\nthr"[..], &b"ee\nfour\nfiv"[..]);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("input");
        std::fs::write(&path, before).unwrap();
        let mapped = crate::ingest::mapped::small_map(&std::fs::File::open(&path).unwrap());
        crate::ingest::mapped::append_to(&path, after);
        let whole = [before, after].concat();
        let read = lines_of_chunks(Reader::new(&whole[..], 4, None));
        let from_map = lines_of_chunks(Reader::new(io::empty(), 4, None).mapped(mapped));
        assert_eq!(from_map, read);
        assert_eq!(read.0.len(), 5);
        assert!(read.1, "ends without a newline");
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

    /// What [`in_order`] gave `apply` (in turn) and returned, for `jobs` chunks read (then
    /// `fail` as a read error), parsed by `parse`, taken until `apply` says stop at `stop`;
    /// run on a thread of its own, so that a hang fails the test instead of stalling it.
    fn run_in_order(
        threads: usize,
        jobs: usize,
        fail: bool,
        stop: Option<usize>,
        parse: fn(usize) -> usize,
    ) -> std::thread::Result<(Vec<usize>, usize, io::Result<()>)> {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let outcome = std::panic::catch_unwind(move || {
                let (mut taken, mut read) = (Vec::new(), 0);
                let result = in_order(
                    threads,
                    |_buf: Vec<u8>| {
                        read += 1;
                        match read {
                            n if n <= jobs => Ok(Some(n)),
                            _ if fail => Err(io::Error::other("broken")),
                            _ => Ok(None),
                        }
                    },
                    || parse,
                    |done: usize| {
                        taken.push(done);
                        match stop {
                            Some(at) if taken.len() == at => ControlFlow::Break(()),
                            _ => ControlFlow::Continue(Vec::new()),
                        }
                    },
                );
                (taken, read, result)
            });
            let _ = tx.send(outcome);
        });
        rx.recv_timeout(std::time::Duration::from_secs(60))
            .expect("in_order returned")
    }

    /// A parse that takes longer for some chunks than for others, so that results come back
    /// out of order.
    fn uneven(n: usize) -> usize {
        if n.is_multiple_of(3) {
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        n * 10
    }

    #[test]
    fn results_are_taken_in_the_order_read_with_any_number_of_threads() {
        for threads in [1, 2, 3, 8, 20] {
            let (taken, _, result) = run_in_order(threads, 300, false, None, uneven).unwrap();
            let want: Vec<usize> = (1..=300).map(|n| n * 10).collect();
            assert_eq!(taken, want, "{threads} threads");
            assert!(result.is_ok());
        }
    }

    #[test]
    fn a_read_error_comes_after_every_chunk_read_before_it() {
        for threads in [2, 8] {
            let (taken, _, result) = run_in_order(threads, 50, true, None, uneven).unwrap();
            assert_eq!(taken.len(), 50, "{threads} threads");
            assert_eq!(result.unwrap_err().to_string(), "broken");
        }
    }

    #[test]
    fn a_stop_asked_by_apply_ends_the_read_within_the_chunks_out() {
        for threads in [2, 8] {
            let (taken, read, result) =
                run_in_order(threads, 10_000, false, Some(3), uneven).unwrap();
            assert!(result.is_ok());
            assert_eq!(&taken[..3], &[10, 20, 30]);
            // reads after the stop: at most one a thread, already under way
            assert!(
                read <= 3 + in_flight(threads) + threads,
                "{read} chunks read with {threads} threads"
            );
        }
    }

    #[test]
    fn a_worker_that_panics_ends_the_read_with_its_panic_not_a_hang() {
        fn panics_at_7(n: usize) -> usize {
            assert!(n != 7, "chunk 7");
            uneven(n)
        }
        for threads in [2, 3, 8] {
            let outcome = run_in_order(threads, 10_000, false, None, panics_at_7);
            assert!(
                outcome.is_err(),
                "{threads} threads: the panic went missing"
            );
        }
    }

    #[test]
    fn in_flight_chunks_grow_with_threads_up_to_a_bound() {
        assert_eq!(in_flight(0), IN_FLIGHT);
        assert_eq!(in_flight(2), 2 * IN_FLIGHT);
        assert_eq!(in_flight(4), MOST_IN_FLIGHT);
        assert_eq!(in_flight(64), MOST_IN_FLIGHT);
    }
}
