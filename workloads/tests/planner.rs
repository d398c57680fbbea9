//! The measured planner with a trainer (its own test binary: the planner's
//! table is the process's, and here no other test adds to it).

use referee_workloads::cpu::Isa;
use referee_workloads::cpu::planner::{self, Mode};
use referee_workloads::{Device, LlmHparams, LlmTrainer};

fn hparams() -> LlmHparams {
    // Large enough for every kind of product (row blocks on the pool, a
    // packed B, K in several blocks for the weight gradients), small enough
    // to measure in well under a second.
    LlmHparams {
        vocab_size: 256,
        seq_len: 32,
        d_model: 32,
        n_layers: 1,
        n_heads: 2,
        ffn_hidden: 64,
        batch_size: 24,
        ..Default::default()
    }
}

fn batch(hp: &LlmHparams, seed: u32) -> (Vec<u32>, Vec<u32>) {
    let n = hp.batch_size * hp.seq_len;
    let toks: Vec<u32> = (0..=n as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761).wrapping_add(seed) >> 7) % hp.vocab_size as u32)
        .collect();
    (toks[..n].to_vec(), toks[1..].to_vec())
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// `prepare` plans every product of a training step and of an evaluation
/// before the first step (none is measured afterwards), and a planned
/// trainer trains bitwise as the hand-chosen blocking does.
#[test]
fn prepare_plans_every_product_and_training_keeps_its_bits() {
    let hp = hparams();
    let isa = Isa::detect();
    let threads = rayon::current_num_threads();
    let train = |tr: &mut LlmTrainer| {
        let mut losses = Vec::new();
        for s in 0..3 {
            let (x, y) = batch(&hp, s);
            losses.push(tr.train_step(&x, &y).unwrap().loss.to_bits());
        }
        let (x, y) = batch(&hp, 7);
        let eval = tr.evaluate(&mut std::iter::once((x, y))).unwrap().to_bits();
        (losses, eval, bits(tr.flat_parameters()))
    };

    planner::set_mode(Mode::Fixed);
    let mut fixed = LlmTrainer::new(&hp, 3, &Device::Cpu).unwrap();
    fixed.prepare(hp.batch_size).unwrap();
    assert!(planner::export(isa, threads).is_empty(), "fixed measured");
    let want = train(&mut fixed);

    planner::set_mode(Mode::Measure);
    let mut planned = LlmTrainer::new(&hp, 3, &Device::Cpu).unwrap();
    let before = bits(planned.flat_parameters());
    planned.prepare(hp.batch_size).unwrap();
    assert_eq!(
        bits(planned.flat_parameters()),
        before,
        "prepare moved the weights"
    );
    let plans = planner::export(isa, threads);
    // Per layer: 4 forward products, 8 backward; the head: 3 (the shapes
    // repeat across layers).
    assert!(plans.len() >= 10, "{} shapes planned", plans.len());
    assert!(plans.iter().all(|e| !e.timings.is_empty()));
    let got = train(&mut planned);
    assert_eq!(
        planner::export(isa, threads).len(),
        plans.len(),
        "a product was measured after prepare"
    );
    assert_eq!(got, want, "the planned trainer trained differently");
}
