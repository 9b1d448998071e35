//! File-descriptor transports: pipe, Unix stream and seqpacket sockets, TCP on loopback.
//!
//! All four are a `write` on one side and a `read` on the other; they differ in what the kernel
//! does in between (a pipe buffer, a socket buffer per direction, packet boundaries, the TCP
//! stack), which is exactly what the lab compares. TCP runs with `TCP_NODELAY`, as every
//! latency-sensitive user sets it: Nagle's algorithm would otherwise hold small writes back.

use std::io;
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use super::Endpoint;

/// Which kind of descriptor pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FdKind {
    /// two pipes, one per direction
    Pipe,
    /// `socketpair(AF_UNIX, SOCK_STREAM)`
    UnixStream,
    /// `socketpair(AF_UNIX, SOCK_SEQPACKET)`: message boundaries kept
    UnixSeqpacket,
    /// a TCP connection on 127.0.0.1
    Tcp,
}

/// One side: reads from `read`, writes to `write`.
#[derive(Debug)]
pub struct FdEndpoint {
    read: OwnedFd,
    write: Option<OwnedFd>,
    socket: bool,
    packets: bool,
}

fn last_error() -> io::Error {
    io::Error::last_os_error()
}

fn socketpair(kind: libc::c_int) -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors socketpair writes.
    if unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            kind | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    } != 0
    {
        return Err(last_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn tcp_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let client = TcpStream::connect(listener.local_addr()?)?;
    let (server, _) = listener.accept()?;
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    Ok((OwnedFd::from(client), OwnedFd::from(server)))
}

impl FdEndpoint {
    fn socket(fd: OwnedFd, packets: bool) -> io::Result<Self> {
        Ok(FdEndpoint {
            write: Some(fd.try_clone()?),
            read: fd,
            socket: true,
            packets,
        })
    }

    /// A connected pair: (client side, peer side).
    pub fn pair(kind: FdKind) -> io::Result<(FdEndpoint, FdEndpoint)> {
        match kind {
            FdKind::Pipe => {
                let (to_peer_r, to_peer_w) = crate::process::pipe()?;
                let (to_client_r, to_client_w) = crate::process::pipe()?;
                let side = |read, write| FdEndpoint {
                    read,
                    write: Some(write),
                    socket: false,
                    packets: false,
                };
                Ok((side(to_client_r, to_peer_w), side(to_peer_r, to_client_w)))
            }
            FdKind::UnixStream => {
                let (a, b) = socketpair(libc::SOCK_STREAM)?;
                Ok((Self::socket(a, false)?, Self::socket(b, false)?))
            }
            FdKind::UnixSeqpacket => {
                let (a, b) = socketpair(libc::SOCK_SEQPACKET)?;
                Ok((Self::socket(a, true)?, Self::socket(b, true)?))
            }
            FdKind::Tcp => {
                let (a, b) = tcp_pair()?;
                Ok((Self::socket(a, false)?, Self::socket(b, false)?))
            }
        }
    }

    /// One side rebuilt from its [`Endpoint::descriptors`] (in a peer program): the read and
    /// the write descriptor (for a socket, two descriptors of it).
    pub fn from_fds(kind: FdKind, read: OwnedFd, write: OwnedFd) -> FdEndpoint {
        FdEndpoint {
            read,
            write: Some(write),
            socket: kind != FdKind::Pipe,
            packets: kind == FdKind::UnixSeqpacket,
        }
    }

    fn write_some(&self, fd: &OwnedFd, bytes: &[u8]) -> isize {
        let ptr = bytes.as_ptr().cast();
        // SAFETY: `bytes` is valid for reads of its length; the fd is open.
        unsafe {
            if self.socket {
                libc::send(fd.as_raw_fd(), ptr, bytes.len(), libc::MSG_NOSIGNAL)
            } else {
                libc::write(fd.as_raw_fd(), ptr, bytes.len())
            }
        }
    }
}

impl Endpoint for FdEndpoint {
    fn send(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        let Some(fd) = &self.write else {
            return Err(super::gone("send after close"));
        };
        while !bytes.is_empty() {
            let n = self.write_some(fd, bytes);
            if n < 0 {
                let e = last_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            bytes = &bytes[n as usize..];
        }
        Ok(())
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let fd = self.read.as_raw_fd();
            let ptr = buf.as_mut_ptr().cast();
            // SAFETY: `buf` is valid for writes of its length; the fd is open.
            let n = unsafe {
                if self.packets {
                    libc::recv(fd, ptr, buf.len(), libc::MSG_TRUNC)
                } else {
                    libc::read(fd, ptr, buf.len())
                }
            };
            if n < 0 {
                let e = last_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if n as usize > buf.len() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "a {n}-byte packet does not fit the {}-byte buffer",
                        buf.len()
                    ),
                ));
            }
            return Ok(n as usize);
        }
    }

    fn close(&mut self) -> io::Result<()> {
        if self.socket {
            // SAFETY: shutting down the write half of an open socket.
            unsafe { libc::shutdown(self.read.as_raw_fd(), libc::SHUT_WR) };
        }
        self.write = None;
        Ok(())
    }

    fn descriptors(&self) -> Vec<BorrowedFd<'_>> {
        let mut fds = vec![self.read.as_fd()];
        fds.extend(self.write.as_ref().map(|w| w.as_fd()));
        fds
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::ipc::transport::recv_exact;

    #[test]
    fn every_descriptor_pair_carries_bytes_both_ways_and_then_end_of_stream() {
        for kind in [
            FdKind::Pipe,
            FdKind::UnixStream,
            FdKind::UnixSeqpacket,
            FdKind::Tcp,
        ] {
            let (mut a, mut b) = FdEndpoint::pair(kind).unwrap();
            a.send(b"hello").unwrap();
            let mut buf = [0u8; 5];
            assert!(recv_exact(&mut b, &mut buf).unwrap());
            assert_eq!(&buf, b"hello", "{kind:?}");
            b.send(b"back!").unwrap();
            assert!(recv_exact(&mut a, &mut buf).unwrap());
            assert_eq!(&buf, b"back!");
            a.close().unwrap();
            assert_eq!(b.recv(&mut buf).unwrap(), 0, "{kind:?}");
        }
    }

    #[test]
    fn a_seqpacket_larger_than_the_buffer_is_an_error_not_a_silent_truncation() {
        let (mut a, mut b) = FdEndpoint::pair(FdKind::UnixSeqpacket).unwrap();
        a.send(&[1u8; 100]).unwrap();
        let mut small = [0u8; 10];
        assert_eq!(
            b.recv(&mut small).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
    }
}
