//! Checks made before tracing starts, each failing with a message that says the fix.

use std::path::{Path, PathBuf};

use object::{Object, ObjectSymbol};

use super::spec::Probe;
use crate::probe::{nearest, read_usdt_probes};

/// What stops a live session from starting.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// bpftrace is not installed.
    #[error(
        "bpftrace is not installed: install the Debian package bpftrace (apt-get install bpftrace)"
    )]
    NoBpftrace,
    /// Not enough privilege to load BPF programs.
    #[error(
        "tracing needs root, or the CAP_BPF and CAP_PERFMON capabilities: run latscope with sudo"
    )]
    NoPrivilege,
    /// The probe's file is missing.
    #[error("{probe}: cannot read '{path}': {reason}")]
    File {
        /// the probe
        probe: String,
        /// its file
        path: String,
        /// why
        reason: String,
    },
    /// The probe does not exist in its file.
    #[error("{probe}: no such {what} in {path}; {hint}")]
    UnknownProbe {
        /// the probe
        probe: String,
        /// "USDT probe" or "function"
        what: &'static str,
        /// its file
        path: String,
        /// the nearest names, or how to list them
        hint: String,
    },
    /// The process to trace does not exist.
    #[error("no process with PID {0} (it may have exited)")]
    NoProcess(u32),
}

/// The bpftrace binary.
pub fn bpftrace() -> Result<PathBuf, CheckError> {
    super::launch::which("bpftrace").ok_or(CheckError::NoBpftrace)
}

/// Root, or CAP_BPF (39) and CAP_PERFMON (38) in the effective set.
pub fn privileges() -> Result<(), CheckError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return Ok(());
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let caps = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or(0);
    if caps & (1 << 39) != 0 && caps & (1 << 38) != 0 {
        Ok(())
    } else {
        Err(CheckError::NoPrivilege)
    }
}

/// The process exists.
pub fn process(pid: u32) -> Result<(), CheckError> {
    if Path::new(&format!("/proc/{pid}")).exists() {
        Ok(())
    } else {
        Err(CheckError::NoProcess(pid))
    }
}

/// The probe exists in its file.
pub fn probe(probe: &Probe) -> Result<(), CheckError> {
    let Some(path) = probe.path() else {
        // Kernel probes are checked against tracefs (super::tracefs).
        return Ok(());
    };
    let file_error = |reason: String| CheckError::File {
        probe: probe.to_string(),
        path: path.to_string(),
        reason,
    };
    match probe {
        Probe::Usdt { provider, name, .. } => {
            let probes = read_usdt_probes(path).map_err(|e| file_error(e.to_string()))?;
            if probes
                .iter()
                .any(|p| &p.provider == provider && &p.name == name)
            {
                return Ok(());
            }
            let names: Vec<String> = probes
                .iter()
                .map(|p| format!("{}:{}", p.provider, p.name))
                .collect();
            let wanted = format!("{provider}:{name}");
            Err(unknown(probe, "USDT probe", &wanted, &names))
        }
        Probe::Tracepoint { .. } | Probe::Kprobe { .. } | Probe::Kretprobe { .. } => Ok(()),
        Probe::Uprobe { symbol, .. } | Probe::Uretprobe { symbol, .. } => {
            let data = std::fs::read(path).map_err(|e| file_error(e.to_string()))?;
            let file = object::File::parse(&*data).map_err(|e| file_error(e.to_string()))?;
            let names: Vec<String> = file
                .symbols()
                .chain(file.dynamic_symbols())
                .filter(|s| s.kind() == object::SymbolKind::Text && s.is_definition())
                .filter_map(|s| s.name().ok().map(str::to_string))
                .collect();
            if names.iter().any(|n| n == symbol) {
                return Ok(());
            }
            Err(unknown(probe, "function", symbol, &names))
        }
    }
}

fn unknown(probe: &Probe, what: &'static str, wanted: &str, names: &[String]) -> CheckError {
    let hint = if names.is_empty() {
        format!(
            "the file has no {what}s (latscope probes {} lists USDT probes)",
            probe.path().unwrap_or_default()
        )
    } else {
        let close = nearest(wanted, names.iter().map(String::as_str));
        let shown: Vec<&str> = close.into_iter().take(8).collect();
        format!("nearest: {} ({} in all)", shown.join(", "), names.len())
    };
    CheckError::UnknownProbe {
        probe: probe.to_string(),
        what,
        path: probe.path().unwrap_or_default().to_string(),
        hint,
    }
}
