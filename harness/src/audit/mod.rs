//! The audit of a signed submission folder, in three stages:
//!
//! 1. **signature**: the manifest's signature and every file's digest
//!    ([`referee_submission::sign::verify_dir_trusting`]); a package that
//!    does not verify is trusted no further. A key not checked against a
//!    trusted signer (`--allowed-signers`, `--signer`) leaves the step not
//!    done: the verdict is then at best INCOMPLETE;
//! 2. **package check**: the folder judged with referee's rules, and every
//!    result that `referee run --exec` supervised verified against the
//!    harness's witness of its clock;
//! 3. **re-runs**: the first K results of each benchmark trained again on
//!    this machine from their recorded configuration and seed — referee's
//!    own benchmarks in-process, a supervised program by running the code
//!    the package carries under the same supervision, in a sandbox
//!    ([`sandbox`]) and only with the auditor's consent ([`exec_rerun`]) —
//!    (refused when the code or the data differ, unless forced), their
//!    convergence compared with the original's curve and with the
//!    benchmark's RCP bounds.
//!
//! Every stage asked for is a [`Step`] that ends passed, failed, or not
//! done (with why). The verdict is PASS only when every step was done and
//! passed: a result that cannot be re-run here, or a convergence with no
//! RCP bounds to hold it to, is never counted as a pass.
//!
//! [`audit`] returns an [`AuditReport`]; its Markdown form is `audit.md`,
//! its JSON form `audit.json` ([`AuditReport::write`]).

use crate::common::clock::{Clock, SystemClock};
use crate::provenance::CodeIdentity;
use crate::session::collective::Local;
use crate::session::plan::{build_plan, dataset_fingerprints};
use crate::session::run::{Quiet, RunResult, run_once};
use error::{AuditError, NotRerunnable};
use referee_rules::Verdict;
use referee_rules::escape::{markdown, markdown_code, term, term_text};
use referee_rules::layout;
use referee_rules::mllog;
use referee_rules::package_check::{PackageOptions, PackageReport, check_package};
use referee_rules::policy::PolicyMode;
use referee_rules::rcp::RcpTable;
use referee_rules::report::{Detail, Report};
use referee_rules::untrusted::{self, FileKind, Links};
use referee_submission::sign::{VerifyReport, verify_dir_trusting};
use referee_workloads::bench::Benchmark;
use serde::Serialize;
use serde_json::Value;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub mod error;
pub mod exec_rerun;
pub mod sandbox;

/// Relative tolerance on each common evaluation point of original and re-run.
pub const CURVE_TOLERANCE: f64 = 0.02;

/// What the auditor asked for.
#[derive(Debug, Clone)]
pub struct AuditRequest {
    /// The signed submission folder.
    pub dir: PathBuf,
    /// Re-run this many results of each benchmark (the first K).
    pub rerun: usize,
    /// Where the re-runs' logs go.
    pub out: PathBuf,
    /// Who must have signed (an allowed_signers file, a pinned
    /// fingerprint, or unchecked).
    pub trust: referee_submission::sign::Trust,
    /// The auditor consents to running a supervised program's code
    /// (`--allow-exec`).
    pub allow_exec: bool,
    /// Asked when `allow_exec` is false: shown the plan of a re-run, true
    /// when the auditor agrees (a `yes` typed at a terminal). `None`: no
    /// one to ask.
    pub confirm: Option<fn(&str) -> bool>,
    /// How a supervised program's re-run is confined (`--sandbox`).
    pub sandbox: sandbox::SandboxChoice,
    /// Directories the sandbox also shows read-only (`--sandbox-ro`).
    pub sandbox_ro: Vec<PathBuf>,
    /// The datasets of a supervised program's re-run, in the order
    /// `run --exec --data` recorded them (`--data`).
    pub data: Vec<PathBuf>,
    /// Re-run even if the code or the data differ from the original's.
    pub force: bool,
    /// Where prepared datasets are.
    pub data_dir: PathBuf,
    /// The rules the package is judged with (the ruleset read from the
    /// package's path or logs unless given).
    pub rules: crate::rules_env::RulesRequest,
    /// Verify the runs' RFC 3161 time-stamps against this CA (crate::tsa).
    pub tsa_ca: Option<PathBuf>,
    /// What findings beyond the official verdict do (`--policy`).
    pub policy: PolicyMode,
    /// The organisation the signer must be (`--principal`): the key must
    /// be allowed for it, and the package must name it.
    pub principal: Option<String>,
    /// The seed the re-runs train with (`--rerun-seed`).
    pub rerun_seed: RerunSeed,
}

/// The seed of an audit's re-runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RerunSeed {
    /// The auditor's (drawn by `referee audit` unless given): the re-run
    /// must converge within the RCP distribution, and a curve equal to the
    /// original's under this other seed is a replayed run, not training.
    Auditor(u64),
    /// The original run's recorded seed: the curves must also agree point
    /// by point (within [`CURVE_TOLERANCE`]).
    Recorded,
}

/// How a step of the audit ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    Passed,
    Failed,
    /// Asked for but not carried out; `detail` says why.
    NotDone,
    /// Findings listed that do not change the verdict (policy findings
    /// beyond the official verdict, without `--policy error`).
    Noted,
}

/// One step of the audit: the signature, the package check, one re-run.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    pub step: String,
    pub status: StepStatus,
    pub detail: String,
}

impl StepStatus {
    /// As in the JSON form: `passed`, `failed`, `not_done`.
    pub fn as_str(self) -> &'static str {
        match self {
            StepStatus::Passed => "passed",
            StepStatus::Failed => "failed",
            StepStatus::NotDone => "not_done",
            StepStatus::Noted => "noted",
        }
    }
}

impl Step {
    fn new(step: impl Into<String>, status: StepStatus, detail: impl Into<String>) -> Self {
        Step {
            step: step.into(),
            status,
            detail: detail.into(),
        }
    }
}

/// PASS when every step passed; FAIL when one failed; INCOMPLETE when
/// none failed but one was not done.
fn verdict_of(steps: &[Step]) -> &'static str {
    if steps.iter().any(|s| s.status == StepStatus::Failed) {
        "FAIL"
    } else if steps.iter().any(|s| s.status == StepStatus::NotDone) {
        "INCOMPLETE"
    } else {
        "PASS"
    }
}

/// The RCP bounds a re-run's convergence is held to.
#[derive(Debug, Clone, Serialize)]
pub struct RcpBounds {
    pub record: String,
    pub min_acceptable: f64,
    pub mean: f64,
    pub stdev: f64,
    pub upper_3sd: f64,
    /// The engine and kernel set the record's points were measured on,
    /// where the table names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
}

/// A re-run compared with its original and with the RCP bounds.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// `PASS`, `FAIL`, or `NOT CHECKED` (the re-run converged, but no RCP
    /// record holds the convergence point to bounds).
    pub verdict: &'static str,
    /// `recorded` (the original's seed: the curves must agree point by
    /// point) or `auditor` (another seed: the convergence must lie in the
    /// RCP distribution, and an equal curve is a replay).
    pub seed: &'static str,
    pub original_seed: u64,
    pub rerun_seed: u64,
    /// Under another seed, the re-run's evaluations equal the original's
    /// at every common point: the program did not train from its seed.
    pub identical_curve: bool,
    /// The original's own convergence against the same bounds.
    pub original_within_rcp_bounds: Option<bool>,
    /// Under the auditor's seed, the bounds widened by this many samples
    /// each way: one evaluation interval (0 under the recorded seed).
    pub eval_interval_slack: u64,
    pub original_converged_at: Option<u64>,
    pub rerun_converged_at: Option<u64>,
    pub rcp_bounds: Option<RcpBounds>,
    pub within_rcp_bounds: Option<bool>,
    pub common_eval_points: usize,
    pub curve_max_relative_difference: f64,
    pub curve_tolerance: f64,
    pub original_curve: Vec<(u64, f64)>,
    pub rerun_curve: Vec<(u64, f64)>,
    /// The engine and kernel set the re-run trained on (referee's own
    /// benchmarks).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rerun_engine: Option<String>,
}

/// One result the audit tried to re-run.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Rerun {
    /// Not re-run: the code or the data differ and `--force` was not given.
    Refused { log: String, refused: Vec<String> },
    /// Planned and shown, not run: `not_run` says why (no consent, no
    /// sandbox).
    NotRun {
        log: String,
        not_run: String,
        plan: Box<exec_rerun::RerunPlan>,
    },
    /// Re-run and compared.
    Done {
        log: String,
        seed: u64,
        forced: bool,
        differences: Vec<String>,
        rerun_dir: String,
        comparison: Box<Comparison>,
        /// What ran, where and how confined (supervised programs).
        #[serde(skip_serializing_if = "Option::is_none")]
        plan: Option<Box<exec_rerun::RerunPlan>>,
    },
}

/// The audit's findings, in the order they were made.
#[derive(Debug, Clone, Serialize)]
pub struct AuditReport {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
    pub verify: VerifyReport,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub package_check: Option<PackageReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reruns: Option<Vec<Rerun>>,
    /// The ruleset the package was judged with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rules: Option<String>,
    /// Every step asked for, in order, with how it ended.
    pub steps: Vec<Step>,
    /// `PASS`, `FAIL` or `INCOMPLETE` (see [`Step`]).
    pub verdict: &'static str,
    /// `audit.md`, built as the stages ran.
    #[serde(skip)]
    pub markdown: String,
}

impl AuditReport {
    pub fn passed(&self) -> bool {
        self.verdict == "PASS"
    }

    /// Write `audit.md` and `audit.json` into `out`, each atomically.
    pub fn write(&self, out: &Path) -> io::Result<()> {
        let w = |name: &str, bytes: &[u8]| crate::fsutil::write_atomic(&out.join(name), bytes);
        w("audit.md", self.markdown.as_bytes())?;
        w(
            "audit.json",
            serde_json::to_string_pretty(self).expect("json").as_bytes(),
        )
    }

    /// The line that says where [`AuditReport::write`] wrote the report.
    pub fn written_line(out: &Path) -> String {
        format!(
            "audit report: {} and {}",
            out.join("audit.md").display(),
            out.join("audit.json").display()
        )
    }
}

/// The auditor's consent at a terminal: the plan of a package's program
/// shown on stderr, `yes` runs it (no terminal: no consent).
pub fn ask_at_terminal(plan: &str) -> bool {
    use std::io::{BufRead, IsTerminal};
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        return false;
    }
    let mut err = std::io::stderr().lock();
    let _ = write!(
        err,
        "referee: the package's program will run on this machine:\n{}Run it? Type yes to run, anything else to skip: ",
        term_text(plan)
    );
    let _ = err.flush();
    let mut line = String::new();
    if stdin.lock().read_line(&mut line).is_err() {
        return false;
    }
    line.trim() == "yes"
}

impl Report for AuditReport {
    /// One line per step, then the verdict.
    fn write_human(&self, out: &mut dyn Write, _: Detail) -> io::Result<()> {
        for s in &self.steps {
            let status = match s.status {
                StepStatus::Passed => "passed  ",
                StepStatus::Failed => "FAILED  ",
                StepStatus::NotDone => "NOT DONE",
                StepStatus::Noted => "noted   ",
            };
            writeln!(out, "{status} {}: {}", term(&s.step), term(&s.detail))?;
        }
        writeln!(out, "audit: {}", self.verdict)
    }
    fn write_markdown(&self, out: &mut dyn Write, _: Detail) -> io::Result<()> {
        out.write_all(self.markdown.as_bytes())
    }
    fn write_json(&self, out: &mut dyn Write) -> io::Result<()> {
        serde_json::to_writer_pretty(&mut *out, self)?;
        writeln!(out)
    }
}

/// Audit `req.dir`. `Err` only when the audit cannot be carried out at all
/// (an unreadable folder, rules or configuration); findings are in the report.
pub fn audit(req: &AuditRequest) -> Result<AuditReport, AuditError> {
    let mut md = format!(
        "# referee audit\n\nSubmission: {}  \nAudited on: this machine, referee {}\n\n",
        markdown_code(&req.dir.display().to_string()),
        crate::provenance::VERSION
    );
    let verify = verify_dir_trusting(&req.dir, &req.trust)?;
    signature_section(&mut md, &verify);
    let mut steps = vec![signature_step(&verify)];
    if let Some(step) = identity_step(&req.dir, &verify, &req.trust, req.principal.as_deref()) {
        md.push_str(&format!(
            "**Identity**: {} — {}\n\n",
            step.status.as_str(),
            markdown(&step.detail)
        ));
        steps.push(step);
    }
    if !verify.ok {
        md.push_str("\nThe package does not verify; nothing further is trusted or re-run.\n");
        steps.push(Step::new(
            "package check",
            StepStatus::NotDone,
            "the package does not verify",
        ));
        if req.rerun > 0 {
            steps.push(Step::new(
                "re-runs",
                StepStatus::NotDone,
                "the package does not verify",
            ));
        }
        md.push_str(&steps_section(&steps));
        return Ok(AuditReport {
            dir: None,
            verify,
            package_check: None,
            reruns: None,
            rules: None,
            verdict: verdict_of(&steps),
            steps,
            markdown: md,
        });
    }
    let rules = crate::rules_env::resolve_rules(&req.rules, std::slice::from_ref(&req.dir))?;
    let options = PackageOptions {
        policy: req.policy,
        ..PackageOptions::default()
    };
    let pkg = check_package(&rules.scoring, &req.dir, options, &|| {});
    package_section(&mut md, &pkg, &rules.description);
    steps.push(package_step(&pkg, &rules.description));
    if let Some(step) = policy_step(&pkg, req.policy) {
        policy_section(&mut md, &pkg);
        steps.push(step);
    }
    if let Some(step) = witness_step(&req.dir) {
        md.push_str(&format!(
            "\n**Witness**: {} — {}\n\n",
            step.status.as_str(),
            markdown(&step.detail)
        ));
        steps.push(step);
    }
    if let Some(ca) = &req.tsa_ca {
        use crate::tsa::verify::Outcome;
        let (outcome, detail) = crate::tsa::verify::audit_outcome(&req.dir, ca);
        let status = match outcome {
            Outcome::Passed => StepStatus::Passed,
            Outcome::Failed => StepStatus::Failed,
            Outcome::NotAnchored => StepStatus::NotDone,
        };
        md.push_str(&format!(
            "\n**Time-stamps**: {} — {}\n\n",
            status.as_str(),
            markdown(&detail)
        ));
        steps.push(Step::new("time-stamps", status, detail));
    }
    let mut rerunner = Rerunner::new(req, md, rules.scoring)?;
    rerunner.rerun_all()?;
    steps.append(&mut rerunner.steps);
    let mut md = rerunner.md;
    md.push_str(&steps_section(&steps));
    Ok(AuditReport {
        dir: Some(req.dir.display().to_string()),
        verify,
        package_check: Some(pkg),
        reruns: Some(rerunner.reruns),
        rules: Some(rules.description),
        verdict: verdict_of(&steps),
        steps,
        markdown: md,
    })
}

/// Who signed against whom the package says it is from: the
/// organisation the package names (its folder, and each system
/// description's `submitter`) must be one the trusted key is allowed for
/// (its allowed_signers principals), or the `--principal` the auditor
/// names. `None` when the signature was not checked against a trusted
/// signer (that step is then not done).
fn identity_step(
    dir: &Path,
    verify: &VerifyReport,
    trust: &referee_submission::sign::Trust,
    principal: Option<&str>,
) -> Option<Step> {
    use referee_submission::sign::{Trust, principals_allow};
    if !verify.ok || !verify.signers_checked {
        return None;
    }
    let names = package_orgs(dir);
    let step = |status, detail: String| Some(Step::new("identity", status, detail));
    let listed = verify.principals.join(", ");
    if let Some(p) = principal
        && matches!(trust, Trust::AllowedSigners(_))
        && !principals_allow(&verify.principals, p)
    {
        return step(
            StepStatus::Failed,
            format!(
                "--principal {p}: the key that signed is not allowed for it (its principals: {listed})"
            ),
        );
    }
    let wrong: Vec<&String> = names
        .iter()
        .filter(|n| match (principal, trust) {
            (Some(p), _) => !principals_allow(&[p.to_string()], n),
            (None, Trust::AllowedSigners(_)) => !principals_allow(&verify.principals, n),
            _ => false,
        })
        .collect();
    let shown = names
        .iter()
        .map(|n| format!("{n:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    if !wrong.is_empty() {
        let whom = match principal {
            Some(p) => format!("--principal {p}"),
            None => format!("the key's principals ({listed})"),
        };
        return step(
            StepStatus::Failed,
            format!(
                "the package names the organisation {}, which is not {whom}: a trusted key signed another organisation's package",
                wrong
                    .iter()
                    .map(|n| format!("{n:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
    }
    match (principal, trust) {
        (None, Trust::Fingerprint(_)) => step(
            StepStatus::Noted,
            format!(
                "the key is pinned by fingerprint, which names no owner: the package names {shown}; give --principal ORG to check it"
            ),
        ),
        (Some(p), _) => step(
            StepStatus::Passed,
            format!(
                "the package names {shown}, as --principal {p}; signer's principals: {}",
                if listed.is_empty() {
                    "none listed (pinned key)".into()
                } else {
                    listed.clone()
                }
            ),
        ),
        (None, _) => step(
            StepStatus::Passed,
            format!("the package names {shown}; the key is allowed for: {listed}"),
        ),
    }
}

/// The organisation a package names: its folder's name and each system
/// description's `submitter`, once each.
fn package_orgs(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let canonical = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    if let Some(n) = canonical.file_name() {
        names.push(n.to_string_lossy().into_owned());
    }
    let systems = dir.join("systems");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&systems)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    for f in files {
        if let Some(sub) = referee_rules::sysdesc::SystemDesc::load(&f)
            .ok()
            .and_then(|s| s.text("submitter"))
            .filter(|s| !s.trim().is_empty())
            && !names.contains(&sub)
        {
            names.push(sub);
        }
    }
    names
}

/// The run records of `referee run --exec` in one benchmark's
/// implementations: (record, run index, the sha256 of the result it
/// wrote).
fn record_entries(dir: &Path, benchmark: &str) -> Vec<(PathBuf, usize, String)> {
    let mut out = Vec::new();
    for r in run_record_files(dir, benchmark) {
        let Some(v) = read_json(&r, FileKind::Record).filter(|v| v["mode"] == "exec") else {
            continue;
        };
        for (i, run) in v["runs"].as_array().into_iter().flatten().enumerate() {
            out.push((
                r.clone(),
                i,
                run["log_sha256"].as_str().unwrap_or("").to_string(),
            ));
        }
    }
    out
}

/// The run records in one benchmark's implementations
/// (`benchmarks/B/implementations/*/referee_run_*.json`), sorted.
fn run_record_files(dir: &Path, benchmark: &str) -> Vec<PathBuf> {
    let imps = dir
        .join("benchmarks")
        .join(benchmark)
        .join("implementations");
    let mut records: Vec<PathBuf> = std::fs::read_dir(imps)
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|imp| {
            std::fs::read_dir(imp.path())
                .into_iter()
                .flatten()
                .flatten()
                .map(|f| f.path())
        })
        .filter(|f| {
            f.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("referee_run_") && n.ends_with(".json"))
        })
        .collect();
    records.sort();
    records
}

/// A JSON file of a package, read through the bounded, link-refusing
/// opener (`None` when it cannot be read or parsed).
fn read_json(path: &Path, kind: FileKind) -> Option<Value> {
    untrusted::read_to_string(path, kind, Links::Refuse)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
}

/// The results a supervised run wrote, each verified against its witness;
/// in a benchmark with run records, every result must be one of their
/// entries and every entry a result of the package (a hand-edited result
/// matches no entry). `None` when the package holds no run record.
fn witness_step(dir: &Path) -> Option<Step> {
    let mut witnessed = 0;
    let mut problems = Vec::new();
    let mut supervised = false;
    let dirs = layout::benchmark_dirs(dir, "training").unwrap_or_default();
    let mut benchmarks: Vec<&str> = dirs.iter().map(|d| d.benchmark.as_str()).collect();
    benchmarks.sort();
    benchmarks.dedup();
    for benchmark in benchmarks {
        let entries = record_entries(dir, benchmark);
        if entries.is_empty() {
            continue;
        }
        supervised = true;
        let mut matched: std::collections::HashSet<String> = Default::default();
        for d in dirs.iter().filter(|d| d.benchmark == benchmark) {
            for log in layout::result_files(&d.path).unwrap_or_default() {
                match crate::exec::witness::verify_log(&log) {
                    Ok(None) => problems.push(format!(
                        "{}: no entry of the package's run records holds this result (its sha256 matches none): the harness did not supervise it as recorded, or it was edited since",
                        log.display()
                    )),
                    Ok(Some((found, diags))) => {
                        witnessed += 1;
                        if let Some(sha) = found.run["log_sha256"].as_str() {
                            matched.insert(sha.to_string());
                        }
                        problems.extend(diags.iter().map(|d| {
                            format!(
                                "{}: {} ({})",
                                log.display(),
                                d.message,
                                d.found.as_deref().unwrap_or("")
                            )
                        }));
                    }
                    Err(e) => {
                        witnessed += 1;
                        problems.push(e.to_string());
                    }
                }
            }
        }
        for (record, i, sha) in &entries {
            if !matched.contains(sha) {
                problems.push(format!(
                    "{}: run {i}'s result (sha256 {}) is not among the package's results",
                    record.display(),
                    sha.get(..12).unwrap_or(sha)
                ));
            }
        }
    }
    if !supervised {
        return None;
    }
    Some(if problems.is_empty() {
        Step::new(
            "witness",
            StepStatus::Passed,
            format!(
                "{witnessed} supervised results agree with the harness's witness of their clock"
            ),
        )
    } else {
        Step::new("witness", StepStatus::Failed, problems.join("; "))
    })
}

fn signature_step(verify: &VerifyReport) -> Step {
    let key = verify.key_fingerprint.as_deref().unwrap_or("?");
    if verify.ok && !verify.signers_checked {
        Step::new(
            "signature",
            StepStatus::NotDone,
            format!(
                "{} files verified; signed by key {key}, not checked against a trusted signer ({})",
                verify.files,
                referee_submission::sign::UNCHECKED_HINT
            ),
        )
    } else if verify.ok {
        Step::new(
            "signature",
            StepStatus::Passed,
            format!(
                "{} files verified, signed by key {key}, trusted by {}",
                verify.files,
                verify.trusted_by.as_deref().unwrap_or("?")
            ),
        )
    } else {
        Step::new(
            "signature",
            StepStatus::Failed,
            verify
                .problems
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join("; "),
        )
    }
}

fn package_step(pkg: &PackageReport, rules: &str) -> Step {
    if pkg.verdict == Verdict::Pass {
        return Step::new(
            "package check",
            StepStatus::Passed,
            format!("acceptable under {rules}"),
        );
    }
    let errors: Vec<String> = pkg
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(|d| match &d.file {
            Some(f) => format!("{f}: {}", d.message),
            None => d.message.clone(),
        })
        .collect();
    let shown = errors
        .iter()
        .take(5)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ");
    let more = errors.len().saturating_sub(5);
    Step::new(
        "package check",
        StepStatus::Failed,
        format!(
            "not acceptable under {rules}: {shown}{}",
            if more > 0 {
                format!(" (and {more} more)")
            } else {
                String::new()
            }
        ),
    )
}

/// The last section of `audit.md`: every step, then the verdict.
fn steps_section(steps: &[Step]) -> String {
    let mut md = String::from("\n## Steps\n\n| step | status | detail |\n| --- | --- | --- |\n");
    for s in steps {
        let status = s.status.as_str();
        md.push_str(&format!(
            "| {} | {status} | {} |\n",
            markdown(&s.step),
            markdown(&s.detail)
        ));
    }
    md.push_str(&format!("\n## Verdict\n\n**{}**\n", verdict_of(steps)));
    md
}

/// Section 1 of `audit.md`.
fn signature_section(md: &mut String, verify: &VerifyReport) {
    md.push_str(&format!(
        "## 1. Signature\n\n{}: {} files, key {} ({})\n\n",
        if verify.ok { "VERIFIED" } else { "FAILED" },
        verify.files,
        markdown(verify.key_fingerprint.as_deref().unwrap_or("?")),
        match &verify.trusted_by {
            Some(by) => format!("trusted by {}", markdown(by)),
            None => "not checked against a trusted signer".to_string(),
        }
    ));
    for p in &verify.problems {
        md.push_str(&format!("- {}\n", markdown(&p.to_string())));
    }
}

/// Section 2 of `audit.md`.
/// The package's findings beyond the official verdict: noted (or, under
/// `--policy error`, failed); no step when there are none and they are
/// only warnings.
fn policy_step(pkg: &PackageReport, mode: PolicyMode) -> Option<Step> {
    match &pkg.policy_summary {
        None if mode == PolicyMode::Error => Some(Step::new(
            "policy",
            StepStatus::Passed,
            "no finding beyond the official verdict",
        )),
        None => None,
        Some(s) => Some(Step::new(
            "policy",
            if s.fails() {
                StepStatus::Failed
            } else {
                StepStatus::Noted
            },
            s.line(),
        )),
    }
}

fn policy_section(md: &mut String, pkg: &PackageReport) {
    let Some(s) = &pkg.policy_summary else {
        return;
    };
    md.push_str(&format!(
        "### Beyond the official verdict\n\n{}\n\n",
        markdown(&s.line())
    ));
    for d in &pkg.policy {
        md.push_str(&format!(
            "- {} `{}`: {} (rule: {})\n",
            markdown(d.file.as_deref().unwrap_or("")),
            d.code,
            markdown(&d.message),
            markdown(d.rule.as_deref().unwrap_or(""))
        ));
    }
}

fn package_section(md: &mut String, pkg: &PackageReport, rules: &str) {
    md.push_str(&format!(
        "## 2. Package check\n\n{} ({})\n\n",
        pkg.verdict.as_str(),
        markdown(rules)
    ));
    for d in pkg.diagnostics.iter().filter(|d| d.is_error()) {
        md.push_str(&format!(
            "- {} `{}`: {}\n",
            markdown(d.file.as_deref().unwrap_or("")),
            d.code,
            markdown(&d.message)
        ));
    }
}

/// What an original log says about its run.
struct Curve {
    /// (samples_count, metric) of every evaluation.
    points: Vec<(u64, f64)>,
    /// The last evaluation before a successful run_stop.
    converged_at: Option<u64>,
    /// The `referee_provenance` value.
    provenance: Value,
    /// `submission_org` and `submission_platform`.
    org: String,
    platform: String,
    /// `global_batch_size`.
    global_batch_size: Option<f64>,
}

/// Read an original log once: its evaluation curve, convergence point,
/// provenance and submission keys.
fn read_curve(log: &Path, key: &str) -> Result<Curve, AuditError> {
    let parsed = mllog::read_file(log).map_err(|e| AuditError::Io {
        path: log.to_path_buf(),
        source: e,
    })?;
    let mut c = Curve {
        points: Vec::new(),
        converged_at: None,
        provenance: Value::Null,
        org: String::new(),
        platform: String::new(),
        global_batch_size: None,
    };
    let text = |r: &mllog::Record| r.value().as_str().map(str::to_string);
    for r in &parsed.records {
        match r.key() {
            k if k == key => {
                if let (Some(s), Some(v)) = (
                    r.meta("samples_count").and_then(|x| x.as_f64()),
                    r.value().as_f64(),
                ) {
                    c.points.push((s as u64, v));
                }
            }
            "run_stop" if r.meta("status").and_then(|s| s.as_str()) == Some("success") => {
                c.converged_at = c.points.last().map(|x| x.0);
            }
            "referee_provenance" => c.provenance = serde_json::Value::from(r.value()),
            "global_batch_size" if c.global_batch_size.is_none() => {
                c.global_batch_size = r.value().as_f64()
            }
            // The first occurrence counts, as the original reader took it.
            "submission_org" if c.org.is_empty() => c.org = text(r).unwrap_or_default(),
            "submission_platform" if c.platform.is_empty() => {
                c.platform = text(r).unwrap_or_default()
            }
            _ => {}
        }
    }
    Ok(c)
}

/// Stage 3: the re-runs, with the state they share.
struct Rerunner<'a> {
    req: &'a AuditRequest,
    md: String,
    /// One step per result asked to be re-run.
    steps: Vec<Step>,
    reruns: Vec<Rerun>,
    current: CodeIdentity,
    engine: referee_workloads::Engine,
    /// The package's rules (RCP tables of official benchmarks).
    scoring: referee_rules::score::ScoreContext,
}

/// How a benchmark directory's results can be re-run.
enum Recorded {
    /// One of referee's benchmarks: its configuration and division.
    Own {
        bench: &'static dyn Benchmark,
        config: Value,
        division: String,
    },
    /// A program `referee run --exec` supervised: its command, from the
    /// run records in the implementation.
    Exec,
    /// Cannot be re-run here (also written into the report).
    NotRerunnable(NotRerunnable),
}

impl<'a> Rerunner<'a> {
    fn new(
        req: &'a AuditRequest,
        mut md: String,
        scoring: referee_rules::score::ScoreContext,
    ) -> Result<Self, AuditError> {
        md.push_str("## 3. Re-runs\n\n");
        if req.rerun == 0 {
            md.push_str("No re-run requested (`--rerun K`).\n");
        }
        let engine = referee_workloads::Engine::for_device(&referee_workloads::Device::Cpu)
            .map_err(|e| AuditError::Engine(e.to_string()))?;
        Ok(Rerunner {
            req,
            md,
            steps: Vec::new(),
            reruns: Vec::new(),
            current: CodeIdentity::current(),
            engine,
            scoring,
        })
    }

    /// Every benchmark directory: its first K results re-run.
    fn rerun_all(&mut self) -> Result<(), AuditError> {
        if self.req.rerun == 0 {
            return Ok(());
        }
        for d in layout::benchmark_dirs(&self.req.dir, "training").unwrap_or_default() {
            let logs = layout::result_files(&d.path).unwrap_or_default();
            let asked = &logs[..logs.len().min(self.req.rerun)];
            match self.recorded(&d)? {
                Recorded::Exec => {
                    for log in asked {
                        self.rerun_exec(&d.benchmark, log)?;
                    }
                }
                Recorded::NotRerunnable(why) => {
                    for log in asked {
                        self.not_done(log, why.to_string());
                    }
                }
                recorded => {
                    for log in asked {
                        self.rerun_one(&d.benchmark, &recorded, log)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// A re-run that was asked for and cannot be done.
    fn not_done(&mut self, log: &Path, why: String) {
        self.steps.push(Step::new(
            format!("re-run {}", log.display()),
            StepStatus::NotDone,
            why,
        ));
    }

    /// The benchmark's recorded configuration, or why its results cannot
    /// be re-run here (also written into the report).
    fn recorded(&mut self, d: &layout::BenchmarkDir) -> Result<Recorded, AuditError> {
        if self.supervised(&d.benchmark) {
            return Ok(Recorded::Exec);
        }
        let Some(bench) = crate::own_benchmarks::find(&d.benchmark) else {
            self.md.push_str(&format!(
                "- {}: not a referee benchmark; cannot be re-run here\n",
                markdown_code(&d.benchmark)
            ));
            return Ok(Recorded::NotRerunnable(NotRerunnable::NotOwnBenchmark {
                benchmark: d.benchmark.clone(),
            }));
        };
        let impl_dir = self
            .req
            .dir
            .join("benchmarks")
            .join(&d.benchmark)
            .join("implementations");
        let config_path = std::fs::read_dir(&impl_dir).ok().and_then(|rd| {
            rd.flatten()
                .map(|e| e.path().join("config.json"))
                .find(|p| p.is_file())
        });
        let Some(config_path) = config_path else {
            self.md.push_str(&format!(
                "- {}: no implementations/*/config.json; cannot re-run\n",
                markdown_code(&d.benchmark)
            ));
            return Ok(Recorded::NotRerunnable(NotRerunnable::NoConfig {
                benchmark: d.benchmark.clone(),
            }));
        };
        let config: Value = read_json(&config_path, FileKind::Config).ok_or_else(|| {
            AuditError::UnreadableConfig {
                path: config_path.clone(),
            }
        })?;
        let division = referee_rules::sysdesc::SystemDesc::load(
            &self
                .req
                .dir
                .join("systems")
                .join(format!("{}.json", d.system)),
        )
        .ok()
        .and_then(|s| s.text("division"))
        .unwrap_or_else(|| "closed".into());
        Ok(Recorded::Own {
            bench,
            config,
            division,
        })
    }

    /// Does the implementation hold run records of `referee run --exec`?
    fn supervised(&self, benchmark: &str) -> bool {
        run_record_files(&self.req.dir, benchmark)
            .iter()
            .any(|f| read_json(f, FileKind::Record).is_some_and(|v| v["mode"] == "exec"))
    }

    /// The seeds of a re-run of an original trained with `recorded`.
    fn seeds(&self, recorded: u64) -> Seeds {
        Seeds {
            original: recorded,
            rerun: match self.req.rerun_seed {
                RerunSeed::Auditor(s) => s,
                RerunSeed::Recorded => recorded,
            },
        }
    }

    /// Refused: the code differs and `--force` was not given.
    fn refuse(&mut self, log: &Path, differences: Vec<String>) {
        self.not_done(
            log,
            format!(
                "refused: {} (--force re-runs anyway)",
                differences.join("; ")
            ),
        );
        self.md.push_str(&format!(
            "- {}: refused to re-run: {} (use --force to re-run anyway)\n",
            markdown_code(&log.display().to_string()),
            markdown(&differences.join("; "))
        ));
        self.reruns.push(Rerun::Refused {
            log: log.display().to_string(),
            refused: differences,
        });
    }

    /// A fresh directory for the re-run of `log`.
    fn rerun_dir(&self, benchmark: &str, log: &Path) -> PathBuf {
        let dir = self.req.out.join(format!(
            "rerun-{benchmark}-{}",
            log.file_stem()
                .map(|s| s.to_string_lossy().to_string())
                .unwrap_or_default()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    /// The re-run could not complete.
    fn failed(&mut self, log: &Path, e: String) {
        self.md.push_str(&format!(
            "- {}: re-run failed: {}\n",
            markdown_code(&log.display().to_string()),
            markdown(&e)
        ));
        self.steps.push(Step::new(
            format!("re-run {}", log.display()),
            StepStatus::Failed,
            format!("the re-run failed: {e}"),
        ));
    }

    /// A re-run carried out and compared.
    fn done(
        &mut self,
        log: &Path,
        seed: u64,
        differences: Vec<String>,
        rerun_dir: PathBuf,
        comparison: Comparison,
        plan: Option<Box<exec_rerun::RerunPlan>>,
    ) {
        self.steps.push(rerun_step(log, &comparison));
        self.md
            .push_str(&rerun_line(log, seed, &differences, &comparison));
        self.reruns.push(Rerun::Done {
            log: log.display().to_string(),
            seed,
            forced: !differences.is_empty(),
            differences,
            rerun_dir: rerun_dir.display().to_string(),
            comparison: Box::new(comparison),
            plan,
        });
    }

    /// Why a re-run would not reproduce the original: other code, other data.
    fn differences(
        &self,
        prov: &Value,
        fingerprints: &std::collections::BTreeMap<String, String>,
    ) -> Vec<String> {
        let current = &self.current;
        let mut differences = Vec::new();
        if prov["git_commit"].as_str() != Some(current.git_commit.as_str())
            || prov["uncommitted_diff_sha256"].as_str()
                != Some(current.uncommitted_diff_sha256.as_str())
        {
            differences.push(format!(
                "code: original {} (diff {}), this referee {} (diff {})",
                prov["git_commit"].as_str().unwrap_or("?"),
                prov["uncommitted_diff_sha256"].as_str().unwrap_or(""),
                current.git_commit,
                current.uncommitted_diff_sha256
            ));
        }
        for (ds, fp) in fingerprints {
            let orig_fp = prov["dataset_fingerprints"][ds].as_str().unwrap_or("");
            if orig_fp != fp {
                differences.push(format!("dataset {ds}: original {orig_fp}, here {fp}"));
            }
        }
        differences
    }

    /// Re-run one result and compare it.
    fn rerun_one(&mut self, benchmark: &str, rec: &Recorded, log: &Path) -> Result<(), AuditError> {
        let Recorded::Own {
            bench,
            config,
            division,
        } = rec
        else {
            return self.rerun_exec(benchmark, log);
        };
        let orig = read_curve(log, bench.spec().metric.key)?;
        let Some(seed) = orig.provenance["seed"].as_u64() else {
            self.md.push_str(&format!(
                "- {}: no recorded seed (referee_provenance); cannot re-run\n",
                markdown_code(&log.display().to_string())
            ));
            self.not_done(log, "no recorded seed (referee_provenance)".into());
            return Ok(());
        };
        let fingerprints = dataset_fingerprints(*bench, &self.req.data_dir)?;
        let differences = self.differences(&orig.provenance, &fingerprints);
        if !differences.is_empty() && !self.req.force {
            self.refuse(log, differences);
            return Ok(());
        }
        let rerun_dir = self.rerun_dir(benchmark, log);
        std::fs::create_dir_all(&rerun_dir).map_err(|e| AuditError::Io {
            path: rerun_dir.clone(),
            source: e,
        })?;
        let mut plan = build_plan(
            *bench,
            config.clone(),
            division,
            &orig.org,
            &orig.platform,
            self.req.data_dir.clone(),
            rerun_dir.clone(),
            referee_workloads::Device::Cpu,
            "cpu",
            self.engine,
            fingerprints,
        );
        plan.cache_clear = false;
        let clock: Arc<dyn Clock> = Arc::new(SystemClock::default());
        let seeds = self.seeds(seed);
        eprintln!(
            "referee: re-running {} (seed {}, the original's {seed})",
            term(&log.display().to_string()),
            seeds.rerun
        );
        let r: RunResult = match run_once(&plan, 0, seeds.rerun, clock, &mut Local, &Quiet) {
            Ok(r) => r,
            Err(e) => {
                self.failed(log, e.to_string());
                return Ok(());
            }
        };
        let rerun_conv = (r.status == crate::outcome::RunStatus::Success)
            .then(|| r.evals.last().map(|e| e.0))
            .flatten();
        let bounds = own_rcp_table(*bench)
            .and_then(|t| rcp_bounds(&t, bench.global_batch_size(config) as f64));
        let rerun_curve: Vec<(u64, f64)> = r.evals.iter().map(|e| (e.0, e.1)).collect();
        let mut comparison = compare(
            bounds,
            &orig.points,
            orig.converged_at,
            &rerun_curve,
            rerun_conv,
            seeds,
        );
        comparison.rerun_engine = Some(self.engine.name().to_string());
        self.done(log, seeds.rerun, differences, rerun_dir, comparison, None);
        Ok(())
    }
}

/// The step of one re-run that was carried out.
fn rerun_step(log: &Path, c: &Comparison) -> Step {
    let conv = |x: Option<u64>| x.map(|v| v.to_string()).unwrap_or_else(|| "never".into());
    let mut detail = format!(
        "original (seed {}) converged at {}, re-run at {}",
        c.original_seed,
        conv(c.original_converged_at),
        conv(c.rerun_converged_at),
    );
    if c.seed == "recorded" {
        detail.push_str(&format!(
            " under the recorded seed; curves differ by at most {:.4} (tolerance {})",
            c.curve_max_relative_difference, c.curve_tolerance
        ));
    } else {
        detail.push_str(&format!(
            " under the auditor's seed {}; curves differ by at most {:.4}",
            c.rerun_seed, c.curve_max_relative_difference
        ));
    }
    if c.identical_curve {
        detail.push_str(&format!(
            "; the re-run's {} evaluations equal the original's under another seed: the program does not train from its seed (a replayed log?)",
            c.common_eval_points
        ));
    }
    match (&c.rcp_bounds, c.within_rcp_bounds) {
        (Some(b), Some(w)) => detail.push_str(&format!(
            "; RCP {} bounds [{:.0}, {:.0}]{}: {}{}",
            b.record,
            b.min_acceptable,
            b.upper_3sd,
            if c.eval_interval_slack > 0 {
                format!(" ± one evaluation ({})", c.eval_interval_slack)
            } else {
                String::new()
            },
            if w { "within" } else { "outside" },
            match c.original_within_rcp_bounds {
                Some(false) => " (the original converged outside them)",
                _ => "",
            }
        )),
        _ => detail.push_str(
            "; convergence not checked against RCP bounds (no RCP record for this batch size)",
        ),
    }
    if let (Some(b), Some(rerun)) = (&c.rcp_bounds, &c.rerun_engine)
        && let Some(reference) = b.engine.as_deref().filter(|e| e != rerun)
    {
        detail.push_str(&format!(
            "; the RCPs hold for engine {reference}, the re-run trained on {rerun} (convergence on another kernel set may differ)"
        ));
    }
    let status = match c.verdict {
        "PASS" => StepStatus::Passed,
        "FAIL" => StepStatus::Failed,
        _ => StepStatus::NotDone,
    };
    Step::new(format!("re-run {}", log.display()), status, detail)
}

/// The `audit.md` line of one re-run.
fn rerun_line(log: &Path, seed: u64, differences: &[String], c: &Comparison) -> String {
    format!(
        "- {} (seed {seed}){}: {} — original converged at {}, re-run at {}; RCP bounds {}; curve max relative difference {}\n",
        markdown_code(&log.display().to_string()),
        if differences.is_empty() {
            String::new()
        } else {
            format!(" [forced: {}]", markdown(&differences.join("; ")))
        },
        c.verdict,
        c.original_converged_at
            .map(|x| x.to_string())
            .unwrap_or_else(|| "never".into()),
        json(&c.rerun_converged_at),
        markdown(&json(&c.rcp_bounds)),
        json(&c.curve_max_relative_difference)
    )
}

/// JSON text of a value (as `audit.md` shows numbers, nulls and records).
fn json<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("serialisable")
}

/// The RCP record a re-run at global batch size `gbs` is held to: the
/// table's record for that size, or one interpolated between its
/// neighbours.
fn rcp_bounds(table: &RcpTable, gbs: f64) -> Option<RcpBounds> {
    let rec = table.record_for(gbs)?;
    Some(RcpBounds {
        record: rec.name,
        min_acceptable: rec.min_epochs,
        mean: rec.mean,
        stdev: rec.stdev,
        upper_3sd: rec.mean + 3.0 * rec.stdev,
        engine: rec.engine,
    })
}

/// The RCP table of one of referee's benchmarks.
fn own_rcp_table(bench: &dyn Benchmark) -> Option<RcpTable> {
    RcpTable::from_json(
        bench.rcp_json(),
        "rcps",
        "training",
        referee_workloads::bench::RULESET,
        bench.spec().name,
        &crate::own_benchmarks::ruleset_facts(),
    )
    .ok()
}

/// The most common gap between consecutive evaluations of a curve (0
/// for fewer than two).
fn eval_interval(points: &[(u64, f64)]) -> u64 {
    let mut gaps: Vec<u64> = points
        .windows(2)
        .map(|w| w[1].0.saturating_sub(w[0].0))
        .filter(|g| *g > 0)
        .collect();
    gaps.sort_unstable();
    let mut best = (0u64, 0usize);
    for g in gaps.chunk_by(|a, b| a == b) {
        if g.len() > best.1 {
            best = (g[0], g.len());
        }
    }
    best.0
}

/// The seeds of an original run and its re-run.
#[derive(Debug, Clone, Copy)]
struct Seeds {
    original: u64,
    rerun: u64,
}

/// At least this many common evaluations, all equal, make a curve under
/// another seed a replay (one point can coincide by chance, e.g. an
/// evaluation before any step).
const REPLAY_MIN_POINTS: usize = 2;

/// Compare a re-run's curve and convergence with its original's and with
/// the RCP bounds. Under the recorded seed the curves must agree within
/// [`CURVE_TOLERANCE`]; under the auditor's seed they need not, but must
/// not be equal (a program that ignores its seed replays a log), and the
/// convergence is judged against the RCP distribution alone.
fn compare(
    bounds: Option<RcpBounds>,
    orig: &[(u64, f64)],
    orig_conv: Option<u64>,
    rerun: &[(u64, f64)],
    rerun_conv: Option<u64>,
    seeds: Seeds,
) -> Comparison {
    let mut max_rel = 0.0f64;
    let mut common = 0;
    for (s, v) in orig {
        if let Some(e) = rerun.iter().find(|e| e.0 == *s) {
            common += 1;
            let rel = (e.1 - v).abs() / v.abs().max(1e-12);
            max_rel = max_rel.max(rel);
        }
    }
    let recorded = seeds.original == seeds.rerun;
    // A run's convergence is seen only at an evaluation: under another
    // seed the bounds are widened by one evaluation interval each way
    // (a reference whose runs all converged at the same evaluation has a
    // spread of 0, which a new seed's run one evaluation later would
    // miss through no fault of its own).
    let slack = if recorded {
        0
    } else {
        eval_interval(orig).max(eval_interval(rerun))
    };
    let in_bounds = |conv: Option<u64>| match (conv, &bounds) {
        (Some(c), Some(b)) => Some(
            (c as f64) >= b.min_acceptable - slack as f64
                && (c as f64) <= b.upper_3sd + slack as f64,
        ),
        _ => None,
    };
    let within = in_bounds(rerun_conv);
    let identical_curve = !recorded && common >= REPLAY_MIN_POINTS && max_rel == 0.0;
    let curves_agree = !recorded || (common > 0 && max_rel <= CURVE_TOLERANCE);
    let verdict = match (
        rerun_conv.is_some() && curves_agree && !identical_curve,
        within,
    ) {
        (false, _) | (true, Some(false)) => "FAIL",
        (true, Some(true)) => "PASS",
        (true, None) => "NOT CHECKED",
    };
    Comparison {
        verdict,
        eval_interval_slack: slack,
        seed: if recorded { "recorded" } else { "auditor" },
        original_seed: seeds.original,
        rerun_seed: seeds.rerun,
        identical_curve,
        original_within_rcp_bounds: in_bounds(orig_conv),
        original_converged_at: orig_conv,
        rerun_converged_at: rerun_conv,
        rcp_bounds: bounds,
        within_rcp_bounds: within,
        common_eval_points: common,
        curve_max_relative_difference: max_rel,
        curve_tolerance: CURVE_TOLERANCE,
        original_curve: orig.to_vec(),
        rerun_curve: rerun.to_vec(),
        rerun_engine: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn comparison(
        bounds: Option<RcpBounds>,
        within: Option<bool>,
        verdict: &'static str,
    ) -> Comparison {
        Comparison {
            verdict,
            seed: "recorded",
            original_seed: 1,
            rerun_seed: 1,
            identical_curve: false,
            original_within_rcp_bounds: None,
            eval_interval_slack: 0,
            original_converged_at: Some(9216),
            rerun_converged_at: Some(9216),
            rcp_bounds: bounds,
            within_rcp_bounds: within,
            common_eval_points: 6,
            curve_max_relative_difference: 0.001,
            curve_tolerance: CURVE_TOLERANCE,
            original_curve: vec![],
            rerun_curve: vec![],
            rerun_engine: None,
        }
    }

    fn bounds() -> RcpBounds {
        RcpBounds {
            record: "b16".into(),
            min_acceptable: 1000.0,
            mean: 1500.0,
            stdev: 100.0,
            upper_3sd: 1800.0,
            engine: None,
        }
    }

    #[test]
    fn under_the_recorded_seed_the_curves_must_agree() {
        let orig = [(500, 0.5), (1000, 0.7), (1500, 0.8)];
        let seeds = Seeds {
            original: 7,
            rerun: 7,
        };
        let c = compare(Some(bounds()), &orig, Some(1500), &orig, Some(1500), seeds);
        assert_eq!(
            (c.verdict, c.seed, c.identical_curve),
            ("PASS", "recorded", false)
        );
        let off = [(500, 0.5), (1000, 0.6), (1500, 0.8)];
        let c = compare(Some(bounds()), &orig, Some(1500), &off, Some(1500), seeds);
        assert_eq!(c.verdict, "FAIL", "{c:?}");
        let c = compare(None, &orig, Some(1500), &orig, Some(1500), seeds);
        assert_eq!(c.verdict, "NOT CHECKED");
        // No widening: the original is reproduced, evaluation for
        // evaluation.
        let c = compare(Some(bounds()), &orig, Some(1500), &orig, Some(1900), seeds);
        assert_eq!((c.verdict, c.eval_interval_slack), ("FAIL", 0));
    }

    #[test]
    fn under_another_seed_the_rcp_distribution_judges_and_a_replay_fails() {
        let orig = [(500, 0.5), (1000, 0.7), (1500, 0.8)];
        let other = [(500, 0.52), (1000, 0.66), (1500, 0.79), (1750, 0.81)];
        let seeds = Seeds {
            original: 7,
            rerun: 123,
        };
        // Another curve, converged inside the bounds: a pass, however far
        // the curves are apart.
        let c = compare(Some(bounds()), &orig, Some(1500), &other, Some(1750), seeds);
        assert_eq!(
            (c.verdict, c.seed, c.identical_curve),
            ("PASS", "auditor", false)
        );
        assert!(c.curve_max_relative_difference > CURVE_TOLERANCE);
        assert_eq!(c.original_within_rcp_bounds, Some(true));
        // One evaluation past the bounds: seen at the next evaluation,
        // within; two: outside. Or never converged: a failure.
        assert_eq!(eval_interval(&orig), 500);
        let c = compare(Some(bounds()), &orig, Some(1500), &other, Some(2250), seeds);
        assert_eq!((c.verdict, c.eval_interval_slack), ("PASS", 500), "{c:?}");
        assert!(
            rerun_step(Path::new("r.txt"), &c)
                .detail
                .contains("± one evaluation (500): within")
        );
        let c = compare(Some(bounds()), &orig, Some(1500), &other, Some(2350), seeds);
        assert_eq!(c.verdict, "FAIL");
        let c = compare(Some(bounds()), &orig, Some(1500), &other, None, seeds);
        assert_eq!(c.verdict, "FAIL");
        // The same curve under another seed: a replay.
        let c = compare(Some(bounds()), &orig, Some(1500), &orig, Some(1500), seeds);
        assert!(c.identical_curve);
        assert_eq!(c.verdict, "FAIL");
        let step = rerun_step(Path::new("r.txt"), &c);
        assert_eq!(step.status, StepStatus::Failed);
        assert!(
            step.detail.contains("does not train from its seed"),
            "{}",
            step.detail
        );
        // One common point equal by chance is no replay.
        let one = [(500, 0.5), (1250, 0.75), (1700, 0.82)];
        let c = compare(Some(bounds()), &orig, Some(1500), &one, Some(1700), seeds);
        assert!(!c.identical_curve && c.verdict == "PASS", "{c:?}");
        // The original's own convergence is reported against the bounds.
        let c = compare(Some(bounds()), &orig, Some(400), &other, Some(1750), seeds);
        assert_eq!(c.original_within_rcp_bounds, Some(false));
        assert!(
            rerun_step(Path::new("r.txt"), &c)
                .detail
                .contains("the original converged outside them")
        );
    }

    fn verified(principals: &[&str]) -> VerifyReport {
        VerifyReport {
            dir: String::new(),
            ok: true,
            files: 1,
            bytes: 1,
            key_fingerprint: Some("SHA256:x".into()),
            signers_checked: true,
            trusted_by: Some("allowed_signers f".into()),
            principals: principals.iter().map(|p| p.to_string()).collect(),
            problems: Vec::new(),
        }
    }

    #[test]
    fn a_trusted_key_vouches_only_for_its_own_organisation() {
        use referee_submission::sign::Trust;
        let t = tempfile::tempdir().unwrap();
        let org = t.path().join("Acme");
        std::fs::create_dir_all(org.join("systems")).unwrap();
        std::fs::write(
            org.join("systems/box.json"),
            r#"{"submitter": "Acme", "division": "closed"}"#,
        )
        .unwrap();
        let signers = Trust::AllowedSigners("f".into());
        let pinned = Trust::Fingerprint("SHA256:x".into());
        let status = |v: &VerifyReport, trust: &Trust, p: Option<&str>| {
            identity_step(&org, v, trust, p).map(|s| (s.status, s.detail))
        };
        let (st, detail) = status(&verified(&["Acme"]), &signers, None).unwrap();
        assert_eq!(st, StepStatus::Passed, "{detail}");
        let (st, detail) = status(&verified(&["Globex"]), &signers, None).unwrap();
        assert_eq!(st, StepStatus::Failed);
        assert!(
            detail.contains("\"Acme\"") && detail.contains("Globex"),
            "{detail}"
        );
        // --principal: the key must be allowed for it, and the package
        // must name it.
        let (st, _) = status(&verified(&["Acme", "Globex"]), &signers, Some("Globex")).unwrap();
        assert_eq!(st, StepStatus::Failed);
        let (st, _) = status(&verified(&["Acme"]), &signers, Some("Globex")).unwrap();
        assert_eq!(st, StepStatus::Failed);
        let (st, _) = status(&verified(&[]), &pinned, Some("Acme")).unwrap();
        assert_eq!(st, StepStatus::Passed);
        let (st, _) = status(&verified(&[]), &pinned, Some("Globex")).unwrap();
        assert_eq!(st, StepStatus::Failed);
        let (st, detail) = status(&verified(&[]), &pinned, None).unwrap();
        assert_eq!(st, StepStatus::Noted, "{detail}");
        // A system description naming another submitter is named too.
        std::fs::write(
            org.join("systems/other.json"),
            r#"{"submitter": "Globex", "division": "closed"}"#,
        )
        .unwrap();
        let (st, detail) = status(&verified(&["Acme"]), &signers, None).unwrap();
        assert_eq!(st, StepStatus::Failed, "{detail}");
        // Unchecked or not verified: no identity to speak of.
        let mut v = verified(&["Acme"]);
        v.signers_checked = false;
        assert!(status(&v, &Trust::Unchecked, None).is_none());
    }

    #[test]
    fn missing_rcp_bounds_are_not_checked_and_not_a_pass() {
        let s = rerun_step(Path::new("r.txt"), &comparison(None, None, "NOT CHECKED"));
        assert_eq!(s.status, StepStatus::NotDone);
        assert!(
            s.detail.contains("not checked against RCP bounds"),
            "{}",
            s.detail
        );
        let passed = Step::new("signature", StepStatus::Passed, "");
        assert_eq!(verdict_of(&[passed.clone(), s.clone()]), "INCOMPLETE");
        let failed = Step::new("package check", StepStatus::Failed, "");
        assert_eq!(verdict_of(&[passed.clone(), s, failed]), "FAIL");
        assert_eq!(verdict_of(std::slice::from_ref(&passed)), "PASS");
        let bounds = RcpBounds {
            record: "b16".into(),
            min_acceptable: 8644.0,
            mean: 9369.6,
            stdev: 460.8,
            upper_3sd: 10752.0,
            engine: Some("cpu-avx512".into()),
        };
        let inside = rerun_step(
            Path::new("r.txt"),
            &comparison(Some(bounds.clone()), Some(true), "PASS"),
        );
        assert_eq!(inside.status, StepStatus::Passed);
        assert!(inside.detail.contains("within"), "{}", inside.detail);
        assert!(
            !inside.detail.contains("hold for engine"),
            "{}",
            inside.detail
        );
        let mut other = comparison(Some(bounds), Some(true), "PASS");
        other.rerun_engine = Some("cpu-avx2".into());
        let step = rerun_step(Path::new("r.txt"), &other);
        assert_eq!(step.status, StepStatus::Passed);
        assert!(
            step.detail
                .contains("the RCPs hold for engine cpu-avx512, the re-run trained on cpu-avx2"),
            "{}",
            step.detail
        );
        other.rerun_engine = Some("cpu-avx512".into());
        let same = rerun_step(Path::new("r.txt"), &other);
        assert!(!same.detail.contains("hold for engine"), "{}", same.detail);
    }
}
