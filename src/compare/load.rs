//! Reading saved results into comparable items: `spans` documents (`latscope wayland`,
//! `latscope live`) and `bench` documents.

use base64::Engine;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;
use serde_json::Value;

use super::{Data, Figures, Item};

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
    #[error("{file}: cannot compare results of kind {kind} (expected spans or bench)")]
    Kind {
        /// file
        file: String,
        /// what it was
        kind: String,
    },
}

/// The kind and items of a saved result.
pub fn items(file: &str, text: &str) -> Result<(String, Vec<Item>), LoadError> {
    let doc: Value = serde_json::from_str(text).map_err(|e| LoadError::Json {
        file: file.into(),
        reason: e.to_string(),
    })?;
    let kind = doc["kind"].as_str().unwrap_or("unknown").to_string();
    let items = match kind.as_str() {
        "spans" => spans(&doc),
        "bench" => bench(&doc),
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
        let stats = Figures {
            count: s["count"].as_u64().unwrap_or(0),
            p50: f(&s["p50"]),
            p90: f(&s["p90"]),
            p99: f(&s["p99"]),
            max: f(&s["max"]),
            mean: f(&s["mean"]),
        };
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
        .enumerate()
        .map(|(i, c)| {
            let mut walls: Vec<f64> = c["runs"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|r| f(&r["wall_ns"]))
                .collect();
            walls.sort_by(f64::total_cmp);
            let q = |p: f64| {
                walls
                    .get(((p * walls.len() as f64).ceil() as usize).max(1) - 1)
                    .copied()
                    .unwrap_or(0.0)
            };
            let stats = Figures {
                count: walls.len() as u64,
                p50: q(0.5),
                p90: q(0.9),
                p99: q(0.99),
                max: walls.last().copied().unwrap_or(0.0),
                mean: walls.iter().sum::<f64>() / walls.len().max(1) as f64,
            };
            let mut values: Vec<(f64, u64)> = Vec::new();
            for w in &walls {
                match values.last_mut() {
                    Some((v, n)) if v == w => *n += 1,
                    _ => values.push((*w, 1)),
                }
            }
            Item {
                name: format!("wall time of command {}", i + 1),
                group: None,
                stats,
                data: Data::Samples(values),
            }
        })
        .collect()
}
