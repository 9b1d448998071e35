//! Nothing silent, nothing lost: what real producers print around the lines latscope reads.

use crate::util::{run, stderr, write};

#[test]
fn protocol_lines_behind_a_status_line_written_over_are_read_as_a_terminal_shows_them() {
    // mpv --vo=wlshm writes its status line, then a carriage return, then libwayland's line
    let mut log = String::new();
    for k in 0..50u32 {
        let t = 1_000_000 + k * 16;
        let status = format!("\x1b[K AV: 00:00:{k:02} / 00:00:50 ({k}%) A-V:  0.000\r");
        let torn = if k % 2 == 0 { status.as_str() } else { "" };
        log.push_str(&format!(
            "{torn}[{t:7}.000]  -> wl_surface@3.attach(wl_buffer@5, 0, 0)\n"
        ));
        log.push_str(&format!("{torn}[{t:7}.100]  -> wl_surface@3.commit()\n"));
        log.push_str(&format!("[{t:7}.900] wl_buffer@5.release()\n"));
    }
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "mpv.log", log);
    let out = run(&["wayland", "-f", "json", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let spans = crate::util::spans_by_name(&doc);
    let c2r = &spans["commit_to_release/client"];
    assert_eq!(c2r["count"], 50, "every commit paired: {c2r}");
    assert_eq!(c2r["orphan_ends"], 0);
    assert_eq!(doc["input"]["messages"], 150);
}

#[test]
fn markdown_says_what_json_says_of_the_unpaired_and_the_input() {
    let log = "\
[1000.000]  -> wl_surface@3.attach(wl_buffer@5, 0, 0)
[1000.001]  -> wp_presentation@6.feedback(wl_surface@3, new id wp_presentation_feedback@9)
[1000.002]  -> wl_surface@3.commit()
[1000.500] wl_buffer@7.release()
[1016.000] wp_presentation_feedback@9.discarded()
[1017.000] wl_buffer@5.release()
";
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "c.log", log);
    let md = crate::util::stdout(&run(&["wayland", "-f", "markdown", path.to_str().unwrap()]));
    let doc: serde_json::Value =
        serde_json::from_slice(&run(&["wayland", "-f", "json", path.to_str().unwrap()]).stdout)
            .unwrap();
    let spans = crate::util::spans_by_name(&doc);
    assert_eq!(spans["commit_to_release/client"]["orphan_ends"], 1);
    assert_eq!(spans["commit_to_presented/client"]["discarded"], 1);
    // | name | side | group | count | 8 figures | unmatched | superseded | orphan ends | discarded | backwards |
    let row = |name: &str| -> Vec<String> {
        md.lines()
            .find(|l| l.starts_with(&format!("| {name} |")))
            .unwrap_or_else(|| panic!("{name} in {md}"))
            .split('|')
            .map(|c| c.trim().to_string())
            .collect()
    };
    assert_eq!(row("commit_to_release")[15], "1", "orphan ends: {md}");
    assert_eq!(row("commit_to_presented")[16], "1", "discarded: {md}");
    assert!(md.contains("Input: files 1, bytes "), "{md}");
    assert!(
        md.contains(&format!("messages {}", doc["input"]["messages"])),
        "{md}"
    );
}

#[test]
fn csv_says_on_standard_error_what_text_says_of_the_unpaired_and_the_input() {
    let log = "\
[1000.000]  -> wl_surface@3.attach(wl_buffer@5, 0, 0)
[1000.002]  -> wl_surface@3.commit()
[1000.500] wl_buffer@7.release()
[1017.000] wl_buffer@5.release()
not a protocol line [
";
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "c.log", log);
    let out = run(&["wayland", "-f", "csv", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(
        crate::util::stdout(&out).lines().count(),
        2,
        "the header and one sample"
    );
    assert!(
        err.contains("csv: 1 samples of 1 series written to standard output\n"),
        "{err}"
    );
    assert!(err.contains("input: 1 files, "), "{err}");
    assert!(err.contains(", 4 messages, "), "{err}");
    assert!(
        err.contains("not paired: commit_to_release[client]: orphan ends 1\n"),
        "{err}"
    );

    let trace = crate::util::root().join("tests/data/traces/requests.jsonl");
    let rule = ["--span", "req=request_start..request_done", "--key", "id"];
    let args = |format| {
        [
            &["spans", "-f", format][..],
            &rule,
            &[trace.to_str().unwrap()],
        ]
        .concat()
    };
    let text = crate::util::stdout(&run(&args("text")));
    let out = run(&args("csv"));
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    let counts = text.lines().find(|l| l.starts_with("input: ")).unwrap();
    assert!(counts.starts_with("input: 432 bytes, 8 lines"), "{text}");
    assert!(err.lines().any(|l| l == counts), "{counts} in {err}");
    assert!(
        err.contains("not paired: req: unmatched 1  orphan ends 1\n"),
        "{err}"
    );
    assert!(text.contains("  unmatched 1  orphan ends 1\n"), "{text}");
}

#[test]
fn a_client_log_of_the_labs_connections_is_said_to_be_one_and_pairs_as_the_lab_measured() {
    // `WAYLAND_DEBUG=client latscope lab wayland round-trip frames` (README): one process, a
    // connection to list the globals, then one per pattern
    let log = crate::util::data("weston-lab-round-trip-frames.client.log");
    let doc = crate::util::wayland_json(&log, &[]);
    let warnings: Vec<&str> = doc["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains(
            "by requests sent (a client's log): it holds at least 2 connections of one process"
        ),
        "{warnings:?}"
    );
    assert!(!warnings[0].contains("server"), "{warnings:?}");
    // the lab's own counts, from its report of the same run
    let lab =
        std::fs::read_to_string(crate::util::data("weston-lab-round-trip-frames.stdout")).unwrap();
    let spans = crate::util::spans_by_name(&doc);
    for name in ["commit_to_release", "frame_to_done", "commit_to_presented"] {
        let n: u64 = lab
            .lines()
            .find_map(|l| {
                l.trim()
                    .strip_prefix(name)?
                    .split_whitespace()
                    .next()?
                    .parse()
                    .ok()
            })
            .unwrap_or_else(|| panic!("{name} in {lab}"));
        assert_eq!(spans[&format!("{name}/client")]["count"], n, "{name}");
    }
}

#[test]
fn lab_wayland_on_a_compositor_that_presents_nothing_says_so() {
    if !crate::util::commands_available(&["sway", "setpriv"], "sway") {
        return;
    }
    let _heavy = crate::util::heavy();
    // sway refuses root: it runs as nobody, in a private runtime directory
    let rt = tempfile::tempdir().unwrap();
    let dir = rt.path();
    let chown = std::process::Command::new("chown")
        .args(["nobody", dir.to_str().unwrap()])
        .status();
    assert!(chown.unwrap().success());
    std::fs::write(dir.join("config"), "output HEADLESS-1 resolution 640x480\n").unwrap();
    let mut sway = std::process::Command::new("setpriv")
        .args([
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            "env",
            "-i",
            "PATH=/usr/bin:/bin",
        ])
        .arg(format!("XDG_RUNTIME_DIR={}", dir.display()))
        .args([
            "WLR_BACKENDS=headless",
            "WLR_RENDERER=pixman",
            "WLR_LIBINPUT_NO_DEVICES=1",
            "sway",
            "-c",
        ])
        .arg(dir.join("config"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let socket = (0..100).find_map(|_| {
        std::thread::sleep(std::time::Duration::from_millis(100));
        std::fs::read_dir(dir).unwrap().flatten().find_map(|e| {
            let name = e.file_name().into_string().ok()?;
            (name.starts_with("wayland-") && !name.ends_with(".lock")).then_some(name)
        })
    });
    let out = crate::util::latscope()
        .env("XDG_RUNTIME_DIR", dir)
        .args(["lab", "wayland", "frames", "--frames", "20", "--display"])
        .arg(socket.expect("sway's socket"))
        .output()
        .unwrap();
    let _ = sway.kill();
    let _ = sway.wait();
    let text = crate::util::stdout(&out);
    assert!(out.status.success(), "{text}{}", stderr(&out));
    assert!(
        text.contains("the compositor answered none of 20 presentation feedbacks"),
        "{text}"
    );
}

/// `latscope ARGS` run in `dir`: refused as a usage error naming `output` and `input`, and
/// the input still what it was.
fn refused_as_its_own_output(dir: &std::path::Path, args: &[&str], output: &str, input: &str) {
    let before = std::fs::read(dir.join(input)).unwrap();
    let out = crate::util::latscope()
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!("{output} is the input {input}")),
        "{args:?}: {err}"
    );
    assert_eq!(std::fs::read(dir.join(input)).unwrap(), before, "{args:?}");
}

#[test]
fn wayland_refuses_to_write_its_report_over_the_log_it_reads() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("c.log");
    std::fs::copy(crate::util::data("weston-simple-shm.client.log"), &log).unwrap();
    std::fs::hard_link(&log, dir.path().join("same.log")).unwrap();
    refused_as_its_own_output(
        dir.path(),
        &["wayland", "c.log", "--report", "./c.log"],
        "--report ./c.log",
        "c.log",
    );
    refused_as_its_own_output(
        dir.path(),
        &["wayland", "c.log", "--report", "same.log"],
        "--report same.log",
        "c.log",
    );
}

#[test]
fn spans_refuses_to_write_its_report_over_the_trace_it_reads() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.txt");
    std::fs::copy(
        crate::util::root().join("tests/data/traces/sched.perf.txt"),
        &trace,
    )
    .unwrap();
    std::fs::hard_link(&trace, dir.path().join("linked.txt")).unwrap();
    let mut args: Vec<&str> = vec!["spans"];
    args.extend(crate::util::WAKE);
    for (input, output) in [("t.txt", "./t.txt"), ("./t.txt", "linked.txt")] {
        let mut args = args.clone();
        args.extend([input, "--report", output]);
        refused_as_its_own_output(dir.path(), &args, &format!("--report {output}"), input);
    }
}
