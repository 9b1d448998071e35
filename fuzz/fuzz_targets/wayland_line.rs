//! One WAYLAND_DEBUG line: the parser and the argument readers must never panic.
#![no_main]

use latscope::ingest::wayland::{args, line};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut scratch = Vec::new();
    if let line::Parsed::Message(msg) = line::parse_line(data, &mut scratch) {
        let finder = args::NewIdFinder::new();
        args::for_each_new_id(msg.args, &finder, |_, _| {});
        for arg in args::split(msg.args) {
            let _ = args::object(arg);
            let _ = args::number(arg);
        }
    }
});

