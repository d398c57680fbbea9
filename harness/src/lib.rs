//! referee's harness: the `referee` command-line tool.
//!
//! Raw command-line flags are parsed by clap into the structs of
//! [`cli`]; each command then resolves them, in one place, into a validated
//! configuration before any work starts.

pub mod audit;
pub mod cache;
pub mod cli;
pub mod clock;
pub mod collective;
pub mod exec;
pub mod fsutil;
pub mod gpu;
pub mod launch;
pub mod logger;
pub mod nccl_probe;
pub mod own_benchmarks;
pub mod packaging;
pub mod plan;
pub mod provenance;
pub mod rules_env;
pub mod run;
pub mod session;
pub mod slurm;
pub mod supervise;
pub mod sysinfo;
pub mod system;
pub mod tsa;
pub mod witness;
