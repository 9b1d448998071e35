//! A compositor's own trace of a run, read as `latscope frames`' third input: weston's
//! `timeline` log scope ([`super::timeline`]) or Mir's LTTng trace as babeltrace2 prints it
//! ([`super::mir`]). The two are told apart by their lines (JSON objects, babeltrace2's
//! `[stamp] host provider:event: { ... }`), so the user names no format, and one reading loop
//! serves both.

use std::io::Read;

use super::{FramesError, log, mir, timeline};
use crate::ingest::Cancel;
use crate::ingest::drive::{Drive, LineFormat, drive};
use crate::ingest::lines::Line;
use crate::ingest::source::Stream;

/// The compositor's own trace of a run, whichever compositor wrote it.
#[derive(Debug, Clone)]
pub enum CompositorTrace {
    /// weston's `timeline` log scope
    Weston(timeline::Timeline),
    /// Mir's LTTng trace, as babeltrace2 prints it
    Mir(mir::Trace),
}

/// Reads a compositor's trace `input`, named `file` in messages: weston's timeline, or else
/// Mir's LTTng trace; an error where it holds neither.
pub fn read(
    input: Stream<impl Read + Send>,
    file: &str,
    cancel: Option<&Cancel>,
) -> Result<CompositorTrace, FramesError> {
    let mut either = Either {
        weston: timeline::Timeline {
            file: file.to_string(),
            ..timeline::Timeline::default()
        },
        mir: mir::Reading::new(file),
        mir_lines: 0,
    };
    let how = Drive {
        cancel,
        ..Drive::default()
    };
    drive(input, &how, &mut either, &mut (), |_| {}).map_err(|e| log::ReadError {
        file: file.to_string(),
        source: e.error,
    })?;
    match (either.weston.events.is_empty(), either.mir_lines) {
        (false, _) => Ok(CompositorTrace::Weston(either.weston)),
        (true, 0) => Err(FramesError::NoCompositorEvents {
            file: file.to_string(),
        }),
        (true, _) => Ok(CompositorTrace::Mir(either.mir.trace)),
    }
}

/// Both compositors' traces read from one input, each line by the one whose line it is.
struct Either {
    weston: timeline::Timeline,
    mir: mir::Reading,
    /// Mir's events read (or malformed)
    mir_lines: u64,
}

impl LineFormat<()> for Either {
    fn line(&mut self, _: u64, line: Line<'_>, _: &mut ()) {
        let bytes = match line {
            Line::Text(t) => t,
            Line::Str(t) | Line::Plain(t) => t.as_bytes(),
            Line::TooLong { .. } => return,
        };
        if bytes.starts_with(b"{") {
            self.weston.line(bytes);
        } else if (bytes.starts_with(b"[") || bytes.starts_with(b"timestamp = "))
            && let Ok(text) = std::str::from_utf8(bytes)
            && self.mir.text(text)
        {
            self.mir_lines += 1;
        }
    }

    fn done(&self) -> bool {
        false
    }
}
