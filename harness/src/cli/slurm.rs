//! `referee slurm BENCHMARK --nodes N --gpus-per-node G`: an sbatch script
//! that runs a benchmark's R runs on a Slurm cluster.
//!
//! One `srun` runs all R runs (`referee run --runs R`), rather than one
//! `srun` per run: the ranks and their communicator stay up between runs,
//! the seeds derive from one base seed (rank 0's, broadcast), and every log
//! lands in one `referee run` output directory — `result_*.txt`,
//! `system.json`, `referee_run.json` — which is what
//! `referee package RUN_DIR --out DIR` takes. The script refuses a run
//! directory that already holds results (a log is never overwritten).
//!
//! `srun --kill-on-bad-exit=1` stops every rank when one fails; rank 0 then
//! ends its log with `run_stop` aborted (see `referee run`). Ranks find
//! each other through MPI (`--mpi=pmix` by default; `--srun-mpi none`
//! drops the flag for sites whose default is right); GPU ranks use one GPU
//! each, by local rank (`--device cuda`), and NCCL for the gradients.

use super::run::DivisionArg;
use super::{EXIT_OK, usage_error};
use crate::registry;
use clap::Args;
use std::fmt::Write as _;
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

/// Single-quote `s` for bash.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The resolved job.
#[derive(Debug, Clone, PartialEq)]
pub struct SlurmJob {
    pub benchmark: String,
    pub nodes: usize,
    pub gpus_per_node: usize,
    pub tasks_per_node: usize,
    pub partition: Option<String>,
    pub account: Option<String>,
    pub minutes: u64,
    pub runs: usize,
    pub run_dir: Option<String>,
    pub referee: String,
    /// Arguments of `referee run` after `--out DIR`.
    pub run_args: Vec<String>,
    pub srun_mpi: Option<String>,
}

/// Check the flags and resolve defaults.
pub fn resolve(a: &SlurmArgs) -> Result<SlurmJob, String> {
    let bench = registry::find_or_err(&a.benchmark)?;
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
    super::run::resolve_config(bench, None, &a.sets, a.division == DivisionArg::Closed)?;
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

/// The sbatch script of a job.
pub fn script(j: &SlurmJob) -> String {
    let q = shell_quote;
    let ranks = j.nodes * j.tasks_per_node;
    let mut s = String::new();
    let _ = writeln!(s, "#!/bin/bash");
    let _ = writeln!(
        s,
        "# {} run(s) of {} on {} node(s) x {} rank(s){}; generated by referee {}.",
        j.runs,
        j.benchmark,
        j.nodes,
        j.tasks_per_node,
        if j.gpus_per_node > 0 {
            format!(", {} GPU(s) per node", j.gpus_per_node)
        } else {
            " (CPU)".into()
        },
        crate::provenance::VERSION
    );
    let _ = writeln!(
        s,
        "# Submit with `sbatch THIS_FILE`. One srun runs all runs (`referee run --runs {}`);",
        j.runs
    );
    let _ = writeln!(
        s,
        "# the logs land in RUN_DIR (result_*.txt, system.json, referee_run.json),"
    );
    let _ = writeln!(s, "# ready for `referee package RUN_DIR --out DIR`.");
    let _ = writeln!(s, "#SBATCH --job-name=referee-{}", j.benchmark);
    let _ = writeln!(s, "#SBATCH --nodes={}", j.nodes);
    let _ = writeln!(s, "#SBATCH --ntasks-per-node={}", j.tasks_per_node);
    if j.gpus_per_node > 0 {
        let _ = writeln!(s, "#SBATCH --gpus-per-node={}", j.gpus_per_node);
    }
    if let Some(p) = &j.partition {
        let _ = writeln!(s, "#SBATCH --partition={p}");
    }
    if let Some(a) = &j.account {
        let _ = writeln!(s, "#SBATCH --account={a}");
    }
    let _ = writeln!(s, "#SBATCH --time={}", j.minutes);
    let _ = writeln!(s, "#SBATCH --exclusive");
    let _ = writeln!(s, "#SBATCH --output=referee-{}-%j.out", j.benchmark);
    let _ = writeln!(s, "set -euo pipefail");
    let _ = writeln!(s, "REFEREE=${{REFEREE:-{}}}", q(&j.referee));
    let default_dir = format!(
        "out/{}-slurm-${{SLURM_JOB_ID:?not inside a Slurm job}}",
        j.benchmark
    );
    match &j.run_dir {
        Some(d) => {
            let _ = writeln!(s, "RUN_DIR=${{RUN_DIR:-{}}}", q(d));
        }
        None => {
            let _ = writeln!(s, "RUN_DIR=${{RUN_DIR:-{default_dir}}}");
        }
    }
    let _ = writeln!(
        s,
        "if compgen -G \"$RUN_DIR/result_*.txt\" >/dev/null; then"
    );
    let _ = writeln!(
        s,
        "  echo \"referee: $RUN_DIR already holds results; choose another RUN_DIR\" >&2"
    );
    let _ = writeln!(s, "  exit 2");
    let _ = writeln!(s, "fi");
    let _ = writeln!(s, "mkdir -p \"$RUN_DIR\"");
    let _ = writeln!(
        s,
        "# A rank that hears nothing from its peers for this long ends the run (aborted)."
    );
    let _ = writeln!(
        s,
        "export REFEREE_PEER_TIMEOUT_S=${{REFEREE_PEER_TIMEOUT_S:-300}}"
    );
    let mut srun = format!(
        "srun --kill-on-bad-exit=1 --nodes={} --ntasks-per-node={}",
        j.nodes, j.tasks_per_node
    );
    if let Some(m) = &j.srun_mpi {
        let _ = write!(srun, " --mpi={}", q(m));
    }
    let _ = write!(
        srun,
        " \"$REFEREE\" run {} --out \"$RUN_DIR\"",
        q(&j.benchmark)
    );
    for a in &j.run_args {
        let _ = write!(srun, " {}", q(a));
    }
    let _ = writeln!(s, "{srun}");
    let _ = writeln!(
        s,
        "echo \"referee: {} rank(s) done; logs in $RUN_DIR (package with: $REFEREE package $RUN_DIR --out DIR)\"",
        ranks
    );
    s
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

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("a=b"), "a=b");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
    }
}
