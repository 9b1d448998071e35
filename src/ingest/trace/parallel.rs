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
//! With the usual rules (one rule, no `--by`, the last of repeated starts kept) there are no
//! records: each worker pairs its chunk's events itself, and the calling thread takes the
//! samples in order and settles the few events whose key may have opened before the chunk
//! ([`super::local`]).
//! The chunks, the threads and the order are [`crate::ingest::chunks`]'.

use std::io::Read;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicU64, Ordering};

use rustc_hash::{FxHashMap, FxHashSet};

use super::babeltrace::{Babeltrace, MOST_DAY_OFFSET};
use super::lines::{Lines, TOO_LONG, note_malformed};
use super::local::{self, Local, Paired};
use super::rules::{MAX_NAMES, NameMatcher, Pairer, Recent};
use super::{EventView, Format, InLine, Parsed, same};
use crate::ingest::Location;
use crate::ingest::chunks::{Spares, in_order};
use crate::ingest::lines::{Line, ReadResult};
use crate::ingest::reader::{Job, Reader, for_each_line};
use crate::span::SpanSink;

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
    /// whether a line failed to parse (what `--strict` stops at; a line too long does not)
    failed_parse: bool,
    backwards: u64,
    first_backwards: Option<u64>,
    /// the first event's stamp and line, the last event's stamp
    first_ts: Option<(u64, u64)>,
    last_ts: Option<u64>,
    /// names in the order they first appear in the chunk (their ranges of `text`)
    names: Vec<(u32, u32)>,
    text: String,
    records: Vec<Record>,
    /// per record, one value per wanted field
    values: Vec<(u32, u32)>,
    /// babeltrace2's clock as the chunk left it, started afresh
    clock: Babeltrace,
    /// the events paired on the worker, when it pairs ([`local`])
    paired: Paired,
    /// the worker could not make records (too much text): the chunk is read serially
    serial: bool,
}

impl Chunk {
    /// An empty chunk with the memory of `used`'s lists.
    fn reused(mut used: Chunk) -> Chunk {
        used.names.clear();
        used.text.clear();
        used.records.clear();
        used.values.clear();
        used.paired.clear();
        Chunk {
            names: used.names,
            text: used.text,
            records: used.records,
            values: used.values,
            paired: used.paired,
            ..Chunk::default()
        }
    }

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
    state: super::lines::LineState<'a>,
    names: Names<'a>,
    /// the rule paired here, if the worker pairs ([`local`])
    local: Option<&'a Local>,
    /// chunks already paired, whose lists are filled again (allocated anew for every chunk,
    /// their pages were faulted in and given back every time)
    spare: &'a Spares<Chunk>,
}

/// Which names rules name, and which a chunk lists.
struct Names<'a> {
    matcher: &'a NameMatcher,
    /// masks and fields read ([`NameMatcher::fields`]) by name, with the last chunk each
    /// name was listed in and where it lies in that chunk's text
    cache: FxHashMap<Box<str>, Cached>,
    /// names beyond the cache listed in this chunk
    listed: FxHashSet<Box<str>>,
    seq: u64,
    /// the two cached names looked up last, with the chunk they were listed in (a look-up in
    /// `cache` hashes the name, a cost on every event, and most events repeat a recent name)
    lately: [Recent<(u64, Found)>; 2],
}

/// What [`Names::mask`] gives for a name: its mask, the fields its events may be asked, where
/// it lies in the chunk's text.
type Found = (u64, u64, Option<(u32, u32)>);

impl<'a> Worker<'a> {
    fn chunk(&mut self, job: Job) -> Done {
        self.names.seq += 1;
        self.names.listed.clear();
        self.state.babeltrace = Babeltrace::default();
        self.state.last_ts = None;
        let mut chunk = self.spare.take().map_or_else(Chunk::default, Chunk::reused);
        let blanks = super::lines::splits_on_spaces(self.state.format);
        let data = job.data();
        let lines = for_each_line::<true>(data, job.lead, blanks, |n, line| {
            if !chunk.serial {
                self.line(&mut chunk, n, line);
            }
        });
        chunk.lines = lines;
        chunk.clock = std::mem::take(&mut self.state.babeltrace);
        Done { job, chunk }
    }

    fn line(&mut self, chunk: &mut Chunk, n: u64, line: Line<'_>) {
        let (text, plain) = match line {
            Line::Plain(text) => (text, true),
            Line::Str(text) => (text, false),
            Line::Text(bytes) => match std::str::from_utf8(bytes) {
                Ok(text) => (text, false),
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
        match self.state.parse_line(text, plain) {
            Parsed::Skip => chunk.skipped += 1,
            Parsed::Malformed(reason) => {
                chunk.note_malformed(n, reason);
                chunk.failed_parse = true;
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
        let (mask, need, at) = self.names.mask(chunk, name);
        if mask == 0 {
            return;
        }
        let kept = match self.local {
            Some(local) => local.event(&mut chunk.paired, &view, mask, n),
            None => record(chunk, &view, n, (mask, need, at), &self.state.wanted),
        };
        if kept.is_none() {
            chunk.serial = true;
        }
    }
}

/// What a worker keeps of a name.
#[derive(Debug, Clone, Copy)]
struct Cached {
    mask: u64,
    /// the fields its events may be asked ([`NameMatcher::fields`])
    need: u64,
    /// the last chunk it was listed in, and where it lies in that chunk's text
    seq: u64,
    at: Option<(u32, u32)>,
}

impl Names<'_> {
    /// The mask of `name`, the fields its events may be asked, and where the name lies in
    /// the chunk's text (`None`: nowhere yet), listing the name in the chunk the first time
    /// it appears there.
    fn mask(&mut self, chunk: &mut Chunk, name: &str) -> Found {
        let seq = self.seq;
        let listed_here = |(at, found): (u64, Found)| (at == seq).then_some(found);
        if let Some(found) = self
            .lately
            .iter()
            .find_map(|l| l.get(name).and_then(listed_here))
        {
            return found;
        }
        let cached = match self.cache.get_mut(name) {
            Some(c) if c.seq == seq => {
                let found = (c.mask, c.need, c.at);
                self.keep(name, found);
                return found;
            }
            Some(c) => c,
            None => {
                let mask = self.matcher.mask(name);
                let need = self.matcher.fields(mask);
                if self.cache.len() < CACHED_NAMES {
                    let c = Cached {
                        mask,
                        need,
                        seq: 0,
                        at: None,
                    };
                    self.cache.entry(name.into()).or_insert(c)
                } else if self.listed.len() >= MAX_NAMES || !self.listed.insert(name.into()) {
                    return (mask, need, None);
                } else {
                    let at = list(chunk, name);
                    return (mask, need, at);
                }
            }
        };
        cached.seq = seq;
        cached.at = list(chunk, name);
        let found = (cached.mask, cached.need, cached.at);
        self.keep(name, found);
        found
    }

    /// Keeps a cached `name`, listed in this chunk, as the one looked up last.
    fn keep(&mut self, name: &str, found: Found) {
        if let Some(kept) = Recent::new(name, (self.seq, found)) {
            self.lately[1] = std::mem::replace(&mut self.lately[0], kept);
        }
    }
}

/// Lists `name` in `chunk`: where its text lies, `None` when the chunk lists no more names.
fn list(chunk: &mut Chunk, name: &str) -> Option<(u32, u32)> {
    if chunk.names.len() >= MAX_NAMES {
        return None;
    }
    match chunk.push(name) {
        Some(range) => {
            chunk.names.push(range);
            Some(range)
        }
        None => {
            chunk.serial = true;
            None
        }
    }
}

/// The record of an event a rule names: its name and the values of the wanted fields.
fn record(
    chunk: &mut Chunk,
    view: &InLine<'_>,
    n: u64,
    (mask, need, at): (u64, u64, Option<(u32, u32)>),
    wanted: &[String],
) -> Option<()> {
    // The name as listed in the chunk, read where it lies, not copied per event: copying was
    // a measurable cost on the hot path.
    let name = match at {
        Some(at) => at,
        None => chunk.push(view.name())?,
    };
    for (j, field) in wanted.iter().enumerate() {
        let asked = j >= 64 || need >> j & 1 == 1;
        let value = match asked
            .then(|| view.ev.field_at(view.line, j, field))
            .flatten()
        {
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
        let i = self
            .wanted
            .iter()
            .position(|w| same(w.as_bytes(), name.as_bytes()))?;
        match self.values[i] {
            ABSENT => None,
            (a, b) => Some(&self.chunk.text[a as usize..b as usize]),
        }
    }

    fn key_field(&self, j: usize, name: &str) -> Option<&[u8]> {
        // By its place when it is the field named so (the pairer's list is the workers'), as
        // bytes (no character boundaries to check): a look-up among the names, then a slice
        // of the text, were a sixth of the pairing of a babeltrace2 event keyed by two fields.
        match (self.wanted.get(j), self.values.get(j)) {
            (Some(w), Some(&value)) if same(w.as_bytes(), name.as_bytes()) => match value {
                ABSENT => None,
                (a, b) => self.chunk.text.as_bytes().get(a as usize..b as usize),
            },
            _ => self.field(name).map(str::as_bytes),
        }
    }
}

/// Reads every chunk of `reader` on `threads` threads in all (the calling thread and
/// `threads - 1` workers) into `lines`' statistics and `pairer`, in the input's order. See the
/// module docs.
pub(super) fn read<R: Read + Send>(
    mut reader: Reader<'_, R>,
    threads: usize,
    lines: &mut Lines<'_>,
    pairer: &mut Pairer,
    sink: &mut impl SpanSink,
    mut progress: impl FnMut(u64),
) -> ReadResult {
    let matcher = pairer.matcher();
    let (format, columns) = (lines.state.format, lines.state.columns);
    let wanted = lines.state.wanted.clone();
    let local = pairer.local();
    let spare = Spares::new(threads);
    let parser = || {
        let mut worker = Worker {
            state: super::lines::LineState::new(format, columns, wanted.clone()),
            names: Names {
                matcher: &matcher,
                cache: FxHashMap::default(),
                listed: FxHashSet::default(),
                seq: 0,
                lately: Default::default(),
            },
            local: local.as_ref(),
            spare: &spare,
        };
        move |job| worker.chunk(job)
    };
    // lines of the chunks taken
    let mut total = 0u64;
    // bytes read, given to `progress` as chunks are taken (the workers read)
    let read_bytes = AtomicU64::new(0);
    let read = |buf| {
        let next = reader.next(buf)?;
        read_bytes.store(reader.bytes, Ordering::Relaxed);
        Ok(next)
    };
    let apply = |mut done: Done| {
        progress(read_bytes.load(Ordering::Relaxed));
        total += apply(lines, &mut done, total, (pairer, local.as_ref()), sink);
        done.job.taken();
        spare.give(done.chunk);
        // After `--strict`'s first malformed line nothing more is read.
        match lines.failure {
            Some(_) => ControlFlow::Break(()),
            None => ControlFlow::Continue(done.job.buf),
        }
    };
    let ended = in_order(threads, read, parser, apply);
    progress(reader.bytes);
    reader.finish(total, ended)
}

/// Takes a parsed chunk whose first line is line `before + 1`; returns its lines.
fn apply(
    lines: &mut Lines<'_>,
    done: &mut Done,
    before: u64,
    (pairer, local): (&mut Pairer, Option<&Local>),
    sink: &mut impl SpanSink,
) -> u64 {
    let chunk = &mut done.chunk;
    if lines.failure.is_some() {
        return chunk.lines;
    }
    let mixed = chunk.clock.first_of_day().is_some() && chunk.clock.other_stamps() > 0;
    let (shift, clock) = chunk.clock.continued(lines.state.babeltrace.clock());
    // Past the most days a clock is unwrapped by, some stamp of the chunk is malformed to the
    // serial reader (its worker, which started at day 0, did not know).
    let too_many_days = clock.day_offset > MOST_DAY_OFFSET;
    // --strict: nothing after the first malformed line is paired or counted, so a chunk to
    // stop in is read again here, line by line (its events paired on the worker are taken
    // whole, its counts run past the line).
    let stop = lines.strict && chunk.failed_parse;
    if chunk.serial || mixed || too_many_days || stop {
        let data = done.job.data();
        let blanks = super::lines::splits_on_spaces(lines.state.format);
        return for_each_line::<true>(data, done.job.lead, blanks, |n, line| {
            lines.line(before + n, line, pairer, sink)
        });
    }
    lines.state.babeltrace.set_clock(clock);
    count(lines, chunk, before, shift);
    let names = chunk.names.iter();
    pairer.note_names(names.map(|(a, b)| &chunk.text[*a as usize..*b as usize]));
    if let Some(local) = local {
        let paired = &mut chunk.paired;
        let first_missing = paired.missing_key.1.map(|n| before + n);
        pairer.add_counts(paired.seen, paired.missing_key.0, first_missing);
        local::apply(paired, &local.series, shift, pairer, sink);
        return chunk.lines;
    }
    let width = lines.state.wanted.len();
    for (i, record) in chunk.records.iter().enumerate() {
        let view = RecordView {
            chunk,
            record,
            values: &chunk.values[i * width..(i + 1) * width],
            wanted: &lines.state.wanted,
            shift,
        };
        pairer.event_masked(&view, record.mask, before + record.line, sink);
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
