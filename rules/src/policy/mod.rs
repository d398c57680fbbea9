//! Policy findings: rules of MLPerf Training that the official tools leave
//! unchecked, kept apart from the official verdict.
//!
//! Owns each such rule — one [`PolicyRule`] naming its finding code
//! (`policy[<class>]`), the rule text or public issue it comes from and the
//! rulesets it applies to — and the checks that apply them: per log
//! ([`log`]: misspelt keys, the full framework output) and per result set
//! ([`set`]: one configuration across the runs, the named config file, the
//! number of runs, unique seeds; [`power`]: the power measurement rules). A finding is a [`Diagnostic`] (severity
//! warning) listed apart from the official findings; it never changes an
//! official verdict. [`PolicyMode::Error`] (`--policy error`) makes a
//! command fail on them instead. Must not know how the official checks judge
//! (compliance, package_check, score) or how findings are printed (report).

use crate::diag::{Diagnostic, Severity};
use serde::Serialize;
use std::collections::BTreeMap;

pub mod log;
pub mod power;
pub mod set;

/// What a command does with policy findings (`--policy`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PolicyMode {
    /// Listed apart from the official verdict; the exit code follows the
    /// official verdict alone.
    #[default]
    Warn,
    /// Each finding is an error: the command fails when there is one.
    Error,
}

impl PolicyMode {
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyMode::Warn => "warn",
            PolicyMode::Error => "error",
        }
    }
}

/// One rule beyond the official verdict.
#[derive(Debug, Clone, Copy)]
pub struct PolicyRule {
    /// The finding's code, `policy[<class>]`.
    pub code: &'static str,
    /// Where the rule comes from (rule document, section, public issue).
    pub source: &'static str,
    /// The rulesets it applies to.
    pub applies: &'static str,
}

impl PolicyRule {
    /// A finding of this rule.
    pub fn finding(&self, message: impl Into<String>) -> Diagnostic {
        Diagnostic::warning(self.code, message)
            .rule(self.source, None)
            .applies(self.applies)
    }
}

/// The config file a run names exists in the submitted implementation.
pub const CONFIG_FILE: PolicyRule = PolicyRule {
    code: "policy[config-file]",
    source: "training_policies #592 (with training #880): the file config_filename names is part of the submitted implementation",
    applies: "6.1.0 and later (mandatory key); checked wherever config_filename is logged",
};

/// The runs of one result set disclose one configuration.
pub const DISCLOSURE: PolicyRule = PolicyRule {
    code: "policy[disclosure]",
    source: "training_policies #592 (precision, parallelism, micro batch size and config_filename disclosed per run); training_rules.adoc \"Benchmark Results\" (the runs of a result set are one system and configuration)",
    applies: "6.1.0 and later (mandatory keys); checked wherever the keys are logged",
};

/// Result files hold the full framework output, not only MLLOG lines.
pub const FULL_OUTPUT: PolicyRule = PolicyRule {
    code: "policy[full-output]",
    source: "training_rules.adoc \"Result files\" (training_policies #588): result files include the full framework logs and all MLLOG lines",
    applies: "6.1.0 and later",
};

/// A logged key that looks like a misspelling of a key the rules read.
pub const KEY_SPELLING: PolicyRule = PolicyRule {
    code: "policy[key-spelling]",
    source: "the ruleset's rule files: a key they read, logged under another spelling, is silently not disclosed",
    applies: "every ruleset",
};

/// The number of runs of a result set.
pub const RUNS_PER_SET: PolicyRule = PolicyRule {
    code: "policy[runs-per-set]",
    source: "training_rules.adoc \"Benchmark Results\": a result set is exactly the required number of runs, scored olympic",
    applies: "every ruleset (the official checker accepts more runs under weak scaling)",
};

/// Unique seeds within a result set, where the official seed check did not run.
pub const SEEDS: PolicyRule = PolicyRule {
    code: "policy[seeds]",
    source: "training_policies #546/#547/#474: seeds are logged and unique within a result set",
    applies: "every ruleset; reported here where the official seed checker did not run (open division, bypassed, rulesets before 3.0.0)",
};

/// A log in an organisation's folder names that organisation.
pub const SUBMISSION_ORG: PolicyRule = PolicyRule {
    code: "policy[submission-org]",
    source: "training_rules.adoc \"Benchmark Results\": a submitter's results are its own runs (a log naming another submitter may be that submitter's, copied or linked in and scored under a new name)",
    applies: "every ruleset (the official tools do not compare submission_org with the folder)",
};

/// Every policy rule, for documentation and `--json` consumers.
pub const RULES: [PolicyRule; 7] = [
    CONFIG_FILE,
    DISCLOSURE,
    FULL_OUTPUT,
    KEY_SPELLING,
    RUNS_PER_SET,
    SEEDS,
    SUBMISSION_ORG,
];

/// The policy part of a command's summary: the mode and the findings per
/// code.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PolicySummary {
    pub mode: PolicyMode,
    pub findings: usize,
    pub by_code: BTreeMap<String, usize>,
}

impl PolicySummary {
    /// Count `findings` (each a policy finding).
    pub fn of<'a>(mode: PolicyMode, findings: impl IntoIterator<Item = &'a Diagnostic>) -> Self {
        let mut s = PolicySummary {
            mode,
            ..Default::default()
        };
        for f in findings {
            s.findings += 1;
            *s.by_code.entry(f.code.to_string()).or_default() += 1;
        }
        s
    }

    /// Does the command fail because of policy findings?
    pub fn fails(&self) -> bool {
        self.mode == PolicyMode::Error && self.findings > 0
    }

    /// One line for people, e.g. `policy: 2 findings (policy[disclosure] 1,
    /// policy[key-spelling] 1), beyond the official verdict`.
    pub fn line(&self) -> String {
        let parts: Vec<String> = self
            .by_code
            .iter()
            .map(|(c, n)| format!("{c} {n}"))
            .collect();
        format!(
            "policy: {} finding{} ({}), {}",
            self.findings,
            if self.findings == 1 { "" } else { "s" },
            parts.join(", "),
            if self.mode == PolicyMode::Error {
                "errors under --policy error"
            } else {
                "beyond the official verdict (--policy error makes them fail)"
            }
        )
    }
}

/// Give findings the severity `mode` asks for.
pub fn apply_mode(findings: &mut [Diagnostic], mode: PolicyMode) {
    let severity = match mode {
        PolicyMode::Warn => Severity::Warning,
        PolicyMode::Error => Severity::Error,
    };
    for f in findings {
        f.severity = severity;
    }
}

/// Is `ruleset` (e.g. `6.1.0`) at least `min`?
pub(crate) fn at_least(ruleset: &str, min: (u32, u32, u32)) -> bool {
    crate::ruleset_facts::version_tuple(ruleset) >= min
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_names_a_policy_code_a_source_and_its_rulesets() {
        for r in RULES {
            assert!(
                r.code.starts_with("policy[") && r.code.ends_with(']'),
                "{}",
                r.code
            );
            assert!(!r.source.is_empty() && !r.applies.is_empty());
        }
        let f = CONFIG_FILE.finding("x");
        assert_eq!(f.severity, Severity::Warning);
        assert_eq!(f.rule.as_deref(), Some(CONFIG_FILE.source));
        assert_eq!(f.applies.as_deref(), Some(CONFIG_FILE.applies));
    }

    #[test]
    fn the_summary_counts_per_code_and_fails_only_under_error() {
        let fs = vec![
            DISCLOSURE.finding("a"),
            KEY_SPELLING.finding("b"),
            DISCLOSURE.finding("c"),
        ];
        let warn = PolicySummary::of(PolicyMode::Warn, &fs);
        assert_eq!(warn.findings, 3);
        assert_eq!(warn.by_code["policy[disclosure]"], 2);
        assert!(!warn.fails());
        assert!(
            warn.line()
                .starts_with("policy: 3 findings (policy[disclosure] 2, policy[key-spelling] 1)")
        );
        assert!(PolicySummary::of(PolicyMode::Error, &fs).fails());
        assert!(!PolicySummary::of(PolicyMode::Error, &[]).fails());
        let mut fs = fs;
        apply_mode(&mut fs, PolicyMode::Error);
        assert!(fs.iter().all(Diagnostic::is_error));
    }

    #[test]
    fn ruleset_versions_compare_as_numbers() {
        assert!(at_least("6.1.0", (6, 1, 0)));
        assert!(at_least("10.0.0", (6, 1, 0)));
        assert!(!at_least("6.0.0", (6, 1, 0)));
        assert!(!at_least("5.1.0", (6, 1, 0)));
    }
}
