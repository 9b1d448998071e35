//! The lab's clock: `CLOCK_MONOTONIC` in integer nanoseconds, and a fake one for tests.
//!
//! One clock for both sides of every transport: `CLOCK_MONOTONIC` is system-wide, so a time
//! taken by the writer in one process and one taken by the reader in another can be
//! subtracted. Its cost is measured at start ([`TimerOverhead`]) and printed, because it is
//! part of every figure and sets the floor below which no latency can be resolved.

use std::cell::Cell;

/// A source of integer nanoseconds that can also wait for a moment.
pub trait Clock {
    /// Now, in ns.
    fn now(&self) -> u64;
    /// Returns once [`Clock::now`] has reached `deadline` (ns).
    fn sleep_until(&self, deadline: u64);
}

/// `CLOCK_MONOTONIC` (read through the vDSO: no system call).
#[derive(Debug, Clone, Copy, Default)]
pub struct Monotonic;

/// Sleeping ends this early; the rest is spun, so that open-loop sends leave on time.
const SPIN_BEFORE_NS: u64 = 20_000;

impl Clock for Monotonic {
    #[inline]
    fn now(&self) -> u64 {
        monotonic_ns()
    }

    fn sleep_until(&self, deadline: u64) {
        let now = self.now();
        if deadline > now + SPIN_BEFORE_NS {
            let wake = deadline - SPIN_BEFORE_NS;
            let ts = libc::timespec {
                tv_sec: (wake / 1_000_000_000) as libc::time_t,
                tv_nsec: (wake % 1_000_000_000) as libc::c_long,
            };
            // SAFETY: a valid timespec; an early return (EINTR) is harmless, the spin follows.
            unsafe {
                libc::clock_nanosleep(
                    libc::CLOCK_MONOTONIC,
                    libc::TIMER_ABSTIME,
                    &ts,
                    std::ptr::null_mut(),
                );
            }
        }
        while self.now() < deadline {
            std::hint::spin_loop();
        }
    }
}

/// `CLOCK_MONOTONIC` now, in ns.
#[inline]
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Asks the kernel to wake this thread's timed sleeps within 1 ns instead of the default
/// 50 µs of slack, for open-loop schedules.
pub fn tighten_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer; it only affects the calling thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
}

/// What reading the clock costs, measured by back-to-back reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimerOverhead {
    /// median difference between two consecutive reads, ns
    pub median_ns: u64,
    /// smallest difference seen, ns
    pub min_ns: u64,
    /// reads made
    pub reads: u64,
    /// the resolution the kernel reports (`clock_getres`), ns
    pub resolution_ns: u64,
}

/// Measures the cost of [`Clock::now`] with `reads` back-to-back reads.
pub fn timer_overhead(clock: &dyn Clock, reads: usize) -> TimerOverhead {
    let mut stamps = Vec::with_capacity(reads + 1);
    for _ in 0..=reads {
        stamps.push(clock.now());
    }
    let mut deltas: Vec<u64> = stamps
        .windows(2)
        .map(|w| w[1].saturating_sub(w[0]))
        .collect();
    deltas.sort_unstable();
    TimerOverhead {
        median_ns: deltas.get(deltas.len() / 2).copied().unwrap_or(0),
        min_ns: deltas.first().copied().unwrap_or(0),
        reads: reads as u64,
        resolution_ns: resolution_ns(),
    }
}

fn resolution_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A deterministic clock for tests: every read advances time by `step(read index)`, and
/// sleeping jumps straight to the deadline.
pub struct FakeClock {
    now: Cell<u64>,
    reads: Cell<u64>,
    step: Box<dyn Fn(u64) -> u64>,
}

impl FakeClock {
    /// A clock at 0 whose `i`-th read (from 0) first advances time by `step(i)`.
    pub fn new(step: impl Fn(u64) -> u64 + 'static) -> Self {
        FakeClock {
            now: Cell::new(0),
            reads: Cell::new(0),
            step: Box::new(step),
        }
    }

    /// Reads made so far.
    pub fn reads(&self) -> u64 {
        self.reads.get()
    }
}

impl Clock for FakeClock {
    fn now(&self) -> u64 {
        let i = self.reads.get();
        self.reads.set(i + 1);
        self.now.set(self.now.get() + (self.step)(i));
        self.now.get()
    }

    fn sleep_until(&self, deadline: u64) {
        if deadline > self.now.get() {
            self.now.set(deadline);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_monotonic_clock_never_goes_back() {
        let a = monotonic_ns();
        let b = monotonic_ns();
        assert!(b >= a);
    }

    #[test]
    fn timer_overhead_of_a_fake_clock_is_its_step() {
        let clock = FakeClock::new(|i| if i % 10 == 0 { 100 } else { 7 });
        let o = timer_overhead(&clock, 1000);
        assert_eq!((o.median_ns, o.min_ns, o.reads), (7, 7, 1000));
    }

    #[test]
    fn sleeping_on_the_monotonic_clock_reaches_the_deadline() {
        let deadline = monotonic_ns() + 100_000;
        Monotonic.sleep_until(deadline);
        assert!(monotonic_ns() >= deadline);
    }

    #[test]
    fn the_fake_clock_jumps_to_a_later_deadline_only() {
        let clock = FakeClock::new(|_| 1);
        clock.sleep_until(50);
        assert_eq!(clock.now(), 51);
        clock.sleep_until(10);
        assert_eq!(clock.now(), 52);
    }
}
