//! A whole log through reader, parser, clock and span rules, then every renderer: no panic,
//! and every sample a span produced is accounted for in the report; the parallel reader
//! (chunks of 1 to 64 bytes, 2 or 3 threads, `--strict` or not) gives the serial one's report.
#![no_main]

use latscope::ingest::wayland::{self, ReadOptions, SpanKind, SpanOptions, GroupBy};
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
    let one = wayland::analyze(data, "fuzz", 0, &parallel, &mut other, |_| {});
    let result = wayland::analyze(data, "fuzz", 0, &serial, &mut sink, |_| {});
    assert_eq!(format!("{result:?}"), format!("{one:?}"), "serial and parallel reads differ");
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
