//! Scalar helpers written so that loops over them vectorise: no branches,
//! no library calls.

/// `e^x`, branch-free (range reduction by `ln 2`, degree-6 polynomial,
/// exponent bits set directly); relative error below 3e-7 over the range
/// of f32. Inputs below −87 give `e^−87` rather than 0, above 88 `e^88`;
/// NaN stays NaN.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // 1.5·2²³: adding it rounds to an integer held in the low mantissa bits.
    const MAGIC: f32 = 12_582_912.0;
    let x = if x < -87.0 { -87.0 } else { x };
    let x = if x > 88.0 { 88.0 } else { x };
    let t = x * LOG2E + MAGIC;
    let n = t - MAGIC;
    let r = x - n * LN2_HI - n * LN2_LO;
    let p = 1.987_569_2e-4_f32;
    let p = p * r + 1.398_199_9e-3;
    let p = p * r + 8.333_452e-3;
    let p = p * r + 4.166_579_6e-2;
    let p = p * r + 1.666_666_5e-1;
    let p = p * r + 5e-1;
    let p = p * r * r + r + 1.0;
    let k = t.to_bits().wrapping_sub(MAGIC.to_bits()) as i32;
    p * f32::from_bits(((k + 127) << 23) as u32)
}

/// `1 / (1 + e^−x)`.
#[inline(always)]
pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + exp(-x))
}

/// Lanes of the partial results below: independent accumulators let the
/// compiler vectorise a reduction it must otherwise keep in order.
const LANES: usize = 8;

/// `Σ v`.
#[inline]
pub fn sum(v: &[f32]) -> f32 {
    let mut acc = [0f32; LANES];
    let chunks = v.chunks_exact(LANES);
    let tail: f32 = chunks.remainder().iter().sum();
    for c in chunks {
        for i in 0..LANES {
            acc[i] += c[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// `Σ a·b` over the shorter length.
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0f32; LANES];
    let (ca, cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..LANES {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// `Σ a·b·c` (each term `(a·b)·c`) over the shortest length, in the lanes
/// of [`dot`].
#[inline]
pub fn dot3(a: &[f32], b: &[f32], c: &[f32]) -> f32 {
    let n = a.len().min(b.len()).min(c.len());
    let (a, b, c) = (&a[..n], &b[..n], &c[..n]);
    let mut acc = [0f32; LANES];
    let (ca, cb, cc) = (
        a.chunks_exact(LANES),
        b.chunks_exact(LANES),
        c.chunks_exact(LANES),
    );
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .zip(cc.remainder())
        .map(|((x, y), z)| x * y * z)
        .sum();
    for ((x, y), z) in ca.zip(cb).zip(cc) {
        for i in 0..LANES {
            acc[i] += x[i] * y[i] * z[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// `max v` (−∞ for an empty slice; NaN is ignored unless all are NaN).
#[inline]
pub fn max(v: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; LANES];
    let chunks = v.chunks_exact(LANES);
    let tail = chunks
        .remainder()
        .iter()
        .fold(f32::NEG_INFINITY, |m, &x| m.max(x));
    for c in chunks {
        for i in 0..LANES {
            acc[i] = acc[i].max(c[i]);
        }
    }
    acc.iter().fold(tail, |m, &x| m.max(x))
}

/// `v[i] = e^((v[i] − shift)·scale)` in place; returns their sum.
#[inline]
pub fn exp_in_place(v: &mut [f32], shift: f32, scale: f32) -> f32 {
    for x in v.iter_mut() {
        *x = exp((*x - shift) * scale);
    }
    sum(v)
}

/// Rounds to the nearest bfloat16 value (ties to even), kept as f32. NaN stays NaN.
#[inline(always)]
pub fn round_bf16(v: f32) -> f32 {
    let b = v.to_bits();
    if v.is_nan() {
        return v;
    }
    let r = b.wrapping_add(0x7fff + ((b >> 16) & 1)) & 0xffff_0000;
    f32::from_bits(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_is_accurate_over_the_range_used() {
        let mut worst = 0f64;
        let mut x = -87.0f32;
        while x < 88.0 {
            let want = f64::from(x).exp();
            let got = f64::from(exp(x));
            worst = worst.max(((got - want) / want).abs());
            x += 0.0137;
        }
        assert!(worst < 3e-7, "relative error {worst}");
        assert_eq!(exp(0.0), 1.0);
        assert!(exp(f32::NAN).is_nan());
        assert!(exp(-1000.0) < 1e-37 && exp(-1000.0) >= 0.0);
        assert!(exp(1000.0).is_finite());
        assert!((sigmoid(0.0) - 0.5).abs() < 1e-7);
    }

    #[test]
    fn reductions_match_the_plain_loops() {
        let v: Vec<f32> = (0..37)
            .map(|i| ((i * 7919) % 101) as f32 / 13.0 - 3.0)
            .collect();
        let w: Vec<f32> = (0..37)
            .map(|i| ((i * 104_729) % 97) as f32 / 11.0 - 4.0)
            .collect();
        for n in [0, 1, 7, 8, 9, 16, 37] {
            let (a, b) = (&v[..n], &w[..n]);
            let s: f32 = a.iter().sum();
            assert!((sum(a) - s).abs() < 1e-4, "sum of {n}");
            let d: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
            assert!((dot(a, b) - d).abs() < 1e-3, "dot of {n}");
            let c = &v[37 - n..];
            let d3: f32 = a.iter().zip(b).zip(c).map(|((x, y), z)| x * y * z).sum();
            assert!((dot3(a, b, c) - d3).abs() < 1e-2, "dot3 of {n}");
            // The lanes of `dot`: the same bits as dot(a·b, c).
            let ab: Vec<f32> = a.iter().zip(b).map(|(x, y)| x * y).collect();
            assert_eq!(
                dot3(a, b, c).to_bits(),
                dot(&ab, c).to_bits(),
                "dot3 of {n}"
            );
            let m = a.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x));
            assert_eq!(max(a), m, "max of {n}");
            let mut e = a.to_vec();
            let total = exp_in_place(&mut e, 1.5, 0.5);
            for (x, y) in e.iter().zip(a) {
                assert!((x - ((y - 1.5) * 0.5).exp()).abs() < 1e-5);
            }
            assert!((total - e.iter().sum::<f32>()).abs() < 1e-4);
        }
    }

    #[test]
    fn bf16_rounding_matches_the_format() {
        assert_eq!(round_bf16(1.0), 1.0);
        // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0)
        assert_eq!(round_bf16(1.0 + 1.0 / 256.0), 1.0);
        assert_eq!(round_bf16(1.0 + 3.0 / 256.0), 1.0 + 1.0 / 64.0);
        assert_eq!(round_bf16(-2.5), -2.5);
        assert!(round_bf16(f32::NAN).is_nan());
        assert_eq!(round_bf16(f32::INFINITY), f32::INFINITY);
        let v = 0.123_456_7f32;
        assert!((round_bf16(v) - v).abs() <= v * 2f32.powi(-8));
        assert_eq!(round_bf16(v).to_bits() & 0xffff, 0);
    }
}
