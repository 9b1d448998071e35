//! Which message of the compositor's log each message of the client's log is.
//!
//! A server log interleaves every client's connection, and ids collide across connections, so a
//! message is found by what it says (`wl_surface@3.commit()`) and when: both sides stamp with
//! the same `CLOCK_REALTIME`, a request is dispatched by the compositor after the client sent
//! it, and an event is dispatched by the client after the compositor sent it.
//!
//! Identical messages repeat (every frame commits `wl_surface@3`; every client's registry gets
//! the same `global` events), so each server message is taken by one client message at most,
//! and each client message takes the untaken one closest to it in time: an event the latest
//! sent before it was dispatched, a request the earliest dispatched after it was sent. Events
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

use super::log::{Log, Msg};

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
    let received = positions(server, false);
    let sent = positions(server, true);
    let mut taken = vec![false; server.messages.len()];
    let mut matched = vec![None; client.messages.len()];
    let mut join = Join::default();
    for (i, m) in client.messages.iter().enumerate().filter(|(_, m)| !m.sent) {
        join.events.1 += 1;
        let found = sent
            .get(&m.key)
            .and_then(|list| latest_before(list, &taken, server, m, window_us));
        if let Some(p) = found {
            taken[p] = true;
            matched[i] = Some(p as u32);
            join.events.0 += 1;
        }
    }
    for (i, m) in client
        .messages
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, m)| m.sent)
    {
        join.requests.1 += 1;
        let found = received
            .get(&m.key)
            .and_then(|list| earliest_after(list, &taken, server, m, window_us));
        if let Some(p) = found {
            taken[p] = true;
            matched[i] = Some(p as u32);
            join.requests.0 += 1;
        }
    }
    join.unmatched = matched.iter().filter(|m| m.is_none()).count() as u64;
    join.first_unmatched = matched.iter().position(Option::is_none);
    join.gaps = gaps(&matched);
    join.matched = matched;
    join
}

/// The server's messages sent (`true`: its events) or received (its requests), by key, in
/// order.
fn positions(server: &Log, sent: bool) -> FxHashMap<u64, Vec<u32>> {
    let mut by_key: FxHashMap<u64, Vec<u32>> = FxHashMap::default();
    for (p, m) in server
        .messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m.sent == sent)
    {
        by_key.entry(m.key).or_default().push(p as u32);
    }
    by_key
}

/// The latest untaken server event of `list` sent no later than `m` was dispatched, and no
/// more than `window_us` before.
fn latest_before(
    list: &[u32],
    taken: &[bool],
    server: &Log,
    m: &Msg,
    window_us: i64,
) -> Option<usize> {
    let at = |p: &u32| server.messages[*p as usize].at_us;
    let end = list.partition_point(|p| at(p) <= m.at_us);
    list[..end]
        .iter()
        .rev()
        .take_while(|p| m.at_us - at(p) <= window_us)
        .map(|&p| p as usize)
        .find(|&p| !taken[p] && server.messages[p].text == m.text)
}

/// The earliest untaken server request of `list` dispatched no earlier than `m` was sent, and
/// no more than `window_us` after.
fn earliest_after(
    list: &[u32],
    taken: &[bool],
    server: &Log,
    m: &Msg,
    window_us: i64,
) -> Option<usize> {
    let at = |p: &u32| server.messages[*p as usize].at_us;
    let start = list.partition_point(|p| at(p) < m.at_us);
    list[start..]
        .iter()
        .take_while(|p| at(p) - m.at_us <= window_us)
        .map(|&p| p as usize)
        .find(|&p| !taken[p] && server.messages[p].text == m.text)
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
        // line 2: another connection's delete_id(7), sent before ours (line 3)
        let server = "[10.900]  -> wl_callback@7.done(5)\n[10.950]  -> wl_display@1.delete_id(7)\n[20.950]  -> wl_display@1.delete_id(7)\n";
        assert_eq!(joined(client, server), [1, 3]);
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
