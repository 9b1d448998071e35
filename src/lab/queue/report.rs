//! Per-stage statistics of a pipeline run, sweeps over parameters, and their rendering.
//!
//! The point of the lab is that one number (per-batch time) and the distribution users feel
//! (per-request latency) can rank two configurations in opposite orders; [`Sweep`] marks the
//! rows where they do.

use std::fmt::Write;

use super::model::{Moment, Request};
use crate::doc::Latency;
use crate::doc::lab::{Label, QueueRow, Stage};
use crate::stats::{Distribution, Unit};

/// The stages of a request, each as a distribution.
#[derive(Debug, Clone)]
pub struct Stages {
    /// end of prep → taken for submission
    pub queued: Distribution,
    /// taken → the engine starts it
    pub to_start: Distribution,
    /// engine start → completion
    pub exec: Distribution,
    /// a group's end → the engine's next group start
    pub completion_to_next_submit: Distribution,
}

/// What one run (model or real) is reported as.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// last completion ÷ requests (what gem_exec_nop reports), ns
    pub per_batch_ns: f64,
    /// end of prep → completion
    pub latency: Distribution,
    /// per stage
    pub stages: Stages,
    /// the first events
    pub timeline: Vec<Moment>,
    /// individual requests' stages (`--max-spans N`; see [`RunReport::keep`])
    pub kept: crate::doc::lab::Records,
}

/// The series a request is kept as, with each one's start and end: the latency and the three
/// stages it is the sum of (the gap between groups is not a request's and is not kept).
const SERIES: [&str; 4] = ["latency", "queued", "to_start", "exec"];

impl RunReport {
    /// Keeps the first `max` requests of each series and the slowest (times as in the run:
    /// ns since the first prep started).
    pub fn keep(&mut self, requests: &[Request], max: usize) {
        let mut recorder = crate::lab::records::Recorder::new(max, &SERIES);
        if max > 0 {
            for r in requests {
                let spans = [
                    (r.prep_end, r.completion),
                    (r.prep_end, r.taken),
                    (r.taken, r.start),
                    (r.start, r.completion),
                ];
                for (i, (from, to)) in spans.into_iter().enumerate() {
                    recorder.sample(i, from, to.saturating_sub(from));
                }
            }
        }
        self.kept = recorder.finish();
    }

    /// Summarises requests (times relative to the first prep) and group gaps.
    pub fn new(requests: &[Request], completion_to_next: &[u64], timeline: Vec<Moment>) -> Self {
        let mut latency = Distribution::default();
        let mut stages = Stages {
            queued: Distribution::default(),
            to_start: Distribution::default(),
            exec: Distribution::default(),
            completion_to_next_submit: Distribution::default(),
        };
        for r in requests {
            latency.record(r.completion.saturating_sub(r.prep_end));
            stages.queued.record(r.taken.saturating_sub(r.prep_end));
            stages.to_start.record(r.start.saturating_sub(r.taken));
            stages.exec.record(r.completion.saturating_sub(r.start));
        }
        for &gap in completion_to_next {
            stages.completion_to_next_submit.record(gap);
        }
        let end = requests.iter().map(|r| r.completion).max().unwrap_or(0);
        let per_batch_ns = if requests.is_empty() {
            0.0
        } else {
            end as f64 / requests.len() as f64
        };
        RunReport {
            per_batch_ns,
            latency,
            stages,
            timeline,
            kept: crate::doc::lab::Records::default(),
        }
    }

    fn stage_list(&self) -> [(&'static str, &'static str, &Distribution); 5] {
        [
            ("latency (prep end → completion)", "latency", &self.latency),
            ("queued (prep end → taken)", "queued", &self.stages.queued),
            ("taken → engine start", "to_start", &self.stages.to_start),
            ("engine start → completion", "exec", &self.stages.exec),
            (
                "completion → next group start",
                "completion_to_next_submit",
                &self.stages.completion_to_next_submit,
            ),
        ]
    }
}

/// The terminal report of one run.
pub fn text(report: &RunReport, unit: Unit) -> String {
    let mut out = String::new();
    if !report.timeline.is_empty() {
        let _ = writeln!(out, "timeline (first {} events):", report.timeline.len());
        for m in &report.timeline {
            let _ = writeln!(out, "  {:>12}  {}", unit.format(m.at), m.what);
        }
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "per batch (last completion ÷ requests, what gem_exec_nop reports): {}",
        format_ns_f(report.per_batch_ns, unit)
    );
    let _ = writeln!(
        out,
        "\n{:<34} {:>8} {:>12} {:>12} {:>12} {:>12}",
        "stage", "count", "min", "p50", "p99", "max"
    );
    for (label, _, d) in report.stage_list() {
        let p = d.percentiles();
        let f = |v: Option<u64>| v.map_or_else(|| "–".to_string(), |v| unit.format(v));
        let _ = writeln!(
            out,
            "{label:<34} {:>8} {:>12} {:>12} {:>12} {:>12}",
            d.count(),
            f(d.summary().min()),
            f(p.map(|p| p.p50)),
            f(p.map(|p| p.p99)),
            f(d.summary().max())
        );
    }
    let _ = writeln!(out, "\n@latency ({}):", unit.symbol());
    out.push_str(&crate::report::log2::render(&report.latency.log2(unit)));
    out
}

fn format_ns_f(ns: f64, unit: Unit) -> String {
    format!("{:.4} {}", unit.from_nanos(ns), unit.symbol())
}

/// One configuration of a sweep.
#[derive(Debug, Clone)]
pub struct Row {
    /// the swept parameters, as `name=value` labels
    pub labels: Vec<(String, String)>,
    /// its run
    pub report: RunReport,
}

/// Rows of a sweep with the disagreement marks.
#[derive(Debug, Clone)]
pub struct Sweep {
    /// one per configuration, in sweep order
    pub rows: Vec<Row>,
}

impl Sweep {
    /// For each row, whether some other row is ranked the other way by per-batch time than by
    /// median latency (strictly on both).
    pub fn disagreements(&self) -> Vec<bool> {
        let key = |r: &Row| {
            (
                r.report.per_batch_ns,
                r.report.latency.percentiles().map_or(0, |p| p.p50),
            )
        };
        self.rows
            .iter()
            .map(|a| {
                let (pa, la) = key(a);
                self.rows.iter().any(|b| {
                    let (pb, lb) = key(b);
                    (pa < pb && la > lb) || (pa > pb && la < lb)
                })
            })
            .collect()
    }

    /// Each row's rank (1 = best) by per-batch time and by median latency.
    pub fn ranks(&self) -> Vec<(usize, usize)> {
        let rank_by = |key: &dyn Fn(&Row) -> f64| -> Vec<usize> {
            self.rows
                .iter()
                .map(|a| 1 + self.rows.iter().filter(|b| key(b) < key(a)).count())
                .collect()
        };
        let per_batch = rank_by(&|r: &Row| r.report.per_batch_ns);
        let latency =
            rank_by(&|r: &Row| r.report.latency.percentiles().map_or(0, |p| p.p50) as f64);
        per_batch.into_iter().zip(latency).collect()
    }

    /// A table like the seed's, with latency beside per-batch time.
    pub fn text(&self, unit: Unit) -> String {
        let marks = self.disagreements();
        let ranks = self.ranks();
        let mut out = String::new();
        for ((row, &mark), (by_batch, by_latency)) in self.rows.iter().zip(&marks).zip(ranks) {
            let labels: Vec<String> = row.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let l = &row.report.latency;
            let p = l.percentiles().unwrap_or_default();
            let f = |v: u64| unit.format(v);
            let _ = writeln!(
                out,
                "Time per batch: {:>14} ({})   latency min {}  p50 {}  p99 {}  max {}   rank #{by_batch} by per-batch, #{by_latency} by latency{}",
                format_ns_f(row.report.per_batch_ns, unit),
                labels.join(", "),
                f(l.summary().min().unwrap_or(0)),
                f(p.p50),
                f(p.p99),
                f(l.summary().max().unwrap_or(0)),
                if mark { "  ⇅" } else { "" }
            );
        }
        if marks.iter().any(|&m| m) {
            let _ = writeln!(
                out,
                "\n⇅: another row is faster by one measure and slower by the other; \"time ÷ batches\" hides per-request cost when the queue coalesces work."
            );
        }
        out
    }

    /// A Markdown table.
    pub fn markdown(&self, unit: Unit) -> String {
        let marks = self.disagreements();
        let u = unit.symbol();
        let ranks = self.ranks();
        let mut out = format!(
            "| configuration | per batch [{u}] | latency min [{u}] | p50 [{u}] | p99 [{u}] | max [{u}] | rank by per-batch | rank by latency | disagrees |\n|---|--:|--:|--:|--:|--:|--:|--:|:-:|\n"
        );
        for ((row, &mark), (by_batch, by_latency)) in self.rows.iter().zip(&marks).zip(ranks) {
            let labels: Vec<String> = row.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let l = &row.report.latency;
            let p = l.percentiles().unwrap_or_default();
            let n = |v: u64| unit.format_number(v);
            let _ = writeln!(
                out,
                "| {} | {:.4} | {} | {} | {} | {} | {by_batch} | {by_latency} | {} |",
                crate::report::format::markdown_cell(&labels.join(", ")),
                unit.from_nanos(row.report.per_batch_ns),
                n(l.summary().min().unwrap_or(0)),
                n(p.p50),
                n(p.p99),
                n(l.summary().max().unwrap_or(0)),
                if mark { "⇅" } else { "" }
            );
        }
        out
    }

    /// The rows of the `lab-queue` document, with each row's marks and ranks.
    pub fn document_rows(&self) -> Vec<QueueRow> {
        let marks = self.disagreements();
        let ranks = self.ranks();
        self.rows
            .iter()
            .zip(marks)
            .zip(ranks)
            .map(|((row, disagrees), (by_batch, by_latency))| QueueRow {
                labels: row
                    .labels
                    .iter()
                    .map(|(name, value)| Label {
                        name: name.clone(),
                        value: value.clone(),
                    })
                    .collect(),
                per_batch_ns: row.report.per_batch_ns,
                latency: Latency::of(&row.report.latency),
                stages: row
                    .report
                    .stage_list()
                    .into_iter()
                    .skip(1)
                    .map(|(_, name, d)| Stage {
                        name: name.to_string(),
                        dist: Latency::of(d),
                    })
                    .collect(),
                disagrees,
                rank_per_batch: by_batch as u64,
                rank_latency: by_latency as u64,
                kept: row.report.kept.clone(),
            })
            .collect()
    }
}

impl crate::report::Render for Sweep {
    fn text(&self, unit: Unit) -> String {
        Sweep::text(self, unit)
    }

    fn markdown(&self, unit: Unit) -> String {
        Sweep::markdown(self, unit)
    }
}

#[cfg(test)]
mod tests {
    use super::super::model::{Params, run};
    use super::*;

    fn report(p: &Params) -> RunReport {
        let o = run(p, 0);
        RunReport::new(&o.requests, &o.completion_to_next, o.timeline)
    }

    #[test]
    fn stages_of_the_idle_path_are_exact() {
        let r = report(&Params {
            gap: 4_000,
            batches: 100,
            ..Params::default()
        });
        assert_eq!(r.latency.summary().min(), Some(7_000));
        assert_eq!(r.latency.summary().max(), Some(7_000));
        assert_eq!(r.stages.queued.summary().max(), Some(0));
        assert_eq!(r.stages.to_start.summary().min(), Some(4_000));
        assert_eq!(r.stages.exec.summary().max(), Some(3_000));
        assert_eq!(
            r.stages.completion_to_next_submit.summary().min(),
            Some(7_000)
        );
        assert_eq!(r.stages.completion_to_next_submit.count(), 99);
    }

    #[test]
    fn the_sweep_marks_the_rows_where_per_batch_and_latency_disagree() {
        let rows = [0u64, 4_000]
            .iter()
            .map(|&gap| Row {
                labels: vec![("gap".into(), gap.to_string())],
                report: report(&Params {
                    gap,
                    batches: 1_000,
                    ..Params::default()
                }),
            })
            .collect();
        let sweep = Sweep { rows };
        // gap 0: 3.0 µs per batch but ms latency; gap 4 µs: 10 µs per batch, 7 µs latency.
        assert_eq!(sweep.disagreements(), [true, true]);
        assert_eq!(sweep.ranks(), [(1, 2), (2, 1)]);
        let text = sweep.text(Unit::Us);
        assert!(text.contains("(gap=0)") && text.contains("⇅"), "{text}");
    }

    #[test]
    fn the_document_rows_carry_every_stage_and_the_ranks() {
        let r = report(&Params {
            gap: 4_000,
            batches: 10,
            ..Params::default()
        });
        let rows = Sweep {
            rows: vec![Row {
                labels: Vec::new(),
                report: r,
            }],
        }
        .document_rows();
        assert_eq!(rows[0].latency.summary.p50, Some(7_000));
        let stage = |n: &str| rows[0].stages.iter().find(|s| s.name == n).unwrap();
        assert_eq!(stage("to_start").dist.summary.min, Some(4_000));
        assert_eq!(stage("completion_to_next_submit").dist.summary.count, 9);
        assert_eq!((rows[0].rank_per_batch, rows[0].rank_latency), (1, 1));
    }
}
