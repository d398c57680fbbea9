//! `referee slurm`: flags → a [`SlurmJob`] (crate::slurm) → its sbatch script.

use super::run::DivisionArg;
use super::{EXIT_OK, usage_error};
use crate::own_benchmarks;
use crate::slurm::{SlurmJob, script};
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

/// Check the flags and resolve defaults.
pub fn resolve(a: &SlurmArgs) -> Result<SlurmJob, String> {
    let bench = own_benchmarks::find_or_err(&a.benchmark).map_err(|e| e.to_string())?;
    let spec = bench.spec();
    if a.nodes == 0 {
        return Err("--nodes must be at least 1".into());
    }
    let tasks_per_node = a.tasks_per_node.unwrap_or(a.gpus_per_node.max(1));
    if tasks_per_node == 0 {
        return Err("--tasks-per-node must be at least 1".into());
    }
    if a.gpus_per_node > 0 && tasks_per_node > a.gpus_per_node {
        return Err(format!(
            "--tasks-per-node {tasks_per_node} exceeds --gpus-per-node {}: each GPU rank needs its own GPU",
            a.gpus_per_node
        ));
    }
    let runs = a.runs.unwrap_or(spec.runs);
    if runs == 0 {
        return Err("--runs must be at least 1".into());
    }
    // The same validation `referee run` applies, now rather than on the cluster.
    crate::session::plan::resolve_config(bench, None, &a.sets, a.division == DivisionArg::Closed)
        .map_err(|e| e.to_string())?;
    let minutes = a
        .time
        .unwrap_or((spec.budget_minutes * runs as f64).ceil() as u64 + 15);
    if minutes == 0 {
        return Err("--time must be positive".into());
    }
    let referee = match &a.referee {
        Some(p) => p.display().to_string(),
        None => std::env::current_exe()
            .ok()
            .and_then(|p| p.canonicalize().ok())
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "referee".into()),
    };
    let mut run_args: Vec<String> = vec![
        "--runs".into(),
        runs.to_string(),
        "--device".into(),
        if a.gpus_per_node > 0 { "cuda" } else { "cpu" }.into(),
        "--division".into(),
        match a.division {
            DivisionArg::Closed => "closed",
            DivisionArg::Open => "open",
        }
        .into(),
        "--quiet".into(),
    ];
    if let Some(s) = a.seed {
        run_args.extend(["--seed".into(), s.to_string()]);
    }
    if let Some(s) = &a.system {
        run_args.extend(["--system".into(), s.clone()]);
    }
    if let Some(o) = &a.org {
        run_args.extend(["--org".into(), o.clone()]);
    }
    if let Some(d) = &a.data_dir {
        run_args.extend(["--data-dir".into(), d.display().to_string()]);
    }
    for s in &a.sets {
        run_args.extend(["--set".into(), s.clone()]);
    }
    if let Some(p) = &a.power {
        p.parse::<crate::power::Source>()
            .map_err(|e| e.to_string())?;
        run_args.extend(["--power".into(), p.clone()]);
    }
    let srun_mpi = match a.srun_mpi.trim() {
        "" | "none" => None,
        p => Some(p.to_string()),
    };
    Ok(SlurmJob {
        benchmark: spec.name.to_string(),
        nodes: a.nodes,
        gpus_per_node: a.gpus_per_node,
        tasks_per_node,
        partition: a.partition.clone(),
        account: a.account.clone(),
        minutes,
        runs,
        run_dir: a.run_dir.as_ref().map(|p| p.display().to_string()),
        referee,
        run_args,
        srun_mpi,
    })
}

pub fn run(a: SlurmArgs) -> i32 {
    let job = match resolve(&a) {
        Ok(j) => j,
        Err(e) => return usage_error(e),
    };
    let text = script(&job);
    if job.nodes * job.tasks_per_node > 1 && a.referee.is_none() && !cfg!(feature = "mpi") {
        eprintln!(
            "referee: warning: this referee binary has no MPI back end and cannot run {} ranks; point --referee (or $REFEREE) at a build with `--features mpi`",
            job.nodes * job.tasks_per_node
        );
    }
    match &a.out {
        None => {
            print!("{text}");
            EXIT_OK
        }
        Some(p) => {
            if let Err(e) = crate::fsutil::write_atomic(p, text.as_bytes()) {
                return usage_error(format!("{}: {e}", p.display()));
            }
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let _ = std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755));
            }
            eprintln!(
                "referee: wrote {} (submit with: sbatch {})",
                p.display(),
                p.display()
            );
            EXIT_OK
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        a: SlurmArgs,
    }

    fn args(v: &[&str]) -> SlurmArgs {
        T::parse_from(std::iter::once("x").chain(v.iter().copied())).a
    }

    #[test]
    fn gpu_job() {
        let j = resolve(&args(&[
            "mini_llm",
            "--nodes",
            "2",
            "--gpus-per-node",
            "8",
            "--partition",
            "gpu",
            "--runs",
            "3",
            "--referee",
            "/opt/referee bin/referee",
        ]))
        .unwrap();
        assert_eq!((j.tasks_per_node, j.runs, j.minutes), (8, 3, 105));
        let s = script(&j);
        assert!(s.contains("#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=8\n#SBATCH --gpus-per-node=8\n#SBATCH --partition=gpu\n"), "{s}");
        assert!(
            s.contains("REFEREE=${REFEREE:-'/opt/referee bin/referee'}"),
            "{s}"
        );
        assert!(
            s.contains("srun --kill-on-bad-exit=1 --nodes=2 --ntasks-per-node=8 --mpi=pmix \"$REFEREE\" run mini_llm --out \"$RUN_DIR\" --runs 3 --device cuda --division closed --quiet\n"),
            "{s}"
        );
    }

    #[test]
    fn a_power_source_reaches_every_node_s_run_and_a_bad_one_is_refused() {
        let j = resolve(&args(&["mini_llm", "--nodes", "2", "--power", "ipmi"])).unwrap();
        assert!(
            script(&j).contains(" --quiet --power ipmi\n"),
            "{}",
            script(&j)
        );
        let j = resolve(&args(&["mini_llm", "--power", "cmd:cat /run/watts"])).unwrap();
        assert!(
            script(&j).contains(" --power 'cmd:cat /run/watts'\n"),
            "{}",
            script(&j)
        );
        assert!(
            resolve(&args(&["mini_llm", "--power", "psu"]))
                .unwrap_err()
                .contains("unknown power source `psu`")
        );
    }

    #[test]
    fn bad_jobs() {
        assert!(
            resolve(&args(&["nope"]))
                .unwrap_err()
                .contains("unknown benchmark")
        );
        assert!(resolve(&args(&["mini_llm", "--nodes", "0"])).is_err());
        assert!(
            resolve(&args(&[
                "mini_llm",
                "--gpus-per-node",
                "2",
                "--tasks-per-node",
                "4"
            ]))
            .unwrap_err()
            .contains("own GPU")
        );
        assert!(
            resolve(&args(&["mini_llm", "--set", "d_model=64"]))
                .unwrap_err()
                .contains("fixed")
        );
    }
}
