//! The checking side: the tokens of anchored runs verified against a CA
//! the auditor trusts, the digests recomputed from the files, and the
//! anchored interval (`referee check|verify|audit --tsa-ca FILE`).

use super::openssl::{self, TokenInfo};
use super::{TsaError, derive_seed, end_digest, sha256, witness_bytes};
use crate::exec::witness::Witness;
use chrono::{DateTime, SecondsFormat, Utc};
use referee_rules::checker::LogReport;
use referee_rules::diag::Diagnostic;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Log keys whose claimed times must lie within the anchored interval.
const ANCHORED_KEYS: [&str; 4] = ["init_start", "init_stop", "run_start", "run_stop"];

/// What one authority's two tokens prove about a run.
#[derive(Debug, Clone, Serialize)]
pub struct AuthorityAnchor {
    pub url: String,
    /// The authority's name in its token.
    pub tsa: String,
    /// The tokens' times (RFC 3339, UTC).
    pub start: String,
    pub start_accuracy_ms: u64,
    pub end: String,
    pub end_accuracy_ms: u64,
    /// T2 − T1 plus both accuracies: init + run took at most this long.
    pub at_most_seconds: f64,
}

/// The time-stamps of one run, verified.
#[derive(Debug, Clone, Serialize)]
pub struct RunAnchor {
    /// The result file (`None`: no file here has the time-stamped digest).
    pub log: Option<String>,
    pub record: String,
    /// The run's position in the record's `runs`.
    pub run: usize,
    /// `derived` (from the start token) or `chosen` (`--seed`).
    pub seed: String,
    pub authorities: Vec<AuthorityAnchor>,
    /// Why the tokens do not hold, one finding each (empty: verified).
    pub problems: Vec<String>,
}

pub(super) fn stamp(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

impl RunAnchor {
    pub fn ok(&self) -> bool {
        self.problems.is_empty() && !self.authorities.is_empty()
    }

    fn what(&self) -> String {
        match &self.log {
            Some(l) => l.clone(),
            None => format!("run {} of {}", self.run + 1, self.record),
        }
    }

    /// "anchored by TSA between T1 and T2: init + run took at most …", one
    /// per authority; or the problems.
    pub fn lines(&self) -> Vec<String> {
        if !self.ok() {
            return vec![format!(
                "FAILED time-stamps of {}: {}",
                self.what(),
                self.problems.join("; ")
            )];
        }
        self.authorities
            .iter()
            .map(|a| {
                format!(
                    "anchored by {} between {} and {}: init + run took at most {:.1} s ({}; seed {})",
                    a.tsa, a.start, a.end,
                    a.at_most_seconds,
                    self.what(),
                    if self.seed == "derived" {
                        "derived from the start token"
                    } else {
                        "chosen, not derived: the start is not proved"
                    }
                )
            })
            .collect()
    }
}

/// The time-stamps of a directory (a run output or a package).
#[derive(Debug, Clone, Serialize)]
pub struct TsaReport {
    /// The CA the tokens were verified against.
    pub ca: String,
    pub anchored: Vec<RunAnchor>,
    /// Result files no time-stamped run covers.
    pub not_anchored: Vec<String>,
    /// Every result file anchored and every token verified.
    pub ok: bool,
}

impl std::fmt::Display for TsaReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for a in &self.anchored {
            for l in a.lines() {
                writeln!(f, "{l}")?;
            }
        }
        for l in &self.not_anchored {
            writeln!(f, "not anchored: {l}")?;
        }
        write!(
            f,
            "time-stamps: {} ({} anchored runs, {} not anchored, CA {})",
            if self.ok { "VERIFIED" } else { "FAILED" },
            self.anchored.iter().filter(|a| a.ok()).count(),
            self.not_anchored.len(),
            self.ca
        )
    }
}

/// Where a record's token `name` is: beside `referee_run.json` as
/// written, or `referee_run_K.NAME` beside a package's `referee_run_K.json`.
/// `None` for a name that is not a plain file name.
fn token_path(record: &Path, name: &str) -> Option<PathBuf> {
    let plain = !name.is_empty()
        && !name.starts_with('.')
        && !name.contains(['/', '\\'])
        && name.ends_with(".tsr");
    if !plain {
        return None;
    }
    let dir = record.parent()?;
    let stem = record.file_stem()?.to_str()?;
    Some(if stem == "referee_run" {
        dir.join(name)
    } else {
        dir.join(format!("{stem}.{name}"))
    })
}

/// One token checked: granted, `digest` its imprint, `nonce` its nonce,
/// its signature and chain to `ca`. Findings go to `problems`.
fn check_token(
    path: &Path,
    what: &str,
    digest: &[u8],
    nonce: Option<&str>,
    ca: &Path,
    problems: &mut Vec<String>,
) -> Option<TokenInfo> {
    let info = match openssl::inspect(path) {
        Ok(i) => i,
        Err(e) => {
            problems.push(format!("{what} token: {e}"));
            return None;
        }
    };
    if !info.granted() {
        problems.push(format!(
            "{what} token {}: not granted ({})",
            path.display(),
            info.status
        ));
        return None;
    }
    if info.imprint != digest {
        problems.push(format!(
            "{what} token {}: message imprint mismatch: the token is over {}, the files give {}",
            path.display(),
            hex::encode(&info.imprint),
            hex::encode(digest)
        ));
    } else if let Err(e) = openssl::verify(path, digest, ca) {
        problems.push(format!(
            "{what} token {}: does not verify against CA {}: {}",
            path.display(),
            ca.display(),
            match e {
                TsaError::Openssl { stderr, .. } => stderr,
                other => other.to_string(),
            }
        ));
    }
    if info.nonce.as_deref() != nonce {
        problems.push(format!(
            "{what} token {}: nonce {} is not the request's {}",
            path.display(),
            info.nonce.as_deref().unwrap_or("none"),
            nonce.unwrap_or("(none recorded)")
        ));
    }
    Some(info)
}

/// The claimed wall-clock times of a run: its log's `init_start` …
/// `run_stop` lines and the witness's spawn and exit.
fn claimed_times(log: &Path, witness: Option<&Witness>) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    if let Ok(parsed) = referee_rules::mllog::read_file_keeping(
        log,
        std::sync::Arc::new(|k: &str| ANCHORED_KEYS.contains(&k)),
    ) {
        for r in &parsed.records {
            if ANCHORED_KEYS.contains(&r.key()) {
                out.push((
                    format!("`{}` (MLLOG line {})", r.key(), r.index + 1),
                    r.timestamp,
                ));
            }
        }
    }
    if let Some(w) = witness {
        out.push(("the witnessed spawn".into(), w.spawn_wall_ms as f64));
        out.push(("the witnessed exit".into(), w.exit_wall_ms as f64));
    }
    out
}

/// Verify the time-stamps of run `run` of `record` (whose entry is
/// `entry`), whose result file is `log` (`None`: not found).
pub fn verify_run(
    record: &Path,
    run: usize,
    entry: &Value,
    log: Option<&Path>,
    ca: &Path,
) -> RunAnchor {
    let tsa = &entry["tsa"];
    let mut a = RunAnchor {
        log: log.map(|l| l.display().to_string()),
        record: record.display().to_string(),
        run,
        seed: tsa["seed"].as_str().unwrap_or("?").to_string(),
        authorities: Vec::new(),
        problems: Vec::new(),
    };
    let p = &mut a.problems;
    let witness = entry_witness(run, entry, p);
    let witness_sha = sha256(&witness_bytes(witness.as_ref()));
    let Some(nonce) = tsa["nonce"].as_str().and_then(|n| hex::decode(n).ok()) else {
        p.push(format!(
            "runs[{run}].tsa.nonce: expected the start nonce in hex"
        ));
        return a;
    };
    let start_digest = sha256(&nonce);
    let result_sha = match log.map(std::fs::read) {
        Some(Ok(b)) => Some(sha256(&b)),
        Some(Err(e)) => {
            p.push(format!("{}: {e}", log.unwrap().display()));
            None
        }
        None => None,
    };
    let auths = tsa["authorities"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if auths.is_empty() {
        p.push(format!("runs[{run}].tsa: no authorities"));
    }
    for (k, au) in auths.iter().enumerate() {
        let url = au["url"].as_str().unwrap_or("?");
        let path_of = |phase: &str| {
            au[phase]["token"]
                .as_str()
                .and_then(|n| token_path(record, n))
        };
        let (Some(sp), Some(ep)) = (path_of("start"), path_of("end")) else {
            p.push(format!(
                "runs[{run}].tsa.authorities[{k}]: expected the file names of the start and end tokens"
            ));
            continue;
        };
        let start = check_token(
            &sp,
            "start",
            &start_digest,
            au["start"]["request_nonce"].as_str(),
            ca,
            p,
        );
        let times = |t: &Option<TokenInfo>| t.as_ref().map(|t| stamp(&t.gen_time));
        let Some(result_sha) = result_sha else {
            if log.is_some() {
                continue;
            }
            p.push(format!(
                "no result file here has the digest time-stamped at its end (sha256 {}): the result file changed after its end token (run anchored between {} and {})",
                tsa["result_sha256"].as_str().unwrap_or("?"),
                times(&start).unwrap_or_else(|| "?".into()),
                au["end"]["time"].as_str().unwrap_or("?"),
            ));
            continue;
        };
        let end_d = end_digest(&result_sha, &witness_sha);
        let before = p.len();
        let end = check_token(
            &ep,
            "end",
            &end_d,
            au["end"]["request_nonce"].as_str(),
            ca,
            p,
        );
        if p[before..].iter().any(|m| m.contains("imprint mismatch")) {
            p.push(format!(
                "the result file or the witness changed after the end token: they were time-stamped between {} and {}, and no longer match",
                times(&start).unwrap_or_else(|| "?".into()),
                times(&end).unwrap_or_else(|| "?".into())
            ));
        }
        let (Some(start), Some(end)) = (start, end) else {
            continue;
        };
        if k == 0 && a.seed == "derived" {
            check_derived_seed(run, entry, &sp, p);
        }
        a.authorities
            .push(anchor(url, &start, &end, log, witness.as_ref(), p));
    }
    a
}

/// The witness of a run entry (`None` when it has none or it is not one:
/// a problem then).
fn entry_witness(run: usize, entry: &Value, p: &mut Vec<String>) -> Option<Witness> {
    match entry.get("witness") {
        None | Some(Value::Null) => None,
        Some(w) => match Witness::deserialize(w) {
            Ok(w) => Some(w),
            Err(e) => {
                p.push(format!("runs[{run}].witness: not a witness: {e}"));
                None
            }
        },
    }
}

/// A seed derived from the start token (`start_token`) must be the run's.
fn check_derived_seed(run: usize, entry: &Value, start_token: &Path, p: &mut Vec<String>) {
    match openssl::token_der(start_token) {
        Ok(der) => {
            let want = derive_seed(&der);
            if entry["seed"].as_u64() != Some(want) {
                p.push(format!(
                    "runs[{run}].seed is {}, not {want}, the seed derived from the start token",
                    entry["seed"]
                ));
            }
        }
        Err(e) => p.push(format!("start token: {e}")),
    }
}

/// The interval one authority's start and end tokens anchor, every time
/// the result file (`log`) and its witness claim checked against it.
fn anchor(
    url: &str,
    start: &TokenInfo,
    end: &TokenInfo,
    log: Option<&Path>,
    witness: Option<&Witness>,
    p: &mut Vec<String>,
) -> AuthorityAnchor {
    let lo = start.gen_time - chrono::Duration::milliseconds(start.accuracy_ms as i64);
    // A time in whole seconds may have been cut from anywhere in its
    // second: the end bound takes the whole second.
    let resolution_ms = if end.gen_time.timestamp_subsec_nanos() == 0 {
        999
    } else {
        0
    };
    let hi =
        end.gen_time + chrono::Duration::milliseconds((end.accuracy_ms + resolution_ms) as i64);
    if end.gen_time < start.gen_time {
        p.push(format!(
            "the end token ({}) is older than the start token ({})",
            stamp(&end.gen_time),
            stamp(&start.gen_time)
        ));
    }
    let (lo_ms, hi_ms) = (lo.timestamp_millis() as f64, hi.timestamp_millis() as f64);
    let claimed = log.map(|l| claimed_times(l, witness));
    for (what, t) in claimed.into_iter().flatten() {
        if t < lo_ms || t > hi_ms {
            p.push(format!(
                    "{what} claims {t:.0} ms, outside the anchored interval {} … {} ({lo_ms:.0} … {hi_ms:.0} ms)",
                    stamp(&lo),
                    stamp(&hi)
                ));
        }
    }
    AuthorityAnchor {
        url: url.to_string(),
        tsa: end.name(url),
        start: stamp(&start.gen_time),
        start_accuracy_ms: start.accuracy_ms,
        end: stamp(&end.gen_time),
        end_accuracy_ms: end.accuracy_ms,
        at_most_seconds: (hi - lo).num_milliseconds() as f64 / 1000.0,
    }
}

/// The digest a run entry says its result file has: the one its witness
/// is found by (`log_sha256`), else the one time-stamped.
fn entry_digest(entry: &Value) -> Option<&str> {
    entry["log_sha256"]
        .as_str()
        .or_else(|| entry["tsa"]["result_sha256"].as_str())
}

/// A run record of a package: a regular file, not a link (see
/// referee_rules::untrusted).
fn read_record(path: &Path) -> Option<Value> {
    use referee_rules::untrusted::{self, FileKind, Links};
    serde_json::from_str(&untrusted::read_to_string(path, FileKind::Record, Links::Refuse).ok()?)
        .ok()
}

/// `referee_run*.json` files under `dir` (no symbolic links followed).
fn records_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let Ok(ty) = e.file_type() else { continue };
        let name = e.file_name().to_string_lossy().to_string();
        if ty.is_dir() {
            records_under(&e.path(), out);
        } else if ty.is_file() && name.starts_with("referee_run") && name.ends_with(".json") {
            out.push(e.path());
        }
    }
}

fn ca_file(ca: &Path) -> Result<(), TsaError> {
    std::fs::metadata(ca).map(drop).map_err(TsaError::io(ca))
}

/// Every result file under `dir` and every time-stamped run recorded
/// there, verified against `ca`.
pub fn verify_tree(dir: &Path, ca: &Path) -> Result<TsaReport, TsaError> {
    ca_file(ca)?;
    let logs = referee_rules::checker::collect_logs(&[dir.to_path_buf()]).unwrap_or_default();
    let mut by_digest: BTreeMap<String, PathBuf> = BTreeMap::new();
    for l in &logs {
        if let Some(d) = crate::fsutil::file_sha256(l) {
            by_digest.insert(d, l.clone());
        }
    }
    let mut records = Vec::new();
    records_under(dir, &mut records);
    records.sort();
    let mut anchored = Vec::new();
    let mut covered = std::collections::BTreeSet::new();
    for rec in &records {
        let Some(v) = read_record(rec) else { continue };
        for (i, entry) in v["runs"].as_array().into_iter().flatten().enumerate() {
            if entry.get("tsa").is_none_or(Value::is_null) {
                continue;
            }
            let log = entry_digest(entry).and_then(|d| by_digest.get(d));
            if let Some(l) = log {
                covered.insert(l.clone());
            }
            anchored.push(verify_run(rec, i, entry, log.map(PathBuf::as_path), ca));
        }
    }
    let not_anchored: Vec<String> = logs
        .iter()
        .filter(|l| !covered.contains(*l))
        .map(|l| l.display().to_string())
        .collect();
    let ok = !anchored.is_empty() && not_anchored.is_empty() && anchored.iter().all(RunAnchor::ok);
    Ok(TsaReport {
        ca: ca.display().to_string(),
        anchored,
        not_anchored,
        ok,
    })
}

/// Run records that may describe `log`: `referee_run.json` beside it, or
/// in a package (`ORG/results/SYSTEM/BENCHMARK/result_i.txt`) the
/// `ORG/benchmarks/BENCHMARK/implementations/*/referee_run_*.json`.
fn records_for(log: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Some(dir) = log.parent() else {
        return out;
    };
    out.push(dir.join("referee_run.json"));
    let org = dir.parent().and_then(Path::parent).and_then(Path::parent);
    if let (Some(bench), Some(org)) = (dir.file_name(), org) {
        records_under(&org.join("benchmarks").join(bench), &mut out);
    }
    out.retain(|p| p.is_file());
    out
}

/// The time-stamps of one result file: `Ok(None)` when no time-stamped
/// run record covers it.
pub fn check_log(log: &Path, ca: &Path) -> Result<Option<RunAnchor>, TsaError> {
    ca_file(ca)?;
    let Some(digest) = crate::fsutil::file_sha256(log) else {
        return Ok(None);
    };
    for rec in records_for(log) {
        let Some(v) = read_record(&rec) else { continue };
        for (i, entry) in v["runs"].as_array().into_iter().flatten().enumerate() {
            let anchored = entry.get("tsa").is_some_and(|t| !t.is_null());
            let mine = entry["log_sha256"].as_str() == Some(&digest)
                || entry["tsa"]["result_sha256"].as_str() == Some(&digest);
            if anchored && mine {
                return Ok(Some(verify_run(&rec, i, entry, Some(log), ca)));
            }
        }
    }
    // A log edited after its end token matches no digest: the anchored run
    // of the record beside it that wrote a file of its name covers it.
    let beside = log.parent().map(|d| d.join("referee_run.json"));
    if let Some(v) = beside.as_deref().and_then(read_record) {
        for (i, entry) in v["runs"].as_array().into_iter().flatten().enumerate() {
            let anchored = entry.get("tsa").is_some_and(|t| !t.is_null());
            let named = entry["log"]
                .as_str()
                .is_some_and(|l| Path::new(l).file_name() == log.file_name());
            if anchored && named {
                let rec = beside.as_deref().expect("read above");
                return Ok(Some(verify_run(rec, i, entry, Some(log), ca)));
            }
        }
    }
    Ok(None)
}

/// [`annotate`] every report that could be made (`results[i]` of `logs[i]`).
pub fn annotate_all(
    logs: &[PathBuf],
    results: &mut [Result<LogReport, referee_rules::checker::CheckError>],
    ca: &Path,
) {
    for (log, r) in logs.iter().zip(results.iter_mut()) {
        if let Ok(rep) = r {
            annotate(rep, log, ca);
        }
    }
}

/// `referee check --tsa-ca`: the time-stamps' verdict in a log's report —
/// a note per authority when they hold; errors (and FAIL) when they do
/// not, or when the log is not anchored.
pub fn annotate(rep: &mut LogReport, log: &Path, ca: &Path) {
    match check_log(log, ca) {
        Ok(Some(a)) if a.ok() => {
            for l in a.lines() {
                rep.diagnostics.push(Diagnostic::note("tsa-anchored", l));
            }
        }
        Ok(Some(a)) => {
            rep.verdict = referee_rules::Verdict::Fail;
            for m in &a.problems {
                rep.diagnostics
                    .push(Diagnostic::error("tsa-token", m.clone()));
            }
        }
        Ok(None) => {
            rep.verdict = referee_rules::Verdict::Fail;
            rep.diagnostics.push(
                Diagnostic::error(
                    "tsa-not-anchored",
                    "not anchored: no time-stamped run record covers this log",
                )
                .expected(format!("time-stamps verifiable with {}", ca.display())),
            );
        }
        Err(e) => {
            rep.verdict = referee_rules::Verdict::Fail;
            rep.diagnostics
                .push(Diagnostic::error("tsa-token", e.to_string()));
        }
    }
}

/// How the audit's `time-stamps` step ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Passed,
    Failed,
    /// Nothing in the package is anchored.
    NotAnchored,
}

/// `referee audit --tsa-ca`: the step's outcome and its detail.
pub fn audit_outcome(dir: &Path, ca: &Path) -> (Outcome, String) {
    let report = match verify_tree(dir, ca) {
        Ok(r) => r,
        Err(e) => return (Outcome::Failed, e.to_string()),
    };
    let mut lines: Vec<String> = report.anchored.iter().flat_map(RunAnchor::lines).collect();
    lines.extend(
        report
            .not_anchored
            .iter()
            .map(|l| format!("not anchored: {l}")),
    );
    let outcome = if report.ok {
        Outcome::Passed
    } else if report.anchored.is_empty() {
        lines.insert(0, "not anchored".into());
        Outcome::NotAnchored
    } else {
        Outcome::Failed
    };
    (outcome, lines.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_names_from_a_record_stay_beside_it() {
        let out = Path::new("/o/referee_run.json");
        assert_eq!(
            token_path(out, "run_0.start.tsr"),
            Some(PathBuf::from("/o/run_0.start.tsr"))
        );
        let pkg = Path::new("/p/implementations/work/referee_run_3.json");
        assert_eq!(
            token_path(pkg, "run_0.end.1.tsr"),
            Some(PathBuf::from(
                "/p/implementations/work/referee_run_3.run_0.end.1.tsr"
            ))
        );
        // A record is untrusted input: no name leads elsewhere.
        for bad in [
            "../x.tsr",
            "/etc/x.tsr",
            "a/b.tsr",
            ".hidden.tsr",
            "run_0.json",
            "",
        ] {
            assert_eq!(token_path(out, bad), None, "{bad}");
        }
    }

    #[test]
    fn a_seed_is_derived_from_the_token_alone() {
        let a = derive_seed(b"token one");
        assert_eq!(a, derive_seed(b"token one"));
        assert_ne!(a, derive_seed(b"token two"));
        assert!(a < 1 << 31);
    }
}
