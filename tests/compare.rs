//! `latscope compare` on real results: glmark2 on weston, normal and throttled; bench results;
//! a histogram-only result.

use serde_json::Value;

use crate::util::{self, run, stderr, stdout, write};

fn compare_json(before: &str, after: &str) -> Value {
    let out = run(&["compare", "--format", "json", before, after]);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn item<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {doc}"))
}

#[test]
fn a_throttled_client_is_slower_and_its_sync_round_trips_are_mixed() {
    let dir = tempfile::tempdir().unwrap();
    let before = util::compare_input(
        dir.path(),
        "glmark2-weston.before.client.log",
        "before.json",
    );
    let after = util::compare_input(
        dir.path(),
        "glmark2-weston.throttled.client.log",
        "after.json",
    );
    let doc = compare_json(&before, &after);
    assert_eq!(doc["kind"], "compare");
    let cr = item(&doc, "commit_to_release");
    assert_eq!(
        (cr["verdict"].as_str(), cr["basis"].as_str()),
        (Some("slower"), Some("samples"))
    );
    assert_eq!(cr["group"], "client");
    assert_eq!(cr["before"]["p50"], 1_886_000);
    assert_eq!(cr["after"]["p50"], 6_151_000);
    assert!(cr["change_pct"]["p50"].as_f64().unwrap() > 200.0);
    // The median improves while the tail gets much worse: never summarised as faster.
    let sync = item(&doc, "sync_to_done");
    assert_eq!(sync["verdict"], "mixed", "{sync}");
    assert!(
        sync["change_pct"]["p50"].as_f64().unwrap() < 0.0
            && sync["change_pct"]["p99"].as_f64().unwrap() > 0.0
    );
    let text = stdout(&run(&["compare", &before, &after]));
    assert!(
        text.contains("sync_to_done [client]: mixed (samples)")
            && text.contains("opposite directions"),
        "{text}"
    );
}

#[test]
fn a_result_compared_with_itself_is_the_same_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let before = util::compare_input(
        dir.path(),
        "glmark2-weston.before.client.log",
        "before.json",
    );
    let doc = compare_json(&before, &before);
    assert!(
        doc["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["verdict"] == "same"),
        "{doc}"
    );
}

#[test]
fn bench_results_compare_command_by_command() {
    let dir = tempfile::tempdir().unwrap();
    let spin = dir.path().join("spin");
    assert!(
        std::process::Command::new("cc")
            .args(["-O2", "-o"])
            .arg(&spin)
            .arg(util::root().join("tests/targets/spin.c"))
            .status()
            .unwrap()
            .success()
    );
    let save = |n: &str, file: &str| {
        let path = dir.path().join(file);
        let out = run(&[
            "bench",
            "--runs",
            "10",
            "--save",
            path.to_str().unwrap(),
            &format!("{} {n}", spin.display()),
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        path.to_str().unwrap().to_string()
    };
    let _heavy = util::heavy();
    // 8× the work: the two saves run at different times, and other tests may load the machine
    // during one of them (2× was seen to flip under load).
    let (old, new) = (save("1000000", "old.json"), save("8000000", "new.json"));
    let doc = compare_json(&old, &new);
    // Different command lines (1M and 8M iterations): paired by position.
    let wall = item(&doc, &format!("wall time of `{} 1000000`", spin.display()));
    assert_eq!(wall["verdict"], "slower", "{wall}");
    // The same command in both: paired by its command line, nothing left over.
    let again = save("1000000", "again.json");
    let doc = compare_json(&old, &again);
    assert_eq!(doc["items"].as_array().unwrap().len(), 1, "{doc}");
    assert!(doc["only_before"].as_array().unwrap().is_empty(), "{doc}");
}

#[test]
fn histogram_only_results_respect_the_bucket_error() {
    let dir = tempfile::tempdir().unwrap();
    let live = |p50: u64, p99: u64| {
        let buckets = [
            (49_152, 53_247, 600),
            (53_248, 57_343, 390),
            (983_040, 1_048_575, 10),
        ];
        util::spans_doc(&[util::series(
            "req",
            1000,
            [50_000, p50, p99, p99],
            [3000, 60_000],
            &buckets,
        )])
    };
    let a = write(dir.path(), "a.json", live(52_000, 1_000_000));
    let b = write(dir.path(), "b.json", live(54_000, 1_020_000));
    let doc = compare_json(a.to_str().unwrap(), b.to_str().unwrap());
    assert_eq!(
        (
            doc["items"][0]["verdict"].as_str(),
            doc["items"][0]["basis"].as_str()
        ),
        (Some("same"), Some("histogram"))
    );
}

#[test]
fn unreadable_or_different_kinds_of_results_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write(dir.path(), "bad.json", "not json");
    let out = run(&["compare", bad.to_str().unwrap(), bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("bad.json:1:2: not JSON"),
        "{}",
        stderr(&out)
    );
    let spans = write(dir.path(), "s.json", util::spans_doc(&[]));
    let bench = write(
        dir.path(),
        "b.json",
        r#"{"kind":"bench","version":1,"unit":"ns","rule":{"noise":0.01,"alpha":0.05},"commands":[],"interrupted":false}"#,
    );
    let out = run(&["compare", spans.to_str().unwrap(), bench.to_str().unwrap()]);
    assert!(
        stderr(&out).contains("cannot compare a spans result with a bench result"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn bpftrace_json_from_the_same_probe_compares_on_its_buckets() {
    let data = util::root().join("tests/data/compare");
    let doc = compare_json(
        data.join("bpftrace-usdt-waits.json").to_str().unwrap(),
        data.join("bpftrace-usdt-nowait.json").to_str().unwrap(),
    );
    let lat = item(&doc, "@latency_ns");
    assert_eq!(
        (lat["verdict"].as_str(), lat["basis"].as_str()),
        (Some("faster"), Some("histogram"))
    );
    assert_eq!(
        (
            lat["before"]["count"].as_u64(),
            lat["after"]["count"].as_u64()
        ),
        (Some(500), Some(500))
    );
}

#[test]
fn results_exported_as_hlog_and_bpftrace_json_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let before = util::compare_input(
        dir.path(),
        "glmark2-weston.before.client.log",
        "before.json",
    );
    let hlog = dir.path().join("before.hlog");
    assert!(
        run(&[
            "export",
            &before,
            "--to",
            "hlog",
            "-o",
            hlog.to_str().unwrap()
        ])
        .status
        .success()
    );
    let text = std::fs::read_to_string(&hlog).unwrap();
    assert!(
        text.lines()
            .any(|l| l.starts_with("Tag=commit_to_release__client,")),
        "{text}"
    );
    // The interval log keeps the distribution to HdrHistogram precision (0.1%).
    let doc = compare_json(&before, &before);
    let exact = item(&doc, "commit_to_release")["before"].clone();
    let doc = compare_json(hlog.to_str().unwrap(), hlog.to_str().unwrap());
    let back = &item(&doc, "commit_to_release__client")["before"];
    assert_eq!(back["count"], exact["count"]);
    for p in ["p50", "p99"] {
        let (a, b) = (exact[p].as_f64().unwrap(), back[p].as_f64().unwrap());
        assert!((a - b).abs() <= a * 0.001, "{p}: {a} vs {b}");
    }
    let bt = dir.path().join("before.bt.json");
    let out = run(&[
        "export",
        &before,
        "--to",
        "bpftrace",
        "-o",
        bt.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let doc = compare_json(bt.to_str().unwrap(), bt.to_str().unwrap());
    let cr = item(&doc, "@commit_to_release__client");
    assert_eq!(
        (
            cr["before"]["count"].as_u64(),
            cr["basis"].as_str(),
            cr["verdict"].as_str()
        ),
        (Some(1052), Some("histogram"), Some("same"))
    );
}

#[test]
fn lab_queue_results_compare_stage_by_stage() {
    let dir = tempfile::tempdir().unwrap();
    let save = |gap: &str, name: &str| {
        let out = run(&[
            "lab",
            "queue",
            "--format",
            "json",
            "--batches",
            "1000",
            "--gap",
            gap,
        ]);
        write(dir.path(), name, &out.stdout)
            .to_str()
            .unwrap()
            .to_string()
    };
    let (fast, slow) = (save("0", "gap0.json"), save("4us", "gap4.json"));
    let doc = compare_json(&fast, &slow);
    // A slower submitter makes per-request latency far lower: "faster", on the samples (the
    // HdrHistogram of every request's latency is in the result).
    assert_eq!(item(&doc, "latency")["verdict"], "faster");
    assert_eq!(item(&doc, "latency")["basis"], "samples");
    assert!(
        doc["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["name"] == "to_start")
    );
}
