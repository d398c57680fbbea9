//! Dense row-major matrix products (the LLM's linear layers and attention)
//! on the indirect kernel of [`super::kernels`].

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::kernels::{
    AMat, BMat, Isa, Offsets, PACK_A_MIN_STRIDE, PackedB, Plan, grow, igemm_planned, packs_b,
    register_tile_rows,
};

/// How an operand is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    /// As the product uses it (`rows × cols`, row-major).
    Normal,
    /// Transposed (`cols × rows`, row-major).
    Transposed,
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
/// says) and `dst`: m×n row-major; overwrites unless `accumulate`. Runs the
/// indirect kernel ([`igemm`]) on row blocks of `dst`: a transposed `a` is
/// just other offsets, a transposed `b` is copied once.
///
/// # Panics
/// If an operand is shorter than its shape (a caller's bug).
#[allow(clippy::too_many_arguments)]
pub fn matmul(
    isa: Isa,
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
    let blocking = Blocking::default_for(a_layout);
    matmul_blocked(
        isa, threads, m, n, k, a, a_layout, b, b_layout, dst, accumulate, blocking,
    );
}

/// How [`matmul_blocked`] cuts a product into pieces. No choice changes
/// which products are summed or in which order (each output value is one
/// chain of fused multiply-adds over `k` in order, whatever the blocks):
/// every blocking gives bitwise the same result, so the measured planner
/// ([`super::planner`]) may pick any of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Blocking {
    /// Longest reduction of one pass over the output (A's and B's panels of
    /// this many rows of K stay in the caches).
    pub k_block: usize,
    /// Each register tile's rows meet every column block before the next
    /// rows (see [`Plan::rows_outer`]).
    pub rows_outer: bool,
    /// Pack a transposed A a row chunk at a time (see [`Plan::pack_a`]).
    pub pack_a: bool,
    /// Row blocks per thread on the pool (at most; fewer where the product
    /// has fewer than `MIN_BLOCK_ROWS` (128) rows per block).
    pub blocks_per_thread: usize,
    /// Rows of a register tile (see [`Plan::tile_rows`]; 0, and what a
    /// blocking written before this knob existed reads as: the kernel
    /// set's tallest).
    #[serde(default)]
    pub tile_rows: usize,
    /// Pack B where its rows lie far apart (see [`Plan::keep_b_in_place`]);
    /// true, and what a blocking written before this knob existed reads
    /// as, is the hand-chosen rule.
    #[serde(default = "yes")]
    pub pack_b: bool,
    /// On the pool, give each thread a block of whole columns (every row)
    /// rather than of whole rows (every column): a weight gradient of few
    /// rows and a long reduction (`xᵀ·dy`, 128 rows, K = 2,048 tokens)
    /// then streams each column of B through one thread only, where a row
    /// split streams all of B (several MiB) through every thread. False,
    /// and what a blocking written before this knob existed reads as: rows.
    #[serde(default)]
    pub split_columns: bool,
    /// Run the product on the AVX2 kernels (8 lanes) though the kernel set
    /// is AVX-512 (16): where the machine's 512-bit units are no faster, or
    /// slower (a core that runs AVX-512 at a lower clock, units 256 bits
    /// wide), at this shape. Bitwise the same product, since each output
    /// value is one chain of fused multiply-adds over `k` in order on
    /// either set; taken only where both sets leave the same columns to the
    /// portable tail ([`Blocking::kernels`]). False, and what a blocking
    /// written before this knob existed reads as: the set's own kernels.
    #[serde(default)]
    pub narrow: bool,
}

fn yes() -> bool {
    true
}

impl Blocking {
    /// The blocking chosen by hand, timing the mini LLM's products (what a
    /// product gets unless the planner measured better on the machine at
    /// hand).
    pub fn default_for(a_layout: Layout) -> Self {
        Self {
            k_block: match a_layout {
                Layout::Transposed => K_BLOCK_TRANSPOSED_A,
                Layout::Normal => K_BLOCK,
            },
            rows_outer: a_layout == Layout::Normal,
            pack_a: true,
            blocks_per_thread: 4,
            tile_rows: 0,
            pack_b: true,
            split_columns: false,
            narrow: false,
        }
    }

    /// The kernels a product of `n` columns runs on with the kernel set
    /// `isa`: the AVX2 ones where the blocking asks for them ([`narrow`]),
    /// the set is AVX-512, and both sets give the same columns to their
    /// SIMD kernels (`n mod 16 < 8`; the portable tail sums with separate
    /// multiplies and adds, so a column there on one set and in a vector
    /// on the other would get other bits); else `isa`.
    ///
    /// [`narrow`]: Blocking::narrow
    pub fn kernels(self, isa: Isa, n: usize) -> Isa {
        if self.narrow
            && isa == Isa::Avx512
            && Isa::Avx2.available()
            && isa.simd_cols(n) == Isa::Avx2.simd_cols(n)
        {
            Isa::Avx2
        } else {
            isa
        }
    }

    /// Whether `threads` threads split a product of `n` columns by columns:
    /// where the blocking asks and there are columns for two blocks or more.
    fn splits_columns(self, n: usize, threads: usize) -> bool {
        self.split_columns && column_blocks(n, threads) > 1
    }

    /// What this blocking decides at a product of `m` rows, `n` columns,
    /// reduction `k` and A stored as `a_layout`, on `threads` threads with
    /// the kernel set `isa`. Two blockings with the same cut run the same
    /// pieces on the same kernels.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn cut(
        self,
        isa: Isa,
        m: usize,
        n: usize,
        k: usize,
        a_layout: Layout,
        threads: usize,
    ) -> Cut {
        let isa = self.kernels(isa, n);
        let kb = reduction_blocks(k, self.k_block).1;
        let by_columns = self.splits_columns(n, threads);
        let a_row_stride = match a_layout {
            Layout::Normal => k,
            Layout::Transposed => 1,
        };
        let cols = if by_columns {
            column_width(n, threads)
        } else {
            n
        };
        let tallest = register_tile_rows(isa, cols, a_row_stride, kb);
        let tile = match self.tile_rows {
            0 => tallest,
            t => t.min(tallest),
        };
        Cut {
            kernels: isa,
            k_block: kb,
            rows_outer: self.rows_outer,
            // Only a transposed A with columns far apart is ever packed.
            pack_a: self.pack_a && a_layout == Layout::Transposed && m >= PACK_A_MIN_STRIDE,
            row_blocks: if by_columns {
                0
            } else {
                row_blocks(m, threads, self.blocks_per_thread)
            },
            tile_rows: tile,
            // B (as the kernels read it: `k × n`, rows `n` apart) is packed
            // only with rows far apart and enough rows of A to reuse it
            // (split by columns, each thread packs its own columns).
            pack_b: self.pack_b && packs_b(m, n),
        }
    }
}

/// What a [`Blocking`] decides at one product ([`Blocking::cut`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cut {
    /// The kernels the product runs on.
    pub kernels: Isa,
    /// The reduction block's length.
    pub k_block: usize,
    pub rows_outer: bool,
    /// Whether A is packed.
    pub pack_a: bool,
    /// Row blocks on the pool (0 where the threads split the columns).
    pub row_blocks: usize,
    /// The register tile's rows.
    pub tile_rows: usize,
    /// Whether B is packed.
    pub pack_b: bool,
}

/// The number and length of the reduction blocks of a reduction over `k`
/// in blocks of at most `k_block` (equal lengths, the last shorter).
fn reduction_blocks(k: usize, k_block: usize) -> (usize, usize) {
    let blocks = k.div_ceil(k_block).max(1);
    (blocks, k.div_ceil(blocks))
}

/// Row blocks of a product of `m` rows on `threads` threads: up to
/// `per_thread` for each thread, of MIN_BLOCK_ROWS rows or more where the
/// product has them, as many for every thread.
fn row_blocks(m: usize, threads: usize, per_thread: usize) -> usize {
    let t = threads.max(1);
    (m / MIN_BLOCK_ROWS)
        .clamp(1, per_thread * t)
        .next_multiple_of(t)
}

/// Columns of each thread's block where `threads` threads split `n`
/// columns: whole AVX-512 vectors (16 columns, so that every block's
/// columns start a vector on any kernel set), as even as they allow.
fn column_width(n: usize, threads: usize) -> usize {
    n.div_ceil(threads.max(1)).next_multiple_of(16)
}

/// How many column blocks [`column_width`] makes (1: the split would give
/// one thread everything).
fn column_blocks(n: usize, threads: usize) -> usize {
    n.div_ceil(column_width(n, threads).max(1))
}

/// [`matmul`] cut into pieces as `blocking` says (bitwise the same result
/// for every blocking).
///
/// # Panics
/// If an operand is shorter than its shape, or `blocking` has a zero block.
#[allow(clippy::too_many_arguments)]
pub fn matmul_blocked(
    isa: Isa,
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
    blocking: Blocking,
) {
    assert!(
        blocking.k_block > 0 && blocking.blocks_per_thread > 0,
        "matmul: empty blocks"
    );
    if m == 0 || n == 0 {
        return;
    }
    assert!(
        a.len() >= m * k && b.len() >= k * n,
        "matmul: operand too short"
    );
    assert!(dst.len() >= m * n, "matmul: destination too short");
    let isa = blocking.kernels(isa, n);
    let bt;
    let b = match b_layout {
        Layout::Normal => b,
        Layout::Transposed => {
            bt = transpose(b, n, k);
            &bt
        }
    };
    // A long reduction goes in blocks of `k_block`, each adding to the
    // last, so that the kernel's panels of A and B stay in the caches.
    let (kblocks, kb) = reduction_blocks(k, blocking.k_block);
    let (row_stride, k_stride) = match a_layout {
        Layout::Normal => (k, 1),
        Layout::Transposed => (1, m),
    };
    let koff = Offsets::dense(kb, k_stride);
    let bkoff = Offsets::dense(kb, n);
    let (koff_last, bkoff_last) = {
        let last = k - kb * (kblocks - 1);
        (Offsets::dense(last, k_stride), Offsets::dense(last, n))
    };
    let b_block = |j: usize| BMat {
        data: b,
        base: j * kb * n,
        koff: if j + 1 == kblocks {
            &bkoff_last
        } else {
            &bkoff
        },
    };
    let pool = rayon::current_num_threads();
    let by_columns = threads == Threads::All && blocking.splits_columns(n, pool);
    // On the pool, B (each reduction block of it, rows `n` apart) is packed
    // once here and shared by every row block, rather than packed by each
    // (split by columns, each thread packs its own columns).
    let share_b = threads == Threads::All && !by_columns && blocking.pack_b && packs_b(m, n);
    let mut packed = if share_b { PACKED.take() } else { Vec::new() };
    let shared = share_b && {
        // Never shortened: a panel dropped here would be allocated and
        // zeroed again by the next product with more reduction blocks, a
        // memset the step would wait on.
        grow(&mut packed, kblocks);
        // Each reduction block's panel on its own thread: a weight
        // gradient's B is the activations' gradient (2,048 × 768 at the
        // mini LLM's b16), several MiB to copy.
        packed[..kblocks]
            .par_iter_mut()
            .enumerate()
            .all(|(j, p)| p.pack(isa, &b_block(j), n))
    };
    // Rows `r0..r0 + rows` and columns `c0..c0 + cols` of the product into
    // `out` (rows `out_stride` apart), every reduction block in order.
    let block = |r0: usize, rows: usize, c0: usize, cols: usize, out: &mut [f32], out_stride| {
        for j in 0..kblocks {
            let ko = if j + 1 == kblocks { &koff_last } else { &koff };
            let am = AMat {
                data: a,
                base: r0 * row_stride + j * kb * k_stride,
                row_stride,
                koff: ko,
            };
            let bm = BMat {
                base: b_block(j).base + c0,
                ..b_block(j)
            };
            let plan = Plan {
                packed_b: packed.get(j).filter(|_| shared),
                pack_a: blocking.pack_a,
                rows_outer: blocking.rows_outer,
                tile_rows: blocking.tile_rows,
                keep_b_in_place: !blocking.pack_b,
            };
            igemm_planned(
                isa,
                rows,
                cols,
                am,
                bm,
                out,
                out_stride,
                accumulate || j > 0,
                plan,
            );
        }
    };
    let dst = &mut dst[..m * n];
    match threads {
        Threads::One => block(0, m, 0, n, dst, n),
        Threads::All if by_columns => {
            // Blocks of whole columns, each computed into a scratch block of
            // its own (`m × w`, then copied into place: a column block of
            // `dst` is not a slice), which starts as `dst`'s values where
            // the product accumulates. The copies are `m·n` values against
            // the product's `m·n·k` multiply-adds.
            let w = column_width(n, pool);
            let mut scratch = SCRATCH.take();
            grow(&mut scratch, m * n);
            // Block `i` holds columns `i·w..`, `m` rows of `cols` values.
            scratch[..m * n]
                .par_chunks_mut(m * w)
                .enumerate()
                .for_each(|(i, part)| {
                    let (c0, cols) = (i * w, part.len() / m);
                    if accumulate {
                        for (o, d) in part.chunks_exact_mut(cols).zip(dst.chunks_exact(n)) {
                            o.copy_from_slice(&d[c0..c0 + cols]);
                        }
                    }
                    block(0, m, c0, cols, part, cols);
                });
            // Copied into place on the pool too, in blocks of whole rows.
            let scratch_ref = &scratch[..m * n];
            let rows = m.div_ceil(pool);
            dst.par_chunks_mut(rows * n).enumerate().for_each(|(r, d)| {
                for (i, part) in scratch_ref.chunks(m * w).enumerate() {
                    let (c0, cols) = (i * w, part.len() / m);
                    let from = &part[r * rows * cols..][..d.len() / n * cols];
                    for (d, o) in d.chunks_exact_mut(n).zip(from.chunks_exact(cols)) {
                        d[c0..c0 + cols].copy_from_slice(o);
                    }
                }
            });
            SCRATCH.set(scratch);
        }
        Threads::All => {
            // Blocks of whole rows.
            let blocks = row_blocks(m, pool, blocking.blocks_per_thread);
            let per = m.div_ceil(blocks);
            dst.par_chunks_mut(per * n)
                .enumerate()
                .for_each(|(i, out)| block(i * per, out.len() / n, 0, n, out, n));
        }
    }
    if !packed.is_empty() {
        PACKED.set(packed);
    }
}

thread_local! {
    /// The calling thread's packed B of its last product, reused (taken
    /// while a product runs, so a nested product packs its own).
    static PACKED: std::cell::Cell<Vec<PackedB>> = const { std::cell::Cell::new(Vec::new()) };
    /// The calling thread's column blocks of its last product split by
    /// columns, reused (taken while a product runs).
    static SCRATCH: std::cell::Cell<Vec<f32>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Rows per block of the output the split aims for (fewer where the product
/// has too few rows to give every thread a block of this size).
const MIN_BLOCK_ROWS: usize = 128;

/// Longest reduction of one pass over the output.
const K_BLOCK: usize = 512;

/// [`K_BLOCK`] where A is transposed (a weight gradient `xᵀ·dy`, K the
/// tokens): each step of the reduction reads a new cache line of A (its
/// columns lie a row of `x` apart), and 512 such lines with B's 512-row
/// panel overflow the L1 cache. The mini LLM's weight gradients run
/// faster at 256 than at 512 (`gemm_probe --one`, both block lengths
/// alternating in one process), 128 no better; products with A in place
/// do better at 512.
const K_BLOCK_TRANSPOSED_A: usize = 256;

/// The `cols × rows` transpose of a row-major `rows × cols` matrix.
pub fn transpose(v: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut t = vec![0f32; rows * cols];
    transpose_into(v, rows, cols, cols, &mut t, rows);
    t
}

/// `dst[c·dst_stride + r] = src[r·src_stride + c]` for `r < rows`,
/// `c < cols`: in 8 × 8 blocks, each read as 8 rows of 8 and written as
/// 8 columns of 8 (a head's `[T, Dh]` to `[Dh, T]`, a
/// weight to its transpose), with AVX2 shuffles where the CPU has them
/// (only values move: the result is the same whatever the instructions).
#[inline(always)]
pub fn transpose_into(
    src: &[f32],
    rows: usize,
    cols: usize,
    src_stride: usize,
    dst: &mut [f32],
    dst_stride: usize,
) {
    transpose_blocks(
        src,
        rows,
        cols,
        src_stride,
        dst,
        dst_stride,
        Isa::Avx2.available(),
    );
}

/// [`transpose_into`] on the rayon pool, in blocks of 64 of `src`'s columns
/// (64 rows of `dst`) per task: the tied head's 2,048 × 128 embedding, which
/// one thread would copy while the others wait. A layer's weights,
/// 128 × 768 at most, gain too little on the pool to take it, with the
/// step already running inside the pool (docs/bench-history.jsonl).
pub fn transpose_into_par(
    src: &[f32],
    rows: usize,
    cols: usize,
    src_stride: usize,
    dst: &mut [f32],
    dst_stride: usize,
) {
    const COLS: usize = 64;
    let simd = Isa::Avx2.available();
    let len = (cols * dst_stride).min(dst.len());
    let dst = &mut dst[..len];
    dst.par_chunks_mut(COLS * dst_stride)
        .enumerate()
        .for_each(|(i, d)| {
            let c0 = i * COLS;
            let n = COLS.min(cols - c0);
            transpose_blocks(&src[c0..], rows, n, src_stride, d, dst_stride, simd);
        });
}

/// [`transpose_into`], whole 8 × 8 blocks by AVX2 shuffles if `simd` (the
/// caller checked that the CPU has AVX2).
#[inline(always)]
fn transpose_blocks(
    src: &[f32],
    rows: usize,
    cols: usize,
    src_stride: usize,
    dst: &mut [f32],
    dst_stride: usize,
    simd: bool,
) {
    // (Off x86-64 `simd` is never true: `Isa::Avx2.available()` is false.)
    let _ = simd;
    const B: usize = 8;
    for r0 in (0..rows).step_by(B) {
        for c0 in (0..cols).step_by(B) {
            if r0 + B <= rows && c0 + B <= cols {
                let s = r0 * src_stride + c0;
                let d = c0 * dst_stride + r0;
                #[cfg(target_arch = "x86_64")]
                if simd {
                    // The block's last row and column lie within both
                    // slices (these index checks panic as the loops below
                    // would).
                    let _ = &src[s..(r0 + B - 1) * src_stride + c0 + B];
                    let _ = &dst[d..(c0 + B - 1) * dst_stride + r0 + B];
                    // SAFETY: the CPU has AVX2 (the caller's `simd`); the
                    // 8 rows of 8 read and written were bounds-checked
                    // just above.
                    unsafe {
                        transpose8x8_avx2(
                            src.as_ptr().add(s),
                            src_stride,
                            dst.as_mut_ptr().add(d),
                            dst_stride,
                        )
                    };
                    continue;
                }
                let mut blk = [[0f32; B]; B];
                for (i, row) in blk.iter_mut().enumerate() {
                    let s = s + i * src_stride;
                    row.copy_from_slice(&src[s..s + B]);
                }
                for j in 0..B {
                    let d = d + j * dst_stride;
                    for (o, row) in dst[d..d + B].iter_mut().zip(&blk) {
                        *o = row[j];
                    }
                }
            } else {
                for r in r0..(r0 + B).min(rows) {
                    for c in c0..(c0 + B).min(cols) {
                        dst[c * dst_stride + r] = src[r * src_stride + c];
                    }
                }
            }
        }
    }
}

/// One 8 × 8 block: rows `src + i·ss` (8 values each) to columns, written
/// as rows `dst + j·ds`. Interleaves pairs of rows, then pairs of pairs,
/// then swaps 128-bit halves.
///
/// # Safety
/// The CPU has AVX2; the 8 rows of 8 at `src` and at `dst` are in bounds.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn transpose8x8_avx2(src: *const f32, ss: usize, dst: *mut f32, ds: usize) {
    use std::arch::x86_64::*;
    // SAFETY: in bounds, as the caller guarantees.
    unsafe {
        let r: [__m256; 8] = std::array::from_fn(|i| _mm256_loadu_ps(src.add(i * ss)));
        // t[2p] = (r[2p][0], r[2p+1][0], r[2p][1], r[2p+1][1] | same for 4, 5),
        // t[2p+1] the same for columns 2, 3 | 6, 7.
        let t: [__m256; 8] = std::array::from_fn(|i| {
            let (a, b) = (r[i & !1], r[i | 1]);
            if i % 2 == 0 {
                _mm256_unpacklo_ps(a, b)
            } else {
                _mm256_unpackhi_ps(a, b)
            }
        });
        // u[4q + c] = column c of rows 4q..4q+4 | column c + 4 of the same rows.
        let u: [__m256; 8] = std::array::from_fn(|i| {
            let (q, c) = (i / 4, i % 4);
            let (a, b) = (t[4 * q + c / 2], t[4 * q + 2 + c / 2]);
            if c % 2 == 0 {
                _mm256_shuffle_ps::<0x44>(a, b)
            } else {
                _mm256_shuffle_ps::<0xEE>(a, b)
            }
        });
        for c in 0..4 {
            _mm256_storeu_ps(
                dst.add(c * ds),
                _mm256_permute2f128_ps::<0x20>(u[c], u[4 + c]),
            );
            _mm256_storeu_ps(
                dst.add((c + 4) * ds),
                _mm256_permute2f128_ps::<0x31>(u[c], u[4 + c]),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::test_util::each_product_case;
    use crate::rng::Rng;

    #[test]
    fn transpose_into_moves_every_value_once() {
        // Whole 8 × 8 blocks and both tails; strides wider than the rows.
        for &(rows, cols) in &[(16, 8), (13, 11), (8, 21), (5, 3), (24, 40), (19, 150)] {
            let (ss, ds) = (cols + 3, rows + 2);
            let src: Vec<f32> = (0..rows * ss).map(|i| i as f32).collect();
            // As built, and with the AVX2 blocks where this CPU has them.
            for simd in [false, Isa::Avx2.available()] {
                let mut dst = vec![-1f32; cols * ds];
                transpose_blocks(&src, rows, cols, ss, &mut dst, ds, simd);
                for r in 0..rows {
                    for c in 0..cols {
                        let got = dst[c * ds + r];
                        assert_eq!(got, src[r * ss + c], "{rows}x{cols} ({r}, {c}) {simd}");
                    }
                }
                // Nothing outside the transpose is written.
                for (i, &v) in dst.iter().enumerate() {
                    let (c, r) = (i / ds, i % ds);
                    if r >= rows || c >= cols {
                        assert_eq!(v, -1.0, "{rows}x{cols} wrote ({c}, {r}) {simd}");
                    }
                }
            }
            let mut dst = vec![-1f32; cols * ds];
            transpose_into(&src, rows, cols, ss, &mut dst, ds);
            let mut par = vec![-1f32; cols * ds];
            transpose_into_par(&src, rows, cols, ss, &mut par, ds);
            assert!((0..rows).all(|r| (0..cols).all(|c| dst[c * ds + r] == src[r * ss + c])));
            assert_eq!(par, dst, "{rows}x{cols} on the pool");
        }
    }

    #[test]
    fn transpose_round_trips() {
        let v: Vec<f32> = (0..35 * 40).map(|i| i as f32).collect();
        let t = transpose(&v, 35, 40);
        assert_eq!(t[3 * 35 + 2], v[2 * 40 + 3]);
        assert_eq!(transpose(&t, 40, 35), v);
    }

    #[test]
    fn every_layout_combination_is_the_product() {
        // 37 rows: several row blocks on the pool; 19 columns: a SIMD tail;
        // k = 1100: three reduction blocks.
        for &(m, n, k) in &[(37, 19, 6), (21, 16, 1100)] {
            products_agree(m, n, k);
        }
    }

    /// On the pool, a product is split into row blocks, with B packed once
    /// for all of them, or into column blocks, each thread packing its own:
    /// every sum is the calling thread's alone, bit for bit, for every
    /// layout and kernel set, overwriting and accumulating, with 2 and 3
    /// threads (column blocks of 16 columns and more, the last narrower:
    /// 517 on 3 threads is 176 + 176 + 165, a SIMD tail in the last).
    #[test]
    fn splitting_on_the_pool_gives_bitwise_the_single_thread_product() {
        let shapes = [(200, 130, 1100), (12, 200, 40), (130, 70, 20), (3, 517, 9)];
        each_product_case(5, &shapes, &[2, 3], |c| {
            let rows = Blocking::default_for(c.a_layout);
            let columns = Blocking {
                split_columns: true,
                ..rows
            };
            let want = c.run(Threads::One, rows);
            assert!(c.run(Threads::All, rows) == want, "{c}");
            assert!(c.run(Threads::All, columns) == want, "{c} by columns");
        });
    }

    /// Under an AVX-512 kernel set, a blocking that asks for the AVX2
    /// kernels gets them only where both sets give the same columns to
    /// their vectors (`n mod 16 < 8`), and the product is then bitwise the
    /// set's own: widths with no tail, a tail of 1–7 columns, one of 8–15
    /// (the set's own kernels, since AVX2 would take 8 of them into a
    /// vector), on 1 and 2 threads, split by rows and by columns.
    #[test]
    fn the_avx2_kernels_under_an_avx512_set_give_bitwise_its_product() {
        let wide = Blocking::default_for(Layout::Normal);
        let narrow = Blocking {
            narrow: true,
            ..wide
        };
        assert_eq!(narrow.kernels(Isa::Avx2, 32), Isa::Avx2);
        assert_eq!(narrow.kernels(Isa::Portable, 32), Isa::Portable);
        assert_eq!(wide.kernels(Isa::Avx512, 32), Isa::Avx512);
        if !(Isa::Avx512.available() && Isa::Avx2.available()) {
            eprintln!("skipped: this CPU has no AVX-512 kernel set");
            return;
        }
        assert_eq!(narrow.kernels(Isa::Avx512, 32), Isa::Avx2);
        assert_eq!(narrow.kernels(Isa::Avx512, 37), Isa::Avx2, "tail of 5");
        assert_eq!(narrow.kernels(Isa::Avx512, 40), Isa::Avx512, "tail of 8");
        assert_eq!(narrow.kernels(Isa::Avx512, 31), Isa::Avx512, "tail of 15");
        let shapes = [(70, 32, 600), (9, 37, 40), (40, 40, 33), (20, 95, 7)];
        each_product_case(11, &shapes, &[1, 2], |c| {
            if c.isa != Isa::Avx512 {
                return;
            }
            for base in [
                wide,
                Blocking {
                    split_columns: true,
                    ..wide
                },
            ] {
                let want = c.run(Threads::All, base);
                let got = c.run(
                    Threads::All,
                    Blocking {
                        narrow: true,
                        ..base
                    },
                );
                assert!(got == want, "{c}: {base:?}");
            }
        });
    }

    /// A column split gives each thread whole vectors of columns, as many
    /// blocks as threads where the columns allow, and none where one block
    /// would hold every column (then the rows are split as before: the cut
    /// says so).
    #[test]
    fn columns_are_split_into_whole_vectors_per_thread() {
        assert_eq!((column_width(768, 2), column_blocks(768, 2)), (384, 2));
        assert_eq!((column_width(517, 3), column_blocks(517, 3)), (176, 3));
        assert_eq!((column_width(40, 2), column_blocks(40, 2)), (32, 2));
        assert_eq!(column_blocks(16, 2), 1);
        assert_eq!(column_blocks(768, 1), 1);
        let rows = Blocking::default_for(Layout::Transposed);
        let columns = Blocking {
            split_columns: true,
            ..rows
        };
        let cut = |b: Blocking, n: usize| b.cut(Isa::Avx2, 128, n, 2048, Layout::Transposed, 2);
        assert_eq!(cut(columns, 768).row_blocks, 0, "split by columns");
        assert_eq!(cut(rows, 768).row_blocks, 2, "split by rows");
        assert_eq!(cut(columns, 16), cut(rows, 16), "too narrow to split");
    }

    fn products_agree(m: usize, n: usize, k: usize) {
        let mut r = Rng::new(1);
        let a = r.normal_vec(m * k, 1.0);
        let b = r.normal_vec(k * n, 1.0);
        let at: Vec<f32> = (0..k * m).map(|i| a[(i % m) * k + i / m]).collect();
        let bt: Vec<f32> = (0..n * k).map(|i| b[(i % k) * n + i / k]).collect();
        let mut want = vec![0f32; m * n];
        for i in 0..m {
            for j in 0..n {
                want[i * n + j] = (0..k)
                    .map(|p| f64::from(a[i * k + p]) * f64::from(b[p * n + j]))
                    .sum::<f64>() as f32;
            }
        }
        let tol = 1e-5 * (k as f32).sqrt() * 4.0;
        for (aa, al) in [(&a, Layout::Normal), (&at, Layout::Transposed)] {
            for (bb, bl) in [(&b, Layout::Normal), (&bt, Layout::Transposed)] {
                for threads in [Threads::One, Threads::All] {
                    for isa in Isa::ALL.into_iter().filter(|i| i.available()) {
                        let mut got = vec![1f32; m * n];
                        matmul(isa, threads, m, n, k, aa, al, bb, bl, &mut got, false);
                        for (g, w) in got.iter().zip(&want) {
                            assert!((g - w).abs() < tol, "k{k} {al:?} {bl:?}: {g} vs {w}");
                        }
                        matmul(isa, threads, m, n, k, aa, al, bb, bl, &mut got, true);
                        for (g, w) in got.iter().zip(&want) {
                            assert!(
                                (g - 2.0 * w).abs() < 2.0 * tol,
                                "k{k} accumulate {al:?} {bl:?}"
                            );
                        }
                    }
                }
            }
        }
    }
}
