//! The verdict's thresholds as documents record them, and the time a verdict is on: shared by
//! the `bench` and `compare` documents (and the bench engine), so they live in a file of their
//! own that both documents import.

use serde::{Deserialize, Serialize};

use super::run::RunMeasure;

/// The thresholds a verdict was reached with.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RuleDoc {
    /// the noise band (0.01 = ±1%)
    pub noise: f64,
    /// the significance level
    pub alpha: f64,
    /// the time verdicts on time are on: `cpu` (user + system, `bench --time cpu`); absent:
    /// wall time
    #[serde(default, skip_serializing_if = "Clock::is_wall")]
    pub time: Clock,
}

/// The time a benchmark's verdict is on (`bench --time`).
///
/// Wall time is what a user waits for, and includes the time a command waited for a CPU, a
/// disk or a sleep. CPU time (user + system, of the command and its reaped children, from
/// `wait4`) leaves out the time it was runnable but not running: on a busy or shared machine
/// other processes take the CPU for whole time slices, which lengthens the wall time of a
/// CPU-bound run by a random amount and leaves its CPU time alone. It is what hyperfine's
/// `--shell=none` users read as `user`/`system`, and what the noise literature recommends where
/// the wall clock is contended (Kalibera and Jones, "Rigorous benchmarking in reasonable time",
/// 2013: measure the quantity that varies least for the question asked).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Clock {
    /// spawn to exit
    #[default]
    Wall,
    /// user + system CPU time
    Cpu,
}

impl Clock {
    /// Both, the default first.
    pub const ALL: [Clock; 2] = [Clock::Wall, Clock::Cpu];

    /// The metric's name in every output and on the command line: `wall` or `cpu`.
    pub fn metric(self) -> &'static str {
        match self {
            Clock::Wall => "wall",
            Clock::Cpu => "cpu",
        }
    }

    /// Wall time, the default (left out of documents).
    pub fn is_wall(&self) -> bool {
        *self == Clock::Wall
    }

    /// A run's time on this clock, ns (saturating: runs read back from a document by
    /// `--compare` may hold any number).
    pub fn of(self, r: &RunMeasure) -> u64 {
        match self {
            Clock::Wall => r.wall_ns,
            Clock::Cpu => r.user_ns.saturating_add(r.sys_ns),
        }
    }
}

impl std::str::FromStr for Clock {
    type Err = crate::error::UnknownName;

    /// By [`Clock::metric`] (`--time cpu`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        crate::error::UnknownName::find(&Self::ALL, Self::metric, "clock", s)
    }
}
