//! The harness's own process, as against the program it may supervise:
//! how it learns that it is being stopped (SIGTERM, SIGINT), so that a
//! run, a collective or a power sampling ends its log cleanly instead of
//! dying mid-line.

use std::sync::atomic::{AtomicI32, Ordering};

static TERMINATION: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_termination(sig: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    TERMINATION.store(sig, Ordering::SeqCst);
}

/// Turn the first SIGTERM or SIGINT into a flag ([`termination_signal`]);
/// a second one has the default effect (the handler resets itself), so a
/// stuck process still dies. Idempotent.
pub fn install_termination_handlers() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for sig in [libc::SIGTERM, libc::SIGINT] {
            // SAFETY: a handler that only stores into an atomic; sigaction
            // with a zeroed, then filled, struct.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_termination as extern "C" fn(libc::c_int) as usize;
                sa.sa_flags = libc::SA_RESETHAND | libc::SA_RESTART;
                libc::sigemptyset(&mut sa.sa_mask);
                libc::sigaction(sig, &sa, std::ptr::null_mut());
            }
        }
    });
}

/// The termination signal received, if any.
pub fn termination_signal() -> Option<i32> {
    match TERMINATION.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}
