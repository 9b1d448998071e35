//! WAYLAND_DEBUG logs on several cores, with the result of the serial reader, bit for bit.
//!
//! A line parses alone ([`line::parse_line`]: a large part of the reading); what depends on the
//! order of lines does not: the clock (the 32-bit microsecond counter's wraps, midnight), the
//! objects and their spans ([`SpanTracker`](super::spans::SpanTracker)), the examples of
//! malformed lines and `--strict`'s stop. So the log is cut into chunks of whole lines as the
//! trace reader cuts its line formats ([`crate::ingest::chunks`]: the same reader, queues and
//! order, N threads in all, the calling thread parsing queued chunks while it would wait); a
//! worker parses a chunk's lines into records of what each message means to the span rules
//! ([`Meaning`]: its kind, object, side, the objects it creates, the arguments its rule reads:
//! all the rules read of it), and the calling thread takes the records in the log's order
//! through the serial reader's own steps ([`FileState`]). (Records that held where each part of
//! the message lay in the chunk made the calling thread read the parts again: two threads did
//! far more work than one.)
//!
//! The worker also unwraps the chunk's stamps itself, from the chunk's first ([`Local`]): a
//! step of the clock depends on two stamps alone, so the calling thread only adds what its
//! clock makes of the chunk's first stamp ([`Clock::follow`](super::clock::Clock::follow)), or
//! reads the chunk line by line where that would not be exact (a change of stamp format, a
//! clock near its bound). A message no rule reads and that creates nothing then needs no
//! record at all (a good share of a usual log). Records that carried their raw stamp for the
//! calling thread to unwrap put that work on the thread that pairs, the one that bounds a
//! parallel read.
//!
//! A record is 16 bytes: the meaning packed ([`Packed`], 12 bytes for the shapes almost every
//! message has) and its time in microseconds after the chunk's first record's, in 32 bits; a
//! message of another shape, or a time those bits cannot hold, is kept whole on a side list.
//! Larger records, written on one core and read on the other, cost more than their
//! instructions: two threads take less CPU time with the small ones, though they run more
//! instructions to pack them.

use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};

use super::FileState;
use super::clock::{self, Local};
use super::line::{self, Malformed, Parsed};
use super::spans::{Meaning, Packed};
use crate::ingest::chunks::{Spares, in_order};
use crate::ingest::lines::{Line, ReadResult};
use crate::ingest::reader::{Job, Reader, for_each_line};
use crate::span::SpanSink;

/// What a line was to the calling thread, in the chunk's order: 16 bytes.
#[derive(Debug, Clone, Copy)]
struct Record {
    /// the message's time, in microseconds after the chunk's first record's ([`Local`])
    after: u32,
    what: What,
}

#[derive(Debug, Clone, Copy)]
enum What {
    /// a message the span rules read, all they read of it
    Message(Packed),
    /// the `n`-th of the chunk's [`Chunk::wide`] messages (a meaning that does not pack, or a
    /// time that does not fit `after`)
    Wide(u32),
    /// the `n`-th of the chunk's [`Chunk::malformed`] lines
    Malformed(u32),
}

/// What a worker made of a chunk.
#[derive(Debug, Default)]
struct Chunk {
    lines: u64,
    messages: u64,
    zombies: u64,
    skipped: u64,
    too_long: u64,
    /// the stamps of every message and zombie line, unwrapped from the chunk's first
    clock: Local,
    /// the time `after` counts from: the first record's, in the chunk's own microseconds
    base: Option<i64>,
    records: Vec<Record>,
    /// messages whose meaning or time does not pack: each with its time, in the chunk's own
    /// microseconds (one in a few thousand in the committed logs)
    wide: Vec<(i64, Meaning)>,
    /// malformed lines, each with its number within the chunk
    malformed: Vec<(u64, Malformed)>,
    /// no records: the chunk is read serially on the calling thread (more records than
    /// [`SHORTEST_LINE`] allows, or stamps [`Local`] cannot unwrap alone)
    serial: bool,
}

/// The average line length below which a chunk's records are not kept (a record is 16
/// bytes, with 56 more for a wide one; the committed WAYLAND_DEBUG logs average 48 to 58
/// bytes a line): records stay within 3 times the chunk's bytes, and a chunk of shorter
/// lines is read serially.
const SHORTEST_LINE: usize = 24;

impl Chunk {
    /// An empty chunk with the memory of `used`'s list.
    fn reused(mut used: Chunk) -> Chunk {
        used.records.clear();
        used.wide.clear();
        used.malformed.clear();
        Chunk {
            records: used.records,
            wide: used.wide,
            malformed: used.malformed,
            ..Chunk::default()
        }
    }

    /// Takes line `n`, as the serial reader takes it.
    #[inline(always)]
    fn text(&mut self, n: u64, text: &[u8], scratch: &mut Vec<u8>) {
        // A known message's meaning (packed) and the usual layout's message straight to a record
        // (through `Parsed`, the message was built twice, on every line).
        if let Some(head) = line::usual_head(text) {
            if let Some(packed) = Packed::of_usual(&text[head.body..], head.sent) {
                let now = self.stamped(head.stamp);
                if packed.matters() {
                    self.record(now, packed);
                }
                return;
            }
            if let Some(msg) = line::usual_body(text, head) {
                return self.message(&msg);
            }
        }
        match line::parse_line(text, scratch) {
            Parsed::Message(msg) => self.message(&msg),
            Parsed::Zombie(stamp) => {
                self.zombies += 1;
                self.clock.micros(stamp);
            }
            Parsed::Other => self.skipped += 1,
            Parsed::Malformed(reason) => self.push_malformed(n, reason),
        }
    }

    /// Takes a message line's stamp and meaning: a record when a span rule reads it.
    #[inline(always)]
    fn message(&mut self, msg: &line::Message<'_>) {
        self.meaning(msg.stamp, Meaning::of(msg));
    }

    /// Takes a message line's stamp and what its message means.
    #[inline(always)]
    fn meaning(&mut self, stamp: line::Stamp, meaning: Meaning) {
        let now = self.stamped(stamp);
        if !meaning.matters() {
            return;
        }
        match meaning.packed() {
            Some(packed) => self.record(now, packed),
            None => self.push_wide(now, meaning),
        }
    }

    /// Counts a message stamped `stamp`: its time on the chunk's clock.
    #[inline(always)]
    fn stamped(&mut self, stamp: line::Stamp) -> i64 {
        self.messages += 1;
        self.clock.micros(stamp)
    }

    /// Records a message the span rules read, which means `packed`, at `now`.
    #[inline(always)]
    fn record(&mut self, now: i64, packed: Packed) {
        let base = *self.base.get_or_insert(now);
        match u32::try_from(now.wrapping_sub(base)) {
            Ok(after) => self.records.push(Record {
                after,
                what: What::Message(packed),
            }),
            Err(_) => self.push_wide(now, packed.meaning()),
        }
    }

    #[cold]
    #[inline(never)]
    fn push_wide(&mut self, now: i64, meaning: Meaning) {
        let n = index(self.wide.len());
        self.wide.push((now, meaning));
        self.records.push(Record {
            after: 0,
            what: What::Wide(n),
        });
    }

    #[cold]
    fn push_malformed(&mut self, number: u64, reason: Malformed) {
        let n = index(self.malformed.len());
        self.malformed.push((number, reason));
        self.records.push(Record {
            after: 0,
            what: What::Malformed(n),
        });
    }
}

/// Parses a chunk's lines into records, in the list of a spare chunk when there is one.
fn parse(job: Job, spare: &Spares<Chunk>) -> (Job, Chunk) {
    let mut chunk = spare.take().map_or_else(Chunk::default, Chunk::reused);
    let mut scratch = Vec::new();
    let data = job.data();
    let most = (data.len() / SHORTEST_LINE + 16).min(u32::MAX as usize);
    chunk.lines = for_each_line::<false>(data, job.lead, false, |n, line| {
        if chunk.serial {
            return;
        }
        let text = match line {
            Line::Text(text) => text,
            Line::Str(text) | Line::Plain(text) => text.as_bytes(),
            Line::TooLong { .. } => {
                chunk.too_long += 1;
                return;
            }
        };
        chunk.text(n, text, &mut scratch);
        if chunk.records.len() >= most {
            chunk.serial = true;
        }
    });
    if chunk.serial {
        chunk.records = Vec::new();
        chunk.wide = Vec::new();
        chunk.malformed = Vec::new();
    }
    (job, chunk)
}

/// A position in a chunk's side list, which is no longer than its records: fewer than
/// [`parse`]'s `most`, which is below 2^32.
fn index(len: usize) -> u32 {
    len as u32
}

/// Takes a parsed chunk whose first line is line `before + 1`, as the serial reader takes
/// its lines; returns how many lines it held.
fn take(
    state: &mut FileState<'_>,
    (job, chunk): &(Job, Chunk),
    before: u64,
    sink: &mut impl SpanSink,
) -> u64 {
    // (after `--strict`'s malformed line, the chunks already read are not counted)
    if state.error.is_some() {
        return chunk.lines;
    }
    let data = job.data();
    // --strict: a chunk to stop in is read line by line, as the serial reader reads it, so
    // its counts run to the malformed line, not past it.
    let stop = state.strict && !chunk.malformed.is_empty();
    let offset = match chunk.serial || stop {
        false => state.clock.follow(&chunk.clock),
        true => None,
    };
    // A chunk without stamps moves no clock.
    let offset = match (offset, chunk.messages + chunk.zombies) {
        (Some(offset), _) => offset,
        (None, 0) if !chunk.serial && !stop => 0,
        (None, _) => {
            return for_each_line::<false>(data, job.lead, false, |n, line| {
                state.line(before + n, line, sink);
            });
        }
    };
    let base = offset + chunk.base.unwrap_or(0);
    for record in &chunk.records {
        match record.what {
            What::Message(packed) => {
                let ts = clock::in_nanos(base + i64::from(record.after));
                state.tracker.message_meaning(&packed.meaning(), ts, sink);
            }
            What::Wide(n) => {
                let (now, meaning) = &chunk.wide[n as usize];
                let ts = clock::in_nanos(offset + now);
                state.tracker.message_meaning(meaning, ts, sink);
            }
            What::Malformed(n) => {
                let (number, reason) = chunk.malformed[n as usize];
                state.malformed(before + number, reason);
            }
        }
    }
    state.stats.messages += chunk.messages;
    state.stats.zombies += chunk.zombies;
    state.stats.skipped += chunk.skipped;
    state.stats.too_long += chunk.too_long;
    chunk.lines
}

/// Reads the chunks of `reader` on `threads` threads in all into `state` and `sink`.
pub(super) fn read(
    mut reader: Reader<'_, impl Read + Send>,
    threads: usize,
    state: &mut FileState<'_>,
    sink: &mut impl SpanSink,
    mut progress: impl FnMut(u64),
) -> ReadResult {
    let mut total = 0u64;
    // bytes read, given to `progress` as chunks are taken (the workers read)
    let read_bytes = AtomicU64::new(0);
    let read = |buf| {
        let job = reader.next(buf)?;
        read_bytes.store(reader.bytes, Ordering::Relaxed);
        Ok(job)
    };
    let spare = Spares::new(threads);
    let apply = |done: (Job, Chunk)| {
        progress(read_bytes.load(Ordering::Relaxed));
        total += take(state, &done, total, sink);
        let (job, chunk) = done;
        job.taken();
        if !chunk.serial {
            spare.give(chunk);
        }
        // After `--strict`'s first malformed line nothing more is read.
        match state.error {
            Some(_) => std::ops::ControlFlow::Break(()),
            None => std::ops::ControlFlow::Continue(job.buf),
        }
    };
    let ended = in_order(threads, read, || |job| parse(job, &spare), apply);
    progress(reader.bytes);
    reader.finish(total, ended)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_the_size_its_memory_bound_is_worked_out_for() {
        // SHORTEST_LINE's bound (records within 3 times a chunk's bytes) counts 16 bytes a
        // record and 56 more for a wide one.
        assert_eq!(std::mem::size_of::<Record>(), 16);
        assert!(std::mem::size_of::<(i64, Meaning)>() <= 56);
        assert!(std::mem::size_of::<(u64, Malformed)>() <= 56);
    }
}
