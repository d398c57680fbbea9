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
//! Every fallible function returns [`Result`], whose [`Error`] is a message
//! from this crate ([`Error::Msg`], saying what was wrong) or, with the
//! graph engine built in, candle's error.
//!
//! # Engines
//! Each trainer runs its model on one of two engines ([`Engine`]):
//!
//! * the CPU engine ([`cpu`], the default on a CPU): forward and backward
//!   written out layer by layer over buffers kept from step to step, the
//!   convolutions and matrix products on register-tiled SIMD kernels chosen
//!   at run time (AVX-512, AVX2+FMA, or portable loops);
//! * the graph engine (cargo feature `graph`, implied by `cuda`): the same
//!   models as candle modules ([`resnet`], [`llm`], built from the composed
//!   ops of `ops`) trained by candle's autograd, on any device candle
//!   supports (CUDA with the `cuda` feature). On a CPU it is the reference
//!   the CPU engine is tested against (`tests/engine.rs`). Without the
//!   feature no candle is compiled, and asking for the graph is an error
//!   ([`Error::NoGraph`]).
//!
//! Both read and write the same flat parameter and gradient vectors
//! ([`optim::ParamStore`]), so optimizers, data parallelism and checkpoints
//! do not depend on the engine.

pub mod bench;
pub mod cpu;
pub mod device;
pub mod error;
pub mod llm;
#[cfg(feature = "graph")]
pub mod ops;
pub mod optim;
pub mod resnet;
pub mod rng;
pub mod rope;
pub mod rulegen;
pub mod runtime;
pub mod schedule;

pub use device::{Device, device_from_str, open_device, parse_device};
pub use error::{ConfigError, DataStreamError, DeviceError, Error, IsaError};
pub use llm::{LlmHparams, LlmTrainer, Precision};
pub use resnet::{ResnetHparams, ResnetTrainer};
pub use runtime::{configure_cpu_threads, tune_cpu_allocator};
pub use schedule::{DecayKind, LrSchedule};

/// The result of model and training functions.
pub type Result<T> = std::result::Result<T, Error>;

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
        // Its buffers, from the weights on, at cache lines (cpu::aligned).
        cpu::aligned::engage();
        match std::env::var("REFEREE_CPU_KERNELS") {
            Ok(v) if v == "graph" => Ok(Engine::Graph),
            Ok(v) if !v.is_empty() => cpu::Isa::parse(&v).map(Engine::Cpu).map_err(|e| {
                let graph = if cfg!(feature = "graph") {
                    "graph"
                } else {
                    "graph in a build with the graph engine"
                };
                err(format!("{e} (or {graph})"))
            }),
            _ => Ok(Engine::Cpu(cpu::Isa::detect())),
        }
    }

    /// Fails unless this engine can run on `device` (and, for the graph,
    /// unless this build has it).
    pub fn check_device(self, device: &Device) -> Result<()> {
        match self {
            Engine::Graph if !cfg!(feature = "graph") => Err(Error::NoGraph),
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

/// Builds an [`Error::Msg`].
pub(crate) fn err(msg: impl Into<String>) -> Error {
    Error::Msg(msg.into())
}
