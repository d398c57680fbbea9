//! Device selection and the numerical precision the trainers use on it.

use candle_core::Device;

use crate::{Result, err};

/// The local rank of this process under a launcher (Open MPI, MPICH/PMI,
/// Slurm, in that order — the order the harness reads placements in), or 0.
fn local_rank_from_env() -> usize {
    [
        ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"),
        ("PMI_RANK", "MPI_LOCALRANKID"),
        ("SLURM_PROCID", "SLURM_LOCALID"),
    ]
    .iter()
    .find(|(rank, _)| std::env::var_os(rank).is_some())
    .and_then(|(_, local)| std::env::var(local).ok())
    .and_then(|v| v.trim().parse().ok())
    .unwrap_or(0)
}

/// Parses `"cpu"` or `"cuda:N"` into a device. `"cuda"` without an ordinal
/// is the GPU of this process's local rank under a launcher (`mpirun`,
/// `srun`: one GPU per rank), else `cuda:0`.
///
/// Never panics: returns an error when the string is malformed, when the crate
/// was built without the `cuda` feature, or when CUDA is not available.
pub fn device_from_str(s: &str) -> Result<Device> {
    let s = s.trim();
    if s.eq_ignore_ascii_case("cpu") {
        return Ok(Device::Cpu);
    }
    let ordinal = match s.strip_prefix("cuda") {
        Some("") => local_rank_from_env(),
        Some(rest) => match rest.strip_prefix(':').map(str::parse::<usize>) {
            Some(Ok(n)) => n,
            _ => {
                return Err(err(format!(
                    "bad device {s:?}: expected \"cpu\", \"cuda\" or \"cuda:N\""
                )));
            }
        },
        None => {
            return Err(err(format!(
                "bad device {s:?}: expected \"cpu\", \"cuda\" or \"cuda:N\""
            )));
        }
    };
    open_cuda(s, ordinal)
}

#[cfg(not(feature = "cuda"))]
fn open_cuda(s: &str, _ordinal: usize) -> Result<Device> {
    Err(err(format!(
        "device {s:?}: this build has no GPU support (referee-workloads was built without the `cuda` feature); rebuild with `cargo build --release -p referee-harness --features cuda` on a machine with a CUDA toolkit (see the README)"
    )))
}

#[cfg(feature = "cuda")]
fn open_cuda(s: &str, ordinal: usize) -> Result<Device> {
    // candle may panic inside the driver bindings on a broken install; keep the
    // promise of never panicking.
    let available =
        std::panic::catch_unwind(candle_core::utils::cuda_is_available).unwrap_or(false);
    if !available {
        return Err(err(format!(
            "device {s:?}: CUDA is not available (no NVIDIA GPU or driver found)"
        )));
    }
    match std::panic::catch_unwind(|| Device::new_cuda(ordinal)) {
        Ok(Ok(d)) => Ok(d),
        Ok(Err(e)) => Err(err(format!("cannot open {s:?} (cuda:{ordinal}): {e}"))),
        Err(_) => Err(err(format!(
            "cannot open {s:?} (cuda:{ordinal}): the CUDA runtime panicked"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_devices() {
        assert!(matches!(device_from_str("cpu"), Ok(Device::Cpu)));
        assert!(matches!(device_from_str(" CPU "), Ok(Device::Cpu)));
        for bad in ["gpu", "cuda:x", "cuda0", "cuda:-1"] {
            let e = device_from_str(bad).unwrap_err().to_string();
            assert!(e.contains("bad device"), "{bad}: {e}");
        }
    }

    #[cfg(not(feature = "cuda"))]
    #[test]
    fn cuda_without_the_feature_is_a_clear_error() {
        for d in ["cuda", "cuda:0", "cuda:7"] {
            let e = device_from_str(d).unwrap_err().to_string();
            assert!(
                e.contains("no GPU support") && e.contains("--features cuda"),
                "{e}"
            );
        }
    }
}
