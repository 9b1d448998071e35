//! `latscope lab gpu`: the rows (a cross product of the list options), refused before any work
//! when one is absurd; the backend opened; each row run, printed and saved as the `lab-gpu`
//! document. A stop (Ctrl-C, SIGTERM) ends the row being measured and keeps what was measured.
//!
//! `LATSCOPE_GPU_BACKEND=fake[:key=value,...]` runs the lab on the fake backend
//! ([`latscope::lab::gpu::fake`]): for tests, which need the whole lab without a GPU.

use anyhow::{Context, Result, bail};

use crate::cli::{Format, GpuArgs};
use latscope::doc::lab_gpu::{GpuRow, LabGpuDoc};
use latscope::lab::gpu::{self, Backend, Config, cuda::Cuda, fake::Fake, report};
use latscope::stats::Unit;

/// Rows at most in one run.
const MAX_ROWS: usize = 1_000;

/// Runs `latscope lab gpu`.
pub fn run(args: &GpuArgs) -> Result<()> {
    if args.out.get() == Format::Csv {
        crate::commands::unsupported("lab gpu", Format::Csv);
    }
    let configs = configs(args).unwrap_or_else(|e| {
        super::usage_error("lab gpu", clap::error::ErrorKind::ValueValidation, e)
    });
    let save = crate::commands::output_opt("--save", args.save.path())?;
    let mut backend = open(args.device)?;
    let cancel = crate::signals::cancel_on_interrupt();
    let mut rows: Vec<GpuRow> = Vec::new();
    let mut failed = None;
    for config in &configs {
        if cancel.is_raised() {
            break;
        }
        match gpu::run(backend.as_mut(), config, Some(&cancel)) {
            Ok(outcome) if outcome.requests > 0 => rows.push(report::row(config, &outcome)),
            Ok(_) => {}
            Err(e) => {
                failed = Some(anyhow::Error::new(e).context(config.label()));
                break;
            }
        }
    }
    let interrupted = cancel.is_raised();
    if interrupted {
        eprintln!(
            "latscope: interrupted: {} of {} row(s) measured (the last one up to the stop)",
            rows.len(),
            configs.len()
        );
    }
    let measured = !rows.is_empty();
    let doc = LabGpuDoc::new(report::device(&backend.info()), interrupted, rows);
    if measured || failed.is_none() {
        crate::commands::print(&render(&doc, args.out.get(), args.unit.unit()))?;
    }
    if let Some(save) = &save {
        let text = render(&doc, Format::Json, Unit::Ns);
        crate::commands::save_run(save, text.as_bytes(), measured)?;
    }
    match failed {
        Some(e) if measured => Err(e.context(format!(
            "{} of {} row(s) measured; what they measured is printed",
            doc.rows.len(),
            configs.len()
        ))),
        Some(e) => Err(e),
        None if !measured && !interrupted => bail!("nothing was measured"),
        None => Ok(()),
    }
}

/// The backend: the fake one when `LATSCOPE_GPU_BACKEND=fake[:spec]` (tests), else CUDA.
fn open(device: i32) -> Result<Box<dyn Backend>> {
    match std::env::var("LATSCOPE_GPU_BACKEND").ok().as_deref() {
        None | Some("" | "cuda") => {
            let cuda = Cuda::open(device).context("lab gpu: opening the CUDA driver")?;
            Ok(Box::new(cuda))
        }
        Some(spec) if spec == "fake" || spec.starts_with("fake:") => {
            let spec = spec.strip_prefix("fake").unwrap_or_default();
            let fake = Fake::from_spec(spec.trim_start_matches(':'))?;
            Ok(Box::new(fake))
        }
        Some(other) => {
            bail!("LATSCOPE_GPU_BACKEND={other}: not a backend (cuda, or fake for tests)")
        }
    }
}

/// Every row: the cross product of the list options (the first option outermost), each
/// checked against the lab's limits.
fn configs(args: &GpuArgs) -> Result<Vec<Config>, String> {
    let n = args.pattern.len()
        * args.spacing.len()
        * args.streams.len()
        * args.burst.len()
        * args.kernel.len()
        * args.launch.len()
        * args.sync.len();
    if n > MAX_ROWS {
        return Err(format!(
            "the list options make {n} rows; at most {MAX_ROWS}"
        ));
    }
    let narrow = |name: &str, values: &[u64]| -> Result<Vec<u32>, String> {
        values
            .iter()
            .map(|&v| {
                u32::try_from(v)
                    .map_err(|_| format!("--{name} {v} is more than the limit, {}", u32::MAX))
            })
            .collect()
    };
    let base = Config {
        pattern: gpu::Pattern::Isolated,
        spacing_ns: 0,
        streams: 1,
        burst: 1,
        kernel: gpu::Kernel::Nop,
        launch: gpu::Launch::Stream,
        sync: gpu::SyncMode::Spin,
        requests: args.requests,
        warmup: args.warmup,
    };
    let c = expand(vec![base], &args.pattern, |c, v| c.pattern = v);
    let c = expand(c, &args.spacing, |c, v| c.spacing_ns = v);
    let c = expand(c, &narrow("streams", &args.streams)?, |c, v| c.streams = v);
    let c = expand(c, &narrow("burst", &args.burst)?, |c, v| c.burst = v);
    let c = expand(c, &args.kernel, |c, v| c.kernel = v);
    let c = expand(c, &args.launch, |c, v| c.launch = v);
    let c = expand(c, &args.sync, |c, v| c.sync = v);
    for config in &c {
        config.check()?;
    }
    Ok(c)
}

/// Each of `configs` once per value of `values`, set by `set`.
fn expand<T: Copy>(
    configs: Vec<Config>,
    values: &[T],
    set: impl Fn(&mut Config, T),
) -> Vec<Config> {
    configs
        .iter()
        .flat_map(|c| {
            values.iter().map(|&v| {
                let mut c = *c;
                set(&mut c, v);
                c
            })
        })
        .collect()
}

fn render(doc: &LabGpuDoc, format: Format, unit: Unit) -> String {
    match format {
        Format::Json => latscope::doc::to_json(doc, false),
        Format::Markdown => report::markdown(doc, unit),
        Format::Text => report::text(doc, unit),
        Format::Csv => crate::commands::unsupported("lab gpu", format),
    }
}
