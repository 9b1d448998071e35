//! Rendered output of every document kind from committed inputs, compared with the expected
//! files in tests/snapshots/ (inferno's style). After a deliberate change of an output, run
//! `LATSCOPE_BLESS=1 cargo test --test integration snapshots` and review the diff of the
//! expected files like code.

use std::path::Path;

use latscope::doc::{self, Document};

use crate::util::{self, stderr};

fn check(name: &str, actual: &str) {
    let path = util::root().join("tests/snapshots").join(name);
    if std::env::var_os("LATSCOPE_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("no {}: run with LATSCOPE_BLESS=1", path.display()));
    if expected != actual {
        let at = expected
            .lines()
            .zip(actual.lines())
            .position(|(e, a)| e != a)
            .unwrap_or(expected.lines().count().min(actual.lines().count()));
        panic!(
            "{name} differs from the expected output at line {}:\n  expected: {:?}\n  actual:   {:?}\n(LATSCOPE_BLESS=1 rewrites it)",
            at + 1,
            expected.lines().nth(at),
            actual.lines().nth(at)
        );
    }
}

/// latscope run in `dir` (so the file names it prints are relative), asserting success.
fn latscope_in(dir: &Path, args: &[&str]) -> String {
    let out = util::latscope()
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// Every format of a command that writes all four: (--format value, snapshot extension).
const ALL_FORMATS: [(&str, &str); 4] = [
    ("text", "txt"),
    ("markdown", "md"),
    ("csv", "csv"),
    ("json", "json"),
];

fn docs() -> std::path::PathBuf {
    util::root().join("tests/data/docs")
}

#[test]
fn a_wayland_analysis_renders_as_expected_in_every_format() {
    let dir = util::root().join("tests/data/wayland");
    for (format, ext) in ALL_FORMATS {
        let out = latscope_in(
            &dir,
            &["wayland", "-f", format, "weston-simple-shm.client.log"],
        );
        check(&format!("wayland-simple-shm.{ext}"), &out);
    }
}

#[test]
fn a_comparison_renders_as_expected_in_every_format_and_in_the_report() {
    let dir = tempfile::tempdir().unwrap();
    util::compare_input(
        dir.path(),
        "glmark2-weston.before.client.log",
        "before.json",
    );
    util::compare_input(
        dir.path(),
        "glmark2-weston.throttled.client.log",
        "after.json",
    );
    for (format, ext) in [("text", "txt"), ("markdown", "md"), ("json", "json")] {
        let out = latscope_in(
            dir.path(),
            &["compare", "-f", format, "before.json", "after.json"],
        );
        check(&format!("compare-glmark2.{ext}"), &out);
    }
    latscope_in(
        dir.path(),
        &["report", "before.json", "after.json", "-o", "r.html"],
    );
    check(
        "report-glmark2.html",
        &std::fs::read_to_string(dir.path().join("r.html")).unwrap(),
    );
}

#[test]
fn the_queue_model_renders_as_expected_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    for (format, ext) in [("text", "txt"), ("markdown", "md"), ("json", "json")] {
        let one = latscope_in(
            dir.path(),
            &["lab", "queue", "-f", format, "--batches", "300"],
        );
        check(&format!("lab-queue.{ext}"), &one);
        let sweep = [
            "lab",
            "queue",
            "-f",
            format,
            "--batches",
            "300",
            "--sweep",
            "gap=0,4us",
        ];
        check(
            &format!("lab-queue-sweep.{ext}"),
            &latscope_in(dir.path(), &sweep),
        );
    }
}

#[test]
fn a_saved_ipc_lab_renders_as_expected_as_text_and_markdown() {
    let text = std::fs::read_to_string(docs().join("lab-ipc.json")).unwrap();
    let Document::LabIpc(d) = doc::read("lab-ipc.json", &text).unwrap() else {
        panic!("not lab-ipc")
    };
    check("lab-ipc.txt", &latscope::lab::ipc::report::text(&d, true));
    check("lab-ipc.md", &latscope::lab::ipc::report::markdown(&d));
    let dir = docs();
    latscope_in(&dir, &["report", "lab-ipc.json", "-o", "/dev/stdout"]);
}

#[test]
fn saved_benchmarks_compare_as_expected_in_every_format() {
    let dir = docs();
    for (format, ext) in ALL_FORMATS {
        let out = latscope_in(
            &dir,
            &[
                "bench",
                "-f",
                format,
                "--compare",
                "bench-a.json",
                "bench-b.json",
            ],
        );
        check(&format!("bench-compare.{ext}"), &out);
    }
}

#[test]
fn saved_live_spans_report_as_expected() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(docs().join("spans-live.json"), dir.path().join("live.json")).unwrap();
    latscope_in(dir.path(), &["report", "live.json", "-o", "r.html"]);
    check(
        "report-live.html",
        &std::fs::read_to_string(dir.path().join("r.html")).unwrap(),
    );
    let out = latscope_in(dir.path(), &["export", "live.json", "--to", "bpftrace"]);
    check("live-export.bpftrace.json", &out);
}

#[test]
fn plots_render_as_expected_svg() {
    let dir = docs();
    for (kind, name) in [
        ("histogram", "plot-histogram.svg"),
        ("percentiles", "plot-percentiles.svg"),
    ] {
        let svg = latscope_in(
            &dir,
            &[
                "plot",
                "spans-wayland.json",
                "spans-live.json",
                "--kind",
                kind,
                "-o",
                "/dev/stdout",
            ],
        );
        check(name, &svg);
    }
    let text = std::fs::read_to_string(dir.join("lab-ipc.json")).unwrap();
    let d = doc::read("lab-ipc.json", &text).unwrap();
    let rows: Vec<latscope::report::plot::MatrixRow> = doc::items("lab-ipc.json", &d)
        .unwrap()
        .iter()
        .filter_map(|i| {
            Some(latscope::report::plot::MatrixRow {
                label: i.label(),
                p50: i.summary.p50?,
                p99: i.summary.p99?,
            })
        })
        .collect();
    check(
        "plot-matrix-lab-ipc.svg",
        &latscope::report::plot::matrix_svg("lab ipc", &rows),
    );
}
