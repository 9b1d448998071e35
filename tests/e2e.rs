//! End-to-end: start the real stack (weston headless, Mir nested in it), run real clients with
//! WAYLAND_DEBUG, and check latscope against the independent reference on what they printed.

use std::process::Command;

use crate::golden::assert_matches_reference;
use crate::util::{root, stack_available};

fn capture(script: &str, args: &[&str]) {
    let out = Command::new("bash")
        .arg(root().join("scripts/capture").join(script))
        .args(args)
        .output()
        .expect("run capture script");
    assert!(
        out.status.success(),
        "{script} {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn weston_simple_shm_live_log_matches_the_reference() {
    if !stack_available() {
        return;
    }
    let _heavy = crate::util::heavy();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("client.log");
    capture(
        "weston-client.sh",
        &[log.to_str().unwrap(), "simple-shm", "3"],
    );
    let spans = assert_matches_reference(&log, &log);
    assert!(spans["commit_to_release/client"]["count"].as_u64().unwrap() >= 20);
    assert!(spans["frame_to_done/client"]["count"].as_u64().unwrap() >= 20);
}

#[test]
fn glmark2_on_weston_live_log_matches_the_reference() {
    if !stack_available() {
        return;
    }
    let _heavy = crate::util::heavy();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("client.log");
    capture("weston-client.sh", &[log.to_str().unwrap(), "glmark2", "3"]);
    let spans = assert_matches_reference(&log, &log);
    assert!(spans["commit_to_release/client"]["count"].as_u64().unwrap() >= 20);
}

#[test]
fn glmark2_on_mir_nested_in_weston_matches_the_reference_on_both_sides() {
    if !stack_available() {
        return;
    }
    let _heavy = crate::util::heavy();
    let dir = tempfile::tempdir().unwrap();
    let client = dir.path().join("client.log");
    let server = dir.path().join("server.log");
    capture(
        "mir-client.sh",
        &[client.to_str().unwrap(), server.to_str().unwrap(), "3"],
    );
    let client_spans = assert_matches_reference(&client, &client);
    assert!(
        client_spans["commit_to_release/client"]["count"]
            .as_u64()
            .unwrap()
            >= 10
    );
    let server_spans = assert_matches_reference(&server, &server);
    assert!(
        server_spans["commit_to_release/server"]["count"]
            .as_u64()
            .unwrap()
            >= 10
    );
}
