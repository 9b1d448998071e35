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
#[ignore = "a timing ratio: scripts/test.sh runs it alone (cargo test -- --ignored --test-threads=1)"]
fn a_twice_as_slow_command_is_called_slower_with_its_interval() {
    let _heavy = util::heavy();
    let dir = tempfile::tempdir().unwrap();
    let s = spin(dir.path());
    // 20 and 40 ms: runs of 4 and 8 ms were preempted for whole time slices on a loaded CI
    // machine, and the paired interval of 15 blocks spanned -17%..+139%.
    let (a, b) = (
        format!("{} 20000000", s.display()),
        format!("{} 40000000", s.display()),
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
    assert_eq!(wall["basis"], "paired", "{c}");
    let runs = doc["commands"][0]["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 15);
    assert!(runs[0]["wall_ns"].as_u64().unwrap() > 0);
    // Timed runs carry no counters; the counted rounds (blocks 0, 4, 8, 12) do.
    assert!(
        runs.iter().all(|r| r["counters"] == serde_json::json!({})),
        "{}",
        runs[0]
    );
    let counted = doc["commands"][0]["counted_runs"].as_array().unwrap();
    assert_eq!(counted.len(), 4);
    assert!(
        counted[0]["counters"]["task-clock"].as_u64().unwrap() > 0,
        "{}",
        counted[0]
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
        text.contains("3 commands, 5 timed runs each (+2 counted runs for the counters), interleaved in shuffled blocks; stopped at --runs"),
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
    // Three timed runs (counted = 0), then the one counted run (block 0) with the counters.
    let counted: Vec<&str> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(8).unwrap())
        .collect();
    assert_eq!(counted, ["0", "0", "0", "1"], "{text}");
    assert!(
        text.lines().next().unwrap().contains(",task-clock"),
        "{text}"
    );
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
    assert!(
        text.contains("interleaved in shuffled blocks; interrupted"),
        "{text}"
    );
}

/// `sh -c 'echo WORD >> LOG'`, as one command string for latscope (split into words there).
fn log_line(log: &Path, word: &str) -> String {
    format!("sh -c 'echo {word} >> {}'", log.display())
}

fn log_lines(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn setup_and_cleanup_run_once_around_the_benchmark_and_prepare_and_conclude_around_every_run() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let (a, b) = (log_line(&log, "run-a"), log_line(&log, "run-b"));
    let out = run(&[
        "bench",
        "--runs",
        "2",
        "--counters",
        "none",
        "--setup",
        &log_line(&log, "setup"),
        "--prepare",
        &log_line(&log, "prepare"),
        "--conclude",
        &log_line(&log, "conclude"),
        "--cleanup",
        &log_line(&log, "cleanup"),
        &a,
        &b,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = log_lines(&log);
    assert_eq!(lines.len(), 1 + 4 * 3 + 1, "{lines:?}");
    assert_eq!(lines[0], "setup", "{lines:?}");
    assert_eq!(lines[13], "cleanup", "{lines:?}");
    for run in lines[1..13].chunks(3) {
        assert_eq!(run[0], "prepare", "{lines:?}");
        assert!(run[1] == "run-a" || run[1] == "run-b", "{lines:?}");
        assert_eq!(run[2], "conclude", "{lines:?}");
    }
    let runs = |w: &str| lines.iter().filter(|l| *l == w).count();
    assert_eq!((runs("run-a"), runs("run-b")), (2, 2));
}

#[test]
fn cleanup_runs_even_when_a_command_fails() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let out = run(&[
        "bench",
        "--runs",
        "3",
        "--cleanup",
        &log_line(&log, "cleanup"),
        "false",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(log_lines(&log), ["cleanup"]);
}

#[test]
fn input_feeds_a_file_to_every_run_and_output_file_keeps_the_last_runs_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.bin");
    std::fs::write(&input, vec![b'x'; 1234]).unwrap();
    let counts = dir.path().join("counts");
    let out = run(&[
        "bench",
        "--runs",
        "3",
        "--counters",
        "none",
        "--input",
        input.to_str().unwrap(),
        &format!("sh -c 'wc -c >> {}'", counts.display()),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(log_lines(&counts), ["1234", "1234", "1234"]);
    let file = dir.path().join("out.txt");
    let out = run(&[
        "bench",
        "--runs",
        "3",
        "--output",
        file.to_str().unwrap(),
        "echo hello",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "hello\n");
}

#[test]
fn output_pipe_drains_a_command_that_writes_more_than_a_pipe_holds() {
    // 1 MB through a pipe nobody reads would block at 64 KiB and hit the timeout.
    let out = run(&[
        "bench",
        "--runs",
        "2",
        "--output",
        "pipe",
        "--timeout",
        "10s",
        "head -c 1000000 /dev/zero",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn output_pipe_does_not_wait_for_a_background_grandchild_that_keeps_the_pipe_open() {
    let started = std::time::Instant::now();
    let out = run(&[
        "bench",
        "--runs",
        "2",
        "--output",
        "pipe",
        "--shell",
        "sleep 3 & echo started",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        started.elapsed() < std::time::Duration::from_millis(2500),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn output_inherit_shows_the_commands_output_and_a_missing_input_is_an_error() {
    let out = run(&[
        "bench",
        "--runs",
        "1",
        "--output",
        "inherit",
        "echo marker-4711",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("marker-4711"), "{}", stdout(&out));
    let out = run(&["bench", "--input", "/nonexistent/in", "true"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("--input /nonexistent/in"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn exports_write_json_markdown_and_csv_files_next_to_the_screen_output() {
    let dir = tempfile::tempdir().unwrap();
    let (j, m, c) = (
        dir.path().join("r.json"),
        dir.path().join("r.md"),
        dir.path().join("r.csv"),
    );
    let out = run(&[
        "bench",
        "-N",
        "--runs",
        "3",
        "--export-json",
        j.to_str().unwrap(),
        "--export-markdown",
        m.to_str().unwrap(),
        "--export-csv",
        c.to_str().unwrap(),
        "true",
        "sh -c true",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("B vs A:"), "{}", stdout(&out));
    // --export-json is hyperfine's schema: seconds, one result per command.
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&j).unwrap()).unwrap();
    assert!(doc.get("kind").is_none(), "{doc}");
    assert_eq!(doc["results"][1]["command"], "sh -c true");
    assert_eq!(doc["results"][1]["times"].as_array().unwrap().len(), 3);
    assert_eq!(
        doc["results"][1]["exit_codes"],
        serde_json::json!([0, 0, 0])
    );
    let md = std::fs::read_to_string(&m).unwrap();
    assert!(md.starts_with("| command | wall median |"), "{md}");
    assert_eq!(md.lines().count(), 4, "{md}");
    let csv = std::fs::read_to_string(&c).unwrap();
    assert!(
        csv.lines().filter(|l| l.contains(",0,")).count() >= 6,
        "{csv}"
    );
}

#[test]
fn counters_none_reads_no_counters_and_software_reads_the_four_software_ones() {
    let none = json(&["--runs", "4", "--counters", "none", "true"]);
    let cmd = &none["commands"][0];
    assert!(cmd.get("counted_runs").is_none(), "{cmd}");
    let metrics: Vec<&str> = cmd["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["metric"].as_str().unwrap())
        .collect();
    assert!(!metrics.contains(&"task-clock"), "{metrics:?}");
    let soft = json(&["--runs", "4", "--counters", "software", "true"]);
    let counted = soft["commands"][0]["counted_runs"].as_array().unwrap();
    assert_eq!(counted.len(), 1);
    let names: Vec<&String> = counted[0]["counters"].as_object().unwrap().keys().collect();
    assert_eq!(
        names,
        [
            "context-switches",
            "cpu-migrations",
            "page-faults",
            "task-clock"
        ]
    );
}

#[test]
fn a_clear_change_stops_the_benchmark_before_its_time_limit() {
    let _heavy = util::heavy();
    let dir = tempfile::tempdir().unwrap();
    let s = spin(dir.path());
    let (a, b) = (
        format!("{} 1000000", s.display()),
        format!("{} 2000000", s.display()),
    );
    let started = std::time::Instant::now();
    let doc = json(&["--min-time", "0.3s", "--max-time", "20s", &a, &b]);
    assert!(started.elapsed().as_secs() < 15, "{:?}", started.elapsed());
    assert_eq!(doc["stop"], "clear", "{}", doc["stop"]);
    let wall = &doc["comparisons"][0]["metrics"][0];
    assert_eq!(wall["verdict"], "slower", "{wall}");
    assert!(wall["detectable"].as_f64().unwrap() > 0.0, "{wall}");
}

/// NumPy, SciPy and Matplotlib for hyperfine's scripts (tests/data/hyperfine-scripts).
const HYPERFINE_SCRIPTS_PY: [&str; 3] = ["numpy==2.2.6", "scipy==1.15.3", "matplotlib==3.10.3"];

fn hyperfine_script(python: &Path, script: &str, args: &[&str]) -> String {
    let out = Command::new(python)
        .arg(
            util::root()
                .join("tests/data/hyperfine-scripts")
                .join(script),
        )
        .args(args)
        .env("MPLBACKEND", "Agg")
        .output()
        .expect("venv python");
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The figure `advanced_statistics.py` prints after `label:`, in ms.
fn printed_ms(text: &str, label: &str) -> f64 {
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with(label))
        .unwrap_or_else(|| panic!("no {label} in {text}"));
    let value = line.trim_start()[label.len()..]
        .trim()
        .trim_end_matches("ms");
    value.trim().parse().unwrap_or_else(|_| panic!("{line}"))
}

#[test]
fn hyperfines_own_scripts_read_the_json_export() {
    let dir = tempfile::tempdir().unwrap();
    let s = spin(dir.path());
    let export = dir.path().join("hf.json");
    let saved = dir.path().join("saved.json");
    let (a, b) = (
        format!("{} 1000000", s.display()),
        format!("{} 1500000", s.display()),
    );
    let out = run(&[
        "bench",
        "--runs",
        "6",
        "--counters",
        "none",
        "-n",
        "one",
        "-n",
        "two",
        "--export-json",
        export.to_str().unwrap(),
        "--save",
        saved.to_str().unwrap(),
        &a,
        &b,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    // The export agrees with latscope's own document: the same runs, in seconds.
    let hf: Value = serde_json::from_str(&std::fs::read_to_string(&export).unwrap()).unwrap();
    let own: Value = serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    for c in 0..2 {
        let times: Vec<f64> = hf["results"][c]["times"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_f64().unwrap())
            .collect();
        let walls: Vec<f64> = own["commands"][c]["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["wall_ns"].as_f64().unwrap() / 1e9)
            .collect();
        assert_eq!(times, walls);
    }
    let Some(python) = util::venv_python(&HYPERFINE_SCRIPTS_PY) else {
        return;
    };
    let path = export.to_str().unwrap();
    // advanced_statistics.py computes its figures with NumPy from `times`: they must be the
    // ones latscope wrote (3 decimals of a millisecond).
    let text = hyperfine_script(
        &python,
        "advanced_statistics.py",
        &[path, "--time-unit", "millisecond"],
    );
    assert!(
        text.contains("Command 'one'") && text.contains("Command 'two'"),
        "{text}"
    );
    assert!(text.contains("runs:          6"), "{text}");
    let first = text.split("Command 'two'").next().unwrap();
    for (label, field) in [
        ("mean:", "mean"),
        ("stddev:", "stddev"),
        ("median:", "median"),
        ("min:", "min"),
        ("max:", "max"),
    ] {
        let ours = hf["results"][0][field].as_f64().unwrap() * 1e3;
        let numpy = printed_ms(first, label);
        assert!(
            (ours - numpy).abs() <= 0.0005 + 1e-9,
            "{label} numpy {numpy} vs latscope {ours}: {text}"
        );
    }
    // welch_ttest.py needs exactly two results; 1.5x the work is a difference.
    let text = hyperfine_script(&python, "welch_ttest.py", &[path]);
    assert!(
        text.contains("Command 1: one") && text.contains("Command 2: two"),
        "{text}"
    );
    assert!(text.contains("t = ") && text.contains(", p = "), "{text}");
    // plot_whisker.py draws a PNG from times, medians and labels.
    let png = dir.path().join("whisker.png");
    hyperfine_script(
        &python,
        "plot_whisker.py",
        &[path, "--sort-by", "median", "-o", png.to_str().unwrap()],
    );
    let bytes = std::fs::read(&png).unwrap();
    assert!(bytes.starts_with(b"\x89PNG"), "{} bytes", bytes.len());
}

/// tests/targets/align.c built with its hot loop `pad` bytes past a 64-byte boundary.
fn align(dir: &Path, pad: u32) -> PathBuf {
    let out = dir.join(format!("align-pad{pad}"));
    let status = Command::new("cc")
        .arg("-O2")
        .arg(format!("-DPAD={pad}"))
        .arg("-o")
        .arg(&out)
        .arg(util::root().join("tests/targets/align.c"))
        .status()
        .expect("cc");
    assert!(status.success());
    out
}

/// A --relink command that builds tests/targets/align.c per layout: odd seeds put the loop
/// across a 64-byte line (PAD 56), even seeds at its start (as a link order could).
fn align_relink(dir: &Path) -> String {
    format!(
        "cc -O2 -DPAD=$(( {{seed}} % 2 * 56 )) -o {}/align-{{seed}} {}",
        dir.display(),
        util::root().join("tests/targets/align.c").display()
    )
}

#[test]
fn the_same_instructions_placed_differently_are_slower_and_diagnosed() {
    let _heavy = util::heavy();
    let dir = tempfile::tempdir().unwrap();
    let (fast, slow) = (align(dir.path(), 0), align(dir.path(), 56));
    // About 1.5x here, called slower on a loaded machine too (the paired trimmed ratio ignores
    // preempted runs).
    let doc = json(&[
        "--runs",
        "15",
        "--counters",
        "none",
        "--instructions",
        "callgrind",
        &format!("{} 20000000", fast.display()),
        &format!("{} 20000000", slow.display()),
    ]);
    let wall = &doc["comparisons"][0]["metrics"][0];
    assert_eq!(wall["verdict"], "slower", "{wall}");
    assert!(wall["p50"]["ratio"].as_f64().unwrap() > 1.15, "{wall}");
    assert!(doc.get("layouts").is_none());
    // The loop's 180 million instructions are the same; the dynamic loader's few thousand move
    // by a few with the environment and argv (string functions work in aligned words):
    // SwiftNIO's criterion for the same work, within 0.01%.
    let count = |c: usize| {
        doc["commands"][c]["callgrind_instructions"]
            .as_f64()
            .unwrap()
    };
    assert!(
        (count(0) - count(1)).abs() / count(0) < 1e-4,
        "{} vs {}",
        count(0),
        count(1)
    );
    assert!(count(0) > 9.0 * 20_000_000.0, "{}", count(0));
    let warnings = doc["warnings"].to_string();
    assert!(
        warnings.contains("same work, different speed"),
        "{warnings}"
    );
}

#[test]
fn a_relink_of_the_same_source_is_within_layout_noise() {
    let _heavy = util::heavy();
    let dir = tempfile::tempdir().unwrap();
    let bin = format!("{}/align-{{seed}}", dir.path().display());
    // 2% more work, under four layouts of which two place the loop badly (about +50%).
    let doc = json(&[
        "--runs",
        "20",
        "--counters",
        "none",
        "--layouts",
        "4",
        "--relink",
        &align_relink(dir.path()),
        &format!("{bin} 20000000"),
        &format!("{bin} 20400000"),
    ]);
    let layouts = &doc["layouts"];
    assert_eq!(
        layouts["relink"].as_str().unwrap(),
        align_relink(dir.path())
    );
    let seeds: Vec<u64> = layouts["layouts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["seed"].as_u64().unwrap())
        .collect();
    assert_eq!(seeds, [1, 2, 3, 4]);
    for l in 1..=4 {
        assert!(dir.path().join(format!("align-{l}")).exists());
    }
    // Every run records its layout and padding; each layout ran 5 times.
    let runs = doc["commands"][0]["runs"].as_array().unwrap();
    for l in 0..4u64 {
        let under: Vec<&Value> = runs.iter().filter(|r| r["layout"]["index"] == l).collect();
        assert_eq!(under.len(), 5, "layout {l}");
        assert!(
            under
                .iter()
                .all(|r| r["layout"] == layouts["layouts"][l as usize])
        );
    }
    let spread = layouts["spread"][0].as_f64().unwrap();
    let band = layouts["band"][0].as_f64().unwrap();
    assert!(band >= spread && spread > 0.1, "{layouts}");
    let wall = &doc["comparisons"][0]["metrics"][0];
    assert_eq!(wall["verdict"], "within-layout-noise", "{wall}");
    assert!(
        wall["reason"]
            .as_str()
            .unwrap()
            .contains("within layout noise"),
        "{wall}"
    );
}

#[test]
fn the_text_report_shows_per_layout_medians_and_the_band() {
    let dir = tempfile::tempdir().unwrap();
    let s = spin(dir.path());
    let out = run(&[
        "bench",
        "--runs",
        "9",
        "--counters",
        "none",
        "--layouts",
        "3",
        "--seed",
        "5",
        &format!("{} 1000000", s.display()),
        &format!("{} 1000000", s.display()),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let pads: Vec<String> = (5..8u64).map(pad_of_seed).collect();
    assert!(
        text.contains(&format!(
            "layouts: 3 (environment padded by {} bytes); median wall time per layout:",
            pads.join(", ")
        )),
        "{text}"
    );
    assert!(text.contains("seed 5") && text.contains("seed 7"), "{text}");
    assert!(text.contains("layout-noise band of B vs A: ±"), "{text}");
    // Two runs per layout make no band.
    let out = run(&[
        "bench",
        "--runs",
        "4",
        "--counters",
        "none",
        "--layouts",
        "2",
        "true",
        "true",
    ]);
    let text = stdout(&out);
    assert!(
        text.contains("no layout-noise band there (--runs 6 or more)"),
        "{text}"
    );
    assert!(!text.contains("layout-noise band of"), "{text}");
}

/// The padding of a layout seed, read back from a one-layout-per-seed run's document.
fn pad_of_seed(seed: u64) -> String {
    let doc = json(&[
        "--runs",
        "2",
        "--counters",
        "none",
        "--layouts",
        "2",
        "--seed",
        &seed.to_string(),
        "true",
    ]);
    doc["layouts"]["layouts"][0]["env_pad"].to_string()
}

#[test]
fn relink_needs_layouts_and_a_seed_and_a_failed_build_is_an_error() {
    let usage = |args: &[&str], says: &str| {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains(says), "{}", stderr(&out));
    };
    usage(
        &["bench", "--relink", "make a-{seed}", "./a-{seed}"],
        "give --layouts K",
    );
    usage(
        &["bench", "--layouts", "2", "--relink", "make", "./a-{seed}"],
        "has no {seed}",
    );
    usage(
        &[
            "bench",
            "--layouts",
            "2",
            "--relink",
            "make a-{seed}",
            "./a",
        ],
        "'./a' has no {seed}",
    );
    let out = run(&[
        "bench",
        "--layouts",
        "2",
        "--relink",
        "echo broken {seed} >&2; exit 3",
        "true {seed}",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("(layout 1, seed 1) failed (exit status: 3): broken 1"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn time_cpu_judges_user_plus_system_time_block_by_block() {
    let _heavy = util::heavy();
    let dir = tempfile::tempdir().unwrap();
    let s = spin(dir.path());
    let (a, b) = (
        format!("{} 2000000", s.display()),
        format!("{} 4000000", s.display()),
    );
    let doc = json(&[
        "--runs",
        "10",
        "--counters",
        "none",
        "--time",
        "cpu",
        &a,
        &b,
    ]);
    assert_eq!(doc["rule"]["time"], "cpu");
    let first = &doc["comparisons"][0]["metrics"][0];
    assert_eq!(
        (&first["metric"], &first["basis"]),
        (&"cpu".into(), &"paired".into()),
        "{first}"
    );
    assert_eq!(first["verdict"], "slower", "{first}");
    // Its ratio is that of user + sys, run by run.
    let cpu = |c: usize| -> Vec<f64> {
        doc["commands"][c]["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r["user_ns"].as_u64().unwrap() + r["sys_ns"].as_u64().unwrap()) as f64)
            .collect()
    };
    let median_ratio = {
        let mut r: Vec<f64> = cpu(1).iter().zip(cpu(0)).map(|(b, a)| b / a).collect();
        r.sort_by(f64::total_cmp);
        r[r.len() / 2]
    };
    let ratio = first["p50"]["ratio"].as_f64().unwrap();
    assert!(
        (ratio / median_ratio - 1.0).abs() < 0.05,
        "{ratio} vs {median_ratio}"
    );
    let out = run(&[
        "bench",
        "--runs",
        "3",
        "--counters",
        "none",
        "--time",
        "cpu",
        "--format",
        "markdown",
        &a,
        &b,
    ]);
    assert!(
        stdout(&out).starts_with("| command | cpu median |"),
        "{}",
        stdout(&out)
    );
}

#[test]
#[ignore = "a timing ratio: scripts/test.sh runs it alone (cargo test -- --ignored --test-threads=1)"]
fn per_layout_medians_show_what_the_placement_of_the_loop_costs() {
    let _heavy = util::heavy();
    let dir = tempfile::tempdir().unwrap();
    let bin = format!("{}/align-{{seed}}", dir.path().display());
    // A/A under four relinks, on CPU time: odd seeds place the loop across a 64-byte line.
    let measure = || {
        let doc = json(&[
            "--runs",
            "40",
            "--counters",
            "none",
            "--time",
            "cpu",
            "--layouts",
            "4",
            "--relink",
            &align_relink(dir.path()),
            &format!("{bin} 20000000"),
            &format!("{bin} 20000000"),
        ]);
        let medians: Vec<f64> = doc["layouts"]["median_ns"][0]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m.as_f64().unwrap())
            .collect();
        (doc, medians)
    };
    // Seeds 1..4: layouts 0 and 2 slow, 1 and 3 fast: about 1.5x on the earlier VM (1.3 to
    // 1.8), 1.35 to 2.6x on the EPYC of 2026-11-26/27 with a busy neighbour, which also moves
    // one layout's median by 15% against its twin (CI measured [12.7, 9.9, 16.2, 8.6] ms, 5
    // runs a layout). What is judged is that the slow layouts are clearly slower, not by how
    // much on one CPU: each slow median above each fast one (1 in 6 by chance), and the slow
    // pair's mean at least 1.25x the fast pair's. A burst of the neighbour's load can still
    // hold up one layout's runs (a quiet local CI run measured [15.2, 16.8, 21.9, 12.0] ms: a
    // fast layout at 16.8; three runs alone after it passed), so a second measurement is
    // taken when the first does not show it. (Where placement cost nothing, the order alone
    // would pass one time in 6 and the ratio rarely; two tries at most double that.)
    let ratio = |m: &[f64]| (m[0] + m[2]) / (m[1] + m[3]);
    let placed = |m: &[f64]| m[0].min(m[2]) > m[1].max(m[3]) && (1.25..3.5).contains(&ratio(m));
    let (mut doc, mut medians) = measure();
    if !placed(&medians) {
        eprintln!("first measurement {medians:?}: measured again");
        (doc, medians) = measure();
    }
    assert!(
        placed(&medians),
        "slow/fast {} {medians:?}",
        ratio(&medians)
    );
    let wall = &doc["comparisons"][0]["metrics"][0];
    assert_eq!(wall["metric"], "cpu");
    assert!(
        matches!(
            wall["verdict"].as_str(),
            Some("same" | "within-layout-noise")
        ),
        "{wall}"
    );
}

#[test]
fn an_export_that_cannot_be_written_keeps_the_summary_and_the_other_exports() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("runs.csv");
    let out = run(&[
        "bench",
        "--runs",
        "3",
        "--counters",
        "none",
        "--export-json",
        "/dev/full",
        "--export-csv",
        csv.to_str().unwrap(),
        "true",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("A (baseline): true"),
        "{}",
        stdout(&out)
    );
    let err = stderr(&out);
    assert!(
        err.contains("--export-json: cannot write /dev/full"),
        "{err}"
    );
    assert!(!err.contains("--export-csv"), "{err}");
    let lines = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(lines.lines().count(), 1 + 3, "{lines}");
}

#[test]
fn a_timeout_of_zero_is_a_usage_error_not_a_kill_of_every_run() {
    let out = run(&["bench", "--runs", "2", "--timeout", "0", "true"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("above 0"), "{}", stderr(&out));
}

#[test]
fn control_characters_in_a_command_name_are_escaped_in_the_text_report() {
    let out = run(&[
        "bench",
        "--runs",
        "2",
        "--counters",
        "none",
        "-n",
        "a\u{1b}[31mred\nforged",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("A (baseline): a\\u{1b}[31mred\\nforged"),
        "{text}"
    );
    assert!(!text.contains('\u{1b}'), "{text}");
}
