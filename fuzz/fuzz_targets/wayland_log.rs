//! A whole log through reader, parser, clock and span rules, then every renderer: no panic,
//! and every sample a span produced is accounted for in the report; the parallel reader
//! (chunks of 1 to 64 bytes, 2 or 3 threads, `--strict` or not) gives the serial one's report.
#![no_main]

use latscope::ingest::Stream;
use latscope::ingest::wayland::{self, GroupBy, InputStats, ReadOptions, SpanKind, SpanOptions};
use latscope::report::{Renderer, SpansReport, json::Json, markdown::Markdown, text::Text};
use latscope::span::Aggregator;
use latscope::stats::{LinearSpec, Unit};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let group_by = match data.first().map(|b| b % 4) {
        Some(1) => GroupBy::Surface,
        Some(2) => GroupBy::Object,
        Some(3) => GroupBy::File,
        _ => GroupBy::None,
    };
    let options = ReadOptions { spans: SpanOptions { enabled: [true; 4], group_by }, ..Default::default() };
    let linear = LinearSpec::parse("0,10ms,1ms", Unit::Us).ok();
    let mut sink = Aggregator::new(SpanKind::result_names(), linear);
    let parallel = ReadOptions {
        threads: 2 + usize::from(data.first().is_some_and(|b| b & 4 != 0)),
        chunk_bytes: 1 + data.len() % 64,
        strict: data.first().is_some_and(|b| b & 8 != 0),
        ..options.clone()
    };
    let serial = ReadOptions { strict: parallel.strict, ..options };
    let mut other = Aggregator::new(SpanKind::result_names(), linear);
    let one = wayland::analyze(Stream::of(data), "fuzz", 0, &parallel, &mut other, |_| {});
    let result = wayland::analyze(Stream::of(data), "fuzz", 0, &serial, &mut sink, |_| {});
    // an error's counts, with its bytes left out (`--strict`'s: those read, more with read-ahead)
    let said = |result: &Result<_, latscope::ingest::Failed<InputStats, _>>| match result {
        Ok(stats) => format!("{stats:?}"),
        Err(failed) => {
            let read = failed.read.as_ref().map(|read| InputStats { bytes: 0, ..(**read).clone() });
            format!("{}\n{read:?}", failed.error)
        }
    };
    assert_eq!(said(&result), said(&one), "serial and parallel reads differ");
    assert_eq!(format!("{sink:?}"), format!("{other:?}"), "serial and parallel spans differ");
    let Ok(stats) = result else {
        return;
    };
    let report = SpansReport {
        aggregator: &sink,
        input: stats.fields(),
        warnings: stats.warnings(),
        files: vec!["fuzz".into()],
        labels: Vec::new(),
        unit: Unit::Us,
    };
    let _ = Text { linear: true, no_histogram: false }.render(&report);
    let _ = Markdown.render(&report);
    let json = Json::default().render(&report);
    assert!(json.starts_with("{\"kind\":\"spans\""));
});
