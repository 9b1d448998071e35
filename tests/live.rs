//! `latscope probes` and `latscope live` against real targets: a C program with USDT probes
//! and known delays (tests/targets/usdt_target.c), its functions (uprobes), and Mir nested in
//! weston headless traced by PID while glmark2 runs on it. Needs root and bpftrace (the test
//! command installs bpftrace, systemtap-sdt-dev and mir-test-tools).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::{self, root, run, stderr, stdout};

/// Whether live tracing can run here; panics when it must (LATSCOPE_REQUIRE_STACK) and cannot.
pub fn live_available() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root_user = unsafe { libc_geteuid() } == 0;
    let have = |c: &str| {
        Command::new("sh")
            .args(["-c", &format!("command -v {c}")])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    // Debian puts sys/sdt.h under the multiarch include directory.
    let sdt = std::fs::read_dir("/usr/include")
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .any(|e| e.path().join("sys/sdt.h").exists())
        || Path::new("/usr/include/sys/sdt.h").exists();
    let ok = root_user && have("bpftrace") && have("cc") && sdt;
    if !ok && std::env::var_os("LATSCOPE_REQUIRE_STACK").is_some() {
        panic!(
            "live tracing needs root, bpftrace, cc and sys/sdt.h, and LATSCOPE_REQUIRE_STACK is set"
        );
    }
    if !ok {
        eprintln!("skipping: live tracing needs root, bpftrace, cc and systemtap-sdt-dev");
    }
    ok
}

unsafe extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}

/// Compiles the USDT test target into `dir`.
pub(crate) fn target(dir: &Path) -> PathBuf {
    let out = dir.join("usdt_target");
    let status = Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&out)
        .arg(root().join("tests/targets/usdt_target.c"))
        .status()
        .expect("cc");
    assert!(status.success());
    out
}

/// What most live tests start with: the lock on heavy tests, a temporary directory, the
/// compiled target and a path to save results to. `None` (skip) when tracing cannot run here.
pub(crate) struct Fixture {
    _heavy: std::sync::MutexGuard<'static, ()>,
    pub(crate) _dir: tempfile::TempDir,
    pub(crate) target: PathBuf,
    pub(crate) save: PathBuf,
}

pub(crate) fn fixture() -> Option<Fixture> {
    if !live_available() {
        return None;
    }
    let heavy = util::heavy();
    let dir = tempfile::tempdir().unwrap();
    let target = target(dir.path());
    let save = dir.path().join("live.json");
    Some(Fixture {
        _heavy: heavy,
        target,
        save,
        _dir: dir,
    })
}

pub(crate) fn probe(t: &Path, name: &str) -> String {
    format!("usdt:{}:latscope_test:{name}", t.display())
}

pub(crate) fn saved(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).expect("saved JSON")).expect("JSON")
}

/// Counts in the buckets that lie inside [lo, hi).
fn count_within(span: &Value, lo: u64, hi: u64) -> u64 {
    span["histogram"]["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["min"].as_u64().unwrap() >= lo && b["max"].as_u64().unwrap() < hi)
        .map(|b| b["count"].as_u64().unwrap())
        .sum()
}

#[test]
fn probes_lists_the_usdt_probes_of_a_file_as_live_specs() {
    if !live_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let t = target(dir.path());
    let out = run(&["probes", t.to_str().unwrap()]);
    assert!(out.status.success());
    let text = stdout(&out);
    assert!(text.contains("3 USDT probes"), "{text}");
    assert!(
        text.contains(&format!(
            "  {}  (-8@%rbx 8@%r15)",
            probe(&t, "request_start")
        )) || text.contains(&probe(&t, "request_start")),
        "{text}"
    );
    let out = run(&[
        "probes",
        "--format",
        "json",
        "/usr/lib/x86_64-linux-gnu/libmirserver.so.58",
    ]);
    if out.status.success() {
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        let names: Vec<&str> = doc["files"][0]["probes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert!(
            names.contains(&"sw_buffer_committed") && names.contains(&"began_frame"),
            "{names:?}"
        );
    }
}

#[test]
fn known_delays_land_in_their_buckets_and_counts_are_exact() {
    let Some(f) = fixture() else { return };
    let (t, save) = (&f.target, &f.save);
    let span = format!(
        "req={}..{}",
        probe(t, "request_start"),
        probe(t, "request_end")
    );
    let value = format!("delay={}:arg1", probe(t, "request_start"));
    let out = run(&[
        "live",
        "--interval",
        "1",
        "--save",
        save.to_str().unwrap(),
        "--span",
        &span,
        "--value",
        &value,
        "--rate",
        &probe(t, "tick"),
        "--",
        t.to_str().unwrap(),
        "1000",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc = saved(save);
    assert_eq!(doc["kind"], "spans");
    assert_eq!(doc["live"]["stopped_by"], "the traced command exited");
    let req = &doc["spans"][0];
    assert_eq!(req["count"], 1000);
    // 600 waits of 50 µs, 300 of 200 µs, 100 of 1 ms. A wait can only be longer than asked
    // (preemption on a shared machine), so each class is checked from its delay upwards.
    assert!(req["min"].as_u64().unwrap() >= 50_000);
    assert!(count_within(req, 49_152, 65_536) >= 540, "{req}");
    assert!(count_within(req, 196_608, 262_144) >= 270, "{req}");
    assert!(count_within(req, 983_040, 1_310_720) >= 90, "{req}");
    // Percentiles come with their bucket's error bound, at most 12.5%.
    let p50 = req["p50"].as_u64().unwrap();
    assert!((50_000..65_536).contains(&p50), "p50 {p50}");
    let bound = req["histogram"]["percentile_error_bounds"]["p50"]
        .as_u64()
        .unwrap();
    assert!(
        bound as f64 <= p50 as f64 * 0.125,
        "bound {bound} for p50 {p50}"
    );
    // The argument values are exact integers: exact buckets and mean.
    let delay = &doc["values"][0];
    assert_eq!(
        (
            delay["count"].as_u64(),
            delay["min"].as_u64(),
            delay["max"].as_u64()
        ),
        (Some(1000), Some(50), Some(1000))
    );
    assert_eq!(delay["mean"].as_f64(), Some(190.0));
    assert_eq!(
        (
            count_within(delay, 48, 52),
            count_within(delay, 192, 208),
            count_within(delay, 960, 1024)
        ),
        (600, 300, 100)
    );
    assert_eq!(doc["rates"][0]["count"], 1000);
    let per_interval: u64 = doc["rates"][0]["per_interval"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(per_interval, 1000);
}

#[test]
fn a_uprobe_to_uretprobe_span_times_each_call_by_thread() {
    let Some(f) = fixture() else { return };
    let (t, save) = (&f.target, &f.save);
    let span = format!("call=uprobe:{0}:work..uretprobe:{0}:work", t.display());
    let out = run(&[
        "live",
        "--by",
        "tid",
        "--save",
        save.to_str().unwrap(),
        "--span",
        &span,
        "--",
        t.to_str().unwrap(),
        "300",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc = saved(save);
    let call = &doc["spans"][0];
    assert_eq!(call["count"], 300);
    assert_eq!(call["by"], "tid");
    assert!(
        call["group"].as_str().unwrap().parse::<u32>().is_ok(),
        "{call}"
    );
    assert!(call["min"].as_u64().unwrap() >= 50_000);
    assert!(stdout(&out).contains("call[tid "), "{}", stdout(&out));
}

#[test]
fn the_program_is_printed_without_tracing_anything() {
    let out = run(&[
        "live",
        "--print-program",
        "--span",
        "r=usdt:/bin/x:p:a..usdt:/bin/x:p:b",
        "--pid",
        "1",
    ]);
    assert!(out.status.success());
    let text = stdout(&out);
    assert!(
        text.contains(
            "usdt:/bin/x:p:a /pid == 1/ { @lcs_0 = count(); @ls_start_0[(uint64)arg0] = nsecs; }"
        ),
        "{text}"
    );
    assert!(text.contains("lhist($i, 0, 496, 1)"));
}

#[test]
fn an_unknown_probe_is_refused_with_the_nearest_names() {
    if !live_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let t = target(dir.path());
    let out = run(&[
        "live",
        "--rate",
        &probe(&t, "request_strat"),
        "--",
        t.to_str().unwrap(),
        "1",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("no such USDT probe"), "{err}");
    assert!(
        err.contains("nearest: latscope_test:request_start"),
        "{err}"
    );
    let out = run(&[
        "live",
        "--span",
        &format!("c=uprobe:{0}:wrok..uretprobe:{0}:wrok", t.display()),
    ]);
    assert!(
        stderr(&out).contains("no such function") && stderr(&out).contains("nearest: work"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn missing_bpftrace_names_the_package() {
    let out = util::latscope()
        .args(["live", "--rate", "usdt:/bin/true:p:n"])
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("apt-get install bpftrace"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn without_privileges_the_error_says_to_use_sudo() {
    if !live_available() || !Path::new("/usr/bin/setpriv").exists() {
        return;
    }
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(env!("CARGO_BIN_EXE_latscope"))
        .args(["live", "--rate", "usdt:/bin/true:p:n"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("needs root"), "{}", stderr(&out));
}

#[test]
fn a_missing_process_or_command_is_an_error() {
    if !live_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let t = target(dir.path());
    let out = run(&["live", "--rate", &probe(&t, "tick"), "--pid", "999999999"]);
    assert!(
        stderr(&out).contains("no process with PID 999999999"),
        "{}",
        stderr(&out)
    );
    let out = run(&[
        "live",
        "--rate",
        &probe(&t, "tick"),
        "--",
        "/nonexistent/cmd",
    ]);
    assert!(
        stderr(&out).contains("cannot start '/nonexistent/cmd'"),
        "{}",
        stderr(&out)
    );
    assert_eq!(run(&["live"]).status.code(), Some(2));
}

/// Starts the target and `latscope live --pid` on it; returns both children once latscope
/// says it is tracing.
fn trace_pid(
    t: &Path,
    save: &Path,
    iterations: &str,
    pause_ms: &str,
) -> (std::process::Child, std::process::Child) {
    let target = Command::new(t)
        .args([iterations, pause_ms])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let latscope = util::latscope()
        .args([
            "live",
            "--interval",
            "1",
            "--pid",
            &target.id().to_string(),
            "--save",
            save.to_str().unwrap(),
        ])
        .args(["--rate", &probe(t, "tick")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    (target, latscope)
}

#[test]
fn tracing_a_pid_ends_with_the_totals_when_the_process_exits() {
    let Some(f) = fixture() else { return };
    let (t, save) = (&f.target, &f.save);
    let (mut target, latscope) = trace_pid(t, save, "400", "5");
    let out = latscope.wait_with_output().unwrap();
    target.wait().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = saved(save);
    assert_eq!(doc["live"]["stopped_by"], "the traced process exited");
    let count = doc["rates"][0]["count"].as_u64().unwrap();
    assert!(count > 0 && count <= 400, "{count}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("── totals (the traced process exited) ──")
    );
}

#[test]
fn ctrl_c_prints_and_saves_the_totals() {
    let Some(f) = fixture() else { return };
    let (t, save) = (&f.target, &f.save);
    let (mut target, mut latscope) = trace_pid(t, save, "100000", "2");
    let started = Instant::now();
    std::thread::sleep(Duration::from_millis(3500));
    crate::util::interrupt(latscope.id());
    let status = latscope.wait().unwrap();
    let _ = target.kill();
    let _ = target.wait();
    assert!(status.success());
    assert!(started.elapsed() < Duration::from_secs(30));
    let doc = saved(save);
    assert_eq!(doc["live"]["stopped_by"], "interrupted");
    assert!(doc["rates"][0]["count"].as_u64().unwrap() > 0, "{doc}");
    let mut text = String::new();
    use std::io::Read;
    latscope
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    assert!(text.contains("── totals (interrupted) ──"), "{text}");
}

#[test]
fn mir_commits_counted_by_its_probe_match_the_clients_own_log_and_frames_are_spans() {
    if !live_available() || !util::stack_available() {
        return;
    }
    let _heavy = util::heavy();
    let dir = tempfile::tempdir().unwrap();
    let client = dir.path().join("client.log");
    let trace = dir.path().join("trace.json");
    let out = Command::new("bash")
        .arg(root().join("scripts/capture/mir-traced.sh"))
        .args([client.to_str().unwrap(), trace.to_str().unwrap(), "3", "--", env!("CARGO_BIN_EXE_latscope")])
        .args(["--by", "arg0", "--rate", "usdt:MIRSERVER:mir_server_wayland:sw_buffer_committed"])
        .args(["--span", "frame=usdt:MIRSERVER:mir_server_compositor:began_frame..usdt:MIRSERVER:mir_server_compositor:finished_frame"])
        .args(["--rate", "usdt:MIRSERVER:mir_server_compositor:finished_frame"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let doc = saved(&trace);
    // The client with the most commits is glmark2 (others are Mir's internal clients).
    let commits = doc["rates"].as_array().unwrap().iter().filter(|r| {
        r["probe"]
            .as_str()
            .unwrap()
            .ends_with("sw_buffer_committed")
    });
    let glmark2 = commits.map(|r| r["count"].as_u64().unwrap()).max().unwrap();
    let spans =
        crate::util::spans_by_name(&util::wayland_json(&client, &["--span", "commit-release"]));
    let cr = &spans["commit_to_release/client"];
    let logged = ["count", "unmatched", "superseded"]
        .iter()
        .map(|k| cr[*k].as_u64().unwrap())
        .sum::<u64>();
    let diff = glmark2.abs_diff(logged) as f64 / logged as f64;
    assert!(
        diff <= 0.02,
        "probe counted {glmark2} commits, the client logged {logged}"
    );
    // One span sample per composited frame.
    let frames: u64 = doc["spans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["count"].as_u64().unwrap())
        .sum();
    let finished: u64 = doc["rates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["probe"].as_str().unwrap().ends_with("finished_frame"))
        .map(|r| r["count"].as_u64().unwrap())
        .sum();
    // A frame may straddle the start, and bpftrace prints the final maps one after another
    // while Mir keeps compositing (~38 frames/s here), so a map printed later may include a
    // frame or two more: allow 3 (about 2.5% of the ~120 frames).
    assert!(
        frames > 10 && frames.abs_diff(finished) <= 3,
        "{frames} frame spans, {finished} finished frames"
    );
}

#[test]
fn a_duration_ends_the_session_with_its_totals() {
    let Some(f) = fixture() else { return };
    let (t, save) = (&f.target, &f.save);
    let mut target = Command::new(t)
        .args(["100000", "2"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let out = util::latscope()
        .args([
            "live",
            "--duration",
            "2",
            "--pid",
            &target.id().to_string(),
            "--save",
            save.to_str().unwrap(),
        ])
        .args(["--rate", &probe(t, "tick")])
        .output()
        .unwrap();
    let _ = target.kill();
    let _ = target.wait();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(20));
    let doc = saved(save);
    assert!(doc["rates"][0]["count"].as_u64().unwrap() > 0, "{doc}");
    assert!(stdout(&out).contains("── totals"), "{}", stdout(&out));
}

#[test]
fn format_json_prints_the_saved_document_and_markdown_a_table_of_the_totals() {
    let Some(f) = fixture() else { return };
    let (t, save) = (&f.target, &f.save);
    let span = format!(
        "req={}..{}",
        probe(t, "request_start"),
        probe(t, "request_end")
    );
    let live = |format: &str| {
        let out = run(&[
            "live",
            "--format",
            format,
            "--save",
            save.to_str().unwrap(),
            "--span",
            &span,
            "--rate",
            &probe(t, "tick"),
            "--",
            t.to_str().unwrap(),
            "100",
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        out
    };
    let out = live("json");
    let printed: Value = serde_json::from_slice(&out.stdout).expect("stdout is one JSON document");
    assert_eq!(printed, saved(save), "stdout and --save differ");
    assert_eq!(printed["spans"][0]["count"], 100);
    let out = live("markdown");
    let text = stdout(&out);
    assert!(text.contains("| series | count | min (µs) |"), "{text}");
    assert!(text.contains("| req | 100 |"), "{text}");
    assert!(text.contains("| probe | group | events |"), "{text}");
    assert!(!text.contains("── totals"), "{text}");
}

#[test]
fn a_format_live_does_not_write_is_a_usage_error_with_lives_usage() {
    let out = run(&[
        "live",
        "--format",
        "csv",
        "--rate",
        "tracepoint:sched:sched_switch",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("does not write --format csv: it writes text, json, markdown"),
        "{err}"
    );
    assert!(err.contains("Usage: latscope live "), "{err}");
}
