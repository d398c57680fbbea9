//! Where this process sits in a multi-process launch: rank and world size
//! from the launcher's environment (Open MPI's `mpirun`, MPICH/PMI, Slurm's
//! `srun`), or a single process; and how a rank learns that the launcher
//! is stopping it.
//!
//! Launchers stop every rank when one fails: Open MPI's `mpirun` sends the
//! others SIGCONT, then SIGTERM and then SIGKILL, each
//! `odls_base_sigkill_timeout` seconds (default 1) after the previous one
//! — `--mca odls_base_sigkill_timeout 10` gives rank 0 time to end its
//! step and its log; `srun --kill-on-bad-exit=1` sends SIGTERM, then
//! SIGKILL after Slurm's KillWait (30 s by default); so does `scancel`.
//! [`install_termination_handlers`](crate::common::harness_process::install_termination_handlers)
//! turns SIGTERM/SIGINT into a flag the
//! collectives and the run loop poll, so rank 0 ends its log with
//! `run_stop` aborted instead of dying mid-line. Each rank writes
//! `ranks/rank-R.pid` under the run's output directory, which names the
//! failed peer when it ran on the same host and helps operators find ranks.

use std::path::{Path, PathBuf};

/// Rank, world size and local rank of this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    pub rank: usize,
    pub world_size: usize,
    pub local_rank: usize,
    /// Nodes of the launch (from the ranks per node, or Slurm's node count).
    pub nodes: usize,
    /// Which launcher set the variables.
    pub launcher: Launcher,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launcher {
    Single,
    OpenMpi,
    Pmi,
    Slurm,
}

impl Launcher {
    pub fn as_str(self) -> &'static str {
        match self {
            Launcher::Single => "single process",
            Launcher::OpenMpi => "mpirun (Open MPI)",
            Launcher::Pmi => "PMI",
            Launcher::Slurm => "srun (Slurm)",
        }
    }
}

impl Placement {
    pub fn single() -> Self {
        Placement {
            rank: 0,
            world_size: 1,
            local_rank: 0,
            nodes: 1,
            launcher: Launcher::Single,
        }
    }

    pub fn is_leader(&self) -> bool {
        self.rank == 0
    }

    /// Read the placement from environment variables (given as a lookup so
    /// tests need not touch the process environment).
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<Self, PlacementError> {
        let num =
            |name: &'static str| -> Result<Option<usize>, PlacementError> {
                match get(name) {
                    None => Ok(None),
                    Some(v) => v.trim().parse::<usize>().map(Some).map_err(|_| {
                        PlacementError::NotANumber {
                            variable: name,
                            value: v,
                        }
                    }),
                }
            };
        // (launcher, rank, world size, local rank, ranks on this node).
        let sets: [(Launcher, &str, &str, &str, &str); 3] = [
            (
                Launcher::OpenMpi,
                "OMPI_COMM_WORLD_RANK",
                "OMPI_COMM_WORLD_SIZE",
                "OMPI_COMM_WORLD_LOCAL_RANK",
                "OMPI_COMM_WORLD_LOCAL_SIZE",
            ),
            (
                Launcher::Pmi,
                "PMI_RANK",
                "PMI_SIZE",
                "MPI_LOCALRANKID",
                "MPI_LOCALNRANKS",
            ),
            (
                Launcher::Slurm,
                "SLURM_PROCID",
                "SLURM_NTASKS",
                "SLURM_LOCALID",
                "",
            ),
        ];
        for (launcher, r, w, l, ls) in sets {
            if let (Some(rank), Some(world)) = (num(r)?, num(w)?) {
                if world == 0 || rank >= world {
                    return Err(PlacementError::RankOutOfRange {
                        rank_variable: r,
                        rank,
                        world_variable: w,
                        world,
                    });
                }
                let per_node = if ls.is_empty() { None } else { num(ls)? };
                let nodes = match (launcher, per_node) {
                    (Launcher::Slurm, _) => num("SLURM_NNODES")?
                        .or(num("SLURM_JOB_NUM_NODES")?)
                        .unwrap_or(1),
                    (_, Some(n)) if n > 0 => world.div_ceil(n),
                    _ => 1,
                };
                return Ok(Placement {
                    rank,
                    world_size: world,
                    local_rank: num(l)?.unwrap_or(0),
                    nodes: nodes.clamp(1, world),
                    launcher,
                });
            }
        }
        Ok(Placement::single())
    }
}

/// The launcher's variables do not describe a placement.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    #[error("{variable}={value:?} is not a non-negative integer")]
    NotANumber {
        variable: &'static str,
        value: String,
    },
    #[error("{rank_variable}={rank} is not below {world_variable}={world}")]
    RankOutOfRange {
        rank_variable: &'static str,
        rank: usize,
        world_variable: &'static str,
        world: usize,
    },
}

/// `SIGTERM`, `SIGINT`, … (or `signal N`).
pub fn signal_name(sig: i32) -> String {
    match sig {
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGINT => "SIGINT".into(),
        libc::SIGKILL => "SIGKILL".into(),
        libc::SIGHUP => "SIGHUP".into(),
        s => format!("signal {s}"),
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// `OUT/ranks/rank-R.pid`.
pub fn pid_file(out_dir: &Path, rank: usize) -> PathBuf {
    out_dir.join("ranks").join(format!("rank-{rank}.pid"))
}

/// Record this rank's process (`PID HOSTNAME`) under the output directory.
pub fn write_pid_file(out_dir: &Path, rank: usize) -> std::io::Result<()> {
    let p = pid_file(out_dir, rank);
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d)?;
    }
    crate::fsutil::write_atomic(
        &p,
        format!("{} {}\n", std::process::id(), hostname()).as_bytes(),
    )
}

/// Ranks of `0..world` (other than `me`) whose recorded process on this
/// host no longer exists, as `rank R (pid P)`.
pub fn dead_peers(out_dir: &Path, world: usize, me: usize) -> Vec<String> {
    let host = hostname();
    (0..world)
        .filter(|r| *r != me)
        .filter_map(|r| {
            let text = std::fs::read_to_string(pid_file(out_dir, r)).ok()?;
            let mut it = text.split_whitespace();
            let pid: i32 = it.next()?.parse().ok()?;
            let h = it.next().unwrap_or("");
            if h != host {
                return None;
            }
            // SAFETY: signal 0 only checks that the process exists.
            let gone = unsafe { libc::kill(pid, 0) } != 0
                && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
            gone.then(|| format!("rank {r} (pid {pid})"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pid_files_name_dead_peers() {
        let dir = tempfile::tempdir().unwrap();
        write_pid_file(dir.path(), 0).unwrap();
        // A child that has exited and been reaped: its pid is free.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        std::fs::write(pid_file(dir.path(), 1), format!("{pid} {}\n", hostname())).unwrap();
        std::fs::write(pid_file(dir.path(), 2), format!("{pid} elsewhere\n")).unwrap();
        assert_eq!(
            dead_peers(dir.path(), 3, 0),
            vec![format!("rank 1 (pid {pid})")]
        );
        assert!(dead_peers(dir.path(), 3, 1).is_empty(), "rank 0 is alive");
        assert_eq!(signal_name(libc::SIGTERM), "SIGTERM");
    }

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn launchers() {
        assert_eq!(Placement::from_env(env(&[])).unwrap(), Placement::single());
        let p = Placement::from_env(env(&[
            ("OMPI_COMM_WORLD_RANK", "1"),
            ("OMPI_COMM_WORLD_SIZE", "2"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
        ]))
        .unwrap();
        assert_eq!(
            (p.rank, p.world_size, p.local_rank, p.launcher),
            (1, 2, 1, Launcher::OpenMpi)
        );
        let p = Placement::from_env(env(&[
            ("SLURM_PROCID", "3"),
            ("SLURM_NTASKS", "8"),
            ("SLURM_LOCALID", "3"),
        ]))
        .unwrap();
        assert_eq!((p.rank, p.world_size, p.launcher), (3, 8, Launcher::Slurm));
        assert_eq!(p.nodes, 1);
        let p = Placement::from_env(env(&[
            ("OMPI_COMM_WORLD_RANK", "5"),
            ("OMPI_COMM_WORLD_SIZE", "16"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "5"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "8"),
        ]))
        .unwrap();
        assert_eq!((p.local_rank, p.nodes), (5, 2));
        let p = Placement::from_env(env(&[
            ("SLURM_PROCID", "1"),
            ("SLURM_NTASKS", "8"),
            ("SLURM_NNODES", "2"),
        ]))
        .unwrap();
        assert_eq!(p.nodes, 2);
        assert!(!p.is_leader());
        assert!(Placement::from_env(env(&[("PMI_RANK", "2"), ("PMI_SIZE", "2")])).is_err());
        assert!(Placement::from_env(env(&[("SLURM_PROCID", "x"), ("SLURM_NTASKS", "2")])).is_err());
    }
}
