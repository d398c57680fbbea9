//! Where this process sits in a multi-process launch: rank and world size
//! from the launcher's environment (Open MPI's `mpirun`, MPICH/PMI, Slurm's
//! `srun`), or a single process.

/// Rank, world size and local rank of this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    pub rank: usize,
    pub world_size: usize,
    pub local_rank: usize,
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
            launcher: Launcher::Single,
        }
    }

    pub fn is_leader(&self) -> bool {
        self.rank == 0
    }

    /// Read the placement from environment variables (given as a lookup so
    /// tests need not touch the process environment).
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let num = |name: &str| -> Result<Option<usize>, String> {
            match get(name) {
                None => Ok(None),
                Some(v) => v
                    .trim()
                    .parse::<usize>()
                    .map(Some)
                    .map_err(|_| format!("{name}={v:?} is not a non-negative integer")),
            }
        };
        let sets: [(Launcher, &str, &str, &str); 3] = [
            (
                Launcher::OpenMpi,
                "OMPI_COMM_WORLD_RANK",
                "OMPI_COMM_WORLD_SIZE",
                "OMPI_COMM_WORLD_LOCAL_RANK",
            ),
            (Launcher::Pmi, "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"),
            (
                Launcher::Slurm,
                "SLURM_PROCID",
                "SLURM_NTASKS",
                "SLURM_LOCALID",
            ),
        ];
        for (launcher, r, w, l) in sets {
            if let (Some(rank), Some(world)) = (num(r)?, num(w)?) {
                if world == 0 || rank >= world {
                    return Err(format!("{r}={rank} is not below {w}={world}"));
                }
                return Ok(Placement {
                    rank,
                    world_size: world,
                    local_rank: num(l)?.unwrap_or(0),
                    launcher,
                });
            }
        }
        Ok(Placement::single())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(!p.is_leader());
        assert!(Placement::from_env(env(&[("PMI_RANK", "2"), ("PMI_SIZE", "2")])).is_err());
        assert!(Placement::from_env(env(&[("SLURM_PROCID", "x"), ("SLURM_NTASKS", "2")])).is_err());
    }
}
