//! The package checker's report (`referee package-check`, and the check
//! that closes `referee package`).

use super::{Detail, Report, write_diagnostic, write_diagnostic_markdown};
use crate::diag::Severity;
use crate::escape::{markdown, markdown_code, term};
use crate::package_check::PackageReport;
use std::io::{self, Write};

impl Report for PackageReport {
    fn write_human(&self, out: &mut dyn Write, detail: Detail) -> io::Result<()> {
        write_human(out, self, detail.verbose)
    }
    fn write_markdown(&self, out: &mut dyn Write, detail: Detail) -> io::Result<()> {
        writeln!(
            out,
            "## {} {}\n\nRuleset {}, {} systems.\n",
            self.verdict.as_str(),
            markdown_code(&self.path),
            markdown(&self.ruleset),
            self.systems
        )?;
        writeln!(
            out,
            "| verdict | system | benchmark | result files | non-compliant | RCP |\n| --- | --- | --- | ---: | --- | --- |"
        )?;
        for b in &self.benchmarks {
            writeln!(
                out,
                "| {} | {} | {} | {} of {} | {} | {} |",
                b.verdict.as_str(),
                markdown(&b.system),
                markdown(&b.benchmark),
                b.result_files,
                b.expected_files,
                markdown(&b.noncompliant.join(", ")),
                markdown(b.rcp.as_deref().unwrap_or("-"))
            )?;
        }
        let shown: Vec<_> = self
            .diagnostics
            .iter()
            .filter(|d| d.severity != Severity::Note || detail.verbose)
            .collect();
        if !shown.is_empty() {
            writeln!(out)?;
        }
        for d in shown {
            write_diagnostic_markdown(out, d)?;
        }
        if let Some(s) = &self.policy_summary {
            writeln!(
                out,
                "\n### Beyond the official verdict\n\n{}\n",
                markdown(&s.line())
            )?;
            for d in &self.policy {
                write_diagnostic_markdown(out, d)?;
            }
        }
        Ok(())
    }
}

/// Human form: per benchmark directory one line, then the findings.
fn write_human(out: &mut dyn Write, rep: &PackageReport, verbose: bool) -> io::Result<()> {
    writeln!(
        out,
        "{} {}  (ruleset {}, {} systems)",
        rep.verdict.as_str(),
        term(&rep.path),
        term(&rep.ruleset),
        rep.systems
    )?;
    for b in &rep.benchmarks {
        writeln!(
            out,
            "  {} {}/{}  {} of {} result files{}{}",
            b.verdict.as_str(),
            term(&b.system),
            term(&b.benchmark),
            b.result_files,
            b.expected_files,
            if b.noncompliant.is_empty() {
                String::new()
            } else {
                format!(", non-compliant: {}", term(&b.noncompliant.join(", ")))
            },
            b.rcp
                .as_ref()
                .map(|r| format!(", RCP: {}", term(r)))
                .unwrap_or_default()
        )?;
    }
    for d in &rep.diagnostics {
        if d.severity == Severity::Note && !verbose {
            continue;
        }
        write_diagnostic(out, d, "  ")?;
    }
    if let Some(s) = &rep.policy_summary {
        writeln!(out, "  {}", s.line())?;
        for d in &rep.policy {
            write_diagnostic(out, d, "    ")?;
        }
    }
    Ok(())
}

/// The package check of every submission folder of one invocation.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(transparent)]
pub struct PackageCheckReport {
    pub folders: Vec<PackageReport>,
    /// Which rules judged (e.g. "training 5.0.0 rules from mlperf-logging 4.1.68").
    #[serde(skip)]
    pub rules: String,
}

impl PackageCheckReport {
    pub fn passed(&self) -> bool {
        self.folders.iter().all(PackageReport::passed)
    }

    fn closing_line(&self) -> String {
        format!(
            "{}: {}",
            if self.passed() {
                "PACKAGE ACCEPTABLE"
            } else {
                "PACKAGE NOT ACCEPTABLE"
            },
            term(&self.rules)
        )
    }
}

impl Report for PackageCheckReport {
    fn write_human(&self, out: &mut dyn Write, detail: Detail) -> io::Result<()> {
        for f in &self.folders {
            f.write_human(out, detail)?;
        }
        writeln!(out, "{}", self.closing_line())
    }
    fn write_markdown(&self, out: &mut dyn Write, detail: Detail) -> io::Result<()> {
        writeln!(out, "# Package check\n\n{}\n", self.closing_line())?;
        for f in &self.folders {
            f.write_markdown(out, detail)?;
        }
        Ok(())
    }
    fn write_json(&self, out: &mut dyn Write) -> io::Result<()> {
        super::write_json_lines(out, &self.folders)
    }
}
