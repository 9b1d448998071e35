//! Kept spans as a native Perfetto trace (`latscope export --to perfetto`): the protobuf that
//! Perfetto's UI and trace processor read without a JSON conversion step.
//!
//! Only the few messages needed are declared, by hand with `prost`'s derive (no `protoc` at
//! build time); the field numbers are those of perfetto's `protos/perfetto/trace/trace.proto`,
//! `trace_packet.proto`, `track_event/track_event.proto`, `track_event/track_descriptor.proto`
//! and `track_event/debug_annotation.proto`. Members of a `oneof` are declared as plain
//! optional fields, which is the same on the wire when at most one is set.
//!
//! Layout: one track per series (span and group), holding one child track per lane: spans of a
//! series that overlap in time (concurrent requests) cannot nest on one track, so each goes to
//! the first lane that is free at its start. Each span is a `TYPE_SLICE_BEGIN` and a
//! `TYPE_SLICE_END` event, named after the span, with `latency_ns`, `start_ns` and the group as
//! debug annotations; timestamps are the trace's own nanoseconds.

use prost::Message;

use crate::doc::spans::SpanRecord;

/// `perfetto.protos.Trace`.
#[derive(Clone, PartialEq, Message)]
pub struct Trace {
    /// `packet = 1`
    #[prost(message, repeated, tag = "1")]
    pub packet: Vec<TracePacket>,
}

/// `perfetto.protos.TracePacket` (the fields used here).
#[derive(Clone, PartialEq, Message)]
pub struct TracePacket {
    /// `timestamp = 8`, ns
    #[prost(uint64, optional, tag = "8")]
    pub timestamp: Option<u64>,
    /// `trusted_packet_sequence_id = 10`
    #[prost(uint32, optional, tag = "10")]
    pub trusted_packet_sequence_id: Option<u32>,
    /// `track_event = 11` (oneof `data`)
    #[prost(message, optional, tag = "11")]
    pub track_event: Option<TrackEvent>,
    /// `track_descriptor = 60` (oneof `data`)
    #[prost(message, optional, tag = "60")]
    pub track_descriptor: Option<TrackDescriptor>,
}

/// `perfetto.protos.TrackDescriptor` (the fields used here).
#[derive(Clone, PartialEq, Message)]
pub struct TrackDescriptor {
    /// `uuid = 1`
    #[prost(uint64, optional, tag = "1")]
    pub uuid: Option<u64>,
    /// `name = 2` (oneof `static_or_dynamic_name`)
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    /// `parent_uuid = 5`
    #[prost(uint64, optional, tag = "5")]
    pub parent_uuid: Option<u64>,
}

/// `perfetto.protos.TrackEvent` (the fields used here).
#[derive(Clone, PartialEq, Message)]
pub struct TrackEvent {
    /// `debug_annotations = 4`
    #[prost(message, repeated, tag = "4")]
    pub debug_annotations: Vec<DebugAnnotation>,
    /// `type = 9`: a [`Type`]
    #[prost(enumeration = "Type", optional, tag = "9")]
    pub r#type: Option<i32>,
    /// `track_uuid = 11`
    #[prost(uint64, optional, tag = "11")]
    pub track_uuid: Option<u64>,
    /// `categories = 22`
    #[prost(string, repeated, tag = "22")]
    pub categories: Vec<String>,
    /// `name = 23` (oneof `name_field`)
    #[prost(string, optional, tag = "23")]
    pub name: Option<String>,
}

/// `perfetto.protos.TrackEvent.Type` (the values used here).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum Type {
    /// `TYPE_UNSPECIFIED = 0`
    Unspecified = 0,
    /// `TYPE_SLICE_BEGIN = 1`
    SliceBegin = 1,
    /// `TYPE_SLICE_END = 2`
    SliceEnd = 2,
}

/// `perfetto.protos.DebugAnnotation` (the fields used here).
#[derive(Clone, PartialEq, Message)]
pub struct DebugAnnotation {
    /// `uint_value = 3` (oneof `value`)
    #[prost(uint64, optional, tag = "3")]
    pub uint_value: Option<u64>,
    /// `string_value = 6` (oneof `value`)
    #[prost(string, optional, tag = "6")]
    pub string_value: Option<String>,
    /// `name = 10` (oneof `name_field`)
    #[prost(string, optional, tag = "10")]
    pub name: Option<String>,
}

/// The one packet sequence this writer uses.
const SEQUENCE: u32 = 1;

fn uint(name: &str, value: u64) -> DebugAnnotation {
    DebugAnnotation {
        uint_value: Some(value),
        string_value: None,
        name: Some(name.to_string()),
    }
}

fn descriptor(uuid: u64, name: String, parent: Option<u64>) -> TracePacket {
    TracePacket {
        timestamp: None,
        trusted_packet_sequence_id: Some(SEQUENCE),
        track_event: None,
        track_descriptor: Some(TrackDescriptor {
            uuid: Some(uuid),
            name: Some(name),
            parent_uuid: parent,
        }),
    }
}

/// A series' track and its lanes' tracks.
#[derive(Debug, Default)]
struct Series {
    label: String,
    uuid: u64,
    lanes: super::timeline::Lanes,
    lane_uuids: Vec<u64>,
}

/// The trace of `spans`, as built before encoding (tracks first, then events in time order).
pub fn trace(spans: &[SpanRecord]) -> Trace {
    let mut order: Vec<&SpanRecord> = spans.iter().collect();
    order.sort_by_key(|s| (s.start_ns, s.latency_ns));
    let mut index: rustc_hash::FxHashMap<String, usize> = Default::default();
    let mut series: Vec<Series> = Vec::new();
    let mut tracks = Vec::new();
    let mut events: Vec<(u64, Type, u64, &SpanRecord)> = Vec::new();
    let mut next_uuid = 1u64;
    let mut uuid = || {
        next_uuid += 1;
        next_uuid
    };
    for s in order {
        let label = crate::doc::label(&s.span, s.group.as_deref());
        let i = match index.get(&label) {
            Some(&i) => i,
            None => {
                let id = uuid();
                tracks.push(descriptor(id, label.clone(), None));
                index.insert(label.clone(), series.len());
                series.push(Series {
                    label,
                    uuid: id,
                    ..Series::default()
                });
                series.len() - 1
            }
        };
        let x = &mut series[i];
        let end = s.start_ns.saturating_add(s.latency_ns);
        let (lane, new) = x.lanes.place(s.start_ns, end);
        if new {
            let id = uuid();
            let name = match lane {
                0 => x.label.clone(),
                n => format!("{} (overlapping, {})", x.label, n + 1),
            };
            tracks.push(descriptor(id, name, Some(x.uuid)));
            x.lane_uuids.push(id);
        }
        let track = x.lane_uuids[lane];
        events.push((s.start_ns, Type::SliceBegin, track, s));
        events.push((end, Type::SliceEnd, track, s));
    }
    // In time order; at equal stamps the end of a span before a begin, so that back-to-back
    // spans on a lane do not nest, except the end of a zero-length span, which must follow its
    // own begin (the stable sort keeps the order they were pushed in: begin, then end).
    events.sort_by_key(|&(ts, kind, track, s)| {
        let before_begins = kind == Type::SliceEnd && s.latency_ns > 0;
        (ts, !before_begins, track)
    });
    let mut packet = tracks;
    packet.extend(events.into_iter().map(|(ts, kind, track, s)| {
        let event = match kind {
            Type::SliceBegin => TrackEvent {
                debug_annotations: [
                    Some(uint("latency_ns", s.latency_ns)),
                    Some(uint("start_ns", s.start_ns)),
                    s.group.as_ref().map(|g| DebugAnnotation {
                        uint_value: None,
                        string_value: Some(g.clone()),
                        name: Some("group".to_string()),
                    }),
                ]
                .into_iter()
                .flatten()
                .collect(),
                r#type: Some(kind as i32),
                track_uuid: Some(track),
                categories: vec!["latscope".to_string()],
                name: Some(s.span.clone()),
            },
            _ => TrackEvent {
                debug_annotations: Vec::new(),
                r#type: Some(kind as i32),
                track_uuid: Some(track),
                categories: Vec::new(),
                name: None,
            },
        };
        TracePacket {
            timestamp: Some(ts),
            trusted_packet_sequence_id: Some(SEQUENCE),
            track_event: Some(event),
            track_descriptor: None,
        }
    }));
    Trace { packet }
}

/// `spans` as an encoded Perfetto trace.
pub fn encode(spans: &[SpanRecord]) -> Vec<u8> {
    trace(spans).encode_to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(name: &str, group: Option<&str>, start_ns: u64, latency_ns: u64) -> SpanRecord {
        SpanRecord {
            span: name.into(),
            group: group.map(str::to_string),
            start_ns,
            latency_ns,
            frame: None,
        }
    }

    /// (track name, begin ts, end ts, name) of every slice, read back from the bytes.
    fn slices(bytes: &[u8]) -> Vec<(String, u64, u64, String)> {
        let trace = Trace::decode(bytes).unwrap();
        let names: std::collections::HashMap<u64, String> = trace
            .packet
            .iter()
            .filter_map(|p| p.track_descriptor.as_ref())
            .map(|d| (d.uuid.unwrap(), d.name.clone().unwrap()))
            .collect();
        let mut open: std::collections::HashMap<u64, Vec<(u64, String)>> = Default::default();
        let mut out = Vec::new();
        for p in &trace.packet {
            let Some(e) = &p.track_event else { continue };
            let track = e.track_uuid.unwrap();
            let ts = p.timestamp.unwrap();
            match e.r#type {
                Some(1) => open
                    .entry(track)
                    .or_default()
                    .push((ts, e.name.clone().unwrap())),
                Some(2) => {
                    let (begin, name) = open.get_mut(&track).unwrap().pop().unwrap();
                    out.push((names[&track].clone(), begin, ts, name));
                }
                other => panic!("type {other:?}"),
            }
        }
        assert!(open.values().all(Vec::is_empty), "unclosed slices");
        out.sort();
        out
    }

    #[test]
    fn each_span_is_one_slice_on_its_series_track_with_exact_stamps() {
        let spans = [
            span("frame", None, 1_000, 500),
            span("frame", None, 1_500, 20),
            span("req", Some("42"), 7, 3),
        ];
        let got = slices(&trace(&spans).encode_to_vec());
        assert_eq!(
            got,
            [
                ("frame".to_string(), 1_000, 1_500, "frame".to_string()),
                ("frame".to_string(), 1_500, 1_520, "frame".to_string()),
                ("req [42]".to_string(), 7, 10, "req".to_string()),
            ]
        );
    }

    #[test]
    fn zero_length_spans_end_after_they_begin_even_back_to_back() {
        let spans = [
            span("stage", None, 0, 10),
            span("stage", None, 10, 0),
            span("stage", None, 10, 0),
            span("stage", None, 10, 5),
        ];
        let got = slices(&trace(&spans).encode_to_vec());
        let stamps: Vec<(u64, u64)> = got.iter().map(|s| (s.1, s.2)).collect();
        assert_eq!(stamps, [(0, 10), (10, 10), (10, 10), (10, 15)]);
        assert!(got.iter().all(|s| s.0 == "stage"), "{got:?}");
    }

    #[test]
    fn overlapping_spans_of_a_series_go_to_separate_lanes_under_it() {
        let spans = [span("req", None, 0, 100), span("req", None, 50, 100)];
        let t = trace(&spans);
        let tracks: Vec<&TrackDescriptor> = t
            .packet
            .iter()
            .filter_map(|p| p.track_descriptor.as_ref())
            .collect();
        assert_eq!(tracks.len(), 3, "{tracks:?}");
        assert_eq!(tracks[0].parent_uuid, None);
        assert!(tracks[1..].iter().all(|d| d.parent_uuid == tracks[0].uuid));
        let got = slices(&t.encode_to_vec());
        assert_eq!(got[0].0, "req");
        assert_eq!(got[1].0, "req (overlapping, 2)");
    }

    #[test]
    fn the_latency_and_the_group_are_debug_annotations() {
        let t = trace(&[span("req", Some("7"), 5, 9)]);
        let begin = t
            .packet
            .iter()
            .find_map(|p| p.track_event.as_ref().filter(|e| e.r#type == Some(1)))
            .unwrap();
        let find = |n: &str| {
            begin
                .debug_annotations
                .iter()
                .find(|a| a.name.as_deref() == Some(n))
                .unwrap()
                .clone()
        };
        assert_eq!(find("latency_ns").uint_value, Some(9));
        assert_eq!(find("start_ns").uint_value, Some(5));
        assert_eq!(find("group").string_value.as_deref(), Some("7"));
        assert_eq!(begin.categories, ["latscope"]);
    }

    #[test]
    fn the_field_numbers_are_perfettos_on_the_wire() {
        // A track descriptor packet, encoded by hand from trace_packet.proto (field 60, length
        // delimited) and track_descriptor.proto (uuid = 1 varint, name = 2 string).
        let t = Trace {
            packet: vec![descriptor(2, "a".into(), None)],
        };
        let packet = [
            0x50, 0x01, // trusted_packet_sequence_id (10) = 1
            0xe2, 0x03, 0x05, // field 60, wire type 2, 5 bytes
            0x08, 0x02, // uuid (1) = 2
            0x12, 0x01, b'a', // name (2) = "a"
        ];
        let mut want = vec![0x0a, packet.len() as u8]; // Trace.packet (1)
        want.extend(packet);
        assert_eq!(t.encode_to_vec(), want);
    }
}
