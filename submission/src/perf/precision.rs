//! The numeric precision of a run's matrix multiplies: stated in a log or a
//! flag, and the key of the peak table ([`super::peaks`]).

use serde::Serialize;

/// Numeric precision of the run's matrix multiplies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    Bf16,
    Fp8,
    Fp16,
    Fp32,
    Nvfp4,
}

impl Precision {
    /// `bf16`, `BF16`, `fp8`, `mxfp8` (an FP8 recipe), `fp16`, `fp32`, `nvfp4`.
    pub fn parse(s: &str) -> Option<Precision> {
        match s.trim().to_ascii_lowercase().as_str() {
            "bf16" | "bfloat16" => Some(Precision::Bf16),
            "fp8" | "mxfp8" | "fp8-cs" | "fp8-ds" | "fp8-mx" => Some(Precision::Fp8),
            "fp16" | "float16" => Some(Precision::Fp16),
            "fp32" | "float32" => Some(Precision::Fp32),
            "nvfp4" | "fp4" => Some(Precision::Nvfp4),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Precision::Bf16 => "BF16",
            Precision::Fp8 => "FP8",
            Precision::Fp16 => "FP16",
            Precision::Fp32 => "FP32",
            Precision::Nvfp4 => "NVFP4",
        }
    }
}
