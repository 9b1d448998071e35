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

/// Open spans by pairing key. Memory grows with the number of open spans only: every entry
/// leaves at its end, when it is superseded or abandoned, or at [`OpenSpans::finish`].
#[derive(Debug)]
pub struct OpenSpans<K> {
    open: FxHashMap<K, Open>,
}

impl<K> Default for OpenSpans<K> {
    fn default() -> Self {
        OpenSpans {
            open: FxHashMap::default(),
        }
    }
}

impl<K: Hash + Eq> OpenSpans<K> {
    /// Starts a span. A span already open under the same key is replaced and reported as
    /// `on_replaced` ([`Outcome::Superseded`] where a newer start legitimately wins,
    /// [`Outcome::Unmatched`] where it means the old one can no longer end).
    pub fn start(&mut self, key: K, open: Open, on_replaced: Outcome, sink: &mut impl SpanSink) {
        if let Some(old) = self.open.insert(key, open) {
            sink.outcome(&old.series, on_replaced);
        }
    }

    /// Ends the span open under `key` at `end_ns`, recording its sample (or
    /// [`Outcome::Backwards`] if the end is stamped before the start). Returns `false` when no
    /// span was open under `key`; the caller decides which series the orphan end belongs to.
    pub fn end<Q>(&mut self, key: &Q, end_ns: u64, sink: &mut impl SpanSink) -> bool
    where
        K: std::borrow::Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let Some(open) = self.open.remove(key) else {
            return false;
        };
        match end_ns.checked_sub(open.start_ns) {
            Some(latency) => sink.sample(&open.series, open.start_ns, latency),
            None => sink.outcome(&open.series, Outcome::Backwards),
        }
        true
    }

    /// Ends the span open under `key` with an outcome other than a sample (e.g. a discarded
    /// presentation). Returns `false` when no span was open under `key`.
    pub fn end_with(&mut self, key: &K, outcome: Outcome, sink: &mut impl SpanSink) -> bool {
        match self.open.remove(key) {
            Some(open) => {
                sink.outcome(&open.series, outcome);
                true
            }
            None => false,
        }
    }

    /// Drops the span open under `key`, if any, as [`Outcome::Unmatched`] (its end can no
    /// longer come, e.g. because the object was destroyed and its id reused).
    pub fn abandon(&mut self, key: &K, sink: &mut impl SpanSink) {
        if let Some(open) = self.open.remove(key) {
            sink.outcome(&open.series, Outcome::Unmatched);
        }
    }

    /// Whether `key` has an open span.
    pub fn contains<Q>(&self, key: &Q) -> bool
    where
        K: std::borrow::Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.open.contains_key(key)
    }

    /// Number of open spans.
    pub fn len(&self) -> usize {
        self.open.len()
    }

    /// Whether no span is open.
    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    /// Reports every span still open as [`Outcome::Unmatched`] and empties the table.
    pub fn finish(&mut self, sink: &mut impl SpanSink) {
        for (_, open) in self.open.drain() {
            sink.outcome(&open.series, Outcome::Unmatched);
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
