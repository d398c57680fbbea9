//! Numerics that must agree bit for bit with the official tools: numpy's
//! pairwise summation (used by `np.mean`/`np.std`), `np.interp`, Python's
//! `round(x, n)`, and the Student t distribution (via statrs).

use statrs::distribution::{ContinuousCDF, StudentsT};

/// numpy's pairwise summation of a contiguous float64 array
/// (`pairwise_sum` in numpy's `loops_utils`): sequential below 8 items,
/// 8 interleaved accumulators up to 128, recursive halving above.
pub fn np_sum(a: &[f64]) -> f64 {
    const BLOCK: usize = 128;
    let n = a.len();
    if n < 8 {
        // numpy starts from -0.0 so that an all -0.0 sum stays -0.0.
        let mut res = -0.0;
        for x in a {
            res += x;
        }
        res
    } else if n <= BLOCK {
        let mut r = [a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]];
        let mut i = 8;
        while i < n - (n % 8) {
            for (j, rj) in r.iter_mut().enumerate() {
                *rj += a[i + j];
            }
            i += 8;
        }
        let mut res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        while i < n {
            res += a[i];
            i += 1;
        }
        res
    } else {
        let mut n2 = n / 2;
        n2 -= n2 % 8;
        np_sum(&a[..n2]) + np_sum(&a[n2..])
    }
}

/// `np.mean` (NaN for an empty slice, as numpy returns with a warning).
pub fn np_mean(a: &[f64]) -> f64 {
    if a.is_empty() {
        return f64::NAN;
    }
    np_sum(a) / a.len() as f64
}

/// `np.std` with `ddof=0` (population standard deviation).
pub fn np_std(a: &[f64]) -> f64 {
    if a.is_empty() {
        return f64::NAN;
    }
    let mean = np_mean(a);
    let sq: Vec<f64> = a.iter().map(|x| (x - mean) * (x - mean)).collect();
    (np_sum(&sq) / a.len() as f64).sqrt()
}

/// `np.interp(x, [x0, x1], [y0, y1])`.
pub fn np_interp(x: f64, x0: f64, x1: f64, y0: f64, y1: f64) -> f64 {
    if x <= x0 {
        return y0;
    }
    if x >= x1 {
        return y1;
    }
    let slope = (y1 - y0) / (x1 - x0);
    let r = slope * (x - x0) + y0;
    if r.is_nan() { slope * (x - x1) + y1 } else { r }
}

/// Python's `round(x, ndigits)` for floats: the correctly rounded decimal
/// with ties to even, read back as a float.
pub fn py_round(x: f64, ndigits: usize) -> f64 {
    if !x.is_finite() {
        return x;
    }
    // Rust's fixed-precision formatting is exact and rounds ties to even,
    // as CPython's dtoa-based round does.
    format!("{:.*}", ndigits, x).parse().unwrap_or(x)
}

/// P(T ≤ t) for Student's t with `df` degrees of freedom.
pub fn student_t_cdf(t: f64, df: f64) -> f64 {
    match StudentsT::new(0.0, 1.0, df) {
        Ok(d) => d.cdf(t),
        Err(_) => f64::NAN,
    }
}

/// One-sided p-value of the pooled two-sample t-test of sample 1 against
/// sample 2, given summary statistics (scipy's `ttest_ind_from_stats` with
/// `equal_var=True`, converted to one side as the RCP checker does: the
/// probability of a t statistic at most the observed one).
pub fn one_sided_p(mean1: f64, std1: f64, n1: f64, mean2: f64, std2: f64, n2: f64) -> f64 {
    let df = n1 + n2 - 2.0;
    let svar = ((n1 - 1.0) * std1 * std1 + (n2 - 1.0) * std2 * std2) / df;
    let denom = (svar * (1.0 / n1 + 1.0 / n2)).sqrt();
    let t = (mean1 - mean2) / denom;
    student_t_cdf(t, df)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairwise_sum_matches_numpy_on_known_values() {
        // Sequential below 8 items.
        assert_eq!(np_sum(&[0.1, 0.2, 0.3]), 0.1 + 0.2 + 0.3);
        // 10 items: r[0..8] then the remaining two added in order.
        let a: Vec<f64> = (1..=10).map(|i| i as f64 * 0.1).collect();
        let r: Vec<f64> = a[..8].to_vec();
        let want = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7])) + a[8] + a[9];
        assert_eq!(np_sum(&a), want);
        // 16 items: two rounds of 8 accumulators.
        let b: Vec<f64> = (0..16).map(|i| 1.0 / (i as f64 + 3.0)).collect();
        let mut acc = [0.0; 8];
        for j in 0..8 {
            acc[j] = b[j] + b[j + 8];
        }
        let want =
            ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
        assert_eq!(np_sum(&b), want);
        // Large arrays split recursively and stay accurate.
        let c: Vec<f64> = (0..1000).map(|i| i as f64).collect();
        assert_eq!(np_sum(&c), 499_500.0);
    }

    #[test]
    fn mean_and_population_std() {
        let a = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        assert_eq!(np_mean(&a), 5.0);
        assert_eq!(np_std(&a), 2.0);
    }

    #[test]
    fn interp() {
        assert_eq!(np_interp(24.0, 16.0, 32.0, 100.0, 200.0), 150.0);
        assert_eq!(np_interp(16.0, 16.0, 32.0, 100.0, 200.0), 100.0);
        assert_eq!(np_interp(40.0, 16.0, 32.0, 100.0, 200.0), 200.0);
    }

    #[test]
    fn python_round() {
        assert_eq!(py_round(0.0625, 3), 0.062); // exact tie → even
        assert_eq!(py_round(2.675, 2), 2.67); // 2.675 is below the tie in binary
        assert_eq!(py_round(1.23456, 3), 1.235);
        assert_eq!(py_round(0.5, 0), 0.0);
        assert_eq!(py_round(1.5, 0), 2.0);
    }

    #[test]
    fn student_t() {
        assert!((student_t_cdf(0.0, 10.0) - 0.5).abs() < 1e-15);
        // t_{0.05, 20} = -1.7247182429207857 (scipy.stats.t.ppf(0.05, 20)).
        assert!((student_t_cdf(-1.7247182429207857, 20.0) - 0.05).abs() < 1e-12);
    }
}
