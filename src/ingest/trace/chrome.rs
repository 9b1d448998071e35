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
    id2: Option<Id2>,
    scope: Option<String>,
    cat: Option<String>,
    args: Option<serde_json::Map<String, Value>>,
}

/// `id2`: an id scoped to the process (`local`) or to the whole trace (`global`).
#[derive(Debug, Default, Deserialize)]
struct Id2 {
    local: Option<Value>,
    global: Option<Value>,
}

/// The async tree an event belongs to: `cat`, `scope` and its id, with the process when the
/// id is local (U+001F between the parts). `None` when it has no id.
fn tree_key(e: &Element) -> Option<String> {
    let (id, pid) = match (&e.id2, &e.id) {
        (Some(Id2 { local: Some(l), .. }), _) => (value_text(l), Some(text(&e.pid))),
        (
            Some(Id2 {
                global: Some(g), ..
            }),
            _,
        ) => (value_text(g), None),
        (_, Some(id)) => (value_text(id), None),
        _ => return None,
    };
    let mut key = String::with_capacity(id.len() + 32);
    for part in [
        e.cat.as_deref().unwrap_or(""),
        e.scope.as_deref().unwrap_or(""),
    ] {
        key.push_str(part);
        key.push('\u{1f}');
    }
    key.push_str(if pid.is_some() { "local" } else { "global" });
    key.push('\u{1f}');
    key.push_str(&id);
    if let Some(pid) = pid {
        key.push('\u{1f}');
        key.push_str(&pid);
    }
    Some(key)
}

fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
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
    element: Vec<u8>,
    in_element: bool,
    /// the element in progress passed [`MAX_ELEMENT`]
    oversized: bool,
    at_start: bool,
    stacks: FxHashMap<Thread, Vec<Begun>>,
    trees: FxHashMap<String, Vec<Begun>>,
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
            oversized: false,
            at_start: true,
            stacks: FxHashMap::default(),
            trees: FxHashMap::default(),
            legacy: OpenSpans::default(),
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
        if pairer.has_rules() {
            pairer.note_name(&name);
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
            "b" => {
                let Some(tree) = tree_key(&e) else {
                    return false;
                };
                let begun = (pairer.span_id(&name), ts, group(pairer, &e));
                self.trees.entry(tree).or_default().push(begun);
            }
            "e" => {
                let Some(tree) = tree_key(&e) else {
                    return false;
                };
                self.async_end(&tree, e.name.as_deref(), ts, pairer, sink);
            }
            "S" | "F" => {
                let Some(tree) = tree_key(&e) else {
                    return false;
                };
                let span = pairer.span_id(&name);
                let key = (span, tree);
                if ph == "S" {
                    let series = SeriesKey {
                        span,
                        side: None,
                        group: group(pairer, &e),
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
        for (k, v) in [("pid", &e.pid), ("tid", &e.tid), ("id", &e.id)] {
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

/// Series `span` without a group (an orphan end has no start to take one from).
fn all(span: usize) -> SeriesKey {
    SeriesKey {
        span,
        side: None,
        group: crate::span::Group::All,
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
