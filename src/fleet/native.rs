//! Kernel log-linear buckets as a Prometheus native histogram.
//!
//! Why this mapping: a native histogram of schema `s` has bucket boundaries at `2^(k·2^-s)`
//! (bucket `k` is `(2^((k−1)·2^-s), 2^(k·2^-s)]`), geometric steps, while a log-linear bucket
//! splits each power of two into 8 *linear* steps. The two grids share only the powers of two
//! (every schema ≥ 0 has them), so no schema holds the kernel buckets exactly. We use schema
//! [`SCHEMA`] = 5: 32 buckets per power of two, each at most 2^(1/32) − 1 = 2.19% wide, a third
//! of the narrowest log-linear bucket (1/15 = 6.67%). Each log-linear bucket `[lo, hi)` is
//! spread over the native buckets it overlaps in proportion to the overlap (the uniform
//! within-bucket assumption latscope's own percentile interpolation makes); the counts are
//! rounded cumulatively inside each log-linear bucket, so every log-linear bucket keeps its
//! exact integer count and every power of two its exact cumulative count. Values are ns: the
//! metric is in nanoseconds, not seconds, because 1 ns = 2^-29.9 s would move the powers of two
//! off the native grid.
//!
//! The exact min and max narrow the lowest and highest bucket first, as they do in latscope's
//! own percentiles.
//!
//! The error bound: PromQL `histogram_quantile` interpolates inside one native bucket, and the
//! spread cumulative count at every native boundary is latscope's own piecewise-linear
//! cumulative count there (± ½ from rounding), so a PromQL quantile is within one native bucket
//! (2.19%) plus one count's share of a log-linear bucket of latscope's own interpolated
//! percentile (the rank conventions differ by that much: latscope's nearest rank ⌈q·n⌉, PromQL's
//! q·n), and within the log-linear bucket (12.5%) plus one native bucket of the true value. Schema 3 (9.05%) would be coarser than the kernel's 6.67–12.5% buckets and lose
//! resolution; schemas 6–8 cost 2–8× the buckets for an interpolation the data cannot support.
//!
//! A log-linear bucket holding the integers `lo..hi` is the continuous range `[lo, hi)` here,
//! so a native boundary at a power of two `2^m` counts exactly the values `< 2^m` below it
//! (Prometheus reads a native boundary as `≤`: only values of exactly `2^m` ns differ). Values
//! of 0 go to the zero bucket (threshold 0). Prometheus 2.42 has no custom-bucket (schema −53)
//! native histograms: its exposition protobuf has no field for custom bounds, and a histogram
//! sent with schema −53 is stored but `histogram_quantile` on it is NaN (checked against
//! Debian's 2.42), so an exponential schema is the only choice.

use std::collections::BTreeMap;

use crate::stats::loglinear::{self, Bucketed};

/// The native histogram schema used: 2^5 = 32 buckets per power of two.
pub const SCHEMA: i32 = 5;

/// A native histogram's positive side in Prometheus' sparse form, plus its totals.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Native {
    /// values that were 0
    pub zero_count: u64,
    /// `(offset, length)` runs of consecutive buckets: the first offset is the first bucket's
    /// index, later ones the gap since the previous run
    pub spans: Vec<(i32, u32)>,
    /// each bucket's count minus the previous bucket's (the first: its count)
    pub deltas: Vec<i64>,
    /// values in all (the buckets' sum)
    pub count: u64,
    /// sum of the values
    pub sum: f64,
}

/// The upper boundary of native bucket `index` at [`SCHEMA`].
pub fn upper_bound(index: i32) -> f64 {
    (f64::from(index) / f64::from(1 << SCHEMA)).exp2()
}

/// The index of the native bucket whose range `(lower, upper]` holds `x > 0`.
pub fn index_of(x: f64) -> i32 {
    let i = (x.log2() * f64::from(1 << SCHEMA)).ceil() as i32;
    // log2 rounding may land one off next to a boundary: settle it with the boundaries.
    if x > upper_bound(i) {
        i + 1
    } else if x <= upper_bound(i - 1) {
        i - 1
    } else {
        i
    }
}

/// Counts per native bucket index of a bucketed distribution, spread as the module doc says.
pub fn bucket_counts(b: &Bucketed) -> (u64, BTreeMap<i32, u64>) {
    let mut zero = 0;
    let mut native = BTreeMap::new();
    for (i, &n) in b.counts.iter().enumerate().filter(|(_, n)| **n > 0) {
        let (lo, hi) = loglinear::bounds(i);
        if hi <= 1 {
            zero = u64::saturating_add(zero, n); // bucket 0 holds the value 0 only
            continue;
        }
        // The exact min and max narrow the outer buckets, as in latscope's own percentiles
        // (unless they disagree with the buckets: bpftrace prints the maps one after another).
        let (lo, hi) = match (lo.max(b.min), hi.min(b.max.saturating_add(1))) {
            (low, high) if low < high => (low, high),
            _ => (lo, hi),
        };
        spread(lo as f64, hi as f64, n, &mut native);
    }
    (zero, native)
}

/// Adds `n` values spread uniformly over `[lo, hi)` to the native buckets they overlap,
/// rounding the cumulative share so that exactly `n` are added.
fn spread(lo: f64, hi: f64, n: u64, native: &mut BTreeMap<i32, u64>) {
    let mut given = 0u64;
    let mut index = index_of(lo.max(f64::MIN_POSITIVE));
    loop {
        let upper = upper_bound(index);
        let cumulative = if upper >= hi {
            n
        } else {
            ((upper - lo) / (hi - lo) * n as f64).round() as u64
        };
        let add = cumulative.min(n) - given;
        if add > 0 {
            let count = native.entry(index).or_default();
            *count = count.saturating_add(add);
        }
        given += add;
        if upper >= hi {
            break;
        }
        index += 1;
    }
}

impl Native {
    /// The native histogram of a bucketed distribution.
    pub fn of(b: &Bucketed) -> Native {
        let (zero_count, counts) = bucket_counts(b);
        let mut native = Native {
            zero_count,
            count: counts
                .values()
                .fold(zero_count, |a, &n| a.saturating_add(n)),
            sum: b.sum as f64,
            ..Native::default()
        };
        let mut previous_index: Option<i32> = None;
        let mut previous_count = 0i64;
        for (&index, &count) in &counts {
            match previous_index {
                Some(p) if index == p + 1 => {
                    if let Some(last) = native.spans.last_mut() {
                        last.1 += 1;
                    }
                }
                Some(p) => native.spans.push((index - p - 1, 1)),
                None => native.spans.push((index, 1)),
            }
            let count = count as i64;
            native.deltas.push(count - previous_count);
            previous_count = count;
            previous_index = Some(index);
        }
        native
    }
}

/// Classic cumulative-ready buckets at every power of two (exact from log-linear buckets for the
/// values below each bound; Prometheus reads `le` as `≤`, so a value of exactly `2^m` ns is
/// counted one bucket up):
/// `(upper bound, count of values below it and at or above the previous bound)`, ending with
/// `(f64::INFINITY, 0)` for +Inf, the form prometheus-client's encoders take.
pub fn classic_buckets(b: &Bucketed) -> Vec<(f64, u64)> {
    let mut out: Vec<(f64, u64)> = Vec::new();
    for (i, &n) in b.counts.iter().enumerate().filter(|(_, n)| **n > 0) {
        let (lo, _) = loglinear::bounds(i);
        // The power of two above the bucket: every log-linear bucket lies inside one.
        let upper = if lo == 0 {
            1.0
        } else {
            (2f64).powi(64 - lo.leading_zeros() as i32)
        };
        match out.last_mut() {
            Some(last) if last.0 == upper => last.1 = last.1.saturating_add(n),
            _ => out.push((upper, n)),
        }
    }
    out.push((f64::INFINITY, 0));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucketed(counts: &[(usize, u64)]) -> Bucketed {
        let mut b = Bucketed::default();
        for &(i, n) in counts {
            if b.counts.len() <= i {
                b.counts.resize(i + 1, 0);
            }
            b.counts[i] = n;
            b.count += n;
        }
        b
    }

    #[test]
    fn native_boundaries_at_schema_5_include_every_power_of_two() {
        assert_eq!(upper_bound(0), 1.0);
        assert_eq!(upper_bound(32 * 16), 65_536.0);
        assert_eq!(index_of(65_536.0), 512);
        assert_eq!(index_of(65_536.5), 513);
        assert_eq!(index_of(32.0), 160);
        assert_eq!(index_of(32.5), 161);
        for k in 150..700 {
            assert_eq!(index_of(upper_bound(k)), k, "boundary {k}");
        }
    }

    #[test]
    fn a_bucket_of_32_to_36_ns_is_spread_as_computed_by_hand() {
        // Native boundaries above 32 at schema 5: 32·2^(j/32) = 32.7007, 33.4168, 34.1485,
        // 34.8962, 35.6604, 36.4412. Cumulative shares of [32, 36): 0.7007/4 = 17.52% → 18 of
        // 100, 1.4168/4 = 35.42% → 35 (+17), 2.1485/4 = 53.71% → 54 (+19), 2.8962/4 = 72.41%
        // → 72 (+18), 3.6604/4 = 91.51% → 92 (+20), the last 8 in the bucket ending at 36.4412.
        let b = bucketed(&[(loglinear::index(32), 100)]);
        let (zero, counts) = bucket_counts(&b);
        assert_eq!(zero, 0);
        let got: Vec<(i32, u64)> = counts.into_iter().collect();
        assert_eq!(
            got,
            vec![
                (161, 18),
                (162, 17),
                (163, 19),
                (164, 18),
                (165, 20),
                (166, 8)
            ]
        );
        let native = Native::of(&b);
        assert_eq!(native.spans, vec![(161, 6)]);
        assert_eq!(native.deltas, vec![18, -1, 2, -1, 2, -12]);
        assert_eq!(native.count, 100);
    }

    #[test]
    fn every_power_of_two_keeps_its_exact_cumulative_count() {
        let mut b = Bucketed::default();
        for i in 0..5000u64 {
            b.record(40_000 + i * i % 1_000_000);
        }
        b.record(0);
        let (zero, counts) = bucket_counts(&b);
        assert_eq!(zero, 1);
        assert_eq!(zero + counts.values().sum::<u64>(), b.count);
        for m in 10..25 {
            let exact = b
                .counts
                .iter()
                .enumerate()
                .filter(|(i, _)| loglinear::bounds(*i).1 <= 1 << m)
                .map(|(_, n)| n)
                .sum::<u64>();
            let native = zero + counts.range(..=32 * m).map(|(_, n)| n).sum::<u64>();
            assert_eq!(native, exact, "below 2^{m}");
        }
    }

    #[test]
    fn the_exact_min_and_max_narrow_the_outer_buckets() {
        // 10 values in [32, 36) with min 33 and max 34: spread over [33, 35), whose native
        // boundaries are 33.4168 (cumulative share 20.84% → 2), 34.1485 (57.43% → 6, +4),
        // 34.8962 (94.81% → 9, +3), and the last 1 in the bucket ending at 35.6604.
        let mut b = bucketed(&[(loglinear::index(32), 10)]);
        (b.min, b.max) = (33, 34);
        let (_, counts) = bucket_counts(&b);
        let got: Vec<(i32, u64)> = counts.into_iter().collect();
        assert_eq!(got, vec![(162, 2), (163, 4), (164, 3), (165, 1)]);
        // A max below the buckets (printed before them) leaves the buckets whole.
        b.max = 20;
        assert_eq!(bucket_counts(&b).1.values().sum::<u64>(), 10);
    }

    #[test]
    fn sparse_spans_skip_empty_buckets_with_offsets() {
        // One value in [16, 18) and one in [1024, 1152): far apart.
        let b = bucketed(&[(loglinear::index(16), 1), (loglinear::index(1024), 1)]);
        let native = Native::of(&b);
        // A single value goes to the native bucket where the cumulative share reaches ½: in
        // [16, 18) that is 17, in (16·2^(2/32), 16·2^(3/32)] = (16.708, 17.074], index
        // 4·32 + 3 = 131; in [1024, 1152) it is 1088, in (1069.34, 1092.75], index 323.
        assert_eq!(native.spans, vec![(131, 1), (323 - 131 - 1, 1)]);
        assert_eq!(native.deltas, vec![1, 0]);
    }

    #[test]
    fn classic_buckets_are_the_exact_power_of_two_counts() {
        let mut b = Bucketed::default();
        [0u64, 5, 16, 17, 31, 32, 1000]
            .iter()
            .for_each(|&v| b.record(v));
        assert_eq!(
            classic_buckets(&b),
            vec![
                (1.0, 1),
                (8.0, 1),
                (32.0, 3),
                (64.0, 1),
                (1024.0, 1),
                (f64::INFINITY, 0)
            ]
        );
    }
}
