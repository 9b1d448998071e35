//! Individual messages of a lab row (`--max-spans N`), kept the way `latscope spans` and
//! `live --record-spans` keep spans: the first N of each series ([`Kept`]) and always the
//! slowest of each ([`Slowest`]), so that a lab result feeds the same timeline exports.
//!
//! The labs time their messages into preallocated vectors and hand them here after the
//! measured phase: nothing in this module runs while a message is in flight.

use crate::doc::lab::Records;
use crate::doc::spans::SpanRecord;
use crate::span::{Group, Kept, SeriesKey, Slow, Slowest, SpanSink};

/// The slowest messages listed per series, as `latscope spans` lists by default.
pub use crate::live::record::SLOWEST;

/// Collects the messages of one row, series by series.
#[derive(Debug, Clone)]
pub struct Recorder {
    names: Vec<&'static str>,
    kept: Vec<Kept>,
    slowest: Slowest,
}

impl Recorder {
    /// Keeps the first `max` messages of each series named in `names` (and the [`SLOWEST`]).
    pub fn new(max: usize, names: &[&'static str]) -> Recorder {
        Recorder {
            names: names.to_vec(),
            kept: names.iter().map(|_| Kept::new(max)).collect(),
            slowest: Slowest::new(if max == 0 { 0 } else { SLOWEST }),
        }
    }

    /// One message of series `series` (an index into the names).
    pub fn sample(&mut self, series: usize, start_ns: u64, latency_ns: u64) {
        let key = SeriesKey {
            span: series,
            side: None,
            group: Group::All,
        };
        if let Some(k) = self.kept.get_mut(series) {
            k.sample(&key, start_ns, latency_ns);
            self.slowest.sample(&key, start_ns, latency_ns);
        }
    }

    /// What was kept, for a row of a document.
    pub fn finish(self) -> Records {
        let record = |s: &Slow| SpanRecord {
            span: self.names[s.key.span].to_string(),
            group: None,
            start_ns: s.start_ns,
            latency_ns: s.latency_ns,
            frame: None,
        };
        Records {
            records: self
                .kept
                .iter()
                .flat_map(|k| k.spans.iter().map(record))
                .collect(),
            slowest: self.slowest.sorted().iter().map(record).collect(),
            records_dropped: self.kept.iter().map(|k| k.dropped).sum(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_n_of_each_series_and_the_slowest_are_kept_and_the_rest_counted() {
        let mut r = Recorder::new(2, &["put", "get"]);
        for i in 0..4u64 {
            r.sample(0, 100 * i, 10 + i);
        }
        r.sample(1, 7, 70);
        let got = r.finish();
        let firsts: Vec<(&str, u64, u64)> = got
            .records
            .iter()
            .map(|s| (s.span.as_str(), s.start_ns, s.latency_ns))
            .collect();
        assert_eq!(firsts, [("put", 0, 10), ("put", 100, 11), ("get", 7, 70)]);
        assert_eq!(got.records_dropped, 2);
        // The slowest include the two past the limit.
        assert_eq!(got.slowest[0].latency_ns, 70);
        assert_eq!(got.slowest[1].latency_ns, 13);
        assert_eq!(got.slowest.len(), 5);
    }

    #[test]
    fn the_spans_of_a_row_are_the_records_then_the_slowest_not_among_them() {
        let mut r = Recorder::new(1, &["round_trip"]);
        for (start, latency) in [(0, 5), (10, 50), (20, 7)] {
            r.sample(0, start, latency);
        }
        let spans = r.finish().spans("pipe");
        let got: Vec<(u64, u64, Option<&str>)> = spans
            .iter()
            .map(|s| (s.start_ns, s.latency_ns, s.group.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                (0, 5, Some("pipe")),
                (10, 50, Some("pipe")),
                (20, 7, Some("pipe"))
            ]
        );
    }

    #[test]
    fn nothing_is_kept_without_a_limit() {
        let mut r = Recorder::new(0, &["round_trip"]);
        r.sample(0, 1, 2);
        assert_eq!(r.finish(), Records::default());
    }
}
