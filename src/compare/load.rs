//! Reading saved results into comparable items: `spans` documents (`latscope wayland`,
//! `latscope live`) and `bench` documents.

use base64::Engine;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;
use serde_json::Value;

use super::{Data, Figures, Item, quantile};

/// Why a result cannot be compared.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Not JSON.
    #[error("{file} is not JSON: {reason}")]
    Json {
        /// file
        file: String,
        /// parser message
        reason: String,
    },
    /// A kind this command does not compare.
    #[error(
        "{file}: cannot compare results of kind {kind} (expected spans, bench, lab-queue, bpftrace JSON or .hlog)"
    )]
    Kind {
        /// file
        file: String,
        /// what it was
        kind: String,
    },
}

/// The kind and items of a saved result: a latscope JSON document (`spans`, `bench`),
/// bpftrace's `-f json` output (kind `bpftrace`), or an HdrHistogram interval log (`hlog`).
pub fn items(file: &str, text: &str) -> Result<(String, Vec<Item>), LoadError> {
    let first = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    if first.starts_with('#') || first.starts_with("Tag=") || file.ends_with(".hlog") {
        return Ok(("hlog".to_string(), hlog(text)));
    }
    if first.starts_with('{') && first.contains("\"type\"") && !first.contains("\"kind\"") {
        return Ok(("bpftrace".to_string(), bpftrace(text)));
    }
    let doc: Value = serde_json::from_str(text).map_err(|e| LoadError::Json {
        file: file.into(),
        reason: e.to_string(),
    })?;
    let kind = doc["kind"].as_str().unwrap_or("unknown").to_string();
    let items = match kind.as_str() {
        "spans" => spans(&doc),
        "bench" => bench(&doc),
        "lab-queue" => lab_queue(&doc),
        _ => {
            return Err(LoadError::Kind {
                file: file.into(),
                kind,
            });
        }
    };
    Ok((kind, items))
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

/// `{"count","p50","p90","p99","max","mean"}` as [`Figures`] (missing values are 0).
fn figures_json(s: &Value) -> Figures {
    Figures {
        count: s["count"].as_u64().unwrap_or(0),
        p50: f(&s["p50"]),
        p90: f(&s["p90"]),
        p99: f(&s["p99"]),
        max: f(&s["max"]),
        mean: f(&s["mean"]),
    }
}

fn spans(doc: &Value) -> Vec<Item> {
    let list = doc["spans"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(doc["values"].as_array().into_iter().flatten());
    list.map(|s| {
        let parts: Vec<&str> = [s["side"].as_str(), s["group"].as_str()]
            .into_iter()
            .flatten()
            .collect();
        let stats = figures_json(s);
        let h = &s["histogram"];
        let buckets: Vec<(f64, u64)> = h["buckets"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|b| Some((b["min"].as_f64()?, b["count"].as_u64()?)))
            .collect();
        let data = match decode_hdr(h["hdr"]["data"].as_str()) {
            Some(values) => Data::Samples(values),
            None if h["percentile_error_bounds"].is_null() => Data::Samples(buckets),
            None => Data::Histogram {
                buckets,
                p50: stats.p50,
                p50_error: f(&h["percentile_error_bounds"]["p50"]),
                p99: stats.p99,
                p99_error: f(&h["percentile_error_bounds"]["p99"]),
            },
        };
        Item {
            name: s["name"].as_str().unwrap_or("?").to_string(),
            group: (!parts.is_empty()).then(|| parts.join(" ")),
            stats,
            data,
        }
    })
    .collect()
}

/// A `lab-queue` result: its latency and each stage (only summaries are saved), per sweep row.
fn lab_queue(doc: &Value) -> Vec<Item> {
    let rows: Vec<&Value> = match doc["rows"].as_array() {
        Some(rows) => rows.iter().collect(),
        None => vec![doc],
    };
    let mut items = Vec::new();
    for row in rows {
        let labels: Vec<String> = row["labels"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
            .collect();
        let group = (!labels.is_empty()).then(|| labels.join(","));
        let stages = row["stages"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v));
        for (name, s) in std::iter::once(("latency".to_string(), &row["latency"])).chain(stages) {
            let stats = figures_json(s);
            let data = Data::Histogram {
                buckets: Vec::new(),
                p50: stats.p50,
                p50_error: 0.0,
                p99: stats.p99,
                p99_error: 0.0,
            };
            items.push(Item {
                name,
                group: group.clone(),
                stats,
                data,
            });
        }
    }
    items
}

/// Figures of distinct values with counts (nearest-rank percentiles).
fn figures(points: &[(f64, u64)]) -> Figures {
    let count: u64 = points.iter().map(|p| p.1).sum();
    let sum: f64 = points.iter().map(|&(v, c)| v * c as f64).sum();
    Figures {
        count,
        p50: quantile(points, 0.5),
        p90: quantile(points, 0.9),
        p99: quantile(points, 0.99),
        max: points.last().map_or(0.0, |p| p.0),
        mean: if count > 0 { sum / count as f64 } else { 0.0 },
    }
}

/// An HdrHistogram interval log: the intervals of each tag merged into one distribution.
fn hlog(text: &str) -> Vec<Item> {
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
        let Ok(h) = Deserializer::new().deserialize::<u64, _>(&mut &bytes[..]) else {
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
                stats: figures(&points),
                data: Data::Samples(points),
            }
        })
        .collect()
}

/// A bpftrace map name and key.
type MapKey = (String, Option<String>);
/// `(lower bound, upper bound inclusive, count)`
type Bucket = (f64, f64, u64);

/// bpftrace `-f json` output: the last printed state of every `hist()`/`lhist()` map (keys as
/// groups). Only buckets are known, so percentiles are bucket estimates with their error.
fn bpftrace(text: &str) -> Vec<Item> {
    let mut maps: Vec<(MapKey, Vec<Bucket>)> = Vec::new();
    for line in text.lines() {
        let Ok(doc) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if doc["type"] != "hist" {
            continue;
        }
        for (name, value) in doc["data"].as_object().into_iter().flatten() {
            let groups: Vec<(Option<String>, &Value)> = match value {
                Value::Object(keys) => keys.iter().map(|(k, v)| (Some(k.clone()), v)).collect(),
                other => vec![(None, other)],
            };
            for (group, buckets) in groups {
                let parsed: Vec<(f64, f64, u64)> = buckets
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|b| {
                        let count = b["count"].as_u64()?;
                        let lo = b["min"].as_f64().unwrap_or(0.0).max(0.0);
                        let hi = b["max"].as_f64().unwrap_or(lo * 2.0).max(lo);
                        Some((lo, hi, count))
                    })
                    .filter(|b| b.2 > 0)
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
fn bucket_item(name: String, group: Option<String>, buckets: &[(f64, f64, u64)]) -> Item {
    let mids: Vec<(f64, u64)> = buckets
        .iter()
        .map(|&(lo, hi, c)| ((lo + hi) / 2.0, c))
        .collect();
    let mut stats = figures(&mids);
    stats.max = buckets.last().map_or(0.0, |b| b.1);
    let error_at = |v: f64| {
        buckets
            .iter()
            .find(|b| (b.0 + b.1) / 2.0 == v)
            .map_or(0.0, |b| (b.1 - b.0 + 1.0) / 2.0)
    };
    let data = Data::Histogram {
        buckets: buckets.iter().map(|&(lo, _, c)| (lo, c)).collect(),
        p50: stats.p50,
        p50_error: error_at(stats.p50),
        p99: stats.p99,
        p99_error: error_at(stats.p99),
    };
    Item {
        name,
        group,
        stats,
        data,
    }
}

/// The distinct values and counts of a base64 V2 HdrHistogram.
fn decode_hdr(data: Option<&str>) -> Option<Vec<(f64, u64)>> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data?)
        .ok()?;
    let hist: Histogram<u64> = Deserializer::new().deserialize(&mut &bytes[..]).ok()?;
    Some(
        hist.iter_recorded()
            .map(|v| (v.value_iterated_to() as f64, v.count_at_value()))
            .collect(),
    )
}

fn bench(doc: &Value) -> Vec<Item> {
    doc["commands"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let mut walls: Vec<f64> = c["runs"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|r| f(&r["wall_ns"]))
                .collect();
            walls.sort_by(f64::total_cmp);
            let mut values: Vec<(f64, u64)> = Vec::new();
            for w in walls {
                match values.last_mut() {
                    Some((v, n)) if *v == w => *n += 1,
                    _ => values.push((w, 1)),
                }
            }
            // Matched by the command itself, so a reordered benchmark still pairs the right ones.
            let name = format!("wall time of `{}`", c["command"].as_str().unwrap_or("?"));
            Item {
                name,
                group: None,
                stats: figures(&values),
                data: Data::Samples(values),
            }
        })
        .collect()
}

/// Two bench results pair their commands by command line; when they have none in common (an
/// A/B of two builds: `./old` against `./new`), by position instead. Renames the `after` items
/// to their partners' names in that case and says so; returns `None` when nothing changed.
pub fn pair_bench_by_position(before: &[Item], after: &mut [Item]) -> Option<String> {
    if before
        .iter()
        .any(|b| after.iter().any(|a| a.name == b.name))
    {
        return None;
    }
    let mut pairs = Vec::new();
    for (b, a) in before.iter().zip(after.iter_mut()) {
        pairs.push(format!("{} ↔ {}", b.name, a.name));
        a.name = b.name.clone();
    }
    (!pairs.is_empty()).then(|| {
        format!(
            "no command in common: paired by position ({})",
            pairs.join(", ")
        )
    })
}
