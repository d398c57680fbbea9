//! The RCP (Reference Convergence Point) test: is a submission's
//! convergence, in epochs or samples to the quality target, statistically
//! no faster than the reference implementation's?
//!
//! Behaviour follows the official `rcp_checker` exactly, including its known
//! flaws, which referee names in notes:
//! * per reference record the mean is olympic (drop 1 each end, 4 for
//!   unet3d) while the standard deviation is the population one of the
//!   *untrimmed* list;
//! * the minimum acceptable submission mean comes from a bisection on a
//!   one-sided pooled two-sample t-test at p = 0.05 with n_ref = trimmed
//!   reference count and n_sub = runs − 2; interpolated records use
//!   n_ref = 2 × runs instead;
//! * pruning drops records with a batch size below the fastest record's and
//!   then records slower than the interpolation of their neighbours — not the
//!   lower convex envelope it is meant to be (mlcommons/logging#368);
//! * llama31_405b gets one evaluation interval (46,080 samples) of
//!   allowance for every ruleset ≥ 5.0.0, not only 5.0.0.
//!
//! The submission side reads each run with the official reader's substring
//! tests on the raw JSON text (a line containing `global_batch_size`
//! anywhere sets the batch size).

use crate::diag::Diagnostic;
use crate::error::{RcpTableError, RunReadError};
use crate::mllog::{ParsedLog, Record};
use crate::ruleset_facts::{self, RulesetFacts};
use crate::stats::{np_interp, np_mean, np_std, one_sided_p, py_round};
use crate::value::{Value, py_eq};
use indexmap::IndexMap;
use serde::Serialize;
use std::borrow::Cow;
use std::path::{Path, PathBuf};

/// A convergence point standing for "did not converge".
pub const NOT_CONVERGED: f64 = 1e9;

#[derive(Debug, Clone, Serialize)]
pub struct RcpRecord {
    pub name: String,
    pub benchmark: String,
    #[serde(rename = "bs")]
    pub bs: f64,
    /// Reference convergence points, sorted.
    pub points: Vec<f64>,
    pub mean: f64,
    pub stdev: f64,
    pub min_epochs: f64,
    pub max_speedup: f64,
    pub interpolated: bool,
    /// The engine and kernel set whose runs gave the points, where the
    /// table names one (`Engine`: referee's calibrations); an interpolated
    /// record keeps it when both neighbours agree.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
}

/// How the pruned record set is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pruning {
    /// The official algorithm, flaw included (default).
    #[default]
    Official,
    /// The lower convex envelope of (BS, mean) the rules intend.
    ConvexEnvelope,
}

/// Which records the test uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RcpPass {
    #[default]
    Pruned,
    Full,
}

/// The reference records of one benchmark in one ruleset.
#[derive(Debug, Clone)]
pub struct RcpTable {
    pub benchmark: String,
    pub ruleset: String,
    pub submission_runs: usize,
    pub source: String,
    /// All records, sorted by batch size (stable).
    pub records: Vec<RcpRecord>,
    pub pruned: Vec<RcpRecord>,
}

fn num(v: &serde_json::Value) -> Option<f64> {
    v.as_f64()
}

/// Minimum acceptable submission mean: bisection on [0, mean] until the
/// bracket is at most the tolerance; the midpoint where the one-sided
/// p-value stops exceeding alpha.
pub fn min_acceptable_mean(mean: f64, stdev: f64, n_ref: f64, submission_runs: usize) -> f64 {
    if stdev == 0.0 {
        return mean;
    }
    let n_sub = submission_runs as f64 - 2.0;
    let mut hi = mean;
    let mut lo = 0.0;
    let mut mid = (lo + hi) / 2.0;
    while hi - lo > ruleset_facts::RCP_TOLERANCE {
        let p = one_sided_p(mid, stdev, n_ref, mean, stdev, n_sub);
        if p > ruleset_facts::RCP_ALPHA {
            hi = mid;
        } else {
            lo = mid;
        }
        mid = (lo + hi) / 2.0;
    }
    mid
}

impl RcpTable {
    /// Path of the official RCP file for a benchmark.
    pub fn official_path(rcp_dir: &Path, usage: &str, ruleset: &str, benchmark: &str) -> PathBuf {
        rcp_dir
            .join(format!("{usage}_{ruleset}"))
            .join(format!("rcps_{benchmark}.json"))
    }

    /// Load `rcps_<benchmark>.json` from an RCP directory (the
    /// `mlperf_logging/rcp_checker` folder or a folder of such files).
    pub fn load(
        rcp_dir: &Path,
        usage: &str,
        ruleset: &str,
        benchmark: &str,
        facts: &RulesetFacts,
    ) -> Result<Self, RcpTableError> {
        let mut path = Self::official_path(rcp_dir, usage, ruleset, benchmark);
        if !path.is_file() {
            let flat = rcp_dir.join(format!("rcps_{benchmark}.json"));
            if flat.is_file() {
                path = flat;
            } else {
                return Err(RcpTableError::NoFile {
                    benchmark: benchmark.to_string(),
                    ruleset: ruleset.to_string(),
                    path,
                });
            }
        }
        let text = std::fs::read_to_string(&path).map_err(|e| RcpTableError::Read {
            path: path.clone(),
            source: e.into(),
        })?;
        Self::from_json(
            &text,
            &path.display().to_string(),
            usage,
            ruleset,
            benchmark,
            facts,
        )
    }

    /// Build a table from RCP JSON text.
    pub fn from_json(
        text: &str,
        source: &str,
        usage: &str,
        ruleset: &str,
        benchmark: &str,
        facts: &RulesetFacts,
    ) -> Result<Self, RcpTableError> {
        let file = || source.to_string();
        let runs = facts
            .benchmark(usage, benchmark)
            .and_then(|b| b.rcp_submission_runs)
            .ok_or_else(|| RcpTableError::NoRcpTest {
                benchmark: benchmark.to_string(),
            })?;
        let doc: serde_json::Value =
            serde_json::from_str(text).map_err(|e| RcpTableError::Json {
                file: file(),
                source: e.into(),
            })?;
        let obj = doc
            .as_object()
            .ok_or_else(|| RcpTableError::NotAnObject { file: file() })?;
        let mut records = Vec::new();
        for (name, rec) in obj {
            let missing = |what: String| RcpTableError::MissingField {
                file: file(),
                record: name.clone(),
                what,
            };
            let bench = rec
                .get("Benchmark")
                .and_then(|b| b.as_str())
                .ok_or_else(|| missing("Benchmark".into()))?;
            let samples_field = facts
                .benchmark(usage, bench)
                .is_some_and(|b| b.rcp_samples_field);
            let field = if samples_field {
                "samples to converge"
            } else {
                "Epochs to converge"
            };
            let bs = rec
                .get("BS")
                .and_then(num)
                .ok_or_else(|| missing("numeric BS".into()))?;
            let mut points: Vec<f64> = rec
                .get(field)
                .and_then(|p| p.as_array())
                .ok_or_else(|| missing(format!("list `{field}`")))?
                .iter()
                .map(|x| {
                    num(x).ok_or_else(|| RcpTableError::NonNumericPoint {
                        file: file(),
                        record: name.clone(),
                        found: x.to_string(),
                    })
                })
                .collect::<Result<_, _>>()?;
            points.sort_by(f64::total_cmp);
            let rejected = facts.max_dropped(usage, bench);
            if points.len() <= 2 * rejected {
                return Err(RcpTableError::TooFewPoints {
                    file: file(),
                    record: name.clone(),
                    found: points.len(),
                    needed: 2 * rejected,
                });
            }
            let mean = np_mean(&points[rejected..points.len() - rejected]);
            let stdev = np_std(&points);
            let n_ref = (points.len() - 2 * rejected) as f64;
            let min_epochs = min_acceptable_mean(mean, stdev, n_ref, runs);
            records.push(RcpRecord {
                name: name.clone(),
                benchmark: bench.to_string(),
                bs,
                points,
                mean,
                stdev,
                max_speedup: mean / min_epochs,
                min_epochs,
                interpolated: false,
                engine: rec
                    .get("Engine")
                    .and_then(|e| e.as_str())
                    .map(str::to_string),
            });
        }
        // Stable sort by batch size, as `sorted(dict.items())` does.
        records.sort_by(|a, b| a.bs.total_cmp(&b.bs));
        let mut t = RcpTable {
            benchmark: benchmark.to_string(),
            ruleset: ruleset.to_string(),
            submission_runs: runs,
            source: source.to_string(),
            records,
            pruned: Vec::new(),
        };
        t.pruned = t.prune(Pruning::Official);
        Ok(t)
    }

    /// The record a run at global batch size `bs` is held to: the table's
    /// record for that size, or one interpolated between its neighbours
    /// (`None` outside the table's range).
    pub fn record_for(&self, bs: f64) -> Option<RcpRecord> {
        self.records
            .iter()
            .find(|x| x.bs == bs)
            .cloned()
            .or_else(|| {
                let lo = self.records.iter().rfind(|x| x.bs < bs)?;
                let hi = self.records.iter().find(|x| x.bs > bs)?;
                Some(self.interpolate(bs, lo, hi))
            })
    }

    /// An interpolated record at `bs` between `lo` and `hi`.
    pub fn interpolate(&self, bs: f64, lo: &RcpRecord, hi: &RcpRecord) -> RcpRecord {
        let mean = np_interp(bs, lo.bs, hi.bs, lo.mean, hi.mean);
        let stdev = np_interp(bs, lo.bs, hi.bs, lo.stdev, hi.stdev);
        let min_epochs = min_acceptable_mean(
            mean,
            stdev,
            (self.submission_runs * 2) as f64,
            self.submission_runs,
        );
        RcpRecord {
            name: format!("{}_interp_{}", self.benchmark, fmt_bs(bs)),
            benchmark: self.benchmark.clone(),
            bs,
            points: Vec::new(),
            mean,
            stdev,
            min_epochs,
            max_speedup: mean / min_epochs,
            interpolated: true,
            engine: lo.engine.clone().filter(|e| hi.engine.as_ref() == Some(e)),
        }
    }

    /// The pruned record set.
    pub fn prune(&self, how: Pruning) -> Vec<RcpRecord> {
        if self.records.is_empty() {
            return Vec::new();
        }
        let fastest =
            self.records.iter().fold(
                &self.records[0],
                |best, r| if r.mean < best.mean { r } else { best },
            );
        let mut list: Vec<&RcpRecord> =
            self.records.iter().filter(|r| r.bs >= fastest.bs).collect();
        match how {
            Pruning::Official => {
                let mut i = 1usize;
                while i + 1 < list.len() {
                    let interp_mean = np_interp(
                        list[i].bs,
                        list[i - 1].bs,
                        list[i + 1].bs,
                        list[i - 1].mean,
                        list[i + 1].mean,
                    );
                    if list[i].mean > interp_mean {
                        list.remove(i);
                        // Re-examine the same index with its new neighbours.
                        continue;
                    }
                    i += 1;
                }
            }
            Pruning::ConvexEnvelope => {
                // Andrew's monotone chain, lower hull over (BS, mean).
                let mut hull: Vec<&RcpRecord> = Vec::new();
                for r in list {
                    while hull.len() >= 2 {
                        let (a, b) = (hull[hull.len() - 2], hull[hull.len() - 1]);
                        let cross =
                            (b.bs - a.bs) * (r.mean - a.mean) - (b.mean - a.mean) * (r.bs - a.bs);
                        if cross <= 0.0 {
                            hull.pop();
                        } else {
                            break;
                        }
                    }
                    hull.push(r);
                }
                list = hull;
            }
        }
        // Every record whose batch size survived, once, in survivor order.
        let mut out: Vec<RcpRecord> = Vec::new();
        for kept in &list {
            for r in &self.records {
                if r.benchmark == kept.benchmark
                    && r.bs == kept.bs
                    && !out.iter().any(|o| o.name == r.name)
                {
                    out.push(r.clone());
                }
            }
        }
        out
    }

    fn pass_records(&self, pass: RcpPass) -> &[RcpRecord] {
        match pass {
            RcpPass::Pruned => &self.pruned,
            RcpPass::Full => &self.records,
        }
    }
}

fn fmt_bs(bs: f64) -> String {
    if bs.fract() == 0.0 && bs.abs() < 1e15 {
        format!("{}", bs as i64)
    } else {
        crate::value::float_repr(bs)
    }
}

/// What the official reader extracts from one run.
#[derive(Debug, Clone, Serialize)]
pub struct RunConvergence {
    pub file: String,
    pub converged: bool,
    /// Epochs or samples to converge; [`NOT_CONVERGED`] when not.
    pub point: f64,
    /// Last `global_batch_size` value seen, if any.
    #[serde(skip)]
    pub bs: Option<Value>,
    pub benchmark: Option<String>,
    /// The engine that trained the run, where the log names one (the
    /// `engine` of referee's `referee_provenance`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
}

/// Options of an RCP check.
#[derive(Debug, Clone, Default)]
pub struct RcpOptions {
    pub usage: String,
    pub ruleset: String,
    pub pass: RcpPass,
    pub pruning: Pruning,
    /// `--rcp-bypass` (or a params file) is in force.
    pub bypass: bool,
    /// Read BERT convergence from `train_samples` (`--bert_train_samples`).
    pub bert_train_samples: bool,
}

/// Outcome of the RCP test on one benchmark directory.
#[derive(Debug, Clone, Serialize)]
pub struct RcpOutcome {
    pub passed: bool,
    /// The official message (`RCP found`, `RCP Interpolation`, …).
    pub message: String,
    /// Normalisation factor (RCP mean / submission mean, at least 1).
    pub norm_factor: f64,
    pub record: Option<RcpRecord>,
    pub submission_mean: Option<f64>,
    pub benchmark: Option<String>,
    pub global_batch_size: Option<f64>,
    pub runs: Vec<RunConvergence>,
    /// The factor the official package checker would write to scaling.json.
    pub writes_scaling: Option<f64>,
    /// The official checker raises an exception on this input instead of
    /// giving a verdict (the summarizer then leaves the RCP column empty).
    pub official_crash: bool,
    pub diagnostics: Vec<Diagnostic>,
}

impl RcpOutcome {
    /// The summarizer's RCP column.
    pub fn column(&self) -> &'static str {
        if self.passed {
            "Pass"
        } else if self.message == "RCP found" {
            "Fail"
        } else if self.message == "RCP Interpolation" {
            "Interp. Fail"
        } else if self.message.contains("Missing") {
            "Missing"
        } else if self.message == "Cannot find any RCPs" {
            "No RCP"
        } else {
            "Unknown state"
        }
    }

    fn failed(
        message: impl Into<String>,
        runs: Vec<RunConvergence>,
        diagnostics: Vec<Diagnostic>,
    ) -> Self {
        RcpOutcome {
            passed: false,
            message: message.into(),
            norm_factor: 1.0,
            record: None,
            submission_mean: None,
            benchmark: None,
            global_batch_size: None,
            runs,
            writes_scaling: None,
            official_crash: false,
            diagnostics,
        }
    }

    /// Too many runs did not converge.
    pub fn insufficient(&self) -> bool {
        self.message == "Insufficient convergence"
    }
}

fn json_number(v: Option<&Value>) -> Option<f64> {
    v.and_then(Value::as_f64)
}

/// Read one run the way the official RCP reader does. `Err` where the
/// official reader raises (malformed line, missing metadata).
pub fn read_run(
    file: &str,
    log: &ParsedLog,
    benchmark_hint: Option<&str>,
    opts: &RcpOptions,
) -> Result<RunConvergence, RunReadError> {
    let _ = benchmark_hint;
    let mut reader = RunReader {
        file,
        opts,
        use_train_samples: opts.bert_train_samples,
        bs: None,
        benchmark: None,
        conv: None,
        converged: false,
        point: NOT_CONVERGED,
        sd: IndexMap::new(),
    };
    for (text, line_no, rec) in lines_in_file_order(log) {
        reader.take(&text, line_no, rec)?;
    }
    Ok(RunConvergence {
        file: file.to_string(),
        converged: reader.converged,
        point: if reader.converged {
            reader.point
        } else {
            NOT_CONVERGED
        },
        bs: reader.bs,
        benchmark: reader
            .benchmark
            .map(|b| b.as_str().map(str::to_string).unwrap_or_else(|| b.py_str())),
        engine: engine_of(log),
    })
}

/// The engine a log says trained it: `value.engine` of its
/// `referee_provenance` record.
fn engine_of(log: &ParsedLog) -> Option<String> {
    let rec = log
        .records
        .iter()
        .find(|r| r.key() == "referee_provenance")?;
    let v = rec.full_v();
    let engine = v.get("value")?.get("engine")?.as_str()?;
    Some(engine.to_string())
}

/// A note when the runs were trained on another engine or kernel set than
/// the reference convergence points they are held to: floating-point
/// results differ between kernel sets, so convergence may too (the RCPs
/// hold for the engine that produced them).
pub fn engine_note(outcome: &RcpOutcome) -> Option<Diagnostic> {
    let record = outcome.record.as_ref()?;
    let reference = record.engine.as_deref()?;
    let mut others: Vec<&str> = outcome
        .runs
        .iter()
        .filter_map(|r| r.engine.as_deref())
        .filter(|e| *e != reference)
        .collect();
    let n = others.len();
    others.sort_unstable();
    others.dedup();
    (n > 0).then(|| {
        Diagnostic::note(
            "rcp-engine",
            format!(
                "the reference convergence points of {} were measured on engine {reference}; {n} of {} runs here were trained on {}: the RCPs hold for {reference}, and convergence on another kernel set may differ",
                record.name,
                outcome.runs.len(),
                others.join(", ")
            ),
        )
        .rule("rcp", None)
    })
}

/// Every line of a log in file order, records and unreadable lines
/// interleaved: (text, line number, the record when it was readable).
fn lines_in_file_order(log: &ParsedLog) -> Vec<(Cow<'_, str>, usize, Option<&Record>)> {
    let mut lines: Vec<(i64, Cow<'_, str>, usize, Option<&Record>)> = log
        .records
        .iter()
        .filter(|r| r.index >= 0)
        .map(|r| (r.index, r.text.as_str(), r.line, Some(r)))
        .chain(
            log.problems
                .iter()
                .map(|p| (p.index, Cow::Borrowed(p.text.as_str()), p.line, None)),
        )
        .collect();
    lines.sort_by_key(|l| l.0);
    lines.into_iter().map(|(_, t, n, r)| (t, n, r)).collect()
}

/// The official RCP reader's state over one log, line by line.
struct RunReader<'a> {
    file: &'a str,
    opts: &'a RcpOptions,
    use_train_samples: bool,
    bs: Option<Value>,
    benchmark: Option<Value>,
    /// The latest convergence value (samples, epochs or train samples).
    conv: Option<f64>,
    converged: bool,
    point: f64,
    /// stable_diffusion: step → metric name → value.
    sd: IndexMap<String, IndexMap<String, Value>>,
}

/// One line's value and metadata, for the reader.
struct LineFields<'a> {
    file: &'a str,
    line_no: usize,
    value: Value,
    metadata: Value,
}

impl LineFields<'_> {
    fn meta(&self, name: &str) -> Result<Value, RunReadError> {
        self.metadata
            .get(name)
            .cloned()
            .ok_or_else(|| RunReadError::NoMetadata {
                file: self.file.to_string(),
                line: self.line_no,
                name: name.to_string(),
            })
    }

    fn meta_number(&self, name: &str) -> Result<f64, RunReadError> {
        json_number(Some(&self.meta(name)?)).ok_or_else(|| self.not_a_number(name))
    }

    fn not_a_number(&self, name: &str) -> RunReadError {
        RunReadError::NotANumber {
            file: self.file.to_string(),
            line: self.line_no,
            name: name.to_string(),
        }
    }
}

impl RunReader<'_> {
    fn bench_is(&self, name: &str) -> bool {
        self.benchmark.as_ref().and_then(Value::as_str) == Some(name)
    }

    /// Benchmarks whose convergence is counted in samples.
    fn samples_bench(&self) -> bool {
        self.benchmark
            .as_ref()
            .and_then(Value::as_str)
            .is_some_and(|b| {
                matches!(
                    b,
                    "llama2_70b_lora"
                        | "flux1"
                        | "llama31_405b"
                        | "llama31_8b"
                        | "gpt_oss_20b"
                        | "deepseekv3_671b"
                        | "qwen35_397b_grpo"
                        | "dlrmv4"
                ) || opts_samples_extra(b)
            })
    }

    /// One line of the log (the official reader matches substrings of the
    /// line's text before it decodes it).
    fn take(
        &mut self,
        text: &str,
        line_no: usize,
        rec: Option<&Record>,
    ) -> Result<(), RunReadError> {
        let file = self.file;
        let Some(s) = text.strip_prefix(":::MLLOG ") else {
            return Ok(());
        };
        let evalish = s.contains("eval_error") || s.contains("eval_accuracy");
        let needs_json = s.contains("global_batch_size")
            || s.contains("submission_benchmark")
            || evalish
            || (self.use_train_samples && s.contains("train_samples"))
            || s.contains("run_stop");
        if !needs_json {
            return Ok(());
        }
        let Some(rec) = rec else {
            return Err(RunReadError::NotMllog {
                file: file.to_string(),
                line: line_no,
            });
        };
        let v = rec.full_v();
        let line = LineFields {
            file,
            line_no,
            value: v.get("value").cloned().unwrap_or_default(),
            metadata: v.get("metadata").cloned().unwrap_or_default(),
        };
        if s.contains("global_batch_size") {
            self.bs = Some(line.value.clone());
        }
        if s.contains("submission_benchmark") {
            self.benchmark = Some(line.value.clone());
            if !self.bench_is("bert") && self.use_train_samples {
                self.use_train_samples = false;
            }
        }
        self.take_convergence(s, evalish, &line)?;
        if s.contains("run_stop") && rec.key.as_deref() == Some("run_stop") {
            self.take_run_stop(&line)?;
        }
        Ok(())
    }

    /// The convergence value a line carries, per the benchmark's unit.
    fn take_convergence(
        &mut self,
        s: &str,
        evalish: bool,
        line: &LineFields,
    ) -> Result<(), RunReadError> {
        if self.bench_is("stable_diffusion") && evalish {
            let unit = if self.opts.ruleset == "3.1.0" {
                "step_num"
            } else {
                "samples_count"
            };
            let step = line.meta(unit)?;
            let metric = line.meta("metric")?;
            self.sd
                .entry(step.py_str())
                .or_default()
                .insert(metric.py_str(), line.value.clone());
        } else if self.samples_bench() && evalish {
            self.conv = Some(line.meta_number("samples_count")?);
        } else if !self.use_train_samples && evalish {
            self.conv = Some(py_round(line.meta_number("epoch_num")?, 3));
        } else if self.use_train_samples && s.contains("train_samples") {
            self.conv = Some(
                json_number(Some(&line.value)).ok_or_else(|| line.not_a_number("train_samples"))?,
            );
        }
        Ok(())
    }

    /// `run_stop`: converged at the latest value on success.
    fn take_run_stop(&mut self, line: &LineFields) -> Result<(), RunReadError> {
        let status = line.meta("status")?;
        if status.as_str() != Some("success") {
            self.converged = false;
            self.point = NOT_CONVERGED;
            return Ok(());
        }
        self.converged = true;
        if self.bench_is("stable_diffusion") {
            self.conv = self.first_passing_sd_step()?;
            if self.conv.is_none() {
                return Err(RunReadError::NoPassingEvaluation {
                    file: self.file.to_string(),
                });
            }
        }
        self.point = self
            .conv
            .ok_or_else(|| RunReadError::SuccessBeforeEvaluation {
                file: line.file.to_string(),
                line: line.line_no,
            })?;
        Ok(())
    }

    /// stable_diffusion: the first step whose FID ≤ 90 and CLIP ≥ 0.15.
    fn first_passing_sd_step(&self) -> Result<Option<f64>, RunReadError> {
        let file = self.file;
        let mut passing: Vec<f64> = Vec::new();
        for (step, res) in &self.sd {
            let metric = |metric: &'static str| {
                res.get(metric).and_then(Value::as_f64).ok_or_else(|| {
                    RunReadError::EvaluationMissing {
                        file: file.to_string(),
                        step: step.clone(),
                        metric,
                    }
                })
            };
            let fid = metric("FID")?;
            let clip = metric("CLIP")?;
            if fid <= 90.0 && clip >= 0.15 {
                passing.push(
                    step.parse::<f64>()
                        .map_err(|_| RunReadError::StepNotANumber {
                            file: file.to_string(),
                            step: step.clone(),
                        })?,
                );
            }
        }
        Ok(passing.into_iter().reduce(f64::min))
    }
}

/// referee's own samples-based benchmarks (named `mini_*`) read
/// `samples_count` like the LLM benchmarks.
fn opts_samples_extra(b: &str) -> bool {
    b.starts_with("mini_")
}

/// Run the RCP test on the runs of one directory. `table` loads the RCP
/// table for the benchmark the runs name.
pub fn check_runs(
    runs: Vec<Result<RunConvergence, RunReadError>>,
    table: &dyn Fn(&str) -> Result<RcpTable, RcpTableError>,
    opts: &RcpOptions,
    facts: &RulesetFacts,
) -> RcpOutcome {
    let ok_runs = match readable_runs(runs) {
        Ok(r) => r,
        Err(outcome) => return *outcome,
    };
    let agreed = agreement(&ok_runs);
    let Some(bench) = agreed.benchmark.clone() else {
        let mut o = RcpOutcome::failed("Could not detect the benchmark", ok_runs, Vec::new());
        o.official_crash = true;
        o.diagnostics.push(
            Diagnostic::error(
                "rcp-no-benchmark",
                "no run names its submission_benchmark (the official RCP checker crashes with KeyError: None)",
            )
            .rule("rcp", None),
        );
        return o;
    };
    let tbl = match table(&bench) {
        Ok(t) => t,
        Err(e) => {
            let mut o = RcpOutcome::failed(format!("No RCP table: {e}"), ok_runs, Vec::new());
            o.benchmark = Some(bench);
            o.official_crash = true;
            o.diagnostics
                .push(Diagnostic::error("rcp-no-table", e.to_string()).rule("rcp", None));
            return o;
        }
    };
    if let Some(m) = agreed.mismatch {
        let mut o = RcpOutcome::failed("Could not detect global_batch_size", ok_runs, Vec::new());
        o.benchmark = Some(bench);
        // The official checker then looks up the RCPs of benchmark None.
        o.official_crash = true;
        o.diagnostics
            .push(Diagnostic::error("rcp-batch-size", m).rule("rcp", None));
        return o;
    }
    let max_failed = facts.max_dropped(&opts.usage, &bench);
    let bs = agreed.bs;
    let gbs = bs.as_f64();
    let mut base = RcpOutcome::failed("", ok_runs, Vec::new());
    base.benchmark = Some(bench);
    base.global_batch_size = gbs;
    let Some(bsf) = gbs.filter(|_| !py_eq(&bs, &Value::Int(-1))) else {
        base.message = "Could not detect global_batch_size".into();
        return base;
    };
    if agreed.not_converged > max_failed {
        base.message = "Insufficient convergence".into();
        base.diagnostics.push(
            Diagnostic::error(
                "rcp-insufficient-convergence",
                format!(
                    "{} runs did not converge; at most {max_failed} may fail",
                    agreed.not_converged
                ),
            )
            .rule("rcp", None),
        );
        return base;
    }
    let missing = format!("Missing RCP, please submit RCP with BS = {}", bs.py_str());
    let passed = test_against_table(&tbl, bsf, &missing, opts, &mut base);
    base.passed = apply_bypass(passed, &missing, opts, &mut base);
    base
}

/// The runs that could be read; an outcome (the official checker crashes)
/// when one could not.
fn readable_runs(
    runs: Vec<Result<RunConvergence, RunReadError>>,
) -> Result<Vec<RunConvergence>, Box<RcpOutcome>> {
    let mut diags = Vec::new();
    let mut ok_runs = Vec::new();
    for r in runs {
        match r {
            Ok(r) => ok_runs.push(r),
            Err(e) => diags.push(
                Diagnostic::error(
                    "rcp-unreadable",
                    format!("{e} (the official RCP checker crashes here)"),
                )
                .rule("rcp", None),
            ),
        }
    }
    if diags.is_empty() {
        return Ok(ok_runs);
    }
    let mut o = RcpOutcome::failed("Could not read the runs", ok_runs, diags);
    o.official_crash = true;
    Err(Box::new(o))
}

/// What the runs of a directory agree on.
struct Agreement {
    /// The batch size (-1 when no run logs one).
    bs: Value,
    benchmark: Option<String>,
    not_converged: usize,
    /// Why the runs disagree (batch size or benchmark), if they do.
    mismatch: Option<String>,
}

/// Batch size and benchmark must agree across runs (the official order of
/// evaluation, including its leniency for a leading run without one).
fn agreement(runs: &[RunConvergence]) -> Agreement {
    let mut a = Agreement {
        bs: Value::Int(-1),
        benchmark: None,
        not_converged: 0,
        mismatch: None,
    };
    for r in runs {
        a.not_converged += usize::from(!r.converged);
        let cur = r.bs.clone().unwrap_or(Value::Int(-1));
        if py_eq(&a.bs, &Value::Int(-1)) {
            a.bs = cur;
        } else if !py_eq(&cur, &a.bs) {
            a.mismatch = Some(format!(
                "batch sizes differ between runs ({} in {})",
                cur.py_str(),
                r.file
            ));
            break;
        }
        match (&a.benchmark, &r.benchmark) {
            (None, b) => a.benchmark = b.clone(),
            (Some(x), b) if Some(x) != b.as_ref() => {
                a.mismatch = Some(format!(
                    "benchmark names differ between runs ({} in {})",
                    b.clone().unwrap_or_else(|| "none".into()),
                    r.file
                ));
                break;
            }
            _ => {}
        }
    }
    a
}

/// The record of the batch size (exact, interpolated between the nearest
/// below and above, or the smallest above), the test against it; sets
/// `base.message` and `base.record`, returns whether it passed.
fn test_against_table(
    tbl: &RcpTable,
    bsf: f64,
    missing: &str,
    opts: &RcpOptions,
    base: &mut RcpOutcome,
) -> bool {
    let mut subm: Vec<f64> = base.runs.iter().map(|r| r.point).collect();
    let recs = tbl.pass_records(opts.pass);
    let exact = recs.iter().find(|r| r.bs == bsf).cloned();
    let below = recs.iter().fold(None::<&RcpRecord>, |best, r| {
        if r.bs < bsf && r.bs > best.map_or(0.0, |b| b.bs) {
            Some(r)
        } else {
            best
        }
    });
    let above = recs.iter().fold(None::<&RcpRecord>, |best, r| {
        if r.bs > bsf && r.bs < best.map_or(1e9, |b| b.bs) {
            Some(r)
        } else {
            best
        }
    });
    let (message, record, passed) = if let Some(rec) = exact {
        let (p, rec) = evaluate(rec, &mut subm, opts, base);
        ("RCP found".to_string(), Some(rec), p)
    } else if let (Some(lo), Some(hi)) = (below, above) {
        let interp = tbl.interpolate(bsf, lo, hi);
        let (p, rec) = evaluate(interp, &mut subm, opts, base);
        ("RCP Interpolation".to_string(), Some(rec), p)
    } else if below.is_some() {
        (missing.to_string(), None, false)
    } else if above.is_some() {
        let smallest = recs
            .iter()
            .fold(None::<&RcpRecord>, |best, r| {
                if r.bs < best.map_or(1e9, |b| b.bs) {
                    Some(r)
                } else {
                    best
                }
            })
            .cloned()
            .expect("a record above exists");
        let (p, rec) = evaluate(smallest, &mut subm, opts, base);
        if p {
            (
                "RCP not found but slower convergence on smaller batch size".to_string(),
                Some(rec),
                true,
            )
        } else {
            (missing.to_string(), Some(rec), false)
        }
    } else {
        ("Cannot find any RCPs".to_string(), None, false)
    };
    base.message = message;
    base.record = record;
    passed
}

/// `--rcp-bypass`: a failed test of a found, interpolated or missing RCP
/// passes with a warning.
fn apply_bypass(passed: bool, missing: &str, opts: &RcpOptions, base: &mut RcpOutcome) -> bool {
    if !opts.bypass
        || passed
        || !(base.message == "RCP found"
            || base.message == "RCP Interpolation"
            || base.message == missing)
    {
        return passed;
    }
    base.message.push_str(" passed using rcp_bypass");
    base.diagnostics.push(
        Diagnostic::warning(
            "rcp-bypass",
            "RCP test failed but allowed to proceed with RCP bypass; be ready to have this reviewed by the submission committee",
        )
        .rule("rcp", None),
    );
    true
}

/// Test the submission against one record; returns (pass, the record as
/// used, with the 405B allowance applied).
fn evaluate(
    mut rec: RcpRecord,
    subm: &mut [f64],
    opts: &RcpOptions,
    out: &mut RcpOutcome,
) -> (bool, RcpRecord) {
    if ruleset_facts::version_tuple(&opts.ruleset) >= (5, 0, 0)
        && out.benchmark.as_deref() == Some("llama31_405b")
    {
        rec.max_speedup = rec.mean / (rec.min_epochs - ruleset_facts::LLAMA31_405B_RCP_ALLOWANCE);
    }
    subm.sort_by(f64::total_cmp);
    let rejected = if rec.benchmark == "unet3d" { 4 } else { 1 };
    let kept = if subm.len() > 2 * rejected {
        &subm[rejected..subm.len() - rejected]
    } else {
        &subm[0..0]
    };
    let mean = np_mean(kept);
    let nf = rec.mean / mean;
    let norm = if nf < 1.0 { 1.0 } else { nf };
    let pass = mean >= rec.mean / rec.max_speedup;
    out.submission_mean = Some(mean);
    out.norm_factor = norm;
    if pass && mean < rec.mean {
        out.writes_scaling = Some(norm);
    }
    (pass, rec)
}

/// Notes on the official behaviour that shaped this outcome.
pub fn quirk_notes(tbl: &RcpTable, outcome: &RcpOutcome, opts: &RcpOptions) -> Vec<Diagnostic> {
    let mut notes = Vec::new();
    if opts.pass == RcpPass::Pruned && opts.pruning == Pruning::Official {
        let convex = tbl.prune(Pruning::ConvexEnvelope);
        let names = |v: &[RcpRecord]| v.iter().map(|r| fmt_bs(r.bs)).collect::<Vec<_>>();
        if names(&convex) != names(&tbl.pruned) {
            notes.push(
                Diagnostic::note(
                    "rcp-pruning-quirk",
                    format!(
                        "the official pruning keeps batch sizes [{}] where the lower convex envelope has [{}] (mlcommons/logging#368); referee matches the official set (use --rcp-pruning convex for the intended one)",
                        names(&tbl.pruned).join(", "),
                        names(&convex).join(", ")
                    ),
                )
                .rule("rcp", None),
            );
        }
    }
    if let Some(r) = &outcome.record {
        if r.interpolated {
            notes.push(
                Diagnostic::note(
                    "rcp-interpolation-quirk",
                    format!(
                        "interpolated record at BS {}: the official checker takes n_ref = 2 × {} runs, not the reference run count",
                        fmt_bs(r.bs),
                        tbl.submission_runs
                    ),
                )
                .rule("rcp", None),
            );
        }
        if tbl.benchmark == "llama31_405b"
            && ruleset_facts::version_tuple(&opts.ruleset) >= (5, 0, 0)
        {
            notes.push(
                Diagnostic::note(
                    "rcp-405b-allowance",
                    format!(
                        "the llama31_405b allowance of {} samples (meant for ruleset 5.0.0) is applied for ruleset {} as the official checker does",
                        ruleset_facts::LLAMA31_405B_RCP_ALLOWANCE,
                        opts.ruleset
                    ),
                )
                .rule("rcp", None),
            );
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{bumpy_table_json, flat_table_json, mllog_line, table_json, toy_facts};

    #[test]
    fn rules_worked_example() {
        // The rules' worked example: RCP mean 15.75 epochs, stdev 0.43 at
        // BS 128 → max speedup 3.53 %, minimum submission mean 15.21. It is
        // the 5-run (ResNet-style) case: 2 × 5 reference runs, olympic-trimmed
        // to 8, against 5 − 2 submission runs. The rules print rounded inputs,
        // so the figures agree to their last printed digit.
        let min = min_acceptable_mean(15.75, 0.43, 8.0, 5);
        assert!((min - 15.21).abs() < 0.01, "min mean {min}");
        let speedup_pct = (15.75 / min - 1.0) * 100.0;
        assert!(
            (speedup_pct - 3.53).abs() < 0.03,
            "max speedup {speedup_pct} %"
        );
        // The bisection stops within the tolerance of the closed form
        // mean + t(0.05, 9) · sd · sqrt(1/8 + 1/3).
        let closed = 15.75 - 1.833_112_932_653_652_7 * 0.43 * (1.0f64 / 8.0 + 1.0 / 3.0).sqrt();
        assert!((min - closed).abs() < 2e-4, "{min} vs {closed}");
    }

    fn run(engine: Option<&str>) -> RunConvergence {
        RunConvergence {
            file: "result_0.txt".into(),
            converged: true,
            point: 49152.0,
            bs: None,
            benchmark: Some("mini_resnet".into()),
            engine: engine.map(str::to_string),
        }
    }

    fn outcome(record_engine: Option<&str>, runs: Vec<RunConvergence>) -> RcpOutcome {
        let mut o = RcpOutcome::failed("RCP found", runs, Vec::new());
        o.record = Some(RcpRecord {
            name: "mini_resnet_ref_128".into(),
            benchmark: "mini_resnet".into(),
            bs: 128.0,
            points: vec![49152.0; 10],
            mean: 49152.0,
            stdev: 0.0,
            min_epochs: 49152.0,
            max_speedup: 1.0,
            interpolated: false,
            engine: record_engine.map(str::to_string),
        });
        o
    }

    #[test]
    fn runs_on_another_engine_than_the_rcps_get_a_note() {
        let o = outcome(
            Some("cpu-avx512"),
            vec![
                run(Some("cpu-avx2")),
                run(Some("cpu-avx512")),
                run(Some("cpu-portable")),
            ],
        );
        let note = engine_note(&o).expect("a note");
        assert_eq!(note.severity, crate::diag::Severity::Note);
        assert!(
            note.message.contains("measured on engine cpu-avx512; 2 of 3 runs here were trained on cpu-avx2, cpu-portable"),
            "{}",
            note.message
        );
        // Same engine, no engine named by the logs, or a table that names none: no note.
        assert!(engine_note(&outcome(Some("cpu-avx512"), vec![run(Some("cpu-avx512"))])).is_none());
        assert!(engine_note(&outcome(Some("cpu-avx512"), vec![run(None)])).is_none());
        assert!(engine_note(&outcome(None, vec![run(Some("cpu-avx2"))])).is_none());
    }

    fn toy_table(json: &str) -> Result<RcpTable, RcpTableError> {
        RcpTable::from_json(
            json,
            "rcps_mini_toy.json",
            "training",
            "toy-1.0",
            "mini_toy",
            &toy_facts(),
        )
    }

    #[test]
    fn a_record_takes_the_olympic_mean_and_the_untrimmed_population_stdev() {
        let t = toy_table(&table_json(&[
            ("b", 16.0, &[100.0; 4]),
            ("a", 8.0, &[14.0, 10.0, 12.0, 11.0, 13.0, 30.0]),
            ("a2", 8.0, &[20.0; 3]),
        ]))
        .unwrap();
        assert_eq!(t.submission_runs, 5);
        // Sorted by batch size, equal sizes in file order.
        let names: Vec<&str> = t.records.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, vec!["a", "a2", "b"]);
        let a = &t.records[0];
        assert_eq!(a.points, vec![10.0, 11.0, 12.0, 13.0, 14.0, 30.0]);
        // 11..14 averaged; the spread is of all six (mean 15, Σ d² = 280).
        assert_eq!(a.mean, 12.5);
        assert!(
            (a.stdev - (280.0f64 / 6.0).sqrt()).abs() < 1e-12,
            "{}",
            a.stdev
        );
        assert_eq!(a.min_epochs, min_acceptable_mean(12.5, a.stdev, 4.0, 5));
        assert!(a.min_epochs < a.mean);
        assert_eq!(a.max_speedup, a.mean / a.min_epochs);
        assert!(!a.interpolated);
        assert_eq!(t.records[1].mean, 20.0);
        assert_eq!(t.records[1].min_epochs, 20.0);
    }

    #[test]
    fn malformed_tables_are_named_errors() {
        let err = |json: &str| toy_table(json).unwrap_err();
        assert!(matches!(err("{"), RcpTableError::Json { .. }));
        assert!(matches!(err("[1, 2]"), RcpTableError::NotAnObject { .. }));
        let missing = |json: &str| match err(json) {
            RcpTableError::MissingField { record, what, .. } => (record, what),
            e => panic!("{e:?}"),
        };
        assert_eq!(
            missing(r#"{"r": {"BS": 8, "Epochs to converge": [1, 2, 3]}}"#),
            ("r".into(), "Benchmark".into())
        );
        assert_eq!(
            missing(
                r#"{"r": {"Benchmark": "mini_toy", "BS": "8", "Epochs to converge": [1, 2, 3]}}"#
            ),
            ("r".into(), "numeric BS".into())
        );
        assert_eq!(
            missing(
                r#"{"r": {"Benchmark": "mini_toy", "BS": 8, "samples to converge": [1, 2, 3]}}"#
            ),
            ("r".into(), "list `Epochs to converge`".into())
        );
        assert!(matches!(
            err(r#"{"r": {"Benchmark": "mini_toy", "BS": 8, "Epochs to converge": [1, "2", 3]}}"#),
            RcpTableError::NonNumericPoint { found, .. } if found == "\"2\""
        ));
        // Two points leave nothing once one is dropped at each end.
        assert!(matches!(
            err(&table_json(&[("r", 8.0, &[1.0, 2.0])])),
            RcpTableError::TooFewPoints {
                found: 2,
                needed: 2,
                ..
            }
        ));
        // A benchmark without an RCP test has no table.
        assert!(matches!(
            RcpTable::from_json("{}", "x", "training", "5.0.0", "dlrm", &toy_facts()),
            Err(RcpTableError::NoRcpTest { .. })
        ));
    }

    /// Means 12 (below the fastest: dropped), 10, 11, 11.8, 20, 13 at
    /// batch sizes 4, 8, 16, 24, 32, 40.
    fn bumpy_table() -> RcpTable {
        toy_table(&bumpy_table_json([12.0, 10.0, 11.0, 11.8, 20.0, 13.0])).unwrap()
    }

    #[test]
    fn official_pruning_compares_each_record_with_its_neighbours_only() {
        let t = bumpy_table();
        let sizes = |v: &[RcpRecord]| v.iter().map(|r| r.bs).collect::<Vec<_>>();
        // 16 lies above the line 8–24 and goes; 24 then lies below 8–32 and
        // stays; 32 lies above 24–40 and goes. 24 is above the line 8–40,
        // which the official algorithm never looks at again.
        assert_eq!(sizes(&t.pruned), vec![8.0, 24.0, 40.0]);
        assert_eq!(sizes(&t.prune(Pruning::Official)), vec![8.0, 24.0, 40.0]);
        assert_eq!(sizes(&t.prune(Pruning::ConvexEnvelope)), vec![8.0, 40.0]);
        let notes = quirk_notes(
            &t,
            &RcpOutcome::failed("", Vec::new(), Vec::new()),
            &RcpOptions::default(),
        );
        assert_eq!(notes.len(), 1);
        assert_eq!(notes[0].code, "rcp-pruning-quirk");
        assert!(
            notes[0].message.contains(
                "keeps batch sizes [8, 24, 40] where the lower convex envelope has [8, 40]"
            ),
            "{}",
            notes[0].message
        );
        // Asked for the envelope, there is nothing to say.
        let convex = RcpOptions {
            pruning: Pruning::ConvexEnvelope,
            ..RcpOptions::default()
        };
        assert!(
            quirk_notes(&t, &RcpOutcome::failed("", Vec::new(), Vec::new()), &convex).is_empty()
        );
    }

    /// Records at batch sizes 8 (olympic mean 100, spread 10.3) and 32
    /// (200, no spread).
    fn two_record_table() -> RcpTable {
        toy_table(&table_json(&[
            (
                "r8",
                8.0,
                &[
                    80.0, 90.0, 95.0, 98.0, 100.0, 100.0, 102.0, 105.0, 110.0, 120.0,
                ],
            ),
            ("r32", 32.0, &[200.0; 10]),
        ]))
        .unwrap()
    }

    fn runs_at(bs: i64, points: &[f64]) -> Vec<Result<RunConvergence, RunReadError>> {
        points
            .iter()
            .enumerate()
            .map(|(i, &p)| {
                Ok(RunConvergence {
                    file: format!("result_{i}.txt"),
                    converged: p < NOT_CONVERGED,
                    point: p,
                    bs: Some(Value::Int(bs)),
                    benchmark: Some("mini_toy".into()),
                    engine: None,
                })
            })
            .collect()
    }

    fn check(runs: Vec<Result<RunConvergence, RunReadError>>, bypass: bool) -> RcpOutcome {
        let t = two_record_table();
        let opts = RcpOptions {
            usage: "training".into(),
            ruleset: "toy-1.0".into(),
            bypass,
            ..RcpOptions::default()
        };
        check_runs(runs, &|_| Ok(t.clone()), &opts, &toy_facts())
    }

    fn codes(o: &RcpOutcome) -> Vec<&'static str> {
        o.diagnostics.iter().map(|d| d.code).collect()
    }

    #[test]
    fn a_found_record_passes_a_slower_mean_and_normalises_a_faster_one() {
        // Olympic mean 120: slower than the reference, nothing to normalise.
        let o = check(runs_at(8, &[140.0, 100.0, 120.0, 110.0, 130.0]), false);
        assert_eq!(
            (o.passed, o.message.as_str(), o.column()),
            (true, "RCP found", "Pass")
        );
        assert_eq!(o.record.as_ref().unwrap().name, "r8");
        assert_eq!(
            (o.submission_mean, o.norm_factor, o.writes_scaling),
            (Some(120.0), 1.0, None)
        );
        assert_eq!(o.global_batch_size, Some(8.0));
        assert_eq!(o.benchmark.as_deref(), Some("mini_toy"));
        // Mean 95: faster, but within the allowed speed-up: normalised.
        let o = check(runs_at(8, &[1.0, 90.0, 95.0, 100.0, 500.0]), false);
        assert!(o.passed);
        assert_eq!(o.submission_mean, Some(95.0));
        assert_eq!(o.writes_scaling, Some(100.0 / 95.0));
        assert_eq!(o.norm_factor, 100.0 / 95.0);
        // Mean 80: too fast.
        let o = check(runs_at(8, &[70.0, 75.0, 80.0, 85.0, 90.0]), false);
        assert_eq!(
            (o.passed, o.column(), o.writes_scaling),
            (false, "Fail", None)
        );
        assert_eq!(o.norm_factor, 1.25);
        assert!(codes(&o).is_empty());
    }

    #[test]
    fn a_batch_size_between_records_is_held_to_their_interpolation() {
        let o = check(runs_at(16, &[150.0; 5]), false);
        assert_eq!(o.message, "RCP Interpolation");
        let r = o.record.as_ref().unwrap();
        assert!(r.interpolated);
        assert_eq!(r.name, "mini_toy_interp_16");
        // A third of the way from 100 to 200.
        assert!((r.mean - (100.0 + 100.0 / 3.0)).abs() < 1e-9, "{}", r.mean);
        // n_ref = 2 × 5 runs, not the reference's 8 kept points.
        assert_eq!(r.min_epochs, min_acceptable_mean(r.mean, r.stdev, 10.0, 5));
        assert!(o.passed);
        let notes = quirk_notes(&two_record_table(), &o, &RcpOptions::default());
        let codes_of = |n: &[Diagnostic]| n.iter().map(|d| d.code).collect::<Vec<_>>();
        assert_eq!(codes_of(&notes), vec!["rcp-interpolation-quirk"]);
        assert!(
            notes[0]
                .message
                .contains("BS 16: the official checker takes n_ref = 2 × 5 runs"),
            "{}",
            notes[0].message
        );
        // A record found in the table gets no such note.
        let found = check(runs_at(8, &[120.0; 5]), false);
        assert!(quirk_notes(&two_record_table(), &found, &RcpOptions::default()).is_empty());
        let o = check(runs_at(16, &[50.0; 5]), false);
        assert_eq!((o.passed, o.column()), (false, "Interp. Fail"));
    }

    #[test]
    fn batch_sizes_outside_the_table() {
        // Above every record: missing.
        let o = check(runs_at(64, &[500.0; 5]), false);
        assert_eq!(o.message, "Missing RCP, please submit RCP with BS = 64");
        assert_eq!((o.passed, o.column()), (false, "Missing"));
        assert!(o.record.is_none());
        // Below every record: held to the smallest, and passes when slower.
        let o = check(runs_at(4, &[150.0; 5]), false);
        assert_eq!(
            o.message,
            "RCP not found but slower convergence on smaller batch size"
        );
        assert!(o.passed);
        assert_eq!(o.record.as_ref().unwrap().name, "r8");
        let o = check(runs_at(4, &[50.0; 5]), false);
        assert_eq!(
            (o.passed, o.message.as_str()),
            (false, "Missing RCP, please submit RCP with BS = 4")
        );
        assert_eq!(o.record.as_ref().unwrap().name, "r8");
    }

    #[test]
    fn rcp_bypass_passes_a_failed_or_missing_record_with_a_warning() {
        let o = check(runs_at(8, &[70.0, 75.0, 80.0, 85.0, 90.0]), true);
        assert!(o.passed);
        assert_eq!(o.message, "RCP found passed using rcp_bypass");
        assert_eq!(codes(&o), vec!["rcp-bypass"]);
        let o = check(runs_at(64, &[500.0; 5]), true);
        assert!(o.passed);
        assert_eq!(
            o.message,
            "Missing RCP, please submit RCP with BS = 64 passed using rcp_bypass"
        );
        let o = check(runs_at(16, &[50.0; 5]), true);
        assert_eq!(
            (o.passed, o.message.as_str()),
            (true, "RCP Interpolation passed using rcp_bypass")
        );
        // A passing test is left alone.
        let o = check(runs_at(8, &[120.0; 5]), true);
        assert_eq!((o.passed, o.message.as_str()), (true, "RCP found"));
        assert!(codes(&o).is_empty());
    }

    #[test]
    fn runs_that_cannot_be_tested() {
        // One failed run is allowed, two are not.
        let o = check(
            runs_at(8, &[120.0, 120.0, 120.0, 120.0, NOT_CONVERGED]),
            false,
        );
        assert!(o.passed);
        let o = check(
            runs_at(8, &[120.0, 120.0, 120.0, NOT_CONVERGED, NOT_CONVERGED]),
            false,
        );
        assert_eq!(
            (o.passed, o.message.as_str()),
            (false, "Insufficient convergence")
        );
        assert!(o.insufficient());
        assert_eq!(o.column(), "Unknown state");
        assert_eq!(codes(&o), vec!["rcp-insufficient-convergence"]);
        assert!(!o.official_crash);
        // Runs that disagree on the batch size.
        let mut runs = runs_at(8, &[120.0; 3]);
        runs.extend(runs_at(16, &[120.0; 2]));
        let o = check(runs, false);
        assert_eq!(o.message, "Could not detect global_batch_size");
        assert!(o.official_crash);
        assert_eq!(codes(&o), vec!["rcp-batch-size"]);
        // No run logs a batch size: no crash, no verdict.
        let runs = runs_at(8, &[120.0; 5])
            .into_iter()
            .map(|r| r.map(|r| RunConvergence { bs: None, ..r }))
            .collect();
        let o = check(runs, false);
        assert_eq!(
            (o.message.as_str(), o.official_crash),
            ("Could not detect global_batch_size", false)
        );
        // Runs that name different benchmarks.
        let mut runs = runs_at(8, &[120.0; 4]);
        runs.extend(runs_at(8, &[120.0]).into_iter().map(|r| {
            r.map(|r| RunConvergence {
                benchmark: Some("mini_other".into()),
                ..r
            })
        }));
        let o = check(runs, false);
        assert_eq!(codes(&o), vec!["rcp-batch-size"]);
        assert!(
            o.diagnostics[0]
                .message
                .contains("benchmark names differ between runs (mini_other in result_0.txt)"),
            "{}",
            o.diagnostics[0].message
        );
        // No run names its benchmark.
        let runs = runs_at(8, &[120.0; 5])
            .into_iter()
            .map(|r| {
                r.map(|r| RunConvergence {
                    benchmark: None,
                    ..r
                })
            })
            .collect();
        let o = check(runs, false);
        assert_eq!(
            (o.message.as_str(), o.official_crash),
            ("Could not detect the benchmark", true)
        );
        assert_eq!(codes(&o), vec!["rcp-no-benchmark"]);
        // A run that cannot be read.
        let mut runs = runs_at(8, &[120.0; 4]);
        runs.push(Err(RunReadError::NotMllog {
            file: "result_4.txt".into(),
            line: 3,
        }));
        let o = check(runs, false);
        assert_eq!(
            (o.message.as_str(), o.official_crash),
            ("Could not read the runs", true)
        );
        assert_eq!(codes(&o), vec!["rcp-unreadable"]);
        assert!(o.diagnostics[0].message.contains("result_4.txt:3"));
        // A table without records.
        let empty = toy_table("{}").unwrap();
        let o = check_runs(
            runs_at(8, &[120.0; 5]),
            &|_| Ok(empty.clone()),
            &RcpOptions::default(),
            &toy_facts(),
        );
        assert_eq!(
            (o.passed, o.message.as_str(), o.column()),
            (false, "Cannot find any RCPs", "No RCP")
        );
        // No table for the benchmark.
        let opts = RcpOptions::default();
        let o = check_runs(
            runs_at(8, &[120.0; 5]),
            &|b| {
                Err(RcpTableError::NoRcpTest {
                    benchmark: b.to_string(),
                })
            },
            &opts,
            &toy_facts(),
        );
        assert!(o.official_crash);
        assert_eq!(codes(&o), vec!["rcp-no-table"]);
    }

    /// Read a log of `(key, value, metadata)` lines as the RCP reader does.
    fn read(
        lines: &[(&str, &str, &str)],
        ruleset: &str,
        bert_train_samples: bool,
    ) -> Result<RunConvergence, RunReadError> {
        let text: String = lines
            .iter()
            .enumerate()
            .map(|(i, (key, value, meta))| mllog_line(1000 + i as u64, P, key, value, meta))
            .collect();
        read_text(&text, ruleset, bert_train_samples)
    }

    /// Read a log's text as the RCP reader does.
    fn read_text(
        text: &str,
        ruleset: &str,
        bert_train_samples: bool,
    ) -> Result<RunConvergence, RunReadError> {
        let log = crate::mllog::read_from(text.as_bytes()).unwrap();
        let opts = RcpOptions {
            ruleset: ruleset.into(),
            bert_train_samples,
            ..RcpOptions::default()
        };
        read_run("result_0.txt", &log, None, &opts)
    }

    const P: &str = "POINT_IN_TIME";

    const STOP: (&str, &str, &str) = ("run_stop", "null", r#"{"status": "success"}"#);

    #[test]
    fn the_reader_takes_the_last_evaluation_before_a_successful_stop() {
        // Epochs, rounded to 3 decimals.
        let r = read(
            &[
                ("submission_benchmark", r#""resnet""#, "{}"),
                ("global_batch_size", "3264", "{}"),
                ("eval_accuracy", "0.7", r#"{"epoch_num": 1.0}"#),
                ("eval_accuracy", "0.76", r#"{"epoch_num": 2.00049}"#),
                STOP,
            ],
            "5.0.0",
            false,
        )
        .unwrap();
        assert!(r.converged);
        assert_eq!(r.point, 2.0);
        assert_eq!(r.bs.as_ref().and_then(Value::as_f64), Some(3264.0));
        assert_eq!(r.benchmark.as_deref(), Some("resnet"));
        assert_eq!(r.engine, None);
        // Samples for the LLM benchmarks and referee's own.
        for bench in [r#""llama2_70b_lora""#, r#""mini_llm""#] {
            let r = read(
                &[
                    ("submission_benchmark", bench, "{}"),
                    (
                        "eval_accuracy",
                        "0.9",
                        r#"{"samples_count": 3072, "epoch_num": 0.5}"#,
                    ),
                    STOP,
                ],
                "5.0.0",
                false,
            )
            .unwrap();
            assert_eq!(r.point, 3072.0, "{bench}");
        }
        // Aborted: not converged, whatever was evaluated.
        let r = read(
            &[
                ("submission_benchmark", r#""resnet""#, "{}"),
                ("eval_accuracy", "0.7", r#"{"epoch_num": 1.0}"#),
                ("run_stop", "null", r#"{"status": "aborted"}"#),
            ],
            "5.0.0",
            false,
        )
        .unwrap();
        assert_eq!((r.converged, r.point), (false, NOT_CONVERGED));
    }

    #[test]
    fn the_reader_matches_substrings_as_the_official_one_does() {
        // Any line that mentions global_batch_size sets the batch size.
        let r = read(
            &[
                ("submission_benchmark", r#""resnet""#, "{}"),
                ("global_batch_size", "3264", "{}"),
                (
                    "opt_base_learning_rate",
                    "0.5",
                    r#"{"note": "global_batch_size"}"#,
                ),
                ("eval_accuracy", "0.76", r#"{"epoch_num": 2.0}"#),
                STOP,
            ],
            "5.0.0",
            false,
        )
        .unwrap();
        assert_eq!(r.bs.as_ref().and_then(Value::as_f64), Some(0.5));
        // BERT with --bert_train_samples: train_samples, not epochs.
        let bert = [
            ("submission_benchmark", r#""bert""#, "{}"),
            ("train_samples", "5000", "{}"),
            ("eval_accuracy", "0.72", r#"{"epoch_num": 1.5}"#),
            STOP,
        ];
        assert_eq!(read(&bert, "5.0.0", true).unwrap().point, 5000.0);
        assert_eq!(read(&bert, "5.0.0", false).unwrap().point, 1.5);
        // Another benchmark ignores the option.
        let mut resnet = bert;
        resnet[0] = ("submission_benchmark", r#""resnet""#, "{}");
        assert_eq!(read(&resnet, "5.0.0", true).unwrap().point, 1.5);
        // referee's provenance names the engine.
        let r = read(
            &[
                ("submission_benchmark", r#""mini_llm""#, "{}"),
                ("referee_provenance", r#"{"engine": "cpu-avx2"}"#, "{}"),
                ("eval_accuracy", "0.9", r#"{"samples_count": 3072}"#),
                STOP,
            ],
            "5.0.0",
            false,
        )
        .unwrap();
        assert_eq!(r.engine.as_deref(), Some("cpu-avx2"));
    }

    #[test]
    fn the_reader_skips_the_lines_it_does_not_need() {
        let ok = read(
            &[
                ("submission_benchmark", r#""resnet""#, "{}"),
                ("eval_accuracy", "0.76", r#"{"epoch_num": 2.0}"#),
                STOP,
            ],
            "5.0.0",
            false,
        )
        .unwrap();
        let text = |extra: &str| {
            mllog_line(1, P, "submission_benchmark", r#""resnet""#, "{}")
                + extra
                + "\n"
                + &mllog_line(3, P, "eval_accuracy", "0.76", r#"{"epoch_num": 2.0}"#)
                + &mllog_line(
                    4,
                    "INTERVAL_END",
                    "run_stop",
                    "null",
                    r#"{"status": "success"}"#,
                )
        };
        // A broken line that names none of the keys the reader looks for.
        let broken = ":::MLLOG {\"key\": \"train_samples\", broken";
        assert_eq!(
            read_text(&text(broken), "5.0.0", false).unwrap().point,
            ok.point
        );
        // The same line is needed (and breaks the read) for BERT's train_samples.
        let bert = text(broken).replace("\"resnet\"", "\"bert\"");
        assert!(matches!(
            read_text(&bert, "5.0.0", true),
            Err(RunReadError::NotMllog { line: 2, .. })
        ));
        // A line that mentions run_stop under another key is not the stop.
        let mention = mllog_line(2, P, "tracked_stats", "1", r#"{"note": "before run_stop"}"#);
        let r = read_text(&text(mention.trim_end()), "5.0.0", false).unwrap();
        assert_eq!((r.converged, r.point), (true, 2.0));
    }

    #[test]
    fn equal_batch_sizes_give_the_first_record_in_the_tables_order() {
        let t = toy_table(&table_json(&[
            ("a", 8.0, &[100.0; 3]),
            ("a2", 8.0, &[120.0; 3]),
            ("c", 32.0, &[200.0; 3]),
            ("c2", 32.0, &[260.0; 3]),
        ]))
        .unwrap();
        let opts = RcpOptions {
            usage: "training".into(),
            ruleset: "toy-1.0".into(),
            pass: RcpPass::Full,
            ..RcpOptions::default()
        };
        let test = |bs: i64| {
            check_runs(
                runs_at(bs, &[500.0; 5]),
                &|_| Ok(t.clone()),
                &opts,
                &toy_facts(),
            )
        };
        // Between a (100 at 8) and c (200 at 32).
        let o = test(16);
        assert_eq!(o.record.as_ref().unwrap().mean, 100.0 + 100.0 / 3.0);
        // Below every record: the first of the smallest.
        let o = test(4);
        assert_eq!(o.record.as_ref().unwrap().name, "a");
    }

    #[test]
    fn the_reader_raises_where_the_official_one_does() {
        let bench = ("submission_benchmark", r#""resnet""#, "{}");
        assert!(matches!(
            read(&[bench, STOP], "5.0.0", false),
            Err(RunReadError::SuccessBeforeEvaluation { line: 2, .. })
        ));
        assert!(matches!(
            read(&[bench, ("eval_accuracy", "0.7", r#"{"samples_count": 5}"#), STOP], "5.0.0", false),
            Err(RunReadError::NoMetadata { line: 2, ref name, .. }) if name == "epoch_num"
        ));
        assert!(matches!(
            read(
                &[
                    bench,
                    ("eval_accuracy", "0.7", r#"{"epoch_num": "one"}"#),
                    STOP
                ],
                "5.0.0",
                false
            ),
            Err(RunReadError::NotANumber { .. })
        ));
        assert!(matches!(
            read(&[bench, ("eval_accuracy", "0.7", r#"{"epoch_num": 1}"#), ("run_stop", "null", "{}")], "5.0.0", false),
            Err(RunReadError::NoMetadata { ref name, .. }) if name == "status"
        ));
    }

    #[test]
    fn stable_diffusion_converges_at_its_first_step_meeting_both_metrics() {
        let sd = |unit: &str, ruleset: &str, evals: &[(u64, &str, &str)]| {
            let mut text = mllog_line(0, P, "submission_benchmark", r#""stable_diffusion""#, "{}");
            for (step, metric, value) in evals {
                let meta = format!(r#"{{"{unit}": {step}, "metric": "{metric}"}}"#);
                text += &mllog_line(1, P, "eval_accuracy", value, &meta);
            }
            text += &mllog_line(
                2,
                "INTERVAL_END",
                "run_stop",
                "null",
                r#"{"status": "success"}"#,
            );
            read_text(&text, ruleset, false)
        };
        // Step 1000: FID too high; 3000 passes; 2000 has a low CLIP.
        let evals = [
            (1000, "FID", "95.0"),
            (1000, "CLIP", "0.2"),
            (3000, "FID", "80.0"),
            (3000, "CLIP", "0.16"),
            (2000, "FID", "85.0"),
            (2000, "CLIP", "0.1"),
        ];
        assert_eq!(sd("samples_count", "5.0.0", &evals).unwrap().point, 3000.0);
        // At the boundaries: FID 90 and CLIP 0.15 pass; the smallest step wins.
        let edge = [
            (4000, "FID", "90.0"),
            (4000, "CLIP", "0.15"),
            (5000, "FID", "1.0"),
            (5000, "CLIP", "0.9"),
        ];
        assert_eq!(sd("samples_count", "5.0.0", &edge).unwrap().point, 4000.0);
        // 3.1.0 counts in steps.
        assert_eq!(sd("step_num", "3.1.0", &evals).unwrap().point, 3000.0);
        assert!(matches!(
            sd("samples_count", "5.0.0", &evals[..2]),
            Err(RunReadError::NoPassingEvaluation { .. })
        ));
        assert!(matches!(
            sd("samples_count", "5.0.0", &evals[..1]),
            Err(RunReadError::EvaluationMissing { metric: "CLIP", .. })
        ));
    }

    #[test]
    fn a_record_for_any_batch_size_in_the_tables_range() {
        let t = two_record_table();
        assert_eq!(t.record_for(8.0).unwrap().name, "r8");
        let mid = t.record_for(20.0).unwrap();
        assert!(mid.interpolated);
        assert_eq!(mid.name, "mini_toy_interp_20");
        assert_eq!(mid.mean, 150.0);
        assert!(t.record_for(4.0).is_none());
        assert!(t.record_for(64.0).is_none());
        // Batch sizes that are not whole numbers keep their digits.
        assert_eq!(t.record_for(12.5).unwrap().name, "mini_toy_interp_12.5");
    }

    #[test]
    fn an_interpolated_record_keeps_the_engine_both_neighbours_share() {
        let t = two_record_table();
        let mut lo = t.records[0].clone();
        let mut hi = t.records[1].clone();
        lo.engine = Some("cpu-avx2".into());
        hi.engine = Some("cpu-avx2".into());
        assert_eq!(
            t.interpolate(16.0, &lo, &hi).engine.as_deref(),
            Some("cpu-avx2")
        );
        hi.engine = Some("cpu-avx512".into());
        assert_eq!(t.interpolate(16.0, &lo, &hi).engine, None);
    }

    #[test]
    fn tables_load_from_the_official_layout_or_a_flat_folder() {
        let dir = tempfile::tempdir().unwrap();
        let json = table_json(&[("r8", 8.0, &[1.0, 2.0, 3.0])]);
        let official = RcpTable::official_path(dir.path(), "training", "toy-1.0", "mini_toy");
        assert_eq!(
            official,
            dir.path().join("training_toy-1.0/rcps_mini_toy.json")
        );
        assert!(matches!(
            RcpTable::load(dir.path(), "training", "toy-1.0", "mini_toy", &toy_facts()),
            Err(RcpTableError::NoFile { ref path, .. }) if *path == official
        ));
        std::fs::write(dir.path().join("rcps_mini_toy.json"), &json).unwrap();
        let t =
            RcpTable::load(dir.path(), "training", "toy-1.0", "mini_toy", &toy_facts()).unwrap();
        assert!(t.source.ends_with("rcps_mini_toy.json") && !t.source.contains("training_"));
        std::fs::create_dir_all(official.parent().unwrap()).unwrap();
        std::fs::write(&official, &json).unwrap();
        let t =
            RcpTable::load(dir.path(), "training", "toy-1.0", "mini_toy", &toy_facts()).unwrap();
        assert_eq!(t.source, official.display().to_string());
        assert_eq!(t.records.len(), 1);
    }

    #[test]
    fn the_bisection_stops_where_the_official_one_does() {
        // The official `_find_min_acceptable_mean` of mlperf-logging 4.1.68
        // on the same inputs (5 submission runs), to the last bit.
        assert_eq!(min_acceptable_mean(15.75, 0.43, 8.0, 5), 15.216386318206787);
        assert_eq!(
            min_acceptable_mean(100.0, 10.28591269, 8.0, 5),
            87.23492622375488
        );
        assert_eq!(min_acceptable_mean(3.5, 0.2, 18.0, 5), 3.284320831298828);
    }

    #[test]
    fn unet3d_drops_four_runs_at_each_end() {
        let facts = RulesetFacts::official();
        let json = |n: usize| {
            let points: Vec<f64> = (1..=n).map(|i| i as f64).collect();
            format!(
                r#"{{"u": {{"Benchmark": "unet3d", "BS": 7, "Epochs to converge": {points:?}}}}}"#
            )
        };
        let t = RcpTable::from_json(&json(10), "x", "training", "5.0.0", "unet3d", &facts).unwrap();
        // 5 and 6 are left of 1..10.
        assert_eq!(t.records[0].mean, 5.5);
        // n_ref counts the two points kept.
        assert_eq!(
            t.records[0].min_epochs,
            min_acceptable_mean(5.5, t.records[0].stdev, 2.0, 40)
        );
        assert!(matches!(
            RcpTable::from_json(&json(8), "x", "training", "5.0.0", "unet3d", &facts),
            Err(RcpTableError::TooFewPoints {
                found: 8,
                needed: 8,
                ..
            })
        ));
        // The submission side drops four at each end too.
        let mut rec = t.records[0].clone();
        rec.min_epochs = 1.0;
        rec.max_speedup = rec.mean;
        let mut out = RcpOutcome::failed("", Vec::new(), Vec::new());
        let mut subm = [9.0, 1.0, 2.0, 3.0, 4.0, 50.0, 60.0, 70.0, 80.0, 90.0];
        let (passed, _) = evaluate(rec, &mut subm, &RcpOptions::default(), &mut out);
        assert!(passed);
        assert_eq!(out.submission_mean, Some((9.0 + 50.0) / 2.0));
        // Eight runs or fewer leave nothing to average.
        let (passed, _) = evaluate(
            t.records[0].clone(),
            &mut [5.0; 5],
            &RcpOptions::default(),
            &mut out,
        );
        assert!(!passed);
        assert!(out.submission_mean.unwrap().is_nan());
    }

    #[test]
    fn llama31_405b_gets_one_evaluation_of_allowance_from_5_0_0_on() {
        let rec = RcpRecord {
            name: "l".into(),
            benchmark: "llama31_405b".into(),
            bs: 1152.0,
            points: Vec::new(),
            mean: 1_000_000.0,
            stdev: 1.0,
            min_epochs: 900_000.0,
            max_speedup: 1_000_000.0 / 900_000.0,
            interpolated: false,
            engine: None,
        };
        // 870,000 samples: below the minimum, within one interval of it.
        let run = |ruleset: &str| {
            let mut out = RcpOutcome::failed("", Vec::new(), Vec::new());
            out.benchmark = Some("llama31_405b".into());
            let opts = RcpOptions {
                ruleset: ruleset.into(),
                ..RcpOptions::default()
            };
            let (passed, used) = evaluate(rec.clone(), &mut [870_000.0; 3], &opts, &mut out);
            (passed, used.max_speedup)
        };
        assert_eq!(run("5.1.0"), (true, 1_000_000.0 / (900_000.0 - 46_080.0)));
        assert!(run("5.0.0").0);
        assert_eq!(run("4.1.0"), (false, rec.max_speedup));
        let table = RcpTable {
            benchmark: "llama31_405b".into(),
            ruleset: "5.1.0".into(),
            submission_runs: 3,
            source: String::new(),
            records: vec![rec.clone()],
            pruned: vec![rec.clone()],
        };
        let mut outcome = RcpOutcome::failed("RCP found", Vec::new(), Vec::new());
        outcome.record = Some(rec);
        let notes = |ruleset: &str| {
            let opts = RcpOptions {
                ruleset: ruleset.into(),
                ..RcpOptions::default()
            };
            quirk_notes(&table, &outcome, &opts)
                .iter()
                .map(|d| d.code)
                .collect::<Vec<_>>()
        };
        assert_eq!(notes("5.1.0"), vec!["rcp-405b-allowance"]);
        assert!(notes("4.1.0").is_empty());
    }

    #[test]
    fn a_mean_equal_to_the_reference_needs_no_normalisation() {
        let o = check(runs_at(8, &[1.0, 100.0, 100.0, 100.0, 500.0]), false);
        assert!(o.passed);
        assert_eq!((o.norm_factor, o.writes_scaling), (1.0, None));
    }

    #[test]
    fn pruning_keeps_records_on_the_line_and_the_first_of_equally_fast_ones() {
        let sizes = |means: &[(f64, f64)], how: Pruning| {
            toy_table(&flat_table_json(means))
                .unwrap()
                .prune(how)
                .iter()
                .map(|r| r.bs)
                .collect::<Vec<_>>()
        };
        // 16 lies on the line from 8 to 24: kept.
        let on_line = [(8.0, 10.0), (16.0, 11.0), (24.0, 12.0)];
        assert_eq!(sizes(&on_line, Pruning::Official), vec![8.0, 16.0, 24.0]);
        // 8 and 16 are equally fast: the smaller batch size is the fastest
        // record, and nothing below it goes.
        let tie = [(8.0, 10.0), (16.0, 10.0), (24.0, 15.0)];
        assert_eq!(sizes(&tie, Pruning::Official), vec![8.0, 16.0, 24.0]);
        // The lower convex envelope of six records.
        let six = [
            (8.0, 10.0),
            (16.0, 10.4),
            (24.0, 11.8),
            (32.0, 20.0),
            (40.0, 13.0),
            (48.0, 16.0),
        ];
        assert_eq!(
            sizes(&six, Pruning::ConvexEnvelope),
            vec![8.0, 16.0, 40.0, 48.0]
        );
    }

    #[test]
    fn batch_sizes_print_as_python_prints_them() {
        assert_eq!(fmt_bs(64.0), "64");
        assert_eq!(fmt_bs(12.5), "12.5");
        assert_eq!(fmt_bs(1e15), crate::value::float_repr(1e15));
        assert_eq!(fmt_bs(-8.0), "-8");
    }

    #[test]
    fn zero_stdev_means_no_speedup() {
        assert_eq!(min_acceptable_mean(100.0, 0.0, 6.0, 3), 100.0);
    }
}
