//! Finding probes: USDT probes in ELF files and in the objects a process has mapped.
//!
//! USDT probes (`sys/sdt.h`'s `DTRACE_PROBE`/`STAP_PROBE`, and LTTng-UST tracepoints built with
//! SDT integration, as Mir's are) are described by `.note.stapsdt` ELF notes: provider, name,
//! the probe address, an optional semaphore, and how to find each argument. Reading them needs
//! no debug info and no running process.

mod process;
mod usdt;

pub use process::mapped_objects;
pub use usdt::{UsdtProbe, read_usdt_probes};

/// Why probes could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The file could not be read.
    #[error("cannot read '{path}': {source}")]
    Read {
        /// file
        path: String,
        /// the OS error
        source: std::io::Error,
    },
    /// Not an ELF object (or a malformed one).
    #[error("'{path}' is not an ELF executable or shared library: {reason}")]
    NotElf {
        /// file
        path: String,
        /// what the ELF reader said
        reason: String,
    },
    /// A `/proc/PID` entry could not be read (no such process, or no permission).
    #[error(
        "cannot read the mappings of process {pid}: {source} (is the PID right, and are you root?)"
    )]
    Process {
        /// the process
        pid: u32,
        /// the OS error
        source: std::io::Error,
    },
}

/// Names from `candidates` ordered by similarity to `wanted` (closest first), for "did you
/// mean" lists: edit distance, ties broken by name.
pub fn nearest<'a>(wanted: &str, candidates: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let mut scored: Vec<(usize, &str)> = candidates
        .into_iter()
        .map(|c| (edit_distance(wanted, c), c))
        .collect();
    scored.sort();
    scored.dedup_by(|a, b| a.1 == b.1);
    scored.into_iter().map(|(_, c)| c).collect()
}

/// Levenshtein distance over bytes.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, &ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let substitution = diagonal + usize::from(ca != cb);
            diagonal = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_counts_insertions_deletions_and_substitutions() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("same", "same"), 0);
    }

    #[test]
    fn nearest_names_come_first() {
        let names = [
            "began_frame",
            "finished_frame",
            "sw_buffer_committed",
            "hw_buffer_committed",
        ];
        assert_eq!(
            nearest("sw_buffer_comitted", names)[..2],
            ["sw_buffer_committed", "hw_buffer_committed"]
        );
    }
}
