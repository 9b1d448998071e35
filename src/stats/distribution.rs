//! One latency distribution: exact moments, HdrHistogram percentiles and exact buckets.

use base64::Engine;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Serializer, V2Serializer};
use rustc_hash::FxHashMap;
use std::collections::hash_map::Entry;

use super::{LinearCounts, LinearSpec, Log2Counts, Summary, Unit};

/// Significant digits kept by the HdrHistogram: percentiles are within 0.1% of the true value.
pub const SIGNIFICANT_DIGITS: u8 = 3;

/// Most distinct values counted exactly per distribution. Logs with microsecond stamps have few
/// distinct latencies (one per microsecond), so their percentiles stay exact; beyond this many,
/// the exact counts are dropped and percentiles come from the HdrHistogram (within 0.1%).
pub const EXACT_DISTINCT_LIMIT: usize = 1 << 16;

/// The quantiles every report shows, with their names.
pub const PERCENTILES: [(&str, f64); 4] = [
    ("p50", 0.50),
    ("p90", 0.90),
    ("p99", 0.99),
    ("p99.9", 0.999),
];

/// Percentiles of a distribution, in nanoseconds.
///
/// Each is the nearest-rank percentile: the ⌈q·n⌉-th smallest sample. It is exact while the
/// distribution has at most [`EXACT_DISTINCT_LIMIT`] distinct values; past that it is what
/// HdrHistogram reports, the highest value equivalent to that sample at 3 significant digits,
/// clamped to the exact min and max: never below the true value and at most 0.1% above it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Percentiles {
    /// median
    pub p50: u64,
    /// 90th percentile
    pub p90: u64,
    /// 99th percentile
    pub p99: u64,
    /// 99.9th percentile
    pub p999: u64,
}

impl Percentiles {
    /// The values in the order of [`PERCENTILES`].
    pub fn values(&self) -> [u64; 4] {
        [self.p50, self.p90, self.p99, self.p999]
    }
}

/// Distinct values a distribution holds in its exact counts alone, before it builds its
/// HdrHistogram and power-of-two counts (about 40 KiB for latencies up to 16 µs, 8 KiB more for
/// each doubling of the largest: the histogram's counts, 1,024 a doubling at 3 digits). A
/// series of a few spans (a trace with 20,000 event names has thousands) costs a few hundred
/// bytes; the binned forms are derived from the exact counts on demand until then.
pub const BINNED_AFTER_DISTINCT: usize = 256;

/// All we keep about one set of latency samples. Memory is constant in the number of samples,
/// and small while the samples are few (see [`BINNED_AFTER_DISTINCT`]).
#[derive(Debug, Clone)]
pub struct Distribution {
    summary: Summary,
    linear: Option<LinearCounts>,
    exact: Option<FxHashMap<u64, u64>>,
    /// Present once `exact` holds more than [`BINNED_AFTER_DISTINCT`] values or was dropped.
    binned: Option<Box<Binned>>,
}

/// The forms of a distribution that cost the same whatever the number of samples.
#[derive(Debug, Clone)]
struct Binned {
    hdr: Histogram<u64>,
    log2: [Log2Counts; 4],
}

impl Binned {
    fn new() -> Self {
        Binned {
            hdr: Histogram::new(SIGNIFICANT_DIGITS).expect("3 significant digits is valid"),
            log2: Default::default(),
        }
    }

    /// The binned forms of exact counts: the same histogram as recording the samples one by
    /// one, since its range follows the largest value (recorded first: one allocation).
    fn of(exact: &FxHashMap<u64, u64>) -> Self {
        let mut binned = Binned::new();
        let largest = exact.iter().max_by_key(|&(&v, _)| v);
        if let Some((&max, &count)) = largest {
            binned.record_n(max, count);
            for (&value, &count) in exact.iter().filter(|&(&v, _)| v != max) {
                binned.record_n(value, count);
            }
        }
        binned
    }

    #[inline]
    fn record_n(&mut self, ns: u64, n: u64) {
        if self.hdr.record_n(ns, n).is_err() {
            self.hdr.saturating_record_n(ns, n);
        }
        for unit in Unit::ALL {
            self.log2[unit.index()].record_n(ns / unit.nanos(), n);
        }
    }

    fn merge(&mut self, other: &Binned) {
        // Auto-resizing histograms of the same precision always add.
        let _ = self.hdr.add(&other.hdr);
        for (a, b) in self.log2.iter_mut().zip(&other.log2) {
            a.merge(b);
        }
    }
}

impl Default for Distribution {
    fn default() -> Self {
        Self::new(None)
    }
}

impl Distribution {
    /// An empty distribution; `linear` adds exact linear bucket counts.
    pub fn new(linear: Option<LinearSpec>) -> Self {
        Distribution {
            summary: Summary::default(),
            linear: linear.map(LinearCounts::new),
            exact: Some(FxHashMap::default()),
            binned: None,
        }
    }

    /// Adds one sample in nanoseconds.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.summary.record(ns);
        if let Some(binned) = &mut self.binned {
            binned.record_n(ns, 1);
        }
        if let Some(linear) = &mut self.linear {
            linear.record(ns);
        }
        if let Some(exact) = &mut self.exact {
            // Only a value not seen before can take the counts past a limit: settling at every
            // sample was a large share of recording a span.
            match exact.entry(ns) {
                Entry::Occupied(mut seen) => *seen.get_mut() += 1,
                Entry::Vacant(new) => {
                    new.insert(1);
                    self.settle();
                }
            }
        }
    }

    /// Builds the binned forms once the exact counts grow past [`BINNED_AFTER_DISTINCT`], and
    /// drops the exact counts past [`EXACT_DISTINCT_LIMIT`].
    fn settle(&mut self) {
        let Some(exact) = &self.exact else { return };
        if self.binned.is_none() && exact.len() > BINNED_AFTER_DISTINCT {
            self.binned = Some(Box::new(Binned::of(exact)));
        }
        if exact.len() > EXACT_DISTINCT_LIMIT {
            self.exact = None;
        }
    }

    /// The binned forms, built from the exact counts when they are not kept.
    fn binned(&self) -> std::borrow::Cow<'_, Binned> {
        match (&self.binned, &self.exact) {
            (Some(binned), _) => std::borrow::Cow::Borrowed(binned),
            (None, Some(exact)) => std::borrow::Cow::Owned(Binned::of(exact)),
            (None, None) => std::borrow::Cow::Owned(Binned::new()),
        }
    }

    /// Adds every sample of `other`.
    pub fn merge(&mut self, other: &Distribution) {
        self.summary.merge(&other.summary);
        if let (Some(a), Some(b)) = (&mut self.linear, &other.linear) {
            a.merge(b);
        }
        // The binned forms are merged when either side has them (the other's derived from
        // its exact counts), before the exact counts, which may be dropped by the merge.
        if self.binned.is_some() || other.binned.is_some() {
            let mut mine = self.binned().into_owned();
            mine.merge(&other.binned());
            self.binned = Some(Box::new(mine));
        }
        self.exact = match (self.exact.take(), &other.exact) {
            (Some(mut a), Some(b)) => {
                for (&value, &count) in b {
                    *a.entry(value).or_insert(0) += count;
                }
                Some(a)
            }
            _ => None,
        };
        if self.binned.is_none() && self.exact.is_none() {
            self.binned = Some(Box::new(Binned::new()));
        }
        self.settle();
    }

    /// Exact count, min, max, mean and standard deviation.
    pub fn summary(&self) -> &Summary {
        &self.summary
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.summary.count()
    }

    /// Whether percentiles are exact (see [`Percentiles`]).
    pub fn percentiles_exact(&self) -> bool {
        self.exact.is_some()
    }

    /// The largest relative error of any percentile: 0 when exact, else HdrHistogram's bound.
    pub fn percentile_max_relative_error(&self) -> f64 {
        if self.percentiles_exact() {
            0.0
        } else {
            10f64.powi(-i32::from(SIGNIFICANT_DIGITS))
        }
    }

    /// The nearest-rank value at quantile `q` (0 < q ≤ 1); see [`Percentiles`].
    pub fn value_at_quantile(&self, q: f64) -> Option<u64> {
        self.values_at_quantiles(&[q]).pop()
    }

    /// The nearest-rank values at ascending quantiles `qs`; empty when there are no samples.
    pub fn values_at_quantiles(&self, qs: &[f64]) -> Vec<u64> {
        let (Some(min), Some(max)) = (self.summary.min(), self.summary.max()) else {
            return Vec::new();
        };
        let Some(exact) = &self.exact else {
            let binned = self.binned();
            return qs
                .iter()
                .map(|&q| binned.hdr.value_at_quantile(q).clamp(min, max))
                .collect();
        };
        let mut values: Vec<(u64, u64)> = exact.iter().map(|(&v, &c)| (v, c)).collect();
        values.sort_unstable();
        let n = self.summary.count();
        qs.iter()
            .map(|&q| {
                // The same rank arithmetic as HdrHistogram, so both paths agree on ties.
                let rank = ((q.min(1.0) * n as f64).ceil() as u64).max(1);
                let mut seen = 0;
                values
                    .iter()
                    .find(|(_, count)| {
                        seen += count;
                        seen >= rank
                    })
                    .map_or(max, |&(value, _)| value)
            })
            .collect()
    }

    /// The standard percentiles, or `None` when empty.
    pub fn percentiles(&self) -> Option<Percentiles> {
        let qs = PERCENTILES.map(|(_, q)| q);
        let [p50, p90, p99, p999] = self.values_at_quantiles(&qs)[..] else {
            return None;
        };
        Some(Percentiles {
            p50,
            p90,
            p99,
            p999,
        })
    }

    /// Exact power-of-two counts of the values expressed in `unit` (rounded down).
    pub fn log2(&self, unit: Unit) -> Log2Counts {
        match (&self.binned, &self.exact) {
            (Some(binned), _) => binned.log2[unit.index()].clone(),
            (None, Some(exact)) => {
                let mut counts = Log2Counts::default();
                for (&ns, &n) in exact {
                    counts.record_n(ns / unit.nanos(), n);
                }
                counts
            }
            (None, None) => Log2Counts::default(),
        }
    }

    /// Exact linear counts, when a [`LinearSpec`] was given.
    pub fn linear(&self) -> Option<&LinearCounts> {
        self.linear.as_ref()
    }

    /// The HdrHistogram of the samples (values in nanoseconds).
    pub fn hdr(&self) -> Histogram<u64> {
        self.binned().into_owned().hdr
    }

    /// The HdrHistogram in the standard V2 binary encoding, base64: the same payload as a line
    /// of an HdrHistogram interval log, so any HdrHistogram tool can read it back.
    pub fn hdr_base64(&self) -> String {
        let mut bytes = Vec::new();
        match V2Serializer::new().serialize(&self.binned().hdr, &mut bytes) {
            Ok(_) => base64::engine::general_purpose::STANDARD.encode(bytes),
            Err(_) => String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nearest_rank(sorted: &[u64], q: f64) -> u64 {
        let rank = ((q * sorted.len() as f64).ceil() as usize).max(1);
        sorted[rank - 1]
    }

    #[test]
    fn percentiles_of_one_to_one_hundred_are_the_nearest_ranks() {
        let mut d = Distribution::default();
        (1..=100).for_each(|v| d.record(v));
        let p = d.percentiles().unwrap();
        assert_eq!(
            p,
            Percentiles {
                p50: 50,
                p90: 90,
                p99: 99,
                p999: 100
            }
        );
    }

    fn skewed_values(n: u64) -> Vec<u64> {
        // Deterministic, spread over five decades, mostly distinct.
        (0..n)
            .map(|i| 1_000 + (i * i * 7919 + i) % 50_000_000)
            .collect()
    }

    #[test]
    fn percentiles_are_exact_nearest_ranks_while_values_are_few() {
        let mut values = skewed_values(10_000);
        let mut d = Distribution::default();
        values.iter().for_each(|&v| d.record(v));
        values.sort_unstable();
        assert!(d.percentiles_exact());
        for (_, q) in PERCENTILES {
            assert_eq!(
                d.value_at_quantile(q),
                Some(nearest_rank(&values, q)),
                "q={q}"
            );
        }
    }

    #[test]
    fn percentiles_of_many_distinct_values_stay_within_a_tenth_of_a_percent() {
        let mut values = skewed_values(EXACT_DISTINCT_LIMIT as u64 * 2);
        let mut d = Distribution::default();
        values.iter().for_each(|&v| d.record(v));
        values.sort_unstable();
        assert!(!d.percentiles_exact());
        assert_eq!(d.percentile_max_relative_error(), 0.001);
        for (_, q) in PERCENTILES {
            let exact = nearest_rank(&values, q);
            let got = d.value_at_quantile(q).unwrap();
            assert!(got >= exact, "q={q}: {got} < {exact}");
            assert!(
                (got - exact) as f64 <= exact as f64 * 0.001,
                "q={q}: {got} vs {exact}"
            );
        }
    }

    #[test]
    fn percentiles_never_exceed_the_exact_maximum() {
        let mut d = Distribution::default();
        d.record(1_000_001);
        assert_eq!(d.percentiles().unwrap().p999, 1_000_001);
    }

    #[test]
    fn log2_counts_are_kept_per_display_unit() {
        let mut d = Distribution::default();
        d.record(1_999); // 1 µs after rounding down
        d.record(2_000); // 2 µs
        assert_eq!(d.log2(Unit::Us).counts()[1], 1);
        assert_eq!(d.log2(Unit::Us).counts()[2], 1);
        assert_eq!(d.log2(Unit::Ns).counts()[11], 2); // [1024, 2048)
    }

    #[test]
    fn merged_distributions_equal_one_recorded_distribution() {
        let (mut a, mut b, mut all) = Default::default();
        let _: &Distribution = &all;
        for v in 0..500u64 {
            let x = v * 37 % 10_000;
            if v % 2 == 0 {
                Distribution::record(&mut a, x)
            } else {
                Distribution::record(&mut b, x)
            }
            Distribution::record(&mut all, x);
        }
        a.merge(&b);
        assert_eq!(a.summary(), all.summary());
        assert_eq!(a.percentiles(), all.percentiles());
        assert_eq!(a.log2(Unit::Ns), all.log2(Unit::Ns));
    }

    #[test]
    fn merging_many_distinct_values_gives_the_percentiles_of_one_distribution() {
        // More distinct values than EXACT_DISTINCT_LIMIT: the merge goes through the HDR path.
        let values = skewed_values(EXACT_DISTINCT_LIMIT as u64 * 2);
        let (mut a, mut b, mut all) = (
            Distribution::default(),
            Distribution::default(),
            Distribution::default(),
        );
        for (i, &v) in values.iter().enumerate() {
            if i % 2 == 0 {
                a.record(v)
            } else {
                b.record(v)
            }
            all.record(v);
        }
        a.merge(&b);
        assert!(!a.percentiles_exact());
        assert_eq!(a.summary(), all.summary());
        assert_eq!(a.percentiles(), all.percentiles());
    }

    fn serialized(h: &Histogram<u64>) -> Vec<u8> {
        let mut bytes = Vec::new();
        V2Serializer::new().serialize(h, &mut bytes).unwrap();
        bytes
    }

    /// A distribution of `values`, and the HdrHistogram of recording them one by one.
    fn both(values: &[u64]) -> (Distribution, Histogram<u64>) {
        let mut d = Distribution::default();
        let mut h = Histogram::<u64>::new(SIGNIFICANT_DIGITS).unwrap();
        for &v in values {
            d.record(v);
            h.record(v).unwrap();
        }
        (d, h)
    }

    #[test]
    fn a_few_samples_keep_no_histogram_until_it_is_asked_for_and_it_is_the_one_recorded() {
        let values = [9_000u64, 17, 5_000_000, 17, 123_456];
        let (d, h) = both(&values);
        assert!(d.binned.is_none());
        assert_eq!(serialized(&d.hdr()), serialized(&h));
        let mut log2 = Log2Counts::default();
        values.iter().for_each(|&v| log2.record(v / 1_000));
        assert_eq!(d.log2(Unit::Us), log2);
    }

    #[test]
    fn the_histogram_is_built_past_the_distinct_limit_and_equals_the_one_recorded() {
        let values: Vec<u64> = (0..1_000u64).map(|i| 1 + (i * 7919) % 100_000).collect();
        let (d, h) = both(&values);
        assert!(d.binned.is_some());
        assert_eq!(serialized(&d.hdr()), serialized(&h));
    }

    #[test]
    fn merging_a_small_distribution_into_a_binned_one_adds_its_samples_to_the_histogram() {
        let many: Vec<u64> = (1..=1_000u64).collect();
        let (mut a, _) = both(&many);
        let (b, _) = both(&[2_000_000, 3]);
        a.merge(&b);
        let all: Vec<u64> = many.iter().copied().chain([2_000_000, 3]).collect();
        let (_, h) = both(&all);
        let counts = |h: &Histogram<u64>| -> Vec<(u64, u64)> {
            h.iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value()))
                .collect()
        };
        assert_eq!(a.hdr().len(), 1_002);
        assert_eq!(counts(&a.hdr()), counts(&h));
        assert_eq!(a.log2(Unit::Ns).counts().iter().sum::<u64>(), 1_002);
    }

    #[test]
    fn hdr_payload_round_trips_through_the_standard_deserializer() {
        let mut d = Distribution::default();
        [5u64, 50, 500_000].iter().for_each(|&v| d.record(v));
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(d.hdr_base64())
            .unwrap();
        let back: Histogram<u64> = hdrhistogram::serialization::Deserializer::new()
            .deserialize(&mut &bytes[..])
            .unwrap();
        assert_eq!(back.len(), 3);
        assert_eq!(back.value_at_quantile(1.0), d.hdr().value_at_quantile(1.0));
    }
}
