//! Both logs read at once, and joined as they are read.
//!
//! A client's log and its compositor's cover the same stretch of time, and the join looks only
//! a window either side of each message ([`super::join::follow`]). So each log is read on a
//! thread of its own, handing its messages on a few thousand at a time through a channel that
//! holds one such batch (a reader blocks while it is full), and the join takes them as it needs
//! them: memory follows the window (and the frames found), not the length of the logs.

use std::io::Read;
use std::sync::mpsc::{Receiver, sync_channel};

use super::log::{self, Dialect, Log, Msg};
use super::{Analysis, CompositorTrace, FramesError, Options};
use crate::ingest::Cancel;
use crate::ingest::source::Stream;

/// A log to read, and its name in messages.
pub struct Input<R> {
    /// the log
    pub stream: Stream<R>,
    /// its name
    pub name: String,
}

/// [`super::analyse_with`] on two logs read as they are joined, each on its own thread.
/// Ctrl-C (`cancel`) stops both reads; the frames read so far are analysed.
pub fn analyse_streams(
    client: Input<impl Read + Send>,
    server: Input<impl Read + Send>,
    timeline: Option<&CompositorTrace>,
    options: Options,
    cancel: Option<&Cancel>,
) -> Result<Analysis, FramesError> {
    std::thread::scope(|scope| {
        let (ctx, crx) = sync_channel(1);
        let (stx, srx) = sync_channel(1);
        let client_thread = scope.spawn(move || read(client, ctx, cancel));
        let server_thread = scope.spawn(move || read(server, stx, cancel));
        let (mut c, mut s) = (Batches::first(crx), Batches::first(srx));
        let followed = match (c.dialect, s.dialect) {
            (Some(a), Some(b)) if a == b => {
                let stopped = || cancel.is_some_and(Cancel::is_raised);
                let followed = super::follow(c.by_ref(), s.by_ref(), Some(a), options, &stopped);
                // read to the ends, so that every line is counted and said
                c.for_each(drop);
                s.for_each(drop);
                Some(followed)
            }
            // hung up: the reads stop, and the logs' stamps are said to be of two ways (or a
            // log to have no message)
            _ => {
                drop((c, s));
                None
            }
        };
        let client = joined(client_thread)?;
        let server = joined(server_thread)?;
        super::check(&client, &server)?;
        super::conclude(&client, &server, followed.unwrap_or_default(), timeline)
    })
}

/// Reads `input`, handing its messages on through `to` until the taker hangs up.
fn read(
    input: Input<impl Read + Send>,
    to: std::sync::mpsc::SyncSender<(Option<Dialect>, Vec<Msg>)>,
    cancel: Option<&Cancel>,
) -> Result<Log, log::ReadError> {
    log::read_batches(input.stream, &input.name, cancel, |dialect, batch| {
        to.send((dialect, batch)).is_ok()
    })
}

/// What a reading thread gave; a reading thread that panicked is said as a read error.
fn joined(
    handle: std::thread::ScopedJoinHandle<'_, Result<Log, log::ReadError>>,
) -> Result<Log, FramesError> {
    let log = handle.join().unwrap_or_else(|_| {
        Err(log::ReadError {
            file: "a log".to_string(),
            source: std::io::Error::other("the thread reading it panicked"),
        })
    })?;
    Ok(log)
}

/// A log's messages as its reading thread hands them on.
struct Batches {
    from: Receiver<(Option<Dialect>, Vec<Msg>)>,
    batch: std::vec::IntoIter<Msg>,
    /// the log's dialect, known from its first batch (`None`: the log has no message)
    dialect: Option<Dialect>,
}

impl Batches {
    /// The messages from `from`, its first batch taken (waiting for it) to know the dialect.
    fn first(from: Receiver<(Option<Dialect>, Vec<Msg>)>) -> Batches {
        let (dialect, batch) = from.recv().unwrap_or((None, Vec::new()));
        Batches {
            from,
            batch: batch.into_iter(),
            dialect,
        }
    }
}

impl Iterator for Batches {
    type Item = Msg;

    fn next(&mut self) -> Option<Msg> {
        loop {
            if let Some(m) = self.batch.next() {
                return Some(m);
            }
            self.batch = self.from.recv().ok()?.1.into_iter();
        }
    }
}
