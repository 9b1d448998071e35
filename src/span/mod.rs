//! Spans: a start event and an end event paired by a key, turned into latency samples.
//!
//! This is the part every input shares. An input (a WAYLAND_DEBUG log, a probe stream) decides
//! *which* events start and end a span and with which key; [`OpenSpans`] does the pairing and
//! the bookkeeping of what did not pair (unmatched starts, superseded starts, ends with no
//! start, ends that come before their start); a [`SpanSink`] receives the results. The
//! [`Aggregator`] sink folds them into one [`Distribution`](crate::stats::Distribution) per
//! series; the CSV writer streams them out raw. Sinks compose with tuples.

mod aggregate;
mod open;
mod slowest;
mod table;

pub use aggregate::{Aggregator, Counters, Series};
pub use open::{Open, OpenSpans, Start};
pub use slowest::{Kept, Slow, Slowest};
pub use table::SeriesTable;

use std::fmt;

/// Which end of a connection printed an event: the client, or the server (compositor).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Side {
    /// the client's view (its requests as sent, its events as dispatched)
    Client,
    /// the server's view (requests as received, events as queued)
    Server,
}

impl Side {
    /// Lower-case name, as printed in every output.
    pub const fn name(self) -> &'static str {
        match self {
            Side::Client => "client",
            Side::Server => "server",
        }
    }
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An object of a protocol connection: interface, id and generation (ids are reused after
/// they are freed, so the id alone does not name one object).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectLabel {
    /// Connection id, when the log carries one (wayland-debug's patched libwayland).
    pub conn: Option<u32>,
    /// Interface name, e.g. `wl_surface`.
    pub interface: &'static str,
    /// Protocol object id.
    pub id: u32,
    /// 0 for the first object with this id, 1 for the next, ...
    pub generation: u32,
}

impl fmt::Display for ObjectLabel {
    /// `wl_surface#12a`: the generation as a letter suffix, as wayland-debug shows it
    /// (`a` first, then `b`, ..., `z`, `aa`, ...).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(conn) = self.conn {
            write!(f, "<{conn}> ")?;
        }
        write!(
            f,
            "{}#{}{}",
            self.interface,
            self.id,
            generation_letters(self.generation)
        )
    }
}

fn generation_letters(mut generation: u32) -> String {
    let mut letters = Vec::new();
    loop {
        letters.push(b'a' + (generation % 26) as u8);
        if generation < 26 {
            break;
        }
        generation = generation / 26 - 1;
    }
    letters.reverse();
    String::from_utf8(letters).unwrap_or_default()
}

/// What a series is split by (`--group`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Group {
    /// one series for everything
    All,
    /// one series per protocol object
    Object(ObjectLabel),
    /// one series per input file (its index in the input list)
    File(u32),
    /// one series per value of a field (an index into the labels the input keeps)
    Label(u32),
}

/// Identifies one series: a span (index into the span names the [`Aggregator`] was given), the
/// side that saw it, and a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SeriesKey {
    /// Index of the span's name.
    pub span: usize,
    /// Client or server view, when the input has sides.
    pub side: Option<Side>,
    /// The group within the span.
    pub group: Group,
}

/// The things that can happen to a span besides producing a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A start that never saw its end (counted when the input ends or the key is reused).
    Unmatched,
    /// A start replaced by a newer start with the same key before any end (for
    /// commit→release: the buffer was committed again before it was released).
    Superseded,
    /// An end whose start was never seen.
    OrphanEnd,
    /// An end that reports the span did not complete (a discarded presentation feedback).
    Discarded,
    /// An end stamped before its start (the clock went backwards); no sample is recorded.
    Backwards,
}

/// Receives samples and outcomes. Implemented by the aggregator, the CSV writer, and tuples of
/// sinks.
pub trait SpanSink {
    /// A completed span: it started at `start_ns` and took `latency_ns`.
    fn sample(&mut self, key: &SeriesKey, start_ns: u64, latency_ns: u64);
    /// Something other than a sample happened to a span of series `key`.
    fn outcome(&mut self, key: &SeriesKey, outcome: Outcome);
}

impl<A: SpanSink, B: SpanSink> SpanSink for (A, B) {
    fn sample(&mut self, key: &SeriesKey, start_ns: u64, latency_ns: u64) {
        self.0.sample(key, start_ns, latency_ns);
        self.1.sample(key, start_ns, latency_ns);
    }

    fn outcome(&mut self, key: &SeriesKey, outcome: Outcome) {
        self.0.outcome(key, outcome);
        self.1.outcome(key, outcome);
    }
}

impl<S: SpanSink + ?Sized> SpanSink for &mut S {
    fn sample(&mut self, key: &SeriesKey, start_ns: u64, latency_ns: u64) {
        (**self).sample(key, start_ns, latency_ns);
    }

    fn outcome(&mut self, key: &SeriesKey, outcome: Outcome) {
        (**self).outcome(key, outcome);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generations_are_lettered_like_wayland_debug() {
        let label = |generation| {
            ObjectLabel {
                conn: None,
                interface: "wl_buffer",
                id: 12,
                generation,
            }
            .to_string()
        };
        assert_eq!(label(0), "wl_buffer#12a");
        assert_eq!(label(1), "wl_buffer#12b");
        assert_eq!(label(25), "wl_buffer#12z");
        assert_eq!(label(26), "wl_buffer#12aa");
        assert_eq!(label(27), "wl_buffer#12ab");
    }
}
