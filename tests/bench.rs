//! `latscope bench` end to end on a CPU-bound test program (tests/targets/spin.c). The verdict
//! rule itself is tested on fixed data in src/bench/stats.rs; its false-alarm and detection
//! rates are measured by scripts/bench/verdict_study.py.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::util::{self, run, stderr, stdout};

fn spin(dir: &Path) -> PathBuf {
    let out = dir.join("spin");
    let status = Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&out)
        .arg(util::root().join("tests/targets/spin.c"))
        .status()
        .expect("cc");
    assert!(status.success());
    out
}

fn json(args: &[&str]) -> Value {
    let mut all = vec!["bench", "--format", "json"];
    all.extend_from_slice(args);
    let out = run(&all);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_twice_as_slow_command_is_called_slower_with_its_interval() {
    let _heavy = util::heavy();
    let dir = tempfile::tempdir().unwrap();
    let s = spin(dir.path());
    let (a, b) = (
        format!("{} 2000000", s.display()),
        format!("{} 4000000", s.display()),
    );
    let doc = json(&["--runs", "15", &a, &b]);
    assert_eq!(doc["kind"], "bench");
    let c = &doc["comparisons"][0];
    assert_eq!(
        (c["baseline"].as_u64(), c["candidate"].as_u64()),
        (Some(0), Some(1))
    );
    let wall = &c["metrics"][0];
    assert_eq!(wall["metric"], "wall", "{c}");
    assert_eq!(wall["verdict"], "slower", "{c}");
    let ratio = wall["p50"]["ratio"].as_f64().unwrap();
    let ci = wall["p50"]["ci"].as_array().unwrap();
    assert!(ci[0].as_f64().unwrap() <= ratio && ratio <= ci[1].as_f64().unwrap());
    assert!((1.6..2.4).contains(&ratio), "ratio {ratio}");
    let runs = doc["commands"][0]["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 15);
    assert!(runs[0]["wall_ns"].as_u64().unwrap() > 0);
    assert!(
        runs[0]["counters"]["task-clock"].as_u64().unwrap() > 0,
        "{}",
        runs[0]
    );
    let wall = &doc["commands"][0]["metrics"][0];
    assert_eq!(wall["metric"], "wall");
    assert!(wall["ci"].is_array());
    assert_eq!(doc["commands"][0]["wall"]["count"], 15);
}

#[test]
fn the_text_report_has_a_table_a_sentence_and_a_matrix_for_parameter_lists() {
    let _heavy = util::heavy();
    let dir = tempfile::tempdir().unwrap();
    let s = spin(dir.path());
    let out = run(&[
        "bench",
        "--runs",
        "5",
        "-L",
        "n=1000000,2000000,4000000",
        &format!("{} {{n}}", s.display()),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("3 commands, 5 runs each, interleaved in shuffled blocks"),
        "{text}"
    );
    assert!(
        text.contains("B vs A:") && text.contains("metric") && text.contains("verdict"),
        "{text}"
    );
    assert!(text.contains("speedup of row over column"), "{text}");
    assert!(text.contains("A n=1000000"), "{text}");
}

#[test]
fn csv_and_markdown_exports_have_one_line_per_run_and_per_command() {
    let dir = tempfile::tempdir().unwrap();
    let s = spin(dir.path());
    let cmd = format!("{} 100000", s.display());
    let out = run(&["bench", "--runs", "3", "--format", "csv", &cmd]);
    let text = stdout(&out);
    assert!(
        text.starts_with("command_index,command,run,wall_ns,user_ns,sys_ns,max_rss_kb,exit_code"),
        "{text}"
    );
    assert_eq!(text.lines().count(), 4);
    let out = run(&["bench", "--runs", "3", "--format", "markdown", &cmd, &cmd]);
    assert!(
        stdout(&out).contains("| command | wall median | 95% CI |"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn two_saved_results_can_be_compared() {
    let dir = tempfile::tempdir().unwrap();
    let s = spin(dir.path());
    let cmd = format!("{} 100000", s.display());
    let (old, new) = (dir.path().join("old.json"), dir.path().join("new.json"));
    for path in [&old, &new] {
        let out = run(&[
            "bench",
            "--runs",
            "5",
            "--save",
            path.to_str().unwrap(),
            &cmd,
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let out = run(&[
        "bench",
        "--compare",
        old.to_str().unwrap(),
        new.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("B vs A:"), "{}", stdout(&out));
    let out = run(&[
        "bench",
        "--compare",
        old.to_str().unwrap(),
        "/nonexistent.json",
    ]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn a_missing_command_is_an_error_naming_it() {
    let out = run(&["bench", "--runs", "2", "/nonexistent/prog"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("cannot run '/nonexistent/prog'"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_failing_command_is_an_error_unless_failures_are_ignored() {
    let out = run(&["bench", "--runs", "2", "false"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("exited with status 1; use --ignore-failure"),
        "{}",
        stderr(&out)
    );
    let out = run(&["bench", "--runs", "2", "--ignore-failure", "false"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn a_run_past_the_timeout_is_an_error() {
    let out = run(&["bench", "--runs", "1", "--timeout", "0.2s", "sleep 5"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("timed out"), "{}", stderr(&out));
}

#[test]
fn callgrind_gives_exact_and_repeatable_instruction_counts() {
    if Command::new("valgrind").arg("--version").output().is_err() {
        assert!(
            std::env::var_os("LATSCOPE_REQUIRE_STACK").is_none(),
            "valgrind missing"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = spin(dir.path());
    let cmd = format!("{} 100000", s.display());
    let count = || {
        json(&["--runs", "2", "--instructions=callgrind", &cmd])["commands"][0]["callgrind_instructions"].as_u64().unwrap()
    };
    let first = count();
    assert!(first > 100_000, "{first}");
    assert_eq!(first, count());
}

#[test]
fn ctrl_c_prints_what_was_measured() {
    let _heavy = util::heavy();
    let dir = tempfile::tempdir().unwrap();
    let s = spin(dir.path());
    let child = util::latscope()
        .args([
            "bench",
            "--runs",
            "100000",
            &format!("{} 2000000", s.display()),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    crate::util::interrupt(child.id());
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("(interrupted)"), "{text}");
}
