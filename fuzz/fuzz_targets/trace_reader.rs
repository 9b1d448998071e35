//! Any bytes through `latscope spans`' reader in every format (the first byte picks one, or
//! detection), with rules that use filters and two-sided keys, split by a field or (one rule,
//! which the parallel reader's workers pair) not: no panic, every sample is a span whose end is
//! not before its start, and the parallel reader (chunks of 1 to 64 bytes, 2 or 3 threads)
//! gives exactly what the serial one gives; and every line read as a JSON-lines row by its
//! shape (after the rows before it) says what it says read in place; and every babeltrace2
//! field found in a line when asked for is the field of the line read whole.
#![no_main]

use latscope::ingest::trace::babeltrace::Babeltrace;
use latscope::ingest::trace::shape::RowShapes;
use latscope::ingest::trace::table::{Columns, RowKeys, json_line_in_place};
use latscope::ingest::trace::{Event, Format};
use latscope::ingest::Stream;
use latscope::ingest::trace::read::{TraceError, TraceOptions, read};
use latscope::ingest::trace::rules::{Key, Pairer, Repeat, Rule, parse_span};
use latscope::span::{Aggregator, Outcome, SeriesKey, Slowest, SpanSink};
use libfuzzer_sys::fuzz_target;

/// Every sample and outcome, in order.
#[derive(Debug, Default, PartialEq)]
struct Record(Vec<(SeriesKey, Option<Outcome>, u64, u64)>);

impl SpanSink for Record {
    fn sample(&mut self, key: &SeriesKey, start_ns: u64, latency_ns: u64) {
        self.0.push((*key, None, start_ns, latency_ns));
    }

    fn outcome(&mut self, key: &SeriesKey, outcome: Outcome) {
        self.0.push((*key, Some(outcome), 0, 0));
    }
}

/// Rules (spec, key) that use filters and two-sided keys, split by `pid`; or, when `alone`,
/// one of them without `--by` (a worker of the parallel reader pairs such a rule itself), or
/// an event that ends one span and starts the next.
fn pairer(repeat: Repeat, alone: Option<usize>) -> Pairer {
    let all = [
        ("a=sched:sched_wakeup..sched:sched_switch", "pid=next_pid"),
        ("b=x:e:k^=R..'y z':id!='0:1'", "id"),
        ("s=sched:sched_switch..sched:sched_switch", "prev_pid=next_pid"),
    ];
    let chosen = match alone {
        Some(i) => &all[i % 3..i % 3 + 1],
        None => &all[..2],
    };
    let (mut rules, mut names) = (Vec::new(), Vec::new());
    for (i, (spec, key)) in chosen.iter().enumerate() {
        let (name, start, end) = parse_span(spec).unwrap();
        rules.push(Rule { span: i, start, end, key: Key::parse(key).unwrap() });
        names.push(name);
    }
    let by = alone.is_none().then(|| "pid".to_string());
    Pairer::new(rules, names, by, repeat)
}

/// Everything a read gives, as text.
fn run(data: &[u8], options: &TraceOptions, repeat: Repeat, alone: Option<usize>) -> String {
    let mut pairer = pairer(repeat, alone);
    let mut sink = (Record::default(), (Aggregator::new(Vec::new(), None), Slowest::new(3)));
    let result = read(Stream::of(data), "fuzz", options, &mut pairer, &mut sink, |_| {});
    pairer.finish(&mut sink);
    let _ = sink.1.1.sorted();
    let sink = sink.0;
    // an error's counts, with `--strict`'s bytes left out (those read: more with read-ahead)
    let result = result.map_err(|failed| {
        let strict = matches!(failed.error, TraceError::Malformed { .. });
        let read = failed.read.map(|mut read| {
            if strict {
                read.bytes = 0;
            }
            read
        });
        (failed.error.to_string(), read)
    });
    format!(
        "{result:?}\n{:?}\n{:?}\n{:?}\n{:?}",
        sink.0,
        pairer.diagnose(),
        pairer.missing_key,
        pairer.labels().borrow()
    )
}

/// What a row read into `ev` says, ranges and all.
fn said(parsed: Option<latscope::ingest::trace::Parsed>, ev: &Event) -> String {
    match parsed {
        // the general reader's: what `ev` holds then is not read
        None => "None".to_string(),
        Some(p) => format!("{p:?} {} {:?} {:?}", ev.ts_ns, ev.name, ev.fields),
    }
}

/// Every line through the shapes learnt from the lines before it, against the in-place reader.
fn shapes_agree(data: &[u8]) {
    let columns = Columns::default();
    let wanted = ["id".to_string(), "pid".to_string()];
    let keys = RowKeys::new(&columns, &wanted);
    let mut shapes = RowShapes::default();
    for line in data.split(|&b| b == b'\n').filter_map(|l| std::str::from_utf8(l).ok()) {
        let mut ev = Event::default();
        let alone = json_line_in_place(line, &columns, &keys, &mut ev);
        let alone = said(alone, &ev);
        let mut ev = Event::default();
        let shaped = shapes.read(line, &columns, &keys, &mut ev);
        assert_eq!(said(shaped, &ev), alone, "{line:?}");
        if shaped.is_some() {
            // a field at the place the reader noted is the field found by its name
            for (j, name) in wanted.iter().enumerate() {
                assert_eq!(ev.field_at(line, j, name), ev.field(line, name), "{name} of {line:?}");
            }
        }
    }
}

/// Every line read whole, left to be read when asked, and read by the shapes of the lines
/// before it (twice: the second read goes by the shape the first learnt), for names of the
/// line and others.
fn groups_agree(data: &[u8]) {
    let mut shaped_reader = Babeltrace::default();
    for line in data.split(|&b| b == b'\n').filter_map(|l| std::str::from_utf8(l).ok()) {
        let (mut whole, mut lazy, mut shaped) = (Event::default(), Event::default(), Event::default());
        let parsed = Babeltrace::default().parse(line, &mut whole);
        assert_eq!(Babeltrace::default().parse_lazy(line, &mut lazy), parsed, "{line:?}");
        let words: Vec<&str> = line
            .split([' ', '{', ',', '='])
            .filter(|w| !w.is_empty() && w.len() < 12)
            .take(16)
            .collect();
        for name in ["a", "vtid", "", "a b"].into_iter().chain(words.iter().copied()) {
            assert_eq!(lazy.field(line, name), whole.field(line, name), "{name:?} of {line:?}");
        }
        let names: Vec<String> =
            ["a", "vtid", "", "a b"].into_iter().chain(words.iter().copied()).map(String::from).collect();
        for _ in 0..2 {
            assert_eq!(shaped_reader.parse_shaped(line, &mut shaped, &names), parsed, "{line:?}");
            for (j, name) in names.iter().enumerate() {
                let want = whole.field(line, name);
                assert_eq!(shaped.field(line, name), want, "{name:?} of {line:?}");
                assert_eq!(shaped.field_at(line, j, name), want, "{name:?} at {j} of {line:?}");
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    shapes_agree(data);
    groups_agree(data);
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let format = match pick % 10 {
        n @ 0..=7 => Some(Format::ALL[n as usize]),
        _ => None,
    };
    let repeat = if pick & 16 == 0 { Repeat::KeepLast } else { Repeat::KeepFirst };
    let strict = pick & 32 != 0;
    let alone = (pick & 64 != 0).then_some(usize::from(pick % 10) + rest.len());
    let serial = TraceOptions { format, strict, threads: 1, ..Default::default() };
    let one = run(rest, &serial, repeat, alone);
    let parallel = TraceOptions {
        threads: 2 + usize::from(pick >> 7),
        chunk_bytes: 1 + rest.len() % 64,
        ..serial
    };
    assert_eq!(one, run(rest, &parallel, repeat, alone), "serial and parallel reads differ");
});
