//! `latscope merge` and the native-histogram mapping on anything: two documents read by the
//! checking reader and merged never panic, and a merge is itself a valid document; arbitrary
//! kernel buckets map onto native buckets with their count kept.
#![no_main]

use latscope::doc::{Document, read, to_json};
use latscope::fleet::{merge::merge, native::Native};
use latscope::stats::loglinear::{BUCKETS, Bucketed};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else { return };
    if pick % 2 == 0 {
        buckets(rest);
        return;
    }
    let Ok(text) = std::str::from_utf8(rest) else { return };
    let (a, b) = text.split_once("\n---\n").unwrap_or((text, text));
    let (Ok(a), Ok(b)) = (read("a.json", a), read("b.json", b)) else { return };
    let inputs = vec![("a.json".to_string(), a), ("b.json".to_string(), b)];
    if let Ok(merged) = merge(&inputs) {
        let again = read("merged.json", &to_json(&merged, false));
        assert!(matches!(again, Ok(Document::Spans(_))), "{again:?}");
    }
});

/// Bytes as (index, count) pairs plus min and max.
fn buckets(data: &[u8]) {
    let mut b = Bucketed::default();
    for chunk in data.chunks_exact(4) {
        let index = usize::from(u16::from_le_bytes([chunk[0], chunk[1]])) % BUCKETS;
        let count = u64::from(u16::from_le_bytes([chunk[2], chunk[3]]));
        if b.counts.len() <= index {
            b.counts.resize(index + 1, 0);
        }
        b.counts[index] += count;
        b.count += count;
    }
    if let [.., x, y] = data {
        (b.min, b.max) = (u64::from(*x) << (x % 64), u64::from(*y) << (y % 64));
    }
    let native = Native::of(&b);
    assert_eq!(native.count, b.counts.iter().sum::<u64>());
    let total: i64 = native.deltas.iter().scan(0i64, |c, d| { *c += d; Some(*c) }).sum();
    assert_eq!(total as u64 + native.zero_count, native.count);
}
