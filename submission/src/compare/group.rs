//! The comparison of one benchmark group: definitions, metrics, verdict.

use super::*;

fn short(s: &str) -> String {
    if s.len() > 16 {
        format!("{}…", &s[..16])
    } else {
        s.to_string()
    }
}

fn join_set<T: std::fmt::Display>(s: &BTreeSet<T>) -> String {
    s.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn definition(b: &RunSet, c: &RunSet) -> Definition {
    let mut d = Vec::new();
    if b.benchmark != c.benchmark {
        d.push(format!(
            "benchmark: baseline {}, candidate {}",
            b.benchmark, c.benchmark
        ));
    }
    if b.usage != c.usage {
        d.push(format!(
            "usage: baseline {}, candidate {}",
            b.usage, c.usage
        ));
    }
    let framework = b.kind == SourceKind::FrameworkLog || c.kind == SourceKind::FrameworkLog;
    if b.ruleset != c.ruleset && !framework {
        d.push(format!(
            "ruleset: baseline {}, candidate {}",
            b.ruleset, c.ruleset
        ));
    }
    if let (Some(tb), Some(tc)) = (&b.target, &c.target)
        && tb != tc
    {
        d.push(format!("target: baseline {tb}, candidate {tc}"));
    }
    for (name, set) in [("baseline", b), ("candidate", c)] {
        for (ds, fps) in &set.dataset_fingerprints {
            if fps.len() > 1 {
                d.push(format!(
                    "dataset {ds}: the {name} runs disagree ({})",
                    fps.iter().map(|f| short(f)).collect::<Vec<_>>().join(", ")
                ));
            }
        }
    }
    if !b.dataset_fingerprints.is_empty() && !c.dataset_fingerprints.is_empty() {
        let names: BTreeSet<&String> = b
            .dataset_fingerprints
            .keys()
            .chain(c.dataset_fingerprints.keys())
            .collect();
        for ds in names {
            match (
                b.dataset_fingerprints.get(ds),
                c.dataset_fingerprints.get(ds),
            ) {
                (Some(x), Some(y)) if x != y => d.push(format!(
                    "dataset {ds}: baseline fingerprint {}, candidate {}",
                    x.iter().map(|f| short(f)).collect::<Vec<_>>().join(", "),
                    y.iter().map(|f| short(f)).collect::<Vec<_>>().join(", ")
                )),
                (Some(_), None) => d.push(format!("dataset {ds}: only the baseline uses it")),
                (None, Some(_)) => d.push(format!("dataset {ds}: only the candidate uses it")),
                _ => {}
            }
        }
    }
    if let (Some(pb), Some(pc)) = (&b.perf_config, &c.perf_config)
        && pb != pc
    {
        d.push(format!("configuration: baseline {pb}, candidate {pc}"));
    }
    if b.mode != c.mode {
        d.push(format!(
            "mode: baseline {}, candidate {}",
            b.mode.as_str(),
            c.mode.as_str()
        ));
    }
    Definition {
        compatible: d.is_empty(),
        differences: d,
    }
}

/// The comparison of one metric.
fn pct(x: f64) -> String {
    format!("{:+.1} %", x * 100.0)
}

/// (name, label, which way is better) of a metric.
type MetricSpec = (&'static str, &'static str, Better);

fn metric(
    (name, label, better): MetricSpec,
    values: impl Fn(&RunRecord) -> Option<f64>,
    b: &RunSet,
    c: &RunSet,
    opts: &Options,
) -> Option<MetricComparison> {
    let vb: Vec<f64> = b.runs.iter().filter_map(&values).collect();
    let vc: Vec<f64> = c.runs.iter().filter_map(&values).collect();
    if vb.is_empty() || vc.is_empty() {
        return None;
    }
    let mean = |x: &[f64]| Some(referee_rules::stats::np_mean(x));
    let (pb, pc) = (mean(&vb)?, mean(&vc)?);
    let change = pc / pb - 1.0;
    let enough = vb.len() >= MIN_RUNS && vc.len() >= MIN_RUNS;
    let ci = enough
        .then(|| {
            bootstrap_relative_change(
                &vb,
                &vc,
                &mean,
                &mean,
                opts.confidence,
                opts.resamples,
                opts.seed,
            )
        })
        .flatten();
    let verdict = classify(change, ci.map(|c| (c.lo, c.hi)), opts.threshold, better);
    Some(MetricComparison {
        metric: name,
        label,
        statistic: "mean over runs",
        better,
        baseline: Some(pb),
        candidate: Some(pc),
        relative_change: Some(change),
        ci,
        mann_whitney: mann_whitney_u(&vb, &vc),
        change: verdict,
        decides: false,
        reason: (!enough).then(|| {
            format!(
                "{} and {} runs: a confidence interval needs at least {MIN_RUNS} per side",
                vb.len(),
                vc.len()
            )
        }),
    })
}

fn time_to_train(b: &RunSet, c: &RunSet, opts: &Options) -> MetricComparison {
    let ok = |s: &RunSet| -> Vec<f64> { s.runs.iter().filter_map(|r| r.minutes).collect() };
    let with_failed = |s: &RunSet| -> Vec<f64> {
        s.runs
            .iter()
            .map(|r| r.minutes.unwrap_or(f64::INFINITY))
            .collect()
    };
    let (ob, oc) = (ok(b), ok(c));
    let mut m = MetricComparison {
        metric: "time_to_train_minutes",
        label: "time to train (min)",
        statistic: "olympic mean × scaling factor (referee summarize's score)",
        better: Better::Lower,
        baseline: b.score_minutes,
        candidate: c.score_minutes,
        relative_change: None,
        ci: None,
        mann_whitney: mann_whitney_u(&with_failed(b), &with_failed(c)),
        change: Change::Inconclusive,
        decides: true,
        reason: None,
    };
    let failed = |s: &RunSet| {
        format!(
            "{} of {} runs failed where olympic scoring allows {}",
            s.dropped,
            s.runs.len(),
            s.max_dropped
        )
    };
    match (b.score_minutes, c.score_minutes) {
        (Some(sb), Some(sc)) => {
            let change = sc / sb - 1.0;
            m.relative_change = Some(change);
            if ob.len() < MIN_RUNS || oc.len() < MIN_RUNS {
                m.reason = Some(format!(
                    "{} and {} counted runs: a confidence interval needs at least {MIN_RUNS} per side",
                    ob.len(),
                    oc.len()
                ));
            } else {
                let stat = |s: &RunSet| {
                    let (dropped, max, scale) = (s.dropped, s.max_dropped, s.scaling_factor);
                    move |x: &[f64]| {
                        referee_rules::score::olympic_mean(x, dropped, max).map(|v| v * scale)
                    }
                };
                let (fb, fc) = (stat(b), stat(c));
                m.ci = bootstrap_relative_change(
                    &ob,
                    &oc,
                    &fb,
                    &fc,
                    opts.confidence,
                    opts.resamples,
                    opts.seed,
                );
                if m.ci.is_none() {
                    m.reason = Some("the bootstrap statistic is undefined".into());
                }
            }
            m.change = classify(
                change,
                m.ci.map(|c| (c.lo, c.hi)),
                opts.threshold,
                Better::Lower,
            );
        }
        (Some(_), None) => {
            m.change = Change::Regression;
            m.reason = Some(format!("the candidate has no valid score: {}", failed(c)));
        }
        (None, Some(_)) => {
            m.reason = Some(format!("the baseline has no valid score: {}", failed(b)));
        }
        (None, None) => {
            m.reason = Some("neither side has a valid score".into());
        }
    }
    m
}

/// The throughput metrics both sides have: samples/s, tokens/s, MFU and
/// (framework logs) the window's step time.
fn throughput_metrics(b: &RunSet, c: &RunSet, opts: &Options) -> Vec<MetricComparison> {
    let higher = Better::Higher;
    [
        metric(
            ("samples_per_second", "samples/s", higher),
            |r| r.samples_per_second,
            b,
            c,
            opts,
        ),
        metric(
            ("tokens_per_second", "tokens/s", higher),
            |r| r.tokens_per_second,
            b,
            c,
            opts,
        ),
        metric(("mfu", "MFU", higher), |r| r.mfu, b, c, opts),
        metric(
            ("step_time_seconds", "step time (s)", Better::Lower),
            |r| r.step_seconds,
            b,
            c,
            opts,
        ),
        metric(
            ("energy_joules", "energy per run (J)", Better::Lower),
            |r| r.energy_joules,
            b,
            c,
            opts,
        ),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The deciding metric's change: time to train, else samples/s, else (for
/// framework logs without a batch size) the step time.
fn decide(
    time: &Option<MetricComparison>,
    throughput: &mut [MetricComparison],
    reasons: &mut Vec<String>,
) -> Change {
    if let Some(t) = time {
        return t.change;
    }
    let pick = throughput
        .iter()
        .position(|m| m.metric == "samples_per_second")
        .or_else(|| {
            throughput
                .iter()
                .position(|m| m.metric == "step_time_seconds")
        });
    match pick {
        Some(i) => {
            throughput[i].decides = true;
            throughput[i].change
        }
        None => {
            reasons.push("no time to train or throughput on both sides".into());
            Change::Inconclusive
        }
    }
}

/// Why the verdict: the deciding metric, then a convergence change.
fn reason_lines(
    primary: Option<&MetricComparison>,
    convergence: Option<&ConvergenceComparison>,
) -> Vec<String> {
    let mut reasons = Vec::new();
    if let Some(p) = primary {
        let what = match (p.relative_change, p.ci) {
            (Some(ch), Some(ci)) => format!(
                "{} {} (CI {} … {})",
                p.label,
                pct(ch),
                pct(ci.lo),
                pct(ci.hi)
            ),
            (Some(ch), None) => format!("{} {}", p.label, pct(ch)),
            _ => p.label.to_string(),
        };
        reasons.push(format!("{what}: {}", p.change.as_str()));
        if let Some(r) = &p.reason {
            reasons.push(r.clone());
        }
    }
    if let Some(cv) = convergence
        && matches!(
            cv.test.change,
            ConvergenceChange::Faster | ConvergenceChange::Slower
        )
    {
        reasons.push(format!(
            "{} to target {}: {}",
            cv.unit,
            pct(cv.test.relative_change),
            cv.test.change.as_str()
        ));
    }
    reasons
}

fn verdict_of(primary_change: Change, conv_change: ConvergenceChange) -> Verdict {
    if primary_change == Change::Regression {
        Verdict::Regression
    } else if matches!(
        conv_change,
        ConvergenceChange::Faster | ConvergenceChange::Slower
    ) {
        Verdict::ConvergenceChange
    } else {
        match primary_change {
            Change::Improvement => Verdict::Improvement,
            Change::NoSignificantChange => Verdict::NoSignificantChange,
            _ => Verdict::Inconclusive,
        }
    }
}

pub(super) fn compare_group(b: &RunSet, c: &RunSet, opts: &Options) -> GroupComparison {
    let def = definition(b, c);
    let label = if b.system == c.system {
        format!("{} · {}", b.benchmark, b.system)
    } else {
        format!("{} · {} → {}", b.benchmark, b.system, c.system)
    };
    let both_ttt = b.mode == Mode::TimeToTrain && c.mode == Mode::TimeToTrain;
    let mut throughput = throughput_metrics(b, c, opts);
    let time = both_ttt.then(|| time_to_train(b, c, opts));
    let mut reasons = Vec::new();
    let primary_change = decide(&time, &mut throughput, &mut reasons);
    let convergence = both_ttt.then(|| {
        let (pb, pc) = (b.converged_points(), c.converged_points());
        ConvergenceComparison {
            unit: b.convergence_unit,
            test: convergence_test(&pb, &pc, opts.threshold),
            baseline_points: pb,
            candidate_points: pc,
        }
    });
    let conv_change = convergence
        .as_ref()
        .map(|c| c.test.change)
        .unwrap_or(ConvergenceChange::Inconclusive);
    let primary = time.iter().chain(&throughput).find(|m| m.decides);
    reasons.extend(reason_lines(primary, convergence.as_ref()));
    let mut g = GroupComparison {
        benchmark: b.benchmark.clone(),
        label,
        baseline: b.clone(),
        candidate: c.clone(),
        definition: def,
        time_to_train: time,
        verdict: verdict_of(primary_change, conv_change),
        throughput,
        convergence,
        reasons,
        notes: notes(b, c),
        breakdown: None,
        rate_breakdowns: Vec::new(),
        changed: super::explain::what_changed(&b.recorded, &c.recorded),
        ratio: None,
    };
    g.breakdown = super::explain::breakdown(&g, opts).ok();
    g.rate_breakdowns = super::explain::rate_breakdowns(&g, opts);
    g.ratio = opts
        .min_ratio
        .and_then(|r| super::explain::ratio_check(&g, r));
    g
}

/// Notes on how the runs were made (delays, directories, hyperparameters,
/// windows, code, scaling factors, framework runs left out).
fn notes(b: &RunSet, c: &RunSet) -> Vec<String> {
    let mut notes = Vec::new();
    for (name, s) in [("baseline", b), ("candidate", c)] {
        let delays: Vec<u64> = s.step_delay_ms.iter().copied().filter(|&d| d > 0).collect();
        if !delays.is_empty() {
            notes.push(format!(
                "the {name} runs were made with an injected step delay (--step-delay-ms {})",
                delays
                    .iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if s.dirs.len() > 1 {
            notes.push(format!(
                "the {name} runs come from {} directories",
                s.dirs.len()
            ));
        }
        let left_out: Vec<String> = s
            .runs
            .iter()
            .filter_map(|r| r.dropped.clone().filter(|_| r.status.is_some()))
            .collect();
        if !left_out.is_empty() {
            notes.push(format!(
                "{} {name} run{} left out of the statistics: {}",
                left_out.len(),
                if left_out.len() == 1 { "" } else { "s" },
                left_out.join("; ")
            ));
        }
    }
    if !b.config_sha256.is_empty()
        && !c.config_sha256.is_empty()
        && b.config_sha256 != c.config_sha256
    {
        notes.push(format!(
            "hyperparameters differ (config sha256 {} vs {})",
            b.config_sha256
                .iter()
                .map(|s| short(s))
                .collect::<Vec<_>>()
                .join(", "),
            c.config_sha256
                .iter()
                .map(|s| short(s))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if !b.throughput_windows.is_empty()
        && !c.throughput_windows.is_empty()
        && b.throughput_windows != c.throughput_windows
    {
        let w = |s: &RunSet| {
            s.throughput_windows
                .iter()
                .map(|(n, a, z)| format!("{n} steps, window {a}..{z}"))
                .collect::<Vec<_>>()
                .join("; ")
        };
        notes.push(format!(
            "throughput windows differ: baseline {}, candidate {}",
            w(b),
            w(c)
        ));
    }
    notes.extend(code_note(b, c));
    if b.scaling_factor != 1.0 || c.scaling_factor != 1.0 {
        notes.push(format!(
            "scores include scaling.json factors (baseline {}, candidate {})",
            b.scaling_factor, c.scaling_factor
        ));
    }
    notes
}

fn code_note(b: &RunSet, c: &RunSet) -> Option<String> {
    if !b.code.is_empty() && b.code == c.code {
        Some(format!("code (both sides): {}", join_set(&b.code)))
    } else if !b.code.is_empty() || !c.code.is_empty() {
        let side = |s: &RunSet| {
            if s.code.is_empty() {
                "unknown".into()
            } else {
                join_set(&s.code)
            }
        };
        Some(format!("code: baseline {}; candidate {}", side(b), side(c)))
    } else {
        None
    }
}
