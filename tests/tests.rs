//! One integration-test binary (faster to link than one per file).

mod util;

mod abuse;

mod bench;
mod compare;
mod docs;
mod e2e;
mod fleet;
mod golden;
mod ipc;
mod lab;
mod live;
mod report;
mod safety;
mod snapshots;
mod spans;
mod wayland_cli;
mod wayland_lab;
mod x11;
