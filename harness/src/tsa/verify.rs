//! The checking side: the tokens of anchored runs verified against a CA
//! the auditor trusts, the digests recomputed from the files, and the
//! anchored interval (`referee check|verify|audit --tsa-ca FILE`): every
//! claimed time inside it, and the logged init + run no shorter than it
//! by more than the slack ([`slack`]).

use super::openssl;
use super::token::{self, TokenInfo};
use super::{TsaError, derive_seed, end_digest, sha256, witness_bytes};
use crate::common::witness::Witness;
use chrono::{DateTime, SecondsFormat, Utc};
use referee_rules::checker::LogReport;
use referee_rules::diag::Diagnostic;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Log keys whose claimed times must lie within the anchored interval.
const ANCHORED_KEYS: [&str; 4] = ["init_start", "init_stop", "run_start", "run_stop"];

/// The most a recorded token round trip counts for in the slack: the
/// client gives up on an authority after this long ([`super::client::TIMEOUT`]),
/// so a longer one was not measured by referee.
pub const MAX_ROUND_TRIP_MS: u64 = super::client::TIMEOUT.as_millis() as u64;
/// The most the recorded time from a start token to `init_start` counts
/// for: the harness's own preparation (clearing caches) and the program's
/// start-up (interpreter, imports) before it logs `init_start`.
pub const MAX_TO_INIT_START_MS: u64 = 30_000;
/// The most the recorded time from `run_stop` to an end request counts
/// for: the program's exit and the harness reading the log.
pub const MAX_AFTER_RUN_STOP_MS: u64 = 10_000;
/// A fixed margin in the slack: whole milliseconds in the log and in the
/// recorded overheads, and the authority's clock precision below its
/// stated accuracy.
pub const MARGIN_MS: u64 = 1_000;
/// And a margin in proportion to the interval: the local clock, which
/// times the log, may run fast or slow against the authority's by as much
/// as the kernel lets NTP slew it (500 ppm).
pub const DRIFT_PPM: u64 = 500;

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
    /// T2 − T1.
    pub interval_seconds: f64,
    /// `init_start` … `run_stop` as logged (`None`: not found).
    pub logged_seconds: Option<f64>,
    /// How much shorter than T2 − T1 the logged init + run may be.
    pub slack: Slack,
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
                    "anchored by {} between {} and {}: init + run took at most {:.1} s, logged {} (slack {:.1} s{}) ({}; seed {})",
                    a.tsa, a.start, a.end,
                    a.at_most_seconds,
                    a.logged_seconds.map_or("?".into(), |s| format!("{s:.1} s")),
                    a.slack.total_ms as f64 / 1000.0,
                    if a.slack.assumed.is_empty() { "" } else { ", overheads not recorded: assumed at their caps" },
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
                writeln!(f, "{}", referee_rules::escape::term(&l))?;
            }
        }
        for l in &self.not_anchored {
            writeln!(f, "not anchored: {}", referee_rules::escape::term(l))?;
        }
        write!(
            f,
            "time-stamps: {} ({} anchored runs, {} not anchored, CA {})",
            if self.ok { "VERIFIED" } else { "FAILED" },
            self.anchored.iter().filter(|a| a.ok()).count(),
            self.not_anchored.len(),
            referee_rules::escape::term(&self.ca)
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
/// its signature and chain to `ca` (on the bytes its fields were read
/// from), its `tsa` name one of its signer's. Findings go to `problems`.
fn check_token(
    path: &Path,
    what: &str,
    digest: &[u8],
    nonce: Option<&str>,
    ca: &Path,
    problems: &mut Vec<String>,
) -> Option<TokenInfo> {
    let (bytes, reply) = match token::read(path) {
        Ok(r) => r,
        Err(e) => {
            problems.push(format!("{what} token: {e}"));
            return None;
        }
    };
    let Some(info) = reply.token.filter(|_| reply.status.granted()) else {
        problems.push(format!(
            "{what} token {}: not granted ({})",
            path.display(),
            reply.status
        ));
        return None;
    };
    if info.hash_algorithm != "sha256" || info.imprint != digest {
        problems.push(format!(
            "{what} token {}: message imprint mismatch: the token is over {} {}, the files give sha256 {}",
            path.display(),
            info.hash_algorithm,
            hex::encode(&info.imprint),
            hex::encode(digest)
        ));
    } else if let Err(e) = openssl::verify(&bytes, digest, ca) {
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
            nonce.map_or("(none recorded)".into(), token::escape)
        ));
    }
    if info.tsa_is_signer == Some(false) {
        problems.push(format!(
            "{what} token {}: names its authority {}, but its signer's certificate is {} (RFC 3161: the tsa field names the signer)",
            path.display(),
            info.tsa_text(),
            info.signer.as_deref().unwrap_or("?")
        ));
    }
    Some(info)
}

/// The anchored lines of a log: (key, 0-based index among its MLLOG
/// lines, `time_ms`).
fn logged_times(log: &Path) -> Result<Vec<(String, i64, f64)>, String> {
    let parsed = referee_rules::mllog::read_file_keeping(
        log,
        std::sync::Arc::new(|k: &str| ANCHORED_KEYS.contains(&k)),
    )
    .map_err(|e| e.to_string())?;
    Ok(parsed
        .records
        .iter()
        .filter(|r| ANCHORED_KEYS.contains(&r.key()))
        .map(|r| (r.key().to_string(), r.index, r.timestamp))
        .collect())
}

/// `init_start` … `run_stop` of anchored lines: one of each, in order.
fn span_of(lines: &[(String, i64, f64)]) -> Result<(f64, f64), String> {
    let of = |key: &str| -> Vec<f64> {
        lines
            .iter()
            .filter(|(k, ..)| k == key)
            .map(|(.., t)| *t)
            .collect()
    };
    match (of("init_start").as_slice(), of("run_stop").as_slice()) {
        ([a], [b]) if a <= b => Ok((*a, *b)),
        ([a], [b]) => Err(format!(
            "`run_stop` ({b:.0} ms) is before `init_start` ({a:.0} ms)"
        )),
        (a, b) => Err(format!(
            "expected one `init_start` and one `run_stop` line, found {} and {}",
            a.len(),
            b.len()
        )),
    }
}

/// The run as logged: `init_start` and `run_stop` (ms), one of each.
pub fn logged_span(log: &Path) -> Result<(f64, f64), String> {
    span_of(&logged_times(log)?)
}

/// The claimed wall-clock times of a run: its log's `init_start` …
/// `run_stop` lines and the witness's spawn and exit.
fn claimed_times(lines: &[(String, i64, f64)], witness: Option<&Witness>) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = lines
        .iter()
        .map(|(k, i, t)| (format!("`{k}` (MLLOG line {})", i + 1), *t))
        .collect();
    if let Some(w) = witness {
        out.push(("the witnessed spawn".into(), w.spawn_wall_ms as f64));
        out.push(("the witnessed exit".into(), w.exit_wall_ms as f64));
    }
    out
}

/// What the run side measured around one authority's two tokens, as the
/// run record says (ms; `None`: not recorded, as in records made before
/// referee measured it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Overhead {
    pub start_round_trip_ms: Option<i64>,
    pub to_init_start_ms: Option<i64>,
    pub after_run_stop_ms: Option<i64>,
    pub end_round_trip_ms: Option<i64>,
}

impl Overhead {
    /// From a record's authority entry: numbers or nothing.
    pub fn of(au: &Value) -> Overhead {
        let n = |phase: &str, key: &str| au[phase][key].as_i64();
        Overhead {
            start_round_trip_ms: n("start", "round_trip_ms"),
            to_init_start_ms: n("start", "to_init_start_ms"),
            after_run_stop_ms: n("end", "after_run_stop_ms"),
            end_round_trip_ms: n("end", "round_trip_ms"),
        }
    }
}

/// How much shorter than T2 − T1 a logged init + run may be, and of what.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Slack {
    pub total_ms: u64,
    /// The four measured overheads as counted (each within its cap).
    pub overhead_ms: u64,
    /// Both tokens' accuracies.
    pub accuracy_ms: u64,
    /// A start time in whole seconds may have been cut from anywhere in
    /// its second: 1000 ms, else 0.
    pub resolution_ms: u64,
    /// [`MARGIN_MS`] and [`DRIFT_PPM`] of the interval.
    pub margin_ms: u64,
    /// The overheads the record does not give, counted at their caps.
    pub assumed: Vec<&'static str>,
    /// The overheads recorded above their caps, counted at the cap.
    pub capped: Vec<&'static str>,
}

/// The slack of an interval of `interval_ms` between the tokens `start`
/// and `end`, with the `overhead` the record gives: each measured part
/// counted between 0 and its cap (a part not recorded at its cap), plus
/// both accuracies, the start time's resolution and the margin. What the
/// record says only ever counts up to the caps: a submitter who edits it
/// gains at most their sum.
pub fn slack(start: &TokenInfo, end: &TokenInfo, overhead: &Overhead, interval_ms: u64) -> Slack {
    let mut assumed = Vec::new();
    let mut capped = Vec::new();
    let parts = [
        (
            "start round trip",
            overhead.start_round_trip_ms,
            MAX_ROUND_TRIP_MS,
        ),
        (
            "start token to init_start",
            overhead.to_init_start_ms,
            MAX_TO_INIT_START_MS,
        ),
        (
            "run_stop to end request",
            overhead.after_run_stop_ms,
            MAX_AFTER_RUN_STOP_MS,
        ),
        (
            "end round trip",
            overhead.end_round_trip_ms,
            MAX_ROUND_TRIP_MS,
        ),
    ];
    let mut overhead_ms = 0;
    for (what, recorded, cap) in parts {
        overhead_ms += match recorded {
            None => {
                assumed.push(what);
                cap
            }
            Some(v) if v.max(0) as u64 > cap => {
                capped.push(what);
                cap
            }
            Some(v) => v.max(0) as u64,
        };
    }
    let accuracy_ms = start.accuracy_ms.saturating_add(end.accuracy_ms);
    let resolution_ms = if start.gen_time_fraction { 0 } else { 1_000 };
    let margin_ms = MARGIN_MS + interval_ms.saturating_mul(DRIFT_PPM).div_ceil(1_000_000);
    Slack {
        total_ms: overhead_ms
            .saturating_add(accuracy_ms)
            .saturating_add(resolution_ms + margin_ms),
        overhead_ms,
        accuracy_ms,
        resolution_ms,
        margin_ms,
        assumed,
        capped,
    }
}

/// The finding when init + run as logged (`logged_ms`) is shorter than
/// the interval (`interval_ms`) by more than the slack.
fn too_short(logged_ms: f64, interval_ms: f64, s: &Slack) -> Option<String> {
    let excess = interval_ms - logged_ms - s.total_ms as f64;
    if excess <= 0.0 {
        return None;
    }
    let mut notes = String::new();
    if !s.assumed.is_empty() {
        notes.push_str(&format!(
            "; not recorded, counted at their caps: {}",
            s.assumed.join(", ")
        ));
    }
    if !s.capped.is_empty() {
        notes.push_str(&format!(
            "; recorded above their caps, counted at them: {}",
            s.capped.join(", ")
        ));
    }
    Some(format!(
        "init + run as logged took {:.3} s (`init_start` … `run_stop`), but the tokens are {:.3} s apart: \
         {:.3} s more than the slack of {:.3} s (token requests {:.3} s, accuracies {:.3} s, \
         start-time resolution {:.3} s, margin {:.3} s{notes}): the run took longer than logged, \
         or its end token was asked for later",
        logged_ms / 1000.0,
        interval_ms / 1000.0,
        excess / 1000.0,
        s.total_ms as f64 / 1000.0,
        s.overhead_ms as f64 / 1000.0,
        s.accuracy_ms as f64 / 1000.0,
        s.resolution_ms as f64 / 1000.0,
        s.margin_ms as f64 / 1000.0,
    ))
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
            check_derived_seed(run, entry, &start, p);
        }
        let overhead = Overhead::of(au);
        a.authorities.push(anchor(
            url,
            &start,
            &end,
            &overhead,
            log,
            witness.as_ref(),
            p,
        ));
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

/// A seed derived from the start token must be the run's.
fn check_derived_seed(run: usize, entry: &Value, start: &TokenInfo, p: &mut Vec<String>) {
    let want = derive_seed(&start.token_der);
    if entry["seed"].as_u64() != Some(want) {
        p.push(format!(
            "runs[{run}].seed is {}, not {want}, the seed derived from the start token",
            entry["seed"]
        ));
    }
}

/// The interval one authority's start and end tokens anchor: every time
/// the result file (`log`) and its witness claim checked against it, and
/// init + run as logged no shorter than it by more than the [`slack`].
fn anchor(
    url: &str,
    start: &TokenInfo,
    end: &TokenInfo,
    overhead: &Overhead,
    log: Option<&Path>,
    witness: Option<&Witness>,
    p: &mut Vec<String>,
) -> AuthorityAnchor {
    let lo = start.gen_time - chrono::Duration::milliseconds(start.accuracy_ms as i64);
    // A time in whole seconds may have been cut from anywhere in its
    // second: the end bound takes the whole second.
    let resolution_ms = if end.gen_time_fraction { 0 } else { 999 };
    let hi =
        end.gen_time + chrono::Duration::milliseconds((end.accuracy_ms + resolution_ms) as i64);
    if end.gen_time < start.gen_time {
        p.push(format!(
            "the end token ({}) is older than the start token ({})",
            stamp(&end.gen_time),
            stamp(&start.gen_time)
        ));
    }
    if start.signer != end.signer {
        p.push(format!(
            "the start and end tokens were signed by different authorities ({} and {}): the interval of one clock is not proved",
            start.signer.as_deref().unwrap_or("?"),
            end.signer.as_deref().unwrap_or("?")
        ));
    }
    let interval_ms = (end.gen_time - start.gen_time).num_milliseconds().max(0);
    let slack = slack(start, end, overhead, interval_ms as u64);
    let (lo_ms, hi_ms) = (lo.timestamp_millis() as f64, hi.timestamp_millis() as f64);
    let mut logged_seconds = None;
    if let Some(log) = log {
        match logged_times(log) {
            Err(e) => p.push(format!("{}: {e}", log.display())),
            Ok(lines) => {
                for (what, t) in claimed_times(&lines, witness) {
                    if t < lo_ms || t > hi_ms {
                        p.push(format!(
                            "{what} claims {t:.0} ms, outside the anchored interval {} … {} ({lo_ms:.0} … {hi_ms:.0} ms)",
                            stamp(&lo),
                            stamp(&hi)
                        ));
                    }
                }
                match span_of(&lines) {
                    Ok((a, b)) => {
                        logged_seconds = Some((b - a) / 1000.0);
                        p.extend(too_short(b - a, interval_ms as f64, &slack));
                    }
                    Err(e) => p.push(format!(
                        "{}: init + run cannot be compared with the anchored interval: {e}",
                        log.display()
                    )),
                }
            }
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
        interval_seconds: interval_ms as f64 / 1000.0,
        logged_seconds,
        slack,
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

    /// A token `ms` after a fixed instant, stating `accuracy_ms`, with a
    /// fraction of a second.
    fn token_at(ms: i64, accuracy_ms: u64) -> TokenInfo {
        TokenInfo {
            version: 1,
            policy: "1.2.3.4.99".into(),
            hash_algorithm: "sha256".into(),
            imprint: vec![0; 32],
            serial: "0x01".into(),
            gen_time: DateTime::from_timestamp_millis(1_800_000_000_000 + ms).unwrap(),
            gen_time_fraction: true,
            accuracy_ms,
            ordering: false,
            nonce: None,
            tsa: Some("/CN=T".into()),
            signer: Some("/CN=T".into()),
            tsa_is_signer: Some(true),
            token_der: Vec::new(),
        }
    }

    fn measured(start_rt: i64, to_init: i64, after_stop: i64, end_rt: i64) -> Overhead {
        Overhead {
            start_round_trip_ms: Some(start_rt),
            to_init_start_ms: Some(to_init),
            after_run_stop_ms: Some(after_stop),
            end_round_trip_ms: Some(end_rt),
        }
    }

    #[test]
    fn the_slack_is_the_measured_overhead_both_accuracies_and_a_margin() {
        // A 600 s interval, 1 s accuracy each; requests of 0.2 s, 3 s
        // before init_start, 0.5 s after run_stop.
        let (t1, t2) = (token_at(0, 1_000), token_at(600_000, 1_000));
        let o = measured(200, 3_000, 500, 200);
        let s = slack(&t1, &t2, &o, 600_000);
        assert_eq!(s.overhead_ms, 3_900);
        assert_eq!(s.accuracy_ms, 2_000);
        assert_eq!(s.resolution_ms, 0);
        assert_eq!(s.margin_ms, 1_000 + 300, "1 s and 500 ppm of 600 s");
        assert_eq!(s.total_ms, 7_200);
        assert!(s.assumed.is_empty() && s.capped.is_empty());
        // An honest run: T2 − T1 minus the overhead, give or take.
        assert_eq!(too_short(600_000.0 - 3_900.0, 600_000.0, &s), None);
        assert_eq!(too_short(600_000.0 - 7_200.0, 600_000.0, &s), None);
        // One millisecond more is a finding naming both durations.
        let m = too_short(600_000.0 - 7_201.0, 600_000.0, &s).unwrap();
        assert!(
            m.starts_with("init + run as logged took 592.799 s (`init_start` … `run_stop`), but the tokens are 600.000 s apart: 0.001 s more than the slack of 7.200 s"),
            "{m}"
        );
        // A start time in whole seconds may be up to a second early.
        let whole = TokenInfo {
            gen_time_fraction: false,
            ..t1.clone()
        };
        assert_eq!(slack(&whole, &t2, &o, 600_000).total_ms, 8_200);
    }

    #[test]
    fn a_shortened_run_fails_whatever_overhead_its_record_claims() {
        // Half of a 600 s run cut from the log, the end token asked for
        // again later: 300 s logged in a 610 s interval.
        let (t1, t2) = (token_at(0, 1_000), token_at(610_000, 1_000));
        let honest = slack(&t1, &t2, &measured(200, 3_000, 500, 200), 610_000);
        let m = too_short(300_000.0, 610_000.0, &honest).unwrap();
        assert!(
            m.contains("took 300.000 s") && m.contains("are 610.000 s apart"),
            "{m}"
        );
        // The record inflated (the submitter signs it): each part counts
        // at most its cap.
        let inflated = measured(i64::MAX, 10_000_000, 10_000_000, 10_000_000);
        let s = slack(&t1, &t2, &inflated, 610_000);
        let caps = MAX_ROUND_TRIP_MS * 2 + MAX_TO_INIT_START_MS + MAX_AFTER_RUN_STOP_MS;
        assert_eq!(s.overhead_ms, caps);
        assert_eq!(s.capped.len(), 4);
        let m = too_short(300_000.0, 610_000.0, &s).unwrap();
        assert!(m.contains("recorded above their caps"), "{m}");
        // Negative overheads count as none.
        let s = slack(&t1, &t2, &measured(-5, -5, -5, -5), 610_000);
        assert_eq!(s.overhead_ms, 0);
        // A record made before the overhead was measured: the caps.
        let s = slack(&t1, &t2, &Overhead::default(), 610_000);
        assert_eq!(s.overhead_ms, caps);
        assert_eq!(s.assumed.len(), 4);
        let m = too_short(300_000.0, 610_000.0, &s).unwrap();
        assert!(m.contains("not recorded, counted at their caps"), "{m}");
        // What a submitter can hide is bounded by the caps, accuracies
        // and margin: just under it passes.
        let hidden = (s.total_ms - 1) as f64;
        assert_eq!(too_short(610_000.0 - hidden, 610_000.0, &s), None);
    }

    #[test]
    fn the_overhead_is_read_from_the_record_as_numbers_only() {
        let au = serde_json::json!({
            "start": {"round_trip_ms": 12, "to_init_start_ms": -3},
            "end": {"round_trip_ms": "9", "after_run_stop_ms": 40},
        });
        assert_eq!(
            Overhead::of(&au),
            Overhead {
                start_round_trip_ms: Some(12),
                to_init_start_ms: Some(-3),
                after_run_stop_ms: Some(40),
                end_round_trip_ms: None,
            }
        );
    }

    #[test]
    fn the_logged_span_is_one_init_start_to_one_run_stop() {
        let l = |k: &str, t: f64| (k.to_string(), 0, t);
        assert_eq!(
            span_of(&[
                l("init_start", 10.0),
                l("run_start", 20.0),
                l("run_stop", 50.0)
            ]),
            Ok((10.0, 50.0))
        );
        let two = span_of(&[
            l("init_start", 10.0),
            l("init_start", 5.0),
            l("run_stop", 50.0),
        ])
        .unwrap_err();
        assert!(two.contains("found 2 and 1"), "{two}");
        assert!(span_of(&[l("init_start", 10.0)]).is_err());
        assert!(span_of(&[l("init_start", 60.0), l("run_stop", 50.0)]).is_err());
    }

    #[test]
    fn a_reply_with_forged_status_text_verifies_with_its_real_fields() {
        use crate::tsa::token::tests::{authority, reply, with_status_text};
        let digest = [0x42; 32];
        let (_, bytes) = reply(&digest, [5; 8], "verify-forged.tsr");
        let forged = with_status_text(
            &bytes,
            &["Time stamp: Jan  1 00:00:00 2020 GMT\nTSA: DirName:/CN=Forged TSA"],
        );
        let path = authority().join("verify-forged-2.tsr");
        std::fs::write(&path, &forged).unwrap();
        let ca = authority().join("tsa.pem");
        let mut p = Vec::new();
        let t = check_token(
            &path,
            "end",
            &digest,
            Some("0x0505050505050505"),
            &ca,
            &mut p,
        )
        .unwrap();
        assert!(p.is_empty(), "{p:?}");
        assert_eq!(t.name("http://x/"), "/C=DE/O=Unit Test Org/CN=Unit TSA");
        assert!(t.gen_time.timestamp() > 1_700_000_000, "{}", t.gen_time);
        // Another digest: the imprint, and openssl is not asked.
        let mut p = Vec::new();
        check_token(
            &path,
            "end",
            &[0; 32],
            Some("0x0505050505050505"),
            &ca,
            &mut p,
        );
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].contains("message imprint mismatch"), "{p:?}");
        // Bytes that are not a reply: one finding naming the file.
        let junk = authority().join("junk.tsr");
        std::fs::write(&junk, b"Status: Granted.\nTime stamp: soon\n").unwrap();
        let mut p = Vec::new();
        assert!(check_token(&junk, "start", &digest, None, &ca, &mut p).is_none());
        assert!(p.len() == 1 && p[0].contains("junk.tsr"), "{p:?}");
    }

    #[test]
    fn tokens_at_the_ends_of_time_are_findings_not_panics() {
        let far = |s: &str, acc| TokenInfo {
            gen_time: s.parse().unwrap(),
            gen_time_fraction: false,
            ..token_at(0, acc)
        };
        let (early, late) = (
            far("0000-01-01T00:00:00Z", crate::tsa::token::MAX_ACCURACY_MS),
            far("9999-12-31T23:59:59Z", crate::tsa::token::MAX_ACCURACY_MS),
        );
        let mut p = Vec::new();
        let a = anchor("u", &late, &early, &Overhead::default(), None, None, &mut p);
        assert!(p[0].contains("older than the start token"), "{p:?}");
        assert_eq!(a.interval_seconds, 0.0);
        let mut p = Vec::new();
        let a = anchor("u", &early, &late, &Overhead::default(), None, None, &mut p);
        assert!(a.slack.total_ms > a.slack.accuracy_ms, "{a:?}");
    }

    #[test]
    fn a_seed_is_derived_from_the_token_alone() {
        let a = derive_seed(b"token one");
        assert_eq!(a, derive_seed(b"token one"));
        assert_ne!(a, derive_seed(b"token two"));
        assert!(a < 1 << 31);
    }
}
