//! Why a session of referee's own benchmarks could not be configured, run
//! or recorded; why the ranks could not communicate; why a GPU cannot be
//! used. A run that ends aborted is not an error: its reason is in the log.

use referee_workloads::{ConfigError, DataStreamError, DeviceError};
use std::io;
use std::path::PathBuf;
use std::time::Duration;

/// A boxed error of the model library (building, training, evaluating).
pub type ModelError = Box<dyn std::error::Error + Send + Sync>;

/// Why a session cannot be configured or a run cannot complete.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// Measuring power (`--power`; crate::power).
    #[error(transparent)]
    Power(#[from] crate::power::PowerError),
    /// Creating or writing `path` failed.
    #[error("{}: {source}", .path.display())]
    Io { path: PathBuf, source: io::Error },
    /// Not one of referee's benchmarks.
    #[error(transparent)]
    Unknown(#[from] crate::own_benchmarks::UnknownName),
    #[error("--runs must be at least 1")]
    NoRuns,
    #[error("--steps and --window belong to --mode throughput")]
    StepsWithoutThroughput,
    #[error("--mode throughput needs --steps S")]
    NoSteps,
    #[error("--window ends after step {steps}")]
    WindowPastSteps { steps: u64 },
    /// `--window A..B` is malformed (`problem`: what is wrong).
    #[error("--window {given}: {problem}")]
    Window {
        given: String,
        problem: &'static str,
    },
    #[error("--device {given}: {source}")]
    BadDevice { given: String, source: DeviceError },
    /// The device could not be opened (the model library's message).
    #[error("--device {given}: {message}")]
    Device { given: String, message: String },
    #[error("--device {given}: {source}")]
    Gpu { given: String, source: GpuError },
    #[error(
        "REFEREE_CPU_PLAN={given}: expected measure (time the CPU products once per machine, the default) or fixed (the hand-chosen blocking)"
    )]
    CpuPlanMode { given: String },
    /// No engine for the device (`REFEREE_CPU_KERNELS`; the model
    /// library's message).
    #[error("{0}")]
    Engine(String),
    #[error(transparent)]
    Dataset(#[from] referee_datasets::DataError),
    #[error(
        "{} already holds {found} result file(s); choose another --out (a log is never overwritten)",
        .out.display()
    )]
    OutHoldsResults { out: PathBuf, found: usize },
    #[error("--budget-minutes must be positive")]
    BadBudget,
    #[error("--config {}: {source}", .path.display())]
    ConfigRead { path: PathBuf, source: io::Error },
    #[error("--config {}:{line}: invalid YAML/JSON: {info}", .path.display())]
    ConfigSyntax {
        path: PathBuf,
        line: usize,
        info: String,
    },
    #[error("--config {}: expected a mapping of hyperparameter names to values", .path.display())]
    ConfigNotAMapping { path: PathBuf },
    #[error("--set {given}: expected KEY=VALUE")]
    SetSyntax { given: String },
    /// `origin`: the flag that set it; `known`: the hyperparameters.
    #[error("{origin}: `{key}` is not a hyperparameter of {benchmark}; known: {}", .known.join(", "))]
    UnknownHyperparameter {
        origin: String,
        key: String,
        benchmark: &'static str,
        known: Vec<String>,
    },
    #[error(
        "{origin}: `{key}` is fixed in the closed division (reference {reference}, given {given}); use --division open to change it"
    )]
    Fixed {
        origin: String,
        key: String,
        reference: Box<serde_json::Value>,
        given: Box<serde_json::Value>,
    },
    #[error("invalid configuration of {benchmark}: {source}")]
    InvalidConfig {
        benchmark: &'static str,
        source: ConfigError,
    },
    #[error(transparent)]
    Tsa(#[from] crate::tsa::TsaError),
    #[error(transparent)]
    Comm(#[from] CommError),
    #[error("building {benchmark}: {source}")]
    Build {
        benchmark: &'static str,
        source: ModelError,
    },
    #[error(
        "the ranks built different initial weights from seed {seed} (rank {rank} has {weights}…)"
    )]
    WeightsDiffer {
        seed: u64,
        rank: usize,
        /// The first 12 hex digits of this rank's weights' sha256.
        weights: String,
    },
    #[error("opening training data: {0}")]
    OpenTraining(DataStreamError),
    #[error("reading training data: {0}")]
    ReadTraining(referee_datasets::DataError),
    #[error("the training data ended")]
    TrainingDataEnded,
    /// A training step failed in the model.
    #[error(transparent)]
    Step(ModelError),
    #[error("opening evaluation data: {0}")]
    OpenEvaluation(DataStreamError),
    #[error("evaluating: {0}")]
    Evaluate(ModelError),
    /// The ranks could not go on (`reason`: the log's `run_stop_reason`;
    /// `log`: the log, which ends with `run_stop` aborted).
    #[error(
        "{reason}{}",
        .log.as_ref().map(|p| format!("; {} ends with run_stop aborted", p.display())).unwrap_or_default()
    )]
    PeersFailed {
        reason: String,
        log: Option<PathBuf>,
    },
}

impl SessionError {
    pub fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        SessionError::Io {
            path: path.into(),
            source,
        }
    }
}

/// The ranks could not communicate. Cloned: a failed collective keeps its
/// first error and gives it to every later call.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CommError {
    #[error(
        "{what}: interrupted by {signal} while waiting for the other ranks (the launcher stops every rank when one fails or the job is cancelled)"
    )]
    Interrupted { what: String, signal: String },
    #[error(
        "{what}: no answer from the other ranks for {:.0} s: a peer has failed or hangs (REFEREE_PEER_TIMEOUT_S sets this limit)",
        .timeout.as_secs_f64()
    )]
    Timeout { what: String, timeout: Duration },
    #[error(
        "rank {rank} of {world} asks for cuda:{ordinal}, but this referee build has no GPU support; rebuild with `--features mpi,cuda`"
    )]
    NoGpuSupport {
        rank: usize,
        world: usize,
        ordinal: usize,
    },
    #[error(
        "this process is rank {rank} of {world} ({launcher}), but this referee build has no multi-process back end; rebuild with `--features mpi` (Debian: apt-get install libopenmpi-dev openmpi-bin libclang-dev)"
    )]
    NoMultiProcess {
        rank: usize,
        world: usize,
        launcher: &'static str,
    },
    #[error("MPI was already initialised in this process (one referee run per process)")]
    MpiInitialised,
    #[error(
        "{launcher} says this is rank {rank} of {world}, but MPI says rank {mpi_rank} of {mpi_world}: was referee started by a launcher whose MPI is not the one referee was built with (e.g. `srun` without `--mpi=pmix`)?"
    )]
    RankMismatch {
        launcher: &'static str,
        rank: usize,
        world: usize,
        mpi_rank: usize,
        mpi_world: usize,
    },
    #[error("communication already failed: {0}")]
    AlreadyFailed(Box<CommError>),
    #[error("too many gradients for one MPI call")]
    TooManyGradients,
    #[error("the NCCL communicator is gone")]
    NoCommunicator,
    /// An MPI, CUDA or NCCL call failed (`what`: the operation; `detail`:
    /// the library's error).
    #[error("{what}: {detail}")]
    Call { what: String, detail: String },
    #[error(transparent)]
    Gpu(#[from] GpuError),
}

/// A GPU (or NCCL) cannot be used.
#[derive(Debug, Clone, thiserror::Error)]
pub enum GpuError {
    /// No driver, or a build without GPU support (the reason, in words).
    #[error("{0}")]
    Unavailable(String),
    #[error(
        "NCCL could not be loaded: libnccl.so is not on the library path (NCCL from PyPI ships only libnccl.so.2: add a libnccl.so link to it)"
    )]
    NoNccl,
    #[error("cuda:{ordinal}: the CUDA driver library panicked")]
    DriverPanicked { ordinal: usize },
    #[error(
        "cuda:{ordinal} does not exist: this process sees {count} GPU(s) (CUDA_VISIBLE_DEVICES={visible})"
    )]
    NoSuchGpu {
        ordinal: usize,
        count: usize,
        visible: String,
    },
    #[error("the CUDA driver or NCCL panicked during the probe")]
    ProbePanicked,
    /// A driver or NCCL call failed (`what`: the call and device;
    /// `detail`: its error).
    #[error("{what}: {detail}")]
    Call { what: String, detail: String },
}
