//! The report layer: every command's result is a value (a serde type) that
//! renders through the same three printers — text for people, JSON for
//! programs, Markdown for pull requests and wikis. Work never prints itself.
//!
//! * [`Report`]: implemented by each finished report (a package check, the
//!   scores of submitters, an RCP test, an audit, a comparison, a run
//!   summary); [`render`] picks the printer for a [`Format`].
//! * [`check::Sink`]: `referee check` streams one [`crate::checker::LogReport`]
//!   at a time into a sink (human, JSON Lines or Markdown) as logs finish,
//!   so a long check shows its first failure at once.
//!
//! JSON is always the serde form of the report type.

use crate::diag::Diagnostic;
use crate::escape::{markdown, markdown_code, term};
use serde::Serialize;
use std::io::{self, Write};

pub mod check;
pub mod package;
pub mod rcp;
pub mod scores;

pub use check::{CheckSummary, HumanSink, JsonSink, MarkdownSink, Sink, Worst};

/// The three forms every report has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Text for people (the default on a terminal).
    Human,
    /// The report's serde form (one JSON value per line).
    Json,
    /// Markdown for a pull request, a wiki or a CI summary.
    Markdown,
}

impl Format {
    /// The format chosen by a command's `--json` / `--markdown` flags.
    pub fn from_flags(json: bool, markdown: bool) -> Format {
        if json {
            Format::Json
        } else if markdown {
            Format::Markdown
        } else {
            Format::Human
        }
    }
}

/// How much the human and Markdown forms show.
#[derive(Debug, Clone, Copy, Default)]
pub struct Detail {
    /// Notes (severity `note`) and other detail a user asks for with `-v`.
    pub verbose: bool,
}

/// A finished report of one command.
pub trait Report: Serialize {
    /// Text for people.
    fn write_human(&self, out: &mut dyn Write, detail: Detail) -> io::Result<()>;
    /// Markdown.
    fn write_markdown(&self, out: &mut dyn Write, detail: Detail) -> io::Result<()>;
    /// JSON: the serde form on one line. Reports that list independent
    /// items (one per directory, one per row) override this to print JSON
    /// Lines, each line the serde form of one item.
    fn write_json(&self, out: &mut dyn Write) -> io::Result<()> {
        serde_json::to_writer(&mut *out, self)?;
        writeln!(out)
    }
}

/// Print `report` in `format`.
pub fn render<R: Report + ?Sized>(
    report: &R,
    format: Format,
    detail: Detail,
    out: &mut dyn Write,
) -> io::Result<()> {
    match format {
        Format::Human => report.write_human(out, detail),
        Format::Json => report.write_json(out),
        Format::Markdown => report.write_markdown(out, detail),
    }
}

/// Print one item per line as its serde form (JSON Lines).
pub fn write_json_lines<T: Serialize>(out: &mut dyn Write, items: &[T]) -> io::Result<()> {
    for item in items {
        serde_json::to_writer(&mut *out, item)?;
        writeln!(out)?;
    }
    Ok(())
}

/// Write one diagnostic in the multi-line human form. Every field but the
/// severity and the code can quote a log, a package or a rule file: each is
/// shown through [`term`], on its own line.
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
        term(&d.message)
    )?;
    let pad = format!("{indent}   ");
    let mut at = String::new();
    if let Some(f) = &d.file {
        at.push_str(&term(f));
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
        at.push_str(&format!("key {}", term(k)));
    }
    if !at.is_empty() {
        writeln!(out, "{pad}--> {at}")?;
    }
    if let Some(r) = &d.rule {
        let r = term(r);
        match d.rule_line {
            Some(l) => writeln!(out, "{pad}rule:     {r}:{l}")?,
            None => writeln!(out, "{pad}rule:     {r}")?,
        }
    }
    if let Some(a) = &d.applies {
        writeln!(out, "{pad}applies:  {}", term(a))?;
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

/// `s` on one line: its own line breaks shown as ` ⏎ `, the rest of what a
/// terminal would act on escaped ([`term`]), cut at 400 characters.
fn one_line(s: &str) -> String {
    let joined = s
        .split('\n')
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join(" ⏎ ");
    let joined = term(&joined).into_owned();
    if joined.chars().count() > 400 {
        let cut: String = joined.chars().take(400).collect();
        format!("{cut}…")
    } else {
        joined
    }
}

/// One diagnostic as a Markdown list item (with its rule, expected and found).
pub fn write_diagnostic_markdown(out: &mut dyn Write, d: &Diagnostic) -> io::Result<()> {
    let at = d.line.map(|l| format!(" (line {l})")).unwrap_or_default();
    writeln!(
        out,
        "- **{}** `{}`{at}: {}",
        d.severity.as_str(),
        d.code,
        markdown(&d.message)
    )?;
    if let Some(r) = &d.rule {
        writeln!(out, "  - rule: {}", markdown_code(r))?;
    }
    if let Some(a) = &d.applies {
        writeln!(out, "  - applies: {}", markdown(a))?;
    }
    if let Some(e) = &d.expected {
        writeln!(out, "  - expected: {}", markdown(e))?;
    }
    if let Some(f) = &d.found {
        writeln!(out, "  - found: {}", markdown(f))?;
    }
    Ok(())
}

/// `PASS` or `FAIL`.
pub fn pass_fail(passed: bool) -> &'static str {
    if passed { "PASS" } else { "FAIL" }
}
