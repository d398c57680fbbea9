//! `referee compare BASELINE CANDIDATE`: the release-to-release regression
//! gate. The work is in `referee_submission::compare`; this file resolves
//! the flags and the rules, prints the reports and decides the exit code
//! (0 no regression, 1 regression or convergence change, 2 bad input).

use super::common::RulesetArgs;
use super::{EXIT_USAGE, init_threads, usage_error};
use crate::rules_env::RulesPerSide;
use clap::Args;
use referee_submission::compare::{self, Options, html, report};
use std::path::{Path, PathBuf};

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The baseline: a submission folder (or a folder of them), a directory
    /// of `referee run` outputs, one run output, or a benchmark's results
    /// directory.
    #[arg(value_name = "BASELINE")]
    pub baseline: PathBuf,
    /// The candidate, in any of the baseline's forms.
    #[arg(value_name = "CANDIDATE")]
    pub candidate: PathBuf,
    /// A change smaller than this (percent) is never a regression.
    #[arg(long, default_value_t = 5.0, value_name = "PCT")]
    pub threshold: f64,
    /// Confidence level of the bootstrap interval.
    #[arg(long, default_value_t = 0.95, value_name = "C")]
    pub confidence: f64,
    /// Print one JSON object on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Also write a Markdown report.
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    /// Also write a self-contained HTML report with plots.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Compare even where the benchmark definitions differ (target,
    /// dataset, ruleset, mode); every report says so.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub rules: RulesetArgs,
    #[arg(short = 'j', long, value_name = "N")]
    pub threads: Option<usize>,
}

fn write_file(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

pub fn run(a: CompareArgs) -> i32 {
    init_threads(a.threads);
    if !(a.confidence > 0.0 && a.confidence < 1.0) {
        return usage_error(format!(
            "--confidence {}: must lie strictly between 0 and 1",
            a.confidence
        ));
    }
    if !(a.threshold >= 0.0 && a.threshold.is_finite()) {
        return usage_error(format!(
            "--threshold {}: must be a non-negative percentage",
            a.threshold
        ));
    }
    let rules = RulesPerSide::new(a.rules.request());
    let baseline = match compare::load_side(&a.baseline, &rules) {
        Ok(s) => s,
        Err(e) => return usage_error(format!("baseline: {e}")),
    };
    let candidate = match compare::load_side(&a.candidate, &rules) {
        Ok(s) => s,
        Err(e) => return usage_error(format!("candidate: {e}")),
    };
    let opts = Options {
        threshold: a.threshold / 100.0,
        confidence: a.confidence,
        force: a.force,
        ..Options::default()
    };
    let cmp = match compare::compare(&baseline, &candidate, &opts) {
        Ok(c) => c,
        Err(e) => return usage_error(e),
    };
    if let Some(p) = &a.markdown
        && let Err(e) = write_file(p, &report::markdown(&cmp))
    {
        return usage_error(e);
    }
    if let Some(p) = &a.html {
        let page = match html::html(&cmp) {
            Ok(h) => h,
            Err(e) => return usage_error(e),
        };
        if let Err(e) = write_file(p, &page) {
            return usage_error(e);
        }
    }
    let mut out = std::io::stdout().lock();
    let res = if a.json {
        use std::io::Write;
        writeln!(out, "{}", report::json(&cmp))
    } else {
        report::write_human(&mut out, &cmp)
    };
    if res.is_err() {
        return EXIT_USAGE;
    }
    cmp.exit_code
}
