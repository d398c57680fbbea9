//! Deterministic draws for weight initialisation, so that the initial
//! weights depend only on the seed (not on candle's device RNG, the thread
//! count or the platform).

use referee_datasets::rng::{self, SplitMix64};

/// Draws for weight initialisation from one labelled stream of
/// [`referee_datasets::rng`] (the generator and the seeding schemes live
/// there, once).
#[derive(Debug, Clone)]
pub struct Rng {
    inner: SplitMix64,
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self {
            inner: rng::salted(seed),
        }
    }

    /// An independent stream derived from this seed and a label (e.g. a parameter name).
    pub fn derive(seed: u64, label: &str) -> Self {
        Self {
            inner: rng::label_stream(seed, label),
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.inner.next_u64()
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.uniform(); // (0, 1]
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    /// Normal with the given std, truncated to ±2 std (resampled).
    pub fn trunc_normal(&mut self, std: f64) -> f32 {
        loop {
            let z = self.normal();
            if z.abs() <= 2.0 {
                return (z * std) as f32;
            }
        }
    }

    /// `n` values uniform in [-bound, bound).
    pub fn uniform_vec(&mut self, n: usize, bound: f64) -> Vec<f32> {
        (0..n)
            .map(|_| ((self.uniform() * 2.0 - 1.0) * bound) as f32)
            .collect()
    }

    /// `n` values normal with std `std` (truncated at 2 std).
    pub fn normal_vec(&mut self, n: usize, std: f64) -> Vec<f32> {
        (0..n).map(|_| self.trunc_normal(std)).collect()
    }

    /// A uniformly random index in 0..n.
    pub fn below(&mut self, n: usize) -> usize {
        (self.uniform() * n as f64) as usize % n.max(1)
    }
}
