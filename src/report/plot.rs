//! Plots as SVG with plotters (its SVG backend writes `<text>` and needs no font files).
//!
//! * a histogram with a logarithmic latency axis, as the share of samples per bucket, so that
//!   results with different sample counts overlay;
//! * a percentile plot, latency against 1/(1−p) on a log axis (HdrHistogram's plot), where the
//!   tail gets as much room as the body.
//!
//! Each takes several labelled distributions and overlays them (before/after).

use plotters::coord::types::RangedCoordf64;
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

/// Okabe and Ito's palette (2008), which people with every common colour-vision deficiency
/// tell apart, in an order that keeps the first pairs far apart (before/after: blue and
/// vermillion); yellow last, as it is faint on white.
pub const COLOURS: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(0, 0, 0),
    RGBColor(240, 228, 66),
];

/// The plots' size: the page scales them (the SVG has a viewBox), so only proportions matter.
const WIDTH: u32 = 800;
const CHART_HEIGHT: u32 = 360;
/// Each legend line, below the chart (never on the data).
const LEGEND_LINE: u32 = 20;
/// Room right of the plotting area for the last tick label (`99.99%`, `10 ms`).
const RIGHT_MARGIN: u32 = 48;

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

/// The drawing: the chart's area on top, the legend's below it.
fn canvas(
    svg: &mut String,
    legend_lines: usize,
) -> DrawingArea<SVGBackend<'_>, plotters::coord::Shift> {
    let height =
        CHART_HEIGHT + LEGEND_LINE * legend_lines as u32 + if legend_lines > 0 { 8 } else { 0 };
    let root = SVGBackend::with_string(svg, (WIDTH, height)).into_drawing_area();
    let _ = root.fill(&WHITE);
    root
}

/// The legend under the chart: a line of the curve's colour and its label, one per row.
fn legend(root: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>, labels: &[&str]) {
    let top = CHART_HEIGHT as i32 + 4;
    for (i, label) in labels.iter().enumerate() {
        let y = top + (i as u32 * LEGEND_LINE) as i32 + LEGEND_LINE as i32 / 2;
        let colour = COLOURS[i % COLOURS.len()];
        let _ = root.draw(&PathElement::new(
            vec![(70, y), (100, y)],
            colour.stroke_width(3),
        ));
        let _ = root.draw(&Text::new(
            label.to_string(),
            (108, y - 7),
            ("sans-serif", 14).into_font(),
        ));
    }
}

/// The histogram, as SVG text: the share of samples per log-spaced bucket, one step line
/// per curve.
pub fn histogram_svg(title: &str, curves: &[Curve]) -> String {
    let (edges, shares) = binned(curves);
    let ymax = shares.iter().flatten().copied().fold(1.0, f64::max) * 1.1;
    let mut svg = String::new();
    {
        let root = canvas(&mut svg, curves.len());
        let (chart_area, _) = root.split_vertically(CHART_HEIGHT);
        let x_range = edges[0]..edges[edges.len() - 1];
        let keys = log_ticks(x_range.start, x_range.end, WIDTH - 56 - 10 - RIGHT_MARGIN);
        let chart = ChartBuilder::on(&chart_area)
            .caption(title, ("sans-serif", 18))
            .margin(10)
            .margin_right(RIGHT_MARGIN)
            .x_label_area_size(44)
            .y_label_area_size(56)
            .build_cartesian_2d(x_range.log_scale().with_key_points(keys), 0.0..ymax);
        let Ok(mut chart) = chart else {
            return String::new();
        };
        let _ = chart
            .configure_mesh()
            .x_label_formatter(&|x| tick(*x))
            .y_label_formatter(&|y| format!("{y:.0}%"))
            .x_desc("latency (log scale)")
            .y_desc("share of samples")
            .draw();
        // A step line per curve: each bin is a flat segment at its share.
        let lines = shares
            .iter()
            .map(|share| {
                share
                    .iter()
                    .enumerate()
                    .flat_map(|(b, &s)| [(edges[b], s), (edges[b + 1], s)])
                    .collect()
            })
            .collect();
        draw_lines(&mut chart, lines);
        legend(&root, &labels(curves));
        let _ = root.present();
    }
    svg
}

fn labels(curves: &[Curve]) -> Vec<&str> {
    curves.iter().map(|c| c.label.as_str()).collect()
}

/// Draws one line per curve in its colour.
fn draw_lines<
    'a,
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    lines: Vec<Vec<(f64, f64)>>,
) {
    for (i, line) in lines.into_iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let _ = chart.draw_series(LineSeries::new(line, colour.stroke_width(2)));
    }
}

/// The multiples `multipliers` of the powers of ten within `[lo, hi]`.
fn steps(lo: f64, hi: f64, multipliers: &[f64]) -> Vec<f64> {
    let mut keys = Vec::new();
    let mut decade = 10f64.powi(lo.max(1e-9).log10().floor() as i32);
    while decade <= hi {
        keys.extend(
            multipliers
                .iter()
                .map(|m| m * decade)
                .filter(|k| (lo..=hi).contains(k)),
        );
        decade *= 10.0;
    }
    keys
}

/// Axis marks at 1, 2 and 5 times the powers of ten within `[lo, hi]`; every whole multiple
/// when that gives fewer than four (a range within a decade), and at least the two ends.
pub fn one_two_five(lo: f64, hi: f64) -> Vec<f64> {
    let mut keys = steps(lo, hi, &[1.0, 2.0, 5.0]);
    if keys.len() < 4 {
        // Within about a decade: every whole multiple (2, 3, 4, 5 ms), so the axis can be read.
        keys = steps(lo, hi, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]);
    }
    if keys.len() < 2 {
        // Less than a step wide: the ends, rounded to two significant digits.
        let round = |v: f64| {
            let p = 10f64.powi(v.log10().floor() as i32 - 1);
            (v / p).round() * p
        };
        keys = vec![round(lo), round(hi)];
        keys.dedup();
    }
    keys
}

/// The widest a latency tick label is drawn (`500 µs`), with room between labels.
const TICK_PX: u32 = 52;

/// Log-axis ticks for an axis `px` wide: 1-2-5 steps when their labels fit, else the powers of
/// ten alone, else every n-th power of ten.
pub fn log_ticks(lo: f64, hi: f64, px: u32) -> Vec<f64> {
    let room = (px / TICK_PX).max(2) as usize;
    let keys = one_two_five(lo, hi);
    if keys.len() <= room {
        return keys;
    }
    let decades: Vec<f64> = keys
        .iter()
        .copied()
        .filter(|k| (k.log10() - k.log10().round()).abs() < 1e-9)
        .collect();
    let step = decades.len().div_ceil(room).max(1);
    decades.into_iter().step_by(step).collect()
}

/// A tick label for a latency in nanoseconds, with its unit: `500 ns`, `2 µs`, `1.5 ms`.
pub fn tick(ns: f64) -> String {
    let (scale, unit) = if ns >= 1e9 {
        (1e9, "s")
    } else if ns >= 1e6 {
        (1e6, "ms")
    } else if ns >= 1e3 {
        (1e3, "µs")
    } else {
        (1.0, "ns")
    };
    let v = ns / scale;
    let text = if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    };
    format!("{text} {unit}")
}

/// The percentiles marked on a percentile plot, as HdrHistogram's plotter marks them.
pub const PERCENTILE_MARKS: [f64; 6] = [0.0, 50.0, 90.0, 99.0, 99.9, 99.99];

/// The percentile plot, as SVG text: latency against 1/(1−p) on a log axis, marked at
/// [`PERCENTILE_MARKS`], where the tail gets as much room as the body.
pub fn percentile_svg(title: &str, curves: &[Curve]) -> String {
    // x = 1/(1−p) from p = 0 (1) to p = 99.99% (10 000); 40 points per decade.
    let xs: Vec<f64> = (0..=160).map(|i| 10f64.powf(f64::from(i) / 40.0)).collect();
    let lines: Vec<Vec<(f64, f64)>> = curves
        .iter()
        .map(|c| {
            xs.iter()
                .map(|&x| (x, quantile(&c.points, 1.0 - 1.0 / x)))
                .collect()
        })
        .collect();
    let ymax = lines.iter().flatten().map(|p| p.1).fold(1.0, f64::max) * 1.1;
    let marks: Vec<f64> = PERCENTILE_MARKS
        .iter()
        .map(|p| 100.0 / (100.0 - p))
        .collect();
    let mut svg = String::new();
    {
        let root = canvas(&mut svg, curves.len());
        let (chart_area, _) = root.split_vertically(CHART_HEIGHT);
        let chart = ChartBuilder::on(&chart_area)
            .caption(title, ("sans-serif", 18))
            .margin(10)
            .margin_right(RIGHT_MARGIN)
            .x_label_area_size(44)
            .y_label_area_size(72)
            .build_cartesian_2d(
                (1.0..10_000.0).log_scale().with_key_points(marks),
                0.0..ymax,
            );
        let Ok(mut chart) = chart else {
            return String::new();
        };
        let _ = chart
            .configure_mesh()
            .x_desc("percentile")
            .y_desc("latency")
            .x_label_formatter(&|x| percent_label(*x))
            .y_label_formatter(&|y| tick(*y))
            .draw();
        draw_lines(&mut chart, lines);
        legend(&root, &labels(curves));
        let _ = root.present();
    }
    svg
}

/// `50%`, `99.9%` for x = 1/(1−p).
fn percent_label(x: f64) -> String {
    let p = 100.0 - 100.0 / x;
    let text = format!("{p:.2}");
    format!("{}%", text.trim_end_matches('0').trim_end_matches('.'))
}

/// One row of a matrix chart: a configuration and its median and p99 (ns).
#[derive(Debug, Clone)]
pub struct MatrixRow {
    /// the configuration
    pub label: String,
    /// median
    pub p50: u64,
    /// 99th percentile
    pub p99: u64,
}

/// Median and p99 per configuration on one log latency axis (a row each, the median a dot,
/// a line to the p99 a bar): the IPC matrix of `latscope demo`, a lab's rows.
pub fn matrix_svg(title: &str, rows: &[MatrixRow]) -> String {
    let lo = rows
        .iter()
        .map(|r| r.p50.min(r.p99).max(1))
        .min()
        .unwrap_or(1) as f64;
    let hi = rows
        .iter()
        .map(|r| r.p99.max(r.p50).max(1))
        .max()
        .unwrap_or(10) as f64;
    let (lo, hi) = (lo / 1.5, (hi * 1.5).max(lo * 2.0));
    let n = rows.len().max(1);
    let label_px = rows
        .iter()
        .map(|r| r.label.chars().count())
        .max()
        .unwrap_or(8) as u32
        * 7
        + 16;
    let height = 90 + 22 * n as u32 + LEGEND_LINE + 8;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        let _ = root.fill(&WHITE);
        let (chart_area, _) = root.split_vertically(height - LEGEND_LINE - 8);
        let y_area = label_px.min(WIDTH / 2);
        let keys = log_ticks(lo, hi, WIDTH - y_area - 10 - RIGHT_MARGIN);
        let chart = ChartBuilder::on(&chart_area)
            .caption(title, ("sans-serif", 18))
            .margin(10)
            .margin_right(RIGHT_MARGIN)
            .x_label_area_size(44)
            .y_label_area_size(y_area)
            .build_cartesian_2d(
                (lo..hi).log_scale().with_key_points(keys),
                (0..n as i32).into_segmented(),
            );
        let Ok(mut chart) = chart else {
            return String::new();
        };
        // Row i (top first) is the segment n-1-i.
        let row = |i: usize| SegmentValue::CenterOf((n - 1 - i) as i32);
        let label_of = |y: &SegmentValue<i32>| match y {
            SegmentValue::CenterOf(k) if (*k as usize) < n => rows
                .get(n - 1 - *k as usize)
                .map_or(String::new(), |r| r.label.clone()),
            _ => String::new(),
        };
        let _ = chart
            .configure_mesh()
            .x_label_formatter(&|x| tick(*x))
            .y_labels(n)
            .y_label_formatter(&label_of)
            .x_desc("latency (log scale)")
            .disable_y_mesh()
            .draw();
        let (median, tail) = (COLOURS[0], COLOURS[1]);
        let _ = chart.draw_series(rows.iter().enumerate().map(|(i, r)| {
            PathElement::new(
                vec![(r.p50.max(1) as f64, row(i)), (r.p99.max(1) as f64, row(i))],
                RGBColor(150, 150, 150).stroke_width(2),
            )
        }));
        let _ = chart.draw_series(
            rows.iter()
                .enumerate()
                .map(|(i, r)| Circle::new((r.p99.max(1) as f64, row(i)), 4, tail.filled())),
        );
        let _ = chart.draw_series(
            rows.iter()
                .enumerate()
                .map(|(i, r)| Circle::new((r.p50.max(1) as f64, row(i)), 4, median.filled())),
        );
        let top = (height - LEGEND_LINE) as i32;
        for (k, (name, colour)) in [("median (p50)", median), ("p99", tail)]
            .into_iter()
            .enumerate()
        {
            let x = 70 + 160 * k as i32;
            let _ = root.draw(&Circle::new((x, top), 4, colour.filled()));
            let _ = root.draw(&Text::new(
                name,
                (x + 10, top - 7),
                ("sans-serif", 14).into_font(),
            ));
        }
        let _ = root.present();
    }
    svg
}

/// A chart of `f64` against `f64` in the plots' size, its axes' ranges given.
type XyChart<'a, 'b> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// The axes of a time chart ([`time_chart`]).
struct Axes<'d> {
    /// the x range
    x: std::ops::Range<f64>,
    /// the y range (ns)
    y: std::ops::Range<f64>,
    /// the x axis' name
    x_desc: &'d str,
    /// the y axis' name, if it has one
    y_desc: Option<&'d str>,
    /// whether x is in ns (ticks as durations), not seconds
    x_ns: bool,
    /// whether the series drawn have a legend, put on the chart on a pale background
    legend: bool,
}

/// The chart every time plot shares (scatter, stacked, lines): the caption, margins, a mesh
/// whose y ticks are durations, then what `draw` puts on it, and the series' legend; empty
/// where the ranges cannot be drawn.
fn time_chart(caption: &str, axes: Axes<'_>, draw: impl FnOnce(&mut XyChart<'_, '_>)) -> String {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, CHART_HEIGHT)).into_drawing_area();
        let _ = root.fill(&WHITE);
        let chart = ChartBuilder::on(&root)
            .caption(caption, ("sans-serif", 18))
            .margin(10)
            .margin_right(RIGHT_MARGIN)
            .x_label_area_size(44)
            .y_label_area_size(72)
            .build_cartesian_2d(axes.x, axes.y);
        let Ok(mut chart) = chart else {
            return String::new();
        };
        let mut mesh = chart.configure_mesh();
        mesh.x_desc(axes.x_desc).y_label_formatter(&|y| tick(*y));
        if let Some(y_desc) = axes.y_desc {
            mesh.y_desc(y_desc);
        }
        if axes.x_ns {
            mesh.x_label_formatter(&|x| tick(*x));
        }
        let _ = mesh.draw();
        draw(&mut chart);
        if axes.legend {
            let _ = chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw();
        }
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
        .map(|&(t, l)| ((t - t0) as f64 / 1e9, l as f64))
        .collect();
    let xmax = xy.iter().map(|p| p.0).fold(1e-6, f64::max) * 1.02;
    let ymax = xy.iter().map(|p| p.1).fold(1.0, f64::max) * 1.1;
    let caption = if step > 1 {
        format!("{title} (every {step}th of {} spans)", points.len())
    } else {
        format!("{title} ({} spans)", points.len())
    };
    let axes = Axes {
        x: 0.0..xmax,
        y: 0.0..ymax,
        x_desc: "start (s from the first span)",
        y_desc: Some("latency"),
        x_ns: false,
        legend: false,
    };
    time_chart(&caption, axes, |chart| {
        let dots = xy
            .iter()
            .map(|&p| Circle::new(p, 2, COLOURS[0].mix(0.6).filled()));
        let _ = chart.draw_series(dots);
    })
}

/// Frames shown in a stacked chart, at most (every n-th past it).
pub const STACK_MAX: usize = 600;

/// One bar per frame, its stages stacked in their order along the frame's path (`names`, one
/// colour each), at the frame's commit (`frames`: commit ns, then each stage's ns).
pub fn stacked_svg(title: &str, names: &[&str], frames: &[(u64, Vec<u64>)]) -> String {
    let step = frames.len().div_ceil(STACK_MAX).max(1);
    let t0 = frames.iter().map(|f| f.0).min().unwrap_or(0);
    let shown: Vec<&(u64, Vec<u64>)> = frames.iter().step_by(step).collect();
    let x = |t: u64| (t - t0) as f64 / 1e9;
    let xmax = shown.iter().map(|f| x(f.0)).fold(1e-6, f64::max) * 1.02;
    let ymax = shown
        .iter()
        .map(|f| f.1.iter().sum::<u64>() as f64)
        .fold(1.0, f64::max)
        * 1.1;
    // a bar's width: the usual distance between frames, less a gap
    let width = if shown.len() > 1 {
        xmax / shown.len() as f64 * 0.8
    } else {
        xmax * 0.01
    };
    let caption = match step {
        1 => format!("{title} ({} frames)", frames.len()),
        _ => format!("{title} (every {step}th of {} frames)", frames.len()),
    };
    let axes = Axes {
        x: 0.0..xmax + width,
        y: 0.0..ymax,
        x_desc: "commit (s from the first frame)",
        y_desc: Some("time in each stage"),
        x_ns: false,
        legend: true,
    };
    time_chart(&caption, axes, |chart| {
        for (k, name) in names.iter().enumerate() {
            let colour = COLOURS[k % COLOURS.len()];
            let bars = shown.iter().map(|f| {
                let below: u64 = f.1[..k].iter().sum();
                let top = below + f.1[k];
                Rectangle::new(
                    [(x(f.0), below as f64), (x(f.0) + width, top as f64)],
                    colour.filled(),
                )
            });
            if let Ok(series) = chart.draw_series(bars) {
                series.label(*name).legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 10, y + 5)], colour.filled())
                });
            }
        }
    })
}

/// Lines of y (ns) against x (ns) on one chart: `lines` as (name, points sorted by x), one
/// colour each, a marker at each point; `x_desc` names the axis.
pub fn lines_svg(title: &str, x_desc: &str, lines: &[(String, Vec<(u64, f64)>)]) -> String {
    let points = || lines.iter().flat_map(|l| l.1.iter());
    let xmax = points().map(|p| p.0 as f64).fold(1.0, f64::max) * 1.05;
    let ymax = points().map(|p| p.1).fold(1.0, f64::max) * 1.1;
    let axes = Axes {
        x: 0.0..xmax,
        y: 0.0..ymax,
        x_desc,
        y_desc: None,
        x_ns: true,
        legend: true,
    };
    time_chart(title, axes, |chart| {
        for (k, (name, line)) in lines.iter().enumerate() {
            let colour = COLOURS[k % COLOURS.len()];
            let xy: Vec<(f64, f64)> = line.iter().map(|&(x, y)| (x as f64, y)).collect();
            if let Ok(series) =
                chart.draw_series(LineSeries::new(xy.clone(), colour.stroke_width(2)))
            {
                series
                    .label(name.as_str())
                    .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], colour));
            }
            let _ = chart.draw_series(xy.into_iter().map(|p| Circle::new(p, 3, colour.filled())));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stacked_chart_has_a_bar_per_frame_and_stage_and_names_its_stages() {
        let frames: Vec<(u64, Vec<u64>)> = (0..20)
            .map(|i| {
                (
                    1_000_000_000 + i * 16_000_000,
                    vec![50_000, 40_000_000, 80_000],
                )
            })
            .collect();
        let svg = stacked_svg("frames", &["a_stage", "b_stage", "c_stage"], &frames);
        let labels: Vec<String> = texts(&svg).into_iter().map(|t| t.3).collect();
        for name in ["a_stage", "b_stage", "c_stage"] {
            assert!(labels.contains(&name.to_string()), "{labels:?}");
        }
        // 20 frames x 3 stages, 3 legend marks, the chart's background
        assert!(
            svg.matches("<rect").count() >= 63,
            "{}",
            svg.matches("<rect").count()
        );
    }

    #[test]
    fn the_scatter_has_one_dot_per_span_and_its_axes() {
        let points: Vec<(u64, u64)> = (0..50)
            .map(|i| (1_000_000_000 + i * 1_000_000, 5_000 + i))
            .collect();
        let svg = scatter_svg("x", &points);
        assert_eq!(svg.matches("<circle").count(), 50);
        let labels: Vec<String> = texts(&svg).into_iter().map(|t| t.3).collect();
        assert!(labels.contains(&"latency".to_string()), "{labels:?}");
        assert!(
            labels.contains(&"start (s from the first span)".to_string()),
            "{labels:?}"
        );
        let many: Vec<(u64, u64)> = (0..(SCATTER_MAX as u64 * 3)).map(|i| (i, i)).collect();
        assert_eq!(
            scatter_svg("y", &many).matches("<circle").count(),
            SCATTER_MAX
        );
    }

    fn curves(n: usize) -> Vec<Curve> {
        (0..n)
            .map(|k| Curve {
                label: if k == 1 {
                    "after <b>".into()
                } else {
                    format!("run {k}")
                },
                points: (1..=100)
                    .map(|i| (f64::from(i) * 1_000.0 * (k + 1) as f64, 10))
                    .collect(),
            })
            .collect()
    }

    /// Every `<text>` element: (x, y, anchor, content).
    fn texts(svg: &str) -> Vec<(f64, f64, String, String)> {
        let attr = |tag: &str, name: &str| {
            tag.split(&format!(" {name}=\""))
                .nth(1)
                .and_then(|r| r.split('"').next())
                .map(str::to_string)
        };
        svg.split("<text")
            .skip(1)
            .map(|t| {
                let (tag, rest) = t.split_once('>').unwrap();
                let content = rest.split("</text>").next().unwrap().trim().to_string();
                let num = |n: &str| attr(tag, n).and_then(|v| v.parse().ok()).unwrap_or(0.0);
                (
                    num("x"),
                    num("y"),
                    attr(tag, "text-anchor").unwrap_or_default(),
                    content,
                )
            })
            .collect()
    }

    fn width(svg: &str) -> f64 {
        svg.split(" width=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    }

    /// No text runs past the picture's right edge (at ~0.6 em per character).
    fn nothing_cut_off(svg: &str) {
        let w = width(svg);
        for (x, _, anchor, content) in texts(svg) {
            let len = content.chars().count() as f64 * 8.0;
            let right = match anchor.as_str() {
                "end" => x,
                "middle" => x + len / 2.0,
                _ => x + len,
            };
            assert!(right <= w, "{content:?} ends at {right} of {w}");
            assert!(x >= 0.0, "{content:?} starts at {x}");
        }
    }

    #[test]
    fn log_axes_have_one_two_five_ticks_with_their_unit() {
        assert_eq!(
            one_two_five(800.0, 12_000.0),
            vec![1_000.0, 2_000.0, 5_000.0, 10_000.0]
        );
        assert_eq!(one_two_five(2_100.0, 4_900.0), vec![3_000.0, 4_000.0]);
        assert_eq!(
            one_two_five(1_800.0, 5_500.0),
            vec![2_000.0, 3_000.0, 4_000.0, 5_000.0]
        );
        assert_eq!(one_two_five(2_100.0, 2_900.0), vec![2_100.0, 2_900.0]);
        assert_eq!(tick(500.0), "500 ns");
        assert_eq!(tick(2_000.0), "2 µs");
        assert_eq!(tick(1_500_000.0), "1.5 ms");
        assert_eq!(tick(20e9), "20 s");
        let labels: Vec<String> = texts(&histogram_svg("h", &curves(1)))
            .into_iter()
            .map(|t| t.3)
            .collect();
        for want in ["1 µs", "2 µs", "5 µs", "10 µs", "20 µs", "50 µs", "100 µs"] {
            assert!(labels.iter().any(|l| l == want), "no {want} in {labels:?}");
        }
    }

    #[test]
    fn ticks_thin_to_powers_of_ten_when_their_labels_would_overlap() {
        assert_eq!(
            log_ticks(800.0, 12_000.0, 700),
            vec![1_000.0, 2_000.0, 5_000.0, 10_000.0]
        );
        assert_eq!(log_ticks(100.0, 5e6, 430), vec![100.0, 1e3, 1e4, 1e5, 1e6]);
        assert_eq!(log_ticks(1.0, 1e9, 200), vec![1.0, 1e4, 1e8]);
    }

    #[test]
    fn the_percentile_plot_is_marked_at_the_usual_percentiles() {
        let labels: Vec<String> = texts(&percentile_svg("p", &curves(2)))
            .into_iter()
            .map(|t| t.3)
            .collect();
        for want in ["50%", "90%", "99%", "99.9%", "99.99%"] {
            assert!(labels.iter().any(|l| l == want), "no {want} in {labels:?}");
        }
        assert!(labels.iter().any(|l| l.ends_with(" µs")), "{labels:?}");
    }

    #[test]
    fn the_legend_lies_below_the_data_and_inputs_are_escaped() {
        for svg in [
            histogram_svg("h", &curves(3)),
            percentile_svg("p", &curves(3)),
        ] {
            let legend: Vec<_> = texts(&svg)
                .into_iter()
                .filter(|t| t.3.starts_with("run ") || t.3.starts_with("after"))
                .collect();
            assert_eq!(legend.len(), 3, "{legend:?}");
            for (_, y, _, label) in legend {
                assert!(
                    y > f64::from(CHART_HEIGHT),
                    "{label} at y {y}, inside the chart"
                );
            }
            assert!(svg.contains("after &lt;b&gt;") && !svg.contains("after <b>"));
        }
    }

    #[test]
    fn eight_results_get_eight_colours() {
        let svg = histogram_svg("h", &curves(8));
        for c in COLOURS {
            let hex = format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2);
            assert_eq!(
                svg.matches(&format!("stroke=\"{hex}\" stroke-width=\"2\""))
                    .count(),
                1,
                "{hex}"
            );
            assert_eq!(
                svg.matches(&format!("stroke=\"{hex}\" stroke-width=\"3\""))
                    .count(),
                1,
                "{hex} legend"
            );
        }
    }

    #[test]
    fn no_label_is_cut_off_at_the_right_edge() {
        nothing_cut_off(&histogram_svg("commit_to_release", &curves(2)));
        nothing_cut_off(&percentile_svg("commit_to_release", &curves(2)));
        let rows: Vec<MatrixRow> = (0..6)
            .map(|i| MatrixRow {
                label: format!("unix-stream process ping-pong {i} KiB"),
                p50: 5_000 << i,
                p99: 40_000 << i,
            })
            .collect();
        let svg = matrix_svg("IPC", &rows);
        nothing_cut_off(&svg);
        assert!(svg.contains("viewBox"), "the page cannot scale it");
    }

    #[test]
    fn the_matrix_has_a_labelled_row_with_a_median_and_a_p99_per_configuration() {
        let rows = vec![
            MatrixRow {
                label: "inproc".into(),
                p50: 80,
                p99: 200,
            },
            MatrixRow {
                label: "dbus process".into(),
                p50: 60_000,
                p99: 250_000,
            },
        ];
        let svg = matrix_svg("IPC", &rows);
        let labels: Vec<String> = texts(&svg).into_iter().map(|t| t.3).collect();
        assert!(
            labels.contains(&"inproc".to_string()) && labels.contains(&"dbus process".to_string()),
            "{labels:?}"
        );
        // Two dots a row and one in the legend for each of median and p99.
        assert_eq!(svg.matches("<circle").count(), 6);
        for want in ["100 ns", "1 µs", "10 µs", "100 µs"] {
            assert!(labels.iter().any(|l| l == want), "no {want} in {labels:?}");
        }
    }

    #[test]
    fn binned_shares_sum_to_one_hundred_percent() {
        let (_, shares) = binned(&curves(2));
        for s in shares {
            assert!((s.iter().sum::<f64>() - 100.0).abs() < 1e-9);
        }
        assert_eq!(quantile(&curves(1)[0].points, 0.5), 50_000.0);
    }
}
