//! Any bytes as a file read in place ([`Mapped`]) and read through a buffer: the same lines
//! (each line's bytes, or its length when too long for a buffer of 16 to 71 bytes) and the
//! same summary; and a WAYLAND_DEBUG read and a trace read of the map, on one thread and on
//! two or three (chunks of 1 to 64 bytes), give what a read of the bytes on one thread gives.
//! The map's readers get no bytes but the map's: the WAYLAND_DEBUG one an empty reader, the
//! trace one the file (which it reads only to tell the format, as the command does), so a
//! read that fell back to its reader would differ.
//!
//! The file is a memfd: a regular file that no path names, so the run leaves nothing behind.
#![no_main]

use std::fs::File;
use std::io::{Seek, Write};
use std::os::fd::FromRawFd;

use latscope::ingest::LineReader;
use latscope::ingest::lines::Line;
use latscope::ingest::mapped::Mapped;
use latscope::ingest::Stream;
use latscope::ingest::trace::read::{TraceOptions, read};
use latscope::ingest::trace::rules::{Key, Pairer, Repeat, Rule, parse_span};
use latscope::ingest::wayland::{self, ReadOptions};
use latscope::span::Aggregator;
use libfuzzer_sys::fuzz_target;

/// A memfd holding `data`, and its map (`None` for no bytes: nothing is mapped).
fn file_of(data: &[u8]) -> (File, Option<Mapped>) {
    // SAFETY: a name and flags; the fd returned is checked and owned by the File alone.
    let fd = unsafe { libc::memfd_create(c"latscope-fuzz".as_ptr(), libc::MFD_CLOEXEC) };
    assert!(fd >= 0, "memfd_create: {}", std::io::Error::last_os_error());
    // SAFETY: a fresh fd that nothing else owns
    let mut file = unsafe { File::from_raw_fd(fd) };
    file.write_all(data).unwrap();
    file.rewind().unwrap();
    // SAFETY: a private temporary file that nothing else writes.
    let mapped = unsafe { Mapped::at_least(&file, 1) };
    assert_eq!(
        mapped.is_some(),
        !data.is_empty(),
        "a memfd of {} bytes is mapped",
        data.len()
    );
    (file, mapped)
}

/// Every line's bytes (or its length, too long) and the summary. Whether a line comes as
/// text, UTF-8 or plain depends on the block it was read in, not on the line: not compared.
fn said(reader: LineReader<impl std::io::Read>) -> String {
    let mut out = String::new();
    let summary = reader.for_each_line(
        |n, line| {
            let bytes = match line {
                Line::Text(t) => t,
                Line::Str(t) | Line::Plain(t) => t.as_bytes(),
                Line::TooLong { len } => return out.push_str(&format!("{n}: <{len}>\n")),
            };
            out.push_str(&format!("{n}: {bytes:?}\n"));
        },
        |_| {},
    );
    format!("{out}{summary:?}")
}

fn lines_agree(data: &[u8], pick: u8) {
    let capacity = 16 + usize::from(pick % 56);
    let make = |reader| {
        let r = LineReader::with_capacity(reader, capacity);
        match pick >> 6 {
            0 => r,
            1 => r.utf8(),
            _ => r.utf8().blanks(),
        }
    };
    let (_file, mapped) = file_of(data);
    let read = said(make(data));
    let in_place = said(make(&[][..]).mapped(mapped));
    assert_eq!(in_place, read, "lines read in place differ");
}

/// `run` of the bytes read on one thread, against `run` of their file and map on one thread
/// and on two or three (`true`).
fn in_place_agrees(data: &[u8], what: &str, run: impl Fn(bool, Option<(&File, Mapped)>) -> String) {
    let read = run(false, None);
    for parallel in [false, true] {
        let (file, mapped) = file_of(data);
        assert_eq!(
            run(parallel, mapped.map(|m| (&file, m))),
            read,
            "{what} read in place differs (parallel: {parallel})"
        );
    }
}

fn wayland_agrees(data: &[u8], pick: u8) {
    let serial = ReadOptions {
        strict: pick & 1 != 0,
        ..Default::default()
    };
    let parallel = ReadOptions {
        threads: 2 + usize::from(pick & 2 != 0),
        chunk_bytes: 1 + data.len() % 64,
        ..serial.clone()
    };
    let names = wayland::SpanKind::result_names();
    in_place_agrees(data, "a WAYLAND_DEBUG log", |many, mapped| {
        let options = if many { &parallel } else { &serial };
        let mut sink = Aggregator::new(names.clone(), None);
        let result = match mapped {
            Some((_, map)) => {
                let input = Stream { mapped: Some(map), ..Stream::of(std::io::empty()) };
                wayland::analyze(input, "fuzz", 0, options, &mut sink, |_| {})
            }
            None => wayland::analyze(Stream::of(data), "fuzz", 0, options, &mut sink, |_| {}),
        }
        .map_err(|failed| failed.error);
        format!("{result:?}\n{sink:?}")
    });
}

fn pairer() -> Pairer {
    let (name, start, end) = parse_span("a=sched:sched_wakeup..sched:sched_switch").unwrap();
    let rule = Rule {
        span: 0,
        start,
        end,
        key: Key::parse("pid=next_pid").unwrap(),
    };
    Pairer::new(vec![rule], vec![name], None, Repeat::KeepLast)
}

fn trace_agrees(data: &[u8], pick: u8) {
    let serial = TraceOptions {
        strict: pick & 1 != 0,
        threads: 1,
        ..Default::default()
    };
    let parallel = TraceOptions {
        threads: 2 + usize::from(pick & 2 != 0),
        chunk_bytes: 1 + data.len() % 64,
        ..serial.clone()
    };
    in_place_agrees(data, "a trace", |many, mapped| {
        let options = if many { &parallel } else { &serial };
        let (mut pairer, mut sink) = (pairer(), Aggregator::new(Vec::new(), None));
        let result = match mapped {
            Some((file, map)) => read(
                Stream { mapped: Some(map), ..Stream::of(file) },
                "fuzz",
                options,
                &mut pairer,
                &mut sink,
                |_| {},
            )
            .map_err(|failed| failed.error),
            None => read(Stream::of(data), "fuzz", options, &mut pairer, &mut sink, |_| {})
                .map_err(|failed| failed.error),
        };
        pairer.finish(&mut sink);
        let result = result.map_err(|e| e.to_string());
        format!("{result:?}\n{:?}\n{:?}", sink.sorted(), pairer.diagnose())
    });
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    lines_agree(rest, pick);
    wayland_agrees(rest, pick);
    trace_agrees(rest, pick);
});
