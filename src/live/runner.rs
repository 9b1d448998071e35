//! Running bpftrace and streaming its snapshots: the I/O edge of live tracing.
//!
//! bpftrace gets the generated program in a private file with `-f json` ([`super::bpftrace`]:
//! it dies with latscope), and never starts or filters a process itself: the program holds the set of traced pids (see [`super::program::Target`]).
//! A traced command is forked by latscope and held before `execve` ([`super::launch`]) until
//! the program's marker probe, attached last, answers latscope's own USDT probe: from then on
//! every probe is in place, and the command runs from its first instruction. A watcher thread
//! asks bpftrace to finish (SIGINT, which runs the program's `END`: the final snapshot) when
//! latscope is interrupted, the traced PID is gone or the command has exited. Whatever
//! happens, the last complete snapshot is returned, and the command's process group is ended
//! and reaped: every process left in it, whether its leader is alive or not.

use std::io::{BufRead, BufReader, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use super::bpftrace::Bpftrace;
use super::launch::{self, Held};
use super::output::{Line, Snapshot};
use super::record::Recorder;

/// Cumulative event counts of one rate, per group.
pub type RateTotals = std::collections::BTreeMap<Option<String>, u64>;
use crate::ingest::Cancel;

/// How to run bpftrace.
#[derive(Debug)]
pub struct RunOptions {
    /// the bpftrace binary
    pub bpftrace: std::path::PathBuf,
    /// the program text
    pub program: String,
    /// stop when this process exits (`--pid`)
    pub pid: Option<u32>,
    /// the command, held until every probe is attached
    pub command: Option<Held>,
    /// whether the program answers latscope's marker probe ([`super::program::Marker`]);
    /// without it the command starts one second after bpftrace reports attaching
    pub marker: bool,
    /// an empty snapshot of the right shape
    pub empty: Snapshot,
    /// stop when raised (Ctrl-C)
    pub cancel: Cancel,
    /// keeps the spans the program prints (`--record-spans`)
    pub record: Option<Recorder>,
    /// the program's `--duration`, seconds: how a clean exit of bpftrace is explained
    pub duration_s: Option<u64>,
}

/// What happened while tracing.
#[derive(Debug, Clone)]
pub enum Event<'a> {
    /// bpftrace attached this many probes: tracing has started
    Attached(u64),
    /// an interval ended: the cumulative snapshot now and at the previous interval
    Interval {
        /// 1-based interval number
        number: usize,
        /// cumulative now
        now: &'a Snapshot,
        /// cumulative at the previous interval
        before: &'a Snapshot,
    },
    /// a line that is none of latscope's own (the program's own `printf`s, as bpftrace's
    /// JSON line, or anything else bpftrace printed)
    Other(&'a str),
    /// bpftrace's perf buffer overflowed: this many printed lines were lost (not counted here
    /// when spans are recorded: the recorder counts them)
    Lost(u64),
}

/// The result of a session.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// the final cumulative snapshot (the last complete one if bpftrace did not finish cleanly)
    pub last: Snapshot,
    /// every interval's cumulative rate totals (per rate, per group), in order
    pub rate_history: Vec<Vec<RateTotals>>,
    /// whether bpftrace printed its final snapshot
    pub finished: bool,
    /// why the session ended early, if it did: bpftrace's error output
    pub error: Option<String>,
    /// why it stopped: "interrupted", "the traced command exited", ...
    pub stopped_by: String,
    /// the spans kept (`--record-spans`)
    pub record: Option<Recorder>,
    /// whether the map of traced processes filled up
    pub pids_full: bool,
    /// why the command could not start (execve failed, or the probes were never confirmed)
    pub launch_error: Option<String>,
}

/// Shared between the reading loop and the threads around it.
#[derive(Default)]
struct Shared {
    /// the reading loop or the session is over
    done: AtomicBool,
    /// every probe is attached
    ready: AtomicBool,
    /// the command has exited
    exited: AtomicBool,
    /// why the watcher stopped bpftrace
    stopped_by: Mutex<Option<String>>,
    /// the command's pid once it runs
    command: Mutex<Option<u32>>,
    /// its exit status
    status: Mutex<Option<i32>>,
    /// the marker never fired in time
    marker_timeout: AtomicBool,
}

/// Runs bpftrace, calling `on_event` as snapshots arrive. bpftrace dies with the calling
/// thread ([`Bpftrace::start`]): call it from latscope's main thread.
pub fn run(mut opts: RunOptions, mut on_event: impl FnMut(Event<'_>)) -> std::io::Result<Outcome> {
    let mut child = match Bpftrace::start(&opts.bpftrace, &opts.program) {
        Ok(c) => c,
        Err(e) => {
            if let Some(held) = opts.command.take() {
                held.abandon();
            }
            return Err(e);
        }
    };
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let shared = Arc::new(Shared::default());
    let threads = helpers(&opts, &mut child, stderr, &shared);
    let (marker, watcher, errors) = match threads {
        Ok(threads) => threads,
        Err(e) => {
            if let Some(held) = opts.command.take() {
                held.abandon();
            }
            return Err(e);
        }
    };
    let mut state = Stream::new(opts.empty, opts.record);
    let mut held = opts.command.take();
    let mut launch_error: Option<String> = None;
    if let Some(stdout) = stdout {
        // Read bytes, not UTF-8 lines: a probe may print anything.
        let mut reader = BufReader::new(stdout);
        let mut line = Vec::new();
        // The program's file goes before "attached" is said: whoever reads that (a user, a
        // test that then kills latscope outright) finds it gone.
        let mut on_event = |event: Event<'_>| {
            if let Event::Attached(_) = event {
                child.remove_program();
            }
            on_event(event);
        };
        while reader.read_until(b'\n', &mut line).unwrap_or(0) > 0 {
            let text = String::from_utf8_lossy(&line);
            let parsed = state.line(text.trim_end_matches(['\n', '\r']), &mut on_event);
            let start_now = match parsed {
                Some(Line::Ready) => true,
                Some(Line::Attached(_)) if !opts.marker => {
                    thread::sleep(Duration::from_secs(1));
                    true
                }
                _ => false,
            };
            if start_now && !opts.cancel.is_raised() {
                shared.ready.store(true, Ordering::Relaxed);
                if let Some(h) = held.take() {
                    launch_error = start(h, &shared).err().map(|e| e.to_string());
                }
            }
            line.clear();
        }
    }
    // Stop the threads before reaping bpftrace, so the watcher can never signal a reused PID.
    shared.done.store(true, Ordering::Relaxed);
    let _ = watcher.join();
    if let Some(m) = marker {
        let _ = m.join();
    }
    let status = child.wait()?;
    if let Some(h) = held.take() {
        // bpftrace ended before its probes were in place: the command never runs.
        h.abandon();
    }
    end_command(&shared);
    let error_text = errors.join().unwrap_or_default();
    let failed = !status.success() && !state.finished;
    let pid_gone = opts.pid.is_some_and(|p| !alive(p));
    let stopped_by = stop_reason(
        shared.stopped_by.lock().unwrap().clone(),
        pid_gone,
        status.success() && state.finished,
        opts.duration_s,
    );
    if shared.marker_timeout.load(Ordering::Relaxed) && launch_error.is_none() {
        launch_error = Some(format!(
            "the probes were not confirmed attached within {} s (latscope's marker probe never fired): the command was not started",
            MARKER_TIMEOUT.as_secs()
        ));
    }
    let error = match failed {
        true if error_text.is_empty() => Some(format!("bpftrace failed ({status})")),
        true => Some(error_text),
        false => None,
    };
    Ok(Outcome {
        last: state.now,
        rate_history: state.rate_history,
        finished: state.finished,
        error,
        stopped_by,
        record: state.record,
        pids_full: state.pids_full,
        launch_error,
    })
}

/// Why a session stopped: the watcher's reason when it stopped bpftrace; else the traced
/// process's exit; else, for a clean exit with the final snapshot, the program's `--duration`
/// probe, the only `exit()` in a program that has one; else bpftrace's own exit.
fn stop_reason(
    watcher: Option<String>,
    pid_gone: bool,
    clean_exit: bool,
    duration_s: Option<u64>,
) -> String {
    match (watcher, duration_s) {
        (Some(reason), _) => reason,
        (None, _) if pid_gone => "the traced process exited".to_string(),
        // The program rounds a duration under 1 s up to 1 s ([`super::program`]).
        (None, Some(d)) if clean_exit => format!("--duration ended after {} s", d.max(1)),
        (None, _) => "bpftrace exited".to_string(),
    }
}

type Helpers = (
    Option<thread::JoinHandle<()>>,
    thread::JoinHandle<()>,
    thread::JoinHandle<String>,
);

/// Starts the threads beside bpftrace: the marker's (with `--marker`), the watcher, the reader
/// of its stderr. If one cannot be started (a process limit), bpftrace is ended and reaped,
/// the threads started are joined, and the error says which could not start.
fn helpers(
    opts: &RunOptions,
    child: &mut Bpftrace,
    stderr: Option<std::fs::File>,
    shared: &Arc<Shared>,
) -> std::io::Result<Helpers> {
    let marker = opts
        .marker
        .then(|| call_marker(shared.clone(), child.id()))
        .transpose();
    let watcher = watch(child.id(), opts.pid, opts.cancel.clone(), shared.clone());
    let errors = thread::Builder::new()
        .name("bpftrace-stderr".into())
        .spawn(move || forward_stderr(stderr));
    match (marker, watcher, errors) {
        (Ok(marker), Ok(watcher), Ok(errors)) => Ok((marker, watcher, errors)),
        (marker, watcher, errors) => {
            let _ = child.kill();
            let _ = child.wait();
            shared.done.store(true, Ordering::Relaxed);
            let mut failed = None;
            for joined in [
                marker.map(|m| m.map(|t| t.join())),
                watcher.map(|t| Some(t.join())),
                errors.map(|t| Some(t.join().map(drop))),
            ] {
                if let Err(e) = joined {
                    failed.get_or_insert(e);
                }
            }
            let e = failed.unwrap_or_else(|| std::io::Error::other("unknown"));
            Err(std::io::Error::new(
                e.kind(),
                format!("cannot start a thread beside bpftrace: {e}"),
            ))
        }
    }
}

/// Starts the thread that reaps the held command, then releases it. The thread comes first:
/// one that cannot be started (a process limit) leaves the command unrun, with the error.
fn start(held: Held, shared: &Arc<Shared>) -> Result<(), launch::LaunchError> {
    let pid = held.pid;
    let reaper = {
        let shared = shared.clone();
        thread::Builder::new()
            .name("command-reaper".into())
            .spawn(move || {
                let status = launch::wait(pid);
                *shared.status.lock().unwrap() = status;
                shared.exited.store(true, Ordering::Relaxed);
            })
    };
    if let Err(e) = reaper {
        shared.exited.store(true, Ordering::Relaxed);
        return Err(held.fail(e));
    }
    // A failed release reaps the child itself; the reaper then finds no status to record.
    let pid = held.release().inspect_err(|_| {
        shared.exited.store(true, Ordering::Relaxed);
    })?;
    *shared.command.lock().unwrap() = Some(pid);
    Ok(())
}

/// How long the command's group has, after SIGTERM, to end before SIGKILL.
const GROUP_GRACE: Duration = Duration::from_secs(1);

/// Ends what is left of the command's process group: SIGTERM, up to [`GROUP_GRACE`] for it to
/// empty, then SIGKILL to whatever is left, and reaps it. The leader may have exited long
/// before, leaving children that ignore SIGTERM (a script's background job): the group is
/// killed whether its leader lives or not.
fn end_command(shared: &Shared) {
    let Some(pid) = *shared.command.lock().unwrap() else {
        return;
    };
    launch::signal_group(pid, libc::SIGTERM);
    let deadline = std::time::Instant::now() + GROUP_GRACE;
    while !launch::group_ended(pid, shared.exited.load(Ordering::Relaxed)) {
        if std::time::Instant::now() >= deadline {
            break;
        }
        thread::sleep(Duration::from_millis(20));
    }
    launch::signal_group(pid, libc::SIGKILL);
    // The reaper thread reaps the leader: the group's sweep waits until it has, so as not to
    // take the leader's status from it.
    let deadline = std::time::Instant::now() + GROUP_GRACE;
    while !shared.exited.load(Ordering::Relaxed) && std::time::Instant::now() < deadline {
        thread::sleep(Duration::from_millis(5));
    }
    if shared.exited.load(Ordering::Relaxed) {
        launch::reap_group(pid);
    }
}

/// latscope's own USDT probe, which the program's marker answers once attached.
#[inline(never)]
pub fn fire_marker() {
    probe::probe!(latscope_live, attached);
}

/// How long bpftrace may take to attach its probes before latscope gives up on the command.
const MARKER_TIMEOUT: Duration = Duration::from_secs(60);

/// Fires the marker every 10 ms until the program answers or the session ends; past
/// [`MARKER_TIMEOUT`], asks bpftrace to stop (the held command never runs).
fn call_marker(shared: Arc<Shared>, bpftrace: u32) -> std::io::Result<thread::JoinHandle<()>> {
    thread::Builder::new()
        .name("live-marker".into())
        .spawn(move || {
            let started = std::time::Instant::now();
            while !shared.ready.load(Ordering::Relaxed) && !shared.done.load(Ordering::Relaxed) {
                if started.elapsed() > MARKER_TIMEOUT {
                    shared.marker_timeout.store(true, Ordering::Relaxed);
                    // SAFETY: kill has no memory-safety preconditions.
                    unsafe { libc::kill(bpftrace as i32, libc::SIGINT) };
                    return;
                }
                fire_marker();
                thread::sleep(Duration::from_millis(10));
            }
        })
}

struct Stream {
    now: Snapshot,
    before: Snapshot,
    intervals: usize,
    rate_history: Vec<Vec<RateTotals>>,
    finished: bool,
    record: Option<Recorder>,
    pids_full: bool,
}

impl Stream {
    fn new(empty: Snapshot, record: Option<Recorder>) -> Self {
        Stream {
            now: empty.clone(),
            before: empty,
            intervals: 0,
            rate_history: Vec::new(),
            finished: false,
            record,
            pids_full: false,
        }
    }

    /// Applies one line; returns it when the caller acts on it (attached, ready).
    fn line(&mut self, line: &str, on_event: &mut impl FnMut(Event<'_>)) -> Option<Line> {
        if self.finished {
            // bpftrace prints its (cleared) maps once more at exit: the final snapshot is kept.
            // Printed spans still count whenever they come.
            match Snapshot::default().apply(line) {
                Line::Span(span) => self.span(span),
                Line::Lost(n) => self.lost(n),
                _ => {}
            }
            return None;
        }
        match self.now.apply(line) {
            Line::Attached(n) => {
                on_event(Event::Attached(n));
                return Some(Line::Attached(n));
            }
            Line::Ready => return Some(Line::Ready),
            Line::PidsFull => self.pids_full = true,
            Line::Tick => {
                self.intervals += 1;
                self.rate_history.push(self.now.rates.clone());
                on_event(Event::Interval {
                    number: self.intervals,
                    now: &self.now,
                    before: &self.before,
                });
                self.before = self.now.clone();
            }
            Line::End => {
                if self.now.rates != self.before.rates || self.rate_history.is_empty() {
                    self.rate_history.push(self.now.rates.clone());
                }
                self.finished = true;
            }
            Line::Updated => {}
            Line::Span(span) => self.span(span),
            Line::Lost(n) if self.record.is_none() => on_event(Event::Lost(n)),
            Line::Lost(n) => self.lost(n),
            Line::Other(text) => on_event(Event::Other(&text)),
        }
        None
    }
}

impl Stream {
    fn span(&mut self, span: super::output::SpanLine) {
        if let Some(record) = &mut self.record {
            record.span(span);
        }
    }

    fn lost(&mut self, n: u64) {
        match &mut self.record {
            Some(record) => record.lost = record.lost.saturating_add(n),
            None => eprintln!("latscope: bpftrace lost {n} events"),
        }
    }
}

/// Whether process `pid` is running: it exists and is not a zombie waiting to be reaped.
pub fn alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state follows the parenthesised command name, which may itself contain spaces.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next());
    !matches!(state, Some('Z' | 'X') | None)
}

/// Sends SIGINT to bpftrace once when `cancel` is raised, the traced PID is gone or the
/// command has exited; on `cancel`, the command's group gets SIGINT too (it runs in its own
/// process group, where a terminal's Ctrl-C does not reach it).
fn watch(
    bpftrace: u32,
    pid: Option<u32>,
    cancel: Cancel,
    shared: Arc<Shared>,
) -> std::io::Result<thread::JoinHandle<()>> {
    thread::Builder::new()
        .name("live-watcher".into())
        .spawn(move || {
            while !shared.done.load(Ordering::Relaxed) {
                let reason = if cancel.is_raised() {
                    if let Some(command) = *shared.command.lock().unwrap() {
                        launch::signal_group(command, libc::SIGINT);
                    }
                    Some("interrupted".to_string())
                } else if pid.is_some_and(|p| !alive(p)) {
                    Some("the traced process exited".to_string())
                } else if shared.exited.load(Ordering::Relaxed) {
                    Some(match *shared.status.lock().unwrap() {
                        Some(code) if code != 0 => {
                            format!("the traced command exited (status {code})")
                        }
                        _ => "the traced command exited".to_string(),
                    })
                } else {
                    None
                };
                if let Some(reason) = reason {
                    *shared.stopped_by.lock().unwrap() = Some(reason);
                    // SAFETY: kill has no memory-safety preconditions.
                    unsafe { libc::kill(bpftrace as i32, libc::SIGINT) };
                    return;
                }
                thread::sleep(Duration::from_millis(50));
            }
        })
}

/// Copies bpftrace's stderr to ours as it comes (minus a harmless warning) and returns it.
fn forward_stderr(stderr: Option<impl Read>) -> String {
    let Some(stderr) = stderr else {
        return String::new();
    };
    let mut kept = String::new();
    for line in BufReader::new(stderr).lines().map_while(Result::ok) {
        // Harmless on kernels without the legacy tracefs uprobe_events file, and a rlimit
        // warning bpftrace prints even when loading works.
        if [
            "RLIMIT_MEMLOCK",
            "uprobe_events): No such file",
            "failed to detach probe",
        ]
        .iter()
        .any(|noise| line.contains(noise))
        {
            continue;
        }
        eprintln!("bpftrace: {line}");
        kept.push_str(&line);
        kept.push('\n');
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clean_exit_with_a_duration_is_said_to_be_the_duration_ending() {
        assert_eq!(
            stop_reason(None, false, true, Some(10)),
            "--duration ended after 10 s"
        );
        assert_eq!(
            stop_reason(None, false, true, Some(0)),
            "--duration ended after 1 s"
        );
    }

    #[test]
    fn other_stops_keep_their_own_reason() {
        let ctrl_c = Some("interrupted".to_string());
        assert_eq!(stop_reason(ctrl_c, false, true, Some(10)), "interrupted");
        assert_eq!(
            stop_reason(None, true, true, Some(10)),
            "the traced process exited"
        );
        // Without the final snapshot bpftrace failed: the duration did not end it.
        assert_eq!(stop_reason(None, false, false, Some(10)), "bpftrace exited");
        assert_eq!(stop_reason(None, false, true, None), "bpftrace exited");
    }
}
