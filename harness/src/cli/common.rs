//! Flags shared by the commands that judge results against a ruleset
//! (`rcp`, `summarize`, `package-check`), resolved in one place.

use crate::rules_env::{ResolvedRules, RulesRequest, resolve_rules};
use clap::{Args, ValueEnum};
use referee_rules::rcp::Pruning;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum UsageArg {
    Training,
    Hpc,
}

impl UsageArg {
    pub fn as_str(self) -> &'static str {
        match self {
            UsageArg::Training => "training",
            UsageArg::Hpc => "hpc",
        }
    }
}

/// `--policy`: what findings beyond the official verdict do.
#[derive(Debug, Clone, Copy, Args)]
pub struct PolicyArgs {
    /// Findings beyond the official verdict (policy[...]: rules the
    /// official tools leave unchecked): `warn` lists them apart from the
    /// verdict, `error` fails on them.
    #[arg(
        long = "policy",
        value_enum,
        default_value = "warn",
        value_name = "MODE"
    )]
    pub policy: PolicyArg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PolicyArg {
    Warn,
    Error,
}

impl PolicyArgs {
    pub fn mode(self) -> referee_rules::policy::PolicyMode {
        match self.policy {
            PolicyArg::Warn => referee_rules::policy::PolicyMode::Warn,
            PolicyArg::Error => referee_rules::policy::PolicyMode::Error,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PruningArg {
    /// The official pruning, flaw included (mlcommons/logging#368).
    Official,
    /// The lower convex envelope the rules intend.
    Convex,
}

#[derive(Debug, Args)]
pub struct RulesetArgs {
    /// Benchmark family of the official rules.
    #[arg(long, value_enum, default_value_t = UsageArg::Training)]
    pub usage: UsageArg,
    /// Ruleset version (e.g. 5.0.0). Default: read from a path component
    /// such as training_results_v5.0, or referee's own ruleset when the
    /// results are all of referee's benchmarks.
    #[arg(long, value_name = "X.Y.Z")]
    pub ruleset: Option<String>,
    /// The mlperf_logging package directory (or its compliance_checker
    /// directory) holding the official rule files.
    #[arg(long, value_name = "DIR")]
    pub rules_dir: Option<PathBuf>,
    /// Directory of RCP tables (default: mlperf_logging/rcp_checker).
    #[arg(long, value_name = "DIR")]
    pub rcp_dir: Option<PathBuf>,
    /// RCP pruning.
    #[arg(long, value_enum, default_value_t = PruningArg::Official)]
    pub rcp_pruning: PruningArg,
}

impl RulesetArgs {
    /// The request these flags make.
    pub fn request(&self) -> RulesRequest {
        RulesRequest {
            usage: self.usage.as_str(),
            ruleset: self.ruleset.clone(),
            rules_dir: self.rules_dir.clone(),
            rcp_dir: self.rcp_dir.clone(),
            pruning: match self.rcp_pruning {
                PruningArg::Official => Pruning::Official,
                PruningArg::Convex => Pruning::ConvexEnvelope,
            },
        }
    }

    /// Resolve the flags into the rules to judge the results under `paths` with.
    pub fn resolve(&self, paths: &[PathBuf]) -> Result<ResolvedRules, String> {
        resolve_rules(&self.request(), paths).map_err(|e| e.to_string())
    }

    /// The organisation folders under `dirs` (each one, or the folders of
    /// them it holds) and the rules to judge them with.
    pub fn resolve_orgs(&self, dirs: &[PathBuf]) -> Result<(Vec<PathBuf>, ResolvedRules), String> {
        let orgs = referee_rules::layout::find_orgs(dirs).map_err(|e| e.to_string())?;
        Ok((orgs, self.resolve(dirs)?))
    }
}

/// Check that every path is an existing directory.
pub fn existing_dirs(paths: &[PathBuf]) -> Result<(), String> {
    for p in paths {
        if !Path::new(p).is_dir() {
            return Err(format!("{}: no such directory", p.display()));
        }
    }
    Ok(())
}

/// Write a rendered page (`page`: what the renderer gave) to `path`.
pub fn write_page<E: std::fmt::Display>(
    path: &Path,
    page: Result<String, E>,
) -> Result<(), String> {
    let page = page.map_err(|e| e.to_string())?;
    std::fs::write(path, page).map_err(|e| format!("{}: {e}", path.display()))
}
