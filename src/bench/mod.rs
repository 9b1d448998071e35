//! A/B benchmarking: run commands interleaved, measure each run, and decide with statistics
//! whether a candidate is faster, slower or the same as the baseline.
//!
//! [`stats`] is the pure statistical core: medians, bootstrap confidence intervals, the
//! Mann-Whitney U test and the verdict rule.

pub mod analysis;
pub mod callgrind;
pub mod counters;
pub mod schedule;
pub mod spawn;
pub mod stats;
