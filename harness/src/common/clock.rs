//! The harness owns the clock. Real runs use wall-clock milliseconds since
//! the Unix epoch (what MLLOG `time_ms` is); tests substitute a fake clock.

use std::sync::atomic::{AtomicU64, Ordering};

pub trait Clock: Send + Sync {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
    /// Seconds on a monotonic scale, for measuring durations.
    fn seconds(&self) -> f64 {
        self.now_ms() as f64 / 1000.0
    }
}

/// The system clock.
pub struct SystemClock {
    start: std::time::Instant,
    start_ms: u64,
}

impl Default for SystemClock {
    fn default() -> Self {
        let start_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        SystemClock {
            start: std::time::Instant::now(),
            start_ms,
        }
    }
}

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        // Monotonic from a wall-clock origin: timestamps never go backwards.
        self.start_ms + self.start.elapsed().as_millis() as u64
    }
    fn seconds(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }
}

/// A clock that moves only when told to (tests).
pub struct FakeClock {
    ms: AtomicU64,
}

impl FakeClock {
    pub fn new(start_ms: u64) -> Self {
        FakeClock {
            ms: AtomicU64::new(start_ms),
        }
    }
    pub fn advance_ms(&self, ms: u64) {
        self.ms.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for FakeClock {
    fn now_ms(&self) -> u64 {
        self.ms.load(Ordering::SeqCst)
    }
}
