//! Parser tests on real log lines (each fixture names where it comes
//! from) and on malformed lines.

use super::*;

/// NVIDIA/Megatron-LM issue #756 ("Training Mixtral 8x7B on 16 x H100 only
/// achieves low throughput of 130 TFLOPS",
/// https://github.com/NVIDIA/Megatron-LM/issues/756), lines as posted.
const MEGATRON_756: &str = " [2024-04-06 02:59:36] iteration       43/     100 | consumed samples:         5504 | elapsed time per iteration (ms): 5444.9 | throughput per GPU (TFLOP/s/GPU): 239.8 | learning rate: 8.600000E-06 | global batch size:   128 | lm loss: 1.825991E+00 | load_balancing_loss: 1.019746E+00 | loss scale: 1.0 | grad norm: 1.426 | num zeros: 0.0 | number of skipped iterations:   0 | number of nan iterations:   0 |
 [2024-04-06 02:59:41] iteration       44/     100 | consumed samples:         5632 | elapsed time per iteration (ms): 5533.8 | throughput per GPU (TFLOP/s/GPU): 236.0 | learning rate: 8.800000E-06 | global batch size:   128 | lm loss: 1.875063E+00 | load_balancing_loss: 1.020033E+00 | loss scale: 1.0 | grad norm: 1.327 | num zeros: 0.0 | number of skipped iterations:   0 | number of nan iterations:   0 |
 [2024-04-06 02:59:47] iteration       45/     100 | consumed samples:         5760 | elapsed time per iteration (ms): 5718.6 | throughput per GPU (TFLOP/s/GPU): 228.4 | learning rate: 9.000000E-06 | global batch size:   128 | lm loss: 1.834162E+00 | load_balancing_loss: 1.018004E+00 | loss scale: 1.0 | grad norm: 1.611 | num zeros: 0.0 | number of skipped iterations:   0 | number of nan iterations:   0 |
";

/// epfLLM/Megatron-LLM issue #11 (https://github.com/epfLLM/Megatron-LLM/issues/11):
/// Megatron lines without a TFLOP/s field.
const MEGATRON_EPFL: &str = " iteration      122/  250000 | consumed samples:       124928 | elapsed time per iteration (ms): 86545.2 | learning rate: 9.150E-06 | global batch size:  1024 | lm loss: 2.504220E+00 | loss scale: 1.0 | grad norm: 0.231 | number of skipped iterations:   0 | number of nan iterations:   0 |
";

/// Megatron's argument printout: NVIDIA/Megatron-LM issue #91
/// (https://github.com/NVIDIA/Megatron-LM/issues/91) for the first lines,
/// issue #516 (https://github.com/NVIDIA/Megatron-LM/issues/516) for
/// `seq_length`; the other argument lines are written in the same form
/// (`name`, dots, value) with the names of Megatron's arguments.
const MEGATRON_ARGS: &str = "using world size: 1, data-parallel-size: 1, tensor-model-parallel size: 1, pipeline-model-parallel size: 1 
setting global batch size to 128
using torch.float16 for parameters ...
------------------------ arguments ------------------------
  accumulate_allreduce_grads_in_fp32 .............. False
  adam_beta1 ...................................... 0.9
  bf16 ............................................ False
  fp16 ............................................ True
  fp8 ............................................. None
  global_batch_size ............................... 128
  micro_batch_size ................................ 4
  seq_length ...................................... 1024
  sequence_parallel ............................... False
  virtual_pipeline_model_parallel_size ............ None
-------------------- end of arguments ---------------------
";

/// NVIDIA-BioNeMo/bionemo-recipes pull request #740
/// (https://github.com/NVIDIA-BioNeMo/bionemo-recipes/pull/740): NeMo 2
/// iteration lines as posted (0-based, the denominator the last one).
const NEMO_740: &str = "Training epoch 0, iteration 120/149 | lr: 3e-05 | consumed_samples: 121 | global_batch_size: 1 | global_step: 120 | reduced_train_loss: 1.233 | train_step_timing in s: 0.03146 | val_loss: 4.106
Training epoch 0, iteration 121/149 | lr: 3e-05 | consumed_samples: 122 | global_batch_size: 1 | global_step: 121 | reduced_train_loss: 1.288 | train_step_timing in s: 0.03163 | val_loss: 4.106
Training epoch 0, iteration 122/149 | lr: 3e-05 | consumed_samples: 123 | global_batch_size: 1 | global_step: 122 | reduced_train_loss: 1.333 | train_step_timing in s: 0.03215 | val_loss: 4.106
";

/// NeMo 1 progress bar, as NVIDIA's DGX Cloud recipe page for Grok1 314B
/// shows it (https://catalog.ngc.nvidia.com/orgs/nvidia/teams/dgxc-benchmarking/resources/grok1-314b-dgxc-benchmarking-d):
/// no `iteration N/M` (the recipes' parser does not read it); referee
/// reads it as a progress bar with `train_step_timing in s=`.
const NEMO1_BAR: &str = "Epoch 0: : 100%|██████████| 50/50 [23:22<00:00, reduced_train_loss=0.186, global_step=49.00, consumed_samples=51200.0, train_step_timing in s=24.00]\n";

/// One MLLOG line of a real MLPerf v5.0 result (Dell, 1xXE9680x8MI300X,
/// llama2_70b_lora, result_0.txt in mlcommons/training_results_v5.0).
const MLLOG_TRACKED: &str = r#":::MLLOG {"namespace": "", "time_ms": 1746074965143, "event_type": "POINT_IN_TIME", "key": "tracked_stats", "value": {"throughput": 2.047815563486275}, "metadata": {"file": "/workspace/code/src/callbacks/custom_callbacks.py", "lineno": 195, "step": 1536}}
:::MLLOG {"namespace": "", "time_ms": 1746074108603, "event_type": "POINT_IN_TIME", "key": "global_batch_size", "value": 8, "metadata": {"file": "/workspace/code/src/callbacks/custom_callbacks.py", "lineno": 240}}
"#;

fn scan(text: &str) -> Scan {
    scan_bytes(text.as_bytes())
}

#[test]
fn megatron_lm_lines() {
    let s = scan(MEGATRON_756);
    assert_eq!(s.format(), Format::Megatron);
    assert_eq!(s.samples.len(), 3);
    let a = &s.samples[0];
    assert_eq!((a.iteration, a.last, a.line), (43, 100, 1));
    assert_eq!(a.step_s, Some(5.4449)); // ms → s
    assert_eq!(a.tflops, Some(239.8));
    assert_eq!(a.gbs, Some(128));
    assert_eq!(a.rank, NO_RANK); // a timestamp is not a rank
    assert!(s.nan_grad.is_none());
    assert!(s.problems.is_empty());
    let e = scan(MEGATRON_EPFL);
    assert_eq!(e.samples[0].step_s, Some(86.5452));
    assert_eq!(e.samples[0].tflops, None);
    assert_eq!((e.samples[0].iteration, e.samples[0].last), (122, 250000));
    assert_eq!(e.samples[0].gbs, Some(1024));
}

#[test]
fn megatron_arguments() {
    let s = scan(MEGATRON_ARGS);
    assert_eq!(s.arg("world_size"), Some(("1", 1)));
    assert_eq!(s.arg("tensor_model_parallel_size"), Some(("1", 1)));
    assert_eq!(s.arg("pipeline_model_parallel_size"), Some(("1", 1)));
    assert_eq!(s.arg("global_batch_size"), Some(("128", 10)));
    assert_eq!(s.arg("micro_batch_size"), Some(("4", 11)));
    assert_eq!(s.arg("seq_length"), Some(("1024", 12)));
    assert_eq!(s.arg("fp16"), Some(("True", 8)));
    assert_eq!(
        s.arg("virtual_pipeline_model_parallel_size"),
        Some(("None", 14))
    );
    // Names referee does not read are not kept.
    assert_eq!(s.arg("adam_beta1"), None);
    assert!(s.samples.is_empty());
}

#[test]
fn nemo_lines() {
    let s = scan(NEMO_740);
    assert_eq!(s.format(), Format::Nemo);
    assert_eq!(s.samples.len(), 3);
    let a = &s.samples[2];
    assert_eq!((a.iteration, a.last, a.line), (122, 149, 3));
    assert_eq!(a.step_s, Some(0.03215)); // seconds, not converted
    assert_eq!(a.gbs, Some(1));
    assert_eq!(a.tflops, None);
    let bar = scan(NEMO1_BAR);
    assert_eq!(bar.format(), Format::Lightning);
    let a = &bar.samples[0];
    // global_step 49 → iteration 50 (numbered from 1), of 50.
    assert_eq!((a.iteration, a.last, a.step_s), (50, 50, Some(24.0)));
}

#[test]
fn tflops_spellings_and_scientific_notation() {
    // The recipes' test file (NVIDIA/dgxc-benchmarking,
    // cli/llmb-run/tests/test_pretrain_log_parser.py) writes these forms.
    let s = scan(
        "Training epoch 0, iteration 3/50 | train_step_timing in s: 2.5e-1 TFLOPS_per_GPU: 1.249e+03\n\
         iteration 4/50 | elapsed time per iteration (ms): 2000.0 | 300.0 MODEL_TFLOP/s/GPU\n \
         iteration 5/ 50 | throughput 505.0 TFLOP/s/GPU\n \
         iteration 5/ 50 | elapsed time per iteration (ms): 1005.0 | \n",
    );
    let got: Vec<(u64, Option<f64>, Option<f64>)> = s
        .samples
        .iter()
        .map(|x| (x.iteration, x.step_s, x.tflops))
        .collect();
    assert_eq!(
        got,
        vec![
            (3, Some(0.25), Some(1249.0)),
            (4, Some(2.0), Some(300.0)),
            (5, None, Some(505.0)),
            (5, Some(1.005), None),
        ]
    );
}

#[test]
fn nan_grad_norm_anywhere() {
    for line in [
        " iteration 11/ 50 | elapsed time per iteration (ms): 1000.0 | grad norm: NaN |",
        "iteration 3/50 | grad_norm: nan",
        "iteration 7/50 | grad norm : nan",
    ] {
        let s = scan(&format!("x\n{line}\n"));
        let n = s.nan_grad.unwrap_or_else(|| panic!("{line}"));
        assert_eq!(n.line, 2);
        assert!(n.iteration.is_some());
    }
    // The first one is reported; a finite norm is not NaN.
    let s = scan("iteration 3/50 | grad_norm: nan\niteration 7/50 | grad norm : nan\n");
    assert_eq!(s.nan_grad.unwrap().iteration, Some(3));
    assert!(
        scan(" iteration 1/ 50 | grad norm: 1.5 |\n")
            .nan_grad
            .is_none()
    );
    assert!(scan("grad norm: 12.0 nan-checker on\n").nan_grad.is_none());
}

#[test]
fn rank_prefixes() {
    for (prefix, key) in [
        ("0: ", 0u64),
        ("  3: ", 3 << 32),
        ("[rank2]: ", 2 << 32),
        ("[default1]:", 1 << 32),
        ("[1,5]<stdout>:", 5 << 32),
        ("[1,5]<stderr>: ", 5 << 32),
        ("4: [rank1]: ", (4 << 32) | 2),
    ] {
        let line = format!("{prefix}Training epoch 0, iteration 1/9 | train_step_timing in s: 1.0");
        let s = scan(&line);
        assert_eq!(s.samples.len(), 1, "{prefix}");
        assert_eq!(s.samples[0].rank, key, "{prefix}");
        assert_eq!(s.prefixes[&key], prefix.trim(), "{prefix}");
    }
    // A clock time or a date is no rank.
    assert_eq!(rank_prefix(b"10:30:00 iteration").0, NO_RANK);
    assert_eq!(rank_prefix(b"[2024-04-06 02:59:36] iteration").0, NO_RANK);
}

#[test]
fn malformed_lines_are_diagnosed_not_fatal() {
    let text = "iteration 40/50 | elapsed time per iteration (ms): abc | grad norm: 1.0\n\
                Training epoch 0, iteration 41/50 | train_step_timing in s: -2 | TFLOPS_per_GPU: many\n\
                iteration 42/50 | elapsed time per iteration (ms): | \n\
                iteration 99999999999999999999999/50 | elapsed time per iteration (ms): 1.0\n\
                train_step_timing in s: 3.0\n";
    let mut bytes = b"\xff\xfe garbage \xc3\x28\n".to_vec();
    bytes.extend_from_slice(text.as_bytes());
    let s = scan_bytes(&bytes);
    let p: Vec<(usize, &str, &str)> = s
        .problems
        .iter()
        .map(|p| (p.line, p.expected.as_str(), p.found.as_str()))
        .collect();
    assert_eq!(p.len(), 4, "{p:?}");
    assert_eq!(p[0].0, 2);
    assert!(
        p[0].1.contains("milliseconds") && p[0].2 == "`abc`",
        "{p:?}"
    );
    assert_eq!((p[1].0, p[1].2), (3, "`-2`"));
    assert_eq!((p[2].0, p[2].2), (3, "`many`"));
    assert_eq!((p[3].0, p[3].2), (4, "nothing"));
    // The lines still count as iterations, without a step time.
    assert_eq!(s.samples.len(), 3);
    assert!(s.samples.iter().all(|x| x.step_s.is_none()));
    // A number too long for an iteration is no marker; a value without a
    // marker is counted as ignored.
    assert_eq!(s.unmarked, 2);
    assert_eq!(s.lines, 6);
}

#[test]
fn mllog_lines_through_rules_mllog() {
    let text = format!("noise\n{MLLOG_TRACKED}:::MLLOG {{\"broken\n");
    let s = scan(&text);
    assert_eq!(s.format(), Format::Mllog);
    assert_eq!(s.mllog.len(), 3);
    let f = mllog_facts(&s.mllog);
    assert_eq!(f.tracked, vec![(Some(1536), 2.047815563486275, 2)]);
    assert_eq!(f.gbs, Some((8, 3)));
    assert_eq!(f.problems.len(), 1);
    assert_eq!(f.problems[0].line, 4);
}

#[test]
fn pieces_agree_with_one_pass() {
    // A multi-rank file large enough to be cut into pieces: the parallel
    // scan must equal the single pass, line numbers included.
    let mut text = String::new();
    for i in 0..120_000u64 {
        let rank = i % 4;
        text.push_str(&format!("{rank}: NCCL INFO Channel {i:05} via P2P/IPC\n"));
        if i % 3 == 0 {
            text.push_str(&format!(
                "{rank}: Training epoch 0, iteration {}/99999 | global_batch_size: 8 | train_step_timing in s: {}.5 | TFLOPS_per_GPU: 1e2\n",
                i / 3,
                i % 7 + 1
            ));
        }
    }
    text.push_str("7: iteration 5/9 | grad_norm: nan\n");
    let one = scan_piece(text.as_bytes());
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .unwrap();
    let many = pool.install(|| scan_bytes(text.as_bytes()));
    assert!(text.len() > 8 << 20);
    assert_eq!(one.samples, many.samples);
    assert_eq!(one.lines, many.lines);
    assert_eq!(one.nan_grad, many.nan_grad);
    assert_eq!(one.samples.len(), 40_000);
    assert_eq!(one.nan_grad.unwrap().line, one.lines);
    // And through a file read in blocks.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("big.out");
    let mut big = Vec::new();
    while big.len() < 70 << 20 {
        big.extend_from_slice(text.as_bytes());
    }
    std::fs::write(&p, &big).unwrap();
    let f = scan_file(&p, referee_rules::untrusted::Links::Refuse).unwrap();
    let copies = big.len() / text.len();
    assert_eq!(f.samples.len(), 40_000 * copies);
    assert_eq!(f.lines, one.lines * copies);
    assert_eq!(f.bytes, big.len() as u64);
    assert_eq!(f.samples[40_000].line, one.lines + one.samples[0].line);
}

/// NVIDIA/NeMo-Framework-Launcher issue #55 ("How do we enable samples per
/// second metric in NeMo training?",
/// https://github.com/NVIDIA/NeMo-Framework-Launcher/issues/55), the line as
/// posted.
const LIGHTNING_55: &str = "Epoch 0:   1%|          | 795/77225 [9:07:58<878:01:48, 41.36s/it, loss=3.1, v_num=, reduced_train_loss=3.090, global_step=794.0, consumed_samples=1.63e+6]";

/// official-stockfish/nnue-pytorch issue #83 ("Console output
/// interpretation", https://github.com/official-stockfish/nnue-pytorch/issues/83):
/// a Lightning bar with `it/s`, as posted.
const LIGHTNING_83: &str = "Epoch 1:  39%|█████████▍              | 4846/12331 [05:59<09:15, 13.47it/s, loss=0.0136, v_num=1]";

#[test]
fn lightning_progress_bars() {
    let s = scan(&format!("{LIGHTNING_55}\n"));
    assert_eq!(s.format(), Format::Lightning);
    let a = &s.samples[0];
    // global_step 794 → iteration 795 (= the bar's count), of 77225.
    assert_eq!((a.iteration, a.last, a.line), (795, 77225, 1));
    assert_eq!(a.step_s, Some(41.36)); // s/it
    assert!(s.problems.is_empty());
    let s = scan(&format!("{LIGHTNING_83}\n"));
    let a = &s.samples[0];
    // No global_step: the bar's count.
    assert_eq!((a.iteration, a.last), (4846, 12331));
    assert_eq!(a.step_s, Some(1.0 / 13.47)); // it/s inverted
    assert_eq!(s.format(), Format::Lightning);
}

/// Lightning redraws its bar with `\r`: the updates of issue #55's form on
/// one line, each read; repeated updates of one step keep the last.
#[test]
fn lightning_carriage_return_updates() {
    let upd = |n: u64, rate: &str| {
        format!(
            "Epoch 0:   1%|          | {n}/77225 [9:07:58<878:01:48, {rate}, loss=3.1, v_num=, reduced_train_loss=3.090, global_step={}.0, consumed_samples=1.63e+6]",
            n - 1
        )
    };
    let text = format!(
        "[NeMo I 2023-05-25 10:00:00 exp_manager:374] start\n{}\r{}\r{}\r{}\n",
        upd(795, "41.36s/it"),
        upd(796, "41.30s/it"),
        upd(796, "41.20s/it"),
        upd(797, "?it/s")
    );
    let s = scan(&text);
    let got: Vec<(u64, Option<f64>, usize)> = s
        .samples
        .iter()
        .map(|x| (x.iteration, x.step_s, x.line))
        .collect();
    assert_eq!(
        got,
        vec![(795, Some(41.36), 2), (796, Some(41.2), 2), (797, None, 2)]
    );
    assert!(s.problems.is_empty());
}

#[test]
fn malformed_progress_bar_names_the_line() {
    let text = format!(
        "{LIGHTNING_55}\n{}\n",
        LIGHTNING_55.replace("41.36s/it", "4x.36s/it")
    );
    let s = scan(&text);
    assert_eq!(s.problems.len(), 1, "{:?}", s.problems);
    let p = &s.problems[0];
    assert_eq!(p.line, 2);
    assert_eq!(p.found, "`4x.36s/it`");
    assert!(p.expected.contains("s/it"), "{}", p.expected);
    assert_eq!(s.samples[1].step_s, None); // the step is kept without a time
}

/// pytorch/torchtitan pull request #1287
/// (https://github.com/pytorch/torchtitan/pull/1287), lines as posted.
const TITAN_1287: &str = "[rank0]:[titan] 2025-06-16 22:30:48,735 - root - INFO - [GC] Peforming periodical GC collection. 0.06 seconds.
[rank0]:[titan] 2025-06-16 22:30:50,322 - root - INFO - step: 200  loss:  6.1384  memory: 49.66GiB(52.28%)  tps: 5,856  tflops: 339.16  mfu: 34.29%
[rank0]:[titan] 2025-06-16 22:31:04,970 - root - INFO - step: 210  loss:  6.0388  memory: 49.66GiB(52.28%)  tps: 5,593  tflops: 323.92  mfu: 32.75%
[rank0]:[titan] 2025-06-16 22:31:18,934 - root - INFO - step: 220  loss:  6.0348  memory: 49.66GiB(52.28%)  tps: 5,868  tflops: 339.82  mfu: 34.36%
";

/// pytorch/torchtitan pull request #2389
/// (https://github.com/pytorch/torchtitan/pull/2389): with `grad_norm`.
const TITAN_2389: &str = "[titan] 2026-02-24 19:46:17,508 - root - INFO - step:  4  loss:  7.62585  grad_norm: 26.6250  memory: 66.91GiB(37.51%)  tps: 10,050  tflops: 314.71  mfu: 13.99%\n";

#[test]
fn torchtitan_lines() {
    let s = scan(TITAN_1287);
    assert_eq!(s.format(), Format::Torchtitan);
    let got: Vec<(u64, Option<f64>, Option<f64>, usize)> = s
        .titan
        .iter()
        .map(|t| (t.step, t.tps, t.tflops, t.line))
        .collect();
    assert_eq!(
        got,
        vec![
            (200, Some(5856.0), Some(339.16), 2),
            (210, Some(5593.0), Some(323.92), 3),
            (220, Some(5868.0), Some(339.82), 4),
        ]
    );
    assert_eq!(s.titan[0].mfu, Some(0.3429));
    assert_eq!(s.titan[0].rank, 0 << 32);
    let s = scan(TITAN_2389);
    assert_eq!((s.titan[0].step, s.titan[0].tps), (4, Some(10050.0)));
    assert!(s.nan_grad.is_none());
    // Colours (torchtitan's default terminal output) are stripped.
    let s = scan(
        "\u{1b}[31mstep: 10  \u{1b}[32mloss:  9.5  \u{1b}[33mmemory: 3GiB(4%)  \u{1b}[34mtps: 1,234  \u{1b}[36mtflops: 56.7  \u{1b}[35mmfu: 5.73%\u{1b}[39m\n",
    );
    assert_eq!(
        (s.titan[0].step, s.titan[0].tps, s.titan[0].tflops),
        (10, Some(1234.0), Some(56.7))
    );
    // A malformed tps: file:line, expected, found.
    let s = scan(&TITAN_2389.replace("10,050", "lots"));
    assert_eq!(s.problems.len(), 1);
    assert_eq!(
        (s.problems[0].line, s.problems[0].found.as_str()),
        (1, "`lots`")
    );
    assert_eq!(s.titan[0].tps, None);
}

/// huggingface/transformers pull request #35207
/// (https://github.com/huggingface/transformers/pull/35207): Trainer
/// per-step dicts as posted; the summary line from the transformers
/// documentation (`docs/source/en/perf_train_gpu_many.md`, "DP vs DDP").
const HF_STEPS: &str = "{'loss': 2.119, 'grad_norm': 37.657958984375, 'learning_rate': 4.5833333333333334e-05, 'epoch': 0.25}
{'loss': 1.6462, 'grad_norm': 17.54932403564453, 'learning_rate': 4.166666666666667e-05, 'epoch': 0.5}
";
const HF_SUMMARY: &str =
    "{'train_runtime': 110.5948, 'train_samples_per_second': 1.808, 'epoch': 0.69}\n";

#[test]
fn hugging_face_trainer_lines() {
    let s = scan(&format!("{HF_STEPS}{HF_SUMMARY}"));
    assert_eq!(s.format(), Format::HfTrainer);
    assert_eq!(s.hf.steps, 2);
    assert_eq!(s.hf.summary, Some((110.5948, 1.808, None, 3)));
    assert!(s.nan_grad.is_none());
    // Newer versions quote the values; steps/s when printed.
    let s = scan(
        "{'train_runtime': '1575', 'train_samples_per_second': '1.333', 'train_steps_per_second': '0.168', 'train_loss': '0.2854', 'epoch': '3'}\n",
    );
    assert_eq!(s.hf.summary, Some((1575.0, 1.333, Some(0.168), 1)));
    let s = scan(&HF_STEPS.replace("17.54932403564453", "nan"));
    assert_eq!(s.nan_grad.map(|n| n.line), Some(2));
    let s = scan(&HF_SUMMARY.replace("1.808", "fast"));
    assert_eq!(s.hf.summary, None);
    assert_eq!(s.problems[0].line, 1);
    assert_eq!(s.problems[0].found, "`fast`");
}
