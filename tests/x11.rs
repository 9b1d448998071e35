//! `latscope lab x11` on real X servers started by the tests (Debian's Xvfb), next to x11perf
//! and the real libkscreen (`kscreen-doctor`).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::{latscope, run, stderr, stdout};

/// Whether Xvfb, x11perf and kscreen-doctor are installed; panics when they must be.
fn x11_available() -> bool {
    crate::util::commands_available(
        &["Xvfb", "x11perf", "kscreen-doctor", "dbus-daemon"],
        "Xvfb, x11-apps (x11perf) or libkf5screen-bin (kscreen-doctor)",
    )
}

/// An Xvfb the test starts itself (no TCP, a free display number), killed when dropped.
struct TestXvfb {
    child: Child,
    display: String,
}

impl TestXvfb {
    fn start(extra: &[&str]) -> TestXvfb {
        TestXvfb::start_with(Command::new("Xvfb"), extra)
    }

    /// An Xvfb whose every thread runs on `cpu` only.
    fn start_on(cpu: usize, extra: &[&str]) -> TestXvfb {
        let mut cmd = Command::new("Xvfb");
        pin(&mut cmd, cpu);
        TestXvfb::start_with(cmd, extra)
    }

    fn start_with(mut cmd: Command, extra: &[&str]) -> TestXvfb {
        let mut child = cmd
            .args(["-displayfd", "1", "-nolisten", "tcp"])
            .args(["-screen", "0", "1280x1024x24"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start Xvfb");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let number: u32 = line.trim().parse().expect("Xvfb printed its display");
        TestXvfb {
            child,
            display: format!(":{number}"),
        }
    }
}

impl Drop for TestXvfb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The first CPU this process may run on.
fn first_cpu() -> usize {
    // SAFETY: a zeroed cpu_set_t is an empty set; sched_getaffinity fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: the size is the set's own.
    let got = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    assert_eq!(
        got,
        0,
        "sched_getaffinity: {}",
        std::io::Error::last_os_error()
    );
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: c < CPU_SETSIZE.
        .find(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .expect("a CPU to run on")
}

/// Makes the command's process (and every thread it starts) run on `cpu` only.
fn pin(cmd: &mut Command, cpu: usize) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure only makes a system call (async-signal-safe) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            if libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    }
}

fn lab(args: &[&str]) -> Output {
    let mut cmd = latscope();
    cmd.args(["lab", "x11"]).args(args).env_remove("DISPLAY");
    cmd.output().unwrap()
}

fn json(out: &Output) -> Value {
    assert!(out.status.success(), "{}", stderr(out));
    serde_json::from_str(&stdout(out)).unwrap_or_else(|e| panic!("{e}: {}", stdout(out)))
}

fn row<'a>(doc: &'a Value, label: &str) -> &'a Value {
    doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| label_of(r) == label)
        .unwrap_or_else(|| panic!("no row {label} in {doc}"))
}

fn label_of(r: &Value) -> String {
    let doc: latscope::doc::x11::X11Result = serde_json::from_value(r.clone()).unwrap();
    doc.label()
}

#[test]
fn a_private_xvfb_runs_every_pattern_and_the_uploads_are_verified() {
    if !x11_available() {
        return;
    }
    let _heavy = crate::util::heavy();
    let out = lab(&[
        "-n",
        "300",
        "--segments",
        "1,4",
        "--max-time",
        "2s",
        "-f",
        "json",
    ]);
    let doc = json(&out);
    assert_eq!(doc["kind"], "lab-x11");
    assert_eq!(doc["server"]["private_xvfb"], true);
    assert!(doc["server"]["vendor"].as_str().unwrap().contains("X.Org"));
    for label in [
        "round-trip",
        "upload put 32x32x8",
        "upload shm 32x32x8 K=1",
        "upload shm 32x32x8 K=4",
        "config inproc",
        "config dbus",
    ] {
        let r = row(&doc, label);
        assert_eq!(r["count"], 300, "{label}");
        assert_eq!(r["stop"], "done", "{label}");
        assert!(r["p50"].as_u64().unwrap() > 0, "{label}");
        if label.starts_with("upload") {
            assert_eq!(r["verified"], true, "{label}");
            assert_eq!(r["bytes_per_op"], 32 * 32, "{label}");
        }
    }
    // K segments in flight: the latency of one upload grows, the time per upload does not.
    let k1 = row(&doc, "upload shm 32x32x8 K=1");
    let k4 = row(&doc, "upload shm 32x32x8 K=4");
    assert_eq!(k1["max_in_flight"], 1);
    assert_eq!(k4["max_in_flight"], 4);
    assert!(k4["ops_per_s"].as_f64().unwrap() > k1["ops_per_s"].as_f64().unwrap());
    // The D-Bus backend, the broker and the server are all measured.
    let dbus = row(&doc, "config dbus");
    for side in ["client", "server", "backend", "broker"] {
        assert!(
            dbus["sides"][side]["cpu_ns"].as_u64().unwrap() > 0,
            "{side}"
        );
    }
    assert!(
        dbus["p50"].as_u64() > row(&doc, "config inproc")["p50"].as_u64(),
        "a D-Bus round trip through a broker costs more than the query itself"
    );
}

#[test]
fn a_lab_x11_result_is_compared_and_reported_like_every_other() {
    if !x11_available() {
        return;
    }
    let _heavy = crate::util::heavy();
    let dir = tempfile::tempdir().unwrap();
    let save = dir.path().join("x11.json");
    let out = lab(&[
        "round-trip",
        "upload",
        "--method",
        "put",
        "-n",
        "200",
        "--save",
        save.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("upload put 32x32x8"),
        "{}",
        stdout(&out)
    );
    let s = save.to_str().unwrap();
    let out = run(&["compare", s, s]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("round-trip"), "{}", stdout(&out));
    let html = dir.path().join("r.html");
    let out = run(&["report", s, "-o", html.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        std::fs::read_to_string(&html)
            .unwrap()
            .contains("upload put 32x32x8")
    );
}

#[test]
fn the_private_xvfb_is_stopped_and_leaves_nothing_behind() {
    if !x11_available() {
        return;
    }
    let _heavy = crate::util::heavy();
    let tmp = tempfile::tempdir().unwrap();
    let out = latscope()
        .args(["lab", "x11", "round-trip", "-n", "50", "-f", "json"])
        .env_remove("DISPLAY")
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    let doc = json(&out);
    let display = doc["server"]["display"].as_str().unwrap().to_string();
    let socket = format!("/tmp/.X11-unix/X{}", &display[1..]);
    let deadline = Instant::now() + Duration::from_secs(5);
    while Path::new(&socket).exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!Path::new(&socket).exists(), "{socket} is still there");
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert!(left.is_empty(), "left in TMPDIR: {left:?}");
}

#[test]
fn a_server_without_mit_shm_skips_the_shm_rows_and_runs_the_others() {
    if !x11_available() {
        return;
    }
    let _heavy = crate::util::heavy();
    let out = lab(&[
        "upload",
        "-n",
        "100",
        "--segments",
        "4",
        "--xvfb-arg=-extension",
        "--xvfb-arg=MIT-SHM",
        "-f",
        "json",
    ]);
    let doc = json(&out);
    assert_eq!(doc["server"]["shm"], Value::Null);
    assert_eq!(doc["results"].as_array().unwrap().len(), 1);
    assert_eq!(row(&doc, "upload put 32x32x8")["verified"], true);
    let skipped = doc["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert_eq!(skipped[0]["config"], "upload shm 32x32x8 K=4");
    assert!(
        skipped[0]["reason"]
            .as_str()
            .unwrap()
            .contains("no MIT-SHM extension"),
        "{skipped:?}"
    );
}

#[test]
fn an_unknown_display_is_an_error_that_names_it() {
    if !x11_available() {
        return;
    }
    let out = lab(&["--display", ":977", "round-trip"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("cannot connect to the X server :977"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn no_display_and_no_xvfb_names_the_package_to_install() {
    let empty = tempfile::tempdir().unwrap();
    let out = latscope()
        .args(["lab", "x11", "round-trip"])
        .env_remove("DISPLAY")
        .env("PATH", empty.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("apt-get install xvfb"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn impossible_options_are_usage_errors() {
    for args in [
        &["upload", "--segments", "0"][..],
        &["upload", "--size", "0x32"],
        &["upload", "--depth", "7"],
        &["upload", "--method", "carrier-pigeon"],
        &["config", "--via", "telepathy"],
        &["teleport"],
        &["-n", "0"],
    ] {
        let out = lab(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn an_image_larger_than_the_largest_request_is_refused_with_the_limit() {
    if !x11_available() {
        return;
    }
    let _heavy = crate::util::heavy();
    let out = lab(&[
        "upload",
        "--method",
        "put",
        "--size",
        "4096x4096",
        "--depth",
        "32",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.contains("67108888-byte PutImage request")
            && err.contains("at most 16777212 bytes per request (with BIG-REQUESTS)"),
        "{err}"
    );
}

/// Round trips for 3 s, then uploads for 3 s, on `display`: a run to interrupt in the middle.
fn long_run(display: &str) -> Child {
    latscope()
        .args(["lab", "x11", "round-trip", "upload", "--display", display])
        .args(["--method", "put", "-n", "100000000", "--max-time", "3s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn a_server_killed_mid_run_keeps_the_rows_measured_and_exits_1() {
    if !x11_available() {
        return;
    }
    let _heavy = crate::util::heavy();
    let mut xvfb = TestXvfb::start(&[]);
    let child = long_run(&xvfb.display);
    std::thread::sleep(Duration::from_millis(4500));
    let _ = xvfb.child.kill();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stdout(&out).contains("round-trip"), "{}", stdout(&out));
    assert!(stdout(&out).contains("FAILED"), "{}", stdout(&out));
    assert!(stderr(&out).contains("went away"), "{}", stderr(&out));
}

#[test]
fn one_sigterm_ends_the_lab_with_the_rows_measured_so_far() {
    if !x11_available() {
        return;
    }
    let _heavy = crate::util::heavy();
    let xvfb = TestXvfb::start(&[]);
    let child = long_run(&xvfb.display);
    std::thread::sleep(Duration::from_millis(4000));
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let sent = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(
        sent.elapsed() < Duration::from_secs(2),
        "{:?}",
        sent.elapsed()
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("round-trip") && text.contains("partial"),
        "{text}"
    );
}

/// The rows of a `--compare-x11perf` run: (label, latscope/s, x11perf/s, ratio).
fn x11perf_rows(display: &str, sizes: &str, methods: &str) -> Vec<(String, f64, f64, f64)> {
    let out = latscope()
        .args(["lab", "x11", "upload", "--pipelined", "--display", display])
        .args(["--size", sizes, "--method", methods, "--depth", "24"])
        .args(["-n", "100000000", "--max-time", "1s", "--warmup", "20000"])
        .args(["--compare-x11perf", "-f", "json"])
        .output()
        .unwrap();
    let doc = json(&out);
    doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            assert_eq!(r["verified"], true, "{r}");
            let ours = r["ops_per_s"].as_f64().unwrap();
            let x = &r["x11perf"];
            let theirs = x["mean_per_s"].as_f64().unwrap();
            let ratio = x["ratio"].as_f64().unwrap();
            // the document's ratio is the lab's rate over the mean of x11perf before and after
            let mean =
                (x["before_per_s"].as_f64().unwrap() + x["after_per_s"].as_f64().unwrap()) / 2.0;
            assert!((theirs - mean).abs() <= 1e-6 * mean, "{x}");
            assert!((ratio - ours / theirs).abs() <= 1e-9 * ratio, "{x}");
            (label_of(r), ours, theirs, ratio)
        })
        .collect()
}

/// What pipelined uploads must reach beside x11perf on the same server. The lab's client costs
/// a copy per request and one write per flush, as x11perf's Xlib: the server sets the rate for
/// both. One round on a 2-core machine shared with builds can swing either side by ±30% (the
/// two x11perf runs of one round differ that much), so each row gets up to three rounds and
/// its best counts; a client that is the bottleneck (x11rb's was 0.30×) fails all three.
const X11PERF_FLOOR: f64 = 0.95;

#[test]
#[ignore = "a timing ratio: scripts/test.sh runs it alone (cargo test -- --ignored --test-threads=1)"]
fn pipelined_uploads_run_at_the_rate_x11perf_reports_on_the_same_server() {
    if !x11_available() {
        return;
    }
    let _heavy = crate::util::heavy();
    let xvfb = TestXvfb::start(&[]);
    let mut best: std::collections::BTreeMap<String, f64> = Default::default();
    let mut todo = vec![
        ("10x10", "put"),
        ("10x10", "shm"),
        ("100x100", "put"),
        ("100x100", "shm"),
    ];
    // Rounds for what is under the floor: on a shared host one round of the 10x10 put read
    // 0.26 and the others 0.70 and 0.92 where a quiet run reads 1.2-2.2 (x11perf and the lab
    // time one second each, at different moments).
    for round in 1..=5 {
        if todo.is_empty() {
            break;
        }
        // the lab runs the cross product of the lists: each size and method once
        let mut sizes: Vec<&str> = todo.iter().map(|t| t.0).collect();
        let mut methods: Vec<&str> = todo.iter().map(|t| t.1).collect();
        sizes.dedup();
        methods.sort_unstable();
        methods.dedup();
        let rows = x11perf_rows(&xvfb.display, &sizes.join(","), &methods.join(","));
        for (label, ours, theirs, ratio) in rows {
            eprintln!(
                "round {round}: {label}: latscope {ours:.0}/s, x11perf {theirs:.0}/s, ratio {ratio:.2}"
            );
            let b = best.entry(label).or_insert(0.0);
            *b = b.max(ratio);
        }
        todo.retain(|(size, method)| {
            let label = format!("upload {method} {size}x24 pipelined");
            best.get(&label).is_none_or(|&r| r < X11PERF_FLOOR)
        });
    }
    assert_eq!(best.len(), 4, "{best:?}");
    for (label, ratio) in &best {
        eprintln!("{label}: best latscope/x11perf {ratio:.2}");
        assert!(
            *ratio >= X11PERF_FLOOR,
            "{label}: latscope/x11perf {ratio:.2} < {X11PERF_FLOOR} in five rounds: {best:?}"
        );
    }
}

/// Builds tests/targets/xcb_round_trip.c (libxcb) into `dir`.
fn xcb_round_trip(dir: &Path) -> std::path::PathBuf {
    let exe = dir.join("xcb_round_trip");
    let out = Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&exe)
        .arg(crate::util::root().join("tests/targets/xcb_round_trip.c"))
        .arg("-lxcb")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
#[ignore = "a timing ratio: scripts/test.sh runs it alone (cargo test -- --ignored --test-threads=1)"]
fn a_round_trip_costs_what_a_c_xcb_client_pays_on_the_same_server() {
    if !x11_available() || !crate::util::commands_available(&["cc"], "cc (gcc)") {
        return;
    }
    if !Path::new("/usr/include/xcb/xcb.h").exists() {
        assert!(
            std::env::var_os("LATSCOPE_REQUIRE_STACK").is_none(),
            "libxcb1-dev missing but LATSCOPE_REQUIRE_STACK is set: run scripts/capture/install-deps.sh"
        );
        eprintln!("skipping: libxcb1-dev not installed (scripts/capture/install-deps.sh)");
        return;
    }
    let _heavy = crate::util::heavy();
    let dir = tempfile::tempdir().unwrap();
    let c = xcb_round_trip(dir.path());
    // The server and both clients run on one CPU. Left to the scheduler, a client ran beside the
    // server on the same CPU in some runs (a round trip of 15-20 us on the 2-core VM) and on the
    // other CPU in others (110-130 us, or 330-370 us where the idle CPU had to be woken): the
    // ratio measured the placement (0.07-0.77 in one CI run's rounds, the lab beside the server
    // and libxcb away from it). On one CPU a round trip is two context switches, the server's
    // work and the client's, and the client's cost shows whole.
    let cpu = first_cpu();
    // -noreset: Xvfb would otherwise reset when the last client leaves, between two runs, and
    // refuse the next connection while it does
    let xvfb = TestXvfb::start_on(cpu, &["-noreset"]);
    // Interleaved: C, latscope, C, latscope, ... on one server; each round's ratio is
    // latscope's p50 over the mean of the C runs beside it, and the median of the rounds
    // counts: short rounds, so that a burst of load from elsewhere hits one or two of them.
    let c_p50 = || {
        let out = pin(&mut Command::new(&c), cpu)
            .args(["-n", "5000", "-w", "1000"])
            .env("DISPLAY", &xvfb.display)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        text.split_whitespace()
            .find_map(|w| w.strip_prefix("p50_ns="))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("{text}"))
    };
    let ours_p50 = || {
        let mut cmd = latscope();
        pin(&mut cmd, cpu).env_remove("DISPLAY").args([
            "lab",
            "x11",
            "round-trip",
            "--display",
            &xvfb.display,
            "-n",
            "5000",
            "--warmup",
            "1000",
            "--max-time",
            "10s",
            "-f",
            "json",
        ]);
        row(&json(&cmd.output().unwrap()), "round-trip")["p50"]
            .as_f64()
            .unwrap()
    };
    const ROUNDS: usize = 15;
    let mut ratios = Vec::new();
    let mut before = c_p50();
    for round in 0..ROUNDS {
        let ours = ours_p50();
        let after = c_p50();
        let theirs = (before + after) / 2.0;
        eprintln!(
            "round {round}: round-trip p50 latscope {ours:.0} ns, C xcb {theirs:.0} ns (before {before:.0}, after {after:.0}), ratio {:.3}",
            ours / theirs
        );
        ratios.push(ours / theirs);
        before = after;
    }
    let ratio = median(ratios.clone());
    eprintln!("round-trip p50 latscope/C xcb: median of {ROUNDS} rounds {ratio:.3} ({ratios:.3?})");
    // Within 10%. Pinned on the 2-core VM the two cost about the same (this test, medians of
    // 15 rounds: 0.91-1.06 in 11 runs against the release binary, 7 within 0.97-1.02), but
    // whole runs of either fall into a 15 us or a 19 us mode and a round's ratio spreads
    // 0.63-1.25: one of those 11 runs (1.059) was over 1.05. Not absurdly faster, which would
    // mean no reply was awaited.
    assert!(ratio <= 1.10, "latscope/C {ratio:.3}: {ratios:?}");
    assert!(ratio >= 0.5, "latscope/C {ratio:.3}: {ratios:?}");
}

#[test]
fn a_server_that_stops_answering_fails_the_row_after_the_timeout_and_keeps_the_others() {
    if !x11_available() {
        return;
    }
    let _heavy = crate::util::heavy();
    let xvfb = TestXvfb::start(&[]);
    let child = latscope()
        .args([
            "lab",
            "x11",
            "round-trip",
            "upload",
            "--display",
            &xvfb.display,
        ])
        .args([
            "--method",
            "put",
            "-n",
            "100000000",
            "--max-time",
            "2s",
            "--timeout",
            "1s",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // round trips for 2 s, then uploads: stop the server in the middle of them
    std::thread::sleep(Duration::from_millis(3000));
    // SAFETY: kill(2) on the test's own child.
    unsafe { libc::kill(xvfb.child.id() as i32, libc::SIGSTOP) };
    let stopped = Instant::now();
    let out = child.wait_with_output().unwrap();
    let waited = stopped.elapsed();
    // SAFETY: as above; the server is killed when `xvfb` drops.
    unsafe { libc::kill(xvfb.child.id() as i32, libc::SIGCONT) };
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(waited < Duration::from_secs(8), "{waited:?}");
    let text = stdout(&out);
    assert!(text.contains("round-trip"), "{text}");
    assert!(
        text.contains("upload put 32x32x8")
            && text.contains("FAILED")
            && text.contains("timed out"),
        "{text}"
    );
}

/// A private session bus that can start libkscreen's backend launcher (D-Bus activation), with
/// the X server in its environment.
fn session_bus(dir: &Path, display: &str) -> (Child, String) {
    // The IPC lab's private bus, plus the session service directories, so that the launcher of
    // libkscreen's backend is started on demand (D-Bus activation).
    let text = latscope::lab::ipc::transport::dbus::config_text(dir)
        .replace("<auth>", "<standard_session_servicedirs/>\n  <auth>");
    assert!(text.contains("<standard_session_servicedirs/>"));
    let config = crate::util::write(dir, "session.conf", text);
    let mut child = Command::new("dbus-daemon")
        .arg(format!("--config-file={}", config.display()))
        .args(["--nofork", "--print-address=1"])
        .env("DISPLAY", display)
        .env("XDG_RUNTIME_DIR", dir)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    (child, line.trim().to_string())
}

#[test]
fn the_lab_and_kscreen_doctor_agree_on_in_process_vs_d_bus() {
    if !x11_available() {
        return;
    }
    let _heavy = crate::util::heavy();
    let xvfb = TestXvfb::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let (mut bus, address) = session_bus(dir.path(), &xvfb.display);
    let env = |cmd: &mut Command| {
        cmd.env("DISPLAY", &xvfb.display)
            .env("DBUS_SESSION_BUS_ADDRESS", &address)
            .env("XDG_RUNTIME_DIR", dir.path())
            .env("QT_LOGGING_RULES", "*=false");
    };
    // The real libkscreen, out of process: D-Bus activation starts its backend launcher.
    let mut warm = Command::new("kscreen-doctor");
    env(&mut warm);
    let warm = warm.arg("-o").output().unwrap();
    assert!(
        String::from_utf8_lossy(&warm.stdout).contains("1280x1024"),
        "{}",
        String::from_utf8_lossy(&warm.stderr)
    );
    let mut bench = latscope();
    env(&mut bench);
    let bench = bench
        .args([
            "bench", "--runs", "30", "-f", "json", "-n", "inproc", "-n", "dbus",
        ])
        .args([
            "env KSCREEN_BACKEND_INPROCESS=1 kscreen-doctor -o",
            "kscreen-doctor -o",
        ])
        .output()
        .unwrap();
    let _ = bus.kill();
    let _ = bus.wait();
    let bench = json(&bench);
    let wall = &bench["comparisons"][0]["metrics"][0];
    assert_eq!(wall["metric"], "wall");
    let verdict = wall["verdict"].as_str().unwrap();
    let lab = lab(&[
        "config",
        "--display",
        &xvfb.display,
        "-n",
        "1000",
        "-f",
        "json",
    ]);
    let lab = json(&lab);
    let inproc = row(&lab, "config inproc")["p50"].as_f64().unwrap();
    let dbus = row(&lab, "config dbus")["p50"].as_f64().unwrap();
    eprintln!(
        "kscreen-doctor -o dbus vs inproc: {verdict}; lab config p50 inproc {inproc} ns, dbus {dbus} ns"
    );
    // The lab resolves what a whole process start hides: the out-of-process query is slower.
    assert!(
        dbus > inproc * 1.5,
        "lab: dbus {dbus} ns vs inproc {inproc} ns"
    );
    // Whole processes (~20 ms of Qt start-up) cannot contradict it by more than a shared
    // host's drift over 30 runs: the D-Bus query costs about 0.7 ms of them. At 95%
    // confidence one run in forty may call it "faster" anyway, and did: 0.9% (p = 0.016), and
    // 4.9% with an interval reaching -0.1% (p = 0.048). A contradiction is an interval that
    // stays clear of "no change": its bound nearest 1 below 0.98.
    let nearest = wall["p50"]["ci"][1].as_f64().unwrap_or(1.0);
    assert!(verdict != "faster" || nearest > 0.98, "{wall}");
}

#[test]
fn the_demo_has_an_x11_part_when_xvfb_is_installed_and_says_how_to_get_it_when_not() {
    if !x11_available() {
        return;
    }
    let _heavy = crate::util::heavy();
    let out = latscope()
        .args(["demo", "--no-ipc"])
        .env_remove("DISPLAY")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("upload shm 32x32x8 K=4") && text.contains("config dbus"),
        "{text}"
    );
    let empty = tempfile::tempdir().unwrap();
    let out = latscope()
        .args(["demo", "--no-ipc"])
        .env_remove("DISPLAY")
        .env("PATH", empty.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("apt-get install xvfb") && !stdout(&out).contains("upload shm"),
        "{}",
        stderr(&out)
    );
}
