//! The linear histogram with the statistics header of the Mir `text_histogram` script:
//!
//! ```text
//! # count = 18747; min = 1 µs; max = 2000 µs
//! # 2176 values outside [0 µs, 2000 µs)
//! # mean = 1458.421 µs; variance = 10050021.277 µs²; SD = 3170.177 µs; median = 738 µs
//! # each ∎ represents a count of 50
//!        0 -      100 µs [     0]:
//!      100 -      200 µs [  3773]: ∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎
//! ```
//!
//! Buckets are half-open `[lo, hi)` and counted exactly while reading (not re-derived from the
//! HdrHistogram), so a sample on a boundary is always in the upper bucket.

use std::fmt::Write;

use crate::stats::{Distribution, Unit};

/// Longest bar, in characters; counts are scaled down to fit (as the script did past 75).
pub const MAX_BAR: u64 = 75;

/// Renders the header and buckets, or an empty string when the distribution has no linear
/// counts or no samples.
pub fn render(dist: &Distribution, unit: Unit) -> String {
    let (Some(linear), Some(min), Some(max)) =
        (dist.linear(), dist.summary().min(), dist.summary().max())
    else {
        return String::new();
    };
    let spec = linear.spec();
    let s = dist.summary();
    let f = |ns| unit.format(ns);
    let scale = |x: f64| unit.from_nanos(x);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# count = {}; min = {}; max = {}",
        s.count(),
        f(min),
        f(max)
    );
    let _ = writeln!(
        out,
        "# {} values outside [{}, {})",
        linear.below() + linear.above(),
        f(spec.min),
        f(spec.max)
    );
    let variance = s.variance().unwrap_or(0.0) / (unit.nanos() as f64).powi(2);
    let _ = writeln!(
        out,
        "# mean = {:.3} {u}; variance = {variance:.3} {u}²; SD = {:.3} {u}; median = {}",
        scale(s.mean().unwrap_or(0.0)),
        scale(s.stddev().unwrap_or(0.0)),
        f(dist.value_at_quantile(0.5).unwrap_or(0)),
        u = unit.symbol(),
    );
    let largest = linear.counts().iter().copied().max().unwrap_or(0);
    let per_mark = largest.div_ceil(MAX_BAR).max(1);
    let _ = writeln!(out, "# each ∎ represents a count of {per_mark}");
    for (i, &count) in linear.counts().iter().enumerate() {
        let (lo, hi) = spec.bucket_bounds(i);
        let _ = writeln!(
            out,
            "{:>10} - {:>10} {} [{:>6}]: {}",
            unit.format_number(lo),
            unit.format_number(hi),
            unit.symbol(),
            count,
            "∎".repeat((count / per_mark) as usize)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::LinearSpec;

    #[test]
    fn header_and_buckets_match_hand_computed_values() {
        let spec = LinearSpec::parse("0,30,10", Unit::Us).unwrap();
        let mut d = Distribution::new(Some(spec));
        // 5, 15, 15, 25, 40 µs: mean 20; squared deviations 225+25+25+25+400 = 700, so the
        // population variance is 140 and the SD √140 = 11.832; median 15.
        for us in [5u64, 15, 15, 25, 40] {
            d.record(us * 1_000);
        }
        let text = render(&d, Unit::Us);
        let expected = "\
# count = 5; min = 5 µs; max = 40 µs
# 1 values outside [0 µs, 30 µs)
# mean = 20.000 µs; variance = 140.000 µs²; SD = 11.832 µs; median = 15 µs
# each ∎ represents a count of 1
         0 -         10 µs [     1]: ∎
        10 -         20 µs [     2]: ∎∎
        20 -         30 µs [     1]: ∎
";
        assert_eq!(text, expected);
    }

    #[test]
    fn bars_are_scaled_when_a_bucket_exceeds_the_width() {
        let spec = LinearSpec::parse("0,10,10", Unit::Ns).unwrap();
        let mut d = Distribution::new(Some(spec));
        (0..150).for_each(|_| d.record(1));
        let text = render(&d, Unit::Ns);
        assert!(text.contains("# each ∎ represents a count of 2"));
        assert!(text.contains(&format!("[   150]: {}\n", "∎".repeat(75))));
    }
}
