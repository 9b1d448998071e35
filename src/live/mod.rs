//! Live tracing: latency spans, event rates and argument distributions from USDT probes and
//! uprobes, aggregated in the kernel by a generated bpftrace program.
//!
//! [`spec`] parses what to trace, [`program`] generates the bpftrace program (pure),
//! [`output`] reads bpftrace's JSON stream into cumulative snapshots (pure), [`check`]
//! validates probes and privileges with messages that say the fix, [`bpftrace`] starts
//! bpftrace and [`runner`] runs it and hands snapshots to the caller (the I/O edge).

pub mod bpftrace;
pub mod check;
pub mod compile;
pub mod diagnose;
pub mod fields;
pub mod launch;
pub mod output;
pub mod program;
pub mod record;
pub mod runner;
pub mod spec;
pub mod tracefs;
