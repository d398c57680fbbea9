//! referee's own benchmarks as the checking side sees them: their rule
//! files (generated from the declarations), RCP tables and olympic facts,
//! registered next to the official rules.

use referee_rules::checker::Checker;
use referee_rules::ruleset::RuleLibrary;
use referee_rules::ruleset_facts::{BenchmarkFacts, RulesetFacts};
use referee_rules::score::ScoreContext;
use referee_workloads::bench::{self, Benchmark, RULESET};
use referee_workloads::rulegen;
use std::collections::HashMap;

/// A name that is none of referee's benchmarks (nor of its datasets).
#[derive(Debug, thiserror::Error)]
pub enum UnknownName {
    #[error("unknown benchmark `{name}`; referee runs: {}", .known.join(", "))]
    Benchmark {
        name: String,
        known: Vec<&'static str>,
    },
    /// `referee data NAME`: neither a dataset nor a benchmark.
    #[error(
        "unknown dataset or benchmark `{name}`; datasets: {}; benchmarks: {}",
        .datasets.join(", "),
        .benchmarks.join(", ")
    )]
    Dataset {
        name: String,
        datasets: &'static [&'static str],
        benchmarks: Vec<&'static str>,
    },
}

/// Names of referee's benchmarks.
pub fn benchmark_names() -> Vec<&'static str> {
    bench::registry().iter().map(|b| b.spec().name).collect()
}

/// The datasets of a referee benchmark.
pub fn benchmark_datasets(name: &str) -> Option<&'static [&'static str]> {
    bench::find(name).map(|b| b.spec().datasets)
}

/// The datasets a name stands for: itself (a dataset), or a benchmark's
/// datasets.
pub fn datasets_named(name: &str) -> Result<Vec<String>, UnknownName> {
    let datasets = referee_datasets::dataset_names();
    if datasets.contains(&name) {
        return Ok(vec![name.to_string()]);
    }
    if let Some(ds) = benchmark_datasets(name) {
        return Ok(ds.iter().map(|s| s.to_string()).collect());
    }
    Err(UnknownName::Dataset {
        name: name.to_string(),
        datasets,
        benchmarks: benchmark_names(),
    })
}

/// Add referee's rule files to a rule library.
pub fn register_rules(lib: &mut RuleLibrary) {
    for b in bench::registry() {
        lib.add_embedded(rulegen::rule_path(b.spec().name), rulegen::rule_file(b));
    }
}

/// Tell a checker which benchmarks are referee's (for automatic ruleset choice).
pub fn register_own(checker: &mut Checker) {
    for b in bench::registry() {
        let name = b.spec().name;
        checker.own.insert(
            name.to_string(),
            (RULESET.to_string(), rulegen::rule_path(name)),
        );
    }
}

/// The olympic and RCP facts of referee's benchmarks.
pub fn ruleset_facts() -> RulesetFacts {
    let mut m = RulesetFacts::official();
    for b in bench::registry() {
        let s = b.spec();
        m = m.with_benchmark(
            RULESET,
            BenchmarkFacts {
                name: s.name.to_string(),
                result_files: s.runs,
                max_dropped: 1,
                rcp_submission_runs: Some(s.runs),
                converges_in_samples: true,
                rcp_samples_field: false,
            },
        );
    }
    m
}

/// A rule library with only referee's own rules, and a checker on it.
pub fn own_checker() -> Checker {
    let mut lib = RuleLibrary::embedded_only();
    register_rules(&mut lib);
    let mut c = Checker::new(std::sync::Arc::new(lib), Default::default());
    register_own(&mut c);
    c
}

/// Scoring context for referee's ruleset (compliance with referee's rule
/// files, RCP tables shipped in the repository).
pub fn own_score_context() -> ScoreContext {
    let checker = std::sync::Arc::new(own_checker());
    let mut ctx = ScoreContext::new(checker, "training", RULESET, ruleset_facts(), None);
    ctx.rcp_json = rcp_tables();
    ctx.choice = referee_rules::checker::RulesetChoice::Auto;
    ctx
}

/// RCP JSON text per referee benchmark.
pub fn rcp_tables() -> HashMap<String, String> {
    bench::registry()
        .iter()
        .map(|b| (b.spec().name.to_string(), b.rcp_json().to_string()))
        .collect()
}

/// Look up a referee benchmark.
pub fn find(name: &str) -> Option<&'static dyn Benchmark> {
    bench::find(name)
}

/// A referee benchmark by name, or the usage error that lists the known ones.
pub fn find_or_err(name: &str) -> Result<&'static dyn Benchmark, UnknownName> {
    find(name).ok_or_else(|| UnknownName::Benchmark {
        name: name.to_string(),
        known: benchmark_names(),
    })
}
