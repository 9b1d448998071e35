//! Folds samples and outcomes into one distribution per series.

use super::{Outcome, SeriesKey, SeriesTable, SpanSink};
use crate::stats::{Distribution, LinearSpec};

/// How often each non-sample outcome happened in a series.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// starts that never ended
    pub unmatched: u64,
    /// starts replaced by a newer start before their end
    pub superseded: u64,
    /// ends with no start
    pub orphan_ends: u64,
    /// ends that report the span did not complete
    pub discarded: u64,
    /// ends stamped before their start
    pub backwards: u64,
}

impl Counters {
    fn add(&mut self, outcome: Outcome) {
        let field = match outcome {
            Outcome::Unmatched => &mut self.unmatched,
            Outcome::Superseded => &mut self.superseded,
            Outcome::OrphanEnd => &mut self.orphan_ends,
            Outcome::Discarded => &mut self.discarded,
            Outcome::Backwards => &mut self.backwards,
        };
        *field += 1;
    }

    fn merge(&mut self, other: &Counters) {
        self.unmatched += other.unmatched;
        self.superseded += other.superseded;
        self.orphan_ends += other.orphan_ends;
        self.discarded += other.discarded;
        self.backwards += other.backwards;
    }

    /// Whether nothing at all was counted.
    pub fn is_empty(&self) -> bool {
        *self == Counters::default()
    }
}

/// One series: its samples and its other outcomes.
#[derive(Debug, Clone)]
pub struct Series {
    /// the latency samples
    pub distribution: Distribution,
    /// everything that did not make a sample
    pub counters: Counters,
}

/// A [`SpanSink`] that keeps a [`Series`] per [`SeriesKey`].
#[derive(Debug, Clone)]
pub struct Aggregator {
    names: Vec<String>,
    linear: Option<LinearSpec>,
    series: SeriesTable<Series>,
}

impl Aggregator {
    /// An empty aggregator for spans named `names` (indexed by [`SeriesKey::span`]); `linear`
    /// adds exact linear bucket counts to every distribution.
    pub fn new(names: Vec<String>, linear: Option<LinearSpec>) -> Self {
        Aggregator {
            names,
            linear,
            series: SeriesTable::default(),
        }
    }

    #[inline]
    fn entry(&mut self, key: &SeriesKey) -> &mut Series {
        // (`linear` read where a series is made, not copied at every look-up)
        let linear = &self.linear;
        self.series.entry(key, || Series {
            distribution: Distribution::new(*linear),
            counters: Counters::default(),
        })
    }

    /// Replaces the span names (an input that discovers its span names while it is read,
    /// Chrome JSON, names them at the end).
    pub fn set_names(&mut self, names: Vec<String>) {
        self.names = names;
    }

    /// The name of span `index`.
    pub fn span_name(&self, index: usize) -> &str {
        self.names.get(index).map_or("?", String::as_str)
    }

    /// The series for `key`, if anything was recorded in it.
    pub fn series(&self, key: &SeriesKey) -> Option<&Series> {
        self.series.get(key)
    }

    /// Every series, sorted by span, side and group.
    pub fn sorted(&self) -> Vec<(&SeriesKey, &Series)> {
        let mut all: Vec<_> = self.series.iter().collect();
        all.sort_by(|a, b| a.0.cmp(b.0));
        all
    }

    /// Adds everything from `other`, which must use the same span names.
    pub fn merge(&mut self, other: &Aggregator) {
        for (key, series) in other.series.iter() {
            let mine = self.entry(key);
            mine.distribution.merge(&series.distribution);
            mine.counters.merge(&series.counters);
        }
    }

    /// Whether no series exists.
    pub fn is_empty(&self) -> bool {
        self.series.is_empty()
    }
}

impl SpanSink for Aggregator {
    #[inline]
    fn sample(&mut self, key: &SeriesKey, _start_ns: u64, latency_ns: u64) {
        self.entry(key).distribution.record(latency_ns);
    }

    fn outcome(&mut self, key: &SeriesKey, outcome: Outcome) {
        self.entry(key).counters.add(outcome);
    }
}
