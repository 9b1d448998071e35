//! Reading inputs: a streaming line reader shared by every text format, and one module per
//! format.
//!
//! Formats are pure: they get one line at a time (bytes, not `str`: logs contain invalid UTF-8
//! and must still be read) and hold only the state of what is open. Files, standard input and
//! Ctrl-C are handled here, at the edge.

pub mod chunks;
pub mod compressed;
pub mod lines;
pub mod mapped;
pub mod trace;
pub mod wayland;
pub mod words;

pub use lines::{Cancel, LineReader, ReadSummary};

/// Where a line came from, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// file name as given (`-` is shown as `<stdin>`)
    pub file: String,
    /// 1-based line number
    pub line: u64,
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}
