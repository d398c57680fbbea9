//! What `referee run --exec` records so that an audit can tell whether it
//! re-runs the same code on the same data, and the identity check of the
//! run summary (organisation and system as given versus as logged).

use super::error::ExecError;
use super::runs::ExecSummary;
use crate::common::fingerprint::{TreeFingerprint, code_fingerprint, fingerprint_dir};
use referee_rules::report::{Detail, Format, render};
use serde_json::{Map, Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The run record's `datasets` (a fingerprint of each `--data DIR`, in
/// order) and `code_fingerprint` (the files git tracks in `cwd`, or null
/// when `cwd` is not a git checkout).
pub fn record_extra(cwd: &Path, data: &[PathBuf]) -> Result<Map<String, Value>, ExecError> {
    let mut datasets: Vec<TreeFingerprint> = Vec::new();
    for d in data {
        datasets.push(fingerprint_dir(d).map_err(ExecError::Data)?);
    }
    let code = code_fingerprint(cwd).transpose()?;
    let mut m = Map::new();
    m.insert("datasets".into(), json!(datasets));
    m.insert("code_fingerprint".into(), json!(code));
    Ok(m)
}

/// Where the logs' `submission_org` / `submission_platform` differ from
/// the run's `--org` / `--system`.
pub fn run_warnings(summary: &ExecSummary, org: &str, system: &str) -> Vec<String> {
    let logs: Vec<PathBuf> = summary
        .runs
        .iter()
        .map(|r| r.log.clone())
        .filter(|l| l.is_file())
        .collect();
    match referee_submission::assemble::identity_warnings(&logs, org, system) {
        Ok(w) => w,
        Err(e) => vec![format!("the logs' submission keys could not be read: {e}")],
    }
}

/// The run summary, with the warnings (as `warnings` in JSON, as
/// `warning:` lines for people).
pub fn print_summary(
    summary: &ExecSummary,
    warnings: &[String],
    format: Format,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    if format == Format::Json {
        let mut v = serde_json::to_value(summary)?;
        v["warnings"] = json!(warnings);
        serde_json::to_writer(&mut *out, &v)?;
        return writeln!(out);
    }
    render(summary, format, Detail::default(), out)?;
    for w in warnings {
        let w = match format {
            Format::Markdown => referee_rules::escape::markdown(w),
            _ => referee_rules::escape::term(w),
        };
        writeln!(out, "warning: {w}")?;
    }
    Ok(())
}
