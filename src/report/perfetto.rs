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
//!
//! A `latscope frames` document ([`frames`]) is laid out by process instead: a track per side
//! (the client, the compositor, the compositor's own timeline: weston's, Mir's trace), each holding a track per stage, and
//! Perfetto flows (`flow_ids`, `terminating_flow_ids`) from each of a frame's stages to those
//! that follow it, so that the UI draws the frame's path as arrows from the client's commit to
//! the compositor and back. Its timestamps are the logs' clock, the `CLOCK_REALTIME` both
//! sides' WAYLAND_DEBUG stamps are in (to the microsecond), with the display and the timeline's
//! stamps moved onto it by the presentation clock's estimated offset.

use prost::Message;

use crate::doc::spans::SpanRecord;
use crate::frames::stages::{Side, Stage};

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
    /// `child_ordering = 11`: a `ChildTracksOrdering` (3: `EXPLICIT`, by the children's rank)
    #[prost(int32, optional, tag = "11")]
    pub child_ordering: Option<i32>,
    /// `sibling_order_rank = 12`: its place among its parent's children
    #[prost(int32, optional, tag = "12")]
    pub sibling_order_rank: Option<i32>,
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
    /// `flow_ids = 47`: flows from this slice to a later one
    #[prost(fixed64, repeated, tag = "47")]
    pub flow_ids: Vec<u64>,
    /// `terminating_flow_ids = 48`: flows that end at this slice
    #[prost(fixed64, repeated, tag = "48")]
    pub terminating_flow_ids: Vec<u64>,
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

/// `ChildTracksOrdering.EXPLICIT`: children in the order of their `sibling_order_rank`.
const EXPLICIT: i32 = 3;

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
            child_ordering: None,
            sibling_order_rank: None,
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

/// A span placed on a lane's track, with the flows that leave and end at it.
struct Slice<'a> {
    track: u64,
    span: &'a SpanRecord,
    flow_ids: Vec<u64>,
    terminating_flow_ids: Vec<u64>,
}

/// The tracks and slices of a trace as they are placed.
#[derive(Default)]
struct Builder<'a> {
    last_uuid: u64,
    tracks: Vec<TracePacket>,
    /// the series by their parent track and label
    index: rustc_hash::FxHashMap<(Option<u64>, String), usize>,
    series: Vec<Series>,
    slices: Vec<Slice<'a>>,
}

impl<'a> Builder<'a> {
    fn uuid(&mut self) -> u64 {
        self.last_uuid += 1;
        self.last_uuid
    }

    /// A new track, ranked among its siblings where `rank` is given.
    fn track(&mut self, name: String, parent: Option<u64>, rank: Option<i32>) -> u64 {
        let uuid = self.uuid();
        let mut packet = descriptor(uuid, name, parent);
        if let Some(d) = &mut packet.track_descriptor {
            d.sibling_order_rank = rank;
        }
        self.tracks.push(packet);
        uuid
    }

    /// Shows the children of `track` (the last made) in the order of their ranks.
    fn rank_children(&mut self, track: u64) {
        let last = self
            .tracks
            .last_mut()
            .and_then(|p| p.track_descriptor.as_mut());
        if let Some(d) = last.filter(|d| d.uuid == Some(track)) {
            d.child_ordering = Some(EXPLICIT);
        }
    }

    /// Places `span` on the first free lane of the series `label` under `parent` (both made
    /// when new), and returns its slice's index. Spans must come in start order.
    fn place(
        &mut self,
        label: String,
        parent: Option<u64>,
        rank: Option<i32>,
        span: &'a SpanRecord,
    ) -> usize {
        let key = (parent, label);
        let i = match self.index.get(&key) {
            Some(&i) => i,
            None => {
                let uuid = self.track(key.1.clone(), parent, rank);
                self.series.push(Series {
                    label: key.1.clone(),
                    uuid,
                    ..Series::default()
                });
                self.index.insert(key, self.series.len() - 1);
                self.series.len() - 1
            }
        };
        let end = span.start_ns.saturating_add(span.latency_ns);
        let (lane, new) = self.series[i].lanes.place(span.start_ns, end);
        if new {
            let name = match lane {
                0 => self.series[i].label.clone(),
                n => format!("{} (overlapping, {})", self.series[i].label, n + 1),
            };
            let parent = self.series[i].uuid;
            let uuid = self.track(name, Some(parent), None);
            self.series[i].lane_uuids.push(uuid);
        }
        self.slices.push(Slice {
            track: self.series[i].lane_uuids[lane],
            span,
            flow_ids: Vec::new(),
            terminating_flow_ids: Vec::new(),
        });
        self.slices.len() - 1
    }

    /// The trace: the tracks first, then every slice's begin and end in time order.
    fn finish(self) -> Trace {
        let mut events: Vec<(u64, Type, &Slice)> = Vec::with_capacity(self.slices.len() * 2);
        for slice in &self.slices {
            let s = slice.span;
            events.push((s.start_ns, Type::SliceBegin, slice));
            events.push((
                s.start_ns.saturating_add(s.latency_ns),
                Type::SliceEnd,
                slice,
            ));
        }
        // In time order; at equal stamps the end of a span before a begin, so that back-to-back
        // spans on a lane do not nest, except the end of a zero-length span, which must follow
        // its own begin (the stable sort keeps the order they were pushed in: begin, then end).
        events.sort_by_key(|&(ts, kind, slice)| {
            let before_begins = kind == Type::SliceEnd && slice.span.latency_ns > 0;
            (ts, !before_begins, slice.track)
        });
        let mut packet = self.tracks;
        packet.extend(events.into_iter().map(|(ts, kind, slice)| TracePacket {
            timestamp: Some(ts),
            trusted_packet_sequence_id: Some(SEQUENCE),
            track_event: Some(match kind {
                Type::SliceBegin => begin(slice),
                _ => TrackEvent {
                    r#type: Some(kind as i32),
                    track_uuid: Some(slice.track),
                    ..TrackEvent::default()
                },
            }),
            track_descriptor: None,
        }));
        Trace { packet }
    }
}

/// A slice's begin: its name, annotations and flows.
fn begin(slice: &Slice) -> TrackEvent {
    let s = slice.span;
    TrackEvent {
        debug_annotations: [
            Some(uint("latency_ns", s.latency_ns)),
            Some(uint("start_ns", s.start_ns)),
            s.group.as_ref().map(|g| DebugAnnotation {
                uint_value: None,
                string_value: Some(g.clone()),
                name: Some("group".to_string()),
            }),
            s.frame.map(|f| uint("frame", f)),
        ]
        .into_iter()
        .flatten()
        .collect(),
        r#type: Some(Type::SliceBegin as i32),
        track_uuid: Some(slice.track),
        categories: vec!["latscope".to_string()],
        name: Some(s.span.clone()),
        flow_ids: slice.flow_ids.clone(),
        terminating_flow_ids: slice.terminating_flow_ids.clone(),
    }
}

/// The trace of `spans`, as built before encoding (tracks first, then events in time order).
pub fn trace(spans: &[SpanRecord]) -> Trace {
    let mut order: Vec<&SpanRecord> = spans.iter().collect();
    order.sort_by_key(|s| (s.start_ns, s.latency_ns));
    let mut b = Builder::default();
    for s in order {
        b.place(
            crate::doc::label(&s.span, s.group.as_deref()),
            None,
            None,
            s,
        );
    }
    b.finish()
}

/// A `latscope frames` document's records with their stage and frame, in start order; an error
/// for a record that names no stage of `latscope frames` or no frame.
pub(crate) fn frame_records(
    records: &[SpanRecord],
) -> Result<Vec<(Stage, u64, &SpanRecord)>, String> {
    let mut order = Vec::with_capacity(records.len());
    for r in records {
        let stage: Stage = r
            .span
            .parse()
            .map_err(|e| format!("{e}: not a stage of `latscope frames`"))?;
        let frame = r.frame.ok_or_else(|| {
            format!(
                "a {} record names no frame (a document of an older latscope?): run `latscope frames -f json` again",
                r.span
            )
        })?;
        order.push((stage, frame, r));
    }
    order.sort_by_key(|(_, _, r)| (r.start_ns, r.latency_ns));
    Ok(order)
}

/// The trace of a `latscope frames` document's records (`export --to perfetto`): a track per
/// side ([`Stage::side`]: the client, the compositor, its timeline), holding a track per stage
/// and surface in the order of a frame's path, and an arrow (a flow) between the slices of each
/// pair of a frame's stages that follow one another ([`Stage::FOLLOWS`]). Each arrow has its
/// own flow id, as a frame's path forks at the compositor's dispatch of the commit. Stamps are
/// the records' own: the logs' `CLOCK_REALTIME`, ns, the timeline's stages moved onto it.
pub fn frames(records: &[SpanRecord]) -> Result<Trace, String> {
    let order = frame_records(records)?;
    let mut b = Builder::default();
    let present: std::collections::BTreeSet<Side> = order.iter().map(|o| o.0.side()).collect();
    let mut sides = std::collections::BTreeMap::new();
    for side in present {
        let uuid = b.track(side.name().to_string(), None, None);
        b.rank_children(uuid);
        sides.insert(side, uuid);
    }
    let mut at: std::collections::BTreeMap<(u64, Stage), usize> = Default::default();
    for (stage, frame, r) in order {
        let label = crate::doc::label(&r.span, r.group.as_deref());
        let rank = i32::try_from(stage.index()).ok();
        let slice = b.place(label, Some(sides[&stage.side()]), rank, r);
        if at.insert((frame, stage), slice).is_some() {
            return Err(format!("frame {frame} has two {} records", r.span));
        }
    }
    for (flow, (a, z)) in (1..).zip(frame_flows(&at)) {
        b.slices[a].flow_ids.push(flow);
        b.slices[z].terminating_flow_ids.push(flow);
    }
    Ok(b.finish())
}

/// The arrows of a frame's path: for each frame, each pair of its stages that follow one
/// another ([`Stage::FOLLOWS`]), as (slice it leaves, slice it ends at), given the slice of
/// each (frame, stage).
pub(crate) fn frame_flows(
    at: &std::collections::BTreeMap<(u64, Stage), usize>,
) -> Vec<(usize, usize)> {
    let frames: std::collections::BTreeSet<u64> = at.keys().map(|k| k.0).collect();
    let mut flows = Vec::new();
    for frame in frames {
        for (first, then) in Stage::FOLLOWS {
            if let (Some(&a), Some(&z)) = (at.get(&(frame, first)), at.get(&(frame, then))) {
                flows.push((a, z));
            }
        }
    }
    flows
}

/// `spans` as an encoded Perfetto trace.
pub fn encode(spans: &[SpanRecord]) -> Vec<u8> {
    trace(spans).encode_to_vec()
}

/// A `latscope frames` document's records as an encoded Perfetto trace ([`frames`]).
pub fn encode_frames(records: &[SpanRecord]) -> Result<Vec<u8>, String> {
    Ok(frames(records)?.encode_to_vec())
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

    fn stage(name: &str, frame: u64, start_ns: u64, latency_ns: u64) -> SpanRecord {
        SpanRecord {
            frame: Some(frame),
            ..span(name, Some("wl_surface@3"), start_ns, latency_ns)
        }
    }

    /// Two frames whose paths overlap: the second is committed before the first's `presented`.
    fn two_frames() -> Vec<SpanRecord> {
        let mut records = Vec::new();
        for (frame, t) in [(50, 0), (123, 30_000)] {
            records.extend([
                stage("commit_to_compositor", frame, t, 40),
                stage("compositor_to_frame_done", frame, t + 40, 25_000),
                stage("compositor_to_presented", frame, t + 40, 41_000),
                stage("presented_to_client", frame, t + 41_040, 200),
                stage("commit_to_presented", frame, t, 41_240),
            ]);
        }
        records
    }

    /// Every track's name with its ancestors', `side/stage/lane`.
    fn paths(t: &Trace) -> std::collections::HashMap<u64, String> {
        let d: Vec<&TrackDescriptor> = t
            .packet
            .iter()
            .filter_map(|p| p.track_descriptor.as_ref())
            .collect();
        let mut out = std::collections::HashMap::new();
        for x in &d {
            let mut path = x.name.clone().unwrap();
            let mut parent = x.parent_uuid;
            while let Some(p) = parent {
                let up = d.iter().find(|y| y.uuid == Some(p)).unwrap();
                path = format!("{}/{path}", up.name.as_ref().unwrap());
                parent = up.parent_uuid;
            }
            out.insert(x.uuid.unwrap(), path);
        }
        out
    }

    #[test]
    fn each_frame_stage_is_a_slice_on_its_side_and_overlapping_frames_take_lanes() {
        let t = frames(&two_frames()).unwrap();
        let paths = paths(&t);
        let mut got: Vec<(String, String, u64)> = t
            .packet
            .iter()
            .filter_map(|p| Some((p.track_event.as_ref()?, p.timestamp?)))
            .filter(|(e, _)| e.r#type == Some(1))
            .map(|(e, ts)| {
                let path = paths[&e.track_uuid.unwrap()].clone();
                (path, e.name.clone().unwrap(), ts)
            })
            .collect();
        got.sort();
        let s = "[wl_surface@3]";
        let want = [
            format!("client/commit_to_compositor {s}/commit_to_compositor {s}"),
            format!("client/commit_to_presented {s}/commit_to_presented {s}"),
            format!("client/commit_to_presented {s}/commit_to_presented {s} (overlapping, 2)"),
            format!("client/presented_to_client {s}/presented_to_client {s}"),
            format!("compositor/compositor_to_frame_done {s}/compositor_to_frame_done {s}"),
            format!("compositor/compositor_to_presented {s}/compositor_to_presented {s}"),
            format!(
                "compositor/compositor_to_presented {s}/compositor_to_presented {s} (overlapping, 2)"
            ),
        ];
        let tracks: std::collections::BTreeSet<&str> = got.iter().map(|g| g.0.as_str()).collect();
        assert_eq!(tracks.into_iter().collect::<Vec<_>>(), want);
        assert_eq!(got.len(), 10);
    }

    #[test]
    fn each_pair_of_a_frames_stages_that_follow_one_another_is_one_flow() {
        let t = frames(&two_frames()).unwrap();
        // flow id → (the stage it leaves, its frame; the stage it ends at, its frame)
        let mut from = std::collections::BTreeMap::new();
        let mut to = std::collections::BTreeMap::new();
        for e in t.packet.iter().filter_map(|p| p.track_event.as_ref()) {
            let Some(name) = e.name.clone() else { continue };
            let frame = e
                .debug_annotations
                .iter()
                .find(|a| a.name.as_deref() == Some("frame"))
                .and_then(|a| a.uint_value)
                .unwrap();
            for id in &e.flow_ids {
                assert!(from.insert(*id, (name.clone(), frame)).is_none());
            }
            for id in &e.terminating_flow_ids {
                assert!(to.insert(*id, (name.clone(), frame)).is_none());
            }
        }
        assert_eq!(
            from.keys().collect::<Vec<_>>(),
            to.keys().collect::<Vec<_>>()
        );
        let mut arrows: Vec<(String, String, u64)> = from
            .iter()
            .map(|(id, (a, fa))| {
                let (z, fz) = &to[id];
                assert_eq!(fa, fz, "an arrow stays within its frame");
                (a.clone(), z.clone(), *fa)
            })
            .collect();
        arrows.sort();
        let mut want = Vec::new();
        for frame in [50, 123] {
            want.extend([
                ("commit_to_compositor", "compositor_to_frame_done", frame),
                ("commit_to_compositor", "compositor_to_presented", frame),
                ("compositor_to_presented", "presented_to_client", frame),
            ]);
        }
        let mut want: Vec<(String, String, u64)> = want
            .into_iter()
            .map(|(a, z, f)| (a.to_string(), z.to_string(), f))
            .collect();
        want.sort();
        assert_eq!(arrows, want);
    }

    #[test]
    fn the_sides_show_their_stages_in_the_order_of_a_frames_path() {
        let t = frames(&two_frames()).unwrap();
        let d: Vec<&TrackDescriptor> = t
            .packet
            .iter()
            .filter_map(|p| p.track_descriptor.as_ref())
            .collect();
        let client = d
            .iter()
            .find(|x| x.name.as_deref() == Some("client"))
            .unwrap();
        assert_eq!(client.child_ordering, Some(EXPLICIT));
        let rank = |name: &str| {
            d.iter()
                .find(|x| {
                    x.name.as_deref() == Some(&format!("{name} [wl_surface@3]"))
                        && x.parent_uuid == client.uuid
                })
                .unwrap()
                .sibling_order_rank
                .unwrap()
        };
        assert!(rank("commit_to_compositor") < rank("presented_to_client"));
        assert!(rank("presented_to_client") < rank("commit_to_presented"));
    }

    #[test]
    fn frame_records_without_a_frame_or_a_stage_twice_are_refused() {
        let mut records = two_frames();
        records.push(stage("commit_to_compositor", 50, 5, 5));
        let e = frames(&records).unwrap_err();
        assert!(e.contains("frame 50 has two commit_to_compositor"), "{e}");
        let old = [span("commit_to_compositor", None, 0, 1)];
        let e = frames(&old).unwrap_err();
        assert!(e.contains("run `latscope frames -f json` again"), "{e}");
        let e = frames(&[stage("req", 1, 0, 1)]).unwrap_err();
        assert!(e.contains("no stage 'req'"), "{e}");
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
