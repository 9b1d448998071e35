//! Shared memory: one mapping seen by the client, a peer thread, a forked peer, or a peer
//! program started afresh (which maps the same memfd).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A `MAP_SHARED` mapping of a memfd.
#[derive(Debug)]
pub struct Mapping {
    ptr: *mut u8,
    len: usize,
    fd: OwnedFd,
}

// SAFETY: the mapping is plain shared memory; every access through it is either atomic or
// ordered by the protocol of its user (a ring's head/tail, a peer that has finished).
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// `len` zeroed bytes of new shared memory.
    pub fn new(len: usize) -> io::Result<Self> {
        // SAFETY: a valid NUL-terminated name; flags are plain integers.
        let fd = unsafe { libc::memfd_create(c"latscope-ipc".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: resizing the memfd we own.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), len.max(1) as libc::off_t) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Self::map(fd, len)
    }

    /// Maps `len` bytes of an existing memfd (received from a parent process).
    pub fn map(fd: OwnedFd, len: usize) -> io::Result<Self> {
        // SAFETY: mapping a file we hold open, shared, readable and writable.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len.max(1),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping {
            ptr: ptr.cast(),
            len,
            fd,
        })
    }

    /// The start of the mapping.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The memfd behind it, to hand to a child program.
    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// `len` bytes at `offset`, for reading.
    ///
    /// # Safety
    /// No one may write the range while the slice lives.
    pub unsafe fn slice(&self, offset: usize, len: usize) -> &[u8] {
        assert!(offset + len <= self.len);
        // SAFETY: in bounds (checked); the caller guarantees no concurrent writes.
        unsafe { std::slice::from_raw_parts(self.ptr.add(offset), len) }
    }

    /// `len` bytes at `offset`, for writing.
    ///
    /// # Safety
    /// No one else may access the range while the slice lives.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn slice_mut(&self, offset: usize, len: usize) -> &mut [u8] {
        assert!(offset + len <= self.len);
        // SAFETY: in bounds (checked); the caller guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(offset), len) }
    }

    /// The aligned atomic word at byte `offset`.
    pub fn atomic_u32(&self, offset: usize) -> &std::sync::atomic::AtomicU32 {
        assert!(offset.is_multiple_of(4) && offset + 4 <= self.len);
        // SAFETY: in bounds and aligned (mmap is page-aligned); atomics may alias shared memory.
        unsafe { &*self.ptr.add(offset).cast() }
    }

    /// The aligned atomic word at byte `offset`.
    pub fn atomic_u64(&self, offset: usize) -> &std::sync::atomic::AtomicU64 {
        assert!(offset.is_multiple_of(8) && offset + 8 <= self.len);
        // SAFETY: as for `atomic_u32`.
        unsafe { &*self.ptr.add(offset).cast() }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `map` mapped; no references outlive `self`.
        unsafe { libc::munmap(self.ptr.cast(), self.len.max(1)) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn two_mappings_of_one_memfd_share_their_bytes() {
        let a = Mapping::new(4096).unwrap();
        let b = Mapping::map(a.fd().try_clone().unwrap(), 4096).unwrap();
        a.atomic_u64(8).store(42, Ordering::SeqCst);
        assert_eq!(b.atomic_u64(8).load(Ordering::SeqCst), 42);
    }
}
