//! The crate's error types: what went wrong, where (file, line), and what
//! was expected against what was found. Each `Display` text is the message
//! referee prints (the binary prints `to_string()` and picks the exit code).
//!
//! The types are `Clone` (results are cached and shared between reports),
//! so I/O and JSON causes are held in an [`Arc`].

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

/// An RCP table could not be found or read.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RcpTableError {
    /// Neither `<usage>_<ruleset>/rcps_<benchmark>.json` nor a flat
    /// `rcps_<benchmark>.json` exists.
    #[error("no RCP file for {benchmark} in ruleset {ruleset} ({})", .path.display())]
    NoFile {
        benchmark: String,
        ruleset: String,
        /// The official path that was looked for.
        path: PathBuf,
    },
    /// The file exists but could not be read.
    #[error("{}: {source}", .path.display())]
    Read {
        path: PathBuf,
        source: Arc<io::Error>,
    },
    /// The ruleset knows no submission run count for the benchmark.
    #[error("benchmark {benchmark} has no RCP test (unknown submission run count)")]
    NoRcpTest { benchmark: String },
    #[error("{file}: invalid JSON: {source}")]
    Json {
        /// The file (or `<embedded …>` label) the text came from.
        file: String,
        source: Arc<serde_json::Error>,
    },
    #[error("{file}: expected an object of RCP records")]
    NotAnObject { file: String },
    /// A record lacks a field (`what`: `Benchmark`, `numeric BS`, or
    /// ``list `FIELD` ``).
    #[error("{file}: record {record} has no {what}")]
    MissingField {
        file: String,
        record: String,
        what: String,
    },
    #[error("{file}: record {record}: non-numeric point {found}")]
    NonNumericPoint {
        file: String,
        record: String,
        found: String,
    },
    #[error(
        "{file}: record {record} has {found} points; olympic statistics need more than {needed}"
    )]
    TooFewPoints {
        file: String,
        record: String,
        found: usize,
        needed: usize,
    },
    /// Neither an RCP directory nor embedded tables were given.
    #[error("no RCP tables available (give --rcp-dir or install mlperf-logging)")]
    NoTables,
}

/// One run could not be read the way the official RCP reader reads it
/// (where the official reader raises).
#[derive(Debug, Clone, thiserror::Error)]
pub enum RunReadError {
    /// The log itself could not be read (the checker's message).
    #[error("{0}")]
    Log(String),
    #[error("{file}:{line}: the RCP reader needs this line but it is not valid MLLOG JSON")]
    NotMllog { file: String, line: usize },
    #[error("{file}:{line}: metadata has no `{name}`")]
    NoMetadata {
        file: String,
        line: usize,
        name: String,
    },
    #[error("{file}:{line}: {name} is not a number")]
    NotANumber {
        file: String,
        line: usize,
        name: String,
    },
    #[error("{file}: run_stop says success but no evaluation meets FID ≤ 90 and CLIP ≥ 0.15")]
    NoPassingEvaluation { file: String },
    #[error("{file}:{line}: run_stop success before any evaluation")]
    SuccessBeforeEvaluation { file: String, line: usize },
    /// A stable_diffusion evaluation lacks `metric` (FID or CLIP).
    #[error("{file}: evaluation at {step} has no {metric} value")]
    EvaluationMissing {
        file: String,
        step: String,
        metric: &'static str,
    },
    #[error("{file}: step {step} is not a number")]
    StepNotANumber { file: String, step: String },
}

/// The seeds of a run cannot be read.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SeedError {
    /// The log itself could not be read (the checker's message).
    #[error("{0}")]
    Log(String),
    #[error("the log has {count} unreadable MLLOG line{} (first at line {first_line})", if *.count == 1 { "" } else { "s" })]
    Unreadable { count: usize, first_line: usize },
    #[error("line {line}: seed metadata has no `{name}`")]
    NoMetadata { line: usize, name: String },
    #[error("line {line}: seed {found} is not an integer")]
    NotAnInteger { line: usize, found: String },
}

/// Why a run's time to train does not count.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NotCounted {
    /// The log could not be read or checked (the checker's message).
    #[error("{0}")]
    Unreadable(String),
    #[error("Compliance check failed")]
    NotCompliant,
    #[error("Parse error")]
    ParseError,
    #[error("run_start not recorded")]
    NoRunStart,
    #[error("run_stop not recorded")]
    NoRunStop,
}

/// A benchmark directory's files could not be read or written.
#[derive(Debug, Clone, thiserror::Error)]
pub enum DirError {
    #[error("{}: {source}", .path.display())]
    Io {
        path: PathBuf,
        source: Arc<io::Error>,
    },
    #[error("{}: invalid JSON: {source}", .path.display())]
    Json {
        path: PathBuf,
        source: Arc<serde_json::Error>,
    },
    /// `scaling.json` has no numeric `scaling_factor`.
    #[error("{}: no numeric `scaling_factor`", .path.display())]
    NoScalingFactor { path: PathBuf },
    #[error("{}: no result_*.txt files", .path.display())]
    NoResultFiles { path: PathBuf },
    #[error("{}: not a directory", .path.display())]
    NotADirectory { path: PathBuf },
    #[error(
        "{}: not a submission folder (no systems/ and results/) and holds none",
        .path.display()
    )]
    NotASubmission { path: PathBuf },
}

impl DirError {
    pub fn io(path: impl Into<PathBuf>, e: io::Error) -> Self {
        DirError::Io {
            path: path.into(),
            source: Arc::new(e),
        }
    }
}

/// A power log gives no energy.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PowerError {
    #[error("{}: no node_*.txt power logs", .folder.display())]
    NoNodeLogs { folder: PathBuf },
    #[error("{}: {source}", .path.display())]
    Read {
        path: PathBuf,
        source: Arc<io::Error>,
    },
    /// A value in a power log is not a number (`key`: `power_reading` or
    /// `conversion_eff`).
    #[error("{}: {key} value is not a number", .path.display())]
    NotANumber { path: PathBuf, key: &'static str },
    #[error("{}: Power start timestamp not found", .path.display())]
    NoStart { path: PathBuf },
    #[error(
        "{}: power_measurement_stop equals power_measurement_start (the official summarizer divides by zero here)",
        .path.display()
    )]
    ZeroWindow { path: PathBuf },
}

/// No ruleset can be chosen automatically for a log.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ChoiceError {
    #[error(
        "`{benchmark}` is not a referee benchmark, so no ruleset can be chosen automatically: pass --ruleset X.Y.Z (e.g. 5.0.0) to check it against the official MLPerf rules"
    )]
    NotOwnBenchmark { benchmark: String },
    #[error(
        "the log names no submission_benchmark, so no ruleset can be chosen automatically: pass --ruleset X.Y.Z"
    )]
    NoBenchmark,
}
