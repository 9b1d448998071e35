//! Which compositor the lab talks to: `--display`, else `$WAYLAND_DISPLAY`, else a private
//! weston headless that latscope starts and stops.
//!
//! The private weston gets its own `XDG_RUNTIME_DIR`, a fresh 0700 directory under a random
//! name (see [`crate::files`]), so its socket can neither collide with nor be taken over by
//! anything else on the machine. It runs in its own process group (weston starts helper clients
//! such as `weston-desktop-shell`), dies with latscope (`PR_SET_PDEATHSIG`) and is stopped —
//! SIGTERM, then SIGKILL after [`STOP_PATIENCE`] — when [`Weston`] is dropped, on every path
//! out of a run, error or Ctrl-C included.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::LabError;
use crate::files::{self, PrivateDir};

/// The Debian package with weston.
pub const PACKAGE: &str = "weston";
/// How long weston may take to create its socket.
pub const STARTUP: Duration = Duration::from_secs(15);
/// How long weston may take to exit after SIGTERM.
pub const STOP_PATIENCE: Duration = Duration::from_secs(3);
/// The socket name of a private weston (inside its private runtime directory).
pub const SOCKET: &str = "latscope-0";

/// Where the compositor is, and whether latscope started it.
#[derive(Debug)]
pub struct Compositor {
    /// the socket's path
    pub socket: PathBuf,
    /// how it was chosen: `--display NAME`, `$WAYLAND_DISPLAY=NAME` or `private weston headless`
    pub origin: String,
    /// the private weston, stopped when this is dropped
    pub weston: Option<Weston>,
}

/// The socket path of a display name: an absolute path as it is, else under the runtime dir.
pub fn socket_path(name: &str, runtime_dir: Option<OsString>) -> Result<PathBuf, LabError> {
    let path = Path::new(name);
    if path.is_absolute() {
        return Ok(path.to_path_buf());
    }
    let dir = runtime_dir.ok_or_else(|| {
        LabError::Setup(format!(
            "display {name}: XDG_RUNTIME_DIR is not set, so its socket cannot be found (give --display an absolute path)"
        ))
    })?;
    Ok(PathBuf::from(dir).join(name))
}

/// The compositor to use: `display`, else `$WAYLAND_DISPLAY`, else a private weston.
pub fn find(display: Option<&str>) -> Result<Compositor, LabError> {
    let runtime = std::env::var_os("XDG_RUNTIME_DIR");
    if let Some(name) = display {
        return Ok(Compositor {
            socket: socket_path(name, runtime)?,
            origin: format!("--display {name}"),
            weston: None,
        });
    }
    if let Some(name) = std::env::var("WAYLAND_DISPLAY")
        .ok()
        .filter(|n| !n.is_empty())
    {
        return Ok(Compositor {
            socket: socket_path(&name, runtime)?,
            origin: format!("$WAYLAND_DISPLAY={name}"),
            weston: None,
        });
    }
    let weston = Weston::start()?;
    Ok(Compositor {
        socket: weston.socket.clone(),
        origin: "private weston headless".into(),
        weston: Some(weston),
    })
}

/// Finds a program on `PATH`.
pub fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// A private weston headless, stopped when dropped.
#[derive(Debug)]
pub struct Weston {
    child: Child,
    socket: PathBuf,
    dir: PrivateDir,
}

impl Weston {
    /// Starts weston headless (pixman renderer) in a private runtime directory and waits for
    /// its socket; the error names the package when weston is not installed.
    pub fn start() -> Result<Weston, LabError> {
        let program = find_program("weston").ok_or(LabError::NoCompositor)?;
        let setup = |what: &str, e: std::io::Error| LabError::Setup(format!("{what}: {e}"));
        let dir =
            files::private_dir("latscope-wl-").map_err(|e| setup("private runtime dir", e))?;
        let log = dir.path().join("weston.log");
        let mut command = Command::new(&program);
        command
            .args([
                "--backend=headless-backend.so",
                "--idle-time=0",
                "--no-config",
            ])
            .arg("--use-pixman")
            .arg(format!("--socket={SOCKET}"))
            .arg(format!("--log={}", log.display()))
            .env("XDG_RUNTIME_DIR", dir.path())
            .env_remove("WAYLAND_DISPLAY")
            .env_remove("WAYLAND_DEBUG")
            .env_remove("DISPLAY")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            command.pre_exec(|| {
                libc::setpgid(0, 0);
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                // Ctrl-C goes to latscope, which stops weston itself after printing.
                libc::signal(libc::SIGINT, libc::SIG_IGN);
                Ok(())
            });
        }
        let child = command
            .spawn()
            .map_err(|e| setup(&format!("cannot start {}", program.display()), e))?;
        let mut weston = Weston {
            child,
            socket: dir.path().join(SOCKET),
            dir,
        };
        weston.wait_for_socket()?;
        Ok(weston)
    }

    fn wait_for_socket(&mut self) -> Result<(), LabError> {
        let deadline = Instant::now() + STARTUP;
        while Instant::now() < deadline {
            if self.socket.exists() {
                return Ok(());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(LabError::Setup(format!(
                    "weston exited ({status}) before creating its socket{}",
                    self.log_tail()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(LabError::Setup(format!(
            "weston did not create its socket within {} s{}",
            STARTUP.as_secs(),
            self.log_tail()
        )))
    }

    /// The last lines of weston's log, for error messages.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.path().join("weston.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().rev().take(8).collect();
        if lines.is_empty() {
            return String::new();
        }
        let tail: Vec<&str> = lines.into_iter().rev().collect();
        format!("; its log ends:\n  {}", tail.join("\n  "))
    }

    /// weston's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The private runtime directory.
    pub fn runtime_dir(&self) -> &Path {
        self.dir.path()
    }

    /// Whether weston is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Weston {
    fn drop(&mut self) {
        let pgid = self.child.id() as libc::pid_t;
        // SAFETY: signalling the process group of our own child.
        unsafe { libc::kill(-pgid, libc::SIGTERM) };
        let deadline = Instant::now() + STOP_PATIENCE;
        while Instant::now() < deadline {
            if !matches!(self.child.try_wait(), Ok(None)) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        // SAFETY: as above; whatever is left of the group (helper clients) goes too.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_display_name_is_found_in_the_runtime_dir_and_a_path_is_kept() {
        let dir = Some(OsString::from("/run/user/7"));
        assert_eq!(
            socket_path("wayland-1", dir.clone()).unwrap(),
            PathBuf::from("/run/user/7/wayland-1")
        );
        assert_eq!(
            socket_path("/run/user/7/nested/sock", None).unwrap(),
            PathBuf::from("/run/user/7/nested/sock")
        );
        let e = socket_path("wayland-1", None).unwrap_err().to_string();
        assert!(e.contains("XDG_RUNTIME_DIR"), "{e}");
    }
}
