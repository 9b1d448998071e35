//! One self-contained HTML report: per span or metric, the statistics of every result, its
//! histogram and percentile plots inline as SVG, and the comparison when two results are
//! given. No scripts, no external files, no fonts: it opens offline. Every string that comes
//! from an input is escaped.

use std::fmt::Write;

use crate::doc::Item;
use crate::doc::compare::CompareDoc;
use crate::report::plot::{Curve, MatrixRow, histogram_svg, matrix_svg, percentile_svg};
use crate::stats::Unit;

pub use super::format::html as escape;

const STYLE: &str = "body{font-family:sans-serif;margin:2em;max-width:1100px;color:#222}\
table{border-collapse:collapse;margin:0.5em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}\
th:first-child,td:first-child{text-align:left}td+td{white-space:nowrap}.verdict{font-weight:bold}.mixed,.slower{color:#b00}\
.faster{color:#070}.plots{display:flex;flex-wrap:wrap;gap:8px}.plots svg{max-width:100%;height:auto}\
.cmd{background:#f4f4f4;padding:6px 10px;font-family:monospace;white-space:pre-wrap}.missing{color:#8a5a00}\
nav a{margin-right:1em}";

/// The report for `results` (file name, items), with `comparison` of the first two if given.
pub fn report(
    results: &[(String, Vec<Item>)],
    comparison: Option<&CompareDoc>,
    unit: Unit,
) -> String {
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>latscope report</title><style>{STYLE}</style></head><body>\n<h1>latscope report</h1>\n<ul>"
    );
    for (file, items) in results {
        let _ = write!(out, "<li>{} ({} items)</li>", escape(file), items.len());
    }
    out.push_str("</ul>\n");
    let mut labels: Vec<String> = Vec::new();
    for (_, items) in results {
        for item in items {
            if !labels.contains(&item.label()) {
                labels.push(item.label());
            }
        }
    }
    for label in labels {
        section(&mut out, &label, results, comparison, unit);
    }
    out.push_str("</body></html>\n");
    out
}

fn section(
    out: &mut String,
    label: &str,
    results: &[(String, Vec<Item>)],
    comparison: Option<&CompareDoc>,
    unit: Unit,
) {
    let _ = write!(
        out,
        "<section><h2>{}</h2>\n<table><tr><th>result</th><th>count</th><th>p50</th><th>p90</th><th>p99</th><th>max</th><th>mean</th></tr>",
        escape(label)
    );
    let n = |v: f64| escape(&unit.format(v.round().max(0.0) as u64));
    let mut curves = Vec::new();
    for (file, items) in results {
        let Some(item) = items.iter().find(|i| i.label() == label) else {
            continue;
        };
        let f = item.summary;
        let u = |v: Option<u64>| v.map_or("–".to_string(), |v| escape(&unit.format(v)));
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(file),
            f.count,
            u(f.p50),
            u(f.p90),
            u(f.p99),
            u(f.max),
            f.mean.map_or("–".to_string(), n)
        );
        curves.push(Curve {
            label: file.clone(),
            points: item.points().to_vec(),
        });
    }
    out.push_str("</table>\n");
    let mut title = label.to_string();
    if let Some(c) = comparison.and_then(|c| c.items.iter().find(|i| i.label() == label)) {
        let verdict = c.change.verdict.name();
        let pct = |p: Option<f64>| p.map_or("–".to_string(), |p| format!("{p:+.1}%"));
        let _ = writeln!(
            out,
            "<p>Comparison: <span class=\"verdict {verdict}\">{verdict}</span> ({}): p50 {}, p99 {}. {}</p>",
            c.change.basis.name(),
            pct(c.change_pct.p50),
            pct(c.change_pct.p99),
            escape(&c.change.reason)
        );
        // Before and after on one axis, with the verdict in the title.
        title = format!(
            "{label}: {verdict} (p50 {}, p99 {})",
            pct(c.change_pct.p50),
            pct(c.change_pct.p99)
        );
    }
    if curves.iter().any(|c| !c.points.is_empty()) {
        // The SVG backend escapes the labels it writes.
        let _ = writeln!(
            out,
            "<div class=\"plots\">{}{}</div>",
            histogram_svg(&title, &curves),
            percentile_svg(&title, &curves)
        );
    }
    out.push_str("</section>\n");
}

/// Adds to a page made by [`report`] the seed's critique of `gem_exec_nop` in one picture per
/// `lab gpu` workload swept over `--spacing`: the time per batch (wall time ÷ requests) and each
/// request's submit → start (p50) against the spacing, which move apart as the queue coalesces.
/// The page is unchanged where no workload has two spacings.
pub fn with_spacing_views(
    mut page: String,
    doc: &crate::doc::lab_gpu::LabGpuDoc,
    unit: Unit,
) -> String {
    let sweeps = spacing_sweeps(doc);
    if sweeps.is_empty() {
        return page;
    }
    let mut out = String::from(
        "<section><h2>Time per batch against submit → start, by spacing</h2>\n<p>Time per batch is the run's wall time ÷ requests (what <code>gem_exec_nop</code> reports); submit → start is each request's own wait (p50).</p>\n",
    );
    for (workload, rows) in sweeps {
        let _ = write!(
            out,
            "<h3>{}</h3>\n<table><tr><th>spacing</th><th>time per batch</th><th>submit → start p50</th><th>total p50</th></tr>",
            escape(&workload)
        );
        let mut lines = vec![
            ("time per batch".to_string(), Vec::new()),
            ("submit_to_start p50".to_string(), Vec::new()),
        ];
        for row in rows {
            let p50 = |name: &str| {
                row.stages
                    .iter()
                    .find(|s| s.name == name)
                    .and_then(|s| s.dist.summary.p50)
            };
            let ns = |v: Option<u64>| v.map_or("–".to_string(), |v| escape(&unit.format(v)));
            let per_batch = row.per_batch_ns.round().max(0.0) as u64;
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&unit.format(row.config.spacing_ns)),
                ns(Some(per_batch)),
                ns(p50("submit_to_start")),
                ns(p50("total"))
            );
            lines[0].1.push((row.config.spacing_ns, row.per_batch_ns));
            if let Some(v) = p50("submit_to_start") {
                lines[1].1.push((row.config.spacing_ns, v as f64));
            }
        }
        out.push_str("</table>\n");
        let title = format!("{workload}: per batch vs per request");
        let _ = writeln!(
            out,
            "<div class=\"plots\">{}</div>",
            super::plot::lines_svg(&title, "spacing between submissions", &lines)
        );
    }
    out.push_str("</section>\n");
    let at = page.rfind("</body>").unwrap_or(page.len());
    page.insert_str(at, &out);
    page
}

/// The rows of each workload (a configuration but for its spacing) that was run at two
/// spacings or more, in spacing order, named by the rest of its configuration.
fn spacing_sweeps(
    doc: &crate::doc::lab_gpu::LabGpuDoc,
) -> Vec<(String, Vec<&crate::doc::lab_gpu::GpuRow>)> {
    let mut sweeps: Vec<(String, Vec<&crate::doc::lab_gpu::GpuRow>)> = Vec::new();
    for row in &doc.rows {
        let c = &row.config;
        let workload = format!(
            "pattern={} streams={} burst={} kernel={} launch={} sync={}",
            c.pattern, c.streams, c.burst, c.kernel, c.launch, c.sync
        );
        match sweeps.iter_mut().find(|s| s.0 == workload) {
            Some(s) => s.1.push(row),
            None => sweeps.push((workload, vec![row])),
        }
    }
    for s in &mut sweeps {
        s.1.sort_by_key(|r| r.config.spacing_ns);
    }
    sweeps.retain(|s| {
        let first = s.1[0].config.spacing_ns;
        s.1.iter().any(|r| r.config.spacing_ns != first)
    });
    sweeps
}

/// Adds a latency-vs-time section per series of `doc`'s kept spans (`latscope spans
/// --max-spans N`) to a page made by [`report`]; the page is unchanged without them.
pub fn with_time_views(page: String, doc: &crate::doc::spans::SpansDoc) -> String {
    if doc.records.is_empty() {
        return page;
    }
    let mut series: Vec<(String, Vec<(u64, u64)>)> = Vec::new();
    for r in &doc.records {
        let label = crate::doc::label(&r.span, r.group.as_deref());
        match series.iter_mut().find(|(l, _)| *l == label) {
            Some((_, points)) => points.push((r.start_ns, r.latency_ns)),
            None => series.push((label, vec![(r.start_ns, r.latency_ns)])),
        }
    }
    let mut out = String::from("<section><h2>latency against time</h2>\n");
    if doc.records_dropped > 0 {
        let _ = writeln!(
            out,
            "<p>the first {} spans ({} more were not kept: raise --max-spans)</p>",
            doc.records.len(),
            doc.records_dropped
        );
    }
    out.push_str("<div class=\"plots\">");
    if doc.frames.is_some() {
        out.push_str(&frames_stacked(doc));
    }
    for (label, points) in &series {
        out.push_str(&super::plot::scatter_svg(label, points));
    }
    out.push_str("</div></section>\n");
    match page.rfind("</body>") {
        Some(at) => format!("{}{out}{}", &page[..at], &page[at..]),
        None => page + &out,
    }
}

/// The stages on each frame's path to `presented` (`latscope frames`), stacked per frame: they
/// sum to its `commit_to_presented`. A frame's records are found by where each stage starts: the
/// next one starts where the one before it ends.
fn frames_stacked(doc: &crate::doc::spans::SpansDoc) -> String {
    const PATH: [&str; 3] = [
        "commit_to_compositor",
        "compositor_to_presented",
        "presented_to_client",
    ];
    let of = |name: &str| -> std::collections::HashMap<(Option<&str>, u64), u64> {
        doc.records
            .iter()
            .filter(|r| r.span == name)
            .map(|r| ((r.group.as_deref(), r.start_ns), r.latency_ns))
            .collect()
    };
    let (to_compositor, to_presented, to_client) = (of(PATH[0]), of(PATH[1]), of(PATH[2]));
    let mut frames = Vec::new();
    for r in doc.records.iter().filter(|r| r.span == PATH[0]) {
        let group = r.group.as_deref();
        let Some(&a) = to_compositor.get(&(group, r.start_ns)) else {
            continue;
        };
        let Some(&b) = to_presented.get(&(group, r.start_ns + a)) else {
            continue;
        };
        let Some(&c) = to_client.get(&(group, r.start_ns + a + b)) else {
            continue;
        };
        frames.push((r.start_ns, vec![a, b, c]));
    }
    if frames.is_empty() {
        return String::new();
    }
    super::plot::stacked_svg("each frame's path to presented", &PATH, &frames)
}

/// What a section of a [`page`] shows.
#[derive(Debug, Clone)]
pub enum Body {
    /// configurations of a lab: a table and their median and p99 on one log axis
    Matrix(Vec<Item>),
    /// the spans of one result: a table, a histogram and a percentile plot per span
    Spans(Vec<Item>),
    /// nothing ran: why, and what to install
    Missing(String),
}

/// One section of a [`page`]: what it measured, how to measure it on your own system, and
/// what it found.
#[derive(Debug, Clone)]
pub struct Section {
    /// the anchor (`ipc`), also the section's `id`
    pub id: String,
    /// the heading
    pub title: String,
    /// what it measures, one or two sentences
    pub about: String,
    /// the commands that reproduce it on the reader's system
    pub commands: Vec<String>,
    /// what it found
    pub body: Body,
}

/// A page of sections (`latscope demo`'s report): a table of contents, then each section
/// with its commands.
pub fn page(title: &str, sections: &[Section], unit: Unit) -> String {
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{0}</title><style>{STYLE}</style></head><body>\n<h1>{0}</h1>\n<nav>",
        escape(title)
    );
    for s in sections {
        let _ = write!(
            out,
            "<a href=\"#{}\">{}</a>",
            escape(&s.id),
            escape(&s.title)
        );
    }
    out.push_str("</nav>\n");
    for s in sections {
        let _ = write!(
            out,
            "<section id=\"{}\" class=\"part\"><h2>{}</h2>\n<p>{}</p>\n<p>On your system:</p><div class=\"cmd\">{}</div>\n",
            escape(&s.id),
            escape(&s.title),
            escape(&s.about),
            s.commands
                .iter()
                .map(|c| escape(c))
                .collect::<Vec<_>>()
                .join("\n")
        );
        match &s.body {
            Body::Missing(why) => {
                let _ = writeln!(
                    out,
                    "<p class=\"missing\">Did not run here: {}</p>",
                    escape(why)
                );
            }
            Body::Matrix(items) => matrix(&mut out, &s.title, items, unit),
            Body::Spans(items) => {
                let results = [("this run".to_string(), items.clone())];
                let mut labels: Vec<String> = Vec::new();
                for item in items {
                    if !labels.contains(&item.label()) {
                        labels.push(item.label());
                    }
                }
                for label in labels {
                    section(&mut out, &label, &results, None, unit);
                }
            }
        }
        out.push_str("</section>\n");
    }
    out.push_str("</body></html>\n");
    out
}

/// A lab's configurations: a table of their statistics and their median and p99 on one axis.
fn matrix(out: &mut String, title: &str, items: &[Item], unit: Unit) {
    out.push_str("<table><tr><th>configuration</th><th>count</th><th>p50</th><th>p90</th><th>p99</th><th>max</th></tr>");
    let u = |v: Option<u64>| v.map_or("–".to_string(), |v| escape(&unit.format(v)));
    let mut rows = Vec::new();
    for item in items {
        let f = item.summary;
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&item.label()),
            f.count,
            u(f.p50),
            u(f.p90),
            u(f.p99),
            u(f.max)
        );
        if let (Some(p50), Some(p99)) = (f.p50, f.p99) {
            rows.push(MatrixRow {
                label: item.label(),
                p50,
                p99,
            });
        }
    }
    out.push_str("</table>\n");
    if !rows.is_empty() {
        let _ = writeln!(
            out,
            "<div class=\"plots\">{}</div>",
            matrix_svg(&format!("{title}: median and p99"), &rows)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doc::{Data, Summary};

    #[test]
    fn input_strings_are_escaped_everywhere() {
        let item = Item {
            name: "<script>alert(1)</script>".into(),
            group: Some("\"quoted\" & 'single'".into()),
            summary: Summary::of_points(&[(1000.0, 1), (2000.0, 1)]),
            data: Data::Samples(vec![(1000.0, 1), (2000.0, 1)]),
        };
        let html = report(&[("<b>file</b>.json".into(), vec![item])], None, Unit::Us);
        assert!(
            !html.contains("<script>"),
            "an input's <script> reached the page"
        );
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(html.contains("&lt;b&gt;file&lt;/b&gt;.json"));
        assert!(html.contains("&quot;quoted&quot; &amp; &#39;single&#39;"));
        assert!(
            !html.contains("<link") && !html.contains("src=\"http"),
            "the report must be self-contained"
        );
        assert_eq!(html.matches("<svg").count(), 2);
    }
}
