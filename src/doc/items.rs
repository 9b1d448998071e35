//! Any document as comparable items: one per span, configuration, stage or command, each with
//! its summary and what a verdict can be computed from.

use super::dist::{Histogram, Summary};
use super::{DocError, Document, label};
use crate::stats::change::{Estimate, Evidence};

/// What an item can be compared on.
#[derive(Debug, Clone, PartialEq)]
pub enum Data {
    /// the distinct values with their counts, ascending
    Samples(Vec<(f64, u64)>),
    /// bucket estimates with error bounds, and the buckets (lower bound, count) for plots
    Histogram {
        /// (lower bound, count) of each non-empty bucket
        buckets: Vec<(f64, u64)>,
        /// median estimate
        p50: Estimate,
        /// 99th percentile estimate
        p99: Estimate,
    },
    /// the summary's percentiles only
    Summary,
}

/// One span, configuration, stage or command of one result.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    /// what it is
    pub name: String,
    /// side and group, or the sweep row, when any
    pub group: Option<String>,
    /// its statistics (ns)
    pub summary: Summary,
    /// what the verdict is computed from
    pub data: Data,
}

impl Item {
    /// `name [group]`
    pub fn label(&self) -> String {
        label(&self.name, self.group.as_deref())
    }

    /// The points to plot: exact values, or bucket lower bounds, with counts.
    pub fn points(&self) -> &[(f64, u64)] {
        match &self.data {
            Data::Samples(points)
            | Data::Histogram {
                buckets: points, ..
            } => points,
            Data::Summary => &[],
        }
    }

    /// What [`crate::stats::change::judge`] takes.
    pub fn evidence(&self) -> Evidence<'_> {
        let v = |x: Option<u64>| x.unwrap_or(0) as f64;
        match &self.data {
            Data::Samples(points) => Evidence::Samples(points),
            Data::Histogram { p50, p99, .. } => Evidence::Histogram {
                p50: *p50,
                p99: *p99,
            },
            Data::Summary => Evidence::Summary {
                p50: v(self.summary.p50),
                p99: v(self.summary.p99),
            },
        }
    }

    /// An item from a summary and its histogram: samples when the HdrHistogram is there,
    /// bucket estimates when error bounds are, else the summary alone.
    pub fn from_histogram(
        name: String,
        group: Option<String>,
        summary: Summary,
        h: Option<&Histogram>,
    ) -> Result<Item, String> {
        let data = match h {
            Some(Histogram { hdr: Some(hdr), .. }) => {
                let points = hdr.points()?;
                // Refused as merge refuses it: a count the samples do not add up to gave a
                // "median +100%" verdict beside +0.0% at every percentile.
                let held = points
                    .iter()
                    .try_fold(0u64, |n, &(_, c)| n.checked_add(c))
                    .ok_or("its HdrHistogram's counts overflow 64 bits")?;
                if held != summary.count {
                    return Err(format!(
                        "its HdrHistogram holds {held} values but its count is {}: the result is inconsistent",
                        summary.count
                    ));
                }
                Data::Samples(points)
            }
            Some(
                h @ Histogram {
                    percentile_error_bounds: Some(bounds),
                    ..
                },
            ) => {
                let est = |v: Option<u64>, e: Option<u64>| Estimate {
                    value: v.unwrap_or(0) as f64,
                    error: e.unwrap_or(0) as f64,
                };
                Data::Histogram {
                    buckets: h.buckets.iter().map(|b| (b.min as f64, b.count)).collect(),
                    p50: est(summary.p50, bounds.p50),
                    p99: est(summary.p99, bounds.p99),
                }
            }
            _ => Data::Summary,
        };
        Ok(Item {
            name,
            group,
            summary,
            data,
        })
    }
}

/// The items of a document, in document order.
pub fn items(file: &str, doc: &Document) -> Result<Vec<Item>, DocError> {
    let invalid = |reason: String| DocError::Invalid {
        file: file.to_string(),
        kind: doc.kind().name(),
        reason,
    };
    let out: Result<Vec<Item>, String> = match doc {
        Document::Spans(d) => d
            .spans
            .iter()
            .chain(&d.values)
            .map(|s| {
                let parts: Vec<&str> = [s.side.as_deref(), s.group.as_deref()]
                    .into_iter()
                    .flatten()
                    .collect();
                let group = (!parts.is_empty()).then(|| parts.join(" "));
                Item::from_histogram(
                    s.name.clone(),
                    group,
                    s.latency.summary,
                    Some(&s.latency.histogram),
                )
            })
            .collect(),
        Document::Bench(d) => Ok(d
            .commands
            .iter()
            .map(|c| {
                let walls: Vec<f64> = c.runs.iter().map(|r| r.wall_ns as f64).collect();
                Item {
                    // Matched by name, so a reordered benchmark still pairs the right ones.
                    name: format!("wall time of `{}`", c.name),
                    group: None,
                    summary: c.wall,
                    data: Data::Samples(crate::stats::ab::points(&walls)),
                }
            })
            .collect()),
        Document::LabIpc(d) => d
            .results
            .iter()
            .map(|r| Item::from_histogram(r.label(), None, r.dist.summary, Some(&r.dist.histogram)))
            .collect(),
        Document::LabX11(d) => d
            .results
            .iter()
            .map(|r| Item::from_histogram(r.label(), None, r.dist.summary, Some(&r.dist.histogram)))
            .collect(),
        Document::LabQueue(d) => d
            .rows
            .iter()
            .flat_map(|row| {
                let group = row.label();
                std::iter::once(("latency".to_string(), &row.latency))
                    .chain(row.stages.iter().map(|s| (s.name.clone(), &s.dist)))
                    .map(move |(name, l)| {
                        Item::from_histogram(name, group.clone(), l.summary, Some(&l.histogram))
                    })
            })
            .collect(),
        Document::LabWayland(d) => d
            .results
            .iter()
            .flat_map(|r| {
                r.metrics.iter().map(|m| {
                    let name = format!("{} {}", r.label, m.name);
                    Item::from_histogram(name, None, m.dist.summary, Some(&m.dist.histogram))
                })
            })
            .collect(),
        Document::LabGpu(d) => d
            .rows
            .iter()
            .flat_map(|row| {
                row.stages.iter().map(|s| {
                    let (summary, histogram) = (s.dist.summary, &s.dist.histogram);
                    Item::from_histogram(
                        s.name.clone(),
                        Some(row.label.clone()),
                        summary,
                        Some(histogram),
                    )
                })
            })
            .collect(),
        Document::Compare(d) => Ok(d
            .items
            .iter()
            .map(|i| Item {
                name: i.name.clone(),
                group: i.group.clone(),
                summary: i.after,
                data: Data::Summary,
            })
            .collect()),
        Document::Probes(_) => {
            return Err(DocError::NoLatency {
                file: file.to_string(),
                kind: doc.kind().name(),
            });
        }
    };
    out.map_err(invalid)
}
