//! The `lab-gpu` document: per configuration (a row), every stage of a GPU submission as a
//! summary and histogram, gem_exec_nop's time per batch beside them, and the clock mapping the
//! stages that cross clocks were computed with.

use serde::{Deserialize, Serialize};

use super::dist::{Latency, Nanoseconds};
use super::{Kind, VERSION};

/// The backend, driver and device that ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuDevice {
    /// `cuda`, or `fake` (tests)
    pub backend: String,
    /// the driver's version
    pub driver: String,
    /// the device's name
    pub device: String,
}

/// A row's parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuConfig {
    /// `isolated`, `fixed-rate`, `back-to-back`
    pub pattern: String,
    /// the pattern's spacing
    pub spacing_ns: u64,
    /// streams
    pub streams: u32,
    /// consecutive requests per stream
    pub burst: u32,
    /// `nop`, `spin:T`, `grid:N`
    pub kernel: String,
    /// `stream`, `graph:G`
    pub launch: String,
    /// `spin`, `yield`, `blocking`
    pub sync: String,
    /// requests asked for
    pub requests: u64,
    /// warm-up requests (not reported)
    pub warmup: u64,
}

/// The device's clock mapped onto the host's `CLOCK_MONOTONIC` for one row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuClock {
    /// device − host before the run
    pub offset_before_ns: i64,
    /// device − host after the run
    pub offset_after_ns: i64,
    /// how fast the offset moved, ns per second of host time
    pub drift_ns_per_s: f64,
    /// the most a mapped stamp can be off: half the best ping's round trip
    pub error_ns: u64,
    /// pings per calibration
    pub pings: u64,
}

/// One stage of a row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuStage {
    /// `launch_call`, `submit_to_start`, `execute`, `end_to_host`, `end_to_sync`, `total`
    pub name: String,
    /// the durations ≥ 0: summary (flattened) and histogram
    #[serde(flatten)]
    pub dist: Latency,
    /// durations < 0, counted here and not in the summary (never clamped)
    pub negative: u64,
    /// the most negative duration
    pub most_negative_ns: Option<i64>,
}

/// One configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuRow {
    /// how the row is named
    pub label: String,
    /// its parameters
    pub config: GpuConfig,
    /// requests measured
    pub requests: u64,
    /// first launch → last synchronize
    pub wall_ns: u64,
    /// wall ÷ requests: what gem_exec_nop reports
    pub per_batch_ns: f64,
    /// the clock mapping
    pub clock: GpuClock,
    /// every stage
    pub stages: Vec<GpuStage>,
    /// Ctrl-C ended this row early
    pub interrupted: bool,
}

/// The `lab-gpu` document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabGpuDoc {
    /// `lab-gpu`
    pub kind: Kind,
    /// format version
    pub version: u32,
    /// ns
    pub unit: Nanoseconds,
    /// what ran
    pub device: GpuDevice,
    /// Ctrl-C cut the run short
    pub interrupted: bool,
    /// one per configuration
    pub rows: Vec<GpuRow>,
}

impl LabGpuDoc {
    /// A document of `rows`.
    pub fn new(device: GpuDevice, interrupted: bool, rows: Vec<GpuRow>) -> LabGpuDoc {
        LabGpuDoc {
            kind: Kind::LabGpu,
            version: VERSION,
            unit: Nanoseconds::Ns,
            device,
            interrupted,
            rows,
        }
    }

    pub(super) fn check(&self) -> Result<(), String> {
        for row in &self.rows {
            for s in &row.stages {
                s.dist
                    .check()
                    .map_err(|e| format!("row {}: {}: {e}", row.label, s.name))?;
                if s.most_negative_ns.is_some_and(|n| n >= 0) {
                    return Err(format!(
                        "row {}: {}: most_negative_ns is not negative",
                        row.label, s.name
                    ));
                }
            }
        }
        Ok(())
    }
}
