//! Reading one input on several cores, in its order: the engine the parallel readers share
//! (the trace line formats in [`crate::ingest::trace::parallel`], Chrome JSON in
//! [`crate::ingest::trace::parallel_chrome`], WAYLAND_DEBUG logs in `ingest::wayland`).
//!
//! The input is cut into chunks (of whole lines: [`Reader`](crate::ingest::reader::Reader)); each chunk is read and parsed by
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
//! is that many chunks (of [`CHUNK`](crate::ingest::reader::CHUNK), plus the end of a line carried over) and their results.
//! std's threads, mutexes, a condition variable and a bounded channel are enough for this:
//! the locks are taken once per chunk, and the work needs no other work.

use std::io;
use std::ops::ControlFlow;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, sync_channel};
use std::sync::{Condvar, Mutex, PoisonError, TryLockError};

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
