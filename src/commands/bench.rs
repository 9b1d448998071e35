//! `latscope bench`: expand the commands, run the schedule with a progress bar, analyse, print.

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::cli::{BenchArgs, CounterSet, Format};
use crate::signals;
use latscope::bench::analysis::{Runs, analyse, clear};
use latscope::bench::callgrind;
use latscope::bench::counters::{DEFAULT_EVENTS, parse_event};
use latscope::bench::layouts::{self, SEED_PLACEHOLDER, with_seed};
use latscope::bench::schedule::{self, BenchCommand, Measured, Schedule};
use latscope::bench::spawn::{Io, Output};
use latscope::doc::bench::{BenchDoc, Stop};
use latscope::doc::rule::{Clock, RuleDoc};
use latscope::doc::run::Layout;
use latscope::doc::{self, Document};
use latscope::report::bench as render;
use latscope::stats::change::Rule;

/// Runs `latscope bench`.
pub fn run(args: &BenchArgs) -> Result<()> {
    let rule = Rule {
        noise: args.noise,
        ..Rule::default()
    };
    if let Some(files) = &args.compare {
        return compare(&files[0], &files[1], args, rule);
    }
    let lists = parameter_lists(&args.parameter_list)?;
    check_size(args, &lists);
    let commands = schedule::expand(&args.commands, &args.names, &lists, args.shell)
        .unwrap_or_else(|e| usage(&e));
    let files = Files::check(args)?;
    let schedule = build_schedule(args, commands.len())?;
    check_layouts(args, &commands);
    if let Some(cmd) = &args.relink {
        relink(cmd, &schedule.layouts)?;
    }
    let callgrind = match args.instructions.as_deref() {
        Some("callgrind") => Some(
            commands
                .iter()
                .map(|c| callgrind::instructions(&first_layout(&c.argv, &schedule.layouts)))
                .collect::<Result<Vec<u64>, String>>()
                .map_err(anyhow::Error::msg)?,
        ),
        Some(other) => bail!("--instructions takes 'callgrind', not '{other}'"),
        None => None,
    };
    // A killed run's group may leave orphans: they come back here to be reaped.
    latscope::process::reap_orphans_here();
    let bar = progress(&schedule, commands.len());
    let (measured, error) = schedule::run(
        &commands,
        &schedule,
        |done| bar.set_position(done as u64),
        |m| clear(&m.runs, m.looks, rule, args.time),
    );
    bar.finish_and_clear();
    let measured = Measured {
        relink: args.relink.clone(),
        ..measured
    };
    if measured.runs.iter().all(Vec::is_empty) {
        return Err(error.map_or_else(
            || anyhow::anyhow!("interrupted before any run"),
            anyhow::Error::from,
        ));
    }
    let written = output(&commands, &measured, callgrind, args, &files, rule);
    match (error, written) {
        (None, written) => written,
        (Some(e), Ok(())) => Err(e.into()),
        (Some(e), Err(unwritten)) => Err(anyhow::anyhow!("{e}; and {unwritten}")),
    }
}

/// Refuses a cross product beyond `--max-commands` before building it: a million commands
/// would take gigabytes and hours before the first run.
fn check_size(args: &BenchArgs, lists: &[(String, Vec<String>)]) {
    let total = lists
        .iter()
        .fold(args.commands.len() as u128, |n, (_, values)| {
            n.saturating_mul(values.len() as u128)
        });
    if total > u128::from(args.max_commands) {
        usage(&format!(
            "{} commands × the -L lists make {total} commands to benchmark; at most {} (--max-commands raises the limit)",
            args.commands.len(),
            args.max_commands
        ));
    }
}

/// The busy-machine warning, from /proc/loadavg and the CPUs this process may use.
fn busy_machine(clock: Clock) -> Option<String> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let cpus = std::thread::available_parallelism().ok()?.get();
    latscope::bench::analysis::busy_machine(&text, cpus, clock)
}

/// `--relink` needs layouts to build and commands that run what it built.
fn check_layouts(args: &BenchArgs, commands: &[BenchCommand]) {
    let Some(cmd) = &args.relink else { return };
    if args.layouts < 2 {
        usage("--relink builds one binary per layout: give --layouts K (2 or more)");
    }
    if !cmd.contains(SEED_PLACEHOLDER) {
        usage(&format!(
            "--relink '{cmd}' has no {SEED_PLACEHOLDER}: every layout would build the same binary"
        ));
    }
    if let Some(c) = commands
        .iter()
        .find(|c| !c.command.contains(SEED_PLACEHOLDER))
    {
        usage(&format!(
            "'{}' has no {SEED_PLACEHOLDER}: with --relink, name each layout's binary with it (./build-{SEED_PLACEHOLDER}/prog)",
            c.command
        ));
    }
}

/// Runs the `--relink` command once per layout (untimed, by `sh -c`, `{seed}` replaced).
fn relink(cmd: &str, layouts: &[Layout]) -> Result<()> {
    for l in layouts {
        let line = with_seed(cmd, l);
        let out = std::process::Command::new("sh")
            .args(["-c", &line])
            .stdin(std::process::Stdio::null())
            .output()
            .with_context(|| format!("--relink: cannot run sh -c '{line}'"))?;
        if !out.status.success() {
            bail!(
                "--relink '{line}' (layout {}, seed {}) failed ({}): {}",
                l.index + 1,
                l.seed,
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
    }
    Ok(())
}

/// The argv as layout 1 runs it (as given without layouts): what callgrind counts.
fn first_layout(argv: &[String], layouts: &[Layout]) -> Vec<String> {
    match layouts.first() {
        Some(l) => argv.iter().map(|a| with_seed(a, l)).collect(),
        None => argv.to_vec(),
    }
}

fn usage(message: &str) -> ! {
    super::usage_error("bench", clap::error::ErrorKind::ValueValidation, message)
}

/// The files a run writes, checked before it starts.
struct Files {
    json: Option<latscope::files::Output>,
    hyperfine: Option<latscope::files::Output>,
    markdown: Option<latscope::files::Output>,
    csv: Option<latscope::files::Output>,
}

impl Files {
    fn check(args: &BenchArgs) -> Result<Files> {
        let out = crate::commands::output_opt;
        Ok(Files {
            json: out("--save", args.save.path())?,
            hyperfine: out("--export-json", args.export_json.as_deref())?,
            markdown: out("--export-markdown", args.export_markdown.as_deref())?,
            csv: out("--export-csv", args.export_csv.as_deref())?,
        })
    }
}

fn output(
    commands: &[BenchCommand],
    m: &Measured,
    callgrind: Option<Vec<u64>>,
    args: &BenchArgs,
    files: &Files,
    rule: Rule,
) -> Result<()> {
    let runs = Runs {
        timed: &m.runs,
        counted: &m.counted,
        paired: true,
        looks: m.looks,
        clock: args.time,
        layouts: &m.layouts,
    };
    let mut a = analyse(commands, runs, callgrind, rule);
    a.warnings.extend(busy_machine(runs.clock));
    let rule_doc = RuleDoc {
        noise: rule.noise,
        alpha: rule.alpha,
        time: runs.clock,
    };
    let doc = render::document(commands, m, &a, rule_doc);
    let json = doc::to_json(&doc, false);
    // The summary first: a file that cannot be written (a full disk) must not take the run's
    // results with it, and one failed file does not stop the others.
    let text = match args.out.get() {
        Format::Text => render::text(commands, m, &a, rule.noise),
        Format::Json => json.clone(),
        Format::Markdown => render::markdown(commands, m, &a),
        Format::Csv => render::csv(commands, m),
    };
    let mut failed = Vec::new();
    if let Err(e) = crate::commands::print(&text) {
        failed.push(format!("standard output: {e}"));
    }
    failed.extend(write_files(files, &json, commands, m, &a));
    match failed.len() {
        0 => Ok(()),
        n => bail!("{n} output(s) not written:\n  {}", failed.join("\n  ")),
    }
}

/// Writes each file asked for, going on past one that fails; the failures, each named by its
/// option.
fn write_files(
    files: &Files,
    json: &str,
    commands: &[BenchCommand],
    m: &Measured,
    a: &latscope::bench::analysis::Analysis,
) -> Vec<String> {
    let mut failed = Vec::new();
    let mut write =
        |option: &str, file: &Option<latscope::files::Output>, render: &dyn Fn() -> String| {
            if let Some(Err(e)) = file.as_ref().map(|f| f.write(render().as_bytes())) {
                failed.push(format!("{option}: {e}"));
            }
        };
    write("--save", &files.json, &|| json.to_string());
    write("--export-json", &files.hyperfine, &|| {
        latscope::report::hyperfine::json(commands, m)
    });
    write("--export-markdown", &files.markdown, &|| {
        render::markdown(commands, m, a)
    });
    write("--export-csv", &files.csv, &|| render::csv(commands, m));
    failed
}

fn parameter_lists(specs: &[String]) -> Result<Vec<(String, Vec<String>)>> {
    specs
        .iter()
        .map(|s| {
            let (name, values) = s
                .split_once('=')
                .with_context(|| format!("-L expects NAME=a,b,c, got '{s}'"))?;
            Ok((
                name.to_string(),
                values.split(',').map(str::to_string).collect(),
            ))
        })
        .collect()
}

fn build_schedule(args: &BenchArgs, commands: usize) -> Result<Schedule> {
    let defaults: &[&str] = match args.counters {
        CounterSet::None => &[],
        CounterSet::Software => &DEFAULT_EVENTS[..4],
        CounterSet::All => &DEFAULT_EVENTS,
    };
    let mut names: Vec<String> = defaults.iter().map(|s| s.to_string()).collect();
    names.extend(args.events.iter().filter(|e| !e.is_empty()).cloned());
    let parsed = names
        .iter()
        .map(|n| parse_event(n))
        .collect::<Result<Vec<_>, _>>()
        .map_err(anyhow::Error::msg)?;
    // One counter per event: `-e task-clock` or an alias (`cycles`/`cpu-cycles`) adds nothing.
    let mut events: Vec<latscope::bench::counters::Event> = Vec::new();
    for e in parsed {
        if !events
            .iter()
            .any(|x| x.kind == e.kind && x.config == e.config)
        {
            events.push(e);
        }
    }
    let hook = |name: &str, cmd: &Option<String>| -> Result<Option<Vec<String>>> {
        Ok(match cmd {
            Some(p) if args.shell => Some(vec!["sh".into(), "-c".into(), p.clone()]),
            Some(p) => Some(shell_words::split(p).with_context(|| format!("{name} '{p}'"))?),
            None => None,
        })
    };
    if let Some(input) = &args.input {
        std::fs::File::open(input)
            .with_context(|| format!("--input {}: cannot read it", input.display()))?;
    }
    let output = output_policy(&args.output);
    if let Output::File(path) = &output {
        // Checked here: a run that cannot open it would otherwise report a failed exec.
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .with_context(|| format!("--output {}: cannot write it", path.display()))?;
    }
    // Without --max-time, a comparison may go on to 10 s while it is unclear (and never stops
    // before --min-runs); a single command stops at the minimum, as hyperfine does.
    let default_max = (commands >= 2).then(|| args.min_time.max(DEFAULT_MAX_TIME));
    let layouts = if args.layouts >= 2 {
        layouts::layouts(args.layouts, args.seed)
    } else {
        Vec::new()
    };
    Ok(Schedule {
        warmup: args.warmup,
        runs: args.runs,
        // Each layout's median needs runs of its own.
        min_runs: args
            .min_runs
            .max(2)
            .max(MIN_BLOCKS_PER_LAYOUT * layouts.len() as u32),
        min_time: args.min_time,
        max_time: args.max_time.or(default_max),
        max_time_firm: args.max_time.is_some(),
        setup: hook("--setup", &args.setup)?,
        prepare: hook("--prepare", &args.prepare)?,
        conclude: hook("--conclude", &args.conclude)?,
        cleanup: hook("--cleanup", &args.cleanup)?,
        io: Io {
            input: args.input.clone(),
            output,
        },
        timeout: args.timeout,
        ignore_failure: args.ignore_failure,
        events,
        count_every: schedule::COUNT_EVERY,
        seed: args.seed,
        layouts,
        cancel: Some(signals::cancel_on_interrupt()),
        // latscope is the subreaper of the runs' orphans (`run`) and has no other children.
        reap_orphans: true,
    })
}

/// Without `--runs`, a benchmark under layouts runs at least this many blocks per layout.
const MIN_BLOCKS_PER_LAYOUT: u32 = 5;

/// The default limit of a comparison that stays unclear.
const DEFAULT_MAX_TIME: std::time::Duration = std::time::Duration::from_secs(10);

/// `--output`: null, pipe, inherit, or a file.
fn output_policy(text: &str) -> Output {
    match text {
        "null" => Output::Null,
        "pipe" => Output::Pipe,
        "inherit" => Output::Inherit,
        path => Output::File(path.into()),
    }
}

fn progress(s: &Schedule, commands: usize) -> ProgressBar {
    let bar = match s.runs {
        Some(r) => ProgressBar::with_draw_target(
            Some(u64::from(r) * commands as u64),
            ProgressDrawTarget::stderr(),
        ),
        None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
    };
    let template = if s.runs.is_some() {
        "benchmarking [{bar:40}] {pos}/{len} runs, eta {eta}"
    } else {
        "benchmarking {spinner} {pos} runs, {elapsed}"
    };
    bar.set_style(
        ProgressStyle::with_template(template)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar
}

/// Reads a saved `bench` document.
fn load(path: &std::path::Path) -> Result<BenchDoc> {
    match super::compare::load(path)?.document {
        Some(Document::Bench(d)) => Ok(d),
        other => bail!(
            "{} is a {} result, not a bench result",
            path.display(),
            other.map_or("foreign", |d| d.kind().name())
        ),
    }
}

/// `--compare OLD NEW`: each command of OLD against the command of the same name in NEW (by
/// position when they share no name), by the rule `latscope compare` applies.
fn compare(
    old: &std::path::Path,
    new: &std::path::Path,
    args: &BenchArgs,
    rule: Rule,
) -> Result<()> {
    let (old_cmds, old_runs, old_counted) = render::commands_and_runs(&load(old)?);
    let (new_cmds, new_runs, new_counted) = render::commands_and_runs(&load(new)?);
    let shared = old_cmds
        .iter()
        .any(|o| new_cmds.iter().any(|n| n.name == o.name));
    let mut text = String::new();
    for (i, o) in old_cmds.iter().enumerate() {
        let j = if shared {
            new_cmds.iter().position(|n| n.name == o.name)
        } else {
            (i < new_cmds.len()).then_some(i)
        };
        let Some(j) = j else {
            eprintln!("latscope: '{}' is only in {}", o.name, old.display());
            continue;
        };
        let commands = vec![
            BenchCommand {
                name: format!("{} ({})", o.name, old.display()),
                ..o.clone()
            },
            BenchCommand {
                name: format!("{} ({})", new_cmds[j].name, new.display()),
                ..new_cmds[j].clone()
            },
        ];
        let m = Measured {
            runs: vec![old_runs[i].clone(), new_runs[j].clone()],
            counted: vec![old_counted[i].clone(), new_counted[j].clone()],
            stop: Stop::Saved,
            ..Measured::default()
        };
        // Two sessions: no block pairs their runs.
        let runs = Runs {
            timed: &m.runs,
            counted: &m.counted,
            paired: false,
            looks: 0,
            clock: args.time,
            layouts: &[],
        };
        let a = analyse(&commands, runs, None, rule);
        let rule_doc = RuleDoc {
            noise: rule.noise,
            alpha: rule.alpha,
            time: runs.clock,
        };
        text.push_str(&match args.out.get() {
            Format::Json => doc::to_json(&render::document(&commands, &m, &a, rule_doc), false),
            Format::Markdown => render::markdown(&commands, &m, &a),
            Format::Csv => render::csv(&commands, &m),
            Format::Text => render::text(&commands, &m, &a, rule.noise),
        });
    }
    crate::commands::print(&text)
}
