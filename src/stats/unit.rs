//! Display units. Values are always nanoseconds inside; a unit only decides how they are shown.

use std::fmt;
use std::str::FromStr;

/// A unit of time for display and for bare numbers given on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unit {
    /// nanoseconds
    Ns,
    /// microseconds
    Us,
    /// milliseconds
    Ms,
    /// seconds
    S,
}

/// An unknown unit name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown time unit '{0}' (expected ns, us, ms or s)")]
pub struct UnitParseError(pub String);

impl Unit {
    /// All units, smallest first.
    pub const ALL: [Unit; 4] = [Unit::Ns, Unit::Us, Unit::Ms, Unit::S];

    /// Nanoseconds in one of this unit.
    pub const fn nanos(self) -> u64 {
        match self {
            Unit::Ns => 1,
            Unit::Us => 1_000,
            Unit::Ms => 1_000_000,
            Unit::S => 1_000_000_000,
        }
    }

    /// Position in [`Unit::ALL`].
    pub const fn index(self) -> usize {
        match self {
            Unit::Ns => 0,
            Unit::Us => 1,
            Unit::Ms => 2,
            Unit::S => 3,
        }
    }

    /// The name on the command line (`us`, where [`Unit::symbol`] is `µs`); [`FromStr`] takes
    /// it and a few spellings more.
    pub const fn name(self) -> &'static str {
        match self {
            Unit::Ns => "ns",
            Unit::Us => "us",
            Unit::Ms => "ms",
            Unit::S => "s",
        }
    }

    /// The symbol printed after values (`µs`, not `us`).
    pub const fn symbol(self) -> &'static str {
        match self {
            Unit::Ns => "ns",
            Unit::Us => "µs",
            Unit::Ms => "ms",
            Unit::S => "s",
        }
    }

    /// Converts nanoseconds into this unit as a float, for display.
    pub fn from_nanos(self, ns: f64) -> f64 {
        ns / self.nanos() as f64
    }

    /// Formats a nanosecond value in this unit with just enough decimals to show its resolution
    /// (`1500 ns` as `1.5 µs`, `2000 ns` as `2 µs`), followed by the symbol.
    pub fn format(self, ns: u64) -> String {
        format!("{} {}", self.format_number(ns), self.symbol())
    }

    /// Like [`Unit::format`] without the symbol.
    pub fn format_number(self, ns: u64) -> String {
        let per = self.nanos();
        let whole = ns / per;
        let frac = ns % per;
        if frac == 0 {
            return whole.to_string();
        }
        let digits = per.ilog10() as usize;
        let text = format!("{whole}.{frac:0digits$}");
        text.trim_end_matches('0').to_string()
    }
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.symbol())
    }
}

impl FromStr for Unit {
    type Err = UnitParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "ns" => Ok(Unit::Ns),
            "us" | "µs" | "usec" => Ok(Unit::Us),
            "ms" | "msec" => Ok(Unit::Ms),
            "s" | "sec" => Ok(Unit::S),
            other => Err(UnitParseError(other.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formatting_keeps_every_significant_digit_and_no_more() {
        assert_eq!(Unit::Us.format(1_500), "1.5 µs");
        assert_eq!(Unit::Us.format(2_000), "2 µs");
        assert_eq!(Unit::Ms.format(1_234_567), "1.234567 ms");
        assert_eq!(Unit::Ns.format(42), "42 ns");
        assert_eq!(Unit::S.format(1), "0.000000001 s");
    }

    #[test]
    fn unit_names_parse_in_ascii_and_with_micro_sign() {
        assert_eq!("us".parse(), Ok(Unit::Us));
        assert_eq!("µs".parse(), Ok(Unit::Us));
        assert!("minutes".parse::<Unit>().is_err());
    }
}
