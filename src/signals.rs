//! Ctrl-C and SIGTERM: stop gracefully, keep and print what was read — and always end.
//!
//! The first SIGINT or SIGTERM raises the shared [`Cancel`] flag. The handler is installed
//! without `SA_RESTART`, so a read blocked on a pipe returns `EINTR` at once and the reader sees
//! the flag. Some waits cannot see it: opening a FIFO that has no writer (the standard library
//! restarts `open` after `EINTR`), a child that never exits, a peer that never answers. So the
//! handler also wakes a watchdog thread through a self-pipe (`write(2)` is async-signal-safe);
//! if the process is still running [`GRACE`] later, the watchdog ends it with status
//! 128 + signal, as the default action would have. A second signal changes nothing: coreutils
//! `timeout` sends SIGTERM to latscope and then again to its whole process group, and a handler
//! reset after the first (`SA_RESETHAND`, as it was) let that second one kill latscope before it
//! printed or saved what it had (9 runs in 10). So the handler stays, every signal only raises
//! the flag, and the watchdog alone ends a process whose work does not stop. `timeout`, systemd
//! and CI runners send SIGTERM: it is always enough, once or twice.
//!
//! Commands with nothing to keep (compare, export, merge, plot, report, probes) end at once, as
//! with the default action ([`end_on_interrupt`]: no grace, the signal raised again with its
//! default action), but not before the watchdog removed the temporary file of an output being
//! written ([`latscope::files::output::remove_pending`]).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Duration;

use latscope::ingest::Cancel;

/// How long a graceful stop may take before the watchdog ends the process.
pub const GRACE: Duration = Duration::from_secs(2);

static CANCEL: OnceLock<Cancel> = OnceLock::new();
static INSTALLED: OnceLock<()> = OnceLock::new();
/// Whether the command stops gracefully on the flag ([`cancel_on_interrupt`]).
static GRACEFUL: AtomicBool = AtomicBool::new(false);
/// The write end of the watchdog's pipe (-1: no watchdog).
static WAKE: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(signal: libc::c_int) {
    if let Some(cancel) = CANCEL.get() {
        cancel.raise_from_signal(signal);
    }
    let fd = WAKE.load(Ordering::Relaxed);
    if fd >= 0 {
        let byte = signal as u8;
        // SAFETY: write(2) on a pipe is async-signal-safe; the byte lives on this stack frame.
        unsafe { libc::write(fd, (&byte as *const u8).cast(), 1) };
    }
}

/// Starts the thread that ends the process [`GRACE`] after the first signal.
fn start_watchdog() {
    let mut fds = [0; 2];
    // SAFETY: fds has room for the two descriptors pipe2 writes.
    // Non-blocking: a burst of signals filling the pipe must not block the handler.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return;
    }
    let [read_end, write_end] = fds;
    WAKE.store(write_end, Ordering::Relaxed);
    let spawned = std::thread::Builder::new()
        .name("signal-watchdog".into())
        .spawn(move || {
            let mut signal = 0u8;
            loop {
                let mut poll = libc::pollfd {
                    fd: read_end,
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: polls the one descriptor this thread owns.
                unsafe { libc::poll(&mut poll, 1, -1) };
                // SAFETY: reads one byte into `signal` from the pipe this thread owns.
                let n = unsafe { libc::read(read_end, (&mut signal as *mut u8).cast(), 1) };
                if n == 1 {
                    break;
                }
                let e = std::io::Error::last_os_error().kind();
                if n < 0
                    && matches!(
                        e,
                        std::io::ErrorKind::Interrupted | std::io::ErrorKind::WouldBlock
                    )
                {
                    continue;
                }
                return;
            }
            if GRACEFUL.load(Ordering::Relaxed) {
                std::thread::sleep(GRACE);
                // The graceful stop may have begun writing its outputs meanwhile.
                latscope::files::output::remove_pending();
                let message = format!(
                    "latscope: still running {} s after signal {signal}: ending now (a wait could not be interrupted)\n",
                    GRACE.as_secs()
                );
                // SAFETY: plain write to stderr (no lock another thread could hold), then
                // _exit, which skips destructors that may be what is blocked.
                unsafe {
                    libc::write(2, message.as_ptr().cast(), message.len());
                    libc::_exit(128 + i32::from(signal));
                }
            }
            latscope::files::output::remove_pending();
            // SAFETY: the default action for the signal, then the signal again: the process
            // ends by it, as it would have without a handler.
            unsafe {
                libc::signal(i32::from(signal), libc::SIG_DFL);
                libc::raise(i32::from(signal));
                libc::_exit(128 + i32::from(signal));
            }
        });
    if spawned.is_err() {
        WAKE.store(-1, Ordering::Relaxed);
    }
}

/// Installs the handler and the watchdog: a Ctrl-C (SIGINT) or SIGTERM ends the process at
/// once, having removed the temporary file of an output being written. For every command; those
/// that keep results call [`cancel_on_interrupt`] too.
pub fn end_on_interrupt() {
    INSTALLED.get_or_init(|| {
        start_watchdog();
        for signal in [libc::SIGINT, libc::SIGTERM] {
            // SAFETY: the handler only performs an atomic store through a value that is
            // initialised before the handler is installed and never dropped (a static), and a
            // write(2) to a pipe.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
                // No SA_RESETHAND (a second signal must not kill) and no SA_RESTART (a
                // blocked read returns EINTR and sees the flag).
                action.sa_flags = 0;
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(signal, &action, std::ptr::null_mut());
            }
        }
    });
}

/// The flag raised by a Ctrl-C (SIGINT) or SIGTERM: from now on a signal stops the command
/// gracefully, and the watchdog ends it only [`GRACE`] later.
pub fn cancel_on_interrupt() -> Cancel {
    let cancel = CANCEL.get_or_init(Cancel::new).clone();
    GRACEFUL.store(true, Ordering::Relaxed);
    end_on_interrupt();
    cancel
}
