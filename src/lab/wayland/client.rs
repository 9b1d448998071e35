//! The connection to the compositor, the one state every pattern's events land in, and the
//! event loop that waits for a condition while watching Ctrl-C, a deadline and the connection.
//!
//! Every event is stamped with `CLOCK_MONOTONIC` when it is dispatched — where libwayland's
//! WAYLAND_DEBUG stamps it too, so that the log of the same run agrees with the lab.

use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use wayland_client::backend::WaylandError;
use wayland_client::protocol::{
    wl_buffer, wl_callback, wl_compositor, wl_output, wl_registry, wl_shm, wl_shm_pool, wl_surface,
};
use wayland_client::{Connection, Dispatch, DispatchError, EventQueue, QueueHandle, WEnum};
use wayland_protocols::wp::presentation_time::client::{wp_presentation, wp_presentation_feedback};
use wayland_protocols::xdg::shell::client::{xdg_surface, xdg_toplevel, xdg_wm_base};
use wayland_protocols::xdg::xdg_output::zv1::client::{zxdg_output_manager_v1, zxdg_output_v1};

use super::LabError;
use crate::doc::lab_wayland::{Mode, OutputDoc};
use crate::ingest::Cancel;
use crate::lab::ipc::clock::monotonic_ns;

/// How often a wait looks at Ctrl-C.
const SLICE_MS: u64 = 50;

/// One global the compositor offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Global {
    /// its registry name
    pub name: u32,
    /// its interface
    pub interface: String,
    /// the highest version offered
    pub version: u32,
}

/// What a callback was created by.
#[derive(Debug, Clone, Copy)]
pub enum CallbackKind {
    /// `wl_display.sync`
    Sync,
    /// `wl_surface.frame`, requested at this time (ns)
    Frame(u64),
}

/// One buffer of the pool.
#[derive(Debug, Clone, Copy, Default)]
pub struct Slot {
    /// the compositor holds it
    pub busy: bool,
    /// when it was last committed (ns)
    pub committed_at: Option<u64>,
}

/// What frames measured so far (ns).
#[derive(Debug, Clone, Default)]
pub struct FrameEvents {
    /// commit → release: (commit time, latency)
    pub commit_to_release: Vec<(u64, u64)>,
    /// frame request → done: (request time, latency)
    pub frame_to_done: Vec<(u64, u64)>,
    /// commit → presented (received): (commit time, latency)
    pub commit_to_presented: Vec<(u64, u64)>,
    /// feedbacks asked for
    pub feedbacks: u64,
    /// feedbacks answered `discarded`
    pub discarded: u64,
    /// union of the `presented` flags seen
    pub flags: u32,
    /// the last refresh period reported (ns)
    pub refresh_ns: Option<u64>,
    /// the presentation clock
    pub clock_id: Option<u32>,
    /// frame callbacks requested and not yet done
    pub frames_pending: u64,
}

/// Every event of every pattern lands here.
#[derive(Debug, Default)]
pub struct State {
    /// the globals offered
    pub globals: Vec<Global>,
    /// the time the last sync was answered (ns)
    pub synced_at: Option<u64>,
    /// the xdg_surface was configured
    pub configured: bool,
    /// the toplevel was closed by the compositor
    pub closed: bool,
    /// the buffer pool
    pub slots: Vec<Slot>,
    /// frame measurements
    pub frames: FrameEvents,
    /// outputs collected by the output query
    pub outputs: Vec<OutputDoc>,
    /// per output: `wl_output.done` seen
    pub outputs_done: Vec<bool>,
}

/// A connection and its event queue.
pub struct Client {
    /// the connection
    pub conn: Connection,
    /// its only queue
    pub queue: EventQueue<State>,
    /// every event's destination
    pub state: State,
}

/// What a wait ended with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// the condition holds
    Done,
    /// Ctrl-C
    Cancelled,
    /// the deadline passed first
    TimedOut,
}

/// The name of the process at the other end of `stream` (`/proc/PID/comm` of SO_PEERCRED).
pub fn peer_name(stream: &UnixStream) -> Option<String> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `cred`.
    let r = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if r != 0 || cred.pid <= 0 {
        return None;
    }
    let comm = std::fs::read_to_string(format!("/proc/{}/comm", cred.pid)).ok()?;
    Some(comm.trim().to_string())
}

impl Client {
    /// Connects to the socket at `path`; returns the client and the compositor's process name.
    pub fn connect(path: &Path) -> Result<(Client, Option<String>), LabError> {
        let stream = UnixStream::connect(path).map_err(|e| {
            LabError::Setup(format!(
                "cannot connect to the compositor at {}: {e}",
                path.display()
            ))
        })?;
        let name = peer_name(&stream);
        let conn = Connection::from_socket(stream).map_err(|e| {
            LabError::Setup(format!(
                "cannot use libwayland-client.so.0 ({e}; Debian: apt-get install libwayland-client0)"
            ))
        })?;
        let queue = conn.new_event_queue();
        Ok((
            Client {
                conn,
                queue,
                state: State::default(),
            },
            name,
        ))
    }

    /// The queue's handle.
    pub fn qh(&self) -> QueueHandle<State> {
        self.queue.handle()
    }

    /// Asks for the globals and waits until they are all in.
    pub fn registry(&mut self, cancel: &Cancel) -> Result<wl_registry::WlRegistry, LabError> {
        let qh = self.qh();
        let registry = self.conn.display().get_registry(&qh, ());
        self.sync(cancel)?;
        Ok(registry)
    }

    /// One `wl_display.sync` round trip: when it started and how long it took, ns.
    pub fn sync(&mut self, cancel: &Cancel) -> Result<Option<(u64, u64)>, LabError> {
        let qh = self.qh();
        self.state.synced_at = None;
        let start = monotonic_ns();
        self.conn.display().sync(&qh, CallbackKind::Sync);
        match self.wait(cancel, Duration::from_secs(10), |s| s.synced_at.is_some())? {
            Wait::Done => Ok(self
                .state
                .synced_at
                .map(|t| (start, t.saturating_sub(start)))),
            Wait::Cancelled => Ok(None),
            Wait::TimedOut => Err(LabError::Stalled(
                "the compositor did not answer wl_display.sync within 10 s".into(),
            )),
        }
    }

    /// The global offering `interface`.
    pub fn global(&self, interface: &str) -> Option<&Global> {
        self.state.globals.iter().find(|g| g.interface == interface)
    }

    /// Dispatches events until `done` holds, Ctrl-C, or `patience` passes.
    pub fn wait(
        &mut self,
        cancel: &Cancel,
        patience: Duration,
        done: impl Fn(&State) -> bool,
    ) -> Result<Wait, LabError> {
        let deadline = monotonic_ns() + u64::try_from(patience.as_nanos()).unwrap_or(u64::MAX);
        loop {
            self.queue
                .dispatch_pending(&mut self.state)
                .map_err(|e| self.dispatch_error(e))?;
            if done(&self.state) {
                return Ok(Wait::Done);
            }
            if cancel.is_raised() {
                return Ok(Wait::Cancelled);
            }
            let now = monotonic_ns();
            if now >= deadline {
                return Ok(Wait::TimedOut);
            }
            let slice = ((deadline - now) / 1_000_000).clamp(1, SLICE_MS);
            self.read_events(slice as i32)?;
        }
    }

    /// Flushes, then reads what arrives within `timeout_ms`.
    fn read_events(&mut self, timeout_ms: i32) -> Result<(), LabError> {
        self.conn.flush().map_err(|e| self.wayland_error(e))?;
        let Some(guard) = self.conn.prepare_read() else {
            return Ok(());
        };
        let mut pfd = libc::pollfd {
            fd: guard.connection_fd().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
        if n <= 0 {
            return Ok(());
        }
        match guard.read() {
            Ok(_) => Ok(()),
            Err(WaylandError::Io(e)) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(()),
            Err(e) => Err(self.wayland_error(e)),
        }
    }

    fn wayland_error(&self, e: WaylandError) -> LabError {
        if let Some(p) = self.conn.protocol_error() {
            return protocol(p);
        }
        match e {
            WaylandError::Protocol(p) => protocol(p),
            WaylandError::Io(e) => LabError::Gone(e.to_string()),
        }
    }

    fn dispatch_error(&self, e: DispatchError) -> LabError {
        match e {
            DispatchError::Backend(e) => self.wayland_error(e),
            DispatchError::BadMessage {
                sender_id,
                interface,
                opcode,
            } => LabError::Setup(format!(
                "a malformed event from the compositor: {interface} {sender_id} opcode {opcode}"
            )),
        }
    }
}

fn protocol(p: wayland_client::backend::protocol::ProtocolError) -> LabError {
    LabError::Protocol {
        interface: p.object_interface,
        id: p.object_id,
        code: p.code,
        message: p.message,
    }
}

impl Dispatch<wl_registry::WlRegistry, ()> for State {
    fn event(
        state: &mut Self,
        _: &wl_registry::WlRegistry,
        event: wl_registry::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        match event {
            wl_registry::Event::Global {
                name,
                interface,
                version,
            } => state.globals.push(Global {
                name,
                interface,
                version,
            }),
            wl_registry::Event::GlobalRemove { name } => state.globals.retain(|g| g.name != name),
            _ => {}
        }
    }
}

impl Dispatch<wl_callback::WlCallback, CallbackKind> for State {
    fn event(
        state: &mut Self,
        _: &wl_callback::WlCallback,
        event: wl_callback::Event,
        kind: &CallbackKind,
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        if let wl_callback::Event::Done { .. } = event {
            let now = monotonic_ns();
            match *kind {
                CallbackKind::Sync => state.synced_at = Some(now),
                CallbackKind::Frame(at) => {
                    state
                        .frames
                        .frame_to_done
                        .push((at, now.saturating_sub(at)));
                    state.frames.frames_pending = state.frames.frames_pending.saturating_sub(1);
                }
            }
        }
    }
}

impl Dispatch<wl_buffer::WlBuffer, usize> for State {
    fn event(
        state: &mut Self,
        _: &wl_buffer::WlBuffer,
        event: wl_buffer::Event,
        index: &usize,
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        if let wl_buffer::Event::Release = event {
            let now = monotonic_ns();
            if let Some(slot) = state.slots.get_mut(*index) {
                if let Some(at) = slot.committed_at.take() {
                    state
                        .frames
                        .commit_to_release
                        .push((at, now.saturating_sub(at)));
                }
                slot.busy = false;
            }
        }
    }
}

/// The commit time of the frame a feedback is for, set once the commit is sent.
pub type CommitTime = Arc<AtomicU64>;

impl Dispatch<wp_presentation_feedback::WpPresentationFeedback, CommitTime> for State {
    fn event(
        state: &mut Self,
        _: &wp_presentation_feedback::WpPresentationFeedback,
        event: wp_presentation_feedback::Event,
        committed: &CommitTime,
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        let now = monotonic_ns();
        match event {
            wp_presentation_feedback::Event::Presented { refresh, flags, .. } => {
                let at = committed.load(Ordering::Acquire);
                state
                    .frames
                    .commit_to_presented
                    .push((at, now.saturating_sub(at)));
                state.frames.refresh_ns = Some(u64::from(refresh));
                if let WEnum::Value(f) = flags {
                    state.frames.flags |= f.bits();
                }
            }
            wp_presentation_feedback::Event::Discarded => state.frames.discarded += 1,
            _ => {}
        }
    }
}

impl Dispatch<wp_presentation::WpPresentation, ()> for State {
    fn event(
        state: &mut Self,
        _: &wp_presentation::WpPresentation,
        event: wp_presentation::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        if let wp_presentation::Event::ClockId { clk_id } = event {
            state.frames.clock_id = Some(clk_id);
        }
    }
}

impl Dispatch<xdg_wm_base::XdgWmBase, ()> for State {
    fn event(
        _: &mut Self,
        wm_base: &xdg_wm_base::XdgWmBase,
        event: xdg_wm_base::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        if let xdg_wm_base::Event::Ping { serial } = event {
            wm_base.pong(serial);
        }
    }
}

impl Dispatch<xdg_surface::XdgSurface, ()> for State {
    fn event(
        state: &mut Self,
        surface: &xdg_surface::XdgSurface,
        event: xdg_surface::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        if let xdg_surface::Event::Configure { serial } = event {
            surface.ack_configure(serial);
            state.configured = true;
        }
    }
}

impl Dispatch<xdg_toplevel::XdgToplevel, ()> for State {
    fn event(
        state: &mut Self,
        _: &xdg_toplevel::XdgToplevel,
        event: xdg_toplevel::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        if let xdg_toplevel::Event::Close = event {
            state.closed = true;
        }
    }
}

impl Dispatch<wl_output::WlOutput, usize> for State {
    fn event(
        state: &mut Self,
        _: &wl_output::WlOutput,
        event: wl_output::Event,
        index: &usize,
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        if let wl_output::Event::Done = event {
            if let Some(done) = state.outputs_done.get_mut(*index) {
                *done = true;
            }
            return;
        }
        let Some(out) = state.outputs.get_mut(*index) else {
            return;
        };
        match event {
            wl_output::Event::Geometry {
                x,
                y,
                physical_width,
                physical_height,
                make,
                model,
                transform,
                ..
            } => {
                out.x = x;
                out.y = y;
                out.physical_width_mm = physical_width;
                out.physical_height_mm = physical_height;
                out.make = make;
                out.model = model;
                out.transform = match transform {
                    WEnum::Value(t) => u32::from(t),
                    WEnum::Unknown(t) => t,
                };
            }
            wl_output::Event::Mode {
                flags,
                width,
                height,
                refresh,
            } => {
                let bits = match flags {
                    WEnum::Value(f) => f.bits(),
                    WEnum::Unknown(f) => f,
                };
                out.modes.push(Mode {
                    width,
                    height,
                    refresh_mhz: refresh,
                    current: bits & wl_output::Mode::Current.bits() != 0,
                    preferred: bits & wl_output::Mode::Preferred.bits() != 0,
                });
            }
            wl_output::Event::Scale { factor } => out.scale = factor,
            wl_output::Event::Name { name } => out.name = Some(name),
            wl_output::Event::Description { description } => out.description = Some(description),
            _ => {}
        }
    }
}

impl Dispatch<zxdg_output_v1::ZxdgOutputV1, usize> for State {
    fn event(
        state: &mut Self,
        _: &zxdg_output_v1::ZxdgOutputV1,
        event: zxdg_output_v1::Event,
        index: &usize,
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        let Some(out) = state.outputs.get_mut(*index) else {
            return;
        };
        match event {
            zxdg_output_v1::Event::LogicalPosition { x, y } => {
                out.logical_x = Some(x);
                out.logical_y = Some(y);
            }
            zxdg_output_v1::Event::LogicalSize { width, height } => {
                out.logical_width = Some(width);
                out.logical_height = Some(height);
            }
            zxdg_output_v1::Event::Name { name } => out.xdg_name = Some(name),
            zxdg_output_v1::Event::Description { description } => {
                out.xdg_description = Some(description)
            }
            _ => {}
        }
    }
}

wayland_client::delegate_noop!(State: ignore wl_compositor::WlCompositor);
wayland_client::delegate_noop!(State: ignore wl_surface::WlSurface);
wayland_client::delegate_noop!(State: ignore wl_shm::WlShm);
wayland_client::delegate_noop!(State: ignore wl_shm_pool::WlShmPool);
wayland_client::delegate_noop!(State: ignore zxdg_output_manager_v1::ZxdgOutputManagerV1);
