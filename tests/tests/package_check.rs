//! `referee package-check` on a real submission folder and on damaged
//! copies of it; each verdict is also compared with the official package
//! checker's (which always exits 0 and states its verdict in a log line).

use referee_tests::{copy_tree, corpus_dir, official_package_ok, referee, stderr, stdout};
use std::path::{Path, PathBuf};

const BENCH: &str = "results/MI300X_EPYC_9575F_pytorch/llama2_70b_lora";
const SYSTEM: &str = "systems/MI300X_EPYC_9575F_pytorch.json";

fn fresh(tmp: &Path, name: &str) -> PathBuf {
    let org = tmp.join(name).join("AMD");
    copy_tree(&corpus_dir().join("training_results_v5.0/AMD"), &org);
    org
}

fn edit(path: &Path, f: impl Fn(String) -> String) {
    let text = std::fs::read_to_string(path).unwrap();
    std::fs::write(path, f(text)).unwrap();
}

struct Case {
    name: &'static str,
    damage: fn(&Path),
    pass: bool,
    /// A diagnostic with this code must name this file (relative to the org).
    names: Option<(&'static str, &'static str)>,
}

fn drop_run_stop(path: &Path) {
    edit(path, |t| {
        t.lines()
            .filter(|l| !l.contains("\"run_stop\""))
            .collect::<Vec<_>>()
            .join("\n")
    })
}

/// The real package, and copies damaged in the ways the official package
/// checker judges.
fn cases() -> [Case; 7] {
    [
        Case {
            name: "intact",
            damage: |_| {},
            pass: true,
            names: None,
        },
        Case {
            name: "missing_run",
            damage: |o| std::fs::remove_file(o.join(BENCH).join("result_9.txt")).unwrap(),
            pass: false,
            names: Some(("result-count", BENCH)),
        },
        Case {
            name: "extra_run",
            damage: |o| {
                let text = std::fs::read_to_string(o.join(BENCH).join("result_0.txt")).unwrap();
                std::fs::write(
                    o.join(BENCH).join("result_10.txt"),
                    text.replace("\"value\": 10803", "\"value\": 4242"),
                )
                .unwrap();
            },
            pass: false,
            names: Some(("result-count", BENCH)),
        },
        Case {
            name: "duplicated_seed",
            damage: |o| {
                edit(&o.join(BENCH).join("result_1.txt"), |t| {
                    t.replace("\"value\": 8807", "\"value\": 10803")
                })
            },
            pass: false,
            names: Some((
                "seeds",
                "results/MI300X_EPYC_9575F_pytorch/llama2_70b_lora/result_1.txt",
            )),
        },
        Case {
            name: "bad_system_json",
            damage: |o| {
                edit(&o.join(SYSTEM), |t| {
                    t.replace("\"Available on-premise\"", "\"onprem\"")
                })
            },
            pass: false,
            names: Some(("system-description", SYSTEM)),
        },
        Case {
            name: "one_noncompliant_log",
            damage: |o| drop_run_stop(&o.join(BENCH).join("result_3.txt")),
            pass: true,
            names: None,
        },
        Case {
            name: "two_noncompliant_logs",
            damage: |o| {
                for f in ["result_3.txt", "result_4.txt"] {
                    drop_run_stop(&o.join(BENCH).join(f));
                }
            },
            pass: false,
            names: Some(("too-many-failed-runs", BENCH)),
        },
    ]
}

#[test]
fn correct_package_and_damaged_copies() {
    let tmp = tempfile::tempdir().unwrap();
    for c in &cases() {
        check_case(tmp.path(), c);
    }
}

/// referee's verdict and diagnostics on one case, and the official
/// package checker's verdict on a fresh copy of it.
fn check_case(tmp: &Path, c: &Case) {
    let org = fresh(tmp, c.name);
    (c.damage)(&org);
    let o = referee(&[
        "package-check",
        "--ruleset",
        "5.0.0",
        "--json",
        org.to_str().unwrap(),
    ]);
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    assert_eq!(
        o.status.code(),
        Some(if c.pass { 0 } else { 1 }),
        "{}: {}",
        c.name,
        stdout(&o)
    );
    let rep: serde_json::Value = serde_json::from_str(stdout(&o).lines().next().unwrap()).unwrap();
    assert_eq!(
        rep["verdict"],
        if c.pass { "PASS" } else { "FAIL" },
        "{}",
        c.name
    );
    if let Some((code, file)) = c.names {
        let want = org.join(file).display().to_string();
        let hit = rep["diagnostics"].as_array().unwrap().iter().any(|d| {
            d["code"] == code
                && d["severity"] == "error"
                && d["file"].as_str() == Some(want.as_str())
        });
        assert!(
            hit,
            "{}: no {code} error naming {want}:\n{}",
            c.name,
            serde_json::to_string_pretty(&rep["diagnostics"]).unwrap()
        );
    }
    // The human form names the files too.
    let h = referee(&["package-check", "--ruleset", "5.0.0", org.to_str().unwrap()]);
    if let Some((_, file)) = c.names {
        assert!(
            stdout(&h).contains(file),
            "{}: human output does not name {file}",
            c.name
        );
    }
    // Same verdict as the official package checker (on a fresh copy:
    // the official tool rewrites scaling.json files).
    let theirs = fresh(&tmp.join("official"), c.name);
    (c.damage)(&theirs);
    assert_eq!(
        official_package_ok(&theirs, "5.0.0"),
        c.pass,
        "{}: official verdict differs",
        c.name
    );
}

#[test]
fn params_file_bypass_follows_the_official_newline_rule() {
    let tmp = tempfile::tempdir().unwrap();
    let org = fresh(tmp.path(), "bypass");
    // Make the RCP test fail: every run converges far too fast.
    for i in 0..10 {
        edit(&org.join(BENCH).join(format!("result_{i}.txt")), |t| {
            t.lines()
                .map(|l| match l.strip_prefix(":::MLLOG ") {
                    Some(json) if l.contains("\"eval_accuracy\"") || l.contains("\"run_stop\"") => {
                        let mut v: serde_json::Value = serde_json::from_str(json).unwrap();
                        v["metadata"]["samples_count"] = serde_json::json!(1000);
                        format!(":::MLLOG {v}")
                    }
                    _ => l.to_string(),
                })
                .collect::<Vec<_>>()
                .join("\n")
        });
    }
    let run = || {
        referee(&[
            "package-check",
            "--ruleset",
            "5.0.0",
            "--json",
            org.to_str().unwrap(),
        ])
    };
    assert_eq!(run().status.code(), Some(1), "{}", stdout(&run()));
    let params = org.join(BENCH).join("package_checker_params");
    // With a trailing newline the official checker ignores the flag.
    std::fs::write(&params, "rcp-bypass\n").unwrap();
    let o = run();
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("params-ignored"), "{}", stdout(&o));
    // Without one, the bypass applies.
    std::fs::write(&params, "rcp-bypass").unwrap();
    let o = run();
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).contains("passed using rcp_bypass"));
}
