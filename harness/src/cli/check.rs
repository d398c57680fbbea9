//! `referee check`: compliance of result logs. The flags resolve into one
//! `CheckConfig` (the rules and checker from crate::check::check_rules);
//! the logs are checked and tallied by crate::check; this file draws the
//! progress, renders each report and the totals, and decides the exit code.

use super::common::{PolicyArgs, UsageArg};
use super::{EXIT_FAIL, EXIT_OK, EXIT_USAGE, init_threads, usage_error};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use referee_rules::checker::{Checker, RulesetChoice, collect_logs};
use referee_rules::compliance::CheckOptions;
use referee_rules::policy::PolicyMode;
use referee_rules::report::{Format, HumanSink, JsonSink, MarkdownSink, Sink, Worst};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Instant;

/// Raw flags of `referee check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Logs to check; a directory is searched recursively for result_*.txt.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Benchmark family of the official rules.
    #[arg(long, value_enum, default_value_t = UsageArg::Training)]
    pub usage: UsageArg,
    /// Official ruleset version (e.g. 5.0.0). Without it, referee's own
    /// benchmarks are recognised from the log and checked with referee's rules.
    #[arg(long, value_name = "X.Y.Z")]
    pub ruleset: Option<String>,
    /// Run only this rule file (relative to the rules directory, or absolute),
    /// like the official --config.
    #[arg(long, value_name = "FILE", conflicts_with = "ruleset")]
    pub config: Option<String>,
    /// Where the official rule files are: the mlperf_logging package directory
    /// or its compliance_checker directory (default: the installed package).
    #[arg(long, value_name = "DIR")]
    pub rules_dir: Option<PathBuf>,
    /// JSON Lines on stdout: one object per log.
    #[arg(long, conflicts_with = "markdown")]
    pub json: bool,
    /// A Markdown report on stdout.
    #[arg(long)]
    pub markdown: bool,
    /// Print only logs that fail or warn.
    #[arg(long)]
    pub failures_only: bool,
    /// Treat repeated identical EXACTLY_ONE keys as errors (official --werror).
    #[arg(long)]
    pub werror: bool,
    /// Drop warnings (official --quiet).
    #[arg(long)]
    pub no_warnings: bool,
    /// Worker threads (default: all cores).
    #[arg(short = 'j', long, value_name = "N")]
    pub threads: Option<usize>,
    /// Verify each log's RFC 3161 time-stamps against this CA certificate
    /// (PEM); a log that is not anchored fails (docs/tsa.md).
    #[arg(long, value_name = "FILE")]
    pub tsa_ca: Option<PathBuf>,
    #[command(flatten)]
    pub policy: PolicyArgs,
}

/// The validated, resolved form of `CheckArgs`.
struct CheckConfig {
    checker: Checker,
    choice: RulesetChoice,
    logs: Vec<PathBuf>,
    /// The paths as typed (a log among them may be a link the user made).
    typed: Vec<PathBuf>,
    format: Format,
    /// Human form: PASS lines too.
    show_pass: bool,
    rules: String,
    threads: usize,
    tsa_ca: Option<PathBuf>,
    policy: PolicyMode,
}

fn resolve(a: CheckArgs) -> Result<CheckConfig, String> {
    let logs = collect_logs(&a.paths).map_err(|e| e.to_string())?;
    if logs.is_empty() {
        return Err(format!(
            "no result_*.txt logs under {}",
            a.paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if let Some(ca) = a.tsa_ca.as_deref().filter(|c| !c.is_file()) {
        return Err(format!("--tsa-ca {}: no such file", ca.display()));
    }
    let opts = CheckOptions {
        werror: a.werror,
        quiet: a.no_warnings,
    };
    let rules = crate::check::check_rules(
        a.usage.as_str(),
        a.ruleset,
        a.config,
        a.rules_dir.as_deref(),
        opts,
    )
    .map_err(|e| e.to_string())?;
    Ok(CheckConfig {
        checker: rules.checker,
        choice: rules.choice,
        logs,
        typed: a.paths,
        format: Format::from_flags(a.json, a.markdown),
        show_pass: !a.failures_only,
        rules: rules.description,
        threads: init_threads(a.threads),
        tsa_ca: a.tsa_ca,
        policy: a.policy.mode(),
    })
}

pub fn run(args: CheckArgs) -> i32 {
    let cfg = match resolve(args) {
        Ok(c) => c,
        Err(e) => return usage_error(e),
    };
    let start = Instant::now();
    let progress = if std::io::stderr().is_terminal() && cfg.logs.len() > 20 {
        let pb = ProgressBar::new(cfg.logs.len() as u64);
        pb.set_style(
            ProgressStyle::with_template("{spinner} checking {pos}/{len} logs {wide_bar} {eta}")
                .expect("valid template"),
        );
        pb
    } else {
        ProgressBar::hidden()
    };
    let mut results =
        crate::check::check_files(&cfg.checker, &cfg.logs, &cfg.typed, &cfg.choice, &|| {
            progress.inc(1)
        });
    if let Some(ca) = &cfg.tsa_ca {
        crate::tsa::verify::annotate_all(&cfg.logs, &mut results, ca);
    }
    progress.finish_and_clear();

    let stdout = std::io::stdout().lock();
    let mut sink: Box<dyn Sink> = match cfg.format {
        Format::Human => Box::new(HumanSink::new(stdout, cfg.show_pass)),
        Format::Json => Box::new(JsonSink::new(stdout)),
        Format::Markdown => Box::new(MarkdownSink::new(stdout)),
    };
    let mut summary = crate::check::tally(&mut results, cfg.policy, cfg.threads, cfg.rules);
    let mut io_ok = true;
    for r in &results {
        let res = match r {
            Ok(rep) => sink.log(rep),
            Err(e) => sink.error(&e.path.display().to_string(), &e.problem.to_string()),
        };
        io_ok &= res.is_ok();
    }
    summary.elapsed = start.elapsed();
    if matches!(cfg.format, Format::Json) {
        // Keep stdout pure JSON Lines; the totals go to stderr.
        let mut h = HumanSink::new(std::io::stderr().lock(), false);
        let _ = h.finish(&summary);
        let _ = sink.finish(&summary);
    } else {
        io_ok &= sink.finish(&summary).is_ok();
    }
    match (io_ok, summary.worst()) {
        (false, _) | (_, Worst::Error) => EXIT_USAGE,
        (true, Worst::Fail) => EXIT_FAIL,
        (true, Worst::Pass) => EXIT_OK,
    }
}
