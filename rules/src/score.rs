//! Scores: time to train per run, olympic mean per benchmark directory,
//! `scaling.json`, the RCP verdict, and energy — as the official result
//! summarizer computes them, without its side effects (referee never writes
//! into the results tree while scoring).
//!
//! Per run: the log must pass compliance (the ruleset's common.yaml chain)
//! and parse cleanly; time to train = run_stop − run_start in minutes (the
//! last run_start before the first run_stop). A run that fails counts as
//! dropped. Per directory: more than `max_dropped` drops (1, unet3d 4)
//! makes the score invalid; otherwise sort the times, drop `max_dropped`
//! fastest and `max_dropped − dropped` slowest, average the rest, multiply
//! by `scaling.json`'s factor when the file exists.

use crate::checker::{CheckError, Checker, LogReport, RulesetChoice};
use crate::diag::{Diagnostic, Verdict};
use crate::error::{DirError, NotCounted, PowerError, RcpTableError, RunReadError, SeedError};
use crate::layout::{self, BenchmarkDir};
use crate::mllog::{self, ParsedLog, Record};
use crate::rcp::{self, Pruning, RcpOptions, RcpOutcome, RcpPass, RcpTable, RunConvergence};
use crate::ruleset_facts::RulesetFacts;
use crate::seeds::{self, SeedRecord};
use crate::stats::np_mean;
use crate::sysdesc::SystemDesc;
use rayon::prelude::*;
use serde::Serialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Everything scoring and package checks need to know.
pub struct ScoreContext {
    pub checker: Arc<Checker>,
    pub usage: String,
    pub ruleset: String,
    pub facts: RulesetFacts,
    /// Directory of official RCP tables (`mlperf_logging/rcp_checker`).
    pub rcp_dir: Option<PathBuf>,
    /// RCP tables given as JSON text (referee's own benchmarks).
    pub rcp_json: HashMap<String, String>,
    pub pruning: Pruning,
    /// The compliance rules per log (default: the official ruleset's chain).
    pub choice: RulesetChoice,
    tables: Mutex<HashMap<String, Result<RcpTable, RcpTableError>>>,
}

impl ScoreContext {
    pub fn new(
        checker: Arc<Checker>,
        usage: &str,
        ruleset: &str,
        facts: RulesetFacts,
        rcp_dir: Option<PathBuf>,
    ) -> Self {
        ScoreContext {
            checker,
            usage: usage.to_string(),
            ruleset: ruleset.to_string(),
            facts,
            rcp_dir,
            rcp_json: HashMap::new(),
            pruning: Pruning::Official,
            choice: RulesetChoice::Official {
                usage: usage.to_string(),
                version: ruleset.to_string(),
            },
            tables: Mutex::new(HashMap::new()),
        }
    }

    /// The compliance rules used per log.
    pub fn choice(&self) -> RulesetChoice {
        self.choice.clone()
    }

    /// The RCP table of a benchmark (loaded once).
    pub fn table(&self, benchmark: &str) -> Result<RcpTable, RcpTableError> {
        if let Some(t) = self.tables.lock().expect("table lock").get(benchmark) {
            return t.clone();
        }
        let t = if let Some(text) = self.rcp_json.get(benchmark) {
            RcpTable::from_json(
                text,
                &format!("<embedded rcps_{benchmark}.json>"),
                &self.usage,
                &self.ruleset,
                benchmark,
                &self.facts,
            )
        } else if let Some(dir) = &self.rcp_dir {
            RcpTable::load(dir, &self.usage, &self.ruleset, benchmark, &self.facts)
        } else {
            Err(RcpTableError::NoTables)
        };
        let t = t.map(|mut t| {
            if self.pruning != Pruning::Official {
                t.pruned = t.prune(self.pruning);
            }
            t
        });
        self.tables
            .lock()
            .expect("table lock")
            .insert(benchmark.to_string(), t.clone());
        t
    }

    pub fn rcp_options(&self, bypass: bool, bert_train_samples: bool) -> RcpOptions {
        RcpOptions {
            usage: self.usage.clone(),
            ruleset: self.ruleset.clone(),
            pass: RcpPass::Pruned,
            pruning: self.pruning,
            bypass,
            bert_train_samples,
        }
    }
}

/// What one result log yields.
#[derive(Debug, Clone)]
pub struct RunAnalysis {
    pub path: PathBuf,
    pub report: Result<LogReport, CheckError>,
    /// Time to train in minutes, or why the run does not count.
    pub minutes: Result<f64, NotCounted>,
    pub run_start_ms: Option<f64>,
    pub run_stop_ms: Option<f64>,
    pub convergence: Result<RunConvergence, RunReadError>,
    pub seeds: Result<Vec<SeedRecord>, SeedError>,
}

impl RunAnalysis {
    pub fn compliant(&self) -> bool {
        matches!(&self.report, Ok(r) if r.verdict == Verdict::Pass)
    }
}

/// The official `_query_run_start_stop`: scan until both are seen; a later
/// `run_start` before the first `run_stop` replaces an earlier one.
pub fn run_start_stop(records: &[Record]) -> (Option<f64>, Option<f64>) {
    let (mut start, mut stop) = (None, None);
    for r in records.iter().filter(|r| r.index >= 0) {
        match r.key() {
            "run_start" => start = Some(r.timestamp),
            "run_stop" => stop = Some(r.timestamp),
            _ => {}
        }
        if start.is_some() && stop.is_some() {
            break;
        }
    }
    (start, stop)
}

/// Read and judge one result log.
pub fn analyze_run(ctx: &ScoreContext, path: &Path, bert_train_samples: bool) -> RunAnalysis {
    let choice = ctx.choice();
    let display = path.display().to_string();
    let mut parsed: ParsedLog = match ctx.checker.read(path, &choice) {
        Ok(p) => p,
        Err(e) => {
            let msg = e.problem.to_string();
            return RunAnalysis {
                path: path.to_path_buf(),
                report: Err(e),
                minutes: Err(NotCounted::Unreadable(msg.clone())),
                run_start_ms: None,
                run_stop_ms: None,
                convergence: Err(RunReadError::Log(msg.clone())),
                seeds: Err(SeedError::Log(msg)),
            };
        }
    };
    let opts = ctx.rcp_options(false, bert_train_samples);
    let convergence = rcp::read_run(&display, &parsed, None, &opts);
    let seeds = seeds::seeds_of(&parsed);
    let (start, stop) = run_start_stop(&parsed.records);
    let has_problems = !parsed.problems.is_empty();
    let report = ctx
        .checker
        .check_parsed(&display, &mut parsed, &choice)
        .map_err(|e| CheckError::new(path, e));
    let minutes = match &report {
        Err(e) => Err(NotCounted::Unreadable(e.problem.to_string())),
        Ok(r) if r.verdict != Verdict::Pass => Err(NotCounted::NotCompliant),
        Ok(_) if has_problems => Err(NotCounted::ParseError),
        Ok(_) => match (start, stop) {
            (None, _) => Err(NotCounted::NoRunStart),
            (_, None) => Err(NotCounted::NoRunStop),
            (Some(a), Some(b)) => Ok((b - a) / 60.0 / 1000.0),
        },
    };
    RunAnalysis {
        path: path.to_path_buf(),
        report,
        minutes,
        run_start_ms: start,
        run_stop_ms: stop,
        convergence,
        seeds,
    }
}

/// Python slice `[lo:hi]` bounds for a sequence of `len` items.
fn py_slice(len: usize, lo: i64, hi: i64) -> (usize, usize) {
    let fix = |i: i64| -> usize {
        if i < 0 {
            (len as i64 + i).max(0) as usize
        } else {
            (i as usize).min(len)
        }
    };
    let (a, b) = (fix(lo), fix(hi));
    (a, b.max(a))
}

/// The official olympic average: sort, drop `max_dropped` fastest and
/// `max_dropped − dropped` slowest (failed runs already count as the
/// slowest), mean of the rest; `None` when nothing remains. The sum is
/// sequential, as Python 3.11's `sum` is.
pub fn olympic_mean(scores: &[f64], dropped: usize, max_dropped: usize) -> Option<f64> {
    let mut s = scores.to_vec();
    s.sort_by(f64::total_cmp);
    sequential_mean(&s[olympic_range(s.len(), dropped, max_dropped)])
}

/// The positions the olympic average keeps in a list of `len` runs sorted
/// by time: Python's `[max_dropped : len − (max_dropped − dropped)]`.
pub fn olympic_range(len: usize, dropped: usize, max_dropped: usize) -> std::ops::Range<usize> {
    let (a, b) = py_slice(
        len,
        max_dropped as i64,
        len as i64 - (max_dropped as i64 - dropped as i64),
    );
    a..b
}

/// The mean with a sequential sum (as Python 3.11's `sum`); `None` when
/// empty.
fn sequential_mean(kept: &[f64]) -> Option<f64> {
    (!kept.is_empty()).then(|| kept.iter().fold(0.0, |acc, x| acc + x) / kept.len() as f64)
}

/// A benchmark directory's score.
#[derive(Debug, Clone, Serialize)]
pub struct BenchScore {
    pub benchmark: String,
    pub path: String,
    pub runs: usize,
    pub dropped: usize,
    pub max_dropped: usize,
    /// Olympic mean × scaling factor, in minutes; `None` when invalid.
    pub score_minutes: Option<f64>,
    /// From `scaling.json` (1.0 without one).
    pub scaling_factor: f64,
    pub rcp: Option<String>,
    pub rcp_message: Option<String>,
    /// The factor the RCP test computes (what the official tools would
    /// write to `scaling.json`).
    pub rcp_normalization: Option<f64>,
    pub global_batch_size: Option<f64>,
    pub samples_to_converge: Option<f64>,
    pub energy: Option<f64>,
    /// Per-run minutes (None for dropped runs), in file order.
    pub run_minutes: Vec<Option<f64>>,
    #[serde(skip)]
    pub rcp_outcome: Option<RcpOutcome>,
    pub diagnostics: Vec<Diagnostic>,
    /// Findings beyond the official verdict ([`crate::policy`]): of each
    /// log, then of the result set.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub policy: Vec<Diagnostic>,
    /// Their counts (present when there is a finding).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy_summary: Option<crate::policy::PolicySummary>,
}

/// Read `scaling.json` (`{"scaling_factor": x}`); 1.0 when absent.
pub fn scaling_factor(dir: &Path) -> Result<f64, DirError> {
    let p = dir.join("scaling.json");
    if !p.is_file() {
        return Ok(1.0);
    }
    let text = std::fs::read_to_string(&p).map_err(|e| DirError::io(&p, e))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| DirError::Json {
        path: p.clone(),
        source: e.into(),
    })?;
    v.get("scaling_factor")
        .and_then(|f| f.as_f64())
        .ok_or(DirError::NoScalingFactor { path: p })
}

/// Write `scaling.json` where the official package checker would write
/// one (`factor`: [`rcp::RcpOutcome::writes_scaling`]), and remove any
/// stale one where it would not; [`scaling_factor`] reads it back.
pub fn write_scaling(dir: &Path, factor: Option<f64>) -> Result<(), DirError> {
    let p = dir.join("scaling.json");
    let _ = std::fs::remove_file(&p);
    match factor {
        Some(f) => std::fs::write(&p, serde_json::json!({ "scaling_factor": f }).to_string())
            .map_err(|e| DirError::io(&p, e)),
        None => Ok(()),
    }
}

/// Score one benchmark directory from its analysed runs; `division` and
/// `nodes` (`number_of_nodes`) are the system description's, as the caller
/// read it.
pub fn score_dir(
    ctx: &ScoreContext,
    dir: &BenchmarkDir,
    division: &str,
    nodes: Option<i64>,
    runs: &[RunAnalysis],
    submitter: &str,
) -> BenchScore {
    let mut diags = Vec::new();
    let max_dropped = ctx.facts.max_dropped(&ctx.usage, &dir.benchmark);
    let times = RunTimes::of(runs, &mut diags);
    let dropped = times.dropped;
    report_dropped_runs(dir, submitter, dropped, max_dropped, &mut diags);
    let (scale, score) = scaled_score(dir, &times.counted, dropped, max_dropped, &mut diags);
    let energy = if dir.path.join("power").is_dir() && dropped <= max_dropped {
        energy_score(dir, runs, dropped, max_dropped, scale, &mut diags)
    } else {
        None
    };
    // RCP, GBS and samples to converge: closed division only.
    let rcp = if division == "closed" {
        rcp_columns(ctx, dir, runs, submitter, scale, &mut diags)
    } else {
        RcpColumns::default()
    };
    BenchScore {
        benchmark: dir.benchmark.clone(),
        path: dir.path.display().to_string(),
        runs: runs.len(),
        dropped,
        max_dropped,
        score_minutes: score,
        scaling_factor: scale,
        rcp: rcp.column,
        rcp_message: rcp.message,
        rcp_normalization: rcp.normalization,
        global_batch_size: rcp.global_batch_size,
        samples_to_converge: rcp.samples_to_converge,
        energy,
        run_minutes: times.per_run,
        rcp_outcome: rcp.outcome,
        diagnostics: diags,
        policy: policy_of_set(
            dir,
            division == "closed" && ctx.facts.has_seed_and_rcp_checks(&ctx.ruleset),
            nodes,
            runs,
            ctx.facts
                .benchmark(&ctx.usage, &dir.benchmark)
                .map(|b| b.result_files)
                .unwrap_or(0),
        ),
        policy_summary: None,
    }
}

/// The times to train of a directory's runs.
struct RunTimes {
    /// Minutes of the runs that count, in file order.
    counted: Vec<f64>,
    /// Minutes per run (`None` for a dropped run), in file order.
    per_run: Vec<Option<f64>>,
    /// Runs that do not count.
    dropped: usize,
}

impl RunTimes {
    /// Collect the times, with a `run-dropped` warning for each run that
    /// does not count.
    fn of(runs: &[RunAnalysis], diags: &mut Vec<Diagnostic>) -> Self {
        let mut times = RunTimes {
            counted: Vec::new(),
            per_run: Vec::new(),
            dropped: 0,
        };
        for r in runs {
            match &r.minutes {
                Ok(m) => {
                    times.counted.push(*m);
                    times.per_run.push(Some(*m));
                }
                Err(why) => {
                    times.dropped += 1;
                    times.per_run.push(None);
                    diags.push(
                        Diagnostic::warning("run-dropped", format!("run does not count: {why}"))
                            .rule("scoring", None)
                            .file(r.path.display().to_string())
                            .official(format!("{why} in {}", r.path.display())),
                    );
                }
            }
        }
        times
    }
}

/// The verdict on dropped runs: an error when more than olympic scoring
/// allows, a note when some were dropped as the slowest.
fn report_dropped_runs(
    dir: &BenchmarkDir,
    submitter: &str,
    dropped: usize,
    max_dropped: usize,
    diags: &mut Vec<Diagnostic>,
) {
    let label = format!("{submitter} {}/{}", dir.system, dir.benchmark);
    if dropped > max_dropped {
        diags.push(
            Diagnostic::error(
                "too-many-failed-runs",
                format!("{dropped} runs failed; olympic scoring allows at most {max_dropped}: the score is invalid"),
            )
            .rule("scoring", None)
            .file(dir.path.display().to_string())
            .official(format!("CRITICAL ERROR: Too many non-converging runs for {label}")),
        );
    } else if dropped >= 1 {
        diags.push(
            Diagnostic::note(
                "olympic-drop",
                format!(
                    "{dropped} failed run{} dropped as the slowest",
                    if dropped == 1 { "" } else { "s" }
                ),
            )
            .rule("scoring", None)
            .file(dir.path.display().to_string())
            .official(format!(
                "NOTICE: Dropping non-converged run(s) for {label} using olympic scoring."
            )),
        );
    }
}

/// `(scaling factor, olympic mean × factor)`; the score is `None` when too
/// many runs were dropped or `scaling.json` is unreadable (an error then,
/// and the factor 1.0).
fn scaled_score(
    dir: &BenchmarkDir,
    counted: &[f64],
    dropped: usize,
    max_dropped: usize,
    diags: &mut Vec<Diagnostic>,
) -> (f64, Option<f64>) {
    match scaling_factor(&dir.path) {
        Ok(f) => {
            let s = if dropped <= max_dropped {
                olympic_mean(counted, dropped, max_dropped).map(|m| m * f)
            } else {
                None
            };
            (f, s)
        }
        Err(e) => {
            diags.push(
                Diagnostic::error("scaling-json", e.to_string())
                    .rule("scoring", None)
                    .file(dir.path.join("scaling.json").display().to_string()),
            );
            (1.0, None)
        }
    }
}

/// The directory's energy from its power logs: per-run energy ordered by
/// run time (stable), the olympic slice of it averaged, times the scaling
/// factor. An unreadable power log is an error and gives no energy.
fn energy_score(
    dir: &BenchmarkDir,
    runs: &[RunAnalysis],
    dropped: usize,
    max_dropped: usize,
    scale: f64,
    diags: &mut Vec<Diagnostic>,
) -> Option<f64> {
    match energy_of(dir, runs) {
        Ok(power) => {
            let counted: Vec<&RunAnalysis> = runs.iter().filter(|r| r.minutes.is_ok()).collect();
            let times: Vec<f64> = counted
                .iter()
                .filter_map(|r| r.minutes.as_ref().ok().copied())
                .collect();
            let listed = directory_order(&dir.path);
            let position: Vec<usize> = counted
                .iter()
                .map(|r| {
                    r.path
                        .file_name()
                        .and_then(|n| listed.iter().position(|l| l.as_os_str() == n))
                        .unwrap_or(usize::MAX)
                })
                .collect();
            let idx = order_by_time(&times, &position);
            let sorted: Vec<f64> = idx.iter().map(|&i| power[i]).collect();
            sequential_mean(&sorted[olympic_range(sorted.len(), dropped, max_dropped)])
                .map(|m| m * scale)
        }
        Err(e) => {
            diags.push(
                Diagnostic::error("power", e.to_string())
                    .rule("power", None)
                    .file(dir.path.join("power").display().to_string()),
            );
            None
        }
    }
}

/// The names in a directory in the order the file system lists them (the
/// order of `readdir`, which the official summarizer's `glob` keeps).
fn directory_order(dir: &Path) -> Vec<std::ffi::OsString> {
    std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default()
}

/// The runs in order of time to train for the energy score's olympic
/// average; equal times keep the order in which the directory lists their
/// files (`position`), as the official summarizer's stable sort of its
/// `glob` list does. Which of two runs with the same time is dropped
/// changes the energy score when their energies differ.
fn order_by_time(times: &[f64], position: &[usize]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..times.len()).collect();
    idx.sort_by(|a, b| {
        times[*a]
            .total_cmp(&times[*b])
            .then(position[*a].cmp(&position[*b]))
    });
    idx
}

/// The summary's RCP columns of one directory (all `None` outside the
/// closed division).
#[derive(Default)]
struct RcpColumns {
    column: Option<String>,
    message: Option<String>,
    normalization: Option<f64>,
    global_batch_size: Option<f64>,
    samples_to_converge: Option<f64>,
    outcome: Option<RcpOutcome>,
}

/// Run the RCP test as the summarizer does and fill its columns. Where the
/// official checker crashes the columns stay empty; the outcome's findings
/// come after the summarizer's own.
fn rcp_columns(
    ctx: &ScoreContext,
    dir: &BenchmarkDir,
    runs: &[RunAnalysis],
    submitter: &str,
    scale: f64,
    diags: &mut Vec<Diagnostic>,
) -> RcpColumns {
    let convergences = runs.iter().map(|r| r.convergence.clone()).collect();
    let check = check_rcp_runs(
        ctx,
        convergences,
        &ctx.rcp_options(false, false),
        Some(&dir.benchmark),
    );
    diags.extend(check.quirk_notes);
    let o = check.outcome;
    let mut columns = RcpColumns::default();
    if !o.official_crash {
        columns.column = Some(o.column().to_string());
        columns.message = Some(o.message.clone());
        columns.normalization = Some(o.norm_factor);
        columns.global_batch_size = o.global_batch_size;
        if !o.insufficient() {
            let mut pts: Vec<f64> = o.runs.iter().map(|r| r.point).collect();
            pts.sort_by(f64::total_cmp);
            if pts.len() >= 3 {
                columns.samples_to_converge = Some(np_mean(&pts[1..pts.len() - 1]));
            }
        }
        if !o.passed {
            diags.push(
                Diagnostic::error("rcp", format!("RCP test failed: {}", o.message))
                    .rule("rcp", None)
                    .file(dir.path.display().to_string())
                    .official(format!(
                        "ERROR: RCP Test Failed on {}/{}/{} with message: {}.",
                        submitter, dir.system, dir.benchmark, o.message
                    )),
            );
        }
        if let Some(f) = o.writes_scaling
            && (f - scale).abs() > 1e-12
        {
            diags.push(
                Diagnostic::note(
                    "rcp-normalization",
                    format!(
                        "the RCP test normalises this result by {f} but scaling.json {}: the official summarizer applies the factor only after a package-checker run has written it",
                        if dir.path.join("scaling.json").is_file() { format!("says {scale}") } else { "is absent".into() }
                    ),
                )
                .rule("rcp", None)
                .file(dir.path.display().to_string()),
            );
        }
    }
    diags.extend(o.diagnostics.iter().cloned());
    columns.outcome = Some(o);
    columns
}

/// The RCP test of one benchmark directory: the outcome of
/// [`rcp::check_runs`] and the notes on the official checker's behaviour
/// that shaped it ([`rcp::quirk_notes`]).
#[derive(Debug, Clone, Serialize)]
pub struct RcpDirCheck {
    pub outcome: RcpOutcome,
    /// The quirk notes (empty when no RCP table is found).
    pub quirk_notes: Vec<Diagnostic>,
}

impl RcpDirCheck {
    /// The outcome's diagnostics followed by the quirk notes: the order in
    /// which `referee rcp` reports them.
    pub fn diagnostics(&self) -> Vec<Diagnostic> {
        let mut all = self.outcome.diagnostics.clone();
        all.extend(self.quirk_notes.iter().cloned());
        all
    }
}

/// The RCP test on the convergence of a directory's runs (as
/// [`RunAnalysis::convergence`] reads them), with the quirk notes. The
/// notes come from the RCP table of the benchmark the runs name, or of
/// `dir_benchmark` (the directory's benchmark, when known) if none does.
pub fn check_rcp_runs(
    ctx: &ScoreContext,
    convergences: Vec<Result<RunConvergence, RunReadError>>,
    opts: &RcpOptions,
    dir_benchmark: Option<&str>,
) -> RcpDirCheck {
    let outcome = rcp::check_runs(convergences, &|b| ctx.table(b), opts, &ctx.facts);
    let mut quirk_notes = match outcome.benchmark.as_deref().or(dir_benchmark) {
        Some(benchmark) => match ctx.table(benchmark) {
            Ok(table) => rcp::quirk_notes(&table, &outcome, opts),
            Err(_) => Vec::new(),
        },
        None => Vec::new(),
    };
    quirk_notes.extend(rcp::engine_note(&outcome));
    RcpDirCheck {
        outcome,
        quirk_notes,
    }
}

/// The RCP test of a benchmark directory (`referee rcp`): its
/// `result_*.txt` files, analysed in parallel, then [`check_rcp_runs`].
/// An error names the directory when it cannot be listed or holds no
/// result file.
pub fn check_rcp_dir(
    ctx: &ScoreContext,
    dir: &Path,
    opts: &RcpOptions,
    bert_train_samples: bool,
) -> Result<RcpDirCheck, DirError> {
    let files = layout::result_files(dir).map_err(|e| DirError::io(dir, e))?;
    if files.is_empty() {
        return Err(DirError::NoResultFiles {
            path: dir.to_path_buf(),
        });
    }
    let convergences = files
        .par_iter()
        .map(|f| analyze_run(ctx, f, bert_train_samples).convergence)
        .collect();
    Ok(check_rcp_runs(ctx, convergences, opts, None))
}

/// Energy of each counted run (in the order of the counted runs): the
/// official node/switch power integration.
fn energy_of(dir: &BenchmarkDir, runs: &[RunAnalysis]) -> Result<Vec<f64>, PowerError> {
    let mut out = Vec::new();
    for r in runs {
        let Ok(minutes) = r.minutes else { continue };
        let name = r
            .path
            .file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_default();
        out.push(run_energy(
            &dir.path.join("power").join(&name),
            minutes * 60.0 * 1000.0,
        )?);
    }
    Ok(out)
}

/// The power logs of a run's power folder (`power/result_N/`): its
/// `node_*.txt` and its `sw_*.txt` entries, each list in name order (empty
/// when the folder cannot be read); only `.txt` names, the power logs the
/// energy is integrated from (see [`layout::power_log_entries`]).
pub fn power_logs(folder: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let txt = |p: &PathBuf| {
        p.file_name()
            .is_some_and(|n| n.to_string_lossy().ends_with(".txt"))
    };
    // Every entry is `node_*` or `sw_*`: what is not a node's is a switch's.
    layout::power_log_entries(folder)
        .into_iter()
        .filter(txt)
        .partition(|p| layout::is_power_name(p, "node_"))
}

fn read_power_log(path: &Path) -> Result<Vec<Record>, PowerError> {
    mllog::read_file(path)
        .map(|log| log.records)
        .map_err(|e| PowerError::Read {
            path: path.to_path_buf(),
            source: e.into(),
        })
}

/// The energy of one run from its power folder (`power/result_N/`): every
/// `node_*.txt`, then every `sw_*.txt`, in name order, over a time to train
/// of `ttt_ms`, in joules.
fn run_energy(folder: &Path, ttt_ms: f64) -> Result<f64, PowerError> {
    let (nodes, switches) = power_logs(folder);
    if nodes.is_empty() {
        return Err(PowerError::NoNodeLogs {
            folder: folder.to_path_buf(),
        });
    }
    let mut total = 0.0;
    for n in nodes {
        total += power_node(&n, &read_power_log(&n)?, ttt_ms)?;
    }
    for s in switches {
        total += power_switch(&read_power_log(&s)?, ttt_ms);
    }
    Ok(total)
}

/// The energy of the run whose result log is `log` (`DIR/result_N.txt`),
/// from its power folder `DIR/power/result_N/` (every `node_*.txt` and
/// `sw_*.txt`), over a time to train of `ttt_ms`, in joules; `None`
/// without power logs.
pub fn run_energy_joules(log: &Path, ttt_ms: f64) -> Option<Result<f64, PowerError>> {
    let stem = log.file_stem()?.to_string_lossy().to_string();
    let folder = log.parent()?.join("power").join(stem);
    match run_energy(&folder, ttt_ms) {
        Err(PowerError::NoNodeLogs { .. }) => None,
        r => Some(r),
    }
}

/// The energy of one node's power log over a run of `ttt_ms`, in joules,
/// as the official summarizer computes it (Σ reading × interval, scaled to
/// the time to train, times the conversion efficiency).
pub fn node_energy_joules(path: &Path, ttt_ms: f64) -> Result<f64, PowerError> {
    power_node(path, &read_power_log(path)?, ttt_ms)
}

/// What one power log measured: its average power and over how long.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PowerDraw {
    /// Average power, W: a node's Σ reading × interval ÷ (stop − start) ×
    /// conversion efficiency; a switch's estimate × conversion efficiency.
    pub watts: f64,
    /// `power_reading`s counted (0 for an estimated switch).
    pub readings: usize,
    /// `power_measurement_stop` − `power_measurement_start`, s (0 for an
    /// estimated switch).
    pub seconds: f64,
}

/// The average power of a node's power log (the same integration as its
/// energy: [`node_energy_joules`] = `watts` × the time to train).
pub fn node_power(path: &Path) -> Result<PowerDraw, PowerError> {
    let i = integrate_node(path, &read_power_log(path)?)?;
    Ok(PowerDraw {
        watts: i.eff * i.agg / (i.stop - i.start),
        readings: i.readings,
        seconds: (i.stop - i.start) / 1000.0,
    })
}

/// The power of a switch's log: its `interconnect_power_est` × conversion
/// efficiency (what the official summarizer integrates).
pub fn switch_power(path: &Path) -> Result<PowerDraw, PowerError> {
    Ok(PowerDraw {
        watts: power_switch(&read_power_log(path)?, 1000.0),
        readings: 0,
        seconds: 0.0,
    })
}

/// A node log's readings integrated over its measurement window.
struct NodeIntegral {
    /// Σ reading × interval, W·ms.
    agg: f64,
    eff: f64,
    /// `power_measurement_start` / `_stop` (or the last reading), ms.
    start: f64,
    stop: f64,
    readings: usize,
}

fn integrate_node(path: &Path, records: &[Record]) -> Result<NodeIntegral, PowerError> {
    let not_a_number = |key| PowerError::NotANumber {
        path: path.to_path_buf(),
        key,
    };
    let mut recs: Vec<&Record> = records.iter().collect();
    recs.sort_by(|a, b| a.timestamp.total_cmp(&b.timestamp));
    let (mut prev, mut last, mut start, mut stop) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
    let (mut agg, mut eff, mut readings) = (0.0f64, 1.0f64, 0usize);
    let (mut started, mut stopped) = (false, false);
    for r in recs {
        match r.key() {
            "power_measurement_start" => {
                start = r.timestamp;
                prev = r.timestamp;
                started = true;
            }
            "power_reading" if !stopped && started => {
                let v = r
                    .value()
                    .as_f64()
                    .ok_or_else(|| not_a_number("power_reading"))?;
                agg += v * (r.timestamp - prev);
                prev = r.timestamp;
                last = last.max(r.timestamp);
                readings += 1;
            }
            "power_measurement_stop" => {
                stop = r.timestamp;
                stopped = true;
            }
            "conversion_eff" => {
                eff = r
                    .value()
                    .as_f64()
                    .ok_or_else(|| not_a_number("conversion_eff"))?
            }
            _ => {}
        }
    }
    if !started {
        return Err(PowerError::NoStart {
            path: path.to_path_buf(),
        });
    }
    if !stopped {
        stop = last;
    }
    if stop == start {
        return Err(PowerError::ZeroWindow {
            path: path.to_path_buf(),
        });
    }
    Ok(NodeIntegral {
        agg,
        eff,
        start,
        stop,
        readings,
    })
}

fn power_node(path: &Path, records: &[Record], ttt_ms: f64) -> Result<f64, PowerError> {
    let i = integrate_node(path, records)?;
    Ok(i.eff * i.agg * ttt_ms / (i.stop - i.start) / 1000.0)
}

fn power_switch(records: &[Record], ttt_ms: f64) -> f64 {
    let (mut agg, mut eff) = (0.0, 1.0);
    for r in records {
        match r.key() {
            "conversion_eff" => eff = r.value().as_f64().unwrap_or(1.0),
            "interconnect_power_est" => {
                agg = r.value().as_f64().unwrap_or(0.0);
                break;
            }
            _ => {}
        }
    }
    eff * agg * ttt_ms / 1000.0
}

/// `number_of_nodes` of the system description of a result set
/// (`ORG/systems/SYSTEM.json`, ORG three folders above the set), for a
/// caller that has not read that description itself.
pub fn nodes_of_set(dir: &BenchmarkDir) -> Option<i64> {
    let org = dir.path.ancestors().nth(3)?;
    crate::sysdesc::SystemDesc::load(&org.join("systems").join(format!("{}.json", dir.system)))
        .ok()
        .and_then(|d| d.int("number_of_nodes"))
}

/// The policy findings of one result set (`results/SYSTEM/BENCHMARK` of
/// an organisation folder): each log's, then the set's; `nodes` is the
/// system description's `number_of_nodes`, as the caller read it.
pub(crate) fn policy_of_set(
    dir: &BenchmarkDir,
    official_seed_check: bool,
    nodes: Option<i64>,
    runs: &[RunAnalysis],
    required: usize,
) -> Vec<Diagnostic> {
    let mut out: Vec<Diagnostic> = runs
        .iter()
        .filter_map(|r| r.report.as_ref().ok())
        .flat_map(|r| r.policy.iter().cloned())
        .collect();
    let empty = crate::policy::log::Disclosed::default();
    let set_runs: Vec<crate::policy::set::SetRun> = runs
        .iter()
        .map(|r| crate::policy::set::SetRun {
            path: &r.path,
            disclosed: r.report.as_ref().map(|x| &x.disclosed).unwrap_or(&empty),
            seeds: r.seeds.as_ref().ok().map(Vec::as_slice),
        })
        .collect();
    let org = dir.path.ancestors().nth(3);
    let power = dir.path.join("power");
    if power.is_dir() {
        let folders: Vec<PathBuf> = runs
            .iter()
            .map(|r| power.join(r.path.file_stem().unwrap_or_default()))
            .collect();
        let power_runs: Vec<crate::policy::power::PowerRun> = runs
            .iter()
            .zip(&folders)
            .filter(|(_, f)| f.is_dir())
            .map(|(r, f)| crate::policy::power::PowerRun {
                folder: f,
                run_start_ms: r.run_start_ms,
                run_stop_ms: r.run_stop_ms,
            })
            .collect();
        out.extend(crate::policy::power::check_power(&power_runs, nodes));
    }
    let code_dirs = org
        .map(|org| {
            let implementations = org
                .join("benchmarks")
                .join(&dir.benchmark)
                .join("implementations");
            crate::layout::sub_dirs(&implementations).unwrap_or_default()
        })
        .unwrap_or_default();
    out.extend(crate::policy::set::check_set(
        &crate::policy::set::SetContext {
            dir: &dir.path,
            code_dirs,
            required_runs: required,
            official_seed_check,
        },
        &set_runs,
    ));
    out
}

/// One row of the summary: a system × benchmark.
#[derive(Debug, Clone, Serialize)]
pub struct ScoreRow {
    pub submitter: String,
    pub submitter_dir: String,
    /// The system JSON's file stem.
    pub system: String,
    pub system_name: String,
    pub division: String,
    pub availability: String,
    pub accelerators_count: Option<i64>,
    pub framework: String,
    #[serde(flatten)]
    pub score: BenchScore,
}

/// The result logs `summarize` of `orgs` reads (for its progress and
/// its closing line).
pub fn count_logs(orgs: &[PathBuf], usage: &str) -> usize {
    orgs.iter()
        .flat_map(|o| layout::benchmark_dirs(o, usage).unwrap_or_default())
        .map(|d| layout::result_files(&d.path).map(|f| f.len()).unwrap_or(0))
        .sum()
}

/// The rows of [`summarize`] as they are shown: each row's policy findings
/// under `mode` (with their summary, where there are any), the rows in
/// order of submitter folder, system and benchmark.
pub fn finish_rows(rows: &mut [ScoreRow], mode: crate::policy::PolicyMode) {
    for r in rows.iter_mut() {
        crate::policy::apply_mode(&mut r.score.policy, mode);
        if !r.score.policy.is_empty() {
            r.score.policy_summary = Some(crate::policy::PolicySummary::of(mode, &r.score.policy));
        }
    }
    rows.sort_by(|x, y| {
        (&x.submitter_dir, &x.system, &x.score.benchmark).cmp(&(
            &y.submitter_dir,
            &y.system,
            &y.score.benchmark,
        ))
    });
}

/// Summarise organisation folders: every benchmark directory of every
/// system. Logs are analysed in parallel. Returns rows (sorted by
/// submitter folder, system, benchmark) and problems that prevented rows.
pub fn summarize(
    ctx: &ScoreContext,
    orgs: &[PathBuf],
    progress: &(dyn Fn() + Sync),
) -> (Vec<ScoreRow>, Vec<Diagnostic>) {
    let mut problems = Vec::new();
    let mut dirs: Vec<(BenchmarkDir, SystemDesc)> = Vec::new();
    for org in orgs {
        let bdirs = match layout::benchmark_dirs(org, &ctx.usage) {
            Ok(d) => d,
            Err(e) => {
                problems.push(
                    Diagnostic::error("layout", format!("cannot list results: {e}"))
                        .file(org.display().to_string()),
                );
                continue;
            }
        };
        let mut systems: HashMap<String, Option<SystemDesc>> = HashMap::new();
        for d in bdirs {
            let desc = systems
                .entry(d.system.clone())
                .or_insert_with(|| {
                    let p = org.join("systems").join(format!("{}.json", d.system));
                    match SystemDesc::load(&p) {
                        Ok(s) => Some(s),
                        Err(diag) => {
                            let mut diag = *diag;
                            diag.message =
                                format!("system {} is skipped: {}", d.system, diag.message);
                            problems.push(diag);
                            None
                        }
                    }
                })
                .clone();
            if let Some(desc) = desc {
                dirs.push((d, desc));
            }
        }
    }
    // All logs of all directories, analysed in parallel.
    let files: Vec<(usize, PathBuf)> = dirs
        .iter()
        .enumerate()
        .flat_map(|(i, (d, _))| {
            layout::result_files(&d.path)
                .unwrap_or_default()
                .into_iter()
                .map(move |p| (i, p))
        })
        .collect();
    let analysed: Vec<(usize, RunAnalysis)> = files
        .par_iter()
        .map(|(i, p)| {
            let a = analyze_run(ctx, p, false);
            progress();
            (*i, a)
        })
        .collect();
    let mut by_dir: Vec<Vec<RunAnalysis>> = vec![Vec::new(); dirs.len()];
    for (i, a) in analysed {
        by_dir[i].push(a);
    }
    let rows: Vec<ScoreRow> = dirs
        .par_iter()
        .zip(by_dir.par_iter())
        .map(|((d, desc), runs)| {
            let submitter = desc.text("submitter").unwrap_or_default();
            let division = desc.text("division").unwrap_or_default();
            let nodes = desc.int("number_of_nodes");
            let score = score_dir(ctx, d, &division, nodes, runs, &submitter);
            let accelerators = match (desc.int("accelerators_per_node"), nodes) {
                (Some(a), Some(n)) => Some(a * n),
                _ => None,
            };
            ScoreRow {
                submitter,
                submitter_dir: d
                    .org
                    .file_name()
                    .map(|n| n.to_string_lossy().to_string())
                    .unwrap_or_default(),
                system: d.system.clone(),
                system_name: desc.text("system_name").unwrap_or_default(),
                division,
                availability: desc.text("status").unwrap_or_default(),
                accelerators_count: accelerators,
                framework: desc.text("framework").unwrap_or_default(),
                score,
            }
        })
        .collect();
    (rows, problems)
}

#[cfg(test)]
mod tests {
    #[test]
    fn equal_times_keep_the_directory_listing_order() {
        // Runs 0 and 2 tie; the directory lists run 2's file first.
        let times = [2.0, 1.0, 2.0, 3.0];
        assert_eq!(
            super::order_by_time(&times, &[3, 1, 0, 2]),
            vec![1, 2, 0, 3]
        );
        assert_eq!(
            super::order_by_time(&times, &[0, 1, 2, 3]),
            vec![1, 0, 2, 3]
        );
    }

    use super::*;

    #[test]
    fn scaling_json_is_written_read_back_and_removed_when_not_due() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(scaling_factor(dir.path()).unwrap(), 1.0);
        write_scaling(dir.path(), Some(1.25)).unwrap();
        assert_eq!(scaling_factor(dir.path()).unwrap(), 1.25);
        // Where the official checker writes none, a stale file goes.
        write_scaling(dir.path(), None).unwrap();
        assert!(!dir.path().join("scaling.json").exists());
        assert_eq!(scaling_factor(dir.path()).unwrap(), 1.0);
    }
}
