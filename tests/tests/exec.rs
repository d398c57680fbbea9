//! `referee run --exec`: a training program of the submitter's own (here
//! tests/fixtures/exec/fake_lora.py, a stand-in for llama2_70b_lora that
//! logs with the official `mlperf_logging.mllog`) run under the harness's
//! rules and witness. Faithful runs pass referee's and the official
//! checkers, package and audit; each fault is caught.

use referee_tests::{
    copy_tree, fake_exec_args, fake_exec_args_with, fake_lora, keygen, official_package_ok,
    open_tempdir, python, referee, referee_bin, referee_in, rerun_python, shared_fixture, sign,
    stderr, stdout, vendor_mllog,
};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// `referee run --exec --json` of the fake program with `fault` flags, in
/// `cwd` (not a git checkout: the code identity is the same at re-run);
/// → (exit code, summary, wall time).
fn exec(
    cwd: &Path,
    out: &Path,
    runs: usize,
    extra: &[&str],
    fault: &[&str],
) -> (i32, Value, Duration) {
    let extra: Vec<&str> = ["--seed", "11"].iter().chain(extra).copied().collect();
    let args = fake_exec_args(out, runs, &extra, fault);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // Build (or find) the binary before the clock starts: another test
    // binary may have built it with other features just before, and that
    // rebuild is not the run's time.
    referee_bin();
    let t = Instant::now();
    let o = referee_in(&args, cwd);
    let wall = t.elapsed();
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    let summary: Value = serde_json::from_str(&stdout(&o))
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout(&o), stderr(&o)));
    (o.status.code().unwrap(), summary, wall)
}

/// Ten faithful runs (the count llama2_70b_lora needs), made once for the
/// suite run ([`shared_fixture`]) and shared by the tests that check,
/// package and audit them: (their folder, `run --exec --json`'s summary).
/// The folder is read-only; what a test writes goes to a fresh directory.
fn faithful() -> &'static (PathBuf, Value) {
    static RUNS: OnceLock<(PathBuf, Value)> = OnceLock::new();
    RUNS.get_or_init(|| {
        let py = rerun_python().display().to_string();
        let args =
            |out: &Path| fake_exec_args_with(out, 10, &["--seed", "11"], &[], &py, "fake_lora.py");
        let recipe = format!("{:?}", args(Path::new("OUT")));
        let (root, summary) = shared_fixture("exec-faithful-runs", &recipe, |root| {
            // The program runs from its working directory, which it carries
            // with the logging library it imports, so that the package's code
            // (`--code work`) is all a re-run needs, under any interpreter
            // (rerun_python); reachable by a root auditor's unprivileged user.
            let cwd = root.join("work");
            std::fs::create_dir_all(&cwd).unwrap();
            std::fs::copy(fake_lora(), cwd.join("fake_lora.py")).unwrap();
            vendor_mllog(&cwd);
            let args = args(&root.join("runs"));
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let o = referee_in(&args, &cwd);
            let summary: Value = serde_json::from_str(&stdout(&o))
                .unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout(&o), stderr(&o)));
            assert_eq!(o.status.code(), Some(0), "{summary:#}");
            summary
        });
        (root.join("runs"), summary)
    })
}

/// The program's working directory the faithful runs ran in (their code).
fn faithful_code() -> PathBuf {
    faithful().0.parent().unwrap().join("work")
}

fn result_lines(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn official_compliance_ok(log: &Path) -> bool {
    let o = std::process::Command::new(python())
        .args([
            "-m",
            "mlperf_logging.compliance_checker",
            "--usage",
            "training",
        ])
        .args(["--ruleset", "5.0.0", "--log_output", "/dev/null"])
        .arg(log)
        .output()
        .unwrap();
    let all = format!("{}{}", stdout(&o), stderr(&o));
    all.contains("SUCCESS") && !all.contains("FAILED")
}

#[test]
fn faithful_runs_pass_referee_and_the_official_checkers_and_package() {
    let (out, summary) = faithful();
    assert_eq!(summary["passed"], true);
    let runs = summary["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 10);
    let seeds: std::collections::BTreeSet<u64> =
        runs.iter().map(|r| r["seed"].as_u64().unwrap()).collect();
    assert_eq!(seeds.len(), 10, "ten different seeds");
    for (i, r) in runs.iter().enumerate() {
        assert_eq!(r["status"], "success", "{r:#}");
        let log = out.join(format!("result_{i}.txt"));
        assert!(!out.join(format!("result_{i}.txt.partial")).exists());
        let lines = result_lines(&log);
        // The harness's cache_clear opens the log; the program's lines follow.
        assert!(lines[0].contains("\"cache_clear\"") && lines[0].contains("\"file\": \"referee\""));
        assert!(
            lines.iter().any(|l| l.starts_with("fake_lora: seed")),
            "framework output kept"
        );
        // The program saw its seed, and the witness saw every line.
        assert!(
            lines.iter().any(|l| l.contains("\"key\": \"seed\"")
                && l.contains(&format!("\"value\": {}", r["seed"])))
        );
        let witness = &r["witness"];
        let mllog_lines = lines.iter().filter(|l| l.contains(":::MLLOG")).count() as u64;
        assert_eq!(witness["mllog_lines"].as_u64().unwrap(), mllog_lines);
        assert_eq!(
            r["provenance"]["env"]["SEED"].as_str(),
            Some(r["seed"].to_string().as_str())
        );
        assert!(r["provenance"]["files_sha256"].as_object().unwrap().len() >= 3);
    }
    // referee check (with the witness) and the official checker agree.
    let logs: Vec<String> = (0..10)
        .map(|i| out.join(format!("result_{i}.txt")).display().to_string())
        .collect();
    let mut args = vec!["check", "--ruleset", "5.0.0"];
    args.extend(logs.iter().map(String::as_str));
    let c = referee(&args);
    assert_eq!(c.status.code(), Some(0), "{}", stdout(&c));
    assert_eq!(
        stdout(&c).matches("note[witness-verified]").count(),
        10,
        "{}",
        stdout(&c)
    );
    for log in [&logs[0], &logs[9]] {
        assert!(
            official_compliance_ok(Path::new(log)),
            "official checker rejects {log}"
        );
    }
    // Packaged: referee's package check and the official package checker.
    let pk = open_tempdir().join("pkg-check");
    let p = referee(&[
        "package",
        out.to_str().unwrap(),
        "--out",
        pk.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(p.status.code(), Some(0), "{}{}", stdout(&p), stderr(&p));
    let org = pk.join("referee");
    assert!(official_package_ok(&org, "5.0.0"));
    let imp = org.join("benchmarks/llama2_70b_lora/implementations/work");
    let record: Value =
        serde_json::from_str(&std::fs::read_to_string(imp.join("referee_run_0.json")).unwrap())
            .unwrap();
    assert_eq!(record["mode"], "exec");
    assert_eq!(record["runs"][3]["witness"], summary["runs"][3]["witness"]);
}

/// Sign a copy of the packaged faithful runs (after `damage`) and audit it.
fn audit_copy(name: &str, damage: fn(&Path), extra: &[&str]) -> (Option<i32>, Value) {
    let (out, _) = faithful();
    let root = open_tempdir().join(name);
    let pk = root.join("pkg");
    // The program's code goes into the package (the run's working
    // directory is not a git checkout): an audit re-runs only that.
    let code = faithful_code();
    let p = referee(&[
        "package",
        out.to_str().unwrap(),
        "--out",
        pk.to_str().unwrap(),
        "--code",
        code.to_str().unwrap(),
    ]);
    assert_eq!(p.status.code(), Some(0), "{}{}", stdout(&p), stderr(&p));
    let org = pk.join("referee");
    damage(&org);
    let key = root.join("key");
    let (fingerprint, _) = keygen(&key);
    sign(&org, &key);
    let report = root.join("audit");
    let mut args = vec![
        "audit",
        org.to_str().unwrap(),
        "--json",
        "--out",
        report.to_str().unwrap(),
        "--signer",
        &fingerprint,
        "--allow-exec",
    ];
    args.extend_from_slice(extra);
    let o = referee(&args);
    let r: Value = serde_json::from_str(&stdout(&o))
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&o), stderr(&o)));
    (o.status.code(), r)
}

fn step<'a>(r: &'a Value, name: &str) -> &'a Value {
    r["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"].as_str().unwrap().starts_with(name))
        .unwrap_or_else(|| panic!("no step {name}: {r:#}"))
}

#[test]
fn a_faithful_rerun_passes_the_audit_and_a_tampered_witness_fails_it() {
    let (code, r) = audit_copy("audit-faithful", |_| {}, &["--rerun", "1"]);
    assert_eq!(step(&r, "witness")["status"], "passed", "{r:#}");
    let rerun = step(&r, "re-run");
    assert_eq!(rerun["status"], "passed", "{r:#}");
    assert!(
        rerun["detail"]
            .as_str()
            .unwrap()
            .contains("RCP llama2_70b_lora"),
        "{rerun}"
    );
    assert_eq!(r["verdict"], "PASS");
    assert_eq!(code, Some(0));

    // The witness of run 0 edited to match a run_stop 30 s later, and signed.
    let (code, r) = audit_copy(
        "audit-tampered",
        |org| {
            let p = org.join("benchmarks/llama2_70b_lora/implementations/work/referee_run_0.json");
            let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
            for l in v["runs"][0]["witness"]["lines"].as_array_mut().unwrap() {
                if l["key"] == "run_stop" {
                    l["time_ms"] = (l["time_ms"].as_f64().unwrap() + 30_000.0).into();
                }
            }
            std::fs::write(&p, serde_json::to_string_pretty(&v).unwrap()).unwrap();
        },
        &[],
    );
    assert_eq!(step(&r, "signature")["status"], "passed");
    let w = step(&r, "witness");
    assert_eq!(w["status"], "failed", "{r:#}");
    assert!(
        w["detail"]
            .as_str()
            .unwrap()
            .contains("not the line the harness witnessed"),
        "{w}"
    );
    assert_eq!((code, r["verdict"].as_str()), (Some(1), Some("FAIL")));
}

/// One run in a temporary directory (removed when the guard drops).
struct OneRun {
    _tmp: tempfile::TempDir,
    out: PathBuf,
    code: i32,
    summary: Value,
    wall: Duration,
}

fn one_run(name: &str, extra: &[&str], fault: &[&str]) -> OneRun {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join(name);
    let (code, summary, wall) = exec(tmp.path(), &out, 1, extra, fault);
    OneRun {
        _tmp: tmp,
        out,
        code,
        summary,
        wall,
    }
}

/// The log was finalised (renamed into place) and ends with the harness's
/// `run_stop` saying why the run was aborted.
fn assert_aborted(out: &Path, why: &str) {
    assert!(!out.join("result_0.txt.partial").exists());
    let lines = result_lines(&out.join("result_0.txt"));
    let last = lines.iter().rev().find(|l| l.contains(":::MLLOG")).unwrap();
    assert!(
        last.contains("\"run_stop\"") && last.contains("\"aborted\"") && last.contains(why),
        "{last}"
    );
}

#[test]
fn a_crash_ends_the_run_aborted_with_the_exit_status() {
    let OneRun {
        out,
        code,
        summary: s,
        ..
    } = &one_run("crash", &[], &["--crash-at-eval", "2"]);
    assert_eq!(*code, 1);
    let r = &s["runs"][0];
    assert_eq!(r["status"], "aborted");
    assert_eq!(r["exit"], "exit code 3");
    assert_aborted(out, "without run_stop");
    assert!(
        std::fs::read_to_string(out.join("run_0/stderr.txt"))
            .unwrap()
            .contains("simulated crash")
    );
    assert_eq!(s["checks"][0]["verdict"], "FAIL");
}

#[test]
fn a_hang_past_the_budget_is_stopped_and_finalised() {
    // 0.05 min = 3 s of budget, 1 s of grace.
    let OneRun {
        out,
        code,
        summary: s,
        wall,
        ..
    } = &one_run(
        "hang",
        &["--budget-minutes", "0.05", "--grace-seconds", "1"],
        &["--hang"],
    );
    assert_eq!(*code, 1);
    assert_eq!(s["runs"][0]["status"], "aborted");
    assert!(*wall < Duration::from_secs(30), "{wall:?}");
    assert_aborted(out, "exceeded its budget of 0.05 min");
}

#[test]
fn a_closed_division_violation_at_init_stops_the_run_at_once() {
    // lora_rank 8 (closed: 16), then the program would train forever.
    let OneRun {
        out,
        code,
        summary: s,
        wall,
        ..
    } = &one_run(
        "closed",
        &[],
        &["--lora-rank", "8", "--pause-after-init", "10", "--hang"],
    );
    assert_eq!(*code, 1);
    let r = &s["runs"][0];
    assert_eq!(r["status"], "aborted");
    assert!(r["reason"].as_str().unwrap().contains("lora_rank"), "{r:#}");
    // Stopped at init_stop, in the order of events rather than against a
    // wall-clock bound: the program, which logs run_start 10 s after
    // init_stop, never got there, and the stop's delay was measured.
    assert!(r["stop_delay_ms"].as_f64().is_some(), "{r:#}");
    let lines = result_lines(&out.join("result_0.txt"));
    assert!(
        !lines
            .iter()
            .any(|l| l.contains("\"run_start\"") && l.contains("fake_lora")),
        "the program reached run_start: it was not stopped at init_stop"
    );
    assert!(*wall < Duration::from_secs(30), "{wall:?}");
    assert!(
        r["live_diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["key"] == "lora_rank")
    );
    assert_aborted(out, "the rules fail at init_stop");
}

#[test]
fn a_shortened_time_to_train_is_caught_by_the_witness() {
    // run_stop written 3 s earlier than the truth (training takes ~4 s).
    let OneRun {
        out,
        code,
        summary: s,
        ..
    } = &one_run(
        "shift",
        &[],
        &["--shift-run-stop", "3000", "--step-ms", "8"],
    );
    assert_eq!(*code, 1);
    assert_eq!(
        s["runs"][0]["status"], "success",
        "the program claims success"
    );
    let diags = s["checks"][0]["diagnostics"].as_array().unwrap();
    let d = diags
        .iter()
        .find(|d| d["code"] == "witness-duration")
        .unwrap_or_else(|| panic!("{s:#}"));
    assert!(
        d["found"]
            .as_str()
            .unwrap()
            .contains("harness read it at wall"),
        "{d}"
    );
    assert_eq!(s["score_minutes"], Value::Null);
    // `referee check` of the log finds it too, from the run record.
    let c = referee(&[
        "check",
        "--ruleset",
        "5.0.0",
        out.join("result_0.txt").to_str().unwrap(),
    ]);
    assert_eq!(c.status.code(), Some(1));
    assert!(
        stdout(&c).contains("error[witness-duration]"),
        "{}",
        stdout(&c)
    );
}

#[test]
fn rank_prefixed_lines_on_stdout_and_in_the_file_count_once() {
    let OneRun {
        out,
        code,
        summary: s,
        ..
    } = &one_run("prefix", &[], &["--rank-prefix"]);
    assert_eq!(*code, 0, "{s:#}");
    // Each line three times: in the file, and twice on stdout (plain, as
    // mllog prints it, and with the rank prefix).
    let file = result_lines(&out.join("run_0/mllog.txt")).len();
    let stdout_raw = std::fs::read_to_string(out.join("run_0/stdout.txt")).unwrap();
    assert_eq!(stdout_raw.matches("0: :::MLLOG").count(), file);
    assert_eq!(stdout_raw.matches(":::MLLOG").count(), 2 * file);
    let result = result_lines(&out.join("result_0.txt"));
    let mllog = result.iter().filter(|l| l.contains(":::MLLOG")).count();
    assert_eq!(
        mllog,
        file + 1,
        "each line once, plus the harness's cache_clear"
    );
    assert_eq!(s["checks"][0]["verdict"], "PASS");
}

#[test]
fn a_million_mllog_lines_are_all_kept() {
    let OneRun {
        out,
        code,
        summary: s,
        ..
    } = &one_run("million", &[], &["--extra-lines", "1000000"]);
    assert_eq!(*code, 0, "{s:#}");
    let text = std::fs::read_to_string(out.join("result_0.txt")).unwrap();
    assert_eq!(text.matches("\"key\": \"train_loss\"").count(), 1_000_000);
    assert!(s["runs"][0]["witness"]["mllog_lines"].as_u64().unwrap() > 1_000_000);
}

#[test]
fn bad_requests_are_refused_before_anything_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("x");
    let o = referee(&[
        "run",
        "--exec",
        "--benchmark",
        "llama2_70b_lora",
        "--out",
        out.to_str().unwrap(),
        "--",
        "true",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--ruleset"), "{}", stderr(&o));
    let o = referee(&[
        "run",
        "--exec",
        "--benchmark",
        "no_such",
        "--ruleset",
        "5.0.0",
        "--",
        "true",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("not a benchmark of"), "{}", stderr(&o));
    let o = referee(&[
        "run",
        "--exec",
        "--benchmark",
        "llama2_70b_lora",
        "--ruleset",
        "5.0.0",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("<CMD>"), "{}", stderr(&o));
    // An existing result is never overwritten.
    copy_tree(&faithful().0, &out);
    let o = referee(&[
        "run",
        "--exec",
        "--benchmark",
        "llama2_70b_lora",
        "--ruleset",
        "5.0.0",
        "--out",
        out.to_str().unwrap(),
        "--",
        "true",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("never overwritten"), "{}", stderr(&o));
}

#[test]
fn the_programs_software_stack_is_recorded_once_per_session() {
    // The program is the tests' Python: its `pip list` names the
    // mlperf-logging the test script installed. The NVIDIA driver and the
    // CUDA version it supports come from `nvidia-smi` (a stand-in on PATH).
    let t = tempfile::tempdir().unwrap();
    let bin = t.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let smi = bin.join("nvidia-smi");
    std::fs::write(
        &smi,
        "#!/bin/sh\ncase \"$1\" in --query-gpu=*) echo 580.159.04;; *) echo '| NVIDIA-SMI 580.159.04   Driver Version: 580.159.04   CUDA Version: 13.0 |';; esac\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&smi, std::fs::Permissions::from_mode(0o755)).unwrap();
    let runs = t.path().join("runs");
    let o = std::process::Command::new(referee_bin())
        .args(fake_exec_args(&runs, 1, &["--seed", "11"], &[]))
        .current_dir(t.path())
        .env(
            "PATH",
            format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
        )
        .output()
        .unwrap();
    assert!(runs.join("referee_run.json").is_file(), "{}", stderr(&o));
    let record: Value =
        serde_json::from_str(&std::fs::read_to_string(runs.join("referee_run.json")).unwrap())
            .unwrap();
    let sw = &record["software"];
    assert_eq!(
        sw["python"].as_str(),
        Some(python().to_str().unwrap()),
        "{sw}"
    );
    assert_eq!(sw["python_packages"]["mlperf-logging"], "4.1.68", "{sw}");
    assert_eq!(sw["nvidia_driver"], "580.159.04", "{sw}");
    assert_eq!(sw["cuda_driver_version"], "13.0", "{sw}");
}
