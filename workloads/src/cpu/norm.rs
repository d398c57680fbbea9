//! Batch normalisation for the CPU engine, and the element-wise passes around
//! it: scale and shift, residual join, ReLU and their gradients. Statistics
//! are summed in f32 over one image row and in f64 beyond, in parallel over
//! the images.

use rayon::prelude::*;

use super::conv::{Image, par_images, thread_ranges};

/// A per-channel affine map `v · scale + shift`.
#[derive(Debug, Clone, PartialEq)]
pub struct Affine {
    pub scale: Vec<f32>,
    pub shift: Vec<f32>,
}

/// Batch normalisation over (N, H, W) per channel: batch statistics in
/// training (saved for the backward pass, folded into running averages with
/// torch's momentum convention and unbiased variance), running statistics in
/// evaluation. `gamma` and `beta` are offsets into the flat parameters.
#[derive(Debug, Clone)]
pub struct BatchNorm {
    pub c: usize,
    pub gamma: usize,
    pub beta: usize,
    pub eps: f32,
    pub momentum: f32,
    pub running_mean: Vec<f32>,
    pub running_var: Vec<f32>,
    mean: Vec<f32>,
    invstd: Vec<f32>,
}

/// Per-channel sums over the `h` interior rows of `n` images: `f(i, y, acc,
/// scratch)` adds row `y` of image `i` into `acc` (zeroed per row, f32;
/// `scratch` is a per-thread buffer); rows are totalled in f64.
fn channel_sums(
    n: usize,
    h: usize,
    width: usize,
    f: impl Fn(usize, usize, &mut [f32], &mut Vec<f32>) + Sync,
) -> Vec<f64> {
    thread_ranges(n)
        .into_par_iter()
        .map(|imgs| {
            let mut total = vec![0f64; width];
            let mut row = vec![0f32; width];
            let mut scratch = Vec::new();
            for i in imgs {
                for y in 0..h {
                    row.fill(0.0);
                    f(i, y, &mut row, &mut scratch);
                    total
                        .iter_mut()
                        .zip(&row)
                        .for_each(|(t, r)| *t += f64::from(*r));
                }
            }
            total
        })
        .reduce(
            || vec![0f64; width],
            |mut a, b| {
                a.iter_mut().zip(&b).for_each(|(x, y)| *x += y);
                a
            },
        )
}

impl BatchNorm {
    pub fn new(c: usize, gamma: usize, beta: usize, eps: f32, momentum: f32) -> Self {
        Self {
            c,
            gamma,
            beta,
            eps,
            momentum,
            running_mean: vec![0.0; c],
            running_var: vec![1.0; c],
            mean: vec![0.0; c],
            invstd: vec![1.0; c],
        }
    }

    /// Training mode: statistics of `z`'s interior, kept for
    /// [`BatchNorm::backward`] and folded into the running averages.
    pub fn train(&mut self, z: &Image, params: &[f32]) -> Affine {
        let c = self.c;
        assert_eq!(z.c, c, "batch norm: channels");
        let sums = channel_sums(z.n, z.h, 2 * c, |i, y, acc, _| {
            let (s, s2) = acc.split_at_mut(c);
            sum_squares(z.row(i, y), s, s2, blocked(c));
        });
        let m = z.n * z.h * z.w;
        let mf = m as f64;
        let mut var = vec![0f32; c];
        for j in 0..c {
            let mu = sums[j] / mf;
            var[j] = (sums[c + j] / mf - mu * mu).max(0.0) as f32;
            self.mean[j] = mu as f32;
            self.invstd[j] = 1.0 / (var[j] + self.eps).sqrt();
        }
        fold_running_stats(
            &mut self.running_mean,
            &mut self.running_var,
            &self.mean,
            &var,
            m,
            self.momentum,
        );
        let gamma = &params[self.gamma..self.gamma + c];
        let beta = &params[self.beta..self.beta + c];
        let scale: Vec<f32> = (0..c).map(|j| self.invstd[j] * gamma[j]).collect();
        let shift = (0..c).map(|j| beta[j] - self.mean[j] * scale[j]).collect();
        Affine { scale, shift }
    }

    /// Evaluation mode: the affine map of the running statistics.
    pub fn eval(&self, params: &[f32]) -> Affine {
        let c = self.c;
        let gamma = &params[self.gamma..self.gamma + c];
        let beta = &params[self.beta..self.beta + c];
        let scale: Vec<f32> = (0..c)
            .map(|j| gamma[j] / (self.running_var[j] + self.eps).sqrt())
            .collect();
        let shift = (0..c)
            .map(|j| beta[j] - self.running_mean[j] * scale[j])
            .collect();
        Affine { scale, shift }
    }

    /// Backward of the last [`BatchNorm::train`]: `dy` is the gradient of
    /// the output, zeroed where `mask` (the ReLU output that followed, if
    /// any) is not positive. Writes `dz` (interior) and the gradients of γ
    /// and β into `grads` at their offsets.
    pub fn backward(
        &self,
        z: &Image,
        dy: &Image,
        mask: Option<&Image>,
        params: &[f32],
        grads: &mut [f32],
        dz: &mut Image,
    ) {
        let c = self.c;
        assert!(
            z.same_interior(dy) && z.same_interior(dz),
            "batch norm: shapes"
        );
        if let Some(m) = mask {
            assert!(z.same_interior(m), "batch norm: mask shape");
        }
        // The channel loops zip slices of exactly `c` values: indexed, their
        // bounds checks kept them scalar, and this backward pass cost as
        // much as a convolution. The arithmetic per element is unchanged.
        let (mean, invstd) = (&self.mean[..c], &self.invstd[..c]);
        let sums = channel_sums(z.n, z.h, 2 * c, |i, y, acc, buf| {
            let (s, s2) = acc.split_at_mut(c);
            let rows = (dy.row(i, y), mask.map(|m| m.row(i, y)), z.row(i, y));
            grad_sums(rows, (mean, invstd), s, s2, buf, blocked(c));
        });
        let (sdy, sdyx) = sums.split_at(c);
        let mf = (z.n * z.h * z.w) as f32;
        let gamma = &params[self.gamma..self.gamma + c];
        // dz = γ·invstd · (d − mean(d) − x̂·mean(d·x̂)) = k1·d + k2·z + k3
        let mut k1 = vec![0f32; c];
        let mut k2 = vec![0f32; c];
        let mut k3 = vec![0f32; c];
        for j in 0..c {
            let g = gamma[j] * invstd[j];
            let (mdy, mdyx) = (sdy[j] as f32 / mf, sdyx[j] as f32 / mf);
            k1[j] = g;
            k2[j] = -g * mdyx * invstd[j];
            k3[j] = -g * mdy + g * mdyx * invstd[j] * mean[j];
        }
        let h = z.h;
        let local: Vec<usize> = (0..h).map(|y| dz.local(y, 0)).collect();
        let len = dz.row_len();
        let ks = (&k1[..], &k2[..], &k3[..]);
        par_images(dz, |i, img| {
            let mut buf = Vec::with_capacity(len);
            for (y, &s) in local.iter().enumerate() {
                let rows = (dy.row(i, y), mask.map(|m| m.row(i, y)), z.row(i, y));
                grad_rows(rows, ks, &mut img[s..s + len], &mut buf, blocked(c));
            }
        });
        for j in 0..c {
            grads[self.gamma + j] = sdyx[j] as f32;
            grads[self.beta + j] = sdy[j] as f32;
        }
    }
}

/// Channels per block of the blocked loops: two AVX2 vectors, one AVX-512.
const CB: usize = 16;

/// Whether `c` channels take the blocked loops (below).
///
/// The plain loops run over one pixel's `c` channels at a time, `c` known
/// only at run time: per pixel they load and store every running sum and
/// reload the per-channel constants, and a masked gradient is copied to a
/// buffer first. The blocked loops keep [`CB`] channels' sums and constants
/// in registers over a whole row and select the masked value in place.
/// Each channel's sum still adds the same values, computed by the same
/// expressions, in the same pixel order from the same start: the results
/// are bitwise those of the plain loops.
fn blocked(c: usize) -> bool {
    c.is_multiple_of(CB)
}

/// The masked gradient value: `d` where `m > 0`, else 0.
#[inline(always)]
fn masked(d: f32, m: f32) -> f32 {
    if m > 0.0 { d } else { 0.0 }
}

/// `s += v`, `s2 += v·v` per channel over the pixels of `row`.
fn sum_squares(row: &[f32], s: &mut [f32], s2: &mut [f32], blocked: bool) {
    let c = s.len();
    if !blocked {
        for px in row.chunks_exact(c) {
            for ((s, s2), &v) in s.iter_mut().zip(s2.iter_mut()).zip(px) {
                *s += v;
                *s2 += v * v;
            }
        }
        return;
    }
    for (b, (sb, s2b)) in s
        .chunks_exact_mut(CB)
        .zip(s2.chunks_exact_mut(CB))
        .enumerate()
    {
        let (mut a, mut q) = (block(sb), block(s2b));
        for px in row.chunks_exact(c) {
            let v = block(&px[b * CB..]);
            for j in 0..CB {
                a[j] += v[j];
                q[j] += v[j] * v[j];
            }
        }
        sb.copy_from_slice(&a);
        s2b.copy_from_slice(&q);
    }
}

/// The first [`CB`] values of `v`.
#[inline(always)]
fn block(v: &[f32]) -> [f32; CB] {
    v[..CB].try_into().expect("a whole block")
}

/// The rows one step of the batch norm's backward pass reads: the output
/// gradient, the mask (if any) and the normalisation's input.
type GradRows<'a> = (&'a [f32], Option<&'a [f32]>, &'a [f32]);

/// The backward pass's sums over one row: `s += d`, `s2 += d·(z − μ)·σ⁻¹`
/// per channel (`d` the masked gradient).
fn grad_sums(
    (dy, mask, z): GradRows,
    (mean, invstd): (&[f32], &[f32]),
    s: &mut [f32],
    s2: &mut [f32],
    buf: &mut Vec<f32>,
    blocked: bool,
) {
    let c = s.len();
    if !blocked {
        let d = masked_row(dy, mask, buf);
        for (dp, zp) in d.chunks_exact(c).zip(z.chunks_exact(c)) {
            for (((s, s2), (&dv, &zv)), (&mu, &is)) in s
                .iter_mut()
                .zip(s2.iter_mut())
                .zip(dp.iter().zip(zp))
                .zip(mean.iter().zip(invstd))
            {
                *s += dv;
                *s2 += dv * (zv - mu) * is;
            }
        }
        return;
    }
    for (b, (sb, s2b)) in s
        .chunks_exact_mut(CB)
        .zip(s2.chunks_exact_mut(CB))
        .enumerate()
    {
        let o = b * CB;
        let (mut a, mut q) = (block(sb), block(s2b));
        let (mu, is) = (block(&mean[o..]), block(&invstd[o..]));
        for (p, (dp, zp)) in dy.chunks_exact(c).zip(z.chunks_exact(c)).enumerate() {
            let (mut d, zv) = (block(&dp[o..]), block(&zp[o..]));
            if let Some(m) = mask {
                let m = block(&m[p * c + o..]);
                for j in 0..CB {
                    d[j] = masked(d[j], m[j]);
                }
            }
            for j in 0..CB {
                a[j] += d[j];
                q[j] += d[j] * (zv[j] - mu[j]) * is[j];
            }
        }
        sb.copy_from_slice(&a);
        s2b.copy_from_slice(&q);
    }
}

/// The backward pass's output over one row: `out = k1·d + k2·z + k3` per
/// channel (`d` the masked gradient).
fn grad_rows(
    (dy, mask, z): GradRows,
    (k1, k2, k3): (&[f32], &[f32], &[f32]),
    out: &mut [f32],
    buf: &mut Vec<f32>,
    blocked: bool,
) {
    let c = k1.len();
    if !blocked {
        let d = masked_row(dy, mask, buf);
        for ((op, dp), zp) in out
            .chunks_exact_mut(c)
            .zip(d.chunks_exact(c))
            .zip(z.chunks_exact(c))
        {
            for ((o, (&dv, &zv)), ((&a, &b), &k)) in op
                .iter_mut()
                .zip(dp.iter().zip(zp))
                .zip(k1.iter().zip(k2).zip(k3))
            {
                *o = a * dv + b * zv + k;
            }
        }
        return;
    }
    for o in (0..c).step_by(CB) {
        let (a, b, k) = (block(&k1[o..]), block(&k2[o..]), block(&k3[o..]));
        for (p, (op, (dp, zp))) in out
            .chunks_exact_mut(c)
            .zip(dy.chunks_exact(c).zip(z.chunks_exact(c)))
            .enumerate()
        {
            let (mut d, zv) = (block(&dp[o..]), block(&zp[o..]));
            if let Some(m) = mask {
                let m = block(&m[p * c + o..]);
                for j in 0..CB {
                    d[j] = masked(d[j], m[j]);
                }
            }
            let op = &mut op[o..o + CB];
            for j in 0..CB {
                op[j] = a[j] * d[j] + b[j] * zv[j] + k[j];
            }
        }
    }
}

/// `dy`, or `dy` zeroed where `mask` is not positive (into `buf`).
fn masked_row<'a>(dy: &'a [f32], mask: Option<&[f32]>, buf: &'a mut Vec<f32>) -> &'a [f32] {
    match mask {
        None => dy,
        Some(m) => {
            buf.clear();
            // Both operands loaded unconditionally: the select vectorises.
            buf.extend(dy.iter().zip(m).map(|(&d, &m)| masked(d, m)));
            buf
        }
    }
}

/// What is added to a normalised value before the ReLU.
pub enum Residual<'a> {
    None,
    /// The block input, as is.
    Identity(&'a Image),
    /// A projection: another convolution output and its normalisation.
    Affine(&'a Image, &'a Affine),
}

/// `dst = relu?(z · a.scale + a.shift + residual)` on the interiors.
pub fn apply(z: &Image, a: &Affine, res: Residual, relu: bool, dst: &mut Image) {
    let c = z.c;
    assert!(z.same_interior(dst), "apply: shapes");
    let local: Vec<usize> = (0..z.h).map(|y| dst.local(y, 0)).collect();
    let len = dst.row_len();
    let (sc, sh) = (&a.scale[..c], &a.shift[..c]);
    par_images(dst, |i, img| {
        for (y, &s) in local.iter().enumerate() {
            let out = &mut img[s..s + len];
            let row_res = match &res {
                Residual::None => RowResidual::None,
                Residual::Identity(x) => RowResidual::Identity(x.row(i, y)),
                Residual::Affine(r, ra) => {
                    RowResidual::Affine(r.row(i, y), &ra.scale[..c], &ra.shift[..c])
                }
            };
            apply_row(out, z.row(i, y), (sc, sh), row_res, blocked(c));
            if relu {
                out.iter_mut().for_each(|v| *v = v.max(0.0));
            }
        }
    });
}

/// One row's residual for [`apply_row`].
#[derive(Clone, Copy)]
enum RowResidual<'a> {
    None,
    Identity(&'a [f32]),
    /// The projection's row and its normalisation (scale, shift).
    Affine(&'a [f32], &'a [f32], &'a [f32]),
}

/// One row of [`apply`] before its ReLU: `out = z·scale + shift + residual`.
fn apply_row(
    out: &mut [f32],
    zr: &[f32],
    (sc, sh): (&[f32], &[f32]),
    res: RowResidual,
    blocked: bool,
) {
    let c = sc.len();
    if !blocked {
        match res {
            RowResidual::None => {
                for (op, zp) in out.chunks_exact_mut(c).zip(zr.chunks_exact(c)) {
                    for ((o, &zv), (&a, &b)) in op.iter_mut().zip(zp).zip(sc.iter().zip(sh)) {
                        *o = zv * a + b;
                    }
                }
            }
            RowResidual::Identity(xr) => {
                for ((op, zp), xp) in out
                    .chunks_exact_mut(c)
                    .zip(zr.chunks_exact(c))
                    .zip(xr.chunks_exact(c))
                {
                    for ((o, (&zv, &xv)), (&a, &b)) in
                        op.iter_mut().zip(zp.iter().zip(xp)).zip(sc.iter().zip(sh))
                    {
                        *o = zv * a + b + xv;
                    }
                }
            }
            RowResidual::Affine(rr, rs, rh) => {
                for ((op, zp), rp) in out
                    .chunks_exact_mut(c)
                    .zip(zr.chunks_exact(c))
                    .zip(rr.chunks_exact(c))
                {
                    for ((o, (&zv, &rv)), ((&a, &b), (&ra, &rb))) in op
                        .iter_mut()
                        .zip(zp.iter().zip(rp))
                        .zip(sc.iter().zip(sh).zip(rs.iter().zip(rh)))
                    {
                        *o = zv * a + b + rv * ra + rb;
                    }
                }
            }
        }
        return;
    }
    for o in (0..c).step_by(CB) {
        let (a, b) = (block(&sc[o..]), block(&sh[o..]));
        let pixels = out.chunks_exact_mut(c).zip(zr.chunks_exact(c));
        match res {
            RowResidual::None => {
                for (op, zp) in pixels {
                    let (op, zv) = (&mut op[o..o + CB], block(&zp[o..]));
                    for j in 0..CB {
                        op[j] = zv[j] * a[j] + b[j];
                    }
                }
            }
            RowResidual::Identity(xr) => {
                for ((op, zp), xp) in pixels.zip(xr.chunks_exact(c)) {
                    let (op, zv, xv) = (&mut op[o..o + CB], block(&zp[o..]), block(&xp[o..]));
                    for j in 0..CB {
                        op[j] = zv[j] * a[j] + b[j] + xv[j];
                    }
                }
            }
            RowResidual::Affine(rr, rs, rh) => {
                let (ra, rb) = (block(&rs[o..]), block(&rh[o..]));
                for ((op, zp), rp) in pixels.zip(rr.chunks_exact(c)) {
                    let (op, zv, rv) = (&mut op[o..o + CB], block(&zp[o..]), block(&rp[o..]));
                    for j in 0..CB {
                        op[j] = zv[j] * a[j] + b[j] + rv[j] * ra[j] + rb[j];
                    }
                }
            }
        }
    }
}

/// `dst = g` where `out > 0`, else 0 (the gradient through a ReLU whose output is `out`).
pub fn relu_grad(g: &Image, out: &Image, dst: &mut Image) {
    assert!(
        g.same_interior(out) && g.same_interior(dst),
        "relu_grad: shapes"
    );
    let local: Vec<usize> = (0..g.h).map(|y| dst.local(y, 0)).collect();
    let len = dst.row_len();
    par_images(dst, |i, img| {
        for (y, &s) in local.iter().enumerate() {
            for ((d, &gv), &ov) in img[s..s + len]
                .iter_mut()
                .zip(g.row(i, y))
                .zip(out.row(i, y))
            {
                *d = if ov > 0.0 { gv } else { 0.0 };
            }
        }
    });
}

/// `dst += src` on the interiors.
pub fn add_into(src: &Image, dst: &mut Image) {
    assert!(src.same_interior(dst), "add_into: shapes");
    let local: Vec<usize> = (0..src.h).map(|y| dst.local(y, 0)).collect();
    let len = dst.row_len();
    par_images(dst, |i, img| {
        for (y, &s) in local.iter().enumerate() {
            for (d, v) in img[s..s + len].iter_mut().zip(src.row(i, y)) {
                *d += v;
            }
        }
    });
}

/// Folds a batch's statistics (`mean`, biased `var` over `count` values per
/// channel) into running averages: torch's convention, `momentum` weighs the
/// new batch and the variance is made unbiased. The graph's batch norm and the
/// engine's both use this.
pub fn fold_running_stats(
    running_mean: &mut [f32],
    running_var: &mut [f32],
    mean: &[f32],
    var: &[f32],
    count: usize,
    momentum: f32,
) {
    let unbias = if count > 1 {
        count as f32 / (count - 1) as f32
    } else {
        1.0
    };
    let keep = 1.0 - momentum;
    for (j, (rm, rv)) in running_mean
        .iter_mut()
        .zip(running_var.iter_mut())
        .enumerate()
    {
        *rm = keep * *rm + momentum * mean[j];
        *rv = keep * *rv + momentum * var[j] * unbias;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::test_util::bits;
    use crate::rng::Rng;

    #[test]
    fn blocked_channel_loops_give_bitwise_the_plain_ones() {
        // The calibration's curves depend on training being exact, not
        // close: every blocked loop must reproduce the plain loop's bits,
        // with and without a mask, from non-zero starting sums.
        let mut rng = Rng::new(11);
        for c in [16, 32, 64] {
            assert!(blocked(c));
            let px = 13;
            let row = rng.normal_vec(px * c, 1.0);
            let z = rng.normal_vec(px * c, 1.0);
            // A ReLU output: exact zeros (of both signs) as well.
            let mut m = rng.normal_vec(px * c, 1.0);
            for (i, v) in m.iter_mut().enumerate() {
                match i % 5 {
                    0 => *v = 0.0,
                    1 => *v = -0.0,
                    _ => {}
                }
            }
            let mean = rng.normal_vec(c, 0.3);
            let invstd = rng.normal_vec(c, 1.0);
            let ks: Vec<Vec<f32>> = (0..3).map(|_| rng.normal_vec(c, 1.0)).collect();
            let start = rng.normal_vec(2 * c, 1.0);
            let run = |b: bool| {
                let (mut s, mut s2) = (start[..c].to_vec(), start[c..].to_vec());
                sum_squares(&row, &mut s, &mut s2, b);
                let mut out = vec![(bits(&s), bits(&s2))];
                for res in [
                    RowResidual::None,
                    RowResidual::Identity(&z),
                    RowResidual::Affine(&z, &ks[1], &ks[2]),
                ] {
                    let mut o = vec![0f32; px * c];
                    apply_row(&mut o, &row, (&ks[0], &mean), res, b);
                    out.push((bits(&o), vec![]));
                }
                for mask in [None, Some(&m[..])] {
                    let mut buf: Vec<f32> = Vec::new();
                    let (mut s, mut s2) = (start[..c].to_vec(), start[c..].to_vec());
                    grad_sums(
                        (&row, mask, &z),
                        (&mean, &invstd),
                        &mut s,
                        &mut s2,
                        &mut buf,
                        b,
                    );
                    let mut o = vec![0f32; px * c];
                    grad_rows(
                        (&row, mask, &z),
                        (&ks[0], &ks[1], &ks[2]),
                        &mut o,
                        &mut buf,
                        b,
                    );
                    out.push((bits(&s), bits(&s2)));
                    out.push((bits(&o), vec![]));
                }
                out
            };
            assert_eq!(run(true), run(false), "c {c}");
        }
        assert!(!blocked(24) && !blocked(3));
    }
}
