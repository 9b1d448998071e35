//! The bpftrace program for a [`Plan`]: everything is aggregated in the kernel.
//!
//! Per span, the start probe stores `nsecs` under the pairing key; the end probe computes the
//! latency, deletes the key, computes the log-linear bucket index (see
//! [`crate::stats::loglinear`]) and folds the latency into four per-group maps: an `lhist` over
//! the bucket index, `stats` (count and sum), `min` and `max`. Only these aggregates cross into
//! user space, once per interval, as cumulative snapshots (never cleared in the kernel, so no
//! event is lost between a print and a clear). `printf` markers delimit the snapshots.
//!
//! With [`Plan::record`] (`live --record-spans`), the end probe also prints the span itself
//! (`latscope:span INDEX START_NS LATENCY_NS [GROUP]`, `nsecs` clock) for the first N spans and
//! for every span slower than all before it in its group, so that the slowest always gets out;
//! past N, a span that is not a new maximum costs two map reads and no output. The aggregates
//! are computed exactly as without recording.

use std::fmt::Write;

use super::fields::Resolved;
use super::spec::Probe;
use crate::stats::loglinear::BUCKETS;

/// The marker printed after each interval's snapshot.
pub const TICK: &str = "latscope:tick";
/// The marker printed after the final snapshot.
pub const END: &str = "latscope:end";
/// The marker printed once every probe is attached (see [`Marker`]).
pub const ATTACHED: &str = "latscope:attached";
/// The marker printed once when the map of traced processes is full.
pub const PIDS_FULL: &str = "latscope:pids-full";
/// How many processes the map of traced processes holds (bpftrace's default map size).
pub const MAX_PIDS: u32 = 4096;

/// Whose events count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// this process only (`--pid PID`, or `--this-process-only` with a command)
    Pid(u32),
    /// these processes and every process they fork, as they fork (a command and its children)
    Tree(Vec<u32>),
    /// every process
    Everything,
}

/// A probe with its compiled filters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    /// where
    pub probe: Probe,
    /// bpftrace conditions, all of which must hold
    pub filters: Vec<String>,
    /// the endpoint as the user wrote it (probe and filters), for messages
    pub label: String,
    /// the pid of the task the event is about, which the process filter tests: a
    /// tracepoint's own `pid` field where it has one (sched_wakeup's woken task), else the
    /// running task's (`pid`)
    pub task: String,
}

/// A span, compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanPlan {
    /// name in results
    pub name: String,
    /// where it starts
    pub start: Site,
    /// where it ends
    pub end: Site,
    /// key expressions at the start
    pub start_key: Vec<String>,
    /// key expressions at the end, pairwise with the start's
    pub end_key: Vec<String>,
    /// the `--by` field at the end probe
    pub group: Option<Resolved>,
    /// the key as given (`pid=next_pid`), for messages
    pub key: String,
    /// whether an end may close a span in any process (an explicit `--key`: a value both sides
    /// see); otherwise ends are filtered by process like starts
    pub ends_anywhere: bool,
}

/// A rate, compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RatePlan {
    /// what is counted
    pub site: Site,
    /// the `--by` field at the probe
    pub group: Option<Resolved>,
}

/// A value distribution, compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValuePlan {
    /// name in results
    pub name: String,
    /// where it is read
    pub site: Site,
    /// the integer expression counted
    pub expr: String,
    /// the `--by` field at the probe
    pub group: Option<Resolved>,
}

/// A probe in latscope itself that the program answers with [`ATTACHED`]: it comes first in
/// the program, and bpftrace attaches user-space probes last and in reverse order, so when it
/// fires every other probe is attached and the held command may start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marker {
    /// `usdt:LATSCOPE:latscope_live:attached`
    pub probe: Probe,
    /// latscope's pid
    pub pid: u32,
}

/// Everything a live session measures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// spans
    pub spans: Vec<SpanPlan>,
    /// single probes counted per interval
    pub rates: Vec<RatePlan>,
    /// value distributions
    pub values: Vec<ValuePlan>,
    /// whether spans, rates and values are split by a field (`--by`)
    pub grouped: bool,
    /// whose events count
    pub target: Target,
    /// seconds between snapshots
    pub interval_s: u64,
    /// stop after this many seconds
    pub duration_s: Option<u64>,
    /// print individual spans: the first this many of each span, and each new maximum
    pub record: Option<u64>,
    /// tells latscope when every probe is attached
    pub marker: Option<Marker>,
}

/// Map names, shared by the generator and the output parser.
pub mod maps {
    /// start timestamps of span `i`
    pub fn start(i: usize) -> String {
        format!("@ls_start_{i}")
    }
    /// bucket histogram of span (`s`) or value (`v`) `i`
    pub fn hist(kind: char, i: usize) -> String {
        format!("@l{kind}_hist_{i}")
    }
    /// count and sum
    pub fn stat(kind: char, i: usize) -> String {
        format!("@l{kind}_stat_{i}")
    }
    /// minimum
    pub fn min(kind: char, i: usize) -> String {
        format!("@l{kind}_min_{i}")
    }
    /// maximum
    pub fn max(kind: char, i: usize) -> String {
        format!("@l{kind}_max_{i}")
    }
    /// event count of rate `i`
    pub fn rate(i: usize) -> String {
        format!("@lr_{i}")
    }
    /// spans of span `i` printed so far (`--record-spans`)
    pub fn printed(i: usize) -> String {
        format!("@lk_n_{i}")
    }
    /// the slowest span of span `i` printed so far, per group (`--record-spans`)
    pub fn top(i: usize) -> String {
        format!("@lk_top_{i}")
    }
    /// how often span `i`'s start (`s`) or end (`e`) probe fired and passed its filters
    pub fn hits(end: char, i: usize) -> String {
        format!("@lc{end}_{i}")
    }
    /// the traced processes (a process tree)
    pub const PIDS: &str = "@lt_pids";
    /// set once the map of traced processes was full
    pub const FULL: &str = "@lt_full";
}

/// The prefix of a printed span.
pub const SPAN: &str = "latscope:span";

/// The program text.
pub fn program(plan: &Plan) -> String {
    let mut out =
        String::from("// generated by latscope live; run it by hand with: bpftrace -f json FILE\n");
    if let Some(marker) = &plan.marker {
        let _ = writeln!(
            out,
            "\n// first in the program, attached last: latscope starts the command when it fires\n\
             {} /pid == {}/ {{ printf(\"{ATTACHED}\\n\"); }}",
            marker.probe, marker.pid
        );
    }
    let target = target_probes(&mut out, &plan.target);
    for (i, span) in plan.spans.iter().enumerate() {
        span_probes(&mut out, i, span, &target, plan.record);
    }
    for (i, rate) in plan.rates.iter().enumerate() {
        let _ = writeln!(
            out,
            "\n{}{} {{ {}{} = count(); }}",
            rate.site.probe,
            predicate(Some(&target), &rate.site),
            maps::rate(i),
            group_key(rate.group.as_ref())
        );
    }
    for (i, value) in plan.values.iter().enumerate() {
        let _ = writeln!(
            out,
            "\n{}{} {{",
            value.site.probe,
            predicate(Some(&target), &value.site)
        );
        let _ = writeln!(out, "  $d = (uint64){};", value.expr);
        aggregate(&mut out, 'v', i, &group_key(value.group.as_ref()));
        out.push_str("}\n");
    }
    if matches!(plan.target, Target::Tree(_)) {
        // After every other probe: programs on one tracepoint run in the order bpftrace attaches
        // them (the program's), so a probe of the user's on sched_process_exit still sees the
        // exiting task as traced.
        let pids = maps::PIDS;
        let _ = writeln!(
            out,
            "\n// a traced task that exits leaves the map (after the probes above have seen it)\n\
             tracepoint:sched:sched_process_exit /{pids}[(uint64)tid]/ {{ delete({pids}[(uint64)tid]); }}"
        );
    }
    snapshots(&mut out, plan);
    out
}

/// The probes that keep the map of traced processes, and the condition that a probe's task is
/// traced (empty: every task), its task's pid written `$TASK`.
pub fn target_probes(out: &mut String, target: &Target) -> String {
    let pids = maps::PIDS;
    match target {
        Target::Everything => String::new(),
        Target::Pid(pid) => format!("pid == {pid}"),
        Target::Tree(roots) => {
            let seeds: String = if roots.is_empty() {
                " /* the command's pid, when it runs */".to_string()
            } else {
                roots
                    .iter()
                    .map(|p| format!(" {pids}[(uint64){p}] = 1;"))
                    .collect()
            };
            let _ = writeln!(
                out,
                "\n// the traced processes: the command (or --pid) and every process forked from them\n\
                 BEGIN {{{seeds} }}\n\
                 tracepoint:sched:sched_process_fork /{pids}[(uint64)pid]/ {{\n\
                 \x20 $c = (uint64)args->child_pid;\n\
                 \x20 {pids}[$c] = 1;\n\
                 \x20 if ({pids}[$c] == 0 && {full} == 0) {{ {full} = 1; printf(\"{PIDS_FULL}\\n\"); }}\n\
                 }}",
                full = maps::FULL
            );
            format!("{pids}[(uint64){TASK}]")
        }
    }
}

/// Where the process filter puts the pid of a site's task.
const TASK: &str = "$TASK";

/// ` /a && b/`, or nothing when there is no condition: the process filter `target` (its
/// [`TASK`] replaced by the site's task) and the site's filters.
fn predicate(target: Option<&str>, site: &Site) -> String {
    let target = target
        .filter(|t| !t.is_empty())
        .map(|t| t.replace(TASK, &site.task));
    let all: Vec<&str> = target
        .iter()
        .map(String::as_str)
        .chain(site.filters.iter().map(String::as_str))
        .collect();
    if all.is_empty() {
        String::new()
    } else {
        format!(" /{}/", all.join(" && "))
    }
}

/// `[EXPR]` of a group, or nothing: unkeyed maps need no hashing per update.
fn group_key(group: Option<&Resolved>) -> String {
    group.map_or_else(String::new, |g| format!("[{}]", g.expr))
}

fn span_probes(out: &mut String, i: usize, span: &SpanPlan, target: &str, record: Option<u64>) {
    let start_key = format!("{}[{}]", maps::start(i), span.start_key.join(", "));
    let end_key = format!("{}[{}]", maps::start(i), span.end_key.join(", "));
    let _ = writeln!(
        out,
        "\n// span {}: {} .. {}",
        span.name, span.start.label, span.end.label
    );
    let _ = writeln!(
        out,
        "{}{} {{ {} = count(); {start_key} = nsecs; }}",
        span.start.probe,
        predicate(Some(target), &span.start),
        maps::hits('s', i)
    );
    // With an explicit key the end is not filtered by process: a span may end in another
    // process (a reply, a fence signalled in an interrupt); only starts of traced processes are
    // in the map.
    let end_target = if span.ends_anywhere {
        None
    } else {
        Some(target)
    };
    let _ = writeln!(
        out,
        "{}{} {{\n  {} = count();\n  $s = {end_key};\n  if ($s) {{\n    $d = nsecs - $s;\n    delete({end_key});",
        span.end.probe,
        predicate(end_target, &span.end),
        maps::hits('e', i)
    );
    let mut body = String::new();
    aggregate(&mut body, 's', i, &group_key(span.group.as_ref()));
    if let Some(max) = record {
        print_span(&mut body, i, max, span.group.as_ref());
    }
    for line in body.lines() {
        let _ = writeln!(out, "  {line}");
    }
    out.push_str("  }\n}\n");
}

/// `printf` of the span in `$s` (start) and `$d` (latency) when it is among the first `max` or
/// slower than every span printed before in its group.
fn print_span(out: &mut String, i: usize, max: u64, group: Option<&Resolved>) {
    let (n, top) = (maps::printed(i), maps::top(i));
    let top = format!("{top}{}", group_key(group));
    // The group is printed as bpftrace prints the map key, so records and series agree.
    let (format, arg) = match group {
        None => (String::new(), String::new()),
        Some(g) if g.text => (" %s".to_string(), format!(", {}", g.expr)),
        Some(g) => (" %llu".to_string(), format!(", {}", g.expr)),
    };
    let _ = writeln!(
        out,
        "  if ({n} < {max} || $d > {top}) {{\n\
         \x20   {n} = {n} + 1;\n\
         \x20   if ($d > {top}) {{ {top} = $d; }}\n\
         \x20   printf(\"{SPAN} {i} %llu %llu{format}\\n\", $s, $d{arg});\n\
         \x20 }}"
    );
}

/// Bucket index of `$d` into `$i`, then the four aggregates.
fn aggregate(out: &mut String, kind: char, i: usize, group: &str) {
    out.push_str(
        "  $x = $d; $m = (uint64)0;\n\
         \x20 if ($x >> 32) { $x = $x >> 32; $m = $m + 32; }\n\
         \x20 if ($x >> 16) { $x = $x >> 16; $m = $m + 16; }\n\
         \x20 if ($x >> 8) { $x = $x >> 8; $m = $m + 8; }\n\
         \x20 if ($x >> 4) { $x = $x >> 4; $m = $m + 4; }\n\
         \x20 if ($x >> 2) { $x = $x >> 2; $m = $m + 2; }\n\
         \x20 if ($x >> 1) { $m = $m + 1; }\n\
         \x20 $i = $d;\n\
         \x20 if ($d >= 16) { $i = 16 + ($m - 4) * 8 + (($d >> ($m - 3)) & 7); }\n",
    );
    let _ = writeln!(
        out,
        "  {}{group} = lhist($i, 0, {BUCKETS}, 1);",
        maps::hist(kind, i)
    );
    let _ = writeln!(out, "  {}{group} = stats($d);", maps::stat(kind, i));
    let _ = writeln!(out, "  {}{group} = min($d);", maps::min(kind, i));
    let _ = writeln!(out, "  {}{group} = max($d);", maps::max(kind, i));
}

/// Aggregate maps in print order.
fn aggregate_maps(plan: &Plan) -> Vec<String> {
    let mut names = Vec::new();
    for (kind, n) in [('s', plan.spans.len()), ('v', plan.values.len())] {
        for i in 0..n {
            names.extend([
                maps::hist(kind, i),
                maps::stat(kind, i),
                maps::min(kind, i),
                maps::max(kind, i),
            ]);
        }
    }
    names.extend((0..plan.rates.len()).map(maps::rate));
    names
}

fn snapshots(out: &mut String, plan: &Plan) {
    let prints: String = aggregate_maps(plan)
        .iter()
        .map(|m| format!(" print({m});"))
        .collect();
    let _ = writeln!(
        out,
        "\ninterval:s:{} {{{prints} printf(\"{TICK}\\n\"); }}",
        plan.interval_s.max(1)
    );
    if let Some(duration) = plan.duration_s {
        let _ = writeln!(out, "interval:s:{} {{ exit(); }}", duration.max(1));
    }
    // The final snapshot; then every map is cleared so bpftrace prints nothing more at exit.
    let mut clears: Vec<String> = aggregate_maps(plan)
        .iter()
        .map(|m| format!(" clear({m});"))
        .collect();
    clears.extend((0..plan.spans.len()).map(|i| format!(" clear({});", maps::start(i))));
    if plan.record.is_some() {
        for i in 0..plan.spans.len() {
            clears.push(format!(
                " clear({}); clear({});",
                maps::printed(i),
                maps::top(i)
            ));
        }
    }
    // How often each span's probes fired: only at the end, to name those that never did.
    let hits: Vec<String> = (0..plan.spans.len())
        .flat_map(|i| [maps::hits('s', i), maps::hits('e', i)])
        .collect();
    let hit_prints: String = hits.iter().map(|m| format!(" print({m});")).collect();
    clears.extend(hits.iter().map(|m| format!(" clear({m});")));
    if matches!(plan.target, Target::Tree(_)) {
        clears.push(format!(" clear({}); clear({});", maps::PIDS, maps::FULL));
    }
    let _ = writeln!(
        out,
        "END {{{prints}{hit_prints} printf(\"{END}\\n\");{} }}",
        clears.concat()
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::compile::{Request, compile};
    use crate::live::fields::{Formats, parse_format};
    use crate::live::spec::{Key, parse_endpoint, parse_span};

    fn request() -> Request {
        Request {
            spans: vec![parse_span("req=usdt:/t:p:start..usdt:/t:p:end", None).unwrap()],
            rates: vec![parse_endpoint("usdt:/t:p:tick").unwrap()],
            values: vec!["delay=usdt:/t:p:start:arg1".parse().unwrap()],
            by: Some("tid".into()),
            target: Target::Pid(42),
            interval_s: 5,
            duration_s: Some(10),
            record: None,
            marker: None,
            ends_anywhere: false,
        }
    }

    fn plan() -> Plan {
        compile(&request(), &Formats::new()).unwrap()
    }

    #[test]
    fn a_usdt_span_stores_the_start_under_its_key_and_aggregates_at_the_end() {
        let text = program(&plan());
        assert!(
            text.contains(
                "usdt:/t:p:start /pid == 42/ { @lcs_0 = count(); @ls_start_0[(uint64)arg0] = nsecs; }"
            ),
            "{text}"
        );
        assert!(
            text.contains("usdt:/t:p:end /pid == 42/ {\n  @lce_0 = count();\n  $s = @ls_start_0[(uint64)arg0];\n  if ($s) {\n    $d = nsecs - $s;\n    delete(@ls_start_0[(uint64)arg0]);"),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "    @ls_hist_0[tid] = lhist($i, 0, {BUCKETS}, 1);"
            )),
            "{text}"
        );
        assert!(text.contains("    @ls_stat_0[tid] = stats($d);"));
    }

    #[test]
    fn rates_values_interval_duration_and_end_are_generated() {
        let text = program(&plan());
        assert!(
            text.contains("usdt:/t:p:tick /pid == 42/ { @lr_0[tid] = count(); }"),
            "{text}"
        );
        assert!(text.contains("  $d = (uint64)arg1;"));
        assert!(text.contains("  @lv_max_0[tid] = max($d);"));
        assert!(text.contains("interval:s:5 { print(@ls_hist_0);"));
        assert!(text.contains("print(@lr_0); printf(\"latscope:tick\\n\"); }"));
        assert!(text.contains("interval:s:10 { exit(); }"));
        assert!(text.contains(
            "print(@lcs_0); print(@lce_0); printf(\"latscope:end\\n\"); clear(@ls_hist_0);"
        ));
        assert!(text.contains("clear(@lcs_0); clear(@lce_0); }"));
    }

    #[test]
    fn a_process_tree_is_seeded_followed_through_forks_and_bounded() {
        let mut r = request();
        r.target = Target::Tree(vec![7, 9]);
        r.by = None;
        let text = program(&compile(&r, &Formats::new()).unwrap());
        assert!(
            text.contains("BEGIN { @lt_pids[(uint64)7] = 1; @lt_pids[(uint64)9] = 1; }"),
            "{text}"
        );
        assert!(text.contains("tracepoint:sched:sched_process_fork /@lt_pids[(uint64)pid]/ {"));
        assert!(text.contains("  if (@lt_pids[$c] == 0 && @lt_full == 0) { @lt_full = 1; printf(\"latscope:pids-full\\n\"); }"));
        assert!(text.contains("tracepoint:sched:sched_process_exit /@lt_pids[(uint64)tid]/ { delete(@lt_pids[(uint64)tid]); }"));
        assert!(
            text.contains("usdt:/t:p:start /@lt_pids[(uint64)pid]/ {"),
            "{text}"
        );
        // With the default key the end is filtered like the start; with an explicit key it is
        // matched by key, in whatever process it fires.
        assert!(
            text.contains("usdt:/t:p:end /@lt_pids[(uint64)pid]/ {\n"),
            "{text}"
        );
        r.ends_anywhere = true;
        let anywhere = program(&compile(&r, &Formats::new()).unwrap());
        assert!(anywhere.contains("usdt:/t:p:end {\n"), "{anywhere}");
        // The exit probe comes after every other, so that theirs still see the exiting task.
        assert!(text.find("sched_process_exit").unwrap() > text.find("usdt:/t:p:end").unwrap());
        assert!(text.contains("@ls_hist_0 = lhist("));
        assert!(text.contains("clear(@lt_pids); clear(@lt_full); }"));
    }

    #[test]
    fn the_marker_comes_first_so_that_bpftrace_attaches_it_last() {
        let mut r = request();
        r.marker = Some(Marker {
            probe: "usdt:/usr/bin/latscope:latscope_live:attached"
                .parse()
                .unwrap(),
            pid: 5,
        });
        let text = program(&compile(&r, &Formats::new()).unwrap());
        let marker = text.find("usdt:/usr/bin/latscope:latscope_live:attached /pid == 5/ { printf(\"latscope:attached\\n\"); }").unwrap();
        assert!(marker < text.find("usdt:/t:p:start").unwrap());
    }

    const WAKEUP: &str = "format:\n\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;\n";
    const SWITCH: &str = "format:\n\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;\n\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n";

    #[test]
    fn a_tracepoint_with_its_own_pid_is_filtered_by_the_task_it_is_about() {
        let mut formats = Formats::new();
        formats.insert(
            ("sched".into(), "sched_wakeup".into()),
            Some(parse_format(WAKEUP)),
        );
        formats.insert(
            ("sched".into(), "sched_switch".into()),
            Some(parse_format(SWITCH)),
        );
        let key = Key::parse("pid=next_pid").unwrap();
        let mut r = request();
        r.spans = vec![
            parse_span(
                "runq=tracepoint:sched:sched_wakeup:comm==myapp..tracepoint:sched:sched_switch:next_comm^=my",
                Some(&key),
            )
            .unwrap(),
        ];
        r.target = Target::Tree(vec![3]);
        r.ends_anywhere = true;
        r.by = Some("next_comm".into());
        r.rates.clear();
        r.values.clear();
        let text = program(&compile(&r, &formats).unwrap());
        assert!(text.contains(
            "tracepoint:sched:sched_wakeup /@lt_pids[(uint64)args->pid] && args->comm == \"myapp\"/ { @lcs_0 = count(); @ls_start_0[(uint64)args->pid] = nsecs; }"
        ), "{text}");
        assert!(text.contains(
            "tracepoint:sched:sched_switch /strncmp(args->next_comm, \"my\", 2) == 0/ {\n  @lce_0 = count();\n  $s = @ls_start_0[(uint64)args->next_pid];"
        ), "{text}");
        assert!(
            text.contains("@ls_hist_0[args->next_comm] = lhist("),
            "{text}"
        );
    }

    #[test]
    fn recording_prints_the_first_spans_and_new_maxima_beside_unchanged_aggregates() {
        let mut r = request();
        let plain = program(&compile(&r, &Formats::new()).unwrap());
        r.record = Some(1000);
        let text = program(&compile(&r, &Formats::new()).unwrap());
        assert!(
            text.contains("    if (@lk_n_0 < 1000 || $d > @lk_top_0[tid]) {"),
            "{text}"
        );
        assert!(text.contains("      if ($d > @lk_top_0[tid]) { @lk_top_0[tid] = $d; }"));
        assert!(
            text.contains("      printf(\"latscope:span 0 %llu %llu %llu\\n\", $s, $d, tid);"),
            "{text}"
        );
        assert!(text.contains("clear(@lk_n_0); clear(@lk_top_0);"));
        // The aggregates are the same lines as without recording.
        let aggregates = |t: &str| -> Vec<String> {
            t.lines()
                .filter(|l| l.trim_start().starts_with("@ls_"))
                .map(str::to_string)
                .collect()
        };
        assert_eq!(aggregates(&text), aggregates(&plain));
        r.by = Some("comm".into());
        assert!(
            program(&compile(&r, &Formats::new()).unwrap())
                .contains("%llu %llu %s\\n\", $s, $d, comm);")
        );
        r.by = None;
        assert!(
            program(&compile(&r, &Formats::new()).unwrap()).contains("%llu %llu\\n\", $s, $d);")
        );
    }

    #[test]
    fn the_bucket_index_code_matches_the_scheme() {
        // Read the shifts and the index formula out of the generated program, then evaluate
        // them the way BPF would: a typo in the emitted code makes this fail.
        let text = program(&plan());
        let shifts: Vec<u64> = text
            .lines()
            .filter_map(|l| {
                l.trim()
                    .strip_prefix("if ($x >> ")?
                    .split(')')
                    .next()?
                    .parse()
                    .ok()
            })
            .collect();
        // One block per aggregate (here a span and a value), each with the same shifts.
        assert_eq!(shifts.len(), 12, "{text}");
        assert!(
            shifts.chunks(6).all(|c| c == [32, 16, 8, 4, 2, 1]),
            "{shifts:?}"
        );
        let shifts = &shifts[..6];
        assert!(
            text.contains("if ($d >= 16) { $i = 16 + ($m - 4) * 8 + (($d >> ($m - 3)) & 7); }")
        );
        for d in [
            0u64,
            1,
            15,
            16,
            17,
            100,
            4095,
            4096,
            1_000_000,
            u64::MAX / 3,
        ] {
            let (mut x, mut m) = (d, 0u64);
            for &s in shifts {
                if x >> s != 0 {
                    x >>= s;
                    m += s;
                }
            }
            let i = if d >= 16 {
                16 + (m - 4) * 8 + ((d >> (m - 3)) & 7)
            } else {
                d
            };
            assert_eq!(i as usize, crate::stats::loglinear::index(d), "{d}");
        }
    }
}
