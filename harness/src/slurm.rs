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
//!
//! This module owns the job: a [`SlurmRequest`] resolved into a
//! [`SlurmJob`] (defaults, and the checks `referee run` would make on the
//! cluster, made now), its script, and the script written. It must not
//! know how the command line spells the request (crate::cli::slurm).

use crate::common::division::Division;
use crate::own_benchmarks;
use crate::session::error::SessionError;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// What `referee slurm` was asked for, before defaults.
#[derive(Debug, Clone)]
pub struct SlurmRequest {
    pub benchmark: String,
    pub nodes: usize,
    /// 0: CPU ranks.
    pub gpus_per_node: usize,
    /// Default: one per GPU, or 1 without GPUs.
    pub tasks_per_node: Option<usize>,
    pub partition: Option<String>,
    pub account: Option<String>,
    /// Minutes (default: the benchmark's budget × runs + 15).
    pub time: Option<u64>,
    /// Default: the benchmark's N.
    pub runs: Option<usize>,
    pub run_dir: Option<PathBuf>,
    /// The referee binary on the cluster (default: this one's absolute path).
    pub referee: Option<PathBuf>,
    pub seed: Option<u64>,
    pub sets: Vec<String>,
    pub power: Option<String>,
    pub division: Division,
    pub system: Option<String>,
    pub org: Option<String>,
    pub data_dir: Option<PathBuf>,
    /// srun's --mpi plugin (`none` or empty: the flag left out).
    pub srun_mpi: String,
}

/// Why a job cannot be made or its script written.
#[derive(Debug, thiserror::Error)]
pub enum SlurmError {
    /// Not one of referee's benchmarks.
    #[error(transparent)]
    Unknown(#[from] crate::own_benchmarks::UnknownName),
    /// Hyperparameters its runs would refuse.
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error("--nodes must be at least 1")]
    NoNodes,
    #[error("--tasks-per-node must be at least 1")]
    NoTasks,
    #[error(
        "--tasks-per-node {tasks} exceeds --gpus-per-node {gpus}: each GPU rank needs its own GPU"
    )]
    TasksOverGpus { tasks: usize, gpus: usize },
    #[error("--runs must be at least 1")]
    NoRuns,
    #[error("--time must be positive")]
    NoTime,
    #[error(transparent)]
    Power(#[from] crate::power::PowerError),
    #[error("{}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl SlurmJob {
    /// Check the request and resolve its defaults.
    pub fn resolve(r: &SlurmRequest) -> Result<SlurmJob, SlurmError> {
        let bench = own_benchmarks::find_or_err(&r.benchmark)?;
        let spec = bench.spec();
        if r.nodes == 0 {
            return Err(SlurmError::NoNodes);
        }
        let tasks_per_node = r.tasks_per_node.unwrap_or(r.gpus_per_node.max(1));
        if tasks_per_node == 0 {
            return Err(SlurmError::NoTasks);
        }
        if r.gpus_per_node > 0 && tasks_per_node > r.gpus_per_node {
            return Err(SlurmError::TasksOverGpus {
                tasks: tasks_per_node,
                gpus: r.gpus_per_node,
            });
        }
        let runs = r.runs.unwrap_or(spec.runs);
        if runs == 0 {
            return Err(SlurmError::NoRuns);
        }
        // The same validation `referee run` applies, now rather than on the cluster.
        let closed = r.division == Division::Closed;
        crate::session::plan::resolve_config(bench, None, &r.sets, closed)?;
        let minutes = r
            .time
            .unwrap_or((spec.budget_minutes * runs as f64).ceil() as u64 + 15);
        if minutes == 0 {
            return Err(SlurmError::NoTime);
        }
        let referee = match &r.referee {
            Some(p) => p.display().to_string(),
            None => std::env::current_exe()
                .ok()
                .and_then(|p| p.canonicalize().ok())
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "referee".into()),
        };
        let srun_mpi = match r.srun_mpi.trim() {
            "" | "none" => None,
            p => Some(p.to_string()),
        };
        Ok(SlurmJob {
            benchmark: spec.name.to_string(),
            nodes: r.nodes,
            gpus_per_node: r.gpus_per_node,
            tasks_per_node,
            partition: r.partition.clone(),
            account: r.account.clone(),
            minutes,
            runs,
            run_dir: r.run_dir.as_ref().map(|p| p.display().to_string()),
            referee,
            run_args: run_args(r, runs)?,
            srun_mpi,
        })
    }

    /// The warning for a job of several ranks that falls back on this
    /// binary (`referee` not given) when it was built without MPI.
    pub fn mpi_warning(&self, referee_given: bool) -> Option<String> {
        let ranks = self.nodes * self.tasks_per_node;
        (ranks > 1 && !referee_given && !cfg!(feature = "mpi")).then(|| {
            format!(
                "this referee binary has no MPI back end and cannot run {ranks} ranks; point --referee (or $REFEREE) at a build with `--features mpi`"
            )
        })
    }
}

/// The arguments of the job's `referee run` after `--out DIR`.
fn run_args(r: &SlurmRequest, runs: usize) -> Result<Vec<String>, SlurmError> {
    let mut args: Vec<String> = vec![
        "--runs".into(),
        runs.to_string(),
        "--device".into(),
        if r.gpus_per_node > 0 { "cuda" } else { "cpu" }.into(),
        "--division".into(),
        r.division.as_str().into(),
        "--quiet".into(),
    ];
    if let Some(s) = r.seed {
        args.extend(["--seed".into(), s.to_string()]);
    }
    if let Some(s) = &r.system {
        args.extend(["--system".into(), s.clone()]);
    }
    if let Some(o) = &r.org {
        args.extend(["--org".into(), o.clone()]);
    }
    if let Some(d) = &r.data_dir {
        args.extend(["--data-dir".into(), d.display().to_string()]);
    }
    for s in &r.sets {
        args.extend(["--set".into(), s.clone()]);
    }
    if let Some(p) = &r.power {
        p.parse::<crate::power::Source>()?;
        args.extend(["--power".into(), p.clone()]);
    }
    Ok(args)
}

/// Write a job's script to `path`, executable.
pub fn write_script(path: &Path, text: &str) -> Result<(), SlurmError> {
    crate::fsutil::write_atomic(path, text.as_bytes()).map_err(|source| SlurmError::Write {
        path: path.to_path_buf(),
        source,
    })?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755));
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("a=b"), "a=b");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
    }

    /// A request as `referee slurm BENCHMARK` makes it with no other flag.
    fn req(benchmark: &str) -> SlurmRequest {
        SlurmRequest {
            benchmark: benchmark.into(),
            nodes: 1,
            gpus_per_node: 0,
            tasks_per_node: None,
            partition: None,
            account: None,
            time: None,
            runs: None,
            run_dir: None,
            referee: None,
            seed: None,
            sets: Vec::new(),
            power: None,
            division: Division::Closed,
            system: None,
            org: None,
            data_dir: None,
            srun_mpi: "pmix".into(),
        }
    }

    fn err(r: &SlurmRequest) -> String {
        SlurmJob::resolve(r).unwrap_err().to_string()
    }

    #[test]
    fn gpu_job() {
        let j = SlurmJob::resolve(&SlurmRequest {
            nodes: 2,
            gpus_per_node: 8,
            partition: Some("gpu".into()),
            runs: Some(3),
            referee: Some("/opt/referee bin/referee".into()),
            ..req("mini_llm")
        })
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
        let power = |p: &str| SlurmRequest {
            power: Some(p.into()),
            ..req("mini_llm")
        };
        let j = SlurmJob::resolve(&SlurmRequest {
            nodes: 2,
            ..power("ipmi")
        })
        .unwrap();
        assert!(
            script(&j).contains(" --quiet --power ipmi\n"),
            "{}",
            script(&j)
        );
        let j = SlurmJob::resolve(&power("cmd:cat /run/watts")).unwrap();
        assert!(
            script(&j).contains(" --power 'cmd:cat /run/watts'\n"),
            "{}",
            script(&j)
        );
        assert!(err(&power("psu")).contains("unknown power source `psu`"));
    }

    #[test]
    fn bad_jobs() {
        assert!(err(&req("nope")).contains("unknown benchmark"));
        assert!(
            SlurmJob::resolve(&SlurmRequest {
                nodes: 0,
                ..req("mini_llm")
            })
            .is_err()
        );
        let over = SlurmRequest {
            gpus_per_node: 2,
            tasks_per_node: Some(4),
            ..req("mini_llm")
        };
        assert!(err(&over).contains("own GPU"));
        let fixed = SlurmRequest {
            sets: vec!["d_model=64".into()],
            ..req("mini_llm")
        };
        assert!(err(&fixed).contains("fixed"));
    }
}
