//! Parsing one WAYLAND_DEBUG line, in every dialect libwayland has printed.
//!
//! The grammar (libwayland `wl_closure_print`, see `shared/research/wayland-debug-format.md`):
//!
//! ```text
//! [1234567.890] {Default Queue}  -> wl_surface@12.commit()            ≤1.25 (`#` ids from 1.23)
//! [2693804,180] wl_pointer@19.enter(12885, wl_surface@16, 499,597656)  ≤1.19 in a comma locale
//! [14:03:27.512345] TID#4711 {Default Queue}  -> wl_surface#12.commit() 1.26+
//! [1234567.890] discarded [zombie]@61.[event 0](0 fd, 4 byte)          event for a dead object
//! [1234567.890] {Default Queue} <256>  -> wl_surface#3.commit()        wayland-debug's patch
//! ```
//!
//! plus ANSI colour (1.25+ on a terminal or with FORCE_COLOR). The parser borrows from the line
//! and allocates nothing, except a scratch copy for coloured lines. It never panics on any
//! input (there is a fuzz target for that).

use std::fmt;

use crate::ingest::words::{
    Block, WIDTH, find_near, identifier_len, leading_digits, not_digits, value_of_eight,
};

/// A raw timestamp, before unwrapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stamp {
    /// `[ms.µs]`: realtime microseconds modulo 2^32 (libwayland ≤ 1.25), wraps every 71.6 min.
    Micros32(u32),
    /// `[HH:MM:SS.µµµµµµ]`: microseconds since UTC midnight (libwayland ≥ 1.26).
    TimeOfDay(u64),
}

/// One protocol message line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message<'a> {
    /// when it was printed
    pub stamp: Stamp,
    /// `TID#n`, when printed
    pub tid: Option<u32>,
    /// `{Queue Name}`, when printed
    pub queue: Option<&'a [u8]>,
    /// `<n>` connection id of wayland-debug's patched libwayland
    pub conn: Option<u32>,
    /// printed with `discarded ` (no listener / destroyed proxy): still a real event
    pub discarded: bool,
    /// printed with ` -> `: sent by the process that printed it
    pub sent: bool,
    /// interface name, e.g. `wl_surface`
    pub interface: &'a [u8],
    /// object id
    pub id: u32,
    /// message name, e.g. `commit`
    pub name: &'a [u8],
    /// the argument text between the parentheses
    pub args: &'a [u8],
}

/// What a line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed<'a> {
    /// a protocol message
    Message(Message<'a>),
    /// `discarded [zombie]@N.[event E](...)`: an event for an object that no longer exists
    Zombie(Stamp),
    /// not a WAYLAND_DEBUG line at all (toolkit warnings, compositor logging)
    Other,
    /// starts like a WAYLAND_DEBUG line but breaks the grammar
    Malformed(Malformed),
}

/// How a WAYLAND_DEBUG-looking line breaks the grammar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Malformed {
    /// timestamp beyond the 32-bit microsecond counter or the day
    TimestampRange,
    /// no `iface@id` / `iface#id` after the prefix
    ObjectRef,
    /// object id not a 32-bit number
    ObjectId,
    /// no `.name(` after the object
    MessageName,
    /// the line does not end with `)`: truncated, or torn by another thread's output
    Unterminated,
    /// the stamp would take the unwrapped clock further than
    /// [`MOST_MICROS`](super::clock::MOST_MICROS) from the first stamp
    ClockTooFar,
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Malformed::TimestampRange => "timestamp out of range",
            Malformed::ObjectRef => "expected 'interface@id' or 'interface#id' after the prefix",
            Malformed::ObjectId => "object id is not a 32-bit number",
            Malformed::MessageName => "expected '.message(' after the object",
            Malformed::Unterminated => {
                "line does not end with ')' (truncated, or torn by concurrent output)"
            }
            Malformed::ClockTooFar => {
                "the stamp would put the unwrapped clock more than 2^62 ns (146 years) from the log's first stamp: it is not placed"
            }
        })
    }
}

/// Parses one line (without its newline). `scratch` is used only for lines with ANSI colour.
pub fn parse_line<'a>(line: &'a [u8], scratch: &'a mut Vec<u8>) -> Parsed<'a> {
    // A line as a terminal shows it: a program's status line written over with a carriage
    // return (mpv's `\r\e[K AV: ...\r` before a protocol line) leaves the text after the last
    // `\r` on the screen. That text is the line where it is a message; the whole line is read
    // otherwise (a `\r` inside a string argument).
    if let Some(at) = memchr::memrchr(b'\r', line) {
        let shown = &line[at + 1..];
        if matches!(
            parse_unescaped(shown, scratch),
            Parsed::Message(_) | Parsed::Zombie(_)
        ) {
            return parse_unescaped(shown, scratch);
        }
    }
    parse_unescaped(line, scratch)
}

/// [`parse_plain`] of `line` without its escape sequences when it begins with one.
fn parse_unescaped<'a>(line: &'a [u8], scratch: &'a mut Vec<u8>) -> Parsed<'a> {
    if line.first() == Some(&0x1b) {
        strip_ansi(line, scratch);
        return parse_plain(scratch);
    }
    parse_plain(line)
}

/// Copies `line` into `out` without its `ESC [ ... <letter>` escape sequences.
pub fn strip_ansi(line: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let mut i = 0;
    while i < line.len() {
        if line[i] == 0x1b && line.get(i + 1) == Some(&b'[') {
            i += 2;
            while i < line.len() && !line[i].is_ascii_alphabetic() {
                i += 1;
            }
            i += 1;
        } else {
            out.push(line[i]);
            i += 1;
        }
    }
}

/// The message of a line in the layouts libwayland prints almost every line in: a stamp of at
/// most seven digits before the point (`[1234567.890] `, 1.25 and before) or the time of day
/// (`[14:03:27.512345] `, 1.26), a thread id (`TID#4711 `) or not, a queue (`{Default
/// Queue} `, 1.23 and after) or not, ` -> ` or not, then `wl_surface@12.attach(...)` (or
/// `#12`, 1.23 and after) with ids of at most seven digits; read in one pass with no step that
/// could fail later. `None` for any other line (no padding in the stamp, no connection id,
/// no `discarded `, no colour), which [`parse_line`] reads. When it gives a message, it is
/// the one [`parse_plain`] gives (a test compares them on lines of every dialect that differ
/// from these layouts at every byte, and the fuzz target `wayland_line` on every input).
/// [`parse_plain`] tries each dialect's prefix in turn and builds its answer through a chain
/// of `Option`s, a large part of reading a line when every line went through it.
#[inline(always)]
pub fn usual(line: &[u8]) -> Option<Message<'_>> {
    usual_body(line, usual_head(line)?)
}

/// The prefix of a line in the usual layouts, read by [`usual_head`]: everything before the
/// message's body (`wl_surface@12.attach(...)`) and where the body begins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    /// when it was printed
    pub stamp: Stamp,
    /// `TID#n`, when printed
    pub tid: Option<u32>,
    /// where the queue's name (between `{` and `}`) begins and ends, when printed
    pub queue: Option<(usize, usize)>,
    /// printed with ` -> `
    pub sent: bool,
    /// where the interface begins
    pub body: usize,
}

/// The prefix of [`usual`]: the stamp, then a thread id, a queue and ` -> `, each printed or
/// not; `None` for a line in any other layout. The body may still break the layout
/// ([`usual_body`]), and a line whose body one of the span rules knows is read from here on
/// without the message ([`super::spans::Meaning::of_usual`]).
#[inline(always)]
pub fn usual_head(line: &[u8]) -> Option<Head> {
    // (the time of day only when the other fails: a `[ms.µs]` line is not looked at twice)
    let (stamp, mut p) = match micros_stamp(line) {
        Some(stamp) => stamp,
        None => time_of_day_stamp(line)?,
    };
    // What follows the stamp is told by its first four bytes, read once (and again only after
    // a thread id or a queue); a message has more than four bytes after it.
    let four = |at: usize| Some(u32::from_le_bytes(line.get(at..at + 4)?.try_into().ok()?));
    let mut next = four(p)?;
    // `TID#4711 `: seven digits at most (a full word of digits goes to the general reader)
    let mut tid = None;
    if next == u32::from_le_bytes(*b"TID#") {
        let (value, len) = leading_digits(&line[p + 4..])?;
        if len == 0 || len == 8 || line[p + 4 + len] != b' ' {
            return None;
        }
        tid = Some(value as u32);
        p += 4 + len + 1;
        next = four(p)?;
    }
    // `{Default Queue} `: the first `}`, then a space
    let mut queue = None;
    if next as u8 == b'{' {
        let close = find_near(line, p + 1, b'}')?;
        if line.get(close + 1) != Some(&b' ') {
            return None;
        }
        queue = Some((p + 1, close));
        p = close + 2;
        next = four(p)?;
    }
    // (A connection id, `<3> `, or `discarded ` is no interface followed by `@` or `#` and
    // an id then `.`: such a line goes to the general reader.)
    let sent = next == u32::from_le_bytes(*b" -> ");
    if sent {
        p += 4;
    }
    Some(Head {
        stamp,
        tid,
        queue,
        sent,
        body: p,
    })
}

/// `[1234567.890] ` (or `,890`), or `[ 850918.020] `: the stamp, and where the line goes on
/// after it.
#[inline(always)]
fn micros_stamp(line: &[u8]) -> Option<(Stamp, usize)> {
    let rest = line.strip_prefix(b"[")?;
    // libwayland pads the milliseconds to seven places (`[%7u.%03u]`): under a million ms of
    // its 32-bit microsecond clock, a quarter of the clock's range, every line's stamp begins
    // with spaces (`[ 850918.020]`, `[     10.816]`). Sent to the general reader, which skips
    // them, such lines read far more slowly than the others: they are taken here.
    let pad = match rest.first() {
        Some(b' ') => rest.iter().position(|&b| b != b' ')?,
        _ => 0,
    };
    let rest = &rest[pad..];
    // at most seven digits (a full word of digits goes to the general reader)
    let (whole, digits) = leading_digits(rest)?;
    if digits == 0 || digits == 8 {
        return None;
    }
    // `.123] ` (or `,123] `) in one word: the point, three digits, `]` and a space, checked
    // and read at once (byte by byte was more work on every line)
    let word = u64::from_le_bytes(rest.get(digits..digits + 8)?.try_into().ok()?);
    // `,` is `.` with bit 1 clear: no other byte is either with it set
    if (word | 2) & 0x0000_ffff_0000_00ff != u64::from_le_bytes(*b".\0\0\0] \0\0") {
        return None;
    }
    // (a borrow or a carry only leaves a byte that is no digit, which fails here)
    let less = word.wrapping_sub(0x3030_3000);
    if not_digits(less) & 0x8080_8000 != 0 {
        return None;
    }
    let frac = ((less >> 8) & 0xff) * 100 + ((less >> 16) & 0xff) * 10 + ((less >> 24) & 0xff);
    let stamp = Stamp::Micros32(u32::try_from(whole * 1000 + frac).ok()?);
    Some((stamp, pad + digits + 7))
}

/// `[14:03:27.512345] `: the stamp, and where the line goes on after it; `None` for a time
/// past the day, which the general reader finds malformed.
#[inline(always)]
fn time_of_day_stamp(line: &[u8]) -> Option<(Stamp, usize)> {
    let head: &[u8; 18] = line.get(..18)?.try_into().ok()?;
    let word = |at: usize| u64::from_le_bytes(head[at..at + 8].try_into().unwrap_or([0; 8]));
    // `HH:MM:SS` and `.uuuuuu]`, each a word: the punctuation compared, the digits less `0`
    // (a borrow or a carry only leaves a byte that is no digit, which fails here)
    let (clock, micros) = (word(1), word(9));
    let clock_less = clock.wrapping_sub(0x3030_0030_3000_3030);
    let micros_less = micros.wrapping_sub(0x0030_3030_3030_3000);
    if head[0] != b'['
        || head[17] != b' '
        || clock & 0x0000_ff00_00ff_0000 != u64::from_le_bytes(*b"\0\0:\0\0:\0\0")
        || micros & 0xff00_0000_0000_00ff != u64::from_le_bytes(*b".\0\0\0\0\0\0]")
        || not_digits(clock_less) & 0x8080_0080_8000_8080 != 0
        || not_digits(micros_less) & 0x0080_8080_8080_8000 != 0
    {
        return None;
    }
    let pair = |at: u32| (clock_less >> at & 0xff) * 10 + (clock_less >> (at + 8) & 0xff);
    let (hours, minutes, seconds) = (pair(0), pair(24), pair(48));
    if hours >= 24 || minutes >= 60 || seconds >= 60 {
        return None;
    }
    // the six digits to the top of a word, two zeros (leading zeros) below them
    let micros = value_of_eight((micros_less << 8) & !0xffff);
    let day = ((hours * 60 + minutes) * 60 + seconds) * 1_000_000 + micros;
    Some((Stamp::TimeOfDay(day), 18))
}

/// The message of a line whose prefix is `head` ([`usual_head`] of the same line), when its
/// body is in the usual layout too.
#[inline(always)]
pub fn usual_body(line: &[u8], head: Head) -> Option<Message<'_>> {
    let p = head.body;
    // The interface and the message name are runs of identifier bytes, found in one mask of
    // up to 48 bytes from the interface on (two calls of `identifier_len` per line read a
    // block each, and a short line's last block from a copy).
    let (ident, valid) = identifier_mask(line, p)?;
    let iface_end = p + run_end(ident, 0, valid)?;
    if iface_end == p || !matches!(line.get(iface_end), Some(b'@' | b'#')) {
        return None;
    }
    let (id, id_len) = leading_digits(&line[iface_end + 1..])?;
    let dot = iface_end + 1 + id_len;
    if id_len == 0 || id_len == 8 || line[dot] != b'.' {
        return None;
    }
    let name_end = p + run_end(ident, dot + 1 - p, valid)?;
    if name_end == dot + 1 || line.get(name_end) != Some(&b'(') {
        return None;
    }
    Some(Message {
        stamp: head.stamp,
        tid: head.tid,
        queue: head.queue.map(|(open, close)| &line[open..close]),
        conn: None,
        discarded: false,
        sent: head.sent,
        interface: &line[p..iface_end],
        // seven digits at most
        id: id as u32,
        name: &line[dot + 1..name_end],
        args: line[name_end + 1..].strip_suffix(b")")?,
    })
}

/// Bit k set where `line[from + k]` is an identifier's byte ([`Block::identifier`]), for the
/// 48 bytes from `from` or up to the end of the line, and how many bits that is; `None` when
/// fewer than sixteen bytes are left. Every block is read from the line itself: the last one
/// is the line's last sixteen bytes, whatever they overlap (a block past the end was read from
/// a copy).
#[inline(always)]
fn identifier_mask(line: &[u8], from: usize) -> Option<(u64, usize)> {
    let last = line.len().checked_sub(WIDTH).filter(|&last| last >= from)?;
    let block = |at: usize| u64::from(Block::at(line, at).identifier()) << (at - from);
    let mut mask = block(from) | block(last.min(from + WIDTH));
    if last > from + WIDTH {
        mask |= block(last.min(from + 2 * WIDTH));
    }
    Some((mask, (line.len() - from).min(3 * WIDTH)))
}

/// Where the run of set bits of `mask` from bit `from` ends: the first clear bit at or after
/// it, when it is one of the `valid` bits; `None` when the run may go on past them.
#[inline(always)]
fn run_end(mask: u64, from: usize, valid: usize) -> Option<usize> {
    let clear = !mask & u64::MAX.checked_shl(u32::try_from(from).ok()?)?;
    let end = clear.trailing_zeros() as usize;
    (end < valid).then_some(end)
}

/// Parses a line with no colour codes.
pub fn parse_plain(line: &[u8]) -> Parsed<'_> {
    let Some((stamp, rest)) = parse_stamp(line) else {
        return Parsed::Other;
    };
    let stamp = match stamp {
        Ok(stamp) => stamp,
        Err(m) => return Parsed::Malformed(m),
    };
    let mut cur = Cursor(rest);
    let tid = cur.tagged_number(b"TID#", b' ');
    let queue = cur.delimited(b'{', b'}');
    let conn = cur.conn_id();
    let discarded = cur.eat(b"discarded ");
    if discarded && cur.0.first() == Some(&b'[') {
        return Parsed::Zombie(stamp);
    }
    let sent = cur.eat(b" -> ");
    match parse_body(cur.0) {
        Ok((interface, id, name, args)) => Parsed::Message(Message {
            stamp,
            tid,
            queue,
            conn,
            discarded,
            sent,
            interface,
            id,
            name,
            args,
        }),
        Err(m) => Parsed::Malformed(m),
    }
}

/// `[` spaces* (`D+[.,]DDD` | `HH:MM:SS.DDDDDD`) `] `. Returns `None` when the line does not
/// start with a WAYLAND_DEBUG timestamp (so it is some other kind of line), and the stamp and
/// the rest of the line otherwise.
fn parse_stamp(line: &[u8]) -> Option<(Result<Stamp, Malformed>, &[u8])> {
    let rest = line.strip_prefix(b"[")?;
    let start = rest.iter().position(|&b| b != b' ')?;
    let rest = &rest[start..];
    let (whole, digits) = leading_number(rest)?;
    let rest = &rest[digits..];
    let (stamp, rest) = match rest.first()? {
        b'.' | b',' if digits <= 10 => {
            let frac = fixed_digits(&rest[1..], 3)?;
            let micros = whole.checked_mul(1000).and_then(|w| w.checked_add(frac));
            let stamp = micros
                .and_then(|m| u32::try_from(m).ok())
                .map(Stamp::Micros32);
            (stamp.ok_or(Malformed::TimestampRange), &rest[4..])
        }
        b':' if digits == 2 => {
            let minutes = fixed_digits(&rest[1..], 2)?;
            let rest = rest[3..].strip_prefix(b":")?;
            let seconds = fixed_digits(rest, 2)?;
            let rest = rest[2..].strip_prefix(b".")?;
            let micros = fixed_digits(rest, 6)?;
            let stamp = if whole < 24 && minutes < 60 && seconds < 60 {
                Ok(Stamp::TimeOfDay(
                    ((whole * 60 + minutes) * 60 + seconds) * 1_000_000 + micros,
                ))
            } else {
                Err(Malformed::TimestampRange)
            };
            (stamp, &rest[6..])
        }
        _ => return None,
    };
    Some((stamp, rest.strip_prefix(b"] ")?))
}

/// The value and length of the run of ASCII digits at the start (at most 19 digits).
#[inline]
fn leading_number(s: &[u8]) -> Option<(u64, usize)> {
    let (mut value, mut len) = match leading_digits(s) {
        Some((value, 8)) => (value, 8),
        Some((value, len)) => return (len > 0).then_some((value, len)),
        None => (0, 0),
    };
    while let Some(&b) = s.get(len) {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            break;
        }
        if len == 19 {
            return None;
        }
        value = value * 10 + u64::from(digit);
        len += 1;
    }
    (len > 0).then_some((value, len))
}

/// Exactly `n` digits at the start of `s`.
fn fixed_digits(s: &[u8], n: usize) -> Option<u64> {
    let digits = s.get(..n)?;
    digits.iter().try_fold(0u64, |acc, &b| {
        b.is_ascii_digit().then(|| acc * 10 + u64::from(b - b'0'))
    })
}

struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn eat(&mut self, prefix: &[u8]) -> bool {
        match self.0.strip_prefix(prefix) {
            Some(rest) => {
                self.0 = rest;
                true
            }
            None => false,
        }
    }

    /// `TAG` digits `end`, e.g. `TID#4711 `.
    fn tagged_number(&mut self, tag: &[u8], end: u8) -> Option<u32> {
        let rest = self.0.strip_prefix(tag)?;
        let (value, len) = leading_number(rest)?;
        if rest.get(len) != Some(&end) {
            return None;
        }
        self.0 = &rest[len + 1..];
        u32::try_from(value).ok()
    }

    /// `{...} ` → the text between the delimiters.
    fn delimited(&mut self, open: u8, close: u8) -> Option<&'a [u8]> {
        let rest = self.0.strip_prefix(&[open])?;
        let end = memchr::memchr(close, rest)?;
        if rest.get(end + 1) != Some(&b' ') {
            return None;
        }
        self.0 = &rest[end + 2..];
        Some(&rest[..end])
    }

    /// `<256> `
    fn conn_id(&mut self) -> Option<u32> {
        if self.0.first() != Some(&b'<') {
            return None;
        }
        let mut probe = Cursor(&self.0[1..]);
        let (value, len) = leading_number(probe.0)?;
        probe.0 = &probe.0[len..];
        if !probe.eat(b"> ") {
            return None;
        }
        self.0 = probe.0;
        u32::try_from(value).ok()
    }
}

type Body<'a> = (&'a [u8], u32, &'a [u8], &'a [u8]);

/// `iface[@#]id.name(args)`
fn parse_body(s: &[u8]) -> Result<Body<'_>, Malformed> {
    let iface_len = identifier_len(s);
    if iface_len == 0 || !matches!(s.get(iface_len), Some(b'@' | b'#')) {
        return Err(Malformed::ObjectRef);
    }
    let interface = &s[..iface_len];
    let rest = &s[iface_len + 1..];
    let (id, id_len) = leading_number(rest).ok_or(Malformed::ObjectId)?;
    let id = u32::try_from(id).map_err(|_| Malformed::ObjectId)?;
    let rest = rest[id_len..]
        .strip_prefix(b".")
        .ok_or(Malformed::MessageName)?;
    let name_len = identifier_len(rest);
    if name_len == 0 || rest.get(name_len) != Some(&b'(') {
        return Err(Malformed::MessageName);
    }
    let name = &rest[..name_len];
    let args = rest[name_len + 1..]
        .strip_suffix(b")")
        .ok_or(Malformed::Unterminated)?;
    Ok((interface, id, name, args))
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    #[test]
    fn a_status_line_written_over_with_a_carriage_return_leaves_the_message_a_terminal_shows() {
        let mut scratch = Vec::new();
        let torn = b"\x1b[K AV: 00:00:01 / 00:00:10 (10%) A-V:  0.000\r[1234567.890]  -> wl_surface@3.commit()";
        let Parsed::Message(m) = parse_line(torn, &mut scratch) else {
            panic!("the message after the status line")
        };
        assert_eq!(
            (m.interface, m.id, m.name, m.sent),
            (&b"wl_surface"[..], 3, &b"commit"[..], true)
        );
        // a carriage return inside a string argument: the whole line
        let mut scratch = Vec::new();
        let quoted = b"[1234567.890]  -> xdg_toplevel@9.set_title(\"a\rb\")";
        let Parsed::Message(m) = parse_line(quoted, &mut scratch) else {
            panic!("the whole line")
        };
        assert_eq!(m.args, &b"\"a\rb\""[..]);
    }

    #[test]
    fn a_leading_number_is_read_as_digit_by_digit_up_to_nineteen_digits() {
        let by_digits = |s: &[u8]| {
            let n = s.iter().take_while(|c| c.is_ascii_digit()).count();
            (n > 0 && n <= 19).then(|| {
                let v = s[..n]
                    .iter()
                    .fold(0u64, |v, &c| v * 10 + u64::from(c - b'0'));
                (v, n)
            })
        };
        for n in 0..=22 {
            for end in ["", ".", "]", "a", "0@", ".123] x"] {
                let line = format!("{}{end}", &"9876543210123456789012345"[..n]);
                assert_eq!(
                    leading_number(line.as_bytes()),
                    by_digits(line.as_bytes()),
                    "{line}"
                );
            }
        }
    }

    fn message(line: &str) -> Message<'_> {
        match parse_plain(line.as_bytes()) {
            Parsed::Message(m) => m,
            other => panic!("{line:?} parsed as {other:?}"),
        }
    }

    #[test]
    fn a_libwayland_1_21_request_line_parses() {
        let m = message("[770448.801]  -> wl_surface@29.attach(wl_buffer@44, 0, 0)");
        assert_eq!(m.stamp, Stamp::Micros32(770_448_801));
        assert!(m.sent);
        assert_eq!(m.interface, b"wl_surface");
        assert_eq!(m.id, 29);
        assert_eq!(m.name, b"attach");
        assert_eq!(m.args, b"wl_buffer@44, 0, 0");
        assert_eq!(
            (m.tid, m.queue, m.conn, m.discarded),
            (None, None, None, false)
        );
    }

    #[test]
    fn a_space_padded_timestamp_parses() {
        let m = message("[  92063.955]  -> wl_display@1.get_registry(new id wl_registry@2)");
        assert_eq!(m.stamp, Stamp::Micros32(92_063_955));
    }

    #[test]
    fn a_comma_decimal_timestamp_parses() {
        let m = message(
            "[2693804,180] wl_pointer@19.enter(12885, wl_surface@16, 499,597656, 543,597656)",
        );
        assert_eq!(m.stamp, Stamp::Micros32(2_693_804_180));
        assert!(!m.sent);
        assert_eq!(m.args, b"12885, wl_surface@16, 499,597656, 543,597656");
    }

    #[test]
    fn a_libwayland_1_23_event_with_queue_and_hash_ids_parses() {
        let m = message("[2109922.441] {Default Queue} wl_buffer#57.release()");
        assert_eq!(m.queue, Some(&b"Default Queue"[..]));
        assert_eq!(
            (m.interface, m.id, m.name, m.args),
            (&b"wl_buffer"[..], 57, &b"release"[..], &b""[..])
        );
    }

    #[test]
    fn a_libwayland_1_26_line_with_thread_id_parses() {
        let m = message(
            "[14:03:27.512401] TID#4711 {Default Queue}  -> wl_surface#12.attach(wl_buffer#20, 0, 0)",
        );
        assert_eq!(
            m.stamp,
            Stamp::TimeOfDay(((14 * 60 + 3) * 60 + 27) * 1_000_000 + 512_401)
        );
        assert_eq!(m.tid, Some(4711));
        assert!(m.sent);
        assert_eq!(m.id, 12);
    }

    #[test]
    fn a_discarded_event_is_still_a_message() {
        let m = message("[14:03:27.000001] {Default Queue} discarded wl_callback#61.done(17)");
        assert!(m.discarded);
        assert_eq!(m.name, b"done");
    }

    #[test]
    fn zombie_lines_are_recognised() {
        for line in [
            "[1234567.890] discarded [zombie]@61.[event 0](0 fd, 4 byte)",
            "[00:00:01.000000] discarded [unknown]#7.[event 1](1 fd, 8 byte)",
        ] {
            assert!(
                matches!(parse_plain(line.as_bytes()), Parsed::Zombie(_)),
                "{line}"
            );
        }
    }

    #[test]
    fn a_wayland_debug_connection_id_parses() {
        let m = message("[1.000] {Default Queue} <256>  -> wl_surface#3.commit()");
        assert_eq!(m.conn, Some(256));
        assert!(m.sent);
    }

    #[test]
    fn colour_codes_are_stripped() {
        let line = "\x1b[32m[14:03:27.512345] \x1b[0m\x1b[33m{Default Queue} \x1b[0m -> \x1b[34mwl_surface\x1b[0m#\x1b[35m12\x1b[0m.\x1b[36mcommit\x1b[0m()";
        let mut scratch = Vec::new();
        match parse_line(line.as_bytes(), &mut scratch) {
            Parsed::Message(m) => {
                assert_eq!(
                    (m.interface, m.id, m.name, m.sent),
                    (&b"wl_surface"[..], 12, &b"commit"[..], true)
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn lines_that_are_not_wayland_debug_are_other() {
        for line in [
            "",
            "Gtk-WARNING **: something",
            "[03:05:42.123] weston log line with millisecond stamp",
            "[2026-11-22 03:05:42.123456] < - debug - > mirserver: Starting",
            "[abc] x",
            "[1234.567]no space",
        ] {
            assert_eq!(parse_plain(line.as_bytes()), Parsed::Other, "{line:?}");
        }
    }

    #[test]
    fn broken_protocol_lines_are_malformed_with_a_reason() {
        let cases = [
            ("[1.000]  -> wl_surface@3.commit(", Malformed::Unterminated),
            ("[1.000] wl_surface@.commit()", Malformed::ObjectId),
            (
                "[1.000] wl_surface@99999999999.commit()",
                Malformed::ObjectId,
            ),
            ("[1.000] wl_surface@3commit()", Malformed::MessageName),
            ("[1.000] hello world", Malformed::ObjectRef),
            (
                "[4294967.296] wl_surface@3.commit()",
                Malformed::TimestampRange,
            ),
            (
                "[24:00:00.000000] wl_surface@3.commit()",
                Malformed::TimestampRange,
            ),
        ];
        for (line, want) in cases {
            assert_eq!(
                parse_plain(line.as_bytes()),
                Parsed::Malformed(want),
                "{line:?}"
            );
        }
    }

    #[test]
    fn the_largest_32_bit_stamp_parses() {
        assert_eq!(
            message("[4294967.295] wl_buffer@5.release()").stamp,
            Stamp::Micros32(u32::MAX)
        );
    }

    /// The lines of the committed WAYLAND_DEBUG logs (every dialect the tests capture).
    pub(in crate::ingest::wayland) fn committed_lines() -> Vec<Vec<u8>> {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/wayland");
        let mut lines = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "log") {
                let text = std::fs::read(&path).unwrap();
                lines.extend(text.split(|&b| b == b'\n').map(<[u8]>::to_vec));
            }
        }
        lines
    }

    /// The lines of the committed logs (libwayland 1.21), each also in the layouts of
    /// libwayland 1.23 (a queue, `#` ids), 1.25 with `thread_id` (and a thread id) and 1.26
    /// (the time of day, a thread id, a queue, `#` ids). Not byte for byte what
    /// `tests/independent/dialect.py` writes (which the golden tests read): every `@` becomes
    /// `#`, strings' too, a received line is on the display queue, and the times of day are
    /// spread over the day.
    pub(in crate::ingest::wayland) fn lines_in_every_dialect() -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for line in committed_lines() {
            let Some((Parsed::Message(m), close)) =
                Some(parse_plain(&line)).zip(line.iter().position(|&b| b == b']'))
            else {
                out.push(line);
                continue;
            };
            let rest: Vec<u8> = line[close + 2..]
                .iter()
                .map(|&b| if b == b'@' { b'#' } else { b })
                .collect();
            let queue = if m.sent {
                "{Default Queue} "
            } else {
                "{Display Queue} "
            };
            let stamp = match m.stamp {
                Stamp::Micros32(us) => u64::from(us),
                Stamp::TimeOfDay(us) => us,
            };
            // (spread over the day, so that every digit of the hours is read)
            let day = stamp.wrapping_mul(997) % 86_400_000_000;
            let time_of_day = format!(
                "[{:02}:{:02}:{:02}.{:06}] ",
                day / 3_600_000_000,
                day / 60_000_000 % 60,
                day / 1_000_000 % 60,
                day % 1_000_000
            );
            let old_stamp = &line[..close + 2];
            for head in [
                [old_stamp, queue.as_bytes()].concat(),
                [old_stamp, b"TID#4242 ", queue.as_bytes()].concat(),
                [time_of_day.as_bytes(), b"TID#4242 ", queue.as_bytes()].concat(),
            ] {
                out.push([&head[..], &rest].concat());
            }
            out.push(line);
        }
        out
    }

    /// `line` with byte `at` replaced, removed or doubled, with each dialect's prefix, and with
    /// arguments that create an object (`new id a@5`) added or in place of its own.
    pub(in crate::ingest::wayland) fn variants(line: &[u8]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for at in 0..line.len() {
            for b in *b" 09a_nZ@#.,()[]->T\0\xff" {
                let mut v = line.to_vec();
                v[at] = b;
                out.push(v);
            }
            let mut v = line.to_vec();
            v.remove(at);
            out.push(v);
            let mut v = line.to_vec();
            v.insert(at, line[at]);
            out.push(v);
        }
        if let Some(close) = line.iter().position(|&b| b == b']') {
            for prefix in [
                "TID#7 ",
                "TID#x ",
                "discarded ",
                "{Default Queue} ",
                "<3> ",
                " -> ",
            ] {
                let Some(head) = line.get(..close + 2) else {
                    continue;
                };
                let mut v = head.to_vec();
                v.extend_from_slice(prefix.as_bytes());
                v.extend_from_slice(&line[close + 2..]);
                out.push(v);
            }
        }
        // arguments that create an object, before and after the others, and in their stead
        if let (Some(open), Some(b')')) = (line.iter().position(|&b| b == b'('), line.last()) {
            let (head, args) = (&line[..=open], &line[open + 1..line.len() - 1]);
            for args in [
                [b"new id a@5, ", args].concat(),
                [args, b", new id a@5"].concat(),
                b"new id a@5".to_vec(),
            ] {
                out.push([head, &args, b")"].concat());
            }
        }
        out
    }

    #[test]
    fn a_line_in_the_usual_layout_is_the_message_the_general_reader_reads() {
        let lines = lines_in_every_dialect();
        let mut usual_lines = 0;
        for line in &lines {
            if let Some(m) = usual(line) {
                usual_lines += 1;
                assert_eq!(
                    parse_plain(line),
                    Parsed::Message(m),
                    "{:?}",
                    line.escape_ascii()
                );
            }
        }
        // most lines of the logs in every dialect, so that the fast reader is what is tested
        assert!(
            usual_lines * 2 > lines.len(),
            "{usual_lines} of {}",
            lines.len()
        );
        // lines of each kind, changed at every byte
        let mut seen = std::collections::HashSet::new();
        let mut compared = 0;
        for line in lines.iter().filter(|l| {
            let shape = l.iter().position(|&b| b == b'(').map(|p| &l[..p]);
            let key = shape.map(|s| s.iter().filter(|b| !b.is_ascii_digit()).count());
            seen.insert((key, l.len() / 8))
        }) {
            for v in variants(line) {
                if let Some(m) = usual(&v) {
                    compared += 1;
                    assert_eq!(
                        parse_plain(&v),
                        Parsed::Message(m),
                        "{:?}",
                        v.escape_ascii()
                    );
                }
            }
        }
        assert!(compared > 10_000, "{compared}");
    }

    #[test]
    fn the_usual_layouts_are_read_and_every_other_left_to_the_general_reader() {
        for line in [
            "[1234567.890] {Default Queue} <256>  -> wl_surface#3.commit()",
            "[1234567.890] discarded wl_buffer@3.release()",
            "[1234567.890] {Default Queue} discarded wl_buffer#3.release()",
            "[00001234.890] wl_buffer@3.release()",
            "[1.000] wl_buffer@12345678.release()",
            "[1.000] TID#12345678 wl_buffer@1.release()",
            "[1.000] zwp_an_interface_whose_name_runs_on_past_the_first_sixty_four_bytes_v1@3.request()",
        ] {
            assert_eq!(usual(line.as_bytes()), None, "{line}");
            assert!(
                matches!(parse_plain(line.as_bytes()), Parsed::Message(_)),
                "{line}"
            );
        }
        // a time past the day, times in other layouts, a queue without its space, a queue with
        // a `}` in its name, a padded stamp past the 32-bit clock, spaces alone: no message
        for line in [
            "[24:00:00.000000] wl_buffer#1.release()",
            "[4:03:27.512401] wl_buffer#1.release()",
            "[14:03:27.51240] wl_buffer#1.release()",
            "[14:03:27,512401] wl_buffer#1.release()",
            "[14:03:27.512401]  wl_buffer#1.release()",
            "[1.000] {Default Queue}wl_buffer@1.release()",
            "[1.000] {Default {Queue} } wl_buffer@1.release()",
            "[ 12345678.000] wl_buffer@1.release()",
            "[    ] wl_buffer@1.release()",
        ] {
            assert_eq!(usual(line.as_bytes()), None, "{line}");
            assert!(
                !matches!(parse_plain(line.as_bytes()), Parsed::Message(_)),
                "{line}"
            );
        }
        for line in [
            "[1.000]  -> wl_surface#3.commit()",
            "[2693804,180] wl_pointer@19.enter(12885, wl_surface@16)",
            "[14:03:27.512401] TID#4711 {Default Queue}  -> wl_surface#12.attach(wl_buffer#20, 0, 0)",
            "[23:59:59.999999] {Display Queue} wl_display#1.delete_id(61)",
            "[2109922.441] {Default Queue} wl_buffer#57.release()",
            "[2109922.441] TID#7 wl_buffer#57.release()",
            "[2109922.441] {} wl_buffer#57.release()",
            // libwayland's `%7u`: seconds under a million are padded with spaces
            "[  92063.955]  -> wl_display@1.get_registry(new id wl_registry@2)",
            "[     10.816] wl_display@1.delete_id(11)",
            "[ 850918.020] {Default Queue} wl_buffer#3.release()",
            "[ 4294967.295] wl_buffer@3.release()",
        ] {
            let m = usual(line.as_bytes());
            assert!(m.is_some(), "{line}");
            assert_eq!(parse_plain(line.as_bytes()), Parsed::Message(m.unwrap()));
        }
    }
}
