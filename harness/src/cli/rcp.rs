//! `referee rcp`: the RCP convergence test on benchmark directories.

use super::common::RulesetArgs;
use super::{EXIT_FAIL, EXIT_OK, init_threads, usage_error};
use clap::{Args, ValueEnum};
use rayon::prelude::*;
use referee_rules::diag::Severity;
use referee_rules::rcp::{self, RcpPass};
use referee_rules::report::write_diagnostic;
use referee_rules::score::analyze_run;
use referee_rules::tree;
use std::io::Write;
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
    let ctx = &resolved.ctx;
    let mut opts = ctx.rcp_options(a.rcp_bypass, a.bert_train_samples);
    opts.pass = match a.rcp_pass {
        PassArg::Pruned => RcpPass::Pruned,
        PassArg::Full => RcpPass::Full,
    };
    let mut all_pass = true;
    let mut out = std::io::stdout().lock();
    for dir in &a.dirs {
        let files = match tree::result_files(dir) {
            Ok(f) => f,
            Err(e) => return usage_error(format!("{}: {e}", dir.display())),
        };
        if files.is_empty() {
            return usage_error(format!("{}: no result_*.txt files", dir.display()));
        }
        let runs: Vec<_> = files
            .par_iter()
            .map(|f| analyze_run(ctx, f, a.bert_train_samples).convergence)
            .collect();
        let o = rcp::check_runs(runs, &|b| ctx.table(b), &opts, &ctx.meta);
        let mut diags = o.diagnostics.clone();
        if let Ok(t) = ctx.table(o.benchmark.as_deref().unwrap_or("")) {
            diags.extend(rcp::quirk_notes(&t, &o, &opts));
        }
        if a.write_scaling {
            let p = dir.join("scaling.json");
            let _ = std::fs::remove_file(&p);
            if let Some(f) = o.writes_scaling
                && let Err(e) =
                    std::fs::write(&p, serde_json::json!({ "scaling_factor": f }).to_string())
            {
                return usage_error(format!("{}: {e}", p.display()));
            }
        }
        all_pass &= o.passed;
        if a.json {
            let v = serde_json::json!({
                "path": dir.display().to_string(),
                "verdict": if o.passed { "PASS" } else { "FAIL" },
                "message": o.message,
                "benchmark": o.benchmark,
                "global_batch_size": o.global_batch_size,
                "submission_mean": o.submission_mean,
                "normalization_factor": o.norm_factor,
                "record": o.record,
                "runs": o.runs,
                "diagnostics": diags,
            });
            let _ = writeln!(out, "{v}");
            continue;
        }
        let _ = writeln!(
            out,
            "{} {}: {}{}",
            if o.passed { "PASS" } else { "FAIL" },
            dir.display(),
            o.message,
            o.benchmark
                .as_ref()
                .map(|b| format!(
                    "  ({b}, BS {})",
                    o.global_batch_size
                        .map(|x| x.to_string())
                        .unwrap_or("?".into())
                ))
                .unwrap_or_default()
        );
        if let (Some(r), Some(m)) = (&o.record, o.submission_mean) {
            let _ = writeln!(
                out,
                "  submission mean {m:.4} vs minimum {:.4} (RCP {}: mean {:.4}, stdev {:.4}, max speedup {:.4}); normalisation factor {}",
                r.mean / r.max_speedup,
                r.name,
                r.mean,
                r.stdev,
                r.max_speedup,
                o.norm_factor
            );
        }
        for d in &diags {
            if d.severity != Severity::Note || a.verbose {
                let _ = write_diagnostic(&mut out, d, "  ");
            }
        }
        if resolved.inferred && a.verbose {
            let _ = writeln!(
                out,
                "  note: {} (ruleset read from the path)",
                resolved.rules_desc
            );
        }
    }
    if all_pass { EXIT_OK } else { EXIT_FAIL }
}
