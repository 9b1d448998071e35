//! CPU counters through `perf_event_open(2)`, opened on a child before it execs.
//!
//! Each event is its own counter (no group, so one unsupported event never takes the others
//! down) with `inherit` (threads and children count too), `enable_on_exec` (counting starts
//! at the child's `execve`, not during latscope's fork), and `exclude_hv`. Values are scaled for
//! multiplexing with `time_enabled / time_running`.
//!
//! Written directly on the syscall rather than with the perf-event crate, because the crate
//! does not expose opening on a stopped, not-yet-exec'd child with `enable_on_exec`, which is
//! the whole point here; the code is one struct and three calls.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A counter to open.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Event {
    /// name as shown (`instructions`, `r00c0`, ...)
    pub name: String,
    /// perf_event_attr.type
    pub kind: u32,
    /// perf_event_attr.config
    pub config: u64,
}

const PERF_TYPE_HARDWARE: u32 = 0;
const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_TYPE_RAW: u32 = 4;

/// perf's generic event names.
const NAMED: &[(&str, u32, u64)] = &[
    ("cycles", PERF_TYPE_HARDWARE, 0),
    ("cpu-cycles", PERF_TYPE_HARDWARE, 0),
    ("instructions", PERF_TYPE_HARDWARE, 1),
    ("cache-references", PERF_TYPE_HARDWARE, 2),
    ("cache-misses", PERF_TYPE_HARDWARE, 3),
    ("branches", PERF_TYPE_HARDWARE, 4),
    ("branch-instructions", PERF_TYPE_HARDWARE, 4),
    ("branch-misses", PERF_TYPE_HARDWARE, 5),
    ("bus-cycles", PERF_TYPE_HARDWARE, 6),
    ("stalled-cycles-frontend", PERF_TYPE_HARDWARE, 7),
    ("stalled-cycles-backend", PERF_TYPE_HARDWARE, 8),
    ("ref-cycles", PERF_TYPE_HARDWARE, 9),
    ("cpu-clock", PERF_TYPE_SOFTWARE, 0),
    ("task-clock", PERF_TYPE_SOFTWARE, 1),
    ("page-faults", PERF_TYPE_SOFTWARE, 2),
    ("faults", PERF_TYPE_SOFTWARE, 2),
    ("context-switches", PERF_TYPE_SOFTWARE, 3),
    ("cs", PERF_TYPE_SOFTWARE, 3),
    ("cpu-migrations", PERF_TYPE_SOFTWARE, 4),
    ("migrations", PERF_TYPE_SOFTWARE, 4),
    ("minor-faults", PERF_TYPE_SOFTWARE, 5),
    ("major-faults", PERF_TYPE_SOFTWARE, 6),
    ("alignment-faults", PERF_TYPE_SOFTWARE, 7),
    ("emulation-faults", PERF_TYPE_SOFTWARE, 8),
];

/// The default set (as `perf stat`): software counters first, then hardware ones.
pub const DEFAULT_EVENTS: [&str; 8] = [
    "task-clock",
    "context-switches",
    "cpu-migrations",
    "page-faults",
    "instructions",
    "cycles",
    "branches",
    "branch-misses",
];

/// Where the kernel describes its PMUs.
pub const SYSFS_PMUS: &str = "/sys/bus/event_source/devices";

/// Parses an event name: a perf generic name, a hardware cache event (`L1-dcache-load-misses`),
/// raw `rNNNN` (hex), or a PMU event from sysfs (`cpu/event=0x3c,umask=0x00/`, or a name listed
/// in a PMU's `events/` directory).
pub fn parse_event(name: &str) -> Result<Event, String> {
    parse_event_with(name, std::path::Path::new(SYSFS_PMUS))
}

/// [`parse_event`] with the sysfs PMU directory given (for tests).
pub fn parse_event_with(name: &str, pmus: &std::path::Path) -> Result<Event, String> {
    if let Some(&(n, kind, config)) = NAMED.iter().find(|(n, _, _)| *n == name) {
        return Ok(Event {
            name: n.to_string(),
            kind,
            config,
        });
    }
    if let Some(config) = cache_event(name) {
        return Ok(Event {
            name: name.to_string(),
            kind: PERF_TYPE_HW_CACHE,
            config,
        });
    }
    if let Some(hex) = name.strip_prefix('r')
        && let Ok(config) = u64::from_str_radix(hex, 16)
    {
        return Ok(Event {
            name: name.to_string(),
            kind: PERF_TYPE_RAW,
            config,
        });
    }
    if let Some(event) = sysfs_event(name, pmus)? {
        return Ok(event);
    }
    let names: Vec<&str> = NAMED.iter().map(|(n, _, _)| *n).collect();
    Err(format!(
        "unknown event '{name}': use one of {}, a cache event like L1-dcache-load-misses, a raw event rNNNN (hex), or a PMU event PMU/event=0x..,umask=0x../ from {SYSFS_PMUS}",
        names.join(", ")
    ))
}

const PERF_TYPE_HW_CACHE: u32 = 3;

/// `L1-dcache-load-misses` → `cache | op << 8 | result << 16` (perf's hardware cache events).
fn cache_event(name: &str) -> Option<u64> {
    const CACHES: [(&str, u64); 7] = [
        ("L1-dcache", 0),
        ("L1-icache", 1),
        ("LLC", 2),
        ("dTLB", 3),
        ("iTLB", 4),
        ("branch", 5),
        ("node", 6),
    ];
    const OPS: [(&str, u64); 3] = [("loads", 0), ("stores", 1), ("prefetches", 2)];
    const OPS_SINGULAR: [(&str, u64); 3] = [("load", 0), ("store", 1), ("prefetch", 2)];
    let (cache, id) = CACHES
        .iter()
        .find(|(c, _)| name.starts_with(&format!("{c}-")))?;
    let rest = &name[cache.len() + 1..];
    if let Some(&(_, op)) = OPS.iter().find(|(o, _)| rest == *o) {
        return Some(id | op << 8);
    }
    let (op_name, result) = rest.split_once('-')?;
    let &(_, op) = OPS_SINGULAR.iter().find(|(o, _)| *o == op_name)?;
    (result == "misses").then_some(id | op << 8 | 1 << 16)
}

/// A PMU event: `PMU/term=value,.../` or a name from some PMU's `events/` directory. `Ok(None)`
/// when the name is not of that form or names nothing in sysfs.
fn sysfs_event(name: &str, pmus: &std::path::Path) -> Result<Option<Event>, String> {
    let (pmu, terms) = match name.strip_suffix('/').and_then(|n| n.split_once('/')) {
        Some((pmu, terms)) => (pmu.to_string(), terms.to_string()),
        None => {
            // A bare name: look for it in every PMU's events directory.
            let found = std::fs::read_dir(pmus)
                .into_iter()
                .flatten()
                .filter_map(Result::ok)
                .find(|d| d.path().join("events").join(name).is_file());
            let Some(dir) = found else { return Ok(None) };
            let terms = std::fs::read_to_string(dir.path().join("events").join(name))
                .map_err(|e| e.to_string())?;
            (
                dir.file_name().to_string_lossy().into_owned(),
                terms.trim().to_string(),
            )
        }
    };
    let dir = pmus.join(&pmu);
    let kind: u32 = std::fs::read_to_string(dir.join("type"))
        .map_err(|_| format!("no PMU '{pmu}' in {}", pmus.display()))?
        .trim()
        .parse()
        .map_err(|_| format!("PMU '{pmu}' has an unreadable type"))?;
    // A term may itself be an event alias of this PMU (`cpu/cpu-cycles/`).
    let terms = match std::fs::read_to_string(dir.join("events").join(&terms)) {
        Ok(alias) => alias.trim().to_string(),
        Err(_) => terms,
    };
    let mut config = 0u64;
    for term in terms.split(',').filter(|t| !t.is_empty()) {
        let (field, value) = term.split_once('=').unwrap_or((term, "1"));
        let value =
            parse_number(value).ok_or_else(|| format!("'{term}' in '{name}': not a number"))?;
        let format = std::fs::read_to_string(dir.join("format").join(field)).map_err(|_| {
            format!(
                "PMU '{pmu}' has no field '{field}' (see {}/format)",
                dir.display()
            )
        })?;
        config |= place(value, format.trim()).ok_or_else(|| {
            format!("field '{field}' of PMU '{pmu}' is not a config field: {format}")
        })?;
    }
    Ok(Some(Event {
        name: name.to_string(),
        kind,
        config,
    }))
}

fn parse_number(text: &str) -> Option<u64> {
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// Places `value` into the bits a sysfs format gives: `config:0-7`, `config:21`, `config:0-7,32-35`.
fn place(mut value: u64, format: &str) -> Option<u64> {
    let ranges = format.strip_prefix("config:")?;
    let mut config = 0;
    for range in ranges.split(',') {
        let (lo, hi) = match range.split_once('-') {
            Some((lo, hi)) => (lo.parse::<u32>().ok()?, hi.parse::<u32>().ok()?),
            None => (range.parse().ok()?, range.parse().ok()?),
        };
        let width = hi - lo + 1;
        let mask = if width >= 64 {
            u64::MAX
        } else {
            (1u64 << width) - 1
        };
        config |= (value & mask) << lo;
        value = value.checked_shr(width).unwrap_or(0);
    }
    Some(config)
}

/// `struct perf_event_attr`, first version (64 bytes), which every kernel accepts.
#[repr(C)]
#[derive(Default)]
struct Attr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

const FLAG_DISABLED: u64 = 1 << 0;
const FLAG_INHERIT: u64 = 1 << 1;
const FLAG_EXCLUDE_HV: u64 = 1 << 6;
const FLAG_ENABLE_ON_EXEC: u64 = 1 << 12;
const FORMAT_TOTAL_TIME_ENABLED: u64 = 1;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
const FORMAT_TOTAL_TIME_RUNNING: u64 = 2;

/// An open counter.
#[derive(Debug)]
pub struct Counter {
    fd: OwnedFd,
}

/// Opens `event` on process `pid` (which has not exec'd yet), to start counting at its exec.
pub fn open(event: &Event, pid: i32) -> io::Result<Counter> {
    let attr = Attr {
        kind: event.kind,
        size: std::mem::size_of::<Attr>() as u32,
        config: event.config,
        read_format: FORMAT_TOTAL_TIME_ENABLED | FORMAT_TOTAL_TIME_RUNNING,
        flags: FLAG_DISABLED | FLAG_INHERIT | FLAG_EXCLUDE_HV | FLAG_ENABLE_ON_EXEC,
        ..Attr::default()
    };
    // SAFETY: attr is a valid perf_event_attr of the size it declares; the kernel only reads it.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const Attr,
            pid,
            -1i32,
            -1i32,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the syscall returned a new file descriptor that nothing else owns.
    Ok(Counter {
        fd: unsafe { OwnedFd::from_raw_fd(fd as i32) },
    })
}

impl Counter {
    /// The count, scaled for the time the counter was not scheduled (multiplexing).
    pub fn read(&self) -> io::Result<u64> {
        let mut buf = [0u64; 3];
        // SAFETY: reading into a buffer of exactly the size given.
        let n = unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                std::mem::size_of_val(&buf),
            )
        };
        if n != std::mem::size_of_val(&buf) as isize {
            return Err(io::Error::last_os_error());
        }
        let [value, enabled, running] = buf;
        Ok(if running == 0 || running == enabled {
            value
        } else {
            (u128::from(value) * u128::from(enabled) / u128::from(running)) as u64
        })
    }
}

/// Explains why an event cannot be counted here.
pub fn unsupported_reason(event: &Event, error: &io::Error) -> String {
    match error.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) | Some(libc::ENODEV) if event.kind != PERF_TYPE_SOFTWARE => {
            "not supported: this machine exposes no hardware PMU (a virtual machine?); use --instructions=callgrind for exact instruction counts".to_string()
        }
        Some(libc::EACCES) | Some(libc::EPERM) => {
            "not permitted: run as root or lower /proc/sys/kernel/perf_event_paranoid".to_string()
        }
        _ => format!("not supported: {error}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_names_and_raw_events_parse() {
        assert_eq!(parse_event("instructions").unwrap().config, 1);
        assert_eq!(
            parse_event("cs").unwrap(),
            Event {
                name: "cs".into(),
                kind: PERF_TYPE_SOFTWARE,
                config: 3
            }
        );
        assert_eq!(
            parse_event("r00c0").unwrap(),
            Event {
                name: "r00c0".into(),
                kind: PERF_TYPE_RAW,
                config: 0xc0
            }
        );
        let err = parse_event("instrs").unwrap_err();
        assert!(err.contains("instructions"), "{err}");
    }

    #[test]
    fn cache_events_encode_cache_operation_and_result() {
        let e = parse_event("L1-dcache-load-misses").unwrap();
        assert_eq!((e.kind, e.config), (PERF_TYPE_HW_CACHE, 0x1_00_00));
        assert_eq!(parse_event("LLC-stores").unwrap().config, 2 | 1 << 8);
        assert_eq!(parse_event("dTLB-load-misses").unwrap().config, 3 | 1 << 16);
    }

    #[test]
    fn pmu_events_are_read_from_sysfs_formats() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let cpu = root.join("cpu");
        std::fs::create_dir_all(cpu.join("format")).unwrap();
        std::fs::create_dir_all(cpu.join("events")).unwrap();
        std::fs::write(cpu.join("type"), "4\n").unwrap();
        std::fs::write(cpu.join("format/event"), "config:0-7\n").unwrap();
        std::fs::write(cpu.join("format/umask"), "config:8-15\n").unwrap();
        std::fs::write(cpu.join("format/cmask"), "config:24-31\n").unwrap();
        std::fs::write(cpu.join("events/topdown-slots"), "event=0x00,umask=0x4\n").unwrap();
        let e = parse_event_with("cpu/event=0x3c,umask=0x01,cmask=2/", &root).unwrap();
        assert_eq!((e.kind, e.config), (4, 0x3c | 0x01 << 8 | 2 << 24));
        assert_eq!(
            parse_event_with("topdown-slots", &root).unwrap().config,
            0x4 << 8
        );
        assert_eq!(
            parse_event_with("cpu/topdown-slots/", &root)
                .unwrap()
                .config,
            0x4 << 8
        );
        let err = parse_event_with("cpu/bogus=1/", &root).unwrap_err();
        assert!(err.contains("no field 'bogus'"), "{err}");
        assert!(
            parse_event_with("amd/event=1/", &root)
                .unwrap_err()
                .contains("no PMU 'amd'")
        );
        assert_eq!(place(0x1ff, "config:0-7,32-35"), Some(0xff | 1 << 32));
    }

    #[test]
    fn the_attribute_struct_has_the_first_abi_size() {
        assert_eq!(std::mem::size_of::<Attr>(), 64);
    }
}
