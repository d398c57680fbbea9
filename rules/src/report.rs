//! Printers: sinks that turn check results into text for people, JSON Lines
//! for programs, or Markdown for reports. Checks never print themselves.

use crate::checker::LogReport;
use crate::diag::{Diagnostic, Severity, Verdict};
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

/// Write one diagnostic in the multi-line human form.
pub fn write_diagnostic<W: Write + ?Sized>(
    out: &mut W,
    d: &Diagnostic,
    indent: &str,
) -> io::Result<()> {
    writeln!(
        out,
        "{indent}{}[{}]: {}",
        d.severity.as_str(),
        d.code,
        d.message
    )?;
    let pad = format!("{indent}   ");
    let mut at = String::new();
    if let Some(f) = &d.file {
        at.push_str(f);
        if let Some(l) = d.line {
            at.push_str(&format!(":{l}"));
        }
    } else if let Some(l) = d.line {
        at.push_str(&format!("line {l}"));
    }
    if let Some(k) = &d.key {
        if !at.is_empty() {
            at.push_str("  ");
        }
        at.push_str(&format!("key {k}"));
    }
    if !at.is_empty() {
        writeln!(out, "{pad}--> {at}")?;
    }
    if let Some(r) = &d.rule {
        match d.rule_line {
            Some(l) => writeln!(out, "{pad}rule:     {r}:{l}")?,
            None => writeln!(out, "{pad}rule:     {r}")?,
        }
    }
    if let Some(t) = &d.test
        && d.expected.as_deref() != Some(t.as_str())
    {
        writeln!(out, "{pad}test:     {}", one_line(t))?;
    }
    if let Some(e) = &d.expected {
        writeln!(out, "{pad}expected: {}", one_line(e))?;
    }
    if let Some(f) = &d.found {
        writeln!(out, "{pad}found:    {}", one_line(f))?;
    }
    Ok(())
}

fn one_line(s: &str) -> String {
    let joined = s
        .split('\n')
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join(" ⏎ ");
    if joined.chars().count() > 400 {
        let cut: String = joined.chars().take(400).collect();
        format!("{cut}…")
    } else {
        joined
    }
}

impl<W: Write> Sink for HumanSink<W> {
    fn log(&mut self, r: &LogReport) -> io::Result<()> {
        let has_warnings = r.diagnostics.iter().any(|d| d.severity != Severity::Error);
        if r.verdict == Verdict::Pass && !self.show_pass && !has_warnings {
            return Ok(());
        }
        let mut ctx = Vec::new();
        if let Some(b) = &r.benchmark {
            ctx.push(b.clone());
        }
        if let Some(rs) = &r.ruleset {
            ctx.push(format!("ruleset {rs}"));
        }
        let ctx = if ctx.is_empty() {
            String::new()
        } else {
            format!("  ({})", ctx.join(", "))
        };
        writeln!(self.out, "{} {}{ctx}", r.verdict.as_str(), r.path)?;
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
        Ok(())
    }

    fn error(&mut self, path: &str, message: &str) -> io::Result<()> {
        writeln!(self.out, "ERROR {path}\n  error: {message}")
    }

    fn finish(&mut self, s: &CheckSummary) -> io::Result<()> {
        let total = s.pass + s.fail + s.errors;
        write!(
            self.out,
            "{total} log{} checked with {}: {} PASS, {} FAIL",
            if total == 1 { "" } else { "s" },
            s.rules,
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
        )
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

fn md_escape(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
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
        if !r.diagnostics.is_empty() {
            self.details.push((r.path.clone(), r.diagnostics.clone()));
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
            s.pass, s.fail, s.errors, s.rules
        )?;
        writeln!(
            self.out,
            "| log | verdict | benchmark | errors |\n| --- | --- | --- | ---: |"
        )?;
        for (p, v, b, e) in &self.rows {
            writeln!(self.out, "| {} | {v} | {b} | {e} |", md_escape(p))?;
        }
        for (p, ds) in &self.details {
            writeln!(self.out, "\n## {}\n", md_escape(p))?;
            for d in ds {
                let at = d.line.map(|l| format!(" (line {l})")).unwrap_or_default();
                writeln!(
                    self.out,
                    "- **{}** `{}`{at}: {}",
                    d.severity.as_str(),
                    d.code,
                    md_escape(&d.message)
                )?;
                if let Some(r) = &d.rule {
                    writeln!(self.out, "  - rule: `{}`", md_escape(r))?;
                }
                if let Some(e) = &d.expected {
                    writeln!(self.out, "  - expected: {}", md_escape(e))?;
                }
                if let Some(f) = &d.found {
                    writeln!(self.out, "  - found: {}", md_escape(f))?;
                }
            }
        }
        self.out.flush()
    }
}

// ---------------------------------------------------------------------------
// Score tables (`referee summarize`).

use crate::package::PackageReport;
use crate::score::ScoreRow;

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
pub fn write_scores_table<W: Write>(out: &mut W, rows: &[ScoreRow]) -> io::Result<()> {
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
                r.submitter.clone(),
                r.system.clone(),
                s.benchmark.clone(),
                if s.dropped > 0 {
                    format!("{} ({} dropped)", s.runs, s.dropped)
                } else {
                    s.runs.to_string()
                },
                fmt_opt(s.score_minutes, 3),
                s.rcp.clone().unwrap_or_else(|| "-".into()),
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
    let line = |out: &mut W, c: &[String]| -> io::Result<()> {
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

fn csv_cell(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Scores as CSV (one row per system × benchmark, full precision).
pub fn write_scores_csv<W: Write>(out: &mut W, rows: &[ScoreRow]) -> io::Result<()> {
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

/// Scores as a Markdown table.
pub fn write_scores_markdown<W: Write>(out: &mut W, rows: &[ScoreRow]) -> io::Result<()> {
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
            md_escape(&r.submitter),
            md_escape(&r.system),
            s.benchmark,
            s.runs,
            fmt_opt(s.score_minutes, 3),
            s.rcp.clone().unwrap_or_else(|| "-".into()),
            s.scaling_factor,
            fmt_opt(s.global_batch_size, 0),
            fmt_full(s.samples_to_converge)
        )?;
    }
    Ok(())
}

/// Scores as JSON Lines (one object per system × benchmark).
pub fn write_scores_jsonl<W: Write>(out: &mut W, rows: &[ScoreRow]) -> io::Result<()> {
    for r in rows {
        serde_json::to_writer(&mut *out, r)?;
        writeln!(out)?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Package reports (`referee package-check`).

/// Human form: per benchmark directory one line, then the findings.
pub fn write_package_human<W: Write>(
    out: &mut W,
    rep: &PackageReport,
    verbose: bool,
) -> io::Result<()> {
    writeln!(
        out,
        "{} {}  (ruleset {}, {} systems)",
        rep.verdict.as_str(),
        rep.path,
        rep.ruleset,
        rep.systems
    )?;
    for b in &rep.benchmarks {
        writeln!(
            out,
            "  {} {}/{}  {} of {} result files{}{}",
            b.verdict.as_str(),
            b.system,
            b.benchmark,
            b.result_files,
            b.expected_files,
            if b.noncompliant.is_empty() {
                String::new()
            } else {
                format!(", non-compliant: {}", b.noncompliant.join(", "))
            },
            b.rcp
                .as_ref()
                .map(|r| format!(", RCP: {r}"))
                .unwrap_or_default()
        )?;
    }
    for d in &rep.diagnostics {
        if d.severity == Severity::Note && !verbose {
            continue;
        }
        write_diagnostic(out, d, "  ")?;
    }
    Ok(())
}
