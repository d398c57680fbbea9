//! `referee slurm`: flags → a [`SlurmRequest`], resolved into a
//! [`SlurmJob`] (crate::slurm) → its sbatch script, printed or written.

use super::run::DivisionArg;
use super::{EXIT_OK, usage_error};
use crate::slurm::{SlurmJob, SlurmRequest, script, write_script};
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct SlurmArgs {
    /// The benchmark (mini_resnet, mini_llm).
    pub benchmark: String,
    /// Nodes to run on.
    #[arg(long, default_value_t = 1)]
    pub nodes: usize,
    /// GPUs per node (0: CPU ranks).
    #[arg(long, default_value_t = 0)]
    pub gpus_per_node: usize,
    /// Ranks per node (default: one per GPU, or 1 without GPUs).
    #[arg(long)]
    pub tasks_per_node: Option<usize>,
    /// Slurm partition.
    #[arg(long)]
    pub partition: Option<String>,
    /// Slurm account.
    #[arg(long)]
    pub account: Option<String>,
    /// Wall-clock limit in minutes (default: the benchmark's budget × runs + 15).
    #[arg(long, value_name = "MINUTES")]
    pub time: Option<u64>,
    /// Number of runs (default: the benchmark's N).
    #[arg(long)]
    pub runs: Option<usize>,
    /// Write the script to FILE instead of standard output.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// The `referee run --out` directory of the job (default:
    /// out/BENCHMARK-slurm-$SLURM_JOB_ID, relative to the submit directory).
    #[arg(long, value_name = "DIR")]
    pub run_dir: Option<PathBuf>,
    /// The referee binary on the cluster (default: this one's absolute path;
    /// `$REFEREE` at job time overrides it).
    #[arg(long, value_name = "PATH")]
    pub referee: Option<PathBuf>,
    /// Base seed (default: rank 0 draws one; all ranks use it).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Override one hyperparameter (repeatable), passed to `referee run`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// Measure each node's power during each run (nvml, rapl, ipmi,
    /// redfish:URL, cmd:COMMAND): the first rank of every node samples into
    /// power/result_i/node_$SLURM_NODEID.txt (docs/energy.md).
    #[arg(long, value_name = "SOURCE")]
    pub power: Option<String>,
    #[arg(long, value_enum, default_value_t = DivisionArg::Closed)]
    pub division: DivisionArg,
    /// System name (submission_platform).
    #[arg(long)]
    pub system: Option<String>,
    /// Submitting organisation.
    #[arg(long)]
    pub org: Option<String>,
    /// Prepared datasets on the cluster (default: the job's $REFEREE_DATA_DIR or ./data).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// srun's --mpi plugin (`none` leaves the flag out).
    #[arg(long, default_value = "pmix", value_name = "PLUGIN")]
    pub srun_mpi: String,
}

impl SlurmArgs {
    /// The request these flags make.
    pub fn request(&self) -> SlurmRequest {
        SlurmRequest {
            benchmark: self.benchmark.clone(),
            nodes: self.nodes,
            gpus_per_node: self.gpus_per_node,
            tasks_per_node: self.tasks_per_node,
            partition: self.partition.clone(),
            account: self.account.clone(),
            time: self.time,
            runs: self.runs,
            run_dir: self.run_dir.clone(),
            referee: self.referee.clone(),
            seed: self.seed,
            sets: self.sets.clone(),
            power: self.power.clone(),
            division: self.division.into(),
            system: self.system.clone(),
            org: self.org.clone(),
            data_dir: self.data_dir.clone(),
            srun_mpi: self.srun_mpi.clone(),
        }
    }
}

pub fn run(a: SlurmArgs) -> i32 {
    let job = match SlurmJob::resolve(&a.request()) {
        Ok(j) => j,
        Err(e) => return usage_error(e),
    };
    let text = script(&job);
    if let Some(w) = job.mpi_warning(a.referee.is_some()) {
        eprintln!("referee: warning: {w}");
    }
    match &a.out {
        None => print!("{text}"),
        Some(p) => {
            if let Err(e) = write_script(p, &text) {
                return usage_error(e);
            }
            eprintln!(
                "referee: wrote {} (submit with: sbatch {})",
                p.display(),
                p.display()
            );
        }
    }
    EXIT_OK
}
