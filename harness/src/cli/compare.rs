//! `referee compare BASELINE CANDIDATE [LATER…]`: the release-to-release
//! regression gate; with three releases or more, the history of a series
//! (`compare::history`). The flags resolve into one [`CompareRequest`]; the work is in
//! `referee_submission::compare` (loading the sides, comparing them); the
//! comparison renders through the report layer (human on stdout, or JSON;
//! Markdown and HTML into files); the exit code is the comparison's (0 no
//! regression, 1 regression or convergence change, 2 bad input).

use super::common::{RulesetArgs, write_page};
use super::{EXIT_USAGE, init_threads, usage_error};
use crate::rules_env::RulesPerSide;
use clap::Args;
use referee_rules::report::{Detail, Format, Report, render};
use referee_submission::compare::{self, Options, html};
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The baseline: a submission folder (or a folder of them), a directory
    /// of `referee run` outputs, one run output, a benchmark's results
    /// directory, or NeMo / Megatron logs (a file or a folder of them).
    #[arg(value_name = "BASELINE")]
    pub baseline: PathBuf,
    /// The candidate, in any of the baseline's forms.
    #[arg(value_name = "CANDIDATE")]
    pub candidate: PathBuf,
    /// Later releases: with any, the history of the series (each release
    /// against the previous one and the first; exit 1 on any failing step).
    #[arg(value_name = "LATER")]
    pub later: Vec<PathBuf>,
    /// Exit 1 when the candidate's performance against the baseline
    /// (baseline time ÷ candidate time, or candidate samples/s ÷ baseline
    /// samples/s) is below R (0.95: within 5 % of the baseline).
    #[arg(long, value_name = "R")]
    pub min_ratio: Option<f64>,
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
    /// dataset, ruleset, mode, framework runs' configuration); every report
    /// says so.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub rules: RulesetArgs,
    #[arg(short = 'j', long, value_name = "N")]
    pub threads: Option<usize>,
}

/// A validated `referee compare` request.
pub struct CompareRequest {
    pub baseline: PathBuf,
    pub candidate: PathBuf,
    pub later: Vec<PathBuf>,
    pub options: Options,
    pub rules: RulesPerSide,
}

impl CompareArgs {
    /// The request these flags make (errors are usage errors).
    pub fn request(&self) -> Result<CompareRequest, String> {
        if !(self.confidence > 0.0 && self.confidence < 1.0) {
            return Err(format!(
                "--confidence {}: must lie strictly between 0 and 1",
                self.confidence
            ));
        }
        if !(self.threshold >= 0.0 && self.threshold.is_finite()) {
            return Err(format!(
                "--threshold {}: must be a non-negative percentage",
                self.threshold
            ));
        }
        if let Some(r) = self.min_ratio
            && !(r > 0.0 && r.is_finite())
        {
            return Err(format!("--min-ratio {r}: must be a positive number"));
        }
        Ok(CompareRequest {
            baseline: self.baseline.clone(),
            candidate: self.candidate.clone(),
            later: self.later.clone(),
            options: Options {
                threshold: self.threshold / 100.0,
                confidence: self.confidence,
                force: self.force,
                min_ratio: self.min_ratio,
                ..Options::default()
            },
            rules: RulesPerSide::new(self.rules.request()),
        })
    }
}

/// Render `cmp` in `format` into a new file.
fn render_file<R: Report>(cmp: &R, format: Format, path: &Path) -> Result<(), String> {
    let err = |e: std::io::Error| format!("{}: {e}", path.display());
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).map_err(err)?);
    render(cmp, format, Detail::default(), &mut f).map_err(err)?;
    f.flush().map_err(err)
}

pub fn run(a: CompareArgs) -> i32 {
    init_threads(a.threads);
    let req = match a.request() {
        Ok(r) => r,
        Err(e) => return usage_error(e),
    };
    if !req.later.is_empty() {
        return run_history(&a, &req);
    }
    let baseline = match compare::load_side(&req.baseline, &req.rules) {
        Ok(s) => s,
        Err(e) => return usage_error(format!("baseline: {e}")),
    };
    let candidate = match compare::load_side(&req.candidate, &req.rules) {
        Ok(s) => s,
        Err(e) => return usage_error(format!("candidate: {e}")),
    };
    let cmp = match compare::compare(&baseline, &candidate, &req.options) {
        Ok(c) => c,
        Err(e) => return usage_error(e),
    };
    if let Some(p) = &a.markdown
        && let Err(e) = render_file(&cmp, Format::Markdown, p)
    {
        return usage_error(e);
    }
    if let Some(p) = &a.html
        && let Err(e) = write_page(p, html::html(&cmp))
    {
        return usage_error(e);
    }
    let format = if a.json { Format::Json } else { Format::Human };
    if render(
        &cmp,
        format,
        Detail::default(),
        &mut std::io::stdout().lock(),
    )
    .is_err()
    {
        return EXIT_USAGE;
    }
    cmp.exit_code
}

/// `referee compare A B C …`: the history of a series of releases.
fn run_history(a: &CompareArgs, req: &CompareRequest) -> i32 {
    let paths: Vec<&PathBuf> = [&req.baseline, &req.candidate]
        .into_iter()
        .chain(&req.later)
        .collect();
    let mut sides = Vec::new();
    for (i, p) in paths.iter().enumerate() {
        match compare::load_side(p, &req.rules) {
            Ok(s) => sides.push(s),
            Err(e) => return usage_error(format!("release {}: {e}", i + 1)),
        }
    }
    let h = match compare::history::history(&sides, &req.options) {
        Ok(h) => h,
        Err(e) => return usage_error(e),
    };
    if let Some(p) = &a.markdown
        && let Err(e) = render_file(&h, Format::Markdown, p)
    {
        return usage_error(e);
    }
    if let Some(p) = &a.html
        && let Err(e) = write_page(p, html::history_html(&h))
    {
        return usage_error(e);
    }
    let format = if a.json { Format::Json } else { Format::Human };
    if render(&h, format, Detail::default(), &mut std::io::stdout().lock()).is_err() {
        return EXIT_USAGE;
    }
    h.exit_code
}
