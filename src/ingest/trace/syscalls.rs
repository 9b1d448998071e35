//! Call traces that carry their own durations: `strace -T` (`-f`, `-ttt`), `ltrace -T` and
//! `perf trace`. Each call is a span of its own, named after the call:
//!
//! ```text
//! 9311  1795581919.713550 brk(NULL)       = 0x55e62eaee000 <0.000011>          strace -f -ttt -T
//! 9311  1795581919.783984 rt_sigprocmask(SIG_SETMASK, [],  <unfinished ...>
//! 9311  1795581919.784029 <... rt_sigprocmask resumed>NULL, 8) = 0 <0.000023>
//! [pid 9476] 1795581926.536652 malloc(100)         = 0x5646ae6862a0 <0.000286>  ltrace -f -ttt -T
//!      1.020 ( 0.024 ms): lc/9554 mmap(len: 8192, ...) = 0x7fdae479b000          perf trace
//!      0.167 (         ): multi/15785 clock_nanosleep(rqtp: 0x7f5c9f5b6e70)   ...
//!      0.167 ( 3.128 ms): multi/15785  ... [continued]: clock_nanosleep())   = 0
//!      0.041 ( 0.024 ms): openat(dfd: CWD, filename: 0x119d9004)   = 3     perf trace -p, one thread
//! ```
//!
//! The duration is the tracer's own (`<seconds>` of `-T`: "the time difference between the
//! beginning and the end of each system call", or perf trace's `( ms)`); the start is the
//! call's stamp. A call interrupted by another task's output (`<unfinished ...>`) is joined
//! with its `<... NAME resumed>` line of the same pid (the innermost unfinished call of that
//! name): it starts at the first line and takes the duration of the second. perf trace's
//! interrupted call (`(         ): ... CALL(...) ...`) ends in a `... [continued]: CALL())`
//! line that repeats its start and gives its duration: that line is the span. A call that
//! never returns (`exit_group(0) = ?`) or is never resumed is unmatched; an end whose start was
//! before the trace (`? (         ): ... [continued]`, a `resumed` line alone) is an orphan end.
//! Signals (`--- SIG ---`) and exits (`+++ exited +++`) are skipped. Without `-ttt` (ltrace's
//! default) a call has no stamp and starts at 0; `-t`/`-tt` stamps (time of day) are read too.
//!
//! A line may name no task: strace without `-f`, and `perf trace -p` of a process of one
//! thread (perf leaves its `COMM/TID` column out then). Its calls are all of the one traced
//! task: they are keyed (and grouped by `--by pid`) as [`ONE_TASK`].
//!
//! `strace -p` stopped (Ctrl-C, `timeout`) detaches: the calls then in progress end in
//! `<detached ...>`, or stay `<unfinished ...>` on other threads. Each is a call cut off,
//! counted unmatched, and said once ([`Syscalls::detached`]); never a malformed line, whose
//! advice (trace with `-T`) would be false. Without `-o`, strace's own messages (`strace:
//! Process N attached`, `... detached`) share the trace's stream and may cut a call's line in
//! two; the part before a `detached` message is the call cut off, the ` <detached ...>` after
//! it is skipped.

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

/// The key of the task of a line that names none: the tracer traced one task.
pub const ONE_TASK: &str = "traced";

/// State across lines: calls waiting for their `resumed` (or `[continued]`) line, per pid.
#[derive(Debug, Default)]
pub struct Syscalls {
    pending: FxHashMap<String, Vec<(usize, u64, Group)>>,
    /// spans read
    pub spans: u64,
    /// calls in progress when the trace ended (never resumed, or cut off by strace's detach):
    /// counted unmatched
    pub in_progress: u64,
    /// strace detached from the traced process (`strace -p` stopped)
    pub detached: bool,
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

/// A `perf trace` line, split.
struct PerfLine<'l> {
    /// `None`: `?`, a call begun before the trace
    start: Option<u64>,
    /// `None`: `(         )`, a call that has not returned (yet)
    dur: Option<u64>,
    /// the tid, or [`ONE_TASK`] where the line names no task
    task: &'l str,
    /// `... [continued]: CALL())`: the end of a call printed before
    continued: bool,
    /// from the call's name on
    call: &'l str,
}

/// `     1.020 ( 0.024 ms): [COMM/TID ][... [continued]: ]CALL(ARGS) = RET`
fn perf_trace(line: &str) -> Option<PerfLine<'_>> {
    let t = line.trim_start();
    let (start, r) = t.split_once(" (")?;
    let (dur, r) = r.split_once("): ")?;
    let start = match start.trim() {
        "?" => None,
        s => Some(super::decimal_to_ns(s, 1_000_000)?),
    };
    let dur = match dur.trim() {
        "" => None,
        d => Some(super::decimal_to_ns(
            d.strip_suffix("ms")?.trim(),
            1_000_000,
        )?),
    };
    let r = r.trim_start();
    let (task, r) = match r.split_once(' ') {
        Some((first, rest)) if let Some(tid) = tid_of(first) => (tid, rest.trim_start()),
        _ => (ONE_TASK, r),
    };
    let (continued, call) = match r.strip_prefix("... [continued]: ") {
        Some(call) => (true, call),
        None => (false, r),
    };
    Some(PerfLine {
        start,
        dur,
        task,
        continued,
        call,
    })
}

/// The tid of perf trace's `COMM/TID` column; `None` where `token` is not one (the call of a
/// line without that column: `openat(dfd:`).
fn tid_of(token: &str) -> Option<&str> {
    let (comm, tid) = token.rsplit_once('/')?;
    // (a comm may hold `(` and `/`, as `(sd-pam)` and `kworker/0:1` do; a call's name before
    // its `(` is a word)
    let call = token.find('(').is_some_and(|open| {
        open > 0
            && token[..open]
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_')
    });
    (!comm.is_empty() && is_digits(tid) && !call).then_some(tid)
}

/// Whether `line` is a `perf trace` line (for detection).
pub fn is_perf_trace(line: &str) -> bool {
    perf_trace(line).is_some_and(|l| call_name(l.call).is_some())
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
        let Some(l) = perf_trace(line) else {
            return Parsed::Malformed("not START ( DURATION ms): [COMM/TID] CALL(...)");
        };
        let Some(name) = call_name(l.call) else {
            return Parsed::Malformed("no CALL( after the task");
        };
        let span = pairer.span_id(name);
        let group = group(pairer, l.task);
        if l.continued {
            // (its `...` line began it: no longer in progress; this line has its start)
            self.resume(l.task, span);
        }
        match (l.start, l.dur) {
            (Some(start), Some(d)) => self.sample(span, group, start, d, sink),
            (None, _) if l.continued => sink.outcome(&series(span, group), Outcome::OrphanEnd),
            (None, _) => return Parsed::Malformed("a `?` start on a call not [continued]"),
            (Some(start), None) if !l.continued && l.call.trim_end().ends_with("...") => {
                self.pending
                    .entry(l.task.to_string())
                    .or_default()
                    .push((span, start, group));
            }
            (Some(_), None) => sink.outcome(&series(span, group), Outcome::Unmatched),
        }
        Parsed::Event
    }

    /// The innermost call named `span` in progress on `pid`, which a line now ends.
    fn resume(&mut self, pid: &str, span: usize) -> Option<(usize, u64, Group)> {
        let stack = self.pending.get_mut(pid)?;
        let at = stack.iter().rposition(|b| b.0 == span)?;
        let begun = stack.remove(at);
        if stack.is_empty() {
            self.pending.remove(pid);
        }
        Some(begun)
    }

    fn strace(&mut self, line: &str, pairer: &mut Pairer, sink: &mut impl SpanSink) -> Parsed {
        if let Some(at) = line.find(MESSAGE)
            && line[at + MESSAGE.len()..].starts_with(|c: char| c.is_ascii_digit())
        {
            return self.strace_message(&line[..at], &line[at..], pairer, sink);
        }
        let Some(c) = split(line) else {
            return Parsed::Malformed("an unclosed [pid N]");
        };
        let r = c.rest;
        if (r.starts_with("+++ ") && r.ends_with("+++"))
            || (r.starts_with("--- ") && r.ends_with("---"))
        {
            return Parsed::Skip;
        }
        if r == DETACHED {
            // the end of a call's line that strace's `detached` message cut: counted there
            self.detached = true;
            return Parsed::Skip;
        }
        if let Some(resumed) = r.strip_prefix("<... ") {
            let Some((name, _)) = resumed.split_once(" resumed>") else {
                return Parsed::Malformed("'<... NAME' without 'resumed>'");
            };
            let span = pairer.span_id(name);
            match (self.resume(task(c.pid), span), duration(r)) {
                (Some((span, start, group)), Some(d)) => self.sample(span, group, start, d, sink),
                (Some((span, _, group)), None) if r.ends_with(DETACHED) => {
                    self.cut_off(span, group, sink)
                }
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
        let group = group(pairer, task(c.pid));
        if r.ends_with("<unfinished ...>") {
            self.pending
                .entry(task(c.pid).to_string())
                .or_default()
                .push((span, c.ts, group));
            return Parsed::Event;
        }
        match duration(r) {
            Some(d) => self.sample(span, group, c.ts, d, sink),
            None if r.trim_end().ends_with("= ?") => {
                sink.outcome(&series(span, group), Outcome::Unmatched);
            }
            None if r.ends_with(DETACHED) => self.cut_off(span, group, sink),
            None => return Parsed::Malformed("no <SECONDS> at the end: trace with -T"),
        }
        Parsed::Event
    }

    /// A line with strace's own message (`strace: Process N attached`, `... detached`),
    /// after `head`: the start of a call's line that the message cut, or nothing.
    fn strace_message(
        &mut self,
        head: &str,
        message: &str,
        pairer: &mut Pairer,
        sink: &mut impl SpanSink,
    ) -> Parsed {
        let detached = message.trim_end().ends_with(" detached");
        self.detached |= detached;
        if head.trim().is_empty() {
            return Parsed::Skip;
        }
        let call = split(head).and_then(|c| Some((c.pid, call_name(c.rest)?)));
        match call {
            Some((pid, name)) if detached => {
                let span = pairer.span_id(name);
                let group = group(pairer, task(pid));
                self.cut_off(span, group, sink);
                Parsed::Event
            }
            _ => Parsed::Malformed("a line cut in two by strace's own message: trace with -o FILE"),
        }
    }

    /// A call cut off by strace's detach: in progress when the trace ended.
    fn cut_off(&mut self, span: usize, group: Group, sink: &mut impl SpanSink) {
        self.detached = true;
        self.in_progress += 1;
        sink.outcome(&series(span, group), Outcome::Unmatched);
    }

    fn sample(&mut self, span: usize, group: Group, start: u64, d: u64, sink: &mut impl SpanSink) {
        sink.sample(&series(span, group), start, d);
        self.spans += 1;
    }

    /// The input ended: calls never resumed are unmatched, and in progress.
    pub fn finish(&mut self, sink: &mut impl SpanSink) {
        for (_, stack) in self.pending.drain() {
            for (span, _, group) in stack {
                self.in_progress += 1;
                sink.outcome(&series(span, group), Outcome::Unmatched);
            }
        }
    }
}

/// How strace's own messages about the processes it traces begin.
const MESSAGE: &str = "strace: Process ";

/// How strace ends the line of a call in progress when it detaches.
const DETACHED: &str = "<detached ...>";

/// The key of a line's task: its pid, or [`ONE_TASK`] where it names none.
fn task(pid: &str) -> &str {
    if pid.is_empty() { ONE_TASK } else { pid }
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
    use crate::span::{Aggregator, Counters, Kept};

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

    /// What reading `text` gave: spans `(name, start, latency)`, each line's verdict, the
    /// outcomes by span name, and the state at the end.
    struct Read {
        spans: Vec<(String, u64, u64)>,
        parsed: Vec<Parsed>,
        counters: Vec<(String, Counters)>,
        state: Syscalls,
    }

    fn read_by(tracer: Tracer, text: &str, by: Option<&str>) -> Read {
        let mut pairer = Pairer::new(
            Vec::new(),
            Vec::new(),
            by.map(str::to_string),
            Repeat::KeepLast,
        );
        let mut sink = (Kept::new(1000), Aggregator::new(Vec::new(), None));
        let mut state = Syscalls::default();
        let parsed = text
            .lines()
            .map(|l| state.line(tracer, l, &mut pairer, &mut sink))
            .collect();
        state.finish(&mut sink);
        let names = pairer.span_names().borrow().clone();
        let labels = pairer.labels().borrow().clone();
        let (kept, aggregator) = sink;
        let spans = kept
            .spans
            .iter()
            .map(|k| (names[k.key.span].clone(), k.start_ns, k.latency_ns))
            .collect();
        let counters = aggregator
            .sorted()
            .into_iter()
            .filter(|(_, series)| !series.counters.is_empty())
            .map(|(key, series)| {
                let name = match key.group {
                    Group::Label(i) => format!("{}[{}]", names[key.span], labels[i as usize]),
                    _ => names[key.span].clone(),
                };
                (name, series.counters)
            })
            .collect();
        Read {
            spans,
            parsed,
            counters,
            state,
        }
    }

    fn read(tracer: Tracer, text: &str) -> (Vec<(String, u64, u64)>, Vec<Parsed>) {
        let r = read_by(tracer, text, None);
        (r.spans, r.parsed)
    }

    fn counted(unmatched: u64, orphan_ends: u64) -> Counters {
        Counters {
            unmatched,
            orphan_ends,
            ..Counters::default()
        }
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
        let r = read_by(Tracer::PerfTrace, text, None);
        assert_eq!(r.spans, [("mmap".into(), 1_020_000, 24_000)]);
        // the end of a call begun before the trace
        assert_eq!(r.parsed[0], Parsed::Event);
        assert_eq!(r.counters, [("execve".into(), counted(0, 1))]);
    }

    #[test]
    fn a_perf_trace_call_continued_is_one_span_of_perfs_own_start_and_duration() {
        // `perf trace -p` of a process of three threads (tests/data/traces/threads.perf-trace.txt)
        let text = "\
    30.373 (         ): threads/7892 clock_nanosleep(rqtp: 0x7f64b1adde70)                              ...
    40.565 ( 0.017 ms): threads/7889 futex(uaddr: 0x55d8a948f0cc, op: WAKE|PRIVATE_FLAG, val: 2147483647)  = 1
    40.608 (         ): threads/7889 clock_nanosleep(rqtp: 0x7ffd4d1a3b50)                              ...
    30.373 (30.181 ms): threads/7892  ... [continued]: clock_nanosleep())                                  = 0
   648.289 (         ): threads/7890 futex(uaddr: 0x55d8a948f0c8, op: WAIT_BITSET|PRIVATE_FLAG|CLOCK_REALTIME, val3: MATCH_ANY) ...
";
        let r = read_by(Tracer::PerfTrace, text, Some("pid"));
        assert!(
            r.parsed.iter().all(|p| *p == Parsed::Event),
            "{:?}",
            r.parsed
        );
        assert_eq!(
            r.spans,
            [
                ("futex".into(), 40_565_000, 17_000),
                ("clock_nanosleep".into(), 30_373_000, 30_181_000),
            ]
        );
        // never continued: in progress when perf trace stopped
        assert_eq!(
            r.counters,
            [
                ("clock_nanosleep[7889]".into(), counted(1, 0)),
                ("futex[7890]".into(), counted(1, 0)),
            ]
        );
        assert_eq!((r.state.in_progress, r.state.detached), (2, false));
    }

    #[test]
    fn perf_trace_lines_of_a_process_of_one_thread_name_no_task_and_are_the_traced_one() {
        // `perf trace -p` of a process of one thread (tests/data/traces/onethread.perf-trace.txt)
        let text = "\
         ? (         ):  ... [continued]: clock_nanosleep())                                  = 0
     0.038 ( 0.031 ms): openat(dfd: CWD, filename: 0x530c1004)                                = 3
     0.081 ( 0.015 ms): read(fd: 3</etc/hostname>, buf: 0x7ffc04e8a0b0, count: 64)            = 3
     1.500 ( 0.011 ms): (sd-pam)/77 getpid()                                                 = 77
     1.600 ( 0.011 ms): kworker/0:1/12 getpid()                                              = 12
";
        let r = read_by(Tracer::PerfTrace, text, Some("pid"));
        assert!(
            r.parsed.iter().all(|p| *p == Parsed::Event),
            "{:?}",
            r.parsed
        );
        assert_eq!(
            r.spans,
            [
                ("openat".into(), 38_000, 31_000),
                ("read".into(), 81_000, 15_000),
                ("getpid".into(), 1_500_000, 11_000),
                ("getpid".into(), 1_600_000, 11_000),
            ]
        );
        assert_eq!(
            r.counters,
            [(format!("clock_nanosleep[{ONE_TASK}]"), counted(0, 1))]
        );
        for line in text.lines() {
            assert!(is_perf_trace(line), "{line}");
        }
    }

    #[test]
    fn a_call_cut_off_by_straces_detach_is_unmatched_and_said_never_malformed() {
        // `strace -f -T -tt -p PID -o F` stopped by `timeout -s INT`
        // (tests/data/traces/threads-o.strace.txt)
        let text = "\
8322  18:50:13.102345 futex(0x5649a5c970cc, FUTEX_WAIT_BITSET_PRIVATE|FUTEX_CLOCK_REALTIME, 0, NULL, FUTEX_BITSET_MATCH_ANY <unfinished ...>
8323  18:50:13.112464 read(3, \"vm\\n\", 64) = 3 <0.000012>
8323  18:50:13.112528 clock_nanosleep(CLOCK_REALTIME, 0, {tv_sec=0, tv_nsec=30000000},  <detached ...>
";
        let r = read_by(Tracer::Strace, text, None);
        assert!(
            r.parsed.iter().all(|p| *p == Parsed::Event),
            "{:?}",
            r.parsed
        );
        assert_eq!(r.spans, [("read".into(), 67_813_112_464_000, 12_000)]);
        assert_eq!(
            r.counters,
            [
                ("futex".into(), counted(1, 0)),
                ("clock_nanosleep".into(), counted(1, 0)),
            ]
        );
        assert_eq!((r.state.in_progress, r.state.detached), (2, true));
    }

    #[test]
    fn straces_own_messages_are_skipped_and_the_call_a_detach_message_cuts_is_cut_off() {
        // `strace -f -T -tt -p PID 2> F` stopped by `timeout -s INT`: strace's messages share
        // the trace's stream (tests/data/traces/threads.strace.txt)
        let text = "\
strace: Process 7889 attached with 3 threads
[pid  7890] 18:50:00.110534 <... futex resumed>) = 0 <0.000045>
[pid  7890] 18:50:00.110550 futex(0x55d8a948f0cc, FUTEX_WAIT_BITSET_PRIVATE|FUTEX_CLOCK_REALTIME, 0, NULL, FUTEX_BITSET_MATCH_ANYstrace: Process 7889 detached
strace: Process 7890 detached
 <detached ...>
strace: Process 7892 detached
[pid  7891] 18:50:00.2 write(1, \"strace: Process 1\", 17strace: Process 7893 attached
";
        let r = read_by(Tracer::Strace, text, None);
        assert_eq!(
            r.parsed,
            [
                Parsed::Skip,
                Parsed::Event,
                Parsed::Event,
                Parsed::Skip,
                Parsed::Skip,
                Parsed::Skip,
                Parsed::Malformed("a line cut in two by strace's own message: trace with -o FILE"),
            ]
        );
        // the futex resumed first began before the trace
        assert_eq!(r.counters, [("futex".into(), counted(1, 1))]);
        assert_eq!((r.state.in_progress, r.state.detached), (1, true));
    }
}
