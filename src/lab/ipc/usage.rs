//! CPU time and context switches, per side of a transport.
//!
//! A transport's cost is not only its latency: a spinning ring buys latency with a whole core,
//! and a small buffer pays a context switch per flush (the Java2D lesson). Each side is measured
//! where it runs: a thread by `CLOCK_THREAD_CPUTIME_ID` and `getrusage(RUSAGE_THREAD)`, a process
//! by its own clock and `RUSAGE_SELF`, and a broker that latscope did not write (dbus-daemon)
//! from `/proc/PID/task/*/{schedstat,status}`.

use std::path::Path;

/// CPU time and context switches at one moment (or their difference).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// CPU time, ns
    pub cpu_ns: u64,
    /// voluntary context switches (the task blocked)
    pub voluntary: u64,
    /// involuntary context switches (the task was preempted)
    pub involuntary: u64,
}

impl Usage {
    /// `self − earlier`, never negative.
    pub fn since(&self, earlier: &Usage) -> Usage {
        Usage {
            cpu_ns: self.cpu_ns.saturating_sub(earlier.cpu_ns),
            voluntary: self.voluntary.saturating_sub(earlier.voluntary),
            involuntary: self.involuntary.saturating_sub(earlier.involuntary),
        }
    }

    /// Both kinds of context switch.
    pub fn context_switches(&self) -> u64 {
        self.voluntary + self.involuntary
    }

    /// The sum of two usages.
    pub fn plus(&self, other: &Usage) -> Usage {
        Usage {
            cpu_ns: self.cpu_ns + other.cpu_ns,
            voluntary: self.voluntary + other.voluntary,
            involuntary: self.involuntary + other.involuntary,
        }
    }
}

/// Whose usage to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// the calling thread
    Thread,
    /// the calling process, all its threads
    Process,
}

/// The usage of the calling thread or process so far.
pub fn current(scope: Scope) -> Usage {
    let (clock, who) = match scope {
        Scope::Thread => (libc::CLOCK_THREAD_CPUTIME_ID, libc::RUSAGE_THREAD),
        Scope::Process => (libc::CLOCK_PROCESS_CPUTIME_ID, libc::RUSAGE_SELF),
    };
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointers; both calls only write them.
    let ru = unsafe {
        libc::clock_gettime(clock, &mut ts);
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(who, &mut ru);
        ru
    };
    Usage {
        cpu_ns: ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64,
        voluntary: ru.ru_nvcsw as u64,
        involuntary: ru.ru_nivcsw as u64,
    }
}

/// The usage of another process (all its threads) from `/proc`, or `None` if it is gone.
pub fn of_process(pid: u32) -> Option<Usage> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut total = Usage::default();
    for task in tasks.flatten() {
        let dir = task.path();
        total = total.plus(&of_task(&dir).unwrap_or_default());
    }
    Some(total)
}

fn of_task(dir: &Path) -> Option<Usage> {
    let schedstat = std::fs::read_to_string(dir.join("schedstat")).ok()?;
    let status = std::fs::read_to_string(dir.join("status")).ok()?;
    Some(parse_task(&schedstat, &status))
}

/// A task's usage from the text of its `schedstat` (first field: ns on the CPU) and `status`
/// (`voluntary_ctxt_switches`, `nonvoluntary_ctxt_switches`).
pub fn parse_task(schedstat: &str, status: &str) -> Usage {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.trim_start_matches(':').trim().parse().ok())
            .unwrap_or(0)
    };
    Usage {
        cpu_ns: schedstat
            .split_whitespace()
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
        voluntary: field("voluntary_ctxt_switches"),
        involuntary: field("nonvoluntary_ctxt_switches"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_is_read_from_schedstat_and_status() {
        let status =
            "Name:\tdbus-daemon\nvoluntary_ctxt_switches:\t1234\nnonvoluntary_ctxt_switches:\t56\n";
        assert_eq!(
            parse_task("987654321 12345 67\n", status),
            Usage {
                cpu_ns: 987_654_321,
                voluntary: 1234,
                involuntary: 56
            }
        );
    }

    #[test]
    fn sleeping_counts_as_a_voluntary_context_switch_of_this_thread() {
        let before = current(Scope::Thread);
        std::thread::sleep(std::time::Duration::from_millis(2));
        let d = current(Scope::Thread).since(&before);
        assert!(d.voluntary >= 1, "{d:?}");
    }

    #[test]
    fn this_process_is_readable_from_proc_like_any_other() {
        let u = of_process(std::process::id()).unwrap();
        assert!(u.cpu_ns > 0);
    }
}
