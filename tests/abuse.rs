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
/// peak RSS in KiB (latscope's own: see [`run_usage`]).
fn run_measured(dir: &std::path::Path, args: &[&str]) -> (Option<i32>, String, i64) {
    let (code, err, rss, _) = run_usage(dir, args);
    (code, err, rss)
}

/// [`run_measured`], with the CPU seconds (user and system) latscope used.
///
/// Measured by GNU time, not by this process's `wait4`: a child's `ru_maxrss` includes the
/// resident size of the process it was spawned from (Linux records the old memory map's peak
/// at `execve`), and this test binary holds up to 160 MB of other tests' inputs at times, which
/// became every child's "peak". `time` is small: latscope's figure is its own.
fn run_usage(dir: &std::path::Path, args: &[&str]) -> (Option<i32>, String, i64, f64) {
    let err = dir.join("stderr.txt");
    let usage = dir.join("usage.txt");
    let status = std::process::Command::new("/usr/bin/time")
        .args(["-f", "%M %U %S", "-o"])
        .arg(&usage)
        .arg(util::latscope().get_program())
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(dir.join("stdout.txt")).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .status()
        .expect("/usr/bin/time (Debian package time: scripts/capture/install-deps.sh)");
    let usage = std::fs::read_to_string(&usage).unwrap();
    // A signal's end is a line of its own before the figures ("Command terminated by signal 9").
    let killed = usage.contains("terminated by signal");
    let figures: Vec<f64> = usage
        .lines()
        .last()
        .unwrap_or_else(|| panic!("no figures from time: {usage:?}"))
        .split_whitespace()
        .map(|f| f.parse().unwrap_or_else(|_| panic!("{usage:?}")))
        .collect();
    let code = if killed { None } else { status.code() };
    (
        code,
        std::fs::read_to_string(err).unwrap(),
        figures[0] as i64,
        figures[1] + figures[2],
    )
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
    let rows: [(&[&str], &str); 13] = [
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
        (&["lab", "gpu", "--requests", "0"], "--requests"),
        (&["lab", "gpu", "--spacing", "soon"], "--spacing"),
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
fn a_command_with_nothing_to_keep_ends_by_sigterm_at_once_as_without_a_handler() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("result.fifo");
    mkfifo(&fifo);
    let mut child = util::latscope()
        .args(["compare", fifo.to_str().unwrap(), fifo.to_str().unwrap()])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let sent = Instant::now();
    // SAFETY: a plain kill(2) of the child we started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    // Blocked opening a FIFO, which the standard library restarts after EINTR: only the
    // watchdog can end it, and it does so without the 2 s grace of commands that keep results.
    assert!(
        sent.elapsed() < Duration::from_secs(1),
        "{:?}",
        sent.elapsed()
    );
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
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

// Issue 30, the second pass: each row below failed before its fix. The figures each prints
// (exit code, peak RSS, seconds) are the closing note's "after" column.

/// Runs latscope in `dir` and prints its row of the table: exit code, peak RSS, seconds.
fn row(dir: &std::path::Path, args: &[&str]) -> (Option<i32>, String, i64) {
    let start = Instant::now();
    let (code, err, rss) = run_measured(dir, args);
    eprintln!(
        "{code:?} {rss:>7} KiB {:>6.2} s  {args:?}: {}",
        start.elapsed().as_secs_f64(),
        err.lines().last().unwrap_or("")
    );
    (code, err, rss)
}

/// The real `spans-wayland.json` with its first series' HdrHistogram replaced: `edit` gets
/// the decoded bytes, and the series' count is set to `count` (kept when None).
fn with_hdr(edit: impl Fn(&mut Vec<u8>), count: Option<u64>) -> Vec<u8> {
    use base64::Engine;
    let text =
        std::fs::read_to_string(util::root().join("tests/data/docs/spans-wayland.json")).unwrap();
    let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let series = &mut doc["spans"][0];
    let data = series["histogram"]["hdr"]["data"].as_str().unwrap();
    let mut bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .unwrap();
    edit(&mut bytes);
    series["histogram"]["hdr"]["data"] = base64::engine::general_purpose::STANDARD
        .encode(&bytes)
        .into();
    if let Some(count) = count {
        series["count"] = count.into();
    }
    doc["spans"] = serde_json::Value::Array(vec![series.clone()]);
    doc.to_string().into_bytes()
}

/// An HdrHistogram of `counts` (value, count), V2-encoded.
fn hdr_of(counts: &[(u64, u64)]) -> Vec<u8> {
    use hdrhistogram::serialization::{Serializer, V2Serializer};
    let mut h = hdrhistogram::Histogram::<u64>::new(3).unwrap();
    for &(v, n) in counts {
        h.record_n(v, n).unwrap();
    }
    let mut bytes = Vec::new();
    V2Serializer::new().serialize(&h, &mut bytes).unwrap();
    bytes
}

#[test]
fn an_hdr_claiming_a_4_gib_payload_is_refused_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let forged = with_hdr(
        |b| b[4..8].copy_from_slice(&0xFFFF_FFF0u32.to_be_bytes()),
        None,
    );
    std::fs::write(dir.path().join("forged.json"), forged).unwrap();
    let good = util::root().join("tests/data/docs/spans-wayland.json");
    let good = good.to_str().unwrap();
    for args in [
        &["merge", "forged.json", good, "-o", "m.json"][..],
        &["export", "forged.json", "--to", "hlog"],
        &["compare", "forged.json", "forged.json"],
        &["report", "forged.json", "-o", "r.html"],
    ] {
        let (code, err, rss) = row(dir.path(), args);
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(
            err.contains("claims a 4294967280-byte payload but holds 73 bytes"),
            "{args:?}: {err}"
        );
        assert!(rss < 100 * 1024, "{args:?} used {rss} KiB");
    }
}

#[test]
fn bpftrace_counts_adding_past_2_64_are_an_error_not_a_wrapped_count() {
    let dir = tempfile::tempdir().unwrap();
    let line = format!(
        r#"{{"type": "hist", "data": {{"@ns": [{{"min": 0, "max": 1, "count": {}}}, {{"min": 2, "max": 3, "count": 5}}]}}}}"#,
        u64::MAX
    );
    std::fs::write(dir.path().join("b.json"), line + "\n").unwrap();
    for args in [
        &["compare", "b.json", "b.json"][..],
        &["report", "b.json", "-o", "r.html"],
    ] {
        let (code, err, _) = row(dir.path(), args);
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(
            err.contains(
                "b.json: invalid bpftrace document: the counts of @ns add up past 2^64 - 1"
            ),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn an_hlog_of_many_tags_with_the_widest_headers_is_read_in_bounded_memory() {
    use base64::Engine;
    // An empty V2 histogram of 5 digits over 1..2^64-1: 64 bytes of header whose buckets take
    // 50 MB once decoded. Sixty tags of it are 4 KB of log.
    let mut v2 = 0x1c84_9313u32.to_be_bytes().to_vec();
    v2.extend(0u32.to_be_bytes()); // payload length
    v2.extend(0u32.to_be_bytes()); // normalizing offset
    v2.extend(5u32.to_be_bytes()); // significant digits
    v2.extend(1u64.to_be_bytes()); // lowest
    v2.extend(u64::MAX.to_be_bytes()); // highest
    v2.extend(1f64.to_be_bytes()); // conversion ratio
    v2.extend([0x00, 0x02]); // no count at index 0, one at index 1
    v2[4..8].copy_from_slice(&2u32.to_be_bytes());
    let encoded = base64::engine::general_purpose::STANDARD.encode(&v2);
    let log: String = (0..60)
        .map(|t| format!("Tag=t{t},0.000,1.000,1.0,{encoded}\n"))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("wide.hlog"), log).unwrap();
    let (code, err, rss) = row(dir.path(), &["export", "wide.hlog", "--to", "bpftrace"]);
    assert_eq!(code, Some(0), "{err}");
    // One decoded header at a time (50 MB), not sixty (3 GB).
    assert!(rss < 200 * 1024, "used {rss} KiB");
}

#[test]
fn a_character_device_is_not_read_as_a_result() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["merge", "/dev/zero", "/dev/zero", "-o", "m.json"][..],
        &["compare", "/dev/zero", "/dev/zero"],
        &["report", "/dev/zero", "-o", "r.html"],
        &["plot", "/dev/zero", "-o", "p.svg"],
        &["export", "/dev/zero", "--to", "parquet", "-o", "x.parquet"],
    ] {
        let (code, err, rss) = row(dir.path(), args);
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(
            err.contains("a character device, not a result"),
            "{args:?}: {err}"
        );
        assert!(rss < 100 * 1024, "{args:?} used {rss} KiB");
    }
}

#[test]
fn parquet_rows_are_streamed_and_absurd_sample_counts_are_refused_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let doc = |counts: &[(u64, u64)], total: u64| {
        let hdr = hdr_of(counts);
        with_hdr(move |b| *b = hdr.clone(), Some(total))
    };
    // A million samples in 1.3 KB: rows are written a group at a time (6.1 GB for 10^7 before).
    std::fs::write(
        d.join("million.json"),
        doc(&[(10_823_000, 1_000_000)], 1_000_000),
    )
    .unwrap();
    let (code, err, rss) = row(
        d,
        &["export", "million.json", "--to", "parquet", "-o", "m.pq"],
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("(1000000 rows)"), "{err}");
    // 120 MB here, whatever the count (10^7: 124 MB); 610 MB before for 10^6.
    assert!(rss < 200 * 1024, "used {rss} KiB");
    // 2^40 samples aborted (rc 134) and left a temporary file; counts past u64 panicked.
    std::fs::write(d.join("huge.json"), doc(&[(10_823_000, 1 << 40)], 1 << 40)).unwrap();
    // The encoding holds counts up to 2^63 - 1: three of them pass 2^64.
    let most = i64::MAX as u64;
    std::fs::write(
        d.join("overflow.json"),
        doc(
            &[(10_823_000, most), (20_000_000, most), (27_123_000, most)],
            u64::MAX,
        ),
    )
    .unwrap();
    for (file, message) in [
        (
            "huge.json",
            "1099511627776 rows (one per sample); at most 100000000 (--max-rows",
        ),
        ("overflow.json", "overflow 64 bits"),
    ] {
        let (code, err, rss) = row(d, &["export", file, "--to", "parquet", "-o", "x.pq"]);
        assert_eq!(code, Some(1), "{file}: {err}");
        assert!(err.contains(message), "{file}: {err}");
        assert!(!err.contains("panicked"), "{file}: {err}");
        assert!(rss < 100 * 1024, "{file} used {rss} KiB");
    }
    let left: Vec<_> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with('.') || n == "x.pq")
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn a_writer_never_replaces_a_device_or_follows_a_planted_link() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return; // mknod needs root
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let null = d.join("null");
    let c = std::ffi::CString::new(null.to_str().unwrap()).unwrap();
    // SAFETY: mknod with a valid NUL-terminated path; a node of /dev/null's numbers.
    assert_eq!(
        unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) },
        0
    );
    let doc = util::root().join("tests/data/docs/spans-live.json");
    let doc = doc.to_str().unwrap();
    // merge -o /dev/null made /dev/null root's 0600 regular file.
    let (code, err, _) = row(d, &["merge", doc, doc, "-o", "null"]);
    assert_eq!(code, Some(0), "{err}");
    use std::os::unix::fs::FileTypeExt;
    assert!(
        std::fs::symlink_metadata(&null)
            .unwrap()
            .file_type()
            .is_char_device()
    );
    // report -o LINK overwrote the file the link points to.
    std::fs::write(d.join("victim"), "precious").unwrap();
    std::os::unix::fs::symlink(d.join("victim"), d.join("link")).unwrap();
    let (code, err, _) = row(d, &["report", doc, "-o", "link"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        std::fs::read_to_string(d.join("victim")).unwrap(),
        "precious"
    );
}

#[test]
fn a_bench_output_that_cannot_be_written_is_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    for option in [
        "--export-json",
        "--save",
        "--export-csv",
        "--export-markdown",
    ] {
        let start = Instant::now();
        let (code, err, _) = row(
            dir.path(),
            &[
                "bench",
                "--runs",
                "5",
                "sleep 0.2",
                option,
                "missing/dir/out",
            ],
        );
        assert_eq!(code, Some(1), "{option}: {err}");
        assert!(
            err.contains(&format!(
                "{option} missing/dir/out: cannot create a file in missing/dir"
            )),
            "{option}: {err}"
        );
        assert!(
            start.elapsed() < Duration::from_millis(900),
            "{option}: it ran first"
        );
    }
}

#[test]
fn the_lab_queue_memory_check_counts_kept_spans_of_every_sweep_row() {
    let dir = tempfile::tempdir().unwrap();
    let (code, err, rss) = row(
        dir.path(),
        &[
            "lab",
            "queue",
            "--batches",
            "10000000",
            "--max-spans",
            "10000000",
            "--sweep",
            "gap=0,1,2,3",
        ],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("with --max-spans 10000000 over 4 configuration(s)"),
        "{err}"
    );
    // Refused before any allocation: quick (its peak RSS is printed; measured through a
    // vfork it can be the test process's own, so it is not asserted here).
    let _ = rss;
}

/// Whether a stopped run printed and saved: stdout names `what`, `save` holds a document.
fn kept(out: &std::process::Output, save: &std::path::Path, what: &str) -> bool {
    let printed = String::from_utf8_lossy(&out.stdout).contains(what);
    let saved = std::fs::read_to_string(save).is_ok_and(|t| t.starts_with('{'));
    printed && saved
}

#[test]
fn two_sigterms_as_timeout_sends_them_lose_no_result() {
    let dir = tempfile::tempdir().unwrap();
    let save = dir.path().join("ipc.json");
    let mut lost = 0;
    for _ in 0..10 {
        let _ = std::fs::remove_file(&save);
        let child = util::latscope()
            .args([
                "lab",
                "ipc",
                "--transport",
                "pipe",
                "--count",
                "100000000",
                "--max-time",
                "60s",
                "--save",
            ])
            .arg(&save)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(400));
        // `timeout` signals the child, then its whole group: two SIGTERMs in a row.
        for _ in 0..2 {
            // SAFETY: kill(2) of the child we started.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            std::thread::sleep(Duration::from_millis(5));
        }
        let out = child.wait_with_output().unwrap();
        if !kept(&out, &save, "pipe") || out.status.code() != Some(0) {
            lost += 1;
        }
    }
    assert_eq!(lost, 0, "{lost} of 10 runs lost their results");
}

#[test]
fn long_commands_under_plain_timeout_lose_nothing() {
    if !util::commands_available(&["timeout"], "coreutils timeout") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let save = dir.path().join("saved.json");
    let s = save.to_str().unwrap();
    let csv = util::root().join("tests/data/traces/requests.csv");
    let rows: [(&[&str], &str, bool); 3] = [
        (
            &[
                "lab",
                "ipc",
                "--transport",
                "pipe",
                "--count",
                "100000000",
                "--max-time",
                "60s",
                "--save",
                s,
            ],
            "pipe",
            true,
        ),
        (
            &[
                "lab",
                "queue",
                "--real",
                "--batches",
                "100000",
                "--exec",
                "1ms",
            ],
            "latency (prep end",
            false,
        ),
        (
            &[
                "spans",
                "--span",
                "req=request_start..request_done",
                "--key",
                "id",
                "--time",
                "t_us",
                "--time-unit",
                "us",
                "--name",
                "event",
                "/dev/stdin",
            ],
            "req",
            false,
        ),
    ];
    for (args, what, saves) in rows {
        let mut lost = 0;
        for _ in 0..10 {
            let _ = std::fs::remove_file(&save);
            // A pipe that holds the trace and then stays open: the reader blocks at its end.
            let mut command = std::process::Command::new("timeout");
            command
                .arg("0.5")
                .arg(env!("CARGO_BIN_EXE_latscope"))
                .args(args)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null());
            let mut child = command.spawn().unwrap();
            let mut stdin = child.stdin.take().unwrap();
            std::io::Write::write_all(&mut stdin, &std::fs::read(&csv).unwrap()).unwrap();
            let out = child.wait_with_output().unwrap();
            drop(stdin);
            let printed = String::from_utf8_lossy(&out.stdout).contains(what);
            if !printed || (saves && !kept(&out, &save, what)) {
                lost += 1;
            }
        }
        assert_eq!(lost, 0, "{args:?}: {lost} of 10 runs lost their results");
    }
}

#[test]
fn a_chrome_event_longer_than_1_mib_is_skipped_and_counted_not_buffered() {
    let dir = tempfile::tempdir().unwrap();
    let event = |name: &str, ts: u64, dur: u64| {
        format!(r#"{{"name":"{name}","ph":"X","ts":{ts},"dur":{dur},"pid":1,"tid":1}}"#)
    };
    let huge = "x".repeat(3 << 20);
    let trace = format!(
        r#"{{"traceEvents":[{},{},{}]}}"#,
        event("a", 1, 5),
        event(&huge, 2, 3),
        event("a", 10, 7)
    );
    std::fs::write(dir.path().join("trace.json"), trace).unwrap();
    let (code, err, _) = row(dir.path(), &["spans", "-f", "json", "trace.json"]);
    assert_eq!(code, Some(0), "{err}");
    let out = std::fs::read_to_string(dir.path().join("stdout.txt")).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let spans = doc["spans"].as_array().unwrap();
    assert_eq!(spans.len(), 1, "the long one is not a series: {spans:?}");
    assert_eq!(spans[0]["count"], 2);
    let warnings = doc["warnings"].to_string();
    assert!(
        warnings
            .contains("1 event(s) of trace.json are longer than 1 MiB: skipped unread (too_long)"),
        "{warnings}"
    );
    assert!(!out.contains("xxxxxxxx"), "the long name was kept");
}

/// A process's `/proc/PID/status` field, in its unit (kB or a count).
fn proc_status(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

#[test]
fn the_metrics_server_bounds_a_200_mb_header_and_2000_idle_connections_and_keeps_serving() {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    if !crate::live::live_available() {
        return;
    }
    let _heavy = util::heavy();
    let dir = tempfile::tempdir().unwrap();
    let t = crate::live::target(dir.path());
    let save = dir.path().join("live.json");
    let started = Instant::now();
    let (mut latscope, port) =
        crate::fleet::serve_live(&t, &["400", "2", "0", "30000"], &save, &[]);
    let pid = latscope.0.id();
    // The first snapshot served before the hostile clients come (at most 10 s): a scrape
    // before it is answered with no series (a flood that ends quickly left no time for one).
    let first = Instant::now();
    while first.elapsed() < Duration::from_secs(10) {
        let (_, body) = crate::fleet::http_get(port, "/metrics", "text/plain");
        if String::from_utf8_lossy(&body).contains("latscope_span") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // 200 MB of one header line, sent until the server stops taking it (at most 10 s).
    let flood = |port: u16| {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut sent = 0usize;
        let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nX-Flood: ");
        let chunk = vec![b'a'; 1 << 20];
        let begun = Instant::now();
        while sent < 200 << 20 && begun.elapsed() < Duration::from_secs(10) {
            match s.write(&chunk) {
                Ok(n) => sent += n,
                Err(_) => break,
            }
        }
        let mut answer = Vec::new();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let _ = s.read_to_end(&mut answer);
        (sent, String::from_utf8_lossy(&answer).into_owned())
    };
    let (sent, answer) = flood(port);
    // Another one while the idle crowd is there and the scrapes are made.
    let second = std::thread::spawn(move || flood(port));
    // 2,000 idle connections on loopback (each connect bounded by the kernel's backlog).
    let mut idle = Vec::new();
    for _ in 0..2000 {
        match TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(500))
        {
            Ok(s) => idle.push(s),
            Err(_) => continue,
        }
    }
    let threads = proc_status(pid, "Threads");
    // Scrapes while the flood and the idle crowd are connected.
    let mut scraped = 0;
    for _ in 0..5 {
        let (head, body) = crate::fleet::http_get(port, "/metrics", "text/plain");
        if head.contains(" 200 ") && String::from_utf8_lossy(&body).contains("latscope_span") {
            scraped += 1;
        }
    }
    let _ = second.join().unwrap();
    let rss_kb = proc_status(pid, "VmHWM");
    drop(idle);
    // Until the target's 400 requests are all served (at most 10 s more), then a stop.
    let waited = Instant::now();
    while waited.elapsed() < Duration::from_secs(10) {
        let (_, body) = crate::fleet::http_get(port, "/metrics", "text/plain");
        let all = String::from_utf8_lossy(&body)
            .lines()
            .any(|l| l.starts_with("latscope_span_nanoseconds_count") && l.ends_with(" 400"));
        if all {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // SAFETY: kill(2) of the latscope we started: it stops, prints and saves.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let status = latscope.0.wait().unwrap();
    eprintln!(
        "{:?} {rss_kb:>7} KiB {:>6.2} s  live --serve, a 200 MB header ({} MB taken, answer {:?}) and 2000 idle connections: {scraped}/5 scrapes, {threads} threads",
        status.code(),
        started.elapsed().as_secs_f64(),
        sent >> 20,
        answer.lines().next().unwrap_or("none"),
    );
    assert_eq!(scraped, 5, "scrapes failed beside hostile clients");
    assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");
    assert!(threads < 20, "{threads} threads for idle connections");
    assert!(rss_kb < 100 * 1024, "peak RSS {rss_kb} KiB");
    assert_eq!(status.code(), Some(0));
    assert_eq!(crate::live::saved(&save)["spans"][0]["count"], 400);
}

/// The processes whose command line is `sleep SECONDS` (a marker no other test uses); killed
/// as they are counted, so that a failing test leaves nothing behind.
fn sleepers(seconds: &str) -> usize {
    let wanted = format!("sleep\0{seconds}\0");
    let mut found = 0;
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if std::fs::read(entry.path().join("cmdline")).is_ok_and(|c| c == wanted.as_bytes()) {
            found += 1;
            // SAFETY: kill(2) of a `sleep` this test's benchmark started.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
    found
}

#[test]
fn a_timed_out_benchmark_run_takes_its_whole_process_group_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let (code, err, _) = row(
        dir.path(),
        &[
            "bench",
            "--runs",
            "2",
            "-i",
            "--counters",
            "none",
            "--timeout",
            "0.3",
            "--shell",
            "sleep 31.4159 & sleep 31.4159",
        ],
    );
    std::thread::sleep(Duration::from_millis(100));
    let left = sleepers("31.4159");
    eprintln!("      {left} sleeps outlived the timed-out runs");
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(left, 0, "the timed-out runs' children outlived them");
}

#[test]
fn sigterm_during_a_long_benchmark_run_kills_its_group_and_prints_and_saves_the_finished_runs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Runs 1-3 are quick; the fourth hangs.
    let command = "n=$(cat count 2>/dev/null || echo 0); echo $((n+1)) > count; [ \"$n\" -lt 3 ] || sleep 31.4160";
    let start = Instant::now();
    let child = util::latscope()
        .args(["bench", "--runs", "10", "--counters", "none", "--shell"])
        .args(["--save", "saved.json", command])
        .current_dir(d)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    while std::fs::read_to_string(d.join("count")).map_or(true, |c| c.trim() != "4")
        && start.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    // SAFETY: kill(2) of the latscope we started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let sent = Instant::now();
    let out = child.wait_with_output().unwrap();
    let took = sent.elapsed();
    std::thread::sleep(Duration::from_millis(100));
    let left = sleepers("31.4160");
    let text = String::from_utf8_lossy(&out.stdout);
    let saved = std::fs::read_to_string(d.join("saved.json")).unwrap_or_default();
    eprintln!(
        "{:?} {:>6.2} s after SIGTERM  bench with a hanging fourth run: {left} sleeps left, printed {:?}, saved {} bytes",
        out.status.code(),
        took.as_secs_f64(),
        text.lines().next().unwrap_or(""),
        saved.len()
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(took < Duration::from_secs(1), "{took:?}");
    assert_eq!(left, 0, "the interrupted run's command outlived latscope");
    assert!(
        text.contains("3 timed runs each") && text.contains("interrupted"),
        "{text}"
    );
    let doc: serde_json::Value = serde_json::from_str(&saved).expect("a saved document");
    assert_eq!(doc["commands"][0]["runs"].as_array().unwrap().len(), 3);
    assert_eq!(doc["interrupted"], true);
}

#[test]
fn ignored_failures_are_counted_in_every_output_of_bench() {
    let dir = tempfile::tempdir().unwrap();
    // Every other run exits 3.
    let command = "n=$(cat count 2>/dev/null || echo 0); echo $((n+1)) > count; [ $((n % 2)) -eq 0 ] || exit 3";
    let mut outputs = Vec::new();
    for format in ["text", "json", "markdown", "csv"] {
        let _ = std::fs::remove_file(dir.path().join("count"));
        let (code, err, _) = row(
            dir.path(),
            &[
                "bench",
                "-i",
                "--runs",
                "4",
                "--counters",
                "none",
                "--shell",
                "--format",
                format,
                command,
            ],
        );
        assert_eq!(code, Some(0), "{err}");
        outputs.push((
            format,
            std::fs::read_to_string(dir.path().join("stdout.txt")).unwrap(),
        ));
    }
    for (format, out) in &outputs {
        let counted = match *format {
            "json" => {
                let doc: serde_json::Value = serde_json::from_str(out).unwrap();
                doc["commands"][0]["failed_runs"] == 2
            }
            "csv" => {
                let header: Vec<&str> = out.lines().next().unwrap().split(',').collect();
                let col = header.iter().position(|h| *h == "failed");
                col.is_some_and(|col| {
                    out.lines()
                        .skip(1)
                        .filter(|l| l.split(',').nth(col) == Some("1"))
                        .count()
                        == 2
                })
            }
            _ => out.contains("2 of 4 runs failed"),
        };
        assert!(
            counted,
            "{format}: the 2 failed runs are not counted in:\n{out}"
        );
    }
}

#[test]
fn spans_by_a_field_of_100000_values_keeps_10000_series_and_folds_the_rest_into_other() {
    use std::fmt::Write;
    let dir = tempfile::tempdir().unwrap();
    let mut csv = String::from("t_us,event,id,client\n");
    for i in 0..200_000u64 {
        let _ = writeln!(csv, "{},request_start,{i},c{}", 3 * i, i % 100_000);
        let _ = writeln!(csv, "{},request_done,{i},", 3 * i + 1);
    }
    std::fs::write(dir.path().join("by.csv"), csv).unwrap();
    let (code, err, rss) = row(
        dir.path(),
        &[
            "spans",
            "--span",
            "req=request_start..request_done",
            "--key",
            "id",
            "--by",
            "client",
            "--time",
            "t_us",
            "--time-unit",
            "us",
            "--name",
            "event",
            "-f",
            "json",
            "by.csv",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    let out = std::fs::read_to_string(dir.path().join("stdout.txt")).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let spans = doc["spans"].as_array().unwrap();
    assert_eq!(spans.len(), 10_001);
    let other = spans.iter().find(|s| s["group"] == "(other)").unwrap();
    // 10,000 values keep their 2 spans each; the other 90,000 values' 180,000 spans fold.
    assert_eq!(other["count"], 180_000);
    assert!(
        err.contains("more than 10000 distinct values: 180000 events of further values were folded into one '(other)' series"),
        "{err}"
    );
    // 227 MB when every series built its histograms (40 MB since they are built past 256
    // distinct latencies).
    assert!(rss < 100 * 1024, "peak RSS {rss} KiB");
}

#[test]
fn a_chrome_trace_of_20000_event_names_is_read_in_under_100_mb() {
    use std::fmt::Write;
    let dir = tempfile::tempdir().unwrap();
    // 20,000 names, two complete events each: 20,000 series of two spans.
    let mut json = String::from("{\"traceEvents\":[");
    for i in 0..40_000u64 {
        let sep = if i == 0 { "" } else { "," };
        let _ = write!(
            json,
            "{sep}{{\"name\":\"ev{}\",\"ph\":\"X\",\"ts\":{},\"dur\":{},\"pid\":1,\"tid\":1}}",
            i / 2,
            10 * i,
            5 + i % 7
        );
    }
    json.push_str("]}");
    std::fs::write(dir.path().join("names.json"), json).unwrap();
    let (code, err, rss) = row(dir.path(), &["spans", "-f", "json", "names.json"]);
    assert_eq!(code, Some(0), "{err}");
    let out = std::fs::read_to_string(dir.path().join("stdout.txt")).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let spans = doc["spans"].as_array().unwrap();
    assert_eq!(spans.len(), 20_000);
    // ev0's spans last 5 and 6 µs: both in the document, exactly.
    let ev0 = spans.iter().find(|s| s["name"] == "ev0").unwrap();
    assert_eq!(ev0["count"], 2, "{ev0}");
    assert_eq!(ev0["min"], 5_000, "{ev0}");
    assert_eq!(ev0["max"], 6_000, "{ev0}");
    // About 33 KiB a series before (662 MB for these 20,000): the histograms were built for
    // every series whatever its number of samples.
    assert!(rss < 100 * 1024, "peak RSS {rss} KiB");
}

#[test]
fn timeline_exports_of_400k_overlapping_spans_in_10000_series_take_linear_time() {
    use std::fmt::Write;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Span i starts at i µs and lasts 50 ms, in series c(i mod 10,000): five lanes a series.
    let mut events: Vec<(u64, &str, u64)> = Vec::new();
    for i in 0..400_000u64 {
        events.push((i, "request_start", i));
        events.push((i + 50_000, "request_done", i));
    }
    events.sort();
    let mut csv = String::from("t_us,event,id,client\n");
    for (t, name, i) in events {
        let client = if name == "request_start" {
            format!("c{}", i % 10_000)
        } else {
            String::new()
        };
        let _ = writeln!(csv, "{t},{name},{i},{client}");
    }
    std::fs::write(d.join("spans.csv"), csv).unwrap();
    let (code, err, _) = run_measured(
        d,
        &[
            "spans",
            "--span",
            "req=request_start..request_done",
            "--key",
            "id",
            "--by",
            "client",
            "--time",
            "t_us",
            "--time-unit",
            "us",
            "--name",
            "event",
            "-f",
            "json",
            "--max-spans",
            "400000",
            "spans.csv",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    std::fs::rename(d.join("stdout.txt"), d.join("spans.json")).unwrap();
    for to in ["chrome-json", "perfetto"] {
        let args = ["export", "spans.json", "--to", to, "-o", "out"];
        let start = Instant::now();
        let (code, err, rss, cpu) = run_usage(d, &args);
        eprintln!(
            "{code:?} {rss:>7} KiB {:>6.2} s ({cpu:.2} s CPU)  {args:?}: {}",
            start.elapsed().as_secs_f64(),
            err.lines().last().unwrap_or("")
        );
        assert_eq!(code, Some(0), "{to}: {err}");
        // Most of it is reading the 39 MB document (about 6 s of CPU in a debug build); a
        // linear search of series and lanes added 11 s more.
        assert!(cpu < 12.0, "{to}: {cpu:.2} s of CPU");
    }
}

/// The real `spans-live.json` (log-linear buckets) with `edit` applied to its first series.
fn live_doc(edit: impl Fn(&mut serde_json::Value)) -> String {
    let text =
        std::fs::read_to_string(util::root().join("tests/data/docs/spans-live.json")).unwrap();
    let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    edit(&mut doc["spans"][0]);
    doc.to_string()
}

#[test]
fn merge_refuses_totals_and_counters_beyond_64_bits_instead_of_writing_them() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Each input is readable; their buckets together hold more than 2^64 values.
    for (file, bucket) in [("a.json", 0), ("b.json", 1)] {
        let doc = live_doc(|s| s["histogram"]["buckets"][bucket]["count"] = (1u64 << 63).into());
        std::fs::write(d.join(file), doc).unwrap();
    }
    let (code, err, _) = row(d, &["merge", "a.json", "b.json", "-o", "m.json"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("bucket counts overflow after merging: not written"),
        "{err}"
    );
    assert!(
        !d.join("m.json").exists(),
        "a document its reader refuses was written"
    );
    // Counters were added with saturation while counts were checked.
    let wayland = std::fs::read_to_string(util::root().join("tests/data/docs/spans-wayland.json"))
        .unwrap()
        .replacen(
            "\"unmatched\":2",
            &format!("\"unmatched\":{}", u64::MAX - 1),
            1,
        );
    std::fs::write(d.join("w.json"), wayland).unwrap();
    let (code, err, _) = row(d, &["merge", "w.json", "w.json", "-o", "m.json"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("its unmatched counter does not fit 64 bits after merging"),
        "{err}"
    );
}

#[test]
fn compare_plot_and_report_refuse_an_hdr_inconsistent_with_its_count_as_merge_does() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("doubled.json"), with_hdr(|_| {}, Some(232))).unwrap();
    std::fs::write(d.join("good.json"), with_hdr(|_| {}, None)).unwrap();
    for args in [
        &["compare", "good.json", "doubled.json"][..],
        &["plot", "doubled.json", "-o", "p.svg"],
        &["report", "doubled.json", "-o", "r.html"],
        &["merge", "good.json", "doubled.json", "-o", "m.json"],
    ] {
        let (code, err, _) = row(d, args);
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(
            err.contains("its HdrHistogram holds 116 values but its count is 232"),
            "{args:?}: {err}"
        );
    }
}

/// `latscope frames -f json` on the logs `client` and `server` (written to `dir`), which must
/// succeed: its document and its peak RSS in KiB.
fn frames_measured(dir: &std::path::Path, client: &str, server: &str) -> (serde_json::Value, i64) {
    let c = util::write(dir, "client.log", client.as_bytes());
    let s = util::write(dir, "server.log", server.as_bytes());
    let args = [
        "frames",
        "-f",
        "json",
        c.to_str().unwrap(),
        s.to_str().unwrap(),
    ];
    let (code, err, rss) = run_measured(dir, &args);
    assert_eq!(code, Some(0), "{err}");
    let doc = serde_json::from_slice(&std::fs::read(dir.join("stdout.txt")).unwrap()).unwrap();
    (doc, rss)
}

/// The committed weston run (tests/data/frames) `copies` times over, each copy's stamps (and
/// display times) moved past the last: (client log, server log).
fn repeated_frames_run(copies: i64) -> (String, String) {
    let data = util::root().join("tests/data/frames");
    let read = |name: &str| std::fs::read_to_string(data.join(name)).unwrap();
    let (client, server) = (
        read("weston-presentation-shm.client.log"),
        read("weston.server.log"),
    );
    let stamp = |line: &str| -> Option<i64> {
        let (ms, rest) = line.strip_prefix('[')?.split_once(']')?;
        let (ms, us) = ms.trim().split_once('.')?;
        let _ = rest;
        Some(ms.parse::<i64>().ok()? * 1_000 + us.parse::<i64>().ok()?)
    };
    let stamps: Vec<i64> = client
        .lines()
        .chain(server.lines())
        .filter_map(stamp)
        .collect();
    let period = stamps.iter().max().unwrap() - stamps.iter().min().unwrap() + 1_000_000;
    let repeat = |log: &str| {
        let mut out = String::new();
        for k in 0..copies {
            let d = k * period;
            for line in log.lines() {
                let Some(at) = stamp(line) else {
                    out.push_str(line);
                    out.push('\n');
                    continue;
                };
                let at = (at + d).rem_euclid(1 << 32);
                let rest = &line[line.find(']').unwrap() + 1..];
                out.push_str(&format!(
                    "[{:7}.{:03}]{}\n",
                    at / 1_000,
                    at % 1_000,
                    shifted(rest, d)
                ));
            }
        }
        out
    };
    (repeat(&client), repeat(&server))
}

/// `presented(sec_hi, sec_lo, nsec, ...)` with its display time `d_us` later.
fn shifted(rest: &str, d_us: i64) -> String {
    let Some((head, args)) = rest.split_once(".presented(") else {
        return rest.to_string();
    };
    let n: Vec<&str> = args.splitn(4, ", ").collect();
    let (hi, lo, ns): (i128, i128, i128) = (
        n[0].parse().unwrap(),
        n[1].parse().unwrap(),
        n[2].parse().unwrap(),
    );
    let t = ((hi << 32) + lo) * 1_000_000_000 + ns + i128::from(d_us) * 1_000;
    let (sec, ns) = (t / 1_000_000_000, t % 1_000_000_000);
    format!(
        "{head}.presented({}, {}, {ns}, {}",
        sec >> 32,
        sec & 0xffff_ffff,
        n[3]
    )
}

#[test]
fn frames_reads_long_logs_in_memory_that_follows_the_frames_not_the_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let mut figures = Vec::new();
    for copies in [40, 400] {
        let (client, server) = repeated_frames_run(copies);
        let bytes = (client.len() + server.len()) as i64;
        let (doc, rss) = frames_measured(dir.path(), &client, &server);
        let p50 = |name: &str| {
            let s = doc["spans"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["name"] == name)
                .unwrap();
            (s["count"].as_u64().unwrap(), s["p50"].as_u64().unwrap())
        };
        figures.push((
            bytes,
            rss,
            p50("commit_to_presented"),
            p50("commit_to_compositor"),
        ));
    }
    let [
        (small_bytes, small_rss, small_c2p, small_c2c),
        (bytes, rss, c2p, c2c),
    ] = figures[..]
    else {
        unreachable!()
    };
    // ten copies of the run: ten times the frames, the same distributions
    assert_eq!((c2p.0, c2c.0), (small_c2p.0 * 10, small_c2c.0 * 10));
    assert_eq!((c2p.1, c2c.1), (small_c2p.1, small_c2c.1));
    // ten times the input read, not ten times the memory: what is held more is the frames
    // found (a small record each, 78 per copy), under half a byte per byte read more, where
    // logs held whole took more than a byte per byte
    assert!(
        bytes - small_bytes > 60 << 20,
        "{small_bytes} -> {bytes} bytes"
    );
    assert!(
        (rss - small_rss) * 1024 < (bytes - small_bytes) / 2,
        "{small_rss} KiB for {small_bytes} bytes, {rss} KiB for {bytes} bytes"
    );
}

#[test]
fn a_client_idle_for_twenty_minutes_while_the_compositor_serves_another_holds_none_of_them() {
    let dir = tempfile::tempdir().unwrap();
    let stamp = |us: u64| format!("[{:7}.{:03}]", us / 1_000, us % 1_000);
    let t0 = 1_000_000_000;
    let mut server = format!("{} wl_surface@3.commit()\n", stamp(t0 + 100));
    let mut t = t0 + 1_000;
    // another client's damage every half millisecond for 20 minutes: 2.4 million messages
    for _ in 0..2_400_000 {
        server.push_str(&stamp(t));
        server.push_str(" wl_surface@7.damage(0, 0, 100, 100)\n");
        t += 500;
    }
    server.push_str(&format!("{} wl_surface@3.commit()\n", stamp(t + 100)));
    let client = format!(
        "{}  -> wl_surface@3.commit()\n{}  -> wl_surface@3.commit()\n",
        stamp(t0),
        stamp(t)
    );
    let (doc, rss) = frames_measured(dir.path(), &client, &server);
    assert_eq!(doc["frames"]["joined"]["requests_found"], 2);
    // the server's messages are forgotten as they are read: far less held than read
    assert!(
        (rss as usize) * 1024 < server.len() / 3,
        "{rss} KiB for {} bytes",
        server.len()
    );
}
