//! The table of spans that have started and not yet ended.

use std::hash::Hash;

use rustc_hash::FxHashMap;

use super::{Outcome, SeriesKey, SpanSink};

/// A span that has started: when, and which series it will be recorded in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Open {
    /// Timestamp of the start event, in nanoseconds.
    pub start_ns: u64,
    /// Series the sample will go to.
    pub series: SeriesKey,
}

/// What a table of open spans keeps of each: when it started, and the series its sample goes
/// to. [`Open`] is the usual one; a reader may keep its own layout (the WAYLAND_DEBUG reader
/// keeps the start time first, see its `Started`).
pub trait Start {
    /// Timestamp of the start event, in nanoseconds.
    fn start_ns(&self) -> u64;
    /// Series the sample will go to.
    fn series(&self) -> &SeriesKey;
}

impl Start for Open {
    #[inline(always)]
    fn start_ns(&self) -> u64 {
        self.start_ns
    }

    #[inline(always)]
    fn series(&self) -> &SeriesKey {
        &self.series
    }
}

/// Open spans by pairing key. Memory grows with the number of open spans only: every entry
/// leaves at its end, when it is superseded or abandoned, or at [`OpenSpans::finish`].
///
/// With `LONE`, a span that opens while no other is open is kept beside the table (`alone`),
/// not in it: a log whose every request ends before the next starts (a JSON-lines `start`,
/// then its `done`) then pairs each end with one comparison of keys, where a table costs a
/// hash, an insert and a remove, a visible share of reading and pairing a short row. A second
/// span moves it into the table. What is reported, and in which
/// order, is the table's alone. (The WAYLAND_DEBUG reader's tables, where a buffer's or a
/// callback's span usually opens beside others, keep every span in the table: there the
/// checks would cost more than they save.)
#[derive(Debug)]
pub struct OpenSpans<K, const LONE: bool = false, V = Open> {
    open: FxHashMap<K, V>,
    /// the one open span while `open` is empty (`open` is empty whenever this is `Some`)
    alone: Option<V>,
    /// the key of `alone` (`Some` exactly when `alone` is). Kept apart from the span: as one
    /// `Option<(K, Open)>`, writing a start there went through stack copies laid out
    /// differently from it, two of whose reads waited on the writes before them (store
    /// forwarding failed): most of the samples of `OpenSpans::start` in a profile of reading
    /// JSON lines.
    alone_key: Option<K>,
}

impl<K, const LONE: bool, V> Default for OpenSpans<K, LONE, V> {
    fn default() -> Self {
        OpenSpans {
            open: FxHashMap::default(),
            alone: None,
            alone_key: None,
        }
    }
}

impl<K: Hash + Eq, const LONE: bool, V: Start> OpenSpans<K, LONE, V> {
    /// Starts a span. A span already open under the same key is replaced and reported as
    /// `on_replaced` ([`Outcome::Superseded`] where a newer start legitimately wins,
    /// [`Outcome::Unmatched`] where it means the old one can no longer end).
    #[inline(always)]
    pub fn start(&mut self, key: K, open: V, on_replaced: Outcome, sink: &mut impl SpanSink) {
        if LONE && self.open.is_empty() {
            // written in place: taken out and put back, the key and the span were copied twice
            match (&self.alone_key, &mut self.alone) {
                (None, _) => {
                    self.alone_key = Some(key);
                    self.alone = Some(open);
                    return;
                }
                (Some(old_key), Some(old)) if *old_key == key => {
                    let old = std::mem::replace(old, open);
                    sink.outcome(old.series(), on_replaced);
                    return;
                }
                // a second span: both go to the table
                _ => {
                    let alone = self.take_alone();
                    self.open.extend(alone);
                }
            }
        }
        if let Some(old) = self.open.insert(key, open) {
            sink.outcome(old.series(), on_replaced);
        }
    }

    /// The span kept beside the table, with its key, taken out.
    #[inline]
    fn take_alone(&mut self) -> Option<(K, V)> {
        Some((self.alone_key.take()?, self.alone.take()?))
    }

    /// Takes the span open under `key` out of the table.
    #[inline]
    pub fn take<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: std::borrow::Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        if LONE && self.open.is_empty() {
            return match &self.alone_key {
                Some(k) if k.borrow() == key => self.take_alone().map(|(_, open)| open),
                _ => None,
            };
        }
        self.open.remove(key)
    }

    /// Ends the span open under `key` at `end_ns`, recording its sample (or
    /// [`Outcome::Backwards`] if the end is stamped before the start). Returns `false` when no
    /// span was open under `key`; the caller decides which series the orphan end belongs to.
    pub fn end<Q>(&mut self, key: &Q, end_ns: u64, sink: &mut impl SpanSink) -> bool
    where
        K: std::borrow::Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let Some(open) = self.take(key) else {
            return false;
        };
        let start_ns = open.start_ns();
        match end_ns.checked_sub(start_ns) {
            Some(latency) => sink.sample(open.series(), start_ns, latency),
            None => sink.outcome(open.series(), Outcome::Backwards),
        }
        true
    }

    /// Ends the span open under `key` with an outcome other than a sample (e.g. a discarded
    /// presentation). Returns `false` when no span was open under `key`.
    pub fn end_with(&mut self, key: &K, outcome: Outcome, sink: &mut impl SpanSink) -> bool {
        match self.take(key) {
            Some(open) => {
                sink.outcome(open.series(), outcome);
                true
            }
            None => false,
        }
    }

    /// Drops the span open under `key`, if any, as [`Outcome::Unmatched`] (its end can no
    /// longer come, e.g. because the object was destroyed and its id reused).
    pub fn abandon(&mut self, key: &K, sink: &mut impl SpanSink) {
        if let Some(open) = self.take(key) {
            sink.outcome(open.series(), Outcome::Unmatched);
        }
    }

    /// Whether `key` has an open span.
    pub fn contains<Q>(&self, key: &Q) -> bool
    where
        K: std::borrow::Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        match &self.alone_key {
            Some(k) => k.borrow() == key,
            None => self.open.contains_key(key),
        }
    }

    /// Number of open spans.
    pub fn len(&self) -> usize {
        self.open.len() + usize::from(self.alone.is_some())
    }

    /// Whether no span is open.
    pub fn is_empty(&self) -> bool {
        self.open.is_empty() && self.alone.is_none()
    }

    /// Takes every open span out of the table, with its key (in no particular order).
    pub fn drain(&mut self) -> impl Iterator<Item = (K, V)> + '_ {
        self.take_alone().into_iter().chain(self.open.drain())
    }

    /// Reports every span still open as [`Outcome::Unmatched`] and empties the table.
    pub fn finish(&mut self, sink: &mut impl SpanSink) {
        let alone = self.take_alone().map(|(_, open)| open);
        for open in alone
            .into_iter()
            .chain(self.open.drain().map(|(_, open)| open))
        {
            sink.outcome(open.series(), Outcome::Unmatched);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Aggregator, Group};
    use super::*;

    fn key() -> SeriesKey {
        SeriesKey {
            span: 0,
            side: None,
            group: Group::All,
        }
    }

    fn agg() -> Aggregator {
        Aggregator::new(vec!["span".into()], None)
    }

    /// Starts a span under `id` at `start_ns`, superseding any open one.
    fn start(spans: &mut OpenSpans<u32>, id: u32, start_ns: u64, sink: &mut Aggregator) {
        let open = Open {
            start_ns,
            series: key(),
        };
        spans.start(id, open, Outcome::Superseded, sink);
    }

    #[test]
    fn a_start_and_an_end_make_one_sample() {
        let (mut spans, mut sink) = (OpenSpans::default(), agg());
        start(&mut spans, 7, 100, &mut sink);
        assert!(spans.end(&7, 350, &mut sink));
        let series = sink.series(&key()).unwrap();
        assert_eq!(series.distribution.count(), 1);
        assert_eq!(series.distribution.summary().min(), Some(250));
        assert!(spans.is_empty());
    }

    #[test]
    fn a_second_start_supersedes_the_first_and_the_end_pairs_with_the_latest() {
        let (mut spans, mut sink) = (OpenSpans::default(), agg());
        start(&mut spans, 7, 100, &mut sink);
        start(&mut spans, 7, 300, &mut sink);
        spans.end(&7, 310, &mut sink);
        let series = sink.series(&key()).unwrap();
        assert_eq!(series.counters.superseded, 1);
        assert_eq!(series.distribution.summary().max(), Some(10));
    }

    #[test]
    fn an_end_before_its_start_is_counted_not_recorded() {
        let (mut spans, mut sink) = (OpenSpans::default(), agg());
        start(&mut spans, 1, 500, &mut sink);
        spans.end(&1, 499, &mut sink);
        let series = sink.series(&key()).unwrap();
        assert_eq!(series.counters.backwards, 1);
        assert_eq!(series.distribution.count(), 0);
    }

    #[test]
    fn an_end_with_no_start_is_left_to_the_caller() {
        let (mut spans, mut sink) = (OpenSpans::<u32>::default(), agg());
        assert!(!spans.end(&9, 10, &mut sink));
    }

    /// What a sink was told, in order.
    #[derive(Default)]
    struct Told(Vec<String>);

    impl SpanSink for Told {
        fn sample(&mut self, key: &SeriesKey, start_ns: u64, latency_ns: u64) {
            self.0
                .push(format!("sample {} {start_ns} {latency_ns}", key.span));
        }

        fn outcome(&mut self, key: &SeriesKey, outcome: Outcome) {
            self.0.push(format!("outcome {} {outcome:?}", key.span));
        }
    }

    #[test]
    fn the_lone_span_kept_beside_the_table_pairs_as_the_table_would() {
        // Random starts, ends, abandons and checks on four keys, against a plain map: the same
        // samples and outcomes in the same order, the same answers (the span's series number
        // is the key, so that each outcome says whose it was).
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        for _ in 0..200 {
            let (mut spans, mut told) = (OpenSpans::<u32, true>::default(), Told::default());
            let (mut model, mut expected) = (FxHashMap::<u32, Open>::default(), Told::default());
            for t in 0..60u64 {
                let k = next(4) as u32;
                let series = SeriesKey {
                    span: k as usize,
                    side: None,
                    group: Group::All,
                };
                match next(6) {
                    0 | 1 => {
                        let open = Open {
                            start_ns: 1000 + t,
                            series,
                        };
                        spans.start(k, open, Outcome::Superseded, &mut told);
                        if let Some(old) = model.insert(k, open) {
                            expected.outcome(&old.series, Outcome::Superseded);
                        }
                    }
                    2 | 3 => {
                        let end_ns = 1000 + t - next(3);
                        let ended = model.remove(&k).inspect(|open| {
                            match end_ns.checked_sub(open.start_ns) {
                                Some(l) => expected.sample(&open.series, open.start_ns, l),
                                None => expected.outcome(&open.series, Outcome::Backwards),
                            }
                        });
                        assert_eq!(spans.end(&k, end_ns, &mut told), ended.is_some());
                    }
                    4 => {
                        spans.abandon(&k, &mut told);
                        if let Some(old) = model.remove(&k) {
                            expected.outcome(&old.series, Outcome::Unmatched);
                        }
                    }
                    _ => {
                        let ended = model.remove(&k).inspect(|old| {
                            expected.outcome(&old.series, Outcome::Discarded);
                        });
                        assert_eq!(
                            spans.end_with(&k, Outcome::Discarded, &mut told),
                            ended.is_some()
                        );
                    }
                }
                assert_eq!(spans.contains(&k), model.contains_key(&k));
                assert_eq!(
                    (spans.len(), spans.is_empty()),
                    (model.len(), model.is_empty())
                );
                assert_eq!(told.0, expected.0);
            }
            let left = spans.len();
            spans.finish(&mut told);
            let mut unmatched: Vec<_> = told.0.split_off(expected.0.len());
            let mut by_model: Vec<_> = model
                .values()
                .map(|open| format!("outcome {} Unmatched", open.series.span))
                .collect();
            unmatched.sort();
            by_model.sort();
            assert_eq!((unmatched, left), (by_model, model.len()));
            assert!(spans.is_empty());
        }
    }

    #[test]
    fn spans_still_open_at_the_end_are_unmatched() {
        let (mut spans, mut sink) = (OpenSpans::default(), agg());
        start(&mut spans, 1, 1, &mut sink);
        start(&mut spans, 2, 1, &mut sink);
        spans.finish(&mut sink);
        assert_eq!(sink.series(&key()).unwrap().counters.unmatched, 2);
        assert_eq!(spans.len(), 0);
    }
}
