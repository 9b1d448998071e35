//! The labs' individual messages (`--max-spans N`): kept exactly as measured (bucketed, they
//! give back each row's histogram), bounded (the first N and the slowest, the rest counted),
//! and exported as slices for timeline viewers (Chrome JSON parsed back; Perfetto decoded by
//! Perfetto's own schema, tests/independent/perfetto_slices.py).

use std::path::Path;

use serde_json::Value;

use crate::util::{self, run, stderr, stdout};

/// Log2 bucket counts of `latencies`, as the documents' `log2` histograms hold them
/// (bucket `[2^k, 2^(k+1) - 1]`; 0 and 1 in the first), keyed by the bucket's min.
fn log2_counts(latencies: &[u64]) -> std::collections::BTreeMap<u64, u64> {
    let mut out = std::collections::BTreeMap::new();
    for &l in latencies {
        let min = if l < 2 {
            0
        } else {
            1u64 << (63 - l.leading_zeros())
        };
        *out.entry(min).or_insert(0) += 1;
    }
    out
}

/// The non-empty buckets of a row's histogram, keyed by min.
fn histogram_counts(row: &Value) -> std::collections::BTreeMap<u64, u64> {
    let h = &row["histogram"];
    assert_eq!(h["scheme"], "log2", "{h}");
    h["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["count"].as_u64().unwrap() > 0)
        .map(|b| (b["min"].as_u64().unwrap(), b["count"].as_u64().unwrap()))
        .collect()
}

fn latencies(records: &Value) -> Vec<u64> {
    records
        .as_array()
        .map(|a| {
            a.iter()
                .map(|r| r["latency_ns"].as_u64().unwrap())
                .collect()
        })
        .unwrap_or_default()
}

/// The records (or slowest, with `key` = "slowest") of `row` that belong to `series`.
fn of_series(row: &Value, key: &str, series: &str) -> Vec<Value> {
    row[key]
        .as_array()
        .map(|a| a.iter().filter(|r| r["span"] == series).cloned().collect())
        .unwrap_or_default()
}

/// Checks that every message of `series` was kept in `row` and that they are its distribution
/// `dist` (a row, or a metric of a row): count, min, max and log2 buckets agree exactly.
fn assert_all_kept(what: &str, row: &Value, dist: &Value, series: &str) {
    let records = of_series(row, "records", series);
    let l = latencies(&Value::Array(records.clone()));
    assert_eq!(l.len() as u64, dist["count"].as_u64().unwrap(), "{what}");
    assert_eq!(row.get("records_dropped"), None, "{what}");
    assert_eq!(l.iter().min().copied(), dist["min"].as_u64(), "{what}");
    assert_eq!(l.iter().max().copied(), dist["max"].as_u64(), "{what}");
    assert_eq!(log2_counts(&l), histogram_counts(dist), "{what}");
    for r in &records {
        assert_eq!(r["group"], Value::Null, "{what}: {r}");
        assert!(r["start_ns"].as_u64().unwrap() > 0, "{what}: {r}");
    }
    // The slowest are among them, slowest first, the first one the maximum.
    let slowest = of_series(row, "slowest", series);
    assert_eq!(slowest.len(), 5.min(l.len()), "{what}");
    assert_eq!(slowest[0]["latency_ns"], dist["max"], "{what}");
    for s in &slowest {
        assert!(records.contains(s), "{what}: {s}");
    }
}

/// (series, row label, start, latency) of every message a lab document kept, sorted; `label`
/// names a row.
fn kept_spans(rows: &[Value], label: impl Fn(&Value) -> String) -> Vec<(String, String, u64, u64)> {
    let mut out = Vec::new();
    for row in rows {
        let mut all: Vec<Value> = row["records"].as_array().cloned().unwrap_or_default();
        for s in row["slowest"].as_array().cloned().unwrap_or_default() {
            if !all.contains(&s) {
                all.push(s);
            }
        }
        for r in all {
            out.push((
                r["span"].as_str().unwrap().to_string(),
                label(row),
                r["start_ns"].as_u64().unwrap(),
                r["latency_ns"].as_u64().unwrap(),
            ));
        }
    }
    out.sort();
    out
}

/// Exports `saved` to Chrome JSON and reads the complete events back: (name, group, start,
/// latency), with `ts`/`dur` checked against the exact ns arguments.
fn chrome_slices(dir: &Path, saved: &Path) -> Vec<(String, String, u64, u64)> {
    let file = dir.join("trace.json");
    util::export(saved, "chrome-json", &file);
    let trace: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let mut got: Vec<(String, String, u64, u64)> = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| {
            let a = &e["args"];
            let start = a["start_ns"].as_u64().unwrap();
            let latency = a["latency_ns"].as_u64().unwrap();
            assert!(
                (e["ts"].as_f64().unwrap() - start as f64 / 1e3).abs() < 1.0,
                "{e}"
            );
            assert!(
                (e["dur"].as_f64().unwrap() - latency as f64 / 1e3).abs() < 1e-3,
                "{e}"
            );
            (
                e["name"].as_str().unwrap().to_string(),
                a["group"].as_str().unwrap().to_string(),
                start,
                latency,
            )
        })
        .collect();
    got.sort();
    got
}

/// Exports `saved` to Perfetto and decodes it with Perfetto's schema; `None` without the venv.
/// Both timeline exports of `saved` hold exactly `want`: Chrome JSON always, Perfetto when its
/// decoder is available here.
fn assert_both_timelines(dir: &Path, saved: &Path, want: &[(String, String, u64, u64)]) {
    assert_eq!(chrome_slices(dir, saved), want);
    if let Some(got) = perfetto_slices(dir, saved) {
        assert_eq!(got, want);
    }
}

fn perfetto_slices(dir: &Path, saved: &Path) -> Option<Vec<(String, String, u64, u64)>> {
    let file = dir.join("trace.pftrace");
    util::export(saved, "perfetto", &file);
    let mut got: Vec<(String, String, u64, u64)> = util::perfetto_slices(&file)?
        .iter()
        .map(|s| {
            let dur = s["dur_ns"].as_u64().unwrap();
            assert_eq!(s["args"]["latency_ns"].as_u64(), Some(dur), "{s}");
            let group = s["args"]["group"].as_str().unwrap().to_string();
            assert!(
                s["track"].as_str().unwrap().contains(&format!("[{group}]")),
                "{s}"
            );
            (
                s["name"].as_str().unwrap().to_string(),
                group,
                s["start_ns"].as_u64().unwrap(),
                dur,
            )
        })
        .collect();
    got.sort();
    Some(got)
}

/// `transport/peer/pattern[ param]/payload B`, as `IpcResult::label` names a row.
fn ipc_label(r: &Value) -> String {
    let p = &r["params"];
    let mut param = String::new();
    for (key, name, unit) in [
        ("flush_bytes", "flush", ""),
        ("burst", "burst", ""),
        ("segments", "segments", ""),
        ("rate_per_s", "rate", "/s"),
    ] {
        if let Some(v) = p[key].as_u64() {
            param.push_str(&format!(" {name}={v}{unit}"));
        }
    }
    format!(
        "{}/{}/{}{param}/{} B",
        r["transport"].as_str().unwrap(),
        r["peer"].as_str().unwrap(),
        r["pattern"].as_str().unwrap(),
        r["payload"]
    )
}

fn lab_ipc(dir: &Path, args: &[&str]) -> (Value, std::path::PathBuf) {
    let mut all = vec!["lab", "ipc", "--format", "json", "--peer", "thread"];
    all.extend_from_slice(args);
    let out = run(&all);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let doc: Value = serde_json::from_str(&text).unwrap();
    let saved = util::write(dir, "lab-ipc.json", text);
    (doc, saved)
}

#[test]
fn the_ipc_lab_keeps_every_message_below_the_limit_and_they_give_back_each_histogram() {
    let _heavy = util::heavy();
    let dir = tempfile::tempdir().unwrap();
    let (doc, saved) = lab_ipc(
        dir.path(),
        &[
            "--transport",
            "pipe,unix-stream",
            "--pattern",
            "ping-pong,stream,open-loop",
            "--rate",
            "20000",
            "--payload",
            "64",
            "--count",
            "300",
            "--warmup",
            "10",
            "--max-spans",
            "1000",
        ],
    );
    let results = doc["results"].as_array().unwrap();
    assert_eq!(results.len(), 6);
    for r in results {
        let series = match r["latency"].as_str().unwrap() {
            "one-way" => "one_way",
            _ => "round_trip",
        };
        assert_all_kept(&ipc_label(r), r, r, series);
        assert_eq!(r["records"].as_array().unwrap().len(), 300);
        // Ping-pong messages follow one another: each starts after the previous one ended.
        if r["pattern"] == "ping-pong" {
            let recs = r["records"].as_array().unwrap();
            for w in recs.windows(2) {
                let end = w[0]["start_ns"].as_u64().unwrap() + w[0]["latency_ns"].as_u64().unwrap();
                assert!(w[1]["start_ns"].as_u64().unwrap() >= end, "{w:?}");
            }
        }
    }
    // The document reads back (unknown fields denied) and writes back unchanged.
    let text = std::fs::read_to_string(&saved).unwrap();
    let back = latscope::doc::read("lab-ipc.json", &text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(back.to_value(), doc);
    let want = kept_spans(results, ipc_label);
    assert_eq!(want.len(), 6 * 300);
    assert_both_timelines(dir.path(), &saved, &want);
}

#[test]
fn past_the_limit_the_ipc_lab_keeps_the_first_messages_and_the_slowest_and_counts_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let (doc, saved) = lab_ipc(
        dir.path(),
        &[
            "--transport",
            "pipe",
            "--payload",
            "8",
            "--count",
            "400",
            "--warmup",
            "10",
            "--max-spans",
            "50",
        ],
    );
    let r = &doc["results"][0];
    assert_eq!(r["records"].as_array().unwrap().len(), 50);
    assert_eq!(r["records_dropped"], 350);
    let slowest = r["slowest"].as_array().unwrap();
    assert_eq!(slowest.len(), 5);
    assert_eq!(slowest[0]["latency_ns"], r["max"]);
    let l = latencies(&r["slowest"]);
    assert!(l.windows(2).all(|w| w[0] >= w[1]), "{l:?}");
    // The export holds the first 50 and those of the slowest past them.
    let want = kept_spans(std::slice::from_ref(r), ipc_label);
    assert!((50..=55).contains(&want.len()), "{}", want.len());
    assert_eq!(chrome_slices(dir.path(), &saved), want);
    // The report shows the kept messages against time.
    let html = dir.path().join("r.html");
    let out = run(&[
        "report",
        saved.to_str().unwrap(),
        "-o",
        html.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("latency against time"), "no time view");
}

#[test]
fn a_lab_result_without_kept_messages_refuses_a_timeline_export_and_says_how_to_keep_them() {
    let dir = tempfile::tempdir().unwrap();
    let doc = util::root().join("tests/data/docs/lab-ipc.json");
    let out = run(&[
        "export",
        doc.to_str().unwrap(),
        "--to",
        "chrome-json",
        "-o",
        dir.path().join("t.json").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("lab ipc --max-spans N"),
        "{}",
        stderr(&out)
    );
    assert!(!dir.path().join("t.json").exists());
}

#[test]
fn the_wayland_lab_keeps_every_exchange_of_every_metric_and_they_give_back_each_histogram() {
    if !util::stack_available() {
        return;
    }
    let _heavy = util::heavy();
    let dir = tempfile::tempdir().unwrap();
    let out = util::latscope()
        .args([
            "lab",
            "wayland",
            "round-trip",
            "frames",
            "--count",
            "100",
            "--frames",
            "40",
            "--max-spans",
            "1000",
            "--format",
            "json",
        ])
        .env_remove("WAYLAND_DISPLAY")
        .env_remove("WAYLAND_DEBUG")
        .env("TMPDIR", dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let doc: Value = serde_json::from_str(&text).unwrap();
    let saved = util::write(dir.path(), "lab-wayland.json", &text);
    let results = doc["results"].as_array().unwrap();
    let mut series = 0;
    for r in results {
        for m in r["metrics"].as_array().unwrap() {
            let name = m["name"].as_str().unwrap();
            assert_all_kept(&format!("{} {name}", r["label"]), r, m, name);
            series += 1;
        }
    }
    // sync_to_done; buffer_wait, commit_to_release, frame_to_done, commit_to_presented.
    assert_eq!(series, 5, "{text}");
    let label = |r: &Value| r["label"].as_str().unwrap().to_string();
    let want = kept_spans(results, label);
    assert_both_timelines(dir.path(), &saved, &want);
}

#[test]
fn the_x11_lab_keeps_every_operation_and_they_give_back_each_histogram() {
    if !util::commands_available(&["Xvfb"], "xvfb") {
        return;
    }
    let _heavy = util::heavy();
    let dir = tempfile::tempdir().unwrap();
    let out = util::latscope()
        .args([
            "lab",
            "x11",
            "round-trip",
            "upload",
            "--method",
            "put,shm",
            "--segments",
            "1,4",
            "-n",
            "200",
            "--warmup",
            "10",
            "--max-spans",
            "1000",
            "--format",
            "json",
        ])
        .env_remove("DISPLAY")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let doc: Value = serde_json::from_str(&text).unwrap();
    let saved = util::write(dir.path(), "lab-x11.json", &text);
    let results = doc["results"].as_array().unwrap();
    // round-trip, upload put, upload shm K=1, upload shm K=4
    assert_eq!(results.len(), 4, "{text}");
    for r in results {
        let series = r["latency_meaning"].as_str().unwrap();
        assert_all_kept(&r.to_string()[..80], r, r, series);
        assert_eq!(r["records"].as_array().unwrap().len(), 200);
    }
    // Rows are named as the document names them.
    let label = |r: &Value| {
        serde_json::from_value::<latscope::doc::x11::X11Result>(r.clone())
            .unwrap()
            .label()
    };
    let want = kept_spans(results, label);
    assert_eq!(want.len(), 4 * 200);
    assert_both_timelines(dir.path(), &saved, &want);
}

#[test]
fn the_queue_lab_keeps_each_requests_stages_which_add_up_to_its_latency() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(&[
        "lab",
        "queue",
        "--batches",
        "200",
        "--sweep",
        "gap=0,4us",
        "--max-spans",
        "1000",
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let doc: Value = serde_json::from_str(&text).unwrap();
    let saved = util::write(dir.path(), "lab-queue.json", &text);
    let rows = doc["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for row in rows {
        let what = row["labels"].to_string();
        assert_all_kept(&what, row, &row["latency"], "latency");
        for stage in row["stages"].as_array().unwrap() {
            let name = stage["name"].as_str().unwrap();
            if name != "completion_to_next_submit" {
                assert_all_kept(&format!("{what} {name}"), row, stage, name);
            }
        }
        // Request by request: queued, then to_start, then exec, back to back, adding up to
        // the latency.
        let series = |name: &str| of_series(row, "records", name);
        let (lat, queued, to_start, exec) = (
            series("latency"),
            series("queued"),
            series("to_start"),
            series("exec"),
        );
        assert_eq!(lat.len(), 200);
        let n = |v: &Value, k: &str| v[k].as_u64().unwrap();
        for i in 0..200 {
            assert_eq!(
                n(&queued[i], "start_ns"),
                n(&lat[i], "start_ns"),
                "{what} {i}"
            );
            let end = |v: &Value| n(v, "start_ns") + n(v, "latency_ns");
            assert_eq!(n(&to_start[i], "start_ns"), end(&queued[i]), "{what} {i}");
            assert_eq!(n(&exec[i], "start_ns"), end(&to_start[i]), "{what} {i}");
            assert_eq!(end(&exec[i]), end(&lat[i]), "{what} {i}");
        }
    }
    // gap=4us is the idle path: every request takes exactly prep-end → completion = 7 µs.
    let idle = of_series(&rows[1], "records", "latency");
    assert!(idle.iter().all(|r| r["latency_ns"] == 7_000), "{idle:?}");
    let label = |r: &Value| {
        let labels: Vec<String> = r["labels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| {
                format!(
                    "{}={}",
                    l["name"].as_str().unwrap(),
                    l["value"].as_str().unwrap()
                )
            })
            .collect();
        labels.join(",")
    };
    let want = kept_spans(rows, label);
    assert_eq!(want.len(), 2 * 4 * 200);
    assert_both_timelines(dir.path(), &saved, &want);
}
