//! referee's harness: the `referee` command-line tool.
//!
//! Raw command-line flags are parsed by clap into the structs of
//! [`cli`]; each command then resolves them, in one place, into a validated
//! configuration before any work starts.
//!
//! The folders: [`session`] (referee's own benchmarks: plan, runs, the
//! MLLOG writer, ranks), [`exec`] (a program of the submitter's own run
//! under supervision, and its witness), [`system`] (probe and describe the
//! machine); [`check`] checks many logs; [`cli`] parses, resolves and
//! renders.

pub mod audit;
pub mod check;
pub mod cli;
pub mod exec;
pub mod fsutil;
pub mod outcome;
pub mod outdir;
pub mod own_benchmarks;
pub mod packaging;
pub mod power;
pub mod provenance;
pub mod rules_env;
pub mod session;
pub mod signing;
pub mod slurm;
pub mod system;
pub mod tsa;
