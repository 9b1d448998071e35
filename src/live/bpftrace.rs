//! Starting bpftrace on a generated program: from a private file, tied to latscope's life.
//!
//! The program goes in a file, not after `-e`: Linux caps one argument at 128 KiB
//! (`MAX_ARG_STRLEN`), which a program of about a hundred spans passes, and `execve` then fails
//! with "Argument list too long". The file is created new (`O_EXCL`, mode 0600) in a directory
//! of latscope's own (mode 0700), so that nobody else can read the program, nor swap in another
//! for root's bpftrace to run; both go once bpftrace has attached its probes (having read the
//! program), or when the [`Bpftrace`] is dropped.
//!
//! bpftrace is forked through [`crate::process`] with a death signal (`PR_SET_PDEATHSIG`,
//! SIGKILL): a latscope killed outright (`kill -9`) runs no clean-up, and bpftrace stayed
//! attached, its probes costing every traced process, until its next print found the pipe
//! closed — up to a whole `--interval` later. SIGKILL rather than SIGTERM: nobody reads the
//! final snapshot a graceful exit would print, and the kernel detaches the probes as it closes
//! the dead process's descriptors.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use crate::process::{self, Pid, Program, Setup};

/// A running bpftrace: its pid and the read ends of its standard output and error. Dropped
/// unreaped, it is killed and reaped.
#[derive(Debug)]
pub struct Bpftrace {
    pid: Pid,
    reaped: bool,
    /// bpftrace's standard output (its JSON lines), for the caller to take
    pub stdout: Option<File>,
    /// bpftrace's standard error, for the caller to take
    pub stderr: Option<File>,
    /// holds the program file; removed with it on drop or [`Bpftrace::remove_program`]
    program: Option<tempfile::TempDir>,
}

/// The program written to a new file, mode 0600, in a new directory, mode 0700; the file's
/// path and the directory (removed when dropped).
pub fn program_file(program: &str) -> io::Result<(PathBuf, tempfile::TempDir)> {
    use std::os::unix::fs::PermissionsExt;
    // The directory is made with mode 0700 (not the umask's default); the file is opened
    // O_CREAT|O_EXCL with mode 0600.
    let dir = tempfile::Builder::new()
        .prefix("latscope-live-")
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()?;
    let path = dir.path().join("program.bt");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)?;
    file.write_all(program.as_bytes())?;
    Ok((path, dir))
}

/// bpftrace's arguments (after its own name): JSON output, the program read from `file`.
pub fn arguments(file: &Path) -> Vec<OsString> {
    vec!["-f".into(), "json".into(), file.into()]
}

impl Bpftrace {
    /// Starts `bpftrace` on `program`: standard input `/dev/null`, standard output and error
    /// piped to latscope, every signal unblocked and SIGPIPE at its default action (as
    /// `std::process::Command` gives a child).
    ///
    /// Call it from a thread that lives as long as bpftrace should: the kernel sends the death
    /// signal when the *thread* that forked exits, not the process. latscope starts bpftrace
    /// from its main thread.
    pub fn start(bpftrace: &Path, program: &str) -> io::Result<Bpftrace> {
        let (file, dir) = program_file(program)?;
        let mut argv: Vec<OsString> = vec![bpftrace.into()];
        argv.extend(arguments(&file));
        let program = Program::at(bpftrace, &argv)?;
        let null = File::open("/dev/null")?;
        let (stdout, stdout_write) = process::pipe()?;
        let (stderr, stderr_write) = process::pipe()?;
        let mut setup = Setup::new();
        setup
            .death_signal(libc::SIGKILL)
            .clear_signal_mask()
            .default_signal(libc::SIGPIPE)
            .dup(null.as_fd(), 0)
            .dup(stdout_write.as_fd(), 1)
            .dup(stderr_write.as_fd(), 2);
        let pid = program.hold(&setup)?.release()?;
        Ok(Bpftrace {
            pid,
            reaped: false,
            stdout: Some(File::from(stdout)),
            stderr: Some(File::from(stderr)),
            program: Some(dir),
        })
    }

    /// Removes the program's file and directory, once bpftrace has read it: then even a
    /// latscope killed outright leaves no file behind.
    pub fn remove_program(&mut self) {
        self.program = None;
    }

    /// Its pid.
    pub fn id(&self) -> u32 {
        self.pid as u32
    }

    /// Kills it (SIGKILL); an error once it has been reaped or is gone.
    pub fn kill(&self) -> io::Result<()> {
        if self.reaped {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        process::kill(self.pid, libc::SIGKILL)
    }

    /// Waits for it to end and reaps it.
    pub fn wait(&mut self) -> io::Result<ExitStatus> {
        let (status, _) = process::wait(self.pid)?;
        self.reaped = true;
        Ok(ExitStatus::from_raw(status))
    }
}

impl Drop for Bpftrace {
    fn drop(&mut self) {
        if !self.reaped {
            let _ = self.kill();
            let _ = self.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_program_is_a_private_file_removed_with_its_directory() {
        let program = "BEGIN { exit(); }\n".repeat(20_000);
        let (path, dir) = program_file(&program).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(dir.path()), 0o700);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), program);
        let dir_path = dir.path().to_path_buf();
        drop(dir);
        assert!(!dir_path.exists());
    }

    #[test]
    fn the_program_is_never_an_argument_however_long() {
        let program = "x".repeat(200 * 1024);
        let (path, _dir) = program_file(&program).unwrap();
        let args = arguments(&path);
        assert_eq!(args, ["-f", "json", path.to_str().unwrap()]);
        assert!(!args.iter().any(|a| a.len() > 4096));
    }

    #[test]
    fn a_started_program_reads_its_file_and_its_output_comes_back() {
        // A script stands in for bpftrace: it prints the file its arguments name.
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("fake-bpftrace");
        std::fs::write(&fake, "#!/bin/sh\nshift 2\ncat \"$1\"\necho oops >&2\n").unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let program = "y".repeat(200 * 1024);
        let mut b = Bpftrace::start(&fake, &program).unwrap();
        let mut out = String::new();
        io::Read::read_to_string(&mut b.stdout.take().unwrap(), &mut out).unwrap();
        let mut err = String::new();
        io::Read::read_to_string(&mut b.stderr.take().unwrap(), &mut err).unwrap();
        assert!(b.wait().unwrap().success());
        assert_eq!(out, program);
        assert_eq!(err, "oops\n");
        assert!(b.kill().is_err(), "killed after being reaped");
    }

    #[test]
    fn it_is_killed_when_the_thread_that_started_it_ends() {
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("fake-bpftrace");
        std::fs::write(
            &fake,
            "#!/bin/sh
exec sleep 30
",
        )
        .unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let started = std::time::Instant::now();
        let mut b = std::thread::spawn(move || Bpftrace::start(&fake, "").unwrap())
            .join()
            .unwrap();
        let status = b.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status}");
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
    }
}
