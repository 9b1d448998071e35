//! The ELF objects a process has mapped, from `/proc/PID/maps`.

use super::ProbeError;

/// The paths of the files mapped executable by process `pid`, in order of first mapping,
/// without duplicates (the executable first, then its libraries).
pub fn mapped_objects(pid: u32) -> Result<Vec<String>, ProbeError> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .map_err(|source| ProbeError::Process { pid, source })?;
    Ok(executable_paths(&maps))
}

/// Parses the text of a maps file.
pub fn executable_paths(maps: &str) -> Vec<String> {
    let mut paths: Vec<String> = Vec::new();
    for line in maps.lines() {
        let mut fields = line.split_whitespace();
        let perms = fields.nth(1).unwrap_or_default();
        let path = fields.nth(3).unwrap_or_default();
        if perms.contains('x') && path.starts_with('/') && !paths.iter().any(|p| p == path) {
            paths.push(path.to_string());
        }
    }
    paths
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_executable_file_mappings_are_listed_once() {
        let maps = "\
55d0a0000000-55d0a0001000 r--p 00000000 fe:01 123 /usr/bin/miral-shell
55d0a0001000-55d0a0002000 r-xp 00001000 fe:01 123 /usr/bin/miral-shell
7f0000000000-7f0000100000 r-xp 00000000 fe:01 456 /usr/lib/x86_64-linux-gnu/libmirserver.so.58
7f0000100000-7f0000200000 r-xp 00100000 fe:01 456 /usr/lib/x86_64-linux-gnu/libmirserver.so.58
7f0000300000-7f0000301000 rw-p 00000000 00:00 0 [heap]
7ffd00000000-7ffd00001000 r-xp 00000000 00:00 0 [vdso]
";
        assert_eq!(
            executable_paths(maps),
            [
                "/usr/bin/miral-shell",
                "/usr/lib/x86_64-linux-gnu/libmirserver.so.58"
            ]
        );
    }
}
