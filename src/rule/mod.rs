//! The rule grammar shared by `latscope spans` (evaluated on a recorded trace) and `latscope
//! live` (compiled into a bpftrace program): one parser, one rule type, one help text, so that a
//! rule tried offline on `perf script` output runs live unchanged (with the probe kind in front).
//!
//! A span is `NAME=START..END`; an endpoint is an event followed by filters,
//! `sched:sched_switch:prev_state^=R:next_comm!=swapper/0` (offline) or
//! `tracepoint:sched:sched_switch:prev_state^=R` (live); a key is `pid`, `pid=next_pid` or a
//! comma list, pairing a start's fields with an end's, pairwise. What an event is differs
//! between the commands (an event name in a trace, a probe in the kernel), so the rule type is
//! generic over it; everything else is here.
//!
//! Quotes: a value or an event name that holds spaces, `:`, `,`, `..` or `=` is written in
//! single or double quotes inside the rule (`comm=="lat worker: 1"`,
//! `"SequenceManager PostTask".."ThreadControllerImpl::RunTask"`), as a shell user expects;
//! the separators of the grammar are only looked for outside quotes. A whole filter passed as
//! one shell argument (`'sched:sched_wakeup:comm==lat worker 1'`) needs none: the shell took
//! its quotes away and a space is no separator.

use std::borrow::Cow;
use std::fmt;

/// A rule could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RuleError(pub String);

/// How a field is compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `^=`: starts with
    Prefix,
}

impl Op {
    /// The operator as written.
    pub fn text(self) -> &'static str {
        match self {
            Op::Eq => "==",
            Op::Ne => "!=",
            Op::Prefix => "^=",
        }
    }
}

/// `field OP value`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    /// the field
    pub field: String,
    /// the comparison
    pub op: Op,
    /// the value compared with
    pub value: String,
}

impl fmt::Display for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}{}", self.field, self.op.text(), self.value)
    }
}

/// A field or event name part: letters, digits and `_ . - /`, at most 256 bytes.
pub fn is_identifier(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 256
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b'/'))
}

/// The byte offsets of `text` that lie outside quotes (`'...'` or `"..."`), with their byte.
fn unquoted(text: &str) -> impl Iterator<Item = (usize, u8)> + '_ {
    let mut quote = None;
    text.bytes().enumerate().filter(move |&(_, b)| match quote {
        Some(q) if b == q => {
            quote = None;
            false
        }
        Some(_) => false,
        None if b == b'\'' || b == b'"' => {
            quote = Some(b);
            false
        }
        None => true,
    })
}

/// Where `pat` first starts outside quotes in `text`.
pub fn find_unquoted(text: &str, pat: &str) -> Option<usize> {
    unquoted(text)
        .map(|(i, _)| i)
        .find(|&i| text.as_bytes()[i..].starts_with(pat.as_bytes()) && outside(text, i, pat))
}

/// Where `pat` last starts outside quotes in `text`.
pub fn rfind_unquoted(text: &str, pat: &str) -> Option<usize> {
    unquoted(text)
        .map(|(i, _)| i)
        .filter(|&i| text.as_bytes()[i..].starts_with(pat.as_bytes()) && outside(text, i, pat))
        .last()
}

/// Whether all of `pat` at `at` lies outside quotes.
fn outside(text: &str, at: usize, pat: &str) -> bool {
    !text.as_bytes()[at..at + pat.len()]
        .iter()
        .any(|&b| b == b'\'' || b == b'"')
}

/// Whether every quote of `text` is closed.
pub fn quotes_closed(text: &str) -> bool {
    let mut quote = None;
    for b in text.bytes() {
        match quote {
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None if b == b'\'' || b == b'"' => quote = Some(b),
            None => {}
        }
    }
    quote.is_none()
}

/// `text` without its quotes, as a shell reads it: `"a b"` is `a b`, `x'y:z'` is `xy:z`.
pub fn unquote(text: &str) -> Cow<'_, str> {
    if !text.contains(['\'', '"']) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut quote = None;
    for c in text.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => out.push(c),
            None if c == '\'' || c == '"' => quote = Some(c),
            None => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Whether a part is quoted (all or in part): its text is taken as written, not checked as
/// an identifier.
pub fn is_quoted(part: &str) -> bool {
    part.contains(['\'', '"'])
}

/// Whether a `:`-separated part of an endpoint is a filter (holds an operator outside quotes).
pub fn is_filter(part: &str) -> bool {
    ["==", "!=", "^="]
        .iter()
        .any(|op| find_unquoted(part, op).is_some())
}

/// The `:`-separated parts of an endpoint (a `:` inside quotes separates nothing; the parts
/// keep their quotes: [`unquote`] takes them away).
pub fn parts(spec: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut from = 0;
    for (i, b) in unquoted(spec) {
        if b == b':' {
            out.push(&spec[from..i]);
            from = i + 1;
        }
    }
    out.push(&spec[from..]);
    out
}

impl Filter {
    /// `FIELD==VALUE`, `FIELD!=VALUE` or `FIELD^=VALUE`; `spec` is the whole endpoint, for
    /// messages.
    /// The value may be quoted (`comm=="lat worker: 1"`); its quotes are taken away.
    pub fn parse(part: &str, spec: &str) -> Result<Filter, RuleError> {
        if !quotes_closed(part) {
            return Err(RuleError(format!(
                "'{spec}': a quote in '{part}' is not closed"
            )));
        }
        let (field, op, value) = [("==", Op::Eq), ("!=", Op::Ne), ("^=", Op::Prefix)]
            .iter()
            .filter_map(|(text, op)| find_unquoted(part, text).map(|at| (at, text, *op)))
            .min_by_key(|&(at, ..)| at)
            .map(|(at, text, op)| (&part[..at], op, &part[at + text.len()..]))
            .ok_or_else(|| RuleError(format!("'{spec}': '{part}' is not FIELD==VALUE")))?;
        if !is_identifier(field) {
            return Err(RuleError(format!(
                "'{spec}': '{field}' is not a field name"
            )));
        }
        Ok(Filter {
            field: field.to_string(),
            op,
            value: unquote(value).into_owned(),
        })
    }
}

/// An event and the filters it must pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint<E> {
    /// what happens: an event name (`spans`) or a probe (`live`)
    pub event: E,
    /// all must hold
    pub filters: Vec<Filter>,
}

/// Splits an endpoint into its event parts and its filters: the first part that holds an
/// operator starts the filters, and every part after it must be one.
pub fn split_filters(spec: &str) -> Result<(Vec<&str>, Vec<Filter>), RuleError> {
    if !quotes_closed(spec) {
        return Err(RuleError(format!("'{spec}': a quote is not closed")));
    }
    let all = parts(spec);
    let first = all.iter().position(|p| is_filter(p)).unwrap_or(all.len());
    let filters = all[first..]
        .iter()
        .map(|p| Filter::parse(p, spec))
        .collect::<Result<_, _>>()?;
    Ok((all[..first].to_vec(), filters))
}

/// The key of a rule: the start's fields and the end's fields, pairwise.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Key {
    /// fields of the start event
    pub start: Vec<String>,
    /// fields of the end event
    pub end: Vec<String>,
}

impl Key {
    /// `pid`, `pid=next_pid`, `a,b`, `a=x,b=y`; empty: every start pairs with the next end.
    pub fn parse(spec: &str) -> Result<Key, RuleError> {
        let mut key = Key::default();
        for part in spec.split(',').filter(|p| !p.is_empty()) {
            let (s, e) = part.split_once('=').unwrap_or((part, part));
            for f in [s, e] {
                if !is_identifier(f) {
                    return Err(RuleError(format!(
                        "--key '{spec}': '{f}' is not a field name"
                    )));
                }
            }
            key.start.push(s.to_string());
            key.end.push(e.to_string());
        }
        Ok(key)
    }

    /// Whether the key has no fields.
    pub fn is_empty(&self) -> bool {
        self.start.is_empty()
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .start
            .iter()
            .zip(&self.end)
            .map(|(s, e)| {
                if s == e {
                    s.clone()
                } else {
                    format!("{s}={e}")
                }
            })
            .collect();
        f.write_str(&parts.join(","))
    }
}

/// The longest span name.
pub const MAX_NAME: usize = 64;

/// A span name: letters, digits, `_ . - /`, at most [`MAX_NAME`] bytes.
pub fn check_name(name: &str) -> Result<(), RuleError> {
    if is_identifier(name) && name.len() <= MAX_NAME {
        Ok(())
    } else {
        Err(RuleError(format!(
            "'{name}' is not a span name (letters, digits, _ . - /; at most {MAX_NAME})"
        )))
    }
}

/// One span's rule: what starts it, what ends it, how the two pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanRule<E> {
    /// the span's name in results
    pub name: String,
    /// what starts it
    pub start: Endpoint<E>,
    /// what ends it
    pub end: Endpoint<E>,
    /// how starts and ends pair (empty: the next end closes the oldest start)
    pub key: Key,
}

/// `NAME=START..END` split into the name (if given) and the two endpoint texts. `kinds`: the
/// words an endpoint starts with (`usdt`, `tracepoint`, ...); when given, the separator is the
/// last `..` followed by `KIND:`, so that paths may hold `..` themselves.
pub fn split_span<'s>(
    spec: &'s str,
    kinds: &[&str],
) -> Result<(Option<&'s str>, &'s str, &'s str), RuleError> {
    let bad = || {
        RuleError(format!(
            "'{spec}': not NAME=START..END (see --help for the rule grammar)"
        ))
    };
    if !quotes_closed(spec) {
        return Err(RuleError(format!("'{spec}': a quote is not closed")));
    }
    // The name ends at the first `=` outside quotes, unless that `=` is part of a filter's
    // `==` (or the name would hold a `:`, `..` or a quote: then there is no name).
    let (name, body) = match find_unquoted(spec, "=").map(|i| (&spec[..i], &spec[i + 1..])) {
        Some((n, b))
            if !n.contains(':') && !n.contains("..") && !is_quoted(n) && !b.starts_with('=') =>
        {
            (Some(n), b)
        }
        _ => (None, spec),
    };
    let split = if kinds.is_empty() {
        find_unquoted(body, "..")
    } else {
        kinds
            .iter()
            .filter_map(|k| rfind_unquoted(body, &format!("..{k}:")))
            .max()
    };
    let split = split.ok_or_else(bad)?;
    let (start, end) = (&body[..split], &body[split + 2..]);
    if start.is_empty() || end.is_empty() {
        return Err(bad());
    }
    Ok((name, start, end))
}

/// The name a span gets when none is given: `START_to_END` after the last `:`-part of each
/// event (outside quotes; a character a span name cannot hold becomes `_`).
pub fn default_name(start: &str, end: &str) -> String {
    let last = |e: &str| {
        let part = parts(e).last().copied().unwrap_or("");
        let clean: String = unquote(part)
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "_.-/".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        clean
    };
    format!("{}_to_{}", last(start), last(end))
}

/// Parses `NAME=START..END` with `endpoint` reading each side; the name defaults to
/// [`default_name`] of the two events as `event_name` prints them.
pub fn parse_span<E>(
    spec: &str,
    kinds: &[&str],
    endpoint: impl Fn(&str) -> Result<Endpoint<E>, RuleError>,
    event_name: impl Fn(&E) -> String,
) -> Result<SpanRule<E>, RuleError> {
    let (name, start, end) = split_span(spec, kinds)?;
    let (start, end) = (endpoint(start)?, endpoint(end)?);
    let name = match name {
        Some(n) => {
            check_name(n)?;
            n.to_string()
        }
        None => default_name(&event_name(&start.event), &event_name(&end.event)),
    };
    Ok(SpanRule {
        name,
        start,
        end,
        key: Key::default(),
    })
}

/// The grammar, for `--help` of both commands.
pub const GRAMMAR_HELP: &str = "\
Rules (the same grammar in `latscope spans` and `latscope live`):
  --span NAME=START..END     NAME: letters, digits, _ . - / (optional: START_to_END)
  START, END                 an event, then filters, all joined by ':'
                               spans: sched:sched_wakeup (a trace's event name)
                               live:  tracepoint:sched:sched_wakeup, kprobe:FUNC, kretprobe:FUNC,
                                      usdt:PATH:PROVIDER:NAME, uprobe:PATH:FUNC, uretprobe:PATH:FUNC
  filters                    FIELD==VALUE, FIELD!=VALUE, FIELD^=VALUE (starts with), all must hold:
                               sched:sched_switch:prev_state==R:next_comm!=swapper/0
  quotes                     a value or event name with ':', ',', '..', '=' or quotes goes in
                               '...' or \"...\" inside the rule; a space needs only the
                               shell's quotes around the whole argument:
                               --start 'sched:sched_wakeup:comm==lat worker 1'
                               --start 'sched:sched_wakeup:comm==\"kworker/0:1\"'
                               --span 'post=\"SequenceManager PostTask\"..\"ThreadControllerImpl::RunTask\"'
  --key FIELD[=FIELD][,...]  pairs a start's field with an end's: --key pid=next_pid pairs a
                               wake-up's pid with the switch that runs it; a comma list pairs
                               several (--key context,seqno)
  fields                     a trace's or tracepoint's field names (tracefs format files), and
                               comm, pid, tid; live also argN (probe arguments) and retval
                               (kretprobe, uretprobe). A tracepoint's own field wins over the
                               task's: sched_wakeup's pid is the woken task's.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_split_from_the_event_at_the_first_operator() {
        let (event, filters) =
            split_filters("sched:sched_switch:prev_state^=R:next_comm!=swapper/0").unwrap();
        assert_eq!(event, ["sched", "sched_switch"]);
        assert_eq!(filters.len(), 2);
        assert_eq!(filters[0].op, Op::Prefix);
        assert_eq!(filters[1].value, "swapper/0");
        assert_eq!(filters[1].to_string(), "next_comm!=swapper/0");
        assert!(split_filters("a:x==1:notafilter").is_err());
        assert!(split_filters("a:{x}==1").is_err());
    }

    #[test]
    fn separators_inside_quotes_separate_nothing() {
        assert_eq!(parts("a:'b:c':x==\"1:2\""), ["a", "'b:c'", "x==\"1:2\""]);
        assert!(!is_filter("\"a==b\""));
        assert!(is_filter("x==\"a b\""));
        assert_eq!(unquote("x'y:z'\"w\""), "xy:zw");
        let f = Filter::parse("comm==\"lat worker 1\"", "s").unwrap();
        assert_eq!(f.value, "lat worker 1");
        let f = Filter::parse("comm!='a==b'", "s").unwrap();
        assert_eq!((f.op, f.value.as_str()), (Op::Ne, "a==b"));
        assert!(Filter::parse("comm==\"open", "s").is_err());
        let (name, s, e) = split_span("n=a:v=='x..y'..'b..c'", &[]).unwrap();
        assert_eq!((name, s, e), (Some("n"), "a:v=='x..y'", "'b..c'"));
        assert!(split_span("\"a..b", &[]).is_err());
        assert_eq!(default_name("'a b'", "c:'d::e'"), "a_b_to_d__e");
    }

    #[test]
    fn keys_pair_fields_of_different_names() {
        let k = Key::parse("pid=next_pid,cpu").unwrap();
        assert_eq!(k.start, ["pid", "cpu"]);
        assert_eq!(k.end, ["next_pid", "cpu"]);
        assert_eq!(k.to_string(), "pid=next_pid,cpu");
        assert!(Key::parse("a;b").is_err());
        assert!(Key::parse("").unwrap().is_empty());
    }

    #[test]
    fn spans_split_at_the_separator_before_a_probe_kind_when_kinds_are_given() {
        let (name, s, e) = split_span("x=usdt:../bin/t:p:a..usdt:../bin/t:p:b", &["usdt"]).unwrap();
        assert_eq!(
            (name, s, e),
            (Some("x"), "usdt:../bin/t:p:a", "usdt:../bin/t:p:b")
        );
        let (name, s, e) = split_span("sched:sched_wakeup..sched:sched_switch", &[]).unwrap();
        assert_eq!(
            (name, s, e),
            (None, "sched:sched_wakeup", "sched:sched_switch")
        );
        // A filter's `==` is not the name's `=`.
        let (name, s, _) = split_span("a:comm==x..b", &[]).unwrap();
        assert_eq!((name, s), (None, "a:comm==x"));
        assert!(split_span("run=a", &[]).is_err());
        assert!(split_span("run=..b", &[]).is_err());
    }

    #[test]
    fn a_span_without_a_name_is_named_after_its_events() {
        let rule = parse_span(
            "sched:sched_wakeup..sched:sched_switch",
            &[],
            |s| {
                let (event, filters) = split_filters(s)?;
                Ok(Endpoint {
                    event: event.join(":"),
                    filters,
                })
            },
            String::clone,
        )
        .unwrap();
        assert_eq!(rule.name, "sched_wakeup_to_sched_switch");
        assert!(check_name("{bad}").is_err());
        assert!(check_name(&"n".repeat(65)).is_err());
        assert!(check_name("run/queue-1.x").is_ok());
    }
}
