//! Which X server the lab talks to, and what it offers.
//!
//! `--display` or `$DISPLAY` names one; with neither, latscope starts a private Xvfb. That
//! Xvfb listens on no TCP port, accepts only clients that present a random
//! MIT-MAGIC-COOKIE-1 written to a 0600 file in a fresh 0700 directory, picks a free display
//! number itself (`-displayfd`, so two labs never race for one), dies with latscope
//! (`PR_SET_PDEATHSIG`), and is stopped when [`Xvfb`] is dropped, on every exit path.
//!
//! The server's process id comes from the connection itself (`SO_PEERCRED` on the Unix
//! socket), so its CPU time and context switches can be read from `/proc` whoever started it.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use x11rb::connection::{Connection, RequestConnection};
use x11rb::protocol::randr::ConnectionExt as _;
use x11rb::protocol::shm::ConnectionExt as _;
use x11rb::protocol::xproto::ConnectionExt as _;
use x11rb::protocol::xproto::Setup;
use x11rb::rust_connection::{DefaultStream, RustConnection};

use super::X11Error;
use super::stream::{Conn, Guarded, exchange};
use super::wire::{SMALL_REPLY, Wire};
use crate::files::{self, PrivateDir};
use crate::ingest::Cancel;

/// The Debian package with `Xvfb`.
pub const XVFB_PACKAGE: &str = "xvfb";
/// How long Xvfb may take to come up.
const STARTUP: Duration = Duration::from_secs(20);
/// The private Xvfb's screen when `--xvfb-arg` does not set one.
const DEFAULT_SCREEN: [&str; 3] = ["-screen", "0", "1280x1024x24"];

/// What the server is and offers, as the report names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerInfo {
    /// the display name
    pub display: String,
    /// the vendor string of the connection setup
    pub vendor: String,
    /// the vendor's release number
    pub release: u32,
    /// latscope started it (a private Xvfb)
    pub private_xvfb: bool,
    /// every extension the server lists, sorted
    pub extensions: Vec<String>,
    /// the largest request it takes, bytes (with BIG-REQUESTS where offered)
    pub max_request_bytes: u64,
    /// MIT-SHM major.minor, if offered
    pub shm: Option<(u16, u16)>,
    /// RandR major.minor, if offered
    pub randr: Option<(u32, u32)>,
    /// the server's process (from the socket's peer credentials)
    pub pid: Option<u32>,
    /// the root window's depth and size
    pub root: (u8, u16, u16),
}

/// A private Xvfb, stopped when dropped.
#[derive(Debug)]
pub struct Xvfb {
    child: Child,
    number: u32,
    auth: PathBuf,
    cookie: [u8; 16],
    _dir: PrivateDir,
}

/// An open connection to a server, and the server itself when latscope started it.
pub struct Server {
    /// the connection (every wait on it through [`exchange`])
    pub conn: Conn,
    /// the screen in use
    pub screen: usize,
    /// what it is
    pub info: ServerInfo,
    /// the private Xvfb (kept alive as long as the connection)
    xvfb: Option<Xvfb>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("info", &self.info).finish()
    }
}

/// Finds `Xvfb` on `PATH`.
pub fn find_xvfb() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("Xvfb"))
        .find(|p| p.is_file())
}

/// An `.Xauthority` file of one entry that matches any address and display number.
pub fn xauthority(cookie: &[u8]) -> Vec<u8> {
    fn field(out: &mut Vec<u8>, bytes: &[u8]) {
        out.extend_from_slice(&(bytes.len() as u16).to_be_bytes());
        out.extend_from_slice(bytes);
    }
    let mut out = 0xffffu16.to_be_bytes().to_vec(); // FamilyWild
    field(&mut out, b""); // any address
    field(&mut out, b""); // any display number
    field(&mut out, b"MIT-MAGIC-COOKIE-1");
    field(&mut out, cookie);
    out
}

fn random_cookie() -> std::io::Result<[u8; 16]> {
    let mut cookie = [0u8; 16];
    File::open("/dev/urandom")?.read_exact(&mut cookie)?;
    Ok(cookie)
}

fn xvfb_error(e: impl std::fmt::Display) -> X11Error {
    X11Error::Xvfb(e.to_string())
}

impl Xvfb {
    /// Starts a private Xvfb with `extra` arguments after latscope's own; waits until it is
    /// ready (or `cancel` is raised).
    pub fn start(extra: &[String], cancel: &Cancel) -> Result<Xvfb, X11Error> {
        let exe = find_xvfb().ok_or(X11Error::NoServer)?;
        let dir = files::private_dir("latscope-x11-").map_err(xvfb_error)?;
        let cookie = random_cookie().map_err(xvfb_error)?;
        let auth = dir.path().join("Xauthority");
        // A fresh 0700 directory: the name cannot be planted; O_EXCL anyway, and 0600.
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&auth)
            .map_err(xvfb_error)?;
        file.write_all(&xauthority(&cookie)).map_err(xvfb_error)?;
        drop(file);
        let log = dir.path().join("xvfb.log");
        let (ready_read, ready_write) = crate::process::pipe().map_err(xvfb_error)?;
        let child = spawn(&exe, &auth, &log, ready_write.as_raw_fd(), extra)?;
        drop(ready_write);
        let mut xvfb = Xvfb {
            child,
            number: 0,
            auth,
            cookie,
            _dir: dir,
        };
        xvfb.number = xvfb.wait_ready(ready_read, &log, cancel)?;
        Ok(xvfb)
    }

    /// The display name, `:N`.
    pub fn display(&self) -> String {
        format!(":{}", self.number)
    }

    /// The authorization file clients of this server need (`XAUTHORITY`).
    pub fn auth_file(&self) -> &Path {
        &self.auth
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn wait_ready(&mut self, ready: OwnedFd, log: &Path, cancel: &Cancel) -> Result<u32, X11Error> {
        let deadline = Instant::now() + STARTUP;
        let mut text = Vec::new();
        let mut file = File::from(ready);
        loop {
            if cancel.is_raised() {
                return Err(xvfb_error("interrupted while Xvfb was starting"));
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                let tail = std::fs::read_to_string(log).unwrap_or_default();
                let tail: Vec<&str> = tail.lines().rev().take(5).collect();
                return Err(xvfb_error(format!(
                    "it exited ({status}) before it was ready: {}",
                    tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
                )));
            }
            if Instant::now() > deadline {
                return Err(xvfb_error(format!(
                    "not ready after {} s",
                    STARTUP.as_secs()
                )));
            }
            if poll_readable(file.as_raw_fd(), 100) {
                let mut buf = [0u8; 32];
                let n = file.read(&mut buf).map_err(xvfb_error)?;
                text.extend_from_slice(&buf[..n]);
                if text.ends_with(b"\n") || n == 0 {
                    let number = String::from_utf8_lossy(&text).trim().parse();
                    return number.map_err(|_| xvfb_error("it printed no display number"));
                }
            }
        }
    }

    fn socket(&self) -> Result<UnixStream, X11Error> {
        let path = format!("/tmp/.X11-unix/X{}", self.number);
        UnixStream::connect(&path).map_err(|e| X11Error::Connect {
            display: self.display(),
            reason: format!("{path}: {e}"),
        })
    }

    /// Connects with this server's cookie; every wait is limited to `timeout`.
    fn connect(&self, timeout: Duration) -> Result<Conn, X11Error> {
        let stream = self.socket()?;
        let (stream, _) =
            DefaultStream::from_unix_stream(stream).map_err(|e| X11Error::Connect {
                display: self.display(),
                reason: e.to_string(),
            })?;
        let auth = (b"MIT-MAGIC-COOKIE-1".to_vec(), self.cookie.to_vec());
        connect_guarded(stream, auth, 0, timeout).map_err(|e| name_display(e, &self.display()))
    }
}

impl Drop for Xvfb {
    fn drop(&mut self) {
        stop_child(&mut self.child);
    }
}

/// SIGTERM, up to 2 s to exit, then SIGKILL; always reaped.
pub fn stop_child(child: &mut Child) {
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    // SAFETY: kill(2) on our own child's id, which is not reaped yet.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
}

fn poll_readable(fd: i32, timeout_ms: i32) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut p, 1, timeout_ms) > 0 }
}

fn spawn(
    exe: &Path,
    auth: &Path,
    log: &Path,
    ready_fd: i32,
    extra: &[String],
) -> Result<Child, X11Error> {
    let log = File::create(log).map_err(xvfb_error)?;
    let mut cmd = Command::new(exe);
    cmd.arg("-displayfd")
        .arg(ready_fd.to_string())
        .args(["-nolisten", "tcp", "-auth"])
        .arg(auth);
    if !extra.iter().any(|a| a == "-screen") {
        cmd.args(DEFAULT_SCREEN);
    }
    cmd.args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log));
    // SAFETY: only async-signal-safe calls between fork and exec: keep the readiness pipe open
    // across exec, and die with latscope.
    unsafe {
        cmd.pre_exec(move || {
            libc::fcntl(ready_fd, libc::F_SETFD, 0);
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
    cmd.spawn()
        .map_err(|e| xvfb_error(format!("{}: {e}", exe.display())))
}

/// The process at the other end of a Unix socket.
fn peer_pid(fd: i32) -> Option<u32> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: SO_PEERCRED fills a ucred of the length given.
    let ok = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    } == 0;
    (ok && cred.pid > 0).then_some(cred.pid as u32)
}

impl Server {
    /// The server named by `display` or `$DISPLAY`, or else a private Xvfb started with
    /// `xvfb_args`. Every wait on the connection is limited to `timeout` (`--timeout`).
    pub fn open(
        display: Option<&str>,
        xvfb_args: &[String],
        timeout: Duration,
        cancel: &Cancel,
    ) -> Result<Server, X11Error> {
        let named = display
            .map(str::to_string)
            .or_else(|| std::env::var("DISPLAY").ok().filter(|d| !d.is_empty()));
        match named {
            Some(name) => {
                let (stream, auth, screen) = open_stream(Some(&name))?;
                let conn = connect_guarded(stream, auth, screen, timeout)
                    .map_err(|e| name_display(e, &name))?;
                Server::new(conn, screen, name, None)
            }
            None => {
                let xvfb = Xvfb::start(xvfb_args, cancel)?;
                let conn = xvfb.connect(timeout)?;
                Server::new(conn, 0, xvfb.display(), Some(xvfb))
            }
        }
    }

    fn new(
        conn: Conn,
        screen: usize,
        display: String,
        xvfb: Option<Xvfb>,
    ) -> Result<Server, X11Error> {
        let info = describe(&conn, screen, display, xvfb.is_some())?;
        Ok(Server {
            conn,
            screen,
            info,
            xvfb,
        })
    }

    /// `DISPLAY` and, for a private Xvfb, `XAUTHORITY`: what another client of this server
    /// (a D-Bus backend, x11perf) needs in its environment.
    pub fn client_env(&self) -> Vec<(String, String)> {
        let mut env = vec![("DISPLAY".to_string(), self.info.display.clone())];
        if let Some(x) = &self.xvfb {
            env.push((
                "XAUTHORITY".to_string(),
                x.auth_file().display().to_string(),
            ));
        }
        env
    }

    /// A second connection to the same server, the lab's own request path (see [`Wire`]);
    /// every wait on it is limited to `timeout`.
    pub fn wire(&self, timeout: Duration) -> Result<Wire, X11Error> {
        let display = &self.info.display;
        match &self.xvfb {
            Some(x) => Wire::connect(
                x.socket()?.into(),
                b"MIT-MAGIC-COOKIE-1".to_vec(),
                x.cookie.to_vec(),
                timeout,
            )
            .map(|(wire, _)| wire),
            None => connect_wire(Some(display), timeout).map(|(wire, ..)| wire),
        }
        .map_err(|e| name_display(e, display))
    }

    /// The root window of the screen in use.
    pub fn root(&self) -> u32 {
        self.conn.setup().roots[self.screen].root
    }

    /// Whether the server process is gone, or goes within `wait`: a broken connection is seen
    /// before the dying server has left `/proc`.
    pub fn gone_within(&self, wait: Duration) -> bool {
        let deadline = Instant::now() + wait;
        loop {
            if !self.alive() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Whether the server process still runs (always true when its id is unknown): not gone
    /// from `/proc`, and not a zombie waiting for its parent.
    pub fn alive(&self) -> bool {
        self.info.pid.is_none_or(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                let state = stat
                    .rsplit_once(')')
                    .and_then(|(_, rest)| rest.trim().chars().next());
                !matches!(state, Some('Z' | 'X') | None)
            })
        })
    }
}

/// An authorization: its name (`MIT-MAGIC-COOKIE-1`) and data.
type Auth = (Vec<u8>, Vec<u8>);

/// A socket to the server `display` names (`None`: `$DISPLAY`), the authorization Xlib would
/// present (`$XAUTHORITY` or `~/.Xauthority`), as x11rb's `RustConnection::connect` finds
/// them, and the screen the name asks for.
fn open_stream(display: Option<&str>) -> Result<(DefaultStream, Auth, usize), X11Error> {
    use x11rb::reexports::x11rb_protocol::{parse_display, xauth};
    let name = display.map(str::to_string).unwrap_or_default();
    let connect_error = |reason: String| X11Error::Connect {
        display: name.clone(),
        reason,
    };
    let parsed = parse_display::parse_display(display).map_err(|e| connect_error(e.to_string()))?;
    // A display that is a socket's path (`/path/X0`, `unix:/path/X0`, as libxcb takes it):
    // x11rb parses it but connects to display 0's socket instead.
    let path =
        (parsed.protocol.as_deref() == Some("unix") && parsed.host.starts_with('/')).then(|| {
            UnixStream::connect(&parsed.host)
                .and_then(DefaultStream::from_unix_stream)
                .map_err(|e| connect_error(format!("{}: {e}", parsed.host)))
        });
    if let Some(opened) = path {
        let (stream, (family, address)) = opened?;
        let auth = xauth::get_auth(family, &address, parsed.display)
            .ok()
            .flatten()
            .unwrap_or_default();
        return Ok((stream, auth, usize::from(parsed.screen)));
    }
    let mut last = None;
    for addr in parsed.connect_instruction() {
        match DefaultStream::connect(&addr) {
            Ok((stream, (family, address))) => {
                let auth = xauth::get_auth(family, &address, parsed.display)
                    .ok()
                    .flatten()
                    .unwrap_or_default();
                return Ok((stream, auth, usize::from(parsed.screen)));
            }
            Err(e) => last = Some(e.to_string()),
        }
    }
    Err(connect_error(
        last.unwrap_or_else(|| "no address to connect to".into()),
    ))
}

/// x11rb's connection on `stream` under a [`Guarded`] stream: the setup is the first exchange.
fn connect_guarded(
    stream: DefaultStream,
    (auth_name, auth_data): Auth,
    screen: usize,
    timeout: Duration,
) -> Result<Conn, X11Error> {
    let stream = Guarded::new(stream, timeout);
    let watch = stream.watch();
    let conn =
        RustConnection::connect_to_stream_with_auth_info(stream, screen, auth_name, auth_data)
            .map_err(|e| {
                watch.violation().unwrap_or_else(|| X11Error::Connect {
                    display: String::new(),
                    reason: e.to_string(),
                })
            })?;
    conn.stream().done();
    Ok(conn)
}

/// A [`Wire`] to the server `display` names (`None`: `$DISPLAY`), authorized as Xlib would be.
/// Returns the connection, the server's setup and the screen the name asks for.
pub fn connect_wire(
    display: Option<&str>,
    timeout: Duration,
) -> Result<(Wire, Setup, usize), X11Error> {
    let (stream, (auth_name, auth_data), screen) = open_stream(display)?;
    let (wire, setup) = Wire::connect(OwnedFd::from(stream), auth_name, auth_data, timeout)?;
    Ok((wire, setup, screen))
}

fn name_display(e: X11Error, display: &str) -> X11Error {
    match e {
        X11Error::Connect { reason, .. } => X11Error::Connect {
            display: display.to_string(),
            reason,
        },
        other => other,
    }
}

/// The largest `ListExtensions` reply: up to 255 names of up to 255 bytes, each after its length.
const LIST_EXTENSIONS_MAX: usize = 32 + 255 * 256;

fn describe(
    conn: &Conn,
    screen: usize,
    display: String,
    private_xvfb: bool,
) -> Result<ServerInfo, X11Error> {
    let setup = conn.setup();
    let root = &setup.roots[screen];
    let names = exchange(conn, LIST_EXTENSIONS_MAX, |c| c.list_extensions()?.reply())?;
    let mut extensions: Vec<String> = names
        .names
        .into_iter()
        .map(|n| String::from_utf8_lossy(&n.name).into_owned())
        .collect();
    extensions.sort();
    let has = |name: &'static str| exchange(conn, SMALL_REPLY, |c| c.extension_information(name));
    // A server that refuses a version query is described without it.
    let shm = match has(x11rb::protocol::shm::X11_EXTENSION_NAME)? {
        Some(_) => exchange(conn, SMALL_REPLY, |c| c.shm_query_version()?.reply())
            .map(Some)
            .or_else(keep_violation)?
            .map(|r| (r.major_version, r.minor_version)),
        None => None,
    };
    let randr = match has(x11rb::protocol::randr::X11_EXTENSION_NAME)? {
        Some(_) => exchange(conn, SMALL_REPLY, |c| c.randr_query_version(1, 6)?.reply())
            .map(Some)
            .or_else(keep_violation)?
            .map(|r| (r.major_version, r.minor_version)),
        None => None,
    };
    let max_request_bytes = exchange(conn, SMALL_REPLY, |c| {
        Ok::<_, X11Error>(c.maximum_request_bytes() as u64)
    })?;
    Ok(ServerInfo {
        display,
        vendor: String::from_utf8_lossy(&setup.vendor).into_owned(),
        release: setup.release_number,
        private_xvfb,
        extensions,
        max_request_bytes,
        shm,
        randr,
        pid: peer_pid(conn.stream().as_raw_fd()),
        root: (root.root_depth, root.width_in_pixels, root.height_in_pixels),
    })
}

/// An optional answer: a refusal is `None`, a broken connection or server is still an error.
fn keep_violation<T>(e: X11Error) -> Result<Option<T>, X11Error> {
    match e {
        X11Error::Protocol(_) => Ok(None),
        other => Err(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_authorization_file_has_one_wild_entry_with_the_cookie() {
        let cookie = [7u8; 16];
        let bytes = xauthority(&cookie);
        // family 0xffff, empty address, empty number, the name, the cookie
        let mut expected = vec![0xff, 0xff, 0, 0, 0, 0, 0, 18];
        expected.extend_from_slice(b"MIT-MAGIC-COOKIE-1");
        expected.extend_from_slice(&[0, 16]);
        expected.extend_from_slice(&cookie);
        assert_eq!(bytes, expected);
    }
}
