//! The `lab-wayland` document: one result per pattern configuration of `latscope lab wayland`,
//! each latency a [`Latency`] in ns, with the compositor and the globals it offered.

use serde::{Deserialize, Serialize};

use super::dist::{Latency, Nanoseconds};
use super::lab::{Skipped, StopDoc};
use super::{Kind, VERSION};

/// One global the compositor offered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GlobalDoc {
    /// interface
    pub interface: String,
    /// highest version offered
    pub version: u32,
}

/// The compositor measured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompositorDoc {
    /// its process name (SO_PEERCRED), e.g. `weston`, `miral-shell`
    pub name: String,
    /// how it was found: `--display NAME`, `$WAYLAND_DISPLAY=NAME`, `private weston headless`
    pub origin: String,
    /// the globals offered, in registry order
    pub globals: Vec<GlobalDoc>,
}

/// One mode of an output.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Mode {
    /// pixels
    pub width: i32,
    /// pixels
    pub height: i32,
    /// mHz
    pub refresh_mhz: i32,
    /// the current mode
    pub current: bool,
    /// the preferred mode
    pub preferred: bool,
}

/// One output as a Wayland client sees it (`wl_output` and `zxdg_output_v1`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct OutputDoc {
    /// `wl_output.name` (version 4)
    pub name: Option<String>,
    /// `wl_output.description` (version 4)
    pub description: Option<String>,
    /// manufacturer
    pub make: String,
    /// model
    pub model: String,
    /// position in the global compositor space
    pub x: i32,
    /// position in the global compositor space
    pub y: i32,
    /// mm
    pub physical_width_mm: i32,
    /// mm
    pub physical_height_mm: i32,
    /// `wl_output.transform` value
    pub transform: u32,
    /// scale factor (1 unless told)
    pub scale: i32,
    /// the modes
    pub modes: Vec<Mode>,
    /// xdg-output logical position
    pub logical_x: Option<i32>,
    /// xdg-output logical position
    pub logical_y: Option<i32>,
    /// xdg-output logical size
    pub logical_width: Option<i32>,
    /// xdg-output logical size
    pub logical_height: Option<i32>,
    /// xdg-output name
    pub xdg_name: Option<String>,
    /// xdg-output description
    pub xdg_description: Option<String>,
}

/// The configuration's parameters (only its pattern's are set).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct WaylandParams {
    /// round trips or queries (round-trip, outputs)
    pub count: Option<u64>,
    /// frames: buffers in the pool
    pub buffers: Option<u32>,
    /// frames: width in pixels
    pub width: Option<u32>,
    /// frames: height in pixels
    pub height: Option<u32>,
    /// frames: frames committed
    pub frames: Option<u64>,
    /// frames: `frame-callback`, `free-run`, `rate=HZ`
    pub pace: Option<String>,
    /// frames: `full`, `partial`
    pub damage: Option<String>,
    /// outputs: `inproc`, `dbus`
    pub via: Option<String>,
}

/// One named latency of a configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metric {
    /// `sync_to_done`, `commit_to_release`, `frame_to_done`, `commit_to_presented`,
    /// `buffer_wait`, `query`
    pub name: String,
    /// summary (flattened) and histogram
    #[serde(flatten)]
    pub dist: Latency,
}

/// What wp_presentation said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PresentationDoc {
    /// the presentation clock (`clk_id`; 1 is CLOCK_MONOTONIC)
    pub clock_id: Option<u32>,
    /// every flag seen on any `presented`: vsync, hw_clock, hw_completion, zero_copy
    pub flags: Vec<String>,
    /// the last refresh period reported (ns; 0: unknown)
    pub refresh_ns: Option<u64>,
    /// feedbacks answered `discarded`
    pub discarded: u64,
}

/// One configuration's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WaylandResult {
    /// `round-trip`, `frames`, `outputs`
    pub pattern: String,
    /// the row label, e.g. `frames buffers=2 size=256x256 pace=frame-callback damage=full`
    pub label: String,
    /// its parameters
    pub params: WaylandParams,
    /// its latencies
    pub metrics: Vec<Metric>,
    /// frames: frames committed per second
    pub frames_per_s: Option<f64>,
    /// frames: buffers the compositor held, on average, right after each commit
    pub buffers_in_flight_mean: Option<f64>,
    /// frames: the most buffers it held
    pub buffers_in_flight_max: Option<u64>,
    /// frames: what wp_presentation said (absent when not offered)
    pub presentation: Option<PresentationDoc>,
    /// outputs: the description the query returned
    pub outputs: Option<Vec<OutputDoc>>,
    /// what was skipped or worth knowing (e.g. no wp_presentation)
    #[serde(default)]
    pub notes: Vec<String>,
    /// wall time of the measured phase
    pub elapsed_ns: u64,
    /// why it stopped
    pub stop: StopDoc,
    /// what failed
    pub error: Option<String>,
    /// individual exchanges (`--max-spans N`), one series per metric
    #[serde(flatten)]
    pub kept: super::lab::Records,
}

/// The `lab-wayland` document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabWaylandDoc {
    /// `lab-wayland`
    pub kind: Kind,
    /// format version
    pub version: u32,
    /// ns
    pub unit: Nanoseconds,
    /// the compositor
    pub compositor: CompositorDoc,
    /// Ctrl-C cut the run short
    pub interrupted: bool,
    /// configurations not run
    #[serde(default)]
    pub skipped: Vec<Skipped>,
    /// one per configuration, in the order run
    pub results: Vec<WaylandResult>,
}

impl LabWaylandDoc {
    /// A document with no results yet.
    pub fn new(compositor: CompositorDoc) -> LabWaylandDoc {
        LabWaylandDoc {
            kind: Kind::LabWayland,
            version: VERSION,
            unit: Nanoseconds::Ns,
            compositor,
            interrupted: false,
            skipped: Vec::new(),
            results: Vec::new(),
        }
    }

    pub(super) fn check(&self) -> Result<(), String> {
        for r in &self.results {
            for m in &r.metrics {
                m.dist
                    .check()
                    .map_err(|e| format!("{} {}: {e}", r.label, m.name))?;
            }
            for v in [r.frames_per_s, r.buffers_in_flight_mean]
                .into_iter()
                .flatten()
            {
                if !v.is_finite() || v < 0.0 {
                    return Err(format!("{}: {v} is not a rate or a mean", r.label));
                }
            }
        }
        Ok(())
    }
}
