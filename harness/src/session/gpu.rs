//! GPU discovery through cudarc (the driver API): name, memory, compute
//! capability, device count, and the peak bf16 tensor throughput from the
//! peak table of known parts (`referee_submission::perf::peaks`). It feeds the system description's accelerator
//! fields and the MFU of throughput logs (`RunPlan.peak_flops`).
//!
//! Built in with the cargo feature `cuda` (training on GPUs, candle's CUDA
//! back end) or `gpu` (cudarc only, no candle kernels: compiles without a
//! CUDA toolkit). Without either, or without a driver, every probe returns
//! a clear error; nothing here panics (cudarc panics when it calls into a
//! missing library, so presence is checked first).

use crate::session::error::GpuError;

/// What referee knows of one GPU.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct GpuInfo {
    pub ordinal: usize,
    pub name: String,
    pub memory_bytes: u64,
    /// (major, minor).
    pub compute_capability: (i32, i32),
    /// GPUs visible to this process.
    pub count: usize,
    /// Dense bf16 tensor-core peak, TFLOP/s (None for parts not in the table).
    pub peak_bf16_tflops: Option<f64>,
}

impl GpuInfo {
    /// Peak FLOP/s for MFU (dense bf16).
    pub fn peak_flops(&self) -> Option<f64> {
        self.peak_bf16_tflops.map(|t| t * 1e12)
    }

    /// The system description's view (`accelerators_per_node` = `per_node`).
    pub fn accelerator(&self, per_node: usize) -> crate::system::Accelerator {
        crate::system::Accelerator {
            name: self.name.clone(),
            memory_gib: self.memory_bytes as f64 / (1u64 << 30) as f64,
            count: per_node,
            max_mhz: None,
        }
    }
}

/// Dense bf16 tensor peak of a device name (`NVIDIA H100 80GB HBM3` → 989),
/// TFLOP/s, from the one peak table (`referee_submission::perf::peaks`,
/// which also holds the FP8 and NVFP4 peaks `referee perf` uses).
pub fn peak_bf16_tflops(name: &str) -> Option<f64> {
    referee_submission::perf::peaks::peak_bf16_tflops(name)
}

/// Why GPUs cannot be used here, or None when the driver is present.
pub fn driver_problem() -> Option<String> {
    #[cfg(feature = "gpu")]
    {
        // SAFETY: only tries to open the library.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Some(
                "no NVIDIA driver: libcuda.so could not be loaded (no GPU, or the driver is not installed)"
                    .into(),
            );
        }
        None
    }
    #[cfg(all(feature = "cuda", not(feature = "gpu")))]
    {
        // Linked at build time: the process would not have started without it.
        None
    }
    #[cfg(not(any(feature = "cuda", feature = "gpu")))]
    {
        Some("this referee build has no GPU support (rebuild with `--features cuda`)".into())
    }
}

/// NCCL must be loadable before cudarc touches it.
pub fn require_nccl() -> Result<(), GpuError> {
    if let Some(p) = driver_problem() {
        return Err(GpuError::Unavailable(p));
    }
    #[cfg(feature = "gpu")]
    {
        // SAFETY: only tries to open the library.
        if !unsafe { cudarc::nccl::sys::is_culib_present() } {
            return Err(GpuError::NoNccl);
        }
    }
    Ok(())
}

/// Probe GPU `ordinal`.
pub fn probe(ordinal: usize) -> Result<GpuInfo, GpuError> {
    if let Some(p) = driver_problem() {
        return Err(GpuError::Unavailable(p));
    }
    #[cfg(any(feature = "cuda", feature = "gpu"))]
    {
        match std::panic::catch_unwind(|| probe_driver(ordinal)) {
            Ok(r) => r,
            Err(_) => Err(GpuError::DriverPanicked { ordinal }),
        }
    }
    #[cfg(not(any(feature = "cuda", feature = "gpu")))]
    {
        let _ = ordinal;
        unreachable!("driver_problem() is Some without GPU support")
    }
}

#[cfg(any(feature = "cuda", feature = "gpu"))]
fn probe_driver(ordinal: usize) -> Result<GpuInfo, GpuError> {
    use cudarc::driver::result::{self, device};
    use cudarc::driver::sys::CUdevice_attribute as A;
    let e = |what: &str, err: cudarc::driver::DriverError| GpuError::Call {
        what: format!("cuda:{ordinal}: {what}"),
        detail: format!("{err:?}"),
    };
    result::init().map_err(|x| e("cuInit", x))?;
    let count = device::get_count().map_err(|x| e("cuDeviceGetCount", x))? as usize;
    if ordinal >= count {
        return Err(GpuError::NoSuchGpu {
            ordinal,
            count,
            visible: std::env::var("CUDA_VISIBLE_DEVICES").unwrap_or_else(|_| "unset".into()),
        });
    }
    let dev = device::get(ordinal as i32).map_err(|x| e("cuDeviceGet", x))?;
    let name = device::get_name(dev).map_err(|x| e("cuDeviceGetName", x))?;
    // SAFETY: a valid device handle from cuDeviceGet.
    let memory_bytes =
        unsafe { device::total_mem(dev) }.map_err(|x| e("cuDeviceTotalMem", x))? as u64;
    // SAFETY: as above.
    let attr = |a: A| unsafe { device::get_attribute(dev, a) };
    let major = attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
        .map_err(|x| e("compute capability", x))?;
    let minor = attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
        .map_err(|x| e("compute capability", x))?;
    Ok(GpuInfo {
        ordinal,
        peak_bf16_tflops: peak_bf16_tflops(&name),
        name,
        memory_bytes,
        compute_capability: (major, minor),
        count,
    })
}

#[cfg(all(feature = "cuda", feature = "gpu"))]
compile_error!(
    "the features `cuda` and `gpu` exclude each other: `gpu` loads CUDA at run time, candle's `cuda` links it at build time; use one"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peak_table() {
        assert_eq!(peak_bf16_tflops("NVIDIA H100 80GB HBM3"), Some(989.0));
        assert_eq!(peak_bf16_tflops("NVIDIA H100 PCIe"), Some(756.0));
        assert_eq!(peak_bf16_tflops("NVIDIA H200"), Some(989.0));
        assert_eq!(peak_bf16_tflops("NVIDIA GH200 480GB"), Some(989.0));
        assert_eq!(peak_bf16_tflops("NVIDIA B200"), Some(2250.0));
        // The DGX Cloud recipes' GB200 figure (the table in referee_submission::perf::peaks).
        assert_eq!(peak_bf16_tflops("NVIDIA GB200"), Some(2450.0));
        assert_eq!(peak_bf16_tflops("NVIDIA A100-SXM4-80GB"), Some(312.0));
        assert_eq!(peak_bf16_tflops("NVIDIA L40S"), Some(362.0));
        assert_eq!(peak_bf16_tflops("NVIDIA L4"), Some(121.0));
        assert_eq!(peak_bf16_tflops("NVIDIA A10"), Some(125.0));
        assert_eq!(peak_bf16_tflops("Tesla T4"), None);
        let g = GpuInfo {
            ordinal: 0,
            name: "NVIDIA H200".into(),
            memory_bytes: 141 << 30,
            compute_capability: (9, 0),
            count: 8,
            peak_bf16_tflops: Some(989.0),
        };
        assert_eq!(g.peak_flops(), Some(989e12));
        let a = g.accelerator(8);
        assert_eq!((a.count, a.memory_gib.round()), (8, 141.0));
    }

    #[test]
    fn no_gpu_is_an_error_not_a_panic() {
        if driver_problem().is_some() {
            let e = probe(0).unwrap_err();
            assert!(!e.to_string().is_empty());
            assert!(require_nccl().is_err());
        }
    }
}
