//! `latscope live --serve`, `latscope merge` and `latscope export --to parquet`: the fleet
//! features' command-line glue (their logic is in `latscope::fleet`).

use anyhow::{Context, Result, bail};

use crate::cli::{ExportArgs, LiveArgs, MergeArgs};
use latscope::doc::Document;
use latscope::fleet::metrics::{LiveMetrics, Shared, parse_labels};
use latscope::fleet::parquet::Run;
use latscope::fleet::serve::{MetricsServer, parse_listen};
use latscope::live::runner::Event;
use latscope::report::live::Names;

/// Starts the metrics server of `live --serve`, if asked; returns it (stopped when dropped)
/// and the snapshot it serves. A bad address or label is a usage error.
pub fn serve(args: &LiveArgs, names: &Names) -> Result<(Option<MetricsServer>, Option<Shared>)> {
    let Some(listen) = &args.serve else {
        return Ok((None, None));
    };
    let addr = parse_listen(listen).unwrap_or_else(|e| super::live::usage(&e));
    let labels =
        parse_labels(&args.label, names.by.as_deref()).unwrap_or_else(|e| super::live::usage(&e));
    let shared = Shared::default();
    let registry = LiveMetrics::new(names.clone(), labels, shared.clone()).registry();
    let server = MetricsServer::start(addr, registry).context("latscope live --serve")?;
    eprintln!(
        "latscope: serving metrics on http://{}/metrics",
        server.addr
    );
    Ok((Some(server), Some(shared)))
}

/// Runs `latscope merge`.
pub fn merge(args: &MergeArgs) -> Result<()> {
    let mut inputs = Vec::new();
    for path in &args.results {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading {name} (a JSON result)"))?;
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
    if args.output.as_os_str() == "-" {
        super::print(&text)?;
    } else {
        write_atomically(&args.output, text.as_bytes())?;
    }
    eprintln!(
        "latscope: merged {} results: {} series, {samples} samples{}",
        inputs.len(),
        merged.spans.len(),
        if args.output.as_os_str() == "-" {
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
        use clap::CommandFactory;
        crate::cli::Cli::command()
            .error(
                clap::error::ErrorKind::ValueValidation,
                "--to parquet writes a binary file: give -o FILE.parquet",
            )
            .exit();
    }
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
    let dir = match args.output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => std::path::Path::new("."),
    };
    let mut file = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("creating a file in {}", dir.display()))?;
    let rows = latscope::fleet::parquet::write(doc, &run, file.as_file_mut())
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    file.persist(&args.output)
        .with_context(|| format!("writing {}", args.output.display()))?;
    if rows == 0 {
        eprintln!(
            "latscope: warning: {} has no samples: wrote a table with no rows",
            path.display()
        );
    }
    eprintln!("latscope: wrote {} ({rows} rows)", args.output.display());
    Ok(())
}

/// Writes `bytes` to `path` through a new file in the same directory, renamed at the end:
/// never a half-written result, never through a planted symlink.
fn write_atomically(path: &std::path::Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => std::path::Path::new("."),
    };
    let mut file = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("creating a file in {}", dir.display()))?;
    file.write_all(bytes)
        .with_context(|| format!("writing {}", path.display()))?;
    file.persist(path)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Publishes each interval's snapshot to the metrics server, if serving; passes the event on.
pub fn publish<'a>(shared: &Option<Shared>, event: Event<'a>) -> Event<'a> {
    if let (Some(shared), Event::Interval { now, .. }) = (shared, &event) {
        shared.publish(now);
    }
    event
}
