//! Policy checks of one log: keys that look like misspellings of keys the
//! rules read ([`super::KEY_SPELLING`]), result files that hold only MLLOG
//! lines where the full framework output is required
//! ([`super::FULL_OUTPUT`]); and what the result-set checks need from each
//! log, its [`Disclosed`] configuration.

use super::{FULL_OUTPUT, KEY_SPELLING, at_least};
use crate::diag::Diagnostic;
use crate::mllog::ParsedLog;
use crate::ruleset::RuleLibrary;
use std::collections::{BTreeMap, HashMap};

/// The keys a run discloses its configuration with (mandatory from ruleset
/// 6.1.0: training_policies #592).
pub const DISCLOSURE_KEYS: [&str; 9] = [
    "lowest_numerical_precision_in_linear",
    "lowest_numerical_precision_in_attn",
    "lowest_numerical_precision_in_comm",
    "tensor_parallelism",
    "pipeline_parallelism",
    "context_parallelism",
    "expert_parallelism",
    "micro_batch_size",
    "config_filename",
];

/// What one log disclosed: each disclosure key's first value (as logged,
/// strings without quotes) and its 1-based line.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Disclosed {
    pub values: BTreeMap<String, (String, usize)>,
    /// The first `submission_org` value and its line.
    pub org: Option<(String, usize)>,
}

/// The log and the rules it was checked against.
pub struct LogContext<'a> {
    pub lib: &'a RuleLibrary,
    /// The log's path as reports show it.
    pub display: &'a str,
    /// `training` or `hpc` for an official ruleset; `None` otherwise.
    pub usage: Option<&'a str>,
    /// The ruleset version (e.g. `6.1.0`).
    pub ruleset: Option<&'a str>,
    /// The rule files the check ran (relative, e.g.
    /// `training_6.1.0/closed_llama31_8b.yaml`).
    pub rule_files: &'a [String],
}

/// The policy findings of one log and its disclosure.
pub fn check_log(ctx: &LogContext, parsed: &ParsedLog) -> (Vec<Diagnostic>, Disclosed) {
    let mut findings = Vec::new();
    full_output(ctx, parsed, &mut findings);
    spelling(ctx, parsed, &mut findings);
    (findings, disclosed(parsed))
}

fn disclosed(parsed: &ParsedLog) -> Disclosed {
    let mut d = Disclosed::default();
    for r in parsed.records.iter().filter(|r| r.index >= 0) {
        let k = r.key();
        if k == "submission_org" && d.org.is_none() {
            let v = r.full_v();
            let value = v.get("value").cloned().unwrap_or_default();
            let shown = match value.as_str() {
                Some(s) => s.to_string(),
                None => value.json_compact(),
            };
            d.org = Some((shown, r.line));
        }
        if DISCLOSURE_KEYS.contains(&k) && !d.values.contains_key(k) {
            let v = r.full_v();
            let value = v.get("value").cloned().unwrap_or_default();
            let shown = match value.as_str() {
                Some(s) => s.to_string(),
                None => value.json_compact(),
            };
            d.values.insert(k.to_string(), (shown, r.line));
        }
    }
    d
}

/// From ruleset 6.1.0 (training), a result file with no line but MLLOG
/// lines does not hold the framework's output.
fn full_output(ctx: &LogContext, parsed: &ParsedLog, out: &mut Vec<Diagnostic>) {
    let applies =
        ctx.usage == Some("training") && ctx.ruleset.is_some_and(|r| at_least(r, (6, 1, 0)));
    if !applies || parsed.lines == 0 || parsed.lines > parsed.mllog_lines {
        return;
    }
    out.push(
        FULL_OUTPUT
            .finding(format!(
                "the result file holds only MLLOG lines ({} of {} lines): the full framework output is required",
                parsed.mllog_lines, parsed.lines
            ))
            .file(ctx.display)
            .expected("the framework's whole output with every MLLOG line (paths and environment may be redacted; truncated past 100 MiB)")
            .found("MLLOG lines only"),
    );
}

/// Keys no rule file of the ruleset reads (nor the logging library
/// defines) that look like a key the log's rules read and the log lacks:
/// one or two letters off, words swapped, or a word dropped.
fn spelling(ctx: &LogContext, parsed: &ParsedLog, out: &mut Vec<Diagnostic>) {
    let Some(first) = ctx.rule_files.first() else {
        return;
    };
    let dir = first.split('/').next().unwrap_or_default();
    let universe = ctx.lib.key_universe(dir);
    let defined = ctx.lib.logging_constants();
    // Every key the log carries (whether a record of the log's own, index
    // ≥ 0, carries it), and the log's own keys in the order they first
    // appear, with that line: one look-up per record.
    let mut logged: HashMap<&str, bool> = HashMap::new();
    let mut order: Vec<(&str, usize)> = Vec::new();
    for r in &parsed.records {
        let (k, own) = (r.key(), r.index >= 0);
        let known = logged.entry(k).or_insert(false);
        if own && !*known {
            *known = true;
            order.push((k, r.line));
        }
    }
    // The keys the log's own rule files read, in rule-file order: made at
    // the first key no rule reads (most logs have none).
    let mut read: Option<Vec<(String, String)>> = None;
    for (k, line) in order {
        if k.is_empty()
            || universe.contains(k)
            || defined.contains(k)
            || crate::lifecycle::key_role(k).is_some()
        {
            continue;
        }
        let read = read.get_or_insert_with(|| {
            let mut read: Vec<(String, String)> = Vec::new();
            for rel in ctx.rule_files {
                if let Ok(f) = ctx.lib.load(rel) {
                    for k in f.keys.keys() {
                        if !read.iter().any(|(r, _)| r == k) {
                            read.push((k.clone(), rel.clone()));
                        }
                    }
                }
            }
            read
        });
        let Some((intended, rel, how)) = read
            .iter()
            .filter(|(j, _)| !logged.contains_key(j.as_str()))
            .find_map(|(j, rel)| looks_like(k, j).map(|how| (j, rel, how)))
        else {
            continue;
        };
        out.push(
            KEY_SPELLING
                .finding(format!(
                    "logged key `{k}` is read by no rule; it looks like `{intended}` ({how}), which {rel} reads and the log does not carry: a misspelt key is a key silently not disclosed"
                ))
                .file(ctx.display)
                .line(line)
                .key(k)
                .expected(format!("`{intended}`"))
                .found(format!("`{k}`")),
        );
    }
}

/// How `logged` resembles `intended`, if it does: an edit distance of one
/// (two for keys of 8 characters or more; a transposition counts as one),
/// the same words in another order, or one word dropped.
pub fn looks_like(logged: &str, intended: &str) -> Option<&'static str> {
    if logged == intended {
        return None;
    }
    let limit = if intended.len() >= 8 { 2 } else { 1 };
    if strsim::osa_distance(logged, intended) <= limit {
        return Some("a letter or two off");
    }
    let lw: Vec<&str> = logged.split('_').collect();
    let iw: Vec<&str> = intended.split('_').collect();
    let (mut ls, mut is) = (lw.clone(), iw.clone());
    ls.sort_unstable();
    is.sort_unstable();
    if ls == is {
        return Some("words swapped");
    }
    if lw.len() + 1 == iw.len()
        && (0..iw.len()).any(|i| {
            iw.iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, w)| *w)
                .eq(lw.iter().copied())
        })
    {
        return Some("a word dropped");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn misspellings_swaps_and_dropped_words_look_like_the_intended_key() {
        assert_eq!(
            looks_like("opt_base_learning_rte", "opt_base_learning_rate"),
            Some("a letter or two off")
        );
        assert_eq!(
            looks_like("opt_base_learnign_rate", "opt_base_learning_rate"),
            Some("a letter or two off")
        );
        assert_eq!(
            looks_like("learning_rate_opt_base", "opt_base_learning_rate"),
            Some("words swapped")
        );
        assert_eq!(
            looks_like("opt_learning_rate", "opt_base_learning_rate"),
            Some("a word dropped")
        );
        // Different keys are not misspellings of each other.
        assert_eq!(looks_like("seed", "eval_samples"), None);
        assert_eq!(
            looks_like("opt_base_learning_rate", "opt_base_learning_rate"),
            None
        );
        assert_eq!(
            looks_like("gradient_accumulation_steps", "global_batch_size"),
            None
        );
        // Short keys allow one letter only.
        assert_eq!(looks_like("sead", "seed"), Some("a letter or two off"));
        assert_eq!(looks_like("sxad", "seed"), None);
    }
}
