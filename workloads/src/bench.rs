//! Benchmark declarations. Each benchmark is declared here, once: its model
//! and data, fixed versus tunable hyperparameters, quality metric and
//! direction, target, evaluation cadence in samples, evaluation set size,
//! run count, budget, the keys its logs carry, and its reference
//! convergence points. The harness reads everything from here; the rule
//! file of each benchmark is generated from it ([`crate::rulegen`]).

use crate::Device;
use crate::error::{ConfigError, DataStreamError};
use crate::{Engine, LlmHparams, LlmTrainer, ResnetHparams, ResnetTrainer, Result, StepOutput};
use referee_datasets::{self as datasets, BatchOptions, ImageFolder, TokenDataset};
use serde_json::{Value, json};
use std::path::Path;

/// The ruleset referee's own benchmarks belong to.
pub const RULESET: &str = "referee-1.0";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Accuracy-like: the target is a lower bound.
    HigherIsBetter,
    /// Loss-like: the target is an upper bound.
    LowerIsBetter,
}

/// The quality metric and its target.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricSpec {
    /// The MLLOG key of evaluation results.
    pub key: &'static str,
    pub name: &'static str,
    pub direction: Direction,
    pub target: f64,
    /// The other end of the plausible range (1.0 for accuracy, 0.0 for a loss).
    pub bound: f64,
}

impl MetricSpec {
    pub fn reached(&self, v: f64) -> bool {
        match self.direction {
            Direction::HigherIsBetter => v >= self.target && v <= self.bound,
            Direction::LowerIsBetter => v <= self.target && v > self.bound,
        }
    }
}

/// How a logged hyperparameter is constrained.
#[derive(Debug, Clone, PartialEq)]
pub enum Check {
    /// Must equal this value (closed division).
    Equals(Value),
    Positive,
    NonNegative,
    /// Logged, any value.
    Logged,
}

/// A hyperparameter as it appears in the log.
#[derive(Debug, Clone, PartialEq)]
pub struct LoggedParam {
    pub key: &'static str,
    pub value: Value,
    /// Part of the benchmark definition: a closed submission may not change it.
    pub fixed: bool,
    pub check: Check,
}

/// The declaration of a benchmark.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchmarkSpec {
    pub name: &'static str,
    pub summary: &'static str,
    /// Datasets (names of `referee-datasets`) the benchmark trains and evaluates on.
    pub datasets: &'static [&'static str],
    pub metric: MetricSpec,
    /// Evaluate after the first step at which samples ≥ k × this (k = 1, 2, …).
    pub eval_every_samples: u64,
    /// Samples per evaluation (the fixed evaluation subset).
    pub eval_samples: u64,
    /// Size of the training set.
    pub train_samples: u64,
    /// Runs per submission (olympic scoring drops one at each end).
    pub runs: usize,
    /// A run that has not reached the target after this many minutes stops (aborted).
    pub budget_minutes: f64,
    /// Model config keys a closed submission may not change.
    pub fixed_fields: &'static [&'static str],
}

/// One batch of training or evaluation data.
#[derive(Debug, Clone)]
pub enum Batch {
    Images {
        pixels: Vec<f32>,
        labels: Vec<u32>,
        n: usize,
    },
    Tokens {
        inputs: Vec<u32>,
        targets: Vec<u32>,
        n: usize,
    },
}

impl Batch {
    pub fn len(&self) -> usize {
        match self {
            Batch::Images { n, .. } | Batch::Tokens { n, .. } => *n,
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A stream of batches (opened by the harness after `run_start`).
pub type BatchStream =
    Box<dyn Iterator<Item = std::result::Result<Batch, datasets::DataError>> + Send>;

/// A model under training, whatever the benchmark.
pub trait Trainer: Send {
    fn train_step(&mut self, batch: &Batch) -> Result<StepOutput>;
    fn compute_gradients(&mut self, batch: &Batch) -> Result<(f32, Vec<f32>)>;
    fn apply_gradients(&mut self, flat: &[f32]) -> Result<()>;
    /// The quality metric over the evaluation batches.
    fn evaluate(&mut self, batches: &mut dyn Iterator<Item = Batch>) -> Result<f64>;
    fn flops_per_sample(&self) -> f64;
    fn tokens_per_sample(&self) -> Option<usize>;
    fn num_parameters(&self) -> usize;
    fn current_lr(&self) -> f64;
    /// sha256 of the initial weights (the same seed gives the same hash).
    fn weights_sha256(&self) -> String;
    /// Readies the engine before the clock starts (the initialisation),
    /// for steps of `local_samples` samples: where the CPU planner measures
    /// ([`crate::cpu::planner::Mode::Measure`]), every product of a step is
    /// planned now rather than inside the timed region. Changes no weight,
    /// optimizer state or data order.
    fn prepare(&mut self, _local_samples: usize) -> Result<()> {
        Ok(())
    }
}

fn batch_error(which: &str) -> crate::Error {
    crate::err(format!("this benchmark trains on {which} batches"))
}

/// A benchmark: its declaration plus how to build it.
pub trait Benchmark: Sync {
    fn spec(&self) -> &BenchmarkSpec;
    /// The default configuration (the reference hyperparameters) as JSON.
    fn default_config(&self) -> Value;
    /// Validate a full configuration; errors name the offending key.
    fn validate(&self, config: &Value) -> std::result::Result<(), ConfigError>;
    /// Global batch size of a configuration.
    fn global_batch_size(&self, config: &Value) -> usize;
    /// Samples the schedule covers (the run stops, aborted, after them).
    fn max_samples(&self, config: &Value) -> u64;
    /// The hyperparameters as logged.
    fn logged_params(&self, config: &Value) -> Vec<LoggedParam>;
    /// The lowest precision of the linear layers under `config`, as logged
    /// under `lowest_numerical_precision_in_linear`.
    fn linear_precision(&self, _config: &Value) -> &'static str {
        "fp32"
    }
    /// Build the model (the initialisation phase; touches no data) on `engine`.
    fn build(
        &self,
        config: &Value,
        seed: u64,
        device: &Device,
        engine: Engine,
    ) -> Result<Box<dyn Trainer>>;
    /// Open the training data: an endless stream of global-batch slices for
    /// this rank (the first touch of training data).
    fn open_train(
        &self,
        data_dir: &Path,
        config: &Value,
        seed: u64,
        rank: usize,
        world: usize,
    ) -> std::result::Result<BatchStream, DataStreamError>;
    /// The fixed evaluation batches (the same every time).
    fn open_eval(
        &self,
        data_dir: &Path,
        config: &Value,
    ) -> std::result::Result<BatchStream, DataStreamError>;
    /// Reference convergence points (RCP JSON in the official format).
    fn rcp_json(&self) -> &'static str;
}

/// A configuration as the benchmark's hyperparameters; an error names the
/// offending key (the first whose value alone, on the defaults, fails).
fn parse<T>(config: &Value) -> std::result::Result<T, ConfigError>
where
    T: serde::de::DeserializeOwned + serde::Serialize + Default,
{
    serde_json::from_value(config.clone()).map_err(|e| {
        let defaults = serde_json::to_value(T::default()).unwrap_or(Value::Null);
        let culprit = config.as_object().and_then(|obj| {
            obj.iter().find_map(|(k, v)| {
                let mut one = defaults.clone();
                one.as_object_mut()?.insert(k.clone(), v.clone());
                serde_json::from_value::<T>(one).is_err().then_some(k)
            })
        });
        match culprit {
            Some(k) => ConfigError::Key {
                key: k.clone(),
                source: e,
            },
            None => ConfigError::Invalid(e),
        }
    })
}

fn weights_hash(params: &[f32]) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for p in params {
        h.update(p.to_le_bytes());
    }
    hex::encode(h.finalize())
}

/// Eval point k (1-based): the first multiple of `gbs` at or above k × every.
pub fn eval_point(k: u64, every: u64, gbs: u64) -> u64 {
    (k * every).div_ceil(gbs) * gbs
}

fn schedule_name(decay: &crate::DecayKind) -> String {
    match decay {
        crate::DecayKind::Cosine => "cosine with linear warmup".into(),
        crate::DecayKind::Polynomial { power } => {
            format!("polynomial (power {power}) with linear warmup")
        }
    }
}

fn fixed(key: &'static str, value: Value) -> LoggedParam {
    LoggedParam {
        key,
        check: Check::Equals(value.clone()),
        value,
        fixed: true,
    }
}

fn tunable(key: &'static str, value: Value, check: Check) -> LoggedParam {
    LoggedParam {
        key,
        value,
        fixed: false,
        check,
    }
}

// ---------------------------------------------------------------------------
// mini_resnet

pub struct MiniResnet {
    spec: BenchmarkSpec,
}

pub static MINI_RESNET: MiniResnet = MiniResnet {
    spec: BenchmarkSpec {
        name: "mini_resnet",
        summary: "small ResNet (residual blocks, batch norm) on Fashion-MNIST, top-1 accuracy",
        datasets: &["fashion_mnist"],
        metric: MetricSpec {
            key: "eval_accuracy",
            name: "top-1 accuracy",
            direction: Direction::HigherIsBetter,
            target: 0.85,
            bound: 1.0,
        },
        eval_every_samples: 12_288,
        eval_samples: 10_000,
        train_samples: 60_000,
        runs: 5,
        budget_minutes: 30.0,
        fixed_fields: &[
            "image_size",
            "num_classes",
            "base_width",
            "blocks",
            "zero_init_residual",
            "bn_eps",
            "bn_momentum",
        ],
    },
};

struct ResnetRun(ResnetTrainer);

impl Trainer for ResnetRun {
    fn train_step(&mut self, b: &Batch) -> Result<StepOutput> {
        match b {
            Batch::Images { pixels, labels, .. } => self.0.train_step(pixels, labels),
            _ => Err(batch_error("image")),
        }
    }
    fn compute_gradients(&mut self, b: &Batch) -> Result<(f32, Vec<f32>)> {
        match b {
            Batch::Images { pixels, labels, .. } => self.0.compute_gradients(pixels, labels),
            _ => Err(batch_error("image")),
        }
    }
    fn apply_gradients(&mut self, flat: &[f32]) -> Result<()> {
        self.0.apply_gradients(flat)
    }
    fn evaluate(&mut self, batches: &mut dyn Iterator<Item = Batch>) -> Result<f64> {
        let mut it = batches.filter_map(|b| match b {
            Batch::Images { pixels, labels, .. } => Some((pixels, labels)),
            _ => None,
        });
        self.0.evaluate(&mut it)
    }
    fn flops_per_sample(&self) -> f64 {
        self.0.flops_per_sample()
    }
    fn tokens_per_sample(&self) -> Option<usize> {
        None
    }
    fn num_parameters(&self) -> usize {
        self.0.num_parameters()
    }
    fn current_lr(&self) -> f64 {
        self.0.current_lr()
    }
    fn weights_sha256(&self) -> String {
        weights_hash(self.0.flat_parameters())
    }
}

/// Cycles epochs of an image folder, reshuffled per epoch from the seed.
struct Epochs {
    folder: ImageFolder,
    batch: usize,
    seed: u64,
    rank: usize,
    world: usize,
    epoch: u64,
    current: Option<datasets::ImageBatches>,
}

impl Iterator for Epochs {
    type Item = std::result::Result<Batch, datasets::DataError>;
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.current.is_none() {
                let opts = BatchOptions::new(self.batch)
                    .seed(self.seed, self.epoch)
                    .shuffle(true)
                    .drop_last(true)
                    .shard(self.rank, self.world);
                self.current = Some(self.folder.batches(&opts));
                self.epoch += 1;
            }
            match self.current.as_mut().expect("set above").next() {
                Some(Ok(b)) => {
                    return Some(Ok(Batch::Images {
                        pixels: b.pixels,
                        labels: b.labels,
                        n: b.n,
                    }));
                }
                Some(Err(e)) => return Some(Err(e)),
                None => self.current = None,
            }
        }
    }
}

impl Benchmark for MiniResnet {
    fn spec(&self) -> &BenchmarkSpec {
        &self.spec
    }
    fn default_config(&self) -> Value {
        serde_json::to_value(ResnetHparams::default()).expect("serialisable")
    }
    fn validate(&self, config: &Value) -> std::result::Result<(), ConfigError> {
        let hp: ResnetHparams = parse(config)?;
        if hp.batch_size == 0 {
            return Err(ConfigError::ZeroBatchSize);
        }
        if hp.warmup_steps > hp.total_steps {
            return Err(ConfigError::WarmupExceedsTotal);
        }
        Ok(())
    }
    fn global_batch_size(&self, config: &Value) -> usize {
        parse::<ResnetHparams>(config)
            .map(|h| h.batch_size)
            .unwrap_or(0)
    }
    fn max_samples(&self, config: &Value) -> u64 {
        parse::<ResnetHparams>(config)
            .map(|h| h.total_steps * h.batch_size as u64)
            .unwrap_or(0)
    }
    fn logged_params(&self, config: &Value) -> Vec<LoggedParam> {
        let hp: ResnetHparams = parse(config).unwrap_or_default();
        vec![
            fixed("opt_name", json!("sgd")),
            tunable("global_batch_size", json!(hp.batch_size), Check::Positive),
            fixed("gradient_accumulation_steps", json!(1)),
            tunable("opt_base_learning_rate", json!(hp.base_lr), Check::Positive),
            tunable(
                "opt_end_learning_rate",
                json!(hp.end_lr),
                Check::NonNegative,
            ),
            tunable(
                "opt_learning_rate_warmup_steps",
                json!(hp.warmup_steps),
                Check::NonNegative,
            ),
            tunable(
                "opt_learning_rate_decay_steps",
                json!(hp.total_steps - hp.warmup_steps),
                Check::NonNegative,
            ),
            tunable(
                "opt_learning_rate_decay_schedule",
                json!(schedule_name(&hp.decay)),
                Check::Logged,
            ),
            tunable("opt_momentum", json!(hp.momentum), Check::NonNegative),
            tunable(
                "opt_weight_decay",
                json!(hp.weight_decay),
                Check::NonNegative,
            ),
            tunable("max_steps", json!(hp.total_steps), Check::Positive),
            fixed("model_base_width", json!(hp.base_width)),
            fixed("model_blocks", json!(hp.blocks)),
        ]
    }
    fn build(
        &self,
        config: &Value,
        seed: u64,
        device: &Device,
        engine: Engine,
    ) -> Result<Box<dyn Trainer>> {
        let hp: ResnetHparams = parse(config).map_err(|e| crate::err(e.to_string()))?;
        Ok(Box::new(ResnetRun(ResnetTrainer::with_engine(
            &hp, seed, device, engine,
        )?)))
    }
    fn open_train(
        &self,
        data_dir: &Path,
        config: &Value,
        seed: u64,
        rank: usize,
        world: usize,
    ) -> std::result::Result<BatchStream, DataStreamError> {
        let hp: ResnetHparams = parse(config)?;
        let folder = ImageFolder::open(&datasets::dataset_dir("fashion_mnist", data_dir), "train")?;
        Ok(Box::new(Epochs {
            folder,
            batch: hp.batch_size,
            seed,
            rank,
            world,
            epoch: 0,
            current: None,
        }))
    }
    fn open_eval(
        &self,
        data_dir: &Path,
        _config: &Value,
    ) -> std::result::Result<BatchStream, DataStreamError> {
        let folder = ImageFolder::open(&datasets::dataset_dir("fashion_mnist", data_dir), "val")?;
        let opts = BatchOptions::new(500).shuffle(false).drop_last(false);
        Ok(Box::new(
            folder
                .batches(&opts)
                .take(self.spec.eval_samples.div_ceil(500) as usize)
                .map(|b| {
                    b.map(|b| Batch::Images {
                        pixels: b.pixels,
                        labels: b.labels,
                        n: b.n,
                    })
                }),
        ))
    }
    fn rcp_json(&self) -> &'static str {
        include_str!("../rcps/rcps_mini_resnet.json")
    }
}

// ---------------------------------------------------------------------------
// mini_llm

pub struct MiniLlm {
    spec: BenchmarkSpec,
}

/// Evaluation set of mini_llm: the first sequences of the held-out plays.
pub const MINI_LLM_EVAL_SEQUENCES: u64 = 256;

pub static MINI_LLM: MiniLlm = MiniLlm {
    spec: BenchmarkSpec {
        name: "mini_llm",
        summary: "Llama-style decoder (RMSNorm, RoPE, SwiGLU, causal attention) on Shakespeare, validation log-perplexity",
        datasets: &["shakespeare"],
        metric: MetricSpec {
            key: "eval_accuracy",
            name: "validation log-perplexity (nats per token)",
            direction: Direction::LowerIsBetter,
            target: 4.26,
            bound: 0.0,
        },
        eval_every_samples: 1_536,
        eval_samples: MINI_LLM_EVAL_SEQUENCES,
        train_samples: 12_927,
        runs: 5,
        budget_minutes: 30.0,
        fixed_fields: &[
            "vocab_size",
            "seq_len",
            "d_model",
            "n_layers",
            "n_heads",
            "ffn_hidden",
            "rope_base",
            "norm_eps",
            "beta1",
            "beta2",
            "eps",
            "weight_decay",
            "grad_clip",
        ],
    },
};

struct LlmRun(LlmTrainer);

impl Trainer for LlmRun {
    fn train_step(&mut self, b: &Batch) -> Result<StepOutput> {
        match b {
            Batch::Tokens {
                inputs, targets, ..
            } => self.0.train_step(inputs, targets),
            _ => Err(batch_error("token")),
        }
    }
    fn compute_gradients(&mut self, b: &Batch) -> Result<(f32, Vec<f32>)> {
        match b {
            Batch::Tokens {
                inputs, targets, ..
            } => self.0.compute_gradients(inputs, targets),
            _ => Err(batch_error("token")),
        }
    }
    fn apply_gradients(&mut self, flat: &[f32]) -> Result<()> {
        self.0.apply_gradients(flat)
    }
    fn prepare(&mut self, local_samples: usize) -> Result<()> {
        self.0.prepare(local_samples)
    }
    fn evaluate(&mut self, batches: &mut dyn Iterator<Item = Batch>) -> Result<f64> {
        let mut it = batches.filter_map(|b| match b {
            Batch::Tokens {
                inputs, targets, ..
            } => Some((inputs, targets)),
            _ => None,
        });
        self.0.evaluate(&mut it)
    }
    fn flops_per_sample(&self) -> f64 {
        self.0.flops_per_sample()
    }
    fn tokens_per_sample(&self) -> Option<usize> {
        Some(self.0.tokens_per_sample())
    }
    fn num_parameters(&self) -> usize {
        self.0.num_parameters()
    }
    fn current_lr(&self) -> f64 {
        self.0.current_lr()
    }
    fn weights_sha256(&self) -> String {
        weights_hash(self.0.flat_parameters())
    }
}

fn token_stream(it: datasets::TokenBatches) -> BatchStream {
    Box::new(it.map(|b| {
        Ok(Batch::Tokens {
            inputs: b.inputs,
            targets: b.targets,
            n: b.n,
        })
    }))
}

impl Benchmark for MiniLlm {
    fn spec(&self) -> &BenchmarkSpec {
        &self.spec
    }
    fn default_config(&self) -> Value {
        serde_json::to_value(LlmHparams::default()).expect("serialisable")
    }
    fn validate(&self, config: &Value) -> std::result::Result<(), ConfigError> {
        let hp: LlmHparams = parse(config)?;
        if hp.batch_size == 0 {
            return Err(ConfigError::ZeroBatchSize);
        }
        if hp.warmup_steps > hp.total_steps {
            return Err(ConfigError::WarmupExceedsTotal);
        }
        if hp.vocab_size != datasets::SHAKESPEARE_VOCAB_SIZE {
            return Err(ConfigError::VocabSize {
                expected: datasets::SHAKESPEARE_VOCAB_SIZE,
            });
        }
        Ok(())
    }
    fn global_batch_size(&self, config: &Value) -> usize {
        parse::<LlmHparams>(config)
            .map(|h| h.batch_size)
            .unwrap_or(0)
    }
    fn max_samples(&self, config: &Value) -> u64 {
        parse::<LlmHparams>(config)
            .map(|h| h.total_steps * h.batch_size as u64)
            .unwrap_or(0)
    }
    fn linear_precision(&self, config: &Value) -> &'static str {
        parse::<LlmHparams>(config)
            .map(|h| h.precision.as_str())
            .unwrap_or("fp32")
    }
    fn logged_params(&self, config: &Value) -> Vec<LoggedParam> {
        let hp: LlmHparams = parse(config).unwrap_or_default();
        vec![
            fixed("opt_name", json!("adamw")),
            tunable("global_batch_size", json!(hp.batch_size), Check::Positive),
            fixed("gradient_accumulation_steps", json!(1)),
            fixed("max_sequence_length", json!(hp.seq_len)),
            tunable("opt_base_learning_rate", json!(hp.base_lr), Check::Positive),
            tunable(
                "opt_end_learning_rate",
                json!(hp.end_lr),
                Check::NonNegative,
            ),
            tunable(
                "opt_learning_rate_warmup_steps",
                json!(hp.warmup_steps),
                Check::NonNegative,
            ),
            tunable(
                "opt_learning_rate_decay_steps",
                json!(hp.total_steps - hp.warmup_steps),
                Check::NonNegative,
            ),
            fixed(
                "opt_learning_rate_decay_schedule",
                json!("cosine with linear warmup"),
            ),
            fixed("opt_adamw_beta_1", json!(hp.beta1)),
            fixed("opt_adamw_beta_2", json!(hp.beta2)),
            fixed("opt_adamw_epsilon", json!(hp.eps)),
            fixed("opt_adamw_weight_decay", json!(hp.weight_decay)),
            fixed("opt_gradient_clip_norm", json!(hp.grad_clip)),
            tunable("max_steps", json!(hp.total_steps), Check::Positive),
            fixed("model_d_model", json!(hp.d_model)),
            fixed("model_n_layers", json!(hp.n_layers)),
            fixed("model_n_heads", json!(hp.n_heads)),
            fixed("model_vocab_size", json!(hp.vocab_size)),
        ]
    }
    fn build(
        &self,
        config: &Value,
        seed: u64,
        device: &Device,
        engine: Engine,
    ) -> Result<Box<dyn Trainer>> {
        let hp: LlmHparams = parse(config).map_err(|e| crate::err(e.to_string()))?;
        Ok(Box::new(LlmRun(LlmTrainer::with_engine(
            &hp, seed, device, engine,
        )?)))
    }
    fn open_train(
        &self,
        data_dir: &Path,
        config: &Value,
        seed: u64,
        rank: usize,
        world: usize,
    ) -> std::result::Result<BatchStream, DataStreamError> {
        let hp: LlmHparams = parse(config)?;
        let ds = TokenDataset::open(&datasets::dataset_dir("shakespeare", data_dir), "train")?;
        let it = ds.train_batches(hp.batch_size, hp.seq_len, seed, rank, world)?;
        Ok(token_stream(it))
    }
    fn open_eval(
        &self,
        data_dir: &Path,
        config: &Value,
    ) -> std::result::Result<BatchStream, DataStreamError> {
        let hp: LlmHparams = parse(config)?;
        let ds = TokenDataset::open(&datasets::dataset_dir("shakespeare", data_dir), "val")?;
        let it = ds.eval_batches(32, hp.seq_len, self.spec.eval_samples as usize)?;
        Ok(token_stream(it))
    }
    fn rcp_json(&self) -> &'static str {
        include_str!("../rcps/rcps_mini_llm.json")
    }
}

/// Every benchmark referee runs.
pub fn registry() -> [&'static dyn Benchmark; 2] {
    [&MINI_RESNET, &MINI_LLM]
}

/// Look a benchmark up by name.
pub fn find(name: &str) -> Option<&'static dyn Benchmark> {
    registry().into_iter().find(|b| b.spec().name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eval_points_round_up_to_whole_batches() {
        assert_eq!(eval_point(1, 12_288, 128), 12_288);
        assert_eq!(eval_point(1, 12_288, 100), 12_300);
        assert_eq!(eval_point(2, 12_288, 100), 24_600);
        assert_eq!(eval_point(3, 1_536, 16), 4_608);
    }

    #[test]
    fn metric_direction() {
        let m = &MINI_RESNET.spec().metric;
        assert!(m.reached(0.9) && !m.reached(0.5) && !m.reached(1.5));
        let l = &MINI_LLM.spec().metric;
        assert!(l.reached(l.target - 0.1) && !l.reached(l.target + 0.1) && !l.reached(-1.0));
    }

    #[test]
    fn declarations_are_consistent() {
        for b in registry() {
            let cfg = b.default_config();
            b.validate(&cfg).unwrap();
            let logged = b.logged_params(&cfg);
            assert_eq!(
                logged
                    .iter()
                    .find(|p| p.key == "global_batch_size")
                    .unwrap()
                    .value,
                json!(b.global_batch_size(&cfg))
            );
            for f in b.spec().fixed_fields {
                assert!(
                    cfg.get(*f).is_some(),
                    "{} declares fixed field {f} that its config lacks",
                    b.spec().name
                );
            }
            assert!(b.max_samples(&cfg) > b.spec().eval_every_samples);
            assert!(find(b.spec().name).is_some());
        }
    }
}
