//! `perf script` and ftrace / trace-cmd text: `PREFIX TIMESTAMP: EVENT: PAYLOAD`.
//!
//! perf prints `comm pid [cpu] 13760.296300641: sched:sched_wakeup: comm=sh pid=18203 ...`
//! (default fields; `-F` layouts drop or reorder the prefix), ftrace and `trace-cmd report -R`
//! print `sh-18203 [000] d..2. 13760.296300: sched_wakeup: comm=sh pid=18203 ...`. Both are
//! read by one parser: the timestamp is the first token of the form `SECONDS.FRACTION:`, the
//! event is the next token ending in `:`, then the payload:
//! - `NAME=VALUE ...` (perf, ftrace, `trace-cmd report -R`): a field runs to the next
//!   ` NAME=`, so that a value may hold spaces (`prev_comm=lat worker 1 prev_pid=42`: a
//!   thread name may hold spaces, `:`, `,`, brackets); sched_switch's `==>` ends a value;
//! - `NAME: VALUE, NAME: VALUE` (`syscalls:sys_enter_*`);
//! - positional payloads: `raw_syscalls` (`NR 12 (…)` gives `NR`, `= 5` gives `ret`),
//!   `syscalls:sys_exit_*` (`0x3` gives `ret`) and `trace-cmd report`'s default text of the
//!   scheduler events (`bash:42 [120] S ==> swapper/1:0 [120]` gives `prev_comm`, `prev_pid`,
//!   `prev_prio`, `prev_state`, `next_comm`, ...; `bash:42 [120] CPU:001` gives `comm`, `pid`,
//!   `prio`, `target_cpu`): the field names of the events' tracefs `format` files.
//!
//! The prefix gives `common_comm`, `common_pid` and `common_cpu` (named as ftrace names its
//! common fields, so they never collide with an event's own `pid`), and `common_tgid` where
//! tracefs' `record-tgid` option prints it. A `trace-cmd report` line of a buffer instance
//! starts with the instance's name and a `:`; it is skipped. So are the call stacks printed
//! after events: perf script's of `perf record -g` (a tab, an address, a symbol) and tracefs'
//! of its `stacktrace` options (a `<stack trace>` line, then ` => frame` lines), looked at only
//! when a line is not an event.

use super::{Event, Parsed};
use crate::ingest::lines::no_other_blanks;
use crate::ingest::words::{ALL, Block, WIDTH, find_near, identifier_len};

/// `SECONDS.FRACTION:` as bytes, checked in one pass.
fn is_timestamp(t: &[u8]) -> bool {
    let n = t.len();
    if n < 4 || t[n - 1] != b':' || !t[0].is_ascii_digit() {
        return false;
    }
    let mut dot = None;
    for (i, &c) in t[..n - 1].iter().enumerate() {
        match c {
            b'0'..=b'9' => {}
            b'.' if dot.is_none() => dot = Some(i),
            _ => return false,
        }
    }
    dot.is_some_and(|d| d > 0 && d < n - 2)
}

/// [`is_timestamp`] of `b[a..e]`, read in the line as one [`Block`] when the digits before
/// the colon fit one (the usual stamp: `13760.296300641:` has fifteen): the digits and the
/// dot are found at once. A byte loop over the stamp, asked of every perf and ftrace line, was
/// a measurable share of reading one.
#[inline]
fn is_timestamp_at(b: &[u8], a: usize, e: usize) -> bool {
    let n = e - a;
    if n < 4 || b[e - 1] != b':' || !b[a].is_ascii_digit() {
        return false;
    }
    let before_colon = n - 1;
    if before_colon > WIDTH {
        return is_timestamp(&b[a..e]);
    }
    let block = Block::at(b, a);
    let wanted = ALL >> (WIDTH - before_colon);
    let dots = block.eq(b'.') & wanted;
    let digits = block.in_range(b'0', b'9') & wanted;
    // one dot (a power of two: `count_ones` is a loop of shifts and masks without the popcnt
    // instruction), every other byte a digit; the first byte is a digit, so the dot is not
    // first, and it is not last either (a digit between it and the colon)
    dots != 0
        && dots & (dots - 1) == 0
        && (dots | digits) == wanted
        && (dots.trailing_zeros() as usize) < n - 2
}

/// The first byte at or past `from` that is not ASCII white space, or the end of `b`: sixteen
/// bytes at a time, as perf script pads its command names to sixteen columns (a byte loop over
/// the padding was a cost on every perf line).
#[inline]
fn white_end(b: &[u8], from: usize) -> usize {
    let mut i = from;
    while i < b.len() {
        let block = Block::at(b, i);
        // `is_ascii_whitespace`: space, \t, \n, \x0c, \r (not \x0b)
        let white = block.eq(b' ') | block.in_range(b'\t', b'\n') | block.in_range(0x0c, b'\r');
        // (the zero bytes past the end are not white space: the `min` cuts them off)
        let other = !white & ALL;
        if other != 0 {
            return (i + other.trailing_zeros() as usize).min(b.len());
        }
        i += WIDTH;
    }
    b.len()
}

/// The last space or tab of `b[from..to]`: the block before `to`, then `memrchr2` (its call
/// cost more than the search of the dozen bytes back from a stamp's colon to its start).
#[inline]
fn last_blank_in(b: &[u8], from: usize, to: usize) -> Option<usize> {
    let lo = to.saturating_sub(WIDTH).max(from);
    let block = Block::at(b, lo);
    let blanks = (block.eq(b' ') | block.eq(b'\t')) & (ALL >> (WIDTH - (to - lo)));
    if blanks != 0 {
        return Some(lo + (u32::BITS - 1 - blanks.leading_zeros()) as usize);
    }
    memchr::memrchr2(b' ', b'\t', &b[from..lo]).map(|p| from + p)
}

/// The next whitespace-separated token from `*i`.
#[inline]
fn next_token(b: &[u8], i: &mut usize) -> Option<(usize, usize)> {
    while *i < b.len() && b[*i].is_ascii_whitespace() {
        *i += 1;
    }
    if *i >= b.len() {
        return None;
    }
    let start = *i;
    let end = blank_from(b, start + 1);
    *i = end;
    Some((start, end))
}

/// The first space or tab at or past `from`, or the end of `b`: where a token ends. Sixteen
/// bytes at a time ([`Block`]; tokens are a few bytes to a few dozen: a byte loop here, or a
/// `memchr2` call per token, was a large share of reading a perf line).
#[inline]
fn blank_from(b: &[u8], from: usize) -> usize {
    let mut i = from;
    while i < b.len() {
        let block = Block::at(b, i);
        let blanks = block.eq(b' ') | block.eq(b'\t');
        // (the zero bytes past the end are not blanks: a blank found is in `b`)
        if blanks != 0 {
            return i + blanks.trailing_zeros() as usize;
        }
        i += WIDTH;
    }
    b.len()
}

/// Parses one line into `ev`.
pub fn parse(line: &str, ev: &mut Event) -> Parsed {
    parse_with(line, ev, None, true)
}

/// Parses one line into `ev`, leaving a `NAME=VALUE ...` payload (the common one) unparsed:
/// [`Event::field`] then finds a field in the line when a rule asks for it
/// ([`equals_field`]), with the same result as the whole parse. A rule reads one or two
/// fields of the eight or so of a sched_switch line. `plain`: the line is known to hold no
/// tab, `\r` or `\x0c` ([`Line::Plain`](crate::ingest::lines::Line::Plain)); otherwise the
/// payload is searched for them (with one, it is parsed whole).
pub fn parse_lazy(line: &str, ev: &mut Event, plain: bool) -> Parsed {
    parse_with(line, ev, Some(plain), true)
}

/// [`parse_lazy`] without the prefix's `common_comm`, `common_pid`, `common_cpu` and
/// `common_tgid`: for rules that read none of them ([`reads_prefix`]), whose reading would be
/// time spent on every line for nothing.
pub fn parse_lazy_unprefixed(line: &str, ev: &mut Event, plain: bool) -> Parsed {
    parse_with(line, ev, Some(plain), false)
}

/// Whether any of `fields` is one the prefix gives.
pub fn reads_prefix(fields: &[String]) -> bool {
    fields
        .iter()
        .any(|f| [COMM, PID, CPU, TGID].contains(&f.as_str()))
}

/// `lazy`: `Some(plain)` leaves a `NAME=VALUE ...` payload to [`equals_field`] ([`parse_lazy`]).
fn parse_with(line: &str, ev: &mut Event, lazy: Option<bool>, prefixed: bool) -> Parsed {
    ev.clear();
    let b = line.as_bytes();
    let mut i = white_end(b, 0);
    if i == b.len() || b[i] == b'#' {
        return Parsed::Skip;
    }
    // trace-cmd report's header.
    if let Some(n) = line[i..].strip_prefix("cpus=")
        && n.trim_end().bytes().all(|c| c.is_ascii_digit())
    {
        return Parsed::Skip;
    }
    let mut prefix: [(usize, usize); 8] = [(0, 0); 8];
    let mut n_prefix = 0;
    let first_colon = if prefixed { None } else { stamp_token(b, i) };
    let ts = if let Some((a, e)) = first_colon {
        i = e;
        (a, e - 1)
    } else {
        loop {
            let Some((a, e)) = next_token(b, &mut i) else {
                if is_stack_line(b) {
                    return Parsed::Skip;
                }
                return Parsed::Malformed("no timestamp (SECONDS.FRACTION:)");
            };
            if is_timestamp_at(b, a, e) {
                break (a, e - 1);
            }
            if n_prefix < prefix.len() {
                prefix[n_prefix] = (a, e);
                n_prefix += 1;
            }
        }
    };
    let Some(ts_ns) = super::decimal_bytes_to_ns(&b[ts.0..ts.1], 1_000_000_000) else {
        return Parsed::Malformed("a timestamp too large");
    };
    ev.ts_ns = ts_ns;
    let Some((a, e)) = next_token(b, &mut i) else {
        return Parsed::Malformed("no event name after the timestamp");
    };
    if b[e - 1] != b':' || e - a < 2 {
        // tracefs' `stacktrace` and `userstacktrace` options: the frames follow
        if [&b"<stack trace>"[..], b"<user stack trace>"].contains(&line[a..].trim_end().as_bytes())
        {
            return Parsed::Skip;
        }
        return Parsed::Malformed("the event name does not end in ':'");
    }
    ev.name = a..e - 1;
    if prefixed {
        prefix_fields(line, &prefix[..n_prefix], ev);
    }
    payload(line, i, ev, lazy);
    Parsed::Event
}

/// Whether `b`, a line without a time stamp, is a frame of a call stack printed after an
/// event: perf script's (`perf record -g`: a tab, the address in hexadecimal, the symbol and
/// the object, `\t ffffffff813aa3e5 ttwu_do_activate+0x175 ([kernel.kallsyms])`) or tracefs'
/// and trace-cmd's (` => __schedule`). Such a trace is a real one whose events are
/// read, not a file of another format.
fn is_stack_line(b: &[u8]) -> bool {
    let first = white_end(b, 0);
    let end = blank_from(b, first);
    let token = &b[first..end];
    match b.first() {
        Some(b'\t') => !token.is_empty() && token.iter().all(u8::is_ascii_hexdigit),
        // (and a frame after the arrow)
        _ => token == b"=>" && white_end(b, end) < b.len(),
    }
}

/// The token that holds the line's first `:` (from `from`, a byte that is not white space), when
/// it is the time stamp: the one the token-by-token search finds, since a stamp ends in `:` and
/// no token before it holds one. `None` when that token is not a stamp (a thread named
/// `kworker/0:1`): the search then goes token by token. Two vector searches instead of
/// tokenizing the prefix (`  comm 18203 [000] `), which was a large part of reading a line;
/// each a block or two ([`find_near`], [`last_blank_in`]) before a `memchr` call.
fn stamp_token(b: &[u8], from: usize) -> Option<(usize, usize)> {
    let colon = find_near(b, from, b':')?;
    let end = colon + 1;
    if end < b.len() && b[end] != b' ' && b[end] != b'\t' {
        return None;
    }
    let start = last_blank_in(b, from, colon).map_or(from, |p| p + 1);
    is_timestamp_at(b, start, end).then_some((start, end))
}

/// Whether `t` is a field name (a C identifier, as in tracefs `format` files).
fn is_field_name(t: &[u8]) -> bool {
    !t.is_empty()
        && !t[0].is_ascii_digit()
        && t.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'_')
}

/// The payload from `from` into `ev.fields` (or, `lazy`, only where it begins when it is
/// `NAME=VALUE ...`: see [`parse_with`]).
fn payload(line: &str, from: usize, ev: &mut Event, lazy: Option<bool>) {
    let b = line.as_bytes();
    let mut i = from;
    // The usual payload, `NAME=VALUE ...`, is known so by its first token's beginning: its
    // end (a search for the blank after it, a cost on every perf line) is needed only by the
    // other forms (a token `NAME=...` is neither `NAME:` nor positional).
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    if i < b.len() && begins_field(b, i) {
        return equals_payload(line, i, ev, lazy);
    }
    let Some((a, e)) = next_token(b, &mut i) else {
        return;
    };
    let first = &b[a..e];
    if first.len() > 1 && first.ends_with(b":") && is_field_name(&first[..first.len() - 1]) {
        return colon_fields(line, a, ev);
    }
    // (a token that begins a field holds a `=`: known so without a `memchr` call, which was a
    // cost on every ftrace line)
    if !begins_field(b, a) && !first.contains(&b'=') {
        let name = ev.name(line);
        let event = name.rsplit_once(':').map_or(name, |(_, n)| n);
        match event {
            "sys_enter" | "sys_exit" if first == b"NR" => return raw_syscall(line, i, ev),
            e if e.starts_with("sys_exit_") => {
                ev.common.push(("ret", a..line.trim_end().len().max(a)));
                return;
            }
            "sched_switch" => return positional_switch(line, a, ev),
            "sched_wakeup" | "sched_waking" | "sched_wakeup_new" => {
                return positional_wakeup(line, a, ev);
            }
            _ => {}
        }
    }
    equals_payload(line, a, ev, lazy);
}

/// A `NAME=VALUE ...` payload from `a`: left in the line (`lazy`) or read into `ev.fields`.
#[inline]
fn equals_payload(line: &str, a: usize, ev: &mut Event, lazy: Option<bool>) {
    // Tokens end at spaces and tabs and begin after any white space: the lazy look-up reads
    // tokens as begun after a space, so a payload with other white space is parsed whole.
    if let Some(plain) = lazy
        && (plain || no_other_blanks(&line.as_bytes()[a..]))
    {
        ev.lazy_payload = Some(a);
        return;
    }
    equals_fields(line, a, ev);
}

/// The value of the first field `name` of the `NAME=VALUE ...` payload that begins at `from`,
/// as [`equals_fields`] would have it: the token `name=...` that begins after a space (or at
/// `from`), its value running to the next token that begins a field, or to `==>`.
pub fn equals_field(line: &str, from: usize, name: &str) -> Option<std::ops::Range<usize>> {
    let b = line.as_bytes();
    let at = field_start(b, from, name.as_bytes())?;
    // Only a field name begins a field. Its copy in the line is checked, as a block of the
    // line, not the name byte by byte (a large part of a look-up in a perf line so): the
    // copy is followed by `=`, so the identifier there is `name.len()` long exactly when every
    // byte of the name is an identifier's.
    if identifier_len(&b[at..]) != name.len() || b[at].is_ascii_digit() {
        return None;
    }
    let eq = at + name.len();
    // The token's own end, then the tokens that continue its value. (A lazy payload holds no
    // tab: its tokens end at spaces.)
    let mut i = blank_from(b, eq + 1);
    let mut end = i;
    loop {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        // The token at `i` ends the value where it begins a field (the usual next token:
        // known so without finding its end) or is `==>`.
        if i >= b.len() || begins_field(b, i) {
            break;
        }
        let e = blank_from(b, i + 1);
        if &b[i..e] == b"==>" {
            break;
        }
        (end, i) = (e, e);
    }
    Some(eq + 1..end)
}

/// Whether the token at `b[a]` begins a field: `NAME=...`, NAME a field name. Read in the line
/// (its identifier sixteen bytes at a time), not in the token: the token's first `=` after a
/// field name is the first byte that is not an identifier's, and is in the token (it is not
/// a blank), so the token's end need not be known.
#[inline]
fn begins_field(b: &[u8], a: usize) -> bool {
    let n = identifier_len(&b[a..]);
    n > 0 && !b[a].is_ascii_digit() && b.get(a + n) == Some(&b'=')
}

/// Where `NAME=` is first written in `b` at `from` or just after a space at or past `from`
/// (the token that begins field `name`). Sixteen bytes at a time ([`Block`]): the bytes that
/// are spaces and those equal to the name's first letter are found at once, and only a token
/// that begins with that letter is compared (a `memchr` call per `=` of a
/// sched_switch payload, and a comparison at each, were a large part of reading a perf line).
fn field_start(b: &[u8], from: usize, name: &[u8]) -> Option<usize> {
    let first = *name.first()?;
    // byte 0 of the next block begins a token: `from` does, and a byte after a space does
    let mut carry = 1u32;
    let mut i = from;
    while i < b.len() {
        let block = Block::at(b, i);
        let spaces = block.eq(b' ');
        let mut hits = ((spaces << 1) | carry) & block.eq(first);
        carry = spaces >> (WIDTH - 1);
        while hits != 0 {
            let at = i + hits.trailing_zeros() as usize;
            if b.get(at + name.len()) == Some(&b'=') && super::same(&b[at..at + name.len()], name) {
                return Some(at);
            }
            hits &= hits - 1;
        }
        i += WIDTH;
    }
    None
}

/// `NAME=VALUE ...`: a value runs to the next token that starts with `NAME=`, or to `==>`.
fn equals_fields(line: &str, from: usize, ev: &mut Event) {
    let b = line.as_bytes();
    let mut i = from;
    let mut open: Option<usize> = None;
    while let Some((a, e)) = next_token(b, &mut i) {
        let t = &b[a..e];
        if t == b"==>" {
            open = None;
            continue;
        }
        if let Some(eq) = t.iter().position(|&c| c == b'=')
            && is_field_name(&t[..eq])
        {
            ev.fields.push((a..a + eq, a + eq + 1..e));
            open = Some(ev.fields.len() - 1);
        } else if let Some(f) = open {
            ev.fields[f].1.end = e;
        }
    }
}

/// `NAME: VALUE, NAME: VALUE`: a value runs to the next `, NAME: `.
fn colon_fields(line: &str, from: usize, ev: &mut Event) {
    let b = line.as_bytes();
    let end = line.trim_end().len();
    let mut name_at = from;
    loop {
        let Some(colon) = memchr::memchr(b':', &b[name_at..end]).map(|p| name_at + p) else {
            return;
        };
        let value_at = (colon + 1..end).find(|&j| b[j] != b' ').unwrap_or(end);
        // The value ends before the next `, NAME:`.
        let mut j = value_at;
        let next = loop {
            match memchr::memchr(b',', &b[j..end]).map(|p| j + p) {
                None => break None,
                Some(c) => {
                    let n = (c + 1..end).find(|&k| b[k] != b' ').unwrap_or(end);
                    let colon2 = memchr::memchr(b':', &b[n..end]).map(|p| n + p);
                    if colon2.is_some_and(|c2| is_field_name(&b[n..c2])) {
                        break Some((c, n));
                    }
                    j = c + 1;
                }
            }
        };
        let value_end = next.map_or(end, |(c, _)| c);
        ev.fields
            .push((name_at..colon, value_at..value_end.max(value_at)));
        match next {
            Some((_, n)) => name_at = n,
            None => return,
        }
    }
}

/// `NR 12 (a, b, ...)` (sys_enter) or `NR 12 = 5` (sys_exit): `NR` and `ret`.
fn raw_syscall(line: &str, from: usize, ev: &mut Event) {
    let b = line.as_bytes();
    let mut i = from;
    if let Some((a, e)) = next_token(b, &mut i) {
        ev.common.push(("NR", a..e));
    }
    if let Some((a, e)) = next_token(b, &mut i)
        && &b[a..e] == b"="
        && let Some((a, e)) = next_token(b, &mut i)
    {
        ev.common.push(("ret", a..e));
    }
}

/// `COMM:PID [PRIO]` at the end of `range`: the ranges of comm, pid and prio.
fn task(line: &str, range: std::ops::Range<usize>) -> Option<[std::ops::Range<usize>; 3]> {
    let text = &line[range.clone()];
    let t = text.trim_end();
    let open = t.rfind(" [")?;
    let prio = t[open + 2..].strip_suffix(']')?;
    let who = &t[..open];
    let colon = who.rfind(':')?;
    let pid = &who[colon + 1..];
    if pid.is_empty() || !pid.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let base = range.start;
    let lead = who.len() - who.trim_start().len();
    Some([
        base + lead..base + colon,
        base + colon + 1..base + open,
        base + open + 2..base + open + 2 + prio.len(),
    ])
}

/// trace-cmd's `PREV_COMM:PREV_PID [PRIO] STATE ==> NEXT_COMM:NEXT_PID [PRIO]`.
fn positional_switch(line: &str, from: usize, ev: &mut Event) {
    let Some((payload, end)) = positional_payload(line, from) else {
        return;
    };
    let Some(arrow) = payload.find(" ==> ").map(|p| from + p) else {
        return;
    };
    let left = line[from..arrow].trim_end();
    let Some(sp) = left.rfind(' ') else {
        return;
    };
    let state = from + sp + 1..from + left.len();
    let (Some(prev), Some(next)) = (task(line, from..from + sp), task(line, arrow + 5..end)) else {
        return;
    };
    let names = ["prev_comm", "prev_pid", "prev_prio"];
    ev.common.extend(names.into_iter().zip(prev));
    ev.common.push(("prev_state", state));
    let names = ["next_comm", "next_pid", "next_prio"];
    ev.common.extend(names.into_iter().zip(next));
}

/// trace-cmd's `COMM:PID [PRIO] [success=1] CPU:NNN`.
fn positional_wakeup(line: &str, from: usize, ev: &mut Event) {
    let Some((payload, end)) = positional_payload(line, from) else {
        return;
    };
    let Some(cpu) = payload.rfind(" CPU:").map(|p| from + p) else {
        return;
    };
    let mut who_end = cpu;
    if let Some(s) = line[from..cpu].rfind(" success=") {
        who_end = from + s;
    }
    if let Some(task) = task(line, from..who_end) {
        ev.common
            .extend(["comm", "pid", "prio"].into_iter().zip(task));
        ev.common.push(("target_cpu", cpu + 5..end));
    }
}

/// A positional payload from `from` to the end of the line's text, and where that ends; `None`
/// when the line ends first: its first token (`from`), which the token search took for one, is
/// white space to `trim_end` (a vertical tab, a no-break space).
fn positional_payload(line: &str, from: usize) -> Option<(&str, usize)> {
    let end = line.trim_end().len();
    Some((line.get(from..end)?, end))
}

const COMM: &str = "common_comm";
const PID: &str = "common_pid";
const CPU: &str = "common_cpu";
const TGID: &str = "common_tgid";

/// The prefix: `[cpu]`, then perf's `comm pid[/tid]` or ftrace's `comm-pid` before it, into
/// [`Event::common`] (their names are not in the line).
fn prefix_fields(line: &str, prefix: &[(usize, usize)], ev: &mut Event) {
    // trace-cmd's buffer instance, `NAME:` first on the line, names no task.
    let mut prefix = prefix;
    if prefix.len() > 1 && line[prefix[0].0..prefix[0].1].ends_with(':') {
        prefix = &prefix[1..];
    }
    // tracefs' record-tgid: `comm-pid (  tgid) [cpu]`.
    let mut kept: [(usize, usize); 8] = [(0, 0); 8];
    let mut n = 0;
    let mut in_tgid = false;
    for &(a, b) in prefix {
        let t = &line[a..b];
        if t.starts_with('(') && !t.starts_with("(-") {
            in_tgid = true;
        }
        if in_tgid {
            let digits = t.trim_start_matches('(').trim_end_matches(')');
            if !digits.is_empty() && digits.bytes().all(|c| c.is_ascii_digit()) {
                let start = b - digits.len() - usize::from(t.ends_with(')'));
                ev.common.push((TGID, start..start + digits.len()));
            }
            in_tgid = !t.ends_with(')');
            continue;
        }
        kept[n] = (a, b);
        n += 1;
    }
    let prefix = &kept[..n];
    let cpu_at = prefix.iter().position(|&(a, b)| {
        let t = &line[a..b];
        t.len() > 2 && t.starts_with('[') && t.ends_with(']')
    });
    if let Some(i) = cpu_at {
        let (a, b) = prefix[i];
        ev.common.push((CPU, a + 1..b - 1));
    }
    let before = &prefix[..cpu_at.unwrap_or(prefix.len())];
    let Some(&(a, b)) = before.last() else {
        return;
    };
    let last = &line[a..b];
    // perf: `comm pid` or `comm pid/tid` (the comm may itself contain spaces).
    let (pid, tid) = last.split_once('/').unwrap_or((last, last));
    if !pid.is_empty() && pid.bytes().all(|c| c.is_ascii_digit()) {
        let tid_start = b - tid.len();
        ev.common.push((PID, tid_start..b));
        if before.len() >= 2 {
            ev.common
                .push((COMM, before[0].0..before[before.len() - 2].1));
        }
        return;
    }
    // ftrace: `comm-pid`.
    if let Some(dash) = last.rfind('-') {
        let digits = &last[dash + 1..];
        if !digits.is_empty() && digits.bytes().all(|c| c.is_ascii_digit()) {
            ev.common.push((PID, a + dash + 1..b));
            ev.common.push((COMM, before[0].0..a + dash));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(line: &str) -> (u64, String, Vec<(String, String)>) {
        let mut ev = Event::default();
        assert_eq!(parse(line, &mut ev), Parsed::Event, "{line}");
        let common = ev.common.iter().map(|(k, v)| (k.to_string(), v));
        let named = ev
            .fields
            .iter()
            .map(|(k, v)| (line[k.clone()].to_string(), v));
        let f = common
            .chain(named)
            .map(|(k, v)| (k, line[v.clone()].to_string()))
            .collect();
        (ev.ts_ns, ev.name(line).to_string(), f)
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn a_perf_script_line_has_its_prefix_and_payload_fields() {
        let line = "             seq 18205 [000] 13760.296837898: sched:sched_wakeup: comm=sh pid=18203 prio=120 target_cpu=000";
        let (ts, name, f) = fields(line);
        assert_eq!(ts, 13_760_296_837_898);
        assert_eq!(name, "sched:sched_wakeup");
        assert_eq!(
            f,
            pairs(&[
                ("common_cpu", "000"),
                ("common_pid", "18205"),
                ("common_comm", "seq"),
                ("comm", "sh"),
                ("pid", "18203"),
                ("prio", "120"),
                ("target_cpu", "000"),
            ])
        );
    }

    #[test]
    fn a_sched_switch_line_skips_the_arrow() {
        let line = "sh 18203 [000] 13760.296300641: sched:sched_switch: prev_comm=sh prev_pid=18203 prev_prio=120 prev_state=S ==> next_comm=sh next_pid=18205 next_prio=120";
        let (_, _, f) = fields(line);
        assert!(f.contains(&("next_pid".into(), "18205".into())));
        assert!(f.contains(&("prev_state".into(), "S".into())));
        assert!(!f.iter().any(|(k, _)| k.contains('>')));
    }

    #[test]
    fn an_ftrace_line_has_comm_dash_pid_and_flags() {
        let line = "          <idle>-0       [001] d..2.  1234.567890: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=bash next_pid=42 next_prio=120";
        let (ts, name, f) = fields(line);
        assert_eq!(ts, 1_234_567_890_000);
        assert_eq!(name, "sched_switch");
        assert_eq!(f[0], ("common_cpu".into(), "001".into()));
        assert_eq!(f[1], ("common_pid".into(), "0".into()));
        assert_eq!(f[2], ("common_comm".into(), "<idle>".into()));
    }

    #[test]
    fn a_perf_script_line_with_pid_and_tid_uses_the_thread() {
        let line = "mir 100/107 [003] 5.000000001: probe_libmirserver:frame: (7f00) arg1=3";
        let (ts, name, f) = fields(line);
        assert_eq!(
            (ts, name.as_str()),
            (5_000_000_001, "probe_libmirserver:frame")
        );
        assert!(f.contains(&("common_pid".into(), "107".into())));
        assert!(f.contains(&("arg1".into(), "3".into())));
    }

    fn get<'a>(f: &'a [(String, String)], k: &str) -> Option<&'a str> {
        f.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str())
    }

    #[test]
    fn values_with_spaces_run_to_the_next_field_name() {
        let line = "    lat worker 1  8491 [001]  1566.621504522: sched:sched_switch: prev_comm=lat worker 1 prev_pid=8491 prev_prio=120 prev_state=S ==> next_comm=opt 9njvaa1jixg next_pid=8457 next_prio=120";
        let (_, _, f) = fields(line);
        assert_eq!(get(&f, "common_comm"), Some("lat worker 1"));
        assert_eq!(get(&f, "common_pid"), Some("8491"));
        assert_eq!(get(&f, "prev_comm"), Some("lat worker 1"));
        assert_eq!(get(&f, "prev_state"), Some("S"));
        assert_eq!(get(&f, "next_comm"), Some("opt 9njvaa1jixg"));
        assert_eq!(get(&f, "next_prio"), Some("120"));
        let (_, _, f) = fields("x 1 [0] 1.5: e: comm=a [b], c:d x= y=2");
        assert_eq!(get(&f, "comm"), Some("a [b], c:d"));
        assert_eq!(get(&f, "x"), Some(""));
        assert_eq!(get(&f, "y"), Some("2"));
    }

    #[test]
    fn name_colon_value_and_positional_payloads_become_fields() {
        let (_, _, f) = fields(
            "p 1 [0] 1.5: syscalls:sys_enter_openat: dfd: 0xffffff9c, filename: 0x7ffd, flags: 0x80000, mode: 0x0",
        );
        assert_eq!(get(&f, "dfd"), Some("0xffffff9c"));
        assert_eq!(get(&f, "mode"), Some("0x0"));
        let (_, _, f) = fields("p 1 [0] 1.5: syscalls:sys_exit_openat: 0x3");
        assert_eq!(get(&f, "ret"), Some("0x3"));
        let (_, _, f) =
            fields("p 1 [0] 1.5: raw_syscalls:sys_enter: NR 257 (ffffff9c, 7ffd, 80000, 0, 0, 0)");
        assert_eq!(get(&f, "NR"), Some("257"));
        let (_, _, f) = fields("p 1 [0] 1.5: raw_syscalls:sys_exit: NR 257 = 3");
        assert_eq!((get(&f, "NR"), get(&f, "ret")), (Some("257"), Some("3")));
        // trace-cmd report's default text, in a buffer instance.
        let line = "lsx:     lat worker 1-8655  [000]  1575.548152: sched_switch:         memfd:sealed-91:4636 [120] S ==> lat worker 2:8611 [120]";
        let (ts, name, f) = fields(line);
        assert_eq!((ts, name.as_str()), (1_575_548_152_000, "sched_switch"));
        assert_eq!(get(&f, "common_comm"), Some("lat worker 1"));
        assert_eq!(get(&f, "common_pid"), Some("8655"));
        assert_eq!(get(&f, "prev_comm"), Some("memfd:sealed-91"));
        assert_eq!(get(&f, "prev_pid"), Some("4636"));
        assert_eq!(get(&f, "prev_state"), Some("S"));
        assert_eq!(get(&f, "next_comm"), Some("lat worker 2"));
        assert_eq!(get(&f, "next_pid"), Some("8611"));
        let line = "lsx:             bash-8608  [001]  1575.211171: sched_wakeup:         memfd:sealed-91:4636 [120] CPU:001";
        let (_, _, f) = fields(line);
        assert_eq!(get(&f, "comm"), Some("memfd:sealed-91"));
        assert_eq!(get(&f, "pid"), Some("4636"));
        assert_eq!(get(&f, "target_cpu"), Some("001"));
    }

    #[test]
    fn a_positional_payload_of_white_space_alone_gives_no_fields() {
        // A first token the payload's token search keeps (a vertical tab, a no-break space)
        // is white space to `trim_end`: the payload ended before it began (found by the
        // `trace_reader` fuzz target, a panic slicing the line backwards).
        for event in ["sched_switch", "sched_wakeup"] {
            for blank in [
                "\u{b}",
                "\u{c}",
                "\u{a0}",
                "\u{3000}",
                "\t\u{b}\t",
                "\u{b} \u{85}",
            ] {
                let line = format!("  python4-25793   [001] d..2. 14410.212051: {event}:\t{blank}");
                let (ts, name, f) = fields(&line);
                assert_eq!((ts, name.as_str()), (14_410_212_051_000, event), "{line:?}");
                assert!(
                    !f.iter()
                        .any(|(k, _)| k.contains("pid") && k != "common_pid"),
                    "{line:?}"
                );
            }
        }
    }

    #[test]
    fn tracefs_record_tgid_and_a_bare_tid_prefix_are_read() {
        let line = "    lat worker 1-9009    (   8968) [001]   1593.891793: sched_wakeup: comm=python3 pid=8968 prio=120 target_cpu=001";
        let (_, _, f) = fields(line);
        assert_eq!(get(&f, "common_tgid"), Some("8968"));
        assert_eq!(get(&f, "common_pid"), Some("9009"));
        assert_eq!(get(&f, "common_comm"), Some("lat worker 1"));
        let (_, _, f) =
            fields(" 8442 [001]  1566.326260: sched:sched_wakeup: comm=rcu_preempt pid=15");
        assert_eq!(get(&f, "common_pid"), Some("8442"));
        let (_, _, f) = fields("[001]  1566.326260: sched:sched_wakeup: comm=rcu_preempt pid=15");
        assert_eq!(get(&f, "common_cpu"), Some("001"));
    }

    /// Every line of the committed perf and ftrace samples.
    fn sample_lines() -> Vec<String> {
        let root = env!("CARGO_MANIFEST_DIR");
        ["sched.perf.txt", "sched.ftrace.txt"]
            .iter()
            .flat_map(|f| {
                let path = format!("{root}/tests/data/traces/{f}");
                let text = std::fs::read_to_string(path).unwrap();
                text.lines().map(str::to_string).collect::<Vec<_>>()
            })
            .collect()
    }

    /// The lazy parse answers every field as the whole parse does, on every line of the
    /// committed perf and ftrace samples and on lines made to trip it.
    #[test]
    fn a_lazy_payload_gives_every_field_the_whole_parse_gives() {
        let mut lines = sample_lines();
        lines.extend(
            [
                "x 1 [0] 1.5: e: comm=a [b], c:d x= y=2 pid=3 ==> pid=4 z=a=b q",
                "x 1 [0] 1.5: e: lead pid=1 xpid=2 x=pid=3 pid= 5",
                "x 1 [0] 1.5: e: a=1  b=2   c=x y  ==>  d=",
                "x 1 [0] 1.5: e: =1 9a=2 a-b=3 a=\tb c=4",
                "x 1 [0] 1.5: e: ",
                "x 1 [0] 1.5: e: a b=1 c d=2 9a=3 \u{e9}=4 _9=5 a-b=6 pid==7",
            ]
            .map(String::from),
        );
        // Every alignment of a field to the blocks it is looked for in.
        for k in 0..33 {
            let pad = "p".repeat(k);
            lines.push(format!(
                "x 1 [0] 1.5: e: {pad} pid=7 p{pad}=8 {pad}pid=9 pid=1{pad}"
            ));
            lines.push(format!("x 1 [0] 1.5: e: a={pad}  pid=2{pad} q={pad} x"));
            // White space other than spaces, at every place in the blocks it is looked for in.
            for blank in ['\t', '\u{b}', '\u{c}', '\r'] {
                lines.push(format!("x 1 [0] 1.5: e: a={pad}{blank}pid=2 q=3"));
                lines.push(format!("x 1 [0] 1.5: e: a={pad} {blank}pid=2 q=3"));
            }
        }
        let names = [
            "comm",
            "pid",
            "prev_pid",
            "next_pid",
            "prev_state",
            "next_comm",
            "prio",
            "x",
            "y",
            "z",
            "q",
            "a",
            "b",
            "c",
            "d",
            "xpid",
            "9a",
            "a-b",
            "common_pid",
            "common_comm",
            "target_cpu",
            "missing",
            // names that are no field's, though `NAME=` is written in a line above
            "a b",
            "c d",
            "x=pid",
            "z=a",
            "pid=",
            "\u{e9}",
            "",
            "_9",
        ];
        for line in &lines {
            let (mut whole, mut lazy) = (Event::default(), Event::default());
            let p = parse(line, &mut whole);
            assert_eq!(parse_lazy(line, &mut lazy, false), p, "{line}");
            // A line its reader found no tab, \r or \x0c in (`Line::Plain`) is not searched.
            let mut plain = Event::default();
            let no_blanks = no_other_blanks(line.as_bytes());
            if no_blanks {
                assert_eq!(parse_lazy(line, &mut plain, true), p, "{line}");
            }
            for name in names {
                assert_eq!(
                    lazy.field(line, name),
                    whole.field(line, name),
                    "{name} in {line}"
                );
                if no_blanks {
                    assert_eq!(plain.field(line, name), whole.field(line, name), "{name}");
                }
            }
        }
    }

    /// Without the prefix's fields, the stamp is found at the line's first `:`; with them, token
    /// by token. Both find the same stamp, name and payload, on every line of the committed perf
    /// and ftrace samples and on lines made to trip the first.
    #[test]
    fn the_stamp_at_the_first_colon_is_the_one_the_token_search_finds() {
        let mut lines = sample_lines();
        lines.extend(
            [
                "kworker/0:1 7 [000] 1.5: e: a=1",
                "kworker/0:1 7 [000] 1.5: e:",
                "x 1.5:e: a=1 2.5: f: b=2",
                "x\t1.5:\te: a=1",
                "x \x0c1.5: e: a=1",
                "x\x0c 1.5: e: a=1",
                "1.5: e: a=1",
                "  1.5: e: a=1",
                "x 1.5:",
                "x 1.5: ",
                "x 15: 1.5: e: a=1",
                "x 1.5.5: 2.5: e: a=1",
                "x a1.5: 2.5: e: a=1",
                "x 1.: 2.5: e: a=1",
                "x .5: 2.5: e:",
                "x 99999999999999999999.5: e: a=1",
                "x:y 1.5: e: a=1",
                "no colon at all",
            ]
            .map(String::from),
        );
        for line in &lines {
            let (mut searched, mut at_colon) = (Event::default(), Event::default());
            let p = parse_lazy(line, &mut searched, false);
            assert_eq!(
                parse_lazy_unprefixed(line, &mut at_colon, false),
                p,
                "{line}"
            );
            assert_eq!(at_colon.ts_ns, searched.ts_ns, "{line}");
            assert_eq!(at_colon.name, searched.name, "{line}");
            assert_eq!(at_colon.lazy_payload, searched.lazy_payload, "{line}");
            assert_eq!(at_colon.fields, searched.fields, "{line}");
        }
    }

    /// Tokens around a stamp's length, every byte of them varied, at every place in a line up
    /// to its end (where a block is read from a copy).
    #[test]
    fn a_stamp_read_as_a_block_is_what_the_byte_loop_says() {
        let bases = [
            "13760.296300641:",
            "1.5:",
            "12345678901234.5:",
            "1234567890123456.5:",
        ];
        let alphabet = [b'0', b'7', b'.', b':', b' ', b'a', b'-', 0xc3];
        let mut tokens: Vec<Vec<u8>> = Vec::new();
        for base in bases {
            let base = base.as_bytes();
            tokens.push(base.to_vec());
            for at in 0..base.len() {
                for &c in &alphabet {
                    let mut t = base.to_vec();
                    t[at] = c;
                    tokens.push(t);
                }
            }
            for cut in 1..base.len() {
                tokens.push(base[cut..].to_vec());
                tokens.push(base[..cut].to_vec());
            }
        }
        let (mut checked, mut stamps) = (0, 0);
        for t in &tokens {
            for pad in [0, 1, 5, 17] {
                for after in [0, 3, 16] {
                    let mut line = vec![b'x'; pad];
                    line.extend_from_slice(t);
                    line.extend(std::iter::repeat_n(b'9', after));
                    let (a, e) = (pad, pad + t.len());
                    let want = is_timestamp(t);
                    assert_eq!(
                        is_timestamp_at(&line, a, e),
                        want,
                        "{:?}",
                        String::from_utf8_lossy(t)
                    );
                    checked += 1;
                    stamps += usize::from(want);
                }
            }
        }
        assert!(checked > 2_000 && stamps > 50, "{checked} {stamps}");
    }

    #[test]
    fn white_space_skipped_by_blocks_ends_where_the_byte_loop_ends() {
        let whites = [b' ', b'\t', b'\n', 0x0c, b'\r'];
        for len in 0..40 {
            for k in 0..=len {
                for &w in &whites {
                    for last in [b'x', 0x0b, 0x00, b' '] {
                        // `k` white bytes (of the five kinds, in turn), then one other byte
                        let mut b: Vec<u8> = (0..k).map(|i| whites[(i + w as usize) % 5]).collect();
                        b.push(last);
                        b.truncate(len);
                        for from in 0..=b.len() {
                            let loop_end = (from..b.len())
                                .find(|&i| !b[i].is_ascii_whitespace())
                                .unwrap_or(b.len());
                            assert_eq!(white_end(&b, from), loop_end, "{b:?} from {from}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn the_last_blank_before_a_place_is_where_memrchr_finds_it() {
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let len = (rng % 48) as usize + 1;
            let b: Vec<u8> = (0..len)
                .map(|i| match (rng >> (i % 60)) % 11 {
                    0 => b' ',
                    1 => b'\t',
                    _ => b'a',
                })
                .collect();
            let to = (rng >> 8) as usize % len;
            let from = (rng >> 16) as usize % (to + 1);
            let want = memchr::memrchr2(b' ', b'\t', &b[from..to]).map(|p| from + p);
            assert_eq!(last_blank_in(&b, from, to), want, "{b:?} {from}..{to}");
        }
    }

    #[test]
    fn comments_and_blank_lines_are_skipped_and_garbage_is_malformed() {
        let mut ev = Event::default();
        assert_eq!(parse("# tracer: nop", &mut ev), Parsed::Skip);
        assert_eq!(parse("   ", &mut ev), Parsed::Skip);
        assert!(matches!(
            parse("hello world", &mut ev),
            Parsed::Malformed(_)
        ));
        assert!(matches!(parse("x 1.5:", &mut ev), Parsed::Malformed(_)));
        assert!(matches!(
            parse("x 99999999999999999999.5: ev: a=1", &mut ev),
            Parsed::Malformed(_)
        ));
    }

    #[test]
    fn frames_of_call_stacks_are_skipped_and_lines_merely_like_them_are_malformed() {
        let mut ev = Event::default();
        for frame in [
            // perf script of `perf record -g`
            "\tffffffff813aa3e5 ttwu_do_activate+0x175 ([kernel.kallsyms])",
            "\t    558cacdf6be0 [unknown] ([unknown])",
            "\t    7f3d std::vector<int>::push_back+0x12 (/usr/bin/x)",
            // tracefs' and trace-cmd's `stacktrace` and `userstacktrace` options
            " => trace_event_raw_event_sched_switch",
            " => <00007f3d8a0e2f37>",
            "            bash-13381   [000] d..2. 76325.468734: <stack trace>",
            "            bash-13381   [000] d..2. 76325.468734: <user stack trace>",
        ] {
            assert_eq!(parse(frame, &mut ev), Parsed::Skip, "{frame:?}");
        }
        for other in [
            "\tnot an address ([kernel.kallsyms])",
            "    ffffffff813aa3e5 ttwu_do_activate+0x175 ([kernel.kallsyms])",
            " =>",
            " ==> trace_event_raw_event_sched_switch",
            "            bash-13381   [000] d..2. 76325.468734: <stack",
        ] {
            assert!(
                matches!(parse(other, &mut ev), Parsed::Malformed(_)),
                "{other:?}"
            );
        }
    }
}
