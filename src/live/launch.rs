//! Starting the traced command held before its first instruction, so that the probes are
//! attached before it runs, and bpftrace can be given its pid (and the pids it forks) instead
//! of starting the command itself.
//!
//! bpftrace's own `-c` runs only an ELF binary, splits its argument at spaces, and filters on
//! that one process; a shell script's children, a `PATH` look-up or an argument with a space
//! were out of reach. Here latscope forks ([`crate::process`]): the child puts itself in its own
//! process group, asks to be killed (SIGTERM) if latscope dies, unblocks every signal, reads
//! standard input from `/dev/null`, sends its standard output to standard error (standard
//! output is latscope's report), and waits at the gate. [`Held::release`] lets it call `execve`
//! and returns with the exec's error, if any.

use std::ffi::OsStr;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::process::{self, Program, Setup};

/// Why a command cannot be started.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// Not on PATH, or no such file.
    #[error("cannot start '{0}': not found (give a path, or a command on PATH)")]
    NotFound(String),
    /// A directory, named by its path.
    #[error("cannot start '{0}': it is a directory, not a program")]
    Directory(String),
    /// The file is not executable.
    #[error("cannot start '{0}': not executable (chmod +x it, or run it through its interpreter)")]
    NotExecutable(String),
    /// Neither an ELF binary nor a script with `#!`.
    #[error(
        "cannot start '{0}': it is neither a program nor a script starting with #! (run it as `-- /bin/sh {0}`)"
    )]
    NoInterpreter(String),
    /// An argument holds a NUL byte.
    #[error("an argument holds a NUL byte")]
    Nul,
    /// fork, pipe or execve failed.
    #[error("starting '{command}': {source}")]
    Io {
        /// the command
        command: String,
        /// the error
        source: io::Error,
    },
}

/// Finds `name` on PATH (or takes it as a path when it contains a `/`).
pub fn which(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        return Path::new(name).is_file().then(|| PathBuf::from(name));
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The file that `argv[0]` runs, checked: it exists, is executable, and is an ELF binary or a
/// script with `#!` (which `execve` runs; without `#!` it fails with ENOEXEC).
pub fn resolve(argv0: &str) -> Result<PathBuf, LaunchError> {
    if process::directory_error(argv0).is_some() {
        return Err(LaunchError::Directory(argv0.to_string()));
    }
    let path = which(argv0).ok_or_else(|| LaunchError::NotFound(argv0.to_string()))?;
    if !is_executable(&path) {
        return Err(LaunchError::NotExecutable(argv0.to_string()));
    }
    let mut head = [0u8; 4];
    let n = std::fs::File::open(&path)
        .and_then(|mut f| io::Read::read(&mut f, &mut head))
        .unwrap_or(0);
    let head = &head[..n];
    if head.starts_with(b"\x7fELF") || head.starts_with(b"#!") {
        Ok(path)
    } else {
        Err(LaunchError::NoInterpreter(argv0.to_string()))
    }
}

/// A forked command, waiting before `execve`.
#[derive(Debug)]
pub struct Held {
    /// its pid (also its process group)
    pub pid: u32,
    held: process::Held,
    command: String,
}

/// Forks `argv` (its program already [`resolve`]d to `path`), held until [`Held::release`].
pub fn spawn_held(path: &Path, argv: &[String]) -> Result<Held, LaunchError> {
    let command = argv.join(" ");
    // The only error a program can have before the fork: a NUL byte (the environment has
    // none, being C strings already).
    let program = Program::at(path, argv)
        .and_then(|p| {
            p.with_environment(std::env::vars_os().map(|(k, v)| {
                let mut kv = k.as_bytes().to_vec();
                kv.push(b'=');
                kv.extend_from_slice(OsStr::as_bytes(&v));
                kv
            }))
        })
        .map_err(|_| LaunchError::Nul)?;
    let io_error = |source| LaunchError::Io {
        command: command.clone(),
        source,
    };
    let null = std::fs::File::open("/dev/null").map_err(io_error)?;
    let stderr = io::stderr();
    let mut setup = Setup::new();
    setup
        .own_group()
        .death_signal(libc::SIGTERM)
        .clear_signal_mask()
        // Rust ignores SIGPIPE; a program expects the default. In its own process group the
        // command is in the background of a terminal: it reads nothing from it (as under
        // bpftrace -c), and changing its modes must not stop it.
        .default_signal(libc::SIGPIPE)
        .ignore_signal(libc::SIGTTOU)
        .dup(null.as_fd(), 0)
        .dup(stderr.as_fd(), 1);
    let held = program.hold(&setup).map_err(io_error)?;
    Ok(Held {
        pid: held.pid() as u32,
        held,
        command,
    })
}

impl Held {
    /// Lets the command run; returns once it has called `execve`, with its error if that
    /// failed.
    pub fn release(self) -> Result<u32, LaunchError> {
        let Held { held, command, .. } = self;
        held.release()
            .map(|pid| pid as u32)
            .map_err(|source| LaunchError::Io { command, source })
    }

    /// Ends the held command without running it.
    pub fn abandon(self) {
        self.held.abandon();
    }

    /// Ends the held command without running it, for `source`: the error that says so.
    pub fn fail(self, source: io::Error) -> LaunchError {
        let command = self.command.clone();
        self.abandon();
        LaunchError::Io { command, source }
    }
}

/// Sends `signal` to the command's process group (it and whatever it started there).
pub fn signal_group(pid: u32, signal: libc::c_int) {
    let _ = process::kill_group(pid as process::Pid, signal);
}

/// Whether no process is left in the command's group. Its members that latscope reaps (the
/// orphans it adopts, [`process::reap_orphans_here`]) are reaped first, but only once
/// `leader_reaped`: a sweep before could take the leader's status from its own waiter.
pub fn group_ended(pid: u32, leader_reaped: bool) -> bool {
    if !leader_reaped {
        return false;
    }
    process::sweep_group(pid as process::Pid);
    process::kill_group(pid as process::Pid, 0).is_err()
}

/// Kills what is left of the command's group and reaps it, for at most a second; only once
/// its leader has been reaped.
pub fn reap_group(pid: u32) {
    process::reap_group(pid as process::Pid);
}

/// Waits for the command; its exit status as a shell reports it (128 + signal).
pub fn wait(pid: u32) -> Option<i32> {
    let (status, _) = process::wait(pid as process::Pid).ok()?;
    if libc::WIFEXITED(status) {
        Some(libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        Some(128 + libc::WTERMSIG(status))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_command_does_not_run_until_released() {
        let dir = tempfile::tempdir().unwrap();
        let mark = dir.path().join("ran");
        let script = format!("touch '{}'", mark.display());
        let argv: Vec<String> = ["sh", "-c", &script].map(String::from).to_vec();
        let held = spawn_held(&resolve("sh").unwrap(), &argv).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(!mark.exists(), "ran before release");
        let pid = held.release().unwrap();
        assert_eq!(wait(pid), Some(0));
        assert!(mark.exists());
    }

    #[test]
    fn scripts_without_a_shebang_and_missing_commands_are_refused_before_forking() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("noshebang");
        std::fs::write(&script, "echo hi\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let e = resolve(script.to_str().unwrap()).unwrap_err();
        assert!(matches!(e, LaunchError::NoInterpreter(_)), "{e}");
        assert!(e.to_string().contains("-- /bin/sh"), "{e}");
        assert!(matches!(
            resolve("no-such-command-latscope"),
            Err(LaunchError::NotFound(_))
        ));
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(
            resolve(script.to_str().unwrap()),
            Err(LaunchError::NotExecutable(_))
        ));
        let e = resolve(dir.path().to_str().unwrap()).unwrap_err();
        assert!(matches!(e, LaunchError::Directory(_)), "{e}");
        assert!(
            e.to_string().ends_with("it is a directory, not a program"),
            "{e}"
        );
    }

    #[test]
    fn an_abandoned_command_never_runs() {
        let dir = tempfile::tempdir().unwrap();
        let mark = dir.path().join("ran");
        let script = format!("touch '{}'", mark.display());
        let argv: Vec<String> = ["sh", "-c", &script].map(String::from).to_vec();
        spawn_held(&resolve("sh").unwrap(), &argv)
            .unwrap()
            .abandon();
        assert!(!mark.exists());
    }
}
