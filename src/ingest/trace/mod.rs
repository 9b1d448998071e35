//! Traces from other tools: `perf script` text, ftrace / trace-cmd text, babeltrace2's text of
//! CTF (LTTng) traces, Chrome Trace Event JSON, and JSON lines / CSV with named columns.
//!
//! Engineers record with perf, ftrace, LTTng and Perfetto every day and turn those traces into
//! latency numbers with one-off scripts. Every format here becomes the same [`Event`] (a
//! timestamp in integer nanoseconds, a name, and named fields), so one pairing engine
//! ([`rules`]) turns any of them into spans, with the bookkeeping the WAYLAND_DEBUG engine has
//! (unmatched starts, superseded starts, orphan ends, ends before their start). Chrome JSON
//! also carries spans itself (`X` with `dur`, `B`/`E`, async `b`/`e`); those are taken as
//! they are.
//!
//! Line formats are parsed in place: an event's name and fields are byte ranges of the line,
//! so reading allocates nothing per line and runs at the speed of the line splitter.

pub mod babeltrace;
pub mod chrome;
pub mod detect;
pub mod group_shape;
pub mod inputs;
pub mod json;
mod lines;
mod local;
pub mod parallel;
pub mod parallel_chrome;
pub mod read;
pub mod rules;
pub mod shape;
mod span_key;
pub mod stats;
pub mod syscalls;
pub mod table;
pub mod text;

use std::ops::Range;

use crate::ingest::words::{digits_end, last_digits, leading_digits};

pub use detect::{Format, detect};

/// One event of a trace: a view into the line it came from.
#[derive(Debug, Clone)]
pub struct Event {
    /// nanoseconds in the trace's own clock
    pub ts_ns: u64,
    /// the event's name, a range of the line
    pub name: Range<usize>,
    /// `(name, value)` ranges of the line, in order
    pub fields: Vec<(Range<usize>, Range<usize>)>,
    /// fields whose names are not in the line (perf's and ftrace's prefix: `common_pid`, ...)
    pub common: Vec<(&'static str, Range<usize>)>,
    /// where a `NAME=VALUE ...` payload begins when it was left unparsed
    /// ([`text::parse_lazy`]): a field is then found in the line when it is asked for
    pub lazy_payload: Option<usize>,
    /// where babeltrace2's `{ NAME = VALUE, ... }` groups begin when they were left unparsed
    /// ([`babeltrace::Babeltrace::parse_lazy`]): a field is then found in the line when it is
    /// asked for
    pub lazy_groups: Option<usize>,
    /// per field the rules read (the first [`PLACES`] of [`rules::Pairer::fields_read`]), the
    /// index in [`Event::fields`] of its first occurrence, where the reader knew it
    /// ([`Event::note_place`]); [`NOWHERE`] where it did not
    pub places: [u8; PLACES],
}

/// Fields the rules read whose places in [`Event::fields`] an event keeps.
pub const PLACES: usize = 8;

/// No place known.
pub const NOWHERE: u8 = u8::MAX;

impl Default for Event {
    fn default() -> Self {
        Event {
            ts_ns: 0,
            name: 0..0,
            fields: Vec::new(),
            common: Vec::new(),
            lazy_payload: None,
            lazy_groups: None,
            places: [NOWHERE; PLACES],
        }
    }
}

impl Event {
    /// Clears the event for the next line, keeping its memory.
    pub fn clear(&mut self) {
        self.ts_ns = 0;
        self.name = 0..0;
        self.fields.clear();
        self.common.clear();
        self.lazy_payload = None;
        self.lazy_groups = None;
        self.places = [NOWHERE; PLACES];
    }

    /// Notes that the field pushed next to [`Event::fields`] is the first occurrence of field
    /// `j` of the fields the rules read (a reader that matched its name with that field's).
    #[inline]
    pub fn note_place(&mut self, j: usize) {
        if let (Some(place), Ok(at)) = (self.places.get_mut(j), u8::try_from(self.fields.len())) {
            *place = at;
        }
    }

    /// [`Event::field`] of `name`, field `j` of the fields the rules read: at its place when
    /// the reader noted it (the key there checked), else looked up by name.
    #[inline]
    pub fn field_at<'l>(&self, line: &'l str, j: usize, name: &str) -> Option<&'l str> {
        match self.placed(line, j, name) {
            Some(value) => line.get(value.clone()),
            None => self.field(line, name),
        }
    }

    /// [`Event::field_at`] as bytes (a pairing key's: no character boundaries to check).
    #[inline]
    pub fn field_bytes_at<'l>(&self, line: &'l str, j: usize, name: &str) -> Option<&'l [u8]> {
        match self.placed(line, j, name) {
            Some(value) => line.as_bytes().get(value.clone()),
            // (what `field` does with no fields, said here: a perf or ftrace event, whose
            // payload is left in the line, skips a step it would otherwise take every time)
            None if self.fields.is_empty() => self.field_elsewhere(line, name).map(str::as_bytes),
            None => self.field(line, name).map(str::as_bytes),
        }
    }

    /// The value of field `j` at its noted place, when its key there is `name`.
    #[inline(always)]
    fn placed(&self, line: &str, j: usize, name: &str) -> Option<&Range<usize>> {
        let at = *self.places.get(j)?;
        if at == NOWHERE {
            return None;
        }
        let (key, value) = self.fields.get(usize::from(at))?;
        let key = line.as_bytes().get(key.clone())?;
        same(key, name.as_bytes()).then_some(value)
    }

    /// The value of field `name` in `line` (the first one, if repeated).
    ///
    /// Inlined where the field is among [`Event::fields`] (a pairing key, a filter), the
    /// look-ups in the line apart: the usual case stays small, and the rare one costs no call
    /// in it.
    #[inline]
    pub fn field<'l>(&self, line: &'l str, name: &str) -> Option<&'l str> {
        match self.named(line, name) {
            Some((_, v)) => line.get(v.clone()),
            None => self.field_elsewhere(line, name),
        }
    }

    /// [`Event::field`] of a field that is not among [`Event::fields`]: one left in the line
    /// unparsed, or one of [`Event::common`].
    #[inline(never)]
    fn field_elsewhere<'l>(&self, line: &'l str, name: &str) -> Option<&'l str> {
        if let Some(from) = self.lazy_payload
            && let Some(v) = text::equals_field(line, from, name)
        {
            return line.get(v);
        }
        if let Some(from) = self.lazy_groups {
            return line.get(babeltrace::group_field(line, from, name)?);
        }
        let value = &self.common.iter().find(|(k, _)| *k == name)?.1;
        line.get(value.clone())
    }

    /// The first of [`Event::fields`] named `name`.
    #[inline]
    fn named(&self, line: &str, name: &str) -> Option<&(Range<usize>, Range<usize>)> {
        // Compared as bytes: a non-empty name (UTF-8) cannot equal bytes that begin or end
        // inside a character, so only an empty one needs the boundaries checked.
        let bytes = line.as_bytes();
        self.fields.iter().find(|(k, _)| {
            bytes
                .get(k.clone())
                .is_some_and(|k| same(k, name.as_bytes()))
                && (!name.is_empty() || line.get(k.clone()).is_some())
        })
    }

    /// The event's name in `line`.
    pub fn name<'l>(&self, line: &'l str) -> &'l str {
        line.get(self.name.clone()).unwrap_or("")
    }
}

/// `a == b` for the short names of fields and columns, compared in line: a `bcmp` call per
/// field looked up, per `=` of a perf payload or per key of a JSON row was a measurable share
/// of the reading time, and eight bytes at a time ([`crate::ingest::words::equal`]) takes
/// fewer instructions than a byte loop.
pub use crate::ingest::words::equal as same;

/// What the pairing engine reads of an event: its stamp, its name and its fields by name.
///
/// A line's [`Event`] answers from the line ([`InLine`]); the parallel reader's compact
/// records answer from the copies a worker made of the fields the rules read
/// ([`parallel`]), so that pairing is one code path whichever reader fed it.
pub trait EventView {
    /// nanoseconds in the trace's own clock
    fn ts_ns(&self) -> u64;
    /// the event's name
    fn name(&self) -> &str;
    /// the value of field `name`, as [`Event::field`] gives it
    fn field(&self, name: &str) -> Option<&str>;
    /// The bytes of [`EventView::field`] of `name`, field `j` of the fields the rules read
    /// ([`rules::Pairer::fields_read`]), for a pairing key: a record finds them by their
    /// place, a line by the field's name.
    fn key_field(&self, _j: usize, name: &str) -> Option<&[u8]> {
        self.field(name).map(str::as_bytes)
    }
}

/// An [`Event`] with the text its ranges point into.
#[derive(Debug, Clone, Copy)]
pub struct InLine<'a> {
    /// the line (or the scratch line of a row)
    pub line: &'a str,
    /// the event parsed from it
    pub ev: &'a Event,
}

impl EventView for InLine<'_> {
    fn ts_ns(&self) -> u64 {
        self.ev.ts_ns
    }

    fn name(&self) -> &str {
        self.ev.name(self.line)
    }

    fn field(&self, name: &str) -> Option<&str> {
        self.ev.field(self.line, name)
    }

    #[inline]
    fn key_field(&self, j: usize, name: &str) -> Option<&[u8]> {
        self.ev.field_bytes_at(self.line, j, name)
    }
}

/// What a line was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed {
    /// an event, now in the [`Event`] passed in
    Event,
    /// a header, comment or blank line
    Skip,
    /// something that should have been an event but is not, and why
    Malformed(&'static str),
}

/// Parses a decimal number of seconds (`13760.296300641`, up to 9 decimals) into integer
/// nanoseconds, exactly; `None` if it is not one.
pub fn seconds_to_ns(text: &str) -> Option<u64> {
    decimal_to_ns(text, 1_000_000_000)
}

/// `text` (digits, optionally `.` and more digits) × `scale` ns, exactly: `"1.5"` with a scale
/// of 1000 (µs) is 1500 ns. Digits finer than a nanosecond are truncated.
pub fn decimal_to_ns(text: &str, scale: u64) -> Option<u64> {
    decimal_bytes_to_ns(text.as_bytes(), scale)
}

/// [`decimal_to_ns`] on bytes, in one pass: the parser of every time stamp of every format.
pub fn decimal_bytes_to_ns(text: &[u8], scale: u64) -> Option<u64> {
    if scale == 1_000_000_000
        && let Some(ns) = seconds_by_words(text)
    {
        return Some(ns);
    }
    decimal_read(text, scale)
}

/// [`decimal_bytes_to_ns`] of any stamp but the usual seconds (kept apart, that their reading
/// stays inlined where perf, ftrace and babeltrace2 stamps are read).
#[inline(never)]
fn decimal_read(text: &[u8], scale: u64) -> Option<u64> {
    // The whole part's digits, then a dot or the end (eight bytes at a time: a search for the
    // dot, a loop over the digits and a search for the scale were a large part of reading a
    // Chrome JSON stamp).
    let dot = digits_end(text, 0);
    let (int, frac) = match text.get(dot) {
        _ if dot == 0 => return None,
        None => (text, &text[dot..]),
        Some(b'.') => (&text[..dot], &text[dot + 1..]),
        Some(_) => return None,
    };
    let whole = match short_digits(int) {
        Some(whole) => whole?,
        None => long_digits(int)?,
    };
    let ns = whole.checked_mul(scale)?;
    if frac.is_empty() {
        return Some(ns);
    }
    let places = match scale {
        1_000 => Some(3),
        1_000_000 => Some(6),
        _ => POWERS_OF_TEN.iter().position(|&p| p == scale),
    };
    let Some(places) = places else {
        return ns.checked_add(fraction_scaled(frac, scale)?);
    };
    // A scale of 10^places: the first `places` digits of the fraction, as an integer padded to
    // `places` digits, are its nanoseconds (what the digit-by-digit sum gives, in one pass).
    let kept = frac.len().min(places);
    let value = short_digits(&frac[..kept])??;
    if !frac[kept..].iter().all(u8::is_ascii_digit) {
        return None;
    }
    ns.checked_add(value * POWERS_OF_TEN[places - kept])
}

/// The usual perf and ftrace stamp, seconds of 1 to 7 digits and a fraction of 1 to 9
/// (`14410.210049`, `13760.296300641`), in nanoseconds: its digits read a word at a time
/// ([`leading_digits`], [`last_digits`]). `None` for any other text, which the digit-by-digit
/// reading then reads (a loop per digit, a search for the dot and one for the scale were a
/// measurable share of reading an ftrace line).
#[inline]
fn seconds_by_words(text: &[u8]) -> Option<u64> {
    let (whole, n) = leading_digits(text)?;
    if n == 0 || n == 8 || text[n] != b'.' {
        return None;
    }
    let frac = &text[n + 1..];
    let value = match frac.len() {
        k @ 1..=8 => last_digits(text, k)? * POWERS_OF_TEN[9 - k],
        9 if frac[0].is_ascii_digit() => {
            u64::from(frac[0] - b'0') * POWERS_OF_TEN[8] + last_digits(text, 8)?
        }
        _ => return None,
    };
    Some(whole * 1_000_000_000 + value)
}

/// 10^0 ... 10^19: every power of ten a `u64` holds.
const POWERS_OF_TEN: [u64; 20] = {
    let mut p = [1u64; 20];
    let mut i = 1;
    while i < 20 {
        p[i] = p[i - 1] * 10;
        i += 1;
    }
    p
};

/// The value of at most 19 decimal digits (they cannot overflow a `u64`): `Some(None)` when a
/// byte is not a digit, `None` when there are more than 19 of them. Eight to sixteen digits
/// (a Chrome JSON stamp in microseconds has eleven) are read a word at a time: the first eight
/// ([`leading_digits`]), then the rest ([`last_digits`]).
#[inline]
pub(crate) fn short_digits(digits: &[u8]) -> Option<Option<u64>> {
    let n = digits.len();
    if n > 19 {
        return None;
    }
    if (8..=16).contains(&n) {
        let (high, k) = leading_digits(digits)?;
        if k < 8 {
            return Some(None);
        }
        let rest = n - 8;
        if rest == 0 {
            return Some(Some(high));
        }
        return Some(last_digits(digits, rest).map(|low| high * POWERS_OF_TEN[rest] + low));
    }
    let mut value: u64 = 0;
    for &b in digits {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return Some(None);
        }
        value = value * 10 + u64::from(d);
    }
    Some(Some(value))
}

/// The value of decimal digits, however many (leading zeros), `None` past `u64::MAX` or at a
/// byte that is not a digit.
pub(crate) fn long_digits(digits: &[u8]) -> Option<u64> {
    let mut value: u64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        value = value.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    Some(value)
}

/// The digits d1 d2 ... of a fraction × `scale`: the sum of d_i × (scale / 10^i), each term
/// truncated (for a scale that is not a power of ten).
fn fraction_scaled(frac: &[u8], scale: u64) -> Option<u64> {
    let (mut sum, mut unit) = (0u64, scale);
    for &b in frac {
        if !b.is_ascii_digit() {
            return None;
        }
        unit /= 10;
        sum = sum.checked_add(u64::from(b - b'0') * unit)?;
    }
    Some(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_seconds_become_exact_nanoseconds() {
        assert_eq!(seconds_to_ns("13760.296300641"), Some(13_760_296_300_641));
        assert_eq!(seconds_to_ns("13760.296300"), Some(13_760_296_300_000));
        assert_eq!(seconds_to_ns("1.5"), Some(1_500_000_000));
        assert_eq!(seconds_to_ns("7"), Some(7_000_000_000));
        assert_eq!(seconds_to_ns("0.0000000019"), Some(1));
        for bad in ["", ".5", "1.2.3", "1e3", "-1", "1.x"] {
            assert_eq!(seconds_to_ns(bad), None, "{bad}");
        }
        assert_eq!(decimal_to_ns("1.5", 1_000), Some(1_500));
        assert_eq!(decimal_to_ns("250", 1_000_000), Some(250_000_000));
    }

    /// The digit-by-digit sum the one-pass parser replaced: every digit checked, the fraction's
    /// digit i worth scale / 10^i (truncated), every step checked for overflow.
    fn by_digits(text: &[u8], scale: u64) -> Option<u64> {
        let dot = text.iter().position(|&b| b == b'.').unwrap_or(text.len());
        let (int, frac) = (&text[..dot], text.get(dot + 1..).unwrap_or(&[]));
        if int.is_empty() {
            return None;
        }
        let mut whole: u64 = 0;
        for &b in int {
            if !b.is_ascii_digit() {
                return None;
            }
            whole = whole.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
        }
        let mut ns = whole.checked_mul(scale)?;
        let mut unit = scale;
        for &b in frac {
            if !b.is_ascii_digit() {
                return None;
            }
            unit /= 10;
            ns = ns.checked_add(u64::from(b - b'0') * unit)?;
        }
        Some(ns)
    }

    #[test]
    fn stamps_parse_as_the_digit_by_digit_sum_does_at_every_scale_and_length() {
        let texts = [
            "0",
            "7",
            "1.",
            "1.5",
            "13760.296300641",
            "13760.2963006419999",
            "0.0000000019",
            "18446744073.709551615",
            "18446744073.709551616",
            "18446744073709551615",
            "18446744073709551616",
            "1844674407370955161.5",
            "00000000000000000000001.25",
            "99999999999999999999",
            "12a.5",
            "12.5a",
            "1.2.3",
            "",
            ".5",
            "-1",
            "1e3",
            "1.00000000000000000000000000001",
            "123456789012345678.9",
        ];
        let scales = [
            1,
            10,
            1_000,
            1_000_000,
            1_000_000_000,
            10_u64.pow(19),
            3,
            250,
            1_024,
        ];
        // The shapes a word at a time reads (and those beside them): seconds of 1 to 9
        // digits, fractions of 0 to 10, each byte in turn made one that is not a digit.
        let mut texts: Vec<String> = texts.iter().map(|t| t.to_string()).collect();
        for int in 1..=9 {
            for frac in 0..=10 {
                let digits = "98765432109876543210";
                let stamp = format!("{}.{}", &digits[..int], &digits[10 - frac..10]);
                for at in 0..stamp.len() {
                    for other in [b'/', b':', b'.', b' ', b'0', 0x80] {
                        let mut bad = stamp.clone().into_bytes();
                        bad[at] = other;
                        texts.push(String::from_utf8_lossy(&bad).into_owned());
                    }
                }
                texts.push(stamp);
            }
        }
        // Integers of 1 to 20 digits (8 to 16 are read a word at a time), each byte in turn
        // made one that is not a digit.
        for int in 1..=20 {
            let stamp = &"98765432109876543210"[..int];
            for at in 0..int {
                for other in [b'/', b':', b'.', b' ', b'a'] {
                    let mut bad = stamp.as_bytes().to_vec();
                    bad[at] = other;
                    texts.push(String::from_utf8_lossy(&bad).into_owned());
                }
            }
            texts.push(stamp.to_string());
        }
        for text in &texts {
            for scale in scales {
                assert_eq!(
                    decimal_bytes_to_ns(text.as_bytes(), scale),
                    by_digits(text.as_bytes(), scale),
                    "{text} x {scale}"
                );
            }
        }
    }
}
