//! A session of referee's own benchmarks: a request resolved into a plan
//! ([`plan`]), the runs of the plan one after the other and their closing
//! check ([`runs`]), the life of one run ([`run`]) with the MLLOG writer
//! ([`logger`]), the clock the harness owns ([`clock`]), the page cache
//! cleared before it ([`cache`]), the ranks of a data-parallel run
//! ([`launch`], [`collective`], [`gpu`]), and its progress drawn on a
//! terminal ([`progress`]). It must not know how a command
//! parses its flags or prints ([`crate::cli`]), nor how an external program
//! is supervised ([`crate::exec`]).

pub mod cache;
pub mod clock;
pub mod collective;
pub mod error;
pub mod gpu;
pub mod launch;
pub mod logger;
pub mod nccl_probe;
pub mod plan;
pub mod progress;
pub mod run;
pub mod runs;

pub use runs::{
    LogCheck, QuietSession, RunSummary, SessionObserver, closing_check, execute, run_line,
    target_text,
};
