//! The life of one run, as the harness owns it:
//!
//! 1. `cache_clear` (the page cache is dropped where permitted);
//! 2. `init_start`, the submission keys, the seed, every hyperparameter,
//!    provenance; the model is built (initialisation touches no data);
//!    `init_stop` — a run whose initialisation exceeds the budget (30 min
//!    closed, 4 h open) stops there, aborted, and its log fails the check;
//! 3. `run_start`, immediately before the first touch of training data;
//! 4. training in blocks between evaluations; an evaluation happens after
//!    the first step at which the samples seen reach k × the declared
//!    cadence; throughput is logged per block;
//! 5. `run_stop` with status `success` at the first evaluation that meets
//!    the target, or `aborted` when the schedule (max samples) or the time
//!    budget is exhausted;
//! 6. the log is finalised atomically.
//!
//! With several ranks (see [`crate::collective`]), a failed peer ends the
//! run on the others: a collective that fails (an error, the launcher's
//! SIGTERM, or no progress for the peer timeout) makes rank 0 log
//! `run_stop` aborted with the reason (naming the failed rank when its
//! pid file shows it gone), finalise the log, and return an error, so the
//! process exits non-zero. Errors of the model or the data still leave the
//! log unfinished (`.partial`).

use crate::common::cache::{CacheClear, drop_page_cache};
use crate::common::clock::Clock;
use crate::common::logger::{IntoValue, MlLogger};
use crate::provenance::CodeIdentity;
use crate::session::collective::Collective;
use crate::session::cpu_plans::{CpuPlanRun, cpu_name};
use crate::session::error::{CommError, ModelError, SessionError};
use referee_rules::value::{Dict, Value};
use referee_workloads::Device;
use referee_workloads::bench::{Batch, Benchmark, Trainer, eval_point};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Everything a run needs, resolved and validated.
pub struct RunPlan {
    pub bench: &'static dyn Benchmark,
    /// Full hyperparameter configuration (validated).
    pub config: serde_json::Value,
    pub config_sha256: String,
    pub division: String,
    pub org: String,
    pub platform: String,
    pub data_dir: PathBuf,
    pub out_dir: PathBuf,
    pub device: Device,
    pub device_name: String,
    /// What trains the model on `device` (the CPU engine and its kernels, or candle's graph).
    pub engine: referee_workloads::Engine,
    /// Stop at the first evaluation that meets the target (off for
    /// calibration runs, which follow the whole schedule).
    pub stop_at_target: bool,
    pub budget_minutes: f64,
    pub init_budget_ms: u64,
    pub cache_clear: bool,
    pub dataset_fingerprints: BTreeMap<String, String>,
    pub code: CodeIdentity,
    pub env: BTreeMap<String, String>,
    /// Peak FLOP/s of the device, when known (for MFU).
    pub peak_flops: Option<f64>,
    /// Throughput mode: a fixed number of steps, no evaluation.
    pub throughput: Option<ThroughputPlan>,
    /// An artificial delay added to every step (to test regression gates).
    pub step_delay_ms: u64,
    /// How the CPU engine's products are planned (measured once per
    /// machine, or the hand-chosen blocking).
    pub cpu_plan: crate::session::cpu_plans::CpuPlanSetting,
}

/// `--mode throughput --steps S --window A..B`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ThroughputPlan {
    pub steps: u64,
    /// Steps [from, to) averaged (1-based step numbers).
    pub window: (u64, u64),
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    Success,
    Aborted(String),
}

impl Status {
    pub fn as_str(&self) -> &'static str {
        match self {
            Status::Success => "success",
            Status::Aborted(_) => "aborted",
        }
    }
}

/// Throughput figures.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub struct Throughput {
    pub samples_per_second: f64,
    pub tokens_per_second: Option<f64>,
    pub flops_per_sample: f64,
    pub achieved_flops: f64,
    pub mfu: Option<f64>,
    pub step_seconds: f64,
}

/// What a run produced.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunResult {
    pub index: usize,
    pub seed: u64,
    pub status: crate::outcome::RunStatus,
    pub reason: Option<String>,
    pub samples: u64,
    /// (samples_count, metric, seconds since run_start).
    pub evals: Vec<(u64, f64, f64)>,
    pub init_ms: u64,
    pub run_start_ms: u64,
    pub run_stop_ms: u64,
    pub time_to_train_minutes: f64,
    pub throughput: Throughput,
    pub initial_weights_sha256: String,
    pub log: Option<PathBuf>,
    /// The run's time-stamps (crate::tsa), with `--tsa`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tsa: Option<serde_json::Value>,
    /// The run's power log and its energy (`--power`; crate::power).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub power: Option<crate::power::RunPower>,
}

/// Progress notifications (the CLI draws a progress bar from them). `Sync`:
/// the training loop that calls it runs on a worker of the compute pool
/// ([`run_once`]).
pub trait Observer: Sync {
    fn phase(&self, _what: &str) {}
    /// Something the run goes on despite (it costs time, not a result).
    fn warn(&self, _what: &str) {}
    fn step(&self, _samples: u64, _max_samples: u64, _loss: f32, _samples_per_second: f64) {}
    fn eval(&self, _samples: u64, _metric: f64) {}
}

/// An observer that ignores everything.
pub struct Quiet;
impl Observer for Quiet {}

/// A dictionary value of the log from its (key, value) pairs, in order.
fn value_dict(pairs: Vec<(&str, Value)>) -> Value {
    let mut d = Dict::new();
    for (k, v) in pairs {
        d.insert(k.to_string(), v);
    }
    Value::Dict(d)
}

fn json_to_value(v: &serde_json::Value) -> Value {
    match v {
        serde_json::Value::Null => Value::None,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => n
            .as_i64()
            .map(Value::Int)
            .unwrap_or_else(|| Value::Float(n.as_f64().unwrap_or(f64::NAN))),
        serde_json::Value::String(s) => Value::Str(s.clone()),
        serde_json::Value::Array(a) => Value::List(a.iter().map(json_to_value).collect()),
        serde_json::Value::Object(m) => {
            let mut d = Dict::new();
            for (k, x) in m {
                d.insert(k.clone(), json_to_value(x));
            }
            Value::Dict(d)
        }
    }
}

/// Path of run `index`'s log in `out_dir`.
pub fn log_path(out_dir: &Path, index: usize) -> PathBuf {
    out_dir.join(format!("result_{index}.txt"))
}

fn samples_meta(samples: u64) -> Vec<(&'static str, Value)> {
    vec![("samples_count", Value::Int(samples as i64))]
}

/// Why a step failed: the model (the run errs, its log stays `.partial`)
/// or the communication between ranks (the run ends aborted).
enum StepError {
    Compute(ModelError),
    Comm(CommError),
}

/// One training step, data-parallel when the world is larger than 1.
fn step(
    trainer: &mut dyn Trainer,
    batch: &Batch,
    coll: &mut dyn Collective,
) -> Result<f32, StepError> {
    if coll.world_size() == 1 {
        return trainer
            .train_step(batch)
            .map(|o| o.loss)
            .map_err(|e| StepError::Compute(e.into()));
    }
    let (loss, mut grads) = trainer
        .compute_gradients(batch)
        .map_err(|e| StepError::Compute(e.into()))?;
    coll.all_reduce_mean(&mut grads).map_err(StepError::Comm)?;
    trainer
        .apply_gradients(&grads)
        .map_err(|e| StepError::Compute(e.into()))?;
    Ok(loss)
}

/// A communication failure as the log's `run_stop_reason` gives it.
fn peer_failure(plan: &RunPlan, coll: &dyn Collective, e: &dyn std::fmt::Display) -> String {
    let dead = crate::session::launch::dead_peers(&plan.out_dir, coll.world_size(), coll.rank());
    let who = if dead.is_empty() {
        String::new()
    } else {
        format!("; {} exited", dead.join(", "))
    };
    format!(
        "rank {} of {} stopped: {e}{who}",
        coll.rank(),
        coll.world_size()
    )
}

/// Execute run `index` with `seed` (rank 0's, on every rank). Rank 0 writes
/// the log. Errors of the data or the model, and communication errors
/// before training, leave the log unfinished (`.partial`); a communication
/// failure during training (a peer failed, the launcher's SIGTERM, the peer
/// timeout) ends the log with `run_stop` aborted and is returned as an
/// error, since the ranks cannot go on to another run.
///
/// The stages: [`clear_cache`], [`initialise`] (`init_start` … `init_stop`),
/// [`Training::run`] (`run_start`, blocks, evaluations), [`finish`]
/// (`run_stop`, the log renamed into place).
pub fn run_once(
    plan: &RunPlan,
    index: usize,
    seed: u64,
    clock: Arc<dyn Clock>,
    coll: &mut dyn Collective,
    obs: &dyn Observer,
) -> Result<RunResult, SessionError> {
    let path = log_path(&plan.out_dir, index);
    if coll.world_size() > 1 {
        // The launcher's SIGTERM (a peer failed, the job was cancelled)
        // becomes an aborted log instead of a torn one.
        crate::common::harness_process::install_termination_handlers();
    }
    // Every rank uses rank 0's seed (ranks started without --seed draw
    // different ones): identical initial weights on every rank; the data
    // loaders split each global batch by rank.
    let seed = if coll.world_size() > 1 {
        coll.broadcast_f64(seed as f64)? as u64
    } else {
        seed
    };
    let mut log = if coll.rank() == 0 {
        MlLogger::create(&path, clock.clone()).map_err(|e| SessionError::io(&path, e))?
    } else {
        MlLogger::silent(clock.clone())
    };
    clear_cache(plan, index, coll.rank() == 0, &mut log, obs);
    let init = initialise(plan, seed, coll, &mut log, obs)?;
    let mut training = Training::new(plan, init.trainer, clock, coll, obs, &mut log);
    if init.init_ms >= plan.init_budget_ms {
        training.status = Status::Aborted(format!(
            "initialisation took {:.1} min; the {} division allows {:.0} min",
            init.init_ms as f64 / 60_000.0,
            plan.division,
            plan.init_budget_ms as f64 / 60_000.0
        ));
    } else {
        on_compute_pool(|| training.run(seed))?;
    }
    let outcome = training.outcome();
    finish(
        plan,
        index,
        seed,
        log,
        outcome,
        init.init_ms,
        init.weights,
        &path,
    )
}

/// Runs `f` on a worker of the compute pool (the global rayon pool; this
/// thread waits): the training loop runs there, so that a step's parallel
/// loops (about 150 a `mini_llm` step) are joins between the pool's own
/// threads, not jobs this thread hands to the pool and sleeps on, a third
/// thread on the cores (a wake-up each, about a hundred times the cost of
/// a join between the pool's threads: `pool_probe` measures both).
fn on_compute_pool<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    rayon::scope(|_| f())
}

/// Stage 1: drop the page cache (once per node: here, rank 0) and log
/// `cache_clear` with what happened.
fn clear_cache(plan: &RunPlan, index: usize, leader: bool, log: &mut MlLogger, obs: &dyn Observer) {
    obs.phase("clearing caches");
    let cache = if plan.cache_clear && leader {
        drop_page_cache()
    } else {
        CacheClear::Skipped
    };
    if let CacheClear::NotPermitted(why) = &cache
        && index == 0
    {
        eprintln!(
            "referee: warning: page cache not dropped: {why}; the log says so (cache_clear metadata)"
        );
    }
    log.event("cache_clear", cache.dropped(), &cache.metadata());
}

/// What the initialisation produced.
struct Initialised {
    trainer: Box<dyn Trainer>,
    /// sha256 of the initial weights.
    weights: String,
    /// `init_stop − init_start`.
    init_ms: u64,
}

/// Stage 2: `init_start`, the submission keys, the seed, every
/// hyperparameter, the model built (touching no data), provenance, the
/// ranks' agreement on the initial weights, `init_stop`.
fn initialise(
    plan: &RunPlan,
    seed: u64,
    coll: &mut dyn Collective,
    log: &mut MlLogger,
    obs: &dyn Observer,
) -> Result<Initialised, SessionError> {
    let spec = plan.bench.spec();
    let init_start = log.start("init_start", (), &[]);
    log.event("submission_org", plan.org.as_str(), &[]);
    log.event("submission_platform", plan.platform.as_str(), &[]);
    log.event("submission_division", plan.division.as_str(), &[]);
    log.event("submission_benchmark", spec.name, &[]);
    log.event("submission_status", "research", &[]);
    log.event("seed", seed, &[]);
    log.event("train_samples", spec.train_samples, &[]);
    log.event("eval_samples", spec.eval_samples, &[]);
    for p in plan.bench.logged_params(&plan.config) {
        log.event(p.key, json_to_value(&p.value), &[]);
    }
    log.event(
        "lowest_numerical_precision_in_linear",
        plan.bench.linear_precision(&plan.config),
        &[],
    );
    // The CPU planner's choices measured on this machine before, if any.
    let mut cpu_plan = match plan.engine {
        referee_workloads::Engine::Cpu(isa) => Some(CpuPlanRun::begin(
            &plan.cpu_plan,
            isa,
            rayon::current_num_threads(),
            cpu_name(&std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default()),
        )),
        referee_workloads::Engine::Graph => None,
    };
    obs.phase("building the model");
    let build_error = |e: referee_workloads::Error| SessionError::Build {
        benchmark: spec.name,
        source: e.into(),
    };
    let mut trainer = plan
        .bench
        .build(&plan.config, seed, &plan.device, plan.engine)
        .map_err(build_error)?;
    let weights = trainer.weights_sha256();
    let cpu_plan = match &mut cpu_plan {
        Some(p) => {
            obs.phase("planning the CPU products");
            let local = plan.bench.global_batch_size(&plan.config) / coll.world_size().max(1);
            trainer.prepare(local).map_err(build_error)?;
            let record = p.finish();
            for w in &p.warnings {
                obs.warn(w);
            }
            Some(record)
        }
        None => None,
    };
    log.event(
        "referee_provenance",
        provenance_value(plan, seed, &weights, coll.world_size(), cpu_plan),
        &[],
    );
    log.event(
        "model_parameters",
        trainer.num_parameters() as u64,
        &[("flops_per_sample", Value::Float(trainer.flops_per_sample()))],
    );
    obs.phase("initialised");
    agree_on_weights(plan, seed, &weights, coll)?;
    let init_stop = log.end("init_stop", (), &[]);
    Ok(Initialised {
        trainer,
        weights,
        init_ms: init_stop.saturating_sub(init_start),
    })
}

/// The `referee_provenance` event: what produced this run.
fn provenance_value(
    plan: &RunPlan,
    seed: u64,
    weights: &str,
    world_size: usize,
    cpu_plan: Option<serde_json::Value>,
) -> Value {
    let strings = |m: &BTreeMap<String, String>| {
        let mut d = Dict::new();
        for (k, v) in m {
            d.insert(k.clone(), Value::str(v.clone()));
        }
        Value::Dict(d)
    };
    let mut pairs = vec![
        (
            "referee_version",
            Value::str(plan.code.referee_version.clone()),
        ),
        ("git_commit", Value::str(plan.code.git_commit.clone())),
        (
            "uncommitted_diff_sha256",
            Value::str(plan.code.uncommitted_diff_sha256.clone()),
        ),
        ("binary_sha256", Value::str(plan.code.binary_sha256.clone())),
        ("config_sha256", Value::str(plan.config_sha256.clone())),
        ("dataset_fingerprints", strings(&plan.dataset_fingerprints)),
        ("seed", Value::Int(seed as i64)),
        ("initial_weights_sha256", Value::str(weights.to_string())),
        ("device", Value::str(plan.device_name.clone())),
        ("engine", Value::str(plan.engine.name())),
        ("world_size", Value::Int(world_size as i64)),
        ("environment", strings(&plan.env)),
    ];
    if let Some(p) = cpu_plan {
        pairs.push(("cpu_plan", json_to_value(&p)));
    }
    value_dict(pairs)
}

/// With several ranks: every rank must start from the same weights (the
/// same seed); then all wait for each other, and each leaves its pid file.
fn agree_on_weights(
    plan: &RunPlan,
    seed: u64,
    weights: &str,
    coll: &mut dyn Collective,
) -> Result<(), SessionError> {
    if coll.world_size() > 1 {
        let mine = u64::from_str_radix(weights.get(..12).unwrap_or("0"), 16).unwrap_or(0) as f64;
        let root = coll.broadcast_f64(mine)?;
        if !coll.all_agree(root == mine)? {
            return Err(SessionError::WeightsDiffer {
                seed,
                rank: coll.rank(),
                weights: weights.get(..12).unwrap_or("").to_string(),
            });
        }
    }
    coll.barrier()?;
    if coll.world_size() > 1
        && let Err(e) = crate::session::launch::write_pid_file(&plan.out_dir, coll.rank())
    {
        eprintln!(
            "referee: warning: rank {}: cannot write its pid file under {}: {e}",
            coll.rank(),
            plan.out_dir.display()
        );
    }
    Ok(())
}

/// Samples and seconds summed over a span of steps.
#[derive(Default, Clone, Copy)]
struct Span {
    samples: u64,
    seconds: f64,
}

impl Span {
    fn add(&mut self, samples: u64, seconds: f64) {
        self.samples += samples;
        self.seconds += seconds;
    }
}

/// Whether training goes on after a step.
enum Flow {
    Continue,
    Stop,
}

/// Stage 3: the state of the training loop, from `run_start` to the step
/// after which the run ends.
struct Training<'a> {
    plan: &'a RunPlan,
    trainer: Box<dyn Trainer>,
    clock: Arc<dyn Clock>,
    coll: &'a mut dyn Collective,
    obs: &'a dyn Observer,
    log: &'a mut MlLogger,
    gbs: u64,
    run_start_ms: u64,
    /// `clock.seconds()` at `run_start`.
    start_s: f64,
    samples: u64,
    steps_done: u64,
    /// Evaluations so far: (samples_count, metric, seconds since run_start).
    evals: Vec<(u64, f64, f64)>,
    /// The k of the next evaluation (after k × the cadence) and its samples.
    next_eval_k: u64,
    next_eval: u64,
    status: Status,
    /// Set when the ranks can no longer communicate: the run ends aborted
    /// with this reason and the process must not go on to another run.
    fatal: Option<String>,
    /// Every training step; the current block; throughput mode's window.
    all: Span,
    block: Span,
    window: Span,
    /// Throughput mode: the window's figures (what the log's `throughput`
    /// event holds), which the run then reports as its throughput.
    window_figures: Option<Throughput>,
}

/// What training left for the end of the run.
struct Outcome {
    trainer: Box<dyn Trainer>,
    status: Status,
    fatal: Option<String>,
    samples: u64,
    evals: Vec<(u64, f64, f64)>,
    run_start_ms: u64,
    all: Span,
    window_figures: Option<Throughput>,
    gbs: u64,
}

impl<'a> Training<'a> {
    /// `run_start`: the clock starts here, immediately before the first
    /// touch of training data.
    fn new(
        plan: &'a RunPlan,
        trainer: Box<dyn Trainer>,
        clock: Arc<dyn Clock>,
        coll: &'a mut dyn Collective,
        obs: &'a dyn Observer,
        log: &'a mut MlLogger,
    ) -> Self {
        let run_start_ms = log.start("run_start", (), &[]);
        let gbs = plan.bench.global_batch_size(&plan.config) as u64;
        let start_s = clock.seconds();
        Training {
            plan,
            trainer,
            clock,
            coll,
            obs,
            log,
            gbs,
            run_start_ms,
            start_s,
            samples: 0,
            steps_done: 0,
            evals: Vec::new(),
            next_eval_k: 1,
            next_eval: eval_point(1, plan.bench.spec().eval_every_samples, gbs),
            status: Status::Aborted(if plan.stop_at_target {
                "the schedule ended before the target".into()
            } else {
                "calibration run: the whole schedule, not stopping at the target".into()
            }),
            fatal: None,
            all: Span::default(),
            block: Span::default(),
            window: Span::default(),
            window_figures: None,
        }
    }

    /// Train in blocks until the target, the end of the schedule, the
    /// budget, or a failure. Errors of the model or the data are returned.
    fn run(&mut self, seed: u64) -> Result<(), SessionError> {
        let plan = self.plan;
        let mut train = plan
            .bench
            .open_train(
                &plan.data_dir,
                &plan.config,
                seed,
                self.coll.rank(),
                self.coll.world_size(),
            )
            .map_err(SessionError::OpenTraining)?;
        self.log.start("block_start", (), &samples_meta(0));
        loop {
            if self.interrupted_or_out_of_time() {
                return Ok(());
            }
            let t0 = self.clock.seconds();
            let batch = match train.next() {
                Some(Ok(b)) => b,
                Some(Err(e)) => return Err(SessionError::ReadTraining(e)),
                None => return Err(SessionError::TrainingDataEnded),
            };
            let loss = match step(self.trainer.as_mut(), &batch, self.coll) {
                Ok(l) => l,
                Err(StepError::Compute(e)) => return Err(SessionError::Step(e)),
                Err(StepError::Comm(e)) => {
                    self.fatal = Some(peer_failure(plan, self.coll, &e));
                    return Ok(());
                }
            };
            if plan.step_delay_ms > 0 {
                std::thread::sleep(std::time::Duration::from_millis(plan.step_delay_ms));
            }
            if !loss.is_finite() {
                self.status = Status::Aborted(format!("the training loss is {loss}"));
                return Ok(());
            }
            let dt = self.clock.seconds() - t0;
            if let Flow::Stop = self.after_step(loss, dt)? {
                return Ok(());
            }
        }
    }

    /// The launcher's SIGTERM, or the time budget spent: the run ends.
    fn interrupted_or_out_of_time(&mut self) -> bool {
        if let Some(sig) = crate::common::harness_process::termination_signal() {
            self.fatal = Some(peer_failure(
                self.plan,
                self.coll,
                &format!(
                    "interrupted by {} (the launcher stops every rank when one fails or the job is cancelled)",
                    crate::session::launch::signal_name(sig)
                ),
            ));
            return true;
        }
        if self.clock.seconds() - self.start_s > self.plan.budget_minutes * 60.0 {
            self.status = Status::Aborted(format!(
                "the time budget of {} min ran out",
                self.plan.budget_minutes
            ));
            return true;
        }
        false
    }

    /// Count a step; end the block, evaluate, or end the run when due.
    fn after_step(&mut self, loss: f32, dt: f64) -> Result<Flow, SessionError> {
        let gbs = self.gbs;
        self.samples += gbs;
        self.steps_done += 1;
        self.all.add(gbs, dt);
        self.block.add(gbs, dt);
        if let Some(tp) = self.plan.throughput
            && self.steps_done >= tp.window.0
            && self.steps_done < tp.window.1
        {
            self.window.add(gbs, dt);
        }
        let max_samples = self.plan.bench.max_samples(&self.plan.config);
        self.obs.step(
            self.samples,
            self.plan
                .throughput
                .map(|t| t.steps * gbs)
                .unwrap_or(max_samples),
            loss,
            if dt > 0.0 { gbs as f64 / dt } else { 0.0 },
        );
        if let Some(tp) = self.plan.throughput {
            if self.steps_done >= tp.steps {
                self.end_throughput_run(tp);
                return Ok(Flow::Stop);
            }
            return Ok(Flow::Continue);
        }
        let at_eval = self.samples >= self.next_eval;
        let at_end = self.samples >= max_samples;
        if at_eval || at_end {
            self.end_block();
        }
        if at_eval {
            if let Flow::Stop = self.evaluate()? {
                return Ok(Flow::Stop);
            }
            self.next_eval_k += 1;
            self.next_eval = eval_point(
                self.next_eval_k,
                self.plan.bench.spec().eval_every_samples,
                gbs,
            );
        }
        if at_end {
            return Ok(Flow::Stop);
        }
        if at_eval {
            self.log
                .start("block_start", (), &samples_meta(self.samples));
        }
        if self.coll.rank() == 0 && self.steps_done.is_multiple_of(32) {
            let _ = self.log.flush();
        }
        Ok(Flow::Continue)
    }

    /// `block_stop` and the block's `throughput`.
    fn end_block(&mut self) {
        self.log.end("block_stop", (), &samples_meta(self.samples));
        let t = throughput_of(
            self.trainer.as_ref(),
            self.block.samples,
            self.block.seconds,
            self.block.samples / self.gbs,
            self.plan.peak_flops,
        );
        self.log.event(
            "throughput",
            throughput_value(&t),
            &samples_meta(self.samples),
        );
        self.block = Span::default();
    }

    /// Throughput mode's last step: the window's `throughput`.
    fn end_throughput_run(&mut self, tp: ThroughputPlan) {
        let t = throughput_of(
            self.trainer.as_ref(),
            self.window.samples,
            self.window.seconds,
            tp.window.1 - tp.window.0,
            self.plan.peak_flops,
        );
        self.log.event(
            "throughput",
            throughput_value(&t),
            &[
                ("samples_count", Value::Int(self.samples as i64)),
                ("window_start_step", Value::Int(tp.window.0 as i64)),
                ("window_end_step", Value::Int(tp.window.1 as i64)),
            ],
        );
        self.window_figures = Some(t);
        self.status = Status::Aborted("throughput mode: fixed number of steps".into());
    }

    /// One evaluation on the whole evaluation set; `Stop` when the target
    /// is reached (and the run stops there) or the ranks failed.
    fn evaluate(&mut self) -> Result<Flow, SessionError> {
        let plan = self.plan;
        let spec = plan.bench.spec();
        let samples = self.samples;
        self.log.start("eval_start", (), &samples_meta(samples));
        let mut eval = plan
            .bench
            .open_eval(&plan.data_dir, &plan.config)
            .map_err(SessionError::OpenEvaluation)?;
        let mut batches = std::iter::from_fn(|| {
            // The launcher's SIGTERM cuts an evaluation short; its
            // result is then discarded, never logged.
            if crate::common::harness_process::termination_signal().is_some() {
                return None;
            }
            match eval.next() {
                Some(Ok(b)) => Some(b),
                _ => None,
            }
        });
        let local = self.trainer.evaluate(&mut batches);
        if let Some(sig) = crate::common::harness_process::termination_signal() {
            self.fatal = Some(peer_failure(
                plan,
                self.coll,
                &format!(
                    "interrupted by {} during an evaluation (the launcher stops every rank when one fails or the job is cancelled)",
                    crate::session::launch::signal_name(sig)
                ),
            ));
            return Ok(Flow::Stop);
        }
        let local = local.map_err(|e| SessionError::Evaluate(e.into()))?;
        let metric = match self.coll.broadcast_f64(local) {
            Ok(m) => m,
            Err(e) => {
                self.fatal = Some(peer_failure(plan, self.coll, &e));
                return Ok(Flow::Stop);
            }
        };
        self.log
            .event(spec.metric.key, metric, &samples_meta(samples));
        self.log.end("eval_stop", (), &samples_meta(samples));
        self.obs.eval(samples, metric);
        self.evals
            .push((samples, metric, self.clock.seconds() - self.start_s));
        match self.coll.all_agree(spec.metric.reached(metric)) {
            Ok(true) if plan.stop_at_target => {
                self.status = Status::Success;
                Ok(Flow::Stop)
            }
            Ok(_) => Ok(Flow::Continue),
            Err(e) => {
                self.fatal = Some(peer_failure(plan, self.coll, &e));
                Ok(Flow::Stop)
            }
        }
    }

    fn outcome(self) -> Outcome {
        Outcome {
            trainer: self.trainer,
            status: self.status,
            fatal: self.fatal,
            samples: self.samples,
            evals: self.evals,
            run_start_ms: self.run_start_ms,
            all: self.all,
            window_figures: self.window_figures,
            gbs: self.gbs,
        }
    }
}

/// Stage 4: `run_stop` (with the reason when aborted), the log finalised
/// and renamed into place, the run's result.
#[allow(clippy::too_many_arguments)]
fn finish(
    plan: &RunPlan,
    index: usize,
    seed: u64,
    mut log: MlLogger,
    outcome: Outcome,
    init_ms: u64,
    weights: String,
    path: &Path,
) -> Result<RunResult, SessionError> {
    let Outcome {
        trainer,
        mut status,
        fatal,
        samples,
        evals,
        run_start_ms,
        all,
        window_figures,
        gbs,
    } = outcome;
    if let Some(why) = &fatal {
        status = Status::Aborted(why.clone());
    }
    let run_stop = log.end(
        "run_stop",
        (),
        &[
            ("samples_count", Value::Int(samples as i64)),
            ("status", Value::str(status.as_str())),
        ],
    );
    if let Status::Aborted(why) = &status {
        log.event("run_stop_reason", why.as_str(), &[]);
    }
    let final_path = log.finalize().map_err(|e| SessionError::io(path, e))?;
    if let Some(why) = fatal {
        return Err(SessionError::PeersFailed {
            reason: why,
            log: final_path,
        });
    }
    let throughput = window_figures.unwrap_or_else(|| {
        throughput_of(
            trainer.as_ref(),
            all.samples,
            all.seconds,
            all.samples / gbs.max(1),
            plan.peak_flops,
        )
    });
    Ok(RunResult {
        index,
        seed,
        status: match &status {
            Status::Success => crate::outcome::RunStatus::Success,
            Status::Aborted(_) => crate::outcome::RunStatus::Aborted,
        },
        reason: match &status {
            Status::Aborted(w) => Some(w.clone()),
            Status::Success => None,
        },
        samples,
        evals,
        init_ms,
        run_start_ms,
        run_stop_ms: run_stop,
        time_to_train_minutes: (run_stop - run_start_ms) as f64 / 60_000.0,
        throughput,
        initial_weights_sha256: weights,
        log: final_path,
        tsa: None,
        power: None,
    })
}

fn throughput_of(
    trainer: &dyn Trainer,
    samples: u64,
    seconds: f64,
    steps: u64,
    peak: Option<f64>,
) -> Throughput {
    let sps = if seconds > 0.0 {
        samples as f64 / seconds
    } else {
        0.0
    };
    let fps = trainer.flops_per_sample();
    let achieved = sps * fps;
    Throughput {
        samples_per_second: sps,
        tokens_per_second: trainer.tokens_per_sample().map(|t| sps * t as f64),
        flops_per_sample: fps,
        achieved_flops: achieved,
        mfu: peak.filter(|p| *p > 0.0).map(|p| achieved / p),
        step_seconds: if steps > 0 {
            seconds / steps as f64
        } else {
            0.0
        },
    }
}

fn throughput_value(t: &Throughput) -> Value {
    value_dict(vec![
        ("samples_per_second", Value::Float(t.samples_per_second)),
        ("tokens_per_second", t.tokens_per_second.into_value()),
        ("flops_per_sample", Value::Float(t.flops_per_sample)),
        ("achieved_flops", Value::Float(t.achieved_flops)),
        ("mfu", t.mfu.into_value()),
        ("step_seconds", Value::Float(t.step_seconds)),
    ])
}

#[cfg(test)]
mod tests {
    use super::on_compute_pool;

    /// The training loop's closure runs on a worker of the compute pool,
    /// whatever thread calls it (here the test's own, outside the pool),
    /// and its parallel loops run on that pool's threads.
    #[test]
    fn the_training_loop_runs_on_the_compute_pool() {
        assert_eq!(rayon::current_thread_index(), None);
        let (me, loops) = on_compute_pool(|| {
            use rayon::prelude::*;
            let loops: Vec<Option<usize>> = (0..4)
                .into_par_iter()
                .map(|_| rayon::current_thread_index())
                .collect();
            (rayon::current_thread_index(), loops)
        });
        assert!(me.is_some(), "the closure ran outside the pool");
        assert!(loops.iter().all(|t| t.is_some()));
    }
}
