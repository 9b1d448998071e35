//! The one reader of lines: an input cut into chunks of whole lines ([`Reader`]), each chunk's
//! lines given one by one (`for_each_line`). The serial reader ([`LineReader`]) is these two
//! on the calling thread; the parallel readers (`crate::ingest::chunks::in_order`) are the
//! same chunks parsed on several threads. Cutting at the last newline, carrying the rest,
//! skipping a line too long to read, reading a mapped file in place and then what follows its
//! map, giving a read error after the lines before it, and stopping on a cancel are written
//! once, here, so that every format on any number of threads sees the same lines.
//!
//! `BufRead::read_until` copies every line and grows without bound on a line with no newline;
//! here lines are slices of a chunk found with `memchr`, and a line longer than the longest
//! whole line is reported as [`Line::TooLong`] and skipped, so a 10 MB line costs nothing but
//! a count. The reader stops cleanly when a [`Cancel`] flag is raised (Ctrl-C), so whatever was
//! read so far can still be reported.

use std::io::{self, Read};
use std::ops::Range;
use std::sync::Arc;

use crate::ingest::Cancel;
use crate::ingest::lines::{
    DEFAULT_BUFFER, Line, ReadError, ReadResult, ReadSummary, text_of, trim_cr, trim_cr_str,
};
use crate::ingest::mapped::{LineEnd, Mapped, shrunk_error};
use crate::ingest::words::Positions;

/// Bytes of input per chunk (a chunk ends at the last newline of this many): small enough that
/// a chunk's records are likely still in cache when the pairing thread takes them, which made
/// 256 KiB faster than 1 MiB in every format measured.
pub const CHUNK: usize = 256 << 10;

/// The chunk size a reader uses when `asked` bytes (0: [`CHUNK`]; `--chunk-bytes`).
pub fn chunk_size(asked: usize) -> usize {
    if asked == 0 { CHUNK } else { asked }
}

/// A line this long or longer (without its newline) is skipped unless the reader is told
/// otherwise ([`Reader::longest`]): it is given as [`Line::TooLong`], its bytes unread.
const LONGEST: usize = DEFAULT_BUFFER;

/// What a chunk's lines need besides its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Lead {
    /// a line too long to read that ended just before the chunk: its length
    pub(crate) too_long: Option<u64>,
    /// the length from which a line is too long
    pub(crate) longest: usize,
}

impl Lead {
    /// No line before the chunk, and the reader's usual longest line.
    #[cfg(test)]
    pub(crate) fn none() -> Lead {
        Lead {
            too_long: None,
            longest: LONGEST,
        }
    }
}

/// Whole lines of the input, and the line too long to read that ends just before them: read
/// into `buf`, or a range of the input's map.
pub(crate) struct Job {
    pub(crate) buf: Vec<u8>,
    pub(crate) len: usize,
    pub(crate) lead: Lead,
    pub(crate) mapped: Option<(Arc<Mapped>, Range<usize>)>,
}

impl Job {
    /// The chunk's lines.
    #[inline]
    pub(crate) fn data(&self) -> &[u8] {
        match &self.mapped {
            Some((mapped, range)) => &mapped.bytes()[range.clone()],
            None => &self.buf[..self.len],
        }
    }

    /// Says that this chunk and every chunk before it are read ([`Mapped::release`]): called
    /// by the thread that takes the chunks in order, once it has taken this one.
    pub(crate) fn taken(&self) {
        if let Some((mapped, range)) = &self.mapped {
            mapped.release(range.end);
        }
    }
}

/// Cuts the input into chunks of whole lines: the one reader of lines, whether they are then
/// parsed on this thread ([`crate::ingest::LineReader`]) or on several (`in_order`).
pub struct Reader<'c, R> {
    inner: R,
    chunk: usize,
    /// a line this long or longer is skipped
    longest: usize,
    /// whole lines given as soon as a read returns them ([`Reader::eager`])
    eager: bool,
    cancel: Option<&'c Cancel>,
    /// the beginning of a line, read with the chunk before
    carry: Vec<u8>,
    /// inside a line too long to read (its bytes are dropped): its bytes so far
    skipping: Option<u64>,
    /// a line too long to read ended just before the next chunk: its length
    lead: Option<u64>,
    done: bool,
    error: Option<io::Error>,
    pub(crate) cancelled: bool,
    pub(crate) bytes: u64,
    /// the input ended without a newline (the serial reader's `unterminated_last_line`)
    pub(crate) unterminated: bool,
    /// the input's map: chunks are ranges of it, then what follows it is read from the file
    /// (not from `inner`, which is not read)
    mapped: Option<Arc<Mapped>>,
    /// where the next chunk of the map begins; past the map, where the next read of the file
    /// begins
    at: u64,
    past_map: bool,
}

impl<'c, R: Read> Reader<'c, R> {
    /// Chunks of about `chunk` bytes of `inner` (0: [`CHUNK`]); the read stops when
    /// `cancel` is raised.
    pub fn new(inner: R, chunk: usize, cancel: Option<&'c Cancel>) -> Self {
        Reader {
            inner,
            chunk: chunk_size(chunk),
            longest: LONGEST,
            eager: false,
            cancel,
            carry: Vec::new(),
            skipping: None,
            lead: None,
            done: false,
            error: None,
            cancelled: false,
            bytes: 0,
            unterminated: false,
            mapped: None,
            at: 0,
            past_map: false,
        }
    }

    /// Skips lines of `longest` bytes or more (without the newline) instead of [`LONGEST`]:
    /// a reader with a small buffer of its own.
    pub(crate) fn longest(mut self, longest: usize) -> Self {
        self.longest = longest.max(1);
        self
    }

    /// Gives the whole lines of each read at once instead of filling a chunk first: a reader
    /// on one thread of a pipe still being written hands each line on when it comes, and one
    /// that is done with the input (`--strict`) reads no further. Reads of a file fill a
    /// chunk anyway.
    pub(crate) fn eager(mut self) -> Self {
        self.eager = true;
        self
    }

    /// Chunks of `mapped` where they lie, then of what the file holds past the map, instead
    /// of `inner`'s: the chunks end where `inner`'s would (lines too long are in them, to be
    /// given as [`Line::TooLong`]).
    pub fn mapped(mut self, mapped: Option<Mapped>) -> Self {
        self.mapped = mapped.map(Arc::new);
        self
    }

    /// The next chunk of the map; `None` when the map is done (its unfinished last line then
    /// carried, to be ended by what is read after it).
    fn next_mapped(&mut self, mapped: &Arc<Mapped>, buf: Vec<u8>) -> io::Result<Option<Job>> {
        if mapped.shrunk() {
            self.done = true;
            return Err(shrunk_error());
        }
        let map = mapped.bytes();
        let mut at = usize::try_from(self.at).unwrap_or(map.len()).min(map.len());
        let mut end = map.len().min(at + self.chunk);
        while at < map.len() {
            if let Some(p) = memchr::memrchr(b'\n', &map[at..end]) {
                self.at = (at + p + 1) as u64;
                self.bytes = self.at;
                return Ok(Some(Job {
                    buf,
                    len: 0,
                    lead: self.lead(),
                    mapped: Some((Arc::clone(mapped), at..at + p + 1)),
                }));
            }
            if end - at >= self.longest {
                // a line too long to read, skipped unread as the read chunks skip it: the
                // next chunk says that it ended before it. One that ended just before this
                // one is said first, by a chunk of no lines (the read chunks' order).
                if self.lead.is_some() {
                    self.at = at as u64;
                    return Ok(Some(self.job(buf, 0)));
                }
                // (its first bytes, searched, are given back too: they are no chunk's)
                mapped.forget(at..end);
                let cancel = self.cancel;
                let cancelled = || cancel.is_some_and(Cancel::is_raised);
                let nl = match mapped.line_end(end, cancelled) {
                    LineEnd::Newline(nl) => nl,
                    LineEnd::Stopped => {
                        self.cancelled = true;
                        self.done = true;
                        return Ok(None);
                    }
                    // (cut short: the line is no line of the file, not one too long)
                    LineEnd::Shrunk => {
                        self.done = true;
                        return Err(shrunk_error());
                    }
                    LineEnd::MapEnd => {
                        self.skipping = Some((map.len() - at) as u64);
                        at = map.len();
                        break;
                    }
                };
                self.lead = Some((nl - at) as u64);
                at = nl + 1;
                end = map.len().min(at + self.chunk);
                continue;
            }
            if end == map.len() {
                break;
            }
            // a line longer than the chunk: twice the room (at most the longest line read),
            // searched again
            end = map.len().min(at + (2 * (end - at)).min(self.longest));
        }
        self.past_map = true;
        self.bytes = map.len() as u64;
        self.at = map.len() as u64;
        // (a tail too long was found above: it is being skipped)
        if self.skipping.is_none() {
            self.carry.extend_from_slice(&map[at..]);
        }
        Ok(None)
    }

    /// Once the chunks are all taken (however the read ended): an error when the mapped file
    /// shrank under the read ([`Mapped::check`]); workers read a chunk's pages after it was
    /// handed out, so this is known only now.
    pub(crate) fn check_mapped(&self) -> io::Result<()> {
        self.mapped.as_ref().map_or(Ok(()), |mapped| mapped.check())
    }

    /// What the read saw, `lines` lines given, once its chunks are all taken: `ended` is how
    /// the taking ended, and a mapped file that shrank under the read is an error too.
    pub(crate) fn finish(&self, lines: u64, ended: io::Result<()>) -> ReadResult {
        let read = ReadSummary {
            lines,
            bytes: self.bytes,
            unterminated_last_line: self.unterminated,
            cancelled: self.cancelled,
        };
        match ended.and_then(|()| self.check_mapped()) {
            Ok(()) => Ok(read),
            Err(error) => Err(ReadError { read, error }),
        }
    }

    /// Reads from the file past its map, or from `inner`.
    fn read_more(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match &self.mapped {
            Some(mapped) => mapped.read_past(buf, &mut self.at),
            None => self.inner.read(buf),
        }
    }

    /// The next chunk, read into `buf`; `None` at the end. A read error comes after the
    /// whole lines read before it, as the serial reader delivers them.
    pub(crate) fn next(&mut self, mut buf: Vec<u8>) -> io::Result<Option<Job>> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        if self.done {
            return Ok(None);
        }
        if let Some(mapped) = self.mapped.clone()
            && !self.past_map
        {
            if self.cancel.is_some_and(Cancel::is_raised) {
                self.cancelled = true;
                self.done = true;
                return Ok(None);
            }
            if let Some(job) = self.next_mapped(&mapped, std::mem::take(&mut buf))? {
                return Ok(Some(job));
            }
        }
        // Any thread may be the one reading: a signal is passed on to it (a read blocked on a
        // pipe then returns at once).
        let _reading = self.cancel.map(Cancel::reading);
        // Exactly a chunk more than the carried part of a line (a buffer grown by a long line
        // keeps its memory, not its length).
        buf.resize(self.carry.len() + self.chunk, 0);
        let mut filled = self.carry.len();
        buf[..filled].copy_from_slice(&self.carry);
        self.carry.clear();
        loop {
            if self.cancel.is_some_and(Cancel::is_raised) {
                self.cancelled = true;
                self.done = true;
                return Ok(self.cut(buf, filled));
            }
            let n = match self.read_more(&mut buf[filled..]) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.done = true;
                    // With no whole line to give first, the error is given now: kept for
                    // the next call, it would be lost behind the `None` that ends the read.
                    let Some(job) = self.cut(buf, filled) else {
                        return Err(e);
                    };
                    self.error = Some(e);
                    return Ok(Some(job));
                }
            };
            if n == 0 {
                self.done = true;
                let skipped = self.skipping.take();
                self.unterminated = skipped.is_some() || (filled > 0 && buf[filled - 1] != b'\n');
                // (a line being skipped is the last, unterminated: a lead and no lines)
                let len = if skipped.is_some() { 0 } else { filled };
                self.lead = self.lead.or(skipped);
                let job = self.job(buf, len);
                return Ok((len > 0 || job.lead.too_long.is_some()).then_some(job));
            }
            self.bytes += n as u64;
            // where the bytes not yet searched for a newline begin
            let fresh = filled;
            if let Some(skipped) = self.skipping {
                let Some(p) = memchr::memchr(b'\n', &buf[filled..filled + n]) else {
                    // still inside the long line: its bytes are dropped
                    self.skipping = Some(skipped + n as u64);
                    continue;
                };
                let from = filled + p + 1;
                buf.copy_within(from..filled + n, 0);
                filled = filled + n - from;
                self.skipping = None;
                self.lead = Some(skipped + p as u64);
            } else {
                filled += n;
            }
            if filled < buf.len() {
                if self.eager
                    && let Some(p) = memchr::memrchr(b'\n', &buf[fresh..filled])
                {
                    let end = fresh + p + 1;
                    self.carry.extend_from_slice(&buf[end..filled]);
                    return Ok(Some(self.job(buf, end)));
                }
                continue;
            }
            match memchr::memrchr(b'\n', &buf[..filled]) {
                Some(p) => {
                    self.carry.extend_from_slice(&buf[p + 1..filled]);
                    return Ok(Some(self.job(buf, p + 1)));
                }
                None if filled >= self.longest => {
                    self.skipping = Some(filled as u64);
                    filled = 0;
                    if self.lead.is_some() {
                        return Ok(Some(self.job(buf, 0)));
                    }
                }
                // A line longer than the chunk: room for more of it (doubling, so that it
                // is searched for its newline a bounded number of times).
                None => buf.resize(buf.len() + self.chunk.max(buf.len()), 0),
            }
        }
    }

    /// What the next chunk's lines need: the too-long line before them, taken.
    fn lead(&mut self) -> Lead {
        Lead {
            too_long: self.lead.take(),
            longest: self.longest,
        }
    }

    fn job(&mut self, buf: Vec<u8>, len: usize) -> Job {
        Job {
            buf,
            len,
            lead: self.lead(),
            mapped: None,
        }
    }

    /// The whole lines of `buf[..filled]`, when the read stops early.
    fn cut(&mut self, buf: Vec<u8>, filled: usize) -> Option<Job> {
        let len = memchr::memrchr(b'\n', &buf[..filled]).map_or(0, |p| p + 1);
        let job = self.job(buf, len);
        (job.len > 0 || job.lead.too_long.is_some()).then_some(job)
    }
}

/// Calls `f(n, line)` for every line of a chunk, numbered from 1, as the serial reader would
/// give them; returns how many there were. `UTF8`: lines are given as text where the chunk is
/// UTF-8 (a reader of bytes, as the WAYLAND_DEBUG one, skips the check); `blanks`: as
/// [`Line::Plain`] where the chunk has no tab, `\r` or `\x0c` ([`LineReader::blanks`](crate::ingest::LineReader::blanks)).
#[inline]
pub(crate) fn for_each_line<const UTF8: bool>(
    data: &[u8],
    lead: Lead,
    blanks: bool,
    mut f: impl FnMut(u64, Line<'_>),
) -> u64 {
    // A chunk of UTF-8 (the usual) is checked at once; its lines are then given as text.
    let (text, plain) = if UTF8 {
        text_of(data, blanks)
    } else {
        (None, false)
    };
    let line = |start: usize, end: usize| -> Line<'_> {
        if end - start >= lead.longest {
            return Line::TooLong {
                len: (end - start) as u64,
            };
        }
        match text {
            Some(text) => Line::of_text(trim_cr_str(&text[start..end]), plain),
            None => Line::Text(trim_cr(&data[start..end])),
        }
    };
    // `f` is called from one place, so that it is inlined: called for the lead, the lines and
    // the last line apart, it was a call with its frame for every line, a measurable cost on
    // short WAYLAND_DEBUG lines.
    let (mut first, mut last) = (lead.too_long, data.last().is_some_and(|&b| b != b'\n'));
    let mut lines = Positions::of(b'\n', data);
    let (mut n, mut start) = (0, 0);
    loop {
        let next = if let Some(len) = first.take() {
            Line::TooLong { len }
        } else if let Some(nl) = lines.next() {
            let next = line(start, nl);
            start = nl + 1;
            next
        } else if last {
            last = false;
            line(start, data.len())
        } else {
            return n;
        };
        n += 1;
        f(n, next);
    }
}

/// Streams lines out of a reader. See the module docs: the lines are those of the chunks of
/// [`Reader`], the one reader of lines, given on this thread.
pub struct LineReader<R> {
    inner: R,
    /// the longest line delivered whole, and the size of a read
    capacity: usize,
    cancel: Option<Cancel>,
    stop: Option<Cancel>,
    utf8: bool,
    blanks: bool,
    /// the input mapped: its lines read in place, then what follows the map read from the file
    mapped: Option<Mapped>,
}

impl<R: Read> LineReader<R> {
    /// A reader with the default 1 MiB buffer.
    pub fn new(inner: R) -> Self {
        Self::with_capacity(inner, DEFAULT_BUFFER)
    }

    /// A reader whose buffer (and longest whole line) is `capacity` bytes.
    pub fn with_capacity(inner: R, capacity: usize) -> Self {
        LineReader {
            inner,
            capacity: capacity.max(16),
            cancel: None,
            stop: None,
            utf8: false,
            blanks: false,
            mapped: None,
        }
    }

    /// Reads the lines of `mapped` where they lie, then what the file holds past the map,
    /// instead of the reader (which is not read at all): the lines are those the reader would
    /// give of the same file.
    pub fn mapped(mut self, mapped: Option<Mapped>) -> Self {
        self.mapped = mapped;
        self
    }

    /// Checks the lines of each read as UTF-8 together: those of a block that is UTF-8 are
    /// given as [`Line::Str`] (or [`Line::Plain`]: [`LineReader::blanks`]), the others as
    /// [`Line::Text`].
    pub fn utf8(mut self) -> Self {
        self.utf8 = true;
        self
    }

    /// With [`LineReader::utf8`], also searches each block of lines for tabs, `\r` and `\x0c`
    /// together: the lines of a block with none are given as [`Line::Plain`] (a search per line
    /// for them was a measurable share of reading an ftrace line).
    pub fn blanks(mut self) -> Self {
        self.blanks = true;
        self
    }

    /// Stops reading when `cancel` is raised.
    pub fn cancel_on(mut self, cancel: Cancel) -> Self {
        self.cancel = Some(cancel);
        self
    }

    /// Stops reading, without calling it a cancel, when `stop` is raised: the caller is done
    /// with the input (`--strict`'s first malformed line), so the rest is not read at all.
    pub fn stop_when(mut self, stop: Cancel) -> Self {
        self.stop = Some(stop);
        self
    }

    /// Reads everything, calling `on_line(line_number, line)` for each line (the first is line
    /// one) and `on_progress(total_bytes)` after each chunk. Stops early, without error, when
    /// the cancel flag is raised; an I/O error ends the read with that error, after the lines
    /// read before it.
    pub fn for_each_line(
        self,
        mut on_line: impl FnMut(u64, Line<'_>),
        mut on_progress: impl FnMut(u64),
    ) -> ReadResult {
        let LineReader {
            inner,
            capacity,
            cancel,
            stop,
            utf8,
            blanks,
            mapped,
        } = self;
        let mut chunks = Reader::new(inner, capacity, cancel.as_ref())
            .longest(capacity)
            .eager()
            .mapped(mapped);
        let (mut lines, mut buf) = (0, Vec::new());
        let read = loop {
            if stop.as_ref().is_some_and(Cancel::is_raised) {
                break Ok(());
            }
            let job = match chunks.next(buf) {
                Ok(Some(job)) => job,
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            };
            let line = |n, line: Line<'_>| on_line(lines + n, line);
            lines += match utf8 {
                true => for_each_line::<true>(job.data(), job.lead, blanks, line),
                false => for_each_line::<false>(job.data(), job.lead, false, line),
            };
            job.taken();
            on_progress(chunks.bytes);
            buf = job.buf;
        };
        chunks.finish(lines, read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::lines::no_other_blanks;

    /// `data`, then an error.
    struct Failing<'a>(&'a [u8]);

    impl Read for Failing<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.0.is_empty() {
                return Err(io::Error::other("broken"));
            }
            let n = buf.len().min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    /// The chunks' whole lines, then the error (as text).
    fn chunks(data: &[u8], chunk: usize) -> (Vec<String>, Option<String>) {
        let mut reader = Reader::new(Failing(data), chunk, None);
        let mut out = Vec::new();
        loop {
            match reader.next(Vec::new()) {
                Ok(Some(job)) => out.push(String::from_utf8_lossy(job.data()).into()),
                Ok(None) => return (out, None),
                Err(e) => return (out, Some(e.to_string())),
            }
        }
    }

    /// Every line of every chunk of `reader`, numbered across chunks (a line too long by its
    /// length), then whether the input ended without a newline, the bytes read and the error.
    fn lines_of_chunks<R: Read>(mut reader: Reader<'_, R>) -> (Vec<String>, bool, u64, String) {
        let (mut out, mut n) = (Vec::new(), 0);
        let error = loop {
            match reader.next(Vec::new()) {
                Ok(Some(job)) => {
                    let base = n;
                    n += for_each_line::<false>(job.data(), job.lead, false, |k, line| {
                        out.push(match line {
                            Line::TooLong { len } => format!("{} too long: {len}", base + k),
                            Line::Text(t) => format!("{} {t:?}", base + k),
                            other => format!("{} {other:?}", base + k),
                        })
                    });
                }
                Ok(None) => break String::new(),
                Err(e) => break e.to_string(),
            }
        };
        (out, reader.unterminated, reader.bytes, error)
    }

    /// Inputs of short lines, empty lines, lines longer than a chunk and lines too long to
    /// read, ended with or without a newline.
    fn inputs() -> Vec<Vec<u8>> {
        let mut inputs = Vec::new();
        for seed in 0..60u64 {
            let mut state = seed;
            let mut input = Vec::new();
            for _ in 0..seed % 23 {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                match (state >> 33) % 9 {
                    0..5 => input.extend_from_slice(b"a short line\n"),
                    5 => input.push(b'\n'),
                    6 => input.extend(std::iter::repeat_n(b'c', 300)),
                    7 if seed % 5 == 0 => input.extend(std::iter::repeat_n(b'L', LONGEST)),
                    _ => input.extend_from_slice(b"x"),
                }
            }
            inputs.push(input);
        }
        inputs.push([vec![b'L'; LONGEST - 1], b"\nend".to_vec()].concat());
        inputs.push([b"a\n".to_vec(), vec![b'L'; LONGEST + 5]].concat());
        inputs
    }

    #[test]
    fn the_chunks_of_a_mapped_file_give_the_lines_its_read_chunks_give() {
        for input in inputs() {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("input");
            std::fs::write(&path, &input).unwrap();
            for chunk in [16, 100, 4096] {
                let read = lines_of_chunks(Reader::new(&input[..], chunk, None));
                let file = std::fs::File::open(&path).unwrap();
                let mapped = crate::ingest::mapped::small_map(&file);
                assert_eq!(mapped.is_some(), !input.is_empty());
                let from_map =
                    lines_of_chunks(Reader::new(io::empty(), chunk, None).mapped(mapped));
                assert_eq!(from_map, read, "chunks of {chunk}: {} bytes", input.len());
            }
        }
    }

    #[test]
    fn chunks_of_a_file_truncated_while_mapped_end_with_an_error() {
        let bytes: Vec<u8> = b"a line\n".iter().copied().cycle().take(4 << 20).collect();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("input");
        std::fs::write(&path, &bytes).unwrap();
        let mapped = crate::ingest::mapped::small_map(&std::fs::File::open(&path).unwrap());
        let mut reader = Reader::new(io::empty(), 1 << 16, None).mapped(mapped);
        // the first chunk is handed out, then the file is cut, then its lines are read
        let first = reader.next(Vec::new()).unwrap().unwrap();
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(4096).unwrap();
        assert!(first.data().starts_with(b"a line\n"));
        while let Ok(Some(job)) = reader.next(Vec::new()) {
            let _ = job.data().iter().map(|&b| u64::from(b)).sum::<u64>();
        }
        let error = reader.check_mapped().unwrap_err().to_string();
        assert!(error.contains("the file shrank"), "{error}");
    }

    #[test]
    fn what_is_written_after_the_map_is_chunked_after_it_as_one_file() {
        let (before, after) = (&b"one\ntwo\nthr"[..], &b"ee\nfour\nfiv"[..]);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("input");
        std::fs::write(&path, before).unwrap();
        let mapped = crate::ingest::mapped::small_map(&std::fs::File::open(&path).unwrap());
        crate::ingest::mapped::append_to(&path, after);
        let whole = [before, after].concat();
        let read = lines_of_chunks(Reader::new(&whole[..], 4, None));
        let from_map = lines_of_chunks(Reader::new(io::empty(), 4, None).mapped(mapped));
        assert_eq!(from_map, read);
        assert_eq!(read.0.len(), 5);
        assert!(read.1, "ends without a newline");
    }

    #[test]
    fn a_chunk_gives_plain_lines_only_when_asked_and_free_of_other_blanks() {
        let kinds = |data: &[u8], blanks: bool| {
            let mut kinds = String::new();
            for_each_line::<true>(data, Lead::none(), blanks, |_, line| {
                kinds.push(match line {
                    Line::Plain(_) => 'p',
                    Line::Str(_) => 's',
                    Line::Text(_) => 't',
                    Line::TooLong { .. } => 'l',
                })
            });
            kinds
        };
        assert_eq!(kinds(b"a b\nc d\ne", true), "ppp");
        assert_eq!(kinds(b"a b\nc d\ne", false), "sss");
        for blank in [b'\t', b'\r', b'\x0c'] {
            let data = [&b"a b\nc d\ne"[..], &[blank]].concat();
            assert_eq!(kinds(&data, true), "sss", "{blank}");
        }
        assert_eq!(kinds(b"a\xff\nb\n", true), "tt");
    }

    #[test]
    fn a_read_error_says_what_was_read_before_it() {
        let mut lines = Vec::new();
        let error = LineReader::with_capacity(Failing(b"one\ntwo\nthr"), 16)
            .for_each_line(|n, line| lines.push((n, line_text(line))), |_| {})
            .unwrap_err();
        assert_eq!(lines, [(1, "one".to_string()), (2, "two".to_string())]);
        assert_eq!(error.to_string(), "broken");
        // the bytes of the cut-off line were read too
        assert_eq!((error.read.lines, error.read.bytes), (2, 11));
        assert!(!error.read.cancelled);
    }

    fn line_text(line: Line<'_>) -> String {
        match line {
            Line::Text(t) => String::from_utf8_lossy(t).into_owned(),
            Line::Str(t) | Line::Plain(t) => t.to_string(),
            Line::TooLong { len } => format!("<{len}>"),
        }
    }

    #[test]
    fn a_read_error_after_the_last_whole_line_is_not_lost() {
        // The error comes with only the start of a line in the buffer (the carried "bb"),
        // or with nothing at all: the read must end with it, never with `None`.
        for (data, chunk) in [(&b"a\nbb"[..], 4), (b"a\nbb", 1), (b"a\n", 2), (b"", 8)] {
            let (_, error) = chunks(data, chunk);
            assert_eq!(
                error.as_deref(),
                Some("broken"),
                "{data:?} in chunks of {chunk}"
            );
        }
        // Whole lines read before the error still come first.
        let (lines, error) = chunks(b"a\nb\ncc", 64);
        assert_eq!(lines, ["a\nb\n"]);
        assert_eq!(error.as_deref(), Some("broken"));
    }

    #[test]
    fn lines_are_plain_only_from_a_reader_that_asks_and_a_block_with_no_other_blanks() {
        let kinds = |input: &[u8], blanks: bool| {
            let mut kinds = Vec::new();
            let mut reader = LineReader::new(input).utf8();
            if blanks {
                reader = reader.blanks();
            }
            reader
                .for_each_line(
                    |_, line| {
                        kinds.push(match line {
                            Line::Plain(_) => 'p',
                            Line::Str(_) => 's',
                            Line::Text(_) => 't',
                            Line::TooLong { .. } => 'l',
                        })
                    },
                    |_| {},
                )
                .unwrap();
            kinds.into_iter().collect::<String>()
        };
        assert_eq!(kinds(b"a b\nc d\n", true), "pp");
        assert_eq!(kinds(b"a b\nc d\n", false), "ss");
        for blank in [b'\t', b'\r', b'\x0c'] {
            let input = [&b"a b\nc"[..], &[blank], b"d\n"].concat();
            assert_eq!(kinds(&input, true), "ss", "{blank}");
        }
        // a CRLF file: the \r is cut from each line, but the block holds them
        assert_eq!(kinds(b"a b\r\nc d\r\n", true), "ss");
        assert_eq!(kinds(b"a\xff b\n", true), "t");
    }

    /// Collects lines as owned strings, with `TooLong` shown as `<too long: N>`.
    fn lines_of(input: &[u8], capacity: usize) -> (Vec<String>, ReadSummary) {
        let mut out = Vec::new();
        let summary = LineReader::with_capacity(input, capacity)
            .for_each_line(
                |n, line| {
                    out.push(match line {
                        Line::Text(t) => format!("{n}:{}", String::from_utf8_lossy(t)),
                        Line::Str(t) | Line::Plain(t) => format!("{n}:{t}"),
                        Line::TooLong { len } => format!("{n}:<too long: {len}>"),
                    })
                },
                |_| {},
            )
            .unwrap();
        (out, summary)
    }

    /// Every line and the summary of `reader`: each line's bytes, or its length when too long.
    /// Whether a line is given as text, as UTF-8 text or as plain text depends on the block it
    /// was read in (where the block begins: after a line too long, a block read holds its end)
    /// and says nothing of the line but that it is UTF-8 (checked), and plain (checked).
    fn said<R: Read>(reader: LineReader<R>) -> (Vec<String>, ReadResult) {
        let mut out = Vec::new();
        let summary = reader.for_each_line(
            |n, line| {
                let bytes = match line {
                    Line::Plain(text) => {
                        assert!(no_other_blanks(text.as_bytes()), "{text:?}");
                        text.as_bytes()
                    }
                    Line::Str(text) => text.as_bytes(),
                    Line::Text(bytes) => bytes,
                    Line::TooLong { len } => return out.push(format!("{n} too long: {len}")),
                };
                out.push(format!("{n} {bytes:?}"))
            },
            |_| {},
        );
        (out, summary)
    }

    /// A file holding `bytes` (in a directory removed when the guard is dropped).
    fn file_of(bytes: &[u8]) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lines");
        std::fs::write(&path, bytes).unwrap();
        (dir, path)
    }

    /// Lines of every kind: short, empty, CRLF, with tabs, not UTF-8, as long as `capacity`
    /// and longer, and a last line with or without its newline.
    fn inputs_of(capacity: usize) -> Vec<Vec<u8>> {
        let pieces: [&[u8]; 8] = [
            b"a b c\n",
            b"\n",
            b"crlf\r\n",
            b"tab\there\n",
            b"\xff\xfe\n",
            b"\xc3\xa9t\xc3\xa9\n",
            b"x",
            b"12345",
        ];
        let mut inputs = Vec::new();
        for seed in 0..200u64 {
            let mut input = Vec::new();
            let mut state = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            for _ in 0..(seed % 40) {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let pick = (state >> 33) as usize;
                match pick % 11 {
                    0..8 => input.extend_from_slice(pieces[pick % 8]),
                    // a line as long as the buffer, one shorter, one longer, several times longer
                    8 => input.extend(std::iter::repeat_n(b'L', capacity - 1 + pick % 3)),
                    9 => input.extend(std::iter::repeat_n(b'M', capacity * (2 + pick % 3))),
                    _ => input.push(b'\n'),
                }
            }
            inputs.push(input);
        }
        inputs
    }

    #[test]
    fn a_mapped_file_gives_the_lines_its_reader_gives() {
        for capacity in [16, 64, 1000] {
            for input in inputs_of(capacity) {
                let (_dir, path) = file_of(&input);
                let file = std::fs::File::open(&path).unwrap();
                let Some(mapped) = crate::ingest::mapped::small_map(&file) else {
                    assert!(input.is_empty());
                    continue;
                };
                for (utf8, blanks) in [(false, false), (true, false), (true, true)] {
                    let make = || {
                        let mut r = LineReader::with_capacity(
                            std::fs::File::open(&path).unwrap(),
                            capacity,
                        );
                        if utf8 {
                            r = r.utf8();
                        }
                        if blanks {
                            r = r.blanks();
                        }
                        r
                    };
                    let file = std::fs::File::open(&path).unwrap();
                    let (read, read_summary) = said(make());
                    let (mapped_lines, mapped_summary) =
                        said(make().mapped(crate::ingest::mapped::small_map(&file)));
                    let context = format!("capacity {capacity}, {utf8} {blanks}: {input:?}");
                    assert_eq!(mapped_lines, read, "{context}");
                    assert_eq!(mapped_summary.unwrap(), read_summary.unwrap(), "{context}");
                }
                drop(mapped);
            }
        }
    }

    #[test]
    fn what_is_written_after_the_map_is_read_after_it_as_one_file() {
        for (before, after) in [
            (&b"one\ntw"[..], &b"o\nthree\n"[..]),
            (b"one\n", b"two"),
            (b"LLLLLLLLLLLLLLLLLLLLLLLL", b"LLLL\nnext\n"),
            (b"a\nLLLLLLLLLLLLLLLLLLLL", b"LL\n"),
            (b"a\n", b""),
        ] {
            let (_dir, path) = file_of(before);
            let file = std::fs::File::open(&path).unwrap();
            let mapped = crate::ingest::mapped::small_map(&file);
            crate::ingest::mapped::append_to(&path, after);
            let whole = [before, after].concat();
            let expected = said(LineReader::with_capacity(&whole[..], 16).utf8());
            let got = said(
                LineReader::with_capacity(io::empty(), 16)
                    .utf8()
                    .mapped(mapped),
            );
            assert_eq!(got.0, expected.0, "{before:?} + {after:?}");
            assert_eq!(got.1.unwrap(), expected.1.unwrap());
        }
    }

    #[test]
    fn a_file_truncated_while_its_lines_are_read_in_place_is_an_error() {
        let line = b"a line of the file\n";
        let bytes: Vec<u8> = line.iter().copied().cycle().take(1 << 22).collect();
        let (_dir, path) = file_of(&bytes);
        let file = std::fs::File::open(&path).unwrap();
        let mapped = crate::ingest::mapped::small_map(&file);
        let mut first = true;
        let result = LineReader::new(io::empty()).mapped(mapped).for_each_line(
            |_, _| {
                if std::mem::take(&mut first) {
                    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
                    f.set_len(4096).unwrap();
                }
            },
            |_| {},
        );
        let error = result.unwrap_err().to_string();
        assert!(error.contains("shrank while it was read"), "{error}");
    }

    #[test]
    fn a_file_cut_inside_its_last_page_while_mapped_is_an_error_too() {
        // no page past the new end is read (no SIGBUS): the size says it
        let bytes: Vec<u8> = b"a line\n"
            .iter()
            .copied()
            .cycle()
            .take((2 << 20) + 100)
            .collect();
        let (_dir, path) = file_of(&bytes);
        let file = std::fs::File::open(&path).unwrap();
        let mapped = crate::ingest::mapped::small_map(&file);
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(bytes.len() as u64 - 60).unwrap();
        let error = LineReader::new(io::empty())
            .mapped(mapped)
            .for_each_line(|_, _| {}, |_| {});
        let error = error.unwrap_err().to_string();
        assert!(error.contains("the file shrank"), "{error}");
    }

    #[test]
    fn lines_are_split_across_chunk_boundaries() {
        let (lines, summary) = lines_of(b"alpha\nbeta\r\ngamma\n", 16);
        assert_eq!(lines, ["1:alpha", "2:beta", "3:gamma"]);
        assert_eq!(summary.bytes, 18);
        assert!(!summary.unterminated_last_line);
    }

    #[test]
    fn a_last_line_without_newline_is_delivered_and_flagged() {
        let (lines, summary) = lines_of(b"one\ntw", 16);
        assert_eq!(lines, ["1:one", "2:tw"]);
        assert!(summary.unterminated_last_line);
    }

    #[test]
    fn a_line_longer_than_the_buffer_is_skipped_with_its_length() {
        let mut input = b"short\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', 100));
        input.extend(b"\nafter\n");
        let (lines, _) = lines_of(&input, 16);
        assert_eq!(lines, ["1:short", "2:<too long: 100>", "3:after"]);
    }

    #[test]
    fn an_empty_input_has_no_lines() {
        let (lines, summary) = lines_of(b"", 16);
        assert!(lines.is_empty());
        assert_eq!(summary, ReadSummary::default());
    }

    #[test]
    fn a_raised_cancel_flag_stops_the_read() {
        let cancel = Cancel::new();
        cancel.raise();
        let summary = LineReader::new(&b"a\nb\n"[..])
            .cancel_on(cancel)
            .for_each_line(|_, _| panic!("no line expected"), |_| {})
            .unwrap();
        assert!(summary.cancelled);
    }
}
