//! The lab's own X connection: what a request costs on the wire, not what a client library adds.
//!
//! x11rb's `RustConnection` polls the socket before every write and keeps every request in a list
//! searched per reply; pipelined small uploads ran far below x11perf's rate on the same server,
//! so the lab measured its client. Xlib builds requests in its own 16 KiB buffer and hands many
//! to the socket in one `writev` (libX11 `src/xcb_io.c`). This is the same design in pure Rust on
//! x11rb-protocol's sans-I/O [`Protocol`]: a request costs a copy into [`BUFFER`] bytes and the
//! sequence bookkeeping; a flush is one `send(2)` for every request buffered; a reply or event is
//! one `recv(2)` of whatever the server has sent, split into packets here and parsed by
//! x11rb-protocol. Requests larger than the buffer go out in one `sendmsg(2)` from the caller's
//! slices, as Xlib writes large images.
//!
//! `--timeout` is a deadline for each whole wait (a reply, an event, a flush, the setup), not
//! per read: a server that answers a byte at a time cannot stretch it. The socket is blocking
//! with `SO_RCVTIMEO`/`SO_SNDTIMEO` set to the whole timeout, so the first `recv`/`send` of a
//! wait needs no `poll(2)`; only a wait that needs more than one (a reply in pieces, a server
//! that reads slowly) polls for what is left of it.
//!
//! What is held is bounded by what the requests in flight allow, never by a length the server
//! announces: a reply larger than its request can have ([`Answer::Reply`]), a reply to no
//! request, or an event larger than 32 bytes (the lab asks for no generic event) is refused at
//! its header, and at most [`MAX_EVENTS`] events wait unread. Each is an
//! [`X11Error::Misbehaved`] that says what the server did.
//!
//! The connection is a second client of the same server: the pixmaps, GCs and shared segments
//! the lab creates on its x11rb connection are server resources that any client may name.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Duration;

use x11rb::reexports::x11rb_protocol as xproto_crate;
use xproto_crate::connect::Connect;
use xproto_crate::connection::{Connection as Protocol, ReplyFdKind};
use xproto_crate::protocol::xproto::Setup;
use xproto_crate::x11_utils::{ReplyRequest, TryParse, VoidRequest};
use xproto_crate::{DiscardMode, SequenceNumber};

use super::X11Error;
use super::stream::{Deadline, too_large};

/// Bytes buffered before a flush (Xlib's `XLIBBUFFERSIZE` and libxcb's queue are 16 KiB).
pub const BUFFER: usize = 16 * 1024;
/// Bytes asked of `recv(2)` at least per read.
const READ_CHUNK: usize = 64 * 1024;
/// `GetInputFocus`: what `XSync` sends, four bytes.
const GET_INPUT_FOCUS: [u8; 4] = [43, 0, 1, 0];
/// What a wait for the server to read says when it times out.
const TOOK_NOTHING: &str = "the X server did not read the requests";
/// A server's largest request without BIG-REQUESTS: 65535 four-byte units.
const SMALL_MAX: usize = 65535 * 4;
/// A reply with nothing after its 32 bytes (`GetInputFocus`, `QueryExtension`, `InternAtom`).
pub const SMALL_REPLY: usize = 32;
/// Events (and errors of requests without a reply) held unread at most. The lab reads what it
/// asks for as it comes (K completions in flight, a few RandR notifications), so a server
/// that sends more while the lab waits is flooding it.
pub const MAX_EVENTS: usize = 1 << 16;
/// While this little of a wait is gone, the socket's own timeout (the whole one) stands for what
/// is left: one `recv` with no `poll`.
const SLACK: Duration = Duration::from_millis(1);
/// What a wait for the server's answer says when it times out.
const NO_ANSWER: &str = "no answer from the X server";

/// What a request gets back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// nothing (an error, if the server refuses it)
    Nothing,
    /// a reply of at most this many bytes
    Reply(usize),
}

/// One wait on the server: its deadline, what it waits for, the bytes that came.
struct Wait {
    deadline: Deadline,
    what: &'static str,
    came: usize,
    /// no system call of this wait has run: the whole timeout is left, with no clock reading
    fresh: bool,
}

impl Wait {
    fn new(timeout: Duration, what: &'static str) -> Wait {
        Wait {
            deadline: Deadline::after(timeout),
            what,
            came: 0,
            fresh: true,
        }
    }

    /// Whether the next system call may block on the socket's own timeout: only while almost
    /// the whole wait is left.
    fn blocking(&mut self) -> bool {
        std::mem::take(&mut self.fresh) || self.deadline.left() + SLACK >= self.deadline.timeout()
    }
}

/// System calls and requests of a connection, for the client's own profile.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// requests sent (syncs inserted by the connection included)
    pub requests: u64,
    /// `send`/`sendmsg` calls
    pub writes: u64,
    /// `recv` calls
    pub reads: u64,
    /// bytes sent
    pub bytes_out: u64,
}

impl Counters {
    /// What was counted since `earlier`.
    pub fn since(&self, earlier: &Counters) -> Counters {
        Counters {
            requests: self.requests.saturating_sub(earlier.requests),
            writes: self.writes.saturating_sub(earlier.writes),
            reads: self.reads.saturating_sub(earlier.reads),
            bytes_out: self.bytes_out.saturating_sub(earlier.bytes_out),
        }
    }
}

/// One connection to an X server.
pub struct Wire {
    fd: OwnedFd,
    protocol: Protocol,
    out: Vec<u8>,
    input: Vec<u8>,
    /// the first byte of `input` not yet split into packets
    consumed: usize,
    /// requests with a reply not yet answered, oldest first: sequence, most bytes of the reply
    awaiting: VecDeque<(SequenceNumber, usize)>,
    /// events and errors of requests without a reply, not yet read
    events: VecDeque<Vec<u8>>,
    max_request_bytes: usize,
    big_requests: bool,
    timeout: Duration,
    counters: Counters,
}

impl std::fmt::Debug for Wire {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wire")
            .field("fd", &self.fd.as_raw_fd())
            .field("counters", &self.counters)
            .finish()
    }
}

fn os_error(what: &str, e: std::io::Error) -> X11Error {
    X11Error::Protocol(format!("{what}: {e}"))
}

/// The name of a core X error code.
fn error_name(code: u8) -> &'static str {
    const NAMES: [&str; 18] = [
        "",
        "BadRequest",
        "BadValue",
        "BadWindow",
        "BadPixmap",
        "BadAtom",
        "BadCursor",
        "BadFont",
        "BadMatch",
        "BadDrawable",
        "BadAccess",
        "BadAlloc",
        "BadColormap",
        "BadGContext",
        "BadIDChoice",
        "BadName",
        "BadLength",
        "BadImplementation",
    ];
    NAMES.get(usize::from(code)).copied().unwrap_or("")
}

/// Describes an X error packet (32 bytes, the first 0).
pub fn describe_error(packet: &[u8]) -> String {
    let at = |i: usize| packet.get(i).copied().unwrap_or(0);
    let value = u32::from_ne_bytes([at(4), at(5), at(6), at(7)]);
    let minor = u16::from_ne_bytes([at(8), at(9)]);
    let name = error_name(at(1));
    format!(
        "the server refused a request: error {}{}{name} (request {}.{minor}, value {value:#x})",
        at(1),
        if name.is_empty() { "" } else { " " },
        at(10),
    )
}

/// Bytes a packet that starts with `head` (at least 32 bytes) takes: replies and generic events
/// say their length; errors and other events are 32 bytes.
pub fn packet_len(head: &[u8]) -> usize {
    let kind = head[0];
    if kind == 1 || kind & 0x7f == 35 {
        32 + 4 * u32::from_ne_bytes([head[4], head[5], head[6], head[7]]) as usize
    } else {
        32
    }
}

fn set_timeout(fd: i32, option: i32, timeout: Duration) -> std::io::Result<()> {
    let tv = libc::timeval {
        tv_sec: timeout.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_usec: timeout.subsec_micros() as libc::suseconds_t,
    };
    // SAFETY: setsockopt with a timeval of the size given.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            option,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Makes `fd` blocking, with `timeout` on every send and receive, and no Nagle delay on TCP.
fn configure(fd: i32, timeout: Duration) -> std::io::Result<()> {
    // SAFETY: fcntl on a descriptor we own.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    set_timeout(fd, libc::SO_RCVTIMEO, timeout)?;
    set_timeout(fd, libc::SO_SNDTIMEO, timeout)?;
    let one: libc::c_int = 1;
    // SAFETY: setsockopt with an int; on a Unix socket it fails, which is ignored.
    unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    Ok(())
}

impl Wire {
    /// Sets up the connection on a connected socket `fd` with the authorization given, and
    /// enables BIG-REQUESTS where the server has it. Every wait is limited to `timeout`.
    pub fn connect(
        fd: OwnedFd,
        auth_name: Vec<u8>,
        auth_data: Vec<u8>,
        timeout: Duration,
    ) -> Result<(Wire, Setup), X11Error> {
        configure(fd.as_raw_fd(), timeout).map_err(|e| os_error("the X socket", e))?;
        let mut wire = Wire {
            fd,
            protocol: Protocol::new(),
            out: Vec::with_capacity(BUFFER),
            input: Vec::new(),
            consumed: 0,
            awaiting: VecDeque::new(),
            events: VecDeque::new(),
            max_request_bytes: SMALL_MAX,
            big_requests: false,
            timeout,
            counters: Counters::default(),
        };
        let (mut connect, request) = Connect::with_authorization(auth_name, auth_data);
        let mut wait = Wait::new(timeout, "the X server did not answer the connection setup");
        wire.send_bytes(&[&request], &mut wait)?;
        // The setup's length is a 16-bit count of 4-byte units: at most 256 KiB.
        loop {
            let buf = connect.buffer();
            let n = wire.recv_raw(buf.as_mut_ptr(), buf.len(), Some(&mut wait))?;
            if connect.advance(n) {
                break;
            }
        }
        let setup = connect.into_setup().map_err(|e| X11Error::Connect {
            display: String::new(),
            reason: e.to_string(),
        })?;
        wire.max_request_bytes = usize::from(setup.maximum_request_length) * 4;
        wire.enable_big_requests()?;
        Ok((wire, setup))
    }

    fn enable_big_requests(&mut self) -> Result<(), X11Error> {
        let Some(ext) = self.extension("BIG-REQUESTS")? else {
            return Ok(());
        };
        let (bytes, _) = xproto_crate::protocol::bigreq::EnableRequest.serialize(ext.major_opcode);
        let seq = self.send(&[&bytes[0]], Answer::Reply(SMALL_REPLY))?;
        let reply: xproto_crate::protocol::bigreq::EnableReply = self.reply_of(seq)?;
        self.big_requests = true;
        self.max_request_bytes = (reply.maximum_request_length as usize).saturating_mul(4);
        Ok(())
    }

    /// What the server says of extension `name` (`None`: it does not have it).
    pub fn extension(
        &mut self,
        name: &str,
    ) -> Result<Option<xproto_crate::protocol::xproto::QueryExtensionReply>, X11Error> {
        let request = xproto_crate::protocol::xproto::QueryExtensionRequest {
            name: Cow::Borrowed(name.as_bytes()),
        };
        let seq = self.request(request, 0, SMALL_REPLY)?;
        let reply: xproto_crate::protocol::xproto::QueryExtensionReply = self.reply_of(seq)?;
        Ok(reply.present.then_some(reply))
    }

    /// The largest request this server takes on this connection, bytes.
    pub fn max_request_bytes(&self) -> usize {
        self.max_request_bytes
    }

    /// Requests and system calls so far.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// Buffers one request made of `parts` (x11rb-protocol's serialization; the length in
    /// bytes 2–3 is written here, in the BIG-REQUESTS form when it does not fit) and returns its
    /// sequence number. A request larger than the buffer is sent at once from `parts`.
    pub fn send(&mut self, parts: &[&[u8]], answer: Answer) -> Result<SequenceNumber, X11Error> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let head = parts.first().copied().unwrap_or_default();
        if head.len() < 4 || !len.is_multiple_of(4) {
            return Err(X11Error::Protocol(format!(
                "a malformed request of {len} bytes (internal error)"
            )));
        }
        let big = len > SMALL_MAX;
        let wire_len = if big { len + 4 } else { len };
        if wire_len > self.max_request_bytes || (big && !self.big_requests) {
            return Err(X11Error::TooLarge(format!(
                "a {wire_len}-byte request; this server takes at most {} bytes per request",
                self.max_request_bytes
            )));
        }
        let seq = self.sequence(answer)?;
        if self.out.len() + wire_len > BUFFER {
            self.flush()?;
        }
        self.counters.requests += 1;
        let mut header = [0u8; 8];
        header[..2].copy_from_slice(&head[..2]);
        let header: &[u8] = if big {
            header[4..].copy_from_slice(&((wire_len / 4) as u32).to_ne_bytes());
            &header
        } else {
            header[2..4].copy_from_slice(&((len / 4) as u16).to_ne_bytes());
            &header[..4]
        };
        if wire_len > BUFFER {
            let mut slices = Vec::with_capacity(parts.len() + 1);
            slices.push(header);
            slices.push(&head[4..]);
            slices.extend_from_slice(&parts[1..]);
            let mut wait = Wait::new(self.timeout, NO_ANSWER);
            self.send_bytes(&slices, &mut wait)?;
        } else {
            self.out.extend_from_slice(header);
            self.out.extend_from_slice(&head[4..]);
            for p in &parts[1..] {
                self.out.extend_from_slice(p);
            }
        }
        Ok(seq)
    }

    /// Buffers one whole request serialized before, its length already in place (at most
    /// [`BUFFER`] bytes, not in the BIG-REQUESTS form): the lab's hot path, one copy.
    #[inline]
    pub fn send_whole(
        &mut self,
        request: &[u8],
        answer: Answer,
    ) -> Result<SequenceNumber, X11Error> {
        debug_assert!(
            request.len() >= 4
                && request.len() <= BUFFER
                && usize::from(u16::from_ne_bytes([request[2], request[3]])) * 4 == request.len()
        );
        let seq = self.sequence(answer)?;
        if self.out.len() + request.len() > BUFFER {
            self.flush()?;
        }
        self.counters.requests += 1;
        self.out.extend_from_slice(request);
        Ok(seq)
    }

    /// The next sequence number; every 65535 requests without a reply a `GetInputFocus` goes
    /// first (its reply discarded), so the 16-bit numbers on the wire can be extended again.
    fn sequence(&mut self, answer: Answer) -> Result<SequenceNumber, X11Error> {
        let kind = match answer {
            Answer::Nothing => ReplyFdKind::NoReply,
            Answer::Reply(_) => ReplyFdKind::ReplyWithoutFDs,
        };
        loop {
            if let Some(seq) = self.protocol.send_request(kind) {
                if let Answer::Reply(max) = answer {
                    self.awaiting.push_back((seq, max));
                }
                return Ok(seq);
            }
            let Some(sync) = self.protocol.send_request(ReplyFdKind::ReplyWithoutFDs) else {
                return Err(X11Error::Protocol(
                    "no sequence number for a sync (internal error)".into(),
                ));
            };
            self.protocol
                .discard_reply(sync, DiscardMode::DiscardReplyAndError);
            self.awaiting.push_back((sync, SMALL_REPLY));
            // The replies of the syncs before this one may have arrived: reading them lets the
            // protocol state forget the requests they cover, so a pipelined run of millions of
            // requests keeps at most two syncs' worth in memory.
            self.fill(None)?;
            if self.out.len() + GET_INPUT_FOCUS.len() > BUFFER {
                self.flush()?;
            }
            self.counters.requests += 1;
            self.out.extend_from_slice(&GET_INPUT_FOCUS);
        }
    }

    /// Buffers a request of x11rb-protocol with a reply of at most `max_reply` bytes; `major`
    /// is its extension's opcode (0 for the core protocol).
    pub fn request<R: ReplyRequest>(
        &mut self,
        request: R,
        major: u8,
        max_reply: usize,
    ) -> Result<SequenceNumber, X11Error> {
        let (bytes, _) = request.serialize(major);
        self.send(&[&bytes], Answer::Reply(max_reply))
    }

    /// Buffers a request of x11rb-protocol without a reply.
    pub fn void<R: VoidRequest>(&mut self, request: R, major: u8) -> Result<(), X11Error> {
        let (bytes, _) = request.serialize(major);
        self.send(&[&bytes], Answer::Nothing).map(|_| ())
    }

    /// Sends everything buffered: one `send(2)` (more only when the socket takes part).
    pub fn flush(&mut self) -> Result<(), X11Error> {
        let mut wait = Wait::new(self.timeout, NO_ANSWER);
        self.flush_within(&mut wait)
    }

    /// [`Wire::flush`] as part of `wait`.
    fn flush_within(&mut self, wait: &mut Wait) -> Result<(), X11Error> {
        if self.out.is_empty() {
            return Ok(());
        }
        let out = std::mem::take(&mut self.out);
        let result = self.send_bytes(&[&out], wait);
        self.out = out;
        self.out.clear();
        result
    }

    fn send_bytes(&mut self, slices: &[&[u8]], wait: &mut Wait) -> Result<(), X11Error> {
        let mut iov: Vec<libc::iovec> = slices
            .iter()
            .filter(|s| !s.is_empty())
            .map(|s| libc::iovec {
                iov_base: s.as_ptr() as *mut libc::c_void,
                iov_len: s.len(),
            })
            .collect();
        let mut first = 0;
        while first < iov.len() {
            let blocking = wait.blocking();
            let flags = if blocking {
                libc::MSG_NOSIGNAL
            } else {
                self.ready(wait, libc::POLLOUT, TOOK_NOTHING)?;
                libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT
            };
            // SAFETY: a msghdr over iovecs that point into the live slices above.
            let n = unsafe {
                let mut msg: libc::msghdr = std::mem::zeroed();
                msg.msg_iov = iov[first..].as_mut_ptr();
                msg.msg_iovlen = iov.len() - first;
                libc::sendmsg(self.fd.as_raw_fd(), &msg, flags)
            };
            self.counters.writes += 1;
            if n < 0 {
                let e = std::io::Error::last_os_error();
                match e.kind() {
                    std::io::ErrorKind::Interrupted => continue,
                    // the socket's timeout, the whole wait's
                    std::io::ErrorKind::WouldBlock if blocking => {
                        return Err(self.timed_out(wait, TOOK_NOTHING));
                    }
                    std::io::ErrorKind::WouldBlock => continue,
                    _ => return Err(os_error("writing to the X server", e)),
                }
            }
            let mut n = n as usize;
            self.counters.bytes_out += n as u64;
            while first < iov.len() && n >= iov[first].iov_len {
                n -= iov[first].iov_len;
                first += 1;
            }
            if n > 0 {
                // SAFETY: n is less than this iovec's length: the rest of the same slice.
                iov[first].iov_base = unsafe { iov[first].iov_base.cast::<u8>().add(n).cast() };
                iov[first].iov_len -= n;
            }
        }
        Ok(())
    }

    fn timed_out(&self, wait: &Wait, what: &str) -> X11Error {
        let came = match wait.came {
            0 => String::new(),
            n => format!("; {n} bytes came in that time"),
        };
        X11Error::Timeout(format!(
            "{what} within {} ms (--timeout{came})",
            self.timeout.as_millis()
        ))
    }

    /// Waits until the socket has `events` or the wait's deadline passes (an error).
    fn ready(&self, wait: &Wait, events: i16, what: &str) -> Result<(), X11Error> {
        match wait.deadline.ready(self.fd.as_raw_fd(), events) {
            Ok(true) => Ok(()),
            Ok(false) => Err(self.timed_out(wait, what)),
            Err(e) => Err(os_error("waiting for the X server", e)),
        }
    }

    /// One `recv(2)` of up to `len` bytes at `ptr` as part of `wait`: at least one byte, or
    /// an error (closed, timed out). With no wait, whatever has arrived, maybe nothing (0).
    fn recv_raw(
        &mut self,
        ptr: *mut u8,
        len: usize,
        mut wait: Option<&mut Wait>,
    ) -> Result<usize, X11Error> {
        loop {
            let blocking = wait.as_deref_mut().is_some_and(Wait::blocking);
            let flags = match wait.as_deref() {
                Some(w) if !blocking => {
                    self.ready(w, libc::POLLIN, w.what)?;
                    libc::MSG_DONTWAIT
                }
                Some(_) => 0,
                None => libc::MSG_DONTWAIT,
            };
            // SAFETY: the caller gives `len` writable bytes at `ptr`.
            let n = unsafe { libc::recv(self.fd.as_raw_fd(), ptr.cast(), len, flags) };
            self.counters.reads += 1;
            if n > 0 {
                if let Some(w) = wait.as_deref_mut() {
                    w.came += n as usize;
                }
                return Ok(n as usize);
            }
            if n == 0 {
                return Err(X11Error::Protocol(
                    "the X server closed the connection".into(),
                ));
            }
            let e = std::io::Error::last_os_error();
            match (e.kind(), wait.as_deref()) {
                (std::io::ErrorKind::Interrupted, _) => continue,
                (std::io::ErrorKind::WouldBlock, None) => return Ok(0),
                // the socket's timeout, the whole wait's
                (std::io::ErrorKind::WouldBlock, Some(w)) if blocking => {
                    return Err(self.timed_out(w, w.what));
                }
                (std::io::ErrorKind::WouldBlock, Some(_)) => continue,
                _ => return Err(os_error("reading from the X server", e)),
            }
        }
    }

    /// Reads what the server has sent (as part of `wait`: at least one byte; with none,
    /// whatever has arrived) and hands every complete packet to the protocol state. Memory
    /// grows with the bytes read, up to what the requests in flight allow.
    fn fill(&mut self, wait: Option<&mut Wait>) -> Result<(), X11Error> {
        if self.consumed > 0 {
            self.input.drain(..self.consumed);
            self.consumed = 0;
        }
        self.input.reserve(READ_CHUNK);
        let have = self.input.len();
        let room = self.input.capacity() - have;
        // SAFETY: `room` bytes of spare capacity after the `have` valid ones.
        let ptr = unsafe { self.input.as_mut_ptr().add(have) };
        let n = self.recv_raw(ptr, room, wait)?;
        // SAFETY: recv wrote `n` ≤ `room` bytes there.
        unsafe { self.input.set_len(have + n) };
        self.split()
    }

    /// Takes every complete packet out of `input`; a packet longer than it may be is refused
    /// as soon as its header is in, before its body is read.
    fn split(&mut self) -> Result<(), X11Error> {
        while self.input.len() - self.consumed >= 32 {
            let rest = &self.input[self.consumed..];
            let len = packet_len(rest);
            let max = self.limit(rest)?;
            if len > max {
                return Err(X11Error::Misbehaved(too_large(rest, len, max)));
            }
            if rest.len() < len {
                break;
            }
            let packet = rest[..len].to_vec();
            self.consumed += len;
            self.take(packet)?;
        }
        Ok(())
    }

    /// The most bytes the packet that starts with `head` may have: a reply, what the oldest
    /// request awaiting one allows (replies come in order); an error or an event, 32.
    fn limit(&self, head: &[u8]) -> Result<usize, X11Error> {
        if head[0] != 1 {
            return Ok(32);
        }
        let seq = u16::from_ne_bytes([head[2], head[3]]);
        match self.awaiting.front() {
            Some(&(s, max)) if s as u16 == seq => Ok(max),
            _ => Err(X11Error::Misbehaved(format!(
                "it sent a reply to no request the lab is waiting for (sequence number {seq})"
            ))),
        }
    }

    /// Hands `packet` to the protocol state, and moves the events out of it into the bounded
    /// queue.
    fn take(&mut self, packet: Vec<u8>) -> Result<(), X11Error> {
        let seq = u16::from_ne_bytes([packet[2], packet[3]]);
        // A reply or an error answers the oldest request awaiting a reply, if it is its.
        if packet[0] <= 1 && self.awaiting.front().is_some_and(|&(s, _)| s as u16 == seq) {
            self.awaiting.pop_front();
        }
        self.protocol.enqueue_packet(packet);
        while let Some((event, _)) = self.protocol.poll_for_event_with_sequence() {
            if self.events.len() >= MAX_EVENTS {
                return Err(self.flooded());
            }
            self.events.push_back(event);
        }
        Ok(())
    }

    /// The error of a full event queue: the first X error in it, if any (a refused request
    /// says more than the count), or the flood.
    fn flooded(&self) -> X11Error {
        match self.events.iter().find(|p| p[0] == 0) {
            Some(error) => X11Error::Protocol(describe_error(error)),
            None => X11Error::Misbehaved(format!(
                "it sent more than {MAX_EVENTS} events the lab had not read (a flood of events)"
            )),
        }
    }

    /// Waits for the reply to request `seq` (an X error is an `Err`).
    pub fn reply(&mut self, seq: SequenceNumber) -> Result<Vec<u8>, X11Error> {
        let mut wait = Wait::new(self.timeout, NO_ANSWER);
        self.flush_within(&mut wait)?;
        loop {
            if let Some((packet, _)) = self.protocol.poll_for_reply_or_error(seq) {
                if packet[0] == 0 {
                    return Err(X11Error::Protocol(describe_error(&packet)));
                }
                return Ok(packet);
            }
            self.fill(Some(&mut wait))?;
        }
    }

    /// Waits for the reply to request `seq` and parses it.
    pub fn reply_of<T: TryParse>(&mut self, seq: SequenceNumber) -> Result<T, X11Error> {
        let packet = self.reply(seq)?;
        T::try_parse(&packet)
            .map(|(reply, _)| reply)
            .map_err(|e| X11Error::Protocol(format!("an unreadable reply: {e}")))
    }

    /// `GetInputFocus` and its reply: every request before it has been handled.
    pub fn sync(&mut self) -> Result<(), X11Error> {
        let seq = self.send_whole(&GET_INPUT_FOCUS, Answer::Reply(SMALL_REPLY))?;
        self.reply(seq).map(|_| ())
    }

    /// The next event (or error of a request without a reply) if one has arrived: read without
    /// waiting when none is queued.
    pub fn poll_event(&mut self) -> Result<Option<Vec<u8>>, X11Error> {
        if let Some(packet) = self.events.pop_front() {
            return Ok(Some(packet));
        }
        self.flush()?;
        self.fill(None)?;
        Ok(self.events.pop_front())
    }

    /// Waits for the next event (or error of a request without a reply).
    pub fn wait_event(&mut self) -> Result<Vec<u8>, X11Error> {
        let mut wait = Wait::new(self.timeout, NO_ANSWER);
        self.flush_within(&mut wait)?;
        loop {
            if let Some(packet) = self.events.pop_front() {
                return Ok(packet);
            }
            self.fill(Some(&mut wait))?;
        }
    }

    /// Fails on the first error among the events that arrived; other events are dropped.
    pub fn check_errors(&mut self) -> Result<(), X11Error> {
        while let Some(packet) = self.poll_event()? {
            if packet[0] == 0 {
                return Err(X11Error::Protocol(describe_error(&packet)));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;

    /// A fake server's side: the setup reply of a server that takes `max_words`-unit requests
    /// and lists no extension.
    fn setup_reply(max_words: u16) -> Vec<u8> {
        let setup = Setup {
            status: 1,
            protocol_major_version: 11,
            protocol_minor_version: 0,
            length: 0,
            release_number: 1,
            resource_id_base: 0x200000,
            resource_id_mask: 0x1fffff,
            motion_buffer_size: 0,
            maximum_request_length: max_words,
            image_byte_order: xproto_crate::protocol::xproto::ImageOrder::LSB_FIRST,
            bitmap_format_bit_order: xproto_crate::protocol::xproto::ImageOrder::LSB_FIRST,
            bitmap_format_scanline_unit: 32,
            bitmap_format_scanline_pad: 32,
            min_keycode: 8,
            max_keycode: 255,
            vendor: b"fake".to_vec(),
            pixmap_formats: vec![],
            roots: vec![],
        };
        let mut bytes = xproto_crate::x11_utils::Serialize::serialize(&setup);
        let words = ((bytes.len() - 8) / 4) as u16;
        bytes[6..8].copy_from_slice(&words.to_ne_bytes());
        bytes
    }

    /// Reads the client's setup request from `server`.
    fn read_setup_request(server: &mut UnixStream) {
        let mut head = [0u8; 12];
        server.read_exact(&mut head).unwrap();
        let n = u16::from_ne_bytes([head[6], head[7]]) as usize;
        let d = u16::from_ne_bytes([head[8], head[9]]) as usize;
        let mut rest = vec![0u8; n.div_ceil(4) * 4 + d.div_ceil(4) * 4];
        server.read_exact(&mut rest).unwrap();
    }

    /// A reply to `seq` of `extra` four-byte units after the 32 bytes.
    fn reply(seq: u16, extra: u32, byte8: u8) -> Vec<u8> {
        let mut r = vec![0u8; 32 + 4 * extra as usize];
        r[0] = 1;
        r[2..4].copy_from_slice(&seq.to_ne_bytes());
        r[4..8].copy_from_slice(&extra.to_ne_bytes());
        r[8] = byte8;
        r
    }

    /// A connected wire and the fake server's socket (a server without BIG-REQUESTS).
    fn pair(timeout: Duration) -> (Wire, UnixStream) {
        let (client, server) = UnixStream::pair().unwrap();
        let handle = std::thread::spawn(move || {
            let mut server = server;
            read_setup_request(&mut server);
            server.write_all(&setup_reply(65535)).unwrap();
            // QueryExtension BIG-REQUESTS (8 bytes + 12 of name): not present.
            let mut q = [0u8; 20];
            server.read_exact(&mut q).unwrap();
            assert_eq!(q[0], 98, "QueryExtension");
            server.write_all(&reply(1, 0, 0)).unwrap();
            server
        });
        let (wire, setup) = Wire::connect(client.into(), Vec::new(), Vec::new(), timeout).unwrap();
        assert_eq!(setup.vendor, b"fake");
        (wire, handle.join().unwrap())
    }

    #[test]
    fn many_requests_go_out_in_one_write_per_flush() {
        let (mut wire, mut server) = pair(Duration::from_secs(5));
        let before = wire.counters();
        let request = [127u8, 0, 1, 0]; // NoOperation
        for _ in 0..1000 {
            wire.send(&[&request], Answer::Nothing).unwrap();
        }
        // 1000 × 4 bytes fit the buffer: nothing is written until the flush, then once.
        assert_eq!(wire.counters().writes, before.writes);
        wire.flush().unwrap();
        let after = wire.counters();
        assert_eq!(after.writes - before.writes, 1);
        assert_eq!(after.requests - before.requests, 1000);
        let mut got = vec![0u8; 4000];
        server.read_exact(&mut got).unwrap();
        assert!(got.chunks(4).all(|c| c == request));
    }

    #[test]
    fn a_full_buffer_is_flushed_before_the_request_that_does_not_fit() {
        let (mut wire, mut server) = pair(Duration::from_secs(5));
        let reader = std::thread::spawn(move || {
            let mut all = vec![0u8; 3 * 6000];
            server.read_exact(&mut all).unwrap();
            all
        });
        let mut request = vec![0u8; 6000];
        request[0] = 127;
        let before = wire.counters().writes;
        for _ in 0..3 {
            wire.send(&[&request], Answer::Nothing).unwrap();
        }
        wire.flush().unwrap();
        // two fit 16 KiB, the third waits for the next write
        assert_eq!(wire.counters().writes - before, 2);
        let all = reader.join().unwrap();
        assert_eq!(&all[..2], &[127, 0]);
        assert_eq!(u16::from_ne_bytes([all[2], all[3]]), 1500);
    }

    #[test]
    fn a_reply_that_arrives_in_pieces_is_put_together() {
        let (mut wire, mut server) = pair(Duration::from_secs(5));
        let writer = std::thread::spawn(move || {
            let mut req = [0u8; 4];
            server.read_exact(&mut req).unwrap();
            assert_eq!(req, GET_INPUT_FOCUS);
            // sequence 2 (1 was QueryExtension), 3 extra units, sent in three pieces
            let r = reply(2, 3, 7);
            for piece in [&r[..5], &r[5..33], &r[33..]] {
                server.write_all(piece).unwrap();
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        let seq = wire.send(&[&GET_INPUT_FOCUS], Answer::Reply(44)).unwrap();
        let got = wire.reply(seq).unwrap();
        assert_eq!(got.len(), 44);
        assert_eq!(got[8], 7);
        writer.join().unwrap();
    }

    #[test]
    fn an_error_reply_is_an_error_that_names_the_request() {
        let (mut wire, mut server) = pair(Duration::from_secs(5));
        let writer = std::thread::spawn(move || {
            let mut req = [0u8; 4];
            server.read_exact(&mut req).unwrap();
            let mut e = [0u8; 32];
            e[1] = 8; // BadMatch
            e[2..4].copy_from_slice(&2u16.to_ne_bytes());
            e[10] = 43;
            server.write_all(&e).unwrap();
        });
        let err = wire.sync().unwrap_err().to_string();
        assert!(
            err.contains("BadMatch") && err.contains("request 43.0"),
            "{err}"
        );
        writer.join().unwrap();
    }

    #[test]
    fn a_server_that_never_answers_times_out() {
        let (mut wire, _server) = pair(Duration::from_millis(200));
        let start = std::time::Instant::now();
        let err = wire.sync().unwrap_err();
        assert!(matches!(err, X11Error::Timeout(_)), "{err}");
        assert!(start.elapsed() >= Duration::from_millis(150));
        assert!(err.to_string().contains("200 ms"), "{err}");
    }

    #[test]
    fn a_reply_that_drips_in_times_out_once_for_the_whole_wait() {
        let (mut wire, mut server) = pair(Duration::from_millis(300));
        let writer = std::thread::spawn(move || {
            let mut req = [0u8; 4];
            server.read_exact(&mut req).unwrap();
            // a byte every 100 ms: each read gets one well within the timeout
            for b in reply(2, 0, 0) {
                if server.write_all(&[b]).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let start = std::time::Instant::now();
        let err = wire.sync().unwrap_err();
        let took = start.elapsed();
        assert!(matches!(err, X11Error::Timeout(_)), "{err}");
        assert!(took < Duration::from_millis(600), "{took:?}");
        assert!(err.to_string().contains("bytes came in that time"), "{err}");
        drop(wire);
        writer.join().unwrap();
    }

    #[test]
    fn a_reply_longer_than_its_request_allows_is_refused_before_its_body() {
        let (mut wire, mut server) = pair(Duration::from_secs(5));
        let writer = std::thread::spawn(move || {
            let mut req = [0u8; 4];
            server.read_exact(&mut req).unwrap();
            let mut head = reply(2, 0, 0);
            head[4..8].copy_from_slice(&u32::MAX.to_ne_bytes());
            server.write_all(&head).unwrap();
            server
        });
        let err = wire.sync().unwrap_err();
        assert!(matches!(err, X11Error::Misbehaved(_)), "{err}");
        assert!(
            err.to_string().contains("a reply of 17179869212 bytes")
                && err.to_string().contains("at most 32"),
            "{err}"
        );
        // only the header was read
        assert!(wire.input.capacity() <= 2 * READ_CHUNK);
        writer.join().unwrap();
    }

    #[test]
    fn a_reply_to_no_request_is_refused() {
        let (mut wire, mut server) = pair(Duration::from_secs(5));
        server.write_all(&reply(7, 0, 0)).unwrap();
        let err = wire.poll_event().unwrap_err();
        assert!(
            matches!(&err, X11Error::Misbehaved(m) if m.contains("sequence number 7")),
            "{err}"
        );
    }

    #[test]
    fn a_flood_of_events_fills_a_bounded_queue_and_is_an_error() {
        let (mut wire, mut server) = pair(Duration::from_secs(5));
        let writer = std::thread::spawn(move || {
            let mut req = [0u8; 4];
            server.read_exact(&mut req).unwrap();
            let mut event = [0u8; 32];
            event[0] = 6; // MotionNotify, never asked for
            let burst: Vec<u8> = event.iter().copied().cycle().take(32 * 1024).collect();
            while server.write_all(&burst).is_ok() {}
        });
        let err = wire.sync().unwrap_err();
        assert!(
            matches!(&err, X11Error::Misbehaved(m) if m.contains("flood of events")),
            "{err}"
        );
        assert_eq!(wire.events.len(), MAX_EVENTS);
        drop(wire);
        writer.join().unwrap();
    }

    #[test]
    fn in_a_flood_a_refused_request_is_the_error() {
        let (mut wire, mut server) = pair(Duration::from_secs(5));
        let writer = std::thread::spawn(move || {
            let mut req = [0u8; 4];
            server.read_exact(&mut req).unwrap();
            let mut error = [0u8; 32];
            error[1] = 8; // BadMatch of request 1 (QueryExtension)... an earlier one
            error[10] = 72;
            let _ = server.write_all(&error);
            let mut event = [0u8; 32];
            event[0] = 6;
            let burst: Vec<u8> = event.iter().copied().cycle().take(32 * 1024).collect();
            while server.write_all(&burst).is_ok() {}
        });
        let err = wire.sync().unwrap_err().to_string();
        assert!(
            err.contains("BadMatch") && err.contains("request 72.0"),
            "{err}"
        );
        drop(wire);
        writer.join().unwrap();
    }

    #[test]
    fn a_closed_connection_is_an_error() {
        let (mut wire, server) = pair(Duration::from_secs(5));
        drop(server);
        let err = wire.sync().unwrap_err().to_string();
        assert!(
            err.contains("closed the connection") || err.contains("writing to the X server"),
            "{err}"
        );
    }

    #[test]
    fn a_request_larger_than_the_server_takes_is_refused_before_anything_is_sent() {
        let (mut wire, _server) = pair(Duration::from_secs(5));
        let big = vec![0u8; SMALL_MAX + 4];
        let before = wire.counters();
        let err = wire.send(&[&big], Answer::Nothing).unwrap_err();
        assert!(matches!(err, X11Error::TooLarge(_)), "{err}");
        assert_eq!(wire.counters(), before);
    }

    #[test]
    fn a_sync_is_inserted_every_65535_requests_without_a_reply() {
        let (mut wire, mut server) = pair(Duration::from_secs(5));
        let reader = std::thread::spawn(move || {
            let mut syncs = 0;
            let mut buf = [0u8; 4];
            for _ in 0..70_001 {
                server.read_exact(&mut buf).unwrap();
                syncs += usize::from(buf == GET_INPUT_FOCUS);
            }
            syncs
        });
        let request = [127u8, 0, 1, 0];
        for _ in 0..70_000 {
            wire.send(&[&request], Answer::Nothing).unwrap();
        }
        wire.flush().unwrap();
        assert_eq!(reader.join().unwrap(), 1);
        assert_eq!(wire.counters().requests, 1 + 70_001);
    }

    #[test]
    fn packet_lengths_follow_the_protocol() {
        let mut head = [0u8; 32];
        head[0] = 0; // error
        assert_eq!(packet_len(&head), 32);
        head[0] = 1; // reply of 2 more units
        head[4..8].copy_from_slice(&2u32.to_ne_bytes());
        assert_eq!(packet_len(&head), 40);
        head[0] = 35 | 0x80; // generic event, sent by SendEvent
        assert_eq!(packet_len(&head), 40);
        head[0] = 12; // Expose
        assert_eq!(packet_len(&head), 32);
    }
}
