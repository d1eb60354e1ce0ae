//! SIGINT and SIGTERM: the first asks the running command to stop cleanly;
//! a second SIGINT ends the process at once (files already closed stay
//! whole, since they only get their final names when complete).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Set by the first SIGINT or SIGTERM.
pub static STOP: AtomicBool = AtomicBool::new(false);
static SEEN: AtomicUsize = AtomicUsize::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    // Only async-signal-safe work here: atomics and _exit.
    let n = SEEN.fetch_add(1, Ordering::SeqCst) + 1;
    STOP.store(true, Ordering::SeqCst);
    if n >= 2 && sig == libc::SIGINT {
        // SAFETY: _exit is async-signal-safe.
        unsafe { libc::_exit(130) };
    }
}

/// Installs the handlers.
pub fn install() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a plain sigaction with a handler that only touches atomics
        // and calls _exit.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}
