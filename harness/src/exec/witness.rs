//! The harness's witness of a supervised run's clock.
//!
//! A training program writes its own `time_ms` into every MLLOG line; no
//! log checker can tell a real one from an edited one. When referee
//! supervises the program (`referee run --exec`), it notes its own clocks
//! — wall and monotonic — when it spawns the program, when it reads each
//! lifecycle line (`init_start`, `init_stop`, `run_start`, `run_stop`,
//! `eval_accuracy`, …) and when the program exits. A line cannot have been
//! written after the harness read it, nor before the harness started the
//! program; and the time to train the program claims (`run_stop` −
//! `run_start`) cannot be shorter than the harness saw pass between
//! reading the two lines. Each comparison allows [`Witness::tolerance_ms`]
//! for clock skew and output buffering.
//!
//! The witness is stored with the run's provenance (`referee_run.json`,
//! and so in a signed package) and [`verify`] checks a log against it
//! again later: an edited `time_ms`, or an edited witness, is caught.

use super::error::ExecError;
use referee_rules::diag::Diagnostic;
use referee_rules::mllog::Record;
use referee_rules::untrusted::{self, FileKind, Links};
use serde::{Deserialize, Serialize};

use std::path::{Path, PathBuf};

/// Default allowance for clock skew and output buffering.
pub const DEFAULT_TOLERANCE_MS: u64 = 2_000;

/// One lifecycle line as the harness read it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WitnessedLine {
    /// 0-based index among the result file's MLLOG lines.
    pub index: usize,
    pub key: String,
    /// The line's own `time_ms`.
    pub time_ms: f64,
    /// The harness's wall clock (Unix ms) when it read the line.
    pub read_wall_ms: u64,
    /// Milliseconds on the harness's monotonic clock since the spawn.
    pub read_mono_ms: u64,
}

/// What the harness saw of one supervised run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Witness {
    pub tolerance_ms: u64,
    /// Wall clock (Unix ms) at the spawn.
    pub spawn_wall_ms: u64,
    /// Wall clock and monotonic ms since the spawn when the program ended.
    pub exit_wall_ms: u64,
    pub exit_mono_ms: u64,
    /// MLLOG lines read in all.
    pub mllog_lines: u64,
    pub lines: Vec<WitnessedLine>,
}

/// The reference points of one clock comparison, shown in diagnostics.
fn clocks(line: &WitnessedLine, spawn_wall_ms: u64) -> String {
    format!(
        "line time_ms {:.0}; harness read it at wall {} ms ({} ms after the spawn at {} ms)",
        line.time_ms, line.read_wall_ms, line.read_mono_ms, spawn_wall_ms
    )
}

impl Witness {
    /// Could a line read at `read_wall_ms` claim `time_ms`? (Not later than
    /// the read, not earlier than the spawn, within the tolerance.)
    pub fn plausible(&self, time_ms: f64, read_wall_ms: u64) -> bool {
        let tol = self.tolerance_ms as f64;
        time_ms <= read_wall_ms as f64 + tol && time_ms >= self.spawn_wall_ms as f64 - tol
    }

    /// Problems with one line just read: written after the harness read
    /// it, or before the program was started.
    pub fn check_line(&self, line: &WitnessedLine) -> Option<Diagnostic> {
        if self.plausible(line.time_ms, line.read_wall_ms) {
            return None;
        }
        let t = line.time_ms;
        let tol = self.tolerance_ms as f64;
        let (what, expected) = if t > line.read_wall_ms as f64 + tol {
            (
                "claims a time after the harness had already read it",
                format!(
                    "time_ms ≤ {} (read time + {} ms)",
                    line.read_wall_ms, self.tolerance_ms
                ),
            )
        } else if t < self.spawn_wall_ms as f64 - tol {
            (
                "claims a time before the harness started the program",
                format!(
                    "time_ms ≥ {} (spawn − {} ms)",
                    self.spawn_wall_ms, self.tolerance_ms
                ),
            )
        } else {
            return None;
        };
        Some(
            Diagnostic::error(
                "witness-clock",
                format!("`{}` at MLLOG line {} {what}", line.key, line.index + 1),
            )
            .rule("witness", None)
            .key(line.key.clone())
            .line(line.index + 1)
            .expected(expected)
            .found(clocks(line, self.spawn_wall_ms)),
        )
    }

    fn first(&self, key: &str) -> Option<&WitnessedLine> {
        self.lines.iter().find(|l| l.key == key)
    }

    /// Is the claimed time to train consistent with what the harness saw?
    pub fn check_duration(&self) -> Option<Diagnostic> {
        let (start, stop) = (self.first("run_start")?, self.first("run_stop")?);
        let claimed = stop.time_ms - start.time_ms;
        let seen = stop.read_mono_ms as f64 - start.read_mono_ms as f64;
        let tol = self.tolerance_ms as f64;
        let upper = stop.read_mono_ms as f64 + tol;
        if claimed >= seen - tol && claimed <= upper {
            return None;
        }
        Some(
            Diagnostic::error(
                "witness-duration",
                format!(
                    "claimed run_stop − run_start = {claimed:.0} ms, but the harness saw {seen:.0} ms pass between reading them"
                ),
            )
            .rule("witness", None)
            .key("run_stop")
            .line(stop.index + 1)
            .expected(format!(
                "between {:.0} and {upper:.0} ms (witnessed, ± {} ms)",
                seen - tol,
                self.tolerance_ms
            ))
            .found(format!(
                "{claimed:.0} ms; run_start: {}; run_stop: {}",
                clocks(start, self.spawn_wall_ms),
                clocks(stop, self.spawn_wall_ms)
            )),
        )
    }
}

/// Check a finished log against its witness: every witnessed line is
/// still there with the `time_ms` the harness saw, each passes the clock
/// checks, and the time to train is consistent. `records`: the log's
/// MLLOG records (any order).
pub fn verify(w: &Witness, records: &[Record]) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for line in &w.lines {
        // Records are in file order: find the witnessed index by bisection.
        let at = records.partition_point(|r| r.index < line.index as i64);
        let rec = records.get(at).filter(|r| r.index == line.index as i64);
        let found = rec.map(|r| (r.key().to_string(), r.timestamp));
        match found {
            Some((key, t)) if key == line.key && t == line.time_ms => {}
            other => out.push(
                Diagnostic::error(
                    "witness-mismatch",
                    format!(
                        "MLLOG line {} is not the line the harness witnessed",
                        line.index + 1
                    ),
                )
                .rule("witness", None)
                .key(line.key.clone())
                .line(line.index + 1)
                .expected(format!("`{}` with time_ms {:.0}", line.key, line.time_ms))
                .found(match other {
                    Some((k, t)) => format!("`{k}` with time_ms {t:.0}"),
                    None => "no such line".into(),
                }),
            ),
        }
        out.extend(w.check_line(line));
    }
    out.extend(w.check_duration());
    out
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn line(index: usize, key: &str, time_ms: f64, read_mono_ms: u64) -> WitnessedLine {
        WitnessedLine {
            index,
            key: key.into(),
            time_ms,
            read_wall_ms: 1_000_000 + read_mono_ms,
            read_mono_ms,
        }
    }

    fn witness(lines: Vec<WitnessedLine>) -> Witness {
        Witness {
            tolerance_ms: 500,
            spawn_wall_ms: 1_000_000,
            exit_wall_ms: 1_100_000,
            exit_mono_ms: 100_000,
            mllog_lines: lines.len() as u64,
            lines,
        }
    }

    #[test]
    fn honest_lines_pass_and_shifted_ones_are_caught() {
        let honest = witness(vec![
            line(0, "run_start", 1_010_000.0, 10_050),
            line(5, "run_stop", 1_070_000.0, 70_020),
        ]);
        for l in &honest.lines {
            assert!(honest.check_line(l).is_none());
        }
        assert!(honest.check_duration().is_none());
        // run_start moved 30 s later: it claims a time after it was read.
        let mut late = honest.clone();
        late.lines[0].time_ms += 30_000.0;
        let d = late.check_line(&late.lines[0]).unwrap();
        assert_eq!(d.code, "witness-clock");
        assert!(d.found.as_deref().unwrap().contains("1010050"), "{d:?}");
        // run_stop moved 30 s earlier: each line is plausible alone, the
        // duration is not.
        let mut short = honest.clone();
        short.lines[1].time_ms -= 30_000.0;
        assert!(short.check_line(&short.lines[1]).is_none());
        let d = short.check_duration().unwrap();
        assert_eq!(d.code, "witness-duration");
        assert!(
            d.message.contains("30000 ms") && d.message.contains("59970 ms"),
            "{}",
            d.message
        );
        // Before the spawn.
        let mut early = honest.clone();
        early.lines[0].time_ms = 990_000.0;
        assert!(
            early
                .check_line(&early.lines[0])
                .unwrap()
                .message
                .contains("before")
        );
        // Within the tolerance: fine.
        let mut skew = honest;
        skew.lines[0].time_ms = 1_010_050.0 + 400.0;
        assert!(skew.check_line(&skew.lines[0]).is_none());
    }

    /// Each bound holds at exactly the tolerance and fails 1 ms past it:
    /// a tolerance off by one millisecond anywhere is caught.
    #[test]
    fn the_tolerance_is_exact_to_the_millisecond_at_every_bound() {
        let w = witness(vec![
            line(0, "run_start", 1_010_000.0, 10_050),
            line(5, "run_stop", 1_070_000.0, 70_020),
        ]);
        let tol = w.tolerance_ms as f64;
        // After the read: read_wall_ms + tolerance.
        let read = w.lines[0].read_wall_ms as f64;
        let mut l = w.lines[0].clone();
        l.time_ms = read + tol;
        assert!(w.check_line(&l).is_none(), "at read + tolerance");
        l.time_ms = read + tol + 1.0;
        let d = w.check_line(&l).expect("1 ms past read + tolerance");
        assert!(d.message.contains("after"), "{}", d.message);
        // Before the spawn: spawn_wall_ms − tolerance.
        l.time_ms = w.spawn_wall_ms as f64 - tol;
        assert!(w.check_line(&l).is_none(), "at spawn − tolerance");
        l.time_ms = w.spawn_wall_ms as f64 - tol - 1.0;
        let d = w.check_line(&l).expect("1 ms before spawn − tolerance");
        assert!(d.message.contains("before"), "{}", d.message);
        // The duration: the witnessed 59,970 ms minus the tolerance, and
        // run_stop's read (70,020 ms after the spawn) plus the tolerance.
        let seen = (w.lines[1].read_mono_ms - w.lines[0].read_mono_ms) as f64;
        let upper = w.lines[1].read_mono_ms as f64 + tol;
        for (claimed, ok) in [
            (seen - tol, true),
            (seen - tol - 1.0, false),
            (upper, true),
            (upper + 1.0, false),
        ] {
            let mut d = w.clone();
            d.lines[1].time_ms = d.lines[0].time_ms + claimed;
            assert_eq!(
                d.check_duration().is_none(),
                ok,
                "claimed {claimed} ms (seen {seen}, tolerance {tol})"
            );
        }
    }
}
