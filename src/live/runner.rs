//! Running bpftrace and streaming its snapshots: the I/O edge of live tracing.
//!
//! bpftrace gets the generated program with `-e`, `-f json`, and `-p PID` or `-c COMMAND`.
//! A watcher thread asks bpftrace to finish (SIGINT, which runs the program's `END`: the final
//! snapshot) when latscope is interrupted or the traced PID is gone; a traced command's exit
//! ends bpftrace by itself. Whatever happens, the last complete snapshot is returned.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use super::output::{Line, Snapshot};
use super::record::Recorder;

/// Cumulative event counts of one rate, per group.
pub type RateTotals = std::collections::BTreeMap<Option<String>, u64>;
use crate::ingest::Cancel;

/// How to run bpftrace.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// the bpftrace binary
    pub bpftrace: std::path::PathBuf,
    /// the program text
    pub program: String,
    /// trace this running process
    pub pid: Option<u32>,
    /// or start and trace this command
    pub command: Option<Vec<String>>,
    /// an empty snapshot of the right shape
    pub empty: Snapshot,
    /// stop when raised (Ctrl-C)
    pub cancel: Cancel,
    /// keeps the spans the program prints (`--record-spans`)
    pub record: Option<Recorder>,
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
    /// why it stopped: "interrupted", "target exited", ...
    pub stopped_by: &'static str,
    /// the spans kept (`--record-spans`)
    pub record: Option<Recorder>,
}

/// Runs bpftrace, calling `on_event` as snapshots arrive.
pub fn run(opts: RunOptions, mut on_event: impl FnMut(Event<'_>)) -> std::io::Result<Outcome> {
    let mut cmd = Command::new(&opts.bpftrace);
    cmd.args(["-f", "json"]);
    if let Some(pid) = opts.pid {
        cmd.args(["-p", &pid.to_string()]);
    }
    if let Some(argv) = &opts.command {
        cmd.args(["-c", &argv.join(" ")]);
    }
    cmd.args(["-e", &opts.program])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn()?;
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let done = Arc::new(AtomicBool::new(false));
    let stopped_by = Arc::new(std::sync::Mutex::new("bpftrace exited"));
    let watcher = watch(
        child.id(),
        opts.pid,
        opts.cancel.clone(),
        done.clone(),
        stopped_by.clone(),
    );
    let errors = thread::spawn(move || forward_stderr(stderr));
    let mut state = Stream::new(opts.empty, opts.record);
    if let Some(stdout) = stdout {
        // Read bytes, not UTF-8 lines: the traced command shares bpftrace's stdout and may
        // print anything; stopping on bad UTF-8 would leave bpftrace blocked on a full pipe.
        let mut reader = BufReader::new(stdout);
        let mut line = Vec::new();
        while reader.read_until(b'\n', &mut line).unwrap_or(0) > 0 {
            let text = String::from_utf8_lossy(&line);
            state.line(text.trim_end_matches(['\n', '\r']), &mut on_event);
            line.clear();
        }
    }
    // Stop the watcher before reaping bpftrace, so it can never signal a reused PID.
    done.store(true, Ordering::Relaxed);
    let _ = watcher.join();
    let status = child.wait()?;
    let error_text = errors.join().unwrap_or_default();
    let failed = !status.success() && !state.finished;
    let watched = *stopped_by.lock().unwrap();
    let pid_gone = opts.pid.is_some_and(|p| !alive(p));
    let stopped_by = match watched {
        // bpftrace ends by itself when its -c command or its -p process exits.
        "bpftrace exited" if opts.command.is_some() && state.finished => {
            "the traced command exited"
        }
        "bpftrace exited" if pid_gone => "the traced process exited",
        other => other,
    };
    Ok(Outcome {
        last: state.now,
        rate_history: state.rate_history,
        finished: state.finished,
        error: failed.then(|| {
            if error_text.is_empty() {
                format!("bpftrace failed ({status})")
            } else {
                error_text
            }
        }),
        stopped_by,
        record: state.record,
    })
}

struct Stream {
    now: Snapshot,
    before: Snapshot,
    intervals: usize,
    rate_history: Vec<Vec<RateTotals>>,
    finished: bool,
    record: Option<Recorder>,
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
        }
    }

    fn line(&mut self, line: &str, on_event: &mut impl FnMut(Event<'_>)) {
        if self.finished {
            // bpftrace prints its (cleared) maps once more at exit: the final snapshot is kept.
            // Printed spans still count whenever they come.
            match Snapshot::default().apply(line) {
                Line::Span(span) => self.span(span),
                Line::Lost(n) => self.lost(n),
                _ => {}
            }
            return;
        }
        match self.now.apply(line) {
            Line::Attached(n) => on_event(Event::Attached(n)),
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
            Line::Lost(n) => self.lost(n),
            // The traced command's own output shares bpftrace's stdout: pass it on.
            Line::Other(text) => eprintln!("{text}"),
        }
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

/// Sends SIGINT to bpftrace once when `cancel` is raised or the traced PID is gone.
fn watch(
    bpftrace: u32,
    pid: Option<u32>,
    cancel: Cancel,
    done: Arc<AtomicBool>,
    stopped_by: Arc<std::sync::Mutex<&'static str>>,
) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        while !done.load(Ordering::Relaxed) {
            let reason = if cancel.is_raised() {
                Some("interrupted")
            } else if pid.is_some_and(|p| !alive(p)) {
                Some("the traced process exited")
            } else {
                None
            };
            if let Some(reason) = reason {
                *stopped_by.lock().unwrap() = reason;
                // SAFETY: kill has no memory-safety preconditions.
                unsafe { libc::kill(bpftrace as i32, libc::SIGINT) };
                return;
            }
            thread::sleep(Duration::from_millis(100));
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
