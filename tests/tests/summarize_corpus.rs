//! Differential test: `referee summarize` reproduces every published score
//! row of MLPerf Training v5.0 (the official result summarizer's output).

use referee_rules::score::summarize;
use referee_tests::{corpus_dir, csv_fields, official_score_context, read_tsv};
use std::collections::HashMap;

fn num(s: &str) -> Option<f64> {
    if s.is_empty() {
        None
    } else {
        Some(s.parse().unwrap_or_else(|_| panic!("not a number: {s:?}")))
    }
}

#[test]
fn every_v5_0_score_row_is_reproduced() {
    let corpus = corpus_dir();
    let ctx = official_score_context("5.0.0");
    let orgs = referee_rules::layout::find_orgs(&[corpus.join("training_results_v5.0")]).unwrap();
    assert_eq!(orgs.len(), 19);
    let (rows, problems) = summarize(&ctx, &orgs, &|| {});
    assert!(problems.is_empty(), "{problems:?}");

    let expected = read_tsv(&corpus.join("expected/v5.0.scores.tsv"));
    assert_eq!(expected.len(), 201);
    // Key: submitter, system JSON stem, benchmark. (The TSV's system_json
    // path starts with the submitter's name, which may differ from its
    // folder name: "CoreWeave + IBM + NVIDIA" lives in IBM+CoreWeave+NVIDIA/.)
    let ours: HashMap<(String, String, String), _> = rows
        .iter()
        .map(|r| {
            (
                (
                    r.submitter.clone(),
                    r.system.clone(),
                    r.score.benchmark.clone(),
                ),
                r,
            )
        })
        .collect();
    let mut mismatches = Vec::new();
    for e in &expected {
        let stem = e["system_json"]
            .rsplit('/')
            .next()
            .unwrap()
            .trim_end_matches(".json")
            .to_string();
        let key = (e["submitter"].clone(), stem, e["benchmark"].clone());
        let Some(r) = ours.get(&key) else {
            mismatches.push(format!("{key:?}: no row"));
            continue;
        };
        let s = &r.score;
        let want_score = num(&e["score_minutes"]);
        match (s.score_minutes, want_score) {
            (Some(a), Some(b)) if (a - b).abs() <= 1e-6 => {}
            (None, None) => {}
            (a, b) => mismatches.push(format!("{key:?}: score {a:?} vs {b:?}")),
        }
        if s.rcp.as_deref().unwrap_or("") != e["RCP"] {
            mismatches.push(format!("{key:?}: RCP {:?} vs {:?}", s.rcp, e["RCP"]));
        }
        let f = num(&e["rcp_scaling_factor"]).unwrap_or(1.0);
        if (s.scaling_factor - f).abs() > 1e-12 {
            mismatches.push(format!("{key:?}: scaling {} vs {f}", s.scaling_factor));
        }
        if s.global_batch_size != num(&e["GBS"]) {
            mismatches.push(format!(
                "{key:?}: GBS {:?} vs {:?}",
                s.global_batch_size, e["GBS"]
            ));
        }
        match (s.samples_to_converge, num(&e["samples_to_converge"])) {
            (Some(a), Some(b)) if (a - b).abs() <= 1e-9 * b.abs().max(1.0) => {}
            (None, None) => {}
            (a, b) => mismatches.push(format!("{key:?}: samples {a:?} vs {b:?}")),
        }
        if r.system_name != e["system"] || r.submitter != e["submitter"] {
            mismatches.push(format!(
                "{key:?}: names {:?}/{:?}",
                r.submitter, r.system_name
            ));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
    assert_eq!(rows.len(), 201, "one row per system × benchmark");

    // Energy, where power logs exist, equals the official detailed summary.
    let detailed =
        std::fs::read_to_string(corpus.join("expected/v5.0.summary_detailed.csv")).unwrap();
    let mut lines = detailed.lines();
    let header = csv_fields(lines.next().unwrap());
    let mut energies = 0;
    for l in lines {
        let cells = csv_fields(l);
        for (i, h) in header.iter().enumerate() {
            if let Some(b) = h.strip_suffix(":Energy") {
                let v = cells.get(i).map(String::as_str).unwrap_or("");
                if v.is_empty() {
                    continue;
                }
                let want: f64 = v.parse().unwrap();
                let row = rows
                    .iter()
                    .find(|r| {
                        r.score.benchmark == b
                            && r.system_name == cells[3]
                            && r.submitter == cells[2]
                    })
                    .unwrap_or_else(|| panic!("no row for energy of {} {b}", cells[3]));
                let got = row.score.energy.unwrap_or_else(|| {
                    panic!(
                        "energy not computed: {}",
                        serde_json::to_string(&row.score).unwrap()
                    )
                });
                assert!(
                    (got - want).abs() <= 1e-9 * want,
                    "{} {b}: energy {got} vs {want}",
                    cells[3]
                );
                energies += 1;
            }
        }
    }
    assert_eq!(energies, 4, "the four Lenovo power submissions");
}
