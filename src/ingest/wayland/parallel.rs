//! WAYLAND_DEBUG logs on several cores, with the result of the serial reader, bit for bit.
//!
//! A line parses alone ([`line::parse_line`]: half of the reading time); what depends on the
//! order of lines does not: the clock (the 32-bit microsecond counter's wraps, midnight), the
//! objects and their spans ([`SpanTracker`](super::spans::SpanTracker)), the examples of
//! malformed lines and `--strict`'s stop. So the log is cut into chunks of whole lines as the
//! trace reader cuts its line formats ([`crate::ingest::chunks`]: the same reader, queues and
//! order, N threads in all, the calling thread parsing queued chunks while it would wait); a
//! worker parses a chunk's lines into records of each message's stamp and what it means to the
//! span rules ([`Meaning`]: its kind, object, side, the objects it creates, the arguments its
//! rule reads: all the rules read of it), and the calling thread takes the records in the log's
//! order through the serial reader's own steps ([`FileState`]). (The records held where each
//! part of the message lay in the chunk before, 104 bytes each, and the calling thread read the
//! parts again: two threads did 16% more instructions than one.)

use std::io::{self, Read};
use std::sync::atomic::{AtomicU64, Ordering};

use super::FileState;
use super::line::{self, Malformed, Parsed, Stamp};
use super::spans::Meaning;
use crate::ingest::chunks::{Job, Reader, Spares, for_each_line, in_order};
use crate::ingest::lines::Line;
use crate::ingest::{Cancel, ReadSummary};
use crate::span::SpanSink;

/// What a line was, with its number within the chunk.
#[derive(Debug, Clone, Copy)]
struct Record {
    line: u64,
    what: What,
}

#[derive(Debug, Clone, Copy)]
enum What {
    /// a message: its stamp and all the span rules read of it
    Message(Stamp, Meaning),
    Zombie(Stamp),
    Malformed(Malformed),
}

/// What a worker made of a chunk.
#[derive(Debug, Default)]
struct Chunk {
    lines: u64,
    skipped: u64,
    too_long: u64,
    records: Vec<Record>,
    /// no records: the chunk is read serially on the calling thread (more records than
    /// [`SHORTEST_LINE`] allows)
    serial: bool,
}

/// The average line length below which a chunk's records are not kept (a record is 72
/// bytes; the committed WAYLAND_DEBUG logs average 48 to 58 bytes a line, so records take
/// about 1.4 times a chunk's bytes): records stay within 3 times the chunk's bytes, and a
/// chunk of shorter lines is read serially.
const SHORTEST_LINE: usize = 24;

impl Chunk {
    /// An empty chunk with the memory of `used`'s list.
    fn reused(mut used: Chunk) -> Chunk {
        used.records.clear();
        Chunk {
            records: used.records,
            ..Chunk::default()
        }
    }
}

/// Parses a chunk's lines into records, in the list of a spare chunk when there is one.
fn parse(job: Job, spare: &Spares<Chunk>) -> (Job, Chunk) {
    let mut chunk = spare.take().map_or_else(Chunk::default, Chunk::reused);
    let mut scratch = Vec::new();
    let data = &job.buf[..job.len];
    let most = data.len() / SHORTEST_LINE + 16;
    chunk.lines = for_each_line::<false>(data, job.lead_too_long, false, |n, line| {
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
        // The usual layout's message straight to its record, as the serial reader takes it
        // (through `Parsed` it was built twice: 43 instructions a line more).
        let what = match line::usual(text) {
            Some(msg) => What::Message(msg.stamp, Meaning::of(&msg)),
            None => match line::parse_line(text, &mut scratch) {
                Parsed::Message(msg) => What::Message(msg.stamp, Meaning::of(&msg)),
                Parsed::Zombie(stamp) => What::Zombie(stamp),
                Parsed::Other => {
                    chunk.skipped += 1;
                    return;
                }
                Parsed::Malformed(reason) => What::Malformed(reason),
            },
        };
        if chunk.records.len() >= most {
            chunk.serial = true;
            return;
        }
        chunk.records.push(Record { line: n, what });
    });
    if chunk.serial {
        chunk.records = Vec::new();
    }
    (job, chunk)
}

/// Takes a parsed chunk whose first line is line `before + 1`, as the serial reader takes
/// its lines; returns how many lines it held.
fn take(
    state: &mut FileState<'_>,
    (job, chunk): &(Job, Chunk),
    before: u64,
    sink: &mut impl SpanSink,
) -> u64 {
    let data = &job.buf[..job.len];
    if chunk.serial {
        return for_each_line::<false>(data, job.lead_too_long, false, |n, line| {
            state.line(before + n, line, sink);
        });
    }
    for record in &chunk.records {
        if state.error.is_some() {
            return chunk.lines;
        }
        match record.what {
            What::Message(stamp, meaning) => {
                state.message_meaning(before + record.line, stamp, &meaning, sink)
            }
            What::Zombie(stamp) => state.zombie(before + record.line, stamp),
            What::Malformed(reason) => state.malformed(before + record.line, reason),
        }
    }
    state.stats.skipped += chunk.skipped;
    state.stats.too_long += chunk.too_long;
    chunk.lines
}

/// Reads `input` on `threads` threads in all into `state` and `sink`; `chunk` bytes per
/// chunk (0: [`CHUNK`](crate::ingest::chunks::CHUNK)).
pub(super) fn read(
    input: impl Read + Send,
    threads: usize,
    chunk: usize,
    cancel: Option<&Cancel>,
    state: &mut FileState<'_>,
    sink: &mut impl SpanSink,
    mut progress: impl FnMut(u64),
) -> io::Result<ReadSummary> {
    let mut reader = Reader::new(input, chunk, cancel);
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
        if !chunk.serial {
            spare.give(chunk);
        }
        // After `--strict`'s first malformed line nothing more is read.
        match state.error {
            Some(_) => std::ops::ControlFlow::Break(()),
            None => std::ops::ControlFlow::Continue(job.buf),
        }
    };
    in_order(threads, read, || |job| parse(job, &spare), apply)?;
    progress(reader.bytes);
    Ok(ReadSummary {
        lines: total,
        bytes: reader.bytes,
        unterminated_last_line: reader.unterminated,
        cancelled: reader.cancelled,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_the_size_its_memory_bound_is_worked_out_for() {
        // SHORTEST_LINE's bound (records within 3 times a chunk's bytes) counts 72 bytes.
        assert!(std::mem::size_of::<Record>() <= 72);
    }
}
