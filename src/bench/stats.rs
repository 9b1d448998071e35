//! Statistics for A/B comparisons of run times (or any per-run metric).
//!
//! Benchmark timings are skewed and heavy-tailed, so nothing here assumes normality:
//! * the centre is the **median**, with a percentile **bootstrap** 95% confidence interval;
//! * a candidate is compared with the baseline by the **ratio of medians**, whose interval is
//!   bootstrapped by resampling both sides independently;
//! * significance is the two-sided **Mann-Whitney U** test (normal approximation with tie
//!   correction and continuity correction, as benchstat and SciPy's `asymptotic` method);
//! * the **verdict** (after benchstat and criterion): `same` when the whole ratio interval lies
//!   within the noise threshold (±1% by default), `faster`/`slower` when the test is significant
//!   and the interval lies wholly on one side of 1, else `inconclusive`.
//!
//! The bootstrap uses a fixed-seed PCG generator, so a verdict is reproducible from the data.

use rand::Rng;
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg as Pcg64;

/// Resamples in each bootstrap.
pub const RESAMPLES: usize = 10_000;
/// Seed of the bootstrap generator (fixed: same data, same interval).
pub const SEED: u64 = 0x1a75_c09e;

/// The median (mean of the two middle values for an even count); `None` when empty.
pub fn median(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// Coefficient of variation (sample SD ÷ mean); `None` for fewer than two values or mean 0.
pub fn coefficient_of_variation(xs: &[f64]) -> Option<f64> {
    let n = xs.len();
    if n < 2 {
        return None;
    }
    let mean = xs.iter().sum::<f64>() / n as f64;
    if mean == 0.0 {
        return None;
    }
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    Some(var.sqrt() / mean)
}

/// The median of `buf` by selection (O(n), reorders `buf`); NaN when empty.
fn median_in_place(buf: &mut [f64]) -> f64 {
    let n = buf.len();
    if n == 0 {
        return f64::NAN;
    }
    let (_, &mut upper, _) = buf.select_nth_unstable_by(n / 2, f64::total_cmp);
    if n % 2 == 1 {
        return upper;
    }
    // The lower middle is the largest value left of the upper one.
    let lower = buf[..n / 2]
        .iter()
        .copied()
        .fold(f64::NEG_INFINITY, f64::max);
    (lower + upper) / 2.0
}

fn resample_median(xs: &[f64], rng: &mut Pcg64, buf: &mut Vec<f64>) -> f64 {
    buf.clear();
    buf.extend((0..xs.len()).map(|_| xs[rng.random_range(0..xs.len())]));
    median_in_place(buf)
}

/// The `[lo, hi]` percentiles of `values` for a central interval of `confidence`.
fn percentile_interval(mut values: Vec<f64>, confidence: f64) -> (f64, f64) {
    values.sort_by(f64::total_cmp);
    let tail = (1.0 - confidence) / 2.0;
    let at =
        |q: f64| values[((q * (values.len() - 1) as f64).round() as usize).min(values.len() - 1)];
    (at(tail), at(1.0 - tail))
}

/// Percentile-bootstrap interval of the median at `confidence` (0.95 for 95%).
pub fn median_ci(xs: &[f64], confidence: f64) -> Option<(f64, f64)> {
    if xs.is_empty() {
        return None;
    }
    // A constant sample (a counter that never moves) has a degenerate interval: skip the work.
    if xs.iter().all(|&x| x == xs[0]) {
        return Some((xs[0], xs[0]));
    }
    let mut rng = Pcg64::seed_from_u64(SEED);
    let mut buf = Vec::with_capacity(xs.len());
    let medians: Vec<f64> = (0..RESAMPLES)
        .map(|_| resample_median(xs, &mut rng, &mut buf))
        .collect();
    Some(percentile_interval(medians, confidence))
}

/// The ratio of medians `candidate ÷ baseline` with its bootstrap interval at `confidence`.
pub fn ratio_ci(baseline: &[f64], candidate: &[f64], confidence: f64) -> Option<(f64, (f64, f64))> {
    let ratio = median(candidate)? / median(baseline)?;
    let constant = |xs: &[f64]| xs.iter().all(|&x| x == xs[0]);
    if constant(baseline) && constant(candidate) {
        return Some((ratio, (ratio, ratio)));
    }
    let mut rng = Pcg64::seed_from_u64(SEED);
    let (mut bb, mut cb) = (Vec::new(), Vec::new());
    let ratios: Vec<f64> = (0..RESAMPLES)
        .map(|_| {
            resample_median(candidate, &mut rng, &mut cb)
                / resample_median(baseline, &mut rng, &mut bb)
        })
        .filter(|r| r.is_finite())
        .collect();
    if ratios.is_empty() {
        return None;
    }
    Some((ratio, percentile_interval(ratios, confidence)))
}

/// The result of a Mann-Whitney U test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MannWhitney {
    /// U statistic of the first sample
    pub u: f64,
    /// two-sided p-value
    pub p: f64,
}

/// Two-sided Mann-Whitney U test of `a` against `b`, normal approximation with tie correction
/// and continuity correction. `None` when a sample is empty.
pub fn mann_whitney(a: &[f64], b: &[f64]) -> Option<MannWhitney> {
    let weighted = |xs: &[f64]| xs.iter().map(|&x| (x, 1)).collect::<Vec<(f64, u64)>>();
    mann_whitney_weighted(&weighted(a), &weighted(b))
}

/// [`mann_whitney`] on values given with their counts (`(value, count)`, any order, repeats
/// allowed), without expanding them: the cost depends on the distinct values only.
pub fn mann_whitney_weighted(a: &[(f64, u64)], b: &[(f64, u64)]) -> Option<MannWhitney> {
    let n1 = a.iter().map(|p| p.1).sum::<u64>() as f64;
    let n2 = b.iter().map(|p| p.1).sum::<u64>() as f64;
    if n1 == 0.0 || n2 == 0.0 {
        return None;
    }
    let mut all: Vec<(f64, u64, u64)> = a
        .iter()
        .map(|&(v, c)| (v, c, 0))
        .chain(b.iter().map(|&(v, c)| (v, 0, c)))
        .collect();
    all.sort_by(|p, q| p.0.total_cmp(&q.0));
    let (mut below, mut rank_sum_a, mut tie_term) = (0.0f64, 0.0f64, 0.0f64);
    let mut i = 0;
    while i < all.len() {
        let j = (i..all.len())
            .find(|&j| all[j].0 != all[i].0)
            .unwrap_or(all.len());
        let (in_a, in_b) = all[i..j]
            .iter()
            .fold((0u64, 0u64), |acc, p| (acc.0 + p.1, acc.1 + p.2));
        let t = (in_a + in_b) as f64;
        // Tied values share the average of the ranks below+1 ..= below+t.
        rank_sum_a += in_a as f64 * (below + (t + 1.0) / 2.0);
        tie_term += t * t * t - t;
        below += t;
        i = j;
    }
    let n = n1 + n2;
    let u = rank_sum_a - n1 * (n1 + 1.0) / 2.0;
    let variance = n1 * n2 / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)));
    if variance <= 0.0 {
        return Some(MannWhitney { u, p: 1.0 });
    }
    let z = ((u - n1 * n2 / 2.0).abs() - 0.5).max(0.0) / variance.sqrt();
    let p = libm::erfc(z / std::f64::consts::SQRT_2).min(1.0);
    Some(MannWhitney { u, p })
}

/// The verdict on a candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// significantly lower (time: faster)
    Faster,
    /// significantly higher (time: slower)
    Slower,
    /// the whole interval is within the noise threshold
    Same,
    /// none of the above: more runs needed
    Inconclusive,
}

/// How a candidate compares with the baseline on one metric.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Comparison {
    /// median(candidate) ÷ median(baseline)
    pub ratio: f64,
    /// 95% bootstrap interval of the ratio
    pub ci: (f64, f64),
    /// Mann-Whitney two-sided p-value
    pub p_value: f64,
    /// the verdict
    pub verdict: Verdict,
}

/// Compares `candidate` with `baseline` (lower is better). `noise` is the relative threshold
/// for `same` (0.01 = ±1%), `alpha` the significance level (0.05).
pub fn compare(baseline: &[f64], candidate: &[f64], noise: f64, alpha: f64) -> Option<Comparison> {
    let (ratio, ci) = ratio_ci(baseline, candidate, 0.95)?;
    let p_value = mann_whitney(candidate, baseline)?.p;
    let verdict = if ci.0 >= 1.0 - noise && ci.1 <= 1.0 + noise {
        Verdict::Same
    } else if p_value < alpha && ci.1 < 1.0 {
        Verdict::Faster
    } else if p_value < alpha && ci.0 > 1.0 {
        Verdict::Slower
    } else {
        Verdict::Inconclusive
    };
    Some(Comparison {
        ratio,
        ci,
        p_value,
        verdict,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expected p-values from SciPy 1.x: scipy.stats.mannwhitneyu(a, b, alternative='two-sided',
    // use_continuity=True, method='asymptotic').
    const OVERLAP_A: [f64; 8] = [10.2, 10.4, 10.1, 10.3, 10.5, 10.2, 10.6, 10.3];
    const OVERLAP_B: [f64; 8] = [10.3, 10.7, 10.5, 10.8, 10.6, 10.9, 10.4, 10.7];

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * b.abs().max(1e-300)
    }

    #[test]
    fn mann_whitney_matches_scipy_on_separated_samples() {
        let r = mann_whitney(&[1.0, 2.0, 3.0, 4.0, 5.0], &[6.0, 7.0, 8.0, 9.0, 10.0]).unwrap();
        assert_eq!(r.u, 0.0);
        assert!(close(r.p, 0.012185780355344813), "{}", r.p);
    }

    #[test]
    fn mann_whitney_matches_scipy_with_ties() {
        let r = mann_whitney(
            &[1.0, 2.0, 2.0, 3.0, 3.0, 3.0, 4.0],
            &[2.0, 3.0, 4.0, 4.0, 5.0, 5.0],
        )
        .unwrap();
        assert_eq!(r.u, 8.5);
        assert!(close(r.p, 0.07826242947714618), "{}", r.p);
        let r = mann_whitney(&OVERLAP_A, &OVERLAP_B).unwrap();
        assert_eq!(r.u, 8.5);
        assert!(close(r.p, 0.015031119489341192), "{}", r.p);
    }

    #[test]
    fn mann_whitney_of_identical_constant_samples_is_not_significant() {
        let r = mann_whitney(&[5.0, 5.0, 5.0], &[5.0, 5.0]).unwrap();
        assert_eq!((r.u, r.p), (3.0, 1.0));
        assert!(mann_whitney(&[], &[1.0]).is_none());
    }

    #[test]
    fn median_and_coefficient_of_variation_match_hand_and_numpy_values() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        // numpy: np.std(x, ddof=1) / np.mean(x)
        assert!(close(
            coefficient_of_variation(&OVERLAP_A).unwrap(),
            0.016165093663850476
        ));
        assert_eq!(coefficient_of_variation(&[1.0]), None);
    }

    #[test]
    fn the_selection_median_equals_the_sorting_median() {
        for n in 1..40 {
            let xs: Vec<f64> = (0..n).map(|i| f64::from((i * 7919) % 31)).collect();
            assert_eq!(
                median_in_place(&mut xs.clone()),
                median(&xs).unwrap(),
                "n={n}"
            );
        }
    }

    #[test]
    fn the_bootstrap_interval_of_a_median_brackets_it_and_is_reproducible() {
        let xs: Vec<f64> = (0..101).map(|i| 100.0 + f64::from(i % 17)).collect();
        let m = median(&xs).unwrap();
        let (lo, hi) = median_ci(&xs, 0.95).unwrap();
        assert!(lo <= m && m <= hi, "{lo} {m} {hi}");
        assert_eq!(median_ci(&xs, 0.95), Some((lo, hi)));
        assert_eq!(median_ci(&[7.0; 10], 0.95), Some((7.0, 7.0)));
    }

    #[test]
    fn identical_samples_are_the_same_and_a_clear_shift_is_slower() {
        let a: Vec<f64> = (0..30).map(|i| 1000.0 + f64::from(i % 5)).collect();
        let same = compare(&a, &a, 0.01, 0.05).unwrap();
        assert_eq!(same.verdict, Verdict::Same);
        assert_eq!(same.ratio, 1.0);
        let slower: Vec<f64> = a.iter().map(|x| x * 1.05).collect();
        let c = compare(&a, &slower, 0.01, 0.05).unwrap();
        assert_eq!(c.verdict, Verdict::Slower);
        assert!(c.ci.0 > 1.0 && (c.ratio - 1.05).abs() < 1e-9);
        let faster: Vec<f64> = a.iter().map(|x| x * 0.9).collect();
        assert_eq!(
            compare(&a, &faster, 0.01, 0.05).unwrap().verdict,
            Verdict::Faster
        );
    }

    #[test]
    fn too_few_noisy_runs_are_inconclusive() {
        let a = [100.0, 130.0, 90.0];
        let b = [110.0, 95.0, 140.0];
        assert_eq!(
            compare(&a, &b, 0.01, 0.05).unwrap().verdict,
            Verdict::Inconclusive
        );
    }
}
