//! Any bytes through `latscope spans`' reader in every format (the first byte picks one, or
//! detection), with rules that use filters and two-sided keys: no panic, and every sample is
//! a span whose end is not before its start.
#![no_main]

use latscope::ingest::trace::read::{TraceOptions, read};
use latscope::ingest::trace::rules::{Key, Pairer, Repeat, Rule, parse_span};
use latscope::ingest::trace::Format;
use latscope::span::{Aggregator, Slowest};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let format = match pick % 10 {
        n @ 0..=7 => Some(Format::ALL[n as usize]),
        _ => None,
    };
    let mut rules = Vec::new();
    for (i, spec) in ["a=sched:sched_wakeup..sched:sched_switch", "b=x:e:k^=R..'y z':id!='0:1'"].iter().enumerate() {
        let (_, start, end) = parse_span(spec).unwrap();
        let key = Key::parse(if i == 0 { "pid=next_pid" } else { "id" }).unwrap();
        rules.push(Rule { span: i, start, end, key });
    }
    let repeat = if pick & 16 == 0 { Repeat::KeepLast } else { Repeat::KeepFirst };
    let mut pairer = Pairer::new(rules, vec!["a".into(), "b".into()], Some("pid".into()), repeat);
    let mut sink = (Aggregator::new(Vec::new(), None), Slowest::new(3));
    let options = TraceOptions { format, ..Default::default() };
    let _ = read(rest, "fuzz", &options, &mut pairer, &mut sink, |_| {});
    pairer.finish(&mut sink);
    let _ = sink.1.sorted();
});
