//! Where the witness of a supervised run is kept and found again: the run
//! record (`referee_run.json` beside the run's logs, or a package's
//! `referee_run_K.json`) holds it in the log's entry, found by the sha256
//! of the log's bytes. The witness and its checks are
//! [`crate::common::witness`].

use super::error::ExecError;
use crate::common::witness::{Witness, verify};
use referee_rules::diag::Diagnostic;
use referee_rules::untrusted::{self, FileKind, Links};
use serde::Deserialize;

use std::path::{Path, PathBuf};

/// Default allowance for clock skew and output buffering.
pub const DEFAULT_TOLERANCE_MS: u64 = 2_000;

/// Where a supervised run's record is kept, and the witness of one log.
#[derive(Debug, Clone)]
pub struct FoundWitness {
    /// The `referee_run.json` (or a package's `referee_run_K.json`).
    pub record: PathBuf,
    /// That file's content: the session (command, benchmark, ruleset…).
    pub session: serde_json::Value,
    /// The run's entry in `runs` (seed, provenance…).
    pub run: serde_json::Value,
    pub witness: Witness,
}

/// Run records that may hold `log`'s witness: `referee_run.json` next to
/// it (a `referee run --exec` output directory), or, in a package
/// (`ORG/results/SYSTEM/BENCHMARK/result_i.txt`), every
/// `ORG/benchmarks/BENCHMARK/implementations/*/referee_run_*.json`.
pub(crate) fn candidate_records(log: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Some(dir) = log.parent() else {
        return out;
    };
    out.push(dir.join("referee_run.json"));
    let bench = dir.file_name();
    let org = dir.parent().and_then(Path::parent).and_then(Path::parent);
    if let (Some(bench), Some(org)) = (bench, org) {
        let imps = org.join("benchmarks").join(bench).join("implementations");
        for imp in std::fs::read_dir(imps).into_iter().flatten().flatten() {
            for f in std::fs::read_dir(imp.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                let name = f.file_name().to_string_lossy().to_string();
                if name.starts_with("referee_run_") && name.ends_with(".json") {
                    out.push(f.path());
                }
            }
        }
    }
    // Regular files only, not links (a FIFO would hang the read).
    out.retain(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file()));
    out.sort();
    out
}

/// The witness of `log`, when a supervised run wrote it: found by the
/// sha256 of the log's bytes among the run records around it. `Err`: a
/// record exists but cannot be read.
pub fn find(log: &Path) -> Result<Option<FoundWitness>, ExecError> {
    let records = candidate_records(log);
    if records.is_empty() {
        return Ok(None);
    }
    let Some(digest) = crate::fsutil::file_sha256(log) else {
        return Ok(None);
    };
    find_in(records, &digest)
}

/// The witness of the log whose sha256 is `digest` among `records`.
pub(crate) fn find_in(
    records: Vec<PathBuf>,
    digest: &str,
) -> Result<Option<FoundWitness>, ExecError> {
    for path in records {
        // A file of the package: a regular file, not a link (see
        // referee_rules::untrusted).
        let text = untrusted::read_to_string(&path, FileKind::Record, Links::Refuse)
            .map_err(|e| ExecError::io(&path, e.into_io()))?;
        let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| ExecError::Json {
            path: path.clone(),
            line: e.line(),
            source: e,
        })?;
        if v["mode"] != "exec" {
            continue;
        }
        let runs = v["runs"].as_array().map(Vec::as_slice).unwrap_or_default();
        for (i, r) in runs.iter().enumerate() {
            if r["log_sha256"].as_str() != Some(digest) {
                continue;
            }
            let witness =
                Witness::deserialize(&r["witness"]).map_err(|e| ExecError::BadWitness {
                    path: path.clone(),
                    run: i,
                    source: e,
                })?;
            return Ok(Some(FoundWitness {
                record: path,
                run: r.clone(),
                session: v.clone(),
                witness,
            }));
        }
    }
    Ok(None)
}

/// `log` verified against its witness, when it has one: the diagnostics
/// (none when they agree) and where the witness came from.
pub fn verify_log(log: &Path) -> Result<Option<(FoundWitness, Vec<Diagnostic>)>, ExecError> {
    let Some(found) = find(log)? else {
        return Ok(None);
    };
    let parsed = referee_rules::mllog::read_file_keeping(
        log,
        std::sync::Arc::new(|k: &str| referee_rules::lifecycle::is_witnessed(k)),
    )
    .map_err(|e| ExecError::io(log, e))?;
    let diags = verify(&found.witness, &parsed.records);
    Ok(Some((found, diags)))
}
