//! Running one command and measuring it, two ways, both started by [`crate::process`]:
//!
//! * **timed runs** (no counters): `posix_spawnp` ([`Program::spawner`]: a `vfork`-style clone
//!   in glibc, so the cost does not grow with latscope's memory) and `wait4` for the exit status
//!   and resource usage. The wall time runs from the spawn to the exit, as hyperfine measures.
//!   Nothing is attached to the child, so nothing slows it down: these are the runs the verdict
//!   is computed from.
//! * **counted runs**: fork, open the counters on the child while it waits at a gate, release it
//!   into `execvpe` ([`Program::hold`]). `std::process::Command` cannot do this: its `spawn`
//!   returns only after the exec, and the counters must be attached before it (with
//!   `enable_on_exec`) to count from the first instruction without counting latscope's own
//!   fork. Inherited counters make every fork, exit and context switch of the child dearer
//!   (7.6% on `true`), so their wall time is kept apart and never enters a verdict on wall time.
//!
//! Each run is the leader of a process group of its own: a timeout or a cancel (Ctrl-C,
//! SIGTERM) kills the whole group, so a shell's children go with it, and reaps what was ours to
//! reap. (Killing only the shell, as before, left a `sleep` it had started running, reparented
//! to init.) For that the benchmark should make latscope a child subreaper
//! ([`process::reap_orphans_here`]): orphans of a killed group then come back to latscope, which
//! reaps them, instead of to init. So do the background children a run leaves running (`sleep &`
//! in a shell): the schedule reaps those that ended before each run
//! ([`Schedule::reap_orphans`](super::schedule::Schedule::reap_orphans)), as their zombies
//! would otherwise count against the user's process limit until latscope exits.
//!
//! The wait for a run's exit polls a pidfd, waking every 5 ms to look at the cancel flag and
//! the timeout: a watchdog thread per run (the fallback without pidfds) added 250 µs to the
//! median wall time of `true` (550 µs), the pidfd about 20 µs.
//!
//! A command is [`Prepared`] once (its argv and stream paths as C strings) and run many times:
//! a run allocates nothing that grows with the number of runs.

use std::ffi::CString;
use std::io::{self, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::counters::{self, Counter, Event};
use crate::doc::run::RunMeasure;
use crate::ingest::Cancel;
use crate::process::{self, Pid, PidFd, Program, Setup};

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

fn path_c(path: &std::path::Path) -> io::Result<CString> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::other("argument or path contains a NUL byte"))
}

/// A command ready to run many times: argv and stream paths converted once.
pub struct Prepared {
    program: Program,
    stdin: CString,
    stdout: Option<CString>,
    pipe_output: bool,
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
        if let Some(reason) = crate::process::directory_error(&argv[0]) {
            return Err(SpawnError::Exec {
                program: argv[0].clone(),
                reason,
            });
        }
        let stdin = match &io.input {
            Some(p) => path_c(p)?,
            None => c"/dev/null".to_owned(),
        };
        let stdout = match &io.output {
            Output::Null | Output::Pipe => Some(c"/dev/null".to_owned()),
            Output::Inherit => None,
            Output::File(p) => Some(path_c(p)?),
        };
        Ok(Prepared {
            program: Program::search(argv)?,
            stdin,
            stdout,
            pipe_output: io.output == Output::Pipe,
        })
    }

    /// The same command run with exactly this environment (`NAME=value` entries) instead of
    /// latscope's (`bench --layouts` pads it).
    pub fn with_environment(mut self, entries: Vec<Vec<u8>>) -> Result<Prepared, SpawnError> {
        self.program = self.program.with_environment(entries)?;
        Ok(self)
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

    /// Stdin from `--input`, stdout and stderr by `--output` (a file truncated, `/dev/null`).
    fn streams<'a>(&'a self, setup: &mut Setup<'a>, stdout: bool) {
        setup.open(0, &self.stdin, libc::O_RDONLY);
        if let (Some(out), true) = (&self.stdout, stdout) {
            let truncate = libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC;
            setup
                .open(1, out, truncate)
                .open(2, c"/dev/null", libc::O_WRONLY);
        }
    }

    /// A timed run: nothing attached to the child.
    fn spawned(&self, stops: Stops<'_>) -> Result<RunMeasure, SpawnError> {
        let drain = if self.pipe_output {
            Some(process::pipe()?)
        } else {
            None
        };
        let mut setup = Setup::new();
        setup.own_group();
        if let Some((_, w)) = &drain {
            setup.dup(w.as_fd(), 1).dup(w.as_fd(), 2);
        }
        self.streams(&mut setup, drain.is_none());
        let spawner = self.program.spawner(&setup)?;
        drop(setup);
        let exited = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        // The reader starts before the run, so that a thread that cannot be started (a
        // process limit) fails the run before it is spawned, and is not timed.
        let (reader, write_end) = match drain {
            Some((r, w)) => {
                let exited = exited.clone();
                let reader = std::thread::Builder::new()
                    .name("bench-output".into())
                    .spawn(move || discard(r, &exited))?;
                (Some(reader), Some(w))
            }
            None => (None, None),
        };
        let start = Instant::now();
        let spawned = spawner.spawn();
        // Our copy of the write end: EOF comes when the child's copies go.
        drop(write_end);
        let finished = || exited.store(true, std::sync::atomic::Ordering::Relaxed);
        let pid = match spawned {
            Ok(pid) => pid,
            Err(reason) => {
                finished();
                if let Some(t) = reader {
                    let _ = t.join();
                }
                return Err(SpawnError::Exec {
                    program: self.program.name(),
                    reason,
                });
            }
        };
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
    /// forked child's peak RSS is its own). The child leads a process group of its own; its
    /// streams are redirected once released. (`Pipe` output is discarded to `/dev/null` here:
    /// a counted run's time is not used.)
    pub fn counted(
        &self,
        events: &[Event],
        stops: Stops<'_>,
    ) -> Result<(RunMeasure, Vec<(String, String)>), SpawnError> {
        let mut setup = Setup::new();
        setup.own_group();
        self.streams(&mut setup, true);
        let held = self.program.hold(&setup)?;
        let pid = held.pid();
        let (opened, unsupported) = open_counters(events, pid);
        let start = Instant::now();
        if let Err(reason) = held.release() {
            return Err(SpawnError::Exec {
                program: self.program.name(),
                reason,
            });
        }
        let mut measure = finish(pid, start, stops)?;
        measure.counters = opened
            .iter()
            .filter_map(|(name, c)| c.read().ok().map(|v| (name.clone(), v)))
            .collect();
        Ok((measure, unsupported))
    }
}

/// Reads a pipe to its end, throwing the bytes away; once the child has exited (`exited`),
/// stops at the first 20 ms without data, so a background grandchild that keeps the pipe open
/// cannot hang the benchmark.
fn discard(read: OwnedFd, exited: &std::sync::atomic::AtomicBool) {
    let mut pipe = std::fs::File::from(read);
    let mut buf = [0u8; 16384];
    loop {
        match process::readable(pipe.as_fd(), 20) {
            Ok(true) => {}
            Ok(false) => {
                if exited.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                continue;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
        match pipe.read(&mut buf) {
            Ok(0) => break,
            Err(e) if e.kind() != io::ErrorKind::Interrupted => break,
            _ => {}
        }
    }
}

/// Waits for the child (killing its group past the timeout or once cancelled), reaps it and
/// reads its resource usage; after a kill, also reaps what is left of its group.
fn finish(pid: Pid, start: Instant, stops: Stops<'_>) -> Result<RunMeasure, SpawnError> {
    let (wall_ns, fired, status, usage) = if stops.timeout.is_none() && stops.cancel.is_none() {
        let (status, usage) = process::wait(pid)?;
        (start.elapsed().as_nanos() as u64, None, status, usage)
    } else if let Some(pidfd) = PidFd::open(pid) {
        // No thread beside the run: poll its pidfd (readable at the exit, which it does not
        // reap), waking every 5 ms to look at the cancel flag and the clock.
        let (wall_ns, fired) = wait_polling(&pidfd, pid, start, stops)?;
        let (status, usage) = process::wait(pid)?;
        (wall_ns, fired, status, usage)
    } else {
        // Wait for the exit without reaping, so the watchdog can never signal a reused
        // PID or group; stop the watchdog; only then reap. Without a watchdog (no thread
        // could be started), the run cannot be stopped: it is ended and the error said.
        let dog = match watchdog(pid, stops) {
            Ok(dog) => dog,
            Err(e) => {
                let _ = process::kill_group(pid, libc::SIGKILL);
                let _ = process::wait(pid);
                process::reap_group(pid);
                return Err(SpawnError::System(e));
            }
        };
        let exited = process::wait_ended(pid);
        let wall_ns = start.elapsed().as_nanos() as u64;
        let fired = dog.finish();
        exited?;
        let (status, usage) = process::wait(pid)?;
        (wall_ns, fired, status, usage)
    };
    if fired.is_some() {
        process::reap_group(pid);
    } else {
        process::sweep_group(pid);
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

/// Waits for the exit of `pid` (left unreaped) on its pidfd, killing its group past the
/// timeout or once the cancel flag is raised; returns the wall time to the exit and why it was
/// killed.
fn wait_polling(
    pidfd: &PidFd,
    pid: Pid,
    start: Instant,
    stops: Stops<'_>,
) -> io::Result<(u64, Option<Fired>)> {
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
        match pidfd.wait(wait_ms) {
            Ok(true) => return Ok((start.elapsed().as_nanos() as u64, fired)),
            Ok(false) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
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
            // The leader is unreaped (a pidfd does not reap), so neither its PID nor its
            // group can have been reused.
            let _ = process::kill_group(pid, libc::SIGKILL);
            let _ = process::kill(pid, libc::SIGKILL);
        }
    }
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

fn open_counters(events: &[Event], pid: Pid) -> Opened {
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

fn watchdog(pid: Pid, stops: Stops<'_>) -> io::Result<Watchdog> {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let done = Arc::new(AtomicBool::new(false));
    let d = done.clone();
    let cancel = stops.cancel.cloned();
    let deadline = stops.timeout.map(|t| Instant::now() + t);
    let thread = std::thread::Builder::new()
        .name("bench-watchdog".into())
        .spawn(move || {
            while !d.load(Ordering::Relaxed) {
                let fired = if cancel.as_ref().is_some_and(Cancel::is_raised) {
                    Some(Fired::Cancel)
                } else if deadline.is_some_and(|d| Instant::now() >= d) {
                    Some(Fired::Timeout)
                } else {
                    None
                };
                if fired.is_some() {
                    // The leader is not reaped until this thread is joined (the parent waits with
                    // WNOWAIT first), so neither its PID nor its group can have been reused.
                    let _ = process::kill_group(pid, libc::SIGKILL);
                    let _ = process::kill(pid, libc::SIGKILL);
                    return fired;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            None
        })?;
    Ok(Watchdog { done, thread })
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
    fn a_directory_is_said_to_be_one_not_a_permission_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = format!("{}/", dir.path().display());
        let err = Prepared::new(std::slice::from_ref(&path), &Io::default())
            .err()
            .expect("a directory is refused");
        assert!(matches!(err, SpawnError::Exec { .. }), "{err}");
        assert_eq!(
            err.to_string(),
            format!("cannot run '{path}': it is a directory, not a program")
        );
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
