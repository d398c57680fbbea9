//! RCP test branches on hand-made benchmark directories, each checked
//! against the official `rcp_checker` run live on the same directory.

use referee_rules::rcp;
use referee_rules::ruleset_facts::RulesetFacts;
use referee_rules::score::{ScoreContext, analyze_run};
use referee_tests::{mlperf_logging, official_score_context, python};
use std::path::Path;
use std::process::Command;

/// Write `result_i.txt` logs: `points[i]` = samples to converge, or `None`
/// for a run that ends aborted.
fn make_dir(dir: &Path, bench: &str, gbs: u64, points: &[Option<u64>]) {
    std::fs::create_dir_all(dir).unwrap();
    for (i, p) in points.iter().enumerate() {
        let t = 1_700_000_000_000u64 + i as u64 * 1000;
        let ev = p.unwrap_or(98_304);
        let status = if p.is_some() { "success" } else { "aborted" };
        let lines = [
            format!(
                r#":::MLLOG {{"namespace": "", "time_ms": {t}, "event_type": "POINT_IN_TIME", "key": "submission_benchmark", "value": "{bench}", "metadata": {{"file": "t.py", "lineno": 1}}}}"#
            ),
            format!(
                r#":::MLLOG {{"namespace": "", "time_ms": {t}, "event_type": "POINT_IN_TIME", "key": "global_batch_size", "value": {gbs}, "metadata": {{"file": "t.py", "lineno": 2}}}}"#
            ),
            format!(
                r#":::MLLOG {{"namespace": "", "time_ms": {t}, "event_type": "POINT_IN_TIME", "key": "eval_accuracy", "value": 3.2, "metadata": {{"file": "t.py", "lineno": 3, "samples_count": {ev}}}}}"#
            ),
            format!(
                r#":::MLLOG {{"namespace": "", "time_ms": {t}, "event_type": "INTERVAL_END", "key": "run_stop", "value": null, "metadata": {{"file": "t.py", "lineno": 4, "samples_count": {ev}, "status": "{status}"}}}}"#
            ),
        ];
        std::fs::write(dir.join(format!("result_{i}.txt")), lines.join("\n") + "\n").unwrap();
    }
}

struct Official {
    passed: bool,
    message: String,
    factor: Option<f64>,
}

fn official(dir: &Path, ruleset: &str) -> Official {
    let o = Command::new(python())
        .args([
            "-m",
            "mlperf_logging.rcp_checker",
            "--rcp_version",
            ruleset,
            "--log_output",
            "/dev/null",
        ])
        .arg(dir)
        .output()
        .expect("run the official rcp_checker");
    let err = String::from_utf8_lossy(&o.stderr);
    let verdict_line = err
        .lines()
        .find(|l| l.contains("RCP test PASSED") || l.contains("RCP test FAILED"))
        .unwrap_or_else(|| panic!("official output without a verdict:\n{err}"));
    let passed = verdict_line.contains("PASSED");
    let body = verdict_line
        .split_once(" - ")
        .map(|x| x.1)
        .unwrap_or(verdict_line);
    let message = body.split(", RCP test").next().unwrap().to_string();
    let factor = err
        .lines()
        .find_map(|l| {
            l.split_once("normalized by factor of ")
                .map(|x| x.1.to_string())
        })
        .and_then(|s| s.rsplit(" = ").next().and_then(|f| f.trim().parse().ok()));
    assert_eq!(o.status.code(), Some(if passed { 0 } else { 1 }));
    Official {
        passed,
        message,
        factor,
    }
}

/// (name, global batch size, convergence points, passes, official message)
type Case = (&'static str, u64, Vec<Option<u64>>, bool, &'static str);

/// One directory per branch of the RCP test (llama31_8b, ruleset 5.1.0).
fn branch_cases() -> Vec<Case> {
    let s = |v: &[u64]| v.iter().map(|x| Some(*x)).collect::<Vec<_>>();
    let mut typical = vec![Some(159_744); 7];
    typical.extend([Some(172_032); 3]);
    let mut one_aborted = typical.clone();
    one_aborted[0] = None;
    let mut two_aborted = one_aborted.clone();
    two_aborted[1] = None;
    vec![
        ("exact", 16, typical.clone(), true, "RCP found"),
        ("exact_normalised", 16, s(&[159_744; 10]), true, "RCP found"),
        ("exact_too_fast", 16, s(&[155_000; 10]), false, "RCP found"),
        ("one_aborted", 16, one_aborted, true, "RCP found"),
        (
            "interpolation_pass",
            24,
            s(&[170_000; 10]),
            true,
            "RCP Interpolation",
        ),
        (
            "interpolation_fail",
            24,
            s(&[160_000; 10]),
            false,
            "RCP Interpolation",
        ),
        (
            "below_all_slower",
            8,
            s(&[200_000; 10]),
            true,
            "RCP not found but slower convergence on smaller batch size",
        ),
        (
            "below_all_faster",
            8,
            s(&[150_000; 10]),
            false,
            "Missing RCP, please submit RCP with BS = 8",
        ),
        (
            "above_all",
            256,
            s(&[400_000; 10]),
            false,
            "Missing RCP, please submit RCP with BS = 256",
        ),
        (
            "too_many_failed",
            16,
            two_aborted,
            false,
            "Insufficient convergence",
        ),
    ]
}

/// referee's RCP test of one directory's runs.
fn check_dir(ctx: &ScoreContext, dir: &Path, bypass: bool) -> rcp::RcpOutcome {
    let files = referee_rules::layout::result_files(dir).unwrap();
    let runs = files
        .iter()
        .map(|f| analyze_run(ctx, f, false).convergence)
        .collect();
    rcp::check_runs(
        runs,
        &|b| ctx.table(b),
        &ctx.rcp_options(bypass, false),
        &ctx.facts,
    )
}

#[test]
fn every_branch_matches_the_official_checker() {
    let ruleset = "5.1.0";
    let ctx = official_score_context(ruleset);
    let tmp = tempfile::tempdir().unwrap();
    let mut factors_compared = 0;
    for (name, gbs, points, want_pass, want_msg) in branch_cases() {
        let dir = tmp.path().join(name);
        make_dir(&dir, "llama31_8b", gbs, &points);
        let ours = check_dir(&ctx, &dir, false);
        assert_eq!(
            (ours.passed, ours.message.as_str()),
            (want_pass, want_msg),
            "{name}"
        );
        let theirs = official(&dir, ruleset);
        assert_eq!(
            ours.passed, theirs.passed,
            "{name}: verdict differs from the official checker"
        );
        assert_eq!(
            ours.message, theirs.message,
            "{name}: message differs from the official checker"
        );
        // The official checker prints the factor of every result it
        // normalises; a passing result without that line must be one that
        // referee does not normalise either (factor 1), so a change in the
        // official output cannot make the comparison vanish unnoticed.
        match theirs.factor {
            Some(f) => {
                factors_compared += 1;
                assert!(
                    (ours.norm_factor - f).abs() < 1e-12,
                    "{name}: factor {} vs official {f}",
                    ours.norm_factor
                );
                assert_eq!(ours.writes_scaling, Some(ours.norm_factor));
            }
            None if theirs.passed => assert_eq!(
                ours.norm_factor, 1.0,
                "{name}: referee normalises, the official checker printed no factor"
            ),
            None => {}
        }
    }
    assert!(factors_compared > 0, "no official factor was compared");
    // The normalised case: all runs at 159,744 samples against RCP mean
    // 161,109.33 → factor 161109.33 / 159744 (the spec's observed value).
    let o = check_dir(&ctx, &tmp.path().join("exact_normalised"), false);
    assert_eq!(o.norm_factor, 1.0085470085470085);
}

#[test]
fn bypass_turns_an_rcp_failure_into_a_pass_never_insufficient_convergence() {
    let ctx = official_score_context("5.1.0");
    let tmp = tempfile::tempdir().unwrap();
    for (name, pass) in [
        ("exact_too_fast", true),
        ("above_all", true),
        ("too_many_failed", false),
    ] {
        let (_, gbs, points, _, _) = branch_cases().into_iter().find(|c| c.0 == name).unwrap();
        let dir = tmp.path().join(name);
        make_dir(&dir, "llama31_8b", gbs, &points);
        assert!(
            !check_dir(&ctx, &dir, false).passed,
            "{name} fails without bypass"
        );
        let o = check_dir(&ctx, &dir, true);
        assert_eq!(o.passed, pass, "bypass on {name}");
        if pass {
            assert!(
                o.message.ends_with(" passed using rcp_bypass"),
                "{}",
                o.message
            );
        }
    }
}

#[test]
fn rcp_statistics_match_the_specification() {
    let pkg = mlperf_logging();
    let t = rcp::RcpTable::load(
        &pkg.rcp_dir(),
        "training",
        "6.1.0",
        "llama31_8b",
        &RulesetFacts::official(),
    )
    .unwrap();
    let r16 = t.records.iter().find(|r| r.bs == 16.0).unwrap();
    assert!((r16.mean - 161_109.33).abs() < 0.01, "{}", r16.mean);
    assert!((r16.stdev - 4_387.69).abs() < 0.01, "{}", r16.stdev);
    assert!(
        (r16.min_epochs - 157_919.55).abs() < 0.01,
        "{}",
        r16.min_epochs
    );
    let lo = t.records.iter().find(|r| r.bs == 16.0).unwrap();
    let hi = t.records.iter().find(|r| r.bs == 32.0).unwrap();
    let i = t.interpolate(24.0, lo, hi);
    assert!(
        (i.mean - 169_984.0).abs() < 0.01 && (i.stdev - 5_776.38).abs() < 0.01,
        "{i:?}"
    );
    assert!((i.min_epochs - 165_862.49).abs() < 0.01, "{}", i.min_epochs);
    // Pruned sets observed for the official tables.
    let pruned = |b: &str| -> Vec<f64> {
        rcp::RcpTable::load(
            &pkg.rcp_dir(),
            "training",
            "6.1.0",
            b,
            &RulesetFacts::official(),
        )
        .unwrap()
        .pruned
        .iter()
        .map(|r| r.bs)
        .collect()
    };
    assert_eq!(pruned("llama2_70b_lora"), vec![8.0, 16.0, 128.0]);
    assert_eq!(pruned("flux1"), vec![512.0, 2048.0, 4096.0]);
    assert_eq!(pruned("gpt_oss_20b"), vec![16.0, 64.0]);
}
