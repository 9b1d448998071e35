//! The library's errors. Each says which input and, for parse errors, which line.

use crate::ingest::Location;

/// Everything that can go wrong reading an input.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The input could not be opened.
    #[error("cannot open '{file}': {source}")]
    Open {
        /// file name as given
        file: String,
        /// the OS error
        source: std::io::Error,
    },
    /// Reading failed part-way.
    #[error("error reading '{file}': {source}")]
    Read {
        /// file name as given
        file: String,
        /// the OS error
        source: std::io::Error,
    },
    /// A malformed line under `--strict`.
    #[error("{location}: malformed WAYLAND_DEBUG line: {reason}")]
    Malformed {
        /// where
        location: Location,
        /// why
        reason: String,
    },
}
