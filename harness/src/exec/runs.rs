//! `referee run --exec -- CMD ARGS…`: any training program (PyTorch,
//! NeMo/Megatron, JAX…) run N times under the harness's rules — the same
//! lifecycle as referee's own benchmarks: seeds from one base seed, the
//! page cache cleared before each run and logged by the harness, a fresh
//! run directory, budgets, live rules, the witnessed clock
//! ([`super::witness`]), atomic result files, provenance, and the closing
//! check of every log with the ruleset's rules.
//!
//! The program is told what it needs through the variables existing
//! training code already reads: `SEED` (as NVIDIA's `run.sub` exports it),
//! `COMPLIANCE_FILE` (a fresh, empty MLLOG file: `mllog` appends to it),
//! `LOGDIR`, `NEXP`, `DATESTAMP`, `PYTHONUNBUFFERED=1`, plus
//! `REFEREE_RUN_INDEX` and `REFEREE_OUT_DIR`.

use super::config::{CacheClearMethod, ExecConfig, InitRules};
use super::error::ExecError;
use super::supervise::{ChildSpec, RunStatus, Supervised, supervise};
use crate::common::cache::{CacheClear, drop_page_cache};
use crate::common::division::Division;
use crate::common::harness_process::yield_to_the_program;
use crate::common::witness::Witness;
pub use crate::outcome::LogVerdict;
use crate::outdir::utc_stamp;
use referee_rules::diag::Diagnostic;
use referee_rules::escape::{markdown, term};
use referee_rules::report::{Detail, Report, write_diagnostic};
use referee_rules::score::{ScoreContext, olympic_mean};
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// One supervised run, as recorded.
#[derive(Debug, Clone, Serialize)]
pub struct ExecRun {
    pub index: usize,
    pub seed: u64,
    pub status: RunStatus,
    pub reason: Option<String>,
    pub exit: String,
    pub log: PathBuf,
    /// The sha256 of the result file: how its witness is found again
    /// (in a package, where the file has another name).
    pub log_sha256: String,
    pub time_to_train_minutes: Option<f64>,
    pub cache_clear: Value,
    pub live_diagnostics: Vec<Diagnostic>,
    pub stop_delay_ms: Option<f64>,
    /// Spawn → result file in place.
    pub supervised_seconds: f64,
    pub witness: Witness,
    pub provenance: Value,
    /// The run's time-stamps (crate::tsa), with `--tsa`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tsa: Option<Value>,
    /// The run's power log and its energy (`--power`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub power: Option<crate::power::RunPower>,
    /// The closing check of its log (reported beside the runs, not in the
    /// run record).
    #[serde(skip)]
    pub check: ExecLogCheck,
    /// Seconds the closing check took once the program had ended.
    #[serde(skip)]
    pub check_seconds: f64,
}

/// Clear the page cache as asked; what happened.
fn clear_cache(how: &CacheClearMethod) -> (CacheClear, String) {
    match how {
        CacheClearMethod::DropCaches => (
            drop_page_cache(),
            "sync; echo 3 > /proc/sys/vm/drop_caches".into(),
        ),
        CacheClearMethod::Skip => (CacheClear::Skipped, "none".into()),
        CacheClearMethod::Command(cmd) => {
            let st = std::process::Command::new("sh")
                .args(["-c", cmd])
                .stdin(std::process::Stdio::null())
                .status();
            let r = match st {
                Ok(s) if s.success() => CacheClear::Dropped,
                Ok(s) => CacheClear::NotPermitted(format!("`{cmd}` failed ({s})")),
                Err(e) => CacheClear::NotPermitted(format!("`{cmd}` could not start: {e}")),
            };
            (r, cmd.clone())
        }
    }
}

/// The harness's `cache_clear` line.
fn cache_clear_line(c: &CacheClear, method: &str) -> String {
    use referee_rules::value::Value as V;
    let mut meta: Vec<(&str, V)> = vec![("method", V::str(method.to_string()))];
    if let CacheClear::NotPermitted(why) = c {
        meta.push(("reason", V::str(why.clone())));
    }
    if matches!(c, CacheClear::Skipped) {
        meta.push(("reason", V::str("skipped on request")));
    }
    crate::common::logger::MlLogger::render(
        "",
        &crate::common::logger::Event {
            time_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
            event_type: crate::common::logger::POINT_IN_TIME,
            key: "cache_clear",
            value: &V::Bool(c.dropped()),
            meta: &meta,
        },
        "referee",
        0,
    )
}

/// The variables the program reads.
fn child_env(
    cfg: &ExecConfig,
    i: usize,
    seed: u64,
    run_dir: &Path,
    compliance: &Path,
) -> Vec<(String, String)> {
    vec![
        ("SEED".into(), seed.to_string()),
        ("COMPLIANCE_FILE".into(), compliance.display().to_string()),
        ("LOGDIR".into(), run_dir.display().to_string()),
        ("NEXP".into(), cfg.seeds.len().to_string()),
        ("DATESTAMP".into(), utc_stamp()),
        ("PYTHONUNBUFFERED".into(), "1".into()),
        ("REFEREE_RUN_INDEX".into(), i.to_string()),
        ("REFEREE_OUT_DIR".into(), cfg.out.display().to_string()),
    ]
}

/// Run `i` with `seed`.
pub fn run_one(cfg: &ExecConfig, i: usize, seed: u64) -> Result<ExecRun, ExecError> {
    let out = absolute(&cfg.out);
    let run_dir = out.join(format!("run_{i}"));
    let compliance = run_dir.join("mllog.txt");
    let (cleared, method) = clear_cache(&cfg.req.cache_clear);
    if !cleared.dropped() && cfg.req.division == Division::Closed {
        eprintln!(
            "referee: WARNING: run {}: the page cache was not cleared ({}); in the closed division this run is not a valid result",
            i + 1,
            match &cleared {
                CacheClear::NotPermitted(w) => w.as_str(),
                _ => "skipped on request",
            }
        );
    }
    let env = child_env(cfg, i, seed, &run_dir, &compliance);
    // A confined program starts with exactly the environment its
    // confinement gives; the user's own inherits the user's.
    let (command, start_env) = match &cfg.confinement {
        Some(c) => {
            let (command, exact) = (c.wrap)(&cfg.req.command, &env);
            (command, Some(exact))
        }
        None => (cfg.req.command.clone(), None),
    };
    let spec = ChildSpec {
        command,
        run_as: cfg.confinement.as_ref().and_then(|c| c.run_as),
        fds: cfg
            .confinement
            .as_ref()
            .map(|c| c.fds.clone())
            .unwrap_or_default(),
        clear_env: start_env.is_some(),
        env: start_env.unwrap_or_else(|| env.clone()),
        cwd: cfg.cwd.clone(),
        run_dir: run_dir.clone(),
        compliance_file: compliance,
        result: out.join(format!("result_{i}.txt")),
        opening_lines: vec![cache_clear_line(&cleared, &method)],
        init_budget: cfg.init_budget,
        run_budget: cfg.run_budget,
        grace: cfg.req.grace,
        tolerance_ms: cfg.req.tolerance_ms,
    };
    let live = InitRules {
        scoring: &cfg.scoring,
    };
    // Power is measured from before the program starts until after it
    // ends: the timed part lies inside (power/result_i/node_N.txt).
    let sampler = match &cfg.req.power {
        Some(p) => Some(crate::power::Sampler::start(crate::power::SamplerConfig {
            source: p.source.clone(),
            out: crate::power::run_power_file(&out, i),
            interval: p.interval,
            host: crate::power::node_host(),
            conversion_eff: p.conversion_eff,
        })?),
        None => None,
    };
    // Once the program runs, and yielding to it: referee's own digest, and
    // the identity of the program's code (in a large checkout `git diff`
    // takes a while), so that the provenance waits for neither.
    // Never on code that is not the user's own: git reads the checkout's
    // configuration, which can name commands (docs/trust.md).
    let mut git = None;
    let s: Supervised = supervise(&spec, &live, &mut || {
        crate::provenance::prepare_identity();
        if cfg.confinement.is_none() {
            let cwd = cfg.cwd.clone();
            git = Some(std::thread::spawn(move || {
                yield_to_the_program(c"referee-git");
                crate::provenance::git_identity(&cwd)
            }));
        }
    })?;
    let power = match sampler {
        Some(smp) => Some(crate::power::finish(
            smp,
            cfg.req.power.as_ref().map(|p| &p.source),
            s.time_to_train_ms,
        )?),
        None => None,
    };
    let started = std::time::Instant::now();
    let check = check_log(&cfg.scoring, &spec.result, s.parsed, &s.witness);
    let check_seconds = started.elapsed().as_secs_f64();
    Ok(ExecRun {
        check,
        check_seconds,
        index: i,
        seed,
        status: s.status,
        reason: s.reason,
        provenance: crate::provenance::external(
            &cfg.req.command,
            &cfg.cwd,
            git.and_then(|g| g.join().ok()).flatten(),
            &env,
            &s.exit,
            seed,
            &s.files,
        ),
        exit: s.exit,
        log_sha256: s
            .files
            .get(&spec.result.display().to_string())
            .cloned()
            .unwrap_or_default(),
        log: spec.result,
        time_to_train_minutes: s.time_to_train_ms.map(|m| m / 60_000.0),
        cache_clear: json!({"dropped": cleared.dropped(), "method": method, "detail": format!("{cleared:?}")}),
        live_diagnostics: s.diagnostics,
        stop_delay_ms: s.stop_delay_ms,
        supervised_seconds: s.supervised_seconds,
        witness: s.witness,
        tsa: None,
        power,
    })
}

fn absolute(p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(p))
            .unwrap_or_else(|_| p.to_path_buf())
    }
}

/// Receives the progress of an exec session.
pub trait ExecObserver {
    fn run_starting(&self, index: usize, runs: usize, seed: u64);
    fn run_finished(&self, run: &ExecRun);
}

/// Run every run, write the records, check every log.
pub fn execute(cfg: &ExecConfig, observer: &dyn ExecObserver) -> Result<ExecSummary, ExecError> {
    // Time-stamps (crate::tsa): run 0's before anything is written.
    let mut tsa = crate::tsa::Anchors::new(&cfg.req.tsa, cfg.req.seed.is_some())?;
    std::fs::create_dir_all(&cfg.out).map_err(|e| ExecError::io(&cfg.out, e))?;
    // The program's software stack (pip list, driver), once per session,
    // alongside the first run and yielding to it.
    let command = cfg.req.command.clone();
    let stack = std::thread::spawn(move || {
        yield_to_the_program(c"referee-stack");
        crate::provenance::software_stack(&command)
    });
    let mut runs = Vec::new();
    for (i, seed) in cfg.seeds.iter().enumerate() {
        let seed = &tsa.start(i, &cfg.out, *seed)?;
        observer.run_starting(i, cfg.seeds.len(), *seed);
        let mut r = run_one(cfg, i, *seed)?;
        let witness = crate::tsa::witness_bytes(Some(&r.witness));
        r.tsa = tsa.finish(i, &cfg.out, &r.log, &witness)?;
        observer.run_finished(&r);
        runs.push(r);
    }
    let software = stack.join().unwrap_or(serde_json::Value::Null);
    write_records(cfg, &runs, software)?;
    Ok(closing_check(cfg, runs))
}

/// `referee_run.json` and `system.json` next to the logs.
fn write_records(
    cfg: &ExecConfig,
    runs: &[ExecRun],
    software: serde_json::Value,
) -> Result<(), ExecError> {
    let mut record = json!({
        "mode": "exec",
        "benchmark": cfg.req.benchmark,
        "ruleset": cfg.scoring.ruleset,
        "rules": cfg.rules,
        "division": cfg.req.division.as_str(),
        "org": cfg.req.org,
        "system": cfg.system,
        "command": cfg.req.command,
        "working_directory": cfg.cwd.display().to_string(),
        "seeds": runs.iter().map(|r| r.seed).collect::<Vec<_>>(),
        "witness_tolerance_ms": cfg.req.tolerance_ms,
        "code": crate::provenance::CodeIdentity::current(),
        "software": software,
        "runs": runs,
    });
    if let Some(o) = record.as_object_mut() {
        o.extend(cfg.req.record_extra.clone());
    }
    let host = crate::system::HostFacts::probe();
    let id = crate::system::SystemIdentity {
        submitter: &cfg.req.org,
        division: cfg.req.division.as_str(),
        status: "Research, Development, or Internal (RDI)",
        system_name: &cfg.system,
        framework: "",
        nodes: 1,
    };
    let system = crate::system::system_description(&id, &host, None);
    for (name, v) in [("referee_run.json", &record), ("system.json", &system)] {
        let p = cfg.out.join(name);
        crate::fsutil::write_atomic(
            &p,
            serde_json::to_string_pretty(v).expect("json").as_bytes(),
        )
        .map_err(|e| ExecError::io(&p, e))?;
    }
    Ok(())
}

/// The verdict of one log: its compliance, and its witness.
#[derive(Debug, Clone, Serialize)]
pub struct ExecLogCheck {
    pub path: String,
    pub verdict: LogVerdict,
    pub diagnostics: Vec<Diagnostic>,
}

/// What an exec session produced.
#[derive(Debug, Clone, Serialize)]
pub struct ExecSummary {
    pub out: String,
    pub benchmark: String,
    pub rules: String,
    pub runs: Vec<ExecRun>,
    pub checks: Vec<ExecLogCheck>,
    pub score_minutes: Option<f64>,
    pub passed: bool,
    /// The closing checks of every log, once each program had ended.
    pub check_seconds: f64,
}

/// The verdicts of every log (checked as each run ended) and the score.
fn closing_check(cfg: &ExecConfig, runs: Vec<ExecRun>) -> ExecSummary {
    let checks: Vec<ExecLogCheck> = runs.iter().map(|r| r.check.clone()).collect();
    let passed = runs
        .iter()
        .all(|r| r.check.verdict == LogVerdict::Pass && r.status == RunStatus::Success);
    // A run counts when it reached the target and its log passed (a log
    // whose clock the witness contradicts does not).
    let times: Vec<f64> = runs
        .iter()
        .filter(|r| r.status == RunStatus::Success && r.check.verdict == LogVerdict::Pass)
        .filter_map(|r| r.time_to_train_minutes)
        .collect();
    let dropped = runs.len() - times.len();
    let max_dropped = cfg
        .scoring
        .facts
        .max_dropped(&cfg.scoring.usage, &cfg.req.benchmark);
    let score = (runs.len() >= 3 && dropped <= max_dropped)
        .then(|| olympic_mean(&times, dropped, 1))
        .flatten();
    ExecSummary {
        out: cfg.out.display().to_string(),
        benchmark: cfg.req.benchmark.clone(),
        rules: cfg.rules.clone(),
        check_seconds: runs.iter().map(|r| r.check_seconds).sum(),
        runs,
        checks,
        score_minutes: score,
        passed,
    }
}

/// One log: the rules' verdict plus the witness's findings. `parsed` is the
/// log as the rules' reader read it while supervision wrote it (the same
/// bytes as the file, through the same reader as `referee check`'s).
fn check_log(
    scoring: &ScoreContext,
    log: &Path,
    mut parsed: referee_rules::mllog::ParsedLog,
    witness: &Witness,
) -> ExecLogCheck {
    let path = log.display().to_string();
    // The witness compares its lines with the log's.
    let mut diagnostics = crate::common::witness::verify(witness, &parsed.records);
    let rep = match scoring
        .checker
        .check_parsed(&path, &mut parsed, &scoring.choice)
    {
        Ok(r) => r,
        Err(e) => {
            return ExecLogCheck {
                path,
                verdict: LogVerdict::Error,
                diagnostics: vec![Diagnostic::error("io", e.to_string())],
            };
        }
    };
    let ok = diagnostics.is_empty() && rep.verdict == referee_rules::Verdict::Pass;
    diagnostics.splice(0..0, rep.diagnostics.into_iter().filter(|d| d.is_error()));
    // A flooded log is millions of small allocations: freed off the
    // critical path.
    std::thread::spawn(move || drop(parsed));
    ExecLogCheck {
        path,
        verdict: if ok {
            LogVerdict::Pass
        } else {
            LogVerdict::Fail
        },
        diagnostics,
    }
}

impl Report for ExecSummary {
    fn write_human(&self, out: &mut dyn Write, _: Detail) -> io::Result<()> {
        for c in &self.checks {
            writeln!(out, "{} {}", c.verdict, term(&c.path))?;
            for d in &c.diagnostics {
                write_diagnostic(out, d, "  ")?;
            }
        }
        writeln!(out, "{}", term(&self.score_line()))
    }
    fn write_markdown(&self, out: &mut dyn Write, _: Detail) -> io::Result<()> {
        writeln!(
            out,
            "# {} (`referee run --exec`)\n\n{}\n",
            markdown(&self.benchmark),
            markdown(&self.score_line())
        )?;
        writeln!(
            out,
            "| run | seed | status | minutes | log | verdict |\n| ---: | ---: | --- | ---: | --- | --- |"
        )?;
        for (r, c) in self.runs.iter().zip(&self.checks) {
            writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} |",
                r.index + 1,
                r.seed,
                r.status,
                r.time_to_train_minutes
                    .map(|m| format!("{m:.3}"))
                    .unwrap_or_else(|| "-".into()),
                markdown(&c.path),
                c.verdict
            )?;
        }
        Ok(())
    }
}

impl ExecSummary {
    fn score_line(&self) -> String {
        let reached = self
            .runs
            .iter()
            .filter(|r| r.status == RunStatus::Success)
            .count();
        let passed = self
            .checks
            .iter()
            .filter(|c| c.verdict == LogVerdict::Pass)
            .count();
        let head = match self.score_minutes {
            Some(s) => format!("olympic mean time to train {}", fmt_minutes(s)),
            None => "no score".to_string(),
        };
        format!(
            "{}: {head}; {reached} of {} runs reached the target, {passed} logs passed; {}; logs in {}",
            self.benchmark,
            self.runs.len(),
            self.rules,
            self.out
        )
    }
}

/// Minutes, with seconds for short runs.
fn fmt_minutes(m: f64) -> String {
    if m < 1.0 {
        format!("{m:.4} min ({:.2} s)", m * 60.0)
    } else {
        format!("{m:.3} min")
    }
}

/// Per-run lines for people, on stderr.
pub struct ExecProgress {
    pub quiet: bool,
}

impl ExecObserver for ExecProgress {
    fn run_starting(&self, index: usize, runs: usize, seed: u64) {
        if !self.quiet {
            eprintln!("referee: run {}/{runs} (seed {seed}) starting", index + 1);
        }
    }
    fn run_finished(&self, r: &ExecRun) {
        eprintln!(
            "referee: run {}: {}{} ({}){}",
            r.index + 1,
            r.status,
            r.time_to_train_minutes
                .map(|m| format!(" in {}", fmt_minutes(m)))
                .unwrap_or_default(),
            r.exit,
            r.reason
                .as_ref()
                .map(|w| format!(": {}", term(w)))
                .unwrap_or_default()
        );
        if let Some(p) = &r.power {
            eprintln!("referee: run {} {}", r.index + 1, p.line());
        }
    }
}

/// The env map of a run's provenance: what the program saw, no secrets.
pub fn provenance_env(extra: &[(String, String)]) -> BTreeMap<String, String> {
    crate::provenance::filtered_env(std::env::vars().chain(extra.iter().cloned()))
}
