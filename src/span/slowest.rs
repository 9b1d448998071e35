//! The slowest spans of each series, with their start times, so that a user can find them in
//! the trace: a bounded min-heap per series (memory: N spans per series, whatever the input).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::{Outcome, SeriesKey, SeriesTable, SpanSink};

/// One span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slow {
    /// its series
    pub key: SeriesKey,
    /// when it started, ns in the input's clock
    pub start_ns: u64,
    /// how long it took
    pub latency_ns: u64,
}

/// A [`SpanSink`] keeping the `n` slowest spans of each series: the first `n` of the order
/// [`Slowest::sorted`] gives, slowest first, ties earliest first.
#[derive(Debug, Clone, Default)]
pub struct Slowest {
    n: usize,
    /// per series, a min-heap of the kept spans by rank, its least kept span on top
    heaps: SeriesTable<BinaryHeap<Reverse<Rank>>>,
}

/// Where a span stands among the slowest: its latency, then, for spans that took as long, the
/// earlier start ranks higher.
type Rank = (u64, Reverse<u64>);

impl Slowest {
    /// Keeps `n` per series (0: none).
    pub fn new(n: usize) -> Slowest {
        Slowest {
            n,
            heaps: SeriesTable::default(),
        }
    }

    /// Every kept span, slowest first (ties: earliest first).
    pub fn sorted(&self) -> Vec<Slow> {
        let mut all: Vec<Slow> = self
            .heaps
            .iter()
            .flat_map(|(key, heap)| {
                heap.iter()
                    .map(|Reverse((latency_ns, Reverse(start_ns)))| Slow {
                        key: *key,
                        start_ns: *start_ns,
                        latency_ns: *latency_ns,
                    })
            })
            .collect();
        all.sort_by_key(|s| (Reverse(s.latency_ns), s.start_ns, s.key));
        all
    }
}

impl SpanSink for Slowest {
    fn sample(&mut self, key: &SeriesKey, start_ns: u64, latency_ns: u64) {
        if self.n == 0 {
            return;
        }
        let heap = self.heaps.entry(key, BinaryHeap::new);
        let rank = (latency_ns, Reverse(start_ns));
        if heap.len() < self.n {
            heap.push(Reverse(rank));
        } else if let Some(mut least) = heap.peek_mut()
            && rank > least.0
        {
            // Replaced in place: one sift down, where a pop and a push took two. A span that
            // ties the least kept one and started later is not kept, and costs one compare
            // (every span of a trace whose latencies tie: they kept the later start, against
            // the order they are shown in, and sifted the heap for each).
            *least = Reverse(rank);
        }
    }

    fn outcome(&mut self, _key: &SeriesKey, _outcome: Outcome) {}
}

/// A [`SpanSink`] keeping the first `max` spans, in the order they complete (memory bounded by
/// `max`; the rest are counted).
#[derive(Debug, Clone, Default)]
pub struct Kept {
    max: usize,
    /// the spans kept
    pub spans: Vec<Slow>,
    /// spans beyond `max`
    pub dropped: u64,
}

impl Kept {
    /// Keeps at most `max` spans.
    pub fn new(max: usize) -> Kept {
        Kept {
            max,
            spans: Vec::new(),
            dropped: 0,
        }
    }
}

impl SpanSink for Kept {
    fn sample(&mut self, key: &SeriesKey, start_ns: u64, latency_ns: u64) {
        if self.spans.len() < self.max {
            self.spans.push(Slow {
                key: *key,
                start_ns,
                latency_ns,
            });
        } else if self.max > 0 {
            self.dropped += 1;
        }
    }

    fn outcome(&mut self, _key: &SeriesKey, _outcome: Outcome) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::span::Group;

    #[test]
    fn the_n_slowest_of_each_series_are_kept_slowest_first() {
        let key = |span| SeriesKey {
            span,
            side: None,
            group: Group::All,
        };
        let mut s = Slowest::new(2);
        for (i, lat) in [5u64, 9, 1, 7, 3].into_iter().enumerate() {
            s.sample(&key(0), i as u64 * 100, lat);
        }
        s.sample(&key(1), 7, 4);
        let got: Vec<(usize, u64, u64)> = s
            .sorted()
            .iter()
            .map(|x| (x.key.span, x.start_ns, x.latency_ns))
            .collect();
        assert_eq!(got, [(0, 100, 9), (0, 300, 7), (1, 7, 4)]);
    }

    #[test]
    fn the_spans_kept_are_the_first_of_all_spans_in_the_order_shown_ties_earliest_first() {
        use rand::{Rng, SeedableRng};
        let key = |span| SeriesKey {
            span,
            side: None,
            group: Group::All,
        };
        let mut rng = rand_pcg::Pcg64::seed_from_u64(25);
        for n in [1, 2, 5, 20] {
            let mut s = Slowest::new(n);
            let mut all: Vec<(usize, u64, u64)> = Vec::new();
            // few distinct latencies (ties everywhere), starts in any order, two series
            for i in 0..500u64 {
                let (span, lat) = (rng.random_range(0..2), rng.random_range(1..5) * 10);
                let start = rng.random_range(0..1000) * 1000 + i;
                s.sample(&key(span), start, lat);
                all.push((span, start, lat));
            }
            // the independent answer: per series, all spans sorted as shown, the first n
            let mut want = Vec::new();
            for span in 0..2 {
                let mut of: Vec<_> = all.iter().filter(|x| x.0 == span).copied().collect();
                of.sort_by_key(|&(_, start, lat)| (Reverse(lat), start));
                want.extend(of.into_iter().take(n));
            }
            want.sort_by_key(|&(span, start, lat)| (Reverse(lat), start, span));
            let got: Vec<(usize, u64, u64)> = s
                .sorted()
                .iter()
                .map(|x| (x.key.span, x.start_ns, x.latency_ns))
                .collect();
            assert_eq!(got, want, "n = {n}");
        }
    }

    #[test]
    fn the_first_spans_are_kept_and_the_rest_counted() {
        let key = SeriesKey {
            span: 0,
            side: None,
            group: Group::All,
        };
        let mut k = Kept::new(2);
        for i in 0..5 {
            k.sample(&key, i, 10 + i);
        }
        let starts: Vec<u64> = k.spans.iter().map(|s| s.start_ns).collect();
        assert_eq!((starts, k.dropped), (vec![0, 1], 3));
    }
}
