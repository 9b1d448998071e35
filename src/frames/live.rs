//! The same stages live, without `WAYLAND_DEBUG`: uprobes on what Debian's libwayland 1.21 and
//! libffi export, over a running compositor and its client (`latscope frames --live`).
//!
//! `WAYLAND_DEBUG` formats every message on both sides, and that costs each process time
//! (docs/performance.md). Each point the logs stamp is also a call into an exported function,
//! so a bpftrace program can stamp the same points with `nsecs` (`CLOCK_MONOTONIC`) and print
//! only the handful of messages a frame is made of:
//!
//! | point | probe |
//! |---|---|
//! | the client sends `wl_surface.commit` | `wl_proxy_marshal_array_flags` (libwayland-client), opcode 6 |
//! | the compositor dispatches a request | `ffi_call` (libffi) from the compositor: libwayland's `wl_closure_invoke` calls each request's handler through it |
//! | the compositor sends `done`, `presented`, `discarded`, `clock_id` | `wl_resource_post_event_array`, `wl_resource_queue_event_array` (libwayland-server) |
//! | the client dispatches `done`, `presented` | `ffi_call` from the client: each event's listener |
//!
//! libwayland's own dispatch functions (`dispatch_event`, `wl_closure_invoke`) are internal,
//! but both call the handler through libffi's exported `ffi_call(cif, fn, rvalue, avalue)`,
//! whose `avalue[1]` points to the target's `struct wl_object *` (`{interface, implementation,
//! id}`: the interface's name is `*interface`, the id at offset 16) and `avalue[0]` to the
//! server's `struct wl_client *` (client side: the proxy's user data). The message is the
//! handler's index in `implementation`. So every stage of the logs is given, except the
//! compositor's own (`compositor_to_repaint`, `repaint`, `repaint_to_vblank`), which need its
//! timeline.
//!
//! A compositor serves several clients (its own shell clients too), and ids collide across
//! connections: each server-side event names its client by the pid libwayland stored from
//! `SO_PEERCRED` (`wl_client`'s `ucred.pid`, at offset 136 in 1.21; a `wl_resource`'s client
//! at offset 64), and only the traced client's are printed. The pid is exact where the log
//! join had to align messages; it is tied to the layout of 1.21 ([`layout_checked`]).
//!
//! The program is pure text ([`program`]), its lines pure data ([`parse`]), and the frames are
//! built from a list of events ([`frames`]) the way [`super::stages::Frames`] builds them from
//! logs, into the same [`Frame`]s, stamped in nanoseconds.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use rustc_hash::FxHashMap;

use super::stages::{Feedback, Frame, Presented, Seen};

/// The prefix of every line the program prints about a message.
pub const PREFIX: &str = "lf";

/// What one probe saw, stamped with `nsecs` (ns of `CLOCK_MONOTONIC`); `pid` is the client's
/// process on both sides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// the client's pid
    pub pid: u32,
    /// when, ns
    pub ns: i64,
    /// what
    pub kind: Kind,
}

/// The messages a frame is made of, on the side that was probed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// the client sends `wl_surface@surface.commit`
    ClientCommit {
        /// the surface
        surface: u32,
    },
    /// the client dispatches `wl_callback@callback.done`
    ClientDone {
        /// the callback
        callback: u32,
    },
    /// the client dispatches `wp_presentation_feedback@feedback.presented`
    ClientPresented {
        /// the feedback
        feedback: u32,
    },
    /// the compositor dispatches `wl_surface@surface.commit`
    ServerCommit {
        /// the surface
        surface: u32,
    },
    /// the compositor dispatches `wl_surface@surface.frame(new id callback)`
    ServerFrame {
        /// the surface
        surface: u32,
        /// the callback
        callback: u32,
    },
    /// the compositor dispatches `wp_presentation.feedback(surface, new id feedback)`
    ServerFeedback {
        /// the surface
        surface: u32,
        /// the feedback
        feedback: u32,
    },
    /// the compositor sends `wl_callback@callback.done`
    ServerDone {
        /// the callback
        callback: u32,
    },
    /// the compositor sends `wp_presentation_feedback@feedback.presented`
    ServerPresented {
        /// the feedback
        feedback: u32,
        /// the display time, ns on the presentation clock
        display_ns: i128,
        /// the refresh period, ns
        refresh_ns: u64,
        /// the vblank counter
        seq: u64,
    },
    /// the compositor sends `wp_presentation_feedback@feedback.discarded`
    ServerDiscarded {
        /// the feedback
        feedback: u32,
    },
    /// the compositor sends `wp_presentation.clock_id`
    ServerClock {
        /// the clock
        clock: u32,
    },
}

/// Parses one line the program printed (`lf KIND PID NS ARGS...`); `None` for anything else.
pub fn parse(text: &str) -> Option<Event> {
    let mut words = text.split_ascii_whitespace();
    if words.next()? != PREFIX {
        return None;
    }
    let kind = words.next()?;
    let pid = words.next()?.parse().ok()?;
    let ns = words.next()?.parse().ok()?;
    let n: Vec<u64> = words.map(str::parse).collect::<Result<_, _>>().ok()?;
    let id = |i: usize| n.get(i).and_then(|&v| u32::try_from(v).ok());
    let kind = match (kind, n.len()) {
        ("c_commit", 1) => Kind::ClientCommit { surface: id(0)? },
        ("c_done", 1) => Kind::ClientDone { callback: id(0)? },
        ("c_presented", 1) => Kind::ClientPresented { feedback: id(0)? },
        ("s_commit", 1) => Kind::ServerCommit { surface: id(0)? },
        ("s_frame", 2) => Kind::ServerFrame {
            surface: id(0)?,
            callback: id(1)?,
        },
        ("s_feedback", 2) => Kind::ServerFeedback {
            surface: id(0)?,
            feedback: id(1)?,
        },
        ("s_done", 1) => Kind::ServerDone { callback: id(0)? },
        ("s_presented", 7) => presented(id(0)?, &n[1..])?,
        ("s_discarded", 1) => Kind::ServerDiscarded { feedback: id(0)? },
        ("s_clock", 1) => Kind::ServerClock { clock: id(0)? },
        _ => return None,
    };
    Some(Event { pid, ns, kind })
}

/// `presented(tv_sec_hi, tv_sec_lo, tv_nsec, refresh, seq_hi, seq_lo)`, each a `uint`.
fn presented(feedback: u32, n: &[u64]) -> Option<Kind> {
    let [sec_hi, sec_lo, nsec, refresh, seq_hi, seq_lo] = n[..] else {
        return None;
    };
    let u32s = [sec_hi, sec_lo, nsec, refresh, seq_hi, seq_lo];
    if u32s.iter().any(|&v| v > u64::from(u32::MAX)) || nsec >= 1_000_000_000 {
        return None;
    }
    Some(Kind::ServerPresented {
        feedback,
        display_ns: i128::from((sec_hi << 32) | sec_lo) * 1_000_000_000 + i128::from(nsec),
        refresh_ns: refresh,
        seq: (seq_hi << 32) | seq_lo,
    })
}

/// The frames of one client, built from the events of a capture in any order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Built {
    /// the frames whose commit both sides saw, in the order of the client's commits
    pub frames: Vec<Frame>,
    /// the presentation clock the compositor named, if it did while traced
    pub clock_id: Option<u32>,
    /// the client's commits seen, and those the compositor was seen to dispatch
    pub commits: (u64, u64),
    /// the client's dispatches of `done` and `presented` seen, and those whose sending was seen
    pub answers: (u64, u64),
    /// commits the compositor dispatched whose sending was not seen (in flight when tracing
    /// began)
    pub before: u64,
}

/// One commit as the compositor dispatched it, and what it answered.
#[derive(Debug, Clone, Copy, Default)]
struct Dispatched {
    surface: u32,
    at: i64,
    /// the client's sending of it, once aligned
    sent: Option<i64>,
    /// `done`: sent, and the client's dispatch of it
    done: Option<(i64, Option<i64>)>,
    asked_feedback: bool,
    answer: Option<Answer>,
}

/// How the compositor answered a feedback.
#[derive(Debug, Clone, Copy)]
enum Answer {
    Discarded,
    /// `presented`: sent at, its display time, refresh and seq, and the client's dispatch
    Presented(i64, i128, u64, u64, Option<i64>),
}

/// Where the walk is: per surface, the callbacks and feedbacks asked since its last commit;
/// the commit each live callback and feedback belongs to; those answered, awaiting the
/// client's dispatch.
#[derive(Default)]
struct Walk {
    commits: Vec<Dispatched>,
    pending: FxHashMap<u32, (Vec<u32>, Vec<u32>)>,
    callbacks: FxHashMap<u32, usize>,
    feedbacks: FxHashMap<u32, usize>,
    done_sent: FxHashMap<u32, usize>,
    presented_sent: FxHashMap<u32, usize>,
    clock_id: Option<u32>,
    answers: (u64, u64),
}

impl Walk {
    /// One event of the compositor's, or a client's dispatch of an answer, in time order.
    fn event(&mut self, e: &Event) {
        match e.kind {
            Kind::ServerFrame { surface, callback } => {
                self.pending.entry(surface).or_default().0.push(callback)
            }
            Kind::ServerFeedback { surface, feedback } => {
                self.pending.entry(surface).or_default().1.push(feedback)
            }
            Kind::ServerCommit { surface } => self.commit(surface, e.ns),
            Kind::ServerDone { callback } => {
                if let Some(k) = self.callbacks.remove(&callback) {
                    self.commits[k].done = Some((e.ns, None));
                    self.done_sent.insert(callback, k);
                }
            }
            Kind::ServerPresented {
                feedback,
                display_ns,
                refresh_ns,
                seq,
            } => {
                if let Some(k) = self.feedbacks.remove(&feedback) {
                    let p = Answer::Presented(e.ns, display_ns, refresh_ns, seq, None);
                    self.commits[k].answer = Some(p);
                    self.presented_sent.insert(feedback, k);
                }
            }
            Kind::ServerDiscarded { feedback } => {
                if let Some(k) = self.feedbacks.remove(&feedback) {
                    self.commits[k].answer = Some(Answer::Discarded);
                }
            }
            Kind::ServerClock { clock } => self.clock_id = Some(clock),
            Kind::ClientDone { callback } => self.client_done(callback, e.ns),
            Kind::ClientPresented { feedback } => self.client_presented(feedback, e.ns),
            Kind::ClientCommit { .. } => {}
        }
    }

    fn commit(&mut self, surface: u32, at: i64) {
        let (cbs, fbs) = self.pending.remove(&surface).unwrap_or_default();
        let k = self.commits.len();
        self.callbacks.extend(cbs.into_iter().map(|cb| (cb, k)));
        self.feedbacks.extend(fbs.iter().map(|&fb| (fb, k)));
        self.commits.push(Dispatched {
            surface,
            at,
            asked_feedback: !fbs.is_empty(),
            ..Dispatched::default()
        });
    }

    fn client_done(&mut self, callback: u32, at: i64) {
        self.answers.0 += 1;
        let Some(k) = self.done_sent.remove(&callback) else {
            return;
        };
        if let Some((_, client)) = &mut self.commits[k].done {
            *client = Some(at);
            self.answers.1 += 1;
        }
    }

    fn client_presented(&mut self, feedback: u32, at: i64) {
        self.answers.0 += 1;
        let Some(k) = self.presented_sent.remove(&feedback) else {
            return;
        };
        if let Some(Answer::Presented(.., client)) = &mut self.commits[k].answer {
            *client = Some(at);
            self.answers.1 += 1;
        }
    }
}

/// The frames of client `pid` in `events` (any order: bpftrace prints each CPU's events apart).
///
/// The compositor's events say which callbacks and feedbacks belong to which commit (those
/// asked for a surface since its last commit, as in the logs) and what was answered; the
/// client's commits of each surface are the compositor's in order, the first few of the
/// compositor's possibly sent before tracing began ([`pair`]); the client's dispatch of an
/// answer is the first after the compositor sent it on that id (an id is reused only after the
/// client has dispatched the answer and the compositor's `delete_id`).
pub fn frames(events: &[Event], pid: u32) -> Built {
    let mut mine: Vec<Event> = events.iter().filter(|e| e.pid == pid).copied().collect();
    mine.sort_by_key(|e| e.ns);
    let mut walk = Walk::default();
    for e in &mine {
        walk.event(e);
    }
    let mut sent: FxHashMap<u32, Vec<i64>> = FxHashMap::default();
    for e in &mine {
        if let Kind::ClientCommit { surface } = e.kind {
            sent.entry(surface).or_default().push(e.ns);
        }
    }
    let mut before = 0;
    let mut found = 0;
    for (surface, sends) in &sent {
        let dispatched: Vec<usize> = (0..walk.commits.len())
            .filter(|&k| walk.commits[k].surface == *surface)
            .collect();
        let at: Vec<i64> = dispatched.iter().map(|&k| walk.commits[k].at).collect();
        for (d, s) in pair(sends, &at).into_iter().enumerate() {
            match s {
                Some(s) => {
                    walk.commits[dispatched[d]].sent = Some(s);
                    found += 1;
                }
                // a dispatch before the first send seen: sent before tracing began
                None if found == 0 => before += 1,
                None => {}
            }
        }
    }
    let total = sent.values().map(|v| v.len() as u64).sum();
    let mut frames: Vec<Frame> = walk.commits.iter().filter_map(frame).collect();
    frames.sort_by_key(|f| f.commit.client_ns);
    for (n, f) in frames.iter_mut().enumerate() {
        f.line = n as u64 + 1;
    }
    Built {
        frames,
        clock_id: walk.clock_id,
        commits: (total, found),
        answers: walk.answers,
        before,
    }
}

/// The send (`sent`, in order) of each of a surface's dispatched commits (`dispatched`, in
/// order): the earliest not yet paired that was sent after the surface's previous dispatch and
/// no later than this one. A dispatch with no send in its stretch was sent before tracing
/// began, or its send was lost (bpftrace says `Lost`), and is left unpaired. So a lost event
/// costs at most its own frame and the next, never the pairing of those after it (a lost
/// dispatch leaves two sends in the next one's stretch: the earlier is taken, one frame off).
/// A client that sends a commit before its previous one is dispatched (several in flight) has
/// that commit left unpaired, and counted as such: frame-paced clients do not.
fn pair(sent: &[i64], dispatched: &[i64]) -> Vec<Option<i64>> {
    let mut next = 0;
    let mut previous = i64::MIN;
    dispatched
        .iter()
        .map(|&d| {
            while next < sent.len() && sent[next] <= previous {
                next += 1;
            }
            previous = d;
            let s = sent.get(next).copied().filter(|&s| s <= d)?;
            next += 1;
            Some(s)
        })
        .collect()
}

/// The frame of a dispatched commit whose sending was seen.
fn frame(d: &Dispatched) -> Option<Frame> {
    let sent = d.sent?;
    let feedback = match d.answer {
        None if d.asked_feedback => Feedback::Pending,
        None => Feedback::None,
        Some(Answer::Discarded) => Feedback::Discarded,
        // the answer reached the compositor's socket, not yet the client
        Some(Answer::Presented(.., None)) => Feedback::Pending,
        Some(Answer::Presented(at, display_ns, refresh_ns, seq, Some(client))) => {
            Feedback::Presented(Presented {
                seen: Seen {
                    client_ns: client,
                    server_ns: Some(at),
                },
                display_ns,
                refresh_ns,
                seq,
            })
        }
    };
    Some(Frame {
        surface: d.surface,
        line: 0,
        commit: Seen {
            client_ns: sent,
            server_ns: Some(d.at),
        },
        // no probe sees the attach: only a compositor trace links by it, and none is read live
        attached: false,
        done: d.done.and_then(|(at, client)| {
            Some(Seen {
                client_ns: client?,
                server_ns: Some(at),
            })
        }),
        feedback,
        repaint: None,
    })
}

/// The libraries probed, as the compositor maps them (the client's from the same directory,
/// or as the traced client maps it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Libraries {
    /// libwayland-client
    pub client: PathBuf,
    /// libwayland-server
    pub server: PathBuf,
    /// libffi
    pub ffi: PathBuf,
}

/// Why live frames cannot be traced.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// the compositor maps no libwayland-server or libffi
    #[error(
        "process {pid} maps no {library}: is it a Wayland compositor built on libwayland (weston, Mir, sway, mutter)?"
    )]
    NotMapped {
        /// the compositor
        pid: u32,
        /// the library missing
        library: &'static str,
    },
    /// the client's library could not be found
    #[error(
        "no libwayland-client beside {server} and process {pid} maps none: give --client-pid of a running Wayland client"
    )]
    NoClientLibrary {
        /// the server's library
        server: String,
        /// the client process looked at
        pid: u32,
    },
    /// a libwayland whose `wl_client` layout latscope has not checked
    #[error(
        "{path} is libwayland {version}: latscope reads the client's pid at the offsets of libwayland 1.21 (checked on Debian's 1.21.0), and other versions lay `struct wl_client` out otherwise"
    )]
    Layout {
        /// the library
        path: String,
        /// its version, from its file name
        version: String,
    },
    /// a path bpftrace cannot take in a probe
    #[error("{0}: bpftrace cannot take this path in a probe (it holds a space, quote or colon)")]
    Path(String),
}

/// The libraries a running `compositor` maps; the client library from `client`'s maps if
/// given, else beside libwayland-server.
pub fn libraries(compositor: u32, client: Option<u32>) -> Result<Libraries, LiveError> {
    let maps = |pid: u32| std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    let server_maps = maps(compositor);
    let find = |text: &str, name: &'static str| mapped(text, name);
    let server = find(&server_maps, "libwayland-server.so").ok_or(LiveError::NotMapped {
        pid: compositor,
        library: "libwayland-server",
    })?;
    let ffi = find(&server_maps, "libffi.so").ok_or(LiveError::NotMapped {
        pid: compositor,
        library: "libffi",
    })?;
    let beside = server
        .parent()
        .map(|d| d.join("libwayland-client.so.0"))
        .filter(|p| p.exists());
    let client_lib = match client {
        Some(pid) => find(&maps(pid), "libwayland-client.so").or(beside),
        None => beside,
    }
    .ok_or_else(|| LiveError::NoClientLibrary {
        server: server.display().to_string(),
        pid: client.unwrap_or(compositor),
    })?;
    let libs = Libraries {
        client: client_lib,
        server,
        ffi,
    };
    layout_checked(&libs)?;
    Ok(libs)
}

/// The path of the first mapping of a file whose name starts with `name`.
fn mapped(maps: &str, name: &str) -> Option<PathBuf> {
    maps.lines()
        .filter_map(|l| l.split_ascii_whitespace().nth(5))
        .map(Path::new)
        .find(|p| {
            p.file_name()
                .and_then(|f| f.to_str())
                .is_some_and(|f| f.starts_with(name))
        })
        .map(Path::to_path_buf)
}

/// The libraries, if their `wl_client` is laid out as libwayland 1.21's (the version read from
/// the file the path resolves to, `libwayland-server.so.0.21.0`) and bpftrace can take their
/// paths.
pub fn layout_checked(libs: &Libraries) -> Result<(), LiveError> {
    for path in [&libs.client, &libs.server, &libs.ffi] {
        let text = path.display().to_string();
        if text.contains([' ', '"', ':', '\\']) {
            return Err(LiveError::Path(text));
        }
    }
    for path in [&libs.client, &libs.server] {
        let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.clone());
        let version = version_of(&real);
        if version != Some(("0", "21")) {
            return Err(LiveError::Layout {
                path: real.display().to_string(),
                version: match version {
                    // libwayland 1.N is libwayland-*.so.0.N.x
                    Some(("0", minor)) => format!("1.{minor}"),
                    _ => "of unknown version".to_string(),
                },
            });
        }
    }
    Ok(())
}

/// `("0", "21")` of `libwayland-server.so.0.21.0`.
fn version_of(path: &Path) -> Option<(&str, &str)> {
    let name = path.file_name()?.to_str()?;
    let (_, v) = name.split_once(".so.")?;
    let mut parts = v.split('.');
    Some((parts.next()?, parts.next()?))
}

/// What the program traces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// the libraries probed
    pub libs: Libraries,
    /// the compositor's pid
    pub compositor: u32,
    /// the client's pid, or the held command's: it and every process it forks are traced
    pub client: u32,
    /// latscope's marker probe and pid: the program starts printing once it fires, every probe
    /// attached (`None`: from the start)
    pub marker: Option<(String, u32)>,
    /// stop after this many seconds
    pub duration_s: Option<u64>,
}

/// The bpftrace program for `spec`.
pub fn program(spec: &Spec) -> String {
    let mut out = String::from(
        "// generated by latscope frames --live: the messages of each frame, where libwayland sends and dispatches them\n",
    );
    let on = "@lf_on";
    match &spec.marker {
        Some((probe, pid)) => {
            let _ = writeln!(
                out,
                "\n// first in the program, attached last: it opens the gate once every probe is in place\n\
                 {probe} /pid == {pid}/ {{ {on} = 1; printf(\"{}\\n\"); }}",
                crate::live::program::ATTACHED
            );
        }
        None => {
            let _ = writeln!(out, "\nBEGIN {{ {on} = 1; }}");
        }
    }
    let tree = crate::live::program::Target::Tree(vec![spec.client]);
    let traced = crate::live::program::target_probes(&mut out, &tree);
    let traced = |task: &str| traced.replace("$TASK", task);
    client_probes(&mut out, spec, on, &traced("pid"));
    dispatch_probe(&mut out, spec, on, &traced);
    event_probe(&mut out, spec, on, &traced("$cpid"));
    end(&mut out, spec, on);
    out
}

/// The client's `wl_surface.commit`, at the entry of `wl_proxy_marshal_array_flags(proxy,
/// opcode, ...)`: the proxy begins with its `wl_object`.
fn client_probes(out: &mut String, spec: &Spec, on: &str, traced: &str) {
    let _ = writeln!(
        out,
        "\nuprobe:{}:wl_proxy_marshal_array_flags /{on} && {traced}/ {{\n\
         \x20 $o = arg0;\n\
         \x20 $n = *(uint64*)(*(uint64*)$o);\n\
         \x20 if (arg1 == 6 && {}) {{ printf(\"{PREFIX} c_commit %d %llu %u\\n\", pid, nsecs, *(uint32*)($o + 16)); }}\n\
         }}",
        spec.libs.client.display(),
        name_is("$n", "wl_surface"),
    );
}

/// Every handler libwayland calls through `ffi_call(cif, fn, rvalue, avalue)`: `*avalue[1]` is
/// the target's `wl_object`, the message the index of `fn` in its `implementation`; on the
/// compositor, `*avalue[0]` is the `wl_client`, and the arguments follow from `avalue[2]`
/// (a new id as its number, an object as its `wl_resource`).
fn dispatch_probe(out: &mut String, spec: &Spec, on: &str, traced: &dyn Fn(&str) -> String) {
    let c = spec.compositor;
    let handler = |i: usize| format!("*(uint64*)($impl + {}) == arg1", i * 8);
    let arg = |i: usize| format!("*(uint64*)($av + {})", 16 + i * 8);
    let _ = writeln!(
        out,
        "\nuprobe:{ffi}:ffi_call /{on} && (pid == {c} || {client})/ {{\n\
         \x20 $av = arg3;\n\
         \x20 $o = *(uint64*)(*(uint64*)($av + 8));\n\
         \x20 $n = *(uint64*)(*(uint64*)$o);\n\
         \x20 $impl = *(uint64*)($o + 8);\n\
         \x20 $id = *(uint32*)($o + 16);\n\
         \x20 if (pid == {c}) {{\n\
         \x20   $cpid = *(int32*)(*(uint64*)(*(uint64*)$av) + {pid_at});\n\
         \x20   if ({server_traced}) {{\n\
         \x20     if ({surface} && {commit}) {{ printf(\"{PREFIX} s_commit %d %llu %u\\n\", $cpid, nsecs, $id); }}\n\
         \x20     if ({surface} && {frame}) {{ printf(\"{PREFIX} s_frame %d %llu %u %u\\n\", $cpid, nsecs, $id, *(uint32*)({a0})); }}\n\
         \x20     if ({presentation} && {feedback}) {{ printf(\"{PREFIX} s_feedback %d %llu %u %u\\n\", $cpid, nsecs, *(uint32*)(*(uint64*)({a0}) + 16), *(uint32*)({a1})); }}\n\
         \x20   }}\n\
         \x20 }} else {{\n\
         \x20   if ({callback} && {done}) {{ printf(\"{PREFIX} c_done %d %llu %u\\n\", pid, nsecs, $id); }}\n\
         \x20   if ({fb} && {presented}) {{ printf(\"{PREFIX} c_presented %d %llu %u\\n\", pid, nsecs, $id); }}\n\
         \x20 }}\n\
         }}",
        ffi = spec.libs.ffi.display(),
        client = traced("pid"),
        server_traced = traced("$cpid"),
        pid_at = CLIENT_PID_AT,
        surface = name_is("$n", "wl_surface"),
        commit = handler(6),
        frame = handler(3),
        presentation = name_is("$n", "wp_presentation"),
        feedback = handler(1),
        a0 = arg(0),
        a1 = arg(1),
        callback = name_is("$n", "wl_callback"),
        done = handler(0),
        fb = name_is("$n", "wp_presentation_feedback"),
        presented = handler(1),
    );
}

/// Where libwayland 1.21 keeps the client's pid in `struct wl_client` (`ucred.pid`, after the
/// connection, source, display, display resource, link, object map and destroy signal).
pub const CLIENT_PID_AT: u32 = 136;
/// Where `struct wl_resource` keeps its `wl_client` (after its `wl_object`, destroy function,
/// link and deprecated destroy signal).
pub const RESOURCE_CLIENT_AT: u32 = 64;

/// The compositor's events, at the entry of `wl_resource_post_event_array(resource, opcode,
/// args)` and `wl_resource_queue_event_array`: `args` is an array of 8-byte `wl_argument`s.
fn event_probe(out: &mut String, spec: &Spec, on: &str, traced: &str) {
    let lib = spec.libs.server.display();
    let u = |i: usize| format!("*(uint32*)($a + {})", i * 8);
    let presented_args: Vec<String> = (0..6).map(u).collect();
    let _ = writeln!(
        out,
        "\nuprobe:{lib}:wl_resource_post_event_array, uprobe:{lib}:wl_resource_queue_event_array /{on} && pid == {c}/ {{\n\
         \x20 $o = arg0;\n\
         \x20 $cpid = *(int32*)(*(uint64*)($o + {RESOURCE_CLIENT_AT}) + {CLIENT_PID_AT});\n\
         \x20 if ({traced}) {{\n\
         \x20   $n = *(uint64*)(*(uint64*)$o);\n\
         \x20   $id = *(uint32*)($o + 16);\n\
         \x20   $a = arg2;\n\
         \x20   if (arg1 == 0 && {callback}) {{ printf(\"{PREFIX} s_done %d %llu %u\\n\", $cpid, nsecs, $id); }}\n\
         \x20   if (arg1 == 1 && {fb}) {{ printf(\"{PREFIX} s_presented %d %llu %u %u %u %u %u %u %u\\n\", $cpid, nsecs, $id, {args}); }}\n\
         \x20   if (arg1 == 2 && {fb}) {{ printf(\"{PREFIX} s_discarded %d %llu %u\\n\", $cpid, nsecs, $id); }}\n\
         \x20   if (arg1 == 0 && {presentation}) {{ printf(\"{PREFIX} s_clock %d %llu %u\\n\", $cpid, nsecs, {clock}); }}\n\
         \x20 }}\n\
         }}",
        c = spec.compositor,
        callback = name_is("$n", "wl_callback"),
        fb = name_is("$n", "wp_presentation_feedback"),
        presentation = name_is("$n", "wp_presentation"),
        args = presented_args.join(", "),
        clock = u(0),
    );
}

/// The process tree's exits, `--duration`, and the end marker; the maps cleared so that
/// bpftrace prints nothing more.
fn end(out: &mut String, spec: &Spec, on: &str) {
    let pids = crate::live::program::maps::PIDS;
    let full = crate::live::program::maps::FULL;
    let _ = writeln!(
        out,
        "\ntracepoint:sched:sched_process_exit /{pids}[(uint64)tid]/ {{ delete({pids}[(uint64)tid]); }}"
    );
    if let Some(d) = spec.duration_s {
        let _ = writeln!(out, "interval:s:{} {{ exit(); }}", d.max(1));
    }
    let _ = writeln!(
        out,
        "END {{ printf(\"{}\\n\"); clear({pids}); clear({full}); clear({on}); }}",
        crate::live::program::END
    );
}

/// A condition that the NUL-terminated string at `ptr` is `name`, as reads of 8, 4, 2 and 1
/// bytes compared with constants: bpftrace 0.17's string comparison is a loop the verifier
/// walks once per branch, and a few of them exceed its million instructions.
pub fn name_is(ptr: &str, name: &str) -> String {
    let mut bytes = name.as_bytes().to_vec();
    bytes.push(0);
    let mut parts = Vec::new();
    let mut at = 0;
    for (width, ty) in [(8, "uint64"), (4, "uint32"), (2, "uint16"), (1, "uint8")] {
        while bytes.len() - at >= width {
            let mut word = [0u8; 8];
            word[..width].copy_from_slice(&bytes[at..at + width]);
            let value = u64::from_le_bytes(word);
            parts.push(format!("*({ty}*)({ptr} + {at}) == {value:#x}"));
            at += width;
        }
    }
    format!("({})", parts.join(" && "))
}

/// The stages a live capture cannot give, and why, in one line.
pub const NOT_LIVE: &str = "compositor_to_repaint, repaint and repaint_to_vblank are not measured live: they are the compositor's own events (weston's timeline, Mir's LTTng trace), which no libwayland function sees";

/// What a capture gives: the frames of the traced client that committed most, with the same
/// analysis as the logs'. Several clients in the traced tree: the others are named in a note.
pub fn analyse(events: &[Event], lost: u64) -> Result<super::Analysis, super::FramesError> {
    let client = busiest(events);
    let built = client.map(|pid| frames(events, pid)).unwrap_or_default();
    let frames = built.frames;
    let offset =
        super::stages::clock_offset(&frames).map_err(|k| super::FramesError::NoOffset {
            location: crate::ingest::Location {
                file: format!("live frame {}", frames[k].line),
                line: frames[k].line,
            },
        })?;
    let pacing = super::pacing::pacing(&frames, offset.map(|o| o.estimate_ns));
    let joined = super::Joined {
        requests_found: built.commits.1,
        requests: built.commits.0,
        events_found: built.answers.1,
        events: built.answers.0,
        gaps: Vec::new(),
        shift_us: 0,
    };
    let mut notes = vec![NOT_LIVE.to_string()];
    let asked = frames.iter().any(|f| f.feedback != Feedback::None);
    // the clock's id is sent once, at binding: unknown where feedback was asked, it came before
    let clock_missed = asked && built.clock_id.is_none();
    notes.extend(capture_notes(
        events,
        client,
        built.before,
        clock_missed,
        lost,
    ));
    notes.extend(super::feedback_notes(
        &frames,
        asked || built.clock_id.is_some(),
    ));
    Ok(super::Analysis {
        frames,
        clock_id: built.clock_id,
        offset,
        timeline_offset: None,
        pacing,
        joined,
        notes,
        bytes: (0, 0),
    })
}

/// The client process that committed most (the one a command's wrapper forked, say).
fn busiest(events: &[Event]) -> Option<u32> {
    let mut commits: FxHashMap<u32, u64> = FxHashMap::default();
    for e in events {
        if let Kind::ClientCommit { .. } = e.kind {
            *commits.entry(e.pid).or_default() += 1;
        }
    }
    commits
        .into_iter()
        .max_by_key(|&(pid, n)| (n, std::cmp::Reverse(pid)))
        .map(|(pid, _)| pid)
}

/// What the reader should know of the capture itself.
fn capture_notes(
    events: &[Event],
    client: Option<u32>,
    before: u64,
    clock_missed: bool,
    lost: u64,
) -> Vec<String> {
    let mut notes = Vec::new();
    let Some(client) = client else {
        notes.push("the traced client sent no wl_surface.commit while traced".to_string());
        return notes;
    };
    let mut others: Vec<u32> = events
        .iter()
        .filter(|e| e.pid != client && matches!(e.kind, Kind::ClientCommit { .. }))
        .map(|e| e.pid)
        .collect();
    others.sort_unstable();
    others.dedup();
    if !others.is_empty() {
        let list: Vec<String> = others.iter().map(u32::to_string).collect();
        notes.push(format!(
            "the frames are process {client}'s; processes {} of the traced tree committed too (trace one with --client-pid)",
            list.join(", ")
        ));
    }
    let of_client = |client_side: bool| {
        events
            .iter()
            .filter(|e| e.pid == client)
            .filter(|e| match e.kind {
                Kind::ClientDone { .. } | Kind::ClientPresented { .. } => client_side,
                Kind::ServerDone { .. } | Kind::ServerPresented { .. } => !client_side,
                _ => false,
            })
            .count()
    };
    if of_client(true) == 0 && of_client(false) > 0 {
        notes.push(format!(
            "process {client} dispatched none of the {} done and presented the compositor sent through libffi: its proxies have a dispatcher of their own (wl_proxy_add_dispatcher, as wayland-rs does), which no exported function sees, so presented_to_client, commit_to_presented and the stages to the screen are not measured",
            of_client(false)
        ));
    }
    if before > 0 {
        notes.push(format!(
            "{before} commits the compositor dispatched were sent before tracing began: left out"
        ));
    }
    if clock_missed {
        notes.push("the presentation clock's id was sent before tracing began: the display times are mapped onto CLOCK_MONOTONIC from the data all the same".to_string());
    }
    if lost > 0 {
        notes.push(format!(
            "bpftrace lost {lost} events: the frames they belonged to lack the stages they end"
        ));
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frames::stages::Stage;

    fn at(ns: i64, kind: Kind) -> Event {
        Event { pid: 7, ns, kind }
    }

    /// One frame of surface 3 on both sides, its callback 20 and feedback 21, shown at 5.001 s
    /// on the presentation clock; the events out of order, as bpftrace's CPUs print them.
    fn one_frame() -> Vec<Event> {
        vec![
            at(18_200_000, Kind::ClientPresented { feedback: 21 }),
            at(1_000_000, Kind::ClientCommit { surface: 3 }),
            at(100, Kind::ServerClock { clock: 4 }),
            at(
                1_040_000,
                Kind::ServerFrame {
                    surface: 3,
                    callback: 20,
                },
            ),
            at(
                1_041_000,
                Kind::ServerFeedback {
                    surface: 3,
                    feedback: 21,
                },
            ),
            at(1_042_000, Kind::ServerCommit { surface: 3 }),
            at(17_000_000, Kind::ServerDone { callback: 20 }),
            at(17_100_000, Kind::ClientDone { callback: 20 }),
            at(
                18_000_000,
                Kind::ServerPresented {
                    feedback: 21,
                    display_ns: 5_001_000_000,
                    refresh_ns: 16_666_666,
                    seq: 42,
                },
            ),
        ]
    }

    #[test]
    fn a_frame_built_from_probe_events_has_the_differences_of_their_stamps_as_stages() {
        let built = frames(&one_frame(), 7);
        assert_eq!(built.frames.len(), 1);
        let f = built.frames[0];
        let stage = |s| f.stage_ns(s, Some(0));
        // by hand: 1_042_000 - 1_000_000; 17_000_000 - 1_042_000; 18_000_000 - 1_042_000; ...
        assert_eq!(stage(Stage::CommitToCompositor), Some(42_000));
        assert_eq!(stage(Stage::CompositorToFrameDone), Some(15_958_000));
        assert_eq!(stage(Stage::CompositorToPresented), Some(16_958_000));
        assert_eq!(stage(Stage::PresentedToClient), Some(200_000));
        assert_eq!(stage(Stage::CommitToPresented), Some(17_200_000));
        assert_eq!(f.done.map(|d| d.client_ns), Some(17_100_000));
        assert_eq!((f.surface, f.line, built.clock_id), (3, 1, Some(4)));
        assert_eq!(
            (built.commits, built.answers, built.before),
            ((1, 1), (2, 2), 0)
        );
        let Feedback::Presented(p) = f.feedback else {
            panic!("presented: {:?}", f.feedback)
        };
        assert_eq!(
            (p.display_ns, p.refresh_ns, p.seq),
            (5_001_000_000, 16_666_666, 42)
        );
    }

    #[test]
    fn a_commit_dispatched_before_its_sending_was_traced_is_left_out_and_counted() {
        let mut events = one_frame();
        events.push(at(500, Kind::ServerCommit { surface: 3 }));
        let built = frames(&events, 7);
        assert_eq!(built.frames.len(), 1);
        assert_eq!(built.frames[0].commit.server_ns, Some(1_042_000));
        assert_eq!(built.before, 1);
    }

    #[test]
    fn another_clients_events_on_the_same_ids_change_nothing_and_are_named() {
        let mut events = one_frame();
        let other: Vec<Event> = one_frame()
            .into_iter()
            .map(|e| Event {
                pid: 9,
                ns: e.ns + 333,
                ..e
            })
            .collect();
        events.extend(
            other
                .iter()
                .filter(|e| e.kind != Kind::ServerClock { clock: 4 }),
        );
        events.push(Event {
            pid: 9,
            ns: 30_000_000,
            kind: Kind::ClientCommit { surface: 3 },
        });
        let alone = frames(&one_frame(), 7);
        assert_eq!(frames(&events, 7), alone);
        // 9 committed twice: its frames are measured, and 7 is named
        let a = analyse(&events, 0).unwrap();
        assert_eq!(a.frames[0].commit.client_ns, 1_000_333);
        assert!(
            a.notes
                .iter()
                .any(|n| n.contains("processes 7 of the traced tree")),
            "{:?}",
            a.notes
        );
    }

    #[test]
    fn an_answer_the_client_never_dispatched_is_pending_and_a_discard_is_counted() {
        let mut events: Vec<Event> = one_frame()
            .into_iter()
            .filter(|e| !matches!(e.kind, Kind::ClientPresented { .. }))
            .collect();
        assert_eq!(frames(&events, 7).frames[0].feedback, Feedback::Pending);
        events.retain(|e| !matches!(e.kind, Kind::ServerPresented { .. }));
        events.push(at(18_000_000, Kind::ServerDiscarded { feedback: 21 }));
        assert_eq!(frames(&events, 7).frames[0].feedback, Feedback::Discarded);
    }

    #[test]
    fn each_dispatch_takes_the_send_since_the_previous_dispatch_and_a_lost_event_costs_one_frame() {
        // a dispatch of a commit sent before tracing began, then two frames
        assert_eq!(pair(&[10, 26], &[5, 11, 27]), [None, Some(10), Some(26)]);
        // the client's last commit still in flight
        assert_eq!(pair(&[10, 26, 42], &[11, 27]), [Some(10), Some(26)]);
        assert_eq!(pair(&[10], &[]), []);
        // the send of the second frame lost: its dispatch has none, the third is paired
        assert_eq!(pair(&[10, 42], &[11, 27, 43]), [Some(10), None, Some(42)]);
        // the dispatch of the second frame lost: the third dispatch takes the second send (one
        // frame off), and the fourth its own
        assert_eq!(
            pair(&[10, 26, 42, 58], &[11, 43, 59]),
            [Some(10), Some(26), Some(58)]
        );
    }

    #[test]
    fn a_capture_says_which_stages_are_not_live_and_maps_the_presentation_clock() {
        let a = analyse(&one_frame(), 0).unwrap();
        assert_eq!(a.notes[0], NOT_LIVE);
        let o = a.offset.unwrap();
        // display 5.001 s; commit sent at 1 ms, presented sent at 18 ms (CLOCK_MONOTONIC)
        assert_eq!(o.low_ns, 1_000_000 - 5_001_000_000);
        assert_eq!(o.high_ns, 18_000_000 - 5_001_000_000);
        let display = a.frames[0].stage_ns(Stage::CommitToDisplay, Some(o.estimate_ns));
        assert_eq!(display, Some(17_000_000));
        assert_eq!(
            analyse(&one_frame(), 3)
                .unwrap()
                .notes
                .last()
                .map(|n| n.contains("lost 3")),
            Some(true)
        );
    }

    #[test]
    fn a_client_whose_dispatches_no_probe_sees_is_told_which_stages_that_costs() {
        let events: Vec<Event> = one_frame()
            .into_iter()
            .filter(|e| {
                !matches!(
                    e.kind,
                    Kind::ClientDone { .. } | Kind::ClientPresented { .. }
                )
            })
            .collect();
        let a = analyse(&events, 0).unwrap();
        assert_eq!(a.frames[0].feedback, Feedback::Pending);
        assert_eq!(
            a.frames[0].stage_ns(Stage::CommitToCompositor, None),
            Some(42_000)
        );
        assert!(
            a.notes
                .iter()
                .any(|n| n.contains("dispatched none of the 2 done and presented")),
            "{:?}",
            a.notes
        );
    }

    #[test]
    fn a_capture_without_commits_says_so() {
        let a = analyse(&[], 0).unwrap();
        assert!(a.frames.is_empty());
        assert!(a.notes.iter().any(|n| n.contains("no wl_surface.commit")));
    }

    #[test]
    fn the_programs_lines_are_read_back_and_anything_else_is_not() {
        let p = parse("lf s_presented 7 18000000 21 0 5 1000000 16666666 0 42").unwrap();
        assert_eq!(
            p,
            at(
                18_000_000,
                Kind::ServerPresented {
                    feedback: 21,
                    display_ns: 5_001_000_000,
                    refresh_ns: 16_666_666,
                    seq: 42
                }
            )
        );
        assert_eq!(
            parse("lf s_feedback 7 5 3 21"),
            Some(at(
                5,
                Kind::ServerFeedback {
                    surface: 3,
                    feedback: 21
                }
            ))
        );
        for bad in [
            "lf s_presented 7 18000000 21 0 5 1000000000 16666666 0 42",
            "lf s_presented 7 18000000 21 0 4294967296 0 16666666 0 42",
            "lf s_commit 7 5",
            "lf s_commit 7 5 3 4",
            "lf c_commit 7 x 3",
            "lf nothing 7 5 3",
            "latscope:end",
            "",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_name_is_compared_as_little_endian_words_up_to_its_nul() {
        assert_eq!(
            name_is("$n", "wl_surface"),
            "(*(uint64*)($n + 0) == 0x61667275735f6c77 && *(uint16*)($n + 8) == 0x6563 && *(uint8*)($n + 10) == 0x0)"
        );
        // 24 letters and the NUL: three words and a byte
        assert_eq!(
            name_is("$n", "wp_presentation_feedback")
                .matches("&&")
                .count(),
            3
        );
    }

    fn spec() -> Spec {
        Spec {
            libs: Libraries {
                client: "/l/libwayland-client.so.0".into(),
                server: "/l/libwayland-server.so.0".into(),
                ffi: "/l/libffi.so.8".into(),
            },
            compositor: 100,
            client: 200,
            marker: Some(("usdt:/bin/latscope:latscope_live:attached".into(), 300)),
            duration_s: Some(3),
        }
    }

    #[test]
    fn the_program_opens_its_gate_at_the_marker_and_filters_the_compositors_events_by_client() {
        let text = program(&spec());
        let marker = text
            .find("usdt:/bin/latscope:latscope_live:attached /pid == 300/ { @lf_on = 1; printf(\"latscope:attached\\n\"); }")
            .unwrap();
        assert!(marker < text.find("uprobe:").unwrap());
        assert!(text.contains("BEGIN { @lt_pids[(uint64)200] = 1; }"));
        assert!(text.contains("uprobe:/l/libwayland-client.so.0:wl_proxy_marshal_array_flags /@lf_on && @lt_pids[(uint64)pid]/"));
        assert!(text.contains(
            "uprobe:/l/libffi.so.8:ffi_call /@lf_on && (pid == 100 || @lt_pids[(uint64)pid])/"
        ));
        assert!(text.contains("$cpid = *(int32*)(*(uint64*)(*(uint64*)$av) + 136);"));
        assert!(text.contains("$cpid = *(int32*)(*(uint64*)($o + 64) + 136);"));
        assert!(text.contains("if (@lt_pids[(uint64)$cpid])"));
        assert!(text.contains("interval:s:3 { exit(); }"));
        assert!(text.contains("END { printf(\"latscope:end\\n\");"));
        let without = program(&Spec {
            marker: None,
            ..spec()
        });
        assert!(without.contains("BEGIN { @lf_on = 1; }"));
    }

    #[test]
    fn only_libwayland_1_21_is_traced_and_its_version_is_read_from_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let lib = |name: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, "").unwrap();
            p
        };
        let mut libs = Libraries {
            client: lib("libwayland-client.so.0.21.0"),
            server: lib("libwayland-server.so.0.21.0"),
            ffi: lib("libffi.so.8"),
        };
        assert!(layout_checked(&libs).is_ok());
        libs.server = lib("libwayland-server.so.0.22.0");
        let e = layout_checked(&libs).unwrap_err().to_string();
        assert!(e.contains("is libwayland 1.22"), "{e}");
        libs.server = lib("libwayland-server.so.0.\u{2603}.0");
        let e = layout_checked(&libs).unwrap_err().to_string();
        assert!(e.contains("is libwayland 1.\u{2603}"), "{e}");
        libs.server = lib("libwayland-server.so");
        let e = layout_checked(&libs).unwrap_err().to_string();
        assert!(e.contains("of unknown version"), "{e}");
        libs.server = "/a b/libwayland-server.so.0.21.0".into();
        assert!(matches!(layout_checked(&libs), Err(LiveError::Path(_))));
    }

    #[test]
    fn the_libraries_are_read_from_a_maps_file() {
        let maps = "\
7f0-7f1 r-xp 00000000 08:01 1 /usr/lib/x86_64-linux-gnu/libffi.so.8.1.2
7f2-7f3 r-xp 00000000 08:01 2 /usr/lib/x86_64-linux-gnu/libwayland-server.so.0.21.0
7f4-7f5 rw-p 00000000 00:00 0
";
        assert_eq!(
            mapped(maps, "libwayland-server.so"),
            Some(PathBuf::from(
                "/usr/lib/x86_64-linux-gnu/libwayland-server.so.0.21.0"
            ))
        );
        assert_eq!(mapped(maps, "libwayland-client.so"), None);
    }
}
