//! Dense row-major matrix products on the `gemm` crate: the LLM's linear
//! layers and attention products, whose operands are whole matrices (the
//! convolutions use the indirect kernel of [`super::kernels`] instead).

/// How an operand is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// As the product uses it (`rows × cols`, row-major).
    Normal,
    /// Transposed (`cols × rows`, row-major).
    Transposed,
}

impl Layout {
    /// (row stride, column stride) of a `rows × cols` operand stored this way.
    fn strides(self, rows: usize, cols: usize) -> (usize, usize) {
        match self {
            Layout::Normal => (cols, 1),
            Layout::Transposed => (1, rows),
        }
    }
}

/// Threads a product may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threads {
    /// The calling thread only (products inside a parallel loop).
    One,
    /// The whole rayon pool.
    All,
}

/// `dst (+)= a · b` with `a`: m×k and `b`: k×n (each stored as its layout
/// says) and `dst`: m×n row-major; overwrites unless `accumulate`.
///
/// # Panics
/// If an operand is shorter than its shape (a caller's bug).
#[allow(clippy::too_many_arguments)]
pub fn matmul(
    threads: Threads,
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    a_layout: Layout,
    b: &[f32],
    b_layout: Layout,
    dst: &mut [f32],
    accumulate: bool,
) {
    if m == 0 || n == 0 {
        return;
    }
    assert!(
        a.len() >= m * k && b.len() >= k * n,
        "matmul: operand too short"
    );
    assert!(dst.len() >= m * n, "matmul: destination too short");
    if k == 0 {
        if !accumulate {
            dst[..m * n].fill(0.0);
        }
        return;
    }
    let (a_rs, a_cs) = a_layout.strides(m, k);
    let (b_rs, b_cs) = b_layout.strides(k, n);
    let pool = rayon::current_num_threads();
    let par = match threads {
        Threads::All if pool > 1 => gemm::Parallelism::Rayon(pool),
        _ => gemm::Parallelism::None,
    };
    // SAFETY: the asserts above bound every index: a (m×k), b (k×n) and
    // dst (m×n) with the strides of their layouts.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            n as isize,
            accumulate,
            a.as_ptr(),
            a_cs as isize,
            a_rs as isize,
            b.as_ptr(),
            b_cs as isize,
            b_rs as isize,
            1.0,
            1.0,
            false,
            false,
            false,
            par,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    #[test]
    fn every_layout_combination_is_the_product() {
        let (m, n, k) = (5, 7, 3);
        let mut r = Rng::new(1);
        let a = r.normal_vec(m * k, 1.0);
        let b = r.normal_vec(k * n, 1.0);
        let at: Vec<f32> = (0..k * m).map(|i| a[(i % m) * k + i / m]).collect();
        let bt: Vec<f32> = (0..n * k).map(|i| b[(i % k) * n + i / k]).collect();
        let mut want = vec![0f32; m * n];
        for i in 0..m {
            for j in 0..n {
                want[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
            }
        }
        for (aa, al) in [(&a, Layout::Normal), (&at, Layout::Transposed)] {
            for (bb, bl) in [(&b, Layout::Normal), (&bt, Layout::Transposed)] {
                for threads in [Threads::One, Threads::All] {
                    let mut got = vec![1f32; m * n];
                    matmul(threads, m, n, k, aa, al, bb, bl, &mut got, false);
                    for (g, w) in got.iter().zip(&want) {
                        assert!((g - w).abs() < 1e-5, "{al:?} {bl:?}: {g} vs {w}");
                    }
                    matmul(threads, m, n, k, aa, al, bb, bl, &mut got, true);
                    for (g, w) in got.iter().zip(&want) {
                        assert!((g - 2.0 * w).abs() < 1e-5, "accumulate {al:?} {bl:?}");
                    }
                }
            }
        }
    }
}
