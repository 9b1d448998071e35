//! Chrome JSON on several cores, with the result of the serial reader, bit for bit.
//!
//! Chromium's traces (the committed samples, `--trace-startup`) hold one element of the events
//! array per line. A raw newline never lies inside a JSON string, so a chunk of the file cut after a
//! newline starts outside every string; whether it starts between two elements of the array
//! only a reading in order knows (the document's head, an element written over several
//! lines). So a worker reads a chunk *as if* it were a run of whole elements, `,` and white
//! space between them ([`Run::read`]), each element parsed where it lies (where the members
//! are; parsing is most of the serial reading). The calling thread reads the input, and takes
//! the chunks in order: a worker's run when the document stands between two elements at the
//! chunk's start ([`Chrome::between_elements`]), and otherwise (or when the chunk is not a
//! run) the chunk's bytes through the serial state machine ([`Chrome::feed`]), which takes
//! chunks cut anywhere. Each element thus goes through the same pairing ([`Chrome::take_run`]
//! and `feed` share it) in the file's order. A file with no newlines (minified JSON) is read
//! in chunks of [`CHUNK`](crate::ingest::reader::CHUNK) that are never runs: at the serial reader's speed.
//!
//! The threads, the queues and the order are the line reader's ([`crate::ingest::chunks`]):
//! N threads in all, each reading the chunks it parses, the calling thread reading and parsing
//! chunks while it would wait, at most
//! [`in_flight`](crate::ingest::chunks::in_flight) chunks out.

use std::io::{self, Read};
use std::sync::atomic::{AtomicU64, Ordering};

use super::chrome::{Chrome, Run, Spent};
use super::rules::Pairer;
use super::stats::TraceOptions;
use crate::ingest::Cancel;
use crate::ingest::chunks::{Spares, in_order};
use crate::ingest::reader::chunk_size;
use crate::span::SpanSink;

/// Bytes of the document, cut after a newline where the read held one.
struct Piece {
    buf: Vec<u8>,
    len: usize,
}

/// A piece as a worker gives it back: its elements with its text when it is a run of whole
/// ones, else its text when it is UTF-8 (checked there only: checked again on the calling
/// thread, it would cost the thread that bounds the read), else its bytes.
enum Parsed {
    Run(Run),
    Text(String),
    Bytes(Vec<u8>),
}

impl Parsed {
    /// The buffer, for the next read; the memory of a run's elements goes back to `spare`.
    fn into_buffer(self, spare: &Spares<Spent>) -> Vec<u8> {
        match self {
            Parsed::Run(run) => {
                let (text, spent) = run.into_parts();
                spare.give(spent);
                text.into_bytes()
            }
            Parsed::Text(text) => text.into_bytes(),
            Parsed::Bytes(bytes) => bytes,
        }
    }
}

/// What a worker made of a piece: its elements, when it is a run of whole ones (in the memory
/// of a run already taken, when there is one).
fn parse(piece: Piece, spare: &Spares<Spent>) -> Parsed {
    let mut buf = piece.buf;
    buf.truncate(piece.len);
    match String::from_utf8(buf) {
        Ok(text) => match Run::read_into(text, spare.take().unwrap_or_default()) {
            Ok(run) => Parsed::Run(run),
            Err(text) => Parsed::Text(text),
        },
        Err(e) => Parsed::Bytes(e.into_bytes()),
    }
}

/// How the read ended.
#[derive(Debug, Default)]
pub struct Ended {
    /// bytes read
    pub bytes: u64,
    /// Ctrl-C stopped it
    pub interrupted: bool,
}

/// Cuts the input into pieces that end after a newline.
struct Pieces<'c, R> {
    inner: R,
    chunk: usize,
    cancel: Option<&'c Cancel>,
    /// the bytes after the last newline of the piece before
    carry: Vec<u8>,
    done: bool,
    /// a read error, given after the bytes read before it
    error: Option<io::Error>,
    ended: Ended,
}

impl<R: Read> Pieces<'_, R> {
    /// The next piece, read into `buf`; `None` at the end (or when Ctrl-C stopped the read:
    /// every byte read was given first).
    fn next(&mut self, mut buf: Vec<u8>) -> io::Result<Option<Piece>> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        if self.done {
            return Ok(None);
        }
        let carried = self.carry.len();
        buf.resize(carried + self.chunk, 0);
        buf[..carried].copy_from_slice(&self.carry);
        self.carry.clear();
        let mut filled = carried;
        while filled < buf.len() {
            match self.inner.read(&mut buf[filled..]) {
                Ok(0) => {
                    self.done = true;
                    break;
                }
                Ok(n) => {
                    filled += n;
                    self.ended.bytes += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted && !self.cancelled() => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => self.stop(),
                Err(e) => {
                    // The serial reader reads every byte before the error: they come first,
                    // whole (a run or not), then the error.
                    self.done = true;
                    if filled == 0 {
                        return Err(e);
                    }
                    self.error = Some(e);
                    return Ok(Some(Piece { buf, len: filled }));
                }
            }
            if self.cancelled() {
                self.stop();
            }
            if self.done {
                break;
            }
        }
        // The whole buffer at the end, or when it holds no newline (never a run, then).
        let len = match memchr::memrchr(b'\n', &buf[..filled]) {
            Some(p) if !self.done => p + 1,
            _ => filled,
        };
        self.carry.extend_from_slice(&buf[len..filled]);
        Ok((len > 0).then_some(Piece { buf, len }))
    }

    fn cancelled(&self) -> bool {
        self.cancel.is_some_and(Cancel::is_raised)
    }

    fn stop(&mut self) {
        self.ended.interrupted = true;
        self.done = true;
    }
}

/// Reads the Chrome JSON `input` on `options.threads` threads in all into `chrome`, `pairer`
/// and `sink`, in the document's order; `options.chunk_bytes` per piece (0: [`CHUNK`](crate::ingest::reader::CHUNK)).
/// How the read ended comes with what was read, a read error included: the bytes before it
/// were parsed and paired, and are counted.
pub fn read<R: Read + Send>(
    input: R,
    options: &TraceOptions,
    chrome: &mut Chrome,
    pairer: &mut Pairer,
    sink: &mut impl SpanSink,
    mut progress: impl FnMut(u64),
) -> (Ended, io::Result<()>) {
    let threads = options.threads.max(1);
    let mut pieces = Pieces {
        inner: input,
        chunk: chunk_size(options.chunk_bytes),
        cancel: options.cancel.as_ref(),
        carry: Vec::new(),
        done: false,
        error: None,
        ended: Ended::default(),
    };
    // bytes read, given to `progress` as pieces are taken (the workers read)
    let read_bytes = AtomicU64::new(0);
    let read = |buf| {
        let piece = pieces.next(buf)?;
        read_bytes.store(pieces.ended.bytes, Ordering::Relaxed);
        Ok(piece)
    };
    let spare = Spares::new(threads);
    let apply = |piece: Parsed| {
        progress(read_bytes.load(Ordering::Relaxed));
        take(chrome, &piece, pairer, sink);
        std::ops::ControlFlow::Continue(piece.into_buffer(&spare))
    };
    let ended = in_order(threads, read, || |piece| parse(piece, &spare), apply);
    progress(pieces.ended.bytes);
    (pieces.ended, ended)
}

/// The next piece of the document: its run where the document stands between elements, its
/// bytes through the serial reader otherwise.
fn take(chrome: &mut Chrome, piece: &Parsed, pairer: &mut Pairer, sink: &mut impl SpanSink) {
    match piece {
        Parsed::Run(run) if chrome.between_elements() => chrome.take_run(run, pairer, sink),
        Parsed::Run(run) => chrome.feed(run.text().as_bytes(), pairer, sink),
        Parsed::Text(text) => chrome.feed(text.as_bytes(), pairer, sink),
        Parsed::Bytes(bytes) => chrome.feed(bytes, pairer, sink),
    }
}
