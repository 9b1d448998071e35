//! Two threads over `std::sync::mpsc` channels (one per direction): the in-process hand-off
//! a Rust program would write, with a wake-up of the other thread per message when it waits.
//!
//! The channels are bounded (`sync_channel`), so a fast writer blocks like it would on a pipe
//! instead of queueing without limit.

use std::io;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use super::{Endpoint, gone};

/// Write units a channel holds before the writer blocks.
pub const CAPACITY: usize = 64;

/// One side.
#[derive(Debug)]
pub struct ChannelEndpoint {
    tx: Option<SyncSender<Vec<u8>>>,
    rx: Receiver<Vec<u8>>,
    pending: Vec<u8>,
    read: usize,
}

impl ChannelEndpoint {
    /// A connected pair: (client side, peer side).
    pub fn pair() -> (ChannelEndpoint, ChannelEndpoint) {
        let (to_peer, from_client) = sync_channel(CAPACITY);
        let (to_client, from_peer) = sync_channel(CAPACITY);
        let side = |tx, rx| ChannelEndpoint {
            tx: Some(tx),
            rx,
            pending: Vec::new(),
            read: 0,
        };
        (side(to_peer, from_peer), side(to_client, from_client))
    }
}

impl Endpoint for ChannelEndpoint {
    fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        let tx = self.tx.as_ref().ok_or_else(|| gone("send after close"))?;
        tx.send(bytes.to_vec())
            .map_err(|_| gone("the peer thread dropped its channel"))
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.read == self.pending.len() {
            match self.rx.recv() {
                Ok(unit) => {
                    self.pending = unit;
                    self.read = 0;
                }
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.pending.len() - self.read);
        buf[..n].copy_from_slice(&self.pending[self.read..self.read + n]);
        self.read += n;
        Ok(n)
    }

    fn close(&mut self) -> io::Result<()> {
        self.tx = None;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_channel_pair_carries_units_and_ends_when_closed() {
        let (mut a, mut b) = ChannelEndpoint::pair();
        a.send(b"abc").unwrap();
        a.close().unwrap();
        let mut buf = [0u8; 2];
        assert_eq!(b.recv(&mut buf).unwrap(), 2);
        assert_eq!(b.recv(&mut buf).unwrap(), 1);
        assert_eq!(b.recv(&mut buf).unwrap(), 0);
    }
}
