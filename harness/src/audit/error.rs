//! Why an audit could not be carried out at all (an unreadable folder,
//! rules or configuration). Findings — a signature that fails, a re-run
//! that differs or cannot be done — are in the report, not errors.

use crate::common::fingerprint::FingerprintError;
use crate::exec::error::ExecError;
use crate::rules_env::RulesError;
use referee_submission::fs::FsError;
use referee_submission::sign::SignError;
use std::io;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error(transparent)]
    Verify(#[from] SignError),
    #[error(transparent)]
    Rules(#[from] RulesError),
    #[error(transparent)]
    Fingerprint(#[from] FingerprintError),
    /// A `--data DIR` could not be fingerprinted.
    #[error("--data: {0}")]
    Data(FingerprintError),
    #[error(transparent)]
    Dataset(#[from] referee_datasets::DataError),
    #[error(transparent)]
    Exec(#[from] ExecError),
    #[error(transparent)]
    Fs(#[from] FsError),
    #[error("{}: {source}", .path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error("{}: unreadable configuration", .path.display())]
    UnreadableConfig { path: PathBuf },
    /// No CPU engine for the re-runs (`REFEREE_CPU_KERNELS`; the message
    /// of the model library).
    #[error("{0}")]
    Engine(String),
}

/// Why a re-run the auditor asked for cannot be done (a finding).
#[derive(Debug, Clone, thiserror::Error)]
pub enum NotRerunnable {
    #[error("`{benchmark}` is not one of referee's benchmarks: referee cannot train it here")]
    NotOwnBenchmark { benchmark: String },
    #[error(
        "no benchmarks/{benchmark}/implementations/*/config.json: the configuration to re-run is not recorded"
    )]
    NoConfig { benchmark: String },
}

/// No sandbox for the re-run of a supervised program (the re-run is then
/// not done).
#[derive(Debug, Clone, thiserror::Error)]
pub enum SandboxError {
    /// `hint`: how to install it ([`super::sandbox::INSTALL_HINT`]).
    #[error("bubblewrap (bwrap) is not installed: {hint}")]
    NotInstalled { hint: &'static str },
    /// `message`: why it could not start.
    #[error("{}: cannot start: {message}", .bwrap.display())]
    CannotStart { bwrap: PathBuf, message: String },
    /// The probe ran and failed (`status`, `stderr`: what it said).
    #[error(
        "bubblewrap cannot create its namespaces on this machine ({status}: {stderr}); unprivileged user namespaces may be disabled (sysctl kernel.unprivileged_userns_clone=1, or an AppArmor profile for bwrap), or a container forbids them; or give --sandbox none"
    )]
    NoNamespaces { status: String, stderr: String },
    /// The system-call filter could not be built for this machine.
    #[error("the sandbox's system-call filter cannot be built here: {message}")]
    Seccomp { message: String },
}
