//! Why a supervised session could not be configured, run or recorded. A
//! run that ran and failed its rules is not an error: it is in the run's
//! verdict.

use crate::common::fingerprint::FingerprintError;
use crate::rules_env::RulesError;
use crate::tsa::TsaError;
use std::io;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// Measuring power (`--power`; crate::power).
    #[error(transparent)]
    Power(#[from] crate::power::PowerError),
    /// Creating, reading or writing `path` failed.
    #[error("{}: {source}", .path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error("{}:{line}: invalid JSON: {source}", .path.display())]
    Json {
        path: PathBuf,
        line: usize,
        source: serde_json::Error,
    },
    /// A run record's `runs[run].witness` is not a witness.
    #[error(
        "{}: runs[{run}].witness: expected the witness of a supervised run: {source}",
        .path.display()
    )]
    BadWitness {
        path: PathBuf,
        run: usize,
        source: serde_json::Error,
    },
    /// The program's code (its git checkout) could not be fingerprinted.
    #[error(transparent)]
    Fingerprint(#[from] FingerprintError),
    /// A `--data DIR` could not be fingerprinted.
    #[error("--data: {0}")]
    Data(FingerprintError),
    #[error(transparent)]
    Rules(#[from] RulesError),
    #[error(transparent)]
    Tsa(#[from] TsaError),
    #[error("--exec needs the training command after `--`")]
    NoTrainingCommand,
    #[error("--exec needs a command after `--`")]
    NoCommand,
    #[error(
        "`{benchmark}` is not one of referee's benchmarks: give --ruleset X.Y.Z (e.g. 5.0.0) to run it under the official rules"
    )]
    NeedsRuleset { benchmark: String },
    /// `rules`: the rules' description; `allowed`: their benchmarks.
    #[error("`{benchmark}` is not a benchmark of {rules} (benchmarks: {})", .allowed.join(", "))]
    UnknownBenchmark {
        benchmark: String,
        rules: String,
        allowed: Vec<String>,
    },
    #[error("--runs must be at least 1")]
    NoRuns,
    #[error(
        "{} already holds {found} result file(s); choose another --out (a log is never overwritten)",
        .out.display()
    )]
    OutHoldsResults { out: PathBuf, found: usize },
    #[error("--budget-minutes must be positive")]
    BadBudget,
    #[error("the working directory: {0}")]
    WorkingDirectory(io::Error),
    #[error("cannot start `{program}`: {source}")]
    Start { program: String, source: io::Error },
    #[error("the supervisor panicked")]
    SupervisorPanicked,
    #[error("{}: the reader panicked", .run_dir.display())]
    ReaderPanicked { run_dir: PathBuf },
    /// Writing the result file `result` failed.
    #[error("writing the result of {result}: {source}")]
    WriteResult { result: String, source: io::Error },
    #[error("waiting for the program: {0}")]
    Wait(io::Error),
    #[error("{result}: the program's exit was not seen")]
    ExitNotSeen { result: String },
    /// Writing the harness's closing line failed (the bare I/O error).
    #[error(transparent)]
    CloseResult(io::Error),
}

impl ExecError {
    pub fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        ExecError::Io {
            path: path.into(),
            source,
        }
    }
}
