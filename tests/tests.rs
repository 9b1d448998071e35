//! One integration-test binary (faster to link than one per file).

mod util;

mod bench;
mod compare;
mod e2e;
mod golden;
mod ipc;
mod lab;
mod live;
mod report;
mod wayland_cli;
