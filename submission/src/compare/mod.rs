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
//!
//! It owns the pairing, the statistics and the verdicts; it reads
//! framework logs through [`crate::perf`] and scores as `referee_rules`
//! does, and must not know how a command parses its flags or where its
//! output goes (the harness's `cli`).

pub mod explain;
pub mod facts;
mod group;
pub mod history;
pub mod html;
mod load;
pub mod report;
pub mod stats;

use group::compare_group;
pub use load::load_side;

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

/// Why two sides cannot be loaded or compared (the CLI's usage error,
/// exit 2).
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error("{}: no such file or directory", .0.display())]
    NoSuchPath(PathBuf),
    #[error("{}: not a directory, and no NeMo or Megatron iteration lines in it", .0.display())]
    NoFrameworkLog(PathBuf),
    #[error(
        "{}: no result_*.txt found (expected a submission folder, `referee run` outputs or a benchmark's results directory), and no NeMo or Megatron log",
        .0.display()
    )]
    NoResults(PathBuf),
    #[error("{}: {source}", .path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Reading framework logs failed (`referee perf`'s error).
    #[error(transparent)]
    Perf(#[from] crate::perf::PerfError),
    /// The rules of a side could not be resolved ([`RulesProvider`]'s error).
    #[error(transparent)]
    Rules(Box<dyn std::error::Error + Send + Sync>),
    #[error("the confidence must lie strictly between 0 and 1 (given {given})")]
    Confidence { given: f64 },
    #[error("the threshold must be a non-negative percentage (given {given_pct} %)")]
    Threshold { given_pct: f64 },
    #[error("the minimum ratio must be a positive number (given {given})")]
    MinRatio { given: f64 },
    /// `referee compare A B C …`: a release has no group paired with the
    /// first release's.
    #[error("history: {0}")]
    History(String),
    /// `baseline`, `candidate`: each side's groups, listed.
    #[error(
        "nothing to compare: no benchmark is present on both sides (baseline: {baseline}; candidate: {candidate})"
    )]
    NothingInCommon { baseline: String, candidate: String },
    /// One line per difference (`GROUP: difference`).
    #[error(
        "the benchmark definitions differ (use --force to compare anyway):\n  {}",
        .differences.join("\n  ")
    )]
    DefinitionsDiffer { differences: Vec<String> },
}

/// Where a side's scoring rules come from (the CLI resolves referee's own
/// ruleset or the official one).
pub trait RulesProvider: Sync {
    /// `training` or `hpc` (the results layout).
    fn usage(&self) -> String;
    /// The scoring context for a benchmark found under `root` (a side's
    /// input path).
    fn context(
        &self,
        root: &Path,
        benchmark: &str,
    ) -> Result<Arc<ScoreContext>, Box<dyn std::error::Error + Send + Sync>>;
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
    /// `--min-ratio`: fail when the candidate's performance (baseline time
    /// ÷ candidate time, or candidate samples/s ÷ baseline samples/s) is
    /// below this.
    pub min_ratio: Option<f64>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            threshold: 0.05,
            confidence: 0.95,
            force: false,
            resamples: BOOTSTRAP_RESAMPLES,
            seed: BOOTSTRAP_SEED,
            min_ratio: None,
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
    /// NeMo or Megatron logs (`referee perf`'s reading of them).
    FrameworkLog,
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
    /// Energy of the run's timed part in joules, from its power logs
    /// (`power/result_N/`), as the official summarizer computes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub energy_joules: Option<f64>,
    pub seed: Option<i64>,
    /// Framework logs: the window's mean step time, seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_seconds: Option<f64>,
    /// Framework logs: the run's status (`complete`, `incomplete`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<&'static str>,
    /// (samples or epochs, metric value) of every evaluation.
    #[serde(skip)]
    pub evals: Vec<(f64, f64)>,
    /// Framework logs: (iteration, step time s) of every iteration.
    #[serde(skip)]
    pub iterations: Vec<(u64, f64)>,
    /// Where the run's time went (read from its log's time stamps).
    #[serde(skip)]
    pub timing: RunTiming,
    /// Framework logs: the GPUs the run used and the dense peak its MFU was
    /// computed against, TFLOP/s per GPU (to split MFU into its factors).
    #[serde(skip)]
    pub gpus: Option<f64>,
    #[serde(skip)]
    pub peak_tflops: Option<f64>,
}

/// The time stamps of a run that split its time to train: training and
/// evaluation, and the samples it trained.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunTiming {
    pub run_start_ms: Option<f64>,
    pub run_stop_ms: Option<f64>,
    /// Milliseconds between each `eval_start` and its `eval_stop` after
    /// `run_start`, summed.
    pub eval_ms: f64,
    /// Evaluations timed.
    pub evals: usize,
    /// `samples_count` of `run_stop` (else of the last block or epoch).
    pub stop_samples: Option<f64>,
    /// Throughput mode: the window's step time (seconds).
    pub window_step_seconds: Option<f64>,
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
    /// Framework logs: GPUs, GBS, sequence length, parallelism and
    /// precision of the runs (distinct configurations joined by `; `).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub perf_config: Option<String>,
    #[serde(skip)]
    pub score: Option<BenchScore>,
    /// Everything the side recorded about how its runs were made, for
    /// [`explain::what_changed`].
    #[serde(skip)]
    pub recorded: facts::Recorded,
}

impl RunSet {
    /// A side's set before anything is read into it: no runs, no
    /// identities seen, samples on both axes, no score.
    pub fn empty(
        org: String,
        system: String,
        benchmark: String,
        mode: Mode,
        kind: SourceKind,
    ) -> RunSet {
        RunSet {
            org,
            system,
            benchmark,
            mode,
            kind,
            dirs: Vec::new(),
            usage: String::new(),
            ruleset: String::new(),
            division: String::new(),
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
            max_dropped: 0,
            dropped: 0,
            runs: Vec::new(),
            perf_config: None,
            score: None,
            recorded: facts::Recorded::new(),
        }
    }

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

/// Do the two run sets define the same benchmark?
#[derive(Debug, Clone, Serialize)]
pub struct Definition {
    pub compatible: bool,
    pub differences: Vec<String>,
}

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
    /// Where the time went: the deciding figure split into factors.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub breakdown: Option<explain::Breakdown>,
    /// Throughput mode: tokens/s and MFU split into the same factors and
    /// those they add (tokens per sample; GPUs, FLOPs per token, peak).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rate_breakdowns: Vec<explain::Breakdown>,
    /// What changed between the sides' records.
    pub changed: explain::FactDiff,
    /// `--min-ratio`: the candidate's performance against the baseline's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio: Option<explain::RatioCheck>,
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
    /// `--min-ratio`, when given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_ratio: Option<f64>,
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

/// Compare two loaded sides. `Err` (exit 2) when nothing is comparable or
/// definitions differ without `force`.
pub fn compare(
    baseline: &Side,
    candidate: &Side,
    opts: &Options,
) -> Result<Comparison, CompareError> {
    if !(opts.confidence > 0.0 && opts.confidence < 1.0) {
        return Err(CompareError::Confidence {
            given: opts.confidence,
        });
    }
    if !(opts.threshold >= 0.0 && opts.threshold.is_finite()) {
        return Err(CompareError::Threshold {
            given_pct: opts.threshold * 100.0,
        });
    }
    if let Some(r) = opts.min_ratio
        && !(r > 0.0 && r.is_finite())
    {
        return Err(CompareError::MinRatio { given: r });
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
        return Err(CompareError::NothingInCommon {
            baseline: list(baseline),
            candidate: list(candidate),
        });
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
        return Err(CompareError::DefinitionsDiffer {
            differences: forced,
        });
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
    let below = |g: &GroupComparison| g.ratio.as_ref().is_some_and(|r| r.below);
    let exit_code = if groups.iter().any(|g| g.verdict.fails() || below(g)) {
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
        min_ratio: opts.min_ratio,
        exit_code,
        rules: RULES.to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::group::definition;
    use super::*;

    fn set(org: &str, system: &str, bench: &str, mode: Mode) -> RunSet {
        RunSet {
            usage: "training".into(),
            ruleset: "5.0.0".into(),
            division: "closed".into(),
            max_dropped: 1,
            ..RunSet::empty(
                org.into(),
                system.into(),
                bench.into(),
                mode,
                SourceKind::ResultsDir,
            )
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
    fn framework_sets_are_defined_by_their_configuration() {
        let mut b = set("", "lab", "toy-gpt", Mode::Throughput);
        b.kind = SourceKind::FrameworkLog;
        b.ruleset = "NeMo".into();
        b.perf_config = Some("8 GPUs, GBS 128, seq 8192, TP1 PP1 CP2, FP8".into());
        let mut c = b.clone();
        // NeMo against Megatron-Bridge logs is no difference of definition…
        c.ruleset = "Megatron".into();
        assert!(definition(&b, &c).compatible);
        // …another batch size is.
        c.perf_config = Some("8 GPUs, GBS 256, seq 8192, TP1 PP1 CP2, FP8".into());
        let d = definition(&b, &c);
        assert_eq!(d.differences.len(), 1, "{d:?}");
        assert!(d.differences[0].starts_with("configuration: baseline 8 GPUs, GBS 128"));
    }
}
