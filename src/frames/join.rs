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
//! A message no further than `window` from its counterpart is found; beyond it, not.

use rustc_hash::FxHashMap;

use super::log::Log;

/// How the client's messages were found in the server log.
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
}

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
/// `window_us` from its counterpart.
pub fn join(client: &Log, server: &Log, window_us: i64) -> Join {
    let mut taken = vec![false; server.messages.len()];
    let mut matched = vec![None; client.messages.len()];
    let mut join = Join::default();
    // events: in the client's order, each the untaken server event best placed before it
    let events = Direction::of(client, server, false);
    for r in 0..events.client.len() {
        join.events.1 += 1;
        if let Some(p) = events.find(r, &taken, window_us) {
            taken[p] = true;
            matched[events.client[r]] = Some(p as u32);
            join.events.0 += 1;
        }
    }
    // requests: from the end, each the untaken server request best placed after it
    let requests = Direction::of(client, server, true);
    for r in (0..requests.client.len()).rev() {
        join.requests.1 += 1;
        if let Some(p) = requests.find(r, &taken, window_us) {
            taken[p] = true;
            matched[requests.client[r]] = Some(p as u32);
            join.requests.0 += 1;
        }
    }
    join.unmatched = matched.iter().filter(|m| m.is_none()).count() as u64;
    join.first_unmatched = matched.iter().position(Option::is_none);
    join.gaps = gaps(&matched);
    join.matched = matched;
    join
}

/// Candidates looked at for one message, at most: the closest in time first.
const MOST_CANDIDATES: usize = 64;

/// Messages on each side a candidate's neighbours are compared over, before it and after it.
const CONTEXT: usize = 3;

/// One direction of the connection (the client's requests, or the server's events): its
/// messages on each side, in order.
struct Direction<'l> {
    client_log: &'l Log,
    server_log: &'l Log,
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
    fn of(client_log: &'l Log, server_log: &'l Log, requests: bool) -> Direction<'l> {
        let client = (0..client_log.messages.len())
            .filter(|&i| client_log.messages[i].sent == requests)
            .collect();
        let server: Vec<usize> = (0..server_log.messages.len())
            .filter(|&p| server_log.messages[p].sent != requests)
            .collect();
        let mut by_key: FxHashMap<u64, Vec<u32>> = FxHashMap::default();
        for (q, &p) in server.iter().enumerate() {
            by_key
                .entry(server_log.messages[p].key)
                .or_default()
                .push(q as u32);
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
        let m = &self.client_log.messages[self.client[r]];
        let list = self.by_key.get(&m.key)?;
        let at = |q: u32| self.server_log.messages[self.server[q as usize]].at_us;
        let usable = |q: &u32| {
            let p = self.server[*q as usize];
            !taken[p] && self.server_log.messages[p].text == m.text
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
                &self.client_log.messages[self.client[a]],
                &self.server_log.messages[self.server[b]],
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

/// The longest stretches of consecutive client messages not found.
fn gaps(matched: &[Option<u32>]) -> Vec<Gap> {
    let mut gaps = Vec::new();
    let mut start = None;
    for (i, m) in matched.iter().enumerate() {
        match (m, start) {
            (None, None) => start = Some(i),
            (Some(_), Some(first)) => {
                gaps.push(Gap { first, last: i - 1 });
                start = None;
            }
            _ => {}
        }
    }
    if let Some(first) = start {
        gaps.push(Gap {
            first,
            last: matched.len() - 1,
        });
    }
    gaps.sort_by_key(|g| (std::cmp::Reverse(g.last - g.first), g.first));
    gaps.truncate(MOST_GAPS);
    gaps
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
        assert_eq!(j.gaps, [Gap { first: 4, last: 6 }]);
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

    #[test]
    fn a_message_further_than_the_window_is_not_found() {
        let client = "[10.000]  -> wl_surface@3.commit()\n";
        let server = "[1011.000] wl_surface@3.commit()\n";
        assert_eq!(joined(client, server), [0]);
    }
}
