//! Why a comparison came out as it did: where the time went (the deciding
//! figure split into factors whose product is the measured change) and
//! what changed (every fact both sides recorded, grouped and ranked).
//!
//! **Time to train** (the olympic score) = samples to converge × time per
//! sample × evaluation overhead × scaling factor, over the runs the olympic
//! score keeps: samples to converge is their mean `samples_count` at
//! convergence (epochs for benchmarks that converge in epochs), time per
//! sample their training time (time to train less the time between each
//! `eval_start` and `eval_stop`) over their samples, evaluation overhead
//! their time to train over their training time. The product of the side
//! figures is the olympic mean exactly, so the product of the factors'
//! ratios is the measured change.
//!
//! **Throughput mode** (samples/s, the mean over runs) = samples per step ÷
//! time per step: samples per step is the runs' mean of samples/s × step
//! time, time per step the step time at the mean throughput (samples per
//! step ÷ mean samples/s).
//!
//! The same runs' tokens/s = tokens per sample × samples per step ÷ time
//! per step, and their MFU = tokens/s ÷ GPUs × FLOPs per token ÷ peak
//! (FLOPs per token as the MFU implies it: MFU × GPUs × peak ÷ tokens/s),
//! each side figure made from means so that the product is the mean.
//!
//! Each factor's change has a percentile-bootstrap interval drawn as the
//! time-to-train interval is (runs resampled per side, the same stream).

use super::facts::{Category, Recorded, rank};
use super::stats::{BootstrapCi, MIN_RUNS, bootstrap_relative_change};
use super::{GroupComparison, MetricComparison, Mode, Options, RunRecord, RunSet};
use serde::Serialize;
use std::collections::BTreeSet;

/// One side's figure of a factor, with the spread of its runs.
#[derive(Debug, Clone, Serialize)]
pub struct SideFigure {
    /// The side's figure (what enters the product).
    pub value: f64,
    /// Runs it is made from.
    pub runs: usize,
    /// Smallest and largest per-run value.
    pub min: f64,
    pub max: f64,
    /// Coefficient of variation of the per-run values (sample standard
    /// deviation ÷ mean), when there are 2 runs or more.
    pub cv: Option<f64>,
}

/// One factor of the decomposition.
#[derive(Debug, Clone, Serialize)]
pub struct Factor {
    /// `samples_to_converge`, `time_per_sample`, `evaluation_overhead`,
    /// `scaling_factor`, `samples_per_step`, `time_per_step`.
    pub name: &'static str,
    pub label: String,
    pub unit: String,
    pub baseline: SideFigure,
    pub candidate: SideFigure,
    /// candidate / baseline − 1.
    pub relative_change: f64,
    pub ci: Option<BootstrapCi>,
    /// +1 when the decomposed figure is proportional to the factor, −1
    /// when inversely (time per step in throughput mode).
    pub exponent: i32,
    /// The factor's share of the measured change: (1 + change)^exponent − 1.
    pub effect: f64,
}

/// Where the time went.
#[derive(Debug, Clone, Serialize)]
pub struct Breakdown {
    /// The decomposed figure: `time_to_train_minutes`, `samples_per_second`,
    /// `tokens_per_second` or `mfu`.
    pub metric: &'static str,
    /// Its name as reports show it (`tokens/s`, `MFU`, …).
    #[serde(skip)]
    pub label: &'static str,
    pub relation: &'static str,
    /// Which runs: those the olympic score keeps, or every run.
    pub runs: &'static str,
    /// The deciding metric's measured change.
    pub measured_change: f64,
    /// The product of the factors' effects, less 1 (equal to the measured
    /// change within rounding).
    pub product_change: f64,
    pub factors: Vec<Factor>,
    /// The factor whose effect is largest (in log terms).
    pub dominant: String,
    /// `−15.6 %: time per sample −17.0 %, samples to converge +2.4 %, …`.
    pub summary: String,
    /// Time spent evaluating per run (mean over the kept runs), minutes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eval_minutes: Option<(f64, f64)>,
}

/// Why a figure cannot be split into factors.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NoSplit {
    #[error("{0} has no change to split")]
    NoChange(String),
    #[error("{path}: no samples_count at convergence")]
    NoSamplesAtConvergence { path: String },
    #[error(
        "{path}: no training time or samples to split ({samples} samples, {train_ms} ms training)"
    )]
    NothingToSplit {
        path: String,
        samples: f64,
        train_ms: f64,
    },
    #[error("no run kept by the olympic score")]
    NoRunKept,
    #[error("{path}: no {what}")]
    RunLacks { path: String, what: &'static str },
    #[error("no run with {0} and a step time")]
    NoRuns(String),
    #[error("no {0} on every run")]
    NotOnEveryRun(&'static str),
    #[error("no time to train or samples/s decides this group")]
    NoDecidingMetric,
}

fn pct(x: f64) -> String {
    crate::figures::pct_change(x)
}

fn side_figure(value: f64, per_run: &[f64]) -> SideFigure {
    let n = per_run.len();
    let min = per_run.iter().copied().fold(f64::INFINITY, f64::min);
    let max = per_run.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let cv = (n >= 2).then(|| {
        let m = per_run.iter().sum::<f64>() / n as f64;
        let var = per_run.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1) as f64;
        var.sqrt() / m
    });
    SideFigure {
        value,
        runs: n,
        min,
        max,
        cv,
    }
}

/// The runs (indices into `minutes`) the olympic mean keeps: sorted by
/// time, `max_dropped` fastest and `max_dropped − dropped` slowest left out.
pub fn olympic_kept(minutes: &[f64], dropped: usize, max_dropped: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..minutes.len()).collect();
    idx.sort_by(|&a, &b| minutes[a].total_cmp(&minutes[b]).then(a.cmp(&b)));
    idx[referee_rules::score::olympic_range(idx.len(), dropped, max_dropped)].to_vec()
}

/// One counted run's split: (time ms, training ms, evaluation ms, samples).
#[derive(Debug, Clone, Copy)]
struct Split {
    total: f64,
    train: f64,
    eval: f64,
    samples: f64,
}

fn split(r: &RunRecord) -> Result<Option<Split>, NoSplit> {
    let Some(minutes) = r.minutes else {
        return Ok(None);
    };
    let total = minutes * 60_000.0;
    let samples = r
        .samples_to_target
        .or(r.timing.stop_samples)
        .ok_or_else(|| NoSplit::NoSamplesAtConvergence {
            path: r.path.clone(),
        })?;
    let eval = r.timing.eval_ms;
    let train = total - eval;
    if !(samples > 0.0 && train > 0.0) {
        return Err(NoSplit::NothingToSplit {
            path: r.path.clone(),
            samples,
            train_ms: train,
        });
    }
    Ok(Some(Split {
        total,
        train,
        eval,
        samples,
    }))
}

/// A side's counted runs and the olympic rule's parameters.
struct TttSide {
    splits: Vec<Split>,
    dropped: usize,
    max_dropped: usize,
    scale: f64,
}

impl TttSide {
    fn of(s: &RunSet) -> Result<TttSide, NoSplit> {
        let mut splits = Vec::new();
        for r in &s.runs {
            if let Some(x) = split(r)? {
                splits.push(x);
            }
        }
        Ok(TttSide {
            splits,
            dropped: s.dropped,
            max_dropped: s.max_dropped,
            scale: s.scaling_factor,
        })
    }

    /// The kept runs of a resample (`pick`: indices into `splits`).
    fn kept(&self, pick: &[usize]) -> Vec<Split> {
        let minutes: Vec<f64> = pick.iter().map(|&i| self.splits[i].total).collect();
        olympic_kept(&minutes, self.dropped, self.max_dropped)
            .into_iter()
            .map(|k| self.splits[pick[k]])
            .collect()
    }
}

type SideStat = fn(&[Split]) -> f64;
/// A factor of time to train: its name, its side figure over the kept
/// runs, and its per-run value.
type TttFactor = (&'static str, SideStat, fn(&Split) -> f64);

fn sum(k: &[Split], f: fn(&Split) -> f64) -> f64 {
    k.iter().map(f).fold(0.0, |a, x| a + x)
}

const TTT_FACTORS: [TttFactor; 3] = [
    (
        "samples_to_converge",
        |k| sum(k, |s| s.samples) / k.len() as f64,
        |s| s.samples,
    ),
    (
        "time_per_sample",
        |k| sum(k, |s| s.train) / sum(k, |s| s.samples),
        |s| s.train / s.samples,
    ),
    (
        "evaluation_overhead",
        |k| sum(k, |s| s.total) / sum(k, |s| s.train),
        |s| s.total / s.train,
    ),
];

/// Bootstrap the change of a side statistic over resampled run indices.
fn index_ci(
    nb: usize,
    nc: usize,
    stat_b: &dyn Fn(&[usize]) -> Option<f64>,
    stat_c: &dyn Fn(&[usize]) -> Option<f64>,
    opts: &Options,
) -> Option<BootstrapCi> {
    if nb < MIN_RUNS || nc < MIN_RUNS {
        return None;
    }
    let ib: Vec<f64> = (0..nb).map(|i| i as f64).collect();
    let ic: Vec<f64> = (0..nc).map(|i| i as f64).collect();
    let to_idx = |x: &[f64]| x.iter().map(|&v| v as usize).collect::<Vec<_>>();
    bootstrap_relative_change(
        &ib,
        &ic,
        &|x| stat_b(&to_idx(x)),
        &|x| stat_c(&to_idx(x)),
        opts.confidence,
        opts.resamples,
        opts.seed,
    )
}

fn finish(
    m: &MetricComparison,
    relation: &'static str,
    runs: &'static str,
    measured: f64,
    factors: Vec<Factor>,
    eval_minutes: Option<(f64, f64)>,
) -> Breakdown {
    let product = factors.iter().fold(1.0, |a, f| a * (1.0 + f.effect)) - 1.0;
    let mut order: Vec<&Factor> = factors.iter().collect();
    order.sort_by(|a, b| {
        (1.0 + b.effect)
            .ln()
            .abs()
            .total_cmp(&(1.0 + a.effect).ln().abs())
    });
    let dominant = order.first().map(|f| f.label.clone()).unwrap_or_default();
    let parts: Vec<String> = order
        .iter()
        .map(|f| format!("{} {}", f.label, pct(f.relative_change)))
        .collect();
    Breakdown {
        metric: m.metric,
        label: m.label,
        relation,
        runs,
        measured_change: measured,
        product_change: product,
        summary: format!("{}: {}", pct(measured), parts.join(", ")),
        dominant,
        factors,
        eval_minutes,
    }
}

fn factor(
    name: &'static str,
    label: String,
    unit: String,
    (b, c): (SideFigure, SideFigure),
    ci: Option<BootstrapCi>,
    exponent: i32,
) -> Factor {
    let change = c.value / b.value - 1.0;
    Factor {
        name,
        label,
        unit,
        baseline: b,
        candidate: c,
        relative_change: change,
        ci,
        exponent,
        effect: (1.0 + change).powi(exponent) - 1.0,
    }
}

/// Time to train split into its factors over the olympic score's runs.
fn time_to_train(
    b: &RunSet,
    c: &RunSet,
    t: &MetricComparison,
    opts: &Options,
) -> Result<Breakdown, NoSplit> {
    let measured = t
        .relative_change
        .ok_or_else(|| NoSplit::NoChange("time to train".into()))?;
    let (sb, sc) = (TttSide::of(b)?, TttSide::of(c)?);
    let all = |s: &TttSide| (0..s.splits.len()).collect::<Vec<_>>();
    let (kb, kc) = (sb.kept(&all(&sb)), sc.kept(&all(&sc)));
    if kb.is_empty() || kc.is_empty() {
        return Err(NoSplit::NoRunKept);
    }
    let unit = b.convergence_unit;
    let (per, what) = if unit == "epochs" {
        ("epoch", "epochs")
    } else {
        ("sample", "samples")
    };
    let mut factors = Vec::new();
    for (name, stat, per_run) in TTT_FACTORS {
        let fig = |k: &[Split]| {
            let vals: Vec<f64> = k.iter().map(per_run).collect();
            side_figure(stat(k), &vals)
        };
        let fb = |pick: &[usize]| {
            let k = sb.kept(pick);
            (!k.is_empty()).then(|| stat(&k))
        };
        let fc = |pick: &[usize]| {
            let k = sc.kept(pick);
            (!k.is_empty()).then(|| stat(&k))
        };
        let ci = index_ci(sb.splits.len(), sc.splits.len(), &fb, &fc, opts);
        let (label, unit) = match name {
            "samples_to_converge" => (format!("{what} to converge"), what.to_string()),
            "time_per_sample" => (format!("time per {per}"), format!("ms per {per}")),
            _ => (
                "evaluation overhead".to_string(),
                "time to train ÷ training time".to_string(),
            ),
        };
        factors.push(factor(name, label, unit, (fig(&kb), fig(&kc)), ci, 1));
    }
    if sb.scale != 1.0 || sc.scale != 1.0 {
        factors.push(factor(
            "scaling_factor",
            "scaling factor".into(),
            "scaling.json".into(),
            (
                side_figure(sb.scale, &[sb.scale]),
                side_figure(sc.scale, &[sc.scale]),
            ),
            None,
            1,
        ));
    }
    let eval_min = |k: &[Split]| sum(k, |s| s.eval) / k.len() as f64 / 60_000.0;
    Ok(finish(
        t,
        "time to train = samples to converge × time per sample × evaluation overhead (× scaling factor)",
        "the runs the olympic score keeps",
        measured,
        factors,
        Some((eval_min(&kb), eval_min(&kc))),
    ))
}

/// One run's throughput figures (throughput mode).
#[derive(Debug, Clone, Copy)]
struct Rates {
    sps: f64,
    step: f64,
    tps: Option<f64>,
    mfu: Option<f64>,
    gpus: Option<f64>,
    peak: Option<f64>,
}

/// The runs that give `metric` (those its comparison averages), each with
/// the samples/s and step time every split starts from.
fn rates(s: &RunSet, metric: fn(&RunRecord) -> Option<f64>) -> Result<Vec<Rates>, NoSplit> {
    s.runs
        .iter()
        .filter(|r| metric(r).is_some())
        .map(|r| {
            let sps = r.samples_per_second.ok_or_else(|| NoSplit::RunLacks {
                path: r.path.clone(),
                what: "samples/s",
            })?;
            let step = r
                .step_seconds
                .or(r.timing.window_step_seconds)
                .ok_or_else(|| NoSplit::RunLacks {
                    path: r.path.clone(),
                    what: "step time",
                })?;
            Ok(Rates {
                sps,
                step,
                tps: r.tokens_per_second,
                mfu: r.mfu,
                gpus: r.gpus,
                peak: r.peak_tflops,
            })
        })
        .collect()
}

fn mean(p: &[Rates], f: impl Fn(&Rates) -> Option<f64>) -> Option<f64> {
    let v: Option<Vec<f64>> = p.iter().map(f).collect();
    let v = v?;
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// The value every run shares, if they all record the same one.
fn constant(p: &[Rates], f: fn(&Rates) -> Option<f64>) -> Option<f64> {
    let first = f(p.first()?)?;
    p.iter().all(|r| f(r) == Some(first)).then_some(first)
}

/// A factor of a throughput figure: its side value over a set of runs
/// (made from means so that the factors multiply to the figure's mean
/// exactly) and its per-run value (for the spread).
struct RateFactor {
    name: &'static str,
    label: &'static str,
    unit: &'static str,
    exponent: i32,
    side: fn(&[Rates]) -> Option<f64>,
    run: fn(&Rates) -> Option<f64>,
}

/// Samples per step: the mean of samples/s × step time.
const SAMPLES_PER_STEP: RateFactor = RateFactor {
    name: "samples_per_step",
    label: "samples per step",
    unit: "samples",
    exponent: 1,
    side: |p| mean(p, |r| Some(r.sps * r.step)),
    run: |r| Some(r.sps * r.step),
};

/// Time per step at the mean throughput: samples per step ÷ mean samples/s.
const TIME_PER_STEP: RateFactor = RateFactor {
    name: "time_per_step",
    label: "time per step",
    unit: "seconds",
    exponent: -1,
    side: |p| Some(mean(p, |r| Some(r.sps * r.step))? / mean(p, |r| Some(r.sps))?),
    run: |r| Some(r.step),
};

/// Tokens per sample: mean tokens/s ÷ mean samples/s (the sequence length
/// when every sample is one full sequence).
const TOKENS_PER_SAMPLE: RateFactor = RateFactor {
    name: "tokens_per_sample",
    label: "tokens per sample",
    unit: "tokens",
    exponent: 1,
    side: |p| Some(mean(p, |r| r.tps)? / mean(p, |r| Some(r.sps))?),
    run: |r| Some(r.tps? / r.sps),
};

/// MFU per token/s: mean MFU ÷ mean tokens/s (FLOPs per token ÷ (GPUs ×
/// peak)), when GPUs or the peak are not known or differ between runs.
const MFU_PER_TOKEN_RATE: RateFactor = RateFactor {
    name: "flops_per_token_per_gpu_peak",
    label: "FLOPs per token ÷ (GPUs × peak)",
    unit: "MFU per token/s",
    exponent: 1,
    side: |p| Some(mean(p, |r| r.mfu)? / mean(p, |r| r.tps)?),
    run: |r| Some(r.mfu? / r.tps?),
};

const GPUS: RateFactor = RateFactor {
    name: "gpus",
    label: "GPUs",
    unit: "GPUs",
    exponent: -1,
    side: |p| constant(p, |r| r.gpus),
    run: |r| r.gpus,
};

/// FLOPs per token as the MFU implies it: mean MFU ÷ mean tokens/s × GPUs
/// × peak.
const FLOPS_PER_TOKEN: RateFactor = RateFactor {
    name: "flops_per_token",
    label: "FLOPs per token",
    unit: "GFLOP per token",
    exponent: 1,
    side: |p| {
        let (n, peak) = (constant(p, |r| r.gpus)?, constant(p, |r| r.peak)?);
        Some(mean(p, |r| r.mfu)? / mean(p, |r| r.tps)? * n * peak * 1e3)
    },
    run: |r| Some(r.mfu? / r.tps? * r.gpus? * r.peak? * 1e3),
};

const PEAK: RateFactor = RateFactor {
    name: "peak",
    label: "dense peak per GPU",
    unit: "TFLOP/s",
    exponent: -1,
    side: |p| constant(p, |r| r.peak),
    run: |r| r.peak,
};

/// A throughput figure split into `factors` over the runs that give it.
/// Every side figure is made first, so that a split that cannot be made
/// fails before any interval is drawn.
fn rate_split(
    (b, c): (&RunSet, &RunSet),
    m: &MetricComparison,
    metric: fn(&RunRecord) -> Option<f64>,
    factors: &[&RateFactor],
    (relation, runs, opts): (&'static str, &'static str, &Options),
) -> Result<Breakdown, NoSplit> {
    let measured = m
        .relative_change
        .ok_or_else(|| NoSplit::NoChange(m.label.to_string()))?;
    let (pb, pc) = (rates(b, metric)?, rates(c, metric)?);
    if pb.is_empty() || pc.is_empty() {
        return Err(NoSplit::NoRuns(m.label.to_string()));
    }
    let figure = |f: &RateFactor, p: &[Rates]| -> Result<SideFigure, NoSplit> {
        let value = (f.side)(p).ok_or(NoSplit::NotOnEveryRun(f.label))?;
        let per_run: Option<Vec<f64>> = p.iter().map(f.run).collect();
        let per_run = per_run.ok_or(NoSplit::NotOnEveryRun(f.label))?;
        Ok(side_figure(value, &per_run))
    };
    let sides = factors
        .iter()
        .map(|f| Ok((figure(f, &pb)?, figure(f, &pc)?)))
        .collect::<Result<Vec<_>, NoSplit>>()?;
    let pick = |p: &[Rates], idx: &[usize]| idx.iter().map(|&i| p[i]).collect::<Vec<_>>();
    let out = factors
        .iter()
        .zip(sides)
        .map(|(f, sides)| {
            let fb = |idx: &[usize]| (f.side)(&pick(&pb, idx));
            let fc = |idx: &[usize]| (f.side)(&pick(&pc, idx));
            let ci = index_ci(pb.len(), pc.len(), &fb, &fc, opts);
            factor(f.name, f.label.into(), f.unit.into(), sides, ci, f.exponent)
        })
        .collect();
    Ok(finish(m, relation, runs, measured, out, None))
}

/// Samples/s split into samples per step and time per step.
fn throughput(
    b: &RunSet,
    c: &RunSet,
    m: &MetricComparison,
    opts: &Options,
) -> Result<Breakdown, NoSplit> {
    rate_split(
        (b, c),
        m,
        |r| r.samples_per_second,
        &[&SAMPLES_PER_STEP, &TIME_PER_STEP],
        (
            "samples/s = samples per step ÷ time per step (at the mean throughput)",
            "every run with samples/s and a step time",
            opts,
        ),
    )
}

/// Which runs a tokens/s or MFU split is over.
const RATE_RUNS: &str = "every run with the figure and a step time";

/// Throughput mode: tokens/s and MFU split into their factors, for each
/// that both sides give. MFU is split into GPUs, FLOPs per token and the
/// peak when each side's runs share one GPU count and one peak, else into
/// their quotient.
pub fn rate_breakdowns(g: &GroupComparison, opts: &Options) -> Vec<Breakdown> {
    let (b, c) = (&g.baseline, &g.candidate);
    if b.mode != Mode::Throughput {
        return Vec::new();
    }
    let find = |name: &str| g.throughput.iter().find(|m| m.metric == name);
    let mut out = Vec::new();
    if let Some(m) = find("tokens_per_second") {
        out.extend(
            rate_split(
                (b, c),
                m,
                |r| r.tokens_per_second,
                &[&TOKENS_PER_SAMPLE, &SAMPLES_PER_STEP, &TIME_PER_STEP],
                (
                    "tokens/s = tokens per sample × samples per step ÷ time per step",
                    RATE_RUNS,
                    opts,
                ),
            )
            .ok(),
        );
    }
    if let Some(m) = find("mfu") {
        let split = |factors: &[&RateFactor], relation| {
            rate_split((b, c), m, |r| r.mfu, factors, (relation, RATE_RUNS, opts))
        };
        let rate = [&TOKENS_PER_SAMPLE, &SAMPLES_PER_STEP, &TIME_PER_STEP];
        let full = split(
            &[&rate[..], &[&GPUS, &FLOPS_PER_TOKEN, &PEAK]].concat(),
            "MFU = tokens per sample × samples per step ÷ time per step ÷ GPUs × FLOPs per token ÷ peak",
        );
        out.extend(
            full.or_else(|_| {
                split(
                    &[&rate[..], &[&MFU_PER_TOKEN_RATE]].concat(),
                    "MFU = tokens per sample × samples per step ÷ time per step × FLOPs per token ÷ (GPUs × peak)",
                )
            })
            .ok(),
        );
    }
    out
}

/// Where the time went, for the group's deciding metric.
pub fn breakdown(g: &GroupComparison, opts: &Options) -> Result<Breakdown, NoSplit> {
    let (b, c) = (&g.baseline, &g.candidate);
    if let Some(t) = &g.time_to_train
        && b.mode == Mode::TimeToTrain
    {
        return time_to_train(b, c, t, opts);
    }
    match g
        .throughput
        .iter()
        .find(|m| m.decides && m.metric == "samples_per_second")
    {
        Some(m) => throughput(b, c, m, opts),
        None => Err(NoSplit::NoDecidingMetric),
    }
}

/// One fact that differs.
#[derive(Debug, Clone, Serialize)]
pub struct FactChange {
    pub category: Category,
    pub name: String,
    /// Values the baseline recorded (empty: not recorded).
    pub baseline: Vec<String>,
    pub candidate: Vec<String>,
}

/// Seeds, reported and never ranked as a cause.
#[derive(Debug, Clone, Serialize)]
pub struct SeedFact {
    pub name: String,
    /// `differ (expected)` or `same`.
    pub status: &'static str,
}

/// What changed between the sides' records.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FactDiff {
    /// Ranked: category (what plausibly moves speed first), then the
    /// software entries known to matter, then name.
    pub changed: Vec<FactChange>,
    /// Facts recorded by both sides with the same values.
    pub unchanged: usize,
    pub seeds: Vec<SeedFact>,
}

/// The diff of everything both sides recorded.
pub fn what_changed(b: &Recorded, c: &Recorded) -> FactDiff {
    let keys: BTreeSet<&(Category, String)> = b.keys().chain(c.keys()).collect();
    let mut d = FactDiff::default();
    let empty = BTreeSet::new();
    for key in keys {
        let (vb, vc) = (b.get(key).unwrap_or(&empty), c.get(key).unwrap_or(&empty));
        if key.0 == Category::Seeds {
            d.seeds.push(SeedFact {
                name: key.1.clone(),
                status: if vb == vc {
                    "same"
                } else {
                    "differ (expected)"
                },
            });
        } else if vb == vc {
            d.unchanged += 1;
        } else {
            d.changed.push(FactChange {
                category: key.0,
                name: key.1.clone(),
                baseline: vb.iter().cloned().collect(),
                candidate: vc.iter().cloned().collect(),
            });
        }
    }
    d.changed.sort_by(|x, y| {
        (x.category, rank(&x.name), &x.name).cmp(&(y.category, rank(&y.name), &y.name))
    });
    d
}

/// `--min-ratio`: the candidate's performance relative to the baseline's.
#[derive(Debug, Clone, Serialize)]
pub struct RatioCheck {
    /// The deciding metric.
    pub metric: &'static str,
    /// baseline ÷ candidate for a time, candidate ÷ baseline for a rate
    /// (above 1: the candidate is faster); 0 when the candidate has no
    /// figure where the baseline has one.
    pub ratio: f64,
    pub min_ratio: f64,
    pub below: bool,
}

/// The ratio check of a group's deciding metric, when `min_ratio` is set.
pub fn ratio_check(g: &GroupComparison, min_ratio: f64) -> Option<RatioCheck> {
    let p = g.primary()?;
    let b = p.baseline?;
    let ratio = match (p.better, p.candidate) {
        (_, None) => 0.0,
        (super::stats::Better::Lower, Some(c)) => b / c,
        (super::stats::Better::Higher, Some(c)) => c / b,
    };
    Some(RatioCheck {
        metric: p.metric,
        ratio,
        min_ratio,
        below: ratio < min_ratio,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn olympic_kept_matches_the_olympic_mean() {
        let m = [5.0, 1.0, 3.0, 9.0, 4.0];
        let kept = olympic_kept(&m, 0, 1);
        assert_eq!(kept, vec![2, 4, 0]);
        let mean = kept.iter().map(|&i| m[i]).sum::<f64>() / 3.0;
        assert_eq!(referee_rules::score::olympic_mean(&m, 0, 1), Some(mean));
        // One failed run: only the fastest is left out.
        assert_eq!(olympic_kept(&m[..4], 1, 1), vec![2, 0, 3]);
    }

    #[test]
    fn diff_lists_changes_ranked_and_counts_the_rest() {
        let mut b = Recorded::new();
        let mut c = Recorded::new();
        for (rec, cuda, seed) in [(&mut b, "12.8", "1"), (&mut c, "12.9", "2")] {
            super::super::facts::add(
                rec,
                Category::Software,
                "system.other_software_stack.cuda_version",
                cuda,
            );
            super::super::facts::add(rec, Category::Software, "system.framework", "NeMo");
            super::super::facts::add(rec, Category::Seeds, "log.seed", seed);
        }
        super::super::facts::add(&mut c, Category::Environment, "env.NCCL_ALGO", "Ring");
        let d = what_changed(&b, &c);
        let names: Vec<&str> = d.changed.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(
            names,
            vec!["system.other_software_stack.cuda_version", "env.NCCL_ALGO"]
        );
        assert_eq!(d.unchanged, 1);
        assert_eq!(d.seeds[0].status, "differ (expected)");
    }
}
