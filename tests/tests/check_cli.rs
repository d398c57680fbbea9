//! `referee check` end to end: output forms, exit codes, and bad input that
//! must produce clear errors, never a panic.

use referee_tests::{corpus_dir, referee, stderr, stdout};
use std::io::Write;
use std::path::{Path, PathBuf};

const PASS_LOG: &str = "AMD/results/MI300X_EPYC_9575F_pytorch/llama2_70b_lora/result_0.txt";
const FAIL_LOG: &str = "Cisco/results/hpf_n8/bert/result_5.txt";

fn corpus_log(rel: &str) -> PathBuf {
    corpus_dir().join("training_results_v5.0").join(rel)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn no_panic(o: &std::process::Output) {
    let err = stderr(o);
    assert!(!err.contains("panicked"), "referee panicked:\n{err}");
    assert!(o.status.code().is_some(), "referee died from a signal");
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// A real passing log with `edit` applied to its lines.
fn edited_log(dir: &Path, name: &str, edit: impl Fn(Vec<String>) -> Vec<String>) -> PathBuf {
    let text = std::fs::read_to_string(corpus_log(PASS_LOG)).unwrap();
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    let out = edit(lines).join("\n") + "\n";
    write(dir, name, out.as_bytes())
}

#[test]
fn human_output_and_exit_codes() {
    let pass = referee(&["check", "--ruleset", "5.0.0", s(&corpus_log(PASS_LOG))]);
    no_panic(&pass);
    assert_eq!(pass.status.code(), Some(0), "{}", stdout(&pass));
    assert!(stdout(&pass).starts_with("PASS "), "{}", stdout(&pass));
    assert!(stdout(&pass).contains("1 PASS, 0 FAIL"));

    let fail = referee(&["check", "--ruleset", "5.0.0", s(&corpus_log(FAIL_LOG))]);
    no_panic(&fail);
    assert_eq!(fail.status.code(), Some(1));
    let out = stdout(&fail);
    assert!(out.starts_with("FAIL "), "{out}");
    assert!(out.contains("error[target-not-reached]"), "{out}");
    assert!(
        out.contains("training_5.0.0/closed_bert.yaml:"),
        "rule file and line: {out}"
    );
    assert!(out.contains("result_5.txt:"), "log file:line: {out}");
    assert!(out.contains("expected:") && out.contains("found:"), "{out}");
    assert!(out.contains("key eval_accuracy"), "{out}");
}

#[test]
fn json_lines_one_object_per_log() {
    let both = referee(&[
        "check",
        "--ruleset",
        "5.0.0",
        "--json",
        s(&corpus_log(PASS_LOG)),
        s(&corpus_log(FAIL_LOG)),
    ]);
    no_panic(&both);
    assert_eq!(both.status.code(), Some(1));
    let objs: Vec<serde_json::Value> = stdout(&both)
        .lines()
        .map(|l| serde_json::from_str(l).expect("every stdout line is JSON"))
        .collect();
    assert_eq!(objs.len(), 2);
    assert_eq!(objs[0]["verdict"], "PASS");
    assert_eq!(objs[0]["ruleset"], "5.0.0");
    assert_eq!(objs[0]["benchmark"], "llama2_70b_lora");
    assert!(objs[0]["path"].as_str().unwrap().ends_with("result_0.txt"));
    assert_eq!(objs[1]["verdict"], "FAIL");
    assert_eq!(objs[1]["benchmark"], "bert");
    let d = &objs[1]["diagnostics"][0];
    assert_eq!(d["key"], "eval_accuracy");
    assert!(d["line"].as_u64().unwrap() > 1);
    assert!(d["message"].as_str().unwrap().contains("eval_accuracy"));
    assert_eq!(
        d["official"],
        "Failed checks for eval_accuracy : (v['value'] >= 0.720) and v['value'] < 1.0"
    );
}

#[test]
fn directories_are_searched_for_result_files() {
    let dir = corpus_log("Cisco/results/hpf_n8/bert");
    let o = referee(&["check", "--ruleset", "5.0.0", "--json", s(&dir)]);
    no_panic(&o);
    let n = stdout(&o).lines().count();
    let expected = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter(|e| {
            let n = e.file_name().to_string_lossy().to_string();
            n.starts_with("result_") && n.ends_with(".txt")
        })
        .count();
    assert_eq!(n, expected);
    assert_eq!(o.status.code(), Some(1), "result_5 of this directory fails");
}

#[test]
fn bad_input_gives_diagnostics_not_crashes() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let cases: Vec<(PathBuf, &str)> = vec![
        (write(d, "empty.txt", b""), "no-records"),
        (
            write(
                d,
                "garbage.txt",
                &(0..20_000u32)
                    .map(|i| (i * 7919 % 251) as u8)
                    .collect::<Vec<_>>(),
            ),
            "no-records",
        ),
        (
            edited_log(d, "truncated.txt", |mut l| {
                let cut = l[10].len() / 2;
                l[10].truncate(cut);
                l
            }),
            "parse-error",
        ),
        (
            edited_log(d, "no_time.txt", |mut l| {
                l[10] = l[10].replace("\"time_ms\"", "\"t_ms\"");
                l
            }),
            "malformed-record",
        ),
        (
            edited_log(d, "array.txt", |mut l| {
                l.insert(3, ":::MLLOG [1, 2, 3]".into());
                l
            }),
            "malformed-record",
        ),
        (
            edited_log(d, "null_time.txt", |mut l| {
                l.insert(
                    3,
                    r#":::MLLOG {"time_ms": null, "key": "x", "value": 1, "metadata": {}}"#.into(),
                );
                l
            }),
            "malformed-record",
        ),
    ];
    for (path, code) in &cases {
        let o = referee(&["check", "--ruleset", "5.0.0", "--json", s(path)]);
        no_panic(&o);
        assert_eq!(
            o.status.code(),
            Some(1),
            "{}: {}",
            path.display(),
            stdout(&o)
        );
        let v: serde_json::Value =
            serde_json::from_str(stdout(&o).lines().next().unwrap()).unwrap();
        assert_eq!(v["verdict"], "FAIL");
        let codes: Vec<&str> = v["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["code"].as_str().unwrap())
            .collect();
        assert!(
            codes.contains(code),
            "{}: wanted {code} in {codes:?}",
            path.display()
        );
    }
    // The malformed line is named by its file line.
    let o = referee(&["check", "--ruleset", "5.0.0", "--json", s(&cases[2].0)]);
    let v: serde_json::Value = serde_json::from_str(stdout(&o).lines().next().unwrap()).unwrap();
    let pe = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["code"] == "parse-error")
        .unwrap();
    assert_eq!(pe["line"], 11);
    assert!(
        pe["message"].as_str().unwrap().contains("line 1 column"),
        "{pe}"
    );
}

#[test]
fn huge_inputs_are_handled() {
    let tmp = tempfile::tempdir().unwrap();
    // A line of 10 MB: run_stop itself carries a 10 MB metadata field, so a
    // reader that dropped or cut the line would lose run_stop (FAIL), and
    // the record count below would be one short.
    let big_value = "x".repeat(10 * 1024 * 1024);
    let original = std::fs::read_to_string(corpus_log(PASS_LOG)).unwrap();
    let records = original
        .lines()
        .filter(|l| l.starts_with(":::MLLOG"))
        .count();
    let long = edited_log(tmp.path(), "long_line.txt", |l| {
        l.into_iter()
            .map(|line| {
                if line.contains(r#""key": "run_stop""#) {
                    line.replacen(
                        r#""metadata": {"#,
                        &format!(r#""metadata": {{"padding": "{big_value}", "#),
                        1,
                    )
                } else {
                    line
                }
            })
            .collect()
    });
    let text = std::fs::read_to_string(&long).unwrap();
    assert!(
        text.len() > 10 * 1024 * 1024,
        "the fixture holds the long line"
    );
    let o = referee(&["check", "--ruleset", "5.0.0", "--json", s(&long)]);
    no_panic(&o);
    assert_eq!(
        o.status.code(),
        Some(0),
        "run_stop with a 10 MB metadata value is read and the log passes: {}",
        stdout(&o)
    );
    let v: serde_json::Value = serde_json::from_str(stdout(&o).lines().next().unwrap()).unwrap();
    assert_eq!(v["verdict"], "PASS", "{v}");
    assert_eq!(
        v["records"], records as u64,
        "every line read, the long one too"
    );

    // A 1,000,000-line log.
    let path = tmp.path().join("million.txt");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    let base = std::fs::read_to_string(corpus_log(PASS_LOG)).unwrap();
    let lines: Vec<&str> = base.lines().collect();
    let (head, tail) = lines.split_at(lines.len() - 1);
    for l in head {
        writeln!(f, "{l}").unwrap();
    }
    for i in 0..(1_000_000 - lines.len()) {
        writeln!(f, r#":::MLLOG {{"time_ms": {i}, "key": "train_loss", "value": 0.5, "metadata": {{"samples_count": {i}}}}}"#).unwrap();
    }
    for l in tail {
        writeln!(f, "{l}").unwrap();
    }
    drop(f);
    let o = referee(&["check", "--ruleset", "5.0.0", "--json", s(&path)]);
    no_panic(&o);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let v: serde_json::Value = serde_json::from_str(stdout(&o).lines().next().unwrap()).unwrap();
    assert_eq!(v["records"], 1_000_000);
}

#[test]
fn two_runs_in_one_file_are_one_diagnostic() {
    let tmp = tempfile::tempdir().unwrap();
    let one = std::fs::read(corpus_log(PASS_LOG)).unwrap();
    let two = [one.clone(), one].concat();
    let p = write(tmp.path(), "result_0.txt", &two);
    let o = referee(&["check", "--ruleset", "5.0.0", "--json", s(&p)]);
    no_panic(&o);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_str(stdout(&o).lines().next().unwrap()).unwrap();
    let ds = v["diagnostics"].as_array().unwrap();
    assert_eq!(
        ds.len(),
        1,
        "one diagnostic instead of a list of symptoms: {ds:?}"
    );
    assert_eq!(ds[0]["code"], "concatenated-runs");
    assert_eq!(
        ds[0]["line"], 54,
        "the second run's init_start is on line 54"
    );
    assert!(ds[0]["message"].as_str().unwrap().contains("2 runs"));
    assert!(v["suppressed"].as_u64().unwrap() > 0);
}

#[test]
fn usage_errors_exit_2_with_a_clear_message() {
    let log = corpus_log(PASS_LOG);
    let o = referee(&["check", "--ruleset", "7.0.0", s(&log)]);
    no_panic(&o);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("unknown ruleset 7.0.0") && e.contains("5.0.0") && e.contains("6.1.0"),
        "{e}"
    );

    let o = referee(&[
        "check",
        "--ruleset",
        "5.0.0",
        "--rules-dir",
        "/nonexistent/rules",
        s(&log),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("/nonexistent/rules"), "{}", stderr(&o));

    let tmp = tempfile::tempdir().unwrap();
    let o = referee(&[
        "check",
        "--ruleset",
        "5.0.0",
        "--rules-dir",
        s(tmp.path()),
        s(&log),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("expected the mlperf_logging package directory"),
        "{}",
        stderr(&o)
    );

    let o = referee(&["check", "--ruleset", "5.0.0", "/nonexistent/result_0.txt"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("/nonexistent/result_0.txt"),
        "{}",
        stderr(&o)
    );

    // Without --ruleset, a log of an official benchmark cannot be judged.
    let o = referee(&["check", s(&log)]);
    no_panic(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(stdout(&o).contains("pass --ruleset"), "{}", stdout(&o));

    let o = referee(&["check"]);
    assert_eq!(o.status.code(), Some(2));
}
