//! Comparing two saved results: which spans or commands got faster, slower, stayed the same,
//! or moved in opposite directions in the body and the tail.
//!
//! Three bases, chosen per item by what the results carry:
//! * **samples** — the values themselves are known (a `bench` result's runs, or the exact
//!   HdrHistogram inside a `latscope wayland` result). The body's shift is tested with the
//!   Mann-Whitney U test; the tail moved only if the 95% bootstrap interval of the p99 change
//!   excludes zero (the "before" p99 is an estimate too).
//! * **histogram** — only buckets are known (`latscope live`, bpftrace JSON). Each percentile
//!   is an interval (its estimate ± its bucket error); a percentile moved only if the before and
//!   after intervals do not overlap, so a change smaller than the bucket error is never called a
//!   change.
//! * **summary** — only percentiles are known (`lab-queue`): any change of p50 or p99 counts
//!   (the model is exact; a real run is one measurement, so read it as such).
//!
//! The verdict is `mixed` when the body and the tail move significantly in opposite
//! directions: a lower median must never hide a worse tail.

pub mod load;

use crate::bench::stats;

/// What an item is compared on.
#[derive(Debug, Clone, PartialEq)]
pub enum Data {
    /// distinct values with their counts
    Samples(Vec<(f64, u64)>),
    /// percentile estimates with error bounds, and the buckets (lower bound, count) for plots
    Histogram {
        /// (lower bound, count) of each non-empty bucket
        buckets: Vec<(f64, u64)>,
        /// median estimate
        p50: f64,
        /// its error bound
        p50_error: f64,
        /// 99th percentile estimate
        p99: f64,
        /// its error bound
        p99_error: f64,
    },
}

/// One span or command of one result.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    /// span name or command
    pub name: String,
    /// side and group, when any (`client`, `client wl_surface#3a`)
    pub group: Option<String>,
    /// the summary figures, in ns
    pub stats: Figures,
    /// what the verdict is computed from
    pub data: Data,
}

/// The figures shown for each side.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub struct Figures {
    /// samples
    pub count: u64,
    /// median
    pub p50: f64,
    /// 90th percentile
    pub p90: f64,
    /// 99th percentile
    pub p99: f64,
    /// maximum
    pub max: f64,
    /// mean
    pub mean: f64,
}

/// The verdict on one item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// lower latency (body, and the tail not worse)
    Faster,
    /// higher latency (body or tail, and nothing better)
    Slower,
    /// no change beyond the noise threshold (or the bucket error)
    Same,
    /// body and tail moved significantly in opposite directions
    Mixed,
    /// not enough evidence either way
    Inconclusive,
}

/// The comparison of one item.
#[derive(Debug, Clone, PartialEq)]
pub struct Compared {
    /// the item's name
    pub name: String,
    /// its group
    pub group: Option<String>,
    /// before
    pub before: Figures,
    /// after
    pub after: Figures,
    /// the verdict
    pub verdict: Verdict,
    /// `samples` or `histogram`
    pub basis: &'static str,
    /// the verdict in words, with its evidence
    pub reason: String,
    /// 95% bootstrap intervals of the p50 and p99 change in percent (samples basis only)
    pub change_ci_pct: Option<[(f64, f64); 2]>,
}

/// A whole comparison.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Comparison {
    /// items present on both sides
    pub items: Vec<Compared>,
    /// present only before (`name [group]`)
    pub only_before: Vec<String>,
    /// present only after
    pub only_after: Vec<String>,
}

/// `name [group]`, or `name` when there is no group: how items are shown everywhere.
pub fn label_of(name: &str, group: Option<&str>) -> String {
    match group {
        Some(g) => format!("{name} [{g}]"),
        None => name.to_string(),
    }
}

/// The change from `a` to `b` as text: `+12.3%`, or `–` when `a` is 0.
pub fn change_text(a: f64, b: f64) -> String {
    change_pct(a, b).map_or_else(|| "–".to_string(), |p| format!("{p:+.1}%"))
}

/// The nearest-rank value at quantile `q` of ascending `(value, count)` points (0 when empty).
pub fn quantile(points: &[(f64, u64)], q: f64) -> f64 {
    let total: u64 = points.iter().map(|p| p.1).sum();
    let rank = ((q * total as f64).ceil() as u64).max(1);
    let mut seen = 0;
    points
        .iter()
        .find(|p| {
            seen += p.1;
            seen >= rank
        })
        .map_or(0.0, |p| p.0)
}

/// The relative change from `a` to `b`, in percent.
pub fn change_pct(a: f64, b: f64) -> Option<f64> {
    (a != 0.0).then(|| (b - a) / a * 100.0)
}

impl Item {
    /// The points to plot: exact values, or bucket lower bounds, with counts.
    pub fn points(&self) -> &[(f64, u64)] {
        match &self.data {
            Data::Samples(points)
            | Data::Histogram {
                buckets: points, ..
            } => points,
        }
    }

    /// `name [group]`
    pub fn label(&self) -> String {
        label(self)
    }
}

impl Compared {
    /// `name [group]`
    pub fn label(&self) -> String {
        label_of(&self.name, self.group.as_deref())
    }
}

fn key(item: &Item) -> (String, Option<String>) {
    (item.name.clone(), item.group.clone())
}

fn label(item: &Item) -> String {
    label_of(&item.name, item.group.as_deref())
}

/// Compares every item present in both; `noise` is the relative threshold (0.01 = 1%).
pub fn compare(before: &[Item], after: &[Item], noise: f64) -> Comparison {
    let mut out = Comparison::default();
    for b in before {
        match after.iter().find(|a| key(a) == key(b)) {
            Some(a) => out.items.push(compare_item(b, a, noise)),
            None => out.only_before.push(label(b)),
        }
    }
    out.only_after = after
        .iter()
        .filter(|a| !before.iter().any(|b| key(b) == key(a)))
        .map(label)
        .collect();
    out
}

fn compare_item(b: &Item, a: &Item, noise: f64) -> Compared {
    let (verdict, basis, mut reason, change_ci_pct) = match (&b.data, &a.data) {
        (Data::Samples(x), Data::Samples(y)) => {
            let cis = [0.5, 0.99].map(|q| change_ci(x, y, q));
            let (v, basis, reason) = samples_verdict(x, y, &b.stats, &a.stats, noise, cis[1]);
            (v, basis, reason, Some(cis))
        }
        _ => {
            let (v, basis, reason) = histogram_verdict(b, a);
            (v, basis, reason, None)
        }
    };
    if let Some([p50, p99]) =
        change_ci_pct.filter(|c| c.iter().all(|(lo, hi)| lo.is_finite() && hi.is_finite()))
    {
        reason.push_str(&format!(
            "; 95% intervals of the change: p50 {:+.1}%…{:+.1}%, p99 {:+.1}%…{:+.1}%",
            p50.0, p50.1, p99.0, p99.1
        ));
    }
    Compared {
        name: b.name.clone(),
        group: b.group.clone(),
        before: b.stats,
        after: a.stats,
        verdict,
        basis,
        reason,
        change_ci_pct,
    }
}

/// Resamples in the percentile bootstraps, and the largest resample drawn. A resample smaller
/// than the data can only widen the interval, never narrow it.
const RESAMPLES: usize = 500;
const MAX_DRAWS: u64 = 5_000;

/// Quantile `q` of a resample of weighted values.
fn resampled_quantile(
    points: &[(f64, u64)],
    cumulative: &[u64],
    q: f64,
    rng: &mut rand_pcg::Pcg64Mcg,
) -> f64 {
    use rand::Rng;
    let total = *cumulative.last().unwrap_or(&0);
    let m = total.min(MAX_DRAWS) as usize;
    let mut draws: Vec<f64> = (0..m)
        .map(|_| {
            let r = rng.random_range(0..total);
            points[cumulative.partition_point(|&c| c <= r)].0
        })
        .collect();
    let rank = ((q * m as f64).ceil() as usize).clamp(1, m.max(1)) - 1;
    let (_, v, _) = draws.select_nth_unstable_by(rank, f64::total_cmp);
    *v
}

/// The 95% percentile-bootstrap interval of the change of quantile `q`, in percent.
fn change_ci(x: &[(f64, u64)], y: &[(f64, u64)], q: f64) -> (f64, f64) {
    use rand::SeedableRng;
    let cum = |p: &[(f64, u64)]| {
        p.iter()
            .scan(0u64, |s, v| {
                *s += v.1;
                Some(*s)
            })
            .collect::<Vec<u64>>()
    };
    let (cx, cy) = (cum(x), cum(y));
    if cx.last().copied().unwrap_or(0) == 0 || cy.last().copied().unwrap_or(0) == 0 {
        return (f64::NAN, f64::NAN);
    }
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(0x1a75_c09e);
    let mut changes: Vec<f64> = (0..RESAMPLES)
        .filter_map(|_| {
            let before = resampled_quantile(x, &cx, q, &mut rng);
            let after = resampled_quantile(y, &cy, q, &mut rng);
            change_pct(before, after)
        })
        .collect();
    if changes.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    changes.sort_by(f64::total_cmp);
    let at = |p: f64| {
        changes[((p * (changes.len() - 1) as f64).round() as usize).min(changes.len() - 1)]
    };
    (at(0.025), at(0.975))
}

/// Mann-Whitney on weighted distinct values; returns the two-sided p-value.
fn weighted_mann_whitney(x: &[(f64, u64)], y: &[(f64, u64)]) -> f64 {
    stats::mann_whitney_weighted(x, y).map_or(1.0, |r| r.p)
}

const ALPHA: f64 = 0.05;

fn samples_verdict(
    x: &[(f64, u64)],
    y: &[(f64, u64)],
    b: &Figures,
    a: &Figures,
    noise: f64,
    tail_ci: (f64, f64),
) -> (Verdict, &'static str, String) {
    let body = change_pct(b.p50, a.p50).unwrap_or(0.0) / 100.0;
    let tail = change_pct(b.p99, a.p99).unwrap_or(0.0) / 100.0;
    let p_body = weighted_mann_whitney(x, y);
    let body_moved = p_body < ALPHA && body.abs() > noise;
    // The tail moved only if the 95% bootstrap interval of the p99 change excludes zero and
    // the change exceeds the noise band (the "before" p99 is itself an estimate).
    let (lo, hi) = tail_ci;
    let tail_moved = (lo > 0.0 || hi < 0.0) && tail.abs() > noise;
    let verdict = match (body_moved, tail_moved) {
        (true, true) if body.signum() != tail.signum() => Verdict::Mixed,
        (true, _) if body < 0.0 => Verdict::Faster,
        (true, _) => Verdict::Slower,
        (false, true) if tail > 0.0 => Verdict::Slower,
        (false, true) => Verdict::Faster,
        (false, false) if body.abs() <= noise && tail.abs() <= noise => Verdict::Same,
        (false, false) => Verdict::Inconclusive,
    };
    let reason = format!(
        "median {:+.1}% (Mann-Whitney p={p_body:.3}), p99 {:+.1}%{}",
        body * 100.0,
        tail * 100.0,
        if verdict == Verdict::Mixed {
            ": the body and the tail moved in opposite directions"
        } else {
            ""
        }
    );
    (verdict, "samples", reason)
}

fn histogram_verdict(b: &Item, a: &Item) -> (Verdict, &'static str, String) {
    let bounds = |d: &Data, f: &Figures| match d {
        Data::Histogram {
            p50,
            p50_error,
            p99,
            p99_error,
            ..
        } => (*p50, *p50_error, *p99, *p99_error),
        Data::Samples(_) => (f.p50, 0.0, f.p99, 0.0),
    };
    let (b50, be50, b99, be99) = bounds(&b.data, &b.stats);
    let (a50, ae50, a99, ae99) = bounds(&a.data, &a.stats);
    // A percentile moved only if [v − e, v + e] before and after do not overlap.
    let moved = |bv: f64, be: f64, av: f64, ae: f64| -> f64 {
        if av - ae > bv + be {
            1.0
        } else if av + ae < bv - be {
            -1.0
        } else {
            0.0
        }
    };
    let (body, tail) = (moved(b50, be50, a50, ae50), moved(b99, be99, a99, ae99));
    let verdict = match (body, tail) {
        (x, y) if x * y < 0.0 => Verdict::Mixed,
        (x, y) if x > 0.0 || y > 0.0 => Verdict::Slower,
        (x, y) if x < 0.0 || y < 0.0 => Verdict::Faster,
        _ => Verdict::Same,
    };
    let reason = format!(
        "p50 {b50:.0}±{be50:.0} → {a50:.0}±{ae50:.0} ns, p99 {b99:.0}±{be99:.0} → {a99:.0}±{ae99:.0} ns; a change within the bucket error is no change"
    );
    // Results that carry only summaries (lab-queue) have no buckets and no error bound.
    let summary_only = matches!((&b.data, &a.data), (Data::Histogram { buckets: x, .. }, Data::Histogram { buckets: y, .. }) if x.is_empty() && y.is_empty())
        && be50 == 0.0
        && ae50 == 0.0;
    (
        verdict,
        if summary_only { "summary" } else { "histogram" },
        reason,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(values: &[(f64, u64)]) -> Item {
        let mut flat: Vec<f64> = values
            .iter()
            .flat_map(|&(v, c)| std::iter::repeat_n(v, c as usize))
            .collect();
        flat.sort_by(f64::total_cmp);
        let q = |p: f64| flat[((p * flat.len() as f64).ceil() as usize).max(1) - 1];
        let stats = Figures {
            count: flat.len() as u64,
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            max: *flat.last().unwrap(),
            mean: flat.iter().sum::<f64>() / flat.len() as f64,
        };
        Item {
            name: "span".into(),
            group: None,
            stats,
            data: Data::Samples(values.to_vec()),
        }
    }

    #[test]
    fn weighted_mann_whitney_matches_scipy_on_counted_values() {
        // [1,2,2,3,3,3,4] vs [2,3,4,4,5,5]: scipy.stats.mannwhitneyu(..., method='asymptotic')
        let x = [(3.0, 3), (1.0, 1), (2.0, 2), (4.0, 1)];
        let y = [(5.0, 2), (2.0, 1), (3.0, 1), (4.0, 2)];
        assert!((weighted_mann_whitney(&x, &y) - 0.07826242947714618).abs() < 1e-12);
    }

    #[test]
    fn samples_from_one_distribution_rarely_raise_an_alarm() {
        // 100 pairs of independent samples (n = 200 each) from the same skewed distribution.
        use rand::{Rng, SeedableRng};
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(7);
        let mut draw = || -> Vec<(f64, u64)> {
            let mut v: Vec<f64> = (0..200)
                .map(|_| (1000.0 * (1.0 + rng.random::<f64>()).powi(6)).round())
                .collect();
            v.sort_by(f64::total_cmp);
            v.into_iter().map(|x| (x, 1)).collect()
        };
        let alarms = (0..100)
            .filter(|_| {
                let (b, a) = (item(&draw()), item(&draw()));
                let verdict = compare(&[b], &[a], 0.01).items[0].verdict;
                matches!(verdict, Verdict::Faster | Verdict::Slower | Verdict::Mixed)
            })
            .count();
        assert!(alarms <= 10, "{alarms} false alarms in 100");
    }

    #[test]
    fn identical_distributions_are_the_same() {
        let v: Vec<(f64, u64)> = (1..=200).map(|i| (f64::from(i) * 10.0, 5)).collect();
        let c = compare(&[item(&v)], &[item(&v)], 0.01);
        assert_eq!(c.items[0].verdict, Verdict::Same);
    }

    #[test]
    fn a_shift_of_the_whole_distribution_is_slower() {
        let before: Vec<(f64, u64)> = (1..=200).map(|i| (f64::from(i) * 10.0, 5)).collect();
        let after: Vec<(f64, u64)> = before.iter().map(|&(v, c)| (v * 1.3, c)).collect();
        let c = compare(&[item(&before)], &[item(&after)], 0.01);
        assert_eq!(c.items[0].verdict, Verdict::Slower, "{}", c.items[0].reason);
    }

    #[test]
    fn a_lower_median_with_a_worse_tail_is_mixed() {
        // Before: 1000 values around 1000. After: the body 20% lower, but 5% of values at 10×.
        let before: Vec<(f64, u64)> = (0..100).map(|i| (1000.0 + f64::from(i), 10)).collect();
        let mut after: Vec<(f64, u64)> = (0..100).map(|i| (800.0 + f64::from(i), 10)).collect();
        after.push((10_000.0, 50));
        let c = compare(&[item(&before)], &[item(&after)], 0.01);
        assert_eq!(c.items[0].verdict, Verdict::Mixed, "{}", c.items[0].reason);
        assert!(c.items[0].reason.contains("opposite directions"));
    }

    #[test]
    fn the_change_interval_contains_the_observed_change_and_excludes_zero_for_a_clear_shift() {
        let before: Vec<(f64, u64)> = (1..=200).map(|i| (f64::from(i) * 10.0, 5)).collect();
        let after: Vec<(f64, u64)> = before.iter().map(|&(v, c)| (v * 1.3, c)).collect();
        let (lo, hi) = change_ci(&before, &after, 0.5);
        assert!(lo <= 30.0 && 30.0 <= hi, "{lo}..{hi}");
        assert!(lo > 0.0, "a 30% shift must exclude 0: {lo}..{hi}");
        let (lo, hi) = change_ci(&before, &before, 0.5);
        assert!(lo <= 0.0 && 0.0 <= hi, "{lo}..{hi}");
    }

    #[test]
    fn histogram_changes_within_the_bucket_error_are_not_changes() {
        let hist = |p50: f64, p99: f64, e: f64| Item {
            name: "s".into(),
            group: None,
            stats: Figures {
                p50,
                p99,
                ..Figures::default()
            },
            data: Data::Histogram {
                buckets: Vec::new(),
                p50,
                p50_error: e,
                p99,
                p99_error: e,
            },
        };
        let c = compare(
            &[hist(100.0, 200.0, 10.0)],
            &[hist(115.0, 210.0, 10.0)],
            0.01,
        );
        assert_eq!(c.items[0].verdict, Verdict::Same);
        assert_eq!(c.items[0].basis, "histogram");
        let c = compare(
            &[hist(100.0, 200.0, 10.0)],
            &[hist(130.0, 210.0, 10.0)],
            0.01,
        );
        assert_eq!(c.items[0].verdict, Verdict::Slower);
        let c = compare(
            &[hist(100.0, 200.0, 10.0)],
            &[hist(70.0, 300.0, 10.0)],
            0.01,
        );
        assert_eq!(c.items[0].verdict, Verdict::Mixed);
    }

    #[test]
    fn items_on_one_side_only_are_listed() {
        let mut a = item(&[(1.0, 1)]);
        let mut b = item(&[(1.0, 1)]);
        a.name = "gone".into();
        b.name = "new".into();
        let c = compare(&[a], &[b], 0.01);
        assert!(c.items.is_empty());
        assert_eq!(
            (c.only_before.as_slice(), c.only_after.as_slice()),
            (&["gone".to_string()][..], &["new".to_string()][..])
        );
    }
}
