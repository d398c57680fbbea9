//! Shared by the integration tests that train the mini LLM's tiny twin.

use referee_workloads::LlmHparams;

/// A 2-layer LLM over 16 tokens, 8 a sequence, 4 sequences a batch: a step
/// in milliseconds.
pub fn tiny_llm() -> LlmHparams {
    LlmHparams {
        vocab_size: 16,
        seq_len: 8,
        d_model: 16,
        n_layers: 2,
        n_heads: 2,
        ffn_hidden: 32,
        batch_size: 4,
        base_lr: 1e-2,
        end_lr: 1e-3,
        warmup_steps: 2,
        total_steps: 100,
        ..Default::default()
    }
}
