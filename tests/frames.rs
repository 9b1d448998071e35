//! `latscope frames` on both sides of real runs (tests/data/frames, and weston, Mir and sway
//! started here): against an independent join, the client log's own series, presentation-shm's
//! own figures, and logs cut, mixed up, rewritten in other dialects or of two runs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::util::{
    commands_available, latscope, python, root, run, stack_available, stderr, write,
};

fn frames_data(name: &str) -> PathBuf {
    root().join("tests/data/frames").join(name)
}

/// The committed pairs: (client log, server log).
fn pairs() -> Vec<(PathBuf, PathBuf)> {
    [
        ("weston-presentation-shm.client.log", "weston.server.log"),
        ("weston-simple-shm.client.log", "weston.server.log"),
        ("mir-presentation-shm.client.log", "mir.server.log"),
        ("mir-traced.client.log", "mir-traced.server.log"),
        ("sway-presentation-shm.client.log", "sway.server.log"),
        ("mutter-lab.client.log", "mutter.server.log"),
    ]
    .into_iter()
    .map(|(c, s)| (frames_data(c), frames_data(s)))
    .collect()
}

/// `latscope frames -f json CLIENT SERVER`, asserting success.
fn frames_json(client: &Path, server: &Path) -> Value {
    frames_json_of(&[client, server])
}

/// The JSON document of `latscope frames` on `inputs` (client, server, timelines), which must
/// succeed.
fn frames_json_of(inputs: &[&Path]) -> Value {
    let mut args = vec!["frames", "-f", "json"];
    args.extend(inputs.iter().map(|p| p.to_str().unwrap()));
    let out = run(&args);
    assert!(
        out.status.success(),
        "latscope frames {inputs:?}: {}",
        stderr(&out)
    );
    serde_json::from_slice(&out.stdout).expect("a frames document")
}

/// Each stage's values in frame order, from the document's per-frame records.
fn stages(doc: &Value) -> BTreeMap<String, Vec<i64>> {
    let mut stages: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for r in doc["records"].as_array().unwrap() {
        stages
            .entry(r["span"].as_str().unwrap().to_string())
            .or_default()
            .push(r["latency_ns"].as_i64().unwrap());
    }
    stages
}

/// The independent join's stages (only those it measured) and offset interval.
fn reference(client: &Path, server: &Path) -> (BTreeMap<String, Vec<i64>>, Value) {
    let out = python(
        "frames_join.py",
        &[client.to_str().unwrap(), server.to_str().unwrap()],
    );
    let r: Value = serde_json::from_slice(&out).unwrap();
    let stages = r["stages"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, v)| !v.as_array().unwrap().is_empty())
        .map(|(k, v)| {
            let values = v.as_array().unwrap().iter().map(|x| x.as_i64().unwrap());
            (k.clone(), values.collect())
        })
        .collect();
    (stages, r["offset"].clone())
}

fn assert_agrees_with_the_independent_join(client: &Path, server: &Path) -> Value {
    let doc = frames_json(client, server);
    let (want, offset) = reference(client, server);
    assert!(
        !want.is_empty(),
        "{client:?}: the reference measured nothing"
    );
    assert_eq!(
        stages(&doc),
        want,
        "{client:?} + {server:?}: stages frame by frame"
    );
    let ours = &doc["frames"]["clock_offset"];
    match offset.as_array() {
        Some(lh) => {
            assert_eq!(ours["low_ns"], lh[0], "{client:?}: offset's lower edge");
            assert_eq!(ours["high_ns"], lh[1], "{client:?}: offset's upper edge");
        }
        None => assert!(ours.is_null(), "{client:?}: no frame presented, no offset"),
    }
    doc
}

#[test]
fn every_committed_pair_gives_the_independent_joins_stages_frame_by_frame() {
    for (client, server) in pairs() {
        assert_agrees_with_the_independent_join(&client, &server);
    }
}

#[test]
fn commit_to_presented_is_the_client_logs_own_series_bit_for_bit() {
    let client = frames_data("weston-presentation-shm.client.log");
    let doc = frames_json(&client, &frames_data("weston.server.log"));
    let ours = crate::util::spans_by_name(&doc)["commit_to_presented/-"].clone();
    let theirs = crate::util::wayland_json(&client, &["--span", "presented"]);
    let theirs = crate::util::spans_by_name(&theirs)["commit_to_presented/client"].clone();
    for field in [
        "count",
        "min",
        "p50",
        "p90",
        "p99",
        "p999",
        "max",
        "mean",
        "stddev",
        "histogram",
        "unmatched",
        "discarded",
    ] {
        assert_eq!(ours[field], theirs[field], "{field}");
    }
    assert_eq!(ours["count"], 76);
}

/// A committed log, read whole.
fn read_log(p: &Path) -> latscope::frames::log::Log {
    let source = latscope::ingest::Source::from_path(p);
    latscope::frames::log::read(source.open(None).unwrap(), &source.name(), None).unwrap()
}

#[test]
fn a_stop_that_ended_the_server_log_early_leaves_the_client_messages_after_it_out_not_missing() {
    let client = read_log(&frames_data("weston-presentation-shm.client.log"));
    let mut server = read_log(&frames_data("weston.server.log"));
    // the server log as a stop can leave it: its first third read, the client's whole
    server.messages.truncate(server.messages.len() / 3);
    let last = server.messages.last().unwrap().at_us;
    let after = client.messages.iter().filter(|m| m.at_us > last).count() as u64;
    assert!(after * 2 > client.messages.len() as u64, "{after}");
    // unstopped, that is a log missing most of the client's messages
    let missing = latscope::frames::analyse(client.clone(), server.clone(), Default::default());
    assert!(
        matches!(
            missing,
            Err(latscope::frames::FramesError::NotOneRun { .. })
        ),
        "{missing:?}"
    );
    server.interrupted = true;
    let a = latscope::frames::analyse(client.clone(), server, Default::default()).unwrap();
    let j = &a.joined;
    // every message up to the server's last is joined; those after it are left out and said
    assert_eq!(j.requests + j.events, client.messages.len() as u64 - after);
    assert!(
        j.requests_found + j.events_found + 5 >= j.requests + j.events,
        "{j:?}"
    );
    let said = format!("{after} messages read after the last of");
    assert!(a.notes.iter().any(|n| n.contains(&said)), "{:?}", a.notes);
}

#[test]
fn each_frames_whole_is_the_sum_of_the_stages_on_its_path_on_every_log() {
    use latscope::frames::stages::Stage;
    for (client, server) in pairs() {
        let read = |p: &Path| {
            let source = latscope::ingest::Source::from_path(p);
            latscope::frames::log::read(source.open(None).unwrap(), &source.name(), None).unwrap()
        };
        let a =
            latscope::frames::analyse(read(&client), read(&server), Default::default()).unwrap();
        let mut summed = 0;
        for f in &a.frames {
            let at = |s| f.stage_ns(s, a.offset.map(|o| o.estimate_ns));
            let parts = [
                Stage::CommitToCompositor,
                Stage::CompositorToPresented,
                Stage::PresentedToClient,
            ]
            .map(at);
            if let [Some(a), Some(b), Some(c)] = parts {
                assert_eq!(Some(a + b + c), at(Stage::CommitToPresented), "{client:?}");
                summed += 1;
            }
        }
        let presented = a.pacing.presented;
        assert_eq!(
            summed, presented,
            "{client:?}: every presented frame summed"
        );
    }
}

#[test]
fn commit_to_display_is_within_its_bound_of_presentation_shms_own_commit_to_present() {
    let doc = frames_json(
        &frames_data("weston-presentation-shm.client.log"),
        &frames_data("weston.server.log"),
    );
    let ours = stages(&doc)["commit_to_display"].clone();
    let stdout =
        std::fs::read_to_string(frames_data("weston-presentation-shm.client.stdout")).unwrap();
    // "     2: f2c 10 ms, c2p 42 ms, ...": whole milliseconds, cut
    let c2p: Vec<i64> = stdout
        .lines()
        .filter_map(|l| l.split("c2p ").nth(1)?.split(' ').next()?.parse().ok())
        .collect();
    assert_eq!(ours.len(), c2p.len());
    let bound = doc["frames"]["clock_offset"]["bound_ns"].as_i64().unwrap();
    for (k, (ns, ms)) in ours.iter().zip(&c2p).enumerate() {
        // its own clock read at its commit lies within a millisecond of the log's stamp
        let off = ns - ms * 1_000_000;
        assert!(
            (-1_000_000..=2_000_000).contains(&off) && off.abs() <= bound,
            "frame {k}: ours {ns} ns, presentation-shm's {ms} ms"
        );
    }
}

/// `latscope frames` on a mutter run against the client's own figures. The client is
/// latscope's Wayland lab, which stamps each commit and each dispatch of `presented` with
/// `CLOCK_MONOTONIC` in ns, and mutter's presentation clock is `CLOCK_MONOTONIC` too (clock 1):
/// so each frame's commit → display is known without any clock mapping, and the mapping
/// `latscope frames` makes from the logs alone (`CLOCK_REALTIME` µs) can be checked against it.
fn assert_agrees_with_the_lab(client: &Path, lab: &Path, server: &Path) {
    let doc = frames_json(client, server);
    assert_eq!(doc["frames"]["clock_id"], 1, "mutter's presentation clock");
    let ours = stages(&doc);
    let lab: Value = serde_json::from_slice(&std::fs::read(lab).unwrap()).unwrap();
    let mut own: Vec<(i64, i64)> = lab["results"][0]["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["span"] == "commit_to_presented")
        .map(|r| {
            (
                r["start_ns"].as_i64().unwrap(),
                r["latency_ns"].as_i64().unwrap(),
            )
        })
        .collect();
    own.sort();
    let c2p = &ours["commit_to_presented"];
    assert_eq!(
        c2p.len(),
        own.len(),
        "one commit_to_presented per frame on each side"
    );
    // the lab stamps its commit before libwayland prints it, and `presented` after libwayland
    // prints its dispatch: its figure is the log's or longer, but for the log's µs
    let mut late: Vec<i64> = c2p
        .iter()
        .zip(&own)
        .map(|(ours, (_, lab))| lab - ours)
        .collect();
    assert!(late.iter().all(|&d| d >= -2_000), "{late:?}");
    late.sort_unstable();
    assert!(
        late[late.len() / 2] <= 200_000,
        "median {} ns",
        late[late.len() / 2]
    );
    // each display time, from the client log's `presented` in order, on CLOCK_MONOTONIC
    let text = std::fs::read_to_string(client).unwrap();
    let displays: Vec<i64> = text
        .lines()
        .filter_map(|l| l.split(".presented(").nth(1))
        .map(|args| {
            let n: Vec<i64> = args
                .trim_end_matches(')')
                .split(", ")
                .map(|a| a.parse().unwrap())
                .collect();
            ((n[0] << 32) + n[1]) * 1_000_000_000 + n[2]
        })
        .collect();
    assert_eq!(displays.len(), own.len());
    // commit → display from the logs and the mapped clock lies at most the recorded bound
    // above the truth (the estimate is the interval's upper edge), and below it by the time
    // libwayland took to print the commit after the lab stamped it
    let bound = doc["frames"]["clock_offset"]["bound_ns"].as_i64().unwrap();
    let c2d = &ours["commit_to_display"];
    assert_eq!(c2d.len(), own.len());
    for (k, ((ours, (commit, _)), display)) in c2d.iter().zip(&own).zip(&displays).enumerate() {
        let truth = display - commit;
        let off = ours - truth;
        assert!(
            (-200_000..=bound + 2_000).contains(&off),
            "frame {k}: ours {ours} ns, the lab's clock says {truth} ns, bound {bound} ns"
        );
    }
}

#[test]
fn on_mutter_the_stages_agree_with_the_clients_own_monotonic_stamps_frame_by_frame() {
    assert_agrees_with_the_lab(
        &frames_data("mutter-lab.client.log"),
        &frames_data("mutter-lab.client.json"),
        &frames_data("mutter.server.log"),
    );
}

#[test]
fn a_client_on_mutter_joins_as_the_independent_join_says_and_agrees_with_its_own_stamps() {
    if !commands_available(&["mutter", "dbus-daemon"], "mutter") {
        return;
    }
    let _heavy = crate::util::heavy();
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new("bash")
        .arg(root().join("scripts/capture/mutter-client.sh"))
        .args([dir.path().to_str().unwrap(), "60"])
        .env("LATSCOPE", latscope().get_program())
        .output()
        .expect("run the capture script");
    assert!(out.status.success(), "mutter-client.sh: {}", stderr(&out));
    let file = |name: &str| dir.path().join(name);
    assert_agrees_with_the_independent_join(&file("client.log"), &file("server.log"));
    assert_agrees_with_the_lab(
        &file("client.log"),
        &file("client.json"),
        &file("server.log"),
    );
}

#[test]
fn a_message_further_than_the_window_from_its_counterpart_is_not_found() {
    let client = frames_data("weston-presentation-shm.client.log");
    let server = frames_data("weston.server.log");
    let all = stages(&frames_json(&client, &server))["commit_to_compositor"].clone();
    // one commit reached the compositor 3854 µs after it was sent (docs/guide/frames.md)
    assert_eq!(all.iter().max(), Some(&3_854_000));
    let mut args = vec!["frames", "-f", "json", "--window", "2ms"];
    args.extend([client.to_str().unwrap(), server.to_str().unwrap()]);
    let out = run(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let near = &stages(&doc)["commit_to_compositor"];
    let within: Vec<i64> = all.iter().copied().filter(|&ns| ns <= 2_000_000).collect();
    assert_eq!(near, &within);
    assert_eq!(near.len(), all.len() - 1);
}

#[test]
fn logs_of_two_runs_are_refused_naming_the_first_client_message_not_found() {
    let out = run(&[
        "frames",
        frames_data("weston-presentation-shm.client.log")
            .to_str()
            .unwrap(),
        frames_data("mir.server.log").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("are not logs of one run"), "{err}");
    // the same program ran on Mir minutes later: none of its messages lies within a second
    // of the same message in Mir's log
    assert!(
        err.contains("0 of the client's 1023 messages are in the server log"),
        "{err}"
    );
    assert!(
        err.contains(
            "weston-presentation-shm.client.log:1: wl_display@1.get_registry(new id wl_registry@2)"
        ),
        "{err}"
    );
}

#[test]
fn a_stretch_cut_from_the_server_log_is_named_and_the_frames_around_it_keep_their_stages() {
    let (client, server) = (
        frames_data("weston-presentation-shm.client.log"),
        frames_data("weston.server.log"),
    );
    let whole = frames_json(&client, &server);
    let text = std::fs::read_to_string(&server).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let (from, to) = (lines.len() / 2, lines.len() / 2 + 300);
    let cut: String = lines[..from]
        .iter()
        .chain(&lines[to..])
        .map(|l| format!("{l}\n"))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let cut_server = write(dir.path(), "cut.server.log", cut);
    let doc = frames_json(&client, &cut_server);
    let gaps = doc["frames"]["joined"]["gaps"].as_array().unwrap();
    assert!(!gaps.is_empty(), "the gap is named");
    assert!(
        doc["warnings"].to_string().contains("not in"),
        "{}",
        doc["warnings"]
    );
    // the frames whose commit is outside the cut keep their commit_to_compositor, exactly
    let cut_start = lines[from..].iter().find_map(|l| stamp(l)).unwrap();
    let cut_end = lines[..to].iter().rev().find_map(|l| stamp(l)).unwrap();
    let outside = |doc: &Value| -> Vec<(i64, i64)> {
        doc["records"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["span"] == "commit_to_compositor")
            .map(|r| {
                (
                    r["start_ns"].as_i64().unwrap() / 1_000,
                    r["latency_ns"].as_i64().unwrap(),
                )
            })
            .filter(|&(start, _)| start < cut_start - 1_000_000 || start > cut_end)
            .collect()
    };
    let (before, after) = (outside(&whole), outside(&doc));
    assert!(before.len() > 20, "frames on both sides of the cut");
    assert_eq!(before, after);
}

/// The stamp of a `[1234567.890]` protocol line, µs (`None`: another line, such as weston's
/// own `[16:24:56.123]` logging).
fn stamp(line: &str) -> Option<i64> {
    let inner = line.strip_prefix('[')?.split(']').next()?.trim();
    let (ms, us) = inner.split_once('.')?;
    Some(ms.parse::<i64>().ok()? * 1_000 + us.parse::<i64>().ok()?)
}

#[test]
fn a_client_that_never_binds_wp_presentation_gets_the_stages_that_exist_and_is_told_why() {
    let doc = frames_json(
        &frames_data("mir-presentation-shm.client.log"),
        &frames_data("mir.server.log"),
    );
    let s = stages(&doc);
    assert!(s["commit_to_compositor"].len() > 50);
    assert!(!s.contains_key("commit_to_presented"));
    assert!(
        doc["warnings"]
            .to_string()
            .contains("never bound wp_presentation"),
        "{}",
        doc["warnings"]
    );
}

#[test]
fn a_compositor_that_answers_no_presentation_feedback_is_said_and_counted() {
    let doc = frames_json(
        &frames_data("sway-presentation-shm.client.log"),
        &frames_data("sway.server.log"),
    );
    assert!(
        doc["warnings"]
            .to_string()
            .contains("presentation feedbacks"),
        "{}",
        doc["warnings"]
    );
    let pacing = &doc["frames"]["pacing"];
    assert_eq!(pacing["presented"], 0);
    assert!(pacing["pending"].as_u64().unwrap() > 100);
}

/// `log` rewritten by tests/independent/dialect.py into `dialect`.
fn in_dialect(dir: &Path, log: &Path, dialect: &str) -> PathBuf {
    let text = python("dialect.py", &[dialect, log.to_str().unwrap()]);
    let name = format!("{dialect}.{}", log.file_name().unwrap().to_str().unwrap());
    write(dir, &name, text)
}

#[test]
fn both_logs_in_another_libwayland_dialect_give_the_same_frames() {
    let (client, server) = (
        frames_data("weston-presentation-shm.client.log"),
        frames_data("weston.server.log"),
    );
    let want = stages(&frames_json(&client, &server));
    let dir = tempfile::tempdir().unwrap();
    for dialect in ["1.23", "1.25-color", "1.26"] {
        let (c, s) = (
            in_dialect(dir.path(), &client, dialect),
            in_dialect(dir.path(), &server, dialect),
        );
        assert_eq!(stages(&frames_json(&c, &s)), want, "dialect {dialect}");
    }
}

#[test]
fn logs_whose_stamps_wrap_together_give_the_same_frames() {
    let (client, server) = (
        frames_data("weston-presentation-shm.client.log"),
        frames_data("weston.server.log"),
    );
    let want = stages(&frames_json(&client, &server));
    // both moved by one constant so that the 2^32 µs counter wraps a second into the server log
    let server_text = std::fs::read_to_string(&server).unwrap();
    let first = server_text.lines().find_map(stamp).unwrap();
    let shift = (1i64 << 32) - first - 1_000_000;
    let dir = tempfile::tempdir().unwrap();
    let moved = |p: &Path| {
        let text: String = std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .map(|l| match stamp(l) {
                Some(t) => {
                    let t = (t + shift).rem_euclid(1 << 32);
                    let rest = l.split_once("] ").unwrap().1;
                    format!("[{:7}.{:03}] {rest}\n", t / 1_000, t % 1_000)
                }
                None => format!("{l}\n"),
            })
            .collect();
        write(dir.path(), p.file_name().unwrap().to_str().unwrap(), text)
    };
    let doc = frames_json(&moved(&client), &moved(&server));
    assert_eq!(stages(&doc), want);
}

#[test]
fn logs_stamped_in_two_dialects_are_refused_saying_so() {
    let dir = tempfile::tempdir().unwrap();
    let server = in_dialect(dir.path(), &frames_data("weston.server.log"), "1.26");
    let out = run(&[
        "frames",
        frames_data("weston-presentation-shm.client.log")
            .to_str()
            .unwrap(),
        server.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("stamp in two ways"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_clock_that_goes_back_is_counted_and_an_empty_log_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let client = write(
        dir.path(),
        "c.log",
        "[1000.000]  -> wl_surface@3.commit()\n[999.000]  -> wl_surface@3.commit()\n",
    );
    let server = write(
        dir.path(),
        "s.log",
        "[1000.100] wl_surface@3.commit()\n[1000.200] wl_surface@3.commit()\n",
    );
    let doc = frames_json(&client, &server);
    assert!(
        doc["warnings"].to_string().contains("1 stamps went back"),
        "{}",
        doc["warnings"]
    );
    let empty = write(dir.path(), "empty.log", "");
    let out = run(&["frames", client.to_str().unwrap(), empty.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("empty.log: no WAYLAND_DEBUG message"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn the_frames_document_exports_a_slice_per_stage_and_makes_a_report() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(&[
        "frames",
        "-f",
        "json",
        "--report",
        dir.path().join("r.html").to_str().unwrap(),
        frames_data("weston-presentation-shm.client.log")
            .to_str()
            .unwrap(),
        frames_data("weston.server.log").to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let saved = write(dir.path(), "frames.json", &out.stdout);
    let html = std::fs::read_to_string(dir.path().join("r.html")).unwrap();
    assert!(html.contains("commit_to_display"));
    let trace = dir.path().join("t.json");
    crate::util::export(&saved, "chrome-json", &trace);
    let t: Value = serde_json::from_slice(&std::fs::read(&trace).unwrap()).unwrap();
    let events = t["traceEvents"].as_array().unwrap();
    let named = |n: &str| events.iter().filter(|e| e["name"] == n).count();
    assert_eq!(named("commit_to_display"), 76);
    assert_eq!(named("commit_to_compositor"), 78);
}

#[test]
fn every_record_names_its_frame_by_the_line_of_its_commit_in_the_client_log() {
    let client = frames_data("weston-presentation-shm.client.log");
    let doc = frames_json(&client, &frames_data("weston.server.log"));
    // the commits' lines, read here from the log's text
    let text = std::fs::read_to_string(&client).unwrap();
    let commits: Vec<u64> = (1..)
        .zip(text.lines())
        .filter(|(_, l)| l.contains(" -> wl_surface@") && l.ends_with(".commit()"))
        .map(|(n, _)| n)
        .collect();
    assert_eq!(commits.len(), 78);
    let mut by_frame: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for r in doc["records"].as_array().unwrap() {
        let frame = r["frame"].as_u64().expect("a frame on every record");
        by_frame
            .entry(frame)
            .or_default()
            .push(r["span"].as_str().unwrap().to_string());
    }
    assert_eq!(by_frame.keys().copied().collect::<Vec<_>>(), commits);
    // each frame's stages once each, starting with the commit's
    for (frame, spans) in &by_frame {
        assert_eq!(spans[0], "commit_to_compositor", "frame {frame}");
        let mut unique = spans.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), spans.len(), "frame {frame}: {spans:?}");
    }
}

/// The side each stage is shown on, restated here from docs/guide/frames.md.
fn side_of(stage: &str) -> &'static str {
    match stage {
        "commit_to_compositor"
        | "presented_to_client"
        | "commit_to_presented"
        | "commit_to_display" => "client",
        "compositor_to_frame_done" | "compositor_to_presented" => "compositor",
        "compositor_to_repaint" | "repaint" | "repaint_to_vblank" => "compositor timeline",
        other => panic!("no stage {other}"),
    }
}

/// The pairs of a frame's stages that follow one another, restated from docs/guide/frames.md.
const FOLLOWS: [(&str, &str); 6] = [
    ("commit_to_compositor", "compositor_to_frame_done"),
    ("commit_to_compositor", "compositor_to_presented"),
    ("compositor_to_presented", "presented_to_client"),
    ("commit_to_compositor", "compositor_to_repaint"),
    ("compositor_to_repaint", "repaint"),
    ("repaint", "repaint_to_vblank"),
];

/// A frame's stage: (frame, stage, surface, start, length).
type Stage = (u64, String, String, u64, u64);

/// Exports the frames document `doc` to Perfetto, decodes the trace with Perfetto's own schema
/// and checks it against the document: each record one slice on its side's track, and each pair
/// of a frame's stages that follow one another one flow, forward in time. Returns the slices
/// per side and the flows (`None`: no venv for the decoder).
fn assert_frames_export(dir: &Path, doc: &Value) -> Option<(BTreeMap<String, usize>, usize)> {
    let decoded = crate::perfetto::exported(dir, doc)?;
    let mut records = records_of(doc);
    let mut slices: Vec<Stage> = decoded
        .iter()
        .map(|s| {
            let name = s["name"].as_str().unwrap().to_string();
            assert_eq!(s["side"], side_of(&name), "{s}");
            let group = s["args"]["group"].as_str().unwrap().to_string();
            let frame = s["args"]["frame"].as_u64().unwrap();
            (
                frame,
                name,
                group,
                s["start_ns"].as_u64().unwrap(),
                s["dur_ns"].as_u64().unwrap(),
            )
        })
        .collect();
    records.sort();
    slices.sort();
    assert_eq!(slices, records);
    let mut per_side = BTreeMap::new();
    for s in &decoded {
        *per_side
            .entry(s["side"].as_str().unwrap().to_string())
            .or_insert(0) += 1;
    }
    // every flow leaves one slice and ends at one slice of the same frame
    let ids = |s: &Value, k: &str| -> Vec<u64> {
        s[k].as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect()
    };
    let (mut from, mut to) = (BTreeMap::new(), BTreeMap::new());
    for s in &decoded {
        for id in ids(s, "flow_ids") {
            assert!(from.insert(id, s).is_none(), "flow {id} leaves two slices");
        }
        for id in ids(s, "terminating_flow_ids") {
            assert!(to.insert(id, s).is_none(), "flow {id} ends at two slices");
        }
    }
    assert_eq!(
        from.keys().collect::<Vec<_>>(),
        to.keys().collect::<Vec<_>>()
    );
    let mut arrows = Vec::new();
    for (id, a) in &from {
        let z = to[id];
        let frame = a["args"]["frame"].as_u64().unwrap();
        assert_eq!(z["args"]["frame"].as_u64(), Some(frame), "{a} -> {z}");
        let end = a["start_ns"].as_u64().unwrap() + a["dur_ns"].as_u64().unwrap();
        let next = z["start_ns"].as_u64().unwrap();
        // the next stage starts where the first ends; the repaint's wait, at the commit's damage
        if z["name"] == "compositor_to_repaint" {
            assert!(next >= end, "{a} -> {z}");
        } else {
            assert_eq!(next, end, "{a} -> {z}");
        }
        let name = |s: &Value| s["name"].as_str().unwrap().to_string();
        arrows.push((frame, name(a), name(z)));
    }
    arrows.sort();
    assert_eq!(arrows, arrows_of(&records));
    Some((per_side, arrows.len()))
}

/// A frames document's records as (frame, stage, surface, start, length).
fn records_of(doc: &Value) -> Vec<Stage> {
    doc["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let text = |k: &str| r[k].as_str().unwrap().to_string();
            let n = |k: &str| r[k].as_u64().unwrap();
            (
                n("frame"),
                text("span"),
                text("group"),
                n("start_ns"),
                n("latency_ns"),
            )
        })
        .collect()
}

/// The arrows expected from a document's records: (frame, stage left, stage reached), sorted.
fn arrows_of(records: &[Stage]) -> Vec<(u64, String, String)> {
    let mut have: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
    for (frame, stage, ..) in records {
        have.entry(*frame).or_default().push(stage);
    }
    let mut want = Vec::new();
    for (frame, stages) in &have {
        for (a, z) in FOLLOWS {
            if stages.contains(&a) && stages.contains(&z) {
                want.push((*frame, a.to_string(), z.to_string()));
            }
        }
    }
    want.sort();
    want
}

/// Exports the frames document `doc` to Chrome JSON and checks it against the document as a
/// trace viewer reads it: each record one complete slice in its side's process, and each pair
/// of a frame's stages that follow one another one flow (`s`, then `f` with `bp: "e"`), each
/// end bound to the slice open at its stamp on its thread (the latest begun that has not
/// ended, as Perfetto's JSON importer binds it). Returns the slices per side and the flows.
fn assert_chrome_frames_export(dir: &Path, doc: &Value) -> (BTreeMap<String, usize>, usize) {
    let saved = write(dir, "frames.json", doc.to_string().as_bytes());
    let out = dir.join("frames.trace.json");
    let o = run(&[
        "export",
        saved.to_str().unwrap(),
        "--to",
        "chrome-json",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let trace: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let processes: BTreeMap<u64, String> = events
        .iter()
        .filter(|e| e["name"] == "process_name")
        .map(|e| {
            (
                e["pid"].as_u64().unwrap(),
                e["args"]["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    // µs with 3 decimals back to ns, exactly
    let ns = |v: &Value| -> u64 {
        let text = v.to_string();
        let (us, frac) = text.split_once('.').unwrap_or((&text, "0"));
        us.parse::<u64>().unwrap() * 1_000 + format!("{frac:0<3}").parse::<u64>().unwrap()
    };
    let thread = |e: &Value| (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
    let mut slices: Vec<(Stage, (u64, u64))> = Vec::new();
    let mut per_side = BTreeMap::new();
    for e in events.iter().filter(|e| e["ph"] == "X") {
        let name = e["name"].as_str().unwrap().to_string();
        let side = &processes[&e["pid"].as_u64().unwrap()];
        assert_eq!(side, side_of(&name), "{e}");
        *per_side.entry(side.clone()).or_insert(0) += 1;
        let (start, dur) = (ns(&e["ts"]), ns(&e["dur"]));
        assert_eq!(
            (start, dur),
            (
                e["args"]["start_ns"].as_u64().unwrap(),
                e["args"]["latency_ns"].as_u64().unwrap()
            )
        );
        let group = e["args"]["group"].as_str().unwrap().to_string();
        let frame = e["args"]["frame"].as_u64().unwrap();
        slices.push(((frame, name, group, start, dur), thread(e)));
    }
    let mut records = records_of(doc);
    records.sort();
    let mut seen: Vec<Stage> = slices.iter().map(|s| s.0.clone()).collect();
    seen.sort();
    assert_eq!(seen, records);
    // the slice a flow event is bound to: on its thread, the latest begun at or before its
    // stamp that has not ended before it
    let bound = |e: &Value| -> &Stage {
        let (t, at) = (thread(e), ns(&e["ts"]));
        let open = slices
            .iter()
            .filter(|(s, th)| *th == t && s.3 <= at && at <= s.3 + s.4)
            .max_by_key(|(s, _)| s.3)
            .unwrap_or_else(|| panic!("{e} is bound to no slice"));
        &open.0
    };
    let mut ends: BTreeMap<u64, (Option<&Stage>, Option<&Stage>)> = BTreeMap::new();
    for e in events.iter().filter(|e| e["ph"] == "s" || e["ph"] == "f") {
        let entry = ends.entry(e["id"].as_u64().unwrap()).or_default();
        if e["ph"] == "s" {
            assert!(entry.0.replace(bound(e)).is_none(), "{e}: a second start");
        } else {
            assert_eq!(e["bp"], "e", "{e}");
            assert!(entry.1.replace(bound(e)).is_none(), "{e}: a second end");
        }
    }
    let mut arrows: Vec<(u64, String, String)> = ends
        .values()
        .map(|(a, z)| {
            let (a, z) = (
                a.expect("a flow with no start"),
                z.expect("a flow with no end"),
            );
            assert_eq!(a.0, z.0, "{a:?} -> {z:?}");
            (a.0, a.1.clone(), z.1.clone())
        })
        .collect();
    arrows.sort();
    assert_eq!(arrows, arrows_of(&records));
    (per_side, arrows.len())
}

#[test]
fn the_frames_export_to_chrome_json_as_a_process_per_side_with_each_frame_s_arrows() {
    let dir = tempfile::tempdir().unwrap();
    let [client, server, timeline] = timeline_run();
    let doc = frames_json_of(&[&client, &server, &timeline]);
    let (per_side, flows) = assert_chrome_frames_export(dir.path(), &doc);
    let s = stages(&doc);
    let count = |k: &str| s.get(k).map_or(0, Vec::len);
    let sum = |ks: &[&str]| ks.iter().map(|k| count(k)).sum::<usize>();
    assert_eq!(
        per_side,
        BTreeMap::from([
            (
                "client".to_string(),
                sum(&[
                    "commit_to_compositor",
                    "presented_to_client",
                    "commit_to_presented",
                    "commit_to_display"
                ])
            ),
            (
                "compositor".to_string(),
                sum(&["compositor_to_frame_done", "compositor_to_presented"])
            ),
            (
                "compositor timeline".to_string(),
                sum(&["compositor_to_repaint", "repaint", "repaint_to_vblank"])
            ),
        ])
    );
    assert!(flows > 3 * count("compositor_to_presented"), "{flows}");
}

#[test]
fn the_weston_frames_export_to_perfetto_as_slices_on_each_side_linked_by_flows() {
    let dir = tempfile::tempdir().unwrap();
    let doc = frames_json(
        &frames_data("weston-presentation-shm.client.log"),
        &frames_data("weston.server.log"),
    );
    let Some((per_side, flows)) = assert_frames_export(dir.path(), &doc) else {
        return;
    };
    // the stage counts of docs/guide/frames.md: 78 commits reached the compositor, 76 were
    // answered with a frame callback and `presented`, each on its way back to the client
    let s = stages(&doc);
    let count = |k: &str| s[k].len();
    assert_eq!(
        (
            count("commit_to_compositor"),
            count("compositor_to_presented")
        ),
        (78, 76)
    );
    assert_eq!(
        per_side["client"],
        78 + count("presented_to_client")
            + count("commit_to_presented")
            + count("commit_to_display")
    );
    assert_eq!(
        per_side["compositor"],
        count("compositor_to_frame_done") + 76
    );
    assert_eq!(per_side.len(), 2, "{per_side:?}");
    assert_eq!(flows, 3 * 76);
}

#[test]
fn weston_s_timeline_exports_to_perfetto_as_a_third_side_in_each_frame_s_flow() {
    let dir = tempfile::tempdir().unwrap();
    let [client, server, timeline] = timeline_run();
    let doc = frames_json_of(&[&client, &server, &timeline]);
    let Some((per_side, flows)) = assert_frames_export(dir.path(), &doc) else {
        return;
    };
    let s = stages(&doc);
    let count = |k: &str| s.get(k).map_or(0, Vec::len);
    assert_eq!(
        per_side["compositor timeline"],
        count("compositor_to_repaint") + count("repaint") + count("repaint_to_vblank")
    );
    assert!(count("repaint") > 40, "{}", count("repaint"));
    assert!(flows > 3 * count("compositor_to_presented"), "{flows}");
}

#[test]
fn frames_left_out_of_the_document_are_said_when_it_is_exported() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(&[
        "frames",
        "-f",
        "json",
        "--max-frames",
        "10",
        frames_data("weston-presentation-shm.client.log")
            .to_str()
            .unwrap(),
        frames_data("weston.server.log").to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let saved = write(dir.path(), "frames.json", &out.stdout);
    let trace = dir.path().join("f.pftrace");
    let o = run(&[
        "export",
        saved.to_str().unwrap(),
        "--to",
        "perfetto",
        "-o",
        trace.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("68 frames were not kept"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_frames_document_whose_records_name_no_frame_is_refused_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let mut doc = frames_json(
        &frames_data("weston-presentation-shm.client.log"),
        &frames_data("weston.server.log"),
    );
    for r in doc["records"].as_array_mut().unwrap() {
        r.as_object_mut().unwrap().remove("frame");
    }
    let saved = write(dir.path(), "old.json", doc.to_string());
    let out = run(&["export", saved.to_str().unwrap(), "--to", "perfetto"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("run `latscope frames -f json` again"),
        "{}",
        stderr(&out)
    );
}

/// Captures a run with `script ARGS`, then checks it against the independent join.
fn live_run_agrees(script: &str, args: &[&str], client: &str, server: &str, dir: &Path) {
    let out = std::process::Command::new("bash")
        .arg(root().join("scripts/capture").join(script))
        .args(args)
        .output()
        .expect("run the capture script");
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_agrees_with_the_independent_join(&dir.join(client), &dir.join(server));
}

#[test]
fn two_clients_at_once_on_weston_each_join_as_the_independent_join_says() {
    if !stack_available() {
        return;
    }
    let _heavy = crate::util::heavy();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    live_run_agrees(
        "frames.sh",
        &[d, "2", "--second-client"],
        "client.log",
        "server.log",
        dir.path(),
    );
    assert_agrees_with_the_independent_join(
        &dir.path().join("second.log"),
        &dir.path().join("server.log"),
    );
}

#[test]
fn a_client_on_mir_nested_in_weston_joins_as_the_independent_join_says() {
    if !stack_available() {
        return;
    }
    let _heavy = crate::util::heavy();
    let dir = tempfile::tempdir().unwrap();
    let (c, s) = (dir.path().join("c.log"), dir.path().join("s.log"));
    let args = [
        c.to_str().unwrap(),
        s.to_str().unwrap(),
        "2",
        "presentation-shm",
    ];
    live_run_agrees("mir-client.sh", &args, "c.log", "s.log", dir.path());
}

#[test]
fn a_client_on_sway_joins_as_the_independent_join_says() {
    if !commands_available(
        &["sway", "weston-presentation-shm"],
        "sway and weston's clients",
    ) {
        return;
    }
    let _heavy = crate::util::heavy();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    live_run_agrees(
        "sway-client.sh",
        &[d, "2"],
        "client.log",
        "server.log",
        dir.path(),
    );
}

/// The weston run captured with its timeline.
fn timeline_run() -> [PathBuf; 3] {
    ["client", "server", "timeline"].map(|k| frames_data(&format!("weston-timeline.{k}.log")))
}

/// `(repaint, repaint_to_vblank)` of every repaint in a timeline, read here from its text: the
/// `core_repaint_begin` and `core_repaint_posted` before each `core_repaint_finished`, ns.
fn repaints_in(text: &str) -> (Vec<i64>, Vec<i64>) {
    let time = |line: &str, key: &str| -> Option<i64> {
        let rest = line.split(&format!("\"{key}\":[")).nth(1)?;
        let (sec, rest) = rest.split_once(',')?;
        let nsec = rest.split(']').next()?.trim();
        Some(sec.trim().parse::<i64>().ok()? * 1_000_000_000 + nsec.parse::<i64>().ok()?)
    };
    let (mut begin, mut posted) = (None, None);
    let (mut repaint, mut to_vblank) = (Vec::new(), Vec::new());
    for line in text.lines() {
        if line.contains("\"core_repaint_begin\"") {
            (begin, posted) = (time(line, "T"), None);
        } else if line.contains("\"core_repaint_posted\"") {
            posted = time(line, "T");
        } else if line.contains("\"core_repaint_finished\"") {
            if let (Some(b), Some(p), Some(v)) = (begin, posted, time(line, "vblank_monotonic")) {
                repaint.push(p - b);
                to_vblank.push(v - p);
            }
            (begin, posted) = (None, None);
        }
    }
    (repaint, to_vblank)
}

#[test]
fn weston_s_timeline_splits_the_compositor_s_part_and_pins_the_clock_to_microseconds() {
    let [client, server, timeline] = timeline_run();
    let with = frames_json_of(&[&client, &server, &timeline]);
    let without = frames_json(&client, &server);
    // the same frames, a far narrower clock
    for stage in [
        "commit_to_compositor",
        "compositor_to_presented",
        "commit_to_presented",
    ] {
        assert_eq!(stages(&with)[stage], stages(&without)[stage], "{stage}");
    }
    let (o, o_logs) = (
        &with["frames"]["clock_offset"],
        &without["frames"]["clock_offset"],
    );
    let edge = |o: &Value, k: &str| o[k].as_i64().unwrap();
    assert!(
        edge(o, "low_ns") >= edge(o_logs, "low_ns")
            && edge(o, "high_ns") <= edge(o_logs, "high_ns")
    );
    assert!(
        edge(o, "bound_ns") < 100_000,
        "bound {} ns",
        edge(o, "bound_ns")
    );
    // every repaint and repaint_to_vblank is one of the timeline's own, read here from its text
    let (repaint, to_vblank) = repaints_in(&std::fs::read_to_string(&timeline).unwrap());
    let s = stages(&with);
    assert_eq!(s["repaint"].len(), s["commit_to_display"].len());
    for v in &s["repaint"] {
        assert!(repaint.contains(v), "repaint {v}");
    }
    for v in &s["repaint_to_vblank"] {
        assert!(to_vblank.contains(v), "repaint_to_vblank {v}");
    }
    // the compositor's part, from the commit's damage to the vblank, is the frame's
    // commit_to_display less its commit_to_compositor, within the clock's bound and the wait
    // from the commit's print to its damage (each frame's records come together, in order)
    let mut frames: Vec<BTreeMap<String, i64>> = Vec::new();
    for r in with["records"].as_array().unwrap() {
        let (name, ns) = (
            r["span"].as_str().unwrap(),
            r["latency_ns"].as_i64().unwrap(),
        );
        if name == "commit_to_compositor" || frames.is_empty() {
            frames.push(BTreeMap::new());
        }
        frames
            .last_mut()
            .unwrap()
            .entry(name.to_string())
            .or_insert(ns);
    }
    let mut checked = 0;
    for f in &frames {
        let get = |k: &str| f.get(k).copied();
        if let (Some(c2c), Some(c2r), Some(r), Some(r2v), Some(c2d)) = (
            get("commit_to_compositor"),
            get("compositor_to_repaint"),
            get("repaint"),
            get("repaint_to_vblank"),
            get("commit_to_display"),
        ) {
            let gap = (c2d - c2c) - (c2r + r + r2v);
            assert!(
                (-100_000..=1_000_000).contains(&gap),
                "{f:?}: {gap} ns apart"
            );
            checked += 1;
        }
    }
    assert!(
        checked > 40,
        "{checked} frames with the compositor's stages"
    );
}

#[test]
fn a_timeline_of_another_run_is_refused() {
    let [_, _, timeline] = timeline_run();
    let out = run(&[
        "frames",
        frames_data("weston-presentation-shm.client.log")
            .to_str()
            .unwrap(),
        frames_data("weston.server.log").to_str().unwrap(),
        timeline.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("is not a timeline of this run"),
        "{}",
        stderr(&out)
    );
}

/// The Mir run captured with its LTTng trace.
fn mir_traced_run() -> [PathBuf; 3] {
    ["client.log", "server.log", "trace.txt"].map(|k| frames_data(&format!("mir-traced.{k}")))
}

/// The wall time babeltrace2 printed (`[HH:MM:SS.nnnnnnnnn]`, UTC, on the capture's day
/// 2026-12-08) as the logs stamp it: µs of `CLOCK_REALTIME` modulo 2^32, in ns.
fn wall_as_logged_ns(line: &str) -> i64 {
    let hms = &line[1..19];
    let (h, m, s) = (&hms[0..2], &hms[3..5], &hms[6..]);
    let (sec, nsec) = s.split_once('.').unwrap();
    let of_day = (h.parse::<i64>().unwrap() * 3600
        + m.parse::<i64>().unwrap() * 60
        + sec.parse::<i64>().unwrap())
        * 1_000_000_000
        + nsec.parse::<i64>().unwrap();
    // 2026-12-08T00:00:00Z
    let day_us: i64 = 1_796_688_000 * 1_000_000;
    let ns = day_us * 1_000 + of_day;
    (ns / 1_000).rem_euclid(1 << 32) * 1_000 + ns % 1_000
}

/// The trace's time of day, ns (what latscope reads of it).
fn of_day_ns(line: &str) -> i64 {
    let hms = &line[1..19];
    let (sec, nsec) = hms[6..].split_once('.').unwrap();
    (hms[0..2].parse::<i64>().unwrap() * 3600
        + hms[3..5].parse::<i64>().unwrap() * 60
        + sec.parse::<i64>().unwrap())
        * 1_000_000_000
        + nsec.parse::<i64>().unwrap()
}

/// Per client commit line (client log) that Mir's trace shows composed: `(compositor_to_repaint,
/// repaint)` read here from the trace's text, each commit found by LTTng's own wall clock (the
/// first `buffer_committed` of the client's connection from 50 µs before to 5 ms after the
/// commit's dispatch in the server log; the connection is the one most often found within
/// 200 µs after), not by latscope's line-up.
fn mir_stages_by_wall_clock(
    client: &Path,
    server: &Path,
    trace: &Path,
) -> BTreeMap<u64, (i64, i64)> {
    let trace = std::fs::read_to_string(trace).unwrap();
    // a payload field: after `{ ` or `, ` (`id` is not `vtid`)
    let field = |line: &str, key: &str| -> Option<String> {
        let rest = [format!("{{ {key} = "), format!(", {key} = ")]
            .iter()
            .find_map(|k| line.split(k.as_str()).nth(1))?;
        Some(rest.split([',', ' ', '}']).next()?.to_string())
    };
    // (wall as logged, of day, buffer) of each commit; per buffer, its first composition
    let mut commits = Vec::new();
    let (mut open, mut shown): (BTreeMap<String, i64>, BTreeMap<u64, (i64, String)>) =
        Default::default();
    let mut finished: BTreeMap<(String, i64), i64> = BTreeMap::new();
    for line in trace.lines() {
        if line.contains("_buffer_committed:") {
            let b: u64 = field(line, "buffer_id").unwrap().parse().unwrap();
            let client = field(line, "client").unwrap();
            commits.push((wall_as_logged_ns(line), of_day_ns(line), b, client));
        } else if line.contains(":began_frame:") {
            open.insert(field(line, "id").unwrap(), of_day_ns(line));
        } else if line.contains(":buffers_in_frame:") {
            let id = field(line, "id").unwrap();
            let ids = line.split("buffer_ids = [").nth(1).unwrap();
            for b in ids.split("] = ").skip(1) {
                let b: u64 = b.split([',', ' ']).next().unwrap().parse().unwrap();
                shown.entry(b).or_insert((open[&id], id.clone()));
            }
        } else if line.contains(":finished_frame:") {
            let id = field(line, "id").unwrap();
            finished.insert((id.clone(), open[&id]), of_day_ns(line));
        }
    }
    // the client's commits, by their line, and their dispatch in the server log (the logs'
    // µs stamps; the client's commits in order are the server's commits of its surface)
    let client_text = std::fs::read_to_string(client).unwrap();
    let client_commits: Vec<u64> = client_text
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains("-> wl_surface@3.commit()"))
        .map(|(i, _)| i as u64 + 1)
        .collect();
    let doc = frames_json(client, server);
    let dispatched: BTreeMap<u64, i64> = doc["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["span"] == "commit_to_compositor")
        .map(|r| {
            let end = r["start_ns"].as_i64().unwrap() + r["latency_ns"].as_i64().unwrap();
            (r["frame"].as_u64().unwrap(), end)
        })
        .collect();
    let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
    for d in dispatched.values() {
        if let Some((.., client)) = commits
            .iter()
            .find(|(wall, ..)| (0..200_000).contains(&(wall - d)))
        {
            *votes.entry(client.as_str()).or_default() += 1;
        }
    }
    let ours = votes.iter().max_by_key(|(_, n)| **n).unwrap().0.to_string();
    let mut out = BTreeMap::new();
    for line in client_commits {
        let Some(&d) = dispatched.get(&line) else {
            continue;
        };
        let Some(&(_, c_of_day, b, _)) = commits.iter().find(|(wall, .., client)| {
            *client == ours && (-50_000..5_000_000).contains(&(wall - d))
        }) else {
            continue;
        };
        let Some((began, id)) = shown.get(&b) else {
            continue;
        };
        let Some(end) = finished.get(&(id.clone(), *began)) else {
            continue;
        };
        out.insert(line, (began - c_of_day, end - began));
    }
    out
}

#[test]
fn mir_s_trace_splits_the_compositor_s_part_as_its_own_events_say_frame_by_frame() {
    let [client, server, trace] = mir_traced_run();
    let with = frames_json_of(&[&client, &server, &trace]);
    let without = frames_json(&client, &server);
    // the logs' stages are the same
    for stage in ["commit_to_compositor", "compositor_to_frame_done"] {
        assert_eq!(stages(&with)[stage], stages(&without)[stage], "{stage}");
    }
    // each frame's compositor_to_repaint and repaint are the trace's own, found by its wall
    // clock here
    let want = mir_stages_by_wall_clock(&client, &server, &trace);
    let mut got: BTreeMap<u64, (i64, i64)> = BTreeMap::new();
    for r in with["records"].as_array().unwrap() {
        let (frame, ns) = (
            r["frame"].as_u64().unwrap(),
            r["latency_ns"].as_i64().unwrap(),
        );
        match r["span"].as_str().unwrap() {
            "compositor_to_repaint" => got.entry(frame).or_default().0 = ns,
            "repaint" => got.entry(frame).or_default().1 = ns,
            _ => {}
        }
    }
    assert!(want.len() > 60, "{} frames composed", want.len());
    assert_eq!(got, want);
    assert!(!stages(&with).contains_key("repaint_to_vblank"));
    // the clock: LTTng's own mapping (its wall time) lies within the interval found from the
    // data, whose lower edge is µs from it
    let o = &with["frames"]["timeline_offset"];
    let edge = |k: &str| o[k].as_i64().unwrap();
    let first = std::fs::read_to_string(&trace).unwrap();
    let line = first
        .lines()
        .find(|l| l.contains("_buffer_committed:"))
        .unwrap();
    let lttng = wall_as_logged_ns(line) - of_day_ns(line);
    assert!(
        edge("low_ns") <= lttng && lttng <= edge("high_ns"),
        "LTTng's offset {lttng} outside [{}, {}]",
        edge("low_ns"),
        edge("high_ns")
    );
    assert!(
        lttng - edge("estimate_ns") < 100_000,
        "{lttng} vs {}",
        edge("estimate_ns")
    );
    assert!(edge("bound_ns") < 10_000_000, "bound {}", edge("bound_ns"));
    let notes = with["warnings"].to_string();
    assert!(notes.contains("Mir traces no vblank"), "{notes}");
}

#[test]
fn mir_s_trace_exports_to_perfetto_as_the_compositor_timeline() {
    let dir = tempfile::tempdir().unwrap();
    let doc = frames_json_of(&mir_traced_run().each_ref().map(PathBuf::as_path));
    let Some((per_side, _)) = assert_frames_export(dir.path(), &doc) else {
        return;
    };
    let s = stages(&doc);
    let count = |k: &str| s.get(k).map_or(0, Vec::len);
    assert_eq!(
        per_side["compositor timeline"],
        count("compositor_to_repaint") + count("repaint")
    );
}

#[test]
fn a_mir_trace_of_another_run_is_refused_and_a_file_of_neither_compositor_too() {
    let [_, _, trace] = mir_traced_run();
    let (client, server) = (
        frames_data("mir-presentation-shm.client.log"),
        frames_data("mir.server.log"),
    );
    let out = run(&[
        "frames",
        client.to_str().unwrap(),
        server.to_str().unwrap(),
        trace.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("is not Mir's trace of this run"),
        "{}",
        stderr(&out)
    );
    let out = run(&[
        "frames",
        client.to_str().unwrap(),
        server.to_str().unwrap(),
        client.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("neither weston's timeline")
            && stderr(&out).contains("mir-presentation-shm.client.log"),
        "{}",
        stderr(&out)
    );
    // stamped in clock cycles (`babeltrace2 --clock-cycles`): no commit can be read, and that
    // is what is said
    let dir = tempfile::tempdir().unwrap();
    let cycles = write(
        dir.path(),
        "cycles.txt",
        "[00000001602214752762] (+?.?????????) vm mir_server_wayland:sw_buffer_committed: { cpu_id = 1 }, { vtid = 6959 }, { client = 0x7FAB8C000F00, buffer_id = 1 }\n",
    );
    let [client, server, _] = mir_traced_run();
    let out = run(&[
        "frames",
        client.to_str().unwrap(),
        server.to_str().unwrap(),
        cycles.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("no mir_server_wayland:sw_buffer_committed")
            && stderr(&out).contains("1 Mir events could not be"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_client_on_mir_traced_by_lttng_gets_mir_s_own_stages() {
    if !stack_available()
        || !commands_available(
            &["lttng", "lttng-sessiond", "babeltrace2"],
            "LTTng and babeltrace2",
        )
    {
        return;
    }
    let _heavy = crate::util::heavy();
    let dir = tempfile::tempdir().unwrap();
    let [c, s, t] = ["c.log", "s.log", "t.txt"].map(|f| dir.path().join(f));
    let out = std::process::Command::new("bash")
        .arg(root().join("scripts/capture/mir-client.sh"))
        .args([
            c.to_str().unwrap(),
            s.to_str().unwrap(),
            "2",
            "presentation-shm",
        ])
        .env("MIR_TRACE", &t)
        .output()
        .expect("run the capture script");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = frames_json_of(&[&c, &s, &t]);
    let s = stages(&doc);
    let frames = s["commit_to_compositor"].len();
    assert!(
        s["repaint"].len() * 2 > frames,
        "{} of {frames} frames composed",
        s["repaint"].len()
    );
    assert_eq!(s["repaint"].len(), s["compositor_to_repaint"].len());
    let o = &doc["frames"]["timeline_offset"];
    assert!(o["bound_ns"].as_i64().unwrap() < 50_000_000, "{o}");
}
