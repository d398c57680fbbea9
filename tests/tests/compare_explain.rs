//! `referee compare` explains a change: where the time went, what changed,
//! the history of a series of releases, and `--min-ratio`. No training:
//! every side is a copy of NVIDIA's real v5.0 llama2_70b_lora results on
//! the 72-GPU GB200 system (10 runs), edited as a new release would be —
//! its system description's software stack, its seeds, a hyperparameter,
//! and its training blocks' time stamps scaled (a per-sample slowdown or
//! speed-up; evaluation times kept).

use referee_tests::{corpus_dir, referee, stderr, stdout};
use serde_json::Value;
use std::path::{Path, PathBuf};

const SYSTEM: &str = "tyche_ngpu72_ngc25.04_nemo";

fn source() -> PathBuf {
    corpus_dir().join("training_results_v5.0/NVIDIA")
}

/// How a release differs from the corpus entry.
#[derive(Default, Clone)]
struct Edit {
    /// Training blocks take this many times as long.
    block_factor: f64,
    /// Added to every seed.
    seed_offset: i64,
    /// `other_software_stack` entries (and `framework`) replaced.
    stack: Vec<(&'static str, &'static str)>,
    /// A logged hyperparameter replaced: (key, value text).
    hyper: Option<(&'static str, &'static str)>,
}

fn replace_number(line: &str, field: &str, f: impl Fn(&str) -> String) -> String {
    let tag = format!("\"{field}\": ");
    let Some(at) = line.find(&tag) else {
        return line.to_string();
    };
    let start = at + tag.len();
    let end = start
        + line[start..]
            .find([',', '}'])
            .expect("a number ends with , or }");
    format!("{}{}{}", &line[..start], f(&line[start..end]), &line[end..])
}

/// One log of the corpus entry, edited: time stamps inside training blocks
/// stretched by `block_factor` (every later time stamp shifted), seeds and
/// a hyperparameter replaced.
fn edit_log(text: &str, e: &Edit) -> String {
    let mut out = String::new();
    let (mut prev, mut shifted, mut in_block) = (None::<f64>, 0.0f64, false);
    for line in text.lines() {
        let mut line = line.to_string();
        if line.contains(":::MLLOG") {
            let json: Value =
                serde_json::from_str(line.split_once(":::MLLOG ").unwrap().1).unwrap();
            let t = json["time_ms"].as_f64().unwrap();
            let new_t = match prev {
                None => t,
                Some(p) => shifted + (t - p) * if in_block { e.block_factor } else { 1.0 },
            };
            prev = Some(t);
            shifted = new_t;
            let key = json["key"].as_str().unwrap_or_default();
            match key {
                "block_start" => in_block = true,
                "block_stop" => in_block = false,
                _ => {}
            }
            line = replace_number(&line, "time_ms", |_| format!("{}", new_t.round() as i64));
            if key == "seed" {
                line = replace_number(&line, "value", |v| {
                    (v.parse::<i64>().unwrap() + e.seed_offset).to_string()
                });
            }
            if let Some((k, v)) = e.hyper
                && key == k
            {
                line = replace_number(&line, "value", |_| v.to_string());
            }
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// A release: `ORG/systems/SYSTEM.json` and `ORG/results/SYSTEM/llama2_70b_lora`.
fn release(root: &Path, name: &str, e: &Edit) -> String {
    let org = root.join(name).join("NVIDIA");
    let results = org.join("results").join(SYSTEM).join("llama2_70b_lora");
    std::fs::create_dir_all(&results).unwrap();
    std::fs::create_dir_all(org.join("systems")).unwrap();
    let mut sys: Value = serde_json::from_str(
        &std::fs::read_to_string(source().join("systems").join(format!("{SYSTEM}.json"))).unwrap(),
    )
    .unwrap();
    for (k, v) in &e.stack {
        if *k == "framework" {
            sys["framework"] = Value::from(*v);
        } else {
            sys["other_software_stack"][*k] = Value::from(*v);
        }
    }
    std::fs::write(
        org.join("systems").join(format!("{SYSTEM}.json")),
        serde_json::to_string_pretty(&sys).unwrap(),
    )
    .unwrap();
    let from = source()
        .join("results")
        .join(SYSTEM)
        .join("llama2_70b_lora");
    for k in 0..10 {
        let name = format!("result_{k}.txt");
        let text = std::fs::read_to_string(from.join(&name)).unwrap();
        std::fs::write(results.join(&name), edit_log(&text, e)).unwrap();
    }
    org.display().to_string()
}

fn same() -> Edit {
    Edit {
        block_factor: 1.0,
        ..Edit::default()
    }
}

/// The next release: NeMo 25.09 with a new CUDA, NCCL, cuDNN, driver and
/// kernel; new seeds; training blocks `factor` times as long.
fn next_release(factor: f64) -> Edit {
    Edit {
        block_factor: factor,
        seed_offset: 1000,
        stack: vec![
            ("framework", "NVIDIA NeMo Framework Release 25.09"),
            ("cuda_version", "13.0.1.012"),
            ("nccl_version", "2.27.7"),
            ("cudnn_version", "9.13.0.50"),
            ("cuda_driver_version", "580.65.06"),
            ("kernel_version", "Linux 6.8.0-1031-nvidia-64k"),
        ],
        hyper: None,
    }
}

fn compare_json(args: &[&str]) -> (Option<i32>, Value) {
    let mut all = vec!["compare", "--ruleset", "5.0.0", "--json"];
    all.extend_from_slice(args);
    let o = referee(&all);
    let out = stdout(&o);
    let j = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}{}", stderr(&o)));
    (o.status.code(), j)
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn time_to_train_decomposes_into_factors_whose_product_is_the_change() {
    let tmp = tempfile::tempdir().unwrap();
    let a = release(tmp.path(), "a", &same());
    let b = release(tmp.path(), "b", &next_release(0.83));
    let (code, j) = compare_json(&[&a, &b]);
    assert_eq!(code, Some(0), "{j:#}");
    let g = &j["groups"][0];
    assert_eq!(g["verdict"], "improvement", "{g:#}");
    let bd = &g["breakdown"];
    let measured = f(&g["time_to_train"]["relative_change"]);
    assert_eq!(f(&bd["measured_change"]), measured);
    // The product of the factors is the measured change within rounding.
    let product: f64 = bd["factors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| 1.0 + f(&x["effect"]))
        .product();
    assert!(
        (product - 1.0 - measured).abs() < 1e-12,
        "{product} vs {measured}"
    );
    assert!((f(&bd["product_change"]) - measured).abs() < 1e-12);
    let factor = |name: &str| {
        bd["factors"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == name)
            .unwrap_or_else(|| panic!("no {name}: {bd:#}"))
            .clone()
    };
    // Blocks 0.83 times as long: time per sample −17 % (block boundaries
    // are rounded to the millisecond); the same samples to converge.
    let tps = factor("time_per_sample");
    assert!((f(&tps["relative_change"]) + 0.17).abs() < 0.002, "{tps:#}");
    assert!(f(&tps["ci"]["hi"]) < 0.0, "{tps:#}");
    assert_eq!(f(&factor("samples_to_converge")["relative_change"]), 0.0);
    // Evaluation time is unchanged, so its share grows.
    let ev = factor("evaluation_overhead");
    assert!(f(&ev["relative_change"]) > 0.0, "{ev:#}");
    let (eb, ec) = (f(&bd["eval_minutes"][0]), f(&bd["eval_minutes"][1]));
    assert!((eb - ec).abs() < 1e-3, "{eb} {ec}");
    assert_eq!(bd["dominant"], "time per sample");
    // Each side's spread.
    assert_eq!(tps["baseline"]["runs"], 8); // the olympic score keeps 8 of 10
    assert!(f(&tps["baseline"]["min"]) <= f(&tps["baseline"]["value"]));
    assert!(f(&tps["baseline"]["cv"]) > 0.0);
    let summary = bd["summary"].as_str().unwrap();
    assert!(
        summary.starts_with(&format!(
            "{:+.1} %: time per sample -17.0 %",
            measured * 100.0
        )),
        "{summary}"
    );
    // The verdict line names it, in every text form.
    let text = stdout(&referee(&["compare", "--ruleset", "5.0.0", &a, &b]));
    assert!(
        text.contains(&format!("where the time went: {summary}")),
        "{text}"
    );
    assert!(
        text.contains("samples to converge [samples]: baseline"),
        "{text}"
    );

    // A real pair of different systems (AMD MI300X → MI325X): the factors
    // multiply to the measured change there too.
    let org = corpus_dir().join("training_results_v5.0/AMD/results");
    let (_, j) = compare_json(&[
        org.join("MI300X_EPYC_9575F_pytorch/llama2_70b_lora")
            .to_str()
            .unwrap(),
        org.join("MI325X_EPYC_9575F_pytorch/llama2_70b_lora")
            .to_str()
            .unwrap(),
    ]);
    let g = &j["groups"][0];
    let bd = &g["breakdown"];
    assert!(
        (f(&bd["product_change"]) - f(&g["time_to_train"]["relative_change"])).abs() < 1e-12,
        "{bd:#}"
    );
    assert_eq!(bd["dominant"], "time per sample", "{bd:#}");
}

#[test]
fn the_diff_names_exactly_the_fields_that_differ() {
    let tmp = tempfile::tempdir().unwrap();
    let a = release(tmp.path(), "a", &same());
    let mut e = next_release(1.0);
    e.hyper = Some(("opt_base_learning_rate", "0.0006"));
    let b = release(tmp.path(), "b", &e);
    let (_, j) = compare_json(&[&a, &b]);
    let d = &j["groups"][0]["changed"];
    let names: Vec<&str> = d["changed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    // Ranked: the hyperparameter first, then the software stack (framework,
    // CUDA, NCCL, cuDNN, driver, kernel).
    assert_eq!(
        names,
        vec![
            "log.opt_base_learning_rate",
            "system.framework",
            "system.other_software_stack.cuda_version",
            "system.other_software_stack.nccl_version",
            "system.other_software_stack.cudnn_version",
            "system.other_software_stack.cuda_driver_version",
            "system.other_software_stack.kernel_version",
        ],
        "{d:#}"
    );
    assert_eq!(d["changed"][0]["category"], "hyperparameters");
    assert_eq!(d["changed"][0]["baseline"][0], "0.0005");
    assert_eq!(d["changed"][0]["candidate"][0], "0.0006");
    assert_eq!(d["changed"][2]["baseline"][0], "12.9.0.036");
    // Seeds are reported as expected differences, not as causes.
    assert_eq!(d["seeds"][0]["name"], "log.seed");
    assert_eq!(d["seeds"][0]["status"], "differ (expected)");
    // Everything else both sides recorded is counted, not listed: the
    // system description's other fields and stack entries, the other
    // hyperparameters, the ruleset.
    let unchanged = d["unchanged"].as_u64().unwrap();
    assert!(unchanged > 30, "{d:#}");
    let md_path = tmp.path().join("r.md");
    let o = referee(&[
        "compare",
        "--ruleset",
        "5.0.0",
        "--markdown",
        md_path.to_str().unwrap(),
        &a,
        &b,
    ]);
    let text = stdout(&o);
    assert!(text.contains("7 facts differ, "), "{text}");
    assert!(
        text.contains("seeds · log.seed: differ (expected)"),
        "{text}"
    );
    assert!(
        text.contains("software · system.other_software_stack.nccl_version: 2.26.3 → 2.27.7"),
        "{text}"
    );
    let md = std::fs::read_to_string(&md_path).unwrap();
    assert!(
        md.contains("### What changed") && md.contains("### Where the time went"),
        "{md}"
    );

    // Identical releases: nothing differs.
    let c = release(tmp.path(), "c", &same());
    let (_, j) = compare_json(&[&a, &c]);
    let d = &j["groups"][0]["changed"];
    assert_eq!(d["changed"].as_array().unwrap().len(), 0, "{d:#}");
    assert_eq!(d["seeds"][0]["status"], "same");
}

#[test]
fn run_exec_provenance_is_diffed() {
    // Two `run --exec` outputs: the record's per-run provenance (container,
    // the program's commit, library-tuning variables) and the session's
    // software stack (Python packages, the NVIDIA driver).
    let tmp = tempfile::tempdir().unwrap();
    let mut dirs = Vec::new();
    for (name, image, nccl, torch, commit, driver) in [
        (
            "a",
            "nvcr.io/nvidia/nemo:25.04",
            "Ring",
            "2.7.0",
            "aaaa",
            "570.124.06",
        ),
        (
            "b",
            "nvcr.io/nvidia/nemo:25.09",
            "Tree",
            "2.8.0",
            "bbbb",
            "580.159.04",
        ),
    ] {
        let org = release(tmp.path(), &format!("src_{name}"), &same());
        let from = Path::new(&org)
            .join("results")
            .join(SYSTEM)
            .join("llama2_70b_lora");
        let dir = tmp.path().join(name);
        referee_tests::copy_tree(&from, &dir);
        let runs: Vec<Value> = (0..10)
            .map(|k| {
                serde_json::json!({"index": k, "provenance": {
                    "container": {"SLURM_CONTAINER_IMAGE": image},
                    "git_commit": commit,
                    "uncommitted_diff_sha256": "",
                    "env": {"NCCL_ALGO": nccl, "CUDA_DEVICE_MAX_CONNECTIONS": "1", "HOME": format!("/home/{name}")},
                }})
            })
            .collect();
        let record = serde_json::json!({
            "mode": "exec", "benchmark": "llama2_70b_lora", "ruleset": "5.0.0",
            "division": "closed", "org": "NVIDIA", "system": SYSTEM,
            "command": ["python", "train.py"], "runs": runs,
            "software": {
                "python": "/usr/bin/python3",
                "python_packages": {"torch": torch, "numpy": "2.1.0"},
                "nvidia_driver": driver,
                "cuda_driver_version": "13.0",
            },
        });
        std::fs::write(dir.join("referee_run.json"), record.to_string()).unwrap();
        dirs.push(dir.display().to_string());
    }
    let (_, j) = compare_json(&[&dirs[0], &dirs[1]]);
    let names: Vec<&str> = j["groups"][0]["changed"]["changed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        vec![
            "python.torch",
            "nvidia.driver_version",
            "container.SLURM_CONTAINER_IMAGE",
            "env.NCCL_ALGO",
            "program.git_commit",
        ],
        "{j:#}"
    );
}

#[test]
fn min_ratio_fails_below_and_names_the_metric() {
    let tmp = tempfile::tempdir().unwrap();
    let a = release(tmp.path(), "a", &same());
    let b = release(tmp.path(), "b", &next_release(0.83)); // about 1.17× faster
    let (code, j) = compare_json(&["--min-ratio", "1.1", &a, &b]);
    assert_eq!(code, Some(0), "{j:#}");
    let r = &j["groups"][0]["ratio"];
    assert_eq!(r["metric"], "time_to_train_minutes");
    assert_eq!(r["below"], false);
    let ratio = f(&r["ratio"]);
    let t = &j["groups"][0]["time_to_train"];
    assert_eq!(ratio, f(&t["baseline"]) / f(&t["candidate"]));
    // Asking for more than that fails, naming the group and the metric.
    let o = referee(&[
        "compare",
        "--ruleset",
        "5.0.0",
        "--min-ratio",
        "1.25",
        &a,
        &b,
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let text = stdout(&o);
    assert!(
        text.contains(&format!(
            "min ratio 1.25: time_to_train_minutes ratio {ratio:.3} (above 1: the candidate is faster) — BELOW"
        )),
        "{text}"
    );
    let bad = referee(&["compare", "--min-ratio", "0", &a, &b]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn history_finds_an_injected_regression_at_the_right_release() {
    let tmp = tempfile::tempdir().unwrap();
    let r1 = release(tmp.path(), "r1", &same());
    let mut e2 = same();
    e2.seed_offset = 7;
    let r2 = release(tmp.path(), "r2", &e2);
    let r3 = release(tmp.path(), "r3", &next_release(1.2)); // 20 % slower per sample
    let mut e4 = next_release(1.2);
    e4.seed_offset = 2000;
    let r4 = release(tmp.path(), "r4", &e4);
    let (code, j) = compare_json(&[&r1, &r2, &r3, &r4]);
    assert_eq!(code, Some(1), "{j:#}");
    let s = &j["series"][0];
    let rel = s["releases"].as_array().unwrap();
    assert_eq!(rel.len(), 4);
    assert_eq!(rel[1]["vs_previous"]["verdict"], "no-significant-change");
    assert_eq!(rel[2]["vs_previous"]["verdict"], "regression", "{s:#}");
    assert_eq!(rel[3]["vs_previous"]["verdict"], "no-significant-change");
    assert_eq!(rel[3]["vs_first"]["verdict"], "regression");
    let first = &s["first_significant_change"];
    assert_eq!(first["index"], 3, "{s:#}");
    assert_eq!(first["against"], "previous");
    assert_eq!(first["verdict"], "regression");
    assert_eq!(s["first_failure"]["index"], 3);
    // The step explains itself: time per sample +20 %, the stack changed.
    assert!(
        rel[2]["vs_previous"]["why"]
            .as_str()
            .unwrap()
            .contains("time per sample +20.0 %"),
        "{s:#}"
    );
    assert_eq!(rel[2]["vs_previous"]["changed_count"], 6);
    assert!(f(&rel[2]["vs_first"]["ci"]["lo"]) > 0.0);
    assert_eq!(f(&rel[0]["figure"]), f(&rel[1]["figure"]));
    assert_eq!(j["exit_code"], 1);

    // Without the slowdown the series passes (exit 0, no change found).
    let (code, j) = compare_json(&[&r1, &r2, &r1]);
    assert_eq!(code, Some(0), "{j:#}");
    assert!(j["series"][0]["first_significant_change"].is_null());
    assert!(j["series"][0]["first_failure"].is_null());

    // An improvement first (release 2, 17 % faster per sample), then the
    // regression (release 3): the first significant change and the first
    // failing release are told apart.
    let fast = release(tmp.path(), "fast", &next_release(0.83));
    let (code, j) = compare_json(&[&r1, &fast, &r3]);
    assert_eq!(code, Some(1), "{j:#}");
    let s = &j["series"][0];
    assert_eq!(s["first_significant_change"]["index"], 2, "{s:#}");
    assert_eq!(s["first_significant_change"]["verdict"], "improvement");
    assert_eq!(s["first_failure"]["index"], 3, "{s:#}");
    assert_eq!(s["first_failure"]["verdict"], "regression");

    // A release with nothing in common with the first is an input error.
    let amd = corpus_dir().join("training_results_v5.0/AMD");
    let o = referee(&[
        "compare",
        "--ruleset",
        "5.0.0",
        &r1,
        &r2,
        amd.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    assert!(stderr(&o).contains("release 3"), "{}", stderr(&o));
}
