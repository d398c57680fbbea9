//! The HTML form: one self-contained page (no script, no external file)
//! with inline SVG plots drawn by `plotters`' SVG backend.
//!
//! Fonts: plotters is built without its `ttf` and `ab_glyph` features, so
//! it needs no fontconfig, freetype or font file. Its built-in ("naive")
//! font only estimates text extents for the layout, and the SVG backend
//! writes every label as an SVG `<text>` element with a generic family
//! (`sans-serif`) that the browser renders with whatever font it has.

use super::report::{detail_lines, not_compared_lines, pct, setting, settings_line};
use super::{Comparison, GroupComparison, Mode, RunRecord, RunSet};
use crate::figures::fig;
use crate::perf::html::{StepSeries, draw_legend, legend_mark, padded, plot_chart, step_time_svg};
use plotters::prelude::*;
use referee_rules::escape;
use std::fmt::Write as _;

/// Colour of the baseline's series (`stroke`/`fill` in the SVG).
pub const BASELINE_COLOR: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
/// Colour of the candidate's series.
pub const CANDIDATE_COLOR: RGBColor = RGBColor(0xd6, 0x27, 0x28);
const TARGET_COLOR: RGBColor = RGBColor(0x55, 0x55, 0x55);

/// `#RRGGBB` of a colour, as the SVG backend writes it.
pub fn hex(c: RGBColor) -> String {
    format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
}

const W: u32 = 560;
const H: u32 = 380;

type PlotResult = Result<(), Box<dyn std::error::Error>>;

/// A plot of the page could not be drawn.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// The plotting library failed on the `plot` plot (`evaluation`,
    /// `distribution`); `message`: its error.
    #[error("drawing the {plot} plot: {message}")]
    Draw { plot: &'static str, message: String },
    /// The step-time plot (drawn by `referee perf`'s code).
    #[error(transparent)]
    StepTimes(#[from] crate::perf::error::DrawError),
}

fn drawn(plot: &'static str, r: PlotResult) -> Result<(), PlotError> {
    r.map_err(|e| PlotError::Draw {
        plot,
        message: e.to_string(),
    })
}

/// Evaluation metric against samples (or epochs) for every run of both
/// sides; one polyline per run, in the side's colour.
pub fn eval_curves_svg(g: &GroupComparison) -> Result<Option<String>, PlotError> {
    let sides: [(&RunSet, RGBColor, &str); 2] = [
        (&g.baseline, BASELINE_COLOR, "baseline"),
        (&g.candidate, CANDIDATE_COLOR, "candidate"),
    ];
    let pts: Vec<(f64, f64)> = sides
        .iter()
        .flat_map(|(s, _, _)| s.runs.iter().flat_map(|r| r.evals.iter().copied()))
        .collect();
    if pts.is_empty() {
        return Ok(None);
    }
    let target = g.baseline.target.as_ref().and_then(|t| t["value"].as_f64());
    let (x0, x1) = pts
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
            (a.min(p.0), b.max(p.0))
        });
    let (mut y0, mut y1) = pts
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
            (a.min(p.1), b.max(p.1))
        });
    if let Some(t) = target {
        y0 = y0.min(t);
        y1 = y1.max(t);
    }
    let (x0, x1) = padded(x0.min(0.0), x1);
    let (y0, y1) = padded(y0, y1);
    let metric = g
        .baseline
        .target
        .as_ref()
        .and_then(|t| t["metric"].as_str().map(str::to_string))
        .or_else(|| g.baseline.eval_key.clone())
        .unwrap_or_else(|| "evaluation".into());
    let mut svg = String::new();
    let r: PlotResult = (|| {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = plot_chart(
            &root,
            format!("{}: evaluations", g.benchmark),
            x0..x1,
            y0..y1,
        )?;
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .x_desc(g.baseline.eval_unit)
            .y_desc(metric.as_str())
            .x_label_formatter(&|x| tick(*x))
            .y_label_formatter(&|y| tick(*y))
            .draw()?;
        if let Some(t) = target {
            chart
                .draw_series(LineSeries::new(
                    vec![(x0, t), (x1, t)],
                    TARGET_COLOR.stroke_width(1),
                ))?
                .label(format!("target {}", fig(t)))
                .legend(legend_mark(TARGET_COLOR.stroke_width(1)));
        }
        for (s, color, name) in sides {
            let mut first = true;
            for run in s.runs.iter().filter(|r| !r.evals.is_empty()) {
                let mut line = run.evals.clone();
                line.sort_by(|a, b| a.0.total_cmp(&b.0));
                let series = chart.draw_series(LineSeries::new(line, color.stroke_width(2)))?;
                if first {
                    let n = s.runs.iter().filter(|r| !r.evals.is_empty()).count();
                    series
                        .label(format!("{name} ({n} run{})", if n == 1 { "" } else { "s" }))
                        .legend(legend_mark(color.stroke_width(2)));
                    first = false;
                }
            }
        }
        draw_legend(&mut chart)?;
        root.present()?;
        Ok(())
    })();
    drawn("evaluation", r)?;
    Ok(Some(svg))
}

/// Axis tick text: whole numbers without decimals.
fn tick(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{x:.0}")
    } else {
        fig(x)
    }
}

/// What a group's strip plot shows: each side's per-run values and figure,
/// the title, the unit and the column labels.
struct Strip {
    vb: Vec<f64>,
    vc: Vec<f64>,
    figure_b: Option<f64>,
    figure_c: Option<f64>,
    title: &'static str,
    unit: &'static str,
    lb: String,
    lc: String,
}

fn strip_of(g: &GroupComparison) -> Option<Strip> {
    let ttt = g.time_to_train.is_some();
    // Framework logs without a batch size have no samples/s: their step
    // times are shown instead.
    let steps = !ttt
        && !g
            .throughput
            .iter()
            .any(|m| m.metric == "samples_per_second")
        && g.throughput.iter().any(|m| m.metric == "step_time_seconds");
    // Time to train per run × the side's scaling factor, so that the dots
    // and the score (which includes it) share a scale.
    let values = |s: &RunSet| -> Vec<f64> {
        s.runs
            .iter()
            .filter_map(|r| {
                if ttt {
                    r.minutes.map(|m| m * s.scaling_factor)
                } else if steps {
                    r.step_seconds
                } else {
                    r.samples_per_second
                }
            })
            .collect()
    };
    let (vb, vc) = (values(&g.baseline), values(&g.candidate));
    if vb.is_empty() && vc.is_empty() {
        return None;
    }
    let scaled = g.baseline.scaling_factor != 1.0 || g.candidate.scaling_factor != 1.0;
    let metric = |name: &str| g.throughput.iter().find(|m| m.metric == name);
    let (figure_b, figure_c, title, unit) = if let Some(t) = &g.time_to_train {
        (
            t.baseline,
            t.candidate,
            "time to train per run",
            if scaled {
                "minutes × scaling factor (bar: olympic score)"
            } else {
                "minutes (bar: olympic score)"
            },
        )
    } else if steps {
        let m = metric("step_time_seconds");
        (
            m.and_then(|m| m.baseline),
            m.and_then(|m| m.candidate),
            "step time per run (window mean)",
            "seconds (bar: mean)",
        )
    } else {
        let m = metric("samples_per_second");
        (
            m.and_then(|m| m.baseline),
            m.and_then(|m| m.candidate),
            if g.baseline.mode == Mode::Throughput {
                "throughput per run (window)"
            } else {
                "throughput per run"
            },
            "samples/s (bar: mean)",
        )
    };
    let failed = |s: &RunSet| s.runs.iter().filter(|r| ttt && r.minutes.is_none()).count();
    let side_label = |name: &str, n: usize, failed: usize| {
        let mut s = format!("{name} ({n} run{}", if n == 1 { "" } else { "s" });
        if failed > 0 {
            let _ = write!(s, ", {failed} failed");
        }
        s.push(')');
        s
    };
    Some(Strip {
        lb: side_label("baseline", vb.len(), failed(&g.baseline)),
        lc: side_label("candidate", vc.len(), failed(&g.candidate)),
        vb,
        vc,
        figure_b,
        figure_c,
        title,
        unit,
    })
}

/// Per-run values of both sides as a strip plot (baseline in the left
/// column, candidate in the right, runs spread sideways so that equal
/// values stay visible), with each side's figure — the olympic score or
/// the mean — as a horizontal bar across its column.
pub fn distribution_svg(g: &GroupComparison) -> Result<Option<String>, PlotError> {
    let Some(d) = strip_of(g) else {
        return Ok(None);
    };
    let all: Vec<f64> =
        d.vb.iter()
            .chain(&d.vc)
            .copied()
            .chain(d.figure_b)
            .chain(d.figure_c)
            .collect();
    let lo = all.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = all.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (y0, y1) = padded(lo, hi);
    let mut svg = String::new();
    let r: PlotResult = (|| {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE)?;
        // x: the baseline's column is centred at 0.5, the candidate's at
        // 1.5; ticks every 0.5 and only the two centres are labelled.
        let mut chart = plot_chart(
            &root,
            format!("{}: {}", g.benchmark, d.title),
            0.0f64..2.0f64,
            y0..y1,
        )?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .light_line_style(TRANSPARENT)
            .x_labels(5)
            .y_desc(d.unit)
            .y_label_formatter(&|y| tick(*y))
            .x_label_formatter(&|x| {
                if (x - 0.5).abs() < 1e-9 {
                    d.lb.clone()
                } else if (x - 1.5).abs() < 1e-9 {
                    d.lc.clone()
                } else {
                    String::new()
                }
            })
            .draw()?;
        for (centre, vals, figure, color) in [
            (0.5, &d.vb, d.figure_b, BASELINE_COLOR),
            (1.5, &d.vc, d.figure_c, CANDIDATE_COLOR),
        ] {
            if let Some(f) = figure {
                chart.draw_series(std::iter::once(PathElement::new(
                    vec![(centre - 0.35, f), (centre + 0.35, f)],
                    color.stroke_width(3),
                )))?;
            }
            let n = vals.len().max(1) as f64;
            chart.draw_series(vals.iter().enumerate().map(|(i, &v)| {
                // Spread the runs over ±0.25 of the column, in file order.
                let dx = if n > 1.0 {
                    (i as f64 / (n - 1.0) - 0.5) * 0.5
                } else {
                    0.0
                };
                Circle::new((centre + dx, v), 5, color.filled())
            }))?;
        }
        root.present()?;
        Ok(())
    })();
    drawn("distribution", r)?;
    Ok(Some(svg))
}

/// Framework logs: the step time of every iteration of every run, both
/// sides (baseline runs in the baseline's colour, candidate runs in the
/// candidate's).
pub fn step_times_svg(g: &GroupComparison) -> Result<Option<String>, PlotError> {
    let mut series = Vec::new();
    for (s, color, name) in [
        (&g.baseline, BASELINE_COLOR, "baseline"),
        (&g.candidate, CANDIDATE_COLOR, "candidate"),
    ] {
        let runs: Vec<&RunRecord> = s.runs.iter().filter(|r| !r.iterations.is_empty()).collect();
        for (k, r) in runs.iter().enumerate() {
            series.push(StepSeries {
                label: (k == 0).then(|| {
                    format!(
                        "{name} ({} run{})",
                        runs.len(),
                        if runs.len() == 1 { "" } else { "s" }
                    )
                }),
                color,
                points: &r.iterations,
            });
        }
    }
    step_time_svg(
        &format!("{}: step time per iteration", g.benchmark),
        &series,
        None,
    )
    .map_err(PlotError::StepTimes)
}

const STYLE: &str = "body{font-family:sans-serif;margin:24px;color:#222;background:#fff}\
table{border-collapse:collapse;margin:12px 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;font-size:14px}\
th{background:#f3f3f3}.plots{display:flex;flex-wrap:wrap;gap:12px}figure{margin:0}\
.verdict{font-weight:bold}.regression,.convergence-change{color:#b00020}.improvement{color:#1b7f2a}\
.forced{background:#fff3cd;border:1px solid #e0c36b;padding:8px}li{margin:2px 0}\
.key span{display:inline-block;width:14px;height:4px;margin:0 6px 3px 12px}";

/// A list: `open` (which opens the `<ul>`, after a heading or not) on its
/// own line, one escaped `<li>` line per item, then `close`.
fn list<S: AsRef<str>>(
    s: &mut String,
    open: &str,
    items: impl IntoIterator<Item = S>,
    close: &str,
) {
    let _ = writeln!(s, "{open}");
    for item in items {
        let _ = writeln!(s, "<li>{}</li>", escape::html(item.as_ref()));
    }
    let _ = writeln!(s, "{close}");
}

fn forced_block(s: &mut String, c: &Comparison) {
    if !c.force {
        return;
    }
    let _ = writeln!(
        s,
        "<div class=\"forced\"><b>--force</b>: runs are compared across different benchmark definitions where they differ.<ul>"
    );
    if c.forced_differences.is_empty() {
        let _ = writeln!(s, "<li>no difference of definition was found</li>");
    }
    for d in &c.forced_differences {
        let _ = writeln!(s, "<li>{}</li>", escape::html(d));
    }
    let _ = writeln!(s, "</ul></div>");
}

fn summary_table(s: &mut String, c: &Comparison) {
    let _ = writeln!(
        s,
        "<table><tr><th>benchmark · system</th><th>metric</th><th>baseline</th><th>candidate</th><th>change</th><th>{} % CI</th><th>MWU p</th><th>convergence</th><th>verdict</th></tr>",
        setting(c.confidence * 100.0)
    );
    for (i, g) in c.groups.iter().enumerate() {
        let p = g.primary();
        let o = |x: Option<f64>| x.map(fig).unwrap_or_else(|| "—".into());
        let _ = writeln!(
            s,
            "<tr><td><a href=\"#g{}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"verdict {}\">{}</td></tr>",
            i,
            escape::html(&g.label),
            escape::html(p.map(|m| m.label).unwrap_or("—")),
            o(p.and_then(|m| m.baseline)),
            o(p.and_then(|m| m.candidate)),
            p.and_then(|m| m.relative_change)
                .map(pct)
                .unwrap_or_else(|| "—".into()),
            p.and_then(|m| m.ci)
                .map(|ci| format!("[{}, {}]", pct(ci.lo), pct(ci.hi)))
                .unwrap_or_else(|| "—".into()),
            p.and_then(|m| m.mann_whitney)
                .map(|w| format!("{:.4}", w.p_two_sided))
                .unwrap_or_else(|| "—".into()),
            escape::html(
                g.convergence
                    .as_ref()
                    .map(|cv| cv.test.change.as_str())
                    .unwrap_or("—")
            ),
            g.verdict.as_str().replace(' ', "-"),
            escape::html(g.verdict.as_str())
        );
    }
    let _ = writeln!(s, "</table>");
}

fn group_section(s: &mut String, i: usize, g: &GroupComparison) -> Result<(), PlotError> {
    let _ = writeln!(
        s,
        "<section id=\"g{i}\"><h2>{}</h2>",
        escape::html(&g.label)
    );
    let _ = writeln!(s, "<div class=\"plots\">");
    if let Some(svg) = eval_curves_svg(g)? {
        let _ = writeln!(
            s,
            "<figure class=\"plot eval-curves\" data-baseline-runs=\"{}\" data-candidate-runs=\"{}\">{svg}</figure>",
            g.baseline
                .runs
                .iter()
                .filter(|r| !r.evals.is_empty())
                .count(),
            g.candidate
                .runs
                .iter()
                .filter(|r| !r.evals.is_empty())
                .count()
        );
    }
    if let Some(svg) = distribution_svg(g)? {
        let _ = writeln!(s, "<figure class=\"plot distribution\">{svg}</figure>");
    }
    if let Some(svg) = step_times_svg(g)? {
        let count = |set: &RunSet| set.runs.iter().filter(|r| !r.iterations.is_empty()).count();
        let _ = writeln!(
            s,
            "<figure class=\"plot step-times\" data-baseline-runs=\"{}\" data-candidate-runs=\"{}\">{svg}</figure>",
            count(&g.baseline),
            count(&g.candidate)
        );
    }
    list(s, "</div><ul>", detail_lines(g), "</ul>");
    explain_section(s, g);
    let _ = writeln!(s, "</section>");
    Ok(())
}

/// A breakdown's factors, one row each, and their product.
fn breakdown_table(s: &mut String, b: &super::explain::Breakdown) {
    let _ = writeln!(
        s,
        "<table class=\"breakdown\" data-metric=\"{}\"><tr><th>factor</th><th>unit</th><th>baseline</th><th>candidate</th><th>change</th><th>CI</th></tr>",
        b.metric
    );
    let side = |f: &super::explain::SideFigure| {
        format!(
            "{} <small>({}–{}, {} runs)</small>",
            fig(f.value),
            fig(f.min),
            fig(f.max),
            f.runs
        )
    };
    for f in &b.factors {
        let _ = writeln!(
            s,
            "<tr data-factor=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            f.name,
            escape::html(&f.label),
            escape::html(&f.unit),
            side(&f.baseline),
            side(&f.candidate),
            pct(f.relative_change),
            f.ci.map(|c| format!("[{}, {}]", pct(c.lo), pct(c.hi)))
                .unwrap_or_else(|| "—".into())
        );
    }
    let _ = writeln!(
        s,
        "<tr class=\"product\"><td>product</td><td></td><td></td><td></td><td>{}</td><td>measured {}</td></tr></table>",
        pct(b.product_change),
        pct(b.measured_change)
    );
}

/// Where the time went and what changed, as two tables.
fn explain_section(s: &mut String, g: &GroupComparison) {
    if let Some(b) = &g.breakdown {
        let _ = writeln!(
            s,
            "<h3>Where the time went</h3><p class=\"why\"><b>{}</b> — {}; over {}</p>",
            escape::html(&b.summary),
            escape::html(b.relation),
            escape::html(b.runs)
        );
        breakdown_table(s, b);
    }
    for b in &g.rate_breakdowns {
        let _ = writeln!(
            s,
            "<h3>{}</h3><p class=\"why\"><b>{}</b> — {}</p>",
            escape::html(b.label),
            escape::html(&b.summary),
            escape::html(b.relation)
        );
        breakdown_table(s, b);
    }
    let d = &g.changed;
    let _ = writeln!(s, "<h3>What changed</h3>");
    if !d.changed.is_empty() {
        let _ = writeln!(
            s,
            "<table class=\"changed\"><tr><th>kind</th><th>fact</th><th>baseline</th><th>candidate</th></tr>"
        );
        for c in &d.changed {
            let v = |x: &[String]| {
                if x.is_empty() {
                    "<i>not recorded</i>".to_string()
                } else {
                    escape::html(&x.join(" | ")).into_owned()
                }
            };
            let _ = writeln!(
                s,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                c.category.as_str(),
                escape::html(&c.name),
                v(&c.baseline),
                v(&c.candidate)
            );
        }
        let _ = writeln!(s, "</table>");
    }
    let seeds: Vec<String> = d
        .seeds
        .iter()
        .map(|x| format!("{}: {}", x.name, x.status))
        .collect();
    let _ = writeln!(
        s,
        "<p class=\"unchanged\">{} differ, {} unchanged{}</p>",
        d.changed.len(),
        d.unchanged,
        if seeds.is_empty() {
            String::new()
        } else {
            format!("; seeds — {}", escape::html(&seeds.join(", ")))
        }
    );
}

/// The whole page.
pub fn html(c: &Comparison) -> Result<String, PlotError> {
    let mut s = String::new();
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>referee compare</title><style>{STYLE}</style></head><body>\n"
    );
    let _ = writeln!(s, "<h1>referee compare</h1>");
    let _ = writeln!(
        s,
        "<p>baseline <code>{}</code><br>candidate <code>{}</code></p>",
        escape::html(&c.baseline),
        escape::html(&c.candidate)
    );
    let _ = writeln!(
        s,
        "<p class=\"key\">{}<span style=\"background:{}\"></span>baseline<span style=\"background:{}\"></span>candidate</p>",
        escape::html(&settings_line(c)),
        hex(BASELINE_COLOR),
        hex(CANDIDATE_COLOR)
    );
    forced_block(&mut s, c);
    let sm = &c.summary;
    let _ = writeln!(
        s,
        "<p><b>{} regression(s), {} convergence change(s), {} improvement(s), {} without significant change, {} inconclusive — exit code {}</b></p>",
        sm.regressions,
        sm.convergence_changes,
        sm.improvements,
        sm.no_significant_change,
        sm.inconclusive,
        c.exit_code
    );
    summary_table(&mut s, c);
    for (i, g) in c.groups.iter().enumerate() {
        group_section(&mut s, i, g)?;
    }
    let not_compared = not_compared_lines(c);
    if !not_compared.is_empty() {
        list(&mut s, "<h2>Not compared</h2><ul>", &not_compared, "</ul>");
    }
    let verdicts = "<h2>How the verdicts are made</h2><ul>";
    list(&mut s, verdicts, &c.rules, "</ul></body></html>");
    Ok(s)
}

/// A release on the trend plot: (x, change %, interval %).
type TrendPoint = (f64, f64, Option<(f64, f64)>);

/// A series' trend: each release's change against the first (percent) with
/// its confidence interval as an error bar (the first release at 0), the
/// ±threshold band as dashed lines. One filled circle per release.
pub fn trend_svg(
    s: &super::history::Series,
    threshold_pct: f64,
) -> Result<Option<String>, PlotError> {
    // (x, change %, interval %).
    let pts: Vec<TrendPoint> = s
        .releases
        .iter()
        .filter_map(|r| {
            if r.index == 1 {
                return Some((1.0, 0.0, None));
            }
            let f = r.vs_first.as_ref()?;
            let ch = f.relative_change? * 100.0;
            Some((
                r.index as f64,
                ch,
                f.ci.map(|c| (c.lo * 100.0, c.hi * 100.0)),
            ))
        })
        .collect();
    if pts.len() < 2 {
        return Ok(None);
    }
    let mut lo = -threshold_pct;
    let mut hi = threshold_pct;
    for (_, y, ci) in &pts {
        lo = lo.min(*y);
        hi = hi.max(*y);
        if let Some((a, b)) = ci {
            lo = lo.min(*a);
            hi = hi.max(*b);
        }
    }
    let (y0, y1) = padded(lo, hi);
    let n = s.releases.len() as f64;
    let mut svg = String::new();
    let r: PlotResult = (|| {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = plot_chart(
            &root,
            format!("{}: {} against release 1", s.benchmark, s.metric_label),
            0.5f64..n + 0.5,
            y0..y1,
        )?;
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .x_labels(s.releases.len())
            .x_desc("release")
            .y_desc("change against release 1 (%)")
            .x_label_formatter(&|x| {
                if (x - x.round()).abs() < 1e-9 && *x >= 1.0 {
                    format!("{}", x.round())
                } else {
                    String::new()
                }
            })
            .y_label_formatter(&|y| tick(*y))
            .draw()?;
        for t in [-threshold_pct, threshold_pct] {
            chart.draw_series(DashedLineSeries::new(
                vec![(0.5, t), (n + 0.5, t)],
                4,
                4,
                TARGET_COLOR.stroke_width(1),
            ))?;
        }
        chart.draw_series(LineSeries::new(
            vec![(0.5, 0.0), (n + 0.5, 0.0)],
            TARGET_COLOR.stroke_width(1),
        ))?;
        // Error bars: the interval, capped at both ends.
        let cap = 0.08;
        chart.draw_series(
            pts.iter()
                .filter_map(|(x, _, ci)| ci.map(|c| (*x, c)))
                .flat_map(|(x, (a, b))| {
                    [
                        vec![(x, a), (x, b)],
                        vec![(x - cap, a), (x + cap, a)],
                        vec![(x - cap, b), (x + cap, b)],
                    ]
                    .into_iter()
                    .map(|p| PathElement::new(p, CANDIDATE_COLOR.stroke_width(2)))
                }),
        )?;
        chart.draw_series(LineSeries::new(
            pts.iter().map(|(x, y, _)| (*x, *y)),
            CANDIDATE_COLOR.stroke_width(1),
        ))?;
        chart.draw_series(
            pts.iter()
                .map(|(x, y, _)| Circle::new((*x, *y), 5, CANDIDATE_COLOR.filled())),
        )?;
        root.present()?;
        Ok(())
    })();
    drawn("trend", r)?;
    Ok(Some(svg))
}

/// The history page: per series, its table, what changed and the trend.
pub fn history_html(h: &super::history::History) -> Result<String, PlotError> {
    let mut s = String::new();
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>referee compare: history</title><style>{STYLE}</style></head><body>\n"
    );
    let _ = writeln!(s, "<h1>referee compare: history</h1><ol>");
    for r in &h.releases {
        let _ = writeln!(s, "<li><code>{}</code></li>", escape::html(r));
    }
    let _ = writeln!(
        s,
        "</ol><p><b>{} failing step(s) — exit code {}</b></p><ul>",
        h.failures.len(),
        h.exit_code
    );
    for f in &h.failures {
        let _ = writeln!(s, "<li class=\"regression\">{}</li>", escape::html(f));
    }
    let _ = writeln!(s, "</ul>");
    for (i, x) in h.series.iter().enumerate() {
        let _ = writeln!(
            s,
            "<section id=\"s{i}\"><h2>{} — {}</h2>",
            escape::html(&x.label),
            escape::html(x.metric_label)
        );
        let (head, rows) = super::history::table(x, h.confidence);
        let _ = write!(s, "<table class=\"history\"><tr>");
        for c in &head {
            let _ = write!(s, "<th>{}</th>", escape::html(c));
        }
        let _ = writeln!(s, "</tr>");
        for r in rows {
            let _ = write!(s, "<tr>");
            for c in r {
                let _ = write!(s, "<td>{}</td>", escape::html(&c));
            }
            let _ = writeln!(s, "</tr>");
        }
        let _ = writeln!(s, "</table>");
        if let Some(svg) = trend_svg(x, h.threshold_pct)? {
            let _ = writeln!(
                s,
                "<figure class=\"plot trend\" data-releases=\"{}\">{svg}</figure>",
                x.releases.len()
            );
        }
        list(
            &mut s,
            "<ul>",
            super::history::series_lines(x),
            "</ul></section>",
        );
    }
    let gate = "<h2>How the gate is made</h2><ul>";
    list(&mut s, gate, &h.rules, "</ul></body></html>");
    Ok(s)
}
