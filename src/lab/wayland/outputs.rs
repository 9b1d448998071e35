//! `outputs`: the screen-configuration query of a Wayland client — connect, list the globals,
//! bind every `wl_output` (and `zxdg_output_manager_v1` where offered), and collect each
//! output's geometry, modes, scale and name until the compositor has sent them all — timed
//! whole, in latscope's process or in a helper process asked over a private D-Bus (as
//! libkscreen's out-of-process backend asks its backend launcher).
//!
//! The helper is a fresh `latscope lab wayland-peer` on the IPC lab's bus
//! ([`crate::lab::ipc::transport::dbus`]): each method call runs one query there and returns
//! its description as JSON, so the two ways can be checked to return the same outputs.

use std::io;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::time::Duration;

use wayland_client::protocol::wl_output;
use wayland_protocols::xdg::xdg_output::zv1::client::zxdg_output_manager_v1;

use super::LabError;
use super::client::{Client, Wait};
use crate::doc::lab_wayland::OutputDoc;
use crate::ingest::Cancel;
use crate::lab::ipc::peer::PeerHandle;
use crate::lab::ipc::transport::Endpoint;
use crate::lab::ipc::transport::dbus::{self, Bus, Calls, DbusEndpoint};

/// One query on a fresh connection to `socket`.
pub fn query(socket: &Path, cancel: &Cancel) -> Result<Vec<OutputDoc>, LabError> {
    let (mut c, _) = Client::connect(socket)?;
    let registry = c.registry(cancel)?;
    let qh = c.qh();
    let manager = c
        .global("zxdg_output_manager_v1")
        .map(|g| (g.name, g.version.min(3)))
        .map(|(name, v)| {
            registry.bind::<zxdg_output_manager_v1::ZxdgOutputManagerV1, _, _>(name, v, &qh, ())
        });
    let outputs: Vec<(u32, u32)> = c
        .state
        .globals
        .iter()
        .filter(|g| g.interface == "wl_output")
        .map(|g| (g.name, g.version.min(4)))
        .collect();
    let mut versions = Vec::new();
    for (index, (name, version)) in outputs.into_iter().enumerate() {
        c.state.outputs.push(OutputDoc {
            scale: 1,
            ..OutputDoc::default()
        });
        c.state.outputs_done.push(false);
        let output = registry.bind::<wl_output::WlOutput, _, _>(name, version, &qh, index);
        if let Some(m) = &manager {
            m.get_xdg_output(&output, &qh, index);
        }
        versions.push(version);
    }
    // Everything the compositor sends about the new objects comes before the sync's answer;
    // outputs of version 2 and later also end with `done`.
    c.sync(cancel)?;
    let wait = c.wait(cancel, Duration::from_secs(5), |s| {
        s.outputs_done
            .iter()
            .zip(&versions)
            .all(|(&done, &v)| done || v < 2)
    })?;
    if wait == Wait::TimedOut {
        return Err(LabError::Stalled(
            "an output sent no wl_output.done within 5 s".into(),
        ));
    }
    Ok(std::mem::take(&mut c.state.outputs))
}

/// The helper process answering queries over a private D-Bus.
pub struct Helper {
    ep: DbusEndpoint,
    handle: Option<PeerHandle>,
    _bus: Bus,
}

impl Helper {
    /// Starts a bus and `exe lab wayland-peer ADDRESS CLIENT SOCKET` on it.
    pub fn start(exe: &Path, socket: &Path) -> io::Result<Helper> {
        let bus = Bus::start()?;
        let mut handle = None;
        let address = bus.address().to_string();
        let ep = dbus::client(&address, Calls::WithReply, |own| {
            let mut command = std::process::Command::new(exe);
            command
                .args(["lab", "wayland-peer", address.as_str(), own])
                .arg(socket)
                .env_remove("WAYLAND_DEBUG")
                .stdin(std::process::Stdio::null());
            // SAFETY: only async-signal-safe calls between fork and exec.
            unsafe {
                command.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    libc::signal(libc::SIGINT, libc::SIG_IGN);
                    Ok(())
                });
            }
            let child = command.spawn()?;
            let h = PeerHandle::Process(child.id() as libc::pid_t);
            let alive = h.liveness();
            handle = Some(h);
            Ok(alive)
        });
        match ep {
            Ok(ep) => Ok(Helper {
                ep,
                handle,
                _bus: bus,
            }),
            Err(e) => {
                let detail = handle.and_then(PeerHandle::finish);
                Err(io::Error::new(
                    e.kind(),
                    detail.map_or(e.to_string(), |d| format!("{e} ({d})")),
                ))
            }
        }
    }

    /// One query, answered by the helper.
    pub fn query(&mut self) -> Result<Vec<OutputDoc>, LabError> {
        let gone = |e: io::Error| LabError::Setup(format!("the D-Bus helper: {e}"));
        self.ep.send(b"query").map_err(gone)?;
        let mut reply = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = self.ep.recv(&mut buf).map_err(gone)?;
            if n == 0 {
                break;
            }
            reply.extend_from_slice(&buf[..n]);
        }
        let answer: Result<Vec<OutputDoc>, String> = serde_json::from_slice(&reply)
            .map_err(|e| LabError::Setup(format!("the D-Bus helper's answer: {e}")))?;
        answer.map_err(|e| LabError::Setup(format!("the D-Bus helper: {e}")))
    }

    /// Tells the helper to end and waits for it; describes how it failed, if it did.
    pub fn finish(mut self) -> Option<String> {
        let _ = self.ep.close();
        self.handle.take().and_then(PeerHandle::finish)
    }
}

/// The body of `latscope lab wayland-peer ADDRESS CLIENT SOCKET`: answers each call with one
/// query's outputs (or its error) as JSON, until the client says `Close`.
pub fn peer_main(args: &[String]) -> io::Result<()> {
    let [address, client, socket] = args else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "usage: latscope lab wayland-peer ADDRESS CLIENT SOCKET",
        ));
    };
    let mut ep = dbus::peer(address, client, Calls::WithReply)?;
    let cancel = Cancel::new();
    let mut buf = [0u8; 64];
    while ep.recv(&mut buf)? > 0 {
        let answer = query(Path::new(socket), &cancel).map_err(|e| e.to_string());
        let json = serde_json::to_vec(&answer).map_err(io::Error::other)?;
        ep.send(&json)?;
    }
    Ok(())
}
