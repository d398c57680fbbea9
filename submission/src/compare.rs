//! `referee compare`: the release-to-release regression gate.
//!
//! Two sides — a baseline and a candidate — are each a submission folder
//! (ORG with `systems/` and `results/`, or a folder of them), a directory of
//! `referee run` outputs, one `referee run` output, or one benchmark's
//! results directory. Runs are grouped per (organisation, system,
//! benchmark, mode) on each side; groups are paired across the sides by
//! that key, then — where a pairing is unique — by (system, benchmark,
//! mode), (benchmark, mode) and benchmark alone (so that one benchmark on
//! two systems compares).
//!
//! Per pair:
//! * **time to train** — the olympic score of each side exactly as
//!   `referee summarize` computes it (`analyze_run` + `score_dir`), the
//!   relative change, its percentile-bootstrap confidence interval over
//!   runs and a two-sided Mann–Whitney U test;
//! * **convergence** — samples (or epochs) to target of the converged runs,
//!   tested both ways with the RCP check's one-sided t-test
//!   (`min_acceptable_mean`);
//! * **throughput** — samples/s, tokens/s and MFU from the `throughput`
//!   events referee logs (per block, or one per run in throughput mode);
//! * a **verdict** — see [`stats::classify`], [`stats::convergence_test`]
//!   and [`Verdict`].
//!
//! Benchmark definitions must agree (ruleset, usage, quality target,
//! dataset fingerprints, run mode) unless `force` is set, which every
//! report then states.

pub mod html;
pub mod report;
pub mod stats;

use rayon::prelude::*;
use referee_rules::layout::{self, BenchmarkDir};
use referee_rules::mllog;
use referee_rules::score::{BenchScore, RunAnalysis, ScoreContext, analyze_run, score_dir};
use referee_rules::value::Value;
use serde::Serialize;
use stats::{
    BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, Better, BootstrapCi, Change, ConvergenceChange,
    ConvergenceTest, MIN_RUNS, MannWhitney, bootstrap_relative_change, classify, convergence_test,
    mann_whitney_u,
};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Exit code: no regression and no convergence change.
pub const EXIT_OK: i32 = 0;
/// Exit code: a regression or a convergence change.
pub const EXIT_REGRESSION: i32 = 1;
/// Exit code: bad input (unreadable paths, nothing comparable, different
/// benchmark definitions without `--force`).
pub const EXIT_BAD_INPUT: i32 = 2;

/// The verdict rules, as every report states them.
pub const RULES: &[&str] = &[
    "time to train: the olympic score of each side exactly as `referee summarize` computes it; change = candidate / baseline − 1",
    "confidence interval: percentile bootstrap over runs — each resample draws as many runs as each side has, with replacement (successful runs; failed runs stay counted as the slowest, as in the olympic score), and recomputes the statistic; the interval is the (1 − C)/2 and (1 + C)/2 quantiles of the resampled changes",
    "regression: the whole interval lies on the worse side of 0 AND the change is beyond the threshold (time: CI low > 0 and change > +T; samples/s in throughput mode: CI high < 0 and change < −T); improvement mirrors it; comparisons are strict",
    "a candidate without a valid score (too many failed runs) where the baseline has one is a regression",
    "convergence: samples (or epochs) to target of converged runs, the RCP check's one-sided t-test (α = 0.05, min_acceptable_mean) with the baseline as the reference — candidate olympic mean below the baseline's minimum acceptable mean and change < −T ⇒ converges faster — and with the candidate as the reference — baseline below the candidate's minimum ⇒ converges slower (change > +T); needs ≥ 3 converged runs per side and 7 in all",
    "verdict: regression, else convergence change, else improvement, else no significant change (inconclusive when a side has fewer than 2 runs or no score); exit 1 on any regression or convergence change",
    "Mann–Whitney U: two-sided, on per-run values (failed runs as +∞), exact when a side has ≤ 8 runs and there are no ties, else normal with tie and continuity corrections (scipy's rule); reported beside the interval, it does not enter the verdict",
];

/// Where a side's scoring rules come from (the CLI resolves referee's own
/// ruleset or the official one).
pub trait RulesProvider: Sync {
    /// `training` or `hpc` (the results layout).
    fn usage(&self) -> String;
    /// The scoring context for a benchmark found under `root` (a side's
    /// input path).
    fn context(&self, root: &Path, benchmark: &str) -> Result<Arc<ScoreContext>, String>;
}

/// Settings of a comparison.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Options {
    /// Practical-significance threshold, a fraction (0.05 = 5 %).
    pub threshold: f64,
    /// Confidence level of the bootstrap interval (0.95).
    pub confidence: f64,
    /// Compare across different benchmark definitions.
    pub force: bool,
    pub resamples: usize,
    pub seed: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            threshold: 0.05,
            confidence: 0.95,
            force: false,
            resamples: BOOTSTRAP_RESAMPLES,
            seed: BOOTSTRAP_SEED,
        }
    }
}

/// What a side's input directory is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SourceKind {
    /// `ORG/results/SYSTEM/BENCHMARK` of a submission folder.
    Submission,
    /// A `referee run` output (result logs, `system.json`, `referee_run.json`).
    RunOutput,
    /// A directory of `result_*.txt` files.
    ResultsDir,
}

/// How the runs were made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Trained to the quality target.
    TimeToTrain,
    /// `referee run --mode throughput`: fixed steps, throughput over a window.
    Throughput,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::TimeToTrain => "time-to-train",
            Mode::Throughput => "throughput",
        }
    }
}

/// One run of a side.
#[derive(Debug, Clone, Serialize)]
pub struct RunRecord {
    pub path: String,
    /// Time to train in minutes; `None` when the run does not count.
    pub minutes: Option<f64>,
    /// Why the run does not count.
    pub dropped: Option<String>,
    pub converged: bool,
    /// Samples (or epochs) to target, as the RCP check reads them.
    pub samples_to_target: Option<f64>,
    pub samples_per_second: Option<f64>,
    pub tokens_per_second: Option<f64>,
    pub mfu: Option<f64>,
    pub seed: Option<i64>,
    /// (samples or epochs, metric value) of every evaluation.
    #[serde(skip)]
    pub evals: Vec<(f64, f64)>,
}

/// All runs of one benchmark on one system on one side.
#[derive(Debug, Clone, Serialize)]
pub struct RunSet {
    pub org: String,
    pub system: String,
    pub benchmark: String,
    pub mode: Mode,
    pub kind: SourceKind,
    pub dirs: Vec<String>,
    pub usage: String,
    pub ruleset: String,
    pub division: String,
    /// The quality target (`referee_run.json`'s `target`), when known.
    pub target: Option<serde_json::Value>,
    /// Dataset → fingerprints seen (run records and `referee_provenance`).
    pub dataset_fingerprints: BTreeMap<String, BTreeSet<String>>,
    /// Code identities seen (`referee_version` @ `git_commit`).
    pub code: BTreeSet<String>,
    pub config_sha256: BTreeSet<String>,
    pub step_delay_ms: BTreeSet<u64>,
    /// Throughput mode: (steps, window start, window end) seen.
    pub throughput_windows: BTreeSet<(u64, u64, u64)>,
    /// The evaluation key (`eval_accuracy`, `eval_error`).
    pub eval_key: Option<String>,
    /// `samples` or `epochs`: the x axis of the evaluations.
    pub eval_unit: &'static str,
    /// `samples` or `epochs`: what the RCP check counts to target.
    pub convergence_unit: &'static str,
    /// Olympic score exactly as `referee summarize` gives it (× scaling).
    pub score_minutes: Option<f64>,
    pub scaling_factor: f64,
    pub max_dropped: usize,
    pub dropped: usize,
    pub runs: Vec<RunRecord>,
    #[serde(skip)]
    pub score: Option<BenchScore>,
}

impl RunSet {
    pub fn label(&self) -> String {
        if self.org.is_empty() {
            format!("{}/{}", self.system, self.benchmark)
        } else {
            format!("{}/{}/{}", self.org, self.system, self.benchmark)
        }
    }

    fn converged_points(&self) -> Vec<f64> {
        self.runs
            .iter()
            .filter(|r| r.converged)
            .filter_map(|r| r.samples_to_target)
            .collect()
    }
}

/// Everything one side holds.
#[derive(Debug, Clone)]
pub struct Side {
    pub root: PathBuf,
    pub sets: Vec<RunSet>,
}

struct Source {
    kind: SourceKind,
    dir: PathBuf,
    org_dir: Option<PathBuf>,
    benchmark: String,
    system: Option<String>,
    record: Option<serde_json::Value>,
    system_desc: Option<serde_json::Value>,
    files: Vec<PathBuf>,
}

fn read_json(path: &Path) -> Option<serde_json::Value> {
    let text = std::fs::read_to_string(path).ok()?;
    serde_json::from_str(&text).ok()
}

fn name_of(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default()
}

/// The org folder above `ORG/results/SYSTEM/BENCHMARK`, if `dir` is one.
fn org_of_benchmark_dir(dir: &Path) -> Option<PathBuf> {
    let results = dir.parent()?.parent()?;
    let org = results.parent()?;
    (name_of(results) == "results" && layout::is_org(org)).then(|| org.to_path_buf())
}

fn walk(dir: &Path, usage: &str, depth: usize, out: &mut Vec<Source>) -> Result<(), String> {
    let err = |e: std::io::Error| format!("{}: {e}", dir.display());
    if layout::is_org(dir) {
        for bd in layout::benchmark_dirs(dir, usage).map_err(err)? {
            let files = layout::result_files(&bd.path).map_err(err)?;
            if files.is_empty() {
                continue;
            }
            out.push(Source {
                kind: SourceKind::Submission,
                system_desc: read_json(&dir.join("systems").join(format!("{}.json", bd.system))),
                dir: bd.path,
                org_dir: Some(dir.to_path_buf()),
                benchmark: bd.benchmark,
                system: Some(bd.system),
                record: None,
                files,
            });
        }
        return Ok(());
    }
    let files = layout::result_files(dir).map_err(err)?;
    if !files.is_empty() {
        let record = read_json(&dir.join("referee_run.json"));
        if let Some(rec) = record {
            out.push(Source {
                kind: SourceKind::RunOutput,
                dir: dir.to_path_buf(),
                org_dir: None,
                benchmark: rec["benchmark"].as_str().unwrap_or_default().to_string(),
                system: rec["system"].as_str().map(str::to_string),
                system_desc: read_json(&dir.join("system.json")),
                record: Some(rec),
                files,
            });
        } else if let Some(org) = org_of_benchmark_dir(dir) {
            let bd = layout::benchmark_dirs(&org, usage)
                .unwrap_or_default()
                .into_iter()
                .find(|b| b.path == dir);
            let system = name_of(dir.parent().unwrap_or(dir));
            out.push(Source {
                kind: SourceKind::ResultsDir,
                system_desc: read_json(&org.join("systems").join(format!("{system}.json"))),
                benchmark: bd.map(|b| b.benchmark).unwrap_or_else(|| name_of(dir)),
                system: Some(system),
                dir: dir.to_path_buf(),
                org_dir: Some(org),
                record: None,
                files,
            });
        } else {
            out.push(Source {
                kind: SourceKind::ResultsDir,
                dir: dir.to_path_buf(),
                org_dir: None,
                benchmark: String::new(),
                system: None,
                record: None,
                system_desc: None,
                files,
            });
        }
        return Ok(());
    }
    if depth >= 4 {
        return Ok(());
    }
    for sub in layout::sub_dirs(dir).map_err(err)? {
        walk(&sub, usage, depth + 1, out)?;
    }
    Ok(())
}

/// samples/s, tokens/s and MFU of one `throughput` event.
type Rates = (f64, Option<f64>, Option<f64>);

/// What referee reads from a log besides its score.
#[derive(Debug, Default, Clone)]
struct LogFacts {
    benchmark: Option<String>,
    platform: Option<String>,
    org: Option<String>,
    division: Option<String>,
    seed: Option<i64>,
    eval_key: Option<String>,
    evals_samples: Vec<(f64, f64)>,
    evals_epochs: Vec<(f64, f64)>,
    /// (samples_count, samples/s, tokens/s, mfu) per throughput event.
    blocks: Vec<(f64, f64, Option<f64>, Option<f64>)>,
    /// The throughput-mode event (samples/s, tokens/s, mfu) and its window.
    window: Option<(Rates, (u64, u64))>,
    fingerprints: BTreeMap<String, String>,
    code: Option<String>,
}

fn num(v: Option<&Value>) -> Option<f64> {
    v.and_then(Value::as_f64).filter(|x| x.is_finite())
}

fn log_facts(path: &Path) -> LogFacts {
    let mut f = LogFacts::default();
    let Ok(log) = mllog::read_file(path) else {
        return f;
    };
    for r in &log.records {
        let text = |v: &Value| v.as_str().map(str::to_string);
        match r.key() {
            "submission_benchmark" => f.benchmark = text(r.value()),
            "submission_platform" => f.platform = text(r.value()),
            "submission_org" => f.org = text(r.value()),
            "submission_division" => f.division = text(r.value()),
            "seed" => f.seed = num(Some(r.value())).map(|s| s as i64),
            k @ ("eval_accuracy" | "eval_error") => {
                if f.eval_key.is_none() {
                    f.eval_key = Some(k.to_string());
                }
                if f.eval_key.as_deref() != Some(k) {
                    continue;
                }
                let Some(y) = num(Some(r.value())) else {
                    continue;
                };
                if let Some(x) = num(r.meta("samples_count")) {
                    f.evals_samples.push((x, y));
                }
                if let Some(x) = num(r.meta("epoch_num")) {
                    f.evals_epochs.push((x, y));
                }
            }
            "throughput" => {
                let v = r.value();
                let Some(sps) = num(v.get("samples_per_second")) else {
                    continue;
                };
                let tps = num(v.get("tokens_per_second"));
                let mfu = num(v.get("mfu"));
                if let (Some(a), Some(b)) = (
                    num(r.meta("window_start_step")),
                    num(r.meta("window_end_step")),
                ) {
                    f.window = Some(((sps, tps, mfu), (a as u64, b as u64)));
                } else if let Some(sc) = num(r.meta("samples_count")) {
                    f.blocks.push((sc, sps, tps, mfu));
                }
            }
            "referee_provenance" => {
                let v = r.value();
                if let Some(d) = v.get("dataset_fingerprints").and_then(Value::as_dict) {
                    for (k, x) in d {
                        if let Some(s) = x.as_str() {
                            f.fingerprints.insert(k.clone(), s.to_string());
                        }
                    }
                }
                let version = v.get("referee_version").and_then(Value::as_str);
                let commit = v.get("git_commit").and_then(Value::as_str);
                if version.is_some() || commit.is_some() {
                    f.code = Some(code_label(version, commit));
                }
            }
            _ => {}
        }
    }
    f
}

fn code_label(version: Option<&str>, commit: Option<&str>) -> String {
    let commit: String = commit.unwrap_or("?").chars().take(12).collect();
    format!("referee {} @ {commit}", version.unwrap_or("?"))
}

/// Throughput of a run: the throughput-mode window, or the blocks weighted
/// by their samples (total samples / total seconds).
fn run_throughput(f: &LogFacts) -> (Option<f64>, Option<f64>, Option<f64>) {
    if let Some(((sps, tps, mfu), _)) = f.window {
        return (Some(sps), tps, mfu);
    }
    let (mut samples, mut seconds, mut prev) = (0.0, 0.0, 0.0);
    let mut tokens_per_sample = None;
    let mut mfu_per_sps = None;
    for &(sc, sps, tps, mfu) in &f.blocks {
        let n = sc - prev;
        prev = sc;
        if n <= 0.0 || sps <= 0.0 {
            continue;
        }
        samples += n;
        seconds += n / sps;
        tokens_per_sample = tokens_per_sample.or(tps.map(|t| t / sps));
        mfu_per_sps = mfu_per_sps.or(mfu.map(|m| m / sps));
    }
    if seconds <= 0.0 {
        return (None, None, None);
    }
    let sps = samples / seconds;
    (
        Some(sps),
        tokens_per_sample.map(|t| t * sps),
        mfu_per_sps.map(|m| m * sps),
    )
}

/// Read one side: find its results, score every group as `referee
/// summarize` does, and read evaluations and throughput from the logs.
pub fn load_side(root: &Path, rules: &dyn RulesProvider) -> Result<Side, String> {
    if !root.exists() {
        return Err(format!("{}: no such file or directory", root.display()));
    }
    if !root.is_dir() {
        return Err(format!("{}: not a directory", root.display()));
    }
    let usage = rules.usage();
    let mut sources = Vec::new();
    walk(root, &usage, 0, &mut sources)?;
    if sources.is_empty() {
        return Err(format!(
            "{}: no result_*.txt found (expected a submission folder, `referee run` outputs or a benchmark's results directory)",
            root.display()
        ));
    }
    // Every log, read in parallel: its facts, then its score analysis.
    let files: Vec<(usize, PathBuf)> = sources
        .iter()
        .enumerate()
        .flat_map(|(i, s)| s.files.iter().map(move |p| (i, p.clone())))
        .collect();
    let facts: Vec<LogFacts> = files.par_iter().map(|(_, p)| log_facts(p)).collect();
    // Benchmark names of plain results directories come from their logs.
    for (i, s) in sources.iter_mut().enumerate() {
        if s.benchmark.is_empty() {
            s.benchmark = files
                .iter()
                .zip(&facts)
                .find(|((j, _), f)| *j == i && f.benchmark.is_some())
                .and_then(|(_, f)| f.benchmark.clone())
                .unwrap_or_else(|| name_of(&s.dir));
        }
    }
    let mut contexts: BTreeMap<String, Arc<ScoreContext>> = BTreeMap::new();
    for s in &sources {
        if !contexts.contains_key(&s.benchmark) {
            let ctx = rules.context(root, &s.benchmark)?;
            contexts.insert(s.benchmark.clone(), ctx);
        }
    }
    let analyses: Vec<RunAnalysis> = files
        .par_iter()
        .map(|(i, p)| analyze_run(&contexts[&sources[*i].benchmark], p, false))
        .collect();

    // Group by (org, system, benchmark, mode).
    type Key = (String, String, String, Mode);
    let mut groups: BTreeMap<Key, Vec<usize>> = BTreeMap::new();
    for (k, (i, _)) in files.iter().enumerate() {
        let s = &sources[*i];
        let f = &facts[k];
        let throughput_mode = s
            .record
            .as_ref()
            .is_some_and(|r| !r["throughput_mode"].is_null())
            || f.window.is_some();
        let mode = if throughput_mode {
            Mode::Throughput
        } else {
            Mode::TimeToTrain
        };
        let org = s
            .system_desc
            .as_ref()
            .and_then(|d| d["submitter"].as_str().map(str::to_string))
            .or_else(|| {
                s.record
                    .as_ref()
                    .and_then(|r| r["org"].as_str().map(str::to_string))
            })
            .or_else(|| f.org.clone())
            .unwrap_or_default();
        let system = s
            .system
            .clone()
            .or_else(|| f.platform.clone())
            .unwrap_or_else(|| "unknown".into());
        groups
            .entry((org, system, s.benchmark.clone(), mode))
            .or_default()
            .push(k);
    }

    let mut sets = Vec::new();
    for ((org, system, benchmark, mode), members) in groups {
        let ctx = &contexts[&benchmark];
        let mut dirs: Vec<usize> = members.iter().map(|&k| files[k].0).collect();
        dirs.dedup();
        let first = &sources[dirs[0]];
        let division = first
            .system_desc
            .as_ref()
            .and_then(|d| d["division"].as_str().map(str::to_string))
            .or_else(|| {
                first
                    .record
                    .as_ref()
                    .and_then(|r| r["division"].as_str().map(str::to_string))
            })
            .or_else(|| members.iter().find_map(|&k| facts[k].division.clone()))
            .unwrap_or_else(|| "closed".into());
        let runs_an: Vec<RunAnalysis> = members.iter().map(|&k| analyses[k].clone()).collect();
        let bd = BenchmarkDir {
            org: first.org_dir.clone().unwrap_or_else(|| first.dir.clone()),
            system: system.clone(),
            benchmark: benchmark.clone(),
            scaling: None,
            path: first.dir.clone(),
        };
        let score = score_dir(ctx, &bd, &division, &runs_an, &org);

        let mut set = RunSet {
            org,
            system,
            benchmark: benchmark.clone(),
            mode,
            kind: first.kind,
            dirs: dirs
                .iter()
                .map(|&i| sources[i].dir.display().to_string())
                .collect(),
            usage: ctx.usage.clone(),
            ruleset: ctx.ruleset.clone(),
            division,
            target: None,
            dataset_fingerprints: BTreeMap::new(),
            code: BTreeSet::new(),
            config_sha256: BTreeSet::new(),
            step_delay_ms: BTreeSet::new(),
            throughput_windows: BTreeSet::new(),
            eval_key: None,
            eval_unit: "samples",
            convergence_unit: if ctx
                .facts
                .benchmark(&ctx.usage, &benchmark)
                .is_none_or(|b| b.converges_in_samples)
            {
                "samples"
            } else {
                "epochs"
            },
            score_minutes: score.score_minutes,
            scaling_factor: score.scaling_factor,
            max_dropped: score.max_dropped,
            dropped: score.dropped,
            runs: Vec::new(),
            score: Some(score),
        };
        for &i in &dirs {
            let s = &sources[i];
            if let Some(r) = &s.record {
                if let Some(t) = r.get("target").filter(|t| !t.is_null()) {
                    set.target = Some(t.clone());
                }
                if let Some(d) = r["dataset_fingerprints"].as_object() {
                    for (k, v) in d {
                        if let Some(v) = v.as_str() {
                            set.dataset_fingerprints
                                .entry(k.clone())
                                .or_default()
                                .insert(v.to_string());
                        }
                    }
                }
                let code = &r["code"];
                if code.is_object() {
                    set.code.insert(code_label(
                        code["referee_version"].as_str(),
                        code["git_commit"].as_str(),
                    ));
                }
                if let Some(c) = r["config_sha256"].as_str() {
                    set.config_sha256.insert(c.to_string());
                }
                if let Some(d) = r["step_delay_ms"].as_u64() {
                    set.step_delay_ms.insert(d);
                }
                let tm = &r["throughput_mode"];
                if let (Some(steps), Some(a), Some(b)) = (
                    tm["steps"].as_u64(),
                    tm["window"][0].as_u64(),
                    tm["window"][1].as_u64(),
                ) {
                    set.throughput_windows.insert((steps, a, b));
                }
            }
        }
        let all_samples = members
            .iter()
            .all(|&k| facts[k].evals_samples.len() >= facts[k].evals_epochs.len());
        set.eval_unit = if all_samples { "samples" } else { "epochs" };
        for (&k, a) in members.iter().zip(&runs_an) {
            let f = &facts[k];
            for (d, fp) in &f.fingerprints {
                set.dataset_fingerprints
                    .entry(d.clone())
                    .or_default()
                    .insert(fp.clone());
            }
            if let Some(c) = &f.code {
                set.code.insert(c.clone());
            }
            if set.eval_key.is_none() {
                set.eval_key = f.eval_key.clone();
            }
            let (sps, tps, mfu) = run_throughput(f);
            let conv = a.convergence.as_ref().ok();
            let converged = conv.is_some_and(|c| c.converged);
            set.runs.push(RunRecord {
                path: a.path.display().to_string(),
                minutes: a.minutes.as_ref().ok().copied(),
                dropped: a.minutes.as_ref().err().cloned(),
                converged,
                samples_to_target: conv.filter(|c| c.converged).map(|c| c.point),
                samples_per_second: sps,
                tokens_per_second: tps,
                mfu,
                seed: f.seed,
                evals: if all_samples {
                    f.evals_samples.clone()
                } else {
                    f.evals_epochs.clone()
                },
            });
        }
        sets.push(set);
    }
    Ok(Side {
        root: root.to_path_buf(),
        sets,
    })
}

/// Do the two run sets define the same benchmark?
#[derive(Debug, Clone, Serialize)]
pub struct Definition {
    pub compatible: bool,
    pub differences: Vec<String>,
}

fn short(s: &str) -> String {
    if s.len() > 16 {
        format!("{}…", &s[..16])
    } else {
        s.to_string()
    }
}

fn join_set<T: std::fmt::Display>(s: &BTreeSet<T>) -> String {
    s.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn definition(b: &RunSet, c: &RunSet) -> Definition {
    let mut d = Vec::new();
    if b.benchmark != c.benchmark {
        d.push(format!(
            "benchmark: baseline {}, candidate {}",
            b.benchmark, c.benchmark
        ));
    }
    if b.usage != c.usage {
        d.push(format!(
            "usage: baseline {}, candidate {}",
            b.usage, c.usage
        ));
    }
    if b.ruleset != c.ruleset {
        d.push(format!(
            "ruleset: baseline {}, candidate {}",
            b.ruleset, c.ruleset
        ));
    }
    if let (Some(tb), Some(tc)) = (&b.target, &c.target)
        && tb != tc
    {
        d.push(format!("target: baseline {tb}, candidate {tc}"));
    }
    for (name, set) in [("baseline", b), ("candidate", c)] {
        for (ds, fps) in &set.dataset_fingerprints {
            if fps.len() > 1 {
                d.push(format!(
                    "dataset {ds}: the {name} runs disagree ({})",
                    fps.iter().map(|f| short(f)).collect::<Vec<_>>().join(", ")
                ));
            }
        }
    }
    if !b.dataset_fingerprints.is_empty() && !c.dataset_fingerprints.is_empty() {
        let names: BTreeSet<&String> = b
            .dataset_fingerprints
            .keys()
            .chain(c.dataset_fingerprints.keys())
            .collect();
        for ds in names {
            match (
                b.dataset_fingerprints.get(ds),
                c.dataset_fingerprints.get(ds),
            ) {
                (Some(x), Some(y)) if x != y => d.push(format!(
                    "dataset {ds}: baseline fingerprint {}, candidate {}",
                    x.iter().map(|f| short(f)).collect::<Vec<_>>().join(", "),
                    y.iter().map(|f| short(f)).collect::<Vec<_>>().join(", ")
                )),
                (Some(_), None) => d.push(format!("dataset {ds}: only the baseline uses it")),
                (None, Some(_)) => d.push(format!("dataset {ds}: only the candidate uses it")),
                _ => {}
            }
        }
    }
    if b.mode != c.mode {
        d.push(format!(
            "mode: baseline {}, candidate {}",
            b.mode.as_str(),
            c.mode.as_str()
        ));
    }
    Definition {
        compatible: d.is_empty(),
        differences: d,
    }
}

/// The comparison of one metric.
#[derive(Debug, Clone, Serialize)]
pub struct MetricComparison {
    /// `time_to_train_minutes`, `samples_per_second`, `tokens_per_second`, `mfu`.
    pub metric: &'static str,
    pub label: &'static str,
    /// How each side's figure is made from its runs.
    pub statistic: &'static str,
    pub better: Better,
    pub baseline: Option<f64>,
    pub candidate: Option<f64>,
    /// candidate / baseline − 1.
    pub relative_change: Option<f64>,
    pub ci: Option<BootstrapCi>,
    pub mann_whitney: Option<MannWhitney>,
    pub change: Change,
    /// Whether this metric decides the group's verdict.
    pub decides: bool,
    pub reason: Option<String>,
}

/// Convergence of one group.
#[derive(Debug, Clone, Serialize)]
pub struct ConvergenceComparison {
    /// `samples` or `epochs`.
    pub unit: &'static str,
    pub baseline_points: Vec<f64>,
    pub candidate_points: Vec<f64>,
    pub test: ConvergenceTest,
}

/// A group's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Regression,
    ConvergenceChange,
    Improvement,
    NoSignificantChange,
    Inconclusive,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Regression => "regression",
            Verdict::ConvergenceChange => "convergence change",
            Verdict::Improvement => "improvement",
            Verdict::NoSignificantChange => "no significant change",
            Verdict::Inconclusive => "inconclusive",
        }
    }

    /// Does this verdict fail the gate?
    pub fn fails(self) -> bool {
        matches!(self, Verdict::Regression | Verdict::ConvergenceChange)
    }
}

/// One benchmark (and system) compared.
#[derive(Debug, Clone, Serialize)]
pub struct GroupComparison {
    pub benchmark: String,
    pub label: String,
    pub baseline: RunSet,
    pub candidate: RunSet,
    pub definition: Definition,
    pub time_to_train: Option<MetricComparison>,
    pub throughput: Vec<MetricComparison>,
    pub convergence: Option<ConvergenceComparison>,
    pub verdict: Verdict,
    pub reasons: Vec<String>,
    pub notes: Vec<String>,
}

impl GroupComparison {
    /// The metric that decides the verdict, if any.
    pub fn primary(&self) -> Option<&MetricComparison> {
        self.time_to_train
            .iter()
            .chain(&self.throughput)
            .find(|m| m.decides)
    }
}

/// Counts of verdicts.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    pub groups: usize,
    pub regressions: usize,
    pub convergence_changes: usize,
    pub improvements: usize,
    pub no_significant_change: usize,
    pub inconclusive: usize,
}

/// The bootstrap as configured.
#[derive(Debug, Clone, Serialize)]
pub struct BootstrapSettings {
    pub method: &'static str,
    pub resamples: usize,
    pub seed: u64,
    pub confidence: f64,
}

/// The whole comparison: what `--json` prints.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub baseline: String,
    pub candidate: String,
    pub threshold_pct: f64,
    pub confidence: f64,
    pub bootstrap: BootstrapSettings,
    /// `--force` was given.
    pub force: bool,
    /// Differences of definition that `--force` let through.
    pub forced_differences: Vec<String>,
    pub groups: Vec<GroupComparison>,
    pub only_in_baseline: Vec<String>,
    pub only_in_candidate: Vec<String>,
    pub summary: Summary,
    pub exit_code: i32,
    pub rules: Vec<&'static str>,
}

/// Pair groups across sides: exact key, then — where unique — looser keys.
fn pair(b: &[RunSet], c: &[RunSet]) -> (Vec<(usize, usize)>, Vec<usize>, Vec<usize>) {
    type KeyFn = fn(&RunSet) -> String;
    let keys: [KeyFn; 4] = [
        |s| format!("{}\0{}\0{}\0{:?}", s.org, s.system, s.benchmark, s.mode),
        |s| format!("{}\0{}\0{:?}", s.system, s.benchmark, s.mode),
        |s| format!("{}\0{:?}", s.benchmark, s.mode),
        |s| s.benchmark.clone(),
    ];
    let mut ub: Vec<usize> = (0..b.len()).collect();
    let mut uc: Vec<usize> = (0..c.len()).collect();
    let mut pairs = Vec::new();
    for key in keys {
        let mut i = 0;
        while i < ub.len() {
            let k = key(&b[ub[i]]);
            let nb = ub.iter().filter(|&&x| key(&b[x]) == k).count();
            let mc: Vec<usize> = uc.iter().copied().filter(|&y| key(&c[y]) == k).collect();
            if nb == 1 && mc.len() == 1 {
                pairs.push((ub[i], mc[0]));
                ub.remove(i);
                uc.retain(|&y| y != mc[0]);
            } else {
                i += 1;
            }
        }
    }
    pairs.sort();
    (pairs, ub, uc)
}

fn pct(x: f64) -> String {
    format!("{:+.1} %", x * 100.0)
}

fn metric(
    name: &'static str,
    label: &'static str,
    values: impl Fn(&RunRecord) -> Option<f64>,
    b: &RunSet,
    c: &RunSet,
    opts: &Options,
) -> Option<MetricComparison> {
    let vb: Vec<f64> = b.runs.iter().filter_map(&values).collect();
    let vc: Vec<f64> = c.runs.iter().filter_map(&values).collect();
    if vb.is_empty() || vc.is_empty() {
        return None;
    }
    let mean = |x: &[f64]| Some(referee_rules::stats::np_mean(x));
    let (pb, pc) = (mean(&vb)?, mean(&vc)?);
    let change = pc / pb - 1.0;
    let enough = vb.len() >= MIN_RUNS && vc.len() >= MIN_RUNS;
    let ci = enough
        .then(|| {
            bootstrap_relative_change(
                &vb,
                &vc,
                &mean,
                &mean,
                opts.confidence,
                opts.resamples,
                opts.seed,
            )
        })
        .flatten();
    let verdict = classify(
        change,
        ci.map(|c| (c.lo, c.hi)),
        opts.threshold,
        Better::Higher,
    );
    Some(MetricComparison {
        metric: name,
        label,
        statistic: "mean over runs",
        better: Better::Higher,
        baseline: Some(pb),
        candidate: Some(pc),
        relative_change: Some(change),
        ci,
        mann_whitney: mann_whitney_u(&vb, &vc),
        change: verdict,
        decides: false,
        reason: (!enough).then(|| {
            format!(
                "{} and {} runs: a confidence interval needs at least {MIN_RUNS} per side",
                vb.len(),
                vc.len()
            )
        }),
    })
}

fn time_to_train(b: &RunSet, c: &RunSet, opts: &Options) -> MetricComparison {
    let ok = |s: &RunSet| -> Vec<f64> { s.runs.iter().filter_map(|r| r.minutes).collect() };
    let with_failed = |s: &RunSet| -> Vec<f64> {
        s.runs
            .iter()
            .map(|r| r.minutes.unwrap_or(f64::INFINITY))
            .collect()
    };
    let (ob, oc) = (ok(b), ok(c));
    let mut m = MetricComparison {
        metric: "time_to_train_minutes",
        label: "time to train (min)",
        statistic: "olympic mean × scaling factor (referee summarize's score)",
        better: Better::Lower,
        baseline: b.score_minutes,
        candidate: c.score_minutes,
        relative_change: None,
        ci: None,
        mann_whitney: mann_whitney_u(&with_failed(b), &with_failed(c)),
        change: Change::Inconclusive,
        decides: true,
        reason: None,
    };
    let failed = |s: &RunSet| {
        format!(
            "{} of {} runs failed where olympic scoring allows {}",
            s.dropped,
            s.runs.len(),
            s.max_dropped
        )
    };
    match (b.score_minutes, c.score_minutes) {
        (Some(sb), Some(sc)) => {
            let change = sc / sb - 1.0;
            m.relative_change = Some(change);
            if ob.len() < MIN_RUNS || oc.len() < MIN_RUNS {
                m.reason = Some(format!(
                    "{} and {} counted runs: a confidence interval needs at least {MIN_RUNS} per side",
                    ob.len(),
                    oc.len()
                ));
            } else {
                let stat = |s: &RunSet| {
                    let (dropped, max, scale) = (s.dropped, s.max_dropped, s.scaling_factor);
                    move |x: &[f64]| {
                        referee_rules::score::olympic_mean(x, dropped, max).map(|v| v * scale)
                    }
                };
                let (fb, fc) = (stat(b), stat(c));
                m.ci = bootstrap_relative_change(
                    &ob,
                    &oc,
                    &fb,
                    &fc,
                    opts.confidence,
                    opts.resamples,
                    opts.seed,
                );
                if m.ci.is_none() {
                    m.reason = Some("the bootstrap statistic is undefined".into());
                }
            }
            m.change = classify(
                change,
                m.ci.map(|c| (c.lo, c.hi)),
                opts.threshold,
                Better::Lower,
            );
        }
        (Some(_), None) => {
            m.change = Change::Regression;
            m.reason = Some(format!("the candidate has no valid score: {}", failed(c)));
        }
        (None, Some(_)) => {
            m.reason = Some(format!("the baseline has no valid score: {}", failed(b)));
        }
        (None, None) => {
            m.reason = Some("neither side has a valid score".into());
        }
    }
    m
}

fn compare_group(b: &RunSet, c: &RunSet, opts: &Options) -> GroupComparison {
    let def = definition(b, c);
    let label = if b.system == c.system {
        format!("{} · {}", b.benchmark, b.system)
    } else {
        format!("{} · {} → {}", b.benchmark, b.system, c.system)
    };
    let both_ttt = b.mode == Mode::TimeToTrain && c.mode == Mode::TimeToTrain;
    let mut throughput: Vec<MetricComparison> = [
        metric(
            "samples_per_second",
            "samples/s",
            |r| r.samples_per_second,
            b,
            c,
            opts,
        ),
        metric(
            "tokens_per_second",
            "tokens/s",
            |r| r.tokens_per_second,
            b,
            c,
            opts,
        ),
        metric("mfu", "MFU", |r| r.mfu, b, c, opts),
    ]
    .into_iter()
    .flatten()
    .collect();
    let time = both_ttt.then(|| time_to_train(b, c, opts));
    let mut reasons = Vec::new();
    let primary_change = if let Some(t) = &time {
        t.change
    } else if let Some(sps) = throughput
        .first_mut()
        .filter(|m| m.metric == "samples_per_second")
    {
        sps.decides = true;
        sps.change
    } else {
        reasons.push("no time to train or throughput on both sides".into());
        Change::Inconclusive
    };
    let convergence = both_ttt.then(|| {
        let (pb, pc) = (b.converged_points(), c.converged_points());
        ConvergenceComparison {
            unit: b.convergence_unit,
            test: convergence_test(&pb, &pc, opts.threshold),
            baseline_points: pb,
            candidate_points: pc,
        }
    });
    let conv_change = convergence
        .as_ref()
        .map(|c| c.test.change)
        .unwrap_or(ConvergenceChange::Inconclusive);
    let primary = time.iter().chain(&throughput).find(|m| m.decides).cloned();
    if let Some(p) = &primary {
        let what = match (p.relative_change, p.ci) {
            (Some(ch), Some(ci)) => format!(
                "{} {} (CI {} … {})",
                p.label,
                pct(ch),
                pct(ci.lo),
                pct(ci.hi)
            ),
            (Some(ch), None) => format!("{} {}", p.label, pct(ch)),
            _ => p.label.to_string(),
        };
        reasons.push(format!("{what}: {}", p.change.as_str()));
        if let Some(r) = &p.reason {
            reasons.push(r.clone());
        }
    }
    if let Some(cv) = &convergence {
        match cv.test.change {
            ConvergenceChange::Faster | ConvergenceChange::Slower => reasons.push(format!(
                "{} to target {}: {}",
                cv.unit,
                pct(cv.test.relative_change),
                cv.test.change.as_str()
            )),
            _ => {}
        }
    }
    let verdict = if primary_change == Change::Regression {
        Verdict::Regression
    } else if matches!(
        conv_change,
        ConvergenceChange::Faster | ConvergenceChange::Slower
    ) {
        Verdict::ConvergenceChange
    } else {
        match primary_change {
            Change::Improvement => Verdict::Improvement,
            Change::NoSignificantChange => Verdict::NoSignificantChange,
            _ => Verdict::Inconclusive,
        }
    };
    let mut notes = Vec::new();
    for (name, s) in [("baseline", b), ("candidate", c)] {
        let delays: Vec<u64> = s.step_delay_ms.iter().copied().filter(|&d| d > 0).collect();
        if !delays.is_empty() {
            notes.push(format!(
                "the {name} runs were made with an injected step delay (--step-delay-ms {})",
                delays
                    .iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if s.dirs.len() > 1 {
            notes.push(format!(
                "the {name} runs come from {} directories",
                s.dirs.len()
            ));
        }
    }
    if !b.config_sha256.is_empty()
        && !c.config_sha256.is_empty()
        && b.config_sha256 != c.config_sha256
    {
        notes.push(format!(
            "hyperparameters differ (config sha256 {} vs {})",
            b.config_sha256
                .iter()
                .map(|s| short(s))
                .collect::<Vec<_>>()
                .join(", "),
            c.config_sha256
                .iter()
                .map(|s| short(s))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if !b.throughput_windows.is_empty()
        && !c.throughput_windows.is_empty()
        && b.throughput_windows != c.throughput_windows
    {
        let w = |s: &RunSet| {
            s.throughput_windows
                .iter()
                .map(|(n, a, z)| format!("{n} steps, window {a}..{z}"))
                .collect::<Vec<_>>()
                .join("; ")
        };
        notes.push(format!(
            "throughput windows differ: baseline {}, candidate {}",
            w(b),
            w(c)
        ));
    }
    if !b.code.is_empty() && b.code == c.code {
        notes.push(format!("code (both sides): {}", join_set(&b.code)));
    } else if !b.code.is_empty() || !c.code.is_empty() {
        notes.push(format!(
            "code: baseline {}; candidate {}",
            if b.code.is_empty() {
                "unknown".into()
            } else {
                join_set(&b.code)
            },
            if c.code.is_empty() {
                "unknown".into()
            } else {
                join_set(&c.code)
            }
        ));
    }
    if b.scaling_factor != 1.0 || c.scaling_factor != 1.0 {
        notes.push(format!(
            "scores include scaling.json factors (baseline {}, candidate {})",
            b.scaling_factor, c.scaling_factor
        ));
    }
    GroupComparison {
        benchmark: b.benchmark.clone(),
        label,
        baseline: b.clone(),
        candidate: c.clone(),
        definition: def,
        time_to_train: time,
        throughput,
        convergence,
        verdict,
        reasons,
        notes,
    }
}

/// Compare two loaded sides. `Err` (exit 2) when nothing is comparable or
/// definitions differ without `force`.
pub fn compare(baseline: &Side, candidate: &Side, opts: &Options) -> Result<Comparison, String> {
    if !(opts.confidence > 0.0 && opts.confidence < 1.0) {
        return Err(format!(
            "the confidence must lie strictly between 0 and 1 (given {})",
            opts.confidence
        ));
    }
    if !(opts.threshold >= 0.0 && opts.threshold.is_finite()) {
        return Err(format!(
            "the threshold must be a non-negative percentage (given {} %)",
            opts.threshold * 100.0
        ));
    }
    let (pairs, ub, uc) = pair(&baseline.sets, &candidate.sets);
    if pairs.is_empty() {
        let list = |s: &Side| {
            s.sets
                .iter()
                .map(|x| format!("{} ({})", x.label(), x.mode.as_str()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        return Err(format!(
            "nothing to compare: no benchmark is present on both sides (baseline: {}; candidate: {})",
            list(baseline),
            list(candidate)
        ));
    }
    let groups: Vec<GroupComparison> = pairs
        .par_iter()
        .map(|&(i, j)| compare_group(&baseline.sets[i], &candidate.sets[j], opts))
        .collect();
    let mut forced = Vec::new();
    for g in &groups {
        for d in &g.definition.differences {
            forced.push(format!("{}: {d}", g.label));
        }
    }
    if !forced.is_empty() && !opts.force {
        return Err(format!(
            "the benchmark definitions differ (use --force to compare anyway):\n  {}",
            forced.join("\n  ")
        ));
    }
    let mut summary = Summary {
        groups: groups.len(),
        ..Default::default()
    };
    for g in &groups {
        match g.verdict {
            Verdict::Regression => summary.regressions += 1,
            Verdict::ConvergenceChange => summary.convergence_changes += 1,
            Verdict::Improvement => summary.improvements += 1,
            Verdict::NoSignificantChange => summary.no_significant_change += 1,
            Verdict::Inconclusive => summary.inconclusive += 1,
        }
    }
    let exit_code = if groups.iter().any(|g| g.verdict.fails()) {
        EXIT_REGRESSION
    } else {
        EXIT_OK
    };
    Ok(Comparison {
        baseline: baseline.root.display().to_string(),
        candidate: candidate.root.display().to_string(),
        threshold_pct: opts.threshold * 100.0,
        confidence: opts.confidence,
        bootstrap: BootstrapSettings {
            method: "percentile bootstrap over runs",
            resamples: opts.resamples,
            seed: opts.seed,
            confidence: opts.confidence,
        },
        force: opts.force,
        forced_differences: if opts.force { forced } else { Vec::new() },
        groups,
        only_in_baseline: ub
            .iter()
            .map(|&i| {
                let s = &baseline.sets[i];
                format!("{} ({})", s.label(), s.mode.as_str())
            })
            .collect(),
        only_in_candidate: uc
            .iter()
            .map(|&i| {
                let s = &candidate.sets[i];
                format!("{} ({})", s.label(), s.mode.as_str())
            })
            .collect(),
        summary,
        exit_code,
        rules: RULES.to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(org: &str, system: &str, bench: &str, mode: Mode) -> RunSet {
        RunSet {
            org: org.into(),
            system: system.into(),
            benchmark: bench.into(),
            mode,
            kind: SourceKind::ResultsDir,
            dirs: vec![],
            usage: "training".into(),
            ruleset: "5.0.0".into(),
            division: "closed".into(),
            target: None,
            dataset_fingerprints: BTreeMap::new(),
            code: BTreeSet::new(),
            config_sha256: BTreeSet::new(),
            step_delay_ms: BTreeSet::new(),
            throughput_windows: BTreeSet::new(),
            eval_key: None,
            eval_unit: "samples",
            convergence_unit: "samples",
            score_minutes: None,
            scaling_factor: 1.0,
            max_dropped: 1,
            dropped: 0,
            runs: vec![],
            score: None,
        }
    }

    #[test]
    fn pairing_exact_then_unique_looser_keys() {
        let tt = Mode::TimeToTrain;
        let b = vec![
            set("A", "s1", "bert", tt),
            set("A", "s1", "resnet", tt),
            set("A", "s2", "resnet", tt),
        ];
        let c = vec![
            set("A", "s1", "bert", tt),
            set("B", "s9", "bert", Mode::Throughput),
            set("A", "s3", "resnet", tt),
        ];
        let (pairs, ub, uc) = pair(&b, &c);
        // bert pairs exactly; resnet is ambiguous on the baseline side
        // (two systems) so it stays unpaired; the throughput bert has no
        // partner left.
        assert_eq!(pairs, vec![(0, 0)]);
        assert_eq!(ub, vec![1, 2]);
        assert_eq!(uc, vec![1, 2]);
        // One benchmark on two systems pairs by benchmark.
        let (pairs, _, _) = pair(&b[1..2], &c[2..3]);
        assert_eq!(pairs, vec![(0, 0)]);
    }

    #[test]
    fn definitions() {
        let mut b = set("", "s", "mini_llm", Mode::Throughput);
        let mut c = b.clone();
        assert!(definition(&b, &c).compatible);
        b.dataset_fingerprints
            .entry("shakespeare".into())
            .or_default()
            .insert("aaaa".into());
        c.dataset_fingerprints
            .entry("shakespeare".into())
            .or_default()
            .insert("bbbb".into());
        c.target = Some(serde_json::json!({"value": 4.0}));
        let d = definition(&b, &c);
        assert!(!d.compatible);
        assert!(d.differences[0].contains("dataset shakespeare"), "{d:?}");
        // A target known on one side only is no difference; on both it is.
        b.target = Some(serde_json::json!({"value": 3.5}));
        c.ruleset = "4.1.0".into();
        let d = definition(&b, &c);
        assert_eq!(d.differences.len(), 3, "{d:?}");
    }

    #[test]
    fn throughput_of_blocks_is_weighted_by_samples() {
        let f = LogFacts {
            blocks: vec![
                (100.0, 10.0, Some(1280.0), None),
                (300.0, 20.0, Some(2560.0), None),
            ],
            ..Default::default()
        };
        // 300 samples in 100/10 + 200/20 = 20 s.
        let (sps, tps, mfu) = run_throughput(&f);
        assert_eq!(sps, Some(15.0));
        assert_eq!(tps, Some(15.0 * 128.0));
        assert_eq!(mfu, None);
    }
}
