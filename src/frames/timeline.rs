//! Weston's `timeline` log scope: the compositor's own stages of a frame
//! (`weston --logger-scopes=timeline,log --log=FILE`).
//!
//! Each line is a small JSON object: a declaration (`{ "id":4, "type":"weston_surface",
//! "desc":"top-level window 'TITLE'" }`) or an event (`{ "T":[sec, nsec], "N":"core_repaint_begin",
//! "wo":1 }`), among weston's other logging, which is skipped. The events a frame passes
//! through: `core_commit_damage` (its surface's commit, `ws`), then its output's
//! `core_repaint_begin`, `core_repaint_posted` and `core_repaint_finished`, whose
//! `vblank_monotonic` is the display time `presented` carries, on another clock: the timeline
//! stamps with `CLOCK_MONOTONIC`, `presented` with the presentation clock (weston headless:
//! `CLOCK_MONOTONIC_RAW`). The two are found apart by a constant that lines every display time
//! up with a vblank ([`mono_minus_presentation`]); then the same events are seen on the logs'
//! clock too (a `presented` in the server log, the repaint it reports here), which pins the
//! presentation clock to the logs' far closer than the logs alone do.

use rustc_hash::FxHashMap;

use super::stages::Repaint;

/// What a timeline event is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `core_commit_damage`: a surface's commit with damage
    CommitDamage,
    /// `core_repaint_begin`
    RepaintBegin,
    /// `core_repaint_posted`: the repaint handed to the display
    RepaintPosted,
    /// `core_repaint_finished`: its vblank
    RepaintFinished,
}

impl Kind {
    fn of(name: &str) -> Option<Kind> {
        Some(match name {
            "core_commit_damage" => Kind::CommitDamage,
            "core_repaint_begin" => Kind::RepaintBegin,
            "core_repaint_posted" => Kind::RepaintPosted,
            "core_repaint_finished" => Kind::RepaintFinished,
            _ => return None,
        })
    }
}

/// One event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// when, ns on the presentation clock
    pub t_ns: i128,
    /// what
    pub kind: Kind,
    /// the surface (`ws`)
    pub surface: Option<u32>,
    /// the output (`wo`)
    pub output: Option<u32>,
    /// `core_repaint_finished`'s vblank, ns on the presentation clock
    pub vblank_ns: Option<i128>,
}

/// A timeline read.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    /// its name in messages
    pub file: String,
    /// the events, in order
    pub events: Vec<Event>,
    /// each surface's latest description (`top-level window 'TITLE'`)
    pub surfaces: FxHashMap<u32, String>,
    /// lines that began like an event and were not one
    pub malformed: u64,
}

impl Timeline {
    /// The surface whose description names the window `title`.
    pub fn surface_titled(&self, title: &str) -> Option<u32> {
        let quoted = format!("'{title}'");
        let mut ids: Vec<u32> = self
            .surfaces
            .iter()
            .filter(|(_, desc)| desc.contains(&quoted))
            .map(|(&id, _)| id)
            .collect();
        ids.sort_unstable();
        ids.first().copied()
    }
}

impl Timeline {
    /// One line of the timeline's file (read by [`super::compositor::read`]): an event or a
    /// declaration when it is a JSON object, else weston's other logging, skipped.
    pub fn line(&mut self, text: &[u8]) {
        if !text.starts_with(b"{") {
            return;
        }
        match serde_json::from_slice::<serde_json::Value>(text) {
            Ok(v) => self.value(&v),
            Err(_) => self.malformed += 1,
        }
    }
}

impl Timeline {
    fn value(&mut self, v: &serde_json::Value) {
        let id = |key: &str| {
            v.get(key)
                .and_then(|x| x.as_u64())
                .and_then(|x| u32::try_from(x).ok())
        };
        if v.get("type").and_then(|t| t.as_str()) == Some("weston_surface") {
            if let (Some(id), Some(desc)) = (id("id"), v.get("desc").and_then(|d| d.as_str())) {
                self.surfaces.insert(id, desc.to_string());
            }
            return;
        }
        let Some(kind) = v.get("N").and_then(|n| n.as_str()).and_then(Kind::of) else {
            return;
        };
        let Some(t_ns) = v.get("T").and_then(time_ns) else {
            self.malformed += 1;
            return;
        };
        self.events.push(Event {
            t_ns,
            kind,
            surface: id("ws"),
            output: id("wo"),
            vblank_ns: v.get("vblank_monotonic").and_then(time_ns),
        });
    }
}

/// `[sec, nsec]` in ns.
fn time_ns(v: &serde_json::Value) -> Option<i128> {
    let a = v.as_array()?;
    let (sec, nsec) = (a.first()?.as_u64()?, a.get(1)?.as_u64()?);
    (nsec < 1_000_000_000).then(|| i128::from(sec) * 1_000_000_000 + i128::from(nsec))
}

/// The repaint whose vblank is the `k`-th `core_repaint_finished` (an index into
/// `timeline.events`): it and the `core_repaint_begin` and `core_repaint_posted` before it on its
/// output, moved onto the presentation clock by `mono_minus_presentation_ns` (the caller moves
/// it on to the logs' clock once the presentation clock's offset is known).
pub fn repaint_at(
    timeline: &Timeline,
    at: usize,
    mono_minus_presentation_ns: i128,
) -> Option<Repaint<i128>> {
    let finished = timeline.events[at];
    let on_presentation = |t: i128| t - mono_minus_presentation_ns;
    let before = timeline.events[..at]
        .iter()
        .rev()
        .filter(|e| e.output == finished.output);
    let mut posted = None;
    for e in before {
        match (e.kind, posted) {
            (Kind::RepaintPosted, None) => posted = Some(e.t_ns),
            (Kind::RepaintBegin, Some(p)) => {
                return Some(Repaint {
                    commit_ns: None,
                    begin_ns: on_presentation(e.t_ns),
                    posted_ns: on_presentation(p),
                    vblank_ns: Some(on_presentation(finished.vblank_ns?)),
                    finished_ns: on_presentation(finished.t_ns),
                });
            }
            (Kind::RepaintFinished, _) => return None,
            _ => {}
        }
    }
    None
}

/// The `core_repaint_finished` events, by vblank (ns on `CLOCK_MONOTONIC`), in order: (vblank,
/// index into `timeline.events`).
pub fn vblanks(timeline: &Timeline) -> Vec<(i128, usize)> {
    let mut v: Vec<(i128, usize)> = timeline
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.kind == Kind::RepaintFinished)
        .filter_map(|(i, e)| Some((e.vblank_ns?, i)))
        .collect();
    v.sort_unstable();
    v
}

/// How close a display time and its vblank lie once the clocks' constant is taken out.
pub const VBLANK_WITHIN_NS: i128 = 100_000;

/// Display times looked at to find the clocks' constant.
const FIRST_DISPLAYS: usize = 64;

/// How the display times line up with the vblanks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinedUp {
    /// by this constant alone (`CLOCK_MONOTONIC - presentation clock`, ns)
    By(i128),
    /// by several constants alike: vblanks too regular to tell which one showed a frame
    Tied,
    /// by none (fewer than two, or than half)
    Not,
}

/// The constant `CLOCK_MONOTONIC - presentation clock` that lines the most of the first display
/// times (`displays`, presentation clock, in order) up with a vblank of `vblanks` (within
/// [`VBLANK_WITHIN_NS`]). A constant a whole number of refresh periods away lines them up alike
/// when the vblanks come at a steady rate: that is [`LinedUp::Tied`], not a guess.
pub fn mono_minus_presentation(displays: &[i128], vblanks: &[(i128, usize)]) -> LinedUp {
    let first = &displays[..displays.len().min(FIRST_DISPLAYS)];
    let Some(&d0) = first.first() else {
        return LinedUp::Not;
    };
    let lined_up = |c: i128| {
        first
            .iter()
            .filter(|&&d| nearest(vblanks, d + c).is_some())
            .count()
    };
    let mut counts: Vec<(usize, i128)> = vblanks
        .iter()
        .map(|&(v, _)| (lined_up(v - d0), v - d0))
        .collect();
    counts.sort_unstable_by_key(|&(n, c)| (std::cmp::Reverse(n), c));
    match counts.as_slice() {
        [(n, c), rest @ ..] if *n >= 2.min(first.len()) && n * 2 >= first.len() => {
            match rest.first() {
                Some((m, _)) if m == n => LinedUp::Tied,
                _ => LinedUp::By(*c),
            }
        }
        _ => LinedUp::Not,
    }
}

/// The vblank nearest `t` (ns on `CLOCK_MONOTONIC`), within [`VBLANK_WITHIN_NS`].
pub fn nearest(vblanks: &[(i128, usize)], t: i128) -> Option<(i128, usize)> {
    let at = vblanks.partition_point(|&(v, _)| v < t);
    [at.checked_sub(1), Some(at)]
        .into_iter()
        .flatten()
        .filter_map(|i| vblanks.get(i).copied())
        .filter(|&(v, _)| (v - t).abs() <= VBLANK_WITHIN_NS)
        .min_by_key(|&(v, _)| (v - t).abs())
}

#[cfg(test)]
mod tests {
    use super::super::compositor::CompositorTrace;
    use super::*;
    use crate::ingest::source::Stream;

    const TIMELINE: &str = r#"Date: 2026-12-07 UTC
[16:36:57.588] Command line: weston --logger-scopes=timeline,log
{ "id":1, "type":"weston_output", "name":"headless" }
{ "id":4, "type":"weston_surface", "desc":"top-level window 'presentation-shm: feedback [Delay 0 msecs]'" }
{ "T":[10, 100000], "N":"core_commit_damage", "ws":4 }
{ "T":[10, 200000], "N":"core_repaint_req", "wo":1 }
{ "T":[10, 300000], "N":"core_repaint_begin", "wo":1 }
{ "T":[10, 900000], "N":"core_repaint_posted", "wo":1 }
{ "T":[10, 16900000], "N":"core_repaint_finished", "wo":1, "vblank_monotonic":[10, 16899000] }
{ "T":[10, 
"#;

    fn timeline() -> Timeline {
        let read = super::super::compositor::read(Stream::of(TIMELINE.as_bytes()), "t", None);
        match read.unwrap() {
            CompositorTrace::Weston(t) => t,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn events_and_surfaces_are_read_and_other_lines_skipped() {
        let t = timeline();
        assert_eq!(t.events.len(), 4);
        assert_eq!(t.events[0].kind, Kind::CommitDamage);
        assert_eq!(
            (t.events[0].t_ns, t.events[0].surface),
            (10_000_100_000, Some(4))
        );
        assert_eq!(t.events[3].vblank_ns, Some(10_016_899_000));
        assert_eq!(t.malformed, 1);
        assert_eq!(
            t.surface_titled("presentation-shm: feedback [Delay 0 msecs]"),
            Some(4)
        );
        assert_eq!(t.surface_titled("other"), None);
    }

    #[test]
    fn a_display_time_finds_the_repaint_that_showed_it_on_the_presentation_clock() {
        let t = timeline();
        let v = vblanks(&t);
        // the presentation clock 2 s behind CLOCK_MONOTONIC
        let LinedUp::By(c) = mono_minus_presentation(&[8_016_899_000], &v) else {
            panic!("one vblank, one constant")
        };
        assert_eq!(c, 2_000_000_000);
        let (_, at) = nearest(&v, 8_016_899_000 + c).unwrap();
        let r = repaint_at(&t, at, c).unwrap();
        assert_eq!(
            (r.begin_ns, r.posted_ns, r.vblank_ns, r.finished_ns),
            (
                8_000_300_000,
                8_000_900_000,
                Some(8_016_899_000),
                8_016_900_000
            )
        );
        assert_eq!(nearest(&v, 5), None);
    }

    #[test]
    fn the_clocks_constant_is_the_one_that_lines_the_most_displays_up() {
        // vblanks at an unsteady rate, as a headless output's timer gives them
        let vblanks: Vec<(i128, usize)> = (0..50)
            .map(|k: i128| {
                (
                    1_000_000 + k * 16_666_666 + ((k * k * k + 7 * k) % 101) * 100_000,
                    k as usize,
                )
            })
            .collect();
        // displays every other vblank, 3 ms + 1 µs behind
        let displays: Vec<i128> = vblanks
            .iter()
            .step_by(2)
            .take(20)
            .map(|&(v, _)| v - 3_001_000)
            .collect();
        assert_eq!(
            mono_minus_presentation(&displays, &vblanks),
            LinedUp::By(3_001_000)
        );
        // at a steady rate, a period away lines them up alike
        let steady: Vec<(i128, usize)> = (0..50)
            .map(|k| (1_000_000 + k * 16_666_666, k as usize))
            .collect();
        let displays: Vec<i128> = steady
            .iter()
            .step_by(2)
            .take(20)
            .map(|&(v, _)| v - 3_001_000)
            .collect();
        assert_eq!(mono_minus_presentation(&displays, &steady), LinedUp::Tied);
        let off: Vec<i128> = (0..20).map(|k| 5_000_000 + k * 7_000_000).collect();
        assert_eq!(mono_minus_presentation(&off, &steady[..1]), LinedUp::Not);
    }
}
