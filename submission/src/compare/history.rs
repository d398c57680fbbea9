//! `referee compare A B C …`: a series of releases. Each release is
//! compared with the previous one and with the first (every comparison is
//! [`super::compare`]'s, with its intervals and verdicts); a series per
//! benchmark group of the first release gives one row per release, the
//! first release where a significant change appears, and the gate: exit 1
//! when any step — against the previous release or the first — fails
//! (regression or convergence change), or, with `--min-ratio`, when a
//! release's performance against the first is below the ratio.

use super::explain::RatioCheck;
use super::stats::{Better, BootstrapCi, Change};
use super::{
    BootstrapSettings, CompareError, Comparison, EXIT_OK, EXIT_REGRESSION, GroupComparison,
    Options, Side, Verdict, compare,
};
use crate::figures::fig;
use referee_rules::escape::{self, term};
use referee_rules::report::{Detail, Report};
use serde::Serialize;
use std::fmt::Write as _;

/// One release against another.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    pub relative_change: Option<f64>,
    pub ci: Option<BootstrapCi>,
    /// The deciding metric's change.
    pub change: Change,
    pub verdict: Verdict,
    /// Where the time went (the breakdown's summary).
    pub why: Option<String>,
    /// How many recorded facts differ, and the first few, ranked.
    pub changed_count: usize,
    pub changed: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio: Option<RatioCheck>,
}

/// One release of a series.
#[derive(Debug, Clone, Serialize)]
pub struct Release {
    /// 1-based position on the command line.
    pub index: usize,
    pub path: String,
    /// The deciding metric's figure (olympic score, mean samples/s).
    pub figure: Option<f64>,
    pub runs: usize,
    pub vs_previous: Option<Step>,
    pub vs_first: Option<Step>,
}

/// Where a significant change first appears.
#[derive(Debug, Clone, Serialize)]
pub struct FirstChange {
    pub index: usize,
    pub path: String,
    /// `previous` or `first`: the comparison that shows it.
    pub against: &'static str,
    pub verdict: Verdict,
    pub relative_change: Option<f64>,
}

/// One benchmark group across the releases.
#[derive(Debug, Clone, Serialize)]
pub struct Series {
    pub label: String,
    pub benchmark: String,
    pub metric: &'static str,
    pub metric_label: &'static str,
    pub better: Better,
    pub releases: Vec<Release>,
    pub first_significant_change: Option<FirstChange>,
    /// The first release whose step fails the gate (regression or
    /// convergence change), against the previous release, else the first.
    pub first_failure: Option<FirstChange>,
    /// Any step fails the gate.
    pub fails: bool,
}

/// The whole history: what `--json` prints.
#[derive(Debug, Clone, Serialize)]
pub struct History {
    pub releases: Vec<String>,
    pub threshold_pct: f64,
    pub confidence: f64,
    pub bootstrap: BootstrapSettings,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_ratio: Option<f64>,
    pub series: Vec<Series>,
    /// Why the gate fails, a line per failing step.
    pub failures: Vec<String>,
    pub exit_code: i32,
    pub rules: Vec<&'static str>,
}

pub const HISTORY_RULES: &[&str] = &[
    "each release is compared with the previous one and with the first, exactly as `referee compare PREVIOUS RELEASE` would",
    "a series follows each benchmark group of the first release; a release's figure is its deciding metric (olympic score, or mean samples/s)",
    "first significant change: the first release whose verdict against the previous release (else against the first) is neither 'no significant change' nor 'inconclusive'; first failing release: likewise, the first whose verdict fails the gate",
    "exit 1 when any comparison along the series fails (regression or convergence change), or with --min-ratio when a release's performance against the first is below the ratio",
];

fn key(s: &super::RunSet) -> String {
    format!("{} ({})", s.label(), s.mode.as_str())
}

fn step(g: &GroupComparison) -> Step {
    let p = g.primary();
    Step {
        relative_change: p.and_then(|m| m.relative_change),
        ci: p.and_then(|m| m.ci),
        change: p.map(|m| m.change).unwrap_or(Change::Inconclusive),
        verdict: g.verdict,
        why: g.breakdown.as_ref().map(|b| b.summary.clone()),
        changed_count: g.changed.changed.len(),
        changed: g
            .changed
            .changed
            .iter()
            .take(5)
            .map(|c| {
                format!(
                    "{}: {} → {}",
                    c.name,
                    c.baseline.join(" | "),
                    c.candidate.join(" | ")
                )
            })
            .collect(),
        ratio: g.ratio.clone(),
    }
}

fn significant(v: Verdict) -> bool {
    !matches!(v, Verdict::NoSignificantChange | Verdict::Inconclusive)
}

/// The first release whose verdict against the previous release (else
/// against the first) satisfies `pred`.
fn first_where(releases: &[Release], pred: fn(Verdict) -> bool) -> Option<FirstChange> {
    releases.iter().find_map(|r| {
        let (against, s) = match (&r.vs_previous, &r.vs_first) {
            (Some(p), _) if pred(p.verdict) => ("previous", p),
            (_, Some(f)) if pred(f.verdict) => ("first", f),
            _ => return None,
        };
        Some(FirstChange {
            index: r.index,
            path: r.path.clone(),
            against,
            verdict: s.verdict,
            relative_change: s.relative_change,
        })
    })
}

/// Compare a series of releases (at least 2).
pub fn history(sides: &[Side], opts: &Options) -> Result<History, CompareError> {
    if sides.len() < 2 {
        return Err(CompareError::History("needs at least two releases".into()));
    }
    let label = |i: usize| format!("release {} ({})", i + 1, sides[i].root.display());
    let prev_opts = Options {
        min_ratio: None,
        ..*opts
    };
    let mut vs_prev: Vec<Option<Comparison>> = vec![None];
    let mut vs_first: Vec<Option<Comparison>> = vec![None];
    for i in 1..sides.len() {
        let f = compare(&sides[0], &sides[i], opts)
            .map_err(|e| CompareError::History(format!("{} against release 1: {e}", label(i))))?;
        let p = if i == 1 {
            None
        } else {
            Some(compare(&sides[i - 1], &sides[i], &prev_opts).map_err(|e| {
                CompareError::History(format!("{} against the previous: {e}", label(i)))
            })?)
        };
        vs_first.push(Some(f));
        vs_prev.push(p);
    }
    let first = vs_first[1].as_ref().expect("release 2");
    let mut series = Vec::new();
    let mut failures = Vec::new();
    for g0 in &first.groups {
        let k = key(&g0.baseline);
        let p0 = g0.primary();
        let mut releases = vec![Release {
            index: 1,
            path: sides[0].root.display().to_string(),
            figure: p0.and_then(|m| m.baseline),
            runs: g0.baseline.runs.len(),
            vs_previous: None,
            vs_first: None,
        }];
        for i in 1..sides.len() {
            let gf = vs_first[i]
                .as_ref()
                .and_then(|c| c.groups.iter().find(|g| key(&g.baseline) == k));
            let Some(gf) = gf else {
                failures.push(format!("{k}: not in {}", label(i)));
                continue;
            };
            let ck = key(&gf.candidate);
            let gp = match &vs_prev[i] {
                Some(c) => c.groups.iter().find(|g| key(&g.candidate) == ck),
                None => Some(gf),
            };
            let r = Release {
                index: i + 1,
                path: sides[i].root.display().to_string(),
                figure: gf.primary().and_then(|m| m.candidate),
                runs: gf.candidate.runs.len(),
                vs_previous: gp.map(step),
                vs_first: Some(step(gf)),
            };
            for (what, s) in [
                ("the previous release", &r.vs_previous),
                ("release 1", &r.vs_first),
            ] {
                if let Some(s) = s {
                    if s.verdict.fails() {
                        failures.push(format!(
                            "{k}: {} against {what}: {}",
                            label(i),
                            s.verdict.as_str()
                        ));
                    }
                    if let Some(rc) = &s.ratio
                        && rc.below
                    {
                        failures.push(format!(
                            "{k}: {} against {what}: {} ratio {:.3} below {}",
                            label(i),
                            rc.metric,
                            rc.ratio,
                            rc.min_ratio
                        ));
                    }
                }
            }
            releases.push(r);
        }
        let first_significant_change = first_where(&releases, significant);
        let first_failure = first_where(&releases, Verdict::fails);
        let fails = failures.iter().any(|f| f.starts_with(&format!("{k}:")));
        series.push(Series {
            label: g0.label.clone(),
            benchmark: g0.benchmark.clone(),
            metric: p0.map_or("—", |m| m.metric),
            metric_label: p0.map_or("—", |m| m.label),
            better: p0.map_or(Better::Lower, |m| m.better),
            releases,
            first_significant_change,
            first_failure,
            fails,
        });
    }
    Ok(History {
        releases: sides.iter().map(|s| s.root.display().to_string()).collect(),
        threshold_pct: first.threshold_pct,
        confidence: first.confidence,
        bootstrap: first.bootstrap.clone(),
        min_ratio: opts.min_ratio,
        series,
        exit_code: if failures.is_empty() {
            EXIT_OK
        } else {
            EXIT_REGRESSION
        },
        failures,
        rules: HISTORY_RULES.to_vec(),
    })
}

fn pct(x: Option<f64>) -> String {
    x.map(super::report::pct).unwrap_or_else(|| "—".into())
}

fn ci(s: &Step) -> String {
    s.ci.map(|c| {
        format!(
            "[{}, {}]",
            super::report::pct(c.lo),
            super::report::pct(c.hi)
        )
    })
    .unwrap_or_else(|| "—".into())
}

/// The table of a series: header and rows (text and Markdown).
pub fn table(s: &Series, confidence: f64) -> (Vec<String>, Vec<Vec<String>>) {
    let c = super::report::setting(confidence * 100.0);
    let head = [
        "release".to_string(),
        s.metric_label.to_string(),
        "runs".into(),
        "vs previous".into(),
        format!("{c} % CI"),
        "verdict".into(),
        "vs first".into(),
        format!("{c} % CI"),
        "verdict".into(),
        "where the time went (vs previous)".into(),
    ];
    let rows = s
        .releases
        .iter()
        .map(|r| {
            let p = r.vs_previous.as_ref();
            let f = r.vs_first.as_ref();
            vec![
                format!("{} {}", r.index, r.path),
                r.figure.map(fig).unwrap_or_else(|| "—".into()),
                r.runs.to_string(),
                p.map(|s| pct(s.relative_change))
                    .unwrap_or_else(|| "—".into()),
                p.map(ci).unwrap_or_else(|| "—".into()),
                p.map(|s| s.verdict.as_str().to_string())
                    .unwrap_or_else(|| "—".into()),
                f.map(|s| pct(s.relative_change))
                    .unwrap_or_else(|| "—".into()),
                f.map(ci).unwrap_or_else(|| "—".into()),
                f.map(|s| s.verdict.as_str().to_string())
                    .unwrap_or_else(|| "—".into()),
                p.and_then(|s| s.why.clone()).unwrap_or_else(|| "—".into()),
            ]
        })
        .collect();
    (head.to_vec(), rows)
}

/// The lines under a series' table.
pub fn series_lines(s: &Series) -> Vec<String> {
    let mut v = Vec::new();
    let first = |what: &str, f: &FirstChange| {
        format!(
            "{what}: release {} ({}), {} against the {} ({})",
            f.index,
            f.path,
            f.verdict.as_str(),
            if f.against == "previous" {
                "previous release"
            } else {
                "first release"
            },
            pct(f.relative_change)
        )
    };
    match &s.first_significant_change {
        Some(f) => v.push(first("first significant change", f)),
        None => v.push("no significant change along the series".into()),
    }
    if let Some(f) = &s.first_failure
        && s.first_significant_change.as_ref().map(|x| x.index) != Some(f.index)
    {
        v.push(first("first failing release", f));
    }
    for r in &s.releases {
        if let Some(p) = &r.vs_previous
            && p.changed_count > 0
        {
            v.push(format!(
                "release {}: {} recorded fact{} changed against the previous: {}{}",
                r.index,
                p.changed_count,
                if p.changed_count == 1 { "" } else { "s" },
                p.changed.join("; "),
                if p.changed_count > p.changed.len() {
                    "; …"
                } else {
                    ""
                }
            ));
        }
        if let Some(rc) = r.vs_first.as_ref().and_then(|f| f.ratio.as_ref()) {
            v.push(format!(
                "release {}: {}",
                r.index,
                super::report::ratio_line(rc)
            ));
        }
    }
    v
}

fn settings(h: &History) -> String {
    let mut s = format!(
        "threshold {} %, confidence {}; {} ({} resamples, seed {})",
        super::report::setting(h.threshold_pct),
        super::report::setting(h.confidence),
        h.bootstrap.method,
        h.bootstrap.resamples,
        h.bootstrap.seed
    );
    if let Some(r) = h.min_ratio {
        let _ = write!(s, "; min ratio {}", super::report::setting(r));
    }
    s
}

fn summary(h: &History) -> String {
    format!(
        "{} release{}, {} series: {} failing step{} → exit {}",
        h.releases.len(),
        if h.releases.len() == 1 { "" } else { "s" },
        h.series.len(),
        h.failures.len(),
        if h.failures.len() == 1 { "" } else { "s" },
        h.exit_code
    )
}

impl Report for History {
    fn write_human(&self, out: &mut dyn std::io::Write, _: Detail) -> std::io::Result<()> {
        writeln!(
            out,
            "referee compare: history of {} releases",
            self.releases.len()
        )?;
        for (i, r) in self.releases.iter().enumerate() {
            writeln!(out, "  {}: {}", i + 1, term(r))?;
        }
        writeln!(out, "  {}", term(&settings(self)))?;
        for s in &self.series {
            writeln!(out)?;
            writeln!(out, "{} — {}", term(&s.label), s.metric_label)?;
            let (head, rows) = table(s, self.confidence);
            let rows: Vec<Vec<String>> = rows
                .iter()
                .map(|r| r.iter().map(|x| term(x).into_owned()).collect())
                .collect();
            crate::figures::write_aligned(out, &head, &rows)?;
            for l in series_lines(s) {
                writeln!(out, "  {}", term(&l))?;
            }
        }
        if !self.failures.is_empty() {
            writeln!(out)?;
            for f in &self.failures {
                writeln!(out, "FAIL {}", term(f))?;
            }
        }
        writeln!(out)?;
        writeln!(out, "{}", summary(self))
    }

    fn write_markdown(&self, out: &mut dyn std::io::Write, _: Detail) -> std::io::Result<()> {
        out.write_all(markdown(self).as_bytes())
    }
}

/// The Markdown form.
pub fn markdown(h: &History) -> String {
    let md = escape::markdown;
    let mut s = String::new();
    let _ = writeln!(s, "# referee compare: history\n");
    for (i, r) in h.releases.iter().enumerate() {
        let _ = writeln!(s, "{}. {}", i + 1, escape::markdown_code(r));
    }
    let _ = writeln!(s, "\n* {}", md(&settings(h)));
    let _ = writeln!(s, "\n**{}**", summary(h));
    for f in &h.failures {
        let _ = writeln!(s, "* FAIL {}", md(f));
    }
    for x in &h.series {
        let _ = writeln!(s, "\n## {} — {}\n", md(&x.label), x.metric_label);
        let (head, rows) = table(x, h.confidence);
        let _ = writeln!(s, "| {} |", head.join(" | "));
        let _ = writeln!(s, "|{}", " --- |".repeat(head.len()));
        for r in rows {
            let cells: Vec<String> = r.iter().map(|c| md(c).into_owned()).collect();
            let _ = writeln!(s, "| {} |", cells.join(" | "));
        }
        let _ = writeln!(s);
        for l in series_lines(x) {
            let _ = writeln!(s, "* {}", md(&l));
        }
    }
    let _ = writeln!(s, "\n## How the gate is made\n");
    // referee's own words (static text), Markdown as written.
    for r in &h.rules {
        let _ = writeln!(s, "* {r}");
    }
    s
}
