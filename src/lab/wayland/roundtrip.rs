//! `round-trip`: `wl_display.sync` → `wl_callback.done`, the protocol floor: the least a
//! request that needs an answer can cost on this compositor.

use super::client::Client;
use super::{LabError, Outcome};
use crate::ingest::Cancel;

/// Round trips before measuring.
pub const WARMUP: u64 = 10;

/// Measures `count` round trips into `out` (metric `sync_to_done`).
pub fn measure(
    client: &mut Client,
    count: u64,
    cancel: &Cancel,
    out: &mut Outcome,
) -> Result<(), LabError> {
    for _ in 0..WARMUP {
        client.sync(cancel)?;
    }
    let metric = out.metric("sync_to_done");
    for _ in 0..count {
        match client.sync(cancel)? {
            Some((start, ns)) => out.sample(metric, start, ns),
            None => break,
        }
    }
    Ok(())
}
