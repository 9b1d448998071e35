//! `latscope live`: build the plan, check everything that can be checked, run bpftrace, print
//! (and, with `--serve`, publish each interval to the metrics server).

use std::path::PathBuf;

use anyhow::{Context, Result, bail};

use crate::cli::{Format, LiveArgs};
use crate::signals;
use latscope::files::Output;
use latscope::fleet::metrics::{LiveMetrics, Shared, parse_labels};
use latscope::fleet::serve::{MetricsServer, parse_listen};
use latscope::live::compile::{Request, compile};
use latscope::live::fields::Formats;
use latscope::live::launch::{self, Held};
use latscope::live::output::Snapshot;
use latscope::live::program::{Marker, Plan, Target, program};
use latscope::live::record::Recorder;
use latscope::live::runner::{self, Event, Outcome, RunOptions};
use latscope::live::spec::{Key, Probe, SpecError, ValueSpec, parse_endpoint, parse_span};
use latscope::live::{check, tracefs};
use latscope::report::live::{Names, interval_text, markdown, session_document, totals_text};

/// Runs `latscope live`.
pub fn run(args: &LiveArgs) -> Result<()> {
    if args.out.get() == Format::Csv {
        super::unsupported("live", args.out.get());
    }
    let mut request = request(args).unwrap_or_else(|e| usage(&e.to_string()));
    if request.spans.is_empty() && request.rates.is_empty() && request.values.is_empty() {
        usage("nothing to trace: give at least one --span, --rate or --value");
    }
    if args.print_program {
        let formats = tracefs::formats_if_readable(request.probes());
        request.target = print_target(args);
        let plan = compile(&request, &formats).unwrap_or_else(|e| usage(&e.to_string()));
        return crate::commands::print(&program(&plan));
    }
    let save = crate::commands::output_opt("--save", args.save.path())?;
    let (bpftrace, formats) = checked(&request, args)?;
    let mut plan = compile(&request, &formats).unwrap_or_else(|e| usage(&e.to_string()));
    if let Some(pid) = args.pid {
        check::process(pid)?;
    }
    let program_path = (!args.command.is_empty())
        .then(|| launch::resolve(&args.command[0]))
        .transpose()?;
    let names = names(&plan, args);
    // Before tracing, so that a port in use is an error before anything is lost.
    let (_server, shared) = serve(args, &names)?;
    let held = match &program_path {
        Some(path) => {
            // Orphans of the command's group (a script's background job once the script has
            // exited) come back to latscope, which kills and reaps them at the end, rather than
            // to an init that, in a container, may never reap them.
            latscope::process::reap_orphans_here();
            Some(launch::spawn_held(path, &args.command)?)
        }
        None => None,
    };
    plan.target = target(args, held.as_ref());
    plan.marker = held.as_ref().and_then(|_| marker());
    if held.is_some() && plan.marker.is_none() {
        eprintln!(
            "latscope: warning: latscope's own path cannot be given to bpftrace (it holds characters bpftrace does not take): the command starts 1 s after bpftrace says it attaches, and may run before every probe is in place"
        );
    }
    let traced = traced(args, &plan.target);
    let options = RunOptions {
        bpftrace,
        program: program(&plan),
        pid: args.pid,
        marker: plan.marker.is_some(),
        command: held,
        empty: Snapshot::new(
            plan.spans.len(),
            plan.values.len(),
            plan.rates.len(),
            plan.grouped,
        ),
        cancel: signals::cancel_on_interrupt(),
        record: args
            .record_spans
            .then(|| Recorder::new(args.max_spans.get())),
        duration_s: args.duration,
    };
    let outcome = runner::run(options, |event| {
        show(args, &names, &traced, publish(&shared, event))
    })
    .context("running bpftrace")?;
    report(args, (&names, &plan), outcome, &traced, save)
}

/// What the session shows as it goes: that it traces, then each interval (on standard output
/// in text; on standard error otherwise, as standard output holds only the document then).
fn show(args: &LiveArgs, names: &Names, traced: &str, event: Event<'_>) {
    match event {
        Event::Attached(n) => {
            eprintln!("latscope: tracing {n} probes in {traced}; Ctrl-C prints the totals")
        }
        Event::Interval {
            number,
            now,
            before,
        } if !args.quiet => {
            let text = interval_text(
                names,
                number,
                args.interval,
                now,
                before,
                args.cumulative,
                args.unit.unit(),
            );
            match args.out.get() {
                Format::Text => drop(crate::commands::print(&text)),
                _ => eprint!("{text}"),
            }
        }
        Event::Interval { .. } => {}
        Event::Other(text) => eprintln!("{text}"),
        Event::Lost(n) => eprintln!("latscope: bpftrace lost {n} events"),
    }
}

/// Everything that can be checked before tracing: bpftrace, the privileges, every probe and
/// tracefs; bpftrace's path and the tracepoints' formats. A probe named wrong is a usage error.
fn checked(request: &Request, args: &LiveArgs) -> Result<(PathBuf, Formats)> {
    let bpftrace = check::bpftrace()?;
    check::privileges()?;
    for probe in request.probes() {
        check::probe(probe)?;
        tracefs::kernel_function(probe).unwrap_or_else(|e| usage(&e.to_string()));
    }
    let formats = tracefs::formats(request.probes()).map_err(|e| match e {
        tracefs::TracefsError::NotMounted(_) | tracefs::TracefsError::Read { .. } => {
            anyhow::Error::new(e)
        }
        other => usage(&other.to_string()),
    })?;
    // A process tree is followed through the scheduler's fork and exit tracepoints (the
    // program's own), which bpftrace finds in tracefs: on a machine that has not mounted it
    // (a fresh boot), it is mounted here even when no probe of the user's needed it.
    if follows_forks(args) {
        tracefs::root()?;
    }
    Ok((bpftrace, formats))
}

/// Says how the session ended: its warnings, the totals in `--format`, the document saved;
/// an error when bpftrace or the command failed, or nothing was measured.
fn report(
    args: &LiveArgs,
    (names, plan): (&Names, &Plan),
    mut outcome: Outcome,
    traced: &str,
    save: Option<Output>,
) -> Result<()> {
    let unit = args.unit.unit();
    let warnings = latscope::live::diagnose::warnings(plan, &outcome);
    let measured = latscope::live::diagnose::measured(&outcome.last);
    for w in &warnings {
        eprintln!("latscope: warning: {w}");
    }
    // What was measured is saved even when bpftrace failed later; nothing measured saves nothing.
    let doc = measured.then(|| {
        let run = (args.interval, traced);
        let (doc, said) = session_document(names, plan, &mut outcome, run, &warnings);
        if let Some(w) = said {
            eprintln!("latscope: warning: {w}");
        }
        doc
    });
    match (args.out.get(), &doc) {
        (Format::Json, Some(doc)) => crate::commands::print(&latscope::doc::to_json(doc, false))?,
        (Format::Markdown, Some(doc)) => crate::commands::print(&markdown(doc, unit))?,
        (Format::Text | Format::Csv, _) => crate::commands::print(&totals_text(
            names,
            &outcome.last,
            &outcome.stopped_by,
            unit,
        ))?,
        (_, None) => {}
    }
    if let (Some(save), Some(doc)) = (&save, &doc) {
        let text = latscope::doc::to_json(doc, false);
        crate::commands::save_run(save, text.as_bytes(), true)?;
    }
    if let Some(error) = outcome.launch_error {
        bail!("{error}");
    }
    if let Some(error) = outcome.error {
        bail!("bpftrace failed: {}", error.trim());
    }
    if !measured {
        bail!(
            "nothing was measured: no span ended, no probe counted{}",
            match args.save.path() {
                Some(path) => format!("; {} not written", path.display()),
                None => String::new(),
            }
        );
    }
    Ok(())
}

fn usage(message: &str) -> ! {
    super::usage_error("live", clap::error::ErrorKind::ValueValidation, message)
}

/// Starts the metrics server of `live --serve`, if asked; returns it (stopped when dropped)
/// and the snapshot it serves. A bad address or label is a usage error.
fn serve(args: &LiveArgs, names: &Names) -> Result<(Option<MetricsServer>, Option<Shared>)> {
    let Some(listen) = &args.serve else {
        return Ok((None, None));
    };
    let addr = parse_listen(listen).unwrap_or_else(|e| usage(&e));
    let labels = parse_labels(&args.label, names.by.as_deref()).unwrap_or_else(|e| usage(&e));
    let shared = Shared::default();
    let registry = LiveMetrics::new(names.clone(), labels, shared.clone()).registry();
    let server = MetricsServer::start(addr, registry).context("latscope live --serve")?;
    eprintln!(
        "latscope: serving metrics on http://{}/metrics",
        server.addr
    );
    Ok((Some(server), Some(shared)))
}

/// Publishes each interval's snapshot to the metrics server, if serving; passes the event on.
fn publish<'a>(shared: &Option<Shared>, event: Event<'a>) -> Event<'a> {
    if let (Some(shared), Event::Interval { now, .. }) = (shared, &event) {
        shared.publish(now);
    }
    event
}

/// What the command line asks for (the target is set once the command runs).
fn request(args: &LiveArgs) -> Result<Request, SpecError> {
    let keys = args
        .key
        .iter()
        .map(|k| Key::parse(k))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some((spec, _)) = args.key.iter().zip(&keys).find(|(_, k)| k.is_empty()) {
        // `spans` pairs each start with the next end under an empty key; in live that is one
        // slot for the whole system, which any traced process's end would close.
        return Err(SpecError::Rule(format!(
            "--key '{spec}' names no field: give the field(s) that pair an end with its start (tid, pid, arg0, START=END, a,b)"
        )));
    }
    if keys.len() > 1 && keys.len() != args.span.len() {
        return Err(SpecError::Rule(format!(
            "{} --key options for {} spans: give one for all, or one per span in order",
            keys.len(),
            args.span.len()
        )));
    }
    let key_of = |i: usize| keys.get(if keys.len() == 1 { 0 } else { i });
    let spans = args
        .span
        .iter()
        .enumerate()
        .map(|(i, s)| parse_span(s, key_of(i)))
        .collect::<Result<Vec<_>, _>>()?;
    let rates = args
        .rate
        .iter()
        .map(|s| parse_endpoint(s))
        .collect::<Result<Vec<_>, _>>()?;
    let values = args
        .value
        .iter()
        .map(|s| s.parse::<ValueSpec>())
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(by) = &args.by
        && !latscope::rule::is_identifier(by)
    {
        return Err(SpecError::Field(format!("--by '{by}' is not a field name")));
    }
    if args.this_process_only && args.command.is_empty() {
        return Err(SpecError::Rule(
            "--this-process-only needs a COMMAND (after --)".into(),
        ));
    }
    Ok(Request {
        spans,
        rates,
        values,
        by: args.by.clone(),
        target: Target::Everything,
        interval_s: args.interval.max(1),
        duration_s: args.duration,
        record: args.record_spans.then_some(args.max_spans.get() as u64),
        marker: None,
        ends_anywhere: !args.key.is_empty(),
    })
}

/// The target `--print-program` shows: a command's pid is not known yet (its tree is seeded
/// at run time).
fn print_target(args: &LiveArgs) -> Target {
    match (args.pid, args.command.is_empty()) {
        (Some(pid), _) if args.children => Target::Tree(vec![pid]),
        (Some(pid), _) => Target::Pid(pid),
        (None, false) if args.this_process_only => Target::Pid(0),
        (None, false) => Target::Tree(Vec::new()),
        (None, true) => Target::Everything,
    }
}

/// Whether [`target`] will be a process tree.
fn follows_forks(args: &LiveArgs) -> bool {
    match args.pid {
        Some(_) => args.children,
        None => !args.command.is_empty() && !args.this_process_only,
    }
}

/// The target once the command (if any) is forked.
fn target(args: &LiveArgs, held: Option<&Held>) -> Target {
    match (args.pid, held) {
        (Some(pid), _) if args.children => Target::Tree(descendants(pid)),
        (Some(pid), _) => Target::Pid(pid),
        (None, Some(h)) if args.this_process_only => Target::Pid(h.pid),
        (None, Some(h)) => Target::Tree(vec![h.pid]),
        (None, None) => Target::Everything,
    }
}

/// `pid` and every process below it now, with their threads (a wake-up's `pid` field names a
/// thread), from `/proc/PID/task/*/children`; at most the pid map's size.
fn descendants(pid: u32) -> Vec<u32> {
    let max = latscope::live::program::MAX_PIDS as usize;
    let mut processes = vec![pid];
    let mut seen: std::collections::HashSet<u32> = processes.iter().copied().collect();
    let mut all = Vec::new();
    let mut i = 0;
    while i < processes.len() && all.len() < max {
        let p = processes[i];
        i += 1;
        all.push(p);
        let tasks = std::fs::read_dir(format!("/proc/{p}/task"))
            .into_iter()
            .flatten();
        for task in tasks.flatten() {
            if let Some(tid) = task
                .file_name()
                .to_str()
                .and_then(|t| t.parse::<u32>().ok())
                && tid != p
            {
                all.push(tid);
            }
            let children =
                std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            for child in children
                .split_whitespace()
                .filter_map(|c| c.parse::<u32>().ok())
            {
                if seen.insert(child) {
                    processes.push(child);
                }
            }
        }
    }
    if all.len() >= max {
        eprintln!(
            "latscope: warning: process {pid} has more than {max} processes and threads below it: only the first {max} are traced"
        );
        all.truncate(max);
    }
    all.sort_unstable();
    all.dedup();
    all
}

/// latscope's own marker probe, if its path can be given to bpftrace.
pub(crate) fn marker() -> Option<Marker> {
    let exe = std::env::current_exe().ok()?;
    let probe: Probe = format!("usdt:{}:latscope_live:attached", exe.display())
        .parse()
        .ok()?;
    Some(Marker {
        probe,
        pid: std::process::id(),
    })
}

/// Which processes are traced, in words.
fn traced(args: &LiveArgs, target: &Target) -> String {
    match target {
        Target::Everything => "every process".to_string(),
        Target::Pid(pid) if args.pid.is_some() => format!("process {pid}"),
        Target::Pid(pid) => format!("the command (pid {pid}) alone"),
        Target::Tree(_) if args.pid.is_some() => format!(
            "process {} and every process it forks",
            args.pid.unwrap_or_default()
        ),
        Target::Tree(roots) => format!(
            "the command (pid {}) and every process it forks",
            roots.first().copied().unwrap_or_default()
        ),
    }
}

fn names(plan: &Plan, args: &LiveArgs) -> Names {
    Names {
        spans: plan.spans.iter().map(|s| s.name.clone()).collect(),
        values: plan.values.iter().map(|v| v.name.clone()).collect(),
        rates: plan.rates.iter().map(|r| r.site.label.clone()).collect(),
        by: args.by.clone(),
    }
}
