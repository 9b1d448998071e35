//! Call traces that carry their own durations: `strace -T` (`-f`, `-ttt`), `ltrace -T` and
//! `perf trace`. Each call is a span of its own, named after the call:
//!
//! ```text
//! 9311  1795581919.713550 brk(NULL)       = 0x55e62eaee000 <0.000011>          strace -f -ttt -T
//! 9311  1795581919.783984 rt_sigprocmask(SIG_SETMASK, [],  <unfinished ...>
//! 9311  1795581919.784029 <... rt_sigprocmask resumed>NULL, 8) = 0 <0.000023>
//! [pid 9476] 1795581926.536652 malloc(100)         = 0x5646ae6862a0 <0.000286>  ltrace -f -ttt -T
//!      1.020 ( 0.024 ms): lc/9554 mmap(len: 8192, ...) = 0x7fdae479b000          perf trace
//! ```
//!
//! The duration is the tracer's own (`<seconds>` of `-T`: "the time difference between the
//! beginning and the end of each system call", or perf trace's `( ms)`); the start is the
//! call's stamp. A call interrupted by another task's output (`<unfinished ...>`) is joined
//! with its `<... NAME resumed>` line of the same pid (the innermost unfinished call of that
//! name): it starts at the first line and takes the duration of the second. A call that never
//! returns (`exit_group(0) = ?`) or is never resumed is unmatched. Signals (`--- SIG ---`) and
//! exits (`+++ exited +++`) are skipped. Without `-ttt` (ltrace's default) a call has no stamp
//! and starts at 0; `-t`/`-tt` stamps (time of day) are read too.

use rustc_hash::FxHashMap;

use super::Parsed;
use super::rules::Pairer;
use crate::span::{Group, Outcome, SeriesKey, SpanSink};

/// Which tracer wrote a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tracer {
    /// `strace -T` or `ltrace -T` (one layout)
    Strace,
    /// `perf trace`
    PerfTrace,
}

/// State across lines: calls waiting for their `resumed` line, per pid.
#[derive(Debug, Default)]
pub struct Syscalls {
    pending: FxHashMap<String, Vec<(usize, u64, Group)>>,
    /// spans read
    pub spans: u64,
}

/// One line, split.
struct Call<'l> {
    pid: &'l str,
    ts: u64,
    /// the rest after the pid and stamp
    rest: &'l str,
}

/// `<0.000011>` at the end of `text`: nanoseconds.
fn duration(text: &str) -> Option<u64> {
    let t = text.trim_end();
    let open = t.rfind('<')?;
    super::seconds_to_ns(t[open + 1..].strip_suffix('>')?)
}

/// `HH:MM:SS[.frac]` (strace -t, -tt) or `SECONDS.frac` (-ttt).
fn stamp(token: &str) -> Option<u64> {
    if token.bytes().filter(|&b| b == b':').count() == 2 {
        let mut p = token.splitn(3, ':');
        let h: u64 = p.next()?.parse().ok()?;
        let m: u64 = p.next()?.parse().ok()?;
        let s = super::seconds_to_ns(p.next()?)?;
        // checked before the sum (`then_some` computed it first: an overflow panic in the
        // fuzzer's build on an hour of 179558191), and the seconds may be any number
        if h >= 24 || m >= 60 {
            return None;
        }
        return ((h * 3600 + m * 60) * 1_000_000_000).checked_add(s);
    }
    if token.contains('.') {
        super::seconds_to_ns(token)
    } else {
        None
    }
}

fn is_digits(t: &str) -> bool {
    !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit())
}

/// A strace/ltrace line: `[[pid N] | N ] [STAMP] REST`.
fn split(line: &str) -> Option<Call<'_>> {
    let mut rest = line.trim_start();
    let mut pid = "";
    if let Some(r) = rest.strip_prefix("[pid") {
        let close = r.find(']')?;
        pid = r[..close].trim();
        rest = r[close + 1..].trim_start();
    } else if let Some((first, r)) = rest.split_once(' ')
        && is_digits(first)
    {
        pid = first;
        rest = r.trim_start();
    }
    let mut ts = 0;
    if let Some((first, r)) = rest.split_once(' ')
        && let Some(t) = stamp(first)
    {
        ts = t;
        rest = r.trim_start();
    }
    Some(Call { pid, ts, rest })
}

/// The call's name: what comes before `(`, without spaces.
fn call_name(rest: &str) -> Option<&str> {
    let open = rest.find('(')?;
    let name = &rest[..open];
    (!name.is_empty() && !name.contains(char::is_whitespace)).then_some(name)
}

/// Whether `line` is a strace/ltrace line (for detection).
pub fn is_strace(line: &str) -> bool {
    let Some(c) = split(line) else {
        return false;
    };
    let r = c.rest;
    (call_name(r).is_some() && (duration(r).is_some() || r.ends_with("<unfinished ...>")))
        || (r.starts_with("<... ") && r.contains(" resumed>"))
}

/// `     1.020 ( 0.024 ms): comm/tid name(args) = ret`: `(start ns, duration ns, pid, rest)`;
/// no duration (`(         ):`) for a call that did not return.
fn perf_trace(line: &str) -> Option<(u64, Option<u64>, &str, &str)> {
    let t = line.trim_start();
    let (start, r) = t.split_once(" (")?;
    let (dur, r) = r.split_once("): ")?;
    let start = super::decimal_to_ns(start.trim(), 1_000_000)?;
    let dur = match dur.trim() {
        "" => None,
        d => Some(super::decimal_to_ns(
            d.strip_suffix("ms")?.trim(),
            1_000_000,
        )?),
    };
    let (task, rest) = r.trim_start().split_once(' ')?;
    let pid = task.rsplit_once('/').map_or(task, |(_, p)| p);
    Some((start, dur, pid, rest.trim_start()))
}

/// Whether `line` is a `perf trace` line (for detection).
pub fn is_perf_trace(line: &str) -> bool {
    perf_trace(line).is_some() || line.trim_start().starts_with("? (")
}

impl Syscalls {
    /// One line (number `no`) of `tracer`'s output: a span into `sink`, or why not.
    pub fn line(
        &mut self,
        tracer: Tracer,
        line: &str,
        pairer: &mut Pairer,
        sink: &mut impl SpanSink,
    ) -> Parsed {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            return Parsed::Skip;
        }
        match tracer {
            Tracer::Strace => self.strace(t, pairer, sink),
            Tracer::PerfTrace => self.perf(t, pairer, sink),
        }
    }

    fn perf(&mut self, line: &str, pairer: &mut Pairer, sink: &mut impl SpanSink) -> Parsed {
        // `? (         ): lc/9554  ... [continued]: execve())`: the rest of a call whose start
        // was before the trace; no duration.
        if line.starts_with("? (") {
            return Parsed::Skip;
        }
        let Some((start, dur, pid, rest)) = perf_trace(line) else {
            return Parsed::Malformed("not START ( DURATION ms): COMM/TID CALL(...)");
        };
        let Some(name) = call_name(rest) else {
            return Parsed::Malformed("no CALL( after the task");
        };
        let group = group(pairer, pid);
        let span = pairer.span_id(name);
        match dur {
            Some(d) => self.sample(span, group, start, d, sink),
            None => sink.outcome(&series(span, group), Outcome::Unmatched),
        }
        Parsed::Event
    }

    fn strace(&mut self, line: &str, pairer: &mut Pairer, sink: &mut impl SpanSink) -> Parsed {
        let Some(c) = split(line) else {
            return Parsed::Malformed("an unclosed [pid N]");
        };
        let r = c.rest;
        if (r.starts_with("+++ ") && r.ends_with("+++"))
            || (r.starts_with("--- ") && r.ends_with("---"))
        {
            return Parsed::Skip;
        }
        if let Some(resumed) = r.strip_prefix("<... ") {
            let Some((name, _)) = resumed.split_once(" resumed>") else {
                return Parsed::Malformed("'<... NAME' without 'resumed>'");
            };
            let span = pairer.span_id(name);
            let stack = self.pending.get_mut(c.pid);
            let begun = stack.and_then(|st| {
                let at = st.iter().rposition(|b| b.0 == span)?;
                Some(st.remove(at))
            });
            if self.pending.get(c.pid).is_some_and(Vec::is_empty) {
                self.pending.remove(c.pid);
            }
            match (begun, duration(r)) {
                (Some((span, start, group)), Some(d)) => self.sample(span, group, start, d, sink),
                (Some((span, _, group)), None) => {
                    sink.outcome(&series(span, group), Outcome::Unmatched)
                }
                (None, _) => sink.outcome(&series(span, Group::All), Outcome::OrphanEnd),
            }
            return Parsed::Event;
        }
        let Some(name) = call_name(r) else {
            return Parsed::Malformed("no CALL( after the pid and stamp");
        };
        let span = pairer.span_id(name);
        let group = group(pairer, c.pid);
        if r.ends_with("<unfinished ...>") {
            self.pending
                .entry(c.pid.to_string())
                .or_default()
                .push((span, c.ts, group));
            return Parsed::Event;
        }
        match duration(r) {
            Some(d) => self.sample(span, group, c.ts, d, sink),
            None if r.trim_end().ends_with("= ?") => {
                sink.outcome(&series(span, group), Outcome::Unmatched);
            }
            None => return Parsed::Malformed("no <SECONDS> at the end: trace with -T"),
        }
        Parsed::Event
    }

    fn sample(&mut self, span: usize, group: Group, start: u64, d: u64, sink: &mut impl SpanSink) {
        sink.sample(&series(span, group), start, d);
        self.spans += 1;
    }

    /// The input ended: calls never resumed are unmatched.
    pub fn finish(&mut self, sink: &mut impl SpanSink) {
        for (_, stack) in self.pending.drain() {
            for (span, _, group) in stack {
                sink.outcome(&series(span, group), Outcome::Unmatched);
            }
        }
    }
}

fn series(span: usize, group: Group) -> SeriesKey {
    SeriesKey {
        span,
        side: None,
        group,
    }
}

/// `--by pid` splits by the task; any other field is unknown here.
fn group(pairer: &mut Pairer, pid: &str) -> Group {
    match pairer.by() {
        Some(by) if by == "pid" || by == "tid" => pairer.group_of(pid),
        Some(_) => pairer.group_of("?"),
        None => Group::All,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::trace::rules::Repeat;
    use crate::span::Kept;

    #[test]
    fn a_clock_stamp_out_of_range_or_past_2_64_ns_is_not_a_stamp() {
        assert_eq!(stamp("10:20:30.5"), Some(37_230_500_000_000));
        assert_eq!(stamp("1698765432.123456"), Some(1_698_765_432_123_456_000));
        for bad in [
            "179558191:90:97",
            "24:00:00",
            "23:60:00",
            "23:59:18446744073.709551615",
        ] {
            assert_eq!(stamp(bad), None, "{bad}");
        }
    }

    fn read(tracer: Tracer, text: &str) -> (Vec<(String, u64, u64)>, Vec<Parsed>) {
        let mut pairer = Pairer::new(Vec::new(), Vec::new(), None, Repeat::KeepLast);
        let mut sink = Kept::new(100);
        let mut s = Syscalls::default();
        let parsed = text
            .lines()
            .map(|l| s.line(tracer, l, &mut pairer, &mut sink))
            .collect();
        s.finish(&mut sink);
        let names = pairer.span_names().borrow().clone();
        let spans = sink
            .spans
            .iter()
            .map(|k| (names[k.key.span].clone(), k.start_ns, k.latency_ns))
            .collect();
        (spans, parsed)
    }

    #[test]
    fn strace_calls_are_spans_and_unfinished_calls_join_their_resumed_line() {
        let text = "\
9311  1795581919.713550 brk(NULL)       = 0x55e62eaee000 <0.000011>
9311  1795581919.783984 rt_sigprocmask(SIG_SETMASK, [],  <unfinished ...>
9313  1795581919.784009 set_robust_list(0x7fb196e26a20, 24 <unfinished ...>
9311  1795581919.784029 <... rt_sigprocmask resumed>NULL, 8) = 0 <0.000023>
9313  1795581919.784048 <... set_robust_list resumed>) = 0 <0.000030>
9313  1795581919.788027 exit_group(0)   = ?
9313  1795581919.788396 +++ exited with 0 +++
[pid  9476] 1795581926.536652 malloc(100)         = 0x5646ae6862a0 <0.000286>
free(0x55df330fb310)                             = <void> <0.000293>
9311  1795581919.9 read(3, \"a\", 1) = 1
";
        let (spans, parsed) = read(Tracer::Strace, text);
        assert_eq!(
            spans,
            [
                ("brk".into(), 1_795_581_919_713_550_000, 11_000),
                ("rt_sigprocmask".into(), 1_795_581_919_783_984_000, 23_000),
                ("set_robust_list".into(), 1_795_581_919_784_009_000, 30_000),
                ("malloc".into(), 1_795_581_926_536_652_000, 286_000),
                ("free".into(), 0, 293_000),
            ]
        );
        assert_eq!(parsed[6], Parsed::Skip);
        assert!(matches!(parsed[9], Parsed::Malformed(_)));
        assert!(is_strace(
            "9311  1795581919.713550 brk(NULL) = 0x5 <0.000011>"
        ));
        assert!(!is_strace("ts,name,key"));
    }

    #[test]
    fn perf_trace_calls_are_spans() {
        let text = "\
         ? (         ): lc/9554  ... [continued]: execve())                                           = 0
     1.020 ( 0.024 ms): lc/9554 mmap(len: 8192, prot: READ|WRITE)           = 0x7fdae479b000
";
        let (spans, parsed) = read(Tracer::PerfTrace, text);
        assert_eq!(spans, [("mmap".into(), 1_020_000, 24_000)]);
        assert_eq!(parsed[0], Parsed::Skip);
    }
}
