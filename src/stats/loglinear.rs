//! Log-linear buckets: the scheme `latscope live` computes inside the kernel.
//!
//! Values below 16 have a bucket each. Above, each power of two `[2^m, 2^(m+1))` is split into
//! 8 equal sub-buckets, so a bucket is at most 1/8 = 12.5% of its lower bound wide (bpftrace's
//! `hist()` is one bucket per power of two: 100% wide). The index needs only shifts and
//! comparisons, so BPF can compute it:
//!
//! ```text
//! v < 16:  index = v
//! v ≥ 16:  m = ⌊log2 v⌋, index = 16 + (m − 4)·8 + ((v >> (m − 3)) & 7)
//! ```
//!
//! Percentiles from buckets are interpolated linearly inside the bucket that holds the rank and
//! clamped to the exact min and max; the error bound is that bucket's width.

use super::Log2Counts;

/// Number of buckets: index 0..=495 covers every `u64`.
pub const BUCKETS: usize = 16 + 60 * 8;

/// The bucket index of `value`.
pub const fn index(value: u64) -> usize {
    if value < 16 {
        return value as usize;
    }
    let m = 63 - value.leading_zeros() as usize;
    16 + (m - 4) * 8 + ((value >> (m - 3)) & 7) as usize
}

/// The bounds `[lo, hi)` of bucket `index` (`hi` saturates at `u64::MAX`).
pub const fn bounds(index: usize) -> (u64, u64) {
    if index < 16 {
        return (index as u64, index as u64 + 1);
    }
    let m = (index - 16) / 8 + 4;
    let sub = ((index - 16) % 8) as u64;
    let width = 1u64 << (m - 3);
    let lo = (8 + sub) * width;
    (lo, lo.saturating_add(width))
}

/// A distribution known only by its log-linear bucket counts plus exact count, sum, min and
/// max (what the kernel can aggregate cheaply).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Bucketed {
    /// count per bucket index (trailing empty buckets may be absent)
    pub counts: Vec<u64>,
    /// number of values
    pub count: u64,
    /// sum of values
    pub sum: u128,
    /// smallest value (meaningless when `count` is 0)
    pub min: u64,
    /// largest value (meaningless when `count` is 0)
    pub max: u64,
}

/// A percentile estimated from buckets, with the bucket that bounds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Estimate {
    /// the estimate, in the values' unit
    pub value: u64,
    /// the true nearest-rank value lies in `[low, high]`
    pub low: u64,
    /// see `low`
    pub high: u64,
}

impl Estimate {
    /// Largest possible distance from the estimate to the true value.
    pub fn error_bound(&self) -> u64 {
        (self.value - self.low).max(self.high - self.value)
    }
}

impl Bucketed {
    /// Records one value (for tests and user-space aggregation; the kernel does the same).
    pub fn record(&mut self, value: u64) {
        let i = index(value);
        if self.counts.len() <= i {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] += 1;
        if self.count == 0 || value < self.min {
            self.min = value;
        }
        self.max = self.max.max(value);
        self.count += 1;
        self.sum += u128::from(value);
    }

    /// The mean, or `None` when empty.
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum as f64 / self.count as f64)
    }

    /// The nearest-rank percentile at quantile `q`, interpolated within its bucket.
    pub fn percentile(&self, q: f64) -> Option<Estimate> {
        // The rank comes from the buckets themselves: bpftrace prints the histogram and the
        // count one after another, so under load `count` can be ahead of the buckets.
        let total: u64 = self.counts.iter().sum();
        if total == 0 {
            return None;
        }
        let rank = ((q.min(1.0) * total as f64).ceil() as u64).max(1);
        let mut before = 0;
        for (i, &n) in self.counts.iter().enumerate() {
            if n == 0 || before + n < rank {
                before += n;
                continue;
            }
            let (lo, hi) = bounds(i);
            // The exact min and max narrow the bucket, unless they disagree with it (bpftrace
            // prints the maps one after another, so under load they may).
            let (low, high) = match (lo.max(self.min), hi.saturating_sub(1).min(self.max)) {
                (low, high) if low <= high => (low, high),
                _ => (lo, hi.saturating_sub(1).max(lo)),
            };
            // The rank-th value is the (rank − before)-th of n values spread over [low, high].
            let fraction = (rank - before) as f64 / n as f64;
            let value = low + ((high - low) as f64 * fraction).round() as u64;
            return Some(Estimate {
                value: value.clamp(low, high),
                low,
                high,
            });
        }
        None
    }

    /// Exact power-of-two counts: every log-linear bucket lies inside one power of two.
    pub fn log2(&self) -> Log2Counts {
        let mut log2 = Log2Counts::default();
        for (i, &n) in self.counts.iter().enumerate().filter(|(_, n)| **n > 0) {
            log2.record_n(bounds(i).0, n);
        }
        log2
    }

    /// Counts added since `earlier` (a previous snapshot of the same cumulative histogram).
    /// Min and max stay cumulative: the kernel cannot subtract them.
    pub fn since(&self, earlier: &Bucketed) -> Bucketed {
        let counts = self
            .counts
            .iter()
            .enumerate()
            .map(|(i, &n)| n.saturating_sub(earlier.counts.get(i).copied().unwrap_or(0)))
            .collect();
        Bucketed {
            counts,
            count: self.count.saturating_sub(earlier.count),
            sum: self.sum.saturating_sub(earlier.sum),
            min: self.min,
            max: self.max,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_falls_inside_its_bucket_and_buckets_are_at_most_an_eighth_wide() {
        let mut values: Vec<u64> = (0..5000).collect();
        values.extend(
            (4..64).flat_map(|m| [1u64 << m, (1u64 << m) - 1, (1u64 << m) + 1, (3u64 << m) / 2]),
        );
        values.push(u64::MAX);
        for v in values {
            let i = index(v);
            let (lo, hi) = bounds(i);
            assert!(
                lo <= v && (v < hi || hi == u64::MAX),
                "{v} not in [{lo}, {hi}) of bucket {i}"
            );
            assert!(i < BUCKETS);
            if v >= 16 {
                assert!(
                    (hi - lo) * 8 <= lo,
                    "bucket {i} [{lo}, {hi}) wider than 12.5%"
                );
            }
        }
    }

    #[test]
    fn indices_are_contiguous_and_increasing() {
        // [16, 32) is split into 8 buckets of width 2, [32, 64) into 8 of width 4.
        assert_eq!(index(15), 15);
        assert_eq!(index(16), 16);
        assert_eq!(index(17), 16);
        assert_eq!(index(18), 17);
        assert_eq!(index(31), 23);
        assert_eq!(index(32), 24);
        assert_eq!(bounds(24), (32, 36));
        assert_eq!(index(u64::MAX), BUCKETS - 1);
        for i in 1..BUCKETS {
            assert_eq!(bounds(i - 1).1, bounds(i).0, "gap before bucket {i}");
        }
    }

    #[test]
    fn interpolated_percentiles_stay_within_their_bucket_of_the_exact_value() {
        // 60% at 50 µs, 30% at 200 µs, 10% at 1 ms (the live test target's mix), with jitter.
        let mut b = Bucketed::default();
        let mut exact = Vec::new();
        for i in 0..1000u64 {
            let base = match i % 10 {
                9 => 1_000_000,
                6..=8 => 200_000,
                _ => 50_000,
            };
            let v = base + (i * 7919) % 3000;
            b.record(v);
            exact.push(v);
        }
        exact.sort_unstable();
        for q in [0.5, 0.9, 0.99, 0.999] {
            let truth = exact[((q * 1000.0f64).ceil() as usize) - 1];
            let e = b.percentile(q).unwrap();
            assert!(
                e.low <= truth && truth <= e.high,
                "q={q}: {truth} outside [{}, {}]",
                e.low,
                e.high
            );
            assert!(e.value.abs_diff(truth) <= e.error_bound());
            assert!(e.error_bound() as f64 <= truth as f64 * 0.125 + 1.0);
        }
        assert_eq!(b.percentile(1.0).unwrap().value, exact[999]);
    }

    #[test]
    fn a_count_ahead_of_the_buckets_does_not_lose_the_top_percentiles() {
        let mut b = Bucketed::default();
        (0..100).for_each(|v| b.record(1000 + v));
        b.count += 5; // as when `stats` is printed after more events than `hist` saw
        let p = b.percentile(0.999).unwrap();
        assert!((1000..=1099).contains(&p.value), "{p:?}");
    }

    #[test]
    fn a_max_that_disagrees_with_the_buckets_does_not_panic() {
        let mut b = Bucketed::default();
        [1000u64, 1000, 5000].iter().for_each(|&v| b.record(v));
        b.max = 1000; // printed before the last value arrived
        let p = b.percentile(0.99).unwrap();
        assert!(p.low <= p.value && p.value <= p.high, "{p:?}");
    }

    #[test]
    fn log2_counts_from_buckets_are_exact() {
        let mut b = Bucketed::default();
        let mut direct = Log2Counts::default();
        for v in [0u64, 1, 7, 16, 100, 1000, 65_535, 65_536, 1 << 40] {
            b.record(v);
            direct.record(v);
        }
        assert_eq!(b.log2(), direct);
    }

    #[test]
    fn a_later_snapshot_minus_an_earlier_one_is_what_happened_in_between() {
        let mut earlier = Bucketed::default();
        [10u64, 20].iter().for_each(|&v| earlier.record(v));
        let mut later = earlier.clone();
        [20u64, 40].iter().for_each(|&v| later.record(v));
        let diff = later.since(&earlier);
        assert_eq!(diff.count, 2);
        assert_eq!(diff.sum, 60);
        assert_eq!(diff.counts[index(20)], 1);
        assert_eq!(diff.counts[index(10)], 0);
    }
}
