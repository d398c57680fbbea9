//! Device selection and the numerical precision the trainers use on it.

use crate::error::DeviceError;
use crate::{Result, err};

/// Where a trainer runs.
#[derive(Debug, Clone)]
pub enum Device {
    /// The host's CPUs (the CPU engine, or the graph on candle's CPU back end).
    Cpu,
    /// A GPU opened through candle's CUDA back end (the `cuda` feature).
    #[cfg(feature = "cuda")]
    Cuda(candle_core::Device),
}

impl Device {
    pub fn is_cpu(&self) -> bool {
        matches!(self, Device::Cpu)
    }

    /// The same device as candle names it (the graph engine's tensors live there).
    #[cfg(feature = "graph")]
    pub(crate) fn candle(&self) -> candle_core::Device {
        match self {
            Device::Cpu => candle_core::Device::Cpu,
            #[cfg(feature = "cuda")]
            Device::Cuda(d) => d.clone(),
        }
    }
}

/// What a device string names: `None` for the CPU, `Some(ordinal)` for a
/// GPU (`"cuda"` without an ordinal is `local_rank`'s GPU: under a launcher
/// such as `mpirun` or `srun`, one GPU per rank on a node).
pub fn parse_device(s: &str, local_rank: usize) -> std::result::Result<Option<usize>, DeviceError> {
    let s = s.trim();
    if s.eq_ignore_ascii_case("cpu") {
        return Ok(None);
    }
    let bad = || DeviceError {
        given: s.to_string(),
    };
    match s.strip_prefix("cuda") {
        Some("") => Ok(Some(local_rank)),
        Some(rest) => rest
            .strip_prefix(':')
            .and_then(|n| n.parse::<usize>().ok())
            .map(Some)
            .ok_or_else(bad),
        None => Err(bad()),
    }
}

/// Parses `"cpu"`, `"cuda"` or `"cuda:N"` ([`parse_device`]) and opens the
/// device.
///
/// Never panics: returns an error when the string is malformed, when the crate
/// was built without the `cuda` feature, or when CUDA is not available.
pub fn device_from_str(s: &str, local_rank: usize) -> Result<Device> {
    open_device(
        parse_device(s, local_rank).map_err(|e| err(e.to_string()))?,
        s.trim(),
    )
}

/// Opens the device [`parse_device`] gave (`None`: the CPU); `name` is the
/// string it came from, for messages.
pub fn open_device(ordinal: Option<usize>, name: &str) -> Result<Device> {
    match ordinal {
        None => Ok(Device::Cpu),
        Some(ordinal) => open_cuda(name, ordinal),
    }
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
    match std::panic::catch_unwind(|| candle_core::Device::new_cuda(ordinal)) {
        Ok(Ok(d)) => Ok(Device::Cuda(d)),
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
        assert!(matches!(device_from_str("cpu", 0), Ok(Device::Cpu)));
        assert!(matches!(device_from_str(" CPU ", 0), Ok(Device::Cpu)));
        for bad in ["gpu", "cuda:x", "cuda0", "cuda:-1"] {
            let e = device_from_str(bad, 0).unwrap_err().to_string();
            assert!(e.contains("bad device"), "{bad}: {e}");
        }
        assert_eq!(parse_device("cuda:3", 0), Ok(Some(3)));
        assert_eq!(parse_device(" cuda ", 2), Ok(Some(2)));
        assert_eq!(parse_device("Cpu", 2), Ok(None));
    }

    #[cfg(not(feature = "cuda"))]
    #[test]
    fn cuda_without_the_feature_is_a_clear_error() {
        for d in ["cuda", "cuda:0", "cuda:7"] {
            let e = device_from_str(d, 0).unwrap_err().to_string();
            assert!(
                e.contains("no GPU support") && e.contains("--features cuda"),
                "{e}"
            );
        }
    }
}
