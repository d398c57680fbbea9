//! Measures the CPU engine's convolutions alone at mini_resnet's shapes
//! (forward, weight gradient, input gradient; best of N repetitions), to
//! see which dominates a training step and to tune the kernels on a new CPU.
//! Uses the rayon pool: `RAYON_NUM_THREADS=1` for one thread. Timed by the
//! process's CPU time where `--cpu` (a busy machine's preemptions do not
//! inflate it), by the wall clock otherwise.
//!
//! ```text
//! conv_probe [--isa avx512|avx2|portable] [--batch N] [--reps N] [--cpu]
//! ```
use std::time::Instant;

use referee_workloads::cpu::conv::{Conv, Image};
use referee_workloads::cpu::kernels::Isa;
use referee_workloads::rng::Rng;
use referee_workloads::runtime::{CpuClock, cpu_seconds};

fn image(rng: &mut Rng, n: usize, h: usize, c: usize, pad: usize) -> Image {
    let mut img = Image::default();
    img.ensure(n, h, h, c, pad);
    for i in 0..n {
        for y in 0..h {
            let s = img.at(i, y, 0);
            let len = img.row_len();
            let v = rng.normal_vec(len, 1.0);
            img.data[s..s + len].copy_from_slice(&v);
        }
    }
    img
}

/// The element-wise passes around the convolutions (batch norm, ReLU,
/// residual) at each stage's shape.
fn norm_passes(n: usize, rng: &mut Rng, clock: &dyn Fn() -> f64, reps: usize) {
    use referee_workloads::cpu::norm::{self, BatchNorm, Residual};
    let mut sum = 0.0;
    for (side, c) in [(28, 16), (14, 32), (7, 64)] {
        let z = image(rng, n, side, c, 0);
        let x = image(rng, n, side, c, 1);
        let g = image(rng, n, side, c, 1);
        let mut out = image(rng, n, side, c, 1);
        let mut dz = image(rng, n, side, c, 1);
        let mut params = rng.normal_vec(2 * c, 1.0);
        params[..c].iter_mut().for_each(|v| *v = 1.0 + 0.1 * *v);
        let mut grads = vec![0f32; 2 * c];
        let mut bn = BatchNorm::new(c, 0, c, 1e-5, 0.1);
        let mut best = [f64::MAX; 6];
        for _ in 0..reps {
            let t0 = clock();
            let a = bn.train(&z, &params);
            let t1 = clock();
            norm::apply(&z, &a, Residual::Identity(&x), true, &mut out);
            let t2 = clock();
            norm::relu_grad(&g, &out, &mut dz);
            let t3 = clock();
            bn.backward(&z, &g, None, &params, &mut grads, &mut dz);
            let t4 = clock();
            bn.backward(&z, &g, Some(&out), &params, &mut grads, &mut dz);
            let t5 = clock();
            norm::add_into(&g, &mut dz);
            let t6 = clock();
            for (b, d) in
                best.iter_mut()
                    .zip([t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5])
            {
                *b = b.min(d);
            }
        }
        println!(
            "norm {side:2}x{side:2}x{c:2}: train {:.2} | apply+res+relu {:.2} | relu_grad {:.2} | bwd {:.2} | bwd masked {:.2} | add_into {:.2} ms",
            best[0] * 1e3,
            best[1] * 1e3,
            best[2] * 1e3,
            best[3] * 1e3,
            best[4] * 1e3,
            best[5] * 1e3
        );
        sum += best.iter().sum::<f64>();
    }
    println!("norm passes, one of each per stage: {:.2} ms", sum * 1e3);
}

#[global_allocator]
static ALLOC: referee_workloads::cpu::aligned::CacheLineAligned =
    referee_workloads::cpu::aligned::CacheLineAligned::new();

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
    let reps: usize = get("--reps").and_then(|v| v.parse().ok()).unwrap_or(3);
    let n: usize = get("--batch").and_then(|v| v.parse().ok()).unwrap_or(128);
    let cpu = args.iter().any(|a| a == "--cpu");
    let clock = || {
        if cpu {
            cpu_seconds(CpuClock::Process)
        } else {
            static T0: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
            T0.get_or_init(Instant::now).elapsed().as_secs_f64()
        }
    };
    // (k, stride, cin, cout, input side, input border): mini_resnet's convolutions.
    let shapes = [
        ("stem", 3, 1, 1, 16, 28, 1),
        ("s1 3x3", 3, 1, 16, 16, 28, 1),
        ("s2 3x3/2", 3, 2, 16, 32, 28, 1),
        ("s2 1x1/2", 1, 2, 16, 32, 28, 1),
        ("s2 3x3", 3, 1, 32, 32, 14, 1),
        ("s3 3x3/2", 3, 2, 32, 64, 14, 1),
        ("s3 1x1/2", 1, 2, 32, 64, 14, 1),
        ("s3 3x3", 3, 1, 64, 64, 7, 1),
    ];
    let mut rng = Rng::new(1);
    let mut total = [0f64; 3];
    println!(
        "isa {} batch {n} threads {}",
        isa.name(),
        rayon::current_num_threads()
    );
    for (name, k, stride, cin, cout, h, xpad) in shapes {
        let g = Conv {
            k,
            stride,
            pad: k / 2,
            cin,
            cout,
        };
        let o = g.out_size(h);
        let x = image(&mut rng, n, h, cin, xpad);
        let w = rng.normal_vec(g.weight_len(), 0.1);
        let dy = image(&mut rng, n, o, cout, g.grad_pad());
        let mut y = Image::default();
        y.ensure(n, o, o, cout, 0);
        let mut dw = vec![0f32; g.weight_len()];
        let mut dx = Image::default();
        dx.ensure(n, h, h, cin, 1);
        let flops = 2.0 * (n * o * o * k * k * cin * cout) as f64;
        let mut best = [f64::MAX; 3];
        for _ in 0..reps {
            let t = clock();
            g.forward(isa, &x, &w, &mut y, false);
            let t1 = clock();
            g.grad_weight(isa, &x, &dy, &mut dw);
            let t2 = clock();
            if name != "stem" {
                g.grad_input(isa, &dy, &w, &mut dx, false);
            }
            let t3 = clock();
            for (b, d) in best.iter_mut().zip([t1 - t, t2 - t1, t3 - t2]) {
                *b = b.min(d);
            }
        }
        let gf = |s: f64| if s > 0.0 { flops / s / 1e9 } else { 0.0 };
        println!(
            "{name:10} fwd {:7.2} ms {:5.1} GF/s | dw {:7.2} ms {:5.1} GF/s | dx {:7.2} ms {:5.1} GF/s",
            best[0] * 1e3,
            gf(best[0]),
            best[1] * 1e3,
            gf(best[1]),
            best[2] * 1e3,
            gf(best[2])
        );
        for (t, b) in total.iter_mut().zip(best) {
            *t += b;
        }
    }
    norm_passes(n, &mut rng, &clock, reps);
    println!(
        "total      fwd {:7.2} ms | dw {:7.2} ms | dx {:7.2} ms | all {:7.2} ms",
        total[0] * 1e3,
        total[1] * 1e3,
        total[2] * 1e3,
        total.iter().sum::<f64>() * 1e3
    );
}
