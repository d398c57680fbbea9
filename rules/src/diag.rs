//! Structured diagnostics, the common currency of every check.
//!
//! Checks never print: they emit [`Diagnostic`]s (rule, file:line, expected,
//! found, and the official tool's own wording where there is one). Printers
//! (see [`crate::report`]) turn them into text, JSON or Markdown.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
    Note,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "note",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Verdict {
    Pass,
    Fail,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Fail => "FAIL",
        }
    }
    pub fn from_ok(ok: bool) -> Self {
        if ok { Verdict::Pass } else { Verdict::Fail }
    }
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diagnostic {
    pub severity: Severity,
    /// Stable machine-readable kind, e.g. `check-failed`, `required-count`,
    /// `target-not-reached`, `parse-error`, `concatenated-runs`.
    pub code: &'static str,
    /// The rule that reported: a rule-file path (`training_5.0.0/common.yaml`)
    /// or a named rule (`rcp`, `seeds`, `system-description`, `layout`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// Line of the rule in its rule file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule_line: Option<usize>,
    /// The log key concerned.
    pub key: Option<String>,
    /// The file the finding is about (a log, a system JSON, a directory).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// 1-based line in `file`.
    pub line: Option<usize>,
    /// One-line summary.
    pub message: String,
    /// The rule text (the Python expression of a rule file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub found: Option<String>,
    /// The official tool's message for the same finding, verbatim.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub official: Option<String>,
    /// The rulesets a policy finding's rule applies to (see
    /// [`crate::policy`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub applies: Option<String>,
}

impl Diagnostic {
    pub fn new(severity: Severity, code: &'static str, message: impl Into<String>) -> Self {
        Diagnostic {
            severity,
            code,
            rule: None,
            rule_line: None,
            key: None,
            file: None,
            line: None,
            message: message.into(),
            test: None,
            expected: None,
            found: None,
            official: None,
            applies: None,
        }
    }
    pub fn error(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(Severity::Error, code, message)
    }
    pub fn warning(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(Severity::Warning, code, message)
    }
    pub fn note(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(Severity::Note, code, message)
    }
    pub fn rule(mut self, rule: impl Into<String>, line: Option<usize>) -> Self {
        self.rule = Some(rule.into());
        self.rule_line = line;
        self
    }
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }
    pub fn file(mut self, file: impl Into<String>) -> Self {
        self.file = Some(file.into());
        self
    }
    pub fn line(mut self, line: usize) -> Self {
        self.line = Some(line);
        self
    }
    pub fn at(mut self, line: Option<usize>) -> Self {
        self.line = line;
        self
    }
    pub fn test(mut self, test: impl Into<String>) -> Self {
        self.test = Some(test.into());
        self
    }
    pub fn expected(mut self, e: impl Into<String>) -> Self {
        self.expected = Some(e.into());
        self
    }
    pub fn found(mut self, f: impl Into<String>) -> Self {
        self.found = Some(f.into());
        self
    }
    pub fn official(mut self, o: impl Into<String>) -> Self {
        self.official = Some(o.into());
        self
    }
    pub fn applies(mut self, rulesets: impl Into<String>) -> Self {
        self.applies = Some(rulesets.into());
        self
    }
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}
