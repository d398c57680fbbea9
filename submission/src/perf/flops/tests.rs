//! The formula against the published rows (`submission/data/
//! published_llm_throughput.tsv`, the rows of ../shared/reference): each
//! row states tokens/s/GPU and model TFLOP/s/GPU, so FLOPs per token =
//! TFLOP/s/GPU × 10¹² ÷ tokens/s/GPU, which the architecture must give.

use super::*;
use crate::perf::reference::{self, RefRow};

/// The convention a published row counts with: the NeMo performance
/// summary counts the full attention matrix (NeMo's
/// `nemo/utils/flops_formulas.py`), NeMo AutoModel the causal half
/// (`causal_self_attn = True` in its `flops_utils.py`). The summary's
/// Mixtral 8x22B rows (sequence length 65,536) are the exception: they are
/// the causal count — the full count is 36.7 % above them, exactly the
/// ratio of the two at that length (pinned by
/// `mixtral_8x22b_rows_count_causal_attention`).
fn convention(r: &RefRow) -> Attention {
    if r.source.contains("AutoModel") || r.model == "Mixtral-8x22B" {
        Attention::Causal
    } else {
        Attention::Full
    }
}

/// A table's model name as referee's built-in table knows it ("Llama3 70B
/// 2-node" is the 70B on two nodes).
fn arch_of(r: &RefRow) -> Option<Arch> {
    lookup(r.model.trim_end_matches(" 2-node"))
}

/// (row, published, referee's) for every row with both figures and a
/// known model.
fn rows() -> Vec<(RefRow, f64, f64)> {
    reference::published()
        .rows
        .into_iter()
        .filter_map(|r| {
            let arch = arch_of(&r)?;
            let published = r.model_tflops_per_gpu?;
            let tps = r.tokens_per_s_per_gpu?;
            let f = arch.flops_per_token(r.seq_len?, convention(&r), r.task == "lora");
            Some((r, published, f.total * tps / 1e12))
        })
        .collect()
}

fn diff_pct(published: f64, ours: f64) -> f64 {
    (ours - published) / published * 100.0
}

/// Pre-training rows, both tables: within 1 %.
#[test]
fn pretraining_rows_within_one_percent() {
    let mut n = 0;
    for (r, published, ours) in rows().into_iter().filter(|x| x.0.task == "pretrain") {
        let d = diff_pct(published, ours);
        assert!(
            d.abs() <= 1.0,
            "{} {} {}: published {published}, referee {ours:.1} ({d:+.2} %)",
            r.system,
            r.model,
            r.precision
        );
        n += 1;
    }
    // 21 NeMo 25.04 rows (GPT3-175B prints no TFLOP/s) and the AutoModel
    // rows of DeepSeek V3 (2), Kimi K2, Qwen3 MoE 30B and Llama3 70B.
    assert_eq!(n, 26);
}

/// NeMo AutoModel's LoRA rows: ⅔ of the full count, within 1 %.
#[test]
fn automodel_lora_rows_within_one_percent() {
    let mut n = 0;
    for (r, published, ours) in rows()
        .into_iter()
        .filter(|x| x.0.task == "lora" && x.0.source.contains("AutoModel"))
    {
        let d = diff_pct(published, ours);
        assert!(
            d.abs() <= 1.0,
            "{}: {published} vs {ours:.1} ({d:+.2} %)",
            r.model
        );
        n += 1;
    }
    assert_eq!(n, 6);
}

/// The summary's Mixtral 8x22B rows: the full count is the causal one ×
/// (ratio of the two counts at 65,536 tokens), so the published rows are
/// the causal count.
#[test]
fn mixtral_8x22b_rows_count_causal_attention() {
    let arch = lookup("mixtral-8x22b").expect("built in");
    let ratio = arch.flops_per_token(65536, Attention::Full, false).total
        / arch.flops_per_token(65536, Attention::Causal, false).total;
    let mut n = 0;
    for r in reference::published()
        .rows
        .into_iter()
        .filter(|r| r.model == "Mixtral-8x22B")
    {
        let tps = r.tokens_per_s_per_gpu.expect("tokens/s/GPU");
        let published = r.model_tflops_per_gpu.expect("TFLOP/s/GPU");
        let full = arch.flops_per_token(65536, Attention::Full, false).total * tps / 1e12;
        assert!(
            (full / published / ratio - 1.0).abs() < 0.01,
            "{}",
            r.system
        );
        n += 1;
    }
    assert_eq!(n, 3);
    assert!((ratio - 1.367).abs() < 0.001, "{ratio}");
}

/// FLOPs per token a row states.
fn stated_flops_per_token(r: &RefRow) -> f64 {
    r.model_tflops_per_gpu.expect("TFLOP/s/GPU") * 1e12
        / r.tokens_per_s_per_gpu.expect("tokens/s/GPU")
}

/// The NeMo 25.04 SFT and LoRA rows train on SQuAD packed sequences: the
/// attention of a packed sequence spans each packed example, not the
/// whole sequence length, and the page does not state the examples'
/// lengths. So referee's figure at the row's sequence length (the whole
/// length attending) is an upper bound and the weights-only figure (no
/// attention) a lower bound; each published figure lies between them
/// (rounding aside), within 1.5 % of the lower bound (the packed examples
/// are short: 100–540 tokens of attention would account for the rest).
///
/// One row is left out: DGX-GB200 LoRA LLAMA3-70B states 557 GFLOP per
/// token, twice what the same model, task and sequence length state on
/// DGX-B200 and DGX-H100 (278.6 and 278.5): the page's own figures
/// disagree, and the test pins that.
#[test]
fn nemo_packed_finetuning_rows_between_bounds() {
    let all = reference::published().rows;
    let odd = all
        .iter()
        .find(|r| r.system == "DGX-GB200" && r.task == "lora" && r.model == "LLAMA3-70B")
        .expect("the row")
        .clone();
    for sibling in all.iter().filter(|r| {
        r.system != "DGX-GB200"
            && r.task == "lora"
            && r.model == "LLAMA3-70B"
            && !r.source.contains("AutoModel")
    }) {
        let k = stated_flops_per_token(&odd) / stated_flops_per_token(sibling);
        assert!((k - 2.0).abs() < 0.01, "{}: {k}", sibling.system);
    }
    let mut n = 0;
    for r in all
        .into_iter()
        .filter(|r| r.task != "pretrain" && !r.source.contains("AutoModel"))
        .filter(|r| r.line != odd.line)
    {
        let arch = arch_of(&r).expect("a known model");
        let lora = r.task == "lora";
        let tps = r.tokens_per_s_per_gpu.expect("tokens/s/GPU");
        let published = r.model_tflops_per_gpu.expect("TFLOP/s/GPU");
        let f = arch.flops_per_token(r.seq_len.expect("seq"), Attention::Full, lora);
        let upper = f.total * tps / 1e12;
        let lower = f.passes * 2.0 * f.weights * tps / 1e12;
        assert!(
            lower * 0.999 <= published && published <= upper,
            "{} {} {}: {lower:.1} ≤ {published} ≤ {upper:.1}?",
            r.system,
            r.task,
            r.model
        );
        assert!(
            diff_pct(published, lower).abs() <= 1.5,
            "{} {} {}: weights-only {lower:.1} vs {published}",
            r.system,
            r.task,
            r.model
        );
        n += 1;
    }
    assert_eq!(n, 14);
}

/// The summary's LLAMA3-405B rows are 0.8–1.0 % above referee's count:
/// they are the count with 16 KV heads instead of Llama 3.1 405B's 8 (its
/// `config.json`: `num_key_value_heads` 8) — 2·h·8·128 more K/V weights
/// per layer, 25 of 2,650 GFLOP per token. Pinned: with 16 they agree
/// within 0.2 %.
#[test]
fn llama3_405b_rows_count_sixteen_kv_heads() {
    let mut arch = lookup("llama3.1-405b").expect("built in");
    assert_eq!(arch.kv_heads, 8);
    arch.kv_heads = 16;
    let mut n = 0;
    for r in reference::published()
        .rows
        .into_iter()
        .filter(|r| r.model == "LLAMA3-405B" && r.task == "pretrain")
    {
        let tps = r.tokens_per_s_per_gpu.expect("tokens/s/GPU");
        let ours = arch.flops_per_token(8192, Attention::Full, false).total * tps / 1e12;
        let d = diff_pct(r.model_tflops_per_gpu.expect("TFLOP/s/GPU"), ours);
        assert!(d.abs() < 0.2, "{}: {d}", r.system);
        n += 1;
    }
    assert_eq!(n, 3);
}

/// Prints the table of docs/perf.md (`cargo test … print_table --
/// --nocapture`): the NeMo summary's SFT/LoRA rows with the weights-only
/// count (packed sequences, see above) and the whole-length count.
#[test]
fn print_table() {
    for (r, published, ours) in rows() {
        let packed = r.task != "pretrain" && !r.source.contains("AutoModel");
        let (shown, how) = if packed {
            let arch = arch_of(&r).expect("known");
            let f =
                arch.flops_per_token(r.seq_len.expect("seq"), Attention::Full, r.task == "lora");
            let tps = r.tokens_per_s_per_gpu.expect("tps");
            (
                f.passes * 2.0 * f.weights * tps / 1e12,
                format!("packed: attention not counted (whole length: {ours:.1})"),
            )
        } else {
            (ours, format!("{} attention", convention(&r).as_str()))
        };
        println!(
            "| {} | {} | {} | {} | {:.1} | {:+.2} % | {how} |",
            r.model,
            r.system,
            r.task,
            published,
            shown,
            diff_pct(published, shown)
        );
    }
}

/// No published throughput row has Llama 2 or Qwen 3 dense; their records
/// are pinned by parameter count instead: the weights a token is
/// multiplied by, plus the input embedding (V·h) and the RMSNorm weights
/// (2·h per layer and the final h), are the model's published parameter
/// count exactly (Llama 2 paper / the checkpoints' `model.safetensors`
/// index `total_size` ÷ 2 bytes; Qwen3 8B untied, 36 layers plus Q/K
/// norms of 128 each per layer).
#[test]
fn dense_records_match_published_parameter_counts() {
    for (name, params, extra_per_layer) in [
        ("llama2-7b", 6_738_415_616u64, 0u64),
        ("llama2-13b", 13_015_864_320, 0),
        ("llama2-70b", 68_976_648_192, 0),
        ("llama3-8b", 8_030_261_248, 0),
        ("llama3-70b", 70_553_706_496, 0),
        ("qwen3-8b", 8_190_735_360, 2 * 128),
    ] {
        let a = lookup(name).expect(name);
        let h = a.hidden as f64;
        let total = a.weights_per_token()
            + a.vocab as f64 * h
            + a.layers as f64 * (2.0 * h + extra_per_layer as f64)
            + h;
        assert_eq!(total, params as f64, "{name}");
    }
}

/// Meta-Llama-3-8B's `config.json` as published on Hugging Face.
const LLAMA3_8B_CONFIG: &str = r#"{
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 128000,
  "eos_token_id": 128001,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 14336,
  "max_position_embeddings": 8192,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 8,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": null,
  "rope_theta": 500000.0,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.40.0.dev0",
  "use_cache": true,
  "vocab_size": 128256
}"#;

/// DeepSeek-V3's `config.json` (the keys the formula reads, as published).
const DEEPSEEK_V3_CONFIG: &str = r#"{
  "architectures": ["DeepseekV3ForCausalLM"],
  "first_k_dense_replace": 3,
  "hidden_act": "silu",
  "hidden_size": 7168,
  "intermediate_size": 18432,
  "kv_lora_rank": 512,
  "model_type": "deepseek_v3",
  "moe_intermediate_size": 2048,
  "moe_layer_freq": 1,
  "n_group": 8,
  "n_routed_experts": 256,
  "n_shared_experts": 1,
  "num_attention_heads": 128,
  "num_experts_per_tok": 8,
  "num_hidden_layers": 61,
  "num_key_value_heads": 128,
  "num_nextn_predict_layers": 1,
  "q_lora_rank": 1536,
  "qk_nope_head_dim": 128,
  "qk_rope_head_dim": 64,
  "v_head_dim": 128,
  "vocab_size": 129280
}"#;

/// Qwen3-30B-A3B's `config.json` (the keys the formula reads).
const QWEN3_MOE_CONFIG: &str = r#"{
  "architectures": ["Qwen3MoeForCausalLM"],
  "decoder_sparse_step": 1,
  "head_dim": 128,
  "hidden_act": "silu",
  "hidden_size": 2048,
  "intermediate_size": 6144,
  "mlp_only_layers": [],
  "model_type": "qwen3_moe",
  "moe_intermediate_size": 768,
  "num_attention_heads": 32,
  "num_experts": 128,
  "num_experts_per_tok": 8,
  "num_hidden_layers": 48,
  "num_key_value_heads": 4,
  "vocab_size": 151936
}"#;

fn from_text(text: &str) -> Result<Arch, ModelConfigError> {
    let v: serde_json::Value = serde_json::from_str(text).expect("JSON");
    arch_from_config(&v, Path::new("models/m/config.json"))
}

#[test]
fn hugging_face_configs_give_the_builtin_records() {
    for (text, name) in [
        (LLAMA3_8B_CONFIG, "llama3-8b"),
        (DEEPSEEK_V3_CONFIG, "deepseek-v3"),
        (QWEN3_MOE_CONFIG, "qwen3-30b-a3b"),
    ] {
        let got = from_text(text).expect(name);
        let want = lookup(name).expect(name);
        for seq in [4096, 8192] {
            assert_eq!(
                got.flops_per_token(seq, Attention::Full, false),
                want.flops_per_token(seq, Attention::Full, false),
                "{name}"
            );
        }
        assert_eq!(got.name, "m");
    }
    // Nemotron's squared ReLU is not gated.
    let nemotron = from_text(
        r#"{"model_type": "nemotron", "hidden_act": "relu2", "hidden_size": 6144,
            "num_hidden_layers": 32, "num_attention_heads": 48, "num_key_value_heads": 8,
            "intermediate_size": 24576, "vocab_size": 256000}"#,
    )
    .expect("nemotron");
    assert!(!nemotron.gated);
    assert_eq!(
        nemotron.flops_per_token(4096, Attention::Full, false),
        lookup("nemotron4-15b")
            .expect("built in")
            .flops_per_token(4096, Attention::Full, false)
    );
}

#[test]
fn hugging_face_config_errors_name_the_file_and_key() {
    let e = from_text(r#"{"hidden_size": 4096, "num_attention_heads": 32, "vocab_size": 32000}"#)
        .expect_err("no layers");
    assert_eq!(
        e.to_string(),
        "--model-config models/m/config.json: missing key `num_hidden_layers` (the number of layers)"
    );
    let e = from_text(
        r#"{"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
            "vocab_size": 32000, "intermediate_size": "big"}"#,
    )
    .expect_err("bad ffn");
    assert_eq!(
        e.to_string(),
        "--model-config models/m/config.json: `intermediate_size` is `\"big\"`, expected a positive whole number"
    );
    let e = from_text(
        r#"{"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
            "vocab_size": 32000, "intermediate_size": 11008, "num_local_experts": 8}"#,
    )
    .expect_err("experts without top-k");
    assert!(
        e.to_string().contains("missing key `num_experts_per_tok`"),
        "{e}"
    );
    let e = from_text("[1]").expect_err("not an object");
    assert!(e.to_string().contains("not a JSON object"), "{e}");
    let e = read_model_config(Path::new("/nonexistent/config.json")).expect_err("no file");
    assert!(
        e.to_string()
            .starts_with("--model-config /nonexistent/config.json: "),
        "{e}"
    );
}

/// The formula by hand for Llama 3 8B at 8,192 tokens (NeMo's form):
/// s·L·h²·(12 + 12·g/a + 18·f/h + 12·s/h + 6·V/(L·h)) per sequence.
#[test]
fn llama_formula_is_nemos_form() {
    let (l, h, a, g, f, v, s) = (32.0, 4096.0, 32.0, 8.0, 14336.0, 128256.0, 8192.0);
    let nemo = l * h * h * (12.0 + 12.0 * g / a + 18.0 * f / h + 12.0 * s / h + 6.0 * v / (l * h));
    let ours = lookup("LLAMA3-8B")
        .expect("built in")
        .flops_per_token(8192, Attention::Full, false)
        .total;
    assert!((ours / nemo - 1.0).abs() < 1e-12, "{ours} vs {nemo}");
    let causal = l * h * h * (12.0 + 12.0 * g / a + 18.0 * f / h + 6.0 * s / h + 6.0 * v / (l * h));
    let ours = lookup("llama3_8b")
        .expect("built in")
        .flops_per_token(8192, Attention::Causal, false)
        .total;
    assert!((ours / causal - 1.0).abs() < 1e-12);
}

/// Qwen1.5-MoE-A2.7B's `config.json` (Qwen2-MoE: one shared expert of its
/// own size, `shared_expert_intermediate_size`); two `mlp_only_layers`
/// added to exercise dense leading layers. The weights by hand.
#[test]
fn qwen2_moe_shared_expert_and_dense_layers() {
    let a = from_text(
        r#"{"model_type": "qwen2_moe", "hidden_act": "silu", "hidden_size": 2048,
            "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 16,
            "intermediate_size": 5632, "moe_intermediate_size": 1408,
            "shared_expert_intermediate_size": 5632, "num_experts": 60,
            "num_experts_per_tok": 4, "vocab_size": 151936, "mlp_only_layers": [0, 1]}"#,
    )
    .expect("qwen2 moe");
    assert_eq!(
        a.moe,
        Some(Moe {
            experts: 60,
            top_k: 4,
            ffn: 1408,
            shared_experts: 1,
            shared_ffn: 5632,
            dense_layers: 2,
        })
    );
    let h = 2048.0;
    let attn = 4.0 * h * h;
    let moe = 3.0 * h * (4.0 * 1408.0 + 5632.0);
    let dense = 3.0 * h * 5632.0;
    let want = 24.0 * attn + 22.0 * moe + 2.0 * dense + h * 151936.0;
    assert_eq!(a.weights_per_token(), want);
    // GPT-2's family is not gated.
    let g = from_text(
        r#"{"model_type": "gpt2", "hidden_size": 768, "num_hidden_layers": 12,
            "num_attention_heads": 12, "intermediate_size": 3072, "vocab_size": 50257}"#,
    )
    .expect("gpt2");
    assert!(!g.gated);
}
