//! The live session's snapshots as Prometheus metrics, encoded by `prometheus-client`.
//!
//! Why a [`Collector`] over a shared snapshot rather than prometheus-client's own histograms:
//! the kernel already aggregated every value into log-linear buckets; re-observing them one by
//! one would be slow and lose nothing but precision. The collector encodes the latest snapshot
//! the session published (see [`Shared`]) on each scrape:
//!
//! - every span as `latscope_span_nanoseconds{span="NAME", ...}`: a native histogram at
//!   schema 5 (see [`super::native`]) with exact power-of-two classic buckets alongside, so
//!   that a scraper without native histograms (OpenMetrics text) still gets a histogram;
//! - every `--value` as `latscope_value{value="NAME", ...}` (the probe argument's own unit);
//! - every `--rate` as the counter `latscope_rate_events_total{probe="SPEC", ...}`.
//!
//! Labels: the `--label k=v` pairs first, then the series name, then the `--by` field named
//! after itself (`tid="4242"`). prometheus-client writes label values as given, so `"`, `\`
//! and line breaks in a group (a `comm` can hold anything) are replaced by `'`, `/` and a space.

use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, MetricEncoder, NativeHistogram, NativeHistogramBuckets, NoLabelSet,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use super::native::{self, Native};
use crate::live::output::Snapshot;
use crate::report::live::Names;
use crate::stats::loglinear::Bucketed;

/// The latest snapshot, written by the live session, read by scrapes. A scrape clones it under
/// the lock (microseconds), so publishing never waits for a slow scraper.
#[derive(Debug, Clone, Default)]
pub struct Shared(Arc<Mutex<Option<Snapshot>>>);

impl Shared {
    /// Replaces the published snapshot.
    pub fn publish(&self, snapshot: &Snapshot) {
        let copy = snapshot.clone();
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(copy);
    }

    /// The published snapshot, if any.
    pub fn latest(&self) -> Option<Snapshot> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// A `--label` pair: a valid Prometheus label name not used by latscope itself.
pub fn parse_label(text: &str) -> Result<(String, String), String> {
    let (key, value) = text
        .split_once('=')
        .ok_or_else(|| format!("--label {text:?}: expected KEY=VALUE, e.g. host=lab1"))?;
    let valid = key
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !key.starts_with("__");
    if !valid {
        return Err(format!(
            "--label {text:?}: {key:?} is not a label name (letters, digits and _, not starting with a digit or __)"
        ));
    }
    if ["span", "value", "probe", "le"].contains(&key) {
        return Err(format!(
            "--label {text:?}: {key:?} is set by latscope itself; choose another name"
        ));
    }
    Ok((key.to_string(), clean(value)))
}

/// Every `--label`, each valid by [`parse_label`], none repeated and none named like the `--by`
/// field (latscope labels groups with it): Prometheus refuses a scrape with a label twice.
pub fn parse_labels(texts: &[String], by: Option<&str>) -> Result<Vec<(String, String)>, String> {
    let mut labels: Vec<(String, String)> = Vec::new();
    for text in texts {
        let (key, value) = parse_label(text)?;
        if labels.iter().any(|(k, _)| *k == key) {
            return Err(format!("--label {text:?}: {key:?} is given twice"));
        }
        if by == Some(key.as_str()) {
            return Err(format!(
                "--label {text:?}: {key:?} labels the --by groups already; choose another name"
            ));
        }
        labels.push((key, value));
    }
    Ok(labels)
}

fn clean(value: &str) -> String {
    value
        .chars()
        .map(|c| match c {
            '"' => '\'',
            '\\' => '/',
            '\n' | '\r' => ' ',
            c => c,
        })
        .collect()
}

/// What a scrape encodes: the series' names and labels, and the shared snapshot.
#[derive(Debug)]
pub struct LiveMetrics {
    names: Names,
    labels: Vec<(String, String)>,
    shared: Shared,
}

impl LiveMetrics {
    /// Metrics for the series in `names`, with the constant `labels` on every series.
    pub fn new(names: Names, labels: Vec<(String, String)>, shared: Shared) -> LiveMetrics {
        LiveMetrics {
            names,
            labels,
            shared,
        }
    }

    /// A registry holding these metrics only.
    pub fn registry(self) -> Registry {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(self));
        registry
    }

    fn labels(&self, kind: &str, name: &str, group: Option<&str>) -> Vec<(String, String)> {
        let mut labels = self.labels.clone();
        labels.push((kind.to_string(), clean(name)));
        if let (Some(by), Some(group)) = (&self.names.by, group) {
            labels.push((by.clone(), clean(group)));
        }
        labels
    }
}

type Series = [std::collections::BTreeMap<Option<String>, Bucketed>];

impl LiveMetrics {
    fn histograms(
        &self,
        encoder: &mut DescriptorEncoder,
        (metric, help, kind): (&str, &str, &str),
        names: &[String],
        series: &Series,
    ) -> Result<(), std::fmt::Error> {
        if names.is_empty() {
            return Ok(());
        }
        let mut family = encoder.encode_descriptor(metric, help, None, MetricType::Histogram)?;
        for (i, name) in names.iter().enumerate() {
            for (group, b) in series.get(i).into_iter().flatten() {
                let labels = self.labels(kind, name, group.as_deref());
                histogram(family.encode_family(&labels)?, b)?;
            }
        }
        Ok(())
    }
}

fn histogram(mut encoder: MetricEncoder<'_>, b: &Bucketed) -> Result<(), std::fmt::Error> {
    let native = Native::of(b);
    let classic = native::classic_buckets(b);
    encoder.encode_histogram_with_native::<NoLabelSet>(
        native.sum,
        native.count,
        &classic,
        None,
        NativeHistogram {
            schema: native::SCHEMA,
            zero_threshold: 0.0,
            zero_count: native.zero_count,
            negative: NativeHistogramBuckets {
                spans: &[],
                deltas: &[],
            },
            positive: NativeHistogramBuckets {
                spans: &native.spans,
                deltas: &native.deltas,
            },
            created: None,
        },
    )
}

impl Collector for LiveMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(snapshot) = self.shared.latest() else {
            return Ok(());
        };
        let spans = (
            "latscope_span_nanoseconds",
            "Latency of each span traced by latscope live, in ns",
            "span",
        );
        self.histograms(&mut encoder, spans, &self.names.spans, &snapshot.spans)?;
        let values = (
            "latscope_value",
            "Distribution of each probe argument traced by latscope live (the argument's unit)",
            "value",
        );
        self.histograms(&mut encoder, values, &self.names.values, &snapshot.values)?;
        if !self.names.rates.is_empty() {
            let mut family = encoder.encode_descriptor(
                "latscope_rate_events",
                "Events of each probe counted by latscope live",
                None,
                MetricType::Counter,
            )?;
            for (i, probe) in self.names.rates.iter().enumerate() {
                for (group, &total) in snapshot.rates.get(i).into_iter().flatten() {
                    let labels = self.labels("probe", probe, group.as_deref());
                    family
                        .encode_family(&labels)?
                        .encode_counter::<NoLabelSet, _, u64>(&total, None)?;
                }
            }
        }
        Ok(())
    }
}

/// The OpenMetrics text of a registry.
pub fn text(registry: &Registry) -> Result<String, std::fmt::Error> {
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, registry)?;
    Ok(out)
}

/// The length-delimited `io.prometheus.client.MetricFamily` protobuf of a registry: the only
/// form in which Prometheus 2.42 takes native histograms.
pub fn protobuf(registry: &Registry) -> Result<Vec<u8>, String> {
    prometheus_client::encoding::prometheus_protobuf::encode_to_vec(registry)
        .map_err(|e| format!("{e:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metrics(by: Option<&str>) -> (LiveMetrics, Shared) {
        let names = Names {
            spans: vec!["req".into()],
            values: vec![],
            rates: vec!["usdt:/t:p:tick".into()],
            by: by.map(str::to_string),
        };
        let shared = Shared::default();
        let labels = vec![("host".to_string(), "lab1".to_string())];
        (LiveMetrics::new(names, labels, shared.clone()), shared)
    }

    #[test]
    fn the_text_form_has_exact_power_of_two_buckets_and_the_rate_counter() {
        let (m, shared) = metrics(None);
        let mut s = Snapshot::new(1, 0, 1, false);
        let b = s.spans[0].entry(None).or_default();
        [50_000u64, 60_000, 200_000]
            .iter()
            .for_each(|&v| b.record(v));
        s.rates[0].insert(None, 3);
        shared.publish(&s);
        let text = text(&m.registry()).unwrap();
        // 50 000 and 60 000 lie in [2^15, 2^16), 200 000 in [2^17, 2^18).
        assert!(
            text.contains(
                r#"latscope_span_nanoseconds_bucket{le="65536.0",host="lab1",span="req"} 2"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"latscope_span_nanoseconds_bucket{le="262144.0",host="lab1",span="req"} 3"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"latscope_span_nanoseconds_bucket{le="+Inf",host="lab1",span="req"} 3"#
            ),
            "{text}"
        );
        assert!(text.contains(r#"latscope_span_nanoseconds_sum{host="lab1",span="req"} 310000.0"#));
        assert!(
            text.contains(r#"latscope_rate_events_total{host="lab1",probe="usdt:/t:p:tick"} 3"#),
            "{text}"
        );
    }

    #[test]
    fn the_protobuf_form_carries_the_native_buckets_and_group_labels() {
        use prometheus_client::encoding::prometheus_protobuf::encode;
        let (m, shared) = metrics(Some("tid"));
        let mut s = Snapshot::new(1, 0, 1, true);
        let b = s.spans[0].entry(Some("42\"x".into())).or_default();
        (0..100).for_each(|i| b.record(if i % 2 == 0 { 32 } else { 35 }));
        shared.publish(&s);
        let families = encode(&m.registry()).unwrap();
        let span = &families[0];
        assert_eq!(span.name, "latscope_span_nanoseconds");
        let metric = &span.metric[0];
        let labels: Vec<(&str, &str)> = metric
            .label
            .iter()
            .map(|l| (l.name.as_str(), l.value.as_str()))
            .collect();
        assert_eq!(
            labels,
            vec![("host", "lab1"), ("span", "req"), ("tid", "42'x")]
        );
        let h = metric.histogram.as_ref().unwrap();
        assert_eq!((h.schema, h.sample_count), (5, 100));
        // The log-linear bucket [32, 36), spread as in native.rs's hand-computed test:
        // 18, 17, 19, 18, 20, 8.
        assert_eq!(h.positive_span.len(), 1);
        assert_eq!(
            (h.positive_span[0].offset, h.positive_span[0].length),
            (161, 6)
        );
        assert_eq!(h.positive_delta, vec![18, -1, 2, -1, 2, -12]);
    }

    #[test]
    fn nothing_is_encoded_before_the_first_snapshot() {
        let (m, _) = metrics(None);
        assert_eq!(text(&m.registry()).unwrap(), "# EOF\n");
    }

    #[test]
    fn labels_are_checked() {
        assert_eq!(
            parse_label("host=lab 1"),
            Ok(("host".into(), "lab 1".into()))
        );
        assert!(parse_label("host").is_err());
        assert!(parse_label("1host=x").is_err());
        assert!(parse_label("__name__=x").is_err());
        assert!(
            parse_label("span=x")
                .unwrap_err()
                .contains("set by latscope")
        );
    }

    #[test]
    fn a_label_given_twice_or_named_like_the_by_field_is_refused() {
        let texts = |t: &[&str]| t.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            parse_labels(&texts(&["host=a", "build=1"]), Some("tid")),
            Ok(vec![
                ("host".to_string(), "a".to_string()),
                ("build".to_string(), "1".to_string())
            ])
        );
        let twice = parse_labels(&texts(&["host=a", "host=b"]), None).unwrap_err();
        assert!(twice.contains("given twice"), "{twice}");
        let by = parse_labels(&texts(&["tid=1"]), Some("tid")).unwrap_err();
        assert!(by.contains("labels the --by groups"), "{by}");
    }
}
