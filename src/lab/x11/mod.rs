//! The X11 lab: what a request costs on a real X server, per request, as distributions.
//!
//! Two of latscope's seed write-ups are about an X server. Java2D uploads 32×32 8-bit alpha
//! masks with `XPutImage` and asked whether MIT-SHM, with how many shared segments K, hides the
//! round trip; libkscreen fetches the screen configuration through XRandR either in the client
//! or in a backend process behind D-Bus. x11perf answers neither: it prints rates of pipelined
//! requests, with no completion and no distribution, and timing a whole `kscreen-doctor` buries
//! the query under Qt's whole start-up. Here every request is timed from the moment it is
//! issued to the moment the client *knows* the server is done with it (a reply, or an MIT-SHM
//! completion event), many times in one warm process, next to the context switches and CPU
//! time of the client, the X server and (for D-Bus) the backend and the broker.
//!
//! * [`server`]: which X server (`$DISPLAY`, `--display`, or a private Xvfb that latscope
//!   starts with its own authorization cookie and stops on every exit path) and what it offers;
//! * [`upload`]: image uploads over the socket (`PutImage`) or through K shared segments
//!   (`ShmPutImage`), each segment reused only after the server's completion event;
//! * [`screen`]: the RandR screen-configuration query libkscreen makes;
//! * [`backend`]: that query served by a backend process over a private D-Bus;
//! * [`run`]: one configuration end to end, with usage of every side; [`report`] renders;
//! * [`wire`]: the connection every measured request goes over: a copy into a 16 KiB buffer per
//!   request and one write per flush, as Xlib does, so the client is not what is measured;
//! * [`x11perf`]: x11perf's rates on the same server, beside the lab's (`--compare-x11perf`);
//! * [`stream`]: what a server can make the lab wait for or hold, on both connections: one
//!   deadline per wait, and no answer larger than the request in flight allows.
//!
//! Everything is pure Rust (`x11rb`, x11rb-protocol, `zbus`): no libX11, no libxcb.

pub mod backend;
pub mod report;
pub mod run;
pub mod screen;
pub mod server;
pub mod stream;
pub mod upload;
pub mod wire;
pub mod x11perf;

use std::fmt;

/// How an image reaches the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Method {
    /// `PutImage`, ZPixmap, the pixels inside the request on the socket
    Put,
    /// `ShmPutImage` from MIT-SHM segments attached by file descriptor
    Shm,
}

impl Method {
    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Method::Put => "put",
            Method::Shm => "shm",
        }
    }

    /// The method named `name`.
    pub fn parse(name: &str) -> Option<Method> {
        match name {
            "put" => Some(Method::Put),
            "shm" => Some(Method::Shm),
            _ => None,
        }
    }
}

/// Where the screen-configuration query runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Via {
    /// in the measuring process (`KSCREEN_BACKEND_INPROCESS=1`)
    Inproc,
    /// in a backend process, asked over a private D-Bus (libkscreen's default)
    Dbus,
}

impl Via {
    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Via::Inproc => "inproc",
            Via::Dbus => "dbus",
        }
    }

    /// The place named `name`.
    pub fn parse(name: &str) -> Option<Via> {
        match name {
            "inproc" => Some(Via::Inproc),
            "dbus" => Some(Via::Dbus),
            _ => None,
        }
    }
}

/// One image upload configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Upload {
    /// socket or shared memory
    pub method: Method,
    /// pixels
    pub width: u16,
    /// pixels
    pub height: u16,
    /// bits per pixel of the target pixmap (8, 24 or 32)
    pub depth: u8,
    /// shared segments rotated (shm only; 1 when pipelined)
    pub segments: u32,
    /// issue only, no completion per upload (what x11perf measures)
    pub pipelined: bool,
}

/// What a configuration does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pattern {
    /// `GetInputFocus` and its reply: what `XSync` does, the floor
    RoundTrip,
    /// image uploads
    Upload(Upload),
    /// the RandR screen configuration, optionally answered from a cache
    Config {
        /// where the query runs
        via: Via,
        /// answer from the last result until RandR says the configuration changed
        cache: bool,
    },
}

impl Pattern {
    /// `round-trip`, `upload` or `config`.
    pub fn name(&self) -> &'static str {
        match self {
            Pattern::RoundTrip => "round-trip",
            Pattern::Upload(_) => "upload",
            Pattern::Config { .. } => "config",
        }
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pattern::RoundTrip => write!(f, "round-trip"),
            Pattern::Upload(u) => {
                write!(
                    f,
                    "upload {} {}x{}x{}",
                    u.method.name(),
                    u.width,
                    u.height,
                    u.depth
                )?;
                if u.method == Method::Shm && !u.pipelined {
                    write!(f, " K={}", u.segments)?;
                }
                if u.pipelined {
                    write!(f, " pipelined")?;
                }
                Ok(())
            }
            Pattern::Config { via, cache } => {
                write!(f, "config {}", via.name())?;
                if *cache {
                    write!(f, " cached")?;
                }
                Ok(())
            }
        }
    }
}

/// Counts and limits of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// measured operations per configuration (at most)
    pub count: u64,
    /// operations before measuring
    pub warmup: u64,
    /// time limit per configuration, ns
    pub max_time_ns: u64,
    /// operations to keep one by one per configuration (`--max-spans`; 0: none)
    pub max_spans: usize,
    /// the longest wait for one reply, event or write, ns (`--timeout`)
    pub timeout_ns: u64,
}

/// Why the lab could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum X11Error {
    /// no server and no way to start one
    #[error(
        "no X server: $DISPLAY is not set, --display was not given, and Xvfb is not installed (Debian: apt-get install xvfb)"
    )]
    NoServer,
    /// connecting failed
    #[error("cannot connect to the X server {display}: {reason}")]
    Connect {
        /// the display name
        display: String,
        /// why
        reason: String,
    },
    /// Xvfb did not come up
    #[error("cannot start Xvfb: {0}")]
    Xvfb(String),
    /// the server refused or the connection broke
    #[error("X server: {0}")]
    Protocol(String),
    /// a request larger than the server takes
    #[error("{0}")]
    TooLarge(String),
    /// the server lacks an extension the configuration needs
    #[error("the server has no {0} extension")]
    Missing(&'static str),
    /// the D-Bus backend
    #[error("D-Bus backend: {0}")]
    Backend(String),
    /// the server did not answer (or read) in time
    #[error("timed out: {0}")]
    Timeout(String),
    /// the server sent what no request of the lab allows (a flood, an impossible length)
    #[error("the X server broke the protocol: {0}")]
    Misbehaved(String),
}

impl X11Error {
    /// An error of the X connection or protocol.
    pub fn protocol(e: impl fmt::Display) -> X11Error {
        X11Error::Protocol(e.to_string())
    }
}
