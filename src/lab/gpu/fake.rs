//! A deterministic backend with known latencies, for tests: the whole lab runs on it with no GPU
//! and no driver, and every stage it reports can be computed by hand.
//!
//! Its host clock is virtual: it moves only when the loop spends time, by `launch_ns` in a launch
//! call, by `poll_ns` in each turn of a wait ([`Backend::idle`]), to the end of the work in a
//! synchronize. Its device runs one request at a time: a request starts `submit_ns` after its
//! launch call began (or when the previous one ends, if later), runs `exec_ns` plus the kernel's
//! spin, its flag is visible `to_host_ns` after its end, and a synchronize returns `to_sync_ns`
//! after the stream's last end. The device's timer reads `offset_ns + t × (1 + drift_ppm/10⁶)`
//! at host time `t`.
//!
//! `latscope lab gpu` uses it when `LATSCOPE_GPU_BACKEND=fake[:key=value,...]` is set (for tests;
//! see [`Fake::from_spec`]); `pace_us` makes each wait turn also sleep that long in real time,
//! so that a test can interrupt a run.

use std::ops::Range;

use super::clock::Ping;
use super::{Backend, DeviceInfo, DeviceStamps, GpuError, Setup};

/// The fake's latencies, ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FakeParams {
    /// host CPU inside a launch call
    pub launch_ns: u64,
    /// launch call start → kernel start on an idle device
    pub submit_ns: u64,
    /// kernel start → end (plus a spin kernel's spin)
    pub exec_ns: u64,
    /// kernel end → its flag is visible
    pub to_host_ns: u64,
    /// the stream's last end → its synchronize returns
    pub to_sync_ns: u64,
    /// one turn of a wait loop
    pub poll_ns: u64,
    /// a calibration ping's round trip
    pub round_trip_ns: u64,
    /// when in the round trip the device stamps a ping, ns after the host asked (`None`: the
    /// middle, where the calibration assumes it)
    pub ping_at_ns: Option<u64>,
    /// the device's timer at host time 0
    pub offset_ns: u64,
    /// the device's timer runs this many parts per million fast
    pub drift_ppm: u64,
    /// the flags are never set (a device that hangs)
    pub hang: bool,
    /// real time each wait turn sleeps, µs (0: none)
    pub pace_us: u64,
}

impl Default for FakeParams {
    fn default() -> Self {
        FakeParams {
            launch_ns: 3_000,
            submit_ns: 5_000,
            exec_ns: 1_000,
            to_host_ns: 2_000,
            to_sync_ns: 4_000,
            poll_ns: 100,
            round_trip_ns: 200,
            ping_at_ns: None,
            offset_ns: 1_000_000_000,
            drift_ppm: 0,
            hang: false,
            pace_us: 0,
        }
    }
}

/// The fake backend.
#[derive(Debug, Clone)]
pub struct Fake {
    p: FakeParams,
    now: u64,
    spin_ns: u64,
    /// the device is free from this host time on
    free_at: u64,
    /// per slot: start and end in host time
    runs: Vec<(u64, u64)>,
    /// per stream: the last end in host time
    stream_end: Vec<u64>,
}

impl Fake {
    /// A fake with latencies `p`; its clock starts at 1 s.
    pub fn new(p: FakeParams) -> Fake {
        Fake {
            p,
            now: 1_000_000_000,
            spin_ns: 0,
            free_at: 0,
            runs: Vec::new(),
            stream_end: Vec::new(),
        }
    }

    /// `key=value,...` over the defaults (keys as [`FakeParams`]' fields without `_ns`:
    /// launch, submit, exec, to_host, to_sync, poll, round_trip, ping_at, offset, drift_ppm,
    /// hang, pace_us), values in ns.
    pub fn from_spec(spec: &str) -> Result<Fake, GpuError> {
        let mut p = FakeParams::default();
        for pair in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let bad = || GpuError::Config(format!("fake backend: '{pair}' is not key=number"));
            let (key, value) = pair.split_once('=').ok_or_else(bad)?;
            let v: u64 = value.trim().parse().map_err(|_| bad())?;
            let field = match key.trim() {
                "launch" => &mut p.launch_ns,
                "submit" => &mut p.submit_ns,
                "exec" => &mut p.exec_ns,
                "to_host" => &mut p.to_host_ns,
                "to_sync" => &mut p.to_sync_ns,
                "poll" => &mut p.poll_ns,
                "round_trip" => &mut p.round_trip_ns,
                "ping_at" => {
                    p.ping_at_ns = Some(v);
                    continue;
                }
                "offset" => &mut p.offset_ns,
                "drift_ppm" => &mut p.drift_ppm,
                "pace_us" => &mut p.pace_us,
                "hang" => {
                    p.hang = v != 0;
                    continue;
                }
                other => {
                    return Err(GpuError::Config(format!(
                        "fake backend: unknown key '{other}'"
                    )));
                }
            };
            *field = v;
        }
        Ok(Fake::new(p))
    }

    /// The device's timer at host time `t`.
    pub fn device_at(&self, t: u64) -> u64 {
        let t = u128::from(t);
        (t + t * u128::from(self.p.drift_ppm) / 1_000_000 + u128::from(self.p.offset_ns)) as u64
    }
}

impl Backend for Fake {
    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            backend: "fake".to_string(),
            driver: "none".to_string(),
            device: "fake device (known latencies, for tests)".to_string(),
        }
    }

    fn prepare(&mut self, setup: &Setup) -> Result<(), GpuError> {
        self.spin_ns = setup.kernel.spin_ns();
        self.runs = vec![(u64::MAX, u64::MAX); setup.slots];
        self.stream_end = vec![0; setup.streams as usize];
        Ok(())
    }

    fn now(&self) -> u64 {
        self.now
    }

    fn calibrate(&mut self, pings: u32) -> Result<Vec<Ping>, GpuError> {
        let rt = self.p.round_trip_ns;
        let at = self.p.ping_at_ns.unwrap_or(rt / 2).min(rt);
        Ok((0..pings)
            .map(|_| {
                let before = self.now;
                self.now += rt;
                Ping {
                    host_before: before,
                    device: self.device_at(before + at),
                    host_after: self.now,
                }
            })
            .collect())
    }

    fn launch(&mut self, stream: usize, slots: Range<usize>) -> Result<(), GpuError> {
        let call = self.now;
        for slot in slots {
            let start = (call + self.p.submit_ns).max(self.free_at);
            let end = start + self.p.exec_ns + self.spin_ns;
            self.free_at = end;
            self.runs[slot] = (start, end);
            self.stream_end[stream] = end;
        }
        self.now += self.p.launch_ns;
        Ok(())
    }

    fn done(&mut self, slot: usize) -> bool {
        let (_, end) = self.runs[slot];
        !self.p.hang && end != u64::MAX && self.now >= end + self.p.to_host_ns
    }

    fn idle(&mut self) {
        self.now += self.p.poll_ns;
        if self.p.pace_us > 0 {
            std::thread::sleep(std::time::Duration::from_micros(self.p.pace_us));
        }
    }

    fn sync(&mut self, stream: usize) -> Result<(), GpuError> {
        if self.p.hang {
            return Err(GpuError::Timeout("the fake device hangs".to_string()));
        }
        self.now = self.now.max(self.stream_end[stream] + self.p.to_sync_ns);
        Ok(())
    }

    fn stamps(&self, slot: usize) -> DeviceStamps {
        let (start, end) = self.runs[slot];
        DeviceStamps {
            start: self.device_at(start),
            end: self.device_at(end),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Config, Launch, Pattern, Stage, run};
    use super::*;

    fn config(pattern: Pattern, spacing_ns: u64, requests: u64) -> Config {
        Config {
            pattern,
            spacing_ns,
            ..Config::isolated(requests, 3)
        }
    }

    /// (count, min, max) of a stage.
    fn span(s: &Stage) -> (u64, Option<u64>, Option<u64>) {
        (s.count(), s.dist.summary().min(), s.dist.summary().max())
    }

    #[test]
    fn an_isolated_request_shows_each_known_latency_in_its_stage() {
        let mut fake = Fake::new(FakeParams::default());
        let o = run(&mut fake, &config(Pattern::Isolated, 0, 10), None).unwrap();
        let s = &o.stages;
        // launch 3 µs; start 5 µs after the call began; 1 µs of work; the flag 2 µs after the
        // end is first polled then (the host polls every 100 ns from 3 µs on: 8 µs is a poll);
        // the synchronize returns 4 µs after the end: 10 µs after the call began. The ten
        // rounds alternate, the first synchronizing (the warm-up proved the device): five
        // synchronizes timed, five flags first seen by polling.
        assert_eq!(span(&s.launch_call), (10, Some(3_000), Some(3_000)));
        assert_eq!(span(&s.submit_to_start), (10, Some(5_000), Some(5_000)));
        assert_eq!(span(&s.execute), (10, Some(1_000), Some(1_000)));
        assert_eq!(span(&s.end_to_host), (5, Some(2_000), Some(2_000)));
        assert_eq!(span(&s.end_to_sync), (5, Some(4_000), Some(4_000)));
        assert_eq!(span(&s.total), (5, Some(10_000), Some(10_000)));
        // Each request takes 10 µs and the next starts at once: 10 µs per batch.
        assert_eq!(o.per_batch_ns(), 10_000.0);
        assert_eq!((o.requests, o.interrupted), (10, false));
        assert_eq!(o.clock.error_ns(), 100);
        assert_eq!(o.clock.before.offset_ns(), 1_000_000_000);
    }

    #[test]
    fn back_to_back_requests_queue_behind_each_other_and_time_per_batch_hides_it() {
        // 1 µs launches, 3 µs of work: the device falls behind by 2 µs per request.
        let p = FakeParams {
            launch_ns: 1_000,
            exec_ns: 3_000,
            ..FakeParams::default()
        };
        let o = run(&mut Fake::new(p), &config(Pattern::BackToBack, 0, 4), None).unwrap();
        let s = &o.stages;
        // Request i starts at max(1 µs·i + 5 µs, end of i−1): 5, 8, 11, 14 µs after the first
        // call; its call began at 0, 1, 2, 3 µs: submit → start 5, 7, 9, 11 µs.
        assert_eq!(span(&s.submit_to_start), (4, Some(5_000), Some(11_000)));
        assert_eq!(s.submit_to_start.dist.summary().mean(), Some(8_000.0));
        // Only the last request is synchronized: it ends at 17 µs, the sync returns at 21 µs.
        assert_eq!(span(&s.end_to_sync), (1, Some(4_000), Some(4_000)));
        assert_eq!(span(&s.total), (1, Some(18_000), Some(18_000)));
        // 21 µs ÷ 4 requests: a figure below every request's own latency.
        assert_eq!(o.per_batch_ns(), 5_250.0);
        assert_eq!(span(&s.launch_call), (4, Some(1_000), Some(1_000)));
    }

    #[test]
    fn fixed_rate_launches_start_on_their_schedule() {
        let o = run(
            &mut Fake::new(FakeParams::default()),
            &config(Pattern::FixedRate, 20_000, 3),
            None,
        )
        .unwrap();
        // Launches at 0, 20, 40 µs; the last ends at 46 µs, its sync returns at 50 µs. The
        // first two flags are polled while the host waits to launch; the last request's end
        // is learnt by the synchronize, not by its flag.
        assert_eq!(o.wall_ns, 50_000);
        assert_eq!(span(&o.stages.end_to_host), (2, Some(2_000), Some(2_000)));
        assert_eq!(
            span(&o.stages.submit_to_start),
            (3, Some(5_000), Some(5_000))
        );
    }

    #[test]
    fn streams_and_bursts_synchronize_each_stream_once_a_round() {
        let c = Config {
            streams: 2,
            burst: 2,
            ..config(Pattern::Isolated, 0, 8)
        };
        let o = run(&mut Fake::new(FakeParams::default()), &c, None).unwrap();
        // Two rounds of 4 requests, each synchronizing its 2 streams: the first round is
        // timed by its synchronizes, the second by its flags. The first round's first flag
        // is set at 8 µs, before its last launch at 9 µs, which polls it: 4 + 1.
        assert_eq!(o.stages.end_to_sync.count(), 2);
        assert_eq!(o.stages.total.count(), 2);
        assert_eq!(o.stages.end_to_host.count(), 5);
    }

    #[test]
    fn a_graph_launch_is_one_call_for_its_requests() {
        let c = Config {
            launch: Launch::Graph(4),
            ..config(Pattern::Isolated, 0, 8)
        };
        let o = run(&mut Fake::new(FakeParams::default()), &c, None).unwrap();
        assert_eq!(o.stages.launch_call.count(), 2);
        assert_eq!(o.stages.submit_to_start.count(), 8);
        // In one graph the requests run one after another: 5, 6, 7, 8 µs after the call.
        let s = &o.stages.submit_to_start;
        assert_eq!(
            (s.dist.summary().min(), s.dist.summary().max()),
            (Some(5_000), Some(8_000))
        );
    }

    #[test]
    fn a_drifting_device_timer_is_mapped_back_within_two_nanoseconds() {
        let p = FakeParams {
            drift_ppm: 3,
            ..FakeParams::default()
        };
        let o = run(
            &mut Fake::new(p),
            &config(Pattern::Isolated, 0, 1_000),
            None,
        )
        .unwrap();
        // 3 ppm of the host's clock: 3 000 ns per second; the device's timer is whole
        // nanoseconds, so a mapped stamp may be off by the rounding of both anchors.
        // So the drift is within 2 ns over the time between the anchors.
        let span_s = (o.clock.after.host_ns - o.clock.before.host_ns) as f64 / 1e9;
        let drift = o.clock.drift_ns_per_s();
        assert!(
            (drift - 3_000.0).abs() <= 2.0 / span_s,
            "{drift} over {span_s} s"
        );
        let s = &o.stages.submit_to_start;
        assert!(
            s.dist.summary().min() >= Some(4_998),
            "{:?}",
            s.dist.summary().min()
        );
        assert!(
            s.dist.summary().max() <= Some(5_002),
            "{:?}",
            s.dist.summary().max()
        );
        // execute is on the device's clock alone: 1 µs and 3 ppm of it, whole nanoseconds.
        let e = o.stages.execute.dist.summary();
        assert!(e.min() >= Some(1_000) && e.max() <= Some(1_001), "{e:?}");
    }

    #[test]
    fn a_calibration_error_larger_than_a_stage_makes_it_negative_and_it_is_counted_not_clamped() {
        // The device answers pings at once, not half way: the calibration puts its stamps
        // 1 µs (half the round trip) too late, so every mapped stamp is 1 µs late. The flag is
        // seen 0.5 µs after the end: −0.5 µs once mapped.
        let p = FakeParams {
            round_trip_ns: 2_000,
            ping_at_ns: Some(0),
            to_host_ns: 500,
            ..FakeParams::default()
        };
        let o = run(&mut Fake::new(p), &config(Pattern::Isolated, 0, 10), None).unwrap();
        let s = &o.stages;
        assert_eq!(o.clock.error_ns(), 1_000);
        // (the five rounds of ten that poll)
        assert_eq!(
            (s.end_to_host.negative, s.end_to_host.most_negative_ns),
            (5, Some(-500))
        );
        assert_eq!(s.end_to_host.dist.count(), 0);
        assert_eq!(s.end_to_host.count(), 5);
        // The stages that start on the host and end on the device are 1 µs too long instead.
        assert_eq!(span(&s.submit_to_start), (10, Some(6_000), Some(6_000)));
        // end → sync is 4 µs, mapped 3 µs; the host-only stages are exact.
        assert_eq!(span(&s.end_to_sync), (5, Some(3_000), Some(3_000)));
        assert_eq!(span(&s.total), (5, Some(10_000), Some(10_000)));
    }

    #[test]
    fn a_device_that_never_sets_its_flags_times_out_instead_of_hanging() {
        let p = FakeParams {
            hang: true,
            poll_ns: 1_000_000,
            ..FakeParams::default()
        };
        let e = run(&mut Fake::new(p), &config(Pattern::Isolated, 0, 1), None).unwrap_err();
        assert!(e.to_string().contains("flags not set after 10 s"), "{e}");
    }

    #[test]
    fn a_raised_cancel_stops_launching_and_keeps_nothing_unmeasured() {
        let cancel = crate::ingest::Cancel::new();
        cancel.raise();
        let o = run(
            &mut Fake::new(FakeParams::default()),
            &config(Pattern::Isolated, 0, 10),
            Some(&cancel),
        )
        .unwrap();
        assert!(o.interrupted);
        assert_eq!((o.requests, o.stages.total.count()), (0, 0));
    }

    #[test]
    fn the_spec_sets_the_named_latencies_and_refuses_unknown_keys() {
        let f = Fake::from_spec("launch=7, exec=9,hang=1").unwrap();
        assert_eq!((f.p.launch_ns, f.p.exec_ns, f.p.hang), (7, 9, true));
        assert!(
            Fake::from_spec("lunch=7")
                .unwrap_err()
                .to_string()
                .contains("lunch")
        );
        assert!(Fake::from_spec("launch").is_err());
    }
}
