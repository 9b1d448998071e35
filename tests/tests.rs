//! One integration-test binary (faster to link than one per file).

mod util;

mod abuse;

mod bench;
mod compare;
mod docs;
mod e2e;
mod fleet;
mod frames;
mod frames_live;
mod golden;
mod ipc;
mod lab;
mod lab_gpu;
mod lab_records;
mod limits;
mod live;
mod live_cleanup;
mod live_record;
mod live_system;
mod mir_lttng;
mod nothing_lost;
mod perfetto;
mod report;
mod safety;
mod snapshots;
mod spans;
mod spans_parallel;
mod wayland_cli;
mod wayland_lab;
mod x11;
mod x11_hostile;
