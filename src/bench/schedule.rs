//! Running the commands: warmup, then interleaved randomized blocks until enough runs and
//! time, each run measured by [`spawn`](super::spawn).
//!
//! Every block runs each command once in a freshly shuffled order, so slow drifts of the
//! machine (thermal, other tenants, caches) hit every command alike instead of whichever ran
//! last, which is what an all-A-then-all-B schedule (hyperfine's) does. Under `--layouts K`
//! ([`super::layouts`]) every command is prepared once per layout, and the blocks go through the
//! layouts in shuffled rounds of K: every command of a block runs under the block's layout.

use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_pcg::Pcg64;

use super::counters::Event;
use super::layouts;
use super::spawn::{Io, Prepared, SpawnError, Stops};
use crate::doc::bench::Stop;
use crate::doc::run::{Layout, RunMeasure};
use crate::ingest::Cancel;

/// One command to benchmark.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BenchCommand {
    /// as shown: its `-n/--name`, else the command line (parameters substituted in both)
    pub name: String,
    /// the command line as given, after parameter substitution
    pub command: String,
    /// what is executed
    pub argv: Vec<String>,
    /// parameter values substituted into it (`-L`)
    pub parameters: Vec<(String, String)>,
}

/// How to schedule the runs.
#[derive(Debug, Clone)]
pub struct Schedule {
    /// untimed runs of each command first
    pub warmup: u32,
    /// exactly this many timed runs of each command
    pub runs: Option<u32>,
    /// at least this many runs of each (when `runs` is not given)
    pub min_runs: u32,
    /// keep going until at least this long has been spent (when `runs` is not given)
    pub min_time: Duration,
    /// stop by then at the latest (when `runs` is not given)
    pub max_time: Option<Duration>,
    /// whether `max_time` may cut the benchmark below `min_runs` (an explicit `--max-time`
    /// does; the default limit does not)
    pub max_time_firm: bool,
    /// run once per command before its first run, untimed (hyperfine's `--setup`)
    pub setup: Option<Vec<String>>,
    /// run before every timed run, untimed
    pub prepare: Option<Vec<String>>,
    /// run after every timed run, untimed (hyperfine's `--conclude`)
    pub conclude: Option<Vec<String>>,
    /// run once per command after its last run, untimed (hyperfine's `--cleanup`)
    pub cleanup: Option<Vec<String>>,
    /// the commands' stdin and output
    pub io: Io,
    /// kill a run after this long
    pub timeout: Option<Duration>,
    /// a failing run (non-zero exit, timeout) does not stop the benchmark
    pub ignore_failure: bool,
    /// counters to read, in counted runs of their own (empty: no counted runs)
    pub events: Vec<Event>,
    /// a counted round (each command once, with counters) after every this many blocks
    pub count_every: u32,
    /// seed of the block order shuffle
    pub seed: u64,
    /// the layouts every command runs under (`--layouts`; empty: latscope's environment and
    /// the commands as given)
    pub layouts: Vec<Layout>,
    /// stop early, keeping what was measured
    pub cancel: Option<Cancel>,
    /// reap every exited child before each run (for a subreaper with no other children: the
    /// orphans the runs leave; see [`crate::process::reap_exited_children`])
    pub reap_orphans: bool,
}

/// Counted rounds: one after every [`COUNT_EVERY`] blocks (and one after the first), so reading
/// the counters costs about a fifth of the benchmark's time and never slows a timed run.
pub const COUNT_EVERY: u32 = 4;

pub use crate::stats::paired::MAX_LOOKS;

/// Everything measured.
#[derive(Debug, Clone, Default)]
pub struct Measured {
    /// per command, its timed runs in order (run `j` of every command is in block `j`)
    pub runs: Vec<Vec<RunMeasure>>,
    /// per command, its counted runs (counters attached; their wall time is not used)
    pub counted: Vec<Vec<RunMeasure>>,
    /// events that could not be counted, with the reason (reported once)
    pub unsupported: Vec<(String, String)>,
    /// whether the schedule was cut short by Ctrl-C
    pub interrupted: bool,
    /// the order commands ran in, as indices (for the record)
    pub order: Vec<usize>,
    /// interim looks at the data before the last (each spends a little of the significance
    /// level: see [`crate::stats::paired`])
    pub looks: u32,
    /// why it stopped
    pub stop: Stop,
    /// the layouts the commands ran under (`--layouts`), and the command that built each
    /// layout's binaries (`--relink`)
    pub layouts: Vec<Layout>,
    /// `--relink`, as given
    pub relink: Option<String>,
}

/// Why a benchmark stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A command could not be started.
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    /// A command failed.
    #[error("'{command}' {what}; use --ignore-failure to benchmark it anyway")]
    Failed {
        /// the command
        command: String,
        /// "exited with status 2", "timed out after 5 s", ...
        what: String,
    },
}

/// Runs the schedule, calling `progress(done_runs)` after each timed run. Once the minimum runs
/// and time are done, `clear(&measured)` is asked at looks spaced by a quarter of the elapsed
/// time; `true` stops the benchmark. On error, what was measured so far is returned with it.
pub fn run(
    commands: &[BenchCommand],
    s: &Schedule,
    mut progress: impl FnMut(usize),
    mut clear: impl FnMut(&Measured) -> bool,
) -> (Measured, Option<BenchError>) {
    let mut m = Measured {
        runs: vec![Vec::new(); commands.len()],
        counted: vec![Vec::new(); commands.len()],
        layouts: s.layouts.clone(),
        ..Measured::default()
    };
    let error = match Runner::new(commands, s) {
        Ok(mut r) => r.all(&mut m, &mut progress, &mut clear).err(),
        Err(e) => Some(e),
    };
    if error.is_some() && !m.interrupted {
        m.stop = Stop::Failed;
    }
    (m, error)
}

/// The commands prepared (per command, per layout), and the hooks.
struct Runner<'a> {
    commands: &'a [BenchCommand],
    prepared: Vec<Vec<Prepared>>,
    hooks: [Option<Prepared>; 4],
    s: Schedule,
}

const SETUP: usize = 0;
const PREPARE: usize = 1;
const CONCLUDE: usize = 2;
const CLEANUP: usize = 3;
const HOOK_NAMES: [&str; 4] = ["--setup", "--prepare", "--conclude", "--cleanup"];

/// A timed run, or a counted run with these events.
#[derive(Clone, Copy)]
enum Counted<'a> {
    No,
    Yes(&'a [Event]),
}

enum Outcome {
    Go,
    Interrupted,
}

impl<'a> Runner<'a> {
    fn new(commands: &'a [BenchCommand], s: &Schedule) -> Result<Runner<'a>, BenchError> {
        let prepared = commands
            .iter()
            .map(|c| prepare(c, &s.layouts, &s.io))
            .collect::<Result<Vec<_>, _>>()?;
        // Hooks read nothing and write where the commands write.
        let hook_io = Io {
            input: None,
            output: s.io.output.clone(),
        };
        let hook = |h: &Option<Vec<String>>| -> Result<Option<Prepared>, BenchError> {
            Ok(h.as_ref()
                .map(|argv| Prepared::new(argv, &hook_io))
                .transpose()?)
        };
        let hooks = [
            hook(&s.setup)?,
            hook(&s.prepare)?,
            hook(&s.conclude)?,
            hook(&s.cleanup)?,
        ];
        Ok(Runner {
            commands,
            prepared,
            hooks,
            s: s.clone(),
        })
    }

    /// A run's time limit, and the cancel flag that kills it.
    fn stops(&self) -> Stops<'_> {
        Stops {
            timeout: self.s.timeout,
            cancel: self.s.cancel.as_ref(),
        }
    }

    fn cancelled(&self) -> bool {
        self.s.cancel.as_ref().is_some_and(Cancel::is_raised)
    }

    fn all(
        &mut self,
        m: &mut Measured,
        progress: &mut impl FnMut(usize),
        clear: &mut impl FnMut(&Measured) -> bool,
    ) -> Result<(), BenchError> {
        // Interleaved blocks run every command in turn, so a setup cannot be per command: it
        // runs once before the first block, and the cleanup once after the last — also after a
        // failed run or Ctrl-C, once the setup ran.
        self.hook(SETUP)?;
        let outcome = self.blocks(m, progress, clear);
        let cleanup = self.hook(CLEANUP);
        match outcome {
            Ok(Outcome::Interrupted) => {
                m.interrupted = true;
                m.stop = Stop::Interrupted;
                Ok(())
            }
            Ok(Outcome::Go) => cleanup,
            // Ctrl-C in a terminal also kills the child: that is an interruption, not a failure.
            Err(_) if self.cancelled() => {
                m.interrupted = true;
                m.stop = Stop::Interrupted;
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    fn blocks(
        &mut self,
        m: &mut Measured,
        progress: &mut impl FnMut(usize),
        clear: &mut impl FnMut(&Measured) -> bool,
    ) -> Result<Outcome, BenchError> {
        let k = self.s.layouts.len().max(1);
        for w in 0..self.s.warmup as usize {
            for c in 0..self.commands.len() {
                if self.cancelled() {
                    return Ok(Outcome::Interrupted);
                }
                self.once(c, w % k, Counted::No, m)?;
            }
        }
        let mut rng = Pcg64::seed_from_u64(self.s.seed);
        let mut round: Vec<usize> = (0..k).collect();
        let started = Instant::now();
        let mut blocks = 0u32;
        let mut done = 0;
        let mut next_look = Duration::ZERO;
        loop {
            if let Some(stop) = self.stop(blocks, started.elapsed()) {
                m.stop = stop;
                break;
            }
            if self.may_look(blocks, m.looks) && started.elapsed() >= self.s.min_time {
                // A look: asked at most at 25% steps of the elapsed time.
                if started.elapsed() >= next_look {
                    if clear(m) {
                        m.stop = Stop::Clear;
                        break;
                    }
                    m.looks += 1;
                    next_look = started.elapsed().mul_f64(1.25);
                }
            }
            // Each round of k blocks runs every layout once, in a shuffled order.
            let slot = blocks as usize % k;
            if k > 1 && slot == 0 {
                round.shuffle(&mut rng);
            }
            let layout = round[slot];
            let mut order: Vec<usize> = (0..self.commands.len()).collect();
            order.shuffle(&mut rng);
            for &c in &order {
                if self.cancelled() {
                    return Ok(Outcome::Interrupted);
                }
                let r = self.once(c, layout, Counted::No, m)?;
                m.runs[c].push(r);
                m.order.push(c);
                done += 1;
                progress(done);
            }
            if !self.s.events.is_empty() && blocks.is_multiple_of(self.s.count_every.max(1)) {
                order.shuffle(&mut rng);
                for &c in &order {
                    if self.cancelled() {
                        return Ok(Outcome::Interrupted);
                    }
                    let events = std::mem::take(&mut self.s.events);
                    let r = self.once(c, layout, Counted::Yes(&events), m);
                    // Events found unsupported by the first counted run are not tried again
                    // (each failed perf_event_open costs tens of microseconds).
                    self.s.events = events;
                    m.counted[c].push(r?);
                    self.s
                        .events
                        .retain(|e| !m.unsupported.iter().any(|(name, _)| *name == e.name));
                }
            }
            blocks += 1;
        }
        Ok(Outcome::Go)
    }

    /// Whether the data may be looked at now: only without `--runs` (exactly N runs are
    /// exactly N), only with something to compare, after the minimum runs, and at most
    /// [`MAX_LOOKS`] times (so the looks never spend more than α/2).
    fn may_look(&self, blocks: u32, looks: u32) -> bool {
        self.s.runs.is_none()
            && self.commands.len() >= 2
            && blocks >= self.s.min_runs
            && looks < MAX_LOOKS
    }

    /// Whether the schedule is done without asking the data.
    fn stop(&self, blocks: u32, elapsed: Duration) -> Option<Stop> {
        let s = &self.s;
        if let Some(runs) = s.runs {
            return (blocks >= runs).then_some(Stop::Runs);
        }
        let floor = if s.max_time_firm { 2 } else { s.min_runs };
        if s.max_time.is_some_and(|max| elapsed >= max) && blocks >= floor {
            return Some(Stop::MaxTime);
        }
        // Without a limit there is nothing to wait for after the minimum.
        (s.max_time.is_none() && blocks >= s.min_runs && elapsed >= s.min_time)
            .then_some(Stop::MinTime)
    }

    fn hook(&self, which: usize) -> Result<(), BenchError> {
        let Some(p) = &self.hooks[which] else {
            return Ok(());
        };
        // The cleanup runs after a Ctrl-C too: it is not cancelled (the signal watchdog still
        // ends a cleanup that hangs).
        let stops = Stops {
            cancel: self.s.cancel.as_ref().filter(|_| which != CLEANUP),
            ..self.stops()
        };
        let (r, _) = p.run(&[], stops)?;
        if r.exit_code != Some(0) && !self.s.ignore_failure {
            let argv = [
                &self.s.setup,
                &self.s.prepare,
                &self.s.conclude,
                &self.s.cleanup,
            ][which];
            return Err(BenchError::Failed {
                command: format!(
                    "{} '{}'",
                    HOOK_NAMES[which],
                    argv.as_ref().map(|a| a.join(" ")).unwrap_or_default()
                ),
                what: failure_text(&r, &self.s),
            });
        }
        Ok(())
    }

    /// One run of command `c` under layout `layout` between its prepare and conclude hooks.
    fn once(
        &self,
        c: usize,
        layout: usize,
        counted: Counted<'_>,
        m: &mut Measured,
    ) -> Result<RunMeasure, BenchError> {
        if self.s.reap_orphans {
            // Between runs: no run's status can be taken, and no run is being timed.
            crate::process::reap_exited_children();
        }
        self.hook(PREPARE)?;
        let prepared = &self.prepared[c][layout];
        let (mut r, unsupported) = match counted {
            // Forked even when no event could be opened: peak RSS is read from these runs.
            Counted::Yes(events) => prepared.counted(events, self.stops())?,
            Counted::No => prepared.run(&[], self.stops())?,
        };
        r.layout = self.s.layouts.get(layout).copied();
        if matches!(counted, Counted::Yes(_)) && m.unsupported.is_empty() {
            m.unsupported = unsupported;
        }
        if (r.timed_out || r.exit_code != Some(0)) && !self.s.ignore_failure {
            return Err(BenchError::Failed {
                command: crate::report::format::printable(&self.commands[c].name),
                what: failure_text(&r, &self.s),
            });
        }
        self.hook(CONCLUDE)?;
        Ok(r)
    }
}

/// A command prepared once per layout (`{seed}` replaced, the environment padded), or once as
/// it is without layouts.
fn prepare(c: &BenchCommand, layouts: &[Layout], io: &Io) -> Result<Vec<Prepared>, SpawnError> {
    if layouts.is_empty() {
        return Ok(vec![Prepared::new(&c.argv, io)?]);
    }
    layouts
        .iter()
        .map(|l| {
            let argv: Vec<String> = c.argv.iter().map(|a| layouts::with_seed(a, l)).collect();
            Prepared::new(&argv, io)?.with_environment(layouts::environment(l))
        })
        .collect()
}

fn failure_text(r: &RunMeasure, s: &Schedule) -> String {
    match (r.timed_out, r.exit_code) {
        (true, _) => format!("timed out after {:?}", s.timeout.unwrap_or_default()),
        (false, Some(code)) => format!("exited with status {code}"),
        (false, None) => "was killed by a signal".to_string(),
    }
}

/// Expands `{NAME}` placeholders with every combination of `-L NAME=a,b,c` lists (the first
/// list varies slowest), and splits each command into argv (`sh -c` when `shell`).
pub fn expand(
    templates: &[String],
    names: &[String],
    lists: &[(String, Vec<String>)],
    shell: bool,
) -> Result<Vec<BenchCommand>, String> {
    if names.len() > templates.len() {
        return Err(format!(
            "{} names (-n) for {} commands: give at most one name per command",
            names.len(),
            templates.len()
        ));
    }
    let mut combos: Vec<Vec<(String, String)>> = vec![Vec::new()];
    for (name, values) in lists {
        combos = combos
            .into_iter()
            .flat_map(|c| {
                values
                    .iter()
                    .map(move |v| [c.clone(), vec![(name.clone(), v.clone())]].concat())
            })
            .collect();
    }
    let mut out = Vec::new();
    let substitute = |text: &str, combo: &[(String, String)]| {
        combo.iter().fold(text.to_string(), |t, (k, v)| {
            t.replace(&format!("{{{k}}}"), v)
        })
    };
    for (i, template) in templates.iter().enumerate() {
        for combo in &combos {
            let command = substitute(template, combo);
            let name = names
                .get(i)
                .map_or_else(|| command.clone(), |n| substitute(n, combo));
            let argv = if shell {
                vec!["sh".to_string(), "-c".to_string(), command.clone()]
            } else {
                shell_words::split(&command).map_err(|e| {
                    format!("cannot split '{command}' into words: {e} (use --shell?)")
                })?
            };
            if argv.is_empty() {
                return Err("an empty command".to_string());
            }
            out.push(BenchCommand {
                name,
                command,
                argv,
                parameters: combo.clone(),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(runs: u32) -> Schedule {
        Schedule {
            warmup: 1,
            runs: Some(runs),
            min_runs: 10,
            min_time: Duration::ZERO,
            max_time: None,
            max_time_firm: false,
            setup: None,
            prepare: None,
            conclude: None,
            cleanup: None,
            io: Io::default(),
            timeout: None,
            ignore_failure: false,
            events: Vec::new(),
            count_every: COUNT_EVERY,
            seed: 7,
            layouts: Vec::new(),
            cancel: None,
            reap_orphans: false,
        }
    }

    #[test]
    fn parameter_lists_make_a_cross_product_in_order() {
        let lists = vec![
            ("n".to_string(), vec!["1".into(), "2".into()]),
            ("m".to_string(), vec!["a".into(), "b".into()]),
        ];
        let cmds = expand(&["prog -n {n} -m {m}".to_string()], &[], &lists, false).unwrap();
        let names: Vec<&str> = cmds.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "prog -n 1 -m a",
                "prog -n 1 -m b",
                "prog -n 2 -m a",
                "prog -n 2 -m b"
            ]
        );
        assert_eq!(cmds[0].argv, ["prog", "-n", "1", "-m", "a"]);
        let shell = expand(&["echo 'a b' | wc -c".to_string()], &[], &[], true).unwrap();
        assert_eq!(shell[0].argv, ["sh", "-c", "echo 'a b' | wc -c"]);
    }

    #[test]
    fn names_label_commands_in_order_with_parameters_substituted() {
        let lists = vec![("n".to_string(), vec!["1".into(), "2".into()])];
        let templates = ["prog {n}".to_string(), "other".to_string()];
        let cmds = expand(&templates, &["fast-{n}".to_string()], &lists, false).unwrap();
        let got: Vec<(&str, &str)> = cmds
            .iter()
            .map(|c| (c.name.as_str(), c.command.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("fast-1", "prog 1"),
                ("fast-2", "prog 2"),
                ("other", "other"),
                ("other", "other")
            ]
        );
        let too_many = ["a".to_string(), "b".to_string()];
        assert!(expand(&templates[..1], &too_many, &[], false).is_err());
    }

    #[test]
    fn runs_are_interleaved_in_shuffled_blocks() {
        let cmds = expand(&["true".to_string(), "true ".to_string()], &[], &[], false).unwrap();
        let (m, err) = run(&cmds, &schedule(20), |_| {}, |_| false);
        assert!(err.is_none());
        assert_eq!(m.runs[0].len(), 20);
        assert_eq!(m.runs[1].len(), 20);
        // Each block holds each command once...
        for block in m.order.chunks(2) {
            assert_ne!(block[0], block[1]);
        }
        // ...in an order that is not always the same.
        let firsts: std::collections::BTreeSet<usize> = m.order.chunks(2).map(|b| b[0]).collect();
        assert_eq!(firsts.len(), 2);
    }

    #[test]
    fn blocks_go_through_the_layouts_in_rounds_with_the_seed_and_padding_of_each() {
        let dir = tempfile::tempdir().unwrap();
        let script = format!(
            "echo ${{#LATSCOPE_LAYOUT_PAD}} > {}/pad-{{seed}}",
            dir.path().display()
        );
        let cmds = expand(&[script], &[], &[], true).unwrap();
        let s = Schedule {
            layouts: layouts::layouts(3, 40),
            ..schedule(7)
        };
        let (m, err) = run(&cmds, &s, |_| {}, |_| false);
        assert!(err.is_none(), "{err:?}");
        let seen: Vec<u32> = m.runs[0].iter().map(|r| r.layout.unwrap().index).collect();
        // Rounds of three blocks, each a permutation of the layouts (the 7th starts a round).
        for round in seen.chunks(3).filter(|r| r.len() == 3) {
            let mut sorted = round.to_vec();
            sorted.sort_unstable();
            assert_eq!(sorted, [0, 1, 2], "{seen:?}");
        }
        assert_eq!(m.layouts, s.layouts);
        for l in &s.layouts {
            let pad = std::fs::read_to_string(dir.path().join(format!("pad-{}", l.seed))).unwrap();
            assert_eq!(pad.trim(), l.env_pad.to_string(), "layout {l:?}");
        }
    }

    #[test]
    fn a_failing_command_stops_the_benchmark_unless_failures_are_ignored() {
        let cmds = expand(&["false".to_string()], &[], &[], false).unwrap();
        let (_, err) = run(&cmds, &schedule(3), |_| {}, |_| false);
        assert!(
            err.unwrap()
                .to_string()
                .contains("exited with status 1; use --ignore-failure")
        );
        let (m, err) = run(
            &cmds,
            &Schedule {
                ignore_failure: true,
                ..schedule(3)
            },
            |_| {},
            |_| false,
        );
        assert!(err.is_none());
        assert_eq!(m.runs[0].len(), 3);
    }

    #[test]
    fn a_raised_cancel_keeps_what_was_measured() {
        let cancel = Cancel::new();
        cancel.raise();
        let cmds = expand(&["true".to_string()], &[], &[], false).unwrap();
        let (m, err) = run(
            &cmds,
            &Schedule {
                cancel: Some(cancel),
                ..schedule(5)
            },
            |_| {},
            |_| false,
        );
        assert!(err.is_none() && m.interrupted);
    }

    #[test]
    fn runs_are_exact_even_when_every_comparison_is_clear() {
        let cmds = expand(&["true".to_string(), "true ".to_string()], &[], &[], false).unwrap();
        let s = Schedule {
            min_runs: 2,
            ..schedule(12)
        };
        let (m, err) = run(&cmds, &s, |_| {}, |_| true);
        assert!(err.is_none());
        assert_eq!((m.runs[0].len(), m.runs[1].len()), (12, 12));
        assert_eq!((m.stop, m.looks), (Stop::Runs, 0));
    }

    #[test]
    fn a_clear_comparison_stops_at_the_first_look_after_the_minimum() {
        let cmds = expand(&["true".to_string(), "true ".to_string()], &[], &[], false).unwrap();
        let s = Schedule {
            runs: None,
            min_runs: 5,
            max_time: Some(Duration::from_secs(30)),
            ..schedule(0)
        };
        let (m, err) = run(&cmds, &s, |_| {}, |m| m.runs[0].len() >= 5);
        assert!(err.is_none());
        assert_eq!((m.runs[0].len(), m.stop, m.looks), (5, Stop::Clear, 0));
    }
}
