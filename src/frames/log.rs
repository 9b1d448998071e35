//! One side's WAYLAND_DEBUG log as the join needs it: every protocol message, in the log's
//! order, with its stamp on one absolute microsecond scale.
//!
//! The span readers ([`crate::ingest::wayland`]) keep only what is open; a join has to look
//! back and forth between two logs, so here each message is a small record and its text (what
//! the join compares, and what a message names when it is not found). [`read`] keeps a whole
//! log's (for tests and small logs); [`read_batches`] hands them on as they are read, for the
//! join to keep only the window it looks at ([`super::both`]).

use std::io::Read;

use rustc_hash::FxHasher;

use crate::ingest::drive::{Drive, LineFormat, drive};
use crate::ingest::lines::Line;
use crate::ingest::source::Stream;
use crate::ingest::wayland::line::{self, Stamp};
use crate::ingest::{Cancel, Location};

/// A stamp's dialect: libwayland ≤ 1.25 prints realtime microseconds modulo 2^32, 1.26 the UTC
/// time of day in microseconds. Both come from `CLOCK_REALTIME`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Dialect {
    /// `[ms.µs]`: microseconds modulo 2^32
    Micros32,
    /// `[HH:MM:SS.µµµµµµ]`: microseconds since midnight
    TimeOfDay,
}

impl Dialect {
    /// The period its stamps wrap at, in microseconds.
    pub fn period_us(self) -> i64 {
        match self {
            Dialect::Micros32 => 1 << 32,
            Dialect::TimeOfDay => 86_400 * 1_000_000,
        }
    }

    fn of(stamp: Stamp) -> (Dialect, i64) {
        match stamp {
            Stamp::Micros32(us) => (Dialect::Micros32, i64::from(us)),
            Stamp::TimeOfDay(us) => (Dialect::TimeOfDay, us as i64),
        }
    }

    /// Its name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Micros32 => "[ms.µs] stamps (libwayland ≤ 1.25)",
            Dialect::TimeOfDay => "[HH:MM:SS.µs] stamps (libwayland ≥ 1.26)",
        }
    }
}

/// One protocol message of a log.
#[derive(Debug, Clone)]
pub struct Msg {
    /// its line (from 1)
    pub line: u64,
    /// its stamp, unwrapped: microseconds on the log's scale ([`Log::shift`] moves a whole log)
    pub at_us: i64,
    /// printed with ` -> `: sent by the process that printed the log
    pub sent: bool,
    /// the order it is dispatched in on the receiving side: `wl_display`'s events go through
    /// the display queue, ahead of other queues' events sent before them
    pub queue: Queue,
    /// a hash of [`Msg::text`], to find it fast on the other side
    pub key: u64,
    /// `iface@id.name(args)`, as printed (ids with `@`)
    pub text: Box<str>,
    /// where the name begins in `text`, and where the arguments begin
    name_at: u16,
    args_at: u16,
}

/// Which of a connection's queues a message goes through, where it matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Queue {
    /// `wl_display` events (dispatched by libwayland on the display queue)
    Display,
    /// every other message
    Default,
}

impl Msg {
    /// The interface, e.g. `wl_surface`.
    pub fn interface(&self) -> &str {
        let at = self.text.find('@').unwrap_or(0);
        &self.text[..at]
    }

    /// The object's id.
    pub fn id(&self) -> u32 {
        let at = self.text.find('@').map_or(0, |a| a + 1);
        let end = usize::from(self.name_at) - 1;
        self.text[at..end].parse().unwrap_or(0)
    }

    /// The message's name, e.g. `commit`.
    pub fn name(&self) -> &str {
        &self.text[usize::from(self.name_at)..usize::from(self.args_at) - 1]
    }

    /// The argument text.
    pub fn args(&self) -> &str {
        let end = self.text.len() - 1;
        &self.text[usize::from(self.args_at)..end]
    }
}

/// A log read: its messages, and what was not one.
#[derive(Debug, Clone)]
pub struct Log {
    /// its name in messages
    pub file: String,
    /// its messages, in order
    pub messages: Vec<Msg>,
    /// its stamps' dialect (`None`: no message)
    pub dialect: Option<Dialect>,
    /// lines read
    pub lines: u64,
    /// bytes read
    pub bytes: u64,
    /// lines that looked like protocol messages and broke the grammar
    pub malformed: u64,
    /// stamps that went back (kept where they are: the join sees the order of the log)
    pub backwards: u64,
    /// the first line stamped in the other dialect than the first message's
    pub mixed: Option<Location>,
    /// Ctrl-C stopped the read
    pub interrupted: bool,
}

impl Log {
    /// Moves every stamp by `us` (the other log's scale: a whole number of wrap periods).
    pub fn shift(&mut self, us: i64) {
        for m in &mut self.messages {
            m.at_us += us;
        }
    }

    /// Where message `i` is, for messages.
    pub fn location(&self, i: usize) -> Location {
        Location {
            file: self.file.clone(),
            line: self.messages[i].line,
        }
    }
}

/// A log could not be read.
#[derive(Debug, thiserror::Error)]
#[error("error reading '{file}': {source}")]
pub struct ReadError {
    /// the input
    pub file: String,
    /// the OS error
    pub source: std::io::Error,
}

/// Reads the log `input`, named `file` in messages.
pub fn read(
    input: Stream<impl Read + Send>,
    file: &str,
    cancel: Option<&Cancel>,
) -> Result<Log, ReadError> {
    let mut messages = Vec::new();
    let mut log = read_batches(input, file, cancel, |_, batch| {
        messages.extend(batch);
        true
    })?;
    log.messages = messages;
    Ok(log)
}

/// Messages handed on at once by [`read_batches`].
pub const BATCH: usize = 4_096;

/// Reads the log `input` as [`read`] does, handing its messages to `batch` a few thousand at a
/// time (with the log's dialect, known from its first message) instead of keeping them, so
/// that a reader on another thread holds only what it has not yet handed on. `batch` says
/// whether to go on: `false` stops the read. The log returned has no messages.
pub fn read_batches(
    input: Stream<impl Read + Send>,
    file: &str,
    cancel: Option<&Cancel>,
    batch: impl FnMut(Option<Dialect>, Vec<Msg>) -> bool,
) -> Result<Log, ReadError> {
    let mut reader = Reader {
        log: Log {
            file: file.to_string(),
            messages: Vec::new(),
            dialect: None,
            lines: 0,
            bytes: 0,
            malformed: 0,
            backwards: 0,
            mixed: None,
            interrupted: false,
        },
        scratch: Vec::new(),
        last: None,
        now: 0,
        batch,
        stopped: false,
    };
    let how = Drive {
        cancel,
        ..Drive::default()
    };
    let summary = drive(input, &how, &mut reader, &mut (), |_| {}).map_err(|e| ReadError {
        file: file.to_string(),
        source: e.error,
    })?;
    reader.hand_on();
    let mut log = reader.log;
    log.lines = summary.lines;
    log.bytes = summary.bytes;
    log.interrupted = summary.cancelled;
    Ok(log)
}

/// The log being read, and its clock.
struct Reader<B> {
    log: Log,
    scratch: Vec<u8>,
    /// the last raw stamp
    last: Option<i64>,
    /// the unwrapped stamp of the last message
    now: i64,
    /// where the messages go
    batch: B,
    /// the messages' taker wants no more
    stopped: bool,
}

impl<B: FnMut(Option<Dialect>, Vec<Msg>) -> bool> Reader<B> {
    /// Hands on the messages read and not yet handed on.
    fn hand_on(&mut self) {
        if !self.stopped && !self.log.messages.is_empty() {
            let messages = std::mem::take(&mut self.log.messages);
            self.stopped = !(self.batch)(self.log.dialect, messages);
        }
    }
}

impl<B: FnMut(Option<Dialect>, Vec<Msg>) -> bool> LineFormat<()> for Reader<B> {
    fn line(&mut self, number: u64, line: Line<'_>, _: &mut ()) {
        let text = match line {
            Line::Text(t) => t,
            Line::Str(t) | Line::Plain(t) => t.as_bytes(),
            Line::TooLong { .. } => return,
        };
        let mut scratch = std::mem::take(&mut self.scratch);
        match line::parse_line(text, &mut scratch) {
            line::Parsed::Message(msg) => self.message(number, &msg),
            line::Parsed::Malformed(_) => self.log.malformed += 1,
            line::Parsed::Zombie(_) | line::Parsed::Other => {}
        }
        self.scratch = scratch;
        if self.log.messages.len() >= BATCH {
            self.hand_on();
        }
    }

    fn done(&self) -> bool {
        self.stopped
    }
}

impl<B> Reader<B> {
    fn message(&mut self, number: u64, msg: &line::Message<'_>) {
        let (dialect, raw) = Dialect::of(msg.stamp);
        match self.log.dialect {
            None => self.log.dialect = Some(dialect),
            Some(d) if d != dialect => {
                self.log.mixed.get_or_insert(Location {
                    file: self.log.file.clone(),
                    line: number,
                });
                return;
            }
            Some(_) => {}
        }
        let at_us = self.unwrap(raw, dialect.period_us());
        let text = message_text(msg);
        let name_at = msg.interface.len() + 1 + digits(msg.id) + 1;
        let args_at = name_at + msg.name.len() + 1;
        let (Ok(name_at), Ok(args_at)) = (u16::try_from(name_at), u16::try_from(args_at)) else {
            self.log.malformed += 1;
            return;
        };
        let queue = match (msg.sent, msg.interface) {
            (_, b"wl_display") => Queue::Display,
            _ => Queue::Default,
        };
        self.log.messages.push(Msg {
            line: number,
            at_us,
            sent: msg.sent,
            queue,
            key: key_of(&text),
            text: text.into_boxed_str(),
            name_at,
            args_at,
        });
    }

    /// The raw stamp `raw` on the log's unwrapped scale: the shortest step from the last one,
    /// modulo the period (a line printed late across a wrap steps back a little).
    fn unwrap(&mut self, raw: i64, period: i64) -> i64 {
        let Some(last) = self.last.replace(raw) else {
            self.now = raw;
            return raw;
        };
        let mut step = (raw - last).rem_euclid(period);
        if step > period / 2 {
            step -= period;
        }
        if step < 0 {
            self.log.backwards += 1;
        }
        self.now += step;
        self.now
    }
}

/// `iface@id.name(args)` as both sides print it alike: `#` ids (libwayland 1.26's
/// `wl_surface#3`) printed as `@`, and file descriptors as `fd` alone (each process numbers its
/// own: the client's `fd 5` is the compositor's `fd 21`).
fn message_text(msg: &line::Message<'_>) -> String {
    let mut text =
        String::with_capacity(msg.interface.len() + msg.name.len() + msg.args.len() + 16);
    text.push_str(&String::from_utf8_lossy(msg.interface));
    text.push('@');
    text.push_str(&msg.id.to_string());
    text.push('.');
    text.push_str(&String::from_utf8_lossy(msg.name));
    text.push('(');
    let args = String::from_utf8_lossy(msg.args);
    for (k, arg) in split_args(&args).enumerate() {
        if k > 0 {
            text.push_str(", ");
        }
        match arg.strip_prefix("fd ") {
            Some(n) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
                text.push_str("fd")
            }
            _ => text.push_str(&at_ids(arg)),
        }
    }
    text.push(')');
    text
}

/// `args` with the `#` of object references (`wl_buffer#44`) written `@`; strings untouched.
fn at_ids(args: &str) -> std::borrow::Cow<'_, str> {
    if !args.contains('#') {
        return args.into();
    }
    let mut out = String::with_capacity(args.len());
    let mut quoted = false;
    let mut prev: Option<char> = None;
    let mut chars = args.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '"' {
            quoted = !quoted;
        }
        let reference = !quoted
            && c == '#'
            && prev.is_some_and(|p| p.is_ascii_alphanumeric() || p == '_' || p == ']')
            && chars.peek().is_some_and(char::is_ascii_digit);
        out.push(if reference { '@' } else { c });
        prev = Some(c);
    }
    out.into()
}

/// The arguments, split at `, ` outside double quotes.
fn split_args(args: &str) -> impl Iterator<Item = &str> {
    crate::ingest::wayland::args::split(args.as_bytes())
        .map(|a| std::str::from_utf8(a).unwrap_or_default())
}

fn digits(id: u32) -> usize {
    id.checked_ilog10().map_or(1, |d| d as usize + 1)
}

fn key_of(text: &str) -> u64 {
    use std::hash::Hasher;
    let mut h = FxHasher::default();
    h.write(text.as_bytes());
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log_of(text: &'static str) -> Log {
        read(Stream::of(text.as_bytes()), "t.log", None).unwrap()
    }

    #[test]
    fn messages_keep_their_line_side_queue_and_text() {
        let log = log_of(
            "[1000.000]  -> wl_surface@3.commit()\nnot wayland\n[1000.250] wl_display@1.delete_id(7)\n[1000.500] wl_callback#7.done(12)\n",
        );
        let m = &log.messages;
        assert_eq!(m.len(), 3);
        assert_eq!((m[0].line, m[0].sent, m[0].at_us), (1, true, 1_000_000));
        assert_eq!(&*m[0].text, "wl_surface@3.commit()");
        assert_eq!(
            (m[0].interface(), m[0].id(), m[0].name(), m[0].args()),
            ("wl_surface", 3, "commit", "")
        );
        assert_eq!(
            (m[1].line, m[1].queue, m[1].at_us),
            (3, Queue::Display, 1_000_250)
        );
        assert_eq!(&*m[2].text, "wl_callback@7.done(12)");
        assert_eq!((m[2].name(), m[2].args(), m[2].id()), ("done", "12", 7));
        assert_eq!(m[2].queue, Queue::Default);
        assert_eq!(log.lines, 4);
        assert_eq!(log.dialect, Some(Dialect::Micros32));
    }

    #[test]
    fn a_stamp_after_the_wrap_goes_on_from_the_one_before() {
        // 4294967.000 ms is 2^32 µs less 296 µs: the next stamp, 4 µs after the wrap
        let log = log_of("[4294967.000] wl_a@1.b()\n[      0.004] wl_a@1.b()\n");
        assert_eq!(log.messages[1].at_us - log.messages[0].at_us, 300);
    }

    #[test]
    fn a_stamp_that_goes_back_is_counted_and_kept_in_place() {
        let log = log_of("[10.000] wl_a@1.b()\n[9.990] wl_a@1.c()\n");
        assert_eq!(log.backwards, 1);
        assert_eq!(log.messages[1].at_us, 9_990);
    }

    #[test]
    fn hash_ids_and_at_ids_give_the_same_text_but_strings_keep_theirs() {
        let log = log_of(
            "[1.000] wl_surface#3.attach(wl_buffer#44, 0, 0)\n[1.000] xdg_toplevel@9.set_title(\"a#1\")\n",
        );
        assert_eq!(
            &*log.messages[0].text,
            "wl_surface@3.attach(wl_buffer@44, 0, 0)"
        );
        assert_eq!(&*log.messages[1].text, "xdg_toplevel@9.set_title(\"a#1\")");
    }

    #[test]
    fn file_descriptors_compare_alike_whatever_their_number() {
        let log = log_of("[1.000] wl_shm@6.create_pool(new id wl_shm_pool@11, fd 5, 15000000)\n");
        assert_eq!(
            &*log.messages[0].text,
            "wl_shm@6.create_pool(new id wl_shm_pool@11, fd, 15000000)"
        );
    }

    #[test]
    fn a_line_of_the_other_dialect_is_named_and_left_out() {
        let log = log_of("[1.000] wl_a@1.b()\n[12:00:00.000001] wl_a@1.b()\n");
        assert_eq!(log.messages.len(), 1);
        assert_eq!(log.mixed.as_ref().map(|l| l.line), Some(2));
    }
}
