//! Differential test: referee's compliance verdicts on every real log of the
//! MLPerf Training v5.0 results equal the official checker's.

use referee_rules::Verdict;
use referee_rules::checker::{Checker, RulesetChoice};
use referee_rules::compliance::CheckOptions;
use referee_rules::ruleset::RuleLibrary;
use referee_tests::{corpus_dir, mlperf_logging, read_tsv};
use std::sync::Arc;

/// The key an official message is about.
fn official_key(msg: &str) -> Option<String> {
    let quoted = |s: &str| s.split('\'').nth(1).map(str::to_string);
    if let Some(rest) = msg.strip_prefix("Failed checks for ") {
        return rest.split(" : ").next().map(str::to_string);
    }
    if msg.starts_with("CHECK for '") || msg.starts_with("Required ") {
        return quoted(msg);
    }
    None
}

#[test]
fn every_v5_0_log_gets_the_official_verdict() {
    let corpus = corpus_dir();
    let root = corpus.join("training_results_v5.0");
    let expected = read_tsv(&corpus.join("expected/v5.0.verdicts.tsv"));
    assert_eq!(expected.len(), 1717, "the corpus lists 1,717 logs");

    let lib = Arc::new(RuleLibrary::from_package(mlperf_logging()));
    let checker = Checker::new(lib, CheckOptions::default());
    let choice = RulesetChoice::Official {
        usage: "training".into(),
        version: "5.0.0".into(),
    };
    let paths: Vec<_> = expected.iter().map(|row| root.join(&row["path"])).collect();
    let reports = checker.check_files(&paths, &choice);

    let (mut pass, mut fail) = (0, 0);
    let mut mismatches = Vec::new();
    for (row, rep) in expected.iter().zip(reports) {
        let rep = rep.unwrap_or_else(|e| panic!("{e}"));
        let want = row["verdict"].as_str();
        match rep.verdict {
            Verdict::Pass => pass += 1,
            Verdict::Fail => fail += 1,
        }
        if rep.verdict.as_str() != want {
            mismatches.push(format!(
                "{}: referee {} official {want}",
                row["path"],
                rep.verdict.as_str()
            ));
            continue;
        }
        // Same number of errors and warnings as the official message store.
        let errors = rep.diagnostics.iter().filter(|d| d.is_error()).count();
        let warnings = rep.diagnostics.len() - errors;
        if errors.to_string() != row["n_errors"] || warnings.to_string() != row["n_warnings"] {
            mismatches.push(format!(
                "{}: referee {errors} errors/{warnings} warnings, official {}/{}",
                row["path"], row["n_errors"], row["n_warnings"]
            ));
        }
        if want == "FAIL" {
            let first = rep
                .diagnostics
                .iter()
                .find(|d| d.is_error())
                .expect("a failing log has an error");
            let want_key = official_key(&row["first_error"]);
            assert!(
                want_key.is_some(),
                "cannot read a key from {:?}",
                row["first_error"]
            );
            if first.key != want_key {
                mismatches.push(format!(
                    "{}: first diagnostic key {:?}, official first error about {want_key:?}",
                    row["path"], first.key
                ));
            }
            // The official wording is kept verbatim (the TSV joins lines with " | ").
            let official_first = first
                .official
                .clone()
                .unwrap_or_default()
                .replace('\n', " | ");
            let tsv = &row["first_error"];
            if !official_first.starts_with(tsv.as_str()) && !tsv.starts_with(&official_first) {
                mismatches.push(format!(
                    "{}: official text {official_first:?} vs {tsv:?}",
                    row["path"]
                ));
            }
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
    assert_eq!((pass, fail), (1707, 10));
}
