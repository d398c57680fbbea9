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
