//! Exact moments of a sample set.

/// Exact count, min, max, sum and sum of squares of integer nanosecond samples.
///
/// The mean and the population variance are computed from `u128` sums, so they are exact up to
/// the final floating-point division. Population variance (divide by n) is what the Mir
/// `text_histogram` script and HdrHistogram report, so our figures can be compared with theirs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    count: u64,
    min: u64,
    max: u64,
    sum: u128,
    sum_sq: u128,
}

impl Summary {
    /// Adds one sample.
    #[inline]
    pub fn record(&mut self, value: u64) {
        if self.count == 0 || value < self.min {
            self.min = value;
        }
        if value > self.max {
            self.max = value;
        }
        self.count += 1;
        let v = u128::from(value);
        self.sum += v;
        self.sum_sq = self.sum_sq.saturating_add(v * v);
    }

    /// Adds every sample of `other`.
    pub fn merge(&mut self, other: &Summary) {
        if other.count == 0 {
            return;
        }
        if self.count == 0 || other.min < self.min {
            self.min = other.min;
        }
        self.max = self.max.max(other.max);
        self.count += other.count;
        self.sum += other.sum;
        self.sum_sq = self.sum_sq.saturating_add(other.sum_sq);
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Smallest sample, or `None` when empty.
    pub fn min(&self) -> Option<u64> {
        (self.count > 0).then_some(self.min)
    }

    /// Largest sample, or `None` when empty.
    pub fn max(&self) -> Option<u64> {
        (self.count > 0).then_some(self.max)
    }

    /// Sum of all samples.
    pub fn sum(&self) -> u128 {
        self.sum
    }

    /// Arithmetic mean, or `None` when empty.
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum as f64 / self.count as f64)
    }

    /// Population variance (divide by n), or `None` when empty.
    ///
    /// Computed as `(n·Σx² − (Σx)²) / n²` in integers, which cannot go negative.
    pub fn variance(&self) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let n = u128::from(self.count);
        let numerator = match self.sum_sq.checked_mul(n) {
            Some(nsq) => (nsq - self.sum * self.sum) as f64,
            // Beyond u128 only for astronomically large inputs: fall back to floating point.
            None => {
                let mean = self.sum as f64 / n as f64;
                return Some((self.sum_sq as f64 / n as f64 - mean * mean).max(0.0));
            }
        };
        Some(numerator / (n as f64 * n as f64))
    }

    /// Population standard deviation, or `None` when empty.
    pub fn stddev(&self) -> Option<f64> {
        self.variance().map(f64::sqrt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary_of(values: &[u64]) -> Summary {
        let mut s = Summary::default();
        values.iter().for_each(|&v| s.record(v));
        s
    }

    #[test]
    fn empty_summary_has_no_statistics() {
        let s = Summary::default();
        assert_eq!(s.count(), 0);
        assert_eq!(s.min(), None);
        assert_eq!(s.mean(), None);
        assert_eq!(s.stddev(), None);
    }

    #[test]
    fn summary_matches_hand_computed_values() {
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, population variance 4, SD 2 (textbook example).
        let s = summary_of(&[2, 4, 4, 4, 5, 5, 7, 9]);
        assert_eq!(s.count(), 8);
        assert_eq!(s.min(), Some(2));
        assert_eq!(s.max(), Some(9));
        assert_eq!(s.mean(), Some(5.0));
        assert_eq!(s.variance(), Some(4.0));
        assert_eq!(s.stddev(), Some(2.0));
    }

    #[test]
    fn variance_is_exact_for_large_nanosecond_values() {
        // Values near 1 hour in ns: f64 sums of squares would lose the small spread entirely.
        let base = 3_600_000_000_000u64;
        let s = summary_of(&[base + 1, base + 3]);
        assert_eq!(s.mean(), Some((base + 2) as f64));
        assert_eq!(s.variance(), Some(1.0));
    }

    #[test]
    fn merging_equals_recording_everything_in_one() {
        let mut a = summary_of(&[5, 1, 9]);
        let b = summary_of(&[7, 0]);
        a.merge(&b);
        assert_eq!(a, summary_of(&[5, 1, 9, 7, 0]));
    }
}
