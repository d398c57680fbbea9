//! `referee rcp`: the RCP convergence test on benchmark directories.

use super::common::RulesetArgs;
use super::{EXIT_FAIL, EXIT_OK, EXIT_USAGE, init_threads, usage_error};
use clap::{Args, ValueEnum};

use referee_rules::rcp::RcpPass;
use referee_rules::report::rcp::{RcpDirReport, RcpReport};
use referee_rules::report::{Detail, Format, render};
use referee_rules::score::check_rcp_dir;
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PassArg {
    Pruned,
    Full,
}

#[derive(Debug, Args)]
pub struct RcpArgs {
    /// Benchmark directories (each holding result_*.txt).
    #[arg(required = true, value_name = "BENCHMARK_DIR")]
    pub dirs: Vec<PathBuf>,
    #[command(flatten)]
    pub rules: RulesetArgs,
    /// Which RCP records to test against.
    #[arg(long, value_enum, default_value_t = PassArg::Pruned)]
    pub rcp_pass: PassArg,
    /// Accept a failed test the way the package checker's --rcp-bypass does.
    #[arg(long)]
    pub rcp_bypass: bool,
    /// For bert, read convergence from train_samples.
    #[arg(long)]
    pub bert_train_samples: bool,
    /// Write scaling.json where the official package checker would (the
    /// default never modifies the directory).
    #[arg(long)]
    pub write_scaling: bool,
    /// Print the reference record used and notes.
    #[arg(long, short)]
    pub verbose: bool,
    /// One JSON object per directory.
    #[arg(long)]
    pub json: bool,
    #[arg(short = 'j', long, value_name = "N")]
    pub threads: Option<usize>,
}

pub fn run(a: RcpArgs) -> i32 {
    if let Err(e) = super::common::existing_dirs(&a.dirs) {
        return usage_error(e);
    }
    let resolved = match a.rules.resolve(&a.dirs) {
        Ok(r) => r,
        Err(e) => return usage_error(e),
    };
    init_threads(a.threads);
    let ctx = &resolved.scoring;
    let mut opts = ctx.rcp_options(a.rcp_bypass, a.bert_train_samples);
    opts.pass = match a.rcp_pass {
        PassArg::Pruned => RcpPass::Pruned,
        PassArg::Full => RcpPass::Full,
    };
    let mut report = RcpReport {
        dirs: Vec::new(),
        inferred_rules: resolved.inferred.then(|| resolved.description.clone()),
    };
    for dir in &a.dirs {
        let check = match check_rcp_dir(ctx, dir, &opts, a.bert_train_samples) {
            Ok(c) => c,
            Err(e) => return usage_error(e),
        };
        let diags = check.diagnostics();
        let o = check.outcome;
        if a.write_scaling
            && let Err(e) = referee_rules::score::write_scaling(dir, o.writes_scaling)
        {
            return usage_error(e);
        }
        report
            .dirs
            .push(RcpDirReport::new(dir.display().to_string(), &o, diags));
    }
    let format = if a.json { Format::Json } else { Format::Human };
    let detail = Detail { verbose: a.verbose };
    if render(&report, format, detail, &mut std::io::stdout().lock()).is_err() {
        return EXIT_USAGE;
    }
    if report.passed() { EXIT_OK } else { EXIT_FAIL }
}
