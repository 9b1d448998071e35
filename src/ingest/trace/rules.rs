//! Which events start and end which span, and the pairing of them by key.
//!
//! A rule is `NAME=START..END` with a key: `--key pid` pairs a start and an end with equal
//! `pid` fields; `--key pid=next_pid` pairs a start's `pid` with an end's `next_pid` (a
//! sched_wakeup with the sched_switch that runs the task). An endpoint is an event name with
//! optional filters, `sched:sched_switch:prev_state==R`, `...:prev_state^=R` (starts with),
//! `...:next_comm!=swapper/0`. Several rules may feed one span name (a task waits for the CPU
//! after a wake-up *or* after being preempted); they then share the open spans of that name,
//! so one end closes one span.
//!
//! An event is first tried as an end, then as a start, so that one event can end a span and
//! start the next (a sched_switch ends the next task's wait and starts the previous one's).

use rustc_hash::FxHashMap;

use crate::ingest::words::equal;

use super::span_key::{KeyBuf, SpanKey};
use super::{Event, EventView, InLine};
pub use crate::rule::{Filter, Key, Op, RuleError};
use crate::rule::{is_identifier, is_quoted, split_filters, unquote};
use crate::span::{Group, Open, OpenSpans, Outcome, SeriesKey, SpanSink};

/// An event name (`sched:sched_wakeup`, or the part after the last `:`, which matches with or
/// without a group) and the filters it must pass.
pub type Endpoint = crate::rule::Endpoint<String>;

impl Endpoint {
    /// `EVENT[:FIELD==V][:FIELD!=V][:FIELD^=V]`: the parts after the event that hold an
    /// operator are filters. A quoted part of the event is taken as written
    /// (`"SequenceManager PostTask"`, `"ThreadControllerImpl::RunTask"`).
    pub fn parse(spec: &str) -> Result<Endpoint, RuleError> {
        let (event, filters) = split_filters(spec)?;
        let part_ok = |p: &&str| {
            if is_quoted(p) {
                let text = unquote(p);
                !text.is_empty() && text.len() <= 256 && !text.chars().any(char::is_control)
            } else {
                is_identifier(p)
            }
        };
        if event.is_empty() || !event.iter().all(part_ok) {
            return Err(RuleError(format!(
                "'{spec}': the event name '{}' is not NAME or GROUP:NAME (letters, digits, _ . - /)",
                event.join(":")
            )));
        }
        let event: Vec<_> = event.iter().map(|p| unquote(p)).collect();
        Ok(Endpoint {
            event: event.join(":"),
            filters,
        })
    }

    /// Whether the event named `name` with these fields passes.
    pub fn matches(&self, name: &str, line: &str, ev: &Event) -> bool {
        names_match(&self.event, name) && self.passes(&InLine { line, ev })
    }

    /// Whether an event of this endpoint's name with these fields passes the filters.
    pub fn passes(&self, ev: &impl EventView) -> bool {
        self.filters.iter().all(|f| {
            let v = ev.field(&f.field);
            match f.op {
                Op::Eq => v == Some(f.value.as_str()),
                Op::Ne => v != Some(f.value.as_str()),
                Op::Prefix => v.is_some_and(|v| v.starts_with(&f.value)),
            }
        })
    }
}

/// `sched:sched_wakeup` matches `sched:sched_wakeup` and `sched_wakeup` (ftrace prints no
/// group), and a spec without a group matches any group.
pub fn names_match(spec: &str, name: &str) -> bool {
    if spec == name {
        return true;
    }
    fn last(s: &str) -> &str {
        s.rsplit_once(':').map_or(s, |(_, n)| n)
    }
    (spec.contains(':') != name.contains(':')) && last(spec) == last(name)
}

/// [`Pairer::fields_read`] of `rules` and `by`.
fn fields_read(rules: &[Rule], by: Option<&str>) -> Vec<String> {
    let mut fields: Vec<String> = Vec::new();
    for rule in rules {
        let filters = rule.start.filters.iter().chain(&rule.end.filters);
        let names = filters
            .map(|f| &f.field)
            .chain(&rule.key.start)
            .chain(&rule.key.end);
        fields.extend(names.cloned());
    }
    fields.extend(by.map(str::to_string));
    fields.sort();
    fields.dedup();
    fields
}

/// One rule, compiled for the pairer: its span's index instead of its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// index of its span name
    pub span: usize,
    /// what starts it
    pub start: Endpoint,
    /// what ends it
    pub end: Endpoint,
    /// how starts and ends pair
    pub key: Key,
}

/// `NAME=START..END` (the name may be left out: `START..END` is named after the two events).
pub fn parse_span(spec: &str) -> Result<(String, Endpoint, Endpoint), RuleError> {
    let rule = crate::rule::parse_span(spec, &[], Endpoint::parse, String::clone)?;
    Ok((rule.name, rule.start, rule.end))
}

/// What to do with a start whose key already has an open span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repeat {
    /// the newer start replaces the older, which is counted as superseded (the default, as
    /// the WAYLAND_DEBUG engine and bcc's runqlat do)
    KeepLast,
    /// the older start stays; the newer one is counted as superseded (as `perf sched latency`)
    KeepFirst,
}

impl Repeat {
    /// Both, the default first.
    pub const ALL: [Repeat; 2] = [Repeat::KeepLast, Repeat::KeepFirst];

    /// The name on the command line (`--keep first`).
    pub const fn name(self) -> &'static str {
        match self {
            Repeat::KeepLast => "last",
            Repeat::KeepFirst => "first",
        }
    }
}

impl std::str::FromStr for Repeat {
    type Err = crate::error::UnknownName;

    /// By [`Repeat::name`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        crate::error::UnknownName::find(&Self::ALL, Self::name, "start to keep", s)
    }
}

/// Writes span `span` and the values of `fields` of `ev` into `buf` (separated by U+001F), the
/// key of an open span; `false` when the event lacks one.
///
/// Always inlined, its usual case alone: the other keys are written out of line (with the
/// check for the usual one in the same function, the keys of several fields took longer to
/// pair).
#[inline(always)]
pub(super) fn fill_key(
    buf: &mut KeyBuf,
    span: usize,
    ev: &impl EventView,
    (fields, places): (&[String], &[usize]),
) -> bool {
    // The usual key, one field of one of the first ten spans, written in one go (pushed a
    // piece at a time, with a check of the room left at each, it was a large share of the
    // pairing of a JSON-lines row).
    if let ([field], [j]) = (fields, places)
        && let Ok(digit) = u8::try_from(span)
        && digit < 10
    {
        let Some(v) = ev.key_field(*j, field) else {
            return false;
        };
        buf.set_one(b'0' + digit, v);
        return true;
    }
    fill_key_pieces(buf, span, ev, (fields, places))
}

/// [`fill_key`] of any key: the span, then each field, pushed one by one.
#[inline(never)]
fn fill_key_pieces(
    buf: &mut KeyBuf,
    span: usize,
    ev: &impl EventView,
    (fields, places): (&[String], &[usize]),
) -> bool {
    buf.clear();
    // The span's index in decimal, without the formatting machinery (a key per event); the
    // usual one digit without a copy of the digits (a `memcpy` call).
    if span < 10 {
        buf.push_byte(b'0' + span as u8);
    } else {
        push_decimal(buf, span);
    }
    buf.push_byte(0x1f);
    for (f, &j) in fields.iter().zip(places) {
        let Some(v) = ev.key_field(j, f) else {
            return false;
        };
        buf.push(v);
        buf.push_byte(0x1f);
    }
    true
}

/// `n` in decimal.
fn push_decimal(buf: &mut KeyBuf, n: usize) {
    let mut digits = [0u8; 20];
    let mut n = n;
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    buf.push(&digits[at..]);
}

/// Which rule endpoints are named like `name`: bit 2i for rule i's start, 2i+1 for its end;
/// every bit beyond 32 rules (names are then compared event by event).
fn name_mask(rules: &[Rule], name: &str) -> u64 {
    if rules.len() > 32 {
        return u64::MAX;
    }
    let mut mask = 0;
    for (i, rule) in rules.iter().enumerate() {
        mask |= u64::from(names_match(&rule.start.event, name)) << (2 * i);
        mask |= u64::from(names_match(&rule.end.event, name)) << (2 * i + 1);
    }
    mask
}

/// The rules' endpoint names alone: which events a rule names, decided where the events are
/// parsed (on the parallel reader's threads) so that only those reach the pairing.
#[derive(Debug, Clone)]
pub struct NameMatcher {
    rules: Vec<Rule>,
    by: Option<String>,
    /// [`Pairer::fields_read`]
    fields: Vec<String>,
}

impl NameMatcher {
    /// The mask [`Pairer::event_masked`] takes for an event named `name`; 0: no rule names it.
    pub fn mask(&self, name: &str) -> u64 {
        name_mask(&self.rules, name)
    }

    /// The fields [`Pairer::event_masked`] may read of an event of mask `mask`: bit j for
    /// field j of [`Pairer::fields_read`] (a start's filters, key and `--by`, an end's
    /// filters and key, of each rule that names the event); every bit beyond 64 fields or 32
    /// rules. A reader copies only these (a wake-up has no `next_pid` to look for).
    pub fn fields(&self, mask: u64) -> u64 {
        if self.fields.len() > 64 || self.rules.len() > 32 {
            return u64::MAX;
        }
        let bit = |name: &str| {
            self.fields
                .iter()
                .position(|f| f == name)
                .map_or(0, |j| 1u64 << j)
        };
        let mut need = 0;
        for (i, rule) in self.rules.iter().enumerate() {
            if mask >> (2 * i) & 1 == 1 {
                let filters = rule.start.filters.iter().map(|f| f.field.as_str());
                let keys = rule.key.start.iter().map(String::as_str);
                for f in filters.chain(keys).chain(self.by.as_deref()) {
                    need |= bit(f);
                }
            }
            if mask >> (2 * i + 1) & 1 == 1 {
                let filters = rule.end.filters.iter().map(|f| f.field.as_str());
                for f in filters.chain(rule.key.end.iter().map(String::as_str)) {
                    need |= bit(f);
                }
            }
        }
        need
    }
}

/// A name looked up lately and what it gave, kept inline (a look-up in the map of every name
/// seen hashed the name and called `bcmp`, on every event). The
/// pairer keeps its two last names with their masks; a parallel reader's worker, with what its
/// map of names gave in the chunk.
#[derive(Debug, Clone, Copy)]
pub(super) struct Recent<T> {
    /// the name's length; 0: none kept
    len: u8,
    bytes: [u8; RECENT_LONGEST],
    value: T,
}

/// The longest name a [`Recent`] keeps.
const RECENT_LONGEST: usize = 40;

impl<T: Copy + Default> Default for Recent<T> {
    fn default() -> Recent<T> {
        Recent {
            len: 0,
            bytes: [0; RECENT_LONGEST],
            value: T::default(),
        }
    }
}

impl<T: Copy + Default> Recent<T> {
    /// `None` for an empty name or one longer than [`RECENT_LONGEST`] bytes.
    pub(super) fn new(name: &str, value: T) -> Option<Recent<T>> {
        let len = name.len();
        if len == 0 || len > RECENT_LONGEST {
            return None;
        }
        let mut kept = Recent {
            len: len as u8,
            value,
            ..Recent::default()
        };
        kept.bytes[..len].copy_from_slice(name.as_bytes());
        Some(kept)
    }

    /// What was kept with `name`, when this is `name`.
    #[inline]
    pub(super) fn get(&self, name: &str) -> Option<T> {
        let kept = &self.bytes[..usize::from(self.len)];
        (self.len > 0 && equal(kept, name.as_bytes())).then_some(self.value)
    }
}

/// A flag per span, cleared for every event: bits up to 64 spans, then a vector (clearing
/// two vectors of flags cost two `memset` calls an event).
#[derive(Debug, Clone)]
struct SpanFlags {
    bits: u64,
    more: Vec<bool>,
}

impl SpanFlags {
    fn new(spans: usize) -> SpanFlags {
        SpanFlags {
            bits: 0,
            more: vec![false; spans.saturating_sub(64)],
        }
    }

    #[inline]
    fn clear(&mut self) {
        self.bits = 0;
        if !self.more.is_empty() {
            self.more.fill(false);
        }
    }

    #[inline]
    fn get(&self, span: usize) -> bool {
        match span {
            0..64 => self.bits >> span & 1 == 1,
            _ => self.more.get(span - 64).copied().unwrap_or(false),
        }
    }

    #[inline]
    fn set(&mut self, span: usize) {
        match span {
            0..64 => self.bits |= 1 << span,
            _ => {
                if let Some(flag) = self.more.get_mut(span - 64) {
                    *flag = true;
                }
            }
        }
    }

    /// The spans flagged here and not in `other`, in order.
    fn and_not<'a>(&'a self, other: &'a SpanFlags) -> impl Iterator<Item = usize> + 'a {
        let mut bits = self.bits & !other.bits;
        let low = std::iter::from_fn(move || {
            (bits != 0).then(|| {
                let span = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                span
            })
        });
        let high = (0..self.more.len())
            .filter(|&i| self.more[i] && !other.more.get(i).copied().unwrap_or(false))
            .map(|i| i + 64);
        low.chain(high)
    }
}

/// Pairs events into spans by the rules.
#[derive(Debug)]
pub struct Pairer {
    pub(super) rules: Vec<Rule>,
    span_names: crate::report::csv::Labels,
    span_ids: FxHashMap<String, usize>,
    pub(super) by: Option<String>,
    pub(super) repeat: Repeat,
    /// open spans by their span and key ([`fill_key`])
    pub(super) open: OpenSpans<SpanKey, true>,
    /// per rule, the places of the key fields of its start and of its end among
    /// [`Pairer::fields_read`]
    pub(super) key_places: Vec<[Vec<usize>; 2]>,
    labels: FxHashMap<String, u32>,
    label_names: crate::report::csv::Labels,
    /// the most `--by` values with a series of their own; the rest go to [`OTHER`]
    max_groups: usize,
    /// the `(other)` group, once a value was folded into it, and how many times one was
    other: Option<u32>,
    folded: u64,
    key_buf: KeyBuf,
    /// events with a missing key field, and the line of the first one
    pub missing_key: (u64, Option<u64>),
    /// spans an event ends (a rule's end passed), and those it closed, while it is paired
    ends_seen: SpanFlags,
    closed: SpanFlags,
    /// the names looked up last, with their masks: most events are of one of two names
    recent: [Recent<u64>; 2],
    /// per rule: events named like its start, like its end, passing the start's filters, the end's
    seen: Vec<[u64; 4]>,
    /// distinct event names of the input (at most [`MAX_NAMES`]), for "did you mean", each
    /// with the rule endpoints its name matches ([`Pairer::name_mask`])
    names_seen: FxHashMap<Box<str>, u64>,
}

/// The series that `--by` values beyond [`Pairer::with_max_series`] are folded into.
pub const OTHER: &str = "(other)";

/// The default of `spans --max-series`: a series costs about 3 KiB, 20 to 40 bytes more for
/// each distinct latency of its spans (its exact counts, kept up to 65,536 distinct latencies:
/// 2.1 MiB) and 40 to 170 KiB once they are over 256 (its histograms, as the largest latency
/// grows from 16 µs to a second: see [`crate::stats::BINNED_AFTER_DISTINCT`]), so the default
/// keeps them to 30 MB for few spans each; more takes spans of as many distinct latencies
/// (100,000 values took 2.1 GB before the cap).
pub const DEFAULT_MAX_SERIES: usize = 10_000;

/// Distinct event names kept for suggestions (memory follows the input only up to this).
pub(crate) const MAX_NAMES: usize = 4096;

impl Pairer {
    /// A pairer of `rules` over the span `names` they index; series split by the start's `by`
    /// field.
    pub fn new(rules: Vec<Rule>, names: Vec<String>, by: Option<String>, repeat: Repeat) -> Pairer {
        let spans = names.len();
        let span_ids = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.clone(), i))
            .collect();
        let read = fields_read(&rules, by.as_deref());
        // (every key field is among them: `usize::MAX` is not reached)
        let places = |fields: &[String]| -> Vec<usize> {
            let at = |f: &String| read.iter().position(|r| r == f).unwrap_or(usize::MAX);
            fields.iter().map(at).collect()
        };
        let key_places = rules
            .iter()
            .map(|r| [places(&r.key.start), places(&r.key.end)])
            .collect();
        Pairer {
            rules,
            key_places,
            span_names: std::rc::Rc::new(std::cell::RefCell::new(names)),
            span_ids,
            by,
            repeat,
            open: OpenSpans::default(),
            labels: FxHashMap::default(),
            label_names: Default::default(),
            max_groups: DEFAULT_MAX_SERIES,
            other: None,
            folded: 0,
            key_buf: KeyBuf::default(),
            missing_key: (0, None),
            ends_seen: SpanFlags::new(spans),
            closed: SpanFlags::new(spans),
            recent: Default::default(),
            seen: Vec::new(),
            names_seen: Default::default(),
        }
    }

    /// Notes an event name of the input, for suggestions when a rule matches nothing.
    pub fn note_name(&mut self, name: &str) {
        self.name_mask(name);
    }

    /// Which rule endpoints are named like `name`: bit 2i for rule i's start, 2i+1 for its end
    /// (every bit set beyond 32 rules: the names are then compared event by event). Kept per
    /// name, as the name is noted: an event costs one look-up instead of a comparison with
    /// each endpoint.
    ///
    /// The two names seen last are compared here, where it is called; the rest is a call.
    #[inline(always)]
    fn name_mask(&mut self, name: &str) -> u64 {
        match self.recent.iter().find_map(|r| r.get(name)) {
            Some(mask) => mask,
            None => self.name_mask_looked_up(name),
        }
    }

    /// [`Pairer::name_mask`] of a name not among the two seen last.
    #[inline(never)]
    fn name_mask_looked_up(&mut self, name: &str) -> u64 {
        let mask = match self.names_seen.get(name) {
            Some(&mask) => mask,
            None => {
                let mask = name_mask(&self.rules, name);
                if self.names_seen.len() < MAX_NAMES {
                    self.names_seen.insert(name.into(), mask);
                }
                mask
            }
        };
        if let Some(recent) = Recent::new(name, mask) {
            self.recent[1] = std::mem::replace(&mut self.recent[0], recent);
        }
        mask
    }

    /// What decides which events reach [`Pairer::event_masked`]: the rules' endpoint names,
    /// for a reader on another thread.
    pub fn matcher(&self) -> NameMatcher {
        NameMatcher {
            rules: self.rules.clone(),
            by: self.by.clone(),
            fields: self.fields_read(),
        }
    }

    /// Notes the event names of the input in the order they first appeared, as
    /// [`Pairer::event`] notes each event's (the parallel reader sends each chunk's new
    /// names before its events: the names kept for suggestions are the same).
    pub fn note_names<'n>(&mut self, names: impl IntoIterator<Item = &'n str>) {
        for name in names {
            if self.names_seen.len() >= MAX_NAMES {
                return;
            }
            self.name_mask(name);
        }
    }

    /// Why the rules measured nothing: one sentence per rule endpoint that never matched, with
    /// how many events of its name were seen and the nearest names the input does have.
    pub fn diagnose(&self) -> Vec<String> {
        let names = self.span_names.borrow();
        let mut out = Vec::new();
        for (i, rule) in self.rules.iter().enumerate() {
            let seen = self.seen.get(i).copied().unwrap_or_default();
            let span = names.get(rule.span).map_or("?", String::as_str);
            for (side, end, named, passed) in [
                ("start", &rule.start, seen[0], seen[2]),
                ("end", &rule.end, seen[1], seen[3]),
            ] {
                let what = if named == 0 {
                    format!(
                        "its {side} event '{}' never appeared{}",
                        end.event,
                        self.nearest(&end.event)
                    )
                } else if passed == 0 {
                    let filters: Vec<String> = end.filters.iter().map(|f| f.to_string()).collect();
                    format!(
                        "its {side} event '{}' appeared {named} time(s) but never with {}",
                        end.event,
                        filters.join(" and ")
                    )
                } else {
                    format!("{passed} {side}(s) matched")
                };
                out.push(format!("span '{span}': {what}"));
            }
        }
        out
    }

    /// `" (nearest names in the input: a, b, c)"`, or nothing when the input had none.
    fn nearest(&self, event: &str) -> String {
        let last = |s: &str| s.rsplit(':').next().unwrap_or(s).to_string();
        let mut scored: Vec<(f64, &str)> = self
            .names_seen
            .keys()
            .map(|n| {
                let whole = strsim::normalized_levenshtein(event, n);
                let tail = strsim::normalized_levenshtein(&last(event), &last(n));
                (whole.max(tail), &**n)
            })
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
        let best: Vec<&str> = scored.iter().take(3).map(|(_, n)| *n).collect();
        if best.is_empty() {
            " (the input has no events)".to_string()
        } else {
            format!(" (nearest names in the input: {})", best.join(", "))
        }
    }

    /// Every field a rule's filters, its key or `--by` reads: the only fields a reader that
    /// can skip the others (JSON lines) must parse.
    pub fn fields_read(&self) -> Vec<String> {
        fields_read(&self.rules, self.by.as_deref())
    }

    /// Whether any rule exists.
    pub fn has_rules(&self) -> bool {
        !self.rules.is_empty()
    }

    /// The group labels, indexed like [`Group::Label`] (shared: they grow while reading).
    pub fn labels(&self) -> crate::report::csv::Labels {
        self.label_names.clone()
    }

    fn note_missing_key(&mut self, line_no: u64) {
        self.missing_key.0 += 1;
        self.missing_key.1.get_or_insert(line_no);
    }

    /// The span names, rules' first, then those an input names itself (Chrome JSON).
    pub fn span_names(&self) -> crate::report::csv::Labels {
        self.span_names.clone()
    }

    /// The index of span `name`, added if new.
    pub fn span_id(&mut self, name: &str) -> usize {
        if let Some(&id) = self.span_ids.get(name) {
            return id;
        }
        let mut names = self.span_names.borrow_mut();
        let id = names.len();
        names.push(name.to_string());
        self.span_ids.insert(name.to_string(), id);
        id
    }

    /// The field series are split by.
    pub fn by(&self) -> Option<String> {
        self.by.clone()
    }

    fn group(&mut self, ev: &impl EventView) -> Group {
        let value = match &self.by {
            Some(by) => ev.field(by).unwrap_or("?"),
            None => return Group::All,
        };
        self.group_of(value)
    }

    /// At most `n` groups (values of the `by` field) get a series of their own; further values
    /// go to one [`OTHER`] series (memory follows the input's bytes, not its cardinality).
    pub fn with_max_series(mut self, n: usize) -> Pairer {
        self.max_groups = n.max(1);
        self
    }

    /// What was folded into [`OTHER`], for a warning; `None` when nothing was.
    pub fn folded_note(&self) -> Option<String> {
        (self.folded > 0).then(|| {
            format!(
                "--by {}: more than {} distinct values: {} events of further values were folded into one '{OTHER}' series (--max-series raises the limit; each series costs 3 KiB, and some MiB with many distinct latencies)",
                self.by.as_deref().unwrap_or("?"),
                self.max_groups,
                self.folded
            )
        })
    }

    /// The group of field value `value`.
    pub fn group_of(&mut self, value: &str) -> Group {
        if let Some(&id) = self.labels.get(value) {
            return Group::Label(id);
        }
        if self.labels.len() >= self.max_groups {
            self.folded += 1;
            if let Some(id) = self.other {
                return Group::Label(id);
            }
            let mut names = self.label_names.borrow_mut();
            let id = names.len() as u32;
            names.push(OTHER.to_string());
            self.other = Some(id);
            return Group::Label(id);
        }
        let mut names = self.label_names.borrow_mut();
        let id = names.len() as u32;
        names.push(value.to_string());
        self.labels.insert(value.to_string(), id);
        Group::Label(id)
    }

    /// Feeds one event (line number `line_no`) through every rule.
    #[inline]
    pub fn event(&mut self, line: &str, ev: &Event, line_no: u64, sink: &mut impl SpanSink) {
        let mask = self.name_mask(ev.name(line));
        if mask == 0 {
            return; // no rule names this event
        }
        self.event_masked(&InLine { line, ev }, mask, line_no, sink);
    }

    /// Feeds one event whose name's [`NameMatcher::mask`] is `mask` (not 0) through every
    /// rule; its name must have been noted ([`Pairer::note_names`]).
    pub fn event_masked(
        &mut self,
        ev: &impl EventView,
        mask: u64,
        line_no: u64,
        sink: &mut impl SpanSink,
    ) {
        match self.rules.len() {
            1 => self.event_of_one_rule(ev, mask, line_no, sink),
            _ => self.event_of_rules(ev, mask, line_no, sink),
        }
    }

    /// [`Pairer::event_masked`] with one rule (a `--span`, or `--start` and `--end`: the usual
    /// case), what [`Pairer::event_of_rules`] does with one, without its loops over the rules
    /// and its flags per span, which were a large share of the pairing of a short row.
    fn event_of_one_rule(
        &mut self,
        ev: &impl EventView,
        mask: u64,
        line_no: u64,
        sink: &mut impl SpanSink,
    ) {
        let rule = &self.rules[0];
        let (span, places) = (rule.span, &self.key_places[0]);
        if self.seen.len() != 1 {
            self.seen = vec![[0; 4]];
        }
        let seen = &mut self.seen[0];
        let mut passed = [false; 2];
        for (k, end) in [&rule.start, &rule.end].into_iter().enumerate() {
            if mask >> k & 1 == 1 {
                seen[k] += 1;
                if end.passes(ev) {
                    seen[k + 2] += 1;
                    passed[k] = true;
                }
            }
        }
        if passed[1] {
            let key = (&rule.key.end[..], &places[1][..]);
            if !fill_key(&mut self.key_buf, span, ev, key) {
                self.note_missing_key(line_no);
            } else if !self.open.end(self.key_buf.as_bytes(), ev.ts_ns(), sink) {
                let series = SeriesKey {
                    span,
                    side: None,
                    group: Group::All,
                };
                sink.outcome(&series, Outcome::OrphanEnd);
            }
        }
        if passed[0] {
            self.start(ev, 0, line_no, sink);
        }
    }

    /// Starts the span of rule `i` that event `ev` (line `line_no`) starts.
    fn start(&mut self, ev: &impl EventView, i: usize, line_no: u64, sink: &mut impl SpanSink) {
        let span = self.rules[i].span;
        let key = (&self.rules[i].key.start[..], &self.key_places[i][0][..]);
        if !fill_key(&mut self.key_buf, span, ev, key) {
            self.note_missing_key(line_no);
            return;
        }
        let series = SeriesKey {
            span,
            side: None,
            group: self.group(ev),
        };
        if self.repeat == Repeat::KeepFirst && self.open.contains(self.key_buf.as_bytes()) {
            sink.outcome(&series, Outcome::Superseded);
            return;
        }
        let open = Open {
            start_ns: ev.ts_ns(),
            series,
        };
        self.open
            .start(self.key_buf.key(), open, Outcome::Superseded, sink);
    }

    /// [`Pairer::event_masked`] with any number of rules.
    fn event_of_rules(
        &mut self,
        ev: &impl EventView,
        mask: u64,
        line_no: u64,
        sink: &mut impl SpanSink,
    ) {
        let exact = self.rules.len() <= 32;
        let named = |i: usize, side: usize, end: &Endpoint| {
            if exact {
                mask >> (2 * i + side) & 1 == 1
            } else {
                names_match(&end.event, ev.name())
            }
        };
        if self.seen.len() != self.rules.len() {
            self.seen = vec![[0; 4]; self.rules.len()];
        }
        // What each endpoint of each rule makes of the event: bit i of [starts, ends] for
        // rule i passing, and [start, end] for rules past 64 (an array of flags here was
        // cleared with a `memset` call per event).
        let mut passes = [0u64; 2];
        let mut passes_more = Vec::new();
        for (i, rule) in self.rules.iter().enumerate() {
            let seen = &mut self.seen[i];
            let mut p = [false; 2];
            for (k, end) in [&rule.start, &rule.end].into_iter().enumerate() {
                if named(i, k, end) {
                    seen[k] += 1;
                    if end.passes(ev) {
                        seen[k + 2] += 1;
                        p[k] = true;
                    }
                }
            }
            if i < 64 {
                passes[0] |= u64::from(p[0]) << i;
                passes[1] |= u64::from(p[1]) << i;
            } else {
                passes_more.push(p);
            }
        }
        let passed = |i: usize, k: usize| match i {
            0..64 => passes[k] >> i & 1 == 1,
            _ => passes_more[i - 64][k],
        };
        self.ends_seen.clear();
        self.closed.clear();
        for i in 0..self.rules.len() {
            if !passed(i, 1) {
                continue;
            }
            let span = self.rules[i].span;
            let key = (&self.rules[i].key.end[..], &self.key_places[i][1][..]);
            if !fill_key(&mut self.key_buf, span, ev, key) {
                self.note_missing_key(line_no);
                continue;
            }
            if self.closed.get(span) {
                continue;
            }
            self.ends_seen.set(span);
            if self.open.end(self.key_buf.as_bytes(), ev.ts_ns(), sink) {
                self.closed.set(span);
            }
        }
        for span in self.ends_seen.and_not(&self.closed) {
            let series = SeriesKey {
                span,
                side: None,
                group: Group::All,
            };
            sink.outcome(&series, Outcome::OrphanEnd);
        }
        for i in 0..self.rules.len() {
            if passed(i, 0) {
                self.start(ev, i, line_no, sink);
            }
        }
    }

    /// Adds what a worker counted of the one rule's events ([`super::local::Paired`]), the
    /// first event without its key at line `first_missing` of the input.
    pub(super) fn add_counts(&mut self, seen: [u64; 4], missing: u64, first_missing: Option<u64>) {
        // (as the serial reader, which makes its counts at the first event a rule names)
        if seen == [0; 4] {
            return;
        }
        if self.seen.len() != 1 {
            self.seen = vec![[0; 4]];
        }
        for (total, n) in self.seen[0].iter_mut().zip(seen) {
            *total += n;
        }
        self.missing_key.0 += missing;
        if let Some(line) = first_missing {
            self.missing_key.1.get_or_insert(line);
        }
    }

    /// Counts every span still open as unmatched (the input ended).
    pub fn finish(&mut self, sink: &mut impl SpanSink) {
        self.open.finish(sink);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::trace::span_key::KeyBytes;

    #[test]
    fn endpoints_take_an_event_and_filters() {
        let e = Endpoint::parse("sched:sched_switch:prev_state^=R:next_comm!=swapper/0").unwrap();
        assert_eq!(e.event, "sched:sched_switch");
        assert_eq!(e.filters.len(), 2);
        assert_eq!(e.filters[0].op, Op::Prefix);
        assert_eq!(e.filters[1].value, "swapper/0");
        for bad in [
            "",
            "a:{x}",
            "sched:sched_switch:x~=1",
            "a b",
            "\"a:b",
            "\"\"",
            "a:x==\"y",
        ] {
            assert!(Endpoint::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn quoted_event_names_and_values_are_taken_as_written() {
        let e = Endpoint::parse("sched:sched_wakeup:comm==lat worker 1").unwrap();
        assert_eq!(e.filters[0].value, "lat worker 1");
        let e = Endpoint::parse("sched:sched_wakeup:comm==\"kworker/0:1 [x], y..z\"").unwrap();
        assert_eq!(
            (e.event.as_str(), e.filters.len()),
            ("sched:sched_wakeup", 1)
        );
        assert_eq!(e.filters[0].value, "kworker/0:1 [x], y..z");
        let e = Endpoint::parse("'ThreadControllerImpl::RunTask':a=='x==y'").unwrap();
        assert_eq!(e.event, "ThreadControllerImpl::RunTask");
        assert_eq!(
            (e.filters[0].field.as_str(), e.filters[0].value.as_str()),
            ("a", "x==y")
        );
        let (name, s, e) =
            parse_span("\"SequenceManager PostTask\"..\"ThreadControllerImpl::RunTask\"").unwrap();
        assert_eq!(s.event, "SequenceManager PostTask");
        assert_eq!(e.event, "ThreadControllerImpl::RunTask");
        assert_eq!(name, "SequenceManager_PostTask_to_RunTask");
        let (name, s, e) = parse_span("q=a:x==\"1..2\"..b:y=='p=q'").unwrap();
        assert_eq!((name.as_str(), s.filters[0].value.as_str()), ("q", "1..2"));
        assert_eq!(e.filters[0].value, "p=q");
    }

    #[test]
    fn names_match_with_or_without_the_group() {
        assert!(names_match("sched:sched_wakeup", "sched:sched_wakeup"));
        assert!(names_match("sched:sched_wakeup", "sched_wakeup"));
        assert!(names_match("sched_wakeup", "sched:sched_wakeup"));
        assert!(!names_match("sched:sched_wakeup", "sched:sched_wakeup_new"));
        assert!(!names_match("irq:sched_wakeup", "sched:sched_wakeup"));
    }

    #[test]
    fn spans_and_keys_are_parsed() {
        let (name, s, e) = parse_span("run=sched:sched_wakeup..sched:sched_switch").unwrap();
        assert_eq!(
            (name.as_str(), s.event.as_str()),
            ("run", "sched:sched_wakeup")
        );
        assert_eq!(e.event, "sched:sched_switch");
        let (name, ..) = parse_span("sched:sched_wakeup..sched:sched_switch").unwrap();
        assert_eq!(name, "sched_wakeup_to_sched_switch");
        assert!(parse_span("run=a").is_err());
        assert!(parse_span("{bad}=a..b").is_err());
        let k = Key::parse("pid=next_pid,cpu").unwrap();
        assert_eq!(k.start, ["pid", "cpu"]);
        assert_eq!(k.end, ["next_pid", "cpu"]);
        assert!(Key::parse("a;b").is_err());
    }

    #[test]
    fn a_rule_that_matches_nothing_is_explained_with_the_nearest_names() {
        let (name, start, end) =
            parse_span("run=sched:sched_wakeupp..sched:sched_switch:prev_state==X").unwrap();
        let rule = Rule {
            span: 0,
            start,
            end,
            key: Key::default(),
        };
        let mut p = Pairer::new(vec![rule], vec![name], None, Repeat::KeepLast);
        let line = "sched:sched_switch\tprev_state\tS\tsched:sched_wakeup";
        let ev = Event {
            ts_ns: 1,
            name: 0..18,
            fields: vec![(19..29, 30..31)],
            common: Vec::new(),
            ..Event::default()
        };
        let mut sink = crate::span::Kept::new(1);
        p.event(line, &ev, 1, &mut sink);
        let wakeup = Event {
            name: 32..50,
            ..Event::default()
        };
        p.event(line, &wakeup, 2, &mut sink);
        let why = p.diagnose();
        assert_eq!(
            why[0],
            "span 'run': its start event 'sched:sched_wakeupp' never appeared (nearest names in the input: sched:sched_wakeup, sched:sched_switch)"
        );
        assert_eq!(
            why[1],
            "span 'run': its end event 'sched:sched_switch' appeared 1 time(s) but never with prev_state==X"
        );
    }

    /// An event `name` with fields `k=v`, as a line and the event whose ranges point into it.
    fn event_of(name: &str, fields: &[(&str, &str)], ts_ns: u64) -> (String, Event) {
        let mut line = name.to_string();
        let mut ev = Event {
            ts_ns,
            name: 0..name.len(),
            ..Event::default()
        };
        for (k, v) in fields {
            line.push('\t');
            let k_at = line.len();
            line.push_str(k);
            line.push('\t');
            let v_at = line.len();
            line.push_str(v);
            ev.fields.push((k_at..k_at + k.len(), v_at..v_at + v.len()));
        }
        (line, ev)
    }

    /// Every sample and outcome, in order, as text.
    #[derive(Default)]
    struct Said(Vec<String>);

    impl SpanSink for Said {
        fn sample(&mut self, key: &SeriesKey, start_ns: u64, latency_ns: u64) {
            self.0
                .push(format!("sample {key:?} {start_ns} {latency_ns}"));
        }

        fn outcome(&mut self, key: &SeriesKey, outcome: Outcome) {
            self.0.push(format!("{outcome:?} {key:?}"));
        }
    }

    #[test]
    fn one_rule_pairs_as_the_general_pairing_of_any_number_of_rules_does() {
        let specs = [
            ("s..e", "k"),
            ("s:v==1..e", "k"),
            ("s..e:v!=2", "k=j"),
            ("s..s", "k"),
            ("s..e", "k,j"),
        ];
        for (spec, key) in specs {
            for repeat in [Repeat::KeepLast, Repeat::KeepFirst] {
                for by in [None, Some("v")] {
                    let (name, start, end) = parse_span(&format!("r={spec}")).unwrap();
                    let key = Key::parse(key).unwrap();
                    let rule = Rule {
                        span: 0,
                        start,
                        end,
                        key,
                    };
                    let by = by.map(String::from);
                    let new =
                        || Pairer::new(vec![rule.clone()], vec![name.clone()], by.clone(), repeat);
                    let (mut one, mut general) = (new(), new());
                    let (mut said_one, mut said_general) = (Said::default(), Said::default());
                    let mut seed = 12345u64;
                    for n in 0..2000u64 {
                        seed = seed
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        let r = |shift: u32, m: u64| (seed >> shift) % m;
                        let name = ["s", "e", "x"][r(33, 3) as usize];
                        let (k, j, v) = (
                            r(40, 5).to_string(),
                            r(45, 5).to_string(),
                            r(50, 3).to_string(),
                        );
                        let mut fields = vec![("v", v.as_str())];
                        if r(55, 10) > 0 {
                            fields.push(("k", k.as_str()));
                        }
                        if r(59, 4) > 0 {
                            fields.push(("j", j.as_str()));
                        }
                        // now and then a stamp before the one before
                        let ts = 1000 * n + r(20, 1500);
                        let (line, ev) = event_of(name, &fields, ts);
                        let view = InLine {
                            line: &line,
                            ev: &ev,
                        };
                        let mask = one.name_mask(name);
                        if mask == 0 {
                            continue;
                        }
                        one.event_masked(&view, mask, n, &mut said_one);
                        general.event_of_rules(&view, mask, n, &mut said_general);
                    }
                    one.finish(&mut said_one);
                    general.finish(&mut said_general);
                    let what = format!("{spec} {repeat:?} {by:?}");
                    assert!(said_one.0.len() > 500, "{what}: {}", said_one.0.len());
                    assert_eq!(said_one.0, said_general.0, "{what}");
                    assert_eq!(one.missing_key, general.missing_key, "{what}");
                    assert_eq!(one.diagnose(), general.diagnose(), "{what}");
                    assert_eq!(*one.labels().borrow(), *general.labels().borrow(), "{what}");
                }
            }
        }
    }

    #[test]
    fn seventy_rules_each_pair_their_own_events_past_the_32_and_64_rule_masks() {
        let n = 70;
        let rules: Vec<Rule> = (0..n)
            .map(|i| {
                let (_, start, end) = parse_span(&format!("r{i}=s:v=={i}..e:v=={i}")).unwrap();
                let key = Key::parse("k").unwrap();
                Rule {
                    span: i,
                    start,
                    end,
                    key,
                }
            })
            .collect();
        let names = (0..n).map(|i| format!("r{i}")).collect();
        let mut p = Pairer::new(rules, names, None, Repeat::KeepLast);
        let mut sink = crate::span::Kept::new(1000);
        for i in 0..n {
            let v = i.to_string();
            let (line, ev) = event_of("s", &[("v", &v), ("k", "1")], 1000 * i as u64);
            p.event(&line, &ev, 1, &mut sink);
            let (line, ev) = event_of(
                "e",
                &[("v", &v), ("k", "1")],
                1000 * i as u64 + i as u64 + 1,
            );
            p.event(&line, &ev, 2, &mut sink);
        }
        let got: Vec<(usize, u64)> = sink
            .spans
            .iter()
            .map(|s| (s.key.span, s.latency_ns))
            .collect();
        let expected: Vec<(usize, u64)> = (0..n).map(|i| (i, i as u64 + 1)).collect();
        assert_eq!(got, expected);
    }

    #[test]
    fn open_span_keys_short_and_long_are_found_by_their_bytes() {
        let series = SeriesKey {
            span: 0,
            side: None,
            group: Group::All,
        };
        let (mut open, mut sink) = (
            OpenSpans::<SpanKey, true>::default(),
            crate::span::Kept::new(9),
        );
        let keys: Vec<Vec<u8>> = [0, 1, 30, 31, 32, 200].map(|n| vec![b'k'; n]).into();
        for (at, key) in keys.iter().enumerate() {
            let open_at = Open {
                start_ns: at as u64,
                series,
            };
            open.start(SpanKey::new(key), open_at, Outcome::Superseded, &mut sink);
        }
        assert!(matches!(SpanKey::new(&keys[3]), SpanKey::Inline(31, _)));
        assert_eq!(super::super::span_key::INLINE, 31);
        assert!(matches!(SpanKey::new(&keys[4]), SpanKey::Heap(_)));
        assert!(
            !open.end(KeyBytes::of(b"kk"), 10, &mut sink),
            "no span of a key never started"
        );
        for key in keys.iter().rev() {
            assert!(open.end(KeyBytes::of(key), 10, &mut sink));
        }
        let started: Vec<u64> = sink.spans.iter().map(|s| s.start_ns).collect();
        assert_eq!(started, [5, 4, 3, 2, 1, 0], "each end found its own start");
        assert!(open.is_empty());
    }

    #[test]
    fn by_values_beyond_the_series_cap_fold_into_one_other_series_with_a_note() {
        let mut p = Pairer::new(Vec::new(), Vec::new(), Some("tid".into()), Repeat::KeepLast)
            .with_max_series(2);
        let ids: Vec<Group> = ["a", "b", "c", "a", "d", "c"]
            .iter()
            .map(|v| p.group_of(v))
            .collect();
        assert_eq!(
            ids,
            [0, 1, 2, 0, 2, 2].map(Group::Label),
            "a and b have their own series; c and d are (other)"
        );
        assert_eq!(*p.labels().borrow(), ["a", "b", OTHER]);
        let note = p.folded_note().unwrap();
        assert!(
            note.contains("more than 2 distinct values: 3 events"),
            "{note}"
        );
        let mut none = Pairer::new(Vec::new(), Vec::new(), None, Repeat::KeepLast);
        none.group_of("x");
        assert_eq!(none.folded_note(), None);
    }
}
