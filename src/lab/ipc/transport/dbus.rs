//! D-Bus through a real, private `dbus-daemon`: every message is routed by the broker, as
//! libkscreen's out-of-process backend was.
//!
//! latscope starts the daemon itself (its own config, its own socket in a private directory),
//! so nothing on the machine's buses is touched and no session is needed. Units travel one of
//! two ways ([`Calls`]): as method calls answered by method returns (`Echo(ay) → ay`), or as
//! method calls flagged NO_REPLY_EXPECTED (`Deliver(ay)`), answered, if at all, by calls the
//! other way. Each side finds the other by its unique name: the peer connects and says `Hello`
//! to the client's name. A process peer is a fresh `latscope` (not a fork: the async runtime
//! under zbus does not survive a fork).
//!
//! Which way to use is the caller's choice, passed as [`Calls`]: the lab picks method calls
//! for round-trip patterns and one-way calls for the others. The transport knows nothing of
//! patterns, like every other transport, so a new pattern never touches it.

use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures_lite::{StreamExt, future};
use zbus::message::{Flags, Type};
use zbus::{Connection, Message, MessageStream};

use super::{Endpoint, gone};
use crate::files::{self, PrivateDir};

const PATH: &str = "/org/latscope/Lab";
const IFACE: &str = "org.latscope.Lab1";
/// How long to wait for the daemon or the peer to come up.
const STARTUP: Duration = Duration::from_secs(20);
/// How often a waiting receive checks that the peer is still there.
const SLICE: Duration = Duration::from_millis(100);

/// The Debian package that has `dbus-daemon`.
pub const PACKAGE: &str = "dbus-daemon";

/// A private `dbus-daemon`, stopped when dropped.
#[derive(Debug)]
pub struct Bus {
    child: Child,
    address: String,
    _dir: PrivateDir,
}

fn other(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

/// Finds `dbus-daemon` on `PATH`.
pub fn find_daemon() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("dbus-daemon"))
        .find(|p| p.is_file())
}

/// The daemon's configuration: one listening socket in `dir`, everyone may talk to everyone.
pub fn config_text(dir: &Path) -> String {
    format!(
        r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:dir={}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"#,
        dir.display()
    )
}

impl Bus {
    /// Starts a daemon; the error names the package when it is not installed.
    pub fn start() -> io::Result<Bus> {
        let Some(daemon) = find_daemon() else {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("dbus-daemon not found on PATH (Debian: apt-get install {PACKAGE})"),
            ));
        };
        // A fresh 0700 directory under a random name (never one planted under a guessed
        // name), removed with the socket and config when the bus is dropped, on every path.
        let dir = files::private_dir("latscope-dbus-")?;
        let config = dir.path().join("bus.conf");
        std::fs::write(&config, config_text(dir.path()))?;
        let mut child = Command::new(&daemon)
            .arg(format!("--config-file={}", config.display()))
            .args(["--nofork", "--nopidfile", "--print-address=1"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| other(format!("cannot start {}: {e}", daemon.display())))?;
        let mut line = String::new();
        let stdout = child.stdout.take().ok_or_else(|| other("no stdout"))?;
        BufReader::new(stdout).read_line(&mut line)?;
        let address = line.trim().to_string();
        if address.is_empty() {
            let _ = child.kill();
            let _ = child.wait();
            return Err(other("dbus-daemon printed no address"));
        }
        Ok(Bus {
            child,
            address,
            _dir: dir,
        })
    }

    /// The address clients connect to.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The daemon's process id (for its CPU time and context switches).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Bus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How units travel over the bus. Both sides of an exchange must use the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Calls {
    /// each unit is a method call (`Echo`) that the other side answers with a method return:
    /// a request and its reply
    WithReply,
    /// each unit is a method call flagged NO_REPLY_EXPECTED (`Deliver`); an answer, if any, is
    /// such a call the other way
    NoReply,
}

/// One side of a D-Bus exchange.
pub struct DbusEndpoint {
    conn: Connection,
    stream: Option<MessageStream>,
    other: String,
    rpc: bool,
    /// the client's pending reply (rpc) or the body of the last delivered unit
    pending: Vec<u8>,
    read: usize,
    /// the peer's pending call to answer (rpc)
    call: Option<Message>,
    alive: Option<Box<dyn Fn() -> bool + Send>>,
    closed_by_other: bool,
}

impl std::fmt::Debug for DbusEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DbusEndpoint")
            .field("other", &self.other)
            .field("rpc", &self.rpc)
            .finish()
    }
}

fn connect(address: &str) -> io::Result<(Connection, MessageStream)> {
    async_io::block_on(async {
        let conn = zbus::connection::Builder::address(address)
            .map_err(other)?
            .build()
            .await
            .map_err(other)?;
        let stream = MessageStream::from(&conn);
        Ok((conn, stream))
    })
}

fn member_of(msg: &Message) -> Option<String> {
    let header = msg.header();
    if header.message_type() != Type::MethodCall {
        return None;
    }
    if header.interface().map(|i| i.as_str()) != Some(IFACE) {
        return None;
    }
    header.member().map(|m| m.to_string())
}

/// The client's side, once the peer has said hello. `alive` tells whether the peer is still
/// starting or running, so that a peer that fails is not waited for.
pub fn client(
    address: &str,
    calls: Calls,
    start_peer: impl FnOnce(&str) -> io::Result<Box<dyn Fn() -> bool + Send>>,
) -> io::Result<DbusEndpoint> {
    let (conn, stream) = connect(address)?;
    let own = conn
        .unique_name()
        .map(|n| n.to_string())
        .ok_or_else(|| other("no unique name on the bus"))?;
    let alive = start_peer(&own)?;
    let mut ep = DbusEndpoint {
        conn,
        stream: Some(stream),
        other: String::new(),
        rpc: calls == Calls::WithReply,
        pending: Vec::new(),
        read: 0,
        call: None,
        alive: Some(alive),
        closed_by_other: false,
    };
    let deadline = Instant::now() + STARTUP;
    loop {
        let msg = ep.next_message(Some(deadline))?;
        if member_of(&msg).as_deref() == Some("Hello") {
            let sender = msg.header().sender().map(|s| s.to_string());
            ep.other = sender.ok_or_else(|| other("Hello without a sender"))?;
            break;
        }
    }
    if ep.rpc {
        // Method returns come back through zbus's own reply matching; an idle stream
        // would only queue copies of them.
        ep.stream = None;
    }
    Ok(ep)
}

/// The peer's side: connects and says hello to `client`.
pub fn peer(address: &str, client: &str, calls: Calls) -> io::Result<DbusEndpoint> {
    let (conn, stream) = connect(address)?;
    let ep = DbusEndpoint {
        conn,
        stream: Some(stream),
        other: client.to_string(),
        rpc: calls == Calls::WithReply,
        pending: Vec::new(),
        read: 0,
        call: None,
        alive: None,
        closed_by_other: false,
    };
    ep.call_no_reply("Hello", &Vec::<u8>::new())?;
    Ok(ep)
}

impl DbusEndpoint {
    fn call_no_reply(&self, member: &str, body: &Vec<u8>) -> io::Result<()> {
        let msg = Message::method_call(PATH, member)
            .and_then(|b| b.destination(self.other.as_str()))
            .and_then(|b| b.interface(IFACE))
            .and_then(|b| b.with_flags(Flags::NoReplyExpected))
            .and_then(|b| b.build(body))
            .map_err(other)?;
        async_io::block_on(self.conn.send(&msg)).map_err(other)
    }

    fn peer_gone(&self) -> bool {
        self.alive.as_ref().is_some_and(|alive| !alive())
    }

    /// The next message, checking every [`SLICE`] that the peer is alive.
    fn next_message(&mut self, deadline: Option<Instant>) -> io::Result<Message> {
        loop {
            let stream = self
                .stream
                .as_mut()
                .ok_or_else(|| other("no message stream"))?;
            let next = async_io::block_on(future::or(async { Some(stream.next().await) }, async {
                async_io::Timer::after(SLICE).await;
                None
            }));
            match next {
                Some(Some(Ok(msg))) => return Ok(msg),
                Some(Some(Err(e))) => return Err(other(e)),
                Some(None) => return Err(gone("the D-Bus connection closed")),
                None if self.peer_gone() => return Err(gone("the D-Bus peer is gone")),
                None if deadline.is_some_and(|d| Instant::now() > d) => {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the D-Bus peer did not say hello in time",
                    ));
                }
                None => continue,
            }
        }
    }

    /// Waits for the next unit from the other side into `pending`; `false` at its close.
    fn next_unit(&mut self) -> io::Result<bool> {
        loop {
            let msg = self.next_message(None)?;
            match member_of(&msg).as_deref() {
                Some("Deliver") | Some("Echo") => {
                    self.pending = msg.body().deserialize::<Vec<u8>>().map_err(other)?;
                    self.read = 0;
                    if self.rpc {
                        self.call = Some(msg);
                    }
                    return Ok(true);
                }
                Some("Close") => return Ok(false),
                _ => continue,
            }
        }
    }
}

impl Endpoint for DbusEndpoint {
    fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        let body = bytes.to_vec();
        if !self.rpc {
            return self.call_no_reply("Deliver", &body);
        }
        if let Some(call) = self.call.take() {
            // The peer answers the call it received.
            return async_io::block_on(self.conn.reply(&call.header(), &body)).map_err(other);
        }
        let reply = async_io::block_on(self.conn.call_method(
            Some(self.other.as_str()),
            PATH,
            Some(IFACE),
            "Echo",
            &body,
        ))
        .map_err(|e| gone(&format!("D-Bus call failed: {e}")))?;
        self.pending = reply.body().deserialize::<Vec<u8>>().map_err(other)?;
        self.read = 0;
        Ok(())
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.read == self.pending.len() {
            if self.closed_by_other || (self.rpc && self.stream.is_none()) {
                return Ok(0);
            }
            if !self.next_unit()? {
                self.closed_by_other = true;
                return Ok(0);
            }
        }
        let n = buf.len().min(self.pending.len() - self.read);
        buf[..n].copy_from_slice(&self.pending[self.read..self.read + n]);
        self.read += n;
        Ok(n)
    }

    fn close(&mut self) -> io::Result<()> {
        self.call_no_reply("Close", &Vec::new())
    }

    fn watch_peer(&mut self, alive: Box<dyn Fn() -> bool + Send>) {
        self.alive = Some(alive);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_daemon_listens_only_in_its_private_directory() {
        let text = config_text(Path::new("/run/user/7/latscope-dbus-1"));
        assert!(text.contains("<listen>unix:dir=/run/user/7/latscope-dbus-1</listen>"));
        assert!(text.contains("<type>session</type>"));
    }
}
