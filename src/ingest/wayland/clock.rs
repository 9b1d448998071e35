//! Turning wrapping WAYLAND_DEBUG stamps into a monotone nanosecond clock.
//!
//! libwayland ≤ 1.25 prints realtime microseconds modulo 2^32 (wrapping every 71.6 minutes);
//! 1.26 prints the UTC time of day (wrapping at midnight). A value that drops by more than half
//! the period is a wrap and adds one period; a smaller drop is a clock that went backwards
//! (threads printing out of order, an NTP step) and is kept as it is, so the pairing code sees
//! it and counts it instead of inventing a 71-minute latency.
//!
//! The unwrapped clock is bounded ([`MOST_MICROS`]): a hostile log of 427,000 lines that each
//! step 12 hours forwards took it past 2^64 nanoseconds, where the stamps wrapped (a debug
//! build panicked). A stamp past the bound is refused and leaves the clock as it was.

use super::line::Stamp;

const MICROS32_PERIOD: u64 = 1 << 32;
const DAY_MICROS: u64 = 86_400 * 1_000_000;

/// The furthest the unwrapped clock goes from the first stamp, either way: 2^62 nanoseconds
/// (146 years), in microseconds. Far below `u64::MAX` nanoseconds, so a stamp and the span
/// arithmetic after it cannot overflow.
pub const MOST_MICROS: i64 = (1 << 62) / 1_000;

/// Unwraps one stream of stamps. One per input file.
///
/// Each stamp moves the clock by the shortest signed step from the previous one (modulo the
/// period), so a line printed late across a wrap steps back a little instead of adding a whole
/// period.
#[derive(Debug, Clone, Default)]
pub struct Clock {
    last: Option<(bool, u64)>, // (is time of day, raw µs)
    now: i64,                  // unwrapped µs, within ±MOST_MICROS
    wraps: i64,
}

impl Clock {
    /// A clock that has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// The nanosecond time of `stamp`, unwrapped against the stamps seen before; `None`, with
    /// the clock unchanged, when it would pass [`MOST_MICROS`].
    #[inline]
    pub fn nanos(&mut self, stamp: Stamp) -> Option<u64> {
        self.micros(stamp).map(in_nanos)
    }

    /// [`Clock::nanos`] in microseconds from the first stamp, before a clock stepped back
    /// before it is taken as 0.
    #[inline(always)]
    fn micros(&mut self, stamp: Stamp) -> Option<i64> {
        let (time_of_day, raw, period) = match stamp {
            Stamp::Micros32(us) => (false, u64::from(us), MICROS32_PERIOD),
            Stamp::TimeOfDay(us) => (true, us, DAY_MICROS),
        };
        // Almost every stamp is the last one or a little after it: the step is the difference,
        // with no wrap (the general steps below give the same, in 128-bit arithmetic that is
        // costly on every line). A clock before the first stamp or past the bound takes the
        // general steps (one comparison of the sum as unsigned checks both).
        if let Some((kind, last)) = self.last
            && kind == time_of_day
            && raw >= last
            && raw - last <= period / 2
            && let next = self.now + (raw - last) as i64
            && next as u64 <= MOST_MICROS as u64
        {
            self.now = next;
            self.last = Some((time_of_day, raw));
            return Some(next);
        }
        self.general(time_of_day, raw, period)
    }

    /// [`Clock::micros`] for any step: a wrap, a step back, a change of stamp format.
    fn general(&mut self, time_of_day: bool, raw: u64, period: u64) -> Option<i64> {
        let (now, wraps) = (self.now, self.wraps);
        match self.last {
            Some((kind, last)) if kind == time_of_day => {
                // Periods and stamps are below 2^37: no overflow in 64 bits.
                let p = period as i64;
                let d = raw as i64 - last as i64;
                // Both stamps lie within one period: the remainder without a division.
                let mut step = if (0..p).contains(&d) {
                    d
                } else if (-p..0).contains(&d) {
                    d + p
                } else {
                    d.rem_euclid(p)
                };
                if step > p / 2 {
                    step -= p;
                }
                // Crossing zero forwards is a wrap; crossing it backwards undoes one.
                if step > 0 && raw < last {
                    self.wraps += 1;
                } else if step < 0 && raw > last {
                    self.wraps -= 1;
                }
                self.now += step;
            }
            // The first stamp, or a switch of format (two logs concatenated): start afresh.
            _ => self.now = raw as i64,
        }
        if !(-MOST_MICROS..=MOST_MICROS).contains(&self.now) {
            (self.now, self.wraps) = (now, wraps);
            return None;
        }
        self.last = Some((time_of_day, raw));
        Some(self.now)
    }

    /// Takes a chunk's stamps as `local` unwrapped them on a worker of the parallel reader,
    /// as if they came one by one; returns what to add to `local`'s microseconds to make
    /// them this clock's, or `None`, with this clock unchanged, when that cannot be sure to
    /// give what the stamps one by one would (the chunk is then read line by line).
    ///
    /// From its first stamp on, `local` steps exactly as this clock would (the steps depend
    /// on the stamps alone), so the two differ by what this clock makes of the first stamp
    /// less the stamp itself. What the steps alone do not settle is the bound: `local` held
    /// `stamps` stamps of one format, so it moved at most half a period each from its first;
    /// when this clock would not reach the bound even so, no stamp is refused.
    pub fn follow(&mut self, local: &Local) -> Option<i64> {
        let first = local.first?;
        if local.broken {
            return None;
        }
        let mut clock = self.clone();
        let start = clock.micros(first)?;
        let offset = start - raw_of(first);
        let reach = (local.stamps as i64).saturating_mul(DAY_MICROS as i64 / 2);
        if start.unsigned_abs().saturating_add(reach.unsigned_abs()) > MOST_MICROS as u64 {
            return None;
        }
        self.now = offset + local.clock.now;
        self.last = local.clock.last;
        self.wraps = clock.wraps + local.clock.wraps;
        Some(offset)
    }

    /// How many times the clock wrapped.
    pub fn wraps(&self) -> u64 {
        self.wraps.max(0) as u64
    }
}

/// Microseconds from the first stamp to nanoseconds, a clock stepped back before the first
/// stamp at 0 (pairing counts steps back).
#[inline(always)]
pub fn in_nanos(now: i64) -> u64 {
    (now.max(0) as u64) * 1_000
}

/// The raw microseconds of a stamp: a fresh clock's `now` at its first.
fn raw_of(stamp: Stamp) -> i64 {
    match stamp {
        Stamp::Micros32(us) => i64::from(us),
        Stamp::TimeOfDay(us) => us as i64,
    }
}

/// A chunk's stamps unwrapped on a worker of the parallel reader, from the chunk's first,
/// for [`Clock::follow`] to take at once. Its microseconds are the file's less an offset
/// known when the chunks before are taken.
#[derive(Debug, Clone, Default)]
pub struct Local {
    clock: Clock,
    first: Option<Stamp>,
    stamps: u64,
    /// a change of stamp format (the clock starts afresh), or a stamp refused: the chunk is
    /// read line by line
    broken: bool,
}

impl Local {
    /// The unwrapped microseconds of the chunk's next stamp, less the offset.
    #[inline(always)]
    pub fn micros(&mut self, stamp: Stamp) -> i64 {
        self.stamps += 1;
        match self.first {
            None => self.first = Some(stamp),
            Some(first) => {
                self.broken |=
                    matches!(first, Stamp::TimeOfDay(_)) != matches!(stamp, Stamp::TimeOfDay(_))
            }
        }
        self.clock.micros(stamp).unwrap_or_else(|| {
            self.broken = true;
            0
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_32_bit_microsecond_counter_unwraps() {
        let mut c = Clock::new();
        assert_eq!(
            c.nanos(Stamp::Micros32(u32::MAX - 9)).unwrap(),
            (u64::from(u32::MAX) - 9) * 1000
        );
        // 10 µs later the counter has wrapped to 0.
        assert_eq!(c.nanos(Stamp::Micros32(0)).unwrap(), (1u64 << 32) * 1000);
        assert_eq!(
            c.nanos(Stamp::Micros32(5)).unwrap(),
            ((1u64 << 32) + 5) * 1000
        );
        assert_eq!(c.wraps(), 1);
    }

    #[test]
    fn the_time_of_day_unwraps_at_midnight() {
        let mut c = Clock::new();
        let before = c.nanos(Stamp::TimeOfDay(DAY_MICROS - 1)).unwrap();
        let after = c.nanos(Stamp::TimeOfDay(0)).unwrap();
        assert_eq!(after - before, 1_000);
    }

    #[test]
    fn a_small_step_backwards_is_not_a_wrap() {
        let mut c = Clock::new();
        let a = c.nanos(Stamp::Micros32(1_000_000)).unwrap();
        let b = c.nanos(Stamp::Micros32(999_000)).unwrap();
        assert!(b < a);
        assert_eq!(c.wraps(), 0);
    }

    #[test]
    fn a_line_printed_late_across_a_wrap_steps_back_instead_of_adding_a_period() {
        let mut c = Clock::new();
        let commit = c.nanos(Stamp::Micros32(5)).unwrap(); // just after the wrap
        c.nanos(Stamp::Micros32(u32::MAX - 3)).unwrap(); // another thread's line from just before it
        let release = c.nanos(Stamp::Micros32(20)).unwrap();
        assert_eq!(release - commit, 15_000);
        assert_eq!(c.wraps(), 0);
    }

    #[test]
    fn wraps_accumulate_over_several_periods() {
        let mut c = Clock::new();
        let mut last = 0;
        for lap in 0..3u64 {
            for raw in [0u32, 1 << 30, 2 << 30, 3 << 30] {
                let t = c.nanos(Stamp::Micros32(raw)).unwrap();
                assert_eq!(t, ((lap << 32) + u64::from(raw)) * 1000);
                assert!(t >= last);
                last = t;
            }
        }
        assert_eq!(c.wraps(), 2);
    }

    #[test]
    fn the_step_forward_gives_what_the_general_steps_give() {
        // Stamps of both formats near every boundary (a step of half a period, a wrap, a step
        // back, a change of format), from a fixed pseudo-random sequence.
        let (mut fast, mut general) = (Clock::new(), Clock::new());
        for stamp in stamps(200_000, 0x9e37_79b9_7f4a_7c15, false) {
            let (time_of_day, raw, period) = match stamp {
                Stamp::TimeOfDay(us) => (true, us, DAY_MICROS),
                Stamp::Micros32(us) => (false, u64::from(us), MICROS32_PERIOD),
            };
            let slow = general.general(time_of_day, raw, period).map(in_nanos);
            assert_eq!(fast.nanos(stamp), slow, "stamp {stamp:?}");
            assert_eq!(fast.wraps, general.wraps);
        }
    }

    #[test]
    fn a_stamp_past_the_bound_is_refused_and_leaves_the_clock_as_it_was() {
        // 12 hours forward, every stamp: the time of day steps by half a day (not a wrap, the
        // general step) and the clock climbs by 43,200 s a stamp.
        let half = DAY_MICROS / 2;
        let mut c = Clock::new();
        let steps = MOST_MICROS as u64 / half; // the last step that fits
        let mut raw = 0;
        c.nanos(Stamp::TimeOfDay(raw)).unwrap();
        for i in 1..=steps {
            raw = (raw + half) % DAY_MICROS;
            assert_eq!(c.nanos(Stamp::TimeOfDay(raw)), Some(i * half * 1_000));
        }
        let (now, wraps) = (c.now, c.wraps);
        let past = (raw + half) % DAY_MICROS;
        assert_eq!(c.nanos(Stamp::TimeOfDay(past)), None);
        assert_eq!((c.now, c.wraps, c.last), (now, wraps, Some((true, raw))));
        // A stamp a little after the last one placed is placed, on the fast step too.
        assert_eq!(c.nanos(Stamp::TimeOfDay(raw)), Some(steps * half * 1_000));
        let room = (MOST_MICROS - now) as u64;
        assert_eq!(
            c.nanos(Stamp::TimeOfDay(raw + room)),
            Some((1u64 << 62) / 1_000 * 1_000)
        );
        assert_eq!(c.nanos(Stamp::TimeOfDay(raw + room + 1)), None);
    }

    #[test]
    fn a_stamp_past_the_bound_backwards_is_refused_too() {
        // Each stamp a microsecond less than half a day before the last: a step back.
        let back = DAY_MICROS / 2 - 1;
        let mut c = Clock::new();
        c.nanos(Stamp::TimeOfDay(0)).unwrap();
        let mut raw = 0;
        let steps = MOST_MICROS as u64 / back;
        for _ in 0..steps {
            raw = (raw + DAY_MICROS - back) % DAY_MICROS;
            assert_eq!(c.nanos(Stamp::TimeOfDay(raw)), Some(0));
        }
        assert_eq!(c.now, -((steps * back) as i64));
        let refused = (raw + DAY_MICROS - back) % DAY_MICROS;
        assert_eq!(c.nanos(Stamp::TimeOfDay(refused)), None);
        assert_eq!(c.now, -((steps * back) as i64));
    }

    /// `n` stamps near every boundary from a fixed pseudo-random sequence: of both formats
    /// (a change of format one in 97), or (`far`) of the time of day alone, that climb.
    fn stamps(n: usize, seed: u64, far: bool) -> Vec<Stamp> {
        let mut seed = seed;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut raw = 0u64;
        (0..n)
            .map(|_| {
                let r = next();
                let time_of_day = r % 97 == 0 || far;
                let period = if time_of_day {
                    DAY_MICROS
                } else {
                    MICROS32_PERIOD
                };
                raw = match (r >> 8) % 7 {
                    0 => raw + period / 2,
                    1 => raw + period / 2 + 1,
                    2 => raw.wrapping_sub((r >> 16) % 1000),
                    3 => (r >> 16) % period,
                    4 if far => raw + period / 2,
                    _ => raw + (r >> 16) % 5000,
                } % period;
                match time_of_day {
                    true => Stamp::TimeOfDay(raw),
                    false => Stamp::Micros32(raw as u32),
                }
            })
            .collect()
    }

    #[test]
    fn chunks_unwrapped_alone_and_followed_give_the_stamps_one_by_one() {
        for (seed, far) in [(0x9e37_79b9_7f4a_7c15, false), (7, false), (11, true)] {
            let all = stamps(60_000, seed, far);
            for chunk in [1, 2, 7, 100, 4096] {
                let mut serial = Clock::new();
                let mut parallel = Clock::new();
                if far {
                    // 8 years short of the bound: chunks that may pass it are taken one by one
                    serial.now = MOST_MICROS - 8 * 365 * 86_400 * 1_000_000;
                    serial.last = Some((true, 0));
                    (parallel.now, parallel.last) = (serial.now, serial.last);
                }
                let (mut followed, mut refused) = (0, 0);
                for part in all.chunks(chunk) {
                    let one_by_one: Vec<_> = part.iter().map(|&s| serial.nanos(s)).collect();
                    refused += one_by_one.iter().filter(|t| t.is_none()).count();
                    let mut local = Local::default();
                    let nows: Vec<_> = part.iter().map(|&s| local.micros(s)).collect();
                    let taken: Vec<_> = match parallel.follow(&local) {
                        Some(offset) => {
                            followed += 1;
                            nows.iter()
                                .map(|&now| Some(in_nanos(offset + now)))
                                .collect()
                        }
                        None => part.iter().map(|&s| parallel.nanos(s)).collect(),
                    };
                    assert_eq!(taken, one_by_one, "seed {seed} chunk {chunk}");
                    assert_eq!(
                        (parallel.now, parallel.wraps, parallel.last),
                        (serial.now, serial.wraps, serial.last)
                    );
                }
                // (long chunks of the mixed stamps all change format: taken one by one)
                let mixed = chunk >= 100 && !far;
                assert!(
                    followed > 0 || mixed,
                    "seed {seed} chunk {chunk}: none followed"
                );
                assert_eq!(refused > 0, far, "seed {seed} chunk {chunk}");
            }
        }
    }
}
