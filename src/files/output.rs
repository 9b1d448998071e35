//! One writer for every output file, deciding by what the path is.
//!
//! Every command that writes a file (`-o`, `--save`, `--report`, `--export-*`) goes through
//! [`Output`], so one policy holds everywhere, and it holds as root, where a wrong choice
//! damages the system:
//!
//! - **missing, or a regular file**: a new file is written beside it, flushed, synced and
//!   renamed over it. A reader never sees half a document, a full disk leaves the old file
//!   untouched, and the replaced file keeps its mode (and, as root, its owner); a new file gets
//!   0666 less the umask, as `>` in a shell gives.
//! - **a symlink to a regular file (or to nothing)**: the link is replaced by the file; what it
//!   points to is never written (a link planted under a name root is going to write must not
//!   make root overwrite its target).
//! - **a FIFO, a socket, a character device** (`/dev/null`, a terminal, a named pipe), directly
//!   or through a link: written in place, never replaced. Renaming over `/dev/null` would turn
//!   it into root's private regular file.
//! - **`-`, `/dev/stdout`, `/dev/stderr`, `/dev/fd/N`, `/proc/self/fd/N`**: this process's own
//!   descriptor, written as it is (a pipe, a terminal, or a file the shell opened, appended to
//!   if the shell opened it so). A closed pipe (`| head`) is not an error.
//! - **a directory or a block device**: refused.
//!
//! [`Output::check`] decides before any work (a run is never lost to a path that cannot be
//! written), and probes a replaced file's directory by creating and removing a file in it.
//! [`Output::write`] then writes; a path that changed kind in between is refused rather than
//! followed. A temporary file is registered while it is written, so that a signal ending the
//! process removes it ([`remove_pending`]) instead of leaving `.latscope-*.tmp` behind.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Why an output path cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The path is a directory.
    #[error("{}: a directory, not a file: give a file name", .0.display())]
    Directory(PathBuf),
    /// The path is a block device.
    #[error("{}: a block device: latscope never writes one", .0.display())]
    BlockDevice(PathBuf),
    /// The directory that would hold the file does not take a new file.
    #[error("{}: cannot create a file in {}: {source}", path.display(), dir.display())]
    NoNewFile {
        /// the output path
        path: PathBuf,
        /// its directory
        dir: PathBuf,
        /// why
        source: io::Error,
    },
    /// The path could not be examined, opened or written.
    #[error("cannot write {}: {source}", shown(path))]
    Write {
        /// the output path
        path: PathBuf,
        /// why
        source: io::Error,
    },
    /// The path is no longer what [`Output::check`] found.
    #[error("{}: changed since it was checked (now {now}): not written", path.display())]
    Changed {
        /// the output path
        path: PathBuf,
        /// what it is now
        now: &'static str,
    },
}

/// How an output path is written, decided by [`Output::check`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One of this process's descriptors (`-` is 1): written as it is.
    Descriptor(i32),
    /// A regular file, a link, or nothing yet: replaced through a new file renamed over it.
    Replace,
    /// A FIFO or character device (possibly through a link): opened and written in place.
    InPlace,
    /// A Unix socket: connected to and written.
    Socket,
}

/// An output path, checked; see the module documentation.
#[derive(Debug, Clone)]
pub struct Output {
    path: PathBuf,
    kind: Kind,
    /// mode, owner and group of the regular file being replaced
    replaced: Option<(u32, u32, u32)>,
}

/// The stream an output is written through.
pub enum Sink {
    /// A buffered file: the temporary file of a replacement, a device or FIFO, a descriptor.
    File(BufWriter<File>),
    /// A connected Unix socket.
    Socket(BufWriter<std::os::unix::net::UnixStream>),
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sink::File(w) => w.write(buf),
            Sink::Socket(w) => w.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::File(w) => w.flush(),
            Sink::Socket(w) => w.flush(),
        }
    }
}

/// What a file type is called in messages.
fn type_name(t: std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_symlink() {
        "a symlink"
    } else {
        "a regular file"
    }
}

/// The descriptor a path names directly: `-`, `/dev/stdout`, `/dev/stderr`, `/dev/fd/N`,
/// `/proc/self/fd/N`.
fn descriptor(path: &Path) -> Option<i32> {
    let text = path.to_str()?;
    match text {
        "-" | "/dev/stdout" => Some(1),
        "/dev/stderr" => Some(2),
        _ => ["/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/"]
            .iter()
            .find_map(|p| text.strip_prefix(p))
            .and_then(|n| n.parse().ok()),
    }
}

/// An output as a message names it: `-` and `/dev/stdout` are standard output, as the
/// user knows them (a shell's `> /dev/full` never appears on the command line).
fn shown(path: &Path) -> String {
    match descriptor(path) {
        Some(1) => format!("standard output ({})", path.display()),
        Some(2) => format!("standard error ({})", path.display()),
        _ => path.display().to_string(),
    }
}

/// This process's umask, from `/proc/self/status` (reading it with umask(2) would change it
/// for a moment under the other threads); 022 where that line is missing.
fn umask() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Umask:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .unwrap_or(0o022)
}

/// The directory a replaced file is written in.
fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

impl Output {
    /// Decides how `path` is written, before any work; refuses a directory, a block device, and
    /// a file whose directory does not take a new file.
    pub fn check(path: &Path) -> Result<Output, OutputError> {
        let output = |kind, replaced| Output {
            path: path.to_path_buf(),
            kind,
            replaced,
        };
        if let Some(fd) = descriptor(path) {
            // Named for what it is: a descriptor that is not open fails here, not after the run.
            // SAFETY: fcntl(F_GETFD) only queries the descriptor.
            if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
                return Err(OutputError::Write {
                    path: path.to_path_buf(),
                    source: io::Error::last_os_error(),
                });
            }
            return Ok(output(Kind::Descriptor(fd), None));
        }
        let write_error = |source| OutputError::Write {
            path: path.to_path_buf(),
            source,
        };
        let meta = match std::fs::symlink_metadata(path) {
            Ok(meta) => Some(meta),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(write_error(e)),
        };
        let Some(meta) = meta else {
            probe_directory(path)?;
            return Ok(output(Kind::Replace, None));
        };
        let followed = if meta.file_type().is_symlink() {
            match std::fs::metadata(path) {
                // A link to nothing: replaced.
                Err(e) if e.kind() == io::ErrorKind::NotFound => None,
                Err(e) => return Err(write_error(e)),
                Ok(target) => Some(target),
            }
        } else {
            Some(meta.clone())
        };
        let Some(target) = followed else {
            probe_directory(path)?;
            return Ok(output(Kind::Replace, None));
        };
        let t = target.file_type();
        if t.is_dir() {
            Err(OutputError::Directory(path.to_path_buf()))
        } else if t.is_block_device() {
            Err(OutputError::BlockDevice(path.to_path_buf()))
        } else if t.is_fifo() || t.is_char_device() {
            Ok(output(Kind::InPlace, None))
        } else if t.is_socket() {
            Ok(output(Kind::Socket, None))
        } else {
            probe_directory(path)?;
            // A replaced link leaves a new file; a replaced file keeps its mode and owner.
            let replaced = (!meta.file_type().is_symlink())
                .then(|| (meta.mode() & 0o7777, meta.uid(), meta.gid()));
            Ok(output(Kind::Replace, replaced))
        }
    }

    /// The path as given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How it is written.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Whether this is standard output (`-` or `/dev/stdout`).
    pub fn is_stdout(&self) -> bool {
        self.kind == Kind::Descriptor(1)
    }

    /// Writes `bytes`. A descriptor whose reader is gone (`latscope … -o - | head`) is not an
    /// error: the reader has what it wanted.
    pub fn write(&self, bytes: &[u8]) -> Result<(), OutputError> {
        match self.write_with(|w| w.write_all(bytes)) {
            Err(OutputError::Write { source, .. })
                if matches!(self.kind, Kind::Descriptor(_))
                    && source.kind() == io::ErrorKind::BrokenPipe =>
            {
                Ok(())
            }
            other => other,
        }
    }

    /// Writes what `fill` writes into the sink it is given; for a replaced file, nothing
    /// replaces it unless `fill` and every flush succeed.
    pub fn write_with<T>(
        &self,
        fill: impl FnOnce(&mut Sink) -> io::Result<T>,
    ) -> Result<T, OutputError> {
        let error = |source| OutputError::Write {
            path: self.path.clone(),
            source,
        };
        match self.kind {
            Kind::Replace => self.replace(fill),
            Kind::Descriptor(fd) => {
                // SAFETY: F_DUPFD_CLOEXEC returns a new descriptor (or -1) that we then own.
                let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
                if dup < 0 {
                    return Err(error(io::Error::last_os_error()));
                }
                // SAFETY: `dup` is a fresh descriptor owned by nobody else.
                let file = File::from(unsafe { OwnedFd::from_raw_fd(dup) });
                let mut sink = Sink::File(BufWriter::new(file));
                fill(&mut sink)
                    .and_then(|v| sink.flush().map(|_| v))
                    .map_err(error)
            }
            Kind::InPlace => {
                let file = std::fs::OpenOptions::new()
                    .write(true)
                    .custom_flags(libc::O_NOCTTY | libc::O_CLOEXEC)
                    .open(&self.path)
                    .map_err(error)?;
                let now = file.metadata().map_err(error)?.file_type();
                if !(now.is_fifo() || now.is_char_device()) {
                    return Err(OutputError::Changed {
                        path: self.path.clone(),
                        now: type_name(now),
                    });
                }
                let mut sink = Sink::File(BufWriter::new(file));
                fill(&mut sink)
                    .and_then(|v| sink.flush().map(|_| v))
                    .map_err(error)
            }
            Kind::Socket => {
                let stream = std::os::unix::net::UnixStream::connect(&self.path).map_err(error)?;
                let mut sink = Sink::Socket(BufWriter::new(stream));
                fill(&mut sink)
                    .and_then(|v| sink.flush().map(|_| v))
                    .map_err(error)
            }
        }
    }

    /// A new file beside the path, filled, given its mode, synced and renamed over the path.
    fn replace<T>(&self, fill: impl FnOnce(&mut Sink) -> io::Result<T>) -> Result<T, OutputError> {
        let error = |source| OutputError::Write {
            path: self.path.clone(),
            source,
        };
        let dir = parent(&self.path);
        let (file, tmp) = create_beside(dir).map_err(|source| OutputError::NoNewFile {
            path: self.path.clone(),
            dir: dir.to_path_buf(),
            source,
        })?;
        track(&tmp);
        let written = (|| {
            let mut sink = Sink::File(BufWriter::new(file));
            let value = fill(&mut sink)?;
            let Sink::File(buffered) = sink else {
                unreachable!("a replacement is written through a file")
            };
            let file = buffered.into_inner().map_err(|e| e.into_error())?;
            let (mode, uid, gid) = self
                .replaced
                .unwrap_or((0o666 & !umask(), u32::MAX, u32::MAX));
            file.set_permissions(std::fs::Permissions::from_mode(mode))?;
            // SAFETY: geteuid has no preconditions.
            if self.replaced.is_some() && unsafe { libc::geteuid() } == 0 {
                std::os::unix::fs::fchown(&file, Some(uid), Some(gid))?;
                // chown clears set-user-ID and set-group-ID bits: set the mode again.
                file.set_permissions(std::fs::Permissions::from_mode(mode))?;
            }
            file.sync_all()?;
            // A path that became a directory meanwhile would take the file inside it.
            if std::fs::symlink_metadata(&self.path).is_ok_and(|now| now.is_dir()) {
                return Err(io::Error::other("it is a directory now"));
            }
            std::fs::rename(&tmp, &self.path)?;
            Ok(value)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        untrack(&tmp);
        written.map_err(error)
    }
}

/// Creates and removes a file in the directory that will hold `path`: a missing or read-only
/// directory is found before any work.
fn probe_directory(path: &Path) -> Result<(), OutputError> {
    let dir = parent(path);
    match create_beside(dir) {
        Ok((_, probe)) => {
            let _ = std::fs::remove_file(probe);
            Ok(())
        }
        Err(source) => Err(OutputError::NoNewFile {
            path: path.to_path_buf(),
            dir: dir.to_path_buf(),
            source,
        }),
    }
}

/// Temporary files being written, removed by [`remove_pending`] if a signal ends the process
/// before they are renamed.
static PENDING: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

fn track(tmp: &Path) {
    if let Ok(mut pending) = PENDING.lock() {
        pending.push(tmp.to_path_buf());
    }
}

fn untrack(tmp: &Path) {
    if let Ok(mut pending) = PENDING.lock() {
        pending.retain(|p| p != tmp);
    }
}

/// Removes the temporary files of writes still under way: for the thread that ends the process
/// after a signal (not for a signal handler: it takes a lock, briefly, and gives up if another
/// thread holds it for long).
pub fn remove_pending() {
    for _ in 0..100 {
        if let Ok(pending) = PENDING.try_lock() {
            for tmp in pending.iter() {
                let _ = std::fs::remove_file(tmp);
            }
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// A new file in `dir` (`.latscope-PID-N.tmp`), created `O_EXCL`, 0600, under another name
/// while the name is taken. Its own rather than [`super::create_unique`]: the error of a
/// missing or read-only directory stays the system's plain one, without a made-up path.
fn create_beside(dir: &Path) -> io::Result<(File, PathBuf)> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    for _ in 0..100 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let name = format!(".latscope-{}-{nanos:x}{n}.tmp", std::process::id());
        let path = dir.join(name);
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_CLOEXEC)
            .open(&path)
        {
            Ok(file) => return Ok((file, path)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other("no free temporary name"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path).unwrap().mode() & 0o7777
    }

    #[test]
    fn each_kind_of_path_is_written_its_own_way() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("file"), "old").unwrap();
        std::os::unix::fs::symlink(d.join("file"), d.join("link")).unwrap();
        std::os::unix::fs::symlink(d.join("nothing"), d.join("dangling")).unwrap();
        std::os::unix::fs::symlink("/dev/null", d.join("null-link")).unwrap();
        std::os::unix::fs::symlink(d, d.join("dir-link")).unwrap();
        let kind = |name: &str| Output::check(&d.join(name)).map(|o| o.kind());
        assert_eq!(kind("new").unwrap(), Kind::Replace);
        assert_eq!(kind("file").unwrap(), Kind::Replace);
        assert_eq!(kind("link").unwrap(), Kind::Replace);
        assert_eq!(kind("dangling").unwrap(), Kind::Replace);
        assert_eq!(kind("null-link").unwrap(), Kind::InPlace);
        assert!(matches!(kind("dir-link"), Err(OutputError::Directory(_))));
        assert!(matches!(kind("."), Err(OutputError::Directory(_))));
        let check = |p: &str| Output::check(Path::new(p)).map(|o| o.kind());
        assert_eq!(check("/dev/null").unwrap(), Kind::InPlace);
        assert_eq!(check("-").unwrap(), Kind::Descriptor(1));
        assert_eq!(check("/dev/stdout").unwrap(), Kind::Descriptor(1));
        assert_eq!(check("/dev/stderr").unwrap(), Kind::Descriptor(2));
        assert_eq!(check("/proc/self/fd/2").unwrap(), Kind::Descriptor(2));
        assert!(
            check("/dev/fd/999").is_err(),
            "a descriptor that is not open"
        );
        assert!(matches!(
            check("/no/such/dir/x"),
            Err(OutputError::NoNewFile { .. })
        ));
    }

    #[test]
    fn a_replaced_file_keeps_its_mode_and_a_new_one_gets_0666_less_the_umask() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("kept");
        std::fs::write(&file, "old").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
        Output::check(&file).unwrap().write(b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "new");
        assert_eq!(mode(&file), 0o640);
        let new = dir.path().join("new");
        Output::check(&new).unwrap().write(b"x").unwrap();
        assert_eq!(mode(&new), 0o666 & !umask());
        // Nothing else is left in the directory.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    #[test]
    fn a_link_is_replaced_and_its_target_never_written() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        Output::check(&link).unwrap().write(b"ours").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert!(std::fs::symlink_metadata(&link).unwrap().is_file());
        assert_eq!(std::fs::read_to_string(&link).unwrap(), "ours");
    }

    #[test]
    fn a_failed_write_leaves_the_old_file_and_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("kept");
        std::fs::write(&file, "old").unwrap();
        let out = Output::check(&file).unwrap();
        let result = out.write_with(|w| {
            w.write_all(b"half")?;
            Err::<(), _>(io::Error::other("disk full"))
        });
        assert!(result.unwrap_err().to_string().contains("disk full"));
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_file_being_written_is_removed_by_remove_pending_and_the_old_one_kept() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("kept");
        std::fs::write(&file, "old").unwrap();
        let out = Output::check(&file).unwrap();
        let mut during = 0;
        let _ = out.write_with(|w| {
            w.write_all(b"half")?;
            w.flush()?;
            during = std::fs::read_dir(dir.path()).unwrap().count();
            // What the signal watchdog does before it ends the process.
            remove_pending();
            Ok(())
        });
        assert_eq!(during, 2, "the temporary file beside the old one");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_fifo_is_written_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo with a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let out = Output::check(&fifo).unwrap();
        assert_eq!(out.kind(), Kind::InPlace);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).unwrap())
        };
        out.write(b"through the pipe").unwrap();
        assert_eq!(reader.join().unwrap(), b"through the pipe");
        assert!(
            std::fs::symlink_metadata(&fifo)
                .unwrap()
                .file_type()
                .is_fifo()
        );
    }

    #[test]
    fn a_unix_socket_is_connected_to_and_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let out = Output::check(&path).unwrap();
        assert_eq!(out.kind(), Kind::Socket);
        let reader = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut got = Vec::new();
            io::Read::read_to_end(&mut stream, &mut got).unwrap();
            got
        });
        out.write(b"to the socket").unwrap();
        assert_eq!(reader.join().unwrap(), b"to the socket");
    }
}
