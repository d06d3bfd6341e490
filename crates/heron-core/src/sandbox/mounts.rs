//! The file system a confined program sees, in its own mount namespace: Heron's home and
//! the host's control sockets covered, a private `/tmp` (no editor, terminal multiplexer or
//! desktop socket under it is reachable, whatever its name), a private `/dev` holding only
//! the device files programs use (no disk, no other terminal, no shared memory of another
//! program), and, inside its own pid namespace, a `/proc` that shows only its own processes
//! with the kernel's settings read-only.
//!
//! The plan is made in the parent (paths as C strings, nothing left to allocate); the
//! mounts are made in the child between `fork` and `exec`, with raw system calls only (see
//! `sandbox`). Sources of bind mounts are opened in the child, after it has its own
//! namespace: the kernel binds only from mounts of the caller's namespace.

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The size of the fresh `/tmp` and `/dev/shm` where they are memory: a bound on what a
/// program can hold in RAM through them.
const FRESH_SIZE: &CStr = c"mode=1777,size=64m";

/// The most paths kept under a private `/tmp`: a bound on the descriptors the child opens.
const MAX_KEPT: usize = 64;

/// The device files a private `/dev` holds, bound from the host's.
const DEVICES: [(&CStr, &CStr); 6] = [
    (c"/dev/null", c"/dev/null"),
    (c"/dev/zero", c"/dev/zero"),
    (c"/dev/full", c"/dev/full"),
    (c"/dev/random", c"/dev/random"),
    (c"/dev/urandom", c"/dev/urandom"),
    (c"/dev/tty", c"/dev/tty"),
];

/// The links a private `/dev` holds, as `(link, target)`.
const DEV_LINKS: [(&CStr, &CStr); 5] = [
    (c"/dev/ptmx", c"pts/ptmx"),
    (c"/dev/fd", c"/proc/self/fd"),
    (c"/dev/stdin", c"/proc/self/fd/0"),
    (c"/dev/stdout", c"/proc/self/fd/1"),
    (c"/dev/stderr", c"/proc/self/fd/2"),
];

/// Parts of a fresh `/proc` that write kernel settings or act on the machine: made
/// read-only (`/proc/sys` is where `core_pattern` would run a program as root).
const PROC_READ_ONLY: [&CStr; 5] =
    [c"/proc/sys", c"/proc/sysrq-trigger", c"/proc/irq", c"/proc/bus", c"/proc/fs"];

/// Which step of the plan failed, for the probe and for the error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Failed {
    /// Making `/` private, so nothing propagates back to the host.
    Private,
    /// The private `/tmp`.
    Tmp,
    /// The private `/dev`.
    Dev,
    /// The fresh `/proc`.
    Proc,
}

/// What becomes `/tmp`.
#[derive(Debug)]
pub(super) enum TmpSource {
    /// A folder bound there (the session's private temp folder, or the program's own).
    Folder(CString),
    /// A fresh tmpfs of [`FRESH_SIZE`].
    Fresh,
}

/// A path under `/tmp` the program must still reach at the same name (a workspace root, a
/// writable cache, the ssh agent's socket): bound back into the private `/tmp`.
#[derive(Debug)]
struct Kept {
    path: CString,
    dir: bool,
    /// Its ancestors below `/tmp`, outermost first, made as folders in the private `/tmp`.
    parents: Vec<CString>,
}

/// A child's mounts, ready to make.
#[derive(Debug)]
pub(super) struct Plan {
    /// Covered with an empty read-only tmpfs: the home, folders of host sockets.
    folders: Vec<CString>,
    /// Covered with `/dev/null`: single host sockets, and `/proc/PID/environ` files where
    /// no fresh `/proc` hides them.
    files: Vec<CString>,
    tmp: TmpSource,
    kept: Vec<Kept>,
}

impl Plan {
    /// A plan covering `folders` and `files`, with `tmp` as `/tmp` and `keep` (paths that
    /// need not exist, nor lie under `/tmp`) reachable as they are.
    pub(super) fn new(folders: &[PathBuf], files: &[PathBuf], tmp: TmpSource, keep: &[PathBuf]) -> Self {
        let mut real: Vec<PathBuf> = keep
            .iter()
            .filter_map(|path| std::fs::canonicalize(path).ok())
            .filter(|path| path.strip_prefix("/tmp").is_ok_and(|below| !below.as_os_str().is_empty()))
            .collect();
        // Outermost first, so a path inside one already kept is not bound again.
        real.sort_by_key(|path| path.components().count());
        let mut chosen: Vec<PathBuf> = Vec::new();
        for path in real {
            if chosen.len() < MAX_KEPT && !chosen.iter().any(|outer| path.starts_with(outer)) {
                chosen.push(path);
            }
        }
        let kept = chosen
            .iter()
            .filter_map(|path| {
                let parents =
                    path.ancestors().skip(1).take_while(|a| *a != Path::new("/tmp")).collect::<Vec<_>>();
                Some(Kept {
                    path: c_path(path)?,
                    dir: path.is_dir(),
                    parents: parents.iter().rev().filter_map(|p| c_path(p)).collect(),
                })
            })
            .collect();
        Self {
            folders: folders.iter().filter_map(|p| c_path(p)).collect(),
            files: files.iter().filter_map(|p| c_path(p)).collect(),
            tmp,
            kept,
        }
    }

    /// Whether `/tmp` is a fresh tmpfs, which the parent's Landlock rules cannot name.
    pub(super) fn fresh_tmp(&self) -> bool {
        matches!(self.tmp, TmpSource::Fresh)
    }

    /// Makes the mounts of the program's own namespace (all but `/proc`, which must be
    /// made from inside its pid namespace: [`mount_proc`]).
    ///
    /// # Safety
    /// Only in a child between `fork` and `exec`, in a new mount namespace.
    pub(super) unsafe fn mount(&self) -> Result<(), (Failed, i32)> {
        // SAFETY: raw system calls on C strings owned by the plan or literals.
        unsafe {
            if libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) != 0
            {
                return Err((Failed::Private, errno()));
            }
            // Covers are best effort: a folder that is not there has nothing to hide.
            for folder in &self.folders {
                libc::mount(
                    c"tmpfs".as_ptr(),
                    folder.as_ptr(),
                    c"tmpfs".as_ptr(),
                    libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    c"mode=000,size=4k".as_ptr().cast(),
                );
            }
            for file in &self.files {
                libc::mount(
                    c"/dev/null".as_ptr(),
                    file.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND,
                    std::ptr::null(),
                );
            }
            self.mount_tmp().map_err(|e| (Failed::Tmp, e))?;
            mount_dev().map_err(|e| (Failed::Dev, e))?;
        }
        Ok(())
    }

    /// `/tmp` replaced, and the kept paths bound back at their names.
    unsafe fn mount_tmp(&self) -> Result<(), i32> {
        // SAFETY: raw system calls on C strings owned by the plan, literals, and stack
        // buffers; every descriptor opened here is closed here.
        unsafe {
            // Opened before `/tmp` is covered, while their names still reach them.
            let mut fds = [-1; MAX_KEPT];
            for (fd, kept) in fds.iter_mut().zip(&self.kept) {
                *fd = libc::open(kept.path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC);
            }
            let result = match &self.tmp {
                TmpSource::Folder(folder) => {
                    let source =
                        libc::open(folder.as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC);
                    let bound = bind_fd(source, c"/tmp");
                    libc::close(source);
                    bound
                }
                TmpSource::Fresh => check(libc::mount(
                    c"tmpfs".as_ptr(),
                    c"/tmp".as_ptr(),
                    c"tmpfs".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV,
                    FRESH_SIZE.as_ptr().cast(),
                )),
            };
            for (fd, kept) in fds.iter().zip(&self.kept) {
                if result.is_ok() && *fd >= 0 {
                    for parent in &kept.parents {
                        libc::mkdir(parent.as_ptr(), 0o755);
                    }
                    if kept.dir {
                        libc::mkdir(kept.path.as_ptr(), 0o755);
                    } else {
                        let made = libc::open(
                            kept.path.as_ptr(),
                            libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                            0o600,
                        );
                        if made >= 0 {
                            libc::close(made);
                        }
                    }
                    // A kept path that cannot be bound is a workspace the program would not
                    // find: the program does not start.
                    if let Err(e) = bind_fd(*fd, &kept.path) {
                        close_all(&fds);
                        return Err(e);
                    }
                }
            }
            close_all(&fds);
            result
        }
    }
}

/// A private `/dev`: a small tmpfs with the host's harmless device files bound in, a pty
/// instance of its own and a shared-memory folder of its own.
///
/// # Safety
/// As [`Plan::mount`].
unsafe fn mount_dev() -> Result<(), i32> {
    // SAFETY: raw system calls on literals and stack buffers; every descriptor opened here
    // is closed here.
    unsafe {
        let mut fds = [-1; DEVICES.len()];
        for (fd, (host, _)) in fds.iter_mut().zip(DEVICES) {
            *fd = libc::open(host.as_ptr(), libc::O_PATH | libc::O_CLOEXEC);
        }
        let made = check(libc::mount(
            c"tmpfs".as_ptr(),
            c"/dev".as_ptr(),
            c"tmpfs".as_ptr(),
            libc::MS_NOSUID | libc::MS_NOEXEC,
            c"mode=755,size=64k".as_ptr().cast(),
        ));
        if let Err(e) = made {
            close_all(&fds);
            return Err(e);
        }
        for (fd, (_, inside)) in fds.iter().zip(DEVICES) {
            if *fd < 0 {
                continue;
            }
            let node = libc::open(inside.as_ptr(), libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC, 0o666);
            if node >= 0 {
                libc::close(node);
            }
            if let Err(e) = bind_fd(*fd, inside) {
                close_all(&fds);
                return Err(e);
            }
        }
        close_all(&fds);
        libc::mkdir(c"/dev/pts".as_ptr(), 0o755);
        check(libc::mount(
            c"devpts".as_ptr(),
            c"/dev/pts".as_ptr(),
            c"devpts".as_ptr(),
            libc::MS_NOSUID | libc::MS_NOEXEC,
            c"newinstance,ptmxmode=0666,mode=620".as_ptr().cast(),
        ))?;
        libc::mkdir(c"/dev/shm".as_ptr(), 0o1777);
        check(libc::mount(
            c"tmpfs".as_ptr(),
            c"/dev/shm".as_ptr(),
            c"tmpfs".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            FRESH_SIZE.as_ptr().cast(),
        ))?;
        for (link, target) in DEV_LINKS {
            libc::symlink(target.as_ptr(), link.as_ptr());
        }
        Ok(())
    }
}

/// A fresh `/proc` for the pid namespace this process is the first of, with the parts
/// that change the machine read-only.
///
/// # Safety
/// Only in a child between `fork` and `exec`, as the first process of a new pid namespace
/// inside a new mount namespace.
pub(super) unsafe fn mount_proc() -> Result<(), (Failed, i32)> {
    // SAFETY: raw system calls on literals.
    unsafe {
        let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
        check(libc::mount(c"proc".as_ptr(), c"/proc".as_ptr(), c"proc".as_ptr(), flags, std::ptr::null()))
            .map_err(|e| (Failed::Proc, e))?;
        for path in PROC_READ_ONLY {
            if libc::mount(
                path.as_ptr(),
                path.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND | libc::MS_REC,
                std::ptr::null(),
            ) != 0
            {
                // Not every kernel has every one of them; `/proc/sys` every kernel has.
                if path == c"/proc/sys" {
                    return Err((Failed::Proc, errno()));
                }
                continue;
            }
            let remount = libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | flags;
            check(libc::mount(std::ptr::null(), path.as_ptr(), std::ptr::null(), remount, std::ptr::null()))
                .map_err(|e| (Failed::Proc, e))?;
        }
    }
    Ok(())
}

/// Binds what `fd` (an `O_PATH` descriptor) names onto `target`, through its
/// `/proc/self/fd` link (formatted on the stack).
///
/// # Safety
/// As [`Plan::mount`].
unsafe fn bind_fd(fd: libc::c_int, target: &CStr) -> Result<(), i32> {
    if fd < 0 {
        return Err(errno());
    }
    let mut name = [0u8; 32];
    let prefix = b"/proc/self/fd/";
    name[..prefix.len()].copy_from_slice(prefix);
    let mut digits = [0u8; 10];
    let (mut n, mut count) = (fd.unsigned_abs(), 0);
    loop {
        digits[count] = b'0' + u8::try_from(n % 10).unwrap_or(0);
        count += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for (i, digit) in digits[..count].iter().rev().enumerate() {
        name[prefix.len() + i] = *digit;
    }
    // SAFETY: `name` is NUL-terminated (zeroed past the digits) and outlives the call.
    unsafe {
        check(libc::mount(
            name.as_ptr().cast(),
            target.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND | libc::MS_REC,
            std::ptr::null(),
        ))
    }
}

fn close_all(fds: &[libc::c_int]) {
    for fd in fds.iter().copied().filter(|fd| *fd >= 0) {
        // SAFETY: closes a descriptor this module opened.
        unsafe { libc::close(fd) };
    }
}

fn check(result: libc::c_int) -> Result<(), i32> {
    if result == 0 { Ok(()) } else { Err(errno()) }
}

pub(super) fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EPERM)
}

fn c_path(path: &Path) -> Option<CString> {
    CString::new(path.as_os_str().as_bytes()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_paths_under_tmp_are_kept_with_their_parents_made() {
        let dir = tempfile::tempdir_in("/tmp").expect("tempdir in /tmp");
        let ws = std::fs::canonicalize(dir.path()).expect("canonical").join("a/ws");
        std::fs::create_dir_all(&ws).expect("ws");
        let plan =
            Plan::new(&[], &[], TmpSource::Fresh, &[ws.clone(), ws.join("sub"), PathBuf::from("/usr")]);
        assert_eq!(
            plan.kept.len(),
            1,
            "{plan:?}: a path inside a kept one, or outside /tmp, is not kept again"
        );
        let kept = &plan.kept[0];
        assert!(kept.dir);
        assert_eq!(kept.path.to_str().ok(), ws.to_str());
        let parents: Vec<&str> = kept.parents.iter().filter_map(|p| p.to_str().ok()).collect();
        assert_eq!(parents.last().copied(), ws.parent().and_then(Path::to_str));
        assert!(parents.iter().all(|p| p.starts_with("/tmp/")), "{parents:?}");
    }

    #[test]
    fn kept_paths_past_the_bound_are_left_out() {
        let dir = tempfile::tempdir_in("/tmp").expect("tempdir in /tmp");
        let base = std::fs::canonicalize(dir.path()).expect("canonical");
        let keep: Vec<PathBuf> =
            (0..MAX_KEPT + 5).map(|index| base.join(format!("root-{index:03}"))).collect();
        for path in &keep {
            std::fs::create_dir(path).expect("root");
        }
        let plan = Plan::new(&[], &[], TmpSource::Fresh, &keep);
        assert_eq!(plan.kept.len(), MAX_KEPT, "no more than the child's descriptors hold");
        let past = keep[MAX_KEPT..].iter().filter_map(|path| path.to_str()).collect::<Vec<_>>();
        assert!(
            plan.kept.iter().all(|kept| kept.path.to_str().is_ok_and(|path| !past.contains(&path))),
            "the first ones are kept, the rest left out"
        );
    }

    #[test]
    fn a_missing_kept_path_is_left_out() {
        let plan = Plan::new(&[], &[], TmpSource::Fresh, &[PathBuf::from("/tmp/heron-no-such-folder/x")]);
        assert!(plan.kept.is_empty());
    }
}
