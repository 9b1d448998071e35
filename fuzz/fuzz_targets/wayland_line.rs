//! One WAYLAND_DEBUG line: the parser and the argument readers must never panic, and the
//! short readers (the usual layout's message, a known message's meaning read from its line,
//! the arguments) must give what the general ones give whenever they give anything.
#![no_main]

use latscope::ingest::wayland::{args, line, spans::Meaning};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut scratch = Vec::new();
    if let Some(msg) = line::usual(data) {
        assert_eq!(line::parse_plain(data), line::Parsed::Message(msg));
    }
    if let Some(head) = line::usual_head(data)
        && let Some(meaning) = Meaning::of_usual(&data[head.body..], head.sent)
    {
        match line::parse_plain(data) {
            line::Parsed::Message(msg) => {
                assert_eq!((msg.stamp, Meaning::of(&msg)), (head.stamp, meaning))
            }
            other => panic!("read as {meaning:?}, parsed as {other:?}"),
        }
    }
    let object_id = |arg: Option<&[u8]>| match arg.and_then(args::object) {
        Some(args::ObjectArg::Object { id, .. }) => Some(id),
        _ => None,
    };
    if let Some(id) = args::first_plain_object(data) {
        assert_eq!(object_id(args::nth(data, 0)), Some(id));
    }
    let finder = args::NewIdFinder::new();
    if let Some(id) = args::lone_new_id(data) {
        assert_eq!(object_id(args::nth(data, 0)), Some(id));
        let mut created = Vec::new();
        args::for_each_new_id(data, &finder, |_, id| created.push(id));
        assert_eq!(created, [id]);
    }
    if let line::Parsed::Message(msg) = line::parse_line(data, &mut scratch) {
        args::for_each_new_id(msg.args, &finder, |_, _| {});
        for arg in args::split(msg.args) {
            let _ = args::object(arg);
            let _ = args::number(arg);
        }
    }
});
