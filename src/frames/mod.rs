//! Where each frame's time goes, from the client's commit to the screen, across processes.
//!
//! Each side of a Wayland connection can print what it sends and dispatches (`WAYLAND_DEBUG`),
//! and each compositor logs only its own half. Both sides stamp with the same
//! `CLOCK_REALTIME`, so a client's log and its compositor's log can be joined message by
//! message ([`join`]), and a frame (a `wl_surface.commit`) followed from the client's commit to
//! the compositor's dispatch of it, its frame callback, its `presented`, the client's dispatch
//! of that, and the display time `presented` carries ([`stages`]), on the presentation clock
//! mapped onto the logs' clock from the data ([`stages::clock_offset`]). [`pacing`] says which
//! frames were shown late, and which stage ran long in each.
//!
//! The compositor's own events split its part further: weston's `timeline` log scope
//! ([`timeline`]) or Mir's LTTng trace ([`mir`]), read as a [`CompositorTrace`].
//!
//! The logs are read through the same reading engine as every other input
//! ([`crate::ingest::drive`]): compressed, mapped, from standard input, with Ctrl-C.

pub mod both;
pub mod compositor;
pub mod join;
pub mod live;
pub mod log;
pub mod mir;
pub mod pacing;
pub mod stages;
pub mod timeline;

use crate::doc::frames as doc;
use crate::doc::spans::SpanRecord;
use crate::ingest::Location;
use crate::span::{Group, Outcome, SeriesKey, SpanSink};
pub use compositor::{CompositorTrace, read as read_compositor_trace};
use log::{Log, Msg};
use stages::{ClockOffset, Feedback, Frame, Stage};

/// How the two logs are joined.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// the furthest a message is from its counterpart in the other log, µs
    pub window_us: i64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            window_us: DEFAULT_WINDOW_US,
        }
    }
}

/// [`Options::window_us`] by default: a second, past any dispatch delay of a client or a
/// compositor that is still running, and short against what repeats (a client's commits).
pub const DEFAULT_WINDOW_US: i64 = 1_000_000;

/// The two logs joined: the frames and what could be said of them.
#[derive(Debug, Clone)]
pub struct Analysis {
    /// every frame of the client log, in the order of its commits
    pub frames: Vec<Frame>,
    /// the presentation clock the compositor named (`wp_presentation.clock_id`)
    pub clock_id: Option<u32>,
    /// where the presentation clock lies against the logs' clock
    pub offset: Option<ClockOffset>,
    /// where the compositor trace's clock lies against the logs' clock
    /// (`log time = trace time + offset`), where one was used
    pub timeline_offset: Option<ClockOffset>,
    /// the pacing
    pub pacing: pacing::Pacing,
    /// how the logs joined
    pub joined: Joined,
    /// what the reader should know, one sentence each
    pub notes: Vec<String>,
    /// bytes read of the client's log and of the server's (none for a live capture)
    pub bytes: (u64, u64),
}

pub use crate::doc::frames::Joined;

/// The logs cannot be joined.
#[derive(Debug, thiserror::Error)]
pub enum FramesError {
    /// a log could not be read
    #[error(transparent)]
    Read(#[from] log::ReadError),
    /// a log has no protocol message
    #[error(
        "{file}: no WAYLAND_DEBUG message in it (was WAYLAND_DEBUG=1, or =server for a compositor, set?)"
    )]
    Empty {
        /// the log
        file: String,
    },
    /// the logs' stamps are of two dialects
    #[error(
        "the logs stamp in two ways ({client}: {client_dialect}; {server}: {server_dialect}): both sides must run one libwayland's stamps to be joined"
    )]
    Dialects {
        /// the client log
        client: String,
        /// its dialect
        client_dialect: &'static str,
        /// the server log
        server: String,
        /// its dialect
        server_dialect: &'static str,
    },
    /// a log mixes two dialects
    #[error("{location}: stamped in another way than the lines before it: is it two logs in one?")]
    Mixed {
        /// the first line of the other dialect
        location: Location,
    },
    /// the logs are not of one run
    #[error(
        "{client} and {server} are not logs of one run: {found} of the client's {total} messages are in the server log; the first that is not, {location}: {text}"
    )]
    NotOneRun {
        /// the client log
        client: String,
        /// the server log
        server: String,
        /// client messages found
        found: u64,
        /// of all
        total: u64,
        /// the first not found
        location: Location,
        /// what it says
        text: String,
    },
    /// the timeline is not of the logs' run
    #[error(
        "{timeline} is not a timeline of this run: none of its repaints' vblanks is the display time of a frame the client was told was presented"
    )]
    TimelineOfAnotherRun {
        /// the timeline
        timeline: String,
    },
    /// Mir's trace is not of the logs' run
    #[error(
        "{trace} is not Mir's trace of this run: none of its mir_server_wayland commits of a buffer lines up with the client's commits dispatched in the server log"
    )]
    MirTraceOfAnotherRun {
        /// the trace
        trace: String,
    },
    /// Mir's trace has no commit of a buffer
    #[error(
        "{trace}: no mir_server_wayland:sw_buffer_committed or hw_buffer_committed event could be read ({malformed} Mir events could not be): record `mir_server_wayland:*`, and print the trace with babeltrace2's default or --clock-seconds stamps"
    )]
    MirTraceWithoutCommits {
        /// the trace
        trace: String,
        /// Mir events whose fields or stamps could not be read
        malformed: u64,
    },
    /// the compositor trace has no event of either kind
    #[error(
        "{file}: neither weston's timeline (`--logger-scopes=timeline`) nor Mir's LTTng trace (babeltrace2's text of mir_server_* events) is in it"
    )]
    NoCompositorEvents {
        /// the trace
        file: String,
    },
    /// the timeline and the logs leave no offset
    #[error(
        "{timeline} and the logs leave no offset for the presentation clock: the compositor's events cannot all lie where the logs put them (is it the timeline of this run?)"
    )]
    TimelineDisagrees {
        /// the timeline
        timeline: String,
    },
    /// the frames leave no offset for the presentation clock
    #[error(
        "{location}: this frame's display time cannot lie between its commit and its `presented` as the frames' before it do: the presentation clock is not one steady clock in these logs"
    )]
    NoOffset {
        /// the frame's commit
        location: Location,
    },
}

/// Joins `client` and `server` and follows every frame.
pub fn analyse(client: Log, server: Log, options: Options) -> Result<Analysis, FramesError> {
    analyse_with(client, server, None, options)
}

/// [`analyse`], with the compositor's own trace of the same run ([`CompositorTrace`]): the
/// compositor's stages of each frame, and (weston's) the presentation clock pinned closer. The
/// logs are whole in memory; [`both::analyse_streams`] reads them as they are joined.
pub fn analyse_with(
    mut client: Log,
    mut server: Log,
    timeline: Option<&CompositorTrace>,
    options: Options,
) -> Result<Analysis, FramesError> {
    check(&client, &server)?;
    let (c, s) = (
        std::mem::take(&mut client.messages),
        std::mem::take(&mut server.messages),
    );
    let stopped = client.interrupted || server.interrupted;
    let followed = follow(
        c.into_iter(),
        s.into_iter(),
        client.dialect,
        options,
        &|| stopped,
    );
    conclude(&client, &server, followed, timeline)
}

/// The errors that two logs' stamps can make before any join: a log stamped in two ways, a log
/// with no message, logs stamped in two ways.
fn check(client: &Log, server: &Log) -> Result<(), FramesError> {
    for log in [client, server] {
        if let Some(location) = &log.mixed {
            return Err(FramesError::Mixed {
                location: location.clone(),
            });
        }
    }
    let (Some(cd), Some(sd)) = (client.dialect, server.dialect) else {
        let empty = if client.dialect.is_none() {
            client
        } else {
            server
        };
        return Err(FramesError::Empty {
            file: empty.file.clone(),
        });
    };
    if cd != sd {
        return Err(FramesError::Dialects {
            client: client.file.clone(),
            client_dialect: cd.name(),
            server: server.file.clone(),
            server_dialect: sd.name(),
        });
    }
    Ok(())
}

/// What following the two logs message by message gave.
#[derive(Debug, Default)]
struct Followed {
    frames: Vec<Frame>,
    clock_id: Option<u32>,
    tally: join::Tally,
    /// the client's titled window ([`Titles`])
    title: Option<(u32, String)>,
    /// the whole wrap periods the client's stamps were moved by
    shift_us: i64,
}

/// Joins the client's messages to the server's as they come ([`join::follow`]), the client's
/// moved onto the server's scale (whole wrap periods of `dialect`), and follows every frame.
///
/// Where a stop (Ctrl-C) ended the reads (`stopped`), the two logs were read to different
/// times: the client's messages after the last of the server's read are left out, not counted
/// as missing from it.
fn follow(
    client: impl Iterator<Item = Msg>,
    server: impl Iterator<Item = Msg>,
    dialect: Option<log::Dialect>,
    options: Options,
    stopped: &dyn Fn() -> bool,
) -> Followed {
    let (mut client, mut server) = (client.peekable(), server.peekable());
    let (Some(c), Some(s), Some(dialect)) = (client.peek(), server.peek(), dialect) else {
        return Followed::default();
    };
    let shift_us = scale_shift(c.at_us, s.at_us, dialect.period_us());
    let client = client.map(|mut m| {
        m.at_us += shift_us;
        m
    });
    let mut frames = stages::Frames::default();
    let mut titles = Titles::default();
    let tally = join::follow(client, server, options.window_us, stopped, |m, found| {
        frames.message(m, found.map(|f| f.at_us));
        titles.message(m);
    });
    let (frames, clock_id) = frames.finish();
    Followed {
        frames,
        clock_id,
        tally,
        title: titles.titled,
        shift_us,
    }
}

/// The frames followed, their presentation clock mapped, their pacing, and what the reader
/// should know; an error where the logs are not of one run or leave no clock mapping.
fn conclude(
    client: &Log,
    server: &Log,
    followed: Followed,
    timeline: Option<&CompositorTrace>,
) -> Result<Analysis, FramesError> {
    let Followed {
        mut frames,
        clock_id,
        tally,
        title,
        shift_us,
    } = followed;
    let (found, total) = (
        tally.requests.0 + tally.events.0,
        tally.requests.1 + tally.events.1,
    );
    if found * 2 < total {
        let first = tally.first_unmatched.clone().unwrap_or(join::Unfound {
            index: 0,
            line: 0,
            text: String::new(),
        });
        return Err(FramesError::NotOneRun {
            client: client.file.clone(),
            server: server.file.clone(),
            found,
            total,
            location: Location {
                file: client.file.clone(),
                line: first.line,
            },
            text: first.text,
        });
    }
    let mut offset = stages::clock_offset(&frames).map_err(|k| FramesError::NoOffset {
        location: Location {
            file: client.file.clone(),
            line: frames[k].line,
        },
    })?;
    let mut timeline_notes = Vec::new();
    let mut timeline_offset = None;
    match timeline {
        Some(CompositorTrace::Weston(t)) => {
            let pinned = with_timeline(title.as_ref(), &mut frames, offset, t)?;
            (offset, timeline_offset) = (pinned.presentation, pinned.timeline);
            timeline_notes.extend(pinned.note);
        }
        Some(CompositorTrace::Mir(t)) => {
            (timeline_offset, timeline_notes) = with_mir(&mut frames, t)?;
        }
        None => {}
    }
    let pacing = pacing::pacing(&frames, offset.map(|o| o.estimate_ns));
    let joined = Joined {
        requests_found: tally.requests.0,
        requests: tally.requests.1,
        events_found: tally.events.0,
        events: tally.events.1,
        gaps: tally
            .gaps
            .iter()
            .map(|g| format!("{}:{}-{}", client.file, g.lines.0, g.lines.1))
            .collect(),
        shift_us,
    };
    let mut notes = notes(client, server, &frames, &joined, clock_id);
    if tally.cut > 0 {
        notes.push(format!(
            "{}: {} messages read after the last of {}'s (the reads were stopped) are left out",
            client.file, tally.cut, server.file
        ));
    }
    notes.extend(timeline_notes);
    Ok(Analysis {
        frames,
        clock_id,
        offset,
        timeline_offset,
        pacing,
        joined,
        notes,
        bytes: (client.bytes, server.bytes),
    })
}

/// Each presented frame's repaint from the timeline (the `core_repaint_finished` whose vblank is
/// its display time, the clocks' constant taken out), its commit's `core_commit_damage` where its
/// surface is the window the client titled, and the presentation clock's offset narrowed by
/// them: a repaint finished before the compositor sent `presented` (`offset <= sent -
/// finished`), and a commit's damage was taken after the compositor printed the commit
/// (`offset >= dispatched - damage`). A note where the timeline cannot be used.
fn with_timeline(
    title: Option<&(u32, String)>,
    frames: &mut [Frame],
    offset: Option<ClockOffset>,
    t: &timeline::Timeline,
) -> Result<Pinned, FramesError> {
    let vblanks = timeline::vblanks(t);
    let displays: Vec<i128> = frames
        .iter()
        .filter_map(|f| match f.feedback {
            Feedback::Presented(p) => Some(p.display_ns),
            _ => None,
        })
        .collect();
    let Some(mut o) = offset.filter(|_| !displays.is_empty()) else {
        let note = format!(
            "{}: no frame was presented, so the timeline is not used",
            t.file
        );
        return Ok(Pinned::not_used(offset, note));
    };
    let c = match timeline::mono_minus_presentation(&displays, &vblanks) {
        timeline::LinedUp::By(c) => c,
        timeline::LinedUp::Not => {
            return Err(FramesError::TimelineOfAnotherRun {
                timeline: t.file.clone(),
            });
        }
        timeline::LinedUp::Tied => {
            let note = format!(
                "{}: its vblanks come at so steady a rate that which one showed a frame cannot be told: the timeline is not used",
                t.file
            );
            return Ok(Pinned::not_used(offset, note));
        }
    };
    // each frame's repaint, on the presentation clock until its offset is known
    let mut repaints: Vec<Option<stages::Repaint<i128>>> = vec![None; frames.len()];
    for (f, repaint) in frames.iter().zip(&mut repaints) {
        let Feedback::Presented(p) = f.feedback else {
            continue;
        };
        *repaint = timeline::nearest(&vblanks, p.display_ns + c)
            .and_then(|(_, at)| timeline::repaint_at(t, at, c));
        if let (Some(r), Some(sent)) = (*repaint, p.seen.server_ns) {
            o.high_ns = o.high_ns.min(i128::from(sent) - r.finished_ns);
        }
    }
    // the titled window's commits with damage, on the presentation clock, in order
    let surface =
        title.and_then(|(wl_surface, title)| Some((*wl_surface, t.surface_titled(title)?)));
    if let Some((wl_surface, ws)) = surface {
        let damage: Vec<i128> = t
            .events
            .iter()
            .filter(|e| e.kind == timeline::Kind::CommitDamage && e.surface == Some(ws))
            .map(|e| e.t_ns - c)
            .collect();
        let on_surface = frames.iter().zip(&mut repaints);
        for (f, repaint) in on_surface.filter(|(f, _)| f.surface == wl_surface) {
            let Some(dispatched) = f.commit.server_ns.map(i128::from) else {
                continue;
            };
            // the first damage at or after the dispatch on the upper edge's clock, close to it
            let at = damage.partition_point(|&d| d + o.high_ns < dispatched);
            let near = |d: &&i128| **d + o.high_ns - dispatched <= DAMAGE_WITHIN_NS;
            if let Some(&d) = damage.get(at).filter(near) {
                o.low_ns = o.low_ns.max(dispatched - d);
                if let Some(r) = repaint {
                    r.commit_ns = Some(d);
                }
            }
        }
    }
    if o.low_ns > o.high_ns {
        return Err(FramesError::TimelineDisagrees {
            timeline: t.file.clone(),
        });
    }
    o.estimate_ns = o.high_ns;
    for (f, r) in frames.iter_mut().zip(repaints) {
        f.repaint = r.and_then(|r| r.onto_logs(o.estimate_ns));
    }
    // log time = presentation time + o = timeline time - c + o
    let on_timeline = ClockOffset {
        estimate_ns: o.estimate_ns - c,
        low_ns: o.low_ns - c,
        high_ns: o.high_ns - c,
        frames: o.frames,
    };
    Ok(Pinned {
        presentation: Some(o),
        timeline: Some(on_timeline),
        note: None,
    })
}

/// The clocks as weston's timeline left them.
struct Pinned {
    /// the presentation clock's offset
    presentation: Option<ClockOffset>,
    /// the timeline's (`CLOCK_MONOTONIC`), where it was used
    timeline: Option<ClockOffset>,
    /// why it was not used
    note: Option<String>,
}

impl Pinned {
    fn not_used(presentation: Option<ClockOffset>, note: String) -> Pinned {
        Pinned {
            presentation,
            timeline: None,
            note: Some(note),
        }
    }
}

/// Each frame's composition from Mir's trace ([`mir::link`]), and the trace clock's offset;
/// notes of what was linked and what Mir's trace cannot give.
fn with_mir(
    frames: &mut [Frame],
    t: &mir::Trace,
) -> Result<(Option<ClockOffset>, Vec<String>), FramesError> {
    let mut notes = Vec::new();
    if t.malformed > 0 {
        notes.push(format!(
            "{}: {} Mir events whose fields could not be read were skipped",
            t.file, t.malformed
        ));
    }
    if t.compositions.is_empty() {
        notes.push(format!(
            "{}: no mir_server_compositor event: run Mir with --compositor-report=lttng (libmirserverlttng.so) for its compositions",
            t.file
        ));
    }
    let linked = match mir::link(frames, t) {
        Ok(linked) => linked,
        Err(mir::Unlinked::NotOfThisRun) => {
            return Err(FramesError::MirTraceOfAnotherRun {
                trace: t.file.clone(),
            });
        }
        Err(mir::Unlinked::NoCommits) => {
            return Err(FramesError::MirTraceWithoutCommits {
                trace: t.file.clone(),
                malformed: t.malformed,
            });
        }
        Err(mir::Unlinked::Tied) => {
            notes.push(format!(
                "{}: the client's commits come at so steady a rate that which one Mir took cannot be told: the trace is not used",
                t.file
            ));
            return Ok((None, notes));
        }
    };
    notes.push(format!(
        "{}: {} of the client's {} dispatched commits of a buffer found, {} of them shown by a composition in it; Mir traces no vblank, so repaint_to_vblank is not measured",
        t.file, linked.linked, linked.attached, linked.repainted
    ));
    if linked.early > 0 {
        notes.push(format!(
            "{}: {} frame callbacks were sent before the composition that showed their buffer began, and are left out of the clock's upper edge",
            t.file, linked.early
        ));
    }
    if linked.offset.frames == 0 {
        notes.push(format!(
            "{}: no frame callback bounds its clock from above: its stages are placed at the lower edge, of unknown error",
            t.file
        ));
        return Ok((None, notes));
    }
    Ok((Some(linked.offset), notes))
}

/// How far after its dispatch a commit's damage is looked for.
const DAMAGE_WITHIN_NS: i128 = 2_000_000;

/// The surface of the client's titled toplevel and its title (`xdg_wm_base.get_xdg_surface`,
/// `xdg_surface.get_toplevel`, `xdg_toplevel.set_title`; the last title set), followed
/// message by message.
#[derive(Debug, Default)]
struct Titles {
    xdg_surfaces: rustc_hash::FxHashMap<u32, u32>,
    toplevels: rustc_hash::FxHashMap<u32, u32>,
    titled: Option<(u32, String)>,
}

impl Titles {
    fn message(&mut self, m: &Msg) {
        if !m.sent {
            return;
        }
        let id_after = |arg: &str| {
            arg.rsplit_once('@')
                .and_then(|(_, id)| id.parse::<u32>().ok())
        };
        match (m.interface(), m.name()) {
            ("xdg_wm_base", "get_xdg_surface") => {
                if let Some((xdg, surface)) = m.args().split_once(", ")
                    && let (Some(x), Some(s)) = (id_after(xdg), id_after(surface))
                {
                    self.xdg_surfaces.insert(x, s);
                }
            }
            ("xdg_surface", "get_toplevel") => {
                if let Some(t) = id_after(m.args()) {
                    self.toplevels.insert(t, m.id());
                }
            }
            ("xdg_toplevel", "set_title") => {
                let title = m.args().strip_prefix('"').and_then(|a| a.strip_suffix('"'));
                let surface = self
                    .toplevels
                    .get(&m.id())
                    .and_then(|x| self.xdg_surfaces.get(x));
                if let (Some(title), Some(&surface)) = (title, surface) {
                    self.titled = Some((surface, title.to_string()));
                }
            }
            _ => {}
        }
    }
}

/// The whole wrap periods that put the client's first stamp `c` within half a period of the
/// server's `s` (each log's stamps are unwrapped from its own first one).
fn scale_shift(c: i64, s: i64, period: i64) -> i64 {
    let mut d = (s - c).rem_euclid(period);
    if d > period / 2 {
        d -= period;
    }
    s - d - c
}

fn notes(
    client: &Log,
    server: &Log,
    frames: &[Frame],
    joined: &Joined,
    clock: Option<u32>,
) -> Vec<String> {
    let mut notes = Vec::new();
    let (found, total) = (
        joined.requests_found + joined.events_found,
        joined.requests + joined.events,
    );
    if found < total {
        notes.push(format!(
            "{} of the client's {total} messages are not in {} (stretches: {})",
            total - found,
            server.file,
            joined.gaps.join(", ")
        ));
    }
    if frames.is_empty() {
        notes.push(format!("{}: the client committed no surface", client.file));
    }
    notes.extend(feedback_notes(frames, clock.is_some()));
    for log in [client, server] {
        if log.backwards > 0 {
            notes.push(format!(
                "{}: {} stamps went back (kept in place)",
                log.file, log.backwards
            ));
        }
        if log.malformed > 0 {
            notes.push(format!(
                "{}: {} malformed lines skipped",
                log.file, log.malformed
            ));
        }
        if log.interrupted {
            notes.push(format!(
                "{}: interrupted: the frames read so far are reported",
                log.file
            ));
        }
    }
    notes
}

/// Whether the client asked for presentation feedback (`bound`: it bound `wp_presentation`),
/// and whether the compositor answered enough of it to measure the stages to the screen.
fn feedback_notes(frames: &[Frame], bound: bool) -> Vec<String> {
    if frames.is_empty() {
        return Vec::new();
    }
    if !bound {
        return vec![
            "the client never bound wp_presentation: the stages to `presented` and the display are not measured"
                .to_string(),
        ];
    }
    let asked = frames
        .iter()
        .filter(|f| f.feedback != Feedback::None)
        .count();
    let answered = frames
        .iter()
        .filter(|f| matches!(f.feedback, Feedback::Presented(_) | Feedback::Discarded))
        .count();
    if asked > 0 && answered * 2 < asked {
        return vec![format!(
            "the compositor answered {answered} of the client's {asked} presentation feedbacks: the stages to the screen are measured for those alone (a headless backend may present nothing)"
        )];
    }
    Vec::new()
}

impl Analysis {
    /// Hands every frame's stages to `sink` (one series per stage, named as [`Stage::name`];
    /// a discarded frame is a [`Outcome::Discarded`] of each stage to the screen, one whose
    /// feedback never came [`Outcome::Unmatched`]).
    pub fn feed(&self, sink: &mut impl SpanSink) {
        let offset = self.offset.map(|o| o.estimate_ns);
        for f in &self.frames {
            let start_ns = f.commit.client_ns.max(0) as u64;
            for stage in Stage::ALL {
                let key = SeriesKey {
                    span: stage.index(),
                    side: None,
                    group: Group::All,
                };
                match (f.stage_ns(stage, offset), f.feedback, to_screen(stage)) {
                    (Some(ns), _, _) if ns >= 0 => sink.sample(&key, start_ns, ns as u64),
                    (Some(_), _, _) => sink.outcome(&key, Outcome::Backwards),
                    (None, Feedback::Discarded, true) => sink.outcome(&key, Outcome::Discarded),
                    (None, Feedback::Pending, true) => sink.outcome(&key, Outcome::Unmatched),
                    (None, ..) => {}
                }
            }
        }
    }

    /// What the document says besides the stages.
    pub fn summary(&self) -> doc::FramesSummary {
        let p = &self.pacing;
        let ns = |v: i128| i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX });
        let offset = |o: ClockOffset| doc::ClockOffset {
            estimate_ns: ns(o.estimate_ns),
            low_ns: ns(o.low_ns),
            high_ns: ns(o.high_ns),
            bound_ns: ns(o.bound_ns()),
            frames: o.frames,
        };
        doc::FramesSummary {
            frames: self.frames.len() as u64,
            joined: self.joined.clone(),
            clock_id: self.clock_id,
            clock_offset: self.offset.map(offset),
            timeline_offset: self.timeline_offset.map(offset),
            pacing: doc::Pacing {
                presented: p.presented,
                discarded: p.discarded,
                pending: p.pending,
                refresh_ns: p.refresh_ns,
                intervals: p.intervals.iter().copied().collect(),
                late: p.late,
                causes: p
                    .causes
                    .iter()
                    .map(|(c, n)| (c.name().to_string(), *n))
                    .collect(),
                worst: p
                    .worst
                    .iter()
                    .map(|l| doc::LateFrame {
                        surface: l.surface,
                        line: l.line,
                        periods: l.periods,
                        cause: l.cause.name().to_string(),
                        excess_ns: l.excess_ns,
                        stages: l
                            .stages
                            .iter()
                            .filter_map(|(name, v)| Some((name.to_string(), (*v)?)))
                            .collect(),
                    })
                    .collect(),
            },
        }
    }

    /// Every measured stage of the first `most` frames, as records in the logs' clock (each
    /// starting where its stage starts: the client's commit, the compositor's dispatch of it,
    /// its sending of `presented`), their group the surface (`wl_surface@N`), their frame its
    /// commit's line; and how many frames were left out.
    pub fn records(&self, most: usize) -> (Vec<SpanRecord>, u64) {
        let offset = self.offset.map(|o| o.estimate_ns);
        let mut records = Vec::new();
        for f in self.frames.iter().take(most) {
            for stage in Stage::ALL {
                let (Some(latency), Some(start)) =
                    (f.stage_ns(stage, offset), f.stage_start_ns(stage))
                else {
                    continue;
                };
                records.push(SpanRecord {
                    span: stage.name().to_string(),
                    group: Some(format!("wl_surface@{}", f.surface)),
                    start_ns: start.max(0) as u64,
                    latency_ns: latency.max(0) as u64,
                    frame: Some(f.line),
                });
            }
        }
        (records, self.frames.len().saturating_sub(most) as u64)
    }

    /// The stage names, in the order of their series ([`Analysis::feed`]).
    pub fn stage_names() -> Vec<String> {
        Stage::ALL.iter().map(|s| s.name().to_string()).collect()
    }
}

/// Whether `stage` ends with the frame on the screen (and so is never measured for a frame
/// that was discarded).
fn to_screen(stage: Stage) -> bool {
    !matches!(
        stage,
        Stage::CommitToCompositor | Stage::CompositorToFrameDone
    )
}
