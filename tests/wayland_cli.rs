//! `latscope wayland` behaviours on hand-written logs: one behaviour per test.

use serde_json::Value;

use crate::util::{self, run, run_stdin, spans_by_name, stderr, stdout, write};

/// A client log with two commit→release pairs of 100 µs and 300 µs and one frame→done of 50 µs.
const CLIENT_LOG: &str = "\
[1000.000]  -> wl_shm_pool@5.create_buffer(new id wl_buffer@7, 0, 64, 64, 256, 0)
[1000.000]  -> wl_surface@3.attach(wl_buffer@7, 0, 0)
[1000.010]  -> wl_surface@3.frame(new id wl_callback@8)
[1000.010]  -> wl_surface@3.commit()
[1000.060] wl_callback@8.done(1)
[1000.061] wl_display@1.delete_id(8)
[1000.110] wl_buffer@7.release()
[1001.000]  -> wl_surface@3.attach(wl_buffer@7, 0, 0)
[1001.000]  -> wl_surface@3.commit()
[1001.300] wl_buffer@7.release()
";

fn json_of(text: &str, extra: &[&str]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "log", text);
    util::wayland_json(&path, extra)
}

fn span(doc: &Value, key: &str) -> Value {
    spans_by_name(doc)
        .get(key)
        .cloned()
        .unwrap_or_else(|| panic!("no {key} in {doc}"))
}

#[test]
fn commit_release_and_frame_done_are_paired_in_nanoseconds() {
    let doc = json_of(CLIENT_LOG, &[]);
    assert_eq!(doc["kind"], "spans");
    assert_eq!(doc["unit"], "ns");
    let cr = span(&doc, "commit_to_release/client");
    assert_eq!(
        (cr["count"].as_u64(), cr["min"].as_u64(), cr["max"].as_u64()),
        (Some(2), Some(100_000), Some(300_000))
    );
    assert_eq!(cr["mean"].as_f64(), Some(200_000.0));
    assert_eq!(cr["stddev"].as_f64(), Some(100_000.0));
    assert_eq!(cr["p50"].as_u64(), Some(100_000));
    assert_eq!(cr["p99"].as_u64(), Some(300_000));
    let fd = span(&doc, "frame_to_done/client");
    assert_eq!(fd["min"].as_u64(), Some(50_000));
    assert_eq!(doc["input"]["lines"], 10);
}

#[test]
fn span_selection_leaves_the_other_spans_out() {
    let doc = json_of(CLIENT_LOG, &["--span", "frame-done"]);
    let names: Vec<String> = spans_by_name(&doc).into_keys().collect();
    assert_eq!(names, ["frame_to_done/client"]);
}

#[test]
fn a_recommit_before_release_is_superseded_and_the_release_pairs_with_the_latest() {
    let log = "\
[1.000]  -> wl_surface@3.attach(wl_buffer@7, 0, 0)
[1.000]  -> wl_surface@3.commit()
[1.200]  -> wl_surface@3.attach(wl_buffer@7, 0, 0)
[1.200]  -> wl_surface@3.commit()
[1.250] wl_buffer@7.release()
";
    let cr = span(&json_of(log, &[]), "commit_to_release/client");
    assert_eq!(cr["count"], 1);
    assert_eq!(cr["min"], 50_000);
    assert_eq!(cr["superseded"], 1);
}

#[test]
fn a_commit_without_attach_does_not_start_a_span() {
    let log = "\
[1.000]  -> wl_surface@3.attach(wl_buffer@7, 0, 0)
[1.000]  -> wl_surface@3.commit()
[1.100]  -> wl_surface@3.commit()
[1.300] wl_buffer@7.release()
";
    let cr = span(&json_of(log, &[]), "commit_to_release/client");
    assert_eq!(
        (cr["count"].as_u64(), cr["min"].as_u64()),
        (Some(1), Some(300_000))
    );
}

#[test]
fn a_release_with_no_commit_is_an_orphan_end() {
    let cr = span(
        &json_of("[5.000] wl_buffer@7.release()\n", &[]),
        "commit_to_release/client",
    );
    assert_eq!(
        (cr["count"].as_u64(), cr["orphan_ends"].as_u64()),
        (Some(0), Some(1))
    );
    assert!(cr["p50"].is_null());
}

#[test]
fn a_commit_never_released_is_unmatched() {
    let log =
        "[1.000]  -> wl_surface@3.attach(wl_buffer@7, 0, 0)\n[1.000]  -> wl_surface@3.commit()\n";
    let cr = span(&json_of(log, &[]), "commit_to_release/client");
    assert_eq!(cr["unmatched"], 1);
}

#[test]
fn a_reused_callback_id_after_delete_id_is_a_new_object() {
    // libwayland prints delete_id (display queue) before the done of the same callback; the id
    // is then reused by the next frame request.
    let log = "\
[1.000]  -> wl_surface@3.frame(new id wl_callback@8)
[1.100] wl_display@1.delete_id(8)
[1.101] wl_callback@8.done(1)
[1.200]  -> wl_surface@3.frame(new id wl_callback@8)
[1.700] wl_callback@8.done(2)
";
    let fd = span(
        &json_of(log, &["--group", "object"]),
        "frame_to_done/client",
    );
    let doc = json_of(log, &["--group", "object"]);
    let groups: Vec<String> = doc["spans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["group"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(groups, ["wl_callback#8a", "wl_callback#8b"]);
    assert_eq!(fd["count"], 1);
    let all = span(&json_of(log, &[]), "frame_to_done/client");
    assert_eq!(
        (
            all["count"].as_u64(),
            all["min"].as_u64(),
            all["max"].as_u64()
        ),
        (Some(2), Some(101_000), Some(500_000))
    );
}

#[test]
fn a_buffer_destroyed_and_recreated_does_not_pair_with_its_predecessor() {
    let log = "\
[1.000]  -> wl_surface@3.attach(wl_buffer@7, 0, 0)
[1.000]  -> wl_surface@3.commit()
[1.010]  -> wl_buffer@7.destroy()
[1.020] wl_display@1.delete_id(7)
[1.030]  -> wl_shm_pool@5.create_buffer(new id wl_buffer@7, 0, 64, 64, 256, 0)
[1.040] wl_buffer@7.release()
";
    let cr = span(&json_of(log, &[]), "commit_to_release/client");
    assert_eq!(
        (
            cr["count"].as_u64(),
            cr["unmatched"].as_u64(),
            cr["orphan_ends"].as_u64()
        ),
        (Some(0), Some(1), Some(1))
    );
}

#[test]
fn server_logs_are_the_server_side() {
    // From the wlroots #102 compositor log in the research notes.
    let log = "\
[1268952.372] wl_surface@3.attach(wl_buffer@19, 0, 0)
[1268952.438] wl_surface@3.commit()
[1268952.475] wl_display@1.sync(new id wl_callback@24)
[1268952.498]  -> wl_callback@24.done(0)
[1268952.511]  -> wl_display@1.delete_id(24)
[1268961.371]  -> wl_buffer@19.release()
";
    let doc = json_of(log, &[]);
    assert_eq!(span(&doc, "commit_to_release/server")["min"], 8_933_000);
    assert_eq!(span(&doc, "sync_to_done/server")["min"], 23_000);
}

#[test]
fn presentation_feedback_is_paired_with_its_commit_and_discards_are_counted() {
    let log = "\
[1.000]  -> wp_presentation@9.feedback(wl_surface@3, new id wp_presentation_feedback@20)
[1.000]  -> wl_surface@3.commit()
[1.000]  -> wp_presentation@9.feedback(wl_surface@3, new id wp_presentation_feedback@21)
[1.005]  -> wl_surface@3.commit()
[1.016] wp_presentation_feedback@20.sync_output(wl_output@4)
[1.017] wp_presentation_feedback@20.presented(0, 1, 2, 16666666, 0, 1, 7)
[1.030] wp_presentation_feedback@21.discarded()
";
    let p = span(&json_of(log, &[]), "commit_to_presented/client");
    assert_eq!(
        (
            p["count"].as_u64(),
            p["min"].as_u64(),
            p["discarded"].as_u64()
        ),
        (Some(1), Some(17_000), Some(1))
    );
}

#[test]
fn timestamps_going_backwards_are_counted_not_sampled() {
    let log = "\
[2.000]  -> wl_surface@3.attach(wl_buffer@7, 0, 0)
[2.000]  -> wl_surface@3.commit()
[1.900] wl_buffer@7.release()
";
    let cr = span(&json_of(log, &[]), "commit_to_release/client");
    assert_eq!(
        (cr["count"].as_u64(), cr["backwards"].as_u64()),
        (Some(0), Some(1))
    );
}

#[test]
fn a_32_bit_microsecond_wrap_is_unwrapped() {
    let log = "\
[4294967.200]  -> wl_surface@3.attach(wl_buffer@7, 0, 0)
[4294967.200]  -> wl_surface@3.commit()
[      0.100] wl_buffer@7.release()
";
    let doc = json_of(log, &[]);
    assert_eq!(span(&doc, "commit_to_release/client")["min"], 196_000);
    assert_eq!(doc["input"]["clock_wraps"], 1);
}

#[test]
fn a_midnight_wrap_of_1_26_stamps_is_unwrapped() {
    let log = "\
[23:59:59.999900] {Default Queue}  -> wl_surface#3.attach(wl_buffer#7, 0, 0)
[23:59:59.999900] {Default Queue}  -> wl_surface#3.commit()
[00:00:00.000150] {Default Queue} wl_buffer#7.release()
";
    assert_eq!(
        span(&json_of(log, &[]), "commit_to_release/client")["min"],
        250_000
    );
}

#[test]
fn a_stamp_past_146_years_of_unwrapped_clock_is_malformed_on_every_thread() {
    // Each line is 12 hours after the one before: 106,751 steps fit in 2^62 ns. Of the 9
    // lines after them, the 4 at the time of day the clock stopped at are placed (no step);
    // the 5 others (the last a zombie event) are refused, whatever the threads.
    let mut log = String::new();
    for i in 0..106_760 {
        let hour = if i % 2 == 0 { "00" } else { "12" };
        log.push_str(&format!(
            "[{hour}:00:00.000000] {{Default Queue}}  -> wl_surface#3.commit()\n"
        ));
    }
    log.push_str(
        "[00:00:00.000000] {Display Queue} discarded [zombie]#9.[event 0](0 fd, 4 byte)\n",
    );
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "centuries.log", &log);
    let serial = util::wayland_json(&path, &["--threads", "1"]);
    assert_eq!(serial["input"]["messages"], 106_756);
    assert_eq!(serial["input"]["malformed"], 5);
    assert_eq!(serial["input"]["zombies"], 0);
    let first = serial["warnings"][0].to_string();
    assert!(
        first.contains("centuries.log:106753") && first.contains("146 years"),
        "{first}"
    );
    for chunk in ["4096", "0"] {
        let parallel = util::wayland_json(&path, &["--threads", "2", "--chunk-bytes", chunk]);
        assert_eq!(serial, parallel, "chunk {chunk}");
    }
    let out = run(&["wayland", "--strict", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("centuries.log:106753"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn every_dialect_marker_parses_in_one_log() {
    let log = "\
\x1b[32m[00:00:01.000000] \x1b[0m\x1b[36mTID#7 \x1b[0m\x1b[33m{Default Queue} \x1b[0m -> \x1b[34mwl_surface\x1b[0m#\x1b[35m3\x1b[0m.\x1b[36mattach\x1b[0m(wl_buffer#7, 0, 0)
[00:00:01.000000] TID#7 {Default Queue}  -> wl_surface#3.commit()
[00:00:01.000001] {Display Queue} discarded [zombie]#9.[event 0](0 fd, 4 byte)
[00:00:01.000002] TID#7 {Default Queue} discarded wl_buffer#7.release()
";
    let doc = json_of(log, &[]);
    assert_eq!(span(&doc, "commit_to_release/client")["min"], 2_000);
    assert_eq!(doc["input"]["zombies"], 1);
    assert_eq!(doc["input"]["malformed"], 0);
}

#[test]
fn non_protocol_lines_are_skipped_and_counted() {
    let log = format!(
        "Gtk-WARNING **: 12:00:00.000: theme\n[2026-11-22 03:05:42.123456] < - debug - > mirserver: x\n{CLIENT_LOG}"
    );
    let doc = json_of(&log, &[]);
    assert_eq!(doc["input"]["skipped"], 2);
    assert_eq!(span(&doc, "commit_to_release/client")["count"], 2);
}

#[test]
fn binary_garbage_and_invalid_utf8_do_not_stop_the_analysis() {
    let mut log: Vec<u8> = (0..=255u8).cycle().take(100_000).collect();
    log.extend_from_slice(b"\n[1.000]  -> wl_surface@3.attach(wl_buffer@7, 0, 0)\n");
    log.extend_from_slice(b"[1.000]  -> wl_surface@3.set_title(\"\xff\xfe invalid\")\n");
    log.extend_from_slice(b"[1.000]  -> wl_surface@3.commit()\n[1.002] wl_buffer@7.release()\n");
    let dir = tempfile::tempdir().unwrap();
    let doc = util::wayland_json(&write(dir.path(), "garbage", &log), &[]);
    assert_eq!(span(&doc, "commit_to_release/client")["min"], 2_000);
}

#[test]
fn a_truncated_last_line_is_malformed_and_named_by_file_and_line() {
    let log = "[1.000]  -> wl_surface@3.attach(wl_buffer@7, 0, 0)\n[1.000]  -> wl_surface@3.comm";
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "cut.log", log);
    let out = run(&["wayland", path.to_str().unwrap()]);
    assert!(out.status.success());
    let text = stdout(&out);
    assert!(text.contains("1 malformed"), "{text}");
    assert!(text.contains("cut.log:2"), "{text}");
    assert!(text.contains("without a newline"), "{text}");
}

#[test]
fn strict_mode_fails_at_the_first_malformed_line_with_its_location() {
    let log = "[1.000]  -> wl_surface@3.attach(wl_buffer@7, 0, 0)\n[1.000] torn line\n";
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "torn.log", log);
    let out = run(&["wayland", "--strict", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("torn.log:2: malformed WAYLAND_DEBUG line"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_ten_megabyte_line_is_skipped_and_the_lines_around_it_are_read() {
    let mut log = String::from("[1.000]  -> wl_surface@3.attach(wl_buffer@7, 0, 0)\n");
    log.push_str(&format!(
        "[1.000]  -> xdg_toplevel@9.set_title(\"{}\")\n",
        "x".repeat(10 << 20)
    ));
    log.push_str("[1.000]  -> wl_surface@3.commit()\n[1.004] wl_buffer@7.release()\n");
    let doc = json_of(&log, &[]);
    assert_eq!(doc["input"]["too_long"], 1);
    assert_eq!(span(&doc, "commit_to_release/client")["min"], 4_000);
}

#[test]
fn an_empty_file_reports_no_spans_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "empty.log", "");
    let out = run(&["wayland", path.to_str().unwrap()]);
    assert!(out.status.success());
    assert!(
        stdout(&out).contains("no WAYLAND_DEBUG messages found"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn a_missing_file_is_an_error_naming_it() {
    let out = run(&["wayland", "/nonexistent/client.log"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("cannot open '/nonexistent/client.log'"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn usage_errors_exit_with_two() {
    assert_eq!(run(&["wayland"]).status.code(), Some(2));
    assert_eq!(
        run(&["wayland", "--span", "nope", "x"]).status.code(),
        Some(2)
    );
    assert_eq!(run(&["frobnicate"]).status.code(), Some(2));
}

#[test]
fn an_invalid_linear_spec_is_an_error_that_shows_the_expected_shape() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "log", CLIENT_LOG);
    let out = run(&["wayland", "--linear", "1,2", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("MIN,MAX,STEP"));
}

#[test]
fn standard_input_is_read_with_a_dash() {
    let out = run_stdin(&["wayland", "--format", "json", "-"], CLIENT_LOG.as_bytes());
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(span(&doc, "commit_to_release/client")["count"], 2);
}

#[test]
fn csv_has_one_raw_sample_per_line() {
    let out = run_stdin(
        &[
            "wayland",
            "--format",
            "csv",
            "--span",
            "commit-release",
            "-",
        ],
        CLIENT_LOG.as_bytes(),
    );
    assert_eq!(
        stdout(&out),
        "span,side,group,start_ns,latency_ns\ncommit_to_release,client,,1000010000,100000\ncommit_to_release,client,,1001000000,300000\n"
    );
}

#[test]
fn the_text_report_has_stats_with_units_and_a_bpftrace_histogram() {
    let out = run_stdin(&["wayland", "-"], CLIENT_LOG.as_bytes());
    let text = stdout(&out);
    assert!(
        text.contains("commit_to_release[client]: 2 samples"),
        "{text}"
    );
    assert!(text.contains("min 100 µs  p50 100 µs  p90 300 µs  p99 300 µs  p99.9 300 µs  max 300 µs  mean 200.000 µs  sd 100.000 µs"), "{text}");
    assert!(
        text.contains(
            "[64, 128)               1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|"
        ),
        "{text}"
    );
}

#[test]
fn the_linear_histogram_has_the_header_of_the_mir_script() {
    let out = run_stdin(
        &[
            "wayland",
            "--span",
            "commit-release",
            "--linear",
            "0,400,100",
            "-",
        ],
        CLIENT_LOG.as_bytes(),
    );
    let text = stdout(&out);
    assert!(text.contains("# count = 2; min = 100 µs; max = 300 µs\n# 0 values outside [0 µs, 400 µs)\n# mean = 200.000 µs; variance = 10000.000 µs²; SD = 100.000 µs; median = 100 µs"), "{text}");
    assert!(
        text.contains("       100 -        200 µs [     1]: ∎"),
        "{text}"
    );
}

#[test]
fn markdown_output_is_a_table_with_units_in_the_header() {
    let out = run_stdin(
        &["wayland", "--format", "markdown", "--unit", "ms", "-"],
        CLIENT_LOG.as_bytes(),
    );
    let text = stdout(&out);
    assert!(
        text.starts_with("| span | side | group | count | min [ms] |"),
        "{text}"
    );
    assert!(
        text.contains("| commit_to_release | client | all | 2 | 0.1 | 0.1 | 0.3 |"),
        "{text}"
    );
}

#[test]
fn grouping_by_surface_labels_each_surface() {
    let log = format!(
        "{CLIENT_LOG}[1002.000]  -> wl_surface@4.attach(wl_buffer@9, 0, 0)\n[1002.000]  -> wl_surface@4.commit()\n[1002.001] wl_buffer@9.release()\n"
    );
    let doc = json_of(&log, &["--group", "surface", "--span", "commit-release"]);
    let groups: Vec<&str> = doc["spans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["group"].as_str().unwrap())
        .collect();
    assert_eq!(groups, ["wl_surface#3a", "wl_surface#4a"]);
}

#[test]
fn several_files_are_analysed_separately_and_reported_together() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.log", CLIENT_LOG);
    let b = write(dir.path(), "b.log", CLIENT_LOG);
    let out = run(&[
        "wayland",
        "--format",
        "json",
        "--group",
        "file",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
    ]);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let cr: Vec<&Value> = doc["spans"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["name"] == "commit_to_release")
        .collect();
    assert_eq!(cr.len(), 2);
    assert!(cr[0]["group"].as_str().unwrap().ends_with("a.log"));
    assert_eq!(doc["input"]["files"], 2);
}

#[test]
fn ctrl_c_prints_what_was_read_so_far_with_any_number_of_threads() {
    for threads in ["1", "2", "8"] {
        let args = ["wayland", "--format", "json", "--threads", threads, "-"];
        let out = util::interrupted_on_an_open_pipe(&args, CLIENT_LOG.as_bytes());
        assert!(
            out.status.success(),
            "{threads}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(span(&doc, "commit_to_release/client")["count"], 2);
        assert!(
            doc["warnings"][0]
                .as_str()
                .unwrap()
                .starts_with("interrupted")
        );
    }
}

#[test]
fn a_disabled_presented_span_does_not_appear() {
    let log = "\
[1.000]  -> wp_presentation@9.feedback(wl_surface@3, new id wp_presentation_feedback@20)
[1.000]  -> wl_surface@3.attach(wl_buffer@7, 0, 0)
[1.000]  -> wl_surface@3.commit()
[1.002] wl_buffer@7.release()
";
    let doc = json_of(log, &["--span", "commit-release"]);
    let names: Vec<String> = spans_by_name(&doc).into_keys().collect();
    assert_eq!(names, ["commit_to_release/client"]);
}

#[test]
fn a_line_printed_late_across_the_counter_wrap_does_not_invent_a_period() {
    let log = "\
[      0.005]  -> wl_surface@3.attach(wl_buffer@7, 0, 0)
[      0.005]  -> wl_surface@3.commit()
[4294967.292] wl_pointer@5.motion(1, 2.0, 3.0)
[      0.020] wl_buffer@7.release()
";
    let doc = json_of(log, &[]);
    assert_eq!(span(&doc, "commit_to_release/client")["max"], 15_000);
    assert_eq!(doc["input"]["clock_wraps"], 0);
}

#[test]
fn a_new_surface_under_an_old_id_commits_nothing_attached_to_the_old_one() {
    // The old surface's pending buffer is not the new one's, even with no destroy seen: the new
    // surface's first commit commits nothing.
    let log = "\
[1.000]  -> wl_surface@3.attach(wl_buffer@7, 0, 0)
[1.300]  -> wl_compositor@2.create_surface(new id wl_surface@3)
[1.400]  -> wl_surface@3.commit()
[1.500] wl_buffer@7.release()
";
    let doc = json_of(log, &[]);
    let cr = span(&doc, "commit_to_release/client");
    assert_eq!(
        (cr["count"].as_u64(), cr["unmatched"].as_u64()),
        (Some(0), Some(0)),
        "{cr}"
    );
}

/// Waits until process `pid` has `path` mapped (at most 10 s); whether it did.
fn mapped_by(pid: u32, path: &std::path::Path) -> bool {
    // (the maps name the file by its resolved path)
    let path = path.canonicalize().unwrap();
    let (maps, name) = (format!("/proc/{pid}/maps"), path.to_str().unwrap());
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::time::Instant::now() < until {
        match std::fs::read_to_string(&maps) {
            Ok(text) if text.contains(name) => return true,
            Ok(_) => std::thread::sleep(std::time::Duration::from_millis(1)),
            Err(_) => return false,
        }
    }
    false
}

/// latscope `args` (the file's path appended) on a file of `head` followed by a 4 GiB hole:
/// one line of zeros with no newline, which the reader searches a few megabytes at a time.
/// Once latscope has the file mapped, the file is cut back to `head`.
fn cut_while_mapped(head: &[u8], args: &[&str]) -> std::process::Output {
    use std::io::Write;
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.log");
    let mut file = std::fs::File::create(&path).unwrap();
    file.write_all(head).unwrap();
    file.set_len(4 << 30).unwrap();
    let child = util::latscope()
        .args(args)
        .arg(&path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mapped = mapped_by(child.id(), &path);
    file.set_len(head.len() as u64).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(mapped, "{args:?}: never mapped; {}", stderr(&out));
    out
}

#[test]
fn a_log_truncated_while_it_is_read_in_place_is_an_error_with_any_number_of_threads() {
    // The pages past the new end cannot be read (SIGBUS): the read is an error that says so,
    // not a crash and not an answer from zeros, under --strict too.
    let perf = std::fs::read(util::root().join("tests/data/traces/sched.perf.txt")).unwrap();
    let sched = [&["spans", "--strict"][..], &util::WAKE[..]].concat();
    for threads in ["1", "2"] {
        let cases: [(&[u8], Vec<&str>); 2] = [
            (CLIENT_LOG.as_bytes(), vec!["wayland", "--threads", threads]),
            (&perf, [&sched[..], &["--threads", threads]].concat()),
        ];
        for (head, args) in cases {
            let out = cut_while_mapped(head, &args);
            assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
            assert!(
                stderr(&out).contains("the file shrank"),
                "{args:?}: {}",
                stderr(&out)
            );
        }
    }
}
