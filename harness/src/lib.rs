//! referee's harness: the `referee` command-line tool.
//!
//! Raw command-line flags are parsed by clap into the structs of
//! [`cli`]; each command then resolves them, in one place, into a validated
//! configuration before any work starts.
//!
//! The folders: [`session`] (referee's own benchmarks: plan, runs, ranks),
//! [`exec`] (a program of the submitter's own run under supervision),
//! [`common`] (what both share: the clock, the MLLOG writer, the witness,
//! fingerprints), [`system`] (probe and describe the machine); [`check`]
//! checks many logs; [`cli`] parses, resolves and renders.

pub mod audit;
pub mod check;
pub mod cli;
pub mod common;
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

/// Every program that links the harness (the `referee` binary, its tests)
/// allocates blocks of 1 KiB or more at a 64-byte cache line, so that the
/// CPU engine's 64-byte vector loads of its buffers never span two lines,
/// and blocks of 2 MiB or more in transparent huge pages (see
/// [`referee_workloads::cpu::aligned`]).
#[global_allocator]
static ALLOC: referee_workloads::cpu::aligned::CacheLineAligned =
    referee_workloads::cpu::aligned::CacheLineAligned;

#[cfg(test)]
mod tests {
    /// The allocator above is the one in force: a buffer the size of an
    /// engine's activations starts at a line (glibc alone starts it 16
    /// bytes past a page).
    #[test]
    fn buffers_start_at_a_cache_line() {
        for len in [256usize, 4096, 1 << 20] {
            let v = vec![0f32; len];
            assert_eq!(v.as_ptr() as usize % 64, 0, "{len} floats");
            let mut w: Vec<f32> = Vec::new();
            w.resize(len, 1.0);
            assert_eq!(w.as_ptr() as usize % 64, 0, "{len} floats, grown");
        }
    }
}
