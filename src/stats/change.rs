//! Did it change? The one rule behind every verdict latscope prints: a bench candidate against
//! its baseline, `bench --compare`, `compare` and `report` all call [`judge`], so the same two
//! sets of numbers get the same answer whichever command is asked.
//!
//! Three bases, chosen by what the results carry:
//!
//! * **samples** — the values are known (bench runs, the HdrHistogram embedded in a latency
//!   result). The **body** is the median: the ratio `after ÷ before` with its percentile-bootstrap
//!   interval, and the two-sided Mann-Whitney U test. The **tail** is the 99th percentile, judged
//!   only when both sides have at least [`TAIL_MIN_SAMPLES`] values (with fewer, p99 is the
//!   maximum, not a tail). When both are judged, each is tested at α/2 (Bonferroni), so judging
//!   two things does not double the false alarms.
//!   - the body *moved* when the test is significant and its interval excludes 1;
//!   - the tail *moved* when its interval excludes 1 and the change exceeds the noise band;
//!   - a change whose whole interval lies within ±noise is no change, whatever the test says.
//! * **histogram** — only buckets are known (`latscope live`, bpftrace JSON). Each percentile is
//!   an interval (estimate ± bucket error); it moved only if the before and after intervals do
//!   not overlap, so a change smaller than the bucket error is never called a change.
//! * **summary** — only percentiles are known: a change beyond ±noise counts (one measurement
//!   each: read it as such).
//!
//! The verdict: `mixed` when body and tail moved in opposite directions (a lower median never
//! hides a worse tail); `faster`/`slower` when what moved agrees; `same` when nothing moved and
//! every judged change lies within ±noise; otherwise `inconclusive` (a difference the data
//! cannot confirm: more samples would tell). A benchmark run under several layouts
//! (`bench --layouts`) then applies [`within_layout_noise`]: a change whose interval lies inside
//! the spread that layouts alone caused is `within layout noise`.

use serde::{Deserialize, Serialize};

use super::ab;
use super::paired::Paired;

/// Both sides need this many samples before their 99th percentiles are compared.
pub const TAIL_MIN_SAMPLES: u64 = 100;

/// The verdict on one comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// significantly lower (time: faster)
    Faster,
    /// significantly higher (time: slower)
    Slower,
    /// no change beyond the noise band
    Same,
    /// the body and the tail moved significantly in opposite directions
    Mixed,
    /// a difference the data cannot confirm
    Inconclusive,
    /// the interval lies inside the layout-noise band: no larger than what changing only the
    /// code and memory layout (a relink, the environment's size) did to the same commands
    #[serde(rename = "within-layout-noise")]
    WithinLayoutNoise,
}

impl Verdict {
    /// The verdict's name, as written in every output.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::Same => "same",
            Verdict::Mixed => "mixed",
            Verdict::Inconclusive => "inconclusive",
            Verdict::WithinLayoutNoise => "within layout noise",
        }
    }
}

/// What a verdict was computed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Basis {
    /// the values themselves
    Samples,
    /// bucket estimates with error bounds
    Histogram,
    /// percentiles only
    Summary,
    /// interleaved runs compared block by block ([`super::paired`])
    Paired,
}

impl Basis {
    /// The basis's name, as written in every output.
    pub fn name(self) -> &'static str {
        match self {
            Basis::Samples => "samples",
            Basis::Histogram => "histogram",
            Basis::Summary => "summary",
            Basis::Paired => "paired",
        }
    }
}

/// The thresholds of the rule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rule {
    /// the relative band within which a change is no change (0.01 = ±1%)
    pub noise: f64,
    /// the significance level (0.05)
    pub alpha: f64,
}

impl Default for Rule {
    fn default() -> Self {
        Rule {
            noise: 0.01,
            alpha: 0.05,
        }
    }
}

/// `after ÷ before` of one statistic, with its interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Ratio {
    /// the point estimate
    pub ratio: f64,
    /// the interval `[lo, hi]` (confidence in [`Change::confidence`]); for the histogram basis,
    /// the range the bucket errors allow
    pub ci: [f64; 2],
}

/// The outcome of [`judge`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    /// the verdict
    pub verdict: Verdict,
    /// what it was computed from
    pub basis: Basis,
    /// the median's ratio (`None` when a side has no samples or a median of 0)
    pub p50: Option<Ratio>,
    /// the 99th percentile's ratio, when the tail was judged
    pub p99: Option<Ratio>,
    /// Mann-Whitney two-sided p-value (samples basis)
    pub p_value: Option<f64>,
    /// the confidence of the intervals (0.95, or 0.975 when body and tail are both tested)
    pub confidence: f64,
    /// the verdict in words, with its evidence
    pub reason: String,
    /// the smallest relative change (0.004 = 0.4%) this data would have detected with 80%
    /// power (paired basis)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detectable: Option<f64>,
}

/// A percentile estimate with its absolute error bound (histogram and summary bases).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Estimate {
    /// the estimate
    pub value: f64,
    /// how far the true value can be from it
    pub error: f64,
}

/// What one side of a comparison carries.
#[derive(Debug, Clone, Copy)]
pub enum Evidence<'a> {
    /// ascending `(value, count)` points
    Samples(&'a [(f64, u64)]),
    /// p50 and p99 estimates with their bucket errors
    Histogram {
        /// median
        p50: Estimate,
        /// 99th percentile
        p99: Estimate,
    },
    /// exact p50 and p99 of one measurement
    Summary {
        /// median
        p50: f64,
        /// 99th percentile
        p99: f64,
    },
}

/// Compares `after` with `before` (lower is better). Mixed evidence falls back to the weaker
/// basis: samples are turned into exact estimates.
pub fn judge(before: Evidence<'_>, after: Evidence<'_>, rule: Rule) -> Change {
    match (before, after) {
        (Evidence::Samples(b), Evidence::Samples(a)) => samples(b, a, rule),
        (b, a) => {
            let basis = if matches!(b, Evidence::Histogram { .. })
                || matches!(a, Evidence::Histogram { .. })
            {
                Basis::Histogram
            } else {
                Basis::Summary
            };
            intervals(estimates(b), estimates(a), basis, rule)
        }
    }
}

fn estimates(e: Evidence<'_>) -> [Estimate; 2] {
    let exact = |value| Estimate { value, error: 0.0 };
    match e {
        Evidence::Samples(points) => [
            exact(ab::quantile(points, 0.5)),
            exact(ab::quantile(points, 0.99)),
        ],
        Evidence::Histogram { p50, p99 } => [p50, p99],
        Evidence::Summary { p50, p99 } => [exact(p50), exact(p99)],
    }
}

/// Which way a statistic moved: -1, 0 or +1.
type Direction = i8;

fn direction_of(ci: [f64; 2]) -> Direction {
    if ci[0] > 1.0 {
        1
    } else if ci[1] < 1.0 {
        -1
    } else {
        0
    }
}

fn within(ci: [f64; 2], noise: f64) -> bool {
    ci[0] >= 1.0 - noise && ci[1] <= 1.0 + noise
}

fn pct(r: f64) -> String {
    format!("{:+.1}%", (r - 1.0) * 100.0)
}

fn ratio_text(name: &str, r: &Ratio) -> String {
    format!(
        "{name} {} ({}…{})",
        pct(r.ratio),
        pct(r.ci[0]),
        pct(r.ci[1])
    )
}

fn samples(before: &[(f64, u64)], after: &[(f64, u64)], rule: Rule) -> Change {
    let count = |p: &[(f64, u64)]| p.iter().map(|x| x.1).sum::<u64>();
    let (nb, na) = (count(before), count(after));
    let tail_judged = nb >= TAIL_MIN_SAMPLES && na >= TAIL_MIN_SAMPLES;
    let alpha = if tail_judged {
        rule.alpha / 2.0
    } else {
        rule.alpha
    };
    let confidence = 1.0 - alpha;
    let empty = |reason: &str| Change {
        verdict: Verdict::Inconclusive,
        basis: Basis::Samples,
        p50: None,
        p99: None,
        p_value: None,
        confidence,
        reason: reason.to_string(),
        detectable: None,
    };
    if nb == 0 || na == 0 {
        return empty("a side has no samples");
    }
    if before == after {
        let one = Ratio {
            ratio: 1.0,
            ci: [1.0, 1.0],
        };
        return Change {
            verdict: Verdict::Same,
            basis: Basis::Samples,
            p50: Some(one),
            p99: tail_judged.then_some(one),
            p_value: Some(1.0),
            confidence,
            reason: "identical samples".to_string(),
            detectable: None,
        };
    }
    let (Some(mb), Some(ma)) = (ab::weighted_median(before), ab::weighted_median(after)) else {
        return empty("a side has no samples");
    };
    let Some([ci50, ci99]) = ab::ratio_intervals(before, after, confidence)
        .filter(|_| mb != 0.0)
        .filter(|_| ab::quantile(before, 0.99) != 0.0)
    else {
        return empty("a median of 0: a ratio means nothing");
    };
    let p_value = ab::mann_whitney_weighted(after, before).map_or(1.0, |m| m.p);
    let p50 = Ratio {
        ratio: ma / mb,
        ci: [ci50.0, ci50.1],
    };
    let p99 = tail_judged.then(|| Ratio {
        ratio: ab::quantile(after, 0.99) / ab::quantile(before, 0.99),
        ci: [ci99.0, ci99.1],
    });
    let body = if within(p50.ci, rule.noise) || p_value >= alpha {
        0
    } else {
        direction_of(p50.ci)
    };
    let tail = p99.map_or(0, |r| {
        if within(r.ci, rule.noise) || (r.ratio - 1.0).abs() <= rule.noise {
            0
        } else {
            direction_of(r.ci)
        }
    });
    let small = |r: &Ratio| within(r.ci, rule.noise) || (r.ratio - 1.0).abs() <= rule.noise;
    let verdict = verdict_of(body, tail, || small(&p50) && p99.as_ref().is_none_or(small));
    let mut reason = format!(
        "{} (Mann-Whitney p={p_value:.3})",
        ratio_text("median", &p50)
    );
    if let Some(r) = &p99 {
        reason.push_str(&format!(", {}", ratio_text("p99", r)));
    } else {
        reason.push_str(&format!(
            "; the tail is not judged below {TAIL_MIN_SAMPLES} samples a side"
        ));
    }
    reason.push_str(&format!("; {:.1}% intervals", confidence * 100.0));
    reason.push_str(explain(verdict, rule.noise));
    Change {
        verdict,
        basis: Basis::Samples,
        p50: Some(p50),
        p99,
        p_value: Some(p_value),
        confidence,
        reason,
        detectable: None,
    }
}

/// The verdict from the directions the body and the tail moved in; `small` says whether every
/// judged change lies within the noise band.
fn verdict_of(body: Direction, tail: Direction, small: impl FnOnce() -> bool) -> Verdict {
    match (body, tail) {
        (b, t) if b * t < 0 => Verdict::Mixed,
        (b, t) if b > 0 || t > 0 => Verdict::Slower,
        (b, t) if b < 0 || t < 0 => Verdict::Faster,
        _ if small() => Verdict::Same,
        _ => Verdict::Inconclusive,
    }
}

fn explain(verdict: Verdict, noise: f64) -> &'static str {
    let _ = noise;
    match verdict {
        Verdict::Mixed => ": the body and the tail moved in opposite directions",
        Verdict::Inconclusive => {
            ": a difference beyond the noise band that the data cannot confirm; more samples would tell"
        }
        _ => "",
    }
}

fn intervals(b: [Estimate; 2], a: [Estimate; 2], basis: Basis, rule: Rule) -> Change {
    // A percentile moved only if [v − e, v + e] before and after do not overlap, and (with exact
    // values) the change exceeds the noise band.
    let moved = |b: Estimate, a: Estimate| -> Direction {
        let beyond_noise = b.value == 0.0 || ((a.value - b.value) / b.value).abs() > rule.noise;
        if !beyond_noise {
            0
        } else if a.value - a.error > b.value + b.error {
            1
        } else if a.value + a.error < b.value - b.error {
            -1
        } else {
            0
        }
    };
    let (body, tail) = (moved(b[0], a[0]), moved(b[1], a[1]));
    let ratio = |b: Estimate, a: Estimate| {
        (b.value > 0.0).then(|| Ratio {
            ratio: a.value / b.value,
            ci: [
                (a.value - a.error).max(0.0) / (b.value + b.error),
                (a.value + a.error) / (b.value - b.error).max(f64::MIN_POSITIVE),
            ],
        })
    };
    let verdict = verdict_of(body, tail, || true);
    let reason = format!(
        "p50 {:.0}±{:.0} → {:.0}±{:.0} ns, p99 {:.0}±{:.0} → {:.0}±{:.0} ns; {}",
        b[0].value,
        b[0].error,
        a[0].value,
        a[0].error,
        b[1].value,
        b[1].error,
        a[1].value,
        a[1].error,
        match basis {
            Basis::Histogram => "a change within the bucket error is no change",
            _ => "one measurement a side: a change beyond the noise band counts",
        }
    ) + explain(verdict, rule.noise);
    Change {
        verdict,
        basis,
        p50: ratio(b[0], a[0]),
        p99: ratio(b[1], a[1]),
        p_value: None,
        confidence: 1.0,
        reason,
        detectable: None,
    }
}

/// Re-judges a change against the layout-noise band `band` (0.05 = layouts moved the same
/// commands by up to ±5%, see [`crate::bench::layouts`]): a `faster`, `slower` or
/// `inconclusive` change whose whole interval lies inside `[1/(1+band), 1+band]` becomes
/// `within layout noise`, since a relink of the same code moves the time as much. `same` stays
/// `same` (it already says: no change beyond `--noise`), and so does `mixed`.
pub fn within_layout_noise(mut c: Change, band: f64) -> Change {
    let Some(r) = c.p50 else { return c };
    let edge = (1.0 + band).ln();
    let inside = r.ci[0] > 0.0 && r.ci[0].ln() >= -edge && r.ci[1].ln() <= edge;
    let judged = matches!(
        c.verdict,
        Verdict::Faster | Verdict::Slower | Verdict::Inconclusive
    );
    if inside && judged {
        c.reason = format!(
            "{}; within layout noise: the interval {}…{} lies inside the ±{:.2}% (ratios {:.4}–{:.4}) that layouts alone moved the same commands",
            c.reason,
            pct(r.ci[0]),
            pct(r.ci[1]),
            band * 100.0,
            1.0 / (1.0 + band),
            1.0 + band
        );
        c.verdict = Verdict::WithinLayoutNoise;
    }
    c
}

/// The power at which [`Change::detectable`] is computed.
pub const POWER: f64 = 0.8;

/// Judges paired runs ([`super::paired`]) at significance `alpha` (the final or an interim
/// level). The body alone is judged: a command's slowest runs are the machine's hiccups more
/// than the command's, and a second test would cost power at the same false-alarm rate.
pub fn judge_paired(p: &Paired, rule: Rule, alpha: f64) -> Change {
    let ci = p.interval(alpha);
    let p_value = p.p_value();
    let ratio = Ratio {
        ratio: p.ratio(),
        ci,
    };
    let body = if within(ci, rule.noise) || p_value >= alpha {
        0
    } else {
        direction_of(ci)
    };
    let verdict = verdict_of(body, 0, || within(ci, rule.noise));
    let detectable = p.detectable(alpha, POWER);
    let mut reason = format!(
        "{} (paired trimmed t over {} blocks, p={p_value:.3}); {:.1}% interval",
        ratio_text("ratio", &ratio),
        p.n,
        (1.0 - alpha) * 100.0
    );
    if verdict == Verdict::Inconclusive {
        reason.push_str(&format!(
            "; this run could detect a change of ±{:.2}% ({:.0}% power): run longer (--max-time) to see smaller ones",
            detectable * 100.0,
            POWER * 100.0
        ));
    }
    Change {
        verdict,
        basis: Basis::Paired,
        p50: Some(ratio),
        p99: None,
        p_value: Some(p_value),
        confidence: 1.0 - alpha,
        reason,
        detectable: Some(detectable),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judge_samples(b: &[(f64, u64)], a: &[(f64, u64)]) -> Change {
        judge(Evidence::Samples(b), Evidence::Samples(a), Rule::default())
    }

    fn spread(scale: f64) -> Vec<(f64, u64)> {
        (1..=200)
            .map(|i| (f64::from(i) * 10.0 * scale, 5))
            .collect()
    }

    #[test]
    fn identical_samples_are_the_same() {
        let c = judge_samples(&spread(1.0), &spread(1.0));
        assert_eq!(
            (c.verdict, c.reason.as_str()),
            (Verdict::Same, "identical samples")
        );
    }

    #[test]
    fn a_shift_of_the_whole_distribution_is_slower_and_its_ratio_is_exact() {
        let c = judge_samples(&spread(1.0), &spread(1.3));
        assert_eq!(c.verdict, Verdict::Slower, "{}", c.reason);
        let p50 = c.p50.unwrap();
        assert!((p50.ratio - 1.3).abs() < 1e-12, "{p50:?}");
        assert!(p50.ci[0] > 1.0 && p50.ci[1] >= 1.3, "{p50:?}");
        // 1000 samples a side: the tail is judged, both tests at α/2.
        assert_eq!(c.confidence, 0.975);
        assert!(c.p99.is_some());
        assert_eq!(
            judge_samples(&spread(1.0), &spread(0.7)).verdict,
            Verdict::Faster
        );
    }

    #[test]
    fn a_lower_median_with_a_worse_tail_is_mixed() {
        let before: Vec<(f64, u64)> = (0..100).map(|i| (1000.0 + f64::from(i), 10)).collect();
        let mut after: Vec<(f64, u64)> = (0..100).map(|i| (800.0 + f64::from(i), 10)).collect();
        after.push((10_000.0, 50));
        let c = judge_samples(&before, &after);
        assert_eq!(c.verdict, Verdict::Mixed, "{}", c.reason);
        assert!(c.reason.contains("opposite directions"));
    }

    #[test]
    fn a_significant_change_whose_interval_lies_within_the_noise_band_is_the_same() {
        // 0.1% shift of a narrow distribution with many samples: significant, but tiny.
        let before: Vec<(f64, u64)> = (0..100).map(|i| (100_000.0 + f64::from(i), 100)).collect();
        let after: Vec<(f64, u64)> = before.iter().map(|&(v, c)| (v + 100.0, c)).collect();
        let c = judge_samples(&before, &after);
        assert!(c.p_value.unwrap() < 0.001, "{}", c.reason);
        assert_eq!(c.verdict, Verdict::Same, "{}", c.reason);
    }

    #[test]
    fn too_few_noisy_runs_are_inconclusive() {
        let points = |xs: &[f64]| ab::points(xs);
        let c = judge_samples(
            &points(&[100.0, 130.0, 90.0]),
            &points(&[110.0, 95.0, 140.0]),
        );
        assert_eq!(c.verdict, Verdict::Inconclusive, "{}", c.reason);
        assert!(c.p99.is_none() && c.confidence == 0.95);
    }

    #[test]
    fn a_clear_shift_of_a_few_runs_is_called_without_judging_the_tail() {
        let a: Vec<f64> = (0..30).map(|i| 1000.0 + f64::from(i % 5)).collect();
        let b: Vec<f64> = a.iter().map(|x| x * 1.05).collect();
        let c = judge_samples(&ab::points(&a), &ab::points(&b));
        assert_eq!(c.verdict, Verdict::Slower, "{}", c.reason);
        assert!((c.p50.unwrap().ratio - 1.05).abs() < 1e-9);
        assert!(c.reason.contains("the tail is not judged"), "{}", c.reason);
    }

    #[test]
    fn samples_from_one_distribution_rarely_raise_an_alarm() {
        // 40 pairs of independent samples (n = 200 each) from the same skewed distribution: at
        // α = 5% about 2 alarms are expected.
        use rand::{Rng, SeedableRng};
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(7);
        let mut draw = || -> Vec<(f64, u64)> {
            let v: Vec<f64> = (0..200)
                .map(|_| (1000.0 * (1.0 + rng.random::<f64>()).powi(6)).round())
                .collect();
            ab::points(&v)
        };
        let alarms = (0..40)
            .filter(|_| {
                let (b, a) = (draw(), draw());
                matches!(
                    judge_samples(&b, &a).verdict,
                    Verdict::Faster | Verdict::Slower | Verdict::Mixed
                )
            })
            .count();
        assert!(alarms <= 4, "{alarms} false alarms in 40");
    }

    fn paired_change(ratio: f64, lo: f64, hi: f64, verdict: Verdict) -> Change {
        Change {
            verdict,
            basis: Basis::Paired,
            p50: Some(Ratio {
                ratio,
                ci: [lo, hi],
            }),
            p99: None,
            p_value: Some(0.01),
            confidence: 0.95,
            reason: "r".into(),
            detectable: Some(0.01),
        }
    }

    #[test]
    fn a_change_inside_the_layout_band_is_within_layout_noise() {
        // band 5%: the edges are 1/1.05 = 0.95238 and 1.05 (symmetric in the log).
        let v = |lo, hi, verdict| {
            within_layout_noise(paired_change((lo + hi) / 2.0, lo, hi, verdict), 0.05).verdict
        };
        assert_eq!(v(1.02, 1.04, Verdict::Slower), Verdict::WithinLayoutNoise);
        assert_eq!(v(0.953, 0.97, Verdict::Faster), Verdict::WithinLayoutNoise);
        assert_eq!(
            v(0.99, 1.03, Verdict::Inconclusive),
            Verdict::WithinLayoutNoise
        );
        // One edge outside: the change may exceed what layouts do.
        assert_eq!(v(1.02, 1.051, Verdict::Slower), Verdict::Slower);
        assert_eq!(v(0.952, 0.97, Verdict::Faster), Verdict::Faster);
        assert_eq!(v(0.90, 1.10, Verdict::Inconclusive), Verdict::Inconclusive);
        // `same` and `mixed` keep their verdicts.
        assert_eq!(v(0.999, 1.001, Verdict::Same), Verdict::Same);
        assert_eq!(v(1.01, 1.02, Verdict::Mixed), Verdict::Mixed);
        let c = within_layout_noise(paired_change(1.03, 1.02, 1.04, Verdict::Slower), 0.05);
        assert!(
            c.reason
                .ends_with(
                    "lies inside the ±5.00% (ratios 0.9524–1.0500) that layouts alone moved the same commands"
                ),
            "{}",
            c.reason
        );
        assert_eq!(Verdict::WithinLayoutNoise.name(), "within layout noise");
        assert_eq!(
            serde_json::to_string(&Verdict::WithinLayoutNoise).unwrap(),
            "\"within-layout-noise\""
        );
    }

    #[test]
    fn histogram_changes_within_the_bucket_error_are_not_changes() {
        let h = |p50: f64, p99: f64| Evidence::Histogram {
            p50: Estimate {
                value: p50,
                error: 10.0,
            },
            p99: Estimate {
                value: p99,
                error: 10.0,
            },
        };
        let rule = Rule::default();
        let c = judge(h(100.0, 200.0), h(115.0, 210.0), rule);
        assert_eq!((c.verdict, c.basis), (Verdict::Same, Basis::Histogram));
        assert_eq!(
            judge(h(100.0, 200.0), h(130.0, 210.0), rule).verdict,
            Verdict::Slower
        );
        assert_eq!(
            judge(h(100.0, 200.0), h(70.0, 300.0), rule).verdict,
            Verdict::Mixed
        );
    }

    #[test]
    fn summaries_count_a_change_beyond_the_noise_band() {
        let s = |p50: f64, p99: f64| Evidence::Summary { p50, p99 };
        let rule = Rule::default();
        let c = judge(s(100.0, 200.0), s(100.5, 201.0), rule);
        assert_eq!((c.verdict, c.basis), (Verdict::Same, Basis::Summary));
        assert_eq!(
            judge(s(100.0, 200.0), s(90.0, 200.0), rule).verdict,
            Verdict::Faster
        );
    }
}
