//! `latscope live --save --record-spans` on the USDT test target: the individual spans agree
//! with the in-kernel histograms, and feed the exports and the report's time view.

use serde_json::Value;

use crate::live::{fixture, probe, saved};
use crate::util::{run, stderr, stdout};

/// Runs `live --record-spans --max-spans MAX` on `ITERATIONS` requests of the target.
fn record(f: &crate::live::Fixture, iterations: &str, max: &str) -> Value {
    let t = &f.target;
    let span = format!(
        "req={}..{}",
        probe(t, "request_start"),
        probe(t, "request_end")
    );
    let out = run(&[
        "live",
        "-q",
        "--save",
        f.save.to_str().unwrap(),
        "--record-spans",
        "--max-spans",
        max,
        "--span",
        &span,
        "--",
        t.to_str().unwrap(),
        iterations,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    saved(&f.save)
}

fn latencies(doc: &Value, field: &str) -> Vec<u64> {
    doc[field]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|r| r["latency_ns"].as_u64().unwrap())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn recorded_spans_are_the_histograms_spans_one_by_one() {
    let Some(f) = fixture() else { return };
    let doc = record(&f, "1000", "5000");
    let req = &doc["spans"][0];
    assert_eq!(req["count"], 1000);
    let records = latencies(&doc, "records");
    assert_eq!(records.len(), 1000, "one record per span in the histogram");
    assert!(
        doc.get("records_dropped").is_none(),
        "{}",
        doc["records_dropped"]
    );
    // Bucketed independently, the records give the kernel's histogram bucket for bucket.
    let buckets = req["histogram"]["buckets"].as_array().unwrap();
    for b in buckets {
        let (lo, hi) = (b["min"].as_u64().unwrap(), b["max"].as_u64().unwrap());
        let n = records.iter().filter(|&&l| (lo..=hi).contains(&l)).count() as u64;
        assert_eq!(n, b["count"].as_u64().unwrap(), "bucket [{lo}, {hi}]");
    }
    assert_eq!(records.iter().min().copied(), req["min"].as_u64());
    assert_eq!(records.iter().max().copied(), req["max"].as_u64());
    let sum: u64 = records.iter().sum();
    let mean = req["mean"].as_f64().unwrap();
    assert!(
        (sum as f64 / 1000.0 - mean).abs() < 1.0,
        "mean {mean}, records {sum}"
    );
    // The requests ran one after another: starts increase, and no span overlaps the next.
    let starts: Vec<u64> = doc["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["start_ns"].as_u64().unwrap())
        .collect();
    assert!(
        starts
            .windows(2)
            .zip(&records)
            .all(|(w, l)| w[0] + l <= w[1]),
        "starts out of order"
    );
}

#[test]
fn past_max_spans_the_first_are_kept_the_rest_counted_and_the_slowest_listed() {
    let Some(f) = fixture() else { return };
    let doc = record(&f, "1000", "100");
    assert_eq!(latencies(&doc, "records").len(), 100);
    assert_eq!(doc["records_dropped"], 900);
    // The slowest span is listed even though it was not among the first 100 (the 1 ms waits
    // come every 10th request, and a later one is almost surely the slowest).
    let slowest = latencies(&doc, "slowest");
    assert_eq!(slowest.first().copied(), doc["spans"][0]["max"].as_u64());
    assert!(slowest.windows(2).all(|w| w[0] >= w[1]), "{slowest:?}");
}

#[test]
fn a_recorded_live_result_exports_to_chrome_json_and_perfetto_and_shows_latency_against_time() {
    let Some(f) = fixture() else { return };
    let doc = record(&f, "200", "1000");
    let dir = f.save.parent().unwrap();
    let save = f.save.to_str().unwrap();
    let chrome = dir.join("live.chrome.json");
    let out = run(&[
        "export",
        save,
        "--to",
        "chrome-json",
        "-o",
        chrome.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let trace: Value = serde_json::from_slice(&std::fs::read(&chrome).unwrap()).unwrap();
    let slices: Vec<&Value> = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X")
        .collect();
    assert_eq!(slices.len(), 200);
    assert_eq!(
        slices[0]["args"]["latency_ns"],
        doc["records"][0]["latency_ns"]
    );
    // Read back by `latscope spans` to the nanosecond.
    let back = run(&["spans", "-f", "json", chrome.to_str().unwrap()]);
    assert!(back.status.success(), "{}", stderr(&back));
    let back: Value = serde_json::from_slice(&back.stdout).unwrap();
    assert_eq!(back["spans"][0]["count"], 200);
    assert_eq!(back["spans"][0]["max"], doc["spans"][0]["max"]);
    let html = dir.join("live.html");
    let out = run(&["report", save, "-o", html.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("latency against time"), "{}", stdout(&out));
    // The same spans in a native Perfetto trace, decoded with Perfetto's own schema.
    if let Some(decoded) = crate::perfetto::exported(dir, &doc) {
        assert_eq!(decoded.len(), 200);
        crate::perfetto::assert_same_spans(&doc, &decoded);
    }
}

#[test]
fn record_spans_needs_save() {
    let out = run(&[
        "live",
        "--record-spans",
        "--span",
        "a=usdt:/t:p:a..usdt:/t:p:b",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--save"), "{}", stderr(&out));
}
