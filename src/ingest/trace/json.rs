//! A validating JSON scanner that skips what nobody asked for.
//!
//! Chrome JSON and JSON lines are read object by object, and of each object only a few members
//! matter (`ph`, `ts`, `name`, ... or the columns a rule names). Building a `serde_json::Value`
//! of every object allocates a map, a string per key and a string per value, and that was most
//! of the reading time (a profile of `latscope spans` on Chrome JSON had the allocator and
//! `serde_json`'s map at the top). Here an object's members are visited in place: a key is a
//! byte range, a value is the raw text of it (checked, not decoded), and only what the caller
//! keeps is decoded. Strings, white space and digits are crossed the way a Chrome JSON element
//! holds them: strings sixteen bytes at a time ([`string`]), the one space after a colon or a
//! comma with two comparisons ([`skip_ws`]), digits eight at a time.
//!
//! What the scanner accepts is what `serde_json` accepts (RFC 8259: no trailing commas,
//! control characters only escaped, nesting at most 128 deep), so that an element that
//! `serde_json` refused is still refused here, and the rare text that must be decoded (a string
//! with escapes, a number that is not a plain integer) is handed to `serde_json` itself.

use std::borrow::Cow;

use crate::ingest::words::{Block, WIDTH, digits_end};

/// How deep arrays and objects may nest (as `serde_json`'s recursion limit).
pub const MAX_DEPTH: usize = 128;

/// The JSON is not valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Invalid;

type Result<T> = std::result::Result<T, Invalid>;

/// The index just past the whitespace at `i`. JSON's white space is four bytes at or below
/// the space, so a byte above it ends the scan with one comparison, and the one space of
/// `": "` and `", "` with two (a loop testing each byte against the four was a measurable share
/// of reading Chrome JSON).
#[inline(always)]
pub fn skip_ws(b: &[u8], i: usize) -> usize {
    match b.get(i) {
        Some(&c) if c <= b' ' => {}
        _ => return i,
    }
    if b[i] == b' ' && b.get(i + 1).is_some_and(|&c| c > b' ') {
        return i + 1;
    }
    skip_ws_loop(b, i)
}

/// [`skip_ws`] past more than one byte of white space, or a byte below the space.
#[inline(never)]
fn skip_ws_loop(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\n' | b'\r' | b'\t') {
        i += 1;
    }
    i
}

/// A string starting at its opening quote `b[i]`: the index past its closing quote, and whether
/// it holds an escape. Sixteen bytes at a time ([`Block`]): the quote, the backslash and the
/// control characters of a block found at once (a table look-up a byte cost several
/// instructions a byte, a large share of reading Chrome JSON, whose names, categories and
/// arguments are longer than its keys).
#[inline(always)]
pub fn string(b: &[u8], i: usize) -> Result<(usize, bool)> {
    debug_assert_eq!(b.get(i), Some(&b'"'));
    let mut j = i + 1;
    let mut escaped = false;
    loop {
        let block = Block::at(b, j);
        // the bytes that stop a string; past the end of `b` a block holds zeros, which stop it
        let stops = block.eq(b'"') | block.eq(b'\\') | block.in_range(0, 0x1f);
        if stops == 0 {
            j += WIDTH;
            continue;
        }
        let at = j + stops.trailing_zeros() as usize;
        match b.get(at) {
            Some(b'"') => return Ok((at + 1, escaped)),
            Some(b'\\') => {
                escaped = true;
                j = escape(b, at)?;
            }
            _ => return Err(Invalid), // a raw control character, or the end of `b`
        }
    }
}

/// An escape at `b[i] == '\\'`: the index past it.
pub(super) fn escape(b: &[u8], i: usize) -> Result<usize> {
    match b.get(i + 1) {
        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => Ok(i + 2),
        Some(b'u') => {
            let hex = b.get(i + 2..i + 6).ok_or(Invalid)?;
            if hex.iter().all(u8::is_ascii_hexdigit) {
                Ok(i + 6)
            } else {
                Err(Invalid)
            }
        }
        _ => Err(Invalid),
    }
}

/// A number starting at `b[i]`: the index past it.
#[inline(always)]
pub fn number(b: &[u8], i: usize) -> Result<usize> {
    let mut j = i;
    if b.get(j) == Some(&b'-') {
        j += 1;
    }
    match b.get(j) {
        Some(b'0') => j += 1,
        Some(b'1'..=b'9') => j = digits_end(b, j),
        _ => return Err(Invalid),
    }
    if b.get(j) == Some(&b'.') {
        let k = digits_end(b, j + 1);
        if k == j + 1 {
            return Err(Invalid);
        }
        j = k;
    }
    if matches!(b.get(j), Some(b'e' | b'E')) {
        j += 1;
        if matches!(b.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        let k = digits_end(b, j);
        if k == j {
            return Err(Invalid);
        }
        j = k;
    }
    Ok(j)
}

/// [`number`], and whether the number is a plain integer ([`is_plain_integer`]), in one scan
/// of its digits (the usual value of a JSON-lines row: its stamp and its ids). Always inlined:
/// left to the compiler, it was not once [`digits_end`] read a row's last word whole.
#[inline(always)]
pub fn number_plain(b: &[u8], i: usize) -> Result<(usize, bool)> {
    let negative = b.get(i) == Some(&b'-');
    let j = i + usize::from(negative);
    let end = match b.get(j) {
        Some(b'0') => j + 1,
        Some(b'1'..=b'9') => digits_end(b, j),
        _ => return Err(Invalid),
    };
    if matches!(b.get(end), Some(b'.' | b'e' | b'E')) {
        return Ok((fraction_or_exponent(b, i)?, false));
    }
    // `0` alone or digits without a leading zero, at most 18 of them, and not `-0`.
    Ok((end, end - j <= 18 && !(negative && b[j] == b'0')))
}

/// [`number`] of a number with a fraction or an exponent, out of [`number_plain`]'s way
/// (inlined there, it made the usual integer dearer to read).
#[cold]
#[inline(never)]
fn fraction_or_exponent(b: &[u8], i: usize) -> Result<usize> {
    number(b, i)
}

/// One value starting at `b[i]` (no whitespace before it), checked: the index past it.
/// Containers are crossed without recursion; `depth` is how deep the value already is.
pub fn skip_value(b: &[u8], i: usize, depth: usize) -> Result<usize> {
    match b.get(i) {
        Some(b'"') => string(b, i).map(|(e, _)| e),
        Some(b'{' | b'[') => skip_container(b, i, depth),
        Some(b't') => literal(b, i, b"true"),
        Some(b'f') => literal(b, i, b"false"),
        Some(b'n') => literal(b, i, b"null"),
        Some(_) => number(b, i),
        None => Err(Invalid),
    }
}

fn literal(b: &[u8], i: usize, word: &[u8]) -> Result<usize> {
    if b[i..].starts_with(word) {
        Ok(i + word.len())
    } else {
        Err(Invalid)
    }
}

/// An array or object at `b[i]`, with everything in it, checked: the index past it. The kinds of
/// the open containers are the bits of a `u128` (1: object), as deep as [`MAX_DEPTH`] allows.
fn skip_container(b: &[u8], i: usize, depth: usize) -> Result<usize> {
    enum At {
        /// an opening bracket
        Open,
        /// past a value inside the container on top
        AfterValue,
        /// past the closing bracket of the container on top
        Closed,
    }
    let mut kinds: u128 = 0;
    let mut open = 0usize;
    let mut j = i;
    let mut at = At::Open;
    let close = |kinds: u128| if kinds & 1 == 1 { b'}' } else { b']' };
    loop {
        at = match at {
            At::Open => {
                // serde_json refuses the 128th level
                if depth + open + 1 >= MAX_DEPTH {
                    return Err(Invalid);
                }
                kinds = (kinds << 1) | u128::from(b[j] == b'{');
                open += 1;
                j = skip_ws(b, j + 1);
                if b.get(j) == Some(&close(kinds)) {
                    j += 1;
                    At::Closed
                } else {
                    let (k, step) = element(b, j, kinds & 1 == 1)?;
                    j = k;
                    step
                }
            }
            At::Closed => {
                open -= 1;
                kinds >>= 1;
                if open == 0 {
                    return Ok(j);
                }
                At::AfterValue
            }
            At::AfterValue => {
                j = skip_ws(b, j);
                match b.get(j) {
                    Some(b',') => {
                        let (k, step) = element(b, skip_ws(b, j + 1), kinds & 1 == 1)?;
                        j = k;
                        step
                    }
                    Some(&c) if c == close(kinds) => {
                        j += 1;
                        At::Closed
                    }
                    _ => return Err(Invalid),
                }
            }
        };
    }

    /// A member (`"key": value`, in an object) or a value (in an array) at `b[j]`; a container
    /// value is not crossed: its index is returned with [`At::Open`].
    fn element(b: &[u8], mut j: usize, object: bool) -> Result<(usize, At)> {
        if object {
            if b.get(j) != Some(&b'"') {
                return Err(Invalid);
            }
            j = skip_ws(b, string(b, j)?.0);
            if b.get(j) != Some(&b':') {
                return Err(Invalid);
            }
            j = skip_ws(b, j + 1);
        }
        match b.get(j) {
            Some(b'{' | b'[') => Ok((j, At::Open)),
            _ => Ok((skip_value(b, j, 0)?, At::AfterValue)),
        }
    }
}

/// The members of the object at `b[i]` (`{`), checked: `on_member(key, value)` with the key's
/// text (borrowed; decoded, so owned, when it holds escapes) and the raw text of its value. Returns the index past
/// the closing brace. `depth` is how deep the object is (0 for a document's own).
pub fn members<'a>(
    b: &'a [u8],
    i: usize,
    depth: usize,
    mut on_member: impl FnMut(Cow<'a, [u8]>, &'a [u8]) -> Result<()>,
) -> Result<usize> {
    if b.get(i) != Some(&b'{') || depth + 1 >= MAX_DEPTH {
        return Err(Invalid);
    }
    let mut j = skip_ws(b, i + 1);
    if b.get(j) == Some(&b'}') {
        return Ok(j + 1);
    }
    loop {
        if b.get(j) != Some(&b'"') {
            return Err(Invalid);
        }
        let key_start = j;
        let (key_end, escaped) = string(b, j)?;
        j = skip_ws(b, key_end);
        if b.get(j) != Some(&b':') {
            return Err(Invalid);
        }
        let v = skip_ws(b, j + 1);
        let v_end = skip_value(b, v, depth + 1)?;
        if escaped {
            let decoded: String =
                serde_json::from_slice(&b[key_start..key_end]).map_err(|_| Invalid)?;
            on_member(Cow::Owned(decoded.into_bytes()), &b[v..v_end])?;
        } else {
            on_member(Cow::Borrowed(&b[key_start + 1..key_end - 1]), &b[v..v_end])?;
        }
        j = skip_ws(b, v_end);
        match b.get(j) {
            Some(b',') => j = skip_ws(b, j + 1),
            Some(b'}') => return Ok(j + 1),
            _ => return Err(Invalid),
        }
    }
}

/// The text of a raw JSON string (with its quotes); `None` for any other value.
pub fn str_of(raw: &[u8]) -> Option<Result<Cow<'_, str>>> {
    let inner = raw.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
    if let Some(ascii) = crate::ingest::words::ascii_without(inner, b'\\') {
        return Some(Ok(Cow::Borrowed(ascii)));
    }
    if !inner.contains(&b'\\') {
        return Some(
            std::str::from_utf8(inner)
                .map(Cow::Borrowed)
                .map_err(|_| Invalid),
        );
    }
    Some(
        serde_json::from_slice::<String>(raw)
            .map(Cow::Owned)
            .map_err(|_| Invalid),
    )
}

/// The text of a raw value as `serde_json` would show it: a string's own text, anything else
/// written compactly (`7`, `1.5`, `[1,2]`, `{"a":1}`).
pub fn text_of(raw: &[u8]) -> Result<Cow<'_, str>> {
    if let Some(s) = str_of(raw) {
        return s;
    }
    if is_plain_integer(raw) {
        // ASCII digits: already what serde_json writes.
        return Ok(Cow::Borrowed(
            std::str::from_utf8(raw).map_err(|_| Invalid)?,
        ));
    }
    let v: serde_json::Value = serde_json::from_slice(raw).map_err(|_| Invalid)?;
    Ok(Cow::Owned(v.to_string()))
}

/// [`text_of`] a value `raw` that lies in the text `line`: what needs no decoding is borrowed
/// from `line` without checking it as UTF-8 again (a large part of reading a JSON line).
pub fn text_in<'a>(line: &'a str, raw: &'a [u8]) -> Result<Cow<'a, str>> {
    if let Some(inner) = raw.strip_prefix(b"\"").and_then(|r| r.strip_suffix(b"\"")) {
        if !inner.contains(&b'\\') {
            return part_of(line, inner).map(Cow::Borrowed);
        }
    } else if is_plain_integer(raw) {
        return part_of(line, raw).map(Cow::Borrowed);
    }
    text_of(raw)
}

/// `part`, a slice of `line`'s bytes, as text.
pub fn part_of<'a>(line: &'a str, part: &'a [u8]) -> Result<&'a str> {
    let at = (part.as_ptr() as usize).wrapping_sub(line.as_ptr() as usize);
    match line.get(at..at.wrapping_add(part.len())) {
        Some(text) if text.as_bytes().as_ptr() == part.as_ptr() => Ok(text),
        _ => std::str::from_utf8(part).map_err(|_| Invalid),
    }
}

/// `-?[1-9][0-9]*` or `0` that fits in an `i64` or `u64`: written back unchanged by serde_json.
pub fn is_plain_integer(raw: &[u8]) -> bool {
    let digits = raw.strip_prefix(b"-").unwrap_or(raw);
    !digits.is_empty()
        && digits.len() <= 18
        && digits.iter().all(u8::is_ascii_digit)
        && (digits[0] != b'0' || digits.len() == 1)
        && raw != b"-0"
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`string`] as a byte loop: the first quote, backslash or control character.
    fn string_by_bytes(b: &[u8], i: usize) -> Result<(usize, bool)> {
        let (mut j, mut escaped) = (i + 1, false);
        loop {
            match b.get(j) {
                Some(b'"') => return Ok((j + 1, escaped)),
                Some(b'\\') => {
                    escaped = true;
                    j = escape(b, j)?;
                }
                Some(c) if *c >= 0x20 => j += 1,
                _ => return Err(Invalid),
            }
        }
    }

    #[test]
    fn strings_end_where_a_byte_loop_ends_them_and_serde_json_agrees() {
        let parts = [
            "", "a", "é", "\\\"", "\\n", "\\u00e9", "\\u00", "\\x", "\t", "\u{1}", "\"", "\\",
        ];
        let mut texts = vec![String::new()];
        for _ in 0..3 {
            let mut next = Vec::new();
            for t in &texts {
                for p in parts {
                    next.push(format!("{t}{p}"));
                }
            }
            texts = next;
        }
        for t in texts {
            for pad in [0, 5, 13, 15, 16, 17, 31] {
                for close in ["\"", ""] {
                    let line = format!("\"{}{t}{close}", "x".repeat(pad));
                    let b = line.as_bytes();
                    let got = string(b, 0);
                    assert_eq!(got, string_by_bytes(b, 0), "{line:?}");
                    if let Ok((end, _)) = got {
                        let s: std::result::Result<String, _> = serde_json::from_slice(&b[..end]);
                        assert!(s.is_ok(), "{line:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn number_plain_agrees_with_number_and_is_plain_integer() {
        let cases = [
            "0",
            "-0",
            "7",
            "-7",
            "0123",
            "00",
            "-",
            "-a",
            "",
            "x",
            "1.5",
            "1.",
            "1e3",
            "1E+3",
            "1e",
            "-0.0",
            "123456789012345678",
            "1234567890123456789",
            "-123456789012345678",
            "18446744073709551616",
            "12,",
            "12}",
            "5 ",
        ];
        for case in cases {
            let b = case.as_bytes();
            let separate = number(b, 0).map(|end| (end, is_plain_integer(&b[..end])));
            assert_eq!(number_plain(b, 0), separate, "{case:?}");
        }
    }

    /// The scanner accepts exactly what serde_json accepts, on every value of a list of valid
    /// and broken ones.
    #[test]
    fn the_scanner_agrees_with_serde_json() {
        let deep_ok = "[".repeat(127) + &"]".repeat(127);
        let deep_bad = "[".repeat(128) + &"]".repeat(128);
        let cases = [
            r#"{}"#,
            r#"[]"#,
            r#"{"a":1,"b":[1,2,{"c":"d\"e\\"}],"e":null,"f":true,"g":false}"#,
            r#"{"a":-0.5e+7,"b":1E3,"c":0}"#,
            r#"{"a":"\u00e9\n"}"#,
            r#"{"a":01}"#,
            r#"{"a":1.}"#,
            r#"{"a":.5}"#,
            r#"{"a":1e}"#,
            r#"{"a":+1}"#,
            r#"{"a":1,}"#,
            r#"[1,]"#,
            r#"[1 2]"#,
            r#"{"a" 1}"#,
            r#"{a:1}"#,
            r#"{"a":tru}"#,
            r#"{"a":"\x"}"#,
            r#"{"a":"\u12"}"#,
            "{\"a\":\"tab\there\"}",
            r#"{"a":[}"#,
            r#"{"a":{]}"#,
            r#"["#,
            r#"{"a":"#,
            r#""open"#,
            deep_ok.as_str(),
            deep_bad.as_str(),
        ];
        for case in cases {
            let b = case.as_bytes();
            let ours = skip_value(b, 0, 0).is_ok_and(|e| e == b.len());
            let theirs = serde_json::from_slice::<serde_json::Value>(b).is_ok();
            assert_eq!(ours, theirs, "{case}");
        }
    }

    #[test]
    fn members_are_visited_with_decoded_keys_and_raw_values() {
        let doc = br#"{ "ph" : "X", "ts":12.5, "a\u0062": {"x": [1]} }"#;
        let mut seen = Vec::new();
        let end = members(doc, 0, 0, |k, v| {
            seen.push((
                String::from_utf8(k.into_owned()).unwrap(),
                String::from_utf8(v.to_vec()).unwrap(),
            ));
            Ok(())
        })
        .unwrap();
        assert_eq!(end, doc.len());
        assert_eq!(
            seen,
            [
                ("ph".to_string(), "\"X\"".to_string()),
                ("ts".to_string(), "12.5".to_string()),
                ("ab".to_string(), "{\"x\": [1]}".to_string())
            ]
        );
    }

    #[test]
    fn values_read_as_serde_json_shows_them() {
        assert_eq!(text_of(b"\"a\\tb\"").unwrap(), "a\tb");
        for raw in [
            "25332",
            "-7",
            "0",
            "-0",
            "1.50",
            "1e3",
            "123456789012345678901",
            "{\"b\": 1, \"a\": [true]}",
            "null",
        ] {
            let v: serde_json::Value = serde_json::from_str(raw).unwrap();
            assert_eq!(text_of(raw.as_bytes()).unwrap(), v.to_string(), "{raw}");
        }
        assert!(str_of(b"7").is_none());
    }
}
