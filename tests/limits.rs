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
