//! The rule file of a referee benchmark, in the official YAML rule dialect,
//! generated from its declaration ([`crate::bench`]) so that targets,
//! cadence and hyperparameters are stated once. The file is self-contained
//! (no `enqueue_config`): the official checker runs it with
//! `python -m mlperf_logging.compliance_checker --config /abs/path/FILE LOG`,
//! and `referee check LOG` picks it by itself when the log's
//! `submission_benchmark` is a referee benchmark.
//!
//! Rules: the run lifecycle (cache_clear, init_start/init_stop within the
//! init budget — 30 min closed, 240 min open —, run_start, run_stop with a
//! status), one of each submission key, the seed (an integer), training and
//! evaluation set sizes, every logged hyperparameter (fixed ones must equal
//! the reference in the closed division), block and eval events with
//! `samples_count`, evaluations exactly on the declared cadence (the first
//! whole batch at or after k × E samples), and at least one evaluation that
//! meets the quality target.

use crate::bench::{Benchmark, BenchmarkSpec, Check, Direction, LoggedParam, MetricSpec, RULESET};
use serde_json::Value;

/// A JSON value as a Python literal.
fn py(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(b) => if *b { "True" } else { "False" }.into(),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.to_string()
            } else if let Some(u) = n.as_u64() {
                u.to_string()
            } else {
                format!("{:?}", n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Value::String(s) => format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'")),
        Value::Array(a) => format!("[{}]", a.iter().map(py).collect::<Vec<_>>().join(", ")),
        Value::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, x)| format!("'{k}': {}", py(x)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Escape Python text for a YAML double-quoted scalar.
fn yq(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

fn key(
    out: &mut String,
    name: &str,
    req: &str,
    checks: &[String],
    post: Option<&str>,
    at_least_one: Option<&str>,
) {
    let checks: Vec<String> = checks.iter().map(|c| yq(c)).collect();
    let post = post.map(yq);
    let at_least_one = at_least_one.map(yq);
    out.push_str(&format!("\n- KEY:\n    NAME: {name}\n    REQ: {req}\n"));
    match checks.len() {
        0 => {}
        1 => out.push_str(&format!("    CHECK: \" {} \"\n", checks[0])),
        _ => {
            out.push_str("    CHECK:\n");
            for c in checks {
                out.push_str(&format!("        - \" {c} \"\n"));
            }
        }
    }
    if let Some(p) = post {
        out.push_str(&format!("    POST: \" {p} \"\n"));
    }
    if let Some(a) = at_least_one {
        out.push_str(&format!("    ATLEAST_ONE_CHECK: \" {a} \"\n"));
    }
}

fn closed_only(test: &str) -> String {
    format!("({test}) if s['division'] == 'closed' else True")
}

fn param_check(p: &LoggedParam) -> Vec<String> {
    match &p.check {
        Check::Equals(v) => vec![closed_only(&format!("v['value'] == {}", py(v)))],
        Check::Positive => vec![format!("v['value'] > 0")],
        Check::NonNegative => vec![format!("v['value'] >= 0")],
        Check::Logged => vec!["'value' in v".into()],
    }
}

/// The rule file's relative path in referee's rule library.
pub fn rule_path(benchmark: &str) -> String {
    format!("{RULESET}/{benchmark}.yaml")
}

/// Generate the rule file of a benchmark (for its default configuration's
/// logged keys; values are checked as the declaration says).
pub fn rule_file(b: &dyn Benchmark) -> String {
    let mut out = String::new();
    begin_block(&mut out, b.spec());
    run_keys(&mut out, b.spec());
    hyperparameter_keys(&mut out, b);
    block_and_eval_keys(&mut out);
    metric_key(&mut out, &b.spec().metric);
    out
}

/// The header and the BEGIN block (the state every rule reads).
fn begin_block(out: &mut String, spec: &BenchmarkSpec) {
    out.push_str(&format!(
        "# referee rule file for `{}` (ruleset {RULESET}): {}.\n\
         # Generated from workloads/src/bench.rs by `referee rules export`; do not edit by hand.\n\
         # Self-contained: python -m mlperf_logging.compliance_checker --config /abs/path/{}.yaml LOG\n\
         \n- BEGIN:\n    CODE: >\n        s.update({{\n",
        spec.name, spec.summary, spec.name
    ));
    for (k, v) in [
        ("init_started", "False"),
        ("init_stopped", "False"),
        ("run_started", "False"),
        ("run_stopped", "False"),
        ("first_init_start", "9e99"),
        ("compile_time_mins", "0"),
        ("division", "''"),
        ("global_batch_size", "0"),
        ("evals", "1"),
    ] {
        out.push_str(&format!("            '{k}': {v},\n"));
    }
    out.push_str(&format!(
        "            'eval_every': {},\n        }})\n",
        spec.eval_every_samples
    ));
}

/// `submission_*`, `cache_clear`, the run's lifecycle, the seed and the
/// dataset sizes.
fn run_keys(out: &mut String, spec: &BenchmarkSpec) {
    let non_empty = ["v['value'] != ''".to_string()];
    key(out, "submission_org", "EXACTLY_ONE", &non_empty, None, None);
    key(
        out,
        "submission_platform",
        "EXACTLY_ONE",
        &non_empty,
        None,
        None,
    );
    key(
        out,
        "submission_division",
        "EXACTLY_ONE",
        &["v['value'] in ['closed', 'open']".into()],
        Some(
            "s['division'] = v['value']; s['compile_time_mins'] = 240 if v['value'] == 'open' else 30",
        ),
        None,
    );
    key(
        out,
        "submission_benchmark",
        "EXACTLY_ONE",
        &[format!("v['value'] == '{}'", spec.name)],
        None,
        None,
    );
    key(
        out,
        "cache_clear",
        "AT_LEAST_ONE",
        &["'value' in v".into()],
        None,
        None,
    );
    init_and_run_keys(out);
    key(
        out,
        "seed",
        "EXACTLY_ONE",
        &["is_integer(v['value'])".into()],
        None,
        None,
    );
    key(
        out,
        "train_samples",
        "EXACTLY_ONE",
        &[closed_only(&format!(
            "v['value'] == {}",
            spec.train_samples
        ))],
        None,
        None,
    );
    key(
        out,
        "eval_samples",
        "EXACTLY_ONE",
        &[closed_only(&format!("v['value'] == {}", spec.eval_samples))],
        None,
        None,
    );
}

/// `init_start`, `init_stop` (within the init budget), `run_start`,
/// `run_stop`.
fn init_and_run_keys(out: &mut String) {
    key(
        out,
        "init_start",
        "AT_LEAST_ONE",
        &[
            "not s['init_stopped']".into(),
            "not s['run_started']".into(),
        ],
        Some(
            "s['init_started'] = True; s['first_init_start'] = min(s['first_init_start'], ll.timestamp)",
        ),
        None,
    );
    key(
        out,
        "init_stop",
        "EXACTLY_ONE",
        &[
            "s['init_started']".into(),
            "not s['run_started']".into(),
            "ll.timestamp - s['first_init_start'] < (s['compile_time_mins'] * 60 * 1e3)".into(),
        ],
        Some("s['init_stopped'] = True"),
        None,
    );
    key(
        out,
        "run_start",
        "EXACTLY_ONE",
        &["s['init_stopped'] == True".into()],
        Some("s['run_started'] = True"),
        None,
    );
    key(
        out,
        "run_stop",
        "EXACTLY_ONE",
        &[
            "s['run_started']".into(),
            "'status' in v['metadata']".into(),
            "v['metadata']['status'] in ['success', 'aborted']".into(),
            "'samples_count' in v['metadata']".into(),
        ],
        Some("s['run_stopped'] = True"),
        None,
    );
}

/// Every logged hyperparameter, checked as the declaration says.
fn hyperparameter_keys(out: &mut String, b: &dyn Benchmark) {
    for p in b.logged_params(&b.default_config()) {
        let post = (p.key == "global_batch_size").then_some("s['global_batch_size'] = v['value']");
        key(out, p.key, "EXACTLY_ONE", &param_check(&p), post, None);
    }
}

/// Blocks and evaluations carry `samples_count`.
fn block_and_eval_keys(out: &mut String) {
    for k in ["block_start", "block_stop", "eval_start", "eval_stop"] {
        let mut checks = vec![
            "'samples_count' in v['metadata']".to_string(),
            "v['metadata']['samples_count'] >= 0".to_string(),
        ];
        if k == "block_start" {
            checks.insert(0, "s['run_started']".into());
        }
        key(out, k, "AT_LEAST_ONE", &checks, None, None);
    }
}

/// The quality metric: evaluated on the cadence, the target reached once.
fn metric_key(out: &mut String, m: &MetricSpec) {
    let target = match m.direction {
        Direction::HigherIsBetter => format!(
            "v['value'] >= {:?} and v['value'] <= {:?}",
            m.target, m.bound
        ),
        Direction::LowerIsBetter => format!(
            "v['value'] <= {:?} and v['value'] > {:?}",
            m.target, m.bound
        ),
    };
    key(
        out,
        m.key,
        "AT_LEAST_ONE",
        &[
            "'samples_count' in v['metadata']".into(),
            "v['metadata']['samples_count'] == s['global_batch_size'] * math.ceil(s['evals'] * s['eval_every'] / s['global_batch_size'])".into(),
        ],
        Some("s['evals'] += 1"),
        Some(&target),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::registry;

    #[test]
    fn python_literals() {
        assert_eq!(py(&serde_json::json!(1e-5)), "1e-5");
        assert_eq!(py(&serde_json::json!(0.95)), "0.95");
        assert_eq!(py(&serde_json::json!(16)), "16");
        assert_eq!(py(&serde_json::json!([1, 1, 1])), "[1, 1, 1]");
        assert_eq!(py(&serde_json::json!("it's")), "'it\\'s'");
        assert_eq!(py(&serde_json::json!(true)), "True");
    }

    #[test]
    fn rule_files_mention_every_logged_key_and_the_target() {
        for b in registry() {
            let text = rule_file(b);
            for p in b.logged_params(&b.default_config()) {
                assert!(
                    text.contains(&format!("NAME: {}\n", p.key)),
                    "{} misses {}",
                    b.spec().name,
                    p.key
                );
            }
            assert!(text.contains("ATLEAST_ONE_CHECK"));
            assert!(text.contains(&format!("{:?}", b.spec().metric.target)));
        }
    }
}
