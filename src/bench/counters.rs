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

/// Parses an event name: a perf generic name, or raw `rNNNN` (hex).
pub fn parse_event(name: &str) -> Result<Event, String> {
    if let Some(&(n, kind, config)) = NAMED.iter().find(|(n, _, _)| *n == name) {
        return Ok(Event {
            name: n.to_string(),
            kind,
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
    let names: Vec<&str> = NAMED.iter().map(|(n, _, _)| *n).collect();
    Err(format!(
        "unknown event '{name}': use one of {} or a raw event rNNNN (hex)",
        names.join(", ")
    ))
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
    fn the_attribute_struct_has_the_first_abi_size() {
        assert_eq!(std::mem::size_of::<Attr>(), 64);
    }
}
