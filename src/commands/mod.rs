//! The subcommands: each turns its arguments into library calls and prints the result.

pub mod bench;
pub mod compare;
pub mod demo;
pub mod fleet;
pub mod frames;
mod frames_live;
pub mod gpu_lab;
pub mod ipc;
pub mod lab;
pub mod live;
pub mod output;
pub mod plot;
pub mod probes;
pub mod spans;
pub mod wayland;
pub mod wayland_lab;
pub mod x11;

use anyhow::Context;
use std::io::Write;
use std::path::Path;

use latscope::files::Output;

use crate::cli::Format;

/// Checks an output path given to `option` before any work: a directory, a block device or a
/// directory that takes no new file is refused now rather than after the run.
pub fn output(option: &str, path: &Path) -> anyhow::Result<Output> {
    Output::check(path).map_err(|e| anyhow::anyhow!("{option} {e}"))
}

/// [`output`] for an optional path.
pub fn output_opt(option: &str, path: Option<&Path>) -> anyhow::Result<Option<Output>> {
    path.map(|p| output(option, p)).transpose()
}

/// Writes `bytes` to a checked output and says so on stderr (not for standard output).
pub fn save(output: &Output, bytes: &[u8], what: &str) -> anyhow::Result<()> {
    output.write(bytes)?;
    if !output.is_stdout() {
        eprintln!("latscope: {what} {}", output.path().display());
    }
    Ok(())
}

/// Writes `text` to standard output. A closed pipe (`latscope ... | head`) is not an error.
pub fn print(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other.context("writing standard output")?),
    }
}

/// Saves a run's document, or, when the run measured nothing, says that nothing was saved
/// (the previous file, if any, stays as it was).
pub fn save_run(output: &Output, bytes: &[u8], measured: bool) -> anyhow::Result<()> {
    if measured {
        return save(output, bytes, "saved");
    }
    eprintln!(
        "latscope: nothing saved to {}: the run measured nothing",
        output.path().display()
    );
    Ok(())
}

pub use crate::cli::WRITES;

/// A format this command does not write: a usage error (exit 2) naming what it does write.
pub fn unsupported(command: &str, format: Format) -> ! {
    let writes = WRITES
        .iter()
        .find(|(c, _)| *c == command)
        .map_or(&[][..], |(_, w)| w);
    let names: Vec<&str> = writes.iter().map(|(f, _)| f.name()).collect();
    usage_error(
        command,
        clap::error::ErrorKind::InvalidValue,
        format!(
            "latscope {command} does not write --format {}: it writes {}",
            format.name(),
            names.join(", ")
        ),
    )
}

/// The `clap` command of `latscope COMMAND` (`"lab x11"`: its words), with its full name
/// (`latscope lab x11`) for the usage line; the top-level command when there is none.
pub fn subcommand(command: &str) -> clap::Command {
    let mut cmd = crate::cli::command();
    cmd.build();
    let mut current = cmd;
    for word in command.split_whitespace() {
        match current.find_subcommand(word) {
            Some(sub) => current = sub.clone(),
            None => break,
        }
    }
    current
}

/// A usage error (exit 2) of `latscope COMMAND`: the message and that subcommand's usage line,
/// not the top-level one.
pub fn usage_error(
    command: &str,
    kind: clap::error::ErrorKind,
    message: impl std::fmt::Display,
) -> ! {
    subcommand(command).error(kind, message).exit()
}

/// How a lab run ends: an error when configurations failed (what they measured is printed
/// already) or when nothing could run and nobody interrupted it; `failed` is `label: error`,
/// `skipped` is `(configuration, reason)`.
pub fn lab_outcome(
    failed: Vec<String>,
    ran_any: bool,
    interrupted: bool,
    skipped: &[(String, String)],
) -> anyhow::Result<()> {
    if !failed.is_empty() {
        anyhow::bail!(
            "{} configuration(s) failed; what they measured is printed above:\n  {}",
            failed.len(),
            failed.join("\n  ")
        );
    }
    if !ran_any && !interrupted {
        let why: Vec<String> = skipped.iter().map(|(c, w)| format!("{c}: {w}")).collect();
        anyhow::bail!("nothing could run: {}", why.join("; "));
    }
    Ok(())
}
