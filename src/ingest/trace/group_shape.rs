//! babeltrace2 groups read by their shape: the bytes between the values of one line's groups,
//! learnt from a line read whole, matched as they stand in the lines after it.
//!
//! The lines of one event differ in their values only: `{ cpu_id = 0 }, { vtid = 25101 }, {
//! addr = 0x557BBCE851B1, call_site = 0x7F308F3EF24A }` is followed by the same groups with
//! other numbers. A rule's key fields were found by walking the groups up to each of them
//! ([`super::babeltrace::group_field`]: a large part of the reading of a line with two key
//! fields). A [`GroupShape`] keeps what lay before each value
//! of a line that [`super::babeltrace::groups`] read whole, when every value was a token (ASCII
//! letters, digits, `_`, `.`, `+`, `-`: no quote, bracket, comma, `=` or white space), and what
//! followed the last value. A later line is read by comparing those bytes where they should be
//! and taking the token at each value; at the first difference the line is left to the look-up
//! when asked, as before.
//!
//! A line read so gives the fields the whole reading gives, in its order: the whole reading
//! acts on quotes, backslashes, commas and brackets only, and tells an item's name and value
//! apart by its ` = ` and white space; all of those lie in the bytes compared, none in a
//! token, so it cuts the line into the same items, and each value is the token, as it was in
//! the line learnt from. A test compares the two on the committed LTTng sample and on lines
//! that differ from a learnt shape at every byte; the fuzz target `trace_reader` compares the
//! fields found with the whole reading's on every line.

use std::ops::Range;

use super::{Event, NOWHERE, PLACES};
use crate::ingest::words::{ALL, Block, WIDTH, equal};

/// Shapes kept at once: a trace's lines are of a few events, each with its own groups.
const SHAPES: usize = 4;

/// Shapes learnt after which a line is no longer read whole to learn one unless shapes were
/// used as often as they were learnt (a trace whose values are strings would read every line
/// twice).
const LEARNT_FREELY: u64 = 64;

/// What lay before one value of a learnt line.
#[derive(Debug, Clone, Copy)]
struct Gap {
    /// where these bytes end in [`GroupShape::text`] (they begin where the gap before ended)
    end: u32,
    /// the item's name, as offsets into the gap
    key: (u32, u32),
    /// the gap's bytes, zeros after them, when it is at most sixteen bytes long (compared with
    /// the line a block at a time)
    block: Option<[u8; WIDTH]>,
}

/// The bytes between the values of one line's groups.
#[derive(Debug, Clone)]
struct GroupShape {
    /// the gaps back to back, then what followed the last value
    text: Vec<u8>,
    gaps: Vec<Gap>,
    /// per field the rules read, the first value named so ([`Event::places`])
    places: [u8; PLACES],
}

impl Default for GroupShape {
    fn default() -> Self {
        GroupShape {
            text: Vec::new(),
            gaps: Vec::new(),
            places: [NOWHERE; PLACES],
        }
    }
}

impl GroupShape {
    /// The fields of the groups at `b[from..]` if they are of this shape, pushed to `ev`;
    /// `false` at the first byte that differs (`ev.fields` is then cleared).
    fn read(&self, b: &[u8], from: usize, ev: &mut Event) -> bool {
        // (places are given from the first field: none is pushed before the groups)
        let first = ev.fields.is_empty();
        let fits = self.push_fields(b, from, ev).is_some();
        if !fits {
            ev.fields.clear();
        } else if first {
            ev.places = self.places;
        }
        fits
    }

    /// [`GroupShape::read`], `None` at the first byte that differs.
    #[inline]
    fn push_fields(&self, b: &[u8], from: usize, ev: &mut Event) -> Option<()> {
        let (mut at, mut start) = (from, 0usize);
        for gap in &self.gaps {
            let end = gap.end as usize;
            let written = &self.text[start..end];
            let v = at + written.len();
            let same = match &gap.block {
                Some(block) if at + WIDTH <= b.len() => {
                    let differ = !Block::at(b, at).same(Block::at(block, 0));
                    differ & !(u32::MAX << written.len()) == 0
                }
                _ => b.get(at..v).is_some_and(|here| equal(here, written)),
            };
            if !same {
                return None;
            }
            let v_end = token_end(b, v);
            if v_end == v {
                return None;
            }
            let key = at + gap.key.0 as usize..at + gap.key.1 as usize;
            ev.fields.push((key, v..v_end));
            (at, start) = (v_end, end);
        }
        equal(b.get(at..)?, &self.text[start..]).then_some(())
    }

    /// The shape of the groups at `b[from..]`, whose fields the whole reading gave as
    /// `fields`, with the places of `wanted` among them; `None` when a value is not a token (or
    /// an offset does not fit a `u32`).
    fn learn(
        b: &[u8],
        from: usize,
        fields: &[(Range<usize>, Range<usize>)],
        wanted: &[String],
    ) -> Option<Self> {
        let mut shape = GroupShape::default();
        for (place, name) in shape.places.iter_mut().zip(wanted) {
            let first = fields.iter().position(|(key, _)| {
                b.get(key.clone())
                    .is_some_and(|key| equal(key, name.as_bytes()))
            });
            *place = first.and_then(|k| u8::try_from(k).ok()).unwrap_or(NOWHERE);
        }
        let mut at = from;
        for (key, value) in fields {
            if value.start < at || key.start < at || key.end > value.start {
                return None;
            }
            if value.is_empty() || token_end(b, value.start) != value.end {
                return None;
            }
            let written = &b[at..value.start];
            shape.text.extend_from_slice(written);
            let key = (
                u32::try_from(key.start - at).ok()?,
                u32::try_from(key.end - at).ok()?,
            );
            let end = u32::try_from(shape.text.len()).ok()?;
            let block = (written.len() <= WIDTH).then(|| {
                let mut block = [0; WIDTH];
                block[..written.len()].copy_from_slice(written);
                block
            });
            shape.gaps.push(Gap { end, key, block });
            at = value.end;
        }
        shape.text.extend_from_slice(&b[at..]);
        Some(shape)
    }
}

/// Where the token that begins at `b[v]` ends: the first byte that is not an ASCII letter,
/// digit, `_`, `.`, `+` or `-`, found sixteen bytes at a time.
#[inline]
fn token_end(b: &[u8], v: usize) -> usize {
    let mut i = v;
    while i < b.len() {
        let block = Block::at(b, i);
        let token = block.identifier() | block.eq(b'.') | block.eq(b'+') | block.eq(b'-');
        let other = !token & ALL;
        if other != 0 {
            return (i + other.trailing_zeros() as usize).min(b.len());
        }
        i += WIDTH;
    }
    b.len()
}

/// The shapes of a reader's lines.
#[derive(Debug, Clone, Default)]
pub struct GroupShapes {
    shapes: Vec<GroupShape>,
    /// the shape that fitted last (tried first)
    last: usize,
    /// the shape replaced next when all are kept
    next: usize,
    /// lines read by a shape, and lines read whole to learn a shape (whether one was)
    hits: u64,
    learnt: u64,
}

impl GroupShapes {
    /// The fields of the groups at `line[from..]` pushed to `ev` when a learnt shape fits;
    /// `false` (nothing pushed) when none does.
    #[inline]
    pub fn read(&mut self, line: &str, from: usize, ev: &mut Event) -> bool {
        let b = line.as_bytes();
        let last = self.last;
        if let Some(shape) = self.shapes.get(last)
            && shape.read(b, from, ev)
        {
            self.hits += 1;
            return true;
        }
        for (i, shape) in self.shapes.iter().enumerate() {
            if i != last && shape.read(b, from, ev) {
                self.last = i;
                self.hits += 1;
                return true;
            }
        }
        false
    }

    /// Lines read by a shape so far.
    #[cfg(test)]
    pub(super) fn hits(&self) -> u64 {
        self.hits
    }

    /// Whether a line no shape fitted should be read whole to learn its shape.
    pub fn learning(&self) -> bool {
        self.learnt < LEARNT_FREELY || self.hits >= self.learnt
    }

    /// Learns the shape of the groups at `line[from..]`, which the whole reading read as
    /// `fields`, and where the fields named in `wanted` are among them; nothing when a value is
    /// not a token.
    pub fn learn(
        &mut self,
        line: &str,
        from: usize,
        fields: &[(Range<usize>, Range<usize>)],
        wanted: &[String],
    ) {
        // counted when nothing is learnt too: a trace whose values are strings stops being
        // read whole after a while, and is looked up in as before
        self.learnt += 1;
        let Some(shape) = GroupShape::learn(line.as_bytes(), from, fields, wanted) else {
            return;
        };
        if self.shapes.len() < SHAPES {
            self.shapes.push(shape);
            self.last = self.shapes.len() - 1;
        } else {
            self.shapes[self.next] = shape;
            self.last = self.next;
            self.next = (self.next + 1) % SHAPES;
        }
    }
}
