//! Fixtures the crate's unit tests share: MLLOG lines, a toy benchmark and
//! RCP tables for it. Test-only; it knows nothing the rules do not.

use crate::ruleset_facts::{BenchmarkFacts, RulesetFacts};

/// One MLLOG line, newline included; `value` and `metadata` are JSON text.
pub(crate) fn mllog_line(
    time_ms: u64,
    event: &str,
    key: &str,
    value: &str,
    metadata: &str,
) -> String {
    format!(
        ":::MLLOG {{\"namespace\": \"\", \"time_ms\": {time_ms}, \"event_type\": \"{event}\", \"key\": \"{key}\", \"value\": {value}, \"metadata\": {metadata}}}\n"
    )
}

/// The facts of a toy benchmark `mini_toy` under ruleset `toy-1.0`: 5
/// runs, one dropped at each end.
pub(crate) fn toy_facts() -> RulesetFacts {
    RulesetFacts::official().with_benchmark(
        "toy-1.0",
        BenchmarkFacts {
            name: "mini_toy".into(),
            result_files: 5,
            max_dropped: 1,
            rcp_submission_runs: Some(5),
            converges_in_samples: true,
            rcp_samples_field: false,
        },
    )
}

/// RCP table JSON for `mini_toy`: `(name, BS, points)` per record.
pub(crate) fn table_json(records: &[(&str, f64, &[f64])]) -> String {
    let body: Vec<String> = records
        .iter()
        .map(|(name, bs, points)| {
            format!(
                r#""{name}": {{"Benchmark": "mini_toy", "BS": {bs}, "Epochs to converge": {points:?}}}"#
            )
        })
        .collect();
    format!("{{{}}}", body.join(", "))
}

/// RCP table JSON for `mini_toy` with one record `r<BS>` per `(BS, mean)`,
/// its three reference runs all at the mean.
pub(crate) fn flat_table_json(means: &[(f64, f64)]) -> String {
    let records: Vec<(String, f64, [f64; 3])> = means
        .iter()
        .map(|&(bs, m)| (format!("r{bs}"), bs, [m; 3]))
        .collect();
    let refs: Vec<(&str, f64, &[f64])> = records
        .iter()
        .map(|(name, bs, points)| (name.as_str(), *bs, points.as_slice()))
        .collect();
    table_json(&refs)
}

/// A table of means at batch sizes 4, 8, 16, 24, 32 and 40 shaped so that
/// the official pruning keeps 8, 24 and 40 and the lower convex envelope 8
/// and 40 (with `[12, 10, 11, 11.8, 20, 13]`, or the same scaled).
pub(crate) fn bumpy_table_json(means: [f64; 6]) -> String {
    let sizes = [4.0, 8.0, 16.0, 24.0, 32.0, 40.0];
    let pairs: Vec<(f64, f64)> = sizes.into_iter().zip(means).collect();
    flat_table_json(&pairs)
}
