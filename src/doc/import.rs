//! Results written by other tools, read as items: HdrHistogram interval logs (any
//! HdrHistogram tool, `latscope export --to hlog`) and bpftrace's `-f json` output (its
//! `hist()`/`lhist()` maps). Lenient by design: lines that are not what we look for are skipped,
//! as those tools interleave other output.

use base64::Engine;
use hdrhistogram::Histogram;
use serde::Deserialize;

use super::dist::Summary;
use super::{Data, Item};
use crate::stats::change::Estimate;

/// An HdrHistogram interval log: the intervals of each tag merged into one distribution.
pub fn hlog(text: &str) -> Vec<Item> {
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    let mut tags: Vec<(String, Histogram<u64>)> = Vec::new();
    for entry in IntervalLogIterator::new(text.as_bytes()).flatten() {
        let LogEntry::Interval(interval) = entry else {
            continue;
        };
        let name = interval.tag().map_or("hlog", |t| t.as_str()).to_string();
        let Ok(bytes) =
            base64::engine::general_purpose::STANDARD.decode(interval.encoded_histogram())
        else {
            continue;
        };
        let Ok(h) = super::dist::decode_hdr(&bytes) else {
            continue;
        };
        match tags.iter_mut().find(|(n, _)| *n == name) {
            Some((_, total)) => {
                // Deserialized histograms have fixed bounds: let this one grow to fit later ones.
                total.auto(true);
                let _ = total.add(&h);
            }
            None => tags.push((name, h)),
        }
    }
    tags.into_iter()
        .map(|(name, h)| {
            let points: Vec<(f64, u64)> = h
                .iter_recorded()
                .map(|v| (v.value_iterated_to() as f64, v.count_at_value()))
                .collect();
            Item {
                name,
                group: None,
                summary: Summary::of_points(&points),
                data: Data::Samples(points),
            }
        })
        .collect()
}

/// One line of bpftrace `-f json` output.
#[derive(Deserialize)]
struct Line {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    data: serde_json::Map<String, serde_json::Value>,
}

/// A bpftrace histogram bucket (`min`/`max` absent at the open ends).
#[derive(Deserialize)]
struct BpfBucket {
    min: Option<f64>,
    max: Option<f64>,
    count: u64,
}

/// A map's value: one histogram, or one per key.
#[derive(Deserialize)]
#[serde(untagged)]
enum MapValue {
    Plain(Vec<BpfBucket>),
    Keyed(std::collections::BTreeMap<String, Vec<BpfBucket>>),
}

/// A bpftrace map name and key.
type MapKey = (String, Option<String>);
/// `(lower bound, upper bound inclusive, count)`
type Bucket = (f64, f64, u64);

/// bpftrace `-f json` output: the last printed state of every `hist()`/`lhist()` map (keys as
/// groups). Only buckets are known, so percentiles are bucket estimates with their error.
pub fn bpftrace(text: &str) -> Vec<Item> {
    let mut maps: Vec<(MapKey, Vec<Bucket>)> = Vec::new();
    for line in text.lines() {
        let Ok(doc) = serde_json::from_str::<Line>(line) else {
            continue;
        };
        if doc.kind != "hist" {
            continue;
        }
        for (name, value) in doc.data {
            let Ok(value) = serde_json::from_value::<MapValue>(value) else {
                continue;
            };
            let groups: Vec<(Option<String>, Vec<BpfBucket>)> = match value {
                MapValue::Plain(b) => vec![(None, b)],
                MapValue::Keyed(keys) => keys.into_iter().map(|(k, b)| (Some(k), b)).collect(),
            };
            for (group, buckets) in groups {
                let parsed: Vec<Bucket> = buckets
                    .iter()
                    .filter(|b| b.count > 0)
                    .map(|b| {
                        let lo = b.min.unwrap_or(0.0).max(0.0);
                        let hi = b.max.unwrap_or(lo * 2.0).max(lo);
                        (lo, hi, b.count)
                    })
                    .collect();
                let key = (name.clone(), group);
                match maps.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, b)) => *b = parsed,
                    None => maps.push((key, parsed)),
                }
            }
        }
    }
    maps.into_iter()
        .map(|((name, group), buckets)| bucket_item(name, group, &buckets))
        .collect()
}

/// An item known by `(lo, hi_inclusive, count)` buckets: estimates at bucket midpoints, with
/// half the bucket width as their error.
fn bucket_item(name: String, group: Option<String>, buckets: &[Bucket]) -> Item {
    let mids: Vec<(f64, u64)> = buckets
        .iter()
        .map(|&(lo, hi, c)| ((lo + hi) / 2.0, c))
        .collect();
    let mut summary = Summary::of_points(&mids);
    summary.min = buckets.first().map(|b| b.0 as u64);
    summary.max = buckets.last().map(|b| b.1 as u64);
    summary.stddev = None;
    let estimate = |q: f64| {
        let v = crate::stats::ab::quantile(&mids, q);
        let error = buckets
            .iter()
            .find(|b| (b.0 + b.1) / 2.0 == v)
            .map_or(0.0, |b| (b.1 - b.0 + 1.0) / 2.0);
        Estimate { value: v, error }
    };
    Item {
        name,
        group,
        summary,
        data: Data::Histogram {
            buckets: buckets.iter().map(|&(lo, _, c)| (lo, c)).collect(),
            p50: estimate(0.5),
            p99: estimate(0.99),
        },
    }
}
