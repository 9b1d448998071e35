//! The screen-configuration query libkscreen's XRandR backend makes: `GetScreenResourcesCurrent`,
//! then `GetOutputInfo` and the EDID property of every output and `GetCrtcInfo` of every CRTC.
//!
//! The result is a plain [`ScreenConfig`]; the D-Bus backend sends it serialized (JSON bytes, as
//! libkscreen sends a serialized `QVariantMap`), the in-process query returns it as is. The
//! replies of one step are all requested before the first is awaited, as XCB clients do. The
//! requests go over the lab's [`Wire`], so the query costs what the protocol costs.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use x11rb::protocol::randr;
use x11rb::protocol::xproto::{AtomEnum, InternAtomReply, InternAtomRequest};

use super::X11Error;
use super::wire::{SMALL_REPLY, Wire};

/// What the protocol allows each reply, bytes, so a server cannot announce more (see
/// [`Wire`]): its lists are counted in 16 bits. `GetScreenResourcesCurrent`: CRTCs and outputs
/// (4 bytes each), mode infos (32), the mode names' bytes.
const RESOURCES_MAX: usize = 32 + 65535 * (4 + 4 + 32 + 1) + 3;
/// `GetOutputInfo`: 36 bytes, CRTCs, modes and clones (4 bytes each), the name's bytes.
const OUTPUT_INFO_MAX: usize = 36 + 65535 * (4 + 4 + 4 + 1) + 3;
/// The EDID asked for: at most this many 4-byte units (a 128-byte block and three extensions).
const EDID_UNITS: u32 = 128;
/// `GetOutputProperty`: the data asked for, at most.
const EDID_PROPERTY_MAX: usize = 32 + 4 * EDID_UNITS as usize;
/// `GetCrtcInfo`: outputs and possible outputs (4 bytes each).
const CRTC_INFO_MAX: usize = 32 + 65535 * (4 + 4);

/// One output (a connector).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputConfig {
    /// its id
    pub id: u32,
    /// `HDMI-1`, `screen` on Xvfb
    pub name: String,
    /// 0 connected, 1 disconnected, 2 unknown
    pub connection: u8,
    /// the CRTC driving it (0: none)
    pub crtc: u32,
    /// physical size, mm
    pub mm_width: u32,
    /// physical size, mm
    pub mm_height: u32,
    /// the modes it supports
    pub modes: Vec<u32>,
    /// its EDID, if it has one
    pub edid: Vec<u8>,
}

/// One CRTC.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrtcConfig {
    /// its id
    pub id: u32,
    /// position, pixels
    pub x: i16,
    /// position, pixels
    pub y: i16,
    /// size, pixels
    pub width: u16,
    /// size, pixels
    pub height: u16,
    /// the mode (0: off)
    pub mode: u32,
    /// the rotation bits
    pub rotation: u16,
}

/// One mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModeConfig {
    /// its id
    pub id: u32,
    /// pixels
    pub width: u16,
    /// pixels
    pub height: u16,
    /// Hz
    pub dot_clock: u32,
}

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ScreenConfig {
    /// the configuration's timestamp
    pub config_timestamp: u32,
    /// outputs
    pub outputs: Vec<OutputConfig>,
    /// CRTCs
    pub crtcs: Vec<CrtcConfig>,
    /// modes
    pub modes: Vec<ModeConfig>,
}

impl ScreenConfig {
    /// The serialized form sent over D-Bus.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Reads [`ScreenConfig::to_bytes`] back.
    pub fn from_bytes(bytes: &[u8]) -> Result<ScreenConfig, X11Error> {
        serde_json::from_slice(bytes)
            .map_err(|e| X11Error::Backend(format!("unreadable configuration: {e}")))
    }
}

/// RandR on this server: its major opcode and first event code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Randr {
    /// the extension's major opcode
    pub major: u8,
    /// the code of RRScreenChangeNotify (RRNotify is the next)
    pub first_event: u8,
}

/// Checks the server has RandR 1.3 or later (`GetScreenResourcesCurrent`).
pub fn check(wire: &mut Wire) -> Result<Randr, X11Error> {
    let ext = wire
        .extension(randr::X11_EXTENSION_NAME)?
        .ok_or(X11Error::Missing("RANDR"))?;
    let seq = wire.request(
        randr::QueryVersionRequest {
            major_version: 1,
            minor_version: 6,
        },
        ext.major_opcode,
        SMALL_REPLY,
    )?;
    let v: randr::QueryVersionReply = wire.reply_of(seq)?;
    if (v.major_version, v.minor_version) < (1, 3) {
        return Err(X11Error::Protocol(format!(
            "RandR {}.{} is too old: GetScreenResourcesCurrent needs 1.3",
            v.major_version, v.minor_version
        )));
    }
    Ok(Randr {
        major: ext.major_opcode,
        first_event: ext.first_event,
    })
}

/// The `EDID` atom (interned once, as libkscreen does).
pub fn edid_atom(wire: &mut Wire) -> Result<u32, X11Error> {
    let seq = wire.request(
        InternAtomRequest {
            only_if_exists: false,
            name: Cow::Borrowed(b"EDID"),
        },
        0,
        SMALL_REPLY,
    )?;
    let reply: InternAtomReply = wire.reply_of(seq)?;
    Ok(reply.atom)
}

/// Queries the whole configuration of the screen whose root is `root`.
pub fn query(wire: &mut Wire, r: Randr, root: u32, edid: u32) -> Result<ScreenConfig, X11Error> {
    let seq = wire.request(
        randr::GetScreenResourcesCurrentRequest { window: root },
        r.major,
        RESOURCES_MAX,
    )?;
    let res: randr::GetScreenResourcesCurrentReply = wire.reply_of(seq)?;
    let ts = res.config_timestamp;
    let mut output_seqs = Vec::with_capacity(res.outputs.len());
    for &output in &res.outputs {
        let info = wire.request(
            randr::GetOutputInfoRequest {
                output,
                config_timestamp: ts,
            },
            r.major,
            OUTPUT_INFO_MAX,
        )?;
        let prop = wire.request(
            randr::GetOutputPropertyRequest {
                output,
                property: edid,
                type_: AtomEnum::ANY.into(),
                long_offset: 0,
                long_length: EDID_UNITS,
                delete: false,
                pending: false,
            },
            r.major,
            EDID_PROPERTY_MAX,
        )?;
        output_seqs.push((output, info, prop));
    }
    let mut crtc_seqs = Vec::with_capacity(res.crtcs.len());
    for &crtc in &res.crtcs {
        let seq = wire.request(
            randr::GetCrtcInfoRequest {
                crtc,
                config_timestamp: ts,
            },
            r.major,
            CRTC_INFO_MAX,
        )?;
        crtc_seqs.push((crtc, seq));
    }
    let mut outputs = Vec::with_capacity(output_seqs.len());
    for (id, info, prop) in output_seqs {
        let info: randr::GetOutputInfoReply = wire.reply_of(info)?;
        let edid = match wire.reply_of::<randr::GetOutputPropertyReply>(prop) {
            Ok(p) => p.data,
            Err(X11Error::Protocol(_)) => Vec::new(),
            Err(e) => return Err(e),
        };
        outputs.push(OutputConfig {
            id,
            name: String::from_utf8_lossy(&info.name).into_owned(),
            connection: u8::from(info.connection),
            crtc: info.crtc,
            mm_width: info.mm_width,
            mm_height: info.mm_height,
            modes: info.modes,
            edid,
        });
    }
    let mut crtcs = Vec::with_capacity(crtc_seqs.len());
    for (id, seq) in crtc_seqs {
        let c: randr::GetCrtcInfoReply = wire.reply_of(seq)?;
        crtcs.push(CrtcConfig {
            id,
            x: c.x,
            y: c.y,
            width: c.width,
            height: c.height,
            mode: c.mode,
            rotation: u16::from(c.rotation),
        });
    }
    let modes = res
        .modes
        .iter()
        .map(|m| ModeConfig {
            id: m.id,
            width: m.width,
            height: m.height,
            dot_clock: m.dot_clock,
        })
        .collect();
    Ok(ScreenConfig {
        config_timestamp: ts,
        outputs,
        crtcs,
        modes,
    })
}

/// A query answered from the last result until RandR says the configuration changed, as
/// libkscreen's backends cache it.
#[derive(Debug, Default)]
pub struct Cached {
    last: Option<ScreenConfig>,
    selected: bool,
}

impl Cached {
    /// The configuration: the cached one unless a RandR notify event arrived since.
    pub fn get(
        &mut self,
        wire: &mut Wire,
        r: Randr,
        root: u32,
        edid: u32,
    ) -> Result<ScreenConfig, X11Error> {
        use randr::NotifyMask;
        if !self.selected {
            wire.void(
                randr::SelectInputRequest {
                    window: root,
                    enable: NotifyMask::SCREEN_CHANGE
                        | NotifyMask::CRTC_CHANGE
                        | NotifyMask::OUTPUT_CHANGE
                        | NotifyMask::OUTPUT_PROPERTY,
                },
                r.major,
            )?;
            self.selected = true;
        }
        let mut changed = false;
        while let Some(event) = wire.poll_event()? {
            let code = event[0] & 0x7f;
            if code == 0 {
                return Err(X11Error::Protocol(super::wire::describe_error(&event)));
            }
            changed |= code == r.first_event + randr::SCREEN_CHANGE_NOTIFY_EVENT
                || code == r.first_event + randr::NOTIFY_EVENT;
        }
        if changed || self.last.is_none() {
            self.last = Some(query(wire, r, root, edid)?);
        }
        Ok(self.last.clone().unwrap_or_default())
    }
}
