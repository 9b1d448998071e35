//! `latscope frames`: a frame's whole path, from the client's commit to the screen.

use std::fmt::Write as _;
use std::io;

use anyhow::{Context, Result};

use super::output::{ReportTo, render, write_html};
use crate::cli::{Format, FramesArgs};
use crate::signals;
use latscope::frames::both::Input;
use latscope::frames::pacing::Pacing;
use latscope::frames::{self, Analysis, Options};
use latscope::ingest::Source;
use latscope::report::SpansReport;
use latscope::report::csv::CsvSink;
use latscope::span::Aggregator;
use latscope::stats::Unit;

/// Runs `latscope frames`.
pub fn run(args: &FramesArgs) -> Result<()> {
    if args.live {
        return super::frames_live::run(args);
    }
    let (Some(client), Some(server)) = (&args.client, &args.server) else {
        // clap requires both without --live
        anyhow::bail!("give the client's log and the server's");
    };
    let report_to = super::output_opt("--report", args.output.report.as_deref())?;
    let cancel = signals::cancel_on_interrupt();
    let timeline = read_timeline(args, &cancel)?;
    let options = Options {
        // `--window` is parsed to ns
        window_us: i64::try_from(args.window / 1_000).unwrap_or(i64::MAX),
    };
    let input = |path| -> Result<Input<_>> {
        let source = Source::from_path(path);
        Ok(Input {
            stream: source.open(Some(&cancel))?,
            name: source.name(),
        })
    };
    let analysis = frames::both::analyse_streams(
        input(client)?,
        input(server)?,
        timeline.as_ref(),
        options,
        Some(&cancel),
    )?;
    let files = vec![
        Source::from_path(client).name(),
        Source::from_path(server).name(),
    ];
    let input = input_counts(&analysis);
    write(args, &analysis, files, input, report_to)
}

/// The analysis in the asked format (stage table, then the join, the clock and the pacing),
/// and the HTML report if asked: what the logs and a live capture share.
pub fn write(
    args: &FramesArgs,
    analysis: &Analysis,
    files: Vec<String>,
    input: Vec<(&'static str, u64)>,
    report_to: Option<latscope::files::Output>,
) -> Result<()> {
    let names = Analysis::stage_names();
    if args.output.format == Format::Csv {
        return write_csv(analysis, names, files);
    }
    let mut aggregator = Aggregator::new(names, args.output.linear_spec()?);
    analysis.feed(&mut aggregator);
    nothing_measured(&aggregator, analysis, args.live)?;
    let unit = args.output.unit.unit();
    let report = SpansReport {
        aggregator: &aggregator,
        input,
        warnings: analysis.notes.clone(),
        files,
        labels: Vec::new(),
        unit,
    };
    let mut doc = latscope::report::json::document(&report);
    doc.frames = Some(Box::new(analysis.summary()));
    (doc.records, doc.records_dropped) = analysis.records(args.max_frames);
    let text = match args.output.format {
        Format::Json => latscope::doc::to_json(&doc, args.output.pretty),
        Format::Markdown => {
            render(&report, &args.output) + &summary_markdown(analysis, unit, args.live)
        }
        _ => render(&report, &args.output) + &summary_text(analysis, unit, args.live),
    };
    crate::commands::print(&text)?;
    if let Some(out) = report_to {
        write_html(&doc, ReportTo::Output(out), unit)?;
    }
    Ok(())
}

/// The compositor's own trace (weston's timeline, Mir's LTTng trace), where one is given.
fn read_timeline(
    args: &FramesArgs,
    cancel: &latscope::ingest::Cancel,
) -> Result<Option<frames::CompositorTrace>> {
    let Some(path) = &args.timeline else {
        return Ok(None);
    };
    let source = Source::from_path(path);
    let stream = source.open(Some(cancel))?;
    Ok(Some(frames::read_compositor_trace(
        stream,
        &source.name(),
        Some(cancel),
    )?))
}

/// One CSV line per stage sample; the notes on standard error.
fn write_csv(analysis: &Analysis, names: Vec<String>, files: Vec<String>) -> Result<()> {
    let mut sink = CsvSink::new(io::BufWriter::new(io::stdout().lock()), names, files);
    analysis.feed(&mut sink);
    for note in &analysis.notes {
        eprintln!("latscope: {note}");
    }
    match sink.finish() {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("writing CSV to standard output"),
    }
}

/// Nothing silent: no stage measured is an error that says why.
fn nothing_measured(aggregator: &Aggregator, analysis: &Analysis, live: bool) -> Result<()> {
    if aggregator
        .sorted()
        .iter()
        .any(|(_, s)| s.distribution.count() > 0)
    {
        return Ok(());
    }
    let mut why = if live {
        "no frame measured: no wl_surface.commit of the client was seen sent and dispatched while traced"
    } else {
        "no frame measured: the client log has no wl_surface.commit joined to the server log"
    }
    .to_string();
    for note in &analysis.notes {
        let _ = write!(why, "\n  {note}");
    }
    anyhow::bail!(why)
}

/// What the input held, for the report's `input` line.
fn input_counts(a: &Analysis) -> Vec<(&'static str, u64)> {
    let (client_bytes, server_bytes) = a.bytes;
    let j = &a.joined;
    vec![
        ("frames", a.frames.len() as u64),
        ("client_bytes", client_bytes),
        ("server_bytes", server_bytes),
        ("client_messages_found", j.requests_found + j.events_found),
        ("client_messages", j.requests + j.events),
    ]
}

/// The join (or what the probes saw, `live`), the presentation clock and the pacing, as text
/// after the stage table.
fn summary_text(a: &Analysis, unit: Unit, live: bool) -> String {
    let mut out = String::new();
    let j = &a.joined;
    let _ = if live {
        writeln!(
            out,
            "\nprobed: {} of the client's {} commits seen dispatched, {} of its {} dispatches of done and presented seen sent",
            j.requests_found, j.requests, j.events_found, j.events
        )
    } else {
        writeln!(
            out,
            "\njoined: {} of {} client requests and {} of {} client events found in the server log",
            j.requests_found, j.requests, j.events_found, j.events
        )
    };
    match (a.offset, a.clock_id) {
        (Some(o), clock) => {
            let _ = writeln!(
                out,
                "presentation clock{}: {} = display time + {} ns, within [{}, {}] ns (error bound {}, from {} frames)",
                clock.map_or(String::new(), |c| format!(" {c}")),
                if live { "CLOCK_MONOTONIC" } else { "log time" },
                o.estimate_ns,
                o.low_ns,
                o.high_ns,
                human_i128(o.bound_ns(), unit),
                o.frames
            );
        }
        (None, _) => out.push_str("presentation clock: no frame was presented\n"),
    }
    if let Some(o) = a.timeline_offset {
        let _ = writeln!(
            out,
            "compositor timeline clock: log time = its time + {} ns, within [{}, {}] ns (error bound {}, from {} frames)",
            o.estimate_ns,
            o.low_ns,
            o.high_ns,
            human_i128(o.bound_ns(), unit),
            o.frames
        );
    }
    out.push_str(&pacing_text(&a.pacing, unit));
    out
}

fn pacing_text(p: &Pacing, unit: Unit) -> String {
    let mut out = String::new();
    let refresh = match p.refresh_ns {
        0 => "not given".to_string(),
        r => human_i128(i128::from(r), unit),
    };
    let _ = writeln!(
        out,
        "\npacing: {} presented, {} discarded, {} never answered; refresh {refresh}",
        p.presented, p.discarded, p.pending
    );
    let intervals: Vec<String> = p
        .intervals
        .iter()
        .map(|(n, c)| format!("{n}: {c}"))
        .collect();
    let _ = writeln!(
        out,
        "  display intervals (refresh periods: frames): {}",
        intervals.join(", ")
    );
    let causes: Vec<String> = p
        .causes
        .iter()
        .map(|(c, n)| format!("{} {n}", c.name()))
        .collect();
    let _ = writeln!(
        out,
        "  late (later than the surface's usual interval): {}{}",
        p.late,
        if causes.is_empty() {
            String::new()
        } else {
            format!("; longest against its median: {}", causes.join(", "))
        }
    );
    if !p.worst.is_empty() {
        out.push_str(
            "\nlatest frames (commit line, periods, what ran long, by how much, stages):\n",
        );
        for l in &p.worst {
            let stages: Vec<String> = l
                .stages
                .iter()
                .filter_map(|(name, v)| {
                    v.map(|v| format!("{name} {}", human_i128(i128::from(v), unit)))
                })
                .collect();
            let _ = writeln!(
                out,
                "  line {:>6}  {} periods  {} +{}  {}",
                l.line,
                l.periods,
                l.cause.name(),
                human_i128(i128::from(l.excess_ns), unit),
                stages.join("  ")
            );
        }
    }
    out
}

fn summary_markdown(a: &Analysis, unit: Unit, live: bool) -> String {
    let text = summary_text(a, unit, live);
    format!("\n```\n{}\n```\n", text.trim())
}

/// `ns` in `unit`, with the unit.
fn human_i128(ns: i128, unit: Unit) -> String {
    let (div, name) = match unit {
        Unit::Ns => (1.0, "ns"),
        Unit::Us => (1e3, "µs"),
        Unit::Ms => (1e6, "ms"),
        Unit::S => (1e9, "s"),
    };
    match unit {
        Unit::Ns => format!("{ns} ns"),
        _ => format!("{:.3} {name}", ns as f64 / div),
    }
}
