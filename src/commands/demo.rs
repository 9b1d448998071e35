//! `latscope demo`: the main jobs on embedded defaults, so a first run needs nothing: a short
//! IPC matrix measured on this machine, the X11 and Wayland labs when a server can be had, and
//! a bundled real WAYLAND_DEBUG log. Each part names the command that does it on the user's own
//! system, and one HTML page holds them all (what a newcomer just watched is what the page
//! shows).

use std::fs::File;
use std::path::PathBuf;

use anyhow::{Context, Result};

use super::ipc::{Plan, execute, render};
use super::output::ReportTo;
use super::wayland::analyse_and_print;
use crate::cli::{DemoArgs, Format};
use latscope::doc::Document;
use latscope::files;
use latscope::ingest::Source;
use latscope::ingest::wayland::ReadOptions;
use latscope::lab::ipc::{Config, Pattern, Peer, Settings, Transport};
use latscope::report::html::{self, Body, Section};

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

impl Part {
    /// The section's anchor, heading and what it measures.
    fn heading(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Part::Ipc => (
                "ipc",
                "IPC: what a message costs per transport",
                "A ping-pong of 8 B and 1 KiB messages between threads and processes over each transport, then a 1 KiB stream with a 4 KiB and a 16 KiB writer buffer and shared-memory segments (Java2D's pipeline): the median and the p99 of each, on this machine.",
            ),
            Part::X11 => (
                "x11",
                "X11: uploads and the screen query",
                "A 32x32 mask uploaded over the X socket against MIT-SHM with 1, 4 and 16 segments (Java2D's mask upload), and the RandR screen-configuration query in-process against over D-Bus (libkscreen), on a real X server.",
            ),
            Part::WaylandLab => (
                "wayland-lab",
                "Wayland: a native client timing itself",
                "Round trips, 256x256 frames paced by frame callbacks (commit to release, frame to done) and output queries of a native client on a private weston headless.",
            ),
            Part::Log => (
                "log",
                "A WAYLAND_DEBUG log: spans of a real client",
                "glmark2-es2-wayland's build benchmark on weston headless, logged with WAYLAND_DEBUG=1 and bundled with latscope: every span it pairs (commit to release, frame to done, ...).",
            ),
        }
    }

    /// The commands that do it on the user's system.
    fn commands(self) -> &'static [&'static str] {
        match self {
            Part::Ipc => &[
                "latscope lab ipc      # every transport, thread and process peers, 8 B / 1 KiB / 64 KiB",
                "latscope lab ipc --pattern all --verify",
            ],
            Part::X11 => &[
                "latscope lab x11 upload --method put,shm --segments 1,4,16,64   # Java2D's mask upload",
                "latscope lab x11 config --via inproc,dbus --cache off,on        # libkscreen's query",
            ],
            Part::WaylandLab => &[
                "latscope lab wayland round-trip frames outputs --buffers 1,2,3 --via inproc,dbus",
            ],
            Part::Log => &[
                "WAYLAND_DEBUG=1 your-client 2> client.log",
                "latscope wayland client.log --report client.html",
            ],
        }
    }

    /// Says on stderr that the part starts: `latscope demo 2/4: SUMMARY: DETAIL`.
    fn starts(self, detail: &str) {
        let n = Part::ALL.iter().position(|p| *p == self).unwrap_or(0) + 1;
        eprintln!(
            "latscope demo {n}/{}: {}: {detail}",
            Part::ALL.len(),
            self.summary()
        );
    }

    /// Its section of the report.
    fn section(self, body: Body) -> Section {
        let (id, title, about) = self.heading();
        Section {
            id: id.to_string(),
            title: title.to_string(),
            about: about.to_string(),
            commands: self.commands().iter().map(|c| c.to_string()).collect(),
            body,
        }
    }
}

/// The section of a lab's document.
fn lab_section(part: Part, doc: Document) -> Result<Section> {
    Ok(part.section(Body::Matrix(latscope::doc::items("demo", &doc)?)))
}

/// Runs `latscope demo`.
pub fn run(args: &DemoArgs) -> Result<()> {
    let text = args.output.format == Format::Text;
    // --report FILE: the user's own choice of file, checked before anything runs.
    let report = super::output_opt("--report", args.output.report.as_deref())?;
    let mut sections = Vec::new();
    sections.push(if args.no_ipc {
        Part::Ipc.section(Body::Missing("skipped (--no-ipc)".into()))
    } else {
        ipc_part(text)?
    });
    sections.push(if args.no_x11 {
        Part::X11.section(Body::Missing("skipped (--no-x11)".into()))
    } else {
        x11_part(text)?
    });
    let cancel = crate::signals::cancel_on_interrupt();
    sections.push(if args.no_wayland_lab {
        Part::WaylandLab.section(Body::Missing("skipped (--no-wayland-lab)".into()))
    } else if !text || cancel.is_raised() {
        Part::WaylandLab.section(Body::Missing(
            "runs with --format text only (it prints as it goes)".into(),
        ))
    } else {
        wayland_lab_part()?
    });
    Part::Log.starts("glmark2-es2-wayland (build benchmark) on weston headless");
    if text {
        super::print(&on_your_system(Part::Log))?;
    }
    let input = Source::Embedded("glmark2-weston.client.log (bundled)", DEMO_LOG);
    let unit = args.output.unit.unit();
    let page = move |doc: latscope::doc::spans::SpansDoc| -> Result<()> {
        let items = latscope::doc::items("demo", &Document::Spans(doc))?;
        sections.push(Part::Log.section(Body::Spans(items)));
        let page = html::page("latscope demo", &sections, unit);
        let path = write_page(report.as_ref(), &page)?;
        eprintln!("latscope: report written to {}", path.display());
        Ok(())
    };
    analyse_and_print(
        &[input],
        ReadOptions::default(),
        &args.output,
        Some(ReportTo::Page(Box::new(page))),
    )
}

/// The IPC part: what each transport costs per message, printed as it runs (`text`).
fn ipc_part(text: bool) -> Result<Section> {
    Part::Ipc.starts("what each transport costs per message (a few seconds)");
    let plan = ipc_plan();
    let settings = plan.settings.clone();
    let ran = execute(plan)?;
    if text {
        super::print(&render(&ran, &settings, Format::Text, false))?;
        super::print(&on_your_system(Part::Ipc))?;
    }
    let doc = Document::LabIpc(super::ipc::document(&ran, &settings));
    lab_section(Part::Ipc, doc)
}

/// Writes the report `page` to the user's `--report` file, or to a new file of its own;
/// returns where it went.
fn write_page(report: Option<&files::Output>, page: &str) -> Result<PathBuf> {
    match report {
        Some(out) => {
            out.write(page.as_bytes())?;
            Ok(out.path().to_path_buf())
        }
        None => {
            let (mut file, path) = new_report_file()?;
            std::io::Write::write_all(&mut file, page.as_bytes())
                .with_context(|| format!("writing {}", path.display()))?;
            Ok(path)
        }
    }
}

/// The lines that tell the text reader how to measure a part on their own system.
fn on_your_system(part: Part) -> String {
    let mut out = String::from("\non your system: ");
    for (i, c) in part.commands().iter().enumerate() {
        if i > 0 {
            out.push_str("\n                ");
        }
        out.push_str(c);
    }
    out.push_str("\n\n");
    out
}

/// The Wayland lab on a private weston headless, when weston is installed; how to get it when
/// not. A failure here is a warning: the rest of the demo still runs.
fn wayland_lab_part() -> Result<Section> {
    use latscope::lab::wayland::{Config, Damage, FrameParams, Pace, Via};
    use latscope::lab::wayland::{compositor, report, run::Lab, run::describe};
    if compositor::find_program("weston").is_none() {
        let why =
            "the Wayland lab needs weston to start a private compositor: apt-get install weston";
        super::print(&format!(
            "{why}, then latscope lab wayland round-trip frames outputs\n\n"
        ))?;
        return Ok(Part::WaylandLab.section(Body::Missing(why.into())));
    }
    Part::WaylandLab.starts("on a private weston headless (a few seconds)");
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
            super::print(&on_your_system(Part::WaylandLab))?;
            lab_section(Part::WaylandLab, Document::LabWayland(doc))
        }
        Err(e) => {
            eprintln!("latscope: warning: the Wayland lab part could not run: {e}");
            Ok(Part::WaylandLab.section(Body::Missing(format!("it failed: {e}"))))
        }
    }
}

/// The X11 part: on `$DISPLAY` or a private Xvfb, or how to get one.
fn x11_part(text: bool) -> Result<Section> {
    Part::X11.starts(
        "a 32x32 mask over the X socket vs MIT-SHM, the screen query in-process vs over D-Bus",
    );
    match super::x11::demo() {
        Ok(Some(doc)) => {
            if text {
                let table = latscope::lab::x11::report::text(&doc);
                super::print(&format!("{table}{}", on_your_system(Part::X11)))?;
            }
            lab_section(Part::X11, Document::LabX11(doc))
        }
        Ok(None) => {
            let why = "no X server here: set $DISPLAY, or install Xvfb (Debian: apt-get install xvfb) and latscope starts a private one";
            eprintln!("latscope demo: {why}");
            Ok(Part::X11.section(Body::Missing(why.into())))
        }
        Err(e) => {
            eprintln!("latscope demo: the X11 part could not run: {e:#}");
            Ok(Part::X11.section(Body::Missing(format!("it could not run: {e:#}"))))
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
