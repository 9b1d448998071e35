//! One configuration end to end: a fresh connection (or, for `outputs`, the query itself), the
//! pattern, and what it measured — all of it, also when it stopped early.

use std::path::{Path, PathBuf};

use super::client::Client;
use super::outputs::Helper;
use super::{Config, LabError, Outcome, Via, frames, outputs, roundtrip};
use crate::doc::lab::StopDoc;
use crate::doc::lab_wayland::{CompositorDoc, GlobalDoc};
use crate::ingest::Cancel;
use crate::lab::ipc::clock::monotonic_ns;

/// The compositor at `socket`: its process name and the globals it offers.
pub fn describe(socket: &Path, origin: &str, cancel: &Cancel) -> Result<CompositorDoc, LabError> {
    let (mut client, name) = Client::connect(socket)?;
    // A compositor answers the first sync; a socket that hangs up before it (another
    // program's socket given to --display) is most likely not one.
    client.registry(cancel).map_err(|e| match e {
        LabError::Gone(why) => LabError::NotCompositor(why),
        e => e,
    })?;
    Ok(CompositorDoc {
        name: name.unwrap_or_else(|| "unknown".into()),
        origin: origin.to_string(),
        globals: client
            .state
            .globals
            .iter()
            .map(|g| GlobalDoc {
                interface: g.interface.clone(),
                version: g.version,
            })
            .collect(),
    })
}

/// Why `config` cannot run on a compositor offering `globals` (the interfaces it needs and
/// does not get), or `None` when it can.
pub fn unsupported(config: &Config, globals: &[GlobalDoc]) -> Option<String> {
    let needs: &[&str] = match config {
        Config::Frames(_) => &["wl_compositor", "wl_shm", "xdg_wm_base"],
        Config::RoundTrip { .. } | Config::Outputs { .. } => &[],
    };
    let missing: Vec<&str> = needs
        .iter()
        .copied()
        .filter(|n| !globals.iter().any(|g| g.interface == *n))
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "skipped: the compositor does not offer {} (xdg-shell and wl_shm are needed to draw a window)",
            missing.join(", ")
        )
    })
}

/// Runs configurations against one compositor.
pub struct Lab {
    socket: PathBuf,
    cancel: Cancel,
    exe: Option<PathBuf>,
    helper: Option<Helper>,
}

impl Lab {
    /// A lab on the compositor at `socket`; `exe` is latscope itself (for the D-Bus helper).
    pub fn new(socket: PathBuf, cancel: Cancel, exe: Option<PathBuf>) -> Lab {
        Lab {
            socket,
            cancel,
            exe,
            helper: None,
        }
    }

    /// Runs one configuration; a failure is in the outcome with what was measured before it.
    pub fn run(&mut self, config: &Config) -> Outcome {
        let mut out = Outcome::new(*config);
        let start = monotonic_ns();
        let result = self.measure(config, &mut out);
        out.elapsed_ns = monotonic_ns() - start;
        if let Err(e) = result {
            out.compositor_gone = matches!(e, LabError::Gone(_));
            out.stop = StopDoc::Failed;
            out.error = Some(e.to_string());
        } else if self.cancel.is_raised() {
            out.stop = StopDoc::Interrupted;
        }
        out
    }

    fn measure(&mut self, config: &Config, out: &mut Outcome) -> Result<(), LabError> {
        match config {
            Config::RoundTrip { count } => {
                let (mut client, _) = Client::connect(&self.socket)?;
                roundtrip::measure(&mut client, *count, &self.cancel, out)
            }
            Config::Frames(p) => {
                let (mut client, _) = Client::connect(&self.socket)?;
                frames::measure(&mut client, p, &self.cancel, out)
            }
            Config::Outputs { count, via } => self.outputs(*count, *via, out),
        }
    }

    fn outputs(&mut self, count: u64, via: Via, out: &mut Outcome) -> Result<(), LabError> {
        if via == Via::Dbus && self.helper.is_none() {
            let exe = self.exe.as_ref().ok_or_else(|| {
                LabError::Setup("the D-Bus helper needs the latscope binary".into())
            })?;
            let helper = Helper::start(exe, &self.socket)
                .map_err(|e| LabError::Setup(format!("cannot start the D-Bus helper: {e}")))?;
            self.helper = Some(helper);
        }
        let metric = out.metric("query");
        for _ in 0..count {
            if self.cancel.is_raised() {
                break;
            }
            let t0 = monotonic_ns();
            let description = match (via, self.helper.as_mut()) {
                (Via::Dbus, Some(helper)) => helper.query()?,
                _ => outputs::query(&self.socket, &self.cancel)?,
            };
            out.sample(metric, t0, monotonic_ns() - t0);
            out.outputs = Some(description);
        }
        Ok(())
    }

    /// Stops the D-Bus helper, if one ran; describes how it failed, if it did.
    pub fn finish(mut self) -> Option<String> {
        self.helper.take().and_then(Helper::finish)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::wayland::{Damage, FrameParams, Pace};

    #[test]
    fn frames_without_xdg_shell_are_skipped_with_what_is_missing() {
        let globals: Vec<GlobalDoc> = ["wl_compositor", "wl_shm"]
            .iter()
            .map(|i| GlobalDoc {
                interface: i.to_string(),
                version: 1,
            })
            .collect();
        let frames = Config::Frames(FrameParams {
            buffers: 2,
            width: 8,
            height: 8,
            frames: 1,
            pace: Pace::FreeRun,
            damage: Damage::Full,
        });
        let why = unsupported(&frames, &globals).unwrap();
        assert!(why.contains("does not offer xdg_wm_base"), "{why}");
        assert_eq!(unsupported(&Config::RoundTrip { count: 1 }, &globals), None);
    }
}
