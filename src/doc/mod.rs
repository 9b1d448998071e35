//! Every document latscope writes, as Rust types, and the one reader for all of them.
//!
//! Why one model: each result kind used to be built by hand with `json!` and read back by
//! indexing `serde_json::Value` with `unwrap_or(0)`, so a renamed field was a hunt the compiler
//! could not help with, a malformed file read as zeros, and a result kind that no reader knew
//! (`lab-ipc`) could not be compared. Now writers build these types, [`read`] deserializes
//! them, and [`items`] turns any of them into the comparable [`Item`]s that `compare`, `report`,
//! `plot` and `export` share. A new result kind costs one type here and one arm in [`items`].
//!
//! Every document has `"kind"` and `"version"`. The reader refuses an unknown kind, a newer
//! version, a field it does not know (a typo or a hand edit would otherwise be ignored
//! silently), a number that does not fit its type (a negative or 1e300 count, `"NaN"`), and
//! statistics that cannot be (percentiles out of order, a mean outside min..max). Every number
//! is in nanoseconds (`"unit": "ns"`). One [`dist::Summary`] shape and one [`dist::Histogram`]
//! shape serve every latency in every kind.

pub mod bench;
pub mod compare;
pub mod dist;
pub mod frames;
mod import;
mod items;
pub mod lab;
pub mod lab_gpu;
pub mod lab_wayland;
pub mod probes;
mod read;
pub mod rule;
pub mod run;
pub mod spans;
pub mod x11;

use serde::{Deserialize, Serialize};

pub use dist::{Bucket, Histogram, Latency, Summary};
pub use items::{Data, Item, items};
pub use read::{DocError, Loaded, load, read};

/// The version of the documents this latscope writes, and the newest it reads.
pub const VERSION: u32 = 1;

/// Results of other tools that [`load`] reads besides latscope's documents: bpftrace `-f json`
/// output and HdrHistogram interval logs (the [`Loaded::kind`] they get).
pub const IMPORTED: [&str; 2] = ["bpftrace", "hlog"];

/// What a document holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// latency spans (`latscope wayland`, `latscope live`)
    Spans,
    /// a benchmark (`latscope bench`)
    Bench,
    /// the IPC lab (`latscope lab ipc`)
    LabIpc,
    /// the queue lab (`latscope lab queue`)
    LabQueue,
    /// the X11 lab (`latscope lab x11`)
    LabX11,
    /// the Wayland lab (`latscope lab wayland`)
    LabWayland,
    /// the GPU lab (`latscope lab gpu`)
    LabGpu,
    /// a comparison (`latscope compare`)
    Compare,
    /// USDT probes (`latscope probes`)
    Probes,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Kind; 9] = [
        Kind::Spans,
        Kind::Bench,
        Kind::LabIpc,
        Kind::LabQueue,
        Kind::LabX11,
        Kind::LabWayland,
        Kind::LabGpu,
        Kind::Compare,
        Kind::Probes,
    ];

    /// The name written in `"kind"`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Spans => "spans",
            Kind::Bench => "bench",
            Kind::LabIpc => "lab-ipc",
            Kind::LabQueue => "lab-queue",
            Kind::LabX11 => "lab-x11",
            Kind::LabWayland => "lab-wayland",
            Kind::LabGpu => "lab-gpu",
            Kind::Compare => "compare",
            Kind::Probes => "probes",
        }
    }

    /// Whether a document of this kind holds latencies (`compare`, `plot`, `report` and
    /// `export` read it): every kind but `probes`.
    pub fn has_latency(self) -> bool {
        self != Kind::Probes
    }

    /// The kind named `name`.
    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// Any document.
#[derive(Debug, Clone, PartialEq)]
pub enum Document {
    /// `spans`
    Spans(spans::SpansDoc),
    /// `bench`
    Bench(bench::BenchDoc),
    /// `lab-ipc`
    LabIpc(lab::LabIpcDoc),
    /// `lab-queue`
    LabQueue(lab::LabQueueDoc),
    /// `lab-x11`
    LabX11(x11::LabX11Doc),
    /// `lab-wayland`
    LabWayland(lab_wayland::LabWaylandDoc),
    /// `lab-gpu`
    LabGpu(lab_gpu::LabGpuDoc),
    /// `compare`
    Compare(compare::CompareDoc),
    /// `probes`
    Probes(probes::ProbesDoc),
}

impl Document {
    /// What it holds.
    pub fn kind(&self) -> Kind {
        match self {
            Document::Spans(_) => Kind::Spans,
            Document::Bench(_) => Kind::Bench,
            Document::LabIpc(_) => Kind::LabIpc,
            Document::LabQueue(_) => Kind::LabQueue,
            Document::LabX11(_) => Kind::LabX11,
            Document::LabWayland(_) => Kind::LabWayland,
            Document::LabGpu(_) => Kind::LabGpu,
            Document::Compare(_) => Kind::Compare,
            Document::Probes(_) => Kind::Probes,
        }
    }

    /// The document as a JSON value.
    pub fn to_value(&self) -> serde_json::Value {
        let value = match self {
            Document::Spans(d) => serde_json::to_value(d),
            Document::Bench(d) => serde_json::to_value(d),
            Document::LabIpc(d) => serde_json::to_value(d),
            Document::LabQueue(d) => serde_json::to_value(d),
            Document::LabX11(d) => serde_json::to_value(d),
            Document::LabWayland(d) => serde_json::to_value(d),
            Document::LabGpu(d) => serde_json::to_value(d),
            Document::Compare(d) => serde_json::to_value(d),
            Document::Probes(d) => serde_json::to_value(d),
        };
        // Only maps with string keys and finite numbers are in these types: this cannot fail.
        value.unwrap_or(serde_json::Value::Null)
    }

    fn check(&self) -> Result<(), String> {
        match self {
            Document::Spans(d) => d.check(),
            Document::Bench(d) => d.check(),
            Document::LabIpc(d) => d.check(),
            Document::LabQueue(d) => d.check(),
            Document::LabX11(d) => d.check(),
            Document::LabWayland(d) => d.check(),
            Document::LabGpu(d) => d.check(),
            Document::Compare(d) => d.check(),
            Document::Probes(_) => Ok(()),
        }
    }
}

/// Writes any document as one line of JSON (indented with `pretty`), ending in a newline.
pub fn to_json<T: Serialize>(doc: &T, pretty: bool) -> String {
    let text = if pretty {
        serde_json::to_string_pretty(doc)
    } else {
        serde_json::to_string(doc)
    };
    // Non-finite floats serialize as null and map keys are strings: this cannot fail.
    let mut text = text.unwrap_or_default();
    text.push('\n');
    text
}

/// `name [group]`, or `name` without a group: how items are named everywhere.
pub fn label(name: &str, group: Option<&str>) -> String {
    match group {
        Some(g) => format!("{name} [{g}]"),
        None => name.to_string(),
    }
}
