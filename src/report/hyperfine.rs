//! `bench --export-json`: hyperfine's JSON export (`results[]`, times in seconds), so that the
//! scripts users already have for hyperfine (`plot_whisker.py`, `welch_ttest.py`,
//! `advanced_statistics.py`, ...) read a latscope benchmark unchanged. latscope's own document,
//! with every run, counter and verdict, stays `--save` / `--format json`.
//!
//! The fields and their meaning are hyperfine 1.20's `BenchmarkResult`: the mean, the sample
//! standard deviation (absent with one run), the median (the mean of the two middle values for
//! an even count), the mean user and system time, the minimum and maximum of the wall times,
//! every wall time, every exit code (`null`: killed by a signal) and the `-L` parameters. Only
//! the timed runs are exported: the counted runs have counters attached and are never timed.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::bench::schedule::{BenchCommand, Measured};
use crate::doc::run::RunMeasure;

/// One command, as hyperfine exports it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HyperfineResult {
    /// the command's name (`-n`), else its command line
    pub command: String,
    /// mean wall time, s
    pub mean: f64,
    /// sample standard deviation of the wall times, s (`None` with one run)
    pub stddev: Option<f64>,
    /// median wall time, s
    pub median: f64,
    /// mean user CPU time, s
    pub user: f64,
    /// mean system CPU time, s
    pub system: f64,
    /// shortest wall time, s
    pub min: f64,
    /// longest wall time, s
    pub max: f64,
    /// every wall time, s, in the order run
    pub times: Vec<f64>,
    /// every exit code (`None`: killed by a signal)
    pub exit_codes: Vec<Option<i32>>,
    /// `-L` parameters of this command
    pub parameters: BTreeMap<String, String>,
}

#[derive(Serialize)]
struct Export<'a> {
    results: &'a [HyperfineResult],
}

const NS_PER_S: f64 = 1e9;

fn seconds(ns: u64) -> f64 {
    ns as f64 / NS_PER_S
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

/// hyperfine's median: the middle value, or the mean of the two middle values.
fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

fn stddev(values: &[f64]) -> Option<f64> {
    let n = values.len();
    (n >= 2).then(|| {
        let m = mean(values);
        (values.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
    })
}

/// One command's result; `None` without runs.
pub fn result(command: &BenchCommand, runs: &[RunMeasure]) -> Option<HyperfineResult> {
    if runs.is_empty() {
        return None;
    }
    let times: Vec<f64> = runs.iter().map(|r| seconds(r.wall_ns)).collect();
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    let user: Vec<f64> = runs.iter().map(|r| seconds(r.user_ns)).collect();
    let system: Vec<f64> = runs.iter().map(|r| seconds(r.sys_ns)).collect();
    Some(HyperfineResult {
        command: command.name.clone(),
        mean: mean(&times),
        stddev: stddev(&times),
        median: median(&sorted),
        user: mean(&user),
        system: mean(&system),
        min: sorted[0],
        max: sorted[sorted.len() - 1],
        exit_codes: runs.iter().map(|r| r.exit_code).collect(),
        parameters: command.parameters.iter().cloned().collect(),
        times,
    })
}

/// The export: every command with runs, in the order given (the baseline first), as pretty
/// JSON with a final newline (what hyperfine writes).
pub fn json(commands: &[BenchCommand], m: &Measured) -> String {
    let results: Vec<HyperfineResult> = commands
        .iter()
        .zip(&m.runs)
        .filter_map(|(c, runs)| result(c, runs))
        .collect();
    let mut text = serde_json::to_string_pretty(&Export { results: &results })
        .expect("plain numbers and strings serialize");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(wall_ms: u64, user_ms: u64, sys_ms: u64, exit: Option<i32>) -> RunMeasure {
        RunMeasure {
            wall_ns: wall_ms * 1_000_000,
            user_ns: user_ms * 1_000_000,
            sys_ns: sys_ms * 1_000_000,
            max_rss_kb: 0,
            voluntary_cs: 0,
            involuntary_cs: 0,
            minor_faults: 0,
            exit_code: exit,
            timed_out: false,
            counters: Vec::new(),
            layout: None,
        }
    }

    fn command() -> BenchCommand {
        BenchCommand {
            name: "spin {n}".into(),
            command: "spin 1".into(),
            argv: vec!["spin".into(), "1".into()],
            parameters: vec![("n".into(), "1".into())],
        }
    }

    #[test]
    fn the_statistics_are_hyperfines_in_seconds() {
        // Walls 10, 20, 30, 60 ms: mean 30 ms; deviations −20, −10, 0, 30: Σ² = 1400 ms²,
        // sample variance 1400/3, stddev √466.67 = 21.602 ms; median (20 + 30)/2 = 25 ms.
        // User 8, 8, 8, 8 → 8 ms; system 1, 2, 3, 6 → 3 ms.
        let runs = [
            run(30, 8, 3, Some(0)),
            run(10, 8, 1, Some(0)),
            run(60, 8, 6, None),
            run(20, 8, 2, Some(3)),
        ];
        let r = result(&command(), &runs).unwrap();
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        assert!(close(r.mean, 0.030), "{r:?}");
        assert!(
            close(r.stddev.unwrap(), (1400.0f64 / 3.0).sqrt() / 1000.0),
            "{r:?}"
        );
        assert!(close(r.median, 0.025), "{r:?}");
        assert!(close(r.user, 0.008) && close(r.system, 0.003), "{r:?}");
        assert_eq!((r.min, r.max), (0.010, 0.060));
        assert_eq!(r.times, [0.030, 0.010, 0.060, 0.020]);
        assert_eq!(r.exit_codes, [Some(0), Some(0), None, Some(3)]);
        assert_eq!(r.parameters.get("n").map(String::as_str), Some("1"));
        let one = result(&command(), &runs[..1]).unwrap();
        assert_eq!((one.stddev, one.median), (None, 0.030));
        assert_eq!(median(&[1.0, 2.0, 9.0]), 2.0);
    }

    #[test]
    fn the_export_has_hyperfines_field_names_and_null_for_a_missing_stddev() {
        let m = Measured {
            runs: vec![vec![run(5, 4, 1, Some(0))]],
            ..Measured::default()
        };
        let doc: serde_json::Value = serde_json::from_str(&json(&[command()], &m)).unwrap();
        let r = &doc["results"][0];
        let mut keys: Vec<&str> = r.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "command",
                "exit_codes",
                "max",
                "mean",
                "median",
                "min",
                "parameters",
                "stddev",
                "system",
                "times",
                "user"
            ]
        );
        assert!(r["stddev"].is_null());
        assert_eq!(r["times"][0], 0.005);
        assert_eq!(doc["results"].as_array().unwrap().len(), 1);
    }
}
