//! Fused CPU ops with hand-written backward passes, plus composed-candle-op
//! fallbacks (used on non-CPU devices and as test references).
//!
//! Layout conventions: images are NHWC (`[N, H, W, C]`, contiguous), so a
//! convolution is `im2col` (rows = output pixels, columns = `(ky, kx, c)`)
//! followed by ONE matmul with an HWIO weight `[KH*KW*Cin, Cout]`, whose
//! result is already NHWC. BatchNorm works on the `[N*H*W, C]` view.

use std::sync::{Arc, Mutex};

use candle_core::{
    CpuStorage, CustomOp1, CustomOp2, CustomOp3, D, DType, Layout, Shape, Storage, Tensor,
};
use rayon::prelude::*;

use crate::{Result, err};

// ---------------------------------------------------------------- helpers

fn cpu_f32<'a>(s: &'a CpuStorage, l: &Layout) -> Result<&'a [f32]> {
    let data = s.as_slice::<f32>()?;
    match l.contiguous_offsets() {
        Some((a, b)) => Ok(&data[a..b]),
        None => Err(err("fused op: input must be contiguous")),
    }
}

/// Runs `f` on the contiguous f32 CPU data of `t`.
fn with_f32<R>(t: &Tensor, f: impl FnOnce(&[f32]) -> R) -> Result<R> {
    let t = if t.is_contiguous() {
        t.clone()
    } else {
        t.contiguous()?
    };
    let (st, l) = t.storage_and_layout();
    match &*st {
        Storage::Cpu(cs) => Ok(f(cpu_f32(cs, l)?)),
        _ => Err(err("fused op: CPU tensor expected")),
    }
}

fn from_vec(v: Vec<f32>, shape: impl Into<Shape>) -> Result<Tensor> {
    Tensor::from_vec(v, shape.into(), &candle_core::Device::Cpu)
}

/// Whether the fused CPU kernels apply to this tensor.
pub fn use_fused(t: &Tensor) -> bool {
    t.device().is_cpu() && t.dtype() == DType::F32
}

/// Row-major single-threaded SGEMM: `dst = (acc ? dst : 0) + scale * a @ b`, where
/// element (i, j) of a matrix `x` is at `x[i * x_rs + j * x_cs]`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn sgemm(
    m: usize,
    n: usize,
    k: usize,
    dst: &mut [f32],
    dst_rs: usize,
    acc: bool,
    a: &[f32],
    a_rs: usize,
    a_cs: usize,
    b: &[f32],
    b_rs: usize,
    b_cs: usize,
    scale: f32,
) {
    sgemm_with(
        gemm::Parallelism::None,
        m,
        n,
        k,
        dst,
        dst_rs,
        acc,
        a,
        a_rs,
        a_cs,
        b,
        b_rs,
        b_cs,
        scale,
    )
}

/// [`sgemm`] on the rayon pool (all its threads), for the large GEMMs of
/// convolutions.
#[allow(clippy::too_many_arguments)]
fn sgemm_par(
    m: usize,
    n: usize,
    k: usize,
    dst: &mut [f32],
    dst_rs: usize,
    a: &[f32],
    a_rs: usize,
    a_cs: usize,
    b: &[f32],
    b_rs: usize,
    b_cs: usize,
) {
    let threads = rayon::current_num_threads();
    let par = if threads > 1 {
        gemm::Parallelism::Rayon(threads)
    } else {
        gemm::Parallelism::None
    };
    sgemm_with(
        par, m, n, k, dst, dst_rs, false, a, a_rs, a_cs, b, b_rs, b_cs, 1.0,
    )
}

#[allow(clippy::too_many_arguments)]
fn sgemm_with(
    parallelism: gemm::Parallelism,
    m: usize,
    n: usize,
    k: usize,
    dst: &mut [f32],
    dst_rs: usize,
    acc: bool,
    a: &[f32],
    a_rs: usize,
    a_cs: usize,
    b: &[f32],
    b_rs: usize,
    b_cs: usize,
    scale: f32,
) {
    if m == 0 || n == 0 {
        return;
    }
    assert!(dst.len() >= (m - 1) * dst_rs + n);
    assert!(k == 0 || a.len() > (m - 1) * a_rs + (k - 1) * a_cs);
    assert!(k == 0 || b.len() > (k - 1) * b_rs + (n - 1) * b_cs);
    // SAFETY: the asserts above bound every index gemm touches.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            dst_rs as isize,
            acc,
            a.as_ptr(),
            a_cs as isize,
            a_rs as isize,
            b.as_ptr(),
            b_cs as isize,
            b_rs as isize,
            1.0,
            scale,
            false,
            false,
            false,
            parallelism,
        )
    }
}

// ---------------------------------------------------------------- im2col

/// Geometry of a 2-D convolution on NHWC input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConvGeom {
    pub n: usize,
    pub h: usize,
    pub w: usize,
    pub c: usize,
    pub k: usize,
    pub stride: usize,
    pub pad: usize,
}

impl ConvGeom {
    pub fn oh(&self) -> usize {
        (self.h + 2 * self.pad - self.k) / self.stride + 1
    }
    pub fn ow(&self) -> usize {
        (self.w + 2 * self.pad - self.k) / self.stride + 1
    }
    /// Columns of the im2col matrix: k*k*c.
    pub fn kcols(&self) -> usize {
        self.k * self.k * self.c
    }

    /// For each output pixel and kernel tap, the input pixel (or None for padding).
    #[inline]
    fn src(&self, oy: usize, ox: usize, ky: usize, kx: usize) -> Option<usize> {
        let iy = (oy * self.stride + ky) as isize - self.pad as isize;
        let ix = (ox * self.stride + kx) as isize - self.pad as isize;
        if iy < 0 || ix < 0 || iy >= self.h as isize || ix >= self.w as isize {
            None
        } else {
            Some(iy as usize * self.w + ix as usize)
        }
    }
}

/// im2col into `out` (`N·OH·OW × K·K·C`, every element written: padding
/// taps get zeros, so `out` may hold stale data from an earlier use).
fn im2col_into(g: &ConvGeom, inp: &[f32], out: &mut [f32]) {
    let (oh, ow, kc, c) = (g.oh(), g.ow(), g.kcols(), g.c);
    out.par_chunks_mut(oh * ow * kc)
        .enumerate()
        .for_each(|(b, o)| {
            let img = &inp[b * g.h * g.w * c..(b + 1) * g.h * g.w * c];
            for oy in 0..oh {
                for ox in 0..ow {
                    let row = &mut o[(oy * ow + ox) * kc..(oy * ow + ox + 1) * kc];
                    for ky in 0..g.k {
                        for kx in 0..g.k {
                            let d = (ky * g.k + kx) * c;
                            match g.src(oy, ox, ky, kx) {
                                Some(p) => row[d..d + c].copy_from_slice(&img[p * c..(p + 1) * c]),
                                None => row[d..d + c].fill(0.0),
                            }
                        }
                    }
                }
            }
        });
}

thread_local! {
    /// Reusable buffers for the convolution's im2col matrices: at 9× the
    /// input they are larger than what the allocator keeps around, and a
    /// fresh mapping per call costs page faults and kernel page clearing.
    static SCRATCH: [std::cell::RefCell<Vec<f32>>; 2] = Default::default();
}

/// Scratch buffers are kept up to this many floats (128 MiB); larger
/// matrices (evaluation batches) are allocated for the call and freed.
const SCRATCH_MAX: usize = 1 << 25;

/// Runs `f` on scratch buffer `slot` of length `len` (stale contents), or on
/// a fresh buffer when that slot is in use or `len` is over [`SCRATCH_MAX`].
fn with_scratch<R>(slot: usize, len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    if len > SCRATCH_MAX {
        return f(&mut vec![0f32; len]);
    }
    SCRATCH.with(|s| match s[slot].try_borrow_mut() {
        Ok(mut buf) => {
            if buf.len() < len {
                buf.resize(len, 0.0);
            }
            f(&mut buf[..len])
        }
        Err(_) => f(&mut vec![0f32; len]),
    })
}

fn col2im_f32(g: &ConvGeom, cols: &[f32]) -> Vec<f32> {
    let (oh, ow, kc, c) = (g.oh(), g.ow(), g.kcols(), g.c);
    let mut out = vec![0f32; g.n * g.h * g.w * c];
    out.par_chunks_mut(g.h * g.w * c)
        .enumerate()
        .for_each(|(b, img)| {
            let o = &cols[b * oh * ow * kc..(b + 1) * oh * ow * kc];
            for oy in 0..oh {
                for ox in 0..ow {
                    let row = &o[(oy * ow + ox) * kc..(oy * ow + ox + 1) * kc];
                    for ky in 0..g.k {
                        for kx in 0..g.k {
                            if let Some(p) = g.src(oy, ox, ky, kx) {
                                let d = (ky * g.k + kx) * c;
                                for (a, b) in img[p * c..(p + 1) * c].iter_mut().zip(&row[d..d + c])
                                {
                                    *a += *b;
                                }
                            }
                        }
                    }
                }
            }
        });
    out
}

/// The convolution as one graph node: `im2col(x) · w` forward; backward
/// recomputes the im2col matrix for `dw = colsᵀ · dy` and scatters
/// `dcols = dy · wᵀ` back with col2im. The im2col matrices (9× the input
/// for a 3×3 kernel) live in reusable scratch buffers and never enter the
/// autograd graph, so their gradients are never zero-filled and accumulated
/// by candle's backward pass.
struct Conv2dOp(ConvGeom);

impl Conv2dOp {
    /// 1×1, stride 1, no padding: the input is its own im2col matrix.
    fn pointwise(&self) -> bool {
        self.0.k == 1 && self.0.stride == 1 && self.0.pad == 0
    }
    fn rows(&self) -> usize {
        self.0.n * self.0.oh() * self.0.ow()
    }
    /// Runs `f` on the im2col matrix of `x`.
    fn with_cols<R>(&self, x: &[f32], f: impl FnOnce(&[f32]) -> R) -> R {
        if self.pointwise() {
            return f(x);
        }
        with_scratch(0, self.rows() * self.0.kcols(), |cols| {
            im2col_into(&self.0, x, cols);
            f(cols)
        })
    }
}

impl CustomOp2 for Conv2dOp {
    fn name(&self) -> &'static str {
        "conv2d-nhwc"
    }
    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let g = &self.0;
        let (x, w) = (cpu_f32(s1, l1)?, cpu_f32(s2, l2)?);
        let (kc, cout) = l2.shape().dims2()?;
        let rows = self.rows();
        let mut y = vec![0f32; rows * cout];
        self.with_cols(x, |cols| {
            sgemm_par(rows, cout, kc, &mut y, cout, cols, kc, 1, w, cout, 1)
        });
        Ok((CpuStorage::F32(y), Shape::from((g.n, g.oh(), g.ow(), cout))))
    }
    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let g = self.0;
        let (kc, cout) = w.dims2()?;
        let rows = self.rows();
        let dw = with_f32(x, |x| {
            with_f32(grad, |dy| {
                let mut dw = vec![0f32; kc * cout];
                self.with_cols(x, |cols| {
                    sgemm_par(kc, cout, rows, &mut dw, cout, cols, 1, kc, dy, cout, 1)
                });
                dw
            })
        })??;
        let dx = with_f32(w, |w| {
            with_f32(grad, |dy| {
                let mm =
                    |dc: &mut [f32]| sgemm_par(rows, kc, cout, dc, kc, dy, cout, 1, w, 1, cout);
                if self.pointwise() {
                    let mut dc = vec![0f32; rows * kc];
                    mm(&mut dc);
                    dc
                } else {
                    with_scratch(1, rows * kc, |dc| {
                        mm(dc);
                        col2im_f32(&g, dc)
                    })
                }
            })
        })??;
        Ok((
            Some(from_vec(dx, (g.n, g.h, g.w, g.c))?),
            Some(from_vec(dw, (kc, cout))?),
        ))
    }
}

/// 2-D convolution, NHWC input `[N, H, W, Cin]`, HWIO weight `[K*K*Cin, Cout]`
/// (row index `(ky*K + kx)*Cin + ci`), no bias. Returns `[N, OH, OW, Cout]`.
pub fn conv2d_nhwc(x: &Tensor, w: &Tensor, k: usize, stride: usize, pad: usize) -> Result<Tensor> {
    let (n, h, wd, c) = x.dims4()?;
    let g = ConvGeom {
        n,
        h,
        w: wd,
        c,
        k,
        stride,
        pad,
    };
    if w.dims().len() != 2 || w.dim(0)? != g.kcols() {
        return Err(err(format!(
            "conv2d_nhwc: weight {:?} does not match k={k} cin={c}",
            w.shape()
        )));
    }
    if !use_fused(x) {
        return conv2d_nhwc_reference(x, w, k, stride, pad);
    }
    x.contiguous()?.apply_op2(&w.contiguous()?, Conv2dOp(g))
}

/// The same convolution through candle's NCHW `conv2d` (reference / non-CPU path).
pub fn conv2d_nhwc_reference(
    x: &Tensor,
    w: &Tensor,
    k: usize,
    stride: usize,
    pad: usize,
) -> Result<Tensor> {
    let cin = x.dim(3)?;
    let cout = w.dim(1)?;
    // [K*K*Cin, Cout] -> [K, K, Cin, Cout] -> [Cout, Cin, K, K]
    let w_oihw = w
        .reshape((k, k, cin, cout))?
        .permute((3, 2, 0, 1))?
        .contiguous()?;
    let x_nchw = x.permute((0, 3, 1, 2))?.contiguous()?;
    let y = x_nchw.conv2d(&w_oihw, pad, stride, 1, 1)?;
    y.permute((0, 2, 3, 1))?.contiguous()
}

// ---------------------------------------------------------------- batch norm

/// Batch statistics of the last training-mode BatchNorm forward.
#[derive(Debug, Default, Clone)]
pub struct BnStats {
    pub mean: Vec<f32>,
    /// Biased variance (divided by M).
    pub var: Vec<f32>,
    pub invstd: Vec<f32>,
    /// Rows reduced over (N*H*W).
    pub count: usize,
}

/// Row `r` of a row-major matrix with `c` columns.
fn chunk_row(v: &[f32], c: usize, r: usize) -> &[f32] {
    &v[r * c..(r + 1) * c]
}

struct BatchNormTrain {
    eps: f32,
    relu: bool,
    stats: Arc<Mutex<BnStats>>,
}

/// Per-channel sums of `f(row)` over the rows of an `[M, C]` matrix, in parallel.
fn col_sums(m: usize, c: usize, f: impl Fn(usize, &mut [f64]) + Sync) -> Vec<f64> {
    let chunk = m.div_ceil(rayon::current_num_threads() * 4).max(64);
    let starts: Vec<usize> = (0..m).step_by(chunk).collect();
    starts
        .par_iter()
        .map(|&s| {
            let mut acc = vec![0f64; c];
            for r in s..(s + chunk).min(m) {
                f(r, &mut acc);
            }
            acc
        })
        .reduce(
            || vec![0f64; c],
            |mut a, b| {
                a.iter_mut().zip(&b).for_each(|(x, y)| *x += y);
                a
            },
        )
}

impl CustomOp3 for BatchNormTrain {
    fn name(&self) -> &'static str {
        "batch-norm-train"
    }
    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (m, c) = l1.shape().dims2()?;
        let (x, gamma, beta) = (cpu_f32(s1, l1)?, cpu_f32(s2, l2)?, cpu_f32(s3, l3)?);
        // One pass: per-channel sum and sum of squares, accumulated in f64
        // (so E[x²] − mean² does not lose the variance to cancellation).
        let sums = col_sums(m, 2 * c, |r, acc| {
            let (s, s2) = acc.split_at_mut(c);
            for ((a, a2), v) in s.iter_mut().zip(s2.iter_mut()).zip(&x[r * c..(r + 1) * c]) {
                let v = f64::from(*v);
                *a += v;
                *a2 += v * v;
            }
        });
        let mf = m as f64;
        let mean: Vec<f32> = sums[..c].iter().map(|s| (s / mf) as f32).collect();
        let var: Vec<f32> = (0..c)
            .map(|j| {
                let mu = sums[j] / mf;
                (sums[c + j] / mf - mu * mu).max(0.0) as f32
            })
            .collect();
        let invstd: Vec<f32> = var.iter().map(|v| 1.0 / (v + self.eps).sqrt()).collect();
        let scale: Vec<f32> = invstd.iter().zip(gamma).map(|(i, g)| i * g).collect();
        let shift: Vec<f32> = (0..c).map(|j| beta[j] - mean[j] * scale[j]).collect();
        let mut y = vec![0f32; m * c];
        let relu = self.relu;
        y.par_chunks_mut(c * 256).enumerate().for_each(|(bi, yb)| {
            let xb = &x[bi * c * 256..bi * c * 256 + yb.len()];
            for (yr, xr) in yb.chunks_mut(c).zip(xb.chunks(c)) {
                for j in 0..c {
                    let v = xr[j] * scale[j] + shift[j];
                    yr[j] = if relu { v.max(0.0) } else { v };
                }
            }
        });
        *self.stats.lock().map_err(|_| err("bn stats poisoned"))? = BnStats {
            mean,
            var,
            invstd,
            count: m,
        };
        Ok((CpuStorage::F32(y), l1.shape().clone()))
    }

    fn bwd(
        &self,
        x: &Tensor,
        gamma: &Tensor,
        _beta: &Tensor,
        res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let (m, c) = x.dims2()?;
        let st = self
            .stats
            .lock()
            .map_err(|_| err("bn stats poisoned"))?
            .clone();
        let relu = self.relu;
        let gamma = gamma.to_vec1::<f32>()?;
        let (dx, dg, db) = with_f32(x, |x| {
            with_f32(res, |y| {
                with_f32(grad, |dy| {
                    // dy through the fused ReLU's mask.
                    let masked = |yv: f32, d: f32| if relu && yv <= 0.0 { 0.0 } else { d };
                    let row = |v, r| chunk_row(v, c, r);
                    let (mean, invstd) = (&st.mean[..c], &st.invstd[..c]);
                    // One pass: Σ dy and Σ dy·x̂ per channel.
                    let sums = col_sums(m, 2 * c, |r, acc| {
                        let (s, s2) = acc.split_at_mut(c);
                        let it = s.iter_mut().zip(s2.iter_mut());
                        let it = it.zip(row(x, r).iter().zip(row(y, r)).zip(row(dy, r)));
                        for (((a, a2), ((xv, yv), d)), (mu, is)) in it.zip(mean.iter().zip(invstd))
                        {
                            let d = masked(*yv, *d);
                            *a += f64::from(d);
                            *a2 += f64::from(d * (xv - mu) * is);
                        }
                    });
                    let (sdy, sdyx) = sums.split_at(c);
                    let mf = m as f32;
                    // dx = γ·invstd · (dy − mean(dy) − x̂·mean(dy·x̂)), folded into
                    // dx = k1·dy + k2·x + k3 per channel.
                    let mut k1 = vec![0f32; c];
                    let mut k2 = vec![0f32; c];
                    let mut k3 = vec![0f32; c];
                    for j in 0..c {
                        let g = gamma[j] * invstd[j];
                        let (mdy, mdyx) = ((sdy[j] as f32) / mf, (sdyx[j] as f32) / mf);
                        k1[j] = g;
                        k2[j] = -g * mdyx * invstd[j];
                        k3[j] = -g * mdy + g * mdyx * invstd[j] * mean[j];
                    }
                    let mut dx = vec![0f32; m * c];
                    dx.par_chunks_mut(c * 256).enumerate().for_each(|(bi, db)| {
                        let r0 = bi * 256;
                        for (rr, dr) in db.chunks_mut(c).enumerate() {
                            let r = r0 + rr;
                            let it = dr
                                .iter_mut()
                                .zip(row(x, r).iter().zip(row(y, r)).zip(row(dy, r)));
                            for ((o, ((xv, yv), d)), ((a, b), k)) in
                                it.zip(k1.iter().zip(&k2).zip(&k3))
                            {
                                *o = a * masked(*yv, *d) + b * xv + k;
                            }
                        }
                    });
                    let dg: Vec<f32> = sdyx.iter().map(|v| *v as f32).collect();
                    let db: Vec<f32> = sdy.iter().map(|v| *v as f32).collect();
                    (dx, dg, db)
                })
            })
        })???;
        Ok((
            Some(from_vec(dx, (m, c))?),
            Some(from_vec(dg, c)?),
            Some(from_vec(db, c)?),
        ))
    }
}

/// Training-mode BatchNorm over the rows of `x: [M, C]` (batch statistics),
/// optionally fused with a ReLU. Returns the output and the batch statistics
/// (for the running-average update).
pub fn batch_norm_train(
    x: &Tensor,
    gamma: &Tensor,
    beta: &Tensor,
    eps: f32,
    relu: bool,
) -> Result<(Tensor, BnStats)> {
    if !use_fused(x) {
        return batch_norm_train_reference(x, gamma, beta, eps, relu);
    }
    let stats = Arc::new(Mutex::new(BnStats::default()));
    let x = x.contiguous()?;
    let y = x.apply_op3(
        gamma,
        beta,
        BatchNormTrain {
            eps,
            relu,
            stats: stats.clone(),
        },
    )?;
    let st = stats.lock().map_err(|_| err("bn stats poisoned"))?.clone();
    Ok((y, st))
}

/// Composed-op BatchNorm (reference / non-CPU path).
pub fn batch_norm_train_reference(
    x: &Tensor,
    gamma: &Tensor,
    beta: &Tensor,
    eps: f32,
    relu: bool,
) -> Result<(Tensor, BnStats)> {
    let m = x.dim(0)?;
    let mean = x.mean_keepdim(0)?;
    let xc = x.broadcast_sub(&mean)?;
    let var = xc.sqr()?.mean_keepdim(0)?;
    let invstd = (var.clone() + f64::from(eps))?.sqrt()?.recip()?;
    let y = xc
        .broadcast_mul(&invstd.broadcast_mul(&gamma.unsqueeze(0)?)?)?
        .broadcast_add(&beta.unsqueeze(0)?)?;
    let y = if relu { y.relu()? } else { y };
    let st = BnStats {
        mean: mean.flatten_all()?.to_vec1()?,
        var: var.flatten_all()?.to_vec1()?,
        invstd: invstd.flatten_all()?.to_vec1()?,
        count: m,
    };
    Ok((y, st))
}

// ---------------------------------------------------------------- RMSNorm

struct RmsNorm {
    eps: f32,
}

fn rms_inv(row: &[f32], eps: f32) -> f32 {
    let ss: f32 = row.iter().map(|v| v * v).sum();
    1.0 / (ss / row.len() as f32 + eps).sqrt()
}

impl CustomOp2 for RmsNorm {
    fn name(&self) -> &'static str {
        "rms-norm-fused"
    }
    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let d = l1.shape().dims().last().copied().unwrap_or(1);
        let (x, g) = (cpu_f32(s1, l1)?, cpu_f32(s2, l2)?);
        let mut y = vec![0f32; x.len()];
        y.par_chunks_mut(d * 64)
            .zip(x.par_chunks(d * 64))
            .for_each(|(yb, xb)| {
                for (yr, xr) in yb.chunks_mut(d).zip(xb.chunks(d)) {
                    let r = rms_inv(xr, self.eps);
                    for j in 0..d {
                        yr[j] = xr[j] * r * g[j];
                    }
                }
            });
        Ok((CpuStorage::F32(y), l1.shape().clone()))
    }
    fn bwd(
        &self,
        x: &Tensor,
        g: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let d = x.dim(D::Minus1)?;
        let shape = x.shape().clone();
        let eps = self.eps;
        let g = g.to_vec1::<f32>()?;
        let (dx, dg) = with_f32(x, |x| {
            with_f32(grad, |dy| {
                let mut dx = vec![0f32; x.len()];
                let dg = dx
                    .par_chunks_mut(d * 64)
                    .zip(x.par_chunks(d * 64))
                    .zip(dy.par_chunks(d * 64))
                    .map(|((dxb, xb), dyb)| {
                        let mut dg = vec![0f32; d];
                        for ((dxr, xr), dyr) in
                            dxb.chunks_mut(d).zip(xb.chunks(d)).zip(dyb.chunks(d))
                        {
                            let r = rms_inv(xr, eps);
                            let mut dot = 0f32;
                            for j in 0..d {
                                dot += g[j] * dyr[j] * xr[j];
                                dg[j] += dyr[j] * xr[j] * r;
                            }
                            let k = dot * r * r * r / d as f32;
                            for j in 0..d {
                                dxr[j] = r * g[j] * dyr[j] - xr[j] * k;
                            }
                        }
                        dg
                    })
                    .reduce(
                        || vec![0f32; d],
                        |mut a, b| {
                            a.iter_mut().zip(&b).for_each(|(x, y)| *x += y);
                            a
                        },
                    );
                (dx, dg)
            })
        })??;
        Ok((Some(from_vec(dx, shape)?), Some(from_vec(dg, d)?)))
    }
}

/// RMSNorm over the last dimension: `x / sqrt(mean(x^2) + eps) * gain`.
pub fn rms_norm(x: &Tensor, gain: &Tensor, eps: f32) -> Result<Tensor> {
    if !use_fused(x) {
        return rms_norm_reference(x, gain, eps);
    }
    x.contiguous()?.apply_op2(gain, RmsNorm { eps })
}

/// Composed-op RMSNorm (reference / non-CPU path).
pub fn rms_norm_reference(x: &Tensor, gain: &Tensor, eps: f32) -> Result<Tensor> {
    let ms = x.sqr()?.mean_keepdim(D::Minus1)?;
    x.broadcast_div(&(ms + f64::from(eps))?.sqrt()?)?
        .broadcast_mul(gain)
}

// ---------------------------------------------------------------- SwiGLU

struct SwiGlu;

fn sigmoid(v: f32) -> f32 {
    1.0 / (1.0 + (-v).exp())
}

impl CustomOp1 for SwiGlu {
    fn name(&self) -> &'static str {
        "swiglu"
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let dims = l.shape().dims();
        let two_h = *dims.last().unwrap_or(&0);
        let h = two_h / 2;
        let x = cpu_f32(s, l)?;
        let mut y = vec![0f32; x.len() / 2];
        y.par_chunks_mut(h * 64)
            .zip(x.par_chunks(two_h * 64))
            .for_each(|(yb, xb)| {
                for (yr, xr) in yb.chunks_mut(h).zip(xb.chunks(two_h)) {
                    let (gt, up) = xr.split_at(h);
                    for j in 0..h {
                        yr[j] = gt[j] * sigmoid(gt[j]) * up[j];
                    }
                }
            });
        let mut od = dims.to_vec();
        *od.last_mut().expect("rank >= 1") = h;
        Ok((CpuStorage::F32(y), Shape::from(od)))
    }
    fn bwd(&self, x: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        let two_h = x.dim(D::Minus1)?;
        let h = two_h / 2;
        let shape = x.shape().clone();
        let dx = with_f32(x, |x| {
            with_f32(grad, |dy| {
                let mut dx = vec![0f32; x.len()];
                dx.par_chunks_mut(two_h * 64)
                    .zip(x.par_chunks(two_h * 64))
                    .zip(dy.par_chunks(h * 64))
                    .for_each(|((dxb, xb), dyb)| {
                        for ((dxr, xr), dyr) in dxb
                            .chunks_mut(two_h)
                            .zip(xb.chunks(two_h))
                            .zip(dyb.chunks(h))
                        {
                            let (gt, up) = xr.split_at(h);
                            let (dgt, dup) = dxr.split_at_mut(h);
                            for j in 0..h {
                                let s = sigmoid(gt[j]);
                                let silu = gt[j] * s;
                                dup[j] = dyr[j] * silu;
                                dgt[j] = dyr[j] * up[j] * (s * (1.0 + gt[j] * (1.0 - s)));
                            }
                        }
                    });
                dx
            })
        })??;
        Ok(Some(from_vec(dx, shape)?))
    }
}

/// SwiGLU on a fused gate|up projection: `x = [.., 2h]` -> `silu(x[.., :h]) * x[.., h:]`.
pub fn swiglu(x: &Tensor) -> Result<Tensor> {
    if !use_fused(x) {
        return swiglu_reference(x);
    }
    x.contiguous()?.apply_op1(SwiGlu)
}

/// Composed-op SwiGLU (reference / non-CPU path).
pub fn swiglu_reference(x: &Tensor) -> Result<Tensor> {
    let h = x.dim(D::Minus1)? / 2;
    let g = x.narrow(D::Minus1, 0, h)?;
    let u = x.narrow(D::Minus1, h, h)?;
    g.silu()?.mul(&u)
}

// ---------------------------------------------------------------- RoPE tables

/// Rotary position embedding tables for head dim `dh` ("rotate-half" pairing
/// `(i, i + dh/2)`), angle `pos * base^(-2i/dh)`.
#[derive(Debug, Clone)]
pub struct Rope {
    pub dh: usize,
    pub max_t: usize,
    /// `[max_t, dh/2]`
    pub cos: Arc<Vec<f32>>,
    pub sin: Arc<Vec<f32>>,
}

impl Rope {
    pub fn new(dh: usize, max_t: usize, base: f64) -> Self {
        let half = dh / 2;
        let mut cos = Vec::with_capacity(max_t * half);
        let mut sin = Vec::with_capacity(max_t * half);
        for t in 0..max_t {
            for i in 0..half {
                let freq = base.powf(-2.0 * i as f64 / dh as f64);
                let a = t as f64 * freq;
                cos.push(a.cos() as f32);
                sin.push(a.sin() as f32);
            }
        }
        Self {
            dh,
            max_t,
            cos: Arc::new(cos),
            sin: Arc::new(sin),
        }
    }

    /// Rotates `src` (one head vector at position `t`) into `dst`; `inverse` applies the transpose.
    #[inline]
    pub fn rotate(&self, t: usize, src: &[f32], dst: &mut [f32], inverse: bool) {
        let h = self.dh / 2;
        let (c, s) = (&self.cos[t * h..(t + 1) * h], &self.sin[t * h..(t + 1) * h]);
        let (x1, x2) = src[..2 * h].split_at(h);
        let (y1, y2) = dst[..2 * h].split_at_mut(h);
        let sg = if inverse { -1.0 } else { 1.0 };
        for i in 0..h {
            let si = sg * s[i];
            y1[i] = x1[i] * c[i] - x2[i] * si;
            y2[i] = x2[i] * c[i] + x1[i] * si;
        }
    }

    /// [`Rope::rotate`] of `rows` head vectors at positions `0..rows`: row
    /// `p` of `src` starts at `p * src_stride`, of `dst` at `p * dst_stride`.
    pub fn rotate_rows(
        &self,
        rows: usize,
        src: &[f32],
        src_stride: usize,
        dst: &mut [f32],
        dst_stride: usize,
        inverse: bool,
    ) {
        for p in 0..rows {
            self.rotate(
                p,
                &src[p * src_stride..],
                &mut dst[p * dst_stride..],
                inverse,
            );
        }
    }

    /// Composed-op RoPE on `x: [B, T, H, Dh]` (reference / non-CPU path).
    pub fn apply_reference(&self, x: &Tensor) -> Result<Tensor> {
        let (_b, t, _h, dh) = x.dims4()?;
        let half = dh / 2;
        let dev = x.device();
        let cos = Tensor::from_slice(&self.cos[..t * half], (t, half), dev)?;
        let sin = Tensor::from_slice(&self.sin[..t * half], (t, half), dev)?;
        let cos = Tensor::cat(&[&cos, &cos], 1)?.reshape((1, t, 1, dh))?;
        let sin = Tensor::cat(&[&sin, &sin], 1)?.reshape((1, t, 1, dh))?;
        let x1 = x.narrow(3, 0, half)?;
        let x2 = x.narrow(3, half, half)?;
        let rot = Tensor::cat(&[&x2.neg()?, &x1], 3)?;
        x.broadcast_mul(&cos)? + rot.broadcast_mul(&sin)?
    }
}

// ---------------------------------------------------------------- causal attention

/// Fused causal multi-head self-attention with RoPE on a packed projection
/// `qkv: [B, T, 3, H, Dh]` -> `[B, T, H*Dh]`. The attention probabilities are
/// kept for the backward pass.
struct CausalAttention {
    rope: Rope,
    heads: usize,
    probs: Mutex<Vec<f32>>,
}

impl CausalAttention {
    /// Gathers rotated q, k and plain v of head `hd` of one sequence (`seq`: `[T, 3, H, Dh]`).
    fn gather(
        &self,
        seq: &[f32],
        t: usize,
        hd: usize,
        q: &mut [f32],
        k: &mut [f32],
        v: &mut [f32],
    ) {
        let (h, dh) = (self.heads, self.rope.dh);
        for p in 0..t {
            let base = p * 3 * h * dh + hd * dh;
            self.rope.rotate(
                p,
                &seq[base..base + dh],
                &mut q[p * dh..(p + 1) * dh],
                false,
            );
            let kb = base + h * dh;
            self.rope
                .rotate(p, &seq[kb..kb + dh], &mut k[p * dh..(p + 1) * dh], false);
            let vb = base + 2 * h * dh;
            v[p * dh..(p + 1) * dh].copy_from_slice(&seq[vb..vb + dh]);
        }
    }
}

impl CustomOp1 for CausalAttention {
    fn name(&self) -> &'static str {
        "causal-attention-rope"
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let dims = l.shape().dims();
        let (b, t, h, dh) = (dims[0], dims[1], dims[3], dims[4]);
        if dims[2] != 3 || h != self.heads || dh != self.rope.dh || t > self.rope.max_t {
            return Err(err(format!("causal attention: bad qkv shape {dims:?}")));
        }
        let x = cpu_f32(s, l)?;
        let scale = 1.0 / (dh as f32).sqrt();
        let mut out = vec![0f32; b * t * h * dh];
        let mut probs = vec![0f32; b * h * t * t];
        out.par_chunks_mut(t * h * dh)
            .zip(probs.par_chunks_mut(h * t * t))
            .zip(x.par_chunks(t * 3 * h * dh))
            .for_each(|((o, pr), seq)| {
                let (mut q, mut k, mut v) =
                    (vec![0f32; t * dh], vec![0f32; t * dh], vec![0f32; t * dh]);
                let mut ob = vec![0f32; t * dh];
                for hd in 0..h {
                    self.gather(seq, t, hd, &mut q, &mut k, &mut v);
                    let p = &mut pr[hd * t * t..(hd + 1) * t * t];
                    // S = scale * q k^T
                    sgemm(t, t, dh, p, t, false, &q, dh, 1, &k, 1, dh, scale);
                    for i in 0..t {
                        let row = &mut p[i * t..(i + 1) * t];
                        let mx = row[..=i].iter().fold(f32::NEG_INFINITY, |a, &v| a.max(v));
                        let mut sum = 0f32;
                        for e in row[..=i].iter_mut() {
                            *e = (*e - mx).exp();
                            sum += *e;
                        }
                        let inv = 1.0 / sum;
                        row[..=i].iter_mut().for_each(|e| *e *= inv);
                        row[i + 1..].iter_mut().for_each(|e| *e = 0.0);
                    }
                    sgemm(t, dh, t, &mut ob, dh, false, p, t, 1, &v, dh, 1, 1.0);
                    for i in 0..t {
                        o[i * h * dh + hd * dh..i * h * dh + (hd + 1) * dh]
                            .copy_from_slice(&ob[i * dh..(i + 1) * dh]);
                    }
                }
            });
        *self
            .probs
            .lock()
            .map_err(|_| err("attention cache poisoned"))? = probs;
        Ok((CpuStorage::F32(out), Shape::from((b, t, h * dh))))
    }

    fn bwd(&self, qkv: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        let (_b, t, _three, h, dh) = qkv.dims5()?;
        let scale = 1.0 / (dh as f32).sqrt();
        let probs = self
            .probs
            .lock()
            .map_err(|_| err("attention cache poisoned"))?;
        let dqkv = with_f32(qkv, |x| {
            with_f32(grad, |dy| {
                let mut dx = vec![0f32; x.len()];
                dx.par_chunks_mut(t * 3 * h * dh)
                    .zip(x.par_chunks(t * 3 * h * dh))
                    .zip(dy.par_chunks(t * h * dh))
                    .zip(probs.par_chunks(h * t * t))
                    .for_each(|(((dseq, seq), dys), pr)| {
                        let n = t * dh;
                        let (mut q, mut k, mut v) = (vec![0f32; n], vec![0f32; n], vec![0f32; n]);
                        let (mut d_o, mut dq, mut dk, mut dv) =
                            (vec![0f32; n], vec![0f32; n], vec![0f32; n], vec![0f32; n]);
                        let mut ds = vec![0f32; t * t];
                        for hd in 0..h {
                            self.gather(seq, t, hd, &mut q, &mut k, &mut v);
                            let p = &pr[hd * t * t..(hd + 1) * t * t];
                            for i in 0..t {
                                d_o[i * dh..(i + 1) * dh].copy_from_slice(
                                    &dys[i * h * dh + hd * dh..i * h * dh + (hd + 1) * dh],
                                );
                            }
                            // dV = P^T dO
                            sgemm(t, dh, t, &mut dv, dh, false, p, 1, t, &d_o, dh, 1, 1.0);
                            // dP = dO V^T
                            sgemm(t, t, dh, &mut ds, t, false, &d_o, dh, 1, &v, 1, dh, 1.0);
                            for i in 0..t {
                                let pr_ = &p[i * t..(i + 1) * t];
                                let dr = &mut ds[i * t..(i + 1) * t];
                                let dot: f32 =
                                    pr_[..=i].iter().zip(&dr[..=i]).map(|(a, b)| a * b).sum();
                                for j in 0..=i {
                                    dr[j] = pr_[j] * (dr[j] - dot) * scale;
                                }
                                dr[i + 1..].iter_mut().for_each(|e| *e = 0.0);
                            }
                            // dQ = dS K ; dK = dS^T Q   (rotated frame)
                            sgemm(t, dh, t, &mut dq, dh, false, &ds, t, 1, &k, dh, 1, 1.0);
                            sgemm(t, dh, t, &mut dk, dh, false, &ds, 1, t, &q, dh, 1, 1.0);
                            for p_ in 0..t {
                                let base = p_ * 3 * h * dh + hd * dh;
                                self.rope.rotate(
                                    p_,
                                    &dq[p_ * dh..(p_ + 1) * dh],
                                    &mut dseq[base..base + dh],
                                    true,
                                );
                                let kb = base + h * dh;
                                self.rope.rotate(
                                    p_,
                                    &dk[p_ * dh..(p_ + 1) * dh],
                                    &mut dseq[kb..kb + dh],
                                    true,
                                );
                                let vb = base + 2 * h * dh;
                                dseq[vb..vb + dh].copy_from_slice(&dv[p_ * dh..(p_ + 1) * dh]);
                            }
                        }
                    });
                dx
            })
        })??;
        Ok(Some(from_vec(dqkv, qkv.shape().clone())?))
    }
}

/// Causal self-attention with RoPE on `qkv: [B, T, 3, H, Dh]`, returning `[B, T, H*Dh]`.
pub fn causal_attention(qkv: &Tensor, rope: &Rope) -> Result<Tensor> {
    let (_b, _t, _three, h, _dh) = qkv.dims5()?;
    if !use_fused(qkv) {
        return causal_attention_reference(qkv, rope);
    }
    qkv.contiguous()?.apply_op1(CausalAttention {
        rope: rope.clone(),
        heads: h,
        probs: Mutex::new(Vec::new()),
    })
}

/// Composed-op causal attention (reference / non-CPU path).
pub fn causal_attention_reference(qkv: &Tensor, rope: &Rope) -> Result<Tensor> {
    let (b, t, _three, h, dh) = qkv.dims5()?;
    let q = rope.apply_reference(&qkv.narrow(2, 0, 1)?.squeeze(2)?)?;
    let k = rope.apply_reference(&qkv.narrow(2, 1, 1)?.squeeze(2)?)?;
    let v = qkv.narrow(2, 2, 1)?.squeeze(2)?;
    // [B, H, T, Dh]
    let q = q.transpose(1, 2)?.contiguous()?;
    let k = k.transpose(1, 2)?.contiguous()?;
    let v = v.transpose(1, 2)?.contiguous()?;
    let s = (q.matmul(&k.t()?)? * (1.0 / (dh as f64).sqrt()))?;
    let mask: Vec<f32> = (0..t * t)
        .map(|i| {
            if i % t > i / t {
                f32::NEG_INFINITY
            } else {
                0.0
            }
        })
        .collect();
    let mask = Tensor::from_vec(mask, (1, 1, t, t), qkv.device())?;
    let s = s.broadcast_add(&mask)?;
    let mx = s.max_keepdim(D::Minus1)?.detach();
    let e = s.broadcast_sub(&mx)?.exp()?;
    let p = e.broadcast_div(&e.sum_keepdim(D::Minus1)?)?;
    let o = p.matmul(&v)?; // [B, H, T, Dh]
    o.transpose(1, 2)?.reshape((b, t, h * dh))
}

// ---------------------------------------------------------------- cross-entropy

struct CrossEntropy {
    targets: Arc<Vec<u32>>,
}

fn row_lse(row: &[f32]) -> f32 {
    let mx = row.iter().fold(f32::NEG_INFINITY, |a, &v| a.max(v));
    let s: f32 = row.iter().map(|v| (v - mx).exp()).sum();
    mx + s.ln()
}

impl CustomOp1 for CrossEntropy {
    fn name(&self) -> &'static str {
        "cross-entropy"
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let (m, v) = l.shape().dims2()?;
        let x = cpu_f32(s, l)?;
        check_targets(&self.targets, m, v)?;
        let tot: f64 = x
            .par_chunks(v)
            .zip(self.targets.par_iter())
            .map(|(row, &tg)| f64::from(row_lse(row) - row[tg as usize]))
            .sum();
        Ok((
            CpuStorage::F32(vec![(tot / m as f64) as f32]),
            Shape::from(()),
        ))
    }
    fn bwd(&self, x: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        let (m, v) = x.dims2()?;
        let g = grad.to_scalar::<f32>()? / m as f32;
        let dx = with_f32(x, |x| {
            let mut dx = vec![0f32; m * v];
            dx.par_chunks_mut(v)
                .zip(x.par_chunks(v))
                .zip(self.targets.par_iter())
                .for_each(|((dr, row), &tg)| {
                    let lse = row_lse(row);
                    for (d, xv) in dr.iter_mut().zip(row) {
                        *d = (xv - lse).exp() * g;
                    }
                    dr[tg as usize] -= g;
                });
            dx
        })?;
        Ok(Some(from_vec(dx, (m, v))?))
    }
}

fn check_targets(t: &[u32], m: usize, v: usize) -> Result<()> {
    if t.len() != m {
        return Err(err(format!(
            "cross-entropy: {} targets for {m} rows",
            t.len()
        )));
    }
    if let Some(bad) = t.iter().find(|&&x| x as usize >= v) {
        return Err(err(format!(
            "cross-entropy: target {bad} out of range 0..{v}"
        )));
    }
    Ok(())
}

/// Mean cross-entropy (nats) of `logits: [M, V]` against `targets` (length M).
pub fn cross_entropy(logits: &Tensor, targets: &[u32]) -> Result<Tensor> {
    let (m, v) = logits.dims2()?;
    check_targets(targets, m, v)?;
    if !use_fused(logits) {
        let t = Tensor::from_slice(targets, m, logits.device())?;
        return candle_nn::loss::cross_entropy(logits, &t);
    }
    logits.contiguous()?.apply_op1(CrossEntropy {
        targets: Arc::new(targets.to_vec()),
    })
}

// ---------------------------------------------------------------- residual add + ReLU

struct AddRelu;

impl CustomOp2 for AddRelu {
    fn name(&self) -> &'static str {
        "add-relu"
    }
    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        if l1.shape() != l2.shape() {
            return Err(err("add_relu: shape mismatch"));
        }
        let (a, b) = (cpu_f32(s1, l1)?, cpu_f32(s2, l2)?);
        let mut y = vec![0f32; a.len()];
        y.par_chunks_mut(1 << 14)
            .zip(a.par_chunks(1 << 14))
            .zip(b.par_chunks(1 << 14))
            .for_each(|((y, a), b)| {
                for ((y, a), b) in y.iter_mut().zip(a).zip(b) {
                    *y = (a + b).max(0.0);
                }
            });
        Ok((CpuStorage::F32(y), l1.shape().clone()))
    }
    fn bwd(
        &self,
        a: &Tensor,
        _b: &Tensor,
        res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let g = with_f32(res, |y| {
            with_f32(grad, |dy| {
                let mut g = vec![0f32; y.len()];
                g.par_chunks_mut(1 << 14)
                    .zip(y.par_chunks(1 << 14))
                    .zip(dy.par_chunks(1 << 14))
                    .for_each(|((g, y), dy)| {
                        for ((g, y), dy) in g.iter_mut().zip(y).zip(dy) {
                            *g = if *y > 0.0 { *dy } else { 0.0 };
                        }
                    });
                g
            })
        })??;
        let g = from_vec(g, a.shape().clone())?;
        Ok((Some(g.clone()), Some(g)))
    }
}

/// `relu(a + b)` (residual join), fused on CPU.
pub fn add_relu(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    if !use_fused(a) {
        return (a + b)?.relu();
    }
    a.contiguous()?.apply_op2(&b.contiguous()?, AddRelu)
}
