//! `latscope demo`: the main job on a bundled real log, so a first run needs nothing.

use anyhow::Result;

use super::wayland::{Input, analyse_and_print};
use crate::cli::DemoArgs;
use latscope::ingest::wayland::SpanOptions;

/// glmark2-es2-wayland --benchmark=build:use-vbo=true on weston headless, client side
/// (see tests/data/wayland/README.md for how it was captured).
const DEMO_LOG: &[u8] = include_bytes!("../../tests/data/wayland/weston-glmark2-build.client.log");

/// Runs `latscope demo`.
pub fn run(args: &DemoArgs) -> Result<()> {
    eprintln!(
        "latscope demo: WAYLAND_DEBUG log of glmark2-es2-wayland (build benchmark) on weston \
         headless, bundled with latscope; on your own log: latscope wayland FILE"
    );
    let input = Input::Embedded("glmark2-weston.client.log (bundled)", DEMO_LOG);
    let mut output = args.output.clone();
    if output.report.is_none() {
        output.report = Some(std::env::temp_dir().join("latscope-demo-report.html"));
    }
    analyse_and_print(&[input], SpanOptions::default(), false, &output)
}
