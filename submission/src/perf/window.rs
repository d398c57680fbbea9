//! The recipes' window rule and statistics.
//!
//! NVIDIA's DGX Cloud recipes run 50 steps and average iterations 35–44
//! (inclusive) to skip warm-up; every iteration of the window must be
//! present and the final iteration must have been printed, else the run is
//! incomplete; a NaN gradient norm anywhere makes it invalid; no timing
//! inside the window is "no data". Figures are the mean and the sample
//! standard deviation (n − 1) over the window. A run too short for 35–44
//! (final iteration below 44) is averaged over its last 10 iterations.
//! Iteration numbers are the ones the log prints (NeMo counts from 0,
//! Megatron from 1), as the recipes use them.

use super::error::WindowError;
use super::formats::NanGrad;
use serde::Serialize;
use std::collections::BTreeMap;

/// The recipes' window: iterations 35 to 44, inclusive.
pub const RECIPE_WINDOW: (u64, u64) = (35, 44);
/// Iterations averaged by a run too short for [`RECIPE_WINDOW`].
pub const SHORT_RUN_LAST: u64 = 10;

/// `A..B` (B excluded, as `referee run --window`) or `A..=B` (inclusive);
/// returns the inclusive range.
pub fn parse_window(w: &str) -> Result<(u64, u64), WindowError> {
    let (a, b, inclusive) = if let Some((a, b)) = w.split_once("..=") {
        (a, b, true)
    } else if let Some((a, b)) = w.split_once("..") {
        (a, b, false)
    } else {
        return Err(WindowError::Shape(w.into()));
    };
    let num = |s: &str, bound: &'static str| {
        s.trim()
            .parse::<u64>()
            .map_err(|_| WindowError::NotAnIteration {
                window: w.into(),
                bound,
                found: s.trim().into(),
            })
    };
    let (a, b) = (num(a, "A")?, num(b, "B")?);
    let last = if inclusive {
        b
    } else {
        b.checked_sub(1)
            .ok_or_else(|| WindowError::Empty(w.into()))?
    };
    if last < a {
        return Err(WindowError::Backwards(w.into()));
    }
    Ok((a, last))
}

/// One iteration's figures (of the rank that counts).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Point {
    pub step_s: Option<f64>,
    pub tflops: Option<f64>,
    pub line: usize,
}

/// A run's iterations.
#[derive(Debug, Clone, Default)]
pub struct Series {
    pub points: BTreeMap<u64, Point>,
    /// The final iteration the log announces (`M` of `iteration N/M`).
    pub last: Option<u64>,
}

impl Series {
    pub fn final_seen(&self) -> bool {
        self.last.is_some_and(|l| self.points.contains_key(&l))
    }
}

/// The window used and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Window {
    pub first: u64,
    pub last: u64,
    pub rule: String,
}

impl Window {
    pub fn text(&self) -> String {
        if self.first == self.last {
            format!("{}", self.first)
        } else {
            format!("{}–{}", self.first, self.last)
        }
    }
}

/// The default window of a run whose final iteration is `last` and whose
/// first printed iteration is `first_seen`.
pub fn default_window(last: Option<u64>, first_seen: Option<u64>) -> Option<Window> {
    let last = last?;
    if last >= RECIPE_WINDOW.1 {
        return Some(Window {
            first: RECIPE_WINDOW.0,
            last: RECIPE_WINDOW.1,
            rule: "the recipes' window (iterations 35–44)".into(),
        });
    }
    let first = last
        .saturating_sub(SHORT_RUN_LAST - 1)
        .max(first_seen.unwrap_or(0));
    Some(Window {
        first,
        last,
        rule: format!("the last {SHORT_RUN_LAST} iterations (a run shorter than 44 iterations)"),
    })
}

/// Mean and sample standard deviation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Stat {
    pub mean: f64,
    /// Sample standard deviation (n − 1); None for one value.
    pub sd: Option<f64>,
    pub n: usize,
}

/// Mean and sample sd of `x`; None when empty.
pub fn mean_sd(x: &[f64]) -> Option<Stat> {
    if x.is_empty() {
        return None;
    }
    let n = x.len();
    let mean = x.iter().sum::<f64>() / n as f64;
    let sd = (n > 1).then(|| {
        let ss: f64 = x.iter().map(|v| (v - mean) * (v - mean)).sum();
        (ss / (n - 1) as f64).sqrt()
    });
    Some(Stat { mean, sd, n })
}

/// A run's status, in the spirit of the recipes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StatusKind {
    Complete,
    Incomplete,
    /// A NaN gradient norm anywhere in the log.
    NanGradNorm,
    NoData,
}

impl StatusKind {
    pub fn as_str(self) -> &'static str {
        match self {
            StatusKind::Complete => "complete",
            StatusKind::Incomplete => "incomplete",
            StatusKind::NanGradNorm => "NaN grad norm",
            StatusKind::NoData => "no data",
        }
    }
}

/// Status and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Status {
    pub kind: StatusKind,
    pub detail: String,
}

/// A run judged over its window.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    pub step: Option<Stat>,
    pub tflops: Option<Stat>,
    pub status: Status,
    /// The first window iterations without a step time (at most
    /// [`MISSING_LISTED`]).
    pub missing: Vec<u64>,
    /// How many window iterations have no step time.
    pub missing_count: u64,
}

/// Missing window iterations listed by name.
pub const MISSING_LISTED: usize = 8;

fn list(v: &[u64], total: u64) -> String {
    let shown: Vec<String> = v.iter().map(|x| x.to_string()).collect();
    if total > v.len() as u64 {
        format!("{} … ({total} in all)", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

/// Judge `series` over `window`: NaN grad norm, then no data, then
/// incomplete (a window iteration missing, or the final iteration not
/// printed), else complete. Figures are computed over the window's present
/// iterations whatever the status.
pub fn evaluate(series: &Series, window: Option<&Window>, nan: Option<&NanGrad>) -> Evaluation {
    let (mut steps, mut tflops, mut missing) = (Vec::new(), Vec::new(), Vec::new());
    let mut missing_count = 0u64;
    if let Some(w) = window {
        for p in series.points.range(w.first..=w.last).map(|(_, p)| p) {
            if let Some(s) = p.step_s {
                steps.push(s);
                if let Some(t) = p.tflops {
                    tflops.push(t);
                }
            }
        }
        // The window may be far longer than the log: count the missing
        // iterations, list only the first few (the walk is bounded by the
        // points present plus the few listed).
        missing_count = (w.last - w.first)
            .saturating_add(1)
            .saturating_sub(steps.len() as u64);
        let mut it = w.first;
        while missing.len() < MISSING_LISTED
            && (missing.len() as u64) < missing_count
            && it <= w.last
        {
            if series.points.get(&it).is_none_or(|p| p.step_s.is_none()) {
                missing.push(it);
            }
            match it.checked_add(1) {
                Some(n) => it = n,
                None => break,
            }
        }
    }
    let status = if let Some(n) = nan {
        Status {
            kind: StatusKind::NanGradNorm,
            detail: match n.iteration {
                Some(i) => format!("a NaN gradient norm at iteration {i} (line {})", n.line),
                None => format!("a NaN gradient norm at line {}", n.line),
            },
        }
    } else if steps.is_empty() {
        Status {
            kind: StatusKind::NoData,
            detail: match window {
                None => "no iteration line with a step time".into(),
                Some(w) => format!("no step time inside the window {}", w.text()),
            },
        }
    } else if missing_count > 0 {
        Status {
            kind: StatusKind::Incomplete,
            detail: format!(
                "window iteration{} {} missing",
                if missing_count == 1 { "" } else { "s" },
                list(&missing, missing_count)
            ),
        }
    } else if !series.final_seen() {
        let seen = series.points.keys().next_back().copied().unwrap_or(0);
        Status {
            kind: StatusKind::Incomplete,
            detail: format!(
                "the final iteration {} was never printed (the last seen is {seen})",
                series.last.unwrap_or(0)
            ),
        }
    } else {
        Status {
            kind: StatusKind::Complete,
            detail: "every window iteration and the final iteration printed".into(),
        }
    };
    Evaluation {
        step: mean_sd(&steps),
        tflops: mean_sd(&tflops),
        status,
        missing,
        missing_count,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 50-iteration run (1..=50) whose iteration i takes 1 + i/100 s and
    /// reports 500 − i TFLOP/s.
    fn run(skip: &[u64], last_printed: u64) -> Series {
        let mut s = Series {
            last: Some(50),
            ..Default::default()
        };
        for i in 1..=last_printed {
            if skip.contains(&i) {
                continue;
            }
            s.points.insert(
                i,
                Point {
                    step_s: Some(1.0 + i as f64 / 100.0),
                    tflops: Some(500.0 - i as f64),
                    line: i as usize,
                },
            );
        }
        s
    }

    #[test]
    fn window_syntax() {
        assert_eq!(parse_window("35..45"), Ok((35, 44)));
        assert_eq!(parse_window("35..=44"), Ok((35, 44)));
        assert_eq!(parse_window(" 3 .. 8 "), Ok((3, 7)));
        assert!(
            parse_window("5..5")
                .unwrap_err()
                .to_string()
                .contains("empty")
        );
        assert!(
            parse_window("9..=3")
                .unwrap_err()
                .to_string()
                .contains("empty")
        );
        assert!(
            parse_window("a..3")
                .unwrap_err()
                .to_string()
                .contains("not an iteration")
        );
        assert!(
            parse_window("35-44")
                .unwrap_err()
                .to_string()
                .contains("expected A..B")
        );
    }

    #[test]
    fn default_windows() {
        let w = default_window(Some(50), Some(1)).unwrap();
        assert_eq!((w.first, w.last), (35, 44));
        // NeMo's 0-based 50 steps end at 49: still 35–44.
        assert_eq!(default_window(Some(49), Some(0)).unwrap().first, 35);
        // Short runs: the last 10, never before the first printed one.
        let w = default_window(Some(20), Some(1)).unwrap();
        assert_eq!((w.first, w.last), (11, 20));
        let w = default_window(Some(5), Some(1)).unwrap();
        assert_eq!((w.first, w.last), (1, 5));
        assert!(default_window(None, None).is_none());
    }

    #[test]
    fn statistics_by_hand() {
        // 1, 2, 3, 4: mean 2.5; squares of deviations 2.25+0.25+0.25+2.25 = 5; 5/3.
        let s = mean_sd(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(s.mean, 2.5);
        assert!((s.sd.unwrap() - (5.0f64 / 3.0).sqrt()).abs() < 1e-15);
        assert_eq!(mean_sd(&[7.0]).unwrap().sd, None);
        assert!(mean_sd(&[]).is_none());
    }

    #[test]
    fn complete_run() {
        let s = run(&[], 50);
        let w = default_window(s.last, Some(1)).unwrap();
        let e = evaluate(&s, Some(&w), None);
        assert_eq!(e.status.kind, StatusKind::Complete);
        let st = e.step.unwrap();
        // Iterations 35..=44: mean 1 + 39.5/100; sd of 0.35..0.44 step 0.01 =
        // 0.01 × sd(0..9) = 0.01 × sqrt(82.5/9).
        assert_eq!(st.n, 10);
        assert!((st.mean - 1.395).abs() < 1e-12);
        assert!((st.sd.unwrap() - 0.01 * (82.5f64 / 9.0).sqrt()).abs() < 1e-12);
        let tf = e.tflops.unwrap();
        assert!((tf.mean - 460.5).abs() < 1e-12);
    }

    #[test]
    fn incomplete_no_data_and_nan() {
        let w = Window {
            first: 35,
            last: 44,
            rule: String::new(),
        };
        let e = evaluate(&run(&[40], 50), Some(&w), None);
        assert_eq!(e.status.kind, StatusKind::Incomplete);
        assert_eq!(e.missing, vec![40]);
        assert!(e.status.detail.contains("40"), "{}", e.status.detail);
        assert_eq!(e.step.unwrap().n, 9);
        // The final iteration never printed.
        let e = evaluate(&run(&[], 49), Some(&w), None);
        assert_eq!(e.status.kind, StatusKind::Incomplete);
        assert!(
            e.status.detail.contains("final iteration 50"),
            "{}",
            e.status.detail
        );
        // Timings only outside the window.
        let e = evaluate(&run(&(10..=50).collect::<Vec<_>>(), 9), Some(&w), None);
        assert_eq!(e.status.kind, StatusKind::NoData);
        // A window far longer than the log: counted, the first few listed.
        let huge = Window {
            first: 45,
            last: u64::MAX - 1,
            rule: String::new(),
        };
        let e = evaluate(&run(&[], 50), Some(&huge), None);
        assert_eq!(e.status.kind, StatusKind::Incomplete);
        assert_eq!(e.missing, (51..59).collect::<Vec<_>>());
        assert_eq!(e.missing_count, u64::MAX - 1 - 45 + 1 - 6);
        assert!(e.status.detail.contains("in all"), "{}", e.status.detail);
        // A NaN gradient norm wins over everything.
        let nan = NanGrad {
            line: 23,
            iteration: Some(11),
        };
        let e = evaluate(&run(&[], 50), Some(&w), Some(&nan));
        assert_eq!(e.status.kind, StatusKind::NanGradNorm);
        assert!(e.status.detail.contains("iteration 11"));
    }
}
