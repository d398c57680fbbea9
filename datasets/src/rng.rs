//! referee's one source of seeded randomness: one generator, and the named
//! schemes that derive every stream from a seed.
//!
//! * Generator: SplitMix64 (Steele, Lea & Flood 2014): the state advances by
//!   `0x9E3779B97F4A7C15` and each output is the state passed through the
//!   SplitMix64 finaliser [`mix64`].
//! * Bounded draws ([`SplitMix64::below`]): Lemire's multiply-shift with
//!   rejection, so they are unbiased.
//! * Shuffles ([`shuffle`]): Fisher–Yates from the last element down, `j =
//!   below(i + 1)`.
//! * Stream seeds ([`derive_seed`]): a chain of `mix64` over the parts, so
//!   that (seed, epoch) or (seed, step) pairs give independent streams
//!   (data order: image shuffles, token windows).
//! * Run seeds ([`run_seeds`]): the N seeds of a session from its base seed.
//! * Labelled streams ([`label_stream`]): one stream per parameter name for
//!   weight initialisation (`referee_workloads::rng::Rng` draws its
//!   distributions from it).
//!
//! The values are pinned by tests: a change here changes every log's seeds,
//! data order and initial weights.

/// The SplitMix64 output finaliser (a bijection on `u64`).
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

pub const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// Seed of an independent stream: `h = 0x243F6A8885A308D3; for p in parts { h
/// = mix64(h ^ p) + GOLDEN }` (wrapping).
pub fn derive_seed(parts: &[u64]) -> u64 {
    let mut h: u64 = 0x243F_6A88_85A3_08D3;
    for &p in parts {
        h = mix64(h ^ p).wrapping_add(GOLDEN);
    }
    h
}

/// Stream tag for the image shuffle.
pub(crate) const DOMAIN_IMAGE_SHUFFLE: u64 = 0x1111_1111;
/// Stream tag for token-window sampling.
pub(crate) const DOMAIN_TOKEN_WINDOWS: u64 = 0x2222_2222;

/// SplitMix64 generator.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN);
        mix64(self.state)
    }

    /// Uniform in `0..n` (`n > 0`), unbiased.
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "below(0)");
        let threshold = n.wrapping_neg() % n;
        loop {
            let m = (self.next_u64() as u128) * (n as u128);
            if (m as u64) >= threshold {
                return (m >> 64) as u64;
            }
        }
    }
}

/// The seeds of `n` runs from a session's base seed: successive outputs of
/// `SplitMix64(base)` reduced modulo 2^31 (as the reference
/// implementations' seeds are), repeats skipped, so all differ.
pub fn run_seeds(base: u64, n: usize) -> Vec<u64> {
    let mut rng = SplitMix64::new(base);
    let mut out: Vec<u64> = Vec::with_capacity(n);
    while out.len() < n {
        let s = rng.next_u64() % (1 << 31);
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

/// Salt of the labelled streams (weight initialisation).
const LABEL_SALT: u64 = 0x5DEE_CE66_D1CE_4E5B;

/// The stream of `label` (e.g. a parameter name) under `seed`:
/// `SplitMix64(seed ^ rotl(fnv1a(label), 17) ^ LABEL_SALT)` with its first
/// output discarded.
pub fn label_stream(seed: u64, label: &str) -> SplitMix64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in label.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let mut r = salted(seed ^ h.rotate_left(17));
    r.next_u64();
    r
}

/// `SplitMix64(seed ^ LABEL_SALT)`: the unlabelled weight-init stream.
pub fn salted(seed: u64) -> SplitMix64 {
    SplitMix64::new(seed ^ LABEL_SALT)
}

/// Fisher–Yates shuffle.
pub(crate) fn shuffle<T>(v: &mut [T], rng: &mut SplitMix64) {
    for i in (1..v.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
}

/// The sample order of one epoch: `0..n`, shuffled with
/// `SplitMix64(derive_seed([seed, DOMAIN_IMAGE_SHUFFLE, epoch]))` when `shuffle`.
pub(crate) fn epoch_order(n: usize, seed: u64, epoch: u64, do_shuffle: bool) -> Vec<u32> {
    let mut order: Vec<u32> = (0..n as u32).collect();
    if do_shuffle {
        let mut rng = SplitMix64::new(derive_seed(&[seed, DOMAIN_IMAGE_SHUFFLE, epoch]));
        shuffle(&mut order, &mut rng);
    }
    order
}

/// The contiguous slice `[lo, hi)` of a global batch of `len` samples that
/// rank `rank` of `world_size` gets: `lo = len*rank/world`, `hi =
/// len*(rank+1)/world`. Slices are disjoint, cover the batch, and differ in
/// size by at most one.
pub(crate) fn shard_range(len: usize, rank: usize, world_size: usize) -> (usize, usize) {
    (len * rank / world_size, len * (rank + 1) / world_size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_reference_values() {
        // Reference outputs of SplitMix64 seeded with 1234567.
        let mut r = SplitMix64::new(1234567);
        assert_eq!(r.next_u64(), 6457827717110365317);
        assert_eq!(r.next_u64(), 3203168211198807973);
    }

    #[test]
    fn the_named_schemes_are_pinned() {
        assert_eq!(
            run_seeds(7, 4),
            vec![1496452567, 1950115356, 984689154, 1732127179]
        );
        let mut w = label_stream(42, "conv1.weight");
        assert_eq!(w.next_u64(), 13012574600116847868);
        assert_eq!(w.next_u64(), 6390416084841488158);
        assert_eq!(salted(5).next_u64(), 6305220157389943476);
        let seeds = run_seeds(1, 50);
        let distinct: std::collections::BTreeSet<_> = seeds.iter().collect();
        assert_eq!(distinct.len(), 50);
        assert!(seeds.iter().all(|s| *s < 1 << 31));
    }

    #[test]
    fn below_is_in_range_and_covers() {
        let mut r = SplitMix64::new(7);
        let mut seen = [0u32; 5];
        for _ in 0..5000 {
            seen[r.below(5) as usize] += 1;
        }
        assert!(seen.iter().all(|&c| c > 800), "{seen:?}");
    }

    #[test]
    fn epoch_order_is_deterministic_permutation() {
        let a = epoch_order(1000, 42, 3, true);
        let b = epoch_order(1000, 42, 3, true);
        assert_eq!(a, b);
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..1000).collect::<Vec<u32>>());
        assert_ne!(a, epoch_order(1000, 42, 4, true), "epochs differ");
        assert_ne!(a, epoch_order(1000, 43, 3, true), "seeds differ");
        assert_eq!(epoch_order(5, 42, 3, false), vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn shard_ranges_are_disjoint_and_cover() {
        for len in 0..20 {
            for world in 1..6 {
                let mut next = 0;
                for rank in 0..world {
                    let (lo, hi) = shard_range(len, rank, world);
                    assert_eq!(lo, next);
                    assert!(hi - lo <= len.div_ceil(world));
                    next = hi;
                }
                assert_eq!(next, len);
            }
        }
    }
}
