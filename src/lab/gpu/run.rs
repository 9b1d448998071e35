//! The timed loop, the same for every backend, and the stages computed from its stamps.
//!
//! Requests go round-robin over the streams, `burst` consecutive requests to one stream before
//! the next (gem_exec_nop's parallel/N). While the loop waits (for a launch's time, for flags)
//! it polls every outstanding request's flag and stamps the host's clock when it first sees
//! one set. A stream is synchronized after the last request launched on it, once its round is
//! over (isolated) or at the end of the run. A host learns that work ended either way, not
//! both at once, so rounds alternate between them ([`Loop::finish`]): `end_to_sync` and `total`
//! have a sample per synchronize of the rounds that synchronize first, `end_to_host` one per
//! request seen by polling (while launching, or in the rounds that poll first), the others one
//! per request.

use super::clock::{self, ClockMap};
use super::{Backend, Config, DeviceStamps, GpuError, Pattern};
use crate::ingest::Cancel;
use crate::stats::Distribution;

/// Pings per calibration (before and after the run).
pub const PINGS: u32 = 200;

/// How long the loop waits for a flag or a synchronize before it gives up, ns of host time
/// (the kernel's own spin is added).
pub const TIMEOUT_NS: u64 = 10_000_000_000;

/// The host's stamps of one request (ns, the backend's clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Host {
    /// before the launch call
    pub launch_start: u64,
    /// after the launch call returned
    pub launch_end: u64,
    /// whether this request's call launched it (the first of a graph's), not another's
    pub first_of_call: bool,
    /// the host saw its flag
    pub seen: Option<u64>,
    /// its stream's synchronize returned (the last request of that stream before it)
    pub synced: Option<u64>,
}

/// One stage: a distribution of the non-negative durations, and the negative ones counted.
#[derive(Debug, Clone, Default)]
pub struct Stage {
    /// the durations ≥ 0, ns
    pub dist: Distribution,
    /// durations < 0 (the clock mapping's error is larger than the stage)
    pub negative: u64,
    /// the most negative, ns
    pub most_negative_ns: Option<i64>,
}

impl Stage {
    /// One duration, as measured (a negative one is counted, not clamped).
    pub fn record(&mut self, ns: i64) {
        if ns < 0 {
            self.negative += 1;
            self.most_negative_ns = Some(self.most_negative_ns.map_or(ns, |m| m.min(ns)));
        } else {
            self.dist.record(ns as u64);
        }
    }

    /// Samples, negative ones included.
    pub fn count(&self) -> u64 {
        self.dist.count() + self.negative
    }
}

/// Every stage of a run.
#[derive(Debug, Clone, Default)]
pub struct Stages {
    /// host CPU inside the launch call (one sample per call)
    pub launch_call: Stage,
    /// host before the launch → the kernel's first stamp
    pub submit_to_start: Stage,
    /// first stamp → last stamp (device clock only)
    pub execute: Stage,
    /// last stamp → the host sees the flag
    pub end_to_host: Stage,
    /// last stamp → the stream's synchronize returns (one per synchronize)
    pub end_to_sync: Stage,
    /// host before the launch → the synchronize returns (one per synchronize)
    pub total: Stage,
}

impl Stages {
    /// The stages' names, in order.
    pub const NAMES: [&'static str; 6] = [
        "launch_call",
        "submit_to_start",
        "execute",
        "end_to_host",
        "end_to_sync",
        "total",
    ];

    /// Each stage with its name, in [`Stages::NAMES`] order.
    pub fn list(&self) -> [(&'static str, &Stage); 6] {
        let s = [
            &self.launch_call,
            &self.submit_to_start,
            &self.execute,
            &self.end_to_host,
            &self.end_to_sync,
            &self.total,
        ];
        let mut i = 0;
        s.map(|stage| {
            i += 1;
            (Stages::NAMES[i - 1], stage)
        })
    }

    /// The stages of requests with host stamps `host` and device stamps `device`.
    pub fn of(host: &[Host], device: &[DeviceStamps], map: &ClockMap) -> Stages {
        let mut s = Stages::default();
        for (h, d) in host.iter().zip(device) {
            let start = map.to_host(d.start);
            let end = map.to_host(d.end);
            let launch = h.launch_start as i64;
            if h.first_of_call {
                s.launch_call.record(h.launch_end as i64 - launch);
            }
            s.submit_to_start.record(start - launch);
            s.execute.record(d.end as i64 - d.start as i64);
            if let Some(seen) = h.seen {
                s.end_to_host.record(seen as i64 - end);
            }
            if let Some(synced) = h.synced {
                s.end_to_sync.record(synced as i64 - end);
                s.total.record(synced as i64 - launch);
            }
        }
        s
    }
}

/// What one configuration measured.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// per stage
    pub stages: Stages,
    /// the clock mapping of the run
    pub clock: ClockMap,
    /// requests measured (fewer than asked when interrupted)
    pub requests: u64,
    /// first launch → last synchronize, ns
    pub wall_ns: u64,
    /// a stop (Ctrl-C) ended the run early
    pub interrupted: bool,
}

impl RunOutcome {
    /// gem_exec_nop's figure: wall time ÷ requests, ns.
    pub fn per_batch_ns(&self) -> f64 {
        if self.requests == 0 {
            return 0.0;
        }
        self.wall_ns as f64 / self.requests as f64
    }
}

/// Runs one configuration on `backend`: prepare, warm up, calibrate, the timed loop,
/// calibrate again, and the stages.
pub fn run(
    backend: &mut dyn Backend,
    config: &Config,
    cancel: Option<&Cancel>,
) -> Result<RunOutcome, GpuError> {
    config.check().map_err(GpuError::Config)?;
    let warmup = config.warmup as usize;
    let slots = warmup + config.requests as usize;
    backend.prepare(&super::Setup {
        kernel: config.kernel,
        launch: config.launch,
        sync: config.sync,
        streams: config.streams,
        slots,
        warmup,
    })?;
    if warmup > 0 {
        // A stop during the warm-up leaves the measured loop nothing to launch.
        Loop::new(backend, config, 0, warmup).drive(cancel)?;
    }
    let before = clock::anchor(&backend.calibrate(PINGS)?)?;
    let mut measured = Loop::new(backend, config, warmup, config.requests as usize);
    measured.proven = warmup > 0;
    let interrupted = measured.drive(cancel)?;
    let (host, wall_ns) = (measured.host, measured.wall_ns);
    let after = clock::anchor(&backend.calibrate(PINGS)?)?;
    let map = ClockMap::new(before, after);
    let device: Vec<DeviceStamps> = (0..host.len())
        .map(|i| backend.stamps(warmup + i))
        .collect();
    Ok(RunOutcome {
        stages: Stages::of(&host, &device, &map),
        clock: map,
        requests: host.len() as u64,
        wall_ns,
        interrupted,
    })
}

/// The state of one pass over a range of slots.
struct Loop<'a> {
    backend: &'a mut dyn Backend,
    config: &'a Config,
    /// the first slot
    base: usize,
    /// requests to launch
    n: usize,
    /// stamps of the requests launched so far
    host: Vec<Host>,
    /// launched, flag not seen yet (indexes into `host`)
    pending: Vec<usize>,
    /// each stream's last request launched since it was synchronized
    unsynced: Vec<Option<usize>>,
    timeout_ns: u64,
    wall_ns: u64,
    /// the device has finished a round whose flags were polled ([`Loop::finish`])
    proven: bool,
    /// the last round synchronized first
    synced_last: bool,
    /// when the last synchronize returned
    last_sync: u64,
}

impl<'a> Loop<'a> {
    fn new(backend: &'a mut dyn Backend, config: &'a Config, base: usize, n: usize) -> Self {
        Loop {
            backend,
            config,
            base,
            n,
            host: Vec::with_capacity(n),
            pending: Vec::with_capacity(n),
            unsynced: vec![None; config.streams as usize],
            timeout_ns: TIMEOUT_NS + config.kernel.spin_ns() * (n as u64).min(1_000),
            wall_ns: 0,
            proven: false,
            synced_last: false,
            last_sync: 0,
        }
    }

    /// Launches every request (or until `cancel` is raised), waits for all, synchronizes.
    /// Returns whether it was interrupted.
    fn drive(&mut self, cancel: Option<&Cancel>) -> Result<bool, GpuError> {
        let c = *self.config;
        let group = c.streams as u64 * c.burst as u64;
        let start = self.backend.now();
        let mut launches = 0u64;
        let mut last_end = start;
        let mut interrupted = false;
        while self.host.len() < self.n {
            if cancel.is_some_and(Cancel::is_raised) {
                interrupted = true;
                break;
            }
            let at = match c.pattern {
                Pattern::FixedRate => start + launches * c.spacing_ns,
                Pattern::BackToBack if launches == 0 => start,
                Pattern::BackToBack => last_end + c.spacing_ns,
                Pattern::Isolated if launches == 0 || !launches.is_multiple_of(group) => 0,
                Pattern::Isolated => {
                    self.finish()?;
                    self.backend.now() + c.spacing_ns
                }
            };
            self.wait_until(at)?;
            let stream = ((launches / c.burst as u64) % c.streams as u64) as usize;
            last_end = self.launch(stream)?;
            launches += 1;
        }
        self.finish()?;
        self.wall_ns = self.last_sync.saturating_sub(start);
        Ok(interrupted)
    }

    /// One launch call on `stream`; returns the host's clock after it.
    fn launch(&mut self, stream: usize) -> Result<u64, GpuError> {
        let first = self.host.len();
        let k = self.config.launch.per_call().min(self.n - first);
        let slots = self.base + first..self.base + first + k;
        let launch_start = self.backend.now();
        self.backend.launch(stream, slots)?;
        let launch_end = self.backend.now();
        for i in 0..k {
            self.host.push(Host {
                launch_start,
                launch_end,
                first_of_call: i == 0,
                seen: None,
                synced: None,
            });
            self.pending.push(first + i);
        }
        self.unsynced[stream] = Some(first + k - 1);
        Ok(launch_end)
    }

    /// Stamps the flags set since the last poll.
    fn poll(&mut self) {
        let (backend, host, base) = (&mut *self.backend, &mut self.host, self.base);
        self.pending.retain(|&i| {
            if backend.done(base + i) {
                host[i].seen = Some(backend.now());
                false
            } else {
                true
            }
        });
    }

    /// Polls flags until the host's clock reaches `at`.
    fn wait_until(&mut self, at: u64) -> Result<(), GpuError> {
        loop {
            self.poll();
            if self.backend.now() >= at {
                return Ok(());
            }
            self.backend.idle();
        }
    }

    /// Waits for every outstanding request, then synchronizes every stream used since the
    /// last. Rounds alternate between the two ways a host learns that its work ended, so that
    /// each is timed as it is and not after the other: synchronizing (`end_to_sync` and `total`:
    /// the synchronize's own wake-up, `--sync spin|yield|blocking`; the flags read after it are
    /// not the host's first sight of them) and polling the flags (`end_to_host`; the
    /// synchronize after it, on finished work, is not timed).
    ///
    /// A synchronize cannot be given up on, where polling can (a device that never runs the
    /// kernel times out), so a round synchronizes first only once the device has finished a
    /// polled round of this configuration: in the timed loop, the warm-up's. The timed loop
    /// then synchronizes first in its first round, so that a run of one round (back-to-back,
    /// fixed-rate) has its synchronize.
    fn finish(&mut self) -> Result<(), GpuError> {
        let by_sync = self.proven && !self.synced_last;
        if !by_sync {
            self.wait_for_flags(true)?;
        }
        for stream in 0..self.unsynced.len() {
            if let Some(i) = self.unsynced[stream].take() {
                self.backend.sync(stream)?;
                let at = self.backend.now();
                self.last_sync = self.last_sync.max(at);
                if by_sync {
                    self.host[i].synced = Some(at);
                }
            }
        }
        self.wait_for_flags(!by_sync)?;
        self.proven |= !by_sync;
        self.synced_last = by_sync;
        Ok(())
    }

    /// Polls until every outstanding flag is set, stamping each as first seen where `stamp`.
    /// Gives up when none has been set for the timeout.
    fn wait_for_flags(&mut self, stamp: bool) -> Result<(), GpuError> {
        let mut since = self.backend.now();
        let mut left = self.pending.len();
        loop {
            if stamp {
                self.poll();
            } else {
                let (backend, base) = (&mut *self.backend, self.base);
                self.pending.retain(|&i| !backend.done(base + i));
            }
            if self.pending.is_empty() {
                return Ok(());
            }
            if self.pending.len() < left {
                (since, left) = (self.backend.now(), self.pending.len());
            }
            if self.backend.now().saturating_sub(since) > self.timeout_ns {
                return Err(GpuError::Timeout(format!(
                    "{} request(s) launched, their flags not set after {} s: the device did not run them",
                    self.pending.len(),
                    self.timeout_ns / 1_000_000_000
                )));
            }
            self.backend.idle();
        }
    }
}
