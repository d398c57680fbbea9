//! `referee run --exec … -- CMD`: the flags of `referee run` become an
//! [`ExecRequest`] (crate::exec), resolved by [`ExecConfig::resolve`]; the
//! supervised runs are crate::exec's; this file prints their summary.

use super::run::{ModeArg, RunArgs};
use super::{EXIT_FAIL, EXIT_OK, EXIT_USAGE, usage_error};
use crate::exec::{CacheClearMethod, ExecConfig, ExecProgress, ExecRequest};
use crate::rules_env::RulesRequest;
use referee_rules::report::Format;

impl RunArgs {
    /// The external-program session these flags ask for.
    pub fn exec_request(&self) -> Result<ExecRequest, String> {
        if self.config.is_some() || !self.sets.is_empty() {
            return Err("--config and --set configure referee's own benchmarks; with --exec, the program reads its own configuration".into());
        }
        if self.mode != ModeArg::TimeToTrain {
            return Err("--mode throughput is for referee's own benchmarks; `referee perf` reads an external program's throughput".into());
        }
        if !(self.grace_seconds >= 0.0 && self.grace_seconds.is_finite()) {
            return Err(format!(
                "--grace-seconds {}: must be a non-negative number",
                self.grace_seconds
            ));
        }
        Ok(ExecRequest {
            command: self.command.clone(),
            benchmark: self.benchmark_name(),
            rules: RulesRequest {
                usage: "training",
                ruleset: self.ruleset.clone(),
                rules_dir: self.rules_dir.clone(),
                rcp_dir: None,
                pruning: referee_rules::rcp::Pruning::Official,
            },
            runs: self.runs,
            seed: self.seed,
            division: self.division(),
            org: self.org.clone(),
            system: self.system.clone(),
            budget_minutes: self.budget_minutes,
            out: self.out.clone(),
            cache_clear: match (&self.cache_clear_cmd, self.no_cache_clear) {
                (_, true) => CacheClearMethod::Skip,
                (Some(c), false) => CacheClearMethod::Command(c.clone()),
                (None, false) => CacheClearMethod::DropCaches,
            },
            tolerance_ms: self.witness_tolerance_ms,
            grace: std::time::Duration::from_secs_f64(self.grace_seconds),
            tsa: self.tsa.clone(),
            power: self.power_request()?,
            record_extra: Default::default(),
        })
    }
}

/// `referee run --exec … -- CMD ARGS…`.
pub fn run_exec(a: &RunArgs) -> i32 {
    let extra = std::env::current_dir()
        .map_err(|e| format!("the working directory: {e}"))
        .and_then(|cwd| {
            crate::exec::identity::record_extra(&cwd, &a.data).map_err(|e| e.to_string())
        });
    let req = a.exec_request().and_then(|r| Ok((r, extra?)));
    let cfg = match req.and_then(|(r, x)| {
        ExecConfig::resolve(ExecRequest {
            record_extra: x,
            ..r
        })
        .map_err(|e| e.to_string())
    }) {
        Ok(c) => c,
        Err(e) => return usage_error(e),
    };
    let progress = ExecProgress { quiet: a.quiet };
    let summary = match crate::exec::execute(&cfg, &progress) {
        Ok(s) => s,
        Err(e) => return usage_error(e),
    };
    let format = if a.json { Format::Json } else { Format::Human };
    let warnings = crate::exec::identity::run_warnings(&summary, &cfg.req.org, &cfg.system);
    let mut out = std::io::stdout().lock();
    if crate::exec::identity::print_summary(&summary, &warnings, format, &mut out).is_err() {
        return EXIT_USAGE;
    }
    if summary.passed { EXIT_OK } else { EXIT_FAIL }
}
