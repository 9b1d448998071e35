//! The `frames` part of a `spans` document (`latscope frames`): how the client's log joined the
//! compositor's, where the presentation clock lies, and the pacing. The stages themselves are
//! the document's series, so `compare`, `report`, `plot`, `merge` and `export` read them as any
//! spans; this part is what only a join of two logs can say.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What `latscope frames` says besides its stages.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct FramesSummary {
    /// the frames (client commits) read
    pub frames: u64,
    /// how the client's messages were found in the server log
    pub joined: Joined,
    /// the presentation clock the compositor named (`wp_presentation.clock_id`: 1 is
    /// CLOCK_MONOTONIC, 4 CLOCK_MONOTONIC_RAW)
    pub clock_id: Option<u32>,
    /// where the presentation clock lies against the logs' (absent: no frame was presented)
    pub clock_offset: Option<ClockOffset>,
    /// where the clock of the compositor's own trace lies against the logs' (`log time =
    /// trace time + offset`; absent: no trace, or none that bounded it)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline_offset: Option<ClockOffset>,
    /// how the frames were paced on the screen
    pub pacing: Pacing,
}

/// How the client's messages were found in the server log.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Joined {
    /// client requests found, of all
    pub requests_found: u64,
    /// (all)
    pub requests: u64,
    /// client events found, of all
    pub events_found: u64,
    /// (all)
    pub events: u64,
    /// the longest stretches of the client log not found (`file:first-last`)
    pub gaps: Vec<String>,
    /// the whole wrap periods the client's stamps were moved by onto the server's, µs
    pub shift_us: i64,
}

/// `log time = display time + offset` (or trace time), the offset somewhere in `[low_ns,
/// high_ns]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ClockOffset {
    /// the offset used (the presentation clock's: the interval's upper edge; Mir's trace's:
    /// its lower edge)
    pub estimate_ns: i64,
    /// the interval's lower edge
    pub low_ns: i64,
    /// its upper edge
    pub high_ns: i64,
    /// how far the estimate can be from the true offset (`high_ns - low_ns`)
    pub bound_ns: i64,
    /// frames that narrowed the interval
    pub frames: u64,
}

/// The frames' pacing.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Pacing {
    /// frames presented
    pub presented: u64,
    /// frames discarded
    pub discarded: u64,
    /// frames whose feedback never came
    pub pending: u64,
    /// the refresh period of most presented frames (0: not given)
    pub refresh_ns: u64,
    /// refresh periods between a surface's consecutive displayed frames → how many
    pub intervals: BTreeMap<u64, u64>,
    /// frames shown later than their surface's usual interval
    pub late: u64,
    /// late frames by what ran longest against its median
    pub causes: BTreeMap<String, u64>,
    /// the latest frames, latest first
    pub worst: Vec<LateFrame>,
}

/// A frame shown later than usual.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LateFrame {
    /// its surface's id
    pub surface: u32,
    /// its commit's line in the client log
    pub line: u64,
    /// refresh periods after the surface's frame before it
    pub periods: u64,
    /// what ran longest against its median
    pub cause: String,
    /// by how much, ns
    pub excess_ns: i64,
    /// the frame's stages that were measured, ns
    pub stages: BTreeMap<String, i64>,
}
