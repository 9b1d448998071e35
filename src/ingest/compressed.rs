//! Compressed inputs, read as they are: gzip, zstd and xz, known by their first bytes (not by
//! the file's name: a pipe has none, and `trace.txt` may well be gzip).
//!
//! Big traces are kept compressed (a `perf script` of a system-wide trace shrinks ten times).
//! Decompression runs on a thread of its own, ahead of the parser, handing over blocks of
//! [`BLOCK`] bytes through a queue of [`BLOCKS_IN_FLIGHT`]: while the parser reads one block
//! the decoder fills the next, so a compressed file costs the decoder's time or the parser's,
//! whichever is longer, not their sum, and memory stays at the blocks in flight.

use std::io::{self, Read};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use crate::ingest::Cancel;

/// Bytes in one decompressed block.
pub const BLOCK: usize = 1 << 20;

/// Blocks decompressed ahead of the parser, at most (besides the one it reads).
pub const BLOCKS_IN_FLIGHT: usize = 4;

/// How an input is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// gzip (`1f 8b`), every member of a concatenation
    Gzip,
    /// zstd (`28 b5 2f fd`), every frame
    Zstd,
    /// xz (`fd 37 7a 58 5a 00`), every stream
    Xz,
}

impl Compression {
    /// The compression whose magic number `head` begins with.
    pub fn of(head: &[u8]) -> Option<Compression> {
        if head.starts_with(&[0x1f, 0x8b]) {
            Some(Compression::Gzip)
        } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Some(Compression::Zstd)
        } else if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
            Some(Compression::Xz)
        } else {
            None
        }
    }

    /// The name shown in messages.
    pub fn name(self) -> &'static str {
        match self {
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
            Compression::Xz => "xz",
        }
    }

    fn decoder(self, input: Box<dyn Read + Send>) -> io::Result<Box<dyn Read + Send>> {
        Ok(match self {
            Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(input)),
            Compression::Zstd => Box::new(zstd::stream::read::Decoder::new(input)?),
            Compression::Xz => Box::new(liblzma::read::XzDecoder::new_multi_decoder(input)),
        })
    }
}

/// `input`, decompressed when its first bytes say it is compressed (on a thread of its own),
/// and how it was compressed. Nothing is lost: the bytes read to look are read again.
///
/// The decompressing thread stops at `cancel` (Ctrl-C): a signal is passed on to it while it
/// reads ([`Cancel::reading`]), and the reader then gets an `Interrupted` error, as from a read
/// of its own that a signal stopped.
pub fn open(
    mut input: Box<dyn Read + Send>,
    cancel: Option<&Cancel>,
) -> io::Result<(Box<dyn Read + Send>, Option<Compression>)> {
    let mut magic = [0u8; 6];
    let mut filled = 0;
    while filled < magic.len() {
        match input.read(&mut magic[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    let whole: Box<dyn Read + Send> =
        Box::new(io::Cursor::new(magic[..filled].to_vec()).chain(input));
    match Compression::of(&magic[..filled]) {
        None => Ok((whole, None)),
        Some(c) => {
            let decoder = c.decoder(whole)?;
            Ok((Box::new(Decompressed::spawn(decoder, cancel)?), Some(c)))
        }
    }
}

/// The reading end of a decoder thread: blocks in order, then the decoder's error if any.
pub struct Decompressed {
    blocks: Receiver<io::Result<Vec<u8>>>,
    block: Vec<u8>,
    at: usize,
    done: bool,
    thread: Option<JoinHandle<()>>,
}

impl Decompressed {
    /// Starts a thread that reads `decoder` into blocks, until `cancel` is raised.
    pub fn spawn(
        decoder: Box<dyn Read + Send>,
        cancel: Option<&Cancel>,
    ) -> io::Result<Decompressed> {
        let (tx, rx) = sync_channel(BLOCKS_IN_FLIGHT);
        let cancel = cancel.cloned();
        let thread = std::thread::Builder::new()
            .name("decompress".into())
            .spawn(move || decode(decoder, &tx, cancel.as_ref()))?;
        Ok(Decompressed {
            blocks: rx,
            block: Vec::new(),
            at: 0,
            done: false,
            thread: Some(thread),
        })
    }
}

/// The decoder thread: blocks until the end, an error, `cancel`, or the reader is gone.
fn decode(
    mut decoder: Box<dyn Read + Send>,
    tx: &SyncSender<io::Result<Vec<u8>>>,
    cancel: Option<&Cancel>,
) {
    let _reading = cancel.map(Cancel::reading);
    let cancelled = || cancel.is_some_and(Cancel::is_raised);
    loop {
        let mut block = vec![0u8; BLOCK];
        let mut filled = 0;
        while filled < BLOCK {
            match decoder.read(&mut block[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted && !cancelled() => continue,
                Err(e) => {
                    block.truncate(filled);
                    if cancelled() {
                        // what was decoded, then the stop, as the reader's own read gives it
                        if filled > 0 && tx.send(Ok(block)).is_err() {
                            return;
                        }
                        let _ = tx.send(Err(io::Error::from(io::ErrorKind::Interrupted)));
                        return;
                    }
                    if filled > 0 && tx.send(Ok(block)).is_err() {
                        return;
                    }
                    let _ = tx.send(Err(io::Error::new(e.kind(), format!("decompressing: {e}"))));
                    return;
                }
            }
        }
        block.truncate(filled);
        if filled == 0 || tx.send(Ok(block)).is_err() {
            return; // the end, or the reader stopped (Ctrl-C, an error)
        }
    }
}

impl Read for Decompressed {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.at == self.block.len() {
            if self.done {
                return Ok(0);
            }
            match self.blocks.recv() {
                Ok(Ok(block)) => {
                    self.block = block;
                    self.at = 0;
                }
                Ok(Err(e)) => {
                    self.done = true;
                    return Err(e);
                }
                Err(_) => {
                    self.done = true;
                    return Ok(0);
                }
            }
        }
        let n = buf.len().min(self.block.len() - self.at);
        buf[..n].copy_from_slice(&self.block[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

impl Drop for Decompressed {
    fn drop(&mut self) {
        // Dropping the receiver ends the thread at its next block; it is not waited for when
        // it is stuck reading a pipe that never ends.
        let (_, rx) = sync_channel(0);
        drop(std::mem::replace(&mut self.blocks, rx));
        if let Some(t) = self.thread.take()
            && t.is_finished()
        {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn text() -> Vec<u8> {
        (0..200_000)
            .flat_map(|i| format!("line {i} of a trace\n").into_bytes())
            .collect()
    }

    fn read_all(bytes: Vec<u8>) -> (Vec<u8>, Option<Compression>) {
        let (mut r, c) = open(Box::new(io::Cursor::new(bytes)), None).unwrap();
        let mut out = Vec::new();
        r.read_to_end(&mut out).unwrap();
        (out, c)
    }

    #[test]
    fn gzip_zstd_and_xz_are_known_by_their_first_bytes_and_read_whole() {
        let plain = text();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&plain).unwrap();
        let gz = gz.finish().unwrap();
        let zst = zstd::stream::encode_all(&plain[..], 1).unwrap();
        let mut xz = liblzma::write::XzEncoder::new(Vec::new(), 1);
        xz.write_all(&plain).unwrap();
        let xz = xz.finish().unwrap();
        assert_eq!(read_all(gz), (plain.clone(), Some(Compression::Gzip)));
        assert_eq!(read_all(zst), (plain.clone(), Some(Compression::Zstd)));
        assert_eq!(read_all(xz), (plain.clone(), Some(Compression::Xz)));
        assert_eq!(read_all(plain.clone()), (plain, None));
        assert_eq!(read_all(b"ab".to_vec()), (b"ab".to_vec(), None));
    }

    #[test]
    fn concatenated_gzip_members_and_zstd_frames_are_all_read() {
        let mut two = Vec::new();
        for part in [&b"first\n"[..], b"second\n"] {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            gz.write_all(part).unwrap();
            two.extend(gz.finish().unwrap());
        }
        assert_eq!(read_all(two).0, b"first\nsecond\n");
        let mut two = zstd::stream::encode_all(&b"a\n"[..], 1).unwrap();
        two.extend(zstd::stream::encode_all(&b"b\n"[..], 1).unwrap());
        assert_eq!(read_all(two).0, b"a\nb\n");
    }

    #[test]
    fn a_truncated_stream_is_an_error_after_the_bytes_it_held() {
        let plain = text();
        let zst = zstd::stream::encode_all(&plain[..], 1).unwrap();
        let cut = zst[..zst.len() / 2].to_vec();
        let (mut r, _) = open(Box::new(io::Cursor::new(cut)), None).unwrap();
        let mut out = Vec::new();
        let err = r.read_to_end(&mut out).unwrap_err();
        assert!(err.to_string().contains("decompressing"), "{err}");
        assert!(!out.is_empty() && plain.starts_with(&out));
    }
}
