//! Published reference throughput, shipped with referee
//! (`submission/data/published_llm_throughput.tsv`: the NeMo 25.04
//! performance summary and the NeMo AutoModel tables, 54 rows; see
//! `submission/data/README.md`), and the matching of a run to a row.
//!
//! A run matches rows of the same model (names compared lower-case, letters
//! and digits only: `llama3_8b` = `LLAMA3-8B`) and task (when the run
//! states one; otherwise pre-training rows are preferred and the label says
//! so). Among them the closest row wins, differences weighed in this order:
//! precision, system, GPU count, parallelism (TP/PP/CP/VP/EP/FSDP/GA, each
//! compared where both state it). A row with no difference — precision,
//! system and GPU count stated by the run and equal — is an exact match;
//! anything else is labelled "looser" with every difference named.

use super::error::{NoMatch, ReferenceError, RowProblem};
use super::fields::{Fields, PARALLELISM, parallelism_text};
use super::precision::Precision;
use serde::Serialize;
use std::path::Path;

/// The shipped table.
pub const PUBLISHED_TSV: &str = include_str!("../../data/published_llm_throughput.tsv");
/// The name `--against` gives the shipped table.
pub const PUBLISHED: &str = "published";

/// One reference row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RefRow {
    /// 1-based line in the table.
    pub line: usize,
    pub source: String,
    pub container: String,
    pub system: String,
    pub precision: String,
    pub task: String,
    pub model: String,
    pub gpus: u64,
    pub gbs: Option<u64>,
    pub mbs: Option<u64>,
    pub seq_len: Option<u64>,
    pub fsdp: Option<u64>,
    pub tp: Option<u64>,
    pub pp: Option<u64>,
    pub cp: Option<u64>,
    pub vp: Option<u64>,
    pub ep: Option<u64>,
    pub ga: Option<u64>,
    pub step_time_s: Option<f64>,
    pub tokens_per_s_per_gpu: Option<f64>,
    pub model_tflops_per_gpu: Option<f64>,
}

impl RefRow {
    fn count(&self, name: &str) -> Option<u64> {
        match name {
            "fsdp" => self.fsdp,
            "tp" => self.tp,
            "pp" => self.pp,
            "cp" => self.cp,
            "vp" => self.vp,
            "ep" => self.ep,
            "ga" => self.ga,
            _ => None,
        }
    }

    /// `TP4 PP8 CP2 VP8 EP1 GA32`.
    pub fn parallelism(&self) -> String {
        parallelism_text(|n| self.count(n))
    }

    /// The GPT3-175B rows hold one figure where the page has two columns.
    pub fn ambiguous(&self) -> bool {
        self.model == "GPT3-175B" && self.model_tflops_per_gpu.is_none()
    }
}

const COLUMNS: &[&str] = &[
    "source",
    "container",
    "system",
    "precision",
    "task",
    "model",
    "gpus",
    "gbs",
    "mbs",
    "lbs",
    "seq_len",
    "fsdp",
    "tp",
    "pp",
    "cp",
    "vp",
    "ep",
    "ga",
    "kernels",
    "step_time_s",
    "tokens_per_s_per_gpu",
    "model_tflops_per_gpu",
];

/// A table of reference rows.
#[derive(Debug, Clone, PartialEq)]
pub struct Reference {
    /// `published` or the file's path.
    pub name: String,
    pub rows: Vec<RefRow>,
}

/// The table shipped with referee.
pub fn published() -> Reference {
    parse(PUBLISHED_TSV, PUBLISHED).expect("the shipped reference table parses (tested)")
}

/// `published` or a TSV file with the shipped table's columns.
pub fn load(spec: &str) -> Result<Reference, ReferenceError> {
    if spec == PUBLISHED {
        return Ok(published());
    }
    // A path the user typed (a link to it is followed), read with the
    // cap for configs: a FIFO or a device is refused, not read.
    let text = referee_rules::untrusted::read_to_string(
        Path::new(spec),
        referee_rules::untrusted::FileKind::Config,
        referee_rules::untrusted::Links::Follow,
    )
    .map_err(|e| ReferenceError::Read {
        spec: spec.into(),
        source: e.into_io(),
    })?;
    parse(&text, spec)
}

/// Parse a table; errors are `NAME:LINE: …`.
pub fn parse(text: &str, name: &str) -> Result<Reference, ReferenceError> {
    let row_error = |line: usize, problem: RowProblem| ReferenceError::Row {
        name: name.into(),
        line,
        problem,
    };
    let mut lines = text.lines().enumerate();
    let header: Vec<&str> = lines
        .next()
        .map(|(_, h)| h.split('\t').collect())
        .unwrap_or_default();
    if header != COLUMNS {
        return Err(ReferenceError::Header {
            name: name.into(),
            expected: COLUMNS.join("\\t"),
        });
    }
    let mut rows = Vec::new();
    for (i, l) in lines {
        if l.trim().is_empty() {
            continue;
        }
        let at = i + 1;
        let cells: Vec<&str> = l.split('\t').collect();
        if cells.len() != COLUMNS.len() {
            return Err(row_error(
                at,
                RowProblem::Cells {
                    expected: COLUMNS.len(),
                    found: cells.len(),
                },
            ));
        }
        let cell = |c: &str| cells[COLUMNS.iter().position(|x| *x == c).expect("column")].trim();
        let int = |c: &'static str| -> Result<Option<u64>, ReferenceError> {
            let v = cell(c);
            if v.is_empty() {
                return Ok(None);
            }
            v.parse().map(Some).map_err(|_| {
                row_error(
                    at,
                    RowProblem::WholeNumber {
                        column: c,
                        found: v.into(),
                    },
                )
            })
        };
        let float = |c: &'static str| -> Result<Option<f64>, ReferenceError> {
            let v = cell(c);
            if v.is_empty() {
                return Ok(None);
            }
            v.parse().map(Some).map_err(|_| {
                row_error(
                    at,
                    RowProblem::Number {
                        column: c,
                        found: v.into(),
                    },
                )
            })
        };
        rows.push(RefRow {
            line: at,
            source: cell("source").into(),
            container: cell("container").into(),
            system: cell("system").into(),
            precision: cell("precision").into(),
            task: cell("task").into(),
            model: cell("model").into(),
            gpus: int("gpus")?.ok_or_else(|| row_error(at, RowProblem::NoGpus))?,
            gbs: int("gbs")?,
            mbs: int("mbs")?,
            seq_len: int("seq_len")?,
            fsdp: int("fsdp")?,
            tp: int("tp")?,
            pp: int("pp")?,
            cp: int("cp")?,
            vp: int("vp")?,
            ep: int("ep")?,
            ga: int("ga")?,
            step_time_s: float("step_time_s")?,
            tokens_per_s_per_gpu: float("tokens_per_s_per_gpu")?,
            model_tflops_per_gpu: float("model_tflops_per_gpu")?,
        });
    }
    Ok(Reference {
        name: name.to_string(),
        rows,
    })
}

pub use super::names::normalise;

/// A run matched to a reference row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RefMatch {
    pub exact: bool,
    /// `exact`, or `looser: …` naming every difference.
    pub label: String,
    pub row: RefRow,
    /// Run ÷ reference, in percent.
    pub pct_tokens_per_gpu: Option<f64>,
    pub pct_tflops_per_gpu: Option<f64>,
    /// Reference step time ÷ run step time, in percent (same GBS only).
    pub pct_step_time: Option<f64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl RefMatch {
    /// The headline "% of reference": tokens/s/GPU, else TFLOP/s/GPU.
    pub fn pct(&self) -> Option<f64> {
        self.pct_tokens_per_gpu.or(self.pct_tflops_per_gpu)
    }
}

/// The closest row for a run, or why there is none.
pub fn find(reference: &Reference, f: &Fields) -> Result<RefMatch, NoMatch> {
    let model = f.model.as_ref().ok_or(NoMatch::NoModel)?;
    let m = normalise(&model.value);
    let mut candidates: Vec<&RefRow> = reference
        .rows
        .iter()
        .filter(|r| normalise(&r.model) == m)
        .collect();
    if candidates.is_empty() {
        return Err(NoMatch::Model {
            reference: reference.name.clone(),
            model: model.value.clone(),
        });
    }
    let mut notes = Vec::new();
    match &f.task {
        Some(t) => {
            candidates.retain(|r| normalise(&r.task) == normalise(&t.value));
            if candidates.is_empty() {
                return Err(NoMatch::Task {
                    reference: reference.name.clone(),
                    model: model.value.clone(),
                    task: t.value.clone(),
                });
            }
        }
        None => {
            if candidates.iter().any(|r| r.task == "pretrain") {
                candidates.retain(|r| r.task == "pretrain");
                notes.push(
                    "the task is not stated (--task): pre-training rows were matched".to_string(),
                );
            }
        }
    }
    let best = candidates
        .into_iter()
        .map(|r| (differences(r, f), r))
        .min_by(|(a, ra), (b, rb)| a.0.cmp(&b.0).then(ra.line.cmp(&rb.line)))
        .expect("candidates are not empty");
    let ((_, diffs), row) = best;
    if row.ambiguous() {
        notes.push("this row holds one figure where the page has two columns (tokens/s/GPU or TFLOP/s/GPU cannot be told; see submission/data/README.md)".into());
    }
    Ok(RefMatch {
        exact: diffs.is_empty(),
        label: if diffs.is_empty() {
            "exact".into()
        } else {
            format!("looser: {}", diffs.join("; "))
        },
        row: row.clone(),
        pct_tokens_per_gpu: None,
        pct_tflops_per_gpu: None,
        pct_step_time: None,
        notes,
    })
}

/// (severity key, differences named) of `r` for the run's fields.
fn differences(r: &RefRow, f: &Fields) -> ((u8, u8, u64, usize), Vec<String>) {
    let mut d = Vec::new();
    let prec = match &f.precision {
        Some(p) if Precision::parse(&r.precision) == Some(p.value) => 0,
        Some(p) => {
            d.push(format!(
                "precision {} in the reference, {} in the run",
                r.precision,
                p.value.as_str()
            ));
            2
        }
        None => {
            d.push(format!("precision not stated (reference {})", r.precision));
            1
        }
    };
    let sys = match &f.system {
        Some(s) if normalise(&s.value) == normalise(&r.system) => 0,
        Some(s) => {
            d.push(format!(
                "system {} in the reference, {} in the run",
                r.system, s.value
            ));
            2
        }
        None => {
            d.push(format!("system not stated (reference {})", r.system));
            1
        }
    };
    let gpus = match &f.gpus {
        Some(g) if g.value == r.gpus => 0,
        Some(g) => {
            d.push(format!(
                "{} GPUs in the reference, {} in the run",
                r.gpus, g.value
            ));
            let (a, b) = (g.value.max(1) as f64, r.gpus.max(1) as f64);
            ((a / b).ln().abs() * 1000.0) as u64 + 1
        }
        None => {
            d.push(format!("GPU count not stated (reference {})", r.gpus));
            u64::MAX / 2
        }
    };
    let mut par = Vec::new();
    for (n, l) in PARALLELISM {
        if let (Some(a), Some(b)) = (f.value(n), r.count(n))
            && a != b
        {
            par.push(format!("{l}{b} vs {l}{a}"));
        }
    }
    let np = par.len();
    if !par.is_empty() {
        d.push(format!(
            "parallelism differs (reference vs run: {})",
            par.join(", ")
        ));
    }
    ((prec, sys, gpus, np), d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::fields::{Field, Source};

    fn fields(
        model: &str,
        system: Option<&str>,
        gpus: Option<u64>,
        prec: Option<Precision>,
    ) -> Fields {
        Fields {
            model: Some(Field::new(model.into(), Source::Flag)),
            system: system.map(|s| Field::new(s.into(), Source::Flag)),
            gpus: gpus.map(|g| Field::new(g, Source::Flag)),
            precision: prec.map(|p| Field::new(p, Source::Flag)),
            ..Default::default()
        }
    }

    #[test]
    fn the_shipped_table() {
        let r = published();
        assert_eq!(r.rows.len(), 54);
        let first = &r.rows[0];
        assert_eq!(
            (first.model.as_str(), first.gpus, first.line),
            ("GPT3-175B", 128, 2)
        );
        assert!(first.ambiguous());
        let automodel = r
            .rows
            .iter()
            .filter(|x| x.source.contains("AutoModel"))
            .count();
        assert_eq!(automodel, 15);
        let h100_8b = r
            .rows
            .iter()
            .find(|x| x.model == "LLAMA3-8B" && x.system == "DGX-H100" && x.task == "pretrain")
            .unwrap();
        assert_eq!(h100_8b.tokens_per_s_per_gpu, Some(13812.0));
        assert_eq!(h100_8b.model_tflops_per_gpu, Some(800.0));
        assert_eq!(h100_8b.parallelism(), "TP1 PP1 CP2 VP1 EP1 GA32");
    }

    #[test]
    fn exact_then_looser_labelled() {
        let r = published();
        // Exact: same model (spelled differently), system, GPUs, precision.
        let mut f = fields("llama3_8b", Some("DGX-H100"), Some(8), Some(Precision::Fp8));
        f.cp = Some(Field::new(2, Source::Log));
        let m = find(&r, &f).unwrap();
        assert!(m.exact, "{m:?}");
        assert_eq!(m.label, "exact");
        assert_eq!(m.row.tokens_per_s_per_gpu, Some(13812.0));
        assert!(m.notes[0].contains("task is not stated"));
        // Parallelism differs: still that row, labelled.
        f.cp = Some(Field::new(1, Source::Log));
        let m = find(&r, &f).unwrap();
        assert!(!m.exact);
        assert_eq!(m.row.system, "DGX-H100");
        assert!(
            m.label.contains("parallelism differs") && m.label.contains("CP2 vs CP1"),
            "{}",
            m.label
        );
        // 16 GPUs: the 8-GPU row of the same system, labelled.
        let f = fields(
            "LLAMA3-8B",
            Some("DGX-H100"),
            Some(16),
            Some(Precision::Fp8),
        );
        let m = find(&r, &f).unwrap();
        assert!(
            m.label.contains("8 GPUs in the reference, 16 in the run"),
            "{}",
            m.label
        );
        assert_eq!(m.row.system, "DGX-H100");
        // A system not in the table: same precision and GPU count elsewhere.
        let f = fields(
            "LLAMA3-70B",
            Some("my-cluster"),
            Some(64),
            Some(Precision::Fp8),
        );
        let m = find(&r, &f).unwrap();
        assert!(
            m.label.contains("system") && m.label.contains("my-cluster"),
            "{}",
            m.label
        );
        assert_eq!(m.row.gpus, 64);
        // BF16 Llama3 70B exists only in the AutoModel table (DGX-H100).
        let f = fields(
            "Llama3 70B",
            Some("DGX-H100"),
            Some(64),
            Some(Precision::Bf16),
        );
        let m = find(&r, &f).unwrap();
        assert!(m.exact, "{m:?}");
        assert_eq!(m.row.step_time_s, Some(18.90));
        // No model, unknown model.
        let mut f = fields("x", None, None, None);
        f.model = None;
        assert!(
            find(&r, &f)
                .unwrap_err()
                .to_string()
                .contains("model is not stated")
        );
        assert!(
            find(&r, &fields("gpt5", None, None, None))
                .unwrap_err()
                .to_string()
                .contains("no row")
        );
    }

    #[test]
    fn task_is_respected() {
        let r = published();
        let mut f = fields(
            "LLAMA3-70B",
            Some("DGX-H100"),
            Some(8),
            Some(Precision::Fp8),
        );
        f.task = Some(Field::new("lora".into(), Source::Flag));
        let m = find(&r, &f).unwrap();
        assert!(m.exact);
        assert_eq!(
            (m.row.task.as_str(), m.row.tokens_per_s_per_gpu),
            ("lora", Some(2621.0))
        );
    }

    #[test]
    fn bad_tables() {
        assert!(
            parse("a\tb\n", "t.tsv")
                .unwrap_err()
                .to_string()
                .starts_with("t.tsv:1: expected the header")
        );
        let mut text = PUBLISHED_TSV.lines().next().unwrap().to_string();
        text.push_str("\nx\tc\tDGX\tFP8\tpretrain\tM\teight\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\n");
        let e = parse(&text, "t.tsv").unwrap_err().to_string();
        assert!(
            e.starts_with("t.tsv:2: column gpus: expected a whole number, found `eight`"),
            "{e}"
        );
        let e = parse(
            &format!("{}\nshort\trow\n", PUBLISHED_TSV.lines().next().unwrap()),
            "t.tsv",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("expected 22 tab-separated cells, found 2"),
            "{e}"
        );
    }
}
