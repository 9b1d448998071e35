//! Where an input's bytes come from: a file, standard input, or bytes built into the binary,
//! opened once, here, for every reader.
//!
//! Opening decides three things that every format reads alike, so no command decides them
//! again: whether the input is compressed (its first bytes, [`crate::ingest::compressed`]),
//! whether its lines are read in place from a memory map ([`crate::ingest::mapped`]; this is
//! the one place that maps a file), and its size for a progress bar. What it gives, a
//! [`Stream`], carries the bytes and their map together into the readers
//! ([`crate::ingest::drive`]).

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::ingest::Cancel;
use crate::ingest::compressed::{self, Compression};
use crate::ingest::mapped::Mapped;

/// An input: a name for messages and a way to open it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// a file
    Path(PathBuf),
    /// standard input
    Stdin,
    /// bytes built into the binary, and their name
    Embedded(&'static str, &'static [u8]),
}

impl Source {
    /// The input a command line names: `-` is standard input.
    pub fn from_path(path: &Path) -> Source {
        match path.as_os_str() == "-" {
            true => Source::Stdin,
            false => Source::Path(path.to_path_buf()),
        }
    }

    /// The name shown in messages (`<stdin>` for standard input).
    pub fn name(&self) -> String {
        match self {
            Source::Path(p) => p.display().to_string(),
            Source::Stdin => "<stdin>".to_string(),
            Source::Embedded(name, _) => name.to_string(),
        }
    }

    /// The input opened: [`open`].
    pub fn open(&self, cancel: Option<&Cancel>) -> Result<Stream, Error> {
        open(self, cancel)
    }
}

/// An input's bytes, ready to be read: the reader, and the same bytes mapped when they are a
/// plain file's (its lines are then read in place, and the reader is read only for the first
/// bytes a format is told by, and for what the file grows by after it was mapped).
pub struct Stream<R = Box<dyn Read + Send>> {
    /// the bytes, decompressed
    pub reader: R,
    /// the same bytes, mapped (a plain file of [`crate::ingest::mapped::SMALLEST`] or more)
    pub mapped: Option<Mapped>,
    /// the input's size in bytes, when it is a plain file that is not compressed
    pub size: Option<u64>,
    /// how it was compressed
    pub compression: Option<Compression>,
}

impl<R: Read> Stream<R> {
    /// The bytes of `reader`, read with `read` (tests, fuzz targets, a lab's own pipe).
    pub fn of(reader: R) -> Stream<R> {
        Stream {
            reader,
            mapped: None,
            size: None,
            compression: None,
        }
    }

    /// The same stream, its map given back (a format that reads with `read` only: its slot is
    /// free for another file).
    pub fn unmapped(self) -> Stream<R> {
        Stream {
            mapped: None,
            ..self
        }
    }
}

/// Opens `source`: decompressed when its first bytes say it is gzip, zstd or xz (on a thread
/// of its own, which stops at `cancel`), mapped when it is a plain file of a megabyte or more.
pub fn open(source: &Source, cancel: Option<&Cancel>) -> Result<Stream, Error> {
    let open_error = |error| Error::Open {
        file: source.name(),
        source: error,
    };
    let (raw, size, mapped): (Box<dyn Read + Send>, _, _) = match source {
        Source::Path(path) => {
            let file = File::open(path).map_err(&open_error)?;
            let meta = file.metadata().map_err(&open_error)?;
            if meta.is_dir() {
                return Err(open_error(io::Error::other("is a directory")));
            }
            // SAFETY: this is the one place latscope maps an input. What it assumes of the
            // file (see `Mapped::of`'s safety section): logs and traces are appended to, which
            // the map reads correctly (what is written after it is read with `pread`); one
            // truncated while read is caught and reported as a read error (the SIGBUS
            // handler); one rewritten in place by another program is not supported, as for
            // ripgrep's `--mmap` (such a file can be given on standard input).
            let mapped = unsafe { Mapped::of(&file) };
            (Box::new(file), Some(meta.len()), mapped)
        }
        Source::Stdin => (Box::new(io::stdin()), None, None),
        Source::Embedded(_, bytes) => return Ok(Stream::of(Box::new(*bytes))),
    };
    let (reader, compression) = compressed::open(raw, cancel).map_err(open_error)?;
    let plain = compression.is_none();
    Ok(Stream {
        reader,
        // (a compressed file's map holds its compressed bytes, and its size says nothing of
        // the bytes read)
        mapped: mapped.filter(|_| plain),
        size: size.filter(|_| plain),
        compression,
    })
}
