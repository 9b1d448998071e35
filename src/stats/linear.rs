//! Exact linear bucket counts for `--linear MIN,MAX,STEP`.

use super::Unit;

/// Most buckets a linear histogram may have; more would not fit on a screen anyway.
pub const MAX_LINEAR_BUCKETS: u64 = 10_000;

/// The layout of a linear histogram: buckets `[min + i·step, min + (i+1)·step)` covering
/// `[min, max)`, all in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinearSpec {
    /// Lower bound of the first bucket (inclusive).
    pub min: u64,
    /// Upper bound of the last bucket (exclusive).
    pub max: u64,
    /// Width of each bucket.
    pub step: u64,
}

/// Why a `MIN,MAX,STEP` text is not a valid linear histogram.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinearSpecError {
    /// Not three comma-separated fields.
    #[error("expected MIN,MAX,STEP (three values separated by commas), got '{0}'")]
    Shape(String),
    /// A field that is not a non-negative number with an optional unit.
    #[error("'{0}' is not a duration (a number with an optional unit: 250, 250us, 1.5ms)")]
    Number(String),
    /// Bounds or step that make no buckets.
    #[error("MAX must be greater than MIN and STEP greater than zero")]
    Empty,
    /// Too many buckets to print.
    #[error("{0} buckets is too many (at most {MAX_LINEAR_BUCKETS}); use a larger STEP")]
    TooMany(u64),
}

impl LinearSpec {
    /// Parses `MIN,MAX,STEP`. Each field is a number with an optional unit suffix (`ns`, `us`,
    /// `ms`, `s`); bare numbers are in `default_unit`. Fractions are allowed (`0.5ms`) and are
    /// rounded to the nearest nanosecond.
    pub fn parse(text: &str, default_unit: Unit) -> Result<LinearSpec, LinearSpecError> {
        let fields: Vec<&str> = text.split(',').map(str::trim).collect();
        let [min, max, step] = fields[..] else {
            return Err(LinearSpecError::Shape(text.to_string()));
        };
        let spec = LinearSpec {
            min: parse_duration(min, default_unit)?,
            max: parse_duration(max, default_unit)?,
            step: parse_duration(step, default_unit)?,
        };
        if spec.max <= spec.min || spec.step == 0 {
            return Err(LinearSpecError::Empty);
        }
        let buckets = spec.bucket_count();
        if buckets > MAX_LINEAR_BUCKETS {
            return Err(LinearSpecError::TooMany(buckets));
        }
        Ok(spec)
    }

    /// Number of buckets (the last one may be narrower when STEP does not divide the range).
    pub fn bucket_count(&self) -> u64 {
        (self.max - self.min).div_ceil(self.step)
    }

    /// Bounds `[lo, hi)` of bucket `i`.
    pub fn bucket_bounds(&self, i: usize) -> (u64, u64) {
        let lo = self
            .min
            .saturating_add((i as u64).saturating_mul(self.step));
        (lo, lo.saturating_add(self.step).min(self.max))
    }
}

/// Parses a duration: a non-negative number with an optional unit (`250`, `250us`, `1.5ms`);
/// bare numbers are in `default_unit`. Returns nanoseconds, rounded.
pub fn parse_duration(text: &str, default_unit: Unit) -> Result<u64, LinearSpecError> {
    let bad = || LinearSpecError::Number(text.to_string());
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let unit = match unit.trim() {
        "" => default_unit,
        u => u.parse().map_err(|_| bad())?,
    };
    let value: f64 = number.parse().map_err(|_| bad())?;
    let ns = (value * unit.nanos() as f64).round();
    if !ns.is_finite() || ns < 0.0 || ns >= u64::MAX as f64 {
        return Err(bad());
    }
    Ok(ns as u64)
}

/// Exact counts per bucket of a [`LinearSpec`], plus the values that fell outside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinearCounts {
    spec: LinearSpec,
    counts: Vec<u64>,
    below: u64,
    above: u64,
}

impl LinearCounts {
    /// Empty counts for `spec`.
    pub fn new(spec: LinearSpec) -> Self {
        LinearCounts {
            spec,
            counts: vec![0; spec.bucket_count() as usize],
            below: 0,
            above: 0,
        }
    }

    /// Adds one value.
    #[inline]
    pub fn record(&mut self, value: u64) {
        if value < self.spec.min {
            self.below += 1;
        } else if value >= self.spec.max {
            self.above += 1;
        } else {
            self.counts[((value - self.spec.min) / self.spec.step) as usize] += 1;
        }
    }

    /// Adds every count of `other`, which must have the same spec (it is ignored otherwise).
    pub fn merge(&mut self, other: &LinearCounts) {
        if other.spec != self.spec {
            return;
        }
        self.below += other.below;
        self.above += other.above;
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
    }

    /// The layout.
    pub fn spec(&self) -> LinearSpec {
        self.spec
    }

    /// Count per bucket.
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    /// Values below MIN.
    pub fn below(&self) -> u64 {
        self.below
    }

    /// Values at or above MAX.
    pub fn above(&self) -> u64 {
        self.above
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_spec_takes_bare_numbers_in_the_default_unit_and_suffixes() {
        let spec = LinearSpec::parse("0,2000,100", Unit::Us).unwrap();
        assert_eq!(
            spec,
            LinearSpec {
                min: 0,
                max: 2_000_000,
                step: 100_000
            }
        );
        assert_eq!(spec.bucket_count(), 20);
        let spec = LinearSpec::parse("1us, 2ms, 0.5ms", Unit::Ns).unwrap();
        assert_eq!(
            spec,
            LinearSpec {
                min: 1_000,
                max: 2_000_000,
                step: 500_000
            }
        );
        assert_eq!(spec.bucket_bounds(3), (1_501_000, 2_000_000));
    }

    #[test]
    fn linear_spec_rejects_bad_shapes_with_a_reason() {
        assert!(matches!(
            LinearSpec::parse("1,2", Unit::Us),
            Err(LinearSpecError::Shape(_))
        ));
        assert!(matches!(
            LinearSpec::parse("a,2,1", Unit::Us),
            Err(LinearSpecError::Number(_))
        ));
        assert!(matches!(
            LinearSpec::parse("5,2,1", Unit::Us),
            Err(LinearSpecError::Empty)
        ));
        assert!(matches!(
            LinearSpec::parse("0,2,0", Unit::Us),
            Err(LinearSpecError::Empty)
        ));
        assert!(matches!(
            LinearSpec::parse("0,1s,1ns", Unit::Us),
            Err(LinearSpecError::TooMany(_))
        ));
    }

    #[test]
    fn linear_counts_are_half_open_and_count_outliers() {
        let mut c = LinearCounts::new(LinearSpec {
            min: 10,
            max: 40,
            step: 10,
        });
        for v in [9, 10, 19, 20, 39, 40, 1000] {
            c.record(v);
        }
        assert_eq!(c.counts(), &[2, 1, 1]);
        assert_eq!(c.below(), 1);
        assert_eq!(c.above(), 2);
    }
}
