//! Where the peer runs: a thread of latscope, a forked process, or (for D-Bus) a fresh
//! `latscope lab ipc-peer` program described by a [`PeerSpec`].
//!
//! A forked peer (so that a pipe between two processes is what `perf bench sched pipe`
//! measures) only makes system calls and touches memory allocated before the fork; it dies
//! with latscope (`PR_SET_PDEATHSIG`) and ignores Ctrl-C, which the client handles by closing
//! the connection.
//!
//! This module knows where and how a peer runs, not what it does: [`spawn_thread`] and
//! [`fork_process`] take the peer's work as a function (`run.rs` passes the pattern's
//! `run_peer`), and what the peer measured goes into the shared `Record` (`record.rs`). So it
//! imports neither `pattern.rs` nor `record.rs`, and neither of them imports it: each can be
//! read and changed alone.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use super::transport::Endpoint;
use super::{Config, PatternKind, Peer, Transport};

/// What a peer program needs to know, as command-line words (`latscope lab ipc-peer ...`).
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

/// Starts the peer in a forked process: `work` runs there on `peer`, and the child exits with
/// status 0 if it succeeded, 1 if not. The child keeps only the peer's side: the client's
/// endpoint is dropped there, the peer's endpoint is dropped here, so either side sees the
/// other's end.
pub fn fork_process(
    client: Box<dyn Endpoint + Send>,
    peer: Box<dyn Endpoint + Send>,
    work: impl FnOnce(Box<dyn Endpoint + Send>) -> io::Result<()>,
) -> io::Result<(Box<dyn Endpoint + Send>, PeerHandle)> {
    // SAFETY: the child only drops objects, makes system calls and allocates (glibc's malloc
    // is fork-safe), then leaves with _exit without running destructors or atexit handlers.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: plain signal-disposition and prctl calls in the child.
        unsafe {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            libc::signal(libc::SIGINT, libc::SIG_IGN);
            libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        }
        drop(client);
        let result = work(peer);
        // SAFETY: leaving the child without unwinding into the parent's code.
        unsafe { libc::_exit(if result.is_ok() { 0 } else { 1 }) };
    }
    drop(peer);
    Ok((client, PeerHandle::Process(pid)))
}

/// Whether the process `pid` has not exited (without reaping it).
pub fn process_alive(pid: libc::pid_t) -> bool {
    // SAFETY: waitid with WNOWAIT only inspects the child; `info` is a valid out-pointer.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let r = libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        );
        r == 0 && info.si_pid() == 0
    }
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
    let mut status = 0;
    loop {
        // SAFETY: reaping our own child; `status` is a valid out-pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            return describe_status(pid, status);
        }
        if r < 0 {
            return Some(format!("peer process {pid} could not be waited for"));
        }
        if std::time::Instant::now() > deadline {
            // SAFETY: killing and reaping our own child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
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
            unsafe {
                libc::pause();
                libc::_exit(0);
            }
        }
        assert!(process_alive(pid));
        unsafe { libc::kill(pid, libc::SIGKILL) };
        let text = reap(pid, std::time::Duration::from_secs(5)).unwrap();
        assert_eq!(
            text,
            format!("peer process {pid} died (killed by signal 9)")
        );
    }
}
