//! From measured runs to summaries, comparisons, verdicts, warnings and sentences. Pure.

use super::layouts::LayoutTable;
use super::schedule::BenchCommand;
pub use crate::doc::bench::MetricKind as Kind;
use crate::doc::rule::Clock;
use crate::doc::run::{Layout, RunMeasure};
use crate::stats::ab as stats;
use crate::stats::change::{
    Change, Evidence, Rule, Verdict, judge, judge_paired, within_layout_noise,
};
use crate::stats::paired::{INTERIM_ALPHA, Paired, final_alpha};
use crate::stats::parallel_map;

/// One metric's values for every command.
#[derive(Debug, Clone)]
pub struct Metric {
    /// `wall`, `user`, `sys`, `max_rss`, or a counter name
    pub name: String,
    /// how to show it
    pub kind: Kind,
    /// per command, per run
    pub values: Vec<Vec<f64>>,
}

/// A command's summary on one metric.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// median
    pub median: f64,
    /// 95% bootstrap interval of the median
    pub ci: (f64, f64),
    /// coefficient of variation (None with fewer than two runs)
    pub cv: Option<f64>,
    /// runs
    pub n: usize,
}

/// A candidate against the baseline on one metric.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricComparison {
    /// metric name
    pub metric: String,
    /// the comparison
    pub comparison: Change,
}

/// Everything the report shows.
#[derive(Debug, Clone)]
pub struct Analysis {
    /// the metrics, wall time first
    pub metrics: Vec<Metric>,
    /// per metric, per command
    pub summaries: Vec<Vec<Option<Summary>>>,
    /// per candidate (index ≥ 1), per metric
    pub comparisons: Vec<(usize, Vec<MetricComparison>)>,
    /// things to know before trusting the numbers
    pub warnings: Vec<String>,
    /// exact instruction counts from callgrind, per command, when measured
    pub callgrind_instructions: Option<Vec<u64>>,
    /// per-layout medians and the layout-noise band (`--layouts`)
    pub layouts: Option<LayoutTable>,
    /// the time the verdict is on
    pub clock: Clock,
}

/// Reads one metric out of a run (`None`: not measured in that run).
type Extract<'a> = &'a dyn Fn(&RunMeasure) -> Option<f64>;

/// The runs to analyse.
#[derive(Debug, Clone, Copy)]
pub struct Runs<'a> {
    /// per command, the timed runs (nothing attached to them): wall, CPU time, rusage
    pub timed: &'a [Vec<RunMeasure>],
    /// per command, the counted runs (counters attached), if any; without them the counters
    /// are read from the timed runs (documents of older latscope versions)
    pub counted: &'a [Vec<RunMeasure>],
    /// run `j` of every command ran in the same block, so wall times are compared pair by pair
    pub paired: bool,
    /// interim looks taken before the final analysis (sequential design)
    pub looks: u32,
    /// the time the verdict is on
    pub clock: Clock,
    /// the layouts the benchmark ran under (`--layouts`), also those that no run reached
    /// before it stopped (empty: those the runs carry)
    pub layouts: &'a [Layout],
}

impl<'a> Runs<'a> {
    /// Runs of separate sessions: no pairing, no counted runs apart, wall time.
    pub fn unpaired(timed: &'a [Vec<RunMeasure>]) -> Runs<'a> {
        Runs {
            timed,
            counted: &[],
            paired: false,
            looks: 0,
            clock: Clock::Wall,
            layouts: &[],
        }
    }
}

fn pick(runs: &[Vec<RunMeasure>], f: Extract<'_>) -> Option<Vec<Vec<f64>>> {
    runs.iter()
        .map(|rs| rs.iter().map(f).collect::<Option<Vec<f64>>>())
        .collect()
}

/// The metrics present in every run of every command; with `--time cpu`, `cpu` (user +
/// system) first.
pub fn metrics(runs: Runs<'_>) -> Vec<Metric> {
    let mut out = Vec::new();
    let cpu = (runs.clock == Clock::Cpu)
        .then(|| pick(runs.timed, &|r| Some(Clock::Cpu.of(r) as f64)))
        .flatten();
    if let Some(values) = cpu {
        out.push(Metric {
            name: Clock::Cpu.metric().to_string(),
            kind: Kind::Time,
            values,
        });
    }
    let fixed: [(&str, Kind, Extract<'_>); 6] = [
        ("wall", Kind::Time, &|r| Some(r.wall_ns as f64)),
        ("user", Kind::Time, &|r| Some(r.user_ns as f64)),
        ("sys", Kind::Time, &|r| Some(r.sys_ns as f64)),
        ("voluntary-cs", Kind::Count, &|r| {
            Some(r.voluntary_cs as f64)
        }),
        ("involuntary-cs", Kind::Count, &|r| {
            Some(r.involuntary_cs as f64)
        }),
        ("minor-faults", Kind::Count, &|r| {
            Some(r.minor_faults as f64)
        }),
    ];
    for (name, kind, f) in fixed {
        let Some(values) = pick(runs.timed, f) else {
            continue;
        };
        // The resource-usage counts are absent (all 0) in documents of older versions.
        if kind == Kind::Count && values.iter().flatten().all(|v| *v == 0.0) {
            continue;
        }
        out.push(Metric {
            name: name.to_string(),
            kind,
            values,
        });
    }
    let counted = runs.counted.len() == runs.timed.len();
    let with_counters = if counted && runs.counted.iter().all(|c| !c.is_empty()) {
        runs.counted
    } else {
        runs.timed
    };
    // Peak RSS from forked runs: a spawned (vfork) child inherits latscope's own peak at exec,
    // so timed runs report max(latscope, command).
    let rss = pick(with_counters, &|r| Some(r.max_rss_kb as f64));
    if let Some(values) = rss.filter(|v| v.iter().flatten().any(|x| *x > 0.0)) {
        out.push(Metric {
            name: "max_rss".to_string(),
            kind: Kind::Memory,
            values,
        });
    }
    let names: Vec<String> = with_counters
        .iter()
        .flatten()
        .next()
        .map(|r| r.counters.iter().map(|(n, _)| n.clone()).collect())
        .unwrap_or_default();
    for name in names {
        let f = |r: &RunMeasure| {
            r.counters
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| *v as f64)
        };
        if let Some(values) = pick(with_counters, &f) {
            let kind = if name == "task-clock" || name == "cpu-clock" {
                Kind::Time
            } else {
                Kind::Count
            };
            out.push(Metric { name, kind, values });
        }
    }
    out
}

/// Candidate `c` against the baseline on metric `m`; wall time under layouts is then judged
/// against the layout-noise band.
fn compare_metric(
    m: &Metric,
    c: usize,
    runs: Runs<'_>,
    rule: Rule,
    layouts: Option<&LayoutTable>,
) -> Option<Change> {
    let change = compare_alone(m, c, runs, rule)?;
    let band = layouts
        .filter(|_| m.name == runs.clock.metric())
        .and_then(|t| t.band(c));
    Some(match band {
        Some(b) => within_layout_noise(change, b),
        None => change,
    })
}

fn compare_alone(m: &Metric, c: usize, runs: Runs<'_>, rule: Rule) -> Option<Change> {
    // A ratio to a zero median (no system time, no migrations) means nothing.
    if stats::median(&m.values[0])? == 0.0 {
        return None;
    }
    // Times of one block ran side by side: paired.
    let paired = (runs.paired && (m.name == "wall" || m.name == "cpu"))
        .then(|| Paired::of(&m.values[0], &m.values[c]))
        .flatten();
    if let Some(p) = paired {
        return Some(judge_paired(&p, rule, final_alpha(rule.alpha, runs.looks)));
    }
    Some(judge(
        Evidence::Samples(&stats::points(&m.values[0])),
        Evidence::Samples(&stats::points(&m.values[c])),
        rule,
    ))
}

/// Whether every candidate's time on `clock` is clearly changed (at the interim level) or
/// clearly the same, after `looks` interim looks: the sequential design's stopping rule.
pub fn clear(timed: &[Vec<RunMeasure>], looks: u32, rule: Rule, clock: Clock) -> bool {
    let walls: Vec<Vec<f64>> = timed
        .iter()
        .map(|rs| rs.iter().map(|r| clock.of(r) as f64).collect())
        .collect();
    (1..walls.len()).all(|c| {
        let Some(p) = Paired::of(&walls[0], &walls[c]) else {
            return false;
        };
        let changed = judge_paired(&p, rule, INTERIM_ALPHA).verdict;
        let same = judge_paired(&p, rule, final_alpha(rule.alpha, looks)).verdict;
        matches!(changed, Verdict::Faster | Verdict::Slower) || same == Verdict::Same
    })
}

/// Summarises, compares and warns. The bootstraps of different metrics are independent and
/// are computed on all cores.
pub fn analyse(
    commands: &[BenchCommand],
    runs: Runs<'_>,
    callgrind: Option<Vec<u64>>,
    rule: Rule,
) -> Analysis {
    let metrics = metrics(runs);
    let layouts = LayoutTable::of(runs.timed, runs.clock, runs.layouts);
    let per_metric = parallel_map(&metrics, |m| {
        let summaries: Vec<Option<Summary>> = m.values.iter().map(|v| summary(v)).collect();
        let comparisons: Vec<Option<Change>> = (1..commands.len())
            .map(|c| compare_metric(m, c, runs, rule, layouts.as_ref()))
            .collect();
        (summaries, comparisons)
    });
    let summaries = per_metric.iter().map(|(s, _)| s.clone()).collect();
    let comparisons = (1..commands.len())
        .map(|c| {
            let list = metrics
                .iter()
                .zip(&per_metric)
                .filter_map(|(m, (_, cs))| {
                    Some(MetricComparison {
                        metric: m.name.clone(),
                        comparison: cs[c - 1].clone()?,
                    })
                })
                .collect();
            (c, list)
        })
        .collect();
    let mut analysis = Analysis {
        metrics,
        summaries,
        comparisons,
        warnings: Vec::new(),
        callgrind_instructions: callgrind,
        layouts,
        clock: runs.clock,
    };
    analysis.warnings = warnings(commands, runs.timed, &analysis);
    analysis
}

fn summary(values: &[f64]) -> Option<Summary> {
    Some(Summary {
        median: stats::median(values)?,
        ci: stats::median_ci(values, 0.95)?,
        cv: stats::coefficient_of_variation(values),
        n: values.len(),
    })
}

impl Analysis {
    /// The comparison of candidate `c` on the time the verdict is on.
    pub fn verdict(&self, c: usize) -> Option<&Change> {
        self.comparison(c, self.clock.metric())
    }

    /// The comparison of candidate `c` on metric `name`.
    pub fn comparison(&self, c: usize, name: &str) -> Option<&Change> {
        self.comparisons
            .iter()
            .find(|(i, _)| *i == c)?
            .1
            .iter()
            .find(|m| m.metric == name)
            .map(|m| &m.comparison)
    }

    /// Instruction counts per command: callgrind's when measured, else the PMU's medians.
    pub fn instructions(&self) -> Option<Vec<f64>> {
        if let Some(exact) = &self.callgrind_instructions {
            return Some(exact.iter().map(|&v| v as f64).collect());
        }
        let i = self.metrics.iter().position(|m| m.name == "instructions")?;
        self.summaries[i]
            .iter()
            .map(|s| s.map(|s| s.median))
            .collect()
    }
}

fn warnings(commands: &[BenchCommand], runs: &[Vec<RunMeasure>], a: &Analysis) -> Vec<String> {
    let mut out = Vec::new();
    for (c, cmd) in commands.iter().enumerate() {
        let walls: Vec<f64> = runs[c].iter().map(|r| r.wall_ns as f64).collect();
        let Some(median) = stats::median(&walls) else {
            continue;
        };
        if let Some(cv) = stats::coefficient_of_variation(&walls).filter(|cv| *cv > 0.05) {
            out.push(format!("'{}': wall time varies a lot (coefficient of variation {:.1}%): the machine or the command is noisy; verdicts need more runs", cmd.name, cv * 100.0));
            out.extend(steadier_cpu(cmd, &runs[c], cv, a.clock));
        }
        let utilisation: Vec<f64> = runs[c]
            .iter()
            .map(|r| Clock::Cpu.of(r) as f64 / r.wall_ns.max(1) as f64)
            .collect();
        if let Some(u) = stats::median(&utilisation) {
            if u < 0.5 {
                out.push(format!("'{}' used a CPU for only {:.0}% of its wall time: it waits (I/O, sleep, other processes), so its wall time measures that wait as much as its work", cmd.name, u * 100.0));
            } else if u > 1.5 {
                out.push(format!("'{}' kept {u:.1} CPUs busy on average: it is parallel, so its wall time depends on what else runs on this machine", cmd.name));
            }
        }
        if let Some(first) = walls
            .first()
            .filter(|&&f| walls.len() >= 3 && f > 1.5 * median)
        {
            out.push(format!("the first timed run of '{}' took {:.1}× the median: caches or the page cache were cold; use --warmup", cmd.name, first / median));
        }
    }
    out.extend(same_work_different_speed(commands, a));
    out
}

/// A hint when wall time is noisy and CPU time is not (other processes took the CPU from a
/// CPU-bound command): judging on CPU time would see smaller changes.
fn steadier_cpu(
    cmd: &BenchCommand,
    runs: &[RunMeasure],
    wall_cv: f64,
    clock: Clock,
) -> Option<String> {
    let cpu: Vec<f64> = runs.iter().map(|r| Clock::Cpu.of(r) as f64).collect();
    let cv = stats::coefficient_of_variation(&cpu)?;
    (clock == Clock::Wall && cv < wall_cv / 2.0).then(|| format!(
        "'{}': its CPU time varies only {:.1}% against {:.1}% for its wall time: it waited for a CPU that other processes held; if it is CPU-bound, --time cpu judges on CPU time and sees smaller changes",
        cmd.name,
        cv * 100.0,
        wall_cv * 100.0
    ))
}

/// A warning when more processes wanted a CPU than there are CPUs: `loadavg` is the text of
/// /proc/loadavg (its first field, the 1-minute load average, counts runnable processes),
/// `cpus` the CPUs the benchmark may use. Runs then wait for a CPU.
pub fn busy_machine(loadavg: &str, cpus: usize, clock: Clock) -> Option<String> {
    let load: f64 = loadavg.split_whitespace().next()?.parse().ok()?;
    let hint = match clock {
        Clock::Wall => {
            "wall times include waiting for a CPU: --time cpu judges CPU-bound commands on CPU time; or stop the other work, or pin the benchmark (taskset) to a CPU nothing else uses"
        }
        Clock::Cpu => {
            "CPU time leaves the waiting out, but caches and memory bandwidth are shared too: stop the other work to see the smallest changes"
        }
    };
    (load > cpus as f64).then(|| {
        format!("the machine was busy: a load average of {load:.1} on {cpus} CPUs; {hint}")
    })
}

/// The SwiftNIO diagnosis: equal instruction counts, significantly different time.
fn same_work_different_speed(commands: &[BenchCommand], a: &Analysis) -> Vec<String> {
    let Some(instructions) = a.instructions() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for c in 1..commands.len() {
        let Some(wall) = a.verdict(c) else {
            continue;
        };
        let (base, cand) = (instructions[0], instructions[c]);
        let same_work = base > 0.0 && ((cand - base) / base).abs() <= 0.001;
        let Some(ratio) = wall.p50.map(|r| r.ratio) else {
            continue;
        };
        if same_work && matches!(wall.verdict, Verdict::Faster | Verdict::Slower) {
            out.push(format!(
                "same work, different speed: '{}' executes the same instructions as '{}' (within 0.1%: {:.4e} vs {:.4e}) yet its {} time differs by {:+.1}%: look at stalls and code alignment — add -e stalled-cycles-frontend,stalled-cycles-backend,cache-misses,branch-misses (or the PMU's named events)",
                commands[c].name,
                commands[0].name,
                cand,
                base,
                match a.clock {
                    Clock::Wall => "wall",
                    Clock::Cpu => "CPU",
                },
                (ratio - 1.0) * 100.0
            ));
        }
    }
    out
}

/// One sentence per candidate on wall time, like hyperfine's, with the interval.
pub fn sentence(commands: &[BenchCommand], c: usize, wall: &Change, noise: f64) -> String {
    let (a, b) = (&commands[0].name, &commands[c].name);
    let Some(r) = wall.p50 else {
        return format!("{b} vs {a}: {}", wall.reason);
    };
    let (ratio, [lo, hi]) = (r.ratio, r.ci);
    let conf = wall.confidence * 100.0;
    match wall.verdict {
        Verdict::Faster => format!(
            "{b} ran {:.3}× ({:.3}–{:.3}, {conf:.1}% interval) faster than {a}",
            1.0 / ratio,
            1.0 / hi,
            1.0 / lo
        ),
        Verdict::Slower => {
            format!("{b} ran {ratio:.3}× ({lo:.3}–{hi:.3}, {conf:.1}% interval) slower than {a}")
        }
        Verdict::Same => format!(
            "{b} and {a} take the same time: the ratio {ratio:.4} ({lo:.4}–{hi:.4}) shows no change beyond ±{:.1}%",
            noise * 100.0
        ),
        Verdict::Mixed => format!(
            "{b} vs {a}: mixed — its median and its slowest runs moved in opposite directions ({})",
            wall.reason
        ),
        Verdict::WithinLayoutNoise => format!(
            "{b} vs {a}: within layout noise — the ratio {ratio:.4} ({lo:.4}–{hi:.4}, {conf:.1}% interval) lies inside the spread that layouts alone gave the same commands (per-layout medians above): a relink could move it as much"
        ),
        Verdict::Inconclusive => match wall.detectable {
            Some(d) => format!(
                "{b} vs {a}: inconclusive — ratio {ratio:.4} ({lo:.4}–{hi:.4}), p = {:.3}; this run could have detected a change of ±{:.2}% (80% power): a longer run (--max-time) or a quieter machine sees smaller ones",
                wall.p_value.unwrap_or(1.0),
                d * 100.0
            ),
            None => format!(
                "{b} vs {a}: inconclusive — ratio {ratio:.4} ({lo:.4}–{hi:.4}), p = {:.3}; more runs (--runs, --min-time) or a quieter machine",
                wall.p_value.unwrap_or(1.0)
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(wall_ms: f64, instructions: u64) -> RunMeasure {
        RunMeasure {
            wall_ns: (wall_ms * 1e6) as u64,
            user_ns: (wall_ms * 1e6) as u64,
            sys_ns: 0,
            max_rss_kb: 1000,
            voluntary_cs: 0,
            involuntary_cs: 0,
            minor_faults: 0,
            exit_code: Some(0),
            timed_out: false,
            counters: vec![("instructions".to_string(), instructions)],
            layout: None,
        }
    }

    fn cmds(n: usize) -> Vec<BenchCommand> {
        (0..n)
            .map(|i| BenchCommand {
                name: format!("cmd{i}"),
                command: format!("cmd{i}"),
                argv: vec![],
                parameters: vec![],
            })
            .collect()
    }

    #[test]
    fn the_same_instructions_in_different_time_are_diagnosed_as_stalls() {
        let a: Vec<RunMeasure> = (0..20)
            .map(|i| run(100.0 + f64::from(i % 3) * 0.1, 5_900_000_000))
            .collect();
        let b: Vec<RunMeasure> = (0..20)
            .map(|i| run(123.0 + f64::from(i % 3) * 0.1, 5_901_000_000))
            .collect();
        let an = analyse(&cmds(2), Runs::unpaired(&[a, b]), None, Rule::default());
        assert_eq!(an.comparison(1, "wall").unwrap().verdict, Verdict::Slower);
        assert!(
            an.warnings
                .iter()
                .any(|w| w.starts_with("same work, different speed")),
            "{:?}",
            an.warnings
        );
        let s = sentence(&cmds(2), 1, an.comparison(1, "wall").unwrap(), 0.01);
        assert!(s.starts_with("cmd1 ran 1.230× ("), "{s}");
        assert!(s.ends_with("slower than cmd0"), "{s}");
    }

    #[test]
    fn noisy_first_slow_and_idle_commands_are_warned_about() {
        let mut a: Vec<RunMeasure> = (0..10)
            .map(|i| run(100.0 + f64::from(i) * 3.0, 1))
            .collect();
        a[0].wall_ns = 400_000_000;
        for r in &mut a[1..] {
            r.user_ns /= 10;
        }
        let an = analyse(&cmds(1), Runs::unpaired(&[a]), None, Rule::default());
        let all = an.warnings.join("\n");
        assert!(all.contains("coefficient of variation"), "{all}");
        assert!(all.contains("first timed run"), "{all}");
        assert!(all.contains("used a CPU for only"), "{all}");
    }

    #[test]
    fn callgrind_counts_take_precedence_over_pmu_medians() {
        let a: Vec<RunMeasure> = (0..5).map(|_| run(10.0, 7)).collect();
        let an = analyse(
            &cmds(1),
            Runs::unpaired(&[a]),
            Some(vec![42]),
            Rule::default(),
        );
        assert_eq!(an.instructions(), Some(vec![42.0]));
    }

    fn walls(ms: &[f64]) -> Vec<RunMeasure> {
        ms.iter().map(|&w| run(w, 0)).collect()
    }

    fn bench_rule() -> Rule {
        Rule {
            noise: 0.0025,
            ..Rule::default()
        }
    }

    #[test]
    fn cpu_time_sees_a_one_percent_change_that_preemption_hides_in_wall_time() {
        // CPU time 20 ms ± 0.1 ms, the candidate 1% more; wall time adds 0 to 60 ms of waiting
        // for a CPU, differently in each run (a busy machine).
        let run_of = |cpu_ms: f64, wait_ms: f64| RunMeasure {
            wall_ns: ((cpu_ms + wait_ms) * 1e6) as u64,
            user_ns: (cpu_ms * 1e6) as u64,
            sys_ns: 0,
            ..run(0.0, 0)
        };
        let jitter = |i: i32| f64::from((i * 7) % 5 - 2) * 0.05;
        let wait = |i: i32| f64::from((i * 37) % 61);
        let base: Vec<RunMeasure> = (0..30).map(|i| run_of(20.0 + jitter(i), wait(i))).collect();
        let cand: Vec<RunMeasure> = (0..30)
            .map(|i| run_of(20.2 + jitter(i + 1), wait(i + 11)))
            .collect();
        let timed = [base, cand];
        let runs = |clock| Runs {
            timed: &timed,
            counted: &[],
            paired: true,
            looks: 0,
            clock,
            layouts: &[],
        };
        let on_cpu = analyse(&cmds(2), runs(Clock::Cpu), None, bench_rule());
        assert_eq!(on_cpu.metrics[0].name, "cpu");
        let v = on_cpu.verdict(1).unwrap();
        assert_eq!(
            (v.verdict, v.basis),
            (Verdict::Slower, crate::stats::change::Basis::Paired),
            "{}",
            v.reason
        );
        assert!((v.p50.unwrap().ratio - 1.01).abs() < 0.002, "{}", v.reason);
        assert!(clear(&timed, 0, bench_rule(), Clock::Cpu));
        let on_wall = analyse(&cmds(2), runs(Clock::Wall), None, bench_rule());
        assert_eq!(on_wall.metrics[0].name, "wall");
        assert_eq!(on_wall.verdict(1).unwrap().verdict, Verdict::Inconclusive);
        // Judged on wall time, the steadier CPU time is pointed out.
        assert!(
            on_wall
                .warnings
                .iter()
                .any(|w| w.contains("--time cpu judges on CPU time")),
            "{:?}",
            on_wall.warnings
        );
        assert!(!on_cpu.warnings.iter().any(|w| w.contains("--time cpu")));
    }

    #[test]
    fn cpu_time_saturates_instead_of_overflowing_on_a_documents_numbers() {
        // `bench --compare` reads runs from documents: any u64 may come back.
        let r = RunMeasure {
            user_ns: u64::MAX,
            sys_ns: 5,
            ..run(1.0, 0)
        };
        assert_eq!(Clock::Cpu.of(&r), u64::MAX);
        let timed = [vec![r.clone(); 4], vec![r; 4]];
        let an = analyse(&cmds(2), Runs::unpaired(&timed), None, bench_rule());
        assert!(!an.metrics.is_empty());
    }

    #[test]
    fn a_load_above_the_cpus_is_a_busy_machine() {
        let w = busy_machine("12.51 9.93 5.07 3/412 2817\n", 2, Clock::Wall).unwrap();
        assert!(
            w.starts_with("the machine was busy: a load average of 12.5 on 2 CPUs; wall times"),
            "{w}"
        );
        assert!(w.contains("--time cpu"), "{w}");
        let c = busy_machine("2.5 1 1 1/1 1", 2, Clock::Cpu).unwrap();
        assert!(c.contains("caches and memory bandwidth"), "{c}");
        assert_eq!(busy_machine("2.00 1 1 1/1 1", 2, Clock::Wall), None);
        assert_eq!(busy_machine("", 2, Clock::Wall), None);
    }

    #[test]
    fn paired_runs_are_judged_block_by_block_and_unclear_ones_say_what_they_could_detect() {
        // Drift between blocks (100, 130, 100, 130 ms...) hides a 1% change from an unpaired
        // test, not from a paired one.
        let base: Vec<f64> = (0..20)
            .map(|i| if i % 2 == 0 { 100.0 } else { 130.0 })
            .collect();
        let slower: Vec<f64> = base.iter().map(|w| w * 1.01).collect();
        let timed = [walls(&base), walls(&slower)];
        let paired = Runs {
            timed: &timed,
            counted: &[],
            paired: true,
            looks: 0,
            clock: Clock::Wall,
            layouts: &[],
        };
        let an = analyse(&cmds(2), paired, None, bench_rule());
        let wall = an.comparison(1, "wall").unwrap();
        assert_eq!(
            (wall.verdict, wall.basis),
            (Verdict::Slower, crate::stats::change::Basis::Paired),
            "{}",
            wall.reason
        );
        assert!(clear(&timed, 0, bench_rule(), Clock::Wall));
        let unpaired = analyse(&cmds(2), Runs::unpaired(&timed), None, bench_rule());
        assert_ne!(
            unpaired.comparison(1, "wall").unwrap().verdict,
            Verdict::Slower
        );
        // Pure noise: inconclusive, with the smallest change it could have seen.
        let noisy: Vec<f64> = (0..20).map(|i| 100.0 + f64::from((i * 7) % 11)).collect();
        let other: Vec<f64> = (0..20).map(|i| 100.0 + f64::from((i * 5) % 11)).collect();
        let timed = [walls(&noisy), walls(&other)];
        let runs = Runs {
            timed: &timed,
            ..paired
        };
        let an = analyse(&cmds(2), runs, None, bench_rule());
        let wall = an.comparison(1, "wall").unwrap();
        assert_eq!(wall.verdict, Verdict::Inconclusive, "{}", wall.reason);
        let s = sentence(&cmds(2), 1, wall, 0.0025);
        assert!(
            s.contains("this run could have detected a change of ±"),
            "{s}"
        );
        assert!(!clear(&timed, 0, bench_rule(), Clock::Wall));
    }
}
