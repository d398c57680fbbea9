//! Why `referee perf` cannot read its input (the CLI's exit 2), and why a
//! run has no reference row (a state of the report, not an error). Each
//! names the file (and line) and what was expected.

use serde::{Serialize, Serializer};
use std::path::PathBuf;

/// An input of `referee perf` cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum PerfError {
    #[error("{}: no such file or directory", .0.display())]
    NoSuchPath(PathBuf),
    /// A file or directory could not be read.
    #[error("{}: {source}", .path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Reference(#[from] ReferenceError),
    /// A power log given or found beside a run cannot be read.
    #[error(transparent)]
    Power(#[from] referee_rules::error::PowerError),
    /// `--power` with more than one run: which run it belongs to is not known.
    #[error(
        "--power with {runs} runs: give one log, or put each run's power logs in power/<log file stem>/ beside it"
    )]
    PowerForManyRuns { runs: usize },
    /// No input holds training-log lines; `paths` as given, comma-separated.
    #[error(
        "no training log (NeMo, Megatron, Lightning progress bar, torchtitan, Hugging Face Trainer or MLLOG) found in {paths}"
    )]
    NoLogs { paths: String },
}

/// A config file (`--config`, a directory's `referee-perf.yaml`) is wrong.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{}: {source}", .path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}:{source}", .path.display())]
    Syntax { path: PathBuf, source: ConfigSyntax },
    /// The file's `model_config:` cannot be read.
    #[error("{}: model_config: {source}", .path.display())]
    ModelConfig {
        path: PathBuf,
        source: ModelConfigError,
    },
}

/// What is wrong at a line of a config file's text.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{line}: {problem}")]
pub struct ConfigSyntax {
    pub line: usize,
    pub problem: String,
}

/// A `--window` (or a config's `window:`) that names no iterations.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WindowError {
    #[error("window `{0}`: expected A..B (B excluded) or A..=B (inclusive)")]
    Shape(String),
    /// `bound`: `A` or `B`.
    #[error("window `{window}`: {bound} `{found}` is not an iteration number")]
    NotAnIteration {
        window: String,
        bound: &'static str,
        found: String,
    },
    /// `A..0`: nothing before 0.
    #[error("window `{0}`: empty")]
    Empty(String),
    #[error("window `{0}`: empty (B must lie after A)")]
    Backwards(String),
}

/// A reference table (`--against FILE`) cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ReferenceError {
    #[error("{spec}: {source}")]
    Read {
        spec: String,
        source: std::io::Error,
    },
    /// `expected`: the header, its tabs written `\t`.
    #[error("{name}:1: expected the header `{expected}`")]
    Header { name: String, expected: String },
    #[error("{name}:{line}: {problem}")]
    Row {
        name: String,
        line: usize,
        problem: RowProblem,
    },
}

/// What is wrong with one row of a reference table.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RowProblem {
    #[error("expected {expected} tab-separated cells, found {found}")]
    Cells { expected: usize, found: usize },
    #[error("column {column}: expected a whole number, found `{found}`")]
    WholeNumber { column: &'static str, found: String },
    #[error("column {column}: expected a number, found `{found}`")]
    Number { column: &'static str, found: String },
    #[error("column gpus: expected a GPU count, found nothing")]
    NoGpus,
}

/// Why a run matches no row of the reference (shown in the report;
/// serialised as its message).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NoMatch {
    #[error("the model is not stated (--model or the config's `model`)")]
    NoModel,
    #[error("no row of the {reference} reference for model {model}")]
    Model { reference: String, model: String },
    #[error("no {reference} row for model {model} and task {task}")]
    Task {
        reference: String,
        model: String,
        task: String,
    },
}

impl Serialize for NoMatch {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A plot of the HTML page could not be drawn (the plotting library's
/// error, as text).
#[derive(Debug, Clone, thiserror::Error)]
#[error("drawing the {plot} plot: {message}")]
pub struct DrawError {
    /// `step-time`, `scaling`.
    pub plot: &'static str,
    pub message: String,
}

/// Why a `--model-config` file gives no architecture.
#[derive(Debug, thiserror::Error)]
pub enum ModelConfigError {
    #[error("--model-config {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("--model-config {path}: not JSON: {source}")]
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("--model-config {path}: not a JSON object (a Hugging Face config.json is one)")]
    NotObject { path: PathBuf },
    #[error("--model-config {path}: missing key `{key}` ({what})")]
    Missing {
        path: PathBuf,
        key: &'static str,
        what: &'static str,
    },
    #[error("--model-config {path}: `{key}` is {found}, expected a positive whole number")]
    NotCount {
        path: PathBuf,
        key: String,
        found: String,
    },
}
