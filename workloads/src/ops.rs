//! The models' operations as composed candle ops, on any device: what the
//! graph engine ([`crate::Engine::Graph`]) trains with, and the reference the
//! CPU engine ([`crate::cpu`]) is tested against. Layouts match the CPU
//! engine's: images NHWC, convolution weights HWIO `[K*K*Cin, Cout]`,
//! attention projections `[B, T, 3, H, Dh]`.

use candle_core::{D, Result, Tensor};

use crate::rope::Rope;

/// A candle error with a message (these are candle ops: they fail as candle does).
fn err(msg: impl Into<String>) -> candle_core::Error {
    candle_core::Error::Msg(msg.into())
}

// ---------------------------------------------------------------- convolution

/// 2-D convolution, NHWC input `[N, H, W, Cin]`, HWIO weight `[K*K*Cin, Cout]`
/// (row index `(ky*K + kx)*Cin + ci`), no bias, through candle's NCHW
/// `conv2d`. Returns `[N, OH, OW, Cout]`.
pub fn conv2d_nhwc(x: &Tensor, w: &Tensor, k: usize, stride: usize, pad: usize) -> Result<Tensor> {
    let cin = x.dim(3)?;
    if w.dims().len() != 2 || w.dim(0)? != k * k * cin {
        return Err(err(format!(
            "conv2d_nhwc: weight {:?} does not match k={k} cin={cin}",
            w.shape()
        )));
    }
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

/// Training-mode BatchNorm over the rows of `x: [M, C]` (batch statistics),
/// optionally followed by a ReLU. Returns the output and the batch statistics
/// (for the running-average update).
pub fn batch_norm_train(
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
    let y = if relu { self::relu(&y)? } else { y };
    let st = BnStats {
        mean: mean.flatten_all()?.to_vec1()?,
        var: var.flatten_all()?.to_vec1()?,
        invstd: invstd.flatten_all()?.to_vec1()?,
        count: m,
    };
    Ok((y, st))
}

// ---------------------------------------------------------------- RMSNorm

/// RMSNorm over the last dimension: `x / sqrt(mean(x^2) + eps) * gain`.
pub fn rms_norm(x: &Tensor, gain: &Tensor, eps: f32) -> Result<Tensor> {
    let ms = x.sqr()?.mean_keepdim(D::Minus1)?;
    x.broadcast_div(&(ms + f64::from(eps))?.sqrt()?)?
        .broadcast_mul(gain)
}

// ---------------------------------------------------------------- SwiGLU

/// SwiGLU on a fused gate|up projection: `x = [.., 2h]` -> `silu(x[.., :h]) * x[.., h:]`.
pub fn swiglu(x: &Tensor) -> Result<Tensor> {
    let h = x.dim(D::Minus1)? / 2;
    let g = x.narrow(D::Minus1, 0, h)?;
    let u = x.narrow(D::Minus1, h, h)?;
    g.silu()?.mul(&u)
}

// ---------------------------------------------------------------- RoPE

impl Rope {
    /// RoPE on `x: [B, T, H, Dh]` as candle ops.
    pub fn apply(&self, x: &Tensor) -> Result<Tensor> {
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

/// Causal self-attention with RoPE on `qkv: [B, T, 3, H, Dh]`, returning `[B, T, H*Dh]`.
pub fn causal_attention(qkv: &Tensor, rope: &Rope) -> Result<Tensor> {
    let (b, t, _three, h, dh) = qkv.dims5()?;
    let q = rope.apply(&qkv.narrow(2, 0, 1)?.squeeze(2)?)?;
    let k = rope.apply(&qkv.narrow(2, 1, 1)?.squeeze(2)?)?;
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
    let t = Tensor::from_slice(targets, m, logits.device())?;
    candle_nn::loss::cross_entropy(logits, &t)
}

// ---------------------------------------------------------------- ReLU

/// `max(x, 0)` whose gradient is 0 where `x ≤ 0`, as in PyTorch and the
/// CPU engine (candle's own `relu` passes the gradient where `x = 0`, which
/// matters where a pre-activation is exactly 0, e.g. an identity block whose
/// last batch norm starts at γ = 0, β = 0).
pub fn relu(x: &Tensor) -> Result<Tensor> {
    let mask = x.gt(0f64)?.to_dtype(x.dtype())?;
    x.mul(&mask)
}

/// `relu(a + b)` (residual join).
pub fn add_relu(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    relu(&(a + b)?)
}
