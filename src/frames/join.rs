//! Which message of the compositor's log each message of the client's log is.
//!
//! A server log interleaves every client's connection, and ids collide across connections, so a
//! message is found by what it says (`wl_surface@3.commit()`) and when: both sides stamp with
//! the same `CLOCK_REALTIME`, a request is dispatched by the compositor after the client sent
//! it, and an event is dispatched by the client after the compositor sent it.
//!
//! Identical messages repeat (every frame commits `wl_surface@3`, and so does another client's
//! first surface; every client's registry gets the same `global` events), so each server message
//! is taken by one client message at most, and each client message takes the untaken one whose
//! neighbours agree with its own (a compositor reads a client's batch of requests and dispatches
//! it whole, and sends a client's events together), the closest in time of those: an event the
//! latest sent before it was dispatched, a request the earliest dispatched after it was sent. Events
//! are taken in the client's order and requests from the end of its log, which keeps a stretch
//! missing from either log from shifting the rest: every server event before a stretch is
//! taken by its own client event before the stretch's events look for one, and every server
//! request after it by its own client request (looking from the end), so the client messages
//! of the stretch find nothing and are named. Neither side's order across queues is assumed: a
//! client dispatches `wl_display` events (on the display queue) ahead of other events sent
//! before them, and toolkits dispatch their own queues in their own order.
//!
//! A message no further than `window` from its counterpart is found; beyond it, not. So the
//! logs need not be held whole: [`follow`] joins a stretch of the client's time at a time.

use std::collections::VecDeque;
use std::ops::Range;

use rustc_hash::FxHashMap;

#[cfg(test)]
use super::log::Log;
use super::log::Msg;

/// How the client's messages were found in the server log (by [`join`], for tests).
#[cfg(test)]
#[derive(Debug, Clone, Default)]
pub struct Join {
    /// per client message, the index of the server message it is
    pub matched: Vec<Option<u32>>,
    /// client requests found, of all
    pub requests: (u64, u64),
    /// client events found, of all
    pub events: (u64, u64),
    /// the stretches of the client log not found, longest first (at most [`MOST_GAPS`])
    pub gaps: Vec<Gap>,
    /// client messages not found, in all
    pub unmatched: u64,
    /// the first of them (an index of the client's messages)
    pub first_unmatched: Option<usize>,
}

/// Gaps named, at most.
pub const MOST_GAPS: usize = 5;

/// A stretch of the client log, every message of which was not found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gap {
    /// the first and last client message of it (indices)
    pub first: usize,
    /// (inclusive)
    pub last: usize,
    /// their lines
    pub lines: (u64, u64),
}

#[cfg(test)]
impl Join {
    /// Client messages found, of all.
    pub fn found(&self) -> (u64, u64) {
        (
            self.requests.0 + self.events.0,
            self.requests.1 + self.events.1,
        )
    }
}

/// Finds the messages of `client` in `server` (both on one time scale), each no further than
/// `window_us` from its counterpart: [`follow`] over two whole logs, every match kept.
#[cfg(test)]
pub fn join(client: &Log, server: &Log, window_us: i64) -> Join {
    let mut matched = Vec::with_capacity(client.messages.len());
    let tally = follow(
        client.messages.iter().cloned(),
        server.messages.iter().cloned(),
        window_us,
        &|| false,
        |_, found| matched.push(found.map(|f| f.index as u32)),
    );
    Join {
        matched,
        requests: tally.requests,
        events: tally.events,
        gaps: tally.gaps,
        unmatched: tally.unmatched,
        first_unmatched: tally.first_unmatched.map(|f| f.index),
    }
}

/// A client message's counterpart in the server log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found {
    /// its index among the server's messages
    pub index: u64,
    /// its stamp
    pub at_us: i64,
}

/// What [`follow`] found, in all.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    /// client requests found, of all
    pub requests: (u64, u64),
    /// client events found, of all
    pub events: (u64, u64),
    /// the stretches of the client log not found, longest first (at most [`MOST_GAPS`])
    pub gaps: Vec<Gap>,
    /// client messages not found, in all
    pub unmatched: u64,
    /// the first of them
    pub first_unmatched: Option<Unfound>,
    /// the stretch not found that the client log is in (its first message and line)
    open_gap: Option<(usize, u64)>,
    /// the line of the last client message counted
    last_line: u64,
    /// client messages left out: stamped after the last of the server's, read when a stop
    /// ended the reads
    pub cut: u64,
}

/// A client message not found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unfound {
    /// its index among the client's messages
    pub index: usize,
    /// its line
    pub line: u64,
    /// what it says
    pub text: String,
}

impl Tally {
    fn count(&mut self, index: usize, m: &Msg, found: bool) {
        let of = if m.sent {
            &mut self.requests
        } else {
            &mut self.events
        };
        of.1 += 1;
        if found {
            of.0 += 1;
            if let Some((first, line)) = self.open_gap.take() {
                self.gap(first, index - 1, line, self.last_line);
            }
        } else {
            self.unmatched += 1;
            self.first_unmatched.get_or_insert_with(|| Unfound {
                index,
                line: m.line,
                text: m.text.to_string(),
            });
            self.open_gap.get_or_insert((index, m.line));
        }
        self.last_line = m.line;
    }

    /// Keeps the stretch from `first` to `last` if it is among the longest.
    fn gap(&mut self, first: usize, last: usize, first_line: u64, last_line: u64) {
        self.gaps.push(Gap {
            first,
            last,
            lines: (first_line, last_line),
        });
        self.gaps
            .sort_by_key(|g| (std::cmp::Reverse(g.last - g.first), g.first));
        self.gaps.truncate(MOST_GAPS);
    }

    fn finish(&mut self, messages: usize) {
        if let Some((first, line)) = self.open_gap.take() {
            self.gap(first, messages - 1, line, self.last_line);
        }
    }
}

/// Client messages joined at a time, at most, and the stretch of client time they cover, in
/// windows: each stretch's server messages are indexed anew, so a stretch several windows long
/// keeps that work a small part of the whole.
const SEGMENT_MESSAGES: usize = 1 << 16;
const SEGMENT_WINDOWS: i64 = 4;

/// Windows of client time after a stretch whose requests are joined before the stretch's, as
/// the whole log's requests are joined from its end ([`join_stretch`]).
const AHEAD_WINDOWS: i64 = 2;

/// Messages kept on each side of what is being joined, beyond the window: the neighbours a
/// candidate's agreement is counted over ([`CONTEXT`]), with room to spare.
const KEEP: usize = 64;

/// Finds each message of the client's log in the server's (both on one time scale, each
/// message no further than `window_us` from its counterpart), and hands each client message
/// in order, with its counterpart, to `each`.
///
/// The logs are read as they are joined, a stretch of the client's time at a time (a few
/// windows long): what is held is that stretch, the server's messages a window either side of
/// it, and a few neighbours more, never a whole log. Within a stretch events are taken in the
/// client's order and requests from its end (see the module's documentation). Across
/// stretches both go forward: a request near a stretch's end could take a server request
/// that belongs to one after the stretch only where the server log lacks its own, inside a
/// window of the stretch's end.
///
/// Where `stopped` says a stop (Ctrl-C) ended the reads, the logs were read to different times:
/// the client's messages stamped after the last of the server's are left out ([`Tally::cut`]),
/// not counted as missing from it.
pub fn follow(
    client: impl Iterator<Item = Msg>,
    server: impl Iterator<Item = Msg>,
    window_us: i64,
    stopped: &dyn Fn() -> bool,
    each: impl FnMut(&Msg, Option<Found>),
) -> Tally {
    let stretch = Stretch {
        messages: SEGMENT_MESSAGES,
        windows: SEGMENT_WINDOWS,
        ahead: AHEAD_WINDOWS,
    };
    follow_in(client, server, window_us, stretch, stopped, each)
}

/// How long a stretch joined at a time is, at most (messages, and windows of client time), and
/// how many windows of requests after it are joined first ([`join_stretch`]).
#[derive(Debug, Clone, Copy)]
struct Stretch {
    messages: usize,
    windows: i64,
    ahead: i64,
}

/// [`follow`], a `stretch` at a time.
fn follow_in(
    client: impl Iterator<Item = Msg>,
    server: impl Iterator<Item = Msg>,
    window_us: i64,
    stretch: Stretch,
    stopped: &dyn Fn() -> bool,
    mut each: impl FnMut(&Msg, Option<Found>),
) -> Tally {
    let window_us = window_us.max(0);
    let mut c = Buffer::new(client);
    let mut s = Buffer::new(server);
    let mut taken: VecDeque<bool> = VecDeque::new();
    let mut tally = Tally::default();
    let mut next = 0;
    while let Some(first) = c.get(next) {
        let end_us = first
            .at_us
            .saturating_add(window_us.saturating_mul(stretch.windows).max(1));
        let hi = c.stretch(next, end_us, stretch.messages);
        let last_us = (next..hi)
            .map(|g| c.msgs[g - c.base].at_us)
            .max()
            .unwrap_or(0);
        let ahead = c.until(
            hi,
            last_us.saturating_add(window_us.saturating_mul(stretch.ahead)),
        );
        c.fill_to(ahead + KEEP);
        // what the stretch's events can be sent at, at the earliest: the server messages before
        // it are forgotten as they are read (a client idle for an hour while the compositor
        // serves others holds none of that hour)
        let from_us = (next..hi)
            .map(|g| c.msgs[g - c.base].at_us)
            .min()
            .unwrap_or(0)
            .saturating_sub(window_us);
        s.skip_to(from_us, &mut taken);
        let ahead_us = (next..ahead)
            .map(|g| c.msgs[g - c.base].at_us)
            .max()
            .unwrap_or(0);
        s.fill_past(ahead_us.saturating_add(window_us));
        taken.resize(s.msgs.len(), false);
        let found = join_stretch(
            c.msgs.make_contiguous(),
            s.msgs.make_contiguous(),
            taken.make_contiguous(),
            next - c.base..hi - c.base,
            ahead - c.base,
            window_us,
        );
        let cut_after = (s.ended && stopped()).then_some(s.last_us);
        for (k, g) in (next..hi).enumerate() {
            let m = &c.msgs[g - c.base];
            if cut_after.is_some_and(|end| m.at_us > end) {
                tally.cut += 1;
                continue;
            }
            let found = found[k].map(|p| Found {
                index: (s.base + p) as u64,
                at_us: s.msgs[p].at_us,
            });
            tally.count(g, m, found.is_some());
            each(m, found);
        }
        next = hi;
        c.drop_before(next.saturating_sub(KEEP));
        if let Some(m) = c.get(next) {
            let from_us = m.at_us.saturating_sub(window_us);
            let keep_from = s.msgs.partition_point(|m| m.at_us < from_us);
            let drop = keep_from.saturating_sub(KEEP);
            s.drop_before(s.base + drop);
            taken.drain(..drop);
        }
    }
    tally.finish(next);
    tally
}

/// One log's messages from a point on, read as they are needed.
struct Buffer<I> {
    msgs: VecDeque<Msg>,
    /// the index of `msgs[0]` among the log's messages
    base: usize,
    source: I,
    ended: bool,
    /// the last message's stamp (`i64::MIN` before the first)
    last_us: i64,
}

impl<I: Iterator<Item = Msg>> Buffer<I> {
    fn new(source: I) -> Buffer<I> {
        Buffer {
            msgs: VecDeque::new(),
            base: 0,
            source,
            ended: false,
            last_us: i64::MIN,
        }
    }

    /// Reads one more message; false at the log's end.
    fn pull(&mut self) -> bool {
        if self.ended {
            return false;
        }
        match self.source.next() {
            Some(m) => {
                self.last_us = m.at_us;
                self.msgs.push_back(m);
                true
            }
            None => {
                self.ended = true;
                false
            }
        }
    }

    /// Message `g` of the log, read if need be (`None`: the log is shorter).
    fn get(&mut self, g: usize) -> Option<&Msg> {
        while self.base + self.msgs.len() <= g {
            if !self.pull() {
                return None;
            }
        }
        self.msgs.get(g.checked_sub(self.base)?)
    }

    /// Reads up to message `g` (or the log's end).
    fn fill_to(&mut self, g: usize) {
        while self.base + self.msgs.len() < g && self.pull() {}
    }

    /// The end of the stretch from message `from`: the first message stamped at `end_us` or
    /// later, at most `most` on (at least one), or the log's end.
    fn stretch(&mut self, from: usize, end_us: i64, most: usize) -> usize {
        let mut hi = from;
        while (hi == from || hi - from < most) && self.get(hi).is_some_and(|m| m.at_us < end_us) {
            hi += 1;
        }
        hi
    }

    /// The first message from `from` on stamped at `end_us` or later, or the log's end.
    fn until(&mut self, from: usize, end_us: i64) -> usize {
        let mut g = from;
        while self.get(g).is_some_and(|m| m.at_us < end_us) {
            g += 1;
        }
        g
    }

    /// Reads past the first message stamped after `us`, and [`KEEP`] more.
    fn fill_past(&mut self, us: i64) {
        while self.msgs.back().is_none_or(|m| m.at_us <= us) && self.pull() {}
        for _ in 0..KEEP {
            if !self.pull() {
                break;
            }
        }
    }

    /// Reads on to the first message stamped at `us` or later, forgetting all but [`KEEP`] of
    /// those before it as it goes (and their `taken` flags, which follow `msgs` from the front).
    fn skip_to(&mut self, us: i64, taken: &mut VecDeque<bool>) {
        loop {
            let before = self.msgs.partition_point(|m| m.at_us < us);
            let drop = before.saturating_sub(KEEP);
            self.drop_before(self.base + drop);
            taken.drain(..drop.min(taken.len()));
            if before < self.msgs.len() || !self.pull() {
                return;
            }
        }
    }

    /// Forgets the messages before message `g`.
    fn drop_before(&mut self, g: usize) {
        let n = g.saturating_sub(self.base).min(self.msgs.len());
        self.msgs.drain(..n);
        self.base += n;
    }
}

/// Joins the client's messages `range` (of `client`, the stretch with neighbours either side)
/// to the untaken messages of `server`: per message of `range`, the index in `server` of its
/// counterpart.
///
/// Events are taken in the client's order. Requests are taken from the end, as over a whole
/// log: first those after the stretch up to `ahead` (which take what is theirs, so that a
/// request of the stretch cannot), then the stretch's; what the requests after the stretch
/// took is given back, for their own stretch to take. The stretch's choices are the whole
/// log's where what a request takes depends on the requests at most `ahead` after it.
fn join_stretch(
    client: &[Msg],
    server: &[Msg],
    taken: &mut [bool],
    range: Range<usize>,
    ahead: usize,
    window_us: i64,
) -> Vec<Option<usize>> {
    let mut found = vec![None; range.len()];
    let events = Direction::of(client, server, false);
    let (lo, hi) = events.ranks(range.start, range.end);
    for r in lo..hi {
        if let Some(p) = events.find(r, taken, window_us) {
            taken[p] = true;
            found[events.client[r] - range.start] = Some(p);
        }
    }
    let requests = Direction::of(client, server, true);
    let (lo, hi) = requests.ranks(range.start, ahead);
    let mut lent = Vec::new();
    for r in (lo..hi).rev() {
        if let Some(p) = requests.find(r, taken, window_us) {
            taken[p] = true;
            match requests.client[r].checked_sub(range.start) {
                Some(k) if k < found.len() => found[k] = Some(p),
                _ => lent.push(p),
            }
        }
    }
    for p in lent {
        taken[p] = false;
    }
    found
}

/// Candidates looked at for one message, at most: the closest in time first.
const MOST_CANDIDATES: usize = 64;

/// Messages on each side a candidate's neighbours are compared over, before it and after it.
const CONTEXT: usize = 3;

/// One direction of the connection (the client's requests, or the server's events): its
/// messages on each side, in order.
struct Direction<'l> {
    client_log: &'l [Msg],
    server_log: &'l [Msg],
    /// requests (the client sends them) or events
    requests: bool,
    /// the client's messages of this direction (indices into its log), in order
    client: Vec<usize>,
    /// the server's (indices into its log), in order
    server: Vec<usize>,
    /// ranks in `server`, by key
    by_key: FxHashMap<u64, Vec<u32>>,
}

impl<'l> Direction<'l> {
    /// The ranks in this direction of the client's messages from `from` to `to`.
    fn ranks(&self, from: usize, to: usize) -> (usize, usize) {
        (
            self.client.partition_point(|&i| i < from),
            self.client.partition_point(|&i| i < to),
        )
    }

    fn of(client_log: &'l [Msg], server_log: &'l [Msg], requests: bool) -> Direction<'l> {
        let client = (0..client_log.len())
            .filter(|&i| client_log[i].sent == requests)
            .collect();
        let server: Vec<usize> = (0..server_log.len())
            .filter(|&p| server_log[p].sent != requests)
            .collect();
        let mut by_key: FxHashMap<u64, Vec<u32>> = FxHashMap::default();
        for (q, &p) in server.iter().enumerate() {
            by_key.entry(server_log[p].key).or_default().push(q as u32);
        }
        Direction {
            client_log,
            server_log,
            requests,
            client,
            server,
            by_key,
        }
    }

    /// The server message (an index into its log) that the client's `r`-th message of this
    /// direction is: among the untaken ones that say the same on the right side of it in time
    /// (no further than `window_us`), the one whose neighbours in the server's stream say what
    /// its neighbours in the client's say (a connection's messages of one batch are read and
    /// dispatched together, not interleaved with another client's), the closest in time of
    /// those that agree as far.
    fn find(&self, r: usize, taken: &[bool], window_us: i64) -> Option<usize> {
        let m = &self.client_log[self.client[r]];
        let list = self.by_key.get(&m.key)?;
        let at = |q: u32| self.server_log[self.server[q as usize]].at_us;
        let usable = |q: &u32| {
            let p = self.server[*q as usize];
            !taken[p] && self.server_log[p].text == m.text
        };
        // the closest in time first; of those that agree as far, the first
        let mut best: Option<(usize, u32)> = None;
        let mut consider = |q: u32| {
            let score = self.agreement(r, q as usize);
            if best.is_none_or(|(s, _)| score > s) {
                best = Some((score, q));
            }
        };
        if self.requests {
            let start = list.partition_point(|&q| at(q) < m.at_us);
            let after = list[start..]
                .iter()
                .take_while(|&&q| at(q) - m.at_us <= window_us);
            after
                .filter(|q| usable(q))
                .take(MOST_CANDIDATES)
                .for_each(|&q| consider(q));
        } else {
            let end = list.partition_point(|&q| at(q) <= m.at_us);
            let before = list[..end]
                .iter()
                .rev()
                .take_while(|&&q| m.at_us - at(q) <= window_us);
            before
                .filter(|q| usable(q))
                .take(MOST_CANDIDATES)
                .for_each(|&q| consider(q));
        }
        best.map(|(_, q)| self.server[q as usize])
    }

    /// How many of the client's `r`-th message's neighbours (up to [`CONTEXT`] before it, and
    /// as many after) say what the server's `q`-th message's neighbours say, in a row from it.
    fn agreement(&self, r: usize, q: usize) -> usize {
        let same = |a: usize, b: usize| {
            let (c, s) = (
                &self.client_log[self.client[a]],
                &self.server_log[self.server[b]],
            );
            c.key == s.key && c.text == s.text
        };
        let before = (1..=CONTEXT)
            .take_while(|&d| d <= r && d <= q && same(r - d, q - d))
            .count();
        let after = (1..=CONTEXT)
            .take_while(|&d| {
                r + d < self.client.len() && q + d < self.server.len() && same(r + d, q + d)
            })
            .count();
        before + after
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frames::log::read;
    use crate::ingest::source::Stream;

    fn log(text: &str) -> Log {
        read(Stream::of(text.as_bytes()), "t", None).unwrap()
    }

    /// What each client line was joined to: the server line, or 0.
    fn joined(client: &str, server: &str) -> Vec<u64> {
        let (c, s) = (log(client), log(server));
        let join = join(&c, &s, 1_000_000);
        join.matched
            .iter()
            .map(|m| m.map_or(0, |p| s.messages[p as usize].line))
            .collect()
    }

    #[test]
    fn a_request_is_the_server_line_that_dispatched_it_after_it_was_sent() {
        let client = "[10.000]  -> wl_surface@3.commit()\n[20.000]  -> wl_surface@3.commit()\n";
        // another client's identical commit at 9 ms, before ours was sent
        let server = "[9.000] wl_surface@3.commit()\n[10.500] wl_surface@3.commit()\n[20.400] wl_surface@3.commit()\n";
        assert_eq!(joined(client, server), [2, 3]);
    }

    #[test]
    fn an_event_is_the_server_line_that_sent_it_last_before_it_was_dispatched() {
        let client = "[11.000] wl_callback@7.done(5)\n[21.000] wl_display@1.delete_id(7)\n";
        // line 1: another connection's delete_id(7), sent before ours (line 3)
        let server = "[10.500]  -> wl_display@1.delete_id(7)\n[10.900]  -> wl_callback@7.done(5)\n[20.950]  -> wl_display@1.delete_id(7)\n";
        assert_eq!(joined(client, server), [2, 3]);
    }

    #[test]
    fn of_two_clients_committing_the_same_surface_id_at_once_each_commit_is_found_by_its_batch() {
        // as captured: weston-simple-shm's batch (ours) dispatched right after
        // weston-presentation-shm's, whose commit is the closer in time
        let client = "\
[200.251]  -> wl_surface@3.attach(wl_buffer@12, 0, 0)
[200.255]  -> wl_surface@3.damage(20, 20, 210, 210)
[200.258]  -> wl_surface@3.frame(new id wl_callback@11)
[200.261]  -> wl_surface@3.commit()
";
        let server = "\
[200.276] wl_surface@3.frame(new id wl_callback@72)
[200.286] wl_surface@3.attach(wl_buffer@24, 0, 0)
[200.290] wl_surface@3.damage(0, 0, 250, 250)
[200.292] wl_surface@3.commit()
[200.295]  -> wl_buffer@23.release()
[200.308] wl_surface@3.attach(wl_buffer@12, 0, 0)
[200.311] wl_surface@3.damage(20, 20, 210, 210)
[200.313] wl_surface@3.frame(new id wl_callback@11)
[200.315] wl_surface@3.commit()
";
        assert_eq!(joined(client, server), [6, 7, 8, 9]);
    }

    #[test]
    fn display_queue_events_dispatched_ahead_of_earlier_events_are_found() {
        // the server sent done, then delete_id; the client dispatched delete_id first
        let client = "[11.000] wl_display@1.delete_id(7)\n[11.010] wl_callback@7.done(5)\n";
        let server = "[10.900]  -> wl_callback@7.done(5)\n[10.950]  -> wl_display@1.delete_id(7)\n";
        assert_eq!(joined(client, server), [2, 1]);
    }

    #[test]
    fn a_stretch_missing_from_the_server_log_leaves_the_messages_around_it_joined() {
        let client: String = (0..10)
            .map(|k| format!("[{}.000]  -> wl_surface@3.commit()\n", 100 + 10 * k))
            .collect();
        // the server log lacks frames 4 to 6
        let server: String = (0..10)
            .filter(|k| !(4..=6).contains(k))
            .map(|k| format!("[{}.300] wl_surface@3.commit()\n", 100 + 10 * k))
            .collect();
        assert_eq!(joined(&client, &server), [1, 2, 3, 4, 0, 0, 0, 5, 6, 7]);
        let (c, s) = (log(&client), log(&server));
        let j = join(&c, &s, 1_000_000);
        assert_eq!(
            j.gaps,
            [Gap {
                first: 4,
                last: 6,
                lines: (5, 7)
            }]
        );
        assert_eq!(
            (j.requests, j.unmatched, j.first_unmatched),
            ((7, 10), 3, Some(4))
        );
    }

    #[test]
    fn events_of_a_stretch_missing_from_the_server_log_are_not_taken_from_after_it() {
        let client: String = (0..6)
            .map(|k| format!("[{}.000] wl_buffer@5.release()\n", 100 + 10 * k))
            .collect();
        let server: String = (0..6)
            .filter(|k| !(2..=3).contains(k))
            .map(|k| format!("[{}.000]  -> wl_buffer@5.release()\n", 99 + 10 * k))
            .collect();
        assert_eq!(joined(&client, &server), [1, 2, 0, 0, 3, 4]);
    }

    /// What each client message of the committed run `client`/`server` (tests/data/frames)
    /// was joined to, and the tally, joined `stretch` at a time.
    fn committed(client: &str, server: &str, stretch: Stretch) -> (Vec<Option<Found>>, Tally) {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/frames");
        let text = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
        let (mut c, s) = (log(&text(client)), log(&text(server)));
        // the whole wrap periods between the logs' first stamps (none in these)
        let shift = s.messages[0].at_us - c.messages[0].at_us;
        let within = (shift + (1 << 31)).rem_euclid(1 << 32) - (1 << 31);
        c.shift(shift - within);
        let mut found = Vec::new();
        let tally = follow_in(
            c.messages.into_iter(),
            s.messages.into_iter(),
            1_000_000,
            stretch,
            &|| false,
            |_, f| found.push(f),
        );
        (found, tally)
    }

    #[test]
    fn stretches_of_one_message_join_real_logs_as_the_whole_logs_at_once() {
        let whole = Stretch {
            messages: usize::MAX,
            windows: i64::MAX,
            ahead: 0,
        };
        for (client, server) in [
            ("weston-presentation-shm.client.log", "weston.server.log"),
            ("weston-simple-shm.client.log", "weston.server.log"),
            ("mir-presentation-shm.client.log", "mir.server.log"),
            ("mutter-lab.client.log", "mutter.server.log"),
            ("sway-presentation-shm.client.log", "sway.server.log"),
            ("weston-timeline.client.log", "weston-timeline.server.log"),
        ] {
            let (all, tally) = committed(client, server, whole);
            assert!(tally.requests.0 > 300, "{client}: {:?}", tally.requests);
            for stretch in [
                Stretch {
                    messages: 1,
                    windows: 0,
                    ahead: AHEAD_WINDOWS,
                },
                Stretch {
                    messages: 7,
                    windows: 1,
                    ahead: AHEAD_WINDOWS,
                },
            ] {
                let (some, t) = committed(client, server, stretch);
                assert_eq!(some, all, "{client}, {stretch:?}");
                assert_eq!((t.requests, t.events), (tally.requests, tally.events));
                assert_eq!(t.gaps, tally.gaps);
            }
        }
    }

    #[test]
    fn a_message_further_than_the_window_is_not_found() {
        let client = "[10.000]  -> wl_surface@3.commit()\n";
        let server = "[1011.000] wl_surface@3.commit()\n";
        assert_eq!(joined(client, server), [0]);
    }
}
