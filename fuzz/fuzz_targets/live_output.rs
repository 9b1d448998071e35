//! bpftrace's `-f json` lines as `latscope live` reads them (maps, markers, printed spans of
//! `--record-spans`, lost events): never panics, and a printed span reads back as printed.
#![no_main]

use latscope::live::output::{Line, Snapshot, SpanLine};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut snapshot = Snapshot::new(2, 1, 1, data.first().is_some_and(|b| b & 1 == 1));
    for line in text.lines() {
        if let Line::Span(span) = snapshot.apply(line) {
            let printed = format!(
                "latscope:span {} {} {}{}",
                span.index,
                span.start_ns,
                span.latency_ns,
                span.group.as_ref().map_or(String::new(), |g| format!(" {g}"))
            );
            assert_eq!(SpanLine::parse(&printed), Some(span));
        }
    }
});
