//! Scores of submitters (`referee summarize`): a table for people, CSV,
//! Markdown, and JSON Lines (one object per system × benchmark).

use super::{Detail, Report, write_diagnostic, write_json_lines};
use crate::diag::{Diagnostic, Severity};
use crate::escape::{csv_cell, markdown, term};
use crate::policy::PolicySummary;
use crate::score::ScoreRow;
use serde::Serialize;
use std::io::{self, Write};

/// The scores of one `summarize` invocation, sorted as printed.
#[derive(Debug, Clone, Serialize)]
#[serde(transparent)]
pub struct ScoreTable {
    pub rows: Vec<ScoreRow>,
}

impl Report for ScoreTable {
    fn write_human(&self, out: &mut dyn Write, _: Detail) -> io::Result<()> {
        write_table(out, &self.rows)
    }
    fn write_markdown(&self, out: &mut dyn Write, _: Detail) -> io::Result<()> {
        write_markdown_table(out, &self.rows)
    }
    fn write_json(&self, out: &mut dyn Write) -> io::Result<()> {
        write_json_lines(out, &self.rows)
    }
}

impl ScoreTable {
    /// What was found beside the scores (stderr, so that stdout stays a
    /// clean table, CSV or JSON): `problems` that prevented rows, then each
    /// row's errors under `SUBMITTER/SYSTEM/BENCHMARK:` (and its warnings
    /// and notes when `verbose`).
    pub fn write_findings(
        &self,
        out: &mut dyn Write,
        problems: &[Diagnostic],
        verbose: bool,
    ) -> io::Result<()> {
        for d in problems {
            write_diagnostic(out, d, "")?;
        }
        for r in &self.rows {
            for d in &r.score.diagnostics {
                let show = match d.severity {
                    Severity::Error => true,
                    Severity::Warning | Severity::Note => verbose,
                };
                if show {
                    writeln!(
                        out,
                        "{}/{}/{}:",
                        term(&r.submitter_dir),
                        term(&r.system),
                        term(&r.score.benchmark)
                    )?;
                    write_diagnostic(out, d, "  ")?;
                }
            }
        }
        Ok(())
    }

    /// The findings beyond the official verdict, on stderr beside the
    /// others: each row's (with `verbose`), then their count per code.
    pub fn write_policy(&self, out: &mut dyn Write, verbose: bool) -> io::Result<PolicySummary> {
        let mode = self
            .rows
            .iter()
            .find_map(|r| r.score.policy_summary.as_ref().map(|s| s.mode))
            .unwrap_or_default();
        let summary = PolicySummary::of(mode, self.rows.iter().flat_map(|r| &r.score.policy));
        for r in self
            .rows
            .iter()
            .filter(|r| verbose && !r.score.policy.is_empty())
        {
            writeln!(
                out,
                "{}/{}/{} (beyond the official verdict):",
                term(&r.submitter_dir),
                term(&r.system),
                term(&r.score.benchmark)
            )?;
            for d in &r.score.policy {
                write_diagnostic(out, d, "  ")?;
            }
        }
        if summary.findings > 0 {
            writeln!(
                out,
                "{}{}",
                summary.line(),
                if verbose { "" } else { " (-v lists them)" }
            )?;
        }
        Ok(summary)
    }

    /// Rows without a valid score.
    pub fn invalid(&self) -> usize {
        self.rows
            .iter()
            .filter(|r| r.score.score_minutes.is_none())
            .count()
    }
}

/// The closing line of `referee summarize`: what was scored, under which
/// rules, how fast.
pub struct SummaryLine<'a> {
    pub table: &'a ScoreTable,
    /// Result logs scored.
    pub logs: usize,
    pub submitters: usize,
    /// The rules, in words.
    pub rules: &'a str,
    /// The ruleset was read from the path.
    pub inferred: bool,
    pub seconds: f64,
    pub threads: usize,
}

impl std::fmt::Display for SummaryLine<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} rows ({} without a valid score) from {} logs of {} submitter{}, {}{}; {:.2} s, {} thread{}",
            self.table.rows.len(),
            self.table.invalid(),
            self.logs,
            self.submitters,
            if self.submitters == 1 { "" } else { "s" },
            term(self.rules),
            if self.inferred {
                " (ruleset read from the path)"
            } else {
                ""
            },
            self.seconds,
            self.threads,
            if self.threads == 1 { "" } else { "s" }
        )
    }
}

fn fmt_opt(v: Option<f64>, digits: usize) -> String {
    v.map(|x| format!("{x:.digits$}"))
        .unwrap_or_else(|| "-".into())
}

fn fmt_full(v: Option<f64>) -> String {
    v.map(crate::value::float_repr).unwrap_or_default()
}

const SCORE_COLUMNS: [&str; 12] = [
    "submitter",
    "system",
    "benchmark",
    "runs",
    "dropped",
    "score_minutes",
    "rcp",
    "scaling_factor",
    "global_batch_size",
    "samples_to_converge",
    "energy",
    "system_name",
];

fn score_cells(r: &ScoreRow) -> [String; 12] {
    let s = &r.score;
    [
        r.submitter.clone(),
        r.system.clone(),
        s.benchmark.clone(),
        s.runs.to_string(),
        s.dropped.to_string(),
        fmt_full(s.score_minutes),
        s.rcp.clone().unwrap_or_default(),
        crate::value::float_repr(s.scaling_factor),
        fmt_full(s.global_batch_size),
        fmt_full(s.samples_to_converge),
        fmt_full(s.energy),
        r.system_name.clone(),
    ]
}

/// A human-readable table of scores.
fn write_table(out: &mut dyn Write, rows: &[ScoreRow]) -> io::Result<()> {
    let header = [
        "submitter",
        "system",
        "benchmark",
        "runs",
        "score (min)",
        "RCP",
        "scaling",
        "GBS",
        "samples to converge",
    ];
    let cells: Vec<[String; 9]> = rows
        .iter()
        .map(|r| {
            let s = &r.score;
            [
                term(&r.submitter).into_owned(),
                term(&r.system).into_owned(),
                term(&s.benchmark).into_owned(),
                if s.dropped > 0 {
                    format!("{} ({} dropped)", s.runs, s.dropped)
                } else {
                    s.runs.to_string()
                },
                fmt_opt(s.score_minutes, 3),
                s.rcp
                    .as_deref()
                    .map_or("-".into(), |x| term(x).into_owned()),
                format!("{:.4}", s.scaling_factor),
                fmt_opt(s.global_batch_size, 0),
                s.samples_to_converge
                    .map(|x| format!("{x}"))
                    .unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    let mut width = header.map(|h| h.chars().count());
    for c in &cells {
        for (i, v) in c.iter().enumerate() {
            width[i] = width[i].max(v.chars().count());
        }
    }
    let line = |out: &mut dyn Write, c: &[String]| -> io::Result<()> {
        let parts: Vec<String> = c
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let pad = width[i] - v.chars().count();
                // Numbers right-aligned, text left-aligned.
                if (3..9).contains(&i) {
                    format!("{}{v}", " ".repeat(pad))
                } else {
                    format!("{v}{}", " ".repeat(pad))
                }
            })
            .collect();
        writeln!(out, "{}", parts.join("  ").trim_end())
    };
    line(out, &header.map(String::from))?;
    line(out, &width.map(|w| "-".repeat(w)))?;
    for c in &cells {
        line(out, c)?;
    }
    Ok(())
}

/// Scores as CSV (one row per system × benchmark, full precision).
pub fn write_csv(out: &mut dyn Write, rows: &[ScoreRow]) -> io::Result<()> {
    writeln!(out, "{}", SCORE_COLUMNS.join(","))?;
    for r in rows {
        let c = score_cells(r);
        writeln!(
            out,
            "{}",
            c.iter().map(|x| csv_cell(x)).collect::<Vec<_>>().join(",")
        )?;
    }
    Ok(())
}

fn write_markdown_table(out: &mut dyn Write, rows: &[ScoreRow]) -> io::Result<()> {
    writeln!(
        out,
        "| submitter | system | benchmark | runs | score (min) | RCP | scaling | GBS | samples to converge |"
    )?;
    writeln!(
        out,
        "| --- | --- | --- | ---: | ---: | --- | ---: | ---: | ---: |"
    )?;
    for r in rows {
        let s = &r.score;
        writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {:.4} | {} | {} |",
            markdown(&r.submitter),
            markdown(&r.system),
            markdown(&s.benchmark),
            s.runs,
            fmt_opt(s.score_minutes, 3),
            markdown(s.rcp.as_deref().unwrap_or("-")),
            s.scaling_factor,
            fmt_opt(s.global_batch_size, 0),
            fmt_full(s.samples_to_converge)
        )?;
    }
    Ok(())
}
