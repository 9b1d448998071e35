//! `latscope demo`: the main jobs on embedded defaults, so a first run needs nothing: a short
//! IPC matrix measured on this machine, then a bundled real WAYLAND_DEBUG log. Each part names
//! the command that does it on the user's own system.

use std::fs::File;
use std::path::PathBuf;

use anyhow::{Context, Result};

use super::ipc::{Plan, execute, render};
use super::wayland::{Input, analyse_and_print};
use crate::cli::{DemoArgs, Format};
use latscope::files;
use latscope::ingest::wayland::SpanOptions;
use latscope::lab::ipc::{Config, Pattern, Peer, Settings, Transport};

/// The parts of the demo, in the order they run; each is a section of its report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// `lab ipc` on a short matrix
    Ipc,
    /// `lab x11` upload and config on `$DISPLAY` or a private Xvfb
    X11,
    /// `lab wayland` on a private weston
    WaylandLab,
    /// `wayland` on the bundled log
    Log,
}

impl Part {
    /// Every part, in order.
    pub const ALL: [Part; 4] = [Part::Ipc, Part::X11, Part::WaylandLab, Part::Log];

    /// What it shows, as the command's summary says it.
    pub fn summary(self) -> &'static str {
        match self {
            Part::Ipc => "an IPC matrix measured here",
            Part::X11 => "X11 uploads and the screen query",
            Part::WaylandLab => "a native Wayland client",
            Part::Log => "a bundled WAYLAND_DEBUG log",
        }
    }
}

/// glmark2-es2-wayland --benchmark=build:use-vbo=true on weston headless, client side
/// (see tests/data/wayland/README.md for how it was captured).
const DEMO_LOG: &[u8] = include_bytes!("../../tests/data/wayland/weston-glmark2-build.client.log");

/// The demo's IPC matrix: the floor, the kernel transports, shared memory and D-Bus, between
/// threads and between processes, for an 8-byte message and a 1 KiB mask; then the Java2D
/// lesson: a 4 KiB against a 16 KiB writer buffer, against shared-memory segments.
fn ipc_plan() -> Plan {
    let mut configs = Vec::new();
    let transports = [
        Transport::Inproc,
        Transport::Pipe,
        Transport::UnixStream,
        Transport::ShmFutex,
        Transport::ShmSpin,
        Transport::Dbus,
    ];
    for transport in transports {
        let peers: &[Peer] = if transport == Transport::Inproc {
            &[Peer::None]
        } else {
            &[Peer::Thread, Peer::Process]
        };
        for &peer in peers {
            for payload in [8, 1024] {
                configs.push(Config {
                    transport,
                    peer,
                    pattern: Pattern::PingPong,
                    payload,
                });
            }
        }
    }
    for pattern in [
        Pattern::Stream { flush_bytes: 4096 },
        Pattern::Stream { flush_bytes: 16384 },
        Pattern::Segments { k: 1 },
        Pattern::Segments { k: 4 },
    ] {
        configs.push(Config {
            transport: Transport::UnixStream,
            peer: Peer::Process,
            pattern,
            payload: 1024,
        });
    }
    Plan {
        configs,
        skipped: Vec::new(),
        settings: Settings {
            count: 5_000,
            warmup: 200,
            max_time_ns: 200_000_000,
            ..Settings::default()
        },
    }
}

/// Runs `latscope demo`.
pub fn run(args: &DemoArgs) -> Result<()> {
    let text = args.output.format == Format::Text;
    if !args.no_ipc {
        eprintln!(
            "latscope demo 1/4: what each IPC transport costs per message on this machine (a few seconds)"
        );
        let plan = ipc_plan();
        let settings = plan.settings.clone();
        let ran = execute(plan)?;
        if text {
            super::print(&render(&ran, &settings, Format::Text, false))?;
            super::print(
                "\non your system: latscope lab ipc                      (every transport, thread and process peers, 8 B / 1 KiB / 64 KiB)\n\
                 \x20               latscope lab ipc --pattern all --verify\n\n",
            )?;
        }
    }
    if !args.no_x11 {
        x11_part(text)?;
    }
    if text && !args.no_wayland_lab && !crate::signals::cancel_on_interrupt().is_raised() {
        wayland_lab_part()?;
    }
    eprintln!(
        "latscope demo 4/4: WAYLAND_DEBUG log of glmark2-es2-wayland (build benchmark) on weston \
         headless, bundled with latscope"
    );
    if text {
        super::print(
            "on your system: WAYLAND_DEBUG=1 your-client 2> client.log; latscope wayland client.log\n\n",
        )?;
    }
    let input = Input::Embedded("glmark2-weston.client.log (bundled)", DEMO_LOG);
    if args.output.report.is_some() {
        // --report FILE: the user's own choice of file, written as given.
        return analyse_and_print(&[input], SpanOptions::default(), false, &args.output, None);
    }
    let (file, path) = new_report_file()?;
    let result = analyse_and_print(
        &[input],
        SpanOptions::default(),
        false,
        &args.output,
        Some((file, path.clone())),
    );
    // Nothing was written into it (CSV output, or a failure first): leave no empty file behind.
    if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file() && m.len() == 0) {
        let _ = std::fs::remove_file(&path);
    }
    result
}

/// The Wayland lab on a private weston headless, when weston is installed; how to get it when
/// not. A failure here is a warning: the rest of the demo still runs.
fn wayland_lab_part() -> Result<()> {
    use latscope::lab::wayland::{Config, Damage, FrameParams, Pace, Via};
    use latscope::lab::wayland::{compositor, report, run::Lab, run::describe};
    if compositor::find_program("weston").is_none() {
        return super::print(
            "The Wayland lab (a native client timing its own frames) needs weston to start a private \
             compositor: apt-get install weston, then latscope lab wayland round-trip frames outputs\n\n",
        );
    }
    eprintln!(
        "latscope demo 3/4: a native Wayland client on a private weston headless (a few seconds)"
    );
    let cancel = crate::signals::cancel_on_interrupt();
    let configs = [
        Config::RoundTrip { count: 200 },
        Config::Frames(FrameParams {
            buffers: 2,
            width: 256,
            height: 256,
            frames: 60,
            pace: Pace::FrameCallback,
            damage: Damage::Full,
        }),
        Config::Outputs {
            count: 20,
            via: Via::Inproc,
        },
    ];
    let started = compositor::Weston::start().and_then(|weston| {
        let socket = weston.runtime_dir().join(compositor::SOCKET);
        let described = describe(&socket, "private weston headless", &cancel)?;
        let mut lab = Lab::new(socket, cancel.clone(), None);
        let outcomes: Vec<_> = configs
            .iter()
            .take_while(|_| !cancel.is_raised())
            .map(|c| lab.run(c))
            .collect();
        drop(weston);
        Ok(report::document(
            described,
            &outcomes,
            &[],
            cancel.is_raised(),
            0,
        ))
    });
    match started {
        Ok(doc) => {
            super::print(&report::text(&doc))?;
            super::print(
                "\non your system: latscope lab wayland round-trip frames outputs --buffers 1,2,3 --via inproc,dbus\n\n",
            )
        }
        Err(e) => {
            eprintln!("latscope: warning: the Wayland lab part could not run: {e}");
            Ok(())
        }
    }
}

/// The X11 part: on `$DISPLAY` or a private Xvfb, or how to get one.
fn x11_part(text: bool) -> Result<()> {
    eprintln!(
        "latscope demo 2/4: a 32x32 mask upload over the X socket vs MIT-SHM, and the screen-configuration query in-process vs over D-Bus, on a real X server"
    );
    match super::x11::demo() {
        Ok(Some(table)) if text => super::print(&format!(
            "{table}\non your system: latscope lab x11 upload --method put,shm --segments 1,4,16,64   (Java2D's mask upload)\n                latscope lab x11 config --via inproc,dbus --cache off,on        (libkscreen's query)\n\n"
        )),
        Ok(Some(_)) => Ok(()),
        Ok(None) => {
            eprintln!(
                "latscope demo: no X server here: set $DISPLAY, or install Xvfb (Debian: apt-get install xvfb) and latscope starts a private one"
            );
            Ok(())
        }
        Err(e) => {
            eprintln!("latscope demo: the X11 part could not run: {e:#}");
            Ok(())
        }
    }
}

/// A new file for the demo's HTML report in the temporary directory: a new random name
/// (`latscope-demo-XXXXXX.html`), created `O_EXCL` and 0600. A fixed name there
/// could be taken first by anyone: a symlink planted under it would make latscope overwrite
/// the link's target, a file planted under it would make the demo fail.
fn new_report_file() -> Result<(File, PathBuf)> {
    let dir = std::env::temp_dir();
    files::create_unique(&dir, "latscope-demo-", ".html")
        .with_context(|| format!("creating the demo's HTML report in {}", dir.display()))
}
