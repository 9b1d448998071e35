//! `latscope live` leaves nothing behind and takes what users give it: a traced script's
//! background job that ignores SIGTERM, bpftrace when latscope is killed outright, a program
//! longer than one argument may be, and an empty `--key` or an interval too long refused.

use crate::util::{self, run, stderr};

#[test]
fn an_empty_key_is_a_usage_error() {
    let span = "a=tracepoint:sched:sched_wakeup..tracepoint:sched:sched_switch";
    for key in ["", ","] {
        let out = run(&["live", "--print-program", "--span", span, "--key", key]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(
            stderr(&out).contains(&format!("--key '{key}' names no field")),
            "{}",
            stderr(&out)
        );
    }
}

#[test]
fn an_interval_over_an_hour_is_a_usage_error() {
    let rate = "tracepoint:sched:sched_switch";
    let out = run(&[
        "live",
        "--interval",
        "1000000",
        "--rate",
        rate,
        "--print-program",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("3600 s"), "{}", stderr(&out));
    let out = run(&[
        "live",
        "--interval",
        "60m",
        "--rate",
        rate,
        "--print-program",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(util::stdout(&out).contains("interval:s:3600 "));
}
