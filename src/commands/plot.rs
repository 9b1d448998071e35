//! `latscope plot` and `latscope report`: saved results to SVG and to one HTML file.

use std::path::Path;

use anyhow::{Context, Result, bail};

use crate::cli::{ExportArgs, ExportFormat, PlotArgs, PlotKind, ReportArgs};
use latscope::doc::{Document, Item, Loaded};
use latscope::report::html;
use latscope::report::plot::{Curve, histogram_svg, percentile_svg};

fn read(path: &Path) -> Result<(String, Vec<Item>)> {
    let loaded = super::compare::load(path)?;
    Ok((loaded.kind, loaded.items))
}

/// Runs `latscope plot`.
pub fn plot(args: &PlotArgs) -> Result<()> {
    let output = super::output("-o", &args.output)?;
    let loaded = args
        .results
        .iter()
        .map(|p| read(p))
        .collect::<Result<Vec<_>>>()?;
    let first = loaded
        .iter()
        .flat_map(|(_, items)| items)
        .next()
        .context("the results hold no spans or commands")?;
    let wanted = args.span.clone().unwrap_or_else(|| first.name.clone());
    let mut curves = Vec::new();
    let mut title = wanted.clone();
    for (path, (_, items)) in args.results.iter().zip(&loaded) {
        if let Some(item) = items.iter().find(|i| i.name == wanted) {
            title = item.label();
            curves.push(Curve {
                label: path.display().to_string(),
                points: item.points().to_vec(),
            });
        }
    }
    if curves.is_empty() {
        bail!("no span or command named '{wanted}' in the results");
    }
    let svg = match args.kind {
        PlotKind::Histogram => histogram_svg(&title, &curves),
        PlotKind::Percentiles => percentile_svg(&title, &curves),
    };
    super::save(&output, svg.as_bytes(), "wrote")
}

/// Runs `latscope report`.
pub fn report(args: &ReportArgs) -> Result<()> {
    let output = super::output("-o", &args.output)?;
    let loaded: Vec<Loaded> = args
        .results
        .iter()
        .map(|p| super::compare::load(p))
        .collect::<Result<Vec<_>>>()?;
    let names: Vec<String> = args
        .results
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    let comparison = match &loaded[..] {
        [before, after] if before.kind == after.kind => Some(super::compare::comparison(
            (&names[0], before),
            (&names[1], after),
            args.noise.get(),
        )?),
        // A saved comparison shows its own verdicts.
        [
            Loaded {
                document: Some(Document::Compare(c)),
                ..
            },
        ] => Some(c.clone()),
        _ => None,
    };
    let spans: Vec<latscope::doc::spans::SpansDoc> = loaded
        .iter()
        .filter_map(|l| match &l.document {
            Some(Document::Spans(d)) => Some(d.clone()),
            Some(lab) => latscope::report::timeline::timeline(lab)
                .ok()
                .map(|t| t.spans_doc()),
            _ => None,
        })
        .collect();
    let gpu: Vec<latscope::doc::lab_gpu::LabGpuDoc> = loaded
        .iter()
        .filter_map(|l| match &l.document {
            Some(Document::LabGpu(d)) => Some(d.clone()),
            _ => None,
        })
        .collect();
    let results: Vec<(String, Vec<Item>)> = names
        .into_iter()
        .zip(loaded)
        .map(|(name, l)| (name, l.items))
        .collect();
    let mut page = html::report(&results, comparison.as_ref(), args.unit.unit());
    if let [only] = &spans[..] {
        page = html::with_time_views(page, only);
    }
    if let [only] = &gpu[..] {
        page = html::with_spacing_views(page, only, args.unit.unit());
    }
    let size = format!("({} KiB)", page.len().div_ceil(1024));
    output.write(page.as_bytes())?;
    if !output.is_stdout() {
        eprintln!("latscope: wrote {} {size}", output.path().display());
    }
    Ok(())
}

/// Nothing silent: frames the document did not keep are not in the trace.
fn frames_left_out(dropped: u64) {
    if dropped > 0 {
        eprintln!(
            "latscope: {dropped} frames were not kept in the document and are not in the trace (raise `latscope frames --max-frames`)"
        );
    }
}

/// Runs `latscope export`.
pub fn export(args: &ExportArgs) -> Result<()> {
    if args.to == ExportFormat::Parquet {
        return super::fleet::export_parquet(args);
    }
    let output = super::output("-o", &args.output)?;
    let text: Vec<u8> = if matches!(args.to, ExportFormat::ChromeJson | ExportFormat::Perfetto) {
        let loaded = super::compare::load(&args.result)?;
        let Some(document) = &loaded.document else {
            anyhow::bail!(
                "{}: a {} result has no individual spans; --to chrome-json and perfetto take a spans result or a lab result made with --max-spans N",
                args.result.display(),
                loaded.kind
            );
        };
        let frames = matches!(document, Document::Spans(d) if d.frames.is_some());
        let bytes = latscope::report::timeline::timeline(document).and_then(|t| match args.to {
            ExportFormat::Perfetto if frames => {
                frames_left_out(t.dropped);
                latscope::report::perfetto::encode_frames(&t.spans)
            }
            ExportFormat::Perfetto => Ok(latscope::report::perfetto::encode(&t.spans)),
            _ if frames => {
                frames_left_out(t.dropped);
                latscope::report::export::chrome_json_frames(&t.spans).map(String::into_bytes)
            }
            _ => Ok(latscope::report::export::chrome_json_of(&t.spans, &t.process).into_bytes()),
        });
        bytes.map_err(|e| anyhow::anyhow!("{}: {e}", args.result.display()))?
    } else {
        let (_, items) = read(&args.result)?;
        match args.to {
            ExportFormat::Hlog => {
                latscope::report::export::hlog(&items).map_err(anyhow::Error::msg)?
            }
            _ => latscope::report::export::bpftrace(&items),
        }
        .into_bytes()
    };
    super::save(&output, &text, "wrote")
}
