//! The rules a command judges with: the official rule files and RCP tables
//! located (one error message when they cannot be found), the ruleset read
//! from the paths or given, or referee's own ruleset for referee's own
//! benchmarks.

use referee_rules::checker::Checker;
use referee_rules::compliance::CheckOptions;
use referee_rules::rcp::Pruning;
use referee_rules::ruleset::{
    MlperfLogging, RuleLibrary, discover_mlperf_logging, package_from_dir,
};
use referee_rules::ruleset_facts::RulesetFacts;
use referee_rules::score::ScoreContext;
use referee_rules::untrusted::Links;
use referee_submission::compare::RulesProvider;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// The rules asked for cannot be found or do not exist.
#[derive(Debug, thiserror::Error)]
pub enum RulesError {
    #[error("--rules-dir {}: no such directory", .0.display())]
    NoRulesDir(PathBuf),
    #[error(
        "--rules-dir {}: expected the mlperf_logging package directory, its compliance_checker directory, or a directory of <usage>_<X.Y.Z>/ rule folders",
        .0.display()
    )]
    NotARulesDir(PathBuf),
    #[error(transparent)]
    Discovery(#[from] referee_rules::ruleset::DiscoveryError),
    /// No `--ruleset`, and none could be read from the paths (`own`:
    /// referee's ruleset).
    #[error(
        "give --ruleset X.Y.Z (it could not be read from the path, e.g. training_results_v5.0), or --ruleset {own} for referee's benchmarks"
    )]
    NoRuleset { own: &'static str },
    /// `origin`: where the rule files come from; `available`: the rulesets
    /// they provide.
    #[error("unknown ruleset {ruleset} for {usage}; {origin} provides: {}", .available.join(", "))]
    UnknownRuleset {
        ruleset: String,
        usage: &'static str,
        origin: String,
        available: Vec<String>,
    },
    #[error("--rcp-dir {}: no such directory", .0.display())]
    NoRcpDir(PathBuf),
    /// `referee check --config NAME`: no rule file at `path`.
    #[error("--config {name}: no such rule file ({})", .path.display())]
    NoRuleFile { name: String, path: PathBuf },
    /// The rules of a side of `referee compare` (`root`: its path).
    #[error("{}: {source}", .root.display())]
    Side {
        root: PathBuf,
        source: Box<RulesError>,
    },
}

/// The official rule files, resolved from `--rules-dir` or discovery.
#[derive(Debug, Clone)]
pub struct OfficialRules {
    /// The `compliance_checker` directory (holds `training_X.Y.Z/`).
    pub compliance_dir: PathBuf,
    /// The `rcp_checker` directory when known.
    pub rcp_dir: Option<PathBuf>,
    /// Human description ("mlperf-logging 4.1.68 at …").
    pub origin: String,
}

impl OfficialRules {
    /// Resolve: an explicit directory wins; otherwise find the installed
    /// Python package.
    pub fn resolve(explicit: Option<&Path>) -> Result<Self, RulesError> {
        let pkg: MlperfLogging = match explicit {
            Some(dir) => {
                if !dir.is_dir() {
                    return Err(RulesError::NoRulesDir(dir.to_path_buf()));
                }
                match package_from_dir(dir) {
                    Some(p) => p,
                    None => {
                        // A bare directory of `<usage>_<X.Y.Z>/` folders.
                        let has_rulesets = std::fs::read_dir(dir)
                            .map(|rd| rd.flatten().any(|e| e.path().join("common.yaml").is_file()))
                            .unwrap_or(false);
                        if !has_rulesets {
                            return Err(RulesError::NotARulesDir(dir.to_path_buf()));
                        }
                        return Ok(OfficialRules {
                            compliance_dir: dir.to_path_buf(),
                            rcp_dir: None,
                            origin: format!("rule files in {}", dir.display()),
                        });
                    }
                }
            }
            None => discover_mlperf_logging()?,
        };
        let origin = match &pkg.version {
            Some(v) => format!("mlperf-logging {v}"),
            None => format!("mlperf-logging at {}", pkg.dir.display()),
        };
        Ok(OfficialRules {
            compliance_dir: pkg.compliance_dir(),
            rcp_dir: Some(pkg.rcp_dir()),
            origin,
        })
    }

    pub fn library(&self) -> RuleLibrary {
        RuleLibrary::from_dir(&self.compliance_dir)
    }
}

/// `training_results_v5.0` → `5.0.0`; or the ruleset that the supervised
/// runs of a package (or of a `referee run --exec` directory) were made
/// under, as their run records say.
pub fn infer_ruleset(paths: &[PathBuf]) -> Option<String> {
    from_path_names(paths).or_else(|| from_run_records(paths))
}

/// The `ruleset` of `referee_run*.json` files of `mode: exec` at the top
/// of `paths` or in their `benchmarks/*/implementations/*/`.
fn from_run_records(paths: &[PathBuf]) -> Option<String> {
    let ls = |d: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(d)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .collect()
    };
    for p in paths {
        let mut records: Vec<PathBuf> = ls(p);
        for b in ls(&p.join("benchmarks")) {
            for imp in ls(&b.join("implementations")) {
                records.extend(ls(&imp));
            }
        }
        records.retain(|f| {
            f.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("referee_run") && n.ends_with(".json"))
        });
        records.sort();
        for r in records {
            let Some(v) = std::fs::read_to_string(&r)
                .ok()
                .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            else {
                continue;
            };
            if v["mode"] == "exec"
                && let Some(rs) = v["ruleset"].as_str()
            {
                return Some(rs.to_string());
            }
        }
    }
    None
}

fn from_path_names(paths: &[PathBuf]) -> Option<String> {
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

/// Which rules a command judges results with, as the user asked for them.
#[derive(Debug, Clone)]
pub struct RulesRequest {
    /// `training` or `hpc`.
    pub usage: &'static str,
    /// `X.Y.Z`; `None`: read from the path, or referee's own ruleset when
    /// every result is of one of referee's benchmarks.
    pub ruleset: Option<String>,
    /// Where the official rule files are (default: the installed package).
    pub rules_dir: Option<PathBuf>,
    /// Where the RCP tables are (default: the installed package's).
    pub rcp_dir: Option<PathBuf>,
    pub pruning: Pruning,
}

/// The rules a command judges with, resolved and loaded.
pub struct ResolvedRules {
    /// Rule files, RCP tables and ruleset facts, ready to score with.
    pub scoring: ScoreContext,
    /// e.g. "training 5.0.0 rules from mlperf-logging 4.1.68".
    pub description: String,
    /// The ruleset was read from the paths, not given.
    pub inferred: bool,
}

/// Do the results under these submission folders name only referee's
/// own benchmarks?
fn only_referee_benchmarks(paths: &[PathBuf]) -> bool {
    let Ok(orgs) = referee_rules::layout::find_orgs(paths) else {
        return false;
    };
    let names: Vec<String> = orgs
        .iter()
        .flat_map(|o| referee_rules::layout::benchmark_dirs(o, "training").unwrap_or_default())
        .map(|d| d.benchmark)
        .collect();
    !names.is_empty()
        && names
            .iter()
            .all(|n| crate::own_benchmarks::find(n).is_some())
}

/// Do the result logs directly under these paths (a `referee run` output
/// folder, a benchmark folder, or log files) all name one of referee's own
/// benchmarks in `submission_benchmark`?
fn logs_name_referee_benchmarks(paths: &[PathBuf]) -> bool {
    // (path, whether it was typed: a typed log may be a link the user made)
    let mut logs = Vec::new();
    for p in paths {
        if p.is_file() {
            logs.push((p.clone(), Links::Follow));
        } else if let Ok(dir) = std::fs::read_dir(p) {
            logs.extend(
                dir.flatten()
                    .map(|e| e.path())
                    .filter(|f| {
                        f.file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| n.starts_with("result_") && n.ends_with(".txt"))
                    })
                    .map(|f| (f, Links::Refuse)),
            );
        }
    }
    !logs.is_empty()
        && logs.iter().all(|(log, links)| {
            referee_rules::mllog::read_file_as(log, *links).is_ok_and(|parsed| {
                parsed
                    .records
                    .iter()
                    .find(|r| r.key.as_deref() == Some("submission_benchmark"))
                    .and_then(|r| r.value().as_str().map(str::to_string))
                    .is_some_and(|name| crate::own_benchmarks::find(&name).is_some())
            })
        })
}

/// Resolve a rules request for the results under `paths`.
pub fn resolve_rules(req: &RulesRequest, paths: &[PathBuf]) -> Result<ResolvedRules, RulesError> {
    let usage = req.usage;
    let own = referee_workloads::bench::RULESET;
    let (ruleset, inferred) = match &req.ruleset {
        Some(r) => (r.clone(), false),
        None => match infer_ruleset(paths) {
            Some(r) => (r, true),
            None if only_referee_benchmarks(paths) || logs_name_referee_benchmarks(paths) => {
                (own.to_string(), true)
            }
            None => {
                return Err(RulesError::NoRuleset { own });
            }
        },
    };
    if ruleset == own {
        let mut ctx = crate::own_benchmarks::own_score_context();
        ctx.pruning = req.pruning;
        return Ok(ResolvedRules {
            scoring: ctx,
            description: format!("referee's own ruleset {own}"),
            inferred,
        });
    }
    let official = OfficialRules::resolve(req.rules_dir.as_deref())?;
    let lib = official.library();
    let available = lib.rulesets(usage);
    if !available.contains(&ruleset) {
        return Err(RulesError::UnknownRuleset {
            ruleset,
            usage,
            origin: official.origin,
            available,
        });
    }
    let rcp_dir: Option<PathBuf> = match &req.rcp_dir {
        Some(d) if !d.is_dir() => {
            return Err(RulesError::NoRcpDir(d.clone()));
        }
        Some(d) => Some(d.clone()),
        None => official.rcp_dir.clone(),
    };
    let checker = Arc::new(Checker::new(Arc::new(lib), CheckOptions::default()));
    let mut ctx = ScoreContext::new(checker, usage, &ruleset, RulesetFacts::official(), rcp_dir);
    ctx.pruning = req.pruning;
    Ok(ResolvedRules {
        description: format!("{usage} {ruleset} rules from {}", official.origin),
        scoring: ctx,
        inferred,
    })
}

/// The rules of each side of `referee compare`: referee's own ruleset for referee's benchmarks (unless `--ruleset`
/// names another), the official rules otherwise (the ruleset given, or
/// read from the side's path as `referee summarize` does).
pub struct RulesPerSide {
    request: RulesRequest,
    own: OnceLock<Arc<ScoreContext>>,
    official: Mutex<HashMap<PathBuf, Arc<ScoreContext>>>,
}

impl RulesPerSide {
    pub fn new(request: RulesRequest) -> Self {
        RulesPerSide {
            request,
            own: OnceLock::new(),
            official: Mutex::new(HashMap::new()),
        }
    }
}

impl RulesProvider for RulesPerSide {
    fn usage(&self) -> String {
        self.request.usage.to_string()
    }

    fn context(
        &self,
        root: &Path,
        benchmark: &str,
    ) -> Result<Arc<ScoreContext>, Box<dyn std::error::Error + Send + Sync>> {
        let own_ruleset = referee_workloads::bench::RULESET;
        let explicit_other = self
            .request
            .ruleset
            .as_deref()
            .is_some_and(|r| r != own_ruleset);
        if crate::own_benchmarks::find(benchmark).is_some() && !explicit_other {
            return Ok(self
                .own
                .get_or_init(|| Arc::new(crate::own_benchmarks::own_score_context()))
                .clone());
        }
        let mut cache = self.official.lock().expect("rules cache");
        if let Some(c) = cache.get(root) {
            return Ok(c.clone());
        }
        let resolved =
            resolve_rules(&self.request, &[root.to_path_buf()]).map_err(|e| RulesError::Side {
                root: root.to_path_buf(),
                source: Box::new(e),
            })?;
        let ctx = Arc::new(resolved.scoring);
        cache.insert(root.to_path_buf(), ctx.clone());
        Ok(ctx)
    }
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
        let req = RulesRequest {
            usage: "training",
            ruleset: None,
            rules_dir: None,
            rcp_dir: None,
            pruning: Pruning::Official,
        };
        let e = resolve_rules(&req, std::slice::from_ref(&dir))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("--ruleset"), "{e}");
        std::fs::remove_file(dir.join("result_2.txt")).unwrap();
        let r = resolve_rules(&req, &[dir]).unwrap();
        assert!(
            r.inferred && r.description.contains("referee"),
            "{}",
            r.description
        );
    }
}
