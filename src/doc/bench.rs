//! The `bench` document: every run of every command, the summaries and the verdicts.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::dist::{Nanoseconds, Summary};
use super::rule::RuleDoc;
use super::run::Layout;
use super::{Kind, VERSION};
use crate::stats::change::Change;

/// One timed run: wall, user and system time, peak RSS, exit status, counters.
pub use super::run::RunMeasure as Run;

/// Why the schedule stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stop {
    /// `--runs` were done
    #[default]
    Runs,
    /// the minimum runs and time were done (one command, or nothing to decide)
    MinTime,
    /// every comparison was clear at a look after the minimum
    Clear,
    /// the time limit came first
    MaxTime,
    /// Ctrl-C
    Interrupted,
    /// a run failed
    Failed,
    /// runs of saved results, compared again (`bench --compare`)
    Saved,
}

/// How a metric's values are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MetricKind {
    /// nanoseconds
    Time,
    /// KiB
    Memory,
    /// a count of events
    Count,
}

/// A command's summary on one metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricSummary {
    /// `wall`, `user`, `sys`, `max_rss`, or a counter name
    pub metric: String,
    /// how it is shown
    pub kind: MetricKind,
    /// median
    pub median: f64,
    /// 95% bootstrap interval of the median
    pub ci: [f64; 2],
    /// coefficient of variation (sample SD ÷ mean)
    pub cv: Option<f64>,
    /// runs
    pub n: u64,
}

/// One command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Command {
    /// its name (`-n/--name`, else the command line)
    pub name: String,
    /// the command line as given (parameters substituted)
    pub command: String,
    /// what was executed
    pub argv: Vec<String>,
    /// `-L` parameters of this command
    pub parameters: BTreeMap<String, String>,
    /// every timed run, in the order run (run `j` of every command ran in block `j`); nothing
    /// was attached to them
    pub runs: Vec<Run>,
    /// how many of `runs` failed (non-zero exit, killed, timed out): measured and in the
    /// statistics only with `--ignore-failure`
    #[serde(default)]
    pub failed_runs: u64,
    /// the counted runs (counters attached, so their wall time is not used)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counted_runs: Vec<Run>,
    /// the wall times as a latency
    pub wall: Summary,
    /// per metric
    pub metrics: Vec<MetricSummary>,
    /// exact instruction count (`--instructions callgrind`)
    pub callgrind_instructions: Option<u64>,
}

/// A candidate against the baseline on one metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricChange {
    /// the metric
    pub metric: String,
    /// verdict, ratios, intervals (flattened)
    #[serde(flatten)]
    pub change: Change,
}

/// A candidate against the baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// index of the baseline command
    pub baseline: usize,
    /// index of the candidate command
    pub candidate: usize,
    /// per metric, wall time first
    pub metrics: Vec<MetricChange>,
}

/// The `bench` document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchDoc {
    /// `bench`
    pub kind: Kind,
    /// format version
    pub version: u32,
    /// ns (times), KiB (memory), counts
    pub unit: Nanoseconds,
    /// the verdict's thresholds
    pub rule: RuleDoc,
    /// the commands, baseline first
    pub commands: Vec<Command>,
    /// each candidate against the baseline
    #[serde(default)]
    pub comparisons: Vec<Comparison>,
    /// things to know before trusting the numbers
    #[serde(default)]
    pub warnings: Vec<String>,
    /// counters that could not be measured, with the reason
    #[serde(default)]
    pub unsupported_counters: BTreeMap<String, String>,
    /// Ctrl-C cut the benchmark short
    pub interrupted: bool,
    /// why the benchmark stopped (`runs`, `min-time`, `clear`, `max-time`, `interrupted`,
    /// `failed`); absent in documents of older versions
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<Stop>,
    /// interim looks at the data before the final analysis (sequential design)
    #[serde(default)]
    pub looks: u32,
    /// the layouts the commands ran under and what they did (`--layouts`); absent without
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layouts: Option<LayoutsDoc>,
}

/// What layouts did to the commands (`bench --layouts`): see [`crate::bench::layouts`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayoutsDoc {
    /// the build command run once per layout (`--relink`), as given
    pub relink: Option<String>,
    /// the layouts: index, seed, bytes of environment padding
    pub layouts: Vec<Layout>,
    /// per command, per layout: median time, ns, on the verdict's time (`rule.time`)
    pub median_ns: Vec<Vec<Option<f64>>>,
    /// per command: max ÷ min − 1 of its per-layout medians (0.05 = 5%)
    pub spread: Vec<Option<f64>>,
    /// per candidate (candidate 1 first): the layout-noise band, the wider spread of the
    /// candidate and the baseline
    pub band: Vec<Option<f64>>,
}

impl BenchDoc {
    /// A document with `commands` and nothing else yet.
    pub fn new(rule: RuleDoc, commands: Vec<Command>) -> BenchDoc {
        BenchDoc {
            kind: Kind::Bench,
            version: VERSION,
            unit: Nanoseconds::Ns,
            rule,
            commands,
            comparisons: Vec::new(),
            warnings: Vec::new(),
            unsupported_counters: BTreeMap::new(),
            interrupted: false,
            stop: None,
            looks: 0,
            layouts: None,
        }
    }

    pub(super) fn check(&self) -> Result<(), String> {
        for c in &self.commands {
            c.wall
                .check()
                .map_err(|e| format!("command {}: wall: {e}", c.name))?;
            if c.wall.count != c.runs.len() as u64 {
                return Err(format!(
                    "command {}: wall.count is {} but it has {} runs",
                    c.name,
                    c.wall.count,
                    c.runs.len()
                ));
            }
        }
        let n = self.commands.len();
        if self
            .comparisons
            .iter()
            .any(|c| c.baseline >= n || c.candidate >= n)
        {
            return Err("a comparison names a command that is not there".into());
        }
        Ok(())
    }
}
