//! The command line: clap types, and their conversion into library options. Nothing here is
//! seen by the library.
//!
//! What several commands take is declared once, in a group each flattens: [`FormatArg`],
//! [`SaveArg`], [`UnitOpt`], [`MaxSpans`], [`NoiseArg`], [`InputArgs`] and [`OutputArgs`].
//! Values named by a library enum ([`Unit`], [`SpanKind`], [`GroupBy`], [`Repeat`],
//! [`TraceFormat`], [`Clock`]) are parsed by its own names ([`Named`]); the enums here
//! ([`Format`], [`ExportFormat`], [`PlotKind`], [`CounterSet`]) are the command line's own.
//!
//! Help comes in two lengths, as clap makes them: an argument's doc comment starts with one short
//! line, all `-h` shows (one screen per command); the paragraphs after it, each command's
//! `long_about` and its examples (`after_long_help`) are for `--help`, which teaches.

use std::path::{Path, PathBuf};

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};

use crate::values::{
    Named, buffers, count, duration_s, duration_us, interval_seconds, named, named_or_auto,
    payload, percent, positive_duration_s, size, whole_seconds, window_size,
};

use latscope::doc::rule::Clock;
use latscope::ingest::trace::Format as TraceFormat;
use latscope::ingest::trace::rules::Repeat;
use latscope::ingest::wayland::{GroupBy, SpanKind, SpanOptions};
use latscope::stats::{LinearSpec, Unit};

/// What `compare`, `plot`, `report` and `export` read, for their help: every document kind
/// with latencies ([`latscope::doc::Kind::has_latency`]) and the imported formats
/// ([`latscope::doc::IMPORTED`]); a test checks that it names them all.
macro_rules! reads {
    () => {
        "any latscope JSON result (spans of wayland, spans and live; bench; lab-ipc; lab-queue; \
         lab-x11; lab-wayland; lab-gpu; compare), bpftrace -f json output or an HdrHistogram interval log \
         (hlog)."
    };
}

/// Latency and performance analysis for the Linux display, graphics and IPC stack.
#[derive(Debug, Parser)]
#[command(name = "latscope", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Latency distributions from WAYLAND_DEBUG logs (commit→release, frame→done, ...).
    #[command(long_about = WAYLAND_ABOUT, after_long_help = WAYLAND_EXAMPLES)]
    Wayland(WaylandArgs),
    /// A frame's whole path: the client's WAYLAND_DEBUG log joined to its compositor's, stage by
    /// stage from the commit to the screen.
    #[command(long_about = FRAMES_ABOUT, after_long_help = FRAMES_EXAMPLES)]
    Frames(FramesArgs),
    /// Latency from any trace: perf script, ftrace/trace-cmd, babeltrace2 (LTTng), Chrome
    /// JSON, JSON lines, CSV: a start event and an end event paired by a key.
    #[command(long_about = SPANS_ABOUT, after_long_help = format!("{SPANS_EXAMPLES}\n\n{}", latscope::rule::GRAMMAR_HELP))]
    Spans(SpansArgs),
    /// A first look, no setup: an IPC matrix measured here, X11 uploads and the screen
    /// query (on Xvfb), a native Wayland client (on weston) and a bundled WAYLAND_DEBUG log, in
    /// one HTML report, each part with the command for your own system.
    Demo(DemoArgs),
    /// List the USDT probes of executables and libraries, or of everything a process has mapped.
    #[command(after_long_help = PROBES_EXAMPLES)]
    Probes(ProbesArgs),
    /// Trace kernel tracepoints, kprobes, USDT probes and uprobes live, over whole process
    /// trees: latency spans, rates and values, aggregated in the kernel by bpftrace.
    #[command(long_about = LIVE_ABOUT, after_long_help = format!("{LIVE_EXAMPLES}{}", latscope::rule::GRAMMAR_HELP))]
    Live(LiveArgs),
    /// Labs: controlled experiments that make a performance lesson measurable.
    #[command(subcommand)]
    Lab(LabCommand),
    /// A/B benchmark: run commands interleaved, with CPU counters and a verdict you can trust.
    #[command(long_about = BENCH_ABOUT, after_long_help = BENCH_EXAMPLES)]
    Bench(BenchArgs),
    /// Compare two saved results of any kind: what got faster, slower, or moved in opposite
    /// directions in the body and the tail, with a verdict.
    #[command(after_long_help = COMPARE_EXAMPLES)]
    Compare(CompareArgs),
    /// Plot saved results as SVG: a histogram on a log latency axis, or percentiles (latency
    /// against percentile, 50 to 99.99).
    Plot(PlotArgs),
    /// One self-contained HTML report of saved results of any kind (stats, plots, and the
    /// comparison of two).
    Report(ReportArgs),
    /// Export a saved result for other tools: hlog (HdrHistogram interval log), bpftrace JSON,
    /// chrome-json and perfetto (kept spans on a timeline), parquet (rows for SQL).
    #[command(after_long_help = EXPORT_EXAMPLES)]
    Export(ExportArgs),
    /// Merge spans results of many machines or runs into one (exactly: kernel log-linear
    /// buckets and HdrHistograms add); `compare`, `report` and `export` take the result.
    #[command(after_long_help = MERGE_EXAMPLES)]
    Merge(MergeArgs),
}

/// A `spans` document and its samples: what `wayland`, `spans` and `demo` write.
const SPANS_DOC: &[(Format, &str)] = &[
    (Format::Text, ""),
    (Format::Json, "the `spans` document, ns"),
    (Format::Markdown, ""),
    (Format::Csv, "one line per sample, ns"),
];

/// What a lab writes: text, its JSON document, Markdown.
const fn lab(json: &'static str) -> [(Format, &'static str); 3] {
    [
        (Format::Text, ""),
        (Format::Json, json),
        (Format::Markdown, ""),
    ]
}

/// The formats each command writes with `--format` (by the command's words after `latscope`),
/// each with what it holds there, if that needs saying. Its `--format` help is made from this
/// ([`command`]; a test checks it), and asking for another is a usage error naming
/// them.
pub const WRITES: &[(&str, &[(Format, &str)])] = &[
    ("wayland", SPANS_DOC),
    (
        "frames",
        &[
            (Format::Text, ""),
            (
                Format::Json,
                "the `spans` document with its `frames` part, ns",
            ),
            (Format::Markdown, ""),
            (Format::Csv, "one line per sample, ns"),
        ],
    ),
    ("spans", SPANS_DOC),
    ("demo", SPANS_DOC),
    (
        "live",
        &[
            (Format::Text, "every interval, then the totals"),
            (
                Format::Json,
                "the `spans` document --save writes; intervals go to stderr",
            ),
            (Format::Markdown, "a table per kind; intervals go to stderr"),
        ],
    ),
    (
        "bench",
        &[
            (Format::Text, ""),
            (Format::Json, "the `bench` document: every run"),
            (Format::Markdown, ""),
            (Format::Csv, "one line per run"),
        ],
    ),
    (
        "compare",
        &[
            (Format::Text, ""),
            (Format::Json, "the `compare` document"),
            (Format::Markdown, ""),
        ],
    ),
    (
        "probes",
        &[
            (
                Format::Text,
                "one line per probe, as a `latscope live` spec",
            ),
            (Format::Json, "the `probes` document"),
        ],
    ),
    ("lab queue", &lab("the `lab-queue` document, ns")),
    ("lab ipc", &lab("the `lab-ipc` document, ns")),
    ("lab x11", &lab("the `lab-x11` document, ns")),
    ("lab wayland", &lab("the `lab-wayland` document, ns")),
    ("lab gpu", &lab("the `lab-gpu` document, ns")),
];

/// The command line as it runs: the derived [`Cli`], each command's `--format` help made from
/// what it writes ([`WRITES`]).
pub fn command() -> clap::Command {
    let mut cmd = Cli::command();
    for (words, writes) in WRITES {
        let words: Vec<&str> = words.split(' ').collect();
        cmd = with_format_help(cmd, &words, writes);
    }
    cmd
}

/// Parses the process's arguments with [`command`]; a usage error exits with 2, and so does an
/// output that is one of the inputs ([`same_file`]).
pub fn parse() -> Cli {
    let mut cmd = command();
    let mut matches = cmd.clone().get_matches();
    let (mut leaf, args) = leaf(&cmd, &matches);
    if let Some(message) = same_file(&leaf, args) {
        leaf.error(clap::error::ErrorKind::ArgumentConflict, message)
            .exit();
    }
    Cli::from_arg_matches_mut(&mut matches).unwrap_or_else(|e| e.format(&mut cmd).exit())
}

/// The arguments that name a file a command reads, by id, in every command.
const INPUTS: &[&str] = &[
    "files", "client", "server", "timeline", "input", "compare", "before", "after", "results",
    "result",
];

/// The arguments that name a file a command writes, by id, in every command (`bench --output`
/// also takes `null`, `pipe` and `inherit`, which are no file).
const OUTPUTS: &[&str] = &[
    "save",
    "report",
    "export_json",
    "export_markdown",
    "export_csv",
    "output",
];

/// The subcommand that runs (`lab x11`: `x11`), built so that its usage line names it in full,
/// and its arguments.
fn leaf<'m>(
    cmd: &clap::Command,
    matches: &'m clap::ArgMatches,
) -> (clap::Command, &'m clap::ArgMatches) {
    let mut current = cmd.clone();
    current.build();
    let mut args = matches;
    while let Some((word, sub)) = args.subcommand() {
        let Some(next) = current.find_subcommand(word) else {
            break;
        };
        current = next.clone();
        args = sub;
    }
    (current, args)
}

/// The message refusing an output that is one of the inputs: the same regular file, by device
/// and inode (`./x` and `x`, a hard link, a link), so that writing a report, a saved result or
/// an export cannot replace the trace or result it is made from. An output that does not exist
/// yet is none of the inputs; `-` is standard input or output, never a file named so.
fn same_file(cmd: &clap::Command, args: &clap::ArgMatches) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let keywords: &[&str] = match cmd.get_name() {
        "bench" => &["null", "pipe", "inherit"],
        _ => &[],
    };
    let given = |ids: &[&str]| -> Vec<(String, PathBuf)> {
        let mut paths = Vec::new();
        for id in ids {
            let Ok(Some(values)) = args.try_get_raw(id) else {
                continue;
            };
            let option = cmd
                .get_arguments()
                .find(|a| a.get_id() == id)
                .and_then(|a| a.get_long().map(|l| format!("--{l}")))
                .unwrap_or_default();
            for value in values.filter(|v| *v != "-" && !keywords.iter().any(|k| v == k)) {
                paths.push((option.clone(), PathBuf::from(value)));
            }
        }
        paths
    };
    let identity = |path: &Path| {
        std::fs::metadata(path)
            .ok()
            .filter(|m| m.is_file())
            .map(|m| (m.dev(), m.ino()))
    };
    let inputs: Vec<_> = given(INPUTS)
        .into_iter()
        .filter_map(|(option, path)| Some((option, identity(&path)?, path)))
        .collect();
    given(OUTPUTS).into_iter().find_map(|(option, path)| {
        let id = identity(&path)?;
        let (input_option, _, input) = inputs.iter().find(|(_, i, _)| *i == id)?;
        let input_option = match input_option.as_str() {
            "" => String::new(),
            o => format!("{o} "),
        };
        Some(format!(
            "{option} {} is the input {input_option}{}: writing it would replace what is read; give another file",
            path.display(),
            input.display()
        ))
    })
}

/// `cmd` with the `--format` of its subcommand `words` described by `writes`.
fn with_format_help(
    cmd: clap::Command,
    words: &[&str],
    writes: &'static [(Format, &'static str)],
) -> clap::Command {
    match words {
        [] => cmd.mut_arg("format", |arg| {
            arg.help(format_help(writes, false))
                .long_help(format_help(writes, true))
        }),
        [first, rest @ ..] => cmd.mut_subcommand(*first, |sub| with_format_help(sub, rest, writes)),
    }
}

/// "Output format: text, json or markdown", each with what it holds there when `long`.
fn format_help(writes: &[(Format, &str)], long: bool) -> String {
    let names: Vec<String> = writes
        .iter()
        .map(|(format, holds)| match (long, holds.is_empty()) {
            (true, false) => format!("{} ({holds})", format.name()),
            _ => format.name().to_string(),
        })
        .collect();
    let list = match names.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    };
    format!("Output format: {list}{}", if long { "." } else { "" })
}

/// Output formats, one list for every command (each command's --format help says which it
/// writes; asking for another is a usage error).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// for a terminal
    Text,
    /// the command's JSON document (all values in ns)
    Json,
    /// a Markdown table
    Markdown,
    /// one line per sample or run
    Csv,
}

impl Format {
    /// The name as typed.
    pub fn name(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::Json => "json",
            Format::Markdown => "markdown",
            Format::Csv => "csv",
        }
    }
}

/// `-f/--format` of every command that writes something other than a spans report (those take
/// [`OutputArgs`]). Its help is each command's own, made by [`command`] from what the command
/// writes ([`WRITES`]); asking for another is a usage error.
#[derive(Debug, Clone, Args)]
pub struct FormatArg {
    /// Output format.
    #[arg(long, short = 'f', value_enum, default_value_t = Format::Text, hide_possible_values = true)]
    format: Format,
}

impl FormatArg {
    /// The format asked for.
    pub fn get(&self) -> Format {
        self.format
    }
}

/// `--save FILE`: a run's JSON document, written besides what `--format` prints.
#[derive(Debug, Clone, Args)]
pub struct SaveArg {
    /// Also write the JSON result to this file.
    #[arg(long, value_name = "FILE")]
    save: Option<PathBuf>,
}

impl SaveArg {
    /// The file to write, if any.
    pub fn path(&self) -> Option<&Path> {
        self.save.as_deref()
    }
}

/// `--unit`: the unit of the times a table shows (documents are always in ns).
#[derive(Debug, Clone, Args)]
pub struct UnitOpt {
    /// Unit of the tables
    ///
    /// JSON and CSV are always in ns.
    #[arg(long, default_value = "us", value_parser = named::<Unit>())]
    unit: Unit,
}

impl UnitOpt {
    /// The unit asked for.
    pub fn unit(&self) -> Unit {
        self.unit
    }
}

/// `--max-spans N`: how many spans (messages, operations, requests) a run keeps one by one in
/// its document, for a timeline; the distributions count every one.
#[derive(Debug, Clone, Args)]
pub struct MaxSpans {
    /// Spans kept one by one in the JSON document
    ///
    /// The first N, each with its start (in the run's clock) and latency, and for labs always the
    /// slowest too: for `latscope export --to chrome-json|perfetto` and the report's
    /// latency-against-time view. The distributions count every span.
    #[arg(long, default_value_t = 0, value_name = "N", value_parser = crate::values::max_spans)]
    max_spans: usize,
}

impl MaxSpans {
    /// N.
    pub fn get(&self) -> usize {
        self.max_spans
    }
}

/// `--noise` of the commands that judge saved results (`bench` has its own default).
#[derive(Debug, Clone, Args)]
pub struct NoiseArg {
    /// Changes within this band count as none
    ///
    /// The band within which a change counts as no change: 1%, 0.5% or 0.01.
    #[arg(long, default_value = "1%", value_parser = percent)]
    noise: f64,
}

impl NoiseArg {
    /// The band, as a fraction.
    pub fn get(&self) -> f64 {
        self.noise
    }
}

/// The inputs of the commands that read logs and traces (`wayland`, `spans`), and how.
#[derive(Debug, Clone, Args)]
pub struct InputArgs {
    /// Logs or traces; `-` reads standard input
    ///
    /// A gzip, zstd or xz file (or stream) is decompressed as it is read, known by its first bytes,
    /// on a thread of its own (at most 5 MiB decompressed ahead).
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// Fail at the first malformed line instead of counting it
    ///
    /// A malformed line is one that should be an event or a protocol message and is not; the error
    /// names it, and nothing after it is read (the spans measured before it, if any, are shown with
    /// the counts up to it). Lines that are no event at all (headers, comments, blank lines, a
    /// program's own output) are skipped as ever; a line that is not UTF-8 (`not_utf8`) is counted
    /// in the summary, not fatal.
    #[arg(long)]
    pub strict: bool,
    /// Threads reading each input (default: the available cores)
    ///
    /// 1 reads on one thread. Lines are cut into chunks of 256 KiB, each read and parsed by one
    /// thread; what depends on order (a WAYLAND_DEBUG log's clock, objects and spans; a trace's
    /// pairing) follows them in the input's order on the calling thread, which reads and parses too
    /// when it would wait: the result is one thread's. With one rule and no --by, each chunk's
    /// thread pairs its own events, and the calling thread takes their spans in order.
    ///
    /// Chrome JSON is read in parallel where it has one element a line (what Chromium writes),
    /// serially elsewhere (a minified file, elements over several lines, elements under 96 bytes on
    /// average); CSV, strace and perf trace are read on one thread.
    ///
    /// Memory: at most 4 chunks per thread in flight, 16 in all, each its input (up to 2 MiB around
    /// a longer line) and what was parsed from it. A file of 1 MiB or more (not Chrome JSON) is
    /// read in place through a memory map, its pages given back 4 MiB at a time as they are read
    /// (docs/guide/spans.md has the memory measured).
    #[arg(long, value_name = "N", default_value_t = crate::values::cores(), hide_default_value = true, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: u16,
    /// Bytes per chunk of the parallel reader (tests: small chunks cut lines everywhere).
    #[arg(long, hide = true, default_value_t = 0)]
    pub chunk_bytes: usize,
}

impl InputArgs {
    /// The inputs, as the library opens them.
    pub fn sources(&self) -> Vec<latscope::ingest::Source> {
        self.files
            .iter()
            .map(|p| latscope::ingest::Source::from_path(p))
            .collect()
    }
}

/// Options shared by everything that reports spans.
#[derive(Debug, Clone, Args)]
pub struct OutputArgs {
    /// Output format (its help is each command's own: see [`FormatArg`]).
    #[arg(long, short = 'f', value_enum, default_value_t = Format::Text, hide_possible_values = true)]
    pub format: Format,
    #[command(flatten)]
    pub unit: UnitOpt,
    /// Also print a linear histogram: MIN,MAX,STEP
    ///
    /// Buckets [MIN, MIN+STEP), ... up to MAX, with a header of count, min, max, values outside the
    /// range, mean, variance, SD and median. Values take a unit (250us, 1.5ms); bare numbers are in
    /// --unit.
    #[arg(long, value_name = "MIN,MAX,STEP")]
    pub linear: Option<String>,
    /// Leave out the log2 histogram (text format).
    #[arg(long)]
    pub no_histogram: bool,
    /// Indent JSON output.
    #[arg(long)]
    pub pretty: bool,
    /// Also write an HTML report (stats and plots) to this file.
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<PathBuf>,
}

impl OutputArgs {
    /// The parsed `--linear` spec, if given.
    pub fn linear_spec(&self) -> anyhow::Result<Option<LinearSpec>> {
        self.linear
            .as_deref()
            .map(|text| LinearSpec::parse(text, self.unit.unit()))
            .transpose()
            .map_err(|e| anyhow::anyhow!("invalid --linear: {e}"))
    }
}

impl Named for Unit {
    const ALL: &'static [Self] = &Unit::ALL;
    fn name(self) -> &'static str {
        Unit::name(self)
    }
    fn help(self) -> &'static str {
        match self {
            Unit::Ns => "nanoseconds",
            Unit::Us => "microseconds (WAYLAND_DEBUG's resolution)",
            Unit::Ms => "milliseconds",
            Unit::S => "seconds",
        }
    }
}

impl Named for SpanKind {
    const ALL: &'static [Self] = &SpanKind::ALL;
    fn name(self) -> &'static str {
        self.cli_name()
    }
    fn help(self) -> &'static str {
        match self {
            SpanKind::CommitRelease => "wl_surface.commit → wl_buffer.release",
            SpanKind::FrameDone => "wl_surface.frame → wl_callback.done",
            SpanKind::SyncDone => "wl_display.sync → wl_callback.done",
            SpanKind::Presented => "commit → wp_presentation_feedback.presented",
        }
    }
}

impl Named for GroupBy {
    const ALL: &'static [Self] = &GroupBy::ALL;
    fn name(self) -> &'static str {
        GroupBy::name(self)
    }
    fn help(self) -> &'static str {
        match self {
            GroupBy::None => "one series per span and side",
            GroupBy::Surface => "per wl_surface",
            GroupBy::Object => "per object carrying the span (buffer, callback, feedback)",
            GroupBy::File => "per input file",
        }
    }
}

impl Named for Repeat {
    const ALL: &'static [Self] = &Repeat::ALL;
    fn name(self) -> &'static str {
        Repeat::name(self)
    }
    fn help(self) -> &'static str {
        match self {
            Repeat::KeepLast => "the newer replaces the older (WAYLAND_DEBUG's rule, bcc runqlat)",
            Repeat::KeepFirst => "the older stays (perf sched latency)",
        }
    }
}

impl Named for TraceFormat {
    const ALL: &'static [Self] = &TraceFormat::ALL;
    fn name(self) -> &'static str {
        TraceFormat::name(self)
    }
    fn help(self) -> &'static str {
        match self {
            TraceFormat::Perf => "perf script text",
            TraceFormat::Ftrace => "the tracefs trace file, trace-cmd report (-R, -t, default)",
            TraceFormat::Babeltrace => "babeltrace2 text",
            TraceFormat::Chrome => "Chrome Trace Event JSON",
            TraceFormat::JsonLines => "JSON lines",
            TraceFormat::Csv => "CSV with a header",
            TraceFormat::Strace => "strace -T / ltrace -T (each call a span)",
            TraceFormat::PerfTrace => "perf trace (each system call a span)",
        }
    }
}

impl Named for Clock {
    const ALL: &'static [Self] = &Clock::ALL;
    fn name(self) -> &'static str {
        self.metric()
    }
    fn help(self) -> &'static str {
        match self {
            Clock::Wall => "wall time, spawn to exit",
            Clock::Cpu => "user + system CPU time of the command and its children",
        }
    }
}

/// `--input-format`: a trace format, or `auto` (`None`): detected from the first lines. Named
/// here, not written `Option<…>`, so that clap takes it as one value with a default (`auto`)
/// rather than as an argument that may be absent.
pub type InputFormat = Option<TraceFormat>;

const WAYLAND_ABOUT: &str = "\
Latency distributions from WAYLAND_DEBUG logs.

Reads the log a libwayland client or compositor prints with WAYLAND_DEBUG=1 (client) or
WAYLAND_DEBUG=server, in every libwayland format: [1234567.890] stamps (a 32-bit microsecond
counter that wraps every 71.6 minutes, unwrapped here), 1.26's [HH:MM:SS.uuuuuu] (wraps at
midnight), @ and # ids, {Queue} names, TID#, colour codes, comma decimals. Lines that are not
protocol messages are skipped and counted.

Spans (--span, default: all that occur):
  commit-release  wl_surface.commit that made buffer B current -> next wl_buffer.release of B
                  (a re-commit of B before its release supersedes the earlier commit)
  frame-done      wl_surface.frame -> wl_callback.done of its callback
  sync-done       wl_display.sync -> wl_callback.done of its callback
  presented       commit -> wp_presentation_feedback.presented (discarded ones are counted)

Client and server views are kept apart, so the stderr of a nested compositor (which is both)
is analysed correctly. Object ids are reused after wl_display.delete_id; every object is
tracked as (id, generation).";

const WAYLAND_EXAMPLES: &str = "\
Examples:
  WAYLAND_DEBUG=1 glmark2-es2-wayland 2> client.log
  latscope wayland client.log
  latscope wayland --span commit-release --linear 0,2000,100 client.log
  latscope wayland --format json client.log > before.json
  WAYLAND_DEBUG=1 weston-simple-shm 2>&1 | latscope wayland -     (Ctrl-C prints what was read)

Exit status: 0 success, 1 error (unreadable input; malformed line with --strict), 2 usage.";

/// `latscope wayland`
#[derive(Debug, Args)]
pub struct WaylandArgs {
    #[command(flatten)]
    pub input: InputArgs,
    /// Spans to compute (default: all that occur)
    ///
    /// Comma-separated or repeated.
    #[arg(long, short = 's', value_delimiter = ',', value_parser = named::<SpanKind>())]
    pub span: Vec<SpanKind>,
    /// One series per span and group
    ///
    /// A surface or object is named INTERFACE#ID and a generation: libwayland reuses an id once
    /// its object is destroyed, so `wl_surface#9a` is the first object with id 9 in the log,
    /// `wl_surface#9b` the next one created with that id, and after `z` come `aa`, `ab`, ... A
    /// log that names its connections (wayland-debug's libwayland) puts `<CONN> ` in front.
    #[arg(long, short = 'g', default_value = "none", value_parser = named::<GroupBy>())]
    pub group: GroupBy,
    #[command(flatten)]
    pub output: OutputArgs,
}

impl WaylandArgs {
    /// The library's span options.
    pub fn span_options(&self) -> SpanOptions {
        let mut enabled = [self.span.is_empty(); 4];
        for &kind in &self.span {
            enabled[kind as usize] = true;
        }
        SpanOptions {
            enabled,
            group_by: self.group,
        }
    }
}

const FRAMES_ABOUT: &str = "\
A frame's whole path, from the client's commit to the screen, across processes.

Both sides of a Wayland connection print what they send and dispatch (WAYLAND_DEBUG) with the
same CLOCK_REALTIME stamps. latscope finds each of the client's messages in the compositor's
log (which interleaves every client: by what a message says and when), then follows each frame
(a wl_surface.commit) stage by stage:

  commit_to_compositor      the client sends the commit -> the compositor dispatches it
  compositor_to_frame_done  -> the compositor sends the frame callback's done
  compositor_to_presented   -> the compositor sends wp_presentation_feedback.presented
  presented_to_client       -> the client dispatches presented
  commit_to_presented       the client's whole (the three stages on its path, summed)
  commit_to_display         the commit -> the display time inside presented

The display time is on the compositor's presentation clock; latscope maps it onto the logs'
clock from the data (each display lies between its commit and its presented) and says the
interval and its error bound. Then the pacing: display intervals in refresh periods, the frames
shown later than usual, and in each the stage that ran longest against its median.

Stamps are where each side printed a message: a request's when its sender marshalled it (not
flushed) and when its receiver dispatched it, so a stage includes waits in sockets and queues.
Formatting every message costs both sides time: see docs/guide/frames.md.

With --live, the same stages come from uprobes on a running compositor and its client
(libwayland 1.21 and libffi; root or CAP_BPF, bpftrace), without WAYLAND_DEBUG; weston's
timeline stages are not given live.

A third file, the compositor's own trace of the run (weston's timeline, Mir's LTTng trace), splits
the compositor's part: compositor_to_repaint, repaint, repaint_to_vblank (see
docs/guide/frames.md).";

const FRAMES_EXAMPLES: &str = "\
Examples:
  WAYLAND_DEBUG=server weston --backend=headless-backend.so 2> server.log &
  WAYLAND_DEBUG=1 weston-presentation-shm -f 2> client.log
  latscope frames client.log server.log
  latscope frames -f json client.log server.log > frames.json
  latscope export frames.json --to perfetto -o frames.pftrace   # each frame's path, per process
  # with weston's timeline (add --logger-scopes=timeline,log --log=timeline.log to weston):
  latscope frames client.log server.log timeline.log
  # with Mir's LTTng trace (miral-shell --compositor-report=lttng; babeltrace2 DIR > mir.txt):
  latscope frames client.log server.log mir.txt
  # live, without WAYLAND_DEBUG (root): a running compositor, a client started held
  WAYLAND_DISPLAY=wayland-1 latscope frames --live --compositor-pid $(pidof weston) \\
      --duration 10s -- weston-presentation-shm -f

Exit status: 0 success, 1 error (logs of different runs, no frame, unreadable input), 2 usage.";

/// `latscope frames`
#[derive(Debug, Args)]
pub struct FramesArgs {
    /// The client's WAYLAND_DEBUG log (`WAYLAND_DEBUG=1`; `-`: stdin)
    #[arg(value_name = "CLIENT_LOG", required_unless_present = "live")]
    pub client: Option<PathBuf>,
    /// The compositor's log of the same run (`WAYLAND_DEBUG=server`).
    #[arg(value_name = "SERVER_LOG", required_unless_present = "live")]
    pub server: Option<PathBuf>,
    /// The compositor's own trace of the same run: its own stages
    ///
    /// The compositor's own trace of the same run: weston's timeline
    /// (`--logger-scopes=timeline,log --log=FILE`), or Mir's LTTng trace as babeltrace2 prints
    /// it (`mir_server_wayland:*`, and `mir_server_compositor:*` with
    /// `--compositor-report=lttng`). Each frame's repaint, and (weston's) the presentation clock
    /// pinned closer.
    #[arg(value_name = "COMPOSITOR_TRACE")]
    pub timeline: Option<PathBuf>,
    /// Farthest a message lies from its counterpart
    ///
    /// The farthest a message may lie from its counterpart in the other log; a unit: 500ms, 2s;
    /// bare numbers are µs. Beyond it, a message is not found.
    #[arg(long, value_name = "TIME", default_value = "1s", value_parser = crate::values::duration_us)]
    pub window: u64, // ns
    /// Frames kept one by one in the JSON document
    ///
    /// `records`: for `export` and the report's timeline; the stages' distributions count every
    /// frame.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub max_frames: usize,
    /// Trace a running compositor and its client live, without WAYLAND_DEBUG
    ///
    /// Uprobes on libwayland 1.21 and libffi (root or CAP_BPF, bpftrace): give
    /// --compositor-pid, and --client-pid or the client's command after `--`.
    #[arg(long, requires = "compositor_pid", conflicts_with_all = ["client", "server", "timeline"])]
    pub live: bool,
    /// With --live: the compositor's pid
    #[arg(long, value_name = "PID", requires = "live")]
    pub compositor_pid: Option<u32>,
    /// With --live: a running client's pid (else the command after `--`)
    #[arg(
        long,
        value_name = "PID",
        requires = "live",
        conflicts_with = "command"
    )]
    pub client_pid: Option<u32>,
    /// With --live: stop after this long, whole seconds (bare: s); else at Ctrl-C or when the
    /// client exits
    #[arg(long, value_name = "TIME", requires = "live", value_parser = crate::values::whole_seconds)]
    pub duration: Option<u64>,
    /// With --live: the client to start, held until every probe is attached
    #[arg(last = true, value_name = "CLIENT_COMMAND", requires = "live")]
    pub command: Vec<String>,
    #[command(flatten)]
    pub output: OutputArgs,
}

const SPANS_ABOUT: &str = "\
Latency from any trace: a start event and an end event paired by a key, as distributions.

Inputs (detected from their first lines; --input-format to force):
  perf        `perf script` text (default fields, -F layouts, --ns stamps; the call stacks
              of `perf record -g` are skipped)
  ftrace      the tracefs `trace` file, `trace-cmd report -R` (the stacks of the
              `stacktrace` option are skipped)
  babeltrace  babeltrace2's text of CTF traces (LTTng): [HH:MM:SS.n] (midnight unwrapped),
              --clock-seconds or --clock-date stamps; every `{ name = value }` is a field
  chrome      Chrome Trace Event JSON ({\"traceEvents\": [...]} or [...], streamed; a
              truncated file keeps every complete event). Its own spans (X with dur, B/E per
              thread, async b/e) are taken as they are; other events feed the rules
  jsonl, csv  one event per line/row: --time FIELD (--time-unit), --name FIELD

Rules: --span NAME=START..END (repeatable) or --start START --end END, where an endpoint is
EVENT[:FIELD==VALUE][:FIELD!=VALUE][:FIELD^=PREFIX]; `sched:sched_wakeup` also matches
ftrace's `sched_wakeup`. --key pairs starts and ends: `pid` (equal fields), `pid=next_pid`
(the start's pid with the end's next_pid), `a,b` (several); one --key for all rules, or one
per --span in order. An event is tried as an end before it is tried as a start. Rules with
the same NAME share their open spans (one end closes one span).

Counted, not sampled: starts never ended (unmatched), starts replaced by a newer one with the
same key (superseded; --keep first keeps the older, as perf sched latency does), ends with no
start (orphan ends), ends stamped before their start (backwards), events missing a key field
(with the first file:line), lines that are not events (with the first file:line).

perf's and ftrace's prefix gives common_comm, common_pid (the thread) and common_cpu.
Every value is an integer number of nanoseconds in the trace's own clock.";

const SPANS_EXAMPLES: &str = "\
Examples:
  perf record -e sched:sched_wakeup,sched:sched_switch -a -- sleep 5; perf script --ns > t.txt
  latscope spans --start sched:sched_wakeup --end sched:sched_switch --key pid=next_pid --by comm t.txt
  latscope spans --span 'wait=sched:sched_wakeup..sched:sched_switch' --span 'wait=sched:sched_switch:prev_state^=R..sched:sched_switch' \\
      --key pid=next_pid --key prev_pid=next_pid --keep first t.txt     # what perf sched latency measures
  babeltrace2 lttng-trace/ > t.txt; latscope spans --span 'frame=mir_server_compositor:frame_start..mir_server_compositor:frame_end' --key vtid t.txt
  latscope spans trace.json                                     # Chrome JSON: its own spans
  latscope spans --time t --time-unit us --name event --span 'req=start..done' --key id events.jsonl
  latscope spans ... --format json > before.json; latscope compare before.json after.json

Exit status: 0 success, 1 error (unreadable input, unknown format), 2 usage.";

/// `latscope spans`
#[derive(Debug, Args)]
pub struct SpansArgs {
    #[command(flatten)]
    pub input: InputArgs,
    /// A span: NAME=START..END (repeatable).
    #[arg(long, value_name = "NAME=START..END")]
    pub span: Vec<String>,
    /// The start event of a single span (with --end).
    #[arg(long, value_name = "EVENT[:FILTER]", requires = "end")]
    pub start: Option<String>,
    /// The end event of a single span (with --start).
    #[arg(long, value_name = "EVENT[:FILTER]", requires = "start")]
    pub end: Option<String>,
    /// The name of the --start/--end span (default: START_to_END).
    #[arg(long, value_name = "NAME")]
    pub span_name: Option<String>,
    /// Fields pairing starts and ends (FIELD, START=END, a,b)
    ///
    /// FIELD pairs equal fields, START_FIELD=END_FIELD the start's field with the end's, a comma
    /// list several. One --key for all rules, or one per --span in order (default: none, every
    /// start pairs with the next end).
    #[arg(long, value_name = "FIELD[=FIELD],...")]
    pub key: Vec<String>,
    /// One series per value of this field of the start event
    #[arg(long, value_name = "FIELD")]
    pub by: Option<String>,
    /// Most --by values with a series of their own
    ///
    /// Spans of further values are folded into one '(other)' series, with a warning. Each series
    /// costs about 3 KiB, 20 to 40 bytes a distinct latency of its spans, and 40 to 170 KiB of
    /// histograms past 256 of them.
    #[arg(long, value_name = "N", default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_series: u32,
    /// Two starts with one key: keep the last (default) or the first.
    #[arg(long, default_value = "last", value_parser = named::<Repeat>())]
    pub keep: Repeat,
    /// The input format.
    #[arg(long, default_value = "auto", value_parser = named_or_auto::<TraceFormat>("detect from the first lines"))]
    pub input_format: InputFormat,
    /// jsonl/csv: the column holding the time stamp.
    #[arg(long, default_value = "ts", value_name = "FIELD")]
    pub time: String,
    /// jsonl/csv: the stamp's unit.
    #[arg(long, default_value = "ns", value_parser = named::<Unit>())]
    pub time_unit: Unit,
    /// jsonl/csv: the column holding the event's name.
    #[arg(long = "name", default_value = "name", value_name = "FIELD")]
    pub name_field: String,
    /// List this many slowest spans of each series
    ///
    /// With their start time in the trace (of spans that took as long, the earliest).
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub slowest: usize,
    #[command(flatten)]
    pub max_spans: MaxSpans,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `latscope demo`
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Skip the IPC part (the WAYLAND_DEBUG part alone takes milliseconds).
    #[arg(long)]
    pub no_ipc: bool,
    /// Skip the X11 part (run when Xvfb is installed or $DISPLAY is set).
    #[arg(long)]
    pub no_x11: bool,
    /// Skip the Wayland lab part (a private weston headless, a few seconds).
    #[arg(long)]
    pub no_wayland_lab: bool,
    #[command(flatten)]
    pub output: OutputArgs,
}

const PROBES_EXAMPLES: &str = "\
Each probe is printed as the spec `latscope live` takes: usdt:PATH:PROVIDER:NAME.

Examples:
  latscope probes /usr/lib/x86_64-linux-gnu/libmirserver.so.58
  latscope probes --pid $(pidof miral-shell)
  latscope probes --format json ./my-server";

/// `latscope probes`
#[derive(Debug, Args)]
pub struct ProbesArgs {
    /// Executables or shared libraries.
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Also every object mapped by this running process.
    #[arg(long)]
    pub pid: Option<u32>,
    #[command(flatten)]
    pub out: FormatArg,
}

const LIVE_ABOUT: &str = "\
Trace kernel and user-space probes live, aggregated in the kernel.

A span pairs a start probe with an end probe: --span NAME=START..END. A probe is
  tracepoint:SUBSYS:NAME      a kernel tracepoint (fields from its tracefs format file)
  kprobe:FUNC, kretprobe:FUNC entry and return of a kernel function
  usdt:PATH:PROVIDER:NAME     a USDT probe (list them with: latscope probes PATH)
  uprobe:PATH:SYMBOL          entry of a function
  uretprobe:PATH:SYMBOL       return of a function
followed by filters: tracepoint:sched:sched_wakeup:comm==myapp. The end pairs with the start
that has the same key (--key): by default arg0 for two USDT probes, tid otherwise; --key
pid=next_pid pairs a start's pid with an end's next_pid. The grammar is `latscope spans`'s:
a rule tried on a perf trace runs live with the probe kind in front.

Which processes are traced:
  -- COMMAND        the command and every process it forks, from its first instruction (latscope
                    starts it, held until every probe is attached; scripts, PATH look-up and
                    arguments with spaces work); --this-process-only: the command alone
  --pid PID         that process; --children: it and every process it forks from then on
  neither           every process
A span starts only in a traced process, but may end in any: the key decides (a request's reply
in a server, a fence signalled in an interrupt). A tracepoint with its own pid field is about
that task (sched_wakeup: the woken one) and is filtered by it; other kernel probes by the task
the kernel is running (a context switch: the previous task; filter on next_comm==app). At most 4096 processes are followed at
once; latscope warns when the map is full.

latscope generates a bpftrace program (see it with --print-program) that computes each latency
in the kernel and folds it into a log-linear histogram with 8 buckets per power of two, so
percentiles are within 12.5% (each is printed with its error bound). bpftrace's own hist() has
one bucket per power of two. Every --interval seconds it prints each span's stats and histogram;
on Ctrl-C, at --duration, or when the traced process exits it prints the totals and, with
--save, writes them as JSON (the `spans` document of `latscope wayland`) to compare later. A
probe that never fired is named in a warning; a run that measured nothing exits with 1 and
saves nothing.

Needs root (or CAP_BPF and CAP_PERFMON) and the Debian package bpftrace; tracepoints need
tracefs (mounted at /sys/kernel/tracing when missing).";

const LIVE_EXAMPLES: &str = "\
Examples:
  # run-queue latency of one program (bpftrace's runqlat.bt, as a distribution per interval)
  latscope live --key pid=next_pid \\
    --span runq=tracepoint:sched:sched_wakeup:comm==myapp..tracepoint:sched:sched_switch
  # dma-fence emit -> signal across processes and interrupts, keyed by the fence
  latscope live --key context,seqno \\
    --span fence=tracepoint:dma_fence:dma_fence_emit..tracepoint:dma_fence:dma_fence_signaled
  # i915 request submit -> retire (seed 004), per engine
  latscope live --key ctx,seqno --by class \\
    --span request=tracepoint:i915:i915_request_add..tracepoint:i915:i915_request_retire
  # a library function over every process a script starts
  L=/usr/lib/x86_64-linux-gnu/libKF5Screen.so.8
  latscope live --span q=uprobe:$L:_ZN7KScreen18GetConfigOperation5startEv..uprobe:$L:_ZN7KScreen15ConfigOperation10emitResultEv \\
    -- /bin/sh -c 'for i in $(seq 40); do kscreen-doctor -o; done'
  # Mir: buffer commits per client (arg0 is the wl_client) every 5 s, and composition time
  M=/usr/lib/x86_64-linux-gnu/libmirserver.so.58
  latscope live --pid $(pidof miral-shell) --by arg0 \\
    --rate usdt:$M:mir_server_wayland:sw_buffer_committed \\
    --span frame=usdt:$M:mir_server_compositor:began_frame..usdt:$M:mir_server_compositor:finished_frame
  # bytes per read() of one program, from the syscall's return value
  latscope live --value bytes=kretprobe:ksys_read:retval -- ./server
  # serve the spans to Prometheus (needs --enable-feature=native-histograms for native buckets)
  latscope live --serve 127.0.0.1:9464 --label host=$(hostname) --pid 1234 \\
    --span work=uprobe:/usr/bin/server:handle_request..uretprobe:/usr/bin/server:handle_request
  # then in PromQL: histogram_quantile(0.99, rate(latscope_span_nanoseconds{span=\"work\"}[1m]))

";

/// `latscope live`
#[derive(Debug, Args)]
#[command(
    mut_arg("save", |a| a
        .help("Write the final totals as JSON to FILE")
        .long_help("Write the final totals as JSON: the `spans` document, plus rates and values.")),
    mut_arg("max_spans", |a| a
        .help("With --record-spans: keep the first N spans")
        .long_help("With --record-spans: keep the first N spans (and always the slowest of each series).")
        .default_value("100000")
        .requires("record_spans")),
)]
pub struct LiveArgs {
    /// A latency span: NAME=START..END (repeatable).
    #[arg(long, value_name = "NAME=START..END")]
    pub span: Vec<String>,
    /// What pairs an end with its start (FIELD, START=END, a,b)
    ///
    /// FIELD pairs equal fields, START_FIELD=END_FIELD the start's field with the end's, a comma
    /// list several. Default: arg0 for two USDT probes, else tid. Once for every span, or once per
    /// span in order.
    #[arg(long, value_name = "FIELD[=FIELD],...")]
    pub key: Vec<String>,
    /// One histogram per value of this field
    ///
    /// tid, pid, comm, cpu, argN, retval or a tracepoint field, taken at each span's end probe and
    /// at each rate's and value's probe.
    #[arg(long, value_name = "FIELD")]
    pub by: Option<String>,
    /// Count a probe's events per interval (repeatable)
    ///
    /// PROBE with filters, as in a span's endpoint.
    #[arg(long, value_name = "PROBE[:FILTER...]")]
    pub rate: Vec<String>,
    /// The distribution of an integer field (repeatable)
    ///
    /// NAME=PROBE[:FILTER...]:FIELD, e.g. size=tracepoint:syscalls:sys_exit_read:ret.
    #[arg(long, value_name = "NAME=PROBE:FIELD")]
    pub value: Vec<String>,
    /// Trace this running process (with --children: and its children)
    #[arg(long, conflicts_with = "command")]
    pub pid: Option<u32>,
    /// With --pid: also every process it forks from then on
    #[arg(long, requires = "pid")]
    pub children: bool,
    /// With a COMMAND: trace only its own process, not what it forks
    #[arg(long)]
    pub this_process_only: bool,
    /// Time between reports, whole seconds (bare: s), at most 1h
    ///
    /// 5, 5s, 1m is 60s; from 1 s to 60m (3600 s).
    #[arg(long, default_value = "5", value_parser = interval_seconds)]
    pub interval: u64,
    /// Stop after this long, whole seconds (bare: s)
    ///
    /// 14, 14s, 2m is 120s.
    #[arg(long, value_parser = whole_seconds)]
    pub duration: Option<u64>,
    /// Report everything since the start at each interval
    #[arg(long)]
    pub cumulative: bool,
    /// Print the generated bpftrace program and exit (no root needed).
    #[arg(long)]
    pub print_program: bool,
    #[command(flatten)]
    pub save: SaveArg,
    #[command(flatten)]
    pub out: FormatArg,
    #[command(flatten)]
    pub unit: UnitOpt,
    /// Print only the final totals, not every interval.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Also keep individual spans in the --save document
    ///
    /// Each with its start (in the kernel's monotonic clock), latency and group, for `latscope
    /// export --to chrome-json|perfetto` and the report's latency-against-time view. The histograms
    /// stay exact; each kept span costs one line of bpftrace output.
    #[arg(long, requires = "save")]
    pub record_spans: bool,
    #[command(flatten)]
    pub max_spans: MaxSpans,
    /// Serve the snapshots to Prometheus on http://ADDR:PORT/metrics
    ///
    /// Native histograms over protobuf, OpenMetrics text otherwise; a bare PORT binds 127.0.0.1.
    #[arg(long, value_name = "ADDR:PORT")]
    pub serve: Option<String>,
    /// A label on every served series, e.g. host=lab1 (repeatable)
    #[arg(long, value_name = "KEY=VALUE", requires = "serve")]
    pub label: Vec<String>,
    /// A command to start and trace, with every process it forks
    ///
    /// Traced from its first instruction: latscope holds it until every probe is attached.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// `latscope lab ...`
#[derive(Debug, Subcommand)]
pub enum LabCommand {
    /// A submission pipeline whose queue coalesces work: per-stage latency, and why
    /// "total time ÷ batches" misleads.
    #[command(long_about = QUEUE_ABOUT, after_long_help = QUEUE_EXAMPLES)]
    Queue(QueueArgs),
    /// What each IPC transport costs per message, side by side, as distributions: in-process
    /// call, channel, pipe, Unix sockets, TCP, shared-memory rings, D-Bus.
    #[command(long_about = IPC_ABOUT, after_long_help = IPC_EXAMPLES)]
    Ipc(IpcArgs),
    /// The peer program of a D-Bus process peer (started by `latscope lab ipc`).
    #[command(hide = true)]
    IpcPeer(IpcPeerArgs),
    /// Requests on a real X server, per request: image uploads over the socket vs MIT-SHM
    /// with K segments, and the RandR screen-configuration query in- vs out-of-process.
    #[command(long_about = X11_ABOUT, after_long_help = X11_EXAMPLES)]
    X11(X11Args),
    /// The D-Bus backend of `latscope lab x11 config --via dbus` (started by the lab).
    #[command(hide = true)]
    X11Backend(X11BackendArgs),
    /// A native Wayland client that times its own round trips, frames (commit → release,
    /// frame → done, commit → presented, buffer waits) and output queries on a compositor.
    #[command(long_about = WAYLAND_LAB_ABOUT, after_long_help = WAYLAND_LAB_EXAMPLES)]
    Wayland(WaylandLabArgs),
    /// The D-Bus helper of `lab wayland outputs --via dbus` (started by latscope).
    #[command(hide = true)]
    WaylandPeer(IpcPeerArgs),
    /// A GPU submission, stage by stage (launch call, submit → start, execute, end → host,
    /// end → synchronize), beside gem_exec_nop's time per batch: the CUDA driver API.
    #[command(long_about = GPU_ABOUT, after_long_help = GPU_EXAMPLES)]
    Gpu(GpuArgs),
}

const GPU_ABOUT: &str = "\
A GPU submission, stage by stage, as distributions (seed 004: what gem_exec_nop's time per batch
hides).

Each request launches a kernel that stamps the device's timer (%globaltimer) at entry and exit
into host-mapped memory and then sets a flag the host polls. Per request: launch_call (host CPU
inside the launch call), submit_to_start (host before the launch -> the kernel's first
instruction), execute, end_to_host (the kernel's last stamp -> the host sees the flag),
end_to_sync (-> the stream's synchronize returns) and total; per row, the time per batch (wall
÷ requests, what gem_exec_nop reports) beside them.

The device's timer is mapped onto the host's CLOCK_MONOTONIC by ping-pong through host-mapped
memory before and after every row, interpolated between the two; the document records the
offsets, the drift and the error bound. A duration that comes out negative is counted beside
its stage, never clamped.

The CUDA driver (libcuda.so.1) is loaded at run time and compiles the kernels from PTX: no CUDA
toolkit is needed. Every list option makes one row per value (a cross product).

Patterns (--pattern):
  isolated      every group of streams x burst requests on an idle device: the previous group
                seen, synchronized, then --spacing
  fixed-rate    a launch every --spacing from the start (open loop)
  back-to-back  each launch --spacing after the previous launch call returned

Durations take a unit (2us, 1.5ms, 500ns); bare --spacing numbers are µs, bare spin:T ns.";

const GPU_EXAMPLES: &str = "\
Examples:
  latscope lab gpu                                          # isolated, spacing 0,1,2,4,8,16 µs
  latscope lab gpu --pattern back-to-back,isolated --spacing 0,4us
  latscope lab gpu --streams 1,2,4 --burst 1,16 --pattern back-to-back --spacing 0
  latscope lab gpu --kernel nop,spin:2us,grid:64 --sync spin,blocking --spacing 16
  latscope lab gpu --launch stream,graph:8 --format json --save gpu.json; latscope report gpu.json -o gpu.html";

/// `latscope lab gpu`
#[derive(Debug, Args)]
pub struct GpuArgs {
    /// How requests are spaced: isolated, fixed-rate, back-to-back (a list)
    #[arg(long, value_delimiter = ',', default_value = "isolated", value_parser = gpu_pattern)]
    pub pattern: Vec<latscope::lab::gpu::Pattern>,
    /// The spacing of the pattern (a list; bare numbers are µs)
    #[arg(long, value_delimiter = ',', default_value = "0,1,2,4,8,16", value_parser = duration_us)]
    pub spacing: Vec<u64>,
    /// Streams the requests go round-robin over (a list)
    #[arg(long, value_delimiter = ',', default_value = "1", value_parser = count)]
    pub streams: Vec<u64>,
    /// Consecutive requests on one stream before the next (a list)
    #[arg(long, value_delimiter = ',', default_value = "1", value_parser = count)]
    pub burst: Vec<u64>,
    /// The kernel: nop, spin:T (spins T on the device's timer), grid:N (N blocks) (a list)
    #[arg(long, value_delimiter = ',', default_value = "nop", value_parser = gpu_kernel)]
    pub kernel: Vec<latscope::lab::gpu::Kernel>,
    /// How requests are launched: stream (one call each), graph:G (one CUDA Graph of G) (a list)
    #[arg(long, value_delimiter = ',', default_value = "stream", value_parser = gpu_launch)]
    pub launch: Vec<latscope::lab::gpu::Launch>,
    /// How a synchronize waits (the context's schedule flag): spin, yield, blocking (a list)
    #[arg(long, value_delimiter = ',', default_value = "spin", value_parser = gpu_sync)]
    pub sync: Vec<latscope::lab::gpu::SyncMode>,
    /// Measured requests per row
    #[arg(long, default_value_t = 2_000, value_parser = count)]
    pub requests: u64,
    /// Requests run before measuring each row (not reported)
    #[arg(long, default_value_t = 100)]
    pub warmup: u64,
    /// The CUDA device's index
    #[arg(long, default_value_t = 0)]
    pub device: i32,
    #[command(flatten)]
    pub save: SaveArg,
    #[command(flatten)]
    pub out: FormatArg,
    #[command(flatten)]
    pub unit: UnitOpt,
}

fn gpu_pattern(text: &str) -> Result<latscope::lab::gpu::Pattern, String> {
    use latscope::lab::gpu::Pattern;
    Pattern::ALL
        .into_iter()
        .find(|p| p.name() == text.trim())
        .ok_or_else(|| format!("unknown pattern '{text}' (isolated, fixed-rate, back-to-back)"))
}

fn gpu_sync(text: &str) -> Result<latscope::lab::gpu::SyncMode, String> {
    use latscope::lab::gpu::SyncMode;
    SyncMode::ALL
        .into_iter()
        .find(|p| p.name() == text.trim())
        .ok_or_else(|| format!("unknown sync '{text}' (spin, yield, blocking)"))
}

fn gpu_kernel(text: &str) -> Result<latscope::lab::gpu::Kernel, String> {
    text.parse()
}

fn gpu_launch(text: &str) -> Result<latscope::lab::gpu::Launch, String> {
    text.parse()
}

const QUEUE_ABOUT: &str = "\
A submission pipeline whose queue coalesces work (the i915 gem_exec_nop critique).

One submitter prepares requests (--prep). If the engine is idle it submits the request itself
(--submit), otherwise it queues it at no cost. The engine executes each request (--exec); when a
group ends, a completion handler takes everything queued, spends --irq, and submits it all as one
group (--submit). One global lock serialises submissions and handlers. The submitter pauses
--gap between requests and blocks while --ring requests are outstanding.

--model (default) runs an exact, deterministic event-driven model; --real runs the same pipeline
on real threads with calibrated busy work. Both report per-batch time (last completion ÷
requests, what gem_exec_nop reports) next to the per-request latency and each stage's
min/p50/p99/max. --sweep shows where the two rank configurations in opposite orders.

Durations take a unit (2us, 1.5ms, 500ns); bare numbers are µs.";

const QUEUE_EXAMPLES: &str = "\
Examples:
  latscope lab queue --timeline 20                      # the seed's example, gap 0
  latscope lab queue --sweep gap=0,1,2,3,4,5            # where per-batch time and latency disagree
  latscope lab queue --sweep engines=1,2 --sweep burst=1,4,16,64
  latscope lab queue --real --prep 20us --submit 40us --exec 30us --irq 20us --batches 2000 --sweep gap=0,40";

/// `latscope lab queue`
#[derive(Debug, Args)]
pub struct QueueArgs {
    /// Run the exact model (the default).
    #[arg(long, conflicts_with = "real")]
    pub model: bool,
    /// Run real threads instead of the model.
    #[arg(long)]
    pub real: bool,
    /// Preparing a request.
    #[arg(long, default_value = "2us", value_parser = duration_us)]
    pub prep: u64,
    /// Submitting a group to an idle engine.
    #[arg(long, default_value = "4us", value_parser = duration_us)]
    pub submit: u64,
    /// Executing one request.
    #[arg(long, default_value = "3us", value_parser = duration_us)]
    pub exec: u64,
    /// Completion handling, per group.
    #[arg(long, default_value = "2us", value_parser = duration_us)]
    pub irq: u64,
    /// Pause between requests.
    #[arg(long, default_value = "0", value_parser = duration_us)]
    pub gap: u64,
    /// Number of requests (at least 1).
    #[arg(long, default_value_t = 10_000, value_parser = count)]
    pub batches: u64,
    /// At most this many requests outstanding (default: unbounded)
    #[arg(long, value_parser = count)]
    pub ring: Option<u64>,
    /// Number of engines.
    #[arg(long, default_value_t = 1, value_parser = count)]
    pub engines: u64,
    /// Consecutive requests to one engine before switching.
    #[arg(long, default_value_t = 1, value_parser = count)]
    pub burst: u64,
    /// Vary a parameter: NAME=v1,v2,... (repeat for a cross product)
    ///
    /// ring takes `none`.
    #[arg(long, value_name = "NAME=VALUES")]
    pub sweep: Vec<String>,
    /// Print the first N events as a timeline (model only).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub timeline: usize,
    #[command(flatten)]
    pub max_spans: MaxSpans,
    #[command(flatten)]
    pub out: FormatArg,
    #[command(flatten)]
    pub unit: UnitOpt,
}

const IPC_ABOUT: &str = "\
What each IPC transport costs per message, measured side by side as distributions.

Every message is timed with CLOCK_MONOTONIC (its own cost is measured first and printed). Each
configuration (transport × peer × pattern × payload) reports min, p50, p99, p99.9 and max of
every measured message, throughput apart from latency, and the CPU time and context switches
per message of the client, the peer and the broker (dbus-daemon) together.

Transports (--transport, default: all that can run here):
  inproc          a direct call in the same thread: the floor
  channel         two threads over std channels (threads only)
  pipe            two pipes
  unix-stream     socketpair(AF_UNIX, SOCK_STREAM)
  unix-seqpacket  socketpair(AF_UNIX, SOCK_SEQPACKET)
  tcp             TCP on 127.0.0.1, TCP_NODELAY
  shm-futex       a shared-memory ring of --slots slots, the waiting side sleeps in a futex
  shm-spin        the same ring, the waiting side spins (a core for the lowest latency)
  dbus            method calls through a private dbus-daemon that latscope starts

Peers (--peer): a second thread, or a second process (forked; a fresh latscope for D-Bus).

Patterns (--pattern, default ping-pong; `all` for every one):
  ping-pong   send, wait for the echo: latency is the round trip
  stream      one way, buffered by the writer and written once --flush-bytes are buffered
              (Xlib/XCB flush 4096 bytes, old Xlib 16384; 0 writes every message at once)
  burst       --burst messages, then one acknowledgement
  segments    the payload goes into one of --segments shared-memory segments, announced by
              a 16-byte note; once all are used the writer syncs (a round trip): MIT-SHM style
  open-loop   ping-pong at --rate messages/s; latency from the intended send time
              (coordinated omission corrected, as wrk2 does), printed beside the uncorrected
One-way latency runs from the moment the writer starts sending a message (waiting for buffer
space, a flush or a sync included) to the moment the peer holds all of it.

Every message carries its sequence number; the peer checks it (--verify: every byte). USDT
probes latscope_ipc:send, recv, peer_recv and peer_send (arg0 = sequence number) let
`latscope live` trace the same exchange from the kernel.

Sizes take B, KiB, MiB (or K, M); durations take ns, us, ms, s.";

const IPC_EXAMPLES: &str = "\
Examples:
  latscope lab ipc                                        # every transport, ping-pong, 8 B / 1 KiB / 64 KiB
  latscope lab ipc --transport inproc,dbus --peer process --payload 1KiB   # libkscreen: in-process vs D-Bus
  latscope lab ipc --transport unix-stream --pattern stream,segments --payload 1KiB \\
      --flush-bytes 4096,16384 --segments 1,4,8          # Java2D: socket buffer vs MIT-SHM segments
  latscope lab ipc --transport pipe --peer process --payload 4 --count 100000      # vs perf bench sched pipe
  latscope lab ipc --pattern open-loop --rate 1000,50000 --transport unix-stream,dbus
  latscope lab ipc --format json --save ipc.json; latscope compare before.json ipc.json
  latscope lab ipc --transport pipe --max-spans 10000 --save ipc.json   # each message, for a timeline:
      latscope export ipc.json --to perfetto -o ipc.pftrace

Exit status: 0 success, 1 error (a configuration failed, a peer died), 2 usage.";

/// `latscope lab ipc`
#[derive(Debug, Args)]
pub struct IpcArgs {
    /// Transports, comma-separated (default: all that can run here).
    #[arg(long, short = 't', value_delimiter = ',')]
    pub transport: Vec<String>,
    /// Patterns, a list or all: ping-pong, stream, burst, …
    ///
    /// ping-pong, stream, burst, segments, open-loop (comma-separated; each is described above), or
    /// all.
    #[arg(long, short = 'p', value_delimiter = ',', default_value = "ping-pong")]
    pub pattern: Vec<String>,
    /// Where the peer runs: thread, process (a list)
    #[arg(long, value_delimiter = ',', default_value = "thread,process")]
    pub peer: Vec<String>,
    /// Message sizes, a list (at most 64 MiB)
    ///
    /// The defaults: 8 B, a 32×32 8-bit mask (1 KiB), 64 KiB.
    #[arg(long, value_delimiter = ',', default_value = "8,1KiB,64KiB", value_parser = payload)]
    pub payload: Vec<usize>,
    /// stream: flush at this many bytes (a list)
    ///
    /// The writer buffers messages and writes them once this many bytes are buffered.
    #[arg(long, value_delimiter = ',', default_value = "4096", value_parser = size)]
    pub flush_bytes: Vec<usize>,
    /// burst: messages per acknowledgement (a list).
    #[arg(long, value_delimiter = ',', default_value = "8", value_parser = count)]
    pub burst: Vec<u64>,
    /// segments: segments used before each sync (a list)
    #[arg(long, value_delimiter = ',', default_value = "4", value_parser = count)]
    pub segments: Vec<u64>,
    /// open-loop: messages per second (a list).
    #[arg(long, value_delimiter = ',', default_value = "10000", value_parser = count)]
    pub rate: Vec<u64>,
    /// Measured messages per configuration (at most)
    ///
    /// At least 1.
    #[arg(long, short = 'n', default_value_t = 10_000, value_parser = count)]
    pub count: u64,
    /// Messages before measuring.
    #[arg(long, default_value_t = 200)]
    pub warmup: u64,
    /// Most time measuring one configuration (bare: s)
    ///
    /// 0.5s, 200ms.
    #[arg(long, default_value = "0.5s", value_parser = duration_s)]
    pub max_time: std::time::Duration,
    /// Slots of a shared-memory ring.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..))]
    pub slots: u32,
    /// Bytes of a shared-memory ring, all slots together
    ///
    /// A slot holds ring-bytes / slots.
    #[arg(long, default_value = "1MiB", value_parser = size)]
    pub ring_bytes: usize,
    /// Compare every byte of every message
    ///
    /// By default, the stamped header and the last byte are checked.
    #[arg(long)]
    pub verify: bool,
    #[command(flatten)]
    pub max_spans: MaxSpans,
    /// Also print each configuration's histogram.
    #[arg(long)]
    pub detail: bool,
    /// Refuse a run of more configurations than this
    ///
    /// Before running anything: the product of the lists; each configuration runs for up to
    /// --max-time.
    #[arg(long, default_value_t = 1000, value_parser = count)]
    pub max_configs: u64,
    #[command(flatten)]
    pub out: FormatArg,
    #[command(flatten)]
    pub save: SaveArg,
}

/// `latscope lab ipc-peer`
#[derive(Debug, Args)]
pub struct IpcPeerArgs {
    /// The peer's specification, as written by the lab.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub spec: Vec<String>,
}

const X11_ABOUT: &str = "\
Requests on a real X server, timed one by one, as distributions.

The server: --display, else $DISPLAY, else a private Xvfb that latscope starts (no TCP, its own
authorization cookie, a free display number) and stops at the end. The report names it.

Patterns (any of them; several run one after the other):
  round-trip  GetInputFocus and its reply (what XSync sends): the floor of any synchronous call
  upload      images into a pixmap of --depth, --size WxH, by --method:
                put  PutImage (ZPixmap) over the socket, then a round trip to know it is drawn
                shm  ShmPutImage from --segments K MIT-SHM segments (memfds passed by fd); a
                     segment is rewritten only after the server's ShmCompletion event for it,
                     so K uploads are in flight: latency grows with K, time per upload shrinks
              --pipelined issues back to back with one sync at the end (x11perf's -putimageN /
              -shmputN; shm then reuses one segment unsafely): the request stream only.
              After each configuration the pixmap is read back (GetImage) and compared with the
              last image uploaded.
  config      libkscreen's query: RandR GetScreenResourcesCurrent, GetOutputInfo and the EDID
              property of every output, GetCrtcInfo of every CRTC. --via inproc runs it here;
              --via dbus asks a backend process over a private dbus-daemon, which returns the
              configuration serialized. --cache on answers from the last result until a RandR
              notify event says it changed (libkscreen's backends cache).

Comma lists (--method, --size, --depth, --segments, --via, --cache) make a cross product, one
row each, fastest median first. Per row: min/p50/p99/max latency, operations/s and MB/s (apart
from latency), context switches and CPU time per operation of the client, the X server (found
by the socket's peer credentials, read from /proc), the backend and dbus-daemon.

Sizes take WxH; durations take ns, us, ms, s.";

const X11_EXAMPLES: &str = "\
Examples:
  latscope lab x11 upload --method put,shm --segments 1,4,16,64     # Java2D: 32x32 A8 masks, socket vs MIT-SHM
  latscope lab x11 upload --size 10x10,100x100 --depth 24 --pipelined --compare-x11perf   # x11perf on the same server, rates and ratios
  latscope lab x11 config --via inproc,dbus --cache off,on           # libkscreen: in-process vs the D-Bus backend
  latscope lab x11 round-trip upload config --display :0 --format json --save x11.json
  latscope compare before.json x11.json; latscope report x11.json -o x11.html
  latscope lab x11 upload --max-spans 5000 --save x11.json; latscope export x11.json --to chrome-json -o x11.trace.json

Exit status: 0 success, 1 error (no server, the server died, a configuration failed), 2 usage.";

/// `latscope lab x11`
#[derive(Debug, Args)]
pub struct X11Args {
    /// What to measure: round-trip, upload, config (default: all three).
    #[arg(value_name = "PATTERN")]
    pub patterns: Vec<String>,
    /// The X server (default: $DISPLAY, else a private Xvfb).
    #[arg(long)]
    pub display: Option<String>,
    /// upload: put (over the socket), shm (MIT-SHM)
    ///
    /// A list: PutImage over the socket, ShmPutImage from MIT-SHM segments.
    #[arg(long, value_delimiter = ',', default_value = "put,shm")]
    pub method: Vec<String>,
    /// upload: image sizes WxH, comma-separated
    ///
    /// Java2D's mask tiles are 32x32.
    #[arg(long, value_delimiter = ',', default_value = "32x32", value_parser = crate::values::wxh)]
    pub size: Vec<(u16, u16)>,
    /// upload: the pixmap's depth: 8, 24 or 32 (a list)
    ///
    /// 8 is an alpha mask.
    #[arg(long, value_delimiter = ',', default_value = "8", value_parser = crate::values::depth)]
    pub depth: Vec<u8>,
    /// upload with shm: segments rotated (a list)
    #[arg(long, value_delimiter = ',', default_value = "1,4,16,64", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub segments: Vec<u32>,
    /// upload: issue back to back, one sync at the end (as x11perf)
    #[arg(long)]
    pub pipelined: bool,
    /// config: inproc, dbus (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "inproc,dbus")]
    pub via: Vec<String>,
    /// config: off, on (a list): answer from a cache
    ///
    /// on: answer from the last result until a RandR event says it changed.
    #[arg(long, value_delimiter = ',', default_value = "off")]
    pub cache: Vec<String>,
    /// Measured operations per configuration (at most)
    ///
    /// At least 1.
    #[arg(long, short = 'n', default_value_t = 10_000, value_parser = count)]
    pub count: u64,
    /// Operations before measuring.
    #[arg(long, default_value_t = 200)]
    pub warmup: u64,
    /// Most time measuring one configuration (bare: s)
    ///
    /// 1s, 500ms.
    #[arg(long, default_value = "1s", value_parser = duration_s)]
    pub max_time: std::time::Duration,
    /// Longest wait for the connection setup, a reply, an event or a write (bare: s)
    ///
    /// A deadline for the whole wait, not for each read: a server that stops answering, or answers
    /// a byte at a time, fails the configuration after it; the rows measured before are kept.
    #[arg(long, default_value = "10s", value_parser = duration_s)]
    pub timeout: std::time::Duration,
    /// Also run x11perf on the same server and print its rates
    ///
    /// Before and after; its rate is printed beside every pipelined upload it has a test for
    /// (-putimageN / -shmputN, N = 10, 100, 500, at the root window's depth), with the ratio
    /// latscope/x11perf.
    #[arg(long)]
    pub compare_x11perf: bool,
    #[command(flatten)]
    pub max_spans: MaxSpans,
    /// An argument for the private Xvfb (repeatable)
    ///
    /// e.g. `--xvfb-arg=-extension --xvfb-arg=MIT-SHM`, or a screen: `--xvfb-arg=-screen
    /// --xvfb-arg=0 --xvfb-arg=640x480x24`.
    #[arg(long, allow_hyphen_values = true)]
    pub xvfb_arg: Vec<String>,
    /// Refuse a run of more configurations than this
    ///
    /// Before running anything.
    #[arg(long, default_value_t = 1000, value_parser = count)]
    pub max_configs: u64,
    #[command(flatten)]
    pub out: FormatArg,
    #[command(flatten)]
    pub save: SaveArg,
}

/// `latscope lab x11-backend`
#[derive(Debug, Args)]
pub struct X11BackendArgs {
    /// The private bus's address.
    pub address: String,
}

const WAYLAND_LAB_ABOUT: &str = "\
A native Wayland client that times its own protocol exchanges, with CLOCK_MONOTONIC in ns.

Compositor: --display NAME (a name in $XDG_RUNTIME_DIR or a socket path), else
$WAYLAND_DISPLAY; with neither, latscope starts a private weston headless (pixman renderer) in a
fresh 0700 runtime directory and stops it at the end. The report names the compositor (its
process) and the globals it offers.

Patterns (each is one or more rows; comma lists make a cross product):
  round-trip  wl_display.sync → wl_callback.done, --count times: the protocol floor
  frames      an xdg-toplevel drawn from --buffers wl_shm buffers (one memfd pool) of --size,
              --frames frames paced by --pace; per frame: commit → wl_buffer.release,
              frame request → done, commit → wp_presentation presented (when offered), and
              the wait for a free buffer (buffer_wait); frames/s and buffers in flight
  outputs     bind every wl_output and zxdg_output_manager_v1 and collect geometry, modes,
              scale and name until done, --count times, --via inproc (this process) or dbus
              (a helper process asked over a private dbus-daemon)

The client uses libwayland-client, so WAYLAND_DEBUG=client prints the standard log of the same
run, which `latscope wayland` reads: a cross-check of both measurements.";

const WAYLAND_LAB_EXAMPLES: &str = "\
Examples:
  latscope lab wayland round-trip frames outputs            # a private weston headless
  latscope lab wayland frames --buffers 1,2,3 --frames 120  # how long the compositor holds buffers
  latscope lab wayland frames --pace free-run,rate=30 --damage full,partial --size 512x512
  latscope lab wayland --display wayland-1 outputs --via inproc,dbus
  WAYLAND_DEBUG=client latscope lab wayland frames 2> client.log; latscope wayland client.log
  latscope lab wayland frames --max-spans 1000 --save f.json; latscope export f.json --to perfetto -o f.pftrace

Exit status: 0 success, 1 error (a configuration failed, the compositor died), 2 usage.";

/// `latscope lab wayland`
#[derive(Debug, Args)]
pub struct WaylandLabArgs {
    /// Patterns: round-trip, frames, outputs (run in this order)
    #[arg(required = true, value_name = "PATTERN")]
    pub patterns: Vec<String>,
    /// The compositor: a display name or a socket path
    ///
    /// A name in $XDG_RUNTIME_DIR or a path; default: $WAYLAND_DISPLAY, else a private weston
    /// headless.
    #[arg(long, value_name = "NAME")]
    pub display: Option<String>,
    /// frames: buffers in the pool, 1 to 16 (a list).
    #[arg(long, value_delimiter = ',', default_value = "2", value_parser = buffers)]
    pub buffers: Vec<u32>,
    /// frames: window size WxH (a list).
    #[arg(long, value_delimiter = ',', default_value = "256x256", value_parser = window_size)]
    pub size: Vec<(u32, u32)>,
    /// frames: frames per configuration.
    #[arg(long, default_value_t = 120, value_parser = count)]
    pub frames: u64,
    /// frames: frame-callback, free-run or rate=HZ
    ///
    /// A list.
    #[arg(long, value_delimiter = ',', default_value = "frame-callback")]
    pub pace: Vec<String>,
    /// frames: full or partial (a list).
    #[arg(long, value_delimiter = ',', default_value = "full")]
    pub damage: Vec<String>,
    /// outputs: inproc or dbus (a list).
    #[arg(long, value_delimiter = ',', default_value = "inproc")]
    pub via: Vec<String>,
    /// round-trip, outputs: exchanges per configuration
    #[arg(long, short = 'n', default_value_t = 200, value_parser = count)]
    pub count: u64,
    #[command(flatten)]
    pub max_spans: MaxSpans,
    #[command(flatten)]
    pub out: FormatArg,
    #[command(flatten)]
    pub save: SaveArg,
}

const BENCH_ABOUT: &str = "\
A/B benchmark commands: the first is the baseline, each other a candidate.

Runs are interleaved in shuffled blocks (each block runs every command once, in a random order),
so drifts of the machine hit every command alike. Commands run directly, split into words, with
no shell in between: what hyperfine's -N does, by default (-N is accepted and changes nothing);
--shell runs them through sh -c.

Timed runs have nothing attached: wall time from the spawn to the exit, user and system time,
context switches and page faults from the kernel's resource usage. CPU counters (and peak RSS)
are read in separate counted runs, interleaved one round every 4 blocks (--counters: none; software:
task-clock, context-switches, cpu-migrations, page-faults; all, the default: also instructions,
cycles, branches, branch-misses, which print \"not supported\" without a PMU; -e adds more), so
a counter never slows the runs the verdict is computed from.

Wall time is compared block by block: the ratio of each candidate's run to the baseline's run of
the same block, its 20% trimmed mean and a t interval (Yuen's paired test), so drift between
blocks cancels. Sequential: once --min-time and --min-runs are done, latscope looks at the data
(at most every 25% of the elapsed time) and stops when every comparison is clear — a change at
p < 0.001, or an interval inside the noise band — else it goes on to --max-time (default 10 s
with two or more commands). The final test spends what the looks did not (Haybittle-Peto), so
looking early adds no false alarms. The verdict: faster, slower, same (the interval lies within
±--noise), or inconclusive, printed with the smallest change this run could have detected.

On a busy or shared machine other processes take the CPU from a run for whole time slices: its
wall time grows by a random amount, its CPU time does not. --time cpu judges on user + system time
(of the command and its children) the same way, block by block; wall time stays in the table. For
CPU-bound commands it sees far smaller changes there (a warning says when CPU time is much
steadier than wall time); it does not see time spent waiting for I/O or sleeping.

Is a change real, or code layout? --layouts K runs every command under K layouts (a seeded
environment padding of 0-4095 bytes moves the stack; --relink CMD builds each layout's binaries,
e.g. with lld's -Wl,--shuffle-sections=*={seed}, to move the code) and prints each command's
median per layout. The spread of those medians (max/min) is what layout alone does to the same
command; the wider spread of the two commands is the layout-noise band, and a faster, slower or
inconclusive change whose whole interval lies inside it is `within layout noise`: a relink could
move it as much.
Other metrics get medians with bootstrap intervals, Mann-Whitney tests and the rule of
`latscope compare --help`. It warns about noisy runs, cold first runs, commands that wait rather
than compute, and the same instruction count in different time (stalls, alignment).

hyperfine's options keep their meaning: -w, -r, -m (--min-runs), -n, -L, -i, --prepare,
--setup/--cleanup (once, before the first and after the last block: blocks interleave the
commands), --conclude,
--input, --output, --export-json (hyperfine's JSON: results[] with mean, stddev, median, user,
system, min, max, times, exit_codes, parameters, in seconds, so hyperfine's scripts read it),
--export-markdown/--export-csv (latscope's table and one line per run). latscope's own document,
with every run, counter and verdict, is --save FILE or --format json.";

const BENCH_EXAMPLES: &str = "\
Examples:
  latscope bench './server-old --bench' './server-new --bench'
  latscope bench --noise 0.1% --max-time 30s ./a ./b          # chase a 0.2% change
  latscope bench --warmup 3 -L size=1024,4096,65536 './upload --mask {size}'
  latscope bench --instructions=callgrind -e stalled-cycles-frontend ./a ./b
  latscope bench --layouts 8 --relink 'make LDFLAGS=-Wl,--shuffle-sections=*={seed} O=b{seed}' b{seed}/old b{seed}/new
  latscope bench --setup 'make -s' --input req.bin --output pipe ./server-a ./server-b
  latscope bench --export-json hf.json ./a ./b; python3 welch_ttest.py hf.json   # hyperfine's scripts
  latscope bench --format json ./a ./b > run.json; latscope bench --compare old.json run.json

Exit status: 0 success, 1 error (a command failed, cannot run), 2 usage.";

/// Which counters `latscope bench` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CounterSet {
    /// no counted runs (only -e events, if given)
    None,
    /// task-clock, context-switches, cpu-migrations, page-faults
    Software,
    /// the software ones and instructions, cycles, branches, branch-misses
    All,
}

/// `latscope bench`
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Commands; the first is the baseline.
    #[arg(value_name = "COMMAND", required_unless_present = "compare")]
    pub commands: Vec<String>,
    /// A name for a command, used in every output (one per command)
    ///
    /// Repeat, one per command, in order; may use {PARAM} of -L. Like hyperfine's --command-name.
    #[arg(short = 'n', long = "name", value_name = "NAME")]
    pub names: Vec<String>,
    /// Run the commands through `sh -c` (default: split into words)
    #[arg(long)]
    pub shell: bool,
    /// Untimed runs of each command first.
    #[arg(long, short = 'w', default_value_t = 0)]
    pub warmup: u32,
    /// Exactly this many timed runs of each command (at least 1).
    #[arg(long, short = 'r', value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: Option<u32>,
    /// At least this many runs of each (without --runs)
    #[arg(long, short = 'm', default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub min_runs: u32,
    /// Run at least this long (without --runs; bare: s)
    #[arg(long, default_value = "3s", value_parser = duration_s)]
    pub min_time: std::time::Duration,
    /// Stop by this time at the latest (without --runs; bare: s)
    ///
    /// 10s, 1m is 60s. Default with two or more commands: 10s, reached only while a comparison is
    /// unclear, and never before --min-runs.
    #[arg(long, value_parser = duration_s)]
    pub max_time: Option<std::time::Duration>,
    /// Run this before every timed run (untimed).
    #[arg(long, short = 'p', value_name = "CMD")]
    pub prepare: Option<String>,
    /// Run this once before the first block (untimed)
    ///
    /// hyperfine runs it once per command before that command's runs; interleaved blocks run every
    /// command in turn, so here it runs once.
    #[arg(long, short = 's', value_name = "CMD")]
    pub setup: Option<String>,
    /// Run this after every timed run (untimed), like hyperfine's.
    #[arg(long, short = 'C', value_name = "CMD")]
    pub conclude: Option<String>,
    /// Run this once after the last block (untimed)
    ///
    /// Also after a failed run or Ctrl-C, once the setup ran.
    #[arg(long, short = 'c', value_name = "CMD")]
    pub cleanup: Option<String>,
    /// The commands' stdin: this file (default: /dev/null).
    #[arg(long, value_name = "FILE")]
    pub input: Option<PathBuf>,
    /// Commands' output: null, pipe, inherit or FILE
    ///
    /// null (default): /dev/null; pipe: read by latscope and discarded; inherit: this terminal; a
    /// FILE: stdout truncated into it before every run, stderr to /dev/null.
    #[arg(long, value_name = "WHERE", default_value = "null")]
    pub output: String,
    /// CPU counters, read in separate runs
    #[arg(long, value_enum, default_value_t = CounterSet::All)]
    pub counters: CounterSet,
    /// Also write hyperfine's JSON export to FILE
    ///
    /// results[]: mean, stddev, median, user, system, min, max, times, exit_codes, parameters, in
    /// seconds, for hyperfine's scripts. latscope's own document is --save.
    #[arg(long, value_name = "FILE")]
    pub export_json: Option<PathBuf>,
    /// Also write the Markdown table to FILE.
    #[arg(long, value_name = "FILE")]
    pub export_markdown: Option<PathBuf>,
    /// Also write one CSV line per run to FILE.
    #[arg(long, value_name = "FILE")]
    pub export_csv: Option<PathBuf>,
    /// Accepted for hyperfine's users: commands run without a shell by default.
    #[arg(short = 'N', hide = true)]
    pub no_shell: bool,
    /// Kill a run that takes longer: 10s, 500ms (bare: s)
    ///
    /// Above 0; without --timeout a run has no time limit.
    #[arg(long, value_parser = positive_duration_s)]
    pub timeout: Option<std::time::Duration>,
    /// A parameter list NAME=a,b,c substituted for {NAME}
    ///
    /// Repeat for a cross product.
    #[arg(short = 'L', long = "parameter-list", value_name = "NAME=VALUES")]
    pub parameter_list: Vec<String>,
    /// Refuse a benchmark of more commands than this
    ///
    /// Before running anything: commands × every -L list's length.
    #[arg(long, default_value_t = 1000, value_parser = count)]
    pub max_commands: u64,
    /// More counters: perf generic names or raw rNNNN
    ///
    /// Comma-separated or repeated.
    #[arg(short = 'e', long = "event", value_delimiter = ',')]
    pub events: Vec<String>,
    /// Exact instruction counts from one callgrind run
    ///
    /// Each command runs once more, under valgrind's callgrind.
    #[arg(long, value_name = "callgrind")]
    pub instructions: Option<String>,
    /// Go on when a run exits non-zero or times out.
    #[arg(long, short = 'i')]
    pub ignore_failure: bool,
    /// Changes within this band count as none
    ///
    /// 0.25% (default), 1% or 0.01. A change is called only when its interval leaves the band, so
    /// the band must be smaller than the changes you look for.
    #[arg(long, default_value = "0.25%", value_parser = percent)]
    pub noise: f64,
    /// Compare two saved results instead of running
    ///
    /// Two JSON results of `latscope bench` (old, new); nothing runs.
    #[arg(long, num_args = 2, value_names = ["OLD", "NEW"], conflicts_with = "commands")]
    pub compare: Option<Vec<PathBuf>>,
    #[command(flatten)]
    pub out: FormatArg,
    #[command(flatten)]
    pub save: SaveArg,
    /// What the verdict is on: wall or cpu time
    ///
    /// wall: spawn to exit (the default); cpu: user + system time of the command and its children.
    /// CPU time leaves out the time a command waited for a CPU, so on a busy or shared machine it
    /// is steadier for CPU-bound commands; it does not see waits for I/O or sleeps.
    #[arg(long, default_value = "wall", value_parser = named::<Clock>())]
    pub time: Clock,
    /// Seed of the run order and of the layouts
    ///
    /// The run order is shuffled with it; layout l has seed SEED + l.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Run under K code and stack layouts (2-64)
    ///
    /// 1: off (the default). Each layout pads the environment with a seeded 0-4095-byte
    /// LATSCOPE_LAYOUT_PAD (recorded per run), and with --relink uses its own binaries. Blocks go
    /// through the layouts in shuffled rounds; the spread of a command's per-layout medians
    /// (max/min, each layout with at least 3 runs) is what layout alone did to it, the wider spread
    /// of the two commands compared is the layout-noise band, and a change whose interval lies
    /// inside it is `within layout noise`. Without --runs, at least 5 runs per layout (an explicit
    /// --max-time may stop sooner).
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub layouts: u32,
    /// With --layouts: a build command run once per layout
    ///
    /// Run by sh -c, untimed, before the runs, {seed} replaced by the layout's seed, e.g. 'cc -O2
    /// -ffunction-sections -fuse-ld=lld -Wl,--shuffle-sections=*={seed} -o build/a-{seed} a.c'; the
    /// commands name that layout's binaries with {seed} too ('build/a-{seed}').
    #[arg(long, value_name = "CMD")]
    pub relink: Option<String>,
}

const COMPARE_EXAMPLES: &str = "\
Reads every latscope result (spans from wayland and live, bench, lab ipc, lab queue, compare),
bpftrace -f json output and HdrHistogram interval logs; items are paired by name (bench commands
by name, else by position).

The rule (the same one `latscope bench` applies to its candidates):
  samples basis (bench runs; the HdrHistogram in wayland and lab results): the body is the
    median: the ratio after/before with a bootstrap interval and a Mann-Whitney U test; it moved
    when the test is significant and the interval excludes 1. The tail (p99) is judged when both
    sides have 100 samples or more: it moved when its interval excludes 1 and the change exceeds
    --noise. With both judged, each is tested at 2.5% (Bonferroni). A change whose whole interval
    lies within ±--noise is no change.
  histogram basis (live, bpftrace): a percentile moved when its before and after bucket-error
    intervals do not overlap.
  summary basis (percentiles only): a change beyond ±--noise counts.
Verdicts: faster or slower (what moved agrees), mixed (the median and the p99 moved in opposite
directions: a lower median never hides a worse tail), same (nothing moved and every change is
within ±--noise), inconclusive (a larger difference the data cannot confirm).

Examples:
  latscope wayland --format json before.log > before.json
  latscope wayland --format json after.log > after.json
  latscope compare before.json after.json
  latscope compare --format markdown old-bench.json new-bench.json";

/// `latscope compare`
#[derive(Debug, Args)]
pub struct CompareArgs {
    #[arg(help = "The earlier result", long_help = concat!("The earlier result: ", reads!()))]
    pub before: PathBuf,
    /// The later result, of the same kind.
    pub after: PathBuf,
    #[command(flatten)]
    pub noise: NoiseArg,
    #[command(flatten)]
    pub out: FormatArg,
    #[command(flatten)]
    pub unit: UnitOpt,
}

/// `latscope plot`
#[derive(Debug, Args)]
pub struct PlotArgs {
    #[arg(required = true, value_name = "RESULT", help = "Saved results, overlaid", long_help = concat!("Saved results, overlaid: ", reads!()))]
    pub results: Vec<PathBuf>,
    /// The SVG file to write.
    #[arg(long, short = 'o')]
    pub output: PathBuf,
    /// What to draw.
    #[arg(long, value_enum, default_value_t = PlotKind::Histogram)]
    pub kind: PlotKind,
    /// The span (or command item) to plot, by name (default: the first).
    #[arg(long)]
    pub span: Option<String>,
}

/// `latscope plot --kind`
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PlotKind {
    /// share of samples per bucket, log latency axis
    Histogram,
    /// latency against percentile, 1/(1−p) axis
    Percentiles,
}

/// `latscope report`
#[derive(Debug, Args)]
pub struct ReportArgs {
    #[arg(required = true, value_name = "RESULT", help = "Saved results (two of one kind are also compared)", long_help = concat!("Saved results (two of one kind are also compared): ", reads!()))]
    pub results: Vec<PathBuf>,
    /// The HTML file to write.
    #[arg(long, short = 'o', default_value = "report.html")]
    pub output: PathBuf,
    #[command(flatten)]
    pub noise: NoiseArg,
    #[command(flatten)]
    pub unit: UnitOpt,
}

const EXPORT_EXAMPLES: &str = "\
Examples:
  latscope export run.json --to hlog -o run.hlog
  latscope export run.json --to parquet --host lab1 -o runs/lab1.parquet
  duckdb -c \"SELECT span, quantile_cont(value_ns, 0.99) FROM 'runs/*.parquet' GROUP BY span\"

--to parquet: one row per sample (value_ns) when the result knows its samples (kept spans, or
its HdrHistogram expanded, within 0.1%), one row per bucket (bucket_min_ns, bucket_max_ns,
count) for kernel buckets (live); the schema is in docs/guide/fleet.md.";

/// `latscope export`
#[derive(Debug, Args)]
pub struct ExportArgs {
    #[arg(help = "A saved result", long_help = concat!("A saved result: ", reads!()))]
    pub result: PathBuf,
    /// The format to write.
    #[arg(long, value_enum)]
    pub to: ExportFormat,
    /// The file to write (`-`: standard output).
    #[arg(long, short = 'o', default_value = "-")]
    pub output: PathBuf,
    /// Parquet: the `host` column (default: NULL).
    #[arg(long)]
    pub host: Option<String>,
    /// Parquet: the `run_id` column (default: the result's file name).
    #[arg(long)]
    pub run_id: Option<String>,
    /// Parquet: refuse a result of more rows than this
    ///
    /// One row per sample; the file is written in row groups of 262,144 rows, so memory stays
    /// bounded, but time and size do not.
    #[arg(long, default_value_t = latscope::fleet::parquet::DEFAULT_MAX_ROWS, value_name = "N")]
    pub max_rows: u64,
}

/// `latscope export --to`
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// HdrHistogram interval log, one tag per span (values in ns)
    Hlog,
    /// bpftrace `-f json` histogram lines (log2 buckets)
    Bpftrace,
    /// Chrome Trace Event JSON: every span kept by `latscope spans --max-spans N` as a slice,
    /// for Perfetto's UI or chrome://tracing
    ChromeJson,
    /// Native Perfetto protobuf trace of the same spans (one track per series; latency, start
    /// and group as debug annotations), for ui.perfetto.dev or trace_processor; a `frames`
    /// result: a track per process, each frame's path as flows between its stages
    Perfetto,
    /// Parquet (zstd) for SQL engines: one row per sample or per kernel bucket (needs -o)
    Parquet,
}

const MERGE_EXAMPLES: &str = "\
Series are paired by name, side and group. Log-linear (live) and HdrHistogram (wayland, spans)
series merge exactly; refused with the reason: other kinds (bench, lab, compare, probes),
different versions or sources, log2-only series (bpftrace imports). Rates add; per-interval
counts and kept individual spans are dropped (one run's clock), with a warning.

Examples:
  latscope merge lab1.json lab2.json lab3.json -o fleet.json
  latscope compare fleet-before.json fleet-after.json";

/// `latscope merge`
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// Saved `spans` results of one source
    ///
    /// Of `latscope wayland`, `spans` or `live`.
    #[arg(required = true, num_args = 2.., value_name = "RESULT")]
    pub results: Vec<PathBuf>,
    /// The merged result (`-`: standard output).
    #[arg(long, short = 'o', default_value = "-")]
    pub output: PathBuf,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_definition_is_consistent() {
        command().debug_assert();
    }

    /// Every name a library enum gives the command line reads back as that value.
    fn names_read_back<T: Named + PartialEq + std::fmt::Debug>() {
        for &value in T::ALL {
            assert_eq!(
                value.name().parse::<T>().ok(),
                Some(value),
                "{}",
                value.name()
            );
        }
    }

    #[test]
    fn library_enums_read_back_their_own_names() {
        names_read_back::<Unit>();
        names_read_back::<SpanKind>();
        names_read_back::<GroupBy>();
        names_read_back::<Repeat>();
        names_read_back::<TraceFormat>();
        names_read_back::<Clock>();
    }

    /// The built command of `latscope WORDS`.
    fn sub(words: &str) -> clap::Command {
        crate::commands::subcommand(words)
    }

    /// The help text of `latscope WORDS`' argument `id`, long form when there is one.
    fn arg_help(words: &str, id: &str) -> String {
        let cmd = sub(words);
        let arg = cmd
            .get_arguments()
            .find(|a| a.get_id() == id)
            .unwrap_or_else(|| panic!("latscope {words} has no {id}"));
        arg.get_long_help()
            .or(arg.get_help())
            .map(|h| h.to_string())
            .unwrap_or_default()
    }

    #[test]
    fn group_help_explains_the_generation_letters_as_the_library_writes_them() {
        let help = arg_help("wayland", "group");
        let label = |generation| latscope::span::ObjectLabel {
            conn: None,
            interface: "wl_surface",
            id: 9,
            generation,
        };
        for (generation, shown) in [(0, "`wl_surface#9a`"), (1, "`wl_surface#9b`")] {
            assert_eq!(format!("`{}`", label(generation)), shown);
            assert!(help.contains(shown), "{help}");
        }
        assert_eq!(label(26).to_string(), "wl_surface#9aa");
        assert!(help.contains("after `z` come `aa`"), "{help}");
        let guide = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/guide/wayland.md"),
        )
        .unwrap();
        assert!(guide.contains("`wl_surface#9b` the next one created with id 9"));
    }

    /// Whether `text` holds `word` as a whole word (`json` not inside `chrome-json`).
    fn names(text: &str, word: &str) -> bool {
        text.split(|c: char| !(c.is_alphanumeric() || c == '-'))
            .any(|w| w == word)
    }

    #[test]
    fn every_reader_names_every_kind_it_reads_in_its_help() {
        let kinds: Vec<&str> = latscope::doc::Kind::ALL
            .into_iter()
            .filter(|k| k.has_latency())
            .map(|k| k.name())
            .chain(latscope::doc::IMPORTED)
            .collect();
        for (words, id) in [
            ("compare", "before"),
            ("plot", "results"),
            ("report", "results"),
            ("export", "result"),
        ] {
            let help = arg_help(words, id);
            for kind in &kinds {
                assert!(
                    names(&help, kind),
                    "latscope {words} {id}: no '{kind}' in {help:?}"
                );
            }
            assert!(
                !names(&help, "probes"),
                "{words} does not read probes: {help:?}"
            );
        }
    }

    #[test]
    fn every_writer_names_every_format_it_writes_and_no_other() {
        for (words, writes) in crate::commands::WRITES {
            let help = arg_help(words, "format");
            for format in [Format::Text, Format::Json, Format::Markdown, Format::Csv] {
                assert_eq!(
                    names(&help, format.name()),
                    writes.iter().any(|(f, _)| *f == format),
                    "latscope {words} --format {}: help {help:?}",
                    format.name()
                );
            }
        }
        let with_format: Vec<String> = command()
            .get_subcommands()
            .flat_map(|c| {
                let name = c.get_name().to_string();
                let nested: Vec<String> = c
                    .get_subcommands()
                    .filter(|s| !s.is_hide_set())
                    .map(|s| format!("{name} {}", s.get_name()))
                    .collect();
                if nested.is_empty() {
                    vec![name]
                } else {
                    nested
                }
            })
            .filter(|w| sub(w).get_arguments().any(|a| a.get_id() == "format"))
            .collect();
        let listed: Vec<&str> = crate::commands::WRITES.iter().map(|(w, _)| *w).collect();
        for words in &with_format {
            assert!(
                listed.contains(&words.as_str()),
                "{words} is not in commands::WRITES"
            );
        }
    }

    #[test]
    fn summaries_name_every_export_format_plot_kind_and_demo_part() {
        let about = |words: &str| {
            sub(words)
                .get_about()
                .map(|a| a.to_string())
                .unwrap_or_default()
        };
        for format in ExportFormat::value_variants() {
            let name = format.to_possible_value().unwrap().get_name().to_string();
            assert!(
                names(&about("export"), &name),
                "export's summary lacks {name}"
            );
        }
        for kind in PlotKind::value_variants() {
            let name = kind.to_possible_value().unwrap().get_name().to_string();
            assert!(names(&about("plot"), &name), "plot's summary lacks {name}");
        }
        for part in crate::commands::demo::Part::ALL {
            assert!(
                about("demo").contains(part.summary()),
                "demo's summary lacks {:?}",
                part.summary()
            );
        }
    }

    #[test]
    fn a_subcommands_usage_error_shows_that_subcommands_usage() {
        for words in ["live", "lab x11", "export", "compare"] {
            let text = sub(words)
                .error(clap::error::ErrorKind::ValueValidation, "bad")
                .to_string();
            assert!(
                text.contains(&format!("Usage: latscope {words} ")),
                "{text}"
            );
        }
    }

    #[test]
    fn spans_can_be_given_as_a_comma_list() {
        let cli = Cli::try_parse_from([
            "latscope",
            "wayland",
            "--span",
            "commit-release,sync-done",
            "x.log",
        ])
        .unwrap();
        let Command::Wayland(args) = cli.command else {
            panic!()
        };
        assert_eq!(args.span_options().enabled, [true, false, true, false]);
    }

    /// Every argument of every command that takes a path.
    fn path_arguments(cmd: &clap::Command, words: &str, found: &mut Vec<(String, String)>) {
        for arg in cmd.get_arguments() {
            if arg.get_value_parser().type_id() == std::any::TypeId::of::<PathBuf>() {
                found.push((words.to_string(), arg.get_id().to_string()));
            }
        }
        for sub in cmd.get_subcommands() {
            path_arguments(sub, &format!("{words} {}", sub.get_name()), found);
        }
    }

    #[test]
    fn every_path_argument_is_known_as_an_input_or_an_output() {
        let mut found = Vec::new();
        path_arguments(&command(), "latscope", &mut found);
        assert!(found.len() > 10, "{found:?}");
        for (words, id) in found {
            assert!(
                INPUTS.contains(&id.as_str()) || OUTPUTS.contains(&id.as_str()),
                "{words} {id}: add it to INPUTS or OUTPUTS, so that same_file checks it"
            );
        }
    }

    /// `same_file`'s message for `args` of `latscope ...`, parsed as the binary parses them.
    fn same(args: &[&str]) -> Option<String> {
        let cmd = command();
        let matches = cmd
            .clone()
            .try_get_matches_from(std::iter::once("latscope").chain(args.iter().copied()))
            .unwrap();
        let (leaf, args) = leaf(&cmd, &matches);
        same_file(&leaf, args)
    }

    #[test]
    fn an_output_is_refused_when_it_is_an_input_by_any_name_and_only_then() {
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("t.log");
        std::fs::write(&trace, "x\n").unwrap();
        let link = dir.path().join("link.log");
        std::fs::hard_link(&trace, &link).unwrap();
        let other = dir.path().join("other.log");
        std::fs::write(&other, "y\n").unwrap();
        let (t, l, o) = (
            trace.to_str().unwrap(),
            link.to_str().unwrap(),
            other.to_str().unwrap(),
        );
        let dotted = format!("{}/./t.log", dir.path().display());
        for args in [
            vec!["wayland", t, "--report", &dotted],
            vec!["spans", o, t, "--report", l],
            vec!["plot", o, t, "-o", l],
            vec!["bench", "--input", t, "--export-markdown", l, "true"],
            vec!["report", t, "-o", l],
        ] {
            let message = same(&args).unwrap_or_else(|| panic!("not refused: {args:?}"));
            assert!(message.contains(t), "{message}");
        }
        let fresh = dir.path().join("new.html");
        for args in [
            vec!["wayland", t, "--report", fresh.to_str().unwrap()],
            vec!["spans", t, "--report", o],
            vec!["export", t, "--to", "hlog"],
            vec!["bench", "--output", "null", "--input", t, "true"],
        ] {
            assert_eq!(same(&args), None, "{args:?}");
        }
    }
}
