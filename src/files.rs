//! Files and directories that latscope creates in shared places, such as the temporary
//! directory, safely.
//!
//! Everyone can create entries in `/tmp`. A fixed or guessable name there
//! (`latscope-demo-report.html`, `latscope-dbus-PID-TIME`) can be taken first by another user:
//! a symlink planted under it makes a writer that follows it overwrite the link's target (with
//! root's rights, when root runs latscope); a file or directory planted under it makes the
//! next user's run fail with "permission denied", or hands them a directory someone else
//! controls. So nothing latscope creates there has a name chosen in advance: every file and
//! directory here gets a new random name and is created exclusively (`O_CREAT|O_EXCL`,
//! `mkdir`), which fails on any existing entry, symlink or not, instead of opening it; the
//! creation is then retried under another name. Files are the user's alone (0600), and so are
//! directories (0700).
//!
//! The files a user names (`-o`, `--save`, `--report`) are written by [`output`], one policy
//! for every command.

pub mod output;

pub use output::{Output, OutputError};

use std::fs::{File, Permissions};
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The largest saved result read (1 GiB): its JSON takes a few times its size once parsed,
/// and nothing latscope writes comes near it (a spans result with a million kept spans is
/// about 100 MiB).
pub const MAX_RESULT_BYTES: u64 = 1 << 30;

/// Reads a saved result: from a regular file or a pipe only, and at most `limit` bytes. A
/// character device (`/dev/zero`), a socket or a directory is refused before reading; a pipe
/// that goes on past the limit is refused once it passes it, so memory follows what was
/// read, never more than the limit.
pub fn read_result(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::FileTypeExt;
    let file = File::open(path)?;
    let meta = file.metadata()?;
    let t = meta.file_type();
    let too_big = |size: String| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{size}: a result is at most {} MiB (latscope never writes one this large)",
                limit >> 20
            ),
        )
    };
    if t.is_file() {
        if meta.len() > limit {
            return Err(too_big(format!("{} bytes", meta.len())));
        }
    } else if !t.is_fifo() {
        let what = if t.is_dir() {
            "Is a directory"
        } else if t.is_char_device() {
            "a character device"
        } else if t.is_block_device() {
            "a block device"
        } else {
            "a socket"
        };
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{what}, not a result: results are read from regular files and pipes"),
        ));
    }
    let mut bytes = Vec::new();
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_big("more than that".into()));
    }
    Ok(bytes)
}

/// Creates a new file in `dir` named `PREFIX` + six random characters + `SUFFIX`, readable and
/// writable by the owner only (0600), and returns it open for writing with its path.
///
/// The file is created with `O_EXCL`: it is never an existing file, and never the target of a
/// symlink planted in `dir`. It is kept: dropping the [`File`] closes it, the file stays.
pub fn create_unique(dir: &Path, prefix: &str, suffix: &str) -> io::Result<(File, PathBuf)> {
    let file = tempfile::Builder::new()
        .prefix(prefix)
        .suffix(suffix)
        .permissions(Permissions::from_mode(0o600))
        .tempfile_in(dir)?;
    Ok(file.keep()?)
}

/// A directory of this user's alone, removed with everything in it when dropped.
#[derive(Debug)]
pub struct PrivateDir(tempfile::TempDir);

impl PrivateDir {
    /// The directory.
    pub fn path(&self) -> &Path {
        self.0.path()
    }
}

/// Creates a new directory in the temporary directory ([`std::env::temp_dir`]) named `PREFIX`
/// + six random characters, accessible by the owner only (0700), as `mkdtemp` does.
///
/// `mkdir` fails on an existing entry, so the directory is always a fresh, empty one made here,
/// never one planted under a guessed name. It is removed, with what was put in it, when the
/// returned [`PrivateDir`] is dropped.
pub fn private_dir(prefix: &str) -> io::Result<PrivateDir> {
    tempfile::Builder::new()
        .prefix(prefix)
        .permissions(Permissions::from_mode(0o700))
        .tempdir_in(std::env::temp_dir())
        .map(PrivateDir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::MetadataExt;

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path).unwrap().mode() & 0o7777
    }

    #[test]
    fn read_result_takes_files_and_pipes_up_to_the_limit_and_refuses_devices_and_directories() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("doc.json");
        std::fs::write(&file, "0123456789").unwrap();
        assert_eq!(read_result(&file, 10).unwrap(), b"0123456789");
        let e = read_result(&file, 9).unwrap_err().to_string();
        assert!(e.contains("10 bytes") && e.contains("at most"), "{e}");
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo with a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        for (size, ok) in [(1000, true), (5000, false)] {
            let writer = {
                let fifo = fifo.clone();
                std::thread::spawn(move || {
                    let _ = std::fs::write(fifo, vec![b'x'; size]);
                })
            };
            let read = read_result(&fifo, 1000);
            assert_eq!(read.is_ok(), ok, "{size}: {read:?}");
            drop(read);
            writer.join().unwrap();
        }
        for path in [Path::new("/dev/zero"), dir.path()] {
            let e = read_result(path, 1 << 20).unwrap_err().to_string();
            assert!(e.contains("not a result"), "{}: {e}", path.display());
        }
    }

    #[test]
    fn create_unique_makes_a_new_private_file_each_time() {
        let dir = tempfile::tempdir().unwrap();
        let (mut first, first_path) = create_unique(dir.path(), "latscope-test-", ".html").unwrap();
        let (_, second_path) = create_unique(dir.path(), "latscope-test-", ".html").unwrap();
        assert_ne!(first_path, second_path);
        for path in [&first_path, &second_path] {
            assert_eq!(path.parent(), Some(dir.path()));
            let name = path.file_name().unwrap().to_str().unwrap();
            assert!(
                name.starts_with("latscope-test-") && name.ends_with(".html"),
                "{name}"
            );
            assert_eq!(
                name.len(),
                "latscope-test-".len() + 6 + ".html".len(),
                "{name}"
            );
            assert_eq!(mode(path), 0o600, "{}", path.display());
            assert_eq!(std::fs::metadata(path).unwrap().len(), 0);
        }
        first.write_all(b"written").unwrap();
        drop(first);
        assert_eq!(std::fs::read(&first_path).unwrap(), b"written");
        assert_eq!(std::fs::read(&second_path).unwrap(), b"");
    }

    #[test]
    fn create_unique_leaves_planted_files_and_symlinks_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        // Every name of the dir's current contents is taken; whatever name comes up, an
        // existing entry is never opened.
        let planted_link = dir.path().join("latscope-test-planted.html");
        std::os::unix::fs::symlink(&victim, &planted_link).unwrap();
        let planted_file = dir.path().join("latscope-test-file00.html");
        std::fs::write(&planted_file, "theirs").unwrap();
        let mut created = Vec::new();
        for _ in 0..50 {
            let (mut file, path) = create_unique(dir.path(), "latscope-test-", ".html").unwrap();
            file.write_all(b"ours").unwrap();
            assert!(!created.contains(&path));
            assert_ne!(path, planted_link);
            assert_ne!(path, planted_file);
            assert!(
                std::fs::symlink_metadata(&path)
                    .unwrap()
                    .file_type()
                    .is_file()
            );
            created.push(path);
        }
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert_eq!(std::fs::read_link(&planted_link).unwrap(), victim);
        assert_eq!(std::fs::read_to_string(&planted_file).unwrap(), "theirs");
    }

    #[test]
    fn create_unique_fails_in_a_missing_directory_rather_than_elsewhere() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing");
        assert!(create_unique(&missing, "latscope-test-", ".html").is_err());
        assert!(!missing.exists());
    }

    #[test]
    fn private_dir_is_fresh_0700_and_removed_with_its_contents_on_drop() {
        let first = private_dir("latscope-test-").unwrap();
        let second = private_dir("latscope-test-").unwrap();
        assert_ne!(first.path(), second.path());
        let path = first.path().to_path_buf();
        assert_eq!(path.parent(), Some(std::env::temp_dir().as_path()));
        assert!(
            path.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("latscope-test-")
        );
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert!(meta.file_type().is_dir());
        assert_eq!(meta.mode() & 0o7777, 0o700);
        // SAFETY: geteuid has no preconditions.
        assert_eq!(meta.uid(), unsafe { libc::geteuid() });
        assert_eq!(std::fs::read_dir(&path).unwrap().count(), 0);
        std::fs::write(path.join("bus.conf"), "x").unwrap();
        drop(first);
        assert!(std::fs::symlink_metadata(&path).is_err(), "still there");
        assert!(second.path().is_dir());
    }
}
