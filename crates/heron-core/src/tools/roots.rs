//! The session's workspace roots and the confinement of file access to them: every path a
//! tool touches is resolved ([`resolve_against`]: absolute, symlinks followed, `..` taken as
//! the kernel takes it) before it is checked here, and writes are allowed only inside a root.
//!
//! The rules, in the order [`Roots::check_write`] applies them:
//!
//! 1. The path is resolved ([`resolve_against`]): relative to the cwd, then one
//!    component at a time from `/`, as the kernel walks it. A symlink is followed where
//!    it stands, so a `..` after it leaves the directory it points to (`build/../x`, with
//!    `build` a link to `vendor/sub`, is `vendor/x`, as a shell's `cat` reads it), never
//!    the one the link sits in. Once a component does not exist (or is a link that cannot
//!    be followed: dangling, a loop) the rest is taken as written, its `..` collapsed
//!    lexically. A symlinked parent directory is therefore judged by where it points, and
//!    every check below sees the final path.
//! 2. The resolved path must be inside a root, component-wise (`/work/ws-evil` is not inside
//!    `/work/ws`).
//! 3. A symlink that could not be followed (dangling, or a loop) anywhere on the way is
//!    refused: writing through it would create a file wherever it points.
//! 4. A path written with a trailing `/` names a directory and is refused.
//!
//! Checking and writing are separate system calls, so a process racing the agent could
//! swap a component in between; the file layer (`fsio`) therefore opens the resolved path
//! one component at a time without following symlinks, and refuses what changed. A file
//! with other hard links is replaced, never written through (see `fsio`).

use std::path::{Component, Path, PathBuf};

use super::protected::Protected;
use crate::paths::resolve_against;

/// The most additional directories a session may have.
pub const MAX_ADDITIONAL_DIRECTORIES: usize = 32;

/// Directories under the user's home that a session may never use as a root.
const PROTECTED_UNDER_HOME: [&str; 4] = [".ssh", ".gnupg", ".aws", ".config/gcloud"];

/// The write roots of a session: its cwd, then its additional directories, canonicalized;
/// and what no tool may touch even inside them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Roots {
    roots: Vec<PathBuf>,
    protected: Protected,
}

/// How a read of a resolved path goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadAccess {
    /// Inside the roots: it runs as the posture says for reads.
    Inside,
    /// Outside the roots: the user is asked first, as the posture says.
    Ask,
    /// In a credential folder (`~/.ssh`, ...): the user is asked first in every posture,
    /// yolo included, and the read is refused where nothing may ask.
    Credentials,
}

impl Roots {
    /// Roots from a cwd and additional directories (all absolute). Each is canonicalized
    /// when it exists, so that symlinked roots compare equal to resolved paths.
    pub fn new(cwd: PathBuf, additional: Vec<PathBuf>) -> Self {
        let roots = std::iter::once(cwd).chain(additional).map(|root| canonical_or_lexical(&root)).collect();
        Self { roots, protected: Protected::default() }
    }

    /// These roots, with `protected` kept out of reach whatever else they contain.
    #[must_use]
    pub fn protecting(mut self, protected: Protected) -> Self {
        self.protected = protected;
        self
    }

    /// What no tool may touch.
    pub fn protected(&self) -> &Protected {
        &self.protected
    }

    /// How a read of `resolved` goes; the `Err` (Heron's home) is a refusal for the model.
    pub fn read_access(&self, resolved: &Path, shown: &str) -> Result<ReadAccess, String> {
        if let Some(refusal) = self.protected.refusal(resolved, shown) {
            return Err(refusal);
        }
        if self.protected.is_credentials(resolved) {
            Ok(ReadAccess::Credentials)
        } else if self.is_inside(resolved) {
            Ok(ReadAccess::Inside)
        } else {
            Ok(ReadAccess::Ask)
        }
    }

    /// The roots, cwd first.
    pub fn all(&self) -> &[PathBuf] {
        &self.roots
    }

    /// The session's cwd as resolved (the first root).
    pub fn cwd(&self) -> &Path {
        &self.roots[0]
    }

    /// Whether `path` (already resolved) is inside a root. Same as [`Roots::is_inside`].
    pub fn contains(&self, path: &Path) -> bool {
        self.is_inside(path)
    }

    /// Whether `resolved` is a root or inside one, compared component by component.
    pub fn is_inside(&self, resolved: &Path) -> bool {
        self.roots.iter().any(|root| resolved.starts_with(root))
    }

    /// Resolves `path` against the cwd (see the module rules).
    pub fn resolve(&self, path: &str) -> PathBuf {
        resolve_against(self.cwd(), path)
    }

    /// Resolves `path` for writing and checks it against the rules; the `Err` is a message
    /// for the model.
    pub fn check_write(&self, path: &str) -> Result<PathBuf, String> {
        self.check_write_resolved(self.resolve(path), path)
    }

    /// [`Roots::check_write`] for a path already resolved (by [`resolve_against`]).
    pub fn check_write_resolved(&self, resolved: PathBuf, shown: &str) -> Result<PathBuf, String> {
        if let Some(refusal) = self.protected.refusal(&resolved, shown) {
            return Err(refusal);
        }
        if self.protected.is_credentials(&resolved) {
            return Err(format!(
                "{shown} is in a credential folder ({}); tools never write there",
                resolved.display()
            ));
        }
        if !self.is_inside(&resolved) {
            return Err(format!(
                "{shown} resolves to {}, which is outside the workspace roots ({}); writes are allowed \
                 only inside them",
                resolved.display(),
                self.describe()
            ));
        }
        // The part that did not canonicalize must not contain a symlink: the resolved path
        // exists only up to its canonical prefix, so any link found here is dangling.
        let mut probe = resolved.clone();
        loop {
            if let Ok(meta) = std::fs::symlink_metadata(&probe) {
                if meta.file_type().is_symlink() {
                    let looping =
                        std::fs::metadata(&probe).is_err_and(|e| e.raw_os_error() == Some(libc::ELOOP));
                    let what = if looping { "a symlink loop" } else { "a symlink that points nowhere" };
                    return Err(format!(
                        "{shown}: {} is {what}; refusing to write through it",
                        probe.display()
                    ));
                }
                break;
            }
            if !probe.pop() {
                break;
            }
        }
        if shown.ends_with('/') || std::fs::metadata(&resolved).is_ok_and(|m| m.is_dir()) {
            return Err(format!("{shown} is a directory; name a file to write"));
        }
        Ok(resolved)
    }

    fn describe(&self) -> String {
        self.roots.iter().map(|r| r.display().to_string()).collect::<Vec<_>>().join(", ")
    }
}

/// Collapses `.` and `..` without touching the file system (`..` at the root stays there).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Prefix(p) => out.push(p.as_os_str()),
            Component::RootDir => out.push(Component::RootDir.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => out.push(name),
        }
    }
    out
}

fn canonical_or_lexical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| normalize(path))
}

/// What is wrong with a workspace root.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RootProblem {
    /// Not an absolute path.
    Relative,
    /// Not an existing directory.
    Missing,
    /// Owned by another user.
    NotOwned,
    /// Is or is inside a protected path (Heron's home, credential folders).
    Protected,
    /// Overlaps the cwd or another root.
    Overlap,
    /// More roots than allowed.
    TooMany,
}

/// Why an additional directory was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("additional directory {index}: {reason}")]
pub struct RootError {
    /// The index of the refused entry.
    pub index: usize,
    /// What is wrong with it.
    pub problem: RootProblem,
    /// A human explanation.
    pub reason: String,
}

impl RootError {
    fn new(index: usize, problem: RootProblem, reason: String) -> Self {
        Self { index, problem, reason }
    }
}

/// Where the kernel shows processes, devices and itself as files. None is a project, and
/// a session rooted there would let file tools write kernel settings (`/proc/sys`) or
/// device nodes without a question.
const PSEUDO_ROOTS: [&str; 3] = ["/proc", "/sys", "/dev"];

/// Why `canonical` (resolved) cannot be a workspace root because it is on one of the
/// kernel's pseudo-filesystems: under [`PSEUDO_ROOTS`], or on a proc, sysfs, devpts,
/// cgroup, debugfs, tracefs, securityfs or bpf mount wherever it is mounted.
fn pseudo_filesystem(canonical: &Path) -> Option<String> {
    if let Some(root) = PSEUDO_ROOTS.iter().find(|root| canonical.starts_with(root)) {
        return Some(format!("is in {root}, the kernel's view of the system, not a folder of files"));
    }
    on_pseudo_mount(canonical).then(|| "is on a kernel pseudo-filesystem, not a folder of files".to_owned())
}

#[cfg(target_os = "linux")]
fn on_pseudo_mount(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(name) = std::ffi::CString::new(path.as_os_str().as_bytes()) else { return false };
    // SAFETY: an all-zero `statfs` is a valid value of the plain C struct.
    let mut stat: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `name` is NUL-terminated and `stat` is a valid place for the answer, both
    // alive for the call.
    if unsafe { libc::statfs(name.as_ptr(), &raw mut stat) } != 0 {
        return false;
    }
    [
        libc::PROC_SUPER_MAGIC,
        libc::SYSFS_MAGIC,
        libc::DEVPTS_SUPER_MAGIC,
        libc::CGROUP_SUPER_MAGIC,
        libc::CGROUP2_SUPER_MAGIC,
        libc::DEBUGFS_MAGIC,
        libc::TRACEFS_MAGIC,
        libc::SECURITYFS_MAGIC,
        libc::BPF_FS_MAGIC,
    ]
    .contains(&stat.f_type)
}

#[cfg(not(target_os = "linux"))]
fn on_pseudo_mount(_: &Path) -> bool {
    false
}

/// Checks a session's working directory: absolute, an existing directory, not the file
/// system's root nor on a kernel pseudo-filesystem (`/proc`, `/sys`, `/dev`), not Heron's home or a credential folder nor inside one (it may contain
/// Heron's home: tools then step around it). Returns it canonicalized.
pub fn validate_cwd(cwd: &str, protected: &Protected) -> Result<PathBuf, (RootProblem, String)> {
    let path = Path::new(cwd);
    if !path.is_absolute() {
        return Err((RootProblem::Relative, format!("{cwd} is not an absolute path")));
    }
    let canonical = match std::fs::canonicalize(path) {
        Ok(canonical) if canonical.is_dir() => canonical,
        Ok(_) => return Err((RootProblem::Missing, format!("{cwd} is not a directory"))),
        Err(e) => return Err((RootProblem::Missing, format!("{cwd} cannot be used: {e}"))),
    };
    if canonical.parent().is_none() {
        return Err((RootProblem::Protected, "the file system's root cannot be a workspace".to_owned()));
    }
    if let Some(reason) = pseudo_filesystem(&canonical) {
        return Err((RootProblem::Protected, format!("{cwd} {reason}; open a project instead")));
    }
    if protected.is_home(&canonical) || protected.is_credentials(&canonical) {
        return Err((
            RootProblem::Protected,
            format!("{cwd} is Heron's home or a credential folder, or inside one; open a project instead"),
        ));
    }
    Ok(canonical)
}

/// Checks a session's additional directories and returns them canonicalized. `protected`
/// lists paths no root may be or be inside (such as HERON_HOME), besides the credential
/// directories under the user's home; like the cwd, a root may contain them.
pub fn validate_additional_directories(
    dirs: &[String],
    cwd: &Path,
    protected: &[PathBuf],
) -> Result<Vec<PathBuf>, RootError> {
    if dirs.len() > MAX_ADDITIONAL_DIRECTORIES {
        return Err(RootError::new(
            MAX_ADDITIONAL_DIRECTORIES,
            RootProblem::TooMany,
            format!("{} directories given; at most {MAX_ADDITIONAL_DIRECTORIES} are allowed", dirs.len()),
        ));
    }
    let cwd = canonical_or_lexical(cwd);
    let protected = protected_paths(protected);
    let mut accepted: Vec<PathBuf> = Vec::with_capacity(dirs.len());
    for (index, dir) in dirs.iter().enumerate() {
        if !Path::new(dir).is_absolute() {
            return Err(RootError::new(
                index,
                RootProblem::Relative,
                format!("{dir} is not an absolute path"),
            ));
        }
        let canonical = match std::fs::canonicalize(dir) {
            Ok(path) if path.is_dir() => path,
            Ok(_) => {
                return Err(RootError::new(index, RootProblem::Missing, format!("{dir} is not a directory")));
            }
            Err(e) => {
                return Err(RootError::new(
                    index,
                    RootProblem::Missing,
                    format!("{dir} cannot be used: {e}"),
                ));
            }
        };
        if let Some(reason) = pseudo_filesystem(&canonical) {
            return Err(RootError::new(index, RootProblem::Protected, format!("{dir} {reason}")));
        }
        if let Some(reason) = not_owned(&canonical) {
            return Err(RootError::new(index, RootProblem::NotOwned, format!("{dir} {reason}")));
        }
        // One that contains a protected path is accepted, as a cwd is: tools step around
        // it and the sandbox carves it out.
        if let Some(p) = protected.iter().find(|p| canonical.starts_with(p)) {
            return Err(RootError::new(
                index,
                RootProblem::Protected,
                format!("{dir} is or is inside the protected path {}", p.display()),
            ));
        }
        if overlaps(&canonical, &cwd) {
            return Err(RootError::new(
                index,
                RootProblem::Overlap,
                format!("{dir} overlaps the session's cwd {}", cwd.display()),
            ));
        }
        if let Some(other) = accepted.iter().position(|a| overlaps(&canonical, a)) {
            return Err(RootError::new(
                index,
                RootProblem::Overlap,
                format!("{dir} overlaps additional directory {other}"),
            ));
        }
        accepted.push(canonical);
    }
    Ok(accepted)
}

/// Whether either path is inside the other (or they are equal).
fn overlaps(a: &Path, b: &Path) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// The protected paths, each both as given and canonicalized (a symlink to one is caught
/// through the canonical form, a not-yet-existing one through the lexical form).
fn protected_paths(extra: &[PathBuf]) -> Vec<PathBuf> {
    let mut candidates: Vec<PathBuf> = extra.iter().filter(|p| p.is_absolute()).cloned().collect();
    if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        let home = PathBuf::from(home);
        candidates.extend(PROTECTED_UNDER_HOME.iter().map(|d| home.join(d)));
    }
    let mut out = Vec::with_capacity(candidates.len() * 2);
    for path in candidates {
        if let Ok(canonical) = std::fs::canonicalize(&path) {
            out.push(canonical);
        }
        out.push(normalize(&path));
    }
    out
}

#[cfg(unix)]
fn not_owned(dir: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(dir).ok()?;
    // SAFETY: getuid has no preconditions and cannot fail.
    let me = unsafe { libc::getuid() };
    (meta.uid() != me).then(|| format!("is owned by uid {}, not by the current user (uid {me})", meta.uid()))
}

#[cfg(not(unix))]
fn not_owned(_: &Path) -> Option<String> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_collapses_dots_and_stops_at_the_root() {
        assert_eq!(normalize(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        assert_eq!(normalize(Path::new("/../../etc")), PathBuf::from("/etc"));
    }

    #[test]
    fn the_kernels_pseudo_filesystems_are_no_workspace() {
        let protected = Protected::default();
        for cwd in ["/proc", "/proc/self", "/proc/sys/kernel", "/sys", "/sys/kernel", "/dev", "/dev/shm"] {
            if !Path::new(cwd).is_dir() {
                continue;
            }
            let refused = validate_cwd(cwd, &protected);
            assert!(matches!(refused, Err((RootProblem::Protected, _))), "{cwd}: {refused:?}");
            let listed =
                validate_additional_directories(&[cwd.to_owned()], Path::new("/nonexistent-cwd"), &[]);
            assert!(
                matches!(listed, Err(RootError { problem: RootProblem::Protected, .. })),
                "{cwd}: {listed:?}"
            );
        }
        let ws = tempfile::tempdir().expect("tempdir");
        let ok = validate_cwd(&ws.path().display().to_string(), &protected);
        assert!(ok.is_ok(), "an ordinary folder is a workspace: {ok:?}");
        // A path that only starts with the same letters is not inside them.
        assert!(pseudo_filesystem(Path::new("/devices/x")).is_none());
    }

    #[test]
    fn is_inside_compares_components_not_prefixes() {
        let roots = Roots { roots: vec![PathBuf::from("/work/ws")], protected: Protected::default() };
        assert!(roots.is_inside(Path::new("/work/ws/a")));
        assert!(roots.is_inside(Path::new("/work/ws")));
        assert!(!roots.is_inside(Path::new("/work/ws-evil/a")));
    }
}
