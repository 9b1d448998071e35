//! Pairing within a chunk, on the worker that parsed it: the parallel reader's usual case,
//! one rule without `--by` whose repeated starts keep the last, paired where the events are
//! parsed, with the result of the serial reader, bit for bit.
//!
//! The calling thread of [`super::parallel`] pairs every chunk in the input's order, and a
//! worker hands it a record of every event a rule names (its name, stamp and key values,
//! copied). Two threads then executed markedly more instructions than one (the record, then the
//! pairing of it), and the pairing, one thread's work, was what the other waited on. Here the
//! worker pairs its chunk's events with a table of its own, started empty, and hands over what
//! they made, in order ([`Item`]s: samples and outcomes), with the spans still open at the end
//! of the chunk. What it could not know is what was open before its chunk, and that touches
//! only an event whose key is not open in its table when the event comes (a
//! [`Candidate`]: the event's key may be open in the calling thread's table):
//! - an end whose key is not open here gives an orphan end, unless the key was open before the
//!   chunk: the calling thread then pairs it with that start instead;
//! - a start whose key is not open here opens it; were the key open before the chunk, that
//!   span is superseded first.
//!
//! Once a key was a candidate, the calling thread's table no longer holds it, so every later
//! event of the key within the chunk pairs as the serial reader pairs it. The calling thread
//! takes a chunk's items in order, and at each candidate looks the key up in its table (not at
//! all when that table is empty, as it often is: few spans stay open across chunks), then
//! adds the chunk's open spans to its table. Every series is the rule's one, so the calls the
//! sinks get are the serial reader's, in its order; the spans left open at the end are
//! counted as unmatched in another order, all of that one series.
//!
//! A rule that keeps the first of repeated starts (`--repeat first`) is not paired here: a
//! start whose key was open before the chunk is then ignored, and the end after it pairs with
//! the earlier start, which the worker does not know. Several rules, or `--by`, whose series
//! the calling thread numbers in the order of first use, are not either.

use super::EventView;
use super::rules::{Pairer, Repeat, Rule, fill_key};
use super::span_key::KeyBytes;
use super::span_key::{KeyBuf, SpanKey};
use crate::span::{Group, Open, OpenSpans, Outcome, SeriesKey, SpanSink};

/// What the pairing of a chunk's events gave, in their order.
#[derive(Debug, Clone, Copy)]
pub(super) enum Item {
    /// a span ended: its start (in the chunk's clock) and its latency
    Sample { start_ns: u64, latency_ns: u64 },
    /// something else happened to a span
    Outcome(Outcome),
}

/// An event whose key was not open in the chunk's table when it came.
#[derive(Debug, Clone, Copy)]
pub(super) struct Candidate {
    /// the index of the first item at or after the event: for an end, its orphan end
    pub(super) at: u32,
    pub(super) ts_ns: u64,
    /// the key, a range of [`Paired::keys`]
    pub(super) key: (u32, u32),
    pub(super) end: bool,
}

/// A chunk's events paired on their worker.
#[derive(Debug, Default)]
pub(super) struct Paired {
    pub(super) items: Vec<Item>,
    pub(super) candidates: Vec<Candidate>,
    pub(super) keys: Vec<u8>,
    /// spans open at the end of the chunk (stamps in the chunk's clock)
    pub(super) open: OpenSpans<SpanKey, true>,
    /// events named like the rule's start, like its end, passing the start's filters, the end's
    pub(super) seen: [u64; 4],
    /// events that lack a key field, and the first one's line within the chunk
    pub(super) missing_key: (u64, Option<u64>),
    key_buf: KeyBuf,
}

impl Paired {
    /// Empties it for another chunk, keeping its memory.
    pub(super) fn clear(&mut self) {
        self.items.clear();
        self.candidates.clear();
        self.keys.clear();
        self.open.drain().for_each(drop);
        self.seen = [0; 4];
        self.missing_key = (0, None);
    }

    /// Notes a candidate at this point of the items; `None` past what a `u32` holds.
    fn candidate(&mut self, ts_ns: u64, end: bool) -> Option<()> {
        let at = u32::try_from(self.items.len()).ok()?;
        let start = u32::try_from(self.keys.len()).ok()?;
        self.keys.extend_from_slice(self.key_buf.as_slice());
        let stop = u32::try_from(self.keys.len()).ok()?;
        self.candidates.push(Candidate {
            at,
            ts_ns,
            key: (start, stop),
            end,
        });
        Some(())
    }

    fn key(&self, c: &Candidate) -> &[u8] {
        &self.keys[c.key.0 as usize..c.key.1 as usize]
    }
}

/// The items of one series.
struct Items<'a>(&'a mut Vec<Item>);

impl SpanSink for Items<'_> {
    fn sample(&mut self, _: &SeriesKey, start_ns: u64, latency_ns: u64) {
        self.0.push(Item::Sample {
            start_ns,
            latency_ns,
        });
    }

    fn outcome(&mut self, _: &SeriesKey, outcome: Outcome) {
        self.0.push(Item::Outcome(outcome));
    }
}

/// The one rule a worker pairs, with the places of its key fields among the fields read.
#[derive(Debug, Clone)]
pub(super) struct Local {
    pub(super) rule: Rule,
    pub(super) places: [Vec<usize>; 2],
    pub(super) series: SeriesKey,
}

impl Local {
    /// Pairs one event (line `line` of the chunk) whose name's mask is `mask`, as
    /// [`super::rules::Pairer::event_masked`] does with one rule; `None` when the chunk holds
    /// more than a `u32` indexes (it is then paired on the calling thread).
    pub(super) fn event(
        &self,
        paired: &mut Paired,
        ev: &impl EventView,
        mask: u64,
        line: u64,
    ) -> Option<()> {
        let rule = &self.rule;
        // `event_of_one_rule`'s loop, apart: one function for both cost the serial reader
        // instructions on every event.
        let mut passed = [false; 2];
        for (k, end) in [&rule.start, &rule.end].into_iter().enumerate() {
            if mask >> k & 1 == 1 {
                paired.seen[k] += 1;
                if end.passes(ev) {
                    paired.seen[k + 2] += 1;
                    passed[k] = true;
                }
            }
        }
        let ts = ev.ts_ns();
        if passed[1] {
            let key = (&rule.key.end[..], &self.places[1][..]);
            if !fill_key(&mut paired.key_buf, rule.span, ev, key) {
                note_missing_key(paired, line);
            } else if !paired
                .open
                .end(paired.key_buf.as_bytes(), ts, &mut Items(&mut paired.items))
            {
                paired.candidate(ts, true)?;
                paired.items.push(Item::Outcome(Outcome::OrphanEnd));
            }
        }
        if passed[0] {
            let key = (&rule.key.start[..], &self.places[0][..]);
            if !fill_key(&mut paired.key_buf, rule.span, ev, key) {
                note_missing_key(paired, line);
                return Some(());
            }
            let before = paired.items.len();
            let open = Open {
                start_ns: ts,
                series: self.series,
            };
            let key = paired.key_buf.key();
            let items = &mut Items(&mut paired.items);
            paired.open.start(key, open, Outcome::Superseded, items);
            // Nothing superseded here: the key was not open in this chunk.
            if paired.items.len() == before {
                paired.candidate(ts, false)?;
            }
        }
        Some(())
    }
}

fn note_missing_key(paired: &mut Paired, line: u64) {
    paired.missing_key.0 += 1;
    paired.missing_key.1.get_or_insert(line);
}

/// What the calling thread's table of open spans does for [`apply`] (the pairer's; with its
/// `OpenSpans` passed instead, their `end` was no longer inlined, which cost the thread that
/// pairs on every span).
pub(super) trait Table {
    fn is_empty(&self) -> bool;
    /// Ends the span open under `key` at `end_ns`, as [`OpenSpans::end`].
    fn end(&mut self, key: &[u8], end_ns: u64, sink: &mut impl SpanSink) -> bool;
    /// Takes the span open under `key`.
    fn take(&mut self, key: &[u8]) -> Option<Open>;
    /// Opens a span handed over from a chunk.
    fn open(&mut self, key: SpanKey, open: Open, sink: &mut impl SpanSink);
}

/// Takes a chunk's items in order into `sink`, with the spans open before the chunk in
/// `table`, its stamps moved by `shift` (see the module docs); then hands the chunk's open
/// spans to `table`.
pub(super) fn apply(
    paired: &mut Paired,
    series: &SeriesKey,
    shift: u64,
    table: &mut impl Table,
    sink: &mut impl SpanSink,
) {
    if table.is_empty() {
        for item in &paired.items {
            emit(item, series, shift, sink);
        }
    } else {
        let mut candidates = paired.candidates.iter().peekable();
        for (i, item) in paired.items.iter().enumerate() {
            let mut told = false;
            while let Some(c) = candidates.next_if(|c| c.at as usize == i) {
                told |= candidate(paired, c, series, shift, table, sink);
            }
            if !told {
                emit(item, series, shift, sink);
            }
        }
        for c in candidates {
            candidate(paired, c, series, shift, table, sink);
        }
    }
    for (key, span) in paired.open.drain() {
        let span = Open {
            start_ns: span.start_ns + shift,
            series: span.series,
        };
        table.open(key, span, sink);
    }
}

/// Pairs a candidate with the span open before the chunk under its key, if any; `true` when
/// it was an end whose orphan end that replaced.
fn candidate(
    paired: &Paired,
    c: &Candidate,
    series: &SeriesKey,
    shift: u64,
    table: &mut impl Table,
    sink: &mut impl SpanSink,
) -> bool {
    let key = paired.key(c);
    if c.end {
        let paired_before = table.end(key, c.ts_ns + shift, sink);
        if !paired_before {
            sink.outcome(series, Outcome::OrphanEnd);
        }
        // the orphan end is this one, told now
        return true;
    }
    if let Some(old) = table.take(key) {
        sink.outcome(&old.series, Outcome::Superseded);
    }
    false
}

fn emit(item: &Item, series: &SeriesKey, shift: u64, sink: &mut impl SpanSink) {
    match *item {
        Item::Sample {
            start_ns,
            latency_ns,
        } => sink.sample(series, start_ns + shift, latency_ns),
        Item::Outcome(outcome) => sink.outcome(series, outcome),
    }
}

/// The pairer's own side of pairing within chunks: which rule a worker may pair, and the
/// pairer's table of open spans as [`apply`] uses it. (Here rather than in `rules.rs`, so that
/// the pairer does not import what imports it.)
impl Pairer {
    /// The rule a worker may pair within its chunk ([`self`]): one rule, without
    /// `--by`, whose repeated starts keep the last.
    pub(super) fn local(&self) -> Option<Local> {
        let ([rule], [places], None, Repeat::KeepLast) =
            (&self.rules[..], &self.key_places[..], &self.by, self.repeat)
        else {
            return None;
        };
        Some(Local {
            rule: rule.clone(),
            places: places.clone(),
            series: SeriesKey {
                span: rule.span,
                side: None,
                group: Group::All,
            },
        })
    }
}

impl Table for Pairer {
    fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    fn end(&mut self, key: &[u8], end_ns: u64, sink: &mut impl SpanSink) -> bool {
        self.open.end(KeyBytes::of(key), end_ns, sink)
    }

    fn take(&mut self, key: &[u8]) -> Option<Open> {
        self.open.take(KeyBytes::of(key))
    }

    fn open(&mut self, key: SpanKey, open: Open, sink: &mut impl SpanSink) {
        self.open.start(key, open, Outcome::Superseded, sink);
    }
}

#[cfg(test)]
mod tests {
    use super::super::read::{TraceOptions, read};
    use super::super::rules::{Key, Pairer, Repeat, Rule, parse_span};
    use crate::span::{Outcome, SeriesKey, SpanSink};

    /// Every sample (start, latency) and outcome, in order.
    #[derive(Debug, Default, PartialEq)]
    struct Told(Vec<(Option<Outcome>, u64, u64)>);

    impl SpanSink for Told {
        fn sample(&mut self, _: &SeriesKey, start_ns: u64, latency_ns: u64) {
            self.0.push((None, start_ns, latency_ns));
        }

        fn outcome(&mut self, _: &SeriesKey, outcome: Outcome) {
            self.0.push((Some(outcome), 0, 0));
        }
    }

    fn pairer(repeat: Repeat, by: Option<&str>) -> Pairer {
        let (name, start, end) = parse_span("r=begin..done").unwrap();
        let key = Key::parse("id").unwrap();
        let rule = Rule {
            span: 0,
            start,
            end,
            key,
        };
        Pairer::new(vec![rule], vec![name], by.map(str::to_string), repeat)
    }

    /// JSON lines of `(ts, name, id)` (no id: `None`).
    fn rows(events: &[(u64, &str, Option<u32>)]) -> String {
        let row = |&(ts, name, id): &(u64, &str, Option<u32>)| match id {
            Some(id) => format!("{{\"ts\": {ts}, \"name\": \"{name}\", \"id\": {id}}}\n"),
            None => format!("{{\"ts\": {ts}, \"name\": \"{name}\"}}\n"),
        };
        events.iter().map(row).collect()
    }

    /// What reading `text` on `threads` threads in chunks of `chunk` bytes tells the sink,
    /// the spans left open included, and the events without their key.
    fn told(text: &str, threads: usize, chunk: usize) -> (Told, (u64, Option<u64>)) {
        let options = TraceOptions {
            threads,
            chunk_bytes: chunk,
            ..TraceOptions::default()
        };
        let mut pairer = pairer(Repeat::KeepLast, None);
        let mut sink = Told::default();
        read(
            crate::ingest::Stream::of(text.as_bytes()),
            "t",
            &options,
            &mut pairer,
            &mut sink,
            |_| {},
        )
        .unwrap();
        pairer.finish(&mut sink);
        (sink, pairer.missing_key)
    }

    /// `told` on every line its own chunk, on a few lines a chunk, and on one chunk, each on
    /// two threads, all equal to the serial read, which is returned.
    fn told_alike(text: &str) -> (Told, (u64, Option<u64>)) {
        let serial = told(text, 1, 0);
        for chunk in [1, 90, 0] {
            assert_eq!(told(text, 2, chunk), serial, "chunks of {chunk} bytes");
        }
        serial
    }

    #[test]
    fn one_rule_without_by_keeping_the_last_start_is_paired_on_the_workers_and_no_other() {
        assert!(pairer(Repeat::KeepLast, None).local().is_some());
        assert!(pairer(Repeat::KeepFirst, None).local().is_none());
        assert!(pairer(Repeat::KeepLast, Some("id")).local().is_none());
    }

    #[test]
    fn a_span_open_across_chunks_pairs_with_its_start() {
        let text = rows(&[
            (1000, "begin", Some(1)),
            (1500, "begin", Some(2)),
            (1700, "done", Some(1)),
            (2600, "done", Some(2)),
        ]);
        let (told, _) = told_alike(&text);
        assert_eq!(told.0, [(None, 1000, 700), (None, 1500, 1100)]);
    }

    #[test]
    fn a_start_whose_key_was_open_before_its_chunk_supersedes_that_span() {
        let text = rows(&[
            (1000, "begin", Some(1)),
            (2000, "begin", Some(1)),
            (2500, "done", Some(1)),
        ]);
        let (told, _) = told_alike(&text);
        let superseded = (Some(Outcome::Superseded), 0, 0);
        assert_eq!(told.0, [superseded, (None, 2000, 500)]);
    }

    #[test]
    fn an_end_never_opened_is_an_orphan_and_one_before_its_start_is_backwards() {
        let text = rows(&[
            (100, "done", Some(9)),
            (5000, "begin", Some(3)),
            (4000, "done", Some(3)),
            (6000, "done", Some(3)),
        ]);
        let (told, _) = told_alike(&text);
        let orphan = (Some(Outcome::OrphanEnd), 0, 0);
        let backwards = (Some(Outcome::Backwards), 0, 0);
        assert_eq!(told.0, [orphan, backwards, orphan]);
    }

    #[test]
    fn spans_open_at_the_end_are_unmatched_and_events_without_a_key_are_counted_from_the_first() {
        let text = rows(&[
            (1, "begin", Some(5)),
            (2, "begin", None),
            (3, "begin", Some(6)),
            (4, "done", None),
        ]);
        let (told, missing) = told_alike(&text);
        let unmatched = (Some(Outcome::Unmatched), 0, 0);
        assert_eq!(told.0, [unmatched, unmatched]);
        assert_eq!(missing, (2, Some(2)));
    }
}
