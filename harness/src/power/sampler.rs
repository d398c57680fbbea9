//! The sampler: one reading every interval on a fixed schedule (no drift),
//! written at once as an MLPerf power log line, from `start` until `stop`.

use super::{PowerError, Source};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// What to sample and where to write it.
#[derive(Debug, Clone)]
pub struct SamplerConfig {
    pub source: Source,
    /// The power log written (its folder is created).
    pub out: PathBuf,
    pub interval: Duration,
    /// `metadata.host` of every reading (e.g. `node_0`).
    pub host: String,
    /// The AC/DC conversion efficiency of an AC measurement
    /// (`conversion_eff`); DC sources log 1.0.
    pub conversion_eff: Option<f64>,
}

/// How a sampling ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct SamplerReport {
    pub readings: usize,
    pub missed: usize,
}

/// A sampler running on its own thread until [`Sampler::stop`].
pub struct Sampler {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Result<SamplerReport, PowerError>>>,
    pub out: PathBuf,
}

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

fn line(
    out: &mut impl Write,
    event: &str,
    key: &str,
    value: &str,
    meta: &str,
) -> std::io::Result<()> {
    writeln!(
        out,
        ":::MLLOG {{\"namespace\": \"\", \"time_ms\": {}, \"event_type\": \"{event}\", \"key\": \"{key}\", \"value\": {value}, \"metadata\": {{\"file\": \"referee\", \"lineno\": 0{meta}}}}}",
        now_ms()
    )?;
    out.flush()
}

impl Sampler {
    /// Write `power_measurement_start` and the conversion efficiency, then
    /// sample on a thread of its own.
    pub fn start(cfg: SamplerConfig) -> Result<Sampler, PowerError> {
        let io = |error| PowerError::Io {
            path: cfg.out.display().to_string(),
            error,
        };
        if let Some(dir) = cfg.out.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let mut file = std::fs::File::create(&cfg.out).map_err(io)?;
        let kind = cfg.source.measurement_type();
        line(
            &mut file,
            "INTERVAL_START",
            "power_measurement_start",
            "null",
            "",
        )
        .map_err(io)?;
        let eff = match (kind, cfg.conversion_eff) {
            ("DC", _) => Some(1.0),
            (_, e) => e,
        };
        if let Some(e) = eff {
            line(
                &mut file,
                "POINT_IN_TIME",
                "conversion_eff",
                &format!("{e}"),
                &format!(", \"measurement_type\": \"{kind}\""),
            )
            .map_err(io)?;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let out = cfg.out.clone();
        let thread = std::thread::Builder::new()
            .name("referee-power".into())
            .spawn(move || sample(cfg, file, &flag))
            .map_err(io_err(&out))?;
        Ok(Sampler {
            stop,
            thread: Some(thread),
            out,
        })
    }

    /// Stop after the reading in progress and write
    /// `power_measurement_stop`.
    pub fn stop(mut self) -> Result<SamplerReport, PowerError> {
        self.stop.store(true, Ordering::SeqCst);
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => r,
            _ => Err(PowerError::Reading {
                source_name: "sampler".into(),
                message: "the sampling thread panicked".into(),
            }),
        }
    }
}

impl Drop for Sampler {
    /// A sampler dropped without [`Sampler::stop`] (the run failed on the
    /// way) stops too: no thread outlives its run.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> PowerError + '_ {
    move |error| PowerError::Io {
        path: path.display().to_string(),
        error,
    }
}

fn sample(
    cfg: SamplerConfig,
    mut file: std::fs::File,
    stop: &AtomicBool,
) -> Result<SamplerReport, PowerError> {
    let io = io_err(&cfg.out);
    let mut reader = cfg.source.reader();
    let mut report = SamplerReport {
        readings: 0,
        missed: 0,
    };
    let meta = format!(", \"host\": \"{}\"", cfg.host);
    // A source that needs two readings (RAPL) starts its count now.
    if let Err(e) = reader.read() {
        writeln!(
            file,
            "referee: power reading missed at {} ms: {e}",
            now_ms()
        )
        .map_err(&io)?;
        report.missed += 1;
    }
    let t0 = Instant::now();
    let mut k: u32 = 1;
    loop {
        let due = t0 + cfg.interval * k;
        while Instant::now() < due {
            if stop.load(Ordering::SeqCst) {
                line(
                    &mut file,
                    "INTERVAL_END",
                    "power_measurement_stop",
                    "null",
                    "",
                )
                .map_err(&io)?;
                return Ok(report);
            }
            std::thread::sleep((due - Instant::now()).min(Duration::from_millis(20)));
        }
        k += 1;
        match reader.read() {
            Ok(Some(w)) => {
                line(
                    &mut file,
                    "POINT_IN_TIME",
                    "power_reading",
                    &format!("{w:.3}"),
                    &meta,
                )
                .map_err(&io)?;
                report.readings += 1;
            }
            Ok(None) => {}
            Err(e) => {
                writeln!(
                    file,
                    "referee: power reading missed at {} ms: {e}",
                    now_ms()
                )
                .map_err(&io)?;
                report.missed += 1;
            }
        }
        // Readings that fell behind their schedule are skipped, not crowded.
        while t0 + cfg.interval * k < Instant::now() {
            k += 1;
        }
    }
}

/// Sample for `seconds` (or until SIGINT/SIGTERM when `None`; a signal
/// also ends a timed sampling early).
pub fn sample_for(cfg: SamplerConfig, seconds: Option<f64>) -> Result<SamplerReport, PowerError> {
    use crate::common::harness_process::{install_termination_handlers, termination_signal};
    install_termination_handlers();
    let sampler = Sampler::start(cfg)?;
    let t0 = Instant::now();
    while termination_signal().is_none() && seconds.is_none_or(|s| t0.elapsed().as_secs_f64() < s) {
        std::thread::sleep(Duration::from_millis(20));
    }
    sampler.stop()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_source_gives_a_power_log_with_readings_on_schedule_and_missed_ones_logged() {
        let t = tempfile::tempdir().unwrap();
        let flip = t.path().join("flip");
        // Watts 250 normally; a failing reading while `flip` exists.
        let cmd = format!("test -e {} && exit 3; echo 250", flip.display());
        let out = t.path().join("power/result_0/node_0.txt");
        let sampler = Sampler::start(SamplerConfig {
            source: Source::Cmd(cmd),
            out: out.clone(),
            interval: Duration::from_millis(100),
            host: "node_0".into(),
            conversion_eff: Some(0.94),
        })
        .unwrap();
        std::thread::sleep(Duration::from_millis(550));
        std::fs::write(&flip, "").unwrap();
        std::thread::sleep(Duration::from_millis(250));
        let r = sampler.stop().unwrap();
        assert!(r.readings >= 3 && r.missed >= 1, "{r:?}");
        let text = std::fs::read_to_string(&out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].contains("\"power_measurement_start\""));
        assert!(lines[1].contains("\"conversion_eff\", \"value\": 0.94"));
        assert!(lines[1].contains("\"measurement_type\": \"AC\""));
        assert!(lines.last().unwrap().contains("\"power_measurement_stop\""));
        let readings: Vec<&&str> = lines
            .iter()
            .filter(|l| l.contains("power_reading"))
            .collect();
        assert_eq!(readings.len(), r.readings);
        assert!(
            readings[0].contains("\"value\": 250.000")
                && readings[0].contains("\"host\": \"node_0\"")
        );
        assert_eq!(
            lines
                .iter()
                .filter(|l| l.starts_with("referee: power reading missed"))
                .count(),
            r.missed
        );
    }

    #[test]
    fn a_dropped_sampler_stops_and_closes_its_log() {
        let t = tempfile::tempdir().unwrap();
        let out = t.path().join("node_0.txt");
        let sampler = Sampler::start(SamplerConfig {
            source: Source::Cmd("echo 1".into()),
            out: out.clone(),
            interval: Duration::from_millis(50),
            host: "node_0".into(),
            conversion_eff: None,
        })
        .unwrap();
        std::thread::sleep(Duration::from_millis(120));
        drop(sampler);
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(
            text.lines()
                .last()
                .unwrap()
                .contains("power_measurement_stop"),
            "{text}"
        );
        let len = text.len();
        std::thread::sleep(Duration::from_millis(150));
        assert_eq!(
            std::fs::read_to_string(&out).unwrap().len(),
            len,
            "nothing written after the drop"
        );
    }
}
