//! Under a process limit (issue 56, "nothing lost"): a thread or a process that cannot be
//! created is an error named, or less parallelism, never a panic that loses the run. Each test
//! runs latscope as a user of its own (a uid nothing else runs as: `RLIMIT_NPROC` counts every
//! process and thread of the user), so tests beside it cannot move its count.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Output;

use crate::util::{self, stderr, stdout};

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// `latscope ARGS` as `uid`, allowed `nproc` processes and threads in all (its own included).
fn limited(uid: u32, nproc: libc::rlim_t, args: &[&str]) -> Output {
    let mut command = util::latscope();
    command.args(args).uid(uid).gid(uid).current_dir("/");
    let limit = libc::rlimit {
        rlim_cur: nproc,
        rlim_max: nproc,
    };
    // SAFETY: the closure runs in the forked child before execve; setrlimit is
    // async-signal-safe and reads only `limit`, a copy on the closure's own memory.
    unsafe {
        command.pre_exec(move || match libc::setrlimit(libc::RLIMIT_NPROC, &limit) {
            0 => Ok(()),
            _ => Err(io::Error::last_os_error()),
        });
    }
    command
        .output()
        .expect("run latscope under a process limit")
}

/// Whether the test can run: it needs root, to become a user of its own.
fn can_switch_user(test: &str) -> bool {
    if !is_root() {
        assert!(
            std::env::var_os("LATSCOPE_REQUIRE_STACK").is_none(),
            "{test}: needs root"
        );
        eprintln!("{test}: skipped: needs root, to run latscope as a user of its own");
        return false;
    }
    true
}

#[test]
fn bench_reaps_the_orphans_of_its_runs_as_it_goes_and_stays_under_a_process_limit() {
    if !can_switch_user("bench orphans") {
        return;
    }
    // Every run leaves a `sleep` behind, adopted by latscope (their subreaper) when the shell
    // exits. Reaped as they end, a few dozen at most live at once, however slow the runs; left
    // as zombies, 300 of them pass the limit of 100 and the shell can no longer fork.
    let out = limited(
        47_561,
        100,
        &[
            "bench",
            "--shell",
            "--runs",
            "300",
            "--counters",
            "none",
            "sleep 0.01 & true",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("300 timed runs each"),
        "{}",
        stdout(&out)
    );
}

/// `latscope ARGS` unlimited, as root: the document to compare with.
fn unlimited(args: &[&str]) -> Output {
    let out = util::latscope().args(args).output().expect("run latscope");
    assert!(out.status.success(), "{}", stderr(&out));
    out
}

/// Runs `args` with `--threads 1` unlimited and with `--threads 4` allowed no thread beyond
/// the two latscope starts with (the main one and the signal watchdog), then with one more: the
/// same document each time, exit 0.
fn reads_alone_what_threads_would_have_read(uid: u32, args: &[&str]) {
    let serial: Vec<&str> = args.iter().copied().chain(["--threads", "1"]).collect();
    let expected = unlimited(&serial).stdout;
    // Small chunks: many for the workers that could not be started.
    let parallel: Vec<&str> = args
        .iter()
        .copied()
        .chain(["--threads", "4", "--chunk-bytes", "4096"])
        .collect();
    for nproc in [2, 3] {
        let out = limited(uid, nproc, &parallel);
        assert_eq!(
            out.status.code(),
            Some(0),
            "limit {nproc}: {}",
            stderr(&out)
        );
        assert!(
            out.stdout == expected,
            "limit {nproc}: not the one-thread document:\n{}",
            stdout(&out)
        );
    }
}

#[test]
fn wayland_reads_on_the_calling_thread_when_no_thread_can_be_started() {
    if !can_switch_user("wayland threads") {
        return;
    }
    let log = util::data("weston-glmark2-build.client.log");
    reads_alone_what_threads_would_have_read(
        47_562,
        &["wayland", "-f", "json", log.to_str().unwrap()],
    );
}

#[test]
fn spans_reads_on_the_calling_thread_when_no_thread_can_be_started() {
    if !can_switch_user("spans threads") {
        return;
    }
    let trace = util::root().join("tests/data/traces/sched.perf.txt");
    let mut args = vec!["spans", "-f", "json"];
    args.extend(util::WAKE);
    args.push(trace.to_str().unwrap());
    reads_alone_what_threads_would_have_read(47_563, &args);
}

#[test]
fn compare_judges_on_the_calling_thread_when_no_thread_can_be_started() {
    if !can_switch_user("compare threads") {
        return;
    }
    let log = util::data("weston-glmark2-build.client.log");
    let dir = tempfile::tempdir().unwrap();
    let doc = util::write(
        dir.path(),
        "run.json",
        unlimited(&["wayland", "-f", "json", log.to_str().unwrap()]).stdout,
    );
    // The user of its own must be able to read it.
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let args = ["compare", doc.to_str().unwrap(), doc.to_str().unwrap()];
    let expected = unlimited(&args).stdout;
    let out = limited(47_564, 2, &args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), String::from_utf8_lossy(&expected));
}
