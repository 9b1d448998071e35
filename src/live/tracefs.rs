//! The kernel's side of the checks: tracefs (found, or mounted), a tracepoint's `format`, and
//! whether a kernel function can be kprobed, each failing with the nearest names.

use std::path::{Path, PathBuf};

use super::fields::{Formats, TpField, parse_format};
use super::spec::Probe;

/// Why a kernel probe cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TracefsError {
    /// No tracefs, and it could not be mounted.
    #[error(
        "tracefs is not mounted and could not be mounted ({0}): as root, run `mount -t tracefs nodev /sys/kernel/tracing`"
    )]
    NotMounted(String),
    /// The tracepoint does not exist.
    #[error("{probe}: no such tracepoint; {hint}")]
    UnknownTracepoint {
        /// the probe
        probe: String,
        /// nearest names
        hint: String,
    },
    /// The function cannot be kprobed.
    #[error("{probe}: no kernel function '{func}' can be probed; {hint}")]
    UnknownFunction {
        /// the probe
        probe: String,
        /// the function
        func: String,
        /// nearest names
        hint: String,
    },
    /// A tracefs file could not be read.
    #[error("cannot read {path}: {reason}")]
    Read {
        /// the file
        path: String,
        /// why
        reason: String,
    },
}

/// Where tracefs is: its mount point from `/proc/mounts`, else the usual places; mounted at
/// `/sys/kernel/tracing` when missing (root only).
pub fn root() -> Result<PathBuf, TracefsError> {
    if let Some(found) = find() {
        return Ok(found);
    }
    let target = Path::new("/sys/kernel/tracing");
    let c = |s: &str| std::ffi::CString::new(s).expect("no NUL");
    let (source, dir, fstype) = (c("nodev"), c("/sys/kernel/tracing"), c("tracefs"));
    // SAFETY: the three strings are NUL-terminated and live across the call; no data pointer.
    let rc = unsafe {
        libc::mount(
            source.as_ptr(),
            dir.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(TracefsError::NotMounted(
            std::io::Error::last_os_error().to_string(),
        ));
    }
    eprintln!("latscope: mounted tracefs at {}", target.display());
    find().ok_or_else(|| TracefsError::NotMounted("no events after mounting".into()))
}

fn find() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let mounted = mounts.lines().filter_map(|l| {
        let mut f = l.split_whitespace();
        let (_, dir, fstype) = (f.next()?, f.next()?, f.next()?);
        (fstype == "tracefs").then(|| PathBuf::from(dir))
    });
    let usual = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"].map(PathBuf::from);
    mounted.chain(usual).find(|p| p.join("events").is_dir())
}

fn read(path: &Path) -> Result<String, TracefsError> {
    std::fs::read_to_string(path).map_err(|e| TracefsError::Read {
        path: path.display().to_string(),
        reason: e.to_string(),
    })
}

fn hint(wanted: &str, names: &[String]) -> String {
    let near: Vec<&str> = crate::probe::nearest(wanted, names.iter().map(String::as_str))
        .into_iter()
        .take(6)
        .collect();
    if near.is_empty() {
        "the kernel lists none".to_string()
    } else {
        format!("nearest: {}", near.join(", "))
    }
}

/// The fields of every tracepoint among `probes`, checking that each exists.
pub fn formats<'p>(probes: impl IntoIterator<Item = &'p Probe>) -> Result<Formats, TracefsError> {
    let mut formats = Formats::new();
    let mut root_dir: Option<PathBuf> = None;
    for probe in probes {
        let Probe::Tracepoint { subsys, name } = probe else {
            continue;
        };
        let key = (subsys.clone(), name.clone());
        if formats.contains_key(&key) {
            continue;
        }
        let dir = match &root_dir {
            Some(d) => d.clone(),
            None => root_dir.insert(root()?).clone(),
        };
        let file = dir.join("events").join(subsys).join(name).join("format");
        if !file.is_file() {
            let events = read(&dir.join("available_events")).unwrap_or_default();
            let names: Vec<String> = events.lines().map(str::to_string).collect();
            return Err(TracefsError::UnknownTracepoint {
                probe: probe.to_string(),
                hint: hint(&format!("{subsys}:{name}"), &names),
            });
        }
        let fields: Vec<TpField> = parse_format(&read(&file)?);
        formats.insert(key, Some(fields));
    }
    Ok(formats)
}

/// The formats that can be read, without failing (`--print-program`: fields of tracepoints
/// that cannot be read are left unchecked).
pub fn formats_if_readable<'p>(probes: impl IntoIterator<Item = &'p Probe>) -> Formats {
    let dir = find();
    probes
        .into_iter()
        .filter_map(|p| match p {
            Probe::Tracepoint { subsys, name } => Some((subsys.clone(), name.clone())),
            _ => None,
        })
        .map(|(subsys, name)| {
            let fields = dir
                .as_ref()
                .and_then(|d| {
                    std::fs::read_to_string(
                        d.join("events").join(&subsys).join(&name).join("format"),
                    )
                    .ok()
                })
                .map(|t| parse_format(&t));
            ((subsys, name), fields)
        })
        .collect()
}

/// The kernel function of a kprobe or kretprobe can be probed: it is listed in tracefs's
/// `available_filter_functions` (or, without it, `/proc/kallsyms`).
pub fn kernel_function(probe: &Probe) -> Result<(), TracefsError> {
    let (Probe::Kprobe { func } | Probe::Kretprobe { func }) = probe else {
        return Ok(());
    };
    let listed = root()
        .ok()
        .and_then(|d| std::fs::read_to_string(d.join("available_filter_functions")).ok());
    let names: Vec<String> = match listed {
        Some(text) => text
            .lines()
            .filter_map(|l| l.split_whitespace().next().map(str::to_string))
            .collect(),
        None => read(Path::new("/proc/kallsyms"))?
            .lines()
            .filter_map(|l| l.split_whitespace().nth(2).map(str::to_string))
            .collect(),
    };
    if names.iter().any(|n| n == func) {
        return Ok(());
    }
    Err(TracefsError::UnknownFunction {
        probe: probe.to_string(),
        func: func.clone(),
        hint: hint(func, &names),
    })
}
