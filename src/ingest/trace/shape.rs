//! JSON-lines rows read by their shape: the bytes between the values of one row, learnt from a
//! row read in full, matched as they stand in the rows after it.
//!
//! A program writes its JSON lines with one serializer, so its rows differ in their values and
//! rarely in anything else: `{"ts": 1000, "name": "request_start", "id": 7}` is followed by
//! `{"ts": 1700, "name": "request_done", "id": 7}`. Reading each row as JSON (white space, a
//! quote, the key compared with every key read, white space, a colon, white space, the value)
//! cost as much as pairing its event; read by its shape, a good deal less. A [`RowShape`]
//! keeps what lay before each value of a row that [`json_line_walked`] read in place (its
//! white space, punctuation and key, as bytes), with the role of that key, and what followed the
//! last value. A later row is read by comparing those bytes where they should be and reading
//! each value as [`json_line_walked`] reads it; at the first difference the row goes to
//! [`json_line_walked`], and then to the general reader, as before.
//!
//! A row read so gives what [`json_line_walked`] gives, ranges and all: every byte it compares
//! is a byte that reader would have read and judged the same way (the same key, so the same
//! role; the same white space and punctuation), and every value is read by the same function.
//! Unit tests compare the two on rows that differ from a learnt shape at every byte; the fuzz
//! target `trace_reader` compares them on every line it is given, and serial with parallel
//! reads (each worker learns its own shapes).

use std::ops::Range;

use super::table::{Columns, Role, RowKeys, Walk, json_line_walked, stamped_ns, time_ns, value};
use super::{Event, Parsed, json, short_digits};
use crate::ingest::words::{digits_end, equal};

/// Shapes kept at once: rows of a few kinds (each its own keys) alternate in a log.
const SHAPES: usize = 4;

/// Shapes learnt after which shapes are no longer tried unless they were used as often as
/// they were learnt (a log whose rows have more shapes than are kept would compare each row
/// with every shape, then learn one from it).
const LEARNT_FREELY: u64 = 1024;

/// What lay before one value of a learnt row.
#[derive(Debug, Clone, Copy)]
struct Gap {
    /// where these bytes end in [`RowShape::text`] (they begin where the gap before ended)
    end: u32,
    /// the key's bytes (without quotes), as offsets into the gap
    key: (u32, u32),
    /// what the key is to the reader
    role: Role,
}

/// The bytes between the values of one row, and the role of each value.
#[derive(Debug, Clone, Default)]
struct RowShape {
    /// the gaps back to back, then what followed the last value
    text: Vec<u8>,
    gaps: Vec<Gap>,
}

impl RowShape {
    /// Reads `b` as a row of this shape; `None` at the first byte that differs (or a value
    /// [`json_line_walked`] would not read).
    #[inline(always)]
    fn read(&self, b: &[u8], columns: &Columns, ev: &mut Event) -> Option<Parsed> {
        ev.clear();
        let (mut ts, mut name) = (None, None);
        let (mut at, mut from) = (0usize, 0usize);
        for gap in &self.gaps {
            let end = gap.end as usize;
            let written = self.text.get(from..end)?;
            if !equal(b.get(at..at + written.len())?, written) {
                return None;
            }
            let v = at + written.len();
            if matches!(gap.role, Role::Time)
                && let Some((v_end, ns)) = small_stamp(b, v, columns.scale)
            {
                ts = Some(ns);
                (at, from) = (v_end, end);
                continue;
            }
            let (v_end, plain) = value_of(b, v)?;
            match gap.role {
                Role::Time => ts = Some(time_ns(&b[v..v_end], columns.scale)),
                Role::Other => {}
                role => {
                    let value = plain?;
                    match role {
                        Role::Name => name = Some(value.clone()),
                        Role::Wanted(j) => ev.note_place(j),
                        _ => {}
                    }
                    let key = at + gap.key.0 as usize..at + gap.key.1 as usize;
                    ev.fields.push((key, value));
                }
            }
            (at, from) = (v_end, end);
        }
        if !equal(b.get(at..)?, self.text.get(from..)?) {
            return None;
        }
        Some(stamped_ns(ts, name, ev))
    }

    /// The shape of `line`, whose members [`json_line_walked`] read as `members`; `None`
    /// when an offset does not fit a `u32` (lines are shorter than that).
    fn learn(&mut self, line: &[u8], members: &[Member]) -> Option<()> {
        self.text.clear();
        self.gaps.clear();
        let mut from = 0;
        for m in members {
            self.text.extend_from_slice(line.get(from..m.value.start)?);
            let key = (
                u32::try_from(m.key.start.checked_sub(from)?).ok()?,
                u32::try_from(m.key.end.checked_sub(from)?).ok()?,
            );
            self.gaps.push(Gap {
                end: u32::try_from(self.text.len()).ok()?,
                key,
                role: m.role,
            });
            from = m.value.end;
        }
        self.text.extend_from_slice(line.get(from..)?);
        Some(())
    }
}

/// One member of a row as [`json_line_walked`] read it.
#[derive(Debug, Clone)]
pub(super) struct Member {
    /// the key's bytes, without quotes
    pub(super) key: Range<usize>,
    /// the value's bytes
    pub(super) value: Range<usize>,
    pub(super) role: Role,
}

impl Walk for Vec<Member> {
    #[inline]
    fn member(&mut self, key: Range<usize>, value: Range<usize>, role: Role) {
        self.push(Member { key, value, role });
    }
}

/// The shapes of a reader's rows: a JSON-lines row read by a shape learnt before when one fits,
/// else in place (and its shape learnt).
#[derive(Debug, Clone, Default)]
pub struct RowShapes {
    shapes: Vec<RowShape>,
    /// the shape that fitted last (tried first)
    last: usize,
    /// the shape replaced next when all are kept
    next: usize,
    /// rows read by a shape, and shapes learnt
    hits: u64,
    learnt: u64,
    members: Vec<Member>,
}

impl RowShapes {
    /// Reads `line` as [`super::table::json_line_in_place`] does; `None` when it needs the
    /// general reader.
    ///
    /// Inlined where it is called, as [`RowShape::read`] is here: what they return was written
    /// to the stack a field at a time and copied out in one 16-byte load that waited for those
    /// stores (store forwarding fails), most of the caller's samples in a profile.
    #[inline(always)]
    pub fn read(
        &mut self,
        line: &str,
        columns: &Columns,
        keys: &RowKeys,
        ev: &mut Event,
    ) -> Option<Parsed> {
        // Rows of more shapes than are kept: each would be compared with every shape, then
        // read in place and learnt; past a while they are read in place alone.
        if self.learnt >= LEARNT_FREELY && self.hits < self.learnt {
            return json_line_walked(line, columns, keys, ev, &mut ());
        }
        let b = line.as_bytes();
        // the shape that fitted last first, then the others
        let last = self.last;
        let order = std::iter::once(last).chain((0..self.shapes.len()).filter(|&i| i != last));
        for i in order {
            let Some(shape) = self.shapes.get(i) else {
                break;
            };
            if let Some(parsed) = shape.read(b, columns, ev) {
                self.last = i;
                self.hits += 1;
                return Some(parsed);
            }
        }
        self.members.clear();
        let parsed = json_line_walked(line, columns, keys, ev, &mut self.members)?;
        if parsed == Parsed::Event {
            self.learn(b);
        }
        Some(parsed)
    }

    fn learn(&mut self, b: &[u8]) {
        let at = if self.shapes.len() < SHAPES {
            self.shapes.push(RowShape::default());
            self.shapes.len() - 1
        } else {
            let at = self.next;
            self.next = (self.next + 1) % SHAPES;
            at
        };
        match self.shapes[at].learn(b, &self.members) {
            Some(()) => {
                self.learnt += 1;
                self.last = at;
            }
            None => {
                self.shapes.swap_remove(at);
                self.last = 0;
                self.next = 0;
            }
        }
    }
}

/// A stamp of digits, the first not `0`, and no fraction or exponent after them: where it
/// ends and its nanoseconds, what [`value_of`] and [`time_ns`] make of it, its end and its
/// value each found once, a word at a time ([`digits_end`], [`short_digits`]; the two read the
/// digits twice, a cost on every row). `None` for any other stamp, which they read.
#[inline]
fn small_stamp(b: &[u8], v: usize, scale: u64) -> Option<(usize, Option<u64>)> {
    if !matches!(b.get(v), Some(b'1'..=b'9')) {
        return None;
    }
    let end = digits_end(b, v + 1);
    if matches!(b.get(end), Some(b'.' | b'e' | b'E')) {
        return None;
    }
    let value = short_digits(&b[v..end])??;
    Some((end, value.checked_mul(scale)))
}

/// [`value`], its numbers read here.
#[inline]
fn value_of(b: &[u8], v: usize) -> Option<(usize, Option<Range<usize>>)> {
    match b.get(v) {
        Some(b'"') => {
            let (end, escaped) = json::string(b, v).ok()?;
            Some((end, (!escaped).then_some(v + 1..end - 1)))
        }
        // [`value`]'s number, read here: left to it, whether it was inlined changed with
        // code elsewhere, and the reading's speed with it
        Some(b'-' | b'0'..=b'9') => {
            let (end, plain) = json::number_plain(b, v).ok()?;
            Some((end, plain.then_some(v..end)))
        }
        _ => value(b, v),
    }
}

#[cfg(test)]
mod tests {
    use super::super::table::json_line_in_place;
    use super::*;

    #[test]
    fn a_small_stamp_is_what_the_value_and_time_readers_make_of_it() {
        let mut taken = 0;
        for len in 1..=20 {
            for first in ["1", "9", "0", "-"] {
                for after in ["", ",", "}", " ", ".5", "e3", "E3", "x", "0"] {
                    for pad in ["", "1234567", "12345678, \"name\": \"a\"}"] {
                        let digits = &"98765432109876543210"[..len - 1];
                        let text = format!("{first}{digits}{after}{pad}");
                        let b = text.as_bytes();
                        for scale in [1, 1_000, 1_000_000_000] {
                            let Some((end, ns)) = small_stamp(b, 0, scale) else {
                                continue;
                            };
                            taken += 1;
                            let (v_end, _) = value_of(b, 0).unwrap();
                            assert_eq!(end, v_end, "{text}");
                            assert_eq!(ns, time_ns(&b[..v_end], scale), "{text} x {scale}");
                        }
                    }
                }
            }
        }
        assert!(taken > 500, "{taken}");
    }

    /// What an event says: its stamp, its name and its fields as text.
    fn said(parsed: Option<Parsed>, line: &str, ev: &Event) -> String {
        let text = |r: &Range<usize>| line.get(r.clone()).unwrap_or("?").to_string();
        let fields: Vec<(String, String, Range<usize>)> = ev
            .fields
            .iter()
            .map(|(k, v)| (text(k), text(v), v.clone()))
            .collect();
        format!(
            "{parsed:?} {} {} {:?} {fields:?}",
            ev.ts_ns,
            text(&ev.name),
            ev.name
        )
    }

    /// Every row read through shapes says what reading it in place says.
    fn check(columns: &Columns, wanted: &[String], rows: &[String]) -> RowShapes {
        let keys = RowKeys::new(columns, wanted);
        let mut shapes = RowShapes::default();
        for line in rows {
            let mut ev = Event::default();
            let alone = json_line_in_place(line, columns, &keys, &mut ev);
            let alone = said(alone, line, &ev);
            let mut ev = Event::default();
            let shaped = shapes.read(line, columns, &keys, &mut ev);
            assert_eq!(said(shaped, line, &ev), alone, "{line}");
            // a field at its noted place is the field found by its name (where the row was
            // read in place: else `ev` is the general reader's to fill)
            if shaped.is_some() {
                for (j, name) in wanted.iter().enumerate() {
                    assert_eq!(
                        ev.field_at(line, j, name),
                        ev.field(line, name),
                        "{line} {name}"
                    );
                }
            }
        }
        shapes
    }

    #[test]
    fn rows_read_by_their_shape_say_what_rows_read_in_place_say() {
        let cols = Columns::default();
        let wanted = vec!["id".to_string(), "who".to_string()];
        let base =
            r#"{"ts": 1000, "name": "request_start", "id": 7, "x": [1, {"y": "z"}], "who": "me"}"#;
        let mut rows = vec![base.to_string()];
        // the same row with each byte changed to each byte that matters to JSON: every row
        // either keeps the shape or leaves it at that byte
        let bytes = b" \t\"\\{}[],:0123456789-+.eEnulltrfasx\x01\xc3";
        for at in 0..base.len() {
            for &c in bytes {
                let mut b = base.as_bytes().to_vec();
                b[at] = c;
                if let Ok(row) = String::from_utf8(b) {
                    rows.push(row);
                    rows.push(base.to_string());
                }
            }
            // a byte dropped and a byte added
            let mut b = base.as_bytes().to_vec();
            b.remove(at);
            rows.extend(String::from_utf8(b).ok());
            let mut b = base.as_bytes().to_vec();
            b.insert(at, b'1');
            rows.extend(String::from_utf8(b).ok());
        }
        let hits = check(&cols, &wanted, &rows).hits;
        assert!(hits > rows.len() as u64 / 2, "{hits} of {}", rows.len());
    }

    #[test]
    fn values_of_other_kinds_and_lengths_keep_the_shape_and_are_read_as_in_place() {
        let cols = Columns::default();
        let wanted = vec!["id".to_string()];
        let values = [
            "0",
            "7",
            "-3",
            "12345678901234567890",
            "1.5",
            "1e3",
            "-0",
            "01",
            "\"\"",
            "\"x\"",
            "\"a\\\"b\"",
            "\"é\"",
            "null",
            "true",
            "[]",
            "{}",
            "\"1\"",
            "\"x\ty\"",
            "-",
            "",
        ];
        let mut rows = Vec::new();
        for ts in values {
            for name in values {
                for id in values {
                    rows.push(format!(r#"{{"ts": {ts}, "name": {name}, "id": {id}}}"#));
                }
            }
        }
        let hits = check(&cols, &wanted, &rows).hits;
        assert!(hits > 500, "{hits} rows read by their shape");
    }

    #[test]
    fn rows_of_more_shapes_than_are_kept_are_all_read_as_in_place() {
        let cols = Columns::default();
        let wanted = vec!["id".to_string()];
        let rows: Vec<String> = (0..3000)
            .map(|i| {
                let pad = " ".repeat(i % 7);
                format!(r#"{{"ts": {i},{pad}"name": "a", "id": {}}}"#, i % 5)
            })
            .collect();
        let shapes = check(&cols, &wanted, &rows);
        // seven shapes in turn, four kept: none is met again before it is replaced
        assert_eq!(shapes.hits, 0);
        assert_eq!(
            shapes.learnt, LEARNT_FREELY,
            "no shape learnt once they stopped paying"
        );
    }

    #[test]
    fn a_duplicate_time_column_keeps_the_last_one_as_in_place() {
        let cols = Columns::default();
        let rows: Vec<String> = [
            r#"{"ts": 1, "name": "a", "ts": 2}"#,
            r#"{"ts": 3, "name": "a", "ts": 4}"#,
            r#"{"ts": 5, "name": "a", "ts": -1}"#,
            r#"{"ts": 5, "name": "b", "ts": "9"}"#,
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(check(&cols, &[], &rows).hits, 3);
    }
}
