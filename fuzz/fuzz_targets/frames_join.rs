//! `latscope frames` on two arbitrary logs: the input split at its first 0xff byte into a
//! client log and a server log (a lone log is both). Whatever they say, the join never panics
//! nor loops, and every frame's whole is the sum of its stages (the invariant the command
//! promises on every log).
#![no_main]

use latscope::frames::{Options, analyse, log};
use latscope::ingest::Stream;
use libfuzzer_sys::fuzz_target;

#[path = "frames_check.rs"]
mod frames_check;

fuzz_target!(|data: &[u8]| {
    let (client, server) = match data.iter().position(|&b| b == 0xff) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, data),
    };
    let read = |bytes: &[u8]| log::read(Stream::of(bytes), "fuzz", None).expect("bytes read");
    let options = Options { window_us: 1 + i64::from(data.first().copied().unwrap_or(0)) * 10_000 };
    let Ok(a) = analyse(read(client), read(server), options) else {
        return;
    };
    frames_check::check(&a);
});
