//! Any bytes through the result reader (`latscope compare/report/plot/export` input): no panic;
//! a document that is accepted yields items whose summaries pass the reader's own checks, and
//! survives a write and a second read unchanged. Seeded with every kind of document, truncated
//! documents, huge numbers and NaN (scripts/fuzz.sh).
#![no_main]

use latscope::doc;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(loaded) = doc::load("fuzz.json", text) else {
        return;
    };
    for item in &loaded.items {
        let _ = item.label();
        let _ = item.points();
        assert!(item.summary.count >= item.summary.min.map_or(0, |_| 1));
    }
    if let Some(d) = loaded.document {
        let again = d.to_value().to_string();
        let back = doc::read("again.json", &again).expect("a written document reads back");
        assert_eq!(back, d);
    }
});
