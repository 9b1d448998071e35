//! Plots as SVG with plotters (its SVG backend writes `<text>` and needs no font files).
//!
//! * a histogram with a logarithmic latency axis, as the share of samples per bucket, so that
//!   results with different sample counts overlay;
//! * a percentile plot, latency against 1/(1−p) on a log axis (HdrHistogram's plot), where the
//!   tail gets as much room as the body.
//!
//! Each takes several labelled distributions and overlays them (before/after).

use plotters::prelude::*;

use crate::stats::ab::quantile;

/// A distribution to draw: `(value_ns, count)` points, ascending. Exact values from an
/// HdrHistogram, or bucket lower bounds from a histogram.
#[derive(Debug, Clone)]
pub struct Curve {
    /// legend
    pub label: String,
    /// ascending values with counts
    pub points: Vec<(f64, u64)>,
}

const COLOURS: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
];

/// Log-spaced bins (16 per decade) over the curves' range, as the share of each curve's samples.
fn binned(curves: &[Curve]) -> (Vec<f64>, Vec<Vec<f64>>) {
    let lo = curves
        .iter()
        .filter_map(|c| c.points.first())
        .map(|p| p.0.max(1.0))
        .fold(f64::INFINITY, f64::min);
    let hi = curves
        .iter()
        .filter_map(|c| c.points.last())
        .map(|p| p.0.max(1.0))
        .fold(1.0, f64::max);
    let (lo, hi) = if lo.is_finite() {
        (lo, hi.max(lo * 1.01))
    } else {
        (1.0, 10.0)
    };
    let per_decade = 16.0;
    let n = (((hi / lo).log10() * per_decade).ceil() as usize).clamp(1, 400);
    let edges: Vec<f64> = (0..=n)
        .map(|i| lo * 10f64.powf(i as f64 / per_decade))
        .collect();
    let shares = curves
        .iter()
        .map(|c| {
            let total: u64 = c.points.iter().map(|p| p.1).sum::<u64>().max(1);
            let mut bins = vec![0u64; n];
            for &(v, k) in &c.points {
                let i = edges
                    .partition_point(|&e| e <= v.max(1.0))
                    .saturating_sub(1)
                    .min(n - 1);
                bins[i] += k;
            }
            bins.iter()
                .map(|&b| b as f64 / total as f64 * 100.0)
                .collect()
        })
        .collect();
    (edges, shares)
}

/// The histogram, as SVG text.
pub fn histogram_svg(title: &str, curves: &[Curve]) -> String {
    let (edges, shares) = binned(curves);
    let ymax = shares.iter().flatten().copied().fold(1.0, f64::max) * 1.1;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (720, 360)).into_drawing_area();
        let _ = root.fill(&WHITE);
        let x_range = (edges[0] / 1e3)..(edges[edges.len() - 1] / 1e3);
        let keys = one_two_five(x_range.start, x_range.end);
        let chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(x_range.log_scale().with_key_points(keys), 0.0..ymax);
        let Ok(mut chart) = chart else {
            return String::new();
        };
        let _ = chart
            .configure_mesh()
            .x_labels(12)
            .x_label_formatter(&|x| compact(*x))
            .x_desc("latency (µs, log scale)")
            .y_desc("share of samples (%)")
            .draw();
        // A step line per curve: each bin is a flat segment at its share.
        let lines = shares
            .iter()
            .map(|share| {
                share
                    .iter()
                    .enumerate()
                    .flat_map(|(b, &s)| [(edges[b] / 1e3, s), (edges[b + 1] / 1e3, s)])
                    .collect()
            })
            .collect();
        overlay(&mut chart, curves, lines);
        let _ = root.present();
    }
    svg
}

/// Draws one line per curve in its colour, labelled for the legend, and the legend.
fn overlay<'a, DB: DrawingBackend + 'a, X: Ranged<ValueType = f64>>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, plotters::coord::types::RangedCoordf64>>,
    curves: &[Curve],
    lines: Vec<Vec<(f64, f64)>>,
) {
    for (i, (curve, line)) in curves.iter().zip(lines).enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        if let Ok(series) = chart.draw_series(LineSeries::new(line, colour.stroke_width(2))) {
            series.label(curve.label.clone()).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
            });
        }
    }
    let _ = chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw();
}

/// Axis marks at 1, 2 and 5 times the powers of ten within `[lo, hi]`.
fn one_two_five(lo: f64, hi: f64) -> Vec<f64> {
    let mut keys = Vec::new();
    let mut decade = 10f64.powi(lo.max(1e-9).log10().floor() as i32);
    while decade <= hi {
        keys.extend(
            [1.0, 2.0, 5.0]
                .iter()
                .map(|m| m * decade)
                .filter(|k| (lo..=hi).contains(k)),
        );
        decade *= 10.0;
    }
    keys
}

/// A short label for an axis value: `1500`, `2.5`, `12000` → `12k`.
fn compact(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    }
}

/// The percentile plot, as SVG text.
pub fn percentile_svg(title: &str, curves: &[Curve]) -> String {
    // x = 1/(1−p) from p = 0 (1) to p = 99.99% (10 000); 40 points per decade.
    let xs: Vec<f64> = (0..=160).map(|i| 10f64.powf(f64::from(i) / 40.0)).collect();
    let lines: Vec<Vec<(f64, f64)>> = curves
        .iter()
        .map(|c| {
            xs.iter()
                .map(|&x| (x, quantile(&c.points, 1.0 - 1.0 / x) / 1e3))
                .collect()
        })
        .collect();
    let ymax = lines.iter().flatten().map(|p| p.1).fold(1.0, f64::max) * 1.1;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (720, 360)).into_drawing_area();
        let _ = root.fill(&WHITE);
        let chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d((1.0..10_000.0).log_scale(), 0.0..ymax);
        let Ok(mut chart) = chart else {
            return String::new();
        };
        let _ = chart
            .configure_mesh()
            .x_desc("percentile")
            .y_desc("latency (µs)")
            .x_label_formatter(&|x| format!("{}%", 100.0 - 100.0 / x))
            .draw();
        overlay(&mut chart, curves, lines);
        let _ = root.present();
    }
    svg
}

/// The most points a scatter draws (every k-th span beyond it, said in the caption): an SVG
/// circle is ~80 bytes.
pub const SCATTER_MAX: usize = 20_000;

/// Latency against start time, one dot per span (Trace Compass's latency-vs-time view):
/// `points` are (start ns, latency ns) in the trace's clock; x is seconds from the first.
pub fn scatter_svg(title: &str, points: &[(u64, u64)]) -> String {
    let step = points.len().div_ceil(SCATTER_MAX).max(1);
    let t0 = points.iter().map(|p| p.0).min().unwrap_or(0);
    let xy: Vec<(f64, f64)> = points
        .iter()
        .step_by(step)
        .map(|&(t, l)| ((t - t0) as f64 / 1e9, l as f64 / 1e3))
        .collect();
    let xmax = xy.iter().map(|p| p.0).fold(1e-6, f64::max) * 1.02;
    let ymax = xy.iter().map(|p| p.1).fold(1.0, f64::max) * 1.1;
    let caption = if step > 1 {
        format!("{title} (every {step}th of {} spans)", points.len())
    } else {
        format!("{title} ({} spans)", points.len())
    };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (720, 360)).into_drawing_area();
        let _ = root.fill(&WHITE);
        let chart = ChartBuilder::on(&root)
            .caption(caption, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..xmax, 0.0..ymax);
        let Ok(mut chart) = chart else {
            return String::new();
        };
        let _ = chart
            .configure_mesh()
            .x_desc("start (s from the first span)")
            .y_desc("latency (µs)")
            .draw();
        let _ = chart.draw_series(
            xy.iter()
                .map(|&p| Circle::new(p, 2, COLOURS[0].mix(0.6).filled())),
        );
        let _ = root.present();
    }
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scatter_has_one_dot_per_span_and_its_axes() {
        let points: Vec<(u64, u64)> = (0..50)
            .map(|i| (1_000_000_000 + i * 1_000_000, 5_000 + i))
            .collect();
        let svg = scatter_svg("x", &points);
        assert_eq!(svg.matches("<circle").count(), 50);
        assert!(svg.contains("latency (µs)") && svg.contains("start (s from the first span)"));
        let many: Vec<(u64, u64)> = (0..(SCATTER_MAX as u64 * 3)).map(|i| (i, i)).collect();
        assert_eq!(
            scatter_svg("y", &many).matches("<circle").count(),
            SCATTER_MAX
        );
    }

    fn curves() -> Vec<Curve> {
        let before: Vec<(f64, u64)> = (1..=100).map(|i| (f64::from(i) * 1_000.0, 10)).collect();
        let after: Vec<(f64, u64)> = before.iter().map(|&(v, c)| (v * 2.0, c)).collect();
        vec![
            Curve {
                label: "before".into(),
                points: before,
            },
            Curve {
                label: "after <b>".into(),
                points: after,
            },
        ]
    }

    #[test]
    fn the_histogram_has_axes_two_series_and_a_legend() {
        let svg = histogram_svg("commit_to_release", &curves());
        assert!(svg.starts_with("<svg"), "{}", &svg[..100.min(svg.len())]);
        assert!(svg.contains("latency (µs, log scale)") && svg.contains("share of samples (%)"));
        // Each series is a line and a legend mark in its own colour; the axes are black.
        assert_eq!(
            svg.matches(r##"stroke="#1F77B4" stroke-width="2""##)
                .count(),
            2
        );
        assert_eq!(
            svg.matches(r##"stroke="#D62728" stroke-width="2""##)
                .count(),
            2
        );
        // Labels from inputs are escaped by the SVG backend.
        assert!(svg.contains("after &lt;b&gt;") && !svg.contains("after <b>"));
    }

    #[test]
    fn the_percentile_plot_puts_the_tail_on_a_log_axis() {
        let svg = percentile_svg("commit_to_release", &curves());
        assert!(
            svg.contains("99.9%") || svg.contains("99.99%"),
            "no tail labels"
        );
        assert!(svg.contains("latency (µs)"));
        assert_eq!(
            svg.matches(r##"stroke="#D62728" stroke-width="2""##)
                .count(),
            2
        );
    }

    #[test]
    fn binned_shares_sum_to_one_hundred_percent() {
        let (_, shares) = binned(&curves());
        for s in shares {
            assert!((s.iter().sum::<f64>() - 100.0).abs() < 1e-9);
        }
        assert_eq!(quantile(&curves()[0].points, 0.5), 50_000.0);
    }
}
