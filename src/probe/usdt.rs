//! `.note.stapsdt` notes: the USDT probes of one ELF file.
//!
//! Each note (owner `stapsdt`, type 3) holds three addresses — the probe site, the link-time
//! address of `.stapsdt.base`, and the semaphore (0 when none) — followed by three NUL-terminated
//! strings: provider, name and the argument specs (`8@%r13 -4@%eax`: size, signedness, location).

use object::{Object, ObjectSection};
use serde::Serialize;

use super::ProbeError;

/// One USDT probe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct UsdtProbe {
    /// provider, e.g. `mir_server_wayland`
    pub provider: String,
    /// probe name, e.g. `sw_buffer_committed`
    pub name: String,
    /// address of the probe site (link-time)
    pub address: u64,
    /// address of the semaphore that guards the probe, when it has one
    pub semaphore: Option<u64>,
    /// argument specs as written in the note, one per argument
    pub arguments: Vec<String>,
}

const NT_STAPSDT: u32 = 3;

/// Reads the USDT probes of the ELF file at `path` (empty when it has none).
pub fn read_usdt_probes(path: &str) -> Result<Vec<UsdtProbe>, ProbeError> {
    let data = std::fs::read(path).map_err(|source| ProbeError::Read {
        path: path.to_string(),
        source,
    })?;
    parse(&data).map_err(|reason| ProbeError::NotElf {
        path: path.to_string(),
        reason,
    })
}

/// Parses the probes out of ELF bytes.
pub fn parse(data: &[u8]) -> Result<Vec<UsdtProbe>, String> {
    let file = object::File::parse(data).map_err(|e| e.to_string())?;
    let Some(section) = file.section_by_name(".note.stapsdt") else {
        return Ok(Vec::new());
    };
    let notes = section.data().map_err(|e| e.to_string())?;
    let reader = NoteReader {
        little: file.is_little_endian(),
        wide: file.is_64(),
    };
    Ok(reader.probes(notes))
}

struct NoteReader {
    little: bool,
    wide: bool,
}

impl NoteReader {
    fn u32_at(&self, b: &[u8], at: usize) -> Option<u32> {
        let bytes: [u8; 4] = b.get(at..at + 4)?.try_into().ok()?;
        Some(if self.little {
            u32::from_le_bytes(bytes)
        } else {
            u32::from_be_bytes(bytes)
        })
    }

    fn addr_at(&self, b: &[u8], at: usize) -> Option<u64> {
        if !self.wide {
            return self.u32_at(b, at).map(u64::from);
        }
        let bytes: [u8; 8] = b.get(at..at + 8)?.try_into().ok()?;
        Some(if self.little {
            u64::from_le_bytes(bytes)
        } else {
            u64::from_be_bytes(bytes)
        })
    }

    /// Every well-formed stapsdt note; a malformed tail is ignored.
    fn probes(&self, notes: &[u8]) -> Vec<UsdtProbe> {
        let mut probes = Vec::new();
        let mut at = 0;
        while let (Some(namesz), Some(descsz), Some(kind)) = (
            self.u32_at(notes, at),
            self.u32_at(notes, at + 4),
            self.u32_at(notes, at + 8),
        ) {
            let name_at = at + 12;
            let desc_at = name_at + (namesz as usize).next_multiple_of(4);
            let Some(desc) = notes.get(desc_at..desc_at + descsz as usize) else {
                break;
            };
            let owner = notes
                .get(name_at..name_at + namesz as usize)
                .unwrap_or_default();
            if kind == NT_STAPSDT && owner.starts_with(b"stapsdt") {
                probes.extend(self.probe(desc));
            }
            at = desc_at + (descsz as usize).next_multiple_of(4);
        }
        probes
    }

    fn probe(&self, desc: &[u8]) -> Option<UsdtProbe> {
        let width = if self.wide { 8 } else { 4 };
        let address = self.addr_at(desc, 0)?;
        let semaphore = self.addr_at(desc, 2 * width)?;
        let mut strings = desc.get(3 * width..)?.split(|&b| b == 0);
        let text = |s: &[u8]| String::from_utf8_lossy(s).into_owned();
        let provider = text(strings.next()?);
        let name = text(strings.next()?);
        let arguments = strings.next().map(text).unwrap_or_default();
        Some(UsdtProbe {
            provider,
            name,
            address,
            semaphore: (semaphore != 0).then_some(semaphore),
            arguments: arguments.split_whitespace().map(str::to_string).collect(),
        })
    }
}
