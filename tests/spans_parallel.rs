//! `latscope spans --threads N` gives the documents of `--threads 1`, bit for bit: on every
//! committed sample under tests/data (whatever it is: a trace, or a file the reader refuses),
//! and on generated traces made to cut the parallel reader's chunks at every awkward place
//! (lines longer than the read buffer, CRLF, invalid UTF-8, stamps going back, babeltrace2
//! clocks crossing midnight and mixing kinds of stamps, more than 4096 event names, a last
//! line without a newline, `--strict`). `latscope wayland --threads N` alike, on the committed
//! WAYLAND_DEBUG logs and on generated ones. And `--strict` stops reading at the first malformed
//! line, on either path.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use latscope::ingest::Stream;
use latscope::ingest::trace::read::{TraceOptions, read};
use latscope::ingest::trace::rules::{Key, Pairer, Repeat, Rule, parse_span};
use latscope::ingest::trace::table::Columns;
use latscope::span::{Outcome, SeriesKey, SpanSink};
use rand::{Rng, SeedableRng};

use crate::util::{self, latscope};

/// Every rule shape at once: two-sided keys, a filter, a multi-field key, `--by`, kept spans.
const RULES: &[&str] = &[
    "--span",
    "w=sched:sched_wakeup..sched:sched_switch",
    "--span",
    "p=sched:sched_switch:prev_state^=R..sched:sched_switch",
    "--span",
    "c=lttng_ust_cyg_profile:func_entry..lttng_ust_cyg_profile:func_exit",
    "--span",
    "r=request_start..request_done",
    "--key",
    "pid=next_pid",
    "--key",
    "prev_pid=next_pid",
    "--key",
    "addr,vtid",
    "--key",
    "id",
    "--by",
    "comm",
    "--max-spans",
    "200",
    "--slowest",
    "3",
];

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// Exit status, standard output and standard error of `latscope COMMAND ARGS EXTRA`.
fn outcome(
    command: &str,
    args: &[&str],
    extra: &[&str],
    stdin: Option<&Path>,
) -> (Option<i32>, String, String) {
    let mut cmd = latscope();
    cmd.arg(command).args(args).args(extra);
    if let Some(p) = stdin {
        cmd.stdin(Stdio::from(std::fs::File::open(p).unwrap()));
    }
    let out = cmd.output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `out` without the bytes read in its document when it is `--strict`'s error: its counts run
/// to the malformed line whatever the threads, but its bytes are those read, which each
/// reader's read-ahead makes more.
fn bytes_read_unsaid(
    strict: bool,
    mut out: (Option<i32>, String, String),
) -> (Option<i32>, String, String) {
    if !strict || out.0 != Some(1) {
        return out;
    }
    if let Ok(mut doc) = serde_json::from_str::<serde_json::Value>(&out.1)
        && let Some(input) = doc.get_mut("input")
    {
        input["bytes"] = "read".into();
        out.1 = doc.to_string();
    }
    out
}

#[test]
fn parallel_documents_equal_serial_ones_on_every_committed_sample() {
    let mut all = Vec::new();
    files(&util::root().join("tests/data"), &mut all);
    all.sort();
    assert!(all.len() > 30, "{all:?}");
    let mut compared = 0;
    for path in &all {
        let p = path.to_str().unwrap();
        for (format, strict) in [("json", false), ("json", true), ("csv", false)] {
            let mut args = vec!["-f", format, p];
            args.extend_from_slice(RULES);
            if strict {
                args.push("--strict");
            }
            let serial = outcome("spans", &args, &["--threads", "1"], None);
            let serial = bytes_read_unsaid(strict, serial);
            for (threads, chunk) in [("2", "1"), ("3", "97"), ("2", "4096"), ("4", "0")] {
                let parallel = bytes_read_unsaid(
                    strict,
                    outcome(
                        "spans",
                        &args,
                        &["--threads", threads, "--chunk-bytes", chunk],
                        None,
                    ),
                );
                assert_eq!(
                    serial, parallel,
                    "{p} {format} strict={strict} {threads}/{chunk}"
                );
                compared += 1;
            }
        }
        // Standard input, in blocks.
        let mut args = vec!["-f", "json", "-"];
        args.extend_from_slice(RULES);
        let serial = outcome("spans", &args, &["--threads", "1"], Some(path));
        let parallel = outcome(
            "spans",
            &args,
            &["--threads", "2", "--chunk-bytes", "513"],
            Some(path),
        );
        assert_eq!(serial, parallel, "{p} from standard input");
    }
    assert!(compared > 300);
}

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

fn pairer(specs: &[(&str, &str)], by: Option<&str>) -> Pairer {
    let mut names = Vec::new();
    let rules = specs
        .iter()
        .map(|(spec, key)| {
            let (name, start, end) = parse_span(spec).unwrap();
            names.push(name);
            Rule {
                span: names.len() - 1,
                start,
                end,
                key: Key::parse(key).unwrap(),
            }
        })
        .collect();
    Pairer::new(rules, names, by.map(str::to_string), Repeat::KeepLast).with_max_series(40)
}

/// Everything a read gives: its statistics or error, every sample and outcome, the pairer's
/// diagnosis, missing keys and labels.
fn read_all(text: &[u8], options: &TraceOptions, mut pairer: Pairer) -> String {
    let mut sink = Record::default();
    let result = read(
        Stream::of(text),
        "gen",
        options,
        &mut pairer,
        &mut sink,
        |_| {},
    );
    pairer.finish(&mut sink);
    let mut out = String::new();
    match result {
        Ok(stats) => writeln!(out, "{stats:?}").unwrap(),
        Err(failed) => {
            // its counts, but for `--strict`'s bytes (those read: more with read-ahead)
            let read = failed.read.map(|mut read| {
                if options.strict {
                    read.bytes = 0;
                }
                read
            });
            writeln!(out, "error: {}\n{read:?}", failed.error).unwrap()
        }
    }
    writeln!(out, "{:?}", sink.0).unwrap();
    writeln!(out, "{:?}", pairer.diagnose()).unwrap();
    writeln!(out, "{:?}", pairer.missing_key).unwrap();
    writeln!(out, "{:?}", pairer.labels().borrow()).unwrap();
    writeln!(out, "{:?}", pairer.folded_note()).unwrap();
    out
}

fn junk(rng: &mut impl Rng, out: &mut Vec<u8>) {
    match rng.random_range(0..9) {
        0 => out.extend_from_slice(b"\n"),
        1 => out.extend_from_slice(b"# a comment\n"),
        2 => out.extend_from_slice(b"not an event at all\n"),
        3 => out.extend_from_slice(b"bad \xff\xfe utf-8\n"),
        4 => out.extend_from_slice(b"   \r\n"),
        5 => out.extend_from_slice(b"[12:00:00.1] no name\n"),
        6 => out.extend_from_slice(b"sh 1 [000] 99999999999999999999.1: x: a=1\n"),
        _ => out.extend_from_slice(b"{\"ts\": \"x\", \"name\": 3}\n"),
    }
}

/// A perf script or ftrace text: wake-ups and switches of a few tasks, names beyond the
/// 4096 kept for suggestions, stamps now and then going back, and junk.
fn perf_text(rng: &mut impl Rng, events: usize, ftrace: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let mut ts: u64 = 13_760_000_000_000;
    for i in 0..events {
        ts += rng.random_range(0..20_000);
        let t = if rng.random_ratio(1, 50) {
            ts - 50_000
        } else {
            ts
        };
        let (s, ns) = (t / 1_000_000_000, t % 1_000_000_000);
        let pid = rng.random_range(1..30);
        let comm = ["sh", "lat worker 1", "kworker/0:1"][pid % 3];
        let stamp = if ftrace {
            format!("{comm}-{pid} [00{}] d..2. {s}.{:06}:", pid % 4, ns / 1000)
        } else {
            format!("{comm} {pid} [00{}] {s}.{ns:09}:", pid % 4)
        };
        let line = match rng.random_range(0..10) {
            0..=3 => format!(
                "{stamp} sched:sched_wakeup: comm={comm} pid={pid} prio=120 target_cpu=00{}",
                pid % 4
            ),
            4..=7 => {
                let next = rng.random_range(1..30);
                let state = ["R", "S", "R+", "D"][rng.random_range(0..4)];
                format!(
                    "{stamp} sched:sched_switch: prev_comm={comm} prev_pid={pid} prev_prio=120 prev_state={state} ==> next_comm=x next_pid={next} next_prio=120"
                )
            }
            8 => format!("{stamp} grp:name_{}: a=1", i % 6000),
            _ => format!("{stamp} sched:sched_wakeup: comm={comm} prio=120"),
        };
        out.extend_from_slice(line.as_bytes());
        out.extend_from_slice(if rng.random_ratio(1, 20) {
            b"\r\n"
        } else {
            b"\n"
        });
        if rng.random_ratio(1, 40) {
            junk(rng, &mut out);
        }
    }
    out
}

/// Lines of 1 MiB less one byte (read) and of 1 MiB (too long, skipped), put between lines.
fn long_lines(rng: &mut impl Rng, text: &mut Vec<u8>) {
    for len in [(1 << 20) - 1, 1 << 20, (1 << 20) + 70_000] {
        let at = rng.random_range(0..text.len());
        let at = text[at..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(0, |p| at + p + 1);
        let mut line = vec![b'x'; len];
        line.push(b'\n');
        text.splice(at..at, line);
    }
}

/// babeltrace2 text whose time-of-day clock crosses midnight, with a few stamps of other
/// kinds among them when `mixed`.
fn babeltrace_text(rng: &mut impl Rng, events: usize, mixed: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let day = 86_400_000_000_000u64;
    let mut t = day - 3_000_000_000;
    for _ in 0..events {
        t += rng.random_range(0..4_000_000);
        let tod = t % day;
        let stamp = match rng.random_range(0..200) {
            0 if mixed => format!("{}.{:09}", t / 1_000_000_000, t % 1_000_000_000),
            _ => format!(
                "{:02}:{:02}:{:02}.{:09}",
                tod / 3_600_000_000_000,
                tod / 60_000_000_000 % 60,
                tod / 1_000_000_000 % 60,
                tod % 1_000_000_000
            ),
        };
        let what = ["func_entry", "func_exit"][rng.random_range(0..2)];
        let addr = rng.random_range(0..6);
        let line = format!(
            "[{stamp}] (+0.000000100) host lttng_ust_cyg_profile:{what}: {{ cpu_id = 0 }}, {{ vtid = {} }}, {{ addr = 0x{addr:x}, call_site = 0x1 }}\n",
            addr % 2
        );
        out.extend_from_slice(line.as_bytes());
        if rng.random_ratio(1, 60) {
            junk(rng, &mut out);
        }
    }
    out
}

/// JSON lines of requests, with escapes, missing ids and junk.
fn json_lines(rng: &mut impl Rng, events: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..events {
        let id = rng.random_range(0..100);
        let name = match rng.random_range(0..5) {
            0 => "request\\u005fstart",
            1 | 2 => "request_start",
            _ => "request_done",
        };
        let line = match rng.random_range(0..30) {
            0 => format!("{{\"ts\": {}, \"name\": \"{name}\"}}\n", i * 1000),
            _ => format!(
                "{{\"ts\": {}, \"name\": \"{name}\", \"id\": {id}, \"x\": [1, {{\"y\": \"a\\\"b\"}}]}}\n",
                i * 1000 + rng.random_range(0..900)
            ),
        };
        out.extend_from_slice(line.as_bytes());
        if rng.random_ratio(1, 50) {
            junk(rng, &mut out);
        }
    }
    out
}

/// A format's name, a trace of it, its rules (spec, key) and `--by`.
type Generated<'a> = (&'a str, Vec<u8>, &'a [(&'a str, &'a str)], Option<&'a str>);

#[test]
fn parallel_reads_equal_serial_ones_on_generated_traces() {
    let mut rng = rand_pcg::Pcg64::seed_from_u64(25);
    let wake = [
        ("w=sched:sched_wakeup..sched:sched_switch", "pid=next_pid"),
        (
            "p=sched:sched_switch:prev_state^=R..sched:sched_switch",
            "prev_pid=next_pid",
        ),
    ];
    let cyg = [(
        "c=lttng_ust_cyg_profile:func_entry..lttng_ust_cyg_profile:func_exit",
        "addr,vtid",
    )];
    let requests = [("r=request_start..request_done", "id")];
    let off_cpu = [(
        "s=sched:sched_switch..sched:sched_switch",
        "prev_pid=next_pid",
    )];
    for round in 0..3 {
        let inputs: [Generated; 4] = [
            (
                "perf",
                perf_text(&mut rng, 6000, false),
                &wake,
                Some("comm"),
            ),
            (
                "ftrace",
                perf_text(&mut rng, 6000, true),
                &wake,
                Some("common_pid"),
            ),
            (
                "babeltrace",
                babeltrace_text(&mut rng, 6000, round == 0),
                &cyg,
                Some("addr"),
            ),
            ("jsonl", json_lines(&mut rng, 6000), &requests, Some("id")),
        ];
        for (name, mut text, rules, by) in inputs {
            if round == 1 {
                text.pop(); // the last line without its newline
            }
            if round == 2 {
                long_lines(&mut rng, &mut text);
            }
            // One rule without `--by` is paired on the workers (`ingest::trace::local`); an
            // event that ends one span and starts the next of the same rule, too.
            let mut variants = vec![(rules, by), (&rules[..1], None)];
            if name == "perf" || name == "ftrace" {
                variants.push((&off_cpu, None));
            }
            for ((rules, by), strict) in variants.into_iter().flat_map(|v| [(v, false), (v, true)])
            {
                let options = |threads, chunk_bytes| TraceOptions {
                    columns: Columns::default(),
                    strict,
                    threads,
                    chunk_bytes,
                    ..TraceOptions::default()
                };
                let serial = read_all(&text, &options(1, 0), pairer(rules, by));
                assert!(strict || serial.contains("events: "), "{name}: {serial}");
                for (threads, chunk) in [(2, 1), (3, 4093), (2, 65_536), (5, 0)] {
                    let parallel = read_all(&text, &options(threads, chunk), pairer(rules, by));
                    let diff = serial.lines().zip(parallel.lines()).find(|(a, b)| a != b);
                    assert_eq!(
                        serial, parallel,
                        "{name} {rules:?} by {by:?} round {round} strict={strict} threads={threads} chunk={chunk}: first difference {diff:?}"
                    );
                }
            }
        }
    }
}

/// babeltrace2 text whose time-of-day clock passes midnight 50,010 times (every other line),
/// beyond the most it is unwrapped by: the last crossings' lines are malformed, on one thread
/// and on several (the threads' workers start at day 0 and do not know).
#[test]
fn a_clock_past_the_most_midnights_is_read_alike_on_every_thread() {
    let mut text = Vec::new();
    for i in 0..100_020u32 {
        let (stamp, what) = match i % 2 {
            0 => ("23:00:00.000000000", "func_entry"),
            _ => ("01:00:00.000000000", "func_exit"),
        };
        let line = format!(
            "[{stamp}] (+0.000000100) host lttng_ust_cyg_profile:{what}: {{ cpu_id = 0 }}, {{ vtid = 1 }}, {{ addr = 0x1, call_site = 0x1 }}\n"
        );
        text.extend_from_slice(line.as_bytes());
    }
    let cyg = [(
        "c=lttng_ust_cyg_profile:func_entry..lttng_ust_cyg_profile:func_exit",
        "addr,vtid",
    )];
    for (rules, by) in [(&cyg, None), (&cyg, Some("addr"))] {
        let options = |threads, chunk_bytes| TraceOptions {
            columns: Columns::default(),
            threads,
            chunk_bytes,
            ..TraceOptions::default()
        };
        let serial = read_all(&text, &options(1, 0), pairer(rules, by));
        // the 50,000th midnight is passed, the next 10 are not (their lines are malformed)
        assert!(serial.contains("malformed: 10,"), "{}", &serial[..400]);
        for (threads, chunk) in [(2, 65_536), (3, 4093), (2, 0)] {
            let parallel = read_all(&text, &options(threads, chunk), pairer(rules, by));
            assert!(
                serial == parallel,
                "by {by:?} threads={threads} chunk={chunk}"
            );
        }
    }
}

/// A Chrome JSON document in the layouts the parallel reader must tell apart: one element a
/// line (Chromium's), elements written over several lines, a minified stretch with no
/// newline, escapes, malformed elements, every kind of span, and (`cut`) a file that ends
/// inside an element.
fn chrome_json(rng: &mut impl Rng, events: usize, bare: bool, cut: bool) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(if bare {
        b"[\n".as_slice()
    } else {
        b"{\"otherData\": {\"x\": [1, \"]\"]}, \"traceEvents\": [\n"
    });
    let mut ts = 1_000u64;
    let mut first = true;
    for i in 0..events {
        ts += rng.random_range(0..40);
        let (pid, tid) = (rng.random_range(1..3), rng.random_range(1..4));
        let element = match rng.random_range(0..14) {
            0 => format!(r#"{{"ph":"B","name":"work","pid":{pid},"tid":{tid},"ts":{ts}}}"#),
            1 => format!(r#"{{"ph":"E","pid":{pid},"tid":{tid},"ts":{ts}.5}}"#),
            2 => format!(
                r#"{{"ph":"X","name":"task \"{i}\"","cat":"c","pid":{pid},"tid":{tid},"ts":{ts},"dur":{}}}"#,
                rng.random_range(0..500)
            ),
            3 => format!(
                r#"{{"ph":"b","name":"load","cat":"net","id2":{{"local":"0x{}"}},"pid":{pid},"tid":{tid},"ts":{ts}}}"#,
                i % 5
            ),
            4 => format!(
                r#"{{"ph":"e","name":"load","cat":"net","id2":{{"local":"0x{}"}},"pid":{pid},"tid":{tid},"ts":{ts}}}"#,
                rng.random_range(0..5)
            ),
            5 => format!(r#"{{"ph":"S","name":"leg","id":"7","pid":{pid},"tid":{tid},"ts":{ts}}}"#),
            6 => format!(r#"{{"ph":"F","name":"leg","id":"7","pid":{pid},"tid":{tid},"ts":{ts}}}"#),
            7 => format!(
                r#"{{"ph":"i","name":"mark_start","pid":{pid},"tid":{tid},"ts":{ts},"args":{{"req":{}}}}}"#,
                i % 7
            ),
            8 if i / 700 % 2 == 0 => format!(
                r#"{{"ph":"i","name":"mark_end","pid":{pid},"tid":{tid},"ts":{ts},"args":{{"req":{}}}}}"#,
                rng.random_range(0..7)
            ),
            8 => format!(
                // over several lines, as a pretty printer writes it (in some stretches)
                "{{\n  \"ph\": \"i\",\n  \"name\": \"mark_end\",\n  \"pid\": {pid}, \"tid\": {tid},\n  \"ts\": {ts},\n  \"args\": {{\n    \"req\": {}\n  }}\n}}",
                rng.random_range(0..7)
            ),
            9 => format!(
                r#"{{"ph":"M","name":"thread_name","pid":{pid},"tid":{tid},"args":{{"name":"T\u00e9{tid}"}}}}"#
            ),
            10 => format!(r#"{{"ph":"i","name":"no time","pid":{pid}}}"#),
            // malformed ones, in some stretches (a piece holding one is read serially)
            11 | 12 if i / 1000 % 2 == 0 => {
                format!(r#"{{"ph":"I","name":"ok","pid":{pid},"ts":{ts}}}"#)
            }
            11 => format!(r#"{{"ph":"X","ts":"x","pid":{pid},"ts":{ts}}}"#),
            12 => format!(r#"{{"ph":"n","name":"bad","pid":{pid},"ts":{ts},}}"#),
            _ => format!(r#"{{"ph":"C","name":"ctr","pid":{pid},"ts":{ts},"args":{{"v":{i}}}}}"#),
        };
        if !first {
            // Chromium's ",\n", a minified stretch, or white space around the comma
            out.extend_from_slice(match i / 500 % 3 {
                0 => b",\n".as_slice(),
                1 => b",",
                _ => b" ,\r\n  ",
            });
        }
        first = false;
        out.extend_from_slice(element.as_bytes());
    }
    if cut {
        out.extend_from_slice(br#",{"ph":"X","name":"cut","ts":1"#);
    } else {
        out.extend_from_slice(if bare {
            b"\n]\n".as_slice()
        } else {
            b"\n],\n\"tail\": [{\"ph\": \"X\"}]}\n"
        });
    }
    out
}

#[test]
fn parallel_chrome_reads_equal_serial_ones_on_generated_documents() {
    let mut rng = rand_pcg::Pcg64::seed_from_u64(26);
    let marks = [("r=mark_start..mark_end", "req")];
    for (bare, cut) in [(false, false), (true, false), (false, true)] {
        let text = chrome_json(&mut rng, 5000, bare, cut);
        let options = |threads, chunk_bytes| TraceOptions {
            threads,
            chunk_bytes,
            ..TraceOptions::default()
        };
        let serial = read_all(&text, &options(1, 0), pairer(&marks, Some("tid")));
        assert!(serial.contains("elements: 5000"), "{serial}");
        for (threads, chunk) in [(2, 1), (3, 97), (2, 4093), (2, 65_536), (5, 0)] {
            let parallel = read_all(&text, &options(threads, chunk), pairer(&marks, Some("tid")));
            let diff = serial.lines().zip(parallel.lines()).find(|(a, b)| a != b);
            assert_eq!(
                serial, parallel,
                "bare={bare} cut={cut} threads={threads} chunk={chunk}: first difference {diff:?}"
            );
        }
    }
}

/// A compressed input broken part way (a read error after whole chunks), of perf text, Chrome
/// JSON and a WAYLAND_DEBUG log: every thread count
/// and chunk size ends with the serial reader's error, never with exit 0 and the spans read
/// so far (an error met with only the start of a line in the buffer was dropped).
#[test]
fn a_read_error_mid_file_is_an_error_whatever_the_chunks() {
    use std::io::Write as _;
    let cases: [(&str, &str, &[&str]); 3] = [
        (
            "traces/sched.perf.txt",
            "spans",
            &["--span", "w=sched:sched_wakeup..sched:sched_switch"],
        ),
        ("traces/chromium-async.json", "spans", &[]),
        ("wayland/weston-glmark2-build.client.log", "wayland", &[]),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (sample, command, rules) in cases {
        let text = std::fs::read(util::root().join("tests/data").join(sample)).unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        for _ in 0..8 {
            gz.write_all(&text).unwrap();
        }
        let gz = gz.finish().unwrap();
        let path = dir.path().join("broken.gz");
        std::fs::write(&path, &gz[..gz.len() / 2]).unwrap();
        let p = path.to_str().unwrap();
        let args = [&["-f", "csv", p][..], rules].concat();
        let run = |extra: &[&str]| outcome(command, &args, extra, None);
        let serial = run(&["--threads", "1"]);
        assert_eq!(serial.0, Some(1), "{sample}: {serial:?}");
        assert!(
            serial.1.lines().count() > 10,
            "{sample}: spans read before the error: {serial:?}"
        );
        for (threads, chunk) in [("2", "1"), ("2", "7"), ("3", "4096"), ("2", "0")] {
            let parallel = run(&["--threads", threads, "--chunk-bytes", chunk]);
            assert_eq!(serial, parallel, "{sample} {threads}/{chunk}");
        }
    }
}

/// A WAYLAND_DEBUG log made of the committed glmark2 client log's lines, with what cuts the
/// parallel reader's chunks awkwardly: coloured lines, malformed and foreign lines, invalid
/// UTF-8, a line longer than the read buffer, CRLF, the 32-bit clock wrapping, times hours
/// apart and a step back, a change of stamp format and back, and no newline at the end.
fn wayland_log(rng: &mut impl Rng) -> Vec<u8> {
    let src = std::fs::read_to_string(
        util::root().join("tests/data/wayland/weston-glmark2-build.client.log"),
    )
    .unwrap();
    let lines: Vec<&str> = src.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().cycle().take(lines.len() * 3).enumerate() {
        // the stamp moved on by a third of the 32-bit microsecond counter per pass: it wraps
        let shifted = match line.strip_prefix('[').and_then(|l| l.split_once(']')) {
            Some((stamp, rest)) => match stamp.split_once('.') {
                Some((ms, us)) => {
                    let ms: u64 = ms.trim().parse().unwrap_or(0);
                    let ms = (ms + (i / lines.len()) as u64 * 1_431_655) % 4_294_967;
                    format!("[{ms:7}.{us}]{rest}")
                }
                None => line.to_string(),
            },
            None => line.to_string(),
        };
        match rng.random_range(0..60) {
            0 => out.extend_from_slice(format!("\x1b[1;32m{shifted}\x1b[0m").as_bytes()),
            1 => out.extend_from_slice(b"[1234567.890]  -> wl_surface@"),
            2 => out.extend_from_slice(b"toolkit warning: \xff\xfe not utf-8"),
            3 => out.extend_from_slice(format!("{shifted}\r").as_bytes()),
            4 if i % 7 == 0 => out.extend_from_slice(&vec![b'x'; 3 << 20]),
            _ => out.extend_from_slice(shifted.as_bytes()),
        }
        out.push(b'\n');
    }
    // times a parallel record's 32 bits cannot hold (microseconds from its chunk's first
    // record): half an hour a line for three hours, a `done` a second before its `sync`
    let mut us: u64 = 100_000_000;
    for step in 0..12u64 {
        let line = match step % 2 {
            0 => " -> wl_display@1.sync(new id wl_callback@3)",
            _ => "wl_callback@3.done(77)",
        };
        us = match step {
            5 => us - 1_000_000,
            _ => us + 1_800_000_000,
        } % (1 << 32);
        let stamp = format!("[{:7}.{:03}] ", us / 1000, us % 1000);
        out.extend_from_slice(format!("{stamp}{line}\n").as_bytes());
    }
    // the log again in 1.26's time of day, from 5 s before midnight (the clock starts afresh,
    // then wraps at midnight), and the 32-bit counter again
    let mut first = None;
    for line in &lines {
        let Some((stamp, rest)) = line.strip_prefix('[').and_then(|l| l.split_once(']')) else {
            continue;
        };
        let Some(us) = stamp.trim().replace('.', "").parse::<u64>().ok() else {
            continue;
        };
        let us = (86_395_000_000 + us.saturating_sub(*first.get_or_insert(us))) % 86_400_000_000;
        let (s, us) = (us / 1_000_000, us % 1_000_000);
        let (h, m, s) = (s / 3600, s / 60 % 60, s % 60);
        let line = format!("[{h:02}:{m:02}:{s:02}.{us:06}]{rest}\n");
        out.extend_from_slice(line.as_bytes());
    }
    out.extend_from_slice(lines[..40].join("\n").as_bytes());
    out.extend_from_slice(b"\n[1234567.890]  -> wl_surface@3.commit(");
    out
}

#[test]
fn parallel_wayland_reads_equal_serial_ones_on_committed_and_generated_logs() {
    let dir = tempfile::tempdir().unwrap();
    let generated = dir.path().join("generated.log");
    std::fs::write(
        &generated,
        wayland_log(&mut rand_pcg::Pcg64::seed_from_u64(27)),
    )
    .unwrap();
    let mut logs = Vec::new();
    files(&util::root().join("tests/data/wayland"), &mut logs);
    logs.retain(|p| p.extension().is_some_and(|e| e == "log"));
    logs.sort();
    logs.push(generated.clone());
    for log in &logs {
        let p = log.to_str().unwrap();
        for extra in [
            &["-f", "json"][..],
            &["-f", "json", "--group", "surface"],
            &["-f", "json", "--strict"],
            &["-f", "csv"],
        ] {
            let mut args = extra.to_vec();
            args.push(p);
            let strict = extra.contains(&"--strict");
            let serial = outcome("wayland", &args, &["--threads", "1"], None);
            let serial = bytes_read_unsaid(strict, serial);
            if *log == generated && extra == ["-f", "json"] {
                // what the generated log is made to hold
                for nonzero in ["clock_wraps", "malformed", "too_long", "skipped"] {
                    let zero = format!("\"{nonzero}\":0,");
                    assert!(!serial.1.contains(&zero), "{nonzero}: {}", serial.1);
                }
            }
            assert!(
                serial.0 == Some(0) || extra.contains(&"--strict"),
                "{p} {extra:?}: {serial:?}"
            );
            for (threads, chunk) in [("2", "1"), ("3", "97"), ("2", "4096"), ("4", "0")] {
                let extra = ["--threads", threads, "--chunk-bytes", chunk];
                let parallel = bytes_read_unsaid(strict, outcome("wayland", &args, &extra, None));
                assert_eq!(serial, parallel, "{p} {extra:?} {threads}/{chunk}");
            }
        }
        let stdin = ["-f", "json", "-"];
        let serial = outcome("wayland", &stdin, &["--threads", "1"], Some(log));
        let extra = ["--threads", "2", "--chunk-bytes", "513"];
        let parallel = outcome("wayland", &stdin, &extra, Some(log));
        assert_eq!(serial, parallel, "{p} from standard input");
    }
}

#[test]
fn a_strict_error_is_reported_before_a_later_read_error_whatever_the_chunks() {
    use std::io::Write as _;
    let cases: [(&str, &str, &[u8], &[&str]); 2] = [
        (
            "traces/sched.perf.txt",
            "spans",
            b"this is not a perf line\n",
            &["--span", "w=sched:sched_wakeup..sched:sched_switch"],
        ),
        (
            "wayland/weston-glmark2-build.client.log",
            "wayland",
            b"[3743537.900]  -> not a message\n",
            &[],
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (sample, command, bad, rules) in cases {
        let text = std::fs::read(util::root().join("tests/data").join(sample)).unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        let second = text.iter().position(|&b| b == b'\n').unwrap() + 1;
        gz.write_all(&text[..second]).unwrap();
        gz.write_all(bad).unwrap();
        for _ in 0..8 {
            gz.write_all(&text).unwrap();
        }
        let gz = gz.finish().unwrap();
        let path = dir.path().join("broken.gz");
        std::fs::write(&path, &gz[..gz.len() / 2]).unwrap();
        let args = [&["--strict", path.to_str().unwrap()][..], rules].concat();
        for (threads, chunk) in [("1", "262144"), ("2", "1"), ("2", "4096"), ("3", "262144")] {
            let (code, _, err) = outcome(
                command,
                &args,
                &["--threads", threads, "--chunk-bytes", chunk],
                None,
            );
            assert_eq!(code, Some(1), "{sample} {threads}/{chunk}: {err}");
            assert!(
                err.contains(":2: malformed"),
                "{sample} {threads}/{chunk}: {err}"
            );
        }
    }
}

/// `events` lines of `line(i)`, then `bad`, then as many again, the last without its newline
/// when `cut`.
fn with_bad_line(events: usize, line: impl Fn(usize) -> String, bad: &str, cut: bool) -> String {
    let mut text: String = (0..events).map(&line).collect();
    text.push_str(&format!("{bad}\n"));
    text.extend((events..2 * events).map(line));
    if cut {
        text.pop();
    }
    text
}

#[test]
fn a_strict_error_keeps_the_counts_up_to_its_line_whatever_the_threads() {
    let dir = tempfile::tempdir().unwrap();
    // (one wake-up without its key field: `missing_key` is said on an error too)
    let sched = |i: usize| match i % 2 {
        0 => format!(
            "app 4242 [000] {}.{:06}: sched:sched_wakeup: comm=app{} prio=120 target_cpu=000\n",
            10 + i / 1000,
            i % 1000,
            if i == 10 { "" } else { " pid=4243" }
        ),
        _ => format!(
            "app 4242 [000] {}.{:06}: sched:sched_switch: prev_comm=app prev_pid=4242 prev_prio=120 prev_state=S ==> next_comm=w next_pid=4243 next_prio=120\n",
            10 + i / 1000,
            i % 1000
        ),
    };
    let wayland = |i: usize| match i % 2 {
        0 => format!(
            "[{:7}.{:03}]  -> wl_display@1.sync(new id wl_callback@3)\n",
            1000 + i,
            i % 1000
        ),
        _ => format!("[{:7}.{:03}] wl_callback@3.done({i})\n", 1000 + i, i % 1000),
    };
    // the input also ending without a newline, after the malformed line (a fuzzed log: one
    // thread did not read so far, two said so)
    for cut in [false, true] {
        let bad = "this is not a perf line";
        let trace = util::write(
            dir.path(),
            "sched.txt",
            with_bad_line(3000, sched, bad, cut),
        );
        let bad = "[   1000.000]  -> not a message";
        let log = util::write(dir.path(), "w.log", with_bad_line(3000, wayland, bad, cut));
        let spans = ["spans", "-f", "json", "--strict"];
        let cases = [
            (
                [&spans[..], &util::WAKE, &[trace.to_str().unwrap()]].concat(),
                "events",
                "sched.txt:3001",
            ),
            (
                vec!["wayland", "-f", "json", "--strict", log.to_str().unwrap()],
                "messages",
                "w.log:3001",
            ),
        ];
        // (each read in place, and from standard input)
        let piped = cases.clone().map(|(mut args, events, at)| {
            let path = Path::new(args.pop().unwrap());
            args.push("-");
            let line = at.split_once(':').unwrap().1;
            (args, events, format!("<stdin>:{line}"), Some(path))
        });
        let cases = cases.map(|(args, events, at)| (args, events, at.to_string(), None));
        for (args, events, at, stdin) in cases.into_iter().chain(piped) {
            let (command, args) = args.split_first().unwrap();
            let mut outputs = Vec::new();
            for (threads, chunk) in [("1", "0"), ("2", "1"), ("2", "4096"), ("3", "65536")] {
                let extra = ["--threads", threads, "--chunk-bytes", chunk];
                let out = outcome(command, args, &extra, stdin);
                let case = format!("{command} {at} cut={cut} {threads}/{chunk}");
                assert_eq!(out.0, Some(1), "{case}: {}", out.2);
                assert!(out.2.contains(&format!("{at}: malformed")), "{}", out.2);
                let doc: serde_json::Value = serde_json::from_str(&out.1).unwrap();
                let input = &doc["input"];
                assert_eq!(
                    (&input["lines"], &input[events], &input["malformed"]),
                    (&3001.into(), &3000.into(), &1.into()),
                    "{case}"
                );
                assert!(input["bytes"].as_u64().unwrap() > 0, "{case}");
                if *command == "spans" {
                    assert_eq!(input["missing_key"], 1, "{case}");
                }
                // the malformed line named beside the counts too
                let warnings = doc["warnings"].to_string();
                assert!(warnings.contains(&at), "{case}: {warnings}");
                outputs.push(bytes_read_unsaid(true, out));
            }
            assert!(
                outputs.iter().all(|o| *o == outputs[0]),
                "{command} {at} cut={cut}: {outputs:#?}"
            );
        }
    }
}

/// Runs latscope with `head` on standard input and then `filler` over and over, for at most 20
/// seconds: its exit code and stderr, and whether it ended before the input did.
fn on_endless_input(args: &[&str], head: &[u8], filler: &[u8]) -> (Option<i32>, String, bool) {
    use std::io::Write;
    let mut child = latscope()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let start = std::time::Instant::now();
    let mut ended_first = stdin.write_all(head).is_err();
    while !ended_first && start.elapsed() < std::time::Duration::from_secs(20) {
        ended_first = stdin.write_all(filler).is_err();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    (out.status.code(), util::stderr(&out), ended_first)
}

#[test]
fn strict_stops_reading_at_the_first_malformed_line_whatever_the_threads() {
    let good = b"            app  4242 [000]    10.000100: sched:sched_wakeup: comm=app pid=4243 prio=120 target_cpu=000\n";
    let mut head = good.repeat(2);
    head.extend_from_slice(b"this is not a perf line\n");
    let filler = good.repeat(2000);
    for threads in ["1", "2"] {
        let args = [
            "spans",
            "--strict",
            "--threads",
            threads,
            "--start",
            "sched:sched_wakeup",
        ];
        let args = [
            &args[..],
            &["--end", "sched:sched_switch", "--key", "pid=next_pid", "-"],
        ];
        let (code, err, ended) = on_endless_input(&args.concat(), &head, &filler);
        assert!(ended, "--threads {threads}: read on after line 3: {err}");
        assert_eq!(code, Some(1), "--threads {threads}: {err}");
        assert!(err.contains("<stdin>:3: malformed perf line"), "{err}");
    }
    let good = b"[3743537.800]  -> wl_display@1.sync(new id wl_callback@3)\n";
    let mut head = good.repeat(2);
    head.extend_from_slice(b"[3743537.900]  -> not a message\n");
    let filler = good.repeat(2000);
    for threads in ["1", "2"] {
        let args = ["wayland", "--strict", "--threads", threads, "-"];
        let (code, err, ended) = on_endless_input(&args, &head, &filler);
        assert!(
            ended,
            "wayland --threads {threads}: read on after line 3: {err}"
        );
        assert_eq!(code, Some(1), "wayland --threads {threads}: {err}");
        assert!(
            err.contains("<stdin>:3: malformed WAYLAND_DEBUG line"),
            "{err}"
        );
    }
}
