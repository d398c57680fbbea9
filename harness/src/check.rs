//! Checking many logs (`referee check`): each log read once, in parallel,
//! by the rules' checker; where referee supervised the run that wrote it
//! (`referee run --exec`), the verdict of the harness's witness of its
//! clock joins the report.

use crate::common::witness::verify;
use crate::exec::witness::{FoundWitness, candidate_records, find_in};
use crate::rules_env::{OfficialRules, RulesError};
use referee_rules::checker::{CheckError, CheckProblem, Checker, LogReport, RulesetChoice};
use referee_rules::compliance::CheckOptions;
use referee_rules::diag::Diagnostic;
use referee_rules::policy::PolicyMode;
use referee_rules::report::CheckSummary;
use referee_rules::ruleset::RuleLibrary;
use referee_rules::untrusted::Links;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The rules a check runs under: the checker, which rules each log is
/// judged by, and how the report names them.
pub struct CheckRules {
    pub checker: Checker,
    pub choice: RulesetChoice,
    pub description: String,
}

/// Which rules a check asked for: an official `ruleset` of `usage`, one
/// rule file (`config`: relative to the rules directory, or absolute), or
/// neither (referee's own benchmarks, recognised from each log).
/// `rules_dir`: where the official rule files are (default: discovered,
/// when official rules are needed).
pub fn check_rules(
    usage: &'static str,
    ruleset: Option<String>,
    config: Option<String>,
    rules_dir: Option<&Path>,
    opts: CheckOptions,
) -> Result<CheckRules, RulesError> {
    let needs_official = ruleset.is_some()
        || config
            .as_deref()
            .is_some_and(|c| !Path::new(c).is_absolute());
    let official = if needs_official || rules_dir.is_some() {
        Some(OfficialRules::resolve(rules_dir)?)
    } else {
        None
    };
    let mut lib = match &official {
        Some(o) => o.library(),
        None => RuleLibrary::embedded_only(),
    };
    crate::own_benchmarks::register_rules(&mut lib);
    let origin = |none: &str| {
        official
            .as_ref()
            .map(|o| o.origin.clone())
            .unwrap_or_else(|| none.to_string())
    };
    let (choice, description) = if let Some(v) = ruleset {
        let available = lib.rulesets(usage);
        if !available.contains(&v) {
            return Err(RulesError::UnknownRuleset {
                ruleset: v,
                usage,
                origin: origin("the rules directory"),
                available,
            });
        }
        let desc = format!("{usage} {v} rules from {}", origin("?"));
        let version = v;
        let usage = usage.to_string();
        (RulesetChoice::Official { usage, version }, desc)
    } else if let Some(c) = config {
        let path = lib.resolve(&c);
        if !path.is_file() {
            return Err(RulesError::NoRuleFile { name: c, path });
        }
        let desc = format!("rule file {c}");
        (RulesetChoice::Config(c), desc)
    } else {
        (RulesetChoice::Auto, "referee's own rules".to_string())
    };
    let mut checker = Checker::new(Arc::new(lib), opts);
    crate::own_benchmarks::register_own(&mut checker);
    Ok(CheckRules {
        checker,
        choice,
        description,
    })
}

/// The totals of a check of `results`: each report's policy findings put
/// under `mode` (in the report too) and counted, and every log's verdict.
pub fn tally(
    results: &mut [Result<LogReport, CheckError>],
    mode: PolicyMode,
    threads: usize,
    rules: String,
) -> CheckSummary {
    let mut summary = CheckSummary {
        threads,
        rules,
        ..CheckSummary::default()
    };
    summary.policy.mode = mode;
    for rep in results.iter_mut().flatten() {
        referee_rules::policy::apply_mode(&mut rep.policy, mode);
        summary.count_policy(&rep.policy);
    }
    for r in results.iter() {
        summary.count(r.as_ref().ok().map(|rep| rep.verdict));
    }
    summary
}

/// [`check_file`] of many logs in parallel; results come back in input
/// order, and `done` is called as each log is checked (for progress).
/// `typed`: the paths the user typed; a log that is one of them may be a
/// link (the user chose it), a log found in a directory may not.
pub fn check_files(
    checker: &Checker,
    logs: &[PathBuf],
    typed: &[PathBuf],
    choice: &RulesetChoice,
    done: &(dyn Fn() + Sync),
) -> Vec<Result<LogReport, CheckError>> {
    use rayon::prelude::*;
    logs.par_iter()
        .map(|p| {
            let links = if typed.contains(p) {
                Links::Follow
            } else {
                Links::Refuse
            };
            let r = check_file(checker, p, choice, links);
            done();
            r
        })
        .collect()
}

/// `referee check` of one log. When referee supervised the run that wrote
/// it (`referee run --exec`), the report gains the verdict of the
/// harness's witness of its clock, kept in its run record (a note when
/// they agree; errors and FAIL when not). The log is read once: its sha256,
/// which finds the run record, is taken as the checker reads it, and the
/// witness is compared with the checker's records.
pub fn check_file(
    checker: &Checker,
    log: &Path,
    choice: &RulesetChoice,
    links: Links,
) -> Result<LogReport, CheckError> {
    let records = candidate_records(log);
    if records.is_empty() {
        return checker.check_file_as(log, choice, links);
    }
    let file = referee_rules::mllog::open_log(log, links)
        .map_err(|e| CheckError::new(log, CheckProblem::Read(e.into())))?;
    let buffer = file.buffer_size(referee_rules::checker::READ_BUFFER);
    let mut hashed = Hashed {
        inner: file,
        sha: Sha256::new(),
    };
    let mut parsed = checker.read_from(log, &mut hashed, choice, buffer)?;
    let digest = hex::encode(hashed.sha.finalize());
    let mut rep = checker
        .check_parsed(&log.display().to_string(), &mut parsed, choice)
        .map_err(|e| CheckError::new(log, e))?;
    let verified = find_in(records, &digest).map(|found| {
        found.map(|f| {
            let diags = verify(&f.witness, &parsed.records);
            (f, diags)
        })
    });
    add_to_report(&mut rep, verified);
    Ok(rep)
}

/// A reader that hashes what it reads.
struct Hashed<R> {
    inner: R,
    sha: Sha256,
}

impl<R: std::io::Read> std::io::Read for Hashed<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.sha.update(&buf[..n]);
        Ok(n)
    }
}

/// The witness's verdict on a log (see [`verify_log`]) in its report.
fn add_to_report(
    rep: &mut LogReport,
    verified: Result<Option<(FoundWitness, Vec<Diagnostic>)>, crate::exec::error::ExecError>,
) {
    match verified {
        Ok(None) => {}
        Ok(Some((found, diags))) if diags.is_empty() => rep.diagnostics.push(Diagnostic::note(
            "witness-verified",
            format!(
                "the clock agrees with the harness's witness in {}",
                found.record.display()
            ),
        )),
        Ok(Some((_, diags))) => {
            rep.verdict = referee_rules::Verdict::Fail;
            rep.diagnostics.extend(diags);
        }
        Err(e) => {
            rep.verdict = referee_rules::Verdict::Fail;
            rep.diagnostics.push(
                Diagnostic::error("witness-record", e.to_string())
                    .expected("a readable run record"),
            );
        }
    }
}
