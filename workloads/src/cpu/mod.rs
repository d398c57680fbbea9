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
//! machine at hand ([`planner`]); where a step's time goes, product by
//! product and pass by pass, is an opt-in profile
//! ([`planner::profile_products`], [`passes`]).

pub mod aligned;
pub mod conv;
pub mod dense;
pub mod kernels;
pub mod llm;
pub mod math;
pub mod norm;
pub mod passes;
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

    use super::Isa;
    use super::dense::{Blocking, Layout, Threads, matmul_blocked};

    /// One case of the dense products' bitwise tests: random operands of
    /// one shape and a random starting output, on a pool of `threads`.
    pub struct ProductCase<'a> {
        pub m: usize,
        pub n: usize,
        pub k: usize,
        pub a: &'a [f32],
        pub b: &'a [f32],
        pub init: &'a [f32],
        pub threads: usize,
        pub pool: &'a rayon::ThreadPool,
        pub a_layout: Layout,
        pub b_layout: Layout,
        pub isa: Isa,
        pub accumulate: bool,
    }

    impl ProductCase<'_> {
        /// The bits of `init (+)= a · b` cut as `blocking` says, on the
        /// case's pool (`Threads::All`) or on the calling thread.
        pub fn run(&self, threads: Threads, blocking: Blocking) -> Vec<u32> {
            let mut out = self.init.to_vec();
            self.pool.install(|| {
                matmul_blocked(
                    self.isa,
                    threads,
                    self.m,
                    self.n,
                    self.k,
                    self.a,
                    self.a_layout,
                    self.b,
                    self.b_layout,
                    &mut out,
                    self.accumulate,
                    blocking,
                )
            });
            bits(&out)
        }
    }

    impl std::fmt::Display for ProductCase<'_> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(
                f,
                "{} {}x{}x{} {:?} {:?} acc {} {} threads",
                self.isa.name(),
                self.m,
                self.n,
                self.k,
                self.a_layout,
                self.b_layout,
                self.accumulate,
                self.threads
            )
        }
    }

    /// Calls `f` with every case of `shapes` (m, n, k) × `threads` × both
    /// layouts of each operand × every kernel set this CPU runs ×
    /// overwriting and accumulating; the operands of each shape drawn from
    /// `Rng::new(seed)` in turn.
    pub fn each_product_case(
        seed: u64,
        shapes: &[(usize, usize, usize)],
        threads: &[usize],
        mut f: impl FnMut(&ProductCase),
    ) {
        let mut r = crate::rng::Rng::new(seed);
        for &(m, n, k) in shapes {
            let a = r.normal_vec(m * k, 1.0);
            let b = r.normal_vec(k * n, 1.0);
            let init = r.normal_vec(m * n, 1.0);
            for &t in threads {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(t)
                    .build()
                    .unwrap();
                for a_layout in [Layout::Normal, Layout::Transposed] {
                    for b_layout in [Layout::Normal, Layout::Transposed] {
                        for isa in Isa::ALL.into_iter().filter(|i| i.available()) {
                            for accumulate in [false, true] {
                                f(&ProductCase {
                                    m,
                                    n,
                                    k,
                                    a: &a,
                                    b: &b,
                                    init: &init,
                                    threads: t,
                                    pool: &pool,
                                    a_layout,
                                    b_layout,
                                    isa,
                                    accumulate,
                                });
                            }
                        }
                    }
                }
            }
        }
    }
}
