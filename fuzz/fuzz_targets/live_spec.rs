//! `latscope live`'s rules: spans, keys, endpoints, values and tracefs format files, compiled
//! into a bpftrace program. Never panics, and nothing in the input can change the program's
//! structure: outside string literals, braces and slashes come only from the generator, and no
//! string literal holds a quote, a backslash (but the generator's `\\n`) or a line break.
#![no_main]

use latscope::live::compile::{Request, compile};
use latscope::live::fields::{Formats, parse_format};
use latscope::live::program::{Target, program};
use latscope::live::spec::{Key, ValueSpec, parse_endpoint, parse_span};
use libfuzzer_sys::fuzz_target;

/// Braces balance outside string literals and `//` comments, and literals stay on one line.
fn well_formed(text: &str) -> bool {
    let (mut depth, mut in_string) = (0i64, false);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if !in_string && c == '/' && chars.peek() == Some(&'/') {
            // A comment runs to the end of its line; a label in it may hold any printable text.
            for c in chars.by_ref() {
                if c == '\n' {
                    break;
                }
            }
            continue;
        }
        match (in_string, c) {
            (true, '"') => in_string = false,
            // The generator's own escape, `\n`; input never brings a backslash.
            (true, '\\') if chars.next() != Some('n') => return false,
            (true, '\n') => return false,
            (true, _) => {}
            (false, '"') => in_string = true,
            (false, '{') => depth += 1,
            (false, '}') => depth -= 1,
            _ => {}
        }
        if depth < 0 {
            return false;
        }
    }
    depth == 0 && !in_string
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut lines = text.splitn(5, '\n');
    let (span, key, rate, value) = (
        lines.next().unwrap_or(""),
        lines.next().unwrap_or(""),
        lines.next().unwrap_or(""),
        lines.next().unwrap_or(""),
    );
    let format = parse_format(lines.next().unwrap_or(""));
    let key = Key::parse(key).ok();
    let mut request = Request {
        spans: parse_span(span, key.as_ref()).into_iter().collect(),
        rates: parse_endpoint(rate).into_iter().collect(),
        values: value.parse::<ValueSpec>().into_iter().collect(),
        by: None,
        target: Target::Tree(vec![1]),
        interval_s: 1,
        duration_s: None,
        record: Some(10),
        marker: None,
        ends_anywhere: true,
    };
    let mut formats = Formats::new();
    for probe in request.probes() {
        if let latscope::live::spec::Probe::Tracepoint { subsys, name } = probe {
            formats.insert((subsys.clone(), name.clone()), Some(format.clone()));
        }
    }
    for by in [None, Some("comm"), Some("pid")] {
        request.by = by.map(str::to_string);
        if let Ok(plan) = compile(&request, &formats) {
            let text = program(&plan);
            assert!(well_formed(&text), "{text}");
        }
    }
});
