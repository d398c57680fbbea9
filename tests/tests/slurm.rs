//! `referee slurm`: the generated sbatch script is valid bash with the
//! expected srun line, and, run as Slurm would run it (SLURM_* variables
//! set, a fake `srun` that starts the ranks locally with `mpirun`), it
//! trains mini_llm on 2 ranks and leaves a `referee run` output directory
//! that `referee package` takes.
//!
//! The job is plumbing, not training: the 5 runs a mini_llm submission
//! needs, 16 steps each (no evaluation), so that `referee package` gets
//! the whole set; tests/tests/mpi.rs checks what 2 ranks train.

use referee_tests::{data_dir, mpirun, referee_bin, referee_mpi_bin, stderr, stdout};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

#[test]
fn script_is_valid_bash_with_the_srun_line() {
    let tmp = tempfile::tempdir().unwrap();
    let script = tmp.path().join("job.sh");
    let o = Command::new(referee_bin())
        .args([
            "slurm",
            "mini_llm",
            "--nodes",
            "2",
            "--gpus-per-node",
            "8",
            "--partition",
            "gpu",
            "--runs",
            "5",
            "--referee",
            "/opt/referee/bin/referee",
            "--out",
        ])
        .arg(&script)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = std::fs::read_to_string(&script).unwrap();
    let n = Command::new("bash")
        .arg("-n")
        .arg(&script)
        .output()
        .unwrap();
    assert!(n.status.success(), "bash -n: {}\n{text}", stderr(&n));
    for line in [
        "#SBATCH --nodes=2",
        "#SBATCH --ntasks-per-node=8",
        "#SBATCH --gpus-per-node=8",
        "#SBATCH --partition=gpu",
        "#SBATCH --time=165",
        "REFEREE=${REFEREE:-/opt/referee/bin/referee}",
        "srun --kill-on-bad-exit=1 --nodes=2 --ntasks-per-node=8 --mpi=pmix \"$REFEREE\" run mini_llm --out \"$RUN_DIR\" --runs 5 --device cuda --division closed --quiet",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing `{line}` in\n{text}"
        );
    }
    // Without --out the script goes to standard output.
    let o = Command::new(referee_bin())
        .args(["slurm", "mini_resnet", "--nodes", "1"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).starts_with("#!/bin/bash\n"));
    assert!(stdout(&o).contains("--device cpu"));
    // Bad requests are usage errors.
    let o = Command::new(referee_bin())
        .args(["slurm", "nope", "--nodes", "1"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

/// A stand-in for Slurm's `srun`: reads the task geometry from its own
/// options and starts the command as that many local MPI ranks.
const FAKE_SRUN: &str = r#"#!/bin/bash
set -euo pipefail
nodes=${SLURM_NNODES:-1}; per_node=1; ntasks=""
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes=*) nodes=${1#*=} ;;
    --ntasks-per-node=*) per_node=${1#*=} ;;
    --ntasks=*) ntasks=${1#*=} ;;
    -n) ntasks=$2; shift ;;
    -*) ;;
    *) break ;;
  esac
  shift
done
ntasks=${ntasks:-$((nodes * per_node))}
echo "fake srun: $ntasks task(s): $*" >&2
exec mpirun --allow-run-as-root --oversubscribe -np "$ntasks" "$@"
"#;

/// `referee slurm mini_llm` (1 node × 2 tasks, 5 runs of 16 steps) into
/// `dir/job.sh`, and a fake `srun` in `dir/fakebin`; returns both paths.
fn write_job(bin: &Path, data: &Path, dir: &Path) -> (PathBuf, PathBuf) {
    let fake = dir.join("fakebin");
    std::fs::create_dir(&fake).unwrap();
    let srun = fake.join("srun");
    std::fs::write(&srun, FAKE_SRUN).unwrap();
    std::fs::set_permissions(&srun, std::fs::Permissions::from_mode(0o755)).unwrap();
    let script = dir.join("job.sh");
    let o = Command::new(bin)
        .args([
            "slurm",
            "mini_llm",
            "--nodes",
            "1",
            "--tasks-per-node",
            "2",
            "--runs",
            "5",
            "--seed",
            "1000",
            "--set",
            "total_steps=16",
            "--set",
            "warmup_steps=4",
            "--system",
            "fakecluster",
            "--data-dir",
        ])
        .arg(data)
        .arg("--referee")
        .arg(bin)
        .arg("--out")
        .arg(&script)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    (script, fake)
}

/// `referee package` reads the run directory as it is: the package holds
/// the 5 logs.
fn assert_packageable(bin: &Path, run_dir: &Path, pkg: &Path) {
    let p = Command::new(bin)
        .arg("package")
        .arg(run_dir)
        .arg("--out")
        .arg(pkg)
        .output()
        .unwrap();
    // Built (exit 0), or built and then found wanting (exit 1: no run
    // reached the target); 2 would mean it could not read the directory.
    assert!(
        matches!(p.status.code(), Some(0 | 1)),
        "{:?}\n{}\n{}",
        p.status.code(),
        stdout(&p),
        stderr(&p)
    );
    let copied = walk(pkg)
        .into_iter()
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("result_") && n.ends_with(".txt"))
        })
        .count();
    assert_eq!(copied, 5, "the package holds the 5 logs: {}", stdout(&p));
}

#[test]
fn the_job_runs_under_a_fake_srun_and_leaves_a_packageable_run_dir() {
    drop(mpirun()); // fails with the fix when Open MPI is missing
    let bin = referee_mpi_bin();
    let data = data_dir(&["shakespeare"]);
    let tmp = tempfile::tempdir().unwrap();
    let (script, fake) = write_job(&bin, &data, tmp.path());

    // As sbatch would run it: in the submit directory, with the job's
    // variables, our srun first on PATH.
    let submit = tmp.path().join("submit");
    std::fs::create_dir(&submit).unwrap();
    let path = format!(
        "{}:{}",
        fake.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let t = std::time::Instant::now();
    let o = Command::new("bash")
        .arg(&script)
        .current_dir(&submit)
        .env("PATH", path)
        .env("SLURM_JOB_ID", "4242")
        .env("SLURM_JOB_NAME", "referee-mini_llm")
        .env("SLURM_NNODES", "1")
        .env("SLURM_JOB_NUM_NODES", "1")
        .env("SLURM_SUBMIT_DIR", &submit)
        .env("SLURM_CPUS_ON_NODE", "2")
        .output()
        .unwrap();
    eprintln!("job: {:.1} s", t.elapsed().as_secs_f64());
    // No run reaches the target in 16 steps: referee exits 1, and so does
    // the job (set -e).
    assert_eq!(o.status.code(), Some(1), "{}\n{}", stdout(&o), stderr(&o));
    assert!(
        stdout(&o).contains("mini_llm: 0 of 5 runs reached the target"),
        "{}",
        stdout(&o)
    );
    assert!(
        stderr(&o).contains("fake srun: 2 task(s)"),
        "{}",
        stderr(&o)
    );

    let run_dir = submit.join("out/mini_llm-slurm-4242");
    for f in [
        "result_0.txt",
        "result_4.txt",
        "system.json",
        "referee_run.json",
    ] {
        assert!(
            run_dir.join(f).is_file(),
            "{f} missing in {}",
            run_dir.display()
        );
    }
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("referee_run.json")).unwrap())
            .unwrap();
    assert_eq!(record["world_size"], 2);
    assert_eq!(record["system"], "fakecluster");
    assert_eq!(record["runs"].as_array().map(Vec::len), Some(5), "{record}");
    assert!(!run_dir.join("result_5.txt").exists());

    // A second submission into the same directory is refused.
    let again = Command::new("bash")
        .arg(&script)
        .current_dir(&submit)
        .env("SLURM_JOB_ID", "4242")
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(2), "{}", stderr(&again));

    // `referee package` reads the directory as it is.
    assert_packageable(&bin, &run_dir, &tmp.path().join("pkg"));
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}
