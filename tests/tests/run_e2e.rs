//! `referee run` end to end on the real data: each benchmark trains to its
//! target, and its log passes both referee's check and the official
//! compliance checker run with referee's rule file (`--config`).

use referee_tests::{
    copy_tree, data_dir, mini_llm_runs, python, referee, referee_bin, referee_graph_bin, repo_root,
    stderr, stdout,
};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A seed whose calibration run reaches the target (calibration seeds are
/// 1000…; see workloads/rcps/calibration_*.json).
const SEED: &str = "1000";

/// One run of `bench` (1 of them, seed SEED) trained to its target: the
/// run's folder (kept while the returned guard lives).
fn train_one(bench: &str, dataset: &str) -> (tempfile::TempDir, PathBuf) {
    let data = data_dir(&[dataset]);
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    let o = Command::new(referee_bin())
        .args([
            "run",
            bench,
            "--runs",
            "1",
            "-j",
            "1",
            "--seed",
            SEED,
            "--no-cache-clear",
            "--quiet",
            "--json",
            "--out",
        ])
        .arg(&out)
        .arg("--data-dir")
        .arg(&data)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{bench}: {}\n{}",
        stdout(&o),
        stderr(&o)
    );
    let summary: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(summary["runs"][0]["status"], "success", "{summary}");
    assert_eq!(summary["checks"][0]["verdict"], "PASS");
    (tmp, out)
}

/// The first run of `bench` in the run folder `out` reached the target and
/// passes referee's check and the official checker with referee's rule
/// file; its evaluations fall on the declared cadence.
fn check_run(bench: &str, out: &Path) {
    let log = out.join("result_0.txt");
    assert!(log.is_file());
    assert!(out.join("system.json").is_file() && out.join("referee_run.json").is_file());

    // referee check picks referee's own rules by itself.
    let c = referee(&["check", log.to_str().unwrap()]);
    assert_eq!(c.status.code(), Some(0), "{}", stdout(&c));
    assert!(
        stdout(&c).contains(&format!("({bench}, ruleset referee-1.0)")),
        "{}",
        stdout(&c)
    );

    // The official checker accepts it with referee's rule file.
    let rules = repo_root()
        .join("workloads/rules")
        .join(format!("{bench}.yaml"));
    let off = Command::new(python())
        .args([
            "-m",
            "mlperf_logging.compliance_checker",
            "--log_output",
            "/dev/null",
            "--config",
        ])
        .arg(&rules)
        .arg(&log)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&off.stderr);
    assert_eq!(
        off.status.code(),
        Some(0),
        "official checker on {}:\n{err}",
        log.display()
    );
    assert!(err.contains("SUCCESS"), "{err}");

    // The log's eval points fall on the declared cadence (the rule file's
    // `eval_every`, rounded up to whole global batches: k-th evaluation at
    // gbs * ceil(k * every / gbs)), and it carries provenance.
    let rule_text = std::fs::read_to_string(&rules).unwrap();
    let every: u64 = rule_text
        .lines()
        .find_map(|l| l.trim().strip_prefix("'eval_every': "))
        .and_then(|v| v.trim_end_matches(',').parse().ok())
        .expect("the rule file declares eval_every");
    let parsed = referee_rules::mllog::read_file(&log).unwrap();
    let first = |key: &str| {
        parsed
            .records
            .iter()
            .find(|r| r.key() == key)
            .unwrap_or_else(|| panic!("no {key}"))
    };
    let gbs = first("global_batch_size").value().as_f64().unwrap() as u64;
    let evals: Vec<u64> = parsed
        .records
        .iter()
        .filter(|r| r.key() == "eval_accuracy")
        .map(|r| r.meta("samples_count").and_then(|v| v.as_f64()).unwrap() as u64)
        .collect();
    assert!(evals.len() >= 2, "{bench}: {evals:?}");
    for (k, s) in evals.iter().enumerate() {
        let k = k as u64 + 1;
        assert_eq!(
            *s,
            gbs * (k * every).div_ceil(gbs),
            "{bench}: evaluation {k} of {evals:?}"
        );
    }
    assert!(first("referee_provenance").value().get("seed").is_some());
    first("throughput");
}

/// mini_llm on the suite's five shared runs (tests/src/lib.rs,
/// mini_llm_runs), which `referee run` reported as all reaching the target.
#[test]
fn mini_llm_trains_to_target_and_passes_both_checkers() {
    let (out, printed) = mini_llm_runs();
    for k in 1..=5 {
        assert!(
            printed.contains(&format!("run {k}/5: success after ")),
            "{printed}"
        );
        let log = format!("PASS out/llm/result_{}.txt", k - 1);
        assert!(printed.lines().any(|l| l == log), "{printed}");
    }
    check_run("mini_llm", out);
}

#[test]
fn mini_resnet_trains_to_target_and_passes_both_checkers() {
    let (_tmp, out) = train_one("mini_resnet", "fashion_mnist");
    check_run("mini_resnet", &out);
}

#[test]
fn committed_rule_files_are_current() {
    let o = Command::new(referee_bin())
        .args(["rules", "export", "--check", "--dir"])
        .arg(repo_root().join("workloads/rules"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));

    // A stale copy is named, with exit 1: one rule file edited, the other
    // missing.
    let tmp = tempfile::tempdir().unwrap();
    let src = repo_root().join("workloads/rules");
    let llm = std::fs::read_to_string(src.join("mini_llm.yaml")).unwrap();
    std::fs::write(
        tmp.path().join("mini_llm.yaml"),
        llm.replacen("eval_accuracy", "eval_acuracy", 1),
    )
    .unwrap();
    let o = Command::new(referee_bin())
        .args(["rules", "export", "--check", "--dir"])
        .arg(tmp.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("out of date"), "{err}");
    assert!(
        err.contains("mini_llm.yaml"),
        "the edited file is named: {err}"
    );
    assert!(
        err.contains("mini_resnet.yaml"),
        "the missing file is named: {err}"
    );
}

#[test]
fn a_killed_run_leaves_no_finished_log() {
    let data = data_dir(&["shakespeare"]);
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    let mut child = Command::new(referee_bin())
        .args([
            "run",
            "mini_llm",
            "--runs",
            "1",
            "-j",
            "1",
            "--no-cache-clear",
            "--quiet",
            "--out",
        ])
        .arg(&out)
        .arg("--data-dir")
        .arg(&data)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let partial = out.join("result_0.txt.partial");
    // Wait until training has started (run_start flushed with the first block).
    let t0 = std::time::Instant::now();
    loop {
        let started = std::fs::read_to_string(&partial)
            .map(|t| t.contains("\"block_start\""))
            .unwrap_or(false);
        if started {
            break;
        }
        assert!(
            t0.elapsed().as_secs() < 120,
            "the run did not start training within 2 minutes"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // SIGKILL: no chance to clean up.
    // SAFETY: kill(2) on our own child's pid.
    let rc = unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    assert_eq!(rc, 0);
    let status = child.wait().unwrap();
    assert!(!status.success());
    assert!(
        !out.join("result_0.txt").exists(),
        "a killed run must not leave a finished log"
    );
    assert!(
        partial.exists(),
        "the unfinished log stays visible as .partial"
    );
    // Nothing that looks like a result is found by the checkers.
    let files = referee_rules::layout::result_files(&out).unwrap();
    assert!(files.is_empty(), "{files:?}");
    // And packaging refuses the directory.
    let p = referee(&[
        "package",
        out.to_str().unwrap(),
        "--out",
        tmp.path().join("pkg").to_str().unwrap(),
    ]);
    assert_eq!(p.status.code(), Some(2));
}

#[test]
fn data_verify_rejects_a_corrupted_file() {
    let data = data_dir(&["shakespeare"]);
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("shakespeare");
    copy_tree(&data.join("shakespeare"), &copy);
    let ok = referee(&[
        "data",
        "verify",
        "shakespeare",
        "--data-dir",
        tmp.path().to_str().unwrap(),
    ]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    let f = copy.join("val.bin");
    let mut bytes = std::fs::read(&f).unwrap();
    bytes[1000] ^= 0x01;
    std::fs::write(&f, bytes).unwrap();
    let bad = referee(&[
        "data",
        "verify",
        "shakespeare",
        "--data-dir",
        tmp.path().to_str().unwrap(),
    ]);
    assert_eq!(bad.status.code(), Some(1));
    let e = stderr(&bad);
    assert!(e.contains("val.bin"), "{e}");
    assert!(
        e.contains("referee data prepare shakespeare"),
        "the error says how to fix it: {e}"
    );
    // A run refuses nothing at start (verification is explicit), but an
    // unprepared directory is named with the fix.
    let empty = tmp.path().join("empty");
    let r = referee(&[
        "run",
        "mini_llm",
        "--runs",
        "1",
        "--data-dir",
        empty.to_str().unwrap(),
    ]);
    assert_eq!(r.status.code(), Some(2));
    assert!(
        stderr(&r).contains("referee data prepare shakespeare"),
        "{}",
        stderr(&r)
    );
}

#[test]
fn run_usage_errors() {
    let r = referee(&["run", "resnet50"]);
    assert_eq!(r.status.code(), Some(2));
    assert!(
        stderr(&r).contains("mini_llm") && stderr(&r).contains("mini_resnet"),
        "{}",
        stderr(&r)
    );
    let r = referee(&["run", "mini_resnet", "--set", "base_width=64"]);
    assert_eq!(r.status.code(), Some(2));
    assert!(
        stderr(&r).contains("fixed in the closed division"),
        "{}",
        stderr(&r)
    );
}

/// The precision of the linear layers is a tunable of mini_llm and the log
/// says which was used (a two-step run: it ends before any evaluation).
#[test]
fn linear_precision_is_logged() {
    let data = data_dir(&["shakespeare"]);
    let tmp = tempfile::tempdir().unwrap();
    for (precision, want) in [(None, "fp32"), (Some("precision=bf16"), "bf16")] {
        let out = tmp.path().join(want);
        let mut cmd = Command::new(referee_bin());
        cmd.args([
            "run",
            "mini_llm",
            "--runs",
            "1",
            "-j",
            "1",
            "--seed",
            SEED,
            "--no-cache-clear",
            "--quiet",
        ])
        .args(["--set", "total_steps=2", "--set", "warmup_steps=1", "--out"])
        .arg(&out)
        .arg("--data-dir")
        .arg(&data);
        if let Some(p) = precision {
            cmd.args(["--set", p]);
        }
        let o = cmd.output().unwrap();
        assert_eq!(
            o.status.code(),
            Some(1),
            "ends before the target: {}",
            stderr(&o)
        );
        let text = std::fs::read_to_string(out.join("result_0.txt")).unwrap();
        let line =
            format!("\"key\": \"lowest_numerical_precision_in_linear\", \"value\": \"{want}\"");
        assert!(text.contains(&line), "{want} logged");
    }
    let bad = referee(&[
        "run",
        "mini_llm",
        "--set",
        "precision=fp8",
        "--data-dir",
        data.to_str().unwrap(),
    ]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("precision"), "{}", stderr(&bad));
}

/// The engine (the CPU engine and its kernels, or candle's graph) is chosen
/// once, from `REFEREE_CPU_KERNELS` or the CPU, and recorded in the log's
/// provenance, `referee_run.json` and the system description; an unknown
/// name, or the graph in a build without it, is a usage error before
/// anything runs.
#[test]
fn engine_choice_is_recorded() {
    let data = data_dir(&["shakespeare"]);
    let tmp = tempfile::tempdir().unwrap();
    for (bin, kernels, engine, framework) in [
        (
            referee_bin(),
            "portable",
            "cpu-portable",
            "CPU engine, portable kernels",
        ),
        (referee_graph_bin(), "graph", "graph", "candle 0.11 graph"),
    ] {
        let out = tmp.path().join(kernels);
        let o = Command::new(bin)
            .env("REFEREE_CPU_KERNELS", kernels)
            .args(["run", "mini_llm", "--runs", "1", "-j", "1", "--seed", SEED])
            .args(["--no-cache-clear", "--quiet"])
            .args(["--set", "total_steps=2", "--set", "warmup_steps=1", "--out"])
            .arg(&out)
            .arg("--data-dir")
            .arg(&data)
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(1),
            "ends before the target: {}",
            stderr(&o)
        );
        let log = std::fs::read_to_string(out.join("result_0.txt")).unwrap();
        assert!(
            log.contains(&format!("\"engine\": \"{engine}\"")),
            "{kernels}: provenance"
        );
        let record: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("referee_run.json")).unwrap())
                .unwrap();
        assert_eq!(record["engine"], engine);
        let system: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("system.json")).unwrap())
                .unwrap();
        let fw = system["framework"].as_str().unwrap();
        assert!(fw.contains(framework), "{kernels}: framework {fw}");
    }
    let o = Command::new(referee_bin())
        .env("REFEREE_CPU_KERNELS", "sse9")
        .args(["run", "mini_llm", "--data-dir"])
        .arg(&data)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("REFEREE_CPU_KERNELS=sse9") && e.contains("graph"),
        "{e}"
    );
    // The default build has no graph engine: asking for it says how to get it.
    let o = Command::new(referee_bin())
        .env("REFEREE_CPU_KERNELS", "graph")
        .args(["run", "mini_llm", "--runs", "1", "--set", "total_steps=2"])
        .args(["--set", "warmup_steps=1", "--quiet", "--out"])
        .arg(tmp.path().join("no-graph"))
        .arg("--data-dir")
        .arg(&data)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--features graph"), "{}", stderr(&o));
}

/// The CPU engine's products and attention blocks are planned by measuring
/// them once per machine (CPU model, kernels, threads), during the initialisation; the
/// choices go to the plan file and the log's provenance says each one and
/// where it came from. A second run reads them instead of measuring; a
/// malformed file only warns and is replaced; `REFEREE_CPU_PLAN=fixed`
/// measures nothing; an unknown mode is a usage error.
#[test]
fn cpu_plans_are_measured_once_and_recorded() {
    let data = data_dir(&["shakespeare"]);
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("plans").join("cpu-plans.json");
    let run = |name: &str, mode: Option<&str>| {
        let out = tmp.path().join(name);
        let mut cmd = Command::new(referee_bin());
        cmd.env("REFEREE_CPU_PLAN_FILE", &file)
            .env_remove("REFEREE_CPU_PLAN")
            .env_remove("REFEREE_CPU_KERNELS")
            .args(["run", "mini_llm", "--runs", "1", "-j", "1", "--seed", SEED])
            .args(["--no-cache-clear", "--quiet"])
            .args(["--set", "total_steps=2", "--set", "warmup_steps=1", "--out"])
            .arg(&out)
            .arg("--data-dir")
            .arg(&data);
        if let Some(m) = mode {
            cmd.env("REFEREE_CPU_PLAN", m);
        }
        let o = cmd.output().unwrap();
        assert_eq!(o.status.code(), Some(1), "{name}: {}", stderr(&o));
        let text = std::fs::read_to_string(out.join("result_0.txt")).unwrap();
        let line = text
            .lines()
            .find(|l| l.contains("\"key\": \"referee_provenance\""))
            .expect("provenance");
        let event: serde_json::Value =
            serde_json::from_str(line.trim_start_matches(":::MLLOG ")).unwrap();
        (event["value"]["cpu_plan"].clone(), stderr(&o))
    };
    let froms_of = |p: &serde_json::Value, what: &str| -> Vec<String> {
        p[what]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["from"].as_str().unwrap().to_string())
            .collect()
    };
    let froms = |p: &serde_json::Value| froms_of(p, "products");

    let (first, _) = run("first", None);
    assert_eq!(first["mode"], "measure");
    assert_eq!(first["threads"], 1);
    assert_eq!(first["file"], file.to_str().unwrap());
    assert!(first["cpu"].as_str().is_some_and(|c| !c.is_empty()));
    let n = froms(&first).len();
    // mini_llm's step: 12 product shapes (an input gradient `dy·Wᵀ` reads
    // Wᵀ as a plain matrix, so it shares a forward product's shape).
    assert_eq!(n, 12, "{first}");
    assert!(froms(&first).iter().all(|f| f == "measured"), "{first}");
    // Each shape's choice was then tried in the training passes before the
    // clock: kept or changed, its median there against the first choice's.
    for p in first["products"].as_array().unwrap() {
        assert!(p["step"] == "kept" || p["step"] == "changed", "{p}");
        let gain = p["time_in_step_vs_first"].as_f64().unwrap();
        assert!(gain > 0.0 && (gain == 1.0) == (p["step"] == "kept"), "{p}");
    }
    // One attention shape (128 tokens, 4 heads of 32), its block measured.
    assert_eq!(froms_of(&first, "attention"), vec!["measured"], "{first}");
    let att = &first["attention"][0];
    assert_eq!(att["shape"], "attention T 128 · 4×32", "{first}");
    assert!(
        [16, 32, 64, 128].contains(&att["block"].as_u64().unwrap()),
        "{first}"
    );
    let saved = std::fs::read_to_string(&file).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&saved).unwrap();
    assert_eq!(doc["machines"][0]["threads"], 1);
    assert_eq!(doc["machines"][0]["products"].as_array().unwrap().len(), n);
    assert_eq!(doc["machines"][0]["attention"][0]["block"], att["block"]);
    assert!(att["narrow"].is_boolean(), "{first}");
    assert_eq!(doc["machines"][0]["attention"][0]["narrow"], att["narrow"]);

    // Read, not measured again: a hand-chosen blocking is served, and so is
    // a choice made in the step (tried there again); another choice is
    // timed against the hand-chosen one again, served where it still wins
    // ("file"), measured again where it no longer does. Where all are
    // served and no trial moves a choice, the file is left as it was.
    let (second, _) = run("second", None);
    let again = froms(&second);
    assert_eq!(again.len(), n, "{second}");
    for (i, f) in again.iter().enumerate() {
        let hand_chosen = first["products"][i]["time_vs_default"] == 1.0;
        let in_step = first["products"][i]["step"] == "changed";
        match f.as_str() {
            // (A choice the step's trial moves again differs from the file's.)
            "file" if second["products"][i]["step"] == "changed" => {}
            "file" => {
                let (mut a, mut b) = (second["products"][i].clone(), first["products"][i].clone());
                // (The gain goes through the file's decimal timings. It is
                // null where the step chose a blocking the synthetic pass
                // never timed: a weight gradient's fewest-bytes candidate.)
                let gain = |v: &serde_json::Value| v["time_vs_default"].as_f64();
                match (gain(&a), gain(&b)) {
                    (Some(x), Some(y)) => assert!((x - y).abs() < 1e-9, "product {i}: {a} {b}"),
                    (None, None) => assert_eq!(b["step"], "changed", "product {i}: untimed: {b}"),
                    _ => panic!("product {i}: the gain served differs: {a} {b}"),
                }
                for v in [&mut a, &mut b] {
                    for field in ["from", "time_vs_default", "step", "time_in_step_vs_first"] {
                        v[field] = serde_json::Value::Null;
                    }
                }
                assert_eq!(a, b, "product {i}: served as measured");
            }
            "measured again" if !hand_chosen && !in_step => {}
            _ => panic!("product {i}: {f}: {second}"),
        }
    }
    let att_again = froms_of(&second, "attention");
    assert!(
        ["file", "measured again"].contains(&att_again[0].as_str()),
        "{second}"
    );
    let moved = second["products"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["step"] == "changed");
    let served = again.iter().chain(&att_again).all(|f| f == "file") && !moved;
    assert_eq!(std::fs::read_to_string(&file).unwrap() == saved, served);

    // A choice that no longer wins (one-row register tiles, written into
    // the file): measured again (or, where the step had chosen it, moved by
    // the step's trial), and the file updated.
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let first_product = &mut doc["machines"][0]["products"][0];
    let chosen_in_step = first_product.get("in_step").is_some();
    first_product["blocking"]["tile_rows"] = 1.into();
    std::fs::write(&file, serde_json::to_string(&doc).unwrap()).unwrap();
    let (third, _) = run("third", None);
    let p0 = &third["products"][0];
    if chosen_in_step {
        assert!(p0["from"] == "file" && p0["step"] == "changed", "{third}");
    } else {
        assert_eq!(p0["from"], "measured again", "{third}");
    }
    assert_ne!(p0["tile_rows"], 1, "{third}");
    let kept: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(
        kept["machines"][0]["products"][0]["blocking"]["tile_rows"],
        third["products"][0]["tile_rows"]
    );

    // fixed: nothing measured or read.
    let (fixed, _) = run("fixed", Some("fixed"));
    assert_eq!(fixed["mode"], "fixed");
    assert_eq!(fixed["products"], serde_json::json!([]));
    assert_eq!(fixed["attention"], serde_json::json!([]));

    // A malformed file: a warning naming the file and line, and a new file.
    std::fs::write(
        &file,
        "{\"format\": \"referee-cpu-plans/1\",\n\"machines\": [}",
    )
    .unwrap();
    let (again, err) = run("malformed", None);
    let warning = again["warnings"][0].as_str().unwrap();
    assert!(
        warning.starts_with(&format!("{}:2:", file.display())),
        "{warning}"
    );
    // Said on stderr too (with --quiet: a warning is not progress).
    assert!(err.contains(&format!("warning: {warning}")), "{err}");
    assert!(froms(&again).iter().all(|f| f == "measured"));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(doc["machines"][0]["products"].as_array().unwrap().len(), n);

    let o = Command::new(referee_bin())
        .env("REFEREE_CPU_PLAN", "sometimes")
        .args(["run", "mini_llm", "--data-dir"])
        .arg(&data)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("REFEREE_CPU_PLAN=sometimes"),
        "{}",
        stderr(&o)
    );
}
