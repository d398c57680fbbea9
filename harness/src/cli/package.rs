//! `referee package`: run directories → an MLCommons submission folder,
//! checked right after it is built.

use super::run::DivisionArg;
use super::{EXIT_FAIL, EXIT_OK, usage_error};
use crate::registry;
use clap::Args;
use referee_rules::Verdict;
use referee_rules::package::{PackageOptions, check_package};
use referee_rules::report::write_package_human;
use referee_submission::package::{PackageSpec, RunDir, package};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct PackageArgs {
    /// Output directories of `referee run`.
    #[arg(required = true, value_name = "RUN_DIR")]
    pub runs: Vec<PathBuf>,
    /// Where the submission folder ORG/ is created.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Submitting organisation (default: the runs' submission_org).
    #[arg(long)]
    pub org: Option<String>,
    /// System name (default: the runs' submission_platform).
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
    let mut runs = Vec::new();
    for p in &a.runs {
        match RunDir::open(p) {
            Ok(r) => runs.push(r),
            Err(e) => return usage_error(e),
        }
    }
    if let Some(d) = a.division {
        let want = match d {
            DivisionArg::Closed => "closed",
            DivisionArg::Open => "open",
        };
        if let Some(r) = runs.iter().find(|r| r.division() != want) {
            return usage_error(format!(
                "{} was run in the {} division, not {want}",
                r.path.display(),
                r.division()
            ));
        }
    }
    let org = a
        .org
        .clone()
        .unwrap_or_else(|| runs[0].record["org"].as_str().unwrap_or("").to_string());
    let system = a
        .system
        .clone()
        .unwrap_or_else(|| runs[0].record["system"].as_str().unwrap_or("").to_string());
    let meta = registry::meta();
    let required = registry::benchmark_names()
        .into_iter()
        .filter_map(|b| {
            meta.benchmark("training", b)
                .map(|m| (b.to_string(), m.result_files))
        })
        .collect();
    let spec = PackageSpec {
        org,
        system,
        required_runs: required,
        implementation: format!("referee-{}", crate::provenance::VERSION),
    };
    let summary = match package(&runs, &spec, &a.out) {
        Ok(s) => s,
        Err(e) => return usage_error(e),
    };
    // Check what was built, with referee's own ruleset.
    let ctx = registry::own_score_context();
    let rep = check_package(&ctx, &summary.path, PackageOptions::default(), &|| {});
    if a.json {
        println!("{}", serde_json::json!({"package": summary, "check": rep}));
    } else {
        println!(
            "packaged {} ({})",
            summary.path.display(),
            summary
                .benchmarks
                .iter()
                .map(|(b, n)| format!("{b}: {n} runs"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let mut out = std::io::stdout().lock();
        let _ = write_package_human(&mut out, &rep, false);
    }
    if rep.verdict == Verdict::Pass {
        EXIT_OK
    } else {
        EXIT_FAIL
    }
}
