//! The LLM step's pass profile (`cpu::passes`, `bench_step --passes`): one
//! test in a process of its own, since the profile is global and other
//! tests' steps would add to it.

use referee_workloads::cpu::passes::{Pass, pass_times, profile_passes};
use referee_workloads::{Device, LlmTrainer};

mod common;
use common::tiny_llm;

/// Each pass is counted once per call, as many times a step as the model
/// runs it; off, nothing is recorded; switching clears the counts.
#[test]
fn every_pass_of_a_step_is_counted_as_the_model_runs_it() {
    let hp = tiny_llm();
    let mut tr = LlmTrainer::new(&hp, 0, &Device::Cpu).unwrap();
    let tokens: Vec<u32> = (0..hp.batch_size * hp.seq_len + 1)
        .map(|i| (i * 7 % 16) as u32)
        .collect();
    let n = hp.batch_size * hp.seq_len;
    let step = |tr: &mut LlmTrainer| tr.train_step(&tokens[..n], &tokens[1..=n]).unwrap();

    step(&mut tr);
    assert!(pass_times().is_empty(), "recorded while off");
    profile_passes(true);
    step(&mut tr);
    step(&mut tr);
    let calls = |pass: Pass| {
        pass_times()
            .iter()
            .find(|p| p.pass == pass)
            .map_or(0, |p| p.calls)
    };
    let layers = hp.n_layers as u64;
    let per_step = [
        // Two per layer and the final one.
        (Pass::RmsNormForward, 2 * layers + 1),
        (Pass::RmsNormBackward, 2 * layers + 1),
        (Pass::AttentionForward, layers),
        (Pass::AttentionBackward, layers),
        (Pass::SwigluForward, layers),
        (Pass::SwigluBackward, layers),
        // 32 tokens: one block of the head.
        (Pass::CrossEntropy, 1),
        // Four weights a layer for their backward, and the tied embedding.
        (Pass::Transposes, 4 * layers + 1),
        (Pass::Optimiser, 1),
    ];
    for (pass, n) in per_step {
        assert_eq!(calls(pass), 2 * n, "{} over two steps", pass.name());
    }
    assert_eq!(pass_times().len(), Pass::ALL.len());
    assert!(pass_times().iter().all(|p| p.seconds > 0.0));
    profile_passes(false);
    assert!(pass_times().is_empty(), "cleared");
    step(&mut tr);
    assert!(pass_times().is_empty(), "recorded after switching off");
}
