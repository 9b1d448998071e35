//! Transports: one file per way of moving bytes, all behind [`Endpoint`].
//!
//! An endpoint sends *write units* (one message, or several when a pattern buffers them, as
//! Xlib does) and receives whatever the transport delivers: a byte stream (pipe, Unix stream
//! socket, TCP) may split or join units, a message transport (seqpacket, channel, shared-memory
//! ring, D-Bus) delivers each unit whole. The patterns frame messages themselves, so both kinds
//! are handled alike.

pub mod channel;
pub mod dbus;
pub mod fd;
pub mod inproc;
pub mod shm;

use std::io;
use std::os::fd::BorrowedFd;

/// One side of a transport.
pub trait Endpoint {
    /// Sends `bytes` as one write unit, waiting while the transport is full.
    fn send(&mut self, bytes: &[u8]) -> io::Result<()>;
    /// Receives at least one byte into `buf`, waiting for it; `Ok(0)` means the other side
    /// closed and everything it sent has been received.
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize>;
    /// No more sends: the other side reads end-of-stream once it has drained what was sent.
    fn close(&mut self) -> io::Result<()>;
    /// How to tell, while waiting, that the other side is gone (for transports that cannot see
    /// it by themselves, such as shared memory).
    fn watch_peer(&mut self, _alive: Box<dyn Fn() -> bool + Send>) {}
    /// The descriptors that carry this endpoint into a peer program, which rebuilds it from
    /// them (`FdEndpoint::from_fds`, `ShmEndpoint::peer_of`); none for a transport that lives
    /// in one process's memory.
    fn descriptors(&self) -> Vec<BorrowedFd<'_>> {
        Vec::new()
    }
}

/// Reads exactly `buf.len()` bytes; `Ok(false)` if the stream ended first.
pub fn recv_exact(ep: &mut dyn Endpoint, buf: &mut [u8]) -> io::Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        let n = ep.recv(&mut buf[got..])?;
        if n == 0 {
            return Ok(false);
        }
        got += n;
    }
    Ok(true)
}

/// An error for a peer that closed or vanished mid-exchange.
pub fn gone(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, what.to_string())
}
