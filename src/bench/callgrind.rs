//! Exact instruction counts with valgrind's callgrind, for machines without a PMU.
//!
//! callgrind counts the instructions it executes, so the figure is the same on every run and
//! whatever else the machine does; it is many times slower than a native run, so each command
//! runs under it once.

use std::process::Command;

/// Instructions executed by `argv` (and its children), from callgrind's `Collected :` line.
pub fn instructions(argv: &[String]) -> Result<u64, String> {
    let out = Command::new("valgrind")
        .args([
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            "--trace-children=yes",
            "--",
        ])
        .args(argv)
        .output()
        .map_err(|e| format!("cannot run valgrind ({e}): install the Debian package valgrind"))?;
    let text = String::from_utf8_lossy(&out.stderr);
    let total: u64 = text.lines().filter_map(collected).sum();
    if total == 0 {
        return Err(format!(
            "callgrind reported no instruction count for '{}': {}",
            argv.join(" "),
            text.lines().last().unwrap_or("")
        ));
    }
    Ok(total)
}

/// `==123== Collected : 4242` → 4242 (one line per process when children are traced).
fn collected(line: &str) -> Option<u64> {
    let rest = line.split("Collected :").nth(1)?;
    rest.split_whitespace()
        .next()?
        .replace(',', "")
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_collected_line_is_read() {
        assert_eq!(collected("==4242== Collected : 1234567"), Some(1_234_567));
        assert_eq!(collected("==4242== I   refs:      1,234,567"), None);
    }
}
