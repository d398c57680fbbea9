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
    // A file of the package (see crate::untrusted): a link or a FIFO of
    // that name is an error, not a missing file.
    let text = match crate::untrusted::read_to_string(
        &p,
        crate::untrusted::FileKind::Config,
        crate::untrusted::Links::Refuse,
    ) {
        Ok(t) => t,
        Err(crate::untrusted::UntrustedError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            return Ok(1.0);
        }
        Err(e) => return Err(DirError::io(&p, e.into_io())),
    };
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
    let energy = if layout::is_real_dir(&dir.path.join("power")) && dropped <= max_dropped {
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
    if layout::is_real_dir(&power) {
        let folders: Vec<PathBuf> = runs
            .iter()
            .map(|r| power.join(r.path.file_stem().unwrap_or_default()))
            .collect();
        let power_runs: Vec<crate::policy::power::PowerRun> = runs
            .iter()
            .zip(&folders)
            .filter(|(_, f)| layout::is_real_dir(f))
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
            org_folder: dir
                .org
                .file_name()
                .map(|n| n.to_string_lossy().into_owned()),
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
        let bdirs = match layout::results_tree(org, &ctx.usage) {
            Ok(t) => {
                problems.extend(t.findings);
                t.dirs
            }
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
    use crate::diag::Severity;
    use crate::testing::{bumpy_table_json, mllog_line, toy_facts};

    /// The MLLOG lines of `(time_ms, event, key, value)` events.
    fn mllog_text(events: &[(u64, &str, &str, &str)]) -> String {
        events
            .iter()
            .map(|(t, ev, key, value)| mllog_line(*t, ev, key, value, "{}"))
            .collect()
    }

    /// The events' records, parsed as a file's would be.
    fn records(events: &[(u64, &str, &str, &str)]) -> Vec<Record> {
        let log = mllog::read_from(mllog_text(events).as_bytes()).unwrap();
        assert!(log.problems.is_empty(), "{:?}", log.problems);
        log.records
    }

    fn write_log(path: &Path, events: &[(u64, &str, &str, &str)]) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, mllog_text(events)).unwrap();
    }

    const P: &str = "POINT_IN_TIME";

    #[test]
    fn run_start_is_the_last_one_before_the_first_run_stop() {
        let mut recs = records(&[
            (100, "INTERVAL_START", "run_start", "null"),
            (150, "INTERVAL_END", "run_stop", "null"),
            (200, "INTERVAL_START", "run_start", "null"),
            (500, "INTERVAL_END", "run_stop", "null"),
            (600, "INTERVAL_START", "run_start", "null"),
            (700, "INTERVAL_END", "run_stop", "null"),
        ]);
        // The first run_stop at 150 is synthesised by a rule, not logged.
        recs[1].index = -1;
        assert_eq!(run_start_stop(&recs), (Some(200.0), Some(500.0)));
        assert_eq!(run_start_stop(&recs[..1]), (Some(100.0), None));
        assert_eq!(run_start_stop(&recs[3..4]), (None, Some(500.0)));
        assert_eq!(run_start_stop(&[]), (None, None));
    }

    #[test]
    fn python_slices_count_negative_bounds_from_the_end_and_clamp() {
        assert_eq!(py_slice(5, 1, -1), (1, 4));
        assert_eq!(py_slice(5, -2, 10), (3, 5));
        assert_eq!(py_slice(2, -5, 1), (0, 1));
        // An empty slice starts and ends at its start.
        assert_eq!(py_slice(3, 5, 1), (3, 3));
        assert_eq!(py_slice(4, 3, 1), (3, 3));
        assert_eq!(py_slice(3, 0, 2), (0, 2));
    }

    #[test]
    fn olympic_scoring_drops_the_fastest_and_the_slowest_not_yet_dropped() {
        // Five runs: the fastest and the slowest go.
        assert_eq!(olympic_mean(&[5.0, 1.0, 3.0, 2.0, 4.0], 0, 1), Some(3.0));
        assert_eq!(olympic_range(5, 0, 1), 1..4);
        // One run failed and counts as the slowest: only the fastest goes.
        assert_eq!(olympic_mean(&[4.0, 1.0, 3.0, 2.0], 1, 1), Some(3.0));
        assert_eq!(olympic_range(4, 1, 1), 1..4);
        // unet3d: four fastest and four slowest of nine.
        let nine: Vec<f64> = (1..=9).map(f64::from).rev().collect();
        assert_eq!(olympic_mean(&nine, 0, 4), Some(5.0));
        assert_eq!(olympic_range(9, 0, 4), 4..5);
        assert_eq!(olympic_range(7, 2, 4), 4..5);
        // Nothing left to average.
        assert_eq!(olympic_mean(&[2.0, 1.0], 0, 1), None);
        assert_eq!(olympic_mean(&[], 0, 1), None);
        assert_eq!(olympic_range(1, 0, 4), 1..1);
    }

    #[test]
    fn the_mean_sums_in_order_as_python_3_11_does() {
        // 1e16 + 1 rounds back to 1e16: a sequential sum loses the 1,
        // a compensated one (Python 3.12's `sum`) keeps it.
        assert_eq!(sequential_mean(&[1e16, 1.0, -1e16]), Some(0.0));
        assert_eq!(sequential_mean(&[1.0, 2.0, 6.0]), Some(3.0));
        assert_eq!(sequential_mean(&[]), None);
    }

    /// A node log: start at 1 s, 100 W read at 2 s, 200 W at 3 s, stop at
    /// 4 s; readings before the start and after the stop do not count.
    const NODE: &[(u64, &str, &str, &str)] = &[
        (500, P, "power_reading", "1000"),
        (1000, P, "power_measurement_start", "null"),
        (1000, P, "conversion_eff", "0.5"),
        (2000, P, "power_reading", "100"),
        (3000, P, "power_reading", "200"),
        (4000, P, "power_measurement_stop", "null"),
        (5000, P, "power_reading", "1000"),
    ];

    #[test]
    fn a_node_log_integrates_its_readings_over_its_window() {
        let dir = tempfile::tempdir().unwrap();
        let node = dir.path().join("node_0.txt");
        write_log(&node, NODE);
        // Σ reading × interval = 100 × 1000 + 200 × 1000 W·ms over 3 s:
        // 100 W, times the efficiency 0.5.
        let draw = node_power(&node).unwrap();
        assert_eq!(
            draw,
            PowerDraw {
                watts: 50.0,
                readings: 2,
                seconds: 3.0
            }
        );
        // Over a time to train of 6 s: 50 W × 6 s.
        assert_eq!(node_energy_joules(&node, 6000.0).unwrap(), 300.0);
        // The lines in any order: the log is sorted by time first.
        let mut shuffled = NODE.to_vec();
        shuffled.reverse();
        write_log(&node, &shuffled);
        assert_eq!(node_energy_joules(&node, 6000.0).unwrap(), 300.0);
    }

    #[test]
    fn a_node_log_without_a_stop_ends_at_its_last_reading() {
        let dir = tempfile::tempdir().unwrap();
        let node = dir.path().join("node_0.txt");
        write_log(&node, &NODE[1..5]);
        // 300,000 W·ms over 2 s, efficiency 0.5.
        let draw = node_power(&node).unwrap();
        assert_eq!((draw.watts, draw.readings, draw.seconds), (75.0, 2, 2.0));
        assert_eq!(node_energy_joules(&node, 4000.0).unwrap(), 300.0);
    }

    #[test]
    fn broken_node_logs_are_named_errors() {
        let dir = tempfile::tempdir().unwrap();
        let node = dir.path().join("node_0.txt");
        write_log(&node, &[(2000, P, "power_reading", "100")]);
        assert!(matches!(node_power(&node), Err(PowerError::NoStart { path }) if path == node));
        write_log(
            &node,
            &[
                (1000, P, "power_measurement_start", "null"),
                (1000, P, "power_measurement_stop", "null"),
            ],
        );
        assert!(matches!(
            node_energy_joules(&node, 1000.0),
            Err(PowerError::ZeroWindow { .. })
        ));
        for key in ["power_reading", "conversion_eff"] {
            write_log(
                &node,
                &[
                    (1000, P, "power_measurement_start", "null"),
                    (2000, P, key, "\"high\""),
                ],
            );
            assert!(
                matches!(node_power(&node), Err(PowerError::NotANumber { key: k, .. }) if k == key)
            );
        }
        assert!(matches!(
            node_power(&dir.path().join("node_9.txt")),
            Err(PowerError::Read { .. })
        ));
    }

    #[test]
    fn a_switch_draws_its_first_estimate_times_its_efficiency() {
        let dir = tempfile::tempdir().unwrap();
        let sw = dir.path().join("sw_0.txt");
        write_log(
            &sw,
            &[
                (1000, P, "conversion_eff", "0.8"),
                (1000, P, "interconnect_power_est", "50"),
                (2000, P, "interconnect_power_est", "999"),
            ],
        );
        assert_eq!(
            switch_power(&sw).unwrap(),
            PowerDraw {
                watts: 40.0,
                readings: 0,
                seconds: 0.0
            }
        );
    }

    #[test]
    fn a_runs_energy_adds_every_node_and_switch_of_its_power_folder() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("power").join("result_3");
        write_log(&folder.join("node_0.txt"), NODE);
        write_log(&folder.join("node_1.txt"), NODE);
        write_log(
            &folder.join("sw_0.txt"),
            &[(1000, P, "interconnect_power_est", "10")],
        );
        // Not a power log: neither .txt nor node_/sw_.
        std::fs::write(folder.join("node_2.json"), "{}").unwrap();
        std::fs::write(folder.join("readme.txt"), "x").unwrap();
        let (nodes, switches) = power_logs(&folder);
        assert_eq!(
            nodes,
            vec![folder.join("node_0.txt"), folder.join("node_1.txt")]
        );
        assert_eq!(switches, vec![folder.join("sw_0.txt")]);
        // 6 s: two nodes at 50 W and a switch at 10 W.
        let log = dir.path().join("result_3.txt");
        let joules = run_energy_joules(&log, 6000.0).unwrap().unwrap();
        assert_eq!(joules, 2.0 * 300.0 + 60.0);
        // A run without a power folder has no energy; a broken log is an error.
        assert!(run_energy_joules(&dir.path().join("result_4.txt"), 6000.0).is_none());
        write_log(&folder.join("node_1.txt"), &NODE[..1]);
        assert!(matches!(
            run_energy_joules(&log, 6000.0),
            Some(Err(PowerError::NoStart { .. }))
        ));
    }

    /// A toy benchmark scored under a toy ruleset: one rule file (a run
    /// complies when it starts once and stops once with status success),
    /// olympic scoring over 5 runs, and an RCP table whose 10 reference
    /// runs all converged at 100 samples (so the smallest acceptable mean is
    /// 100).
    fn toy_context() -> ScoreContext {
        use crate::ruleset::RuleLibrary;
        let mut lib = RuleLibrary::embedded_only();
        lib.add_embedded(
            "toy.yaml",
            "- KEY:\n    NAME: run_start\n    REQ: EXACTLY_ONE\n\
             - KEY:\n    NAME: run_stop\n    REQ: EXACTLY_ONE\n    CHECK: \" v['metadata']['status'] == 'success' \"\n",
        );
        let facts = toy_facts();
        let checker = Arc::new(Checker::new(Arc::new(lib), Default::default()));
        let mut ctx = ScoreContext::new(checker, "training", "toy-1.0", facts, None);
        ctx.choice = RulesetChoice::Config("toy.yaml".into());
        ctx.rcp_json.insert(
            "mini_toy".into(),
            r#"{"mini_toy_ref_8": {"Benchmark": "mini_toy", "BS": 8, "Epochs to converge": [100, 100, 100, 100, 100, 100, 100, 100, 100, 100]}}"#.into(),
        );
        ctx
    }

    /// One toy run: `minutes` from run_start to run_stop, converged at
    /// `samples` (or aborted there).
    fn toy_log(path: &Path, minutes: f64, samples: u64, success: bool) {
        let t0 = 1_700_000_000_000u64;
        let t1 = t0 + (minutes * 60_000.0) as u64;
        let status = if success { "success" } else { "aborted" };
        let stop_meta = format!(r#"{{"samples_count": {samples}, "status": "{status}"}}"#);
        let text = [
            mllog_line(t0, P, "submission_benchmark", r#""mini_toy""#, "{}"),
            mllog_line(t0, P, "global_batch_size", "8", "{}"),
            // The same seed from the same line in every run.
            mllog_line(t0, P, "seed", "42", r#"{"file": "train.py", "lineno": 7}"#),
            mllog_line(t0, "INTERVAL_START", "run_start", "null", "{}"),
            mllog_line(
                t1,
                P,
                "eval_accuracy",
                "0.9",
                &format!(r#"{{"samples_count": {samples}}}"#),
            ),
            mllog_line(t1, "INTERVAL_END", "run_stop", "null", &stop_meta),
        ]
        .concat();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// `result_<i>.txt` in `path` for each run `(minutes, samples, success)`.
    fn write_toy_set(path: &Path, runs: &[(f64, u64, bool)]) {
        for (i, &(minutes, samples, ok)) in runs.iter().enumerate() {
            toy_log(&path.join(format!("result_{i}.txt")), minutes, samples, ok);
        }
    }

    /// A toy result set `org/results/sys/mini_toy` with one run per
    /// `(minutes, samples, success)`, scored in `division`.
    fn score_toy(
        root: &Path,
        runs: &[(f64, u64, bool)],
        division: &str,
        extra: impl FnOnce(&Path),
    ) -> BenchScore {
        score_toy_in(&toy_context(), root, runs, division, extra)
    }

    /// [`score_toy`] in the context `ctx`.
    fn score_toy_in(
        ctx: &ScoreContext,
        root: &Path,
        runs: &[(f64, u64, bool)],
        division: &str,
        extra: impl FnOnce(&Path),
    ) -> BenchScore {
        let path = root.join("org/results/sys/mini_toy");
        write_toy_set(&path, runs);
        extra(&path);
        let dir = BenchmarkDir {
            org: root.join("org"),
            system: "sys".into(),
            benchmark: "mini_toy".into(),
            scaling: None,
            path: path.clone(),
        };
        let analysed: Vec<RunAnalysis> = layout::result_files(&path)
            .unwrap()
            .iter()
            .map(|f| analyze_run(ctx, f, false))
            .collect();
        score_dir(ctx, &dir, division, Some(1), &analysed, "Toy")
    }

    fn codes(s: &BenchScore) -> Vec<(&str, Severity)> {
        s.diagnostics.iter().map(|d| (d.code, d.severity)).collect()
    }

    const FIVE: &[(f64, u64, bool)] = &[
        (3.0, 120, true),
        (1.0, 100, true),
        (2.0, 110, true),
        (5.0, 140, true),
        (4.0, 130, true),
    ];

    #[test]
    fn a_result_set_scores_its_olympic_mean_in_minutes() {
        let dir = tempfile::tempdir().unwrap();
        let s = score_toy(dir.path(), FIVE, "open", |_| {});
        assert_eq!((s.runs, s.dropped, s.max_dropped), (5, 0, 1));
        assert_eq!(s.score_minutes, Some(3.0));
        assert_eq!(s.scaling_factor, 1.0);
        assert_eq!(
            s.run_minutes,
            vec![Some(3.0), Some(1.0), Some(2.0), Some(5.0), Some(4.0)]
        );
        assert_eq!(codes(&s), vec![]);
        // The open division has no RCP test.
        assert_eq!((s.rcp.as_deref(), s.samples_to_converge), (None, None));
        assert!(s.energy.is_none());
    }

    #[test]
    fn a_failed_run_is_dropped_as_the_slowest_and_two_make_the_score_invalid() {
        let dir = tempfile::tempdir().unwrap();
        let mut runs = FIVE.to_vec();
        runs[1].2 = false; // the fastest run (1 minute) failed
        let s = score_toy(&dir.path().join("one"), &runs, "open", |_| {});
        assert_eq!(s.dropped, 1);
        // 2, 3, 4 and 5 count; the fastest (2) goes, the failure was the slowest.
        assert_eq!(s.score_minutes, Some(4.0));
        assert_eq!(s.run_minutes[1], None);
        assert_eq!(
            codes(&s),
            vec![
                ("run-dropped", Severity::Warning),
                ("olympic-drop", Severity::Note)
            ]
        );
        assert!(
            s.diagnostics[0]
                .file
                .as_deref()
                .unwrap()
                .ends_with("result_1.txt")
        );
        runs[3].2 = false;
        let s = score_toy(&dir.path().join("two"), &runs, "open", |_| {});
        assert_eq!((s.dropped, s.score_minutes), (2, None));
        assert_eq!(
            codes(&s),
            vec![
                ("run-dropped", Severity::Warning),
                ("run-dropped", Severity::Warning),
                ("too-many-failed-runs", Severity::Error)
            ]
        );
    }

    #[test]
    fn scaling_json_multiplies_the_score_and_a_broken_one_voids_it() {
        let dir = tempfile::tempdir().unwrap();
        let s = score_toy(&dir.path().join("a"), FIVE, "open", |p| {
            std::fs::write(p.join("scaling.json"), r#"{"scaling_factor": 1.5}"#).unwrap()
        });
        assert_eq!((s.scaling_factor, s.score_minutes), (1.5, Some(4.5)));
        let s = score_toy(&dir.path().join("b"), FIVE, "open", |p| {
            std::fs::write(p.join("scaling.json"), r#"{"factor": 1.5}"#).unwrap()
        });
        assert_eq!((s.scaling_factor, s.score_minutes), (1.0, None));
        assert_eq!(codes(&s), vec![("scaling-json", Severity::Error)]);
    }

    #[test]
    fn the_closed_division_runs_the_rcp_test() {
        let dir = tempfile::tempdir().unwrap();
        // Olympic mean of the samples 110, 120, 130: slower than the
        // reference's 100, so it passes, and needs no normalisation.
        let s = score_toy(&dir.path().join("pass"), FIVE, "closed", |_| {});
        assert_eq!(s.rcp.as_deref(), Some("Pass"));
        assert_eq!(s.samples_to_converge, Some(120.0));
        assert_eq!(s.global_batch_size, Some(8.0));
        assert_eq!(s.rcp_normalization, Some(1.0));
        assert_eq!(codes(&s), vec![]);
        // Converging in half the reference's samples fails.
        let fast: Vec<(f64, u64, bool)> = FIVE.iter().map(|&(m, n, ok)| (m, n / 2, ok)).collect();
        let s = score_toy(&dir.path().join("fail"), &fast, "closed", |_| {});
        assert_eq!(s.rcp.as_deref(), Some("Fail"));
        assert_eq!(s.samples_to_converge, Some(60.0));
        assert_eq!(codes(&s), vec![("rcp", Severity::Error)]);
        // The score itself is unchanged by the verdict.
        assert_eq!(s.score_minutes, Some(3.0));
    }

    #[test]
    fn energy_is_the_olympic_mean_of_the_runs_ordered_by_time() {
        let dir = tempfile::tempdir().unwrap();
        let s = score_toy(dir.path(), FIVE, "open", |p| {
            toy_power(p, &[10, 1000, 30, 40, 50])
        });
        // Joules = watts × minutes × 60: 1800, 60000, 3600, 12000, 12000.
        // By time the 1-minute run (60000 J) and the 5-minute run go:
        // (1800 + 3600 + 12000) / 3.
        assert_eq!(s.energy, Some(5800.0));
        // A set with too many failures has no energy.
        let mut runs = FIVE.to_vec();
        runs[0].2 = false;
        runs[2].2 = false;
        let s = score_toy(&dir.path().join("failed"), &runs, "open", |p| {
            write_log(
                &p.join("power/result_1/node_0.txt"),
                &[(0, P, "power_measurement_start", "null")],
            );
        });
        assert_eq!(s.energy, None);
    }

    #[test]
    fn a_run_counts_when_it_complies_and_parses() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = toy_context();
        let ok = dir.path().join("result_0.txt");
        toy_log(&ok, 2.5, 100, true);
        let a = analyze_run(&ctx, &ok, false);
        assert!(a.compliant());
        assert_eq!(a.minutes, Ok(2.5));
        assert_eq!(a.run_start_ms, Some(1_700_000_000_000.0));
        assert_eq!(a.run_stop_ms, Some(1_700_000_150_000.0));
        assert_eq!(a.convergence.as_ref().unwrap().point, 100.0);
        assert_eq!(a.seeds.as_ref().unwrap().len(), 1);
        let aborted = dir.path().join("result_1.txt");
        toy_log(&aborted, 2.5, 100, false);
        let a = analyze_run(&ctx, &aborted, false);
        assert!(!a.compliant());
        assert_eq!(a.minutes, Err(NotCounted::NotCompliant));
        // A line with the marker that is not MLLOG JSON fails compliance.
        let broken = dir.path().join("result_2.txt");
        toy_log(&broken, 2.5, 100, true);
        let text = std::fs::read_to_string(&broken).unwrap() + ":::MLLOG {not json\n";
        std::fs::write(&broken, text).unwrap();
        let a = analyze_run(&ctx, &broken, false);
        assert_eq!(a.minutes, Err(NotCounted::NotCompliant));
        // A file that cannot be read.
        let a = analyze_run(&ctx, &dir.path().join("result_9.txt"), false);
        assert!(!a.compliant());
        assert!(matches!(a.minutes, Err(NotCounted::Unreadable(_))));
        assert!(a.convergence.is_err() && a.seeds.is_err());
    }

    #[test]
    fn the_seed_finding_is_referees_only_where_the_official_check_does_not_run() {
        let dir = tempfile::tempdir().unwrap();
        let seed_findings = |s: &BenchScore| {
            s.policy
                .iter()
                .filter(|d| d.message.contains("seed 42 is used by 5 runs"))
                .count()
        };
        // Open division: the official seed checker does not look.
        let s = score_toy(&dir.path().join("open"), FIVE, "open", |_| {});
        assert_eq!(seed_findings(&s), 1, "{:#?}", s.policy);
        // Closed: the official checker judges the seeds (its own verdict).
        let s = score_toy(&dir.path().join("closed"), FIVE, "closed", |_| {});
        assert_eq!(seed_findings(&s), 0, "{:#?}", s.policy);
    }

    #[test]
    fn the_context_prunes_tables_as_asked_and_passes_its_options_on() {
        let mut ctx = toy_context();
        ctx.rcp_json.insert(
            "mini_toy".into(),
            bumpy_table_json([12.0, 10.0, 11.0, 11.8, 20.0, 13.0]),
        );
        let sizes = |t: &RcpTable| t.pruned.iter().map(|r| r.bs).collect::<Vec<_>>();
        assert_eq!(
            sizes(&ctx.table("mini_toy").unwrap()),
            vec![8.0, 24.0, 40.0]
        );
        ctx.tables.lock().unwrap().clear();
        ctx.pruning = Pruning::ConvexEnvelope;
        assert_eq!(sizes(&ctx.table("mini_toy").unwrap()), vec![8.0, 40.0]);
        assert!(matches!(ctx.table("bert"), Err(RcpTableError::NoTables)));
        let o = ctx.rcp_options(true, true);
        assert_eq!(
            (o.usage.as_str(), o.ruleset.as_str()),
            ("training", "toy-1.0")
        );
        assert_eq!(
            (o.pass, o.pruning, o.bypass, o.bert_train_samples),
            (RcpPass::Pruned, Pruning::ConvexEnvelope, true, true)
        );
    }

    #[test]
    fn a_normalisation_the_rcp_test_asks_for_is_noted_until_scaling_json_has_it() {
        let dir = tempfile::tempdir().unwrap();
        // An olympic mean of 95 samples against a reference of 10 runs
        // (olympic mean 100, with spread): faster, within the allowed
        // speed-up, so it passes and is normalised by 100 / 95.
        let runs: Vec<(f64, u64, bool)> = [1, 90, 95, 100, 500]
            .iter()
            .enumerate()
            .map(|(i, &n)| (1.0 + i as f64, n, true))
            .collect();
        let spread = r#"{"r8": {"Benchmark": "mini_toy", "BS": 8, "Epochs to converge": [80, 90, 95, 98, 100, 100, 102, 105, 110, 120]}}"#;
        let mut ctx = toy_context();
        ctx.rcp_json.insert("mini_toy".into(), spread.into());
        let score = |name: &str, scaling: Option<&str>| {
            score_toy_in(&ctx, &dir.path().join(name), &runs, "closed", |p| {
                if let Some(text) = scaling {
                    std::fs::write(p.join("scaling.json"), text).unwrap();
                }
            })
        };
        let s = score("absent", None);
        assert_eq!(s.rcp.as_deref(), Some("Pass"));
        assert_eq!(s.rcp_normalization, Some(100.0 / 95.0));
        assert_eq!(codes(&s), vec![("rcp-normalization", Severity::Note)]);
        assert!(s.diagnostics[0].message.contains("scaling.json is absent"));
        let s = score("other", Some(r#"{"scaling_factor": 1.5}"#));
        assert_eq!(codes(&s), vec![("rcp-normalization", Severity::Note)]);
        assert!(s.diagnostics[0].message.contains("scaling.json says 1.5"));
        let due = format!(r#"{{"scaling_factor": {}}}"#, 100.0 / 95.0);
        let s = score("written", Some(&due));
        assert_eq!(codes(&s), vec![]);
        assert_eq!(s.score_minutes, Some(3.0 * 100.0 / 95.0));
    }

    /// Node logs drawing a steady `watts[i]` (read from 0 to 4 s) for run
    /// `i` of the set at `p`.
    fn toy_power(p: &Path, watts: &[u32]) {
        for (i, w) in watts.iter().enumerate() {
            let value = w.to_string();
            write_log(
                &p.join(format!("power/result_{i}/node_0.txt")),
                &[
                    (0, P, "power_measurement_start", "null"),
                    (4000, P, "power_reading", &value),
                    (4000, P, "power_measurement_stop", "null"),
                ],
            );
        }
    }

    #[test]
    fn energy_follows_the_scaling_factor() {
        let dir = tempfile::tempdir().unwrap();
        let s = score_toy(dir.path(), FIVE, "open", |p| {
            toy_power(p, &[10, 1000, 30, 40, 50]);
            std::fs::write(p.join("scaling.json"), r#"{"scaling_factor": 2}"#).unwrap();
        });
        assert_eq!(s.energy, Some(2.0 * 5800.0));
    }

    #[test]
    fn of_two_runs_as_fast_the_one_the_directory_lists_first_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let s = score_toy(dir.path(), FIVE, "open", |p| {
            // Two runs tie at one minute: neighbours in the directory's
            // listing that it lists out of name order, where there are any.
            let listed: Vec<usize> = std::fs::read_dir(p)
                .unwrap()
                .filter_map(|e| {
                    let name = e.unwrap().file_name().to_string_lossy().to_string();
                    name.strip_prefix("result_")?
                        .strip_suffix(".txt")?
                        .parse()
                        .ok()
                })
                .collect();
            let (first, second) = listed
                .windows(2)
                .map(|w| (w[0], w[1]))
                .find(|(a, b)| a > b)
                .unwrap_or((0, 1));
            let mut minutes = [3.0, 3.0, 3.0, 3.0, 5.0];
            minutes[first] = 1.0;
            minutes[second] = 1.0;
            let mut watts = [30; 5];
            watts[first] = 10;
            watts[second] = 1000;
            for (k, m) in minutes.iter().enumerate() {
                toy_log(&p.join(format!("result_{k}.txt")), *m, 100, true);
            }
            toy_power(p, &watts);
        });
        // The first-listed 1-minute run (10 W: 600 J) goes as the fastest;
        // the other (1000 W: 60,000 J) stays with two 3-minute runs at
        // 30 W (5,400 J each); the slowest goes.
        assert_eq!(s.score_minutes, Some((1.0 + 3.0 + 3.0) / 3.0));
        assert_eq!(s.energy, Some((60_000.0 + 5_400.0 + 5_400.0) / 3.0));
    }

    #[test]
    fn summarize_scores_each_system_and_benchmark_of_an_organisation() {
        let dir = tempfile::tempdir().unwrap();
        let org = dir.path().join("org");
        score_toy(dir.path(), FIVE, "open", |_| {});
        std::fs::create_dir_all(org.join("systems")).unwrap();
        std::fs::write(
            org.join("systems/sys.json"),
            r#"{"submitter": "Toy Inc", "division": "open", "status": "available", "system_name": "Toy box", "framework": "none", "number_of_nodes": 2, "accelerators_per_node": 4}"#,
        )
        .unwrap();
        // A system without a description is skipped with an error.
        toy_log(
            &org.join("results/ghost/mini_toy/result_0.txt"),
            1.0,
            100,
            true,
        );
        let orgs = vec![org.clone()];
        assert_eq!(count_logs(&orgs, "training"), 6);
        let ctx = toy_context();
        let seen = std::sync::atomic::AtomicUsize::new(0);
        let (mut rows, problems) = summarize(&ctx, &orgs, &|| {
            seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        });
        assert_eq!(seen.into_inner(), 5);
        assert_eq!(problems.len(), 1);
        assert!(
            problems[0].message.starts_with("system ghost is skipped"),
            "{}",
            problems[0].message
        );
        assert_eq!(rows.len(), 1);
        let r = &rows[0];
        assert_eq!(
            (
                r.submitter.as_str(),
                r.submitter_dir.as_str(),
                r.system.as_str()
            ),
            ("Toy Inc", "org", "sys")
        );
        assert_eq!(
            (
                r.system_name.as_str(),
                r.division.as_str(),
                r.availability.as_str(),
                r.framework.as_str()
            ),
            ("Toy box", "open", "available", "none")
        );
        assert_eq!(r.accelerators_count, Some(8));
        assert_eq!(r.score.score_minutes, Some(3.0));
        let dir_of = layout::benchmark_dirs(&org, "training").unwrap().remove(1);
        assert_eq!(dir_of.system, "sys");
        assert_eq!(nodes_of_set(&dir_of), Some(2));
        // The policy findings take the mode's severity and are counted.
        assert!(r.score.policy_summary.is_none());
        finish_rows(&mut rows, crate::policy::PolicyMode::Error);
        let r = &rows[0];
        assert!(!r.score.policy.is_empty());
        assert!(r.score.policy.iter().all(|d| d.severity == Severity::Error));
        let summary = r.score.policy_summary.as_ref().unwrap();
        assert_eq!(summary.findings, r.score.policy.len());
    }

    #[test]
    fn the_rcp_test_of_a_directory_lists_the_outcomes_findings_then_the_notes() {
        let dir = tempfile::tempdir().unwrap();
        let mut ctx = toy_context();
        ctx.rcp_json.insert(
            "mini_toy".into(),
            bumpy_table_json([120.0, 100.0, 110.0, 118.0, 200.0, 130.0]),
        );
        let path = dir.path().join("set");
        // Every run converges at 50 samples: too fast.
        let fast: Vec<(f64, u64, bool)> = FIVE.iter().map(|&(m, _, ok)| (m, 50, ok)).collect();
        write_toy_set(&path, &fast);
        let opts = ctx.rcp_options(true, false);
        let c = check_rcp_dir(&ctx, &path, &opts, false).unwrap();
        let codes: Vec<&str> = c.diagnostics().iter().map(|d| d.code).collect();
        assert_eq!(codes, vec!["rcp-bypass", "rcp-pruning-quirk"]);
        assert!(c.outcome.passed);
        std::fs::create_dir_all(dir.path().join("empty")).unwrap();
        assert!(matches!(
            check_rcp_dir(&ctx, &dir.path().join("empty"), &opts, false),
            Err(DirError::NoResultFiles { .. })
        ));
        assert!(matches!(
            check_rcp_dir(&ctx, &dir.path().join("absent"), &opts, false),
            Err(DirError::Io { .. })
        ));
    }

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
