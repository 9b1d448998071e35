//! `frames`: an xdg-toplevel drawn from a pool of `wl_shm` buffers in one memfd, as a
//! software-rendering client draws.
//!
//! Each frame: wait for the pace (the last frame callback, a rate, or nothing), wait for a free
//! buffer (one the compositor has released: with one buffer this is the whole commit → release
//! time), draw into it, request a frame callback and presentation feedback, attach, damage,
//! commit. Stamped: the commit, the buffer's release, the frame callback's `done`, the
//! feedback's `presented`, and the wait. What has not come back when the frames are done is
//! waited for a little ([`DRAIN`]), not counted as zero.

use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use wayland_client::protocol::{wl_buffer, wl_compositor, wl_shm, wl_shm_pool, wl_surface};
use wayland_protocols::wp::presentation_time::client::wp_presentation;
use wayland_protocols::xdg::shell::client::{xdg_surface, xdg_toplevel, xdg_wm_base};

use super::client::{CallbackKind, Client, Slot, Wait};
use super::{Damage, FrameParams, LabError, Outcome, Pace};
use crate::doc::lab_wayland::PresentationDoc;
use crate::ingest::Cancel;
use crate::lab::ipc::clock::monotonic_ns;

/// How long the client waits for a buffer or a frame callback before calling it a stall.
pub const STALL: Duration = Duration::from_secs(5);
/// How long the first frame's callback may take: a compositor draws its first frame of a new
/// window only once its output is up, and a nested one (Mir on weston) that renders with
/// llvmpipe compiles its shaders then, which on a loaded machine takes longer than [`STALL`].
/// The first frame is paced but measured like the others: its callback's wait is no sample.
pub const FIRST_FRAME: Duration = Duration::from_secs(30);
/// How long the client waits after the last commit for what is still outstanding.
pub const DRAIN: Duration = Duration::from_secs(1);

/// The shared memory of the pool, unmapped when dropped.
struct Mapping {
    ptr: *mut u32,
    words: usize,
    fd: OwnedFd,
}

impl Mapping {
    fn new(bytes: usize) -> Result<Mapping, LabError> {
        let err =
            |what: &str| LabError::Setup(format!("{what}: {}", std::io::Error::last_os_error()));
        // SAFETY: a NUL-terminated name; the returned descriptor is owned here.
        let raw = unsafe { libc::memfd_create(c"latscope-wl-shm".as_ptr(), libc::MFD_CLOEXEC) };
        if raw < 0 {
            return Err(err("memfd_create"));
        }
        // SAFETY: `raw` is a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: plain system calls on our descriptor.
        if unsafe { libc::ftruncate(raw, bytes as libc::off_t) } != 0 {
            return Err(err("ftruncate of the buffer pool"));
        }
        // SAFETY: mapping `bytes` of our memfd, shared, read-write.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                raw,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(err("mmap of the buffer pool"));
        }
        Ok(Mapping {
            ptr: ptr.cast(),
            words: bytes / 4,
            fd,
        })
    }

    fn words(&mut self) -> &mut [u32] {
        // SAFETY: the mapping is `words` u32s long, page-aligned, and lives as long as self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.words) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `new` mapped.
        unsafe { libc::munmap(self.ptr.cast(), self.words * 4) };
    }
}

/// The window and its buffers.
struct Window {
    surface: wl_surface::WlSurface,
    buffers: Vec<wl_buffer::WlBuffer>,
    presentation: Option<wp_presentation::WpPresentation>,
    damage_buffer: bool,
    map: Mapping,
    _objects: (
        xdg_wm_base::XdgWmBase,
        xdg_surface::XdgSurface,
        xdg_toplevel::XdgToplevel,
        wl_shm_pool::WlShmPool,
    ),
}

fn bind_needed(client: &Client, interface: &str) -> Result<(u32, u32), LabError> {
    client
        .global(interface)
        .map(|g| (g.name, g.version))
        .ok_or_else(|| LabError::Missing(format!("{interface}: the frames pattern needs it")))
}

/// Binds the globals, maps the surface and creates the buffers.
fn setup(client: &mut Client, p: &FrameParams, cancel: &Cancel) -> Result<Window, LabError> {
    let registry = client.registry(cancel)?;
    let qh = client.qh();
    let (name, v) = bind_needed(client, "wl_compositor")?;
    let compositor = registry.bind::<wl_compositor::WlCompositor, _, _>(name, v.min(4), &qh, ());
    let (name, _) = bind_needed(client, "wl_shm")?;
    let shm = registry.bind::<wl_shm::WlShm, _, _>(name, 1, &qh, ());
    let (name, _) = bind_needed(client, "xdg_wm_base")?;
    let wm_base = registry.bind::<xdg_wm_base::XdgWmBase, _, _>(name, 1, &qh, ());
    let presentation = client
        .global("wp_presentation")
        .map(|g| g.name)
        .map(|name| registry.bind::<wp_presentation::WpPresentation, _, _>(name, 1, &qh, ()));
    let surface = compositor.create_surface(&qh, ());
    let xdg_surface = wm_base.get_xdg_surface(&surface, &qh, ());
    let toplevel = xdg_surface.get_toplevel(&qh, ());
    toplevel.set_title("latscope lab wayland".into());
    toplevel.set_app_id("latscope".into());
    surface.commit();
    let wait = client.wait(cancel, STALL, |s| s.configured)?;
    if wait == Wait::TimedOut {
        return Err(LabError::Stalled(
            "the compositor did not configure the window within 5 s".into(),
        ));
    }
    let stride = p.width as usize * 4;
    let size = stride * p.height as usize;
    let map = Mapping::new(size * p.buffers as usize)?;
    let total = i32::try_from(size * p.buffers as usize)
        .map_err(|_| LabError::Setup("the buffer pool is larger than 2 GiB".into()))?;
    let pool = shm.create_pool(map.fd.as_fd(), total, &qh, ());
    let buffers = (0..p.buffers as usize)
        .map(|i| {
            pool.create_buffer(
                (i * size) as i32,
                p.width as i32,
                p.height as i32,
                stride as i32,
                wl_shm::Format::Xrgb8888,
                &qh,
                i,
            )
        })
        .collect();
    client.state.slots = vec![Slot::default(); p.buffers as usize];
    Ok(Window {
        surface,
        buffers,
        presentation,
        damage_buffer: v >= 4,
        map,
        _objects: (wm_base, xdg_surface, toplevel, pool),
    })
}

/// The rows a frame redraws: all, or a strip of an eighth that moves down.
fn damaged_rows(p: &FrameParams, frame: u64) -> (u32, u32) {
    match p.damage {
        Damage::Full => (0, p.height),
        Damage::Partial => {
            let strip = (p.height / 8).max(1);
            let strips = u64::from(p.height.div_ceil(strip));
            let top = (frame % strips) as u32 * strip;
            (top, strip.min(p.height - top))
        }
    }
}

/// Writes this frame's colour into the damaged rows of buffer `index`.
fn draw(map: &mut Mapping, p: &FrameParams, index: usize, frame: u64, rows: (u32, u32)) {
    let w = p.width as usize;
    let start = index * w * p.height as usize + rows.0 as usize * w;
    let end = start + rows.1 as usize * w;
    let colour = 0xff00_0000 | ((frame as u32).wrapping_mul(0x0001_0307) & 0x00ff_ffff);
    if let Some(pixels) = map.words().get_mut(start..end) {
        pixels.fill(colour);
    }
}

/// Waits for the pace before frame `k`.
fn pace(
    client: &mut Client,
    p: &FrameParams,
    k: u64,
    start: u64,
    cancel: &Cancel,
) -> Result<Wait, LabError> {
    match p.pace {
        Pace::FreeRun => Ok(Wait::Done),
        Pace::FrameCallback => {
            let patience = if k == 1 { FIRST_FRAME } else { STALL };
            let w = client.wait(cancel, patience, |s| s.frames.frames_pending == 0)?;
            if w == Wait::TimedOut {
                return Err(LabError::Stalled(format!(
                    "no frame callback for frame {k} came within {} s (the compositor does not repaint?)",
                    patience.as_secs()
                )));
            }
            Ok(w)
        }
        Pace::Rate(hz) => {
            let target = start + k * 1_000_000_000 / u64::from(hz);
            let patience = Duration::from_nanos(target.saturating_sub(monotonic_ns()) + 1_000_000);
            client.wait(cancel, patience, |_| monotonic_ns() >= target)
        }
    }
}

/// Waits for a free buffer, preferring the one after `last`; returns its index.
fn free_buffer(
    client: &mut Client,
    last: usize,
    cancel: &Cancel,
) -> Result<Option<usize>, LabError> {
    let n = client.state.slots.len();
    let pick = |slots: &[Slot]| (1..=n).map(|d| (last + d) % n).find(|&i| !slots[i].busy);
    match client.wait(cancel, STALL, |s| pick(&s.slots).is_some())? {
        Wait::Done => Ok(pick(&client.state.slots)),
        Wait::Cancelled => Ok(None),
        Wait::TimedOut => Err(LabError::Stalled(format!(
            "no wl_buffer.release within 5 s with all {n} buffer(s) held by the compositor (it may release a buffer only when another replaces it: try more --buffers)"
        ))),
    }
}

/// Measures `p.frames` frames into `out`.
pub fn measure(
    client: &mut Client,
    p: &FrameParams,
    cancel: &Cancel,
    out: &mut Outcome,
) -> Result<(), LabError> {
    if p.buffers == 0 || p.width == 0 || p.height == 0 {
        return Err(LabError::Setup(
            "frames needs at least one buffer of at least 1x1 pixels".into(),
        ));
    }
    let mut win = setup(client, p, cancel)?;
    if win.presentation.is_none() {
        out.notes.push(
            "the compositor does not offer wp_presentation: commit_to_presented is skipped".into(),
        );
    }
    let result = frames(client, &mut win, p, cancel, out);
    if result.is_ok() {
        // What is still outstanding arrives now or is left out; the last buffer shown may be
        // held until another replaces it.
        let _ = client.wait(cancel, DRAIN, |s| {
            s.frames.frames_pending == 0 && s.slots.iter().all(|b| !b.busy)
        });
    }
    collect(client, win.presentation.is_some(), out);
    result
}

fn frames(
    client: &mut Client,
    win: &mut Window,
    p: &FrameParams,
    cancel: &Cancel,
    out: &mut Outcome,
) -> Result<(), LabError> {
    let qh = client.qh();
    let wait_metric = out.metric("buffer_wait");
    let start = monotonic_ns();
    let mut last = p.buffers as usize - 1;
    for k in 0..p.frames {
        if cancel.is_raised() || pace(client, p, k, start, cancel)? == Wait::Cancelled {
            break;
        }
        let t0 = monotonic_ns();
        let Some(index) = free_buffer(client, last, cancel)? else {
            break;
        };
        out.sample(wait_metric, t0, monotonic_ns() - t0);
        last = index;
        let rows = damaged_rows(p, k);
        draw(&mut win.map, p, index, k, rows);
        win.surface.frame(&qh, CallbackKind::Frame(monotonic_ns()));
        client.state.frames.frames_pending += 1;
        let committed = Arc::new(AtomicU64::new(0));
        if let Some(pres) = &win.presentation {
            pres.feedback(&win.surface, &qh, Arc::clone(&committed));
            client.state.frames.feedbacks += 1;
        }
        win.surface.attach(Some(&win.buffers[index]), 0, 0);
        let (y, h) = (rows.0 as i32, rows.1 as i32);
        if win.damage_buffer {
            win.surface.damage_buffer(0, y, p.width as i32, h);
        } else {
            win.surface.damage(0, y, p.width as i32, h);
        }
        let t = monotonic_ns();
        client.state.slots[index] = Slot {
            busy: true,
            committed_at: Some(t),
        };
        committed.store(t, Ordering::Release);
        win.surface.commit();
        out.commits.push(t);
        let held = client.state.slots.iter().filter(|s| s.busy).count();
        out.in_flight.push(held as u64);
        client.conn.flush().ok();
    }
    Ok(())
}

const FLAGS: [(u32, &str); 4] = [
    (1, "vsync"),
    (2, "hw_clock"),
    (4, "hw_completion"),
    (8, "zero_copy"),
];

/// Moves what the events recorded into `out`.
fn collect(client: &mut Client, presentation: bool, out: &mut Outcome) {
    let f = std::mem::take(&mut client.state.frames);
    if presentation {
        let (asked, presented) = (f.feedbacks, f.commit_to_presented.len() as u64);
        if asked > 0 && presented == 0 {
            // nothing silent: an empty commit_to_presented says why
            out.notes.push(format!(
                "the compositor answered none of {asked} presentation feedbacks with presented ({} discarded, {} never answered): commit_to_presented has no sample (a headless output may present nothing)",
                f.discarded,
                asked - f.discarded.min(asked)
            ));
        }
    }
    let mut push = |name: &'static str, v: Vec<(u64, u64)>| {
        let i = out.metric(name);
        for (start, latency) in v {
            out.sample(i, start, latency);
        }
    };
    push("commit_to_release", f.commit_to_release);
    push("frame_to_done", f.frame_to_done);
    if presentation {
        push("commit_to_presented", f.commit_to_presented);
        out.presentation = Some(PresentationDoc {
            clock_id: f.clock_id,
            flags: FLAGS
                .iter()
                .filter(|(bit, _)| f.flags & bit != 0)
                .map(|(_, name)| name.to_string())
                .collect(),
            refresh_ns: f.refresh_ns,
            discarded: f.discarded,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(height: u32, damage: Damage) -> FrameParams {
        FrameParams {
            buffers: 2,
            width: 4,
            height,
            frames: 1,
            pace: Pace::FreeRun,
            damage,
        }
    }

    #[test]
    fn partial_damage_moves_an_eighth_down_and_wraps() {
        let p = params(64, Damage::Partial);
        assert_eq!(damaged_rows(&p, 0), (0, 8));
        assert_eq!(damaged_rows(&p, 1), (8, 8));
        assert_eq!(damaged_rows(&p, 8), (0, 8));
        assert_eq!(damaged_rows(&params(64, Damage::Full), 3), (0, 64));
        // A strip never runs past the bottom.
        let p = params(10, Damage::Partial);
        assert!((0..20).all(|k| {
            let (top, h) = damaged_rows(&p, k);
            h >= 1 && top + h <= 10
        }));
    }
}
