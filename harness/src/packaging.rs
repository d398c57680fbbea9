//! Result logs → an MLCommons submission folder, checked right after it is
//! built with the ruleset it is for: outputs of `referee run` (referee's
//! ruleset), of `referee run --exec` (the ruleset they ran under), or any
//! folder of result logs (`--ruleset`, `--system-json`).
//!
//! The folder is named as `--org` and `--system` say (default: what the
//! logs say); where the logs' `submission_org` / `submission_platform`
//! differ, the package is built and the difference is a warning. For
//! `run --exec` results the program's code is packaged by default: the
//! files git tracks in its working directory, when that is a git checkout
//! (else `--code DIR`), so that an audit can re-run the code the signed
//! package carries.

use crate::common::division::Division;
use crate::rules_env::{RulesError, RulesRequest, resolve_rules};
use referee_rules::escape::{markdown, term};
use referee_rules::package_check::{PackageOptions, PackageReport, check_package};
use referee_rules::report::{Detail, Report};
use referee_submission::assemble::{
    Origin, PackageError, PackageSpec, PackageSummary, RunDir, package,
};
use referee_submission::fs::FsError;
use serde::Serialize;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Why nothing was packaged.
#[derive(Debug, thiserror::Error)]
pub enum PackagingError {
    #[error(transparent)]
    Package(#[from] PackageError),
    #[error(transparent)]
    Fs(#[from] FsError),
    #[error(transparent)]
    Rules(#[from] RulesError),
    #[error("{} was run in the {found} division, not {expected}", .dir.display())]
    Division {
        dir: PathBuf,
        found: String,
        expected: &'static str,
    },
    #[error("give --ruleset X.Y.Z: the ruleset these logs are submitted under (e.g. 5.0.0)")]
    NoRuleset,
    /// `rules`: the rules' description; `allowed`: their benchmarks.
    #[error(
        "{}: `{benchmark}` is not a benchmark of {rules} (benchmarks: {})",
        .dir.display(),
        .allowed.join(", ")
    )]
    UnknownBenchmark {
        dir: PathBuf,
        benchmark: String,
        rules: String,
        allowed: Vec<String>,
    },
    /// The first log names no `submission_{key}` and no `--{flag}` was given.
    #[error("{} logs no submission_{key}: give --{flag}", .log.display())]
    Unnamed {
        log: PathBuf,
        key: &'static str,
        flag: &'static str,
    },
    #[error("--system-json {}: {source}", .path.display())]
    SystemJsonRead { path: PathBuf, source: io::Error },
    #[error("--system-json {}:{line}: invalid JSON: {source}", .path.display())]
    SystemJson {
        path: PathBuf,
        line: usize,
        source: serde_json::Error,
    },
}

/// What to package, as asked for.
#[derive(Debug, Clone)]
pub struct PackagingRequest {
    /// Directories of result logs: outputs of `referee run` (with or
    /// without `--exec`) or any folder of `result_*.txt`.
    pub runs: Vec<PathBuf>,
    /// The rules the package is for (default: the ruleset the runs were
    /// made under; plain logs need `--ruleset`).
    pub rules: RulesRequest,
    /// The system description (default: the runs' `system.json`).
    pub system_json: Option<PathBuf>,
    /// Training code to include under the implementation.
    pub code: Option<PathBuf>,
    /// Where the submission folder ORG/ is created.
    pub out: PathBuf,
    /// Submitting organisation (default: the logs' `submission_org`).
    pub org: Option<String>,
    /// System name (default: the logs' `submission_platform`).
    pub system: Option<String>,
    /// The division every run must have been made in.
    pub division: Option<Division>,
}

/// The folder built and its check.
#[derive(Debug, Clone, Serialize)]
pub struct PackagingReport {
    pub package: PackageSummary,
    pub check: PackageReport,
}

impl PackagingReport {
    pub fn passed(&self) -> bool {
        self.check.verdict == referee_rules::Verdict::Pass
    }

    fn packaged_line(&self) -> String {
        format!(
            "packaged {} ({})",
            self.package.path.display(),
            self.package
                .benchmarks
                .iter()
                .map(|(b, n)| format!("{b}: {n} runs"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

impl Report for PackagingReport {
    fn write_human(&self, out: &mut dyn Write, detail: Detail) -> io::Result<()> {
        writeln!(out, "{}", term(&self.packaged_line()))?;
        writeln!(out, "code: {}", term(&self.package.code.to_string()))?;
        for w in &self.package.warnings {
            writeln!(out, "warning: {}", term(w))?;
        }
        self.check.write_human(out, detail)
    }
    fn write_markdown(&self, out: &mut dyn Write, detail: Detail) -> io::Result<()> {
        writeln!(out, "# Package\n\n{}\n", markdown(&self.packaged_line()))?;
        writeln!(out, "Code: {}\n", markdown(&self.package.code.to_string()))?;
        for w in &self.package.warnings {
            writeln!(out, "- warning: {}", markdown(w))?;
        }
        self.check.write_markdown(out, detail)
    }
}

/// Open the run directories, check their division, build the folder
/// (atomically) and check it. `Err`: nothing was built, with why.
pub fn package_runs(req: &PackagingRequest) -> Result<PackagingReport, PackagingError> {
    let runs = req
        .runs
        .iter()
        .map(|p| RunDir::open(p))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(d) = req.division
        && let Some(r) = runs.iter().find(|r| r.division() != d.as_str())
    {
        return Err(PackagingError::Division {
            dir: r.path.clone(),
            found: r.division().to_string(),
            expected: d.as_str(),
        });
    }
    let mut rules_req = req.rules.clone();
    if rules_req.ruleset.is_none() {
        rules_req.ruleset = ruleset_of(&runs);
    }
    if rules_req.ruleset.is_none() {
        return Err(PackagingError::NoRuleset);
    }
    let rules = resolve_rules(&rules_req, &[])?;
    let first = referee_submission::assemble::LogFacts::read(&runs[0].logs[0])?;
    let named = |flag: &Option<String>, key: &'static str| -> Result<String, PackagingError> {
        match flag {
            Some(v) => Ok(v.clone()),
            None => first
                .submission
                .get(key)
                .cloned()
                .filter(|v| !v.is_empty())
                .ok_or_else(|| PackagingError::Unnamed {
                    log: runs[0].logs[0].clone(),
                    key,
                    flag: if key == "org" { "org" } else { "system" },
                }),
        }
    };
    let (code, code_files, code_source) = code_source(&runs[0], req.code.as_deref());
    let spec = PackageSpec {
        org: named(&req.org, "org")?,
        system: named(&req.system, "platform")?,
        required_runs: required_runs(&rules, &runs)?,
        implementation: implementation_name(&runs[0], req.code.as_deref()),
        system_json: req
            .system_json
            .as_deref()
            .map(read_system_json)
            .transpose()?,
        code,
        code_files,
        code_source,
    };
    let mut summary = package(&runs, &spec, &req.out)?;
    if runs[0].origin == Origin::Exec && spec.code.is_none() {
        summary.warnings.push(
            "no code packaged: an audit cannot re-run these results (give --code DIR, or run the program from a git checkout)".into(),
        );
    }
    let check = check_package(
        &rules.scoring,
        &summary.path,
        PackageOptions::default(),
        &|| {},
    );
    Ok(PackagingReport {
        package: summary,
        check,
    })
}

/// The ruleset the runs logged, or referee's own when every run is one of
/// its own benchmarks.
fn ruleset_of(runs: &[RunDir]) -> Option<String> {
    runs.iter()
        .find_map(|r| r.ruleset().map(str::to_string))
        .or_else(|| {
            runs.iter()
                .all(|r| r.origin == Origin::Own)
                .then(|| referee_workloads::bench::RULESET.to_string())
        })
}

/// Result files each benchmark of the runs requires under `rules`; a
/// benchmark the rules do not allow is an error naming its run.
fn required_runs(
    rules: &crate::rules_env::ResolvedRules,
    runs: &[RunDir],
) -> Result<std::collections::BTreeMap<String, usize>, PackagingError> {
    let usage = &rules.scoring.usage;
    let allowed = rules.scoring.facts.allowed(usage, &rules.scoring.ruleset);
    let mut required = std::collections::BTreeMap::new();
    for r in runs {
        let b = r.benchmark();
        let facts = rules
            .scoring
            .facts
            .benchmark(usage, b)
            .filter(|_| allowed.iter().any(|a| a == b))
            .ok_or_else(|| PackagingError::UnknownBenchmark {
                dir: r.path.clone(),
                benchmark: b.to_string(),
                rules: rules.description.clone(),
                allowed: allowed.clone(),
            })?;
        required.insert(b.to_string(), facts.result_files);
    }
    Ok(required)
}

/// `--system-json FILE` read as JSON; errors name the file (and line).
fn read_system_json(p: &Path) -> Result<serde_json::Value, PackagingError> {
    let text = std::fs::read_to_string(p).map_err(|e| PackagingError::SystemJsonRead {
        path: p.to_path_buf(),
        source: e,
    })?;
    serde_json::from_str(&text).map_err(|e| PackagingError::SystemJson {
        path: p.to_path_buf(),
        line: e.line(),
        source: e,
    })
}

/// The implementation folder's name: referee's version for its own
/// benchmarks, else the code folder's (given, or the program's working
/// directory).
fn implementation_name(run: &RunDir, code: Option<&Path>) -> String {
    match (run.origin, code) {
        (Origin::Own, _) => format!("referee-{}", crate::provenance::VERSION),
        (_, Some(code)) => dir_name(code),
        (Origin::Exec, None) => dir_name(Path::new(
            run.record["working_directory"]
                .as_str()
                .unwrap_or("implementation"),
        )),
        (Origin::Logs, None) => "implementation".to_string(),
    }
}

/// The code to package: `--code DIR` (all of it), else for a supervised
/// program the files git tracks in its working directory; with where it
/// came from, in words.
fn code_source(
    first: &referee_submission::assemble::RunDir,
    code: Option<&Path>,
) -> (Option<PathBuf>, Option<Vec<String>>, String) {
    if let Some(c) = code {
        return (
            Some(c.to_path_buf()),
            None,
            format!("the directory given with --code ({})", c.display()),
        );
    }
    if first.origin != Origin::Exec {
        return (None, None, "none (no --code given)".into());
    }
    let wd = PathBuf::from(first.record["working_directory"].as_str().unwrap_or(""));
    match crate::common::fingerprint::git_tracked_files(&wd) {
        Some(files) if !files.is_empty() => {
            let n = files.len();
            (
                Some(wd.clone()),
                Some(files),
                format!(
                    "the {n} files git tracks in the program's working directory {} (a git checkout)",
                    wd.display()
                ),
            )
        }
        _ => (
            None,
            None,
            format!(
                "none: the program's working directory {} is not a git checkout (give --code DIR)",
                wd.display()
            ),
        ),
    }
}

/// A directory's own name, as a folder name of the package.
fn dir_name(p: &Path) -> String {
    let abs = std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    abs.file_name()
        .map(|n| n.to_string_lossy().to_string())
        .filter(|n| !n.is_empty() && !n.starts_with('.'))
        .unwrap_or_else(|| "implementation".to_string())
}
