//! The rules referee judges with come from the environments the user
//! named and referee's own installation, never from the directory it is
//! run in (issue 72, docs/trust.md): an auditor who types `referee check`
//! or `referee package-check .` inside a stranger's package runs none of
//! its code and judges with the official rules, not the package's.

use referee_tests::{corpus_dir, python, referee_bin};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const LOG: &str = "AMD/results/MI300X_EPYC_9575F_pytorch/llama2_70b_lora/result_0.txt";

/// A copy of the referee binary where no checkout's `.venv` is beside it
/// (`DIR/a/b/referee`: no `target/` above it, no `bin/` prefix), so that
/// discovery goes on to the interpreters.
fn lone_binary(dir: &Path) -> PathBuf {
    let to = dir.join("a/b/referee");
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::copy(referee_bin(), &to).unwrap();
    to
}

/// `BIN check --ruleset 5.0.0 LOG --json` in `cwd`, finding the rules by
/// discovery only: no `$VIRTUAL_ENV`, no `$REFEREE_MLPERF_LOGGING`; the
/// interpreter asked first is the tests' own (which has mlperf-logging).
fn check_in(bin: &Path, cwd: &Path) -> Output {
    Command::new(bin)
        .args(["check", "--ruleset", "5.0.0", "--json"])
        .arg(corpus_dir().join("training_results_v5.0").join(LOG))
        .current_dir(cwd)
        .env_remove("VIRTUAL_ENV")
        .env_remove("REFEREE_MLPERF_LOGGING")
        .env("REFEREE_PYTHON", python())
        .output()
        .unwrap()
}

#[test]
fn a_package_s_own_rules_and_python_code_are_never_used() {
    let t = tempfile::tempdir().unwrap();
    let bin = lone_binary(t.path());
    let neutral = t.path().join("neutral");
    std::fs::create_dir_all(&neutral).unwrap();
    let want = check_in(&bin, &neutral);
    assert_eq!(
        want.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&want.stderr)
    );

    // A package folder that carries a Python package of the official
    // tools' name: imported by `python3 -c 'import mlperf_logging'` run in
    // the current directory.
    let pkg = t.path().join("package");
    let evil = pkg.join("mlperf_logging");
    std::fs::create_dir_all(evil.join("compliance_checker/training_5.0.0")).unwrap();
    let marker = t.path().join("PWNED-import");
    std::fs::write(
        evil.join("__init__.py"),
        format!(
            "open({:?}, 'w').write('ran')\n",
            marker.display().to_string()
        ),
    )
    .unwrap();
    let got = check_in(&bin, &pkg);
    assert!(
        !marker.exists(),
        "referee ran the package's mlperf_logging/__init__.py"
    );
    assert_eq!(
        got.stdout, want.stdout,
        "other rules from inside the package"
    );

    // A `.venv` beside the package with rule files of the submitter's
    // own: an empty ruleset would fail the log.
    let site = pkg.join(".venv/lib/python3.11/site-packages/mlperf_logging");
    std::fs::create_dir_all(site.join("compliance_checker/training_5.0.0")).unwrap();
    std::fs::create_dir_all(site.join("rcp_checker")).unwrap();
    std::fs::write(
        site.join("compliance_checker/training_5.0.0/common.yaml"),
        "",
    )
    .unwrap();
    let got = check_in(&bin, &pkg);
    assert_eq!(
        got.stdout,
        want.stdout,
        "the package's .venv supplied the rules: {}",
        String::from_utf8_lossy(&got.stderr)
    );
    assert!(!marker.exists());
}
