//! The power-of-two histogram, laid out exactly like bpftrace's `hist()`.
//!
//! `[64, 128)          63395 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@                 |`: the label
//! left-aligned in 16 columns, the count right-aligned in 8, and a bar of `@` scaled so the
//! largest bucket fills 52 columns. Labels use bpftrace's binary suffixes (K = 1024). Empty
//! buckets are trimmed at both ends and kept in between.

use std::fmt::Write;

use crate::stats::Log2Counts;

/// Width of the bar of the fullest bucket.
pub const BAR_WIDTH: u64 = 52;

/// Renders `counts` (values in some unit; the caller prints the unit in the title). Returns an
/// empty string when there are no values.
pub fn render(counts: &Log2Counts) -> String {
    let Some(range) = counts.occupied() else {
        return String::new();
    };
    let max = counts.counts()[range.clone()]
        .iter()
        .copied()
        .max()
        .unwrap_or(1)
        .max(1);
    let mut out = String::new();
    for index in range {
        let count = counts.counts()[index];
        let bar = (u128::from(count) * u128::from(BAR_WIDTH) / u128::from(max)) as usize;
        let _ = writeln!(
            out,
            "{:<16} {:>8} |{:<width$}|",
            label(index),
            count,
            "@".repeat(bar),
            width = BAR_WIDTH as usize
        );
    }
    out
}

/// `[0]`, `[1]`, `[2, 4)`, ..., `[512, 1K)`, `[1K, 2K)`, ..., `[8E, ...)`.
pub fn label(index: usize) -> String {
    match Log2Counts::bounds(index) {
        (lo, Some(hi)) if hi - lo == 1 => format!("[{lo}]"),
        (lo, Some(hi)) => format!("[{}, {})", suffixed(lo), suffixed(hi)),
        (lo, None) => format!("[{}, ...)", suffixed(lo)),
    }
}

/// A power of two with bpftrace's binary suffix: 1024 → `1K`, 2^20 → `1M`.
fn suffixed(value: u64) -> String {
    const SUFFIXES: [&str; 7] = ["", "K", "M", "G", "T", "P", "E"];
    let power = value.trailing_zeros() / 10;
    format!("{}{}", value >> (power * 10), SUFFIXES[power as usize])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_match_bpftrace() {
        assert_eq!(label(0), "[0]");
        assert_eq!(label(1), "[1]");
        assert_eq!(label(2), "[2, 4)");
        assert_eq!(label(10), "[512, 1K)");
        assert_eq!(label(11), "[1K, 2K)");
        assert_eq!(label(21), "[1M, 2M)");
        assert_eq!(label(64), "[8E, ...)");
    }

    #[test]
    fn rows_match_the_bpftrace_layout_of_the_mir_post() {
        // Two buckets of the Mir post: [64, 128) 63395 and [128, 256) 93800 (the largest).
        let mut counts = Log2Counts::default();
        (0..63_395).for_each(|_| counts.record(100));
        (0..93_800).for_each(|_| counts.record(200));
        let text = render(&counts);
        let expected = "\
[64, 128)           63395 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@                 |
[128, 256)          93800 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|
";
        assert_eq!(text, expected);
    }

    #[test]
    fn empty_buckets_between_occupied_ones_are_kept() {
        let mut counts = Log2Counts::default();
        counts.record(2);
        counts.record(16);
        let text = render(&counts);
        assert_eq!(text.lines().count(), 4);
        assert!(text.lines().nth(1).unwrap().starts_with("[4, 8)"));
        assert!(render(&Log2Counts::default()).is_empty());
    }
}
