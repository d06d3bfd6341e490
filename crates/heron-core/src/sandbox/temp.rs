//! The private temp folder of a session's confined children: made on first need under the
//! temp folder, given to each child as `TMPDIR` (and `TMP`, `TEMP`), and removed when the
//! last holder of the session's policy lets go.
//!
//! Why children do not simply use the temp folder: when `HERON_HOME` lies under it (a home
//! in `/tmp`, as in tests and throwaway setups), the sandbox carves the temp folder to hide
//! the home, and a carved folder takes no new entries, so `mkstemp` in `/tmp` fails and
//! with it `cargo`, `python3 -m tempfile` and every program that makes a temporary file.
//! A folder of the session's own, inside the temp folder, is granted whole.

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

/// Makes a new folder only this user can enter, under a name nobody could have taken.
fn make() -> Option<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let parent = std::env::temp_dir();
    for _ in 0..ATTEMPTS {
        let path = parent.join(format!("heron-{}-{}", std::process::id(), uuid::Uuid::new_v4().simple()));
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
    fn an_unused_policy_makes_no_folder() {
        let temp = PrivateTemp::default();
        assert!(temp.0.0.get().is_none());
    }
}
