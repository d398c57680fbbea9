//! `mini_resnet`: a small ResNet on 1×28×28 Fashion-MNIST images.
//!
//! Architecture (NHWC internally; the input `[B, 1, 28, 28]` NCHW slice has the
//! same memory layout as NHWC because C = 1):
//!
//! ```text
//! stem:   conv3x3(1 -> w0) + BN + ReLU                    28x28
//! stage1: `blocks[0]` basic blocks, width w0, stride 1     28x28
//! stage2: `blocks[1]` basic blocks, width 2*w0, first stride 2  14x14
//! stage3: `blocks[2]` basic blocks, width 4*w0, first stride 2   7x7
//! head:   global average pool -> linear(4*w0 -> classes)
//! basic block: relu(BN(conv3x3(relu(BN(conv3x3_s(x))))) + shortcut(x)),
//!              shortcut = identity, or conv1x1_s + BN when the shape changes.
//! ```
//!
//! BatchNorm uses batch statistics in training (per rank, like MLPerf's local
//! BN) and running statistics (momentum 0.1, unbiased variance) in evaluation.
//! Optionally (`zero_init_residual`, off by default) the last BN of every block
//! starts with gain 0.
//!
//! Optimiser: SGD with momentum 0.9 and L2 weight decay on conv/linear weights
//! (not on BN gains/biases or the head bias), torch.optim.SGD semantics; LR:
//! linear warm-up then cosine or polynomial decay, counted in optimizer steps.

#[cfg(feature = "graph")]
use candle_core::Tensor;
use serde::{Deserialize, Serialize};

use crate::cpu;
#[cfg(feature = "graph")]
use crate::ops::{self, BnStats};
use crate::optim::{ParamStore, SgdMomentum};
use crate::rng::Rng;
use crate::schedule::{DecayKind, LrSchedule};
use crate::{Device, Engine, Result, StepOutput, err};

/// Hyperparameters of `mini_resnet`. "fixed" = part of the benchmark definition
/// (a Closed submission may not change it); "tunable" = a submitter may change it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ResnetHparams {
    /// (fixed) image side (square, 1 channel).
    pub image_size: usize,
    /// (fixed) number of classes.
    pub num_classes: usize,
    /// (fixed) width of the stem and stage 1; stages 2 and 3 use 2x and 4x.
    pub base_width: usize,
    /// (fixed) basic blocks per stage.
    pub blocks: [usize; 3],
    /// (fixed) start the last BN gain of every residual block at 0 instead of 1.
    pub zero_init_residual: bool,
    /// (fixed) BatchNorm epsilon.
    pub bn_eps: f64,
    /// (fixed) BatchNorm running-average momentum (torch convention).
    pub bn_momentum: f64,
    /// (tunable) global batch size (samples per optimizer step, all ranks together).
    pub batch_size: usize,
    /// (tunable) peak learning rate.
    pub base_lr: f64,
    /// (tunable) learning rate at the end of the decay.
    pub end_lr: f64,
    /// (tunable) linear warm-up length in optimizer steps.
    pub warmup_steps: u64,
    /// (tunable) schedule length (warm-up + decay) in optimizer steps.
    pub total_steps: u64,
    /// (tunable) decay shape after warm-up.
    pub decay: DecayKind,
    /// (tunable) SGD momentum.
    pub momentum: f64,
    /// (tunable) L2 weight decay on conv and linear weights.
    pub weight_decay: f64,
}

impl Default for ResnetHparams {
    fn default() -> Self {
        Self {
            image_size: 28,
            num_classes: 10,
            base_width: 16,
            blocks: [1, 1, 1],
            zero_init_residual: false,
            bn_eps: 1e-5,
            bn_momentum: 0.1,
            batch_size: 128,
            base_lr: 0.1,
            end_lr: 0.0,
            warmup_steps: 46,
            total_steps: 480,
            decay: DecayKind::Cosine,
            momentum: 0.9,
            weight_decay: 5e-4,
        }
    }
}

impl ResnetHparams {
    pub fn schedule(&self) -> LrSchedule {
        LrSchedule {
            base_lr: self.base_lr,
            end_lr: self.end_lr,
            warmup_steps: self.warmup_steps,
            total_steps: self.total_steps,
            decay: self.decay,
        }
    }

    fn validate(&self) -> Result<()> {
        if !self.image_size.is_multiple_of(4) || self.image_size == 0 {
            return Err(err("resnet: image_size must be a positive multiple of 4"));
        }
        if self.base_width == 0 || self.blocks.contains(&0) || self.num_classes < 2 {
            return Err(err(
                "resnet: base_width, blocks and num_classes must be positive",
            ));
        }
        Ok(())
    }
}

/// Convolution without bias; weight HWIO `[k*k*cin, cout]`.
struct Conv {
    /// Offset of the weight in the flat parameters.
    w_off: usize,
    k: usize,
    stride: usize,
    pad: usize,
    cin: usize,
    cout: usize,
}

impl Conv {
    fn new(
        ps: &mut ParamStore,
        seed: u64,
        name: &str,
        cin: usize,
        cout: usize,
        k: usize,
        stride: usize,
    ) -> Result<Self> {
        // Kaiming normal, fan_out mode (torchvision ResNet).
        let std = (2.0 / (k * k * cout) as f64).sqrt();
        let init = Rng::derive(seed, name).normal_vec(k * k * cin * cout, std);
        let w_off = ps.add(name, &[k * k * cin, cout], init, true)?;
        Ok(Self {
            w_off,
            k,
            stride,
            pad: k / 2,
            cin,
            cout,
        })
    }
    #[cfg(feature = "graph")]
    fn forward(&self, ps: &ParamStore, x: &Tensor) -> Result<Tensor> {
        let w = ps.tensor(self.w_off)?;
        Ok(ops::conv2d_nhwc(x, &w, self.k, self.stride, self.pad)?)
    }
    fn geometry(&self) -> cpu::conv::Conv {
        cpu::conv::Conv {
            k: self.k,
            stride: self.stride,
            pad: self.pad,
            cin: self.cin,
            cout: self.cout,
        }
    }
    /// Multiply-accumulates per sample for an input of side `hw`.
    fn macs(&self, hw: usize) -> usize {
        let o = (hw + 2 * self.pad - self.k) / self.stride + 1;
        o * o * self.k * self.k * self.cin * self.cout
    }
}

struct BatchNorm {
    /// Offsets of γ and β in the flat parameters.
    gamma_off: usize,
    beta_off: usize,
    /// The graph's running statistics and constants (the CPU engine keeps its own).
    #[cfg(feature = "graph")]
    graph: BnGraph,
}

#[cfg(feature = "graph")]
struct BnGraph {
    running_mean: Vec<f32>,
    running_var: Vec<f32>,
    eps: f64,
    momentum: f64,
}

impl BatchNorm {
    #[cfg_attr(not(feature = "graph"), allow(unused_variables))]
    fn new(
        ps: &mut ParamStore,
        name: &str,
        c: usize,
        hp: &ResnetHparams,
        zero_gamma: bool,
    ) -> Result<Self> {
        let g = if zero_gamma { 0.0 } else { 1.0 };
        let gamma_off = ps.add(&format!("{name}.gamma"), &[c], vec![g; c], false)?;
        let beta_off = ps.add(&format!("{name}.beta"), &[c], vec![0.0; c], false)?;
        Ok(Self {
            gamma_off,
            beta_off,
            #[cfg(feature = "graph")]
            graph: BnGraph {
                running_mean: vec![0.0; c],
                running_var: vec![1.0; c],
                eps: hp.bn_eps,
                momentum: hp.bn_momentum,
            },
        })
    }

    /// `x: [N, H, W, C]`.
    #[cfg(feature = "graph")]
    fn forward(&mut self, ps: &ParamStore, x: &Tensor, train: bool, relu: bool) -> Result<Tensor> {
        let dims = x.dims().to_vec();
        let c = dims[3];
        let x2 = x.reshape((dims[0] * dims[1] * dims[2], c))?;
        let (gamma, beta) = (ps.tensor(self.gamma_off)?, ps.tensor(self.beta_off)?);
        let y = if train {
            let (y, st) = ops::batch_norm_train(&x2, &gamma, &beta, self.graph.eps as f32, relu)?;
            self.update_running(&st);
            y
        } else {
            let dev = x.device();
            let g = gamma.detach().to_vec1::<f32>()?;
            let b = beta.detach().to_vec1::<f32>()?;
            let scale: Vec<f32> = (0..c)
                .map(|j| g[j] / (self.graph.running_var[j] + self.graph.eps as f32).sqrt())
                .collect();
            let shift: Vec<f32> = (0..c)
                .map(|j| b[j] - self.graph.running_mean[j] * scale[j])
                .collect();
            let scale = Tensor::from_vec(scale, (1, c), dev)?;
            let shift = Tensor::from_vec(shift, (1, c), dev)?;
            let y = x2.broadcast_mul(&scale)?.broadcast_add(&shift)?;
            if relu { ops::relu(&y)? } else { y }
        };
        Ok(y.reshape(dims)?)
    }

    #[cfg(feature = "graph")]
    fn update_running(&mut self, st: &BnStats) {
        crate::cpu::norm::fold_running_stats(
            &mut self.graph.running_mean,
            &mut self.graph.running_var,
            &st.mean,
            &st.var,
            st.count,
            self.graph.momentum as f32,
        );
    }
}

struct BasicBlock {
    conv1: Conv,
    bn1: BatchNorm,
    conv2: Conv,
    bn2: BatchNorm,
    shortcut: Option<(Conv, BatchNorm)>,
}

impl BasicBlock {
    fn new(
        ps: &mut ParamStore,
        seed: u64,
        name: &str,
        cin: usize,
        cout: usize,
        stride: usize,
        hp: &ResnetHparams,
    ) -> Result<Self> {
        let conv1 = Conv::new(ps, seed, &format!("{name}.conv1"), cin, cout, 3, stride)?;
        let bn1 = BatchNorm::new(ps, &format!("{name}.bn1"), cout, hp, false)?;
        let conv2 = Conv::new(ps, seed, &format!("{name}.conv2"), cout, cout, 3, 1)?;
        let bn2 = BatchNorm::new(ps, &format!("{name}.bn2"), cout, hp, hp.zero_init_residual)?;
        let shortcut = if stride != 1 || cin != cout {
            let c = Conv::new(ps, seed, &format!("{name}.down.conv"), cin, cout, 1, stride)?;
            let b = BatchNorm::new(ps, &format!("{name}.down.bn"), cout, hp, false)?;
            Some((c, b))
        } else {
            None
        };
        Ok(Self {
            conv1,
            bn1,
            conv2,
            bn2,
            shortcut,
        })
    }

    #[cfg(feature = "graph")]
    fn forward(&mut self, ps: &ParamStore, x: &Tensor, train: bool) -> Result<Tensor> {
        let y = self
            .bn1
            .forward(ps, &self.conv1.forward(ps, x)?, train, true)?;
        let y = self
            .bn2
            .forward(ps, &self.conv2.forward(ps, &y)?, train, false)?;
        let sc = match &mut self.shortcut {
            Some((c, b)) => b.forward(ps, &c.forward(ps, x)?, train, false)?,
            None => x.clone(),
        };
        Ok(ops::add_relu(&y, &sc)?)
    }

    fn macs(&self, hw: usize) -> usize {
        let o = hw / self.conv1.stride;
        self.conv1.macs(hw)
            + self.conv2.macs(o)
            + self.shortcut.as_ref().map_or(0, |(c, _)| c.macs(hw))
    }
}

/// The model: stem, three stages of basic blocks, global average pool, linear head.
pub struct MiniResnet {
    stem: Conv,
    stem_bn: BatchNorm,
    blocks: Vec<BasicBlock>,
    /// Width of the last stage (the head's inputs).
    features: usize,
    fc_w_off: usize,
    fc_b_off: usize,
    image_size: usize,
    num_classes: usize,
    bn_eps: f64,
    bn_momentum: f64,
}

impl MiniResnet {
    pub fn new(ps: &mut ParamStore, hp: &ResnetHparams, seed: u64) -> Result<Self> {
        hp.validate()?;
        let w0 = hp.base_width;
        let stem = Conv::new(ps, seed, "stem.conv", 1, w0, 3, 1)?;
        let stem_bn = BatchNorm::new(ps, "stem.bn", w0, hp, false)?;
        let mut blocks = Vec::new();
        let mut cin = w0;
        for (s, &nb) in hp.blocks.iter().enumerate() {
            let cout = w0 << s;
            for i in 0..nb {
                let stride = if s > 0 && i == 0 { 2 } else { 1 };
                blocks.push(BasicBlock::new(
                    ps,
                    seed,
                    &format!("stage{}.block{i}", s + 1),
                    cin,
                    cout,
                    stride,
                    hp,
                )?);
                cin = cout;
            }
        }
        let bound = 1.0 / (cin as f64).sqrt();
        let fc_w_off = ps.add(
            "fc.w",
            &[cin, hp.num_classes],
            Rng::derive(seed, "fc.w").uniform_vec(cin * hp.num_classes, bound),
            true,
        )?;
        let fc_b_off = ps.add(
            "fc.b",
            &[hp.num_classes],
            Rng::derive(seed, "fc.b").uniform_vec(hp.num_classes, bound),
            false,
        )?;
        Ok(Self {
            stem,
            stem_bn,
            blocks,
            features: cin,
            fc_w_off,
            fc_b_off,
            image_size: hp.image_size,
            num_classes: hp.num_classes,
            bn_eps: hp.bn_eps,
            bn_momentum: hp.bn_momentum,
        })
    }

    /// The description the CPU engine is built from: geometry and parameter offsets.
    fn cpu_spec(&self) -> cpu::resnet::ResnetSpec {
        let unit = |c: &Conv, b: &BatchNorm| cpu::resnet::UnitSpec {
            conv: c.geometry(),
            w: c.w_off,
            gamma: b.gamma_off,
            beta: b.beta_off,
        };
        cpu::resnet::ResnetSpec {
            image_size: self.image_size,
            classes: self.num_classes,
            bn_eps: self.bn_eps as f32,
            bn_momentum: self.bn_momentum as f32,
            stem: unit(&self.stem, &self.stem_bn),
            blocks: self
                .blocks
                .iter()
                .map(|b| {
                    (
                        unit(&b.conv1, &b.bn1),
                        unit(&b.conv2, &b.bn2),
                        b.shortcut.as_ref().map(|(c, n)| unit(c, n)),
                    )
                })
                .collect(),
            fc_w: self.fc_w_off,
            fc_b: self.fc_b_off,
            features: self.features,
        }
    }

    /// `pixels`: `[B, 1, S, S]` normalised f32 (NCHW = NHWC for one channel). Returns logits `[B, classes]`.
    #[cfg(feature = "graph")]
    pub fn forward(&mut self, ps: &ParamStore, pixels: &Tensor, train: bool) -> Result<Tensor> {
        let b = pixels.dim(0)?;
        let s = self.image_size;
        let x = pixels.reshape((b, s, s, 1))?;
        let mut x = self
            .stem_bn
            .forward(ps, &self.stem.forward(ps, &x)?, train, true)?;
        for blk in &mut self.blocks {
            x = blk.forward(ps, &x, train)?;
        }
        let (n, h, w, c) = x.dims4()?;
        let pooled = x.reshape((n, h * w, c))?.mean(1)?;
        let (fc_w, fc_b) = (ps.tensor(self.fc_w_off)?, ps.tensor(self.fc_b_off)?);
        Ok(pooled.matmul(&fc_w)?.broadcast_add(&fc_b)?)
    }

    /// Forward multiply-accumulates per sample (convolutions + linear head).
    pub fn macs_per_sample(&self) -> usize {
        let mut hw = self.image_size;
        let mut total = self.stem.macs(hw);
        for b in &self.blocks {
            total += b.macs(hw);
            hw /= b.conv1.stride;
        }
        total + self.features * self.num_classes
    }
}

/// What runs a [`ResnetTrainer`]'s steps.
enum Run {
    /// The CPU engine, built from the model's declaration.
    Cpu(Box<cpu::resnet::Resnet>),
    /// The model's candle graph.
    #[cfg(feature = "graph")]
    Graph,
}

/// Trainer for `mini_resnet`: model, SGD-momentum state and LR schedule.
pub struct ResnetTrainer {
    hp: ResnetHparams,
    /// The declaration (and, with the graph engine, the candle graph).
    model: MiniResnet,
    run: Run,
    params: ParamStore,
    opt: SgdMomentum,
    schedule: LrSchedule,
    step: u64,
    /// Where the graph's tensors live.
    #[cfg(feature = "graph")]
    device: Device,
}

impl ResnetTrainer {
    /// Builds the model with weights drawn deterministically from `seed`, on
    /// the engine [`Engine::for_device`] picks.
    pub fn new(hp: &ResnetHparams, seed: u64, device: &Device) -> Result<Self> {
        Self::with_engine(hp, seed, device, Engine::for_device(device)?)
    }

    /// As [`Self::new`], on the given engine.
    pub fn with_engine(
        hp: &ResnetHparams,
        seed: u64,
        device: &Device,
        engine: Engine,
    ) -> Result<Self> {
        engine.check_device(device)?;
        if device.is_cpu() {
            crate::runtime::tune_cpu_allocator();
        }
        let mut params = ParamStore::new(device);
        let model = MiniResnet::new(&mut params, hp, seed)?;
        let opt = SgdMomentum::new(hp.momentum, hp.weight_decay, params.len());
        let run = match engine {
            Engine::Cpu(isa) => Run::Cpu(Box::new(cpu::resnet::Resnet::new(model.cpu_spec(), isa))),
            #[cfg(feature = "graph")]
            Engine::Graph => Run::Graph,
            #[cfg(not(feature = "graph"))]
            Engine::Graph => return Err(crate::Error::NoGraph),
        };
        Ok(Self {
            hp: hp.clone(),
            model,
            run,
            schedule: hp.schedule(),
            params,
            opt,
            step: 0,
            #[cfg(feature = "graph")]
            device: device.clone(),
        })
    }

    /// The engine this trainer runs on.
    pub fn engine(&self) -> Engine {
        match &self.run {
            Run::Cpu(e) => Engine::Cpu(e.isa()),
            #[cfg(feature = "graph")]
            Run::Graph => Engine::Graph,
        }
    }

    pub fn hparams(&self) -> &ResnetHparams {
        &self.hp
    }

    fn check_batch(&self, pixels: &[f32], labels: &[u32]) -> Result<()> {
        let s = self.hp.image_size;
        let b = labels.len();
        if b == 0 || pixels.len() != b * s * s {
            return Err(err(format!(
                "resnet: {} pixels for {b} labels of {s}x{s} images",
                pixels.len()
            )));
        }
        if let Some(bad) = labels.iter().find(|&&l| l as usize >= self.hp.num_classes) {
            return Err(err(format!("resnet: label {bad} out of range")));
        }
        Ok(())
    }

    /// Whole images as a graph input (the graph's parameters brought up to date first).
    #[cfg(feature = "graph")]
    fn graph_input(&mut self, pixels: &[f32]) -> Result<Tensor> {
        let s = self.hp.image_size;
        if pixels.is_empty() || !pixels.len().is_multiple_of(s * s) {
            return Err(err(format!(
                "resnet: {} pixel values are not whole {s}x{s} images",
                pixels.len()
            )));
        }
        self.params.sync_vars()?;
        Ok(Tensor::from_slice(
            pixels,
            (pixels.len() / (s * s), 1, s, s),
            &self.device.candle(),
        )?)
    }

    /// One optimizer step on a batch: forward, loss, backward, SGD update, LR schedule.
    pub fn train_step(&mut self, pixels: &[f32], labels: &[u32]) -> Result<StepOutput> {
        let lr = self.current_lr();
        let (loss, grads) = self.compute_gradients(pixels, labels)?;
        self.apply_gradients(&grads)?;
        Ok(StepOutput { loss, lr })
    }

    /// Forward + backward on the local batch (updates BN running statistics).
    /// Returns the mean loss and the flat gradient of the mean loss, in
    /// [`Self::parameter_layout`] order.
    pub fn compute_gradients(&mut self, pixels: &[f32], labels: &[u32]) -> Result<(f32, Vec<f32>)> {
        self.check_batch(pixels, labels)?;
        match &mut self.run {
            Run::Cpu(e) => {
                let mut grads = vec![0f32; self.params.len()];
                let loss = e.gradients(self.params.flat(), pixels, labels, &mut grads)?;
                Ok((loss, grads))
            }
            #[cfg(feature = "graph")]
            Run::Graph => {
                let x = self.graph_input(pixels)?;
                let logits = self.model.forward(&self.params, &x, true)?;
                let loss = ops::cross_entropy(&logits, labels)?;
                let grads = loss.backward()?;
                let flat = self.params.flat_grads(&grads)?;
                Ok((loss.to_scalar::<f32>()?, flat))
            }
        }
    }

    /// SGD step with the (already averaged) flat gradient, then advances the schedule.
    pub fn apply_gradients(&mut self, flat_grads: &[f32]) -> Result<()> {
        let lr = self.current_lr();
        self.opt.step(&mut self.params, flat_grads, lr)?;
        self.step += 1;
        Ok(())
    }

    /// Top-1 accuracy (running BN statistics) over all batches.
    pub fn evaluate(
        &mut self,
        batches: &mut dyn Iterator<Item = (Vec<f32>, Vec<u32>)>,
    ) -> Result<f64> {
        let (mut correct, mut total) = (0usize, 0usize);
        for (pixels, labels) in batches {
            self.check_batch(&pixels, &labels)?;
            // The CPU engine's buffers are sized for a training batch:
            // larger evaluation batches go through in pieces of that size.
            let n = labels.len().min(self.hp.batch_size.max(1));
            let px = self.hp.image_size * self.hp.image_size;
            for (p, l) in pixels.chunks(n * px).zip(labels.chunks(n)) {
                let logits = self.logits(p, false)?;
                let k = self.hp.num_classes;
                correct += logits
                    .chunks_exact(k)
                    .zip(l)
                    .filter(|(row, y)| argmax(row) == **y as usize)
                    .count();
            }
            total += labels.len();
        }
        if total == 0 {
            return Err(err("resnet: empty evaluation set"));
        }
        Ok(correct as f64 / total as f64)
    }

    /// Model FLOPs per training sample: `3 * 2 * MACs_forward` (forward, plus
    /// backward counted as twice the forward), MACs of all convolutions and the
    /// linear head; BN, ReLU, pooling and the optimizer are not counted.
    pub fn flops_per_sample(&self) -> f64 {
        6.0 * self.model.macs_per_sample() as f64
    }

    pub fn num_parameters(&self) -> usize {
        self.params.len()
    }

    /// Learning rate the next optimizer step will use.
    pub fn current_lr(&self) -> f64 {
        self.schedule.lr(self.step)
    }

    /// Optimizer steps taken so far.
    pub fn steps(&self) -> u64 {
        self.step
    }

    /// (name, offset, length) of every parameter in the flat vectors.
    pub fn parameter_layout(&self) -> Vec<(String, usize, usize)> {
        self.params
            .params()
            .iter()
            .map(|p| (p.name.clone(), p.offset, p.len))
            .collect()
    }

    /// Logits `[B, classes]` (flat) for a batch. `train = true` uses batch
    /// statistics and updates the BN running averages (as a training forward
    /// does); `train = false` uses the running statistics. No gradient.
    pub fn logits(&mut self, pixels: &[f32], train: bool) -> Result<Vec<f32>> {
        match &mut self.run {
            Run::Cpu(e) => Ok(e.forward(self.params.flat(), pixels, train)?.to_vec()),
            #[cfg(feature = "graph")]
            Run::Graph => {
                let x = self.graph_input(pixels)?;
                let logits = self.model.forward(&self.params, &x, train)?;
                Ok(logits.detach().flatten_all()?.to_vec1()?)
            }
        }
    }

    /// All trainable parameters, flat, in [`Self::parameter_layout`] order.
    pub fn flat_parameters(&self) -> &[f32] {
        self.params.flat()
    }
}

/// Index of the first largest value.
fn argmax(row: &[f32]) -> usize {
    row.iter()
        .enumerate()
        .fold((0, f32::NEG_INFINITY), |(bi, bv), (i, &v)| {
            if v > bv { (i, v) } else { (bi, bv) }
        })
        .0
}
