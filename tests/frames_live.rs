//! `latscope frames --live` on a real weston headless and weston-presentation-shm: one run seen
//! by the probes and by both sides' WAYLAND_DEBUG logs at once (scripts/capture/frames-live.sh),
//! so that each live stage is checked against the logs' stage of the same frame, and
//! commit_to_display against presentation-shm's own c2p. Needs root and bpftrace.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

use crate::util::{commands_available, root, run, stderr};

/// Whether the probes can run here (root, bpftrace) with weston and its client; panics when
/// they must (LATSCOPE_REQUIRE_STACK) and cannot.
fn live_frames_available() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root_user = unsafe { geteuid() } == 0;
    if !root_user && std::env::var_os("LATSCOPE_REQUIRE_STACK").is_some() {
        panic!("frames --live needs root, and LATSCOPE_REQUIRE_STACK is set");
    }
    if !root_user {
        eprintln!("skipping: frames --live needs root (or CAP_BPF) for its uprobes");
        return false;
    }
    commands_available(
        &["bpftrace", "weston", "weston-presentation-shm", "stdbuf"],
        "bpftrace, weston and weston-presentation-shm",
    )
}

unsafe extern "C" {
    fn geteuid() -> u32;
}

/// The run both ways (captured once for every test of this file): its directory.
fn capture() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let _heavy = crate::util::heavy();
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("bash")
            .arg(root().join("scripts/capture/frames-live.sh"))
            .arg(dir.path())
            .arg("3")
            .arg(env!("CARGO_BIN_EXE_latscope"))
            .output()
            .expect("run frames-live.sh");
        assert!(
            out.status.success(),
            "frames-live.sh: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(dir.path().join("live.stderr")).unwrap_or_default()
        );
        dir
    })
    .path()
}

fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).expect("a frames document")
}

/// Each frame's stages (by name, and `commit`: where it was sent, on the document's clock),
/// the frames in the order of their commits.
fn per_frame(doc: &Value) -> Vec<BTreeMap<String, i64>> {
    let mut frames: BTreeMap<u64, BTreeMap<String, i64>> = BTreeMap::new();
    for r in doc["records"].as_array().unwrap() {
        let frame = frames.entry(r["frame"].as_u64().unwrap()).or_default();
        let stage = r["span"].as_str().unwrap();
        frame.insert(stage.to_string(), r["latency_ns"].as_i64().unwrap());
        if stage == "commit_to_compositor" {
            frame.insert("commit".to_string(), r["start_ns"].as_i64().unwrap());
        }
    }
    frames.into_values().collect()
}

/// How far a live stage may lie from the logs' of the same frame, in most frames: the probe and
/// the log line of one message lie microseconds apart, and a frame taken for its neighbour is a
/// refresh period (16.7 ms) off.
const SAME_FRAME_NS: i64 = 2_000_000;
/// The frames that may lie further, per stage, at most one in this many: a uprobe's trap is a
/// point where the kernel may preempt the process, and on 2 cores shared with builds the
/// compositor then waits milliseconds before its log line (one frame in seven, at a load of 5).
const PREEMPTED_ONE_IN: usize = 3;
/// How far the median of a stage's differences may be.
const TYPICAL_NS: i64 = 500_000;

/// Each stage's differences between the live frames and the logs' (the same number of frames
/// from the first commit), and the commits' own, taken as the clocks' constant apart.
fn differences(
    live: &[BTreeMap<String, i64>],
    logs: &[BTreeMap<String, i64>],
) -> BTreeMap<String, Vec<i64>> {
    let mut differences: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for (k, (ours, theirs)) in live.iter().zip(logs).enumerate() {
        for (stage, ns) in ours {
            match theirs.get(stage) {
                Some(log_ns) => differences
                    .entry(stage.clone())
                    .or_default()
                    .push(ns - log_ns),
                // only the last frames may still be on their way in the capture
                None => assert!(
                    k + 3 >= live.len(),
                    "frame {k}: {stage} live, not in the logs"
                ),
            }
        }
    }
    // the live clock (CLOCK_MONOTONIC) lies a constant away from the logs' (CLOCK_REALTIME)
    let commits = differences.entry("commit".to_string()).or_default();
    let mut sorted = commits.clone();
    sorted.sort_unstable();
    let apart = sorted[sorted.len() / 2];
    commits.iter_mut().for_each(|c| *c -= apart);
    for d in differences.values_mut() {
        d.iter_mut().for_each(|x| *x = x.abs());
        d.sort_unstable();
    }
    differences
}

#[test]
fn every_live_stage_is_the_logs_stage_of_the_same_frame() {
    if !live_frames_available() {
        return;
    }
    let dir = capture();
    let live = per_frame(&json(&dir.join("live.json")));
    let out = run(&[
        "frames",
        "-f",
        "json",
        dir.join("client.log").to_str().unwrap(),
        dir.join("server.log").to_str().unwrap(),
    ]);
    assert!(out.status.success(), "frames on the logs: {}", stderr(&out));
    let logs = per_frame(&serde_json::from_slice(&out.stdout).unwrap());
    // the client ran on past the capture: the live frames are the logs' first
    assert!(
        live.len() >= 60 && live.len() <= logs.len(),
        "{} live, {} in the logs",
        live.len(),
        logs.len()
    );
    let mut differences = differences(&live, &logs);
    for stage in [
        "commit",
        "commit_to_compositor",
        "compositor_to_frame_done",
        "compositor_to_presented",
        "presented_to_client",
        "commit_to_presented",
        "commit_to_display",
    ] {
        let d = differences.remove(stage).unwrap_or_default();
        assert!(
            d.len() + 3 >= live.len(),
            "{stage}: {} of {} frames",
            d.len(),
            live.len()
        );
        let far = d.iter().filter(|&&x| x > SAME_FRAME_NS).count();
        assert!(
            far * PREEMPTED_ONE_IN <= d.len(),
            "{stage}: {far} of {} frames more than {SAME_FRAME_NS} ns from the logs' (largest {} ns)",
            d.len(),
            d[d.len() - 1]
        );
        let median = d[d.len() / 2];
        assert!(
            median <= TYPICAL_NS,
            "{stage}: median difference {median} ns"
        );
    }
}

#[test]
fn live_commit_to_display_is_within_its_bound_of_presentation_shms_own_commit_to_present() {
    if !live_frames_available() {
        return;
    }
    let dir = capture();
    let doc = json(&dir.join("live.json"));
    let ours: Vec<i64> = per_frame(&doc)
        .iter()
        .filter_map(|f| f.get("commit_to_display").copied())
        .collect();
    let printed = std::fs::read_to_string(dir.join("live.stderr")).unwrap();
    // "     2: f2c 10 ms, c2p 42 ms, ...": whole milliseconds, cut; one line per presented
    let c2p: Vec<i64> = printed
        .lines()
        .filter_map(|l| l.split("c2p ").nth(1)?.split(' ').next()?.parse().ok())
        .collect();
    assert!(
        ours.len() >= 60 && c2p.len() >= ours.len(),
        "{} ours, {} c2p",
        ours.len(),
        c2p.len()
    );
    let bound = doc["frames"]["clock_offset"]["bound_ns"].as_i64().unwrap();
    // its own clock read at its commit lies within a millisecond of the probe's stamp, but for
    // a preemption between the two (a uprobe's trap is a point where the kernel may switch
    // tasks): most frames, and the median, within the millisecond; every one within the bound
    let mut offs: Vec<i64> = Vec::new();
    for (k, (ns, ms)) in ours.iter().zip(&c2p).enumerate() {
        let off = ns - ms * 1_000_000;
        assert!(
            off.abs() <= bound + 1_000_000,
            "frame {k}: ours {ns} ns, presentation-shm's {ms} ms, bound {bound} ns"
        );
        offs.push(off);
    }
    let near = offs
        .iter()
        .filter(|o| (-1_000_000..=2_000_000).contains(*o))
        .count();
    assert!(
        near * 3 >= offs.len() * 2,
        "{near} of {}: {offs:?}",
        offs.len()
    );
    offs.sort_unstable();
    let median = offs[offs.len() / 2];
    assert!((-1_000_000..=2_000_000).contains(&median), "{offs:?}");
}

#[test]
fn the_live_document_names_the_stages_it_cannot_give_and_maps_the_presentation_clock() {
    if !live_frames_available() {
        return;
    }
    let doc = json(&capture().join("live.json"));
    let warnings = doc["warnings"].to_string();
    assert!(
        warnings
            .contains("compositor_to_repaint, repaint and repaint_to_vblank are not measured live"),
        "{warnings}"
    );
    assert_eq!(
        doc["frames"]["clock_id"], 4,
        "weston headless: CLOCK_MONOTONIC_RAW"
    );
    let offset = &doc["frames"]["clock_offset"];
    let (low, high) = (
        offset["low_ns"].as_i64().unwrap(),
        offset["high_ns"].as_i64().unwrap(),
    );
    assert!(low <= high && offset["estimate_ns"] == high, "{offset}");
    assert_eq!(doc["input"]["lost_events"], 0);
    let counts: BTreeMap<&str, u64> = doc["spans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].as_str().unwrap(), s["count"].as_u64().unwrap()))
        .collect();
    assert_eq!(counts["repaint"], 0);
    // every frame dispatched, and presented but for those still on their way at the end
    let frames = doc["input"]["frames"].as_u64().unwrap();
    assert_eq!(counts["commit_to_compositor"], frames);
    assert!(
        counts["commit_to_presented"] + 3 >= frames,
        "{counts:?} of {frames}"
    );
}

#[test]
fn live_without_a_client_or_with_logs_is_a_usage_error() {
    let out = run(&["frames", "--live", "--compositor-pid", "1"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--client-pid PID, or its command after `--`"),
        "{}",
        stderr(&out)
    );
    let out = run(&[
        "frames",
        "--live",
        "--compositor-pid",
        "1",
        "c.log",
        "s.log",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let out = run(&["frames", "--client-pid", "1"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn a_compositor_pid_that_maps_no_libwayland_is_refused_naming_what_is_missing() {
    if !live_frames_available() {
        return;
    }
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = sleeper.id().to_string();
    let out = run(&["frames", "--live", "--compositor-pid", &pid, "--", "true"]);
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("process {pid} maps no libwayland-server")),
        "{}",
        stderr(&out)
    );
    let out = run(&[
        "frames",
        "--live",
        "--compositor-pid",
        "999999999",
        "--client-pid",
        "1",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
}

/// For every frame of `doc`, its whole is the sum of the three stages on its path, to the
/// nanosecond; how many frames had all four.
fn assert_wholes_are_sums(doc: &Value) -> usize {
    let mut summed = 0;
    for (k, f) in per_frame(doc).iter().enumerate() {
        let part = |s: &str| f.get(s).copied();
        let (Some(a), Some(b), Some(c), Some(whole)) = (
            part("commit_to_compositor"),
            part("compositor_to_presented"),
            part("presented_to_client"),
            part("commit_to_presented"),
        ) else {
            continue;
        };
        assert_eq!(a + b + c, whole, "frame {k}");
        summed += 1;
    }
    summed
}

#[test]
fn each_live_frames_whole_is_the_sum_of_the_stages_on_its_path() {
    if !live_frames_available() {
        return;
    }
    let doc = json(&capture().join("live.json"));
    let frames = doc["input"]["frames"].as_u64().unwrap() as usize;
    assert!(assert_wholes_are_sums(&doc) + 3 >= frames, "of {frames}");
}

#[test]
fn attached_to_a_running_client_and_interrupted_it_reports_what_it_captured() {
    if !live_frames_available() {
        return;
    }
    let _heavy = crate::util::heavy();
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new("bash")
        .arg(root().join("scripts/capture/frames-live.sh"))
        .arg(dir.path())
        .arg("3")
        .arg(env!("CARGO_BIN_EXE_latscope"))
        .arg("--attach")
        .output()
        .expect("run frames-live.sh");
    let said = std::fs::read_to_string(dir.path().join("live.stderr")).unwrap_or_default();
    assert!(
        out.status.success(),
        "{}\n{said}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("stopped: interrupted"), "{said}");
    let doc = json(&dir.path().join("live.json"));
    assert!(assert_wholes_are_sums(&doc) >= 60, "{}", doc["input"]);
    // the client's commits taken for the compositor's dispatches of the same frames: a frame
    // off would put the commit a refresh period (16.7 ms) before its dispatch
    let mut to_compositor: Vec<i64> = per_frame(&doc)
        .iter()
        .filter_map(|f| f.get("commit_to_compositor").copied())
        .collect();
    to_compositor.sort_unstable();
    let median = to_compositor[to_compositor.len() / 2];
    assert!((0..TYPICAL_NS).contains(&median), "{median} ns");
    // attached after the client bound wp_presentation: said, and the clock mapped all the same
    assert!(
        doc["warnings"]
            .to_string()
            .contains("clock's id was sent before tracing began")
    );
    assert!(doc["frames"]["clock_offset"]["bound_ns"].as_i64().is_some());
}

#[test]
fn on_mir_nested_in_weston_the_stages_to_the_compositor_are_given_and_the_rest_said_why_not() {
    if !live_frames_available() || !commands_available(&["miral-shell"], "Mir (miral-shell)") {
        return;
    }
    let _heavy = crate::util::heavy();
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new("bash")
        .arg(root().join("scripts/capture/frames-live.sh"))
        .arg(dir.path())
        .arg("3")
        .arg(env!("CARGO_BIN_EXE_latscope"))
        .arg("--mir")
        .output()
        .expect("run frames-live.sh");
    let said = std::fs::read_to_string(dir.path().join("live.stderr")).unwrap_or_default();
    assert!(
        out.status.success(),
        "{}\n{said}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json(&dir.path().join("live.json"));
    let frames = doc["input"]["frames"].as_u64().unwrap();
    let counts: BTreeMap<&str, u64> = doc["spans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].as_str().unwrap(), s["count"].as_u64().unwrap()))
        .collect();
    // Mir 2.12 offers no wp_presentation: each commit dispatched, and its frame callback done
    assert!(frames >= 60, "{frames} frames");
    assert_eq!(counts["commit_to_compositor"], frames);
    assert!(
        counts["compositor_to_frame_done"] + 3 >= frames,
        "{counts:?}"
    );
    assert_eq!(counts.get("compositor_to_presented"), None, "{counts:?}");
    let warnings = doc["warnings"].to_string();
    assert!(
        warnings.contains("never bound wp_presentation"),
        "{warnings}"
    );
}
