//! Mir's own stages of a frame, from its LTTng tracepoints as babeltrace2 prints them
//! (`babeltrace2 TRACE_DIR > mir.txt`).
//!
//! Mir 2.12 offers no `wp_presentation`, so its logs end a frame at the frame callback. Its
//! tracepoints see what comes between. `mir_server_wayland:sw_buffer_committed` (or `hw_`)
//! fires as Mir takes a client's commit of a buffer: it names the client's connection and
//! Mir's id of the buffer, new for every commit. With `--compositor-report=lttng`
//! (`libmirserverlttng.so`), each display's compositor (`id`) fires `began_frame`,
//! `buffers_in_frame` (the buffers it composites), `rendered_frame` and `finished_frame`, and
//! then hands the frame to the display. The first composition that lists a commit's buffer is
//! the repaint that showed it.
//!
//! The trace stamps on LTTng's clock; babeltrace2 prints it as a time of day or in seconds.
//! The clock is mapped onto the logs' from the data, as weston's timeline is
//! ([`super::timeline`]), and never from the wall time babeltrace2 prints (a time zone, the day
//! and the clock's own offset would all enter). First, one constant lines most of the client's
//! commit dispatches up with a `buffer_committed` ([`line_up`]). Then each frame's commit is
//! linked to its own event ([`link`]), and two kinds of events narrow the constant to an
//! interval. Mir takes a commit after libwayland printed its dispatch, so each linked commit
//! gives a lower edge. A frame callback is sent once its buffer has been read by the
//! composition that shows it, so each `done` gives an upper edge. The upper edge is taken only
//! from frames that were not pipelined: Mir sends every callback pending on a surface when any
//! of its buffers is read, so a callback committed while the previous buffer was still unread
//! goes out with that buffer, before its own composition.

use rustc_hash::FxHashMap;

use super::stages::{ClockOffset, Frame, Repaint};
use crate::ingest::trace::babeltrace::Babeltrace;
use crate::ingest::trace::{Event, Parsed};

/// A client's commit of a buffer, as Mir took it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Committed {
    /// when, ns on the trace's clock
    pub t_ns: i128,
    /// the client's connection (Mir's pointer to it)
    pub client: u64,
    /// Mir's id of the buffer
    pub buffer: u32,
}

/// One composition of one display.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Composition {
    /// `began_frame`, ns on the trace's clock
    pub began_ns: i128,
    /// `finished_frame` (`None`: the trace ends before it)
    pub finished_ns: Option<i128>,
}

/// Mir's trace, read.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    /// its name in messages
    pub file: String,
    /// the commits of buffers, in order
    pub commits: Vec<Committed>,
    /// the compositions, in the order they began
    pub compositions: Vec<Composition>,
    /// each buffer's first composition, the one that began first of those that list it (an
    /// index into `compositions`)
    pub shown: FxHashMap<u32, usize>,
    /// Mir events whose fields could not be read
    pub malformed: u64,
}

/// The trace as its lines are read.
#[derive(Debug, Default)]
pub struct Reading {
    /// what was read so far
    pub trace: Trace,
    parser: Babeltrace,
    event: Event,
    /// each display's composition under way
    open: FxHashMap<u64, usize>,
}

impl Reading {
    /// A reading of the trace named `file`.
    pub fn new(file: &str) -> Reading {
        Reading {
            trace: Trace {
                file: file.to_string(),
                ..Trace::default()
            },
            ..Reading::default()
        }
    }

    /// Reads one line of the trace's file ([`super::compositor::read`]); whether it was one of
    /// Mir's events (read or malformed).
    pub fn text(&mut self, line: &str) -> bool {
        if memchr::memmem::find(line.as_bytes(), b"mir_server_").is_none() {
            return false;
        }
        self.event.clear();
        match self.parser.parse(line, &mut self.event) {
            Parsed::Event => {}
            Parsed::Skip => return false,
            Parsed::Malformed(_) => {
                self.trace.malformed += 1;
                return true;
            }
        }
        let t_ns = i128::from(self.event.ts_ns);
        let event = self.event.name(line);
        let field = |name: &str| self.event.field(line, name);
        let read = match event {
            "mir_server_wayland:sw_buffer_committed" | "mir_server_wayland:hw_buffer_committed" => {
                match (field("client").and_then(hex), field("buffer_id")) {
                    (Some(client), Some(b)) => b.parse().ok().map(|buffer| {
                        self.trace.commits.push(Committed {
                            t_ns,
                            client,
                            buffer,
                        })
                    }),
                    _ => None,
                }
            }
            "mir_server_compositor:began_frame" => field("id").and_then(hex).map(|id| {
                self.open.insert(id, self.trace.compositions.len());
                self.trace.compositions.push(Composition {
                    began_ns: t_ns,
                    finished_ns: None,
                });
            }),
            "mir_server_compositor:buffers_in_frame" => {
                let at = field("id").and_then(hex).and_then(|id| self.open.get(&id));
                match (at, field("buffer_ids")) {
                    (Some(&k), Some(ids)) => {
                        // the composition that began first (each display composites on its
                        // own thread, and lists its buffers once it has drawn them)
                        let compositions = &self.trace.compositions;
                        for b in array_values(ids) {
                            let first = self.trace.shown.entry(b).or_insert(k);
                            if compositions[k].began_ns < compositions[*first].began_ns {
                                *first = k;
                            }
                        }
                        Some(())
                    }
                    _ => None,
                }
            }
            "mir_server_compositor:finished_frame" => field("id")
                .and_then(hex)
                .and_then(|id| self.open.remove(&id))
                .map(|k| self.trace.compositions[k].finished_ns = Some(t_ns)),
            _ => Some(()),
        };
        if read.is_none() {
            self.trace.malformed += 1;
        }
        true
    }
}

/// `0x7FAB8C000F00`.
fn hex(text: &str) -> Option<u64> {
    let digits = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))?;
    u64::from_str_radix(digits, 16).ok()
}

/// The values of babeltrace2's array text `[ [0] = 1, [1] = 7 ]`.
fn array_values(text: &str) -> impl Iterator<Item = u32> + '_ {
    text.split("] = ").skip(1).filter_map(|rest| {
        let end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        rest[..end].parse().ok()
    })
}

/// How far Mir's taking of a commit may be from libwayland's print of its dispatch, once the
/// clocks' constant is taken out (the constant is found from one commit; another may have
/// waited longer or shorter). The two are a few lines of code apart on one thread, so the wait
/// is µs; it is kept far below a client's commits' jitter, or a constant a frame away would
/// line them up as well.
pub const COMMIT_WITHIN_NS: i128 = 250_000;

/// How long after the client's last dispatched commit Mir's taking of it is looked for (every
/// other commit is looked for until the client's next commit was dispatched).
const LAST_WITHIN_NS: i128 = 100_000_000;

/// Dispatches looked at to find the clocks' constant.
const FIRST_DISPATCHES: usize = 64;

/// Dispatches tried as the one whose commit fixes the constant (the trace may begin after the
/// client's first commits).
const ANCHORS: usize = 8;

/// Dispatches after an anchor that a constant must line up before all are counted.
const PRUNE: usize = 3;

/// How the commits line up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinedUp {
    /// by this constant (`log time - trace time`, ns), most of them the commits of this client
    By {
        /// the constant
        offset_ns: i128,
        /// the client's connection
        client: u64,
    },
    /// by several constants alike
    Tied,
    /// by none (fewer than two, or than half)
    Not,
}

/// The constant `log time - trace time` and the client's connection that line the most of the
/// first `dispatches` (ns on the logs' clock, in order) up with a commit of that connection in
/// `commits` (within [`COMMIT_WITHIN_NS`]). Each connection is counted apart: another client
/// committing at nearly the same moments (Mir answers every surface from one composition)
/// would otherwise lend its commits to the count.
pub fn line_up(dispatches: &[i128], commits: &[Committed]) -> LinedUp {
    let first = &dispatches[..dispatches.len().min(FIRST_DISPATCHES)];
    if first.is_empty() {
        return LinedUp::Not;
    }
    let mut by_client: FxHashMap<u64, Vec<i128>> = FxHashMap::default();
    for c in commits {
        by_client.entry(c.client).or_default().push(c.t_ns);
    }
    // (count, offset, client) of each constant that lines up an anchor and the dispatches after it
    let mut found: Vec<(usize, i128, u64)> = Vec::new();
    for (&client, times) in &by_client {
        let near = |t: i128| {
            let at = times.partition_point(|&c| c < t - COMMIT_WITHIN_NS);
            times.get(at).is_some_and(|&c| c <= t + COMMIT_WITHIN_NS)
        };
        for (a, &anchor) in first.iter().enumerate().take(ANCHORS) {
            for &c in times {
                let offset = anchor - c;
                // most constants fail at one of the next dispatches: the full count only for
                // the rest
                let mut next = first.iter().skip(a + 1).take(PRUNE);
                if next.any(|&d| !near(d - offset)) {
                    continue;
                }
                let n = first.iter().filter(|&&d| near(d - offset)).count();
                found.push((n, offset, client));
            }
        }
    }
    found.sort_unstable_by_key(|&(n, offset, client)| (std::cmp::Reverse(n), offset, client));
    let Some(&(n, offset_ns, client)) = found.first() else {
        return LinedUp::Not;
    };
    // the best count of another constant or connection (the best one is found again from
    // other anchors, a few µs away)
    let rival = found
        .iter()
        .find(|(_, o, c)| *c != client || (o - offset_ns).abs() > COMMIT_WITHIN_NS)
        .map_or(0, |r| r.0);
    if n < 2.min(first.len()) || n * 2 < first.len() {
        LinedUp::Not
    } else if rival == n {
        LinedUp::Tied
    } else {
        LinedUp::By { offset_ns, client }
    }
}

/// How the frames were linked to the trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Linked {
    /// `log time = trace time + offset`, the offset in `[low_ns, high_ns]`, from `frames`
    /// callbacks; with none, nothing bounds it from above, and `high_ns` is `low_ns`
    pub offset: ClockOffset,
    /// frames linked to their commit in the trace
    pub linked: u64,
    /// of the frames that attached a buffer and were dispatched
    pub attached: u64,
    /// frames whose repaint was found
    pub repainted: u64,
    /// callbacks sent before their composition began, left out of the upper edge
    pub early: u64,
}

/// Why the trace could not be linked to the logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unlinked {
    /// the trace has no commit of a buffer at all
    NoCommits,
    /// no commit of the client's is in the trace
    NotOfThisRun,
    /// its commits come at so steady a rate that which is which cannot be told
    Tied,
}

/// Links each frame that attached a buffer to its commit in `trace`, and gives it the repaint
/// that showed it, on the logs' clock; the clocks' constant and how well it is known.
pub fn link(frames: &mut [Frame], trace: &Trace) -> Result<Linked, Unlinked> {
    let dispatched: Vec<(usize, i128)> = frames
        .iter()
        .enumerate()
        .filter(|(_, f)| f.attached)
        .filter_map(|(k, f)| Some((k, i128::from(f.commit.server_ns?))))
        .collect();
    if trace.commits.is_empty() {
        return Err(Unlinked::NoCommits);
    }
    let times: Vec<i128> = dispatched.iter().map(|&(_, d)| d).collect();
    let (coarse, client) = match line_up(&times, &trace.commits) {
        LinedUp::By { offset_ns, client } => (offset_ns, client),
        LinedUp::Tied => return Err(Unlinked::Tied),
        LinedUp::Not => return Err(Unlinked::NotOfThisRun),
    };
    let commits: Vec<&Committed> = trace
        .commits
        .iter()
        .filter(|c| c.client == client)
        .collect();
    let base = window_base(&times, &commits, coarse).ok_or(Unlinked::NotOfThisRun)?;
    let mut low: Option<i128> = None;
    let mut linked = 0;
    let mut next = 0;
    let mut committed = vec![None; frames.len()];
    for (i, &(k, d)) in dispatched.iter().enumerate() {
        // Mir takes a commit on the thread that dispatched it, before it dispatches the next:
        // before the next dispatch less the constant, which `base` is at most; and after its
        // own, less the constant, which `base` is at least less the tolerance
        let until = dispatched
            .get(i + 1)
            .map_or(d + LAST_WITHIN_NS, |&(_, n)| n)
            - base;
        let from = d - base - COMMIT_WITHIN_NS;
        let at = next + commits[next..].partition_point(|c| c.t_ns < from);
        let Some(c) = commits.get(at).filter(|c| c.t_ns < until) else {
            continue;
        };
        next = at + 1;
        linked += 1;
        low = Some(low.map_or(d - c.t_ns, |l| l.max(d - c.t_ns)));
        committed[k] = Some(**c);
    }
    let low = low.ok_or(Unlinked::NotOfThisRun)?;
    let Repaints {
        repaints,
        high,
        repainted,
        early,
    } = repaints(frames, &committed, trace, low);
    let offset = ClockOffset {
        estimate_ns: low,
        low_ns: low,
        high_ns: high.map_or(low, |(h, _)| h),
        frames: high.map_or(0, |(_, n)| n),
    };
    for (f, r) in frames.iter_mut().zip(repaints) {
        f.repaint = r.and_then(|r| r.onto_logs(low));
    }
    Ok(Linked {
        offset,
        linked,
        attached: dispatched.len() as u64,
        repainted,
        early,
    })
}

/// Where the windows that link each commit to its dispatch are put ([`link`]): `log time -
/// trace time` of the median dispatch with exactly one commit within [`COMMIT_WITHIN_NS`] of
/// where the `coarse` constant puts it. A commit is taken after its dispatch was printed, so
/// its own dispatch gives at most the constant, and at least the constant less the commit's
/// wait (µs). A commit can also lie alone near a later dispatch (its own was Mir's late take of
/// a commit just before the next dispatch), which gives more than the constant: the median,
/// (the lower one of two), not the largest, so that such a rare pair does not move it. `link` needs it at most the
/// constant and at least the constant less the tolerance.
fn window_base(dispatches: &[i128], commits: &[&Committed], coarse: i128) -> Option<i128> {
    let mut pairs: Vec<i128> = dispatches
        .iter()
        .filter_map(|&d| {
            let t = d - coarse;
            let at = commits.partition_point(|c| c.t_ns < t - COMMIT_WITHIN_NS);
            let near = |c: &&&Committed| c.t_ns <= t + COMMIT_WITHIN_NS;
            match (
                commits.get(at).filter(near),
                commits.get(at + 1).filter(near),
            ) {
                (Some(c), None) => Some(d - c.t_ns),
                _ => None,
            }
        })
        .collect();
    pairs.sort_unstable();
    pairs.get(pairs.len().saturating_sub(1) / 2).copied()
}

/// How long before a commit the previous buffer's composition must have finished for that
/// buffer to have been read (the callback is queued a few µs before Mir's tracepoint of the
/// commit).
const READ_BEFORE_NS: i128 = 1_000_000;

/// A surface's latest frame with a buffer, as [`repaints`] needs it.
#[derive(Debug, Clone, Copy)]
struct Latest {
    /// its callbacks went out when its own buffer was read, as far as the logs tell: no timer
    /// was due, and its `done` was not sent before its composition began
    read: bool,
    /// its composition finished, ns on the trace's clock
    finished_ns: Option<i128>,
    /// its `done` was sent, ns on the logs' clock
    done_ns: Option<i128>,
}

/// Each linked frame's repaint (on the trace's clock), the upper edge of the clocks'
/// constant from the frames whose callbacks went out when their own buffer was read, with
/// their count, and the callbacks left out as sent before their composition began.
///
/// A frame's callbacks go out with its own buffer when no buffer committed before it was still
/// unread as they were queued: none was committed; or the latest one's composition had finished
/// by then; or that frame's callbacks went out when its buffer was read, before this frame was
/// dispatched. And when no commit without a buffer came shortly before: that sets a timer
/// ([`FLUSH_WITHIN_NS`]) which sends every callback then pending on the surface. The logs
/// cannot show every early callback (one queued behind a buffer already acquired for a
/// composition, which reads it after the commit), so the upper edge holds as far as the logs
/// tell. A callback sent before its composition began by the lower edge (`low`) certainly went
/// out early: it is left out and counted.
fn repaints(
    frames: &[Frame],
    committed: &[Option<Committed>],
    trace: &Trace,
    low: i128,
) -> Repaints {
    let mut found = Repaints {
        repaints: vec![None; frames.len()],
        high: None,
        repainted: 0,
        early: 0,
    };
    let mut latest: FxHashMap<u32, Latest> = FxHashMap::default();
    // per surface, the dispatch of its latest commit without a buffer
    let mut bare: FxHashMap<u32, i128> = FxHashMap::default();
    for (k, (f, c)) in frames.iter().zip(committed).enumerate() {
        let dispatched = f.commit.server_ns.map(i128::from);
        if !f.attached {
            if let Some(d) = dispatched {
                bare.insert(f.surface, d);
            }
            continue;
        }
        let shown = c.and_then(|c| Some(trace.compositions[*trace.shown.get(&c.buffer)?]));
        let done_ns = f.done.and_then(|d| d.server_ns).map(i128::from);
        let flushed = match (bare.get(&f.surface), dispatched) {
            (Some(&b), Some(d)) => d - b < FLUSH_WITHIN_NS,
            (Some(_), None) => true,
            (None, _) => false,
        };
        let own = !flushed
            && match (latest.get(&f.surface), c, dispatched) {
                (None, ..) => true,
                (Some(before), Some(c), Some(dispatched)) => {
                    before
                        .finished_ns
                        .is_some_and(|end| end + READ_BEFORE_NS <= c.t_ns)
                        || (before.read && before.done_ns.is_some_and(|d| d < dispatched))
                }
                _ => false,
            };
        let read = !flushed
            && matches!((shown, done_ns), (Some(s), Some(sent)) if sent - s.began_ns >= low);
        latest.insert(
            f.surface,
            Latest {
                read,
                finished_ns: shown.and_then(|s| s.finished_ns),
                done_ns,
            },
        );
        let (Some(c), Some(shown)) = (c, shown) else {
            continue;
        };
        let Some(end) = shown.finished_ns else {
            continue;
        };
        if let (true, Some(sent)) = (own, done_ns) {
            let edge = sent - shown.began_ns;
            if edge < low {
                found.early += 1;
            } else {
                let (h, n) = found.high.unwrap_or((edge, 0));
                found.high = Some((h.min(edge), n + 1));
            }
        }
        found.repaints[k] = Some(Repaint {
            commit_ns: Some(c.t_ns),
            begin_ns: shown.began_ns,
            posted_ns: end,
            vblank_ns: None,
            finished_ns: end,
        });
        found.repainted += 1;
    }
    found
}

/// How long after a surface's commit without a buffer Mir's timer may send its pending
/// callbacks (16 ms, then the main loop's and the Wayland thread's delays).
pub const FLUSH_WITHIN_NS: i128 = 250_000_000;

/// What [`repaints`] found.
struct Repaints {
    /// each frame's repaint, on the trace's clock
    repaints: Vec<Option<Repaint<i128>>>,
    /// the constant's upper edge, and the frames that gave it
    high: Option<(i128, u64)>,
    /// frames whose repaint was found
    repainted: u64,
    /// callbacks sent before their composition began (left out of the upper edge)
    early: u64,
}

#[cfg(test)]
mod tests {
    use super::super::compositor::CompositorTrace;
    use super::*;
    use crate::frames::stages::{Feedback, Seen};
    use crate::ingest::source::Stream;

    const TRACE: &str = "\
[00:33:55.252683254] (+0.000082973) vm mir_server_compositor:scheduled: { cpu_id = 1 }, { vtid = 6945 }, { }
[00:33:55.262675161] (+0.005900398) vm mir_server_wayland:sw_buffer_committed: { cpu_id = 1 }, { vtid = 6959 }, { client = 0x7FAB8C000F00, buffer_id = 1 }
[00:33:55.271360242] (+0.000008533) vm mir_server_compositor:began_frame: { cpu_id = 0 }, { vtid = 6957 }, { id = 0x7FAB98914A40 }
[00:33:55.275000000] (+0.000008533) vm mir_server_compositor:buffers_in_frame: { cpu_id = 0 }, { vtid = 6957 }, { id = 0x7FAB98914A40, _buffer_ids_length = 2, buffer_ids = [ [0] = 1, [1] = 7 ] }
[00:33:55.275000100] (+0.000001533) vm mir_server_compositor:rendered_frame: { cpu_id = 0 }, { vtid = 6957 }, { id = 0x7FAB98914A40 }
[00:33:55.275000350] (+0.000000250) vm mir_server_compositor:finished_frame: { cpu_id = 0 }, { vtid = 6957 }, { id = 0x7FAB98914A40 }
[00:33:55.280000000] (+0.000008533) vm mir_server_compositor:began_frame: { cpu_id = 0 }, { vtid = 6957 }, { id = 0x7FAB98914A40 }
[00:33:55.281000000] (+0.000008533) vm mir_server_compositor:buffers_in_frame: { cpu_id = 0 }, { vtid = 6957 }, { id = 0x7FAB98914A40, _buffer_ids_length = 1, buffer_ids = [ [0] = 1 ] }
[00:33:55.290000000] (+?.?????????) vm mir_server_wayland:sw_buffer_committed: { cpu_id = 1 }, { vtid = 6959 }, { buffer_id = 9 }
[00:33:55.290000001] (+?.?????????) vm other:event: { cpu_id = 1 }, { }
";

    /// The Mir trace in `text`, as `latscope frames` reads it.
    fn read(text: &str) -> Trace {
        match super::super::compositor::read(Stream::of(text.as_bytes()), "mir.txt", None) {
            Ok(CompositorTrace::Mir(t)) => t,
            other => panic!("{other:?}"),
        }
    }

    fn trace() -> Trace {
        read(TRACE)
    }

    #[test]
    fn commits_compositions_and_the_first_composition_of_each_buffer_are_read() {
        let t = trace();
        let at = |hms_ns: i128| (33 * 60 + 55) * 1_000_000_000 + hms_ns;
        assert_eq!(
            t.commits,
            [Committed {
                t_ns: at(262_675_161),
                client: 0x7FAB_8C00_0F00,
                buffer: 1
            }]
        );
        assert_eq!(
            t.compositions,
            [
                Composition {
                    began_ns: at(271_360_242),
                    finished_ns: Some(at(275_000_350))
                },
                Composition {
                    began_ns: at(280_000_000),
                    finished_ns: None
                }
            ]
        );
        // buffer 1 is listed by both: the first showed it
        assert_eq!(t.shown.get(&1), Some(&0));
        assert_eq!(t.shown.get(&7), Some(&0));
        // a commit without its client
        assert_eq!(t.malformed, 1);
    }

    /// Commits of client 1 every 16.6 ms with a jitter, taken 10 to 40 µs after their dispatch,
    /// on a trace clock 5 s behind the logs'; client 2's commits between them, at the same rate.
    fn commits(n: usize) -> (Vec<i128>, Vec<Committed>) {
        let offset = 5_000_000_000;
        let mut dispatches = Vec::new();
        let mut commits = Vec::new();
        for k in 0..n as i128 {
            let d = 10_000_000_000 + k * 16_600_000 + (k * k * 7919 % 997) * 1_000;
            dispatches.push(d);
            commits.push(Committed {
                t_ns: d - offset + 10_000 + (k % 4) * 10_000,
                client: 1,
                buffer: k as u32,
            });
            // (its own jitter: a client that followed this one's would line up as well)
            commits.push(Committed {
                t_ns: 10_000_000_000 - offset + k * 16_600_000 + 8_000_000 + (k * 31 % 17) * 50_000,
                client: 2,
                buffer: 1_000 + k as u32,
            });
        }
        commits.sort_by_key(|c| c.t_ns);
        (dispatches, commits)
    }

    #[test]
    fn the_constant_lines_the_clients_commits_up_and_names_its_connection() {
        let (dispatches, commits) = commits(100);
        match line_up(&dispatches, &commits) {
            LinedUp::By { offset_ns, client } => {
                assert_eq!(client, 1);
                // within the commits' own wait after their dispatch
                assert!(
                    (4_999_960_000..=4_999_990_000).contains(&offset_ns),
                    "{offset_ns}"
                );
            }
            other => panic!("{other:?}"),
        }
        // a trace that begins after the client's first three commits
        let late: Vec<Committed> = commits
            .iter()
            .filter(|c| c.t_ns >= dispatches[3] - 5_000_000_000)
            .copied()
            .collect();
        assert!(matches!(
            line_up(&dispatches, &late),
            LinedUp::By { client: 1, .. }
        ));
        // commits of another run, far from every dispatch's pattern
        let other: Vec<Committed> = (0..100)
            .map(|k| Committed {
                t_ns: k * 33_000_000,
                client: 1,
                buffer: k as u32,
            })
            .collect();
        assert_eq!(line_up(&dispatches, &other), LinedUp::Not);
        // at a steady rate, a period away lines them up alike
        let steady: Vec<i128> = (0..40).map(|k| k * 16_000_000).collect();
        let steady_commits: Vec<Committed> = (0..80)
            .map(|k| Committed {
                t_ns: k * 16_000_000 + 7,
                client: 1,
                buffer: k as u32,
            })
            .collect();
        assert_eq!(line_up(&steady, &steady_commits), LinedUp::Tied);
        assert_eq!(line_up(&[], &commits), LinedUp::Not);
    }

    fn frame(surface: u32, dispatch_ns: i64, done_ns: Option<i64>) -> Frame {
        Frame {
            surface,
            line: 1,
            commit: Seen {
                client_ns: dispatch_ns - 50_000,
                server_ns: Some(dispatch_ns),
            },
            attached: true,
            done: done_ns.map(|s| Seen {
                client_ns: s + 30_000,
                server_ns: Some(s),
            }),
            feedback: Feedback::None,
            repaint: None,
        }
    }

    /// Three frames on a trace clock 1 s behind the logs, each commit taken 20 µs after its
    /// dispatch; each composed 2 ms after it for 3 ms, its callback sent 1 ms after the
    /// composition began, the second's 700 µs after it.
    fn three() -> (Vec<Frame>, Trace) {
        let on_trace = |logs: i64| i128::from(logs) - 1_000_000_000;
        let dispatch = [2_000_000_000i64, 2_016_000_000, 2_033_500_000];
        let mut trace = Trace::default();
        let mut frames = Vec::new();
        for (k, &d) in dispatch.iter().enumerate() {
            let began = d + 2_000_000;
            let sent = began + if k == 1 { 700_000 } else { 1_000_000 };
            frames.push(frame(3, d, Some(sent)));
            trace.commits.push(Committed {
                t_ns: on_trace(d) + 20_000,
                client: 9,
                buffer: k as u32 + 1,
            });
            trace.shown.insert(k as u32 + 1, k);
            trace.compositions.push(Composition {
                began_ns: on_trace(began),
                finished_ns: Some(on_trace(began + 3_000_000)),
            });
        }
        (frames, trace)
    }

    #[test]
    fn each_frame_gets_its_composition_on_the_logs_clock_within_the_edges() {
        let (mut frames, trace) = three();
        let l = link(&mut frames, &trace).unwrap();
        // the commits were taken 20 µs after their dispatch: the lower edge; the second
        // callback, 700 µs after its composition began: the upper edge
        assert_eq!(l.offset.low_ns, 1_000_000_000 - 20_000);
        assert_eq!(l.offset.high_ns, 1_000_000_000 + 700_000);
        assert_eq!(l.offset.estimate_ns, l.offset.low_ns);
        assert_eq!(
            (l.offset.frames, l.linked, l.attached, l.repainted),
            (3, 3, 3, 3)
        );
        assert!(l.offset.frames > 0);
        let r = frames[1].repaint.unwrap();
        // the trace's own differences: 2 ms - 20 µs to the composition, which took 3 ms
        assert_eq!(r.commit_ns, Some(2_016_000_000));
        assert_eq!(r.begin_ns, 2_018_000_000 - 20_000);
        assert_eq!(r.posted_ns - r.begin_ns, 3_000_000);
        assert_eq!(r.vblank_ns, None);
    }

    #[test]
    fn a_commit_that_mir_took_late_is_still_its_frames_before_the_next_dispatch() {
        let (mut frames, mut trace) = three();
        // taken 3 ms after its dispatch (the thread was preempted), 13 ms before the next,
        // and composed 2 ms after that
        trace.commits[1].t_ns += 3_000_000 - 20_000;
        trace.compositions[1].began_ns += 3_000_000;
        frames[1].done = frames[1].done.map(|d| Seen {
            server_ns: d.server_ns.map(|s| s + 3_000_000),
            ..d
        });
        let l = link(&mut frames, &trace).expect("linked");
        assert_eq!((l.linked, l.repainted), (3, 3));
        assert_eq!(
            frames[1].repaint.unwrap().commit_ns,
            Some(2_019_000_000 - 20_000)
        );
        // the others still give the lower edge
        assert_eq!(l.offset.low_ns, 1_000_000_000 - 20_000);
        // a commit missing from the trace: the next one, taken after the next dispatch, is not
        // this frame's but the next frame's
        trace.commits.remove(1);
        frames.iter_mut().for_each(|f| f.repaint = None);
        let l = link(&mut frames, &trace).expect("linked");
        assert_eq!(l.linked, 2);
        assert_eq!(frames[1].repaint, None);
        assert_eq!(frames[2].repaint.unwrap().commit_ns, Some(2_033_500_000));
    }

    #[test]
    fn a_late_commit_alone_near_the_next_dispatch_is_still_linked_to_its_own() {
        let (mut frames, mut trace) = three();
        // the first commit taken 30 µs before the second was dispatched, the second 3 ms
        // after its dispatch: near the second dispatch lies the first commit alone (taken as
        // the second's, it would put the windows 30 µs past the constant, and the first
        // commit out of its own)
        trace.commits[0].t_ns = 1_016_000_000 - 30_000;
        trace.commits[1].t_ns = 1_016_000_000 + 3_000_000;
        trace.compositions[0].began_ns = 1_016_500_000;
        trace.compositions[1].began_ns = 1_021_000_000;
        let l = link(&mut frames, &trace).expect("linked");
        assert_eq!(l.linked, 3);
        assert_eq!(l.offset.low_ns, 1_000_000_000 - 20_000);
        let commits: Vec<Option<i64>> = frames
            .iter()
            .map(|f| f.repaint.and_then(|r| r.commit_ns))
            .collect();
        // on the logs' clock: the trace's stamps plus the lower edge
        assert_eq!(
            commits,
            [
                Some(2_016_000_000 - 30_000 - 20_000),
                Some(2_019_000_000 - 20_000),
                Some(2_033_500_000)
            ]
        );
    }

    #[test]
    fn a_callback_committed_while_the_buffer_before_was_unread_bounds_nothing() {
        let (mut frames, mut trace) = three();
        // the second frame committed before the first's buffer was read: the first's
        // composition finished, and its callback was sent, after that commit; so the second's
        // callback went out with the first buffer, before its own composition began
        trace.compositions[0].finished_ns = Some(trace.commits[1].t_ns + 500_000);
        let sent = |server_ns: i64| {
            Some(Seen {
                client_ns: 0,
                server_ns: Some(server_ns),
            })
        };
        frames[0].done = sent(2_016_500_000);
        frames[1].done = sent(2_016_600_000);
        let l = link(&mut frames, &trace).expect("linked");
        assert_eq!(l.offset.high_ns, 1_000_000_000 + 1_000_000);
        assert_eq!(l.offset.frames, 2);
    }

    #[test]
    fn frames_without_a_buffer_or_a_callback_are_linked_as_far_as_they_go() {
        let (mut frames, trace) = three();
        // a commit without a buffer between the first two, 1 ms after the first
        let mut bare = frame(3, 2_001_000_000, None);
        bare.attached = false;
        frames.insert(1, bare);
        for f in &mut frames {
            f.done = None;
        }
        let l = link(&mut frames, &trace).unwrap();
        assert_eq!((l.linked, l.attached, l.repainted), (3, 3, 3));
        assert_eq!(l.offset.frames, 0);
        assert_eq!(frames[1].repaint, None);
        assert_eq!(frames[2].repaint.unwrap().commit_ns, Some(2_016_000_000));
    }

    #[test]
    fn callbacks_sent_before_their_composition_began_are_counted_not_bounds() {
        let (mut frames, mut trace) = three();
        for c in &mut trace.compositions {
            c.began_ns += 5_000_000;
        }
        let l = link(&mut frames, &trace).unwrap();
        assert_eq!((l.early, l.offset.frames), (3, 0));
        assert_eq!(l.offset.low_ns, 1_000_000_000 - 20_000);
        // commits of another run: 50 ms apart where the frames' are 16 and 17.5
        let (mut frames, mut trace) = three();
        for (k, c) in trace.commits.iter_mut().enumerate() {
            c.t_ns = k as i128 * 50_000_000;
        }
        assert_eq!(link(&mut frames, &trace), Err(Unlinked::NotOfThisRun));
        trace.commits.clear();
        assert_eq!(link(&mut frames, &trace), Err(Unlinked::NoCommits));
    }

    #[test]
    fn another_client_committing_at_nearly_the_same_moments_is_not_taken_for_this_one() {
        let (dispatches, mut commits) = commits(100);
        // client 3 commits 150 µs after each of client 1's first ten
        let echo: Vec<Committed> = commits
            .iter()
            .filter(|c| c.client == 1)
            .take(10)
            .map(|c| Committed {
                t_ns: c.t_ns + 150_000,
                client: 3,
                buffer: 5_000 + c.buffer,
            })
            .collect();
        commits.extend(echo);
        commits.sort_by_key(|c| c.t_ns);
        assert!(matches!(
            line_up(&dispatches, &commits),
            LinedUp::By { client: 1, .. }
        ));
    }

    #[test]
    fn two_commits_closer_than_the_tolerance_do_not_raise_the_lower_edge() {
        let (mut frames, mut trace) = three();
        // a second surface of the client, committed 45 µs after the second frame
        let mut other = frame(4, 2_016_045_000, None);
        other.attached = true;
        frames.insert(2, other);
        trace.commits.insert(
            2,
            Committed {
                t_ns: 1_016_045_000 + 20_000,
                client: 9,
                buffer: 77,
            },
        );
        let l = link(&mut frames, &trace).unwrap();
        assert_eq!(l.offset.low_ns, 1_000_000_000 - 20_000);
        assert_eq!(l.linked, 4);
        assert_eq!(frames[1].repaint.unwrap().commit_ns, Some(2_016_000_000));
    }

    #[test]
    fn a_commit_without_a_buffer_just_before_leaves_the_next_callback_out_of_the_bound() {
        let (mut frames, trace) = three();
        // a bare commit 10 ms before the second frame: Mir's timer may send its callback
        let mut bare = frame(3, 2_006_000_000, None);
        bare.attached = false;
        frames.insert(1, bare);
        let l = link(&mut frames, &trace).unwrap();
        // the second frame (the tightest, 700 µs) is left out, and so is the third: its
        // predecessor's callback may have been the timer's
        assert_eq!(l.offset.high_ns, 1_000_000_000 + 1_000_000);
        assert_eq!(l.offset.frames, 1);
    }

    #[test]
    fn a_buffer_two_displays_show_was_shown_by_the_composition_that_began_first() {
        let trace_text = "\
[00:00:01.000000000] vm mir_server_compositor:began_frame: { cpu_id = 0 }, { vtid = 1 }, { id = 0xA }
[00:00:01.001000000] vm mir_server_compositor:began_frame: { cpu_id = 1 }, { vtid = 2 }, { id = 0xB }
[00:00:01.002000000] vm mir_server_compositor:buffers_in_frame: { cpu_id = 1 }, { vtid = 2 }, { id = 0xB, _buffer_ids_length = 1, buffer_ids = [ [0] = 5 ] }
[00:00:01.003000000] vm mir_server_compositor:buffers_in_frame: { cpu_id = 0 }, { vtid = 1 }, { id = 0xA, _buffer_ids_length = 1, buffer_ids = [ [0] = 5 ] }
";
        let t = read(trace_text);
        assert_eq!(t.compositions.len(), 2);
        assert_eq!(t.shown.get(&5), Some(&0));
    }
}
