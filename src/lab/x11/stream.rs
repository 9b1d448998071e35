//! What a server can make the lab wait for or hold: a deadline per wait, and a bound per answer.
//!
//! x11rb's `RustConnection` waits for its socket with no time limit, reads until the socket is
//! empty (a server that never stops sending keeps it reading and queueing), and allocates a
//! packet as large as its header says (up to 16 GiB) before reading it. The lab uses that
//! connection for everything but the measured requests (the setup, describing the server,
//! pixmaps, segments, the read-back), so [`Guarded`] sits under it as its stream: before each
//! [`exchange`] the lab says how large an answer it expects; a packet larger than that, or
//! more bytes than that answer and [`UNSOLICITED`] bytes of events, is refused as the server's
//! misbehaviour before x11rb sees it, and every wait ends at one deadline, `--timeout` after the
//! exchange began, so a server that sends a byte at a time cannot stretch it. The first
//! violation is kept: the connection is out of step with the server, so every later call fails
//! with it.
//!
//! [`Deadline`] is shared with the lab's own connection ([`super::wire`]).

use std::io::{IoSlice, Result as IoResult};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use x11rb::rust_connection::{DefaultStream, PollMode, RustConnection, Stream};
use x11rb::utils::RawFdContainer;

use super::X11Error;
use super::wire::packet_len;

/// x11rb's connection on a [`Guarded`] stream.
pub type Conn = RustConnection<Guarded>;

/// Bytes of events and errors a server may send beyond the answer of one exchange: the lab
/// selects no event on this connection, so only errors of its own requests and the few events
/// every client gets (`MappingNotify`) come unasked.
pub const UNSOLICITED: usize = 64 * 1024;
/// The largest connection setup a server can send: 8 bytes and a 16-bit count of 4-byte units.
const SETUP_MAX: usize = 8 + 4 * 65535;

/// The end of one wait.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    at: Instant,
    timeout: Duration,
}

impl Deadline {
    /// `timeout` from now.
    pub fn after(timeout: Duration) -> Deadline {
        Deadline {
            at: Instant::now() + timeout,
            timeout,
        }
    }

    /// The whole wait's length.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Time left (zero once passed).
    pub fn left(&self) -> Duration {
        self.at.saturating_duration_since(Instant::now())
    }

    /// Waits until `fd` has one of `events` (`POLLIN`, `POLLOUT`): false when the deadline
    /// passed first.
    pub fn ready(&self, fd: i32, events: i16) -> IoResult<bool> {
        loop {
            let left = self.left();
            if left.is_zero() {
                return Ok(false);
            }
            let mut p = libc::pollfd {
                fd,
                events,
                revents: 0,
            };
            let ts = libc::timespec {
                tv_sec: left.as_secs().min(i64::MAX as u64) as libc::time_t,
                tv_nsec: left.subsec_nanos() as libc::c_long,
            };
            // SAFETY: one valid pollfd and a timespec that live across the call.
            let rc = unsafe { libc::ppoll(&mut p, 1, &ts, std::ptr::null()) };
            if rc > 0 {
                return Ok(true);
            }
            if rc < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
}

/// Why a connection is unusable.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Violation {
    Timeout(String),
    Misbehaved(String),
}

impl Violation {
    fn error(&self) -> X11Error {
        match self {
            Violation::Timeout(m) => X11Error::Timeout(m.clone()),
            Violation::Misbehaved(m) => X11Error::Misbehaved(m.clone()),
        }
    }

    fn io(&self) -> std::io::Error {
        let kind = match self {
            Violation::Timeout(_) => std::io::ErrorKind::TimedOut,
            Violation::Misbehaved(_) => std::io::ErrorKind::InvalidData,
        };
        std::io::Error::new(kind, self.error().to_string())
    }
}

/// Where the byte stream from the server is: in the setup, or in a packet.
#[derive(Debug)]
struct Packets {
    /// the connection setup is not over
    setup: bool,
    head: [u8; 32],
    have: usize,
    body: usize,
}

impl Packets {
    fn new() -> Packets {
        Packets {
            setup: true,
            head: [0; 32],
            have: 0,
            body: 0,
        }
    }

    /// Follows `bytes`; the length of a packet larger than `max` is an error.
    fn feed(&mut self, mut bytes: &[u8], max: usize) -> Result<(), String> {
        while !bytes.is_empty() {
            if self.body > 0 {
                let n = self.body.min(bytes.len());
                self.body -= n;
                bytes = &bytes[n..];
                self.setup &= self.body > 0;
                continue;
            }
            // the setup's header is 8 bytes; a packet's, 32
            let head_len = if self.setup { 8 } else { 32 };
            let n = (head_len - self.have).min(bytes.len());
            self.head[self.have..self.have + n].copy_from_slice(&bytes[..n]);
            self.have += n;
            bytes = &bytes[n..];
            if self.have < head_len {
                continue;
            }
            self.have = 0;
            let total = if self.setup {
                8 + 4 * usize::from(u16::from_ne_bytes([self.head[6], self.head[7]]))
            } else {
                packet_len(&self.head)
            };
            if !self.setup && total > max {
                return Err(too_large(&self.head, total, max));
            }
            self.body = total - head_len;
            self.setup &= self.body > 0;
        }
        Ok(())
    }
}

/// Describes a packet of `total` bytes (header `head`) where at most `max` could come.
pub fn too_large(head: &[u8], total: usize, max: usize) -> String {
    let what = match head[0] {
        1 => "a reply",
        k if k & 0x7f == 35 => "a generic event",
        _ => "a packet",
    };
    format!("it sent {what} of {total} bytes where the lab expects at most {max}")
}

/// What the server may still do in the exchange under way.
#[derive(Debug)]
struct Guard {
    timeout: Duration,
    /// the end of the exchange under way (`None` between exchanges: each wait gets `timeout`)
    deadline: Option<Deadline>,
    /// the largest packet allowed
    max_packet: usize,
    /// bytes the server may still send before the next exchange
    budget: usize,
    /// bytes received in the exchange under way
    came: usize,
    packets: Packets,
    broken: Option<Violation>,
}

impl Guard {
    fn check(&self) -> IoResult<()> {
        match &self.broken {
            Some(v) => Err(v.io()),
            None => Ok(()),
        }
    }

    fn break_with(&mut self, v: Violation) -> std::io::Error {
        let e = v.io();
        self.broken.get_or_insert(v);
        e
    }

    fn account(&mut self, bytes: &[u8]) -> IoResult<()> {
        self.came += bytes.len();
        if bytes.len() > self.budget {
            let max = self.max_packet;
            return Err(self.break_with(Violation::Misbehaved(format!(
                "it sent more than {} bytes for an answer of at most {max} (a flood of events or replies)",
                max + UNSOLICITED
            ))));
        }
        self.budget -= bytes.len();
        let max = self.max_packet;
        self.packets
            .feed(bytes, max)
            .map_err(|m| self.break_with(Violation::Misbehaved(m)))
    }

    fn timed_out(&mut self, mode: PollMode) -> std::io::Error {
        let what = if self.packets.setup {
            "the X server did not answer the connection setup"
        } else if !mode.writable() {
            "no answer from the X server"
        } else {
            "the X server did not take the requests"
        };
        let came = match self.came {
            0 => String::new(),
            n => format!("; {n} bytes came in that time"),
        };
        let ms = self.timeout.as_millis();
        self.break_with(Violation::Timeout(format!(
            "{what} within {ms} ms (--timeout{came})"
        )))
    }
}

/// x11rb's default stream with a deadline on every wait and a bound on what is read.
#[derive(Debug)]
pub struct Guarded {
    inner: DefaultStream,
    guard: Arc<Mutex<Guard>>,
}

impl Guarded {
    /// `inner`, its first exchange the connection setup, `timeout` for each.
    pub fn new(inner: DefaultStream, timeout: Duration) -> Guarded {
        let guard = Guard {
            timeout,
            deadline: Some(Deadline::after(timeout)),
            max_packet: 32,
            budget: SETUP_MAX + UNSOLICITED,
            came: 0,
            packets: Packets::new(),
            broken: None,
        };
        Guarded {
            inner,
            guard: Arc::new(Mutex::new(guard)),
        }
    }

    fn guard(&self) -> MutexGuard<'_, Guard> {
        // A panic while the lock was held leaves plain data: use it.
        self.guard.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Begins an exchange: `--timeout` from now, an answer of at most `max_reply` bytes.
    pub fn expect(&self, max_reply: usize) {
        let mut g = self.guard();
        g.deadline = Some(Deadline::after(g.timeout));
        g.max_packet = max_reply.max(32);
        g.budget = g.max_packet.saturating_add(UNSOLICITED);
        g.came = 0;
    }

    /// Ends the exchange under way.
    pub fn done(&self) {
        self.guard().deadline = None;
    }

    /// What made the connection unusable, if anything has.
    pub fn violation(&self) -> Option<X11Error> {
        self.guard().broken.as_ref().map(Violation::error)
    }

    /// A handle on the same state, that outlives the stream (a failed setup drops it).
    pub fn watch(&self) -> Watch {
        Watch(Arc::clone(&self.guard))
    }
}

/// The state of a [`Guarded`] stream, seen from outside.
#[derive(Debug)]
pub struct Watch(Arc<Mutex<Guard>>);

impl Watch {
    /// What made the connection unusable, if anything has.
    pub fn violation(&self) -> Option<X11Error> {
        let g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        g.broken.as_ref().map(Violation::error)
    }
}

impl AsRawFd for Guarded {
    fn as_raw_fd(&self) -> i32 {
        self.inner.as_raw_fd()
    }
}

impl Stream for Guarded {
    fn poll(&self, mode: PollMode) -> IoResult<()> {
        let deadline = {
            let g = self.guard();
            g.check()?;
            g.deadline.unwrap_or_else(|| Deadline::after(g.timeout))
        };
        let mut events = 0;
        if mode.readable() {
            events |= libc::POLLIN;
        }
        if mode.writable() {
            events |= libc::POLLOUT;
        }
        if deadline.ready(self.inner.as_raw_fd(), events)? {
            Ok(())
        } else {
            Err(self.guard().timed_out(mode))
        }
    }

    fn read(&self, buf: &mut [u8], fd_storage: &mut Vec<RawFdContainer>) -> IoResult<usize> {
        let mut g = self.guard();
        g.check()?;
        let n = self.inner.read(buf, fd_storage)?;
        g.account(&buf[..n])?;
        Ok(n)
    }

    fn write(&self, buf: &[u8], fds: &mut Vec<RawFdContainer>) -> IoResult<usize> {
        self.guard().check()?;
        self.inner.write(buf, fds)
    }

    fn write_vectored(
        &self,
        bufs: &[IoSlice<'_>],
        fds: &mut Vec<RawFdContainer>,
    ) -> IoResult<usize> {
        self.guard().check()?;
        self.inner.write_vectored(bufs, fds)
    }
}

/// One exchange on `conn`: what `f` does may take `--timeout` in all and be answered with at
/// most `max_reply` bytes (and a few events). A violation, even one x11rb swallowed (it falls
/// back to the setup's request length when BIG-REQUESTS fails), is the error.
pub fn exchange<T, E: std::fmt::Display>(
    conn: &Conn,
    max_reply: usize,
    f: impl FnOnce(&Conn) -> Result<T, E>,
) -> Result<T, X11Error> {
    let stream = conn.stream();
    stream.expect(max_reply);
    let result = f(conn);
    stream.done();
    match (result, stream.violation()) {
        (_, Some(v)) => Err(v),
        (Ok(t), None) => Ok(t),
        (Err(e), None) => Err(X11Error::protocol(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setup_and_the_packets_after_it_are_followed_byte_by_byte() {
        let mut p = Packets::new();
        // a setup of 8 + 4 bytes, then a reply of 32 + 8, then an event, one byte at a time
        let mut bytes = vec![1, 0, 11, 0, 0, 0, 1, 0, 9, 9, 9, 9];
        let mut reply = vec![0u8; 40];
        reply[0] = 1;
        reply[4] = 2;
        bytes.extend_from_slice(&reply);
        bytes.extend_from_slice(&[2; 32]);
        for (i, b) in bytes.iter().enumerate() {
            assert_eq!(p.setup, i < 12, "byte {i}");
            p.feed(&[*b], 40).unwrap();
        }
        assert!(!p.setup);
        assert_eq!((p.have, p.body), (0, 0));
    }

    #[test]
    fn a_reply_longer_than_expected_is_refused_at_its_header() {
        let mut p = Packets::new();
        p.setup = false;
        let mut head = [0u8; 32];
        head[0] = 1;
        head[4..8].copy_from_slice(&u32::MAX.to_ne_bytes());
        let err = p.feed(&head, 64).unwrap_err();
        assert!(
            err.contains("a reply of 17179869212 bytes") && err.contains("at most 64"),
            "{err}"
        );
    }

    #[test]
    fn a_deadline_passes_once_whatever_the_reads_in_between() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let d = Deadline::after(Duration::from_millis(50));
        let start = Instant::now();
        assert!(!d.ready(a.as_raw_fd(), libc::POLLIN).unwrap());
        assert!(start.elapsed() >= Duration::from_millis(45));
        // once passed, it does not wait again
        let again = Instant::now();
        assert!(!d.ready(a.as_raw_fd(), libc::POLLIN).unwrap());
        assert!(again.elapsed() < Duration::from_millis(20));
    }
}
