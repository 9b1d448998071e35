//! Every kind of document, as committed under tests/data/docs (see its README): read back with
//! unknown fields denied, written back unchanged, compared with itself as `same`, reported,
//! plotted and exported; malformed variants refused with a message that names what is wrong.

use std::path::PathBuf;

use latscope::doc::{self, Document, Kind};
use serde_json::Value;

use crate::util::{self, run, stderr, stdout, write};

fn committed() -> Vec<(String, PathBuf)> {
    let mut docs: Vec<(String, PathBuf)> = std::fs::read_dir(util::root().join("tests/data/docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), p))
        .collect();
    docs.sort();
    docs
}

#[test]
fn every_kind_of_document_is_committed_and_reads_back_with_unknown_fields_denied() {
    let mut kinds = Vec::new();
    for (name, path) in committed() {
        let text = std::fs::read_to_string(&path).unwrap();
        let doc = doc::read(&name, &text).unwrap_or_else(|e| panic!("{e}"));
        kinds.push(doc.kind());
        // Written back, the document is the same JSON value: no field was dropped or invented.
        let original: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(doc.to_value(), original, "{name} does not round-trip");
    }
    for kind in Kind::ALL {
        assert!(
            kinds.contains(&kind),
            "no committed {} document",
            kind.name()
        );
    }
}

#[test]
fn every_document_compared_with_itself_is_the_same_everywhere() {
    for (name, path) in committed() {
        let p = path.to_str().unwrap();
        let out = run(&["compare", "--format", "json", p, p]);
        if name.starts_with("probes") {
            assert_eq!(out.status.code(), Some(1), "{name}");
            assert!(
                stderr(&out).contains("holds no latency"),
                "{}",
                stderr(&out)
            );
            continue;
        }
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        let Document::Compare(c) = doc::read("out", &stdout(&out)).unwrap() else {
            panic!("not a compare document")
        };
        assert!(!c.items.is_empty(), "{name}: nothing compared");
        for i in &c.items {
            assert_eq!(
                i.change.verdict.name(),
                "same",
                "{name}: {} {}",
                i.label(),
                i.change.reason
            );
        }
    }
}

#[test]
fn every_document_with_latency_is_reported_plotted_and_exported() {
    let dir = tempfile::tempdir().unwrap();
    for (name, path) in committed()
        .into_iter()
        .filter(|(n, _)| !n.starts_with("probes"))
    {
        let p = path.to_str().unwrap();
        let html = dir.path().join(format!("{name}.html"));
        let out = run(&["report", p, "-o", html.to_str().unwrap()]);
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        let page = std::fs::read_to_string(&html).unwrap();
        if name.starts_with("compare") {
            assert!(
                page.contains("<span class=\"verdict same\">same</span>"),
                "{name}"
            );
        } else {
            assert!(page.contains("<svg"), "{name}");
        }
        let svg = dir.path().join(format!("{name}.svg"));
        let out = run(&["plot", p, "-o", svg.to_str().unwrap()]);
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        for to in ["hlog", "bpftrace"] {
            let out = run(&["export", p, "--to", to]);
            assert!(out.status.success(), "{name} --to {to}: {}", stderr(&out));
            assert!(!out.stdout.is_empty(), "{name} --to {to}");
        }
    }
}

/// `path` with `edit` applied to its JSON value.
fn edited(name: &str, edit: impl Fn(&mut Value)) -> String {
    let path = util::root().join("tests/data/docs").join(name);
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    edit(&mut v);
    v.to_string()
}

fn refused(text: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "bad.json", text);
    let f = f.to_str().unwrap();
    let out = run(&["compare", f, f]);
    assert_eq!(out.status.code(), Some(1), "accepted: {text:.300}");
    stderr(&out)
}

/// A committed document, an edit that breaks it, and what the error must say.
type Case<'a> = (&'a str, &'a dyn Fn(&mut Value), &'a str);

#[test]
fn malformed_documents_are_refused_with_what_is_wrong() {
    let cases: [Case; 8] = [
        (
            "lab-ipc.json",
            &|v| v["kind"] = "lab-teletype".into(),
            "unknown kind \"lab-teletype\"",
        ),
        (
            "bench-a.json",
            &|v| v["version"] = 2.into(),
            "bench document of version 2",
        ),
        (
            "spans-wayland.json",
            &|v| v["spans"][0]["p55"] = 1.into(),
            "unknown field spans[0].p55",
        ),
        (
            "spans-wayland.json",
            &|v| v["spans"][0]["count"] = (-5).into(),
            "invalid value",
        ),
        (
            "spans-live.json",
            &|v| v["spans"][0]["p50"] = "NaN".into(),
            "invalid type",
        ),
        (
            "lab-queue.json",
            &|v| v["rows"][0]["latency"]["count"] = 1e300.into(),
            "invalid type",
        ),
        (
            "lab-queue.json",
            &|v| v["rows"][0]["latency"]["min"] = 10_000_000.into(),
            "invalid lab-queue document",
        ),
        (
            "compare.json",
            &|v| v["unit"] = "ms".into(),
            "unknown variant",
        ),
    ];
    for (name, edit, expected) in cases {
        let e = refused(&edited(name, edit));
        assert!(e.contains(expected), "{name}: {e}");
    }
    let text = std::fs::read_to_string(util::root().join("tests/data/docs/bench-a.json")).unwrap();
    let e = refused(&text[..text.len() / 2]);
    assert!(e.contains("bad.json:1:") && e.contains("not JSON"), "{e}");
}

#[test]
fn bench_compare_and_compare_give_the_same_verdicts_on_the_same_files() {
    let dir = util::root().join("tests/data/docs");
    let (a, b) = (dir.join("bench-a.json"), dir.join("bench-b.json"));
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let out = run(&["bench", "-f", "json", "--compare", a, b]);
    assert!(out.status.success(), "{}", stderr(&out));
    // One bench document per command pair, one after another.
    let bench: Vec<(String, String)> = serde_json::Deserializer::from_slice(&out.stdout)
        .into_iter::<Value>()
        .map(|d| {
            let d = d.unwrap();
            let name = d["commands"][0]["name"].as_str().unwrap().to_string();
            let wall = &d["comparisons"][0]["metrics"][0];
            assert_eq!(wall["metric"], "wall");
            (name, wall["verdict"].as_str().unwrap().to_string())
        })
        .collect();
    let out = run(&["compare", "-f", "json", a, b]);
    let Document::Compare(c) = doc::read("c", &stdout(&out)).unwrap() else {
        panic!("not a compare document")
    };
    assert_eq!(bench.len(), c.items.len());
    for (name, verdict) in bench {
        let item = c
            .items
            .iter()
            .find(|i| {
                name.starts_with(
                    i.name
                        .trim_start_matches("wall time of `")
                        .trim_end_matches('`'),
                )
            })
            .unwrap_or_else(|| panic!("{name} not compared"));
        assert_eq!(item.change.verdict.name(), verdict, "{name}");
    }
}
