//! Individual spans of a live session (`latscope live --record-spans`): the spans the program
//! prints (see [`super::program`]) kept the way `latscope spans --max-spans` keeps them, so a
//! saved live result feeds the same exports and time view as a trace's.
//!
//! The program prints the first N spans of each span and every new maximum of a group; here
//! [`Kept`] keeps the first `max` of them (all spans, in the order they arrive) and [`Slowest`]
//! the slowest of each series. How many spans were not kept is known exactly from the in-kernel
//! histograms (their count minus the records), whatever the perf buffer lost.

use crate::doc::spans::{SpanRecord, SpansDoc};
use crate::span::{Group, Kept, SeriesKey, Slow, Slowest, SpanSink};

use super::output::SpanLine;

/// The slowest spans listed per series, as `latscope spans` lists by default (the labs keep as
/// many).
pub const SLOWEST: usize = 5;

/// Collects printed spans.
#[derive(Debug, Clone)]
pub struct Recorder {
    kept: Kept,
    slowest: Slowest,
    groups: Vec<String>,
    /// lines bpftrace reported lost (its perf buffer was full)
    pub lost: u64,
}

impl Recorder {
    /// Keeps at most `max` spans (and the [`SLOWEST`] of each series besides).
    pub fn new(max: usize) -> Recorder {
        Recorder {
            kept: Kept::new(max),
            slowest: Slowest::new(SLOWEST),
            groups: Vec::new(),
            lost: 0,
        }
    }

    /// One printed span.
    pub fn span(&mut self, line: SpanLine) {
        let group = match line.group {
            None => Group::All,
            Some(label) => {
                let i = match self.groups.iter().position(|g| *g == label) {
                    Some(i) => i,
                    None => {
                        self.groups.push(label);
                        self.groups.len() - 1
                    }
                };
                Group::Label(i as u32)
            }
        };
        let key = SeriesKey {
            span: line.index,
            side: None,
            group,
        };
        self.kept.sample(&key, line.start_ns, line.latency_ns);
        self.slowest.sample(&key, line.start_ns, line.latency_ns);
    }

    /// Puts the kept spans into `doc` (whose `spans` are already filled from the histograms),
    /// naming span `i` `names[i]`; returns a warning when spans were lost on the way.
    pub fn fill(self, doc: &mut SpansDoc, names: &[String]) -> Option<String> {
        let record = |s: &Slow| SpanRecord {
            span: names.get(s.key.span).cloned().unwrap_or_default(),
            group: match s.key.group {
                Group::Label(i) => self.groups.get(i as usize).cloned(),
                _ => None,
            },
            start_ns: s.start_ns,
            latency_ns: s.latency_ns,
            frame: None,
        };
        doc.slowest = self.slowest.sorted().iter().map(record).collect();
        // bpftrace drains its per-CPU buffers one CPU at a time, so a thread that moved between
        // CPUs has its spans printed out of order: put them back in the order they ended.
        let mut kept = self.kept.spans.clone();
        kept.sort_by_key(|s| (s.start_ns.saturating_add(s.latency_ns), s.start_ns));
        doc.records = kept.iter().map(record).collect();
        let total: u64 = doc.spans.iter().map(|s| s.latency.summary.count).sum();
        doc.records_dropped = total.saturating_sub(doc.records.len() as u64);
        (self.lost > 0).then(|| {
            format!(
                "bpftrace lost {} printed spans (its perf buffer was full): the histograms are exact, the kept spans are not all of the first ones",
                self.lost
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doc::Latency;
    use crate::doc::spans::{Counters, Series, Source};
    use crate::stats::loglinear::Bucketed;

    fn line(index: usize, start_ns: u64, latency_ns: u64, group: Option<&str>) -> SpanLine {
        SpanLine {
            index,
            start_ns,
            latency_ns,
            group: group.map(str::to_string),
        }
    }

    fn doc_with_counts(counts: &[u64]) -> SpansDoc {
        let mut doc = SpansDoc::new(Source::Live);
        for (i, &n) in counts.iter().enumerate() {
            let mut b = Bucketed::default();
            (0..n).for_each(|v| b.record(v + 1));
            doc.spans.push(Series {
                name: format!("s{i}"),
                side: None,
                by: None,
                group: None,
                latency: Latency::of_bucketed(&b),
                counters: Counters::default(),
            });
        }
        doc
    }

    #[test]
    fn the_first_spans_become_records_in_end_order_and_the_rest_are_counted_from_the_histograms() {
        let mut r = Recorder::new(2);
        r.span(line(1, 150, 9, None));
        r.span(line(0, 100, 5, Some("42")));
        r.span(line(0, 200, 30, Some("42")));
        let mut doc = doc_with_counts(&[4, 3]);
        let names = ["s0".to_string(), "s1".to_string()];
        assert_eq!(r.fill(&mut doc, &names), None);
        let kept: Vec<(&str, Option<&str>, u64, u64)> = doc
            .records
            .iter()
            .map(|s| {
                (
                    s.span.as_str(),
                    s.group.as_deref(),
                    s.start_ns,
                    s.latency_ns,
                )
            })
            .collect();
        assert_eq!(kept, [("s0", Some("42"), 100, 5), ("s1", None, 150, 9)]);
        // 7 spans in the histograms, 2 kept.
        assert_eq!(doc.records_dropped, 5);
        // The slowest of every series, including the span past the limit.
        assert_eq!(doc.slowest[0].latency_ns, 30);
        assert_eq!(doc.slowest.len(), 3);
    }

    #[test]
    fn lost_lines_are_a_warning() {
        let mut r = Recorder::new(10);
        r.lost = 3;
        let mut doc = doc_with_counts(&[1]);
        let warning = r.fill(&mut doc, &["s0".to_string()]).unwrap();
        assert!(warning.contains("lost 3 printed spans"), "{warning}");
    }
}
