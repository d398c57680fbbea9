//! `referee summarize` output forms and exit codes.

use referee_tests::{corpus_dir, referee, stderr, stdout};

#[test]
fn output_forms() {
    let org = corpus_dir().join("training_results_v5.0/AMD");
    let org = org.to_str().unwrap();

    let json = referee(&["summarize", "--ruleset", "5.0.0", "--json", org]);
    assert_eq!(json.status.code(), Some(0), "{}", stderr(&json));
    let rows: Vec<serde_json::Value> = stdout(&json)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 2);
    for r in &rows {
        for field in [
            "submitter",
            "system",
            "benchmark",
            "score_minutes",
            "rcp",
            "scaling_factor",
            "global_batch_size",
            "samples_to_converge",
        ] {
            assert!(r.get(field).is_some(), "missing {field} in {r}");
        }
        assert_eq!(r["submitter"], "AMD");
        assert_eq!(r["benchmark"], "llama2_70b_lora");
        assert_eq!(r["rcp"], "Pass");
        assert!(r["score_minutes"].as_f64().unwrap() > 0.0);
    }
    let mi325 = rows
        .iter()
        .find(|r| r["system"] == "MI325X_EPYC_9575F_pytorch")
        .unwrap();
    // Published: 22.036588 minutes, scaling 1.0511463844797178, GBS 8, 3024 samples.
    assert!((mi325["score_minutes"].as_f64().unwrap() - 22.036588).abs() < 1e-6);
    assert_eq!(mi325["scaling_factor"], 1.0511463844797178);
    assert_eq!(mi325["global_batch_size"], 8.0);
    assert_eq!(mi325["samples_to_converge"], 3024.0);

    let csv = referee(&["summarize", "--ruleset", "5.0.0", "--csv", org]);
    let out = stdout(&csv);
    let mut lines = out.lines();
    assert!(
        lines
            .next()
            .unwrap()
            .starts_with("submitter,system,benchmark,runs,dropped,score_minutes,rcp")
    );
    assert_eq!(lines.count(), 2);

    let md = referee(&["summarize", "--ruleset", "5.0.0", "--markdown", org]);
    assert!(
        stdout(&md).starts_with("| submitter | system | benchmark |"),
        "{}",
        stdout(&md)
    );
    assert_eq!(stdout(&md).lines().count(), 4);

    let table = referee(&["summarize", "--ruleset", "5.0.0", org]);
    assert!(stdout(&table).contains("22.037"), "{}", stdout(&table));
    assert!(stderr(&table).contains("2 rows"), "{}", stderr(&table));

    // The ruleset is read from the path when not given.
    let inferred = referee(&["summarize", "--json", org]);
    assert_eq!(inferred.status.code(), Some(0), "{}", stderr(&inferred));
    assert!(stderr(&inferred).contains("read from the path"));

    let bad = referee(&["summarize", "--ruleset", "5.0.0", "/nonexistent"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("/nonexistent"));
}
