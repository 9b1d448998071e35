//! A shared-memory ring per direction, N slots each, woken by futex or by spinning.
//!
//! Each ring has a head (slots produced) and a tail (slots consumed) on cache lines of their
//! own. The writer copies a unit into the slot at `head`, then publishes `head + 1`; the reader
//! copies it out and publishes `tail + 1`. With `Wake::Futex` a side that finds nothing to do
//! raises its *waiting* flag, re-checks, and sleeps in `futex(FUTEX_WAIT)`; the other side wakes
//! it only when the flag is up, so a busy exchange makes no system calls. (Flag and index are
//! stored and loaded sequentially consistent on both sides, so a wake-up cannot be lost.) With
//! `Wake::Spin` a side polls and never sleeps: the lowest latency, for the price of a core,
//! which the CPU-time column shows. The futexes are not private, so the ring works between
//! processes as well as threads.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use super::{Endpoint, gone};
use crate::lab::ipc::shared::Mapping;

/// How a waiting side learns that there is work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// sleep in the kernel, woken by the other side
    Futex,
    /// poll the index
    Spin,
}

const LINE: usize = 64;
const HEAD: usize = 0;
const TAIL: usize = LINE;
const CLOSED: usize = 2 * LINE;
const READER_WAITING: usize = 2 * LINE + 4;
const WRITER_WAITING: usize = 2 * LINE + 8;
const HEADER: usize = 3 * LINE;
/// Bytes before a slot's data: its length.
const SLOT_HEADER: usize = 8;
/// How long a futex sleep lasts before the peer's liveness is checked again.
const WAIT_SLICE_NS: i64 = 50_000_000;

/// The shape of a ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingShape {
    /// number of slots
    pub slots: usize,
    /// the largest unit a slot holds, bytes
    pub slot_bytes: usize,
}

impl RingShape {
    fn stride(&self) -> usize {
        (SLOT_HEADER + self.slot_bytes).div_ceil(LINE) * LINE
    }

    fn bytes(&self) -> usize {
        HEADER + self.slots * self.stride()
    }
}

#[derive(Debug, Clone)]
struct Ring {
    map: Arc<Mapping>,
    base: usize,
    shape: RingShape,
}

impl Ring {
    fn word(&self, offset: usize) -> &AtomicU32 {
        self.map.atomic_u32(self.base + offset)
    }

    fn slot(&self, index: u32) -> usize {
        self.base + HEADER + (index as usize % self.shape.slots) * self.shape.stride()
    }
}

/// One side: writes into one ring, reads from the other.
pub struct ShmEndpoint {
    tx: Ring,
    rx: Ring,
    wake: Wake,
    alive: Option<Box<dyn Fn() -> bool + Send>>,
}

impl std::fmt::Debug for ShmEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShmEndpoint")
            .field("shape", &self.tx.shape)
            .field("wake", &self.wake)
            .finish()
    }
}

fn futex(word: &AtomicU32, op: libc::c_int, value: u32, timeout: Option<&libc::timespec>) {
    let timeout = timeout.map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `word` is a valid aligned u32 for the duration of the call; FUTEX_WAIT and
    // FUTEX_WAKE only read it.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            op,
            value,
            timeout,
            std::ptr::null::<u32>(),
            0,
        );
    }
}

fn wake_one(word: &AtomicU32) {
    futex(word, libc::FUTEX_WAKE, 1, None);
}

/// Why a wait ended without the awaited change.
enum Stop {
    Closed,
}

impl ShmEndpoint {
    /// A connected pair in one new shared mapping: (client side, peer side).
    pub fn pair(shape: RingShape, wake: Wake) -> io::Result<(ShmEndpoint, ShmEndpoint)> {
        let map = Arc::new(Mapping::new(2 * shape.bytes())?);
        Ok(Self::sides(map, shape, wake))
    }

    /// The peer side rebuilt from the memfd of a pair's mapping (its
    /// [`Endpoint::descriptors`]), in a peer program.
    pub fn peer_of(fd: OwnedFd, shape: RingShape, wake: Wake) -> io::Result<ShmEndpoint> {
        let map = Arc::new(Mapping::map(fd, 2 * shape.bytes())?);
        Ok(Self::sides(map, shape, wake).1)
    }

    /// (client side, peer side) of the two rings in `map`.
    fn sides(map: Arc<Mapping>, shape: RingShape, wake: Wake) -> (ShmEndpoint, ShmEndpoint) {
        let ring = |base| Ring {
            map: Arc::clone(&map),
            base,
            shape,
        };
        let (a, b) = (ring(0), ring(shape.bytes()));
        let side = |tx, rx| ShmEndpoint {
            tx,
            rx,
            wake,
            alive: None,
        };
        (side(a.clone(), b.clone()), side(b, a))
    }

    fn peer_gone(&self) -> bool {
        self.alive.as_ref().is_some_and(|alive| !alive())
    }

    /// Waits until `word` differs from `current`. With `closed_ends_it`, a closed ring ends the
    /// wait too.
    fn wait_change(
        &self,
        ring: &Ring,
        word: usize,
        current: u32,
        flag: usize,
        closed_ends_it: bool,
    ) -> io::Result<Result<(), Stop>> {
        let (word, flag) = (ring.word(word), ring.word(flag));
        let mut spins: u64 = 0;
        loop {
            if word.load(Ordering::Acquire) != current {
                return Ok(Ok(()));
            }
            if closed_ends_it && ring.word(CLOSED).load(Ordering::Acquire) != 0 {
                return Ok(Err(Stop::Closed));
            }
            match self.wake {
                Wake::Spin => {
                    std::hint::spin_loop();
                    spins += 1;
                    if spins.is_multiple_of(4096) {
                        // Never starve the other side if both share one CPU.
                        std::thread::yield_now();
                    }
                    if spins.is_multiple_of(1 << 20) && self.peer_gone() {
                        return Err(gone("the peer is gone"));
                    }
                }
                Wake::Futex => {
                    flag.store(1, Ordering::SeqCst);
                    if word.load(Ordering::SeqCst) == current {
                        let slice = libc::timespec {
                            tv_sec: 0,
                            tv_nsec: WAIT_SLICE_NS,
                        };
                        futex(word, libc::FUTEX_WAIT, current, Some(&slice));
                    }
                    flag.store(0, Ordering::SeqCst);
                    if word.load(Ordering::Acquire) == current && self.peer_gone() {
                        return Err(gone("the peer is gone"));
                    }
                }
            }
        }
    }
}

impl Endpoint for ShmEndpoint {
    fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        let ring = &self.tx;
        if bytes.len() > ring.shape.slot_bytes {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "a {}-byte unit does not fit a {}-byte ring slot",
                    bytes.len(),
                    ring.shape.slot_bytes
                ),
            ));
        }
        let head = ring.word(HEAD).load(Ordering::Relaxed);
        loop {
            let tail = ring.word(TAIL).load(Ordering::Acquire);
            if head.wrapping_sub(tail) < ring.shape.slots as u32 {
                break;
            }
            let _ = self.wait_change(ring, TAIL, tail, WRITER_WAITING, false)?;
        }
        let slot = ring.slot(head);
        ring.map
            .atomic_u64(slot)
            .store(bytes.len() as u64, Ordering::Relaxed);
        // SAFETY: the slot at `head` is ours until head is published (the reader is behind).
        unsafe { ring.map.slice_mut(slot + SLOT_HEADER, bytes.len()) }.copy_from_slice(bytes);
        ring.word(HEAD)
            .store(head.wrapping_add(1), Ordering::SeqCst);
        if self.wake == Wake::Futex && ring.word(READER_WAITING).load(Ordering::SeqCst) != 0 {
            wake_one(ring.word(HEAD));
        }
        Ok(())
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let ring = &self.rx;
        let tail = ring.word(TAIL).load(Ordering::Relaxed);
        if let Err(Stop::Closed) = self.wait_change(ring, HEAD, tail, READER_WAITING, true)? {
            // Closed, but a unit may have been published just before the flag.
            if ring.word(HEAD).load(Ordering::Acquire) == tail {
                return Ok(0);
            }
        }
        let slot = ring.slot(tail);
        let len = ring.map.atomic_u64(slot).load(Ordering::Relaxed) as usize;
        if len > buf.len() || len > ring.shape.slot_bytes {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "a {len}-byte unit does not fit the {}-byte buffer",
                    buf.len()
                ),
            ));
        }
        // SAFETY: the slot at `tail` was published by the writer and is ours until tail moves.
        buf[..len].copy_from_slice(unsafe { ring.map.slice(slot + SLOT_HEADER, len) });
        ring.word(TAIL)
            .store(tail.wrapping_add(1), Ordering::SeqCst);
        if self.wake == Wake::Futex && ring.word(WRITER_WAITING).load(Ordering::SeqCst) != 0 {
            wake_one(ring.word(TAIL));
        }
        Ok(len)
    }

    fn close(&mut self) -> io::Result<()> {
        self.tx.word(CLOSED).store(1, Ordering::SeqCst);
        wake_one(self.tx.word(HEAD));
        Ok(())
    }

    fn watch_peer(&mut self, alive: Box<dyn Fn() -> bool + Send>) {
        self.alive = Some(alive);
    }

    fn descriptors(&self) -> Vec<BorrowedFd<'_>> {
        vec![self.tx.map.fd().as_fd()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn echo_through(wake: Wake) {
        let shape = RingShape {
            slots: 4,
            slot_bytes: 100,
        };
        let (mut client, mut peer) = ShmEndpoint::pair(shape, wake).unwrap();
        let server = std::thread::spawn(move || {
            let mut buf = [0u8; 100];
            loop {
                let n = peer.recv(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                peer.send(&buf[..n]).unwrap();
            }
        });
        // More round trips than slots, so both rings wrap many times.
        for i in 0..1000u32 {
            let msg = i.to_le_bytes().repeat(1 + i as usize % 25);
            client.send(&msg).unwrap();
            let mut buf = [0u8; 100];
            let n = client.recv(&mut buf).unwrap();
            assert_eq!(&buf[..n], &msg[..]);
        }
        client.close().unwrap();
        server.join().unwrap();
    }

    #[test]
    fn the_futex_ring_echoes_every_unit_exactly() {
        echo_through(Wake::Futex);
    }

    #[test]
    fn the_spinning_ring_echoes_every_unit_exactly() {
        echo_through(Wake::Spin);
    }

    #[test]
    fn a_full_ring_blocks_the_writer_until_the_reader_catches_up() {
        let shape = RingShape {
            slots: 2,
            slot_bytes: 8,
        };
        let (mut client, mut peer) = ShmEndpoint::pair(shape, Wake::Futex).unwrap();
        let writer = std::thread::spawn(move || {
            for i in 0..10u64 {
                client.send(&i.to_le_bytes()).unwrap();
            }
            client.close().unwrap();
        });
        let mut got = Vec::new();
        let mut buf = [0u8; 8];
        while peer.recv(&mut buf).unwrap() == 8 {
            got.push(u64::from_le_bytes(buf));
        }
        writer.join().unwrap();
        assert_eq!(got, (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn a_unit_larger_than_a_slot_is_refused() {
        let shape = RingShape {
            slots: 2,
            slot_bytes: 8,
        };
        let (mut client, _peer) = ShmEndpoint::pair(shape, Wake::Spin).unwrap();
        assert_eq!(
            client.send(&[0; 9]).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
    }

    #[test]
    fn a_reader_waiting_for_a_dead_peer_gives_up() {
        let shape = RingShape {
            slots: 2,
            slot_bytes: 8,
        };
        let (mut client, _peer) = ShmEndpoint::pair(shape, Wake::Futex).unwrap();
        client.watch_peer(Box::new(|| false));
        let mut buf = [0u8; 8];
        assert_eq!(
            client.recv(&mut buf).unwrap_err().kind(),
            io::ErrorKind::BrokenPipe
        );
    }
}
