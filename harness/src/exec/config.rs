//! An exec session's configuration: what the user asked for
//! ([`ExecRequest`]) resolved once, before anything runs, into an
//! [`ExecConfig`] — the benchmark's rules (with the live check at
//! `init_stop` compiled), the number of runs, one seed each, the budgets and
//! an output folder that holds no results yet.

use super::error::ExecError;
use super::supervise::LiveRules;
use crate::common::division::Division;
use crate::outdir::{default_system_name, os_seed, result_count, utc_stamp};
use crate::rules_env::{RulesRequest, resolve_rules};
use referee_datasets::rng::run_seeds;
use referee_rules::diag::Diagnostic;
use referee_rules::score::ScoreContext;
use std::path::PathBuf;
use std::time::Duration;

/// What the user asked for.
#[derive(Debug, Clone)]
pub struct ExecRequest {
    /// The program and its arguments.
    pub command: Vec<String>,
    /// An official benchmark (`llama2_70b_lora`) or one of referee's.
    pub benchmark: String,
    /// The rules (an official ruleset needs `ruleset`).
    pub rules: RulesRequest,
    /// Runs (default: the benchmark's count in the ruleset).
    pub runs: Option<usize>,
    pub seed: Option<u64>,
    pub division: Division,
    pub org: String,
    pub system: Option<String>,
    /// The whole run's budget (default: the benchmark's, else 24 h).
    pub budget_minutes: Option<f64>,
    pub out: Option<PathBuf>,
    /// `sync; drop_caches` by default; a command of the user's (e.g.
    /// `sudo /sbin/drop-caches`, or a per-node `srun …`); or none.
    pub cache_clear: CacheClearMethod,
    pub tolerance_ms: u64,
    /// Between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// RFC 3161 time-stamping authorities (`--tsa URL`; crate::tsa).
    pub tsa: Vec<String>,
    /// Power measured during each run (`--power`; crate::power).
    pub power: Option<crate::power::PowerRequest>,
    /// Fields added to the run record (datasets, code fingerprint:
    /// [`super::identity::record_extra`]).
    pub record_extra: serde_json::Map<String, serde_json::Value>,
}

/// How the page cache is cleared before each run.
#[derive(Debug, Clone, PartialEq)]
pub enum CacheClearMethod {
    /// `sync`, then write 3 to `/proc/sys/vm/drop_caches`.
    DropCaches,
    /// A shell command; exit status 0 means cleared.
    Command(String),
    Skip,
}

/// The request resolved: rules loaded, seeds drawn, directories chosen.
pub struct ExecConfig {
    pub req: ExecRequest,
    pub scoring: ScoreContext,
    pub rules: String,
    pub seeds: Vec<u64>,
    pub out: PathBuf,
    pub system: String,
    pub init_budget: Duration,
    pub run_budget: Duration,
    pub cwd: PathBuf,
    /// Set when the program is not the user's own (an audit's re-run of a
    /// package's code): how it is confined. Nothing of such a program runs
    /// outside the confinement: no git on its code, no query of its
    /// interpreter (docs/trust.md).
    pub confinement: Option<Confinement>,
}

/// The program's command line as started, from its command and its
/// environment, and the exact environment that command line starts with.
pub type Wrap = Box<
    dyn Fn(&[String], &[(String, String)]) -> (Vec<String>, Vec<(String, String)>) + Send + Sync,
>;

/// How a program that is not the user's own is started.
pub struct Confinement {
    /// Its command line, confined (an audit's sandbox).
    pub wrap: Wrap,
    /// The unprivileged user and group it runs as, when referee runs as
    /// root; its run directory is handed to them.
    pub run_as: Option<(u32, u32)>,
    /// Files its command line is given open at these descriptor numbers
    /// (the sandbox's system-call filter).
    pub fds: Vec<(PathBuf, i32)>,
}

impl ExecConfig {
    /// Resolve: the rules of the benchmark, the number of runs, seeds, the
    /// output directory (never one that holds results).
    pub fn resolve(req: ExecRequest) -> Result<ExecConfig, ExecError> {
        if req.command.is_empty() {
            return Err(ExecError::NoTrainingCommand);
        }
        let own = crate::own_benchmarks::find(&req.benchmark).is_some();
        if !own && req.rules.ruleset.is_none() {
            return Err(ExecError::NeedsRuleset {
                benchmark: req.benchmark.clone(),
            });
        }
        let mut rules_req = req.rules.clone();
        if own && rules_req.ruleset.is_none() {
            rules_req.ruleset = Some(referee_workloads::bench::RULESET.to_string());
        }
        let rules = resolve_rules(&rules_req, &[])?;
        let allowed = rules
            .scoring
            .facts
            .allowed(&rules.scoring.usage, &rules.scoring.ruleset);
        let facts = rules
            .scoring
            .facts
            .benchmark(&rules.scoring.usage, &req.benchmark)
            .filter(|_| allowed.contains(&req.benchmark))
            .ok_or_else(|| ExecError::UnknownBenchmark {
                benchmark: req.benchmark.clone(),
                rules: rules.description.clone(),
                allowed: allowed.clone(),
            })?;
        let runs = req.runs.unwrap_or(facts.result_files);
        if runs == 0 {
            return Err(ExecError::NoRuns);
        }
        let out = req.out.clone().unwrap_or_else(|| {
            PathBuf::from("out").join(format!("{}-{}", req.benchmark, utc_stamp()))
        });
        let existing = result_count(&out);
        if existing > 0 {
            return Err(ExecError::OutHoldsResults {
                out,
                found: existing,
            });
        }
        let budget = req.budget_minutes.unwrap_or(24.0 * 60.0);
        if budget <= 0.0 {
            return Err(ExecError::BadBudget);
        }
        let init_minutes = referee_rules::ruleset_facts::init_budget_minutes(req.division.as_str());
        // Compile the rule chain now, so that the live check at init_stop
        // costs only its evaluation.
        InitRules {
            scoring: &rules.scoring,
        }
        .at_init_stop(referee_rules::mllog::ParsedLog::default());
        Ok(ExecConfig {
            seeds: run_seeds(req.seed.unwrap_or_else(os_seed), runs),
            system: req.system.clone().unwrap_or_else(default_system_name),
            out,
            init_budget: Duration::from_secs(init_minutes * 60),
            run_budget: Duration::from_secs_f64(budget * 60.0),
            cwd: std::env::current_dir().map_err(ExecError::WorkingDirectory)?,
            confinement: None,
            scoring: rules.scoring,
            rules: rules.description,
            req,
        })
    }
}

/// The ruleset's rules on the lines read by `init_stop`.
pub(super) struct InitRules<'a> {
    pub(super) scoring: &'a ScoreContext,
}

impl LiveRules for InitRules<'_> {
    fn at_init_stop(&self, mut parsed: referee_rules::mllog::ParsedLog) -> Vec<Diagnostic> {
        let Ok(report) =
            self.scoring
                .checker
                .check_parsed("(live)", &mut parsed, &self.scoring.choice)
        else {
            return Vec::new();
        };
        report
            .diagnostics
            .into_iter()
            .filter(|d| d.is_error())
            .filter(|d| {
                d.key
                    .as_deref()
                    .is_some_and(|k| !referee_rules::lifecycle::is_run_phase(k))
            })
            .collect()
    }

    fn kept_keys(&self) -> Option<std::sync::Arc<referee_rules::mllog::KeepFn>> {
        self.scoring.checker.kept_keys(&self.scoring.choice)
    }
}
