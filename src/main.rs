//! The `latscope` binary: parse the command line, run one subcommand, map the outcome to an
//! exit status (0 success, 1 error, 2 usage — clap exits with 2 itself).

mod cli;
mod commands;
mod signals;
mod values;

use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = cli::parse();
    // The IPC lab's peer program keeps the dispositions the lab gave it (Ctrl-C ignored: the
    // client handles it; SIGTERM's default action) and stays single-threaded, as a forked peer
    // would be: with no watchdog thread sharing its descriptor table, the kernel looks its
    // descriptors up on every read and write without taking a reference on the file.
    if !matches!(cli.command, cli::Command::Lab(cli::LabCommand::IpcPeer(_))) {
        signals::end_on_interrupt();
    }
    let result = match &cli.command {
        cli::Command::Wayland(args) => commands::wayland::run(args),
        cli::Command::Demo(args) => commands::demo::run(args),
        cli::Command::Probes(args) => commands::probes::run(args),
        cli::Command::Live(args) => commands::live::run(args),
        cli::Command::Bench(args) => commands::bench::run(args),
        cli::Command::Compare(args) => commands::compare::run(args),
        cli::Command::Plot(args) => commands::plot::plot(args),
        cli::Command::Report(args) => commands::plot::report(args),
        cli::Command::Export(args) => commands::plot::export(args),
        cli::Command::Merge(args) => commands::fleet::merge(args),
        cli::Command::Spans(args) => commands::spans::run(args),
        cli::Command::Frames(args) => commands::frames::run(args),
        cli::Command::Lab(cli::LabCommand::Queue(args)) => commands::lab::queue(args),
        cli::Command::Lab(cli::LabCommand::Ipc(args)) => commands::ipc::run(args),
        cli::Command::Lab(cli::LabCommand::IpcPeer(args)) => commands::ipc::peer(args),
        cli::Command::Lab(cli::LabCommand::X11(args)) => commands::x11::run(args),
        cli::Command::Lab(cli::LabCommand::X11Backend(args)) => commands::x11::backend(args),
        cli::Command::Lab(cli::LabCommand::Wayland(args)) => commands::wayland_lab::run(args),
        cli::Command::Lab(cli::LabCommand::Gpu(args)) => commands::gpu_lab::run(args),
        cli::Command::Lab(cli::LabCommand::WaylandPeer(args)) => commands::wayland_lab::peer(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("latscope: error: {}", message(&error));
            ExitCode::from(1)
        }
    }
}

/// The error and its causes, each cause once: library errors already name their source in
/// their own message (`cannot open 'x': No such file…`), so it is not repeated.
fn message(error: &anyhow::Error) -> String {
    let mut text = error.to_string();
    for cause in error.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}
