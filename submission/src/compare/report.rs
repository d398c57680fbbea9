//! Text forms of a comparison — the human table (stdout), Markdown and
//! JSON (the serde form) — through the report layer's [`Report`] trait.

use super::{Comparison, GroupComparison, MetricComparison};
use crate::figures::{fig, write_aligned};
use referee_rules::escape;
use referee_rules::report::{Detail, Report};
use std::fmt::Write as _;

pub use crate::figures::pct_change as pct;

/// A setting as typed: at most 3 decimals, trailing zeros dropped.
pub fn setting(x: f64) -> String {
    let s = format!("{x:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

fn opt(x: Option<f64>) -> String {
    x.map(fig).unwrap_or_else(|| "—".into())
}

fn ci_text(m: &MetricComparison) -> String {
    match m.ci {
        Some(c) => format!("[{}, {}]", pct(c.lo), pct(c.hi)),
        None => "—".into(),
    }
}

fn p_text(m: &MetricComparison) -> String {
    match m.mann_whitney {
        Some(w) => format!("{:.4}", w.p_two_sided),
        None => "—".into(),
    }
}

/// The settings line every report carries.
pub fn settings_line(c: &Comparison) -> String {
    let mut s = format!(
        "threshold {} %, confidence {}; {} ({} resamples, seed {}); Mann–Whitney U two-sided beside it",
        setting(c.threshold_pct),
        setting(c.confidence),
        c.bootstrap.method,
        c.bootstrap.resamples,
        c.bootstrap.seed
    );
    if c.force {
        s.push_str("; --force: definitions are not enforced");
    }
    s
}

fn forced_lines(c: &Comparison) -> Vec<String> {
    if !c.force {
        return Vec::new();
    }
    let mut v = vec!["--force was given: runs are compared across different benchmark definitions where they differ".to_string()];
    if c.forced_differences.is_empty() {
        v.push("(no difference of definition was found)".into());
    }
    for d in &c.forced_differences {
        v.push(format!("forced: {d}"));
    }
    v
}

/// One row of the summary table.
struct Row {
    cells: Vec<String>,
}

fn rows(c: &Comparison) -> Vec<Row> {
    let mut out = Vec::new();
    for g in &c.groups {
        let p = g.primary();
        out.push(Row {
            cells: vec![
                g.label.clone(),
                mode_text(g),
                p.map(|m| m.label.to_string()).unwrap_or_else(|| "—".into()),
                opt(p.and_then(|m| m.baseline)),
                opt(p.and_then(|m| m.candidate)),
                p.and_then(|m| m.relative_change)
                    .map(pct)
                    .unwrap_or_else(|| "—".into()),
                p.map(ci_text).unwrap_or_else(|| "—".into()),
                p.map(p_text).unwrap_or_else(|| "—".into()),
                g.convergence
                    .as_ref()
                    .map(|cv| cv.test.change.as_str().to_string())
                    .unwrap_or_else(|| "—".into()),
                g.verdict.as_str().to_uppercase(),
            ],
        });
    }
    out
}

fn mode_text(g: &GroupComparison) -> String {
    if g.baseline.mode == g.candidate.mode {
        g.baseline.mode.as_str().to_string()
    } else {
        format!("{}→{}", g.baseline.mode.as_str(), g.candidate.mode.as_str())
    }
}

fn header(c: &Comparison) -> Vec<String> {
    [
        "benchmark · system",
        "mode",
        "metric",
        "baseline",
        "candidate",
        "change",
        &format!("{} % CI", setting(c.confidence * 100.0)),
        "MWU p",
        "convergence",
        "verdict",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn metric_line(m: &MetricComparison) -> String {
    let mut s = format!(
        "{}: baseline {}, candidate {}",
        m.label,
        opt(m.baseline),
        opt(m.candidate)
    );
    if let Some(ch) = m.relative_change {
        let _ = write!(s, ", change {}", pct(ch));
    }
    if m.ci.is_some() {
        let _ = write!(s, ", CI {}", ci_text(m));
    }
    if let Some(w) = m.mann_whitney {
        let _ = write!(s, ", Mann–Whitney p = {:.4} ({})", w.p_two_sided, w.method);
    }
    let _ = write!(
        s,
        " → {}{}",
        m.change.as_str(),
        if m.decides { "" } else { " (informational)" }
    );
    if let Some(r) = &m.reason {
        let _ = write!(s, " [{r}]");
    }
    s
}

/// Detail lines of a group (shared by the text and Markdown forms).
/// The run sets that found no partner on the other side, a line each (for
/// the "Not compared" sections of the Markdown and HTML reports).
pub fn not_compared_lines(c: &Comparison) -> Vec<String> {
    let base = c
        .only_in_baseline
        .iter()
        .map(|x| format!("only in the baseline: {x}"));
    let cand = c
        .only_in_candidate
        .iter()
        .map(|x| format!("only in the candidate: {x}"));
    base.chain(cand).collect()
}

pub fn detail_lines(g: &GroupComparison) -> Vec<String> {
    let mut v = Vec::new();
    let side = |name: &str, s: &super::RunSet| {
        if s.kind == super::SourceKind::FrameworkLog {
            return format!(
                "{name}: {} run{} ({} logs; {}) of {} in {}",
                s.runs.len(),
                if s.runs.len() == 1 { "" } else { "s" },
                s.ruleset,
                s.perf_config.as_deref().unwrap_or("configuration unknown"),
                s.label(),
                s.dirs.join(", ")
            );
        }
        let ok = s.runs.iter().filter(|r| r.minutes.is_some()).count();
        let how = if s.mode == super::Mode::Throughput {
            "throughput mode".to_string()
        } else {
            format!(
                "{ok} counted, {} converged",
                s.runs.iter().filter(|r| r.converged).count()
            )
        };
        format!(
            "{name}: {} run{} ({how}) of {} in {}; ruleset {} {}",
            s.runs.len(),
            if s.runs.len() == 1 { "" } else { "s" },
            s.label(),
            s.dirs.join(", "),
            s.usage,
            s.ruleset
        )
    };
    v.push(side("baseline", &g.baseline));
    v.push(side("candidate", &g.candidate));
    if let Some(t) = &g.time_to_train {
        v.push(metric_line(t));
    }
    for m in &g.throughput {
        v.push(metric_line(m));
    }
    if let Some(cv) = &g.convergence {
        let t = &cv.test;
        let mut s = format!(
            "convergence ({} to target, olympic mean of converged runs): baseline {} ({} runs), candidate {} ({} runs), change {}",
            cv.unit,
            fig(t.baseline_mean),
            cv.baseline_points.len(),
            fig(t.candidate_mean),
            cv.candidate_points.len(),
            pct(t.relative_change)
        );
        if let (Some(f), Some(b)) = (&t.candidate_vs_baseline, &t.baseline_vs_candidate) {
            let _ = write!(
                s,
                "; candidate vs the baseline's minimum acceptable mean {}{}; baseline vs the candidate's minimum {}{}",
                fig(f.min_acceptable_mean),
                if f.faster { " (below)" } else { "" },
                fig(b.min_acceptable_mean),
                if b.faster { " (below)" } else { "" },
            );
        }
        let _ = write!(s, " → {}", t.change.as_str());
        if let Some(r) = &t.reason {
            let _ = write!(s, " [{r}]");
        }
        v.push(s);
    }
    for d in &g.definition.differences {
        v.push(format!("definition differs (forced): {d}"));
    }
    for n in &g.notes {
        v.push(format!("note: {n}"));
    }
    let mut verdict = format!("verdict: {} — {}", g.verdict.as_str(), g.reasons.join("; "));
    if let Some(b) = &g.breakdown {
        let _ = write!(verdict, "; where the time went: {}", b.summary);
    }
    v.push(verdict);
    if let Some(r) = &g.ratio {
        v.push(ratio_line(r));
    }
    v
}

/// The `--min-ratio` line of a group.
pub fn ratio_line(r: &super::explain::RatioCheck) -> String {
    format!(
        "min ratio {}: {} ratio {:.3} (above 1: the candidate is faster){}",
        setting(r.min_ratio),
        r.metric,
        r.ratio,
        if r.below { " — BELOW" } else { "" }
    )
}

fn side_fig(f: &super::explain::SideFigure) -> String {
    let mut s = format!(
        "{} ({} run{}",
        fig(f.value),
        f.runs,
        if f.runs == 1 { "" } else { "s" }
    );
    if f.runs > 1 {
        let _ = write!(s, ", {}–{}", fig(f.min), fig(f.max));
        if let Some(cv) = f.cv {
            let _ = write!(s, ", CV {:.1} %", cv * 100.0);
        }
    }
    s.push(')');
    s
}

/// Where the time went, a line per factor after the summary; then, in
/// throughput mode, tokens/s and MFU split the same way.
pub fn breakdown_lines(g: &GroupComparison) -> Vec<String> {
    let mut v = g
        .breakdown
        .as_ref()
        .map_or_else(Vec::new, |b| one_breakdown(b, ""));
    for b in &g.rate_breakdowns {
        v.extend(one_breakdown(b, &format!("{}: ", b.label)));
    }
    v
}

fn one_breakdown(b: &super::explain::Breakdown, prefix: &str) -> Vec<String> {
    let mut v = vec![format!(
        "{prefix}{} (dominant: {}; {}; over {}; product of the factors {})",
        b.summary,
        b.dominant,
        b.relation,
        b.runs,
        pct(b.product_change)
    )];
    for f in &b.factors {
        let mut s = format!(
            "{} [{}]: baseline {}, candidate {}, change {}",
            f.label,
            f.unit,
            side_fig(&f.baseline),
            side_fig(&f.candidate),
            pct(f.relative_change)
        );
        if let Some(ci) = f.ci {
            let _ = write!(s, ", CI [{}, {}]", pct(ci.lo), pct(ci.hi));
        }
        v.push(s);
    }
    if let Some((eb, ec)) = b.eval_minutes {
        v.push(format!(
            "evaluation time per run: baseline {} min, candidate {} min",
            fig(eb),
            fig(ec)
        ));
    }
    v
}

fn values(v: &[String]) -> String {
    if v.is_empty() {
        "(not recorded)".into()
    } else {
        v.join(" | ")
    }
}

/// What changed: a line per differing fact (ranked), the seeds, and one
/// line counting the unchanged facts.
pub fn changed_lines(g: &GroupComparison) -> Vec<String> {
    let d = &g.changed;
    let mut v = Vec::new();
    for c in &d.changed {
        v.push(format!(
            "{} · {}: {} → {}",
            c.category.as_str(),
            c.name,
            values(&c.baseline),
            values(&c.candidate)
        ));
    }
    for s in &d.seeds {
        v.push(format!("seeds · {}: {}", s.name, s.status));
    }
    v.push(format!(
        "{} fact{} differ{}, {} unchanged",
        d.changed.len(),
        if d.changed.len() == 1 { "" } else { "s" },
        if d.changed.len() == 1 { "s" } else { "" },
        d.unchanged
    ));
    v
}

fn summary_line(c: &Comparison) -> String {
    let s = &c.summary;
    format!(
        "{} group{} compared: {} regression{}, {} convergence change{}, {} improvement{}, {} without significant change, {} inconclusive → exit {}",
        s.groups,
        if s.groups == 1 { "" } else { "s" },
        s.regressions,
        if s.regressions == 1 { "" } else { "s" },
        s.convergence_changes,
        if s.convergence_changes == 1 { "" } else { "s" },
        s.improvements,
        if s.improvements == 1 { "" } else { "s" },
        s.no_significant_change,
        s.inconclusive,
        c.exit_code
    )
}

/// The human form: a table, then the details of every group.
pub fn write_human(out: &mut dyn std::io::Write, c: &Comparison) -> std::io::Result<()> {
    use escape::term;
    writeln!(out, "referee compare")?;
    writeln!(out, "  baseline:  {}", term(&c.baseline))?;
    writeln!(out, "  candidate: {}", term(&c.candidate))?;
    writeln!(out, "  {}", term(&settings_line(c)))?;
    for l in forced_lines(c) {
        writeln!(out, "  {}", term(&l))?;
    }
    writeln!(out)?;
    let rows: Vec<Vec<String>> = rows(c)
        .into_iter()
        .map(|r| r.cells.iter().map(|x| term(x).into_owned()).collect())
        .collect();
    write_aligned(out, &header(c), &rows)?;
    for g in &c.groups {
        writeln!(out)?;
        writeln!(out, "{}", term(&g.label))?;
        for l in detail_lines(g) {
            writeln!(out, "  {}", term(&l))?;
        }
        let why = breakdown_lines(g);
        if !why.is_empty() {
            writeln!(out, "  where the time went:")?;
            for l in why {
                writeln!(out, "    {}", term(&l))?;
            }
        }
        writeln!(out, "  what changed:")?;
        for l in changed_lines(g) {
            writeln!(out, "    {}", term(&l))?;
        }
    }
    if !c.only_in_baseline.is_empty() {
        writeln!(out)?;
        writeln!(
            out,
            "only in the baseline (not compared): {}",
            term(&c.only_in_baseline.join(", "))
        )?;
    }
    if !c.only_in_candidate.is_empty() {
        writeln!(
            out,
            "only in the candidate (not compared): {}",
            term(&c.only_in_candidate.join(", "))
        )?;
    }
    writeln!(out)?;
    writeln!(out, "{}", summary_line(c))?;
    Ok(())
}

/// The Markdown form.
pub fn markdown(c: &Comparison) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# referee compare\n");
    let md = escape::markdown;
    let _ = writeln!(s, "* baseline: {}", escape::markdown_code(&c.baseline));
    let _ = writeln!(s, "* candidate: {}", escape::markdown_code(&c.candidate));
    let _ = writeln!(s, "* {}", md(&settings_line(c)));
    for l in forced_lines(c) {
        let _ = writeln!(s, "* **{}**", md(&l));
    }
    let _ = writeln!(s, "\n**{}**\n", summary_line(c));
    let head = header(c);
    let _ = writeln!(s, "| {} |", head.join(" | "));
    let _ = writeln!(s, "|{}", " --- |".repeat(head.len()));
    for r in rows(c) {
        let cells: Vec<String> = r.cells.iter().map(|x| md(x).into_owned()).collect();
        let _ = writeln!(s, "| {} |", cells.join(" | "));
    }
    for g in &c.groups {
        let _ = writeln!(s, "\n## {}\n", md(&g.label));
        for l in detail_lines(g) {
            let _ = writeln!(s, "* {}", md(&l));
        }
        let why = breakdown_lines(g);
        if !why.is_empty() {
            let _ = writeln!(s, "\n### Where the time went\n");
            for l in why {
                let _ = writeln!(s, "* {}", md(&l));
            }
        }
        let _ = writeln!(s, "\n### What changed\n");
        for l in changed_lines(g) {
            let _ = writeln!(s, "* {}", md(&l));
        }
    }
    let not_compared = not_compared_lines(c);
    if !not_compared.is_empty() {
        let _ = writeln!(s, "\n## Not compared\n");
        for l in &not_compared {
            let _ = writeln!(s, "* {}", md(l));
        }
    }
    let _ = writeln!(s, "\n## How the verdicts are made\n");
    // referee's own words (static text), Markdown as written.
    for r in &c.rules {
        let _ = writeln!(s, "* {r}");
    }
    s
}

impl Report for Comparison {
    fn write_human(&self, out: &mut dyn std::io::Write, _: Detail) -> std::io::Result<()> {
        write_human(out, self)
    }

    fn write_markdown(&self, out: &mut dyn std::io::Write, _: Detail) -> std::io::Result<()> {
        out.write_all(markdown(self).as_bytes())
    }
}
