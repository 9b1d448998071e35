//! Running one command and measuring it, two ways:
//!
//! * **timed runs** (no counters): `posix_spawnp` (a `vfork`-style clone in glibc, so the cost
//!   does not grow with latscope's memory) and `wait4` for the exit status and resource usage.
//!   The wall time runs from the spawn to the exit, as hyperfine measures. Nothing is attached
//!   to the child, so nothing slows it down: these are the runs the verdict is computed from.
//! * **counted runs**: fork, open the counters on the child while it waits at a gate, release it
//!   into `execvp`. `std::process::Command` cannot do this: its `spawn` returns only after the
//!   exec, and the counters must be attached before it (with `enable_on_exec`) to count from the
//!   first instruction without counting latscope's own fork. Inherited counters make every fork,
//!   exit and context switch of the child dearer (7.6% on `true`), so their wall time is kept
//!   apart and never enters a verdict on wall time.
//!
//! Each run is the leader of a process group of its own: a timeout or a cancel (Ctrl-C,
//! SIGTERM) kills the whole group, so a shell's children go with it, and reaps what was ours to
//! reap. (Killing only the shell, as before, left a `sleep` it had started running, reparented
//! to init.) For that the benchmark should make latscope a child subreaper
//! ([`reap_orphans_here`]): orphans of a killed group then come back to latscope, which reaps
//! them, instead of to init.
//!
//! The wait for a run's exit polls a pidfd, waking every 5 ms to look at the cancel flag and
//! the timeout: a watchdog thread per run (the fallback without pidfds) added 250 µs to the
//! median wall time of `true` (550 µs), the pidfd about 20 µs.
//!
//! A command is [`Prepared`] once (its argv and stream paths as C strings) and run many times:
//! a run allocates nothing that grows with the number of runs.

use std::ffi::CString;
use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::counters::{self, Counter, Event};
use crate::doc::run::RunMeasure;
use crate::ingest::Cancel;

/// How runs failed, for a report: `2 of 4 runs failed (exit 3 ×2)`; `None` when none did.
pub fn failures(runs: &[RunMeasure]) -> Option<String> {
    let mut kinds: Vec<(String, usize)> = Vec::new();
    for r in runs.iter().filter(|r| r.failed()) {
        let kind = match (r.timed_out, r.exit_code) {
            (true, _) => "timed out".to_string(),
            (false, Some(code)) => format!("exit {code}"),
            (false, None) => "killed by a signal".to_string(),
        };
        match kinds.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, n)) => *n += 1,
            None => kinds.push((kind, 1)),
        }
    }
    let failed: usize = kinds.iter().map(|(_, n)| n).sum();
    (failed > 0).then(|| {
        let kinds: Vec<String> = kinds.iter().map(|(k, n)| format!("{k} ×{n}")).collect();
        format!(
            "{failed} of {} runs failed ({})",
            runs.len(),
            kinds.join(", ")
        )
    })
}

/// Why a command could not be run.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The program does not exist or cannot be executed.
    #[error("cannot run '{program}': {reason}")]
    Exec {
        /// program name
        program: String,
        /// the exec error (not a `source`: it is already in the message)
        reason: io::Error,
    },
    /// fork, pipe or wait failed.
    #[error("cannot start a process: {0}")]
    System(#[from] io::Error),
    /// The run was cancelled (Ctrl-C, SIGTERM): its process group was killed and reaped.
    #[error("interrupted")]
    Cancelled,
}

/// When a run is stopped: its time limit and the cancel flag it obeys.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stops<'a> {
    /// kill the run after this long
    pub timeout: Option<Duration>,
    /// kill the run once this is raised
    pub cancel: Option<&'a Cancel>,
}

/// Makes this process the reaper of its descendants' orphans (`PR_SET_CHILD_SUBREAPER`), so
/// that the children of a killed process group are reaped here rather than by init.
pub fn reap_orphans_here() {
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
}

/// Where a run's output goes (hyperfine's `--output`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Output {
    /// `/dev/null` (stdout and stderr)
    #[default]
    Null,
    /// a pipe that latscope reads and discards (what a program writing to a terminal or a
    /// consumer pays for its writes)
    Pipe,
    /// latscope's own stdout and stderr
    Inherit,
    /// stdout truncated into this file before every run; stderr to `/dev/null`
    File(PathBuf),
}

/// A run's standard streams: `--input` (stdin from a file, else `/dev/null`) and `--output`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Io {
    /// stdin from this file
    pub input: Option<PathBuf>,
    /// where stdout and stderr go
    pub output: Output,
}

/// Opened counters and the events that could not be opened (with the reason).
pub type Opened = (Vec<(String, Counter)>, Vec<(String, String)>);

fn cstring(text: &[u8]) -> io::Result<CString> {
    CString::new(text).map_err(|_| io::Error::other("argument or path contains a NUL byte"))
}

fn path_c(path: &std::path::Path) -> io::Result<CString> {
    use std::os::unix::ffi::OsStrExt;
    cstring(path.as_os_str().as_bytes())
}

unsafe extern "C" {
    static environ: *const *mut libc::c_char;
}

/// A command ready to run many times: argv and stream paths converted once.
pub struct Prepared {
    args: Vec<CString>,
    pointers: Vec<*mut libc::c_char>,
    stdin: CString,
    stdout: Option<CString>,
    pipe_output: bool,
    /// the run's own environment (`NAME=value`, NULL-terminated pointers); `None`: latscope's
    env: Option<(Vec<CString>, Vec<*mut libc::c_char>)>,
}

impl Prepared {
    /// Prepares `argv` with its streams set by `io`.
    pub fn new(argv: &[String], io: &Io) -> Result<Prepared, SpawnError> {
        if argv.is_empty() {
            return Err(SpawnError::Exec {
                program: String::new(),
                reason: io::Error::other("empty command"),
            });
        }
        let args = argv
            .iter()
            .map(|a| cstring(a.as_bytes()))
            .collect::<io::Result<Vec<_>>>()?;
        let mut pointers: Vec<*mut libc::c_char> =
            args.iter().map(|a| a.as_ptr().cast_mut()).collect();
        pointers.push(std::ptr::null_mut());
        let stdin = match &io.input {
            Some(p) => path_c(p)?,
            None => cstring(b"/dev/null")?,
        };
        let stdout = match &io.output {
            Output::Null | Output::Pipe => Some(cstring(b"/dev/null")?),
            Output::Inherit => None,
            Output::File(p) => Some(path_c(p)?),
        };
        Ok(Prepared {
            args,
            pointers,
            stdin,
            stdout,
            pipe_output: io.output == Output::Pipe,
            env: None,
        })
    }

    /// The same command run with exactly this environment (`NAME=value` entries) instead of
    /// latscope's (`bench --layouts` pads it).
    pub fn with_environment(mut self, entries: Vec<Vec<u8>>) -> Result<Prepared, SpawnError> {
        let strings = entries
            .iter()
            .map(|e| cstring(e))
            .collect::<io::Result<Vec<_>>>()?;
        let mut pointers: Vec<*mut libc::c_char> =
            strings.iter().map(|e| e.as_ptr().cast_mut()).collect();
        pointers.push(std::ptr::null_mut());
        self.env = Some((strings, pointers));
        Ok(self)
    }

    /// The environment a run gets.
    fn envp(&self) -> *const *mut libc::c_char {
        match &self.env {
            Some((_, pointers)) => pointers.as_ptr(),
            // SAFETY: reading the address held by libc's `environ`.
            None => unsafe { environ },
        }
    }

    fn program(&self) -> String {
        self.args[0].to_string_lossy().into_owned()
    }

    /// Runs once, counting `events` (none: a timed run by `posix_spawnp`; some: a counted run).
    pub fn run(
        &self,
        events: &[Event],
        stops: Stops<'_>,
    ) -> Result<(RunMeasure, Vec<(String, String)>), SpawnError> {
        if events.is_empty() {
            Ok((self.spawned(stops)?, Vec::new()))
        } else {
            self.counted(events, stops)
        }
    }

    /// A timed run: nothing attached to the child.
    fn spawned(&self, stops: Stops<'_>) -> Result<RunMeasure, SpawnError> {
        let actions = FileActions::new()?;
        let attributes = Attributes::own_group()?;
        let drain = if self.pipe_output {
            let (r, w) = pipe()?;
            actions.dup2(w, 1)?;
            actions.dup2(w, 2)?;
            Some((r, w))
        } else {
            None
        };
        actions.open(0, &self.stdin, libc::O_RDONLY)?;
        if let (Some(out), None) = (&self.stdout, drain) {
            let truncate = libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC;
            actions.open(1, out, truncate)?;
            actions.open(2, c"/dev/null", libc::O_WRONLY)?;
        }
        let mut pid: libc::pid_t = 0;
        let start = Instant::now();
        // SAFETY: every pointer is valid for the call: argv is NUL-terminated, `environ` is the
        // process environment, `actions` is initialised.
        let rc = unsafe {
            libc::posix_spawnp(
                &mut pid,
                self.args[0].as_ptr(),
                &actions.0,
                &attributes.0,
                self.pointers.as_ptr(),
                self.envp(),
            )
        };
        let exited = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = drain.map(|(r, w)| {
            // SAFETY: closing our copy of the write end: EOF comes when the child's copies go.
            unsafe { libc::close(w) };
            let exited = exited.clone();
            std::thread::spawn(move || discard(r, &exited))
        });
        let finished = || exited.store(true, std::sync::atomic::Ordering::Relaxed);
        if rc != 0 {
            finished();
            if let Some(t) = reader {
                let _ = t.join();
            }
            return Err(SpawnError::Exec {
                program: self.program(),
                reason: io::Error::from_raw_os_error(rc),
            });
        }
        let measure = finish(pid, start, stops);
        finished();
        if let Some(t) = reader {
            let _ = t.join();
        }
        // exec() records the old address space's peak as the child's: after a vfork that is
        // latscope's, so the figure says nothing about the command.
        measure.map(|m| RunMeasure { max_rss_kb: 0, ..m })
    }

    /// A counted run: fork, attach the counters at the gate, exec (also with no events: the
    /// forked child's peak RSS is its own).
    pub fn counted(
        &self,
        events: &[Event],
        stops: Stops<'_>,
    ) -> Result<(RunMeasure, Vec<(String, String)>), SpawnError> {
        let (gate_r, gate_w) = pipe()?;
        let (err_r, err_w) = pipe()?;
        // SAFETY: the child only calls async-signal-safe functions (close, read, open, dup2,
        // execvpe, write, _exit) on memory prepared before the fork.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(io::Error::last_os_error().into());
        }
        if pid == 0 {
            unsafe { self.child([gate_r, gate_w], [err_r, err_w]) }
        }
        // SAFETY: setpgid on our own child (it does the same: whichever runs first makes the
        // group, which so exists before the gate opens); closing our copies of its ends.
        unsafe {
            libc::setpgid(pid, pid);
            libc::close(gate_r);
            libc::close(err_w);
        }
        let (opened, unsupported) = open_counters(events, pid);
        let start = Instant::now();
        // SAFETY: writing one byte from a valid buffer, then closing our end: the child execs.
        unsafe {
            libc::write(gate_w, [1u8].as_ptr().cast(), 1);
            libc::close(gate_w);
        }
        let exec_error = read_exec_error(err_r);
        let measure = finish(pid, start, stops);
        if let Some(errno) = exec_error {
            return Err(SpawnError::Exec {
                program: self.program(),
                reason: io::Error::from_raw_os_error(errno),
            });
        }
        let mut measure = measure?;
        measure.counters = opened
            .iter()
            .filter_map(|(name, c)| c.read().ok().map(|v| (name.clone(), v)))
            .collect();
        Ok((measure, unsupported))
    }

    /// The child of a counted run: lead a process group of its own, wait at the gate, redirect the streams, exec; report an exec
    /// failure's errno. (`Pipe` output is discarded to `/dev/null` here: a counted run's time
    /// is not used.)
    unsafe fn child(&self, gate: [i32; 2], err: [i32; 2]) -> ! {
        unsafe {
            libc::setpgid(0, 0);
            libc::close(gate[1]);
            libc::close(err[0]);
            let mut byte = 0u8;
            libc::read(gate[0], (&mut byte as *mut u8).cast(), 1);
            redirect(0, &self.stdin, libc::O_RDONLY);
            if let Some(out) = &self.stdout {
                redirect(1, out, libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC);
                redirect(2, c"/dev/null", libc::O_WRONLY);
            }
            libc::execvpe(
                self.args[0].as_ptr(),
                self.pointers.as_ptr().cast(),
                self.envp().cast(),
            );
            let errno = *libc::__errno_location();
            libc::write(
                err[1],
                (&errno as *const i32).cast(),
                std::mem::size_of::<i32>(),
            );
            libc::_exit(127);
        }
    }
}

/// Opens `path` onto descriptor `fd` (in a forked child: async-signal-safe calls only).
unsafe fn redirect(fd: i32, path: &std::ffi::CStr, flags: i32) {
    unsafe {
        let opened = libc::open(path.as_ptr(), flags | libc::O_CLOEXEC, 0o644);
        if opened >= 0 {
            libc::dup2(opened, fd);
            libc::close(opened);
        }
    }
}

/// Reads a pipe to its end, throwing the bytes away; once the child has exited (`exited`),
/// stops at the first 20 ms without data, so a background grandchild that keeps the pipe open
/// cannot hang the benchmark.
fn discard(fd: i32, exited: &std::sync::atomic::AtomicBool) {
    let mut buf = [0u8; 16384];
    loop {
        let mut poll = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let ready = unsafe { libc::poll(&mut poll, 1, 20) };
        if ready == 0 {
            if exited.load(std::sync::atomic::Ordering::Relaxed) {
                break;
            }
            continue;
        }
        if ready < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            break;
        }
        // SAFETY: reading into a valid buffer of its length.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n == 0 || (n < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted) {
            break;
        }
    }
    // SAFETY: our descriptor, closed once.
    unsafe { libc::close(fd) };
}

/// `posix_spawn_file_actions_t`, destroyed on drop.
struct FileActions(libc::posix_spawn_file_actions_t);

impl FileActions {
    fn new() -> io::Result<FileActions> {
        // SAFETY: the struct is initialised by the call before any other use.
        let mut raw: libc::posix_spawn_file_actions_t = unsafe { std::mem::zeroed() };
        check(unsafe { libc::posix_spawn_file_actions_init(&mut raw) })?;
        Ok(FileActions(raw))
    }

    fn open(&self, fd: i32, path: &std::ffi::CStr, flags: i32) -> io::Result<()> {
        let raw = (&self.0 as *const libc::posix_spawn_file_actions_t).cast_mut();
        // SAFETY: initialised actions; glibc copies the path.
        check(unsafe {
            libc::posix_spawn_file_actions_addopen(raw, fd, path.as_ptr(), flags, 0o644)
        })
    }

    fn dup2(&self, from: i32, to: i32) -> io::Result<()> {
        let raw = (&self.0 as *const libc::posix_spawn_file_actions_t).cast_mut();
        // SAFETY: initialised actions.
        check(unsafe { libc::posix_spawn_file_actions_adddup2(raw, from, to) })
    }
}

impl Drop for FileActions {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`, destroyed once.
        unsafe { libc::posix_spawn_file_actions_destroy(&mut self.0) };
    }
}

/// `posix_spawnattr_t`, destroyed on drop.
struct Attributes(libc::posix_spawnattr_t);

impl Attributes {
    /// The child leads a new process group (its pgid is its pid).
    fn own_group() -> io::Result<Attributes> {
        // SAFETY: the struct is initialised by the call before any other use.
        let mut raw: libc::posix_spawnattr_t = unsafe { std::mem::zeroed() };
        check(unsafe { libc::posix_spawnattr_init(&mut raw) })?;
        let attributes = Attributes(raw);
        let raw = (&attributes.0 as *const libc::posix_spawnattr_t).cast_mut();
        // SAFETY: initialised attributes.
        check(unsafe { libc::posix_spawnattr_setpgroup(raw, 0) })?;
        check(unsafe { libc::posix_spawnattr_setflags(raw, libc::POSIX_SPAWN_SETPGROUP as _) })?;
        Ok(attributes)
    }
}

impl Drop for Attributes {
    fn drop(&mut self) {
        // SAFETY: initialised in `own_group`, destroyed once.
        unsafe { libc::posix_spawnattr_destroy(&mut self.0) };
    }
}

fn check(rc: i32) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

fn pipe() -> io::Result<(i32, i32)> {
    let mut fds = [0i32; 2];
    // SAFETY: fds is a valid array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((fds[0], fds[1]))
}

/// Waits for the child (killing its group past the timeout or once cancelled), reaps it and
/// reads its resource usage; after a kill, also reaps what is left of its group.
fn finish(pid: i32, start: Instant, stops: Stops<'_>) -> Result<RunMeasure, SpawnError> {
    let (wall_ns, fired, status, usage) = if stops.timeout.is_none() && stops.cancel.is_none() {
        let (status, usage) = wait(pid)?;
        (start.elapsed().as_nanos() as u64, None, status, usage)
    } else if let Some(pidfd) = PidFd::open(pid) {
        // No thread beside the run: poll its pidfd (readable at the exit, which it does not
        // reap), waking every 5 ms to look at the cancel flag and the clock.
        let (wall_ns, fired) = pidfd.wait(pid, start, stops)?;
        let (status, usage) = wait(pid)?;
        (wall_ns, fired, status, usage)
    } else {
        // Wait for the exit without reaping, so the watchdog can never signal a reused
        // PID or group; stop the watchdog; only then reap.
        let dog = watchdog(pid, stops);
        let exited = wait_exit(pid);
        let wall_ns = start.elapsed().as_nanos() as u64;
        let fired = dog.finish();
        exited?;
        let (status, usage) = wait(pid)?;
        (wall_ns, fired, status, usage)
    };
    if fired.is_some() {
        reap_group(pid);
    } else {
        sweep_group(pid);
    }
    if fired == Some(Fired::Cancel) {
        return Err(SpawnError::Cancelled);
    }
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    Ok(RunMeasure {
        wall_ns,
        user_ns: tv(usage.ru_utime),
        sys_ns: tv(usage.ru_stime),
        max_rss_kb: usage.ru_maxrss as u64,
        voluntary_cs: usage.ru_nvcsw as u64,
        involuntary_cs: usage.ru_nivcsw as u64,
        minor_faults: usage.ru_minflt as u64,
        exit_code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
        timed_out: fired == Some(Fired::Timeout),
        counters: Vec::new(),
        layout: None,
    })
}

/// A pidfd (Linux 5.3+): readable once the process exits, reaped or not.
struct PidFd(i32);

impl PidFd {
    fn open(pid: i32) -> Option<PidFd> {
        // SAFETY: pidfd_open(2) takes a pid and flags and returns a new descriptor.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        (fd >= 0).then_some(PidFd(fd as i32))
    }

    /// Waits for the exit of `pid` (left unreaped), killing its group past the timeout or
    /// once the cancel flag is raised; returns the wall time to the exit and why it was killed.
    fn wait(&self, pid: i32, start: Instant, stops: Stops<'_>) -> io::Result<(u64, Option<Fired>)> {
        let deadline = stops.timeout.map(|t| start + t);
        let mut fired = None;
        loop {
            let mut wait_ms: i32 = if stops.cancel.is_some() { 5 } else { -1 };
            if let Some(d) = deadline.filter(|_| fired.is_none()) {
                let left = d.saturating_duration_since(Instant::now()).as_millis() + 1;
                wait_ms = if wait_ms < 0 {
                    left.min(1000) as i32
                } else {
                    wait_ms.min(left as i32)
                };
            }
            if fired.is_some() {
                wait_ms = -1;
            }
            let mut poll = libc::pollfd {
                fd: self.0,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let ready = unsafe { libc::poll(&mut poll, 1, wait_ms) };
            if ready > 0 {
                return Ok((start.elapsed().as_nanos() as u64, fired));
            }
            if ready < 0 {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
            if fired.is_some() {
                continue;
            }
            if stops.cancel.is_some_and(Cancel::is_raised) {
                fired = Some(Fired::Cancel);
            } else if deadline.is_some_and(|d| Instant::now() >= d) {
                fired = Some(Fired::Timeout);
            }
            if fired.is_some() {
                // SAFETY: the leader is unreaped (a pidfd does not reap), so neither its PID
                // nor its group can have been reused.
                unsafe {
                    libc::kill(-pid, libc::SIGKILL);
                    libc::kill(pid, libc::SIGKILL);
                }
            }
        }
    }
}

impl Drop for PidFd {
    fn drop(&mut self) {
        // SAFETY: our descriptor, closed once.
        unsafe { libc::close(self.0) };
    }
}

/// Kills what is left of process group `pgid` (its leader reaped) and reaps those of its
/// members that are our children (orphans come to us as a subreaper), for at most a second.
fn reap_group(pgid: i32) {
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        // SAFETY: signals group `pgid`: it cannot be reused while a member lives, and once
        // none does the call fails with ESRCH and the loop ends.
        if unsafe { libc::kill(-pgid, libc::SIGKILL) } != 0 {
            sweep_group(pgid);
            return;
        }
        sweep_group(pgid);
        if Instant::now() >= deadline {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Reaps, without waiting, the members of group `pgid` that have exited and are our children.
fn sweep_group(pgid: i32) {
    let mut status = 0;
    // SAFETY: waitpid on our own children of group `pgid`, non-blocking.
    while unsafe { libc::waitpid(-pgid, &mut status, libc::WNOHANG) } > 0 {}
}

/// Runs `argv` once with its output discarded (unless `show_output`), counting `events`.
pub fn run(
    argv: &[String],
    events: &[Event],
    timeout: Option<Duration>,
    show_output: bool,
) -> Result<(RunMeasure, Vec<(String, String)>), SpawnError> {
    let io = Io {
        input: None,
        output: if show_output {
            Output::Inherit
        } else {
            Output::Null
        },
    };
    Prepared::new(argv, &io)?.run(
        events,
        Stops {
            timeout,
            cancel: None,
        },
    )
}

fn open_counters(events: &[Event], pid: i32) -> Opened {
    let mut opened = Vec::new();
    let mut unsupported = Vec::new();
    for event in events {
        match counters::open(event, pid) {
            Ok(c) => opened.push((event.name.clone(), c)),
            Err(e) => {
                unsupported.push((event.name.clone(), counters::unsupported_reason(event, &e)))
            }
        }
    }
    (opened, unsupported)
}

/// The errno the child wrote if its exec failed (the pipe closes without data on success).
fn read_exec_error(err_r: i32) -> Option<i32> {
    let mut errno = 0i32;
    // SAFETY: reading at most 4 bytes into an i32.
    let n = unsafe {
        libc::read(
            err_r,
            (&mut errno as *mut i32).cast(),
            std::mem::size_of::<i32>(),
        )
    };
    unsafe { libc::close(err_r) };
    (n == std::mem::size_of::<i32>() as isize).then_some(errno)
}

/// Blocks until `pid` has exited, leaving it unreaped (`waitid` with `WNOWAIT`).
fn wait_exit(pid: i32) -> io::Result<()> {
    loop {
        // SAFETY: info is plain old data filled in by the kernel.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointer to info.
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if r == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

fn wait(pid: i32) -> io::Result<(i32, libc::rusage)> {
    let mut status = 0;
    // SAFETY: rusage is plain old data filled in by the kernel.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: valid pointers to status and usage.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            return Ok((status, usage));
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Why the watchdog killed a run's group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fired {
    Timeout,
    Cancel,
}

/// Kills the child's process group with SIGKILL once it runs past its time or the cancel
/// flag is raised.
struct Watchdog {
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<Option<Fired>>,
}

fn watchdog(pid: i32, stops: Stops<'_>) -> Watchdog {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let done = Arc::new(AtomicBool::new(false));
    let d = done.clone();
    let cancel = stops.cancel.cloned();
    let deadline = stops.timeout.map(|t| Instant::now() + t);
    let thread = std::thread::spawn(move || {
        while !d.load(Ordering::Relaxed) {
            let fired = if cancel.as_ref().is_some_and(Cancel::is_raised) {
                Some(Fired::Cancel)
            } else if deadline.is_some_and(|d| Instant::now() >= d) {
                Some(Fired::Timeout)
            } else {
                None
            };
            if fired.is_some() {
                // SAFETY: the leader is not reaped until this thread is joined (the parent
                // waits with WNOWAIT first), so neither its PID nor its group can have been
                // reused.
                unsafe { libc::kill(-pid, libc::SIGKILL) };
                // A child that has not yet made its group (a counted run before setpgid).
                unsafe { libc::kill(pid, libc::SIGKILL) };
                return fired;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        None
    });
    Watchdog { done, thread }
}

impl Watchdog {
    /// Stops the watchdog; returns why it killed the child, if it did.
    fn finish(self) -> Option<Fired> {
        self.done.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().ok().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(names: &[&str]) -> Vec<Event> {
        names
            .iter()
            .map(|n| counters::parse_event(n).unwrap())
            .collect()
    }

    #[test]
    fn a_run_reports_wall_time_rusage_exit_code_and_software_counters() {
        let argv: Vec<String> = [
            "sh",
            "-c",
            "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; exit 3",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let (m, _) = run(&argv, &events(&["task-clock", "page-faults"]), None, false).unwrap();
        assert_eq!(m.exit_code, Some(3));
        assert!(m.wall_ns > 1_000_000, "{m:?}");
        assert!(m.user_ns + m.sys_ns > 0);
        assert!(m.max_rss_kb > 0);
        let task_clock = m
            .counters
            .iter()
            .find(|(n, _)| n == "task-clock")
            .map(|c| c.1);
        // SAFETY: geteuid has no preconditions. As root, software counters always open.
        if unsafe { libc::geteuid() } == 0 {
            assert!(task_clock.is_some(), "{m:?}");
        }
        if let Some(tc) = task_clock {
            // task-clock (ns of CPU) cannot exceed wall time × CPUs by much, nor be zero.
            assert!(
                tc > 0 && tc <= m.wall_ns * 4,
                "task-clock {tc} wall {}",
                m.wall_ns
            );
        }
    }

    #[test]
    fn hardware_counters_without_a_pmu_are_reported_unsupported_not_fatal() {
        let argv = vec!["true".to_string()];
        let (m, unsupported) = run(
            &argv,
            &events(&["instructions", "context-switches"]),
            None,
            false,
        )
        .unwrap();
        let have_instructions = m.counters.iter().any(|(n, _)| n == "instructions");
        let said = unsupported
            .iter()
            .any(|(n, why)| n == "instructions" && why.contains("not supported"));
        assert!(have_instructions ^ said, "{m:?} {unsupported:?}");
        assert_eq!(m.exit_code, Some(0));
    }

    #[test]
    fn a_missing_program_is_an_exec_error() {
        let err = run(&["/nonexistent/prog".to_string()], &[], None, false).unwrap_err();
        assert!(matches!(err, SpawnError::Exec { .. }), "{err}");
        assert!(err.to_string().contains("No such file"), "{err}");
    }

    #[test]
    fn a_run_past_its_timeout_is_killed_and_marked() {
        let argv: Vec<String> = ["sleep", "5"].iter().map(|s| s.to_string()).collect();
        let (m, _) = run(&argv, &[], Some(Duration::from_millis(100)), false).unwrap();
        assert!(m.timed_out);
        assert_eq!(m.exit_code, None);
        assert!(m.wall_ns < 2_000_000_000);
    }

    #[test]
    fn a_timed_run_has_nothing_attached_and_reports_its_resource_usage() {
        let argv: Vec<String> = ["sh", "-c", "sleep 0.01; exit 4"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let (m, unsupported) = run(&argv, &[], None, false).unwrap();
        assert_eq!(m.exit_code, Some(4));
        assert!(unsupported.is_empty() && m.counters.is_empty(), "{m:?}");
        assert!(m.wall_ns >= 10_000_000, "{m:?}");
        // sleep waits: at least one voluntary context switch; exec faults pages in.
        assert!(m.voluntary_cs >= 1 && m.minor_faults > 0, "{m:?}");
        assert_eq!(m.max_rss_kb, 0, "not measured in a spawned run");
    }
}
