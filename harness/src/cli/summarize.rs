//! `referee summarize`: scores of submission folders.

use super::common::{PolicyArgs, RulesetArgs};
use super::{EXIT_FAIL, EXIT_OK, EXIT_USAGE, init_threads, usage_error};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use referee_rules::policy::PolicySummary;
use referee_rules::report::scores::{ScoreTable, SummaryLine, write_csv};
use referee_rules::report::{Detail, Format, render};
use referee_rules::score::{count_logs, finish_rows, summarize};
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
    let (orgs, resolved) = match a.rules.resolve_orgs(&a.dirs) {
        Ok(r) => r,
        Err(e) => return usage_error(e),
    };
    let threads = init_threads(a.threads);
    let start = Instant::now();
    let total = count_logs(&orgs, &resolved.scoring.usage);
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
    finish_rows(&mut rows, mode);
    let table = ScoreTable { rows };
    let mut out = std::io::stdout().lock();
    let res = if a.csv {
        write_csv(&mut out, &table.rows)
    } else {
        let format = Format::from_flags(a.json, a.markdown);
        render(&table, format, Detail::default(), &mut out)
    };
    if res.is_err() {
        return EXIT_USAGE;
    }
    let mut err = std::io::stderr().lock();
    let _ = table.write_findings(&mut err, &problems, a.verbose);
    let policy = table
        .write_policy(&mut err, a.verbose)
        .unwrap_or_else(|_| PolicySummary::of(mode, std::iter::empty()));
    let line = SummaryLine {
        table: &table,
        logs: total,
        submitters: orgs.len(),
        rules: &resolved.description,
        inferred: resolved.inferred,
        seconds: start.elapsed().as_secs_f64(),
        threads,
    };
    let _ = writeln!(err, "{line}");
    if problems.iter().any(|d| d.is_error()) {
        EXIT_USAGE
    } else if policy.fails() {
        EXIT_FAIL
    } else {
        EXIT_OK
    }
}
