//! `latscope compare BEFORE AFTER`.

use anyhow::{Context, Result, bail};

use crate::cli::{CompareArgs, LabFormat};
use latscope::compare::{self, load};
use latscope::report::compare as render;

/// Runs `latscope compare`.
pub fn run(args: &CompareArgs) -> Result<()> {
    let noise = args
        .noise
        .trim()
        .trim_end_matches('%')
        .parse::<f64>()
        .with_context(|| format!("--noise: '{}' is not a percentage", args.noise))?
        / 100.0;
    let read = |path: &std::path::Path| -> Result<(String, Vec<compare::Item>)> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Ok(load::items(&path.display().to_string(), &text)?)
    };
    let (kind_b, before) = read(&args.before)?;
    let (kind_a, mut after) = read(&args.after)?;
    if kind_b != kind_a {
        bail!("cannot compare a {kind_b} result with a {kind_a} result");
    }
    if kind_b == "bench"
        && let Some(note) = load::pair_bench_by_position(&before, &mut after)
    {
        eprintln!("latscope: {note}");
    }
    let c = compare::compare(&before, &after, noise);
    let (b, a) = (
        args.before.display().to_string(),
        args.after.display().to_string(),
    );
    let unit = args.unit.unit();
    let text = match args.format {
        LabFormat::Text => render::text(&c, &b, &a, unit),
        LabFormat::Json => format!("{}\n", render::json(&c, &b, &a)),
        LabFormat::Markdown => render::markdown(&c, unit),
    };
    crate::commands::print(&text)
}
