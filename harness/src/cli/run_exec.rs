//! `referee run --exec … -- CMD`: the flags of `referee run` become an
//! [`ExecRequest`] (crate::exec), resolved by [`ExecConfig::resolve`]; the
//! supervised runs are crate::exec's; this file prints their summary.

use super::run::RunArgs;
use super::{EXIT_FAIL, EXIT_OK, EXIT_USAGE, usage_error};
use crate::exec::{CacheClearMethod, ExecConfig, ExecProgress, ExecRequest};
use crate::rules_env::RulesRequest;
use referee_rules::report::Format;

impl RunArgs {
    /// The external-program session these flags ask for.
    pub fn exec_request(&self) -> ExecRequest {
        let (c, x) = (&self.common, &self.exec_args);
        ExecRequest {
            command: x.command.clone(),
            benchmark: self.benchmark_name(),
            rules: RulesRequest {
                usage: "training",
                ruleset: x.ruleset.clone(),
                rules_dir: x.rules_dir.clone(),
                rcp_dir: None,
                pruning: referee_rules::rcp::Pruning::Official,
            },
            runs: c.runs,
            seed: c.seed,
            division: c.division.into(),
            org: c.org.clone(),
            system: c.system.clone(),
            budget_minutes: c.budget_minutes,
            out: c.out.clone(),
            cache_clear: match (&x.cache_clear_cmd, c.no_cache_clear) {
                (_, true) => CacheClearMethod::Skip,
                (Some(cmd), false) => CacheClearMethod::Command(cmd.clone()),
                (None, false) => CacheClearMethod::DropCaches,
            },
            tolerance_ms: x.witness_tolerance_ms,
            grace: x.grace,
            tsa: c.tsa.clone(),
            power: c.power_request(),
            record_extra: Default::default(),
        }
    }
}

/// `referee run --exec … -- CMD ARGS…`.
pub fn run_exec(a: &RunArgs) -> i32 {
    let extra = std::env::current_dir()
        .map_err(|e| format!("the working directory: {e}"))
        .and_then(|cwd| {
            crate::exec::identity::record_extra(&cwd, &a.exec_args.data).map_err(|e| e.to_string())
        });
    let cfg = match extra.and_then(|x| {
        ExecConfig::resolve(ExecRequest {
            record_extra: x,
            ..a.exec_request()
        })
        .map_err(|e| e.to_string())
    }) {
        Ok(c) => c,
        Err(e) => return usage_error(e),
    };
    let (quiet, json) = (a.common.quiet, a.common.json);
    let progress = ExecProgress { quiet };
    let summary = match crate::exec::execute(&cfg, &progress) {
        Ok(s) => s,
        Err(e) => return usage_error(e),
    };
    let format = if json { Format::Json } else { Format::Human };
    let warnings = crate::exec::identity::run_warnings(&summary, &cfg.req.org, &cfg.system);
    let mut out = std::io::stdout().lock();
    if crate::exec::identity::print_summary(&summary, &warnings, format, &mut out).is_err() {
        return EXIT_USAGE;
    }
    if summary.passed { EXIT_OK } else { EXIT_FAIL }
}
