//! The matrix kernel of the CPU engine's convolutions: an *indirect* GEMM.
//!
//! ```text
//! out(r, j) (+)= Σ_k A(r, k) · B(k, j)        r < rows, j < cols
//! A(r, k) = a[a.base + r · a.row_stride + a.koff[k]]
//! B(k, j) = b[b.base + b.koff[k] + j]
//! ```
//!
//! A is never materialised: `koff` lists where each of its columns lives
//! relative to a row's start. With a zero-padded NHWC image, a 3×3
//! convolution is this kernel with rows = output pixels of one image row
//! (`row_stride` = stride · C) and `koff` = the 9·C tap offsets, so no
//! im2col matrix is ever written; the weight gradient is the same kernel with
//! rows = weight rows and `koff` = the pixel offsets.
//!
//! Each instruction set has a register-tiled micro-kernel (R rows × FV
//! vectors of columns held in registers, one broadcast-FMA per element of
//! A): AVX-512 and AVX2+FMA, chosen at run time, and a portable loop that
//! also takes column tails narrower than a vector.

/// Which micro-kernels run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Isa {
    /// 16-lane kernels (x86-64 with AVX-512F).
    Avx512,
    /// 8-lane kernels (x86-64 with AVX2 and FMA).
    Avx2,
    /// Plain loops (any CPU; what the compiler vectorises for the build target).
    Portable,
}

impl Isa {
    /// Every kind, fastest first.
    pub const ALL: [Isa; 3] = [Isa::Avx512, Isa::Avx2, Isa::Portable];

    pub fn name(self) -> &'static str {
        match self {
            Isa::Avx512 => "avx512",
            Isa::Avx2 => "avx2",
            Isa::Portable => "portable",
        }
    }

    /// Whether this CPU can run these kernels.
    pub fn available(self) -> bool {
        match self {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => std::arch::is_x86_feature_detected!("avx512f"),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => {
                std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
            }
            Isa::Portable => true,
            #[allow(unreachable_patterns)]
            _ => false,
        }
    }

    /// The SIMD kernels' vector width in f32 lanes, and the leading columns
    /// of `cols` they take (whole vectors; the tail goes to the portable
    /// loop): (0, 0) for the portable kernels or kernels this CPU lacks.
    /// How many of `cols` columns these kernels take in whole vectors (the
    /// rest go to the portable tail).
    pub fn simd_cols(self, cols: usize) -> usize {
        self.simd_split(cols).1
    }

    fn simd_split(self, cols: usize) -> (usize, usize) {
        let lanes = match self {
            Isa::Avx512 if self.available() => 16,
            Isa::Avx2 if self.available() => 8,
            _ => 0,
        };
        (lanes, cols.checked_div(lanes).map_or(0, |v| v * lanes))
    }

    /// Runs `f` compiled for AVX2 and FMA where these kernels are SIMD ones
    /// and the CPU has both, else as built (the x86-64 baseline: SSE2).
    /// The element-wise passes (norms, SwiGLU, softmax, cross-entropy,
    /// RoPE) are plain loops written to vectorise; inlined here, they do so
    /// 8 lanes wide (16 for two of them: [`Isa::vectorised_wide`]). Results
    /// are bitwise those of the baseline build: Rust never fuses a multiply
    /// and an add it was not asked to (`fma` only makes the instructions
    /// available), and vectorising keeps every operation and its order.
    #[inline(always)]
    pub fn vectorised<R>(self, f: impl FnOnce() -> R) -> R {
        #[cfg(target_arch = "x86_64")]
        if self != Isa::Portable && Isa::Avx2.available() {
            #[target_feature(enable = "avx2,fma")]
            fn avx2<R>(f: impl FnOnce() -> R) -> R {
                f()
            }
            // SAFETY: the CPU has AVX2 and FMA (checked just above).
            return unsafe { avx2(f) };
        }
        f()
    }

    /// [`Isa::vectorised`], but compiled for AVX-512 (16 lanes) where these
    /// are the AVX-512 kernels and the CPU has them: for the passes that
    /// run long rows of `exp` and divisions (SwiGLU, the cross-entropy),
    /// which gain from the wider vectors even where the 512-bit units are
    /// two 256-bit halves. RMSNorm's rows stay on [`Isa::vectorised`]; the
    /// attention's (16 to 128 keys) lose to the longer scalar remainders
    /// on such halves and gain on full-width units, so its plan chooses by
    /// timing (`planner::AttentionPlan::wide`). The same bits either way
    /// (see there).
    #[inline(always)]
    pub fn vectorised_wide<R>(self, f: impl FnOnce() -> R) -> R {
        #[cfg(target_arch = "x86_64")]
        if self == Isa::Avx512 && self.available() && Isa::Avx2.available() {
            #[target_feature(enable = "avx512f,avx2,fma")]
            fn avx512<R>(f: impl FnOnce() -> R) -> R {
                f()
            }
            // SAFETY: the CPU has AVX-512F, AVX2 and FMA (checked just above).
            return unsafe { avx512(f) };
        }
        self.vectorised(f)
    }

    /// The fastest kind this CPU runs.
    pub fn detect() -> Isa {
        Isa::ALL
            .into_iter()
            .find(|i| i.available())
            .unwrap_or(Isa::Portable)
    }

    /// Parses a name of [`Isa::name`]; an error if unknown or not available here.
    pub fn parse(v: &str) -> Result<Isa, crate::error::IsaError> {
        let isa = Isa::ALL
            .into_iter()
            .find(|i| i.name() == v)
            .ok_or_else(|| crate::error::IsaError::Unknown {
                given: v.to_string(),
            })?;
        if !isa.available() {
            return Err(crate::error::IsaError::Unavailable {
                given: v.to_string(),
                detected: Isa::detect().name(),
            });
        }
        Ok(isa)
    }
}

/// A list of offsets (the columns of A, the rows of B) and its largest value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offsets {
    list: Vec<usize>,
    max: usize,
    /// `Some(s)` where `list[k] = k·s` (a dense matrix's rows or columns):
    /// the kernels then step a pointer rather than read the list.
    step: Option<usize>,
}

impl Offsets {
    pub fn new(list: Vec<usize>) -> Self {
        let max = list.iter().copied().max().unwrap_or(0);
        let s = list.get(1).map_or(0, |&v| v);
        let step = list
            .iter()
            .enumerate()
            .all(|(k, &v)| s.checked_mul(k) == Some(v))
            .then_some(s);
        Self { list, max, step }
    }
    /// Rows `0, stride, 2·stride, …` of a dense row-major matrix.
    pub fn dense(rows: usize, stride: usize) -> Self {
        Self::new((0..rows).map(|k| k * stride).collect())
    }
    pub fn len(&self) -> usize {
        self.list.len()
    }
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
    pub fn as_slice(&self) -> &[usize] {
        &self.list
    }
}

/// The A operand: `A(r, k) = data[base + r * row_stride + koff[k]]`.
#[derive(Debug, Clone, Copy)]
pub struct AMat<'a> {
    pub data: &'a [f32],
    pub base: usize,
    pub row_stride: usize,
    /// Column offsets; their number is the reduction length K.
    pub koff: &'a Offsets,
}

/// The B operand: `B(k, j) = data[base + koff[k] + j]`; `koff` has K entries.
#[derive(Debug, Clone, Copy)]
pub struct BMat<'a> {
    pub data: &'a [f32],
    pub base: usize,
    pub koff: &'a Offsets,
}

/// `out[r * out_stride + j] (+)= Σ_k A(r, k) · B(k, j)` for `r < rows`,
/// `j < cols`; overwrites unless `accumulate`.
///
/// # Panics
/// If an operand is too short for the access pattern described (a caller's bug).
#[allow(clippy::too_many_arguments)]
pub fn igemm(
    isa: Isa,
    rows: usize,
    cols: usize,
    a: AMat,
    b: BMat,
    out: &mut [f32],
    out_stride: usize,
    accumulate: bool,
) {
    igemm_planned(
        isa,
        rows,
        cols,
        a,
        b,
        out,
        out_stride,
        accumulate,
        Plan::default(),
    )
}

/// How [`igemm_planned`] lays out its operands. No choice changes
/// which products are summed or in which order: results are bitwise those
/// of [`igemm`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Plan<'p> {
    /// B already packed (by [`PackedB::pack`] from the same `b`, `cols` and
    /// `isa`): the call reads it and packs nothing. Several calls (the row
    /// blocks of one product, on several threads) share one packing.
    pub packed_b: Option<&'p PackedB>,
    /// Pack A where its rows are adjacent and its columns far apart (a
    /// transposed operand: the head's weight gradient `dlogitsᵀ`), a row
    /// chunk at a time, so that its columns lie next to each other: read in
    /// place, columns 4 KiB or more apart fall into a few cache sets and
    /// evict each other.
    pub pack_a: bool,
    /// Each register tile's rows meet every column block before the next
    /// rows (rather than each column block meeting every row of a chunk):
    /// the tile's rows of A stay in L1 while B's panels stream from L2, and
    /// the output is written a row at a time. For A in place with its rows
    /// K apart (a dense `x·W`).
    pub rows_outer: bool,
    /// Rows of a register tile, at most the kernel set's tallest for the
    /// product ([`register_tile_rows`]; 0: the tallest). Shorter tiles
    /// reload B more often but keep fewer of A's rows in flight; no tile
    /// changes a sum's order.
    pub tile_rows: usize,
    /// Read B in place even where its rows lie far apart (no packing of
    /// B; `packed_b` must be None): where B's panels stay in the caches
    /// anyway, the copy only costs.
    pub keep_b_in_place: bool,
}

/// [`igemm`] with a [`Plan`].
///
/// # Panics
/// As [`igemm`]; also if `plan.packed_b` was packed for another shape.
#[allow(clippy::too_many_arguments)]
pub fn igemm_planned(
    isa: Isa,
    rows: usize,
    cols: usize,
    a: AMat,
    b: BMat,
    out: &mut [f32],
    out_stride: usize,
    accumulate: bool,
    plan: Plan,
) {
    if rows == 0 || cols == 0 {
        return;
    }
    let k = a.koff.len();
    assert!(
        out.len() >= (rows - 1) * out_stride + cols,
        "igemm: out too short"
    );
    if k == 0 {
        if !accumulate {
            for r in 0..rows {
                out[r * out_stride..r * out_stride + cols].fill(0.0);
            }
        }
        return;
    }
    assert_eq!(b.koff.len(), k, "igemm: A and B disagree on K");
    assert!(
        a.base + (rows - 1) * a.row_stride + a.koff.max < a.data.len(),
        "igemm: A too short"
    );
    assert!(
        b.base + b.koff.max + cols <= b.data.len(),
        "igemm: B too short"
    );
    // The SIMD kernels take whole vectors of columns; the tail goes to the
    // portable loop.
    let (lanes, simd_cols) = isa.simd_split(cols);
    if simd_cols > 0 {
        // SAFETY: the asserts above bound every element the kernels touch
        // (rows × simd_cols of out, the A offsets, K rows × simd_cols of B),
        // and `lanes > 0` only when the CPU has the instructions.
        if let Some(pb) = plan.packed_b {
            assert!(
                pb.lanes == lanes && pb.cols == simd_cols && pb.k == k,
                "igemm: B packed for another shape"
            );
        }
        unsafe {
            simd_blocks(
                isa, lanes, rows, simd_cols, &a, &b, out, out_stride, accumulate, plan,
            )
        };
    }
    if simd_cols < cols {
        portable(rows, simd_cols, cols, &a, &b, out, out_stride, accumulate);
    }
}

/// The arguments of one register tile.
struct Tile {
    a: *const f32,
    a_rs: usize,
    koff: *const usize,
    k: usize,
    b: *const f32,
    bkoff: *const usize,
    c: *mut f32,
    c_rs: usize,
    acc: bool,
}

/// A register tile over evenly spaced operands:
/// `A(r, k) = a[r·a_rs + k·a_ks]`, `B(k, j) = b[k·b_ks + j]`.
struct STile {
    a: *const f32,
    a_rs: usize,
    a_ks: usize,
    k: usize,
    b: *const f32,
    b_ks: usize,
    c: *mut f32,
    c_rs: usize,
    acc: bool,
}

/// Largest register tile (rows, vectors) per instruction set: accumulators
/// plus the B vectors and a broadcast must fit the register file (32 zmm,
/// 16 ymm) without spilling. One vector wide (16 columns), 8 rows beat 28
/// where A's rows lie a cache line or more apart (`a_rs` ≥ 16 floats: a
/// convolution's pixels) or the reduction is short (`k` < 64), as measured
/// on the convolutions' forward and input gradient and the stem's forward
/// (K = 9); their weight gradient (adjacent rows, K = pixels) keeps the
/// tall tile, which is faster there.
/// Four vectors wide, 6 rows (24 accumulators, 4 B vectors and the
/// broadcast: 29 registers); 7 rows need 33, and the compiler spills an
/// accumulator to the stack and back at every step of the reduction (seen
/// in the code it emits), which on a core with two 512-bit FMA units kept
/// that tile far below their peak.
/// Tiles never change a sum's order: results are bitwise the same.
fn max_rows(isa: Isa, fv: usize, a_rs: usize, k: usize) -> usize {
    match (isa, fv) {
        (Isa::Avx512, 1) if a_rs >= 16 || k < 64 => 8,
        (Isa::Avx512, 1) => 28,
        (Isa::Avx512, 2) => 10,
        (Isa::Avx512, 3) => 8,
        (Isa::Avx512, _) => 6,
        (_, 1) => 12,
        _ => 6,
    }
}

/// The rows of the tallest register tile of a product of `cols` columns
/// with A's rows `a_row_stride` apart and a reduction over `k` (what a
/// [`Plan`] with `tile_rows` 0 uses); 0 where no SIMD kernel takes it.
pub(crate) fn register_tile_rows(isa: Isa, cols: usize, a_row_stride: usize, k: usize) -> usize {
    let (lanes, simd_cols) = isa.simd_split(cols);
    if simd_cols == 0 {
        return 0;
    }
    let widest = balanced(simd_cols / lanes, max_vectors(isa))
        .map(|g| g.1)
        .max()
        .unwrap_or(1);
    max_rows(isa, widest, a_row_stride, k)
}

/// Widest register tile, in vectors of columns, per instruction set.
fn max_vectors(isa: Isa) -> usize {
    match isa {
        Isa::Avx512 => 4,
        // 6 × 2 vectors (12 accumulators of 16 ymm); 3 and 4 vectors wide
        // spill or starve on loads, and were measured slower.
        _ => 2,
    }
}

/// Splits `n` into `ceil(n / max)` nearly equal parts.
fn balanced(n: usize, max: usize) -> impl Iterator<Item = (usize, usize)> + Clone {
    let parts = n.div_ceil(max).max(1);
    let (q, rem) = (n / parts, n % parts);
    (0..parts).scan(0, move |start, i| {
        let len = q + usize::from(i < rem);
        let s = *start;
        *start += len;
        Some((s, len))
    })
}

/// # Safety
/// Bounds as checked by [`igemm`]; `isa` available; `cols` a multiple of `lanes`.
#[allow(clippy::too_many_arguments)]
unsafe fn simd_blocks(
    isa: Isa,
    lanes: usize,
    rows: usize,
    cols: usize,
    a: &AMat,
    b: &BMat,
    out: &mut [f32],
    out_stride: usize,
    acc: bool,
    plan: Plan,
) {
    let k = a.koff.len();
    // Column blocks of at most `max_vectors` vectors; every block uses the
    // row tiles of the widest one.
    // (Iterators, not vectors: a convolution calls this once per output
    // row, for a few microseconds of work, and two allocations per call
    // cost a tenth of that.)
    let groups = balanced(cols / lanes, max_vectors(isa));
    let widest = groups.clone().map(|g| g.1).max().unwrap_or(1);
    let rt = max_rows(isa, widest, a.row_stride, k);
    let rt = if plan.tile_rows > 0 {
        rt.min(plan.tile_rows)
    } else {
        rt
    };
    // Where B's rows lie far apart and enough rows of A reuse it to pay for
    // the copy, B is packed first: each column block in consecutive memory
    // (`wmax` values per k), read row by row so that the copy streams. Read
    // in place, a block's K rows lie a row stride apart and (strides of
    // 512 B and more) fall into a few cache sets, evicting each other between
    // the row tiles that reuse them; closer rows (a convolution's output
    // gradient, 32 or 64 channels a pixel) are read well in place, and the
    // copy would only cost. Packing changes no sum's order. (Packing A as
    // well, GotoBLAS-style, was measured: the copy cost more than it saved
    // at these shapes.)
    let wmax = widest * lanes;
    let spread = b.koff.max / k.saturating_sub(1).max(1);
    let pack = plan.packed_b.is_none() && !plan.keep_b_in_place && packs_b(rows, spread);
    let a_spread = a.koff.max / k.saturating_sub(1).max(1);
    let packed_b_any = pack || plan.packed_b.is_some();
    let pack_a = plan.pack_a
        && a.row_stride == 1
        && rows >= PACK_MIN_ROWS
        && a_spread >= PACK_A_MIN_STRIDE
        && (packed_b_any || b.koff.step.is_some());
    // Rows in chunks whose part of A stays in the L2 cache while every
    // column block passes over it (or one tile's rows: `rows_outer`).
    let chunk = if plan.rows_outer && !pack_a {
        rt
    } else {
        (ROW_CHUNK_FLOATS / k.max(1)).max(32)
    };
    PANEL.with_borrow_mut(|p| {
        if pack {
            p.fill(b, groups.clone(), lanes, wmax);
        }
        for (c0, clen) in balanced(rows, chunk) {
            if pack_a {
                p.fill_a(a, c0, clen);
            }
            for (g, (v0, fv)) in groups.clone().enumerate() {
                let packed_b = pack || plan.packed_b.is_some();
                let (bp, bkoff) = if let Some(pb) = plan.packed_b {
                    // SAFETY: PackedB::pack wrote K·wmax values per block
                    // (the shape was checked by igemm_planned).
                    (
                        unsafe { pb.panel.b.as_ptr().add(g * k * wmax) },
                        pb.panel.koff.as_ptr(),
                    )
                } else if pack {
                    // SAFETY: fill wrote K·wmax values per block.
                    (unsafe { p.b.as_ptr().add(g * k * wmax) }, p.koff.as_ptr())
                } else {
                    // SAFETY: within the bounds igemm checked.
                    let bp = unsafe { b.data.as_ptr().add(b.base + v0 * lanes) };
                    (bp, b.koff.list.as_ptr())
                };
                for (r0, r) in balanced(clen, rt) {
                    let (ap, a_rs, akoff) = if pack_a {
                        // SAFETY: fill_a wrote K·clen values (only the
                        // strided tile reads a packed A).
                        (unsafe { p.a.as_ptr().add(r0) }, 1, std::ptr::null())
                    } else {
                        // SAFETY: within the bounds igemm checked.
                        let ap = unsafe { a.data.as_ptr().add(a.base + (c0 + r0) * a.row_stride) };
                        (ap, a.row_stride, a.koff.list.as_ptr())
                    };
                    let r0 = c0 + r0;
                    // SAFETY: within the bounds igemm checked.
                    let c = unsafe { out.as_mut_ptr().add(r0 * out_stride + v0 * lanes) };
                    // Both operands evenly spaced (dense matrices, packed
                    // panels): the strided tile, which steps pointers.
                    let a_ks = if pack_a { Some(clen) } else { a.koff.step };
                    let b_ks = if packed_b { Some(wmax) } else { b.koff.step };
                    if let (Some(a_ks), Some(b_ks)) = (a_ks, b_ks) {
                        let t = STile {
                            a: ap,
                            a_rs,
                            a_ks,
                            k,
                            b: bp,
                            b_ks,
                            c,
                            c_rs: out_stride,
                            acc,
                        };
                        match isa {
                            #[cfg(target_arch = "x86_64")]
                            Isa::Avx512 => unsafe { x86::avx512::run_strided(r, fv, &t) },
                            #[cfg(target_arch = "x86_64")]
                            Isa::Avx2 => unsafe { x86::avx2::run_strided(r, fv, &t) },
                            _ => unreachable!("SIMD kernels requested without SIMD"),
                        }
                        continue;
                    }
                    let t = Tile {
                        a: ap,
                        a_rs,
                        koff: akoff,
                        k,
                        b: bp,
                        bkoff,
                        c,
                        c_rs: out_stride,
                        acc,
                    };
                    match isa {
                        #[cfg(target_arch = "x86_64")]
                        Isa::Avx512 => unsafe { x86::avx512::run(r, fv, &t) },
                        #[cfg(target_arch = "x86_64")]
                        Isa::Avx2 => unsafe { x86::avx2::run(r, fv, &t) },
                        _ => unreachable!("SIMD kernels requested without SIMD"),
                    }
                }
            }
        }
    });
}

/// Floats of A (rows × K) per row chunk: 256 KiB, a quarter of a typical L2.
const ROW_CHUNK_FLOATS: usize = 1 << 16;

/// Rows from which B is packed (below, the copy costs more than the cache
/// misses it saves).
const PACK_MIN_ROWS: usize = 64;

/// Mean distance between B's rows, in floats (512 B), from which B is packed.
const PACK_MIN_STRIDE: usize = 128;

/// Whether a product of `rows` rows of A reads a B whose rows lie a mean
/// `spread` floats apart from a packed copy (where its [`Plan`] lets it):
/// the one place of the rule, which the planner's cut of a product and the
/// pool's shared packing ask too.
pub(crate) fn packs_b(rows: usize, spread: usize) -> bool {
    rows >= PACK_MIN_ROWS && spread >= PACK_MIN_STRIDE
}

/// Mean distance between A's columns, in floats (4 KiB), from which A is
/// packed where a [`Plan`] allows it. Closer, a row chunk's columns (512 B
/// each, adjacent lines) spread over every cache set and read well in
/// place; at 4 KiB and more they fall into a few sets (the LLM head's
/// weight gradient: 8 KiB apart).
pub(crate) const PACK_A_MIN_STRIDE: usize = 1024;

/// One thread's packed B, reused from call to call: column block `g` at
/// `b[g·K·wmax ..]`, `b[g·K·wmax + k·wmax + j]` = B(k, j0(g) + j) (a narrower
/// block leaves the rest of its rows unused), read through the offsets
/// `koff[k] = k·wmax`.
/// It also holds A's rows `c0..c0 + clen` (`fill_a`): `a[k·clen + i]` =
/// A(c0 + i, k), read by the strided tile.
#[derive(Debug, Default)]
struct Panel {
    b: Vec<f32>,
    koff: Vec<usize>,
    a: Vec<f32>,
}

impl Panel {
    /// `groups`: (first vector, vectors) of each column block.
    fn fill(
        &mut self,
        b: &BMat,
        groups: impl Iterator<Item = (usize, usize)> + Clone,
        lanes: usize,
        wmax: usize,
    ) {
        let k = b.koff.len();
        grow(&mut self.b, groups.clone().count() * k * wmax);
        for (kk, &o) in b.koff.list.iter().enumerate() {
            let row = b.base + o;
            for (g, (v0, fv)) in groups.clone().enumerate() {
                let (w, j0) = (fv * lanes, v0 * lanes);
                let d0 = g * k * wmax + kk * wmax;
                let dst = &mut self.b[d0..d0 + w];
                // Whole vectors: moves in place of a call to memcpy per piece
                // (which costs as much as the copy at these widths).
                for (d, s) in dst
                    .chunks_exact_mut(8)
                    .zip(b.data[row + j0..row + j0 + w].chunks_exact(8))
                {
                    d.copy_from_slice(s);
                }
            }
        }
        self.koff.clear();
        self.koff.extend((0..k).map(|i| i * wmax));
    }

    /// Packs A's rows `c0..c0 + clen` (A's rows adjacent: `row_stride` 1),
    /// each column's `clen` values after the last's.
    fn fill_a(&mut self, a: &AMat, c0: usize, clen: usize) {
        let k = a.koff.len();
        grow(&mut self.a, k * clen);
        for (dst, &o) in self.a.chunks_exact_mut(clen).zip(&a.koff.list) {
            let s = a.base + c0 + o;
            dst.copy_from_slice(&a.data[s..s + clen]);
        }
    }
}

/// Makes `v` at least `len` long (new values `T::default()`), never
/// shorter. For scratch that serves work of every size in turn (panels,
/// their lists, the attention's buffers): growing a shortened vector would
/// allocate or zero again what it had. Every value read is written first.
pub(crate) fn grow<T: Default>(v: &mut Vec<T>, len: usize) {
    if v.len() < len {
        v.resize_with(len, T::default);
    }
}

/// B packed once for the row blocks of one product (see [`Plan`]): what
/// each call of [`igemm`] would otherwise pack for itself.
#[derive(Debug, Default)]
pub struct PackedB {
    panel: Panel,
    lanes: usize,
    cols: usize,
    k: usize,
}

impl PackedB {
    /// Packs `b` for products of `cols` columns on `isa`'s kernels, or
    /// returns false (and packs nothing) where those kernels would read B in
    /// place: B's rows close together, no SIMD kernel, or no whole vector
    /// of columns.
    pub fn pack(&mut self, isa: Isa, b: &BMat, cols: usize) -> bool {
        let (lanes, simd_cols) = isa.simd_split(cols);
        let k = b.koff.len();
        let spread = b.koff.max / k.saturating_sub(1).max(1);
        if simd_cols == 0 || k == 0 || spread < PACK_MIN_STRIDE {
            return false;
        }
        assert!(
            b.base + b.koff.max + cols <= b.data.len(),
            "PackedB: B too short"
        );
        let groups = balanced(simd_cols / lanes, max_vectors(isa));
        let widest = groups.clone().map(|g| g.1).max().unwrap_or(1);
        self.panel.fill(b, groups, lanes, widest * lanes);
        (self.lanes, self.cols, self.k) = (lanes, simd_cols, k);
        true
    }
}

thread_local! {
    static PANEL: std::cell::RefCell<Panel> = std::cell::RefCell::default();
}

/// Columns `j0..j1` with plain loops.
#[allow(clippy::too_many_arguments)]
fn portable(
    rows: usize,
    j0: usize,
    j1: usize,
    a: &AMat,
    b: &BMat,
    out: &mut [f32],
    out_stride: usize,
    acc: bool,
) {
    portable_rows(
        rows,
        |r| a.base + r * a.row_stride,
        |r| r * out_stride,
        j0,
        j1,
        a,
        b,
        out,
        acc,
    );
}

/// [`portable`] with each row's start in A (`a_row(r)`, the row's index
/// into `a.data`) and in `out` (`out_row(r)`) given.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn portable_rows(
    rows: usize,
    a_row: impl Fn(usize) -> usize,
    out_row: impl Fn(usize) -> usize,
    j0: usize,
    j1: usize,
    a: &AMat,
    b: &BMat,
    out: &mut [f32],
    acc: bool,
) {
    let w = j1 - j0;
    let mut sum = vec![0f32; w];
    for r in 0..rows {
        let row = a_row(r);
        let o = out_row(r);
        let dst = &mut out[o + j0..o + j1];
        if acc {
            sum.copy_from_slice(dst);
        } else {
            sum.fill(0.0);
        }
        for (&o, &bk) in a.koff.list.iter().zip(&b.koff.list) {
            let av = a.data[row + o];
            let bo = b.base + bk;
            let bk = &b.data[bo + j0..bo + j1];
            for (s, bv) in sum.iter_mut().zip(bk) {
                *s += av * bv;
            }
        }
        dst.copy_from_slice(&sum);
    }
}

/// Where the rows of A and of the output start, for [`igemm_rows`]: row
/// `r` of A at `a.data[a.base + a[r] ..]`, of the output at `out[out[r] ..]`.
#[derive(Debug, Clone, Copy)]
pub struct RowTable<'a> {
    pub a: &'a [usize],
    pub out: &'a [usize],
}

/// [`igemm`] over rows that need not be evenly spaced, in A or in the
/// output (`a.row_stride` is not used): a convolution's output pixels over
/// several image rows, whose padded input rows and output rows jump at
/// each image row's end. One call then covers a whole image, and the
/// register tiles take their full height however narrow an image row is
/// (7 pixels: tiles of 4 and 3 rows per call of [`igemm`], 6 here).
///
/// Every output value is the same products summed in the same order as
/// [`igemm`] would with each row on its own: results are bitwise the same.
///
/// # Panics
/// If the tables differ in length or an operand is too short (a caller's bug).
pub fn igemm_rows(
    isa: Isa,
    table: RowTable,
    cols: usize,
    a: AMat,
    b: BMat,
    out: &mut [f32],
    accumulate: bool,
) {
    let rows = table.a.len();
    assert_eq!(table.out.len(), rows, "igemm_rows: tables differ");
    if rows == 0 || cols == 0 {
        return;
    }
    let k = a.koff.len();
    let out_max = table.out.iter().copied().max().unwrap_or(0);
    assert!(out_max + cols <= out.len(), "igemm_rows: out too short");
    if k == 0 {
        if !accumulate {
            for &o in table.out {
                out[o..o + cols].fill(0.0);
            }
        }
        return;
    }
    assert_eq!(b.koff.len(), k, "igemm_rows: A and B disagree on K");
    let a_max = table.a.iter().copied().max().unwrap_or(0);
    assert!(
        a.base + a_max + a.koff.max < a.data.len(),
        "igemm_rows: A too short"
    );
    assert!(
        b.base + b.koff.max + cols <= b.data.len(),
        "igemm_rows: B too short"
    );
    let (lanes, simd_cols) = isa.simd_split(cols);
    if simd_cols > 0 {
        // SAFETY: the asserts above bound every element the kernels touch,
        // and `lanes > 0` only when the CPU has the instructions.
        unsafe { simd_rows(isa, lanes, table, simd_cols, &a, &b, out, accumulate) };
    }
    if simd_cols < cols {
        portable_rows(
            rows,
            |r| a.base + table.a[r],
            |r| table.out[r],
            simd_cols,
            cols,
            &a,
            &b,
            out,
            accumulate,
        );
    }
}

/// The arguments of one register tile of [`igemm_rows`].
struct RTile {
    a: *const f32,
    a_rows: *const usize,
    koff: *const usize,
    k: usize,
    b: *const f32,
    bkoff: *const usize,
    c: *mut f32,
    c_rows: *const usize,
    acc: bool,
}

/// # Safety
/// Bounds as checked by [`igemm_rows`]; `isa` available; `cols` a multiple of `lanes`.
#[allow(clippy::too_many_arguments)]
unsafe fn simd_rows(
    isa: Isa,
    lanes: usize,
    table: RowTable,
    cols: usize,
    a: &AMat,
    b: &BMat,
    out: &mut [f32],
    acc: bool,
) {
    let (rows, k) = (table.a.len(), a.koff.len());
    let groups = balanced(cols / lanes, max_vectors(isa));
    let widest = groups.clone().map(|g| g.1).max().unwrap_or(1);
    // The spacing of A's first rows stands for `a.row_stride` in the
    // choice of tile height.
    let spacing = table.a.get(1).map_or(0, |&r1| r1.abs_diff(table.a[0]));
    let rt = max_rows(isa, widest, spacing, k);
    let chunk = (ROW_CHUNK_FLOATS / k.max(1)).max(32);
    for (c0, clen) in balanced(rows, chunk) {
        for (v0, fv) in groups.clone() {
            for (r0, r) in balanced(clen, rt) {
                let r0 = c0 + r0;
                // SAFETY: within the bounds igemm_rows checked.
                let t = unsafe {
                    RTile {
                        a: a.data.as_ptr().add(a.base),
                        a_rows: table.a.as_ptr().add(r0),
                        koff: a.koff.list.as_ptr(),
                        k,
                        b: b.data.as_ptr().add(b.base + v0 * lanes),
                        bkoff: b.koff.list.as_ptr(),
                        c: out.as_mut_ptr().add(v0 * lanes),
                        c_rows: table.out.as_ptr().add(r0),
                        acc,
                    }
                };
                match isa {
                    #[cfg(target_arch = "x86_64")]
                    Isa::Avx512 => unsafe { x86::avx512::run_rows(r, fv, &t) },
                    #[cfg(target_arch = "x86_64")]
                    Isa::Avx2 => unsafe { x86::avx2::run_rows(r, fv, &t) },
                    _ => unreachable!("SIMD kernels requested without SIMD"),
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    /// One micro-kernel per instruction set; `run` picks the (rows, vectors)
    /// instance. The loops over R and FV are unrolled by the compiler (both
    /// are constants), which keeps the accumulators in registers.
    macro_rules! isa_kernels {
        ($modname:ident, $feature:literal, $lanes:literal, $zero:ident, $load:ident,
         $store:ident, $set1:ident, $fmadd:ident,
         [$($fv:literal => [$($r:literal)*]),*]) => {
            pub mod $modname {
                #[allow(unused_imports)]
                use std::arch::x86_64::*;

                use super::super::{RTile, STile, Tile};

                #[target_feature(enable = $feature)]
                unsafe fn tile<const R: usize, const FV: usize>(t: &Tile) {
                    // SAFETY: the caller (igemm) checked every offset.
                    unsafe {
                        let mut acc = [[$zero(); FV]; R];
                        if t.acc {
                            for r in 0..R {
                                for v in 0..FV {
                                    acc[r][v] = $load(t.c.add(r * t.c_rs + v * $lanes));
                                }
                            }
                        }
                        let mut bv = [$zero(); FV];
                        for k in 0..t.k {
                            let ap = t.a.add(*t.koff.add(k));
                            let bp = t.b.add(*t.bkoff.add(k));
                            for v in 0..FV {
                                bv[v] = $load(bp.add(v * $lanes));
                            }
                            for r in 0..R {
                                let x = $set1(*ap.add(r * t.a_rs));
                                for v in 0..FV {
                                    acc[r][v] = $fmadd(x, bv[v], acc[r][v]);
                                }
                            }
                        }
                        for r in 0..R {
                            for v in 0..FV {
                                $store(t.c.add(r * t.c_rs + v * $lanes), acc[r][v]);
                            }
                        }
                    }
                }

                /// Row `r`'s offset in A from the row pointer (`r·a_rs`),
                /// fixed for the whole reduction. Up to 12 rows, each is
                /// kept in a register of its own (`black_box` stops the
                /// compiler from deriving them one from another): the
                /// broadcasts then address `pointer + offset` directly,
                /// where the compiler otherwise stepped one address through
                /// the rows with an add each, 7 scalar instructions a step
                /// of a 6 × 4 tile against 3: where the scalar adds share
                /// ports with the 512-bit FMAs, those 4 instructions take
                /// the FMAs' slots. Taller tiles run out of registers and
                /// keep the compiler's stepping. Only the strided tile uses
                /// it: in the offset-table tile (the convolutions), the
                /// same change made `mini_resnet`'s step slower.
                #[inline(always)]
                fn row_offsets<const R: usize>(a_rs: usize) -> [usize; R] {
                    std::array::from_fn(|r| {
                        if R <= 12 {
                            std::hint::black_box(r * a_rs)
                        } else {
                            r * a_rs
                        }
                    })
                }

                /// Asks for the output tile's lines while the reduction
                /// runs, so that its stores (and an accumulating tile's
                /// loads) find them in L1 rather than wait on L3 or memory:
                /// every line of each row (an AVX-512 row of 4 vectors
                /// spans 4; asking for its first and last only left the
                /// middle two to meet their stores cold), and
                /// the row's last value (a row that starts mid-line ends
                /// in one line more).
                #[inline(always)]
                unsafe fn prefetch_tile<const R: usize, const FV: usize>(c: *mut f32, c_rs: usize) {
                    for r in 0..R {
                        let p = c.wrapping_add(r * c_rs) as *const i8;
                        // SAFETY: a prefetch never faults, whatever the address.
                        unsafe {
                            for o in (0..FV * $lanes * 4).step_by(64) {
                                _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(o));
                            }
                            _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(FV * $lanes * 4 - 4));
                        }
                    }
                }

                /// [`tile`] with pointers stepped through evenly spaced
                /// operands: the same products summed in the same order.
                #[target_feature(enable = $feature)]
                unsafe fn stile<const R: usize, const FV: usize>(t: &STile) {
                    // SAFETY: the caller (igemm) checked every offset.
                    unsafe {
                        prefetch_tile::<R, FV>(t.c, t.c_rs);
                        let mut acc = [[$zero(); FV]; R];
                        if t.acc {
                            for r in 0..R {
                                for v in 0..FV {
                                    acc[r][v] = $load(t.c.add(r * t.c_rs + v * $lanes));
                                }
                            }
                        }
                        let mut bv = [$zero(); FV];
                        let (mut ap, mut bp) = (t.a, t.b);
                        let offs = row_offsets::<R>(t.a_rs);
                        for _ in 0..t.k {
                            for v in 0..FV {
                                bv[v] = $load(bp.add(v * $lanes));
                            }
                            for r in 0..R {
                                let x = $set1(*ap.add(offs[r]));
                                for v in 0..FV {
                                    acc[r][v] = $fmadd(x, bv[v], acc[r][v]);
                                }
                            }
                            ap = ap.add(t.a_ks);
                            bp = bp.add(t.b_ks);
                        }
                        for r in 0..R {
                            for v in 0..FV {
                                $store(t.c.add(r * t.c_rs + v * $lanes), acc[r][v]);
                            }
                        }
                    }
                }

                /// [`tile`] with each row's start in A and in the output
                /// read from a table: the same products summed in the same
                /// order.
                #[target_feature(enable = $feature)]
                unsafe fn rtile<const R: usize, const FV: usize>(t: &RTile) {
                    // SAFETY: the caller (igemm_rows) checked every offset.
                    unsafe {
                        let ap: [*const f32; R] =
                            std::array::from_fn(|r| t.a.add(*t.a_rows.add(r)));
                        let cp: [*mut f32; R] =
                            std::array::from_fn(|r| t.c.add(*t.c_rows.add(r)));
                        let mut acc = [[$zero(); FV]; R];
                        if t.acc {
                            for r in 0..R {
                                for v in 0..FV {
                                    acc[r][v] = $load(cp[r].add(v * $lanes));
                                }
                            }
                        }
                        let mut bv = [$zero(); FV];
                        for k in 0..t.k {
                            let o = *t.koff.add(k);
                            let bp = t.b.add(*t.bkoff.add(k));
                            for v in 0..FV {
                                bv[v] = $load(bp.add(v * $lanes));
                            }
                            for r in 0..R {
                                let x = $set1(*ap[r].add(o));
                                for v in 0..FV {
                                    acc[r][v] = $fmadd(x, bv[v], acc[r][v]);
                                }
                            }
                        }
                        for r in 0..R {
                            for v in 0..FV {
                                $store(cp[r].add(v * $lanes), acc[r][v]);
                            }
                        }
                    }
                }

                /// # Safety
                /// The CPU has the feature; `t` is in bounds for (r, fv).
                pub unsafe fn run_rows(r: usize, fv: usize, t: &RTile) {
                    match (fv, r) {
                        $($(($fv, $r) => unsafe { rtile::<$r, $fv>(t) },)*)*
                        _ => unreachable!("no {r}x{fv} tile"),
                    }
                }

                /// # Safety
                /// The CPU has the feature; `t` is in bounds for (r, fv).
                pub unsafe fn run_strided(r: usize, fv: usize, t: &STile) {
                    match (fv, r) {
                        $($(($fv, $r) => unsafe { stile::<$r, $fv>(t) },)*)*
                        _ => unreachable!("no {r}x{fv} tile"),
                    }
                }

                /// # Safety
                /// The CPU has the feature; `t` is in bounds for (r, fv).
                pub unsafe fn run(r: usize, fv: usize, t: &Tile) {
                    match (fv, r) {
                        $($(($fv, $r) => unsafe { tile::<$r, $fv>(t) },)*)*
                        _ => unreachable!("no {r}x{fv} tile"),
                    }
                }
            }
        };
    }

    isa_kernels!(avx512, "avx512f", 16, _mm512_setzero_ps, _mm512_loadu_ps, _mm512_storeu_ps,
        _mm512_set1_ps, _mm512_fmadd_ps,
        [1 => [1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28],
         2 => [1 2 3 4 5 6 7 8 9 10 11 12],
         3 => [1 2 3 4 5 6 7 8],
         4 => [1 2 3 4 5 6]]);

    isa_kernels!(avx2, "avx2,fma", 8, _mm256_setzero_ps, _mm256_loadu_ps, _mm256_storeu_ps,
        _mm256_set1_ps, _mm256_fmadd_ps,
        [1 => [1 2 3 4 5 6 7 8 9 10 11 12],
         2 => [1 2 3 4 5 6]]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    /// The same product with plain index arithmetic.
    #[allow(clippy::too_many_arguments)]
    fn naive(rows: usize, cols: usize, a: &AMat, b: &BMat, out: &mut [f32], os: usize, acc: bool) {
        for r in 0..rows {
            for j in 0..cols {
                let mut s = if acc { f64::from(out[r * os + j]) } else { 0.0 };
                for (&o, &bk) in a.koff.as_slice().iter().zip(b.koff.as_slice()) {
                    s += f64::from(a.data[a.base + r * a.row_stride + o])
                        * f64::from(b.data[b.base + bk + j]);
                }
                out[r * os + j] = s as f32;
            }
        }
    }

    #[test]
    fn every_isa_and_tile_shape_matches_the_naive_product() {
        let mut rng = Rng::new(5);
        // (rows, cols, k): every tile width 1..4 vectors of both ISAs, column
        // tails, a row count that is not a multiple of any tile height; from
        // 64 rows, with B's rows far apart, B is packed (column blocks of
        // mixed widths, several row chunks when K is long).
        for &(rows, cols, k) in &[
            (70, 40, 13),
            (130, 56, 9),
            (250, 24, 600),
            (1, 1, 1),
            (29, 16, 7),
            (13, 32, 5),
            (9, 48, 3),
            (30, 64, 9),
            (5, 72, 4),
            (31, 10, 6),
            (3, 8, 0),
            (57, 24, 11),
        ] {
            let a_rs = 3;
            let koff = Offsets::new((0..k).map(|i| (i * 7) % 40 + i).collect());
            let alen = (rows.max(1) - 1) * a_rs + koff.max + 5;
            let a = rng.normal_vec(alen, 1.0);
            let am = AMat {
                data: &a,
                base: 2,
                row_stride: a_rs,
                koff: &koff,
            };
            let os = cols + 2;
            let init = rng.normal_vec(rows * os, 1.0);
            // B's rows close (read in place) and far apart (packed).
            for b_rs in [cols + 3, PACK_MIN_STRIDE + cols] {
                let b = rng.normal_vec(k.max(1) * b_rs + 1, 1.0);
                let bkoff = Offsets::dense(k, b_rs);
                let bm = BMat {
                    data: &b,
                    base: 1,
                    koff: &bkoff,
                };
                for acc in [false, true] {
                    let mut want = init.clone();
                    naive(rows, cols, &am, &bm, &mut want, os, acc);
                    for isa in Isa::ALL.into_iter().filter(|i| i.available()) {
                        let mut got = init.clone();
                        igemm(isa, rows, cols, am, bm, &mut got, os, acc);
                        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                            assert!(
                                (g - w).abs() <= 1e-4 * (1.0 + w.abs()),
                                "{} rows {rows} cols {cols} k {k} b stride {b_rs} acc {acc}: [{i}] {g} vs {w}",
                                isa.name()
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn packed_and_strided_operands_give_bitwise_the_plain_sums() {
        // Dense operands (the strided tile), A transposed with its columns
        // far apart (packed A), B packed once and shared: every plan must
        // give the bits of the offset-list kernel reading both in place.
        let mut rng = Rng::new(9);
        for &(rows, cols, k, acc) in &[
            (130, 48, 70, false),
            (64, 16, 200, true),
            (97, 40, 9, true),
            (200, 136, 33, false),
        ] {
            let a_ks = rows.max(PACK_A_MIN_STRIDE) + 3;
            let a = rng.normal_vec(k * a_ks + rows, 1.0);
            let b_rs = cols + PACK_MIN_STRIDE;
            let b = rng.normal_vec(k * b_rs + cols, 1.0);
            let init = rng.normal_vec(rows * cols, 1.0);
            let dense_a = Offsets::dense(k, a_ks);
            let dense_b = Offsets::dense(k, b_rs);
            assert_eq!(dense_a.step, Some(a_ks));
            for isa in Isa::ALL.into_iter().filter(|i| i.available()) {
                let mut want = init.clone();
                {
                    // The reference: the same offsets plus one that reads
                    // zeros (appended), an uneven list the kernels cannot
                    // step through, so the offset-list tile runs. Adding
                    // 0·0 last changes no sum.
                    let mut a0 = a.clone();
                    a0.extend(std::iter::repeat_n(0.0, rows));
                    let mut b0 = b.clone();
                    b0.extend(std::iter::repeat_n(0.0, cols));
                    let a_list = Offsets::new(
                        dense_a
                            .as_slice()
                            .iter()
                            .copied()
                            .chain([a.len()])
                            .collect(),
                    );
                    let b_list = Offsets::new(
                        dense_b
                            .as_slice()
                            .iter()
                            .copied()
                            .chain([b.len()])
                            .collect(),
                    );
                    assert!(a_list.step.is_none() && b_list.step.is_none());
                    let am = AMat {
                        data: &a0,
                        base: 0,
                        row_stride: 1,
                        koff: &a_list,
                    };
                    let bm = BMat {
                        data: &b0,
                        base: 0,
                        koff: &b_list,
                    };
                    igemm(isa, rows, cols, am, bm, &mut want, cols, acc);
                }
                let am = AMat {
                    data: &a,
                    base: 0,
                    row_stride: 1,
                    koff: &dense_a,
                };
                let bm = BMat {
                    data: &b,
                    base: 0,
                    koff: &dense_b,
                };
                let mut pb = PackedB::default();
                let packed = pb.pack(isa, &bm, cols);
                for (pack_a, rows_outer) in [(false, false), (true, false), (false, true)] {
                    for (shared, tile_rows, keep_b_in_place) in [
                        (false, 0, false),
                        (true, 0, false),
                        (false, 5, false),
                        (true, 1, false),
                        (false, 0, true),
                        (false, 3, true),
                    ] {
                        let plan = Plan {
                            packed_b: (shared && packed).then_some(&pb),
                            pack_a,
                            rows_outer,
                            tile_rows,
                            keep_b_in_place,
                        };
                        let mut got = init.clone();
                        igemm_planned(isa, rows, cols, am, bm, &mut got, cols, acc, plan);
                        let same = got
                            .iter()
                            .zip(&want)
                            .all(|(g, w)| g.to_bits() == w.to_bits());
                        assert!(
                            same,
                            "{} rows {rows} cols {cols} k {k} pack_a {pack_a} rows_outer {rows_outer} shared {shared} tile_rows {tile_rows} keep_b_in_place {keep_b_in_place}",
                            isa.name()
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn a_row_table_gives_bitwise_the_rows_one_by_one() {
        // igemm_rows over uneven rows (A's and the output's) against igemm
        // on each row alone: the same bits for every tile shape and tail.
        let mut rng = Rng::new(13);
        for &(rows, cols, k) in &[
            (49, 64, 37),
            (13, 16, 144),
            (29, 40, 9),
            (7, 8, 3),
            (50, 100, 20),
        ] {
            let koff = Offsets::new((0..k).map(|i| (i * 5) % 23 + 2 * i).collect());
            let a_rows: Vec<usize> = (0..rows).map(|r| r * 11 + (r / 7) * 30).collect();
            let out_rows: Vec<usize> = (0..rows).map(|r| r * (cols + 3) + (r / 5) * 17).collect();
            let a = rng.normal_vec(a_rows[rows - 1] + koff.max + 4, 1.0);
            let bkoff = Offsets::dense(k, cols + 1);
            let b = rng.normal_vec(k * (cols + 1) + 2, 1.0);
            let init = rng.normal_vec(out_rows[rows - 1] + cols + 5, 1.0);
            let bm = BMat {
                data: &b,
                base: 1,
                koff: &bkoff,
            };
            for isa in Isa::ALL.into_iter().filter(|i| i.available()) {
                for acc in [false, true] {
                    let mut want = init.clone();
                    for r in 0..rows {
                        let am = AMat {
                            data: &a,
                            base: 3 + a_rows[r],
                            row_stride: 0,
                            koff: &koff,
                        };
                        igemm(isa, 1, cols, am, bm, &mut want[out_rows[r]..], cols, acc);
                    }
                    let mut got = init.clone();
                    let am = AMat {
                        data: &a,
                        base: 3,
                        row_stride: 0,
                        koff: &koff,
                    };
                    let table = RowTable {
                        a: &a_rows,
                        out: &out_rows,
                    };
                    igemm_rows(isa, table, cols, am, bm, &mut got, acc);
                    let same = got
                        .iter()
                        .zip(&want)
                        .all(|(g, w)| g.to_bits() == w.to_bits());
                    assert!(
                        same,
                        "{} rows {rows} cols {cols} k {k} acc {acc}",
                        isa.name()
                    );
                }
            }
        }
    }

    #[test]
    fn isa_names_round_trip_and_unknown_names_are_errors() {
        for isa in Isa::ALL.into_iter().filter(|i| i.available()) {
            assert_eq!(Isa::parse(isa.name()), Ok(isa));
        }
        let e = Isa::parse("sse9").unwrap_err();
        let e = e.to_string();
        assert!(e.contains("expected one of avx512, avx2, portable"), "{e}");
        assert!(Isa::detect().available());
    }

    /// Every register tile's accumulators, its B vectors and the broadcast
    /// fit the register file (32 zmm, 16 ymm): a tile one register over
    /// (7 rows × 4 vectors with AVX-512) spilled an accumulator to the
    /// stack at every step of the reduction.
    #[test]
    fn every_tile_fits_the_register_file() {
        for (isa, registers) in [(Isa::Avx512, 32), (Isa::Avx2, 16)] {
            for fv in 1..=max_vectors(isa) {
                for a_rs in [1, 8, 16, 128, 2048] {
                    for k in [9, 32, 64, 512] {
                        let rows = max_rows(isa, fv, a_rs, k);
                        let used = rows * fv + fv + 1;
                        assert!(
                            used <= registers,
                            "{}: {rows} × {fv} tile (a_rs {a_rs}, k {k}) needs {used} registers",
                            isa.name()
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn balanced_split_covers_everything_once() {
        for n in 0..60 {
            for max in 1..30 {
                let parts: Vec<_> = balanced(n, max).collect();
                let mut next = 0;
                for &(s, len) in &parts {
                    assert_eq!(s, next);
                    assert!(len <= max);
                    next += len;
                }
                assert_eq!(next, n);
            }
        }
    }
}
