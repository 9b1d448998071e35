//! One configuration end to end: set up (pixmap, segments, backend), warm up, measure until
//! `--count` operations or `--max-time`, read every side's CPU time and context switches
//! around the measured phase, and check the bytes.
//!
//! A failure in the middle of the measured phase (the server killed, a protocol error) keeps
//! what was measured and says what failed; a failure while setting up is returned as an error
//! so the caller can skip the configuration with the reason.

use std::path::PathBuf;
use std::time::Duration;

use super::backend::Backend;
use super::screen::{self, Cached, Randr};
use super::server::Server;
use super::stream::{Conn, exchange};
use super::upload::{self, ShmRing, Target};
use super::wire::{Counters, Wire};
use super::{Method, Pattern, Settings, Upload, Via, X11Error};
use crate::ingest::Cancel;
use crate::lab::ipc::clock::monotonic_ns;
use crate::lab::ipc::transport::dbus::Bus;
use crate::lab::ipc::usage::{self, Scope, Usage};
use crate::stats::Distribution;

/// What one latency sample spans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Meaning {
    /// a request and its reply
    RoundTrip,
    /// issuing an upload → knowing the server is done with its data
    UntilDone,
    /// issuing one request, up to issuing the next (pipelined)
    Issue,
    /// the whole configuration query, as the caller sees it
    Query,
}

impl Meaning {
    /// The name in the document.
    pub fn name(self) -> &'static str {
        match self {
            Meaning::RoundTrip => "round-trip",
            Meaning::UntilDone => "until-done",
            Meaning::Issue => "issue",
            Meaning::Query => "query",
        }
    }
}

/// Why the measured phase ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// every planned operation ran
    Done,
    /// `--max-time` came first
    MaxTime,
    /// Ctrl-C
    Interrupted,
    /// an operation failed
    Failed,
}

/// What one configuration measured.
#[derive(Debug)]
pub struct Outcome {
    /// the configuration
    pub pattern: Pattern,
    /// every measured sample, ns
    pub latency: Distribution,
    /// what a sample spans
    pub meaning: Meaning,
    /// how the client learns the server is done (`None`: not applicable)
    pub completion: Option<&'static str>,
    /// operations measured
    pub ops: u64,
    /// wall time of the measured phase, ns
    pub elapsed_ns: u64,
    /// bytes of image data or of serialized configuration per operation
    pub bytes_per_op: u64,
    /// the measuring process
    pub client: Usage,
    /// the X server (when its process is known)
    pub server: Option<Usage>,
    /// the D-Bus backend
    pub backend: Option<Usage>,
    /// dbus-daemon
    pub broker: Option<Usage>,
    /// most uploads in flight at once
    pub max_in_flight: u64,
    /// after an upload run: the pixmap read back equals the last image (`None`: not checked)
    pub verified: Option<bool>,
    /// why it stopped
    pub stop: Stop,
    /// what failed
    pub error: Option<String>,
    /// individual operations (`max_spans` > 0)
    pub kept: crate::doc::lab::Records,
    /// requests and system calls of the lab's connection in the measured phase
    pub wire: Counters,
}

/// Runs configurations on one server.
pub struct Lab<'a> {
    server: &'a Server,
    settings: Settings,
    cancel: Cancel,
    exe: Option<PathBuf>,
    bus: Option<Bus>,
    backend: Option<Backend>,
    wire: Option<Wire>,
}

/// How each configuration drives the server.
enum Driver<'b> {
    RoundTrip,
    PutSync(Target),
    PutPipelined(Target),
    Shm(Target, ShmRing),
    ShmPipelined(Target, ShmRing),
    Inproc {
        randr: Randr,
        edid: u32,
        cache: Option<Cached>,
    },
    Dbus {
        backend: &'b Backend,
        cache: bool,
    },
}

/// Takes one sample: (start, latency) in ns.
type Record<'r> = &'r mut dyn FnMut(u64, u64);

impl Driver<'_> {
    /// One operation, started at `start` (the loop's own clock reading, so that each
    /// operation costs one more reading, not two).
    fn step(
        &mut self,
        wire: &mut Wire,
        root: u32,
        seq: u64,
        start: u64,
        rec: Record,
    ) -> Result<u64, X11Error> {
        let since = |s: u64| monotonic_ns().saturating_sub(s);
        match self {
            Driver::RoundTrip => {
                wire.sync()?;
                rec(start, since(start));
            }
            Driver::PutSync(t) => {
                upload::put(wire, t, seq)?;
                wire.sync()?;
                rec(start, since(start));
            }
            // Pipelined: the loop records each request's issue → the next one's, one clock
            // reading per request (see `measure`).
            Driver::PutPipelined(t) => upload::put(wire, t, seq)?,
            Driver::Shm(t, ring) => {
                ring.upload(wire, t, seq, rec)?;
                return Ok(ring.in_flight() as u64);
            }
            Driver::ShmPipelined(t, ring) => ring.upload_unsynced(wire, t, seq)?,
            Driver::Inproc { randr, edid, cache } => {
                let config = match cache {
                    Some(c) => c.get(wire, *randr, root, *edid)?,
                    None => screen::query(wire, *randr, root, *edid)?,
                };
                rec(start, since(start));
                std::hint::black_box(config);
            }
            Driver::Dbus { backend, cache } => {
                let got = backend.get(*cache)?;
                rec(start, since(start));
                std::hint::black_box(got);
            }
        }
        Ok(1)
    }

    /// Waits for whatever is still in flight.
    fn finish(&mut self, wire: &mut Wire, rec: Record) -> Result<(), X11Error> {
        match self {
            Driver::PutPipelined(_) | Driver::ShmPipelined(..) => wire.sync(),
            Driver::Shm(_, ring) => ring.drain(wire, rec),
            _ => Ok(()),
        }
    }

    fn pipelined(&self) -> bool {
        matches!(self, Driver::PutPipelined(_) | Driver::ShmPipelined(..))
    }

    fn target(&self) -> Option<&Target> {
        match self {
            Driver::PutSync(t) | Driver::PutPipelined(t) => Some(t),
            Driver::Shm(t, _) | Driver::ShmPipelined(t, _) => Some(t),
            _ => None,
        }
    }
}

fn meaning(p: &Pattern) -> (Meaning, Option<&'static str>) {
    match p {
        Pattern::RoundTrip => (Meaning::RoundTrip, Some("GetInputFocus reply")),
        Pattern::Upload(u) if u.pipelined => (Meaning::Issue, None),
        Pattern::Upload(u) if u.method == Method::Put => {
            (Meaning::UntilDone, Some("GetInputFocus reply (XSync)"))
        }
        Pattern::Upload(_) => (Meaning::UntilDone, Some("ShmCompletion event")),
        Pattern::Config { .. } => (Meaning::Query, None),
    }
}

impl<'a> Lab<'a> {
    /// A lab on `server`; `exe` is the program started as the D-Bus backend.
    pub fn new(
        server: &'a Server,
        settings: Settings,
        cancel: Cancel,
        exe: Option<PathBuf>,
    ) -> Self {
        Lab {
            server,
            settings,
            cancel,
            exe,
            bus: None,
            backend: None,
            wire: None,
        }
    }

    /// Starts the private bus and the backend (once).
    pub fn start_backend(&mut self) -> Result<(), X11Error> {
        if self.backend.is_some() {
            return Ok(());
        }
        let exe = self
            .exe
            .clone()
            .ok_or_else(|| X11Error::Backend("cannot find latscope's own executable".into()))?;
        let bus = Bus::start().map_err(|e| X11Error::Backend(e.to_string()))?;
        let backend = Backend::start(&exe, bus.address(), &self.server.client_env(), &self.cancel)?;
        self.bus = Some(bus);
        self.backend = Some(backend);
        Ok(())
    }

    /// Runs one configuration. `Err`: it could not be set up.
    pub fn run(&mut self, p: &Pattern) -> Result<Outcome, X11Error> {
        let server = self.server;
        let settings = self.settings.clone();
        let cancel = self.cancel.clone();
        if self.wire.is_none() {
            self.wire = Some(server.wire(Duration::from_nanos(settings.timeout_ns))?);
        }
        if let (Pattern::Config { via: Via::Dbus, .. }, Some(wire)) = (p, self.wire.as_mut()) {
            screen::check(wire)?;
            self.start_backend()?;
        }
        let broker_pid = self.bus.as_ref().map(|b| b.pid());
        let Some(wire) = self.wire.as_mut() else {
            return Err(X11Error::Protocol("no connection (internal error)".into()));
        };
        let result = measure(
            server,
            wire,
            self.backend.as_ref(),
            broker_pid,
            p,
            &settings,
            &cancel,
        );
        // A connection that failed may be out of step with the server (a request half
        // written, a reply never read): the next configuration starts on a fresh one.
        if !matches!(&result, Ok(o) if o.stop != Stop::Failed) {
            self.wire = None;
        }
        result
    }
}

/// One configuration on `wire`: set up, warm up, measure, check.
fn measure(
    server: &Server,
    wire: &mut Wire,
    backend: Option<&Backend>,
    broker_pid: Option<u32>,
    p: &Pattern,
    settings: &Settings,
    cancel: &Cancel,
) -> Result<Outcome, X11Error> {
    let mut driver = driver(server, wire, backend, p)?;
    let backend_pid = match &driver {
        Driver::Dbus { backend, .. } => Some(backend.pid()),
        _ => None,
    };
    let root = server.root();
    let bytes_per_op = bytes_per_op(&driver, wire, root)?;
    let conn = &server.conn;
    // Warm-up: the first upload is checked, so a request the server refuses fails here.
    if let Driver::PutSync(t) | Driver::PutPipelined(t) = &mut driver {
        upload::put(wire, t, u64::MAX)?;
        wire.sync()?;
        wire.check_errors()?;
    }
    for seq in 0..settings.warmup {
        if cancel.is_raised() {
            break;
        }
        driver.step(wire, root, seq, monotonic_ns(), &mut |_, _| {})?;
    }
    driver.finish(wire, &mut |_, _| {})?;
    let others = |pid: Option<u32>| pid.and_then(usage::of_process);
    let before = (
        usage::current(Scope::Process),
        others(server.info.pid),
        others(backend_pid),
        others(broker_pid),
    );
    let (meaning, completion) = meaning(p);
    let mut latency = Distribution::default();
    let mut ops = 0u64;
    let mut max_in_flight = 0u64;
    let counters = wire.counters();
    let start = monotonic_ns();
    let mut stop = Stop::Done;
    let mut error = None;
    // With --max-spans every sample's start is kept too, in memory reserved before the
    // measured phase (its pages written), and sorted out after it.
    let record = settings.max_spans > 0;
    let mut samples: Vec<(u64, u64)> = Vec::new();
    if record {
        let n = settings.count.min(1 << 22) as usize;
        samples.resize(n, (u64::MAX, 0));
        samples.clear();
    }
    let mut rec = |start: u64, ns: u64| {
        latency.record(ns);
        if record {
            samples.push((start, ns));
        }
    };
    // Pipelined requests are timed from one issue to the next: the samples add up to the
    // measured phase (before the final sync) with one clock reading per request.
    let pipelined = driver.pipelined();
    let mut last_issue: Option<u64> = None;
    for seq in 0..settings.count {
        if cancel.is_raised() {
            stop = Stop::Interrupted;
            break;
        }
        let now = monotonic_ns();
        if let Some(issued) = last_issue.take() {
            rec(issued, now.saturating_sub(issued));
        }
        if now.saturating_sub(start) > settings.max_time_ns {
            stop = Stop::MaxTime;
            break;
        }
        match driver.step(wire, root, seq, now, &mut rec) {
            Ok(in_flight) => {
                max_in_flight = max_in_flight.max(in_flight);
                last_issue = pipelined.then_some(now);
            }
            Err(e) => {
                stop = Stop::Failed;
                error = Some(describe_failure(e, server));
                break;
            }
        }
        ops += 1;
    }
    if let Some(issued) = last_issue {
        rec(issued, monotonic_ns().saturating_sub(issued));
    }
    if stop != Stop::Failed
        && let Err(e) = driver.finish(wire, &mut rec)
    {
        stop = Stop::Failed;
        error = Some(describe_failure(e, server));
    }
    let elapsed_ns = monotonic_ns().saturating_sub(start);
    let wire_counters = wire.counters().since(&counters);
    let after = (
        usage::current(Scope::Process),
        others(server.info.pid),
        others(backend_pid),
        others(broker_pid),
    );
    let verified = match (stop, driver.target()) {
        (Stop::Failed, _) | (_, None) => None,
        (_, Some(t)) => match upload::verify(conn, t) {
            Ok(None) => Some(true),
            Ok(Some(mismatch)) => {
                stop = Stop::Failed;
                error = Some(mismatch);
                Some(false)
            }
            Err(e) => {
                stop = Stop::Failed;
                error = Some(describe_failure(e, server));
                None
            }
        },
    };
    if stop != Stop::Failed
        && let Err(e) = wire.check_errors().and_then(|()| check_errors(conn))
    {
        stop = Stop::Failed;
        error = Some(e.to_string());
    }
    release(driver, conn);
    let mut recorder = crate::lab::records::Recorder::new(settings.max_spans, &[meaning.name()]);
    for (start, ns) in samples {
        recorder.sample(0, start, ns);
    }
    let diff = |a: Option<Usage>, b: Option<Usage>| Some(a?.since(&b?));
    Ok(Outcome {
        pattern: *p,
        latency,
        meaning,
        completion,
        ops,
        elapsed_ns,
        bytes_per_op,
        client: after.0.since(&before.0),
        server: diff(after.1, before.1),
        backend: diff(after.2, before.2),
        broker: diff(after.3, before.3),
        max_in_flight,
        verified,
        stop,
        error,
        kept: recorder.finish(),
        wire: wire_counters,
    })
}

/// How pattern `p` drives the server.
fn driver<'b>(
    server: &Server,
    wire: &mut Wire,
    backend: Option<&'b Backend>,
    p: &Pattern,
) -> Result<Driver<'b>, X11Error> {
    Ok(match *p {
        Pattern::RoundTrip => Driver::RoundTrip,
        Pattern::Upload(u) => upload_driver(&server.conn, server.root(), u)?,
        Pattern::Config {
            via: Via::Inproc,
            cache,
        } => Driver::Inproc {
            randr: screen::check(wire)?,
            edid: screen::edid_atom(wire)?,
            cache: cache.then(Cached::default),
        },
        Pattern::Config {
            via: Via::Dbus,
            cache,
        } => {
            let backend = backend.ok_or_else(|| X11Error::Backend("not started".into()))?;
            Driver::Dbus { backend, cache }
        }
    })
}

fn upload_driver(conn: &Conn, root: u32, u: Upload) -> Result<Driver<'static>, X11Error> {
    let target = upload::prepare(conn, root, u)?;
    Ok(match (u.method, u.pipelined) {
        (Method::Put, false) => Driver::PutSync(target),
        (Method::Put, true) => Driver::PutPipelined(target),
        (Method::Shm, pipelined) => {
            let k = if pipelined { 1 } else { u.segments.max(1) };
            let ring = match ShmRing::new(conn, &target, k) {
                Ok(r) => r,
                Err(e) => {
                    upload::release(conn, &target);
                    return Err(e);
                }
            };
            if pipelined {
                Driver::ShmPipelined(target, ring)
            } else {
                Driver::Shm(target, ring)
            }
        }
    })
}

fn bytes_per_op(driver: &Driver<'_>, wire: &mut Wire, root: u32) -> Result<u64, X11Error> {
    Ok(match driver {
        Driver::Inproc { randr, edid, .. } => {
            screen::query(wire, *randr, root, *edid)?.to_bytes().len() as u64
        }
        Driver::Dbus { backend, cache } => backend.get(*cache)?.1 as u64,
        other => other.target().map_or(0, |t| t.image_bytes() as u64),
    })
}

/// Errors of unchecked requests arrive as events: any one fails the configuration.
fn check_errors(conn: &Conn) -> Result<(), X11Error> {
    use x11rb::connection::Connection;
    let refused = exchange(conn, 0, |c| {
        while let Some(event) = c.poll_for_event()? {
            if let x11rb::protocol::Event::Error(e) = event {
                return Ok(Some(e));
            }
        }
        Ok::<_, x11rb::errors::ConnectionError>(None)
    })?;
    match refused {
        Some(e) => Err(X11Error::Protocol(format!(
            "the server refused a request: {e:?}"
        ))),
        None => Ok(()),
    }
}

fn describe_failure(e: X11Error, server: &Server) -> String {
    if !server.gone_within(std::time::Duration::from_millis(500)) {
        e.to_string()
    } else {
        format!("the X server {} is gone ({e})", server.info.display)
    }
}

fn release(driver: Driver<'_>, conn: &Conn) {
    match driver {
        Driver::PutSync(t) | Driver::PutPipelined(t) => upload::release(conn, &t),
        Driver::Shm(t, ring) | Driver::ShmPipelined(t, ring) => {
            ring.detach(conn);
            upload::release(conn, &t);
        }
        _ => {}
    }
}
