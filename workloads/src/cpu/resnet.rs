//! `mini_resnet` on the CPU engine: the architecture of
//! [`crate::resnet::MiniResnet`] (built from it, so it is declared once),
//! with every activation in a preallocated padded NHWC buffer and the
//! backward pass written out layer by layer.

use super::conv::{Conv, Image, par_images};
use super::kernels::Isa;
use super::norm::{self, BatchNorm, Residual};
use crate::{Result, err};
use rayon::prelude::*;

/// A convolution and the batch norm after it, with their buffers.
struct Unit {
    conv: Conv,
    /// Offset of the weights in the flat parameters.
    w: usize,
    bn: BatchNorm,
    /// Convolution output (pre-norm).
    z: Image,
    /// Gradient of `z` (border for the input-gradient convolution).
    dz: Image,
}

impl Unit {
    fn new(conv: Conv, w: usize, bn: BatchNorm) -> Self {
        Self {
            conv,
            w,
            bn,
            z: Image::default(),
            dz: Image::default(),
        }
    }

    fn ensure(&mut self, n: usize, side: usize) {
        let (o, c) = (self.conv.out_size(side), self.conv.cout);
        self.z.ensure(n, o, o, c, 0);
        self.dz.ensure(n, o, o, c, self.conv.grad_pad());
    }

    fn weights<'p>(&self, params: &'p [f32]) -> &'p [f32] {
        &params[self.w..self.w + self.conv.weight_len()]
    }

    /// `z = conv(x)`; returns the normalisation's affine map.
    fn forward(&mut self, isa: Isa, x: &Image, params: &[f32], train: bool) -> norm::Affine {
        self.conv
            .forward(isa, x, self.weights(params), &mut self.z, false);
        if train {
            self.bn.train(&self.z, params)
        } else {
            self.bn.eval(params)
        }
    }

    /// From the gradient of the normalised output (masked by `relu_out`)
    /// to `dz` and the gradients of γ, β and the weights.
    fn backward(
        &mut self,
        isa: Isa,
        x: &Image,
        dy: &Image,
        relu_out: Option<&Image>,
        params: &[f32],
        grads: &mut [f32],
    ) {
        self.bn
            .backward(&self.z, dy, relu_out, params, grads, &mut self.dz);
        let len = self.conv.weight_len();
        self.conv
            .grad_weight(isa, x, &self.dz, &mut grads[self.w..self.w + len]);
    }
}

/// A basic block: `relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x))`.
struct Block {
    c1: Unit,
    /// `relu(bn1(z1))`, the input of conv2.
    a1: Image,
    c2: Unit,
    shortcut: Option<Unit>,
    /// Gradient at the block output, masked by its ReLU.
    du: Image,
    /// Gradient of `a1`.
    da1: Image,
}

impl Block {
    fn ensure(&mut self, n: usize, side: usize) {
        self.c1.ensure(n, side);
        let o = self.c1.conv.out_size(side);
        self.a1.ensure(n, o, o, self.c1.conv.cout, 1);
        self.da1.ensure(n, o, o, self.c1.conv.cout, 0);
        self.c2.ensure(n, o);
        self.du.ensure(n, o, o, self.c2.conv.cout, 0);
        if let Some(s) = &mut self.shortcut {
            s.ensure(n, side);
        }
    }

    fn forward(&mut self, isa: Isa, x: &Image, out: &mut Image, params: &[f32], train: bool) {
        let a = self.c1.forward(isa, x, params, train);
        norm::apply(&self.c1.z, &a, Residual::None, true, &mut self.a1);
        let a2 = self.c2.forward(isa, &self.a1, params, train);
        match &mut self.shortcut {
            Some(s) => {
                let asc = s.forward(isa, x, params, train);
                norm::apply(&self.c2.z, &a2, Residual::Affine(&s.z, &asc), true, out);
            }
            None => norm::apply(&self.c2.z, &a2, Residual::Identity(x), true, out),
        }
    }

    /// `g`: gradient of the block output `out`; writes the gradient of `x` into `gx`.
    #[allow(clippy::too_many_arguments)]
    fn backward(
        &mut self,
        isa: Isa,
        x: &Image,
        out: &Image,
        g: &Image,
        gx: &mut Image,
        params: &[f32],
        grads: &mut [f32],
    ) {
        norm::relu_grad(g, out, &mut self.du);
        self.c2
            .backward(isa, &self.a1, &self.du, None, params, grads);
        self.c2.conv.grad_input(
            isa,
            &self.c2.dz,
            self.c2.weights(params),
            &mut self.da1,
            false,
        );
        self.c1
            .backward(isa, x, &self.da1, Some(&self.a1), params, grads);
        self.c1
            .conv
            .grad_input(isa, &self.c1.dz, self.c1.weights(params), gx, false);
        match &mut self.shortcut {
            Some(s) => {
                s.backward(isa, x, &self.du, None, params, grads);
                s.conv.grad_input(isa, &s.dz, s.weights(params), gx, true);
            }
            None => norm::add_into(&self.du, gx),
        }
    }
}

/// What the engine needs to know of one convolution + batch norm of the model.
pub struct UnitSpec {
    pub conv: Conv,
    pub w: usize,
    pub gamma: usize,
    pub beta: usize,
}

/// What the engine needs to know of the model.
pub struct ResnetSpec {
    pub image_size: usize,
    pub classes: usize,
    pub bn_eps: f32,
    pub bn_momentum: f32,
    pub stem: UnitSpec,
    /// (conv1, conv2, projection shortcut) per block.
    pub blocks: Vec<(UnitSpec, UnitSpec, Option<UnitSpec>)>,
    /// Offsets of the head's weights `[features, classes]` and bias.
    pub fc_w: usize,
    pub fc_b: usize,
    pub features: usize,
}

/// The engine: parameters and gradients live in the caller's flat vectors.
pub struct Resnet {
    isa: Isa,
    image_size: usize,
    classes: usize,
    features: usize,
    fc_w: usize,
    fc_b: usize,
    stem: Unit,
    blocks: Vec<Block>,
    /// The input images (one channel, zero border).
    input: Image,
    /// `outs[0]`: stem output; `outs[b + 1]`: output of block `b`.
    outs: Vec<Image>,
    /// Gradients of `outs` (border: scratch).
    grads: Vec<Image>,
    pooled: Vec<f32>,
    logits: Vec<f32>,
}

impl Resnet {
    pub fn new(spec: ResnetSpec, isa: Isa) -> Self {
        super::aligned::engage();
        let unit = |u: UnitSpec| {
            let bn = BatchNorm::new(u.conv.cout, u.gamma, u.beta, spec.bn_eps, spec.bn_momentum);
            Unit::new(u.conv, u.w, bn)
        };
        let nb = spec.blocks.len();
        let blocks = spec
            .blocks
            .into_iter()
            .map(|(c1, c2, sc)| Block {
                c1: unit(c1),
                a1: Image::default(),
                c2: unit(c2),
                shortcut: sc.map(unit),
                du: Image::default(),
                da1: Image::default(),
            })
            .collect();
        Self {
            isa,
            image_size: spec.image_size,
            classes: spec.classes,
            features: spec.features,
            fc_w: spec.fc_w,
            fc_b: spec.fc_b,
            stem: unit(spec.stem),
            blocks,
            input: Image::default(),
            outs: vec![Image::default(); nb + 1],
            grads: vec![Image::default(); nb + 1],
            pooled: Vec::new(),
            logits: Vec::new(),
        }
    }

    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// Sizes every buffer for a batch of `n` images.
    fn ensure(&mut self, n: usize) {
        let s = self.image_size;
        self.input.ensure(n, s, s, 1, 1);
        self.stem.ensure(n, s);
        let mut side = self.stem.conv.out_size(s);
        let mut c = self.stem.conv.cout;
        self.outs[0].ensure(n, side, side, c, 1);
        self.grads[0].ensure(n, side, side, c, 1);
        for (b, blk) in self.blocks.iter_mut().enumerate() {
            blk.ensure(n, side);
            side = blk.c1.conv.out_size(side);
            c = blk.c2.conv.cout;
            self.outs[b + 1].ensure(n, side, side, c, 1);
            self.grads[b + 1].ensure(n, side, side, c, 1);
        }
        self.pooled.resize(n * self.features, 0.0);
        self.logits.resize(n * self.classes, 0.0);
    }

    /// Logits `[n, classes]` of `pixels` (`n` images of side² values).
    /// Training mode uses batch statistics and updates the running ones.
    pub fn forward(&mut self, params: &[f32], pixels: &[f32], train: bool) -> Result<&[f32]> {
        let s = self.image_size;
        if pixels.is_empty() || !pixels.len().is_multiple_of(s * s) {
            return Err(err(format!(
                "resnet: {} pixel values are not whole {s}x{s} images",
                pixels.len()
            )));
        }
        let n = pixels.len() / (s * s);
        self.ensure(n);
        let isa = self.isa;
        par_images(&mut self.input, |i, img| {
            for y in 0..s {
                let d = (y + 1) * (s + 2) + 1;
                img[d..d + s].copy_from_slice(&pixels[(i * s + y) * s..(i * s + y + 1) * s]);
            }
        });
        let a = self.stem.forward(isa, &self.input, params, train);
        norm::apply(&self.stem.z, &a, Residual::None, true, &mut self.outs[0]);
        for (b, blk) in self.blocks.iter_mut().enumerate() {
            let (done, rest) = self.outs.split_at_mut(b + 1);
            blk.forward(isa, &done[b], &mut rest[0], params, train);
        }
        // Head: global average pool, linear.
        let last = self.outs.last().expect("at least the stem");
        let (f, k) = (self.features, self.classes);
        let inv = 1.0 / (last.h * last.w) as f32;
        self.pooled
            .par_chunks_mut(f)
            .enumerate()
            .for_each(|(i, p)| {
                p.fill(0.0);
                for y in 0..last.h {
                    for px in last.row(i, y).chunks_exact(f) {
                        p.iter_mut().zip(px).for_each(|(a, v)| *a += v);
                    }
                }
                p.iter_mut().for_each(|a| *a *= inv);
            });
        let (w, bias) = (
            &params[self.fc_w..self.fc_w + f * k],
            &params[self.fc_b..self.fc_b + k],
        );
        for (l, p) in self
            .logits
            .chunks_exact_mut(k)
            .zip(self.pooled.chunks_exact(f))
        {
            l.copy_from_slice(bias);
            for (pv, wr) in p.iter().zip(w.chunks_exact(k)) {
                l.iter_mut().zip(wr).for_each(|(a, b)| *a += pv * b);
            }
        }
        Ok(&self.logits)
    }

    /// Forward and backward on a training batch: the mean cross-entropy,
    /// with its gradient written into `grads` (the flat layout of `params`;
    /// every parameter's entries are overwritten).
    pub fn gradients(
        &mut self,
        params: &[f32],
        pixels: &[f32],
        labels: &[u32],
        grads: &mut [f32],
    ) -> Result<f32> {
        if grads.len() != params.len() {
            return Err(err(
                "resnet: gradient and parameter vectors differ in length",
            ));
        }
        self.forward(params, pixels, true)?;
        let (n, k, f) = (labels.len(), self.classes, self.features);
        if n * k != self.logits.len() {
            return Err(err(format!(
                "resnet: {n} labels for {} images",
                self.logits.len() / k
            )));
        }
        // Cross-entropy and its gradient (softmax − one-hot) / n.
        let mut dl = vec![0f32; n * k];
        let mut loss = 0f64;
        for ((d, l), &y) in dl
            .chunks_exact_mut(k)
            .zip(self.logits.chunks_exact(k))
            .zip(labels)
        {
            let y = y as usize;
            if y >= k {
                return Err(err(format!("resnet: label {y} out of range")));
            }
            let mx = l.iter().fold(f32::NEG_INFINITY, |a, &v| a.max(v));
            let sum: f32 = l.iter().map(|v| (v - mx).exp()).sum();
            let lse = mx + sum.ln();
            loss += f64::from(lse - l[y]);
            for (dv, lv) in d.iter_mut().zip(l) {
                *dv = (lv - lse).exp() / n as f32;
            }
            d[y] -= 1.0 / n as f32;
        }
        // Head backward.
        let w = &params[self.fc_w..self.fc_w + f * k];
        let gw = &mut grads[self.fc_w..self.fc_w + f * k];
        gw.fill(0.0);
        for (p, d) in self.pooled.chunks_exact(f).zip(dl.chunks_exact(k)) {
            for (pv, gr) in p.iter().zip(gw.chunks_exact_mut(k)) {
                gr.iter_mut().zip(d).for_each(|(g, dv)| *g += pv * dv);
            }
        }
        let gb = &mut grads[self.fc_b..self.fc_b + k];
        gb.fill(0.0);
        for d in dl.chunks_exact(k) {
            gb.iter_mut().zip(d).for_each(|(g, dv)| *g += dv);
        }
        let last = self.grads.last_mut().expect("at least the stem");
        let inv = 1.0 / (last.h * last.w) as f32;
        let (h, len) = (last.h, last.row_len());
        let local: Vec<usize> = (0..h).map(|y| last.local(y, 0)).collect();
        par_images(last, |i, img| {
            let dp: Vec<f32> = (0..f)
                .map(|c| {
                    let d = &dl[i * k..(i + 1) * k];
                    w[c * k..(c + 1) * k]
                        .iter()
                        .zip(d)
                        .map(|(a, b)| a * b)
                        .sum::<f32>()
                        * inv
                })
                .collect();
            for &s in &local {
                for px in img[s..s + len].chunks_exact_mut(f) {
                    px.copy_from_slice(&dp);
                }
            }
        });
        // Blocks, last to first.
        let isa = self.isa;
        for b in (0..self.blocks.len()).rev() {
            let (gl, gr) = self.grads.split_at_mut(b + 1);
            self.blocks[b].backward(
                isa,
                &self.outs[b],
                &self.outs[b + 1],
                &gr[0],
                &mut gl[b],
                params,
                grads,
            );
        }
        self.stem.backward(
            isa,
            &self.input,
            &self.grads[0],
            Some(&self.outs[0]),
            params,
            grads,
        );
        Ok((loss / n as f64) as f32)
    }

    /// Running statistics of every batch norm, in model order (for tests).
    pub fn running_stats(&self) -> Vec<(&[f32], &[f32])> {
        let mut v = vec![(
            &self.stem.bn.running_mean[..],
            &self.stem.bn.running_var[..],
        )];
        for b in &self.blocks {
            for u in [Some(&b.c1), Some(&b.c2), b.shortcut.as_ref()]
                .into_iter()
                .flatten()
            {
                v.push((&u.bn.running_mean[..], &u.bn.running_var[..]));
            }
        }
        v
    }
}
