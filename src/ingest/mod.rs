//! Reading inputs: a streaming line reader shared by every text format, and one module per
//! format.
//!
//! Formats are pure: they get one line at a time (bytes, not `str`: logs contain invalid UTF-8
//! and must still be read) and hold only the state of what is open. Files, standard input and
//! Ctrl-C are handled here, at the edge.

pub mod chunks;
pub mod compressed;
pub mod drive;
pub mod lines;
pub mod mapped;
pub mod reader;
pub mod source;
pub mod trace;
pub mod wayland;
pub mod words;

pub use lines::{Cancel, ReadSummary};
pub use reader::LineReader;
pub use source::{Source, Stream, open};

/// A read that failed, with what it had read of the input (`S`, its counts) where it knows
/// it: the spans read before the error are kept, and the output says how many lines and
/// events they came from (it said `0 lines` beside them). `None` where what was read is not
/// known (a read error, a format not known).
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct Failed<S, E> {
    /// what was read before the error
    pub read: Option<Box<S>>,
    /// why it stopped
    pub error: E,
}

impl<S, E> Failed<S, E> {
    /// `error`, after `read`.
    pub(crate) fn after(read: S, error: E) -> Failed<S, E> {
        Failed {
            read: Some(Box::new(read)),
            error,
        }
    }
}

impl<S, E> From<E> for Failed<S, E> {
    fn from(error: E) -> Failed<S, E> {
        Failed { read: None, error }
    }
}

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
