//! The peer's side of the results, in shared memory: how many messages arrived, when each
//! did, the peer's CPU time and context switches, and why it failed.
//!
//! The peer's reactions ([`super::pattern::PeerLogic`]) write it; whoever started the peer
//! ([`super::run`]) reads it. It is a memfd mapping, so a peer thread, a forked peer and a peer
//! program started afresh (which maps the memfd it was given) all write the same bytes, and a
//! peer that dies mid-run still leaves what it measured.
//!
//! It has a module of its own because the pattern logic and the code around the peer both use
//! it: in either's module it would make the pattern module and the peer module import each
//! other, so that neither could be understood or changed alone.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;

use super::shared::Mapping;
use super::usage::Usage;

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
}
