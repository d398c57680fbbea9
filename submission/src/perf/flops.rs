//! Model FLOPs per token from the architecture: what turns a run's tokens/s
//! per GPU into model TFLOP/s per GPU and MFU when the log prints no
//! TFLOP/s.
//!
//! # The formula (written once; every model goes through [`Arch::flops_per_token`])
//!
//! A matrix multiply of a token's `m`-vector by an `m × n` weight costs
//! `2·m·n` FLOPs forward; the backward pass costs twice the forward (one
//! multiply for the input gradient, one for the weight gradient), so
//! training costs 3 × forward (Narayanan et al. 2021, "Efficient
//! Large-Scale Language Model Training on GPU Clusters Using
//! Megatron-LM", §5.1 / appendix: `96·B·s·l·h²·(1 + s/6h + V/16lh)` for
//! GPT, which is this count with a 4h FFN). Per token:
//!
//! ```text
//! FLOPs/token = 3 · 2 · ( W + L · c · s · a · (d_qk + d_v) )
//! ```
//!
//! * `W`: the weights a token is multiplied by — per layer the attention
//!   projections (Q: `h·a·d_qk`, K and V: `h·g·d` each with `g` KV heads
//!   (GQA), output `a·d_v·h`; MLA: the low-rank down and up projections
//!   instead), the FFN (`k·h·f`, `k` = 3 matrices for a gated unit such as
//!   SwiGLU, 2 otherwise; in an MoE layer `top_k` routed experts plus the
//!   shared experts, each of its own FFN size; the router is not counted),
//!   and once the output layer `h·V` (the embedding lookup is not a
//!   multiply);
//! * `L · c · s · a · (d_qk + d_v)`: the attention scores `QKᵀ` and their
//!   product with `V`, `s` the sequence length, `c` = 1 counting the full
//!   `s × s` matrix (Megatron-LM's and NeMo's convention, used by the NeMo
//!   performance summary: `nemo/utils/flops_formulas.py` in NVIDIA/NeMo)
//!   or `c` = ½ counting only the causal half (NeMo AutoModel's
//!   `causal_self_attn`, `nemo_automodel/components/utils/flops_utils.py`
//!   in NVIDIA-NeMo/Automodel) — see [`Attention`];
//! * LoRA fine-tuning: the frozen weights get no weight gradient, so 2 ×
//!   forward instead of 3 × (NeMo AutoModel's LoRA rows are the full count
//!   × ⅔).
//!
//! For a Llama-style model with `h = a·d` this is NeMo's
//! `s·L·h²·(12 + 12·g/a + 18·f/h + 12·s/h + 6·V/(L·h))` per sequence.

use serde::Serialize;
use std::path::Path;

/// How the attention score matrix is counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Attention {
    /// The whole `s × s` matrix (Megatron-LM, NeMo, the NeMo performance
    /// summary): referee's default, the count NeMo and Megatron logs print.
    #[default]
    Full,
    /// Only the causal half (NeMo AutoModel; what a causal flash-attention
    /// kernel computes).
    Causal,
}

impl Attention {
    pub fn parse(s: &str) -> Option<Attention> {
        match s.trim().to_ascii_lowercase().as_str() {
            "full" => Some(Attention::Full),
            "causal" | "half" => Some(Attention::Causal),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Attention::Full => "full",
            Attention::Causal => "causal",
        }
    }

    fn factor(self) -> f64 {
        match self {
            Attention::Full => 1.0,
            Attention::Causal => 0.5,
        }
    }
}

/// Mixture of experts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Moe {
    pub experts: u64,
    pub top_k: u64,
    /// FFN size of one routed expert.
    pub ffn: u64,
    /// Shared experts (always active) and their FFN size each.
    pub shared_experts: u64,
    pub shared_ffn: u64,
    /// Leading layers with a dense FFN (`first_k_dense_replace`), of size
    /// [`Arch::ffn`].
    pub dense_layers: u64,
}

/// Multi-head latent attention (DeepSeek V2/V3).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Mla {
    /// `None`: Q is projected directly from the hidden state.
    pub q_lora_rank: Option<u64>,
    pub kv_lora_rank: u64,
    pub qk_nope_head_dim: u64,
    pub qk_rope_head_dim: u64,
    pub v_head_dim: u64,
}

/// A decoder-only transformer's architecture.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Arch {
    pub name: String,
    pub layers: u64,
    pub hidden: u64,
    pub heads: u64,
    pub kv_heads: u64,
    /// Per-head dimension of Q, K and V (hidden ÷ heads unless stated).
    pub head_dim: u64,
    /// Dense FFN size.
    pub ffn: u64,
    /// Gated FFN (SwiGLU, GeGLU): 3 matrices; otherwise 2.
    pub gated: bool,
    pub vocab: u64,
    pub moe: Option<Moe>,
    pub mla: Option<Mla>,
}

/// FLOPs per token and its parts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FlopsPerToken {
    /// Training FLOPs per token (forward + backward).
    pub total: f64,
    /// The weights a token is multiplied by (all layers and the output
    /// layer).
    pub weights: f64,
    /// Attention-score multiply-adds per token, forward (`L·c·s·a·(d_qk+d_v)`).
    pub attention: f64,
    /// Forward + backward ÷ forward: 3, or 2 for LoRA.
    pub passes: f64,
}

impl Arch {
    /// Weights a token is multiplied by.
    pub fn weights_per_token(&self) -> f64 {
        let h = self.hidden as f64;
        let (a, g, d) = (
            self.heads as f64,
            self.kv_heads as f64,
            self.head_dim as f64,
        );
        let attn = match &self.mla {
            None => h * a * d + 2.0 * h * g * d + a * d * h,
            Some(m) => {
                let qk = (m.qk_nope_head_dim + m.qk_rope_head_dim) as f64;
                let q = match m.q_lora_rank {
                    Some(r) => h * r as f64 + r as f64 * a * qk,
                    None => h * a * qk,
                };
                let kv_lora = m.kv_lora_rank as f64;
                let kv = h * (kv_lora + m.qk_rope_head_dim as f64)
                    + kv_lora * a * (m.qk_nope_head_dim + m.v_head_dim) as f64;
                q + kv + a * m.v_head_dim as f64 * h
            }
        };
        let mats = if self.gated { 3.0 } else { 2.0 };
        let dense_ffn = mats * h * self.ffn as f64;
        let ffn_total = match &self.moe {
            None => self.layers as f64 * dense_ffn,
            Some(m) => {
                let moe_layers = self.layers.saturating_sub(m.dense_layers) as f64;
                let per_moe = mats
                    * h
                    * (m.top_k as f64 * m.ffn as f64
                        + m.shared_experts as f64 * m.shared_ffn as f64);
                m.dense_layers.min(self.layers) as f64 * dense_ffn + moe_layers * per_moe
            }
        };
        self.layers as f64 * attn + ffn_total + h * self.vocab as f64
    }

    /// Per-head dimensions of the score (`QKᵀ`) and value products.
    fn score_dims(&self) -> (f64, f64) {
        match &self.mla {
            None => (self.head_dim as f64, self.head_dim as f64),
            Some(m) => (
                (m.qk_nope_head_dim + m.qk_rope_head_dim) as f64,
                m.v_head_dim as f64,
            ),
        }
    }

    /// Training FLOPs per token at sequence length `seq` (the module's
    /// formula).
    pub fn flops_per_token(&self, seq: u64, attention: Attention, lora: bool) -> FlopsPerToken {
        let (dqk, dv) = self.score_dims();
        let weights = self.weights_per_token();
        let attn =
            self.layers as f64 * attention.factor() * seq as f64 * self.heads as f64 * (dqk + dv);
        let passes = if lora { 2.0 } else { 3.0 };
        FlopsPerToken {
            total: passes * 2.0 * (weights + attn),
            weights,
            attention: attn,
            passes,
        }
    }
}

/// A dense decoder: `h = a·d`.
#[allow(clippy::too_many_arguments)]
fn dense(
    name: &str,
    layers: u64,
    hidden: u64,
    heads: u64,
    kv_heads: u64,
    ffn: u64,
    gated: bool,
    vocab: u64,
) -> Arch {
    Arch {
        name: name.to_string(),
        layers,
        hidden,
        heads,
        kv_heads,
        head_dim: hidden / heads,
        ffn,
        gated,
        vocab,
        moe: None,
        mla: None,
    }
}

fn with_head_dim(mut a: Arch, d: u64) -> Arch {
    a.head_dim = d;
    a
}

fn with_moe(mut a: Arch, experts: u64, top_k: u64, ffn: u64) -> Arch {
    a.moe = Some(Moe {
        experts,
        top_k,
        ffn,
        shared_experts: 0,
        shared_ffn: 0,
        dense_layers: 0,
    });
    a
}

/// DeepSeek V3-style (MLA, `dense_layers` leading dense layers, one shared
/// expert of the routed experts' size).
#[allow(clippy::too_many_arguments)]
fn deepseek(
    name: &str,
    layers: u64,
    heads: u64,
    experts: u64,
    dense_layers: u64,
    vocab: u64,
) -> Arch {
    Arch {
        name: name.to_string(),
        layers,
        hidden: 7168,
        heads,
        kv_heads: heads,
        head_dim: 128,
        ffn: 18432,
        gated: true,
        vocab,
        moe: Some(Moe {
            experts,
            top_k: 8,
            ffn: 2048,
            shared_experts: 1,
            shared_ffn: 2048,
            dense_layers,
        }),
        mla: Some(Mla {
            q_lora_rank: Some(1536),
            kv_lora_rank: 512,
            qk_nope_head_dim: 128,
            qk_rope_head_dim: 64,
            v_head_dim: 128,
        }),
    }
}

/// The built-in architectures: (names it is known by, the record). The
/// figures are those of each model's published `config.json` (Hugging
/// Face) or paper; GPT-3 175B from Brown et al. 2020 with NeMo's 51,200
/// vocabulary; Nemotron-4 from its report (squared-ReLU FFN: not gated).
pub fn builtin() -> Vec<(&'static [&'static str], Arch)> {
    vec![
        (
            &["gpt3-175b", "gpt3", "gpt-3-175b"],
            dense("GPT-3 175B", 96, 12288, 96, 96, 49152, false, 51200),
        ),
        (
            &["llama2-7b"],
            dense("Llama 2 7B", 32, 4096, 32, 32, 11008, true, 32000),
        ),
        (
            &["llama2-13b"],
            dense("Llama 2 13B", 40, 5120, 40, 40, 13824, true, 32000),
        ),
        (
            &["llama2-70b"],
            dense("Llama 2 70B", 80, 8192, 64, 8, 28672, true, 32000),
        ),
        (
            &[
                "llama3-8b",
                "llama3.1-8b",
                "llama31-8b",
                "meta-llama-3-8b",
                "meta-llama-3.1-8b",
            ],
            dense("Llama 3/3.1 8B", 32, 4096, 32, 8, 14336, true, 128256),
        ),
        (
            &[
                "llama3-70b",
                "llama3.1-70b",
                "llama31-70b",
                "meta-llama-3-70b",
                "meta-llama-3.1-70b",
            ],
            dense("Llama 3/3.1 70B", 80, 8192, 64, 8, 28672, true, 128256),
        ),
        (
            &[
                "llama3.1-405b",
                "llama3-405b",
                "llama31-405b",
                "meta-llama-3.1-405b",
            ],
            dense("Llama 3.1 405B", 126, 16384, 128, 8, 53248, true, 128256),
        ),
        (
            &["nemotron4-15b", "nemotron-15b", "nemotron-4-15b"],
            dense("Nemotron-4 15B", 32, 6144, 48, 8, 24576, false, 256000),
        ),
        (
            &["nemotron4-340b", "nemotron-340b", "nemotron-4-340b"],
            dense("Nemotron-4 340B", 96, 18432, 96, 8, 73728, false, 256000),
        ),
        (
            &["mixtral-8x7b"],
            with_moe(
                dense("Mixtral 8x7B", 32, 4096, 32, 8, 14336, true, 32000),
                8,
                2,
                14336,
            ),
        ),
        (
            &["mixtral-8x22b"],
            with_moe(
                dense("Mixtral 8x22B", 56, 6144, 48, 8, 16384, true, 32768),
                8,
                2,
                16384,
            ),
        ),
        (
            &["deepseek-v3", "deepseek-v3-671b", "deepseekv3"],
            deepseek("DeepSeek V3 671B", 61, 128, 256, 3, 129280),
        ),
        (
            &["kimi-k2", "kimi-k2-1t"],
            deepseek("Kimi K2", 61, 64, 384, 1, 163840),
        ),
        (
            &["qwen3-8b"],
            with_head_dim(dense("Qwen3 8B", 36, 4096, 32, 8, 12288, true, 151936), 128),
        ),
        (
            &["qwen3-32b"],
            with_head_dim(
                dense("Qwen3 32B", 64, 5120, 64, 8, 25600, true, 151936),
                128,
            ),
        ),
        (
            &["qwen3-30b-a3b", "qwen3-moe-30b"],
            with_moe(
                with_head_dim(
                    dense("Qwen3 30B-A3B", 48, 2048, 32, 4, 6144, true, 151936),
                    128,
                ),
                128,
                8,
                768,
            ),
        ),
        (
            &["qwen3-235b-a22b", "qwen3-moe-235b"],
            with_moe(
                with_head_dim(
                    dense("Qwen3 235B-A22B", 94, 4096, 64, 4, 12288, true, 151936),
                    128,
                ),
                128,
                8,
                1536,
            ),
        ),
        (
            &["qwen2.5-7b"],
            dense("Qwen2.5 7B", 28, 3584, 28, 4, 18944, true, 152064),
        ),
        (
            &["qwen2.5-32b"],
            dense("Qwen2.5 32B", 64, 5120, 40, 8, 27648, true, 152064),
        ),
    ]
}

fn norm(s: &str) -> String {
    super::names::normalise(s)
}

/// The built-in architecture a model name stands for (names compared as
/// the reference table compares them: `LLAMA3-70B` = `llama3_70b`).
pub fn lookup(model: &str) -> Option<Arch> {
    let key = norm(model);
    builtin()
        .into_iter()
        .find(|(names, _)| names.iter().any(|n| norm(n) == key))
        .map(|(_, a)| a)
}

/// The names [`lookup`] knows, for messages.
pub fn known_names() -> Vec<&'static str> {
    builtin().into_iter().map(|(n, _)| n[0]).collect()
}

pub use super::error::ModelConfigError;

/// Read a Hugging Face `config.json` of a decoder-only model.
///
/// The file is named by a config file, so it is read as a file of a
/// package: a regular file, not a link, within the cap for configs (see
/// `referee_rules::untrusted`; a FIFO would hang the read).
pub fn read_model_config(path: &Path) -> Result<Arch, ModelConfigError> {
    use referee_rules::untrusted::{self, FileKind, Links};
    let text = untrusted::read_to_string(path, FileKind::Config, Links::Refuse).map_err(|e| {
        ModelConfigError::Read {
            path: path.to_path_buf(),
            source: e.into_io(),
        }
    })?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|source| ModelConfigError::Json {
            path: path.to_path_buf(),
            source,
        })?;
    arch_from_config(&v, path)
}

/// The architecture a `config.json` states. Keys: `hidden_size`,
/// `num_hidden_layers`, `num_attention_heads`, `num_key_value_heads`
/// (default: the heads), `head_dim` (default hidden ÷ heads),
/// `intermediate_size`, `vocab_size`, `hidden_act` (`relu2`, `gelu`,
/// `relu` and the GPT-2/NeoX/OPT/Falcon/Bloom/Nemotron families are not
/// gated; everything else is), experts from `num_local_experts` /
/// `num_experts` / `n_routed_experts` with `num_experts_per_tok`,
/// `moe_intermediate_size` (default `intermediate_size`),
/// `n_shared_experts` / `shared_expert_intermediate_size`,
/// `first_k_dense_replace`, `mlp_only_layers`; MLA from `kv_lora_rank`,
/// `q_lora_rank`, `qk_nope_head_dim`, `qk_rope_head_dim`, `v_head_dim`.
pub fn arch_from_config(v: &serde_json::Value, path: &Path) -> Result<Arch, ModelConfigError> {
    let obj = v.as_object().ok_or_else(|| ModelConfigError::NotObject {
        path: path.to_path_buf(),
    })?;
    let opt = |key: &str| -> Result<Option<u64>, ModelConfigError> {
        match obj.get(key) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(x) => match x.as_u64().filter(|n| *n > 0) {
                Some(n) => Ok(Some(n)),
                None => Err(ModelConfigError::NotCount {
                    path: path.to_path_buf(),
                    key: key.to_string(),
                    found: format!("`{x}`"),
                }),
            },
        }
    };
    let need = |key: &'static str, what: &'static str| -> Result<u64, ModelConfigError> {
        opt(key)?.ok_or(ModelConfigError::Missing {
            path: path.to_path_buf(),
            key,
            what,
        })
    };
    let hidden = need("hidden_size", "the hidden size")?;
    let layers = need("num_hidden_layers", "the number of layers")?;
    let heads = need("num_attention_heads", "the number of attention heads")?;
    let vocab = need("vocab_size", "the vocabulary size (the output layer)")?;
    let kv_heads = opt("num_key_value_heads")?.unwrap_or(heads);
    let head_dim = opt("head_dim")?.unwrap_or(hidden / heads);
    let experts = match opt("num_local_experts")? {
        Some(e) => Some(e),
        None => match opt("num_experts")? {
            Some(e) => Some(e),
            None => opt("n_routed_experts")?,
        },
    };
    let moe_ffn = opt("moe_intermediate_size")?;
    let ffn = match opt("intermediate_size")? {
        Some(f) => f,
        None => moe_ffn.ok_or(ModelConfigError::Missing {
            path: path.to_path_buf(),
            key: "intermediate_size",
            what: "the FFN size",
        })?,
    };
    let act = obj
        .get("hidden_act")
        .and_then(|a| a.as_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    let family = obj
        .get("model_type")
        .and_then(|a| a.as_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    let gated = !(matches!(act.as_str(), "relu2" | "squared-relu" | "relu" | "gelu_new")
        || matches!(
            family.as_str(),
            "gpt2" | "gpt_neox" | "opt" | "falcon" | "bloom" | "nemotron" | "gptj" | "gpt_bigcode"
        ));
    let moe = match experts {
        None => None,
        Some(experts) => {
            let top_k = need("num_experts_per_tok", "the experts each token is routed to")?;
            let shared_experts = opt("n_shared_experts")?;
            let shared_size = opt("shared_expert_intermediate_size")?;
            let routed = moe_ffn.unwrap_or(ffn);
            let (shared_experts, shared_ffn) = match (shared_experts, shared_size) {
                (Some(n), _) => (n, routed),
                (None, Some(s)) => (1, s),
                (None, None) => (0, 0),
            };
            let dense_layers = match opt("first_k_dense_replace")? {
                Some(k) => k,
                None => obj
                    .get("mlp_only_layers")
                    .and_then(|l| l.as_array())
                    .map_or(0, |l| l.len() as u64),
            };
            Some(Moe {
                experts,
                top_k,
                ffn: routed,
                shared_experts,
                shared_ffn,
                dense_layers,
            })
        }
    };
    let mla = match opt("kv_lora_rank")? {
        None => None,
        Some(kv_lora_rank) => Some(Mla {
            q_lora_rank: opt("q_lora_rank")?,
            kv_lora_rank,
            qk_nope_head_dim: need("qk_nope_head_dim", "MLA's per-head Q/K dimension")?,
            qk_rope_head_dim: need("qk_rope_head_dim", "MLA's rotary per-head dimension")?,
            v_head_dim: need("v_head_dim", "MLA's per-head V dimension")?,
        }),
    };
    Ok(Arch {
        name: path
            .parent()
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().to_string())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| path.display().to_string()),
        layers,
        hidden,
        heads,
        kv_heads,
        head_dim,
        ffn,
        gated,
        vocab,
        moe,
        mla,
    })
}

#[cfg(test)]
mod tests;
