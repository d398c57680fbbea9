//! referee workloads: the model and training math of the CPU "mini" benchmarks.
//!
//! This crate owns only the numerics of one training step (forward, loss,
//! backward, optimizer update, LR schedule) and of evaluation. It has no clock,
//! no logging and no dataset I/O: the harness and `referee-datasets` own those.
//!
//! Two benchmarks:
//!
//! * [`resnet`]: `mini_resnet`, a small ResNet (BatchNorm, residual basic blocks)
//!   on 1×28×28 Fashion-MNIST images, top-1 accuracy (higher is better), SGD with
//!   Nesterov-free momentum + weight decay, linear warm-up then cosine/polynomial decay.
//! * [`llm`]: `mini_llm`, a Llama-style decoder (RMSNorm, RoPE, causal MHA,
//!   SwiGLU), validation log-perplexity = mean NLL in nats per token (lower is
//!   better), AdamW (β1 0.9, β2 0.95, ε 1e-5, wd 0.1), global-norm clipping 1.0,
//!   cosine schedule with linear warm-up.
//!
//! Both trainers expose the same shape of API (`new`, `train_step`,
//! `compute_gradients` + `apply_gradients` for data parallelism, `evaluate`,
//! `flops_per_sample`, `num_parameters`, `current_lr`).
//!
//! # Errors
//! Every fallible function returns [`Result`], an alias of
//! `candle_core::Result`; errors raised by this crate itself are
//! `candle_core::Error::Msg` with a message that says what was wrong.
//!
//! # Performance notes (CPU)
//! candle's CPU convolution backward goes through `conv_transpose2d` and a
//! conv2d with the batch as channels, which is slow, and several candle-nn ops
//! (rms_norm, rope, softmax_last_dim) have no backward. The hot paths are
//! therefore custom fused ops in [`ops`] (explicit im2col + one GEMM for
//! convolutions in NHWC layout, fused BatchNorm(+ReLU), RMSNorm, SwiGLU,
//! causal attention with RoPE, cross-entropy), each with a hand-written
//! backward and a composed-candle-ops fallback used on non-CPU devices (and by
//! the tests as the reference).

pub mod bench;
pub mod cpu;
pub mod device;
pub mod llm;
pub mod ops;
pub mod optim;
pub mod resnet;
pub mod rng;
pub mod rulegen;
pub mod runtime;
pub mod schedule;

pub use candle_core::{Device, Result};
pub use device::{device_from_str, open_device, parse_device};
pub use llm::{LlmHparams, LlmTrainer, Precision};
pub use resnet::{ResnetHparams, ResnetTrainer};
pub use runtime::{configure_cpu_threads, tune_cpu_allocator};
pub use schedule::{DecayKind, LrSchedule};

/// Which implementation runs a model's training step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// candle's autograd graph: any device; the reference the CPU engine is
    /// tested against.
    Graph,
    /// The CPU engine ([`cpu`]) on these kernels.
    Cpu(cpu::Isa),
}

impl Engine {
    /// The engine for `device`: on a CPU, the CPU engine with the fastest
    /// kernels the processor runs, unless `REFEREE_CPU_KERNELS` names other
    /// kernels (`avx512`, `avx2`, `portable`) or `graph` (candle's graph);
    /// elsewhere the graph.
    pub fn for_device(device: &Device) -> Result<Engine> {
        if !device.is_cpu() {
            return Ok(Engine::Graph);
        }
        match std::env::var("REFEREE_CPU_KERNELS") {
            Ok(v) if v == "graph" => Ok(Engine::Graph),
            Ok(v) if !v.is_empty() => cpu::Isa::parse(&v)
                .map(Engine::Cpu)
                .map_err(|e| err(format!("{e} (or graph)"))),
            _ => Ok(Engine::Cpu(cpu::Isa::detect())),
        }
    }

    /// Fails unless this engine can run on `device`.
    pub fn check_device(self, device: &Device) -> Result<()> {
        match self {
            Engine::Cpu(_) if !device.is_cpu() => {
                Err(err("the CPU engine runs on the CPU device only"))
            }
            Engine::Cpu(isa) if !isa.available() => Err(err(format!(
                "this CPU cannot run the {} kernels",
                isa.name()
            ))),
            _ => Ok(()),
        }
    }

    /// `graph`, or `cpu-` and the kernels' name.
    pub fn name(self) -> String {
        match self {
            Engine::Graph => "graph".into(),
            Engine::Cpu(isa) => format!("cpu-{}", isa.name()),
        }
    }
}

/// What one optimizer step reports.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StepOutput {
    /// Mean training loss of the (local) batch, before the update.
    pub loss: f32,
    /// Learning rate used by this step.
    pub lr: f64,
}

/// Builds a `candle_core::Error::Msg`.
pub(crate) fn err(msg: impl Into<String>) -> candle_core::Error {
    candle_core::Error::Msg(msg.into())
}
