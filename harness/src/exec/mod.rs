//! `referee run --exec`: a training program of the submitter's own run N
//! times under the harness's rules. This folder owns the session's
//! configuration ([`config`]), its runs and their closing check
//! ([`runs`]), the supervision of one run as a state machine from spawn to
//! the final rename ([`supervise`]) and the parts it drives — the file
//! follower ([`follower`]), the result file's write-back ([`writeback`]),
//! the de-duplication of MLLOG lines ([`dedup`]), the program's process
//! group and signals ([`process`]) — where the witness of the run's clock
//! is kept and found again ([`witness`]), and what the session records of
//! its code and data, with the identity check of its summary
//! ([`identity`]). It must not know how referee's own benchmarks train
//! ([`crate::session`]), how a package is audited ([`crate::audit`]), nor
//! how a command parses its flags or prints ([`crate::cli`]); the rules it
//! applies come from `referee_rules`, what it shares with `session` from
//! [`crate::common`].

pub mod config;
mod dedup;
pub mod error;
mod follower;
pub mod identity;
pub mod process;
pub mod runs;
pub mod supervise;
pub mod witness;
mod writeback;

pub use config::{CacheClearMethod, Confinement, ExecConfig, ExecRequest, Wrap};
pub use runs::{
    ExecLogCheck, ExecObserver, ExecProgress, ExecRun, ExecSummary, LogVerdict, execute,
    provenance_env, run_one,
};
pub use supervise::RunStatus;
