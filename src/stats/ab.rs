//! The building blocks of A/B statistics: medians, quantiles of weighted values, the percentile
//! bootstrap and the Mann-Whitney U test. The rule that turns them into a verdict is in
//! [`super::change`].
//!
//! Timings are skewed and heavy-tailed, so nothing here assumes normality: the centre is the
//! **median** with a distribution-free order-statistic interval (a ratio of two medians gets a
//! percentile **bootstrap** interval), and significance is the two-sided
//! **Mann-Whitney U** test (normal approximation with tie and continuity correction, as
//! benchstat and SciPy's `asymptotic` method). Values come either as plain lists (bench runs) or
//! as `(value, count)` points (a latency distribution with many ties), and every function on
//! points costs time in the number of distinct values, not samples.
//!
//! The bootstrap uses a fixed-seed PCG generator, so an interval is reproducible from the data.

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

/// The `[lo, hi]` percentiles of `values` for a central interval of `confidence`.
fn percentile_interval(mut values: Vec<f64>, confidence: f64) -> (f64, f64) {
    values.sort_by(f64::total_cmp);
    let tail = (1.0 - confidence) / 2.0;
    let at =
        |q: f64| values[((q * (values.len() - 1) as f64).round() as usize).min(values.len() - 1)];
    (at(tail), at(1.0 - tail))
}

/// The distribution-free interval of the median at `confidence` (0.95 for 95%): the order
/// statistics `x(k)` and `x(n−k+1)`, with the largest `k` for which the number of values below
/// the true median, Binomial(n, ½), leaves them with probability at most `1 − confidence`
/// (exact binomial sums up to 1000 values, the normal approximation beyond). Unlike a
/// bootstrap it costs one sort, whatever the confidence, and its coverage is guaranteed — except
/// below 6 values at 95%, where even the whole range covers only `1 − 2^(1−n)` (75% at n = 3):
/// the whole range is returned then.
pub fn median_ci(xs: &[f64], confidence: f64) -> Option<(f64, f64)> {
    if xs.is_empty() {
        return None;
    }
    let mut sorted = xs.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let k = median_rank(n, 1.0 - confidence);
    Some((sorted[k - 1], sorted[n - k]))
}

/// The 1-based rank `k` of the lower end of the median's interval (see [`median_ci`]).
fn median_rank(n: usize, alpha: f64) -> usize {
    if n > 1000 {
        let z = std::f64::consts::SQRT_2 * inverse_erfc(alpha);
        let k = (n as f64 / 2.0 - z * (n as f64).sqrt() / 2.0).floor() as usize;
        return k.clamp(1, n.div_ceil(2));
    }
    // P(B ≤ j) for B ~ Binomial(n, ½), summed with the pmf in logs.
    let ln_half_n = n as f64 * std::f64::consts::LN_2;
    let mut ln_choose = 0.0f64; // ln C(n, 0)
    let mut cdf = 0.0;
    let mut k = 1;
    for j in 0..n {
        cdf += (ln_choose - ln_half_n).exp();
        // [x(k), x(n−k+1)] misses the median with probability 2·P(B ≤ k − 1): k = j + 1 is
        // valid while 2·P(B ≤ j) ≤ alpha.
        if 2.0 * cdf > alpha {
            break;
        }
        k = j + 1;
        ln_choose += ((n - j) as f64).ln() - ((j + 1) as f64).ln();
    }
    k.min(n.div_ceil(2))
}

/// `x` with `erfc(x) = p` (0 < p < 2), by Newton's method on libm's `erfc`.
fn inverse_erfc(p: f64) -> f64 {
    let mut x = 0.0f64;
    for _ in 0..100 {
        let err = libm::erfc(x) - p;
        let slope = -2.0 / std::f64::consts::PI.sqrt() * (-x * x).exp();
        let step = err / slope;
        x -= step;
        if step.abs() < 1e-15 {
            break;
        }
    }
    x
}

/// Distinct values with their counts, ascending: the form every weighted function here takes.
pub fn points(xs: &[f64]) -> Vec<(f64, u64)> {
    let mut sorted = xs.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mut out: Vec<(f64, u64)> = Vec::new();
    for x in sorted {
        match out.last_mut() {
            Some((v, n)) if *v == x => *n += 1,
            _ => out.push((x, 1)),
        }
    }
    out
}

/// The nearest-rank value at quantile `q` (the ⌈q·n⌉-th smallest) of ascending `(value, count)`
/// points; 0 when empty.
pub fn quantile(points: &[(f64, u64)], q: f64) -> f64 {
    let total: u64 = points.iter().map(|p| p.1).sum();
    let rank = ((q * total as f64).ceil() as u64).max(1);
    at_rank(points, rank).unwrap_or(0.0)
}

/// The `rank`-th smallest value (1-based) of ascending `(value, count)` points.
fn at_rank(points: &[(f64, u64)], rank: u64) -> Option<f64> {
    let mut seen = 0;
    points
        .iter()
        .find(|p| {
            seen += p.1;
            seen >= rank
        })
        .map(|p| p.0)
}

/// The median of ascending `(value, count)` points: the middle value, or the mean of the two
/// middle values for an even count, as [`median`]; `None` when empty.
pub fn weighted_median(points: &[(f64, u64)]) -> Option<f64> {
    let n: u64 = points.iter().map(|p| p.1).sum();
    if n == 0 {
        return None;
    }
    Some(if n % 2 == 1 {
        at_rank(points, n / 2 + 1)?
    } else {
        (at_rank(points, n / 2)? + at_rank(points, n / 2 + 1)?) / 2.0
    })
}

/// The relative change from `a` to `b`, in percent; `None` when `a` is 0.
pub fn change_pct(a: f64, b: f64) -> Option<f64> {
    (a != 0.0).then(|| (b - a) / a * 100.0)
}

/// Most values drawn per bootstrap resample. A resample smaller than the data (an m-out-of-n
/// bootstrap) can only widen an interval, never narrow it, and it bounds the work on large logs.
pub const MAX_DRAWS: u64 = 5_000;
/// Work budget of one bootstrap (resamples × draws): from [`RESAMPLES`] for small samples down
/// to 500 resamples of [`MAX_DRAWS`] values, so that one large comparison stays quick.
const BUDGET: u64 = 1_000_000;
const MIN_RESAMPLES: u64 = 500;

/// Draws resamples of weighted points.
struct Sampler<'a> {
    points: &'a [(f64, u64)],
    cumulative: Vec<u64>,
    /// every value, when there are at most [`MAX_DRAWS`]: a draw is then one index
    flat: Option<Vec<f64>>,
}

impl<'a> Sampler<'a> {
    fn new(points: &'a [(f64, u64)]) -> Option<Self> {
        let cumulative: Vec<u64> = points
            .iter()
            .scan(0u64, |s, p| {
                *s += p.1;
                Some(*s)
            })
            .collect();
        let total = cumulative.last().copied().unwrap_or(0);
        let flat = (total <= MAX_DRAWS).then(|| {
            points
                .iter()
                .flat_map(|&(v, c)| std::iter::repeat_n(v, c as usize))
                .collect()
        });
        (total > 0).then_some(Sampler {
            points,
            cumulative,
            flat,
        })
    }

    fn total(&self) -> u64 {
        self.cumulative.last().copied().unwrap_or(0)
    }

    fn draws(&self) -> usize {
        self.total().min(MAX_DRAWS) as usize
    }

    fn constant(&self) -> bool {
        self.points.iter().filter(|p| p.1 > 0).count() <= 1
    }

    /// One resample into `buf`: its median and its nearest-rank 99th percentile.
    fn resample(&self, rng: &mut Pcg64, buf: &mut Vec<f64>) -> (f64, f64) {
        buf.clear();
        match &self.flat {
            Some(flat) => {
                buf.extend((0..flat.len()).map(|_| flat[rng.random_range(0..flat.len())]))
            }
            None => {
                let total = self.total();
                buf.extend((0..self.draws()).map(|_| {
                    let r = rng.random_range(0..total);
                    self.points[self.cumulative.partition_point(|&c| c <= r)].0
                }));
            }
        }
        let median = median_in_place(buf);
        let rank = ((0.99 * buf.len() as f64).ceil() as usize).clamp(1, buf.len()) - 1;
        let (_, &mut p99, _) = buf.select_nth_unstable_by(rank, f64::total_cmp);
        (median, p99)
    }
}

/// Percentile-bootstrap intervals of `after ÷ before` for the median and the 99th percentile,
/// each side resampled independently; `None` when a side is empty.
pub fn ratio_intervals(
    before: &[(f64, u64)],
    after: &[(f64, u64)],
    confidence: f64,
) -> Option<[(f64, f64); 2]> {
    let (b, a) = (Sampler::new(before)?, Sampler::new(after)?);
    if b.constant() && a.constant() {
        let r = a.points.iter().find(|p| p.1 > 0)?.0 / b.points.iter().find(|p| p.1 > 0)?.0;
        return Some([(r, r), (r, r)]);
    }
    let resamples =
        (BUDGET / b.draws().max(a.draws()) as u64).clamp(MIN_RESAMPLES, RESAMPLES as u64);
    let mut rng = Pcg64::seed_from_u64(SEED);
    let (mut bb, mut ab) = (Vec::new(), Vec::new());
    let (mut medians, mut tails) = (Vec::new(), Vec::new());
    for _ in 0..resamples {
        let (b50, b99) = b.resample(&mut rng, &mut bb);
        let (a50, a99) = a.resample(&mut rng, &mut ab);
        medians.push(a50 / b50);
        tails.push(a99 / b99);
    }
    let interval = |mut v: Vec<f64>| {
        v.retain(|r| r.is_finite());
        (!v.is_empty()).then(|| percentile_interval(v, confidence))
    };
    Some([interval(medians)?, interval(tails)?])
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
    fn the_median_interval_is_the_textbook_order_statistics() {
        // n = 10 at 95%: x(2) and x(9) (2·P(B ≤ 1) = 22/1024 ≤ 0.05 < 2·P(B ≤ 2) = 112/1024).
        let xs: Vec<f64> = (1..=10).rev().map(f64::from).collect();
        assert_eq!(median_ci(&xs, 0.95), Some((2.0, 9.0)));
        // n = 100 at 95%: x(40) and x(61) (Conover, Practical Nonparametric Statistics, table A3).
        let xs: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(median_ci(&xs, 0.95), Some((40.0, 61.0)));
        // Too few values for 95%: the whole range.
        assert_eq!(median_ci(&[3.0, 1.0, 2.0], 0.95), Some((1.0, 3.0)));
        assert_eq!(median_ci(&[7.0; 10], 0.95), Some((7.0, 7.0)));
    }

    #[test]
    fn the_median_interval_of_many_values_follows_the_normal_approximation() {
        // n = 10000: k = ⌊5000 − 1.95996·100/2⌋ = 4902, so x(4902) and x(5099).
        let xs: Vec<f64> = (1..=10_000).map(f64::from).collect();
        assert_eq!(median_ci(&xs, 0.95), Some((4902.0, 5099.0)));
    }

    #[test]
    fn weighted_quantiles_match_the_expanded_values() {
        let p = points(&[3.0, 1.0, 2.0, 2.0, 4.0, 3.0, 3.0]);
        assert_eq!(p, [(1.0, 1), (2.0, 2), (3.0, 3), (4.0, 1)]);
        // expanded: 1 2 2 3 3 3 4 → nearest-rank p50 is the 4th value, p99 the 7th
        assert_eq!(quantile(&p, 0.5), 3.0);
        assert_eq!(quantile(&p, 0.99), 4.0);
        assert_eq!(weighted_median(&p), Some(3.0));
        assert_eq!(weighted_median(&[(1.0, 2), (2.0, 1), (10.0, 1)]), Some(1.5));
        assert_eq!(weighted_median(&[]), None);
        assert_eq!(quantile(&[], 0.5), 0.0);
    }

    #[test]
    fn the_ratio_intervals_bracket_a_known_shift_and_are_reproducible() {
        let before: Vec<(f64, u64)> = (1..=200).map(|i| (f64::from(i) * 10.0, 5)).collect();
        let after: Vec<(f64, u64)> = before.iter().map(|&(v, c)| (v * 1.3, c)).collect();
        let [p50, p99] = ratio_intervals(&before, &after, 0.95).unwrap();
        assert!(p50.0 > 1.0 && p50.0 <= 1.3 && 1.3 <= p50.1, "{p50:?}");
        assert!(p99.0 <= 1.3 && 1.3 <= p99.1, "{p99:?}");
        assert_eq!(ratio_intervals(&before, &after, 0.95).unwrap()[0], p50);
        let [same, _] = ratio_intervals(&before, &before, 0.95).unwrap();
        assert!(same.0 < 1.0 && 1.0 < same.1, "{same:?}");
        assert_eq!(
            ratio_intervals(&[(5.0, 3)], &[(10.0, 2)], 0.95),
            Some([(2.0, 2.0), (2.0, 2.0)])
        );
        assert_eq!(ratio_intervals(&[], &[(1.0, 1)], 0.95), None);
    }
}
