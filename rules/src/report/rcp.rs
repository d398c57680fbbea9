//! The RCP convergence test's report (`referee rcp`): one entry per
//! benchmark directory.

use super::{Detail, Report, pass_fail, write_diagnostic, write_diagnostic_markdown};
use crate::diag::{Diagnostic, Severity};
use crate::escape::{markdown, term};
use crate::rcp::{RcpOutcome, RcpRecord, RunConvergence};
use serde::Serialize;
use std::io::{self, Write};

/// The RCP test of one benchmark directory, as printed.
#[derive(Debug, Clone, Serialize)]
pub struct RcpDirReport {
    pub path: String,
    /// `PASS` or `FAIL`.
    pub verdict: &'static str,
    /// The official checker's message (`RCP found`, `RCP Interpolation`, …).
    pub message: String,
    pub benchmark: Option<String>,
    pub global_batch_size: Option<f64>,
    pub submission_mean: Option<f64>,
    pub normalization_factor: f64,
    pub record: Option<RcpRecord>,
    pub runs: Vec<RunConvergence>,
    /// The outcome's findings followed by the notes on the official
    /// checker's quirks.
    pub diagnostics: Vec<Diagnostic>,
}

impl RcpDirReport {
    /// The report of `outcome` for the directory `path`, with all its
    /// findings (`diagnostics`: the outcome's and the quirk notes).
    pub fn new(path: String, outcome: &RcpOutcome, diagnostics: Vec<Diagnostic>) -> Self {
        RcpDirReport {
            path,
            verdict: pass_fail(outcome.passed),
            message: outcome.message.clone(),
            benchmark: outcome.benchmark.clone(),
            global_batch_size: outcome.global_batch_size,
            submission_mean: outcome.submission_mean,
            normalization_factor: outcome.norm_factor,
            record: outcome.record.clone(),
            runs: outcome.runs.clone(),
            diagnostics,
        }
    }

    pub fn passed(&self) -> bool {
        self.verdict == "PASS"
    }

    /// `submission mean … vs minimum … (RCP …)`, when a record was used.
    fn comparison(&self) -> Option<String> {
        let (r, m) = (self.record.as_ref()?, self.submission_mean?);
        Some(format!(
            "submission mean {m:.4} vs minimum {:.4} (RCP {}: mean {:.4}, stdev {:.4}, max speedup {:.4}); normalisation factor {}",
            r.mean / r.max_speedup,
            term(&r.name),
            r.mean,
            r.stdev,
            r.max_speedup,
            self.normalization_factor
        ))
    }

    fn context(&self) -> String {
        self.benchmark
            .as_ref()
            .map(|b| {
                format!(
                    "  ({}, BS {})",
                    term(b),
                    self.global_batch_size
                        .map(|x| x.to_string())
                        .unwrap_or("?".into())
                )
            })
            .unwrap_or_default()
    }
}

/// The RCP test of every directory of one `referee rcp` invocation.
#[derive(Debug, Clone, Serialize)]
#[serde(transparent)]
pub struct RcpReport {
    pub dirs: Vec<RcpDirReport>,
    /// Where the rules came from, shown with `-v` when the ruleset was
    /// read from the path (not part of the JSON form).
    #[serde(skip)]
    pub inferred_rules: Option<String>,
}

impl RcpReport {
    pub fn passed(&self) -> bool {
        self.dirs.iter().all(RcpDirReport::passed)
    }
}

impl Report for RcpReport {
    fn write_human(&self, out: &mut dyn Write, detail: Detail) -> io::Result<()> {
        for d in &self.dirs {
            writeln!(
                out,
                "{} {}: {}{}",
                d.verdict,
                term(&d.path),
                term(&d.message),
                d.context()
            )?;
            if let Some(c) = d.comparison() {
                writeln!(out, "  {c}")?;
            }
            for diag in &d.diagnostics {
                if diag.severity != Severity::Note || detail.verbose {
                    write_diagnostic(out, diag, "  ")?;
                }
            }
            if let (Some(rules), true) = (&self.inferred_rules, detail.verbose) {
                writeln!(out, "  note: {} (ruleset read from the path)", term(rules))?;
            }
        }
        Ok(())
    }

    fn write_markdown(&self, out: &mut dyn Write, detail: Detail) -> io::Result<()> {
        writeln!(out, "# RCP convergence test\n")?;
        writeln!(
            out,
            "| verdict | directory | benchmark | message | submission mean | RCP minimum |\n| --- | --- | --- | --- | ---: | ---: |"
        )?;
        for d in &self.dirs {
            writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} |",
                d.verdict,
                markdown(&d.path),
                markdown(d.benchmark.as_deref().unwrap_or("-")),
                markdown(&d.message),
                d.submission_mean
                    .map(|m| format!("{m:.4}"))
                    .unwrap_or_else(|| "-".into()),
                d.record
                    .as_ref()
                    .map(|r| format!("{:.4}", r.mean / r.max_speedup))
                    .unwrap_or_else(|| "-".into()),
            )?;
        }
        for d in &self.dirs {
            let shown: Vec<_> = d
                .diagnostics
                .iter()
                .filter(|x| x.severity != Severity::Note || detail.verbose)
                .collect();
            if shown.is_empty() {
                continue;
            }
            writeln!(out, "\n## {}\n", markdown(&d.path))?;
            for x in shown {
                write_diagnostic_markdown(out, x)?;
            }
        }
        Ok(())
    }

    fn write_json(&self, out: &mut dyn Write) -> io::Result<()> {
        super::write_json_lines(out, &self.dirs)
    }
}
