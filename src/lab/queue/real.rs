//! The same pipeline with real threads: the submitter (the calling thread), one worker thread
//! per engine executing calibrated busy work, one completion-handler thread per engine woken by
//! its worker, and a global lock around every submission and every handler. Every request is
//! timestamped at each stage, so the real run reports the same per-stage figures as the model.
//!
//! Durations are spent spinning on the monotonic clock (busy work, like a CPU or a driver
//! doing it); waiting for work blocks, so on a 2-core machine at most two threads spin at once
//! for one engine. Thread wake-ups add tens of microseconds that the model does not have: use
//! durations of tens of microseconds or more to compare the two.

use std::collections::VecDeque;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::Instant;

use super::model::{Params, Request};
use crate::ingest::Cancel;

/// Spins until `ns` nanoseconds have passed since `from`.
fn spin_until(clock: &Instant, until_ns: u64) {
    while (clock.elapsed().as_nanos() as u64) < until_ns {
        std::hint::spin_loop();
    }
}

fn now(clock: &Instant) -> u64 {
    clock.elapsed().as_nanos() as u64
}

/// Spends `ns` of busy work.
fn work(clock: &Instant, ns: u64) {
    let start = now(clock);
    spin_until(clock, start + ns);
}

#[derive(Debug, Default)]
struct Engine {
    idle: bool,
    queue: VecDeque<usize>,
}

struct Shared {
    clock: Instant,
    p: Params,
    bkl: Mutex<()>,
    engines: Vec<Mutex<Engine>>,
    requests: Mutex<Vec<Request>>,
    /// outstanding requests (prep start → group end), and the condition the submitter waits on
    outstanding: Mutex<u64>,
    retired: Condvar,
    gaps: Mutex<Vec<u64>>,
    /// raised: stop submitting, and skip the queued requests not started yet
    cancel: Option<Cancel>,
}

impl Shared {
    fn cancelled(&self) -> bool {
        self.cancel.as_ref().is_some_and(Cancel::is_raised)
    }
}

/// What the real run produced (the same shape as the model's outcome).
#[derive(Debug, Clone)]
pub struct RealOutcome {
    /// every request, in submission order
    pub requests: Vec<Request>,
    /// per engine group after the first: start minus the previous group's end
    pub completion_to_next: Vec<u64>,
}

/// Runs the pipeline with real threads.
///
/// A raised `cancel` stops submitting: the requests submitted so far finish and are returned.
/// A thread that cannot be started (a process limit) is an error: every engine needs its two.
pub fn run(p: &Params, cancel: Option<&Cancel>) -> std::io::Result<RealOutcome> {
    let p = Params {
        engines: p.engines.max(1),
        burst: p.burst.max(1),
        ..*p
    };
    let shared = Arc::new(Shared {
        clock: Instant::now(),
        p,
        bkl: Mutex::new(()),
        engines: (0..p.engines)
            .map(|_| {
                Mutex::new(Engine {
                    idle: true,
                    queue: VecDeque::new(),
                })
            })
            .collect(),
        requests: Mutex::new(vec![Request::default(); p.batches as usize]),
        outstanding: Mutex::new(0),
        retired: Condvar::new(),
        gaps: Mutex::new(Vec::new()),
        cancel: cancel.cloned(),
    });
    let (to_workers, threads) = start_engines(&shared)?;
    let submitted = submitter(&shared, &to_workers);
    wait_for_all(&shared);
    stop_engines(to_workers, threads);
    let mut requests = shared.requests.lock().unwrap().clone();
    requests.truncate(submitted);
    // Requests skipped after a stop never ran: they are not reported.
    requests.retain(|r| r.completion > 0);
    let completion_to_next = shared.gaps.lock().unwrap().clone();
    Ok(RealOutcome {
        requests,
        completion_to_next,
    })
}

type Engines = (Vec<Sender<Vec<usize>>>, Vec<thread::JoinHandle<()>>);

/// Each engine's worker and interrupt handler; if one cannot be started, those started are
/// stopped and joined, and the error is returned.
fn start_engines(shared: &Arc<Shared>) -> std::io::Result<Engines> {
    let mut to_workers = Vec::new();
    let mut threads = Vec::new();
    for e in 0..shared.p.engines as usize {
        let (groups_tx, groups_rx) = channel::<Vec<usize>>();
        let (ends_tx, ends_rx) = channel::<u64>();
        let s = shared.clone();
        let worker = thread::Builder::new().spawn(move || worker(&s, groups_rx, ends_tx));
        let s = shared.clone();
        let tx = groups_tx.clone();
        let handler = worker.and_then(|w| {
            threads.push(w);
            thread::Builder::new().spawn(move || handler(&s, e, ends_rx, tx))
        });
        to_workers.push(groups_tx);
        match handler {
            Ok(h) => threads.push(h),
            Err(e) => {
                stop_engines(to_workers, threads);
                return Err(std::io::Error::new(
                    e.kind(),
                    format!("cannot start the pipeline's threads: {e}"),
                ));
            }
        }
    }
    Ok((to_workers, threads))
}

/// Stops the workers (an empty group each) and their handlers (when the worker's channel
/// closes), and joins them.
fn stop_engines(to_workers: Vec<Sender<Vec<usize>>>, threads: Vec<thread::JoinHandle<()>>) {
    for tx in &to_workers {
        let _ = tx.send(Vec::new());
    }
    drop(to_workers);
    for t in threads {
        let _ = t.join();
    }
}

/// Submits the batches; returns how many (fewer when `cancel` was raised).
fn submitter(s: &Shared, workers: &[Sender<Vec<usize>>]) -> usize {
    let p = s.p;
    for i in 0..p.batches as usize {
        if s.cancelled() {
            return i;
        }
        if i > 0 {
            work(&s.clock, p.gap);
        }
        if let Some(ring) = p.ring {
            let mut outstanding = s.outstanding.lock().unwrap();
            while *outstanding >= ring {
                outstanding = s.retired.wait(outstanding).unwrap();
            }
            *outstanding += 1;
        } else {
            *s.outstanding.lock().unwrap() += 1;
        }
        let e = ((i as u64 / p.burst) % p.engines) as usize;
        let prep_start = now(&s.clock);
        work(&s.clock, p.prep);
        let prep_end = now(&s.clock);
        // The record is written before the request can be seen in a queue: a handler taking it
        // sets `taken`, which must not be overwritten afterwards.
        s.requests.lock().unwrap()[i] = Request {
            engine: e as u64,
            prep_start,
            prep_end,
            ..Request::default()
        };
        let direct = {
            let mut engine = s.engines[e].lock().unwrap();
            let direct = engine.idle;
            if direct {
                engine.idle = false;
            } else {
                engine.queue.push_back(i);
            }
            direct
        };
        s.requests.lock().unwrap()[i].direct = direct;
        if direct {
            let _bkl = s.bkl.lock().unwrap();
            s.requests.lock().unwrap()[i].taken = now(&s.clock);
            work(&s.clock, p.submit);
            let _ = workers[e].send(vec![i]);
        }
    }
    p.batches as usize
}

fn worker(s: &Shared, groups: Receiver<Vec<usize>>, ends: Sender<u64>) {
    let mut last_end: Option<u64> = None;
    for group in groups {
        if group.is_empty() {
            return;
        }
        let start = now(&s.clock);
        if let Some(end) = last_end {
            s.gaps.lock().unwrap().push(start - end);
        }
        for &i in &group {
            if s.cancelled() {
                continue;
            }
            let begin = now(&s.clock);
            work(&s.clock, s.p.exec);
            let done = now(&s.clock);
            let mut all = s.requests.lock().unwrap();
            all[i].start = begin;
            all[i].completion = done;
        }
        let end = now(&s.clock);
        last_end = Some(end);
        *s.outstanding.lock().unwrap() -= group.len() as u64;
        s.retired.notify_all();
        if ends.send(end).is_err() {
            return;
        }
    }
}

fn handler(s: &Shared, e: usize, ends: Receiver<u64>, worker: Sender<Vec<usize>>) {
    for _end in ends {
        let _bkl = s.bkl.lock().unwrap();
        let taken: Vec<usize> = {
            let mut engine = s.engines[e].lock().unwrap();
            let taken: Vec<usize> = engine.queue.drain(..).collect();
            if taken.is_empty() {
                engine.idle = true;
            }
            taken
        };
        let at = now(&s.clock);
        {
            let mut all = s.requests.lock().unwrap();
            for &i in &taken {
                all[i].taken = at;
            }
        }
        work(&s.clock, s.p.irq);
        if !taken.is_empty() {
            work(&s.clock, s.p.submit);
            if worker.send(taken).is_err() {
                return;
            }
        }
    }
}

/// Waits until every request has completed.
fn wait_for_all(s: &Shared) {
    let mut outstanding = s.outstanding.lock().unwrap();
    while *outstanding > 0 {
        outstanding = s.retired.wait(outstanding).unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_request_passes_its_stages_in_order_and_each_stage_takes_at_least_its_duration() {
        let p = Params {
            prep: 20_000,
            submit: 40_000,
            exec: 30_000,
            irq: 20_000,
            gap: 0,
            batches: 200,
            ..Params::default()
        };
        let o = run(&p, None).unwrap();
        assert_eq!(o.requests.len(), 200);
        for (i, r) in o.requests.iter().enumerate() {
            assert!(r.prep_start + p.prep <= r.prep_end, "batch {i}: prep");
            assert!(r.prep_end <= r.taken, "batch {i}: taken before prepared");
            assert!(
                r.taken + p.submit <= r.start,
                "batch {i}: started before submitted"
            );
            assert!(r.start + p.exec <= r.completion, "batch {i}: exec");
        }
        // One engine runs one request at a time.
        let mut runs: Vec<(u64, u64)> =
            o.requests.iter().map(|r| (r.start, r.completion)).collect();
        runs.sort_unstable();
        assert!(runs.windows(2).all(|w| w[0].1 <= w[1].0));
    }

    #[test]
    fn a_ring_bounds_the_requests_in_flight() {
        let p = Params {
            prep: 5_000,
            submit: 10_000,
            exec: 20_000,
            irq: 5_000,
            gap: 0,
            batches: 100,
            ring: Some(4),
            ..Params::default()
        };
        let o = run(&p, None).unwrap();
        for r in &o.requests {
            let in_flight = o
                .requests
                .iter()
                .filter(|q| q.prep_start <= r.prep_start && q.completion > r.prep_start)
                .count();
            // A request counts until its group retires, which is at or after its completion.
            assert!(in_flight <= 4, "{in_flight} in flight at {}", r.prep_start);
        }
    }
}
