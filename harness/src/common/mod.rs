//! What referee's two ways of running training share — `session` (its own
//! benchmarks) and `exec` (a submitter's program) — and what the checks of
//! their output (`check`, `audit`, `tsa`) and the power sampler read back:
//!
//! - [`cache`]: the page cache cleared before a run;
//! - [`clock`]: the clock the harness owns, and [`logger`], its MLLOG
//!   writer;
//! - [`division`]: the MLPerf division a run is in;
//! - [`fingerprint`]: fingerprints of file trees (a dataset, the code a
//!   program ran from);
//! - [`harness_process`]: the harness's own process (the termination
//!   flag; its helper threads that yield to the program);
//! - [`witness`]: the witness of a supervised run's clock and its checks.
//!
//! It must not know how a run is planned, driven or supervised
//! ([`crate::session`], [`crate::exec`]), how a package is audited
//! ([`crate::audit`]), nor how a command parses its flags or prints
//! ([`crate::cli`]).

pub mod cache;
pub mod clock;
pub mod division;
pub mod fingerprint;
pub mod harness_process;
pub mod logger;
pub mod witness;
