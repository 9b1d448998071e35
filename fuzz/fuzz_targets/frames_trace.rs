//! `latscope frames` with a compositor's own trace: the input split at its 0xff bytes into a
//! client log, a server log and the trace (weston's timeline or Mir's LTTng text, told apart
//! as the command does). Whatever they say, reading and linking never panic nor loop, and
//! every frame's whole is still the sum of its stages.
#![no_main]

use latscope::frames::{Options, analyse_with, log, read_compositor_trace};
use latscope::ingest::Stream;
use libfuzzer_sys::fuzz_target;

#[path = "frames_check.rs"]
mod frames_check;

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(3, |&b| b == 0xff);
    let client = parts.next().unwrap_or_default();
    let server = parts.next().unwrap_or(client);
    let trace = parts.next().unwrap_or(server);
    let read = |bytes: &[u8]| log::read(Stream::of(bytes), "fuzz", None).expect("bytes read");
    let Ok(t) = read_compositor_trace(Stream::of(trace), "trace", None) else {
        return;
    };
    let Ok(a) = analyse_with(read(client), read(server), Some(&t), Options::default()) else {
        return;
    };
    frames_check::check(&a);
});
