//! Rendering a benchmark: a benchstat-like table per candidate with one hyperfine-like sentence,
//! a matrix of speedups between every pair of commands (the libkscreen spreadsheet), and the
//! JSON, Markdown and CSV exports.

use std::fmt::Write;

use super::format::printable;
use crate::bench::analysis::{Analysis, Kind, Summary, sentence};
use crate::bench::layouts::{LayoutTable, MIN_RUNS_PER_LAYOUT};
use crate::bench::schedule::{BenchCommand, Measured};
use crate::bench::spawn::failures;
use crate::doc::bench::{self as d, BenchDoc, MetricChange, MetricSummary};
use crate::doc::rule::{Clock, RuleDoc};
use crate::doc::run::RunMeasure;
use crate::stats::Unit;
use crate::stats::change::Change;

/// Value with a unit suited to its size.
fn show(kind: Kind, v: f64) -> String {
    match kind {
        Kind::Time => {
            // Three decimals, not three digits: an A/B reader compares these side by side.
            let unit = super::format::unit_for(v);
            if unit == Unit::Ns {
                format!("{v:.0} ns")
            } else {
                format!("{:.3} {}", unit.from_nanos(v), unit.symbol())
            }
        }
        Kind::Memory => format!("{:.1} MiB", v / 1024.0),
        Kind::Count if v >= 1e6 => format!("{v:.4e}"),
        Kind::Count => format!("{v:.0}"),
    }
}

fn plus_minus(s: &Summary) -> String {
    if s.median == 0.0 {
        return String::new();
    }
    let half = (s.ci.1 - s.median).max(s.median - s.ci.0) / s.median.abs();
    format!(" ±{:.1}%", half * 100.0)
}

/// The terminal report.
pub fn text(commands: &[BenchCommand], m: &Measured, a: &Analysis, noise: f64) -> String {
    let mut out = String::new();
    let n: Vec<usize> = m.runs.iter().map(Vec::len).collect();
    let counted: usize = m.counted.iter().map(Vec::len).min().unwrap_or(0);
    let _ = writeln!(
        out,
        "{} commands, {} timed runs each{}, interleaved in shuffled blocks; {}",
        commands.len(),
        n.iter().min().unwrap_or(&0),
        if counted > 0 {
            format!(" (+{counted} counted runs for the counters)")
        } else {
            String::new()
        },
        stop_text(m)
    );
    if !m.unsupported.is_empty() {
        let names: Vec<&str> = m.unsupported.iter().map(|(n, _)| n.as_str()).collect();
        let _ = writeln!(
            out,
            "counters not measured: {} — {}",
            names.join(", "),
            m.unsupported[0].1
        );
    }
    for (c, cmd) in commands.iter().enumerate() {
        let role = if c == 0 { " (baseline)" } else { "" };
        let _ = writeln!(out, "\n{}{role}: {}", letter(c), printable(&cmd.name));
        let mut parts = Vec::new();
        for (metric, sums) in a.metrics.iter().zip(&a.summaries) {
            if let Some(s) = sums[c] {
                parts.push(format!(
                    "{} {}{}",
                    metric.name,
                    show(metric.kind, s.median),
                    plus_minus(&s)
                ));
            }
        }
        if let Some(ins) = &a.callgrind_instructions {
            parts.push(format!("instructions (callgrind) {}", ins[c]));
        }
        for line in parts.chunks(4) {
            let _ = writeln!(out, "  {}", line.join("   "));
        }
        if let Some(failed) = failures(&m.runs[c]) {
            let _ = writeln!(out, "  {failed}: in the statistics (--ignore-failure)");
        }
    }
    if let Some(t) = &a.layouts {
        out.push_str(&layout_table(t, m.relink.as_deref(), a.clock));
    }
    for (c, comparisons) in &a.comparisons {
        let _ = writeln!(out, "\n{} vs {}:", letter(*c), letter(0));
        let _ = writeln!(
            out,
            "  {:<18} {:>18} {:>18} {:>9} {:>8} {:>7}  verdict",
            "metric", "baseline", "candidate", "delta", "p", "n"
        );
        for mc in comparisons {
            let (i, metric) = a
                .metrics
                .iter()
                .enumerate()
                .find(|(_, m)| m.name == mc.metric)
                .expect("metric");
            let (Some(b), Some(k)) = (a.summaries[i][0], a.summaries[i][*c]) else {
                continue;
            };
            let x = &mc.comparison;
            let _ = writeln!(
                out,
                "  {:<18} {:>18} {:>18} {:>9} {:>8.3} {:>7}  {}",
                metric.name,
                format!("{}{}", show(metric.kind, b.median), plus_minus(&b)),
                format!("{}{}", show(metric.kind, k.median), plus_minus(&k)),
                x.p50.map_or("–".to_string(), |r| format!(
                    "{:+.2}%",
                    (r.ratio - 1.0) * 100.0
                )),
                x.p_value.unwrap_or(1.0),
                format!("{}/{}", b.n, k.n),
                x.verdict.name()
            );
        }
        if let Some(change) = a.verdict(*c) {
            let on = if a.clock == Clock::Cpu {
                "on CPU time (user + sys): "
            } else {
                ""
            };
            let sentence = sentence(commands, *c, change, noise);
            let _ = writeln!(out, "  {on}{}", printable(&sentence));
        }
    }
    if commands.len() >= 3 {
        out.push_str(&matrix(commands, a));
    }
    // A warning names commands (`-n` names, command lines): no control character reaches
    // the terminal.
    for w in &a.warnings {
        let _ = writeln!(out, "\nwarning: {}", printable(w));
    }
    out
}

/// Per command, its median wall time under each layout and their spread; then the band.
pub fn layout_table(t: &LayoutTable, relink: Option<&str>, clock: Clock) -> String {
    let mut out = format!(
        "\nlayouts: {} (environment padded by {} bytes{}); median {} time per layout:\n",
        t.layouts.len(),
        t.layouts
            .iter()
            .map(|l| l.env_pad.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        relink.map_or(String::new(), |r| format!(
            "; binaries built by --relink '{r}'"
        )),
        clock.metric()
    );
    let _ = write!(out, "  {:<8}", "layout");
    for l in &t.layouts {
        let _ = write!(out, " {:>12}", format!("seed {}", l.seed));
    }
    let _ = writeln!(out, " {:>9}", "spread");
    for (c, medians) in t.medians.iter().enumerate() {
        let _ = write!(out, "  {:<8}", letter(c));
        for v in medians {
            let _ = write!(
                out,
                " {:>12}",
                v.map_or("–".to_string(), |v| show(Kind::Time, v))
            );
        }
        let spread = t.spread[c].map_or("–".to_string(), |s| format!("{:.2}%", s * 100.0));
        let _ = writeln!(out, " {spread:>9}");
    }
    if t.spread.iter().any(Option::is_none) {
        let _ = writeln!(
            out,
            "  no spread where a layout has fewer than {MIN_RUNS_PER_LAYOUT} runs of a command: no layout-noise band there (--runs {} or more)",
            MIN_RUNS_PER_LAYOUT * t.layouts.len()
        );
    }
    for c in 1..t.medians.len() {
        if let Some(b) = t.band(c) {
            let _ = writeln!(
                out,
                "  layout-noise band of {} vs {}: ±{:.2}% (the wider spread; ratios {:.4}–{:.4}): a change inside it is within layout noise",
                letter(c),
                letter(0),
                b * 100.0,
                1.0 / (1.0 + b),
                1.0 + b
            );
        }
    }
    out
}

fn stop_text(m: &Measured) -> String {
    use crate::doc::bench::Stop;
    let looks = match m.looks {
        0 => String::new(),
        1 => " after 1 look".to_string(),
        n => format!(" after {n} looks"),
    };
    match m.stop {
        Stop::Runs => "stopped at --runs".to_string(),
        Stop::MinTime => "stopped at the minimum time and runs".to_string(),
        Stop::Clear => format!("stopped when every comparison was clear{looks}"),
        Stop::MaxTime => format!("stopped at the time limit{looks}, not every comparison clear"),
        Stop::Interrupted => "interrupted".to_string(),
        Stop::Failed => "stopped by a failed run".to_string(),
        Stop::Saved => "runs of saved results".to_string(),
    }
}

fn letter(c: usize) -> String {
    let letters = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ";
    letters
        .get(c)
        .map_or_else(|| format!("#{c}"), |l| (*l as char).to_string())
}

/// Speedup of each row over each column: median wall(column) ÷ median wall(row).
pub fn matrix(commands: &[BenchCommand], a: &Analysis) -> String {
    let Some(i) = a.metrics.iter().position(|m| m.name == "wall") else {
        return String::new();
    };
    let medians: Vec<f64> = a.summaries[i]
        .iter()
        .map(|s| s.map_or(f64::NAN, |s| s.median))
        .collect();
    let mut out =
        String::from("\nspeedup of row over column (median wall time of column ÷ row):\n");
    let label = |c: usize| {
        let params: Vec<String> = commands[c]
            .parameters
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        if params.is_empty() {
            letter(c)
        } else {
            format!("{} {}", letter(c), params.join(","))
        }
    };
    let width = (0..commands.len())
        .map(|c| label(c).len())
        .max()
        .unwrap_or(1)
        .max(8);
    let _ = write!(out, "  {:<width$}", "");
    for c in 0..commands.len() {
        let _ = write!(out, " {:>width$}", label(c));
    }
    out.push('\n');
    for r in 0..commands.len() {
        let _ = write!(out, "  {:<width$}", label(r));
        for c in 0..commands.len() {
            let _ = write!(
                out,
                " {:>width$}",
                format!("{:.3}×", medians[c] / medians[r])
            );
        }
        out.push('\n');
    }
    out
}

/// The `bench` document.
pub fn document(commands: &[BenchCommand], m: &Measured, a: &Analysis, rule: RuleDoc) -> BenchDoc {
    let cmds = commands
        .iter()
        .enumerate()
        .map(|(c, cmd)| {
            let walls: Vec<f64> = m.runs[c].iter().map(|r| r.wall_ns as f64).collect();
            d::Command {
                name: cmd.name.clone(),
                command: cmd.command.clone(),
                argv: cmd.argv.clone(),
                parameters: cmd.parameters.iter().cloned().collect(),
                runs: m.runs[c].clone(),
                failed_runs: m.runs[c].iter().filter(|r| r.failed()).count() as u64,
                counted_runs: m.counted.get(c).cloned().unwrap_or_default(),
                wall: crate::doc::Summary::of_points(&crate::stats::ab::points(&walls)),
                metrics: a
                    .metrics
                    .iter()
                    .zip(&a.summaries)
                    .filter_map(|(metric, s)| {
                        let s = s[c]?;
                        Some(MetricSummary {
                            metric: metric.name.clone(),
                            kind: metric.kind,
                            median: s.median,
                            ci: [s.ci.0, s.ci.1],
                            cv: s.cv,
                            n: s.n as u64,
                        })
                    })
                    .collect(),
                callgrind_instructions: a.callgrind_instructions.as_ref().map(|v| v[c]),
            }
        })
        .collect();
    let mut doc = BenchDoc::new(rule, cmds);
    doc.comparisons = a
        .comparisons
        .iter()
        .map(|(c, list)| d::Comparison {
            baseline: 0,
            candidate: *c,
            metrics: list
                .iter()
                .map(|mc| MetricChange {
                    metric: mc.metric.clone(),
                    change: mc.comparison.clone(),
                })
                .collect(),
        })
        .collect();
    doc.layouts = a.layouts.as_ref().map(|t| d::LayoutsDoc {
        relink: m.relink.clone(),
        layouts: t.layouts.clone(),
        median_ns: t.medians.clone(),
        spread: t.spread.clone(),
        band: (1..t.medians.len()).map(|c| t.band(c)).collect(),
    });
    doc.warnings = a.warnings.clone();
    doc.unsupported_counters = m.unsupported.iter().cloned().collect();
    doc.interrupted = m.interrupted;
    doc.stop = Some(m.stop);
    doc.looks = m.looks;
    doc
}

/// Per command, its runs (timed or counted).
pub type RunsPerCommand = Vec<Vec<RunMeasure>>;

/// The commands, timed runs and counted runs of a saved `bench` document, to analyse again.
pub fn commands_and_runs(doc: &BenchDoc) -> (Vec<BenchCommand>, RunsPerCommand, RunsPerCommand) {
    let mut out = (Vec::new(), Vec::new(), Vec::new());
    for c in &doc.commands {
        out.0.push(BenchCommand {
            name: c.name.clone(),
            command: c.command.clone(),
            argv: c.argv.clone(),
            parameters: c.parameters.clone().into_iter().collect(),
        });
        out.1.push(c.runs.clone());
        out.2.push(c.counted_runs.clone());
    }
    out
}

fn ratio_cell(x: &Change) -> String {
    x.p50.map_or("–".to_string(), |r| {
        format!("{:.3}× ({:.3}–{:.3})", r.ratio, r.ci[0], r.ci[1])
    })
}

/// A Markdown table of wall times and verdicts, and a line under it for each command with
/// failed runs.
pub fn markdown(commands: &[BenchCommand], m: &Measured, a: &Analysis) -> String {
    let on = a.clock.metric();
    let mut out = format!(
        "| command | {on} median | 95% CI | vs baseline | p | verdict |\n|---|--:|--:|--:|--:|---|\n",
    );
    let Some(i) = a.metrics.iter().position(|m| m.name == on) else {
        return out;
    };
    for (c, cmd) in commands.iter().enumerate() {
        let Some(s) = a.summaries[i][c] else { continue };
        let (ratio, p, verdict) = match a.verdict(c) {
            Some(x) => (
                ratio_cell(x),
                format!("{:.3}", x.p_value.unwrap_or(1.0)),
                x.verdict.name().to_string(),
            ),
            None => ("baseline".to_string(), String::new(), String::new()),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} – {} | {ratio} | {p} | {verdict} |",
            super::format::markdown_code(&cmd.name),
            show(Kind::Time, s.median),
            show(Kind::Time, s.ci.0),
            show(Kind::Time, s.ci.1)
        );
    }
    for (c, cmd) in commands.iter().enumerate() {
        if let Some(failed) = m.runs.get(c).and_then(|runs| failures(runs)) {
            let _ = write!(
                out,
                "\n{}: {failed}, in the statistics (--ignore-failure)\n",
                super::format::markdown_code(&cmd.name)
            );
        }
    }
    out
}

/// One line per run: the timed runs, then the counted runs (`counted` = 1) with their counters.
pub fn csv(commands: &[BenchCommand], m: &Measured) -> String {
    let counters: Vec<String> = m
        .counted
        .iter()
        .chain(&m.runs)
        .flatten()
        .find(|r| !r.counters.is_empty())
        .map(|r| r.counters.iter().map(|(n, _)| n.clone()).collect())
        .unwrap_or_default();
    let mut out = format!(
        "command_index,command,run,wall_ns,user_ns,sys_ns,max_rss_kb,exit_code,counted,voluntary_cs,involuntary_cs,minor_faults,failed{}\n",
        counters.iter().map(|c| format!(",{c}")).collect::<String>()
    );
    for (counted, runs) in [(0, &m.runs), (1, &m.counted)] {
        for (c, runs) in runs.iter().enumerate() {
            let name = super::format::csv_field(&commands[c].name);
            for (i, r) in runs.iter().enumerate() {
                let values: String = counters
                    .iter()
                    .map(|n| {
                        let v = r.counters.iter().find(|(k, _)| k == n);
                        format!(",{}", v.map_or(String::new(), |(_, v)| v.to_string()))
                    })
                    .collect();
                let code = r.exit_code.map_or(String::new(), |c| c.to_string());
                let _ = writeln!(
                    out,
                    "{c},{name},{i},{},{},{},{},{code},{counted},{},{},{},{}{values}",
                    r.wall_ns,
                    r.user_ns,
                    r.sys_ns,
                    r.max_rss_kb,
                    r.voluntary_cs,
                    r.involuntary_cs,
                    r.minor_faults,
                    u8::from(r.failed())
                );
            }
        }
    }
    out
}
