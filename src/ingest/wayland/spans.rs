//! The span rules: which WAYLAND_DEBUG messages start and end which latency.
//!
//! * `commit_to_release`: the `wl_surface.commit` that made buffer B current → the next
//!   `wl_buffer.release` of B. A commit of B while B is still held supersedes the earlier one
//!   (the release pairs with the latest commit; the earlier is counted as superseded).
//! * `frame_to_done`: `wl_surface.frame(new id C)` → `wl_callback C.done`.
//! * `sync_to_done`: `wl_display.sync(new id C)` → `wl_callback C.done`.
//! * `commit_to_presented`: the commit that a `wp_presentation.feedback(surface, new id F)`
//!   was bound to → `F.presented`; `F.discarded` is counted, not sampled.
//!
//! Each side (client, server) and each connection id has its own objects and state: a nested
//! compositor prints both its client and its server traffic into one stderr. The side of a
//! message follows from its direction: a request printed as sent, or an event printed as
//! received, is the client's view.

use rustc_hash::FxHashMap;

use super::args::{self, ObjectArg};
use super::line::Message;
use super::objects::{ObjKey, Objects, SERVER_ID_BASE};
use crate::ingest::words::leading_digits;
use crate::span::{Group, ObjectLabel, OpenSpans, Outcome, SeriesKey, Side, SpanSink, Start};

/// The built-in spans.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SpanKind {
    /// `wl_surface.commit` → `wl_buffer.release`
    CommitRelease = 0,
    /// `wl_surface.frame` → `wl_callback.done`
    FrameDone = 1,
    /// `wl_display.sync` → `wl_callback.done`
    SyncDone = 2,
    /// `wl_surface.commit` → `wp_presentation_feedback.presented`
    Presented = 3,
}

impl SpanKind {
    /// All spans, in report order.
    pub const ALL: [SpanKind; 4] = [
        SpanKind::CommitRelease,
        SpanKind::FrameDone,
        SpanKind::SyncDone,
        SpanKind::Presented,
    ];

    /// The name in results (`commit_to_release`).
    pub const fn result_name(self) -> &'static str {
        match self {
            SpanKind::CommitRelease => "commit_to_release",
            SpanKind::FrameDone => "frame_to_done",
            SpanKind::SyncDone => "sync_to_done",
            SpanKind::Presented => "commit_to_presented",
        }
    }

    /// The name on the command line (`commit-release`).
    pub const fn cli_name(self) -> &'static str {
        match self {
            SpanKind::CommitRelease => "commit-release",
            SpanKind::FrameDone => "frame-done",
            SpanKind::SyncDone => "sync-done",
            SpanKind::Presented => "presented",
        }
    }

    /// The span names indexed like [`SeriesKey::span`].
    pub fn result_names() -> Vec<String> {
        Self::ALL
            .iter()
            .map(|k| k.result_name().to_string())
            .collect()
    }
}

impl std::str::FromStr for SpanKind {
    type Err = crate::error::UnknownName;

    /// By [`SpanKind::cli_name`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        crate::error::UnknownName::find(&Self::ALL, Self::cli_name, "span", s)
    }
}

/// How series are split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GroupBy {
    /// one series per span and side
    #[default]
    None,
    /// per `wl_surface`
    Surface,
    /// per object that carries the span (buffer, callback, feedback)
    Object,
    /// per input file
    File,
}

impl GroupBy {
    /// Every grouping.
    pub const ALL: [GroupBy; 4] = [
        GroupBy::None,
        GroupBy::Surface,
        GroupBy::Object,
        GroupBy::File,
    ];

    /// The name on the command line (`--group surface`).
    pub const fn name(self) -> &'static str {
        match self {
            GroupBy::None => "none",
            GroupBy::Surface => "surface",
            GroupBy::Object => "object",
            GroupBy::File => "file",
        }
    }
}

impl std::str::FromStr for GroupBy {
    type Err = crate::error::UnknownName;

    /// By [`GroupBy::name`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        crate::error::UnknownName::find(&Self::ALL, Self::name, "grouping", s)
    }
}

/// Which spans to compute and how to group them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpanOptions {
    /// enabled spans, indexed by `SpanKind as usize`
    pub enabled: [bool; 4],
    /// grouping
    pub group_by: GroupBy,
}

impl Default for SpanOptions {
    fn default() -> Self {
        SpanOptions {
            enabled: [true; 4],
            group_by: GroupBy::None,
        }
    }
}

impl SpanOptions {
    fn on(&self, kind: SpanKind) -> bool {
        self.enabled[kind as usize]
    }
}

/// Diagnostics about the protocol stream (not about single lines).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamStats {
    /// `wl_callback.done` that ends no open frame or sync span (its request is not in the log,
    /// or ids of several connections collide), so which span it belongs to is unknown
    pub unknown_callbacks: u64,
    /// client ids created again with no `delete_id` in between: usually several connections
    /// interleaved in one server-side log, which stock libwayland cannot tell apart
    pub reused_live_ids: u64,
    /// of those, the ids created by requests the log shows sent: a client's own log, of a
    /// process with several connections (as `latscope lab wayland` opens)
    pub reused_in_client_log: u64,
    /// [`FIRST_CLIENT_ID`] created again while alive, in a client's log and in a server's: each
    /// is a connection more, at least (one that begins after the one before freed its id 2 is
    /// not seen)
    pub first_id_reused: Sides,
}

/// A count in a client's log and in a server's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sides {
    /// requests sent: a client's log
    pub client: u64,
    /// requests received: a server's log
    pub server: u64,
}

impl Sides {
    fn add(&mut self, side: Side) {
        match side {
            Side::Client => self.client += 1,
            Side::Server => self.server += 1,
        }
    }

    /// Adds `other`'s counts.
    pub fn merge(&mut self, other: Sides) {
        self.client += other.client;
        self.server += other.server;
    }
}

/// The first id a connection allocates (`wl_display` is 1): its first request creates it.
pub const FIRST_CLIENT_ID: u32 = 2;

impl StreamStats {
    /// Client id `id` was created again while alive, on `side`.
    #[cold]
    fn note_reused(&mut self, id: u32, side: Side) {
        self.reused_live_ids += 1;
        if side == Side::Client {
            self.reused_in_client_log += 1;
        }
        if id == FIRST_CLIENT_ID {
            self.first_id_reused.add(side);
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    Nothing,
    Buffer(ObjKey),
    Nil,
}

#[derive(Debug)]
struct Surface {
    pending: Pending,
    feedbacks: Vec<ObjKey>,
}

impl Default for Surface {
    fn default() -> Self {
        Surface {
            pending: Pending::Nothing,
            feedbacks: Vec::new(),
        }
    }
}

/// The state of one side of one connection.
#[derive(Debug)]
struct Conn {
    side: Side,
    conn: Option<u32>,
    objects: Objects,
    surfaces: FxHashMap<ObjKey, Surface>,
    commits: OpenSpans<ObjKey, false, Started>,
    callbacks: OpenSpans<ObjKey, false, Started>,
    presented: OpenSpans<ObjKey, false, Started>,
}

/// A span that has started, as [`crate::span::Open`] holds it but laid out in order, the
/// start time first. Kept in Rust's own order, a span's end read the start time from a copy
/// made in stores of other sizes and places (store forwarding failed), a visible share of
/// reading a WAYLAND_DEBUG log; in order, the load finds its store. `Open` itself stays as it
/// is: in order, it made reading JSON lines slower.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
struct Started {
    start_ns: u64,
    series: SeriesKey,
}

impl Start for Started {
    #[inline(always)]
    fn start_ns(&self) -> u64 {
        self.start_ns
    }

    #[inline(always)]
    fn series(&self) -> &SeriesKey {
        &self.series
    }
}

impl Conn {
    fn new(side: Side, conn: Option<u32>) -> Self {
        Conn {
            side,
            conn,
            objects: Objects::default(),
            surfaces: FxHashMap::default(),
            commits: OpenSpans::default(),
            callbacks: OpenSpans::default(),
            presented: OpenSpans::default(),
        }
    }
}

/// What a message means to the span rules, from its text alone: which known message it is,
/// to which object on which side, the objects its `new id` arguments create and the arguments
/// its rule reads. Everything the rules read of a message: the parallel reader's records hold
/// it and its stamp, not the text. The parallel reader works it out on the
/// threads that parse lines, off the one that pairs ([`SpanTracker::message_meaning`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meaning {
    known: Known,
    /// printed as sent (the side follows from it)
    sent: bool,
    /// wayland-debug's connection id
    conn: Option<u32>,
    /// the object the message is to or from
    id: u32,
    /// ids created (at most 4 are followed, as before)
    created: [u32; 4],
    n_created: u8,
    /// the arguments the rule of `known` reads
    arg: Arg,
}

/// The arguments a span rule reads, read once with the rest of the message's meaning (the
/// rules reading them again from the text was a large part of pairing a `sync`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arg {
    /// none read, or not as the rule wants them
    None,
    /// the first argument, an object (`attach`'s buffer, `frame`'s and `sync`'s callback)
    Object(u32),
    /// the first argument, `nil`
    Nil,
    /// `delete_id`'s id
    Number(u32),
    /// `feedback`'s surface and feedback: the first two arguments that are objects or `nil`,
    /// when both are objects
    Two(u32, u32),
}

impl Arg {
    fn of(known: Known, args: &[u8]) -> Arg {
        let object = |arg: Option<ObjectArg<'_>>| match arg {
            Some(ObjectArg::Object { id, .. }) => Arg::Object(id),
            Some(ObjectArg::Nil) => Arg::Nil,
            None => Arg::None,
        };
        match known {
            Known::Attach if let Some(id) = args::first_plain_object(args) => Arg::Object(id),
            Known::Attach | Known::Frame | Known::Sync => {
                object(args::nth(args, 0).and_then(args::object))
            }
            Known::DeleteId => args::number(args).map_or(Arg::None, Arg::Number),
            Known::Feedback => {
                let mut refs = args::split(args).filter_map(args::object);
                match (refs.next(), refs.next()) {
                    (
                        Some(ObjectArg::Object { id: surface, .. }),
                        Some(ObjectArg::Object { id: feedback, .. }),
                    ) => Arg::Two(surface, feedback),
                    _ => Arg::None,
                }
            }
            _ => Arg::None,
        }
    }
}

impl Meaning {
    /// What `msg` means.
    ///
    /// Inlined where it is called: returned through memory, the meaning was built on the stack
    /// in stores of 1 to 4 bytes and copied out in loads of 8 and 16, which waited for them
    /// (store forwarding fails) whenever the code around the call was laid out so: a parallel
    /// read slowed down with nothing changed in this module, and recovered when inlined.
    #[inline(always)]
    pub fn of(msg: &Message<'_>) -> Meaning {
        let known = Known::classify(msg.interface, msg.name);
        let mut meaning = Meaning {
            known,
            sent: msg.sent,
            conn: msg.conn,
            id: msg.id,
            created: [0; 4],
            n_created: 0,
            arg: Arg::None,
        };
        // A `sync` or a `frame` as printed, `new id wl_callback@7`: its one argument is both
        // the object the rule reads and the one object created (each was found by a search of
        // its own before, a large share of reading a `sync` line).
        if matches!(known, Known::Sync | Known::Frame)
            && let Some(id) = args::lone_new_id(msg.args)
        {
            meaning.arg = Arg::Object(id);
            meaning.created[0] = id;
            meaning.n_created = 1;
            return meaning;
        }
        // A call most messages (a `done`, a `delete_id`, a `commit`, a `release`) skip: their
        // rule reads no argument, so looking for one was work spent on nearly every line (as
        // is `for_each_new_id`'s own check, kept cheap for that reason).
        if known.reads_args() {
            meaning.arg = Arg::of(known, msg.args);
        }
        args::for_each_new_id(msg.args, &args::NewIdFinder::new(), |_, id| {
            if let Some(slot) = meaning.created.get_mut(usize::from(meaning.n_created)) {
                *slot = id;
                meaning.n_created += 1;
            }
        });
        meaning
    }

    /// What the message of a line in the usual layout means, read from its `body` (the line
    /// from its interface on, [`super::line::usual_head`]), when it is one of the messages a
    /// span rule reads in the shape libwayland prints it: `wl_display.sync`,
    /// `wl_surface.frame` (one `new id`), `wl_display.delete_id` (a number),
    /// `wl_callback.done`, `wl_surface.commit`, `wl_buffer.release`, `wl_surface.destroy`
    /// (nothing that could create an object), `wl_surface.attach` (an object first, and no
    /// `n` anywhere, so no `new id`), and `wl_surface.damage` and `damage_buffer`, which no
    /// rule reads but every frame has (no `n`). `None` for any other line, whose message
    /// [`super::line::usual_body`] reads for [`Meaning::of`]. When it gives a meaning, it is
    /// the one [`Meaning::of`] gives of the message [`super::line::parse_plain`] reads (a test
    /// compares them on lines changed at every byte, and the fuzz target `wayland_line` on
    /// every input).
    ///
    /// These are nearly all lines of a log a span is measured in, and their interface and name
    /// are known before they are read:
    /// compared as words, not found by their bytes' class and then compared (the message,
    /// then the classification by its names, then the search for `new id`).
    #[inline(always)]
    pub fn of_usual(body: &[u8], sent: bool) -> Option<Meaning> {
        Packed::of_usual(body, sent).map(Packed::meaning)
    }

    /// Whether the span rules do anything with the message: one no rule reads that creates
    /// no object moves nothing but the clock ([`SpanTracker::message_meaning`] returns).
    #[inline(always)]
    pub fn matters(&self) -> bool {
        self.known != Known::Other || self.n_created > 0
    }

    #[inline(always)]
    fn created(&self) -> &[u32] {
        &self.created[..usize::from(self.n_created)]
    }

    /// The meaning in 12 bytes, when it has the shape almost every message has: no
    /// connection id, at most one object created, and one number besides the object (the
    /// argument the rule reads, or the object created, or both when they are the same id, as
    /// in a `sync`); `None` for any other ([`Packed`]).
    #[inline(always)]
    pub(crate) fn packed(&self) -> Option<Packed> {
        if self.conn.is_some() || self.n_created > 1 {
            return None;
        }
        let (arg, one) = match self.arg {
            Arg::None => (Packed::ARG_NONE, None),
            Arg::Object(id) => (Packed::ARG_OBJECT, Some(id)),
            Arg::Nil => (Packed::ARG_NIL, None),
            Arg::Number(n) => (Packed::ARG_NUMBER, Some(n)),
            Arg::Two(..) => return None,
        };
        let created = (self.n_created == 1).then_some(self.created[0]);
        let one = match (one, created) {
            (Some(a), Some(c)) if a != c => return None,
            (Some(v), _) | (None, Some(v)) => v,
            (None, None) => 0,
        };
        let form = u8::from(self.sent)
            | arg << Packed::ARG_SHIFT
            | u8::from(created.is_some()) << Packed::CREATES_SHIFT;
        Some(Packed {
            id: self.id,
            one,
            known: self.known,
            form,
        })
    }
}

/// A [`Meaning`] in 12 bytes ([`Meaning::packed`]): the parallel reader's records hold it, a
/// quarter of the meaning's 44 bytes (written on one core and read on another, the records
/// cost the reader more than their instructions said).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Packed {
    id: u32,
    /// the argument the rule reads, the object created, or both
    one: u32,
    known: Known,
    /// bit 0: sent; bits 1-2: the argument's kind; bit 3: `one` is created
    form: u8,
}

impl Packed {
    const ARG_NONE: u8 = 0;
    const ARG_OBJECT: u8 = 1;
    const ARG_NIL: u8 = 2;
    const ARG_NUMBER: u8 = 3;
    const ARG_SHIFT: u8 = 1;
    const CREATES_SHIFT: u8 = 3;

    /// [`Meaning::of_usual`], packed (every message it reads has a shape that packs): what
    /// the parallel reader records, without the meaning's 44 bytes and their packing.
    #[inline(always)]
    pub(crate) fn of_usual(body: &[u8], sent: bool) -> Option<Packed> {
        let (first, second) = words_of(body.get(..16)?);
        // the interface: eight bytes, then the rest of it and `@` or `#` after it
        let (iface_len, interface) = match first {
            WL_DISPL if second & 0xffff == u64::from(u16::from_le_bytes(*b"ay")) => {
                (10, Interface::Display)
            }
            WL_SURFA if second & 0xffff == u64::from(u16::from_le_bytes(*b"ce")) => {
                (10, Interface::Surface)
            }
            WL_BUFFE if second & 0xff == u64::from(b'r') => (9, Interface::Buffer),
            WL_CALLB if second & 0xff_ffff == u64::from(u32::from_le_bytes(*b"ack\0")) => {
                (11, Interface::Callback)
            }
            _ => return None,
        };
        if !matches!(body[iface_len], b'@' | b'#') {
            return None;
        }
        // the id: one to seven digits, as the usual layout reads it, then `.`
        let (id, id_len) = leading_digits(&body[iface_len + 1..])?;
        let dot = iface_len + 1 + id_len;
        if id_len == 0 || id_len == 8 || body[dot] != b'.' {
            return None;
        }
        let call = &body[dot + 1..];
        let (known, args) = match (interface, call.first()?) {
            (Interface::Display, b's') => (Known::Sync, args_of_call(call, b"sync")?),
            (Interface::Display, b'd') => (Known::DeleteId, args_of_call(call, b"delete_id")?),
            (Interface::Surface, b'c') => (Known::Commit, args_of_call(call, b"commit")?),
            (Interface::Surface, b'a') => (Known::Attach, args_of_call(call, b"attach")?),
            (Interface::Surface, b'f') => (Known::Frame, args_of_call(call, b"frame")?),
            (Interface::Surface, b'd') if call.get(1) == Some(&b'e') => {
                (Known::SurfaceDestroy, args_of_call(call, b"destroy")?)
            }
            // no rule reads a damage, which is in every frame: a message that moves the clock
            (Interface::Surface, b'd') => {
                let args = args_of_call(call, b"damage");
                (
                    Known::Other,
                    args.or_else(|| args_of_call(call, b"damage_buffer"))?,
                )
            }
            (Interface::Buffer, b'r') => (Known::Release, args_of_call(call, b"release")?),
            (Interface::Callback, b'd') => (Known::Done, args_of_call(call, b"done")?),
            _ => return None,
        };
        // each as `Meaning::of` reads it, when it creates nothing or the one object it reads
        let short = args.len() < args::NEW_ID_SHORTEST;
        let (arg, one, creates) = match known {
            // `new id wl_callback@7` (or `#7`): what `args::lone_new_id` reads
            Known::Sync | Known::Frame => {
                let id = match args.strip_prefix(b"new id wl_callback") {
                    Some([b'@' | b'#', digits @ ..]) => args::whole_id(digits)?,
                    _ => return None,
                };
                (Packed::ARG_OBJECT, id, true)
            }
            // nine digits at most, which `args::number` reads alike
            Known::DeleteId => (Packed::ARG_NUMBER, args::whole_id(args)?, false),
            Known::Done | Known::Commit | Known::Release | Known::SurfaceDestroy if short => {
                (Packed::ARG_NONE, 0, false)
            }
            // (no `n`: no `new id`)
            Known::Other if !args.contains(&b'n') => (Packed::ARG_NONE, 0, false),
            // `wl_buffer@44, 0, 0`, whose object `args::first_plain_object` reads
            Known::Attach => {
                let digits = match args.strip_prefix(b"wl_buffer") {
                    Some([b'@' | b'#', digits @ ..]) => digits,
                    _ => return None,
                };
                let (id, len) = args::object_id(digits)?;
                let rest = &digits[len..];
                if !(rest.is_empty() || rest.starts_with(b", ")) || rest.contains(&b'n') {
                    return None;
                }
                (Packed::ARG_OBJECT, id, false)
            }
            _ => return None,
        };
        Some(Packed {
            id: id as u32,
            one,
            known,
            form: u8::from(sent)
                | arg << Packed::ARG_SHIFT
                | u8::from(creates) << Packed::CREATES_SHIFT,
        })
    }

    /// [`Meaning::matters`] of the meaning packed.
    #[inline(always)]
    pub(crate) fn matters(&self) -> bool {
        self.known != Known::Other || (self.form >> Self::CREATES_SHIFT) & 1 == 1
    }

    /// The meaning packed.
    #[inline(always)]
    pub(crate) fn meaning(self) -> Meaning {
        let one = self.one;
        let arg = match (self.form >> Self::ARG_SHIFT) & 3 {
            Self::ARG_OBJECT => Arg::Object(one),
            Self::ARG_NIL => Arg::Nil,
            Self::ARG_NUMBER => Arg::Number(one),
            _ => Arg::None,
        };
        let creates = (self.form >> Self::CREATES_SHIFT) & 1;
        Meaning {
            known: self.known,
            sent: self.form & 1 == 1,
            conn: None,
            id: self.id,
            created: [one * u32::from(creates), 0, 0, 0],
            n_created: creates,
            arg,
        }
    }
}

/// The interfaces of [`Meaning::of_usual`]'s messages.
#[derive(Debug, Clone, Copy)]
enum Interface {
    Display,
    Surface,
    Buffer,
    Callback,
}

/// The first eight bytes of each of them, as a little-endian word.
const WL_DISPL: u64 = u64::from_le_bytes(*b"wl_displ");
const WL_SURFA: u64 = u64::from_le_bytes(*b"wl_surfa");
const WL_BUFFE: u64 = u64::from_le_bytes(*b"wl_buffe");
const WL_CALLB: u64 = u64::from_le_bytes(*b"wl_callb");

/// The arguments of `call` (`sync(new id wl_callback@3)`) when it is a call of `name`.
#[inline(always)]
fn args_of_call<'a, const N: usize>(call: &'a [u8], name: &[u8; N]) -> Option<&'a [u8]> {
    let (head, args) = call.split_at_checked(N + 1)?;
    if head[..N] != *name || head[N] != b'(' {
        return None;
    }
    args.strip_suffix(b")")
}

/// Sixteen bytes as two little-endian words.
#[inline(always)]
fn words_of(b: &[u8]) -> (u64, u64) {
    let word = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or([0; 8]));
    (word(0), word(8))
}

/// Known messages, classified once per line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Known {
    Attach,
    Commit,
    Frame,
    SurfaceDestroy,
    Sync,
    DeleteId,
    Release,
    Done,
    Feedback,
    Presented,
    Discarded,
    Other,
}

impl Known {
    fn classify(interface: &[u8], name: &[u8]) -> Known {
        // By the lengths first, then the bytes of the one pair of names those lengths allow
        // (comparing the arms in turn was a cost paid on every line).
        let is = |i: &[u8], n: &[u8], known: Known| {
            if interface == i && name == n {
                known
            } else {
                Known::Other
            }
        };
        match (interface.len(), name.len()) {
            (10, 6) if name == b"attach" => is(b"wl_surface", b"attach", Known::Attach),
            (10, 6) => is(b"wl_surface", b"commit", Known::Commit),
            (10, 5) => is(b"wl_surface", b"frame", Known::Frame),
            (10, 7) => is(b"wl_surface", b"destroy", Known::SurfaceDestroy),
            (10, 4) => is(b"wl_display", b"sync", Known::Sync),
            (10, 9) => is(b"wl_display", b"delete_id", Known::DeleteId),
            (9, 7) => is(b"wl_buffer", b"release", Known::Release),
            (11, 4) => is(b"wl_callback", b"done", Known::Done),
            (15, 8) => is(b"wp_presentation", b"feedback", Known::Feedback),
            (24, 9) if name == b"presented" => {
                is(b"wp_presentation_feedback", b"presented", Known::Presented)
            }
            (24, 9) => is(b"wp_presentation_feedback", b"discarded", Known::Discarded),
            _ => Known::Other,
        }
    }

    /// [`Known::classify`] as it was written, the pairs in turn: what the tests hold it to.
    #[cfg(test)]
    fn classify_by_pairs(interface: &[u8], name: &[u8]) -> Known {
        match (interface, name) {
            (b"wl_surface", b"attach") => Known::Attach,
            (b"wl_surface", b"commit") => Known::Commit,
            (b"wl_surface", b"frame") => Known::Frame,
            (b"wl_surface", b"destroy") => Known::SurfaceDestroy,
            (b"wl_display", b"sync") => Known::Sync,
            (b"wl_display", b"delete_id") => Known::DeleteId,
            (b"wl_buffer", b"release") => Known::Release,
            (b"wl_callback", b"done") => Known::Done,
            (b"wp_presentation", b"feedback") => Known::Feedback,
            (b"wp_presentation_feedback", b"presented") => Known::Presented,
            (b"wp_presentation_feedback", b"discarded") => Known::Discarded,
            _ => Known::Other,
        }
    }

    /// Whether the rule of this message reads its arguments ([`Arg::of`] gives `Arg::None`
    /// for any other).
    #[inline(always)]
    fn reads_args(self) -> bool {
        matches!(
            self,
            Known::Attach | Known::Frame | Known::Sync | Known::DeleteId | Known::Feedback
        )
    }

    /// Whether this is a request (client → server); `None` when we do not know.
    fn is_request(self) -> Option<bool> {
        match self {
            Known::Attach
            | Known::Commit
            | Known::Frame
            | Known::SurfaceDestroy
            | Known::Sync
            | Known::Feedback => Some(true),
            Known::DeleteId
            | Known::Release
            | Known::Done
            | Known::Presented
            | Known::Discarded => Some(false),
            Known::Other => None,
        }
    }
}

fn side_of(is_request: bool, sent: bool) -> Side {
    if is_request == sent {
        Side::Client
    } else {
        Side::Server
    }
}

/// Applies the span rules to a stream of messages. One per input file (object ids and the
/// clock do not carry over between files); results go to a [`SpanSink`].
pub struct SpanTracker {
    options: SpanOptions,
    file_index: u32,
    conns: Vec<Conn>,
    last_conn: usize,
    stats: StreamStats,
}

impl SpanTracker {
    /// A tracker for the input file at `file_index` (used by `--group file`).
    pub fn new(options: SpanOptions, file_index: u32) -> Self {
        SpanTracker {
            options,
            file_index,
            conns: Vec::new(),
            last_conn: 0,
            stats: StreamStats::default(),
        }
    }

    /// What the stream looked like so far.
    pub fn stats(&self) -> StreamStats {
        self.stats
    }

    /// The index of the connection of `side` and `conn`: the last one's, checked here, where
    /// it is called (a call with the frame of the look-up and of [`Conn::new`] was a cost on
    /// every line), or [`SpanTracker::conn_looked_up`].
    #[inline(always)]
    fn conn_index(&mut self, side: Side, conn: Option<u32>) -> usize {
        if let Some(c) = self.conns.get(self.last_conn)
            && c.side == side
            && c.conn == conn
        {
            return self.last_conn;
        }
        self.conn_looked_up(side, conn)
    }

    #[inline(never)]
    fn conn_looked_up(&mut self, side: Side, conn: Option<u32>) -> usize {
        let index = match self
            .conns
            .iter()
            .position(|c| c.side == side && c.conn == conn)
        {
            Some(i) => i,
            None => {
                self.conns.push(Conn::new(side, conn));
                self.conns.len() - 1
            }
        };
        self.last_conn = index;
        index
    }

    /// Feeds one message stamped `ts` (unwrapped nanoseconds).
    pub fn message(&mut self, msg: &Message<'_>, ts: u64, sink: &mut impl SpanSink) {
        self.message_meaning(&Meaning::of(msg), ts, sink);
    }

    /// [`SpanTracker::message`], with what the message means already worked out
    /// ([`Meaning::of`] of the same message).
    pub fn message_meaning(&mut self, meaning: &Meaning, ts: u64, sink: &mut impl SpanSink) {
        let known = meaning.known;
        self.track_creations(meaning, sink);
        let Some(is_request) = known.is_request() else {
            return;
        };
        let ci = self.conn_index(side_of(is_request, meaning.sent), meaning.conn);
        let ctx = Ctx {
            options: self.options,
            file_index: self.file_index,
            ts,
        };
        let conn = &mut self.conns[ci];
        let arg = meaning.arg;
        match known {
            Known::Attach => on_attach(conn, meaning.id, arg),
            Known::Commit => on_commit(conn, &ctx, meaning.id, sink),
            Known::Frame => {
                on_callback_request(conn, &ctx, SpanKind::FrameDone, meaning.id, arg, sink)
            }
            Known::Sync => {
                on_callback_request(conn, &ctx, SpanKind::SyncDone, meaning.id, arg, sink)
            }
            Known::SurfaceDestroy => {
                let key = conn.objects.current(meaning.id);
                conn.surfaces.remove(&key);
            }
            Known::DeleteId => {
                if let Arg::Number(id) = arg {
                    conn.objects.delete(id);
                }
            }
            Known::Release => on_release(conn, &ctx, meaning.id, sink),
            Known::Done => {
                let ended = on_done(conn, ts, meaning.id, sink);
                // A callback created by another request (not frame or sync) is not ours; any
                // other done that ends nothing is an orphan of an unknown span.
                if !ended && !conn.objects.created_elsewhere(meaning.id) {
                    self.stats.unknown_callbacks += 1;
                }
            }
            Known::Feedback if self.options.on(SpanKind::Presented) => on_feedback(conn, arg),
            Known::Feedback => {}
            Known::Presented => on_presented(conn, &ctx, meaning.id, None, sink),
            Known::Discarded => {
                on_presented(conn, &ctx, meaning.id, Some(Outcome::Discarded), sink)
            }
            Known::Other => {}
        }
    }

    /// Every `new id` argument creates an object; the object its id named before is gone, so
    /// spans still waiting on it can never end.
    fn track_creations(&mut self, meaning: &Meaning, sink: &mut impl SpanSink) {
        for &id in meaning.created() {
            let side = side_of(id < SERVER_ID_BASE, meaning.sent);
            let ci = self.conn_index(side, meaning.conn);
            let conn = &mut self.conns[ci];
            let made = conn.objects.create(id);
            if made.reused_live_id {
                self.stats.note_reused(id, side);
            }
            // Only the tables that can hold the old object are looked in (a `sync` makes its
            // callback again every frame, so four look-ups of the old one each time add up,
            // more so on several threads); the outcomes keep their order.
            let Some(old) = made.replaced else { continue };
            if old.touched {
                conn.commits.abandon(&old.key, sink);
            }
            if old.spanned {
                conn.callbacks.abandon(&old.key, sink);
            }
            if old.touched {
                conn.presented.abandon(&old.key, sink);
                conn.surfaces.remove(&old.key);
            }
        }
    }

    /// Ends the stream: every span still open is unmatched.
    pub fn finish(&mut self, sink: &mut impl SpanSink) {
        for conn in &mut self.conns {
            conn.commits.finish(sink);
            conn.callbacks.finish(sink);
            conn.presented.finish(sink);
        }
        self.conns.clear();
        self.last_conn = 0;
    }
}

/// What every rule needs to know besides the connection.
struct Ctx {
    options: SpanOptions,
    file_index: u32,
    ts: u64,
}

impl Ctx {
    /// The series of span `kind` for a span carried by `object`, on `surface`.
    fn series(
        &self,
        conn: &Conn,
        kind: SpanKind,
        surface: Option<Label>,
        object: Label,
    ) -> SeriesKey {
        let label = |(interface, key): Label| {
            Group::Object(ObjectLabel {
                conn: conn.conn,
                interface,
                id: key.id,
                generation: key.generation,
            })
        };
        let group = match self.options.group_by {
            GroupBy::None => Group::All,
            GroupBy::File => Group::File(self.file_index),
            GroupBy::Object => label(object),
            GroupBy::Surface => surface.map_or(Group::All, label),
        };
        SeriesKey {
            span: kind as usize,
            side: Some(conn.side),
            group,
        }
    }
}

type Label = (&'static str, ObjKey);

// (This and `on_callback_request` left out of line by the compiler cost `message_meaning`
// more than the look-ups skipped in `track_creations` saved.)
#[inline(always)]
fn on_attach(conn: &mut Conn, surface_id: u32, buffer: Arg) {
    let pending = match buffer {
        Arg::Object(id) => Pending::Buffer(conn.objects.touch(id)),
        Arg::Nil => Pending::Nil,
        _ => return,
    };
    let surface = conn.objects.touch(surface_id);
    conn.surfaces.entry(surface).or_default().pending = pending;
}

fn on_commit(conn: &mut Conn, ctx: &Ctx, surface_id: u32, sink: &mut impl SpanSink) {
    let surface = conn.objects.current(surface_id);
    let Some(state) = conn.surfaces.get_mut(&surface) else {
        return;
    };
    let pending = std::mem::replace(&mut state.pending, Pending::Nothing);
    let feedbacks = std::mem::take(&mut state.feedbacks);
    let on_surface = Some(("wl_surface", surface));
    if let (Pending::Buffer(buffer), true) = (pending, ctx.options.on(SpanKind::CommitRelease)) {
        let series = ctx.series(
            conn,
            SpanKind::CommitRelease,
            on_surface,
            ("wl_buffer", buffer),
        );
        let open = Started {
            start_ns: ctx.ts,
            series,
        };
        conn.commits.start(buffer, open, Outcome::Superseded, sink);
    }
    for feedback in feedbacks {
        let object = ("wp_presentation_feedback", feedback);
        let series = ctx.series(conn, SpanKind::Presented, on_surface, object);
        conn.presented.start(
            feedback,
            Started {
                start_ns: ctx.ts,
                series,
            },
            Outcome::Unmatched,
            sink,
        );
    }
}

fn on_release(conn: &mut Conn, ctx: &Ctx, buffer_id: u32, sink: &mut impl SpanSink) {
    if !ctx.options.on(SpanKind::CommitRelease) {
        return;
    }
    let buffer = conn.objects.current(buffer_id);
    if !conn.commits.end(&buffer, ctx.ts, sink) {
        let series = ctx.series(conn, SpanKind::CommitRelease, None, ("wl_buffer", buffer));
        sink.outcome(&series, Outcome::OrphanEnd);
    }
}

#[inline(always)]
fn on_callback_request(
    conn: &mut Conn,
    ctx: &Ctx,
    kind: SpanKind,
    object_id: u32,
    callback: Arg,
    sink: &mut impl SpanSink,
) {
    if !ctx.options.on(kind) {
        return;
    }
    let Arg::Object(id) = callback else {
        return;
    };
    conn.objects.mark_spanned(id);
    let callback = conn.objects.current(id);
    let surface =
        (kind == SpanKind::FrameDone).then(|| ("wl_surface", conn.objects.current(object_id)));
    let series = ctx.series(conn, kind, surface, ("wl_callback", callback));
    conn.callbacks.start(
        callback,
        Started {
            start_ns: ctx.ts,
            series,
        },
        Outcome::Unmatched,
        sink,
    );
}

/// Returns `false` when the callback was not known.
fn on_done(conn: &mut Conn, ts: u64, callback_id: u32, sink: &mut impl SpanSink) -> bool {
    let callback = conn.objects.current(callback_id);
    conn.callbacks.end(&callback, ts, sink)
}

fn on_feedback(conn: &mut Conn, refs: Arg) {
    let Arg::Two(surface, feedback) = refs else {
        return;
    };
    let surface = conn.objects.touch(surface);
    let feedback = conn.objects.touch(feedback);
    conn.surfaces
        .entry(surface)
        .or_default()
        .feedbacks
        .push(feedback);
}

fn on_presented(
    conn: &mut Conn,
    ctx: &Ctx,
    feedback_id: u32,
    outcome: Option<Outcome>,
    sink: &mut impl SpanSink,
) {
    if !ctx.options.on(SpanKind::Presented) {
        return;
    }
    let feedback = conn.objects.current(feedback_id);
    let ended = match outcome {
        None => conn.presented.end(&feedback, ctx.ts, sink),
        Some(outcome) => conn.presented.end_with(&feedback, outcome, sink),
    };
    if !ended {
        let object = ("wp_presentation_feedback", feedback);
        sink.outcome(
            &ctx.series(conn, SpanKind::Presented, None, object),
            Outcome::OrphanEnd,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::wayland::line::{self, Parsed};

    /// What [`Meaning::of_usual`] makes of `line`, and what [`Meaning::of`] makes of the
    /// message the general reader reads in it.
    fn both_meanings(line: &[u8]) -> (Option<Meaning>, Option<Meaning>) {
        let fast = line::usual_head(line)
            .and_then(|head| Meaning::of_usual(&line[head.body..], head.sent));
        let general = match line::parse_plain(line) {
            Parsed::Message(msg) => Some(Meaning::of(&msg)),
            _ => None,
        };
        (fast, general)
    }

    #[test]
    fn a_known_message_read_from_its_line_means_what_its_parsed_message_means() {
        let lines = line::tests::lines_in_every_dialect();
        let (mut read, mut kinds) = (0, std::collections::HashSet::new());
        for line in &lines {
            if let (Some(fast), general) = both_meanings(line) {
                assert_eq!(Some(fast), general, "{:?}", line.escape_ascii());
                read += 1;
                kinds.insert(format!("{:?}", fast.known));
            }
        }
        // most of the lines of the committed logs, and every kind it reads
        assert!(read * 2 > lines.len(), "{read} of {}", lines.len());
        assert_eq!(kinds.len(), 9, "{kinds:?}");
        // each kind of line, changed at every byte
        let mut seen = std::collections::HashSet::new();
        let mut compared = 0;
        for line in lines.iter().filter(|l| {
            let kind = both_meanings(l)
                .0
                .map(|m| format!("{:?}{:?}", m.known, m.arg));
            kind.is_some() && seen.insert((kind, l.len()))
        }) {
            for v in line::tests::variants(line) {
                if let (Some(fast), general) = both_meanings(&v) {
                    compared += 1;
                    assert_eq!(Some(fast), general, "{:?}", v.escape_ascii());
                }
            }
        }
        assert!(compared > 10_000, "{compared}");
    }

    #[test]
    fn a_known_message_in_another_shape_is_left_to_the_general_reader() {
        for line in [
            // a second argument, an id of ten digits
            "[1.000]  -> wl_display@1.sync(new id wl_callback@3, 4)",
            "[1.000]  -> wl_surface@3.frame(new id wl_callback@1234567890)",
            "[1.000] wl_display@1.delete_id(1234567890)",
            "[1.000] wl_display@1.delete_id(x)",
            // arguments that could hold a `new id`, an attach of no buffer
            "[1.000] wl_callback@3.done(new id a@5)",
            "[1.000]  -> wl_surface@3.commit(new id a@5)",
            "[1.000] wl_buffer@3.release(new id a@5)",
            "[1.000]  -> wl_surface@3.attach(nil, 0, 0)",
            "[1.000]  -> wl_surface@3.attach(wl_buffer@4, new id a@5)",
            "[1.000]  -> wl_surface@3.attach(wl_buffer_n@4, 0, 0)",
            "[1.000]  -> wl_surface@3.attach(wl_buffer@1234567890, 0, 0)",
            // a damage that could create an object, names and interfaces it does not know, ids
            // past seven digits
            "[1.000]  -> wl_surface@3.damage(0, 0, new id a@5)",
            "[1.000]  -> wl_surface@3.damages(0, 0, 10, 10)",
            "[1.000]  -> wl_surface@3.commits()",
            "[1.000]  -> wl_displays@1.sync(new id wl_callback@3)",
            "[1.000] wl_buffer@12345678.release()",
        ] {
            let (fast, general) = both_meanings(line.as_bytes());
            assert_eq!(fast, None, "{line}");
            assert!(general.is_some(), "{line}");
        }
        for line in [
            "[1.000]  -> wl_display@1.sync(new id wl_callback@123456789)",
            "[1.000] {Default Queue}  -> wl_display#1.sync(new id wl_callback#3)",
            "[01:02:03.000004] TID#5 {Default Queue}  -> wl_surface#3.frame(new id wl_callback#3)",
            "[1.000] wl_display#1.delete_id(123456789)",
            "[1.000] wl_callback@3.done(123456789)",
            "[1.000]  -> wl_surface#3.attach(wl_buffer#4, 0, 0)",
            "[1.000]  -> wl_surface@3.attach(wl_buffer@4)",
            "[1.000] wl_buffer@1234567.release()",
            "[1.000]  -> wl_surface@3.damage(0, 0, 10, 10)",
            "[1.000]  -> wl_surface#3.damage_buffer(0, 0, 2147483647, 2147483647)",
        ] {
            let (fast, general) = both_meanings(line.as_bytes());
            assert!(fast.is_some(), "{line}");
            assert_eq!(fast, general, "{line}");
        }
    }

    #[test]
    fn a_message_is_classified_by_lengths_as_by_its_pair_of_names() {
        let interfaces = [
            "wl_surface",
            "wl_display",
            "wl_buffer",
            "wl_callback",
            "wp_presentation",
            "wp_presentation_feedback",
            "wl_surfacf",
            "xl_display",
            "wl_buffers",
            "wl_region",
            "wp_presentation_feedbacj",
            "",
        ];
        let names = [
            "attach",
            "commit",
            "frame",
            "destroy",
            "sync",
            "delete_id",
            "release",
            "done",
            "feedback",
            "presented",
            "discarded",
            "commis",
            "attacg",
            "damage",
            "syn",
            "delete_ie",
            "presentee",
            "",
        ];
        let mut known = 0;
        for i in interfaces {
            for n in names {
                let by_pairs = Known::classify_by_pairs(i.as_bytes(), n.as_bytes());
                assert_eq!(
                    Known::classify(i.as_bytes(), n.as_bytes()),
                    by_pairs,
                    "{i}.{n}"
                );
                known += usize::from(by_pairs != Known::Other);
            }
        }
        assert_eq!(known, 11);
    }

    #[test]
    fn a_message_whose_rule_reads_no_arguments_has_none_read() {
        let kinds = [
            Known::Attach,
            Known::Commit,
            Known::Frame,
            Known::SurfaceDestroy,
            Known::Sync,
            Known::DeleteId,
            Known::Release,
            Known::Done,
            Known::Feedback,
            Known::Presented,
            Known::Discarded,
            Known::Other,
        ];
        let texts = [
            "wl_buffer@7, 0, 0",
            "nil, 0, 0",
            "new id wl_callback@8",
            "12",
            "wl_surface@3, new id wp_presentation_feedback@9",
        ];
        for known in kinds {
            let read = texts
                .iter()
                .filter(|text| Arg::of(known, text.as_bytes()) != Arg::None)
                .count();
            // a kind that reads arguments reads some of these; any other none
            assert_eq!(read > 0, known.reads_args(), "{known:?}");
        }
    }

    /// Every message line of the committed logs, with lines of each shape that does not
    /// pack: a connection id, two objects created, `feedback`'s two arguments.
    fn meanings() -> Vec<Meaning> {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/wayland");
        let mut lines: Vec<Vec<u8>> = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "log") {
                lines.extend(
                    std::fs::read(path)
                        .unwrap()
                        .split(|&b| b == b'\n')
                        .map(<[u8]>::to_vec),
                );
            }
        }
        for extra in [
            "[1234.567] {Default Queue} conn 3 -> wl_surface@3.commit()",
            " [1234.567]  -> wl_compositor@4.create_surface(new id wl_surface@5, new id wl_region@6)",
            "[1234.567]  -> wp_presentation@7.feedback(wl_surface@3, new id wp_presentation_feedback@9)",
            "[1234.567]  -> wl_display@1.sync(new id wl_callback@4294967295)",
            "[1234.567]  -> wl_surface@3.attach(nil, 0, 0)",
        ] {
            lines.push(extra.as_bytes().to_vec());
        }
        let mut scratch = Vec::new();
        lines
            .iter()
            .filter_map(
                |line| match super::super::line::parse_line(line, &mut scratch) {
                    super::super::line::Parsed::Message(msg) => Some(Meaning::of(&msg)),
                    _ => None,
                },
            )
            .collect()
    }

    #[test]
    fn a_packed_meaning_is_the_meaning_it_was_packed_from() {
        let (mut packed, mut wide) = (0, 0);
        for meaning in meanings() {
            match meaning.packed() {
                Some(p) => {
                    assert_eq!(p.meaning(), meaning);
                    packed += 1;
                }
                None => {
                    // only these shapes are left wide
                    let two_args = matches!(meaning.arg, Arg::Two(..));
                    let other_arg = match meaning.arg {
                        Arg::Object(v) | Arg::Number(v) => {
                            meaning.n_created == 1 && meaning.created[0] != v
                        }
                        _ => false,
                    };
                    assert!(
                        meaning.conn.is_some() || meaning.n_created > 1 || two_args || other_arg,
                        "{meaning:?}"
                    );
                    wide += 1;
                }
            }
        }
        assert!(packed > 10_000, "{packed}");
        // the connection id, the two objects created and the feedback, at least
        assert!(wide >= 3, "{wide}");
    }
}
