//! `referee perf`: throughput, TFLOP/s per GPU and MFU from the logs people
//! have — NeMo, Megatron-LM / Megatron-Bridge and MLLOG — with the DGX
//! Cloud recipes' window rule and statistics, against published reference
//! numbers, with a scaling view.
//!
//! * [`formats`]: format detection and the line parsers (MLLOG through
//!   `referee_rules::mllog`); multi-rank output; the fast scanner.
//! * [`window`]: the window rule, mean and sample sd, the status.
//! * [`fields`]: model, system, GPU count, batch sizes, sequence length,
//!   parallelism, precision, and where each came from.
//! * [`flops`]: model FLOPs per token from the architecture (built-in
//!   records, a Hugging Face `config.json`): TFLOP/s/GPU and MFU when the
//!   log prints no TFLOP/s.
//! * [`peaks`]: the GPU dense peak table (the one `referee run` uses),
//!   keyed by [`precision`].
//! * [`reference`]: the shipped published rows and the matching
//!   ([`names`]: how names are compared).
//! * [`energy`]: energy per sample and per token from power logs.
//! * [`error`]: why an input cannot be read.
//! * [`scaling`]: weak/strong scaling efficiency.
//! * [`report`], [`html`]: the report (human, JSON, Markdown, CSV) and the
//!   HTML page.
//!
//! It owns the reading of throughput logs and must not know how a command
//! parses its flags or where its output goes (the harness's `cli`), nor
//! of `referee compare`, which reads its rows.

pub mod energy;
pub mod error;
pub mod fields;
pub mod flops;
pub mod formats;
pub mod html;
pub mod names;
pub mod peaks;
pub mod precision;
pub mod reference;
pub mod report;
pub mod scaling;
pub mod window;

use error::NoMatch;
pub use error::PerfError;
use fields::{ConfigFile, Field, Fields, Source, Stated};
use formats::{Format, NO_RANK, Problem, Scan};
use precision::Precision;
use rayon::prelude::*;
use referee_rules::untrusted::Links;
use reference::{RefMatch, Reference};
use scaling::{ScalingGroup, ScalingInput};
use serde::Serialize;
use std::path::{Path, PathBuf};
use window::{Series, Stat, Status, StatusKind, Window};

/// Exit code: every run complete.
pub const EXIT_OK: i32 = 0;
/// Exit code: a run failed its status (incomplete, NaN grad norm, no data).
pub const EXIT_FAIL: i32 = 1;

/// A config file beside the logs of a directory applies to them.
pub const DIR_CONFIGS: &[&str] = &["referee-perf.yaml", "referee-perf.yml", "referee-perf.json"];

/// The rules every report states.
pub const RULES: &[&str] = &[
    "window: --window when given (A..B excludes B, as `referee run`; A..=B includes it), else iterations 35–44 (the DGX Cloud recipes' window), else the last 10 iterations of a run whose final iteration is below 44; iteration numbers as the log prints them (NeMo counts from 0, Megatron from 1); MLLOG throughput-mode runs keep their logged window",
    "status: NaN grad norm when any line has a NaN gradient norm; else no data when no window iteration has a step time; else incomplete when a window iteration is missing or the final iteration (M of `iteration N/M`) was never printed; else complete. Exit 0 when every run is complete, 1 otherwise, 2 when the input cannot be read",
    "statistics: mean and sample standard deviation (n − 1) of the step time (Megatron's milliseconds as seconds) and of the model TFLOP/s/GPU the log prints, over the window",
    "derived: samples/s = GBS ÷ step time; tokens/s = sequence length × GBS ÷ step time; tokens/s/GPU = tokens/s ÷ GPUs; MFU = model TFLOP/s/GPU ÷ the GPU's dense peak at the run's precision (FP16 at the BF16 rate)",
    "model FLOPs: when the model is known (--model or the log naming a built-in architecture, or --model-config config.json), model TFLOP/s/GPU = FLOPs per token × tokens/s/GPU ÷ 10¹², FLOPs per token = 3 × 2 × (weights a token is multiplied by + L · c · s · heads · (d_qk + d_v)) (Narayanan et al. 2021; NeMo's formulas), c = 1 counting the whole attention matrix (Megatron-LM and NeMo, the default) or ½ its causal half (--attention-flops causal, NeMo AutoModel), 2 × instead of 3 × for LoRA; where the log also prints TFLOP/s/GPU the log's figure is the row's and a difference beyond 2 % is named",
    "multi-rank output: per iteration only the lowest-numbered rank that printed timing lines counts (unlabelled lines only when no labelled rank printed any); other ranks' lines and repeated iterations are counted and reported, never averaged in",
    "fields: flags, then --config (or a directory's referee-perf.yaml), then the log, then the log's file name (the recipes' experiment naming); GA derived as GBS ÷ (MBS × GPUs ÷ (TP × PP × CP)); a figure a missing field prevents is left out with the field named",
];

/// A resolved `referee perf` request.
#[derive(Debug, Clone, Default)]
pub struct PerfRequest {
    pub paths: Vec<PathBuf>,
    /// Fields from flags.
    pub flags: Stated,
    /// `--config`.
    pub config: Option<ConfigFile>,
    /// The window (inclusive) and where it came from.
    pub window: Option<(u64, u64, Source)>,
    pub against: Option<Reference>,
    /// `--model-config`: the architecture of every run (else the built-in
    /// record of the run's model name).
    pub model_config: Option<(flops::Arch, String)>,
    /// How the attention matrix is counted (`--attention-flops`).
    pub attention: flops::Attention,
    /// `--min-ratio`: every run must reach this share of its reference row
    /// (with `against`), else exit 1.
    pub min_ratio: Option<f64>,
    /// `--power`: the power logs (a node's file, or a folder of
    /// `node_*.txt`/`sw_*.txt`) of the one run read; otherwise each run's
    /// are looked for beside its log.
    pub power: Option<PathBuf>,
}

/// Model TFLOP/s per GPU and MFU from the model's FLOPs per token.
#[derive(Debug, Clone, Serialize)]
pub struct ModelFlops {
    /// The architecture's name.
    pub model: String,
    /// `built-in` or `--model-config FILE`.
    pub source: String,
    pub attention: flops::Attention,
    /// LoRA (2 × forward instead of 3 ×): the run's task is `lora`.
    pub lora: bool,
    pub seq_len: u64,
    /// Training FLOPs per token.
    pub flops_per_token: f64,
    /// FLOPs per token × tokens/s/GPU ÷ 10¹².
    pub tflops_per_gpu: Option<f64>,
    /// That ÷ the GPU's dense peak.
    pub mfu: Option<f64>,
    /// The model TFLOP/s/GPU the log states, when it does.
    pub log_tflops_per_gpu: Option<f64>,
    /// (log − model) ÷ model × 100.
    pub difference_pct: Option<f64>,
    /// |difference| > 2 %.
    pub disagrees: bool,
}

/// The largest difference between the log's TFLOP/s/GPU and the model's
/// that is not named, percent.
pub const FLOPS_TOLERANCE_PCT: f64 = 2.0;

/// One run's figures.
#[derive(Debug, Clone, Serialize)]
pub struct PerfRow {
    pub file: String,
    pub format: Format,
    /// The rank prefix whose lines counted (multi-rank output).
    pub rank: Option<String>,
    pub fields: Fields,
    pub window: Option<Window>,
    pub step_time_s: Option<Stat>,
    pub model_tflops_per_gpu: Option<Field<f64>>,
    /// Spread of the TFLOP/s/GPU over the window (when the log prints it).
    pub tflops_stat: Option<Stat>,
    pub samples_per_second: Option<f64>,
    pub tokens_per_second: Option<f64>,
    pub tokens_per_second_per_gpu: Option<f64>,
    pub mfu: Option<Field<f64>>,
    /// The dense peak MFU was computed against, TFLOP/s per GPU.
    pub peak_tflops: Option<f64>,
    /// From the model's FLOPs per token (when the model is known).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_flops: Option<ModelFlops>,
    pub status: Status,
    /// Figures left out, each with the field that is missing.
    pub missing: Vec<String>,
    pub notes: Vec<String>,
    pub problems: Vec<Problem>,
    /// Energy per sample and per token, when the run's power was measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub energy: Option<energy::PerfEnergy>,
    /// `--against`: the matched row, or why there is none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference: Option<Result<RefMatch, NoMatch>>,
    /// (iteration, step time s) of every iteration that counted (plots).
    #[serde(skip)]
    pub iterations: Vec<(u64, f64)>,
    /// Why the log gives no model TFLOP/s/GPU (for `missing`).
    #[serde(skip)]
    pub no_tflops: &'static str,
}

impl PerfRow {
    pub fn complete(&self) -> bool {
        self.status.kind == StatusKind::Complete
    }
}

/// Counts of statuses.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PerfSummary {
    pub runs: usize,
    pub complete: usize,
    pub incomplete: usize,
    pub nan_grad_norm: usize,
    pub no_data: usize,
}

/// What `referee perf` prints.
#[derive(Debug, Clone, Serialize)]
pub struct PerfReport {
    pub rows: Vec<PerfRow>,
    pub scaling: Vec<ScalingGroup>,
    /// `--against`'s table.
    pub against: Option<String>,
    /// Files of directories that hold no training-log lines.
    pub skipped: Vec<String>,
    /// Links and special files (FIFOs, devices) found under a directory:
    /// not followed, not read.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_read: Vec<String>,
    pub summary: PerfSummary,
    /// `--min-ratio`: the gate against the reference and the runs below it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gate: Option<Gate>,
    pub exit_code: i32,
    pub rules: Vec<&'static str>,
}

/// Files to read: explicit files always; under a directory, every file
/// (up to 6 levels) except the `referee-perf.*` configs and obvious
/// non-logs (JSON, YAML, profiles, archives). Each comes with the config
/// of the directory argument it was found under. A path typed may be a
/// link (the user chose it); under a directory, links are not followed
/// and neither they nor special files (FIFOs, devices) are read: they are
/// the second list.
#[allow(clippy::type_complexity)]
fn collect(
    paths: &[PathBuf],
) -> Result<(Vec<(PathBuf, bool, Option<ConfigFile>)>, Vec<PathBuf>), PerfError> {
    let mut out = Vec::new();
    let mut not_read = Vec::new();
    for p in paths {
        if !p.exists() {
            return Err(PerfError::NoSuchPath(p.clone()));
        }
        if !p.is_dir() {
            out.push((p.clone(), true, None));
            continue;
        }
        let mut cfg = None;
        for name in DIR_CONFIGS {
            let c = p.join(name);
            if std::fs::symlink_metadata(&c).is_ok() {
                cfg = Some(fields::read_config(&c, Links::Refuse)?);
                break;
            }
        }
        let mut files = Vec::new();
        walk(p, 0, &mut files, &mut not_read).map_err(|source| PerfError::Read {
            path: p.clone(),
            source,
        })?;
        files.sort();
        out.extend(files.into_iter().map(|f| (f, false, cfg.clone())));
    }
    not_read.sort();
    Ok((out, not_read))
}

fn walk(
    dir: &Path,
    depth: usize,
    out: &mut Vec<PathBuf>,
    not_read: &mut Vec<PathBuf>,
) -> std::io::Result<()> {
    const SKIP: &[&str] = &[
        "json", "yaml", "yml", "nsys-rep", "sqlite", "qdrep", "zst", "gz", "tar", "png", "svg",
        "html", "csv", "py", "sh", "sub",
    ];
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        // The entry's own type: a link to a directory (five links to `.`
        // would make one log thousands of runs) is not followed.
        let ft = e.file_type()?;
        let p = e.path();
        if ft.is_dir() {
            // Power logs are the energy of the run beside them, not runs.
            if depth < 6 && p.file_name().is_none_or(|n| n != "power") {
                walk(&p, depth + 1, out, not_read)?;
            }
        } else if p
            .extension()
            .and_then(|x| x.to_str())
            .is_none_or(|x| !SKIP.contains(&x.to_ascii_lowercase().as_str()))
        {
            if ft.is_file() {
                out.push(p);
            } else {
                not_read.push(p);
            }
        }
    }
    Ok(())
}

/// Run `referee perf`: `Err` when an input cannot be read (exit 2).
pub fn perf(req: &PerfRequest) -> Result<PerfReport, PerfError> {
    let (files, not_read) = collect(&req.paths)?;
    let analysed: Vec<Result<Option<PerfRow>, PerfError>> = files
        .par_iter()
        .map(|(p, explicit, dir_cfg)| analyze_file(p, *explicit, req, dir_cfg.as_ref()))
        .collect();
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    for ((p, _, _), r) in files.iter().zip(analysed) {
        match r? {
            Some(row) => rows.push(row),
            None => skipped.push(p.display().to_string()),
        }
    }
    if rows.is_empty() {
        return Err(PerfError::NoLogs {
            paths: req
                .paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    if req.power.is_some() && rows.len() > 1 {
        return Err(PerfError::PowerForManyRuns { runs: rows.len() });
    }
    for row in &mut rows {
        let folder = match &req.power {
            Some(p) => Some(p.clone()),
            None => energy::beside(Path::new(&row.file)),
        };
        if let Some(f) = folder {
            row.energy = Some(energy::energy(
                &f,
                row.samples_per_second,
                row.tokens_per_second,
            )?);
        }
    }
    if let Some(r) = &req.against {
        for row in &mut rows {
            row.reference = Some(match_reference(r, row));
        }
    }
    let mut report = finish(rows, skipped, req.against.as_ref().map(|r| r.name.clone()));
    report.not_read = not_read.iter().map(|p| p.display().to_string()).collect();
    if let Some(min) = req.min_ratio {
        let gate = Gate::of(&report.rows, min);
        if !gate.below.is_empty() {
            report.exit_code = EXIT_FAIL;
        }
        report.gate = Some(gate);
    }
    Ok(report)
}

/// `--min-ratio R`: each run's "% of reference" (tokens/s/GPU, else
/// TFLOP/s/GPU, as the table shows it) must be at least R × 100 %; a run
/// without a reference figure cannot show that and fails the gate too.
#[derive(Debug, Clone, Serialize)]
pub struct Gate {
    pub min_ratio: f64,
    /// Runs that reached it.
    pub passed: usize,
    /// Runs that did not, each with why.
    pub below: Vec<GateMiss>,
}

/// A run below the gate.
#[derive(Debug, Clone, Serialize)]
pub struct GateMiss {
    pub file: String,
    /// Its share of the reference (run ÷ reference), when known.
    pub ratio: Option<f64>,
    /// `0.91 of the reference (tokens/s/GPU …)` or why there is no figure.
    pub reason: String,
}

impl Gate {
    fn of(rows: &[PerfRow], min_ratio: f64) -> Gate {
        let mut gate = Gate {
            min_ratio,
            passed: 0,
            below: Vec::new(),
        };
        for r in rows {
            let miss = |ratio, reason| GateMiss {
                file: r.file.clone(),
                ratio,
                reason,
            };
            match &r.reference {
                Some(Ok(m)) => match m.pct() {
                    Some(p) if p / 100.0 >= min_ratio => gate.passed += 1,
                    Some(p) => gate.below.push(miss(
                        Some(p / 100.0),
                        format!(
                            "{:.4} of the reference row ({}), below {min_ratio}",
                            p / 100.0,
                            m.label
                        ),
                    )),
                    None => gate.below.push(miss(
                        None,
                        "no figure to compare: the run or the reference row lacks tokens/s/GPU and TFLOP/s/GPU".into(),
                    )),
                },
                Some(Err(e)) => gate.below.push(miss(None, format!("no reference row: {e}"))),
                None => gate.below.push(miss(None, "not compared (no --against)".into())),
            }
        }
        gate
    }
}

/// Summary, scaling and exit code of analysed rows.
pub fn finish(rows: Vec<PerfRow>, skipped: Vec<String>, against: Option<String>) -> PerfReport {
    let mut summary = PerfSummary {
        runs: rows.len(),
        ..Default::default()
    };
    for r in &rows {
        match r.status.kind {
            StatusKind::Complete => summary.complete += 1,
            StatusKind::Incomplete => summary.incomplete += 1,
            StatusKind::NanGradNorm => summary.nan_grad_norm += 1,
            StatusKind::NoData => summary.no_data += 1,
        }
    }
    let inputs: Vec<ScalingInput> = rows
        .iter()
        .filter(|r| r.complete())
        .filter_map(|r| {
            Some(ScalingInput {
                model: r.fields.model.as_ref()?.value.clone(),
                system: r
                    .fields
                    .system
                    .as_ref()
                    .map_or_else(|| "unknown".into(), |s| s.value.clone()),
                precision: r
                    .fields
                    .precision
                    .as_ref()
                    .map_or_else(|| "unknown".into(), |p| p.value.as_str().into()),
                gpus: r.fields.value("gpus")?,
                gbs: r.fields.value("gbs"),
                tokens_per_gpu: r.tokens_per_second_per_gpu,
                tflops_per_gpu: r.model_tflops_per_gpu.as_ref().map(|f| f.value),
            })
        })
        .collect();
    let rows_have_energy = rows.iter().any(|r| r.energy.is_some());
    let exit_code = if summary.complete == summary.runs {
        EXIT_OK
    } else {
        EXIT_FAIL
    };
    PerfReport {
        scaling: scaling::scaling(&inputs),
        rows,
        against,
        skipped,
        not_read: Vec::new(),
        summary,
        gate: None,
        exit_code,
        rules: {
            let mut r = RULES.to_vec();
            if rows_have_energy {
                r.push(energy::RULE);
            }
            r
        },
    }
}

fn match_reference(r: &Reference, row: &PerfRow) -> Result<RefMatch, NoMatch> {
    let mut m = reference::find(r, &row.fields)?;
    let pct = |run: Option<f64>, reference: Option<f64>| match (run, reference) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b * 100.0),
        _ => None,
    };
    m.pct_tokens_per_gpu = pct(row.tokens_per_second_per_gpu, m.row.tokens_per_s_per_gpu);
    m.pct_tflops_per_gpu = pct(
        row.model_tflops_per_gpu.as_ref().map(|f| f.value),
        m.row.model_tflops_per_gpu,
    );
    if row.fields.value("gbs") == m.row.gbs {
        m.pct_step_time = pct(m.row.step_time_s, row.step_time_s.map(|s| s.mean));
    }
    Ok(m)
}

/// The fields a file's directory, the request's config and flags state.
struct Layers<'a> {
    flags: &'a Stated,
    config: Option<&'a ConfigFile>,
    dir: Option<&'a ConfigFile>,
}

impl Layers<'_> {
    fn resolve(&self, log: &Stated, name: &Stated) -> Fields {
        let mut layers: Vec<(&Stated, Source)> = vec![(self.flags, Source::Flag)];
        if let Some(c) = self.config {
            layers.push((&c.stated, Source::Config));
        }
        if let Some(c) = self.dir {
            layers.push((&c.stated, Source::Config));
        }
        layers.push((log, Source::Log));
        layers.push((name, Source::FileName));
        fields::resolve(&layers)
    }
}

/// Analyse one file; `Ok(None)` for a file found under a directory that
/// holds no training-log lines.
pub fn analyze_file(
    path: &Path,
    explicit: bool,
    req: &PerfRequest,
    dir_cfg: Option<&ConfigFile>,
) -> Result<Option<PerfRow>, PerfError> {
    let links = if explicit {
        Links::Follow
    } else {
        Links::Refuse
    };
    let scan = formats::scan_file(path, links).map_err(|source| PerfError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let format = scan.format();
    if format == Format::Unknown && !explicit {
        return Ok(None);
    }
    let layers = Layers {
        flags: &req.flags,
        config: req.config.as_ref(),
        dir: dir_cfg,
    };
    let window = req.window.or_else(|| {
        req.config
            .as_ref()
            .or(dir_cfg)
            .and_then(|c| c.window.as_deref())
            .and_then(|w| window::parse_window(w).ok())
            .map(|(a, b)| (a, b, Source::Config))
    });
    let name = fields::from_file_name(path);
    let mut row = match format {
        Format::Mllog => mllog_row(path, &scan, &layers, &name, window.is_some()),
        Format::Torchtitan => titan_row(path, &scan, &layers, &name, window),
        Format::HfTrainer => hf_row(path, &scan, &layers, &name, window.is_some()),
        _ => framework_row(path, &scan, format, &layers, &name, window),
    };
    let arch = req
        .model_config
        .as_ref()
        .map(|(a, f)| (a.clone(), format!("--model-config {f}")))
        .or_else(|| {
            req.config
                .as_ref()
                .or(dir_cfg)
                .and_then(|c| c.model_config.as_ref())
                .map(|(a, f)| (a.clone(), format!("model_config {f}")))
        });
    derive_rates(&mut row, req, arch);
    let file = path.display().to_string();
    for p in &mut row.problems {
        p.file = file.clone();
    }
    Ok(Some(row))
}

/// What a Megatron argument dump, the iteration lines and any MLLOG lines
/// state.
fn log_stated(scan: &Scan, chosen: &[&formats::Sample], mllog: &formats::MllogFacts) -> Stated {
    let mut s = Stated::default();
    let int = |name: &str| {
        scan.arg(name)
            .and_then(|(v, _)| v.trim().parse::<u64>().ok())
    };
    for (arg, field) in [
        ("tensor_model_parallel_size", "tp"),
        ("pipeline_model_parallel_size", "pp"),
        ("context_parallel_size", "cp"),
        ("virtual_pipeline_model_parallel_size", "vp"),
        ("expert_model_parallel_size", "ep"),
        ("global_batch_size", "gbs"),
        ("micro_batch_size", "mbs"),
        ("seq_length", "seq_len"),
        ("world_size", "gpus"),
    ] {
        if let Some(v) = int(arg) {
            s.set_count(field, v);
        }
    }
    let flag = |name: &str| scan.arg(name).map(|(v, _)| v.trim());
    let fsdp: Vec<&str> = ["use_torch_fsdp2", "use_custom_fsdp", "use_megatron_fsdp"]
        .iter()
        .filter_map(|n| flag(n))
        .collect();
    if !fsdp.is_empty() {
        s.set_count("fsdp", u64::from(fsdp.contains(&"True")));
    }
    let on =
        |v: Option<&str>| v.is_some_and(|v| !matches!(v, "None" | "False" | "false" | "0" | ""));
    if on(flag("fp8")) {
        s.precision = Some(Precision::Fp8);
    } else if flag("bf16") == Some("True") {
        s.precision = Some(Precision::Bf16);
    } else if flag("fp16") == Some("True") {
        s.precision = Some(Precision::Fp16);
    } else if flag("bf16").is_some() && flag("fp16").is_some() {
        s.precision = Some(Precision::Fp32);
    }
    if s.count("gbs").is_none()
        && let Some(g) = chosen.iter().find_map(|x| x.gbs)
    {
        s.set_count("gbs", g);
    }
    if s.model.is_none() {
        s.model = mllog.benchmark.as_ref().map(|b| b.0.clone());
    }
    s.system = mllog.platform.as_ref().map(|b| b.0.clone());
    if s.count("gbs").is_none()
        && let Some((g, _)) = mllog.gbs
    {
        s.set_count("gbs", g);
    }
    if let Some((l, _)) = mllog.seq_len
        && s.count("seq_len").is_none()
    {
        s.set_count("seq_len", l);
    }
    if s.precision.is_none() {
        s.precision = mllog
            .precision
            .as_ref()
            .and_then(|p| Precision::parse(&p.0));
    }
    s
}

/// The lowest labelled rank that printed timing lines (unlabelled lines
/// only when none did).
fn chosen_rank(scan: &Scan) -> Option<u64> {
    let labelled = scan
        .samples
        .iter()
        .map(|s| s.rank)
        .filter(|r| *r != NO_RANK)
        .min();
    labelled.or_else(|| scan.samples.first().map(|s| s.rank))
}

/// The series of the counted rank, and notes on what was left out.
fn series_of(scan: &Scan, rank: Option<u64>) -> (Series, Vec<String>, Vec<&formats::Sample>) {
    let mut series = Series::default();
    let mut notes = Vec::new();
    let chosen: Vec<&formats::Sample> = scan
        .samples
        .iter()
        .filter(|s| Some(s.rank) == rank)
        .collect();
    let others = scan.samples.len() - chosen.len();
    if others > 0 {
        let ranks: std::collections::BTreeSet<u64> = scan
            .samples
            .iter()
            .map(|s| s.rank)
            .filter(|r| Some(*r) != rank)
            .collect();
        notes.push(format!(
            "{others} timing line{} of {} other rank{} not counted (one rank per iteration)",
            if others == 1 { "" } else { "s" },
            ranks.len(),
            if ranks.len() == 1 { "" } else { "s" }
        ));
    }
    let (mut repeated, mut differing) = (0usize, Vec::new());
    for s in &chosen {
        series.last = Some(series.last.map_or(s.last, |l| l.max(s.last)));
        let p = series.points.entry(s.iteration).or_insert(window::Point {
            step_s: None,
            tflops: None,
            line: s.line,
        });
        match (p.step_s, s.step_s) {
            (None, v) => p.step_s = v,
            (Some(a), Some(b)) => {
                repeated += 1;
                if a != b && differing.len() < 5 {
                    differing.push(s.iteration);
                }
            }
            _ => {}
        }
        if p.tflops.is_none() {
            p.tflops = s.tflops;
        }
    }
    if repeated > 0 {
        let mut n = format!(
            "{repeated} repeated iteration line{} of the counted rank ignored (the first counts)",
            if repeated == 1 { "" } else { "s" }
        );
        if !differing.is_empty() {
            n.push_str(&format!(
                "; iterations {} were printed again with other values (a restarted job?)",
                differing
                    .iter()
                    .map(|i| i.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        notes.push(n);
    }
    if scan.unmarked > 0 {
        notes.push(format!(
            "{} timing value{} on lines without `iteration N/M` ignored",
            scan.unmarked,
            if scan.unmarked == 1 { "" } else { "s" }
        ));
    }
    (series, notes, chosen)
}

fn framework_row(
    path: &Path,
    scan: &Scan,
    format: Format,
    layers: &Layers,
    name: &Stated,
    user_window: Option<(u64, u64, Source)>,
) -> PerfRow {
    let rank = chosen_rank(scan);
    let (series, mut notes, chosen) = series_of(scan, rank);
    let mllog = formats::mllog_facts(&scan.mllog);
    let fields = layers.resolve(&log_stated(scan, &chosen, &mllog), name);
    let window = match user_window {
        Some((a, b, src)) => Some(Window {
            first: a,
            last: b,
            rule: format!("the {} --window", src.as_str())
                .replace("the config --window", "the config's window"),
        }),
        None => window::default_window(series.last, series.points.keys().next().copied()),
    };
    let eval = window::evaluate(&series, window.as_ref(), scan.nan_grad.as_ref());
    if eval.step.is_some()
        && eval
            .tflops
            .is_some_and(|t| t.n < eval.step.map_or(0, |s| s.n))
    {
        notes.push(
            "some window iterations print no TFLOP/s/GPU: its mean is over those that do".into(),
        );
    }
    let mut row = empty_row(path, format, fields, eval.status);
    row.rank = rank.and_then(|r| scan.prefixes.get(&r).cloned());
    row.window = window;
    row.step_time_s = eval.step;
    row.tflops_stat = eval.tflops;
    row.model_tflops_per_gpu = eval.tflops.map(|t| Field::new(t.mean, Source::Log));
    row.iterations = series
        .points
        .iter()
        .filter_map(|(i, p)| p.step_s.map(|s| (*i, s)))
        .collect();
    row.notes = notes;
    row.problems = scan.problems.clone();
    row.problems.extend(mllog.problems);
    row.no_tflops = "the log prints no TFLOP/s per GPU";
    row
}

fn empty_row(path: &Path, format: Format, fields: Fields, status: Status) -> PerfRow {
    PerfRow {
        file: path.display().to_string(),
        format,
        rank: None,
        fields,
        window: None,
        step_time_s: None,
        model_tflops_per_gpu: None,
        tflops_stat: None,
        samples_per_second: None,
        tokens_per_second: None,
        tokens_per_second_per_gpu: None,
        mfu: None,
        peak_tflops: None,
        model_flops: None,
        status,
        missing: Vec::new(),
        notes: Vec::new(),
        problems: Vec::new(),
        energy: None,
        reference: None,
        iterations: Vec::new(),
        no_tflops: "the log prints no TFLOP/s per GPU",
    }
}

/// samples/s, tokens/s, tokens/s/GPU, model TFLOP/s/GPU (from the model's
/// FLOPs when the log prints none) and MFU from the step time, the fields
/// and the architecture; what cannot be computed is named in `missing`.
fn derive_rates(row: &mut PerfRow, req: &PerfRequest, arch: Option<(flops::Arch, String)>) {
    let no_tflops = row.no_tflops;
    let mut missing = Vec::new();
    derive_throughput(row, &mut missing);
    let f = &row.fields;
    let seq = f.value("seq_len");
    let arch = arch.or_else(|| {
        f.model
            .as_ref()
            .and_then(|m| flops::lookup(&m.value))
            .map(|a| (a, "built-in".to_string()))
    });
    let peak = match (&f.gpu, &f.precision) {
        (Some(g), Some(p)) => peaks::peak_tflops(&g.value, p.value),
        _ => None,
    };
    row.model_flops = model_flops(row, req, arch.as_ref(), seq, peak, &mut missing);
    derive_mfu(row, arch.is_some(), no_tflops, &mut missing);
    row.missing.extend(missing);
}

/// Samples/s, tokens/s and tokens/s/GPU from the step time and the stated
/// batch, sequence length and GPUs, where the log gave none; what cannot
/// be derived goes to `missing`.
fn derive_throughput(row: &mut PerfRow, missing: &mut Vec<String>) {
    let f = &row.fields;
    let step = row.step_time_s.map(|s| s.mean);
    let (gbs, seq, gpus) = (f.value("gbs"), f.value("seq_len"), f.value("gpus"));
    if let Some(t) = step {
        if row.samples_per_second.is_none() {
            match gbs {
                Some(g) => row.samples_per_second = Some(g as f64 / t),
                None => missing.push(
                    "samples/s and tokens/s: the global batch size is not stated (--gbs)".into(),
                ),
            }
        }
        if row.tokens_per_second.is_none()
            && let Some(g) = gbs
        {
            match seq {
                Some(s) => row.tokens_per_second = Some(s as f64 * g as f64 / t),
                None => {
                    missing.push("tokens/s: the sequence length is not stated (--seq-len)".into())
                }
            }
        }
    }
    if row.tokens_per_second_per_gpu.is_none()
        && let Some(tps) = row.tokens_per_second
    {
        match gpus {
            Some(g) if g > 0 => row.tokens_per_second_per_gpu = Some(tps / g as f64),
            _ => missing.push("tokens/s/GPU: the GPU count is not stated (--gpus)".into()),
        }
    }
}

/// What the model's FLOPs give (`arch`: its architecture and where it
/// came from; `seq`: the sequence length; `peak`: the GPU's dense peak):
/// model TFLOP/s/GPU where the log gave none, and a note where the log's
/// figure disagrees.
fn model_flops(
    row: &mut PerfRow,
    req: &PerfRequest,
    arch: Option<&(flops::Arch, String)>,
    seq: Option<u64>,
    peak: Option<f64>,
    missing: &mut Vec<String>,
) -> Option<ModelFlops> {
    let f = &row.fields;
    let mut from_model = None;
    match (arch, seq) {
        (Some((a, source)), Some(seq)) => {
            let lora = f.task.as_ref().is_some_and(|t| t.value == "lora");
            let fpt = a.flops_per_token(seq, req.attention, lora).total;
            let tflops = row.tokens_per_second_per_gpu.map(|t| fpt * t / 1e12);
            let log = row.model_tflops_per_gpu.as_ref().map(|t| t.value);
            let difference_pct = match (log, tflops) {
                (Some(l), Some(m)) if m > 0.0 => Some((l - m) / m * 100.0),
                _ => None,
            };
            let disagrees = difference_pct.is_some_and(|d| d.abs() > FLOPS_TOLERANCE_PCT);
            if disagrees && let (Some(l), Some(m), Some(d)) = (log, tflops, difference_pct) {
                row.notes.push(format!(
                    "the log's model TFLOP/s/GPU {} differs from {}'s FLOPs ({} TFLOP/s/GPU, {} attention) by {d:+.1} %, beyond {FLOPS_TOLERANCE_PCT} %: the log counts other FLOPs (attention convention, embedding, activation recomputation) or states other fields",
                    crate::figures::fig(l),
                    a.name,
                    crate::figures::fig(m),
                    req.attention.as_str()
                ));
            }
            if tflops.is_none() {
                missing.push(format!(
                    "model TFLOP/s/GPU from {}'s FLOPs: tokens/s/GPU is not known",
                    a.name
                ));
            }
            if row.model_tflops_per_gpu.is_none()
                && let Some(t) = tflops
            {
                row.model_tflops_per_gpu = Some(Field {
                    value: t,
                    source: Source::Derived,
                    note: Some(format!(
                        "{:.1} GFLOP/token of {} × tokens/s/GPU",
                        fpt / 1e9,
                        a.name
                    )),
                });
            }
            from_model = Some(ModelFlops {
                model: a.name.clone(),
                source: source.clone(),
                attention: req.attention,
                lora,
                seq_len: seq,
                flops_per_token: fpt,
                tflops_per_gpu: tflops,
                mfu: tflops.zip(peak).map(|(t, p)| t / p),
                log_tflops_per_gpu: log,
                difference_pct,
                disagrees,
            });
        }
        (Some((a, _)), None) => missing.push(format!(
            "model TFLOP/s/GPU from {}'s FLOPs: the sequence length is not stated (--seq-len)",
            a.name
        )),
        (None, _) => {}
    }
    from_model
}

/// MFU from the model TFLOP/s/GPU and the GPU's peak at the precision,
/// where the log gave none; what is missing goes to `missing`.
fn derive_mfu(row: &mut PerfRow, has_arch: bool, no_tflops: &str, missing: &mut Vec<String>) {
    let f = &row.fields;
    if row.mfu.is_none() {
        match (&row.model_tflops_per_gpu, &f.gpu, &f.precision) {
            (None, _, _) => missing.push(format!(
                "model TFLOP/s/GPU and MFU: {no_tflops}{}",
                match (has_arch, &f.model) {
                    (true, _) => String::new(),
                    (false, Some(m)) => format!(
                        " and the model `{}` has no built-in architecture (--model-config config.json)",
                        m.value
                    ),
                    (false, None) => " and no model is stated (--model, --model-config)".into(),
                }
            )),
            (Some(_), None, _) => missing.push("MFU: the GPU is not stated (--gpu)".into()),
            (Some(_), Some(_), None) => {
                missing.push("MFU: the precision is not stated (--precision)".into())
            }
            (Some(t), Some(g), Some(p)) => match peaks::peak_tflops(&g.value, p.value) {
                Some(peak) => {
                    row.peak_tflops = Some(peak);
                    row.mfu = Some(Field {
                        value: t.value / peak,
                        source: Source::Derived,
                        note: Some(format!(
                            "{:.1} ÷ {peak} ({} {})",
                            t.value,
                            g.value,
                            p.value.as_str()
                        )),
                    });
                }
                None => missing.push(format!(
                    "MFU: no dense {} peak of `{}` in the peak table",
                    p.value.as_str(),
                    g.value
                )),
            },
        }
    }
}

fn mllog_row(
    path: &Path,
    scan: &Scan,
    layers: &Layers,
    name: &Stated,
    window_given: bool,
) -> PerfRow {
    let m = formats::mllog_facts(&scan.mllog);
    let fields = layers.resolve(&log_stated(scan, &[], &m), name);
    let mut notes = Vec::new();
    if window_given {
        notes.push(
            "--window does not apply to MLLOG: its throughput events carry their own window"
                .to_string(),
        );
    }
    let stopped = m.run_stop.is_some();
    let incomplete = |what: &str| Status {
        kind: StatusKind::Incomplete,
        detail: format!("{what}: the log has no run_stop (it ends early)"),
    };
    let mut row;
    if let Some(w) = m.window {
        let status = if stopped {
            Status {
                kind: StatusKind::Complete,
                detail: "the throughput-mode window and run_stop logged".into(),
            }
        } else {
            incomplete("a throughput window")
        };
        row = empty_row(path, Format::Mllog, fields, status);
        row.window = Some(Window {
            first: w.start,
            last: w.end.saturating_sub(1),
            rule: format!(
                "the logged window (referee run --window {}..{})",
                w.start, w.end
            ),
        });
        row.step_time_s = w.step_seconds.map(|s| Stat {
            mean: s,
            sd: None,
            n: w.end.saturating_sub(w.start) as usize,
        });
        row.samples_per_second = Some(w.samples_per_second);
        row.tokens_per_second = w.tokens_per_second;
        if let Some(mfu) = w.mfu {
            row.mfu = Some(Field::new(mfu, Source::Log));
        }
        if let (Some(a), Some(g)) = (w.achieved_flops, row.fields.value("gpus")) {
            row.model_tflops_per_gpu = Some(Field {
                value: a / 1e12 / g as f64,
                source: Source::Derived,
                note: Some("achieved_flops ÷ 10¹² ÷ GPUs".into()),
            });
        }
    } else if !m.blocks.is_empty() || !m.tracked.is_empty() {
        let (sps, per): (f64, Vec<f64>) = if !m.blocks.is_empty() {
            block_rate(&m.blocks)
        } else {
            let v: Vec<f64> = m.tracked.iter().map(|t| t.1).collect();
            (v.iter().sum::<f64>() / v.len() as f64, v)
        };
        let status = if stopped {
            Status {
                kind: StatusKind::Complete,
                detail: if m.blocks.is_empty() {
                    "every tracked_stats throughput; run_stop logged".into()
                } else {
                    "throughput of every logged block; run_stop logged".into()
                },
            }
        } else {
            incomplete("throughput blocks")
        };
        row = empty_row(path, Format::Mllog, fields, status);
        row.window = Some(Window {
            first: 1,
            last: per.len() as u64,
            rule: if m.blocks.is_empty() {
                "every tracked_stats throughput (mean)".into()
            } else {
                "every logged block (samples ÷ seconds)".into()
            },
        });
        row.samples_per_second = Some(sps);
        if let Some(g) = row.fields.value("gbs") {
            let steps: Vec<f64> = per.iter().map(|r| g as f64 / r).collect();
            row.step_time_s = window::mean_sd(&steps).map(|s| Stat {
                mean: g as f64 / sps,
                ..s
            });
            row.iterations = steps
                .iter()
                .enumerate()
                .map(|(i, s)| (i as u64 + 1, *s))
                .collect();
        }
    } else {
        row = empty_row(
            path,
            Format::Mllog,
            fields,
            Status {
                kind: StatusKind::NoData,
                detail: "no throughput event (throughput or tracked_stats) in the MLLOG lines"
                    .into(),
            },
        );
    }
    row.notes = notes;
    row.problems = m.problems;
    row.no_tflops = if m.window.is_some_and(|w| w.achieved_flops.is_some()) {
        "the GPU count is not stated (--gpus), so achieved_flops cannot be divided per GPU"
    } else {
        "the log states no achieved FLOP/s"
    };
    row
}

/// A torchtitan log: per logged step the tokens/s per GPU, TFLOP/s per GPU
/// and MFU it prints (each an average since the previous logged step). The
/// window: `--window` (steps as printed), else every logged step but the
/// first (which includes start-up and compilation). torchtitan prints no
/// total, so the last step printed is the run's end.
fn titan_row(
    path: &Path,
    scan: &Scan,
    layers: &Layers,
    name: &Stated,
    user_window: Option<(u64, u64, Source)>,
) -> PerfRow {
    let rank = scan
        .titan
        .iter()
        .map(|t| t.rank)
        .filter(|r| *r != NO_RANK)
        .min()
        .or_else(|| scan.titan.first().map(|t| t.rank));
    let mut steps: std::collections::BTreeMap<u64, &formats::TitanStep> = Default::default();
    let mut notes = Vec::new();
    let others = scan.titan.iter().filter(|t| Some(t.rank) != rank).count();
    if others > 0 {
        notes.push(format!(
            "{others} metrics line{} of other ranks not counted (one rank per step)",
            if others == 1 { "" } else { "s" }
        ));
    }
    for t in scan.titan.iter().filter(|t| Some(t.rank) == rank) {
        steps.entry(t.step).or_insert(t);
    }
    let fields = layers.resolve(&Stated::default(), name);
    let window = match user_window {
        Some((a, b, src)) => Window {
            first: a,
            last: b,
            rule: format!("the {} --window", src.as_str()),
        },
        None => {
            let first = steps.keys().nth(usize::from(steps.len() > 1)).copied();
            Window {
                first: first.unwrap_or(0),
                last: steps.keys().last().copied().unwrap_or(0),
                rule: "every logged step but the first (start-up and compilation)".into(),
            }
        }
    };
    let inside: Vec<&formats::TitanStep> = steps
        .range(window.first..=window.last)
        .map(|(_, t)| *t)
        .collect();
    let tps: Vec<f64> = inside.iter().filter_map(|t| t.tps).collect();
    let tflops: Vec<f64> = inside.iter().filter_map(|t| t.tflops).collect();
    let mfu: Vec<f64> = inside.iter().filter_map(|t| t.mfu).collect();
    let status = if let Some(n) = &scan.nan_grad {
        Status {
            kind: StatusKind::NanGradNorm,
            detail: format!("a NaN gradient norm at line {}", n.line),
        }
    } else if tps.is_empty() {
        Status {
            kind: StatusKind::NoData,
            detail: "no window step prints tps".into(),
        }
    } else {
        Status {
            kind: StatusKind::Complete,
            detail: format!(
                "{} logged step{} in the window (torchtitan prints no total: the last step printed ends the run)",
                tps.len(),
                if tps.len() == 1 { "" } else { "s" }
            ),
        }
    };
    let mut row = empty_row(path, Format::Torchtitan, fields, status);
    row.rank = rank.and_then(|r| scan.prefixes.get(&r).cloned());
    row.window = Some(window);
    let mean = |v: &[f64]| window::mean_sd(v);
    if let Some(t) = mean(&tps) {
        row.tokens_per_second_per_gpu = Some(t.mean);
        if let Some(g) = row.fields.value("gpus") {
            row.tokens_per_second = Some(t.mean * g as f64);
        }
        if let (Some(g), Some(b), Some(s)) = (
            row.fields.value("gpus"),
            row.fields.value("gbs"),
            row.fields.value("seq_len"),
        ) {
            row.step_time_s = Some(Stat {
                mean: (b * s) as f64 / (t.mean * g as f64),
                sd: None,
                n: t.n,
            });
        }
    }
    if let Some(t) = mean(&tflops) {
        row.tflops_stat = Some(t);
        row.model_tflops_per_gpu = Some(Field::new(t.mean, Source::Log));
    }
    if let Some(m) = mean(&mfu) {
        row.mfu = Some(Field::new(m.mean, Source::Log));
    }
    row.notes = notes;
    row.problems = scan.problems.clone();
    row
}

/// A Hugging Face Trainer log: the final summary's samples/s (all
/// processes) and steps/s over the whole run — start-up, evaluation and
/// saving included, as `train_runtime` is.
fn hf_row(path: &Path, scan: &Scan, layers: &Layers, name: &Stated, window_given: bool) -> PerfRow {
    let fields = layers.resolve(&Stated::default(), name);
    let status = if let Some(n) = &scan.nan_grad {
        Status {
            kind: StatusKind::NanGradNorm,
            detail: format!("a NaN grad_norm at line {}", n.line),
        }
    } else if scan.hf.summary.is_some() {
        Status {
            kind: StatusKind::Complete,
            detail: "the train_runtime summary printed".into(),
        }
    } else {
        Status {
            kind: StatusKind::Incomplete,
            detail: format!(
                "{} step dict{} but no train_runtime summary (the run did not finish)",
                scan.hf.steps,
                if scan.hf.steps == 1 { "" } else { "s" }
            ),
        }
    };
    let mut row = empty_row(path, Format::HfTrainer, fields, status);
    if let Some((runtime, sps, steps, _)) = scan.hf.summary {
        let n = steps.map_or(0, |s| (s * runtime).round() as u64);
        row.window = Some(Window {
            first: 1,
            last: n,
            rule: "the whole run (train_runtime: start-up, evaluation and saving included)".into(),
        });
        row.samples_per_second = Some(sps);
        if let Some(s) = row.fields.value("seq_len") {
            row.tokens_per_second = Some(sps * s as f64);
        }
        if let Some(st) = steps {
            row.step_time_s = Some(Stat {
                mean: 1.0 / st,
                sd: None,
                n: n as usize,
            });
        }
    }
    if window_given {
        row.notes.push(
            "--window does not apply to a Hugging Face Trainer log: it prints one summary of the whole run"
                .into(),
        );
    }
    if scan.hf.steps > 0 {
        row.notes.push(format!(
            "{} per-step dict{} (they carry no timing)",
            scan.hf.steps,
            if scan.hf.steps == 1 { "" } else { "s" }
        ));
    }
    row.problems = scan.problems.clone();
    row
}

/// Samples ÷ seconds over blocks (each block's samples since the previous
/// block at its rate), and each block's rate.
fn block_rate(blocks: &[(f64, f64, usize)]) -> (f64, Vec<f64>) {
    let (rate, counted) = weighted_block_rate(blocks.iter().map(|b| (b.0, b.1)));
    (
        rate.unwrap_or(0.0),
        counted.into_iter().map(|i| blocks[i].1).collect(),
    )
}

/// The rate of a run logged in blocks, each as (`samples_count` so far,
/// samples/s): the samples since the previous block at the block's rate,
/// total samples ÷ total seconds (`None` without a second); and the indices
/// of the blocks that count (new samples at a positive rate).
pub fn weighted_block_rate(
    blocks: impl IntoIterator<Item = (f64, f64)>,
) -> (Option<f64>, Vec<usize>) {
    let (mut samples, mut seconds, mut prev) = (0.0, 0.0, 0.0);
    let mut counted = Vec::new();
    for (i, (sc, sps)) in blocks.into_iter().enumerate() {
        let n = sc - prev;
        prev = sc;
        if n <= 0.0 || sps <= 0.0 {
            continue;
        }
        samples += n;
        seconds += n / sps;
        counted.push(i);
    }
    ((seconds > 0.0).then(|| samples / seconds), counted)
}

/// Analyse the NeMo/Megatron logs among `paths` (files, or directories
/// searched as `referee perf` searches them) with the fields `stated`
/// (and each directory's `referee-perf.yaml`): what `referee compare`
/// reads from a side that holds no MLLOG results.
pub fn framework_runs(paths: &[PathBuf]) -> Result<Vec<PerfRow>, PerfError> {
    let req = PerfRequest {
        paths: paths.to_vec(),
        ..Default::default()
    };
    let (files, _) = collect(paths)?;
    let rows: Vec<Result<Option<PerfRow>, PerfError>> = files
        .par_iter()
        .map(|(p, explicit, cfg)| analyze_file(p, *explicit, &req, cfg.as_ref()))
        .collect();
    let mut out = Vec::new();
    for r in rows {
        if let Some(row) = r?
            && matches!(
                row.format,
                Format::Nemo
                    | Format::Megatron
                    | Format::Lightning
                    | Format::Torchtitan
                    | Format::HfTrainer
            )
        {
            out.push(row);
        }
    }
    Ok(out)
}
