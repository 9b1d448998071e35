//! Helpers shared by the integration tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// Wake-up → run, keyed by the woken task: the `spans` rule of the committed sched traces.
pub const WAKE: [&str; 6] = [
    "--start",
    "sched:sched_wakeup",
    "--end",
    "sched:sched_switch",
    "--key",
    "pid=next_pid",
];

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A real captured log under tests/data/wayland.
pub fn data(name: &str) -> PathBuf {
    root().join("tests/data/wayland").join(name)
}

/// Every real captured log.
pub fn real_logs() -> Vec<PathBuf> {
    let mut logs: Vec<PathBuf> = std::fs::read_dir(root().join("tests/data/wayland"))
        .expect("tests/data/wayland")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    assert!(
        logs.len() >= 4,
        "expected the captured logs in tests/data/wayland"
    );
    logs
}

/// `latscope ARGS...`
/// The binary under test: this build's, or `LATSCOPE_BIN` when set (an older build, to take
/// the abuse suite's "before" column with the same tests).
pub fn latscope() -> Command {
    Command::new(
        std::env::var_os("LATSCOPE_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_latscope").into()),
    )
}

/// Runs latscope and returns its output.
pub fn run(args: &[&str]) -> Output {
    latscope().args(args).output().expect("run latscope")
}

/// Runs latscope with `input` on standard input.
pub fn run_stdin(args: &[&str], input: &[u8]) -> Output {
    use std::io::Write;
    let mut child = latscope()
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn latscope");
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().expect("wait latscope");
    writer.join().unwrap();
    out
}

/// stdout as text
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// stderr as text
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `latscope wayland --format json FILE` parsed, asserting success.
pub fn wayland_json(path: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["wayland", "--format", "json"];
    args.extend_from_slice(extra);
    let path = path.to_str().unwrap();
    args.push(path);
    let out = run(&args);
    assert!(
        out.status.success(),
        "latscope failed on {path}: {}",
        stderr(&out)
    );
    serde_json::from_slice(&out.stdout).expect("latscope JSON")
}

/// The spans of a `spans` document, by `name/side`.
pub fn spans_by_name(doc: &Value) -> std::collections::BTreeMap<String, Value> {
    doc["spans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                format!(
                    "{}/{}",
                    s["name"].as_str().unwrap(),
                    s["side"].as_str().unwrap_or("-")
                ),
                s.clone(),
            )
        })
        .collect()
}

/// Writes `text` to a new file in `dir`.
pub fn write(dir: &Path, name: &str, text: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs a Python script from tests/independent and returns its stdout (asserting success).
pub fn python(script: &str, args: &[&str]) -> Vec<u8> {
    let out = Command::new("python3")
        .arg(root().join("tests/independent").join(script))
        .args(args)
        .output()
        .expect("python3 (the test command installs it)");
    assert!(
        out.status.success(),
        "{script} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Whether every command of `commands` is on PATH; panics when they must be (LATSCOPE_REQUIRE_STACK,
/// set by the test command after installing them) and are not, naming `what`.
pub fn commands_available(commands: &[&str], what: &str) -> bool {
    let have = commands.iter().all(|c| {
        Command::new("sh")
            .args(["-c", &format!("command -v {c}")])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if !have && std::env::var_os("LATSCOPE_REQUIRE_STACK").is_some() {
        panic!(
            "{what} missing but LATSCOPE_REQUIRE_STACK is set: run scripts/capture/install-deps.sh"
        );
    }
    if !have {
        eprintln!("skipping: {what} not installed (scripts/capture/install-deps.sh)");
    }
    have
}

/// Whether the real Wayland stack is installed; panics when it must be (LATSCOPE_REQUIRE_STACK,
/// set by the test command after installing it) and is not.
pub fn stack_available() -> bool {
    commands_available(
        &[
            "weston",
            "weston-simple-shm",
            "glmark2-es2-wayland",
            "miral-shell",
        ],
        "the real Wayland stack (weston, glmark2, Mir)",
    )
}

/// Serialises the tests that run the real stack or measure timing: on a 2-core machine, a
/// software-rendered glmark2 next to a busy-wait timing test would make the timings noise.
pub fn heavy() -> std::sync::MutexGuard<'static, ()> {
    static HEAVY: std::sync::Mutex<()> = std::sync::Mutex::new(());
    HEAVY
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `latscope ARGS` given `input` on a pipe that stays open (as a live producer's would), then
/// Ctrl-C half a second later: what it printed and how it ended.
pub fn interrupted_on_an_open_pipe(args: &[&str], input: &[u8]) -> Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = latscope()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input).unwrap();
    stdin.flush().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    interrupt(child.id());
    let out = child.wait_with_output().unwrap();
    drop(stdin);
    out
}

/// Sends SIGINT (Ctrl-C) to a process.
pub fn interrupt(pid: u32) {
    unsafe extern "C" {
        fn kill(pid: i32, signal: i32) -> i32;
    }
    // SAFETY: kill has no memory-safety preconditions; the tests signal only their children.
    unsafe { kill(pid as i32, 2) };
}

/// Runs `latscope wayland --format json` on a log under tests/data/compare and saves the result
/// as `dir/name`; returns its path.
pub fn compare_input(dir: &Path, log: &str, name: &str) -> String {
    let log = root().join("tests/data/compare").join(log);
    let out = run(&["wayland", "--format", "json", log.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    write(dir, name, &out.stdout).to_str().unwrap().to_string()
}

/// A complete version-1 `spans` document (live source) around `series`, for tests that write
/// results by hand.
pub fn spans_doc(series: &[serde_json::Value]) -> String {
    serde_json::json!({
        "kind": "spans", "version": 1, "unit": "ns", "source": "live", "live": null,
        "spans": series,
    })
    .to_string()
}

/// One series of a `spans` document: a log-linear histogram of `buckets` (min, max, count) with
/// the given percentiles and their error bounds.
pub fn series(
    name: &str,
    count: u64,
    [min, p50, p99, max]: [u64; 4],
    [e50, e99]: [u64; 2],
    buckets: &[(u64, u64, u64)],
) -> serde_json::Value {
    let buckets: Vec<serde_json::Value> = buckets
        .iter()
        .map(|&(lo, hi, n)| serde_json::json!({"min": lo, "max": hi, "count": n}))
        .collect();
    serde_json::json!({
        "name": name, "side": null, "by": null, "group": null, "count": count,
        "min": min, "p50": p50, "p90": p50, "p99": p99, "p999": p99, "max": max,
        "mean": (min + max) as f64 / 2.0, "stddev": null,
        "histogram": {
            "scheme": "log-linear-8", "unit": "ns", "buckets": buckets, "percentiles_exact": false,
            "percentile_max_relative_error": 0.125,
            "percentile_error_bounds": {"p50": e50, "p90": e50, "p99": e99, "p999": e99},
            "hdr": null,
        },
    })
}

/// The python of the tests' private venv with `packages` (PyPI, `name==version`) installed by
/// scripts/capture/venv.sh; `None` (skip) when it cannot be made here, a panic when it must
/// (LATSCOPE_REQUIRE_STACK).
pub fn venv_python(packages: &[&str]) -> Option<PathBuf> {
    let out = Command::new("bash")
        .arg(root().join("scripts/capture/venv.sh"))
        .args(packages)
        .output();
    match out {
        Ok(out) if out.status.success() => Some(PathBuf::from(
            String::from_utf8_lossy(&out.stdout).trim().to_string(),
        )),
        other => {
            let why = match other {
                Ok(out) => String::from_utf8_lossy(&out.stderr).into_owned(),
                Err(e) => e.to_string(),
            };
            if std::env::var_os("LATSCOPE_REQUIRE_STACK").is_some() {
                panic!("cannot make the Python venv with {packages:?}: {why}");
            }
            eprintln!("skipping: no Python venv with {packages:?}: {why}");
            None
        }
    }
}

/// Perfetto's own decoder (the PyPI package `perfetto`) in the tests' venv.
pub const PERFETTO_PY: [&str; 2] = ["perfetto==0.59.1", "protobuf==7.36.2"];

/// The slices of a Perfetto trace as decoded by tests/independent/perfetto_slices.py with
/// Perfetto's compiled schema; `None` when the venv cannot be made (see [`venv_python`]).
pub fn perfetto_slices(trace: &Path) -> Option<Vec<serde_json::Value>> {
    let python = venv_python(&PERFETTO_PY)?;
    let out = Command::new(python)
        .arg(root().join("tests/independent/perfetto_slices.py"))
        .arg(trace)
        .output()
        .expect("venv python");
    assert!(
        out.status.success(),
        "perfetto_slices.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_json::from_slice(&out.stdout).expect("JSON from perfetto_slices.py"))
}

/// Runs `latscope export SAVED --to FORMAT -o OUT` and asserts that it succeeded.
pub fn export(saved: &Path, format: &str, out: &Path) {
    let o = run(&[
        "export",
        saved.to_str().unwrap(),
        "--to",
        format,
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
}
