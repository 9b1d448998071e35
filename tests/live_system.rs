//! `latscope live` over the whole system: process trees (scripts, `sh -c`, forked children),
//! kernel tracepoints checked against perf, probes that never fire, and the bad input of
//! kernel probes. Needs root and bpftrace, like tests/live.rs.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::live::{live_available, saved};
use crate::util::{self, root, run, stderr, stdout};

/// Compiles tests/targets/forks.c into `dir`.
fn forks(dir: &Path) -> PathBuf {
    let out = dir.join("forks");
    let status = Command::new("cc")
        .args(["-O1", "-o"])
        .arg(&out)
        .arg(root().join("tests/targets/forks.c"))
        .status()
        .expect("cc");
    assert!(status.success());
    out
}

struct Tree {
    _heavy: std::sync::MutexGuard<'static, ()>,
    dir: tempfile::TempDir,
    forks: PathBuf,
}

fn tree() -> Option<Tree> {
    if !live_available() {
        return None;
    }
    let heavy = util::heavy();
    let dir = tempfile::tempdir().unwrap();
    let forks = forks(dir.path());
    Some(Tree {
        _heavy: heavy,
        dir,
        forks,
    })
}

fn work_span(forks: &Path) -> String {
    format!("w=uprobe:{0}:work..uretprobe:{0}:work", forks.display())
}

/// Runs `latscope live --save` over `command` (in `cwd`) and returns the saved document.
fn traced(t: &Tree, cwd: &Path, command: &[&str]) -> Value {
    let save = t.dir.path().join("tree.json");
    let _ = std::fs::remove_file(&save);
    let out = util::latscope()
        .current_dir(cwd)
        .args(["live", "-q", "--save", save.to_str().unwrap()])
        .args(["--span", &work_span(&t.forks), "--"])
        .args(command)
        .output()
        .unwrap();
    assert!(out.status.success(), "{command:?}: {}", stderr(&out));
    saved(&save)
}

#[test]
fn a_scripts_children_are_traced_whatever_starts_them() {
    let Some(t) = tree() else { return };
    let forks = t.forks.to_str().unwrap();
    let script = t.dir.path().join("two.sh");
    std::fs::write(
        &script,
        format!("#!/bin/sh\n{forks} calls 150\n{forks} calls 150\n"),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let both = format!("{forks} calls 150; {forks} calls 150");
    let cases: [(&str, Vec<&str>); 4] = [
        ("/bin/sh SCRIPT", vec!["/bin/sh", "two.sh"]),
        ("./SCRIPT", vec!["./two.sh"]),
        (
            "sh -c 'A; B' (PATH look-up, spaces)",
            vec!["sh", "-c", &both],
        ),
        ("two forked children", vec![forks, "calls", "150", "2"]),
    ];
    for (what, command) in cases {
        let doc = traced(&t, t.dir.path(), &command);
        assert_eq!(doc["spans"][0]["count"], 300, "{what}: {}", doc["spans"][0]);
        assert!(
            doc["live"]["traced"]
                .as_str()
                .unwrap()
                .contains("every process it forks"),
            "{what}: {}",
            doc["live"]
        );
        let hits = &doc["live"]["probes"];
        assert_eq!(hits[0]["role"], "start");
        assert_eq!(hits[0]["hits"], 300, "{what}: {hits}");
        assert_eq!(hits[1]["hits"], 300, "{what}: {hits}");
    }
}

#[test]
fn this_process_only_leaves_the_children_out_and_says_which_probe_never_fired() {
    let Some(t) = tree() else { return };
    let save = t.dir.path().join("none.json");
    let out = run(&[
        "live",
        "-q",
        "--this-process-only",
        "--save",
        save.to_str().unwrap(),
        "--span",
        &work_span(&t.forks),
        "--",
        "sh",
        "-c",
        &format!("{} calls 20", t.forks.display()),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "warning: probe uprobe:{}:work never fired: is the process traced, is the code reached?",
            t.forks.display()
        )),
        "{err}"
    );
    assert!(err.contains("nothing was measured"), "{err}");
    assert!(!save.exists(), "an empty run saved {}", save.display());
}

#[test]
fn a_tree_larger_than_the_pid_map_is_reported() {
    let Some(t) = tree() else { return };
    let out = run(&[
        "live",
        "-q",
        "--rate",
        "tracepoint:sched:sched_process_fork",
        "--",
        t.forks.to_str().unwrap(),
        "hold",
        "4500",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("more than 4096 traced processes were alive at once"),
        "{}",
        stderr(&out)
    );
    assert!(
        stdout(&out).contains("rate tracepoint:sched:sched_process_fork: 4500 events"),
        "{}",
        stdout(&out)
    );
}

/// `latscope live` over the sleeper while `perf record -a` records the same scheduler events;
/// latscope's output, perf's text, and whether perf said it lost events.
fn live_beside_perf(t: &Tree, sleeper: &Path, save: &Path) -> (std::process::Output, String, bool) {
    let data = t.dir.path().join("perf.data");
    let perf = Command::new("perf")
        .args([
            "record",
            // bpftrace stamps with CLOCK_MONOTONIC; perf's own clock is each CPU's sched
            // clock, which a VM's CPUs need not agree on: a wake-up on one CPU and its switch
            // on another then differed by hundreds of ns between the two (p50 2,952 live
            // against 3,367 by perf, and back in the next run).
            "-k",
            "CLOCK_MONOTONIC",
            "-m",
            "2048",
            "-e",
            "sched:sched_wakeup,sched:sched_switch",
            "-a",
            "-o",
        ])
        .arg(&data)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(2));
    let rule = "runq=tracepoint:sched:sched_wakeup:comm==lsleeper..tracepoint:sched:sched_switch";
    let out = run(&[
        "live",
        "-q",
        "--key",
        "pid=next_pid",
        "--save",
        save.to_str().unwrap(),
        "--span",
        rule,
        "--",
        sleeper.to_str().unwrap(),
        "sleep",
        "2000",
    ]);
    std::thread::sleep(std::time::Duration::from_millis(500));
    util::interrupt(perf.id());
    let perf_out = perf.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&perf_out.stderr).to_lowercase();
    // perf record does not always say it lost events; its LOST records do.
    let lost_records = Command::new("perf")
        .args(["script", "--show-lost-events", "-F", "event", "-i"])
        .arg(&data)
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("LOST"));
    (
        out,
        perf_script(&data),
        said.contains("lost") || lost_records,
    )
}

/// perf's record of the same run, as text.
fn perf_script(data: &Path) -> String {
    let out = Command::new("perf")
        .args(["script", "--ns", "-i"])
        .arg(data)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
#[ignore = "a timing ratio: scripts/test.sh runs it alone (cargo test -- --ignored --test-threads=1)"]
fn wake_up_latency_agrees_with_perf_recording_the_same_run() {
    let Some(t) = tree() else { return };
    if Command::new("perf").arg("--version").output().is_err() {
        assert!(
            std::env::var_os("LATSCOPE_REQUIRE_STACK").is_none(),
            "perf is missing"
        );
        return;
    }
    // The sleeper runs under its own name, so that a filter on comm finds only it.
    let sleeper = t.dir.path().join("lsleeper");
    std::fs::copy(&t.forks, &sleeper).unwrap();
    let save = t.dir.path().join("runq.json");
    // perf may lose events on a loaded machine (it says so): then the run is tried again. So
    // is a run whose percentiles disagree: on this shared VM one did at p99 with the same count
    // of wake-ups (live 502,442 ns, perf 434,841: the 20th longest of 2,000, where a vCPU
    // stolen by the hypervisor between the two tools' reads of the clock shows; the next three
    // runs of the same build were not compared: perf's record held 540-1,193 wake-ups).
    for attempt in 1..=3 {
        let (out, perf_text, lost) = live_beside_perf(&t, &sleeper, &save);
        assert!(out.status.success(), "{}", stderr(&out));
        if lost && attempt < 3 {
            eprintln!("perf lost events (attempt {attempt}): again");
            continue;
        }
        let trace = t.dir.path().join("perf.txt");
        std::fs::write(&trace, perf_text).unwrap();
        let offline = run(&[
            "spans",
            "--key",
            "pid=next_pid",
            "--span",
            "runq=sched:sched_wakeup:comm==lsleeper..sched:sched_switch",
            "--format",
            "json",
            trace.to_str().unwrap(),
        ]);
        assert!(offline.status.success(), "{}", stderr(&offline));
        let live = saved(&save)["spans"][0].clone();
        let perf_doc: Value = serde_json::from_slice(&offline.stdout).unwrap();
        match wake_ups_agree(&live, &perf_doc["spans"][0]) {
            Ok(()) => return,
            Err(why) if attempt < 3 => eprintln!("{why} (attempt {attempt}): again"),
            Err(why) => panic!("{why}"),
        }
    }
}

/// Whether the wake-ups `latscope live` saw (`live`) and those `latscope spans` paired in
/// perf's record of the same run (`by_perf`) agree: the count, p50 and p99. A record that
/// holds too few of them is not compared (`Ok`).
fn wake_ups_agree(live: &Value, by_perf: &Value) -> Result<(), String> {
    let (n_live, n_perf) = (
        live["count"].as_u64().unwrap(),
        by_perf["count"].as_u64().unwrap(),
    );
    eprintln!(
        "wake-ups: live {n_live}, perf {n_perf}; p50 live {} perf {}; p99 live {} perf {}",
        live["p50"], by_perf["p50"], live["p99"], by_perf["p99"],
    );
    // The sleeper sleeps 2,000 times: each wake-up is one span (±1% for the start and end).
    assert!((1980..=2020).contains(&n_live), "{live}");
    if n_live.abs_diff(n_perf) * 100 > n_perf {
        // Seen on a quiet machine: perf's record held only 1,233-1,464 of the 2,000 wake-ups
        // (no LOST records), while BPF on the same tracepoint saw them all. Then perf cannot be
        // the reference for this run.
        eprintln!("perf recorded {n_perf} of the sleeper's ~2,000 wake-ups: not compared");
        return Ok(());
    }
    // Live percentiles are buckets (within 12.5%); perf's are exact samples.
    for p in ["p50", "p99"] {
        let (l, o) = (live[p].as_f64().unwrap(), by_perf[p].as_f64().unwrap());
        let bound = live["histogram"]["percentile_error_bounds"][p]
            .as_f64()
            .unwrap();
        if (l - o).abs() > bound + 0.02 * o {
            return Err(format!("{p}: live {l} ± {bound}, perf {o}"));
        }
    }
    Ok(())
}

#[test]
fn unknown_tracepoints_fields_and_functions_are_usage_errors_naming_what_exists() {
    if !live_available() {
        return;
    }
    let cases = [
        (
            vec!["--rate", "tracepoint:sched:sched_wakup"],
            "no such tracepoint; nearest: sched:sched_wakeup",
        ),
        (
            vec!["--rate", "tracepoint:sched:sched_wakeup:comn==x"],
            "has no field 'comn'",
        ),
        (
            vec!["--rate", "tracepoint:sched:sched_wakeup:pid^=12"],
            "^= compares text",
        ),
        (
            vec!["--rate", "tracepoint:sched:sched_wakeup:prio==high"],
            "is not one (decimal or 0x hex)",
        ),
        (
            vec![
                "--rate",
                "tracepoint:sched:sched_wakeup:comm==a_name_longer_than_15",
            ],
            "can never match",
        ),
        (
            vec!["--rate", "kprobe:vfs_raed"],
            "no kernel function 'vfs_raed' can be probed; nearest: vfs_read",
        ),
        (
            vec![
                "--key",
                "pid=next_comm",
                "--span",
                "r=tracepoint:sched:sched_wakeup..tracepoint:sched:sched_switch",
            ],
            "compares an integer at tracepoint:sched:sched_wakeup with text",
        ),
        (
            vec!["--value", "v=tracepoint:sched:sched_wakeup:comm"],
            "a value must be an integer",
        ),
    ];
    for (args, message) in cases {
        let mut all = vec!["live"];
        all.extend(args.iter().copied());
        let out = run(&all);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(message), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("Usage: latscope live"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn commands_that_cannot_start_are_refused_before_tracing() {
    if !live_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("noshebang");
    std::fs::write(&script, "echo hi\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let rate = [
        "live",
        "--rate",
        "tracepoint:sched:sched_process_exec",
        "--",
    ];
    let out = run(&[&rate[..], &[script.to_str().unwrap()]].concat());
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("neither a program nor a script starting with #!"),
        "{}",
        stderr(&out)
    );
    let out = run(&[&rate[..], &["no-such-command-anywhere"]].concat());
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("not found"), "{}", stderr(&out));
}

/// Runs `latscope ARGS` (shell words) in a private mount namespace without tracefs or debugfs,
/// so the machine's tracefs stays as it is, and checks that latscope mounted tracefs and
/// succeeded; `None` (a skip) where they cannot be unmounted. debugfs goes too, or the kernel
/// would mount tracefs under it on first access.
fn without_tracefs(args: &str) -> Option<std::process::Output> {
    let script = format!(
        "umount /sys/kernel/tracing 2>/dev/null; umount /sys/kernel/debug/tracing 2>/dev/null; \
         umount /sys/kernel/debug 2>/dev/null; \
         grep -q -e tracefs -e debugfs /proc/mounts && exit 3; \
         exec {} {args}",
        env!("CARGO_BIN_EXE_latscope")
    );
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .output()
        .unwrap();
    if out.status.code() == Some(3) {
        eprintln!("skipping: tracefs could not be unmounted here");
        return None;
    }
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("mounted tracefs at /sys/kernel/tracing"),
        "{}",
        stderr(&out)
    );
    Some(out)
}

#[test]
fn tracefs_is_mounted_when_missing() {
    if !live_available() || Command::new("unshare").arg("--version").output().is_err() {
        return;
    }
    let _heavy = util::heavy();
    let args = "live -q --duration 1 --rate tracepoint:sched:sched_switch";
    let Some(out) = without_tracefs(args) else {
        return;
    };
    assert!(stdout(&out).contains("rate tracepoint:sched:sched_switch: "));
}

/// A command traced with user-space probes alone is still followed through its forks, by
/// the scheduler's tracepoints: on a machine without tracefs (a fresh boot) latscope mounts it
/// for them too (bpftrace failed with "tracepoint not found: sched:sched_process_fork").
#[test]
fn a_command_traced_by_uprobes_alone_gets_tracefs_mounted_for_its_forks() {
    let Some(t) = tree() else { return };
    if Command::new("unshare").arg("--version").output().is_err() {
        return;
    }
    let args = format!(
        "live -q --span '{}' -- {} calls 20",
        work_span(&t.forks),
        t.forks.display()
    );
    let Some(out) = without_tracefs(&args) else {
        return;
    };
    assert!(stdout(&out).contains("w: 20 samples"), "{}", stdout(&out));
}

/// `--print-program` of the kernel examples in `--help`, against golden files.
#[test]
fn the_fence_and_i915_examples_compile_to_their_golden_programs() {
    let cases = [
        (
            "dma-fence.bt",
            vec![
                "--key",
                "context,seqno",
                "--span",
                "fence=tracepoint:dma_fence:dma_fence_emit..tracepoint:dma_fence:dma_fence_signaled",
            ],
        ),
        (
            "i915-request.bt",
            vec![
                "--key",
                "ctx,seqno",
                "--by",
                "class",
                "--span",
                "request=tracepoint:i915:i915_request_add..tracepoint:i915:i915_request_retire",
            ],
        ),
        (
            "runqlat-command.bt",
            vec![
                "--key",
                "pid=next_pid",
                "--span",
                "runq=tracepoint:sched:sched_wakeup..tracepoint:sched:sched_switch",
                "--",
                "./app",
            ],
        ),
    ];
    for (golden, args) in cases {
        let mut all = vec!["live", "--print-program"];
        all.extend(args.iter().copied());
        let out = run(&all);
        assert!(out.status.success(), "{golden}: {}", stderr(&out));
        let path = root().join("tests/data/live").join(golden);
        if std::env::var_os("LATSCOPE_BLESS").is_some() {
            std::fs::write(&path, &out.stdout).unwrap();
        }
        let want = std::fs::read_to_string(&path).unwrap_or_default();
        assert_eq!(
            stdout(&out),
            want,
            "{golden} differs (LATSCOPE_BLESS=1 rewrites it)"
        );
    }
}

/// The real libkscreen (Debian's libkf5screen-bin) on a private Xvfb and session bus: its
/// configuration query from `GetConfigOperation::start()` to `ConfigOperation::emitResult()`,
/// over every `kscreen-doctor` a shell loop starts, in and out of process.
#[test]
fn the_real_libkscreen_query_is_timed_over_every_process_a_loop_starts() {
    let Some(t) = tree() else { return };
    let lib = std::fs::read_dir("/usr/lib/x86_64-linux-gnu")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libKF5Screen.so.5."))
        });
    let have = |c: &str| {
        Command::new("sh")
            .args(["-c", &format!("command -v {c}")])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let (Some(lib), true) = (
        lib,
        have("kscreen-doctor") && have("Xvfb") && have("dbus-daemon"),
    ) else {
        assert!(
            std::env::var_os("LATSCOPE_REQUIRE_STACK").is_none(),
            "libkf5screen-bin, xvfb and dbus-daemon are needed"
        );
        return;
    };
    let run_dir = t.dir.path().join("run");
    std::fs::create_dir(&run_dir).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&run_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let span = format!(
        "q=uprobe:{0}:_ZN7KScreen18GetConfigOperation5startEv..uprobe:{0}:_ZN7KScreen15ConfigOperation10emitResultEv",
        lib.display()
    );
    let script = r#"
        set -u
        Xvfb -displayfd 3 -screen 0 1024x768x24 -nolisten tcp 3>"$R/display" 2>/dev/null & X=$!
        for i in $(seq 100); do [ -s "$R/display" ] && break; sleep 0.05; done
        export DISPLAY=:$(cat "$R/display")
        export DBUS_SESSION_BUS_ADDRESS=unix:path=$R/bus
        dbus-daemon --session --address="$DBUS_SESSION_BUS_ADDRESS" --fork --print-pid >"$R/bus.pid"
        trap 'kill $X $(cat "$R/bus.pid"); pkill -x kscreen_backen' EXIT
        kscreen-doctor -o >/dev/null 2>&1
        loop='for i in $(seq 40); do kscreen-doctor -o >/dev/null 2>&1; done'
        "$LATSCOPE" live -q --save "$R/dbus.json" --span "$SPAN" -- /bin/sh -c "$loop" || exit 1
        KSCREEN_BACKEND_INPROCESS=1 "$LATSCOPE" live -q --save "$R/inproc.json" --span "$SPAN" -- /bin/sh -c "$loop"
    "#;
    let out = Command::new("bash")
        .args(["-c", script])
        .env("R", &run_dir)
        .env("XDG_RUNTIME_DIR", &run_dir)
        .env("SPAN", &span)
        .env("LATSCOPE", env!("CARGO_BIN_EXE_latscope"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    for mode in ["dbus", "inproc"] {
        let doc = saved(&run_dir.join(format!("{mode}.json")));
        let n = doc["spans"][0]["count"].as_u64().unwrap();
        assert!(n >= 40, "{mode}: {n} queries timed: {}", doc["spans"][0]);
    }
    let cmp = run(&[
        "compare",
        run_dir.join("inproc.json").to_str().unwrap(),
        run_dir.join("dbus.json").to_str().unwrap(),
    ]);
    assert!(cmp.status.success(), "{}", stderr(&cmp));
    eprintln!("{}", stdout(&cmp));
}
