//! `latscope lab ipc` and `latscope demo` from the command line: every transport, pattern and
//! peer moves the right bytes; errors; a peer killed mid-run; the USDT probes traced live.

use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::{self, run, stderr, stdout};

fn dbus_available() -> bool {
    let ok = Command::new("sh")
        .args(["-c", "command -v dbus-daemon"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok && std::env::var_os("LATSCOPE_REQUIRE_STACK").is_some() {
        panic!("dbus-daemon is missing and LATSCOPE_REQUIRE_STACK is set");
    }
    ok
}

fn lab_json(args: &[&str]) -> Value {
    let mut all = vec!["lab", "ipc", "--format", "json"];
    all.extend_from_slice(args);
    let out = run(&all);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn every_transport_pattern_and_peer_moves_the_right_bytes() {
    let _heavy = util::heavy();
    let dbus = dbus_available();
    let doc = lab_json(&[
        "--pattern",
        "all",
        "--payload",
        "1,1000,64KiB",
        "--verify",
        "--count",
        "200",
        "--warmup",
        "8",
        "--max-time",
        "30s",
        "--rate",
        "20000",
    ]);
    let results = doc["results"].as_array().unwrap();
    let mut seen = BTreeSet::new();
    for r in results {
        let what = format!(
            "{} {} {} {}",
            r["transport"], r["peer"], r["pattern"], r["payload"]
        );
        assert_eq!(r["stop"], "done", "{what}: {r}");
        assert_eq!(r["error"], Value::Null, "{what}");
        assert_eq!(r["count"], 200, "{what}");
        // Warm-up and measured messages all arrived (bursts of 8: warm-up rounds up to 8).
        assert_eq!(r["received"], r["sent"], "{what}");
        assert!(
            r["min"].as_u64().unwrap() <= r["p50"].as_u64().unwrap(),
            "{what}"
        );
        assert!(
            r["p50"].as_u64().unwrap() <= r["max"].as_u64().unwrap(),
            "{what}"
        );
        seen.insert((
            r["transport"].as_str().unwrap().to_string(),
            r["peer"].as_str().unwrap().to_string(),
        ));
    }
    let mut expected = vec![("inproc", "none"), ("channel", "thread")];
    for t in [
        "pipe",
        "unix-stream",
        "unix-seqpacket",
        "tcp",
        "shm-futex",
        "shm-spin",
    ] {
        expected.extend([(t, "thread"), (t, "process")]);
    }
    if dbus {
        expected.extend([("dbus", "thread"), ("dbus", "process")]);
    }
    for (t, p) in expected {
        assert!(
            seen.contains(&(t.to_string(), p.to_string())),
            "{t} {p} missing"
        );
    }
    // 5 patterns × 3 payloads for each (transport, peer).
    assert_eq!(results.len(), seen.len() * 15);
}

#[test]
fn the_json_has_the_issue_shape_in_nanoseconds() {
    let doc = lab_json(&[
        "--transport",
        "inproc,pipe",
        "--peer",
        "thread",
        "--payload",
        "8",
        "--count",
        "500",
    ]);
    assert_eq!(doc["kind"], "lab-ipc");
    assert_eq!(doc["unit"], "ns");
    assert!(doc["timer"]["median_ns"].as_u64().unwrap() > 0);
    let results = doc["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    for key in [
        "transport",
        "peer",
        "pattern",
        "payload",
        "count",
        "min",
        "p50",
        "p99",
        "p999",
        "max",
        "msgs_per_s",
        "ctx_switches_per_msg",
        "cpu_ns_per_msg",
    ] {
        assert!(!results[0][key].is_null(), "{key} in {}", results[0]);
    }
    // Sorted by p50: the in-process call is the floor.
    assert_eq!(results[0]["transport"], "inproc");
    // A pipe round trip between threads blocks and wakes twice: two context switches or more.
    assert!(
        results[1]["ctx_switches_per_msg"].as_f64().unwrap() >= 1.0,
        "{}",
        results[1]
    );
}

#[test]
fn zero_segments_is_a_usage_error() {
    let out = run(&["lab", "ipc", "--pattern", "segments", "--segments", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("'0' for '--segments"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_payload_larger_than_a_ring_slot_is_a_usage_error() {
    let out = run(&[
        "lab",
        "ipc",
        "--transport",
        "shm-futex",
        "--payload",
        "64KiB",
        "--ring-bytes",
        "64KiB",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("larger than a ring slot"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn without_dbus_daemon_the_package_is_named_and_the_rest_runs() {
    let out = util::latscope()
        .args([
            "lab",
            "ipc",
            "--transport",
            "pipe,dbus",
            "--peer",
            "thread",
            "--payload",
            "8",
            "--count",
            "200",
            "--format",
            "json",
        ])
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("apt-get install dbus-daemon"),
        "{}",
        stderr(&out)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["results"].as_array().unwrap().len(), 1);
    assert_eq!(doc["results"][0]["transport"], "pipe");
    assert!(
        doc["skipped"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("dbus-daemon")
    );
}

fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

#[test]
fn a_peer_killed_mid_run_is_named_and_what_was_measured_is_printed() {
    let _heavy = util::heavy();
    let child = util::latscope()
        .args([
            "lab",
            "ipc",
            "--transport",
            "pipe",
            "--peer",
            "process",
            "--payload",
            "8",
            "--count",
            "100000000",
            "--max-time",
            "60s",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let peer = loop {
        if let Some(&p) = children(child.id()).first() {
            break p;
        }
        assert!(Instant::now() < deadline, "no peer process appeared");
        std::thread::sleep(Duration::from_millis(20));
    };
    std::thread::sleep(Duration::from_millis(500));
    unsafe extern "C" {
        fn kill(pid: i32, signal: i32) -> i32;
    }
    // SAFETY: killing the test's own grandchild.
    unsafe { kill(peer as i32, 9) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains(&format!("peer process {peer} died (killed by signal 9)")),
        "{text}"
    );
    let row = text.lines().find(|l| l.starts_with("pipe ")).unwrap();
    let n: u64 = row.split_whitespace().nth(5).unwrap().parse().unwrap();
    assert!(n > 0, "nothing measured before the kill: {row}");
    assert!(
        stderr(&out).contains("1 configuration(s) failed"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn ctrl_c_prints_what_was_measured() {
    let _heavy = util::heavy();
    let child = util::latscope()
        .args([
            "lab",
            "ipc",
            "--transport",
            "unix-stream",
            "--peer",
            "thread",
            "--payload",
            "8",
            "--count",
            "100000000",
            "--max-time",
            "60s",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    util::interrupt(child.id());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("interrupted (Ctrl-C)"), "{text}");
    assert!(
        text.lines().any(|l| l.starts_with("unix-stream ")),
        "{text}"
    );
}

#[test]
fn the_lab_carries_usdt_probes_for_send_and_receive() {
    let bin = env!("CARGO_BIN_EXE_latscope");
    let out = run(&["probes", bin]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for name in ["send", "recv", "peer_recv", "peer_send"] {
        assert!(
            text.contains(&format!(":latscope_ipc:{name}")),
            "{name} in {text}"
        );
    }
}

#[test]
fn live_traces_the_labs_one_way_messages_by_sequence_number() {
    if !crate::live::live_available() {
        return;
    }
    let _heavy = util::heavy();
    let bin = env!("CARGO_BIN_EXE_latscope");
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("live.json");
    let span = format!("oneway=usdt:{bin}:latscope_ipc:send..usdt:{bin}:latscope_ipc:peer_recv");
    let out = run(&[
        "live",
        "-q",
        "--span",
        &span,
        "--save",
        saved.to_str().unwrap(),
        "--",
        bin,
        "lab",
        "ipc",
        "--transport",
        "pipe",
        "--peer",
        "thread",
        "--pattern",
        "stream",
        "--payload",
        "64",
        "--count",
        "3000",
        "--warmup",
        "100",
        "--max-time",
        "60s",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    let span = &doc["spans"][0];
    // Every message, warm-up included, was sent and received once: 3100 spans.
    assert_eq!(span["count"], 3100, "{span}");
}

#[test]
fn the_demo_measures_ipc_and_analyses_the_bundled_log() {
    let _heavy = util::heavy();
    let started = Instant::now();
    // The demo writes its report to a new file in TMPDIR: keep it in this test's directory.
    let tmp = tempfile::tempdir().unwrap();
    let out = crate::util::latscope()
        .args(["demo"])
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("timer: CLOCK_MONOTONIC"), "{text}");
    assert!(text.lines().any(|l| l.starts_with("inproc ")), "{text}");
    assert!(text.lines().any(|l| l.starts_with("shm-spin ")), "{text}");
    assert!(
        text.contains("commit_to_release[client]: 462 samples"),
        "{text}"
    );
    assert!(text.contains("on your system: latscope lab ipc"), "{text}");
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "demo took {:?}",
        started.elapsed()
    );
}
