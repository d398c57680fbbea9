//! Process-level CPU runtime settings that matter for step time on small machines.
//!
//! * Threads: the CPU engine and candle's GEMM use the global rayon pool
//!   (size from `RAYON_NUM_THREADS`); candle 0.11's element-wise ops (the
//!   graph engine) use a separate spin-waiting "barrier pool" sized from
//!   `CANDLE_NUM_THREADS`. On a 2-core machine the two pools fight over the
//!   cores, so [`configure_cpu_threads`] sets `RAYON_NUM_THREADS = n` and
//!   `CANDLE_NUM_THREADS = 1` (element-wise candle ops then run on the
//!   calling thread).
//! * Allocator: the CPU engine keeps its activations from step to step, but
//!   the graph engine, evaluation and the gradient vectors allocate and free
//!   large buffers every step; glibc serves allocations above its mmap
//!   threshold with fresh `mmap`s, paying page faults on each.
//!   [`tune_cpu_allocator`] turns `mmap` allocation off and disables heap
//!   trimming so freed buffers are reused. The trainers call it on
//!   construction for CPU devices.
//! * Clock: [`cpu_seconds`], the CPU time of the process or the calling
//!   thread, which the step benchmark and the kernel probes read.

/// Sets the thread-count environment variables read by candle and rayon.
///
/// # Safety
/// Must be called at program start, before any other thread exists (it calls
/// `std::env::set_var`), and before the first candle or rayon operation.
pub unsafe fn configure_cpu_threads(n: usize) {
    let n = n.max(1).to_string();
    // SAFETY: the caller guarantees no other thread is running.
    unsafe {
        std::env::set_var("RAYON_NUM_THREADS", &n);
        std::env::set_var("CANDLE_NUM_THREADS", "1");
    }
}

/// Makes glibc keep freed memory for reuse instead of `mmap`/`munmap`-ing large
/// buffers on every step. Idempotent; a no-op on non-glibc targets. Affects
/// the whole process (memory is not returned to the OS while it runs).
pub fn tune_cpu_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            // SAFETY: mallopt only changes allocator parameters.
            unsafe {
                libc::mallopt(libc::M_MMAP_MAX, 0);
                libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
                libc::mallopt(libc::M_TOP_PAD, 64 << 20);
            }
        });
    }
}

/// Whose CPU time [`cpu_seconds`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuClock {
    /// Every thread of the process.
    Process,
    /// The calling thread only.
    Thread,
}

/// CPU time used so far, in seconds (0 where not measurable): the clock of
/// the step benchmarks and kernel probes on a busy machine, which other
/// processes' preemptions do not inflate as they do the wall clock.
pub fn cpu_seconds(clock: CpuClock) -> f64 {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let id = match clock {
            CpuClock::Process => libc::CLOCK_PROCESS_CPUTIME_ID,
            CpuClock::Thread => libc::CLOCK_THREAD_CPUTIME_ID,
        };
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: a valid pointer to a timespec.
        unsafe { libc::clock_gettime(id, &mut ts) };
        ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        let _ = clock;
        0.0
    }
}
