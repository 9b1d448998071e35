//! The floor: the peer's code called directly, in the same thread, with no transport at all.
//!
//! `send` hands the bytes to the peer's logic at once; whatever it answers is kept for the next
//! `recv`. What remains is the cost of the clock, of copying the payload and of checking it,
//! which every other transport also pays.
//!
//! The peer is anything that is a [`Callee`] (the lab's is the peer logic of `pattern.rs`):
//! naming that type here would make this module and the pattern module import each other.
//! The endpoint is generic over it, not a trait object, so the floor pays no indirect call.

use std::io;

use super::Endpoint;
use crate::lab::ipc::clock::Clock;

/// The peer's side as a function the in-process endpoint calls.
pub trait Callee {
    /// Whether it wants the time bytes arrive (so the endpoint reads the clock per send).
    fn needs_time(&self) -> bool;
    /// Handles `bytes` that arrived at `now`; `reply` hands a unit back to the caller.
    fn on_bytes(
        &mut self,
        bytes: &[u8],
        now: u64,
        reply: &mut dyn FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<()>;
    /// The caller closed: nothing more will arrive.
    fn finish(&mut self);
}

/// The client's side; the peer lives inside it.
pub struct InprocEndpoint<'a, C> {
    logic: C,
    clock: &'a dyn Clock,
    inbox: Vec<u8>,
    read: usize,
    closed: bool,
}

impl<'a, C: Callee> InprocEndpoint<'a, C> {
    /// An endpoint whose peer is `logic`.
    pub fn new(logic: C, clock: &'a dyn Clock) -> Self {
        InprocEndpoint {
            logic,
            clock,
            inbox: Vec::new(),
            read: 0,
            closed: false,
        }
    }
}

impl<C: Callee> Endpoint for InprocEndpoint<'_, C> {
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
