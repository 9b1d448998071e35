//! Exact power-of-two bucket counts, the layout of bpftrace's `hist()`.

/// Counts per power-of-two bucket: index 0 holds the value 0, index `k ≥ 1` holds
/// `[2^(k-1), 2^k)`. Counts are exact, unlike buckets re-derived from an HdrHistogram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Log2Counts {
    counts: [u64; 65],
}

impl Default for Log2Counts {
    fn default() -> Self {
        Log2Counts { counts: [0; 65] }
    }
}

impl Log2Counts {
    /// Bucket index of a value.
    #[inline]
    pub const fn index(value: u64) -> usize {
        (64 - value.leading_zeros()) as usize
    }

    /// Inclusive lower and exclusive upper bound of bucket `index` (`None` upper bound for the
    /// last bucket, whose bound 2^64 does not fit in a `u64`).
    pub const fn bounds(index: usize) -> (u64, Option<u64>) {
        match index {
            0 => (0, Some(1)),
            64 => (1 << 63, None),
            k => (1 << (k - 1), Some(1 << k)),
        }
    }

    /// Adds one value.
    #[inline]
    pub fn record(&mut self, value: u64) {
        self.counts[Self::index(value)] += 1;
    }

    /// Adds `n` occurrences of one value.
    #[inline]
    pub fn record_n(&mut self, value: u64, n: u64) {
        self.counts[Self::index(value)] += n;
    }

    /// Adds all counts of `other`.
    pub fn merge(&mut self, other: &Log2Counts) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
    }

    /// The counts, indexed as described on the type.
    pub fn counts(&self) -> &[u64; 65] {
        &self.counts
    }

    /// The range of indices from the first to the last non-empty bucket (bpftrace trims empty
    /// buckets at both ends but keeps those in between), or `None` when empty.
    pub fn occupied(&self) -> Option<std::ops::RangeInclusive<usize>> {
        let first = self.counts.iter().position(|&c| c > 0)?;
        let last = self.counts.iter().rposition(|&c| c > 0)?;
        Some(first..=last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_split_at_powers_of_two() {
        assert_eq!(Log2Counts::index(0), 0);
        assert_eq!(Log2Counts::index(1), 1);
        assert_eq!(Log2Counts::index(2), 2);
        assert_eq!(Log2Counts::index(3), 2);
        assert_eq!(Log2Counts::index(127), 7);
        assert_eq!(Log2Counts::index(128), 8);
        assert_eq!(Log2Counts::bounds(8), (128, Some(256)));
        assert_eq!(Log2Counts::index(u64::MAX), 64);
        assert_eq!(Log2Counts::bounds(64), (1 << 63, None));
    }

    #[test]
    fn occupied_range_trims_empty_ends_only() {
        let mut h = Log2Counts::default();
        h.record(3);
        h.record(100);
        assert_eq!(h.occupied(), Some(2..=7));
        assert_eq!(Log2Counts::default().occupied(), None);
    }
}
