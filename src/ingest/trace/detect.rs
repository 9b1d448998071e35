//! Which format a trace is in, from its first bytes; `--input-format` overrides.

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
}

impl Format {
    /// Every format.
    pub const ALL: [Format; 6] = [
        Format::Perf,
        Format::Ftrace,
        Format::Babeltrace,
        Format::Chrome,
        Format::JsonLines,
        Format::Csv,
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
        }
    }

    /// The format named `name`.
    pub fn parse(name: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.name() == name)
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
    let head = head.strip_prefix(b"\xef\xbb\xbf").unwrap_or(head);
    let (i, c) = first_non_space(head)?;
    let rest = &head[i + 1..];
    match c {
        b'[' => {
            return match first_non_space(rest).map(|(_, b)| b) {
                Some(b) if b.is_ascii_digit() => Some(Format::Babeltrace),
                _ => Some(Format::Chrome),
            };
        }
        b'{' => {
            let line = head[i..].split(|&b| b == b'\n').next().unwrap_or(&[]);
            return match serde_json::from_slice::<serde_json::Value>(line) {
                Ok(serde_json::Value::Object(m)) if !m.contains_key("traceEvents") => {
                    Some(Format::JsonLines)
                }
                _ => Some(Format::Chrome),
            };
        }
        _ => {}
    }
    let text = String::from_utf8_lossy(head);
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))?;
    let mut ev = super::Event::default();
    if super::text::parse(line, &mut ev) == super::Parsed::Event {
        let ftrace = line.split_whitespace().any(|t| {
            t.rsplit_once('-').is_some_and(|(c, p)| {
                !c.is_empty() && !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())
            })
        }) && text
            .lines()
            .take(50)
            .any(|l| l.starts_with('#') || l.contains("] d") || l.contains("] ."));
        return Some(if ftrace { Format::Ftrace } else { Format::Perf });
    }
    line.contains(',').then_some(Format::Csv)
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
    fn format_names_round_trip() {
        for f in Format::ALL {
            assert_eq!(Format::parse(f.name()), Some(f));
        }
    }
}
