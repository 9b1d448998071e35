//! A/B benchmarking: run commands interleaved, measure each run, and decide with statistics
//! whether a candidate is faster, slower or the same as the baseline.
//! The statistics and the verdict rule live in [`crate::stats`], shared with `compare`.

pub mod analysis;
pub mod callgrind;
pub mod counters;
pub mod layouts;
pub mod schedule;
pub mod spawn;
