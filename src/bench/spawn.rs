//! Running one command and measuring it: fork, open the counters on the child while it waits
//! at a gate, release it into `execvp`, and `wait4` for its exit status and resource usage.
//!
//! `std::process::Command` cannot do this: its `spawn` returns only after the exec, and the
//! counters must be attached before it (with `enable_on_exec`) to count from the first
//! instruction without counting latscope's own fork.

use std::ffi::CString;
use std::io;
use std::time::{Duration, Instant};

use super::counters::{self, Counter, Event};

/// What one run measured (also a run of the `bench` document).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RunMeasure {
    /// wall time from releasing the child to its exit
    pub wall_ns: u64,
    /// user CPU time of the child and its reaped children
    pub user_ns: u64,
    /// system CPU time
    pub sys_ns: u64,
    /// peak resident set size, KiB
    pub max_rss_kb: u64,
    /// exit code (`None`: killed by a signal)
    pub exit_code: Option<i32>,
    /// killed because it ran past the timeout
    pub timed_out: bool,
    /// counter values by event name, in the order opened (absent: not supported here); a JSON
    /// object in documents
    #[serde(with = "counters_as_map")]
    pub counters: Vec<(String, u64)>,
}

/// Counters as a JSON object (`{"task-clock": 123, ...}`), keeping their order.
mod counters_as_map {
    use serde::ser::SerializeMap;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(counters: &[(String, u64)], s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(counters.len()))?;
        for (name, value) in counters {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(String, u64)>, D::Error> {
        let map = std::collections::BTreeMap::<String, u64>::deserialize(d)?;
        Ok(map.into_iter().collect())
    }
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
}

/// Opened counters and the events that could not be opened (with the reason).
pub type Opened = (Vec<(String, Counter)>, Vec<(String, String)>);

fn cstrings(argv: &[String]) -> io::Result<Vec<CString>> {
    argv.iter()
        .map(|a| {
            CString::new(a.as_bytes()).map_err(|_| io::Error::other("argument contains a NUL byte"))
        })
        .collect()
}

fn pipe() -> io::Result<(i32, i32)> {
    let mut fds = [0i32; 2];
    // SAFETY: fds is a valid array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((fds[0], fds[1]))
}

/// Runs `argv` once with its output discarded (unless `show_output`), counting `events`.
pub fn run(
    argv: &[String],
    events: &[Event],
    timeout: Option<Duration>,
    show_output: bool,
) -> Result<(RunMeasure, Vec<(String, String)>), SpawnError> {
    if argv.is_empty() {
        let source = io::Error::other("empty command");
        return Err(SpawnError::Exec {
            program: String::new(),
            reason: source,
        });
    }
    let args = cstrings(argv)?;
    let mut pointers: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    pointers.push(std::ptr::null());
    let devnull = CString::new("/dev/null").expect("no NUL");
    let (gate_r, gate_w) = pipe()?;
    let (err_r, err_w) = pipe()?;
    // SAFETY: the child only calls async-signal-safe functions (close, read, open, dup2,
    // execvp, write, _exit) on memory prepared before the fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error().into());
    }
    if pid == 0 {
        unsafe {
            child(
                gate_r,
                gate_w,
                err_r,
                err_w,
                &devnull,
                show_output,
                &pointers,
            )
        }
    }
    // SAFETY: closing our copies of the child's ends.
    unsafe {
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
    let watchdog = timeout.map(|t| watchdog(pid, t));
    // Wait for the exit without reaping, so the watchdog can never signal a reused PID; stop
    // the watchdog; only then reap (and read the resource usage).
    let exited = wait_exit(pid);
    let wall_ns = start.elapsed().as_nanos() as u64;
    let timed_out = watchdog.is_some_and(|w| w.finish());
    exited?;
    let (status, usage) = wait(pid)?;
    if let Some(errno) = exec_error {
        let program = argv.first().cloned().unwrap_or_default();
        return Err(SpawnError::Exec {
            program,
            reason: io::Error::from_raw_os_error(errno),
        });
    }
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    let counters = opened
        .iter()
        .filter_map(|(name, c)| c.read().ok().map(|v| (name.clone(), v)))
        .collect();
    let measure = RunMeasure {
        wall_ns,
        user_ns: tv(usage.ru_utime),
        sys_ns: tv(usage.ru_stime),
        max_rss_kb: usage.ru_maxrss as u64,
        exit_code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
        timed_out,
        counters,
    };
    Ok((measure, unsupported))
}

/// The child: wait at the gate, redirect output, exec; report an exec failure's errno.
unsafe fn child(
    gate_r: i32,
    gate_w: i32,
    err_r: i32,
    err_w: i32,
    devnull: &CString,
    show_output: bool,
    argv: &[*const libc::c_char],
) -> ! {
    unsafe {
        libc::close(gate_w);
        libc::close(err_r);
        let mut byte = 0u8;
        libc::read(gate_r, (&mut byte as *mut u8).cast(), 1);
        if !show_output {
            let null = libc::open(devnull.as_ptr(), libc::O_RDWR);
            if null >= 0 {
                libc::dup2(null, 0);
                libc::dup2(null, 1);
                libc::dup2(null, 2);
                if null > 2 {
                    libc::close(null);
                }
            }
        }
        libc::execvp(argv[0], argv.as_ptr());
        let errno = *libc::__errno_location();
        libc::write(
            err_w,
            (&errno as *const i32).cast(),
            std::mem::size_of::<i32>(),
        );
        libc::_exit(127);
    }
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

/// Kills the child with SIGKILL if it runs past its time.
struct Watchdog {
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
    fired: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

fn watchdog(pid: i32, timeout: Duration) -> Watchdog {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let done = Arc::new(AtomicBool::new(false));
    let fired = Arc::new(AtomicBool::new(false));
    let (d, f) = (done.clone(), fired.clone());
    let thread = std::thread::spawn(move || {
        let deadline = Instant::now() + timeout;
        while !d.load(Ordering::Relaxed) {
            if Instant::now() >= deadline {
                f.store(true, Ordering::Relaxed);
                // SAFETY: the child is not reaped until this thread is joined (the parent waits
                // with WNOWAIT first), so the PID cannot have been reused.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    Watchdog {
        done,
        fired,
        thread,
    }
}

impl Watchdog {
    /// Stops the watchdog; returns whether it killed the child.
    fn finish(self) -> bool {
        self.done.store(true, std::sync::atomic::Ordering::Relaxed);
        let _ = self.thread.join();
        self.fired.load(std::sync::atomic::Ordering::Relaxed)
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
}
