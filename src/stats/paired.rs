//! Paired comparison of interleaved runs, and how a benchmark may look at its data early.
//!
//! **Why paired.** Every block of `latscope bench` runs each command once, in a shuffled order,
//! so run `j` of the baseline and run `j` of the candidate ran side by side under the same load.
//! What drifts between blocks — other tenants, frequency, the page cache — hits both runs of a
//! block alike and cancels in their ratio. On a shared machine that drift is most of the noise
//! (the research notes cite projects whose within-run spread was 2.8% while between-job drift
//! was 14.8%), so comparing the two sets of runs as if they were independent (Mann-Whitney,
//! hyperfine's ratio of means) throws the pairing away and needs several times more runs.
//!
//! **The statistic.** `d_j = ln(after_j ÷ before_j)` per block. Its 20% trimmed mean estimates
//! the typical log-ratio; the trimming makes one preempted run harmless (the plain mean is moved
//! by it), and on normal data it keeps about 94% of the mean's efficiency. Its standard error is
//! Tukey and McLaughlin's `s_w ÷ ((1 − 2γ)·√n)` from the winsorized standard deviation `s_w`,
//! with Student's t on `n − 2g − 1` degrees of freedom (`g = ⌊γn⌋` values trimmed at each end):
//! Yuen's one-sample trimmed-mean test (Wilcox, *Introduction to Robust Estimation and Hypothesis
//! Testing*, §4.4). The ratio is `exp` of the estimate; its interval is `exp` of the t interval.
//!
//! **Looking early (sequential design).** A benchmark that stops as soon as the answer is clear
//! must not pay for the peeking with false alarms. latscope uses the Haybittle–Peto rule: at an
//! interim look a change counts only at `p < 0.001` ([`INTERIM_ALPHA`]); the final analysis tests
//! at `α − looks × 0.001`, and the schedule takes at most [`MAX_LOOKS`] = 25 looks (so at least
//! `α/2` is left), so by the union bound the whole procedure's false alarm rate stays within `α`. Stopping because a result is clearly *the same* (its interval
//! inside the noise band) claims no change and costs nothing.
//!
//! **What a run could have seen.** With standard error `se`, a change of
//! `(t(1 − α/2) + z(power))·se` in the log is detected with that power; [`Paired::detectable`]
//! turns it into a relative change, printed with every inconclusive verdict.

use distrs::{Normal, StudentsT};

/// The share trimmed at each end.
pub const TRIM: f64 = 0.2;

/// The significance an interim look needs before it may stop the benchmark on a change.
pub const INTERIM_ALPHA: f64 = 0.001;

/// At most this many interim looks: 25 × 0.001 leaves at least α/2 = 0.025 of α = 0.05 for the
/// final test (the schedule stops looking then and runs on to its time limit).
pub const MAX_LOOKS: u32 = 25;

/// The significance level of the final analysis after `looks` interim looks (at most
/// [`MAX_LOOKS`] count: the schedule takes no more).
pub fn final_alpha(alpha: f64, looks: u32) -> f64 {
    alpha - f64::from(looks.min(MAX_LOOKS)) * INTERIM_ALPHA
}

/// The paired log-ratios of one comparison, summarised.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Paired {
    /// pairs (blocks)
    pub n: usize,
    /// the trimmed mean of `ln(after ÷ before)`
    pub log_ratio: f64,
    /// its standard error
    pub se: f64,
    /// degrees of freedom of its t distribution
    pub df: f64,
}

impl Paired {
    /// Pairs `before[j]` with `after[j]` (the shorter length wins: an interrupted block has one
    /// run of a command and not of the other). `None` with fewer than 3 pairs or a value ≤ 0.
    pub fn of(before: &[f64], after: &[f64]) -> Option<Paired> {
        let mut d: Vec<f64> = before
            .iter()
            .zip(after)
            .map(|(&b, &a)| (b > 0.0 && a > 0.0).then(|| (a / b).ln()))
            .collect::<Option<Vec<f64>>>()?;
        Paired::of_log_ratios(&mut d)
    }

    /// From the log-ratios themselves (sorted in place).
    pub fn of_log_ratios(d: &mut [f64]) -> Option<Paired> {
        let n = d.len();
        if n < 3 {
            return None;
        }
        d.sort_by(f64::total_cmp);
        let g = (TRIM * n as f64).floor() as usize;
        let kept = &d[g..n - g];
        let log_ratio = kept.iter().sum::<f64>() / kept.len() as f64;
        let (lo, hi) = (d[g], d[n - g - 1]);
        let winsorized = |x: f64| x.clamp(lo, hi);
        let wmean = d.iter().map(|&x| winsorized(x)).sum::<f64>() / n as f64;
        let wvar = d
            .iter()
            .map(|&x| (winsorized(x) - wmean).powi(2))
            .sum::<f64>()
            / (n - 1) as f64;
        let se = wvar.sqrt() / ((1.0 - 2.0 * TRIM) * (n as f64).sqrt());
        Some(Paired {
            n,
            log_ratio,
            se,
            df: (n - 2 * g - 1) as f64,
        })
    }

    /// The ratio `after ÷ before`.
    pub fn ratio(&self) -> f64 {
        self.log_ratio.exp()
    }

    fn t(&self, p: f64) -> f64 {
        StudentsT::ppf(p, self.df)
    }

    /// The two-sided `1 − alpha` interval of the ratio.
    pub fn interval(&self, alpha: f64) -> [f64; 2] {
        let half = self.t(1.0 - alpha / 2.0) * self.se;
        [(self.log_ratio - half).exp(), (self.log_ratio + half).exp()]
    }

    /// The two-sided p-value of "no change".
    pub fn p_value(&self) -> f64 {
        if self.se == 0.0 {
            return if self.log_ratio == 0.0 { 1.0 } else { 0.0 };
        }
        let t = (self.log_ratio / self.se).abs();
        if t.is_nan() {
            return 1.0;
        }
        two_sided_t(t, self.df)
    }

    /// The smallest relative change (0.004 = 0.4%) that a test at `alpha` would detect with
    /// probability `power`, given this run's standard error.
    pub fn detectable(&self, alpha: f64, power: f64) -> f64 {
        let z = self.t(1.0 - alpha / 2.0) + Normal::ppf(power, 0.0, 1.0);
        (z * self.se).exp() - 1.0
    }
}

/// The two-sided p-value of Student's t: `P(|T| ≥ t)` on `df` degrees of freedom, which is the
/// regularized incomplete beta function `I_x(df/2, 1/2)` at `x = df / (df + t²)`.
///
/// Not `distrs::StudentsT::cdf`: its tail series (Hill's algorithm 395) counts its terms in a
/// `u8` and needs more than 255 of them for `df` 15–19 at `|t|` ≈ 2–2.3 (exactly where a small
/// change on a busy machine lands) and for `df` ≈ 156–200 at `|t|` past about √df: an overflow
/// panic in debug builds, a wrong p-value in release.
fn two_sided_t(t: f64, df: f64) -> f64 {
    if df.is_nan() || df <= 0.0 || t.is_nan() {
        return 1.0;
    }
    let x = df / (df + t * t);
    regularized_beta(x, df / 2.0, 0.5).clamp(0.0, 1.0)
}

/// `I_x(a, b)` for `a, b > 0` and `0 ≤ x ≤ 1`, by the continued fraction (modified Lentz), on
/// the side of `x` where it converges fast (Numerical Recipes §6.4).
fn regularized_beta(x: f64, a: f64, b: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front =
        libm::lgamma(a + b) - libm::lgamma(a) - libm::lgamma(b) + a * x.ln() + b * (1.0 - x).ln();
    if x < (a + 1.0) / (a + b + 2.0) {
        ln_front.exp() * beta_fraction(x, a, b) / a
    } else {
        1.0 - ln_front.exp() * beta_fraction(1.0 - x, b, a) / b
    }
}

fn beta_fraction(x: f64, a: f64, b: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let guard = |v: f64| if v.abs() < TINY { TINY } else { v };
    let mut c = 1.0;
    let mut d = 1.0 / guard(1.0 - (a + b) * x / (a + 1.0));
    let mut h = d;
    // Converges in O(√max(a, b)) steps; the bound only guards against a NaN that never settles.
    for m in 1..=100_000 {
        let m = f64::from(m);
        let even = m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m));
        d = 1.0 / guard(1.0 + even * d);
        c = guard(1.0 + even / c);
        h *= d * c;
        let odd = -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0));
        d = 1.0 / guard(1.0 + odd * d);
        c = guard(1.0 + odd / c);
        let step = d * c;
        h *= step;
        if (step - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn the_trimmed_mean_and_its_error_match_a_hand_computation() {
        // n = 10, g = 2: trimmed {3,4,5,6,7,8} → mean 5.5; winsorized
        // {3,3,3,4,5,6,7,8,8,8}: mean 5.5, Σ(x − 5.5)² = 3·6.25 + 2.25 + 0.25 + 0.25 + 2.25
        // + 3·6.25 = 42.5, variance 42.5 / 9, se = √(42.5/9) / (0.6 · √10).
        let mut d: Vec<f64> = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 100.0]
            .iter()
            .map(|x| x / 100.0)
            .collect();
        let p = Paired::of_log_ratios(&mut d).unwrap();
        assert!(close(p.log_ratio, 0.055, 1e-15), "{p:?}");
        let se = (42.5f64 / 9.0).sqrt() / (0.6 * 10f64.sqrt()) / 100.0;
        assert!(close(p.se, se, 1e-15), "{} vs {se}", p.se);
        assert_eq!(p.df, 5.0);
    }

    #[test]
    fn the_interval_uses_student_t_quantiles_from_the_table() {
        // t(0.975, 5) = 2.5706 (any t table).
        let p = Paired {
            n: 10,
            log_ratio: 0.0,
            se: 0.01,
            df: 5.0,
        };
        let [lo, hi] = p.interval(0.05);
        assert!(close(hi.ln(), 0.025706, 1e-5), "{hi}");
        assert!(close(lo.ln(), -0.025706, 1e-5), "{lo}");
        // |t| = 2.5706 on 5 df is p = 0.05.
        let at_edge = Paired {
            log_ratio: 0.025706,
            ..p
        };
        assert!(
            close(at_edge.p_value(), 0.05, 1e-4),
            "{}",
            at_edge.p_value()
        );
    }

    #[test]
    fn a_shift_in_every_pair_gives_its_ratio_and_a_tiny_p() {
        let before: Vec<f64> = (0..50).map(|i| 1000.0 + f64::from(i % 7) * 10.0).collect();
        let after: Vec<f64> = before
            .iter()
            .enumerate()
            .map(|(i, b)| b * 1.005 * (1.0 + (i % 3) as f64 * 1e-4))
            .collect();
        let p = Paired::of(&before, &after).unwrap();
        assert!(close(p.ratio(), 1.005 * 1.0001, 1e-4), "{}", p.ratio());
        assert!(p.p_value() < 1e-10);
        let [lo, hi] = p.interval(0.05);
        assert!(lo > 1.004 && hi < 1.006, "{lo} {hi}");
    }

    #[test]
    fn one_preempted_run_does_not_move_the_estimate() {
        let before = vec![10.0; 20];
        let mut after = vec![10.1; 20];
        after[7] = 50.0;
        let p = Paired::of(&before, &after).unwrap();
        assert!(close(p.ratio(), 1.01, 1e-12), "{}", p.ratio());
    }

    #[test]
    fn the_detectable_change_is_t_plus_z_standard_errors() {
        // df large: t(0.975) ≈ 1.96, z(0.8) = 0.8416; se 0.001 → 2.80 per mille.
        let p = Paired {
            n: 100_000,
            log_ratio: 0.0,
            se: 0.001,
            df: 1e6,
        };
        let d = p.detectable(0.05, 0.8);
        assert!(close(d, (0.0028016f64).exp() - 1.0, 2e-6), "{d}");
    }

    #[test]
    fn interim_looks_spend_a_thousandth_each_and_never_more_than_half() {
        assert_eq!(final_alpha(0.05, 0), 0.05);
        assert!(close(final_alpha(0.05, 10), 0.04, 1e-15));
        assert!(close(final_alpha(0.05, 40), 0.025, 1e-15));
    }

    #[test]
    fn a_vanishing_standard_error_gives_a_p_value_of_zero_not_a_hang() {
        // Seen in CI: identical trimmed pairs but one, a standard error of ~1e-300.
        for se in [1e-300, f64::MIN_POSITIVE, 5e-324] {
            let p = Paired {
                n: 15,
                log_ratio: 0.3,
                se,
                df: 8.0,
            };
            assert_eq!(p.p_value(), 0.0, "se {se}");
        }
        let nan = Paired {
            n: 15,
            log_ratio: f64::NAN,
            se: 0.1,
            df: 8.0,
        };
        assert_eq!(nan.p_value(), 1.0);
    }

    #[test]
    fn the_p_value_is_students_for_every_df_and_t_without_a_panic() {
        // Two-sided critical values from any t table: p = 0.05 and 0.01.
        for (df, t05, t01) in [
            (1.0, 12.706, 63.657),
            (2.0, 4.303, 9.925),
            (5.0, 2.571, 4.032),
            (15.0, 2.131, 2.947),
            (19.0, 2.093, 2.861),
            (30.0, 2.042, 2.750),
            (120.0, 1.980, 2.617),
            (1000.0, 1.962, 2.581),
        ] {
            assert!(close(two_sided_t(t05, df), 0.05, 2e-4), "df {df}");
            assert!(close(two_sided_t(t01, df), 0.01, 5e-5), "df {df}");
        }
        // distrs' tail series overflowed its u8 term counter here (df 15–19 at t ≈ 2–2.3, the
        // p-value of a +1% change on a busy machine; df ≈ 160–200 at t ≈ 14–22).
        let p = Paired {
            n: 32,
            log_ratio: 0.02058,
            se: 0.01,
            df: 19.0,
        };
        let pv = p.p_value();
        assert!(pv > 0.05 && pv < 0.06, "{pv}");
        for df in 1..=400 {
            let mut t = 0.0;
            let mut last = 1.0;
            while t < 1e6 {
                let p = two_sided_t(t, f64::from(df));
                assert!((0.0..=last + 1e-12).contains(&p), "df {df} t {t}: {p}");
                last = p;
                t = t * 1.05 + 0.01;
            }
        }
        assert_eq!(two_sided_t(0.0, 8.0), 1.0);
        assert_eq!(two_sided_t(f64::INFINITY, 8.0), 0.0);
    }

    #[test]
    fn too_few_pairs_or_a_zero_time_give_nothing() {
        assert!(Paired::of(&[1.0, 2.0], &[1.0, 2.0]).is_none());
        assert!(Paired::of(&[1.0, 0.0, 3.0], &[1.0, 2.0, 3.0]).is_none());
    }
}
