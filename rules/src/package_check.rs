//! The package checker: is an organisation's submission folder acceptable?
//!
//! Checks, in the official order: system descriptions; then per
//! `results/SYSTEM/BENCHMARK`: allowed benchmark, exact number of
//! `result_*.txt`, compliance of every log, power logs, the olympic
//! tolerance for non-compliant runs (1, unet3d 4), seed rules and the RCP
//! test (closed division), with the `package_checker_params` bypasses.
//! Added to the official checks: the repository hygiene checks of the
//! official repo checker, and a verdict in the exit code (the official
//! package checker always exits 0). Apart from the verdict: the policy
//! findings ([`crate::policy`]) of every log and result set.

use crate::diag::{Diagnostic, Severity, Verdict};
use crate::layout::{self, BenchmarkDir};
use crate::policy::{PolicyMode, PolicySummary};
use crate::score::{RunAnalysis, ScoreContext, analyze_run, check_rcp_runs, policy_of_set};
use crate::seeds;
use crate::sysdesc::{self, SystemDesc};
use crate::untrusted::{self, FileKind, Links, UntrustedError};
use rayon::prelude::*;
use serde::Serialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, Default)]
pub struct PackageOptions {
    pub rcp_bypass: bool,
    pub seed_checker_bypass: bool,
    pub bert_train_samples: bool,
    /// What policy findings do to the verdict (never changed by the
    /// package's params files).
    pub policy: PolicyMode,
}

/// Result for one benchmark directory.
#[derive(Debug, Clone, Serialize)]
pub struct BenchmarkCheck {
    pub system: String,
    pub benchmark: String,
    pub path: String,
    pub result_files: usize,
    pub expected_files: usize,
    pub noncompliant: Vec<String>,
    pub rcp: Option<String>,
    pub verdict: Verdict,
}

/// Result for one organisation folder.
#[derive(Debug, Clone, Serialize)]
pub struct PackageReport {
    pub path: String,
    pub verdict: Verdict,
    pub ruleset: String,
    pub systems: usize,
    pub benchmarks: Vec<BenchmarkCheck>,
    pub diagnostics: Vec<Diagnostic>,
    /// Findings beyond the official verdict: of each log, then of each
    /// result set. Errors only under `--policy error`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub policy: Vec<Diagnostic>,
    /// Their counts (present when there is a finding).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy_summary: Option<PolicySummary>,
}

impl PackageReport {
    /// The official verdict, and under `--policy error` no policy finding.
    pub fn passed(&self) -> bool {
        self.verdict == Verdict::Pass
            && !self
                .policy_summary
                .as_ref()
                .is_some_and(PolicySummary::fails)
    }
}

/// Flags from a `package_checker_params` file. Per-system and
/// per-benchmark files count a line only when it equals the flag exactly,
/// newline excluded — so only a last line without a newline can match (the
/// official checker compares `readlines()` output). referee keeps that and
/// warns about lines it ignores for this reason.
fn params_flags(path: &Path, diags: &mut Vec<Diagnostic>) -> (bool, bool) {
    let Some(text) = read_params(path, diags) else {
        return (false, false);
    };
    let (mut rcp, mut seed) = (false, false);
    for raw in text.split_inclusive('\n') {
        match raw {
            "rcp-bypass" => rcp = true,
            "seed-checker-bypass" => seed = true,
            _ => {
                let t = raw.trim();
                if t == "rcp-bypass" || t == "seed-checker-bypass" {
                    diags.push(
                        Diagnostic::warning(
                            "params-ignored",
                            format!("`{t}` is ignored: the official checker matches only a line without a trailing newline"),
                        )
                        .rule("package-checker-params", None)
                        .file(path.display().to_string())
                        .expected(format!("`{t}` as the last line, with no newline after it"))
                        .found(format!("{raw:?}")),
                    );
                }
            }
        }
    }
    (rcp, seed)
}

/// A params file's text; `None` when there is none, and an error when it
/// exists but cannot be read (a link, a FIFO, a file too large): its flags
/// change the verdict, so it is not passed over in silence.
fn read_params(path: &Path, diags: &mut Vec<Diagnostic>) -> Option<String> {
    match untrusted::read_to_string(path, FileKind::Config, Links::Refuse) {
        Ok(text) => Some(text),
        Err(UntrustedError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            None
        }
        Err(e) => {
            diags.push(
                Diagnostic::error("params-unreadable", e.to_string())
                    .rule("package-checker-params", None)
                    .file(path.display().to_string()),
            );
            None
        }
    }
}

/// The top-level params file as the official verify script reads it: one
/// flag per line; a last line without a newline is skipped by its `read`
/// loop.
pub fn top_level_params(org: &Path, diags: &mut Vec<Diagnostic>) -> PackageOptions {
    let mut o = PackageOptions::default();
    let path = org.join("package_checker_params");
    let Some(text) = read_params(&path, diags) else {
        return o;
    };
    for raw in text.split_inclusive('\n') {
        let Some(line) = raw.strip_suffix('\n') else {
            if !raw.trim().is_empty() {
                diags.push(
                    Diagnostic::warning(
                        "params-ignored",
                        format!("`{}` is ignored: the verify script skips a last line without a newline", raw.trim()),
                    )
                    .rule("package-checker-params", None)
                    .file(path.display().to_string()),
                );
            }
            continue;
        };
        match line.trim_end_matches('\r') {
            "rcp-bypass" => o.rcp_bypass = true,
            "seed-checker-bypass" => o.seed_checker_bypass = true,
            "rcp-bert-train-samples" => o.bert_train_samples = true,
            other if !other.is_empty() => diags.push(
                Diagnostic::warning("params-unknown", format!("unknown flag `{other}`"))
                    .rule("package-checker-params", None)
                    .file(path.display().to_string()),
            ),
            _ => {}
        }
    }
    o
}

/// Git-friendliness (the official repo checker): no names starting with a
/// dot or holding a space, no file over 50 MiB, no broken symbolic link.
///
/// Every directory is walked (links are not followed) down to
/// [`untrusted::MAX_DEPTH`] levels; one that cannot be listed or lies
/// deeper is an error naming it, since what it holds goes unchecked.
pub fn repo_checks(org: &Path) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let mut stack = vec![(org.to_path_buf(), 0usize)];
    while let Some((dir, depth)) = stack.pop() {
        let unwalked = |e: std::io::Error| {
            Diagnostic::error(
                "repo",
                format!("cannot walk this directory: {e}; its files are not checked"),
            )
            .rule("repo", None)
            .file(dir.display().to_string())
        };
        if depth > untrusted::MAX_DEPTH {
            out.push(unwalked(untrusted::too_deep()));
            continue;
        }
        let rd = match std::fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) => {
                out.push(unwalked(e));
                continue;
            }
        };
        let mut entries: Vec<_> = rd.flatten().collect();
        entries.sort_by_key(|e| e.path());
        for e in entries {
            let p = e.path();
            let name = e.file_name().to_string_lossy().to_string();
            if name.starts_with('.') || name.contains(' ') {
                out.push(
                    Diagnostic::error(
                        "repo",
                        "git-unfriendly name (starts with a dot or contains a space)",
                    )
                    .rule("repo", None)
                    .file(p.display().to_string())
                    .official(format!("Files with git-unfriendly name: {}", p.display())),
                );
            }
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_symlink() {
                if std::fs::metadata(&p).is_err() {
                    out.push(
                        Diagnostic::error("repo", "broken symbolic link")
                            .rule("repo", None)
                            .file(p.display().to_string()),
                    );
                }
            } else if ft.is_dir() {
                stack.push((p, depth + 1));
            } else if let Ok(m) = e.metadata()
                && m.len() > 50 * 1024 * 1024
            {
                out.push(
                    Diagnostic::error(
                        "repo",
                        format!(
                            "file of {:.1} MiB; git hosting limits files to 50 MiB",
                            m.len() as f64 / 1048576.0
                        ),
                    )
                    .rule("repo", None)
                    .file(p.display().to_string()),
                );
            }
        }
    }
    out
}

/// Power-log layout of one benchmark directory: returns the runs whose
/// power logs are missing or inconsistent.
fn power_checks(power: &Path, results: &[PathBuf], diags: &mut Vec<Diagnostic>) -> Vec<String> {
    let mut bad: Vec<String> = Vec::new();
    let mut node_lens: Vec<(String, usize)> = Vec::new();
    let mut sw_lens: Vec<(String, usize)> = Vec::new();
    for r in results {
        let name = r
            .file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_default();
        let folder = power.join(&name);
        if !layout::is_real_dir(&folder) {
            diags.push(
                Diagnostic::error("power", format!("no power logs for {name}"))
                    .rule("power", None)
                    .file(folder.display().to_string())
                    .official(format!("Package does not contain power result: {name}")),
            );
            bad.push(name);
            continue;
        }
        let files: Vec<String> = std::fs::read_dir(&folder)
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.file_name().to_string_lossy().to_string())
                    .collect()
            })
            .unwrap_or_default();
        // The ids of the files named `prefix…`, or the first name without one.
        let idx = |prefix: &str| -> (usize, Result<Vec<i64>, &str>) {
            let named: Vec<&String> = files.iter().filter(|f| f.starts_with(prefix)).collect();
            let parsed = named
                .iter()
                .map(|f| {
                    let stem = f.rsplit_once('.').map(|(s, _)| s).unwrap_or(f);
                    stem.rsplit('_')
                        .next()
                        .unwrap_or("")
                        .parse::<i64>()
                        .map_err(|_| f.as_str())
                })
                .collect();
            (named.len(), parsed)
        };
        for (prefix, lens) in [("node", &mut node_lens), ("sw", &mut sw_lens)] {
            let (n, ids) = idx(prefix);
            match ids {
                Ok(ids) => {
                    let mut seen = std::collections::HashSet::new();
                    if ids
                        .iter()
                        .any(|i| *i < 0 || *i > n as i64 - 1 || !seen.insert(*i))
                    {
                        diags.push(
                            Diagnostic::error(
                                "power",
                                format!(
                                    "{prefix} power files are not named {prefix}_0 … {prefix}_{}",
                                    n.saturating_sub(1)
                                ),
                            )
                            .rule("power", None)
                            .file(folder.display().to_string()),
                        );
                        bad.push(name.clone());
                    }
                }
                Err(f) => {
                    diags.push(
                        Diagnostic::error(
                            "power",
                            format!(
                                "{f}: no run index in the name (the official checker crashes here)"
                            ),
                        )
                        .rule("power", None)
                        .file(folder.display().to_string()),
                    );
                    bad.push(name.clone());
                }
            }
            lens.push((name.clone(), n));
        }
    }
    for (what, lens) in [("node", &node_lens), ("switch", &sw_lens)] {
        let mut counts: HashMap<usize, usize> = HashMap::new();
        for (_, n) in lens.iter() {
            *counts.entry(*n).or_default() += 1;
        }
        // The most common count (ties: the first seen, as Python's max over a dict).
        let mut best: Option<(usize, usize)> = None;
        for (_, n) in lens.iter() {
            let c = counts[n];
            if best.is_none_or(|(_, bc)| c > bc) {
                best = Some((*n, c));
            }
        }
        if let Some((mode, _)) = best {
            for (name, n) in lens.iter().filter(|(_, n)| *n != mode) {
                diags.push(
                    Diagnostic::error(
                        "power",
                        format!(
                            "{name} has {n} {what} power logs where the other runs have {mode}"
                        ),
                    )
                    .rule("power", None)
                    .file(power.join(name).display().to_string()),
                );
                bad.push(name.clone());
            }
        }
    }
    bad.sort();
    bad.dedup();
    bad
}

/// Check one organisation folder.
pub fn check_package(
    ctx: &ScoreContext,
    org: &Path,
    cli: PackageOptions,
    progress: &(dyn Fn() + Sync),
) -> PackageReport {
    let mut diags = Vec::new();
    let global = package_options(org, cli, &mut diags);
    check_top_folders(org, &mut diags);
    let mut systems = load_systems(ctx, org, &mut diags);
    let tree = match layout::results_tree(org, &ctx.usage) {
        Ok(t) => t,
        Err(e) => {
            if layout::is_real_dir(&org.join("results")) {
                diags.push(
                    Diagnostic::error(
                        "unreadable-dir",
                        format!("cannot list the results: {e}; no result is checked"),
                    )
                    .rule("layout", None)
                    .file(org.join("results").display().to_string()),
                );
            }
            layout::ResultsTree::default()
        }
    };
    diags.extend(tree.findings);
    let plans = plan_benchmark_dirs(ctx, tree.dirs, global, &mut systems, &mut diags);
    let analyses = analyse_logs(ctx, &plans, progress);
    let mut checks = Vec::new();
    let mut policy = Vec::new();
    for (plan, runs) in plans.iter().zip(analyses) {
        let (check, findings) = check_benchmark_dir(ctx, plan, &runs);
        let official_seed_check = plan.closed
            && ctx.facts.has_seed_and_rcp_checks(&ctx.ruleset)
            && !plan.opts.seed_checker_bypass;
        policy.extend(policy_of_set(
            &plan.dir,
            official_seed_check,
            plan.nodes,
            &runs,
            check.expected_files,
        ));
        checks.push(check);
        diags.extend(findings);
    }
    crate::policy::apply_mode(&mut policy, global.policy);
    let policy_summary = (!policy.is_empty()).then(|| PolicySummary::of(global.policy, &policy));
    diags.extend(repo_checks(org));
    if systems.files == 0 && layout::is_real_dir(&org.join("systems")) {
        diags.push(
            Diagnostic::error("layout", "no system description in systems/")
                .rule("layout", None)
                .file(org.join("systems").display().to_string()),
        );
    }
    let verdict = Verdict::from_ok(!diags.iter().any(Diagnostic::is_error));
    PackageReport {
        path: org.display().to_string(),
        verdict,
        ruleset: ctx.ruleset.clone(),
        systems: systems.files,
        benchmarks: checks,
        diagnostics: diags,
        policy,
        policy_summary,
    }
}

/// The options for the whole package: the command line's, plus the flags of
/// the top-level `package_checker_params` file.
fn package_options(org: &Path, cli: PackageOptions, diags: &mut Vec<Diagnostic>) -> PackageOptions {
    let top = top_level_params(org, diags);
    PackageOptions {
        rcp_bypass: cli.rcp_bypass || top.rcp_bypass,
        seed_checker_bypass: cli.seed_checker_bypass || top.seed_checker_bypass,
        bert_train_samples: cli.bert_train_samples || top.bert_train_samples,
        policy: cli.policy,
    }
}

/// An error for each missing `systems/` or `results/` folder.
fn check_top_folders(org: &Path, diags: &mut Vec<Diagnostic>) {
    for (sub, what) in [("systems", "system descriptions"), ("results", "results")] {
        if !layout::is_real_dir(&org.join(sub)) {
            diags.push(
                Diagnostic::error("layout", format!("missing {sub}/ folder ({what})"))
                    .rule("layout", None)
                    .file(org.join(sub).display().to_string())
                    .expected(
                        "ORG/systems/SYSTEM.json and ORG/results/SYSTEM/BENCHMARK/result_*.txt",
                    ),
            );
        }
    }
}

/// The system descriptions of a package.
struct Systems {
    /// System id (the JSON file's stem) → its description, `None` when it
    /// cannot be read (or, once results name it, when it does not exist).
    by_id: HashMap<String, Option<SystemDesc>>,
    /// `systems/*.json` files found.
    files: usize,
}

/// Read and check every `systems/*.json` (in name order).
fn load_systems(ctx: &ScoreContext, org: &Path, diags: &mut Vec<Diagnostic>) -> Systems {
    let mut systems = Systems {
        by_id: HashMap::new(),
        files: 0,
    };
    let Ok(rd) = std::fs::read_dir(org.join("systems")) else {
        return systems;
    };
    let mut files: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    for f in files {
        systems.files += 1;
        let id = f
            .file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_default();
        match SystemDesc::load(&f) {
            Ok(desc) => {
                diags.extend(sysdesc::check(
                    &desc,
                    &f,
                    ctx.facts.status_rule_applies(&ctx.usage, &ctx.ruleset),
                ));
                systems.by_id.insert(id, Some(desc));
            }
            Err(d) => {
                diags.push(*d);
                systems.by_id.insert(id, None);
            }
        }
    }
    systems
}

/// A benchmark directory to check, with what applies to it.
struct BenchmarkDirPlan {
    dir: BenchmarkDir,
    /// The system is in the closed division (seed and RCP checks apply).
    closed: bool,
    /// The package's options with the system's and the directory's
    /// `package_checker_params` flags.
    opts: PackageOptions,
    results: Vec<PathBuf>,
    /// The system description's `number_of_nodes`.
    nodes: Option<i64>,
}

/// The benchmark directories to check: those of a readable system and of a
/// benchmark the ruleset allows (others are reported and skipped).
fn plan_benchmark_dirs(
    ctx: &ScoreContext,
    dirs: Vec<BenchmarkDir>,
    global: PackageOptions,
    systems: &mut Systems,
    diags: &mut Vec<Diagnostic>,
) -> Vec<BenchmarkDirPlan> {
    let allowed = ctx.facts.allowed(&ctx.usage, &ctx.ruleset);
    let mut plans = Vec::new();
    let mut system_params: HashMap<String, (bool, bool)> = HashMap::new();
    for d in dirs {
        let Some(desc) = systems.by_id.get(&d.system).cloned().flatten() else {
            if !systems.by_id.contains_key(&d.system) {
                diags.push(
                    Diagnostic::error("layout", format!("results for system `{}` but no systems/{}.json (the official checker crashes here)", d.system, d.system))
                        .rule("layout", None)
                        .file(d.org.join("systems").join(format!("{}.json", d.system)).display().to_string()),
                );
                systems.by_id.insert(d.system.clone(), None);
            }
            continue;
        };
        if !allowed.contains(&d.benchmark) {
            diags.push(
                Diagnostic::warning(
                    "layout",
                    format!(
                        "`{}` is not a benchmark of ruleset {}: skipped",
                        layout::shown_name(Path::new(&d.benchmark)),
                        ctx.ruleset
                    ),
                )
                .rule("layout", None)
                .file(d.path.display().to_string())
                .expected(format!("one of {}", allowed.join(", ")))
                .official(format!("Skipping benchmark: {}", d.benchmark)),
            );
            continue;
        }
        let sys_dir = d
            .path
            .parent()
            .expect("benchmark dir has a parent")
            .to_path_buf();
        let sys_flags = *system_params
            .entry(d.system.clone())
            .or_insert_with(|| params_flags(&sys_dir.join("package_checker_params"), diags));
        let bench_flags = params_flags(&d.path.join("package_checker_params"), diags);
        let opts = PackageOptions {
            rcp_bypass: global.rcp_bypass || sys_flags.0 || bench_flags.0,
            seed_checker_bypass: global.seed_checker_bypass || sys_flags.1 || bench_flags.1,
            bert_train_samples: global.bert_train_samples,
            policy: global.policy,
        };
        // A directory that cannot be listed is a finding of the tree walk;
        // its result count is then an error too.
        let results = layout::result_files(&d.path).unwrap_or_default();
        plans.push(BenchmarkDirPlan {
            closed: desc.text("division").as_deref() == Some("closed"),
            nodes: desc.int("number_of_nodes"),
            dir: d,
            opts,
            results,
        });
    }
    plans
}

/// Analyse every log of the package in parallel; the analyses of each
/// planned directory, in file order.
fn analyse_logs(
    ctx: &ScoreContext,
    plans: &[BenchmarkDirPlan],
    progress: &(dyn Fn() + Sync),
) -> Vec<Vec<RunAnalysis>> {
    let files: Vec<(usize, PathBuf, bool)> = plans
        .iter()
        .enumerate()
        .flat_map(|(i, plan)| {
            plan.results
                .iter()
                .map(move |p| (i, p.clone(), plan.opts.bert_train_samples))
        })
        .collect();
    let analysed: Vec<(usize, RunAnalysis)> = files
        .par_iter()
        .map(|(i, p, bts)| {
            let a = analyze_run(ctx, p, *bts);
            progress();
            (*i, a)
        })
        .collect();
    let mut by_dir: Vec<Vec<RunAnalysis>> = vec![Vec::new(); plans.len()];
    for (i, a) in analysed {
        by_dir[i].push(a);
    }
    by_dir
}

/// Check one benchmark directory: the number of result files, stray files,
/// the compliance of every log, power logs, the olympic tolerance, and in
/// the closed division the seed rules and the RCP test. Returns the
/// directory's row and its findings.
fn check_benchmark_dir(
    ctx: &ScoreContext,
    plan: &BenchmarkDirPlan,
    runs: &[RunAnalysis],
) -> (BenchmarkCheck, Vec<Diagnostic>) {
    let d = &plan.dir;
    let mut local: Vec<Diagnostic> = Vec::new();
    let expected = check_result_count(ctx, plan, &mut local);
    check_stray_files(&d.path, &mut local);
    let mut failing = noncompliant_logs(runs, &mut local);
    let power = d.path.join("power");
    if layout::is_real_dir(&power) {
        failing.extend(power_checks(&power, &plan.results, &mut local));
        failing.sort();
        failing.dedup();
    }
    apply_olympic_tolerance(ctx, d, &failing, &mut local);
    let mut rcp_col = None;
    if plan.closed && ctx.facts.has_seed_and_rcp_checks(&ctx.ruleset) {
        check_seeds(plan, runs, &mut local);
        if d.benchmark != "minigo" {
            rcp_col = Some(check_rcp(ctx, plan, runs, &mut local));
        }
    }
    let verdict = Verdict::from_ok(!local.iter().any(Diagnostic::is_error));
    let check = BenchmarkCheck {
        system: d.system.clone(),
        benchmark: d.benchmark.clone(),
        path: d.path.display().to_string(),
        result_files: plan.results.len(),
        expected_files: expected,
        noncompliant: failing,
        rcp: rcp_col,
        verdict,
    };
    (check, local)
}

/// An error unless the directory holds the required number of result files
/// (at least that many for HPC weak scaling). Returns the number required.
fn check_result_count(
    ctx: &ScoreContext,
    plan: &BenchmarkDirPlan,
    local: &mut Vec<Diagnostic>,
) -> usize {
    let d = &plan.dir;
    let found = plan.results.len();
    let expected = ctx
        .facts
        .benchmark(&ctx.usage, &d.benchmark)
        .map(|b| b.result_files)
        .unwrap_or(0);
    let weak = d.scaling.as_deref() == Some("weak");
    let count_ok = if weak {
        found >= expected
    } else {
        found == expected
    };
    if !count_ok {
        local.push(
            Diagnostic::error(
                "result-count",
                format!("{found} result_*.txt file{} where {}{expected} are required", if found == 1 { "" } else { "s" }, if weak { "at least " } else { "" }),
            )
            .rule("layout", None)
            .file(d.path.display().to_string())
            .expected(format!("{}{expected} files result_0.txt …", if weak { "at least " } else { "exactly " }))
            .found(found.to_string())
            .official(format!(
                "Incorrect number of files in dir, or wrong file names in directory {}, found {found}, expected {expected}",
                d.path.display(),
            )),
        );
    }
    expected
}

/// A warning naming the files of a benchmark directory that are neither
/// result logs nor the files the checker reads.
fn check_stray_files(dir: &Path, local: &mut Vec<Diagnostic>) {
    let others: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                .map(|e| e.file_name().to_string_lossy().to_string())
                .filter(|n| {
                    !crate::checker::is_result_name(n)
                        && n != "package_checker_params"
                        && n != "scaling.json"
                })
                .collect()
        })
        .unwrap_or_default();
    if !others.is_empty() {
        local.push(
            Diagnostic::warning(
                "unknown-files",
                format!("files that are not results: {}", others.join(", ")),
            )
            .rule("layout", None)
            .file(dir.display().to_string())
            .expected("result_*.txt (rename logs to that pattern)"),
        );
    }
}

/// An error for each log that fails compliance (with its first error);
/// returns the names (file stems) of those runs.
fn noncompliant_logs(runs: &[RunAnalysis], local: &mut Vec<Diagnostic>) -> Vec<String> {
    let mut failing: Vec<String> = Vec::new();
    for r in runs {
        let name = r
            .path
            .file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_default();
        match &r.report {
            Ok(rep) if rep.verdict == Verdict::Pass => {}
            Ok(rep) => {
                failing.push(name);
                let first = rep.diagnostics.iter().find(|x| x.is_error()).cloned();
                let mut dd = Diagnostic::error(
                    "noncompliant-log",
                    format!(
                        "log fails compliance{}",
                        first
                            .as_ref()
                            .map(|f| format!(": {}", f.message))
                            .unwrap_or_default()
                    ),
                )
                .rule("compliance", None)
                .file(r.path.display().to_string())
                .at(first.as_ref().and_then(|f| f.line));
                dd.key = first.and_then(|f| f.key);
                local.push(dd);
            }
            Err(e) => {
                failing.push(name);
                local.push(
                    Diagnostic::error("noncompliant-log", e.problem.to_string())
                        .rule("compliance", None)
                        .file(r.path.display().to_string()),
                );
            }
        }
    }
    failing
}

/// Failed logs are reported; within the olympic tolerance they are
/// accepted, so their errors become warnings; beyond it the directory
/// cannot be accepted.
fn apply_olympic_tolerance(
    ctx: &ScoreContext,
    d: &BenchmarkDir,
    failing: &[String],
    local: &mut Vec<Diagnostic>,
) {
    if failing.is_empty() {
        return;
    }
    let max_failed = ctx.facts.max_dropped(&ctx.usage, &d.benchmark);
    if failing.len() <= max_failed {
        for x in local
            .iter_mut()
            .filter(|x| x.code == "noncompliant-log" || x.rule.as_deref() == Some("power"))
        {
            x.severity = Severity::Warning;
        }
        local.push(
            Diagnostic::warning(
                "olympic-tolerance",
                format!(
                    "{} file{} not comply; accepted under olympic scoring",
                    failing.len(),
                    if failing.len() == 1 { " does" } else { "s do" }
                ),
            )
            .rule("scoring", None)
            .file(d.path.display().to_string()),
        );
    } else {
        local.push(
            Diagnostic::error(
                "too-many-failed-runs",
                format!("{} files do not comply; at most {max_failed} may fail: directory cannot be accepted", failing.len()),
            )
            .rule("scoring", None)
            .file(d.path.display().to_string())
            .official(format!(" {} files do not comply, directory cannot be accepted", failing.len())),
        );
    }
}

/// The seed rules over the directory's runs, unless bypassed.
fn check_seeds(plan: &BenchmarkDirPlan, runs: &[RunAnalysis], local: &mut Vec<Diagnostic>) {
    if plan.opts.seed_checker_bypass {
        local.push(
            Diagnostic::note("seeds", "seed checker bypassed")
                .rule("seeds", None)
                .file(plan.dir.path.display().to_string()),
        );
    } else {
        let seed_runs: Vec<(
            String,
            Result<Vec<seeds::SeedRecord>, crate::error::SeedError>,
        )> = runs
            .iter()
            .map(|r| (r.path.display().to_string(), r.seeds.clone()))
            .collect();
        local.extend(seeds::check(&seed_runs));
    }
}

/// The RCP test of the directory: the quirk notes, the outcome's findings
/// (attributed to the directory where they name no file) and the verdict.
/// Returns the official message (the report's RCP column).
fn check_rcp(
    ctx: &ScoreContext,
    plan: &BenchmarkDirPlan,
    runs: &[RunAnalysis],
    local: &mut Vec<Diagnostic>,
) -> String {
    let dir_path = plan.dir.path.display().to_string();
    let convergences = runs.iter().map(|r| r.convergence.clone()).collect();
    let check = check_rcp_runs(
        ctx,
        convergences,
        &ctx.rcp_options(plan.opts.rcp_bypass, plan.opts.bert_train_samples),
        Some(&plan.dir.benchmark),
    );
    local.extend(check.quirk_notes);
    let o = check.outcome;
    local.extend(o.diagnostics.iter().cloned().map(|x| {
        if x.file.is_none() {
            x.file(dir_path.clone())
        } else {
            x
        }
    }));
    if o.passed {
        local.push(
            Diagnostic::note("rcp", format!("RCP test passed: {}", o.message))
                .rule("rcp", None)
                .file(dir_path)
                .official(format!("RCP Test Passed: {}", o.message)),
        );
    } else {
        let mut e = Diagnostic::error("rcp", format!("RCP test failed: {}", o.message))
            .rule("rcp", None)
            .file(dir_path)
            .official(format!("RCP Test Failed: {}", o.message));
        if let (Some(rec), Some(m)) = (&o.record, o.submission_mean) {
            e = e
                .expected(format!(
                    "olympic mean convergence ≥ {:.4} (RCP {} at BS {}: mean {:.4}, max speedup {:.4})",
                    rec.mean / rec.max_speedup,
                    rec.name,
                    rec.bs,
                    rec.mean,
                    rec.max_speedup
                ))
                .found(format!("{m:.4}"));
        }
        local.push(e);
    }
    o.message
}
