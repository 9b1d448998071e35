//! Chrome Trace Event JSON (what Chrome, Perfetto's JSON export, and many tools write):
//! `{"traceEvents": [...]}` or a bare array, read as a stream of elements so that a file of
//! any size takes memory for one element at a time (and a truncated file, which the format
//! allows, keeps every complete element).
//!
//! Spans the trace holds itself are taken as they are: `X` (complete: `ts` + `dur`), `B`/`E`
//! (a stack per `pid`/`tid`), async `b`/`e` (paired by `cat`, `id` and name). Every other
//! event (instants `i`/`I`/`n`, counters, ...) is an [`Event`] for the `--span` rules, with
//! `pid`, `tid`, `cat`, `id`, `ph` and every `args` member as fields. `ts` and `dur` are in
//! microseconds; they become integer nanoseconds exactly when written in decimal.

use rustc_hash::FxHashMap;
use serde::Deserialize;
use serde_json::Value;

use super::Event;
use super::rules::Pairer;
use crate::span::{Open, OpenSpans, Outcome, SeriesKey, SpanSink};

/// One element of the events array (missing members are `None`; others are ignored).
#[derive(Debug, Default, Deserialize)]
struct Element {
    name: Option<String>,
    ph: Option<String>,
    ts: Option<serde_json::Number>,
    dur: Option<serde_json::Number>,
    pid: Option<Value>,
    tid: Option<Value>,
    id: Option<Value>,
    cat: Option<String>,
    args: Option<serde_json::Map<String, Value>>,
}

fn text(v: &Option<Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

/// Microseconds as written → ns: exact for decimals, rounded otherwise.
fn micros(n: &serde_json::Number) -> Option<u64> {
    let t = n.to_string();
    super::decimal_to_ns(&t, 1_000).or_else(|| {
        let v = n.as_f64()?;
        (v >= 0.0 && v.is_finite()).then(|| (v * 1_000.0).round() as u64)
    })
}

/// `(pid, tid)` as written.
type Thread = (String, String);
/// A `B` event waiting for its `E`: span, start, group.
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
    /// spans the trace held (`X`, `B`/`E`, `b`/`e`)
    pub spans: u64,
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
    element: Vec<u8>,
    in_element: bool,
    /// the element in progress passed [`MAX_ELEMENT`]
    oversized: bool,
    at_start: bool,
    stacks: FxHashMap<Thread, Vec<Begun>>,
    asyncs: OpenSpans<(usize, String)>,
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
            oversized: false,
            at_start: true,
            stacks: FxHashMap::default(),
            asyncs: OpenSpans::default(),
            scratch: String::new(),
            ev: Event::default(),
            stats: ChromeStats::default(),
        }
    }
}

impl Chrome {
    /// Feeds the next bytes of the document.
    pub fn feed(&mut self, chunk: &[u8], pairer: &mut Pairer, sink: &mut impl SpanSink) {
        for &c in chunk {
            self.byte(c, pairer, sink);
        }
    }

    fn byte(&mut self, c: u8, pairer: &mut Pairer, sink: &mut impl SpanSink) {
        if self.in_element && !self.oversized {
            if self.element.len() < MAX_ELEMENT {
                self.element.push(c);
            } else {
                self.oversized = true;
                self.element = Vec::new();
            }
        }
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
            b'}' | b']' => self.close(c, pairer, sink),
            b':' => self.key_open = false,
            c if !c.is_ascii_whitespace() => self.at_start = false,
            _ => {}
        }
    }

    fn open(&mut self, c: u8) {
        match self.mode {
            Mode::Seek if c == b'[' && (self.at_start || self.last_key == b"traceEvents") => {
                self.mode = Mode::Array(self.depth);
            }
            Mode::Array(d) if c == b'{' && self.depth == d + 1 => {
                self.in_element = true;
                self.oversized = false;
                self.element.clear();
                self.element.push(c);
            }
            _ => {}
        }
        self.at_start = false;
        self.key_open = false;
        self.depth += 1;
    }

    fn close(&mut self, c: u8, pairer: &mut Pairer, sink: &mut impl SpanSink) {
        self.depth = self.depth.saturating_sub(1);
        match self.mode {
            Mode::Array(d) if c == b'}' && self.depth == d + 1 && self.in_element => {
                self.in_element = false;
                if self.oversized {
                    self.stats.elements += 1;
                    self.stats.too_long += 1;
                    self.stats.malformed += 1;
                    self.stats
                        .first_malformed
                        .get_or_insert(self.stats.elements);
                    return;
                }
                let element = std::mem::take(&mut self.element);
                self.element_done(&element, pairer, sink);
                self.element = element;
            }
            Mode::Array(d) if c == b']' && self.depth == d => self.mode = Mode::Done,
            _ => {}
        }
    }

    fn element_done(&mut self, bytes: &[u8], pairer: &mut Pairer, sink: &mut impl SpanSink) {
        self.stats.elements += 1;
        let n = self.stats.elements;
        let parsed: Result<Element, _> = serde_json::from_slice(bytes);
        let ok = match parsed {
            Ok(e) => self.event(e, n, pairer, sink),
            Err(_) => false,
        };
        if !ok {
            self.stats.malformed += 1;
            self.stats.first_malformed.get_or_insert(n);
        }
    }

    /// One element; `false` if it is not a usable event.
    fn event(&mut self, e: Element, n: u64, pairer: &mut Pairer, sink: &mut impl SpanSink) -> bool {
        let (Some(ph), Some(ts)) = (e.ph.as_deref(), e.ts.as_ref().and_then(micros)) else {
            // Metadata (`M`) carries no time; anything else without one is malformed.
            return e.ph.as_deref() == Some("M");
        };
        let name = e.name.clone().unwrap_or_default();
        let group = |p: &mut Pairer, e: &Element| match p.by() {
            Some(by) => {
                let v = field_of(e, &by);
                p.group_of(&v)
            }
            None => crate::span::Group::All,
        };
        match ph {
            "X" => {
                let Some(dur) = e.dur.as_ref().and_then(micros) else {
                    return false;
                };
                let series = SeriesKey {
                    span: pairer.span_id(&name),
                    side: None,
                    group: group(pairer, &e),
                };
                sink.sample(&series, ts, dur);
                self.stats.spans += 1;
            }
            "B" => {
                let span = pairer.span_id(&name);
                let g = group(pairer, &e);
                let thread = (text(&e.pid), text(&e.tid));
                self.stacks.entry(thread).or_default().push((span, ts, g));
            }
            "E" => {
                let thread = (text(&e.pid), text(&e.tid));
                match self.stacks.get_mut(&thread).and_then(Vec::pop) {
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
                            span: pairer.span_id(&name),
                            side: None,
                            group: crate::span::Group::All,
                        };
                        sink.outcome(&series, Outcome::OrphanEnd);
                    }
                }
            }
            "b" | "e" => {
                let span = pairer.span_id(&name);
                let key = (
                    span,
                    format!("{}\u{1f}{}", e.cat.as_deref().unwrap_or(""), text(&e.id)),
                );
                if ph == "b" {
                    let series = SeriesKey {
                        span,
                        side: None,
                        group: group(pairer, &e),
                    };
                    self.asyncs.start(
                        key,
                        Open {
                            start_ns: ts,
                            series,
                        },
                        Outcome::Superseded,
                        sink,
                    );
                } else if self.asyncs.end(&key, ts, sink) {
                    self.stats.spans += 1;
                } else {
                    let series = SeriesKey {
                        span,
                        side: None,
                        group: crate::span::Group::All,
                    };
                    sink.outcome(&series, Outcome::OrphanEnd);
                }
            }
            _ => {
                self.instant(&e, ph, ts);
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
        for (k, v) in [("pid", &e.pid), ("tid", &e.tid), ("id", &e.id)] {
            if v.is_some() {
                push(k, &text(v), &mut self.scratch, &mut self.ev, false);
            }
        }
        if let Some(cat) = &e.cat {
            push("cat", cat, &mut self.scratch, &mut self.ev, false);
        }
        for (k, v) in e.args.iter().flatten() {
            let v = match v {
                Value::String(s) => s.clone(),
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
        self.asyncs.finish(sink);
    }
}

fn field_of(e: &Element, by: &str) -> String {
    match by {
        "pid" => text(&e.pid),
        "tid" => text(&e.tid),
        "cat" => e.cat.clone().unwrap_or_default(),
        "id" => text(&e.id),
        "name" => e.name.clone().unwrap_or_default(),
        other => e
            .args
            .as_ref()
            .and_then(|a| a.get(other))
            .map(|v| match v {
                Value::String(s) => s.clone(),
                v => v.to_string(),
            })
            .unwrap_or_else(|| "?".to_string()),
    }
}
