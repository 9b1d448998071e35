//! Files in shared places (issue 11): what latscope creates in the temporary directory is never
//! an entry someone else planted there first. The demo's HTML report is a new file under a
//! random name, not `latscope-demo-report.html` (whose planted symlink made root overwrite the
//! link's target, and whose root-owned copy made the demo fail for everyone else); the private
//! D-Bus daemon's directory is a fresh 0700 one, gone when the bus stops.

use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::util::{self, stderr};

/// The name the demo used to write its report to, in the temporary directory.
const OLD_NAME: &str = "latscope-demo-report.html";
/// `nobody`
const NOBODY: u32 = 65534;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// `latscope demo --no-ipc` with `TMPDIR=tmp`, as `uid` if given (root only).
fn demo(tmp: &Path, uid: Option<u32>) -> Output {
    let mut command = util::latscope();
    command
        .args(["demo", "--no-ipc", "--no-x11", "--no-wayland-lab"])
        .env("TMPDIR", tmp);
    if let Some(uid) = uid {
        command.uid(uid).gid(uid);
    }
    command.output().expect("run latscope demo")
}

/// The report the demo says it wrote, checked: a new regular file directly in `tmp`, named
/// `latscope-demo-XXXXXX.html`, 0600, owned by `uid`, holding an HTML page.
fn written_report(out: &Output, tmp: &Path, uid: u32) -> PathBuf {
    let err = stderr(out);
    assert!(out.status.success(), "the demo failed: {err}");
    let lines: Vec<&str> = err
        .lines()
        .filter_map(|l| l.strip_prefix("latscope: report written to "))
        .collect();
    let [path] = lines[..] else {
        panic!("expected one 'latscope: report written to PATH' line: {err}");
    };
    let path = PathBuf::from(path);
    assert_eq!(path.parent(), Some(tmp), "{}", path.display());
    let name = path.file_name().unwrap().to_str().unwrap();
    assert!(
        name.starts_with("latscope-demo-")
            && name.ends_with(".html")
            && name.len() == "latscope-demo-XXXXXX.html".len(),
        "{name}"
    );
    let meta = fs::symlink_metadata(&path).unwrap();
    assert!(meta.file_type().is_file(), "{}", path.display());
    assert_eq!(meta.mode() & 0o7777, 0o600, "{}", path.display());
    assert_eq!(meta.uid(), uid, "{}", path.display());
    let page = fs::read_to_string(&path).unwrap();
    assert!(
        page.starts_with("<!DOCTYPE html>"),
        "{}",
        page.chars().take(80).collect::<String>()
    );
    path
}

#[test]
fn the_demo_never_follows_a_planted_symlink() {
    let tmp = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let victim = util::write(elsewhere.path(), "victim", "precious\n");
    let planted = tmp.path().join(OLD_NAME);
    std::os::unix::fs::symlink(&victim, &planted).unwrap();

    let out = demo(tmp.path(), None);

    assert_eq!(fs::read_to_string(&victim).unwrap(), "precious\n");
    assert_eq!(fs::read_link(&planted).unwrap(), victim);
    // SAFETY: geteuid has no preconditions.
    let report = written_report(&out, tmp.path(), unsafe { libc::geteuid() });
    assert_ne!(report, planted);
    // The report and the planted link: nothing else was written.
    assert_eq!(fs::read_dir(tmp.path()).unwrap().count(), 2);
}

#[test]
fn the_demo_writes_a_new_report_each_run_and_the_one_asked_for_with_report() {
    let tmp = tempfile::tempdir().unwrap();
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let first = written_report(&demo(tmp.path(), None), tmp.path(), me);
    let second = written_report(&demo(tmp.path(), None), tmp.path(), me);
    assert_ne!(first, second);

    let chosen = tmp.path().join("mine.html");
    let out = util::latscope()
        .args([
            "demo",
            "--no-ipc",
            "--no-x11",
            "--report",
            chosen.to_str().unwrap(),
        ])
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("latscope: report written to {}", chosen.display())),
        "{}",
        stderr(&out)
    );
    assert!(
        fs::read_to_string(&chosen)
            .unwrap()
            .starts_with("<!DOCTYPE html>")
    );
    assert_eq!(fs::read_dir(tmp.path()).unwrap().count(), 3);
}

#[test]
fn the_demo_leaves_no_empty_report_when_it_writes_none() {
    let tmp = tempfile::tempdir().unwrap();
    let out = util::latscope()
        .args([
            "demo",
            "--no-ipc",
            "--no-x11",
            "--no-wayland-lab",
            "--format",
            "csv",
        ])
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("report written"), "{}", stderr(&out));
    assert_eq!(fs::read_dir(tmp.path()).unwrap().count(), 0);
}

/// A directory like `/tmp`: everyone may create entries (sticky, 1777), reachable by everyone.
fn shared_tmp(parent: &Path) -> PathBuf {
    fs::set_permissions(parent, fs::Permissions::from_mode(0o755)).unwrap();
    let tmp = parent.join("tmp");
    fs::create_dir(&tmp).unwrap();
    fs::set_permissions(&tmp, fs::Permissions::from_mode(0o1777)).unwrap();
    tmp
}

#[test]
fn the_demo_works_where_another_user_planted_entries_under_the_old_name() {
    if !is_root() {
        eprintln!("skipping: planting entries owned by another user needs root");
        return;
    }
    let parent = tempfile::tempdir().unwrap();
    let tmp = shared_tmp(parent.path());
    // nobody's directory under the old name: writing the old name failed even for root
    let planted = tmp.join(OLD_NAME);
    fs::create_dir(&planted).unwrap();
    std::os::unix::fs::chown(&planted, Some(NOBODY), Some(NOBODY)).unwrap();
    let theirs = util::write(&tmp, "latscope-demo-theirs.html", "theirs");
    std::os::unix::fs::chown(&theirs, Some(NOBODY), Some(NOBODY)).unwrap();

    let report = written_report(&demo(&tmp, None), &tmp, 0);

    assert_ne!(report, theirs);
    assert!(fs::symlink_metadata(&planted).unwrap().is_dir());
    assert_eq!(fs::read_dir(&planted).unwrap().count(), 0);
    assert_eq!(fs::read_to_string(&theirs).unwrap(), "theirs");
}

#[test]
fn the_demo_works_for_another_user_after_root_ran_it() {
    if !is_root() {
        eprintln!("skipping: running the demo as another user needs root");
        return;
    }
    let parent = tempfile::tempdir().unwrap();
    let tmp = shared_tmp(parent.path());
    // What root's run of the old demo left: its report under the fixed name, root's, 0644.
    let old = util::write(&tmp, OLD_NAME, "root's report");
    fs::set_permissions(&old, fs::Permissions::from_mode(0o644)).unwrap();

    let roots = written_report(&demo(&tmp, None), &tmp, 0);
    let nobodys = written_report(&demo(&tmp, Some(NOBODY)), &tmp, NOBODY);

    assert_ne!(roots, nobodys);
    assert_eq!(fs::read_to_string(&old).unwrap(), "root's report");
}

/// Whether `dbus-daemon` is on PATH; when it is not, a note, or a failure when it must be
/// (LATSCOPE_REQUIRE_STACK).
fn dbus_daemon_available() -> bool {
    let have = latscope::lab::ipc::transport::dbus::find_daemon().is_some();
    if !have && std::env::var_os("LATSCOPE_REQUIRE_STACK").is_some() {
        panic!("dbus-daemon is missing and LATSCOPE_REQUIRE_STACK is set");
    }
    if !have {
        eprintln!("skipping: dbus-daemon is not installed (apt-get install dbus-daemon)");
    }
    have
}

/// The directory of the socket in a bus address `unix:path=DIR/dbus-XXXX,guid=...`.
fn socket_dir(address: &str) -> PathBuf {
    let path = address
        .split([':', ','])
        .find_map(|part| part.strip_prefix("path="))
        .unwrap_or_else(|| panic!("no socket path in the bus address {address}"));
    Path::new(path).parent().unwrap().to_path_buf()
}

#[test]
fn the_dbus_directory_is_fresh_private_and_gone_when_the_bus_stops() {
    if !dbus_daemon_available() {
        return;
    }
    let bus = latscope::lab::ipc::transport::dbus::Bus::start().unwrap();
    let other = latscope::lab::ipc::transport::dbus::Bus::start().unwrap();
    let dir = socket_dir(bus.address());
    assert_ne!(dir, socket_dir(other.address()));
    assert_eq!(dir.parent(), Some(std::env::temp_dir().as_path()));
    let name = dir.file_name().unwrap().to_str().unwrap();
    assert!(name.starts_with("latscope-dbus-"), "{name}");
    let meta = fs::symlink_metadata(&dir).unwrap();
    assert!(meta.file_type().is_dir());
    assert_eq!(meta.mode() & 0o7777, 0o700, "{}", dir.display());
    // SAFETY: geteuid has no preconditions.
    assert_eq!(meta.uid(), unsafe { libc::geteuid() });
    assert!(dir.join("bus.conf").is_file());

    drop(bus);
    assert!(
        fs::symlink_metadata(&dir).is_err(),
        "{} is left",
        dir.display()
    );
    assert!(socket_dir(other.address()).is_dir());
}

#[test]
fn lab_ipc_over_dbus_leaves_nothing_in_the_temporary_directory() {
    if !dbus_daemon_available() {
        return;
    }
    let _heavy = util::heavy();
    let tmp = tempfile::tempdir().unwrap();
    let out = util::latscope()
        .args([
            "lab",
            "ipc",
            "--transport",
            "dbus",
            "--count",
            "10",
            "--peer",
            "thread",
        ])
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let left: Vec<_> = fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// The commands that write a file, `OUT` standing for the path they are given.
fn writers() -> Vec<Vec<String>> {
    let doc = util::root().join("tests/data/docs/spans-live.json");
    let doc = doc.to_str().unwrap();
    let log = util::data("weston-simple-shm.client.log");
    let trace = util::root().join("tests/data/traces/chromium-startup.truncated.json");
    let rows: [&[&str]; 9] = [
        &["merge", doc, doc, "-o", "OUT"],
        &["export", doc, "--to", "hlog", "-o", "OUT"],
        &["export", doc, "--to", "parquet", "-o", "OUT"],
        &["report", doc, "-o", "OUT"],
        &["plot", doc, "-o", "OUT"],
        &["bench", "--runs", "2", "true", "--export-json", "OUT"],
        &["wayland", log.to_str().unwrap(), "--report", "OUT"],
        &["spans", trace.to_str().unwrap(), "--report", "OUT"],
        &[
            "lab",
            "ipc",
            "--transport",
            "pipe",
            "--count",
            "50",
            "--save",
            "OUT",
        ],
    ];
    rows.iter()
        .map(|r| r.iter().map(|a| a.to_string()).collect())
        .collect()
}

/// Runs `args` with `OUT` replaced by `out`, under umask 027, as root's test sees it.
fn write_to(args: &[String], out: &Path) -> Output {
    let args: Vec<String> = args
        .iter()
        .map(|a| a.replace("OUT", out.to_str().unwrap()))
        .collect();
    let mut command = util::latscope();
    command.args(&args).stdin(std::process::Stdio::null());
    // SAFETY: umask(2) is async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            libc::umask(0o027);
            Ok(())
        });
    }
    command.output().unwrap()
}

fn mknod(path: &Path, kind: libc::mode_t, major: u32, minor: u32) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: mknod with a valid NUL-terminated path.
    let made = unsafe { libc::mknod(c.as_ptr(), kind | 0o666, libc::makedev(major, minor)) };
    assert_eq!(made, 0, "mknod {}", path.display());
}

/// The command wrote something it calls its output, and exited 0.
fn wrote(args: &[String], out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{args:?} into {what}: {}",
        stderr(out)
    );
}

#[test]
fn every_writer_replaces_a_file_keeping_its_mode_and_owner_and_a_new_file_follows_the_umask() {
    for args in writers() {
        let dir = tempfile::tempdir().unwrap();
        let new = dir.path().join("new");
        wrote(&args, &write_to(&args, &new), "a new file");
        let meta = fs::symlink_metadata(&new).unwrap();
        assert!(meta.is_file(), "{args:?}");
        assert_eq!(meta.mode() & 0o7777, 0o640, "{args:?}: 0666 less umask 027");
        assert!(meta.len() > 0, "{args:?}");

        let old = util::write(dir.path(), "old", "old");
        fs::set_permissions(&old, fs::Permissions::from_mode(0o604)).unwrap();
        if is_root() {
            std::os::unix::fs::chown(&old, Some(NOBODY), Some(NOBODY)).unwrap();
        }
        wrote(&args, &write_to(&args, &old), "a file");
        let meta = fs::symlink_metadata(&old).unwrap();
        assert!(meta.is_file() && meta.len() > 3, "{args:?}");
        assert_eq!(meta.mode() & 0o7777, 0o604, "{args:?}: the mode is kept");
        if is_root() {
            assert_eq!((meta.uid(), meta.gid()), (NOBODY, NOBODY), "{args:?}");
        }
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 2, "{args:?}: a temporary file left behind");
    }
}

#[test]
fn every_writer_replaces_a_planted_link_and_never_writes_its_target() {
    for args in writers() {
        let dir = tempfile::tempdir().unwrap();
        let victim = util::write(dir.path(), "victim", "precious\n");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        wrote(&args, &write_to(&args, &link), "a link");
        assert_eq!(
            fs::read_to_string(&victim).unwrap(),
            "precious\n",
            "{args:?}"
        );
        let meta = fs::symlink_metadata(&link).unwrap();
        assert!(meta.is_file() && meta.len() > 0, "{args:?}");
    }
}

#[test]
fn every_writer_writes_a_fifo_and_standard_output_in_place() {
    for args in writers() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo with a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || fs::read(fifo).unwrap())
        };
        wrote(&args, &write_to(&args, &fifo), "a FIFO");
        assert!(
            !reader.join().unwrap().is_empty(),
            "{args:?}: nothing came through"
        );
        let meta = fs::symlink_metadata(&fifo).unwrap();
        assert!(
            meta.file_type().is_fifo(),
            "{args:?}: the FIFO was replaced"
        );

        // A link to this process's standard output, as /dev/stdout is.
        let link = dir.path().join("stdout");
        std::os::unix::fs::symlink("/proc/self/fd/1", &link).unwrap();
        for path in [Path::new("/dev/stdout"), &link] {
            let out = write_to(&args, path);
            wrote(&args, &out, "standard output");
            assert!(
                !out.stdout.is_empty(),
                "{args:?}: nothing on {}",
                path.display()
            );
        }
        assert_eq!(fs::read_link(&link).unwrap(), Path::new("/proc/self/fd/1"));
        assert_eq!(
            fs::read_link("/dev/stdout").unwrap(),
            Path::new("/proc/self/fd/1")
        );
    }
}

#[test]
fn every_writer_writes_a_character_device_in_place_and_refuses_a_block_device_or_directory() {
    if !is_root() {
        return; // mknod needs root
    }
    for args in writers() {
        let dir = tempfile::tempdir().unwrap();
        // Nodes of their own, in a private directory: /dev/null and /dev/full stay out of it.
        let null = dir.path().join("null");
        mknod(&null, libc::S_IFCHR, 1, 3);
        fs::set_permissions(&null, fs::Permissions::from_mode(0o666)).unwrap();
        wrote(&args, &write_to(&args, &null), "a character device");
        let meta = fs::symlink_metadata(&null).unwrap();
        assert!(meta.file_type().is_char_device(), "{args:?}: replaced");
        assert_eq!(meta.mode() & 0o7777, 0o666, "{args:?}");
        assert_eq!(meta.rdev(), libc::makedev(1, 3), "{args:?}");

        let full = dir.path().join("full");
        mknod(&full, libc::S_IFCHR, 1, 7);
        let out = write_to(&args, &full);
        assert_eq!(out.status.code(), Some(1), "{args:?} into a full device");
        assert!(stderr(&out).contains("No space left"), "{}", stderr(&out));
        // The output is blamed, never the input (parquet's writer wraps the device's error).
        let blamed = format!("cannot write {}: No space left", full.display());
        assert!(stderr(&out).contains(&blamed), "{args:?}: {}", stderr(&out));
        assert!(
            fs::symlink_metadata(&full)
                .unwrap()
                .file_type()
                .is_char_device()
        );

        let block = dir.path().join("block");
        mknod(&block, libc::S_IFBLK, 7, 0);
        let sub = dir.path().join("sub");
        fs::create_dir(&sub).unwrap();
        let missing = dir.path().join("missing/x");
        for (path, message) in [
            (&block, "a block device"),
            (&sub, "a directory"),
            (&missing, "cannot create a file in"),
        ] {
            let out = write_to(&args, path);
            assert_eq!(out.status.code(), Some(1), "{args:?} into {message}");
            assert!(stderr(&out).contains(message), "{args:?}: {}", stderr(&out));
            // Refused before any work: nothing was measured or printed.
            assert!(out.stdout.is_empty(), "{args:?}: {}", util::stdout(&out));
        }
        assert!(
            fs::symlink_metadata(&block)
                .unwrap()
                .file_type()
                .is_block_device()
        );
        assert_eq!(fs::read_dir(&sub).unwrap().count(), 0, "{args:?}");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 4, "{args:?}");
    }
}

/// A 4 KiB tmpfs mounted on a fresh directory, unmounted on drop (root only).
struct FullDisk {
    dir: tempfile::TempDir,
}

impl FullDisk {
    fn mount() -> Option<FullDisk> {
        let dir = tempfile::tempdir().unwrap();
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=4k,mode=0700", "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        mounted.then_some(FullDisk { dir })
    }
}

impl Drop for FullDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(self.dir.path())
            .status();
    }
}

#[test]
fn every_writer_on_a_full_disk_fails_and_leaves_the_old_file_and_no_temporary_file() {
    if !is_root() {
        return; // mounting a tmpfs needs root
    }
    let Some(disk) = FullDisk::mount() else {
        assert!(
            std::env::var_os("LATSCOPE_REQUIRE_STACK").is_none(),
            "cannot mount a tmpfs"
        );
        return;
    };
    // The old file takes the file system's only page: nothing more fits.
    let old = disk.dir.path().join("result");
    fs::write(&old, "old").unwrap();
    for args in writers() {
        let out = write_to(&args, &old);
        assert_eq!(out.status.code(), Some(1), "{args:?} on a full disk");
        assert!(
            stderr(&out).contains("No space left"),
            "{args:?}: {}",
            stderr(&out)
        );
        assert_eq!(fs::read_to_string(&old).unwrap(), "old", "{args:?}");
        let entries: Vec<_> = fs::read_dir(disk.dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(entries, ["result"], "{args:?} left a temporary file");
    }
}

#[test]
fn a_full_standard_output_is_named_standard_output_in_the_error() {
    let full = || {
        fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap()
    };
    let trace = util::root().join("tests/data/traces/calls.strace.txt");
    let doc = util::root().join("tests/data/docs/spans-live.json");
    let cases: [(&[&str], &str); 2] = [
        (
            &["spans", trace.to_str().unwrap()],
            "writing standard output: No space left",
        ),
        (
            &["export", doc.to_str().unwrap(), "--to", "hlog", "-o", "-"],
            "cannot write standard output (-): No space left",
        ),
    ];
    for (args, said) in cases {
        let out = util::latscope().args(args).stdout(full()).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(stderr(&out).contains(said), "{args:?}: {}", stderr(&out));
    }
}
