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
    /// The home, to cover with an empty read-only tmpfs in a private mount namespace.
    cover: Option<CString>,
}

impl Steps {
    /// Builds the ruleset (reads directories: call it on the blocking pool) and, when
    /// `hides_home`, the path to cover.
    pub(super) fn prepare(policy: &Policy, hides_home: bool) -> Result<Self, SandboxError> {
        let home = rules::real_home(&policy.home)?;
        let ruleset = rules::build(policy, &home)?;
        let cover = if hides_home && home.is_dir() {
            // A path with a NUL byte cannot exist, so there is nothing to cover.
            CString::new(home.as_os_str().as_bytes()).ok()
        } else {
            None
        };
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
        if let Some(target) = &self.cover {
            cover(target);
        }
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

/// Covers `target` with an empty read-only tmpfs in a new private mount namespace. Best
/// effort: Landlock hides the home on its own, so a step that fails leaves the child as it
/// was. Mounting must come first, since a Landlock-confined process may not mount.
fn cover(target: &CString) {
    // SAFETY: each call takes flags and NUL-terminated strings that outlive it (`target`
    // is owned by the steps; the others are literals).
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
        libc::mount(
            c"tmpfs".as_ptr(),
            target.as_ptr(),
            c"tmpfs".as_ptr(),
            libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            c"mode=000,size=4k".as_ptr().cast(),
        );
    }
}
