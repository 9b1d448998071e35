//! Where the peer runs: a thread of latscope, or a process — a fresh `latscope lab ipc-peer`
//! program, described by a [`PeerSpec`] (D-Bus: it connects to the bus itself) or an
//! [`EndpointPeerSpec`] (the other transports: it is handed its endpoint's descriptors).
//!
//! A process peer (so that a pipe between two processes is what `perf bench sched pipe`
//! measures) is a fresh exec, not a fork that goes on running latscope's code: after a fork in
//! a multi-threaded program only async-signal-safe calls are safe, and the peer allocates,
//! formats its errors and so on. It is started by [`crate::process`] with its descriptors
//! placed at fixed numbers ([`RECORD_FD`], [`SEGMENTS_FD`], [`ENDPOINT_FDS`], [`READY_FD`]); it
//! dies with latscope (`PR_SET_PDEATHSIG`) and ignores Ctrl-C, which the client handles by
//! closing the connection (the binary installs no handler of its own in a peer program, which
//! so also stays single-threaded, as a forked peer was). An endpoint peer says when it is ready to serve (a byte on
//! [`READY_FD`]), and [`start_process`] returns only then, so that the first messages do not
//! wait for the program to load.
//!
//! This module knows where and how a peer runs, not what it does: [`spawn_thread`] takes the
//! peer's work as a function (`run.rs` passes the pattern's `run_peer`, which a peer program
//! runs too), and what the peer measured goes into the shared `Record` (`record.rs`). So it
//! imports neither `pattern.rs` nor `record.rs`, and neither of them imports it: each can be
//! read and changed alone.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, RawFd};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use super::transport::Endpoint;
use super::{Config, PatternKind, Peer, Transport};
use crate::process::{self, Program, Setup};

/// What a D-Bus peer program needs to know, as command-line words (`latscope lab ipc-peer ...`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerSpec {
    /// the bus address
    pub address: String,
    /// the client's unique name
    pub client: String,
    /// the configuration (transport dbus)
    pub config: Config,
    /// warm-up messages
    pub warmup: u64,
    /// full verification
    pub verify: bool,
    /// arrival slots in the record
    pub capacity: u64,
}

/// The descriptor number a peer program finds its record on.
pub const RECORD_FD: i32 = 3;
/// The descriptor number a peer program finds the segments on (segments pattern).
pub const SEGMENTS_FD: i32 = 4;
/// The descriptor numbers an endpoint peer program finds its endpoint's descriptors on (a
/// pipe's or socket's two, a ring's one).
pub const ENDPOINT_FDS: [i32; 2] = [5, 6];
/// The descriptor number an endpoint peer program says it is ready on (one byte).
pub const READY_FD: i32 = 7;

/// The word an [`EndpointPeerSpec`]'s arguments start with.
const ENDPOINT_WORD: &str = "endpoint";

/// What a peer program of a descriptor or shared-memory transport needs to know, as
/// command-line words (`latscope lab ipc-peer endpoint ...`); its endpoint, record and
/// segments come as descriptors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointPeerSpec {
    /// the configuration
    pub config: Config,
    /// warm-up messages
    pub warmup: u64,
    /// full verification
    pub verify: bool,
    /// arrival slots in the record
    pub capacity: u64,
    /// slots of a shared-memory ring
    pub slots: usize,
    /// the largest unit a ring slot holds, bytes
    pub slot_bytes: usize,
}

impl EndpointPeerSpec {
    /// The words after `latscope lab ipc-peer`.
    pub fn to_args(&self) -> Vec<String> {
        let pattern = &self.config.pattern;
        vec![
            ENDPOINT_WORD.to_string(),
            self.config.transport.name().to_string(),
            pattern.kind().to_string(),
            pattern.param().to_string(),
            self.config.payload.to_string(),
            self.warmup.to_string(),
            u8::from(self.verify).to_string(),
            self.capacity.to_string(),
            self.slots.to_string(),
            self.slot_bytes.to_string(),
        ]
    }

    /// Reads [`EndpointPeerSpec::to_args`] back.
    pub fn from_args(args: &[String]) -> Option<EndpointPeerSpec> {
        let [
            word,
            transport,
            kind,
            param,
            payload,
            warmup,
            verify,
            capacity,
            slots,
            slot_bytes,
        ] = args
        else {
            return None;
        };
        if word != ENDPOINT_WORD {
            return None;
        }
        let pattern = PatternKind::from_name(kind)?.with_param(param.parse().ok()?);
        Some(EndpointPeerSpec {
            config: Config {
                transport: Transport::parse(transport)?,
                peer: Peer::Process,
                pattern,
                payload: payload.parse().ok()?,
            },
            warmup: warmup.parse().ok()?,
            verify: verify == "1",
            capacity: capacity.parse().ok()?,
            slots: slots.parse().ok()?,
            slot_bytes: slot_bytes.parse().ok()?,
        })
    }
}

impl PeerSpec {
    /// The words after `latscope lab ipc-peer`.
    pub fn to_args(&self) -> Vec<String> {
        let pattern = &self.config.pattern;
        vec![
            self.address.clone(),
            self.client.clone(),
            pattern.kind().to_string(),
            pattern.param().to_string(),
            self.config.payload.to_string(),
            self.warmup.to_string(),
            u8::from(self.verify).to_string(),
            self.capacity.to_string(),
        ]
    }

    /// Reads [`PeerSpec::to_args`] back.
    pub fn from_args(args: &[String]) -> Option<PeerSpec> {
        let [
            address,
            client,
            kind,
            param,
            payload,
            warmup,
            verify,
            capacity,
        ] = args
        else {
            return None;
        };
        let pattern = PatternKind::from_name(kind)?.with_param(param.parse().ok()?);
        Some(PeerSpec {
            address: address.clone(),
            client: client.clone(),
            config: Config {
                transport: Transport::Dbus,
                peer: Peer::Process,
                pattern,
                payload: payload.parse().ok()?,
            },
            warmup: warmup.parse().ok()?,
            verify: verify == "1",
            capacity: capacity.parse().ok()?,
        })
    }
}

/// A running peer.
#[derive(Debug)]
pub enum PeerHandle {
    /// a thread; the flag is cleared when it ends, however it ends
    Thread(JoinHandle<io::Result<()>>, Arc<AtomicBool>),
    /// a child process
    Process(libc::pid_t),
}

struct Running(Arc<AtomicBool>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Starts the peer on a thread: `work` runs there on `ep`.
pub fn spawn_thread(
    ep: Box<dyn Endpoint + Send>,
    work: impl FnOnce(Box<dyn Endpoint + Send>) -> io::Result<()> + Send + 'static,
) -> io::Result<PeerHandle> {
    let running = Arc::new(AtomicBool::new(true));
    let flag = Running(Arc::clone(&running));
    let handle = std::thread::Builder::new()
        .name("latscope-peer".into())
        .spawn(move || {
            let _flag = flag;
            work(ep)
        })?;
    Ok(PeerHandle::Thread(handle, running))
}

/// Starts the peer program `exe lab ipc-peer ARGS` with `fds` placed at their numbers
/// (`(descriptor, number)`), standard input from `/dev/null`, dying with latscope and
/// ignoring Ctrl-C (as `std::process::Command` leaves a child: no signal blocked, SIGPIPE's
/// default action). With `ready`, returns once the program has said on [`READY_FD`] that it
/// is ready to serve, or failed if it ended first.
pub fn start_process(
    exe: &Path,
    args: &[String],
    fds: &[(BorrowedFd<'_>, RawFd)],
    ready: bool,
) -> io::Result<PeerHandle> {
    let mut argv: Vec<OsString> = vec![exe.into(), "lab".into(), "ipc-peer".into()];
    argv.extend(args.iter().map(OsString::from));
    let program = Program::at(exe, &argv)?;
    let null = File::open("/dev/null")?;
    let ready_pipe = ready.then(process::pipe).transpose()?;
    let mut setup = Setup::new();
    setup
        .death_signal(libc::SIGKILL)
        .clear_signal_mask()
        .default_signal(libc::SIGPIPE)
        .ignore_signal(libc::SIGINT)
        .dup(null.as_fd(), 0);
    for &(fd, number) in fds {
        setup.dup(fd, number);
    }
    if let Some((_, write)) = &ready_pipe {
        setup.dup(write.as_fd(), READY_FD);
    }
    let pid = program.hold(&setup)?.release()?;
    drop(setup);
    let handle = PeerHandle::Process(pid);
    let Some((read, write)) = ready_pipe else {
        return Ok(handle);
    };
    // Only the peer holds the write end now: end-of-file means it ended before it was ready.
    drop(write);
    let mut byte = [0u8; 1];
    let mut read = File::from(read);
    loop {
        match read.read(&mut byte) {
            Ok(1) => return Ok(handle),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            _ => break,
        }
    }
    let how = handle.finish();
    Err(io::Error::other(match how {
        Some(how) => format!("the peer process ended before it was ready ({how})"),
        None => "the peer process ended before it was ready".to_string(),
    }))
}

/// In an endpoint peer program: tells the lab that the peer is ready to serve.
pub fn say_ready(mut ready: File) -> io::Result<()> {
    ready.write_all(&[1])
}

/// Whether the process `pid` has not exited (without reaping it).
pub fn process_alive(pid: libc::pid_t) -> bool {
    process::running(pid)
}

/// How a child process ended, in words, or `None` for a clean exit.
pub fn describe_status(pid: libc::pid_t, status: libc::c_int) -> Option<String> {
    if libc::WIFEXITED(status) {
        let code = libc::WEXITSTATUS(status);
        (code != 0).then(|| format!("peer process {pid} exited with status {code}"))
    } else if libc::WIFSIGNALED(status) {
        Some(format!(
            "peer process {pid} died (killed by signal {})",
            libc::WTERMSIG(status)
        ))
    } else {
        Some(format!(
            "peer process {pid} ended with wait status {status}"
        ))
    }
}

/// Waits for `pid` for up to `patience`, then kills it; describes an unclean end.
pub fn reap(pid: libc::pid_t, patience: std::time::Duration) -> Option<String> {
    let deadline = std::time::Instant::now() + patience;
    loop {
        match process::try_wait(pid) {
            Ok(Some(status)) => return describe_status(pid, status),
            Ok(None) => {}
            Err(_) => return Some(format!("peer process {pid} could not be waited for")),
        }
        if std::time::Instant::now() > deadline {
            let _ = process::kill(pid, libc::SIGKILL);
            let _ = process::wait(pid);
            return Some(format!(
                "peer process {pid} did not finish after the client closed; killed"
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

impl PeerHandle {
    /// A check the client's transport can make while it waits.
    pub fn liveness(&self) -> Box<dyn Fn() -> bool + Send> {
        match self {
            PeerHandle::Thread(_, running) => {
                let running = Arc::clone(running);
                Box::new(move || running.load(Ordering::Acquire))
            }
            PeerHandle::Process(pid) => {
                let pid = *pid;
                Box::new(move || process_alive(pid))
            }
        }
    }

    /// Waits for the peer to end; describes how it failed, if it did.
    pub fn finish(self) -> Option<String> {
        match self {
            PeerHandle::Thread(handle, _) => match handle.join() {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(format!("peer thread failed: {e}")),
                Err(_) => Some("peer thread panicked".to_string()),
            },
            PeerHandle::Process(pid) => reap(pid, std::time::Duration::from_secs(10)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::ipc::Pattern;

    #[test]
    fn a_peer_spec_survives_the_command_line() {
        let spec = PeerSpec {
            address: "unix:path=/run/user/7/bus,guid=1".into(),
            client: ":1.4".into(),
            config: Config {
                transport: Transport::Dbus,
                peer: Peer::Process,
                pattern: Pattern::Burst { n: 8 },
                payload: 1024,
            },
            warmup: 16,
            verify: true,
            capacity: 10_016,
        };
        assert_eq!(PeerSpec::from_args(&spec.to_args()), Some(spec));
        assert_eq!(PeerSpec::from_args(&["x".to_string()]), None);
    }

    #[test]
    fn a_peer_spec_of_every_pattern_survives_the_command_line() {
        let patterns = [
            Pattern::PingPong,
            Pattern::Stream { flush_bytes: 16384 },
            Pattern::Burst { n: 8 },
            Pattern::Segments { k: 4 },
            Pattern::OpenLoop { rate: 50_000 },
        ];
        for pattern in patterns {
            let spec = PeerSpec {
                address: "unix:path=/run/user/7/bus".into(),
                client: ":1.9".into(),
                config: Config {
                    transport: Transport::Dbus,
                    peer: Peer::Process,
                    pattern,
                    payload: 8,
                },
                warmup: 0,
                verify: false,
                capacity: 1,
            };
            assert_eq!(
                PeerSpec::from_args(&spec.to_args()),
                Some(spec),
                "{pattern}"
            );
        }
    }

    #[test]
    fn a_peer_spec_with_an_unknown_pattern_is_refused() {
        let words = ["a", ":1.1", "carrier-pigeon", "0", "8", "0", "0", "1"];
        let args: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        assert_eq!(PeerSpec::from_args(&args), None);
    }

    #[test]
    fn a_killed_child_is_described_with_its_signal() {
        // SAFETY: the child only pauses until it is killed.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: in the child: pause and _exit are async-signal-safe and touch no memory.
            unsafe {
                libc::pause();
                libc::_exit(0);
            }
        }
        assert!(process_alive(pid));
        // SAFETY: kill(2) on our own child, not reaped yet; it touches no memory.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        let text = reap(pid, std::time::Duration::from_secs(5)).unwrap();
        assert_eq!(
            text,
            format!("peer process {pid} died (killed by signal 9)")
        );
    }
}
