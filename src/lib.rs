//! latscope: latency and performance analysis for the Linux display, graphics and IPC stack.
//!
//! The library is the whole tool except the command line: inputs are read by [`ingest`], paired
//! into latency samples by [`span`], summarised by [`stats`], written and read back as the typed
//! documents of [`doc`], and rendered by [`report`]. Every value is an integer number of nanoseconds until it is rendered; rendering is pure and
//! returns text for the caller to print.

#![warn(missing_docs)]

pub mod bench;
pub mod compare;
pub mod doc;
pub mod error;
pub mod files;
pub mod fleet;
pub mod frames;
pub mod ingest;
pub mod lab;
pub mod live;
pub mod probe;
pub mod process;
pub mod report;
pub mod rule;
pub mod span;
pub mod stats;

pub use error::Error;
