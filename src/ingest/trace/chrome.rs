//! Chrome Trace Event JSON (what Chrome, Perfetto's JSON export, and many tools write):
//! `{"traceEvents": [...]}` or a bare array, read as a stream of elements so that a file of
//! any size takes memory for one element at a time (and a truncated file, which the format
//! allows, keeps every complete element).
//!
//! Spans the trace holds itself are taken as the Trace Event Format defines them:
//! - `X` (complete: `ts` + `dur`);
//! - `B`/`E`: a stack per `pid`/`tid`, an `E` closes the innermost `B`;
//! - nestable async `b`/`e`: events of one async *tree* share (`cat`, `scope`, id), where the
//!   id is `id2.local` (scoped to the process: Chromium writes it on almost every async
//!   event), `id2.global` or a plain `id` (both global). Within a tree an `e` closes the
//!   innermost open `b` of its name, so that spans of one name nest and concurrent trees of
//!   one name never mix;
//! - legacy async `S`/`F` pair by (`cat`, `scope`, id, name); their steps `T`/`p` are counted.
//!
//! Flow events (`s`/`t`/`f`) and instants (`i`/`I`, async `n`) are counted, not paired. Every
//! event that is not a span (instants, flows, counters, ...) is also an [`Event`] for the
//! `--span` rules, with `pid`, `tid`, `cat`, `id`, `ph` and every `args` member as fields.
//! `ts` and `dur` are in microseconds; they become integer nanoseconds exactly when written in
//! decimal. The format lets a file list events out of time order; each thread's and each
//! tree's events are taken in the order of the file, which is their time order in what
//! Chromium writes (checked on its startup traces: `tests/independent/chrome_trace.py` sorts
//! and agrees).

use std::borrow::Cow;

use rustc_hash::FxHashMap;

use super::Event;
use super::json::{self, Invalid};
use super::rules::Pairer;
use crate::span::{Open, OpenSpans, Outcome, SeriesKey, SpanSink};

/// One element of the events array, read in place: strings as text (decoded only when they
/// hold escapes), the others as their raw JSON (missing or `null` members are `None`; members
/// nobody reads are checked and skipped).
#[derive(Debug, Default)]
struct Element<'a> {
    name: Option<Cow<'a, str>>,
    ph: Option<Cow<'a, str>>,
    ts: Option<&'a [u8]>,
    dur: Option<&'a [u8]>,
    pid: Option<&'a [u8]>,
    tid: Option<&'a [u8]>,
    id: Option<&'a [u8]>,
    id2: Option<Id2<'a>>,
    scope: Option<Cow<'a, str>>,
    cat: Option<Cow<'a, str>>,
    args: Option<&'a [u8]>,
}

/// `id2`: an id scoped to the process (`local`) or to the whole trace (`global`), raw.
#[derive(Debug, Default)]
struct Id2<'a> {
    local: Option<&'a [u8]>,
    global: Option<&'a [u8]>,
}

/// Sets `slot` once: a member given twice makes the element invalid (as serde's derive does).
fn once<T>(
    slot: &mut Option<T>,
    seen: &mut u16,
    bit: u16,
    value: Option<T>,
) -> Result<(), Invalid> {
    if *seen & bit != 0 {
        return Err(Invalid);
    }
    *seen |= bit;
    *slot = value;
    Ok(())
}

/// `null` (None) or a string.
fn opt_str(raw: &[u8]) -> Result<Option<Cow<'_, str>>, Invalid> {
    if raw == b"null" {
        return Ok(None);
    }
    json::str_of(raw).ok_or(Invalid)?.map(Some)
}

/// `null` (None) or any value, raw.
fn opt_raw(raw: &[u8]) -> Option<&[u8]> {
    (raw != b"null").then_some(raw)
}

/// `null` (None) or a number, raw.
fn opt_number(raw: &[u8]) -> Result<Option<&[u8]>, Invalid> {
    match raw.first() {
        _ if raw == b"null" => Ok(None),
        Some(b'-' | b'0'..=b'9') => Ok(Some(raw)),
        _ => Err(Invalid),
    }
}

impl<'a> Element<'a> {
    /// Reads an element (`{...}`, checked whole); `Err` when it is not valid JSON or a member
    /// has the wrong type.
    fn parse(b: &'a [u8]) -> Result<Element<'a>, Invalid> {
        let start = json::skip_ws(b, 0);
        let (e, end) = Element::parse_prefix(b, start)?;
        if json::skip_ws(b, end) != b.len() {
            return Err(Invalid);
        }
        Ok(e)
    }

    /// Reads the element that opens at `b[start]`: it and the index past its closing brace.
    fn parse_prefix(b: &'a [u8], start: usize) -> Result<(Element<'a>, usize), Invalid> {
        let mut e = Element::default();
        let mut seen = 0u16;
        let end = json::members(b, start, 0, |k, v| match &*k {
            b"name" => once(&mut e.name, &mut seen, 1, opt_str(v)?),
            b"ph" => once(&mut e.ph, &mut seen, 2, opt_str(v)?),
            b"ts" => once(&mut e.ts, &mut seen, 4, opt_number(v)?),
            b"dur" => once(&mut e.dur, &mut seen, 8, opt_number(v)?),
            b"pid" => once(&mut e.pid, &mut seen, 16, opt_raw(v)),
            b"tid" => once(&mut e.tid, &mut seen, 32, opt_raw(v)),
            b"id" => once(&mut e.id, &mut seen, 64, opt_raw(v)),
            b"id2" => once(&mut e.id2, &mut seen, 128, Id2::parse(v)?),
            b"scope" => once(&mut e.scope, &mut seen, 256, opt_str(v)?),
            b"cat" => once(&mut e.cat, &mut seen, 512, opt_str(v)?),
            b"args" => {
                let args = match v.first() {
                    _ if v == b"null" => None,
                    Some(b'{') => Some(v),
                    _ => return Err(Invalid),
                };
                once(&mut e.args, &mut seen, 1024, args)
            }
            _ => Ok(()),
        })?;
        Ok((e, end))
    }
}

impl<'a> Id2<'a> {
    fn parse(raw: &'a [u8]) -> Result<Option<Id2<'a>>, Invalid> {
        if raw == b"null" {
            return Ok(None);
        }
        let mut id2 = Id2::default();
        let mut seen = 0u16;
        json::members(raw, 0, 1, |k, v| match &*k {
            b"local" => once(&mut id2.local, &mut seen, 1, opt_raw(v)),
            b"global" => once(&mut id2.global, &mut seen, 2, opt_raw(v)),
            _ => Ok(()),
        })?;
        Ok(Some(id2))
    }
}

/// Writes into `key` the async tree an event belongs to: `cat`, `scope` and its id, with the
/// process when the id is local (U+001F between the parts). `false` when it has no id.
fn tree_key(e: &Element, key: &mut String) -> bool {
    let (id, pid) = match (&e.id2, &e.id) {
        (Some(Id2 { local: Some(l), .. }), _) => (*l, Some(text(e.pid))),
        (
            Some(Id2 {
                global: Some(g), ..
            }),
            _,
        ) => (*g, None),
        (_, Some(id)) => (*id, None),
        _ => return false,
    };
    key.clear();
    for part in [
        e.cat.as_deref().unwrap_or(""),
        e.scope.as_deref().unwrap_or(""),
    ] {
        key.push_str(part);
        key.push('\u{1f}');
    }
    key.push_str(if pid.is_some() { "local" } else { "global" });
    key.push('\u{1f}');
    key.push_str(&value_text(id));
    if let Some(pid) = pid {
        key.push('\u{1f}');
        key.push_str(&pid);
    }
    true
}

/// A raw value as text: a string's own text, anything else as serde_json writes it.
fn value_text(raw: &[u8]) -> Cow<'_, str> {
    // The element was checked whole, so this cannot fail; an empty text if it did.
    json::text_of(raw).unwrap_or_default()
}

fn text(v: Option<&[u8]>) -> Cow<'_, str> {
    v.map(value_text).unwrap_or_default()
}

/// Microseconds as written → ns: exact for decimals, rounded otherwise (an exponent, more
/// digits than a `u64` holds).
fn micros(raw: &[u8]) -> Option<u64> {
    super::decimal_bytes_to_ns(raw, 1_000).or_else(|| {
        let v: f64 = std::str::from_utf8(raw).ok()?.parse().ok()?;
        (v >= 0.0 && v.is_finite()).then(|| (v * 1_000.0).round() as u64)
    })
}

/// The key of a thread's `B`/`E` stack, `(pid, tid)` as written, into `key`.
fn thread_key(e: &Element, key: &mut String) {
    use std::fmt::Write;
    let (pid, tid) = (text(e.pid), text(e.tid));
    key.clear();
    let _ = write!(key, "{}:{pid}{tid}", pid.len());
}

/// A `B` (or `b`) event waiting for its `E` (`e`): span, start, group.
type Begun = (usize, u64, crate::span::Group);

/// Where the splitter is in the document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// looking for the events array
    Seek,
    /// inside it, at this depth
    Array(usize),
    /// past it
    Done,
}

/// What a read of Chrome JSON saw.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ChromeStats {
    /// array elements read
    pub elements: u64,
    /// spans the trace held (`X`, `B`/`E`, `b`/`e`, `S`/`F`)
    pub spans: u64,
    /// flow events (`s`, `t`, `f`), counted, not paired
    pub flows: u64,
    /// instant events (`i`, `I`, async `n`), counted, not paired
    pub instants: u64,
    /// legacy async steps (`T`, `p`)
    pub steps: u64,
    /// elements that were not events
    pub malformed: u64,
    /// the first of them (1-based element number)
    pub first_malformed: Option<u64>,
    /// the input ended inside an element
    pub truncated: bool,
    /// no events array was found
    pub no_array: bool,
    /// elements longer than [`MAX_ELEMENT`], skipped unread (also counted malformed)
    pub too_long: u64,
}

/// The longest array element (event) kept to be parsed, as lines are capped at 1 MiB: a
/// longer one is skipped and counted `too_long`, so a 1 GB string costs no more than this.
pub const MAX_ELEMENT: usize = 1 << 20;

/// The longest top-level key remembered (only `traceEvents` is looked for).
const MAX_KEY: usize = 64;

/// A Chrome JSON reader, fed chunk by chunk.
pub struct Chrome {
    mode: Mode,
    depth: usize,
    in_string: bool,
    escape: bool,
    last_key: Vec<u8>,
    key_open: bool,
    /// the part of an element that began in an earlier chunk
    element: Vec<u8>,
    in_element: bool,
    /// brackets open inside the element in progress
    element_depth: usize,
    /// the element in progress passed [`MAX_ELEMENT`]
    oversized: bool,
    at_start: bool,
    /// open `B` events per thread ([`thread_key`])
    stacks: FxHashMap<Box<str>, Vec<Begun>>,
    /// open `b` events per async tree ([`tree_key`])
    trees: FxHashMap<Box<str>, Vec<Begun>>,
    key: String,
    legacy: OpenSpans<(usize, String)>,
    scratch: String,
    ev: Event,
    /// what was seen
    pub stats: ChromeStats,
}

impl Default for Chrome {
    fn default() -> Self {
        Chrome {
            mode: Mode::Seek,
            depth: 0,
            in_string: false,
            escape: false,
            last_key: Vec::new(),
            key_open: false,
            element: Vec::new(),
            in_element: false,
            element_depth: 0,
            oversized: false,
            at_start: true,
            stacks: FxHashMap::default(),
            trees: FxHashMap::default(),
            key: String::new(),
            legacy: OpenSpans::default(),
            scratch: String::new(),
            ev: Event::default(),
            stats: ChromeStats::default(),
        }
    }
}

impl Chrome {
    /// Feeds the next bytes of the document.
    ///
    /// Between the elements of the events array, an element's end is found by a scan that
    /// crosses strings with `memchr` and counts brackets; a whole element in `chunk` is parsed
    /// where it lies, and only one that straddles two chunks is copied. The rest of the
    /// document (before the array) goes byte by byte through [`Chrome::byte`].
    pub fn feed(&mut self, chunk: &[u8], pairer: &mut Pairer, sink: &mut impl SpanSink) {
        let mut i = 0;
        if self.in_element {
            i = self.element_bytes(chunk, 0, 0, pairer, sink);
        }
        while i < chunk.len() {
            match self.mode {
                Mode::Done => return, // nothing after the events array is read
                Mode::Array(d) if self.depth == d + 1 && !self.in_string => {
                    i = json::skip_ws(chunk, i);
                    match chunk.get(i) {
                        Some(b',') => i += 1,
                        Some(b'{') => {
                            // Most elements are whole and valid: read in one pass where they
                            // lie. Any other (cut by the chunk's end, or malformed) is found by
                            // the splitter first.
                            if let Ok((e, end)) = Element::parse_prefix(chunk, i)
                                && end - i <= MAX_ELEMENT
                            {
                                self.take(&e, pairer, sink);
                                i = end;
                                continue;
                            }
                            self.in_element = true;
                            self.element_depth = 1;
                            self.oversized = false;
                            self.depth += 1;
                            i = self.element_bytes(chunk, i, i + 1, pairer, sink);
                        }
                        Some(&c) => {
                            self.byte(c);
                            i += 1;
                        }
                        None => {}
                    }
                }
                _ => {
                    self.byte(chunk[i]);
                    i += 1;
                }
            }
        }
    }

    /// A whole element read where it lay, between two others of the events array.
    fn take(&mut self, e: &Element, pairer: &mut Pairer, sink: &mut impl SpanSink) {
        self.stats.elements += 1;
        let n = self.stats.elements;
        if !self.event(e, n, pairer, sink) {
            self.stats.malformed += 1;
            self.stats.first_malformed.get_or_insert(n);
        }
    }

    /// Whether the document stands between two elements of the events array (outside any
    /// string and element): where [`Chrome::feed`] reads each whole element where it lies,
    /// so that elements read elsewhere ([`Run`]) may be taken instead.
    pub fn between_elements(&self) -> bool {
        matches!(self.mode, Mode::Array(d) if self.depth == d + 1)
            && !self.in_string
            && !self.in_element
    }

    /// Takes the elements of `run` as [`Chrome::feed`] would have read them in its text: only
    /// when the document stands [`Chrome::between_elements`], and the run's text is the next
    /// of the document.
    pub fn take_run(&mut self, run: &Run, pairer: &mut Pairer, sink: &mut impl SpanSink) {
        debug_assert!(self.between_elements());
        for e in run.0.borrow_dependent() {
            self.take(e, pairer, sink);
        }
    }

    /// The element in progress, from `chunk[start..]` (scanning from `from`): parsed when it
    /// ends here, kept (up to [`MAX_ELEMENT`]) when it goes on. Returns where it ended.
    fn element_bytes(
        &mut self,
        chunk: &[u8],
        start: usize,
        from: usize,
        pairer: &mut Pairer,
        sink: &mut impl SpanSink,
    ) -> usize {
        let end = self.element_end(chunk, from);
        let part = &chunk[start..end.unwrap_or(chunk.len())];
        if !self.oversized && self.element.len() + part.len() > MAX_ELEMENT {
            self.oversized = true;
            self.element = Vec::new();
        }
        let Some(end) = end else {
            if !self.oversized {
                self.element.extend_from_slice(part);
            }
            return chunk.len();
        };
        self.in_element = false;
        self.depth -= 1;
        if self.oversized {
            self.stats.elements += 1;
            self.stats.too_long += 1;
            self.stats.malformed += 1;
            self.stats
                .first_malformed
                .get_or_insert(self.stats.elements);
        } else if self.element.is_empty() {
            self.element_done(part, pairer, sink);
        } else {
            let mut element = std::mem::take(&mut self.element);
            element.extend_from_slice(part);
            self.element_done(&element, pairer, sink);
            element.clear();
            self.element = element;
        }
        end
    }

    /// The index past the closing brace of the element in progress, if it is in `b` (from
    /// `i`); the scan's state (brackets, strings, an escape cut by the chunk's end) is kept.
    fn element_end(&mut self, b: &[u8], mut i: usize) -> Option<usize> {
        loop {
            if self.in_string {
                if self.escape {
                    if i >= b.len() {
                        return None;
                    }
                    self.escape = false;
                    i += 1;
                }
                let j = i + memchr::memchr2(b'"', b'\\', b.get(i..)?)?;
                if b[j] == b'\\' {
                    self.escape = true;
                } else {
                    self.in_string = false;
                }
                i = j + 1;
                continue;
            }
            loop {
                match *b.get(i)? {
                    b'"' => {
                        self.in_string = true;
                        i += 1;
                        break;
                    }
                    b'{' | b'[' => self.element_depth += 1,
                    b'}' | b']' => {
                        self.element_depth -= 1;
                        if self.element_depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
    }

    /// One byte of the document outside the events' elements.
    fn byte(&mut self, c: u8) {
        if self.in_string {
            if self.escape {
                self.escape = false;
            } else if c == b'\\' {
                self.escape = true;
            } else if c == b'"' {
                self.in_string = false;
            } else if self.key_open
                && self.mode == Mode::Seek
                && self.depth == 1
                && self.last_key.len() < MAX_KEY
            {
                self.last_key.push(c);
            }
            return;
        }
        match c {
            b'"' => {
                self.in_string = true;
                if self.mode == Mode::Seek && self.depth == 1 {
                    self.last_key.clear();
                    self.key_open = true;
                }
            }
            b'{' | b'[' => self.open(c),
            b'}' | b']' => self.close(c),
            b':' => self.key_open = false,
            c if !c.is_ascii_whitespace() => self.at_start = false,
            _ => {}
        }
    }

    fn open(&mut self, c: u8) {
        if self.mode == Mode::Seek
            && c == b'['
            && (self.at_start || self.last_key == b"traceEvents")
        {
            self.mode = Mode::Array(self.depth);
        }
        self.at_start = false;
        self.key_open = false;
        self.depth += 1;
    }

    fn close(&mut self, c: u8) {
        self.depth = self.depth.saturating_sub(1);
        if let Mode::Array(d) = self.mode
            && c == b']'
            && self.depth == d
        {
            self.mode = Mode::Done;
        }
    }

    fn element_done(&mut self, bytes: &[u8], pairer: &mut Pairer, sink: &mut impl SpanSink) {
        self.stats.elements += 1;
        let n = self.stats.elements;
        let ok = match Element::parse(bytes) {
            Ok(e) => self.event(&e, n, pairer, sink),
            Err(_) => false,
        };
        if !ok {
            self.stats.malformed += 1;
            self.stats.first_malformed.get_or_insert(n);
        }
    }

    /// One element; `false` if it is not a usable event.
    fn event(
        &mut self,
        e: &Element,
        n: u64,
        pairer: &mut Pairer,
        sink: &mut impl SpanSink,
    ) -> bool {
        let (Some(ph), Some(ts)) = (e.ph.as_deref(), e.ts.and_then(micros)) else {
            // Metadata (`M`) carries no time; anything else without one is malformed.
            return e.ph.as_deref() == Some("M");
        };
        let name = e.name.as_deref().unwrap_or_default();
        if pairer.has_rules() {
            pairer.note_name(name);
        }
        let group = |p: &mut Pairer, e: &Element| match p.by() {
            Some(by) => {
                let v = field_of(e, &by);
                p.group_of(&v)
            }
            None => crate::span::Group::All,
        };
        match ph {
            "X" => {
                let Some(dur) = e.dur.and_then(micros) else {
                    return false;
                };
                let series = SeriesKey {
                    span: pairer.span_id(name),
                    side: None,
                    group: group(pairer, e),
                };
                sink.sample(&series, ts, dur);
                self.stats.spans += 1;
            }
            "B" => {
                let span = pairer.span_id(name);
                let g = group(pairer, e);
                thread_key(e, &mut self.key);
                match self.stacks.get_mut(self.key.as_str()) {
                    Some(stack) => stack.push((span, ts, g)),
                    None => {
                        self.stacks
                            .insert(self.key.as_str().into(), vec![(span, ts, g)]);
                    }
                }
            }
            "E" => {
                thread_key(e, &mut self.key);
                match self.stacks.get_mut(self.key.as_str()).and_then(Vec::pop) {
                    Some((span, start, group)) => {
                        let series = SeriesKey {
                            span,
                            side: None,
                            group,
                        };
                        match ts.checked_sub(start) {
                            Some(d) => {
                                sink.sample(&series, start, d);
                                self.stats.spans += 1;
                            }
                            None => sink.outcome(&series, Outcome::Backwards),
                        }
                    }
                    None => {
                        let series = SeriesKey {
                            span: pairer.span_id(name),
                            side: None,
                            group: crate::span::Group::All,
                        };
                        sink.outcome(&series, Outcome::OrphanEnd);
                    }
                }
            }
            "b" => {
                if !tree_key(e, &mut self.key) {
                    return false;
                }
                let begun = (pairer.span_id(name), ts, group(pairer, e));
                match self.trees.get_mut(self.key.as_str()) {
                    Some(stack) => stack.push(begun),
                    None => {
                        self.trees.insert(self.key.as_str().into(), vec![begun]);
                    }
                }
            }
            "e" => {
                if !tree_key(e, &mut self.key) {
                    return false;
                }
                let tree = std::mem::take(&mut self.key);
                self.async_end(&tree, e.name.as_deref(), ts, pairer, sink);
                self.key = tree;
            }
            "S" | "F" => {
                if !tree_key(e, &mut self.key) {
                    return false;
                }
                let span = pairer.span_id(name);
                let key = (span, self.key.clone());
                if ph == "S" {
                    let series = SeriesKey {
                        span,
                        side: None,
                        group: group(pairer, e),
                    };
                    let open = Open {
                        start_ns: ts,
                        series,
                    };
                    self.legacy.start(key, open, Outcome::Superseded, sink);
                } else if self.legacy.end(&key, ts, sink) {
                    self.stats.spans += 1;
                } else {
                    sink.outcome(&all(span), Outcome::OrphanEnd);
                }
            }
            _ => {
                match ph {
                    "s" | "t" | "f" => self.stats.flows += 1,
                    "i" | "I" | "n" => self.stats.instants += 1,
                    "T" | "p" => self.stats.steps += 1,
                    _ => {}
                }
                if !pairer.has_rules() {
                    // Only a rule reads an instant's fields.
                    return true;
                }
                self.instant(e, ph, ts);
                let (scratch, ev) = (
                    std::mem::take(&mut self.scratch),
                    std::mem::take(&mut self.ev),
                );
                pairer.event(&scratch, &ev, n, sink);
                self.scratch = scratch;
                self.ev = ev;
            }
        }
        true
    }

    /// An async `e` in `tree`: closes the innermost open `b` named `name` (any, when the `e`
    /// has no name), or is an orphan.
    fn async_end(
        &mut self,
        tree: &str,
        name: Option<&str>,
        ts: u64,
        pairer: &mut Pairer,
        sink: &mut impl SpanSink,
    ) {
        let span = name.map(|n| pairer.span_id(n));
        let stack = self.trees.get_mut(tree);
        let found = stack.and_then(|st| {
            let at = st.iter().rposition(|b| span.is_none_or(|s| b.0 == s))?;
            let begun = st.remove(at);
            Some((begun, st.is_empty()))
        });
        let Some(((span, start, group), empty)) = found else {
            if let Some(span) = span {
                sink.outcome(&all(span), Outcome::OrphanEnd);
            }
            return;
        };
        if empty {
            // Memory follows what is in flight: a closed tree is forgotten.
            self.trees.remove(tree);
        }
        let series = SeriesKey {
            span,
            side: None,
            group,
        };
        match ts.checked_sub(start) {
            Some(d) => {
                sink.sample(&series, start, d);
                self.stats.spans += 1;
            }
            None => sink.outcome(&series, Outcome::Backwards),
        }
    }

    /// Writes an instant event into the scratch line and event.
    fn instant(&mut self, e: &Element, ph: &str, ts: u64) {
        self.ev.clear();
        self.scratch.clear();
        self.ev.ts_ns = ts;
        let push = |k: &str, v: &str, s: &mut String, ev: &mut Event, is_name: bool| {
            let kr = s.len()..s.len() + k.len();
            s.push_str(k);
            s.push('\t');
            let vr = s.len()..s.len() + v.len();
            s.push_str(v);
            s.push('\t');
            if is_name {
                ev.name = vr.clone();
            }
            ev.fields.push((kr, vr));
        };
        let name = e.name.as_deref().unwrap_or("");
        push("name", name, &mut self.scratch, &mut self.ev, true);
        push("ph", ph, &mut self.scratch, &mut self.ev, false);
        for (k, v) in [("pid", e.pid), ("tid", e.tid), ("id", e.id)] {
            if v.is_some() {
                push(k, &text(v), &mut self.scratch, &mut self.ev, false);
            }
        }
        if e.id.is_none()
            && let Some(Id2 { local, global }) = &e.id2
            && let Some(id) = local.as_ref().or(global.as_ref())
        {
            push(
                "id",
                &value_text(id),
                &mut self.scratch,
                &mut self.ev,
                false,
            );
        }
        if let Some(cat) = &e.cat {
            push("cat", cat, &mut self.scratch, &mut self.ev, false);
        }
        for (k, v) in &args_of(e) {
            let v = match v {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            push(k, &v, &mut self.scratch, &mut self.ev, false);
        }
    }

    /// The input ended: counts what is left open.
    pub fn finish(&mut self, sink: &mut impl SpanSink) {
        if self.in_element {
            self.stats.truncated = true;
        }
        if self.mode == Mode::Seek {
            self.stats.no_array = true;
        }
        for (_, stack) in self.stacks.drain() {
            for (span, _, group) in stack {
                let series = SeriesKey {
                    span,
                    side: None,
                    group,
                };
                sink.outcome(&series, Outcome::Unmatched);
            }
        }
        for (_, stack) in self.trees.drain() {
            for (span, _, group) in stack {
                let series = SeriesKey {
                    span,
                    side: None,
                    group,
                };
                sink.outcome(&series, Outcome::Unmatched);
            }
        }
        self.legacy.finish(sink);
    }
}

/// The elements of a chunk read alone, where it is a run of whole elements of the events
/// array (`,` and white space between them): what a worker of the parallel reader makes of a
/// chunk, for [`Chrome::take_run`]. The elements borrow the chunk's text, which the run owns
/// (where a worker wrote each element's members as offsets and the calling thread made the
/// element again from them, two threads did far more work than one).
pub struct Run(RunCell);

self_cell::self_cell!(
    struct RunCell {
        owner: String,
        #[covariant]
        dependent: Elements,
    }
);

type Elements<'a> = Vec<Element<'a>>;

/// The memory of a run's elements, taken, for the next run: their vector, emptied (the text's
/// buffer goes back to the reader on its own).
#[derive(Default)]
pub struct Spent {
    elements: Vec<Element<'static>>,
}

impl Run {
    /// The elements of `text` read as a run of whole ones; `Err(text)` when it is not one (the
    /// document's head or end, an element cut by the chunk or over [`MAX_ELEMENT`], a
    /// malformed one): the chunk is then fed to the serial reader, which reads it right.
    /// What [`Chrome::feed`] does between elements, done without knowing where the document
    /// stands.
    ///
    /// Memory: a run of elements shorter than [`SHORTEST_RUN_ELEMENT`] bytes on average is
    /// not one either (an element is 232 bytes: a chunk of `{}` lines would take 77 times its
    /// size), so a run's elements take at most 2.5 times the chunk's bytes.
    pub fn read(text: String) -> Result<Run, String> {
        Run::read_into(text, Spent::default())
    }

    /// [`Run::read`] into the memory of `spent`, a run already taken.
    pub fn read_into(text: String, spent: Spent) -> Result<Run, String> {
        let cell = RunCell::try_new_or_recover(text, |text| {
            elements_of(text.as_bytes(), spent.elements).ok_or(())
        });
        match cell {
            Ok(cell) => Ok(Run(cell)),
            Err((text, ())) => Err(text),
        }
    }

    /// The run's text.
    pub fn text(&self) -> &str {
        self.0.borrow_owner()
    }

    /// The text, for the next read, and the memory of the elements, for the next run.
    pub fn into_parts(mut self) -> (String, Spent) {
        let elements = self.0.with_dependent_mut(|_, elements| {
            elements.clear();
            // An empty vector of elements of any lifetime is one of any other: collected in
            // place, it keeps its memory.
            std::mem::take(elements)
                .into_iter()
                .map(|_| unreachable!("the vector was emptied"))
                .collect()
        });
        (self.0.into_owner(), Spent { elements })
    }
}

/// The elements of `b` read as a run of whole ones ([`Run::read`]), into `elements`' memory.
fn elements_of<'t>(b: &'t [u8], elements: Vec<Element<'static>>) -> Option<Vec<Element<'t>>> {
    let mut run: Vec<Element<'t>> = elements;
    run.clear();
    let most = b.len() / SHORTEST_RUN_ELEMENT + 16;
    let mut i = 0;
    loop {
        i = json::skip_ws(b, i);
        match b.get(i) {
            None => return Some(run),
            Some(b',') => i += 1,
            Some(b'{') => {
                let (e, end) = Element::parse_prefix(b, i).ok()?;
                if end - i > MAX_ELEMENT || run.len() >= most {
                    return None;
                }
                run.push(e);
                i = end;
            }
            Some(_) => return None,
        }
    }
}

/// The average element length below which a chunk is read serially ([`Run::read`]): the
/// committed Chromium traces and the 100 MB benchmark trace average 233 to 269 bytes a line.
pub const SHORTEST_RUN_ELEMENT: usize = 96;

/// Series `span` without a group (an orphan end has no start to take one from).
fn all(span: usize) -> SeriesKey {
    SeriesKey {
        span,
        side: None,
        group: crate::span::Group::All,
    }
}

/// The members of `args`, in the order serde_json's map keeps them (by key; the last of a key
/// given twice).
fn args_of(e: &Element) -> serde_json::Map<String, serde_json::Value> {
    e.args
        .and_then(|raw| serde_json::from_slice(raw).ok())
        .unwrap_or_default()
}

fn field_of<'e>(e: &Element<'e>, by: &str) -> Cow<'e, str> {
    match by {
        "pid" => text(e.pid),
        "tid" => text(e.tid),
        "cat" => e.cat.clone().unwrap_or_default(),
        "id" => text(e.id),
        "name" => e.name.clone().unwrap_or_default(),
        other => {
            let mut found = None;
            if let Some(raw) = e.args {
                // The last member of that name, as a map keeps it.
                let _ = json::members(raw, 0, 1, |k, v| {
                    if *k == *other.as_bytes() {
                        found = Some(v);
                    }
                    Ok(())
                });
            }
            found.map_or(Cow::Borrowed("?"), value_text)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::span::Kept;

    type Read = (Vec<(String, u64, u64)>, ChromeStats, Vec<(String, Outcome)>);

    /// `(span name, start ns, latency ns)` of each span, and the outcomes, of a document.
    fn spans_of(doc: &str) -> Read {
        struct Outcomes(Vec<(usize, Outcome)>);
        impl SpanSink for Outcomes {
            fn sample(&mut self, _: &SeriesKey, _: u64, _: u64) {}
            fn outcome(&mut self, key: &SeriesKey, outcome: Outcome) {
                self.0.push((key.span, outcome));
            }
        }
        let mut pairer = Pairer::new(
            Vec::new(),
            Vec::new(),
            None,
            super::super::rules::Repeat::KeepLast,
        );
        let mut sink = (Kept::new(1000), Outcomes(Vec::new()));
        let mut chrome = Chrome::default();
        chrome.feed(doc.as_bytes(), &mut pairer, &mut sink);
        chrome.finish(&mut sink);
        let names = pairer.span_names().borrow().clone();
        let spans = sink
            .0
            .spans
            .iter()
            .map(|s| (names[s.key.span].clone(), s.start_ns, s.latency_ns))
            .collect();
        let outcomes = sink
            .1
            .0
            .iter()
            .map(|&(s, o)| (names[s].clone(), o))
            .collect();
        (spans, chrome.stats, outcomes)
    }

    /// [`spans_of`] with the document fed in chunks of `size` bytes.
    fn spans_of_chunked(doc: &[u8], size: usize) -> (Vec<(usize, u64, u64)>, ChromeStats) {
        let mut pairer = Pairer::new(
            Vec::new(),
            Vec::new(),
            None,
            super::super::rules::Repeat::KeepLast,
        );
        let mut sink = Kept::new(1_000_000);
        let mut chrome = Chrome::default();
        for chunk in doc.chunks(size) {
            chrome.feed(chunk, &mut pairer, &mut sink);
        }
        chrome.finish(&mut sink);
        let spans = sink
            .spans
            .iter()
            .map(|s| (s.key.span, s.start_ns, s.latency_ns))
            .collect();
        (spans, chrome.stats)
    }

    /// An element cut by a chunk's end (copied, then parsed) reads as one parsed where it lies,
    /// at every cut: the committed Chromium trace, whole and in chunks of 1 to 4096 bytes,
    /// and a document with escapes, an element too long and a malformed one.
    /// The parallel reader's path is taken where it may be (else it would fall back to the
    /// serial reader everywhere, and only its speed would show it): a chunk of Chromium's
    /// one-element-a-line text is a run, read as `feed` reads it, once the document stands
    /// between elements; a chunk that starts inside an element or holds the head is not.
    #[test]
    fn a_chunk_of_whole_elements_is_a_run_taken_between_elements() {
        let head = "{\"traceEvents\":[\n";
        let lines = "{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":2},\n{\"ph\":\"i\",\"name\":\"b\",\"ts\":5},\n";
        let mut pairer = Pairer::new(
            Vec::new(),
            Vec::new(),
            None,
            super::super::rules::Repeat::KeepLast,
        );
        let (mut by_run, mut by_feed) = (Chrome::default(), Chrome::default());
        let mut sink = Kept::new(10);
        let mut fed = Kept::new(10);
        assert!(!by_run.between_elements());
        by_run.feed(head.as_bytes(), &mut pairer, &mut sink);
        by_feed.feed(head.as_bytes(), &mut pairer, &mut fed);
        assert!(by_run.between_elements());
        let run = Run::read(lines.to_string()).expect("a run of whole elements");
        assert_eq!(run.0.borrow_dependent().len(), 2);
        // what the memory of a run is said to be: at most 2.5 times its text's bytes
        assert!(std::mem::size_of::<Element>() * 2 <= SHORTEST_RUN_ELEMENT * 5);
        by_run.take_run(&run, &mut pairer, &mut sink);
        // the text and the memory of the elements go back for the next run
        let (text, spent) = run.into_parts();
        assert_eq!((text.as_str(), spent.elements.len()), (lines, 0));
        assert!(spent.elements.capacity() >= 2);
        let again = Run::read_into(text, spent).expect("the same run");
        assert_eq!(again.0.borrow_dependent().len(), 2);
        by_feed.feed(lines.as_bytes(), &mut pairer, &mut fed);
        assert_eq!(by_run.stats, by_feed.stats);
        assert_eq!(sink.spans, fed.spans);
        assert_eq!(sink.spans.len(), 1);
        // the head, an element cut by the chunk, the array's end: not runs
        for not_a_run in [head, "{\"ph\":\"X\",\n", "\"ts\":1},\n", "]}\n"] {
            assert_eq!(
                Run::read(not_a_run.to_string()).err().as_deref(),
                Some(not_a_run)
            );
        }
    }

    #[test]
    fn elements_cut_anywhere_by_chunks_read_as_whole_ones() {
        let root = env!("CARGO_MANIFEST_DIR");
        let trace = std::fs::read(format!("{root}/tests/data/traces/chromium-async.json")).unwrap();
        let whole = spans_of_chunked(&trace, trace.len());
        assert!(whole.0.len() > 1000, "{}", whole.0.len());
        for size in [1, 2, 3, 7, 64, 4096] {
            assert_eq!(spans_of_chunked(&trace, size), whole, "chunks of {size}");
        }
        let long = format!(
            r#"{{"ph":"X","name":"big","ts":1,"dur":1,"args":{{"s":"{}"}}}}"#,
            "x".repeat(MAX_ELEMENT)
        );
        let doc = format!(
            r#"{{"traceEvents":[{{"ph":"X","name":"a\"}}{{[","ts":1,"dur":2}},{long},{{"ph":"X","ts":1,"dur":}},{{"ph":"X","name":"b\\","ts":3.5,"dur":1}}]}}"#
        );
        let whole = spans_of_chunked(doc.as_bytes(), doc.len());
        assert_eq!(whole.0, [(0, 1_000, 2_000), (1, 3_500, 1_000)]);
        assert_eq!(
            (whole.1.elements, whole.1.too_long, whole.1.malformed),
            (4, 1, 2)
        );
        for size in [1, 2, 5, 13, 1 << 16] {
            assert_eq!(
                spans_of_chunked(doc.as_bytes(), size),
                whole,
                "chunks of {size}"
            );
        }
    }

    fn span(name: &str, start: u64, latency: u64) -> (String, u64, u64) {
        (name.to_string(), start, latency)
    }

    #[test]
    fn async_spans_of_one_name_in_different_processes_do_not_mix() {
        // Two processes, each with local id 0x1: two trees, two spans.
        let doc = r#"[
            {"ph":"b","name":"load","cat":"c","id2":{"local":"0x1"},"pid":1,"tid":1,"ts":10},
            {"ph":"b","name":"load","cat":"c","id2":{"local":"0x1"},"pid":2,"tid":2,"ts":20},
            {"ph":"e","name":"load","cat":"c","id2":{"local":"0x1"},"pid":1,"tid":1,"ts":100},
            {"ph":"e","name":"load","cat":"c","id2":{"local":"0x1"},"pid":2,"tid":2,"ts":21}
        ]"#;
        let (spans, stats, outcomes) = spans_of(doc);
        assert_eq!(
            spans,
            [span("load", 10_000, 90_000), span("load", 20_000, 1_000)]
        );
        assert_eq!(stats.spans, 2);
        assert!(outcomes.is_empty(), "{outcomes:?}");
    }

    #[test]
    fn a_global_id_is_one_tree_across_processes_and_scope_and_cat_split_trees() {
        let doc = r#"[
            {"ph":"b","name":"ipc","cat":"c","id2":{"global":"0x7"},"pid":1,"ts":1},
            {"ph":"b","name":"ipc","cat":"d","id2":{"global":"0x7"},"pid":1,"ts":2},
            {"ph":"b","name":"ipc","cat":"c","scope":"s","id2":{"global":"0x7"},"pid":1,"ts":3},
            {"ph":"e","name":"ipc","cat":"c","id2":{"global":"0x7"},"pid":2,"ts":5},
            {"ph":"e","name":"ipc","cat":"c","scope":"s","id2":{"global":"0x7"},"pid":2,"ts":13},
            {"ph":"e","name":"ipc","cat":"d","id":"0x7","pid":9,"ts":102}
        ]"#;
        let (spans, _, outcomes) = spans_of(doc);
        assert_eq!(
            spans,
            [
                span("ipc", 1_000, 4_000),
                span("ipc", 3_000, 10_000),
                span("ipc", 2_000, 100_000)
            ]
        );
        assert!(outcomes.is_empty(), "{outcomes:?}");
    }

    #[test]
    fn nested_async_spans_of_one_name_close_as_a_stack() {
        let doc = r#"[
            {"ph":"b","name":"a","cat":"c","id":1,"ts":0},
            {"ph":"b","name":"a","cat":"c","id":1,"ts":10},
            {"ph":"b","name":"inner","cat":"c","id":1,"ts":11},
            {"ph":"e","name":"a","cat":"c","id":1,"ts":15},
            {"ph":"e","name":"inner","cat":"c","id":1,"ts":16},
            {"ph":"e","name":"a","cat":"c","id":1,"ts":40},
            {"ph":"e","name":"a","cat":"c","id":1,"ts":41},
            {"ph":"b","name":"left","cat":"c","id":1,"ts":50}
        ]"#;
        let (spans, _, outcomes) = spans_of(doc);
        assert_eq!(
            spans,
            [
                span("a", 10_000, 5_000),
                span("inner", 11_000, 5_000),
                span("a", 0, 40_000)
            ]
        );
        assert_eq!(
            outcomes,
            [
                ("a".to_string(), Outcome::OrphanEnd),
                ("left".to_string(), Outcome::Unmatched)
            ]
        );
    }

    #[test]
    fn legacy_async_pairs_and_flows_and_instants_are_counted() {
        let doc = r#"{"traceEvents":[
            {"ph":"S","name":"old","cat":"c","id":"0x1","ts":1},
            {"ph":"T","name":"old","cat":"c","id":"0x1","ts":2,"args":{"step":"x"}},
            {"ph":"F","name":"old","cat":"c","id":"0x1","ts":7},
            {"ph":"F","name":"old","cat":"c","id":"0x2","ts":8},
            {"ph":"s","name":"flow","cat":"c","id":3,"ts":1},
            {"ph":"f","name":"flow","cat":"c","id":3,"ts":2,"bp":"e"},
            {"ph":"n","name":"mark","cat":"c","id2":{"local":"0x1"},"ts":3},
            {"ph":"I","name":"now","ts":3,"s":"t"},
            {"ph":"b","name":"noid","ts":3}
        ]}"#;
        let (spans, stats, outcomes) = spans_of(doc);
        assert_eq!(spans, [span("old", 1_000, 6_000)]);
        assert_eq!((stats.flows, stats.instants, stats.steps), (2, 2, 1));
        assert_eq!(outcomes, [("old".to_string(), Outcome::OrphanEnd)]);
        // An async begin without an id is not an event.
        assert_eq!((stats.malformed, stats.first_malformed), (1, Some(9)));
    }
}
