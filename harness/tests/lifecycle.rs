//! The run lifecycle on a synthetic benchmark with a fake clock: the logs
//! the harness writes, and what the benchmark's generated rule file says
//! about them.

use referee_harness::common::clock::{Clock, FakeClock};
use referee_harness::provenance::CodeIdentity;
use referee_harness::session::collective::Local;
use referee_harness::session::run::{Observer, RunPlan, run_once};
use referee_rules::Verdict;
use referee_rules::checker::{Checker, RulesetChoice};
use referee_rules::ruleset::RuleLibrary;
use referee_workloads::bench::{
    Batch, BatchStream, Benchmark, BenchmarkSpec, Check, Direction, LoggedParam, MetricSpec,
    Trainer,
};
use referee_workloads::{Device, Engine, Result, StepOutput};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;

/// A benchmark whose metric is the fraction of `learn` samples seen.
struct Synthetic {
    spec: BenchmarkSpec,
    clock: Arc<FakeClock>,
    /// Milliseconds each step takes on the fake clock.
    step_ms: u64,
}

struct SyntheticTrainer {
    seen: u64,
    learn: f64,
    clock: Arc<FakeClock>,
    step_ms: u64,
}

impl Trainer for SyntheticTrainer {
    fn train_step(&mut self, b: &Batch) -> Result<StepOutput> {
        self.clock.advance_ms(self.step_ms);
        self.seen += b.len() as u64;
        Ok(StepOutput { loss: 1.0, lr: 0.1 })
    }
    fn compute_gradients(&mut self, b: &Batch) -> Result<(f32, Vec<f32>)> {
        self.seen += b.len() as u64;
        Ok((1.0, vec![0.0; 4]))
    }
    fn apply_gradients(&mut self, _g: &[f32]) -> Result<()> {
        Ok(())
    }
    fn evaluate(&mut self, batches: &mut dyn Iterator<Item = Batch>) -> Result<f64> {
        let n: usize = batches.map(|b| b.len()).sum();
        assert!(n > 0, "evaluation saw no data");
        Ok((self.seen as f64 / self.learn).min(0.99))
    }
    fn flops_per_sample(&self) -> f64 {
        1000.0
    }
    fn tokens_per_sample(&self) -> Option<usize> {
        None
    }
    fn num_parameters(&self) -> usize {
        4
    }
    fn current_lr(&self) -> f64 {
        0.1
    }
    fn weights_sha256(&self) -> String {
        "00".repeat(32)
    }
}

fn batches(n: usize, total: Option<usize>) -> BatchStream {
    let it = (0..).map(move |_| {
        Ok(Batch::Images {
            pixels: vec![0.0; n],
            labels: vec![0; n],
            n,
        })
    });
    match total {
        Some(t) => Box::new(it.take(t)),
        None => Box::new(it),
    }
}

impl Benchmark for Synthetic {
    fn spec(&self) -> &BenchmarkSpec {
        &self.spec
    }
    fn default_config(&self) -> Value {
        json!({"batch_size": 10, "total_steps": 50, "learn": 300.0})
    }
    fn validate(&self, _c: &Value) -> std::result::Result<(), referee_workloads::ConfigError> {
        Ok(())
    }
    fn global_batch_size(&self, c: &Value) -> usize {
        c["batch_size"].as_u64().unwrap() as usize
    }
    fn max_samples(&self, c: &Value) -> u64 {
        c["batch_size"].as_u64().unwrap() * c["total_steps"].as_u64().unwrap()
    }
    fn logged_params(&self, c: &Value) -> Vec<LoggedParam> {
        vec![
            LoggedParam {
                key: "opt_name",
                value: json!("sgd"),
                fixed: true,
                check: Check::Equals(json!("sgd")),
            },
            LoggedParam {
                key: "global_batch_size",
                value: c["batch_size"].clone(),
                fixed: false,
                check: Check::Positive,
            },
        ]
    }
    fn build(&self, c: &Value, _seed: u64, _d: &Device, _e: Engine) -> Result<Box<dyn Trainer>> {
        Ok(Box::new(SyntheticTrainer {
            seen: 0,
            learn: c["learn"].as_f64().unwrap(),
            clock: self.clock.clone(),
            step_ms: self.step_ms,
        }))
    }
    fn open_train(
        &self,
        _d: &Path,
        c: &Value,
        _s: u64,
        _r: usize,
        _w: usize,
    ) -> std::result::Result<BatchStream, referee_workloads::DataStreamError> {
        Ok(batches(c["batch_size"].as_u64().unwrap() as usize, None))
    }
    fn open_eval(
        &self,
        _d: &Path,
        _c: &Value,
    ) -> std::result::Result<BatchStream, referee_workloads::DataStreamError> {
        Ok(batches(5, Some(2)))
    }
    fn rcp_json(&self) -> &'static str {
        "{}"
    }
}

fn synthetic(clock: Arc<FakeClock>, step_ms: u64) -> &'static Synthetic {
    Box::leak(Box::new(Synthetic {
        spec: BenchmarkSpec {
            name: "mini_synthetic",
            summary: "test benchmark",
            datasets: &[],
            metric: MetricSpec {
                key: "eval_accuracy",
                name: "fraction learned",
                direction: Direction::HigherIsBetter,
                target: 0.5,
                bound: 1.0,
            },
            eval_every_samples: 45,
            eval_samples: 10,
            train_samples: 1000,
            runs: 3,
            budget_minutes: 60.0,
            fixed_fields: &[],
        },
        clock,
        step_ms,
    }))
}

fn plan(bench: &'static Synthetic, out: &Path, config: Value) -> RunPlan {
    RunPlan {
        bench,
        config,
        config_sha256: "x".into(),
        division: "closed".into(),
        org: "ACME".into(),
        platform: "box".into(),
        data_dir: out.to_path_buf(),
        out_dir: out.to_path_buf(),
        device: Device::Cpu,
        device_name: "cpu".into(),
        engine: Engine::Graph,
        stop_at_target: true,
        budget_minutes: 60.0,
        init_budget_ms: 30 * 60_000,
        cache_clear: false,
        dataset_fingerprints: Default::default(),
        code: CodeIdentity::current(),
        env: Default::default(),
        peak_flops: None,
        throughput: None,
        step_delay_ms: 0,
        cpu_plan: Default::default(),
    }
}

/// Check a log with the synthetic benchmark's generated rule file.
fn check(bench: &'static Synthetic, log: &Path) -> referee_rules::checker::LogReport {
    let mut lib = RuleLibrary::embedded_only();
    lib.add_embedded(
        "referee-1.0/mini_synthetic.yaml",
        referee_workloads::rulegen::rule_file(bench),
    );
    let checker = Checker::new(Arc::new(lib), Default::default());
    checker
        .check_file(
            log,
            &RulesetChoice::Config("referee-1.0/mini_synthetic.yaml".into()),
        )
        .unwrap()
}

/// Advances the fake clock while the model is being built.
struct SlowInit(Arc<FakeClock>, u64);
impl Observer for SlowInit {
    fn phase(&self, what: &str) {
        if what == "building the model" {
            self.0.advance_ms(self.1);
        }
    }
}

struct NoOp;
impl Observer for NoOp {}

fn records(log: &Path) -> Vec<referee_rules::mllog::Record> {
    referee_rules::mllog::read_file(log).unwrap().records
}

#[test]
fn successful_run_passes_its_rule_file_and_evals_fall_on_the_cadence() {
    let clock = Arc::new(FakeClock::new(1_700_000_000_000));
    let bench = synthetic(clock.clone(), 100);
    let dir = tempfile::tempdir().unwrap();
    let p = plan(bench, dir.path(), bench.default_config());
    let r = run_once(&p, 0, 7, clock.clone() as Arc<dyn Clock>, &mut Local, &NoOp).unwrap();
    assert_eq!(r.status, referee_harness::outcome::RunStatus::Success);
    let log = r.log.clone().unwrap();
    assert_eq!(log, dir.path().join("result_0.txt"));
    let rep = check(bench, &log);
    assert_eq!(rep.verdict, Verdict::Pass, "{:#?}", rep.diagnostics);
    // Evaluations at the first whole batch at or after k × 45 samples.
    let points: Vec<i64> = records(&log)
        .iter()
        .filter(|r| r.key() == "eval_accuracy")
        .map(|r| r.meta("samples_count").unwrap().as_f64().unwrap() as i64)
        .collect();
    assert_eq!(points, vec![50, 90, 140, 180]);
    assert_eq!(
        r.evals.iter().map(|e| e.0).collect::<Vec<_>>(),
        vec![50, 90, 140, 180]
    );
    // Stopped at the first evaluation meeting the target (180/300 ≥ 0.5).
    assert_eq!(r.samples, 180);
    // The clock started right after init_stop and ran 18 steps of 100 ms.
    assert_eq!(r.run_stop_ms - r.run_start_ms, 1800);
    let keys: Vec<String> = records(&log).iter().map(|r| r.key().to_string()).collect();
    let pos = |k: &str| keys.iter().position(|x| x == k).unwrap();
    assert!(pos("cache_clear") < pos("init_start"));
    assert!(pos("init_stop") < pos("run_start"));
    assert_eq!(keys.last().map(String::as_str), Some("run_stop"));
}

#[test]
fn target_never_reached_ends_aborted_and_fails_the_check() {
    let clock = Arc::new(FakeClock::new(1_700_000_000_000));
    let bench = synthetic(clock.clone(), 100);
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = bench.default_config();
    cfg["learn"] = json!(1e9);
    let p = plan(bench, dir.path(), cfg);
    let r = run_once(&p, 0, 7, clock.clone() as Arc<dyn Clock>, &mut Local, &NoOp).unwrap();
    assert_eq!(r.status, referee_harness::outcome::RunStatus::Aborted);
    assert_eq!(r.samples, 500, "the whole schedule (50 steps of 10)");
    let log = r.log.unwrap();
    let stop = records(&log)
        .into_iter()
        .find(|r| r.key() == "run_stop")
        .unwrap();
    assert_eq!(
        stop.meta("status").and_then(|s| s.as_str()),
        Some("aborted")
    );
    let rep = check(bench, &log);
    assert_eq!(rep.verdict, Verdict::Fail);
    assert_eq!(rep.diagnostics[0].code, "target-not-reached");
}

#[test]
fn init_budget_exceeded_stops_the_run_and_fails_the_check() {
    let clock = Arc::new(FakeClock::new(1_700_000_000_000));
    let bench = synthetic(clock.clone(), 100);
    let dir = tempfile::tempdir().unwrap();
    let p = plan(bench, dir.path(), bench.default_config());
    // Building the model takes 31 minutes; closed division allows 30.
    let r = run_once(
        &p,
        0,
        7,
        clock.clone() as Arc<dyn Clock>,
        &mut Local,
        &SlowInit(clock.clone(), 31 * 60_000),
    )
    .unwrap();
    assert_eq!(r.status, referee_harness::outcome::RunStatus::Aborted);
    assert!(
        r.reason
            .as_deref()
            .unwrap()
            .contains("initialisation took 31.0 min"),
        "{:?}",
        r.reason
    );
    assert_eq!(r.samples, 0, "no training after the budget ran out");
    let rep = check(bench, &r.log.unwrap());
    assert_eq!(rep.verdict, Verdict::Fail);
    let d = rep
        .diagnostics
        .iter()
        .find(|d| d.key.as_deref() == Some("init_stop"))
        .expect("an init_stop diagnostic");
    assert!(
        d.found
            .as_deref()
            .unwrap()
            .contains("initialisation took 31.0 min where 30 min are allowed"),
        "{d:?}"
    );
}

#[test]
fn time_budget_aborts() {
    let clock = Arc::new(FakeClock::new(1_700_000_000_000));
    // Each step takes 10 minutes; the budget is 25 minutes.
    let bench = synthetic(clock.clone(), 10 * 60_000);
    let dir = tempfile::tempdir().unwrap();
    let mut p = plan(bench, dir.path(), bench.default_config());
    p.budget_minutes = 25.0;
    let r = run_once(&p, 0, 7, clock.clone() as Arc<dyn Clock>, &mut Local, &NoOp).unwrap();
    assert_eq!(r.status, referee_harness::outcome::RunStatus::Aborted);
    assert!(r.reason.unwrap().contains("time budget"));
    assert_eq!(r.samples, 30);
}

#[test]
fn throughput_mode_logs_the_window() {
    let clock = Arc::new(FakeClock::new(1_700_000_000_000));
    let bench = synthetic(clock.clone(), 250);
    let dir = tempfile::tempdir().unwrap();
    let mut p = plan(bench, dir.path(), bench.default_config());
    p.throughput = Some(referee_harness::session::run::ThroughputPlan {
        steps: 10,
        window: (4, 9),
    });
    let r = run_once(&p, 0, 7, clock.clone() as Arc<dyn Clock>, &mut Local, &NoOp).unwrap();
    assert_eq!(r.samples, 100);
    let tp = records(&r.log.unwrap())
        .into_iter()
        .find(|r| r.key() == "throughput")
        .unwrap();
    let v = tp.value();
    // 10 samples per 0.25 s step.
    assert_eq!(v.get("samples_per_second").unwrap().as_f64(), Some(40.0));
    assert_eq!(v.get("step_seconds").unwrap().as_f64(), Some(0.25));
    assert_eq!(tp.meta("window_start_step").unwrap().as_f64(), Some(4.0));
    // The run reports the window's figures, as the log does.
    assert_eq!(r.throughput.samples_per_second, 40.0);
    assert_eq!(r.throughput.step_seconds, 0.25);
}
