//! The CPU engine computes what candle's autograd graph computes: the same
//! loss, gradients, batch-norm running statistics and evaluation logits,
//! with every kernel set this CPU runs.

use referee_workloads::cpu::Isa;
use referee_workloads::rng::Rng;
use referee_workloads::{
    Device, Engine, LlmHparams, LlmTrainer, Precision, ResnetHparams, ResnetTrainer,
};

fn images(seed: u64, n: usize, side: usize, classes: usize) -> (Vec<f32>, Vec<u32>) {
    let mut r = Rng::new(seed);
    let px = r.normal_vec(n * side * side, 1.0);
    let lb = (0..n).map(|_| r.below(classes) as u32).collect();
    (px, lb)
}

/// Largest difference of each parameter's gradient, relative to that
/// parameter's largest gradient entry.
fn worst_param_diff(layout: &[(String, usize, usize)], a: &[f32], b: &[f32]) -> (String, f32) {
    let mut worst = (String::new(), 0f32);
    for (name, off, len) in layout {
        let (ga, gb) = (&a[*off..off + len], &b[*off..off + len]);
        let scale = ga.iter().fold(1e-6f32, |m, v| m.max(v.abs()));
        let d = ga
            .iter()
            .zip(gb)
            .map(|(x, y)| (x - y).abs() / scale)
            .fold(0.0, f32::max);
        if d > worst.1 {
            worst = (name.clone(), d);
        }
    }
    worst
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

fn resnet_engines_agree(hp: &ResnetHparams, n: usize) {
    let dev = Device::Cpu;
    let side = hp.image_size;
    let mut graph = ResnetTrainer::with_engine(hp, 3, &dev, Engine::Graph).unwrap();
    let isas: Vec<Isa> = Isa::ALL.into_iter().filter(|i| i.available()).collect();
    let mut cpus: Vec<ResnetTrainer> = isas
        .iter()
        .map(|&i| ResnetTrainer::with_engine(hp, 3, &dev, Engine::Cpu(i)).unwrap())
        .collect();
    let layout = graph.parameter_layout();
    for step in 0..3 {
        let (px, lb) = images(10 + step, n, side, hp.num_classes);
        let (lg, gg) = graph.compute_gradients(&px, &lb).unwrap();
        for (tr, isa) in cpus.iter_mut().zip(&isas) {
            assert_eq!(tr.engine(), Engine::Cpu(*isa));
            let (lc, gc) = tr.compute_gradients(&px, &lb).unwrap();
            assert!(
                (lg - lc).abs() < 1e-4 * (1.0 + lg.abs()),
                "{} step {step}: loss {lc} vs graph {lg}",
                isa.name()
            );
            let (name, d) = worst_param_diff(&layout, &gg, &gc);
            assert!(
                d < 2e-3,
                "{} step {step}: gradient of {name} differs by {d}",
                isa.name()
            );
            // Both then take the graph's step, so they stay on one trajectory.
            tr.apply_gradients(&gg).unwrap();
        }
        graph.apply_gradients(&gg).unwrap();
    }
    // Running statistics (after 3 training forwards) drive evaluation.
    let (px, lb) = images(99, n + 3, side, hp.num_classes);
    let want = graph.logits(&px, false).unwrap();
    let acc_graph = graph
        .evaluate(&mut std::iter::once((px.clone(), lb.clone())))
        .unwrap();
    for (tr, isa) in cpus.iter_mut().zip(&isas) {
        let got = tr.logits(&px, false).unwrap();
        let d = max_abs_diff(&want, &got);
        assert!(d < 1e-3, "{}: eval logits differ by {d}", isa.name());
        let acc = tr
            .evaluate(&mut std::iter::once((px.clone(), lb.clone())))
            .unwrap();
        assert_eq!(acc, acc_graph, "{}: accuracy", isa.name());
    }
}

#[test]
fn resnet_cpu_engine_matches_the_graph_at_benchmark_widths() {
    // mini_resnet's own shapes (16/32/64 channels: whole SIMD vectors), small batch.
    resnet_engines_agree(&ResnetHparams::default(), 6);
}

#[test]
fn resnet_cpu_engine_matches_the_graph_at_odd_widths() {
    // 4/8/16 channels on 12×12 images: column tails, every stage's shortcut.
    let hp = ResnetHparams {
        image_size: 12,
        base_width: 4,
        blocks: [2, 1, 2],
        num_classes: 7,
        zero_init_residual: true,
        ..Default::default()
    };
    resnet_engines_agree(&hp, 5);
}

#[test]
fn engine_choice_is_checked() {
    let dev = Device::Cpu;
    assert!(Engine::Graph.check_device(&dev).is_ok());
    assert!(Engine::Cpu(Isa::Portable).check_device(&dev).is_ok());
    assert_eq!(Engine::Cpu(Isa::Portable).name(), "cpu-portable");
    // the default on a CPU is the CPU engine (unless the environment says otherwise)
    if std::env::var_os("REFEREE_CPU_KERNELS").is_none() {
        assert_eq!(
            Engine::for_device(&dev).unwrap(),
            Engine::Cpu(Isa::detect())
        );
    }
    let hp = ResnetHparams::default();
    let (px, lb) = images(1, 2, hp.image_size, hp.num_classes);
    let mut tr = ResnetTrainer::with_engine(&hp, 1, &dev, Engine::Cpu(Isa::Portable)).unwrap();
    // bad batches are errors, not panics
    assert!(tr.compute_gradients(&px[1..], &lb).is_err());
    assert!(tr.compute_gradients(&px, &[0, 10]).is_err());
    assert!(tr.logits(&px[3..], false).is_err());
}

fn tokens(seed: u64, n: usize, vocab: usize) -> (Vec<u32>, Vec<u32>) {
    let mut r = Rng::new(seed);
    let all: Vec<u32> = (0..n + 1).map(|_| r.below(vocab) as u32).collect();
    (all[..n].to_vec(), all[1..].to_vec())
}

fn llm_engines_agree(hp: &LlmHparams, seqs: usize, tol: f32) {
    let dev = Device::Cpu;
    let mut graph = LlmTrainer::with_engine(hp, 5, &dev, Engine::Graph).unwrap();
    let mut cpu = LlmTrainer::with_engine(hp, 5, &dev, Engine::Cpu(Isa::detect())).unwrap();
    assert_eq!(cpu.engine(), Engine::Cpu(Isa::detect()));
    assert_eq!(graph.engine(), Engine::Graph);
    let layout = graph.parameter_layout();
    let n = seqs * hp.seq_len;
    for step in 0..3 {
        let (x, y) = tokens(20 + step, n, hp.vocab_size);
        let (lg, gg) = graph.compute_gradients(&x, &y).unwrap();
        let (lc, gc) = cpu.compute_gradients(&x, &y).unwrap();
        assert!(
            (lg - lc).abs() < tol * (1.0 + lg.abs()),
            "step {step}: loss {lc} vs graph {lg}"
        );
        let (name, d) = worst_param_diff(&layout, &gg, &gc);
        assert!(d < tol, "step {step}: gradient of {name} differs by {d}");
        graph.apply_gradients(&gg).unwrap();
        cpu.apply_gradients(&gg).unwrap();
    }
    let (x, y) = tokens(77, 3 * hp.seq_len, hp.vocab_size);
    let d = max_abs_diff(&graph.logits(&x).unwrap(), &cpu.logits(&x).unwrap());
    assert!(d < tol * 10.0, "logits differ by {d}");
    let eg = graph
        .evaluate(&mut std::iter::once((x.clone(), y.clone())))
        .unwrap();
    let ec = cpu.evaluate(&mut std::iter::once((x, y))).unwrap();
    assert!(
        (eg - ec).abs() < f64::from(tol),
        "eval loss {ec} vs graph {eg}"
    );
}

fn small_llm() -> LlmHparams {
    LlmHparams {
        vocab_size: 40,
        seq_len: 12,
        d_model: 24,
        n_layers: 2,
        n_heads: 3,
        ffn_hidden: 20,
        batch_size: 2,
        ..Default::default()
    }
}

#[test]
fn llm_cpu_engine_matches_the_graph() {
    llm_engines_agree(&small_llm(), 3, 2e-3);
    // mini_llm's own shapes, two sequences.
    llm_engines_agree(&LlmHparams::default(), 2, 2e-3);
}

#[test]
fn llm_cpu_engine_matches_the_graph_in_bf16() {
    let hp = LlmHparams {
        precision: Precision::Bf16,
        ..small_llm()
    };
    // Both round every linear layer's operands and results to bf16; the
    // order of the sums inside the products differs.
    llm_engines_agree(&hp, 3, 3e-2);
}

/// `train_step` reuses the last step's gradient buffer and clips it in
/// place: every step gives bitwise what a fresh buffer, clipped as a copy
/// (`compute_gradients` then `apply_gradients`), gives, in f32 and bf16.
#[test]
fn llm_train_step_is_bitwise_the_two_halves() {
    for precision in [Precision::Fp32, Precision::Bf16] {
        let hp = LlmHparams {
            precision,
            ..small_llm()
        };
        let dev = Device::Cpu;
        let engine = Engine::Cpu(Isa::detect());
        let mut whole = LlmTrainer::with_engine(&hp, 9, &dev, engine).unwrap();
        let mut halves = LlmTrainer::with_engine(&hp, 9, &dev, engine).unwrap();
        for step in 0..4 {
            let (x, y) = tokens(40 + step, 2 * hp.seq_len, hp.vocab_size);
            let lw = whole.train_step(&x, &y).unwrap().loss;
            let (lh, g) = halves.compute_gradients(&x, &y).unwrap();
            halves.apply_gradients(&g).unwrap();
            assert_eq!(
                lw.to_bits(),
                lh.to_bits(),
                "{precision:?} step {step}: loss"
            );
            assert_eq!(
                whole.last_grad_norm().to_bits(),
                halves.last_grad_norm().to_bits(),
                "{precision:?} step {step}: gradient norm"
            );
            let same = whole
                .flat_parameters()
                .iter()
                .zip(halves.flat_parameters())
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{precision:?} step {step}: weights differ");
        }
    }
}
