//! The subcommands: each turns its arguments into library calls and prints the result.

pub mod bench;
pub mod compare;
pub mod demo;
pub mod ipc;
pub mod lab;
pub mod live;
pub mod plot;
pub mod probes;
pub mod spans;
pub mod wayland;
pub mod wayland_lab;
pub mod x11;

use std::io::Write;

/// Writes `text` to standard output. A closed pipe (`latscope ... | head`) is not an error.
pub fn print(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

/// A format this command does not write: a usage error (exit 2) naming what it does write.
pub fn unsupported(command: &str, format: crate::cli::Format) -> ! {
    use clap::CommandFactory;
    crate::cli::Cli::command()
        .error(
            clap::error::ErrorKind::InvalidValue,
            format!(
                "latscope {command} does not write --format {}: it writes text, json and markdown",
                format.name()
            ),
        )
        .exit()
}
