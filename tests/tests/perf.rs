//! `referee perf` end to end: the built binary on the constructed logs of
//! `tests/fixtures/perf/` (made by `make_fixtures.py` in the line forms of
//! real NeMo and Megatron logs; the expected figures are computed by hand
//! in the comments), every output form, exit codes, the HTML report in
//! headless Chromium, `referee compare` on framework logs, and agreement
//! with `referee run --mode throughput` on referee's own run.

use referee_tests::{data_dir, decode_png, referee, repo_root, screenshot, stderr, stdout};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn fixture(rel: &str) -> String {
    repo_root()
        .join("tests/fixtures/perf")
        .join(rel)
        .display()
        .to_string()
}

const NEMO: &str = "nemo/log-pretrain_llama3_8b_fp8_gpus8_tp1_pp1_cp2_vp1_mbs1_gbs128_4242.out";

fn json_of(o: &std::process::Output) -> Value {
    let out = stdout(o);
    assert_eq!(
        out.trim().lines().count(),
        1,
        "one JSON object: {out}\n{}",
        stderr(o)
    );
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn close(a: &Value, b: f64, rel: f64) {
    let a = a.as_f64().unwrap_or_else(|| panic!("not a number: {a}"));
    assert!((a - b).abs() <= rel * b.abs().max(1e-300), "{a} vs {b}");
}

fn polylines_with_stroke(svg: &str, color: &str) -> usize {
    svg.split("<polyline")
        .skip(1)
        .filter(|p| p[..p.find("/>").unwrap_or(p.len())].contains(&format!("stroke=\"{color}\"")))
        .count()
}

fn figure<'a>(html: &'a str, class: &str) -> &'a str {
    let start = html
        .find(&format!("<figure class=\"plot {class}\""))
        .unwrap_or_else(|| panic!("no {class} figure"));
    let end = start + html[start..].find("</figure>").unwrap();
    &html[start..end]
}

#[test]
fn nemo_log_against_the_published_rows() {
    let o = referee(&[
        "perf",
        "--json",
        "--system",
        "DGX-H100",
        "--seq-len",
        "8192",
        "--against",
        "published",
        &fixture(NEMO),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let j = json_of(&o);
    let r = &j["rows"][0];
    assert_eq!(r["format"], "nemo");
    assert_eq!(r["rank"], "0:");
    assert_eq!(r["status"]["kind"], "complete");
    assert_eq!(
        (r["window"]["first"].as_u64(), r["window"]["last"].as_u64()),
        (Some(35), Some(44))
    );
    // Iteration i takes 9.5 + (i mod 5 − 2)/100 s: over 35–44 the offsets
    // are −2…2 twice, mean 9.5, sample sd 0.01 × √(20/9).
    let st = &r["step_time_s"];
    close(&st["mean"], 9.5, 1e-12);
    close(&st["sd"], 0.01 * (20.0f64 / 9.0).sqrt(), 1e-9);
    assert_eq!(st["n"], 10);
    // Fields and their sources: the file name, the log, the flags, derived.
    let f = &r["fields"];
    assert_eq!(
        (f["gpus"]["value"].as_u64(), f["gpus"]["source"].as_str()),
        (Some(8), Some("file-name"))
    );
    assert_eq!(
        (f["gbs"]["value"].as_u64(), f["gbs"]["source"].as_str()),
        (Some(128), Some("log"))
    );
    assert_eq!(f["seq_len"]["source"], "flag");
    assert_eq!(f["precision"]["value"], "fp8");
    assert_eq!(
        (f["gpu"]["value"].as_str(), f["gpu"]["source"].as_str()),
        (Some("H100"), Some("derived"))
    );
    assert_eq!(
        (f["ga"]["value"].as_u64(), f["ga"]["source"].as_str()),
        (Some(32), Some("derived"))
    );
    // tokens/s = 8192 × 128 / 9.5; per GPU ÷ 8; MFU = 800 / 1979 (H100 FP8).
    close(&r["tokens_per_second"], 8192.0 * 128.0 / 9.5, 1e-12);
    close(
        &r["tokens_per_second_per_gpu"],
        8192.0 * 128.0 / 9.5 / 8.0,
        1e-12,
    );
    close(&r["model_tflops_per_gpu"]["value"], 800.0, 1e-12);
    close(&r["mfu"]["value"], 800.0 / 1979.0, 1e-12);
    assert_eq!(r["peak_tflops"], 1979.0);
    // The published DGX-H100 LLAMA3-8B FP8 row (13,812 tokens/s/GPU, 800
    // TFLOP/s/GPU), matched exactly.
    let m = &r["reference"]["Ok"];
    assert_eq!(m["exact"], true, "{m:#}");
    assert_eq!(m["row"]["model"], "LLAMA3-8B");
    close(
        &m["pct_tokens_per_gpu"],
        8192.0 * 128.0 / 9.5 / 8.0 / 13812.0 * 100.0,
        1e-12,
    );
    close(&m["pct_tflops_per_gpu"], 100.0, 1e-12);
    // Rank 1 printed every iteration too: reported, not counted.
    assert!(
        r["notes"][0]
            .as_str()
            .unwrap()
            .contains("50 timing lines of 1 other rank")
    );
    assert_eq!(j["exit_code"], 0);
}

#[test]
fn every_output_form() {
    let args = |form: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = [
            "perf",
            "--gpu",
            "H100",
            "--seq-len",
            "8192",
            "--against",
            "published",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.extend(form.iter().map(|s| s.to_string()));
        v.push(fixture(NEMO));
        v.push(fixture("megatron/complete.out"));
        v
    };
    let run = |form: &[&str]| {
        let a = args(form);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let o = referee(&a);
        assert_eq!(o.status.code(), Some(0), "{form:?}: {}", stderr(&o));
        stdout(&o)
    };
    let human = run(&[]);
    assert!(
        human.contains("tokens/s/GPU") && human.contains("% of ref"),
        "{human}"
    );
    assert!(human.contains("2 runs: 2 complete"), "{human}");
    // No --system here: the row is the closest one, labelled looser.
    assert!(
        human.contains("reference (looser: system not stated (reference DGX-H100))"),
        "{human}"
    );
    assert!(human.contains("99.9 % (looser)"), "{human}");
    // The Megatron run names no model: no reference row, said so.
    assert!(
        human.contains("reference: none (the model is not stated"),
        "{human}"
    );
    let md = run(&["--markdown"]);
    assert!(md.starts_with("# referee perf"), "{md}");
    assert!(md.contains("| run | format | model |"), "{md}");
    assert!(md.contains("## How the figures are made"), "{md}");
    let csv = run(&["--csv"]);
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 3, "{csv}");
    let head = referee_tests::csv_fields(lines[0]);
    let row = referee_tests::csv_fields(lines[2]);
    let col = |name: &str| row[head.iter().position(|h| h == name).unwrap()].clone();
    assert_eq!(col("format"), "Megatron");
    assert_eq!(col("status"), "complete");
    // Megatron: 5000 + i ms; over 35–44 the mean is 5039.5 ms.
    assert!((col("step_time_mean_s").parse::<f64>().unwrap() - 5.0395).abs() < 1e-12);
    // The flag's sequence length (8192) wins over the log's 4096, which the
    // field's note keeps.
    let tps: f64 = col("tokens_per_s").parse().unwrap();
    assert!((tps - 8192.0 * 128.0 / 5.0395).abs() < 1e-6, "{tps}");
    let j: Value = serde_json::from_str(run(&["--json"]).trim()).unwrap();
    assert_eq!(j["rows"].as_array().unwrap().len(), 2);
    let seq = &j["rows"][1]["fields"]["seq_len"];
    assert_eq!(seq["source"], "flag");
    assert_eq!(seq["note"], "the log states 4096");
}

#[test]
fn megatron_fields_from_its_argument_dump() {
    let o = referee(&[
        "perf",
        "--json",
        "--gpu",
        "H100",
        &fixture("megatron/complete.out"),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = &json_of(&o)["rows"][0];
    assert_eq!(r["format"], "megatron");
    // Megatron's timing lines come from the last rank (15 of 16).
    assert_eq!(r["rank"], "15:");
    let f = &r["fields"];
    for (name, v) in [
        ("gpus", 16),
        ("tp", 8),
        ("pp", 1),
        ("cp", 1),
        ("gbs", 128),
        ("mbs", 1),
        ("seq_len", 4096),
    ] {
        assert_eq!(f[name]["value"].as_u64(), Some(v), "{name}");
        assert_eq!(f[name]["source"], "log", "{name}");
    }
    assert_eq!(f["precision"]["value"], "bf16");
    // 5000 + i ms over 35..44: mean 5.0395 s, sd 0.001 × √(82.5/9);
    // TFLOP/s/GPU 250 − i: mean 210.5; MFU against the BF16 peak 989.
    close(&r["step_time_s"]["mean"], 5.0395, 1e-12);
    close(
        &r["step_time_s"]["sd"],
        0.001 * (82.5f64 / 9.0).sqrt(),
        1e-9,
    );
    close(&r["model_tflops_per_gpu"]["value"], 210.5, 1e-12);
    close(&r["mfu"]["value"], 210.5 / 989.0, 1e-12);
    close(&r["samples_per_second"], 128.0 / 5.0395, 1e-12);
    // --window A..B excludes B (as referee run's); A..=B includes it.
    for w in ["10..20", "10..=19"] {
        let o = referee(&[
            "perf",
            "--json",
            "--window",
            w,
            &fixture("megatron/complete.out"),
        ]);
        let r = &json_of(&o)["rows"][0];
        close(&r["step_time_s"]["mean"], 5.0145, 1e-12);
        assert_eq!(r["window"]["last"], 19);
        assert!(r["window"]["rule"].as_str().unwrap().contains("--window"));
    }
}

#[test]
fn statuses_and_exit_codes() {
    for (file, kind, detail) in [
        (
            "status/incomplete.out",
            "incomplete",
            "window iteration 40 missing",
        ),
        ("status/nan_grad.out", "nan-grad-norm", "iteration 12"),
        (
            "status/no_window.out",
            "no-data",
            "no step time inside the window 35–44",
        ),
        // A NeMo 1 progress bar is read (issue 33): its one update is
        // iteration 50, outside the window.
        (
            "status/nemo1_bar.out",
            "no-data",
            "no step time inside the window 35–44",
        ),
    ] {
        let o = referee(&["perf", "--json", &fixture(file)]);
        assert_eq!(o.status.code(), Some(1), "{file}: {}", stderr(&o));
        let r = &json_of(&o)["rows"][0];
        assert_eq!(r["status"]["kind"], kind, "{file}");
        let d = r["status"]["detail"].as_str().unwrap();
        assert!(d.contains(detail), "{file}: {d}");
    }
    // A directory: all four are counted (the NeMo 1 progress bar is read
    // since issue 33, without data in the window).
    let o = referee(&["perf", "--json", &fixture("status")]);
    assert_eq!(o.status.code(), Some(1));
    let j = json_of(&o);
    let s = &j["summary"];
    assert_eq!(
        (
            s["runs"].as_u64(),
            s["incomplete"].as_u64(),
            s["nan_grad_norm"].as_u64(),
            s["no_data"].as_u64()
        ),
        (Some(4), Some(1), Some(1), Some(2))
    );
    assert_eq!(j["skipped"].as_array().unwrap().len(), 0);
}

#[test]
fn malformed_lines_name_file_and_line() {
    let path = fixture("malformed/malformed.out");
    let o = referee(&["perf", "--json", &path]);
    // Both bad lines are repeats after the run: it stays complete.
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = &json_of(&o)["rows"][0];
    let p = r["problems"].as_array().unwrap();
    assert_eq!(p.len(), 2, "{p:?}");
    assert_eq!(p[0]["file"], path.as_str());
    assert_eq!(p[0]["line"], 64);
    assert_eq!(p[0]["found"], "`5x3`");
    assert!(p[0]["expected"].as_str().unwrap().contains("milliseconds"));
    assert_eq!(
        (p[1]["line"].as_u64(), p[1]["found"].as_str()),
        (Some(65), Some("`lots`"))
    );
    let human = stdout(&referee(&["perf", &path]));
    assert!(
        human.contains(&format!("problem: {path}:64: unreadable step time")),
        "{human}"
    );
}

#[test]
fn bad_input_exits_2() {
    let missing = referee(&["perf", "/nonexistent/x.out"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).contains("/nonexistent/x.out"));
    let nemo = fixture(NEMO);
    for (args, says) in [
        (vec!["--precision", "fp6"], "--precision fp6"),
        (vec!["--window", "9..3"], "empty"),
        (vec!["--gpus", "0"], "--gpus"),
        (
            vec!["--against", "/nonexistent/ref.tsv"],
            "/nonexistent/ref.tsv",
        ),
    ] {
        let mut a = vec!["perf"];
        a.extend(args.iter().copied());
        a.push(&nemo);
        let o = referee(&a);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
    }
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tmp.path().join("perf.yaml");
    std::fs::write(&cfg, "model: x\ngpus: eight\n").unwrap();
    let o = referee(&["perf", "--config", cfg.to_str().unwrap(), &nemo]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains(&format!("{}:2: `gpus` is `eight`", cfg.display())),
        "{}",
        stderr(&o)
    );
    let empty = tmp.path().join("logs");
    std::fs::create_dir(&empty).unwrap();
    std::fs::write(empty.join("notes.txt"), "nothing here\n").unwrap();
    let o = referee(&["perf", empty.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("no training log (NeMo, Megatron, Lightning"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn scaling_view_and_html_in_chromium() {
    let tmp = tempfile::tempdir().unwrap();
    let page = tmp.path().join("perf.html");
    let o = referee(&[
        "perf",
        "--json",
        "--html",
        page.to_str().unwrap(),
        &fixture("scaling"),
        &fixture(NEMO),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let j = json_of(&o);
    // The directory's referee-perf.yaml names the model, system and GPU.
    assert_eq!(j["rows"][0]["fields"]["model"]["source"], "config");
    let g = &j["scaling"][0];
    assert_eq!(
        (
            g["model"].as_str(),
            g["kind"].as_str(),
            g["metric"].as_str()
        ),
        (Some("toy-gpt"), Some("weak"), Some("tokens/s/GPU"))
    );
    // GBS 16 per 8 GPUs, steps 2.0, 2.2, 2.5 s: efficiency 1, 2.0/2.2, 0.8.
    let eff: Vec<f64> = g["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["efficiency"].as_f64().unwrap())
        .collect();
    assert_eq!(eff.len(), 3);
    assert!(
        (eff[0] - 1.0).abs() < 1e-12
            && (eff[1] - 2.0 / 2.2).abs() < 1e-12
            && (eff[2] - 0.8).abs() < 1e-12,
        "{eff:?}"
    );
    close(&g["points"][0]["per_gpu"], 4096.0 * 16.0 / 2.0 / 8.0, 1e-12);

    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>") && !html.contains("<script"));
    // One step-time polyline per run (4) plus the legend's sample lines.
    let steps = figure(&html, "step-times");
    assert!(steps.contains("data-series=\"4\""), "{steps}");
    let palette = ["#1F77B4", "#D62728", "#2CA02C", "#FF7F0E"];
    for c in palette {
        assert_eq!(polylines_with_stroke(steps, c), 2, "{c}");
    }
    let scaling = figure(&html, "scaling");
    assert!(
        scaling.contains("data-points=\"3\"") && scaling.contains("<circle"),
        "{scaling}"
    );
    assert_eq!(scaling.matches("<circle").count(), 3);

    let png = tmp.path().join("perf.png");
    screenshot(&page, &png);
    let (w, h, px) = decode_png(&png);
    assert_eq!((w, h), (1200, 1600));
    let near = |p: &[u8; 3], c: (u8, u8, u8)| {
        (p[0] as i32 - c.0 as i32).abs() < 40
            && (p[1] as i32 - c.1 as i32).abs() < 40
            && (p[2] as i32 - c.2 as i32).abs() < 40
    };
    for c in [(0x1f, 0x77, 0xb4), (0xd6, 0x27, 0x28), (0x2c, 0xa0, 0x2c)] {
        let n = px.iter().filter(|p| near(p, c)).count();
        assert!(n > 200, "colour {c:?}: {n} pixels drawn");
    }
}

/// Three Megatron runs per side, the candidate's iterations `factor` times
/// slower (and 0.2 % apart from run to run).
fn framework_side(dir: &Path, factor: f64) {
    framework_side_with(dir, factor, 1.0);
}

/// `line` with the number after `key` multiplied by `factor`, printed with
/// `decimals` decimals.
fn scale_number(line: &str, key: &str, factor: f64, decimals: usize) -> String {
    match line.find(key) {
        Some(i) => {
            let rest = &line[i + key.len()..];
            let end = rest.find(' ').unwrap();
            let x: f64 = rest[..end].parse().unwrap();
            format!(
                "{}{key}{:.*}{}",
                &line[..i],
                decimals,
                x * factor,
                &rest[end..]
            )
        }
        None => line.to_string(),
    }
}

/// As `framework_side`, with the log's TFLOP/s/GPU also multiplied by
/// `tflops` (3 decimals, so that rounding stays below 1e-5).
fn framework_side_with(dir: &Path, factor: f64, tflops: f64) {
    std::fs::create_dir_all(dir).unwrap();
    let src = std::fs::read_to_string(fixture("megatron/complete.out")).unwrap();
    for k in 0..3 {
        let mut out = String::new();
        for line in src.lines() {
            let f = factor * (1.0 + 0.002 * k as f64);
            let line = scale_number(line, "elapsed time per iteration (ms): ", f, 1);
            let line = scale_number(&line, "(TFLOP/s/GPU): ", tflops, 3);
            out.push_str(&line);
            out.push('\n');
        }
        std::fs::write(dir.join(format!("run{k}.out")), out).unwrap();
    }
    std::fs::write(
        dir.join("referee-perf.yaml"),
        "model: toy-gpt\nsystem: lab\ngpu: H100\n",
    )
    .unwrap();
}

#[test]
fn compare_takes_framework_logs() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, same, slow) = (
        tmp.path().join("a"),
        tmp.path().join("same"),
        tmp.path().join("slow"),
    );
    framework_side(&a, 1.0);
    framework_side(&same, 1.0);
    framework_side(&slow, 1.1);
    let s = |p: &PathBuf| p.display().to_string();
    let o = referee(&["compare", "--json", &s(&a), &s(&same)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let g = &json_of(&o)["groups"][0];
    assert_eq!(g["verdict"], "no-significant-change");
    assert_eq!(g["baseline"]["kind"], "framework-log");
    assert_eq!(g["baseline"]["runs"].as_array().unwrap().len(), 3);
    let page = tmp.path().join("cmp.html");
    let o = referee(&[
        "compare",
        "--json",
        "--html",
        page.to_str().unwrap(),
        &s(&a),
        &s(&slow),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let j = json_of(&o);
    let g = &j["groups"][0];
    assert_eq!(g["verdict"], "regression", "{g:#}");
    let m: Vec<&Value> = g["throughput"].as_array().unwrap().iter().collect();
    let sps = m
        .iter()
        .find(|x| x["metric"] == "samples_per_second")
        .unwrap();
    assert_eq!(sps["decides"], true);
    // Every iteration 10 % slower: samples/s × 1/1.1.
    close(&sps["relative_change"], 1.0 / 1.1 - 1.0, 1e-3);
    let step = m
        .iter()
        .find(|x| x["metric"] == "step_time_seconds")
        .unwrap();
    close(&step["relative_change"], 0.1, 1e-3);
    assert_eq!(step["better"], "lower");
    assert!(step["ci"]["lo"].as_f64().unwrap() > 0.0);
    // The step time of every iteration of both sides, drawn.
    let html = std::fs::read_to_string(&page).unwrap();
    let fig = figure(&html, "step-times");
    assert!(
        fig.contains("data-baseline-runs=\"3\" data-candidate-runs=\"3\""),
        "{fig}"
    );
    assert_eq!(polylines_with_stroke(fig, "#1F77B4"), 4); // 3 runs + legend
    assert_eq!(polylines_with_stroke(fig, "#D62728"), 4);
    let png = tmp.path().join("cmp.png");
    screenshot(&page, &png);
    let (_, _, px) = decode_png(&png);
    let red = px
        .iter()
        .filter(|p| p[0] > 180 && p[1] < 80 && p[2] < 80)
        .count();
    assert!(red > 200, "{red}");
    // A different configuration is a different definition.
    let other = tmp.path().join("other");
    framework_side(&other, 1.0);
    std::fs::write(
        other.join("referee-perf.yaml"),
        "model: toy-gpt\nsystem: lab\ngpu: H100\ngbs: 256\n",
    )
    .unwrap();
    let o = referee(&["compare", &s(&a), &s(&other)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("configuration: baseline 16 GPUs, GBS 128"),
        "{}",
        stderr(&o)
    );
}

/// The factors of one breakdown: (name, relative change).
fn factors(b: &Value) -> Vec<(String, f64)> {
    b["factors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["name"].as_str().unwrap().to_string(),
                f["relative_change"].as_f64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn tokens_per_second_and_mfu_split_into_factors_that_multiply_to_the_change() {
    let tmp = tempfile::tempdir().unwrap();
    let s = |p: &PathBuf| p.display().to_string();
    let base = tmp.path().join("base");
    framework_side(&base, 1.0);
    // A release whose steps take 10 % longer (the log's TFLOP/s/GPU drops
    // with them), and one that counts 20 % more FLOPs per token at the same
    // speed (a change of the FLOPs formula, not of speed).
    let slow = tmp.path().join("slow");
    framework_side_with(&slow, 1.1, 1.0 / 1.1);
    let recount = tmp.path().join("recount");
    framework_side_with(&recount, 1.0, 1.2);
    let html = tmp.path().join("cmp.html");
    let o = referee(&[
        "compare",
        "--json",
        "--html",
        html.to_str().unwrap(),
        &s(&base),
        &s(&slow),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let g = json_of(&o)["groups"][0].clone();
    let measured = |name: &str| {
        g["throughput"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["metric"] == name)
            .unwrap()["relative_change"]
            .as_f64()
            .unwrap()
    };
    let rates = g["rate_breakdowns"].as_array().unwrap();
    assert_eq!(rates.len(), 2, "{g:#}");
    let (tps, mfu) = (&rates[0], &rates[1]);
    assert_eq!(tps["metric"], "tokens_per_second");
    assert_eq!(mfu["metric"], "mfu");
    for (b, name) in [(tps, "tokens_per_second"), (mfu, "mfu")] {
        let m = b["measured_change"].as_f64().unwrap();
        assert!((m - measured(name)).abs() < 1e-12, "{name}: {m}");
        let product = factors(b)
            .iter()
            .zip(b["factors"].as_array().unwrap())
            .fold(1.0, |a, ((_, c), f)| {
                a * (1.0 + c).powi(f["exponent"].as_i64().unwrap() as i32)
            })
            - 1.0;
        assert!((product - m).abs() < 1e-9, "{name}: {product} vs {m}");
        assert!((b["product_change"].as_f64().unwrap() - m).abs() < 1e-9);
    }
    let names = |b: &Value| factors(b).into_iter().map(|(n, _)| n).collect::<Vec<_>>();
    assert_eq!(
        names(tps),
        ["tokens_per_sample", "samples_per_step", "time_per_step"]
    );
    assert_eq!(
        names(mfu),
        [
            "tokens_per_sample",
            "samples_per_step",
            "time_per_step",
            "gpus",
            "flops_per_token",
            "peak"
        ]
    );
    let change = |b: &Value, n: &str| factors(b).into_iter().find(|(x, _)| x == n).unwrap().1;
    close(&Value::from(change(mfu, "time_per_step")), 0.1, 1e-3);
    assert!(change(mfu, "flops_per_token").abs() < 1e-4, "{mfu:#}");
    assert!(change(tps, "tokens_per_sample").abs() < 1e-12);
    assert_eq!(mfu["dominant"], "time per step");
    // FLOPs per token in GFLOP: 210.5 TFLOP/s/GPU ÷ 6,502 tokens/s/GPU =
    // 32.37 for the first run; the others are 0.2 % and 0.4 % slower.
    let fpt = mfu["factors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "flops_per_token")
        .unwrap();
    close(&fpt["baseline"]["value"], 32.44, 0.005);
    close(&Value::from(measured("mfu")), 1.0 / 1.1 - 1.0, 1e-3);
    // The HTML has a table per split, a row per factor, as the browser
    // reads it.
    let page = referee_tests::dom(&html);
    let at = page
        .find("<table class=\"breakdown\" data-metric=\"mfu\"")
        .expect("an MFU table");
    let table = &page[at..at + page[at..].find("</table>").unwrap()];
    assert_eq!(table.matches("<tr data-factor=").count(), 6, "{table}");
    // The text names them.
    let o = referee(&["compare", &s(&base), &s(&slow)]);
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        text.contains("    MFU: -9.1 %: time per step +10.0 %"),
        "{text}"
    );
    assert!(
        text.contains("    tokens/s: -9.1 %: time per step +10.0 %"),
        "{text}"
    );
    // Same speed, FLOPs counted 20 % higher: MFU +20 %, all of it FLOPs
    // per token; tokens/s unchanged.
    let o = referee(&["compare", "--json", &s(&base), &s(&recount)]);
    let g = json_of(&o)["groups"][0].clone();
    let rates = g["rate_breakdowns"].as_array().unwrap();
    let mfu = rates.iter().find(|b| b["metric"] == "mfu").unwrap();
    assert_eq!(mfu["dominant"], "FLOPs per token", "{mfu:#}");
    close(&Value::from(change(mfu, "flops_per_token")), 0.2, 1e-4);
    assert!(change(mfu, "time_per_step").abs() < 1e-3);
}

#[test]
fn agrees_with_referee_run_throughput_mode() {
    let data = data_dir(&["shakespeare"]);
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    let o = referee(&[
        "run",
        "mini_llm",
        "--mode",
        "throughput",
        "--steps",
        "8",
        "--window",
        "3..8",
        "--runs",
        "1",
        "--seed",
        "7",
        "--quiet",
        "--no-cache-clear",
        "--json",
        "-j",
        "1",
        "--data-dir",
        data.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    let run = json_of(&o);
    let t = &run["runs"][0]["throughput"];
    let record: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("referee_run.json")).unwrap())
            .unwrap();
    assert_eq!(&record["runs"][0]["throughput"], t);
    let sps = t["samples_per_second"].as_f64().unwrap();
    assert!(sps > 0.0);

    let o = referee(&["perf", "--json", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let j = json_of(&o);
    assert_eq!(
        j["rows"].as_array().unwrap().len(),
        1,
        "only the log: {j:#}"
    );
    let r = &j["rows"][0];
    assert_eq!(r["format"], "mllog");
    close(&r["samples_per_second"], sps, 1e-12);
    close(
        &r["tokens_per_second"],
        t["tokens_per_second"].as_f64().unwrap(),
        1e-12,
    );
    close(
        &r["step_time_s"]["mean"],
        t["step_seconds"].as_f64().unwrap(),
        1e-12,
    );
    assert_eq!(
        (r["window"]["first"].as_u64(), r["window"]["last"].as_u64()),
        (Some(3), Some(7))
    );
    // On a CPU neither reports an MFU.
    assert!(t["mfu"].is_null());
    assert!(r["mfu"].is_null());
    // Given one H100 and BF16, perf's MFU is what referee run divides on a
    // GPU: achieved FLOP/s ÷ the H100's 989 TFLOP/s.
    let o = referee(&[
        "perf",
        "--json",
        "--gpus",
        "1",
        "--gpu",
        "H100",
        "--precision",
        "bf16",
        out.to_str().unwrap(),
    ]);
    let r = &json_of(&o)["rows"][0];
    close(
        &r["mfu"]["value"],
        t["achieved_flops"].as_f64().unwrap() / 989e12,
        1e-12,
    );
    assert_eq!(r["fields"]["gbs"]["source"], "log");
    assert_eq!(r["fields"]["model"]["value"], "mini_llm");
}

/// Average power of one MLPerf node power log, computed here from its
/// lines (not by referee's code): Σ reading × (its time − the previous
/// reading's, the first from `power_measurement_start`) ÷ (stop − start),
/// times `conversion_eff`.
fn average_power_of(path: &Path) -> f64 {
    let (mut start, mut stop, mut prev, mut sum, mut eff) = (None, None, 0.0, 0.0, 1.0);
    for line in std::fs::read_to_string(path).unwrap().lines() {
        let Some(j) = line.strip_prefix(":::MLLOG ") else {
            continue;
        };
        let r: Value = serde_json::from_str(j).unwrap();
        let t = r["time_ms"].as_f64().unwrap();
        match r["key"].as_str().unwrap() {
            "power_measurement_start" => {
                start = Some(t);
                prev = t;
            }
            "power_reading" => {
                sum += r["value"].as_f64().unwrap() * (t - prev);
                prev = t;
            }
            "power_measurement_stop" => stop = Some(t),
            "conversion_eff" => eff = r["value"].as_f64().unwrap(),
            _ => {}
        }
    }
    eff * sum / (stop.unwrap() - start.unwrap())
}

/// The NeMo fixture in `dir`, with `power/<stem>/`: a node log sampled by
/// referee (a `cmd:` source printing 400 W) and a switch estimated at 50
/// W. Returns the log, the node log and the node's average power.
fn run_with_power(dir: &Path) -> (PathBuf, PathBuf, f64) {
    let name = Path::new(NEMO).file_name().unwrap();
    let log = dir.join(name);
    std::fs::copy(fixture(NEMO), &log).unwrap();
    let stem = log.file_stem().unwrap().to_string_lossy().to_string();
    // The node's power measured by referee's own sampler (a `cmd:` source
    // printing 400 W), plus a switch whose power is estimated at 50 W.
    let folder = dir.join("power").join(&stem);
    let node = folder.join("node_0.txt");
    let o = referee(&[
        "power",
        "sample",
        "--source",
        "cmd:echo 400",
        "--seconds",
        "3",
        "--power-interval-ms",
        "500",
        "--out",
        node.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    std::fs::write(
        folder.join("sw_0.txt"),
        ":::MLLOG {\"namespace\": \"\", \"time_ms\": 0, \"event_type\": \"POINT_IN_TIME\", \"key\": \"interconnect_power_est\", \"value\": 50.0, \"metadata\": {}}\n",
    )
    .unwrap();
    let node_w = average_power_of(&node);
    assert!(node_w > 300.0 && node_w <= 400.0, "{node_w}");
    (log, node, node_w)
}

#[test]
fn energy_per_token_from_power_logs_beside_the_run_or_given() {
    let t = tempfile::tempdir().unwrap();
    let (log, node, node_w) = run_with_power(t.path());

    // The directory: the power folder is the run's energy, not a run.
    let dir = t.path().to_str().unwrap();
    let o = referee(&["perf", "--json", "--seq-len", "8192", dir]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let j = json_of(&o);
    assert_eq!(j["rows"].as_array().unwrap().len(), 1, "{j}");
    let r = &j["rows"][0];
    let e = &r["energy"];
    assert_eq!(
        (e["nodes"].as_u64(), e["switches"].as_u64()),
        (Some(1), Some(1))
    );
    assert!(e["readings"].as_u64().unwrap() >= 5, "{e}");
    close(&e["average_power_w"], node_w + 50.0, 1e-12);
    let watts = e["average_power_w"].as_f64().unwrap();
    close(
        &e["joules_per_token"],
        watts / r["tokens_per_second"].as_f64().unwrap(),
        1e-12,
    );
    close(
        &e["joules_per_sample"],
        watts / r["samples_per_second"].as_f64().unwrap(),
        1e-12,
    );
    assert!(
        j["rules"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x.as_str().unwrap().starts_with("energy:"))
    );
    // Human form: a J/token column and the energy line; CSV: its columns.
    let o = referee(&["perf", "--seq-len", "8192", dir]);
    let out = stdout(&o);
    assert!(out.contains("J/token"), "{out}");
    assert!(
        out.contains("energy: ") && out.contains("1 switch log"),
        "{out}"
    );
    let o = referee(&["perf", "--csv", "--seq-len", "8192", dir]);
    let csv = stdout(&o);
    let head: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let row = referee_tests::csv_fields(csv.lines().nth(1).unwrap());
    let col = |n: &str| head.iter().position(|h| *h == n).unwrap();
    let jpt: f64 = row[col("joules_per_token")].parse().unwrap();
    close(&e["joules_per_token"], jpt, 1e-12);

    // Given with --power: that file only (no switch).
    let o = referee(&[
        "perf",
        "--json",
        "--seq-len",
        "8192",
        "--power",
        node.to_str().unwrap(),
        log.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    close(
        &json_of(&o)["rows"][0]["energy"]["average_power_w"],
        node_w,
        1e-12,
    );
}

#[test]
fn no_energy_without_power_logs_and_power_flag_errors() {
    let t = tempfile::tempdir().unwrap();
    let (log, node, _) = run_with_power(t.path());
    let name = Path::new(NEMO).file_name().unwrap();
    // Without power logs, no energy key (the JSON is as before).
    let bare = tempfile::tempdir().unwrap();
    std::fs::copy(fixture(NEMO), bare.path().join(name)).unwrap();
    let o = referee(&["perf", "--json", bare.path().to_str().unwrap()]);
    assert!(json_of(&o)["rows"][0].get("energy").is_none());

    // --power with two runs: which run it belongs to is not known (exit 2).
    std::fs::copy(fixture(NEMO), bare.path().join("second.out")).unwrap();
    let o = referee(&[
        "perf",
        "--power",
        node.to_str().unwrap(),
        bare.path().to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--power with 2 runs"), "{}", stderr(&o));
    // A power folder without node logs is named.
    let o = referee(&[
        "perf",
        "--power",
        bare.path().to_str().unwrap(),
        log.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("no node_*.txt power logs"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn published_power_results_give_energy_per_sample_and_are_not_runs() {
    // Lenovo's v5.0 retinanet results: 5 result logs, each with its power
    // folder (one node, AC, conversion_eff 0.94).
    let dir = referee_tests::corpus_dir()
        .join("training_results_v5.0/Lenovo/results/SR780aV3-8xB200_SXM_180GB/retinanet");
    let o = referee(&["perf", "--json", dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let j = json_of(&o);
    let rows = j["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 5, "the power logs are no runs");
    for r in rows {
        let file = PathBuf::from(r["file"].as_str().unwrap());
        let stem = file.file_stem().unwrap().to_str().unwrap();
        let node = dir.join("power").join(stem).join("node_0.txt");
        let e = &r["energy"];
        assert_eq!(e["nodes"].as_u64(), Some(1), "{file:?}");
        close(&e["average_power_w"], average_power_of(&node), 1e-12);
        close(
            &e["joules_per_sample"],
            e["average_power_w"].as_f64().unwrap() / r["samples_per_second"].as_f64().unwrap(),
            1e-12,
        );
    }
}

#[test]
fn min_ratio_gates_every_run_against_its_reference_row() {
    // The NeMo fixture reaches 99.89 % of its published row (tokens/s/GPU).
    let nemo = fixture(NEMO);
    let gate = |ratio: &str, extra: &[&str]| {
        let mut args = vec![
            "perf",
            "--json",
            "--system",
            "DGX-H100",
            "--seq-len",
            "8192",
            "--against",
            "published",
            "--min-ratio",
            ratio,
            &nemo,
        ];
        args.extend_from_slice(extra);
        referee(&args)
    };
    let o = gate("0.99", &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let g = &json_of(&o)["gate"];
    assert_eq!(
        (g["passed"].as_u64(), g["below"].as_array().unwrap().len()),
        (Some(1), 0)
    );
    let o = gate("0.9995", &[]);
    assert_eq!(o.status.code(), Some(1));
    let j = json_of(&o);
    let miss = &j["gate"]["below"][0];
    assert_eq!(miss["file"].as_str(), Some(nemo.as_str()));
    close(&miss["ratio"], 0.998_917_798, 1e-6);
    assert_eq!(j["exit_code"], 1);
    // A run with no reference row cannot show the ratio: it fails the gate,
    // named with why.
    let o = gate("0.5", &[&fixture("megatron/complete.out")]);
    assert_eq!(o.status.code(), Some(1));
    let j = json_of(&o);
    assert_eq!(j["gate"]["passed"], 1);
    let why = j["gate"]["below"][0]["reason"].as_str().unwrap();
    assert!(
        why.starts_with("no reference row: the model is not stated"),
        "{why}"
    );
    // The human form names the run below.
    let o = referee(&[
        "perf",
        "--system",
        "DGX-H100",
        "--seq-len",
        "8192",
        "--against",
        "published",
        "--min-ratio",
        "0.9995",
        &nemo,
    ]);
    let out = stdout(&o);
    assert!(
        out.contains("gate --min-ratio 0.9995: 0 of 1 run at or above it; below:"),
        "{out}"
    );
    assert!(
        out.contains("0.9989 of the reference row (exact), below 0.9995"),
        "{out}"
    );
    // Without --against, or a ratio that is no ratio: usage errors.
    assert_eq!(
        referee(&["perf", "--min-ratio", "0.9", &nemo])
            .status
            .code(),
        Some(2)
    );
    let o = referee(&["perf", "--against", "published", "--min-ratio", "0", &nemo]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--min-ratio 0: expected a positive ratio"),
        "{}",
        stderr(&o)
    );
}
