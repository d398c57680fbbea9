//! The HTML form of `referee perf`: one self-contained page (no script, no
//! external file) with the table, each run's details, a plot of the step
//! time of every iteration (the window shaded) and, for each scaling group,
//! a plot of the efficiency against the GPU count. Plots are inline SVG
//! drawn by plotters' SVG backend (labels as `<text>` the browser renders).

use super::PerfReport;
use super::error::DrawError;
use super::report::{cells, detail_lines, header, scaling_lines, summary_line};
use super::scaling::ScalingGroup;
use crate::figures::fig;
use plotters::prelude::*;
use referee_rules::escape;
use std::fmt::Write as _;

const W: u32 = 640;
const H: u32 = 380;

/// Series colours, in order.
pub const PALETTE: &[RGBColor] = &[
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x17, 0xbe, 0xcf),
];

/// An axis range around `lo..hi` with a margin (a flat series gets one too).
pub(crate) fn padded(lo: f64, hi: f64) -> (f64, f64) {
    let (lo, hi) = if lo.is_finite() && hi.is_finite() {
        (lo, hi)
    } else {
        (0.0, 1.0)
    };
    let span = hi - lo;
    let pad = if span > 0.0 {
        span * 0.08
    } else {
        lo.abs().max(1.0) * 0.05
    };
    (lo - pad, hi + pad)
}

/// One polyline of a step-time plot.
pub struct StepSeries<'a> {
    /// The legend's entry (none for a series that repeats another's).
    pub label: Option<String>,
    pub color: RGBColor,
    pub points: &'a [(u64, f64)],
}

type PlotResult = Result<(), Box<dyn std::error::Error>>;

/// A plot's chart: `caption` over `x` × `y`, with the plots' margins.
pub(crate) type Chart<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// The chart of every plot on `root`: `caption` over `x` × `y`.
pub(crate) fn plot_chart<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, plotters::coord::Shift>,
    caption: impl AsRef<str>,
    x: std::ops::Range<f64>,
    y: std::ops::Range<f64>,
) -> Result<Chart<'a, 'b>, Box<dyn std::error::Error>> {
    Ok(ChartBuilder::on(root)
        .caption(caption, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(64)
        .build_cartesian_2d(x, y)?)
}

/// A legend entry's mark: a short line drawn in `style`.
pub(crate) fn legend_mark(style: ShapeStyle) -> impl Fn((i32, i32)) -> PathElement<(i32, i32)> {
    move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style)
}

/// The legend of `chart`, upper right.
pub(crate) fn draw_legend<'a, DB, CT>(chart: &mut ChartContext<'a, DB, CT>) -> PlotResult
where
    DB: DrawingBackend + 'a,
    DB::ErrorType: 'static,
    CT: CoordTranslate,
{
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()?;
    Ok(())
}

/// Step time against iteration, one polyline per series; the window (if
/// given) shaded. `None` when no series has a point.
pub fn step_time_svg(
    title: &str,
    series: &[StepSeries],
    window: Option<(u64, u64)>,
) -> Result<Option<String>, DrawError> {
    let pts: Vec<(u64, f64)> = series
        .iter()
        .flat_map(|s| s.points.iter().copied())
        .collect();
    if pts.is_empty() {
        return Ok(None);
    }
    let x0 = pts.iter().map(|p| p.0).min().unwrap_or(0) as f64;
    let x1 = pts.iter().map(|p| p.0).max().unwrap_or(1) as f64;
    let y0 = pts.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    let y1 = pts.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
    let (x0, x1) = padded(x0, x1);
    let (y0, y1) = padded(y0.min(0.0), y1);
    let mut svg = String::new();
    let r: PlotResult = (|| {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = plot_chart(&root, title, x0..x1, y0..y1)?;
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .x_desc("iteration")
            .y_desc("step time (s)")
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| fig(*y))
            .draw()?;
        if let Some((a, b)) = window {
            chart.draw_series(std::iter::once(Rectangle::new(
                [(a as f64 - 0.5, y0), (b as f64 + 0.5, y1)],
                RGBColor(0xee, 0xee, 0xee).filled(),
            )))?;
        }
        for s in series.iter().filter(|s| !s.points.is_empty()) {
            let color = s.color;
            let line: Vec<(f64, f64)> = s.points.iter().map(|(i, v)| (*i as f64, *v)).collect();
            let drawn = chart.draw_series(LineSeries::new(line, color.stroke_width(2)))?;
            if let Some(l) = &s.label {
                drawn
                    .label(l.clone())
                    .legend(legend_mark(color.stroke_width(2)));
            }
        }
        draw_legend(&mut chart)?;
        root.present()?;
        Ok(())
    })();
    r.map_err(|e| DrawError {
        plot: "step-time",
        message: e.to_string(),
    })?;
    Ok(Some(svg))
}

/// Efficiency (%) against GPU count (log₂ axis), the ideal 100 % dashed.
pub fn scaling_svg(g: &ScalingGroup) -> Result<String, DrawError> {
    let xs: Vec<f64> = g
        .points
        .iter()
        .map(|p| (p.gpus.max(1) as f64).log2())
        .collect();
    let x0 = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let x1 = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (x0, x1) = padded(x0, x1);
    let top = g
        .points
        .iter()
        .map(|p| p.efficiency * 100.0)
        .fold(100.0, f64::max);
    let bottom = g
        .points
        .iter()
        .map(|p| p.efficiency * 100.0)
        .fold(100.0, f64::min);
    let (y0, y1) = padded(bottom.min(0.0), top);
    let mut svg = String::new();
    let r: PlotResult = (|| {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE)?;
        let caption = format!(
            "{} · {} · {}: {} scaling",
            g.model, g.system, g.precision, g.kind
        );
        let mut chart = plot_chart(&root, caption, x0..x1, y0..y1)?;
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .x_desc("GPUs")
            .y_desc(format!("efficiency (%, {})", g.metric))
            .x_label_formatter(&|x| format!("{:.0}", 2f64.powf(*x)))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .draw()?;
        chart.draw_series(LineSeries::new(
            vec![(x0, 100.0), (x1, 100.0)],
            RGBColor(0x55, 0x55, 0x55).stroke_width(1),
        ))?;
        let line: Vec<(f64, f64)> = xs
            .iter()
            .zip(&g.points)
            .map(|(x, p)| (*x, p.efficiency * 100.0))
            .collect();
        chart.draw_series(LineSeries::new(line.clone(), PALETTE[0].stroke_width(2)))?;
        chart.draw_series(line.iter().map(|p| Circle::new(*p, 5, PALETTE[0].filled())))?;
        root.present()?;
        Ok(())
    })();
    r.map_err(|e| DrawError {
        plot: "scaling",
        message: e.to_string(),
    })?;
    Ok(svg)
}

const STYLE: &str = "body{font-family:sans-serif;margin:24px;color:#222;background:#fff}\
table{border-collapse:collapse;margin:12px 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;font-size:13px}\
th{background:#f3f3f3}.plots{display:flex;flex-wrap:wrap;gap:12px}figure{margin:0}li{margin:2px 0}\
.complete{color:#1b7f2a}.incomplete,.nan-grad-norm,.no-data{color:#b00020;font-weight:bold}";

fn table(s: &mut String, r: &PerfReport) {
    let _ = write!(s, "<table><tr>");
    for h in header(r) {
        let _ = write!(s, "<th>{}</th>", escape::html(h));
    }
    let _ = writeln!(s, "</tr>");
    for (i, row) in r.rows.iter().enumerate() {
        let c = cells(r, row);
        let _ = write!(s, "<tr>");
        let last = c.len() - 1;
        for (k, cell) in c.iter().enumerate() {
            if k == 0 {
                let _ = write!(s, "<td><a href=\"#r{i}\">{}</a></td>", escape::html(cell));
            } else if k == last {
                let class = cell.replace(' ', "-").to_ascii_lowercase();
                let _ = write!(
                    s,
                    "<td class=\"status {}\">{}</td>",
                    escape::html(&class),
                    escape::html(cell)
                );
            } else {
                let _ = write!(s, "<td>{}</td>", escape::html(cell));
            }
        }
        let _ = writeln!(s, "</tr>");
    }
    let _ = writeln!(s, "</table>");
}

/// The whole page.
pub fn html(r: &PerfReport) -> Result<String, DrawError> {
    let mut s = String::new();
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>referee perf</title><style>{STYLE}</style></head><body>\n<h1>referee perf</h1>\n"
    );
    if let Some(a) = &r.against {
        let _ = writeln!(s, "<p>against <code>{}</code></p>", escape::html(a));
    }
    let _ = writeln!(s, "<p><b>{}</b></p>", escape::html(&summary_line(r)));
    table(&mut s, r);
    let series: Vec<StepSeries> = r
        .rows
        .iter()
        .enumerate()
        .filter(|(_, row)| !row.iterations.is_empty())
        .map(|(i, row)| StepSeries {
            label: Some(super::report::short_name(&row.file)),
            color: PALETTE[i % PALETTE.len()],
            points: &row.iterations,
        })
        .collect();
    let windows: Vec<(u64, u64)> = r
        .rows
        .iter()
        .filter_map(|x| x.window.as_ref().map(|w| (w.first, w.last)))
        .collect();
    let shared = windows
        .first()
        .copied()
        .filter(|w| windows.iter().all(|x| x == w));
    let _ = writeln!(s, "<div class=\"plots\">");
    if let Some(svg) = step_time_svg("step time per iteration", &series, shared)? {
        let _ = writeln!(
            s,
            "<figure class=\"plot step-times\" data-series=\"{}\">{svg}</figure>",
            series.len()
        );
    }
    for g in &r.scaling {
        let _ = writeln!(
            s,
            "<figure class=\"plot scaling\" data-points=\"{}\">{}</figure>",
            g.points.len(),
            scaling_svg(g)?
        );
    }
    let _ = writeln!(s, "</div>");
    for (i, row) in r.rows.iter().enumerate() {
        let _ = writeln!(
            s,
            "<section id=\"r{i}\"><h2>{}</h2><ul>",
            escape::html(&row.file)
        );
        for l in detail_lines(row) {
            let _ = writeln!(s, "<li>{}</li>", escape::html(&l));
        }
        let _ = writeln!(s, "</ul></section>");
    }
    if !r.scaling.is_empty() {
        let _ = writeln!(s, "<h2>Scaling</h2><ul>");
        for l in scaling_lines(r) {
            let _ = writeln!(s, "<li>{}</li>", escape::html(&l));
        }
        let _ = writeln!(s, "</ul>");
    }
    let _ = writeln!(s, "<h2>How the figures are made</h2><ul>");
    for l in &r.rules {
        let _ = writeln!(s, "<li>{}</li>", escape::html(l));
    }
    let _ = writeln!(s, "</ul></body></html>");
    Ok(s)
}
