//! Measures the CPU engine's dense products alone (best GFLOP/s of N
//! repetitions per shape) at the LLM's shapes, to tune the kernel on a new
//! CPU. Uses the rayon pool: `RAYON_NUM_THREADS=1` for one thread.
//!
//! ```text
//! gemm_probe [--isa avx512|avx2|portable] [--reps N] [--one] [--cold] [--split | --narrow | --grid]
//! gemm_probe --tile [--isa avx512|avx2]
//! gemm_probe --shapes
//! ```
//! `--shapes`: the products' shapes only, a line each (`m n k` and A's and
//! B's layouts, `N` or `T`), for a peer to time the same products
//! (`scripts/bench-products.sh`, PyTorch's `torch.mm` beside these).
//! `--tile`: the register tiles alone, on one thread with every operand in
//! L1 (a few small products called over and over, best of 40 rounds), A's
//! rows k apart and adjacent, beside a loop of independent fused
//! multiply-adds on the same core (the kernels' ceiling): how near the
//! kernel comes to the core's peak before caches and memory enter. Each
//! tile twice: B and C at a cache line (as the engine's allocator places
//! its buffers) and 16 bytes past one (where glibc's `malloc` starts a
//! large block), so that what split loads cost this core shows beside it.
//! `--one`: the calling thread only (`Threads::One`), timed by its CPU
//! time, which a busy machine's preemptions do not inflate.
//! `--cold`: before each repetition, 64 MiB are written elsewhere, so that
//! the operands come from memory as in a training step (where every
//! product reads what an earlier pass wrote several MiB ago) rather than
//! from the caches the last repetition filled.
//! `--split`: each shape's product on the pool split by rows (the
//! hand-chosen blocking) and by columns (`split_columns`), alternating
//! repetition by repetition in this one process; both rates and their
//! ratio.
//! `--narrow`: the same with the AVX-512 set's own kernels and the AVX2
//! ones (`narrow`, which the planner may choose under that set).
//! `--grid`: every combination of the split, the reduction block and the
//! packing and loop-order knobs (64 blockings, alternating repetition by
//! repetition), the five fastest per shape with their time against the
//! hand-chosen blocking: the interactions the planner's search, one knob
//! at a time, does not try. (A product alone is not the step: a choice
//! clearly faster here, cold, has left the step's time unchanged.)
use std::time::Instant;

use referee_workloads::cpu::dense::{Blocking, Layout, Threads, matmul_blocked};
use referee_workloads::cpu::kernels::{AMat, BMat, Isa, Offsets, Plan, igemm_planned};
use referee_workloads::runtime::{CpuClock, cpu_seconds};

#[global_allocator]
static ALLOC: referee_workloads::cpu::aligned::CacheLineAligned =
    referee_workloads::cpu::aligned::CacheLineAligned::new();

/// (m, n, k, layout of A, layout of B): the mini LLM's products at b16.
const SHAPES: [(usize, usize, usize, Layout, Layout); 8] = {
    use Layout::{Normal as N, Transposed as T};
    [
        (128, 768, 2048, T, N),
        (128, 384, 2048, T, N),
        (384, 128, 2048, T, N),
        (2048, 128, 2048, T, N),
        (2048, 128, 768, N, T),
        (2048, 768, 128, N, N),
        (2048, 2048, 128, N, T),
        (2048, 128, 2048, N, N),
    ]
};

fn main() {
    referee_workloads::cpu::aligned::engage();
    let args: Vec<String> = std::env::args().collect();
    let get = |n: &str| {
        args.iter()
            .position(|a| a == n)
            .and_then(|i| args.get(i + 1))
    };
    let isa = get("--isa").map_or_else(Isa::detect, |v| {
        Isa::parse(v).unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(2)
        })
    });
    let reps: usize = get("--reps").and_then(|v| v.parse().ok()).unwrap_or(5);
    let one = args.iter().any(|a| a == "--one");
    let cold = args.iter().any(|a| a == "--cold");
    let split = args.iter().any(|a| a == "--split");
    if args.iter().any(|a| a == "--tile") {
        return tiles(isa);
    }
    if args.iter().any(|a| a == "--shapes") {
        let letter = |l: Layout| if l == Layout::Normal { 'N' } else { 'T' };
        for (m, n, k, la, lb) in SHAPES {
            println!("{m} {n} {k} {} {}", letter(la), letter(lb));
        }
        return;
    }
    let narrow = args.iter().any(|a| a == "--narrow");
    let grid = args.iter().any(|a| a == "--grid");
    if narrow && isa != Isa::Avx512 {
        eprintln!(
            "--narrow compares the AVX-512 set's kernels with the AVX2 ones: run it with --isa avx512"
        );
        std::process::exit(2)
    }
    let mut flush = if cold {
        vec![0u8; 64 << 20]
    } else {
        Vec::new()
    };
    let threads = if one { Threads::One } else { Threads::All };
    for (m, n, k, la, lb) in SHAPES {
        let a: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 * 0.1).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 * 0.1).collect();
        let mut c = vec![0f32; m * n];
        let rows = Blocking::default_for(la);
        let blockings = if split {
            vec![
                rows,
                Blocking {
                    split_columns: true,
                    ..rows
                },
            ]
        } else if grid {
            grid_of(rows)
        } else if narrow {
            vec![
                rows,
                Blocking {
                    narrow: true,
                    ..rows
                },
            ]
        } else {
            vec![rows]
        };
        let mut best = vec![f64::MAX; blockings.len()];
        for rep in 0..reps {
            for (bl, best) in blockings.iter().zip(best.iter_mut()) {
                flush
                    .iter_mut()
                    .for_each(|v| *v = v.wrapping_add(rep as u8 | 1));
                std::hint::black_box(&flush);
                let (t, c0) = (Instant::now(), cpu_seconds(CpuClock::Thread));
                matmul_blocked(isa, threads, m, n, k, &a, la, &b, lb, &mut c, false, *bl);
                let took = if one {
                    cpu_seconds(CpuClock::Thread) - c0
                } else {
                    t.elapsed().as_secs_f64()
                };
                *best = best.min(took);
            }
        }
        let gf = |t: f64| 2.0 * (m * n * k) as f64 / t / 1e9;
        print!(
            "{} {m}x{n}x{k} {la:?} {lb:?}: {:.1} GFLOP/s",
            isa.name(),
            gf(best[0])
        );
        if grid {
            let mut order: Vec<usize> = (0..blockings.len()).collect();
            order.sort_by(|&x, &y| best[x].total_cmp(&best[y]));
            println!();
            for &i in order.iter().take(5) {
                println!(
                    "  {:.1} GFLOP/s ({:.3}x the hand-chosen time): {:?}",
                    gf(best[i]),
                    best[i] / best[0],
                    blockings[i]
                );
            }
            continue;
        }
        if split || narrow {
            print!(
                ", {} {:.1} GFLOP/s ({:.2}x the time)",
                if split { "by columns" } else { "AVX2 kernels" },
                gf(best[1]),
                best[1] / best[0]
            );
        }
        println!();
    }
}

/// `--grid`: `rows` and every combination of the knobs that matter at a
/// weight gradient's shape (split, reduction block, packing, loop order).
fn grid_of(rows: Blocking) -> Vec<Blocking> {
    let mut out = vec![rows];
    for split_columns in [false, true] {
        for k_block in [128, 256, 512, 1024] {
            for pack_b in [true, false] {
                for rows_outer in [true, false] {
                    for pack_a in [true, false] {
                        let b = Blocking {
                            split_columns,
                            k_block,
                            pack_b,
                            rows_outer,
                            pack_a,
                            ..rows
                        };
                        if b != rows {
                            out.push(b);
                        }
                    }
                }
            }
        }
    }
    out
}

/// `--tile`: see the module's comment.
fn tiles(isa: Isa) {
    for (m, n, k) in [(12, 16, 256), (16, 128, 32), (6, 64, 128)] {
        for adjacent in [false, true] {
            // B and C at a 64-byte boundary (a cache line) and 16 bytes
            // past one (where a large `Vec` from glibc's allocator starts):
            // every 64-byte load of B then spans two lines.
            let rates = [0usize, 4].map(|shift| tile_rate(isa, m, n, k, adjacent, shift));
            let rows = if adjacent { "adjacent" } else { "k apart" };
            println!(
                "{} tiles {m}x{n}x{k}, A's rows {rows}: {:.1} GFLOP/s (B and C 64-byte aligned; {:.1} 16 bytes past a line)",
                isa.name(),
                rates[0],
                rates[1],
            );
        }
    }
    match fma_peak(isa) {
        Some(gf) => println!("{} independent FMAs, one core: {gf:.1} GFLOP/s", isa.name()),
        None => println!("{}: no FMA loop for this kernel set", isa.name()),
    }
}

/// `len` floats starting `shift` floats past a 64-byte boundary, within `buf`.
fn shifted_range(buf: &mut Vec<f32>, len: usize, shift: usize) -> std::ops::Range<usize> {
    buf.resize(len + 16 + shift, 0.0);
    let start = buf.as_ptr().align_offset(64) + shift;
    start..start + len
}

/// Best GFLOP/s of one `m × n × k` tile over operands in L1 (40 rounds),
/// B and C `shift` floats past a 64-byte boundary.
fn tile_rate(isa: Isa, m: usize, n: usize, k: usize, adjacent: bool, shift: usize) -> f64 {
    let a: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 * 0.1).collect();
    let (mut bbuf, mut cbuf) = (Vec::new(), Vec::new());
    let (br, cr) = (
        shifted_range(&mut bbuf, k * n, shift),
        shifted_range(&mut cbuf, m * n, shift),
    );
    for (i, v) in bbuf[br.clone()].iter_mut().enumerate() {
        *v = (i % 5) as f32 * 0.1;
    }
    // A stored m × k (rows k apart) or k × m (rows adjacent).
    let (row_stride, koff) = if adjacent {
        (1, Offsets::dense(k, m))
    } else {
        (k, Offsets::dense(k, 1))
    };
    let bkoff = Offsets::dense(k, n);
    let plan = Plan {
        packed_b: None,
        pack_a: false,
        rows_outer: true,
        tile_rows: 0,
        keep_b_in_place: true,
    };
    let calls = 3_000_000 / (m * n * k / 64).max(1);
    let mut best = f64::MAX;
    for _ in 0..40 {
        let t = Instant::now();
        for _ in 0..calls {
            let am = AMat {
                data: &a,
                base: 0,
                row_stride,
                koff: &koff,
            };
            let bm = BMat {
                data: &bbuf[br.clone()],
                base: 0,
                koff: &bkoff,
            };
            igemm_planned(isa, m, n, am, bm, &mut cbuf[cr.clone()], n, true, plan);
        }
        best = best.min(t.elapsed().as_secs_f64());
    }
    std::hint::black_box(&cbuf);
    2.0 * (m * n * k * calls) as f64 / best / 1e9
}

/// GFLOP/s of 12 independent chains of vector FMAs (best of 5 runs).
fn fma_peak(isa: Isa) -> Option<f64> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        const STEPS: usize = 20_000_000;
        #[target_feature(enable = "avx2,fma")]
        fn ymm() -> f32 {
            let mut acc = [_mm256_set1_ps(0.1); 12];
            let (x, y) = (
                _mm256_set1_ps(std::hint::black_box(0.9999)),
                _mm256_set1_ps(1e-5),
            );
            for _ in 0..std::hint::black_box(STEPS) {
                for a in acc.iter_mut() {
                    *a = _mm256_fmadd_ps(*a, x, y);
                }
            }
            let mut s = [0f32; 8];
            // SAFETY: `s` holds 8 floats.
            unsafe {
                _mm256_storeu_ps(
                    s.as_mut_ptr(),
                    acc.iter().fold(x, |t, a| _mm256_add_ps(t, *a)),
                )
            };
            s[0]
        }
        #[target_feature(enable = "avx512f")]
        fn zmm() -> f32 {
            let mut acc = [_mm512_set1_ps(0.1); 12];
            let (x, y) = (
                _mm512_set1_ps(std::hint::black_box(0.9999)),
                _mm512_set1_ps(1e-5),
            );
            for _ in 0..std::hint::black_box(STEPS) {
                for a in acc.iter_mut() {
                    *a = _mm512_fmadd_ps(*a, x, y);
                }
            }
            _mm512_reduce_add_ps(acc.iter().fold(x, |t, a| _mm512_add_ps(t, *a)))
        }
        let lanes = match isa {
            Isa::Avx512 if isa.available() => 16,
            Isa::Avx2 if isa.available() => 8,
            _ => return None,
        };
        let mut best = f64::MAX;
        for _ in 0..5 {
            let t = Instant::now();
            // SAFETY: the CPU has the kernel set's instructions (checked above).
            let v = unsafe { if lanes == 16 { zmm() } else { ymm() } };
            std::hint::black_box(v);
            best = best.min(t.elapsed().as_secs_f64());
        }
        Some((STEPS * 12 * lanes * 2) as f64 / best / 1e9)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = isa;
        None
    }
}
