//! Statistics over latency samples.
//!
//! Every sample is an integer number of nanoseconds. A [`Distribution`] keeps three views of the
//! same samples, because each answers a different question without error:
//!
//! * [`Summary`]: exact count, min, max, mean and standard deviation. Sums are kept in `u128`, so
//!   the mean and variance are exact up to the final division (no Welford drift, no overflow for
//!   any realistic log).
//! * an HdrHistogram with 3 significant digits: percentiles within 0.1% of the true value, in
//!   constant memory, mergeable across files and runs.
//! * exact bucket counts for the terminal histograms ([`Log2Counts`] per display unit and an
//!   optional [`LinearCounts`]), so that a bar never moves a sample across a bucket boundary the
//!   way counts derived from HDR buckets could.
//!
//! This is also the one home of the A/B statistics: [`ab`] (medians, quantiles, bootstrap,
//! Mann-Whitney) and [`change`] (the one rule that turns two samples into a verdict, used by
//! `bench`, `compare` and `report` alike).

pub mod ab;
pub mod change;
mod distribution;
mod linear;
mod log2;
pub mod loglinear;
pub mod paired;
mod parallel;
mod summary;
mod unit;

pub use distribution::{
    BINNED_AFTER_DISTINCT, Distribution, EXACT_DISTINCT_LIMIT, PERCENTILES, Percentiles,
    SIGNIFICANT_DIGITS,
};

pub use linear::{LinearCounts, LinearSpec, LinearSpecError, parse_duration};
pub use log2::Log2Counts;
pub use parallel::parallel_map;
pub use summary::Summary;
pub use unit::{Unit, UnitParseError};
