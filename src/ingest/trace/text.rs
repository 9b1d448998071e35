//! `perf script` and ftrace / trace-cmd text: `PREFIX TIMESTAMP: EVENT: PAYLOAD`.
//!
//! perf prints `comm pid [cpu] 13760.296300641: sched:sched_wakeup: comm=sh pid=18203 ...`
//! (default fields; `-F` layouts drop or reorder the prefix), ftrace and `trace-cmd report -R`
//! print `sh-18203 [000] d..2. 13760.296300: sched_wakeup: comm=sh pid=18203 ...`. Both are
//! read by one parser: the timestamp is the first token of the form `SECONDS.FRACTION:`, the
//! event is the next token ending in `:`, the payload's `key=value` tokens are the fields
//! (tokens without `=`, like `==>`, are skipped). The prefix gives `common_comm`,
//! `common_pid` and `common_cpu` (named as ftrace names its common fields, so they never
//! collide with an event's own `pid`).

use super::{Event, Parsed};

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
    // Tokens end at a space (a tab is rare): memchr finds it word by word.
    let end = memchr::memchr2(b' ', b'\t', &b[start..]).map_or(b.len(), |p| start + p);
    *i = end;
    Some((start, end))
}

/// Parses one line into `ev`.
pub fn parse(line: &str, ev: &mut Event) -> Parsed {
    ev.clear();
    let b = line.as_bytes();
    let mut i = 0;
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    if i == b.len() || b[i] == b'#' {
        return Parsed::Skip;
    }
    let mut prefix: [(usize, usize); 6] = [(0, 0); 6];
    let mut n_prefix = 0;
    let ts = loop {
        let Some((a, e)) = next_token(b, &mut i) else {
            return Parsed::Malformed("no timestamp (SECONDS.FRACTION:)");
        };
        if is_timestamp(&b[a..e]) {
            break (a, e - 1);
        }
        if n_prefix < prefix.len() {
            prefix[n_prefix] = (a, e);
            n_prefix += 1;
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
        return Parsed::Malformed("the event name does not end in ':'");
    }
    ev.name = a..e - 1;
    prefix_fields(line, &prefix[..n_prefix], ev);
    while let Some((a, e)) = next_token(b, &mut i) {
        if let Some(eq) = b[a..e].iter().position(|&c| c == b'=')
            && eq > 0
        {
            ev.fields.push((a..a + eq, a + eq + 1..e));
        }
    }
    Parsed::Event
}

const COMM: &str = "common_comm";
const PID: &str = "common_pid";
const CPU: &str = "common_cpu";

/// The prefix: `[cpu]`, then perf's `comm pid[/tid]` or ftrace's `comm-pid` before it, into
/// [`Event::common`] (their names are not in the line).
fn prefix_fields(line: &str, prefix: &[(usize, usize)], ev: &mut Event) {
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
    if !pid.is_empty() && pid.bytes().all(|c| c.is_ascii_digit()) && before.len() >= 2 {
        let tid_start = b - tid.len();
        ev.common.push((PID, tid_start..b));
        ev.common
            .push((COMM, before[0].0..before[before.len() - 2].1));
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
}
