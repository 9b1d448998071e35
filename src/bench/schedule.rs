//! Running the commands: warmup, then interleaved randomized blocks until enough runs and
//! time, each run measured by [`spawn`](super::spawn).
//!
//! Every block runs each command once in a freshly shuffled order, so slow drifts of the
//! machine (thermal, other tenants, caches) hit every command alike instead of whichever ran
//! last, which is what an all-A-then-all-B schedule (hyperfine's) does.

use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_pcg::Pcg64;

use super::counters::Event;
use super::spawn::{self, RunMeasure, SpawnError};
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
    /// run before every timed run, untimed
    pub prepare: Option<Vec<String>>,
    /// kill a run after this long
    pub timeout: Option<Duration>,
    /// a failing run (non-zero exit, timeout) does not stop the benchmark
    pub ignore_failure: bool,
    /// counters to open on every run
    pub events: Vec<Event>,
    /// seed of the block order shuffle
    pub seed: u64,
    /// stop early, keeping what was measured
    pub cancel: Option<Cancel>,
}

/// Everything measured.
#[derive(Debug, Clone, Default)]
pub struct Measured {
    /// per command, its timed runs in order
    pub runs: Vec<Vec<RunMeasure>>,
    /// events that could not be counted, with the reason (reported once)
    pub unsupported: Vec<(String, String)>,
    /// whether the schedule was cut short by Ctrl-C
    pub interrupted: bool,
    /// the order commands ran in, as indices (for the record)
    pub order: Vec<usize>,
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

/// Runs the schedule, calling `progress(done_runs)` after each timed run. On error, what was
/// measured so far is returned with it.
pub fn run(
    commands: &[BenchCommand],
    s: &Schedule,
    mut progress: impl FnMut(usize),
) -> (Measured, Option<BenchError>) {
    let mut m = Measured {
        runs: vec![Vec::new(); commands.len()],
        ..Measured::default()
    };
    // Events found unsupported by the first timed run are not tried again (each failed
    // perf_event_open costs tens of microseconds per run on a machine without a PMU).
    let mut schedule = s.clone();
    let s = &mut schedule;
    let cancelled = |s: &Schedule| s.cancel.as_ref().is_some_and(Cancel::is_raised);
    for _ in 0..s.warmup {
        for c in commands {
            if cancelled(s) {
                m.interrupted = true;
                return (m, None);
            }
            if let Err(e) = once(c, s, &mut m, false) {
                if cancelled(s) {
                    m.interrupted = true;
                    return (m, None);
                }
                return (m, Some(e));
            }
        }
    }
    let mut rng = Pcg64::seed_from_u64(s.seed);
    let started = Instant::now();
    let mut blocks = 0u32;
    let mut done = 0;
    while !enough(s, blocks, started.elapsed()) {
        let mut order: Vec<usize> = (0..commands.len()).collect();
        order.shuffle(&mut rng);
        for i in order {
            if cancelled(s) {
                m.interrupted = true;
                return (m, None);
            }
            if let Err(e) = once(&commands[i], s, &mut m, true).map(|r| m.runs[i].push(r)) {
                // Ctrl-C in a terminal also kills the child: that is an interruption, not a failure.
                if cancelled(s) {
                    m.interrupted = true;
                    return (m, None);
                }
                return (m, Some(e));
            }
            s.events
                .retain(|e| !m.unsupported.iter().any(|(name, _)| *name == e.name));
            m.order.push(i);
            done += 1;
            progress(done);
        }
        blocks += 1;
    }
    (m, None)
}

fn enough(s: &Schedule, blocks: u32, elapsed: Duration) -> bool {
    if let Some(runs) = s.runs {
        return blocks >= runs;
    }
    if s.max_time.is_some_and(|max| elapsed >= max) && blocks >= 2 {
        return true;
    }
    blocks >= s.min_runs && elapsed >= s.min_time
}

/// One run of `c` (and its prepare command); returns the measure of a timed run.
fn once(
    c: &BenchCommand,
    s: &Schedule,
    m: &mut Measured,
    timed: bool,
) -> Result<RunMeasure, BenchError> {
    if let Some(prepare) = &s.prepare {
        let (r, _) = spawn::run(prepare, &[], s.timeout, false)?;
        if r.exit_code != Some(0) && !s.ignore_failure {
            return Err(BenchError::Failed {
                command: prepare.join(" "),
                what: failure_text(&r, s),
            });
        }
    }
    let events = if timed { &s.events[..] } else { &[] };
    let (r, unsupported) = spawn::run(&c.argv, events, s.timeout, false)?;
    if timed && m.unsupported.is_empty() {
        m.unsupported = unsupported;
    }
    if (r.timed_out || r.exit_code != Some(0)) && !s.ignore_failure {
        return Err(BenchError::Failed {
            command: c.name.clone(),
            what: failure_text(&r, s),
        });
    }
    Ok(r)
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
            prepare: None,
            timeout: None,
            ignore_failure: false,
            events: Vec::new(),
            seed: 7,
            cancel: None,
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
        let (m, err) = run(&cmds, &schedule(20), |_| {});
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
    fn a_failing_command_stops_the_benchmark_unless_failures_are_ignored() {
        let cmds = expand(&["false".to_string()], &[], &[], false).unwrap();
        let (_, err) = run(&cmds, &schedule(3), |_| {});
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
        );
        assert!(err.is_none() && m.interrupted);
    }
}
