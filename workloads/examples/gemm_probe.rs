//! Measures the CPU engine's dense products alone (best GFLOP/s of N
//! repetitions per shape) at the LLM's shapes, to tune the kernel on a new
//! CPU. Uses the rayon pool: `RAYON_NUM_THREADS=1` for one thread.
//!
//! ```text
//! gemm_probe [--isa avx512|avx2|portable] [--reps N] [--one] [--cold] [--split | --narrow]
//! ```
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
use std::time::Instant;

use referee_workloads::cpu::dense::{Blocking, Layout, Threads, matmul_blocked};
use referee_workloads::cpu::kernels::Isa;
use referee_workloads::runtime::{CpuClock, cpu_seconds};

fn main() {
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
    let narrow = args.iter().any(|a| a == "--narrow");
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
    use Layout::{Normal as N, Transposed as T};
    // (m, n, k, layout of a, layout of b): the mini LLM's products at b16.
    let shapes = [
        (128, 768, 2048, T, N),
        (128, 384, 2048, T, N),
        (384, 128, 2048, T, N),
        (2048, 128, 2048, T, N),
        (2048, 128, 768, N, T),
        (2048, 768, 128, N, N),
        (2048, 2048, 128, N, T),
        (2048, 128, 2048, N, N),
    ];
    for (m, n, k, la, lb) in shapes {
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
