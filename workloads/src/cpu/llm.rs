//! `mini_llm` on the CPU engine: the decoder of [`crate::llm::MiniLlm`]
//! (built from it, so it is declared once) with activations in buffers kept
//! from step to step and the backward pass written out layer by layer.
//!
//! ```text
//! x = E[tokens]
//! per layer:  h = rms(x)·g1   qkv = h·Wqkv   a = attn(qkv)   x' = x + a·Wo
//!             h2 = rms(x')·g2  gu = h2·Wgu   m = silu(g)·u   x'' = x' + m·Wdown
//! logits = (rms(x)·gf)·Eᵀ      loss = mean cross-entropy
//! ```
//!
//! In bf16 mode the operands and results of every linear layer (the head
//! included) are rounded to bfloat16, forward and backward, as candle's
//! bf16 matmuls do; everything else stays f32.

use rayon::prelude::*;

use super::dense::{Layout, transpose_into, transpose_into_par};
use super::kernels::{AMat, BMat, Isa, Offsets, grow, igemm};
use super::math;
use super::passes::{self, Pass};
use super::planner;
use crate::rope::Rope;
use crate::{Result, err};

/// Offsets of one decoder layer's parameters in the flat vector.
#[derive(Debug, Clone, Default)]
pub struct LayerSpec {
    pub attn_norm: usize,
    pub w_qkv: usize,
    pub w_o: usize,
    pub mlp_norm: usize,
    pub w_gate_up: usize,
    pub w_down: usize,
}

/// What the engine needs to know of the model.
#[derive(Debug, Clone)]
pub struct LlmSpec {
    pub vocab: usize,
    pub seq_len: usize,
    pub d: usize,
    pub heads: usize,
    pub ffn: usize,
    pub norm_eps: f32,
    pub rope: Rope,
    pub bf16: bool,
    /// Offset of the embedding `[vocab, d]` (also the head, tied).
    pub embed: usize,
    pub layers: Vec<LayerSpec>,
    pub final_norm: usize,
}

/// What one layer keeps for its backward pass, which consumes it: `m`,
/// `gu`, `h2`, `att`, `qkv` and `h` are overwritten by their gradients as
/// each is done with ([`mlp_backward`], [`attention_backward`]), so after
/// [`Llm::gradients`] only the next forward pass may read these buffers.
#[derive(Debug, Default)]
struct Saved {
    /// Layer input.
    x: Vec<f32>,
    /// 1/rms of `x` per row, and the normalised `h`.
    r1: Vec<f32>,
    h: Vec<f32>,
    qkv: Vec<f32>,
    /// Every head's rotated q and k (`[B, H, 2, T, Dh]`): the attention's
    /// backward reads them rather than rotating `qkv` again.
    qk: Vec<f32>,
    /// Attention probabilities `[B, H, T, T]`.
    probs: Vec<f32>,
    att: Vec<f32>,
    /// Residual stream after attention, its 1/rms and normalised `h2`.
    xm: Vec<f32>,
    r2: Vec<f32>,
    h2: Vec<f32>,
    gu: Vec<f32>,
    m: Vec<f32>,
}

/// Scratch of the linear layers: rounding copies for bf16 products, the
/// transposed weight of a backward pass and a bf16 weight gradient's sums.
#[derive(Debug, Default)]
struct LinearScratch {
    a: Vec<f32>,
    b: Vec<f32>,
    c: Vec<f32>,
    wt: Vec<f32>,
    dw: Vec<f32>,
}

fn rounded<'v>(dst: &'v mut Vec<f32>, src: &[f32]) -> &'v [f32] {
    dst.clear();
    dst.extend(src.iter().map(|&v| math::round_bf16(v)));
    dst
}

/// Stores `v` (rounded to bf16) into `out`, or adds it.
fn store_rounded(v: &[f32], out: &mut [f32], accumulate: bool) {
    if accumulate {
        out.iter_mut()
            .zip(v)
            .for_each(|(o, x)| *o += math::round_bf16(*x));
    } else {
        out.iter_mut()
            .zip(v)
            .for_each(|(o, x)| *o = math::round_bf16(*x));
    }
}

/// Rows per block of the head and the loss ([`Llm::head`]): at most 16 MiB
/// of logits at mini_llm's vocabulary of 2,048, whatever the batch (64 MiB
/// at b64 in one piece). mini_llm's b16 step (2,048 rows) is one block:
/// smaller blocks were measured slower (`bench_step --model llm --batch 16
/// --plan fixed`, alternating), each block packing the embedding again
/// and passing over its whole gradient.
const HEAD_ROWS: usize = 2048;

/// A linear layer's three products, f32 or bf16. `W` is `k × n`, stored as
/// `wl` says (the tied head is the `n × k` embedding, transposed).
struct Linear<'s> {
    isa: Isa,
    bf16: bool,
    s: &'s mut LinearScratch,
}

impl Linear<'_> {
    /// `out (+)= x · W` (x: rows × k).
    #[allow(clippy::too_many_arguments)]
    fn forward(
        &mut self,
        rows: usize,
        k: usize,
        n: usize,
        x: &[f32],
        w: &[f32],
        wl: Layout,
        out: &mut [f32],
        acc: bool,
    ) {
        if !self.bf16 {
            return planner::matmul(self.isa, rows, n, k, x, Layout::Normal, w, wl, out, acc);
        }
        let s = &mut *self.s;
        let (xb, wb) = (rounded(&mut s.a, x), rounded(&mut s.b, w));
        s.c.resize(rows * n, 0.0);
        planner::matmul(
            self.isa,
            rows,
            n,
            k,
            xb,
            Layout::Normal,
            wb,
            wl,
            &mut s.c,
            false,
        );
        store_rounded(&s.c, &mut out[..rows * n], acc);
    }

    /// Readies a backward pass over `W`: `Wᵀ` (`n × k`) as `dx = dy · Wᵀ`
    /// reads it, rounded to bf16 in bf16 mode, once for all row blocks (a
    /// transposed f32 `W` is `Wᵀ` as stored, read in place).
    fn begin_backward(&mut self, k: usize, n: usize, w: &[f32], wl: Layout) {
        let s = &mut *self.s;
        match wl {
            Layout::Normal => {
                s.wt.resize(k * n, 0.0);
                passes::timed(Pass::Transposes, || {
                    transpose_into(w, k, n, n, &mut s.wt, k)
                });
                if self.bf16 {
                    s.wt.iter_mut().for_each(|v| *v = math::round_bf16(*v));
                }
            }
            Layout::Transposed if self.bf16 => {
                rounded(&mut s.wt, &w[..k * n]);
            }
            Layout::Transposed => {}
        }
    }

    /// One block of rows of a backward pass begun by
    /// [`Linear::begin_backward`]: adds the block's share to `dW` (its first
    /// block overwrites), and writes (or adds) the block's rows of `dx`.
    /// Bitwise what the two whole products give: each value of `dW` is one
    /// chain of multiply-adds over the rows in order, which blocks in order
    /// continue; the rows of `dx` are independent. In bf16 mode `dW`'s sums
    /// are kept in f32 and rounded once, by [`Linear::end_backward`].
    #[allow(clippy::too_many_arguments)]
    fn backward_rows(
        &mut self,
        first: bool,
        r: usize,
        k: usize,
        n: usize,
        x: &[f32],
        dy: &[f32],
        w: &[f32],
        wl: Layout,
        dx: &mut [f32],
        dx_acc: bool,
        dw: &mut [f32],
    ) {
        self.weight_grad_rows(first, r, k, n, x, dy, wl, dw);
        self.input_grad_rows(r, k, n, dy, w, wl, dx, dx_acc);
    }

    /// Both gradients of a whole batch, `dW = xᵀ · dy` (overwritten, stored
    /// as `W` is) and `dx = dy · Wᵀ` (x: rows × k, dy: rows × n), with `dx`
    /// written over `x`, which is dead once `dW` is summed: its buffer takes
    /// `dx` while its lines are still in the caches, where a buffer of its
    /// own would first be read from memory (a store to a line that is not
    /// in the caches reads it). The same values as into a buffer of its own.
    #[allow(clippy::too_many_arguments)]
    fn backward_over_input(
        &mut self,
        rows: usize,
        k: usize,
        n: usize,
        x: &mut [f32],
        dy: &[f32],
        w: &[f32],
        wl: Layout,
        dw: &mut [f32],
    ) {
        self.begin_backward(k, n, w, wl);
        self.weight_grad_rows(true, rows, k, n, x, dy, wl, dw);
        self.input_grad_rows(rows, k, n, dy, w, wl, x, false);
        self.end_backward(k, n, dw);
    }

    /// The `dW` half of [`Linear::backward_rows`]; in bf16 mode it leaves
    /// `dy` rounded in the scratch for [`Linear::input_grad_rows`].
    #[allow(clippy::too_many_arguments)]
    fn weight_grad_rows(
        &mut self,
        first: bool,
        r: usize,
        k: usize,
        n: usize,
        x: &[f32],
        dy: &[f32],
        wl: Layout,
        dw: &mut [f32],
    ) {
        let isa = self.isa;
        let LinearScratch {
            a, b, dw: dw_sums, ..
        } = &mut *self.s;
        let (x, dy) = if self.bf16 {
            (rounded(a, x), rounded(b, dy))
        } else {
            (x, dy)
        };
        let dst: &mut [f32] = if self.bf16 {
            dw_sums.resize(k * n, 0.0);
            dw_sums
        } else {
            dw
        };
        let (t, nl) = (Layout::Transposed, Layout::Normal);
        match wl {
            Layout::Normal => planner::matmul(isa, k, n, r, x, t, dy, nl, dst, !first),
            Layout::Transposed => planner::matmul(isa, n, k, r, dy, t, x, nl, dst, !first),
        }
    }

    /// The `dx` half of [`Linear::backward_rows`], after its `dW` half of
    /// the same rows (in bf16 mode, `dy` as that rounded it).
    #[allow(clippy::too_many_arguments)]
    fn input_grad_rows(
        &mut self,
        r: usize,
        k: usize,
        n: usize,
        dy: &[f32],
        w: &[f32],
        wl: Layout,
        dx: &mut [f32],
        dx_acc: bool,
    ) {
        let isa = self.isa;
        let LinearScratch { b, c, wt, .. } = &mut *self.s;
        let nl = Layout::Normal;
        if !self.bf16 {
            let wt = if wl == Layout::Transposed { w } else { wt };
            return planner::matmul(isa, r, k, n, dy, nl, wt, nl, dx, dx_acc);
        }
        c.resize(r * k, 0.0);
        planner::matmul(isa, r, k, n, b, nl, wt, nl, c, false);
        store_rounded(c, &mut dx[..r * k], dx_acc);
    }

    /// Ends a backward pass: in bf16 mode, `dW` rounded from its sums.
    fn end_backward(&mut self, k: usize, n: usize, dw: &mut [f32]) {
        if self.bf16 {
            store_rounded(&self.s.dw, &mut dw[..k * n], false);
        }
    }
}

/// Rows per parallel task of the row-wise passes.
const ROWS_PER_TASK: usize = 32;

/// RMSNorm forward: `y = x · r · g`, `r = 1/sqrt(mean(x²) + eps)` per row (kept).
fn rms_forward(isa: Isa, x: &[f32], d: usize, g: &[f32], eps: f32, y: &mut [f32], r: &mut [f32]) {
    let _timer = passes::start(Pass::RmsNormForward);
    y.par_chunks_mut(d * ROWS_PER_TASK)
        .zip(r.par_chunks_mut(ROWS_PER_TASK))
        .zip(x.par_chunks(d * ROWS_PER_TASK))
        .for_each(|((yb, rb), xb)| {
            isa.vectorised(
                #[inline(always)]
                || {
                    for ((yr, rr), xr) in yb.chunks_exact_mut(d).zip(rb).zip(xb.chunks_exact(d)) {
                        let ss = math::dot(xr, xr);
                        let inv = 1.0 / (ss / d as f32 + eps).sqrt();
                        *rr = inv;
                        for ((o, v), gv) in yr.iter_mut().zip(xr).zip(g) {
                            *o = v * inv * gv;
                        }
                    }
                },
            )
        });
}

/// RMSNorm backward: `dx += …` and `dg = Σ_rows dy·x·r` (overwrites `dg`).
#[allow(clippy::too_many_arguments)]
fn rms_backward(
    isa: Isa,
    x: &[f32],
    d: usize,
    g: &[f32],
    r: &[f32],
    dy: &[f32],
    dx: &mut [f32],
    dg: &mut [f32],
) {
    let _timer = passes::start(Pass::RmsNormBackward);
    let parts: Vec<Vec<f32>> = dx
        .par_chunks_mut(d * ROWS_PER_TASK)
        .zip(x.par_chunks(d * ROWS_PER_TASK))
        .zip(dy.par_chunks(d * ROWS_PER_TASK))
        .zip(r.par_chunks(ROWS_PER_TASK))
        .map(|(((dxb, xb), dyb), rb)| {
            isa.vectorised(
                #[inline(always)]
                || {
                    let mut dgp = vec![0f32; d];
                    for (((dxr, xr), dyr), &inv) in dxb
                        .chunks_exact_mut(d)
                        .zip(xb.chunks_exact(d))
                        .zip(dyb.chunks_exact(d))
                        .zip(rb)
                    {
                        // Σ g·dy·x in the lanes of `math::dot3`: one chain
                        // of adds in order would wait on each add's latency
                        // (the step's hottest scalar loop, that way).
                        let dot = math::dot3(g, dyr, xr);
                        for ((a, &y), &v) in dgp.iter_mut().zip(dyr).zip(xr) {
                            *a += y * v * inv;
                        }
                        let k = dot * inv * inv * inv / d as f32;
                        for (((o, &y), &v), &gv) in dxr.iter_mut().zip(dyr).zip(xr).zip(g) {
                            *o += inv * gv * y - v * k;
                        }
                    }
                    dgp
                },
            )
        })
        .collect();
    dg.fill(0.0);
    for p in &parts {
        dg.iter_mut().zip(p).for_each(|(a, b)| *a += b);
    }
}

/// SwiGLU on rows of `[gate | up]` (2f wide): `m = silu(gate) · up`.
fn swiglu_forward(isa: Isa, gu: &[f32], f: usize, m: &mut [f32]) {
    let _timer = passes::start(Pass::SwigluForward);
    m.par_chunks_mut(f * ROWS_PER_TASK)
        .zip(gu.par_chunks(2 * f * ROWS_PER_TASK))
        .for_each(|(mb, gb)| {
            isa.vectorised_wide(
                #[inline(always)]
                || {
                    for (mr, gr) in mb.chunks_exact_mut(f).zip(gb.chunks_exact(2 * f)) {
                        let (gt, up) = gr.split_at(f);
                        for j in 0..f {
                            mr[j] = gt[j] * math::sigmoid(gt[j]) * up[j];
                        }
                    }
                },
            )
        });
}

/// SwiGLU backward, in place: each row of `gu` (`[gate | up]`) becomes its
/// gradient `[dgate | dup]` from `dm` (`gu` is dead after it, and its lines
/// are in the caches as the pass writes them).
fn swiglu_backward(isa: Isa, gu: &mut [f32], f: usize, dm: &[f32]) {
    let _timer = passes::start(Pass::SwigluBackward);
    gu.par_chunks_mut(2 * f * ROWS_PER_TASK)
        .zip(dm.par_chunks(f * ROWS_PER_TASK))
        .for_each(|(gb, mb)| {
            isa.vectorised_wide(
                #[inline(always)]
                || {
                    for (gr, mr) in gb.chunks_exact_mut(2 * f).zip(mb.chunks_exact(f)) {
                        let (gt, up) = gr.split_at_mut(f);
                        for j in 0..f {
                            let (g, u) = (gt[j], up[j]);
                            let s = math::sigmoid(g);
                            up[j] = mr[j] * g * s;
                            gt[j] = mr[j] * u * (s * (1.0 + g * (1.0 - s)));
                        }
                    }
                },
            )
        });
}

/// Causal attention with RoPE over `[B, T, 3, H, Dh]` projections, on row
/// blocks of `block` queries (the planner's, [`planner::attention_plan`]):
/// a block attends to keys up to its last row only, so the products skip
/// (most of) the masked upper triangle. The
/// products read v, dO and write O, dV in place in their `[B, T, …]`
/// tensors (the indirect kernel takes any row offsets); only the rotated
/// q, k and the transposed k, v are copied per head.
struct Attention {
    isa: Isa,
    t: usize,
    h: usize,
    dh: usize,
    block: usize,
    /// A task per (sequence, head) (`Some(true)`) or per sequence
    /// (`Some(false)`); `None`: as [`Attention::splits_heads`] decides.
    split: Option<bool>,
    /// The row-wise passes 16 lanes wide ([`planner::AttentionPlan::wide`]).
    wide: bool,
    /// The first Dh values of a row; the Dh rows of a `[Dh, T]` matrix.
    dh_cols: Offsets,
    t_rows: Offsets,
    /// Per block (rows `s..e`): columns `0..e`; rows `0..e` of `[T, Dh]`
    /// and of `[T, 3·H·Dh]`; rows `s..T` of `[T, T]`, `[T, Dh]` and `[T, H·Dh]`.
    cols_to: Vec<Offsets>,
    dh_rows_to: Vec<Offsets>,
    qkv_rows_to: Vec<Offsets>,
    t_rows_from: Vec<Offsets>,
    dh_rows_from: Vec<Offsets>,
    hdh_rows_from: Vec<Offsets>,
}

/// One head's kᵀ (forward) or vᵀ (backward) (`[Dh, T]`); for the
/// backward pass also its dQ and dK (`[T, Dh]`) and dS (`[T, T]`). Every
/// value is written before it is read. (The rotated q and k are the
/// layer's, kept from the forward pass for the backward: `Saved::qk`.)
#[derive(Default)]
struct HeadBufs {
    kt: Vec<f32>,
    vt: Vec<f32>,
    dq: Vec<f32>,
    dk: Vec<f32>,
    ds: Vec<f32>,
}

thread_local! {
    /// Each thread's [`HeadBufs`], kept from call to call rather than
    /// allocated and zeroed for every sequence.
    static HEAD_BUFS: std::cell::RefCell<HeadBufs> = std::cell::RefCell::default();
    /// The calling thread's staging buffer of an attention a task per
    /// (sequence, head), kept for the next (taken while a pass runs; every
    /// value it passes on is written first).
    static STAGED: std::cell::Cell<Vec<f32>> = const { std::cell::Cell::new(Vec::new()) };
}

impl Attention {
    fn new(isa: Isa, t: usize, h: usize, dh: usize, block: usize) -> Self {
        let block = block.max(1);
        let blocks: Vec<(usize, usize)> = (0..t)
            .step_by(block)
            .map(|s| (s, (s + block).min(t)))
            .collect();
        let to = |stride: usize| -> Vec<Offsets> {
            blocks
                .iter()
                .map(|&(_, e)| Offsets::dense(e, stride))
                .collect()
        };
        let from = |stride: usize| -> Vec<Offsets> {
            blocks
                .iter()
                .map(|&(s, _)| Offsets::dense(t - s, stride))
                .collect()
        };
        Self {
            isa,
            t,
            h,
            dh,
            block,
            split: None,
            wide: false,
            dh_cols: Offsets::dense(dh, 1),
            t_rows: Offsets::dense(dh, t),
            cols_to: to(1),
            dh_rows_to: to(dh),
            qkv_rows_to: to(3 * h * dh),
            t_rows_from: from(t),
            dh_rows_from: from(dh),
            hdh_rows_from: from(h * dh),
        }
    }

    /// The attention with the row-wise passes as `plan` says.
    fn planned(isa: Isa, t: usize, h: usize, dh: usize, plan: planner::AttentionPlan) -> Self {
        let shape = planner::AttentionShape { t, heads: h, dh };
        Self {
            wide: plan.wide,
            ..Self::new(plan.kernels(isa, shape), t, h, dh, plan.block)
        }
    }

    /// Runs `f` in the SIMD context of the row-wise passes: 16 lanes where
    /// the plan asks ([`Isa::vectorised_wide`]), else 8 ([`Isa::vectorised`]).
    #[inline(always)]
    fn vectorised<R>(&self, f: impl FnOnce() -> R) -> R {
        if self.wide {
            self.isa.vectorised_wide(f)
        } else {
            self.isa.vectorised(f)
        }
    }

    fn blocks(&self) -> impl Iterator<Item = (usize, usize, usize)> + '_ {
        (0..self.t)
            .step_by(self.block)
            .enumerate()
            .map(|(b, s)| (b, s, (s + self.block).min(self.t)))
    }

    /// Runs `f` on this thread's [`HeadBufs`], grown to this attention's
    /// sizes (kᵀ for the forward pass; vᵀ and the other buffers of the
    /// backward pass where `backward`). Call it
    /// outside [`Isa::vectorised`], with `f` entering it: the thread-local's
    /// access is a function of its own, so a closure it calls is compiled
    /// for the x86-64 baseline, not for the caller's AVX2 context (the
    /// attention's softmax, RoPE and copies ran 4 lanes wide that way, an
    /// eighth of the LLM step).
    fn with_bufs<R>(&self, backward: bool, f: impl FnOnce(&mut HeadBufs) -> R) -> R {
        let n = self.t * self.dh;
        HEAD_BUFS.with_borrow_mut(|b| {
            grow(if backward { &mut b.vt } else { &mut b.kt }, n);
            if backward {
                // Every head's dQ and dK (a task per sequence rotates them
                // back together).
                grow(&mut b.dq, self.h * n);
                grow(&mut b.dk, self.h * n);
                grow(&mut b.ds, self.t * self.t);
            }
            f(b)
        })
    }

    /// Offset of head `hd`'s q (`part` 0), k (1) or v (2) at position 0 of a sequence.
    fn part(&self, part: usize, hd: usize) -> usize {
        (part * self.h + hd) * self.dh
    }

    /// Heads `heads`' rotated q and k of one sequence (`seq`: `[T, 3, H,
    /// Dh]`) into `qk` (`[heads, 2, T, Dh]`: each head's q, then its k), in
    /// one pass over the sequence's rows: a task per sequence rotates every
    /// head at once (each row's q and k parts read whole, in order), a task
    /// per (sequence, head) its own. Each value is rotated as
    /// [`Rope::rotate`] rotates it, whichever heads go together.
    #[inline(always)]
    fn gather(&self, rope: &Rope, seq: &[f32], heads: std::ops::Range<usize>, qk: &mut [f32]) {
        let (t, dh, rs) = (self.t, self.dh, 3 * self.h * self.dh);
        let n = t * dh;
        let qk = &mut qk[..heads.len() * 2 * n];
        for (p, row) in seq.chunks_exact(rs).take(t).enumerate() {
            let o = p * dh;
            for (hd, qk) in heads.clone().zip(qk.chunks_exact_mut(2 * n)) {
                let (q, k) = qk.split_at_mut(n);
                rope.rotate(p, &row[self.part(0, hd)..], &mut q[o..o + dh], false);
                rope.rotate(p, &row[self.part(1, hd)..], &mut k[o..o + dh], false);
            }
        }
    }

    /// `out[row s.., 0..cols] = X · Y` for query rows `s..e`:
    /// `X(r, k) = x[x_base + (s + r)·x_rs + x_koff[k]]`, `Y(k, j) = y[y_base + y_koff[k] + j]`.
    #[allow(clippy::too_many_arguments)]
    fn product(
        &self,
        rows: (usize, usize),
        cols: usize,
        x: (&[f32], usize, usize, &Offsets),
        y: (&[f32], usize, &Offsets),
        out: &mut [f32],
        out_base: usize,
        out_rs: usize,
    ) {
        let (s, e) = rows;
        let a = AMat {
            data: x.0,
            base: x.1 + s * x.2,
            row_stride: x.2,
            koff: x.3,
        };
        let b = BMat {
            data: y.0,
            base: y.1,
            koff: y.2,
        };
        let out = &mut out[out_base + s * out_rs..];
        igemm(self.isa, e - s, cols, a, b, out, out_rs, false);
    }

    /// The transpose of a `[T, T]` matrix from row and column `s` of block
    /// `bi`: `X(r, k) = m[(s + k)·T + s + r]`.
    fn transposed_from<'a>(&'a self, m: &'a [f32], bi: usize, s: usize) -> AMat<'a> {
        AMat {
            data: m,
            base: s * self.t + s,
            row_stride: 1,
            koff: &self.t_rows_from[bi],
        }
    }

    /// Whether `b` sequences go to the pool a (sequence, head) pair per
    /// task rather than a sequence per task: where a task per sequence
    /// would leave threads idle for a fifth of the pass or more (fewer
    /// sequences than threads, or a last round of tasks only partly full:
    /// 16 sequences on 32 threads, 3 on 2) and pairs fill the rounds
    /// better. The pairs' results go through a staging buffer (a copy of
    /// the outputs); every value is computed as a task per sequence
    /// computes it, so the results are bitwise the same.
    fn splits_heads(&self, b: usize) -> bool {
        match self.split {
            Some(heads) => heads,
            None => {
                let threads = rayon::current_num_threads().max(1);
                let full = |tasks: usize| tasks as f64 / (tasks.div_ceil(threads) * threads) as f64;
                full(b) < 0.8 && full(b * self.h) > full(b)
            }
        }
    }

    /// `qkv` `[B, T, 3, H, Dh]` → `out` `[B, T, H·Dh]`; the probabilities
    /// `[B, H, T, T]` are kept in `probs` (zero above the diagonal: written
    /// so up to each block's last key, and never written further right, so
    /// as zero as the buffer was made), the
    /// rotated q and k (`[B, H, 2, T, Dh]`) in `qk`.
    fn forward(
        &self,
        rope: &Rope,
        qkv: &[f32],
        out: &mut [f32],
        probs: &mut [f32],
        qk: &mut [f32],
    ) {
        let _timer = passes::start(Pass::AttentionForward);
        let (t, h, dh) = (self.t, self.h, self.dh);
        let (n, seq_len) = (t * dh, t * 3 * h * dh);
        let b = qkv.len() / seq_len;
        if !self.splits_heads(b) {
            out.par_chunks_mut(t * h * dh)
                .zip(probs.par_chunks_mut(h * t * t))
                .zip(qkv.par_chunks(seq_len))
                .zip(qk.par_chunks_mut(2 * h * n))
                .for_each(|(((o, pr), seq), qk)| {
                    self.with_bufs(false, |hb| {
                        self.vectorised(
                            #[inline(always)]
                            || {
                                self.gather(rope, seq, 0..h, qk);
                                let pairs = pr.chunks_exact_mut(t * t).zip(qk.chunks_exact(2 * n));
                                for (hd, (p, qk)) in pairs.enumerate() {
                                    let o = (&mut o[..], hd * dh, h * dh);
                                    self.head_forward(seq, hd, qk, &mut hb.kt, p, o);
                                }
                            },
                        )
                    })
                });
            return;
        }
        // A task per (sequence, head): each head's output `[T, Dh]` into a
        // staging buffer `[B, H, T, Dh]`, then into `out` a sequence at a time.
        let mut staged = STAGED.take();
        grow(&mut staged, b * h * n);
        staged[..b * h * n]
            .par_chunks_mut(n)
            .zip(probs.par_chunks_mut(t * t))
            .zip(qk.par_chunks_mut(2 * n))
            .enumerate()
            .for_each(|(i, ((o, p), qk))| {
                let (seq, hd) = (&qkv[i / h * seq_len..][..seq_len], i % h);
                self.with_bufs(false, |hb| {
                    self.vectorised(
                        #[inline(always)]
                        || {
                            self.gather(rope, seq, hd..hd + 1, qk);
                            self.head_forward(seq, hd, qk, &mut hb.kt, p, (o, 0, dh))
                        },
                    )
                })
            });
        self.unstage(1, &staged[..b * h * n], out);
        STAGED.set(staged);
    }

    /// Copies what the (sequence, head) tasks staged, `[B, H, parts, T,
    /// Dh]`, into its place in `dst`, `[B, T, parts, H, Dh]`, a sequence
    /// per task: the output (`parts` 1) or dq, dk and dv (3, as
    /// [`Attention::part`] lays them out).
    fn unstage(&self, parts: usize, staged: &[f32], dst: &mut [f32]) {
        let (t, h, dh) = (self.t, self.h, self.dh);
        let n = t * dh;
        dst.par_chunks_mut(t * parts * h * dh)
            .zip(staged.par_chunks(h * parts * n))
            .for_each(|(seq, st)| {
                for (p, row) in seq.chunks_exact_mut(parts * h * dh).enumerate() {
                    for hd in 0..h {
                        for i in 0..parts {
                            let from = &st[(hd * parts + i) * n + p * dh..][..dh];
                            row[self.part(i, hd)..][..dh].copy_from_slice(from);
                        }
                    }
                }
            });
    }

    /// One head `hd` of one sequence's forward pass from its rotated q and
    /// k (`qk`, `[2, T, Dh]`, as [`Attention::gather`] left them): kᵀ into
    /// `kt`, its probabilities into `p` (`[T, T]`), its output into `o`
    /// (`(data, base, row stride)`: row `r` at `data[base + r·stride..][..Dh]`).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn head_forward(
        &self,
        seq: &[f32],
        hd: usize,
        qk: &[f32],
        kt: &mut [f32],
        p: &mut [f32],
        o: (&mut [f32], usize, usize),
    ) {
        let (t, dh) = (self.t, self.dh);
        let n = t * dh;
        let scale = 1.0 / (dh as f32).sqrt();
        transpose_into(&qk[n..2 * n], t, dh, dh, &mut kt[..n], t);
        let (o, o_base, o_rs) = o;
        for (bi, s, e) in self.blocks() {
            // S = q kᵀ over keys 0..e, then a causal softmax of scale·S.
            let q = (qk, 0, dh, &self.dh_cols);
            self.product((s, e), e, q, (&kt[..], 0, &self.t_rows), p, 0, t);
            for i in s..e {
                let row = &mut p[i * t..(i + 1) * t];
                let mx = math::max(&row[..=i]);
                let inv = 1.0 / math::exp_in_place(&mut row[..=i], mx, scale);
                row[..=i].iter_mut().for_each(|x| *x *= inv);
                // Zero above the diagonal as far as the block's keys go:
                // the products of this block (and dV's in the backward)
                // read up to key e only, and the rest of the row is never
                // written (it stays as the buffer was made: zero).
                row[i + 1..e].fill(0.0);
            }
            // O = P V over keys 0..e, into this head's rows of `o`.
            let pm = (&p[..], 0, t, &self.cols_to[bi]);
            let v = (seq, self.part(2, hd), &self.qkv_rows_to[bi]);
            self.product((s, e), dh, pm, v, o, o_base, o_rs);
        }
    }

    /// Backward of [`Attention::forward`] (`qk` and `probs` as it left
    /// them), in place: `qkv` becomes its gradient `dqkv` from `dout`. Only
    /// each head's v is read from it (into `vᵀ`, before that head's dv is
    /// written over it; q and k come rotated from `qk`), so a task per
    /// sequence writes its gradient over its own rows while their lines are
    /// in the caches, rather than into a buffer read from memory first.
    fn backward(&self, rope: &Rope, qkv: &mut [f32], qk: &[f32], probs: &[f32], dout: &[f32]) {
        let _timer = passes::start(Pass::AttentionBackward);
        let (t, h, dh) = (self.t, self.h, self.dh);
        let (n, seq_len) = (t * dh, t * 3 * h * dh);
        let b = qkv.len() / seq_len;
        if !self.splits_heads(b) {
            qkv.par_chunks_mut(seq_len)
                .zip(dout.par_chunks(t * h * dh))
                .zip(probs.par_chunks(h * t * t))
                .zip(qk.par_chunks(2 * h * n))
                .for_each(|(((dseq, dys), pr), qk)| {
                    self.with_bufs(true, |hb| {
                        self.vectorised(
                            #[inline(always)]
                            || {
                                let pairs = pr.chunks_exact(t * t).zip(qk.chunks_exact(2 * n));
                                let rs = 3 * h * dh;
                                for (hd, (p, qk)) in pairs.enumerate() {
                                    self.transpose_v(dseq, hd, &mut hb.vt);
                                    let dv = (&mut dseq[..], self.part(2, hd), rs);
                                    self.head_backward(dys, hd, p, qk, hb, hd, dv);
                                }
                                let parts = |hd| [self.part(0, hd), self.part(1, hd)];
                                self.rotate_back(rope, hb, 0..h, dseq, parts, rs);
                            },
                        )
                    })
                });
            return;
        }
        // A task per (sequence, head): each head's dq, dk, dv (`[3, T,
        // Dh]`) into a staging buffer `[B, H, 3, T, Dh]`, then into `dqkv`
        // a sequence at a time.
        let mut staged = STAGED.take();
        grow(&mut staged, b * h * 3 * n);
        staged[..b * h * 3 * n]
            .par_chunks_mut(3 * n)
            .zip(probs.par_chunks(t * t))
            .zip(qk.par_chunks(2 * n))
            .enumerate()
            .for_each(|(i, ((d, p), qk))| {
                let (bi, hd) = (i / h, i % h);
                let seq = &qkv[bi * seq_len..][..seq_len];
                let dys = &dout[bi * t * h * dh..][..t * h * dh];
                self.with_bufs(true, |hb| {
                    self.vectorised(
                        #[inline(always)]
                        || {
                            self.transpose_v(seq, hd, &mut hb.vt);
                            self.head_backward(dys, hd, p, qk, hb, 0, (d, 2 * n, dh));
                            self.rotate_back(rope, hb, hd..hd + 1, d, |_| [0, n], dh);
                        },
                    )
                })
            });
        self.unstage(3, &staged[..b * h * 3 * n], qkv);
        STAGED.set(staged);
    }

    /// Head `hd`'s v of one sequence's projections (`seq`, `[T, 3·H·Dh]`)
    /// transposed into `vt` (`[Dh, T]`), for [`Attention::head_backward`].
    #[inline(always)]
    fn transpose_v(&self, seq: &[f32], hd: usize, vt: &mut [f32]) {
        let (t, h, dh) = (self.t, self.h, self.dh);
        transpose_into(
            &seq[self.part(2, hd)..],
            t,
            dh,
            3 * h * dh,
            &mut vt[..t * dh],
            t,
        );
    }

    /// One head `hd` of one sequence's backward pass (`dys` its `[T, H·Dh]`
    /// output gradient; `hb.vt` its vᵀ, as [`Attention::transpose_v`] left
    /// it; `p`, `qk` what [`Attention::head_forward`] left): its dv into `dv` (`(data,
    /// base, row stride)`: row `r` at `data[base + r·stride..][..Dh]`), its
    /// dq and dk, in the rotated frame, into slot `slot` of `hb.dq` and
    /// `hb.dk` (`[T, Dh]` each; [`Attention::rotate_back`] takes them on).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn head_backward(
        &self,
        dys: &[f32],
        hd: usize,
        p: &[f32],
        qk: &[f32],
        hb: &mut HeadBufs,
        slot: usize,
        dv: (&mut [f32], usize, usize),
    ) {
        let (t, h, dh) = (self.t, self.h, self.dh);
        let n = t * dh;
        let scale = 1.0 / (dh as f32).sqrt();
        let (dst, dv_base, rs) = dv;
        let (q, k) = qk[..2 * n].split_at(n);
        let vt = &hb.vt[..n];
        let ds = &mut hb.ds[..t * t];
        // dQ and dK in the rotated frame.
        let dq = &mut hb.dq[slot * n..][..n];
        let dk = &mut hb.dk[slot * n..][..n];
        for (bi, s, e) in self.blocks() {
            // dP = dO Vᵀ over keys 0..e; dS = P ∘ (dP − rowsum(P ∘ dP)) · scale.
            let d_o = (dys, hd * dh, h * dh, &self.dh_cols);
            self.product((s, e), e, d_o, (vt, 0, &self.t_rows), ds, 0, t);
            for i in s..e {
                // (Columns up to the block's last key: the products below
                // read no further.)
                let (pr_, dr) = (&p[i * t..(i + 1) * t], &mut ds[i * t..i * t + e]);
                let (pr_, (dr, above)) = (&pr_[..=i], dr.split_at_mut(i + 1));
                let dot = math::dot(pr_, dr);
                // (Zipped slices, which need no bounds checks: with indices
                // over `0..=i` the attention's backward was measurably
                // slower.)
                for (d, &p) in dr.iter_mut().zip(pr_) {
                    *d = p * (*d - dot) * scale;
                }
                above.fill(0.0);
            }
            // dQ = dS K over keys 0..e (in the rotated frame).
            let dsm = (&ds[..], 0, t, &self.cols_to[bi]);
            self.product((s, e), dh, dsm, (k, 0, &self.dh_rows_to[bi]), dq, 0, dh);
        }
        // dV = Pᵀ dO and dK = dSᵀ Q: key j sums over queries j..T.
        for (bi, s, e) in self.blocks() {
            let d_o = BMat {
                data: dys,
                base: s * h * dh + hd * dh,
                koff: &self.hdh_rows_from[bi],
            };
            let dv = &mut dst[dv_base + s * rs..];
            let pt = self.transposed_from(p, bi, s);
            igemm(self.isa, e - s, dh, pt, d_o, dv, rs, false);
            let q = BMat {
                data: q,
                base: s * dh,
                koff: &self.dh_rows_from[bi],
            };
            let a = self.transposed_from(ds, bi, s);
            igemm(self.isa, e - s, dh, a, q, &mut dk[s * dh..], dh, false);
        }
    }

    /// The dq and dk that [`Attention::head_backward`] left in the first
    /// `heads.len()` slots of `hb.dq` and `hb.dk` (heads `heads`, in the
    /// rotated frame) rotated back into `dst`: head `hd`'s row `r` of dq
    /// at `dst[bases(hd)[0] + r·rs..][..Dh]`, of dk at `bases(hd)[1]`. A
    /// row at a time, every head's parts of it together (a task per
    /// sequence writes each row of its `[T, 3, H, Dh]` gradient once).
    #[inline(always)]
    fn rotate_back(
        &self,
        rope: &Rope,
        hb: &HeadBufs,
        heads: std::ops::Range<usize>,
        dst: &mut [f32],
        bases: impl Fn(usize) -> [usize; 2],
        rs: usize,
    ) {
        let (t, dh) = (self.t, self.dh);
        let n = t * dh;
        for r in 0..t {
            let o = r * dh;
            for (slot, hd) in heads.clone().enumerate() {
                let [bq, bk] = bases(hd);
                let (dq, dk) = (&hb.dq[slot * n + o..][..dh], &hb.dk[slot * n + o..][..dh]);
                rope.rotate(r, dq, &mut dst[bq + r * rs..], true);
                rope.rotate(r, dk, &mut dst[bk + r * rs..], true);
            }
        }
    }
}

/// Synthetic projections and gradients of `b` sequences, for timing an
/// attention's forward and backward pass with a given block of queries.
struct AttentionProbe {
    qkv: Vec<f32>,
    dout: Vec<f32>,
    out: Vec<f32>,
    probs: Vec<f32>,
    qk: Vec<f32>,
    dqkv: Vec<f32>,
    t: usize,
    h: usize,
    dh: usize,
}

impl AttentionProbe {
    fn new(b: usize, t: usize, h: usize, dh: usize) -> Self {
        let mut rng = crate::rng::Rng::new(0xa77e_0001);
        let n = b * t * h * dh;
        Self {
            qkv: rng.normal_vec(3 * n, 1.0),
            dout: rng.normal_vec(n, 1.0),
            out: vec![0.0; n],
            probs: vec![0.0; b * h * t * t],
            qk: vec![0.0; 2 * n],
            dqkv: vec![0.0; 3 * n],
            t,
            h,
            dh,
        }
    }

    /// One forward and backward pass under the kernel set `isa` as `plan` says.
    fn run(&mut self, isa: Isa, rope: &Rope, plan: planner::AttentionPlan) {
        self.run_split(isa, rope, plan, None)
    }

    /// [`AttentionProbe::run`] with the tasks split as `split` says (see
    /// [`Attention::split`]).
    fn run_split(
        &mut self,
        isa: Isa,
        rope: &Rope,
        plan: planner::AttentionPlan,
        split: Option<bool>,
    ) {
        let mut a = Attention::planned(isa, self.t, self.h, self.dh, plan);
        a.split = split;
        a.forward(
            rope,
            &self.qkv,
            &mut self.out,
            &mut self.probs,
            &mut self.qk,
        );
        // The backward runs in place: on a copy of the projections, which
        // the next forward pass reads again.
        self.dqkv.copy_from_slice(&self.qkv);
        a.backward(rope, &mut self.dqkv, &self.qk, &self.probs, &self.dout);
    }
}

/// Sum over rows of the cross-entropy of `logits` (rows of `v`) against
/// `targets`; with `grad`, each row is replaced by `(softmax − onehot) · scale`,
/// without, by its exponentials (the logits are scratch either way).
fn cross_entropy(
    isa: Isa,
    logits: &mut [f32],
    v: usize,
    targets: &[u32],
    grad: Option<f32>,
) -> f64 {
    let _timer = passes::start(Pass::CrossEntropy);
    logits
        .par_chunks_mut(v * ROWS_PER_TASK)
        .zip(targets.par_chunks(ROWS_PER_TASK))
        .map(|(lb, tb)| {
            isa.vectorised_wide(
                #[inline(always)]
                || {
                    let mut loss = 0f64;
                    for (row, &tg) in lb.chunks_exact_mut(v).zip(tb) {
                        let tg = tg as usize;
                        let mx = math::max(row);
                        let target = row[tg];
                        let sum = math::exp_in_place(row, mx, 1.0);
                        loss += f64::from(mx + sum.ln() - target);
                        if let Some(scale) = grad {
                            let k = scale / sum;
                            row.iter_mut().for_each(|x| *x *= k);
                            row[tg] -= scale;
                        }
                    }
                    loss
                },
            )
        })
        .sum()
}

/// The engine: parameters and gradients live in the caller's flat vectors.
pub struct Llm {
    isa: Isa,
    spec: LlmSpec,
    layers: Vec<Saved>,
    /// Final residual stream, its 1/rms, the normalised rows and the logits.
    x_out: Vec<f32>,
    rf: Vec<f32>,
    hf: Vec<f32>,
    logits: Vec<f32>,
    /// Backward scratch.
    dx: Vec<f32>,
    dh: Vec<f32>,
    lin: LinearScratch,
    /// The embedding transposed (`[d, vocab]`): the head's `W`.
    et: Vec<f32>,
}

impl Llm {
    pub fn isa(&self) -> Isa {
        self.isa
    }

    pub fn new(spec: LlmSpec, isa: Isa) -> Self {
        super::aligned::engage();
        let layers = spec.layers.iter().map(|_| Saved::default()).collect();
        Self {
            isa,
            spec,
            layers,
            x_out: Vec::new(),
            rf: Vec::new(),
            hf: Vec::new(),
            logits: Vec::new(),
            dx: Vec::new(),
            dh: Vec::new(),
            lin: LinearScratch::default(),
            et: Vec::new(),
        }
    }

    fn check_tokens(&self, tokens: &[u32], what: &str) -> Result<usize> {
        let t = self.spec.seq_len;
        if tokens.is_empty() || !tokens.len().is_multiple_of(t) {
            return Err(err(format!(
                "llm: {} {what} are not whole sequences of {t}",
                tokens.len()
            )));
        }
        if let Some(bad) = tokens.iter().find(|&&x| x as usize >= self.spec.vocab) {
            return Err(err(format!("llm: token {bad} out of vocabulary")));
        }
        Ok(tokens.len() / t)
    }

    /// The attention of `b` sequences as the planner says (blocks of
    /// queries, kernels; in [`planner::Mode::Measure`], a shape's first
    /// attention times each candidate on `b` sequences of synthetic
    /// projections).
    fn attention(&self, b: usize) -> Attention {
        let s = &self.spec;
        let (t, h, dh) = (s.seq_len, s.heads, s.d / s.heads);
        let shape = planner::AttentionShape { t, heads: h, dh };
        let threads = rayon::current_num_threads();
        let mut probe = None;
        let plan = planner::attention_plan(self.isa, threads, shape, &mut |plan| {
            probe
                .get_or_insert_with(|| AttentionProbe::new(b, t, h, dh))
                .run(self.isa, &s.rope, plan)
        });
        Attention::planned(self.isa, t, h, dh, plan)
    }

    /// Forward pass over `tokens` (whole sequences); leaves the logits in `self.logits`.
    fn run_forward(&mut self, params: &[f32], tokens: &[u32]) -> Result<()> {
        let b = self.check_tokens(tokens, "tokens")?;
        let attn = self.attention(b);
        let s = &self.spec;
        let (t, d, f, v) = (s.seq_len, s.d, s.ffn, s.vocab);
        let rows = b * t;
        let embed = &params[s.embed..s.embed + v * d];
        let mut lin = Linear {
            isa: self.isa,
            bf16: s.bf16,
            s: &mut self.lin,
        };
        // The embedding lookup is the input of the first layer (or of the
        // final norm when there are no layers).
        self.x_out.resize(rows * d, 0.0);
        for (xr, &tok) in self.x_out.chunks_exact_mut(d).zip(tokens) {
            let e = tok as usize * d;
            xr.copy_from_slice(&embed[e..e + d]);
        }
        for (ls, sv) in s.layers.iter().zip(self.layers.iter_mut()) {
            // The layer's input, kept for the backward pass: the stream
            // itself, swapped in (`x_out` is rewritten below, from `xm`).
            std::mem::swap(&mut sv.x, &mut self.x_out);
            sv.r1.resize(rows, 0.0);
            sv.h.resize(rows * d, 0.0);
            rms_forward(
                self.isa,
                &sv.x,
                d,
                &params[ls.attn_norm..ls.attn_norm + d],
                s.norm_eps,
                &mut sv.h,
                &mut sv.r1,
            );
            sv.qkv.resize(rows * 3 * d, 0.0);
            lin.forward(
                rows,
                d,
                3 * d,
                &sv.h,
                &params[ls.w_qkv..ls.w_qkv + 3 * d * d],
                Layout::Normal,
                &mut sv.qkv,
                false,
            );
            sv.att.resize(rows * d, 0.0);
            sv.probs.resize(b * s.heads * t * t, 0.0);
            sv.qk.resize(2 * rows * d, 0.0);
            attn.forward(&s.rope, &sv.qkv, &mut sv.att, &mut sv.probs, &mut sv.qk);
            sv.xm.resize(rows * d, 0.0);
            sv.xm.copy_from_slice(&sv.x);
            lin.forward(
                rows,
                d,
                d,
                &sv.att,
                &params[ls.w_o..ls.w_o + d * d],
                Layout::Normal,
                &mut sv.xm,
                true,
            );
            sv.r2.resize(rows, 0.0);
            sv.h2.resize(rows * d, 0.0);
            rms_forward(
                self.isa,
                &sv.xm,
                d,
                &params[ls.mlp_norm..ls.mlp_norm + d],
                s.norm_eps,
                &mut sv.h2,
                &mut sv.r2,
            );
            sv.gu.resize(rows * 2 * f, 0.0);
            lin.forward(
                rows,
                d,
                2 * f,
                &sv.h2,
                &params[ls.w_gate_up..ls.w_gate_up + 2 * f * d],
                Layout::Normal,
                &mut sv.gu,
                false,
            );
            sv.m.resize(rows * f, 0.0);
            swiglu_forward(self.isa, &sv.gu, f, &mut sv.m);
            // The next layer's input (or the final stream): xm + m·Wdown.
            self.x_out.resize(rows * d, 0.0);
            self.x_out.copy_from_slice(&sv.xm);
            lin.forward(
                rows,
                f,
                d,
                &sv.m,
                &params[ls.w_down..ls.w_down + f * d],
                Layout::Normal,
                &mut self.x_out,
                true,
            );
        }
        self.rf.resize(rows, 0.0);
        self.hf.resize(rows * d, 0.0);
        rms_forward(
            self.isa,
            &self.x_out,
            d,
            &params[s.final_norm..s.final_norm + d],
            s.norm_eps,
            &mut self.hf,
            &mut self.rf,
        );
        Ok(())
    }

    /// Logits `[B·T, vocab]` of `tokens` (whole sequences).
    pub fn forward(&mut self, params: &[f32], tokens: &[u32]) -> Result<&[f32]> {
        self.run_forward(params, tokens)?;
        let s = &self.spec;
        let (d, v, rows) = (s.d, s.vocab, tokens.len());
        let mut lin = Linear {
            isa: self.isa,
            bf16: s.bf16,
            s: &mut self.lin,
        };
        self.logits.resize(rows * v, 0.0);
        lin.forward(
            rows,
            d,
            v,
            &self.hf,
            &params[s.embed..s.embed + v * d],
            Layout::Transposed,
            &mut self.logits,
            false,
        );
        Ok(&self.logits)
    }

    /// Mean cross-entropy (nats per token) of `targets` given `tokens`, no gradient.
    pub fn loss(&mut self, params: &[f32], tokens: &[u32], targets: &[u32]) -> Result<f32> {
        self.check_targets(tokens, targets)?;
        self.run_forward(params, tokens)?;
        let total = self.head(params, targets, None);
        Ok((total / targets.len() as f64) as f32)
    }

    /// The tied head and the cross-entropy after [`Llm::run_forward`], a
    /// block of [`HEAD_ROWS`] rows at a time: the logits (scratch, never
    /// kept) take a block's memory, not the batch's. Returns the summed
    /// loss; with `grads`, also the embedding's gradient from the head
    /// (`dE = dlogitsᵀ·hf`, overwritten) and `self.dh` (`dlogits·E`), each
    /// of the mean over the rows. The gradients are bitwise what whole
    /// products give (see [`Linear::backward_rows`]); the row losses are
    /// the same and summed in f64.
    fn head(&mut self, params: &[f32], targets: &[u32], mut grads: Option<&mut [f32]>) -> f64 {
        let s = &self.spec;
        let (d, v, rows) = (s.d, s.vocab, targets.len());
        let embed = &params[s.embed..s.embed + v * d];
        self.et.resize(d * v, 0.0);
        passes::timed(Pass::Transposes, || {
            transpose_into_par(embed, v, d, d, &mut self.et, v)
        });
        let mut lin = Linear {
            isa: self.isa,
            bf16: s.bf16,
            s: &mut self.lin,
        };
        let scale = 1.0 / rows as f32;
        if grads.is_some() {
            self.dh.resize(rows * d, 0.0);
            lin.begin_backward(d, v, embed, Layout::Transposed);
        }
        let mut total = 0f64;
        for r0 in (0..rows).step_by(HEAD_ROWS) {
            let r = HEAD_ROWS.min(rows - r0);
            let logits = &mut self.logits;
            logits.resize(r * v, 0.0);
            let hf = &self.hf[r0 * d..(r0 + r) * d];
            lin.forward(r, d, v, hf, &self.et, Layout::Normal, logits, false);
            let tg = &targets[r0..r0 + r];
            total += cross_entropy(self.isa, logits, v, tg, grads.is_some().then_some(scale));
            if let Some(g) = grads.as_deref_mut() {
                lin.backward_rows(
                    r0 == 0,
                    r,
                    d,
                    v,
                    hf,
                    logits,
                    embed,
                    Layout::Transposed,
                    &mut self.dh[r0 * d..(r0 + r) * d],
                    false,
                    &mut g[s.embed..s.embed + v * d],
                );
            }
        }
        if let Some(g) = grads {
            lin.end_backward(d, v, &mut g[s.embed..s.embed + v * d]);
        }
        total
    }

    fn check_targets(&self, tokens: &[u32], targets: &[u32]) -> Result<()> {
        if tokens.len() != targets.len() {
            return Err(err(format!(
                "llm: {} targets for {} tokens",
                targets.len(),
                tokens.len()
            )));
        }
        self.check_tokens(targets, "targets").map(|_| ())
    }

    /// Forward and backward: the mean cross-entropy per token, its gradient
    /// written into `grads` (the flat layout of `params`; every parameter's
    /// entries are overwritten).
    pub fn gradients(
        &mut self,
        params: &[f32],
        tokens: &[u32],
        targets: &[u32],
        grads: &mut [f32],
    ) -> Result<f32> {
        if grads.len() != params.len() {
            return Err(err("llm: gradient and parameter vectors differ in length"));
        }
        self.check_targets(tokens, targets)?;
        self.run_forward(params, tokens)?;
        let s = &self.spec;
        let (t, d, f, v) = (s.seq_len, s.d, s.ffn, s.vocab);
        let rows = tokens.len();
        let attn = self.attention(rows / t);
        // Head (tied) and loss: dE = dlogitsᵀ·hf; dhf = dlogits·E.
        let total = self.head(params, targets, Some(grads));
        let s = &self.spec;
        let mut lin = Linear {
            isa: self.isa,
            bf16: s.bf16,
            s: &mut self.lin,
        };
        self.dx.resize(rows * d, 0.0);
        self.dx.fill(0.0);
        rms_backward(
            self.isa,
            &self.x_out,
            d,
            &params[s.final_norm..s.final_norm + d],
            &self.rf,
            &self.dh,
            &mut self.dx,
            &mut grads[s.final_norm..s.final_norm + d],
        );
        let dx = &mut self.dx;
        for (ls, sv) in s.layers.iter().zip(&mut self.layers).rev() {
            mlp_backward(&mut lin, rows, d, f, ls, sv, params, dx, grads);
            let rope = &s.rope;
            attention_backward(&mut lin, &attn, rope, rows, d, ls, sv, params, dx, grads);
        }
        // Embedding lookup: scatter-add into the (head's) embedding gradient.
        let de = &mut grads[s.embed..s.embed + v * d];
        for (xr, &tok) in self.dx.chunks_exact(d).zip(tokens) {
            let e = tok as usize * d;
            de[e..e + d].iter_mut().zip(xr).for_each(|(a, b)| *a += b);
        }
        Ok((total / rows as f64) as f32)
    }
}

/// The MLP of one layer, backward: x'' = x' + SwiGLU(RMSNorm(x')·Wgu)·Wdown.
/// `dx` is the residual stream's gradient, which it reads and adds its
/// share to; its saved `m`, `gu` and `h2` become their gradients, each
/// once it is dead ([`Linear::backward_over_input`]).
#[allow(clippy::too_many_arguments)]
fn mlp_backward(
    lin: &mut Linear,
    rows: usize,
    d: usize,
    f: usize,
    ls: &LayerSpec,
    sv: &mut Saved,
    params: &[f32],
    dx: &mut [f32],
    grads: &mut [f32],
) {
    let w_down = ls.w_down..ls.w_down + f * d;
    // dm over m, dgu over gu, dh2 over h2.
    lin.backward_over_input(
        rows,
        f,
        d,
        &mut sv.m,
        dx,
        &params[w_down.clone()],
        Layout::Normal,
        &mut grads[w_down],
    );
    swiglu_backward(lin.isa, &mut sv.gu, f, &sv.m);
    let w_gate_up = ls.w_gate_up..ls.w_gate_up + 2 * f * d;
    lin.backward_over_input(
        rows,
        d,
        2 * f,
        &mut sv.h2,
        &sv.gu,
        &params[w_gate_up.clone()],
        Layout::Normal,
        &mut grads[w_gate_up],
    );
    rms_backward(
        lin.isa,
        &sv.xm,
        d,
        &params[ls.mlp_norm..ls.mlp_norm + d],
        &sv.r2,
        &sv.h2,
        dx,
        &mut grads[ls.mlp_norm..ls.mlp_norm + d],
    );
}

/// The attention of one layer, backward: x' = x + Attn(RMSNorm(x)·Wqkv)·Wo.
/// `dx` as for [`mlp_backward`]; its saved `att`, `qkv` and `h` become
/// their gradients.
#[allow(clippy::too_many_arguments)]
fn attention_backward(
    lin: &mut Linear,
    attn: &Attention,
    rope: &Rope,
    rows: usize,
    d: usize,
    ls: &LayerSpec,
    sv: &mut Saved,
    params: &[f32],
    dx: &mut [f32],
    grads: &mut [f32],
) {
    let w_o = ls.w_o..ls.w_o + d * d;
    // datt over att, dh over h.
    lin.backward_over_input(
        rows,
        d,
        d,
        &mut sv.att,
        dx,
        &params[w_o.clone()],
        Layout::Normal,
        &mut grads[w_o],
    );
    // dqkv over qkv.
    attn.backward(rope, &mut sv.qkv, &sv.qk, &sv.probs, &sv.att);
    let w_qkv = ls.w_qkv..ls.w_qkv + 3 * d * d;
    lin.backward_over_input(
        rows,
        d,
        3 * d,
        &mut sv.h,
        &sv.qkv,
        &params[w_qkv.clone()],
        Layout::Normal,
        &mut grads[w_qkv],
    );
    rms_backward(
        lin.isa,
        &sv.x,
        d,
        &params[ls.attn_norm..ls.attn_norm + d],
        &sv.r1,
        &sv.h,
        dx,
        &mut grads[ls.attn_norm..ls.attn_norm + d],
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::dense;
    use crate::cpu::test_util::bits;
    use crate::rng::Rng;

    /// The row-wise passes run in `Isa::vectorised`'s AVX2 context (8 lanes)
    /// with the SIMD kernel sets (SwiGLU and the cross-entropy in
    /// `Isa::vectorised_wide`'s 16 with the AVX-512 set) and as built
    /// (SSE2) with the portable one:
    /// every result must be the same bits, or calibrations and the RCPs
    /// would depend on the CPU. Widths with tails (d 37, f 21, vocab 53).
    #[test]
    fn row_wise_passes_give_the_same_bits_vectorised() {
        let mut rng = Rng::new(7);
        let (rows, d, f, v) = (70, 37, 21, 53);
        let x = rng.normal_vec(rows * d, 1.5);
        let g = rng.normal_vec(d, 1.0);
        let dy = rng.normal_vec(rows * d, 1.0);
        let gu = rng.normal_vec(rows * 2 * f, 2.0);
        let dm = rng.normal_vec(rows * f, 1.0);
        let logits = rng.normal_vec(rows * v, 3.0);
        let targets: Vec<u32> = (0..rows).map(|i| (i * 31 % v) as u32).collect();
        let rope = Rope::new(d - 1, rows, 10_000.0);
        let run = |isa: Isa| {
            let (mut y, mut r) = (vec![0f32; rows * d], vec![0f32; rows]);
            rms_forward(isa, &x, d, &g, 1e-5, &mut y, &mut r);
            let (mut dx, mut dg) = (vec![0.5f32; rows * d], vec![0f32; d]);
            rms_backward(isa, &x, d, &g, &r, &dy, &mut dx, &mut dg);
            let mut m = vec![0f32; rows * f];
            swiglu_forward(isa, &gu, f, &mut m);
            let mut dgu = gu.clone();
            swiglu_backward(isa, &mut dgu, f, &dm);
            let mut lg = logits.clone();
            let loss = cross_entropy(isa, &mut lg, v, &targets, None);
            let exps = lg;
            let mut lg = logits.clone();
            let loss_g = cross_entropy(isa, &mut lg, v, &targets, Some(0.01));
            let mut rot = vec![0f32; rows * d];
            isa.vectorised(|| rope.rotate_rows(rows, &x, d, &mut rot, d, false));
            let mut sm = x.clone();
            let total = isa.vectorised(|| math::exp_in_place(&mut sm, 0.7, 0.3));
            let mut out = [y, r, dx, dg, m, dgu, exps, lg, rot, sm].concat();
            out.extend([loss as f32, loss_g as f32, total]);
            bits(&out)
        };
        // Every SIMD set this CPU has (the AVX-512 set runs SwiGLU and the
        // cross-entropy 16 lanes wide, the others 8; none on a CPU without).
        let want = run(Isa::Portable);
        for simd in Isa::ALL
            .into_iter()
            .filter(|i| *i != Isa::Portable && i.available())
        {
            assert!(
                run(simd) == want,
                "{}: the vectorised row-wise passes changed a result",
                simd.name()
            );
        }
    }

    /// Every plan the planner may choose (block of queries, and the AVX2
    /// kernels under an AVX-512 set where they are an alternative) gives
    /// bitwise the hand-chosen plan's attention, forward (output and
    /// probabilities) and backward, with every kernel set, for sequences a
    /// multiple of the largest block long and not (the last block short;
    /// 40 keys leave 8 columns that AVX2 would take into a vector and
    /// AVX-512 to its scalar tail: no AVX2 alternative there).
    #[test]
    fn every_attention_plan_gives_the_same_bits() {
        let (b, h, dh) = (3, 2, 32);
        for isa in Isa::ALL.into_iter().filter(|i| i.available()) {
            for t in [128, 100, 40] {
                let rope = Rope::new(dh, t, 10_000.0);
                let shape = planner::AttentionShape { t, heads: h, dh };
                let mut probe = AttentionProbe::new(b, t, h, dh);
                let mut run = |plan| {
                    probe.run(isa, &rope, plan);
                    [&probe.out[..], &probe.probs, &probe.dqkv]
                        .map(bits)
                        .concat()
                };
                let want = run(planner::AttentionPlan::DEFAULT);
                let plans = planner::attention_candidates(isa, shape);
                let narrow = plans.iter().filter(|p| p.narrow).count();
                let wide = Isa::Avx512.available() && isa == Isa::Avx512;
                assert_eq!(narrow > 0, wide && t != 40, "{} T {t}", isa.name());
                assert!(plans.len() >= 2, "T {t}: {plans:?}");
                for plan in plans {
                    assert!(run(plan) == want, "{} T {t}: {plan:?}", isa.name());
                }
            }
        }
    }

    /// A task per (sequence, head) gives bitwise what a task per sequence
    /// gives (output, probabilities, rotated q and k, and the gradient),
    /// with every kernel set, on 1 to 3 threads, for 1 and 3 sequences and
    /// a last block of queries short; and the pairs are taken where a task
    /// per sequence would leave threads idle (16 sequences on 32 threads,
    /// 1 or 3 on 2), not where sequences fill every round (16 on 2).
    #[test]
    fn attention_by_heads_is_bitwise_attention_by_sequences() {
        let (h, dh) = (3, 16);
        let a = Attention::new(Isa::Portable, 40, 4, 32, 16);
        let on = |threads: usize, b: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(|| a.splits_heads(b))
        };
        assert!(!on(2, 16) && !on(2, 4) && !on(1, 3));
        assert!(on(32, 16) && on(2, 1) && on(2, 3));
        for isa in Isa::ALL.into_iter().filter(|i| i.available()) {
            for (b, t) in [(1, 40), (3, 40), (3, 64)] {
                let rope = Rope::new(dh, t, 10_000.0);
                let mut probe = AttentionProbe::new(b, t, h, dh);
                let (n_out, n_dqkv) = (probe.out.len(), probe.dqkv.len());
                for threads in 1..=3 {
                    let pool = rayon::ThreadPoolBuilder::new()
                        .num_threads(threads)
                        .build()
                        .unwrap();
                    let mut run = |split| {
                        // Anything left unwritten shows as NaN.
                        for v in [
                            &mut probe.out,
                            &mut probe.probs,
                            &mut probe.qk,
                            &mut probe.dqkv,
                        ] {
                            v.fill(f32::NAN);
                        }
                        pool.install(|| {
                            probe.run_split(
                                isa,
                                &rope,
                                planner::AttentionPlan::DEFAULT,
                                Some(split),
                            )
                        });
                        [&probe.out[..], &probe.probs, &probe.qk, &probe.dqkv]
                            .map(bits)
                            .concat()
                    };
                    let want = run(false);
                    // Nothing unwritten was read: the output and the
                    // gradient are numbers (the probabilities right of a
                    // block's last key are never written, and stay NaN).
                    let finite = |v: &[u32]| v.iter().all(|&x| f32::from_bits(x).is_finite());
                    assert!(
                        finite(&want[..n_out]) && finite(&want[want.len() - n_dqkv..]),
                        "{} b {b} T {t} on {threads} threads: unwritten values read",
                        isa.name()
                    );
                    let got = run(true);
                    assert!(
                        got == want,
                        "{} b {b} T {t} on {threads} threads",
                        isa.name()
                    );
                }
            }
        }
    }

    /// The head and the loss in blocks of [`HEAD_ROWS`] rows (the last one
    /// short) give bitwise what whole products give: the loss, the
    /// embedding's gradient from the head (its sums continued block to
    /// block) and `dhf`, in f32 and in bf16 (whose weight gradient is
    /// rounded once, after the last block).
    #[test]
    fn the_head_in_blocks_is_bitwise_the_whole_products() {
        let isa = Isa::detect();
        let (v, d, t) = (53, 16, 25);
        let rows = 170 * t;
        assert!(rows > 2 * HEAD_ROWS && !rows.is_multiple_of(HEAD_ROWS));
        let mut rng = Rng::new(11);
        let params = rng.normal_vec(v * d + d, 1.0);
        let hf = rng.normal_vec(rows * d, 1.0);
        let targets: Vec<u32> = (0..rows).map(|i| (i * 17 % v) as u32).collect();
        for bf16 in [false, true] {
            let spec = LlmSpec {
                vocab: v,
                seq_len: t,
                d,
                heads: 2,
                ffn: 8,
                norm_eps: 1e-5,
                rope: Rope::new(d / 2, t, 10_000.0),
                bf16,
                embed: 0,
                layers: Vec::new(),
                final_norm: v * d,
            };
            let mut llm = Llm::new(spec, isa);
            llm.hf = hf.clone();
            let mut grads = vec![0f32; params.len()];
            let total = llm.head(&params, &targets, Some(&mut grads));
            // Whole products, each operand and result rounded in bf16 mode.
            let round = |x: &[f32]| -> Vec<f32> {
                x.iter()
                    .map(|&x| if bf16 { math::round_bf16(x) } else { x })
                    .collect()
            };
            let product = |m, n, k, a: &[f32], al, b: &[f32], bl| {
                let mut c = vec![0f32; m * n];
                dense::matmul(
                    isa,
                    dense::Threads::All,
                    m,
                    n,
                    k,
                    a,
                    al,
                    b,
                    bl,
                    &mut c,
                    false,
                );
                round(&c)
            };
            let (nl, tl) = (Layout::Normal, Layout::Transposed);
            let (e, h) = (round(&params[..v * d]), round(&hf));
            let mut logits = product(rows, v, d, &h, nl, &e, tl);
            let scale = Some(1.0 / rows as f32);
            let whole = cross_entropy(isa, &mut logits, v, &targets, scale);
            let dl = round(&logits);
            let de = product(v, d, rows, &dl, tl, &h, nl);
            let dh = product(rows, d, v, &dl, nl, &e, nl);
            assert_eq!(total.to_bits(), whole.to_bits(), "bf16 {bf16}: loss");
            assert!(bits(&grads[..v * d]) == bits(&de), "bf16 {bf16}: dE");
            assert!(bits(&llm.dh) == bits(&dh), "bf16 {bf16}: dhf");
            let mut loss_only = Llm::new(llm.spec.clone(), isa);
            loss_only.hf = hf.clone();
            let eval = loss_only.head(&params, &targets, None);
            assert_eq!(
                eval.to_bits(),
                whole.to_bits(),
                "bf16 {bf16}: evaluation loss"
            );
        }
    }
}
