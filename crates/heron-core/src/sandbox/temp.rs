//! The private temp folder of a session's confined children: made on first need under the
//! temp folder, given to each child as `TMPDIR` (and `TMP`, `TEMP`), and removed when the
//! last holder of the session's policy lets go.
//!
//! Why children do not simply use the temp folder: when `HERON_HOME` lies under it (a home
//! in `/tmp`, as in tests and throwaway setups), the sandbox carves the temp folder to hide
//! the home, and a carved folder takes no new entries, so `mkstemp` in `/tmp` fails and
//! with it `cargo`, `python3 -m tempfile` and every program that makes a temporary file.
//! A folder of the session's own, inside the temp folder, is granted whole.
//!
//! A process that ends before its sessions do (killed, or exiting while the removal waits
//! on the blocking pool) leaves its folders behind; the next folder made sweeps those of
//! processes that are gone.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// How many names are tried before giving up on making the folder.
const ATTEMPTS: usize = 8;

/// A session's private temp folder, shared by every clone of its policy.
#[derive(Debug, Clone, Default)]
pub struct PrivateTemp(Arc<Slot>);

/// The folder once made (or `None` when it could not be).
#[derive(Debug, Default)]
struct Slot(OnceLock<Option<PathBuf>>);

impl PrivateTemp {
    /// The folder, made on the first call under `std::env::temp_dir()` (this blocks: call
    /// it on the blocking pool). `None` when it cannot be made; children then keep the
    /// temp folder they inherit.
    pub(super) fn path(&self) -> Option<&Path> {
        self.0.0.get_or_init(make).as_deref()
    }
}

/// The start of every folder's name; the rest is the making process's id and a random part.
const PREFIX: &str = "heron-";

/// Makes a new folder only this user can enter, under a name nobody could have taken.
fn make() -> Option<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let parent = std::env::temp_dir();
    sweep(&parent);
    for _ in 0..ATTEMPTS {
        let path = parent.join(format!("{PREFIX}{}-{}", std::process::id(), uuid::Uuid::new_v4().simple()));
        // `create` fails on an existing name (a link planted there included): never reuse one.
        match std::fs::DirBuilder::new().mode(0o700).create(&path) {
            Ok(()) => return Some(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(error) => {
                tracing::debug!(%error, parent = %parent.display(), "cannot make a private temp folder for commands");
                return None;
            }
        }
    }
    None
}

/// Removes the folders in `parent` that a process of this user made and that outlived it:
/// named as [`make`] names them, real folders (not links), owned by this user, of a process
/// id that no longer runs. One whose id was taken by another process since stays.
/// Within bounds, as it runs each time a folder is made: a shared temp folder can hold
/// anything others put there.
fn sweep(parent: &Path) {
    sweep_within(parent, MAX_SWEPT_ENTRIES, MAX_SWEPT_FOLDERS);
}

/// The most entries of the temp folder one sweep looks at.
const MAX_SWEPT_ENTRIES: usize = 100_000;

/// The most left-behind folders one sweep removes; the next sweep goes on.
const MAX_SWEPT_FOLDERS: usize = 64;

/// [`sweep`], looking at `entries` entries of `parent` at most and removing `folders`.
fn sweep_within(parent: &Path, entries: usize, folders: usize) {
    use std::os::unix::fs::MetadataExt;
    let Ok(listing) = std::fs::read_dir(parent) else { return };
    // SAFETY: getuid takes nothing and cannot fail.
    let uid = unsafe { libc::getuid() };
    let mut removed = 0;
    for entry in listing.take(entries).flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(made_by) else { continue };
        let path = entry.path();
        let ours = std::fs::symlink_metadata(&path).is_ok_and(|meta| meta.is_dir() && meta.uid() == uid);
        if ours && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(&path);
            removed += 1;
            if removed == folders {
                return;
            }
        }
    }
}

/// The id of the process that made a folder named `name`, when [`make`] named it.
fn made_by(name: &str) -> Option<u32> {
    let (pid, random) = name.strip_prefix(PREFIX)?.split_once('-')?;
    let random_ok = random.len() == 32 && random.bytes().all(|b| b.is_ascii_hexdigit());
    random_ok.then(|| pid.parse().ok()).flatten()
}

impl Drop for Slot {
    fn drop(&mut self) {
        let Some(Some(path)) = self.0.take() else { return };
        let remove = move || {
            if let Err(error) = std::fs::remove_dir_all(&path) {
                tracing::debug!(%error, path = %path.display(), "cannot remove a private temp folder");
            }
        };
        // Whatever a build left there may be large: never block an async thread on it.
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(remove)),
            Err(_) => remove(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_folder_is_made_once_private_and_removed_with_the_last_holder() {
        use std::os::unix::fs::PermissionsExt;
        let temp = PrivateTemp::default();
        let shared = temp.clone();
        let path = temp.path().expect("made").to_path_buf();
        assert_eq!(shared.path(), Some(path.as_path()), "one folder for every clone");
        let mode = std::fs::metadata(&path).expect("exists").permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{mode:o}");
        std::fs::write(path.join("left-behind"), "x").expect("write");
        drop(temp);
        assert!(path.exists(), "a clone still holds it");
        drop(shared);
        assert!(!path.exists(), "removed with its contents");
    }

    #[test]
    fn a_folder_left_by_a_process_that_is_gone_is_swept_and_a_living_ones_kept() {
        // Above the kernel's PID_MAX_LIMIT: no process has it. (The id of a process that
        // just ended may be taken again within milliseconds on a busy machine.)
        let gone_pid = 4_194_305;
        let random = || uuid::Uuid::new_v4().simple().to_string();
        let temp = std::env::temp_dir();
        let left = temp.join(format!("{PREFIX}{gone_pid}-{}", random()));
        let living = temp.join(format!("{PREFIX}{}-{}", std::process::id(), random()));
        let other = temp.join(format!("{PREFIX}{gone_pid}-not-ours-{}", random()));
        for folder in [&left, &living, &other] {
            std::fs::create_dir(folder).expect("a folder");
        }
        std::fs::write(left.join("file"), "x").expect("contents");
        let made = PrivateTemp::default();
        assert!(made.path().is_some());
        let (left_gone, living_kept, other_kept) = (!left.exists(), living.exists(), other.exists());
        for folder in [&living, &other] {
            let _ = std::fs::remove_dir(folder);
        }
        assert!(left_gone, "the folder of a process that is gone was swept");
        assert!(living_kept && other_kept, "a living process's folder and other names stay");
    }

    #[test]
    fn a_sweep_looks_at_and_removes_a_bounded_number() {
        let dir = tempfile::tempdir().expect("tempdir");
        let stale = |n: usize| dir.path().join(format!("{PREFIX}4194305-{:032x}", n));
        for n in 0..10 {
            std::fs::create_dir(stale(n)).expect("a folder");
        }
        let left = || (0..10).filter(|n| stale(*n).exists()).count();
        sweep_within(dir.path(), 1000, 3);
        assert_eq!(left(), 7, "three removed");
        sweep_within(dir.path(), 2, 100);
        assert!(left() >= 5, "at most two entries looked at");
        sweep_within(dir.path(), 1000, 100);
        assert_eq!(left(), 0);
    }

    #[test]
    fn an_unused_policy_makes_no_folder() {
        let temp = PrivateTemp::default();
        assert!(temp.0.0.get().is_none());
    }
}
