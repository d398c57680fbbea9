//! referee's checking core: reads MLLOG logs and judges them with the
//! official MLPerf rule files, the RCP convergence test and the scoring and
//! packaging rules, reporting structured diagnostics.
//!
//! Layout: [`mllog`] reads logs; [`ruleset`] finds and compiles rule files;
//! [`py`] is the sandboxed interpreter of their Python subset;
//! [`compliance`] runs a rule chain over one log; [`checker`] checks a file
//! (the harness checks many); [`lifecycle`] lists the keys referee acts on of
//! its own accord; [`diag`] is the diagnostic type every check emits;
//! [`policy`] holds the rules the official tools leave unchecked, whose
//! findings stay apart from the official verdict.

pub mod checker;
pub mod compliance;
pub mod diag;
pub mod error;
pub mod escape;
pub mod json;
pub mod layout;
pub mod lifecycle;
pub mod mllog;
pub mod package_check;
pub mod policy;
pub mod py;
pub mod rcp;
pub mod report;
pub mod ruleset;
pub mod ruleset_facts;
pub mod score;
pub mod seeds;
pub mod stats;
pub mod sysdesc;
#[cfg(test)]
mod testing;
pub mod untrusted;
pub mod value;
pub mod yaml;

pub use diag::{Diagnostic, Severity, Verdict};
