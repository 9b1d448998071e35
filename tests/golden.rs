//! Golden tests on real captured logs: latscope against the independent Python reference
//! (tests/independent/wl_latency.py), in every libwayland dialect and across both timestamp
//! wraps (tests/independent/dialect.py rewrites the real logs).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::util::{self, python, real_logs, spans_by_name, wayland_json};

const DIALECTS: [&str; 5] = ["1.19-comma", "1.21", "1.23", "1.25-color", "1.26"];

/// Nearest-rank percentile of sorted samples: the ⌈q·n⌉-th smallest.
fn nearest_rank(sorted: &[u64], q: f64) -> u64 {
    let rank = ((q * sorted.len() as f64).ceil() as usize).max(1);
    sorted[rank - 1]
}

/// Checks every span latscope reports for `log` against the reference's samples for `reference`
/// (the same log, or the original it was converted from).
pub fn assert_matches_reference(log: &Path, reference: &Path) -> BTreeMap<String, Value> {
    let theirs: Value =
        serde_json::from_slice(&python("wl_latency.py", &[reference.to_str().unwrap()])).unwrap();
    let doc = wayland_json(log, &[]);
    let ours = spans_by_name(&doc);
    let mut compared = 0;
    let mut callback_orphans = 0;
    for (span, sides) in theirs["spans"].as_object().unwrap() {
        for (side, samples) in sides.as_object().unwrap() {
            let mut samples: Vec<u64> = samples
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap())
                .collect();
            samples.sort_unstable();
            let counts = &theirs["counts"][span][side];
            let key = format!("{span}/{side}");
            let at = format!("{} {key}", log.display());
            if span.ends_with("to_done") {
                // A done whose frame/sync request is not in the log belongs to no known span:
                // latscope counts it once per input (`unknown_callbacks`), checked below.
                callback_orphans += counts["orphan_ends"].as_u64().unwrap();
            }
            let Some(mine) = ours.get(&key) else {
                assert!(
                    samples.is_empty() && counts["unmatched"] == 0,
                    "{at}: missing in latscope"
                );
                continue;
            };
            assert_eq!(
                mine["count"].as_u64().unwrap(),
                samples.len() as u64,
                "{at} count"
            );
            for field in [
                "unmatched",
                "superseded",
                "orphan_ends",
                "discarded",
                "backwards",
            ] {
                if field == "orphan_ends" && span.ends_with("to_done") {
                    continue;
                }
                assert_eq!(mine[field], counts[field], "{at} {field}");
            }
            if samples.is_empty() {
                continue;
            }
            assert_eq!(mine["min"].as_u64(), samples.first().copied(), "{at} min");
            assert_eq!(mine["max"].as_u64(), samples.last().copied(), "{at} max");
            for (field, q) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p999", 0.999)] {
                assert_eq!(
                    mine[field].as_u64().unwrap(),
                    nearest_rank(&samples, q),
                    "{at} {field}"
                );
            }
            let mean = samples.iter().map(|&v| v as f64).sum::<f64>() / samples.len() as f64;
            let got = mine["mean"].as_f64().unwrap();
            assert!(
                (got - mean).abs() <= mean * 1e-12,
                "{at} mean {got} vs {mean}"
            );
            compared += 1;
        }
    }
    assert!(compared > 0, "{}: no span compared", log.display());
    assert_eq!(
        doc["input"]["unknown_callbacks"],
        callback_orphans,
        "{}",
        log.display()
    );
    ours
}

#[test]
fn every_real_log_matches_the_independent_reference() {
    for log in real_logs() {
        assert_matches_reference(&log, &log);
    }
}

#[test]
fn every_dialect_of_every_real_log_gives_the_same_latencies_across_a_wrap() {
    let dir = tempfile::tempdir().unwrap();
    for log in real_logs() {
        for dialect in DIALECTS {
            for wrap in [false, true] {
                let mut args = vec![dialect, log.to_str().unwrap()];
                if wrap {
                    args.insert(1, "--wrap");
                }
                let converted = python("dialect.py", &args);
                let name = format!(
                    "{dialect}-{wrap}-{}",
                    log.file_name().unwrap().to_str().unwrap()
                );
                let path = util::write(dir.path(), &name, converted);
                assert_matches_reference(&path, &log);
                let doc = wayland_json(&path, &[]);
                if wrap {
                    // The shift leaves exactly one wrap, half-way through the log.
                    assert_eq!(doc["input"]["clock_wraps"], 1, "{name}");
                }
                assert_eq!(doc["input"]["malformed"], 0, "{name}");
            }
        }
    }
}

#[test]
fn the_reference_reads_every_dialect_the_same_way() {
    // Guards the reference itself: converted logs must give it the same samples as the original.
    let log = util::data("weston-simple-shm.client.log");
    let original: Value =
        serde_json::from_slice(&python("wl_latency.py", &[log.to_str().unwrap()])).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for dialect in DIALECTS {
        let converted = python("dialect.py", &[dialect, "--wrap", log.to_str().unwrap()]);
        let path = util::write(dir.path(), "c.log", converted);
        let again: Value =
            serde_json::from_slice(&python("wl_latency.py", &[path.to_str().unwrap()])).unwrap();
        assert_eq!(again["spans"], original["spans"], "{dialect}");
    }
}

#[test]
fn the_nested_compositor_log_keeps_client_and_server_apart() {
    let doc = wayland_json(
        &util::data("mir-glmark2-build.server-and-host-client.log"),
        &[],
    );
    let spans = spans_by_name(&doc);
    for key in [
        "commit_to_release/client",
        "commit_to_release/server",
        "sync_to_done/server",
    ] {
        assert!(spans[key]["count"].as_u64().unwrap() > 0, "{key}");
    }
}

#[test]
fn the_embedded_demo_prints_histograms_of_the_bundled_log() {
    // The demo writes its report to a new file in TMPDIR: keep it in this test's directory.
    let tmp = tempfile::tempdir().unwrap();
    let out = crate::util::latscope()
        .args(["demo", "--no-ipc"])
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = util::stdout(&out);
    assert!(
        text.contains("commit_to_release[client]: 462 samples"),
        "{text}"
    );
    assert!(text.contains("@commit_to_release[client] (µs):"));
    assert!(text.contains("[1K, 2K)"));
}
