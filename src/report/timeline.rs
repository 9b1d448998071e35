//! The individual spans of any result that keeps them, for timeline exports
//! (`latscope export --to chrome-json|perfetto`) and the report's latency-against-time view:
//! a `spans` document's records (else its slowest), and the labs' per-message records
//! (`--max-spans N`), each lab row a group so that every row × series gets its own track.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::doc::Document;
use crate::doc::spans::{Source, SpanRecord, SpansDoc};

/// Kept spans and where they came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timeline {
    /// the process name shown by timeline viewers (`latscope lab ipc`, ...)
    pub process: String,
    /// the spans; `group` names the lab row
    pub spans: Vec<SpanRecord>,
    /// spans measured but not kept
    pub dropped: u64,
}

impl Timeline {
    /// A `spans` document holding these spans as records (for the report's time view).
    pub fn spans_doc(&self) -> SpansDoc {
        let mut doc = SpansDoc::new(Source::Trace);
        doc.records = self.spans.clone();
        doc.records_dropped = self.dropped;
        doc
    }
}

/// The lanes of one series in a timeline export: each span goes to the lowest-numbered lane
/// free at its start (its last span ended by then), or to a new lane when none is. Spans must
/// come in start order. A heap of busy lanes by their end and a heap of free lane numbers make
/// it O(log lanes) a span: the linear search it replaces took 11 s for 400,000 spans over
/// 2,000 lanes.
#[derive(Debug, Default)]
pub struct Lanes {
    busy: BinaryHeap<Reverse<(u64, usize)>>,
    free: BinaryHeap<Reverse<usize>>,
    count: usize,
}

impl Lanes {
    /// The lane of a span from `start` to `end`, and whether the lane is new.
    pub fn place(&mut self, start: u64, end: u64) -> (usize, bool) {
        while let Some(&Reverse((e, lane))) = self.busy.peek() {
            if e > start {
                break;
            }
            self.busy.pop();
            self.free.push(Reverse(lane));
        }
        let (lane, new) = match self.free.pop() {
            Some(Reverse(lane)) => (lane, false),
            None => {
                self.count += 1;
                (self.count - 1, true)
            }
        };
        self.busy.push(Reverse((end, lane)));
        (lane, new)
    }

    /// How many lanes there are.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether no span was placed.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

fn lab<'a>(
    process: &str,
    command: &str,
    rows: impl Iterator<Item = (String, &'a crate::doc::lab::Records)>,
) -> Result<Timeline, String> {
    let mut spans = Vec::new();
    let mut dropped = 0;
    for (label, kept) in rows {
        spans.extend(kept.spans(&label));
        dropped = kept.records_dropped.saturating_add(dropped);
    }
    if spans.is_empty() {
        return Err(format!(
            "this {process} result keeps no individual messages: make it with `{command} --max-spans N -f json` (or --save)"
        ));
    }
    Ok(Timeline {
        process: format!("latscope {process}"),
        spans,
        dropped,
    })
}

/// The kept spans of `doc`, or why it has none.
pub fn timeline(doc: &Document) -> Result<Timeline, String> {
    match doc {
        Document::Spans(d) => Ok(Timeline {
            process: "latscope spans".to_string(),
            spans: d.kept()?.to_vec(),
            dropped: d.records_dropped,
        }),
        Document::LabIpc(d) => lab(
            "lab ipc",
            "latscope lab ipc",
            d.results.iter().map(|r| (r.label(), &r.kept)),
        ),
        Document::LabWayland(d) => lab(
            "lab wayland",
            "latscope lab wayland",
            d.results.iter().map(|r| (r.label.clone(), &r.kept)),
        ),
        Document::LabX11(d) => lab(
            "lab x11",
            "latscope lab x11",
            d.results.iter().map(|r| (r.label(), &r.kept)),
        ),
        Document::LabQueue(d) => lab(
            "lab queue",
            "latscope lab queue",
            d.rows
                .iter()
                .map(|r| (r.label().unwrap_or_else(|| "queue".to_string()), &r.kept)),
        ),
        other => Err(format!(
            "a {} result has no individual spans; --to chrome-json and perfetto take a spans result (`latscope spans --max-spans N -f json`, `latscope live --save FILE --record-spans`) or a lab result made with --max-spans N (`latscope lab ipc`, `lab wayland`, `lab x11`, `lab queue`)",
            other.kind().name()
        )),
    }
}

#[cfg(test)]
mod lane_tests {
    use super::Lanes;

    #[test]
    fn each_span_takes_the_lowest_lane_free_at_its_start() {
        let mut lanes = Lanes::default();
        // [0,10) [1,5) [2,3) [5,6) [6,20) [10,11)
        let placed: Vec<(usize, bool)> = [(0, 10), (1, 5), (2, 3), (5, 6), (6, 20), (10, 11)]
            .iter()
            .map(|&(s, e)| lanes.place(s, e))
            .collect();
        assert_eq!(
            placed,
            [
                (0, true),
                (1, true),
                (2, true),
                (1, false),
                (1, false),
                (0, false)
            ]
        );
        assert_eq!(lanes.len(), 3);
    }
}
