//! `referee summarize`: scores of submission folders.

use super::common::{PolicyArgs, RulesetArgs};
use super::{EXIT_FAIL, EXIT_OK, EXIT_USAGE, init_threads, usage_error};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use referee_rules::diag::Severity;
use referee_rules::layout;
use referee_rules::policy::PolicySummary;
use referee_rules::report::scores::{ScoreTable, write_csv};
use referee_rules::report::{Detail, Format, render, write_diagnostic};
use referee_rules::score::summarize;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Instant;

#[derive(Debug, Args)]
pub struct SummarizeArgs {
    /// Submission folders (ORG with systems/ and results/), or a folder of them.
    #[arg(required = true, value_name = "SUBMITTER_DIR")]
    pub dirs: Vec<PathBuf>,
    #[command(flatten)]
    pub rules: RulesetArgs,
    /// CSV on stdout.
    #[arg(long, group = "format")]
    pub csv: bool,
    /// Markdown table on stdout.
    #[arg(long, group = "format")]
    pub markdown: bool,
    /// JSON Lines on stdout: one object per system × benchmark.
    #[arg(long, group = "format")]
    pub json: bool,
    /// Also print notes and per-run findings.
    #[arg(long, short)]
    pub verbose: bool,
    #[arg(short = 'j', long, value_name = "N")]
    pub threads: Option<usize>,
    #[command(flatten)]
    pub policy: PolicyArgs,
}

pub fn run(a: SummarizeArgs) -> i32 {
    let orgs = match layout::find_orgs(&a.dirs) {
        Ok(o) => o,
        Err(e) => return usage_error(e),
    };
    let resolved = match a.rules.resolve(&a.dirs) {
        Ok(r) => r,
        Err(e) => return usage_error(e),
    };
    let threads = init_threads(a.threads);
    let start = Instant::now();
    let total: usize = orgs
        .iter()
        .flat_map(|o| layout::benchmark_dirs(o, &resolved.scoring.usage).unwrap_or_default())
        .map(|d| layout::result_files(&d.path).map(|f| f.len()).unwrap_or(0))
        .sum();
    let pb = if std::io::stderr().is_terminal() {
        let pb = ProgressBar::new(total as u64);
        pb.set_style(
            ProgressStyle::with_template("{spinner} scoring {pos}/{len} logs {wide_bar} {eta}")
                .expect("template"),
        );
        pb
    } else {
        ProgressBar::hidden()
    };
    let (mut rows, problems) = summarize(&resolved.scoring, &orgs, &|| pb.inc(1));
    pb.finish_and_clear();
    let mode = a.policy.mode();
    for r in &mut rows {
        referee_rules::policy::apply_mode(&mut r.score.policy, mode);
        if !r.score.policy.is_empty() {
            r.score.policy_summary = Some(PolicySummary::of(mode, &r.score.policy));
        }
    }
    let policy = PolicySummary::of(mode, rows.iter().flat_map(|r| &r.score.policy));
    rows.sort_by(|x, y| {
        (&x.submitter_dir, &x.system, &x.score.benchmark).cmp(&(
            &y.submitter_dir,
            &y.system,
            &y.score.benchmark,
        ))
    });
    let table = ScoreTable { rows };
    let mut out = std::io::stdout().lock();
    let res = if a.csv {
        write_csv(&mut out, &table.rows)
    } else {
        let format = Format::from_flags(a.json, a.markdown);
        render(&table, format, Detail::default(), &mut out)
    };
    let rows = table.rows;
    if res.is_err() {
        return EXIT_USAGE;
    }
    // Findings go to stderr so stdout stays a clean table/CSV/JSON.
    let mut err = std::io::stderr().lock();
    for d in &problems {
        let _ = write_diagnostic(&mut err, d, "");
    }
    let mut invalid = 0;
    for r in &rows {
        if r.score.score_minutes.is_none() {
            invalid += 1;
        }
        for d in &r.score.diagnostics {
            let show = match d.severity {
                Severity::Error => true,
                Severity::Warning | Severity::Note => a.verbose,
            };
            if show {
                let _ = writeln!(
                    err,
                    "{}/{}/{}:",
                    r.submitter_dir, r.system, r.score.benchmark
                );
                let _ = write_diagnostic(&mut err, d, "  ");
            }
        }
    }
    for r in rows
        .iter()
        .filter(|r| a.verbose && !r.score.policy.is_empty())
    {
        let _ = writeln!(
            err,
            "{}/{}/{} (beyond the official verdict):",
            r.submitter_dir, r.system, r.score.benchmark
        );
        for d in &r.score.policy {
            let _ = write_diagnostic(&mut err, d, "  ");
        }
    }
    if policy.findings > 0 {
        let _ = writeln!(
            err,
            "{}{}",
            policy.line(),
            if a.verbose { "" } else { " (-v lists them)" }
        );
    }
    let _ = writeln!(
        err,
        "{} rows ({} without a valid score) from {} logs of {} submitter{}, {}{}; {:.2} s, {} thread{}",
        rows.len(),
        invalid,
        total,
        orgs.len(),
        if orgs.len() == 1 { "" } else { "s" },
        resolved.description,
        if resolved.inferred {
            " (ruleset read from the path)"
        } else {
            ""
        },
        start.elapsed().as_secs_f64(),
        threads,
        if threads == 1 { "" } else { "s" }
    );
    if problems.iter().any(|d| d.is_error()) {
        EXIT_USAGE
    } else if policy.fails() {
        EXIT_FAIL
    } else {
        EXIT_OK
    }
}
