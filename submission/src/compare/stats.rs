//! The statistics of `referee compare`: a percentile bootstrap of the
//! relative change of a statistic, the Mann–Whitney U test (exact and
//! asymptotic, as scipy computes them), the convergence t-test of the RCP
//! check applied to two run sets, and the verdict rules.
//!
//! Everything here is deterministic: the bootstrap draws from a fixed-seed
//! splitmix64 stream, so a report is reproducible bit for bit.

use referee_rules::rcp::min_acceptable_mean;
use referee_rules::stats::{np_mean, np_std};
use serde::Serialize;

/// Bootstrap resamples per comparison.
pub const BOOTSTRAP_RESAMPLES: usize = 10_000;
/// The fixed seed of the bootstrap stream.
pub const BOOTSTRAP_SEED: u64 = 20_250_601;
/// Runs a side needs before a confidence interval means anything.
pub const MIN_RUNS: usize = 2;

/// The bootstrap's stream: the workspace's one splitmix64
/// (`referee_datasets::rng`, pinned by its tests).
pub use referee_datasets::rng::SplitMix64;

/// numpy's default quantile (linear interpolation, "type 7") of sorted data.
pub fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let pos = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    let frac = pos - lo as f64;
    if lo == hi || frac == 0.0 {
        sorted[lo]
    } else {
        sorted[lo] + (sorted[hi] - sorted[lo]) * frac
    }
}

/// A percentile bootstrap confidence interval of a relative change.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BootstrapCi {
    pub lo: f64,
    pub hi: f64,
    pub confidence: f64,
    pub resamples: usize,
    /// Resamples whose statistic was defined (the others are left out).
    pub valid: usize,
    pub seed: u64,
}

/// Percentile bootstrap of `stat_c(candidate*) / stat_b(baseline*) − 1`:
/// each resample draws `baseline.len()` runs from the baseline and
/// `candidate.len()` from the candidate, with replacement, from one
/// splitmix64 stream seeded with `seed`. The interval is the
/// (1 − confidence)/2 and (1 + confidence)/2 quantiles (numpy's linear
/// rule) of the resampled changes. `None` when a side is empty or fewer
/// than half of the resamples give a finite change.
pub fn bootstrap_relative_change(
    baseline: &[f64],
    candidate: &[f64],
    stat_b: &dyn Fn(&[f64]) -> Option<f64>,
    stat_c: &dyn Fn(&[f64]) -> Option<f64>,
    confidence: f64,
    resamples: usize,
    seed: u64,
) -> Option<BootstrapCi> {
    if baseline.is_empty() || candidate.is_empty() || resamples == 0 {
        return None;
    }
    let mut rng = SplitMix64::new(seed);
    let mut changes = Vec::with_capacity(resamples);
    let mut rb = vec![0.0; baseline.len()];
    let mut rc = vec![0.0; candidate.len()];
    for _ in 0..resamples {
        for x in rb.iter_mut() {
            *x = baseline[rng.below(baseline.len() as u64) as usize];
        }
        for x in rc.iter_mut() {
            *x = candidate[rng.below(candidate.len() as u64) as usize];
        }
        if let (Some(b), Some(c)) = (stat_b(&rb), stat_c(&rc)) {
            let change = c / b - 1.0;
            if change.is_finite() {
                changes.push(change);
            }
        }
    }
    if changes.len() * 2 < resamples {
        return None;
    }
    changes.sort_by(f64::total_cmp);
    let alpha = 1.0 - confidence;
    Some(BootstrapCi {
        lo: quantile_sorted(&changes, alpha / 2.0),
        hi: quantile_sorted(&changes, 1.0 - alpha / 2.0),
        confidence,
        resamples,
        valid: changes.len(),
        seed,
    })
}

/// The Mann–Whitney U test of two samples, two-sided.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MannWhitney {
    /// U of the first sample (scipy's `statistic`): the number of pairs in
    /// which the first sample's value is the larger, ties counting ½.
    pub u: f64,
    pub p_two_sided: f64,
    /// `exact` or `asymptotic`.
    pub method: &'static str,
}

/// Average ranks (1-based) of the concatenation, and the sizes of the tie
/// groups.
fn average_ranks(all: &[f64]) -> (Vec<f64>, Vec<usize>) {
    let mut idx: Vec<usize> = (0..all.len()).collect();
    idx.sort_by(|&a, &b| all[a].total_cmp(&all[b]));
    let mut ranks = vec![0.0; all.len()];
    let mut ties = Vec::new();
    let mut i = 0;
    while i < idx.len() {
        let mut j = i + 1;
        while j < idx.len() && all[idx[j]] == all[idx[i]] {
            j += 1;
        }
        let avg = (i + j + 1) as f64 / 2.0; // mean of ranks i+1 ..= j
        for &k in &idx[i..j] {
            ranks[k] = avg;
        }
        ties.push(j - i);
        i = j;
    }
    (ranks, ties)
}

/// P(U ≥ u) under the null for samples of sizes `m` and `n` without ties:
/// the number of orderings with U = k, counted by the recursion on the
/// largest element N(i, j, k) = N(i−1, j, k−j) + N(i, j−1, k).
pub fn mwu_exact_sf(u: f64, m: usize, n: usize) -> f64 {
    let max_u = m * n;
    // counts[i][k] for the current j.
    let mut counts = vec![vec![0.0f64; max_u + 1]; m + 1];
    for row in counts.iter_mut() {
        row[0] = 1.0; // j = 0: U = 0 whatever i is
    }
    for j in 1..=n {
        let prev = counts.clone();
        // i = 0: U = 0 always.
        for i in 1..=m {
            for k in 0..=max_u {
                let from_x = if k >= j { counts[i - 1][k - j] } else { 0.0 };
                counts[i][k] = from_x + prev[i][k];
            }
        }
    }
    let total: f64 = counts[m].iter().sum();
    let from = u.ceil().max(0.0) as usize;
    if from > max_u {
        return 0.0;
    }
    // Sum the smaller tail for accuracy, as scipy does.
    let upper: f64 = counts[m][from..].iter().sum();
    (upper / total).clamp(0.0, 1.0)
}

// The standard normal CDF as scipy computes it (`scipy.special.ndtr`): the
// Cephes algorithm (Cephes Math Library 2.9, S. L. Moshier, as shipped in
// scipy's xsf), so that asymptotic p-values agree with scipy's to the last
// bits. statrs' erfc differs from it around 1e-10 relative.
#[allow(clippy::excessive_precision)] // Cephes' digits, verbatim
const NDTR_P: [f64; 9] = [
    2.461_969_814_735_305_125_24E-10,
    5.641_895_648_310_688_219_77E-1,
    7.463_210_564_422_699_126_87E0,
    4.863_719_709_856_813_666_14E1,
    1.965_208_329_560_770_982_42E2,
    5.264_451_949_954_773_586_31E2,
    9.345_285_271_719_576_075_40E2,
    1.027_551_886_895_157_102_72E3,
    5.575_353_353_693_993_275_26E2,
];
#[allow(clippy::excessive_precision)] // Cephes' digits, verbatim
const NDTR_Q: [f64; 8] = [
    1.322_819_511_547_449_925_08E1,
    8.670_721_408_859_897_423_29E1,
    3.549_377_788_878_198_910_62E2,
    9.757_085_017_432_054_897_53E2,
    1.823_909_166_879_097_362_89E3,
    2.246_337_608_187_109_817_92E3,
    1.656_663_091_941_613_501_82E3,
    5.575_353_408_177_276_755_46E2,
];
#[allow(clippy::excessive_precision)] // Cephes' digits, verbatim
const NDTR_R: [f64; 6] = [
    5.641_895_835_477_550_739_84E-1,
    1.275_366_707_599_781_044_16E0,
    5.019_050_422_511_804_774_14E0,
    6.160_210_979_930_535_851_95E0,
    7.409_742_699_504_489_391_60E0,
    2.978_866_653_721_002_406_70E0,
];
#[allow(clippy::excessive_precision)] // Cephes' digits, verbatim
const NDTR_S: [f64; 6] = [
    2.260_528_632_201_172_765_90E0,
    9.396_035_249_380_014_346_73E0,
    1.204_895_398_080_966_566_05E1,
    1.708_144_507_475_658_972_22E1,
    9.608_968_090_632_858_781_98E0,
    3.369_076_451_000_815_160_50E0,
];
#[allow(clippy::excessive_precision)] // Cephes' digits, verbatim
const NDTR_T: [f64; 5] = [
    9.604_973_739_870_516_387_49E0,
    9.002_601_972_038_426_892_17E1,
    2.232_005_345_946_843_192_26E3,
    7.003_325_141_128_050_754_73E3,
    5.559_230_130_103_949_627_68E4,
];
#[allow(clippy::excessive_precision)] // Cephes' digits, verbatim
const NDTR_U: [f64; 5] = [
    3.356_171_416_475_030_996_47E1,
    5.213_579_497_801_526_797_95E2,
    4.594_323_829_709_801_279_87E3,
    2.262_900_006_138_909_342_46E4,
    4.926_739_426_086_359_210_86E4,
];
#[allow(clippy::excessive_precision)] // Cephes' digits, verbatim
const MAXLOG: f64 = 7.097_827_128_933_839_967_32E2;

fn polevl(x: f64, c: &[f64]) -> f64 {
    c[1..].iter().fold(c[0], |acc, &k| acc * x + k)
}

/// A polynomial whose leading coefficient 1 is not in the table.
fn p1evl(x: f64, c: &[f64]) -> f64 {
    c[1..].iter().fold(x + c[0], |acc, &k| acc * x + k)
}

fn erf(x: f64) -> f64 {
    if x < 0.0 {
        return -erf(-x);
    }
    if x > 1.0 {
        return 1.0 - erfc(x);
    }
    let z = x * x;
    x * polevl(z, &NDTR_T) / p1evl(z, &NDTR_U)
}

fn erfc(a: f64) -> f64 {
    let x = a.abs();
    if x < 1.0 {
        return 1.0 - erf(a);
    }
    let z = -a * a;
    let under = if a < 0.0 { 2.0 } else { 0.0 };
    if z < -MAXLOG {
        return under;
    }
    let z = z.exp();
    let (p, q) = if x < 8.0 {
        (polevl(x, &NDTR_P), p1evl(x, &NDTR_Q))
    } else {
        (polevl(x, &NDTR_R), p1evl(x, &NDTR_S))
    };
    let mut y = (z * p) / q;
    if a < 0.0 {
        y = 2.0 - y;
    }
    if y == 0.0 { under } else { y }
}

/// The standard normal CDF (`scipy.special.ndtr`).
pub fn ndtr(a: f64) -> f64 {
    if a.is_nan() {
        return f64::NAN;
    }
    let x = a * std::f64::consts::FRAC_1_SQRT_2;
    let z = x.abs();
    if z < 1.0 {
        0.5 + 0.5 * erf(x)
    } else {
        let y = 0.5 * erfc(z);
        if x > 0.0 { 1.0 - y } else { y }
    }
}

/// The two-sided Mann–Whitney U test as `scipy.stats.mannwhitneyu(x, y)`
/// computes it (method `auto`): exact when a sample has at most 8 values
/// and there are no ties, otherwise the normal approximation with the tie
/// correction and the continuity correction. `None` when a sample is empty
/// or holds a NaN.
pub fn mann_whitney_u(x: &[f64], y: &[f64]) -> Option<MannWhitney> {
    if x.is_empty() || y.is_empty() || x.iter().chain(y).any(|v| v.is_nan()) {
        return None;
    }
    let (n1, n2) = (x.len(), y.len());
    let all: Vec<f64> = x.iter().chain(y).copied().collect();
    let (ranks, ties) = average_ranks(&all);
    let r1: f64 = ranks[..n1].iter().sum();
    let u1 = r1 - (n1 * (n1 + 1)) as f64 / 2.0;
    let u2 = (n1 * n2) as f64 - u1;
    let u = u1.max(u2);
    let has_ties = ties.iter().any(|&t| t > 1);
    let exact = !(has_ties || (n1 > 8 && n2 > 8));
    let (p, method) = if exact {
        (2.0 * mwu_exact_sf(u, n1, n2), "exact")
    } else {
        let (a, b) = (n1 as f64, n2 as f64);
        let n = a + b;
        let tie_term: f64 = ties
            .iter()
            .map(|&t| {
                let t = t as f64;
                t * t * t - t
            })
            .sum();
        let s = (a * b / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)))).sqrt();
        let numerator = u - a * b / 2.0 - 0.5;
        let z = if s > 0.0 {
            numerator / s
        } else if numerator > 0.0 {
            f64::INFINITY
        } else {
            f64::NEG_INFINITY
        };
        (2.0 * ndtr(-z), "asymptotic")
    };
    Some(MannWhitney {
        u: u1,
        p_two_sided: p.clamp(0.0, 1.0),
        method,
    })
}

/// Which way a metric is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Better {
    Lower,
    Higher,
}

/// The outcome for one metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Change {
    Regression,
    Improvement,
    NoSignificantChange,
    /// Not enough runs (or no defined interval) to decide.
    Inconclusive,
}

impl Change {
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Regression => "regression",
            Change::Improvement => "improvement",
            Change::NoSignificantChange => "no significant change",
            Change::Inconclusive => "inconclusive",
        }
    }
}

/// The verdict rule for one metric. `change` is candidate/baseline − 1 of
/// the point statistic, `ci` its bootstrap interval and `threshold` a
/// fraction (0.05 for 5 %). For a lower-is-better metric (time to train):
/// regression iff the whole interval lies above 0 and `change > threshold`;
/// improvement iff the whole interval lies below 0 and
/// `change < −threshold`. For a higher-is-better metric (samples/s) the
/// signs flip: regression iff the interval lies below 0 and
/// `change < −threshold`. Comparisons are strict: a change of exactly the
/// threshold, or an interval touching 0, is no significant change.
pub fn classify(change: f64, ci: Option<(f64, f64)>, threshold: f64, better: Better) -> Change {
    let Some((lo, hi)) = ci else {
        return Change::Inconclusive;
    };
    if !change.is_finite() || lo.is_nan() || hi.is_nan() {
        return Change::Inconclusive;
    }
    let worse_up = lo > 0.0 && change > threshold;
    let worse_down = hi < 0.0 && change < -threshold;
    match better {
        Better::Lower if worse_up => Change::Regression,
        Better::Lower if worse_down => Change::Improvement,
        Better::Higher if worse_down => Change::Regression,
        Better::Higher if worse_up => Change::Improvement,
        _ => Change::NoSignificantChange,
    }
}

/// How the candidate converges compared with the baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConvergenceChange {
    Faster,
    Slower,
    NoSignificantChange,
    Inconclusive,
}

impl ConvergenceChange {
    pub fn as_str(self) -> &'static str {
        match self {
            ConvergenceChange::Faster => "converges faster",
            ConvergenceChange::Slower => "converges slower",
            ConvergenceChange::NoSignificantChange => "no significant change",
            ConvergenceChange::Inconclusive => "inconclusive",
        }
    }
}

/// One direction of the RCP-style test: `reference` plays the RCP, `other`
/// the submission.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RcpStyleTest {
    /// Olympic mean of the reference (one dropped at each end).
    pub reference_mean: f64,
    /// Population standard deviation of all reference points.
    pub reference_stdev: f64,
    /// Reference points after trimming (the t-test's n_ref).
    pub n_ref: usize,
    /// `min_acceptable_mean(reference_mean, reference_stdev, n_ref, other runs)`.
    pub min_acceptable_mean: f64,
    /// Olympic mean of the other side.
    pub other_mean: f64,
    /// `other_mean < min_acceptable_mean`.
    pub faster: bool,
}

/// The convergence comparison of two sets of samples (or epochs) to target.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConvergenceTest {
    pub baseline_mean: f64,
    pub candidate_mean: f64,
    /// candidate_mean / baseline_mean − 1.
    pub relative_change: f64,
    /// Baseline as the reference: does the candidate converge faster?
    pub candidate_vs_baseline: Option<RcpStyleTest>,
    /// Candidate as the reference: does the baseline converge faster
    /// (i.e. the candidate slower)?
    pub baseline_vs_candidate: Option<RcpStyleTest>,
    pub change: ConvergenceChange,
    pub reason: Option<String>,
}

/// Sorted, with one value dropped at each end when more than two remain
/// (the RCP check's olympic trimming).
fn olympic_trim(points: &[f64]) -> Vec<f64> {
    let mut s = points.to_vec();
    s.sort_by(f64::total_cmp);
    if s.len() > 2 {
        s[1..s.len() - 1].to_vec()
    } else {
        Vec::new()
    }
}

fn rcp_style(reference: &[f64], other: &[f64]) -> RcpStyleTest {
    let trimmed = olympic_trim(reference);
    let reference_mean = np_mean(&trimmed);
    let reference_stdev = np_std(reference);
    let min = min_acceptable_mean(
        reference_mean,
        reference_stdev,
        trimmed.len() as f64,
        other.len(),
    );
    let other_mean = np_mean(&olympic_trim(other));
    RcpStyleTest {
        reference_mean,
        reference_stdev,
        n_ref: trimmed.len(),
        min_acceptable_mean: min,
        other_mean,
        faster: other_mean < min,
    }
}

/// Runs each side needs for the convergence test.
pub const MIN_CONVERGED_RUNS: usize = 3;

/// The RCP check's one-sided t-test (α = 0.05, `min_acceptable_mean`) in
/// both directions, on the samples-to-target of converged runs. Candidate
/// converges faster iff its olympic mean is below the baseline's minimum
/// acceptable mean and the change is beyond `−threshold`; slower iff the
/// baseline's olympic mean is below the candidate's minimum acceptable mean
/// and the change is beyond `+threshold`. Needs at least 3 converged runs
/// per side and 7 in all (the t-test's degrees of freedom
/// (n_ref − 2 + n_sub − 2), with n_ref trimmed and n_sub = runs − 2, must be
/// positive).
pub fn convergence_test(baseline: &[f64], candidate: &[f64], threshold: f64) -> ConvergenceTest {
    let (nb, nc) = (baseline.len(), candidate.len());
    let bm = np_mean(&olympic_trim(baseline));
    let cm = np_mean(&olympic_trim(candidate));
    let mut t = ConvergenceTest {
        baseline_mean: bm,
        candidate_mean: cm,
        relative_change: cm / bm - 1.0,
        candidate_vs_baseline: None,
        baseline_vs_candidate: None,
        change: ConvergenceChange::Inconclusive,
        reason: None,
    };
    if nb < MIN_CONVERGED_RUNS || nc < MIN_CONVERGED_RUNS || nb + nc < 7 {
        t.reason = Some(format!(
            "{nb} and {nc} converged runs: the test needs at least {MIN_CONVERGED_RUNS} per side and 7 in all"
        ));
        return t;
    }
    let fwd = rcp_style(baseline, candidate);
    let back = rcp_style(candidate, baseline);
    let faster = fwd.faster && t.relative_change < -threshold;
    let slower = back.faster && t.relative_change > threshold;
    t.change = if faster {
        ConvergenceChange::Faster
    } else if slower {
        ConvergenceChange::Slower
    } else {
        ConvergenceChange::NoSignificantChange
    };
    t.candidate_vs_baseline = Some(fwd);
    t.baseline_vs_candidate = Some(back);
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_is_reproducible_and_uniform_enough() {
        let mut a = SplitMix64::new(7);
        let mut b = SplitMix64::new(7);
        let xs: Vec<u64> = (0..5).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..5).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
        let mut counts = [0usize; 3];
        let mut r = SplitMix64::new(1);
        for _ in 0..30_000 {
            counts[r.below(3) as usize] += 1;
        }
        for c in counts {
            assert!((9_500..10_500).contains(&c), "{counts:?}");
        }
    }

    #[test]
    fn numpy_quantiles() {
        let s = [1.0, 2.0, 3.0, 4.0];
        // np.quantile([1,2,3,4], [0, 0.25, 0.5, 0.975, 1]) = 1, 1.75, 2.5, 3.925, 4
        assert_eq!(quantile_sorted(&s, 0.0), 1.0);
        assert_eq!(quantile_sorted(&s, 0.25), 1.75);
        assert_eq!(quantile_sorted(&s, 0.5), 2.5);
        assert!((quantile_sorted(&s, 0.975) - 3.925).abs() < 1e-12);
        assert_eq!(quantile_sorted(&s, 1.0), 4.0);
        assert!(quantile_sorted(&[], 0.5).is_nan());
    }

    fn mean(x: &[f64]) -> Option<f64> {
        Some(x.iter().sum::<f64>() / x.len() as f64)
    }

    #[test]
    fn bootstrap_is_deterministic_for_a_seed() {
        let b = [10.0, 10.4, 9.8, 10.1, 10.3];
        let c = [11.0, 11.2, 10.9, 11.4, 10.8];
        let one = bootstrap_relative_change(&b, &c, &mean, &mean, 0.95, 2_000, 42).unwrap();
        let two = bootstrap_relative_change(&b, &c, &mean, &mean, 0.95, 2_000, 42).unwrap();
        assert_eq!(one, two);
        let other = bootstrap_relative_change(&b, &c, &mean, &mean, 0.95, 2_000, 43).unwrap();
        assert_ne!(one, other);
        assert_eq!(one.valid, 2_000);
        assert!(one.lo > 0.0 && one.hi > one.lo, "{one:?}");
    }

    /// Synthetic runs: the candidate is 1.2 × the baseline in distribution.
    /// The 95 % interval must cover the true change (+20 %) in most of many
    /// independent experiments (a percentile bootstrap of a mean of 10
    /// undercovers slightly; we ask for at least 85 %).
    #[test]
    fn bootstrap_covers_the_true_ratio() {
        let mut rng = SplitMix64::new(99);
        let mut normal = || {
            // Box–Muller from two uniforms in (0, 1].
            let u1 = ((rng.next_u64() >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
            let u2 = ((rng.next_u64() >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
            (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
        };
        let experiments = 200;
        let mut covered = 0;
        for e in 0..experiments {
            let b: Vec<f64> = (0..10).map(|_| 100.0 + 5.0 * normal()).collect();
            let c: Vec<f64> = (0..10).map(|_| 120.0 + 6.0 * normal()).collect();
            let ci = bootstrap_relative_change(&b, &c, &mean, &mean, 0.95, 1_000, e).unwrap();
            if ci.lo <= 0.2 && 0.2 <= ci.hi {
                covered += 1;
            }
        }
        assert!(covered >= 170, "covered {covered} of {experiments}");
    }

    #[test]
    fn bootstrap_with_undefined_statistics() {
        let none = |_: &[f64]| None;
        assert!(bootstrap_relative_change(&[1.0], &[1.0], &none, &mean, 0.95, 100, 1).is_none());
        assert!(bootstrap_relative_change(&[], &[1.0], &mean, &mean, 0.95, 100, 1).is_none());
        // Identical single runs: a degenerate interval at 0.
        let ci = bootstrap_relative_change(&[2.0], &[2.0], &mean, &mean, 0.95, 100, 1).unwrap();
        assert_eq!((ci.lo, ci.hi), (0.0, 0.0));
    }

    /// Values computed once with scipy 1.17.1
    /// (`scipy.stats.mannwhitneyu(x, y)`, method `auto`, two-sided), see
    /// the comment of each case.
    #[test]
    fn mann_whitney_matches_scipy() {
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-14 * b.abs().max(1e-300);
        // (x, y, U, two-sided p, method)
        type Case<'a> = (&'a [f64], &'a [f64], f64, f64, &'a str);
        let cases: &[Case] = &[
            // mannwhitneyu([1,2,3],[4,5,6]) → U=0, p=0.1
            (&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0], 0.0, 0.1, "exact"),
            // mannwhitneyu([1,3,5],[2,4,6]) → U=3, p=0.7
            (&[1.0, 3.0, 5.0], &[2.0, 4.0, 6.0], 3.0, 0.7, "exact"),
            // mannwhitneyu([10.1,10.4,9.9,10.2],[11.0,10.3,11.5]) → U=1, p=0.11428571428571428
            (
                &[10.1, 10.4, 9.9, 10.2],
                &[11.0, 10.3, 11.5],
                1.0,
                0.11428571428571428,
                "exact",
            ),
            // mannwhitneyu([5,6,7,8,9],[1,2,3]) → U=15, p=0.03571428571428571
            (
                &[5.0, 6.0, 7.0, 8.0, 9.0],
                &[1.0, 2.0, 3.0],
                15.0,
                0.03571428571428571,
                "exact",
            ),
            // mannwhitneyu([3.1,2.9,3.4,3.0,3.3,2.8],[3.6,3.9,3.5,4.1,3.7,3.2,3.8])
            // → U=2, p=0.004662004662004662
            (
                &[3.1, 2.9, 3.4, 3.0, 3.3, 2.8],
                &[3.6, 3.9, 3.5, 4.1, 3.7, 3.2, 3.8],
                2.0,
                0.004662004662004662,
                "exact",
            ),
            // ties → asymptotic: mannwhitneyu([1,2,2,3],[2,3,4,4]) → U=2.5, p=0.13416918012812584
            (
                &[1.0, 2.0, 2.0, 3.0],
                &[2.0, 3.0, 4.0, 4.0],
                2.5,
                0.13416918012812584,
                "asymptotic",
            ),
            // both > 8 → asymptotic: mannwhitneyu(range(9), [x+0.5 for x in range(3,12)])
            // → U=15, p=0.0272753837615853
            (
                &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0],
                &[3.5, 4.5, 5.5, 6.5, 7.5, 8.5, 9.5, 10.5, 11.5],
                15.0,
                0.0272753837615853,
                "asymptotic",
            ),
            // all equal: mannwhitneyu([1,1,1],[1,1,1]) → U=4.5, p=1.0
            (&[1.0, 1.0, 1.0], &[1.0, 1.0, 1.0], 4.5, 1.0, "asymptotic"),
        ];
        for (x, y, u, p, method) in cases {
            let r = mann_whitney_u(x, y).unwrap();
            assert_eq!(r.u, *u, "U of {x:?} vs {y:?}");
            assert!(
                close(r.p_two_sided, *p),
                "p of {x:?} vs {y:?}: {} vs {p}",
                r.p_two_sided
            );
            assert_eq!(r.method, *method);
        }
        assert!(mann_whitney_u(&[], &[1.0]).is_none());
        assert!(mann_whitney_u(&[f64::NAN], &[1.0]).is_none());
    }

    /// `scipy.special.ndtr` at a few points (scipy 1.17.1), to the bit.
    #[test]
    fn normal_cdf_matches_scipy() {
        let cases = [
            (-1.4978617237881953, 0.06708459006406292),
            (0.0, 0.5),
            (0.5, 0.6914624612740131),
            (-3.0, 0.0013498980316300933),
            (-12.5, 3.732564298877714e-36),
            (2.2, 0.9860965524865014),
            (f64::NEG_INFINITY, 0.0),
        ];
        for (x, want) in cases {
            assert_eq!(ndtr(x), want, "ndtr({x})");
        }
    }

    #[test]
    fn exact_distribution_small_cases() {
        // m = n = 1: U ∈ {0, 1}, each with probability ½.
        assert_eq!(mwu_exact_sf(1.0, 1, 1), 0.5);
        assert_eq!(mwu_exact_sf(0.0, 1, 1), 1.0);
        // m = n = 2: U counts 1,1,2,1,1 over 6 orderings.
        assert!((mwu_exact_sf(3.0, 2, 2) - 2.0 / 6.0).abs() < 1e-15);
        assert!((mwu_exact_sf(4.0, 2, 2) - 1.0 / 6.0).abs() < 1e-15);
        assert_eq!(mwu_exact_sf(5.0, 2, 2), 0.0);
    }

    #[test]
    fn verdicts_at_threshold_edges() {
        let t = 0.05;
        let up = Some((0.01, 0.09));
        let down = Some((-0.09, -0.01));
        let across = Some((-0.01, 0.09));
        // Lower is better (time to train).
        assert_eq!(
            classify(0.05, up, t, Better::Lower),
            Change::NoSignificantChange
        );
        assert_eq!(
            classify(0.050_000_1, up, t, Better::Lower),
            Change::Regression
        );
        assert_eq!(
            classify(0.08, across, t, Better::Lower),
            Change::NoSignificantChange
        );
        assert_eq!(
            classify(0.08, Some((0.0, 0.09)), t, Better::Lower),
            Change::NoSignificantChange
        );
        assert_eq!(
            classify(-0.05, down, t, Better::Lower),
            Change::NoSignificantChange
        );
        assert_eq!(
            classify(-0.050_000_1, down, t, Better::Lower),
            Change::Improvement
        );
        assert_eq!(
            classify(0.03, up, t, Better::Lower),
            Change::NoSignificantChange
        );
        // Higher is better (samples/s): the signs flip.
        assert_eq!(
            classify(-0.050_000_1, down, t, Better::Higher),
            Change::Regression
        );
        assert_eq!(
            classify(-0.05, down, t, Better::Higher),
            Change::NoSignificantChange
        );
        assert_eq!(
            classify(0.050_000_1, up, t, Better::Higher),
            Change::Improvement
        );
        assert_eq!(
            classify(-0.2, Some((-0.3, 0.0)), t, Better::Higher),
            Change::NoSignificantChange
        );
        // Threshold 0: significance alone decides.
        assert_eq!(
            classify(0.001, Some((0.0005, 0.002)), 0.0, Better::Lower),
            Change::Regression
        );
        // No interval.
        assert_eq!(classify(0.5, None, t, Better::Lower), Change::Inconclusive);
        assert_eq!(
            classify(f64::INFINITY, up, t, Better::Lower),
            Change::Inconclusive
        );
    }

    #[test]
    fn convergence_rcp_style() {
        let base = [7680.0, 6144.0, 7680.0, 6144.0, 7680.0];
        // Clearly fewer samples.
        let fast = [3072.0, 3072.0, 3072.0, 3072.0, 3072.0];
        let t = convergence_test(&base, &fast, 0.05);
        assert_eq!(t.change, ConvergenceChange::Faster, "{t:?}");
        let fwd = t.candidate_vs_baseline.unwrap();
        assert_eq!(fwd.n_ref, 3);
        assert_eq!(fwd.reference_mean, 7168.0);
        // Independently: the population std of `base` is sqrt(566231.04);
        // both sides' df is 3 - 1 (n_ref 3, n_sub 5 - 2), so the pooled
        // standard error is sqrt(566231.04 · 2/3) = 614.4, and the mean at
        // which the one-sided p reaches 0.05 is 7168 + t.ppf(0.05, 4) · 614.4
        // with t.ppf(0.05, 4) = -2.131846786326649 (scipy.stats.t), found
        // by bisection to within 1e-4.
        let want = 7168.0 - 2.131846786326649 * 614.4;
        assert!(
            (fwd.min_acceptable_mean - want).abs() < 2e-4,
            "{} vs {want}",
            fwd.min_acceptable_mean
        );
        // Mirror: the candidate needs more samples.
        let t = convergence_test(&fast, &base, 0.05);
        assert_eq!(t.change, ConvergenceChange::Slower, "{t:?}");
        // Same points: no change.
        let t = convergence_test(&base, &base, 0.05);
        assert_eq!(t.change, ConvergenceChange::NoSignificantChange);
        // Significant but within the threshold: no change.
        let near = [7000.0, 7000.0, 7000.0, 7000.0, 7000.0];
        let same = [7168.0, 7168.0, 7168.0, 7168.0, 7168.0];
        let t = convergence_test(&same, &near, 0.05);
        assert!(t.candidate_vs_baseline.unwrap().faster);
        assert_eq!(t.change, ConvergenceChange::NoSignificantChange);
        // Too few runs.
        let t = convergence_test(&base[..3], &fast[..3], 0.05);
        assert_eq!(t.change, ConvergenceChange::Inconclusive);
        assert!(t.reason.unwrap().contains("at least"));
    }
}
