//! Which format a trace is in, and which producer's layout, from its first bytes;
//! `--input-format` overrides. Every producer latscope reads is recognised from what it
//! writes (each has a test on its real output): perf script (default and `-F` layouts, also
//! those that start with `[CPU]`), the tracefs `trace` file (with `record-tgid`, without
//! `irq-info`), trace-cmd report (its `cpus=N` header; default, `-R`, `-t`), babeltrace2
//! (default, `--names=all`, `--clock-seconds`, `--clock-date`), Chrome JSON, strace/ltrace
//! `-T`, perf trace, JSON lines and CSV. Layouts that cannot be read are refused with what to
//! do (tracefs `latency-format`: its stamps are relative, in µs).

/// The trace formats latscope reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `perf script` text
    Perf,
    /// ftrace's `trace` file, `trace-cmd report -R`
    Ftrace,
    /// babeltrace2's pretty text of CTF (LTTng) traces
    Babeltrace,
    /// Chrome Trace Event JSON
    Chrome,
    /// one JSON object per line
    JsonLines,
    /// CSV with a header line
    Csv,
    /// `strace -T` or `ltrace -T`: calls with their durations
    Strace,
    /// `perf trace`: system calls with their durations
    PerfTrace,
}

impl Format {
    /// Every format.
    pub const ALL: [Format; 8] = [
        Format::Perf,
        Format::Ftrace,
        Format::Babeltrace,
        Format::Chrome,
        Format::JsonLines,
        Format::Csv,
        Format::Strace,
        Format::PerfTrace,
    ];

    /// The name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Format::Perf => "perf",
            Format::Ftrace => "ftrace",
            Format::Babeltrace => "babeltrace",
            Format::Chrome => "chrome",
            Format::JsonLines => "jsonl",
            Format::Csv => "csv",
            Format::Strace => "strace",
            Format::PerfTrace => "perf-trace",
        }
    }

    /// The producer and layout a format stands for when given, not detected.
    pub fn layout(self) -> &'static str {
        match self {
            Format::Perf => "perf script",
            Format::Ftrace => "ftrace",
            Format::Babeltrace => "babeltrace2",
            Format::Chrome => "Chrome JSON",
            Format::JsonLines => "JSON lines",
            Format::Csv => "CSV",
            Format::Strace => "strace/ltrace -T",
            Format::PerfTrace => "perf trace",
        }
    }

    /// Whether its inputs carry spans themselves, measured with no rule: Chrome JSON's own
    /// spans, strace's and perf trace's calls.
    pub fn carries_spans(self) -> bool {
        matches!(self, Format::Chrome | Format::Strace | Format::PerfTrace)
    }

    /// The format named `name`.
    pub fn parse(name: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.name() == name)
    }
}

impl std::str::FromStr for Format {
    type Err = crate::error::UnknownName;

    /// By [`Format::name`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        crate::error::UnknownName::find(&Self::ALL, Self::name, "trace format", s)
    }
}

fn first_non_space(bytes: &[u8]) -> Option<(usize, u8)> {
    bytes
        .iter()
        .enumerate()
        .find(|(_, b)| !b.is_ascii_whitespace())
        .map(|(i, &b)| (i, b))
}

/// The format of a trace that begins with `head` (64 KiB is plenty), if it is one.
pub fn detect(head: &[u8]) -> Option<Format> {
    detect_layout(head).ok().flatten().map(|(f, _)| f)
}

/// The format and the producer's layout (`trace-cmd report`, `babeltrace2 --names=all`, ...)
/// of a trace that begins with `head`; `Err` with what to do for a layout latscope refuses.
pub fn detect_layout(head: &[u8]) -> Result<Option<(Format, &'static str)>, &'static str> {
    let head = head.strip_prefix(b"\xef\xbb\xbf").unwrap_or(head);
    let Some((i, c)) = first_non_space(head) else {
        return Ok(None);
    };
    let text = String::from_utf8_lossy(head);
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(64)
        .collect();
    if lines
        .iter()
        .any(|l| l.starts_with('#') && l.contains("latency trace v"))
    {
        return Err(
            "the tracefs trace was written with options/latency-format on: its stamps are relative microseconds; `echo 0 > options/latency-format` and read the trace again",
        );
    }
    let events: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| !l.starts_with('#'))
        .collect();
    let mut ev = super::Event::default();
    let text_event =
        |l: &str, ev: &mut super::Event| super::text::parse(l, ev) == super::Parsed::Event;
    match c {
        b'[' => {
            let first = events.first().copied().unwrap_or("");
            if text_event(first, &mut ev) {
                return Ok(Some((Format::Perf, "perf script -F (no comm, no pid)")));
            }
            let rest = &head[i + 1..];
            return Ok(Some(match first_non_space(rest).map(|(_, b)| b) {
                Some(b) if b.is_ascii_digit() => (Format::Babeltrace, babeltrace_layout(first)),
                _ => (Format::Chrome, "Chrome JSON"),
            }));
        }
        b'{' => {
            let line = head[i..].split(|&b| b == b'\n').next().unwrap_or(&[]);
            return Ok(Some(
                match serde_json::from_slice::<serde_json::Value>(line) {
                    Ok(serde_json::Value::Object(m)) if !m.contains_key("traceEvents") => {
                        (Format::JsonLines, "JSON lines")
                    }
                    _ => (Format::Chrome, "Chrome JSON"),
                },
            ));
        }
        _ => {}
    }
    let Some(&first) = events.first() else {
        return Ok(None);
    };
    if first.starts_with("timestamp = ") {
        return Ok(Some((Format::Babeltrace, "babeltrace2 --names=all")));
    }
    if let Some(n) = first.strip_prefix("cpus=")
        && n.bytes().all(|b| b.is_ascii_digit())
    {
        let raw = events.get(1).is_some_and(|l| {
            text_event(l, &mut ev) && ev.fields.iter().any(|(k, _)| !k.is_empty())
        });
        let layout = if raw {
            "trace-cmd report -R"
        } else {
            "trace-cmd report"
        };
        return Ok(Some((Format::Ftrace, layout)));
    }
    if text_event(first, &mut ev) {
        let ftrace = first.split_whitespace().any(|t| {
            t.rsplit_once('-').is_some_and(|(c, p)| {
                !c.is_empty() && !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())
            })
        }) && lines
            .iter()
            .any(|l| l.starts_with('#') || l.contains("] d") || l.contains("] ."));
        return Ok(Some(if ftrace {
            (Format::Ftrace, "tracefs trace")
        } else {
            (Format::Perf, "perf script")
        }));
    }
    let most = |f: fn(&str) -> bool| {
        let n = events.len().min(16);
        events[..n].iter().filter(|l| f(l)).count() * 2 > n
    };
    if most(super::syscalls::is_perf_trace) {
        return Ok(Some((Format::PerfTrace, "perf trace")));
    }
    if most(super::syscalls::is_strace) {
        return Ok(Some((Format::Strace, "strace/ltrace -T")));
    }
    if is_csv(&events) {
        return Ok(Some((Format::Csv, "CSV")));
    }
    Ok(None)
}

/// The layout of a babeltrace2 pretty line by its stamp.
fn babeltrace_layout(first: &str) -> &'static str {
    let stamp = first
        .strip_prefix('[')
        .and_then(|r| r.split_once(']'))
        .map_or("", |(s, _)| s);
    if stamp.contains(' ') {
        "babeltrace2 --clock-date"
    } else if stamp.contains(':') {
        "babeltrace2"
    } else if stamp.contains('.') {
        "babeltrace2 --clock-seconds"
    } else {
        "babeltrace2 --clock-cycles"
    }
}

/// A header of two or more columns and rows with as many.
fn is_csv(events: &[&str]) -> bool {
    let count = |l: &str| super::table::split_csv(l).len();
    let Some((head, rows)) = events.split_first() else {
        return false;
    };
    let n = count(head);
    n >= 2 && !rows.is_empty() && rows.iter().take(8).all(|r| count(r) == n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_format_is_recognised_from_its_first_lines() {
        let cases: [(&str, Format); 7] = [
            (
                "  seq 18205 [000] 13760.296837898: sched:sched_wakeup: comm=sh pid=1\n",
                Format::Perf,
            ),
            (
                "# tracer: nop\n#\n  bash-42 [001] d..2. 1234.567890: sched_switch: prev_pid=1\n",
                Format::Ftrace,
            ),
            (
                "[13:37:01.123456789] (+0.000001234) host p:e: { a = 1 }\n",
                Format::Babeltrace,
            ),
            ("{\"traceEvents\":[{\"ph\":\"X\"}]}", Format::Chrome),
            ("[\n {\"ph\":\"B\",\"ts\":1}", Format::Chrome),
            (
                "{\"ts\":1,\"name\":\"a\"}\n{\"ts\":2,\"name\":\"b\"}\n",
                Format::JsonLines,
            ),
            ("ts,name,key\n1,a,3\n", Format::Csv),
        ];
        for (text, format) in cases {
            assert_eq!(detect(text.as_bytes()), Some(format), "{text}");
        }
        assert_eq!(detect(b"hello world\n"), None);
        assert_eq!(detect(b""), None);
    }

    #[test]
    fn each_producer_layout_is_recognised() {
        let cases: [(&str, Format, &str); 10] = [
            (
                "cpus=2\nlsx:  bash-8608  [001]  1575.211171: sched_wakeup:   comm=sh pid=1 prio=120 target_cpu=001\n",
                Format::Ftrace,
                "trace-cmd report -R",
            ),
            (
                "cpus=2\n   bash-8608  [001]  1575.211171: sched_wakeup:         sh:4636 [120] CPU:001\n",
                Format::Ftrace,
                "trace-cmd report",
            ),
            (
                "[001]  1566.326260: sched:sched_wakeup: comm=rcu_preempt pid=15\n",
                Format::Perf,
                "perf script -F (no comm, no pid)",
            ),
            (
                "timestamp = 04:45:11.006577220, delta = +?.?????????, trace:hostname = vm, name = p:e, event.fields = { a = 1 }\n",
                Format::Babeltrace,
                "babeltrace2 --names=all",
            ),
            (
                "[00000001602214752762] (+????????????) vm p:e: { a = 1 }\n",
                Format::Babeltrace,
                "babeltrace2 --clock-cycles",
            ),
            (
                "[2026-11-25 04:45:11.006577220] (+?.?????????) vm p:e: { a = 1 }\n",
                Format::Babeltrace,
                "babeltrace2 --clock-date",
            ),
            (
                "9311  1795581919.713061 execve(\"/x\", [\"x\"], 0x7f /* 35 vars */) = 0 <0.000302>\n9311  1795581919.713550 brk(NULL) = 0x55e6 <0.000011>\n",
                Format::Strace,
                "strace/ltrace -T",
            ),
            (
                "malloc(100)                                      = 0x55df330fb2a0 <0.007492>\nmemset(0x55df330fb2a0, '\\0', 100)                = 0x55df330fb2a0 <0.000229>\n",
                Format::Strace,
                "strace/ltrace -T",
            ),
            (
                "         ? (         ): lc/9554  ... [continued]: execve())    = 0\n     0.808 ( 0.024 ms): lc/9554 brk()    = 0x55e80def0000\n",
                Format::PerfTrace,
                "perf trace",
            ),
            (
                "# tracer: nop\n#\n    lat worker 1-9009    (   8968) [001]   1593.891793: sched_wakeup: comm=python3 pid=8968\n",
                Format::Ftrace,
                "tracefs trace",
            ),
        ];
        for (text, format, layout) in cases {
            assert_eq!(
                detect_layout(text.as_bytes()),
                Ok(Some((format, layout))),
                "{text}"
            );
        }
        let latency = "# tracer: nop\n#\n# nop latency trace v1.1.5 on 6.1.0\nbash-1 0d..2. 18055us!: sched_switch: a=1\n";
        assert!(detect_layout(latency.as_bytes()).is_err());
    }

    #[test]
    fn format_names_round_trip() {
        for f in Format::ALL {
            assert_eq!(Format::parse(f.name()), Some(f));
        }
    }
}
