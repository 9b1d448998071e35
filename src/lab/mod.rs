//! Labs: small, controlled experiments that make a performance lesson measurable.
//!
//! [`ipc`] measures what each IPC transport costs per message, as distributions.
//!
//! [`x11`] measures requests on a real X server: image uploads over the socket or MIT-SHM, and
//! the RandR screen-configuration query in or out of process.
//!
//! [`queue`] models and runs a submission pipeline whose queue coalesces work, where
//! "total time ÷ batches" and per-request latency disagree (the i915 gem_exec_nop critique).
//!
//! [`gpu`] measures seed 004's stages of a submission on a real accelerator (the CUDA driver
//! API, loaded at run time), as distributions beside gem_exec_nop's time per batch.
//!
//! [`wayland`] is a native Wayland client that times its own round trips, frames and output
//! queries on a real compositor (a private weston headless when none is given).

pub mod gpu;
pub mod ipc;
pub mod queue;
pub mod records;
pub mod wayland;
pub mod x11;
