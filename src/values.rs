//! Typed command-line values: durations, percentages, sizes and counts parsed once, at the
//! edge, by clap. A mistake in any of them is a usage error (exit 2) with clap's message, the
//! same way in every subcommand.

use std::str::FromStr;
use std::time::Duration;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};

use latscope::stats::{Unit, parse_duration};

fn nanos(text: &str, bare: Unit) -> Result<u64, String> {
    let t = text.trim();
    // `1m` (minutes) is common in scripts; `m` alone is not a unit of ours otherwise.
    if let Some(minutes) = t
        .strip_suffix('m')
        .filter(|m| !m.ends_with(['m', 'n', 'u', 'µ']))
        && let Ok(v) = minutes.parse::<f64>()
        && v.is_finite()
        && v >= 0.0
    {
        return Ok((v * 60e9).round() as u64);
    }
    parse_duration(t, bare).map_err(|_| {
        format!(
            "'{text}' is not a duration: a number with ns, us, ms, s or m (bare numbers are {})",
            bare.symbol()
        )
    })
}

/// A duration; bare numbers are seconds (`10s`, `250ms`, `2us`, `500ns`, `1m`, `3`).
pub fn duration_s(text: &str) -> Result<Duration, String> {
    nanos(text, Unit::S).map(Duration::from_nanos)
}

/// [`duration_s`] above zero: a limit of 0 would end everything at once (`bench --timeout`,
/// which has no limit when left out).
pub fn positive_duration_s(text: &str) -> Result<Duration, String> {
    match duration_s(text)? {
        d if d.is_zero() => Err(format!(
            "'{text}' would end every run at once: give a duration above 0, or leave the option out for no limit"
        )),
        d => Ok(d),
    }
}

/// A duration in ns; bare numbers are microseconds (`2us`, `1.5ms`, `500ns`, `3`).
pub fn duration_us(text: &str) -> Result<u64, String> {
    nanos(text, Unit::Us)
}

/// A whole number of seconds, at least 1 (`5`, `5s`, `2m`).
pub fn whole_seconds(text: &str) -> Result<u64, String> {
    let ns = nanos(text, Unit::S)?;
    if ns == 0 || ns % 1_000_000_000 != 0 {
        return Err(format!(
            "'{text}' is not a whole number of seconds (at least 1)"
        ));
    }
    Ok(ns / 1_000_000_000)
}

/// The longest `live --interval`, in seconds: an hour. Reports further apart are no longer live
/// (one total at the end is `--duration` with `-q`), and bpftrace notices a vanished reader only
/// when it next prints: a bound on the interval bounds that, should its death signal not come.
pub const MAX_INTERVAL_S: u64 = 3600;

/// `live --interval`: whole seconds, from 1 to [`MAX_INTERVAL_S`].
pub fn interval_seconds(text: &str) -> Result<u64, String> {
    let s = whole_seconds(text)?;
    if s > MAX_INTERVAL_S {
        return Err(format!(
            "'{text}' is longer than the longest interval, {MAX_INTERVAL_S} s (1 h); for one total at the end, give --duration and -q"
        ));
    }
    Ok(s)
}

/// A percentage as a fraction: `1%` and `0.01` are both 0.01; between 0 and 100%.
pub fn percent(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let (number, scale) = match t.strip_suffix('%') {
        Some(n) => (n.trim(), 100.0),
        None => (t, 1.0),
    };
    match number.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 && v / scale <= 1.0 => Ok(v / scale),
        _ => Err(format!(
            "'{text}' is not a percentage between 0% and 100% (1%, 0.5%, or a fraction: 0.01)"
        )),
    }
}

/// A size in bytes (`8`, `1KiB`, `64K`, `1MiB`), at most 1 GiB.
pub fn size(text: &str) -> Result<usize, String> {
    at_most(text, 1 << 30)
}

/// A message size (`--payload`), at most 64 MiB: the lab holds several copies of each message
/// per side, and a larger one would only measure the allocator.
pub fn payload(text: &str) -> Result<usize, String> {
    at_most(text, 64 << 20)
}

fn at_most(text: &str, limit: usize) -> Result<usize, String> {
    let n = latscope::lab::ipc::parse_size(text)?;
    if n > limit {
        return Err(format!(
            "'{text}' is {n} bytes; at most {} MiB",
            limit >> 20
        ));
    }
    Ok(n)
}

/// A count of at least 1.
pub fn count(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(0) => Err("0: give at least 1".to_string()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("'{text}' is not a whole number")),
    }
}

/// `WxH` with each side from 1 to `max` pixels.
fn dimensions(text: &str, max: u32) -> Result<(u32, u32), String> {
    let bad = || format!("'{text}' is not WIDTHxHEIGHT (e.g. 32x32, each 1 to {max})");
    let (w, h) = text.trim().split_once(['x', 'X']).ok_or_else(bad)?;
    let side = |t: &str| {
        t.trim()
            .parse::<u32>()
            .ok()
            .filter(|v| (1..=max).contains(v))
    };
    Ok((side(w).ok_or_else(bad)?, side(h).ok_or_else(bad)?))
}

/// An X11 image size `WxH`, each side 1 to 32767 (the protocol's limit).
pub fn wxh(text: &str) -> Result<(u16, u16), String> {
    let (w, h) = dimensions(text, 32767)?;
    // Both fit: dimensions checked the range.
    Ok((w as u16, h as u16))
}

/// A pixmap depth X servers offer: 1, 4, 8, 15, 16, 24 or 32.
pub fn depth(text: &str) -> Result<u8, String> {
    text.parse::<u8>()
        .ok()
        .filter(|d| [1, 4, 8, 15, 16, 24, 32].contains(d))
        .ok_or_else(|| format!("'{text}' is not a pixmap depth (1, 4, 8, 15, 16, 24 or 32)"))
}

/// A window size `WxH`, each side 1 to 8192 pixels.
pub fn window_size(text: &str) -> Result<(u32, u32), String> {
    dimensions(text, 8192)
}

/// Spans kept one by one: 0 to 10 million (about 1 GiB of JSON at most).
pub fn max_spans(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(n @ 0..=10_000_000) => Ok(n),
        _ => Err(format!("'{text}': give 0 to 10000000 spans")),
    }
}

/// Buffers in a pool: 1 to 16.
pub fn buffers(text: &str) -> Result<u32, String> {
    match text.trim().parse::<u32>() {
        Ok(n @ 1..=16) => Ok(n),
        _ => Err(format!("'{text}' buffers: give 1 to 16")),
    }
}

/// A library enum that owns its command-line names: the library gives every value, each one's
/// name and `FromStr`; the command line adds one line of help per value, for `--help`.
pub trait Named:
    Copy + FromStr<Err: std::error::Error + Send + Sync + 'static> + Send + Sync + 'static
{
    /// Every value, in the order `--help` lists them.
    const ALL: &'static [Self];
    /// The name as typed (the library's).
    fn name(self) -> &'static str;
    /// What the value means, for `--help`.
    fn help(self) -> &'static str;
}

/// The value parser of a [`Named`] enum: its names are the possible values (listed by `-h`, with
/// their help by `--help`, and in the error for any other), each read by the enum's `FromStr`.
pub fn named<T: Named>() -> impl TypedValueParser<Value = T> {
    let values = T::ALL
        .iter()
        .map(|v| PossibleValue::new(v.name()).help(v.help()));
    PossibleValuesParser::new(values).try_map(|name| name.parse::<T>())
}

/// [`named`] with one value more, `auto` (`None`), the default: the library decides.
pub fn named_or_auto<T: Named>(auto: &'static str) -> impl TypedValueParser<Value = Option<T>> {
    let values = std::iter::once(PossibleValue::new("auto").help(auto)).chain(
        T::ALL
            .iter()
            .map(|v| PossibleValue::new(v.name()).help(v.help())),
    );
    PossibleValuesParser::new(values).try_map(|name| match name.as_str() {
        "auto" => Ok(None),
        name => name.parse::<T>().map(Some),
    })
}

/// The available cores (the default of `--threads`), at most 256; 1 when unknown.
pub fn cores() -> u16 {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(256) as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_units_and_bare_numbers_keep_their_unit() {
        assert_eq!(duration_s("14"), Ok(Duration::from_secs(14)));
        assert_eq!(duration_s("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(duration_s("1m"), Ok(Duration::from_secs(60)));
        assert_eq!(duration_us("2"), Ok(2_000));
        assert_eq!(duration_us("500ns"), Ok(500));
        assert_eq!(duration_us("1.5ms"), Ok(1_500_000));
        assert!(duration_s("soon").is_err() && duration_s("-1s").is_err());
        assert_eq!(positive_duration_s("1ns"), Ok(Duration::from_nanos(1)));
        for zero in ["0", "0s", "0ms"] {
            let e = positive_duration_s(zero).unwrap_err();
            assert!(e.contains("above 0"), "{e}");
        }
        assert_eq!(whole_seconds("14s"), Ok(14));
        assert_eq!(whole_seconds("2m"), Ok(120));
        assert!(whole_seconds("1.5s").is_err() && whole_seconds("0").is_err());
    }

    #[test]
    fn a_live_interval_is_at_most_an_hour() {
        assert_eq!(interval_seconds("60m"), Ok(3600));
        assert_eq!(interval_seconds("5"), Ok(5));
        let e = interval_seconds("3601").unwrap_err();
        assert!(e.contains("3600 s") && e.contains("--duration"), "{e}");
        assert!(interval_seconds("1000000").is_err() && interval_seconds("0").is_err());
    }

    #[test]
    fn percentages_counts_and_sizes_refuse_nonsense() {
        assert_eq!(percent("1%"), Ok(0.01));
        assert_eq!(percent("0.5 %"), Ok(0.005));
        assert_eq!(percent("0.02"), Ok(0.02));
        assert!(percent("150%").is_err() && percent("-1%").is_err() && percent("x").is_err());
        assert_eq!(count("3"), Ok(3));
        assert!(count("0").is_err() && count("-2").is_err());
        assert_eq!(size("1KiB"), Ok(1024));
        assert!(size("1 parsec").is_err());
        assert_eq!(payload("64MiB"), Ok(64 << 20));
        assert!(payload("100000MiB").unwrap_err().contains("at most 64 MiB"));
    }

    #[test]
    fn image_sizes_are_width_by_height_within_the_x11_limit() {
        assert_eq!(wxh("32x32"), Ok((32, 32)));
        assert_eq!(wxh("10X100"), Ok((10, 100)));
        for bad in ["32", "0x4", "4x0", "40000x1", "axb", "-1x2"] {
            assert!(wxh(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn depths_are_the_ones_x_servers_offer() {
        assert_eq!(depth("8"), Ok(8));
        assert_eq!(depth("24"), Ok(24));
        assert!(depth("7").is_err());
        assert!(depth("64").is_err());
    }

    #[test]
    fn window_sizes_and_buffer_counts_refuse_nonsense() {
        assert_eq!(window_size("256x128"), Ok((256, 128)));
        for bad in ["256", "0x10", "10x", "x", "9000x10", "-1x5"] {
            assert!(window_size(bad).is_err(), "{bad}");
        }
        assert_eq!(buffers("3"), Ok(3));
        assert!(buffers("0").is_err() && buffers("17").is_err() && buffers("two").is_err());
    }
}
