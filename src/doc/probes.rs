//! The `probes` document: the USDT probes of files (`latscope probes --format json`).

use serde::{Deserialize, Serialize};

use super::{Kind, VERSION};
use crate::probe::UsdtProbe;

/// The probes of one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeFile {
    /// the file
    pub path: String,
    /// its probes
    pub probes: Vec<UsdtProbe>,
}

/// The `probes` document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbesDoc {
    /// `probes`
    pub kind: Kind,
    /// format version
    pub version: u32,
    /// per file
    pub files: Vec<ProbeFile>,
}

impl ProbesDoc {
    /// The document of `files`.
    pub fn new(files: Vec<ProbeFile>) -> ProbesDoc {
        ProbesDoc {
            kind: Kind::Probes,
            version: VERSION,
            files,
        }
    }
}
