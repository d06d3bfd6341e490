//! What a confined child does between `fork` and `exec`, and everything it needs, prepared
//! in the parent. Invariant: the child runs only raw, async-signal-safe system calls on
//! memory that existed before the fork (see the module doc of `sandbox` for why), and a
//! failure to put up a wall this machine has stops the spawn instead of running the program
//! with less.
//!
//! The order, in the child Heron forks:
//!
//! 1. its namespaces (`unshare`: user where needed, mount, pid and IPC, network where the
//!    policy has none), the user namespace's id maps (the same ids inside), loopback up;
//! 2. its mounts (`mounts`): covers, a private `/tmp` and `/dev`;
//! 3. the keeper splits off (`keeper`): outside the pid namespace, it waits and sweeps;
//! 4. in the pid namespace, its first process mounts a fresh `/proc` and becomes its init;
//! 5. the program's process clears its capabilities and sets `no_new_privs` (`caps`),
//!    enters the Landlock domain (`rules`, built in the parent), installs the seccomp
//!    filter (`seccomp`), and `exec`s.
//!
//! The keeper and the init are forks of Heron that never run another program; only the
//! last process is confined, so it can signal neither (Landlock scopes signals to its
//! domain, and the pid namespace hides them).

use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use super::mounts::{self, Plan, TmpSource};
use super::seccomp::{self, Filters, Needs};
use super::{Policy, SandboxError, Support, Walls, caps, keeper, rules};

/// The step that failed, reported by the probe as its exit code (`FAILED + step`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum Step {
    Unshare = 1,
    UserMap,
    Network,
    Mount,
    Split,
    Proc,
    Capabilities,
    Landlock,
    Seccomp,
}

impl Step {
    const ALL: [Step; 9] = [
        Step::Unshare,
        Step::UserMap,
        Step::Network,
        Step::Mount,
        Step::Split,
        Step::Proc,
        Step::Capabilities,
        Step::Landlock,
        Step::Seccomp,
    ];
}

/// A probe child's exit code for a failed step is this plus the step.
const FAILED: i32 = 100;

/// A child's confinement, ready to run in it.
pub(super) struct Steps {
    /// Whether the program is confined at all (else only the keeper, if asked for).
    confined: bool,
    /// The Landlock ruleset, open until the command holding these steps is dropped.
    ruleset: Option<OwnedFd>,
    /// Places the child mounts itself (`/proc`, `/dev` and what is in it, a fresh `/tmp`),
    /// which the parent's ruleset cannot name, with the Landlock rights each gets. A rule on
    /// a mount point does not reach what is mounted over it, so each needs its own.
    made: Vec<(&'static CStr, u64)>,
    namespaces: Option<Namespaces>,
    /// Whether a keeper is made even without a pid namespace.
    keeper: bool,
    seccomp: Option<&'static Filters>,
}

struct Namespaces {
    flags: libc::c_int,
    /// `uid_map` and `gid_map`, when a user namespace is made.
    maps: Option<(CString, CString)>,
    network: bool,
    mounts: Option<Plan>,
    pid: bool,
    proc: bool,
}

impl Steps {
    /// The steps of a program run by `policy` on a machine with `support`, with `temp` as
    /// the private temp folder and `own_temp` the folder the program's own `TMPDIR` names
    /// (the policy's `temp` is then `None`). Builds the ruleset, which reads directories:
    /// call it where blocking is allowed.
    pub(super) fn prepare(
        policy: &Policy,
        support: &Support,
        temp: Option<&Path>,
        own_temp: Option<&Path>,
        keeper: bool,
    ) -> Result<Self, SandboxError> {
        if !policy.enabled {
            return Ok(Self::keeper_only(keeper));
        }
        let walls = &support.walls;
        if !walls.no_capabilities {
            return Err(SandboxError::Prepare(
                "this machine cannot clear a program's capabilities, so none starts confined".to_owned(),
            ));
        }
        let home = rules::real_home(&policy.home)?;
        let landlock = support.landlock.as_ref().ok().copied();
        let network = !policy.network && walls.network_namespace;
        let ruleset = match landlock {
            Some(_) => Some(rules::build(policy, &home, temp, walls.mount_namespace, network)?),
            None => None,
        };
        let mounts = walls.mount_namespace.then(|| plan(policy, &home, temp, own_temp, walls.private_proc));
        let mut made = Vec::new();
        if let (Some(plan), Some(abi)) = (&mounts, landlock) {
            let (read, write) = rules::made_rights(abi);
            made.extend([(c"/dev", read), (c"/dev/pts", write), (c"/dev/shm", write)]);
            if plan.fresh_tmp() {
                made.push((c"/tmp", write));
            }
            if walls.private_proc && walls.pid_namespace {
                made.push((c"/proc", read));
            }
        }
        Ok(Self {
            confined: true,
            ruleset,
            made,
            namespaces: namespaces(walls, mounts, network),
            keeper,
            seccomp: walls.seccomp.then(|| filters(support)).flatten(),
        })
    }

    fn keeper_only(keeper: bool) -> Self {
        Self { confined: false, ruleset: None, made: Vec::new(), namespaces: None, keeper, seccomp: None }
    }

    /// The steps the probe tries for `walls`: everything but Landlock, which is probed on
    /// its own, with no paths to cover or keep.
    pub(super) fn for_probe(walls: &Walls, landlock: Option<u32>) -> Result<Self, String> {
        let mounts = walls.mount_namespace.then(|| Plan::new(&[], &[], TmpSource::Fresh, &[]));
        let support = Support { landlock: landlock.ok_or_else(String::new), walls: *walls, inside: false };
        let seccomp = if walls.seccomp {
            Some(filters(&support).ok_or_else(|| "the seccomp filter cannot be built".to_owned())?)
        } else {
            None
        };
        Ok(Self {
            confined: true,
            ruleset: None,
            made: Vec::new(),
            namespaces: namespaces(walls, mounts, walls.network_namespace),
            keeper: false,
            seccomp,
        })
    }

    /// Makes `command`'s child run these steps before `exec`. The steps move into the
    /// command, so the ruleset's descriptor is open during every spawn of it.
    pub(super) fn install(self, command: &mut std::process::Command) {
        use std::os::unix::process::CommandExt;
        // SAFETY: `run` only makes raw system calls on memory owned by `self`, which the
        // closure owns; it allocates nothing and takes no lock (see its doc).
        unsafe {
            command
                .pre_exec(move || self.run().map_err(|(_, errno)| std::io::Error::from_raw_os_error(errno)));
        }
    }

    /// Runs the steps in a forked child that exits where the program would start: `Ok`
    /// when every step worked, else the step that failed (`None` when the child died
    /// otherwise).
    pub(super) fn probe(&self) -> Result<(), Option<Step>> {
        // SAFETY: the child makes only raw system calls on memory prepared before the fork
        // and ends with `_exit`; the parent only waits for it.
        unsafe {
            let child = libc::fork();
            if child < 0 {
                return Err(Some(Step::Split));
            }
            if child == 0 {
                libc::setpgid(0, 0);
                let code = match self.run() {
                    Ok(()) => 0,
                    Err((step, _)) => FAILED + step as i32,
                };
                libc::_exit(code);
            }
            let mut status = 0;
            while libc::waitpid(child, &raw mut status, 0) < 0 {
                if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                    return Err(None);
                }
            }
            if !libc::WIFEXITED(status) {
                return Err(None);
            }
            match libc::WEXITSTATUS(status) {
                0 => Ok(()),
                code => Err(Step::ALL.into_iter().find(|step| FAILED + *step as i32 == code)),
            }
        }
    }

    /// Runs in the forked child (see the module docs for the order). Each call is a raw
    /// system call (async-signal-safe); errors carry the step and `errno` alone.
    fn run(&self) -> Result<(), (Step, i32)> {
        if !self.confined {
            if self.keeper {
                // SAFETY: in the child between fork and exec, leading its own group.
                unsafe { keeper::split(false) }.map_err(|e| (Step::Split, os(&e)))?;
            }
            return Ok(());
        }
        // SAFETY: every call below is a raw system call on memory owned by `self` or on
        // this stack frame, in the child between fork and exec.
        unsafe {
            let pid = self.namespaces.as_ref().is_some_and(|ns| ns.pid);
            if let Some(ns) = &self.namespaces {
                ns.enter()?;
            }
            let status = if pid || self.keeper {
                keeper::split(pid).map_err(|e| (Step::Split, os(&e)))?
            } else {
                None
            };
            if let Some(ns) = self.namespaces.as_ref().filter(|ns| ns.pid) {
                if ns.proc {
                    mounts::mount_proc().map_err(|(_, errno)| (Step::Proc, errno))?;
                }
                keeper::init_split(status.unwrap_or(-1)).map_err(|e| (Step::Split, os(&e)))?;
            }
            caps::drop_all().map_err(|e| (Step::Capabilities, os(&e)))?;
            if let Some(ruleset) = &self.ruleset {
                self.restrict(ruleset)?;
            }
            if let Some(filters) = self.seccomp {
                seccomp::install(filters).map_err(|e| (Step::Seccomp, os(&e)))?;
            }
        }
        Ok(())
    }

    /// Grants the places made in the child, then enters the Landlock domain.
    ///
    /// # Safety
    /// In the child between fork and exec.
    unsafe fn restrict(&self, ruleset: &OwnedFd) -> Result<(), (Step, i32)> {
        /// `struct landlock_path_beneath_attr` (packed in the kernel's headers).
        #[repr(C, packed)]
        struct PathBeneath {
            allowed_access: u64,
            parent_fd: i32,
        }
        const RULE_PATH_BENEATH: libc::c_int = 1;
        // SAFETY: raw system calls on literals and a stack value that outlives them.
        unsafe {
            for (path, rights) in &self.made {
                let fd = libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC);
                if fd < 0 {
                    return Err((Step::Landlock, mounts::errno()));
                }
                let rule = PathBeneath { allowed_access: *rights, parent_fd: fd };
                let added = libc::syscall(
                    libc::SYS_landlock_add_rule,
                    ruleset.as_raw_fd(),
                    RULE_PATH_BENEATH,
                    &raw const rule,
                    0,
                );
                libc::close(fd);
                if added != 0 {
                    return Err((Step::Landlock, mounts::errno()));
                }
            }
            if libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0 as libc::c_uint) != 0 {
                return Err((Step::Landlock, mounts::errno()));
            }
        }
        Ok(())
    }
}

impl Namespaces {
    /// Step 1 and 2 of the module docs.
    ///
    /// # Safety
    /// In the child between fork and exec.
    unsafe fn enter(&self) -> Result<(), (Step, i32)> {
        // SAFETY: raw system calls on C strings owned by `self` and literals.
        unsafe {
            if libc::unshare(self.flags) != 0 {
                return Err((Step::Unshare, mounts::errno()));
            }
            if let Some((uid_map, gid_map)) = &self.maps {
                // A process that is not dumpable (Heron, and so this fork of it) has its
                // `/proc/self` files owned by root, which an ordinary user cannot write: it
                // is dumpable for the three writes only (its memory is Heron's copy).
                libc::prctl(libc::PR_SET_DUMPABLE, 1 as libc::c_ulong, 0, 0, 0);
                // Without denying `setgroups`, an unprivileged process may not map its gid.
                let written = [
                    (c"/proc/self/setgroups", c"deny"),
                    (c"/proc/self/uid_map", uid_map),
                    (c"/proc/self/gid_map", gid_map),
                ]
                .into_iter()
                .try_for_each(|(file, content)| write_file(file, content));
                libc::prctl(libc::PR_SET_DUMPABLE, 0 as libc::c_ulong, 0, 0, 0);
                written.map_err(|errno| (Step::UserMap, errno))?;
            }
            if self.network {
                loopback_up().map_err(|errno| (Step::Network, errno))?;
            }
            if let Some(plan) = &self.mounts {
                plan.mount().map_err(|(_, errno)| (Step::Mount, errno))?;
            }
        }
        Ok(())
    }
}

/// The namespaces `walls` allow, with `mounts` to make and a network namespace if asked.
fn namespaces(walls: &Walls, mounts: Option<Plan>, network: bool) -> Option<Namespaces> {
    let pid = walls.pid_namespace;
    let mut flags = 0;
    if mounts.is_some() {
        flags |= libc::CLONE_NEWNS;
    }
    if pid {
        flags |= libc::CLONE_NEWPID | libc::CLONE_NEWIPC;
    }
    if network {
        flags |= libc::CLONE_NEWNET;
    }
    if flags == 0 {
        return None;
    }
    let maps = walls.user_namespace.then(|| {
        flags |= libc::CLONE_NEWUSER;
        // SAFETY: getuid and getgid take nothing and cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        let map = |id: u32| CString::new(format!("{id} {id} 1")).unwrap_or_default();
        (map(uid), map(gid))
    });
    Some(Namespaces {
        flags,
        maps,
        network,
        proc: pid && walls.private_proc && mounts.is_some(),
        mounts,
        pid,
    })
}

/// The mount plan of `policy`: the home and the host's sockets covered, `/tmp` from the
/// private temp folder (or the program's own, or a fresh one), the paths the program works
/// in kept at their names.
fn plan(policy: &Policy, home: &Path, temp: Option<&Path>, own_temp: Option<&Path>, proc: bool) -> Plan {
    // The ssh agent stays reachable, as its variable does; so do the roots and every place
    // the rules grant, should one lie in a covered folder or under `/tmp`.
    let ssh_agent = std::env::var_os("SSH_AUTH_SOCK").map(PathBuf::from);
    let host_temp = |path: &PathBuf| *path == std::env::temp_dir() || path == Path::new("/tmp");
    let mut keep: Vec<PathBuf> = ssh_agent.into_iter().chain(policy.roots.iter().cloned()).collect();
    keep.extend(policy.writable.iter().filter(|path| !host_temp(path)).cloned());
    keep.extend(policy.readable.iter().flatten().cloned());
    keep.extend(own_temp.map(Path::to_path_buf));
    let (mut folders, mut files) = super::sockets::covers(&policy.host_sockets, &keep);
    if home.is_dir() {
        folders.insert(0, home.to_path_buf());
    }
    // The credential stores that exist, covered like the home (Landlock hides them too).
    for store in policy.credentials.iter().filter_map(|path| std::fs::canonicalize(path).ok()) {
        match std::fs::metadata(&store) {
            Ok(meta) if meta.is_dir() => folders.push(store),
            Ok(meta) if meta.is_file() => files.push(store),
            _ => {}
        }
    }
    if !proc {
        files.extend(super::own::lineage_environs());
    }
    let tmp = match temp.or(own_temp).and_then(|path| CString::new(path.as_os_str().as_encoded_bytes()).ok())
    {
        Some(folder) => TmpSource::Folder(folder),
        None => TmpSource::Fresh,
    };
    Plan::new(&folders, &files, tmp, &keep)
}

/// The seccomp filters for this machine's walls, built once per process for each need.
fn filters(support: &Support) -> Option<&'static Filters> {
    static FILTERS: [std::sync::OnceLock<Option<Filters>>; 4] = [const { std::sync::OnceLock::new() }; 4];
    let pid = support.walls.pid_namespace;
    // Landlock scopes signals from ABI 6.
    let scoped = support.landlock.as_ref().is_ok_and(|abi| *abi >= 6);
    let needs = Needs { outside_processes: !pid, signals: !pid && !scoped };
    FILTERS[usize::from(needs.outside_processes) * 2 + usize::from(needs.signals)]
        .get_or_init(|| {
            seccomp::build(needs, &super::own::lineage_pids())
                .map_err(|error| tracing::warn!(%error, "the seccomp filter cannot be built"))
                .ok()
        })
        .as_ref()
}

/// Writes `content` to `file` (a `/proc/self` file that takes one write).
///
/// # Safety
/// In the child between fork and exec.
unsafe fn write_file(file: &CStr, content: &CStr) -> Result<(), i32> {
    // SAFETY: raw system calls on C strings that outlive them.
    unsafe {
        let fd = libc::open(file.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(mounts::errno());
        }
        let bytes = content.to_bytes();
        let written = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        let errno = mounts::errno();
        libc::close(fd);
        if usize::try_from(written).ok() != Some(bytes.len()) {
            return Err(errno);
        }
    }
    Ok(())
}

/// Brings up the loopback interface of a new network namespace (it starts down).
///
/// # Safety
/// In the child between fork and exec.
unsafe fn loopback_up() -> Result<(), i32> {
    // SAFETY: raw system calls on a zeroed `ifreq` on this stack frame.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(mounts::errno());
        }
        let mut request: libc::ifreq = std::mem::zeroed();
        request.ifr_name[0] = b'l' as libc::c_char;
        request.ifr_name[1] = b'o' as libc::c_char;
        let mut result = libc::ioctl(fd, libc::SIOCGIFFLAGS as _, &raw mut request);
        if result == 0 {
            request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            result = libc::ioctl(fd, libc::SIOCSIFFLAGS as _, &raw const request);
        }
        let errno = mounts::errno();
        libc::close(fd);
        if result != 0 {
            return Err(errno);
        }
    }
    Ok(())
}

fn os(error: &std::io::Error) -> i32 {
    error.raw_os_error().unwrap_or(libc::EPERM)
}
