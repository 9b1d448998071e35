//! The two shapes every latency in every document takes: a [`Summary`] (count, min,
//! percentiles, max, mean, standard deviation) and a [`Histogram`] (buckets, their error, and
//! optionally the whole HdrHistogram). One shape, so a field renamed here is renamed everywhere
//! and every reader gets it from the compiler.

use base64::Engine;
use hdrhistogram::serialization::Deserializer;
use serde::{Deserialize, Serialize};

use crate::stats::loglinear::{self, Bucketed};
use crate::stats::{Distribution, Log2Counts, SIGNIFICANT_DIGITS, Unit};

/// The unit of every number in a document: nanoseconds, written `"ns"`. A typed marker, so a
/// document in any other unit is refused when read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Nanoseconds {
    /// nanoseconds
    #[default]
    #[serde(rename = "ns")]
    Ns,
}

/// The statistics of one latency, in ns. Percentiles are nearest-rank; each is `None` when there
/// are no samples. `stddev` is the population standard deviation, `None` where it is not known
/// (a kernel histogram keeps no sum of squares).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Summary {
    /// samples
    pub count: u64,
    /// smallest
    pub min: Option<u64>,
    /// median
    pub p50: Option<u64>,
    /// 90th percentile
    pub p90: Option<u64>,
    /// 99th percentile
    pub p99: Option<u64>,
    /// 99.9th percentile
    pub p999: Option<u64>,
    /// largest
    pub max: Option<u64>,
    /// arithmetic mean
    pub mean: Option<f64>,
    /// population standard deviation
    pub stddev: Option<f64>,
}

impl Summary {
    /// The summary of a distribution: exact moments and its percentiles.
    pub fn of(d: &Distribution) -> Summary {
        let s = d.summary();
        let p = d.percentiles();
        Summary {
            count: d.count(),
            min: s.min(),
            p50: p.map(|p| p.p50),
            p90: p.map(|p| p.p90),
            p99: p.map(|p| p.p99),
            p999: p.map(|p| p.p999),
            max: s.max(),
            mean: s.mean(),
            stddev: s.stddev(),
        }
    }

    /// The summary of a bucketed distribution: exact count, min, max and mean, percentiles
    /// estimated from the buckets (see [`Histogram::of_bucketed`] for their error bounds).
    pub fn of_bucketed(b: &Bucketed) -> Summary {
        let q = |q: f64| b.percentile(q).map(|e| e.value);
        let some = b.count > 0;
        Summary {
            count: b.count,
            min: some.then_some(b.min),
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            p999: q(0.999),
            max: some.then_some(b.max),
            mean: b.mean(),
            stddev: None,
        }
    }

    /// The summary of ascending `(value, count)` points (values rounded to whole ns).
    pub fn of_points(points: &[(f64, u64)]) -> Summary {
        let count: u64 = points.iter().map(|p| p.1).sum();
        if count == 0 {
            return Summary::default();
        }
        let n = count as f64;
        let mean = points.iter().map(|&(v, c)| v * c as f64).sum::<f64>() / n;
        let var = points
            .iter()
            .map(|&(v, c)| (v - mean).powi(2) * c as f64)
            .sum::<f64>()
            / n;
        let ns = |v: f64| v.round().max(0.0) as u64;
        let q = |q: f64| Some(ns(crate::stats::ab::quantile(points, q)));
        Summary {
            count,
            min: points.first().map(|p| ns(p.0)),
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            p999: q(0.999),
            max: points.last().map(|p| ns(p.0)),
            mean: Some(mean),
            stddev: Some(var.sqrt()),
        }
    }

    /// The percentiles in order, with their names as shown (`p50`, ... `p99.9`).
    pub fn percentiles(&self) -> [(&'static str, Option<u64>); 4] {
        [
            ("p50", self.p50),
            ("p90", self.p90),
            ("p99", self.p99),
            ("p99.9", self.p999),
        ]
    }

    /// Checks what a reader can: percentiles in order, min ≤ max, a finite mean between them,
    /// a finite non-negative deviation, nothing but a count of 0 without samples.
    pub fn check(&self) -> Result<(), String> {
        if self.count == 0 {
            let any = self.min.is_some() || self.max.is_some() || self.p50.is_some();
            return if any {
                Err("count is 0 but it has values".into())
            } else {
                Ok(())
            };
        }
        let (Some(min), Some(max)) = (self.min, self.max) else {
            return Err(format!("count is {} but min or max is missing", self.count));
        };
        if min > max {
            return Err(format!("min {min} is above max {max}"));
        }
        let present: Vec<u64> = self.percentiles().iter().filter_map(|p| p.1).collect();
        if present.windows(2).any(|w| w[0] > w[1]) {
            return Err(format!("percentiles out of order: {present:?}"));
        }
        if let Some(mean) = self.mean {
            let slack = 1e-9 * max as f64 + 1.0;
            if !mean.is_finite() || mean < min as f64 - slack || mean > max as f64 + slack {
                return Err(format!(
                    "mean {mean} is not between min {min} and max {max}"
                ));
            }
        }
        match self.stddev {
            Some(sd) if !sd.is_finite() || sd < 0.0 => Err(format!("stddev {sd} is not valid")),
            _ => Ok(()),
        }
    }
}

/// How the buckets of a [`Histogram`] are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Scheme {
    /// one bucket per power of two, bpftrace's `hist()`
    #[serde(rename = "log2")]
    Log2,
    /// 8 buckets per power of two, each at most 12.5% wide (`latscope live`)
    #[serde(rename = "log-linear-8")]
    LogLinear8,
}

/// One bucket: values in `[min, max]` (`max` inclusive, as bpftrace prints it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bucket {
    /// lowest value
    pub min: u64,
    /// highest value (inclusive)
    pub max: u64,
    /// values in the bucket
    pub count: u64,
}

/// How far each percentile of a bucket estimate can be from the true value, in ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ErrorBounds {
    /// of p50
    pub p50: Option<u64>,
    /// of p90
    pub p90: Option<u64>,
    /// of p99
    pub p99: Option<u64>,
    /// of p99.9
    pub p999: Option<u64>,
}

/// The encoding of an embedded HdrHistogram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum HdrEncoding {
    /// the standard V2 binary encoding in base64: the payload of an interval-log line
    #[serde(rename = "hdrhistogram-v2-base64")]
    V2Base64,
}

/// A whole HdrHistogram: every recorded value within 0.1%, so a reader can recompute any
/// percentile and compare on the samples themselves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hdr {
    /// precision
    pub significant_digits: u8,
    /// how `data` is encoded
    pub encoding: HdrEncoding,
    /// the histogram
    pub data: String,
}

impl Hdr {
    /// The HdrHistogram of `d`.
    pub fn of(d: &Distribution) -> Hdr {
        Hdr {
            significant_digits: SIGNIFICANT_DIGITS,
            encoding: HdrEncoding::V2Base64,
            data: d.hdr_base64(),
        }
    }

    /// The distinct values and their counts, ascending.
    pub fn points(&self) -> Result<Vec<(f64, u64)>, String> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&self.data)
            .map_err(|e| format!("the HdrHistogram is not base64: {e}"))?;
        let hist = decode_hdr(&bytes)?;
        Ok(hist
            .iter_recorded()
            .map(|v| (v.value_iterated_to() as f64, v.count_at_value()))
            .collect())
    }
}

/// Decodes an HdrHistogram (V2, or V2 compressed as interval logs hold it) with memory set
/// by the bytes given, not by the lengths they claim: the crate's decoder allocates the
/// payload length the header states before reading it (a 900-byte document claiming 4 GiB
/// took 4 GiB), so the claim is checked against the bytes present first; a compressed one is
/// inflated to at most [`MAX_INFLATION`] times its size (deflate's own limit is 1032).
pub fn decode_hdr(bytes: &[u8]) -> Result<hdrhistogram::Histogram<u64>, String> {
    const V2: u32 = 0x1c84_9313;
    const V2_COMPRESSED: u32 = 0x1c84_9314;
    /// cookie, payload length, normalizing offset, digits, lowest, highest, ratio
    const V2_HEADER: usize = 40;
    let decode_error = |e| format!("the HdrHistogram cannot be decoded: {e:?}");
    let claimed = word_at(bytes, 4).unwrap_or(0) as usize;
    match word_at(bytes, 0) {
        Some(V2) => {
            let present = bytes.len().saturating_sub(V2_HEADER);
            if bytes.len() < V2_HEADER || claimed > present {
                return Err(format!(
                    "the HdrHistogram claims a {claimed}-byte payload but holds {present} bytes: truncated or forged"
                ));
            }
            if holds_the_largest_varint(&bytes[V2_HEADER..V2_HEADER + claimed]) {
                return Err(
                    "the HdrHistogram holds a run of 2^63 empty buckets: forged".to_string()
                );
            }
            Deserializer::new()
                .deserialize(&mut &bytes[..V2_HEADER + claimed])
                .map_err(decode_error)
        }
        Some(V2_COMPRESSED) => {
            let present = bytes.len().saturating_sub(8);
            if bytes.len() < 8 || claimed > present {
                return Err(format!(
                    "the compressed HdrHistogram claims {claimed} bytes but holds {present}: truncated or forged"
                ));
            }
            let limit = (claimed as u64).saturating_mul(MAX_INFLATION);
            let mut inflated = Vec::new();
            let mut reader = std::io::Read::take(
                flate2::read::ZlibDecoder::new(&bytes[8..8 + claimed]),
                limit,
            );
            std::io::Read::read_to_end(&mut reader, &mut inflated)
                .map_err(|e| format!("the compressed HdrHistogram cannot be inflated: {e}"))?;
            if word_at(&inflated, 0) != Some(V2) {
                return Err("the compressed HdrHistogram does not hold a V2 one".into());
            }
            decode_hdr(&inflated)
        }
        _ => Err("the HdrHistogram cannot be decoded: not an HdrHistogram V2 encoding".into()),
    }
}

/// Whether an HdrHistogram V2 payload (its varints: 7 bits a byte, the ninth byte whole) holds
/// 2^64 - 1, which zig-zag decodes to i64::MIN: hdrhistogram 7.6 negates it as a run of empty
/// buckets (`-count_or_zeros`, "won't overflow" says its comment), which overflows. A release
/// build wraps and refuses the histogram; a build with overflow checks (the fuzzer's) panics.
fn holds_the_largest_varint(payload: &[u8]) -> bool {
    let mut i = 0;
    while i < payload.len() {
        let start = i;
        while i < payload.len() && i - start < 8 && payload[i] & 0x80 != 0 {
            i += 1;
        }
        // `i` is the last byte of this varint (or past the end of a truncated one).
        if i - start == 8 && i < payload.len() && payload[start..=i].iter().all(|&b| b == 0xFF) {
            return true;
        }
        i += 1;
    }
    false
}

/// How many times its compressed size an HdrHistogram may inflate to.
pub const MAX_INFLATION: u64 = 1032;

fn word_at(bytes: &[u8], at: usize) -> Option<u32> {
    bytes
        .get(at..at + 4)
        .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// The buckets of one latency, how exact its percentiles are, and (when the samples were seen
/// in user space) the whole HdrHistogram.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Histogram {
    /// bucket layout
    pub scheme: Scheme,
    /// always ns
    pub unit: Nanoseconds,
    /// the non-empty range of buckets
    pub buckets: Vec<Bucket>,
    /// whether the summary's percentiles are the exact nearest-rank values
    pub percentiles_exact: bool,
    /// the summary's percentiles are at most this far from the exact values (relative)
    pub percentile_max_relative_error: f64,
    /// per percentile, the absolute bound (bucket estimates only)
    pub percentile_error_bounds: Option<ErrorBounds>,
    /// the HdrHistogram, when the samples were recorded by latscope
    pub hdr: Option<Hdr>,
}

impl Histogram {
    /// The exact log2 buckets (ns) and the HdrHistogram of `d`.
    pub fn of(d: &Distribution) -> Histogram {
        Histogram {
            scheme: Scheme::Log2,
            unit: Nanoseconds::Ns,
            buckets: log2_buckets(&d.log2(Unit::Ns)),
            percentiles_exact: d.percentiles_exact(),
            percentile_max_relative_error: d.percentile_max_relative_error(),
            percentile_error_bounds: None,
            hdr: Some(Hdr::of(d)),
        }
    }

    /// The log-linear buckets of a kernel histogram, with each percentile's error bound.
    pub fn of_bucketed(b: &Bucketed) -> Histogram {
        let bound = |q: f64| b.percentile(q).map(|e| e.error_bound());
        let buckets = b
            .counts
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(i, &count)| {
                let (lo, hi) = loglinear::bounds(i);
                Bucket {
                    min: lo,
                    max: hi - 1,
                    count,
                }
            })
            .collect();
        Histogram {
            scheme: Scheme::LogLinear8,
            unit: Nanoseconds::Ns,
            buckets,
            percentiles_exact: false,
            percentile_max_relative_error: 0.125,
            percentile_error_bounds: Some(ErrorBounds {
                p50: bound(0.5),
                p90: bound(0.9),
                p99: bound(0.99),
                p999: bound(0.999),
            }),
            hdr: None,
        }
    }

    /// Checks the buckets: each `min ≤ max`, ascending, not overlapping, their counts adding up
    /// to at most `count` (a kernel map may lag its count).
    pub fn check(&self, count: u64) -> Result<(), String> {
        if self.buckets.iter().any(|b| b.min > b.max) {
            return Err("a bucket's min is above its max".into());
        }
        if self.buckets.windows(2).any(|w| w[0].max >= w[1].min) {
            return Err("buckets overlap or are out of order".into());
        }
        let total = self
            .buckets
            .iter()
            .try_fold(0u64, |s, b| s.checked_add(b.count))
            .ok_or("bucket counts overflow")?;
        if total > count && self.scheme == Scheme::Log2 {
            return Err(format!("buckets hold {total} values, the count is {count}"));
        }
        let e = self.percentile_max_relative_error;
        if !e.is_finite() || e < 0.0 {
            return Err(format!("percentile_max_relative_error {e} is not valid"));
        }
        Ok(())
    }
}

/// The non-empty log2 buckets of `counts`, `max` inclusive.
pub fn log2_buckets(counts: &Log2Counts) -> Vec<Bucket> {
    let Some(range) = counts.occupied() else {
        return Vec::new();
    };
    range
        .map(|i| {
            let (lo, hi) = Log2Counts::bounds(i);
            Bucket {
                min: lo,
                max: hi.map_or(u64::MAX, |h| h - 1),
                count: counts.counts()[i],
            }
        })
        .collect()
}

/// A latency: its summary (flattened into the object that holds it) and its histogram.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// the statistics
    #[serde(flatten)]
    pub summary: Summary,
    /// the buckets
    pub histogram: Histogram,
}

impl Latency {
    /// Summary and histogram of `d`.
    pub fn of(d: &Distribution) -> Latency {
        Latency {
            summary: Summary::of(d),
            histogram: Histogram::of(d),
        }
    }

    /// Summary and histogram of a kernel histogram.
    pub fn of_bucketed(b: &Bucketed) -> Latency {
        Latency {
            summary: Summary::of_bucketed(b),
            histogram: Histogram::of_bucketed(b),
        }
    }

    /// Checks summary and histogram.
    pub fn check(&self) -> Result<(), String> {
        self.summary.check()?;
        self.histogram.check(self.summary.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(compressed: bool) -> Vec<u8> {
        use hdrhistogram::serialization::{Serializer, V2DeflateSerializer, V2Serializer};
        let mut h = hdrhistogram::Histogram::<u64>::new(3).unwrap();
        for v in [10, 20, 20, 3000] {
            h.record(v).unwrap();
        }
        let mut bytes = Vec::new();
        if compressed {
            V2DeflateSerializer::new()
                .serialize(&h, &mut bytes)
                .unwrap();
        } else {
            V2Serializer::new().serialize(&h, &mut bytes).unwrap();
        }
        bytes
    }

    #[test]
    fn an_hdr_decodes_from_both_encodings() {
        for compressed in [false, true] {
            let h = decode_hdr(&encoded(compressed)).unwrap();
            assert_eq!((h.len(), h.min(), h.max()), (4, 10, 3001), "{compressed}");
        }
    }

    /// `inner` (a V2 encoding, true or not) deflated behind the compressed cookie.
    fn compressed(inner: &[u8]) -> Vec<u8> {
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut z, inner).unwrap();
        let z = z.finish().unwrap();
        let mut outer = 0x1c84_9314u32.to_be_bytes().to_vec();
        outer.extend((z.len() as u32).to_be_bytes());
        outer.extend(z);
        outer
    }

    /// A V2 header (digits 3, values 1 to 2) and `payload`.
    fn v2_with_payload(payload: &[u8]) -> Vec<u8> {
        let mut b = 0x1c84_9313u32.to_be_bytes().to_vec();
        b.extend((payload.len() as u32).to_be_bytes());
        b.extend(0u32.to_be_bytes()); // normalizing offset
        b.extend(3u32.to_be_bytes()); // significant digits
        b.extend(1u64.to_be_bytes()); // lowest
        b.extend(2u64.to_be_bytes()); // highest
        b.extend(1f64.to_be_bytes()); // conversion ratio
        b.extend(payload);
        b
    }

    #[test]
    fn an_hdr_with_a_run_of_2_63_empty_buckets_is_refused_not_negated() {
        // Nine 0xFF: the varint 2^64 - 1, zig-zag i64::MIN (found by the doc_reader fuzzer).
        let forged = v2_with_payload(&[0xFF; 9]);
        let e = decode_hdr(&forged).unwrap_err();
        assert!(e.contains("2^63 empty buckets: forged"), "{e}");
        // After other varints too, and inside a compressed one.
        let later = v2_with_payload(&[
            0x02, 0x81, 0x01, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
        ]);
        assert!(decode_hdr(&later).unwrap_err().contains("forged"));
        assert!(
            decode_hdr(&compressed(&forged))
                .unwrap_err()
                .contains("forged")
        );
        // The next value down and a truncated run are the decoder's to judge (no panic).
        let mut next = [0xFF; 9];
        next[8] = 0xFE;
        for payload in [&next[..], &[0xFF; 8]] {
            let judged = decode_hdr(&v2_with_payload(payload)).err();
            assert!(judged.is_none_or(|e| !e.contains("forged")));
        }
        // No count at index 0 (varint 0), then 2 at index 1 (varint 4, zig-zag 2).
        let h = decode_hdr(&v2_with_payload(&[0x00, 0x04])).unwrap();
        assert_eq!((h.len(), h.min(), h.max()), (2, 1, 1));
    }

    #[test]
    fn an_hdr_claiming_more_bytes_than_it_holds_is_refused_before_allocating() {
        for compressed in [false, true] {
            let mut bytes = encoded(compressed);
            bytes[4..8].copy_from_slice(&0xFFFF_FFF0u32.to_be_bytes());
            let e = decode_hdr(&bytes).unwrap_err();
            assert!(e.contains("4294967280") && e.contains("forged"), "{e}");
        }
        // A compressed one whose inner header lies.
        let mut inner = encoded(false);
        inner[4..8].copy_from_slice(&0x7FFF_FFFFu32.to_be_bytes());
        let e = decode_hdr(&compressed(&inner)).unwrap_err();
        assert!(e.contains("2147483647"), "{e}");
        assert!(decode_hdr(b"\x1c\x84").is_err());
    }

    #[test]
    fn a_summary_of_points_matches_hand_computed_values() {
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, population SD 2, nearest-rank p50 the 4th value.
        let s = Summary::of_points(&[(2.0, 1), (4.0, 3), (5.0, 2), (7.0, 1), (9.0, 1)]);
        assert_eq!(
            (s.count, s.min, s.p50, s.p90, s.max, s.mean, s.stddev),
            (8, Some(2), Some(4), Some(9), Some(9), Some(5.0), Some(2.0))
        );
        assert_eq!(Summary::of_points(&[]), Summary::default());
    }

    #[test]
    fn a_summary_of_a_distribution_equals_its_exact_statistics() {
        let mut d = Distribution::default();
        (1..=100).for_each(|v| d.record(v));
        let s = Summary::of(&d);
        assert_eq!(
            (s.count, s.min, s.p50, s.p99, s.p999, s.max, s.mean),
            (
                100,
                Some(1),
                Some(50),
                Some(99),
                Some(100),
                Some(100),
                Some(50.5)
            )
        );
        assert!(s.check().is_ok());
        assert_eq!(Histogram::of(&d).hdr.unwrap().points().unwrap().len(), 100);
    }

    #[test]
    fn impossible_summaries_are_refused() {
        let good = Summary::of_points(&[(10.0, 1), (20.0, 1)]);
        assert!(good.check().is_ok());
        let bad = [
            Summary {
                min: Some(30),
                ..good
            },
            Summary {
                p50: Some(25),
                p90: Some(15),
                ..good
            },
            Summary {
                mean: Some(f64::NAN),
                ..good
            },
            Summary {
                mean: Some(1e300),
                ..good
            },
            Summary {
                stddev: Some(-1.0),
                ..good
            },
            Summary { count: 0, ..good },
            Summary { min: None, ..good },
        ];
        for s in bad {
            assert!(s.check().is_err(), "{s:?}");
        }
    }
}
