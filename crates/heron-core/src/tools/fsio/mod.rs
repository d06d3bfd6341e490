//! The file system as the tools touch it: regular files only, opened where they were
//! resolved, read within a cap, written atomically. Invariants:
//!
//! - A path is opened one component at a time from `/`, every component with `O_NOFOLLOW`,
//!   so a directory swapped for a symlink after the path was resolved and checked is
//!   refused at open, not followed. Directories on the way are opened `O_PATH`: a lookup,
//!   not a read, so it works in a sandbox that may not list `/`. (`resolve_against` already
//!   followed every symlink it could, so a resolved path holds only those that loop, dangle
//!   or lead to something that is no file or directory; any other appeared in between.
//!   Each is refused, and told as what it is.)
//! - Only regular files are read or replaced. Files are opened `O_NONBLOCK`, so opening a
//!   FIFO never waits for a writer; a FIFO, socket or device is refused after `fstat`.
//! - A read stops one byte past its cap: the size is learnt by reading, never from
//!   metadata alone (`/dev/zero` and growing files report nothing useful).
//! - A write goes to a new file in the same directory, is flushed to disk, takes the old
//!   file's permissions and is renamed over the target, so a failure or a kill at any
//!   moment leaves the old content or the new, never part of either. A file with other
//!   hard links is replaced, not written through: its other names keep the old content.
//!   A file its permissions keep this user from writing is refused, although the rename
//!   would only need the directory's.
//!
//! Everything here blocks; callers run it on the blocking pool.
//!
//! [`read_capped`], [`write_atomic`] and their error are also the core's to clients that must
//! keep these rules outside the tools, through `crate::local`. Paths given here must already
//! be resolved and checked (`roots`); this module only opens them safely.

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Component, Path};

mod error;

pub use self::error::FileError;
pub(crate) use self::error::other_name_refusal;
use self::error::{io_error, link_or_file, regular};

fn c_name(name: &OsStr, path: &Path) -> Result<CString, FileError> {
    // A NUL is the caller's input, not a failure of the system: told as such, not as an I/O error.
    CString::new(name.as_bytes())
        .map_err(|_| FileError::NulByte(crate::tools::walk::shown_name(&path.display().to_string())))
}

/// `openat(dir, name, flags)` as an owned descriptor.
fn open_at(
    dir: &OwnedFd,
    name: &CString,
    flags: libc::c_int,
    mode: libc::mode_t,
) -> std::io::Result<OwnedFd> {
    // SAFETY: `dir` is an open descriptor and `name` a NUL-terminated string, both alive for
    // the call; the returned descriptor, when valid, is owned by nobody else.
    let fd = unsafe {
        libc::openat(dir.as_raw_fd(), name.as_ptr(), flags | libc::O_CLOEXEC, libc::c_uint::from(mode))
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by openat and is not owned elsewhere.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens the directory `dir` (absolute, resolved) one component at a time, refusing any
/// component that is a symlink.
fn open_dir(dir: &Path) -> Result<OwnedFd, FileError> {
    let root = CString::new("/").map_err(|_| FileError::Missing("/".into()))?;
    let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW;
    // SAFETY: a NUL-terminated literal path; the descriptor is owned by nobody else.
    let fd = unsafe { libc::open(root.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io_error(dir, &std::io::Error::last_os_error()));
    }
    // SAFETY: `fd` was just returned by open.
    let mut current = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut so_far = std::path::PathBuf::from("/");
    for component in dir.components() {
        match component {
            Component::RootDir => {}
            Component::Normal(name) => {
                let c = c_name(name, dir)?;
                so_far.push(name);
                current = open_at(&current, &c, flags, 0).map_err(|e| match e.raw_os_error() {
                    // The component, not the whole directory, is what the refusal names.
                    Some(libc::ENOTDIR) | Some(libc::ELOOP) => link_or_file(&so_far),
                    _ => io_error(dir, &e),
                })?;
            }
            // A resolved path has neither; one here is a caller's bug, refused.
            Component::CurDir | Component::ParentDir | Component::Prefix(_) => {
                return Err(FileError::Changed(dir.display().to_string()));
            }
        }
    }
    Ok(current)
}

/// Why opening `name` in `dir` for reading failed: a socket refuses the open itself
/// (`ENXIO`), so what is there is looked up, not opened, to say what it is.
fn open_error(dir: &OwnedFd, name: &CString, path: &Path, err: &std::io::Error) -> FileError {
    if err.raw_os_error() != Some(libc::ELOOP)
        && let Ok(fd) = open_at(dir, name, libc::O_PATH | libc::O_NOFOLLOW, 0)
        && let Ok(meta) = File::from(fd).metadata()
        && let Err(not_regular) = regular(path, &meta)
    {
        return not_regular;
    }
    io_error(path, err)
}

/// Fails with what `path` is when nothing usable is there: missing, a symlink loop or
/// dangling link, or a failure of the system. For the tools that walk a directory.
pub(crate) fn must_exist(path: &Path) -> Result<(), FileError> {
    match std::fs::metadata(path) {
        Ok(_) => Ok(()),
        Err(err) => Err(io_error(path, &err)),
    }
}

fn split(path: &Path) -> Result<(&Path, &OsStr), FileError> {
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => Ok((parent, name)),
        _ => Err(FileError::Directory(path.display().to_string())),
    }
}

/// Opens the regular file at `path` (absolute, resolved) for reading, confined as the module
/// says. `Ok(None)` when nothing is there.
pub(crate) fn open_regular(path: &Path) -> Result<Option<(File, std::fs::Metadata)>, FileError> {
    let (parent, name) = split(path)?;
    let dir = match open_dir(parent) {
        Ok(dir) => dir,
        Err(FileError::Missing(_)) => return Ok(None),
        Err(err) => return Err(err),
    };
    let name = c_name(name, path)?;
    let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY;
    let fd = match open_at(&dir, &name, flags, 0) {
        Ok(fd) => fd,
        Err(err) if err.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
        Err(err) => return Err(open_error(&dir, &name, path, &err)),
    };
    let file = File::from(fd);
    let meta = file.metadata().map_err(|e| io_error(path, &e))?;
    regular(path, &meta)?;
    Ok(Some((file, meta)))
}

/// Reads the regular file at `path` whole, at most `cap` bytes, unless `refuse` (shown the
/// opened file's metadata) says why not. `Ok(None)` when nothing is there.
pub fn read_capped(
    path: &Path,
    cap: u64,
    refuse: impl Fn(&std::fs::Metadata) -> Option<FileError>,
) -> Result<Option<Vec<u8>>, FileError> {
    let Some((file, meta)) = open_regular(path)? else { return Ok(None) };
    if let Some(refused) = refuse(&meta) {
        return Err(refused);
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len().min(cap)).unwrap_or(0));
    // One byte past the cap tells a file that is too large from one exactly at it.
    file.take(cap.saturating_add(1)).read_to_end(&mut bytes).map_err(|e| io_error(path, &e))?;
    if bytes.len() as u64 > cap {
        return Err(FileError::TooLarge { path: path.display().to_string(), cap });
    }
    Ok(Some(bytes))
}

/// What writing a file found there before.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Replaced {
    /// Other hard links the old file had (they keep the old content).
    pub other_links: u64,
}

/// Writes `bytes` to `path` (absolute, resolved) atomically, creating missing parent
/// directories; an existing target must be a regular file, and keeps its permissions.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<Replaced, FileError> {
    let (parent, name) = split(path)?;
    create_dirs(parent)?;
    let dir = open_dir(parent)?;
    let target = c_name(name, path)?;
    // What is there now: a regular file (its mode is kept) or nothing.
    let existing = match open_at(&dir, &target, libc::O_PATH | libc::O_NOFOLLOW, 0) {
        Ok(fd) => {
            let meta = File::from(fd).metadata().map_err(|e| io_error(path, &e))?;
            regular(path, &meta)?;
            if !writable_at(&dir, &target) {
                return Err(FileError::ReadOnly(path.display().to_string()));
            }
            Some(meta)
        }
        Err(err) if err.raw_os_error() == Some(libc::ENOENT) => None,
        Err(err) => return Err(io_error(path, &err)),
    };
    let temp_name = format!(".{}.heron-{}.tmp", name.to_string_lossy(), uuid::Uuid::new_v4().simple());
    let temp = c_name(OsStr::new(&temp_name), path)?;
    let mode = existing.as_ref().map_or(0o666, |m| m.permissions().mode() & 0o7777);
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW;
    let fd = open_at(&dir, &temp, flags, mode as libc::mode_t).map_err(|e| io_error(path, &e))?;
    let mut file = File::from(fd);
    let written = (|| {
        file.write_all(bytes)?;
        if let Some(meta) = &existing {
            // The umask applied at create time; the old file's exact mode wins.
            file.set_permissions(std::fs::Permissions::from_mode(meta.permissions().mode() & 0o7777))?;
        }
        file.sync_all()
    })();
    if let Err(err) = written {
        unlink_at(&dir, &temp);
        return Err(io_error(path, &err));
    }
    drop(file);
    // SAFETY: both names are NUL-terminated and alive; `dir` is an open directory.
    let renamed = unsafe { libc::renameat(dir.as_raw_fd(), temp.as_ptr(), dir.as_raw_fd(), target.as_ptr()) };
    if renamed != 0 {
        let err = std::io::Error::last_os_error();
        unlink_at(&dir, &temp);
        return Err(io_error(path, &err));
    }
    // The rename is durable once the directory is. Syncing needs the directory opened for
    // reading, which a sandbox may refuse; the rename itself is done either way.
    if let Ok(listing) = open_at(&dir, &c".".into(), libc::O_RDONLY | libc::O_DIRECTORY, 0) {
        File::from(listing).sync_all().map_err(|e| io_error(path, &e))?;
    }
    Ok(Replaced { other_links: existing.map_or(0, |m| m.nlink().saturating_sub(1)) })
}

/// Whether this process's user may write the file `name` in `dir` by its permissions (root
/// may write any, as `echo >` would): the rename that replaces a file needs only the
/// directory's permission, so the file's own is asked here.
fn writable_at(dir: &OwnedFd, name: &CString) -> bool {
    // SAFETY: `dir` is open and `name` NUL-terminated; the call only reads them.
    unsafe { libc::faccessat(dir.as_raw_fd(), name.as_ptr(), libc::W_OK, libc::AT_EACCESS) == 0 }
}

fn unlink_at(dir: &OwnedFd, name: &CString) {
    // SAFETY: `dir` is open and `name` NUL-terminated; a failure leaves a stray temp file.
    unsafe {
        libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0);
    }
}

/// Creates the missing directories of `dir` (absolute, resolved), each below one opened
/// without following symlinks.
fn create_dirs(dir: &Path) -> Result<(), FileError> {
    let mut missing = Vec::new();
    let mut probe = dir;
    loop {
        match open_dir(probe) {
            Ok(_) => break,
            Err(FileError::Missing(_)) => {
                let (parent, name) = split(probe)?;
                missing.push(name);
                probe = parent;
            }
            Err(err) => return Err(err),
        }
    }
    let mut at = probe.to_path_buf();
    for name in missing.into_iter().rev() {
        let parent = open_dir(&at)?;
        let c = c_name(name, dir)?;
        // SAFETY: `parent` is open and `c` NUL-terminated.
        let made = unsafe { libc::mkdirat(parent.as_raw_fd(), c.as_ptr(), 0o777) };
        if made != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EEXIST) {
                return Err(io_error(dir, &err));
            }
        }
        at.push(name);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical(dir: &tempfile::TempDir) -> std::path::PathBuf {
        std::fs::canonicalize(dir.path()).expect("canonical")
    }

    #[test]
    fn a_fifo_is_refused_without_waiting_for_a_writer() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = canonical(&dir).join("pipe");
        let c = CString::new(fifo.as_os_str().as_bytes()).expect("c path");
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = read_capped(&fifo, 10, |_| None).expect_err("refused");
        assert!(matches!(err, FileError::NotRegular { kind: "FIFO", .. }), "{err}");
        assert!(matches!(write_atomic(&fifo, b"x"), Err(FileError::NotRegular { .. })));
    }

    #[test]
    fn a_device_is_refused_and_the_cap_holds_while_reading() {
        let err = read_capped(Path::new("/dev/zero"), 1024, |_| None).expect_err("a device");
        assert!(matches!(err, FileError::NotRegular { kind: "character device", .. }), "{err}");
        let dir = tempfile::tempdir().expect("tempdir");
        let file = canonical(&dir).join("big");
        std::fs::write(&file, vec![b'a'; 11]).expect("write");
        assert!(matches!(read_capped(&file, 10, |_| None), Err(FileError::TooLarge { cap: 10, .. })));
        assert_eq!(read_capped(&file, 11, |_| None).expect("fits").map(|b| b.len()), Some(11));
    }

    #[test]
    fn a_directory_that_became_a_symlink_is_not_followed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = canonical(&dir);
        std::fs::create_dir_all(root.join("outside")).expect("outside");
        std::fs::write(root.join("outside/secret"), "key").expect("secret");
        // Resolved while `sub` was a directory; it is a symlink to the outside by open time.
        std::os::unix::fs::symlink(root.join("outside"), root.join("sub")).expect("link");
        let err = read_capped(&root.join("sub/secret"), 100, |_| None).expect_err("not followed");
        assert!(matches!(err, FileError::Changed(_)), "{err}");
        assert!(matches!(write_atomic(&root.join("sub/new"), b"x"), Err(FileError::Changed(_))));
        assert!(!root.join("outside/new").exists());
    }

    #[test]
    fn a_write_replaces_the_file_whole_keeps_its_mode_and_creates_parents() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = canonical(&dir);
        let file = root.join("a/b/c.txt");
        write_atomic(&file, b"one").expect("created");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).expect("chmod");
        write_atomic(&file, b"two").expect("replaced");
        assert_eq!(std::fs::read(&file).expect("read"), b"two");
        assert_eq!(std::fs::metadata(&file).expect("meta").permissions().mode() & 0o777, 0o640);
        let left: Vec<_> = std::fs::read_dir(root.join("a/b")).expect("dir").collect();
        assert_eq!(left.len(), 1, "no temp file is left behind");
    }

    #[test]
    fn a_hard_linked_file_is_replaced_and_its_other_name_keeps_the_old_content() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = canonical(&dir);
        std::fs::write(root.join("outside"), "old").expect("write");
        std::fs::hard_link(root.join("outside"), root.join("inside")).expect("link");
        let replaced = write_atomic(&root.join("inside"), b"new").expect("written");
        assert_eq!(replaced.other_links, 1);
        assert_eq!(std::fs::read_to_string(root.join("outside")).expect("read"), "old");
        assert_eq!(std::fs::read_to_string(root.join("inside")).expect("read"), "new");
    }

    /// The child half of `a_write_that_fails_midway_leaves_the_old_file_whole`: does
    /// nothing unless that test started this binary to run it.
    #[test]
    fn write_in_a_child_under_a_file_size_limit() {
        let Some(path) = std::env::var_os("HERON_FSIO_CHILD_WRITE") else { return };
        match write_atomic(Path::new(&path), &vec![b'n'; 4 << 20]) {
            Ok(_) => println!("CHILD wrote"),
            Err(err) => println!("CHILD failed: {err}"),
        }
    }

    /// A write that fails part way (here at a 1 MiB file size limit, as a full disk would)
    /// reports the failure and leaves the old file whole, with no temp file behind.
    #[test]
    fn a_write_that_fails_midway_leaves_the_old_file_whole() {
        use std::os::unix::process::CommandExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let root = canonical(&dir);
        let file = root.join("notes.txt");
        let old = "line\n".repeat(6000);
        std::fs::write(&file, &old).expect("write");
        let exe = std::env::current_exe().expect("this test binary");
        let mut child = std::process::Command::new(exe);
        child
            .args(["--exact", "tools::fsio::tests::write_in_a_child_under_a_file_size_limit", "--nocapture"])
            .env("HERON_FSIO_CHILD_WRITE", &file);
        // SAFETY: only async-signal-safe calls on a stack value, between fork and exec. An
        // ignored SIGXFSZ stays ignored across exec, so the write fails with EFBIG instead
        // of killing the child.
        unsafe {
            child.pre_exec(|| {
                let limit = libc::rlimit { rlim_cur: 1 << 20, rlim_max: 1 << 20 };
                if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                Ok(())
            });
        }
        let output = child.output().expect("the child runs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(stdout.contains("CHILD failed:") && stdout.contains("too large"), "{stdout}");
        assert_eq!(std::fs::read_to_string(&file).expect("read"), old, "the old file is whole");
        let left: Vec<_> = std::fs::read_dir(&root).expect("dir").flatten().map(|e| e.file_name()).collect();
        assert_eq!(left, [std::ffi::OsString::from("notes.txt")], "no temp file is left behind");
    }

    /// The child half of `a_read_only_file_is_not_replaced`: does nothing unless that test
    /// started this binary to run it.
    #[test]
    fn write_in_a_child_a_read_only_file() {
        let Some(path) = std::env::var_os("HERON_FSIO_CHILD_READ_ONLY") else { return };
        match write_atomic(Path::new(&path), b"new") {
            Ok(_) => println!("CHILD wrote"),
            Err(err) => println!("CHILD failed: {err}"),
        }
    }

    /// A file whose permissions say it may not be written is left alone, although its
    /// directory would let a rename replace it. Run as an unprivileged user (root may write
    /// anything), in a child when this test runs as root.
    #[test]
    fn a_read_only_file_is_not_replaced() {
        use std::os::unix::process::CommandExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let root = canonical(&dir);
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o777)).expect("chmod dir");
        let file = root.join("locked.txt");
        std::fs::write(&file, "old").expect("write");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o444)).expect("chmod file");
        let exe = std::env::current_exe().expect("this test binary");
        let mut child = std::process::Command::new(exe);
        child
            .args(["--exact", "tools::fsio::tests::write_in_a_child_a_read_only_file", "--nocapture"])
            .env("HERON_FSIO_CHILD_READ_ONLY", &file);
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            child.pre_exec(|| {
                if libc::geteuid() == 0 && (libc::setgid(65534) != 0 || libc::setuid(65534) != 0) {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let output = child.output().expect("the child runs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(stdout.contains("CHILD failed:") && stdout.contains("read-only"), "{stdout}");
        assert_eq!(std::fs::read_to_string(&file).expect("read"), "old", "the file is unchanged");
        let left: Vec<_> = std::fs::read_dir(&root).expect("dir").flatten().map(|e| e.file_name()).collect();
        assert_eq!(left, [std::ffi::OsString::from("locked.txt")], "no temp file is left behind");
    }
}
