//! Times training steps of both mini benchmarks on synthetic data.
//!
//! ```text
//! cargo run -p referee-workloads --release --example bench_step -- \
//!     [--model resnet|llm|all] [--batch N[,N..]] [--steps N] [--warmup N] [--threads N]
//!     [--plan measure|fixed|compare|compare-narrow] [--digest] [--products] [--passes]
//! ```
//! `--plan`: the LLM's products and attention blocks planned by measuring
//! them first (`measure`, the default, as `referee run` does; its choices
//! on stderr) or the hand-chosen ones (`fixed`); both train bitwise the same. `compare`
//! plans, then alternates the planned and the hand-chosen blocking every
//! two steps in this one process (4 × `--steps` steps after 4 untimed) and
//! prints both medians and their ratio (stderr) before the usual line;
//! `compare-narrow` alternates the planned choices with the same choices on
//! the AVX-512 set's own kernels (`narrow` cleared), to see what the AVX2
//! kernels the planner took under that set bring to the step.
//! Prints one JSON object per (model, batch): median / min ms per step and samples/s,
//! and `cpu_ms`, the median CPU time of the process per step (all threads;
//! rayon's idle workers spin a little): with `--threads 1` on a busy
//! machine, a measure that other processes' preemptions do not inflate.
//! `--products` (the LLM) also prints (stderr) each product shape's calls
//! and wall time per timed step, its share of the step and its rate, as
//! the model ran them (operands where the step left them): where the
//! step's matrix time goes, which the planner's warm timings do not show.
//! `--passes` (the LLM) prints (stderr) the same for the step's other
//! passes (norms, attention, SwiGLU, cross-entropy, transposes, the
//! optimiser; `cpu::passes`).
//! `--digest` also prints (stderr) the SHA-256 of the parameters after the
//! last step: a change to the engine that keeps it keeps training bitwise.
//! `--eval N` (the LLM) also times N evaluation batches of the training
//! batch's size after the steps (the forward pass and the loss, as a run's
//! evaluation calls them) and prints (stderr) their median, and the mean
//! loss's bits (the same bits: the same evaluation).

use std::time::Instant;

use referee_workloads::cpu::passes as cpu_passes;
use referee_workloads::cpu::planner::{self, Mode};
use referee_workloads::rng::Rng;
use referee_workloads::runtime::{CpuClock, cpu_seconds};
use referee_workloads::{Device, LlmHparams, LlmTrainer, ResnetHparams, ResnetTrainer};

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// What `--plan compare…` alternates the planned blocking with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Baseline {
    /// The hand-chosen blocking and attention block (`compare`).
    HandChosen,
    /// The planned choices with `narrow` cleared: the AVX-512 set's own
    /// kernels everywhere (`compare-narrow`).
    NotNarrow,
}

/// The kernel set the trainers run on (`REFEREE_CPU_KERNELS` or the CPU's
/// fastest): the one whose plans are printed and compared.
fn kernels(dev: &Device) -> anyhow::Result<referee_workloads::cpu::Isa> {
    match referee_workloads::Engine::for_device(dev)? {
        referee_workloads::Engine::Cpu(isa) => Ok(isa),
        other => anyhow::bail!("bench_step times the CPU engine, not {other:?}"),
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// SHA-256 of the parameters' bits: equal digests mean bitwise-equal training.
fn param_digest(p: &[f32]) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for v in p {
        h.update(v.to_bits().to_le_bytes());
    }
    hex::encode(h.finalize())
}

#[global_allocator]
static ALLOC: referee_workloads::cpu::aligned::CacheLineAligned =
    referee_workloads::cpu::aligned::CacheLineAligned::new();

fn main() -> anyhow::Result<()> {
    referee_workloads::cpu::aligned::engage();
    let args: Vec<String> = std::env::args().collect();
    let threads: usize = arg(&args, "--threads")
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(2);
    // SAFETY: single-threaded at this point, before any candle/rayon use.
    unsafe { referee_workloads::configure_cpu_threads(threads) };
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global()?;
    // On a worker of the pool, as `referee run` trains (its run loop is in
    // `rayon::scope`): the steps' parallel loops are joins between the
    // pool's threads.
    rayon::scope(|_| bench(&args, threads))
}

fn bench(args: &[String], threads: usize) -> anyhow::Result<()> {
    let model = arg(args, "--model").unwrap_or_else(|| "all".into());
    let steps: usize = arg(args, "--steps")
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(20);
    let warmup: usize = arg(args, "--warmup")
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(3);
    let batches: Option<Vec<usize>> =
        arg(args, "--batch").map(|s| s.split(',').map(|x| x.parse().unwrap()).collect());
    let digest = args.iter().any(|a| a == "--digest");
    let products = args.iter().any(|a| a == "--products");
    let passes = args.iter().any(|a| a == "--passes");
    let evals: usize = arg(args, "--eval")
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(0);
    let (plan, compare) = match arg(args, "--plan").as_deref() {
        None | Some("measure") => (Mode::Measure, None),
        Some("fixed") => (Mode::Fixed, None),
        Some("compare") => (Mode::Measure, Some(Baseline::HandChosen)),
        Some("compare-narrow") => (Mode::Measure, Some(Baseline::NotNarrow)),
        Some(other) => {
            anyhow::bail!("--plan {other}: expected measure, fixed, compare or compare-narrow")
        }
    };
    planner::set_mode(plan);
    let dev = Device::Cpu;
    let mut rng = Rng::new(1);

    if model == "resnet" || model == "all" {
        for &b in batches.as_deref().unwrap_or(&[128]) {
            let hp = ResnetHparams {
                batch_size: b,
                ..Default::default()
            };
            let mut tr = ResnetTrainer::new(&hp, 0, &dev)?;
            let px: Vec<f32> = (0..b * 784).map(|_| rng.normal() as f32).collect();
            let lb: Vec<u32> = (0..b).map(|_| rng.below(10) as u32).collect();
            let (mut times, mut cpu) = (Vec::new(), Vec::new());
            for i in 0..warmup + steps {
                let (t0, c0) = (Instant::now(), cpu_seconds(CpuClock::Process));
                tr.train_step(&px, &lb)?;
                if i >= warmup {
                    times.push(t0.elapsed().as_secs_f64() * 1e3);
                    cpu.push((cpu_seconds(CpuClock::Process) - c0) * 1e3);
                }
            }
            if digest {
                eprintln!(
                    "mini_resnet b{b}: parameters after {} steps: {}",
                    warmup + steps,
                    param_digest(tr.flat_parameters())
                );
            }
            let min = times.iter().cloned().fold(f64::MAX, f64::min);
            let med = median(&mut times);
            let cpu_med = median(&mut cpu);
            println!(
                "{{\"impl\":\"referee\",\"model\":\"mini_resnet\",\"batch\":{b},\"threads\":{threads},\"median_ms\":{med:.2},\"min_ms\":{min:.2},\"cpu_ms\":{cpu_med:.2},\"samples_per_s\":{:.1},\"gflops_per_s\":{:.2},\"params\":{}}}",
                b as f64 * 1e3 / med,
                tr.flops_per_sample() * b as f64 / med / 1e6,
                tr.num_parameters()
            );
        }
    }
    if model == "llm" || model == "all" {
        for &b in batches.as_deref().unwrap_or(&[16]) {
            let hp = LlmHparams {
                batch_size: b,
                ..Default::default()
            };
            let mut tr = LlmTrainer::new(&hp, 0, &dev)?;
            tr.prepare(b)?;
            if plan == Mode::Measure {
                let isa = kernels(&dev)?;
                for e in planner::export(isa, threads) {
                    let g = e.gain().map_or("-".into(), |g| format!("{g:.3}"));
                    // The chosen blocking's best time, and its rate.
                    let took = e.best_micros(e.blocking).map_or("-".into(), |us| {
                        let gf = e.shape.flops() / us / 1e3;
                        format!("{us:.0} µs, {gf:.0} GFLOP/s")
                    });
                    eprintln!(
                        "plan {}: {:?} (time vs default {g}; {took})",
                        e.shape, e.blocking
                    );
                    // The trial in the step: each candidate's median, the
                    // choice before it first.
                    let trials = planner::export_trials(isa, threads);
                    if let Some(r) = trials.iter().find(|r| r.before.shape == e.shape) {
                        let us: Vec<String> = r
                            .medians
                            .iter()
                            .map(|t| format!("{:.0}", t.micros))
                            .collect();
                        let moved = if r.changed() { "moved" } else { "kept" };
                        eprintln!("  in the step: {} µs; {moved}", us.join(", "));
                    }
                }
                for e in planner::export_attention(isa, threads) {
                    let g = e.gain().map_or("-".into(), |g| format!("{g:.3}"));
                    let kernels = if e.narrow { ", AVX2 kernels" } else { "" };
                    let kernels = if e.wide {
                        format!("{kernels}, row-wise passes 16 lanes wide")
                    } else {
                        kernels.to_string()
                    };
                    let mut others = String::new();
                    if !e.narrow_timings.is_empty() {
                        others += &format!("; AVX2 kernels {:?}", e.narrow_timings);
                    }
                    if !e.wide_timings.is_empty() {
                        others += &format!("; 16 lanes {:?}", e.wide_timings);
                    }
                    eprintln!(
                        "plan {}: {} queries per block{kernels} (time vs default {g}; {:?}{others})",
                        e.shape, e.block, e.timings
                    );
                }
            }
            let n = b * hp.seq_len;
            let toks: Vec<u32> = (0..n + 1)
                .map(|_| rng.below(hp.vocab_size) as u32)
                .collect();
            if let Some(baseline) = compare {
                let isa = kernels(&dev)?;
                let planned = planner::export(isa, threads);
                let attention = planner::export_attention(isa, threads);
                let mut t = [Vec::new(), Vec::new()];
                planner::set_mode(Mode::Fixed);
                for r in 0..4 + 4 * steps {
                    // Steps 0, 1: the baseline; 2, 3: planned; …
                    let which = (r / 2) % 2;
                    planner::clear();
                    if which == 1 {
                        planner::import(isa, threads, planned.clone());
                        planner::import_attention(isa, threads, attention.clone());
                    } else if baseline == Baseline::NotNarrow {
                        let mut p = planned.clone();
                        p.iter_mut().for_each(|e| e.blocking.narrow = false);
                        let mut a = attention.clone();
                        a.iter_mut().for_each(|e| e.narrow = false);
                        planner::import(isa, threads, p);
                        planner::import_attention(isa, threads, a);
                    }
                    let t0 = Instant::now();
                    tr.train_step(&toks[..n], &toks[1..])?;
                    if r >= 4 {
                        t[which].push(t0.elapsed().as_secs_f64() * 1e3);
                    }
                }
                let (f, p) = (median(&mut t[0]), median(&mut t[1]));
                let base = match baseline {
                    Baseline::HandChosen => "hand-chosen",
                    Baseline::NotNarrow => "planned without the AVX2 kernels",
                };
                eprintln!(
                    "mini_llm b{b}: {base} {f:.1} ms, planned {p:.1} ms per step (medians of {} each): {:.3}",
                    t[0].len(),
                    p / f
                );
                planner::import(isa, threads, planned);
                planner::import_attention(isa, threads, attention);
            }
            let (mut times, mut cpu) = (Vec::new(), Vec::new());
            for i in 0..warmup + steps {
                if i == warmup && products {
                    planner::profile_products(true);
                }
                if i == warmup && passes {
                    cpu_passes::profile_passes(true);
                }
                let (t0, c0) = (Instant::now(), cpu_seconds(CpuClock::Process));
                tr.train_step(&toks[..n], &toks[1..])?;
                if i >= warmup {
                    times.push(t0.elapsed().as_secs_f64() * 1e3);
                    cpu.push((cpu_seconds(CpuClock::Process) - c0) * 1e3);
                }
            }
            // Each profiled piece's share of the timed steps, as the model ran it.
            let step_ms: f64 = times.iter().sum();
            let per_step = |calls: usize, seconds: f64| {
                format!(
                    "{} per step, {:.2} ms per step ({:.1} % of the step)",
                    calls / steps,
                    seconds * 1e3 / steps as f64,
                    100.0 * seconds * 1e3 / step_ms
                )
            };
            if products {
                for p in planner::product_times() {
                    let share = per_step(p.calls, p.seconds);
                    eprintln!("products {}: {share}, {:.0} GFLOP/s", p.shape, p.gflops());
                }
                planner::profile_products(false);
            }
            if passes {
                for p in cpu_passes::pass_times() {
                    let share = per_step(p.calls as usize, p.seconds);
                    eprintln!("passes {}: {share}", p.pass.name());
                }
                cpu_passes::profile_passes(false);
            }
            if digest {
                eprintln!(
                    "mini_llm b{b}: parameters after {} steps: {}",
                    warmup + steps,
                    param_digest(tr.flat_parameters())
                );
            }
            if evals > 0 {
                let (mut t, mut loss) = (Vec::new(), 0f64);
                for _ in 0..evals {
                    let batch = (toks[..n].to_vec(), toks[1..].to_vec());
                    let t0 = Instant::now();
                    loss = tr.evaluate(&mut std::iter::once(batch))?;
                    t.push(t0.elapsed().as_secs_f64() * 1e3);
                }
                eprintln!(
                    "mini_llm b{b}: evaluation {:.2} ms a batch (median of {evals}), loss bits {:016x}",
                    median(&mut t),
                    loss.to_bits()
                );
            }
            let min = times.iter().cloned().fold(f64::MAX, f64::min);
            let med = median(&mut times);
            let cpu_med = median(&mut cpu);
            println!(
                "{{\"impl\":\"referee\",\"model\":\"mini_llm\",\"batch\":{b},\"threads\":{threads},\"median_ms\":{med:.2},\"min_ms\":{min:.2},\"cpu_ms\":{cpu_med:.2},\"samples_per_s\":{:.1},\"gflops_per_s\":{:.2},\"params\":{}}}",
                b as f64 * 1e3 / med,
                tr.flops_per_sample() * b as f64 / med / 1e6,
                tr.num_parameters()
            );
        }
    }
    Ok(())
}
