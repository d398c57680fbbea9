//! The CPU engine: both mini benchmarks with hand-written backward passes,
//! every activation in a buffer kept from step to step, and the
//! convolutions on run-time-selected SIMD kernels.
//!
//! candle's autograd (the [`crate::resnet`] and [`crate::llm`] graphs) runs
//! the same models on any device and is the engine's reference in the tests;
//! on the CPU it pays, per gradient edge, a zero-filled buffer, an addition
//! and two allocations, and its convolutions go through im2col matrices
//! nine times the size of their inputs. The engine avoids both: parameters
//! and gradients are the trainers' flat vectors, and a convolution reads its
//! zero-padded input in place ([`kernels`]). How the dense products are cut
//! into pieces (which never changes a result) is measured per shape on the
//! machine at hand ([`planner`]).

pub mod conv;
pub mod dense;
pub mod kernels;
pub mod llm;
pub mod math;
pub mod norm;
pub mod planner;
pub mod resnet;

pub use kernels::Isa;

/// Shared by the engine's unit tests.
#[cfg(test)]
mod test_util {
    /// Each value's bits: equal vectors mean bitwise-equal results (what the
    /// engine's variants of one kernel set must give).
    pub fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|f| f.to_bits()).collect()
    }
}
