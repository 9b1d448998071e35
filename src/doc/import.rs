//! Results written by other tools, read as items: HdrHistogram interval logs (any
//! HdrHistogram tool, `latscope export --to hlog`) and bpftrace's `-f json` output (its
//! `hist()`/`lhist()` maps). Lenient by design: lines that are not what we look for are skipped,
//! as those tools interleave other output.

use base64::Engine;
use serde::Deserialize;

use super::dist::Summary;
use super::{Data, DocError, IMPORTED, Item};
use crate::stats::change::Estimate;

/// An HdrHistogram interval log: the intervals of each tag merged into one distribution, value
/// by value (the values an interval's histogram reports, as adding the histograms gives when
/// they share a layout, as one writer's do). Only one interval's histogram is decoded at a time:
/// a header alone may ask for 50 MB of buckets, and keeping one per tag let a 4 KB log of 60
/// tags take 3 GB. What is kept is each tag's distinct values and counts (16 bytes each, what
/// its item holds anyway): at most one per byte of decoded payload. Counts that add up past 2^64
/// are an error (they cannot be summarised, and saturating would be a wrong count).
pub fn hlog(file: &str, text: &str) -> Result<Vec<Item>, DocError> {
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    // per tag, in order of first appearance: ascending (value, count)
    let mut tags: Vec<(String, Vec<(u64, u64)>)> = Vec::new();
    let mut index: rustc_hash::FxHashMap<String, usize> = Default::default();
    for entry in IntervalLogIterator::new(text.as_bytes()).flatten() {
        let LogEntry::Interval(interval) = entry else {
            continue;
        };
        let name = interval.tag().map_or("hlog", |t| t.as_str());
        let Ok(bytes) =
            base64::engine::general_purpose::STANDARD.decode(interval.encoded_histogram())
        else {
            continue;
        };
        let Ok(h) = super::dist::decode_hdr(&bytes) else {
            continue;
        };
        let at = *index.entry(name.to_string()).or_insert_with(|| {
            tags.push((name.to_string(), Vec::new()));
            tags.len() - 1
        });
        let recorded = h
            .iter_recorded()
            .map(|v| (v.value_iterated_to(), v.count_at_value()));
        let merged = merge(std::mem::take(&mut tags[at].1), recorded)
            .ok_or_else(|| too_many(file, IMPORTED[1], name))?;
        tags[at].1 = merged;
    }
    tags.into_iter()
        .map(|(name, values)| {
            let points: Vec<(f64, u64)> = values.into_iter().map(|(v, c)| (v as f64, c)).collect();
            counted(file, IMPORTED[1], &name, &points)?;
            Ok(Item {
                name,
                group: None,
                summary: Summary::of_points(&points),
                data: Data::Samples(points),
            })
        })
        .collect()
}

/// Two ascending lists of `(value, count)` as one, the counts of equal values added; `None`
/// when such a sum passes 2^64 - 1.
fn merge(a: Vec<(u64, u64)>, b: impl Iterator<Item = (u64, u64)>) -> Option<Vec<(u64, u64)>> {
    let mut out = Vec::with_capacity(a.len());
    let mut a = a.into_iter().peekable();
    for (value, count) in b {
        while let Some(&(v, c)) = a.peek().filter(|(v, _)| *v < value) {
            out.push((v, c));
            a.next();
        }
        match a.next_if(|(v, _)| *v == value) {
            Some((_, c)) => out.push((value, c.checked_add(count)?)),
            None => out.push((value, count)),
        }
    }
    out.extend(a);
    Some(out)
}

/// `Ok` when the points' counts add up within a u64.
fn counted(
    file: &str,
    kind: &'static str,
    name: &str,
    points: &[(f64, u64)],
) -> Result<(), DocError> {
    points
        .iter()
        .try_fold(0u64, |total, p| total.checked_add(p.1))
        .map(|_| ())
        .ok_or_else(|| too_many(file, kind, name))
}

fn too_many(file: &str, kind: &'static str, name: &str) -> DocError {
    DocError::Invalid {
        file: file.into(),
        kind,
        reason: format!("the counts of {name} add up past 2^64 - 1"),
    }
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
/// Counts that add up past 2^64 are an error, as in [`hlog`].
pub fn bpftrace(file: &str, text: &str) -> Result<Vec<Item>, DocError> {
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
        .map(|((name, group), buckets)| {
            let label = super::label(&name, group.as_deref());
            let mids = midpoints(&buckets);
            counted(file, IMPORTED[0], &label, &mids)?;
            Ok(bucket_item(name, group, &buckets, &mids))
        })
        .collect()
}

/// `(bucket midpoint, count)` of `(lo, hi_inclusive, count)` buckets.
fn midpoints(buckets: &[Bucket]) -> Vec<(f64, u64)> {
    buckets
        .iter()
        .map(|&(lo, hi, c)| ((lo + hi) / 2.0, c))
        .collect()
}

/// An item known by `(lo, hi_inclusive, count)` buckets: estimates at bucket midpoints, with
/// half the bucket width as their error.
/// `mids` are the buckets' [`midpoints`], whose counts add up within a u64.
fn bucket_item(
    name: String,
    group: Option<String>,
    buckets: &[Bucket],
    mids: &[(f64, u64)],
) -> Item {
    let mut summary = Summary::of_points(mids);
    summary.min = buckets.first().map(|b| b.0 as u64);
    summary.max = buckets.last().map(|b| b.1 as u64);
    summary.stddev = None;
    let estimate = |q: f64| {
        let v = crate::stats::ab::quantile(mids, q);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn bpftrace_line(counts: &[u64]) -> String {
        let buckets: Vec<String> = counts
            .iter()
            .enumerate()
            .map(|(i, c)| {
                format!(
                    r#"{{"min": {}, "max": {}, "count": {c}}}"#,
                    2 * i,
                    2 * i + 1
                )
            })
            .collect();
        format!(
            r#"{{"type": "hist", "data": {{"@us": {{"a": [{}]}}}}}}"#,
            buckets.join(", ")
        )
    }

    /// One interval of an HdrHistogram log: `(value, count)` recorded, V2-encoded, in base64.
    fn hlog_line(counts: &[(u64, u64)]) -> String {
        use hdrhistogram::serialization::{Serializer, V2Serializer};
        let mut h = hdrhistogram::Histogram::<u64>::new(3).unwrap();
        for &(v, n) in counts {
            h.record_n(v, n).unwrap();
        }
        let mut bytes = Vec::new();
        V2Serializer::new().serialize(&h, &mut bytes).unwrap();
        let encoded = base64::engine::general_purpose::STANDARD.encode(bytes);
        format!("Tag=t,0.000,1.000,1.0,{encoded}\n")
    }

    #[test]
    fn bpftrace_counts_are_summed_and_their_midpoints_summarised() {
        let items = bpftrace("b.json", &bpftrace_line(&[3, 0, 1])).unwrap();
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].label(), "@us [a]");
        // buckets [0,1] x3 and [4,5] x1: midpoints 0.5 and 4.5, mean (1.5 + 4.5) / 4
        assert_eq!(items[0].summary.count, 4);
        assert_eq!(items[0].summary.mean, Some(1.5));
        assert_eq!(
            (items[0].summary.min, items[0].summary.max),
            (Some(0), Some(5))
        );
    }

    #[test]
    fn bpftrace_counts_adding_past_a_u64_are_refused_by_map_name() {
        let text = bpftrace_line(&[u64::MAX, 1]);
        let e = bpftrace("b.json", &text).unwrap_err().to_string();
        assert!(
            e.contains("b.json") && e.contains("@us [a] add up past 2^64"),
            "{e}"
        );
        assert!(bpftrace("b.json", &bpftrace_line(&[u64::MAX - 1, 1])).is_ok());
    }

    #[test]
    fn hlog_intervals_of_one_tag_are_merged_value_by_value() {
        let text = hlog_line(&[(100, 2), (500, 1)])
            + &hlog_line(&[(300, 1), (500, 4)])
            + &hlog_line(&[(50, 1)]);
        let items = hlog("h.hlog", &text).unwrap();
        assert_eq!(items.len(), 1);
        assert_eq!(
            items[0].points(),
            &[(50.0, 1), (100.0, 2), (300.0, 1), (500.0, 5)]
        );
        assert_eq!(items[0].summary.count, 9);
    }

    #[test]
    fn hlog_intervals_adding_past_a_u64_are_refused_by_tag() {
        // The encoding holds counts up to 2^63 - 1: three of them pass 2^64.
        let most = i64::MAX as u64;
        for text in [
            hlog_line(&[(100, most)]) + &hlog_line(&[(200, most)]) + &hlog_line(&[(300, most)]),
            hlog_line(&[(100, most), (200, most), (300, most)]),
            // one value in every interval: its own count passes 2^64 - 1
            hlog_line(&[(100, most)]) + &hlog_line(&[(100, most)]) + &hlog_line(&[(100, most)]),
        ] {
            let e = hlog("h.hlog", &text).unwrap_err().to_string();
            assert!(
                e.contains("h.hlog") && e.contains("counts of t add up past"),
                "{e}"
            );
        }
    }
}
