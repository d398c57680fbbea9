//! A tiny deterministic RNG (SplitMix64) used for weight initialisation, so that
//! the initial weights depend only on the seed (not on candle's device RNG, the
//! thread count or the platform).

/// SplitMix64 generator.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self {
            state: seed ^ 0x5DEE_CE66_D1CE_4E5B,
        }
    }

    /// An independent stream derived from this seed and a label (e.g. a parameter name).
    pub fn derive(seed: u64, label: &str) -> Self {
        // FNV-1a of the label, mixed with the seed.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in label.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        let mut r = Self::new(seed ^ h.rotate_left(17));
        r.next_u64();
        r
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
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
