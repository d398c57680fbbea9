//! What one parallel loop costs on this machine's rayon pool, entered from
//! outside it (a thread that hands the loop to the pool and sleeps until it
//! is done) and from one of its own threads (`rayon::scope`, as `referee
//! run` trains since f89b698): empty loops of two chunks, back to back and
//! after `--gap` µs of serial work each.
//!
//! ```text
//! pool_probe [--threads N] [--loops N] [--gap US]
//! ```
use std::time::Instant;

use rayon::prelude::*;

fn arg(args: &[String], name: &str, default: usize) -> usize {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Microseconds per loop of `loops` loops, each after `gap` µs of spinning.
fn per_loop(v: &mut [u32], loops: usize, gap: u64) -> f64 {
    let t = Instant::now();
    for _ in 0..loops {
        let s = Instant::now();
        while (s.elapsed().as_micros() as u64) < gap {}
        v.par_chunks_mut(64).for_each(|c| c[0] += 1);
    }
    t.elapsed().as_secs_f64() * 1e6 / loops as f64 - gap as f64
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let threads = arg(&args, "--threads", 2);
    let loops = arg(&args, "--loops", 20_000);
    let gap = arg(&args, "--gap", 50) as u64;
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global()
        .expect("the global pool is built once");
    let mut v = vec![0u32; 128];
    let outside = per_loop(&mut v, loops, 0);
    let outside_gap = per_loop(&mut v, loops / 10, gap);
    let (inside, inside_gap) = rayon::scope(|_| {
        (
            per_loop(&mut v, loops, 0),
            per_loop(&mut v, loops / 10, gap),
        )
    });
    println!(
        "{{\"threads\":{threads},\"outside_us\":{outside:.2},\"inside_us\":{inside:.2},\"gap_us\":{gap},\"outside_after_gap_us\":{outside_gap:.2},\"inside_after_gap_us\":{inside_gap:.2}}}"
    );
}
