//! `--linear MIN,MAX,STEP` parsing: never panics, and what it accepts is usable.
#![no_main]

use latscope::stats::{LinearCounts, LinearSpec, Unit};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(spec) = LinearSpec::parse(text, Unit::Us) {
        assert!(spec.max > spec.min && spec.step > 0);
        let mut counts = LinearCounts::new(spec);
        for v in [0, spec.min, spec.max, spec.max - 1, u64::MAX] {
            counts.record(v);
        }
    }
});
