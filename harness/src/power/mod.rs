//! Power measured under the harness: where a node's watts come from
//! ([`Source`]: NVML through `nvidia-smi`, RAPL energy counters, IPMI DCMI,
//! a Redfish BMC, or any command) and the sampler that writes them as the
//! MLPerf power log (`power_measurement_start`, `conversion_eff`,
//! `power_reading` …, `power_measurement_stop`) on the harness's clock, the
//! same wall clock the witness reads. A reading that fails is logged as a
//! missed reading (a plain line, which no MLLOG reader counts) — never
//! invented. Must not know the power rules (rules::policy::power) or where a
//! run puts its files (exec).

pub mod sampler;
pub mod sources;

pub use sampler::{Sampler, SamplerConfig, sample_for};
pub use sources::Source;

/// Power measured during each run (`run --power SOURCE`).
#[derive(Debug, Clone, PartialEq)]
pub struct PowerRequest {
    pub source: Source,
    pub interval: std::time::Duration,
    pub conversion_eff: Option<f64>,
}

/// What one run's power log holds: its file, the readings, and the energy
/// of the timed part as the official summarizer computes it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RunPower {
    pub file: String,
    pub source: String,
    pub readings: usize,
    pub missed: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub energy_joules: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub average_watts: Option<f64>,
}

impl RunPower {
    /// For people: readings, energy and average power.
    pub fn line(&self) -> String {
        format!(
            "power ({}): {} readings, {} missed{} → {}",
            self.source,
            self.readings,
            self.missed,
            match (self.energy_joules, self.average_watts) {
                (Some(j), Some(w)) => format!(
                    "; energy {:.1} kJ ({:.4} kWh), average {w:.1} W over the timed part",
                    j / 1000.0,
                    j / 3.6e6
                ),
                _ => String::new(),
            },
            self.file
        )
    }
}

/// `OUT/power/result_I/node_N.txt`: where a run's power log goes.
pub fn run_power_file(out: &std::path::Path, index: usize) -> std::path::PathBuf {
    out.join("power")
        .join(format!("result_{index}"))
        .join(format!("{}.txt", node_host()))
}

/// `node_$SLURM_NODEID` under Slurm (one sampler per node), else `node_0`.
pub fn node_host() -> String {
    format!(
        "node_{}",
        std::env::var("SLURM_NODEID").unwrap_or_else(|_| "0".into())
    )
}

/// Stop a run's sampler; its log and the energy of a run of `ttt_ms`.
pub fn finish(
    sampler: Sampler,
    source: Option<&Source>,
    ttt_ms: Option<f64>,
) -> Result<RunPower, PowerError> {
    let file = sampler.out.clone();
    let r = sampler.stop()?;
    let energy = ttt_ms.and_then(|t| referee_rules::score::node_energy_joules(&file, t).ok());
    Ok(RunPower {
        file: file.display().to_string(),
        source: source.map(Source::name).unwrap_or_default(),
        readings: r.readings,
        missed: r.missed,
        energy_joules: energy,
        average_watts: energy.zip(ttt_ms).map(|(j, t)| j / (t / 1000.0)),
    })
}

/// What can go wrong measuring power.
#[derive(Debug, thiserror::Error)]
pub enum PowerError {
    #[error("unknown power source `{0}`: expected nvml, rapl, ipmi, redfish:URL or cmd:COMMAND")]
    UnknownSource(String),
    #[error("{source_name}: {message}")]
    Reading {
        source_name: String,
        message: String,
    },
    #[error("{path}: {error}")]
    Io {
        path: String,
        #[source]
        error: std::io::Error,
    },
}
