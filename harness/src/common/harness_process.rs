//! The harness's own process, as against the program it may supervise:
//! how it learns that it is being stopped (SIGTERM, SIGINT), so that a
//! run, a collective or a power sampling ends its log cleanly instead of
//! dying mid-line; and how its helper threads yield to the program.

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

/// Give the calling thread a lower scheduling priority than the program's
/// (Linux: a thread's own nice value). The harness's bulk work — writing,
/// hashing and parsing the result — then runs on what the program leaves
/// idle instead of taking turns with it on a busy machine; when it falls
/// behind it reads the program's output later (the files keep it), and the
/// program never waits for it. Lines are witnessed when read, and budgets
/// are enforced, at the same priority: a program that keeps every core
/// busy delays them by at most the scheduler's share for a nice-10 thread
/// (the witness's tolerance is for such delays; a late read never makes a
/// line look written early).
///
/// The thread also gets `name` (at most 15 bytes: Linux's limit), which
/// shows in `/proc/PID/task/*/comm`, `top -H` and the tests.
pub(crate) fn yield_to_the_program(name: &std::ffi::CStr) {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl and setpriority on this thread only; a failure leaves
    // the name or the priority as it was.
    unsafe {
        // The priority first: once the name shows, the thread has yielded.
        libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 10);
        libc::prctl(libc::PR_SET_NAME, name.as_ptr());
    }
    #[cfg(not(target_os = "linux"))]
    let _ = name;
}
