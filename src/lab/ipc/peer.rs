//! Where the peer runs, and the shared [`Record`] where it writes what it received.
//!
//! A peer is a thread of latscope, or a forked process (so that a pipe between two processes
//! is what `perf bench sched pipe` measures). A forked peer only makes system calls and touches
//! memory allocated before the fork; it dies with latscope (`PR_SET_PDEATHSIG`) and ignores
//! Ctrl-C, which the client handles by closing the connection. Arrival times, the number of
//! messages received, the peer's CPU usage and its error all go into a [`Record`] in shared
//! memory, so a peer that dies mid-run still leaves what it measured.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use super::clock::{Clock, Monotonic};
use super::pattern::{PeerLogic, largest_unit};
use super::shared::Mapping;
use super::transport::Endpoint;
use super::usage::{self, Scope, Usage};
use super::{Config, Settings};

const RECEIVED: usize = 0;
const START: usize = 16;
const END: usize = 48;
const ERROR_LEN: usize = 80;
const ERROR: usize = 88;
const ERROR_MAX: usize = 400;
const ARRIVALS: usize = 512;

/// The peer's side of the results, in shared memory.
#[derive(Debug)]
pub struct Record {
    map: Mapping,
    capacity: u64,
}

impl Record {
    /// Room for the arrival times of `capacity` messages.
    pub fn new(capacity: u64) -> io::Result<Self> {
        let map = Mapping::new(Self::bytes(capacity))?;
        Ok(Record { map, capacity })
    }

    /// The record of a parent process, from its memfd.
    pub fn open(fd: OwnedFd, capacity: u64) -> io::Result<Self> {
        let map = Mapping::map(fd, Self::bytes(capacity))?;
        Ok(Record { map, capacity })
    }

    fn bytes(capacity: u64) -> usize {
        ARRIVALS + capacity as usize * 8
    }

    /// The memfd, for a peer program.
    pub fn fd(&self) -> &OwnedFd {
        self.map.fd()
    }

    /// Messages it can hold.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Notes that `n` messages have arrived.
    pub fn set_received(&self, n: u64) {
        self.map.atomic_u64(RECEIVED).store(n, Ordering::Release);
    }

    /// Messages that have arrived.
    pub fn received(&self) -> u64 {
        self.map.atomic_u64(RECEIVED).load(Ordering::Acquire)
    }

    /// Records when message `seq` arrived.
    pub fn set_arrival(&self, seq: u64, t: u64) {
        if seq < self.capacity {
            self.map
                .atomic_u64(ARRIVALS + seq as usize * 8)
                .store(t, Ordering::Relaxed);
        }
    }

    /// When messages `0..n` arrived.
    pub fn arrivals(&self, n: u64) -> Vec<u64> {
        (0..n.min(self.capacity))
            .map(|seq| {
                self.map
                    .atomic_u64(ARRIVALS + seq as usize * 8)
                    .load(Ordering::Acquire)
            })
            .collect()
    }

    fn set_usage(&self, at: usize, u: Usage) {
        let words = [u.cpu_ns, u.voluntary, u.involuntary, 1];
        for (i, w) in words.into_iter().enumerate() {
            self.map.atomic_u64(at + 8 * i).store(w, Ordering::Release);
        }
    }

    fn usage_at(&self, at: usize) -> Option<Usage> {
        let w = |i: usize| self.map.atomic_u64(at + 8 * i).load(Ordering::Acquire);
        (w(3) == 1).then(|| Usage {
            cpu_ns: w(0),
            voluntary: w(1),
            involuntary: w(2),
        })
    }

    /// The peer's usage when the measured phase began.
    pub fn set_start(&self, u: Usage) {
        self.set_usage(START, u);
    }

    /// The peer's usage at the end.
    pub fn set_end(&self, u: Usage) {
        self.set_usage(END, u);
    }

    /// The peer's usage over the measured phase, when it got that far.
    pub fn usage(&self) -> Option<Usage> {
        Some(self.usage_at(END)?.since(&self.usage_at(START)?))
    }

    /// Records why the peer failed (truncated to a few hundred bytes).
    pub fn set_error(&self, text: &str) {
        let mut end = text.len().min(ERROR_MAX);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        // SAFETY: only the peer writes the error, once, before it stops.
        unsafe { self.map.slice_mut(ERROR, end) }.copy_from_slice(&text.as_bytes()[..end]);
        self.map
            .atomic_u64(ERROR_LEN)
            .store(end as u64, Ordering::Release);
    }

    /// Why the peer failed, if it said.
    pub fn error(&self) -> Option<String> {
        let len = self.map.atomic_u64(ERROR_LEN).load(Ordering::Acquire) as usize;
        // SAFETY: written once before the length was published.
        (len > 0).then(|| {
            String::from_utf8_lossy(unsafe { self.map.slice(ERROR, len.min(ERROR_MAX)) })
                .into_owned()
        })
    }
}

/// The peer's loop: receive, react, until the client closes.
pub fn serve(
    ep: &mut dyn Endpoint,
    logic: &mut PeerLogic<'_>,
    clock: &dyn Clock,
    buffer: usize,
) -> io::Result<()> {
    let mut buf = vec![0u8; buffer];
    loop {
        let n = ep.recv(&mut buf)?;
        if n == 0 {
            break;
        }
        let now = if logic.needs_time() { clock.now() } else { 0 };
        logic.on_bytes(&buf[..n], now, &mut |unit| ep.send(unit))?;
    }
    logic.finish();
    Ok(())
}

/// The receive buffer a peer needs: whole units of message transports, and enough to drain a
/// stream in few reads.
pub fn buffer_for(config: &Config) -> usize {
    largest_unit(config).max(64 * 1024)
}

/// Runs the peer of `config` on `ep` to the end, recording into `record`.
pub fn run_peer(
    mut ep: Box<dyn Endpoint + Send>,
    config: Config,
    settings: &Settings,
    record: &Record,
    segments: Option<&Mapping>,
    scope: Scope,
) -> io::Result<()> {
    let usage = move || usage::current(scope);
    let mut logic = PeerLogic::new(config, settings, record, segments, &usage);
    let result = serve(ep.as_mut(), &mut logic, &Monotonic, buffer_for(&config));
    if let Err(e) = &result {
        record.set_error(&e.to_string());
    }
    let _ = ep.close();
    result
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

/// Starts the peer on a thread.
pub fn spawn_thread(
    ep: Box<dyn Endpoint + Send>,
    config: Config,
    settings: &Settings,
    record: Arc<Record>,
    segments: Option<Arc<Mapping>>,
) -> io::Result<PeerHandle> {
    let running = Arc::new(AtomicBool::new(true));
    let flag = Running(Arc::clone(&running));
    let settings = settings.clone();
    let handle = std::thread::Builder::new()
        .name("latscope-peer".into())
        .spawn(move || {
            let _flag = flag;
            run_peer(
                ep,
                config,
                &settings,
                &record,
                segments.as_deref(),
                Scope::Thread,
            )
        })?;
    Ok(PeerHandle::Thread(handle, running))
}

/// Starts the peer in a forked process. The child keeps only the peer's side: the client's
/// endpoint is dropped there, the peer's endpoint is dropped here, so either side sees the
/// other's end.
pub fn fork_process(
    client: Box<dyn Endpoint + Send>,
    peer: Box<dyn Endpoint + Send>,
    config: Config,
    settings: &Settings,
    record: &Record,
    segments: Option<&Mapping>,
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
        let result = run_peer(peer, config, settings, record, segments, Scope::Process);
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

    #[test]
    fn a_record_keeps_counts_arrivals_usage_and_the_error() {
        let r = Record::new(10).unwrap();
        r.set_received(3);
        r.set_arrival(2, 777);
        r.set_arrival(99, 1); // beyond capacity: ignored
        assert_eq!(r.received(), 3);
        assert_eq!(r.arrivals(3), [0, 0, 777]);
        assert_eq!(r.usage(), None);
        r.set_start(Usage {
            cpu_ns: 100,
            voluntary: 1,
            involuntary: 0,
        });
        r.set_end(Usage {
            cpu_ns: 350,
            voluntary: 4,
            involuntary: 2,
        });
        assert_eq!(
            r.usage(),
            Some(Usage {
                cpu_ns: 250,
                voluntary: 3,
                involuntary: 2
            })
        );
        r.set_error("peer: message 5 arrived wrong");
        assert_eq!(r.error().as_deref(), Some("peer: message 5 arrived wrong"));
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
