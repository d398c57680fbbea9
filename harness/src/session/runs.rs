//! A session: the N runs of one resolved [`SessionConfig`], one after the
//! other, then the records next to the logs (`system.json`,
//! `referee_run.json`) and the closing check (every log against the
//! benchmark's rule file, the olympic score) as a [`RunSummary`] report.
//!
//! The session never prints: progress goes to a [`SessionObserver`] (the
//! command line draws bars from it), results come back as values.

use crate::common::clock::{Clock, SystemClock};
use crate::outcome::{LogVerdict, RunStatus};
use crate::session::collective::Collective;
use crate::session::error::SessionError;
use crate::session::plan::SessionConfig;
use crate::session::run::{Observer, RunResult, run_once};
use crate::system::{HostFacts, SystemIdentity, system_description};
use referee_rules::checker::{LogReport, RulesetChoice};
use referee_rules::escape::{markdown, term};
use referee_rules::report::{Detail, Report};
use referee_rules::score::olympic_mean;
use referee_workloads::bench::Direction;
use serde::Serialize;
use serde_json::Value;
use std::io::{self, Write};
use std::sync::Arc;

/// Receives a session's progress, one run at a time.
pub trait SessionObserver {
    /// Run `index` (0-based) of `runs` starts; returns the observer of its
    /// steps and evaluations.
    fn run_starting(&self, index: usize, runs: usize, max_samples: u64) -> Box<dyn Observer>;
    /// Run `index` ended with `result`; `summary` is [`run_line`]'s line.
    fn run_finished(&self, observer: Box<dyn Observer>, result: &RunResult, summary: &str);
}

/// A session observer that ignores everything.
pub struct QuietSession;

impl SessionObserver for QuietSession {
    fn run_starting(&self, _: usize, _: usize, _: u64) -> Box<dyn Observer> {
        Box::new(crate::session::run::Quiet)
    }
    fn run_finished(&self, _: Box<dyn Observer>, _: &RunResult, _: &str) {}
}

/// The target as people read it: `≥ 0.85`, `≤ 4.26`.
pub fn target_text(cfg: &SessionConfig) -> String {
    let metric = &cfg.plan.bench.spec().metric;
    match metric.direction {
        Direction::HigherIsBetter => format!("≥ {}", metric.target),
        Direction::LowerIsBetter => format!("≤ {}", metric.target),
    }
}

/// One line that says how a run ended.
pub fn run_line(cfg: &SessionConfig, r: &RunResult) -> String {
    let best = r
        .evals
        .last()
        .map(|e| format!("{:.4}", e.1))
        .unwrap_or_else(|| "-".into());
    format!(
        "run {}/{}: {} after {} samples in {:.2} min (seed {}, last eval {best}, target {}, {:.0} samples/s{}){}",
        r.index + 1,
        cfg.seeds.len(),
        r.status,
        r.samples,
        r.time_to_train_minutes,
        r.seed,
        target_text(cfg),
        r.throughput.samples_per_second,
        r.throughput
            .tokens_per_second
            .map(|t| format!(", {t:.0} tokens/s"))
            .unwrap_or_default(),
        r.power
            .as_ref()
            .map(|p| format!("; {}", p.line()))
            .unwrap_or_default()
    )
}

/// Run the session: N runs, then (on the leading rank) the records.
pub fn execute(
    cfg: &SessionConfig,
    coll: &mut dyn Collective,
    observer: &dyn SessionObserver,
) -> Result<Vec<RunResult>, SessionError> {
    let plan = &cfg.plan;
    let leader = coll.rank() == 0;
    // Time-stamps (crate::tsa): only rank 0 asks the authorities, run 0's
    // start before anything is written; run_once broadcasts its seed.
    let urls: &[String] = if leader { &cfg.tsa } else { &[] };
    let mut tsa = crate::tsa::Anchors::new(urls, cfg.seed_chosen)?;
    if leader {
        std::fs::create_dir_all(&plan.out_dir).map_err(|e| SessionError::io(&plan.out_dir, e))?;
    }
    let clock: Arc<dyn Clock> = Arc::new(SystemClock::default());
    let max_samples = plan.bench.max_samples(&plan.config);
    let mut results = Vec::new();
    for (i, seed) in cfg.seeds.iter().enumerate() {
        let seed = tsa.start(i, &plan.out_dir, *seed)?;
        let run_observer = observer.run_starting(i, cfg.seeds.len(), max_samples);
        // Power: one sampler per node (its first local rank), from before
        // the run's first line to after its last.
        let sampler = match &cfg.power {
            Some(p) if cfg.placement.local_rank == 0 => {
                Some(crate::power::Sampler::start(crate::power::SamplerConfig {
                    source: p.source.clone(),
                    out: crate::power::run_power_file(&plan.out_dir, i),
                    interval: p.interval,
                    host: crate::power::node_host(),
                    conversion_eff: p.conversion_eff,
                })?)
            }
            _ => None,
        };
        let mut r = run_once(plan, i, seed, clock.clone(), coll, run_observer.as_ref())?;
        if let Some(smp) = sampler {
            let ttt_ms =
                (r.run_stop_ms > r.run_start_ms).then(|| (r.run_stop_ms - r.run_start_ms) as f64);
            r.power = Some(crate::power::finish(
                smp,
                cfg.power.as_ref().map(|p| &p.source),
                ttt_ms,
            )?);
        }
        if let Some(log) = &r.log {
            // No witness: the end token covers the result file and `null`.
            let witness = crate::tsa::witness_bytes::<()>(None);
            r.tsa = tsa.finish(i, &plan.out_dir, log, &witness)?;
        }
        observer.run_finished(run_observer, &r, &run_line(cfg, &r));
        results.push(r);
    }
    if leader {
        write_records(cfg, &results)?;
    }
    Ok(results)
}

/// The framework field of the system description: referee and its engine.
fn framework(cfg: &SessionConfig) -> String {
    match cfg.plan.engine {
        referee_workloads::Engine::Cpu(isa) => format!(
            "referee {} (CPU engine, {} kernels, Rust)",
            crate::provenance::VERSION,
            isa.name()
        ),
        referee_workloads::Engine::Graph => format!(
            "referee {} (candle {} graph, Rust)",
            crate::provenance::VERSION,
            "0.11"
        ),
    }
}

/// The system description of the machine the session ran on.
fn system_json(cfg: &SessionConfig) -> Value {
    let plan = &cfg.plan;
    let host = HostFacts::probe();
    let framework = framework(cfg);
    // One GPU per rank: a node holds as many as it has ranks.
    let per_node = cfg
        .placement
        .world_size
        .div_ceil(cfg.placement.nodes.max(1));
    let accel = cfg.gpu.as_ref().map(|g| g.accelerator(per_node));
    let id = SystemIdentity {
        submitter: &plan.org,
        division: &plan.division,
        status: "Research, Development, or Internal (RDI)",
        system_name: &plan.platform,
        framework: &framework,
        nodes: cfg.placement.nodes.max(1),
    };
    system_description(&id, &host, accel.as_ref())
}

/// `referee_run.json`: the resolved configuration, seeds, identities and
/// the outcome of every run.
fn run_record(cfg: &SessionConfig, results: &[RunResult]) -> Value {
    let plan = &cfg.plan;
    let spec = plan.bench.spec();
    serde_json::json!({
        "benchmark": spec.name,
        "ruleset": referee_workloads::bench::RULESET,
        "division": plan.division,
        "org": plan.org,
        "system": plan.platform,
        "config": plan.config,
        "config_sha256": plan.config_sha256,
        "code": plan.code,
        "dataset_fingerprints": plan.dataset_fingerprints,
        "device": plan.device_name,
        "engine": plan.engine.name(),
        "world_size": cfg.placement.world_size,
        "stop_at_target": plan.stop_at_target,
        "target": {
            "key": spec.metric.key,
            "metric": spec.metric.name,
            "value": spec.metric.target,
            "direction": match spec.metric.direction {
                Direction::HigherIsBetter => "higher",
                Direction::LowerIsBetter => "lower",
            },
        },
        "step_delay_ms": plan.step_delay_ms,
        "throughput_mode": plan.throughput.map(|t| serde_json::json!({"steps": t.steps, "window": [t.window.0, t.window.1]})),
        // The seeds the runs used (derived from time-stamps with --tsa).
        "seeds": results.iter().map(|r| r.seed).collect::<Vec<_>>(),
        "command": std::env::args().collect::<Vec<_>>(),
        "runs": results,
    })
}

/// `system.json` and `referee_run.json` next to the logs, each written atomically.
fn write_records(cfg: &SessionConfig, results: &[RunResult]) -> Result<(), SessionError> {
    let write = |name: &str, v: &Value| -> Result<(), SessionError> {
        let p = cfg.plan.out_dir.join(name);
        crate::fsutil::write_atomic(
            &p,
            serde_json::to_string_pretty(v)
                .expect("serialisable")
                .as_bytes(),
        )
        .map_err(|e| SessionError::io(&p, e))
    };
    write("system.json", &system_json(cfg))?;
    write("referee_run.json", &run_record(cfg, results))
}

/// The verdict of one log of the session.
#[derive(Debug, Clone, Serialize)]
pub struct LogCheck {
    pub path: String,
    pub verdict: LogVerdict,
}

/// What a session produced: every run, every log's verdict, the score.
#[derive(Debug, Clone, Serialize)]
pub struct RunSummary {
    pub out: String,
    pub benchmark: &'static str,
    pub runs: Vec<RunResult>,
    pub checks: Vec<LogCheck>,
    pub score_minutes: Option<f64>,
    /// The reports of logs that failed their check (printed before the summary).
    #[serde(skip)]
    pub failed_logs: Vec<LogReport>,
    /// Logs that could not be checked, with why.
    #[serde(skip)]
    pub errors: Vec<String>,
    /// Every run reached the target and every log is compliant.
    #[serde(skip)]
    pub passed: bool,
}

impl RunSummary {
    fn successes(&self) -> usize {
        self.runs
            .iter()
            .filter(|r| r.status == RunStatus::Success)
            .count()
    }
    fn score_line(&self) -> String {
        let dropped = self.runs.len() - self.successes();
        match self.score_minutes {
            Some(s) => format!(
                "{}: olympic mean time to train {s:.3} min over {} runs ({} dropped); logs in {}",
                self.benchmark,
                self.runs.len(),
                dropped,
                self.out
            ),
            None => format!(
                "{}: {} of {} runs reached the target; logs in {}",
                self.benchmark,
                self.successes(),
                self.runs.len(),
                self.out
            ),
        }
    }
}

impl Report for RunSummary {
    fn write_human(&self, out: &mut dyn Write, _: Detail) -> io::Result<()> {
        for c in &self.checks {
            writeln!(out, "{} {}", c.verdict, term(&c.path))?;
        }
        writeln!(out, "{}", term(&self.score_line()))
    }

    fn write_markdown(&self, out: &mut dyn Write, _: Detail) -> io::Result<()> {
        writeln!(
            out,
            "# {}\n\n{}\n",
            markdown(self.benchmark),
            markdown(&self.score_line())
        )?;
        writeln!(
            out,
            "| run | seed | status | samples | minutes | log | verdict |\n| ---: | ---: | --- | ---: | ---: | --- | --- |"
        )?;
        for r in &self.runs {
            let log = r.log.as_ref().map(|p| p.display().to_string());
            let verdict = log
                .as_ref()
                .and_then(|l| self.checks.iter().find(|c| &c.path == l))
                .map(|c| c.verdict.to_string())
                .unwrap_or_else(|| "-".into());
            writeln!(
                out,
                "| {} | {} | {} | {} | {:.3} | {} | {verdict} |",
                r.index + 1,
                r.seed,
                r.status,
                r.samples,
                r.time_to_train_minutes,
                markdown(log.as_deref().unwrap_or("-")),
            )?;
        }
        Ok(())
    }
}

/// Check every log with the benchmark's rule file and score the session:
/// the olympic mean of the times to train when at least 3 runs were made
/// and at most one did not reach the target.
pub fn closing_check(cfg: &SessionConfig, results: Vec<RunResult>) -> RunSummary {
    let checker = crate::own_benchmarks::own_checker();
    let mut summary = RunSummary {
        out: cfg.plan.out_dir.display().to_string(),
        benchmark: cfg.plan.bench.spec().name,
        runs: Vec::new(),
        checks: Vec::new(),
        score_minutes: None,
        failed_logs: Vec::new(),
        errors: Vec::new(),
        passed: true,
    };
    for r in &results {
        let Some(p) = &r.log else { continue };
        let path = p.display().to_string();
        match checker.check_file(p, &RulesetChoice::Auto) {
            Ok(rep) => {
                let ok = rep.verdict == referee_rules::Verdict::Pass;
                summary.passed &= ok && r.status == RunStatus::Success;
                summary.checks.push(LogCheck {
                    path,
                    verdict: if ok {
                        LogVerdict::Pass
                    } else {
                        LogVerdict::Fail
                    },
                });
                if !ok {
                    summary.failed_logs.push(rep);
                }
            }
            Err(e) => {
                summary.passed = false;
                summary.checks.push(LogCheck {
                    path,
                    verdict: LogVerdict::Error,
                });
                summary.errors.push(e.to_string());
            }
        }
    }
    let times: Vec<f64> = results
        .iter()
        .filter(|r| r.status == RunStatus::Success)
        .map(|r| r.time_to_train_minutes)
        .collect();
    let dropped = results.len() - times.len();
    summary.score_minutes = (results.len() >= 3 && dropped <= 1)
        .then(|| olympic_mean(&times, dropped, 1))
        .flatten();
    summary.runs = results;
    summary
}
