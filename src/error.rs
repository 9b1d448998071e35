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

/// A name that is none of a set's (`--group bogus`), with the names there are: what the
/// `FromStr` of an enum that owns its names says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} '{name}' (expected {expected})")]
pub struct UnknownName {
    /// what the set is (`grouping`)
    pub what: &'static str,
    /// the name given
    pub name: String,
    /// the names there are, comma-separated
    pub expected: String,
}

impl UnknownName {
    /// The value of `all` whose `name` is `text`, else the error naming them all.
    pub fn find<T: Copy>(
        all: &[T],
        name: impl Fn(T) -> &'static str,
        what: &'static str,
        text: &str,
    ) -> Result<T, UnknownName> {
        all.iter()
            .copied()
            .find(|v| name(*v) == text)
            .ok_or_else(|| UnknownName {
                what,
                name: text.to_string(),
                expected: all.iter().map(|v| name(*v)).collect::<Vec<_>>().join(", "),
            })
    }
}
