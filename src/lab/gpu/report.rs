//! The rows of the `lab-gpu` document from measured runs, and their rendering as text and
//! Markdown (rendered from the document, so that a saved result prints the same).

use std::fmt::Write;

use super::{Config, DeviceInfo, RunOutcome, Stages};
use crate::doc::Latency;
use crate::doc::lab_gpu::{GpuClock, GpuConfig, GpuDevice, GpuRow, GpuStage, LabGpuDoc};
use crate::stats::Unit;

/// The document's device part.
pub fn device(info: &DeviceInfo) -> GpuDevice {
    GpuDevice {
        backend: info.backend.clone(),
        driver: info.driver.clone(),
        device: info.device.clone(),
    }
}

/// The row of one configuration's run.
pub fn row(config: &Config, outcome: &RunOutcome) -> GpuRow {
    let map = &outcome.clock;
    GpuRow {
        label: config.label(),
        config: GpuConfig {
            pattern: config.pattern.name().to_string(),
            spacing_ns: config.spacing_ns,
            streams: config.streams,
            burst: config.burst,
            kernel: config.kernel.to_string(),
            launch: config.launch.to_string(),
            sync: config.sync.name().to_string(),
            requests: config.requests,
            warmup: config.warmup,
        },
        requests: outcome.requests,
        wall_ns: outcome.wall_ns,
        per_batch_ns: outcome.per_batch_ns(),
        clock: GpuClock {
            offset_before_ns: map.before.offset_ns(),
            offset_after_ns: map.after.offset_ns(),
            drift_ns_per_s: map.drift_ns_per_s(),
            error_ns: map.error_ns(),
            pings: map.before.pings,
        },
        stages: stages(&outcome.stages),
        interrupted: outcome.interrupted,
    }
}

fn stages(s: &Stages) -> Vec<GpuStage> {
    s.list()
        .into_iter()
        .map(|(name, stage)| GpuStage {
            name: name.to_string(),
            dist: Latency::of(&stage.dist),
            negative: stage.negative,
            most_negative_ns: stage.most_negative_ns,
        })
        .collect()
}

/// A value, or `–` when there is none.
fn value(v: Option<u64>, unit: Unit) -> String {
    v.map_or_else(|| "–".to_string(), |v| unit.format(v))
}

/// Negative durations as `N (down to −X)`, or empty.
fn negatives(s: &GpuStage, unit: Unit) -> String {
    match s.most_negative_ns {
        Some(m) if s.negative > 0 => {
            format!(
                "{} (down to −{})",
                s.negative,
                unit.format(m.unsigned_abs())
            )
        }
        _ => String::new(),
    }
}

fn time_per_batch(row: &GpuRow, unit: Unit) -> String {
    format!("{:.3} {}", unit.from_nanos(row.per_batch_ns), unit.symbol())
}

fn clock_line(c: &GpuClock) -> String {
    format!(
        "clock: device − host {} ns before, {} ns after, drift {:.1} ns/s, mapped stamps within ±{} ns ({} pings each)",
        c.offset_before_ns, c.offset_after_ns, c.drift_ns_per_s, c.error_ns, c.pings
    )
}

/// The stages that start on one clock and end on the other.
const CROSS_CLOCK: [&str; 3] = ["submit_to_start", "end_to_host", "end_to_sync"];

/// A warning when the clock mapping's error bound is larger than the median of a stage that
/// crosses clocks: that stage's distribution is mostly the mapping's error.
fn coarse_clock(row: &GpuRow, unit: Unit) -> Option<String> {
    let error = row.clock.error_ns;
    let within: Vec<&str> = row
        .stages
        .iter()
        .filter(|s| CROSS_CLOCK.contains(&s.name.as_str()))
        .filter(|s| s.dist.summary.p50.is_none_or(|p| p < error) || s.negative > 0)
        .map(|s| s.name.as_str())
        .collect();
    (!within.is_empty()).then(|| {
        format!(
            "the clock mapping's error bound (±{}) is larger than the median of {} or made durations negative: read them as within ±{}",
            unit.format(error),
            within.join(", "),
            unit.format(error)
        )
    })
}

/// The terminal report: per row, its stages and the time per batch beside them.
pub fn text(doc: &LabGpuDoc, unit: Unit) -> String {
    let d = &doc.device;
    let mut out = format!("{}: {} (driver {})\n", d.backend, d.device, d.driver);
    for row in &doc.rows {
        let _ = writeln!(out, "\n{}{}", row.label, interrupted(row));
        let _ = writeln!(
            out,
            "  {} requests; time per batch (wall ÷ requests, what gem_exec_nop reports): {}",
            row.requests,
            time_per_batch(row, unit)
        );
        let _ = writeln!(out, "  {}", clock_line(&row.clock));
        if let Some(w) = coarse_clock(row, unit) {
            let _ = writeln!(out, "  warning: {w}");
        }
        let _ = writeln!(
            out,
            "  {:<16} {:>8} {:>12} {:>12} {:>12} {:>12}  negative",
            "stage", "count", "min", "p50", "p99", "max"
        );
        for s in &row.stages {
            let m = &s.dist.summary;
            let line = format!(
                "  {:<16} {:>8} {:>12} {:>12} {:>12} {:>12}  {}",
                s.name,
                m.count + s.negative,
                value(m.min, unit),
                value(m.p50, unit),
                value(m.p99, unit),
                value(m.max, unit),
                negatives(s, unit)
            );
            let _ = writeln!(out, "{}", line.trim_end());
        }
    }
    if doc.interrupted {
        out.push_str("\ninterrupted (Ctrl-C): the rows above are what was measured\n");
    }
    out
}

fn interrupted(row: &GpuRow) -> &'static str {
    if row.interrupted {
        "  (interrupted)"
    } else {
        ""
    }
}

/// A Markdown table: one line per row and stage.
pub fn markdown(doc: &LabGpuDoc, unit: Unit) -> String {
    let u = unit.symbol();
    let mut out = format!(
        "| configuration | time per batch [{u}] | stage | count | min [{u}] | p50 [{u}] | p99 [{u}] | max [{u}] | negative |\n|---|--:|---|--:|--:|--:|--:|--:|--:|\n"
    );
    let n = |v: Option<u64>| v.map_or_else(|| "–".to_string(), |v| unit.format_number(v));
    for row in &doc.rows {
        for s in &row.stages {
            let m = &s.dist.summary;
            let _ = writeln!(
                out,
                "| {}{} | {:.3} | {} | {} | {} | {} | {} | {} | {} |",
                crate::report::format::markdown_cell(&row.label),
                interrupted(row),
                unit.from_nanos(row.per_batch_ns),
                s.name,
                m.count + s.negative,
                n(m.min),
                n(m.p50),
                n(m.p99),
                n(m.max),
                s.negative
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::fake::{Fake, FakeParams};
    use super::super::{Backend, run};
    use super::*;

    fn doc() -> LabGpuDoc {
        let config = Config::isolated(4, 0);
        let mut fake = Fake::new(FakeParams::default());
        let outcome = run(&mut fake, &config, None).unwrap();
        LabGpuDoc::new(device(&fake.info()), false, vec![row(&config, &outcome)])
    }

    #[test]
    fn the_text_puts_every_stage_with_its_unit_beside_the_time_per_batch() {
        let text = text(&doc(), Unit::Us);
        assert!(
            text.contains(
                "4 requests; time per batch (wall ÷ requests, what gem_exec_nop reports): 10.000 µs"
            ),
            "{text}"
        );
        let line = |name: &str| {
            text.lines()
                .find(|l| l.trim_start().starts_with(name))
                .unwrap_or_else(|| panic!("{name}: {text}"))
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(
            line("submit_to_start"),
            "submit_to_start 4 5 µs 5 µs 5 µs 5 µs"
        );
        // four rounds, the device unproven (no warm-up): polled, synchronized, polled,
        // synchronized
        assert_eq!(line("total"), "total 2 10 µs 10 µs 10 µs 10 µs");
        assert!(text.contains("within ±100 ns"), "{text}");
    }

    #[test]
    fn negative_durations_are_shown_with_how_far_below_zero_they_went() {
        let mut d = doc();
        let s = &mut d.rows[0].stages[3];
        s.negative = 2;
        s.most_negative_ns = Some(-1_500);
        let text = text(&d, Unit::Us);
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with("end_to_host"))
            .unwrap();
        assert!(text.contains("warning: "), "{text}");
        // 2 non-negative samples (the polled rounds) and 2 negative ones: 4 in all.
        assert!(
            line.contains(" 4 ") && line.ends_with("2 (down to −1.5 µs)"),
            "{line}"
        );
    }

    #[test]
    fn a_clock_error_larger_than_a_cross_clock_median_is_warned_about() {
        let mut d = doc();
        assert!(!text(&d, Unit::Ns).contains("warning"));
        // end_to_host's median is 2 µs: a bound of 2.5 µs is larger.
        d.rows[0].clock.error_ns = 2_500;
        let t = text(&d, Unit::Ns);
        assert!(
            t.contains("warning: the clock mapping's error bound (±2500 ns) is larger than the median of end_to_host or made"),
            "{t}"
        );
    }

    #[test]
    fn the_markdown_has_a_line_per_row_and_stage() {
        let md = markdown(&doc(), Unit::Ns);
        assert_eq!(md.lines().count(), 2 + 6);
        assert!(
            md.contains("| launch_call | 4 | 3000 | 3000 | 3000 | 3000 | 0 |"),
            "{md}"
        );
    }

    #[test]
    fn the_row_records_the_clock_mapping_it_was_computed_with() {
        let d = doc();
        let c = &d.rows[0].clock;
        assert_eq!(
            (c.offset_before_ns, c.offset_after_ns),
            (1_000_000_000, 1_000_000_000)
        );
        assert_eq!((c.error_ns, c.pings, c.drift_ns_per_s), (100, 200, 0.0));
        assert_eq!(d.rows[0].per_batch_ns, 10_000.0);
        assert_eq!(d.rows[0].stages.len(), 6);
    }
}
