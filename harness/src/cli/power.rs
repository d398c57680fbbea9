//! `referee power sample`: flags → a [`SamplerConfig`] (crate::power) → a
//! power log written, and what was read printed.

use super::{EXIT_FAIL, EXIT_OK, usage_error};
use crate::power::{SamplerConfig, Source, sample_for};
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct PowerArgs {
    #[command(subcommand)]
    pub command: PowerCommand,
}

#[derive(Debug, Subcommand)]
pub enum PowerCommand {
    /// Write an MLPerf power log of this node (until SIGINT/SIGTERM, or
    /// --seconds).
    Sample(SampleArgs),
}

/// Where power comes from, shared with `run --power`.
#[derive(Debug, Clone, Args)]
pub struct SourceArgs {
    /// Milliseconds between power readings (the power rules ask for at
    /// least one per second).
    #[arg(long = "power-interval-ms", value_name = "MS", default_value_t = 1000)]
    pub interval_ms: u64,
    /// The AC/DC conversion efficiency of an AC source (logged as
    /// conversion_eff; the power rules require it for AC measurements).
    #[arg(long, value_name = "E")]
    pub conversion_eff: Option<f64>,
}

#[derive(Debug, Args)]
pub struct SampleArgs {
    /// nvml (GPU board power via nvidia-smi), rapl (/sys/class/powercap),
    /// ipmi (ipmitool dcmi power reading), redfish:URL (a BMC's Power
    /// resource), or cmd:COMMAND (prints the node's watts on its first line).
    #[arg(long, value_name = "SOURCE")]
    pub source: String,
    /// The power log to write (e.g. power/result_0/node_0.txt).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Stop after S seconds (default: at SIGINT or SIGTERM).
    #[arg(long, value_name = "S")]
    pub seconds: Option<f64>,
    /// metadata.host of the readings (default: node_$SLURM_NODEID, or node_0).
    #[arg(long)]
    pub host: Option<String>,
    #[command(flatten)]
    pub src: SourceArgs,
    /// The summary as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: PowerArgs) -> i32 {
    match a.command {
        PowerCommand::Sample(s) => sample(s),
    }
}

fn sample(a: SampleArgs) -> i32 {
    let source: Source = match a.source.parse() {
        Ok(s) => s,
        Err(e) => return usage_error(e),
    };
    if a.src.interval_ms == 0 {
        return usage_error("--power-interval-ms must be at least 1");
    }
    let cfg = SamplerConfig {
        source,
        out: a.out.clone(),
        interval: Duration::from_millis(a.src.interval_ms),
        host: a.host.unwrap_or_else(crate::power::node_host),
        conversion_eff: a.src.conversion_eff,
    };
    let report = match sample_for(cfg, a.seconds) {
        Ok(r) => r,
        Err(e) => return usage_error(e),
    };
    if a.json {
        println!(
            "{}",
            serde_json::json!({"out": a.out.display().to_string(), "readings": report.readings, "missed": report.missed})
        );
    } else {
        println!(
            "{}: {} readings, {} missed",
            a.out.display(),
            report.readings,
            report.missed
        );
    }
    if report.readings == 0 {
        EXIT_FAIL
    } else {
        EXIT_OK
    }
}
