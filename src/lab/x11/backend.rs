//! The screen-configuration query behind D-Bus, as libkscreen runs its XRandR backend by
//! default: a backend process owns the X connection and answers `GetConfig` calls with the
//! serialized configuration; the client deserializes it.
//!
//! The backend is a fresh `latscope lab x11-backend` (the async runtime under zbus does not
//! survive a fork) on the IPC lab's private `dbus-daemon`; it takes the server's `DISPLAY` and
//! `XAUTHORITY` from its environment, dies with latscope (`PR_SET_PDEATHSIG`), and is stopped
//! when [`Backend`] is dropped. Its query goes over its own [`Wire`], as the in-process one does.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::X11Error;
use super::screen::{self, Cached, Randr, ScreenConfig};
use super::server::{connect_wire, stop_child};
use super::wire::Wire;
use crate::ingest::Cancel;

/// The backend's well-known name on the private bus.
pub const NAME: &str = "org.latscope.X11Backend";
const PATH: &str = "/org/latscope/X11Backend";
const IFACE: &str = "org.latscope.X11Backend1";
const STARTUP: Duration = Duration::from_secs(20);
/// The longest wait for the X server in the backend.
const TIMEOUT: Duration = Duration::from_secs(10);

fn backend_error(e: impl std::fmt::Display) -> X11Error {
    X11Error::Backend(e.to_string())
}

struct Service {
    state: Mutex<State>,
}

/// The backend's X connection and what it learnt once.
struct State {
    wire: Wire,
    randr: Randr,
    root: u32,
    edid: u32,
    cache: Cached,
}

#[zbus::interface(name = "org.latscope.X11Backend1")]
impl Service {
    /// The serialized configuration, from the cache when `cached` (refreshed on RandR events).
    fn get_config(&self, cached: bool) -> zbus::fdo::Result<Vec<u8>> {
        let mut guard = self
            .state
            .lock()
            .map_err(|_| zbus::fdo::Error::Failed("state poisoned".into()))?;
        let s = &mut *guard;
        let config = if cached {
            s.cache.get(&mut s.wire, s.randr, s.root, s.edid)
        } else {
            screen::query(&mut s.wire, s.randr, s.root, s.edid)
        };
        config
            .map(|c| c.to_bytes())
            .map_err(|e| zbus::fdo::Error::Failed(e.to_string()))
    }
}

/// The backend program: serves `GetConfig` on the bus at `address` until it is killed.
pub fn serve(address: &str) -> Result<(), X11Error> {
    let display = std::env::var("DISPLAY").unwrap_or_default();
    let (mut wire, setup, screen_num) = connect_wire(None, TIMEOUT).map_err(|e| match e {
        X11Error::Connect { reason, .. } => X11Error::Connect { display, reason },
        other => other,
    })?;
    let randr = screen::check(&mut wire)?;
    let root = setup
        .roots
        .get(screen_num)
        .ok_or_else(|| X11Error::Protocol(format!("the server has no screen {screen_num}")))?
        .root;
    let edid = screen::edid_atom(&mut wire)?;
    let service = Service {
        state: Mutex::new(State {
            wire,
            randr,
            root,
            edid,
            cache: Cached::default(),
        }),
    };
    let _bus = zbus::blocking::connection::Builder::address(address)
        .map_err(backend_error)?
        .name(NAME)
        .map_err(backend_error)?
        .serve_at(PATH, service)
        .map_err(backend_error)?
        .build()
        .map_err(backend_error)?;
    loop {
        std::thread::park();
    }
}

/// A running backend and the client's connection to the bus.
pub struct Backend {
    child: Child,
    bus: zbus::blocking::Connection,
}

impl Drop for Backend {
    fn drop(&mut self) {
        stop_child(&mut self.child);
    }
}

impl Backend {
    /// Starts `exe lab x11-backend ADDRESS` with `env`, and waits until it answers.
    pub fn start(
        exe: &Path,
        address: &str,
        env: &[(String, String)],
        cancel: &Cancel,
    ) -> Result<Backend, X11Error> {
        let mut cmd = Command::new(exe);
        cmd.args(["lab", "x11-backend", address])
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // SAFETY: prctl only, between fork and exec.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .map_err(|e| backend_error(format!("{}: {e}", exe.display())))?;
        let bus = zbus::blocking::connection::Builder::address(address)
            .map_err(backend_error)?
            .build()
            .map_err(backend_error)?;
        let mut backend = Backend { child, bus };
        backend.wait_ready(cancel)?;
        Ok(backend)
    }

    /// The backend's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn wait_ready(&mut self, cancel: &Cancel) -> Result<(), X11Error> {
        let deadline = Instant::now() + STARTUP;
        let dbus = zbus::blocking::fdo::DBusProxy::new(&self.bus).map_err(backend_error)?;
        loop {
            let name = zbus::names::BusName::try_from(NAME).map_err(backend_error)?;
            if dbus.name_has_owner(name).unwrap_or(false) {
                return Ok(());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                let mut text = String::new();
                if let Some(mut err) = self.child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut err, &mut text);
                }
                return Err(backend_error(format!(
                    "the backend exited ({status}): {}",
                    text.trim()
                )));
            }
            if cancel.is_raised() || Instant::now() > deadline {
                return Err(backend_error("the backend did not come up"));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Asks for the configuration; returns it and the bytes that crossed the bus.
    pub fn get(&self, cached: bool) -> Result<(ScreenConfig, usize), X11Error> {
        let reply = self
            .bus
            .call_method(Some(NAME), PATH, Some(IFACE), "GetConfig", &(cached,))
            .map_err(backend_error)?;
        let bytes: Vec<u8> = reply.body().deserialize().map_err(backend_error)?;
        Ok((ScreenConfig::from_bytes(&bytes)?, bytes.len()))
    }
}
