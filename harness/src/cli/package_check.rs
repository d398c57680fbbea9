//! `referee package-check`: is a submission folder acceptable?

use super::common::{PolicyArgs, RulesetArgs};
use super::{EXIT_FAIL, EXIT_OK, EXIT_USAGE, init_threads, usage_error};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use referee_rules::package_check::{PackageOptions, check_package};
use referee_rules::report::package::PackageCheckReport;
use referee_rules::report::{Detail, Format, render};
use std::io::IsTerminal;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct PackageCheckArgs {
    /// Submission folders (ORG with systems/ and results/), or a folder of them.
    #[arg(required = true, value_name = "SUBMITTER_DIR")]
    pub dirs: Vec<PathBuf>,
    #[command(flatten)]
    pub rules: RulesetArgs,
    /// Accept failed RCP tests (to be reviewed by the submission committee).
    #[arg(long)]
    pub rcp_bypass: bool,
    /// Skip the seed rules.
    #[arg(long)]
    pub seed_checker_bypass: bool,
    /// For bert, read RCP convergence from train_samples.
    #[arg(long)]
    pub rcp_bert_train_samples: bool,
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// One JSON object per submission folder.
    #[arg(long, group = "format")]
    pub json: bool,
    /// A Markdown report.
    #[arg(long, group = "format")]
    pub markdown: bool,
    /// Also print notes (RCP passes, quirks).
    #[arg(long, short)]
    pub verbose: bool,
    #[arg(short = 'j', long, value_name = "N")]
    pub threads: Option<usize>,
}

pub fn run(a: PackageCheckArgs) -> i32 {
    let (orgs, resolved) = match a.rules.resolve_orgs(&a.dirs) {
        Ok(r) => r,
        Err(e) => return usage_error(e),
    };
    init_threads(a.threads);
    let opts = PackageOptions {
        rcp_bypass: a.rcp_bypass,
        seed_checker_bypass: a.seed_checker_bypass,
        bert_train_samples: a.rcp_bert_train_samples,
        policy: a.policy.mode(),
    };
    let pb = if std::io::stderr().is_terminal() {
        let pb = ProgressBar::new_spinner();
        pb.set_style(
            ProgressStyle::with_template("{spinner} checking logs: {pos}").expect("template"),
        );
        pb
    } else {
        ProgressBar::hidden()
    };
    let folders = orgs
        .iter()
        .map(|org| check_package(&resolved.scoring, org, opts, &|| pb.inc(1)))
        .collect();
    pb.finish_and_clear();
    let report = PackageCheckReport {
        folders,
        rules: resolved.description,
    };
    let detail = Detail { verbose: a.verbose };
    let format = Format::from_flags(a.json, a.markdown);
    if render(&report, format, detail, &mut std::io::stdout().lock()).is_err() {
        return EXIT_USAGE;
    }
    if report.passed() { EXIT_OK } else { EXIT_FAIL }
}
