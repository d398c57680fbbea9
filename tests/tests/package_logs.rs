//! `referee package` of result logs that referee did not produce: a real
//! v5.0 submitter's llama2_70b_lora logs (AMD, from the corpus) repackaged
//! with `--ruleset 5.0.0 --system-json --code` pass referee's package check
//! and the official package checker, byte for byte; wrong run counts and
//! mixed configurations are refused and nothing is written.

use referee_tests::{corpus_dir, official_package_ok, referee, stderr, stdout};
use std::path::{Path, PathBuf};

fn amd() -> PathBuf {
    corpus_dir().join("training_results_v5.0/AMD")
}

fn logs_dir() -> PathBuf {
    amd().join("results/MI300X_EPYC_9575F_pytorch/llama2_70b_lora")
}

fn system_json() -> String {
    amd()
        .join("systems/MI300X_EPYC_9575F_pytorch.json")
        .display()
        .to_string()
}

/// `referee package DIR --ruleset 5.0.0 --system-json … --out OUT [extra]`.
fn package(dir: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let sys = system_json();
    let mut args = vec![
        "package",
        dir.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    if !extra.contains(&"--no-system") {
        args.extend_from_slice(&["--system-json", &sys]);
    } else {
        args.retain(|a| *a != "--no-system");
    }
    let o = referee(&args);
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    o
}

fn copy_logs(to: &Path, n: usize) {
    std::fs::create_dir_all(to).unwrap();
    for i in 0..n {
        let name = format!("result_{i}.txt");
        std::fs::copy(logs_dir().join(&name), to.join(&name)).unwrap();
    }
}

#[test]
fn a_submitters_own_logs_repackage_into_a_folder_both_checkers_accept() {
    let tmp = tempfile::tempdir().unwrap();
    let code = tmp.path().join("lora_code");
    std::fs::create_dir_all(code.join(".git")).unwrap();
    std::fs::write(code.join("train.py"), "print('train')\n").unwrap();
    std::fs::write(code.join(".git/HEAD"), "ref: x\n").unwrap();
    let out = tmp.path().join("out");
    let o = package(
        &logs_dir(),
        &out,
        &[
            "--ruleset",
            "5.0.0",
            "--code",
            code.to_str().unwrap(),
            "--json",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let report: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(report["check"]["verdict"], "PASS", "{report:#}");
    let org = out.join("AMD");
    assert!(official_package_ok(&org, "5.0.0"));
    // The logs are the submitter's, byte for byte, under the system they name.
    for i in 0..10 {
        let name = format!("result_{i}.txt");
        let packaged = org.join("results/1xMI300X/llama2_70b_lora").join(&name);
        assert_eq!(
            std::fs::read(&packaged).unwrap(),
            std::fs::read(logs_dir().join(&name)).unwrap(),
            "{name}"
        );
    }
    let imp = org.join("benchmarks/llama2_70b_lora/implementations/lora_code");
    assert!(imp.join("code/train.py").is_file());
    assert!(!imp.join("code/.git").exists(), "no .git in the package");
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(imp.join("config.json")).unwrap()).unwrap();
    assert_eq!(config["global_batch_size"], 8, "{config:#}");
    assert!(
        config.get("seed").is_none(),
        "the seed varies per run: {config:#}"
    );
}

#[test]
fn wrong_run_counts_mixed_configurations_and_missing_facts_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let refused = |dir: &Path, extra: &[&str], says: &str| {
        let out = tmp.path().join("out");
        let o = package(dir, &out, extra);
        assert_eq!(o.status.code(), Some(2), "{}{}", stdout(&o), stderr(&o));
        assert!(
            stderr(&o).contains(says),
            "expected {says:?} in: {}",
            stderr(&o)
        );
        assert!(!out.join("AMD").exists(), "nothing written");
    };
    let nine = tmp.path().join("nine");
    copy_logs(&nine, 9);
    refused(&nine, &["--ruleset", "5.0.0"], "requires exactly 10");

    let mixed = tmp.path().join("mixed");
    copy_logs(&mixed, 10);
    let p = mixed.join("result_5.txt");
    let text = std::fs::read_to_string(&p).unwrap();
    std::fs::write(
        &p,
        text.replacen(
            "\"key\": \"global_batch_size\", \"value\": 8,",
            "\"key\": \"global_batch_size\", \"value\": 16,",
            1,
        ),
    )
    .unwrap();
    refused(&mixed, &["--ruleset", "5.0.0"], "result_5.txt");
    refused(
        &mixed,
        &["--ruleset", "5.0.0"],
        "global_batch_size: 16 vs 8",
    );

    refused(&logs_dir(), &[], "--ruleset");
    refused(
        &logs_dir(),
        &["--ruleset", "5.0.0", "--no-system"],
        "--system-json",
    );
    refused(
        &logs_dir(),
        &["--ruleset", "3.1.0"],
        "is not a benchmark of",
    );
}
