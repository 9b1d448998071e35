//! Image uploads into a pixmap: over the socket (`PutImage`) or through K MIT-SHM segments.
//!
//! What "done" means differs, and the difference is the lesson of the Java2D write-up:
//! * `PutImage` copies the pixels into the request, so the client may reuse its buffer at
//!   once, but it only *knows* the server has drawn them after a round trip: a synchronous
//!   upload is `PutImage` + `GetInputFocus` (what `XSync` sends) and its reply.
//! * `ShmPutImage` sends a few bytes; the pixels stay in a segment the server reads later, so a
//!   segment may only be rewritten after the server's completion event for it
//!   (`send_event = true`). With K segments rotated, K uploads are in flight: the latency of
//!   one upload grows with K, the time per upload shrinks until the server is the bottleneck.
//! * Pipelined (x11perf's `-putimage`/`-shmput`): requests issued back to back, one sync at
//!   the end. For shm that reuses one segment without waiting, which is only safe because the
//!   image never changes: it measures the request stream, not safe reuse.
//!
//! The segments are memfds attached by file descriptor (MIT-SHM 1.2), so nothing is left
//! behind in the SysV namespace if latscope is killed.
//!
//! The pixmap, GC and segments are made on the lab's x11rb connection; every measured request
//! goes over the [`Wire`], the lab's own request path, and each is serialized once, before the
//! measured phase: an upload costs a copy into the wire's buffer, as in Xlib.

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use x11rb::connection::{Connection, RequestConnection};
use x11rb::protocol::shm::ConnectionExt as _;
use x11rb::protocol::xproto::{ConnectionExt as _, CreateGCAux, ImageFormat, ImageOrder};
use x11rb::reexports::x11rb_protocol::x11_utils::TryParse;

use super::stream::{Conn, exchange};
use super::wire::{Answer, SMALL_REPLY, Wire, describe_error};
use super::{Method, Upload, X11Error};
use crate::lab::ipc::clock::monotonic_ns;

/// The pixmap uploads go into, and the image layout the server expects for its depth.
#[derive(Debug)]
pub struct Target {
    /// the pixmap
    pub pixmap: u32,
    /// a GC for it
    pub gc: u32,
    /// what is uploaded
    pub upload: Upload,
    /// bits per pixel in ZPixmap format for the depth
    pub bits_per_pixel: u8,
    /// bytes per row, padded as the server's pixmap format asks
    pub stride: usize,
    /// least significant byte first
    pub lsb_first: bool,
    /// the image to upload (its first 8 bytes are rewritten with each upload's number)
    pub image: Vec<u8>,
    /// the `PutImage` request before and after the pixels, serialized once: an upload then
    /// costs what the protocol costs, not a request built anew (x11perf's Xlib reuses too)
    put_request: (Vec<u8>, Vec<u8>),
    /// the whole `PutImage` request when it fits the wire's buffer (stamped in place with the
    /// image): an upload is then one copy
    put_whole: Option<Vec<u8>>,
}

impl Target {
    /// Bytes of one image.
    pub fn image_bytes(&self) -> usize {
        self.image.len()
    }

    /// Stamps upload `seq` into the image.
    fn stamp(&mut self, seq: u64) {
        let n = self.image.len().min(8);
        let bytes = seq.to_le_bytes();
        self.image[..n].copy_from_slice(&bytes[..n]);
        if let Some(whole) = &mut self.put_whole {
            let at = self.put_request.0.len();
            whole[at..at + n].copy_from_slice(&bytes[..n]);
        }
    }
}

fn protocol(e: impl std::fmt::Display) -> X11Error {
    X11Error::protocol(e)
}

/// Creates the pixmap and checks the image can be uploaded as asked.
pub fn prepare(conn: &Conn, root: u32, upload: Upload) -> Result<Target, X11Error> {
    let setup = conn.setup();
    let format = setup
        .pixmap_formats
        .iter()
        .find(|f| f.depth == upload.depth)
        .ok_or_else(|| {
            let depths: Vec<String> = setup
                .pixmap_formats
                .iter()
                .map(|f| f.depth.to_string())
                .collect();
            X11Error::Protocol(format!(
                "this server has no pixmaps of depth {} (it has {})",
                upload.depth,
                depths.join(", ")
            ))
        })?;
    let pad = usize::from(format.scanline_pad.max(8));
    let bits = usize::from(upload.width) * usize::from(format.bits_per_pixel);
    let stride = bits.div_ceil(pad) * pad / 8;
    let bytes = stride * usize::from(upload.height);
    check_size(conn, &upload, bytes)?;
    // Each check is a round trip: a GetInputFocus reply.
    let pixmap = exchange(conn, SMALL_REPLY, |c| {
        let id = c.generate_id()?;
        c.create_pixmap(upload.depth, id, root, upload.width, upload.height)?
            .check()?;
        Ok::<_, x11rb::errors::ReplyOrIdError>(id)
    })?;
    let gc = exchange(conn, SMALL_REPLY, |c| {
        let id = c.generate_id()?;
        c.create_gc(id, pixmap, &CreateGCAux::new())?.check()?;
        Ok::<_, x11rb::errors::ReplyOrIdError>(id)
    })?;
    let image: Vec<u8> = (0..bytes).map(|i| (i * 7 % 251) as u8).collect();
    let put_request = put_request(pixmap, gc, &upload, &image);
    let whole = put_request.0.len() + image.len() + put_request.1.len();
    // at most 16 KiB: never in the BIG-REQUESTS form
    let put_whole = (whole <= super::wire::BUFFER)
        .then(|| [&put_request.0[..], &image, &put_request.1].concat());
    Ok(Target {
        put_request,
        put_whole,
        pixmap,
        gc,
        upload,
        bits_per_pixel: format.bits_per_pixel,
        stride,
        lsb_first: setup.image_byte_order == ImageOrder::LSB_FIRST,
        image,
    })
}

fn put_request(pixmap: u32, gc: u32, u: &Upload, image: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let request = x11rb::protocol::xproto::PutImageRequest {
        format: ImageFormat::Z_PIXMAP,
        drawable: pixmap,
        gc,
        width: u.width,
        height: u.height,
        dst_x: 0,
        dst_y: 0,
        left_pad: 0,
        depth: u.depth,
        data: std::borrow::Cow::Borrowed(image),
    };
    let ([header, _, padding], _) = request.serialize();
    (header.into_owned(), padding.into_owned())
}

/// A `PutImage` larger than the server takes is refused before anything runs.
fn check_size(conn: &Conn, upload: &Upload, bytes: usize) -> Result<(), X11Error> {
    let request = 24 + bytes.div_ceil(4) * 4;
    let max = exchange(conn, SMALL_REPLY, |c| {
        Ok::<_, X11Error>(c.maximum_request_bytes())
    })?;
    if upload.method == Method::Put && request > max {
        return Err(X11Error::TooLarge(format!(
            "a {}x{} image at depth {} is a {request}-byte PutImage request; this server takes at most {max} bytes per request{}: use a smaller --size or --method shm",
            upload.width,
            upload.height,
            upload.depth,
            if exchange(conn, SMALL_REPLY, |c| c
                .extension_information("BIG-REQUESTS"))
            .ok()
            .flatten()
            .is_some()
            {
                " (with BIG-REQUESTS)"
            } else {
                " (it has no BIG-REQUESTS)"
            }
        )));
    }
    Ok(())
}

/// Buffers one `PutImage` of upload `seq` (no wait).
pub fn put(wire: &mut Wire, t: &mut Target, seq: u64) -> Result<(), X11Error> {
    t.stamp(seq);
    if let Some(whole) = &t.put_whole {
        wire.send_whole(whole, Answer::Nothing)?;
    } else {
        let (header, padding) = &t.put_request;
        wire.send(&[header, &t.image, padding], Answer::Nothing)?;
    }
    Ok(())
}

/// One shared segment: a memfd mapped here and attached to the server.
#[derive(Debug)]
struct Segment {
    id: u32,
    map: *mut u8,
    len: usize,
    _fd: OwnedFd,
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: the mapping was made by `Segment::new` with this length and is dropped once.
        unsafe { libc::munmap(self.map.cast(), self.len) };
    }
}

impl Segment {
    fn new(conn: &Conn, len: usize) -> Result<Segment, X11Error> {
        let io = |e: std::io::Error| X11Error::Protocol(format!("shared segment: {e}"));
        // SAFETY: a NUL-terminated name; memfd_create returns a new descriptor or -1.
        let fd = unsafe { libc::memfd_create(c"latscope-x11-shm".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(io(std::io::Error::last_os_error()));
        }
        // SAFETY: a new descriptor owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: ftruncate and mmap of our own memfd; the result is checked.
        let map = unsafe {
            if libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) != 0 {
                return Err(io(std::io::Error::last_os_error()));
            }
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io(std::io::Error::last_os_error()));
        }
        let server_fd = fd.try_clone().map_err(io)?;
        let mut segment = Segment {
            id: 0,
            map: map.cast(),
            len,
            _fd: fd,
        };
        segment.id = exchange(conn, SMALL_REPLY, |c| {
            let id = c.generate_id()?;
            c.shm_attach_fd(id, server_fd, true)?.check()?;
            Ok::<_, x11rb::errors::ReplyOrIdError>(id)
        })?;
        Ok(segment)
    }

    fn write(&mut self, image: &[u8]) {
        let n = image.len().min(self.len);
        // SAFETY: the mapping is `len` bytes long and nothing else in this process aliases it;
        // the server only reads it, and only while we wait for its completion event.
        unsafe { std::ptr::copy_nonoverlapping(image.as_ptr(), self.map, n) };
    }
}

fn shm_request(t: &Target, shmseg: u32, send_event: bool, major: u8) -> Vec<u8> {
    let u = t.upload;
    let request = x11rb::protocol::shm::PutImageRequest {
        drawable: t.pixmap,
        gc: t.gc,
        total_width: u.width,
        total_height: u.height,
        src_x: 0,
        src_y: 0,
        src_width: u.width,
        src_height: u.height,
        dst_x: 0,
        dst_y: 0,
        depth: u.depth,
        format: ImageFormat::Z_PIXMAP.into(),
        send_event,
        shmseg,
        offset: 0,
    };
    let ([bytes], _) = request.serialize(major);
    bytes.into_owned()
}

/// K segments rotated; a segment is rewritten only after the server's completion event for
/// the upload that used it.
#[derive(Debug)]
pub struct ShmRing {
    segments: Vec<Segment>,
    /// (segment index, issue time) of every upload in flight, in issue order: the server
    /// handles requests in order, so completions arrive in this order
    in_flight: VecDeque<(usize, u64)>,
    busy: Vec<bool>,
    next: usize,
    /// per segment, the `ShmPutImage` request with a completion event, serialized once
    requests: Vec<Vec<u8>>,
    /// the first segment's request without an event (pipelined)
    unsynced: Vec<u8>,
    /// the code of MIT-SHM's first event (ShmCompletion)
    completion: u8,
}

impl ShmRing {
    /// Attaches `k` segments of one image each.
    pub fn new(conn: &Conn, t: &Target, k: u32) -> Result<ShmRing, X11Error> {
        let ext = exchange(conn, SMALL_REPLY, |c| {
            c.extension_information(x11rb::protocol::shm::X11_EXTENSION_NAME)
        })?
        .ok_or(X11Error::Missing("MIT-SHM"))?;
        let major = ext.major_opcode;
        let segments = (0..k)
            .map(|_| Segment::new(conn, t.image_bytes().max(1)))
            .collect::<Result<Vec<_>, _>>()?;
        let requests = segments
            .iter()
            .map(|s| shm_request(t, s.id, true, major))
            .collect();
        let unsynced = shm_request(t, segments[0].id, false, major);
        Ok(ShmRing {
            requests,
            unsynced,
            completion: ext.first_event,
            busy: vec![false; segments.len()],
            segments,
            in_flight: VecDeque::new(),
            next: 0,
        })
    }

    /// Uploads in flight.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Issues upload `seq` from the next segment, first waiting until the server is done with
    /// it; every completion seen is passed to `done` as (issue time, latency) in ns
    /// (issue → event).
    pub fn upload(
        &mut self,
        wire: &mut Wire,
        t: &mut Target,
        seq: u64,
        done: &mut dyn FnMut(u64, u64),
    ) -> Result<(), X11Error> {
        let i = self.next;
        self.next = (self.next + 1) % self.segments.len();
        while self.busy[i] {
            self.complete_one(wire, done)?;
        }
        t.stamp(seq);
        self.segments[i].write(&t.image);
        let start = monotonic_ns();
        self.issue(wire, i, true)?;
        wire.flush()?;
        self.busy[i] = true;
        self.in_flight.push_back((i, start));
        Ok(())
    }

    /// Issues upload `seq` from the first segment without a completion event and without
    /// waiting (x11perf's `-shmput`): only the request stream is measured.
    pub fn upload_unsynced(
        &mut self,
        wire: &mut Wire,
        t: &mut Target,
        seq: u64,
    ) -> Result<(), X11Error> {
        if seq == 0 {
            t.stamp(seq);
            self.segments[0].write(&t.image);
        }
        self.issue(wire, 0, false)
    }

    fn issue(&self, wire: &mut Wire, i: usize, send_event: bool) -> Result<(), X11Error> {
        let request = if send_event {
            &self.requests[i]
        } else {
            &self.unsynced
        };
        wire.send_whole(request, Answer::Nothing)?;
        Ok(())
    }

    /// Waits for the next completion event.
    fn complete_one(
        &mut self,
        wire: &mut Wire,
        done: &mut dyn FnMut(u64, u64),
    ) -> Result<(), X11Error> {
        loop {
            let packet = wire.wait_event()?;
            match packet[0] & 0x7f {
                0 => return Err(X11Error::Protocol(describe_error(&packet))),
                code if code == self.completion => {
                    let now = monotonic_ns();
                    let (ev, _) = x11rb::protocol::shm::CompletionEvent::try_parse(&packet)
                        .map_err(protocol)?;
                    let Some((i, start)) = self.in_flight.pop_front() else {
                        return Err(X11Error::Protocol(
                            "a completion event for no upload in flight".into(),
                        ));
                    };
                    if self.segments[i].id != ev.shmseg {
                        return Err(X11Error::Protocol(format!(
                            "completion for segment {:#x}, expected {:#x}",
                            ev.shmseg, self.segments[i].id
                        )));
                    }
                    self.busy[i] = false;
                    done(start, now.saturating_sub(start));
                    return Ok(());
                }
                _ => {}
            }
        }
    }

    /// Waits for every upload in flight.
    pub fn drain(
        &mut self,
        wire: &mut Wire,
        done: &mut dyn FnMut(u64, u64),
    ) -> Result<(), X11Error> {
        while !self.in_flight.is_empty() {
            self.complete_one(wire, done)?;
        }
        Ok(())
    }

    /// Detaches every segment from the server.
    pub fn detach(self, conn: &Conn) {
        let _ = exchange(conn, 0, |c| {
            for s in &self.segments {
                c.shm_detach(s.id)?;
            }
            c.flush()
        });
    }
}

/// Reads the pixmap back and compares it with the last image uploaded (padding, and the unused
/// byte of a 24-bit pixel stored in 32 bits, are not compared). `Ok(None)`: equal.
pub fn verify(conn: &Conn, t: &Target) -> Result<Option<String>, X11Error> {
    let u = t.upload;
    // The reply is the pixmap's rows, padded as the server's format says: the image's size.
    let max_reply = 32 + t.image_bytes().next_multiple_of(4);
    let reply = exchange(conn, max_reply, |c| {
        c.get_image(ImageFormat::Z_PIXMAP, t.pixmap, 0, 0, u.width, u.height, !0)?
            .reply()
    })?;
    let row_bytes = usize::from(u.width) * usize::from(t.bits_per_pixel) / 8;
    let unused =
        (u.depth == 24 && t.bits_per_pixel == 32).then_some(if t.lsb_first { 3 } else { 0 });
    for y in 0..usize::from(u.height) {
        let range = y * t.stride..y * t.stride + row_bytes;
        let (Some(got), Some(want)) = (reply.data.get(range.clone()), t.image.get(range)) else {
            return Ok(Some(format!(
                "GetImage returned {} bytes, expected rows of {} bytes",
                reply.data.len(),
                t.stride
            )));
        };
        let differs = got
            .iter()
            .zip(want)
            .enumerate()
            .find(|(i, (g, w))| g != w && unused != Some(i % 4));
        if let Some((x, (g, w))) = differs {
            return Ok(Some(format!(
                "the pixmap differs from the last image at row {y}, byte {x}: {g:#04x}, uploaded {w:#04x}"
            )));
        }
    }
    Ok(None)
}

/// Frees the pixmap and GC.
pub fn release(conn: &Conn, t: &Target) {
    let _ = exchange(conn, 0, |c| {
        c.free_gc(t.gc)?;
        c.free_pixmap(t.pixmap)?;
        c.flush()
    });
}
