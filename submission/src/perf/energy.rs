//! Energy per sample and per token of a run whose power was measured: the
//! MLPerf power logs (`node_*.txt`, `sw_*.txt`, as `referee power sample`,
//! `run --power` and published power results write them) found beside the
//! run's log (`DIR/power/<log stem>/`) or given with `--power`.
//!
//! The power logs are integrated as the official summarizer integrates them
//! (`referee_rules::score`); this module only divides their average power by
//! the run's throughput. It must not know how logs are found on the command
//! line or how the report is printed.

use super::PerfError;
use referee_rules::error::PowerError;
use referee_rules::score::{self, PowerDraw};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// The rule every report with energy states.
pub const RULE: &str = "energy: where power logs sit beside a run's log (DIR/power/<log stem>/node_*.txt, sw_*.txt: the MLPerf power log that `referee power sample` and `run --power` write) or --power names them, average power = Σ over node logs of (Σ reading × interval ÷ the measured span × conversion efficiency) + Σ switch estimates (the official summarizer's integration); J/sample = average power ÷ samples/s and J/token = average power ÷ tokens/s of the window, so the power of the whole measured span stands for the window's";

/// A run's energy figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PerfEnergy {
    /// The power folder or file read.
    pub source: String,
    /// Node logs read (`node_*.txt`, or the one file given).
    pub nodes: usize,
    /// Switch logs read (`sw_*.txt`).
    pub switches: usize,
    /// Power readings counted over all node logs.
    pub readings: usize,
    /// The longest measured span of a node log, s.
    pub measured_s: f64,
    /// Average power of everything measured, W.
    pub average_power_w: f64,
    /// Average power ÷ samples/s (when the throughput is known).
    pub joules_per_sample: Option<f64>,
    /// Average power ÷ tokens/s (when the throughput is known).
    pub joules_per_token: Option<f64>,
}

/// The power folder beside a run's log (`DIR/power/<log stem>/`), when it
/// holds node logs.
pub fn beside(log: &Path) -> Option<PathBuf> {
    let stem = log.file_stem()?;
    let folder = log.parent()?.join("power").join(stem);
    (!score::power_logs(&folder).0.is_empty()).then_some(folder)
}

/// Power logs of `path`: a file is one node's log; a folder holds
/// `node_*.txt` and `sw_*.txt`.
fn logs_of(path: &Path) -> Result<(Vec<PathBuf>, Vec<PathBuf>), PowerError> {
    if path.is_file() {
        return Ok((vec![path.to_path_buf()], Vec::new()));
    }
    let (nodes, switches) = score::power_logs(path);
    if nodes.is_empty() {
        return Err(PowerError::NoNodeLogs {
            folder: path.to_path_buf(),
        });
    }
    Ok((nodes, switches))
}

/// The energy figures of a run with `samples_per_s` and `tokens_per_s`
/// whose power logs are at `path`.
pub fn energy(
    path: &Path,
    samples_per_s: Option<f64>,
    tokens_per_s: Option<f64>,
) -> Result<PerfEnergy, PerfError> {
    let (nodes, switches) = logs_of(path)?;
    let node_draws: Vec<PowerDraw> = nodes
        .iter()
        .map(|n| score::node_power(n))
        .collect::<Result<_, _>>()?;
    let switch_draws: Vec<PowerDraw> = switches
        .iter()
        .map(|s| score::switch_power(s))
        .collect::<Result<_, _>>()?;
    let watts: f64 = node_draws
        .iter()
        .chain(&switch_draws)
        .map(|d| d.watts)
        .sum();
    let per = |rate: Option<f64>| rate.filter(|r| *r > 0.0).map(|r| watts / r);
    Ok(PerfEnergy {
        source: path.display().to_string(),
        nodes: nodes.len(),
        switches: switches.len(),
        readings: node_draws.iter().map(|d| d.readings).sum(),
        measured_s: node_draws.iter().map(|d| d.seconds).fold(0.0, f64::max),
        average_power_w: watts,
        joules_per_sample: per(samples_per_s),
        joules_per_token: per(tokens_per_s),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node_log(dir: &Path, name: &str, readings: &[(f64, f64)], eff: Option<f64>) -> PathBuf {
        let p = dir.join(name);
        let line = |t: f64, key: &str, v: String| {
            format!(
                ":::MLLOG {{\"key\": \"{key}\", \"value\": {v}, \"time_ms\": {t}, \"namespace\": \"\", \"event_type\": \"POINT_IN_TIME\", \"metadata\": {{}}}}\n"
            )
        };
        let mut s = String::new();
        if let Some(e) = eff {
            s += &line(0.0, "conversion_eff", e.to_string());
        }
        s += &line(0.0, "power_measurement_start", "null".into());
        for (t, w) in readings {
            s += &line(*t, "power_reading", w.to_string());
        }
        let end = readings.last().map_or(1000.0, |r| r.0);
        s += &line(end, "power_measurement_stop", "null".into());
        std::fs::write(&p, s).unwrap();
        p
    }

    #[test]
    fn average_power_divided_by_throughput() {
        let t = tempfile::tempdir().unwrap();
        // Node 0: 300 W for 4 s; node 1: 100 W then 200 W, 2 s each (150 W),
        // through a 0.9 conversion efficiency (135 W); a switch estimated at
        // 65 W. Together 500 W.
        node_log(
            t.path(),
            "node_0.txt",
            &[
                (1000.0, 300.0),
                (2000.0, 300.0),
                (3000.0, 300.0),
                (4000.0, 300.0),
            ],
            None,
        );
        node_log(
            t.path(),
            "node_1.txt",
            &[
                (1000.0, 100.0),
                (2000.0, 100.0),
                (3000.0, 200.0),
                (4000.0, 200.0),
            ],
            Some(0.9),
        );
        std::fs::write(
            t.path().join("sw_0.txt"),
            ":::MLLOG {\"key\": \"interconnect_power_est\", \"value\": 65.0, \"time_ms\": 0, \"namespace\": \"\", \"event_type\": \"POINT_IN_TIME\", \"metadata\": {}}\n",
        )
        .unwrap();
        let e = energy(t.path(), Some(50.0), Some(10_000.0)).unwrap();
        assert_eq!((e.nodes, e.switches, e.readings), (2, 1, 8));
        assert!((e.average_power_w - 500.0).abs() < 1e-9, "{e:?}");
        assert!((e.measured_s - 4.0).abs() < 1e-12);
        assert!((e.joules_per_sample.unwrap() - 10.0).abs() < 1e-12);
        assert!((e.joules_per_token.unwrap() - 0.05).abs() < 1e-12);
        // Without a throughput, no per-sample or per-token figure.
        let e = energy(&t.path().join("node_0.txt"), None, Some(0.0)).unwrap();
        assert_eq!((e.nodes, e.switches), (1, 0));
        assert!((e.average_power_w - 300.0).abs() < 1e-9);
        assert_eq!((e.joules_per_sample, e.joules_per_token), (None, None));
    }

    #[test]
    fn a_folder_without_node_logs_is_named() {
        let t = tempfile::tempdir().unwrap();
        let e = energy(t.path(), Some(1.0), None).unwrap_err().to_string();
        assert!(e.contains("no node_*.txt power logs"), "{e}");
    }

    #[test]
    fn the_folder_beside_a_log_is_found_by_its_stem() {
        let t = tempfile::tempdir().unwrap();
        let log = t.path().join("result_3.txt");
        std::fs::write(&log, "").unwrap();
        assert_eq!(beside(&log), None);
        let folder = t.path().join("power").join("result_3");
        std::fs::create_dir_all(&folder).unwrap();
        node_log(&folder, "node_0.txt", &[(1000.0, 1.0)], None);
        assert_eq!(beside(&log), Some(folder));
    }
}
