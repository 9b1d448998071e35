//! Mapping the device's clock onto the host's `CLOCK_MONOTONIC`.
//!
//! Why: `submit_to_start`, `end_to_host` and `end_to_sync` each start on one clock and end on the
//! other. The device's timer (`%globaltimer` on NVIDIA) counts nanoseconds from an origin of its
//! own and drifts against the host's clock, so one offset taken once is wrong by the end of a
//! long run. So the lab calibrates before and after every run and interpolates linearly between
//! the two.
//!
//! One calibration is a series of pings through host-mapped memory: the host reads its clock,
//! asks, the device stamps its timer and answers, the host reads its clock again. The device's
//! stamp lies somewhere between the two host reads, so the best estimate of the host time it
//! corresponds to is the midpoint, and the error is at most half that round trip. Of all pings
//! the one with the shortest round trip is kept: its error bound is the tightest.
//!
//! Pure arithmetic on recorded stamps, in integer nanoseconds (`i128` where a product could
//! overflow): the tests feed it generated stamp sets whose offset, drift and noise are known.

use super::GpuError;

/// One ping: the host's clock before it asked, the device's stamp, the host's clock after it saw
/// the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ping {
    /// host clock before asking, ns
    pub host_before: u64,
    /// the device's timer when it answered, ns
    pub device: u64,
    /// host clock after seeing the answer, ns
    pub host_after: u64,
}

/// A host time and the device time that corresponds to it, within `error_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Anchor {
    /// host clock (midpoint of the best ping), ns
    pub host_ns: u64,
    /// the device's timer at that moment, ns
    pub device_ns: u64,
    /// half the best ping's round trip: the most the pair can be off, ns
    pub error_ns: u64,
    /// the best ping's round trip, ns
    pub round_trip_ns: u64,
    /// pings taken
    pub pings: u64,
}

impl Anchor {
    /// `device − host`, ns.
    pub fn offset_ns(&self) -> i64 {
        self.device_ns as i64 - self.host_ns as i64
    }
}

/// The anchor of one calibration: the ping with the shortest round trip.
pub fn anchor(pings: &[Ping]) -> Result<Anchor, GpuError> {
    if let Some(p) = pings.iter().find(|p| p.host_after < p.host_before) {
        return Err(GpuError::Calibration(format!(
            "the host's clock went backwards during a ping ({} ns → {} ns)",
            p.host_before, p.host_after
        )));
    }
    let best = pings
        .iter()
        .min_by_key(|p| p.host_after - p.host_before)
        .ok_or_else(|| GpuError::Calibration("no ping was answered".to_string()))?;
    let round_trip = best.host_after - best.host_before;
    Ok(Anchor {
        host_ns: best.host_before + round_trip / 2,
        device_ns: best.device,
        error_ns: round_trip.div_ceil(2),
        round_trip_ns: round_trip,
        pings: pings.len() as u64,
    })
}

/// Device time → host time, from the calibrations before and after a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockMap {
    /// calibrated before the run
    pub before: Anchor,
    /// calibrated after the run
    pub after: Anchor,
}

impl ClockMap {
    /// The map between `before` and `after` (the same anchor twice: a constant offset).
    pub fn new(before: Anchor, after: Anchor) -> ClockMap {
        ClockMap { before, after }
    }

    /// The offset `device − host` at device time `device`, interpolated linearly between the
    /// two anchors (extrapolated outside them), ns.
    pub fn offset_at(&self, device: u64) -> i64 {
        let (b, a) = (self.before, self.after);
        let span = i128::from(a.device_ns) - i128::from(b.device_ns);
        if span == 0 {
            return b.offset_ns();
        }
        let change = i128::from(a.offset_ns()) - i128::from(b.offset_ns());
        let since = i128::from(device) - i128::from(b.device_ns);
        let offset = i128::from(b.offset_ns()) + div_round(change * since, span);
        offset as i64
    }

    /// The host time of device time `device`, ns (signed: a stamp mapped before the host's
    /// clock origin stays negative rather than wrapping).
    pub fn to_host(&self, device: u64) -> i64 {
        (i128::from(device) - i128::from(self.offset_at(device))) as i64
    }

    /// How fast the offset moved between the two anchors, ns per second of host time (0 with
    /// one anchor).
    pub fn drift_ns_per_s(&self) -> f64 {
        let host = self.after.host_ns as f64 - self.before.host_ns as f64;
        if host <= 0.0 {
            return 0.0;
        }
        (self.after.offset_ns() - self.before.offset_ns()) as f64 * 1e9 / host
    }

    /// The most a mapped time can be off: the larger of the two anchors' error bounds, ns.
    pub fn error_ns(&self) -> u64 {
        self.before.error_ns.max(self.after.error_ns)
    }
}

/// `n / d` rounded to the nearest integer, halves away from zero (`d != 0`).
fn div_round(n: i128, d: i128) -> i128 {
    let (n, d) = if d < 0 { (-n, -d) } else { (n, d) };
    if n >= 0 {
        (n + d / 2) / d
    } else {
        -((-n + d / 2) / d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// A device whose timer reads `offset + host × (1 + drift_ppm / 10⁶)`.
    struct Device {
        offset: i64,
        drift_ppm: i64,
    }

    impl Device {
        fn at(&self, host: u64) -> u64 {
            let h = host as i128;
            (h + h * self.drift_ppm as i128 / 1_000_000 + self.offset as i128) as u64
        }

        /// Pings starting at `from`, 1 ms apart, whose round trip is `rt` plus up to `noise`,
        /// the device answering anywhere inside it.
        fn pings(
            &self,
            from: u64,
            n: u64,
            rt: u64,
            noise: u64,
            rng: &mut rand_pcg::Pcg64,
        ) -> Vec<Ping> {
            (0..n)
                .map(|i| {
                    let before = from + i * 1_000_000;
                    let trip = rt + rng.random_range(0..=noise);
                    let seen = before + rng.random_range(0..=trip);
                    Ping {
                        host_before: before,
                        device: self.at(seen),
                        host_after: before + trip,
                    }
                })
                .collect()
        }
    }

    fn ping(before: u64, device: u64, after: u64) -> Ping {
        Ping {
            host_before: before,
            device,
            host_after: after,
        }
    }

    #[test]
    fn the_ping_with_the_shortest_round_trip_is_the_anchor_at_its_midpoint() {
        let pings = [
            ping(1_000, 5_600, 1_400),
            ping(2_000, 6_300, 2_200),
            ping(3_000, 7_900, 3_900),
        ];
        let a = anchor(&pings).unwrap();
        // round trip 200 ns: midpoint 2 100, half of it 100.
        assert_eq!((a.host_ns, a.device_ns), (2_100, 6_300));
        assert_eq!((a.error_ns, a.round_trip_ns, a.pings), (100, 200, 3));
        assert_eq!(a.offset_ns(), 4_200);
    }

    #[test]
    fn an_odd_round_trip_rounds_the_error_bound_up() {
        let a = anchor(&[ping(10, 100, 15)]).unwrap();
        assert_eq!((a.host_ns, a.error_ns), (12, 3));
    }

    #[test]
    fn no_ping_or_a_clock_going_backwards_is_an_error_not_a_guess() {
        assert!(matches!(anchor(&[]), Err(GpuError::Calibration(_))));
        let e = anchor(&[ping(20, 100, 10)]).unwrap_err().to_string();
        assert!(e.contains("backwards"), "{e}");
    }

    #[test]
    fn between_two_anchors_the_offset_is_interpolated_and_the_drift_reported() {
        // Offset 1 000 000 at host 0; 3 µs more after one second: 3 000 ns/s.
        let before = anchor(&[ping(0, 1_000_000, 0)]).unwrap();
        let after = anchor(&[ping(1_000_000_000, 1_001_003_000, 1_000_000_000)]).unwrap();
        let map = ClockMap::new(before, after);
        assert_eq!(map.drift_ns_per_s(), 3_000.0);
        // Half way in device time: half the change.
        assert_eq!(map.offset_at(501_001_500), 1_001_500);
        assert_eq!(map.to_host(501_001_500), 500_000_000);
        // Past the second anchor it is extrapolated, not held.
        assert_eq!(map.offset_at(2_001_006_000), 1_006_000);
        assert_eq!(map.error_ns(), 0);
    }

    #[test]
    fn a_device_stamp_before_the_hosts_origin_maps_to_a_negative_time_without_wrapping() {
        // The device's timer is 4 999 000 ns ahead of the host's clock.
        let a = anchor(&[ping(1_000, 5_000_000, 1_000)]).unwrap();
        let map = ClockMap::new(a, a);
        assert_eq!(map.offset_at(0), 4_999_000);
        assert_eq!(map.to_host(0), -4_999_000);
        assert_eq!(map.drift_ns_per_s(), 0.0);
    }

    #[test]
    fn generated_stamps_with_known_offset_drift_and_noise_map_back_within_the_bound() {
        let mut rng = rand_pcg::Pcg64::seed_from_u64(57);
        let device = Device {
            offset: -712_000,
            drift_ppm: 3,
        };
        let start = 10_000_000_000u64;
        let before = anchor(&device.pings(start, 200, 2_000, 1_500, &mut rng)).unwrap();
        let end = start + 3_000_000_000;
        let after = anchor(&device.pings(end, 200, 2_000, 1_500, &mut rng)).unwrap();
        let map = ClockMap::new(before, after);
        // 3 ppm of host time: 3 000 ns/s, within what the two error bounds allow over 3 s.
        let slack = (before.error_ns + after.error_ns) as f64 / 3.0;
        assert!(
            (map.drift_ns_per_s() - 3_000.0).abs() <= slack + 1.0,
            "{} ± {slack}",
            map.drift_ns_per_s()
        );
        for host in [start + 1_000, start + 1_500_000_000, end - 1_000] {
            let mapped = map.to_host(device.at(host));
            let off = (mapped - host as i64).unsigned_abs();
            assert!(
                off <= map.error_ns() + 1,
                "{host}: off by {off} > {}",
                map.error_ns()
            );
        }
        // The bound is half the best round trip: at least 1 000 ns, at most 1 750.
        assert!(
            (1_000..=1_750).contains(&map.error_ns()),
            "{}",
            map.error_ns()
        );
    }
}
