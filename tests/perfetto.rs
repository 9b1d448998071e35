//! `latscope export --to perfetto`: the native Perfetto protobuf, decoded by Perfetto's own
//! compiled schema (tests/independent/perfetto_slices.py, PyPI `perfetto`) and compared with the
//! spans the document kept.

use serde_json::Value;

use crate::util::{self, run, stderr};

/// (name, group, start, latency) of every kept span, sorted.
fn records(doc: &Value) -> Vec<(String, Option<String>, u64, u64)> {
    let mut out: Vec<_> = doc["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["span"].as_str().unwrap().to_string(),
                r["group"].as_str().map(str::to_string),
                r["start_ns"].as_u64().unwrap(),
                r["latency_ns"].as_u64().unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

/// The same from the decoded slices: the name, the group annotation, the begin stamp and the
/// distance to the end stamp (checked against the latency annotation).
fn slices(slices: &[Value]) -> Vec<(String, Option<String>, u64, u64)> {
    let mut out: Vec<_> = slices
        .iter()
        .map(|s| {
            let dur = s["dur_ns"].as_u64().unwrap();
            assert_eq!(s["args"]["latency_ns"].as_u64(), Some(dur), "{s}");
            assert_eq!(s["args"]["start_ns"], s["start_ns"], "{s}");
            (
                s["name"].as_str().unwrap().to_string(),
                s["args"]["group"].as_str().map(str::to_string),
                s["start_ns"].as_u64().unwrap(),
                dur,
            )
        })
        .collect();
    out.sort();
    out
}

/// Exports `doc` (saved in `dir`) to a Perfetto trace and decodes it independently.
pub fn exported(dir: &std::path::Path, doc: &Value) -> Option<Vec<Value>> {
    let saved = util::write(dir, "spans.json", doc.to_string());
    let trace = dir.join("spans.pftrace");
    util::export(&saved, "perfetto", &trace);
    util::perfetto_slices(&trace)
}

/// Checks that the decoded trace holds exactly the document's kept spans.
pub fn assert_same_spans(doc: &Value, decoded: &[Value]) {
    assert_eq!(slices(decoded), records(doc));
}

#[test]
fn kept_spans_export_to_perfetto_and_decode_to_the_same_spans_with_perfettos_schema() {
    let dir = tempfile::tempdir().unwrap();
    let trace = util::root().join("tests/data/traces/sched.perf.txt");
    let rest = [
        "--by",
        "comm",
        "--max-spans",
        "1000",
        "-f",
        "json",
        trace.to_str().unwrap(),
    ];
    let out = run(&[&["spans"][..], &util::WAKE, &rest].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["records"].as_array().unwrap().len(), 48);
    let Some(decoded) = exported(dir.path(), &doc) else {
        return;
    };
    assert_same_spans(&doc, &decoded);
    // Each series on its own track, named like the series.
    for s in &decoded {
        let group = s["args"]["group"].as_str().unwrap();
        let track = s["track"].as_str().unwrap();
        assert!(
            track.starts_with(&format!("sched_wakeup_to_sched_switch [{group}]")),
            "{track}"
        );
    }
}

#[test]
fn overlapping_spans_stay_whole_on_lanes_of_their_track() {
    let dir = tempfile::tempdir().unwrap();
    // Two concurrent requests and a third after both.
    let csv = "ts,name,id\n0,start,1\n10,start,2\n50,end,1\n70,end,2\n80,start,3\n90,end,3\n";
    let input = util::write(dir.path(), "req.csv", csv);
    let out = run(&[
        "spans",
        "--start",
        "start",
        "--end",
        "end",
        "--key",
        "id",
        "--max-spans",
        "10",
        "-f",
        "json",
        input.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let Some(decoded) = exported(dir.path(), &doc) else {
        return;
    };
    assert_same_spans(&doc, &decoded);
    let tracks: Vec<&str> = decoded
        .iter()
        .map(|s| s["track"].as_str().unwrap())
        .collect();
    assert_eq!(tracks[0], tracks[2], "the third span reuses the first lane");
    assert_ne!(tracks[0], tracks[1], "{tracks:?}");
}

#[test]
fn a_result_without_spans_is_refused_with_how_to_keep_them() {
    // (a lab-ipc result without kept messages: tests/lab_records.rs)
    let lab = util::root().join("tests/data/docs/bench-a.json");
    let out = run(&["export", lab.to_str().unwrap(), "--to", "perfetto"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("--record-spans"), "{}", stderr(&out));
}
