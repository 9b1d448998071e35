//! The `lab-wayland` document from the outcomes, and its text and Markdown renderings: one row
//! per configuration and latency, every value with its unit (the document is in ns).

use std::fmt::Write;

use super::{Config, Outcome};
use crate::doc::lab::{Skipped, StopDoc};
use crate::doc::lab_wayland::{
    CompositorDoc, LabWaylandDoc, Metric, OutputDoc, WaylandParams, WaylandResult,
};
use crate::doc::{Latency, Summary};
use crate::report::format::{human, markdown_cell};
use crate::stats::Distribution;

fn params(config: &Config) -> WaylandParams {
    match *config {
        Config::RoundTrip { count } => WaylandParams {
            count: Some(count),
            ..WaylandParams::default()
        },
        Config::Frames(p) => WaylandParams {
            buffers: Some(p.buffers),
            width: Some(p.width),
            height: Some(p.height),
            frames: Some(p.frames),
            pace: Some(p.pace.to_string()),
            damage: Some(p.damage.to_string()),
            ..WaylandParams::default()
        },
        Config::Outputs { count, via } => WaylandParams {
            count: Some(count),
            via: Some(via.to_string()),
            ..WaylandParams::default()
        },
    }
}

/// Commits per second between the first and the last commit.
fn rate(commits: &[u64]) -> Option<f64> {
    let (first, last) = (commits.first()?, commits.last()?);
    let span = last.checked_sub(*first).filter(|&s| s > 0)?;
    Some((commits.len() - 1) as f64 * 1e9 / span as f64)
}

/// One configuration's result.
/// One configuration's result, keeping the first `max_spans` samples of each metric and the
/// slowest (none when 0).
pub fn result(o: &Outcome, max_spans: usize) -> WaylandResult {
    let names: Vec<&'static str> = o.metrics.iter().map(|(name, _)| *name).collect();
    let mut recorder = crate::lab::records::Recorder::new(max_spans, &names);
    if max_spans > 0 {
        for (i, ((_, latencies), starts)) in o.metrics.iter().zip(&o.starts).enumerate() {
            for (&start, &latency) in starts.iter().zip(latencies) {
                recorder.sample(i, start, latency);
            }
        }
    }
    let metrics = o
        .metrics
        .iter()
        .map(|(name, samples)| {
            let mut d = Distribution::default();
            samples.iter().for_each(|&v| d.record(v));
            Metric {
                name: name.to_string(),
                dist: Latency::of(&d),
            }
        })
        .collect();
    let frames = matches!(o.config, Config::Frames(_));
    let mean = (!o.in_flight.is_empty())
        .then(|| o.in_flight.iter().sum::<u64>() as f64 / o.in_flight.len() as f64);
    WaylandResult {
        pattern: o.config.pattern().to_string(),
        label: o.config.to_string(),
        params: params(&o.config),
        metrics,
        frames_per_s: if frames { rate(&o.commits) } else { None },
        buffers_in_flight_mean: mean,
        buffers_in_flight_max: o.in_flight.iter().max().copied(),
        presentation: o.presentation.clone(),
        outputs: o.outputs.clone(),
        notes: o.notes.clone(),
        elapsed_ns: o.elapsed_ns,
        stop: o.stop,
        error: o.error.clone(),
        kept: recorder.finish(),
    }
}

/// The document of a run.
pub fn document(
    compositor: CompositorDoc,
    outcomes: &[Outcome],
    skipped: &[(String, String)],
    interrupted: bool,
    max_spans: usize,
) -> LabWaylandDoc {
    let mut doc = LabWaylandDoc::new(compositor);
    doc.interrupted = interrupted;
    doc.skipped = skipped
        .iter()
        .map(|(config, reason)| Skipped {
            config: config.clone(),
            reason: reason.clone(),
        })
        .collect();
    doc.results = outcomes.iter().map(|o| result(o, max_spans)).collect();
    doc
}

fn header(doc: &LabWaylandDoc) -> String {
    let c = &doc.compositor;
    let globals: Vec<String> = c
        .globals
        .iter()
        .map(|g| format!("{} v{}", g.interface, g.version))
        .collect();
    format!(
        "compositor: {} ({})\nglobals: {}\nclock: CLOCK_MONOTONIC, stamped by the client when it sends a request or dispatches an event\n",
        c.name,
        c.origin,
        globals.join(", ")
    )
}

fn cell(v: Option<u64>) -> String {
    v.map_or("–".into(), human)
}

fn outputs_text(outputs: &[OutputDoc]) -> String {
    outputs
        .iter()
        .map(|o| {
            let mode = o
                .modes
                .iter()
                .find(|m| m.current)
                .map_or("no current mode".into(), |m| {
                    format!(
                        "{}x{}@{:.3} Hz",
                        m.width,
                        m.height,
                        f64::from(m.refresh_mhz) / 1000.0
                    )
                });
            let name = o.name.as_deref().or(o.xdg_name.as_deref()).unwrap_or("?");
            format!(
                "{name} {mode} scale {} at {},{} ({} mode(s))",
                o.scale,
                o.x,
                o.y,
                o.modes.len()
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn extras(r: &WaylandResult) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(fps) = r.frames_per_s {
        let held = match (r.buffers_in_flight_mean, r.buffers_in_flight_max) {
            (Some(mean), Some(max)) => format!(
                ", buffers held by the compositor after a commit: mean {mean:.2}, max {max}"
            ),
            _ => String::new(),
        };
        lines.push(format!("{fps:.1} frames/s{held}"));
    }
    if let Some(p) = &r.presentation {
        let flags = if p.flags.is_empty() {
            "none".to_string()
        } else {
            p.flags.join(",")
        };
        lines.push(format!(
            "wp_presentation: clock {}, flags {flags}, refresh {}, {} discarded",
            p.clock_id.map_or("?".into(), |c| c.to_string()),
            p.refresh_ns.map_or("?".into(), human),
            p.discarded
        ));
    }
    if let Some(outputs) = &r.outputs {
        lines.push(format!("outputs: {}", outputs_text(outputs)));
    }
    lines.extend(r.notes.iter().cloned());
    if let Some(e) = &r.error {
        lines.push(format!(
            "FAILED: {e} (rows above: what was measured before)"
        ));
    } else if r.stop == StopDoc::Interrupted {
        lines.push("interrupted (Ctrl-C): partial".into());
    }
    lines
}

/// The terminal table.
pub fn text(doc: &LabWaylandDoc) -> String {
    let mut out = header(doc);
    for r in &doc.results {
        let _ = writeln!(out, "\n{}", r.label);
        let _ = writeln!(
            out,
            "  {:<20} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10}",
            "latency", "n", "min", "p50", "p90", "p99", "max"
        );
        for m in &r.metrics {
            let s: &Summary = &m.dist.summary;
            let _ = writeln!(
                out,
                "  {:<20} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10}",
                m.name,
                s.count,
                cell(s.min),
                cell(s.p50),
                cell(s.p90),
                cell(s.p99),
                cell(s.max)
            );
        }
        for line in extras(r) {
            let _ = writeln!(out, "  {line}");
        }
    }
    for s in &doc.skipped {
        let _ = writeln!(out, "skipped {}: {}", s.config, s.reason);
    }
    if doc.interrupted {
        let _ = writeln!(out, "warning: interrupted; the results above are partial");
    }
    out
}

/// Markdown: one table row per configuration and latency (ns), notes below.
pub fn markdown(doc: &LabWaylandDoc) -> String {
    let c = &doc.compositor;
    let mut out = format!(
        "Compositor: {} ({}). Latency in ns, CLOCK_MONOTONIC.\n\n| configuration | latency | n | min [ns] | p50 [ns] | p90 [ns] | p99 [ns] | max [ns] |\n|---|---|--:|--:|--:|--:|--:|--:|\n",
        markdown_cell(&c.name),
        markdown_cell(&c.origin)
    );
    let n = |v: Option<u64>| v.map_or("–".into(), |v| v.to_string());
    for r in &doc.results {
        for m in &r.metrics {
            let s = &m.dist.summary;
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                markdown_cell(&r.label),
                m.name,
                s.count,
                n(s.min),
                n(s.p50),
                n(s.p90),
                n(s.p99),
                n(s.max)
            );
        }
    }
    let notes: Vec<String> = doc
        .results
        .iter()
        .flat_map(|r| {
            extras(r)
                .into_iter()
                .map(move |l| format!("- {}: {}", r.label, l))
        })
        .collect();
    if !notes.is_empty() {
        out.push('\n');
        out.push_str(
            &notes
                .iter()
                .map(|l| markdown_cell(l))
                .collect::<Vec<_>>()
                .join("\n"),
        );
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn committed() -> LabWaylandDoc {
        let text = include_str!("../../../tests/data/docs/lab-wayland.json");
        match crate::doc::read("lab-wayland.json", text) {
            Ok(crate::doc::Document::LabWayland(d)) => d,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_text_gives_the_compositor_every_row_and_units() {
        let text = text(&committed());
        assert!(text.starts_with(
            "compositor: weston (private weston headless)\nglobals: wl_compositor v4"
        ));
        for row in [
            "round-trip",
            "frames buffers=3 size=256x256 pace=frame-callback damage=full",
            "outputs via=dbus",
        ] {
            assert!(text.lines().any(|l| l == row), "{row}:\n{text}");
        }
        let release = text
            .lines()
            .find(|l| l.trim_start().starts_with("commit_to_release"))
            .unwrap();
        assert!(release.contains(" ms"), "{release}");
        assert!(text.contains("frames/s, buffers held by the compositor after a commit"));
    }

    #[test]
    fn markdown_has_one_row_per_configuration_and_latency_in_ns() {
        let doc = committed();
        let md = markdown(&doc);
        let rows = md
            .lines()
            .filter(|l| l.starts_with("| ") && !l.starts_with("| configuration"))
            .count();
        let metrics: usize = doc.results.iter().map(|r| r.metrics.len()).sum();
        assert_eq!(rows, metrics, "{md}");
        assert!(md.contains("p50 [ns]"));
    }

    #[test]
    fn the_frame_rate_counts_intervals_between_commits() {
        assert_eq!(rate(&[0, 10_000_000, 20_000_000]), Some(100.0));
        assert_eq!(rate(&[5]), None);
        assert_eq!(rate(&[]), None);
    }
}
