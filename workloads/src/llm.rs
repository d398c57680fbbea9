//! `mini_llm`: a Llama-style decoder-only language model.
//!
//! ```text
//! x = embed(tokens)                                   [B*T, d]
//! repeat n_layers:
//!   x = x + W_o  · attn(RoPE, causal, n_heads)(RMSNorm(x) · W_qkv)
//!   x = x + W_down · (silu(h W_gate) * (h W_up)),  h = RMSNorm(x)
//! logits = RMSNorm(x) · E^T        (head tied to the embedding E)
//! ```
//!
//! Linear layers have no bias. The output head is **tied** to the token
//! embedding (saves `vocab * d` parameters, standard for small models). Init:
//! normal(0, 0.02) truncated at 2σ for the embedding and all projections, with
//! the residual-output projections (`W_o`, `W_down`) scaled by `1/sqrt(2 L)`;
//! RMSNorm gains 1.
//!
//! Optimiser: AdamW with the llama31_8b values (β1 0.9, β2 0.95, ε 1e-5, weight
//! decay 0.1 on matrices and the embedding, none on RMSNorm gains), gradient
//! clipping to global norm 1.0 (applied to the averaged gradient, i.e. after the
//! data-parallel all-reduce), cosine schedule with linear warm-up to `end_lr`.
//! Metric: mean cross-entropy in nats per token (log-perplexity).

#[cfg(feature = "graph")]
use candle_core::Tensor;
use serde::{Deserialize, Serialize};

use crate::cpu;
#[cfg(feature = "graph")]
use crate::ops;
use crate::optim::{AdamW, ParamStore, clip_grad_norm};
use crate::rng::Rng;
use crate::rope::Rope;
use crate::schedule::{DecayKind, LrSchedule};
use crate::{Device, Engine, Result, StepOutput, err};

/// Hyperparameters of `mini_llm`. "fixed" = part of the benchmark definition
/// (a Closed submission may not change it); "tunable" = a submitter may change it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LlmHparams {
    /// (fixed) vocabulary size (the datasets crate's byte-level BPE: 2048).
    pub vocab_size: usize,
    /// (fixed) context length T (tokens per sample).
    pub seq_len: usize,
    /// (fixed) model width d.
    pub d_model: usize,
    /// (fixed) number of decoder blocks.
    pub n_layers: usize,
    /// (fixed) attention heads (head dim = d_model / n_heads, must be even).
    pub n_heads: usize,
    /// (fixed) SwiGLU hidden width.
    pub ffn_hidden: usize,
    /// (fixed) RoPE base.
    pub rope_base: f64,
    /// (fixed) RMSNorm epsilon.
    pub norm_eps: f64,
    /// (fixed) AdamW β1.
    pub beta1: f64,
    /// (fixed) AdamW β2.
    pub beta2: f64,
    /// (fixed) AdamW ε.
    pub eps: f64,
    /// (fixed) AdamW decoupled weight decay.
    pub weight_decay: f64,
    /// (fixed) gradient clipping threshold (global L2 norm).
    pub grad_clip: f64,
    /// (tunable) global batch size in sequences per optimizer step.
    pub batch_size: usize,
    /// (tunable) peak learning rate.
    pub base_lr: f64,
    /// (tunable) final learning rate of the cosine decay.
    pub end_lr: f64,
    /// (tunable) linear warm-up steps.
    pub warmup_steps: u64,
    /// (tunable) schedule length in optimizer steps (warm-up + cosine decay).
    pub total_steps: u64,
    /// (tunable) precision of the matrix multiplications (linear layers and the
    /// head); weights, optimiser state, norms, attention scores and the
    /// loss stay f32.
    pub precision: Precision,
}

/// Arithmetic of the linear layers: `fp32`, or `bf16` mixed precision
/// (operands rounded to bf16, products in bf16; master weights and
/// gradients f32, as automatic mixed precision does on GPUs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    #[default]
    Fp32,
    Bf16,
}

impl Precision {
    /// The name logged under `lowest_numerical_precision_in_linear`.
    pub fn as_str(self) -> &'static str {
        match self {
            Precision::Fp32 => "fp32",
            Precision::Bf16 => "bf16",
        }
    }
}

impl Default for LlmHparams {
    fn default() -> Self {
        Self {
            vocab_size: 2048,
            seq_len: 128,
            d_model: 128,
            n_layers: 4,
            n_heads: 4,
            ffn_hidden: 384,
            rope_base: 10_000.0,
            norm_eps: 1e-5,
            beta1: 0.9,
            beta2: 0.95,
            eps: 1e-5,
            weight_decay: 0.1,
            grad_clip: 1.0,
            batch_size: 16,
            base_lr: 3e-3,
            end_lr: 3e-4,
            warmup_steps: 60,
            total_steps: 768,
            precision: Precision::Fp32,
        }
    }
}

impl LlmHparams {
    pub fn schedule(&self) -> LrSchedule {
        LrSchedule {
            base_lr: self.base_lr,
            end_lr: self.end_lr,
            warmup_steps: self.warmup_steps,
            total_steps: self.total_steps,
            decay: DecayKind::Cosine,
        }
    }

    fn validate(&self) -> Result<()> {
        if self.n_heads == 0
            || !self.d_model.is_multiple_of(self.n_heads)
            || !(self.d_model / self.n_heads).is_multiple_of(2)
        {
            return Err(err(
                "llm: d_model must be a multiple of n_heads with an even head dim",
            ));
        }
        if self.vocab_size < 2 || self.seq_len == 0 || self.n_layers == 0 || self.ffn_hidden == 0 {
            return Err(err(
                "llm: vocab_size, seq_len, n_layers and ffn_hidden must be positive",
            ));
        }
        Ok(())
    }
}

/// The decoder.
pub struct MiniLlm {
    /// Where each layer's parameters live in the flat parameters.
    blocks: Vec<cpu::llm::LayerSpec>,
    /// Offsets of the embedding and the final norm's gain in the flat parameters.
    embed_off: usize,
    final_norm_off: usize,
    rope: Rope,
    hp: LlmHparams,
}

impl MiniLlm {
    pub fn new(ps: &mut ParamStore, hp: &LlmHparams, seed: u64) -> Result<Self> {
        hp.validate()?;
        let (d, f, v) = (hp.d_model, hp.ffn_hidden, hp.vocab_size);
        let std = 0.02;
        let out_std = std / (2.0 * hp.n_layers as f64).sqrt();
        let normal = |name: &str, rows: usize, cols: usize, s: f64, ps: &mut ParamStore| {
            ps.add(
                name,
                &[rows, cols],
                Rng::derive(seed, name).normal_vec(rows * cols, s),
                true,
            )
        };
        let embed_off = normal("embed", v, d, std, ps)?;
        let mut blocks = Vec::new();
        for l in 0..hp.n_layers {
            let p = format!("layer{l}");
            blocks.push(cpu::llm::LayerSpec {
                attn_norm: ps.add(&format!("{p}.attn_norm"), &[d], vec![1.0; d], false)?,
                // columns: [q | k | v], each head-major (h * dh + i)
                w_qkv: normal(&format!("{p}.w_qkv"), d, 3 * d, std, ps)?,
                w_o: normal(&format!("{p}.w_o"), d, d, out_std, ps)?,
                mlp_norm: ps.add(&format!("{p}.mlp_norm"), &[d], vec![1.0; d], false)?,
                // columns: [gate | up]
                w_gate_up: normal(&format!("{p}.w_gate_up"), d, 2 * f, std, ps)?,
                w_down: normal(&format!("{p}.w_down"), f, d, out_std, ps)?,
            });
        }
        let final_norm_off = ps.add("final_norm", &[d], vec![1.0; d], false)?;
        let rope = Rope::new(d / hp.n_heads, hp.seq_len, hp.rope_base);
        Ok(Self {
            blocks,
            embed_off,
            final_norm_off,
            rope,
            hp: hp.clone(),
        })
    }

    /// The description the CPU engine is built from: shapes and parameter offsets.
    fn cpu_spec(&self) -> cpu::llm::LlmSpec {
        let hp = &self.hp;
        cpu::llm::LlmSpec {
            vocab: hp.vocab_size,
            seq_len: hp.seq_len,
            d: hp.d_model,
            heads: hp.n_heads,
            ffn: hp.ffn_hidden,
            norm_eps: hp.norm_eps as f32,
            rope: self.rope.clone(),
            bf16: hp.precision == Precision::Bf16,
            embed: self.embed_off,
            layers: self.blocks.clone(),
            final_norm: self.final_norm_off,
        }
    }

    /// `tokens: [B, T]` (u32) -> logits `[B*T, vocab]`.
    #[cfg(feature = "graph")]
    pub fn forward(&self, ps: &ParamStore, tokens: &Tensor) -> Result<Tensor> {
        let (b, t) = tokens.dims2()?;
        let hp = &self.hp;
        if t > hp.seq_len {
            return Err(err(format!(
                "llm: sequence of {t} tokens exceeds seq_len {}",
                hp.seq_len
            )));
        }
        let (d, nh) = (hp.d_model, hp.n_heads);
        let eps = hp.norm_eps as f32;
        let embed = ps.tensor(self.embed_off)?;
        let mut x = embed.embedding(&tokens.flatten_all()?)?; // [B*T, d]
        for blk in &self.blocks {
            let h = ops::rms_norm(&x, &ps.tensor(blk.attn_norm)?, eps)?;
            let qkv = self
                .linear(&h, &ps.tensor(blk.w_qkv)?)?
                .reshape((b, t, 3, nh, d / nh))?;
            let a = ops::causal_attention(&qkv, &self.rope)?.reshape((b * t, d))?;
            x = (x + self.linear(&a, &ps.tensor(blk.w_o)?)?)?;
            let h = ops::rms_norm(&x, &ps.tensor(blk.mlp_norm)?, eps)?;
            let m = ops::swiglu(&self.linear(&h, &ps.tensor(blk.w_gate_up)?)?)?;
            x = (x + self.linear(&m, &ps.tensor(blk.w_down)?)?)?;
        }
        let x = ops::rms_norm(&x, &ps.tensor(self.final_norm_off)?, eps)?;
        self.linear(&x, &embed.t()?)
    }

    /// `x · w` in the configured precision; the result is f32 (gradients
    /// flow back through the casts to the f32 weights).
    #[cfg(feature = "graph")]
    fn linear(&self, x: &Tensor, w: &Tensor) -> Result<Tensor> {
        Ok(match self.hp.precision {
            Precision::Fp32 => x.matmul(w)?,
            Precision::Bf16 => {
                let bf = candle_core::DType::BF16;
                x.to_dtype(bf)?
                    .matmul(&w.to_dtype(bf)?)?
                    .to_dtype(candle_core::DType::F32)?
            }
        })
    }

    /// Parameters that take part in matmuls (all but the RMSNorm gains), counting the tied head once.
    fn matmul_params(&self) -> usize {
        let (d, f, v) = (self.hp.d_model, self.hp.ffn_hidden, self.hp.vocab_size);
        self.hp.n_layers * (3 * d * d + d * d + 2 * d * f + f * d) + v * d
    }
}

/// What runs an [`LlmTrainer`]'s steps.
enum Run {
    /// The CPU engine, built from the model's declaration.
    Cpu(Box<cpu::llm::Llm>),
    /// The model's candle graph.
    #[cfg(feature = "graph")]
    Graph,
}

/// Trainer for `mini_llm`: model, AdamW state, clipping and LR schedule.
pub struct LlmTrainer {
    hp: LlmHparams,
    /// The declaration (and, with the graph engine, the candle graph).
    model: MiniLlm,
    run: Run,
    params: ParamStore,
    opt: AdamW,
    schedule: LrSchedule,
    step: u64,
    /// Where the graph's tensors live.
    #[cfg(feature = "graph")]
    device: Device,
    last_grad_norm: f64,
    /// The last step's gradient buffer, reused by the next step.
    spare_grads: Vec<f32>,
}

impl LlmTrainer {
    /// Builds the model with weights drawn deterministically from `seed`, on
    /// the engine [`Engine::for_device`] picks.
    pub fn new(hp: &LlmHparams, seed: u64, device: &Device) -> Result<Self> {
        Self::with_engine(hp, seed, device, Engine::for_device(device)?)
    }

    /// As [`Self::new`], on the given engine.
    pub fn with_engine(
        hp: &LlmHparams,
        seed: u64,
        device: &Device,
        engine: Engine,
    ) -> Result<Self> {
        engine.check_device(device)?;
        if device.is_cpu() {
            crate::runtime::tune_cpu_allocator();
        }
        let mut params = ParamStore::new(device);
        let model = MiniLlm::new(&mut params, hp, seed)?;
        let opt = AdamW::new(hp.beta1, hp.beta2, hp.eps, hp.weight_decay, params.len());
        let run = match engine {
            Engine::Cpu(isa) => Run::Cpu(Box::new(cpu::llm::Llm::new(model.cpu_spec(), isa))),
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
            last_grad_norm: 0.0,
            spare_grads: Vec::new(),
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

    pub fn hparams(&self) -> &LlmHparams {
        &self.hp
    }

    fn check_batch(&self, inputs: &[u32], targets: &[u32]) -> Result<()> {
        let t = self.hp.seq_len;
        if inputs.is_empty() || !inputs.len().is_multiple_of(t) || inputs.len() != targets.len() {
            return Err(err(format!(
                "llm: inputs ({}) and targets ({}) must both be B x seq_len ({t}) tokens",
                inputs.len(),
                targets.len()
            )));
        }
        if let Some(bad) = inputs
            .iter()
            .chain(targets)
            .find(|&&x| x as usize >= self.hp.vocab_size)
        {
            return Err(err(format!("llm: token {bad} out of vocabulary")));
        }
        Ok(())
    }

    /// Checked tokens as a graph input (the graph's parameters brought up to date first).
    #[cfg(feature = "graph")]
    fn graph_input(&mut self, inputs: &[u32]) -> Result<Tensor> {
        self.params.sync_vars()?;
        let t = self.hp.seq_len;
        Ok(Tensor::from_slice(
            inputs,
            (inputs.len() / t, t),
            &self.device.candle(),
        )?)
    }

    /// Readies the CPU engine before the clock starts: where the planner
    /// measures ([`cpu::planner::Mode::Measure`]), one forward and backward
    /// pass over `local` synthetic sequences (every token 0), so that every
    /// product of a step (and of an evaluation, in pieces of the same size)
    /// is planned before `run_start`; then more such passes while the
    /// planner tries its best candidates in them ([`cpu::planner::begin_trials`]:
    /// 12 passes where a shape has 4 candidates). The weights,
    /// the optimizer and the data are untouched; the engine's buffers are
    /// rewritten before every read.
    pub fn prepare(&mut self, local: usize) -> Result<()> {
        if let Run::Cpu(e) = &mut self.run
            && local > 0
            && cpu::planner::mode() == cpu::planner::Mode::Measure
        {
            let tokens = vec![0u32; local * self.hp.seq_len];
            let mut grads = vec![0f32; self.params.len()];
            e.gradients(self.params.flat(), &tokens, &tokens, &mut grads)?;
            let passes = cpu::planner::begin_trials(e.isa(), rayon::current_num_threads());
            let mut tried = Ok(());
            for _ in 0..passes {
                cpu::planner::trial_pass();
                tried = e
                    .gradients(self.params.flat(), &tokens, &tokens, &mut grads)
                    .map(drop);
                if tried.is_err() {
                    break;
                }
            }
            cpu::planner::end_trials();
            tried?;
        }
        Ok(())
    }

    /// One optimizer step: forward, loss, backward, clip, AdamW, LR schedule.
    pub fn train_step(&mut self, inputs: &[u32], targets: &[u32]) -> Result<StepOutput> {
        let lr = self.current_lr();
        // The gradient's buffer is the last step's: every entry is
        // rewritten (no 4 MiB allocation and zeroing per step).
        let buf = std::mem::take(&mut self.spare_grads);
        let (loss, mut grads) = self.gradients_into(inputs, targets, buf)?;
        self.apply_in_place(&mut grads)?;
        self.spare_grads = grads;
        Ok(StepOutput { loss, lr })
    }

    /// Forward + backward on the local batch (`inputs`/`targets`: B×T tokens,
    /// row-major). Returns the mean loss per token and the flat gradient of that
    /// mean in [`Self::parameter_layout`] order. Equal local batch sizes on every
    /// rank make the average of the ranks' gradients the gradient of the global mean.
    pub fn compute_gradients(
        &mut self,
        inputs: &[u32],
        targets: &[u32],
    ) -> Result<(f32, Vec<f32>)> {
        self.gradients_into(inputs, targets, Vec::new())
    }

    /// [`Self::compute_gradients`] into `buf` (reused: its values, if any,
    /// are all overwritten).
    fn gradients_into(
        &mut self,
        inputs: &[u32],
        targets: &[u32],
        mut buf: Vec<f32>,
    ) -> Result<(f32, Vec<f32>)> {
        self.check_batch(inputs, targets)?;
        match &mut self.run {
            Run::Cpu(e) => {
                buf.resize(self.params.len(), 0.0);
                let loss = e.gradients(self.params.flat(), inputs, targets, &mut buf)?;
                Ok((loss, buf))
            }
            #[cfg(feature = "graph")]
            Run::Graph => {
                let x = self.graph_input(inputs)?;
                let logits = self.model.forward(&self.params, &x)?;
                let loss = ops::cross_entropy(&logits, targets)?;
                let grads = loss.backward()?;
                let flat = self.params.flat_grads(&grads)?;
                Ok((loss.to_scalar::<f32>()?, flat))
            }
        }
    }

    /// Clips the (already averaged) flat gradient to the global norm, takes an
    /// AdamW step, then advances the schedule.
    pub fn apply_gradients(&mut self, flat_grads: &[f32]) -> Result<()> {
        self.apply_in_place(&mut flat_grads.to_vec())
    }

    /// [`Self::apply_gradients`], clipping `g` in place (no copy of the
    /// flat vector).
    fn apply_in_place(&mut self, g: &mut [f32]) -> Result<()> {
        let lr = self.current_lr();
        cpu::passes::timed(cpu::passes::Pass::Optimiser, || {
            self.last_grad_norm = clip_grad_norm(g, self.hp.grad_clip);
            self.opt.step(&mut self.params, g, lr)
        })?;
        self.step += 1;
        Ok(())
    }

    /// Global gradient norm (before clipping) of the last step.
    pub fn last_grad_norm(&self) -> f64 {
        self.last_grad_norm
    }

    /// Mean NLL in nats per token over all batches of `(inputs, targets)`.
    pub fn evaluate(
        &mut self,
        batches: &mut dyn Iterator<Item = (Vec<u32>, Vec<u32>)>,
    ) -> Result<f64> {
        let (mut sum, mut count) = (0f64, 0usize);
        // The CPU engine's buffers are sized for a training batch: larger
        // evaluation batches go through in pieces of that size.
        let piece = self.hp.batch_size.max(1) * self.hp.seq_len;
        for (inputs, targets) in batches {
            self.check_batch(&inputs, &targets)?;
            match &mut self.run {
                Run::Cpu(e) => {
                    for (i, t) in inputs.chunks(piece).zip(targets.chunks(piece)) {
                        let loss = e.loss(self.params.flat(), i, t)?;
                        sum += f64::from(loss) * t.len() as f64;
                    }
                }
                #[cfg(feature = "graph")]
                Run::Graph => {
                    let x = self.graph_input(&inputs)?;
                    let logits = self.model.forward(&self.params, &x)?.detach();
                    let loss = ops::cross_entropy(&logits, &targets)?.to_scalar::<f32>()?;
                    sum += f64::from(loss) * targets.len() as f64;
                }
            }
            count += targets.len();
        }
        if count == 0 {
            return Err(err("llm: empty evaluation set"));
        }
        Ok(sum / count as f64)
    }

    /// Model FLOPs per training sample (one sequence of `seq_len` tokens):
    /// `T * (6 * N_matmul + 12 * L * T * d)` where `N_matmul` counts every
    /// parameter used in a matmul (the tied embedding once, as the head) and the
    /// second term is the attention score/value products (PaLM appendix B
    /// convention, causal mask not discounted).
    pub fn flops_per_sample(&self) -> f64 {
        let hp = &self.hp;
        let t = hp.seq_len as f64;
        t * (6.0 * self.model.matmul_params() as f64
            + 12.0 * hp.n_layers as f64 * t * hp.d_model as f64)
    }

    /// Tokens per sample (= `seq_len`).
    pub fn tokens_per_sample(&self) -> usize {
        self.hp.seq_len
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

    /// All trainable parameters, flat, in [`Self::parameter_layout`] order.
    pub fn flat_parameters(&self) -> &[f32] {
        self.params.flat()
    }

    /// Logits `[B*T, vocab]` for `inputs` (B×T tokens), no gradient.
    pub fn logits(&mut self, inputs: &[u32]) -> Result<Vec<f32>> {
        self.check_batch(inputs, inputs)?;
        match &mut self.run {
            Run::Cpu(e) => Ok(e.forward(self.params.flat(), inputs)?.to_vec()),
            #[cfg(feature = "graph")]
            Run::Graph => {
                let x = self.graph_input(inputs)?;
                let logits = self.model.forward(&self.params, &x)?;
                Ok(logits.detach().flatten_all()?.to_vec1()?)
            }
        }
    }
}
