//! A frame's stages, from the client's commit to the screen, out of the joined logs.
//!
//! A frame is a `wl_surface.commit` the client sent. The frame callbacks (`wl_surface.frame`) and
//! presentation feedbacks (`wp_presentation.feedback`) requested for a surface since its last
//! commit belong to this commit (wayland.xml: they are double-buffered state); their `done` and
//! `presented` events end its stages. Each stamp is the one its log printed: a request's where
//! its sender marshalled it and where its receiver dispatched it, an event's likewise, so a
//! stage includes the time a message waited in a socket or a queue.

#[cfg(test)]
use super::join::Join;
#[cfg(test)]
use super::log::Log;
use super::log::Msg;

/// The stages, in their order along a frame's path, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stage {
    /// the client sends the commit → the compositor dispatches it
    CommitToCompositor,
    /// → the compositor sends the commit's frame callback `done`
    CompositorToFrameDone,
    /// → the compositor sends `wp_presentation_feedback.presented`
    CompositorToPresented,
    /// → the client dispatches `presented`
    PresentedToClient,
    /// the client's whole: its commit → its dispatch of `presented`
    CommitToPresented,
    /// the client's commit → the display time inside `presented`, on the logs' clock
    CommitToDisplay,
    /// with a compositor timeline: the compositor's commit → the repaint that showed it begins
    CompositorToRepaint,
    /// the repaint: its beginning → handed to the display
    Repaint,
    /// handed to the display → its vblank
    RepaintToVblank,
}

impl Stage {
    /// Every stage, in order.
    pub const ALL: [Stage; 9] = [
        Stage::CommitToCompositor,
        Stage::CompositorToFrameDone,
        Stage::CompositorToPresented,
        Stage::PresentedToClient,
        Stage::CommitToPresented,
        Stage::CommitToDisplay,
        Stage::CompositorToRepaint,
        Stage::Repaint,
        Stage::RepaintToVblank,
    ];

    /// Its name in every output.
    pub fn name(self) -> &'static str {
        match self {
            Stage::CommitToCompositor => "commit_to_compositor",
            Stage::CompositorToFrameDone => "compositor_to_frame_done",
            Stage::CompositorToPresented => "compositor_to_presented",
            Stage::PresentedToClient => "presented_to_client",
            Stage::CommitToPresented => "commit_to_presented",
            Stage::CommitToDisplay => "commit_to_display",
            Stage::CompositorToRepaint => "compositor_to_repaint",
            Stage::Repaint => "repaint",
            Stage::RepaintToVblank => "repaint_to_vblank",
        }
    }

    /// Its index in [`Stage::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

/// The process whose track shows a stage in a timeline export (`export --to perfetto`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Side {
    /// the client
    Client,
    /// the compositor, as its WAYLAND_DEBUG log shows it
    Compositor,
    /// the compositor's own timeline (weston's `timeline` scope)
    Timeline,
}

impl Side {
    /// Its track's name.
    pub fn name(self) -> &'static str {
        match self {
            Side::Client => "client",
            Side::Compositor => "compositor",
            Side::Timeline => "compositor timeline",
        }
    }
}

impl Stage {
    /// The side whose track shows it. The client's holds what the client waits through: its
    /// commit on the way to the compositor's dispatch, `presented` on the way back, and its
    /// totals; the compositor's, what its log shows between dispatching the commit and sending
    /// the answers; the timeline's, the repaint. So a frame's path goes from the client to the
    /// compositor and back, and each crossing is an arrow between tracks.
    pub fn side(self) -> Side {
        match self {
            Stage::CommitToCompositor
            | Stage::PresentedToClient
            | Stage::CommitToPresented
            | Stage::CommitToDisplay => Side::Client,
            Stage::CompositorToFrameDone | Stage::CompositorToPresented => Side::Compositor,
            Stage::CompositorToRepaint | Stage::Repaint | Stage::RepaintToVblank => Side::Timeline,
        }
    }

    /// The stages that follow one another along a frame's path, each pair (first, then): the
    /// second starts where the first ends (the compositor's dispatch of the commit, its sending
    /// of `presented`, the repaint's beginning and its hand-over to the display), or, for
    /// `compositor_to_repaint`, at the commit's damage just after the dispatch. The
    /// compositor's answers fork from the dispatch; the client's totals cover the path and
    /// follow nothing.
    pub const FOLLOWS: [(Stage, Stage); 6] = [
        (Stage::CommitToCompositor, Stage::CompositorToFrameDone),
        (Stage::CommitToCompositor, Stage::CompositorToPresented),
        (Stage::CompositorToPresented, Stage::PresentedToClient),
        (Stage::CommitToCompositor, Stage::CompositorToRepaint),
        (Stage::CompositorToRepaint, Stage::Repaint),
        (Stage::Repaint, Stage::RepaintToVblank),
    ];
}

impl std::str::FromStr for Stage {
    type Err = String;

    fn from_str(s: &str) -> Result<Stage, String> {
        Stage::ALL
            .into_iter()
            .find(|stage| stage.name() == s)
            .ok_or_else(|| format!("no stage '{s}'"))
    }
}

/// A stamp on both sides: where the client printed a message, and where the compositor did
/// (`None`: the message was not found in the server log).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Seen {
    /// the client's stamp, ns (a log's µs stamp times 1,000; a probe's own ns)
    pub client_ns: i64,
    /// the server's stamp, ns
    pub server_ns: Option<i64>,
}

/// What `presented` said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Presented {
    /// the event, on both sides
    pub seen: Seen,
    /// the display time, ns on the presentation clock
    pub display_ns: i128,
    /// the output's refresh period, ns (0: unknown)
    pub refresh_ns: u64,
    /// the output's vblank counter (0 where the compositor gives none, or gives one but does
    /// not say the frame was vsync'd)
    pub seq: u64,
}

/// How a frame's presentation feedback ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feedback {
    /// none was requested for it
    None,
    /// requested; no `presented` or `discarded` in the client log
    Pending,
    /// `discarded`: the frame was never shown
    Discarded,
    /// `presented`
    Presented(Presented),
}

/// One frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    /// the surface committed
    pub surface: u32,
    /// the commit's line in the client log
    pub line: u64,
    /// the commit
    pub commit: Seen,
    /// a buffer (not nil) was attached to the surface since its last commit
    pub attached: bool,
    /// the `done` of the frame callback requested for it
    pub done: Option<Seen>,
    /// its presentation feedback
    pub feedback: Feedback,
    /// the repaint that showed it, from a compositor timeline
    pub repaint: Option<Repaint>,
}

/// A frame's repaint, as the compositor's own timeline saw it, in ns on the logs' clock (`T`:
/// `i64`) once the timeline's clock is mapped onto it (on its own clock, `i128`, before):
/// weston's `timeline` scope ([`super::timeline`]) or Mir's LTTng trace ([`super::mir`]). Each
/// keeps its own nanoseconds, so that the differences between them are the timeline's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repaint<T = i64> {
    /// the frame's commit as the compositor took it (weston's `core_commit_damage`, Mir's
    /// `buffer_committed`), when it was found
    pub commit_ns: Option<T>,
    /// the repaint that showed it began (weston's `core_repaint_begin`, Mir's `began_frame`)
    pub begin_ns: T,
    /// it was handed to the display (weston's `core_repaint_posted`, Mir's `finished_frame`)
    pub posted_ns: T,
    /// its vblank, the frame's display time (weston's `vblank_monotonic`; Mir traces none)
    pub vblank_ns: Option<T>,
    /// the repaint's end (weston's `core_repaint_finished`, Mir's `finished_frame`)
    pub finished_ns: T,
}

impl Repaint<i128> {
    /// The repaint `by` ns later, on the logs' clock (`None`: a stamp past what 64-bit
    /// nanoseconds hold, which no log's is).
    pub fn onto_logs(self, by: i128) -> Option<Repaint> {
        let at = |t: i128| i64::try_from(t + by).ok();
        Some(Repaint {
            commit_ns: match self.commit_ns {
                Some(c) => Some(at(c)?),
                None => None,
            },
            begin_ns: at(self.begin_ns)?,
            posted_ns: at(self.posted_ns)?,
            vblank_ns: match self.vblank_ns {
                Some(v) => Some(at(v)?),
                None => None,
            },
            finished_ns: at(self.finished_ns)?,
        })
    }
}

impl Frame {
    /// The frame's value of `stage`, ns (`None`: not measured for this frame), the display
    /// time mapped onto the logs' clock with `offset_ns` (display time + offset = log time).
    pub fn stage_ns(&self, stage: Stage, offset_ns: Option<i128>) -> Option<i64> {
        let between = |a: i64, b: i64| b.checked_sub(a);
        let presented = match self.feedback {
            Feedback::Presented(p) => Some(p),
            _ => None,
        };
        match stage {
            Stage::CommitToCompositor => between(self.commit.client_ns, self.commit.server_ns?),
            Stage::CompositorToFrameDone => between(self.commit.server_ns?, self.done?.server_ns?),
            Stage::CompositorToPresented => {
                between(self.commit.server_ns?, presented?.seen.server_ns?)
            }
            Stage::PresentedToClient => {
                let p = presented?;
                between(p.seen.server_ns?, p.seen.client_ns)
            }
            Stage::CommitToPresented => between(self.commit.client_ns, presented?.seen.client_ns),
            Stage::CommitToDisplay => {
                let display = presented?.display_ns + offset_ns?;
                i64::try_from(display - i128::from(self.commit.client_ns)).ok()
            }
            Stage::CompositorToRepaint => {
                let r = self.repaint?;
                between(r.commit_ns.or(self.commit.server_ns)?, r.begin_ns)
            }
            Stage::Repaint => self.repaint.and_then(|r| between(r.begin_ns, r.posted_ns)),
            Stage::RepaintToVblank => {
                let r = self.repaint?;
                between(r.posted_ns, r.vblank_ns?)
            }
        }
    }
}

impl Frame {
    /// Where `stage` starts, ns on the logs' clock (`None`: not measured for this frame). The
    /// timeline's stamps keep their nanoseconds, so that each of its stages starts exactly
    /// where the one before it ends.
    pub fn stage_start_ns(&self, stage: Stage) -> Option<i64> {
        match stage {
            // from the commit as the compositor took it, where the timeline gave it, as its
            // value is
            Stage::CompositorToRepaint => self.repaint?.commit_ns.or(self.commit.server_ns),
            Stage::Repaint => Some(self.repaint?.begin_ns),
            Stage::RepaintToVblank => Some(self.repaint?.posted_ns),
            Stage::CommitToCompositor | Stage::CommitToPresented | Stage::CommitToDisplay => {
                Some(self.commit.client_ns)
            }
            Stage::CompositorToFrameDone | Stage::CompositorToPresented => self.commit.server_ns,
            Stage::PresentedToClient => match self.feedback {
                Feedback::Presented(p) => p.seen.server_ns,
                _ => None,
            },
        }
    }
}

/// The frames of the client log, in the order of their commits, and the presentation clock the
/// client was told (`wp_presentation.clock_id`), from a whole-log join (for tests).
#[cfg(test)]
pub fn frames(client: &Log, server: &Log, join: &Join) -> (Vec<Frame>, Option<u32>) {
    let mut builder = Frames::default();
    for (i, m) in client.messages.iter().enumerate() {
        let server_us = join.matched[i].map(|p| server.messages[p as usize].at_us);
        builder.message(m, server_us);
    }
    builder.finish()
}

/// The frames of a client log, followed message by message in the log's order.
#[derive(Debug, Default)]
pub struct Frames {
    frames: Vec<Frame>,
    /// per surface, the callbacks and feedbacks asked for since its last commit
    pending: rustc_hash::FxHashMap<u32, (Vec<u32>, Vec<u32>)>,
    /// the surfaces a buffer was attached to since their last commit
    attached: rustc_hash::FxHashSet<u32>,
    /// the frame each live callback and feedback id belongs to
    callbacks: rustc_hash::FxHashMap<u32, usize>,
    feedbacks: rustc_hash::FxHashMap<u32, usize>,
    clock_id: Option<u32>,
}

impl Frames {
    /// The client's next message, and the server's stamp of it where the join found it.
    pub fn message(&mut self, m: &Msg, server_us: Option<i64>) {
        let seen = Seen {
            client_ns: m.at_us.saturating_mul(1_000),
            server_ns: server_us.map(|us| us.saturating_mul(1_000)),
        };
        match (m.sent, m.interface(), m.name()) {
            (true, "wl_surface", "frame") => {
                if let Some(cb) = new_id(m.args()) {
                    self.pending.entry(m.id()).or_default().0.push(cb);
                }
            }
            (true, "wp_presentation", "feedback") => {
                if let Some((surface, fb)) = feedback_args(m) {
                    self.pending.entry(surface).or_default().1.push(fb);
                }
            }
            (true, "wl_surface", "attach") => {
                if m.args().starts_with("nil") {
                    self.attached.remove(&m.id());
                } else {
                    self.attached.insert(m.id());
                }
            }
            (true, "wl_surface", "commit") => self.commit(m, seen),
            (false, "wl_callback", "done") => {
                if let Some(k) = self.callbacks.remove(&m.id()) {
                    self.frames[k].done.get_or_insert(seen);
                }
            }
            (false, "wp_presentation_feedback", "presented") => {
                if let (Some(k), Some(p)) = (self.feedbacks.remove(&m.id()), presented(m, seen)) {
                    self.frames[k].feedback = Feedback::Presented(p);
                }
            }
            (false, "wp_presentation_feedback", "discarded") => {
                if let Some(k) = self.feedbacks.remove(&m.id()) {
                    self.frames[k].feedback = Feedback::Discarded;
                }
            }
            (false, "wp_presentation", "clock_id") => {
                self.clock_id = m.args().trim().parse().ok();
            }
            _ => {}
        }
    }

    /// A new frame, owning the callbacks and feedbacks asked for since the surface's last
    /// commit.
    fn commit(&mut self, m: &Msg, seen: Seen) {
        let (cbs, fbs) = self.pending.remove(&m.id()).unwrap_or_default();
        let k = self.frames.len();
        for cb in cbs {
            self.callbacks.insert(cb, k);
        }
        for fb in &fbs {
            self.feedbacks.insert(*fb, k);
        }
        self.frames.push(Frame {
            surface: m.id(),
            line: m.line,
            commit: seen,
            attached: self.attached.remove(&m.id()),
            done: None,
            feedback: if fbs.is_empty() {
                Feedback::None
            } else {
                Feedback::Pending
            },
            repaint: None,
        });
    }

    /// The frames in the order of their commits, and the presentation clock.
    pub fn finish(self) -> (Vec<Frame>, Option<u32>) {
        (self.frames, self.clock_id)
    }
}

/// The id of a lone `new id iface@N` argument.
fn new_id(args: &str) -> Option<u32> {
    let object = args.trim().strip_prefix("new id ")?;
    object.rsplit_once('@')?.1.parse().ok()
}

/// `feedback(wl_surface@S, new id wp_presentation_feedback@F)`: S and F.
fn feedback_args(m: &Msg) -> Option<(u32, u32)> {
    let (surface, fb) = m.args().split_once(", ")?;
    let surface = surface.rsplit_once('@')?.1.parse().ok()?;
    Some((surface, new_id(fb)?))
}

/// `presented(tv_sec_hi, tv_sec_lo, tv_nsec, refresh, seq_hi, seq_lo, flags)`.
fn presented(m: &Msg, seen: Seen) -> Option<Presented> {
    let n: Vec<u64> = m
        .args()
        .split(", ")
        .map(|a| a.trim().parse::<u64>())
        .collect::<Result<_, _>>()
        .ok()?;
    let [sec_hi, sec_lo, nsec, refresh, seq_hi, seq_lo, flags] = n[..] else {
        return None;
    };
    if sec_hi > u64::from(u32::MAX) || sec_lo > u64::from(u32::MAX) || nsec >= 1_000_000_000 {
        return None;
    }
    let secs = (sec_hi << 32) | sec_lo;
    Some(Presented {
        seen,
        display_ns: i128::from(secs) * 1_000_000_000 + i128::from(nsec),
        refresh_ns: refresh,
        seq: match flags & VSYNC {
            0 => 0,
            _ => (seq_hi << 32) | (seq_lo & 0xffff_ffff),
        },
    })
}

/// `wp_presentation_feedback.kind.vsync`: the frame was shown in step with the display's
/// refresh, so `seq` counts its vblanks. Without it `seq` is no vblank counter: mutter's
/// headless monitor steps it by one per presentation however far apart they are.
const VSYNC: u64 = 0x1;

/// Where the presentation clock lies against the logs' clock: every display time lies after
/// its frame's commit (client log) and before its `presented` was sent (server log; the
/// client's dispatch of it where the server log lacks it), so `log time = display time +
/// offset` holds for an offset in `[low_ns, high_ns]`, which every frame narrows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ClockOffset {
    /// the offset used: the interval's upper edge (a compositor sends `presented` right after
    /// the flip, so the display time lies just before it)
    pub estimate_ns: i128,
    /// the interval's edges
    pub low_ns: i128,
    /// (inclusive)
    pub high_ns: i128,
    /// frames that narrowed it
    pub frames: u64,
}

impl ClockOffset {
    /// How far the estimate can be from the true offset: the interval's width.
    pub fn bound_ns(&self) -> i128 {
        self.high_ns - self.low_ns
    }
}

/// The presentation clock's offset from the frames that were presented; `Err` with the index of
/// the first frame that leaves no offset (its display time cannot lie between its commit and its
/// `presented` together with the frames before it), `Ok(None)` where no frame was presented.
pub fn clock_offset(frames: &[Frame]) -> Result<Option<ClockOffset>, usize> {
    let mut offset: Option<ClockOffset> = None;
    for (k, f) in frames.iter().enumerate() {
        let Feedback::Presented(p) = f.feedback else {
            continue;
        };
        let commit = i128::from(f.commit.client_ns);
        let sent = i128::from(p.seen.server_ns.unwrap_or(p.seen.client_ns));
        let (low, high) = (commit - p.display_ns, sent - p.display_ns);
        let o = offset.get_or_insert(ClockOffset {
            estimate_ns: high,
            low_ns: low,
            high_ns: high,
            frames: 0,
        });
        o.low_ns = o.low_ns.max(low);
        o.high_ns = o.high_ns.min(high);
        o.frames += 1;
        if o.low_ns > o.high_ns {
            return Err(k);
        }
        o.estimate_ns = o.high_ns;
    }
    Ok(offset)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frames::join::join;
    use crate::frames::log::read;
    use crate::ingest::source::Stream;

    #[test]
    fn seq_counts_vblanks_only_where_presented_says_the_frame_was_vsyncd() {
        let log = read(
            Stream::of(
                "[1.000] wp_presentation_feedback@9.presented(0, 21472, 856803000, 16666667, 0, 5, 4)\n\
                 [1.000] wp_presentation_feedback@9.presented(1, 2, 3, 16666667, 1, 5, 5)\n"
                    .as_bytes(),
            ),
            "t",
            None,
        )
        .unwrap();
        let seen = Seen {
            client_ns: 1_000_000,
            server_ns: None,
        };
        let p: Vec<Presented> = log
            .messages
            .iter()
            .map(|m| presented(m, seen).unwrap())
            .collect();
        // flags 4 (hw_completion alone): mutter's headless count of presentations, left out
        assert_eq!((p[0].seq, p[0].display_ns), (0, 21_472_856_803_000));
        assert_eq!(p[0].refresh_ns, 16_666_667);
        // flags 5 (vsync, hw_completion): seq_hi 1, seq_lo 5
        assert_eq!(p[1].seq, (1 << 32) + 5);
        assert_eq!(p[1].display_ns, ((1i128 << 32) + 2) * 1_000_000_000 + 3);
    }

    /// A frame with every stage, its log stamps in µs, the presentation clock 1,000 s behind
    /// the logs'.
    fn whole_frame(commit_ns: Option<i64>) -> (Frame, i128) {
        let offset = 1_000_000_000_000;
        let on_presentation = |us: i128| us * 1_000 - offset;
        let frame = Frame {
            surface: 3,
            line: 50,
            commit: Seen {
                client_ns: 1_000_000,
                server_ns: Some(1_040_000),
            },
            attached: true,
            done: Some(Seen {
                client_ns: 26_000_000,
                server_ns: Some(25_900_000),
            }),
            feedback: Feedback::Presented(Presented {
                seen: Seen {
                    client_ns: 42_500_000,
                    server_ns: Some(42_300_000),
                },
                display_ns: on_presentation(41_000),
                refresh_ns: 16_666_667,
                seq: 0,
            }),
            repaint: Some(Repaint {
                commit_ns: commit_ns.map(|us| us * 1_000),
                // the timeline's own nanoseconds
                begin_ns: 30_000_123,
                posted_ns: 31_000_456,
                vblank_ns: Some(41_000_000),
                finished_ns: 41_100_000,
            }),
        };
        (frame, offset)
    }

    #[test]
    fn each_stage_that_follows_another_starts_where_it_ends() {
        // the commit's damage where the timeline has it: at the dispatch, after it, or not found
        for damage in [None, Some(1_040i64), Some(1_500)] {
            let (f, offset) = whole_frame(damage);
            for (first, then) in Stage::FOLLOWS {
                let start = |s| f.stage_start_ns(s).unwrap();
                let end = start(first) + f.stage_ns(first, Some(offset)).unwrap();
                let name = format!("{damage:?}: {} then {}", first.name(), then.name());
                match (then, damage) {
                    (Stage::CompositorToRepaint, Some(d)) => {
                        assert_eq!(start(then), d * 1_000, "{name}")
                    }
                    _ => assert_eq!(end, start(then), "{name}"),
                }
            }
        }
    }

    #[test]
    fn the_stages_that_cross_between_processes_are_the_clients() {
        let sides = |side| -> Vec<&str> {
            Stage::ALL
                .into_iter()
                .filter(|s| s.side() == side)
                .map(Stage::name)
                .collect()
        };
        assert_eq!(
            sides(Side::Client),
            [
                "commit_to_compositor",
                "presented_to_client",
                "commit_to_presented",
                "commit_to_display"
            ]
        );
        // every arrow of a frame's path between two processes starts or ends on the client
        for (first, then) in Stage::FOLLOWS {
            if first.side() != then.side() {
                assert!(Side::Client == first.side() || Side::Client == then.side());
            }
        }
    }

    fn of(client: &str, server: &str) -> Vec<Frame> {
        let c = read(Stream::of(client.as_bytes()), "c", None).unwrap();
        let s = read(Stream::of(server.as_bytes()), "s", None).unwrap();
        let j = join(&c, &s, 1_000_000);
        frames(&c, &s, &j).0
    }

    const CLIENT: &str = "\
[1000.000] wp_presentation@5.clock_id(1)
[1010.000]  -> wl_surface@3.frame(new id wl_callback@7)
[1010.010]  -> wp_presentation@5.feedback(wl_surface@3, new id wp_presentation_feedback@9)
[1010.020]  -> wl_surface@3.commit()
[1026.500] wl_callback@7.done(26)
[1027.000] wp_presentation_feedback@9.presented(0, 5, 1000000, 16666666, 0, 42, 1)
";
    const SERVER: &str = "\
[999.900]  -> wp_presentation@5.clock_id(1)
[1010.100] wl_surface@3.frame(new id wl_callback@7)
[1010.110] wp_presentation@5.feedback(wl_surface@3, new id wp_presentation_feedback@9)
[1010.120] wl_surface@3.commit()
[1026.400]  -> wl_callback@7.done(26)
[1026.800]  -> wp_presentation_feedback@9.presented(0, 5, 1000000, 16666666, 0, 42, 1)
";

    #[test]
    fn a_frames_stages_are_the_differences_of_its_stamps_on_both_sides() {
        let f = of(CLIENT, SERVER);
        assert_eq!(f.len(), 1);
        let at = |stage| f[0].stage_ns(stage, Some(0));
        // by hand: 1010.120 - 1010.020 ms, 1026.400 - 1010.120, 1026.800 - 1010.120, ...
        assert_eq!(at(Stage::CommitToCompositor), Some(100_000));
        assert_eq!(at(Stage::CompositorToFrameDone), Some(16_280_000));
        assert_eq!(at(Stage::CompositorToPresented), Some(16_680_000));
        assert_eq!(at(Stage::PresentedToClient), Some(200_000));
        assert_eq!(at(Stage::CommitToPresented), Some(16_980_000));
        let parts: i64 = [
            Stage::CommitToCompositor,
            Stage::CompositorToPresented,
            Stage::PresentedToClient,
        ]
        .into_iter()
        .map(|s| at(s).unwrap())
        .sum();
        assert_eq!(parts, at(Stage::CommitToPresented).unwrap());
        let Feedback::Presented(p) = f[0].feedback else {
            panic!("presented")
        };
        assert_eq!(
            (p.display_ns, p.refresh_ns, p.seq),
            (5_001_000_000, 16_666_666, 42)
        );
    }

    #[test]
    fn the_clock_offset_lies_between_every_commit_and_its_presented() {
        let f = of(CLIENT, SERVER);
        let o = clock_offset(&f).unwrap().unwrap();
        // display 5.001 s; commit 1010.020 ms; presented sent 1026.800 ms
        assert_eq!(o.low_ns, 1_010_020_000 - 5_001_000_000);
        assert_eq!(o.high_ns, 1_026_800_000 - 5_001_000_000);
        assert_eq!(o.estimate_ns, o.high_ns);
        assert_eq!(o.bound_ns(), 16_780_000);
        let display = f[0].stage_ns(Stage::CommitToDisplay, Some(o.estimate_ns));
        assert_eq!(display, Some(16_780_000));
    }

    #[test]
    fn frames_whose_display_times_leave_no_offset_are_an_error() {
        let mut f = of(CLIENT, SERVER);
        let mut later = f[0];
        // a second frame shown 1 s later on the presentation clock but committed 20 ms later
        later.commit.client_ns += 20_000_000;
        if let Feedback::Presented(p) = &mut later.feedback {
            p.display_ns += 1_000_000_000;
            p.seen.server_ns = p.seen.server_ns.map(|s| s + 20_000_000);
        }
        f.push(later);
        assert_eq!(clock_offset(&f), Err(1));
    }

    #[test]
    fn callbacks_and_feedbacks_belong_to_the_next_commit_of_their_surface() {
        let client = "\
[1.000]  -> wl_surface@3.frame(new id wl_callback@7)
[1.001]  -> wl_surface@4.commit()
[1.002]  -> wl_surface@3.commit()
[2.000] wl_callback@7.done(2)
";
        let f = of(client, "");
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].done, None);
        assert_eq!(f[1].done.map(|d| d.client_ns), Some(2_000_000));
        assert_eq!(f[1].feedback, Feedback::None);
        assert_eq!(f[1].stage_ns(Stage::CommitToCompositor, None), None);
    }

    #[test]
    fn stage_names_are_read_back() {
        for stage in Stage::ALL {
            assert_eq!(stage.name().parse::<Stage>(), Ok(stage));
        }
    }
}
