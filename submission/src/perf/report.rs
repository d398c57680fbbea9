//! The perf report's forms: human (a table, then each run's details), JSON
//! (the serde form), Markdown, and CSV (one line per run).

use super::fields::{COUNTS, Field, Fields, Source};
use super::{PerfReport, PerfRow};
use crate::figures::{fig, write_aligned};
use referee_rules::escape::{csv_cell, markdown, markdown_code, term};
use referee_rules::report::{Detail, Report};
use std::io::{self, Write};

fn opt(x: Option<f64>) -> String {
    x.map(fig).unwrap_or_else(|| "—".into())
}

fn pct(x: Option<f64>) -> String {
    x.map(|v| format!("{v:.1} %")).unwrap_or_else(|| "—".into())
}

fn count(f: &Fields, name: &str) -> String {
    f.value(name).map_or_else(|| "—".into(), |v| v.to_string())
}

fn text<T: std::fmt::Display>(f: &Option<Field<T>>) -> String {
    f.as_ref()
        .map_or_else(|| "—".into(), |x| x.value.to_string())
}

/// The step time as `mean ± sd`.
pub fn step_text(r: &PerfRow) -> String {
    match r.step_time_s {
        Some(s) => match s.sd {
            Some(sd) => format!("{} ± {}", fig(s.mean), fig(sd)),
            None => fig(s.mean),
        },
        None => "—".into(),
    }
}

/// The file's last component (the table); details name the whole path.
pub fn short_name(file: &str) -> String {
    std::path::Path::new(file)
        .file_name()
        .map_or_else(|| file.to_string(), |n| n.to_string_lossy().to_string())
}

/// The table's header.
pub fn header(r: &PerfReport) -> Vec<&'static str> {
    let mut h = vec![
        "run",
        "format",
        "model",
        "GPUs",
        "GBS",
        "MBS",
        "seq",
        "parallelism",
        "prec",
        "step time (s)",
        "window",
        "tokens/s",
        "tokens/s/GPU",
        "TFLOP/s/GPU",
        "MFU",
    ];
    if r.against.is_some() {
        h.push("% of ref");
    }
    if has_energy(r) {
        h.push("J/token");
    }
    h.push("status");
    h
}

/// `--min-ratio`'s verdict: one line, then a line per run below it.
pub fn gate_lines(g: &super::Gate) -> Vec<String> {
    let mut v = vec![format!(
        "gate --min-ratio {}: {} of {} run{} at or above it{}",
        g.min_ratio,
        g.passed,
        g.passed + g.below.len(),
        if g.passed + g.below.len() == 1 {
            ""
        } else {
            "s"
        },
        if g.below.is_empty() { "" } else { "; below:" }
    )];
    for m in &g.below {
        v.push(format!("  {}: {}", m.file, m.reason));
    }
    v
}

/// Some run's power was measured (the table gains a J/token column).
pub fn has_energy(r: &PerfReport) -> bool {
    r.rows.iter().any(|x| x.energy.is_some())
}

/// A run's energy line: `energy: 0.05 J/token, 10 J/sample — average 500 W
/// over 4 s (2 node logs, 1 switch log, 8 readings; FOLDER)`.
pub fn energy_line(e: &super::energy::PerfEnergy) -> String {
    let mut per = Vec::new();
    if let Some(j) = e.joules_per_token {
        per.push(format!("{} J/token", fig(j)));
    }
    if let Some(j) = e.joules_per_sample {
        per.push(format!("{} J/sample", fig(j)));
    }
    let plural = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
    let mut logs = vec![plural(e.nodes, "node log")];
    if e.switches > 0 {
        logs.push(plural(e.switches, "switch log"));
    }
    logs.push(plural(e.readings, "reading"));
    format!(
        "energy: {}average {} W over {} s ({}; {})",
        if per.is_empty() {
            "no throughput to divide by — ".to_string()
        } else {
            format!("{} — ", per.join(", "))
        },
        fig(e.average_power_w),
        fig(e.measured_s),
        logs.join(", "),
        e.source
    )
}

/// One table row's cells.
pub fn cells(report: &PerfReport, r: &PerfRow) -> Vec<String> {
    let f = &r.fields;
    let mut c = vec![
        short_name(&r.file),
        r.format.as_str().to_string(),
        text(&f.model),
        count(f, "gpus"),
        count(f, "gbs"),
        count(f, "mbs"),
        count(f, "seq_len"),
        {
            let p = f.parallelism();
            if p.is_empty() { "—".into() } else { p }
        },
        f.precision
            .as_ref()
            .map_or_else(|| "—".into(), |p| p.value.as_str().into()),
        step_text(r),
        r.window.as_ref().map_or_else(|| "—".into(), |w| w.text()),
        opt(r.tokens_per_second),
        opt(r.tokens_per_second_per_gpu),
        {
            let mut t = opt(r.model_tflops_per_gpu.as_ref().map(|t| t.value));
            if let Some(m) = &r.model_flops
                && let (Some(_), Some(ours)) = (m.log_tflops_per_gpu, m.tflops_per_gpu)
            {
                t.push_str(&format!(" (model {})", fig(ours)));
            }
            t
        },
        r.mfu
            .as_ref()
            .map_or_else(|| "—".into(), |m| format!("{:.1} %", m.value * 100.0)),
    ];
    if report.against.is_some() {
        let p = match &r.reference {
            Some(Ok(m)) => {
                let mut s = pct(m.pct());
                if !m.exact && m.pct().is_some() {
                    s.push_str(" (looser)");
                }
                s
            }
            _ => "—".into(),
        };
        c.push(p);
    }
    if has_energy(report) {
        c.push(opt(r.energy.as_ref().and_then(|e| e.joules_per_token)));
    }
    c.push(r.status.kind.as_str().to_string());
    c
}

fn field_line<T: std::fmt::Display>(name: &str, f: &Option<Field<T>>) -> Option<String> {
    let f = f.as_ref()?;
    let mut s = format!("{name} {} ({}", f.value, f.source.as_str());
    if let Some(n) = &f.note {
        s.push_str(&format!(": {n}"));
    }
    s.push(')');
    Some(s)
}

/// Every stated field with its source.
pub fn fields_line(f: &Fields) -> String {
    let mut parts: Vec<String> = [
        field_line("model", &f.model),
        field_line("system", &f.system),
        field_line("GPU", &f.gpu),
        field_line("task", &f.task),
        f.precision.as_ref().map(|p| {
            let mut s = format!("precision {} ({}", p.value.as_str(), p.source.as_str());
            if let Some(n) = &p.note {
                s.push_str(&format!(": {n}"));
            }
            s + ")"
        }),
    ]
    .into_iter()
    .flatten()
    .collect();
    for (name, label) in COUNTS {
        if let Some(l) = field_line(label, &f.count(name).cloned()) {
            parts.push(l);
        }
    }
    if parts.is_empty() {
        "none stated".into()
    } else {
        parts.join(", ")
    }
}

/// A run's detail lines (human, Markdown and HTML share them).
pub fn detail_lines(r: &PerfRow) -> Vec<String> {
    let mut v = Vec::new();
    v.push(format!(
        "{} log{}",
        r.format.as_str(),
        r.rank
            .as_ref()
            .map(|p| format!("; the lines of rank `{p}` counted"))
            .unwrap_or_default()
    ));
    v.push(format!("fields: {}", fields_line(&r.fields)));
    if let Some(w) = &r.window {
        v.push(format!("window: {} — {}", w.text(), w.rule));
    }
    v.extend(step_line(r));
    v.extend(rates_line(r));
    if let Some(m) = &r.model_flops {
        v.push(model_flops_line(m));
    }
    if let Some(e) = &r.energy {
        v.push(energy_line(e));
    }
    v.push(format!(
        "status: {} — {}",
        r.status.kind.as_str(),
        r.status.detail
    ));
    reference_lines(r, &mut v);
    for m in &r.missing {
        v.push(format!("not computed: {m}"));
    }
    for n in &r.notes {
        v.push(format!("note: {n}"));
    }
    for p in &r.problems {
        v.push(format!(
            "problem: {}:{}: {} — expected {}, found {}",
            p.file, p.line, p.message, p.expected, p.found
        ));
    }
    v
}

/// `step time: mean … over N iterations[; model TFLOP/s/GPU mean …]`.
fn step_line(r: &PerfRow) -> Option<String> {
    let s = r.step_time_s?;
    let mut t = format!("step time: mean {} s", fig(s.mean));
    if let Some(sd) = s.sd {
        t.push_str(&format!(", sd {} s", fig(sd)));
    }
    t.push_str(&format!(
        " over {} iteration{}",
        s.n,
        if s.n == 1 { "" } else { "s" }
    ));
    if let Some(tf) = r.tflops_stat {
        t.push_str(&format!(
            "; model TFLOP/s/GPU mean {}{}",
            fig(tf.mean),
            tf.sd
                .map(|sd| format!(", sd {}", fig(sd)))
                .unwrap_or_default()
        ));
    }
    Some(t)
}

/// `throughput: …` of the rates known (none: no line).
fn rates_line(r: &PerfRow) -> Option<String> {
    let mut rates = Vec::new();
    if let Some(x) = r.samples_per_second {
        rates.push(format!("{} samples/s", fig(x)));
    }
    if let Some(x) = r.tokens_per_second {
        rates.push(format!("{} tokens/s", fig(x)));
    }
    if let Some(x) = r.tokens_per_second_per_gpu {
        rates.push(format!("{} tokens/s/GPU", fig(x)));
    }
    if let Some(t) = &r.model_tflops_per_gpu
        && t.source != Source::Log
    {
        rates.push(format!(
            "{} model TFLOP/s/GPU ({})",
            fig(t.value),
            t.note.clone().unwrap_or_else(|| t.source.as_str().into())
        ));
    }
    if let Some(m) = &r.mfu {
        rates.push(format!(
            "MFU {:.2} % ({})",
            m.value * 100.0,
            m.note.clone().unwrap_or_else(|| m.source.as_str().into())
        ));
    }
    (!rates.is_empty()).then(|| format!("throughput: {}", rates.join(", ")))
}

/// The reference row matched (and its notes), or why none was.
fn reference_lines(r: &PerfRow, v: &mut Vec<String>) {
    match &r.reference {
        Some(Ok(m)) => {
            let row = &m.row;
            let mut s = format!(
                "reference ({}): {} · {} · {} · {} · {} GPUs · {} · {}",
                m.label,
                row.container,
                row.system,
                row.model,
                row.precision,
                row.gpus,
                row.task,
                row.parallelism()
            );
            s.push_str(&format!(
                "; tokens/s/GPU {} → {}; TFLOP/s/GPU {} → {}",
                opt(row.tokens_per_s_per_gpu),
                pct(m.pct_tokens_per_gpu),
                opt(row.model_tflops_per_gpu),
                pct(m.pct_tflops_per_gpu)
            ));
            if let Some(p) = m.pct_step_time {
                s.push_str(&format!(
                    "; step time {} s → {:.1} %",
                    opt(row.step_time_s),
                    p
                ));
            }
            v.push(s);
            for n in &m.notes {
                v.push(format!("reference note: {n}"));
            }
        }
        Some(Err(e)) => v.push(format!("reference: none ({e})")),
        None => {}
    }
}

/// What the model's FLOPs give, beside what the log states.
pub fn model_flops_line(m: &super::ModelFlops) -> String {
    let mut s = format!(
        "model FLOPs: {} ({}): {:.1} GFLOP/token at {} tokens ({} attention{})",
        m.model,
        m.source,
        m.flops_per_token / 1e9,
        m.seq_len,
        m.attention.as_str(),
        if m.lora { ", LoRA: 2 × forward" } else { "" }
    );
    if let Some(t) = m.tflops_per_gpu {
        s.push_str(&format!(" → {} TFLOP/s/GPU", fig(t)));
    }
    if let Some(u) = m.mfu {
        s.push_str(&format!(", MFU {:.2} %", u * 100.0));
    }
    if let (Some(l), Some(d)) = (m.log_tflops_per_gpu, m.difference_pct) {
        s.push_str(&format!(
            "; the log states {} TFLOP/s/GPU ({d:+.1} %{})",
            fig(l),
            if m.disagrees {
                format!(", beyond {} %: they disagree", super::FLOPS_TOLERANCE_PCT)
            } else {
                format!(", within {} %", super::FLOPS_TOLERANCE_PCT)
            }
        ));
    }
    s
}

/// The summary line.
pub fn summary_line(r: &PerfReport) -> String {
    let s = &r.summary;
    format!(
        "{} run{}: {} complete, {} incomplete, {} with a NaN gradient norm, {} without data → exit {}",
        s.runs,
        if s.runs == 1 { "" } else { "s" },
        s.complete,
        s.incomplete,
        s.nan_grad_norm,
        s.no_data,
        r.exit_code
    )
}

/// Scaling rows: (group label, cells per point).
pub fn scaling_lines(r: &PerfReport) -> Vec<String> {
    let mut v = Vec::new();
    for g in &r.scaling {
        let pts: Vec<String> = g
            .points
            .iter()
            .map(|p| {
                format!(
                    "{} GPUs{}: {} {} → {:.1} %",
                    p.gpus,
                    p.gbs.map(|b| format!(" (GBS {b})")).unwrap_or_default(),
                    fig(p.per_gpu),
                    g.metric,
                    p.efficiency * 100.0
                )
            })
            .collect();
        v.push(format!(
            "{} · {} · {}: {} scaling from {} GPUs — {}",
            g.model,
            g.system,
            g.precision,
            g.kind,
            g.base_gpus,
            pts.join("; ")
        ));
    }
    v
}

impl Report for PerfReport {
    fn write_human(&self, out: &mut dyn Write, _: Detail) -> io::Result<()> {
        writeln!(out, "referee perf")?;
        if let Some(a) = &self.against {
            writeln!(out, "  against: {}", term(a))?;
        }
        writeln!(out)?;
        let rows: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| {
                cells(self, r)
                    .iter()
                    .map(|c| term(c).into_owned())
                    .collect()
            })
            .collect();
        write_aligned(out, &header(self), &rows)?;
        for r in &self.rows {
            writeln!(out)?;
            writeln!(out, "{}", term(&r.file))?;
            for l in detail_lines(r) {
                writeln!(out, "  {}", term(&l))?;
            }
        }
        if !self.scaling.is_empty() {
            writeln!(out)?;
            writeln!(
                out,
                "scaling (efficiency = per-GPU throughput ÷ that of the smallest GPU count)"
            )?;
            for l in scaling_lines(self) {
                writeln!(out, "  {}", term(&l))?;
            }
        }
        if !self.skipped.is_empty() {
            writeln!(out)?;
            writeln!(
                out,
                "{} file{} without training-log lines skipped",
                self.skipped.len(),
                if self.skipped.len() == 1 { "" } else { "s" }
            )?;
        }
        if !self.not_read.is_empty() {
            writeln!(out)?;
            writeln!(
                out,
                "not read (links and special files under a directory are not followed): {}",
                self.not_read.join(", ")
            )?;
        }
        writeln!(out)?;
        if let Some(g) = &self.gate {
            for l in gate_lines(g) {
                writeln!(out, "{}", term(&l))?;
            }
        }
        writeln!(out, "{}", summary_line(self))
    }

    fn write_markdown(&self, out: &mut dyn Write, _: Detail) -> io::Result<()> {
        writeln!(out, "# referee perf\n")?;
        if let Some(a) = &self.against {
            writeln!(out, "* against: {}", markdown_code(a))?;
        }
        writeln!(out, "\n**{}**\n", summary_line(self))?;
        if let Some(g) = &self.gate {
            for l in gate_lines(g) {
                writeln!(out, "* {}", markdown(&l))?;
            }
            writeln!(out)?;
        }
        let head = header(self);
        writeln!(out, "| {} |", head.join(" | "))?;
        writeln!(out, "|{}", " --- |".repeat(head.len()))?;
        for r in &self.rows {
            let c: Vec<String> = cells(self, r)
                .iter()
                .map(|x| markdown(x).into_owned())
                .collect();
            writeln!(out, "| {} |", c.join(" | "))?;
        }
        for r in &self.rows {
            writeln!(out, "\n## {}\n", markdown(&r.file))?;
            for l in detail_lines(r) {
                writeln!(out, "* {}", markdown(&l))?;
            }
        }
        if !self.scaling.is_empty() {
            writeln!(out, "\n## Scaling\n")?;
            for l in scaling_lines(self) {
                writeln!(out, "* {}", markdown(&l))?;
            }
        }
        writeln!(out, "\n## How the figures are made\n")?;
        // referee's own words (static text), Markdown as written.
        for r in &self.rules {
            writeln!(out, "* {r}")?;
        }
        Ok(())
    }
}

/// The CSV columns.
pub const CSV_COLUMNS: &[&str] = &[
    "file",
    "format",
    "rank",
    "model",
    "system",
    "gpu",
    "task",
    "precision",
    "gpus",
    "gbs",
    "mbs",
    "seq_len",
    "tp",
    "pp",
    "cp",
    "vp",
    "ep",
    "fsdp",
    "ga",
    "window_first",
    "window_last",
    "step_time_mean_s",
    "step_time_sd_s",
    "step_time_n",
    "samples_per_s",
    "tokens_per_s",
    "tokens_per_s_per_gpu",
    "model_tflops_per_gpu",
    "mfu",
    "peak_tflops",
    "reference_match",
    "pct_of_reference",
    "status",
    "status_detail",
    "model_flops_per_token",
    "model_flops_tflops_per_gpu",
    "model_flops_mfu",
    "log_vs_model_flops_pct",
    "average_power_w",
    "joules_per_sample",
    "joules_per_token",
];

/// One line per run, full precision.
pub fn write_csv(r: &PerfReport, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "{}", CSV_COLUMNS.join(","))?;
    let num = |x: Option<f64>| x.map(|v| v.to_string()).unwrap_or_default();
    for row in &r.rows {
        let f = &row.fields;
        let s = |x: &Option<Field<String>>| x.as_ref().map(|v| v.value.clone()).unwrap_or_default();
        let mut c = vec![
            row.file.clone(),
            row.format.as_str().to_string(),
            row.rank.clone().unwrap_or_default(),
            s(&f.model),
            s(&f.system),
            s(&f.gpu),
            s(&f.task),
            f.precision
                .as_ref()
                .map(|p| p.value.as_str().to_string())
                .unwrap_or_default(),
        ];
        for n in [
            "gpus", "gbs", "mbs", "seq_len", "tp", "pp", "cp", "vp", "ep", "fsdp", "ga",
        ] {
            c.push(f.value(n).map(|v| v.to_string()).unwrap_or_default());
        }
        c.push(
            row.window
                .as_ref()
                .map(|w| w.first.to_string())
                .unwrap_or_default(),
        );
        c.push(
            row.window
                .as_ref()
                .map(|w| w.last.to_string())
                .unwrap_or_default(),
        );
        c.push(num(row.step_time_s.map(|s| s.mean)));
        c.push(num(row.step_time_s.and_then(|s| s.sd)));
        c.push(row.step_time_s.map(|s| s.n.to_string()).unwrap_or_default());
        c.push(num(row.samples_per_second));
        c.push(num(row.tokens_per_second));
        c.push(num(row.tokens_per_second_per_gpu));
        c.push(num(row.model_tflops_per_gpu.as_ref().map(|t| t.value)));
        c.push(num(row.mfu.as_ref().map(|m| m.value)));
        c.push(num(row.peak_tflops));
        match &row.reference {
            Some(Ok(m)) => {
                c.push(m.label.clone());
                c.push(num(m.pct()));
            }
            Some(Err(e)) => {
                c.push(format!("none: {e}"));
                c.push(String::new());
            }
            None => {
                c.push(String::new());
                c.push(String::new());
            }
        }
        c.push(row.status.kind.as_str().to_string());
        c.push(row.status.detail.clone());
        let m = row.model_flops.as_ref();
        c.push(num(m.map(|m| m.flops_per_token)));
        c.push(num(m.and_then(|m| m.tflops_per_gpu)));
        c.push(num(m.and_then(|m| m.mfu)));
        c.push(num(m.and_then(|m| m.difference_pct)));
        let e = row.energy.as_ref();
        c.push(num(e.map(|e| e.average_power_w)));
        c.push(num(e.and_then(|e| e.joules_per_sample)));
        c.push(num(e.and_then(|e| e.joules_per_token)));
        let line: Vec<String> = c.iter().map(|x| csv_cell(x).into_owned()).collect();
        writeln!(out, "{}", line.join(","))?;
    }
    Ok(())
}
