//! Device selection.

use candle_core::Device;

use crate::{Result, err};

/// Parses `"cpu"` or `"cuda:N"` (also `"cuda"` = `"cuda:0"`) into a device.
///
/// Never panics: returns an error when the string is malformed, when the crate
/// was built without the `cuda` feature, or when CUDA is not available.
pub fn device_from_str(s: &str) -> Result<Device> {
    let s = s.trim();
    if s.eq_ignore_ascii_case("cpu") {
        return Ok(Device::Cpu);
    }
    let ordinal = match s.strip_prefix("cuda") {
        Some("") => 0,
        Some(rest) => match rest.strip_prefix(':').map(str::parse::<usize>) {
            Some(Ok(n)) => n,
            _ => {
                return Err(err(format!(
                    "bad device {s:?}: expected \"cpu\" or \"cuda:N\""
                )));
            }
        },
        None => {
            return Err(err(format!(
                "bad device {s:?}: expected \"cpu\" or \"cuda:N\""
            )));
        }
    };
    if !cfg!(feature = "cuda") {
        return Err(err(format!(
            "device {s:?} requested but referee-workloads was built without the `cuda` feature"
        )));
    }
    if !candle_core::utils::cuda_is_available() {
        return Err(err(format!(
            "device {s:?} requested but CUDA is not available"
        )));
    }
    // candle may panic inside the driver bindings on a broken install; keep the
    // promise of never panicking.
    match std::panic::catch_unwind(|| Device::new_cuda(ordinal)) {
        Ok(Ok(d)) => Ok(d),
        Ok(Err(e)) => Err(err(format!("cannot open {s:?}: {e}"))),
        Err(_) => Err(err(format!("cannot open {s:?}: the CUDA runtime panicked"))),
    }
}
