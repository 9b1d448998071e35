//! `latscope lab gpu` without a GPU: the errors of a machine with no driver, the limits, and
//! the whole lab end to end on the fake backend (`LATSCOPE_GPU_BACKEND=fake`), whose latencies
//! are known, so that every stage can be checked against a value computed by hand.

use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::{self, stderr, stdout};

fn lab(env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = util::latscope();
    cmd.args(["lab", "gpu"]).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// The fake: 2 µs launch calls, kernels starting 6 µs after the call began and running
/// 0.5 µs, flags seen 1.5 µs after the end, synchronizes returning 3 µs after it.
const FAKE: (&str, &str) = (
    "LATSCOPE_GPU_BACKEND",
    "fake:launch=2000,submit=6000,exec=500,to_host=1500,to_sync=3000",
);

fn fake_json(args: &[&str]) -> Value {
    let mut all = vec!["--format", "json", "--warmup", "2"];
    all.extend_from_slice(args);
    let out = lab(&[FAKE], &all);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// (count, min, p50, max) of stage `name` of `row`.
fn stage(row: &Value, name: &str) -> (u64, u64, u64, u64) {
    let s = row["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {row}"));
    let n = |k: &str| s[k].as_u64().unwrap_or_else(|| panic!("{k} of {s}"));
    (n("count"), n("min"), n("p50"), n("max"))
}

#[test]
fn a_machine_without_libcuda_is_told_which_library_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("libcuda.so.1");
    let started = Instant::now();
    let out = lab(&[("LATSCOPE_LIBCUDA", missing.to_str().unwrap())], &[]);
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("cannot load ") && err.contains("libcuda.so.1"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn a_library_without_the_driver_api_names_the_missing_function() {
    let out = lab(&[("LATSCOPE_LIBCUDA", "libc.so.6")], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("libc.so.6 has no cuInit"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn absurd_requests_are_refused_naming_the_limit_before_the_driver_is_opened() {
    // The library is missing: a refusal before opening it is a usage error (2), not 1.
    let none = ("LATSCOPE_LIBCUDA", "/nonexistent/libcuda.so.1");
    for (args, says) in [
        (
            &["--requests", "2000000"][..],
            "--requests 2000000 is more than the limit, 1000000",
        ),
        (
            &["--spacing", "2s"],
            "--spacing (ns) 2000000000 is more than the limit, 1000000000",
        ),
        (
            &["--streams", "65"],
            "--streams 65 is more than the limit, 64",
        ),
        (
            &["--burst", "5000"],
            "--burst 5000 is more than the limit, 4096",
        ),
        (
            &["--warmup", "200000"],
            "--warmup 200000 is more than the limit, 100000",
        ),
        (
            &["--launch", "graph:2000"],
            "graph:G 2000 is more than the limit, 1024",
        ),
        (
            &["--launch", "graph:1", "--requests", "30000"],
            "graphs to build",
        ),
        (
            &["--kernel", "spin:1s"],
            "spin:T (ns) 1000000000 is more than the limit, 10000000",
        ),
        (
            &["--kernel", "grid:5000"],
            "grid:N 5000 is more than the limit, 1024",
        ),
        (
            &["--streams", "99999999999"],
            "more than the limit, 4294967295",
        ),
        (
            &[
                "--spacing",
                "0,1,2,3,4,5,6,7,8,9,10",
                "--burst",
                "1,2,3,4,5,6,7,8,9,10",
                "--streams",
                "1,2,3,4,5,6,7,8,9,10",
            ],
            "the list options make 1100 rows; at most 1000",
        ),
    ] {
        let out = lab(&[none], args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn the_fake_backend_drives_the_lab_end_to_end_with_the_stages_it_was_given() {
    let doc = fake_json(&["--requests", "10", "--spacing", "0,2us"]);
    assert_eq!(doc["kind"], "lab-gpu");
    assert_eq!(doc["device"]["backend"], "fake");
    let rows = doc["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for row in rows {
        assert_eq!(stage(row, "launch_call"), (10, 2_000, 2_000, 2_000));
        assert_eq!(stage(row, "submit_to_start"), (10, 6_000, 6_000, 6_000));
        assert_eq!(stage(row, "execute"), (10, 500, 500, 500));
        // The flag is visible at 8 µs; the host polls every 100 ns from 2 µs on. The ten
        // rounds alternate, the first synchronizing: five of each.
        assert_eq!(stage(row, "end_to_host"), (5, 1_500, 1_500, 1_500));
        assert_eq!(stage(row, "end_to_sync"), (5, 3_000, 3_000, 3_000));
        // 6 + 0.5 + 3 µs.
        assert_eq!(stage(row, "total"), (5, 9_500, 9_500, 9_500));
        assert_eq!(row["clock"]["error_ns"], 100);
        assert_eq!(row["clock"]["drift_ns_per_s"], 0.0);
    }
    // Time per batch: 9.5 µs a request, and 9 pauses of 2 µs between 10 requests.
    assert_eq!(rows[0]["per_batch_ns"], 9_500.0);
    assert_eq!(rows[1]["per_batch_ns"], 11_300.0);
    assert_eq!(rows[1]["config"]["spacing_ns"], 2_000);
}

#[test]
fn the_text_puts_each_row_s_time_per_batch_beside_its_stages_with_units() {
    let out = lab(
        &[FAKE],
        &["--requests", "4", "--spacing", "0", "--unit", "ns"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("time per batch (wall ÷ requests, what gem_exec_nop reports): 9500.000 ns"),
        "{text}"
    );
    let total = text
        .lines()
        .find(|l| l.trim_start().starts_with("total"))
        .unwrap();
    assert_eq!(
        total.split_whitespace().collect::<Vec<_>>(),
        [
            "total", "2", "9500", "ns", "9500", "ns", "9500", "ns", "9500", "ns"
        ]
    );
}

#[test]
fn a_saved_result_is_read_by_compare_report_and_export() {
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("gpu.json");
    let out = lab(
        &[FAKE],
        &[
            "--requests",
            "20",
            "--spacing",
            "0,4",
            "--save",
            saved.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let p = saved.to_str().unwrap();
    let compared = util::run(&["compare", "--format", "json", p, p]);
    assert!(compared.status.success(), "{}", stderr(&compared));
    let doc: Value = serde_json::from_slice(&compared.stdout).unwrap();
    let items = doc["items"].as_array().unwrap();
    // Six stages of two rows.
    assert_eq!(items.len(), 12, "{doc}");
    assert!(items.iter().all(|i| i["verdict"] == "same"), "{doc}");
    let html = dir.path().join("gpu.html");
    let reported = util::run(&["report", p, "-o", html.to_str().unwrap()]);
    assert!(reported.status.success(), "{}", stderr(&reported));
    let exported = util::run(&["export", p, "--to", "hlog"]);
    assert!(
        exported.status.success() && !exported.stdout.is_empty(),
        "{}",
        stderr(&exported)
    );
}

#[test]
fn ctrl_c_keeps_the_rows_measured() {
    // Each wait turn sleeps 1 ms: a request takes about 50 ms, a row of 1000 far longer.
    let child = util::latscope()
        .args([
            "lab",
            "gpu",
            "--format",
            "json",
            "--warmup",
            "0",
            "--requests",
            "1000",
            "--spacing",
            "0,1",
        ])
        .env("LATSCOPE_GPU_BACKEND", "fake:pace_us=1000")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1_500));
    util::interrupt(child.id());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("interrupted: 1 of 2 row(s) measured"),
        "{}",
        stderr(&out)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["interrupted"], true);
    let row = &doc["rows"][0];
    let n = row["requests"].as_u64().unwrap();
    assert!(n > 0 && n < 1_000, "{n}");
    assert_eq!(row["interrupted"], true);
    // Every measured request has its start, and its end timed by its flag or (in the rounds
    // that synchronize, one request a round here) by the synchronize.
    assert_eq!(stage(row, "submit_to_start").0, n);
    assert_eq!(stage(row, "end_to_host").0 + stage(row, "end_to_sync").0, n);
    // no warm-up: the first round polls
    assert_eq!(stage(row, "end_to_host").0, n.div_ceil(2));
}

#[test]
fn csv_is_refused_as_a_usage_error() {
    let out = lab(&[FAKE], &["--format", "csv", "--requests", "2"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("does not write --format csv"),
        "{}",
        stderr(&out)
    );
}

/// The stand-in driver (tests/targets/libcuda_stub.c), built once per test run.
fn stub() -> &'static str {
    static STUB: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    STUB.get_or_init(|| {
        let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("libcuda_stub.so");
        let status = std::process::Command::new("cc")
            .args(["-shared", "-fPIC", "-pthread", "-O1", "-o"])
            .arg(&out)
            .arg(util::root().join("tests/targets/libcuda_stub.c"))
            .status()
            .expect("cc (the linker Rust uses) builds the stub driver");
        assert!(status.success(), "cc failed to build the stub driver");
        out.to_string_lossy().into_owned()
    })
}

/// `lab gpu ARGS` on the stub driver with `env` set.
fn on_stub(env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut all = env.to_vec();
    all.push(("LATSCOPE_LIBCUDA", stub()));
    lab(&all, args)
}

#[test]
fn the_cuda_backend_runs_end_to_end_on_a_stub_driver() {
    let out = on_stub(
        &[],
        &[
            "--requests",
            "100",
            "--warmup",
            "3",
            "--spacing",
            "0",
            "--kernel",
            "nop,spin:20us,grid:4",
            "--launch",
            "stream,graph:4",
            "--format",
            "json",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["device"]["device"], "latscope stub device");
    assert_eq!(doc["device"]["driver"], "12.4 (12040)");
    let rows = doc["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 6);
    for row in rows {
        let graph = row["config"]["launch"] == "graph:4";
        // One launch call (and, isolated, one synchronize) per request, or per graph of 4.
        let calls = if graph { 25 } else { 100 };
        let count = |name: &str| {
            let s = row["stages"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["name"] == name)
                .unwrap();
            s["count"].as_u64().unwrap() + s["negative"].as_u64().unwrap()
        };
        assert_eq!(count("launch_call"), calls, "{}", row["label"]);
        assert_eq!(count("submit_to_start"), 100, "{}", row["label"]);
        // One round per call, isolated; the warm-up proved the device, so rounds alternate
        // from a synchronized one: half the rounds (rounded up) time their synchronize, the
        // rest their requests' flags.
        let per_call = if graph { 4 } else { 1 };
        assert_eq!(
            count("end_to_host"),
            calls / 2 * per_call,
            "{}",
            row["label"]
        );
        assert_eq!(
            (count("end_to_sync"), count("total")),
            (calls.div_ceil(2), calls.div_ceil(2)),
            "{}",
            row["label"]
        );
        // The stub's timer is CLOCK_MONOTONIC + 5 ms: the calibration finds it within the
        // error bound it reports.
        let error = row["clock"]["error_ns"].as_i64().unwrap();
        for at in ["offset_before_ns", "offset_after_ns"] {
            let offset = row["clock"][at].as_i64().unwrap();
            assert!(
                (offset - 5_000_000).abs() <= error,
                "{at} {offset} ± {error}"
            );
        }
        // execute is the device's own clock: a spin kernel spins at least its 20 µs.
        if row["config"]["kernel"] == "spin:20us" {
            assert!(stage(row, "execute").1 >= 20_000, "{row}");
        }
    }
}

#[test]
fn a_driver_without_a_device_is_told_so() {
    let out = on_stub(&[("LIBCUDA_STUB_DEVICES", "0")], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no CUDA device: the driver sees 0 device(s)"),
        "{}",
        stderr(&out)
    );
    let out = on_stub(&[("LIBCUDA_STUB_INIT", "100")], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "no CUDA device: cuInit: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)"
        ),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_device_held_in_exclusive_mode_or_prohibited_is_named() {
    let env = [("LIBCUDA_STUB_MODE", "3"), ("LIBCUDA_STUB_BUSY", "1")];
    let out = on_stub(&env, &["--requests", "10"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("CUDA device 0 (latscope stub device) is in exclusive-process compute mode: another process holds it"),
        "{}",
        stderr(&out)
    );
    let out = on_stub(&[("LIBCUDA_STUB_MODE", "2")], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("is in prohibited compute mode"),
        "{}",
        stderr(&out)
    );
    // Exclusive-process and free: it runs.
    let out = on_stub(
        &[("LIBCUDA_STUB_MODE", "3")],
        &["--requests", "10", "--spacing", "0"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn a_driver_too_old_for_the_ptx_is_told_the_version_needed() {
    let out = on_stub(&[("LIBCUDA_STUB_VERSION", "10020")], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("the CUDA driver is version 10.2 (10020); the lab's kernels (PTX ISA 7.0) need version 11.0 (11000) or newer"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_jit_failure_shows_the_drivers_log() {
    let out = on_stub(&[("LIBCUDA_STUB_JIT", "222")], &["--requests", "10"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("could not compile the lab's PTX"), "{err}");
    assert!(err.contains("CUDA_ERROR_UNSUPPORTED_PTX_VERSION"), "{err}");
    assert!(err.contains("stub JIT refuses this PTX"), "{err}");
}

#[test]
fn the_report_draws_time_per_batch_and_submit_to_start_against_the_spacing() {
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("gpu.json");
    let args = ["--requests", "10", "--spacing", "0,2us,8us", "--save"];
    let out = lab(&[FAKE], &[&args[..], &[saved.to_str().unwrap()]].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    let html = dir.path().join("gpu.html");
    let p = saved.to_str().unwrap();
    let reported = util::run(&["report", p, "--unit", "ns", "-o", html.to_str().unwrap()]);
    assert!(reported.status.success(), "{}", stderr(&reported));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("Time per batch against submit → start, by spacing"));
    // the fake's requests take 9.5 µs; 9 pauses of the spacing among 10 requests lengthen the
    // time per batch by 0.9 spacings, while each request's submit → start stays 6 µs
    for (spacing, per_batch) in [(0, 9_500), (2_000, 11_300), (8_000, 16_700)] {
        let row = format!(
            "<tr><td>{spacing} ns</td><td>{per_batch} ns</td><td>6000 ns</td><td>9500 ns</td></tr>"
        );
        assert!(page.contains(&row), "{row} not in the report");
    }
    assert_eq!(page.matches("per batch vs per request").count(), 1);
    // one spacing is no sweep: no such section
    let one = dir.path().join("one.json");
    let out = lab(
        &[FAKE],
        &[
            "--requests",
            "4",
            "--spacing",
            "0",
            "--save",
            one.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let reported = util::run(&[
        "report",
        one.to_str().unwrap(),
        "-o",
        html.to_str().unwrap(),
    ]);
    assert!(reported.status.success(), "{}", stderr(&reported));
    assert!(
        !std::fs::read_to_string(&html)
            .unwrap()
            .contains("by spacing")
    );
}
