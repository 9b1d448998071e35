//! Merging `spans` results of many machines or runs into one, exactly.
//!
//! Why only what merges exactly: a merged result is compared, plotted and exported like any
//! other, so its numbers must be as right as its inputs'. Series are paired by name, side,
//! `--by` field and group, and merged by what their histogram holds:
//!
//! - log-linear kernel buckets (`latscope live`): bucket counts, count, sum, min and max add
//!   exactly; percentiles and their error bounds are recomputed from the merged buckets (the
//!   sum is `mean × count`, exact while it stays below 2^51 ns, 26 days);
//! - an HdrHistogram (`latscope wayland`, `spans`): the histograms add exactly (HdrHistogram's
//!   own merge); count, min and max are exact, the mean exact up to floating point, the standard
//!   deviation pooled from each input's mean and deviation; percentiles come from the merged
//!   HdrHistogram (within 0.1%), and so do the log2 buckets (exactly: no HdrHistogram bucket
//!   straddles a power of two).
//!
//! Refused, with the reason: other kinds (a benchmark's runs are one interleaved schedule of one
//! machine, a comparison or a probe list is not a distribution, a lab result is a set of
//! configurations), documents of different versions or sources, a series whose histogram is
//! log-linear in one input and HdrHistogram in another, and a series with only log2 buckets
//! (bpftrace imports: its percentiles could not be recomputed). Rates add; their per-interval
//! counts and the individual spans kept (`slowest`, `records`) belong to one run's clock and
//! are dropped, with a warning. Every input is recorded in `merged_from`.

use std::collections::BTreeMap;

use base64::Engine;
use hdrhistogram::serialization::{Serializer, V2Serializer};

use crate::doc::dist::{
    ErrorBounds, Hdr, HdrEncoding, Histogram, Latency, Scheme, Summary, log2_buckets,
};
use crate::doc::spans::{Counters, MergedInput, Rate, Series, SpansDoc};
use crate::doc::{Document, Kind};
use crate::stats::loglinear::{self, Bucketed};
use crate::stats::{Log2Counts, SIGNIFICANT_DIGITS};

/// Why results cannot be merged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MergeError {
    /// fewer than two inputs
    #[error("merge needs at least two results, got {0}")]
    TooFew(usize),
    /// a kind that does not merge
    #[error("{file} is a {kind} result: {why}")]
    Kind {
        /// the input
        file: String,
        /// its kind
        kind: &'static str,
        /// why it does not merge
        why: &'static str,
    },
    /// inputs that disagree on their version or source
    #[error("{file} is {theirs} but {first} is {ours}: {why}")]
    Mismatch {
        /// the disagreeing input
        file: String,
        /// what it is
        theirs: String,
        /// the first input
        first: String,
        /// what that is
        ours: String,
        /// why that matters
        why: &'static str,
    },
    /// a series that cannot be merged
    #[error("{file}: series {series}: {why}")]
    Series {
        /// the input
        file: String,
        /// the series' label
        series: String,
        /// why
        why: String,
    },
}

fn why_not(kind: Kind) -> &'static str {
    match kind {
        Kind::Bench => {
            "a benchmark's samples are one interleaved schedule on one machine; merging runs would hide their differences (compare them instead)"
        }
        Kind::Compare => "a comparison is a verdict, not a distribution; merge its inputs instead",
        Kind::Probes => "a probe list is not a distribution",
        _ => "a lab result is a set of configurations of one machine, not one distribution",
    }
}

/// Merges `inputs` (file name, document), in order.
pub fn merge(inputs: &[(String, Document)]) -> Result<SpansDoc, MergeError> {
    if inputs.len() < 2 {
        return Err(MergeError::TooFew(inputs.len()));
    }
    let mut docs = Vec::new();
    for (file, doc) in inputs {
        match doc {
            Document::Spans(d) => docs.push((file.as_str(), d)),
            other => {
                return Err(MergeError::Kind {
                    file: file.clone(),
                    kind: other.kind().name(),
                    why: why_not(other.kind()),
                });
            }
        }
    }
    let (first_file, first) = docs[0];
    for &(file, d) in &docs[1..] {
        check_same(file, d, first_file, first)?;
    }
    let mut out = SpansDoc::new(first.source);
    out.version = first.version;
    out.format = first.format.clone();
    let mut spans = Merger::default();
    let mut values = Merger::default();
    let mut rates: Vec<(Rate, usize)> = Vec::new();
    for &(file, d) in &docs {
        if d.format != out.format {
            out.format = None;
        }
        for (k, v) in &d.input {
            let total = out.input.entry(k.clone()).or_default();
            *total = plus(*total, *v).map_err(|why| overflow(file, k, why))?;
        }
        out.warnings
            .extend(d.warnings.iter().map(|w| format!("{file}: {w}")));
        if !d.slowest.is_empty() || !d.records.is_empty() {
            out.warnings.push(format!(
                "{file}: its individual spans (slowest, records) are in its own run's clock and are not merged"
            ));
        }
        spans.add(file, &d.spans)?;
        values.add(file, &d.values)?;
        for r in &d.rates {
            add_rate(&mut rates, r).map_err(|why| overflow(file, &r.probe, why))?;
        }
        out.merged_from.push(MergedInput {
            file: file.to_string(),
            source: d.source,
            samples: d
                .spans
                .iter()
                .fold(0u64, |n, s| n.saturating_add(s.latency.summary.count)),
            stopped_by: d.live.as_ref().map(|l| l.stopped_by.clone()),
        });
    }
    if rates.iter().any(|(_, n)| *n > 1) {
        out.warnings.push(
            "rates: the per-interval counts of different runs do not line up in time and are not merged; totals are"
                .into(),
        );
    }
    out.rates = rates
        .into_iter()
        .map(|(mut r, n)| {
            if n > 1 {
                r.per_interval.clear();
            }
            r
        })
        .collect();
    out.spans = spans.finish()?;
    out.values = values.finish()?;
    Ok(out)
}

fn check_same(
    file: &str,
    d: &SpansDoc,
    first_file: &str,
    first: &SpansDoc,
) -> Result<(), MergeError> {
    let mismatch = |theirs: String, ours: String, why| MergeError::Mismatch {
        file: file.to_string(),
        theirs,
        first: first_file.to_string(),
        ours,
        why,
    };
    if d.version != first.version {
        return Err(mismatch(
            format!("version {}", d.version),
            format!("version {}", first.version),
            "documents of different versions may not measure the same way",
        ));
    }
    if d.source != first.source {
        let name = |s| format!("from {}", serde_json::to_value(s).unwrap_or_default());
        return Err(mismatch(
            name(d.source),
            name(first.source),
            "spans from different sources are different measurements even when named alike",
        ));
    }
    Ok(())
}

fn add_rate(rates: &mut Vec<(Rate, usize)>, r: &Rate) -> Result<(), String> {
    match rates
        .iter_mut()
        .find(|(x, _)| x.probe == r.probe && x.by == r.by && x.group == r.group)
    {
        Some((x, n)) => {
            x.count = plus(x.count, r.count)?;
            *n += 1;
        }
        None => rates.push((r.clone(), 1)),
    }
    Ok(())
}

/// `a + b`, or why not: a count beyond u64 could not be exact.
fn plus(a: u64, b: u64) -> Result<u64, String> {
    a.checked_add(b)
        .ok_or_else(|| "the merged count does not fit 64 bits".to_string())
}

fn overflow(file: &str, what: &str, why: String) -> MergeError {
    MergeError::Series {
        file: file.to_string(),
        series: what.to_string(),
        why,
    }
}

type Key = (String, Option<String>, Option<String>, Option<String>);

/// One merged series so far.
enum Acc {
    LogLinear(Bucketed),
    Hdr(HdrAcc),
}

struct HdrAcc {
    hdr: hdrhistogram::Histogram<u64>,
    count: u64,
    min: u64,
    max: u64,
    sum: f64,
    /// Σ n·(σ² + μ²), `None` once an input had no deviation
    sum_sq: Option<f64>,
}

#[derive(Default)]
struct Merger {
    order: Vec<Key>,
    series: BTreeMap<Key, (Series, Acc)>,
}

fn key(s: &Series) -> Key {
    (
        s.name.clone(),
        s.side.clone(),
        s.by.clone(),
        s.group.clone(),
    )
}

impl Merger {
    fn add(&mut self, file: &str, series: &[Series]) -> Result<(), MergeError> {
        for s in series {
            let k = key(s);
            let err = |why: String| MergeError::Series {
                file: file.to_string(),
                series: crate::doc::label(&s.name, s.group.as_deref()),
                why,
            };
            match self.series.get_mut(&k) {
                None => {
                    let acc = start(s).map_err(err)?;
                    self.order.push(k.clone());
                    self.series.insert(k, (s.clone(), acc));
                }
                Some((first, acc)) => {
                    add(acc, s).map_err(err)?;
                    first.counters = add_counters(&first.counters, &s.counters).map_err(err)?;
                }
            }
        }
        Ok(())
    }

    /// The merged series, each checked as the document reader checks it: merge never writes a
    /// document it would refuse to read.
    fn finish(mut self) -> Result<Vec<Series>, MergeError> {
        self.order
            .iter()
            .filter_map(|k| self.series.remove(k))
            .map(|(mut s, acc)| {
                let checked = match acc {
                    // The total first: percentiles are computed over it.
                    Acc::LogLinear(b) => {
                        match b.counts.iter().try_fold(0u64, |n, &c| n.checked_add(c)) {
                            Some(_) => {
                                s.latency = Latency::of_bucketed(&b);
                                Ok(())
                            }
                            None => Err("bucket counts overflow".to_string()),
                        }
                    }
                    Acc::Hdr(h) => {
                        s.latency = h.latency();
                        Ok(())
                    }
                }
                .and_then(|()| s.latency.summary.check())
                .and_then(|()| s.latency.histogram.check(s.latency.summary.count));
                match checked {
                    Ok(()) => Ok(s),
                    Err(why) => Err(MergeError::Series {
                        file: "the merged result".to_string(),
                        series: crate::doc::label(&s.name, s.group.as_deref()),
                        why: format!("{why} after merging: not written"),
                    }),
                }
            })
            .collect()
    }
}

fn start(s: &Series) -> Result<Acc, String> {
    let h = &s.latency.histogram;
    match (h.scheme, &h.hdr) {
        (Scheme::LogLinear8, _) => Ok(Acc::LogLinear(bucketed(&s.latency)?)),
        (Scheme::Log2, Some(_)) => {
            let mut acc = HdrAcc {
                hdr: hdrhistogram::Histogram::new(SIGNIFICANT_DIGITS)
                    .map_err(|e| format!("{e:?}"))?,
                count: 0,
                min: u64::MAX,
                max: 0,
                sum: 0.0,
                sum_sq: Some(0.0),
            };
            acc.add(&s.latency)?;
            Ok(Acc::Hdr(acc))
        }
        (Scheme::Log2, None) => Err(
            "it has only log2 buckets (no HdrHistogram, e.g. an imported bpftrace histogram): its percentiles could not be recomputed after merging"
                .into(),
        ),
    }
}

fn add(acc: &mut Acc, s: &Series) -> Result<(), String> {
    match (acc, s.latency.histogram.scheme) {
        (Acc::LogLinear(b), Scheme::LogLinear8) => {
            let other = bucketed(&s.latency)?;
            add_bucketed(b, &other)
        }
        (Acc::Hdr(h), Scheme::Log2) if s.latency.histogram.hdr.is_some() => h.add(&s.latency),
        _ => Err(
            "its histogram is log-linear in one input and an HdrHistogram (or log2 only) in another: different measurements do not merge"
                .into(),
        ),
    }
}

/// The kernel histogram a log-linear series was made from.
fn bucketed(l: &Latency) -> Result<Bucketed, String> {
    let mut b = Bucketed {
        count: l.summary.count,
        sum: (l.summary.mean.unwrap_or(0.0) * l.summary.count as f64).round() as u128,
        min: l.summary.min.unwrap_or(0),
        max: l.summary.max.unwrap_or(0),
        ..Bucketed::default()
    };
    for bucket in &l.histogram.buckets {
        let i = loglinear::index(bucket.min);
        let (lo, hi) = loglinear::bounds(i);
        if (lo, hi - 1) != (bucket.min, bucket.max) {
            return Err(format!(
                "[{}, {}] is not a log-linear bucket",
                bucket.min, bucket.max
            ));
        }
        if b.counts.len() <= i {
            b.counts.resize(i + 1, 0);
        }
        b.counts[i] = plus(b.counts[i], bucket.count)?;
    }
    Ok(b)
}

fn add_bucketed(a: &mut Bucketed, b: &Bucketed) -> Result<(), String> {
    if b.counts.len() > a.counts.len() {
        a.counts.resize(b.counts.len(), 0);
    }
    for (x, y) in a.counts.iter_mut().zip(&b.counts) {
        *x = plus(*x, *y)?;
    }
    if b.count > 0 {
        a.min = if a.count == 0 {
            b.min
        } else {
            a.min.min(b.min)
        };
        a.max = a.max.max(b.max);
    }
    a.count = plus(a.count, b.count)?;
    a.sum = a.sum.saturating_add(b.sum);
    Ok(())
}

/// The counters of two inputs added, checked as counts are (they saturated silently before).
fn add_counters(a: &Counters, b: &Counters) -> Result<Counters, String> {
    let add = |name: &str, x: Option<u64>, y: Option<u64>| match (x, y) {
        (None, None) => Ok(None),
        (x, y) => plus(x.unwrap_or(0), y.unwrap_or(0))
            .map(Some)
            .map_err(|_| format!("its {name} counter does not fit 64 bits after merging")),
    };
    Ok(Counters {
        unmatched: add("unmatched", a.unmatched, b.unmatched)?,
        superseded: add("superseded", a.superseded, b.superseded)?,
        orphan_ends: add("orphan_ends", a.orphan_ends, b.orphan_ends)?,
        discarded: add("discarded", a.discarded, b.discarded)?,
        backwards: add("backwards", a.backwards, b.backwards)?,
    })
}

impl HdrAcc {
    fn add(&mut self, l: &Latency) -> Result<(), String> {
        let Some(hdr) = &l.histogram.hdr else {
            return Err("no HdrHistogram".into());
        };
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&hdr.data)
            .map_err(|e| format!("the HdrHistogram is not base64: {e}"))?;
        let h = crate::doc::dist::decode_hdr(&bytes)?;
        if h.len() != l.summary.count {
            return Err(format!(
                "its HdrHistogram holds {} values but its count is {}: the result is inconsistent",
                h.len(),
                l.summary.count
            ));
        }
        self.hdr
            .add(&h)
            .map_err(|e| format!("the HdrHistogram cannot be added: {e:?}"))?;
        let s = &l.summary;
        if s.count > 0 {
            let mean = s.mean.unwrap_or(0.0);
            self.min = self.min.min(s.min.unwrap_or(u64::MAX));
            self.max = self.max.max(s.max.unwrap_or(0));
            self.sum += mean * s.count as f64;
            self.sum_sq = match (self.sum_sq, s.stddev) {
                (Some(acc), Some(sd)) => Some(acc + s.count as f64 * (sd * sd + mean * mean)),
                _ => None,
            };
            self.count = plus(self.count, s.count)?;
        }
        Ok(())
    }

    fn latency(self) -> Latency {
        let n = self.count as f64;
        let some = self.count > 0;
        let mean = some.then(|| self.sum / n);
        let q = |q: f64| some.then(|| self.hdr.value_at_quantile(q).clamp(self.min, self.max));
        let stddev = match (self.sum_sq, mean) {
            (Some(sq), Some(m)) => Some((sq / n - m * m).max(0.0).sqrt()),
            _ => None,
        };
        // The log2 buckets from the merged HdrHistogram: exact, since no HdrHistogram bucket
        // straddles a power of two (the inputs' own buckets could disagree with each other).
        let mut log2 = Log2Counts::default();
        for v in self.hdr.iter_recorded() {
            log2.record_n(v.value_iterated_to(), v.count_at_value());
        }
        let mut bytes = Vec::new();
        let data = match V2Serializer::new().serialize(&self.hdr, &mut bytes) {
            Ok(_) => base64::engine::general_purpose::STANDARD.encode(bytes),
            Err(_) => String::new(),
        };
        Latency {
            summary: Summary {
                count: self.count,
                min: some.then_some(self.min),
                p50: q(0.5),
                p90: q(0.9),
                p99: q(0.99),
                p999: q(0.999),
                max: some.then_some(self.max),
                mean,
                stddev,
            },
            histogram: Histogram {
                scheme: Scheme::Log2,
                unit: crate::doc::dist::Nanoseconds::Ns,
                buckets: log2_buckets(&log2),
                percentiles_exact: false,
                percentile_max_relative_error: 10f64.powi(-i32::from(SIGNIFICANT_DIGITS)),
                percentile_error_bounds: None::<ErrorBounds>,
                hdr: Some(Hdr {
                    significant_digits: SIGNIFICANT_DIGITS,
                    encoding: HdrEncoding::V2Base64,
                    data,
                }),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doc::spans::Source;
    use crate::stats::Distribution;

    fn live(values: &[u64]) -> SpansDoc {
        let mut b = Bucketed::default();
        values.iter().for_each(|&v| b.record(v));
        let mut doc = SpansDoc::new(Source::Live);
        doc.spans.push(Series {
            name: "req".into(),
            side: None,
            by: None,
            group: None,
            latency: Latency::of_bucketed(&b),
            counters: Counters::default(),
        });
        doc.rates.push(Rate {
            probe: "usdt:/t:p:tick".into(),
            by: None,
            group: None,
            count: values.len() as u64,
            per_interval: vec![values.len() as u64],
        });
        doc
    }

    fn wayland(values: &[u64]) -> SpansDoc {
        let mut d = Distribution::default();
        values.iter().for_each(|&v| d.record(v));
        let mut doc = SpansDoc::new(Source::Wayland);
        doc.spans.push(Series {
            name: "frame-done".into(),
            side: Some("client".into()),
            by: None,
            group: None,
            latency: Latency::of(&d),
            counters: Counters {
                unmatched: Some(1),
                ..Counters::default()
            },
        });
        doc
    }

    fn inputs(docs: Vec<SpansDoc>) -> Vec<(String, Document)> {
        docs.into_iter()
            .enumerate()
            .map(|(i, d)| (format!("run{i}.json"), Document::Spans(d)))
            .collect()
    }

    #[test]
    fn merge_of_two_live_runs_adds_buckets_and_counts_exactly() {
        let a = [50_000u64, 60_000, 200_000];
        let b = [55_000u64, 1_000_000];
        let merged = merge(&inputs(vec![live(&a), live(&b)])).unwrap();
        let all: Vec<u64> = a.iter().chain(&b).copied().collect();
        // The merged series is exactly the series of all five values recorded at once.
        assert_eq!(merged.spans[0], live(&all).spans[0]);
        assert_eq!(merged.spans[0].latency.summary.count, 5);
        assert_eq!(merged.spans[0].latency.summary.mean, Some(273_000.0));
        assert_eq!(merged.rates[0].count, 5);
        assert!(merged.rates[0].per_interval.is_empty());
        assert_eq!(merged.merged_from.len(), 2);
        assert_eq!(merged.merged_from[1].samples, 2);
    }

    #[test]
    fn merge_of_hdr_series_adds_histograms_and_pools_the_deviation() {
        let a: Vec<u64> = (1..=100).collect();
        let b: Vec<u64> = (101..=300).collect();
        let merged = merge(&inputs(vec![wayland(&a), wayland(&b)])).unwrap();
        let s = &merged.spans[0];
        // 1..=300: mean 150.5, population variance (300² − 1)/12 = 7499.9167, p50 = 150,
        // p99 = 297 (nearest rank 297 of 300), all exact at 3 significant digits.
        let l = &s.latency.summary;
        assert_eq!((l.count, l.min, l.max), (300, Some(1), Some(300)));
        assert_eq!((l.p50, l.p99), (Some(150), Some(297)));
        assert!((l.mean.unwrap() - 150.5).abs() < 1e-9);
        assert!((l.stddev.unwrap() - (89_999.0f64 / 12.0).sqrt()).abs() < 1e-6);
        assert_eq!(s.counters.unmatched, Some(2));
        let total: u64 = s.latency.histogram.buckets.iter().map(|b| b.count).sum();
        assert_eq!(total, 300);
        assert_eq!(
            s.latency
                .histogram
                .hdr
                .as_ref()
                .unwrap()
                .points()
                .unwrap()
                .len(),
            300
        );
    }

    #[test]
    fn other_kinds_sources_and_versions_are_refused_with_the_reason() {
        let e = merge(&inputs(vec![live(&[1]), wayland(&[1])])).unwrap_err();
        assert!(e.to_string().contains("different sources"), "{e}");
        let mut newer = live(&[1]);
        newer.version = 2;
        let e = merge(&inputs(vec![live(&[1]), newer])).unwrap_err();
        assert!(
            e.to_string()
                .contains("is version 2 but run0.json is version 1"),
            "{e}"
        );
        let compare =
            crate::doc::read("c.json", r#"{"kind":"probes","version":1,"files":[]}"#).unwrap();
        let mut docs = inputs(vec![live(&[1])]);
        docs.push(("p.json".into(), compare));
        let e = merge(&docs).unwrap_err();
        assert!(
            e.to_string().starts_with("p.json is a probes result"),
            "{e}"
        );
        assert_eq!(merge(&docs[..1]).unwrap_err(), MergeError::TooFew(1));
    }

    #[test]
    fn log2_buckets_of_a_merge_come_from_the_merged_histogram_not_the_inputs_buckets() {
        // Found by fuzzing: inputs whose own buckets disagree (here one wide bucket) used to
        // merge into overlapping buckets. 5, 6 and 7 lie in [4, 7]: one log2 bucket of 3.
        let mut b = wayland(&[7]);
        b.spans[0].latency.histogram.buckets = vec![crate::doc::Bucket {
            min: 0,
            max: 100,
            count: 1,
        }];
        let merged = merge(&inputs(vec![wayland(&[5, 6]), b])).unwrap();
        let h = &merged.spans[0].latency.histogram;
        assert_eq!(
            h.buckets,
            vec![crate::doc::Bucket {
                min: 4,
                max: 7,
                count: 3
            }]
        );
        let text = crate::doc::to_json(&merged, false);
        assert!(crate::doc::read("merged.json", &text).is_ok());
    }

    #[test]
    fn an_hdr_histogram_that_disagrees_with_its_count_is_refused() {
        // Found by fuzzing: the merged buckets would hold more values than the merged count.
        let mut a = wayland(&[5, 6, 7]);
        a.spans[0].latency.summary.count = 2;
        let e = merge(&inputs(vec![a, wayland(&[7])])).unwrap_err();
        assert!(
            e.to_string().contains("holds 3 values but its count is 2"),
            "{e}"
        );
    }

    #[test]
    fn a_series_with_only_log2_buckets_is_refused() {
        let mut a = wayland(&[5, 6]);
        a.spans[0].latency.histogram.hdr = None;
        let e = merge(&inputs(vec![a, wayland(&[7])])).unwrap_err();
        assert!(e.to_string().contains("only log2 buckets"), "{e}");
    }
}
