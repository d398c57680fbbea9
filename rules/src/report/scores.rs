//! Scores of submitters (`referee summarize`): a table for people, CSV,
//! Markdown, and JSON Lines (one object per system × benchmark).

use super::{Detail, Report, md_escape, write_json_lines};
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

fn csv_cell(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
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
