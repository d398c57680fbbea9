//! Checking many logs (`referee check`): each log read once, in parallel,
//! by the rules' checker; where referee supervised the run that wrote it
//! (`referee run --exec`), the verdict of the harness's witness of its
//! clock joins the report.

use crate::exec::witness::{FoundWitness, candidate_records, find_in, verify};
use referee_rules::checker::{CheckError, Checker, LogReport, RulesetChoice};
use referee_rules::diag::Diagnostic;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// [`check_file`] of many logs in parallel; results come back in input
/// order, and `done` is called as each log is checked (for progress).
pub fn check_files(
    checker: &Checker,
    logs: &[PathBuf],
    choice: &RulesetChoice,
    done: &(dyn Fn() + Sync),
) -> Vec<Result<LogReport, CheckError>> {
    use rayon::prelude::*;
    logs.par_iter()
        .map(|p| {
            let r = check_file(checker, p, choice);
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
) -> Result<LogReport, CheckError> {
    let records = candidate_records(log);
    if records.is_empty() {
        return checker.check_file(log, choice);
    }
    let Ok(file) = std::fs::File::open(log) else {
        // The checker reports why the log cannot be read.
        return checker.check_file(log, choice);
    };
    let mut hashed = Hashed {
        inner: file,
        sha: Sha256::new(),
    };
    let mut parsed = checker.read_from(log, &mut hashed, choice)?;
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
