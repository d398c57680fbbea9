//! Dense (no sparsity) tensor-core peaks of known GPUs, TFLOP/s per GPU, per
//! precision: the one table behind every MFU referee reports (`referee run`
//! through `harness/src/gpu.rs`, `referee perf`, `referee compare`).
//!
//! The H100, B200, B300, GB200 and GB300 figures are the ones NVIDIA's DGX
//! Cloud benchmarking recipes divide by (NVIDIA/dgxc-benchmarking,
//! `llama3.1/README.md` "Peak theoretical throughput across GPUs and Data
//! Types" and the recipes' MFU tables): H100 989 BF16 / 1,979 FP8; B200
//! 2,250 / 4,500 / 9,000 NVFP4; B300 2,250 / 4,500 / 13,500; GB200 2,450 /
//! 4,900 / 9,800; GB300 2,450 / 4,900 / 14,700. The other parts come from
//! the vendors' data sheets (dense figures; a precision a part has no
//! tensor-core support for is absent).

use super::precision::Precision;
use serde::Serialize;

/// One part's peaks, TFLOP/s per GPU (dense).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Peak {
    /// Matched case-insensitively as a substring of the device name.
    pub name: &'static str,
    pub bf16: f64,
    pub fp8: Option<f64>,
    pub nvfp4: Option<f64>,
}

impl Peak {
    /// The peak for `precision` (FP16 runs at the BF16 rate; FP32 has no
    /// tensor-core figure here).
    pub fn tflops(&self, precision: Precision) -> Option<f64> {
        match precision {
            Precision::Bf16 | Precision::Fp16 => Some(self.bf16),
            Precision::Fp8 => self.fp8,
            Precision::Nvfp4 => self.nvfp4,
            Precision::Fp32 => None,
        }
    }
}

const fn p(name: &'static str, bf16: f64, fp8: Option<f64>, nvfp4: Option<f64>) -> Peak {
    Peak {
        name,
        bf16,
        fp8,
        nvfp4,
    }
}

/// Matched in order against the device name, so specific names come before
/// the names they contain (GB300 before B300, H200 before H20, L40S before
/// L40 and L4, A100 before A10).
pub const PEAKS: &[Peak] = &[
    p("GB300", 2450.0, Some(4900.0), Some(14700.0)),
    p("B300", 2250.0, Some(4500.0), Some(13500.0)),
    p("GB200", 2450.0, Some(4900.0), Some(9800.0)),
    p("B200", 2250.0, Some(4500.0), Some(9000.0)),
    p("B100", 1750.0, Some(3500.0), None),
    p("GH200", 989.0, Some(1979.0), None),
    p("H200", 989.0, Some(1979.0), None),
    p("H100 NVL", 835.0, Some(1671.0), None),
    p("H100 PCIe", 756.0, Some(1513.0), None),
    p("H100", 989.0, Some(1979.0), None), // SXM5 (HBM3)
    p("H800", 989.0, Some(1979.0), None),
    p("H20", 148.0, Some(296.0), None),
    p("A100", 312.0, None, None),
    p("A800", 312.0, None, None),
    p("L40S", 362.0, Some(733.0), None),
    p("L40", 181.0, Some(362.0), None),
    p("L4", 121.0, Some(242.0), None),
    p("A10", 125.0, None, None),
    p("A30", 165.0, None, None),
    p("RTX 6000 Ada", 364.0, Some(728.0), None),
    p("RTX 4090", 165.0, None, None),
];

/// The table's entry for a device name (`NVIDIA H100 80GB HBM3`, `h100`,
/// `DGX-B200` → B200), compared case-insensitively.
pub fn lookup(name: &str) -> Option<&'static Peak> {
    let lower = name.to_ascii_lowercase();
    PEAKS
        .iter()
        .find(|p| lower.contains(&p.name.to_ascii_lowercase()))
}

/// Dense peak of `name` at `precision`, TFLOP/s per GPU.
pub fn peak_tflops(name: &str, precision: Precision) -> Option<f64> {
    lookup(name).and_then(|p| p.tflops(precision))
}

/// Dense BF16 peak (what `referee run` divides by for MFU).
pub fn peak_bf16_tflops(name: &str) -> Option<f64> {
    peak_tflops(name, Precision::Bf16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recipes_figures() {
        use Precision::*;
        assert_eq!(peak_tflops("NVIDIA H100 80GB HBM3", Bf16), Some(989.0));
        assert_eq!(peak_tflops("H100", Fp8), Some(1979.0));
        assert_eq!(peak_tflops("NVIDIA B200", Bf16), Some(2250.0));
        assert_eq!(peak_tflops("b200", Fp8), Some(4500.0));
        assert_eq!(peak_tflops("B200", Nvfp4), Some(9000.0));
        assert_eq!(peak_tflops("NVIDIA GB200", Bf16), Some(2450.0));
        assert_eq!(peak_tflops("GB200", Fp8), Some(4900.0));
        assert_eq!(peak_tflops("GB200", Nvfp4), Some(9800.0));
        assert_eq!(peak_tflops("B300", Bf16), Some(2250.0));
        assert_eq!(peak_tflops("B300", Nvfp4), Some(13500.0));
        assert_eq!(peak_tflops("GB300", Bf16), Some(2450.0));
        assert_eq!(peak_tflops("GB300", Nvfp4), Some(14700.0));
        // FP16 at the BF16 rate; no FP8 on an A100; nothing for FP32.
        assert_eq!(peak_tflops("A100-SXM4-80GB", Fp16), Some(312.0));
        assert_eq!(peak_tflops("A100", Fp8), None);
        assert_eq!(peak_tflops("H100", Fp32), None);
    }

    #[test]
    fn specific_names_first() {
        assert_eq!(lookup("NVIDIA H20").unwrap().name, "H20");
        assert_eq!(lookup("NVIDIA H200").unwrap().name, "H200");
        assert_eq!(lookup("NVIDIA GH200 480GB").unwrap().name, "GH200");
        assert_eq!(lookup("DGX-GB200").unwrap().name, "GB200");
        assert_eq!(lookup("NVIDIA L4").unwrap().name, "L4");
        assert_eq!(lookup("NVIDIA L40S").unwrap().name, "L40S");
        assert_eq!(lookup("NVIDIA A10").unwrap().name, "A10");
        assert_eq!(lookup("NVIDIA H100 PCIe").unwrap().name, "H100 PCIe");
        assert!(lookup("Tesla T4").is_none());
    }
}
