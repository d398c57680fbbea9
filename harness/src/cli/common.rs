//! Flags shared by the commands that judge results against a ruleset
//! (`rcp`, `summarize`, `package-check`), resolved in one place.

use crate::rules_env::OfficialRules;
use clap::{Args, ValueEnum};
use referee_rules::checker::Checker;
use referee_rules::compliance::CheckOptions;
use referee_rules::meta::Meta;
use referee_rules::rcp::Pruning;
use referee_rules::score::ScoreContext;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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

/// `training_results_v5.0` → `5.0.0`.
pub fn infer_ruleset(paths: &[PathBuf]) -> Option<String> {
    for p in paths {
        let abs = std::fs::canonicalize(p).unwrap_or_else(|_| p.clone());
        for c in abs.components() {
            let s = c.as_os_str().to_string_lossy();
            for prefix in ["training_results_v", "hpc_results_v"] {
                if let Some(v) = s.strip_prefix(prefix) {
                    let parts: Vec<&str> = v.split('.').collect();
                    if parts.len() == 2
                        && parts
                            .iter()
                            .all(|x| !x.is_empty() && x.chars().all(|c| c.is_ascii_digit()))
                    {
                        return Some(format!("{v}.0"));
                    }
                }
            }
        }
    }
    None
}

/// The resolved ruleset context of a command.
pub struct Resolved {
    pub ctx: ScoreContext,
    pub rules_desc: String,
    pub inferred: bool,
}

/// Do the results under these submission folders name only referee's
/// own benchmarks?
fn only_referee_benchmarks(paths: &[PathBuf]) -> bool {
    let Ok(orgs) = referee_rules::tree::find_orgs(paths) else {
        return false;
    };
    let names: Vec<String> = orgs
        .iter()
        .flat_map(|o| referee_rules::tree::benchmark_dirs(o, "training").unwrap_or_default())
        .map(|d| d.benchmark)
        .collect();
    !names.is_empty() && names.iter().all(|n| crate::registry::find(n).is_some())
}

/// Do the result logs directly under these paths (a `referee run` output
/// folder, a benchmark folder, or log files) all name one of referee's own
/// benchmarks in `submission_benchmark`?
fn logs_name_referee_benchmarks(paths: &[PathBuf]) -> bool {
    let mut logs = Vec::new();
    for p in paths {
        if p.is_file() {
            logs.push(p.clone());
        } else if let Ok(dir) = std::fs::read_dir(p) {
            logs.extend(dir.flatten().map(|e| e.path()).filter(|f| {
                f.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("result_") && n.ends_with(".txt"))
            }));
        }
    }
    !logs.is_empty()
        && logs.iter().all(|log| {
            referee_rules::mllog::read_file(log).is_ok_and(|parsed| {
                parsed
                    .records
                    .iter()
                    .find(|r| r.key.as_deref() == Some("submission_benchmark"))
                    .and_then(|r| r.value().as_str().map(str::to_string))
                    .is_some_and(|name| crate::registry::find(&name).is_some())
            })
        })
}

impl RulesetArgs {
    pub fn resolve(&self, paths: &[PathBuf]) -> Result<Resolved, String> {
        let usage = self.usage.as_str();
        let own = referee_workloads::bench::RULESET;
        let (ruleset, inferred) = match &self.ruleset {
            Some(r) => (r.clone(), false),
            None => match infer_ruleset(paths) {
                Some(r) => (r, true),
                None if only_referee_benchmarks(paths) || logs_name_referee_benchmarks(paths) => {
                    (own.to_string(), true)
                }
                None => {
                    return Err(format!(
                        "give --ruleset X.Y.Z (it could not be read from the path, e.g. training_results_v5.0), or --ruleset {own} for referee's benchmarks"
                    ));
                }
            },
        };
        if ruleset == own {
            let mut ctx = crate::registry::own_score_context();
            ctx.pruning = match self.rcp_pruning {
                PruningArg::Official => Pruning::Official,
                PruningArg::Convex => Pruning::ConvexEnvelope,
            };
            return Ok(Resolved {
                ctx,
                rules_desc: format!("referee's own ruleset {own}"),
                inferred,
            });
        }
        let official = OfficialRules::resolve(self.rules_dir.as_deref())?;
        let lib = official.library();
        let available = lib.rulesets(usage);
        if !available.contains(&ruleset) {
            return Err(format!(
                "unknown ruleset {ruleset} for {usage}; {} provides: {}",
                official.origin,
                available.join(", ")
            ));
        }
        let rcp_dir: Option<PathBuf> = match &self.rcp_dir {
            Some(d) if !d.is_dir() => {
                return Err(format!("--rcp-dir {}: no such directory", d.display()));
            }
            Some(d) => Some(d.clone()),
            None => official.rcp_dir.clone(),
        };
        let checker = Arc::new(Checker::new(Arc::new(lib), CheckOptions::default()));
        let mut ctx = ScoreContext::new(checker, usage, &ruleset, Meta::official(), rcp_dir);
        ctx.pruning = match self.rcp_pruning {
            PruningArg::Official => Pruning::Official,
            PruningArg::Convex => Pruning::ConvexEnvelope,
        };
        Ok(Resolved {
            rules_desc: format!("{usage} {ruleset} rules from {}", official.origin),
            ctx,
            inferred,
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    fn log_naming(dir: &std::path::Path, file: &str, bench: &str) {
        std::fs::write(
            dir.join(file),
            format!(
                ":::MLLOG {{\"namespace\": \"\", \"time_ms\": 1, \"event_type\": \"POINT_IN_TIME\", \"key\": \"submission_benchmark\", \"value\": \"{bench}\", \"metadata\": {{\"file\": \"x.py\", \"lineno\": 1}}}}\n"
            ),
        )
        .unwrap();
    }

    #[test]
    fn run_output_of_own_benchmarks_gets_the_own_ruleset() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        assert!(!logs_name_referee_benchmarks(std::slice::from_ref(&dir)));
        log_naming(&dir, "result_0.txt", "mini_llm");
        log_naming(&dir, "result_1.txt", "mini_llm");
        assert!(logs_name_referee_benchmarks(std::slice::from_ref(&dir)));
        assert!(logs_name_referee_benchmarks(&[dir.join("result_0.txt")]));
        // One official benchmark among them: no guess.
        log_naming(&dir, "result_2.txt", "bert");
        assert!(!logs_name_referee_benchmarks(std::slice::from_ref(&dir)));
        let args = RulesetArgs {
            usage: UsageArg::Training,
            ruleset: None,
            rules_dir: None,
            rcp_dir: None,
            rcp_pruning: PruningArg::Official,
        };
        let e = args.resolve(std::slice::from_ref(&dir)).err().unwrap();
        assert!(e.contains("--ruleset"), "{e}");
        std::fs::remove_file(dir.join("result_2.txt")).unwrap();
        let r = args.resolve(&[dir]).unwrap();
        assert!(
            r.inferred && r.rules_desc.contains("referee"),
            "{}",
            r.rules_desc
        );
    }
}
