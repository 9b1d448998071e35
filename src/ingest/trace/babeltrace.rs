//! babeltrace2's pretty text of CTF traces (LTTng userspace and kernel):
//!
//! ```text
//! [13:37:01.123456789] (+0.000001234) host provider:event: { cpu_id = 1 }, { vpid = 42 }, { x = 5, s = "a b" }
//! ```
//!
//! The stamp is `[HH:MM:SS.nnnnnnnnn]` (wall time of day: a trace that crosses midnight is
//! unwrapped), `[SECONDS.nnnnnnnnn]` with `--clock-seconds`, or `[YYYY-MM-DD HH:MM:SS.nnnnnnnnn]`
//! with `--clock-date`. The delta `(+...)` and the host name are optional. Every `name = value`
//! of every `{ ... }` group is a field (the stream context's `cpu_id`, `vpid`, `vtid`, ... and
//! the payload alike); a string value is given without its quotes; nested structures and
//! arrays are kept as their text.
//!
//! `--names=all` writes every part named: `timestamp = 04:45:11.006577220, delta = +0.000004236,
//! trace:hostname = vm, name = p:e, stream.packet.context = { cpu_id = 0 }, event.fields = {
//! addr = 0x5 }`; it is read too. `--clock-cycles` stamps (`[00000001602214752762]`) are
//! refused: the text does not say the clock's frequency.

use super::group_shape::GroupShapes;
use super::{Event, Parsed};
use crate::ingest::words::{Block, WIDTH, equal, find_by_blocks, find_near, identifier_len};

const DAY_NS: u64 = 86_400_000_000_000;

/// The most days a time-of-day clock is unwrapped by (50,000 midnights: 137 years). A stamp
/// that would pass one more midnight is malformed: the days added to 64-bit nanoseconds
/// overflowed after 213,503 midnights (a hostile file of 56 MB), and the threads of the
/// parallel reader then disagreed. Well below `u64::MAX / 2`, so that a chunk's stamps and
/// the days before the chunk add without overflow ([`Babeltrace::continued`]).
pub const MOST_DAY_OFFSET: u64 = 50_000 * DAY_NS;

/// Why a time-of-day stamp past [`MOST_DAY_OFFSET`] is malformed.
const TOO_MANY_DAYS: &str = "the time of day passed midnight more than 50,000 times (137 years): no later stamp of the day is placed";

/// Why a stamp that is not one is malformed.
const NOT_A_STAMP: &str = "the timestamp is not HH:MM:SS.n, SECONDS.n or a date";

/// How a line's `{ ... }` groups are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Groups<'w> {
    /// every item, into the event's fields
    Whole,
    /// none: only where they begin, for [`group_field`]
    Lazy,
    /// by a shape learnt before when one fits ([`GroupShapes`]), else lazily; the places of
    /// these fields (the ones the rules read) noted ([`Event::note_place`])
    Shaped(&'w [String]),
}

/// State across lines: the day offset of a time-of-day clock.
#[derive(Debug, Default)]
pub struct Babeltrace {
    last_ns: Option<u64>,
    day_offset: u64,
    /// the first time-of-day stamp read, as it was (the parallel reader's chunks start
    /// without the state of the lines before them: see [`Clock`])
    first_of_day: Option<u64>,
    /// stamps read that are not times of day (seconds, dates)
    other_stamps: u64,
    /// the shapes of the groups of lines read ([`Babeltrace::parse_shaped`])
    pub(super) shapes: GroupShapes,
}

/// What a reader that started without the state of the lines before it needs to be told
/// to give the stamps a reader of every line gives: time-of-day stamps only ever move by
/// whole days, and after the first one, by the same days as they would have.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Clock {
    /// the last time-of-day stamp, unwrapped
    pub last_ns: Option<u64>,
    /// the days added to time-of-day stamps, in ns
    pub day_offset: u64,
}

/// Nanoseconds of `HH:MM:SS.fraction` (seconds below 61: a leap second, not more; more
/// would overflow the sum, a panic in debug builds, and the unwrapping at midnight after it).
fn time_of_day(text: &str) -> Option<u64> {
    let mut parts = text.splitn(3, ':');
    let h: u64 = parts.next()?.parse().ok()?;
    let m: u64 = parts.next()?.parse().ok()?;
    clock_time(h, m, parts.next()?)
}

/// Nanoseconds of hours `h`, minutes `m` and `seconds` (`SS.fraction`), in range.
fn clock_time(h: u64, m: u64, seconds: &str) -> Option<u64> {
    let s = super::seconds_to_ns(seconds)?;
    (h < 24 && m < 60 && s < 61 * 1_000_000_000).then(|| (h * 3600 + m * 60) * 1_000_000_000 + s)
}

/// The stamp as babeltrace2 writes it, `HH:MM:SS.fraction` with two digits each: what
/// [`Babeltrace::stamp`] makes of it, read in place (splitting it and parsing its parts as
/// numbers was a measurable share of reading a line). `None` for any other stamp, and for one
/// whose seconds are not `DIGITS[.DIGITS]` or out of range (the general reading then decides).
fn written_time_of_day(text: &str) -> Option<u64> {
    let b = text.as_bytes();
    let two = |i: usize| {
        let (x, y) = (
            b.get(i)?.wrapping_sub(b'0'),
            b.get(i + 1)?.wrapping_sub(b'0'),
        );
        (x <= 9 && y <= 9).then(|| u64::from(x) * 10 + u64::from(y))
    };
    if b.get(2) != Some(&b':') || b.get(5) != Some(&b':') {
        return None;
    }
    clock_time(two(0)?, two(3)?, text.get(6..)?)
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn dated(text: &str) -> Option<u64> {
    let (date, time) = text.split_once(' ')?;
    let mut p = date.splitn(3, '-');
    let y: i64 = p.next()?.parse().ok()?;
    let m: i64 = p.next()?.parse().ok()?;
    let d: i64 = p.next()?.parse().ok()?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    let days = u64::try_from(days_from_civil(y, m, d)).ok()?;
    days.checked_mul(DAY_NS)?.checked_add(time_of_day(time)?)
}

impl Babeltrace {
    /// The clock's state.
    pub fn clock(&self) -> Clock {
        Clock {
            last_ns: self.last_ns,
            day_offset: self.day_offset,
        }
    }

    /// Continues from `clock` (another reader's state).
    pub fn set_clock(&mut self, clock: Clock) {
        self.last_ns = clock.last_ns;
        self.day_offset = clock.day_offset;
    }

    /// The first time-of-day stamp read, as written (in ns of its day).
    pub fn first_of_day(&self) -> Option<u64> {
        self.first_of_day
    }

    /// How many stamps read were not times of day.
    pub fn other_stamps(&self) -> u64 {
        self.other_stamps
    }

    /// What a reader continuing from `before` makes of this reader's stamps, when this one
    /// started afresh and read time-of-day stamps only: the shift of every one of them (whole
    /// days) and the clock after the last.
    pub fn continued(&self, before: Clock) -> (u64, Clock) {
        let Some(first) = self.first_of_day else {
            return (0, before);
        };
        let mut shift = before.day_offset;
        if let Some(last) = before.last_ns
            && first + shift + DAY_NS / 2 < last
        {
            shift += DAY_NS;
        }
        let after = Clock {
            last_ns: self.last_ns.map(|l| l + shift),
            day_offset: self.day_offset + shift,
        };
        (shift, after)
    }

    /// Parses one line into `ev`, every field of it.
    pub fn parse(&mut self, line: &str, ev: &mut Event) -> Parsed {
        self.parse_with(line, ev, Groups::Whole)
    }

    /// [`Babeltrace::parse`] that leaves the `{ ... }` groups to [`group_field`]: a field is
    /// found in the line when it is asked for (a rule reads one or two fields of a line that
    /// holds four or more; reading them all was a large part of reading a line).
    pub fn parse_lazy(&mut self, line: &str, ev: &mut Event) -> Parsed {
        self.parse_with(line, ev, Groups::Lazy)
    }

    /// [`Babeltrace::parse_lazy`], with the groups of a line of a shape learnt from the lines
    /// before read by that shape ([`GroupShapes`]: the key fields of a line found by the
    /// look-up were a large part of its reading). While shapes are learnt, a line that fits none
    /// is read whole ([`Babeltrace::parse`]) and its shape learnt.
    /// The places of `wanted` (the fields the rules read) among the fields of a line read by
    /// a shape are noted ([`Event::note_place`]).
    pub fn parse_shaped(&mut self, line: &str, ev: &mut Event, wanted: &[String]) -> Parsed {
        self.parse_with(line, ev, Groups::Shaped(wanted))
    }

    fn parse_with(&mut self, line: &str, ev: &mut Event, lazy: Groups) -> Parsed {
        ev.clear();
        // (a stamp's `[` is not white space: the usual line needs no trimming)
        let t = if line.starts_with('[') {
            line
        } else {
            line.trim_start()
        };
        if t.is_empty() {
            return Parsed::Skip;
        }
        let offset = line.len() - t.len();
        if let Some(named) = t.strip_prefix("timestamp = ") {
            return self.named(line, line.len() - named.len(), ev, lazy);
        }
        let close = find_near(t.as_bytes(), 0, b']');
        let Some(close) = close.filter(|_| t.starts_with('[')) else {
            return Parsed::Malformed("no [timestamp]");
        };
        if t[1..close].bytes().all(|b| b.is_ascii_digit()) && close > 1 {
            return Parsed::Malformed(
                "a --clock-cycles stamp (cycles of a clock whose frequency the text does not give): run babeltrace2 without --clock-cycles",
            );
        }
        let ts = match self.stamp(&t[1..close]) {
            Ok(ts) => ts,
            Err(reason) => return Parsed::Malformed(reason),
        };
        ev.ts_ns = ts;
        let mut i = offset + close + 1;
        i += white_len(&line[i..]);
        if line[i..].starts_with("(+")
            || line[i..].starts_with("(-")
            || line[i..].starts_with("(+?")
        {
            match find_near(line.as_bytes(), i, b')') {
                Some(p) => i = p + 1,
                None => return Parsed::Malformed("an unclosed (+delta)"),
            }
        }
        // The event name is the first token ending in ':' (a host name before it does not).
        let Some(name) = event_name(line, i) else {
            return Parsed::Malformed("no event name ending in ':'");
        };
        ev.name = name.clone();
        self.fields_from(line, name.end + 1, ev, lazy);
        Parsed::Event
    }

    /// The groups from `from` into `ev.fields` as `how` says.
    fn fields_from(&mut self, line: &str, from: usize, ev: &mut Event, how: Groups) {
        match how {
            Groups::Whole => groups(line, from, ev),
            Groups::Lazy => ev.lazy_groups = Some(from),
            Groups::Shaped(_) if self.shapes.read(line, from, ev) => {}
            Groups::Shaped(wanted) if self.shapes.learning() => {
                groups(line, from, ev);
                self.shapes.learn(line, from, &ev.fields, wanted);
            }
            Groups::Shaped(_) => ev.lazy_groups = Some(from),
        }
    }

    /// A `--names=all` line from just after `timestamp = `.
    fn named(&mut self, line: &str, at: usize, ev: &mut Event, lazy: Groups) -> Parsed {
        let Some(comma) = line[at..].find(',').map(|p| at + p) else {
            return Parsed::Malformed("no ',' after the timestamp");
        };
        let ts = match self.stamp(line[at..comma].trim()) {
            Ok(ts) => ts,
            Err(reason) => return Parsed::Malformed(reason),
        };
        ev.ts_ns = ts;
        let name_at = memchr::memmem::find(&line.as_bytes()[comma..], b", name = ");
        let Some(name_at) = name_at.map(|p| comma + p + 9) else {
            return Parsed::Malformed("no 'name = EVENT'");
        };
        let name_end = line[name_at..]
            .find(',')
            .map_or(line.len(), |p| name_at + p);
        ev.name = name_at..name_end;
        self.fields_from(line, name_end, ev, lazy);
        Parsed::Event
    }

    fn stamp(&mut self, text: &str) -> Result<u64, &'static str> {
        // A stamp read by `written_time_of_day` holds digits, `:` and `.` only: a time of day.
        let ns = match written_time_of_day(text) {
            Some(ns) => ns,
            None => {
                // digits and a `.` only (`--clock-seconds`): read before the search below,
                // which would find no space and no colon in them
                if let Some(ns) = super::seconds_to_ns(text) {
                    self.other_stamps += 1;
                    return Ok(ns);
                }
                let (space, colon) = text
                    .bytes()
                    .fold((false, false), |(s, c), b| (s || b == b' ', c || b == b':'));
                if space {
                    self.other_stamps += 1;
                    return dated(text).ok_or(NOT_A_STAMP);
                }
                if !colon {
                    // neither seconds (read above) nor a date nor a time of day
                    self.other_stamps += 1;
                    return Err(NOT_A_STAMP);
                }
                time_of_day(text).ok_or(NOT_A_STAMP)?
            }
        };
        self.first_of_day.get_or_insert(ns);
        // Half a day backwards is taken as midnight passing, not as a clock going back.
        if let Some(last) = self.last_ns
            && ns + self.day_offset + DAY_NS / 2 < last
        {
            if self.day_offset >= MOST_DAY_OFFSET {
                return Err(TOO_MANY_DAYS);
            }
            self.day_offset += DAY_NS;
        }
        let ns = ns + self.day_offset;
        self.last_ns = Some(ns);
        Ok(ns)
    }
}

/// Whether ASCII byte `c` is white space to `str::trim` (`char::is_whitespace`).
#[inline]
fn ascii_white(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

/// The length of the white space at the start of `text`, as `str::trim_start` counts it: the
/// usual one space, then an ASCII byte, without decoding characters.
#[inline]
fn white_len(text: &str) -> usize {
    let b = text.as_bytes();
    let n = b.iter().take_while(|&&c| ascii_white(c)).count();
    if b.get(n).is_none_or(u8::is_ascii) {
        return n;
    }
    text.len() - text.trim_start().len()
}

fn event_name(line: &str, from: usize) -> Option<std::ops::Range<usize>> {
    let bytes = line.as_bytes();
    let mut i = from;
    loop {
        while i < bytes.len() && bytes[i] == b' ' {
            i += 1;
        }
        if i >= bytes.len() || bytes[i] == b'{' {
            return None;
        }
        let start = i;
        i = find_by_blocks(bytes, i, b' ').unwrap_or(bytes.len());
        if bytes[i - 1] == b':' && i - 1 > start {
            return Some(start..i - 1);
        }
    }
}

/// The value of field `name` of the groups from `from` (left unparsed by
/// [`Babeltrace::parse_lazy`]): what [`groups`] and then [`Event::field`] give.
///
/// The usual line is walked up to the item named only: its brackets and commas counted, the
/// items before it told apart from it by their first bytes, and only it read. A line that
/// holds a quote or a backslash before the item is found (a string could hide a bracket or
/// a comma), or an item written otherwise than ` NAME = VALUE` (which could be named `name`
/// once trimmed), is read whole by [`groups`].
pub fn group_field(line: &str, from: usize, name: &str) -> Option<std::ops::Range<usize>> {
    match look(line.as_bytes(), from, name.as_bytes()) {
        Look::Item(range) => {
            if let Some(v) = written_value(line.as_bytes(), range.clone(), name.len()) {
                return Some(v);
            }
            let (k, v) = searched_item(line, range)?;
            if line.as_bytes().get(k).is_some_and(|k| k == name.as_bytes()) {
                return Some(v);
            }
        }
        Look::Absent => return None,
        Look::Unsure => {}
    }
    let mut ev = Event::default();
    groups(line, from, &mut ev);
    ev.named(line, name).map(|(_, v)| v.clone())
}

/// The value of the item `range`, known to be ` NAME = ...` with a name of `n` bytes, as
/// [`written_item`] reads it before taking off its quotes (the look-up finds no quote in an
/// item); `None` when it does not read it.
#[inline]
fn written_value(
    b: &[u8],
    range: std::ops::Range<usize>,
    n: usize,
) -> Option<std::ops::Range<usize>> {
    if b.get(range.start) != Some(&b' ') {
        return None;
    }
    let start = range.start + n + 4;
    let end = range.end - usize::from(b.get(range.end.checked_sub(1)?) == Some(&b' '));
    let plain = |c: &u8| c.is_ascii() && !ascii_white(*c);
    if end <= start || !plain(b.get(start)?) || !plain(b.get(end - 1)?) {
        return None;
    }
    Some(start..end)
}

/// What the walk of [`look`] found.
#[derive(Debug, PartialEq, Eq)]
enum Look {
    /// the first item named as asked: its text, as [`GroupWalk`] gives it to [`item`]
    Item(std::ops::Range<usize>),
    /// no item is named so
    Absent,
    /// the walk cannot tell: read the line whole
    Unsure,
}

/// The walk of [`GroupWalk`] over a line without strings, up to the item named `name`.
fn look(b: &[u8], from: usize, name: &[u8]) -> Look {
    // (a byte loop: the names are short, and a block of a short slice is read from a copy)
    if name.is_empty() || !name.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'_') {
        return Look::Unsure;
    }
    let mut depth = 0usize;
    // where the item named `name` began, once one has
    let mut named: Option<usize> = None;
    let mut base = from;
    while base < b.len() {
        let mut marks = marks_at(b, base);
        while marks != 0 {
            let i = base + marks.trailing_zeros() as usize;
            marks &= marks - 1;
            let starts = match b[i] {
                b'"' | b'\\' => return Look::Unsure,
                b'{' | b'[' => {
                    depth += 1;
                    depth == 1
                }
                b'}' | b']' => {
                    if depth == 1
                        && let Some(start) = named
                    {
                        return Look::Item(start..i);
                    }
                    depth = depth.saturating_sub(1);
                    false
                }
                _ if depth == 1 => match named {
                    Some(start) => return Look::Item(start..i),
                    None => true,
                },
                _ => false,
            };
            if starts {
                match item_named(b, i + 1, name) {
                    Some(true) => named = Some(i + 1),
                    Some(false) => {}
                    None => return Look::Unsure,
                }
            }
        }
        base += WIDTH;
    }
    // an item that no comma or bracket closes is not one
    Look::Absent
}

/// Whether the item that begins at `b[start]` is named `name` (an identifier): `None` when its
/// first bytes do not tell (white space or a character that trimming could take away).
#[inline]
fn item_named(b: &[u8], start: usize, name: &[u8]) -> Option<bool> {
    let at = start + usize::from(b.get(start) == Some(&b' '));
    let first = *b.get(at)?;
    if first == name[0] {
        // the name, trimmed, begins at `at`: it is `name` only if the bytes there are
        let after = at + name.len();
        if !b.get(at..after).is_some_and(|there| equal(there, name)) {
            return Some(false);
        }
        if b.get(after..after + 3) == Some(b" = ") {
            return Some(true);
        }
        // `name` then white space (of any kind) could be trimmed to `name`; any other byte
        // continues the name
        return match b.get(after) {
            Some(&c) if c.is_ascii() && !ascii_white(c) => Some(false),
            _ => None,
        };
    }
    // another name, unless trimming could take this byte away
    (first.is_ascii() && !ascii_white(first)).then_some(false)
}

/// Every `name = value` at the top level of every `{ ... }` group after `from`.
///
/// Only quotes, escapes, brackets and commas act here. They are found sixteen bytes at a time
/// ([`Block`]), and the names, values and spaces between them are not visited (a table look-up
/// or a `match` of every byte was a large share of the reading time).
fn groups(line: &str, from: usize, ev: &mut Event) {
    let bytes = line.as_bytes();
    let mut walk = GroupWalk::default();
    let mut base = from;
    while base < bytes.len() {
        let mut marks = marks_at(bytes, base);
        while marks != 0 {
            walk.byte(line, base + marks.trailing_zeros() as usize, ev);
            marks &= marks - 1;
        }
        base += WIDTH;
    }
}

/// The bytes of `b[base..base + 16]` that the walk of the groups acts on: quotes, backslashes,
/// commas and brackets, a bit each.
#[inline]
fn marks_at(b: &[u8], base: usize) -> u32 {
    let block = Block::at(b, base);
    block.eq(b'"')
        | block.eq(b'\\')
        | block.eq(b',')
        | block.eq_or(0x20, b'{')
        | block.eq_or(0x20, b'}')
}

/// Where [`groups`] is in a line: what each byte it acts on does. Any other byte does nothing,
/// so a walk of every byte gives what the walk of those bytes gives.
#[derive(Debug)]
struct GroupWalk {
    depth: usize,
    in_string: bool,
    /// where the item being read began
    item_start: usize,
    /// the byte after a backslash in a string, which is not structural
    escaped: usize,
}

impl Default for GroupWalk {
    fn default() -> Self {
        GroupWalk {
            depth: 0,
            in_string: false,
            item_start: 0,
            escaped: usize::MAX,
        }
    }
}

impl GroupWalk {
    /// Byte `i` of `line`, whose items go to `ev`.
    #[inline]
    fn byte(&mut self, line: &str, i: usize, ev: &mut Event) {
        if i == self.escaped {
            return;
        }
        let c = line.as_bytes()[i];
        if self.in_string {
            match c {
                b'\\' => self.escaped = i + 1,
                b'"' => self.in_string = false,
                _ => {}
            }
            return;
        }
        match c {
            b'"' => self.in_string = true,
            b'{' | b'[' => {
                self.depth += 1;
                if self.depth == 1 {
                    self.item_start = i + 1;
                }
            }
            b'}' | b']' => {
                if self.depth == 1 {
                    item(line, self.item_start..i, ev);
                }
                self.depth = self.depth.saturating_sub(1);
            }
            b',' if self.depth == 1 => {
                item(line, self.item_start..i, ev);
                self.item_start = i + 1;
            }
            _ => {}
        }
    }
}

fn item(line: &str, range: std::ops::Range<usize>, ev: &mut Event) {
    let field = written_item(line.as_bytes(), range.clone()).or_else(|| searched_item(line, range));
    ev.fields.extend(field);
}

/// An item as babeltrace2 writes it, ` NAME = VALUE` with an identifier for a name and at
/// most one space after the value, whose first and last bytes are ASCII and not white space:
/// its `(name, value)` as [`searched_item`] gives it, read in place (the search for the `=`
/// and the trimming of both sides were a large part of reading a line). `None` for any
/// other item, which the search then reads. `range` ends before the `,`, `}` or `]` that
/// closed the item ([`GroupWalk`]): the name is read in the line, and does not run past it.
#[inline]
fn written_item(
    line: &[u8],
    range: std::ops::Range<usize>,
) -> Option<(std::ops::Range<usize>, std::ops::Range<usize>)> {
    let text = &line[range.clone()];
    if text.first() != Some(&b' ') {
        return None;
    }
    // An identifier holds no `=` and no white space: the first ` = ` follows it.
    // (read in the line: a slice of the item, shorter than a block, would be copied first)
    let n = identifier_len(&line[range.start + 1..]);
    if n == 0 || text.get(n + 1..n + 4) != Some(b" = ") {
        return None;
    }
    let value = written_value(line, range.clone(), n)?;
    let quoted = value.len() >= 2 && line[value.start] == b'"' && line[value.end - 1] == b'"';
    let q = usize::from(quoted);
    let at = range.start;
    Some((at + 1..at + 1 + n, value.start + q..value.end - q))
}

/// An item read by its first `=` with a space on each side, both sides trimmed as
/// `str::trim` would; `None` without such an `=` or with an empty name.
fn searched_item(
    line: &str,
    range: std::ops::Range<usize>,
) -> Option<(std::ops::Range<usize>, std::ops::Range<usize>)> {
    let text = &line[range.clone()];
    // `str::find` of a three-byte pattern sets up a two-way searcher per call (a sixth of
    // the reading time): look for the `=` and check the spaces around it.
    let b = text.as_bytes();
    let eq = memchr::memchr_iter(b'=', b)
        .find(|&q| q > 0 && b[q - 1] == b' ' && b.get(q + 1) == Some(&b' '))
        .map(|q| q - 1)?;
    let name = trim(line, range.start..range.start + eq);
    let mut value = trim(line, range.start + eq + 3..range.end);
    let v = &line[value.clone()];
    if v.len() >= 2 && v.starts_with('"') && v.ends_with('"') {
        value = value.start + 1..value.end - 1;
    }
    (!name.is_empty()).then_some((name, value))
}

fn trim(line: &str, r: std::ops::Range<usize>) -> std::ops::Range<usize> {
    // The usual ends are ASCII: white space trimmed as `str::trim` would, without its
    // decoding of characters, a measurable share of the reading time.
    let b = &line.as_bytes()[r.clone()];
    let start = b.iter().position(|&c| !ascii_white(c)).unwrap_or(b.len());
    let end = b
        .iter()
        .rposition(|&c| !ascii_white(c))
        .map_or(start, |e| e + 1);
    if b.get(start).is_none_or(u8::is_ascii) && (end == start || b[end - 1].is_ascii()) {
        return r.start + start..r.start + end.max(start);
    }
    let text = &line[r.clone()];
    let start = r.start + (text.len() - text.trim_start().len());
    let end = r.end - (text.len() - text.trim_end().len());
    start..end.max(start)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(b: &mut Babeltrace, line: &str) -> (u64, String, Vec<(String, String)>) {
        let mut ev = Event::default();
        assert_eq!(b.parse(line, &mut ev), Parsed::Event, "{line}");
        let f = ev
            .fields
            .iter()
            .map(|(k, v)| (line[k.clone()].to_string(), line[v.clone()].to_string()))
            .collect();
        (ev.ts_ns, ev.name(line).to_string(), f)
    }

    /// The walk of every byte, which the block walk must equal: every byte it acts on is
    /// found.
    fn groups_by_bytes(line: &str, from: usize, ev: &mut Event) {
        let mut walk = GroupWalk::default();
        for i in from..line.len() {
            walk.byte(line, i, ev);
        }
    }

    #[test]
    fn white_space_is_counted_as_trim_start_counts_it() {
        let white = [
            "",
            " ",
            "  ",
            "\t",
            "\x0b",
            "\x0c",
            "\r\n",
            "\u{85}",
            "\u{a0}",
            " \u{2003}",
        ];
        let after = ["", "x", "(+0.1)", "é", "\u{85}x", " "];
        for w in white {
            for a in after {
                let text = format!("{w}{a}");
                assert_eq!(
                    white_len(&text),
                    text.len() - text.trim_start().len(),
                    "{text:?}"
                );
            }
        }
    }

    #[test]
    fn an_item_read_in_place_is_the_item_the_search_reads() {
        let values = [
            "5",
            "0x55",
            "\"a b\"",
            "\"\"",
            "\"",
            "\"x",
            "x\"",
            "{ b = 1 }",
            "[1, 2]",
            "-3",
            "a = b",
            "é",
            "xé",
            "éx",
            "\t5",
            "5\t",
            "\x0b5",
            "5\x0b",
            "",
            " ",
            "5 ",
            " 5",
        ];
        let names = ["a", "vtid", "_x9", "9", "a.b", "a b", "é", "", "a=b", "a\t"];
        let mut seen = 0;
        for name in names {
            for value in values {
                for text in [
                    format!(" {name} = {value}"),
                    format!(" {name} = {value} "),
                    format!(" {name} = {value}  "),
                    format!("{name} = {value}"),
                    format!("  {name} = {value}"),
                    format!(" {name}  = {value}"),
                    format!(" {name} =  {value}"),
                    format!(" {name} ={value}"),
                ] {
                    let line = format!("{{{text}}}");
                    let range = 1..line.len() - 1;
                    let searched = searched_item(&line, range.clone());
                    if let Some(field) = written_item(line.as_bytes(), range) {
                        seen += 1;
                        assert_eq!(searched, Some(field), "{line:?}");
                    }
                }
            }
        }
        assert!(seen >= 90, "{seen}");
    }

    /// The lines of the committed LTTng sample (`liblttng-ust-cyg-profile` through babeltrace2).
    fn sample_lines() -> Vec<String> {
        let root = env!("CARGO_MANIFEST_DIR");
        let sample = format!("{root}/tests/data/traces/cyg-profile.babeltrace.txt");
        let text = std::fs::read_to_string(sample).unwrap();
        text.lines().map(str::to_string).collect()
    }

    #[test]
    fn groups_give_the_fields_the_byte_by_byte_walk_gives() {
        let mut lines = sample_lines();
        for pad in 0..34 {
            let p = "x".repeat(pad);
            lines.extend([
                format!(r#"{p} {{ a = 1 }}, {{ s = "{p}\"}}, x = 2", t = [1, {{ u = 2 }}, 3] }}"#),
                format!(r#"{{ s = "{p}\\", b = 2 }}, {{ c = "[{p}\{{", d = {{ e = 1, f = 2 }} }}"#),
                format!(r#"{{ a = {p}\, b = "\"}}, {{ q = ]] }}, {{ r = 1 }}"#),
                format!(r#"{p}}}], {{ a = 1, , b = 2,}} {{ unclosed = "{p}"#),
            ]);
        }
        for line in &lines {
            for from in [0, 1, line.len() / 2, line.len()] {
                let (mut blocks, mut bytes) = (Event::default(), Event::default());
                groups(line, from, &mut blocks);
                groups_by_bytes(line, from, &mut bytes);
                assert_eq!(blocks.fields, bytes.fields, "{line} from {from}");
            }
        }
    }

    /// Every name of every line, and names that are not there: a field found in the line when
    /// asked for is the field of the line read whole.
    #[test]
    fn a_field_found_when_asked_for_is_the_field_the_whole_line_gives() {
        let mut lines = sample_lines();
        let head = "[13:37:01.123456789] (+0.000001234) host p:e:";
        for body in [
            "{ cpu_id = 1 }, { vtid = 42 }, { addr = 0x5, call_site = 0x6 }",
            "{ a = 1, a = 2 }, { a = 3 }",
            r#"{ s = "x, a = 9 }", a = 1 }"#,
            "{ b = { a = 5 }, a = 6 }",
            "{ t = [ [0] = { a = 1 } ], a = 7 }",
            "{a = 1}, { a = 2 }",
            "{  a = 1 }, { a = 2 }",
            "{ a  = 1 }, { a = 2 }",
            "{ a\t= 1 }, { a = 2 }",
            "{ a\u{a0} = 1 }, { a = 2 }",
            "{\u{a0}a = 1 }, { a = 2 }",
            "{ ab = 1, a = 2 }",
            "{ a = }, { a = 2 }",
            "{ a =  1  }, { a = 2 }",
            r#"{ a = "q" }"#,
            "{ a = 1 ",
            "{ x = 1, a = 2",
            "} a = 1 }, { a = 2 }",
            r"{ x = \\, a = 3 }",
            "{ = 1, a = 2 }",
            "{ a, a = 2 }",
            "{ a = 1 = 2 }",
            "{ vtid = 42 }, { vtid = 43 }",
            "{ a = é }, { a = 2 }",
        ] {
            lines.push(format!("{head} {body}"));
            lines.push(format!(
                "timestamp = 04:45:11.006577220, delta = +0.000004236, trace:hostname = vm, name = p:e, stream.packet.context = {body}"
            ));
        }
        let names = [
            "a",
            "ab",
            "b",
            "s",
            "t",
            "x",
            "cpu_id",
            "vtid",
            "addr",
            "call_site",
            "",
            "a b",
            "é",
            "[0]",
            "=",
            "q",
        ];
        let mut found = 0;
        for line in &lines {
            let (mut whole, mut lazy) = (Event::default(), Event::default());
            let parsed = Babeltrace::default().parse(line, &mut whole);
            assert_eq!(
                Babeltrace::default().parse_lazy(line, &mut lazy),
                parsed,
                "{line}"
            );
            assert!(lazy.fields.is_empty());
            for name in names {
                let want = whole.field(line, name);
                assert_eq!(lazy.field(line, name), want, "{name:?} of {line}");
                found += usize::from(want.is_some());
            }
        }
        assert!(found > 200, "{found}");
    }

    /// `line` changed at one byte of its groups (from `from`) in every way: replaced by each
    /// byte that acts on the groups or could be a token's, removed, doubled, and a non-ASCII
    /// character put in.
    fn changed_at_every_byte(line: &str, from: usize) -> Vec<String> {
        let mut out = Vec::new();
        for at in from..line.len() {
            let (head, tail) = line.split_at(at);
            let rest = &tail[1..];
            for c in [
                " ", ",", "{", "}", "[", "]", "\"", "\\", "=", "0", "a", ".", "-", "+", "\t", "é",
                "",
            ] {
                out.push(format!("{head}{c}{rest}"));
            }
            out.push(format!("{head}{}{tail}", &tail[..1]));
        }
        out
    }

    #[test]
    fn a_line_read_by_a_learnt_shape_has_the_fields_the_whole_reading_gives() {
        let head = "[13:37:01.123456789] (+0.000001234) host p:e: ";
        let mut lines: Vec<String> = sample_lines().into_iter().take(4).collect();
        for body in [
            "{ cpu_id = 1 }, { vtid = 42 }, { addr = 0x5, call_site = 0x6 }",
            r#"{ s = "x", a = -1.5e+3 }"#,
            "{ b = { a = 5 }, a = 6 }",
            "{ t = [ [0] = 1 ], a = 7 }",
            "{ a = 1 }, { a = 2 }",
        ] {
            lines.push(format!("{head}{body}"));
        }
        let names = [
            "a",
            "b",
            "s",
            "t",
            "cpu_id",
            "vtid",
            "addr",
            "call_site",
            "",
        ];
        let wanted: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let (mut compared, mut by_shape) = (0, 0);
        for line in &lines {
            let from = line.find('{').unwrap();
            for changed in changed_at_every_byte(line, from) {
                // a reader that learnt the line's shape from the line itself
                let mut reader = Babeltrace::default();
                reader.parse_shaped(line, &mut Event::default(), &wanted);
                let (mut whole, mut shaped) = (Event::default(), Event::default());
                let parsed = Babeltrace::default().parse(&changed, &mut whole);
                let hits = reader.shapes.hits();
                assert_eq!(
                    reader.parse_shaped(&changed, &mut shaped, &wanted),
                    parsed,
                    "{changed}"
                );
                if reader.shapes.hits() > hits {
                    by_shape += 1;
                    assert_eq!(shaped.fields, whole.fields, "{changed}");
                }
                for (j, name) in names.iter().enumerate() {
                    let want = whole.field(&changed, name);
                    assert_eq!(shaped.field(&changed, name), want, "{name:?} of {changed}");
                    // by the place noted for the rules' field j, where a shape read the line
                    let placed = shaped.field_at(&changed, j, name);
                    assert_eq!(placed, want, "{name:?} at {j} of {changed}");
                }
                compared += 1;
            }
        }
        assert!(
            compared > 8_000 && by_shape > 1_000,
            "{compared} {by_shape}"
        );
    }

    #[test]
    fn lines_whose_values_are_strings_stop_being_read_whole_to_learn_a_shape() {
        let mut reader = Babeltrace::default();
        let mut whole_reads = 0;
        for i in 0..1000 {
            let line = format!("[13:37:01.{i:09}] host p:e: {{ s = \"a b\", n = {i} }}");
            let mut ev = Event::default();
            reader.parse_shaped(&line, &mut ev, &[]);
            whole_reads += usize::from(ev.lazy_groups.is_none());
            assert_eq!(ev.field(&line, "n"), Some(i.to_string().as_str()));
        }
        assert_eq!(whole_reads, 64);
    }

    #[test]
    fn the_lines_of_the_committed_sample_after_the_first_of_each_event_are_read_by_shape() {
        let mut reader = Babeltrace::default();
        let lines = sample_lines();
        for line in &lines {
            let (mut whole, mut shaped) = (Event::default(), Event::default());
            let parsed = Babeltrace::default().parse(line, &mut whole);
            assert_eq!(
                reader.parse_shaped(line, &mut shaped, &[]),
                parsed,
                "{line}"
            );
            assert_eq!(shaped.fields, whole.fields, "{line}");
        }
        // the entries' and the exits' groups are alike: one shape learnt, every other line
        // read by it
        assert_eq!(reader.shapes.hits(), lines.len() as u64 - 1);
    }

    /// The walk up to an item decides the usual line, and leaves to the whole reading what a
    /// string or an item written otherwise could change.
    #[test]
    fn the_walk_to_an_item_is_unsure_only_where_a_string_or_white_space_could_matter() {
        let line = r#"{ cpu_id = 1 }, { vtid = 42 }, { addr = 0x5, s = "}", call_site = 0x6 }"#;
        let b = line.as_bytes();
        let at = |text: &str| line.find(text).unwrap();
        assert_eq!(
            look(b, 0, b"vtid"),
            Look::Item(at(" vtid")..at("}, { addr"))
        );
        assert_eq!(look(b, 0, b"addr"), Look::Item(at(" addr")..at(", s =")));
        assert_eq!(look(b, 0, b"call_site"), Look::Unsure);
        assert_eq!(look(b, 0, b"a.b"), Look::Unsure);
        assert_eq!(look(b"{ a = 1 }", 0, b"b"), Look::Absent);
        assert_eq!(look(b"{  a = 1 }", 0, b"b"), Look::Unsure);
        assert_eq!(look(b"{ a = 1, b = 2", 0, b"b"), Look::Absent);
    }

    /// A stamp read in place is the time of day the general reading gives, and is never one it
    /// reads as a date; any other stamp is left to the general reading.
    #[test]
    fn a_stamp_read_in_place_is_the_time_of_day_the_general_reading_gives() {
        let usual = [
            "13:37:01.123456789",
            "00:00:00.0",
            "23:59:60.999999999",
            "12:34:56",
        ];
        let others = [
            "23:59:61.0",
            "24:00:00.0",
            "12:60:00.0",
            "1:02:03.5",
            "+1:23:45.6",
            "12:34:5x.0",
            "12::4:56.0",
            "12:34:56.1.2",
            "12:34:56.5 x",
            "2024-01-02 03:04:05.6",
            "ab:cd:ef.0",
            "1005.416091267",
            "12:34",
            "",
        ];
        for stamp in usual {
            let ns = written_time_of_day(stamp);
            assert!(ns.is_some(), "{stamp} is read in place");
            assert_eq!(ns, time_of_day(stamp), "{stamp}");
        }
        for stamp in others {
            assert_eq!(written_time_of_day(stamp), None, "{stamp}");
        }
    }

    #[test]
    fn trim_gives_the_range_str_trim_gives() {
        let texts = [
            "",
            " ",
            "   ",
            "a",
            " a ",
            "  ab  c  ",
            "\ta\t",
            " \ta b\r ",
            "\u{a0}a\u{a0}",
            " \u{2003}x ",
            " é ",
            "é",
            " x\u{85}",
            "\x0b\x0cq\x0c",
            " \" s \" ",
            "\u{3000} ",
        ];
        for text in texts {
            let line = format!("[{text}]");
            let r = trim(&line, 1..line.len() - 1);
            let trimmed = text.trim();
            let start = 1 + (text.len() - text.trim_start().len());
            let expected = start..start + trimmed.len();
            assert_eq!(r, expected, "{text:?}");
        }
    }

    #[test]
    fn a_time_of_day_with_too_many_seconds_is_malformed_not_an_overflow() {
        let mut b = Babeltrace::default();
        let mut ev = Event::default();
        for stamp in ["23:59:18446744073.0", "00:00:61.0", "12:00:99999999999"] {
            let line = format!("[{stamp}] (+0.000000001) vm a:b: {{ cpu_id = 0 }}");
            assert!(
                matches!(b.parse(&line, &mut ev), Parsed::Malformed(_)),
                "{line}"
            );
        }
        let (ts, _, _) = parse(&mut b, "[23:59:60.5] (+0.000000001) vm a:b: { cpu_id = 0 }");
        assert_eq!(ts, (23 * 3600 + 59 * 60 + 60) * 1_000_000_000 + 500_000_000);
    }

    #[test]
    fn names_and_values_are_trimmed_of_white_space_as_str_trim_does() {
        let mut b = Babeltrace::default();
        // ASCII white space (a vertical tab and a form feed among it), and Unicode's: a
        // no-break space and an ideographic space, which the ASCII trim leaves to `str::trim`.
        let line = "[1.5] (+0.1) vm a:b: { \x0b id = \t7\x0c , \u{a0}who\u{3000} = \u{a0}x y\u{3000}, é = ü }";
        let (_, _, f) = parse(&mut b, line);
        let want = [("id", "7"), ("who", "x y"), ("é", "ü")];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(f, want);
    }

    #[test]
    fn a_pretty_line_has_its_stamp_name_and_every_field() {
        let mut b = Babeltrace::default();
        let line = r#"[13:37:01.123456789] (+0.000001234) host mir_server_compositor:frame_start: { cpu_id = 1 }, { vpid = 42, procname = "mir server" }, { id = 7, arr = [ [0] = 1, [1] = 2 ] }"#;
        let (ts, name, f) = parse(&mut b, line);
        assert_eq!(ts, (13 * 3600 + 37 * 60 + 1) * 1_000_000_000 + 123_456_789);
        assert_eq!(name, "mir_server_compositor:frame_start");
        assert_eq!(f[0], ("cpu_id".into(), "1".into()));
        assert_eq!(f[1], ("vpid".into(), "42".into()));
        assert_eq!(f[2], ("procname".into(), "mir server".into()));
        assert_eq!(f[3], ("id".into(), "7".into()));
        assert_eq!(f[4], ("arr".into(), "[ [0] = 1, [1] = 2 ]".into()));
    }

    #[test]
    fn seconds_and_dates_are_read_and_midnight_is_unwrapped() {
        let mut b = Babeltrace::default();
        let (ts, ..) = parse(&mut b, "[1700000000.000000001] p:e: { a = 1 }");
        assert_eq!(ts, 1_700_000_000_000_000_001);
        let (ts, ..) = parse(&mut b, "[1970-01-02 00:00:01.5] p:e:");
        assert_eq!(ts, DAY_NS + 1_500_000_000);
        let mut b = Babeltrace::default();
        let (before, ..) = parse(&mut b, "[23:59:59.999999999] p:e:");
        let (after, ..) = parse(&mut b, "[00:00:00.000000001] p:e:");
        assert_eq!(after - before, 2);
    }

    #[test]
    fn a_time_of_day_past_the_most_midnights_is_malformed_not_wrapped() {
        let mut b = Babeltrace::default();
        let at = |hours: u64| hours * 3_600_000_000_000;
        // one midnight short of the most: the next one is passed
        b.set_clock(Clock {
            last_ns: Some(MOST_DAY_OFFSET - DAY_NS + at(23)),
            day_offset: MOST_DAY_OFFSET - DAY_NS,
        });
        let (ts, ..) = parse(&mut b, "[01:00:00.000000000] p:e:");
        assert_eq!(ts, MOST_DAY_OFFSET + at(1));
        let (ts, ..) = parse(&mut b, "[23:00:00.000000000] p:e:");
        assert_eq!(ts, MOST_DAY_OFFSET + at(23));
        // one more is refused, and leaves the clock as it was
        let mut ev = Event::default();
        let refused = b.parse("[01:00:00.000000000] p:e:", &mut ev);
        assert_eq!(refused, Parsed::Malformed(TOO_MANY_DAYS));
        assert_eq!(b.clock().day_offset, MOST_DAY_OFFSET);
        let (ts, ..) = parse(&mut b, "[23:30:00.000000000] p:e:");
        assert_eq!(ts, MOST_DAY_OFFSET + at(23) + at(1) / 2);
    }

    #[test]
    fn names_all_lines_are_read_and_clock_cycles_are_refused() {
        let mut b = Babeltrace::default();
        let line = "timestamp = 04:45:11.006577220, delta = +?.?????????, trace:hostname = vm, name = lttng_ust_cyg_profile:func_entry, stream.packet.context = { cpu_id = 0 }, stream.event.context = { vtid = 9139 }, event.fields = { addr = 0x563482F4B1B1, call_site = 0x7F5DE6DDA24A }";
        let (ts, name, f) = parse(&mut b, line);
        assert_eq!(ts, (4 * 3600 + 45 * 60 + 11) * 1_000_000_000 + 6_577_220);
        assert_eq!(name, "lttng_ust_cyg_profile:func_entry");
        assert_eq!(f[1], ("vtid".into(), "9139".into()));
        assert_eq!(f[2], ("addr".into(), "0x563482F4B1B1".into()));
        let mut ev = Event::default();
        let cycles = "[00000001602214752762] (+????????????) vm p:e: { a = 1 }";
        assert!(
            matches!(b.parse(cycles, &mut ev), Parsed::Malformed(why) if why.contains("--clock-cycles"))
        );
    }

    #[test]
    fn lines_that_are_not_events_are_malformed() {
        let mut b = Babeltrace::default();
        let mut ev = Event::default();
        for bad in ["hello", "[nope] p:e:", "[1.5] {", "[25:00:00.0] p:e:"] {
            assert!(
                matches!(b.parse(bad, &mut ev), Parsed::Malformed(_)),
                "{bad}"
            );
        }
    }
}
