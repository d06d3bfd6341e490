//! One child's Landlock ruleset, built in the parent: read and execute everywhere (or only
//! where the policy narrows reading to), write in the writable places, and nothing at all
//! inside the hidden paths (Heron's home, and the raw storage and memory devices through
//! which root could read the home's blocks). Beyond files, the child may neither connect to
//! an abstract Unix socket nor signal a process made outside its domain (Landlock ABI 6),
//! and, where the policy says so, neither bind nor connect TCP (ABI 4). Each of these is
//! best effort: an older kernel enforces what it knows and the rest is left out.
//!
//! Landlock only allows: a rule on a directory grants its whole hierarchy. So a hierarchy
//! that contains a hidden path is carved instead of granted: each of its entries gets the
//! rule on its own, except the one on the way to the hidden path, which is carved in turn,
//! down to the hidden path, which gets nothing. Directories get directory rules, other
//! files file rules; symlinks get none, since Landlock judges a file by the path it is
//! reached at after links are followed. The same carve applies to `/` for reading and to a
//! write root that contains the home (an editor opened on `~`).
//!
//! What the carve costs: a carved directory itself has no rule, so it cannot be listed and
//! nothing can be created, removed or renamed directly in it (`ls /`, `ls ~` and
//! `touch ~/new` fail when the home is `~/.heron`); its existing entries work as usual.
//! That is also what makes the carve stable: no sandboxed process can rename a directory
//! on the way to the home or plant a new entry there. Entries added later by others are
//! not covered until the next command, which prepares its rules anew.
//!
//! What it cannot see: another name for the home's files (a hard link, a bind mount)
//! outside the home is judged by that name.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, NetPort, PathBeneath, Ruleset, RulesetAttr, RulesetCreated,
    RulesetCreatedAttr, Scope,
};

use super::{Policy, SandboxError};

/// The ABI whose file rights Heron handles: all of them up to `IOCTL_DEV` (Linux 6.10);
/// ABIs 6 to 8 add no file right (6 adds the scopes below). An older kernel handles fewer
/// (the crate leaves out what it lacks). Later rights, such as connecting to Unix sockets
/// by path (ABI 9), stay unhandled until they are tested on a kernel that has them: they
/// would deny the sockets tools use outside the roots (the ssh agent's among them), so the
/// host's sockets by path are covered by the mount namespace instead (`sockets`).
const HANDLED: ABI = ABI::V5;

/// The ABI whose scopes Heron asks for: abstract Unix sockets and signals (ABI 6, Linux
/// 6.12). A child may still connect to the abstract sockets and signal the processes of its
/// own domain (what it started), never those of the host: a tmux, D-Bus or X11 server
/// listening on an abstract name would run what it is sent outside the sandbox.
const SCOPED: ABI = ABI::V6;

/// The ABI whose network rights a policy without network handles: binding and connecting
/// TCP (ABI 4, Linux 6.7). No port is granted, so every one is refused.
const NETWORK: ABI = ABI::V4;

/// The system's own secrets, hidden as well where a policy narrows reading (root reads
/// them otherwise): password hashes, the host's ssh keys, TLS private keys, sudo's rules.
const SYSTEM_SECRETS: [&str; 8] = [
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/ssh",
    "/etc/ssl/private",
    "/etc/sudoers",
    "/etc/sudoers.d",
];

/// The most rules one ruleset may hold: a bound on the directories walked for a carve.
const MAX_RULES: usize = 16_384;

/// What is writable besides the roots and the configured paths: the device files programs
/// open for writing, the terminal devices and POSIX shared memory.
const DEVICES: [&str; 9] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
    "/dev/shm",
];

/// Character devices in `/dev` that expose physical or kernel memory.
const MEMORY_DEVICES: [&str; 3] = ["mem", "kmem", "port"];

/// Reading, listing, executing, and device ioctls (which are not file contents).
fn read_rights() -> BitFlags<AccessFs> {
    AccessFs::from_read(HANDLED) | AccessFs::IoctlDev
}

/// Every right the ruleset handles, so every one not granted is refused.
fn handled() -> BitFlags<AccessFs> {
    AccessFs::from_all(HANDLED)
}

/// What a writable place grants: everything but making block and character devices, which
/// no program of the model's needs (through one, root reads the disk under every rule).
fn write_rights() -> BitFlags<AccessFs> {
    handled() & !(AccessFs::MakeBlock | AccessFs::MakeChar)
}

/// The read and the write rights as the kernel of Landlock ABI `abi` knows them, for the
/// rules the child adds itself to the places it mounts (see `child`).
pub(super) fn made_rights(abi: u32) -> (u64, u64) {
    let known = AccessFs::from_all(ABI::from(i32::try_from(abi).unwrap_or(i32::MAX)));
    ((read_rights() & known).bits(), (write_rights() & known).bits())
}

/// Where Heron's home really is: followed through symlinks as far as it exists, so that
/// the carve hides the directory itself and not a link to it. A path that cannot be
/// resolved exactly is refused: hiding the wrong path would expose the home.
pub(super) fn real_home(home: &Path) -> Result<PathBuf, SandboxError> {
    if let Ok(real) = std::fs::canonicalize(home) {
        return Ok(real);
    }
    let cwd =
        std::env::current_dir().map_err(|e| SandboxError::Prepare(format!("no current directory: {e}")))?;
    match home.to_str() {
        Some(home) => Ok(crate::paths::resolve_against(&cwd, home)),
        None => Err(SandboxError::Prepare("HERON_HOME does not exist and is not valid UTF-8".to_owned())),
    }
}

/// The TCP ports a policy without network still grants, to bind and to connect to: the
/// kit's port, and the program's own server ports only where `private_network` (the child
/// gets a network namespace of its own, whose loopback nothing outside shares). None with
/// `network`, whose TCP is not handled at all.
pub(super) fn granted_ports(policy: &Policy, private_network: bool) -> Vec<u16> {
    if policy.network {
        return Vec::new();
    }
    let own = policy.private_ports.iter().filter(|_| private_network);
    let mut ports: Vec<u16> = policy.port.iter().chain(own).copied().collect();
    ports.sort_unstable();
    ports.dedup();
    ports
}

/// Builds the ruleset of `policy` with `home` (from [`real_home`]) hidden and `temp` (the
/// child's temp folder) writable; returns its descriptor, ready for
/// `landlock_restrict_self`. With `private_tmp` (the child's `/tmp` is `temp`, in its own
/// mount namespace) the host's temp folders are not granted: nothing of theirs is there.
/// With `private_network` (the child gets its own network namespace) the policy's
/// `private_ports` are granted too ([`granted_ports`]).
pub(super) fn build(
    policy: &Policy,
    home: &Path,
    temp: Option<&Path>,
    private_tmp: bool,
    private_network: bool,
) -> Result<OwnedFd, SandboxError> {
    let mut hidden = vec![home.to_path_buf()];
    hidden.extend(raw_devices());
    if policy.readable.is_some() {
        hidden.extend(SYSTEM_SECRETS.iter().filter_map(|path| std::fs::canonicalize(path).ok()));
    }
    // The credential stores are hidden like the home. Only those that exist: carving a
    // missing one would carve its parent, and a carved directory takes no new entries
    // (`touch ~/new` would fail in a workspace on `~`).
    hidden.extend(policy.credentials.iter().filter_map(|path| std::fs::canonicalize(path).ok()));
    let mut ruleset = ruleset(policy.network).map_err(prepare)?;
    for port in granted_ports(policy, private_network) {
        let both = AccessNet::BindTcp | AccessNet::ConnectTcp;
        ruleset = ruleset.add_rule(NetPort::new(port, both)).map_err(prepare)?;
    }
    let mut rules = Rules { ruleset, hidden, list_carved: policy.list_carved, count: 0, max: MAX_RULES };

    let (root_fd, root) =
        open_following(Path::new("/")).map_err(|e| prepare(format!("cannot open /: {e}")))?;
    match &policy.readable {
        None => rules.grant(root_fd, &root, read_rights())?,
        Some(readable) => {
            // Names only, everywhere: what a confined program needs to carve for its own
            // children (see `Policy::list_carved`); contents stay out.
            if policy.list_carved {
                rules.grant(root_fd, &root, AccessFs::ReadDir.into())?;
            }
            for path in readable {
                // A folder this machine does not have is simply not granted.
                if let Ok((fd, real)) = open_following(path) {
                    rules.grant(fd, &real, read_rights())?;
                }
            }
        }
    }
    for root in &policy.roots {
        let (fd, real) = open_following(root)
            .map_err(|e| prepare(format!("cannot open the workspace root {}: {e}", root.display())))?;
        if real.starts_with(home) {
            return Err(SandboxError::RootInHome(root.clone()));
        }
        rules.grant(fd, &real, write_rights())?;
    }
    let devices = DEVICES.iter().map(PathBuf::from);
    let host_temp =
        |path: &&PathBuf| private_tmp && (**path == std::env::temp_dir() || *path == Path::new("/tmp"));
    let writable = policy.writable.iter().filter(|path| !host_temp(path)).cloned();
    for path in writable.chain(temp.map(Path::to_path_buf)).chain(devices) {
        // A cache or device that does not exist here is simply not granted.
        if let Ok((fd, real)) = open_following(&path) {
            rules.grant(fd, &real, write_rights())?;
        }
    }
    Option::<OwnedFd>::from(rules.ruleset)
        .ok_or_else(|| prepare("the kernel created no ruleset although it reported Landlock"))
}

/// An empty ruleset handling every file right, the scopes and, without `network`, TCP.
fn ruleset(network: bool) -> Result<RulesetCreated, landlock::RulesetError> {
    let mut ruleset = Ruleset::default().handle_access(handled())?.scope(Scope::from_all(SCOPED))?;
    if !network {
        ruleset = ruleset.handle_access(AccessNet::from_all(NETWORK))?;
    }
    ruleset.create()
}

fn prepare(reason: impl std::fmt::Display) -> SandboxError {
    SandboxError::Prepare(reason.to_string())
}

/// A ruleset being filled, with the paths it must leave out.
struct Rules {
    ruleset: RulesetCreated,
    hidden: Vec<PathBuf>,
    /// [`Policy::list_carved`].
    list_carved: bool,
    count: usize,
    /// The most rules it may hold: [`MAX_RULES`], less in tests.
    max: usize,
}

impl Rules {
    /// The paths the grant being made must leave out.
    fn left_out(&self) -> impl Iterator<Item = &PathBuf> {
        self.hidden.iter()
    }

    fn is_hidden(&self, path: &Path) -> bool {
        self.left_out().any(|hidden| path.starts_with(hidden))
    }

    fn leads_to_hidden(&self, path: &Path) -> bool {
        self.left_out().any(|hidden| hidden.starts_with(path))
    }

    /// Grants `rights` on the hierarchy at `real` (opened as `fd`): whole, carved, or not
    /// at all when it is hidden.
    fn grant(&mut self, fd: OwnedFd, real: &Path, rights: BitFlags<AccessFs>) -> Result<(), SandboxError> {
        if self.is_hidden(real) {
            tracing::debug!(path = %real.display(), "not granted: inside a hidden path");
            return Ok(());
        }
        let file = std::fs::File::from(fd);
        let is_dir = file.metadata().map_err(|e| prepare(format!("{}: {e}", real.display())))?.is_dir();
        if self.leads_to_hidden(real) {
            return self.carve(real, rights);
        }
        self.add(OwnedFd::from(file), is_dir, rights)
    }

    /// Grants `rights` on every entry of `dir` but the way to a hidden path, recursing
    /// down that way. An entry that cannot be opened or ruled stays out (denied).
    fn carve(&mut self, dir: &Path, rights: BitFlags<AccessFs>) -> Result<(), SandboxError> {
        if self.list_carved {
            let fd = open_path(dir, false).map_err(|e| prepare(format!("{}: {e}", dir.display())))?;
            self.add(fd, true, AccessFs::ReadDir.into())?;
        }
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) => {
                tracing::debug!(dir = %dir.display(), error = %e, "cannot list a directory to carve; its entries stay out");
                return Ok(());
            }
        };
        for entry in entries.flatten() {
            let path = dir.join(entry.file_name());
            if self.is_hidden(&path) {
                continue;
            }
            let Ok(fd) = open_path(&path, false) else { continue };
            let file = std::fs::File::from(fd);
            let Ok(meta) = file.metadata() else { continue };
            if meta.file_type().is_symlink() {
                continue;
            }
            if self.leads_to_hidden(&path) {
                if meta.is_dir() {
                    self.carve(&path, rights)?;
                }
                continue;
            }
            self.within_budget()?;
            if let Err(e) = self.add(OwnedFd::from(file), meta.is_dir(), rights) {
                tracing::debug!(path = %path.display(), error = %e, "an entry could not be ruled; it stays out");
            }
        }
        Ok(())
    }

    fn within_budget(&self) -> Result<(), SandboxError> {
        if self.count >= self.max {
            return Err(prepare(format!(
                "more than {} rules: too many entries on the way to a hidden path",
                self.max
            )));
        }
        Ok(())
    }

    fn add(&mut self, fd: OwnedFd, is_dir: bool, rights: BitFlags<AccessFs>) -> Result<(), SandboxError> {
        self.within_budget()?;
        // Directory rights on a file are invalid; Landlock would refuse the rule. A file
        // offered listing alone gets no rule at all.
        let rights = if is_dir { rights } else { rights & AccessFs::from_file(HANDLED) };
        if rights.is_empty() {
            return Ok(());
        }
        (&mut self.ruleset).add_rule(PathBeneath::new(fd, rights)).map_err(prepare)?;
        self.count += 1;
        Ok(())
    }
}

/// The block devices and memory devices in `/dev`: hidden, because reading them bypasses
/// every path rule.
fn raw_devices() -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir("/dev") else { return Vec::new() };
    entries
        .flatten()
        .filter(|entry| {
            let memory = entry.file_name().to_str().is_some_and(|name| MEMORY_DEVICES.contains(&name));
            memory || entry.file_type().is_ok_and(|kind| kind.is_block_device())
        })
        .map(|entry| entry.path())
        .collect()
}

/// Opens `path` following symlinks and says where it really is: the path of what was
/// opened, not of what was named, so a link swapped in between is judged by its target.
fn open_following(path: &Path) -> std::io::Result<(OwnedFd, PathBuf)> {
    let fd = open_path(path, true)?;
    let real = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .or_else(|_| std::fs::canonicalize(path))?;
    Ok((fd, real))
}

/// An `O_PATH` descriptor of `path` (no read or write access, nothing runs on open, so a
/// FIFO or device is never opened for real); the link itself when `follow` is false.
fn open_path(path: &Path, follow: bool) -> std::io::Result<OwnedFd> {
    let name = CString::new(path.as_os_str().as_bytes())?;
    let flags = libc::O_PATH | libc::O_CLOEXEC | if follow { 0 } else { libc::O_NOFOLLOW };
    loop {
        // SAFETY: `name` is NUL-terminated and outlives the call; these flags take no mode.
        let fd = unsafe { libc::open(name.as_ptr(), flags) };
        if fd >= 0 {
            // SAFETY: the descriptor was just opened and nothing else owns it.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        let error = std::io::Error::last_os_error();
        if error.kind() != std::io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules_hiding(hidden: &[&Path]) -> Rules {
        let ruleset = ruleset(true).expect("ruleset");
        Rules {
            ruleset,
            hidden: hidden.iter().map(|p| p.to_path_buf()).collect(),
            list_carved: false,
            count: 0,
            max: MAX_RULES,
        }
    }

    #[test]
    fn the_way_to_a_hidden_path_is_carved_and_the_rest_granted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = std::fs::canonicalize(dir.path()).expect("canonical");
        for sub in ["a/home", "a/sibling", "b"] {
            std::fs::create_dir_all(base.join(sub)).expect("dirs");
        }
        std::fs::write(base.join("a/file"), "x").expect("file");
        std::os::unix::fs::symlink(base.join("a/home"), base.join("a/link")).expect("link");
        let home = base.join("a/home");
        let mut rules = rules_hiding(&[&home]);
        assert!(rules.is_hidden(&home.join(".env")) && rules.leads_to_hidden(&base.join("a")));
        assert!(!rules.leads_to_hidden(&base.join("a/sibling")) && !rules.leads_to_hidden(&base.join("ab")));
        let (fd, real) = open_following(&base).expect("open");
        rules.grant(fd, &real, write_rights()).expect("granted");
        // `b`, then in `a`: `sibling` and `file`; not `home`, not the link to it.
        assert_eq!(rules.count, 3);
    }

    #[test]
    fn a_carve_past_its_rule_budget_refuses_the_sandbox_naming_the_bound() {
        assert_eq!(MAX_RULES, 16_384, "the production budget");
        let dir = tempfile::tempdir().expect("tempdir");
        let base = std::fs::canonicalize(dir.path()).expect("canonical");
        std::fs::create_dir(base.join("home")).expect("home");
        for index in 0..4 {
            std::fs::write(base.join(format!("file-{index}")), "x").expect("file");
        }
        let home = base.join("home");
        // Four entries beside the hidden path: within a budget of four, not of three.
        let mut rules = Rules { max: 4, ..rules_hiding(&[&home]) };
        let (fd, real) = open_following(&base).expect("open");
        rules.grant(fd, &real, read_rights()).expect("within the budget");
        assert_eq!(rules.count, 4);
        let mut rules = Rules { max: 3, ..rules_hiding(&[&home]) };
        let (fd, real) = open_following(&base).expect("open");
        let refused = rules.grant(fd, &real, read_rights()).expect_err("past the budget");
        assert!(
            matches!(&refused, SandboxError::Prepare(reason) if reason.starts_with("more than 3 rules")),
            "{refused:?}"
        );
    }

    #[test]
    fn a_programs_own_ports_are_granted_only_in_its_private_network_namespace() {
        let policy = |network: bool, port: Option<u16>, private_ports: Vec<u16>| Policy {
            network,
            port,
            private_ports,
            readable: Some(Vec::new()),
            ..Policy::from_config(
                &crate::config::Config::parse("").expect("parses"),
                &crate::config::Home::at("/srv/heron"),
                &crate::config::Keys::default(),
                Vec::new(),
            )
        };
        // The kit's port holds everywhere; the program's own only on a loopback of its own.
        let kit_and_own = policy(false, Some(40_000), vec![4096, 40_000]);
        assert_eq!(granted_ports(&kit_and_own, true), [4096, 40_000]);
        assert_eq!(granted_ports(&kit_and_own, false), [40_000]);
        assert!(granted_ports(&policy(false, None, vec![4096]), false).is_empty());
        assert!(granted_ports(&policy(false, None, Vec::new()), true).is_empty(), "no port, none granted");
        // With the network allowed, TCP is not handled, so no rule is added for a port.
        assert!(granted_ports(&policy(true, Some(1), vec![2]), true).is_empty());
    }

    #[test]
    fn a_hidden_hierarchy_gets_no_rule() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = std::fs::canonicalize(dir.path()).expect("canonical");
        let mut rules = rules_hiding(&[&home]);
        let (fd, real) = open_following(&home.join(".")).expect("open");
        rules.grant(fd, &real, read_rights()).expect("skipped");
        assert_eq!(rules.count, 0);
    }

    #[test]
    fn a_path_opened_through_a_link_is_judged_by_its_target() {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = std::fs::canonicalize(dir.path()).expect("canonical");
        std::fs::create_dir(base.join("home")).expect("home");
        std::os::unix::fs::symlink(base.join("home"), base.join("ws")).expect("link");
        let (_, real) = open_following(&base.join("ws")).expect("open");
        assert_eq!(real, base.join("home"));
    }

    #[test]
    fn a_missing_home_is_resolved_through_its_existing_parent() {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = std::fs::canonicalize(dir.path()).expect("canonical");
        std::os::unix::fs::symlink(&base, base.join("link")).expect("link");
        assert_eq!(real_home(&base.join("link/.heron")).expect("resolved"), base.join(".heron"));
    }
}
