//! Reports that cannot be made to lie (issue 72, class 6): names and text
//! from a package reach a terminal, a Markdown report and a spreadsheet
//! only as text. Each test is an attack that worked against ed35b4b: a log
//! named with a carriage return and cursor escapes drew a forged PASS line
//! and summary; a file name ended a Markdown table row and added HTML; a
//! submitter named `=HYPERLINK(…)` became a live formula; audit.md took a
//! Verdict heading from a file name.

use referee_tests::{copy_tree, corpus_dir, csv_fields, keygen, referee, sign, stderr, stdout};
use std::path::{Path, PathBuf};

/// What a terminal would act on: control characters (line feeds aside),
/// C1 controls, bidirectional overrides and isolates.
fn raw_controls(s: &str) -> Vec<char> {
    s.chars()
        .filter(|&c| {
            (c.is_control() && c != '\n')
                || ('\u{202a}'..='\u{202e}').contains(&c)
                || ('\u{2066}'..='\u{2069}').contains(&c)
        })
        .collect()
}

fn assert_no_raw_controls(what: &str, o: &std::process::Output) {
    for (stream, text) in [("stdout", stdout(o)), ("stderr", stderr(o))] {
        let found = raw_controls(&text);
        assert!(
            found.is_empty(),
            "{what}: {stream} holds raw {found:?}:\n{text}"
        );
    }
    assert!(!stderr(o).contains("panicked"), "{what}: {}", stderr(o));
}

/// Does Markdown `md` hold `c` unescaped (not after an odd run of
/// backslashes), where a renderer would read it as markup?
fn unescaped(md: &str, c: char) -> bool {
    let chars: Vec<char> = md.chars().collect();
    (0..chars.len()).any(|i| {
        chars[i] == c && chars[..i].iter().rev().take_while(|&&b| b == '\\').count() % 2 == 0
    })
}

/// The closing summary lines of `check`'s human form.
fn summaries(out: &str) -> Vec<&str> {
    out.lines()
        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()) && l.contains(" checked with "))
        .collect()
}

/// A toy log: one MLLOG line (it fails the 5.0.0 rules).
fn toy_log(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(
        &p,
        ":::MLLOG {\"namespace\": \"\", \"time_ms\": 1, \"event_type\": \"INTERVAL_START\", \"key\": \"init_start\", \"value\": null, \"metadata\": {\"file\": \"t.py\", \"lineno\": 1}}\n",
    )
    .unwrap();
    p
}

/// A file name that, printed raw, erases its line, draws a PASS line and
/// a passing summary, and hides the rest.
const FORGED_PASS: &str = "result_\r\x1b[2K\x1b[1APASS result_0.txt\n1 log checked with training 5.0.0 rules: 1 PASS, 0 FAIL (0.01 s, 2 threads)\x1b[8m.txt";

#[test]
fn check_shows_a_forged_pass_line_in_a_file_name_as_text() {
    let tmp = tempfile::tempdir().unwrap();
    toy_log(tmp.path(), FORGED_PASS);
    let dir = tmp.path().to_str().unwrap();

    let o = referee(&["check", "--ruleset", "5.0.0", dir]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with("FAIL "), "{out}");
    assert!(!out.lines().any(|l| l.starts_with("PASS")), "{out}");
    // One summary: the real one, last.
    let closing = summaries(&out);
    assert_eq!(closing.len(), 1, "{out}");
    assert!(closing[0].contains(": 0 PASS, 1 FAIL"), "{out}");
    assert_eq!(out.lines().last(), Some(closing[0]), "{out}");
    assert_no_raw_controls("check", &o);
    // What the name holds is still there to read.
    assert!(out.contains("result_\\r\\x1b[2K\\x1b[1APASS"), "{out}");

    // JSON Lines stay the exact name, as serde_json escapes it: no raw
    // C0 control (DEL, C1 controls and bidi overrides are valid JSON text
    // and stay as they are).
    let o = referee(&["check", "--ruleset", "5.0.0", "--json", dir]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let json = stdout(&o);
    assert!(!json.contains(['\r', '\x1b']), "{json:?}");
    let v: serde_json::Value = serde_json::from_str(json.lines().next().unwrap()).unwrap();
    assert_eq!(
        v["path"].as_str().unwrap(),
        tmp.path().join(FORGED_PASS).to_str().unwrap()
    );

    // A log that cannot be checked (no ruleset named): the ERROR line.
    let o = referee(&["check", dir]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_no_raw_controls("check (not checked)", &o);
    assert_eq!(summaries(&stdout(&o)).len(), 1, "{}", stdout(&o));

    // An error that quotes the path it was given.
    let missing = tmp.path().join("gone\x1b[2J\rPASS");
    let o = referee(&["check", missing.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert_no_raw_controls("check (usage error)", &o);
    assert!(stderr(&o).contains("gone\\x1b[2J\\rPASS"), "{}", stderr(&o));
}

#[test]
fn check_markdown_keeps_a_hostile_file_name_in_its_table_cell() {
    let tmp = tempfile::tempdir().unwrap();
    toy_log(tmp.path(), "result_a|b<script>.txt");
    toy_log(
        tmp.path(),
        "result_x|y\r# All logs PASS\r<img src=http:evil.example>.txt",
    );
    let o = referee(&[
        "check",
        "--ruleset",
        "5.0.0",
        "--markdown",
        tmp.path().to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let md = stdout(&o);
    assert!(!unescaped(&md, '<'), "{md}");
    // Markdown ends a line at a carriage return too.
    let lines: Vec<&str> = md.split(['\r', '\n']).collect();
    // The only level-1 heading is the report's own.
    let h1: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.starts_with("# "))
        .collect();
    assert_eq!(h1, ["# Compliance check"], "{md}");
    // Every row of the table has its four cells: five borders that are not
    // escaped.
    let rows: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.starts_with("| ") && l.contains("result_"))
        .collect();
    assert_eq!(rows.len(), 2, "{md}");
    for r in rows {
        assert_eq!(r.replace("\\|", "").matches('|').count(), 5, "{r}");
    }
    assert_no_raw_controls("check --markdown", &o);
}

/// A copy of the AMD v5.0 package (two systems, llama2_70b_lora) as
/// `root/ORG`, its first system's description naming `submitter` and
/// `system_name`, its second system renamed `system`.
fn hostile_package(
    root: &Path,
    org: &str,
    submitter: &str,
    system_name: &str,
    system: &str,
) -> PathBuf {
    let dest = root.join(org);
    copy_tree(&corpus_dir().join("training_results_v5.0/AMD"), &dest);
    let desc = dest.join("systems/MI300X_EPYC_9575F_pytorch.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&desc).unwrap()).unwrap();
    v["submitter"] = submitter.into();
    v["system_name"] = system_name.into();
    std::fs::write(&desc, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    let old = "MI325X_EPYC_9575F_pytorch";
    std::fs::rename(
        dest.join("results").join(old),
        dest.join("results").join(system),
    )
    .unwrap();
    std::fs::rename(
        dest.join("systems").join(format!("{old}.json")),
        dest.join("systems").join(format!("{system}.json")),
    )
    .unwrap();
    dest
}

#[test]
fn summarize_csv_writes_formulas_as_text_and_no_printer_passes_escapes() {
    let tmp = tempfile::tempdir().unwrap();
    let formula = "=HYPERLINK(\"http://evil.example\",\"x\")";
    let org = hostile_package(
        tmp.path(),
        "=HYPERLINK(\"evil\")\x1b[2J",
        formula,
        "@SUM(1)",
        "MI325X\r\x1b[1APASS <img src=x onerror=alert(1)>",
    );
    let org = org.to_str().unwrap();

    let o = referee(&["summarize", "--ruleset", "5.0.0", "--csv", org]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let csv = stdout(&o);
    let rows: Vec<Vec<String>> = csv.lines().skip(1).map(csv_fields).collect();
    assert_eq!(rows.len(), 2, "{csv}");
    let header: Vec<String> = csv_fields(csv.lines().next().unwrap());
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let first = rows
        .iter()
        .find(|r| r[col("system")] == "MI300X_EPYC_9575F_pytorch")
        .expect("the first system's row");
    assert_eq!(first[col("submitter")], format!("'{formula}"), "{csv}");
    assert_eq!(first[col("system_name")], "'@SUM(1)", "{csv}");
    // The numbers stay numbers.
    assert!(first[col("score_minutes")].parse::<f64>().is_ok(), "{csv}");
    // No field of any row starts a formula.
    for r in &rows {
        for f in r {
            assert!(!f.starts_with(['=', '+', '@']), "{f:?} in {csv}");
        }
    }
    assert_no_raw_controls("summarize --csv", &o);

    let rcp_dirs: Vec<String> = std::fs::read_dir(Path::new(org).join("results"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("llama2_70b_lora").display().to_string())
        .collect();
    let mut rcp = vec!["rcp", "--ruleset", "5.0.0", "-v"];
    rcp.extend(rcp_dirs.iter().map(String::as_str));
    for args in [
        vec!["summarize", "--ruleset", "5.0.0", org],
        vec!["summarize", "--ruleset", "5.0.0", "--markdown", org],
        vec!["package-check", "--ruleset", "5.0.0", org],
        vec!["package-check", "--ruleset", "5.0.0", "--markdown", org],
        rcp,
    ] {
        let o = referee(&args);
        assert!(o.status.code().is_some(), "{args:?}");
        assert_no_raw_controls(&args.join(" "), &o);
        if args.contains(&"--markdown") {
            assert!(!unescaped(&stdout(&o), '<'), "{args:?}: {}", stdout(&o));
        }
    }
}

/// A signing key and an allowed_signers file that trusts it as AMD's.
fn trusted_key(root: &Path) -> (PathBuf, PathBuf) {
    let key = root.join("key");
    let (_, allowed) = keygen(&key);
    let signers = root.join("allowed_signers");
    let key_part = allowed.split_once(' ').unwrap().1;
    std::fs::write(&signers, format!("AMD {key_part}\n")).unwrap();
    (key, signers)
}

/// Names the manifest can hold (no control character) reach the package
/// check and its section of audit.md, and its table of steps.
#[test]
fn audit_md_takes_no_markup_from_the_names_of_a_signed_package() {
    let tmp = tempfile::tempdir().unwrap();
    let (key, signers) = trusted_key(tmp.path());
    let org = hostile_package(
        &tmp.path().join("listed"),
        "AMD",
        "AMD",
        "x | # Verdict <img src=x onerror=alert(1)>",
        "MI325X <img src=x onerror=alert(1)> **PASS** `x",
    );
    sign(&org, &key);
    let out = tmp.path().join("audit-listed");
    let o = referee(&[
        "audit",
        org.to_str().unwrap(),
        "--ruleset",
        "5.0.0",
        "--allowed-signers",
        signers.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    let md = std::fs::read_to_string(out.join("audit.md")).unwrap();
    assert!(
        md.contains("MI325X"),
        "the package check names the system: {md}"
    );
    assert!(!unescaped(&md, '<'), "{md}");
    assert_eq!(md.matches("## Verdict").count(), 1, "{md}");
    assert!(!md.contains("**PASS**"), "{md}");
    assert_no_raw_controls("audit", &o);
}

/// Names the manifest cannot hold (control characters): verify names
/// them, and audit.md lists them under the signature.
#[test]
fn verify_and_audit_md_show_unlisted_hostile_names_as_text() {
    let tmp = tempfile::tempdir().unwrap();
    let (key, signers) = trusted_key(tmp.path());
    let heading = "\n# Verdict\n\n**PASS**\n";
    let org = hostile_package(
        &tmp.path().join("unlisted"),
        "AMD",
        "AMD",
        "AMD",
        "MI325X_EPYC_9575F_pytorch",
    );
    sign(&org, &key);
    std::fs::write(
        org.join(format!("x{heading}<img src=x>\r\x1b[2J\u{202e}.txt")),
        "",
    )
    .unwrap();
    let o = referee(&["verify", org.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    // One problem line and the verdict: no line of the name's own.
    assert_eq!(stdout(&o).lines().count(), 2, "{}", stdout(&o));
    assert_no_raw_controls("verify", &o);
    let out = tmp.path().join("audit-unlisted");
    let o = referee(&[
        "audit",
        org.to_str().unwrap(),
        "--ruleset",
        "5.0.0",
        "--allowed-signers",
        signers.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    let md = std::fs::read_to_string(out.join("audit.md")).unwrap();
    assert!(md.contains("bad file name"), "{md}");
    let lines: Vec<&str> = md.split(['\r', '\n']).collect();
    assert!(!lines.iter().any(|l| l.starts_with("# Verdict")), "{md}");
    assert!(!lines.contains(&"**PASS**"), "{md}");
    assert!(!unescaped(&md, '<'), "{md}");
    assert!(raw_controls(&md).is_empty(), "{md:?}");
    assert_no_raw_controls("audit (unverified)", &o);
}

#[test]
fn perf_shows_a_hostile_log_name_as_text() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("run\r\x1b[2K\x1b[1Acomplete\u{202e}.out");
    std::fs::copy(
        referee_tests::repo_root().join("tests/fixtures/perf/megatron/complete.out"),
        &log,
    )
    .unwrap();
    let log = log.to_str().unwrap();
    for args in [
        vec!["perf", "--gpu", "H100", log],
        vec!["perf", "--gpu", "H100", "--markdown", log],
        vec!["perf", "--gpu", "H100", "--csv", log],
    ] {
        let o = referee(&args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        assert_no_raw_controls(&args.join(" "), &o);
    }
}
