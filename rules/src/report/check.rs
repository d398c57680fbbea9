//! `referee check`'s printers: sinks that receive one log report at a time
//! (text for people, JSON Lines, Markdown).

use super::{write_diagnostic, write_diagnostic_markdown};
use crate::checker::LogReport;
use crate::diag::{Diagnostic, Severity, Verdict};
use crate::escape::{markdown, term};
use crate::policy::PolicySummary;
use std::io::{self, Write};
use std::time::Duration;

/// Totals of a `check` invocation.
#[derive(Debug, Clone, Default)]
pub struct CheckSummary {
    pub pass: usize,
    pub fail: usize,
    pub errors: usize,
    pub elapsed: Duration,
    pub threads: usize,
    /// e.g. "training 5.0.0 rules from mlperf-logging 4.1.68".
    pub rules: String,
    /// The findings beyond the official verdict, counted per code.
    pub policy: PolicySummary,
}

/// The worst result among the logs of a `check` invocation, which decides
/// its exit status: a log that could not be checked outweighs a failing
/// one, which outweighs passing ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Worst {
    Pass,
    Fail,
    /// A log could not be read or checked.
    Error,
}

impl CheckSummary {
    /// Counts one log: its verdict, or `None` when it could not be checked.
    pub fn count(&mut self, verdict: Option<Verdict>) {
        match verdict {
            Some(Verdict::Pass) => self.pass += 1,
            Some(Verdict::Fail) => self.fail += 1,
            None => self.errors += 1,
        }
    }

    /// Counts one log's policy findings.
    pub fn count_policy(&mut self, findings: &[Diagnostic]) {
        for f in findings {
            self.policy.findings += 1;
            *self.policy.by_code.entry(f.code.to_string()).or_default() += 1;
        }
    }

    /// The worst result counted so far (policy findings count as failures
    /// under `--policy error`).
    pub fn worst(&self) -> Worst {
        if self.errors > 0 {
            Worst::Error
        } else if self.fail > 0 || self.policy.fails() {
            Worst::Fail
        } else {
            Worst::Pass
        }
    }
}

/// Receives check results as they are produced.
pub trait Sink {
    fn log(&mut self, report: &LogReport) -> io::Result<()>;
    fn error(&mut self, path: &str, message: &str) -> io::Result<()>;
    fn finish(&mut self, summary: &CheckSummary) -> io::Result<()>;
}

/// Human-readable output: one line per log, diagnostics under failures.
pub struct HumanSink<W: Write> {
    out: W,
    /// Print PASS lines too (off: only failures and warnings).
    pub show_pass: bool,
}

impl<W: Write> HumanSink<W> {
    pub fn new(out: W, show_pass: bool) -> Self {
        HumanSink { out, show_pass }
    }
}

impl<W: Write> Sink for HumanSink<W> {
    fn log(&mut self, r: &LogReport) -> io::Result<()> {
        let has_warnings = r.diagnostics.iter().any(|d| d.severity != Severity::Error);
        if r.verdict == Verdict::Pass && !self.show_pass && !has_warnings && r.policy.is_empty() {
            return Ok(());
        }
        let mut ctx = Vec::new();
        if let Some(b) = &r.benchmark {
            ctx.push(term(b).into_owned());
        }
        if let Some(rs) = &r.ruleset {
            ctx.push(format!("ruleset {}", term(rs)));
        }
        let ctx = if ctx.is_empty() {
            String::new()
        } else {
            format!("  ({})", ctx.join(", "))
        };
        writeln!(self.out, "{} {}{ctx}", r.verdict.as_str(), term(&r.path))?;
        for d in &r.diagnostics {
            write_diagnostic(&mut self.out, d, "  ")?;
        }
        if r.suppressed > 0 {
            writeln!(
                self.out,
                "  note: {} further finding{} follow from this and are not shown (--json lists the count)",
                r.suppressed,
                if r.suppressed == 1 { "" } else { "s" }
            )?;
        }
        if !r.policy.is_empty() {
            writeln!(self.out, "  beyond the official verdict:")?;
            for d in &r.policy {
                write_diagnostic(&mut self.out, d, "    ")?;
            }
        }
        Ok(())
    }

    fn error(&mut self, path: &str, message: &str) -> io::Result<()> {
        writeln!(self.out, "ERROR {}\n  error: {}", term(path), term(message))
    }

    fn finish(&mut self, s: &CheckSummary) -> io::Result<()> {
        let total = s.pass + s.fail + s.errors;
        write!(
            self.out,
            "{total} log{} checked with {}: {} PASS, {} FAIL",
            if total == 1 { "" } else { "s" },
            term(&s.rules),
            s.pass,
            s.fail
        )?;
        if s.errors > 0 {
            write!(self.out, ", {} not checked", s.errors)?;
        }
        writeln!(
            self.out,
            " ({:.2} s, {} thread{})",
            s.elapsed.as_secs_f64(),
            s.threads,
            if s.threads == 1 { "" } else { "s" }
        )?;
        if s.policy.findings > 0 {
            writeln!(self.out, "{}", s.policy.line())?;
        }
        Ok(())
    }
}

/// JSON Lines: one object per log.
pub struct JsonSink<W: Write> {
    out: W,
}

impl<W: Write> JsonSink<W> {
    pub fn new(out: W) -> Self {
        JsonSink { out }
    }
}

impl<W: Write> Sink for JsonSink<W> {
    fn log(&mut self, r: &LogReport) -> io::Result<()> {
        serde_json::to_writer(&mut self.out, r)?;
        writeln!(self.out)
    }
    fn error(&mut self, path: &str, message: &str) -> io::Result<()> {
        let v = serde_json::json!({"path": path, "verdict": "ERROR", "error": message, "diagnostics": []});
        serde_json::to_writer(&mut self.out, &v)?;
        writeln!(self.out)
    }
    fn finish(&mut self, _s: &CheckSummary) -> io::Result<()> {
        self.out.flush()
    }
}

/// Markdown: a table of logs, then the diagnostics of failures.
pub struct MarkdownSink<W: Write> {
    out: W,
    rows: Vec<(String, String, String, usize)>,
    details: Vec<(String, Vec<Diagnostic>)>,
}

impl<W: Write> MarkdownSink<W> {
    pub fn new(out: W) -> Self {
        MarkdownSink {
            out,
            rows: Vec::new(),
            details: Vec::new(),
        }
    }
}

impl<W: Write> Sink for MarkdownSink<W> {
    fn log(&mut self, r: &LogReport) -> io::Result<()> {
        let errors = r.diagnostics.iter().filter(|d| d.is_error()).count();
        self.rows.push((
            r.path.clone(),
            r.verdict.as_str().to_string(),
            r.benchmark.clone().unwrap_or_default(),
            errors,
        ));
        if !r.diagnostics.is_empty() || !r.policy.is_empty() {
            let mut all = r.diagnostics.clone();
            all.extend(r.policy.iter().cloned());
            self.details.push((r.path.clone(), all));
        }
        Ok(())
    }
    fn error(&mut self, path: &str, message: &str) -> io::Result<()> {
        self.rows
            .push((path.to_string(), "ERROR".into(), String::new(), 1));
        self.details
            .push((path.to_string(), vec![Diagnostic::error("io", message)]));
        Ok(())
    }
    fn finish(&mut self, s: &CheckSummary) -> io::Result<()> {
        writeln!(self.out, "# Compliance check\n")?;
        writeln!(
            self.out,
            "{} PASS, {} FAIL, {} not checked; {}.\n",
            s.pass,
            s.fail,
            s.errors,
            markdown(&s.rules)
        )?;
        if s.policy.findings > 0 {
            writeln!(self.out, "{}\n", markdown(&s.policy.line()))?;
        }
        writeln!(
            self.out,
            "| log | verdict | benchmark | errors |\n| --- | --- | --- | ---: |"
        )?;
        for (p, v, b, e) in &self.rows {
            writeln!(
                self.out,
                "| {} | {v} | {} | {e} |",
                markdown(p),
                markdown(b)
            )?;
        }
        for (p, ds) in &self.details {
            writeln!(self.out, "\n## {}\n", markdown(p))?;
            for d in ds {
                write_diagnostic_markdown(&mut self.out, d)?;
            }
        }
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unchecked_log_outweighs_a_failure_which_outweighs_passes() {
        let mut s = CheckSummary::default();
        assert_eq!(s.worst(), Worst::Pass);
        s.count(Some(Verdict::Pass));
        s.count(Some(Verdict::Pass));
        assert_eq!(
            (s.pass, s.fail, s.errors, s.worst()),
            (2, 0, 0, Worst::Pass)
        );
        s.count(Some(Verdict::Fail));
        assert_eq!(
            (s.pass, s.fail, s.errors, s.worst()),
            (2, 1, 0, Worst::Fail)
        );
        s.count(None);
        s.count(Some(Verdict::Pass));
        assert_eq!(
            (s.pass, s.fail, s.errors, s.worst()),
            (3, 1, 1, Worst::Error)
        );
    }
}
