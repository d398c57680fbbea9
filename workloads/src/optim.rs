//! Parameters as one flat f32 vector, and the optimizers that update it.
//!
//! Every trainer keeps its parameters in a [`ParamStore`]: a host-side copy
//! laid out in a fixed order (the order parameters were registered), plus,
//! with the graph engine built in, a candle `Var` per parameter that the
//! graph's modules use. Gradients are exported in the same order, so the
//! harness can all-reduce one flat buffer, and the optimizers below update
//! the host copy in place; the `Var`s are rewritten from it only when the
//! candle graph is about to run (`ParamStore::sync_vars`).

#[cfg(feature = "graph")]
use candle_core::{Tensor, Var, backprop::GradStore};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::{Device, Result, err};

/// One registered parameter.
#[derive(Debug)]
pub struct Param {
    pub name: String,
    /// Its dimensions.
    pub shape: Vec<usize>,
    pub offset: usize,
    pub len: usize,
    /// Whether weight decay applies (matrices and conv kernels: yes; norm gains/biases: no).
    pub decay: bool,
    /// The graph's copy, on the store's device.
    #[cfg(feature = "graph")]
    pub var: Var,
}

/// All parameters of a model in a fixed order.
#[derive(Debug)]
pub struct ParamStore {
    params: Vec<Param>,
    host: Vec<f32>,
    #[cfg(feature = "graph")]
    device: candle_core::Device,
    /// The host copy changed since the `Var`s were last written.
    #[cfg(feature = "graph")]
    vars_stale: bool,
}

impl ParamStore {
    #[cfg_attr(not(feature = "graph"), allow(unused_variables))]
    pub fn new(device: &Device) -> Self {
        Self {
            params: Vec::new(),
            host: Vec::new(),
            #[cfg(feature = "graph")]
            device: device.candle(),
            #[cfg(feature = "graph")]
            vars_stale: false,
        }
    }

    /// Registers a parameter of dimensions `shape` with its initial value;
    /// returns its offset in the flat vectors.
    pub fn add(
        &mut self,
        name: &str,
        shape: &[usize],
        init: Vec<f32>,
        decay: bool,
    ) -> Result<usize> {
        if shape.iter().product::<usize>() != init.len() {
            return Err(err(format!(
                "param {name}: {} values for shape {shape:?}",
                init.len()
            )));
        }
        let offset = self.host.len();
        self.params.push(Param {
            name: name.to_string(),
            shape: shape.to_vec(),
            offset,
            len: init.len(),
            decay,
            #[cfg(feature = "graph")]
            var: Var::from_tensor(&Tensor::from_slice(&init, shape, &self.device)?)?,
        });
        self.host.extend_from_slice(&init);
        Ok(offset)
    }

    pub fn params(&self) -> &[Param] {
        &self.params
    }
    pub fn len(&self) -> usize {
        self.host.len()
    }
    pub fn is_empty(&self) -> bool {
        self.host.is_empty()
    }
    /// Host copy of all parameters (flat, registration order).
    pub fn flat(&self) -> &[f32] {
        &self.host
    }

    /// The graph's tensor of the parameter registered at `offset`.
    #[cfg(feature = "graph")]
    pub fn tensor(&self, offset: usize) -> Result<Tensor> {
        let i = self.params.partition_point(|p| p.offset < offset);
        match self.params.get(i) {
            Some(p) if p.offset == offset => Ok(p.var.as_tensor().clone()),
            _ => Err(err(format!("no parameter starts at offset {offset}"))),
        }
    }

    /// Flattens the gradients in registration order (zeros for parameters without a gradient).
    #[cfg(feature = "graph")]
    pub fn flat_grads(&self, grads: &GradStore) -> Result<Vec<f32>> {
        let mut out = vec![0f32; self.host.len()];
        for p in &self.params {
            if let Some(g) = grads.get(p.var.as_tensor()) {
                let v = g.flatten_all()?.to_vec1::<f32>()?;
                out[p.offset..p.offset + p.len].copy_from_slice(&v);
            }
        }
        Ok(out)
    }

    /// Per-element weight-decay mask ranges: (offset, len, decay).
    fn decay_ranges(&self) -> Vec<(usize, usize, bool)> {
        self.params
            .iter()
            .map(|p| (p.offset, p.len, p.decay))
            .collect()
    }

    /// Writes the host copy into the `Var`s if it changed since the last
    /// time. Call before running the candle graph (the CPU engine reads the
    /// host copy and never needs it).
    #[cfg(feature = "graph")]
    pub fn sync_vars(&mut self) -> Result<()> {
        if !self.vars_stale {
            return Ok(());
        }
        for p in &self.params {
            let t = Tensor::from_slice(
                &self.host[p.offset..p.offset + p.len],
                p.shape.as_slice(),
                &self.device,
            )?;
            p.var.set(&t)?;
        }
        self.vars_stale = false;
        Ok(())
    }

    /// Applies `f(params, state_a, state_b, grads, decay)` parameter by parameter (in
    /// parallel) to the host copy and two optimizer-state vectors laid out like it
    /// (pass empty vectors for unused state); the `Var`s follow at the next
    /// [`ParamStore::sync_vars`].
    fn update(
        &mut self,
        grads: &[f32],
        sa: &mut [f32],
        sb: &mut [f32],
        f: impl Fn(&mut [f32], &mut [f32], &mut [f32], &[f32], bool) + Sync,
    ) -> Result<()> {
        let ranges = self.decay_ranges();
        let parts = split_ranges(&mut self.host, &ranges)
            .into_iter()
            .zip(split_ranges(sa, &ranges))
            .zip(split_ranges(sb, &ranges))
            .zip(ranges.iter())
            .collect::<Vec<_>>();
        parts
            .into_par_iter()
            .for_each(|(((p, a), b), &(off, len, decay))| {
                f(p, a, b, &grads[off..off + len], decay)
            });
        #[cfg(feature = "graph")]
        {
            self.vars_stale = true;
        }
        Ok(())
    }

    /// Overwrites all parameters from a flat vector (e.g. a checkpoint).
    pub fn load_flat(&mut self, flat: &[f32]) -> Result<()> {
        if flat.len() != self.host.len() {
            return Err(err(format!(
                "load_flat: {} values for {} parameters",
                flat.len(),
                self.host.len()
            )));
        }
        self.update(flat, &mut [], &mut [], |p, _, _, g, _| p.copy_from_slice(g))
    }
}

/// Scales `grads` in place so that their global L2 norm is at most `max_norm`
/// (torch `clip_grad_norm_` semantics: factor `max_norm / (norm + 1e-6)` when
/// `norm > max_norm`). Returns the norm before clipping.
///
/// The norm is the same bits on any number of threads and from run to run:
/// each block of [`BLOCK`] values is summed in a fixed order and the blocks'
/// sums are added in order. (A parallel iterator's `sum` adds its pieces as
/// the threads happen to split them: on 2 threads, 7 different last bits in
/// 2,000 sums of one 1.1-million-value gradient.)
pub fn clip_grad_norm(grads: &mut [f32], max_norm: f64) -> f64 {
    let blocks: Vec<f64> = grads.par_chunks(BLOCK).map(sum_of_squares).collect();
    let norm = blocks.iter().sum::<f64>().sqrt();
    if norm > max_norm {
        let f = (max_norm / (norm + 1e-6)) as f32;
        grads
            .par_chunks_mut(BLOCK)
            .for_each(|c| c.iter_mut().for_each(|g| *g *= f));
    }
    norm
}

/// Values per parallel task of the passes over a whole gradient.
const BLOCK: usize = 1 << 14;

/// `Σ v²` in f64 (exact squares), in four interleaved partial sums so that
/// the loop vectorises; the order is fixed by `v` alone.
fn sum_of_squares(v: &[f32]) -> f64 {
    let sq = |g: f32| f64::from(g) * f64::from(g);
    let mut acc = [0f64; 4];
    let chunks = v.chunks_exact(4);
    let tail: f64 = chunks.remainder().iter().map(|&g| sq(g)).sum();
    for c in chunks {
        for i in 0..4 {
            acc[i] += sq(c[i]);
        }
    }
    acc.iter().sum::<f64>() + tail
}

/// Whether every value is finite (no NaN, no ±∞), in parallel blocks
/// scanned without early exits, so that they vectorise.
fn all_finite(v: &[f32]) -> bool {
    v.par_chunks(BLOCK).all(|c| {
        c.iter()
            .fold(0u32, |bad, g| bad | u32::from(!g.is_finite()))
            == 0
    })
}

/// SGD with momentum and L2 weight decay, torch.optim.SGD semantics
/// (`d = g + wd*p; buf = mu*buf + d` (buf = d at the first step); `p -= lr*buf`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SgdMomentum {
    pub momentum: f64,
    pub weight_decay: f64,
    buf: Vec<f32>,
    started: bool,
}

impl SgdMomentum {
    pub fn new(momentum: f64, weight_decay: f64, n: usize) -> Self {
        Self {
            momentum,
            weight_decay,
            buf: vec![0.0; n],
            started: false,
        }
    }

    pub fn step(&mut self, store: &mut ParamStore, grads: &[f32], lr: f64) -> Result<()> {
        check_len(store, grads)?;
        let (mu, wd, lr, first) = (
            self.momentum as f32,
            self.weight_decay as f32,
            lr as f32,
            !self.started,
        );
        store.update(grads, &mut self.buf, &mut [], |p, buf, _, g, decay| {
            for ((pv, b), &gv) in p.iter_mut().zip(buf.iter_mut()).zip(g) {
                let d = if decay { gv + wd * *pv } else { gv };
                *b = if first { d } else { mu * *b + d };
                *pv -= lr * *b;
            }
        })?;
        self.started = true;
        Ok(())
    }
}

/// AdamW (decoupled weight decay), torch.optim.AdamW semantics:
/// `p *= 1 - lr*wd` (decayed params only); `m = b1 m + (1-b1) g`; `v = b2 v + (1-b2) g^2`;
/// `p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AdamW {
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
    m: Vec<f32>,
    v: Vec<f32>,
    t: u64,
}

impl AdamW {
    pub fn new(beta1: f64, beta2: f64, eps: f64, weight_decay: f64, n: usize) -> Self {
        Self {
            beta1,
            beta2,
            eps,
            weight_decay,
            m: vec![0.0; n],
            v: vec![0.0; n],
            t: 0,
        }
    }

    pub fn step(&mut self, store: &mut ParamStore, grads: &[f32], lr: f64) -> Result<()> {
        check_len(store, grads)?;
        self.t += 1;
        let bc1 = 1.0 - self.beta1.powi(self.t as i32);
        let bc2 = 1.0 - self.beta2.powi(self.t as i32);
        let step_size = (lr / bc1) as f32;
        let bc2_sqrt = bc2.sqrt() as f32;
        let (b1, b2, eps) = (self.beta1 as f32, self.beta2 as f32, self.eps as f32);
        let decay_f = (1.0 - lr * self.weight_decay) as f32;
        store.update(grads, &mut self.m, &mut self.v, |p, m, v, g, decay| {
            for (((pv, m), v), &g) in p.iter_mut().zip(m.iter_mut()).zip(v.iter_mut()).zip(g) {
                if decay {
                    *pv *= decay_f;
                }
                *m = b1 * *m + (1.0 - b1) * g;
                *v = b2 * *v + (1.0 - b2) * g * g;
                *pv -= step_size * *m / (v.sqrt() / bc2_sqrt + eps);
            }
        })
    }
}

/// Splits `v` into the given consecutive ranges (all empty slices if `v` is empty).
fn split_ranges<'a>(v: &'a mut [f32], ranges: &[(usize, usize, bool)]) -> Vec<&'a mut [f32]> {
    let mut out = Vec::with_capacity(ranges.len());
    let mut rest = v;
    for &(_, len, _) in ranges {
        let take = len.min(rest.len());
        let (a, b) = std::mem::take(&mut rest).split_at_mut(take);
        out.push(a);
        rest = b;
    }
    out
}

fn check_len(store: &ParamStore, grads: &[f32]) -> Result<()> {
    if grads.len() != store.len() {
        return Err(err(format!(
            "got {} gradient values for {} parameters",
            grads.len(),
            store.len()
        )));
    }
    if !all_finite(grads) {
        return Err(err("non-finite gradient"));
    }
    Ok(())
}
