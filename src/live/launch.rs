//! Starting the traced command held before its first instruction, so that the probes are
//! attached before it runs, and bpftrace can be given its pid (and the pids it forks) instead
//! of starting the command itself.
//!
//! bpftrace's own `-c` runs only an ELF binary, splits its argument at spaces, and filters on
//! that one process; a shell script's children, a `PATH` look-up or an argument with a space
//! were out of reach. Here latscope forks: the child puts itself in its own process group,
//! asks to be killed if latscope dies, sends its standard output to standard error (standard
//! output is latscope's report), and blocks reading a pipe. [`Held::release`] writes one byte
//! and the child calls `execve`; if that fails, the child writes `errno` to a second,
//! close-on-exec pipe, so the caller learns of it. Only async-signal-safe calls run between
//! `fork` and `execve`: everything they need is prepared before the fork.

use std::ffi::{CString, OsStr};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Why a command cannot be started.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// Not on PATH, or no such file.
    #[error("cannot start '{0}': not found (give a path, or a command on PATH)")]
    NotFound(String),
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
    release: libc::c_int,
    errors: libc::c_int,
    command: String,
}

fn cstring(bytes: &[u8]) -> Result<CString, LaunchError> {
    CString::new(bytes).map_err(|_| LaunchError::Nul)
}

fn pipe() -> io::Result<[libc::c_int; 2]> {
    let mut fds = [0; 2];
    // SAFETY: fds has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fds)
}

/// Forks `argv` (its program already [`resolve`]d to `path`), held until [`Held::release`].
pub fn spawn_held(path: &Path, argv: &[String]) -> Result<Held, LaunchError> {
    let command = argv.join(" ");
    let io_error = |source| LaunchError::Io {
        command: command.clone(),
        source,
    };
    let program = cstring(path.as_os_str().as_bytes())?;
    let args: Vec<CString> = argv
        .iter()
        .map(|a| cstring(a.as_bytes()))
        .collect::<Result<_, _>>()?;
    let env: Vec<CString> = std::env::vars_os()
        .map(|(k, v)| {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(OsStr::as_bytes(&v));
            cstring(&kv)
        })
        .collect::<Result<_, _>>()?;
    let mut arg_ptrs: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    arg_ptrs.push(std::ptr::null());
    let mut env_ptrs: Vec<*const libc::c_char> = env.iter().map(|e| e.as_ptr()).collect();
    env_ptrs.push(std::ptr::null());
    let null = std::fs::File::open("/dev/null").map_err(io_error)?;
    let [gate_read, gate_write] = pipe().map_err(io_error)?;
    let [err_read, err_write] = match pipe() {
        Ok(fds) => fds,
        Err(e) => {
            // SAFETY: closing the two descriptors made above.
            unsafe {
                libc::close(gate_read);
                libc::close(gate_write);
            }
            return Err(io_error(e));
        }
    };
    // SAFETY: the child only makes async-signal-safe calls on data prepared above, then
    // execs or _exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        let e = io::Error::last_os_error();
        // SAFETY: closing the four descriptors made above.
        unsafe {
            for fd in [gate_read, gate_write, err_read, err_write] {
                libc::close(fd);
            }
        }
        return Err(io_error(e));
    }
    if pid == 0 {
        // SAFETY: in the child: see the module documentation.
        unsafe {
            libc::close(gate_write);
            libc::close(err_read);
            child(
                [gate_read, err_write, std::os::fd::AsRawFd::as_raw_fd(&null)],
                &program,
                &arg_ptrs,
                &env_ptrs,
            )
        };
    }
    // SAFETY: closing the child's ends, which this process no longer needs; setpgid mirrors
    // the child's own call so the group exists whichever runs first.
    unsafe {
        libc::close(gate_read);
        libc::close(err_write);
        libc::setpgid(pid, pid);
    }
    Ok(Held {
        pid: pid as u32,
        release: gate_write,
        errors: err_read,
        command,
    })
}

/// The child between `fork` and `execve`.
unsafe fn child(
    [gate, errors, null]: [libc::c_int; 3],
    program: &CString,
    argv: &[*const libc::c_char],
    envp: &[*const libc::c_char],
) -> ! {
    // SAFETY: each call is async-signal-safe and takes valid pointers prepared before fork.
    unsafe {
        libc::setpgid(0, 0);
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        // Rust ignores SIGPIPE; a program expects the default. In its own process group the
        // command is in the background of a terminal: it reads nothing from it (as under
        // bpftrace -c), and changing its modes must not stop it.
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::signal(libc::SIGTTOU, libc::SIG_IGN);
        libc::dup2(null, 0);
        libc::dup2(2, 1);
        let mut byte = 0u8;
        loop {
            let n = libc::read(gate, (&mut byte as *mut u8).cast(), 1);
            if n == 1 {
                break;
            }
            if n == 0 || *libc::__errno_location() != libc::EINTR {
                // latscope went away without releasing: do not run.
                libc::_exit(127);
            }
        }
        libc::execve(program.as_ptr(), argv.as_ptr(), envp.as_ptr());
        let errno = *libc::__errno_location();
        libc::write(errors, (&errno as *const i32).cast(), 4);
        libc::_exit(127);
    }
}

impl Held {
    /// Lets the command run; returns once it has called `execve`, with its error if that
    /// failed.
    pub fn release(self) -> Result<u32, LaunchError> {
        let byte = 1u8;
        // SAFETY: one byte from this stack frame to the pipe this struct owns.
        unsafe { libc::write(self.release, (&byte as *const u8).cast(), 1) };
        let mut errno = 0i32;
        let n = loop {
            // SAFETY: reads at most 4 bytes into `errno`.
            let n = unsafe { libc::read(self.errors, (&mut errno as *mut i32).cast(), 4) };
            if n >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                break n;
            }
        };
        let (pid, command) = (self.pid, self.command.clone());
        drop(self);
        if n == 4 {
            let mut status = 0;
            // SAFETY: reaps our own child, which _exits after a failed execve.
            unsafe { libc::waitpid(pid as i32, &mut status, 0) };
            return Err(LaunchError::Io {
                command,
                source: io::Error::from_raw_os_error(errno),
            });
        }
        Ok(pid)
    }

    /// Ends the held command without running it.
    pub fn abandon(self) {
        let pid = self.pid;
        drop(self);
        // Closing the gate makes the child _exit; reap it.
        let mut status = 0;
        // SAFETY: waits for our own child.
        unsafe { libc::waitpid(pid as i32, &mut status, 0) };
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // SAFETY: closing the two descriptors this struct owns.
        unsafe {
            libc::close(self.release);
            libc::close(self.errors);
        }
    }
}

/// Sends `signal` to the command's process group (it and whatever it started there).
pub fn signal_group(pid: u32, signal: libc::c_int) {
    // SAFETY: kill has no memory-safety preconditions; a negative pid names the group.
    unsafe { libc::kill(-(pid as i32), signal) };
}

/// Waits for the command; its exit status as a shell reports it (128 + signal).
pub fn wait(pid: u32) -> Option<i32> {
    let mut status = 0;
    loop {
        // SAFETY: waits for our own child, writing its status into `status`.
        let rc = unsafe { libc::waitpid(pid as i32, &mut status, 0) };
        if rc == pid as i32 {
            break;
        }
        if rc < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        return None;
    }
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
