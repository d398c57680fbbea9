//! `referee audit` of signed copies of a real published package (AMD,
//! MLPerf Training v5.0): the intact copy passes; copies damaged so that
//! the official package checker rejects them (signed after the damage, so
//! the signature holds) fail, naming why; a re-run asked for on an
//! official benchmark that referee cannot train is never a pass.

use referee_tests::{copy_tree, corpus_dir, official_package_ok, referee, stderr, stdout};
use std::path::{Path, PathBuf};

const BENCH: &str = "results/MI300X_EPYC_9575F_pytorch/llama2_70b_lora";

/// A signed copy of the AMD package, damaged by `damage` before signing.
fn signed_copy(tmp: &Path, name: &str, damage: fn(&Path)) -> PathBuf {
    let org = tmp.join(name).join("AMD");
    copy_tree(&corpus_dir().join("training_results_v5.0/AMD"), &org);
    damage(&org);
    let key = tmp.join(name).join("key");
    let k = referee(&["keygen", "--out", key.to_str().unwrap()]);
    assert!(k.status.success(), "{}", stderr(&k));
    let s = referee(&[
        "sign",
        org.to_str().unwrap(),
        "--key",
        key.to_str().unwrap(),
    ]);
    assert!(s.status.success(), "{}", stderr(&s));
    // The auditor trusts this key (without a trusted signer no audit passes).
    let public = std::fs::read_to_string(tmp.join(name).join("key.pub")).unwrap();
    std::fs::write(
        tmp.join(name).join("allowed_signers"),
        format!("AMD {public}"),
    )
    .unwrap();
    org
}

fn edit(path: &Path, f: impl Fn(String) -> String) {
    let text = std::fs::read_to_string(path).unwrap();
    std::fs::write(path, f(text)).unwrap();
}

fn drop_run_stop(path: &Path) {
    edit(path, |t| {
        t.lines()
            .filter(|l| !l.contains("\"run_stop\""))
            .collect::<Vec<_>>()
            .join("\n")
    })
}

/// `referee audit ORG --ruleset 5.0.0 --json [extra]` → (exit code, report).
fn audit(org: &Path, extra: &[&str]) -> (Option<i32>, serde_json::Value) {
    let out = org.parent().unwrap().join("audit-report");
    let mut args = vec![
        "audit",
        org.to_str().unwrap(),
        "--ruleset",
        "5.0.0",
        "--json",
        "--out",
        out.to_str().unwrap(),
    ];
    let signers = org.parent().unwrap().join("allowed_signers");
    args.extend_from_slice(&["--allowed-signers", signers.to_str().unwrap()]);
    args.extend_from_slice(extra);
    let o = referee(&args);
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_str(&stdout(&o))
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout(&o), stderr(&o)));
    // audit.json holds the same report.
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("audit.json")).unwrap()).unwrap();
    assert_eq!(file, report);
    (o.status.code(), report)
}

fn step<'a>(report: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"].as_str().unwrap().starts_with(name))
        .unwrap_or_else(|| panic!("no step {name}: {report}"))
}

#[test]
fn intact_package_passes_and_damaged_ones_fail_naming_why() {
    let tmp = tempfile::tempdir().unwrap();
    let intact = signed_copy(tmp.path(), "intact", |_| {});
    let (code, r) = audit(&intact, &[]);
    assert_eq!(code, Some(0), "{r}");
    assert_eq!(r["verdict"], "PASS");
    assert_eq!(step(&r, "signature")["status"], "passed");
    assert_eq!(step(&r, "package check")["status"], "passed");
    assert!(
        r["rules"].as_str().unwrap().contains("5.0.0"),
        "judged with the package's ruleset: {}",
        r["rules"]
    );

    type Damage = (&'static str, fn(&Path), &'static str);
    let cases: [Damage; 3] = [
        (
            "missing_result",
            |o| std::fs::remove_file(o.join(BENCH).join("result_9.txt")).unwrap(),
            "llama2_70b_lora",
        ),
        (
            "noncompliant_logs",
            |o| {
                drop_run_stop(&o.join(BENCH).join("result_3.txt"));
                drop_run_stop(&o.join(BENCH).join("result_4.txt"));
            },
            "llama2_70b_lora",
        ),
        (
            "duplicated_seed",
            |o| {
                edit(&o.join(BENCH).join("result_1.txt"), |t| {
                    t.replace("\"value\": 8807", "\"value\": 10803")
                })
            },
            "result_1.txt",
        ),
    ];
    for (name, damage, named) in cases {
        let org = signed_copy(tmp.path(), name, damage);
        let (code, r) = audit(&org, &[]);
        assert_eq!(code, Some(1), "{name}: {r}");
        assert_eq!(r["verdict"], "FAIL", "{name}");
        assert_eq!(step(&r, "signature")["status"], "passed", "{name}");
        let pkg = step(&r, "package check");
        assert_eq!(pkg["status"], "failed", "{name}");
        assert!(
            pkg["detail"].as_str().unwrap().contains(named),
            "{name}: the reason does not name {named}: {}",
            pkg["detail"]
        );
        // The official package checker rejects the same damage.
        let theirs = tmp.path().join("official").join(name).join("AMD");
        copy_tree(&corpus_dir().join("training_results_v5.0/AMD"), &theirs);
        damage(&theirs);
        assert!(!official_package_ok(&theirs, "5.0.0"), "{name}");
    }
}

#[test]
fn a_rerun_that_cannot_be_done_is_not_a_pass() {
    let tmp = tempfile::tempdir().unwrap();
    let org = signed_copy(tmp.path(), "rerun", |_| {});
    let (code, r) = audit(&org, &["--rerun", "1"]);
    assert_eq!(code, Some(1), "{r}");
    assert_eq!(r["verdict"], "INCOMPLETE");
    let rerun = step(&r, "re-run");
    assert_eq!(rerun["status"], "not_done");
    assert!(
        rerun["detail"]
            .as_str()
            .unwrap()
            .contains("not one of referee's benchmarks"),
        "{rerun}"
    );
    // Both systems' first result were asked for: two steps, none passed.
    let reruns: Vec<_> = r["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["step"].as_str().unwrap().starts_with("re-run"))
        .collect();
    assert_eq!(reruns.len(), 2);
    assert!(reruns.iter().all(|s| s["status"] == "not_done"));
    // The Markdown report says so too.
    let md = std::fs::read_to_string(org.parent().unwrap().join("audit-report/audit.md")).unwrap();
    assert!(
        md.contains("**INCOMPLETE**") && md.contains("not_done"),
        "{md}"
    );
}

#[test]
fn an_unsigned_change_stops_the_audit_at_the_signature() {
    let tmp = tempfile::tempdir().unwrap();
    let org = signed_copy(tmp.path(), "tampered", |_| {});
    edit(&org.join(BENCH).join("result_0.txt"), |t| {
        t.replacen("10803", "10804", 1)
    });
    let (code, r) = audit(&org, &["--rerun", "1"]);
    assert_eq!(code, Some(1));
    assert_eq!(r["verdict"], "FAIL");
    assert_eq!(step(&r, "signature")["status"], "failed");
    assert!(
        step(&r, "signature")["detail"]
            .as_str()
            .unwrap()
            .contains("result_0.txt")
    );
    assert_eq!(step(&r, "package check")["status"], "not_done");
    assert_eq!(step(&r, "re-runs")["status"], "not_done");
}
