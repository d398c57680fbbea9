//! `referee package`: flags → a [`PackagingRequest`] (crate::packaging) →
//! the report printed.

use super::common::RulesetArgs;
use super::run::DivisionArg;
use super::{EXIT_FAIL, EXIT_OK, usage_error};
use crate::common::division::Division;
use crate::packaging::{PackagingRequest, package_runs};
use clap::Args;
use referee_rules::report::{Detail, Format, render};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct PackageArgs {
    /// Directories of result logs: outputs of `referee run` (with or
    /// without --exec), or any folder of result_*.txt (then give --ruleset
    /// and --system-json).
    #[arg(required = true, value_name = "LOG_DIR")]
    pub runs: Vec<PathBuf>,
    #[command(flatten)]
    pub rules: RulesetArgs,
    /// The system description, 33 fields (e.g. from `referee system`);
    /// default: the run directories' system.json.
    #[arg(long, value_name = "FILE")]
    pub system_json: Option<PathBuf>,
    /// The training code, copied under the implementation's code/ (without
    /// .git). For `run --exec` results the default is the files git tracks
    /// in the program's working directory, when it is a git checkout;
    /// without code an audit cannot re-run the results.
    #[arg(long, value_name = "DIR")]
    pub code: Option<PathBuf>,
    /// Where the submission folder ORG/ is created.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Submitting organisation: the folder ORG/ (default: the logs'
    /// submission_org; a difference from the logs is a warning).
    #[arg(long)]
    pub org: Option<String>,
    /// System name: systems/SYSTEM.json and results/SYSTEM/ (default: the
    /// logs' submission_platform; a difference from the logs is a warning).
    #[arg(long)]
    pub system: Option<String>,
    /// Expected division (the runs' division must match).
    #[arg(long, value_enum)]
    pub division: Option<DivisionArg>,
    /// One JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: PackageArgs) -> i32 {
    let req = PackagingRequest {
        runs: a.runs.clone(),
        rules: a.rules.request(),
        system_json: a.system_json.clone(),
        code: a.code.clone(),
        out: a.out.clone(),
        org: a.org.clone(),
        system: a.system.clone(),
        division: a.division.map(|d| match d {
            DivisionArg::Closed => Division::Closed,
            DivisionArg::Open => Division::Open,
        }),
    };
    let report = match package_runs(&req) {
        Ok(r) => r,
        Err(e) => return usage_error(e),
    };
    let format = if a.json { Format::Json } else { Format::Human };
    let _ = render(
        &report,
        format,
        Detail::default(),
        &mut std::io::stdout().lock(),
    );
    if report.passed() { EXIT_OK } else { EXIT_FAIL }
}
