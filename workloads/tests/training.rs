//! Behavioural tests of the two trainers (no network, no data files).

use referee_workloads::optim::clip_grad_norm;
use referee_workloads::rng::Rng;
use referee_workloads::{
    DecayKind, Device, LlmHparams, LlmTrainer, LrSchedule, Precision, ResnetHparams, ResnetTrainer,
    device_from_str,
};

mod common;
use common::tiny_llm;

const S: usize = 8; // tiny image side

fn tiny_resnet() -> ResnetHparams {
    ResnetHparams {
        image_size: S,
        base_width: 4,
        blocks: [1, 1, 1],
        batch_size: 16,
        base_lr: 0.05,
        warmup_steps: 2,
        total_steps: 100,
        ..Default::default()
    }
}

/// Images whose class is encoded by which row is bright, plus noise.
fn image_batch(seed: u64, n: usize) -> (Vec<f32>, Vec<u32>) {
    let mut r = Rng::new(seed);
    let mut px = Vec::with_capacity(n * S * S);
    let mut lb = Vec::with_capacity(n);
    for _ in 0..n {
        let c = r.below(4);
        lb.push(c as u32);
        for y in 0..S {
            for _ in 0..S {
                let base = if y / 2 == c { 1.5 } else { -0.5 };
                px.push(base + 0.3 * r.normal() as f32);
            }
        }
    }
    (px, lb)
}

/// Token sequences following `x[t+1] = (x[t] + 3) mod 16` from a random start.
fn token_batch(seed: u64, b: usize, t: usize) -> (Vec<u32>, Vec<u32>) {
    let mut r = Rng::new(seed);
    let (mut inp, mut tgt) = (Vec::new(), Vec::new());
    for _ in 0..b {
        let mut x = r.below(16) as u32;
        for _ in 0..t {
            inp.push(x);
            x = (x + 3) % 16;
            tgt.push(x);
        }
    }
    (inp, tgt)
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

fn max_rel_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs() / (1e-3 + x.abs().max(y.abs())))
        .fold(0.0, f32::max)
}

#[test]
fn resnet_loss_decreases() {
    let mut tr = ResnetTrainer::new(&tiny_resnet(), 1, &Device::Cpu).unwrap();
    let (px, lb) = image_batch(7, 32);
    let first = tr.train_step(&px, &lb).unwrap().loss;
    let mut last = first;
    for i in 0..40 {
        let (px, lb) = image_batch(100 + i, 32);
        last = tr.train_step(&px, &lb).unwrap().loss;
    }
    eprintln!("resnet loss {first} -> {last}");
    assert!(last < 0.3 * first, "loss {first} -> {last}");
    let acc = tr
        .evaluate(&mut std::iter::once(image_batch(8, 64)))
        .unwrap();
    eprintln!("resnet held-out accuracy {acc}");
    assert!(acc > 0.9, "held-out accuracy {acc}");
}

#[test]
fn llm_loss_decreases() {
    let mut tr = LlmTrainer::new(&tiny_llm(), 1, &Device::Cpu).unwrap();
    let (x, y) = token_batch(3, 4, 8);
    let first = tr.train_step(&x, &y).unwrap().loss;
    assert!(
        (first - (16f32).ln()).abs() < 0.3,
        "initial loss {first} should be near ln(16)"
    );
    let mut last = first;
    for _ in 0..60 {
        last = tr.train_step(&x, &y).unwrap().loss;
    }
    assert!(last < 0.3 * first, "loss {first} -> {last}");
    let nll = tr
        .evaluate(&mut std::iter::once(token_batch(4, 4, 8)))
        .unwrap();
    assert!(nll < 0.5 * f64::from(first), "held-out nll {nll}");
}

/// bf16 mixed precision: the linear layers really compute in bf16 (the
/// first gradients differ from f32 by about bf16's resolution, not by f32
/// round-off), the master weights stay f32, and training still learns.
#[test]
fn bf16_linear_layers_train_close_to_f32() {
    let bf16 = LlmHparams {
        precision: Precision::Bf16,
        ..tiny_llm()
    };
    let (x, y) = token_batch(3, 4, 8);
    let mut a = LlmTrainer::new(&tiny_llm(), 1, &Device::Cpu).unwrap();
    let mut b = LlmTrainer::new(&bf16, 1, &Device::Cpu).unwrap();
    assert_eq!(
        a.flat_parameters(),
        b.flat_parameters(),
        "same initial weights"
    );
    let (la, ga) = a.compute_gradients(&x, &y).unwrap();
    let (lb, gb) = b.compute_gradients(&x, &y).unwrap();
    let rel = max_abs_diff(&ga, &gb) / ga.iter().fold(0f32, |m, g| m.max(g.abs()));
    eprintln!("first step: loss {la} vs {lb}, max gradient difference {rel:e} of the largest");
    assert!((la - lb).abs() < 0.02, "loss {la} vs {lb}");
    // bf16 keeps 8 significant bits (relative step 2^-8 ≈ 4e-3).
    assert!(rel > 1e-4, "bf16 must change the arithmetic: {rel:e}");
    assert!(rel < 0.1, "but only by rounding: {rel:e}");
    b.apply_gradients(&gb).unwrap();
    let mut last = lb;
    for _ in 0..60 {
        last = b.train_step(&x, &y).unwrap().loss;
    }
    assert!(last < 0.3 * lb, "bf16 loss {lb} -> {last}");
    assert!(bf16.precision.as_str() == "bf16" && tiny_llm().precision.as_str() == "fp32");
    let parsed: LlmHparams = serde_json::from_str(r#"{"precision": "bf16"}"#).unwrap();
    assert_eq!(parsed.precision, Precision::Bf16);
    assert!(serde_json::from_str::<LlmHparams>(r#"{"precision": "fp8"}"#).is_err());
}

#[test]
fn split_step_equals_train_step() {
    let (px, lb) = image_batch(1, 16);
    let mut a = ResnetTrainer::new(&tiny_resnet(), 5, &Device::Cpu).unwrap();
    let mut b = ResnetTrainer::new(&tiny_resnet(), 5, &Device::Cpu).unwrap();
    for _ in 0..3 {
        let out = a.train_step(&px, &lb).unwrap();
        let (loss, g) = b.compute_gradients(&px, &lb).unwrap();
        b.apply_gradients(&g).unwrap();
        assert_eq!(out.loss, loss);
    }
    assert_eq!(a.flat_parameters(), b.flat_parameters());

    let (x, y) = token_batch(1, 4, 8);
    let mut a = LlmTrainer::new(&tiny_llm(), 5, &Device::Cpu).unwrap();
    let mut b = LlmTrainer::new(&tiny_llm(), 5, &Device::Cpu).unwrap();
    for _ in 0..3 {
        let out = a.train_step(&x, &y).unwrap();
        let (loss, g) = b.compute_gradients(&x, &y).unwrap();
        b.apply_gradients(&g).unwrap();
        assert_eq!(out.loss, loss);
        assert_eq!(a.current_lr(), b.current_lr());
    }
    assert_eq!(a.flat_parameters(), b.flat_parameters());
}

/// Data parallelism: averaging the flat gradients of 2 ranks (equal local batches)
/// and applying them equals one step on the concatenated batch, up to float
/// summation order: max relative parameter difference < 1e-4 after 3 steps.
#[test]
fn two_rank_average_equals_one_rank_step() {
    let mut one = LlmTrainer::new(&tiny_llm(), 9, &Device::Cpu).unwrap();
    let mut two = LlmTrainer::new(&tiny_llm(), 9, &Device::Cpu).unwrap();
    for step in 0..3 {
        let (x, y) = token_batch(100 + step, 4, 8);
        one.train_step(&x, &y).unwrap();
        let half = x.len() / 2;
        let (_, g0) = two.compute_gradients(&x[..half], &y[..half]).unwrap();
        let (_, g1) = two.compute_gradients(&x[half..], &y[half..]).unwrap();
        let avg: Vec<f32> = g0.iter().zip(&g1).map(|(a, b)| 0.5 * (a + b)).collect();
        two.apply_gradients(&avg).unwrap();
    }
    let d = max_abs_diff(one.flat_parameters(), two.flat_parameters());
    eprintln!("llm 2-rank vs 1-rank max abs diff {d}");
    // Adam moves each parameter by about lr = 1e-2 per step; allow 0.1 % of one step.
    assert!(d < 1e-5, "llm: max abs difference {d}");

    // ResNet: BatchNorm statistics are per rank, so ranks holding identical
    // halves reproduce the concatenated batch exactly (same batch statistics).
    let mut one = ResnetTrainer::new(&tiny_resnet(), 9, &Device::Cpu).unwrap();
    let mut two = ResnetTrainer::new(&tiny_resnet(), 9, &Device::Cpu).unwrap();
    for step in 0..3 {
        let (px, lb) = image_batch(200 + step, 8);
        let px2 = [px.clone(), px.clone()].concat();
        let lb2 = [lb.clone(), lb.clone()].concat();
        one.train_step(&px2, &lb2).unwrap();
        let (_, g0) = two.compute_gradients(&px, &lb).unwrap();
        let (_, g1) = two.compute_gradients(&px, &lb).unwrap();
        let avg: Vec<f32> = g0.iter().zip(&g1).map(|(a, b)| 0.5 * (a + b)).collect();
        two.apply_gradients(&avg).unwrap();
    }
    let d = max_rel_diff(one.flat_parameters(), two.flat_parameters());
    eprintln!("resnet 2-rank vs 1-rank max rel diff {d}");
    assert!(d < 1e-4, "resnet: max relative difference {d}");
}

#[test]
fn same_seed_same_losses_different_seed_different() {
    let run = |seed: u64| {
        let mut tr = LlmTrainer::new(&tiny_llm(), seed, &Device::Cpu).unwrap();
        (0..4)
            .map(|i| {
                let (x, y) = token_batch(i, 4, 8);
                tr.train_step(&x, &y).unwrap().loss
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(run(3), run(3));
    assert_ne!(run(3), run(4));
    let run = |seed: u64| {
        let mut tr = ResnetTrainer::new(&tiny_resnet(), seed, &Device::Cpu).unwrap();
        (0..4)
            .map(|i| {
                let (px, lb) = image_batch(i, 16);
                tr.train_step(&px, &lb).unwrap().loss
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(run(3), run(3));
    assert_ne!(run(3), run(4));
}

#[test]
fn lr_schedule_values() {
    let s = LrSchedule {
        base_lr: 1.0,
        end_lr: 0.1,
        warmup_steps: 10,
        total_steps: 110,
        decay: DecayKind::Cosine,
    };
    assert!((s.lr(0) - 0.1).abs() < 1e-12, "first warm-up step");
    assert!((s.lr(4) - 0.5).abs() < 1e-12);
    assert!(
        (s.lr(9) - 1.0).abs() < 1e-12,
        "last warm-up step reaches base"
    );
    assert!((s.lr(10) - 1.0).abs() < 1e-12, "decay starts at base");
    assert!((s.lr(60) - 0.55).abs() < 1e-12, "cosine midpoint");
    assert!(s.lr(109) > 0.1 && s.lr(109) < 0.101);
    assert_eq!(s.lr(110), 0.1);
    assert_eq!(s.lr(10_000), 0.1);
    let p = LrSchedule {
        decay: DecayKind::Polynomial { power: 2.0 },
        ..s
    };
    assert!((p.lr(60) - (0.1 + 0.9 * 0.25)).abs() < 1e-12);
    assert_eq!(p.lr(110), 0.1);

    // The trainer reports and uses the scheduled value step by step.
    let hp = LlmHparams {
        base_lr: 1e-2,
        end_lr: 1e-3,
        warmup_steps: 2,
        total_steps: 4,
        ..tiny_llm()
    };
    let mut tr = LlmTrainer::new(&hp, 0, &Device::Cpu).unwrap();
    let (x, y) = token_batch(0, 2, 8);
    let lrs: Vec<f64> = (0..5).map(|_| tr.train_step(&x, &y).unwrap().lr).collect();
    assert_eq!(lrs, (0..5).map(|i| hp.schedule().lr(i)).collect::<Vec<_>>());
    assert_eq!(lrs[0], 5e-3);
    assert_eq!(lrs[1], 1e-2);
    assert_eq!(lrs[4], 1e-3);
    assert_eq!(tr.current_lr(), 1e-3);
}

/// The gradient norm (logged, and the clipping factor) is the same bits on
/// any number of threads and from call to call: a parallel `sum` adds its
/// pieces as the threads split them, which differs between 1 and 4 threads
/// (and now and then between two calls on 2).
#[test]
fn gradient_norm_is_the_same_bits_on_any_threads() {
    let g = Rng::new(5).normal_vec(1_115_264, 1e-3);
    let norm_on = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            (0..8)
                .map(|_| clip_grad_norm(&mut g.clone(), 1e9).to_bits())
                .collect::<Vec<_>>()
        })
    };
    let one = norm_on(1);
    assert!(one.iter().all(|&n| n == one[0]), "1 thread: {one:?}");
    for threads in [2, 3, 4] {
        assert_eq!(norm_on(threads), one, "{threads} threads against 1");
    }
    let exact: f64 = g.iter().map(|&x| f64::from(x) * f64::from(x)).sum();
    assert!((f64::from_bits(one[0]) - exact.sqrt()).abs() < 1e-12);
}

/// A NaN or an infinity anywhere in a gradient (the scan runs in parallel
/// blocks: first, middle and last) is refused before any parameter moves.
#[test]
fn non_finite_gradients_are_refused_wherever_they_are() {
    let mut tr = LlmTrainer::new(&LlmHparams::default(), 0, &Device::Cpu).unwrap();
    let before = tr.flat_parameters().to_vec();
    let n = before.len();
    assert!(n > 100_000, "a gradient of several blocks ({n} values)");
    for at in [0, n / 2 + 7, n - 1] {
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            let mut g = vec![1e-4f32; n];
            g[at] = bad;
            let e = tr.apply_gradients(&g).unwrap_err();
            assert!(e.to_string().contains("non-finite"), "{at} {bad}: {e}");
            assert!(tr.flat_parameters() == &before[..], "{at} {bad}: moved");
        }
    }
    tr.apply_gradients(&vec![1e-4f32; n]).unwrap();
    assert!(tr.flat_parameters() != &before[..]);
}

#[test]
fn clipping_caps_global_norm() {
    let mut g = vec![3.0f32, 4.0, 0.0, 0.0]; // norm 5
    let n = clip_grad_norm(&mut g, 1.0);
    assert!((n - 5.0).abs() < 1e-9);
    let after = g.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((after - 1.0).abs() < 1e-5, "norm after clipping {after}");
    let mut small = vec![0.3f32, 0.4];
    clip_grad_norm(&mut small, 1.0);
    assert_eq!(small, vec![0.3, 0.4]);

    // Through the trainer: a huge gradient moves no parameter by more than
    // Adam's first-step bound (lr), and the pre-clip norm is reported.
    let mut tr = LlmTrainer::new(&tiny_llm(), 0, &Device::Cpu).unwrap();
    let before = tr.flat_parameters().to_vec();
    let lr = tr.current_lr();
    let huge = vec![1e3f32; before.len()];
    tr.apply_gradients(&huge).unwrap();
    assert!(tr.last_grad_norm() > 1e3);
    let moved = before
        .iter()
        .zip(tr.flat_parameters())
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max);
    assert!(
        f64::from(moved) <= lr * 1.01 + 1e-6,
        "moved {moved} with lr {lr}"
    );
}

#[test]
fn causal_mask_hides_future_tokens() {
    let hp = tiny_llm();
    let mut tr = LlmTrainer::new(&hp, 2, &Device::Cpu).unwrap();
    let (x, _) = token_batch(5, 1, 8);
    let a = tr.logits(&x).unwrap();
    let mut x2 = x.clone();
    x2[5] = (x2[5] + 7) % 16;
    let b = tr.logits(&x2).unwrap();
    let v = hp.vocab_size;
    assert_eq!(
        &a[..5 * v],
        &b[..5 * v],
        "positions before the change must be identical"
    );
    assert_ne!(
        &a[5 * v..6 * v],
        &b[5 * v..6 * v],
        "the changed position must change"
    );
    assert_ne!(&a[7 * v..], &b[7 * v..], "later positions see the change");
}

#[test]
fn rope_makes_the_model_position_aware() {
    // Without position information, causal attention is invariant to permuting
    // earlier tokens: the last position would give the same logits for
    // [a, b, ...] and [b, a, ...]. RoPE makes the order matter.
    let hp = tiny_llm();
    let mut tr = LlmTrainer::new(&hp, 4, &Device::Cpu).unwrap();
    let x = [1u32, 9, 4, 4, 7, 2, 5, 3];
    let mut y = x;
    y.swap(0, 1);
    let (a, b) = (tr.logits(&x).unwrap(), tr.logits(&y).unwrap());
    let v = hp.vocab_size;
    let d = a[7 * v..]
        .iter()
        .zip(&b[7 * v..])
        .map(|(p, q)| (p - q).abs())
        .fold(0.0, f32::max);
    assert!(
        d > 1e-5,
        "swapping earlier tokens left the last logits unchanged ({d})"
    );
    // ... while positions before the swap are unaffected only if they are before it (none here),
    // and the model is still causal: position 2.. differ, positions are computed per prefix.
}

#[test]
fn batch_norm_train_vs_eval() {
    let mut tr = ResnetTrainer::new(&tiny_resnet(), 3, &Device::Cpu).unwrap();
    let (px, _) = image_batch(11, 4);
    let (other, _) = image_batch(12, 4);
    let n = S * S;
    // batch A = [x0, x1, x2, x3], batch B = [x0, y1, y2, y3]
    let batch_b = [&px[..n], &other[n..]].concat();
    // Eval mode: a sample's output does not depend on the rest of the batch.
    let ea = tr.logits(&px, false).unwrap();
    let eb = tr.logits(&batch_b, false).unwrap();
    assert_eq!(&ea[..10], &eb[..10]);
    // Train mode: batch statistics make it depend on the other samples.
    let ta = tr.logits(&px, true).unwrap();
    let tb = tr.logits(&batch_b, true).unwrap();
    assert_ne!(&ta[..10], &tb[..10]);
    // Running statistics move towards the batch statistics: after many training
    // forwards on one batch, eval output approaches train output on that batch.
    let mut fresh = ResnetTrainer::new(&tiny_resnet(), 3, &Device::Cpu).unwrap();
    let (big, lb) = image_batch(13, 64);
    fresh.train_step(&big, &lb).unwrap(); // gains away from 0 so all BN layers matter
    let gap = |t: &mut ResnetTrainer| {
        let tr_out = t.logits(&big, true).unwrap();
        let ev_out = t.logits(&big, false).unwrap();
        tr_out
            .iter()
            .zip(&ev_out)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f32::max)
    };
    let g0 = gap(&mut fresh);
    for _ in 0..60 {
        fresh.logits(&big, true).unwrap();
    }
    let g1 = gap(&mut fresh);
    assert!(g1 < 0.1 * g0, "train/eval gap {g0} -> {g1}");
}

#[test]
fn device_selection_never_panics() {
    assert!(device_from_str("cpu", 0).unwrap().is_cpu());
    let e = device_from_str("cuda:0", 0).unwrap_err().to_string();
    assert!(e.contains("cuda"), "{e}");
    assert!(device_from_str("cuda", 0).is_err());
    assert!(device_from_str("cuda:x", 0).is_err());
    assert!(device_from_str("tpu", 0).is_err());
}

#[test]
fn hparams_serde_defaults_and_validation() {
    let hp: ResnetHparams = serde_json::from_str("{}").unwrap();
    assert_eq!(hp, ResnetHparams::default());
    let hp: LlmHparams = serde_json::from_str(r#"{"batch_size": 8}"#).unwrap();
    assert_eq!(hp.batch_size, 8);
    assert_eq!(hp.beta2, 0.95);
    assert!(serde_json::from_str::<LlmHparams>(r#"{"bogus": 1}"#).is_err());
    let bad = LlmHparams {
        n_heads: 3,
        ..tiny_llm()
    };
    assert!(LlmTrainer::new(&bad, 0, &Device::Cpu).is_err());
    let mut tr = LlmTrainer::new(&tiny_llm(), 0, &Device::Cpu).unwrap();
    assert!(
        tr.train_step(&[1, 2, 3], &[1, 2, 3]).is_err(),
        "not a multiple of seq_len"
    );
    assert!(
        tr.train_step(&[99; 8], &[1; 8]).is_err(),
        "token out of vocabulary"
    );
    assert!(
        tr.apply_gradients(&[0.0; 3]).is_err(),
        "wrong gradient length"
    );
}

#[test]
fn flops_and_parameter_counts() {
    let tr = LlmTrainer::new(&LlmHparams::default(), 0, &Device::Cpu).unwrap();
    let hp = LlmHparams::default();
    let (d, f, v, l, t) = (
        hp.d_model,
        hp.ffn_hidden,
        hp.vocab_size,
        hp.n_layers,
        hp.seq_len,
    );
    assert_eq!(
        tr.num_parameters(),
        v * d + l * (2 * d + 4 * d * d + 3 * d * f) + d
    );
    let n = l * (4 * d * d + 3 * d * f) + v * d;
    assert_eq!(tr.flops_per_sample(), (t * (6 * n + 12 * l * t * d)) as f64);
    assert_eq!(tr.tokens_per_sample(), t);
    let r = ResnetTrainer::new(&ResnetHparams::default(), 0, &Device::Cpu).unwrap();
    // stem 28*28*9*1*16, s1 2*28*28*9*16*16, s2 14*14*9*(16*32+32*32)+14*14*16*32, s3 7*7*9*(32*64+64*64)+7*7*32*64, fc 64*10
    let macs = 28 * 28 * 9 * 16
        + 2 * 28 * 28 * 9 * 256
        + 196 * 9 * (512 + 1024)
        + 196 * 512
        + 49 * 9 * (2048 + 4096)
        + 49 * 2048
        + 640;
    assert_eq!(r.flops_per_sample(), 6.0 * macs as f64);
}

/// Without the `graph` feature no candle is built in: the graph engine is
/// refused with an error that says how to build it, for both trainers.
#[cfg(not(feature = "graph"))]
#[test]
fn the_graph_engine_is_refused_without_the_feature() {
    use referee_workloads::{Engine, Error};
    let r = ResnetTrainer::with_engine(&tiny_resnet(), 1, &Device::Cpu, Engine::Graph);
    let e = r.err().expect("no graph engine in this build");
    assert!(matches!(e, Error::NoGraph), "{e}");
    assert!(e.to_string().contains("--features graph"), "{e}");
    let r = LlmTrainer::with_engine(&tiny_llm(), 1, &Device::Cpu, Engine::Graph);
    assert!(matches!(r.err(), Some(Error::NoGraph)));
    // The CPU engine needs no candle.
    let isa = referee_workloads::cpu::Isa::detect();
    assert!(ResnetTrainer::with_engine(&tiny_resnet(), 1, &Device::Cpu, Engine::Cpu(isa)).is_ok());
}
