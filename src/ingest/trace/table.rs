//! Events as rows: JSON lines (one object per line) and CSV with a header line, with
//! `--time FIELD --unit ns|us|ms|s --name FIELD` saying which columns hold the stamp and the
//! event's name. Every other column is a field.
//!
//! A row's fields do not lie in the line as they are (JSON escapes, CSV quotes), so each row is
//! written once into a scratch line, `name\tfield\tvalue\t...`, that the [`Event`] ranges point
//! into.

use super::{Event, Parsed, json, same};

/// Which columns mean what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Columns {
    /// the stamp's column
    pub time: String,
    /// nanoseconds per unit of the stamp
    pub scale: u64,
    /// the event name's column
    pub name: String,
}

impl Default for Columns {
    fn default() -> Self {
        Columns {
            time: "ts".to_string(),
            scale: 1,
            name: "name".to_string(),
        }
    }
}

/// A row turned into an event: fills `scratch` and `ev`.
fn row<'a>(
    columns: &Columns,
    cells: impl Iterator<Item = (&'a str, std::borrow::Cow<'a, str>)>,
    scratch: &mut String,
    ev: &mut Event,
) -> Parsed {
    ev.clear();
    scratch.clear();
    let mut time = None;
    let mut name = None;
    for (key, value) in cells {
        if key == columns.time {
            time = Some(super::decimal_to_ns(value.trim(), columns.scale));
            if time == Some(None) {
                return Parsed::Malformed("the time column is not a non-negative number");
            }
            continue;
        }
        let k = scratch.len()..scratch.len() + key.len();
        scratch.push_str(key);
        scratch.push('\t');
        let v = scratch.len()..scratch.len() + value.len();
        scratch.push_str(&value);
        scratch.push('\t');
        if key == columns.name {
            name = Some(v.clone());
        }
        ev.fields.push((k, v));
    }
    let (Some(Some(ts)), Some(name)) = (time, name) else {
        return Parsed::Malformed("a row without the time or the name column");
    };
    ev.ts_ns = ts;
    ev.name = name;
    Parsed::Event
}

/// Parses one JSON line. Only the time and name columns and the columns in `wanted` (the
/// fields a rule, key or `--by` reads) become fields; `None` keeps every column. The others
/// are checked and skipped unread (see [`super::json`]): a row of 20 columns costs little more
/// than a row of 3.
pub fn json_line(
    line: &str,
    columns: &Columns,
    wanted: Option<&[String]>,
    scratch: &mut String,
    ev: &mut Event,
) -> Parsed {
    if line.trim().is_empty() {
        return Parsed::Skip;
    }
    let b = line.as_bytes();
    let start = json::skip_ws(b, 0);
    if b[start] != b'{' {
        return not_an_object();
    }
    ev.clear();
    scratch.clear();
    let mut time: Option<&[u8]> = None;
    let mut name = None;
    let scanned = json::members(b, start, 0, |k, v| {
        // A column given twice counts once, the last time (as a JSON map keeps it).
        if same(&k, columns.time.as_bytes()) {
            time = Some(v);
            return Ok(());
        }
        let is_name = same(&k, columns.name.as_bytes());
        if !is_name && wanted.is_some_and(|w| !w.iter().any(|f| same(f.as_bytes(), &k))) {
            return Ok(());
        }
        let key = match &k {
            std::borrow::Cow::Borrowed(k) => json::part_of(line, k)?,
            std::borrow::Cow::Owned(k) => std::str::from_utf8(k).map_err(|_| json::Invalid)?,
        };
        if let Some(at) = ev
            .fields
            .iter()
            .position(|(r, _)| same(scratch[r.clone()].as_bytes(), key.as_bytes()))
        {
            ev.fields.remove(at);
        }
        let value = json::text_in(line, v)?;
        let kr = scratch.len()..scratch.len() + key.len();
        scratch.push_str(key);
        scratch.push('\t');
        let vr = scratch.len()..scratch.len() + value.len();
        scratch.push_str(&value);
        scratch.push('\t');
        if is_name {
            name = Some(vr.clone());
        }
        ev.fields.push((kr, vr));
        Ok(())
    });
    match scanned {
        Ok(end) if json::skip_ws(b, end) == b.len() => {}
        _ => return not_an_object(),
    }
    stamped(time, name, columns, ev)
}

/// A row's event from its time column's raw value and its name's range: the end of both
/// JSON line readers.
pub(super) fn stamped(
    time: Option<&[u8]>,
    name: Option<std::ops::Range<usize>>,
    columns: &Columns,
    ev: &mut Event,
) -> Parsed {
    let ts = time.map(|raw| time_ns(raw, columns.scale));
    stamped_ns(ts, name, ev)
}

/// The stamp of a time column's raw value × `scale`; `None` when it is not a non-negative
/// number (or overflows).
pub(super) fn time_ns(raw: &[u8], scale: u64) -> Option<u64> {
    match raw {
        // Exact from the text, never through a float; the usual integer in one pass.
        raw if let Some(ns) = integer_ns(raw, scale) => ns,
        raw if is_plain_decimal(raw) => super::decimal_bytes_to_ns(raw, scale),
        raw => json::text_of(raw)
            .ok()
            .and_then(|t| super::decimal_to_ns(t.trim(), scale)),
    }
}

/// A row's event from its stamp (`None`: no time column; `Some(None)`: not a stamp) and its
/// name's range.
pub(super) fn stamped_ns(
    ts: Option<Option<u64>>,
    name: Option<std::ops::Range<usize>>,
    ev: &mut Event,
) -> Parsed {
    if ts == Some(None) {
        return Parsed::Malformed("the time column is not a non-negative number");
    }
    let (Some(Some(ts)), Some(name)) = (ts, name) else {
        return Parsed::Malformed("a row without the time or the name column");
    };
    ev.ts_ns = ts;
    ev.name = name;
    Parsed::Event
}

/// [`json_line`] for the usual row, read in place: `ev`'s ranges point into `line` itself,
/// not into a scratch line (copying every kept key and value there, looking each key up among
/// the fields kept before, was a large part of reading a short row). `None`
/// when the row needs [`json_line`]: it is not a valid object, a key holds an escape, a kept
/// value is not a plain string or integer (its text is decoded), a kept column comes twice,
/// or there are more than 63 wanted fields. What it returns is what [`json_line`] would, the
/// ranges aside.
pub fn json_line_in_place(
    line: &str,
    columns: &Columns,
    keys: &RowKeys,
    ev: &mut Event,
) -> Option<Parsed> {
    json_line_walked(line, columns, keys, ev, &mut ())
}

/// What [`json_line_walked`] tells of each member it reads: where its key (without quotes)
/// and its value lie, and the key's role (what [`super::shape`] learns a row's shape from).
pub(super) trait Walk {
    /// one member, in the row's order
    fn member(&mut self, key: std::ops::Range<usize>, value: std::ops::Range<usize>, role: Role);
}

/// Nobody is told.
impl Walk for () {
    #[inline(always)]
    fn member(&mut self, _: std::ops::Range<usize>, _: std::ops::Range<usize>, _: Role) {}
}

/// [`json_line_in_place`], telling `walk` of each member read.
pub(super) fn json_line_walked(
    line: &str,
    columns: &Columns,
    keys: &RowKeys,
    ev: &mut Event,
    walk: &mut impl Walk,
) -> Option<Parsed> {
    let b = line.as_bytes();
    let mut j = json::skip_ws(b, 0);
    if b.get(j) != Some(&b'{') || keys.wanted > 63 {
        return None;
    }
    ev.clear();
    let (mut time, mut name) = (None, None);
    // bit i: wanted field i kept; bit 63: the name column
    let mut kept: u64 = 0;
    j = json::skip_ws(b, j + 1);
    if b.get(j) == Some(&b'}') {
        j += 1;
    } else {
        loop {
            if b.get(j) != Some(&b'"') {
                return None;
            }
            let (key_end, role) = match keys.at(b, j + 1) {
                Some((len, role)) => (j + len + 2, role),
                None => match json::string(b, j) {
                    Ok((end, false)) => (end, Role::Other),
                    _ => return None,
                },
            };
            let key = j + 1..key_end - 1;
            j = json::skip_ws(b, key_end);
            if b.get(j) != Some(&b':') {
                return None;
            }
            let v = json::skip_ws(b, j + 1);
            let (v_end, plain) = value(b, v)?;
            walk.member(key.clone(), v..v_end, role);
            let bit = match role {
                Role::Time => {
                    time = Some(&b[v..v_end]);
                    None
                }
                Role::Name => Some(63),
                Role::Wanted(i) => Some(i),
                Role::Other => None,
            };
            if let Some(bit) = bit {
                if kept >> bit & 1 == 1 {
                    return None;
                }
                kept |= 1 << bit;
                let value = plain?;
                if bit == 63 {
                    name = Some(value.clone());
                } else {
                    ev.note_place(bit);
                }
                ev.fields.push((key, value));
            }
            j = json::skip_ws(b, v_end);
            match b.get(j) {
                Some(b',') => j = json::skip_ws(b, j + 1),
                Some(b'}') => {
                    j += 1;
                    break;
                }
                _ => return None,
            }
        }
    }
    if json::skip_ws(b, j) != b.len() {
        return None;
    }
    Some(stamped(time, name, columns, ev))
}

/// The value at `b[v]` (no white space before it): its end, and its text when it needs no
/// decoding (`None`: it does); `None` when it is not a JSON value.
#[inline]
pub(super) fn value(b: &[u8], v: usize) -> Option<(usize, Option<std::ops::Range<usize>>)> {
    Some(match b.get(v) {
        Some(b'"') => {
            let (end, escaped) = json::string(b, v).ok()?;
            (end, (!escaped).then_some(v + 1..end - 1))
        }
        Some(b'-' | b'0'..=b'9') => {
            let (end, plain) = json::number_plain(b, v).ok()?;
            (end, plain.then_some(v..end))
        }
        _ => (json::skip_value(b, v, 1).ok()?, None),
    })
}

/// What a key of a JSON-lines row is to [`json_line_in_place`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    /// the time column
    Time,
    /// the name column
    Name,
    /// wanted field `i`
    Wanted(usize),
    /// anything else
    Other,
}

/// The keys a JSON-lines row is read for, matched where the key is written: a key is compared
/// with each of them (the time column, the name column, then the fields rules read, the first
/// that equals it wins) instead of being scanned to its closing quote and then compared (the
/// keys were a large part of reading a row).
#[derive(Debug, Clone)]
pub struct RowKeys {
    /// the keys with their roles, in the order they are tried; a name holding a quote, a
    /// backslash or a control character is left out, as it is never written without escapes
    /// (and a row with an escaped key goes to [`json_line`])
    keys: Vec<(Vec<u8>, Role)>,
    /// how many fields are wanted
    wanted: usize,
}

impl RowKeys {
    /// The keys of `columns` and `wanted`.
    pub fn new(columns: &Columns, wanted: &[String]) -> RowKeys {
        let plain = |k: &str| !k.bytes().any(|c| c == b'"' || c == b'\\' || c < 0x20);
        let roles = [(&columns.time, Role::Time), (&columns.name, Role::Name)];
        let wanted_roles = wanted.iter().enumerate().map(|(i, w)| (w, Role::Wanted(i)));
        let keys = roles
            .into_iter()
            .chain(wanted_roles)
            .filter(|(k, _)| plain(k))
            .map(|(k, role)| (k.as_bytes().to_vec(), role))
            .collect();
        RowKeys {
            keys,
            wanted: wanted.len(),
        }
    }

    /// The key whose text starts at `at` (just past its opening quote), when it is one of
    /// these: its length and role.
    #[inline]
    fn at(&self, b: &[u8], at: usize) -> Option<(usize, Role)> {
        let rest = b.get(at..)?;
        self.keys.iter().find_map(|(k, role)| {
            let hit = rest.get(k.len()) == Some(&b'"') && same(&rest[..k.len()], k);
            hit.then_some((k.len(), *role))
        })
    }
}

fn not_an_object() -> Parsed {
    Parsed::Malformed("not a JSON object")
}

/// A plain integer stamp (`0` or digits without a leading zero) × `scale`, in one pass:
/// `Some(None)` when it overflows, `None` when it is not one (what [`is_plain_decimal`] and
/// [`super::decimal_bytes_to_ns`] make of it, without their two passes and a `memchr` call,
/// which made the stamp a large part of reading a short row).
fn integer_ns(raw: &[u8], scale: u64) -> Option<Option<u64>> {
    if raw.is_empty() || raw.len() > 1 && raw[0] == b'0' {
        return None;
    }
    match super::short_digits(raw) {
        Some(whole) => Some(whole?.checked_mul(scale)),
        // 20 digits or more (2^64 - 1 has 20)
        None => raw
            .iter()
            .all(u8::is_ascii_digit)
            .then(|| super::long_digits(raw).and_then(|w| w.checked_mul(scale))),
    }
}

/// `DIGITS[.DIGITS]`: a time stamp read exactly from its text.
fn is_plain_decimal(raw: &[u8]) -> bool {
    let (int, frac) = match memchr::memchr(b'.', raw) {
        Some(dot) => (&raw[..dot], &raw[dot + 1..]),
        None => (raw, &b"0"[..]),
    };
    !int.is_empty()
        && !frac.is_empty()
        && int.iter().chain(frac).all(u8::is_ascii_digit)
        && (int[0] != b'0' || int.len() == 1)
}

/// Splits a CSV line (RFC 4180 quotes, no line breaks inside fields).
pub fn split_csv(line: &str) -> Vec<std::borrow::Cow<'_, str>> {
    let mut out = Vec::new();
    let mut rest = line;
    loop {
        if let Some(quoted) = rest.strip_prefix('"') {
            let mut value = String::new();
            let mut chars = quoted.char_indices().peekable();
            let mut end = quoted.len();
            while let Some((i, c)) = chars.next() {
                if c == '"' {
                    if chars.peek().map(|&(_, d)| d) == Some('"') {
                        value.push('"');
                        chars.next();
                    } else {
                        end = i + 1;
                        break;
                    }
                } else {
                    value.push(c);
                }
            }
            out.push(std::borrow::Cow::Owned(value));
            rest = &quoted[end.min(quoted.len())..];
            match rest.find(',') {
                Some(p) => rest = &rest[p + 1..],
                None => return out,
            }
        } else {
            match rest.find(',') {
                Some(p) => {
                    out.push(std::borrow::Cow::Borrowed(&rest[..p]));
                    rest = &rest[p + 1..];
                }
                None => {
                    out.push(std::borrow::Cow::Borrowed(rest));
                    return out;
                }
            }
        }
    }
}

/// CSV rows after a header line.
#[derive(Debug, Default)]
pub struct Csv {
    header: Option<Vec<String>>,
}

impl Csv {
    /// Parses one CSV line (the first non-empty one is the header).
    pub fn parse(
        &mut self,
        line: &str,
        columns: &Columns,
        scratch: &mut String,
        ev: &mut Event,
    ) -> Parsed {
        if line.trim().is_empty() {
            return Parsed::Skip;
        }
        let Some(header) = &self.header else {
            self.header = Some(
                split_csv(line)
                    .into_iter()
                    .map(|c| c.trim().to_string())
                    .collect(),
            );
            return Parsed::Skip;
        };
        let cells = split_csv(line);
        if cells.len() != header.len() {
            return Parsed::Malformed("a row with another number of columns than the header");
        }
        row(
            columns,
            header.iter().map(String::as_str).zip(cells),
            scratch,
            ev,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checked digit-by-digit reading `integer_ns` replaced.
    fn integer_by_digits(raw: &[u8], scale: u64) -> Option<Option<u64>> {
        if raw.is_empty() || raw.len() > 1 && raw[0] == b'0' {
            return None;
        }
        let mut whole: Option<u64> = Some(0);
        for &c in raw {
            if !c.is_ascii_digit() {
                return None;
            }
            whole = whole
                .and_then(|w| w.checked_mul(10))
                .and_then(|w| w.checked_add(u64::from(c - b'0')));
        }
        Some(whole.and_then(|w| w.checked_mul(scale)))
    }

    #[test]
    fn integer_stamps_read_as_the_checked_digit_by_digit_reading_does() {
        let raws = [
            "0",
            "00",
            "01",
            "7",
            "4700",
            "18446744073709551615",
            "18446744073709551616",
            "9999999999999999999",
            "99999999999999999999",
            "184467440737095516150",
            "1844674407370955161a5",
            "12a",
            "",
            "-1",
            "1.5",
            "18446744073709551",
        ];
        for raw in raws {
            for scale in [1, 1_000, 1_000_000_000, 7] {
                assert_eq!(
                    integer_ns(raw.as_bytes(), scale),
                    integer_by_digits(raw.as_bytes(), scale),
                    "{raw} x {scale}"
                );
            }
        }
    }

    #[test]
    fn a_json_line_has_its_time_name_and_fields() {
        let cols = Columns {
            time: "t".into(),
            scale: 1_000,
            name: "ev".into(),
        };
        let (mut scratch, mut ev) = (String::new(), Event::default());
        let line = r#"{"t": 12.5, "ev": "frame", "id": 7, "who": "a\tb"}"#;
        assert_eq!(
            json_line(line, &cols, None, &mut scratch, &mut ev),
            Parsed::Event
        );
        assert_eq!(ev.ts_ns, 12_500);
        assert_eq!(ev.name(&scratch), "frame");
        assert_eq!(ev.field(&scratch, "id"), Some("7"));
        assert!(matches!(
            json_line(r#"{"ev":"x"}"#, &cols, None, &mut scratch, &mut ev),
            Parsed::Malformed(_)
        ));
        assert!(matches!(
            json_line("[1,2]", &cols, None, &mut scratch, &mut ev),
            Parsed::Malformed(_)
        ));
    }

    /// What an event says: its stamp, its name and its fields as text.
    fn said(
        parsed: Parsed,
        line: &str,
        ev: &Event,
    ) -> (Parsed, u64, String, Vec<(String, String)>) {
        let text = |r: &std::ops::Range<usize>| line.get(r.clone()).unwrap_or("?").to_string();
        let fields = ev.fields.iter().map(|(k, v)| (text(k), text(v))).collect();
        (parsed, ev.ts_ns, text(&ev.name), fields)
    }

    #[test]
    fn a_json_line_read_in_place_says_what_the_general_reader_says() {
        let cols = Columns::default();
        let wanted = vec!["id".to_string(), "who".to_string()];
        let rows = [
            (r#"{"ts": 100, "name": "request_start", "id": 7}"#, true),
            (
                r#" {"id":"x y","name":"a","ts":1.5,"other":{"deep":[1,{"k":"v"}]},"who":-3} "#,
                true,
            ),
            (r#"{"ts": "250", "name": "é", "who": "", "z": null}"#, true),
            (r#"{"ts": 1, "name": "a"}"#, true),
            (r#"{"ts": 1, "name": "a", "ts": 2}"#, true),
            (r#"{"name": "a"}"#, true),
            (r#"{"ts": -1, "name": "a"}"#, true),
            (r#"{}"#, true),
            (r#"{"ts": 0, "name": "a", "id": 0}"#, true),
            (r#"{"ts": 99999999999999999999, "name": "a"}"#, true),
            (r#"{"ts": 18446744073709551615, "name": "a"}"#, true),
            (r#"{"ts": 1.000000001, "name": "a", "id": -7}"#, true),
            // keys that begin like a key read, or that a key read begins like
            (
                r#"{"tsx": 5, "t": 6, "ts": 1, "name": "a", "i": 2, "idd": 3, "id": 4}"#,
                true,
            ),
            (
                r#"{"ts": 1, "na": "b", "names": "c", "name": "a", "whom": 1, "who": 2}"#,
                true,
            ),
            (r#"{"": 1, "ts": 1, "name": "a"}"#, true),
            // the last time column is the one read, whatever the one before was
            (r#"{"ts": 1, "name": "a", "ts": -1}"#, true),
            (r#"{"ts": 1, "name": "a", "ts": "x"}"#, true),
            (r#"{"ts": 1, "name": "a", "ts": 2.5}"#, true),
            (r#"{"ts": "x", "ts": 5, "name": "a"}"#, true),
            (r#"{"ts": 999999999999999999, "name": "a"}"#, true),
            (r#"{"ts": 1000000000000000000, "name": "a"}"#, true),
            // decoded, duplicated or broken: the general reader's
            (r#"{"ts": 1, "name": "a\tb"}"#, false),
            (r#"{"ts": 1, "n\u0061me": "a"}"#, false),
            (r#"{"ts": 1, "name": "a", "id": 1.50}"#, false),
            (r#"{"ts": 1, "name": "a", "id": true}"#, false),
            (r#"{"ts": 0123, "name": "a"}"#, false),
            (r#"{"ts": 1, "name": "a", "id": "x\"y"}"#, false),
            (r#"{"ts": 1, "name": "a", "id": 1e3}"#, false),
            (r#"{"ts": 1, "name": "a", "id": -}"#, false),
            (r#"{"ts": 1, "name": "a", "id": 1, "id": 2}"#, false),
            (r#"{"ts": 1, "name": "a",}"#, false),
            (r#"{"ts": 1, "name": "a"} x"#, false),
            (r#"{"ts": 1 "name": "a"}"#, false),
            (r#"[1]"#, false),
            ("", false),
        ];
        for (line, in_place) in rows {
            let (mut scratch, mut ev) = (String::new(), Event::default());
            let general = json_line(line, &cols, Some(&wanted), &mut scratch, &mut ev);
            let general = said(general, &scratch, &ev);
            let mut ev = Event::default();
            match json_line_in_place(line, &cols, &RowKeys::new(&cols, &wanted), &mut ev) {
                Some(parsed) => {
                    assert!(in_place, "{line} should go to the general reader");
                    assert_eq!(said(parsed, line, &ev), general, "{line}");
                }
                None => assert!(!in_place, "{line} should be read in place"),
            }
        }
    }

    #[test]
    fn keys_read_in_place_are_tried_time_then_name_then_fields_and_quoted_names_never_match() {
        let cols = Columns {
            time: "t".into(),
            scale: 1,
            name: "n\"x".into(),
        };
        let wanted = vec![
            "t".to_string(),
            "a".to_string(),
            "a".to_string(),
            "ok\\".into(),
        ];
        let keys = RowKeys::new(&cols, &wanted);
        let roles: Vec<Role> = keys.keys.iter().map(|(_, role)| *role).collect();
        assert_eq!(
            roles,
            [
                Role::Time,
                Role::Wanted(0),
                Role::Wanted(1),
                Role::Wanted(2)
            ],
            "the name column and the field with a backslash are left out"
        );
        assert_eq!(keys.at(br#""t": 1"#, 1), Some((1, Role::Time)));
        assert_eq!(keys.at(br#""a": 1"#, 1), Some((1, Role::Wanted(1))));
        assert_eq!(keys.at(br#""n"x": 1"#, 1), None);
        assert_eq!(keys.at(br#""ab": 1"#, 1), None);
        assert_eq!(keys.at(br#""a"#, 1), None, "no closing quote");
    }

    #[test]
    fn csv_rows_follow_the_header_and_quotes_are_honoured() {
        let cols = Columns::default();
        let (mut scratch, mut ev) = (String::new(), Event::default());
        let mut csv = Csv::default();
        assert_eq!(
            csv.parse("ts,name,note", &cols, &mut scratch, &mut ev),
            Parsed::Skip
        );
        assert_eq!(
            csv.parse(r#"100,start,"a, ""b""""#, &cols, &mut scratch, &mut ev),
            Parsed::Event
        );
        assert_eq!(ev.ts_ns, 100);
        assert_eq!(ev.field(&scratch, "note"), Some(r#"a, "b""#));
        assert!(matches!(
            csv.parse("1,2", &cols, &mut scratch, &mut ev),
            Parsed::Malformed(_)
        ));
    }
}
