//! An opt-in wall-clock profile of the LLM step's passes other than its
//! linear layers' products (those: [`super::planner::profile_products`]):
//! what `bench_step --passes` prints, to find what dominates the rest of a
//! step on the machine at hand. Off by default; off, a pass pays one relaxed
//! atomic load.
//!
//! Owns: the list of passes and their times. Does not know: what a pass
//! computes, or which model runs it (the CPU engine's LLM starts a
//! [`Timer`] at the top of each pass's function; the weights' transposes
//! and the trainer's optimiser step are wrapped in [`timed`]).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

/// A pass of the LLM step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    RmsNormForward,
    AttentionForward,
    SwigluForward,
    CrossEntropy,
    RmsNormBackward,
    SwigluBackward,
    AttentionBackward,
    /// The weights' transposes a step makes (`W` for `dx = dy·Wᵀ`, the tied
    /// embedding for the head).
    Transposes,
    /// Gradient clipping and the optimiser's update.
    Optimiser,
}

impl Pass {
    /// Every pass, in the order [`pass_times`] lists them.
    pub const ALL: [Pass; 9] = [
        Pass::RmsNormForward,
        Pass::AttentionForward,
        Pass::SwigluForward,
        Pass::CrossEntropy,
        Pass::RmsNormBackward,
        Pass::SwigluBackward,
        Pass::AttentionBackward,
        Pass::Transposes,
        Pass::Optimiser,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Pass::RmsNormForward => "RMSNorm forward",
            Pass::AttentionForward => "attention forward",
            Pass::SwigluForward => "SwiGLU forward",
            Pass::CrossEntropy => "cross-entropy",
            Pass::RmsNormBackward => "RMSNorm backward",
            Pass::SwigluBackward => "SwiGLU backward",
            Pass::AttentionBackward => "attention backward",
            Pass::Transposes => "weight transposes",
            Pass::Optimiser => "clipping and optimiser",
        }
    }
}

static ON: AtomicBool = AtomicBool::new(false);
static NANOS: [AtomicU64; Pass::ALL.len()] = [const { AtomicU64::new(0) }; Pass::ALL.len()];
static CALLS: [AtomicU64; Pass::ALL.len()] = [const { AtomicU64::new(0) }; Pass::ALL.len()];

/// Times every pass from now on (`true`), or stops (`false`); either way
/// the times so far are cleared.
pub fn profile_passes(on: bool) {
    for a in NANOS.iter().chain(&CALLS) {
        a.store(0, Ordering::Relaxed);
    }
    ON.store(on, Ordering::Relaxed);
}

/// Starts timing `pass` while profiling is on: the time until the guard is
/// dropped is added to it (at the top of a pass's function: its whole
/// body).
#[inline(always)]
pub fn start(pass: Pass) -> Timer {
    Timer(ON.load(Ordering::Relaxed).then(|| (pass, Instant::now())))
}

/// Runs `f`, adding its wall time to `pass` while profiling is on (for a
/// pass that is part of a function shared with other work).
#[inline(always)]
pub fn timed<R>(pass: Pass, f: impl FnOnce() -> R) -> R {
    let _timer = start(pass);
    f()
}

/// What [`start`] returns; records on drop.
#[must_use = "the pass is timed until the guard is dropped"]
pub struct Timer(Option<(Pass, Instant)>);

impl Drop for Timer {
    fn drop(&mut self) {
        if let Some((pass, t)) = self.0 {
            let ns = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
            NANOS[pass as usize].fetch_add(ns, Ordering::Relaxed);
            CALLS[pass as usize].fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// One pass's calls and wall time since [`profile_passes`]`(true)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PassTime {
    pub pass: Pass,
    pub calls: u64,
    /// Wall time of every call, seconds.
    pub seconds: f64,
}

/// The passes that ran since [`profile_passes`]`(true)`, in [`Pass::ALL`]'s
/// order.
pub fn pass_times() -> Vec<PassTime> {
    Pass::ALL
        .into_iter()
        .map(|pass| PassTime {
            pass,
            calls: CALLS[pass as usize].load(Ordering::Relaxed),
            seconds: NANOS[pass as usize].load(Ordering::Relaxed) as f64 * 1e-9,
        })
        .filter(|p| p.calls > 0)
        .collect()
}
