//! Beyond one machine: live latency for Prometheus, results a fleet can merge, rows for SQL.
//!
//! A lab of test machines or a fleet of kiosks is not read histogram by histogram. [`native`]
//! maps the kernel's log-linear buckets onto Prometheus native histograms (pure), [`metrics`]
//! encodes a live session's latest snapshot with prometheus-client, and [`serve`] serves it on
//! `/metrics` from its own thread through the bounded server of [`http`] (the only I/O here).

pub mod http;
pub mod merge;
#[cfg(feature = "prometheus")]
pub mod metrics;
pub mod native;
#[cfg(feature = "parquet")]
pub mod parquet;
#[cfg(feature = "prometheus")]
pub mod serve;
