//! One measured run of a benchmarked command and the layout it ran under: what the bench
//! engine measures ([`crate::bench::spawn`]) and what the `bench` document saves, so it lives
//! here, below both, and the document does not depend on the engine.

use serde::{Deserialize, Serialize};

/// What one run measured (also a run of the `bench` document).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunMeasure {
    /// wall time from starting the child (timed runs: the spawn; counted runs: releasing it
    /// from the gate) to its exit
    pub wall_ns: u64,
    /// user CPU time of the child and its reaped children
    pub user_ns: u64,
    /// system CPU time
    pub sys_ns: u64,
    /// peak resident set size, KiB; 0 in timed runs (not measured: a spawned child's peak
    /// starts from latscope's own, so it is read in counted runs)
    pub max_rss_kb: u64,
    /// voluntary context switches (waits), from the child's resource usage
    #[serde(default)]
    pub voluntary_cs: u64,
    /// involuntary context switches (preemptions), from the child's resource usage
    #[serde(default)]
    pub involuntary_cs: u64,
    /// minor page faults, from the child's resource usage
    #[serde(default)]
    pub minor_faults: u64,
    /// exit code (`None`: killed by a signal)
    pub exit_code: Option<i32>,
    /// killed because it ran past the timeout
    pub timed_out: bool,
    /// counter values by event name, in the order opened (absent: not supported here, or a
    /// run without counters); a JSON object in documents
    #[serde(with = "counters_as_map", default)]
    pub counters: Vec<(String, u64)>,
    /// the layout it ran under (`bench --layouts`; absent without)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layout: Option<Layout>,
}

/// The layout a run ran under (`bench --layouts K`): its seed (`{seed}` in `--relink` and in
/// the commands) and the size of the environment padding it got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    /// which of the K layouts, from 0
    pub index: u32,
    /// its seed
    pub seed: u64,
    /// bytes of the padding variable (`LATSCOPE_LAYOUT_PAD`) in the run's environment
    pub env_pad: u32,
}

impl RunMeasure {
    /// Whether the run failed: a non-zero exit, killed by a signal, or timed out (such runs
    /// are measured only with `--ignore-failure`).
    pub fn failed(&self) -> bool {
        self.timed_out || self.exit_code != Some(0)
    }
}

/// Counters as a JSON object (`{"task-clock": 123, ...}`), keeping their order.
mod counters_as_map {
    use serde::ser::SerializeMap;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(counters: &[(String, u64)], s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(counters.len()))?;
        for (name, value) in counters {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(String, u64)>, D::Error> {
        let map = std::collections::BTreeMap::<String, u64>::deserialize(d)?;
        Ok(map.into_iter().collect())
    }
}
