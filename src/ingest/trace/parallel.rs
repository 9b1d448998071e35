//! Reading a line format on several cores, with the result of the serial reader, bit for bit.
//!
//! One core parses perf script, ftrace, babeltrace2 text and JSON lines at a few hundred MB/s;
//! users' traces are gigabytes. The input is cut into chunks of whole lines (a chunk ends at
//! its last newline; the rest of the line begins the next chunk), the chunks are parsed on
//! worker threads into compact records, and the calling thread, which also reads the input,
//! takes the records chunk by chunk in the input's order through the same pairing engine
//! ([`Pairer::event_masked`]) as the serial reader. What depends on the order of lines is
//! kept on the calling thread:
//! - pairing, the `--by` series and their labels (in the order of first use);
//! - line numbers: a worker numbers lines within its chunk, the calling thread adds the lines
//!   of the chunks before it (so every `file:line` is the serial reader's);
//! - events stamped before the event before them: counted within a chunk by its worker, and
//!   across the boundary from the last stamp of the chunk before;
//! - the event names kept for suggestions: each chunk lists its names in the order they first
//!   appear, and they are noted before its events;
//! - babeltrace2's time-of-day stamps, which are unwrapped at midnight from the stamp before:
//!   after a chunk's first stamp, its stamps move by the whole days the chunk before ends on
//!   ([`Babeltrace::continued`]); a chunk mixing time-of-day and other stamps is read again,
//!   serially, on the calling thread;
//! - `--strict`: pairing stops at the first malformed line, as the serial reader does.
//!
//! A record is kept only for an event some rule names, with copies of the fields the rules
//! read ([`Pairer::fields_read`]): the pairing thread neither parses nor searches a line.
//! `--threads N` is N threads in all: the calling thread and N - 1 workers. Chunks go out
//! numbered on one queue that any worker takes from, and come back on one queue, put in order
//! by their numbers; while the next chunk in order is not back, the calling thread parses the
//! chunks still queued itself instead of waiting. On 2 cores, N workers beside a calling
//! thread that reads and pairs (a quarter of the work) were 3 threads on 2 cores, dealt chunks
//! in turn: a worker the scheduler left out held up the rest, and `--threads 2` read perf text
//! 1.53× to 1.75× as fast as one thread (runs of one day); now 1.75× to 1.80× (see the README).
//! At most [`IN_FLIGHT`] chunks per thread are read and not yet paired, so memory is that many
//! chunks (of [`CHUNK`], plus the end of a line carried over) and their records. std's
//! threads, a mutex around the queue's receiving end (taken once per chunk) and
//! bounded channels are enough for this: one producer, one consumer, and work that needs no
//! other work.

use std::cell::Cell;
use std::io::{self, Read};
use std::panic::AssertUnwindSafe;
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, sync_channel};
use std::sync::{Mutex, PoisonError};

use rustc_hash::{FxHashMap, FxHashSet};

use super::babeltrace::Babeltrace;
use super::read::{Lines, TOO_LONG, note_malformed};
use super::rules::{MAX_NAMES, NameMatcher, Pairer};
use super::{EventView, Format, InLine, Parsed};
use crate::ingest::lines::{DEFAULT_BUFFER, Line, trim_cr, trim_cr_str};
use crate::ingest::{Cancel, Location, ReadSummary};
use crate::span::SpanSink;

/// Bytes of input per chunk (a chunk ends at the last newline of this many): chunks of 256 KiB
/// read 3-5% faster than chunks of 1 MiB with 2 threads on 2 cores (the records and text a
/// chunk leaves for the pairing thread are still in the shared cache when it takes them).
pub const CHUNK: usize = 256 << 10;

/// Chunks per worker read and not yet paired: enough that a thread the scheduler leaves out
/// for a few time slices (a shared machine) does not stop the others at once.
pub const IN_FLIGHT: usize = 4;

/// A line this long or longer (without its newline) is skipped, as the serial reader's
/// buffer skips it ([`Line::TooLong`]).
const LONGEST: usize = DEFAULT_BUFFER;

/// Distinct names a worker keeps with their masks (beyond, masks are computed per event).
const CACHED_NAMES: usize = 1 << 14;

/// Whether `format` is read in parallel: the line formats whose lines parse alone (CSV needs
/// its header, strace and perf trace pair lines of a call as they are read).
pub fn reads(format: Format) -> bool {
    matches!(
        format,
        Format::Perf | Format::Ftrace | Format::Babeltrace | Format::JsonLines
    )
}

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
    /// Chunks of about `chunk` bytes of `inner`; the read stops when `cancel` is raised.
    pub fn new(inner: R, chunk: usize, cancel: Option<&'c Cancel>) -> Self {
        Reader {
            inner,
            chunk: chunk.max(1),
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
/// UTF-8 (a reader of bytes, as the WAYLAND_DEBUG one, skips the check).
#[inline]
pub(crate) fn for_each_line<const UTF8: bool>(
    data: &[u8],
    lead_too_long: bool,
    mut f: impl FnMut(u64, Line<'_>),
) -> u64 {
    // A chunk of UTF-8 (the usual) is checked at once; its lines are then given as text.
    let text = if UTF8 {
        std::str::from_utf8(data).ok()
    } else {
        None
    };
    let line = |start: usize, end: usize| -> Line<'_> {
        if end - start >= LONGEST {
            return Line::TooLong {
                len: (end - start) as u64,
            };
        }
        match text {
            Some(text) => Line::Str(trim_cr_str(&text[start..end])),
            None => Line::Text(trim_cr(&data[start..end])),
        }
    };
    let mut n = 0;
    if lead_too_long {
        n += 1;
        f(n, Line::TooLong { len: 0 });
    }
    let mut start = 0;
    for nl in memchr::memchr_iter(b'\n', data) {
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

/// An event a rule names: where its name and fields lie in [`Chunk::text`].
#[derive(Debug, Clone, Copy)]
struct Record {
    /// line within the chunk, from 1
    line: u64,
    ts_ns: u64,
    mask: u64,
    name: (u32, u32),
}

/// No value: the event lacks the field.
const ABSENT: (u32, u32) = (u32::MAX, u32::MAX);

/// What a worker made of a chunk.
#[derive(Debug, Default)]
struct Chunk {
    lines: u64,
    events: u64,
    skipped: u64,
    malformed: u64,
    not_utf8: u64,
    /// the first line that was not an event (a line too long included), and why
    first_malformed: Option<(u64, &'static str)>,
    /// the first line that failed to parse (what `--strict` stops at)
    first_bad: Option<(u64, &'static str)>,
    backwards: u64,
    first_backwards: Option<u64>,
    /// the first event's stamp and line, the last event's stamp
    first_ts: Option<(u64, u64)>,
    last_ts: Option<u64>,
    /// names in the order they first appear in the chunk (line, range of `text`)
    names: Vec<(u64, (u32, u32))>,
    text: String,
    records: Vec<Record>,
    /// per record, one value per wanted field
    values: Vec<(u32, u32)>,
    /// babeltrace2's clock as the chunk left it, started afresh
    clock: Babeltrace,
    /// the worker could not make records (too much text): the chunk is read serially
    serial: bool,
}

impl Chunk {
    fn note_malformed(&mut self, line: u64, reason: &'static str) {
        self.malformed += 1;
        self.first_malformed.get_or_insert((line, reason));
    }

    /// Appends `text`; `None` past what a `u32` offset holds.
    fn push(&mut self, text: &str) -> Option<(u32, u32)> {
        let start = u32::try_from(self.text.len()).ok()?;
        let end = u32::try_from(self.text.len() + text.len()).ok()?;
        self.text.push_str(text);
        Some((start, end))
    }
}

/// A parsed chunk, with its buffer for the next read.
struct Done {
    job: Job,
    chunk: Chunk,
}

/// A worker: one chunk at a time into records.
struct Worker<'a> {
    state: super::read::LineState<'a>,
    names: Names<'a>,
}

/// Which names rules name, and which a chunk lists.
struct Names<'a> {
    matcher: &'a NameMatcher,
    /// masks and fields read ([`NameMatcher::fields`]) by name, with the last chunk each
    /// name was listed in
    cache: FxHashMap<Box<str>, (u64, u64, u64)>,
    /// names beyond the cache listed in this chunk
    listed: FxHashSet<Box<str>>,
    seq: u64,
}

impl<'a> Worker<'a> {
    fn chunk(&mut self, job: Job) -> Done {
        self.names.seq += 1;
        self.names.listed.clear();
        self.state.babeltrace = Babeltrace::default();
        self.state.last_ts = None;
        let mut chunk = Chunk::default();
        let lines = for_each_line::<true>(&job.buf[..job.len], job.lead_too_long, |n, line| {
            if !chunk.serial {
                self.line(&mut chunk, n, line);
            }
        });
        chunk.lines = lines;
        chunk.clock = std::mem::take(&mut self.state.babeltrace);
        Done { job, chunk }
    }

    fn line(&mut self, chunk: &mut Chunk, n: u64, line: Line<'_>) {
        let text = match line {
            Line::Str(text) => text,
            Line::Text(bytes) => match std::str::from_utf8(bytes) {
                Ok(text) => text,
                Err(_) => {
                    chunk.not_utf8 += 1;
                    return;
                }
            },
            Line::TooLong { .. } => {
                chunk.note_malformed(n, TOO_LONG);
                return;
            }
        };
        match self.state.parse(text) {
            Parsed::Skip => chunk.skipped += 1,
            Parsed::Malformed(reason) => {
                chunk.note_malformed(n, reason);
                chunk.first_bad.get_or_insert((n, reason));
            }
            Parsed::Event => self.event(chunk, n, text),
        }
    }

    fn event(&mut self, chunk: &mut Chunk, n: u64, text: &str) {
        chunk.events += 1;
        let ts = self.state.ev.ts_ns;
        match chunk.last_ts {
            None => chunk.first_ts = Some((ts, n)),
            Some(last) if ts < last => {
                chunk.backwards += 1;
                chunk.first_backwards.get_or_insert(n);
            }
            Some(_) => {}
        }
        chunk.last_ts = Some(ts);
        let view = InLine {
            line: self.state.line(text),
            ev: &self.state.ev,
        };
        let name = view.name();
        let (mask, need) = self.names.mask(chunk, n, name);
        if mask == 0 {
            return;
        }
        if record(chunk, &view, n, (mask, need), &self.state.wanted).is_none() {
            chunk.serial = true;
        }
    }
}

impl Names<'_> {
    /// The mask of `name` and the fields its events may be asked, listing the name in the
    /// chunk the first time it appears there.
    fn mask(&mut self, chunk: &mut Chunk, n: u64, name: &str) -> (u64, u64) {
        let found = match self.cache.get_mut(name) {
            Some((mask, need, seen)) => {
                if *seen == self.seq {
                    return (*mask, *need);
                }
                *seen = self.seq;
                (*mask, *need)
            }
            None => {
                let mask = self.matcher.mask(name);
                let found = (mask, self.matcher.fields(mask));
                if self.cache.len() < CACHED_NAMES {
                    self.cache.insert(name.into(), (found.0, found.1, self.seq));
                } else if self.listed.len() >= MAX_NAMES || !self.listed.insert(name.into()) {
                    return found;
                }
                found
            }
        };
        if chunk.names.len() < MAX_NAMES {
            match chunk.push(name) {
                Some(range) => chunk.names.push((n, range)),
                None => chunk.serial = true,
            }
        }
        found
    }
}

/// The record of an event a rule names: its name and the values of the wanted fields.
fn record(
    chunk: &mut Chunk,
    view: &InLine<'_>,
    n: u64,
    (mask, need): (u64, u64),
    wanted: &[String],
) -> Option<()> {
    let name = chunk.push(view.name())?;
    for (j, field) in wanted.iter().enumerate() {
        let asked = j >= 64 || need >> j & 1 == 1;
        let value = match asked.then(|| view.field(field)).flatten() {
            Some(v) => chunk.push(v)?,
            None => ABSENT,
        };
        chunk.values.push(value);
    }
    chunk.records.push(Record {
        line: n,
        ts_ns: view.ev.ts_ns,
        mask,
        name,
    });
    Some(())
}

/// A record as the pairer reads it.
struct RecordView<'a> {
    chunk: &'a Chunk,
    record: &'a Record,
    values: &'a [(u32, u32)],
    wanted: &'a [String],
    shift: u64,
}

impl EventView for RecordView<'_> {
    fn ts_ns(&self) -> u64 {
        self.record.ts_ns + self.shift
    }

    fn name(&self) -> &str {
        let (a, b) = self.record.name;
        &self.chunk.text[a as usize..b as usize]
    }

    fn field(&self, name: &str) -> Option<&str> {
        let i = self.wanted.iter().position(|w| super::same(w, name))?;
        match self.values[i] {
            ABSENT => None,
            (a, b) => Some(&self.chunk.text[a as usize..b as usize]),
        }
    }
}

/// Reads every chunk of `reader` on `threads` threads in all (the calling thread and
/// `threads - 1` workers) into `lines`' statistics and `pairer`, in the input's order. See the
/// module docs.
pub(super) fn read<R: Read>(
    mut reader: Reader<'_, R>,
    threads: usize,
    lines: &mut Lines<'_>,
    pairer: &mut Pairer,
    sink: &mut impl SpanSink,
    mut progress: impl FnMut(u64),
) -> io::Result<ReadSummary> {
    let matcher = pairer.matcher();
    let (format, columns) = (lines.state.format, lines.state.columns);
    let wanted = lines.state.wanted.clone();
    let parser = || {
        let mut worker = Worker {
            state: super::read::LineState::new(format, columns, wanted.clone()),
            names: Names {
                matcher: &matcher,
                cache: FxHashMap::default(),
                listed: FxHashSet::default(),
                seq: 0,
            },
        };
        move |job| worker.chunk(job)
    };
    let mut collect = Collect {
        lines,
        pairer,
        sink,
        total: 0,
    };
    // After `--strict`'s first malformed line the rest is read, not parsed.
    let failed = Cell::new(false);
    let read = |mut buf| loop {
        match reader.next(buf)? {
            Some(job) if failed.get() => buf = job.buf,
            next => {
                progress(reader.bytes);
                return Ok(next);
            }
        }
    };
    let apply = |done| {
        let buf = collect.take(done);
        failed.set(collect.lines.failure.is_some());
        buf
    };
    in_order(threads, read, parser, apply)?;
    Ok(ReadSummary {
        lines: collect.total,
        bytes: reader.bytes,
        unterminated_last_line: reader.unterminated,
        cancelled: reader.cancelled,
    })
}

/// What the three parallel readers share: the chunks `read` gives (into a spent buffer, to
/// reuse) are parsed on `threads` threads in all, each with a parser of its own from
/// `parser`, and `apply` takes the results in the order read and gives back their buffers.
/// See the module docs: one queue of chunks that any worker takes, one of results put back in
/// order by number ([`InOrder`]), the calling thread parsing queued chunks while it would
/// wait, at most [`IN_FLIGHT`] chunks per thread out. A read error comes after every chunk
/// read before it was applied.
pub(crate) fn in_order<J, D, P>(
    threads: usize,
    mut read: impl FnMut(Vec<u8>) -> io::Result<Option<J>>,
    parser: impl Fn() -> P,
    mut apply: impl FnMut(D) -> Vec<u8>,
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
                pool.push(apply(done));
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
            apply(done);
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

/// The calling thread's side: chunks taken in order.
struct Collect<'l, 'r, 'p, 's, S> {
    lines: &'l mut Lines<'r>,
    pairer: &'p mut Pairer,
    sink: &'s mut S,
    /// lines of the chunks taken
    total: u64,
}

impl<S: SpanSink> Collect<'_, '_, '_, '_, S> {
    /// Takes the next chunk; returns its buffer.
    fn take(&mut self, done: Done) -> Vec<u8> {
        self.total += apply(self.lines, &done, self.total, self.pairer, self.sink);
        done.job.buf
    }
}

/// Takes a parsed chunk whose first line is line `before + 1`; returns its lines.
fn apply(
    lines: &mut Lines<'_>,
    done: &Done,
    before: u64,
    pairer: &mut Pairer,
    sink: &mut impl SpanSink,
) -> u64 {
    let chunk = &done.chunk;
    if lines.failure.is_some() {
        return chunk.lines;
    }
    let mixed = chunk.clock.first_of_day().is_some() && chunk.clock.other_stamps() > 0;
    if chunk.serial || mixed {
        let data = &done.job.buf[..done.job.len];
        return for_each_line::<true>(data, done.job.lead_too_long, |n, line| {
            lines.line(before + n, line, pairer, sink)
        });
    }
    let (shift, clock) = chunk.clock.continued(lines.state.babeltrace.clock());
    lines.state.babeltrace.set_clock(clock);
    count(lines, chunk, before, shift);
    // --strict: nothing after the first malformed line is paired.
    let stop = chunk.first_bad.filter(|_| lines.strict);
    let before_stop = |n: u64| stop.is_none_or(|(bad, _)| n < bad);
    let names = chunk.names.iter().take_while(|(n, _)| before_stop(*n));
    pairer.note_names(names.map(|(_, (a, b))| &chunk.text[*a as usize..*b as usize]));
    let width = lines.state.wanted.len();
    for (i, record) in chunk.records.iter().enumerate() {
        if !before_stop(record.line) {
            break;
        }
        let view = RecordView {
            chunk,
            record,
            values: &chunk.values[i * width..(i + 1) * width],
            wanted: &lines.state.wanted,
            shift,
        };
        pairer.event_masked(&view, record.mask, before + record.line, sink);
    }
    if let Some((bad, reason)) = stop {
        lines.failure = Some(lines.malformed(before + bad, reason));
    }
    chunk.lines
}

/// Adds a chunk's counts to the statistics, with the events stamped before the event
/// before them across the chunk's first line.
fn count(lines: &mut Lines<'_>, chunk: &Chunk, before: u64, shift: u64) {
    let file = lines.file;
    let stats = &mut lines.stats;
    stats.events += chunk.events;
    stats.skipped += chunk.skipped;
    stats.not_utf8 += chunk.not_utf8;
    if let Some((n, reason)) = chunk.first_malformed {
        note_malformed(stats, file, before + n, reason);
        stats.malformed += chunk.malformed - 1;
    }
    let at = |n: u64| Location {
        file: file.to_string(),
        line: before + n,
    };
    if let Some((ts, n)) = chunk.first_ts
        && lines.state.last_ts.is_some_and(|last| ts + shift < last)
    {
        stats.backwards += 1;
        stats.first_backwards.get_or_insert_with(|| at(n));
    }
    stats.backwards += chunk.backwards;
    if let Some(n) = chunk.first_backwards {
        stats.first_backwards.get_or_insert_with(|| at(n));
    }
    if let Some(last) = chunk.last_ts {
        lines.state.last_ts = Some(last + shift);
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
