//! `referee system` on this machine: the undiscoverable fields are listed
//! and the ruleset's system-description check fails until they are given;
//! with them given by `--set`, the description passes, and a package built
//! with it (a real v5.0 submitter's logs) is accepted by the official
//! package checker.

use referee_tests::{corpus_dir, official_package_ok, referee, stderr, stdout};

/// Fields no machine can tell: who submits, under which status, the name.
const GIVEN: [&str; 5] = [
    "submitter=AMD",
    "division=closed",
    "status=Available on-premise",
    "system_name=1xMI300X",
    "framework=PyTorch 2.5 (ROCm)",
];

fn system(args: &[&str]) -> std::process::Output {
    let mut a = vec!["system", "--ruleset", "5.0.0"];
    a.extend_from_slice(args);
    let o = referee(&a);
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    o
}

#[test]
fn undiscoverable_fields_are_listed_and_fail_the_check_until_given() {
    let o = system(&["--json"]);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    let r: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let fields = r["system"].as_object().unwrap();
    assert_eq!(
        fields.len(),
        33,
        "the 33 fields of the MLCommons system JSON"
    );
    // Discovered from this machine, never invented.
    assert_eq!(r["sources"]["host_processor_core_count"], "discovered");
    let cores: usize = fields["host_processor_vcpu_count"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    // The machine's online CPUs (sysconf), not this process's share of them
    // (available_parallelism is lower in a CPU-limited container).
    // SAFETY: sysconf reads a constant.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    assert!(online > 0);
    assert_eq!(cores, online as usize, "vCPUs as the OS counts them");
    for f in ["submitter", "status", "system_name", "framework", "cooling"] {
        assert_eq!(r["sources"][f], "missing", "{f}");
        assert_eq!(fields[f], "", "{f} is left empty, not guessed");
    }
    // The human form names every field to fill.
    let o = system(&[]);
    assert_eq!(o.status.code(), Some(1));
    let text = stdout(&o);
    let list = text
        .lines()
        .find(|l| l.contains("could not be discovered"))
        .unwrap_or_else(|| panic!("no list of missing fields in:\n{text}"));
    for f in [
        "submitter",
        "division",
        "status",
        "system_name",
        "framework",
    ] {
        assert!(list.contains(f), "{f} missing from: {list}");
    }
    assert!(text.contains("FAIL"), "{text}");
}

#[test]
fn with_the_fields_given_the_description_passes_and_packages_for_the_official_checker() {
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("cpu_box.json");
    let mut args = vec!["--out", json.to_str().unwrap()];
    for g in GIVEN {
        args.extend_from_slice(&["--set", g]);
    }
    let o = system(&args);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(written["status"], "Available on-premise");
    assert_eq!(written["framework"], "PyTorch 2.5 (ROCm)");
    assert_eq!(written.as_object().unwrap().len(), 33);

    // A real submitter's logs packaged with this description (the logs
    // name the system 1xMI300X; the package must use the logs' name).
    let logs = corpus_dir()
        .join("training_results_v5.0/AMD/results/MI300X_EPYC_9575F_pytorch/llama2_70b_lora");
    let out = tmp.path().join("pkg");
    let o = referee(&[
        "package",
        logs.to_str().unwrap(),
        "--ruleset",
        "5.0.0",
        "--system-json",
        json.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert!(out.join("AMD/systems/1xMI300X.json").is_file());
    assert!(official_package_ok(&out.join("AMD"), "5.0.0"));
}
