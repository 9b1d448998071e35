//! `latscope lab wayland`: find or start the compositor, build the configurations, run them,
//! print and save the `lab-wayland` document.

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};

use crate::cli::{Format, IpcPeerArgs, WaylandLabArgs};
use latscope::doc::lab_wayland::LabWaylandDoc;
use latscope::lab::wayland::run::{Lab, describe, unsupported};
use latscope::lab::wayland::{
    Config, Damage, FrameParams, Outcome, PATTERNS, Pace, Via, compositor, outputs, report,
};

/// A usage error: printed by clap, exit status 2.
fn usage(message: impl std::fmt::Display) -> ! {
    super::usage_error(
        "lab wayland",
        clap::error::ErrorKind::ValueValidation,
        message,
    )
}

fn parse_list<T>(
    option: &str,
    words: &[String],
    parse: fn(&str) -> Option<T>,
    known: &str,
) -> Vec<T> {
    words
        .iter()
        .map(|w| {
            parse(w).unwrap_or_else(|| usage(format!("--{option}: unknown value '{w}' ({known})")))
        })
        .collect()
}

/// The configurations: each pattern named, crossed with its option lists.
pub fn plan(args: &WaylandLabArgs) -> Vec<Config> {
    for p in &args.patterns {
        if !PATTERNS.contains(&p.as_str()) {
            usage(format!(
                "unknown pattern '{p}' (one of: {})",
                PATTERNS.join(", ")
            ));
        }
    }
    let paces = parse_list(
        "pace",
        &args.pace,
        Pace::parse,
        "frame-callback, free-run, rate=HZ with HZ 1..10000",
    );
    let damages = parse_list("damage", &args.damage, Damage::parse, "full, partial");
    let vias = parse_list("via", &args.via, Via::parse, "inproc, dbus");
    let wanted = |name: &str| args.patterns.iter().any(|p| p == name);
    let mut configs = Vec::new();
    if wanted("round-trip") {
        configs.push(Config::RoundTrip { count: args.count });
    }
    if wanted("frames") {
        for &buffers in &args.buffers {
            for &(width, height) in &args.size {
                for &pace in &paces {
                    for &damage in &damages {
                        configs.push(Config::Frames(FrameParams {
                            buffers,
                            width,
                            height,
                            frames: args.frames,
                            pace,
                            damage,
                        }));
                    }
                }
            }
        }
    }
    if wanted("outputs") {
        configs.extend(vias.iter().map(|&via| Config::Outputs {
            count: args.count,
            via,
        }));
    }
    configs
}

/// Renders the document in `format`.
fn render(doc: &LabWaylandDoc, format: Format) -> String {
    match format {
        Format::Text => report::text(doc),
        Format::Json => latscope::doc::to_json(doc, false),
        Format::Markdown => report::markdown(doc),
        Format::Csv => crate::commands::unsupported("lab wayland", format),
    }
}

/// Runs every configuration, with a progress bar on a terminal; stops early on Ctrl-C or once
/// the compositor is gone (the rest are listed as skipped).
fn execute(
    lab: &mut Lab,
    configs: &[Config],
    cancel: &latscope::ingest::Cancel,
) -> (Vec<Outcome>, Vec<(String, String)>) {
    let bar = ProgressBar::new(configs.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{pos}/{len} {wide_msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut outcomes = Vec::new();
    let mut skipped = Vec::new();
    for (i, config) in configs.iter().enumerate() {
        if cancel.is_raised() {
            break;
        }
        bar.set_message(config.to_string());
        let outcome = lab.run(config);
        let gone = outcome.compositor_gone;
        outcomes.push(outcome);
        bar.inc(1);
        if gone {
            skipped.extend(
                configs[i + 1..]
                    .iter()
                    .map(|c| (c.to_string(), "not run: the compositor is gone".to_string())),
            );
            break;
        }
    }
    bar.finish_and_clear();
    (outcomes, skipped)
}

/// wayland-backend's and libwayland's messages, which reach `log` (Cargo.toml turns on
/// wayland-backend's `log`): each on stderr, marked as libwayland's, except the errors the lab
/// gets back anyway, which latscope's own message says with what they mean.
struct BackendLog;

impl log::Log for BackendLog {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::Level::Warn && metadata.target().starts_with("wayland_")
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata())
            && let Some(line) = backend_line(&record.args().to_string())
        {
            eprintln!("{line}");
        }
    }

    fn flush(&self) {}
}

/// The stderr line of one of wayland-backend's messages, `None` for the errors it returns
/// ("Io error: ...", "Protocol error N on object ...": its Display of them).
fn backend_line(text: &str) -> Option<String> {
    let text = text.trim_end();
    let returned = text.starts_with("Io error: ") || text.starts_with("Protocol error ");
    (!text.is_empty() && !returned).then(|| {
        format!(
            "latscope: libwayland: {}",
            latscope::report::format::printable(text)
        )
    })
}

/// Sends wayland-backend's messages to [`BackendLog`] (once: a second call changes nothing).
fn log_backend() {
    static LOGGER: BackendLog = BackendLog;
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(log::LevelFilter::Warn);
    }
}

/// Runs `latscope lab wayland`.
pub fn run(args: &WaylandLabArgs) -> Result<()> {
    log_backend();
    let configs = plan(args);
    let save = crate::commands::output_opt("--save", args.save.path())?;
    let cancel = crate::signals::cancel_on_interrupt();
    let comp = compositor::find(args.display.as_deref())?;
    let described = describe(&comp.socket, &comp.origin, &cancel)
        .with_context(|| format!("compositor at {}", comp.socket.display()))?;
    let mut not_run = Vec::new();
    let configs: Vec<Config> = configs
        .into_iter()
        .filter(|c| match unsupported(c, &described.globals) {
            Some(why) => {
                eprintln!("latscope: warning: {c}: {why}");
                not_run.push((c.to_string(), why));
                false
            }
            None => true,
        })
        .collect();
    let exe = std::env::current_exe().ok();
    let mut lab = Lab::new(comp.socket.clone(), cancel.clone(), exe);
    let (outcomes, mut skipped) = execute(&mut lab, &configs, &cancel);
    skipped.splice(0..0, not_run);
    let helper_error = lab.finish();
    drop(comp);
    let doc = report::document(
        described,
        &outcomes,
        &skipped,
        cancel.is_raised(),
        args.max_spans.get(),
    );
    crate::commands::print(&render(&doc, args.out.get()))?;
    if let Some(save) = &save {
        let text = render(&doc, Format::Json);
        crate::commands::save_run(save, text.as_bytes(), !outcomes.is_empty())?;
    }
    let mut failed: Vec<String> = outcomes
        .iter()
        .filter_map(|o| o.failed().map(|e| format!("{}: {e}", o.config)))
        .collect();
    failed.extend(helper_error.map(|e| format!("the D-Bus helper: {e}")));
    if outcomes.is_empty() && !cancel.is_raised() {
        let why: Vec<String> = skipped.iter().map(|(c, w)| format!("{c}: {w}")).collect();
        bail!("nothing could run: {}", why.join("; "));
    }
    if !failed.is_empty() {
        bail!(
            "{} configuration(s) failed; what they measured is printed above:\n  {}",
            failed.len(),
            failed.join("\n  ")
        );
    }
    Ok(())
}

/// Runs the hidden `latscope lab wayland-peer`.
pub fn peer(args: &IpcPeerArgs) -> Result<()> {
    log_backend();
    outputs::peer_main(&args.spec).context("wayland lab D-Bus helper")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libwaylands_own_messages_are_said_and_the_errors_the_lab_returns_are_not() {
        assert_eq!(
            backend_line("wl_registry@2: error 0: no such method\n").as_deref(),
            Some("latscope: libwayland: wl_registry@2: error 0: no such method")
        );
        assert_eq!(
            backend_line("Io error: Connection reset by peer (os error 104)"),
            None
        );
        assert_eq!(
            backend_line("Protocol error 0 on object wl_registry@2"),
            None
        );
        assert_eq!(
            backend_line("a\x1b[2Jb").as_deref(),
            Some("latscope: libwayland: a\\u{1b}[2Jb")
        );
    }
}
