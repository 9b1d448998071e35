//! WAYLAND_DEBUG logs on several cores, with the result of the serial reader, bit for bit.
//!
//! A line parses alone ([`line::parse_line`]: half of the reading time); what depends on the
//! order of lines does not: the clock (the 32-bit microsecond counter's wraps, midnight), the
//! objects and their spans ([`SpanTracker`](super::spans::SpanTracker)), the examples of
//! malformed lines and `--strict`'s stop. So the log is cut into chunks of whole lines as the
//! trace reader cuts its line formats ([`crate::ingest::chunks`]: the same reader, queues and
//! order, N threads in all, the calling thread parsing queued chunks while it would wait); a
//! worker parses a chunk's lines into records of where each message's parts lie and
//! what it means to the span rules ([`Meaning`]: its kind, the objects it creates), and the
//! calling thread takes the records in the log's order through the serial reader's own steps
//! ([`FileState`]).

use std::io::{self, Read};

use super::FileState;
use super::line::{self, Malformed, Message, Parsed, Stamp};
use super::spans::Meaning;
use crate::ingest::chunks::{Job, Reader, Spares, for_each_line, in_order, place};
use crate::ingest::lines::Line;
use crate::ingest::{Cancel, ReadSummary};
use crate::span::SpanSink;

/// Where a part of a message lies: in the chunk, or in its stripped text (coloured lines).
type Part = (u32, u32);

/// What a line was, with its number within the chunk.
#[derive(Debug, Clone, Copy)]
struct Record {
    line: u64,
    what: What,
}

#[derive(Debug, Clone, Copy)]
enum What {
    Message(Parts),
    Zombie(Stamp),
    Malformed(Malformed),
}

/// A [`Message`], its slices as [`Part`]s.
#[derive(Debug, Clone, Copy)]
struct Parts {
    stamp: Stamp,
    tid: Option<u32>,
    queue: Option<Part>,
    conn: Option<u32>,
    discarded: bool,
    sent: bool,
    interface: Part,
    id: u32,
    name: Part,
    args: Part,
    /// the parts lie in [`Chunk::stripped`]
    stripped: bool,
    /// what the message means to the span rules, worked out here
    meaning: Meaning,
}

/// What a worker made of a chunk.
#[derive(Debug, Default)]
struct Chunk {
    lines: u64,
    skipped: u64,
    too_long: u64,
    records: Vec<Record>,
    /// coloured lines without their escape sequences
    stripped: Vec<u8>,
    /// no records: the chunk is read serially on the calling thread (more records than
    /// [`SHORTEST_LINE`] allows, or an offset past a `u32`)
    serial: bool,
}

/// The average line length below which a chunk's records are not kept (a record is 104
/// bytes; the committed WAYLAND_DEBUG logs average 48 to 58 bytes a line, so records take
/// about 2.2 times a chunk's bytes): records stay within 4.3 times the chunk's bytes, and a
/// chunk of shorter lines is read serially.
const SHORTEST_LINE: usize = 24;

impl Parts {
    fn of(msg: &Message<'_>, text: &[u8], stripped: bool) -> Option<Parts> {
        Some(Parts {
            stamp: msg.stamp,
            tid: msg.tid,
            queue: match msg.queue {
                Some(q) => Some(place(text, q)?),
                None => None,
            },
            conn: msg.conn,
            discarded: msg.discarded,
            sent: msg.sent,
            interface: place(text, msg.interface)?,
            id: msg.id,
            name: place(text, msg.name)?,
            args: place(text, msg.args)?,
            stripped,
            meaning: Meaning::of(msg),
        })
    }

    /// The message again, from the chunk's text and its stripped text.
    fn message<'a>(&self, data: &'a [u8], stripped: &'a [u8]) -> Option<Message<'a>> {
        let text = if self.stripped { stripped } else { data };
        let part = |(a, b): Part| text.get(a as usize..b as usize);
        Some(Message {
            stamp: self.stamp,
            tid: self.tid,
            queue: match self.queue {
                Some(q) => Some(part(q)?),
                None => None,
            },
            conn: self.conn,
            discarded: self.discarded,
            sent: self.sent,
            interface: part(self.interface)?,
            id: self.id,
            name: part(self.name)?,
            args: part(self.args)?,
        })
    }
}

impl Chunk {
    /// An empty chunk with the memory of `used`'s lists.
    fn reused(mut used: Chunk) -> Chunk {
        used.records.clear();
        used.stripped.clear();
        Chunk {
            records: used.records,
            stripped: used.stripped,
            ..Chunk::default()
        }
    }
}

/// Parses a chunk's lines into records, in the lists of a spare chunk when there is one.
fn parse(job: Job, spare: &Spares<Chunk>) -> (Job, Chunk) {
    let mut chunk = spare.take().map_or_else(Chunk::default, Chunk::reused);
    let mut scratch = Vec::new();
    let data = &job.buf[..job.len];
    let most = data.len() / SHORTEST_LINE + 16;
    chunk.lines = for_each_line::<false>(data, job.lead_too_long, |n, line| {
        if chunk.serial {
            return;
        }
        let text = match line {
            Line::Text(text) => text,
            Line::Str(text) => text.as_bytes(),
            Line::TooLong { .. } => {
                chunk.too_long += 1;
                return;
            }
        };
        // [`line::parse_line`], a coloured line stripped into the chunk's stripped text (kept
        // for a message, dropped otherwise).
        let coloured = text.first() == Some(&0x1b);
        let base = chunk.stripped.len();
        if coloured {
            line::strip_ansi(text, &mut scratch);
            chunk.stripped.extend_from_slice(&scratch);
        }
        let (within, text) = match coloured {
            true => (&chunk.stripped[..], &chunk.stripped[base..]),
            false => (data, text),
        };
        // `None`: not a WAYLAND_DEBUG line
        let what = match line::parse_plain(text) {
            Parsed::Message(msg) => match Parts::of(&msg, within, coloured) {
                Some(parts) => Some(What::Message(parts)),
                None => {
                    chunk.serial = true;
                    return;
                }
            },
            Parsed::Zombie(stamp) => Some(What::Zombie(stamp)),
            Parsed::Other => None,
            Parsed::Malformed(reason) => Some(What::Malformed(reason)),
        };
        if !matches!(what, Some(What::Message(_))) {
            chunk.stripped.truncate(base);
        }
        let Some(what) = what else {
            chunk.skipped += 1;
            return;
        };
        if chunk.records.len() >= most {
            chunk.serial = true;
            return;
        }
        chunk.records.push(Record { line: n, what });
    });
    if chunk.serial {
        chunk.records = Vec::new();
        chunk.stripped = Vec::new();
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
        return for_each_line::<false>(data, job.lead_too_long, |n, line| {
            state.line(before + n, line, sink);
        });
    }
    for record in &chunk.records {
        if state.error.is_some() {
            return chunk.lines;
        }
        match record.what {
            What::Message(parts) => match parts.message(data, &chunk.stripped) {
                Some(msg) => state.message_meaning(&msg, &parts.meaning, sink),
                // Not reached: the parts were taken from this text.
                None => state.malformed(before + record.line, Malformed::Unterminated),
            },
            What::Zombie(stamp) => state.zombie(stamp),
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
    input: impl Read,
    threads: usize,
    chunk: usize,
    cancel: Option<&Cancel>,
    state: &mut FileState<'_>,
    sink: &mut impl SpanSink,
    mut progress: impl FnMut(u64),
) -> io::Result<ReadSummary> {
    let mut reader = Reader::new(input, chunk, cancel);
    let mut total = 0u64;
    let read = |buf| {
        let job = reader.next(buf)?;
        progress(reader.bytes);
        Ok(job)
    };
    let spare = Spares::new(threads);
    let apply = |done: (Job, Chunk)| {
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
    Ok(ReadSummary {
        lines: total,
        bytes: reader.bytes,
        unterminated_last_line: reader.unterminated,
        cancelled: reader.cancelled,
    })
}
