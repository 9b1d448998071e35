//! Bad input and hostile use (issue 17, the part done so far): one SIGTERM always ends a
//! blocked latscope, absurd parameter lists are refused before any work, probe specs cannot
//! inject program text, and directories are not results.

use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::util::{self, run, stderr, stdout};

/// Starts latscope with `args` in its own process group, sends one SIGTERM after `after`, and
/// returns how long it took to end after the signal and its exit code.
fn terminate(args: &[&str], after: Duration) -> (Duration, Option<i32>) {
    let mut child = util::latscope()
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    std::thread::sleep(after);
    // SAFETY: a plain kill(2) of the child we started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let sent = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if sent.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = sent.elapsed();
    // Whatever it started (a benchmarked command) goes with its group.
    // SAFETY: kill(2) of the process group we created for the child.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
    (took, status.code())
}

/// A named pipe with no writer: opening it for reading blocks.
fn mkfifo(path: &std::path::Path) {
    let made = std::process::Command::new("mkfifo").arg(path).status();
    assert!(made.unwrap().success(), "mkfifo {}", path.display());
}

#[test]
fn one_sigterm_ends_a_wayland_read_blocked_opening_a_fifo() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("log.fifo");
    mkfifo(&fifo);
    let (took, code) = terminate(
        &["wayland", fifo.to_str().unwrap()],
        Duration::from_millis(300),
    );
    assert!(
        took < Duration::from_secs(3),
        "still running {took:?} after SIGTERM"
    );
    assert_eq!(code, Some(128 + libc::SIGTERM));
}

#[test]
fn one_sigterm_ends_a_benchmark_of_a_command_that_never_exits() {
    let (took, code) = terminate(
        &["bench", "--runs", "3", "sleep 1000"],
        Duration::from_millis(300),
    );
    assert!(
        took < Duration::from_secs(3),
        "still running {took:?} after SIGTERM"
    );
    assert!(code.is_some(), "killed rather than ended");
}

#[test]
fn a_million_command_cross_product_is_refused_before_any_work() {
    let list = |name: &str| {
        format!(
            "{name}={}",
            (1..=1000)
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(",")
        )
    };
    let (a, b) = (list("a"), list("b"));
    let start = Instant::now();
    let out = run(&["bench", "--runs", "1", "-L", &a, "-L", &b, "true {a} {b}"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("make 1000000 commands") && stderr(&out).contains("--max-commands"),
        "{}",
        stderr(&out)
    );
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_probe_spec_cannot_inject_program_text() {
    for spec in [
        r#"x=uprobe:/bin/true:main/{system("id")}..uretprobe:/bin/true:main"#,
        "x=uprobe:/bin/true:main..uretprobe:/bin/true:main;kprobe:do_exit",
        "x=usdt:/bin/true:p:n}..usdt:/bin/true:p:m",
        "x{=uprobe:/bin/true:main..uretprobe:/bin/true:main",
    ] {
        let out = run(&["live", "--span", spec, "--print-program"]);
        assert_eq!(out.status.code(), Some(2), "{spec}: {}", stdout(&out));
        assert!(stdout(&out).is_empty(), "{spec}: a program was printed");
    }
    let out = run(&[
        "live",
        "--rate",
        "uprobe:/bin/tr ue:main",
        "--print-program",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("make a symlink"), "{}", stderr(&out));
}

#[test]
fn a_directory_is_not_a_result() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    for args in [
        vec!["compare", d, d],
        vec!["report", d, "-o", "/dev/null"],
        vec!["wayland", d],
    ] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(!stderr(&out).contains("panicked"), "{args:?}");
    }
}

#[test]
fn an_absurd_payload_is_refused_before_any_allocation() {
    let out = run(&[
        "lab",
        "ipc",
        "--transport",
        "pipe",
        "--payload",
        "100000MiB",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("at most 64 MiB"), "{}", stderr(&out));
}

#[test]
fn one_sigterm_ends_a_live_trace_while_bpftrace_starts() {
    if !crate::live::live_available() {
        return;
    }
    let mut sleeper = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let pid = sleeper.id().to_string();
    let spec = "x=uprobe:/bin/sleep:main..uretprobe:/bin/sleep:main";
    let (took, code) = terminate(
        &["live", "--pid", &pid, "--span", spec],
        Duration::from_millis(200),
    );
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    assert!(
        took < Duration::from_secs(3),
        "still running {took:?} after SIGTERM"
    );
    assert!(code.is_some(), "killed rather than ended");
}

#[test]
fn one_sigterm_ends_an_ipc_lab_run() {
    let (took, code) = terminate(
        &[
            "lab",
            "ipc",
            "--transport",
            "pipe,unix-stream",
            "--peer",
            "process",
            "--count",
            "100000000",
            "--max-time",
            "60s",
        ],
        Duration::from_millis(500),
    );
    assert!(
        took < Duration::from_secs(3),
        "still running {took:?} after SIGTERM"
    );
    // A graceful stop: the partial results are printed and the exit status is 0.
    assert_eq!(code, Some(0));
}

/// Runs latscope in `dir` with its output in files; returns its exit code, its stderr and its
/// peak RSS in KiB (from wait4, so it is latscope's own).
#[allow(clippy::zombie_processes)] // reaped by wait4 below, which also gives its rusage
fn run_measured(dir: &std::path::Path, args: &[&str]) -> (Option<i32>, String, i64) {
    let err = dir.join("stderr.txt");
    let child = util::latscope()
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(dir.join("stdout.txt")).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let (mut status, mut usage) = (0, unsafe { std::mem::zeroed::<libc::rusage>() });
    // SAFETY: waits for the child we spawned; status and usage are valid for writes.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32);
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    (code, std::fs::read_to_string(err).unwrap(), usage.ru_maxrss)
}

/// Writes the bad inputs every file-reading command is tried on.
fn bad_inputs(dir: &std::path::Path) {
    let doc = |edit: &str| {
        std::fs::read_to_string(util::root().join("tests/data/docs/spans-live.json"))
            .unwrap()
            .replacen("\"count\":1000", edit, 1)
    };
    let files: [(&str, Vec<u8>); 9] = [
        ("empty.json", Vec::new()),
        (
            "garbage.bin",
            (0..3000u32).map(|i| (i * 7919 % 251) as u8).collect(),
        ),
        (
            "truncated.json",
            doc("\"count\":1000").as_bytes()[..700].to_vec(),
        ),
        ("negative.json", doc("\"count\":-5").into_bytes()),
        ("nan.json", doc("\"count\":\"NaN\"").into_bytes()),
        ("huge.json", doc("\"count\":1e300").into_bytes()),
        (
            "wrong-kind.json",
            br#"{"kind":"flamegraph","version":1}"#.to_vec(),
        ),
        ("newer.json", br#"{"kind":"spans","version":7}"#.to_vec()),
        ("no-kind.json", br#"{"spans":[]}"#.to_vec()),
    ];
    for (name, bytes) in files {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
    std::fs::create_dir(dir.join("a-directory")).unwrap();
}

#[test]
fn bad_inputs_give_a_clear_error_no_panic_and_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    bad_inputs(d);
    let expected = [
        ("empty.json", "not JSON: EOF"),
        ("garbage.bin", "not UTF-8 text"),
        ("truncated.json", "not JSON: EOF while parsing"),
        ("negative.json", "invalid value: integer `-5`"),
        ("nan.json", "invalid type: string \"NaN\""),
        ("huge.json", "invalid type: floating point `1e+300`"),
        ("wrong-kind.json", "unknown kind \"flamegraph\""),
        ("newer.json", "a spans document of version 7"),
        ("no-kind.json", "no \"kind\""),
        ("a-directory", "Is a directory"),
        ("missing.json", "No such file"),
    ];
    let mut table = String::new();
    for (file, message) in expected {
        for cmd in [
            vec!["compare", file, file],
            vec!["report", file, "-o", "r.html"],
            vec!["plot", file, "-o", "p.svg"],
            vec!["export", file, "--to", "hlog"],
            vec!["bench", "--compare", file, file],
        ] {
            let (code, err, rss) = run_measured(d, &cmd);
            table.push_str(&format!(
                "{code:?} {rss:>7} KiB  {cmd:?}: {}",
                err.lines().next().unwrap_or("")
            ));
            table.push('\n');
            assert_eq!(code, Some(1), "{cmd:?}: {err}");
            assert!(
                err.contains(message),
                "{cmd:?}: expected '{message}' in: {err}"
            );
            assert!(!err.contains("panicked"), "{cmd:?}: {err}");
            assert!(rss < 100 * 1024, "{cmd:?} used {rss} KiB");
        }
    }
    eprintln!("{table}");
}

#[test]
fn usage_mistakes_exit_2_naming_the_option() {
    let dir = tempfile::tempdir().unwrap();
    let rates = (1..=2000)
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let rows: [(&[&str], &str); 11] = [
        (
            &["lab", "ipc", "--pattern", "open-loop", "--rate", &rates],
            "--max-configs",
        ),
        (&["lab", "queue", "--batches", "0"], "--batches"),
        (
            &["lab", "queue", "--batches", "100000000000"],
            "more than half of this machine's",
        ),
        (&["lab", "queue", "--sweep", "gap="], "has no values"),
        (&["lab", "queue", "--prep", "soon"], "--prep"),
        (&["bench", "--runs", "0", "true"], "--runs"),
        (&["bench", "--noise", "150%", "true"], "--noise"),
        (
            &["bench", "-n", "a", "-n", "b", "true"],
            "at most one name per command",
        ),
        (
            &[
                "live",
                "--duration",
                "1.5s",
                "--span",
                "x=uprobe:/bin/true:main..uretprobe:/bin/true:main",
            ],
            "--duration",
        ),
        (&["lab", "ipc", "--count", "0"], "--count"),
        (
            &["compare", "--format", "csv", "a", "b"],
            "does not write --format csv",
        ),
    ];
    for (args, message) in rows {
        let (code, err, _) = run_measured(dir.path(), args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(
            err.contains(message),
            "{args:?}: expected '{message}' in: {err}"
        );
    }
}

#[test]
fn a_benchmarked_command_that_forks_a_daemon_or_floods_its_output_is_measured_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    for command in ["sleep 30 & exit 0", "head -c 100000000 /dev/zero"] {
        let start = Instant::now();
        let (code, err, rss) =
            run_measured(dir.path(), &["bench", "--runs", "2", "--shell", command]);
        assert_eq!(code, Some(0), "{command}: {err}");
        assert!(start.elapsed() < Duration::from_secs(20), "{command}");
        assert!(rss < 100 * 1024, "{command}: {rss} KiB");
    }
}

#[test]
fn one_sigterm_ends_every_other_command_while_it_is_blocked_or_busy() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("result.fifo");
    mkfifo(&fifo);
    let f = fifo.to_str().unwrap();
    let out = dir.path().join("out");
    let o = out.to_str().unwrap();
    let rows: [&[&str]; 6] = [
        &["compare", f, f],
        &["report", f, "-o", o],
        &["plot", f, "-o", o],
        &["export", f, "--to", "hlog"],
        &[
            "lab",
            "queue",
            "--real",
            "--batches",
            "100000000",
            "--exec",
            "1ms",
        ],
        &["demo"],
    ];
    for args in rows {
        let (took, code) = terminate(args, Duration::from_millis(400));
        assert!(
            took < Duration::from_secs(3),
            "{args:?}: still running {took:?} after SIGTERM"
        );
        assert!(code.is_some() || took < Duration::from_secs(3), "{args:?}");
    }
}

#[test]
fn an_unreadable_file_is_an_error_naming_it_for_every_reader() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return; // as another user the file below would simply be unreadable by its owner
    }
    let dir = tempfile::tempdir().unwrap();
    // The directory is 0700 root: nobody may enter it, whatever the file's own mode.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let doc = dir.path().join("secret.json");
    std::fs::copy(util::root().join("tests/data/docs/spans-live.json"), &doc).unwrap();
    let out_dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::chown(out_dir.path(), Some(65534), Some(65534)).unwrap();
    let f = doc.to_str().unwrap();
    let log = dir.path().join("client.log");
    std::fs::write(&log, "").unwrap();
    let rows: [&[&str]; 6] = [
        &["compare", f, f],
        &["report", f, "-o", "r.html"],
        &["plot", f, "-o", "p.svg"],
        &["export", f, "--to", "hlog"],
        &["bench", "--compare", f, f],
        &["wayland", log.to_str().unwrap()],
    ];
    for args in rows {
        let out = util::latscope()
            .args(args)
            .current_dir(out_dir.path())
            .uid(65534)
            .gid(65534)
            .output()
            .unwrap();
        let err = util::stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("Permission denied"), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}
