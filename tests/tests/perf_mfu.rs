//! Issue 33, end to end: model TFLOP/s/GPU and MFU from the model's FLOPs
//! per token when the log prints no TFLOP/s (built-in architectures and a
//! Hugging Face `config.json`), both figures when it does, and the new log
//! formats. The expected numbers are computed here from the published
//! closed form (NeMo's `nemo/utils/flops_formulas.py` for Llama 3:
//! `s·L·h²·(12 + 12·g/a + 18·f/h + 12·s/h + 6·V/(L·h))` FLOPs per
//! sequence), not by calling referee's function.

use referee_tests::{referee, repo_root, stderr, stdout};
use serde_json::Value;

fn fixture(rel: &str) -> String {
    repo_root()
        .join("tests/fixtures/perf")
        .join(rel)
        .display()
        .to_string()
}

fn json_of(o: &std::process::Output) -> Value {
    let out = stdout(o);
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}\n{}", stderr(o)))
}

fn close(a: &Value, b: f64, rel: f64) {
    let a = a.as_f64().unwrap_or_else(|| panic!("not a number: {a}"));
    assert!((a - b).abs() <= rel * b.abs(), "{a} vs {b}");
}

/// Llama 3 70B's FLOPs per token at sequence length `s` in NeMo's
/// published form (L 80, h 8192, 64 heads, 8 KV heads, FFN 28672, vocab
/// 128256; `full`: the whole attention matrix, else its causal half).
fn llama3_70b_flops_per_token(s: f64, full: bool) -> f64 {
    let (l, h, a, g, f, v) = (80.0, 8192.0, 64.0, 8.0, 28672.0, 128256.0);
    let attn = if full { 12.0 } else { 6.0 };
    l * h * h * (12.0 + 12.0 * g / a + 18.0 * f / h + attn * s / h + 6.0 * v / (l * h))
}

const EXAMPLE: &str = "mfu/nemo2_llama3_70b.out";
const EXAMPLE_FLAGS: &[&str] = &[
    "--model",
    "llama3-70b",
    "--gpu",
    "h100",
    "--precision",
    "bf16",
    "--gpus",
    "64",
    "--gbs",
    "512",
    "--seq-len",
    "8192",
];

fn perf(extra: &[&str], files: &[&str]) -> std::process::Output {
    let mut a = vec!["perf"];
    a.extend_from_slice(extra);
    a.extend_from_slice(files);
    referee(&a)
}

#[test]
fn issue_example_nemo2_log_gives_mfu_from_the_model() {
    // The published figure first: the NeMo 25.04 summary's LLAMA3-70B
    // DGX-H100 row states 780 TFLOP/s/GPU at 1621 tokens/s/GPU, i.e.
    // 481.2 GFLOP per token at 8192 tokens; the closed form gives it.
    let fpt = llama3_70b_flops_per_token(8192.0, true);
    assert!((780e12 / 1621.0 / fpt - 1.0).abs() < 0.005, "{fpt}");
    let path = fixture(EXAMPLE);
    let mut args = EXAMPLE_FLAGS.to_vec();
    args.push("--json");
    let o = perf(&args, &[&path]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = &json_of(&o)["rows"][0];
    assert_eq!(r["format"], "nemo");
    assert_eq!(r["status"]["kind"], "complete");
    // Window 35–44: offsets −2…2 twice around 60.0 s.
    close(&r["step_time_s"]["mean"], 60.0, 1e-12);
    let tokens_per_gpu = 8192.0 * 512.0 / 60.0 / 64.0;
    close(&r["tokens_per_second_per_gpu"], tokens_per_gpu, 1e-12);
    let tflops = fpt * tokens_per_gpu / 1e12;
    close(&r["model_tflops_per_gpu"]["value"], tflops, 1e-9);
    assert_eq!(r["model_tflops_per_gpu"]["source"], "derived");
    close(&r["mfu"]["value"], tflops / 989.0, 1e-9);
    close(&r["peak_tflops"], 989.0, 0.0);
    let m = &r["model_flops"];
    assert_eq!(m["model"], "Llama 3/3.1 70B");
    assert_eq!(m["source"], "built-in");
    assert_eq!(m["attention"], "full");
    assert_eq!(m["lora"], false);
    close(&m["flops_per_token"], fpt, 1e-12);
    close(&m["tflops_per_gpu"], tflops, 1e-9);
    close(&m["mfu"], tflops / 989.0, 1e-9);
    assert_eq!(m["log_tflops_per_gpu"], Value::Null);
    assert!(
        r["missing"].as_array().unwrap().is_empty(),
        "{}",
        r["missing"]
    );
    // The human form: the table and the model line (≈ 525.9 TFLOP/s/GPU,
    // 53.2 % of 989).
    let human = stdout(&perf(EXAMPLE_FLAGS, &[&path]));
    assert!(
        human.contains(&format!("{:.1}", tflops))
            && human.contains(&format!("{:.1} %", tflops / 989.0 * 100.0)),
        "{human}"
    );
    assert!(
        human.contains("model FLOPs: Llama 3/3.1 70B (built-in): 481.4 GFLOP/token at 8192 tokens (full attention)"),
        "{human}"
    );
    // CSV carries the new columns.
    let mut args = EXAMPLE_FLAGS.to_vec();
    args.push("--csv");
    let csv = stdout(&perf(&args, &[&path]));
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let row: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |n: &str| {
        row[head
            .iter()
            .position(|h| *h == n)
            .unwrap_or_else(|| panic!("{n}"))]
    };
    assert!((col("model_flops_per_token").parse::<f64>().unwrap() / fpt - 1.0).abs() < 1e-12);
    assert!((col("model_flops_mfu").parse::<f64>().unwrap() / (tflops / 989.0) - 1.0).abs() < 1e-9);
    // Causal counting (NeMo AutoModel's convention).
    let mut args = EXAMPLE_FLAGS.to_vec();
    args.extend(["--attention-flops", "causal", "--json"]);
    let r = &json_of(&perf(&args, &[&path]))["rows"][0];
    close(
        &r["model_tflops_per_gpu"]["value"],
        llama3_70b_flops_per_token(8192.0, false) * tokens_per_gpu / 1e12,
        1e-9,
    );
    assert_eq!(r["model_flops"]["attention"], "causal");
    // LoRA: 2 × forward.
    let mut args = EXAMPLE_FLAGS.to_vec();
    args.extend(["--task", "lora", "--json"]);
    let r = &json_of(&perf(&args, &[&path]))["rows"][0];
    close(
        &r["model_tflops_per_gpu"]["value"],
        tflops * 2.0 / 3.0,
        1e-9,
    );
}

/// Meta-Llama-3-70B's `config.json` (as published on Hugging Face; the
/// keys referee does not read trimmed).
const LLAMA3_70B_CONFIG: &str = r#"{
  "architectures": ["LlamaForCausalLM"],
  "hidden_act": "silu",
  "hidden_size": 8192,
  "intermediate_size": 28672,
  "max_position_embeddings": 8192,
  "model_type": "llama",
  "num_attention_heads": 64,
  "num_hidden_layers": 80,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05,
  "rope_theta": 500000.0,
  "tie_word_embeddings": false,
  "vocab_size": 128256
}"#;

#[test]
fn model_config_file_gives_the_same_figures_and_names_missing_keys() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("Meta-Llama-3-70B");
    std::fs::create_dir(&dir).unwrap();
    let cfg = dir.join("config.json");
    std::fs::write(&cfg, LLAMA3_70B_CONFIG).unwrap();
    let flags: Vec<&str> = EXAMPLE_FLAGS
        .iter()
        .copied()
        .filter(|f| *f != "--model" && *f != "llama3-70b")
        .collect();
    let mut args = flags.clone();
    args.extend(["--model-config", cfg.to_str().unwrap(), "--json"]);
    let o = perf(&args, &[&fixture(EXAMPLE)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = &json_of(&o)["rows"][0];
    let tokens_per_gpu = 8192.0 * 512.0 / 60.0 / 64.0;
    close(
        &r["model_tflops_per_gpu"]["value"],
        llama3_70b_flops_per_token(8192.0, true) * tokens_per_gpu / 1e12,
        1e-9,
    );
    assert_eq!(r["model_flops"]["model"], "Meta-Llama-3-70B");
    assert_eq!(
        r["model_flops"]["source"],
        format!("--model-config {}", cfg.display())
    );
    // A key missing: exit 2 naming the file and the key.
    std::fs::write(
        &cfg,
        LLAMA3_70B_CONFIG.replace("\"vocab_size\": 128256", "\"x\": 1"),
    )
    .unwrap();
    let o = perf(&args, &[&fixture(EXAMPLE)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains(&format!(
            "--model-config {}: missing key `vocab_size`",
            cfg.display()
        )),
        "{}",
        stderr(&o)
    );
    // A folder's referee-perf.yaml may name the config.json (relative to
    // it): what `referee compare` reads from a side.
    std::fs::write(&cfg, LLAMA3_70B_CONFIG).unwrap();
    let side = tmp.path().join("side");
    std::fs::create_dir(&side).unwrap();
    std::fs::copy(fixture(EXAMPLE), side.join("run.log")).unwrap();
    std::fs::write(
        side.join("referee-perf.yaml"),
        "model_config: ../Meta-Llama-3-70B/config.json\ngpu: H100\nprecision: bf16\ngpus: 64\ngbs: 512\nseq_len: 8192\n",
    )
    .unwrap();
    let o = perf(&["--json"], &[side.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = &json_of(&o)["rows"][0];
    close(
        &r["model_tflops_per_gpu"]["value"],
        llama3_70b_flops_per_token(8192.0, true) * tokens_per_gpu / 1e12,
        1e-9,
    );
    assert!(
        r["model_flops"]["source"]
            .as_str()
            .unwrap()
            .starts_with("model_config "),
        "{}",
        r["model_flops"]
    );
    std::fs::write(side.join("referee-perf.yaml"), "model_config: nope.json\n").unwrap();
    let o = perf(&["--json"], &[side.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("model_config: --model-config "),
        "{}",
        stderr(&o)
    );
    let o = perf(&["--attention-flops", "half-ish"], &[&fixture(EXAMPLE)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--attention-flops half-ish"),
        "{}",
        stderr(&o)
    );
}

/// The NeMo fixture prints TFLOPS_per_GPU 800 ± 2 at 9.5 s per step of 128
/// sequences on 8 GPUs. At 8192 tokens the model gives 57.9 GFLOP/token ×
/// 13,797 tokens/s/GPU = 799 TFLOP/s/GPU: agreement within 2 %; at 4096
/// tokens 51.5 GFLOP/token × 6,898 = 355: the log's 800 is named as
/// disagreeing. The log's figure stays the row's (and its MFU's).
#[test]
fn log_tflops_and_model_tflops_both_shown_and_disagreement_named() {
    let nemo =
        fixture("nemo/log-pretrain_llama3_8b_fp8_gpus8_tp1_pp1_cp2_vp1_mbs1_gbs128_4242.out");
    let (l, h, a, g, f, v) = (32.0, 4096.0, 32.0, 8.0, 14336.0, 128256.0);
    let fpt = |s: f64| {
        l * h * h * (12.0 + 12.0 * g / a + 18.0 * f / h + 12.0 * s / h + 6.0 * v / (l * h))
    };
    for (seq, disagrees) in [(8192u32, false), (4096, true)] {
        let s = seq.to_string();
        let o = perf(&["--json", "--gpu", "H100", "--seq-len", &s], &[&nemo]);
        let r = &json_of(&o)["rows"][0];
        let m = &r["model_flops"];
        let ours = fpt(seq as f64) * (seq as f64 * 128.0 / 9.5 / 8.0) / 1e12;
        close(&m["tflops_per_gpu"], ours, 1e-9);
        close(&m["log_tflops_per_gpu"], 800.0, 1e-12);
        close(&m["difference_pct"], (800.0 - ours) / ours * 100.0, 1e-9);
        assert_eq!(m["disagrees"], disagrees, "{seq}");
        assert_eq!(r["model_tflops_per_gpu"]["source"], "log");
        close(&r["mfu"]["value"], 800.0 / 1979.0, 1e-9);
        close(&m["mfu"], ours / 1979.0, 1e-9);
        let notes = r["notes"].to_string();
        assert_eq!(notes.contains("beyond 2 %"), disagrees, "{notes}");
        let human = stdout(&perf(&["--gpu", "H100", "--seq-len", &s], &[&nemo]));
        assert!(
            human.contains(&format!("800.0 (model {:.1})", ours)),
            "{human}"
        );
    }
}

#[test]
fn unknown_model_is_named() {
    let o = perf(
        &[
            "--json",
            "--model",
            "my-llm",
            "--seq-len",
            "8192",
            "--gbs",
            "512",
            "--gpus",
            "64",
        ],
        &[&fixture(EXAMPLE)],
    );
    let r = &json_of(&o)["rows"][0];
    assert_eq!(r["model_flops"], Value::Null);
    assert!(
        r["missing"].to_string().contains(
            "the model `my-llm` has no built-in architecture (--model-config config.json)"
        ),
        "{}",
        r["missing"]
    );
}

/// Llama 2 7B's FLOPs per token in NeMo's published form (L 32, h 4096,
/// 32 heads and KV heads, FFN 11008, vocab 32000), full attention.
fn llama2_7b_flops_per_token(s: f64) -> f64 {
    let (l, h, a, g, f, v) = (32.0, 4096.0, 32.0, 32.0, 11008.0, 32000.0);
    l * h * h * (12.0 + 12.0 * g / a + 18.0 * f / h + 12.0 * s / h + 6.0 * v / (l * h))
}

const LLAMA2_FLAGS: &[&str] = &[
    "--json",
    "--model",
    "llama2-7b",
    "--gpu",
    "H100",
    "--precision",
    "bf16",
    "--gpus",
    "8",
    "--seq-len",
    "4096",
];

/// A NeMo 1 progress-bar log (issue #55's form, `\r`-separated updates on
/// one line): step i at 5.0 + (i mod 5 − 2)/100 s/it, GBS 128 by flag.
#[test]
fn lightning_progress_bar_log_end_to_end() {
    let path = fixture("formats/lightning_llama2_7b.out");
    let mut args = LLAMA2_FLAGS.to_vec();
    args.extend(["--gbs", "128"]);
    let o = perf(&args, &[&path]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = &json_of(&o)["rows"][0];
    assert_eq!(r["format"], "lightning");
    assert_eq!(r["status"]["kind"], "complete");
    assert_eq!(
        (r["window"]["first"].as_u64(), r["window"]["last"].as_u64()),
        (Some(35), Some(44))
    );
    close(&r["step_time_s"]["mean"], 5.0, 1e-12);
    close(&r["step_time_s"]["sd"], 0.01 * (20.0f64 / 9.0).sqrt(), 1e-9);
    let tpg = 4096.0 * 128.0 / 5.0 / 8.0;
    close(&r["tokens_per_second_per_gpu"], tpg, 1e-12);
    let tflops = llama2_7b_flops_per_token(4096.0) * tpg / 1e12;
    close(&r["model_tflops_per_gpu"]["value"], tflops, 1e-9);
    close(&r["mfu"]["value"], tflops / 989.0, 1e-9);
    // All updates sit on line 2 (one line of `\r`-separated updates).
    assert!(r["problems"].as_array().unwrap().is_empty());
}

/// torchtitan: the step-10 line (start-up, 1,000 tps) is left out; steps
/// 20–100 print 5,800 ± 50 tps (mean 5,800), 339.16 TFLOP/s, 34.29 %.
#[test]
fn torchtitan_log_end_to_end() {
    let path = fixture("formats/torchtitan.out");
    let o = perf(LLAMA2_FLAGS, &[&path]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = &json_of(&o)["rows"][0];
    assert_eq!(r["format"], "torchtitan");
    assert_eq!(r["rank"], "[rank0]:");
    assert_eq!(
        (r["window"]["first"].as_u64(), r["window"]["last"].as_u64()),
        (Some(20), Some(100))
    );
    close(&r["tokens_per_second_per_gpu"], 5800.0, 1e-12);
    close(&r["tokens_per_second"], 5800.0 * 8.0, 1e-12);
    close(&r["model_tflops_per_gpu"]["value"], 339.16, 1e-12);
    assert_eq!(r["model_tflops_per_gpu"]["source"], "log");
    close(&r["mfu"]["value"], 0.3429, 1e-12);
    let ours = llama2_7b_flops_per_token(4096.0) * 5800.0 / 1e12;
    close(&r["model_flops"]["tflops_per_gpu"], ours, 1e-9);
    assert_eq!(r["model_flops"]["disagrees"], true);
    // No sequence length: no tokens per step, so no model figure, named.
    let o = perf(&["--json", "--model", "llama2-7b"], &[&path]);
    let r = &json_of(&o)["rows"][0];
    close(&r["tokens_per_second_per_gpu"], 5800.0, 1e-12);
    assert!(
        r["missing"]
            .to_string()
            .contains("the sequence length is not stated"),
        "{}",
        r["missing"]
    );
}

/// Hugging Face Trainer: 32 samples/s and 2 steps/s over the whole run;
/// 4,096 tokens per sample on 8 GPUs: 16,384 tokens/s/GPU.
#[test]
fn hugging_face_trainer_log_end_to_end() {
    let path = fixture("formats/hf_trainer.out");
    let o = perf(LLAMA2_FLAGS, &[&path]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = &json_of(&o)["rows"][0];
    assert_eq!(r["format"], "hf-trainer");
    assert_eq!(r["status"]["kind"], "complete");
    close(&r["samples_per_second"], 32.0, 1e-12);
    close(&r["step_time_s"]["mean"], 0.5, 1e-12);
    close(&r["tokens_per_second_per_gpu"], 32.0 * 4096.0 / 8.0, 1e-12);
    let tflops = llama2_7b_flops_per_token(4096.0) * 32.0 * 4096.0 / 8.0 / 1e12;
    close(&r["model_tflops_per_gpu"]["value"], tflops, 1e-9);
    // Without the summary the run is incomplete.
    let tmp = tempfile::tempdir().unwrap();
    let cut = tmp.path().join("cut.log");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&cut, text.lines().take(4).collect::<Vec<_>>().join("\n")).unwrap();
    let o = perf(&["--json"], &[cut.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let r = &json_of(&o)["rows"][0];
    assert_eq!(r["status"]["kind"], "incomplete");
    assert!(
        r["status"]["detail"]
            .as_str()
            .unwrap()
            .contains("no train_runtime summary"),
        "{}",
        r["status"]
    );
}

/// A side of three NeMo 2 runs of issue 33's example (no TFLOP/s in the
/// log), run k's every step × factor × (1 + 0.002·k), with the fields in
/// the side's `referee-perf.yaml`.
fn nemo2_side(dir: &std::path::Path, factor: f64) -> Vec<f64> {
    std::fs::create_dir_all(dir).unwrap();
    let src = std::fs::read_to_string(fixture(EXAMPLE)).unwrap();
    let key = "train_step_timing in s: ";
    let mut means = Vec::new();
    for k in 0..3 {
        let f = factor * (1.0 + 0.002 * k as f64);
        let mut out = String::new();
        for line in src.lines() {
            match line.find(key) {
                Some(i) => {
                    let v: f64 = line[i + key.len()..].trim().parse().unwrap();
                    out.push_str(&format!("{}{key}{}\n", &line[..i], v * f));
                }
                None => {
                    out.push_str(line);
                    out.push('\n');
                }
            }
        }
        std::fs::write(dir.join(format!("run{k}.log")), out).unwrap();
        means.push(60.0 * f); // the window's mean step time
    }
    std::fs::write(
        dir.join("referee-perf.yaml"),
        "model: llama3-70b\nsystem: lab\ngpu: H100\nprecision: bf16\ngpus: 64\ngbs: 512\nseq_len: 8192\n",
    )
    .unwrap();
    means
}

/// `referee compare` of two releases' framework logs: each run's MFU from
/// the model's FLOPs, the sides' MFU compared with a bootstrap interval.
#[test]
fn compare_two_releases_mfu_from_the_model() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, slow) = (tmp.path().join("a"), tmp.path().join("slow"));
    let steps_a = nemo2_side(&a, 1.0);
    let steps_b = nemo2_side(&slow, 1.1);
    let o = referee(&[
        "compare",
        "--json",
        a.to_str().unwrap(),
        slow.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let j = json_of(&o);
    let g = &j["groups"][0];
    assert_eq!(g["verdict"], "regression", "{g:#}");
    let mfu_of = |step: f64| {
        llama3_70b_flops_per_token(8192.0, true) * (8192.0 * 512.0 / step / 64.0) / 1e12 / 989.0
    };
    let runs = g["baseline"]["runs"].as_array().unwrap();
    let mut got: Vec<f64> = runs.iter().map(|r| r["mfu"].as_f64().unwrap()).collect();
    got.sort_by(f64::total_cmp);
    let mut want: Vec<f64> = steps_a.iter().map(|s| mfu_of(*s)).collect();
    want.sort_by(f64::total_cmp);
    for (x, y) in got.iter().zip(&want) {
        assert!((x / y - 1.0).abs() < 1e-9, "{x} vs {y}");
    }
    let m = g["throughput"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["metric"] == "mfu")
        .unwrap_or_else(|| panic!("no mfu metric: {g:#}"));
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let base = mean(&steps_a.iter().map(|s| mfu_of(*s)).collect::<Vec<_>>());
    let cand = mean(&steps_b.iter().map(|s| mfu_of(*s)).collect::<Vec<_>>());
    close(&m["baseline"], base, 1e-9);
    close(&m["candidate"], cand, 1e-9);
    close(&m["relative_change"], cand / base - 1.0, 1e-9);
    // The interval of the change excludes 0: the candidate is ~9 % lower.
    assert!(m["ci"]["hi"].as_f64().unwrap() < 0.0, "{m:#}");
    assert_eq!(m["better"], "higher");
}
