//! What a confined child does between `fork` and `exec`, and everything it needs, prepared
//! in the parent. Invariant: the child runs only raw, async-signal-safe system calls on
//! memory that existed before the fork (see the module doc of `sandbox` for why), and a
//! failure to confine stops the spawn instead of running the program unconfined.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use super::{Policy, SandboxError, rules};

/// A child's confinement, ready to run in it.
pub(super) struct Steps {
    /// The Landlock ruleset, open until the command holding these steps is dropped.
    ruleset: OwnedFd,
    /// What the child covers in a private mount namespace, when it may make one.
    cover: Option<Cover>,
}

/// The paths a child covers in its own mount namespace.
struct Cover {
    /// The home, covered with an empty read-only tmpfs.
    home: Option<CString>,
    /// The `/proc/PID/environ` files of Heron and its ancestors, covered with `/dev/null`.
    environs: Vec<CString>,
    /// Folders of host-control sockets, covered like the home.
    socket_folders: Vec<CString>,
    /// Single host-control sockets, covered with `/dev/null` (`connect` to it fails).
    sockets: Vec<CString>,
}

impl Steps {
    /// Builds the ruleset (reads directories: call it on the blocking pool), with `temp`
    /// writable, and, when `hides_home`, the paths to cover.
    pub(super) fn prepare(
        policy: &Policy,
        hides_home: bool,
        temp: Option<&std::path::Path>,
    ) -> Result<Self, SandboxError> {
        let home = rules::real_home(&policy.home)?;
        let ruleset = rules::build(policy, &home, temp)?;
        // A path with a NUL byte cannot exist, so there is nothing to cover.
        let c_path = |path: &std::path::Path| CString::new(path.as_os_str().as_bytes()).ok();
        let cover = hides_home.then(|| {
            // The ssh agent stays reachable, as its variable does; so do the roots and the
            // writable places should one lie in a covered folder.
            let keep: Vec<std::path::PathBuf> = std::env::var_os("SSH_AUTH_SOCK")
                .map(std::path::PathBuf::from)
                .into_iter()
                .chain(policy.roots.iter().cloned())
                .chain(policy.writable.iter().cloned())
                .collect();
            let (folders, sockets) = super::sockets::covers(&policy.host_sockets, &keep);
            Cover {
                home: if home.is_dir() { c_path(&home) } else { None },
                environs: super::own::lineage_environs().iter().filter_map(|path| c_path(path)).collect(),
                socket_folders: folders.iter().filter_map(|path| c_path(path)).collect(),
                sockets: sockets.iter().filter_map(|path| c_path(path)).collect(),
            }
        });
        Ok(Self { ruleset, cover })
    }

    /// Makes `command`'s child run these steps before `exec`. The steps move into the
    /// command, so the ruleset's descriptor is open during every spawn of it.
    pub(super) fn install(self, command: &mut std::process::Command) {
        use std::os::unix::process::CommandExt;
        // SAFETY: `in_child` only makes raw system calls on memory owned by `self`, which
        // the closure owns; it allocates nothing and takes no lock (see its doc).
        unsafe {
            command.pre_exec(move || self.in_child());
        }
    }

    /// Runs in the forked child. Each call is a raw system call (async-signal-safe); the
    /// error is built from `errno` alone (`io::Error` stores the number, nothing on the
    /// heap) and makes `spawn` fail in the parent with it.
    fn in_child(&self) -> std::io::Result<()> {
        if let Some(cover) = &self.cover {
            cover.mount();
        }
        drop_ptrace_capability()?;
        // SAFETY: prctl with integer arguments touches no memory of ours. Landlock requires
        // it (or CAP_SYS_ADMIN), and it keeps setuid programs from regaining rights.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1 as libc::c_ulong, 0, 0, 0) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: the descriptor is a Landlock ruleset open in this process (inherited from
        // the parent, which keeps it open through the spawn); flags 0 ask for the default.
        if unsafe {
            libc::syscall(libc::SYS_landlock_restrict_self, self.ruleset.as_raw_fd(), 0 as libc::c_uint)
        } != 0
        {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Cover {
    /// Covers the home and the folders of host-control sockets with an empty read-only
    /// tmpfs and each environment file and single socket with `/dev/null`, in a new private
    /// mount namespace. Best effort: Landlock hides the home on its own and Heron is not
    /// dumpable, so a step that fails leaves the child as it was (a socket it failed to
    /// cover stays reachable, as where no namespace can be made). Mounting must come first,
    /// since a Landlock-confined process may not mount.
    fn mount(&self) {
        // SAFETY: each call takes flags and NUL-terminated strings that outlive it (the
        // paths are owned by the steps; the others are literals).
        unsafe {
            if libc::unshare(libc::CLONE_NEWNS) != 0 {
                return;
            }
            // Without this, a mount under a shared tree would propagate back to Heron's view.
            let private = libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            );
            if private != 0 {
                return;
            }
            for folder in self.home.iter().chain(&self.socket_folders) {
                libc::mount(
                    c"tmpfs".as_ptr(),
                    folder.as_ptr(),
                    c"tmpfs".as_ptr(),
                    libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    c"mode=000,size=4k".as_ptr().cast(),
                );
            }
            for environ in self.environs.iter().chain(&self.sockets) {
                libc::mount(
                    c"/dev/null".as_ptr(),
                    environ.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND,
                    std::ptr::null(),
                );
            }
        }
    }
}

/// `CAP_SYS_PTRACE`'s number (linux/capability.h): what lets root read the `/proc` files of
/// a process that is not dumpable, such as Heron.
const CAP_SYS_PTRACE: u32 = 19;

/// The header and one of the two data words of `capget`/`capset` (version 3, 64 bits).
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Keeps `CAP_SYS_PTRACE` from the program: out of the bounding set (so `exec` does not
/// give it back to root), the ambient set and this process's own sets. A process that
/// holds it still after this (root that may not drop it) does not start.
fn drop_ptrace_capability() -> std::io::Result<()> {
    let bit = 1u32 << CAP_SYS_PTRACE;
    let mut header = CapHeader { version: 0x2008_0522, pid: 0 };
    let mut data = [CapData { effective: 0, permitted: 0, inheritable: 0 }; 2];
    // SAFETY: prctl with integer arguments touches no memory of ours; capget and capset
    // read and write the header and the two data words on this stack frame.
    unsafe {
        libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong, 0, 0, 0);
        // Fails (EPERM) without CAP_SETPCAP, that is, for a process that holds no
        // capabilities to begin with; checked below.
        libc::prctl(libc::PR_CAPBSET_DROP, CAP_SYS_PTRACE as libc::c_ulong, 0, 0, 0);
        if libc::syscall(libc::SYS_capget, &raw mut header, data.as_mut_ptr()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if (data[0].effective | data[0].permitted | data[0].inheritable) & bit != 0 {
            data[0].effective &= !bit;
            data[0].permitted &= !bit;
            data[0].inheritable &= !bit;
            if libc::syscall(libc::SYS_capset, &raw mut header, data.as_ptr()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        // Root regains every capability of the bounding set at `exec`.
        let bounded = libc::prctl(libc::PR_CAPBSET_READ, CAP_SYS_PTRACE as libc::c_ulong, 0, 0, 0) == 1;
        if bounded && libc::geteuid() == 0 {
            return Err(std::io::Error::from_raw_os_error(libc::EPERM));
        }
    }
    Ok(())
}
