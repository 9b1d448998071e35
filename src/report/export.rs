//! Exporting latency results for other tools: an HdrHistogram interval log (`.hlog`, one tag
//! per span) and bpftrace-style JSON (`{"type":"hist","data":{"@name":[{"min","max","count"}]}}`,
//! log2 buckets), both read back by [`crate::doc::load`].

use std::fmt::Write;
use std::time::Duration;

use hdrhistogram::Histogram;
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use serde_json::{Value, json};

use crate::doc::Item;
use crate::stats::Log2Counts;

/// A tag or map name for an item: letters, digits and `_` only.
pub fn tag(item: &Item) -> String {
    item.label()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect::<String>()
        .trim_matches('_')
        .to_string()
}

/// The items as an HdrHistogram interval log (values in ns; bucket lower bounds for results
/// that only have buckets). Each item is one interval of unknown time: start 0, length 0.
pub fn hlog(items: &[Item]) -> Result<String, String> {
    let mut out = Vec::new();
    let mut serializer = V2DeflateSerializer::new();
    {
        let mut builder = IntervalLogWriterBuilder::new();
        builder.add_comment("written by latscope export: one interval per span, values in ns");
        let mut writer = builder
            .begin_log_with(&mut out, &mut serializer)
            .map_err(|e| e.to_string())?;
        for item in items {
            let mut h = Histogram::<u64>::new(3).map_err(|e| format!("{e:?}"))?;
            for &(value, count) in item.points() {
                // record_n grows the histogram; saturating_record_n would clamp to its range.
                h.record_n(value.max(0.0) as u64, count)
                    .map_err(|e| format!("{e:?}"))?;
            }
            let name = tag(item);
            writer
                .write_histogram(&h, Duration::ZERO, Duration::ZERO, Tag::new(&name))
                .map_err(|_| format!("cannot write the histogram of {}", item.label()))?;
        }
    }
    String::from_utf8(out).map_err(|e| e.to_string())
}

/// The items as bpftrace `-f json` histogram lines (log2 buckets, `max` inclusive).
pub fn bpftrace(items: &[Item]) -> String {
    let mut out = String::new();
    for item in items {
        let mut log2 = Log2Counts::default();
        for &(value, count) in item.points() {
            log2.record_n(value.max(0.0) as u64, count);
        }
        let buckets: Vec<Value> = log2
            .occupied()
            .into_iter()
            .flatten()
            .map(|i| {
                let (lo, hi) = Log2Counts::bounds(i);
                json!({ "min": lo, "max": hi.map_or(u64::MAX, |h| h - 1), "count": log2.counts()[i] })
            })
            .collect();
        let doc = json!({ "type": "hist", "data": { format!("@{}", tag(item)): buckets } });
        out.push_str(&doc.to_string());
        out.push('\n');
    }
    out
}

/// `spans` (from [`crate::report::timeline`]) as Chrome Trace Event JSON under the process name
/// `process`: one complete (`X`) slice per span, `ts` and `dur` in µs written exactly (3
/// decimals of ns), one thread per series so that a timeline viewer (Perfetto,
/// chrome://tracing) shows each series on its own track. Complete events on one thread must
/// nest (the Trace Event Format forbids partial overlap), so overlapping spans of a series go
/// to lanes, threads of their own named `SERIES (lane N)`: each span on the first lane free at
/// its start, as the Perfetto export does.
pub fn chrome_json_of(spans: &[crate::doc::spans::SpanRecord], process: &str) -> String {
    let mut order: Vec<&crate::doc::spans::SpanRecord> = spans.iter().collect();
    order.sort_by_key(|s| (s.start_ns, s.latency_ns));
    // Per series (by label): its thread ids, one per lane, and its lanes.
    let mut index: rustc_hash::FxHashMap<String, usize> = Default::default();
    let mut series: Vec<(Vec<usize>, super::timeline::Lanes)> = Vec::new();
    let mut threads = 0;
    let mut out = String::from("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
    for s in order {
        let label = crate::doc::label(&s.span, s.group.as_deref());
        let i = *index.entry(label.clone()).or_insert_with(|| {
            series.push(Default::default());
            series.len() - 1
        });
        let end = s.start_ns.saturating_add(s.latency_ns);
        let (tids, lanes) = &mut series[i];
        let tid = match lanes.place(s.start_ns, end) {
            (lane, false) => tids[lane],
            (lane, true) => {
                threads += 1;
                let name = match lane {
                    0 => label.clone(),
                    n => format!("{label} (lane {})", n + 1),
                };
                tids.push(threads);
                let meta = json!({"ph": "M", "name": "thread_name", "pid": 1, "tid": threads, "args": {"name": name}});
                out.push_str(&meta.to_string());
                out.push_str(",\n");
                threads
            }
        };
        complete(&mut out, s, 1, tid, "");
    }
    let process =
        json!({"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": process}});
    out.push_str(&process.to_string());
    out.push_str("\n]}\n");
    out
}

/// Nanoseconds as the Trace Event Format's microseconds, exactly (3 decimals).
fn micros(ns: u64) -> String {
    format!("{}.{:03}", ns / 1_000, ns % 1_000)
}

/// `text` as a JSON string.
fn quoted(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".into())
}

/// Appends a complete (`X`) event for `s` on `pid`/`tid`, with `extra` (`,"key":value...`)
/// among its arguments. Written directly (keys in serde_json's order): a `json!` value per
/// span cost more than the rest of the export.
fn complete(
    out: &mut String,
    s: &crate::doc::spans::SpanRecord,
    pid: usize,
    tid: usize,
    extra: &str,
) {
    let group = s
        .group
        .as_deref()
        .map_or_else(|| "null".to_string(), quoted);
    let _ = writeln!(
        out,
        "{{\"name\":{},\"cat\":\"latscope\",\"ph\":\"X\",\"pid\":{pid},\"tid\":{tid},\"ts\":{},\"dur\":{},\"args\":{{{extra}\"group\":{group},\"latency_ns\":{},\"start_ns\":{}}}}},",
        quoted(&s.span),
        micros(s.start_ns),
        micros(s.latency_ns),
        s.latency_ns,
        s.start_ns
    );
}

/// A `latscope frames` document's records (`export --to chrome-json`) as Chrome Trace Event
/// JSON laid out as the Perfetto export lays them ([`super::perfetto::frames`]): a process per
/// side (the client, the compositor, the compositor's own timeline: weston's, Mir's trace), a thread per stage and surface in
/// the order of a frame's path (a lane of its own where frames overlap), and a flow arrow
/// between each pair of a frame's stages that follow one another.
///
/// The arrows are the format's flow events (`s` leaves a slice, `f` with `bp: "e"` ends in
/// one), each bound to the slice enclosing its stamp, so each is stamped at the middle of its
/// slice: a slice's own start or end would be shared with a neighbour on its thread. The flow
/// events follow the slices at equal stamps, so that a zero-length slice is open when its
/// arrow is bound to it. Trace viewers draw flows only between slices of one trace, so every
/// arrow's two slices are in the output.
pub fn chrome_json_frames(records: &[crate::doc::spans::SpanRecord]) -> Result<String, String> {
    use crate::frames::stages::{Side, Stage};
    let order = super::perfetto::frame_records(records)?;
    let pid = |side: Side| side as usize + 1;
    let mut meta = String::from("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
    let present: std::collections::BTreeSet<Side> = order.iter().map(|o| o.0.side()).collect();
    for side in present {
        let name = json!({"ph": "M", "name": "process_name", "pid": pid(side), "tid": 0, "args": {"name": side.name()}});
        let rank = json!({"ph": "M", "name": "process_sort_index", "pid": pid(side), "tid": 0, "args": {"sort_index": side as usize}});
        let _ = writeln!(meta, "{name},\n{rank},");
    }
    let mut index: rustc_hash::FxHashMap<(Side, String), usize> = Default::default();
    let mut series: Vec<(Vec<usize>, super::timeline::Lanes)> = Vec::new();
    let mut threads = 0;
    // (pid, tid) of each record's slice, in `order`
    let mut placed: Vec<(usize, usize)> = Vec::with_capacity(order.len());
    let mut at: std::collections::BTreeMap<(u64, Stage), usize> = Default::default();
    for (k, &(stage, frame, r)) in order.iter().enumerate() {
        let label = crate::doc::label(&r.span, r.group.as_deref());
        let side = stage.side();
        let i = *index.entry((side, label.clone())).or_insert_with(|| {
            series.push(Default::default());
            series.len() - 1
        });
        let (tids, lanes) = &mut series[i];
        let (lane, new) = lanes.place(r.start_ns, r.start_ns.saturating_add(r.latency_ns));
        if new {
            threads += 1;
            let name = match lane {
                0 => label,
                n => format!("{label} (overlapping, {})", n + 1),
            };
            let rank = stage.index() * 1_000 + lane;
            let thread = json!({"ph": "M", "name": "thread_name", "pid": pid(side), "tid": threads, "args": {"name": name}});
            let sort = json!({"ph": "M", "name": "thread_sort_index", "pid": pid(side), "tid": threads, "args": {"sort_index": rank}});
            let _ = writeln!(meta, "{thread},\n{sort},");
            tids.push(threads);
        }
        placed.push((pid(side), tids[lane]));
        if at.insert((frame, stage), k).is_some() {
            return Err(format!("frame {frame} has two {} records", r.span));
        }
    }
    // (stamp, 0 for a slice or 1 for a flow event, its line)
    let mut events: Vec<(u64, u8, String)> = Vec::with_capacity(order.len() * 2);
    for (k, &(_, frame, r)) in order.iter().enumerate() {
        let mut line = String::new();
        complete(
            &mut line,
            r,
            placed[k].0,
            placed[k].1,
            &format!("\"frame\":{frame},"),
        );
        events.push((r.start_ns, 0, line));
    }
    let middle = |k: usize| {
        order[k]
            .2
            .start_ns
            .saturating_add(order[k].2.latency_ns / 2)
    };
    for (id, (a, z)) in (1..).zip(super::perfetto::frame_flows(&at)) {
        for (k, phase, bind) in [(a, "s", ""), (z, "f", ",\"bp\":\"e\"")] {
            let (pid, tid) = placed[k];
            let line = format!(
                "{{\"name\":\"frame\",\"cat\":\"latscope\",\"ph\":\"{phase}\",\"id\":{id},\"pid\":{pid},\"tid\":{tid},\"ts\":{}{bind}}},\n",
                micros(middle(k))
            );
            events.push((middle(k), 1, line));
        }
    }
    events.sort_by_key(|e| (e.0, e.1));
    let mut out = meta;
    for (_, _, line) in events {
        out.push_str(&line);
    }
    // the format allows no comma after the last event
    if out.ends_with(",\n") {
        out.truncate(out.len() - 2);
        out.push('\n');
    }
    out.push_str("]}\n");
    Ok(out)
}
