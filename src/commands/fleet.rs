//! `latscope live --serve`, `latscope merge` and `latscope export --to parquet`: the fleet
//! features' command-line glue (their logic is in `latscope::fleet`).

use anyhow::{Context, Result};

use crate::cli::LiveArgs;
use latscope::fleet::metrics::{LiveMetrics, Shared, parse_label};
use latscope::fleet::serve::{MetricsServer, parse_listen};
use latscope::report::live::Names;

/// Starts the metrics server of `live --serve`, if asked; returns it (stopped when dropped)
/// and the snapshot it serves. A bad address or label is a usage error.
pub fn serve(args: &LiveArgs, names: &Names) -> Result<(Option<MetricsServer>, Option<Shared>)> {
    let Some(listen) = &args.serve else {
        return Ok((None, None));
    };
    let addr = parse_listen(listen).unwrap_or_else(|e| super::live::usage(&e));
    let labels = args
        .label
        .iter()
        .map(|l| parse_label(l))
        .collect::<Result<Vec<_>, _>>()
        .unwrap_or_else(|e| super::live::usage(&e));
    let shared = Shared::default();
    let registry = LiveMetrics::new(names.clone(), labels, shared.clone()).registry();
    let server = MetricsServer::start(addr, registry).context("latscope live --serve")?;
    eprintln!(
        "latscope: serving metrics on http://{}/metrics",
        server.addr
    );
    Ok((Some(server), Some(shared)))
}
