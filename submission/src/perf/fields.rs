//! The facts a throughput figure needs besides the log's timings — model,
//! system, GPU, GPU count, batch sizes, sequence length, parallelism,
//! precision — and where each came from. A field is never guessed: it is
//! read from the log, from the log's file name (the DGX Cloud recipes name
//! their experiments `pretrain_llama3.1_405b_bf16_gpus256_tp4_pp8_…`), from a
//! flag, from a config file, or derived from other fields by a stated
//! formula, and the report says which.

use super::error::{ConfigError, ConfigSyntax};
use super::precision::Precision;
use referee_rules::untrusted::{self, FileKind, Links};
use referee_rules::yaml::{self, Node};
use serde::Serialize;
use std::path::Path;

/// Where a field's value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// A flag of the command line.
    Flag,
    /// The `--config` file (or a side's `referee-perf.yaml`).
    Config,
    /// A line of the log (Megatron's argument dump, a NeMo iteration line,
    /// an MLLOG key).
    Log,
    /// The log's file name (the recipes' experiment naming).
    FileName,
    /// Computed from other fields (the note says how).
    Derived,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Flag => "flag",
            Source::Config => "config",
            Source::Log => "log",
            Source::FileName => "file name",
            Source::Derived => "derived",
        }
    }
}

/// A value and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Field<T> {
    pub value: T,
    pub source: Source,
    /// How a derived value was made, or what a lower-priority source said
    /// when it disagreed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl<T> Field<T> {
    pub fn new(value: T, source: Source) -> Self {
        Field {
            value,
            source,
            note: None,
        }
    }
}

/// The integer fields, in report order, with their labels.
pub const COUNTS: &[(&str, &str)] = &[
    ("gpus", "GPUs"),
    ("gbs", "GBS"),
    ("mbs", "MBS"),
    ("seq_len", "sequence length"),
    ("tp", "TP"),
    ("pp", "PP"),
    ("cp", "CP"),
    ("vp", "VP"),
    ("ep", "EP"),
    ("fsdp", "FSDP"),
    ("ga", "GA"),
];

/// The parallelism fields (from `tp` on), with their labels.
pub const PARALLELISM: &[(&str, &str)] = COUNTS.split_at(4).1;

/// Is `name` one of the integer fields?
fn is_count(name: &str) -> bool {
    COUNTS.iter().any(|(n, _)| *n == name)
}

/// `TP4 PP8 CP2 VP8 EP1 GA32`: the parallelism fields that `count` has.
pub fn parallelism_text(count: impl Fn(&str) -> Option<u64>) -> String {
    PARALLELISM
        .iter()
        .filter_map(|(n, l)| count(n).map(|v| format!("{l}{v}")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Values stated by one source (flags, a config file, a log, a file name);
/// every field optional.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stated {
    pub model: Option<String>,
    pub system: Option<String>,
    pub gpu: Option<String>,
    pub task: Option<String>,
    pub precision: Option<Precision>,
    /// (name, value) of the integer fields named in [`COUNTS`].
    pub counts: Vec<(&'static str, u64)>,
}

impl Stated {
    pub fn count(&self, name: &str) -> Option<u64> {
        self.counts
            .iter()
            .rev()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| *v)
    }

    pub fn set_count(&mut self, name: &str, v: u64) {
        let (name, _) = COUNTS
            .iter()
            .find(|(c, _)| *c == name)
            .expect("a known count field");
        self.counts.retain(|(n, _)| n != name);
        self.counts.push((name, v));
    }

    pub fn is_empty(&self) -> bool {
        *self == Stated::default()
    }
}

/// A `--config` file: YAML or JSON, one mapping of field names to values
/// (`model`, `system`, `gpu`, `task`, `precision`, `gpus`, `gbs`, `mbs`,
/// `seq_len`, `tp`, `pp`, `cp`, `vp`, `ep`, `fsdp`, `ga`, `window`, and
/// `model_config`: a Hugging Face `config.json`, relative to the file).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConfigFile {
    pub stated: Stated,
    /// `window: A..B` (as `--window`).
    pub window: Option<String>,
    /// `model_config:` as written.
    pub model_config_path: Option<String>,
    /// That file's architecture and its path (read by [`read_config`]).
    pub model_config: Option<(super::flops::Arch, String)>,
}

/// Read a config file; errors name the file, the line and what was expected.
/// `links`: whether `path` may be a link (`--config` typed by the user) or
/// not (a `referee-perf.yaml` found beside the logs). The file is read as
/// one of a package's (see `referee_rules::untrusted`), and so is the
/// `model_config` it names, never through a link.
pub fn read_config(path: &Path, links: Links) -> Result<ConfigFile, ConfigError> {
    let text = untrusted::read_to_string(path, FileKind::Config, links).map_err(|e| {
        ConfigError::Read {
            path: path.to_path_buf(),
            source: e.into_io(),
        }
    })?;
    let mut c = parse_config(&text).map_err(|source| ConfigError::Syntax {
        path: path.to_path_buf(),
        source,
    })?;
    if let Some(m) = &c.model_config_path {
        let p = path.parent().unwrap_or(Path::new("")).join(m);
        let arch =
            super::flops::read_model_config(&p).map_err(|source| ConfigError::ModelConfig {
                path: path.to_path_buf(),
                source,
            })?;
        c.model_config = Some((arch, p.display().to_string()));
    }
    Ok(c)
}

/// Parse a config file's text; the error names the line.
pub fn parse_config(text: &str) -> Result<ConfigFile, ConfigSyntax> {
    let at_line = |line: usize, problem: String| ConfigSyntax { line, problem };
    let doc = yaml::load(text).map_err(|e| at_line(1, format!("not YAML or JSON: {e}")))?;
    let mut out = ConfigFile::default();
    let Some(doc) = doc else {
        return Ok(out);
    };
    let Node::Map(pairs, _) = &doc else {
        return Err(at_line(
            doc.line().max(1),
            "expected a mapping of field names to values".into(),
        ));
    };
    for (k, v) in pairs {
        let key = k.as_str().unwrap_or_default();
        let at = v.line().max(k.line());
        let Some(text) = v.as_str() else {
            return Err(at_line(at, format!("`{key}` must be a single value")));
        };
        let text = text.trim();
        match key {
            "model" => out.stated.model = Some(text.to_string()),
            "system" => out.stated.system = Some(text.to_string()),
            "gpu" => out.stated.gpu = Some(text.to_string()),
            "task" => out.stated.task = Some(text.to_string()),
            "window" => out.window = Some(text.to_string()),
            "model_config" => out.model_config_path = Some(text.to_string()),
            "precision" => {
                out.stated.precision = Some(Precision::parse(text).ok_or_else(|| {
                    at_line(
                        at,
                        format!("precision `{text}`: expected bf16, fp8, fp16, fp32 or nvfp4"),
                    )
                })?)
            }
            k if is_count(k) => {
                let n: u64 = text.parse().map_err(|_| {
                    at_line(
                        at,
                        format!("`{k}` is `{text}` where a whole number was expected"),
                    )
                })?;
                out.stated.set_count(k, n);
            }
            other => {
                return Err(at_line(
                    at,
                    format!(
                        "unknown field `{other}` (known: model, system, gpu, task, precision, window, model_config, {})",
                        COUNTS
                            .iter()
                            .map(|(n, _)| *n)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
        }
    }
    Ok(out)
}

/// What the recipes' experiment naming states: `pretrain_llama3.1_405b_bf16_
/// gpus256_tp4_pp8_cp2_vp8_mbs1_gbs128_384748` or `pretrain_llama3_8b_bf16_
/// 1nodes_tp1_pp1_cp1_vp1_2mbs_128gbs_1759289474` (a `log-` prefix and the
/// extension are dropped). Only a stem with a precision token and at least
/// two parallelism or batch tokens counts as such a name.
pub fn from_file_name(path: &Path) -> Stated {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_default();
    let stem = stem.strip_prefix("log-").unwrap_or(&stem);
    let tokens: Vec<&str> = stem.split('_').collect();
    let mut s = Stated::default();
    let mut model = Vec::new();
    let mut recognised = 0;
    let mut before_precision = true;
    for (i, t) in tokens.iter().enumerate() {
        let lower = t.to_ascii_lowercase();
        if let Some(p) = Precision::parse(&lower) {
            s.precision = Some(p);
            before_precision = false;
            continue;
        }
        if i == 0
            && matches!(
                lower.as_str(),
                "pretrain" | "pretraining" | "finetune" | "finetuning" | "sft" | "lora" | "peft"
            )
        {
            s.task = Some(match lower.as_str() {
                "pretrain" | "pretraining" => "pretrain".to_string(),
                "lora" | "peft" => "lora".to_string(),
                _ => "sft".to_string(),
            });
            continue;
        }
        if let Some((name, v)) = count_token(&lower) {
            s.set_count(name, v);
            recognised += 1;
            continue;
        }
        if before_precision {
            model.push(*t);
        }
    }
    if s.precision.is_none() || recognised < 2 {
        return Stated::default();
    }
    if !model.is_empty() {
        s.model = Some(model.join("_"));
    }
    s
}

/// `tp4`, `pp8`, `cp2`, `vp8`, `ep8`, `mbs1`/`1mbs`, `gbs128`/`128gbs`,
/// `gpus256`, `ga32`, `fsdp1`.
fn count_token(t: &str) -> Option<(&'static str, u64)> {
    const PREFIXES: &[(&str, &str)] = &[
        ("gpus", "gpus"),
        ("gbs", "gbs"),
        ("mbs", "mbs"),
        ("fsdp", "fsdp"),
        ("tp", "tp"),
        ("pp", "pp"),
        ("cp", "cp"),
        ("vp", "vp"),
        ("ep", "ep"),
        ("ga", "ga"),
    ];
    for (prefix, name) in PREFIXES {
        if let Some(rest) = t.strip_prefix(prefix)
            && !rest.is_empty()
            && rest.bytes().all(|b| b.is_ascii_digit())
        {
            return rest.parse().ok().map(|v| (*name, v));
        }
    }
    for (suffix, name) in [("mbs", "mbs"), ("gbs", "gbs"), ("gpus", "gpus")] {
        if let Some(rest) = t.strip_suffix(suffix)
            && !rest.is_empty()
            && rest.bytes().all(|b| b.is_ascii_digit())
        {
            return rest.parse().ok().map(|v| (name, v));
        }
    }
    None
}

/// The resolved fields of one run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Fields {
    pub model: Option<Field<String>>,
    pub system: Option<Field<String>>,
    pub gpu: Option<Field<String>>,
    pub task: Option<Field<String>>,
    pub precision: Option<Field<Precision>>,
    pub gpus: Option<Field<u64>>,
    pub gbs: Option<Field<u64>>,
    pub mbs: Option<Field<u64>>,
    pub seq_len: Option<Field<u64>>,
    pub tp: Option<Field<u64>>,
    pub pp: Option<Field<u64>>,
    pub cp: Option<Field<u64>>,
    pub vp: Option<Field<u64>>,
    pub ep: Option<Field<u64>>,
    pub fsdp: Option<Field<u64>>,
    pub ga: Option<Field<u64>>,
}

impl Fields {
    pub fn count(&self, name: &str) -> Option<&Field<u64>> {
        match name {
            "gpus" => self.gpus.as_ref(),
            "gbs" => self.gbs.as_ref(),
            "mbs" => self.mbs.as_ref(),
            "seq_len" => self.seq_len.as_ref(),
            "tp" => self.tp.as_ref(),
            "pp" => self.pp.as_ref(),
            "cp" => self.cp.as_ref(),
            "vp" => self.vp.as_ref(),
            "ep" => self.ep.as_ref(),
            "fsdp" => self.fsdp.as_ref(),
            "ga" => self.ga.as_ref(),
            _ => None,
        }
    }

    fn count_mut(&mut self, name: &str) -> &mut Option<Field<u64>> {
        match name {
            "gpus" => &mut self.gpus,
            "gbs" => &mut self.gbs,
            "mbs" => &mut self.mbs,
            "seq_len" => &mut self.seq_len,
            "tp" => &mut self.tp,
            "pp" => &mut self.pp,
            "cp" => &mut self.cp,
            "vp" => &mut self.vp,
            "ep" => &mut self.ep,
            "fsdp" => &mut self.fsdp,
            _ => &mut self.ga,
        }
    }

    pub fn value(&self, name: &str) -> Option<u64> {
        self.count(name).map(|f| f.value)
    }

    /// `TP1 PP1 CP2 VP1 EP1 FSDP0 GA32`: the parallelism fields stated.
    pub fn parallelism(&self) -> String {
        parallelism_text(|n| self.value(n))
    }
}

/// Merge the sources, highest priority first: flags, config, log, file name.
/// A lower-priority value that disagrees is kept as the field's note. Then
/// the derivations: GA = GBS ÷ (MBS × DP) with DP = GPUs ÷ (TP × PP × CP),
/// and the GPU from a system named after one (`DGX-H100`).
pub fn resolve(layers: &[(&Stated, Source)]) -> Fields {
    let mut f = Fields::default();
    fn pick<T: Clone + PartialEq + std::fmt::Display>(
        layers: &[(&Stated, Source)],
        get: impl Fn(&Stated) -> Option<T>,
    ) -> Option<Field<T>> {
        let mut found: Option<Field<T>> = None;
        for (s, src) in layers {
            let Some(v) = get(s) else { continue };
            match &mut found {
                None => found = Some(Field::new(v, *src)),
                Some(f) if f.value != v && f.note.is_none() => {
                    f.note = Some(format!("the {} states {v}", src.as_str()));
                }
                Some(_) => {}
            }
        }
        found
    }
    f.model = pick(layers, |s| s.model.clone());
    f.system = pick(layers, |s| s.system.clone());
    f.gpu = pick(layers, |s| s.gpu.clone());
    f.task = pick(layers, |s| s.task.clone());
    f.precision = pick(layers, |s| s.precision.map(PrecisionText)).map(|x| Field {
        value: x.value.0,
        source: x.source,
        note: x.note,
    });
    for (name, _) in COUNTS {
        *f.count_mut(name) = pick(layers, |s| s.count(name));
    }
    derive(&mut f);
    f
}

#[derive(Clone, Copy, PartialEq)]
struct PrecisionText(Precision);

impl std::fmt::Display for PrecisionText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.as_str())
    }
}

fn derive(f: &mut Fields) {
    if f.ga.is_none()
        && let (Some(gbs), Some(mbs), Some(gpus)) =
            (f.value("gbs"), f.value("mbs"), f.value("gpus"))
        && ["tp", "pp", "cp"].iter().all(|n| f.value(n).is_some())
        && let Some(model_parallel) = f
            .value("tp")
            .and_then(|tp| tp.checked_mul(f.value("pp")?)?.checked_mul(f.value("cp")?))
        && model_parallel > 0
        && gpus % model_parallel == 0
        && let dp = gpus / model_parallel
        && let Some(per_step) = mbs.checked_mul(dp).filter(|v| *v > 0)
        && gbs % per_step == 0
    {
        f.ga = Some(Field {
            value: gbs / per_step,
            source: Source::Derived,
            note: Some(format!(
                "GBS ÷ (MBS × DP) = {gbs} ÷ ({mbs} × {dp}), DP = GPUs ÷ (TP × PP × CP)"
            )),
        });
    }
    if f.gpu.is_none()
        && let Some(sys) = &f.system
        && let Some(p) = super::peaks::lookup(&sys.value)
    {
        f.gpu = Some(Field {
            value: p.name.to_string(),
            source: Source::Derived,
            note: Some(format!("from the system name {}", sys.value)),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recipes_file_names() {
        let s = from_file_name(Path::new(
            "experiments/x/log-pretrain_llama3.1_405b_bf16_gpus256_tp4_pp8_cp2_vp8_mbs1_gbs128_384748.out",
        ));
        assert_eq!(s.model.as_deref(), Some("llama3.1_405b"));
        assert_eq!(s.task.as_deref(), Some("pretrain"));
        assert_eq!(s.precision, Some(Precision::Bf16));
        assert_eq!(s.count("gpus"), Some(256));
        assert_eq!(s.count("tp"), Some(4));
        assert_eq!(s.count("pp"), Some(8));
        assert_eq!(s.count("cp"), Some(2));
        assert_eq!(s.count("vp"), Some(8));
        assert_eq!(s.count("mbs"), Some(1));
        assert_eq!(s.count("gbs"), Some(128));
        // The other spelling: counts after the number, nodes not GPUs.
        let s = from_file_name(Path::new(
            "pretrain_llama3_8b_bf16_1nodes_tp1_pp1_cp1_vp1_2mbs_128gbs_1759289474.log",
        ));
        assert_eq!(s.model.as_deref(), Some("llama3_8b"));
        assert_eq!((s.count("mbs"), s.count("gbs")), (Some(2), Some(128)));
        assert_eq!(s.count("gpus"), None);
        // An ordinary name states nothing.
        assert!(from_file_name(Path::new("slurm-1234.out")).is_empty());
        assert!(from_file_name(Path::new("run_tp2.log")).is_empty());
    }

    #[test]
    fn priority_and_disagreement() {
        let mut flags = Stated::default();
        flags.set_count("gpus", 16);
        let mut log = Stated::default();
        log.set_count("gpus", 8);
        log.set_count("gbs", 128);
        log.set_count("mbs", 1);
        log.set_count("tp", 2);
        log.set_count("pp", 1);
        log.set_count("cp", 1);
        let f = resolve(&[(&flags, Source::Flag), (&log, Source::Log)]);
        let g = f.gpus.unwrap();
        assert_eq!((g.value, g.source), (16, Source::Flag));
        assert_eq!(g.note.as_deref(), Some("the log states 8"));
        // GA = 128 / (1 × 16/2) = 16.
        let ga = f.ga.unwrap();
        assert_eq!((ga.value, ga.source), (16, Source::Derived));
    }

    #[test]
    fn gpu_from_system_is_labelled() {
        let s = Stated {
            system: Some("DGX-H100".into()),
            ..Default::default()
        };
        let f = resolve(&[(&s, Source::Flag)]);
        let g = f.gpu.unwrap();
        assert_eq!((g.value.as_str(), g.source), ("H100", Source::Derived));
    }

    #[test]
    fn config_files() {
        let c =
            parse_config("model: LLAMA3-8B\ngpus: 8\nprecision: fp8\nwindow: 35..44\n").unwrap();
        assert_eq!(c.stated.model.as_deref(), Some("LLAMA3-8B"));
        assert_eq!(c.stated.count("gpus"), Some(8));
        assert_eq!(c.stated.precision, Some(Precision::Fp8));
        assert_eq!(c.window.as_deref(), Some("35..44"));
        let j = parse_config(r#"{"gbs": 128, "seq_len": 8192}"#).unwrap();
        assert_eq!(j.stated.count("seq_len"), Some(8192));
        let e = parse_config("gpus: eight\n").unwrap_err().to_string();
        assert!(e.starts_with("1:") && e.contains("whole number"), "{e}");
        let e = parse_config("gpus: 8\nflavour: x\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("2:") && e.contains("unknown field `flavour`"),
            "{e}"
        );
        let e = parse_config("precision: fp6\n").unwrap_err().to_string();
        assert!(e.contains("expected bf16"), "{e}");
    }
}
