//! Ctrl-C: stop reading, keep and print what was read.
//!
//! The handler only raises the shared [`Cancel`] flag. It is installed without `SA_RESTART`, so
//! a read blocked on a pipe returns `EINTR` at once and the reader sees the flag; with
//! `SA_RESETHAND`, a second Ctrl-C kills the process as usual.

use std::sync::OnceLock;

use latscope::ingest::Cancel;

static CANCEL: OnceLock<Cancel> = OnceLock::new();

extern "C" fn on_sigint(_: libc::c_int) {
    if let Some(cancel) = CANCEL.get() {
        cancel.raise();
    }
}

/// The flag raised by the first Ctrl-C (SIGINT) or SIGTERM; installs the handler on first use.
pub fn cancel_on_interrupt() -> Cancel {
    CANCEL
        .get_or_init(|| {
            for signal in [libc::SIGINT, libc::SIGTERM] {
                // SAFETY: the handler only performs an atomic store through a value that is
                // initialised before the handler is installed and never dropped (a static).
                unsafe {
                    let mut action: libc::sigaction = std::mem::zeroed();
                    action.sa_sigaction = on_sigint as *const () as libc::sighandler_t;
                    action.sa_flags = libc::SA_RESETHAND;
                    libc::sigemptyset(&mut action.sa_mask);
                    libc::sigaction(signal, &action, std::ptr::null_mut());
                }
            }
            Cancel::new()
        })
        .clone()
}
