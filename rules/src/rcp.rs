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

    #[test]
    fn zero_stdev_means_no_speedup() {
        assert_eq!(min_acceptable_mean(100.0, 0.0, 6.0, 3), 100.0);
    }
}
