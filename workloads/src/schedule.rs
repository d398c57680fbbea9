//! Learning-rate schedules, counted in optimizer steps.
//!
//! Step `s` is the 0-based index of the optimizer step about to be taken.
//! * warm-up, `s < warmup_steps`: `lr = base_lr * (s + 1) / warmup_steps`
//!   (so the first step is not wasted at lr 0 and step `warmup_steps - 1` uses `base_lr`);
//! * decay, `warmup_steps <= s < total_steps`, with `p = (s - warmup) / (total - warmup)` in [0, 1):
//!   cosine: `end + (base - end) * 0.5 * (1 + cos(pi * p))`;
//!   polynomial: `end + (base - end) * (1 - p)^power`;
//! * after, `s >= total_steps`: `end_lr`.

use serde::{Deserialize, Serialize};

/// Decay shape after warm-up.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum DecayKind {
    Cosine,
    Polynomial { power: f64 },
}

/// Linear warm-up followed by cosine or polynomial decay to `end_lr`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LrSchedule {
    pub base_lr: f64,
    pub end_lr: f64,
    pub warmup_steps: u64,
    pub total_steps: u64,
    pub decay: DecayKind,
}

impl LrSchedule {
    pub fn lr(&self, step: u64) -> f64 {
        let warm = self.warmup_steps;
        if step < warm {
            return self.base_lr * (step + 1) as f64 / warm as f64;
        }
        if step >= self.total_steps || self.total_steps <= warm {
            return self.end_lr;
        }
        let p = (step - warm) as f64 / (self.total_steps - warm) as f64;
        let f = match self.decay {
            DecayKind::Cosine => 0.5 * (1.0 + (std::f64::consts::PI * p).cos()),
            DecayKind::Polynomial { power } => (1.0 - p).powf(power),
        };
        self.end_lr + (self.base_lr - self.end_lr) * f
    }
}
