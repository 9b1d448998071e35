//! The floor: the peer's code called directly, in the same thread, with no transport at all.
//!
//! `send` hands the bytes to the peer's logic at once; whatever it answers is kept for the next
//! `recv`. What remains is the cost of the clock, of copying the payload and of checking it,
//! which every other transport also pays.

use std::io;

use super::Endpoint;
use crate::lab::ipc::clock::Clock;
use crate::lab::ipc::pattern::PeerLogic;

/// The client's side; the peer lives inside it.
pub struct InprocEndpoint<'a> {
    logic: PeerLogic<'a>,
    clock: &'a dyn Clock,
    inbox: Vec<u8>,
    read: usize,
    closed: bool,
}

impl<'a> InprocEndpoint<'a> {
    /// An endpoint whose peer is `logic`.
    pub fn new(logic: PeerLogic<'a>, clock: &'a dyn Clock) -> Self {
        InprocEndpoint {
            logic,
            clock,
            inbox: Vec::new(),
            read: 0,
            closed: false,
        }
    }
}

impl Endpoint for InprocEndpoint<'_> {
    fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        if self.read == self.inbox.len() {
            self.inbox.clear();
            self.read = 0;
        }
        let now = if self.logic.needs_time() {
            self.clock.now()
        } else {
            0
        };
        let inbox = &mut self.inbox;
        self.logic.on_bytes(bytes, now, &mut |unit| {
            inbox.extend_from_slice(unit);
            Ok(())
        })
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = buf.len().min(self.inbox.len() - self.read);
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "an in-process call has no answer to wait for",
            ));
        }
        buf[..n].copy_from_slice(&self.inbox[self.read..self.read + n]);
        self.read += n;
        Ok(n)
    }

    fn close(&mut self) -> io::Result<()> {
        if !self.closed {
            self.closed = true;
            self.logic.finish();
        }
        Ok(())
    }
}
