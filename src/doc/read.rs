//! Reading any saved result: latscope's documents (typed, checked), bpftrace's `-f json` output
//! and HdrHistogram interval logs (imported as items).

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{Document, Item, Kind, VERSION, import, items};

/// Why a saved result cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum DocError {
    /// Not JSON, or a value of the wrong type.
    #[error("{file}:{line}:{column}: {reason}")]
    Json {
        /// file
        file: String,
        /// line of the error
        line: usize,
        /// column of the error
        column: usize,
        /// what serde said
        reason: String,
    },
    /// JSON without a `"kind"`.
    #[error(
        "{file}: not a latscope result (it has no \"kind\"; bpftrace -f json output and .hlog files are read too)"
    )]
    NoKind {
        /// file
        file: String,
    },
    /// A kind this latscope does not know.
    #[error("{file}: unknown kind \"{kind}\" (this latscope reads {known})")]
    UnknownKind {
        /// file
        file: String,
        /// what it said
        kind: String,
        /// the kinds known
        known: String,
    },
    /// Written by a newer latscope, or with no version.
    #[error(
        "{file}: a {kind} document of version {found}; this latscope reads versions 1 to {VERSION} (re-create it with this latscope, or use the newer one)"
    )]
    Version {
        /// file
        file: String,
        /// its kind
        kind: &'static str,
        /// its version (0: none given)
        found: u64,
    },
    /// A field the model does not have.
    #[error(
        "{file}: unknown field {path} in a {kind} document (a typo, or written by another program)"
    )]
    UnknownField {
        /// file
        file: String,
        /// its kind
        kind: &'static str,
        /// where, e.g. `spans[0].p55`
        path: String,
    },
    /// Well-formed but impossible.
    #[error("{file}: invalid {kind} document: {reason}")]
    Invalid {
        /// file
        file: String,
        /// its kind
        kind: &'static str,
        /// what is wrong
        reason: String,
    },
    /// A document with nothing to compare, plot or export.
    #[error("{file}: a {kind} document holds no latency to compare, plot or export")]
    NoLatency {
        /// file
        file: String,
        /// its kind
        kind: &'static str,
    },
}

impl DocError {
    fn json(file: &str, e: &serde_json::Error) -> DocError {
        // serde_json puts " at line L column C" at the end of its message: we lead with it.
        let reason = e.to_string();
        let reason = reason
            .rsplit_once(" at line ")
            .map_or(reason.clone(), |(r, _)| r.to_string());
        let reason = match e.classify() {
            serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
                format!("not JSON: {reason}")
            }
            _ => reason,
        };
        DocError::Json {
            file: file.to_string(),
            line: e.line(),
            column: e.column(),
            reason,
        }
    }
}

#[derive(Deserialize)]
struct Header {
    kind: Option<String>,
    version: Option<u64>,
}

/// Reads one latscope document: the kind and version are checked first, then the whole
/// document is deserialized into its type, unknown fields are refused and the statistics are
/// checked. The text is parsed once, into a JSON value that the typed document is read from
/// (and compared with, for unknown fields); only an error is parsed again from the text, for
/// its line and column.
pub fn read(file: &str, text: &str) -> Result<Document, DocError> {
    let input: Value = serde_json::from_str(text).map_err(|e| DocError::json(file, &e))?;
    let header: Header = typed(file, text, &input)?;
    let name = header
        .kind
        .ok_or_else(|| DocError::NoKind { file: file.into() })?;
    let kind = Kind::from_name(&name).ok_or_else(|| DocError::UnknownKind {
        file: file.into(),
        kind: name.clone(),
        known: Kind::ALL.map(Kind::name).join(", "),
    })?;
    match header.version {
        Some(v) if (1..=u64::from(VERSION)).contains(&v) => {}
        other => {
            return Err(DocError::Version {
                file: file.into(),
                kind: kind.name(),
                found: other.unwrap_or(0),
            });
        }
    }
    let mut doc = match kind {
        Kind::Spans => Document::Spans(typed(file, text, &input)?),
        Kind::Bench => Document::Bench(typed(file, text, &input)?),
        Kind::LabIpc => Document::LabIpc(typed(file, text, &input)?),
        Kind::LabX11 => Document::LabX11(typed(file, text, &input)?),
        Kind::LabQueue => Document::LabQueue(typed(file, text, &input)?),
        Kind::LabWayland => Document::LabWayland(typed(file, text, &input)?),
        Kind::LabGpu => Document::LabGpu(typed(file, text, &input)?),
        Kind::Compare => Document::Compare(typed(file, text, &input)?),
        Kind::Probes => Document::Probes(typed(file, text, &input)?),
    };
    if doc.kind() != kind {
        // Each type's `kind` field is the enum: a document can only deserialize as its own kind
        // here if it says so. Kept as a check, not an assumption.
        return Err(DocError::Invalid {
            file: file.into(),
            kind: kind.name(),
            reason: "kind does not match".into(),
        });
    }
    if let Some(path) = unknown_field_of(input, &mut doc) {
        return Err(DocError::UnknownField {
            file: file.into(),
            kind: kind.name(),
            path,
        });
    }
    doc.check().map_err(|reason| DocError::Invalid {
        file: file.into(),
        kind: kind.name(),
        reason,
    })?;
    Ok(doc)
}

/// The first field of `input` that `doc` did not keep. A spans document's records (up to
/// `--max-spans`, hundreds of thousands) are closed types that serde already checked: they are
/// set aside rather than compared with a serialization of each.
fn unknown_field_of(mut input: Value, doc: &mut Document) -> Option<String> {
    let Document::Spans(spans) = doc else {
        return unknown_field(&input, &doc.to_value()).map(|path| path_text(&path));
    };
    let records = std::mem::take(&mut spans.records);
    let slowest = std::mem::take(&mut spans.slowest);
    if let Value::Object(fields) = &mut input {
        for key in ["records", "slowest"] {
            fields.remove(key);
        }
    }
    let found = unknown_field(&input, &doc.to_value()).map(|path| path_text(&path));
    if let Document::Spans(spans) = doc {
        spans.records = records;
        spans.slowest = slowest;
    }
    found
}

/// `T` read from the parsed `input`; when it is not a `T`, the text is parsed again for the
/// error's line and column (a value has none).
fn typed<T: DeserializeOwned>(file: &str, text: &str, input: &Value) -> Result<T, DocError> {
    T::deserialize(input)
        .or_else(|_| serde_json::from_str(text).map_err(|e| DocError::json(file, &e)))
}

/// One step of a path into a JSON value.
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// The first key of `input` that the typed document did not keep (it was not deserialized into
/// any field), as its path from the innermost step out. Works through flattened fields, which
/// serde's `deny_unknown_fields` cannot. The path is only built for the key found.
fn unknown_field<'a>(input: &'a Value, kept: &Value) -> Option<Vec<Step<'a>>> {
    match (input, kept) {
        (Value::Object(a), Value::Object(b)) => a.iter().find_map(|(key, value)| {
            let mut path = match b.get(key) {
                None => Vec::new(),
                Some(k) => unknown_field(value, k)?,
            };
            path.push(Step::Key(key));
            Some(path)
        }),
        (Value::Array(a), Value::Array(b)) => {
            a.iter().zip(b).enumerate().find_map(|(i, (x, y))| {
                let mut path = unknown_field(x, y)?;
                path.push(Step::Index(i));
                Some(path)
            })
        }
        _ => None,
    }
}

/// `spans[0].p55` for the steps of [`unknown_field`].
fn path_text(steps: &[Step]) -> String {
    let mut text = String::new();
    for step in steps.iter().rev() {
        match step {
            Step::Key(key) if text.is_empty() => text.push_str(key),
            Step::Key(key) => {
                text.push('.');
                text.push_str(key);
            }
            Step::Index(i) => text.push_str(&format!("[{i}]")),
        }
    }
    text
}

/// A saved result of any kind, with its comparable items.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// `spans`, `bench`, ... or `bpftrace`, `hlog` for imported files
    pub kind: String,
    /// the document, when it is latscope's
    pub document: Option<Document>,
    /// what compare, report, plot and export work on
    pub items: Vec<Item>,
}

/// Reads any saved result: a latscope document, bpftrace `-f json` output, or an HdrHistogram
/// interval log (by its first line or a `.hlog` name).
pub fn load(file: &str, text: &str) -> Result<Loaded, DocError> {
    let first = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    if first.starts_with('#') || first.starts_with("Tag=") || file.ends_with(".hlog") {
        return Ok(Loaded {
            kind: super::IMPORTED[1].into(),
            document: None,
            items: import::hlog(file, text)?,
        });
    }
    if first.starts_with('{') && first.contains("\"type\"") && !first.contains("\"kind\"") {
        return Ok(Loaded {
            kind: super::IMPORTED[0].into(),
            document: None,
            items: import::bpftrace(file, text)?,
        });
    }
    let doc = read(file, text)?;
    Ok(Loaded {
        kind: doc.kind().name().to_string(),
        items: items(file, &doc)?,
        document: Some(doc),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        read("f.json", text).unwrap_err().to_string()
    }

    #[test]
    fn unknown_kinds_and_newer_versions_are_refused_by_name() {
        assert!(
            err(r#"{"kind":"flamegraph","version":1}"#).contains("unknown kind \"flamegraph\"")
        );
        let e = err(r#"{"kind":"spans","version":2}"#);
        assert!(
            e.contains("spans document of version 2") && e.contains("versions 1 to 1"),
            "{e}"
        );
        assert!(err(r#"{"kind":"spans"}"#).contains("version 0"));
        assert!(err(r#"{"version":1}"#).contains("no \"kind\""));
    }

    #[test]
    fn parse_errors_give_the_file_and_line() {
        let e = err("{\"kind\":\"spans\",\n\"version\":1,\n\"unit\": }");
        assert!(e.starts_with("f.json:3:"), "{e}");
    }

    #[test]
    fn negative_huge_and_nan_counts_are_refused() {
        let doc = |count: &str| {
            format!(
                r#"{{"kind":"probes","version":1,"files":[{{"path":"x","probes":[{{"provider":"p","name":"n","address":{count},"semaphore":null,"arguments":[]}}]}}]}}"#
            )
        };
        assert!(read("f", &doc("1")).is_ok());
        for bad in ["-5", "1e300", "\"NaN\"", "1.5"] {
            assert!(read("f", &doc(bad)).is_err(), "{bad}");
        }
    }

    fn spans_doc(records: &str) -> String {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/docs/spans-wayland.json"
        ))
        .unwrap();
        let end = text.rfind('}').unwrap();
        format!("{},\n\"records\":[\n{records}]}}", &text[..end])
    }

    #[test]
    fn span_records_are_read_and_an_unknown_field_in_one_is_refused_with_its_line() {
        let good = r#"{"span":"a","group":null,"start_ns":5,"latency_ns":7}"#;
        let Document::Spans(doc) = read("s.json", &spans_doc(good)).unwrap() else {
            panic!("not spans")
        };
        assert_eq!(doc.records.len(), 1);
        assert_eq!(doc.records[0].latency_ns, 7);
        let bad = r#"{"span":"a","group":null,"start_ns":5,"latency_ns":7,"colour":"red"}"#;
        let text = spans_doc(bad);
        let line = text.lines().count();
        let e = read("s.json", &text).unwrap_err().to_string();
        assert!(e.starts_with(&format!("s.json:{line}:")), "{e}");
        assert!(e.contains("unknown field `colour`"), "{e}");
    }

    #[test]
    fn unknown_fields_beside_span_records_are_still_refused() {
        let good = r#"{"span":"a","group":null,"start_ns":5,"latency_ns":7}"#;
        let text = spans_doc(good).replacen("\"spans\":", "\"colour\":1,\"spans\":", 1);
        assert!(err_of(&text).contains("unknown field colour"));
    }

    fn err_of(text: &str) -> String {
        read("s.json", text).unwrap_err().to_string()
    }

    #[test]
    fn unknown_fields_are_refused_with_their_path() {
        let e = err(
            r#"{"kind":"probes","version":1,"files":[{"path":"x","probes":[],"colour":"red"}]}"#,
        );
        assert!(e.contains("unknown field files[0].colour"), "{e}");
    }
}
