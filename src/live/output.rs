//! Reading bpftrace's `-f json` output: one JSON document per line.
//!
//! ```text
//! {"type": "attached_probes", "data": {"probes": 3}}
//! {"type": "hist", "data": {"@ls_hist_0": {"4242": [{"min": 134, "max": 134, "count": 7}, ...]}}}
//! {"type": "stats", "data": {"@ls_stat_0": {"4242": {"count": 30, "average": 1483753, "total": 44512601}}}}
//! {"type": "map", "data": {"@ls_min_0": {"4242": 473742}}}
//! {"type": "map", "data": {"@lr_0": 30}}
//! {"type": "printf", "data": "latscope:tick\n"}
//! {"type": "printf", "data": "latscope:span 0 19604500913026 55193 21197\n"}
//! {"type": "lost_events", "data": {"events": 3}}
//! ```
//!
//! Maps are cumulative: each line replaces what the [`Snapshot`] held for that map.

use std::collections::BTreeMap;

use serde_json::Value;

use super::program::{ATTACHED, END, PIDS_FULL, SPAN, TICK};
use crate::stats::loglinear::Bucketed;

/// What a line meant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// bpftrace attached this many probes
    Attached(u64),
    /// a snapshot is complete
    Tick,
    /// the final snapshot is complete
    End,
    /// every probe is attached (latscope's own marker probe fired)
    Ready,
    /// the map of traced processes is full: processes forked from now on are not traced
    PidsFull,
    /// a map was updated
    Updated,
    /// one span (`--record-spans`)
    Span(SpanLine),
    /// bpftrace's perf buffer overflowed: this many printed lines were lost
    Lost(u64),
    /// something else bpftrace printed (kept for error messages)
    Other(String),
}

/// One span printed by the program (`latscope:span INDEX START_NS LATENCY_NS [GROUP]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanLine {
    /// index of the span in the plan
    pub index: usize,
    /// its start, ns of the kernel's monotonic clock (`nsecs`)
    pub start_ns: u64,
    /// its latency, ns
    pub latency_ns: u64,
    /// its group as bpftrace prints the map key (`--by`), if grouped
    pub group: Option<String>,
}

impl SpanLine {
    /// Parses the text of a span `printf` (without the JSON around it).
    pub fn parse(text: &str) -> Option<SpanLine> {
        let rest = text.strip_prefix(SPAN)?.strip_prefix(' ')?;
        let mut parts = rest.splitn(4, ' ');
        let index = parts.next()?.parse().ok()?;
        let start_ns = parts.next()?.parse().ok()?;
        let latency_ns = parts.next()?.parse().ok()?;
        // A comm may contain spaces: the group is the rest of the line.
        let group = parts.next().map(str::to_string);
        Some(SpanLine {
            index,
            start_ns,
            latency_ns,
            group,
        })
    }
}

/// The latest cumulative state of every aggregate, by group label (`None`: not grouped).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// per span, per group
    pub spans: Vec<BTreeMap<Option<String>, Bucketed>>,
    /// per value, per group
    pub values: Vec<BTreeMap<Option<String>, Bucketed>>,
    /// per rate, per group: total events
    pub rates: Vec<BTreeMap<Option<String>, u64>>,
    /// whether map keys are group labels (`--by`) rather than the constant `0`
    pub grouped: bool,
    /// per span: how often its start and its end probe fired and passed their filters (read
    /// at the end of the session)
    pub hits: Vec<[u64; 2]>,
}

impl Snapshot {
    /// An empty snapshot for `spans` spans, `values` values and `rates` rates; `grouped` when
    /// the program splits them by a field.
    pub fn new(spans: usize, values: usize, rates: usize, grouped: bool) -> Self {
        Snapshot {
            spans: vec![BTreeMap::new(); spans],
            values: vec![BTreeMap::new(); values],
            rates: vec![BTreeMap::new(); rates],
            grouped,
            hits: vec![[0, 0]; spans],
        }
    }

    /// Applies one line of bpftrace output.
    pub fn apply(&mut self, line: &str) -> Line {
        let Ok(doc) = serde_json::from_str::<Value>(line) else {
            return Line::Other(line.to_string());
        };
        let data = &doc["data"];
        match doc["type"].as_str() {
            Some("attached_probes") => Line::Attached(data["probes"].as_u64().unwrap_or(0)),
            Some("printf") => match data.as_str().map(|t| t.trim_end_matches('\n')) {
                Some(TICK) => Line::Tick,
                Some(END) => Line::End,
                Some(ATTACHED) => Line::Ready,
                Some(PIDS_FULL) => Line::PidsFull,
                Some(text) if text.starts_with(SPAN) => {
                    SpanLine::parse(text).map_or_else(|| Line::Other(line.to_string()), Line::Span)
                }
                _ => Line::Other(line.to_string()),
            },
            Some("lost_events") => Line::Lost(data["events"].as_u64().unwrap_or(0)),
            Some("hist" | "stats" | "map") => {
                let Some(maps) = data.as_object() else {
                    return Line::Other(line.to_string());
                };
                for (name, value) in maps {
                    self.update(name, value);
                }
                Line::Updated
            }
            _ => Line::Other(line.to_string()),
        }
    }

    fn update(&mut self, name: &str, value: &Value) {
        // Hit counts are never grouped.
        for (prefix, end) in [("@lcs_", 0), ("@lce_", 1)] {
            if let Some(i) = name
                .strip_prefix(prefix)
                .and_then(|i| i.parse::<usize>().ok())
            {
                if let (Some(hits), Some(n)) = (self.hits.get_mut(i), value.as_u64()) {
                    hits[end] = n;
                }
                return;
            }
        }
        let Some((kind, field, index)) = parse_map_name(name) else {
            return;
        };
        // A keyed map (--by) is an object of group → value; an unkeyed one is the value itself.
        let groups: Vec<(Option<String>, &Value)> = match (self.grouped, value.as_object()) {
            (true, Some(groups)) => groups.iter().map(|(k, v)| (Some(k.clone()), v)).collect(),
            (true, None) => return,
            (false, _) => vec![(None, value)],
        };
        if kind == 'r' {
            if let Some(totals) = self.rates.get_mut(index) {
                for (label, v) in groups {
                    totals.insert(label, v.as_u64().unwrap_or(0));
                }
            }
            return;
        }
        let series = match kind {
            's' => self.spans.get_mut(index),
            'v' => self.values.get_mut(index),
            _ => return,
        };
        let Some(series) = series else {
            return;
        };
        for (label, v) in groups {
            let entry = series.entry(label).or_default();
            match field {
                "hist" => entry.counts = bucket_counts(v),
                "stat" => {
                    entry.count = v["count"].as_u64().unwrap_or(0);
                    entry.sum = u128::from(v["total"].as_u64().unwrap_or(0));
                }
                "min" => entry.min = v.as_u64().unwrap_or(0),
                "max" => entry.max = v.as_u64().unwrap_or(0),
                _ => {}
            }
        }
    }
}

/// `@ls_hist_3` → ('s', "hist", 3); `@lr_0` → ('r', "", 0).
fn parse_map_name(name: &str) -> Option<(char, &str, usize)> {
    let rest = name.strip_prefix("@l")?;
    if let Some(i) = rest.strip_prefix("r_") {
        return Some(('r', "", i.parse().ok()?));
    }
    let kind = rest.chars().next()?;
    let (field, index) = rest.get(2..)?.rsplit_once('_')?;
    Some((kind, field, index.parse().ok()?))
}

/// An `lhist(..., 0, N, 1)` over bucket indices: `{"min": i, "max": i, "count": n}` per index
/// (plus open-ended under- and overflow buckets, which the index never reaches).
fn bucket_counts(buckets: &Value) -> Vec<u64> {
    let mut counts = Vec::new();
    for b in buckets.as_array().into_iter().flatten() {
        let (Some(min), Some(count)) = (b["min"].as_u64(), b["count"].as_u64()) else {
            continue;
        };
        if b["max"].as_u64() != Some(min) {
            continue;
        }
        // The traced command shares bpftrace's stdout: an index beyond the scheme is not ours.
        let i = min as usize;
        if i >= crate::stats::loglinear::BUCKETS {
            continue;
        }
        if counts.len() <= i {
            counts.resize(i + 1, 0);
        }
        counts[i] = count;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_is_built_from_real_bpftrace_0_17_lines() {
        let mut s = Snapshot::new(1, 0, 1, true);
        let lines = [
            r#"{"type": "attached_probes", "data": {"probes": 4}}"#,
            r#"{"type": "hist", "data": {"@ls_hist_0": {"grp,3841": [{"min": 134, "max": 134, "count": 7}, {"min": 135, "max": 135, "count": 3}]}}}"#,
            r#"{"type": "stats", "data": {"@ls_stat_0": {"grp,3841": {"count": 10, "average": 1483753, "total": 14837530}}}}"#,
            r#"{"type": "map", "data": {"@ls_min_0": {"grp,3841": 473742}}}"#,
            r#"{"type": "map", "data": {"@ls_max_0": {"grp,3841": 2495711}}}"#,
            r#"{"type": "map", "data": {"@lr_0": {"3841": 30}}}"#,
            r#"{"type": "printf", "data": "latscope:tick\n"}"#,
        ];
        let got: Vec<Line> = lines.iter().map(|l| s.apply(l)).collect();
        assert_eq!(got[0], Line::Attached(4));
        assert_eq!(got[6], Line::Tick);
        let b = &s.spans[0][&Some("grp,3841".to_string())];
        assert_eq!(
            (b.count, b.sum, b.min, b.max),
            (10, 14_837_530, 473_742, 2_495_711)
        );
        assert_eq!(b.counts[134], 7);
        assert_eq!(b.counts[135], 3);
        assert_eq!(s.rates[0][&Some("3841".to_string())], 30);
    }

    #[test]
    fn an_ungrouped_series_has_no_label_and_later_snapshots_replace_earlier_ones() {
        let mut s = Snapshot::new(1, 0, 1, false);
        s.apply(
            r#"{"type": "stats", "data": {"@ls_stat_0": {"count": 1, "average": 5, "total": 5}}}"#,
        );
        s.apply(
            r#"{"type": "stats", "data": {"@ls_stat_0": {"count": 3, "average": 5, "total": 15}}}"#,
        );
        s.apply(
            r#"{"type": "hist", "data": {"@ls_hist_0": [{"min": 20, "max": 20, "count": 3}]}}"#,
        );
        s.apply(r#"{"type": "map", "data": {"@lr_0": 30}}"#);
        assert_eq!(s.spans[0][&None].count, 3);
        assert_eq!(s.spans[0][&None].counts[20], 3);
        assert_eq!(s.rates[0][&None], 30);
    }

    #[test]
    fn printed_spans_are_read_with_their_group_as_printed_by_bpftrace_0_17() {
        let mut s = Snapshot::new(1, 0, 0, false);
        let line = r#"{"type": "printf", "data": "latscope:span 0 19604500913026 55193\n"}"#;
        assert_eq!(
            s.apply(line),
            Line::Span(SpanLine {
                index: 0,
                start_ns: 19_604_500_913_026,
                latency_ns: 55_193,
                group: None
            })
        );
        let line = r#"{"type": "printf", "data": "latscope:span 1 5 7 Xwayland worker\n"}"#;
        let Line::Span(span) = s.apply(line) else {
            panic!("not a span")
        };
        assert_eq!(
            (span.index, span.group.as_deref()),
            (1, Some("Xwayland worker"))
        );
        for bad in ["latscope:span 0 x 1", "latscope:span 0 1", "latscope:span"] {
            assert_eq!(SpanLine::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn lines_that_are_not_ours_are_kept_as_other() {
        let mut s = Snapshot::new(0, 0, 0, false);
        assert_eq!(
            s.apply("ERROR: something"),
            Line::Other("ERROR: something".into())
        );
        assert_eq!(
            s.apply(r#"{"type": "lost_events", "data": {"events": 3}}"#),
            Line::Lost(3)
        );
        assert_eq!(
            s.apply(r#"{"type": "printf", "data": "latscope:spanx\n"}"#),
            Line::Other(r#"{"type": "printf", "data": "latscope:spanx\n"}"#.into())
        );
        assert_eq!(
            s.apply(r#"{"type": "printf", "data": "latscope:end\n"}"#),
            Line::End
        );
    }
}
