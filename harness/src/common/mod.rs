//! What the two ways referee runs training share (`session`: its own
//! benchmarks; `exec`: a submitter's program), and what the checks of
//! their output (`check`, `audit`, `tsa`) and the power sampler read back:
//! the harness's own process ([`harness_process`]: the termination flag,
//! the helper threads that yield to the program) and the witness of a
//! supervised run's clock ([`witness`]).
//! Must not know how a run is planned, driven or supervised
//! ([`crate::session`], [`crate::exec`]), how a package is audited
//! ([`crate::audit`]), nor how a command parses its flags or prints
//! ([`crate::cli`]).

pub mod harness_process;
pub mod witness;
