//! A session of referee's own benchmarks: a request resolved into a plan
//! ([`plan`]), the runs of the plan one after the other and their closing
//! check ([`runs`]), the life of one run ([`run`]), the ranks of a
//! data-parallel run ([`launch`], [`collective`], [`gpu`]), and its
//! progress drawn on a terminal ([`progress`]). The clock, the MLLOG
//! writer and the page cache clear it shares with `exec` are
//! [`crate::common`]'s. It must not know how a command parses
//! its flags or prints ([`crate::cli`]), nor how an external program is
//! supervised ([`crate::exec`]).

pub mod collective;
pub mod cpu_plans;
pub mod error;
pub mod gpu;
pub mod launch;
pub mod nccl_probe;
pub mod plan;
pub mod progress;
pub mod run;
pub mod runs;

pub use runs::{
    LogCheck, QuietSession, RunSummary, SessionObserver, closing_check, execute, run_line,
    target_text,
};

/// Set the compute threads (`-j N`; default: every core) before the first
/// compute thread starts.
///
/// # Safety
/// As [`referee_workloads::configure_cpu_threads`]: call it before any
/// other thread of this process exists.
pub unsafe fn configure_compute_threads(n: Option<usize>) {
    let threads = n.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    // SAFETY: the caller guarantees no other thread is running.
    unsafe { referee_workloads::configure_cpu_threads(threads) };
}
