//! Real submissions as they are published, and the rules the official tools
//! leave unchecked (issue 28): `package` publishes a real entry under the
//! system name its submitter chose, and each policy check fires on a
//! damaged copy of a real corpus package while staying silent on the
//! untouched original — apart from the official verdict, which stays as
//! the official tools give it.

use referee_tests::{
    copy_tree, corpus_dir, keygen, official_package_ok, referee, referee_in, sign, stderr, stdout,
};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A real v5.0 result set whose logs hold the framework's full output:
/// Dell, XE9680x8H200-SXM-141GB, llama2_70b_lora (10 runs).
const ORG: &str = "Dell";
const SYSTEM: &str = "XE9680x8H200-SXM-141GB";
const BENCH: &str = "llama2_70b_lora";

/// A copy of that one result set as an organisation folder.
fn org_copy(root: &Path) -> PathBuf {
    let src = corpus_dir().join("training_results_v5.0").join(ORG);
    let org = root.join(ORG);
    std::fs::create_dir_all(org.join("systems")).unwrap();
    std::fs::copy(
        src.join("systems").join(format!("{SYSTEM}.json")),
        org.join("systems").join(format!("{SYSTEM}.json")),
    )
    .unwrap();
    copy_tree(
        &src.join("results").join(SYSTEM).join(BENCH),
        &org.join("results").join(SYSTEM).join(BENCH),
    );
    org
}

fn results(org: &Path) -> PathBuf {
    org.join("results").join(SYSTEM).join(BENCH)
}

fn logs(org: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(results(org))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("result_")
        })
        .collect();
    v.sort();
    v
}

/// Append one MLLOG line `key = value` (a JSON literal) to a log.
fn log_key(log: &Path, key: &str, value: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(log).unwrap();
    writeln!(
        f,
        ":::MLLOG {{\"namespace\": \"\", \"time_ms\": 1745000000000, \"event_type\": \"POINT_IN_TIME\", \"key\": \"{key}\", \"value\": {value}, \"metadata\": {{\"file\": \"train.py\", \"lineno\": 1}}}}"
    )
    .unwrap();
}

/// `package-check --json` of one folder: (exit code, its report).
fn package_check(org: &Path, ruleset: &str, extra: &[&str]) -> (Option<i32>, Value) {
    let mut args = vec![
        "package-check",
        org.to_str().unwrap(),
        "--ruleset",
        ruleset,
        "--json",
    ];
    args.extend_from_slice(extra);
    let o = referee(&args);
    let v: Value = serde_json::from_str(stdout(&o).trim())
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&o), stderr(&o)));
    (o.status.code(), v)
}

/// The codes of a report's policy findings.
fn codes(report: &Value) -> Vec<String> {
    report["policy"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|d| d["code"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_published_system_name_that_differs_from_the_logged_platform_is_packaged_and_officially_accepted()
 {
    // AMD published its v5.0 llama2_70b_lora results under
    // MI300X_EPYC_9575F_pytorch; its logs say submission_platform 1xMI300X.
    let src = corpus_dir().join("training_results_v5.0").join("AMD");
    let system = "MI300X_EPYC_9575F_pytorch";
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let o = referee_in(
        &[
            "package",
            "--ruleset",
            "5.0.0",
            "--system-json",
            src.join("systems")
                .join(format!("{system}.json"))
                .to_str()
                .unwrap(),
            "--org",
            "AMD",
            "--system",
            system,
            src.join("results")
                .join(system)
                .join(BENCH)
                .to_str()
                .unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--json",
        ],
        tmp.path(),
    );
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let warnings = v["package"]["warnings"].to_string();
    assert!(
        warnings.contains("submission_platform = \\\"1xMI300X\\\"") && warnings.contains(system),
        "{warnings}"
    );
    let org = out.join("AMD");
    let published = org.join("results").join(system).join(BENCH);
    assert_eq!(
        std::fs::read_dir(&published)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("result_"))
            .count(),
        10
    );
    // The logs are published byte for byte.
    assert_eq!(
        std::fs::read(published.join("result_3.txt")).unwrap(),
        std::fs::read(
            src.join("results")
                .join(system)
                .join(BENCH)
                .join("result_3.txt")
        )
        .unwrap()
    );
    assert!(official_package_ok(&org, "5.0.0"));
}

#[test]
fn the_untouched_real_package_has_no_policy_finding_and_its_official_verdict_stands() {
    let tmp = tempfile::tempdir().unwrap();
    let org = org_copy(tmp.path());
    for ruleset in ["5.0.0", "6.1.0"] {
        let (_, v) = package_check(&org, ruleset, &[]);
        assert_eq!(codes(&v), Vec::<String>::new(), "{ruleset}: {v:#}");
        assert!(v.get("policy_summary").is_none(), "{v:#}");
    }
    let (code, v) = package_check(&org, "5.0.0", &["--policy", "error"]);
    assert_eq!((code, v["verdict"].as_str()), (Some(0), Some("PASS")));
}

#[test]
fn a_config_file_missing_from_the_implementation_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let org = org_copy(tmp.path());
    for log in logs(&org) {
        log_key(&log, "config_filename", "\"configs/config_XE9680_1x8.sh\"");
    }
    let imp = org
        .join("benchmarks")
        .join(BENCH)
        .join("implementations/nemo");
    std::fs::create_dir_all(imp.join("configs")).unwrap();
    std::fs::write(imp.join("configs/config_XE9680_1x8.sh"), "export TP=4\n").unwrap();
    let (_, v) = package_check(&org, "5.0.0", &[]);
    assert_eq!(codes(&v), Vec::<String>::new(), "{v:#}");

    std::fs::remove_file(imp.join("configs/config_XE9680_1x8.sh")).unwrap();
    let (code, v) = package_check(&org, "5.0.0", &[]);
    assert_eq!(codes(&v), ["policy[config-file]"], "{v:#}");
    let f = &v["policy"][0];
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("`configs/config_XE9680_1x8.sh` (named by 10 runs)"),
        "{f:#}"
    );
    assert_eq!(f["severity"], "warning");
    assert!(f["line"].as_u64().unwrap() > 600, "{f:#}");
    assert!(f["rule"].as_str().unwrap().contains("#592"), "{f:#}");
    // Apart from the official verdict, which stands: exit 0 under warn,
    // exit 1 under --policy error with the verdict still PASS.
    assert_eq!((code, v["verdict"].as_str()), (Some(0), Some("PASS")));
    assert_eq!(v["policy_summary"]["by_code"]["policy[config-file]"], 1);
    let (code, v) = package_check(&org, "5.0.0", &["--policy", "error"]);
    assert_eq!((code, v["verdict"].as_str()), (Some(1), Some("PASS")));
    assert_eq!(v["policy"][0]["severity"], "error");
}

#[test]
fn parallelism_that_differs_across_the_runs_of_a_set_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let org = org_copy(tmp.path());
    let logs = logs(&org);
    for log in &logs {
        log_key(log, "tensor_parallelism", "4");
    }
    let (_, v) = package_check(&org, "5.0.0", &[]);
    assert_eq!(codes(&v), Vec::<String>::new(), "{v:#}");

    log_key(&logs[7], "tensor_parallelism", "8"); // a second line: the first value counts
    let (_, v) = package_check(&org, "5.0.0", &[]);
    assert_eq!(codes(&v), Vec::<String>::new(), "{v:#}");
    let text = std::fs::read_to_string(&logs[7]).unwrap().replace(
        "\"tensor_parallelism\", \"value\": 4,",
        "\"tensor_parallelism\", \"value\": 2,",
    );
    std::fs::write(&logs[7], text).unwrap();
    let (code, v) = package_check(&org, "5.0.0", &[]);
    assert_eq!(codes(&v), ["policy[disclosure]"], "{v:#}");
    let found = v["policy"][0]["found"].as_str().unwrap();
    assert!(
        found.starts_with("2 in result_7.txt:") && found.contains("; 4 in result_0.txt:"),
        "{found}"
    );
    assert_eq!((code, v["verdict"].as_str()), (Some(0), Some("PASS")));
}

#[test]
fn a_result_file_of_mllog_lines_only_is_named_from_ruleset_6_1_0() {
    let tmp = tempfile::tempdir().unwrap();
    let org = org_copy(tmp.path());
    let log = &logs(&org)[2];
    let check = |ruleset: &str| -> Vec<Value> {
        let o = referee(&[
            "check",
            "--ruleset",
            ruleset,
            "--json",
            log.to_str().unwrap(),
        ]);
        let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
        v["policy"].as_array().cloned().unwrap_or_default()
    };
    assert!(check("6.1.0").is_empty());
    let text = std::fs::read_to_string(log).unwrap();
    let mllog: String = text
        .lines()
        .filter(|l| l.contains(":::MLLOG"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(mllog.len() < text.len());
    std::fs::write(log, mllog).unwrap();
    let f = check("6.1.0");
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0]["code"], "policy[full-output]");
    assert!(
        f[0]["rule"].as_str().unwrap().contains("#588"),
        "{:#}",
        f[0]
    );
    assert_eq!(f[0]["applies"], "6.1.0 and later");
    // Before 6.1.0 the rule does not apply.
    assert!(check("6.0.0").is_empty());
    assert!(check("5.0.0").is_empty());
}

#[test]
fn a_misspelt_key_is_named_with_the_key_the_rules_read() {
    let tmp = tempfile::tempdir().unwrap();
    let org = org_copy(tmp.path());
    let log = &logs(&org)[0];
    let text = std::fs::read_to_string(log).unwrap();
    assert!(text.contains("\"key\": \"opt_base_learning_rate\""));
    std::fs::write(
        log,
        text.replace(
            "\"key\": \"opt_base_learning_rate\"",
            "\"key\": \"opt_base_learning_rte\"",
        ),
    )
    .unwrap();
    let o = referee(&["check", "--ruleset", "5.0.0", log.to_str().unwrap()]);
    let text = stdout(&o);
    assert!(
        text.contains("warning[policy[key-spelling]]: logged key `opt_base_learning_rte` is read by no rule; it looks like `opt_base_learning_rate`"),
        "{text}"
    );
    assert!(
        text.contains("policy: 1 finding (policy[key-spelling] 1), beyond the official verdict"),
        "{text}"
    );
    // An optional key, misspelt: the official verdict passes, the policy
    // names it, and --policy error fails the check.
    let opt = &logs(&org)[1];
    log_key(opt, "tensor_paralellism", "4");
    let o = referee(&[
        "check",
        "--ruleset",
        "6.0.0",
        "--json",
        opt.to_str().unwrap(),
    ]);
    let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["verdict"], "PASS", "{v:#}");
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(v["policy"][0]["code"], "policy[key-spelling]");
    assert_eq!(v["policy"][0]["expected"], "`tensor_parallelism`");
    let o = referee(&[
        "check",
        "--ruleset",
        "6.0.0",
        "--policy",
        "error",
        opt.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
}

#[test]
fn summarize_and_audit_list_policy_findings_apart_with_counts() {
    let tmp = tempfile::tempdir().unwrap();
    let org = org_copy(tmp.path());
    let logs = logs(&org);
    for (i, log) in logs.iter().enumerate() {
        log_key(log, "micro_batch_size", if i == 0 { "2" } else { "1" });
    }
    let o = referee(&[
        "summarize",
        org.to_str().unwrap(),
        "--ruleset",
        "5.0.0",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let row: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert!(row["score_minutes"].as_f64().is_some(), "{row:#}");
    assert_eq!(codes(&row), ["policy[disclosure]"]);
    assert_eq!(row["policy_summary"]["findings"], 1);
    assert!(
        stderr(&o).contains("policy: 1 finding (policy[disclosure] 1)"),
        "{}",
        stderr(&o)
    );
    let o = referee(&[
        "summarize",
        org.to_str().unwrap(),
        "--ruleset",
        "5.0.0",
        "--policy",
        "error",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));

    // The audit of the signed package notes them as a step of their own.
    let key = tmp.path().join("key");
    let (fp, _) = keygen(&key);
    sign(&org, &key);
    let audit = |mode: &str| -> (Option<i32>, Value) {
        let out = tmp.path().join(format!("audit-{mode}"));
        let o = referee(&[
            "audit",
            org.to_str().unwrap(),
            "--signer",
            &fp,
            "--ruleset",
            "5.0.0",
            "--policy",
            mode,
            "--json",
            "--out",
            out.to_str().unwrap(),
        ]);
        let v: Value = serde_json::from_str(&stdout(&o))
            .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&o), stderr(&o)));
        (o.status.code(), v)
    };
    let (code, v) = audit("warn");
    let step = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == "policy")
        .cloned()
        .unwrap_or_else(|| panic!("{v:#}"));
    assert_eq!(step["status"], "noted");
    assert!(
        step["detail"]
            .as_str()
            .unwrap()
            .contains("policy[disclosure] 1"),
        "{step}"
    );
    assert_eq!(
        (code, v["verdict"].as_str()),
        (Some(0), Some("PASS")),
        "{v:#}"
    );
    let (code, v) = audit("error");
    assert_eq!(
        (code, v["verdict"].as_str()),
        (Some(1), Some("FAIL")),
        "{v:#}"
    );
}
