//! Frame pacing: each frame's display time against the one before it on its surface, in the
//! output's refresh periods, and for each frame shown later than usual, the stage that ran
//! longest against its own median (the attribution PresentMon and Android's FrameTimeline
//! give).
//!
//! "Later than usual" is against the surface's own usual interval (the median, in periods), not
//! against one period: a client that draws every other vblank by design is not late.

use serde::Serialize;

use super::stages::{Feedback, Frame, Stage};

/// What may be blamed for a late frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// the client committed late (its commit after the one before came later than usual)
    Client,
    /// [`Stage::CommitToCompositor`]
    CommitToCompositor,
    /// [`Stage::CompositorToPresented`]
    CompositorToPresented,
}

impl Cause {
    /// Its name in every output.
    pub fn name(self) -> &'static str {
        match self {
            Cause::Client => "client",
            Cause::CommitToCompositor => Stage::CommitToCompositor.name(),
            Cause::CompositorToPresented => Stage::CompositorToPresented.name(),
        }
    }
}

/// A frame shown later than usual.
#[derive(Debug, Clone, Serialize)]
pub struct Late {
    /// its surface
    pub surface: u32,
    /// its commit's line in the client log
    pub line: u64,
    /// refresh periods since the surface's frame before it was shown
    pub periods: u64,
    /// what ran longest against its median, and by how much (ns over it)
    pub cause: Cause,
    /// (ns)
    pub excess_ns: i64,
    /// the frame's stages (ns; absent: not measured)
    pub stages: Vec<(&'static str, Option<i64>)>,
}

/// The pacing of a run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Pacing {
    /// frames presented
    pub presented: u64,
    /// frames discarded (never shown)
    pub discarded: u64,
    /// frames whose feedback never came (the log ended first)
    pub pending: u64,
    /// the refresh period most frames were presented with (ns; 0: not given)
    pub refresh_ns: u64,
    /// display intervals: how many frames came this many periods after the one before
    pub intervals: Vec<(u64, u64)>,
    /// frames shown later than their surface's usual interval
    pub late: u64,
    /// late frames by what ran longest
    pub causes: Vec<(Cause, u64)>,
    /// the late frames that waited longest (at most [`WORST`]), longest first
    pub worst: Vec<Late>,
}

/// Late frames listed, at most.
pub const WORST: usize = 10;

/// The pacing of `frames`, with display times on the logs' clock by `offset_ns`.
pub fn pacing(frames: &[Frame], offset_ns: Option<i128>) -> Pacing {
    let mut pacing = Pacing::default();
    let mut refresh: rustc_hash::FxHashMap<u64, u64> = Default::default();
    for f in frames {
        match f.feedback {
            Feedback::Presented(p) => {
                pacing.presented += 1;
                *refresh.entry(p.refresh_ns).or_default() += 1;
            }
            Feedback::Discarded => pacing.discarded += 1,
            Feedback::Pending => pacing.pending += 1,
            Feedback::None => {}
        }
    }
    pacing.refresh_ns = refresh
        .into_iter()
        .max_by_key(|&(r, n)| (n, r))
        .map_or(0, |(r, _)| r);
    let medians = Medians::of(frames, offset_ns);
    let mut surfaces: Vec<u32> = frames.iter().map(|f| f.surface).collect();
    surfaces.sort_unstable();
    surfaces.dedup();
    let mut intervals: rustc_hash::FxHashMap<u64, u64> = Default::default();
    let mut late = Vec::new();
    for surface in surfaces {
        let shown = shown(frames, surface);
        let periods: Vec<u64> = shown
            .windows(2)
            .map(|w| periods(&frames[w[0]], &frames[w[1]]))
            .collect();
        for &n in &periods {
            *intervals.entry(n).or_default() += 1;
        }
        let usual = median(&periods).unwrap_or(1);
        for (w, &n) in shown.windows(2).zip(&periods) {
            if n > usual {
                late.push(blame(w[1], n, frames, &medians, offset_ns));
            }
        }
    }
    pacing.intervals = intervals.into_iter().collect();
    pacing.intervals.sort_unstable();
    pacing.late = late.len() as u64;
    let mut causes: rustc_hash::FxHashMap<Cause, u64> = Default::default();
    for l in &late {
        *causes.entry(l.cause).or_default() += 1;
    }
    pacing.causes = causes.into_iter().collect();
    pacing.causes.sort_unstable();
    late.sort_by_key(|l| {
        (
            std::cmp::Reverse(l.periods),
            std::cmp::Reverse(l.excess_ns),
            l.line,
        )
    });
    late.truncate(WORST);
    pacing.worst = late;
    pacing
}

/// The presented frames of `surface` (indices into `frames`), in the order they were shown.
fn shown(frames: &[Frame], surface: u32) -> Vec<usize> {
    let mut shown: Vec<usize> = (0..frames.len())
        .filter(|&k| {
            let f = &frames[k];
            f.surface == surface && matches!(f.feedback, Feedback::Presented(_))
        })
        .collect();
    shown.sort_by_key(|&k| display_ns(&frames[k]));
    shown
}

fn display_ns(f: &Frame) -> i128 {
    match f.feedback {
        Feedback::Presented(p) => p.display_ns,
        _ => 0,
    }
}

/// Refresh periods from `a`'s display to `b`'s: the vblank counter's step where the compositor
/// counts, else the display times' difference in periods, rounded (1 where the period is not
/// given).
fn periods(a: &Frame, b: &Frame) -> u64 {
    let (Feedback::Presented(pa), Feedback::Presented(pb)) = (a.feedback, b.feedback) else {
        return 0;
    };
    if pa.seq != 0 && pb.seq > pa.seq {
        return pb.seq - pa.seq;
    }
    if pb.refresh_ns == 0 {
        return 1;
    }
    let delta = (pb.display_ns - pa.display_ns).max(0) as u128;
    let refresh = u128::from(pb.refresh_ns);
    ((delta + refresh / 2) / refresh) as u64
}

/// The median (the lower of the middle two) of `values`.
fn median<T: Copy + Ord>(values: &[T]) -> Option<T> {
    let mut v = values.to_vec();
    v.sort_unstable();
    (!v.is_empty()).then(|| v[(v.len() - 1) / 2])
}

/// Each cause's median, ns.
struct Medians {
    client: Option<i64>,
    to_compositor: Option<i64>,
    to_presented: Option<i64>,
}

impl Medians {
    fn of(frames: &[Frame], offset_ns: Option<i128>) -> Medians {
        let of = |stage| {
            let v: Vec<i64> = frames
                .iter()
                .filter_map(|f| f.stage_ns(stage, offset_ns))
                .collect();
            median(&v)
        };
        let gaps: Vec<i64> = (0..frames.len())
            .filter_map(|k| commit_gap_ns(frames, k))
            .collect();
        Medians {
            client: median(&gaps),
            to_compositor: of(Stage::CommitToCompositor),
            to_presented: of(Stage::CompositorToPresented),
        }
    }
}

/// The time from the surface's commit before frame `k` to frame `k`'s, ns.
fn commit_gap_ns(frames: &[Frame], k: usize) -> Option<i64> {
    let f = &frames[k];
    let before = frames[..k].iter().rev().find(|g| g.surface == f.surface)?;
    Some(f.commit.client_ns - before.commit.client_ns)
}

/// What ran longest against its median in the late frame `k`, shown `n` periods after the one
/// before it.
fn blame(k: usize, n: u64, frames: &[Frame], medians: &Medians, offset_ns: Option<i128>) -> Late {
    let f = &frames[k];
    let candidates = [
        (Cause::Client, commit_gap_ns(frames, k), medians.client),
        (
            Cause::CommitToCompositor,
            f.stage_ns(Stage::CommitToCompositor, offset_ns),
            medians.to_compositor,
        ),
        (
            Cause::CompositorToPresented,
            f.stage_ns(Stage::CompositorToPresented, offset_ns),
            medians.to_presented,
        ),
    ];
    let (cause, excess_ns) = candidates
        .into_iter()
        .filter_map(|(cause, value, median)| Some((cause, value? - median?)))
        .max_by_key(|&(cause, excess)| (excess, std::cmp::Reverse(cause)))
        .unwrap_or((Cause::Client, 0));
    Late {
        surface: f.surface,
        line: f.line,
        periods: n,
        cause,
        excess_ns,
        stages: Stage::ALL
            .iter()
            .map(|&s| (s.name(), f.stage_ns(s, offset_ns)))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frames::stages::{Presented, Seen};

    /// A frame of surface 3 committed at `commit_us` (client) and `dispatch_us` (server),
    /// shown at `display_ms` and said so at `display_ms` + 0.1 ms.
    fn frame(commit_us: i64, dispatch_us: i64, display_ms: i64) -> Frame {
        Frame {
            surface: 3,
            line: commit_us as u64,
            commit: Seen {
                client_ns: commit_us * 1_000,
                server_ns: Some(dispatch_us * 1_000),
            },
            attached: true,
            done: None,
            repaint: None,
            feedback: Feedback::Presented(Presented {
                seen: Seen {
                    client_ns: (display_ms * 1_000 + 200) * 1_000,
                    server_ns: Some((display_ms * 1_000 + 100) * 1_000),
                },
                display_ns: i128::from(display_ms) * 1_000_000,
                refresh_ns: 16_000_000,
                seq: 0,
            }),
        }
    }

    #[test]
    fn a_frame_shown_a_period_later_than_usual_is_late_and_blamed_on_what_ran_long() {
        // every 16 ms: commits at 0, 16, 32, 48 ms; the third dispatched 13 ms late, shown
        // at 64 ms instead of 48
        let frames = [
            frame(0, 100, 16),
            frame(16_000, 16_100, 32),
            frame(32_000, 45_000, 64),
            frame(48_000, 48_100, 80),
        ];
        let p = pacing(&frames, Some(0));
        assert_eq!((p.presented, p.refresh_ns), (4, 16_000_000));
        assert_eq!(p.intervals, [(1, 2), (2, 1)]);
        assert_eq!(p.late, 1);
        assert_eq!(p.causes, [(Cause::CommitToCompositor, 1)]);
        let worst = &p.worst[0];
        assert_eq!((worst.line, worst.periods), (32_000, 2));
        // 13 ms against a median of 0.1 ms
        assert_eq!(worst.excess_ns, 13_000_000 - 100_000);
    }

    #[test]
    fn a_vblank_counter_given_counts_the_periods_before_the_display_times() {
        // display times 16 ms apart (one period) but the counter steps 1, 3, 1: the counter
        // is the display's own, so the second interval is three periods
        let mut frames = [
            frame(0, 100, 16),
            frame(16_000, 16_100, 32),
            frame(32_000, 32_100, 48),
            frame(48_000, 48_100, 64),
        ];
        for (f, seq) in frames.iter_mut().zip([10, 11, 14, 15]) {
            if let Feedback::Presented(p) = &mut f.feedback {
                p.seq = seq;
            }
        }
        let p = pacing(&frames, Some(0));
        assert_eq!(p.intervals, [(1, 2), (3, 1)]);
        assert_eq!(p.late, 1);
    }

    #[test]
    fn a_client_that_commits_late_is_blamed_itself() {
        let frames = [
            frame(0, 100, 16),
            frame(16_000, 16_100, 32),
            frame(50_000, 50_100, 64),
            frame(66_000, 66_100, 80),
        ];
        let p = pacing(&frames, Some(0));
        assert_eq!(p.causes, [(Cause::Client, 1)]);
    }

    #[test]
    fn a_client_drawing_every_other_vblank_is_not_late() {
        let frames = [
            frame(0, 100, 32),
            frame(32_000, 32_100, 64),
            frame(64_000, 64_100, 96),
        ];
        let p = pacing(&frames, Some(0));
        assert_eq!((p.late, p.intervals.as_slice()), (0, &[(2, 2)][..]));
    }

    #[test]
    fn discarded_and_pending_frames_are_counted_not_paced() {
        let mut frames = vec![frame(0, 100, 16)];
        let mut d = frame(16_000, 16_100, 0);
        d.feedback = Feedback::Discarded;
        let mut q = frame(32_000, 32_100, 0);
        q.feedback = Feedback::Pending;
        frames.extend([d, q]);
        let p = pacing(&frames, Some(0));
        assert_eq!((p.presented, p.discarded, p.pending, p.late), (1, 1, 1, 0));
    }
}
