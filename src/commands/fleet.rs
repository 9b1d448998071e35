//! `latscope merge` and `latscope export --to parquet`: the fleet features' command-line glue
//! (their logic is in `latscope::fleet`; `live --serve` is started in [`super::live`]).

use anyhow::{Context, Result, bail};

use crate::cli::{ExportArgs, MergeArgs};
use latscope::doc::Document;
use latscope::fleet::parquet::{Run, WriteError};

/// Runs `latscope merge`.
pub fn merge(args: &MergeArgs) -> Result<()> {
    let output = super::output("-o", &args.output)?;
    let mut inputs = Vec::new();
    for path in &args.results {
        let name = path.display().to_string();
        let bytes = latscope::files::read_result(path, latscope::files::MAX_RESULT_BYTES)
            .with_context(|| format!("reading {name} (a JSON result)"))?;
        let text = String::from_utf8(bytes).map_err(|_| {
            anyhow::anyhow!("{name}: not a result (not UTF-8 text: latscope results are JSON)")
        })?;
        let doc = match latscope::doc::read(&name, &text) {
            Ok(doc) => doc,
            Err(e) => match latscope::doc::load(&name, &text) {
                Ok(imported) => bail!(
                    "{name} is a {} file, not a latscope result: it holds log2 buckets only, which cannot be merged into recomputable percentiles",
                    imported.kind
                ),
                Err(_) => return Err(e.into()),
            },
        };
        inputs.push((name, doc));
    }
    let merged = latscope::fleet::merge::merge(&inputs)?;
    let samples: u64 = merged.spans.iter().map(|s| s.latency.summary.count).sum();
    let text = latscope::doc::to_json(&merged, false);
    output.write(text.as_bytes())?;
    eprintln!(
        "latscope: merged {} results: {} series, {samples} samples{}",
        inputs.len(),
        merged.spans.len(),
        if output.is_stdout() {
            String::new()
        } else {
            format!(" into {}", args.output.display())
        }
    );
    for w in &merged.warnings {
        eprintln!("latscope: warning: {w}");
    }
    Ok(())
}

/// Runs `latscope export --to parquet`.
pub fn export_parquet(args: &ExportArgs) -> Result<()> {
    if args.output.as_os_str() == "-" {
        super::usage_error(
            "export",
            clap::error::ErrorKind::ValueValidation,
            "--to parquet writes a binary file: give -o FILE.parquet",
        );
    }
    let output = super::output("-o", &args.output)?;
    let path = &args.result;
    let loaded = super::compare::load(path)?;
    let Some(Document::Spans(doc)) = &loaded.document else {
        bail!(
            "{}: a {} result: --to parquet takes a spans result (wayland, spans, live, merge)",
            path.display(),
            loaded.kind
        );
    };
    let run = Run {
        host: args.host.clone(),
        run_id: args.run_id.clone().unwrap_or_else(|| {
            path.file_name().map_or_else(
                || path.display().to_string(),
                |n| n.to_string_lossy().into(),
            )
        }),
        run_time_ms: std::fs::metadata(path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .and_then(|d| i64::try_from(d.as_millis()).ok()),
    };
    let mut failure = None;
    let written = output.write_with(|sink| {
        latscope::fleet::parquet::write(doc, &run, sink, args.max_rows).map_err(|e| match e {
            // The output's own error: `cannot write OUT: ...`.
            WriteError::Output(io) => io,
            WriteError::Result(e) => {
                failure = Some(format!("{}: {e}", path.display()));
                std::io::Error::other("not written")
            }
        })
    });
    if let Some(failure) = failure {
        bail!("{failure}");
    }
    let rows = written?;
    if rows == 0 {
        eprintln!(
            "latscope: warning: {} has no samples: wrote a table with no rows",
            path.display()
        );
    }
    eprintln!("latscope: wrote {} ({rows} rows)", args.output.display());
    Ok(())
}
