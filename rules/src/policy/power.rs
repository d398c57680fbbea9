//! The power rules (training_policies `power_measurement.adoc`) as policy
//! findings, per run and per node or switch file of `power/result_i/`:
//! sampling ([`POWER_SAMPLING`]), the measured window ([`POWER_WINDOW`]),
//! the number of readings ([`POWER_READINGS`]), every node measured
//! ([`POWER_NODES`]), the interconnect ([`POWER_INTERCONNECT`]) and the
//! AC/DC conversion efficiency ([`POWER_CONVERSION`]). The official
//! `power_checker` checks file names and counts only.
//!
//! What "at least one reading per second, distributed evenly" means here
//! (the rule gives no numbers): the median interval between readings is at
//! most [`MEDIAN_MS`], no gap in the timed part exceeds [`LARGEST_GAP_MS`]
//! (one reading missed in a row), and at most [`LATE_SHARE`] of the
//! intervals exceed [`MEDIAN_MS`]; the readings within the timed part are at
//! least [`READINGS_SHARE`] of max(run seconds, 60) — the readings those
//! missed intervals allow. The v5.0 1 Hz submissions sit inside every
//! bound (median 1,000 ms, largest gap 2,000 ms, 5–6 % of intervals at 2 s,
//! 95 % of the run's seconds); 2 s sampling fails the first.

use super::PolicyRule;
use crate::diag::Diagnostic;
use crate::layout::is_power_name as is;
use crate::mllog;
use std::path::{Path, PathBuf};

/// The median interval allowed, ms (1 Hz with 5 % clock slack).
pub const MEDIAN_MS: f64 = 1_050.0;
/// The largest gap allowed within the timed part, ms.
pub const LARGEST_GAP_MS: f64 = 2_000.0;
/// The share of intervals allowed over [`MEDIAN_MS`].
pub const LATE_SHARE: f64 = 0.10;
/// Readings in the timed part, as a share of max(run seconds, 60).
pub const READINGS_SHARE: f64 = 0.90;

pub const POWER_SAMPLING: PolicyRule = PolicyRule {
    code: "policy[power-sampling]",
    source: "power_measurement.adoc: at least one reading per second, distributed evenly over the timed part of each run",
    applies: "every ruleset with power results (4.0.0 and later)",
};
pub const POWER_WINDOW: PolicyRule = PolicyRule {
    code: "policy[power-window]",
    source: "power_measurement.adoc: measurement starts just before run_start and stops just after run_stop",
    applies: "every ruleset with power results (4.0.0 and later)",
};
pub const POWER_READINGS: PolicyRule = PolicyRule {
    code: "policy[power-readings]",
    source: "power_measurement.adoc: at least max(run seconds, 60) readings",
    applies: "every ruleset with power results (4.0.0 and later)",
};
pub const POWER_NODES: PolicyRule = PolicyRule {
    code: "policy[power-nodes]",
    source: "power_measurement.adoc: every node of the system is measured (at its PSUs or PDU)",
    applies: "every ruleset with power results (4.0.0 and later)",
};
pub const POWER_INTERCONNECT: PolicyRule = PolicyRule {
    code: "policy[power-interconnect]",
    source: "power_measurement.adoc: the interconnect (switches) is measured or estimated",
    applies: "every ruleset with power results (4.0.0 and later), systems of more than one node",
};
pub const POWER_CONVERSION: PolicyRule = PolicyRule {
    code: "policy[power-conversion]",
    source: "power_measurement.adoc: AC measurements document the AC/DC conversion efficiency (conversion_eff)",
    applies: "every ruleset with power results (4.0.0 and later)",
};

/// Every power rule.
pub const RULES: [PolicyRule; 6] = [
    POWER_SAMPLING,
    POWER_WINDOW,
    POWER_READINGS,
    POWER_NODES,
    POWER_INTERCONNECT,
    POWER_CONVERSION,
];

/// One run's power folder and its timed part.
pub struct PowerRun<'a> {
    /// `power/result_i/`.
    pub folder: &'a Path,
    /// `run_start` and `run_stop` of the run's result log, ms.
    pub run_start_ms: Option<f64>,
    pub run_stop_ms: Option<f64>,
}

/// What one power file holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PowerFile {
    pub start_ms: Option<f64>,
    pub stop_ms: Option<f64>,
    /// (time ms, watts), in time order.
    pub readings: Vec<(f64, f64)>,
    /// `conversion_eff` value and its `measurement_type` (AC/DC).
    pub conversion: Option<(f64, Option<String>)>,
}

impl PowerFile {
    pub fn read(path: &Path) -> std::io::Result<PowerFile> {
        let log = mllog::read_file(path)?;
        let mut f = PowerFile::default();
        for r in &log.records {
            match r.key() {
                "power_measurement_start" => f.start_ms = Some(r.timestamp),
                "power_measurement_stop" => f.stop_ms = Some(r.timestamp),
                "power_reading" => {
                    if let Some(w) = r.value().as_f64() {
                        f.readings.push((r.timestamp, w));
                    }
                }
                "conversion_eff" => {
                    f.conversion = r.value().as_f64().map(|e| {
                        (
                            e,
                            r.meta("measurement_type")
                                .and_then(|m| m.as_str())
                                .map(str::to_string),
                        )
                    })
                }
                _ => {}
            }
        }
        f.readings.sort_by(|a, b| a.0.total_cmp(&b.0));
        Ok(f)
    }
}

/// Sampling figures of one file over the timed part `[a, b]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sampling {
    pub readings: usize,
    pub median_ms: f64,
    pub largest_gap_ms: f64,
    pub late_share: f64,
}

/// The intervals between consecutive readings, the edges of the timed part
/// included (from `run_start` to the first reading, from the last to
/// `run_stop`).
pub fn sampling(readings: &[(f64, f64)], a: f64, b: f64) -> Sampling {
    let inside: Vec<f64> = readings
        .iter()
        .map(|r| r.0)
        .filter(|t| *t >= a && *t <= b)
        .collect();
    let mut points = vec![a];
    points.extend(inside.iter().copied());
    points.push(b);
    let mut gaps: Vec<f64> = points.windows(2).map(|w| w[1] - w[0]).collect();
    let largest = gaps.iter().copied().fold(0.0, f64::max);
    // The median and the late share over reading-to-reading intervals.
    let mut between: Vec<f64> = inside.windows(2).map(|w| w[1] - w[0]).collect();
    if between.is_empty() {
        between = std::mem::take(&mut gaps);
    }
    between.sort_by(f64::total_cmp);
    let n = between.len();
    let median = if n == 0 {
        f64::INFINITY
    } else if n % 2 == 1 {
        between[n / 2]
    } else {
        (between[n / 2 - 1] + between[n / 2]) / 2.0
    };
    let late = between.iter().filter(|g| **g > MEDIAN_MS).count() as f64 / n.max(1) as f64;
    Sampling {
        readings: inside.len(),
        median_ms: median,
        largest_gap_ms: largest,
        late_share: late,
    }
}

/// The power findings of a result set's runs; `nodes` is the system
/// description's `number_of_nodes`.
pub fn check_power(runs: &[PowerRun], nodes: Option<i64>) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for run in runs {
        let files = power_files(run.folder);
        let node_files: Vec<&PathBuf> = files.iter().filter(|p| is(p, "node_")).collect();
        let switch_files = files.iter().filter(|p| is(p, "sw_")).count();
        if let Some(n) = nodes
            && (node_files.len() as i64) < n
        {
            out.push(
                POWER_NODES
                    .finding(format!(
                        "{} node power file{} for a system of {n} nodes",
                        node_files.len(),
                        if node_files.len() == 1 { "" } else { "s" }
                    ))
                    .file(run.folder.display().to_string())
                    .expected(format!("node_0.txt … node_{}.txt", n - 1))
                    .found(node_files.len().to_string()),
            );
        }
        if nodes.is_some_and(|n| n > 1) && switch_files == 0 {
            out.push(
                POWER_INTERCONNECT
                    .finding("no switch power file (sw_*.txt) for a multi-node system: the interconnect is neither measured nor estimated here")
                    .file(run.folder.display().to_string())
                    .expected("sw_0.txt … (measured or estimated switch power)"),
            );
        }
        for f in files.iter() {
            check_file(run, f, &mut out);
        }
    }
    out
}

/// Every regular file named `node_*` or `sw_*` of a run's power folder,
/// whatever its extension (see [`crate::layout::power_log_entries`]).
fn power_files(folder: &Path) -> Vec<PathBuf> {
    crate::layout::power_log_entries(folder)
        .into_iter()
        .filter(|p| p.is_file())
        .collect()
}

fn check_file(run: &PowerRun, path: &Path, out: &mut Vec<Diagnostic>) {
    let file = path.display().to_string();
    let Ok(f) = PowerFile::read(path) else {
        return; // the official checks name unreadable files
    };
    let (Some(a), Some(b)) = (run.run_start_ms, run.run_stop_ms) else {
        return;
    };
    let start = f.start_ms.or(f.readings.first().map(|r| r.0));
    let stop = f.stop_ms.or(f.readings.last().map(|r| r.0));
    if start.is_none_or(|s| s > a) || stop.is_none_or(|s| s < b) {
        let show = |x: Option<f64>, edge: f64| match x {
            Some(x) => format!("{:+.0} ms", x - edge),
            None => "none".to_string(),
        };
        out.push(
            POWER_WINDOW
                .finding(format!(
                    "the measurement does not cover the timed part: starts {} from run_start, stops {} from run_stop",
                    show(start, a),
                    show(stop, b)
                ))
                .file(file.clone())
                .expected("power_measurement_start at or before run_start, power_measurement_stop at or after run_stop")
                .found(format!(
                    "start {}, stop {} (run_start {a:.0}, run_stop {b:.0})",
                    start.map(|s| format!("{s:.0}")).unwrap_or("none".into()),
                    stop.map(|s| format!("{s:.0}")).unwrap_or("none".into())
                )),
        );
    }
    let s = sampling(&f.readings, a, b);
    if s.median_ms > MEDIAN_MS || s.largest_gap_ms > LARGEST_GAP_MS || s.late_share > LATE_SHARE {
        out.push(
            POWER_SAMPLING
                .finding(format!(
                    "readings {:.0} ms apart (median), largest gap {:.0} ms, {:.1} % of intervals over {MEDIAN_MS:.0} ms",
                    s.median_ms,
                    s.largest_gap_ms,
                    s.late_share * 100.0
                ))
                .file(file.clone())
                .expected(format!(
                    "median ≤ {MEDIAN_MS:.0} ms, no gap over {LARGEST_GAP_MS:.0} ms, at most {:.0} % of intervals over {MEDIAN_MS:.0} ms",
                    LATE_SHARE * 100.0
                ))
                .found(format!("{} readings in {:.0} s", s.readings, (b - a) / 1000.0)),
        );
    }
    let need = ((b - a) / 1000.0).max(60.0);
    if (s.readings as f64) < READINGS_SHARE * need {
        out.push(
            POWER_READINGS
                .finding(format!(
                    "{} readings in the timed part of {:.0} s",
                    s.readings,
                    (b - a) / 1000.0
                ))
                .file(file.clone())
                .expected(format!(
                    "at least max(run seconds, 60) = {need:.0} readings ({:.0} % of them: {:.0})",
                    READINGS_SHARE * 100.0,
                    (READINGS_SHARE * need).ceil()
                ))
                .found(s.readings.to_string()),
        );
    }
    let ac = f
        .conversion
        .as_ref()
        .is_none_or(|(_, t)| t.as_deref() != Some("DC"));
    if f.conversion.is_none() && ac {
        out.push(
            POWER_CONVERSION
                .finding("no conversion_eff: an AC measurement must document the AC/DC conversion efficiency")
                .file(file)
                .expected("a conversion_eff line (metadata measurement_type AC or DC)"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampling_counts_the_edges_of_the_timed_part() {
        let r: Vec<(f64, f64)> = (0..=10).map(|i| (1000.0 * i as f64, 100.0)).collect();
        let s = sampling(&r, 0.0, 10_000.0);
        assert_eq!(
            (s.readings, s.median_ms, s.largest_gap_ms),
            (11, 1000.0, 1000.0)
        );
        assert_eq!(s.late_share, 0.0);
        // A late start of the readings is a gap from run_start.
        let s = sampling(&r[3..], 0.0, 10_000.0);
        assert_eq!(s.largest_gap_ms, 3000.0);
        // Every other reading: 2 s median.
        let even: Vec<(f64, f64)> = r.iter().copied().step_by(2).collect();
        let s = sampling(&even, 0.0, 10_000.0);
        assert_eq!((s.median_ms, s.late_share), (2000.0, 1.0));
    }
}
