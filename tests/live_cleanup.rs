//! `latscope live` leaves nothing behind and takes what users give it: a traced script's
//! background job that ignores SIGTERM, bpftrace when latscope is killed outright, a program
//! longer than one argument may be, and an empty `--key` or an interval too long refused.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

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

/// The children of `pid` named `name`.
fn children_named(pid: u32, name: &str) -> Vec<u32> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten();
    tasks
        .filter_map(Result::ok)
        .flat_map(|t| {
            std::fs::read_to_string(t.path().join("children"))
                .unwrap_or_default()
                .split_whitespace()
                .filter_map(|c| c.parse::<u32>().ok())
                .collect::<Vec<_>>()
        })
        .filter(|c| {
            std::fs::read_to_string(format!("/proc/{c}/comm")).is_ok_and(|comm| comm.trim() == name)
        })
        .collect()
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
fn bpftrace_and_its_program_file_go_when_latscope_is_killed_outright() {
    let Some(f) = fixture() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let mut latscope = util::latscope()
        .env("TMPDIR", tmp.path())
        .args(["live", "-q", "--interval", "60m", "--rate"])
        .arg(probe(&f.target, "tick"))
        .arg("--")
        .arg(&f.target)
        .args(["100000", "5"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(latscope.stderr.take().unwrap()).lines();
    let tracing = lines
        .by_ref()
        .map_while(Result::ok)
        .any(|l| l.contains("tracing"));
    let bpftrace = children_named(latscope.id(), "bpftrace");
    sigkill(latscope.id());
    latscope.wait().unwrap();
    let killed = Instant::now();
    while bpftrace.iter().any(|&p| running(p)) && killed.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left: Vec<u32> = bpftrace.iter().copied().filter(|&p| running(p)).collect();
    left.iter().for_each(|&pid| sigkill(pid));
    assert!(tracing, "latscope never said it was tracing");
    assert_eq!(bpftrace.len(), 1, "bpftrace children: {bpftrace:?}");
    assert!(
        left.is_empty(),
        "bpftrace still running 2 s after latscope was killed"
    );
    let files: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert!(files.is_empty(), "left in TMPDIR: {files:?}");
}

#[test]
fn a_program_longer_than_one_argument_may_be_runs() {
    let Some(f) = fixture() else { return };
    let (start, end) = (
        probe(&f.target, "request_start"),
        probe(&f.target, "request_end"),
    );
    // Each span adds over a kilobyte of program: 120 pass Linux's 128 KiB argument limit.
    let spans: Vec<String> = (0..120).map(|i| format!("s{i}={start}..{end}")).collect();
    let mut args: Vec<&str> = vec!["live", "-q", "--save", f.save.to_str().unwrap()];
    for span in &spans {
        args.extend(["--span", span]);
    }
    let printed = run(&[&args[..], &["--print-program"]].concat());
    assert!(
        printed.stdout.len() > 128 * 1024,
        "{}",
        printed.stdout.len()
    );
    let target = f.target.to_str().unwrap();
    let out = run(&[&args[..], &["--", target, "20"]].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    let doc = saved(&f.save);
    let spans = doc["spans"].as_array().unwrap();
    assert_eq!(spans.len(), 120);
    assert!(spans.iter().all(|s| s["count"] == 20), "{doc}");
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
