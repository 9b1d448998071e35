//! `latscope lab x11` against X servers that break the protocol or stall: a fake server, a
//! thread of the test on a Unix socket in a private directory, answers like a server with no
//! extension up to one request, then misbehaves. Each case runs under an address-space cap, so
//! a buffer that grows with what the server sends ends in an allocation failure, not a
//! machine out of memory.

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use x11rb::protocol::xproto::{BackingStore, EventMask, Format, ImageOrder, Screen, Setup};
use x11rb::x11_utils::Serialize;

use crate::util::{latscope, stderr, stdout};

/// The address space latscope may take: a debug build's threads and libraries fit well under
/// it; a buffer that follows the server does not.
const ADDRESS_SPACE: u64 = 1 << 30;
/// How long a run may take at all before the test kills it.
const HARD_LIMIT: Duration = Duration::from_secs(20);

/// What the fake server does wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Misbehaviour {
    /// reads the setup request and never answers
    SilentSetup,
    /// sends the setup a byte every half second
    DripSetup,
    /// from the trigger on, sends 32-byte generic events without end
    Flood,
    /// answers the trigger with a reply that claims 16 GiB, then sends zeros without end
    HugeReply,
    /// from the trigger on, sends a byte every half second
    Drip,
}

/// Which request sets the misbehaviour off: the `nth` with `opcode` on connection
/// `connection` (0: the lab's x11rb connection, 1: its own request path).
#[derive(Debug, Clone, Copy)]
struct Trigger {
    connection: usize,
    opcode: u8,
    nth: usize,
}

/// `ListExtensions`, the first request of the lab, while it describes the server.
const DESCRIBING: Trigger = Trigger {
    connection: 0,
    opcode: 99,
    nth: 1,
};
/// The 100th `GetInputFocus` of the lab's request path: in the upload row, after the
/// round-trip row (`-n 50 --warmup 5`) is done.
const MEASURING: Trigger = Trigger {
    connection: 1,
    opcode: 43,
    nth: 100,
};

/// A fake X server on a socket in a private directory; it stops accepting when dropped.
struct FakeServer {
    _dir: tempfile::TempDir,
    socket: PathBuf,
    stop: Arc<AtomicBool>,
}

impl FakeServer {
    fn start(misbehaviour: Misbehaviour, trigger: Trigger) -> FakeServer {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("X0");
        let listener = UnixListener::bind(&socket).unwrap();
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        std::thread::spawn(move || {
            let count = AtomicUsize::new(0);
            while !stopped.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        stream.set_nonblocking(false).unwrap();
                        let index = count.fetch_add(1, Ordering::Relaxed);
                        let trigger = (index == trigger.connection).then_some(trigger);
                        std::thread::spawn(move || serve(stream, misbehaviour, trigger));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        FakeServer {
            _dir: dir,
            socket,
            stop,
        }
    }

    fn display(&self) -> &str {
        self.socket.to_str().unwrap()
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A setup with one 640x480 screen at depth 24, pixmaps of depth 8 and 24, and no extension.
fn setup_bytes() -> Vec<u8> {
    let format = |depth, bits_per_pixel| Format {
        depth,
        bits_per_pixel,
        scanline_pad: 32,
    };
    let screen = Screen {
        root: 0x100,
        default_colormap: 0x20,
        white_pixel: 0xffffff,
        black_pixel: 0,
        current_input_masks: EventMask::NO_EVENT,
        width_in_pixels: 640,
        height_in_pixels: 480,
        width_in_millimeters: 170,
        height_in_millimeters: 127,
        min_installed_maps: 1,
        max_installed_maps: 1,
        root_visual: 0x21,
        backing_stores: BackingStore::NOT_USEFUL,
        save_unders: false,
        root_depth: 24,
        allowed_depths: vec![],
    };
    let setup = Setup {
        status: 1,
        protocol_major_version: 11,
        protocol_minor_version: 0,
        length: 0,
        release_number: 1,
        resource_id_base: 0x200000,
        resource_id_mask: 0x1fffff,
        motion_buffer_size: 0,
        maximum_request_length: 65535,
        image_byte_order: ImageOrder::LSB_FIRST,
        bitmap_format_bit_order: ImageOrder::LSB_FIRST,
        bitmap_format_scanline_unit: 32,
        bitmap_format_scanline_pad: 32,
        min_keycode: 8,
        max_keycode: 255,
        vendor: b"hostile".to_vec(),
        pixmap_formats: vec![format(8, 8), format(24, 32)],
        roots: vec![screen],
    };
    let mut bytes = setup.serialize();
    let units = ((bytes.len() - 8) / 4) as u16;
    bytes[6..8].copy_from_slice(&units.to_ne_bytes());
    bytes
}

/// Reads one request: its opcode (`None` once the client is gone).
fn read_request(stream: &mut UnixStream) -> Option<u8> {
    let mut head = [0u8; 4];
    stream.read_exact(&mut head).ok()?;
    let mut units = usize::from(u16::from_ne_bytes([head[2], head[3]]));
    let mut seen = 4;
    if units == 0 {
        // BIG-REQUESTS form: the length follows
        let mut big = [0u8; 4];
        stream.read_exact(&mut big).ok()?;
        units = u32::from_ne_bytes(big) as usize;
        seen = 8;
    }
    let mut rest = vec![0u8; (units * 4).saturating_sub(seen)];
    stream.read_exact(&mut rest).ok()?;
    Some(head[0])
}

/// A 32-byte reply to request `seq`: no focus, no extension, no name.
fn reply(seq: u16) -> [u8; 32] {
    let mut r = [0u8; 32];
    r[0] = 1;
    r[2..4].copy_from_slice(&seq.to_ne_bytes());
    r
}

/// Writes `bytes` a byte every half second, until the client is gone.
fn drip(stream: &mut UnixStream, bytes: impl Iterator<Item = u8>) {
    for b in bytes {
        if stream.write_all(&[b]).is_err() {
            return;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn serve(mut stream: UnixStream, misbehaviour: Misbehaviour, trigger: Option<Trigger>) {
    let mut head = [0u8; 12];
    if stream.read_exact(&mut head).is_err() {
        return;
    }
    let name = usize::from(u16::from_ne_bytes([head[6], head[7]]));
    let data = usize::from(u16::from_ne_bytes([head[8], head[9]]));
    let mut auth = vec![0u8; name.div_ceil(4) * 4 + data.div_ceil(4) * 4];
    if stream.read_exact(&mut auth).is_err() {
        return;
    }
    match (misbehaviour, trigger) {
        (Misbehaviour::SilentSetup, Some(_)) => {
            let _ = stream.read_to_end(&mut Vec::new());
            return;
        }
        (Misbehaviour::DripSetup, Some(_)) => return drip(&mut stream, setup_bytes().into_iter()),
        _ => {}
    }
    if stream.write_all(&setup_bytes()).is_err() {
        return;
    }
    let mut seq: u16 = 0;
    let mut seen = 0;
    while let Some(opcode) = read_request(&mut stream) {
        seq = seq.wrapping_add(1);
        if let Some(t) = trigger.filter(|t| t.opcode == opcode) {
            seen += 1;
            if seen == t.nth {
                return misbehave(&mut stream, misbehaviour, seq);
            }
        }
        // GetInputFocus, QueryExtension, ListExtensions: the replies the lab asks for here
        if matches!(opcode, 43 | 98 | 99) && stream.write_all(&reply(seq)).is_err() {
            return;
        }
    }
}

fn misbehave(stream: &mut UnixStream, misbehaviour: Misbehaviour, seq: u16) {
    match misbehaviour {
        Misbehaviour::Flood => {
            let mut event = [0u8; 32];
            event[0] = 35; // GenericEvent, no more than its 32 bytes
            event[2..4].copy_from_slice(&seq.to_ne_bytes());
            let burst: Vec<u8> = event.iter().copied().cycle().take(32 * 2048).collect();
            while stream.write_all(&burst).is_ok() {}
        }
        Misbehaviour::HugeReply => {
            let mut head = reply(seq);
            head[4..8].copy_from_slice(&u32::MAX.to_ne_bytes());
            let zeros = vec![0u8; 64 * 1024];
            if stream.write_all(&head).is_ok() {
                while stream.write_all(&zeros).is_ok() {}
            }
        }
        Misbehaviour::Drip => drip(stream, std::iter::repeat(0)),
        Misbehaviour::SilentSetup | Misbehaviour::DripSetup => {}
    }
}

/// `lab x11 round-trip upload` on `server`, under the address-space cap, killed after
/// [`HARD_LIMIT`]: its output and how long it ran.
fn lab_on(server: &FakeServer) -> (Output, Duration) {
    let mut cmd = latscope();
    cmd.args(["lab", "x11", "round-trip", "upload", "--method", "put"])
        .args(["--display", server.display()])
        .args(["-n", "50", "--warmup", "5", "--timeout", "1s"])
        .env_remove("DISPLAY")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: only setrlimit (async-signal-safe) between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let cap = libc::rlimit {
                rlim_cur: ADDRESS_SPACE,
                rlim_max: ADDRESS_SPACE,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &cap) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let start = Instant::now();
    let mut child = cmd.spawn().unwrap();
    while child.try_wait().unwrap().is_none() && start.elapsed() < HARD_LIMIT {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    (out, start.elapsed())
}

/// Runs the lab against a server that misbehaves at `trigger`: exit 1 within `within`, the
/// message says `says`; when the misbehaviour comes in the upload row, the round-trip row
/// measured before it is printed.
fn refused(misbehaviour: Misbehaviour, trigger: Trigger, within: Duration, says: &[&str]) {
    let server = FakeServer::start(misbehaviour, trigger);
    let (out, took) = lab_on(&server);
    let (text, err) = (stdout(&out), stderr(&out));
    assert_eq!(
        out.status.code(),
        Some(1),
        "{misbehaviour:?}: {err}\n{text}"
    );
    assert!(took < within, "{misbehaviour:?} took {took:?}: {err}");
    for s in says {
        assert!(err.contains(s), "{misbehaviour:?}: no {s:?} in {err}");
    }
    if trigger.connection == MEASURING.connection {
        assert!(
            text.contains("round-trip") && text.contains("FAILED"),
            "{misbehaviour:?}: {text}"
        );
        assert!(err.contains("upload put 32x32x8"), "{err}");
    }
}

#[test]
fn a_server_that_floods_events_is_refused_with_memory_bounded_and_the_rows_before_kept() {
    for trigger in [DESCRIBING, MEASURING] {
        refused(
            Misbehaviour::Flood,
            trigger,
            Duration::from_secs(10),
            &["broke the protocol", "flood of events"],
        );
    }
}

#[test]
fn a_reply_that_claims_16_gib_is_refused_at_its_header() {
    for trigger in [DESCRIBING, MEASURING] {
        refused(
            Misbehaviour::HugeReply,
            trigger,
            Duration::from_secs(10),
            &["broke the protocol", "a reply of 17179869212 bytes"],
        );
    }
}

#[test]
fn a_server_that_never_answers_the_setup_fails_after_the_timeout() {
    refused(
        Misbehaviour::SilentSetup,
        DESCRIBING,
        Duration::from_secs(5),
        &["did not answer the connection setup within 1000 ms"],
    );
}

#[test]
fn a_server_that_answers_a_byte_at_a_time_fails_after_the_timeout_not_per_byte() {
    refused(
        Misbehaviour::DripSetup,
        DESCRIBING,
        Duration::from_secs(5),
        &[
            "did not answer the connection setup within 1000 ms",
            "bytes came in that time",
        ],
    );
    refused(
        Misbehaviour::Drip,
        MEASURING,
        Duration::from_secs(5),
        &[
            "no answer from the X server within 1000 ms",
            "bytes came in that time",
        ],
    );
}
