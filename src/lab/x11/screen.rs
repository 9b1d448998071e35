//! The screen-configuration query libkscreen's XRandR backend makes: `GetScreenResourcesCurrent`,
//! then `GetOutputInfo` and the EDID property of every output and `GetCrtcInfo` of every CRTC.
//!
//! The result is a plain [`ScreenConfig`]; the D-Bus backend sends it serialized (JSON bytes, as
//! libkscreen sends a serialized `QVariantMap`), the in-process query returns it as is. The
//! replies of one step are all requested before the first is awaited, as XCB clients do.

use serde::{Deserialize, Serialize};
use x11rb::connection::RequestConnection;
use x11rb::protocol::randr::ConnectionExt as _;
use x11rb::protocol::xproto::{AtomEnum, ConnectionExt as _};
use x11rb::rust_connection::RustConnection;

use super::X11Error;

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

fn protocol(e: impl std::fmt::Display) -> X11Error {
    X11Error::protocol(e)
}

/// Checks the server has RandR 1.3 or later (`GetScreenResourcesCurrent`).
pub fn check(conn: &RustConnection) -> Result<(), X11Error> {
    if conn
        .extension_information(x11rb::protocol::randr::X11_EXTENSION_NAME)
        .map_err(protocol)?
        .is_none()
    {
        return Err(X11Error::Missing("RANDR"));
    }
    let v = conn
        .randr_query_version(1, 6)
        .map_err(protocol)?
        .reply()
        .map_err(protocol)?;
    if (v.major_version, v.minor_version) < (1, 3) {
        return Err(X11Error::Protocol(format!(
            "RandR {}.{} is too old: GetScreenResourcesCurrent needs 1.3",
            v.major_version, v.minor_version
        )));
    }
    Ok(())
}

/// The `EDID` atom (interned once, as libkscreen does).
pub fn edid_atom(conn: &RustConnection) -> Result<u32, X11Error> {
    Ok(conn
        .intern_atom(false, b"EDID")
        .map_err(protocol)?
        .reply()
        .map_err(protocol)?
        .atom)
}

/// Queries the whole configuration of the screen whose root is `root`.
pub fn query(conn: &RustConnection, root: u32, edid: u32) -> Result<ScreenConfig, X11Error> {
    let res = conn
        .randr_get_screen_resources_current(root)
        .map_err(protocol)?
        .reply()
        .map_err(protocol)?;
    let ts = res.config_timestamp;
    let output_cookies = res
        .outputs
        .iter()
        .map(|&o| {
            let info = conn.randr_get_output_info(o, ts).map_err(protocol)?;
            let prop = conn
                .randr_get_output_property(o, edid, AtomEnum::ANY, 0, 128, false, false)
                .map_err(protocol)?;
            Ok((o, info, prop))
        })
        .collect::<Result<Vec<_>, X11Error>>()?;
    let crtc_cookies = res
        .crtcs
        .iter()
        .map(|&c| Ok((c, conn.randr_get_crtc_info(c, ts).map_err(protocol)?)))
        .collect::<Result<Vec<_>, X11Error>>()?;
    let mut outputs = Vec::with_capacity(output_cookies.len());
    for (id, info, prop) in output_cookies {
        let info = info.reply().map_err(protocol)?;
        let edid = prop.reply().map(|p| p.data).unwrap_or_default();
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
    let mut crtcs = Vec::with_capacity(crtc_cookies.len());
    for (id, cookie) in crtc_cookies {
        let c = cookie.reply().map_err(protocol)?;
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
        conn: &RustConnection,
        root: u32,
        edid: u32,
    ) -> Result<ScreenConfig, X11Error> {
        use x11rb::connection::Connection;
        use x11rb::protocol::randr::NotifyMask;
        if !self.selected {
            conn.randr_select_input(
                root,
                NotifyMask::SCREEN_CHANGE
                    | NotifyMask::CRTC_CHANGE
                    | NotifyMask::OUTPUT_CHANGE
                    | NotifyMask::OUTPUT_PROPERTY,
            )
            .map_err(protocol)?;
            self.selected = true;
        }
        let mut changed = false;
        while let Some(event) = conn.poll_for_event().map_err(protocol)? {
            changed |= matches!(
                event,
                x11rb::protocol::Event::RandrScreenChangeNotify(_)
                    | x11rb::protocol::Event::RandrNotify(_)
            );
        }
        if changed || self.last.is_none() {
            self.last = Some(query(conn, root, edid)?);
        }
        Ok(self.last.clone().unwrap_or_default())
    }
}
