//! `latscope live` leaves nothing behind and takes what users give it: a traced script's
//! background job that ignores SIGTERM, bpftrace when latscope is killed outright, a program
//! longer than one argument may be, and an empty `--key` or an interval too long refused.

use crate::live::{fixture, probe, saved};
use crate::util::{self, run, stderr};

/// The pids of running processes (not zombies) that have `arg` as one of their arguments.
fn processes_with_argument(arg: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| running(pid))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.split(|&b| b == 0).any(|a| a == arg.as_bytes()))
        })
        .collect()
}

/// Whether `pid` exists and has not exited (a zombie has).
fn running(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next());
    !matches!(state, Some('Z' | 'X') | None)
}

fn sigkill(pid: u32) {
    // SAFETY: kill has no memory-safety preconditions; the tests signal only what they started.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
}

#[test]
fn a_scripts_background_job_that_ignores_sigterm_is_killed_after_its_leader_exits() {
    let Some(f) = fixture() else { return };
    // A unique argument marks the job: `sleep` takes a fraction of a second. Its output goes
    // elsewhere, so that latscope's does not stay open as long as it lives.
    let marker = format!("300.{}", std::process::id());
    let script = format!(
        "trap '' TERM; sleep {marker} >/dev/null 2>&1 & exec '{}' 20 5",
        f.target.display()
    );
    let out = run(&[
        "live",
        "-q",
        "--save",
        f.save.to_str().unwrap(),
        "--rate",
        &probe(&f.target, "tick"),
        "--",
        "sh",
        "-c",
        &script,
    ]);
    let left = processes_with_argument(&marker);
    left.iter().for_each(|&pid| sigkill(pid));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(saved(&f.save)["rates"][0]["count"], 20);
    assert!(left.is_empty(), "left running: {left:?}");
}

#[test]
fn an_empty_key_is_a_usage_error() {
    let span = "a=tracepoint:sched:sched_wakeup..tracepoint:sched:sched_switch";
    for key in ["", ","] {
        let out = run(&["live", "--print-program", "--span", span, "--key", key]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(
            stderr(&out).contains(&format!("--key '{key}' names no field")),
            "{}",
            stderr(&out)
        );
    }
}

#[test]
fn an_interval_over_an_hour_is_a_usage_error() {
    let rate = "tracepoint:sched:sched_switch";
    let out = run(&[
        "live",
        "--interval",
        "1000000",
        "--rate",
        rate,
        "--print-program",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("3600 s"), "{}", stderr(&out));
    let out = run(&[
        "live",
        "--interval",
        "60m",
        "--rate",
        rate,
        "--print-program",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(util::stdout(&out).contains("interval:s:3600 "));
}
