//! A small HTTP/1.1 server with hard limits, for `live --serve`'s `GET /metrics`.
//!
//! Why not tiny_http (used before): it cannot be bounded. It reads a request line or header
//! with no size limit (a 500 MB header line grew the tracer to 2 GB), starts a thread for every
//! connection that finds no idle one (3,000 idle connections → 3,006 threads) and has no read
//! or idle timeout. None of it is configurable, and hyper would bring an async runtime for one
//! route. So the connection handling is written here, and the parsing of a request head is
//! left to httparse (hyper's parser, no dependencies).
//!
//! One thread polls (`poll(2)`) the listener, a wake-up socket and at most
//! [`Limits::max_connections`] non-blocking connections, so nothing a client does can block
//! it or make it grow:
//! * a request head is at most [`Limits::max_head`] bytes (8 KiB): a longer one gets `431` and
//!   the connection is closed; at most that much is buffered per connection;
//! * a head must be complete within [`Limits::head_timeout`] of its first byte, an idle
//!   connection is closed after [`Limits::idle_timeout`], a response not taken within
//!   [`Limits::write_timeout`] is dropped;
//! * when every slot is taken, a new connection evicts the one idle longest, so a crowd of
//!   idle clients cannot lock a scraper out (a scraper sends its request as soon as it has
//!   connected, and the newest connections are evicted last);
//! * requests with a body are answered and the connection closed (only `GET` and `HEAD` are
//!   served; nothing is read past a head). Keep-alive and pipelining work as HTTP/1.1 says.
//!
//! The handler runs on the server thread; dropping the [`Server`] wakes it and joins it
//! (nothing in it blocks, so the join is bounded by one response's rendering).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The limits a server enforces.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// the most bytes of a request head (request line and headers)
    pub max_head: usize,
    /// the most connections held open at once
    pub max_connections: usize,
    /// a request head must be complete this long after its first byte
    pub head_timeout: Duration,
    /// a connection with no request in progress is closed after this long
    pub idle_timeout: Duration,
    /// a response must be taken by the client within this long
    pub write_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_head: 8 * 1024,
            max_connections: 64,
            head_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(30),
        }
    }
}

/// The parts of a request a handler sees.
#[derive(Debug)]
pub struct Request<'a> {
    /// `GET`, `HEAD`, ...
    pub method: &'a str,
    /// the request target, query included
    pub path: &'a str,
    /// every `Accept` header, joined with commas
    pub accept: String,
}

/// What a handler answers.
#[derive(Debug)]
pub struct Response {
    /// status code
    pub status: u16,
    /// `Content-Type`
    pub content_type: &'static str,
    /// the body (not sent for `HEAD`)
    pub body: Vec<u8>,
}

impl Response {
    /// A plain-text response.
    pub fn text(status: u16, body: &str) -> Response {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.as_bytes().to_vec(),
        }
    }
}

/// A running server; dropping it stops and joins its thread.
pub struct Server {
    wake: UnixStream,
    thread: Option<JoinHandle<()>>,
    /// the address actually bound
    pub addr: SocketAddr,
}

impl Server {
    /// Binds `addr` and serves requests with `handler` on a new thread.
    pub fn start<H>(addr: SocketAddr, limits: Limits, handler: H) -> io::Result<Server>
    where
        H: Fn(&Request) -> Response + Send + 'static,
    {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let bound = listener.local_addr()?;
        let (wake, woken) = UnixStream::pair()?;
        woken.set_nonblocking(true)?;
        let thread = std::thread::Builder::new()
            .name("latscope-http".into())
            .spawn(move || {
                Loop {
                    listener,
                    woken,
                    limits,
                    connections: Vec::new(),
                    handler,
                }
                .run()
            })?;
        Ok(Server {
            wake,
            thread: Some(thread),
            addr: bound,
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.wake.write_all(&[1]);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("addr", &self.addr).finish()
    }
}

/// One client connection.
struct Connection {
    stream: TcpStream,
    /// bytes of the request head being read (at most `max_head`, plus pipelined bytes)
    input: Vec<u8>,
    /// the response being written, and how much of it went
    output: Vec<u8>,
    sent: usize,
    /// close once the response is written
    close: bool,
    /// the response is written and our side shut: read and discard until the client closes
    /// (closing with unread bytes would reset the connection before the client read the answer)
    draining: bool,
    /// when it is closed if it makes no progress
    deadline: Instant,
    /// the last time it read or wrote (the idlest is evicted first)
    active: Instant,
}

impl Connection {
    fn writing(&self) -> bool {
        self.sent < self.output.len()
    }
}

/// What became of a connection after some I/O.
enum Next {
    Keep,
    Close,
}

struct Loop<H> {
    listener: TcpListener,
    woken: UnixStream,
    limits: Limits,
    connections: Vec<Connection>,
    handler: H,
}

impl<H: Fn(&Request) -> Response> Loop<H> {
    fn run(mut self) {
        let mut fds: Vec<libc::pollfd> = Vec::new();
        loop {
            fds.clear();
            let pollfd = |fd: i32, events: i16| libc::pollfd {
                fd,
                events,
                revents: 0,
            };
            fds.push(pollfd(self.woken.as_raw_fd(), libc::POLLIN));
            fds.push(pollfd(self.listener.as_raw_fd(), libc::POLLIN));
            for c in &self.connections {
                let events = if c.writing() {
                    libc::POLLOUT
                } else {
                    libc::POLLIN
                };
                fds.push(pollfd(c.stream.as_raw_fd(), events));
            }
            let now = Instant::now();
            let wait = self
                .connections
                .iter()
                .map(|c| c.deadline.saturating_duration_since(now))
                .min()
                .unwrap_or(Duration::from_secs(1))
                .min(Duration::from_secs(1));
            // Rounded up: a deadline is never polled for in a busy loop of zero timeouts.
            let wait_ms = wait.as_millis().min(1000) as i32 + 1;
            // SAFETY: `fds` is a valid array of `fds.len()` pollfd structures.
            let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, wait_ms) };
            if ready < 0 {
                if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return;
            }
            if fds[0].revents != 0 {
                return;
            }
            self.serve_ready(&fds[2..]);
            self.expire(Instant::now());
            if fds[1].revents != 0 {
                self.accept();
            }
        }
    }

    /// Reads or writes each connection `poll` found ready; closes those that are done.
    fn serve_ready(&mut self, fds: &[libc::pollfd]) {
        // `fds` holds one entry per connection, in order, from before this call.
        let mut keep = Vec::with_capacity(self.connections.len());
        for (mut c, fd) in std::mem::take(&mut self.connections).into_iter().zip(fds) {
            let next = if fd.revents == 0 {
                Next::Keep
            } else if c.writing() {
                self.write(&mut c)
            } else {
                self.read(&mut c)
            };
            if let Next::Keep = next {
                keep.push(c);
            }
        }
        self.connections = keep;
    }

    fn read(&self, c: &mut Connection) -> Next {
        let mut chunk = [0u8; 4096];
        if c.draining {
            return drain(c, &mut chunk);
        }
        loop {
            // Never more than a head's worth of buffered bytes, pipelined or not.
            let room = (self.limits.max_head + 1).saturating_sub(c.input.len());
            if room == 0 {
                break;
            }
            let want = room.min(chunk.len());
            match c.stream.read(&mut chunk[..want]) {
                Ok(0) => return Next::Close,
                Ok(n) => {
                    let now = Instant::now();
                    if c.input.is_empty() {
                        c.deadline = c.deadline.min(now + self.limits.head_timeout);
                    }
                    c.active = now;
                    c.input.extend_from_slice(&chunk[..n]);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return Next::Close,
            }
        }
        self.answer(c)
    }

    /// Answers the request at the start of `c.input` if its head is complete, and starts
    /// writing the response.
    fn answer(&self, c: &mut Connection) -> Next {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut request = httparse::Request::new(&mut headers);
        let parsed = if head_complete(&c.input) {
            request.parse(&c.input)
        } else if c.input.len() > self.limits.max_head {
            Err(httparse::Error::TooManyHeaders)
        } else {
            return Next::Keep;
        };
        let (response, head_len, close, head_only) = match parsed {
            Ok(httparse::Status::Complete(n)) if n <= self.limits.max_head => {
                let (response, close) = self.handle(&request);
                (response, n, close, request.method == Some("HEAD"))
            }
            Ok(_) | Err(httparse::Error::TooManyHeaders) => (
                Response::text(
                    431,
                    &format!(
                        "request head longer than {} bytes or with more than {} headers\n",
                        self.limits.max_head,
                        headers.len()
                    ),
                ),
                c.input.len(),
                true,
                false,
            ),
            Err(e) => (
                Response::text(400, &format!("bad request: {e}\n")),
                c.input.len(),
                true,
                false,
            ),
        };
        c.input.drain(..head_len);
        c.output = encode(&response, close, head_only);
        c.sent = 0;
        c.close = close;
        c.deadline = Instant::now() + self.limits.write_timeout;
        self.write(c)
    }

    /// Calls the handler; returns its response and whether the connection closes after it.
    fn handle(&self, request: &httparse::Request) -> (Response, bool) {
        let header = |name: &str| {
            request
                .headers
                .iter()
                .filter(|h| h.name.eq_ignore_ascii_case(name))
                .map(|h| String::from_utf8_lossy(h.value).into_owned())
                .collect::<Vec<_>>()
                .join(",")
        };
        let connection = header("Connection").to_ascii_lowercase();
        // A body is never read: the connection closes after the response instead.
        let body = !header("Transfer-Encoding").is_empty()
            || !matches!(header("Content-Length").trim(), "" | "0");
        let close = body
            || connection.contains("close")
            || (request.version == Some(0) && !connection.contains("keep-alive"));
        let response = (self.handler)(&Request {
            method: request.method.unwrap_or(""),
            path: request.path.unwrap_or(""),
            accept: header("Accept"),
        });
        (response, close)
    }

    fn write(&self, c: &mut Connection) -> Next {
        while c.writing() {
            match c.stream.write(&c.output[c.sent..]) {
                Ok(0) => return Next::Close,
                Ok(n) => {
                    c.sent += n;
                    c.active = Instant::now();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Keep,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Next::Close,
            }
        }
        if c.close {
            let _ = c.stream.shutdown(std::net::Shutdown::Write);
            c.draining = true;
            c.input = Vec::new();
            c.deadline = Instant::now() + LINGER;
            return Next::Keep;
        }
        c.output = Vec::new();
        c.sent = 0;
        c.deadline = Instant::now() + self.limits.idle_timeout;
        if c.input.is_empty() {
            Next::Keep
        } else {
            // A pipelined request already read.
            c.deadline = c.deadline.min(Instant::now() + self.limits.head_timeout);
            self.answer(c)
        }
    }

    /// Closes the connections past their deadline.
    fn expire(&mut self, now: Instant) {
        self.connections.retain(|c| c.deadline > now);
    }

    /// Accepts every waiting connection, evicting the idlest when all slots are taken.
    fn accept(&mut self) {
        loop {
            let stream = match self.listener.accept() {
                Ok((stream, _)) => stream,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // WouldBlock, or out of descriptors (EMFILE): try again at the next poll.
                Err(_) => return,
            };
            if stream.set_nonblocking(true).is_err() {
                continue;
            }
            if self.connections.len() >= self.limits.max_connections.max(1) {
                let idlest = self
                    .connections
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, c)| c.active)
                    .map(|(i, _)| i);
                if let Some(i) = idlest {
                    self.connections.swap_remove(i);
                }
            }
            let now = Instant::now();
            self.connections.push(Connection {
                stream,
                input: Vec::new(),
                output: Vec::new(),
                sent: 0,
                close: false,
                draining: false,
                deadline: now + self.limits.idle_timeout.min(self.limits.head_timeout),
                active: now,
            });
        }
    }
}

/// How long a closing connection's unread bytes are discarded before it is closed anyway.
const LINGER: Duration = Duration::from_secs(1);

/// Reads and discards what a closing connection's client still sends, until it closes.
fn drain(c: &mut Connection, chunk: &mut [u8]) -> Next {
    // A few reads per wake-up: a client sending without end does not hold the thread.
    for _ in 0..16 {
        match c.stream.read(chunk) {
            Ok(0) => return Next::Close,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Keep,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Next::Close,
        }
    }
    Next::Keep
}

/// Whether `input` holds a whole request head (ended by an empty line; bare LF accepted).
fn head_complete(input: &[u8]) -> bool {
    memchr::memmem::find(input, b"\n\r\n").is_some()
        || memchr::memmem::find(input, b"\n\n").is_some()
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        _ => "Internal Server Error",
    }
}

/// A response's bytes: status line, headers, and the body unless `head_only`.
fn encode(response: &Response, close: bool, head_only: bool) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{}\r\n",
        response.status,
        reason(response.status),
        response.content_type,
        response.body.len(),
        if close { "Connection: close\r\n" } else { "" }
    )
    .into_bytes();
    if !head_only {
        out.extend_from_slice(&response.body);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn echo() -> Server {
        let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let limits = Limits {
            max_connections: 4,
            head_timeout: Duration::from_millis(300),
            idle_timeout: Duration::from_millis(600),
            ..Limits::default()
        };
        Server::start(addr, limits, |r: &Request| {
            Response::text(200, &format!("{} {} [{}]", r.method, r.path, r.accept))
        })
        .unwrap()
    }

    fn exchange(server: &Server, request: &[u8]) -> String {
        let mut s = TcpStream::connect(server.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(request).unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn a_get_is_answered_with_its_length_and_accept_headers_are_joined() {
        let server = echo();
        let out = exchange(
            &server,
            b"GET /metrics?x=1 HTTP/1.1\r\nAccept: a\r\naccept: b\r\nConnection: close\r\n\r\n",
        );
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
        assert!(out.contains("Content-Length: 22\r\n"), "{out}");
        assert!(out.ends_with("\r\n\r\nGET /metrics?x=1 [a,b]"), "{out}");
    }

    #[test]
    fn pipelined_keep_alive_requests_are_answered_in_order_and_head_has_no_body() {
        let server = echo();
        let out = exchange(
            &server,
            b"GET /a HTTP/1.1\r\n\r\nHEAD /b HTTP/1.1\r\n\r\nGET /c HTTP/1.0\r\n\r\n",
        );
        let bodies: Vec<&str> = out.split("\r\n\r\n").skip(1).collect();
        assert_eq!(out.matches("HTTP/1.1 200 OK").count(), 3, "{out}");
        assert!(bodies[0].starts_with("GET /a []HTTP/1.1"), "{out}");
        assert!(bodies[1].starts_with("HTTP/1.1"), "HEAD sent a body: {out}");
        assert_eq!(bodies[2], "GET /c []", "{out}");
    }

    #[test]
    fn a_head_over_8_kib_is_refused_with_431_after_reading_at_most_8_kib() {
        let server = echo();
        let mut request = b"GET / HTTP/1.1\r\nX: ".to_vec();
        request.extend(std::iter::repeat_n(b'a', 8 * 1024));
        let mut s = TcpStream::connect(server.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        // The server answers and closes before the rest is sent: a write may fail.
        let _ = s.write_all(&request);
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        let out = String::from_utf8_lossy(&out);
        assert!(out.starts_with("HTTP/1.1 431 "), "{out}");
    }

    #[test]
    fn garbage_is_a_400_and_a_slow_head_is_cut_at_its_timeout() {
        let server = echo();
        let out = exchange(&server, b"\x01\x02 nonsense\r\n\r\n");
        assert!(out.starts_with("HTTP/1.1 400 "), "{out}");
        let mut s = TcpStream::connect(server.addr).unwrap();
        s.write_all(b"GET / HT").unwrap();
        let started = Instant::now();
        let mut out = Vec::new();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = s.read_to_end(&mut out);
        assert!(out.is_empty());
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn idle_clients_filling_every_slot_are_evicted_for_a_new_one() {
        let server = echo();
        let idle: Vec<TcpStream> = (0..20)
            .map(|_| TcpStream::connect(server.addr).unwrap())
            .collect();
        std::thread::sleep(Duration::from_millis(50));
        let out = exchange(&server, b"GET /m HTTP/1.0\r\n\r\n");
        assert!(out.ends_with("GET /m []"), "{out}");
        drop(idle);
    }
}
