//! Child processes, started, held, signalled and reaped in one place: the only module of
//! latscope that forks.
//!
//! `std::process::Command` cannot do what the measuring commands need: its `spawn` returns
//! once the child has called `execve`, and latscope must know the child's pid *before* its first
//! instruction, to attach what it measures — performance counters that count from the exec
//! (`bench`), probes that bpftrace attaches to the pid (`live`). So [`Program::hold`] forks a
//! child that sets itself up ([`Setup`]: its process group, the signal it gets when latscope
//! dies, its signal mask and dispositions) and waits at a *gate*, a pipe it reads one byte from.
//! The parent attaches what it measures, then [`Held::release`] writes the byte: the child
//! places its descriptors and calls `execve`. If that fails, the child writes `errno` to a
//! second, close-on-exec pipe, which otherwise closes at the exec without data; so `release`
//! returns once the exec happened, with its error if it did not. A child whose parent goes away
//! without releasing it reads end-of-file at the gate and exits (status 127) without running.
//!
//! Between `fork` and `execve` the child of a multi-threaded process may only make
//! async-signal-safe calls: another thread may have held a lock (malloc's, stdio's, the
//! environment's) at the moment of the fork, and in the child nobody will ever release it. So
//! everything the child needs — the program's path, its argument and environment vectors, the
//! descriptors to place and room for their temporary copies — is built before the fork, and the
//! child (`child`) reads that memory and makes system calls, nothing else: no allocation, no
//! lock, no formatting, nothing that can panic, and it leaves only by `execve` or `_exit`.
//!
//! [`Program::spawner`] is the other way in, for a run with nothing to attach: `posix_spawn`,
//! a `vfork`-style clone in glibc whose cost does not grow with latscope's memory (a fork copies
//! the page tables), so that the wall time of a short command is the command's.
//!
//! A child that leads a process group of its own ([`Setup::own_group`]) is ended with its group
//! ([`kill_group`], [`reap_group`]), so that a shell's children go with the shell; with
//! [`reap_orphans_here`], orphans of a killed group come back to latscope to be reaped rather
//! than to init. The waits ([`wait`], [`try_wait`], [`wait_ended`], [`PidFd`]) are for the
//! callers' own children.
//!
//! Pipes are [`OwnedFd`] pairs made by [`pipe`], close-on-exec: a descriptor reaches a child
//! only by being placed ([`Setup::dup`]).

use std::ffi::{CStr, CString, OsStr};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// A process id (also a process group id, for a group leader).
pub type Pid = libc::pid_t;

/// A pipe, `(read end, write end)`, both close-on-exec.
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes; once it succeeded, both are
    // new, open, and owned by nobody else.
    unsafe {
        if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])))
    }
}

fn cstring(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "argument or path contains a NUL byte",
        )
    })
}

/// NULL-terminated pointers to `strings`, which must outlive them.
fn pointers(strings: &[CString]) -> Vec<*const libc::c_char> {
    let mut pointers: Vec<*const libc::c_char> = strings.iter().map(|s| s.as_ptr()).collect();
    pointers.push(std::ptr::null());
    pointers
}

unsafe extern "C" {
    /// The process environment, as `execve` takes it.
    static environ: *const *const libc::c_char;
}

/// The error for a command whose first word is the path of a directory (it holds a `/`), which
/// `execve` refuses with EACCES: "Permission denied" would send the user to the permissions
/// of what is no program at all.
pub fn directory_error(argv0: &str) -> Option<io::Error> {
    (argv0.contains('/') && Path::new(argv0).is_dir()).then(|| {
        io::Error::new(
            io::ErrorKind::IsADirectory,
            "it is a directory, not a program",
        )
    })
}

/// A program and its arguments (and, if set, its whole environment), converted to C strings
/// once, to be started any number of times.
#[derive(Debug)]
pub struct Program {
    path: CString,
    /// look `path` up on `PATH` when it has no `/` (`execvpe`, `posix_spawnp`)
    search: bool,
    args: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    /// `NAME=value` entries and their pointers; `None`: latscope's environment at the start
    env: Option<(Vec<CString>, Vec<*const libc::c_char>)>,
}

impl Program {
    /// `argv`, whose first word names the program, looked up on `PATH` unless it holds a `/`
    /// (as a shell does: `execvpe`).
    pub fn search(argv: &[impl AsRef<OsStr>]) -> io::Result<Program> {
        let first = argv
            .first()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "empty command"))?;
        let mut program = Program::at(first.as_ref(), argv)?;
        program.search = true;
        Ok(program)
    }

    /// The program at `path`, run with `argv` (`argv[0]` is what it sees as its name).
    pub fn at(path: impl AsRef<OsStr>, argv: &[impl AsRef<OsStr>]) -> io::Result<Program> {
        let args = argv
            .iter()
            .map(|a| cstring(a.as_ref().as_bytes()))
            .collect::<io::Result<Vec<_>>>()?;
        Ok(Program {
            path: cstring(path.as_ref().as_bytes())?,
            search: false,
            argv: pointers(&args),
            args,
            env: None,
        })
    }

    /// The same program, run with exactly these `NAME=value` entries as its environment.
    pub fn with_environment(
        mut self,
        entries: impl IntoIterator<Item = impl AsRef<[u8]>>,
    ) -> io::Result<Program> {
        let strings = entries
            .into_iter()
            .map(|e| cstring(e.as_ref()))
            .collect::<io::Result<Vec<_>>>()?;
        let pointers = pointers(&strings);
        self.env = Some((strings, pointers));
        Ok(self)
    }

    /// The program's name as given (`argv[0]`), for messages.
    pub fn name(&self) -> String {
        self.args
            .first()
            .map(|a| a.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// The environment a start passes: the program's own, else latscope's at that moment.
    fn envp(&self) -> *const *const libc::c_char {
        match &self.env {
            Some((_, pointers)) => pointers.as_ptr(),
            // SAFETY: reads the pointer libc keeps in `environ`, a NULL-terminated vector that
            // stays valid: latscope never changes its environment (no set_var, no setenv).
            None => unsafe { environ },
        }
    }

    /// Forks a child that sets itself up by `setup` and waits at the gate until
    /// [`Held::release`] (see the module documentation).
    pub fn hold(&self, setup: &Setup<'_>) -> io::Result<Held> {
        // Everything the child uses is made here, before the fork.
        let floor = setup
            .fds
            .iter()
            .map(|p| p.target)
            .max()
            .map_or(0, |t| t + 1);
        let mut copies: Vec<RawFd> = vec![-1; setup.fds.len()];
        let envp = self.envp();
        let (gate_read, gate_write) = pipe()?;
        let (errors_read, errors_write) = pipe()?;
        let ends = Ends {
            gate: gate_read.as_raw_fd(),
            gate_write: gate_write.as_raw_fd(),
            errors_read: errors_read.as_raw_fd(),
            errors: errors_write.as_raw_fd(),
        };
        // SAFETY: the child runs only `child`, which makes async-signal-safe calls on memory
        // prepared above (`self`, `setup`, `copies`, `envp`, `ends`) and leaves by execve or
        // _exit: it allocates nothing, takes no lock and cannot panic or return, so no lock
        // held by another thread at the fork, and no state copied half-written, is ever used.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        if pid == 0 {
            // SAFETY: in the child just forked, with the arguments `child` documents: `envp`
            // is NULL-terminated and lives in `self` or libc, `copies` has one slot per
            // placed descriptor, and `floor` is above every target.
            unsafe { child(self, setup, envp, &mut copies, floor, ends) }
        }
        if setup.own_group {
            // SAFETY: setpgid on our own child, which makes the same call: whichever runs
            // first makes the group, which so exists before the parent relies on it.
            unsafe { libc::setpgid(pid, pid) };
        }
        drop((gate_read, errors_write));
        Ok(Held {
            pid,
            gate: File::from(gate_write),
            errors: File::from(errors_read),
        })
    }

    /// Prepares `posix_spawn` of this program with `setup` (only a process group and
    /// descriptors: a spawned child cannot wait at a gate nor set a death signal); a file to
    /// open that cannot be opened fails the spawn.
    pub fn spawner(&self, setup: &Setup<'_>) -> io::Result<Spawner<'_>> {
        if setup.death_signal.is_some() || setup.clear_mask || !setup.signals.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "posix_spawn: only a process group and descriptors",
            ));
        }
        let actions = FileActions::new()?;
        for place in &setup.fds {
            match place.source {
                Source::Open(path, flags) => actions.open(place.target, path, flags)?,
                Source::Fd(fd) => actions.dup2(fd.as_raw_fd(), place.target)?,
            }
        }
        let attributes = Attributes::new(setup.own_group)?;
        Ok(Spawner {
            program: self,
            actions,
            attributes,
        })
    }
}

/// What a child does to itself before its program runs.
#[derive(Debug, Default)]
pub struct Setup<'a> {
    own_group: bool,
    death_signal: Option<libc::c_int>,
    clear_mask: bool,
    signals: Vec<(libc::c_int, libc::sighandler_t)>,
    fds: Vec<Place<'a>>,
}

/// A descriptor the child gets at `target`.
#[derive(Debug)]
struct Place<'a> {
    target: RawFd,
    source: Source<'a>,
}

#[derive(Debug)]
enum Source<'a> {
    /// a file the child opens, with these flags (mode 0644 when created)
    Open(&'a CStr, libc::c_int),
    /// a descriptor of latscope's
    Fd(BorrowedFd<'a>),
}

impl<'a> Setup<'a> {
    /// Nothing changed: the child inherits latscope's group, mask and dispositions.
    pub fn new() -> Setup<'a> {
        Setup::default()
    }

    /// The child leads a new process group (its pgid is its pid), which [`kill_group`] ends.
    pub fn own_group(&mut self) -> &mut Self {
        self.own_group = true;
        self
    }

    /// The child gets `signal` when the thread that started it ends (`PR_SET_PDEATHSIG`:
    /// it dies with latscope); kept across `execve`.
    pub fn death_signal(&mut self, signal: libc::c_int) -> &mut Self {
        self.death_signal = Some(signal);
        self
    }

    /// The child blocks no signal (latscope's threads may block some).
    pub fn clear_signal_mask(&mut self) -> &mut Self {
        self.clear_mask = true;
        self
    }

    /// The child takes `signal`'s default action (Rust ignores SIGPIPE, and an ignored signal
    /// stays ignored across `execve`).
    pub fn default_signal(&mut self, signal: libc::c_int) -> &mut Self {
        self.signals.push((signal, libc::SIG_DFL));
        self
    }

    /// The child ignores `signal` (across `execve` too).
    pub fn ignore_signal(&mut self, signal: libc::c_int) -> &mut Self {
        self.signals.push((signal, libc::SIG_IGN));
        self
    }

    /// The child opens `path` with `flags` onto descriptor `target` once released; a held child
    /// that cannot open it keeps what `target` was.
    pub fn open(&mut self, target: RawFd, path: &'a CStr, flags: libc::c_int) -> &mut Self {
        self.fds.push(Place {
            target,
            source: Source::Open(path, flags),
        });
        self
    }

    /// The child gets a copy of `fd` as descriptor `target` (not close-on-exec). Every
    /// placement is made from the descriptors as they were before any: one target cannot
    /// clobber another's source.
    pub fn dup(&mut self, fd: BorrowedFd<'a>, target: RawFd) -> &mut Self {
        self.fds.push(Place {
            target,
            source: Source::Fd(fd),
        });
        self
    }
}

/// The raw descriptors of the two pipes, for the child.
#[derive(Debug, Clone, Copy)]
struct Ends {
    gate: RawFd,
    gate_write: RawFd,
    errors_read: RawFd,
    errors: RawFd,
}

/// The child between `fork` and `execve`.
///
/// # Safety
///
/// Only in a child just forked by [`Program::hold`]: `envp` is NULL-terminated and lives as
/// long as `program`; `copies` has one slot per entry of `setup.fds`; `floor` is above every
/// target; `ends` are the pipes' descriptors. It makes only async-signal-safe calls (setpgid,
/// prctl, sigemptyset, sigprocmask, signal, close, read, open, fcntl, dup2, execve or
/// execvpe, write, _exit) and reads and writes only that memory: no allocation, no lock;
/// nothing in it can panic (no indexing, no arithmetic that can overflow, no formatting).
/// glibc's `execvpe` builds its candidate paths in a stack buffer and reads `PATH` without a
/// lock (`posix_spawnp` runs the same search in a `vfork` child, which must not allocate).
unsafe fn child(
    program: &Program,
    setup: &Setup<'_>,
    envp: *const *const libc::c_char,
    copies: &mut [RawFd],
    floor: RawFd,
    ends: Ends,
) -> ! {
    // SAFETY: see the function's safety section; every pointer passed is to memory prepared
    // before the fork or on this stack frame.
    unsafe {
        if setup.own_group {
            libc::setpgid(0, 0);
        }
        if let Some(signal) = setup.death_signal {
            libc::prctl(libc::PR_SET_PDEATHSIG, signal);
        }
        if setup.clear_mask {
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        }
        for &(signal, action) in &setup.signals {
            libc::signal(signal, action);
        }
        // The gate's write end is then latscope's alone: end-of-file there means latscope
        // went away, or gave up the child, without releasing it.
        libc::close(ends.gate_write);
        libc::close(ends.errors_read);
        let mut byte = 0u8;
        loop {
            let n = libc::read(ends.gate, (&mut byte as *mut u8).cast(), 1);
            if n == 1 {
                break;
            }
            if n == 0 || *libc::__errno_location() != libc::EINTR {
                // Never released: do not run.
                libc::_exit(127);
            }
        }
        // The error pipe goes above every target too, where no placement can replace it.
        let mut errors = ends.errors;
        if errors < floor {
            let moved = libc::fcntl(errors, libc::F_DUPFD_CLOEXEC, floor);
            if moved >= 0 {
                errors = moved;
            }
        }
        // Every descriptor source is copied above every target first (close-on-exec copies):
        // no placement can then clobber a source that another still needs.
        for (place, copy) in setup.fds.iter().zip(copies.iter_mut()) {
            if let Source::Fd(fd) = place.source {
                *copy = libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, floor);
                if *copy < 0 {
                    fail(errors);
                }
            }
        }
        // Then each is placed, in order. A file is opened at the lowest free number, so it is
        // nobody's source; a file that cannot be opened leaves its target as it was.
        for (place, &copy) in setup.fds.iter().zip(copies.iter()) {
            match place.source {
                Source::Fd(_) => {
                    if libc::dup2(copy, place.target) < 0 {
                        fail(errors);
                    }
                }
                Source::Open(path, flags) => {
                    let opened = libc::open(path.as_ptr(), flags | libc::O_CLOEXEC, 0o644);
                    if opened == place.target {
                        libc::fcntl(opened, libc::F_SETFD, 0);
                    } else if opened >= 0 {
                        libc::dup2(opened, place.target);
                        libc::close(opened);
                    }
                }
            }
        }
        if program.search {
            libc::execvpe(program.path.as_ptr(), program.argv.as_ptr(), envp);
        } else {
            libc::execve(program.path.as_ptr(), program.argv.as_ptr(), envp);
        }
        fail(errors)
    }
}

/// Reports `errno` to the parent and exits (in the child: async-signal-safe calls only).
///
/// # Safety
///
/// Only in a forked child, on the error pipe's write end.
unsafe fn fail(errors: RawFd) -> ! {
    // SAFETY: errno is this thread's; four bytes from this stack frame; then _exit.
    unsafe {
        let errno = *libc::__errno_location();
        libc::write(
            errors,
            (&errno as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>(),
        );
        libc::_exit(127)
    }
}

/// A forked child waiting at its gate, before `execve`. Dropped without [`Held::release`], the
/// child exits without running (unreaped until someone waits for it).
#[derive(Debug)]
pub struct Held {
    pid: Pid,
    gate: File,
    errors: File,
}

impl Held {
    /// Its pid (its process group too, with [`Setup::own_group`]).
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// Lets the child run; returns once it has called `execve`. If that failed, the child has
    /// exited and been reaped, and the error is the exec's.
    pub fn release(self) -> io::Result<Pid> {
        let Held {
            pid,
            mut gate,
            mut errors,
        } = self;
        // A failed write (the child is gone) shows below as a close without data.
        let _ = gate.write_all(&[1]);
        let mut errno = [0u8; std::mem::size_of::<libc::c_int>()];
        if errors.read_exact(&mut errno).is_ok() {
            let _ = wait(pid);
            return Err(io::Error::from_raw_os_error(libc::c_int::from_ne_bytes(
                errno,
            )));
        }
        Ok(pid)
    }

    /// Ends the child without running its program: closing the gate makes it exit; reaps it.
    pub fn abandon(self) {
        let pid = self.pid;
        drop(self);
        let _ = wait(pid);
    }
}

/// A `posix_spawn` prepared by [`Program::spawner`]: [`Spawner::spawn`] is the spawn alone,
/// so a caller can time it.
pub struct Spawner<'p> {
    program: &'p Program,
    actions: FileActions,
    attributes: Attributes,
}

impl Spawner<'_> {
    /// Starts the program; its pid, or the error of the spawn (the exec's included).
    pub fn spawn(&self) -> io::Result<Pid> {
        let mut pid: Pid = 0;
        let (path, argv) = (self.program.path.as_ptr(), self.program.argv.as_ptr());
        let envp = self.program.envp();
        let spawn = match self.program.search {
            true => libc::posix_spawnp,
            false => libc::posix_spawn,
        };
        // SAFETY: `pid` is a valid out-pointer; path, argv and envp are NUL-terminated C
        // strings and NULL-terminated vectors that live in `self.program` (or libc's
        // `environ`); `actions` and `attributes` were initialised by `spawner`.
        let rc = unsafe {
            spawn(
                &mut pid,
                path,
                &self.actions.0,
                &self.attributes.0,
                argv.cast(),
                envp.cast(),
            )
        };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(pid)
    }
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

/// `posix_spawn_file_actions_t`, destroyed on drop.
struct FileActions(libc::posix_spawn_file_actions_t);

impl FileActions {
    fn new() -> io::Result<FileActions> {
        // SAFETY: an all-zero posix_spawn_file_actions_t (plain data) is a valid value to pass
        // to init, which initialises it through the valid pointer; it is used only if init
        // succeeded.
        unsafe {
            let mut raw: libc::posix_spawn_file_actions_t = std::mem::zeroed();
            check(libc::posix_spawn_file_actions_init(&mut raw))?;
            Ok(FileActions(raw))
        }
    }

    fn raw(&self) -> *mut libc::posix_spawn_file_actions_t {
        (&self.0 as *const libc::posix_spawn_file_actions_t).cast_mut()
    }

    fn open(&self, fd: RawFd, path: &CStr, flags: libc::c_int) -> io::Result<()> {
        // SAFETY: initialised actions; glibc copies the path, which need not outlive the call.
        check(unsafe {
            libc::posix_spawn_file_actions_addopen(self.raw(), fd, path.as_ptr(), flags, 0o644)
        })
    }

    fn dup2(&self, from: RawFd, to: RawFd) -> io::Result<()> {
        // SAFETY: initialised actions; descriptors are plain integers here.
        check(unsafe { libc::posix_spawn_file_actions_adddup2(self.raw(), from, to) })
    }
}

impl Drop for FileActions {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`, destroyed once.
        unsafe { libc::posix_spawn_file_actions_destroy(&mut self.0) };
    }
}

/// `posix_spawnattr_t`, destroyed on drop.
struct Attributes(libc::posix_spawnattr_t);

impl Attributes {
    /// Default attributes; with `own_group`, the child leads a new process group.
    fn new(own_group: bool) -> io::Result<Attributes> {
        // SAFETY: an all-zero posix_spawnattr_t (plain data) is a valid value to pass to init,
        // which initialises it through the valid pointer; it is used only if init succeeded.
        let mut attributes = unsafe {
            let mut raw: libc::posix_spawnattr_t = std::mem::zeroed();
            check(libc::posix_spawnattr_init(&mut raw))?;
            Attributes(raw)
        };
        if own_group {
            // SAFETY: initialised attributes; plain integer arguments.
            unsafe {
                check(libc::posix_spawnattr_setpgroup(&mut attributes.0, 0))?;
                check(libc::posix_spawnattr_setflags(
                    &mut attributes.0,
                    libc::POSIX_SPAWN_SETPGROUP as libc::c_short,
                ))?;
            }
        }
        Ok(attributes)
    }
}

impl Drop for Attributes {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`, destroyed once.
        unsafe { libc::posix_spawnattr_destroy(&mut self.0) };
    }
}

/// Makes this process the reaper of its descendants' orphans (`PR_SET_CHILD_SUBREAPER`), so
/// that the children of a killed process group are reaped here rather than by init.
pub fn reap_orphans_here() {
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
}

/// Sends `signal` to process `pid`.
pub fn kill(pid: Pid, signal: libc::c_int) -> io::Result<()> {
    // SAFETY: kill(2) takes integers and touches no memory of ours.
    if unsafe { libc::kill(pid, signal) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sends `signal` to every process of group `pgid` (fails with ESRCH once none is left).
pub fn kill_group(pgid: Pid, signal: libc::c_int) -> io::Result<()> {
    kill(-pgid, signal)
}

/// Waits for child `pid` to end and reaps it: its wait status and resource usage.
pub fn wait(pid: Pid) -> io::Result<(libc::c_int, libc::rusage)> {
    let mut status = 0;
    // SAFETY: rusage is plain old data, for the kernel to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: valid pointers to status and usage.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            return Ok((status, usage));
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Reaps child `pid` if it has ended, without waiting: its wait status, or `None` while it
/// runs.
pub fn try_wait(pid: Pid) -> io::Result<Option<libc::c_int>> {
    let mut status = 0;
    // SAFETY: a valid pointer to status.
    let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    match r {
        0 => Ok(None),
        r if r == pid => Ok(Some(status)),
        _ => Err(io::Error::last_os_error()),
    }
}

/// Reaps, without waiting, the members of group `pgid` that have exited and are our children.
pub fn sweep_group(pgid: Pid) {
    let mut status = 0;
    // SAFETY: waitpid on our own children of group `pgid`, non-blocking; a valid pointer.
    while unsafe { libc::waitpid(-pgid, &mut status, libc::WNOHANG) } > 0 {}
}

/// Reaps, without waiting, every child of this process that has exited; how many.
///
/// Only for a process that has no child of its own being waited for at that moment (a
/// benchmark between two runs): it takes any child's status. A subreaper
/// ([`reap_orphans_here`]) adopts the background children that a run left behind; their own
/// group's sweep ([`sweep_group`]) finds them still running, so each becomes a zombie here once
/// it ends, and, unreaped, they piled up until a process limit refused the next run.
pub fn reap_exited_children() -> usize {
    let mut status = 0;
    let mut reaped = 0;
    // SAFETY: waitpid on any child, non-blocking; a valid pointer to status.
    while unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) } > 0 {
        reaped += 1;
    }
    reaped
}

/// Kills what is left of process group `pgid` (its leader reaped) and reaps those of its
/// members that are our children (orphans come to us as a subreaper), for at most a second.
pub fn reap_group(pgid: Pid) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    // The group cannot be reused while a member lives; once none does, the kill fails with
    // ESRCH and the loop ends.
    while kill_group(pgid, libc::SIGKILL).is_ok() {
        sweep_group(pgid);
        if std::time::Instant::now() >= deadline {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    sweep_group(pgid);
}

/// Blocks until child `pid` has ended, leaving it unreaped (`waitid` with `WNOWAIT`): its pid
/// and group cannot be reused until it is reaped.
pub fn wait_ended(pid: Pid) -> io::Result<()> {
    loop {
        // SAFETY: siginfo_t is plain old data (all-zero is a valid value) for the kernel to
        // fill in through the valid pointer.
        let r = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if r == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Whether child `pid` has not ended (without reaping it).
pub fn running(pid: Pid) -> bool {
    // SAFETY: siginfo_t is plain old data (all-zero is a valid value) for the kernel to fill
    // in through the valid pointer; WNOWAIT leaves the child as it is. si_pid reads the
    // union's pid, which waitid sets for a child that ended and leaves 0 (as zeroed) for one
    // that has not.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let r = libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        );
        r == 0 && info.si_pid() == 0
    }
}

/// Whether `fd` becomes readable within `timeout_ms` (-1: no limit).
pub fn readable(fd: BorrowedFd<'_>, timeout_ms: libc::c_int) -> io::Result<bool> {
    let mut poll = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, for the length given.
    let ready = unsafe { libc::poll(&mut poll, 1, timeout_ms) };
    if ready < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(ready > 0)
}

/// A pidfd (Linux 5.3+): readable once the process ends, reaped or not.
#[derive(Debug)]
pub struct PidFd(OwnedFd);

impl PidFd {
    /// A pidfd of `pid`, or `None` where the kernel has none.
    pub fn open(pid: Pid) -> Option<PidFd> {
        // SAFETY: pidfd_open(2) takes a pid and flags and returns a new descriptor, owned by
        // nobody else, when it succeeds.
        unsafe {
            let fd = libc::syscall(libc::SYS_pidfd_open, pid, 0);
            (fd >= 0).then(|| PidFd(OwnedFd::from_raw_fd(fd as RawFd)))
        }
    }

    /// Whether the process ends within `timeout_ms` (-1: no limit).
    pub fn wait(&self, timeout_ms: libc::c_int) -> io::Result<bool> {
        readable(std::os::fd::AsFd::as_fd(&self.0), timeout_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    fn sh(script: &str) -> Program {
        Program::search(&["sh", "-c", script]).unwrap()
    }

    #[test]
    fn a_held_child_runs_only_once_released_and_gets_its_descriptors() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let out_c = CString::new(out.as_os_str().as_bytes()).unwrap();
        let (read, write) = pipe().unwrap();
        let program = sh("echo $$ >&5; echo ran");
        let mut setup = Setup::new();
        setup.own_group().dup(write.as_fd(), 5).open(
            1,
            &out_c,
            libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
        );
        let held = program.hold(&setup).unwrap();
        drop(write);
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(!out.exists(), "ran before release");
        let pid = held.release().unwrap();
        let (status, _) = wait(pid).unwrap();
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "ran\n");
        let mut said = String::new();
        File::from(read).read_to_string(&mut said).unwrap();
        assert_eq!(said.trim(), pid.to_string());
    }

    #[test]
    fn placements_are_made_from_the_descriptors_as_they_were() {
        let (a_read, a_write) = pipe().unwrap();
        let (b_read, b_write) = pipe().unwrap();
        // The two write ends swap numbers: neither placement may clobber the other's source.
        let (a, b) = (a_write.as_raw_fd(), b_write.as_raw_fd());
        let script = format!("echo A >&{b}; echo B >&{a}");
        let program = sh(&script);
        let mut setup = Setup::new();
        setup.dup(a_write.as_fd(), b).dup(b_write.as_fd(), a);
        let pid = program.hold(&setup).unwrap().release().unwrap();
        drop((a_write, b_write));
        wait(pid).unwrap();
        let mut text = String::new();
        File::from(a_read).read_to_string(&mut text).unwrap();
        assert_eq!(text, "A\n");
        text.clear();
        File::from(b_read).read_to_string(&mut text).unwrap();
        assert_eq!(text, "B\n");
    }

    #[test]
    fn a_failed_exec_is_the_release_error_and_the_child_is_reaped() {
        let program = Program::search(&["/nonexistent/latscope-test"]).unwrap();
        let held = program.hold(&Setup::new()).unwrap();
        let pid = held.pid();
        let e = held.release().unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOENT), "{e}");
        assert!(try_wait(pid).is_err(), "not reaped");
    }

    #[test]
    fn an_abandoned_child_never_runs_and_is_reaped() {
        let dir = tempfile::tempdir().unwrap();
        let mark = dir.path().join("ran");
        let program = sh(&format!("touch '{}'", mark.display()));
        let held = program.hold(&Setup::new()).unwrap();
        let pid = held.pid();
        held.abandon();
        assert!(!mark.exists());
        assert!(try_wait(pid).is_err(), "not reaped");
    }

    #[test]
    fn a_spawned_group_is_killed_whole_and_reaped() {
        let program = sh("sleep 30 & sleep 30; wait");
        let mut setup = Setup::new();
        setup.own_group();
        let pid = program.spawner(&setup).unwrap().spawn().unwrap();
        let pidfd = PidFd::open(pid);
        assert!(running(pid));
        kill_group(pid, libc::SIGKILL).unwrap();
        if let Some(p) = pidfd {
            assert!(p.wait(5000).unwrap());
        }
        wait_ended(pid).unwrap();
        let (status, _) = wait(pid).unwrap();
        assert!(libc::WIFSIGNALED(status));
        reap_group(pid);
    }

    #[test]
    fn a_spawner_refuses_what_posix_spawn_cannot_do() {
        let mut setup = Setup::new();
        setup.death_signal(libc::SIGKILL);
        let e = sh("true").spawner(&setup).err().unwrap();
        assert_eq!(e.kind(), io::ErrorKind::Unsupported);
    }

    #[test]
    fn a_nul_byte_is_refused() {
        let e = Program::search(&["a\0b"]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }
}
