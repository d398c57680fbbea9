//! `referee perf LOG_OR_DIR...`: throughput, TFLOP/s per GPU and MFU from
//! NeMo, Megatron(-Bridge), Lightning progress-bar, torchtitan, Hugging
//! Face Trainer and MLLOG logs — from the model's FLOPs per token when the
//! model is known — with the DGX Cloud recipes' window rule, against
//! published reference numbers. The flags resolve
//! into one [`PerfRequest`]; the work is `referee_submission::perf::perf`;
//! this file renders the report and decides the exit code (0 every run
//! complete, 1 a run incomplete / NaN grad norm / without data or below
//! `--min-ratio`, 2 bad flags or unreadable input).

use super::common::write_page;
use super::{EXIT_USAGE, init_threads, usage_error};
use clap::Args;
use referee_rules::report::{Detail, Format, render};
use referee_submission::perf::fields::{self, Source, Stated};
use referee_submission::perf::precision::Precision;
use referee_submission::perf::{self, PerfRequest, flops, html, reference, report, window};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct PerfArgs {
    /// Log files (NeMo, Megatron-LM / Megatron-Bridge, NeMo 1 / Lightning
    /// progress bars, torchtitan, Hugging Face Trainer, MLLOG; Slurm output
    /// of many ranks is fine) or directories of them.
    #[arg(required = true, value_name = "LOG_OR_DIR")]
    pub paths: Vec<PathBuf>,
    /// Iterations averaged: A..B (B excluded, as `referee run --window`) or
    /// A..=B (inclusive). Default: 35..=44 (the DGX Cloud recipes), the last
    /// 10 iterations of a shorter run.
    #[arg(long, value_name = "A..B")]
    pub window: Option<String>,
    /// The GPU (for MFU's peak): H100, B200, GB200, `NVIDIA H100 80GB HBM3`…
    #[arg(long, value_name = "NAME")]
    pub gpu: Option<String>,
    /// Number of GPUs of the run.
    #[arg(long, value_name = "N")]
    pub gpus: Option<u64>,
    /// Global batch size (sequences per step).
    #[arg(long, value_name = "N")]
    pub gbs: Option<u64>,
    /// Micro batch size.
    #[arg(long, value_name = "N")]
    pub mbs: Option<u64>,
    /// Sequence length (tokens per sequence).
    #[arg(long, value_name = "N")]
    pub seq_len: Option<u64>,
    /// Tensor parallel size.
    #[arg(long, value_name = "N")]
    pub tp: Option<u64>,
    /// Pipeline parallel size.
    #[arg(long, value_name = "N")]
    pub pp: Option<u64>,
    /// Context parallel size.
    #[arg(long, value_name = "N")]
    pub cp: Option<u64>,
    /// Virtual pipeline stages.
    #[arg(long, value_name = "N")]
    pub vp: Option<u64>,
    /// Expert parallel size.
    #[arg(long, value_name = "N")]
    pub ep: Option<u64>,
    /// FSDP (0 off, 1 on, or the shard size).
    #[arg(long, value_name = "N")]
    pub fsdp: Option<u64>,
    /// Gradient accumulation steps.
    #[arg(long, value_name = "N")]
    pub ga: Option<u64>,
    /// Model name (as the reference table spells it, any case or
    /// separators); a name of the built-in architectures (llama3-70b,
    /// mixtral-8x7b, deepseek-v3, …) also gives model TFLOP/s/GPU and MFU
    /// from the model's FLOPs per token.
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// A Hugging Face `config.json` of the model (any decoder): its FLOPs
    /// per token give model TFLOP/s/GPU and MFU.
    #[arg(long, value_name = "FILE")]
    pub model_config: Option<PathBuf>,
    /// How the model FLOPs count attention: `full` (the whole score
    /// matrix: Megatron-LM, NeMo; default) or `causal` (its causal half:
    /// NeMo AutoModel).
    #[arg(long, value_name = "full|causal")]
    pub attention_flops: Option<String>,
    /// System name (DGX-H100, DGX-B200, your cluster's name).
    #[arg(long, value_name = "NAME")]
    pub system: Option<String>,
    /// Precision: bf16, fp8, fp16, fp32, nvfp4.
    #[arg(long, value_name = "P")]
    pub precision: Option<String>,
    /// Task: pretrain, sft or lora (for the reference match).
    #[arg(long, value_name = "TASK")]
    pub task: Option<String>,
    /// YAML or JSON file stating any of these fields (and `window`).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Add "% of reference": `published` (the rows shipped with referee:
    /// NeMo 25.04 and NeMo AutoModel) or a TSV file with the same columns.
    #[arg(long, value_name = "REFERENCE")]
    pub against: Option<String>,
    /// Exit 1 unless every run reaches this share of its reference row
    /// (`--against`'s "% of ref" ÷ 100; e.g. 0.95), naming the runs below.
    #[arg(long, value_name = "R", requires = "against")]
    pub min_ratio: Option<f64>,
    /// Power logs of the run (one node's MLPerf power log, or a folder of
    /// `node_*.txt`/`sw_*.txt`): energy per sample and per token. Without
    /// it, each run's are looked for in `power/<log stem>/` beside its log.
    #[arg(long, value_name = "FILE_OR_DIR")]
    pub power: Option<PathBuf>,
    /// The report as one JSON object.
    #[arg(long, group = "format")]
    pub json: bool,
    /// One CSV line per run.
    #[arg(long, group = "format")]
    pub csv: bool,
    /// The report in Markdown.
    #[arg(long, group = "format")]
    pub markdown: bool,
    /// Also write a self-contained HTML page with plots.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    #[arg(short = 'j', long, value_name = "N")]
    pub threads: Option<usize>,
}

impl PerfArgs {
    /// The request these flags make (errors are usage errors).
    pub fn request(&self) -> Result<PerfRequest, String> {
        let mut flags = Stated {
            model: self.model.clone(),
            system: self.system.clone(),
            gpu: self.gpu.clone(),
            task: self.task.clone(),
            ..Default::default()
        };
        if let Some(p) = &self.precision {
            flags.precision = Some(Precision::parse(p).ok_or_else(|| {
                format!("--precision {p}: expected bf16, fp8, fp16, fp32 or nvfp4")
            })?);
        }
        for (name, v) in [
            ("gpus", self.gpus),
            ("gbs", self.gbs),
            ("mbs", self.mbs),
            ("seq_len", self.seq_len),
            ("tp", self.tp),
            ("pp", self.pp),
            ("cp", self.cp),
            ("vp", self.vp),
            ("ep", self.ep),
            ("fsdp", self.fsdp),
            ("ga", self.ga),
        ] {
            if let Some(v) = v {
                if v == 0 && !matches!(name, "fsdp") {
                    return Err(format!("--{}: must be at least 1", name.replace('_', "-")));
                }
                flags.set_count(name, v);
            }
        }
        let config = self
            .config
            .as_deref()
            .map(|c| fields::read_config(c, referee_rules::untrusted::Links::Follow))
            .transpose()
            .map_err(|e| e.to_string())?;
        let window = match &self.window {
            Some(w) => Some(
                window::parse_window(w)
                    .map(|(a, b)| (a, b, Source::Flag))
                    .map_err(|e| e.to_string())?,
            ),
            None => match config.as_ref().and_then(|c| c.window.as_deref()) {
                Some(w) => Some(
                    window::parse_window(w)
                        .map(|(a, b)| (a, b, Source::Config))
                        .map_err(|e| format!("--config: {e}"))?,
                ),
                None => None,
            },
        };
        let against = self
            .against
            .as_deref()
            .map(reference::load)
            .transpose()
            .map_err(|e| e.to_string())?;
        let model_config = match &self.model_config {
            Some(p) => Some((
                flops::read_model_config(p).map_err(|e| e.to_string())?,
                p.display().to_string(),
            )),
            None => None,
        };
        let attention = match &self.attention_flops {
            Some(a) => flops::Attention::parse(a)
                .ok_or_else(|| format!("--attention-flops {a}: expected full or causal"))?,
            None => flops::Attention::default(),
        };
        Ok(PerfRequest {
            paths: self.paths.clone(),
            flags,
            config,
            window,
            against,
            model_config,
            attention,
            min_ratio: match self.min_ratio {
                Some(r) if !(r > 0.0 && r.is_finite()) => {
                    return Err(format!(
                        "--min-ratio {r}: expected a positive ratio such as 0.95"
                    ));
                }
                r => r,
            },
            power: self.power.clone(),
        })
    }
}

pub fn run(a: PerfArgs) -> i32 {
    init_threads(a.threads);
    let req = match a.request() {
        Ok(r) => r,
        Err(e) => return usage_error(e),
    };
    let rep = match perf::perf(&req) {
        Ok(r) => r,
        Err(e) => return usage_error(e.to_string()),
    };
    if let Some(p) = &a.html
        && let Err(e) = write_page(p, html::html(&rep))
    {
        return usage_error(e);
    }
    let mut out = std::io::stdout().lock();
    let res = if a.csv {
        report::write_csv(&rep, &mut out)
    } else {
        render(
            &rep,
            Format::from_flags(a.json, a.markdown),
            Detail::default(),
            &mut out,
        )
    };
    if res.is_err() {
        return EXIT_USAGE;
    }
    rep.exit_code
}
