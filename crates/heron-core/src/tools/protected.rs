//! The paths no tool reaches whatever the posture or the user's answers: Heron's own home
//! (`HERON_HOME`: API keys, config, the store), and the credential folders under the
//! user's home, which tools may read only after asking and never write.
//!
//! A path is judged after it was resolved (symlinks followed), both against the protected
//! folder as given and as canonicalized, so neither a symlink to it nor a folder that does
//! not exist yet slips through. A hard link elsewhere to a file directly in Heron's home is
//! caught by its inode.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::paths::{credential_folders, user_home};

/// What a session's tools may never touch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Protected {
    /// Heron's home, as given and canonicalized.
    home: Vec<PathBuf>,
    /// The files directly in Heron's home, by (device, inode).
    home_files: HashSet<(u64, u64)>,
    /// The user's credential folders, as given and canonicalized.
    credentials: Vec<PathBuf>,
}

/// Both spellings of an absolute path: canonicalized when it exists, and as given.
fn spellings(path: &Path) -> Vec<PathBuf> {
    let mut out = Vec::with_capacity(2);
    if let Ok(canonical) = std::fs::canonicalize(path) {
        out.push(canonical);
    }
    if !out.contains(&path.to_path_buf()) {
        out.push(path.to_path_buf());
    }
    out
}

impl Protected {
    /// Protects Heron's home `heron_home`, and the credential folders under `user_home`.
    pub fn new(heron_home: &Path, user_home: Option<&Path>) -> Self {
        let home = spellings(heron_home);
        let home_files = std::fs::read_dir(heron_home)
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .filter_map(|entry| std::fs::symlink_metadata(entry.path()).ok())
            .filter(std::fs::Metadata::is_file)
            .map(|meta| (meta.dev(), meta.ino()))
            .collect();
        let credentials = user_home
            .map(|user| credential_folders(user).into_iter().flat_map(|dir| spellings(&dir)).collect())
            .unwrap_or_default();
        Self { home, home_files, credentials }
    }

    /// Protection for this process: Heron's home at `heron_home`, and the credential
    /// folders under `$HOME`.
    pub fn for_home(heron_home: &Path) -> Self {
        Self::new(heron_home, user_home().as_deref())
    }

    /// Whether `resolved` is Heron's home or inside it.
    pub fn is_home(&self, resolved: &Path) -> bool {
        self.home.iter().any(|home| resolved.starts_with(home))
    }

    /// Whether `resolved` contains Heron's home (a walk from it must step around it).
    pub fn contains_home(&self, resolved: &Path) -> bool {
        self.home.iter().any(|home| home.starts_with(resolved))
    }

    /// Whether `resolved` is in a credential folder.
    pub fn is_credentials(&self, resolved: &Path) -> bool {
        self.credentials.iter().any(|dir| resolved.starts_with(dir))
    }

    /// Whether an opened file is one of Heron's home, reached by another name.
    pub fn is_home_file(&self, meta: &std::fs::Metadata) -> bool {
        self.home_files.contains(&(meta.dev(), meta.ino()))
    }

    /// Why a tool may not use `resolved` at all, if it may not.
    pub fn refusal(&self, resolved: &Path, shown: &str) -> Option<String> {
        self.is_home(resolved).then(|| {
            format!(
                "{shown} is inside Heron's home ({}), which holds the user's keys; no tool may read, list or \
                 change anything there",
                self.home.first().map_or_else(String::new, |h| h.display().to_string())
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_home_is_caught_through_a_symlink_and_before_it_exists() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = std::fs::canonicalize(dir.path()).expect("canonical");
        std::fs::create_dir_all(root.join("real-home")).expect("home");
        std::fs::write(root.join("real-home/.env"), "KEY=1").expect("env");
        std::os::unix::fs::symlink(root.join("real-home"), root.join("heron")).expect("link");
        let protected = Protected::new(&root.join("heron"), Some(&root));
        assert!(protected.is_home(&root.join("real-home/.env")), "through the symlink");
        assert!(protected.is_home(&root.join("heron/x")));
        assert!(!protected.is_home(&root.join("real-home-2")));
        assert!(protected.contains_home(&root));
        let later = Protected::new(&root.join("not-yet"), None);
        assert!(later.is_home(&root.join("not-yet/config.toml")));
    }

    #[test]
    fn a_hard_link_to_a_home_file_is_recognised() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = std::fs::canonicalize(dir.path()).expect("canonical");
        std::fs::create_dir_all(root.join("home")).expect("home");
        std::fs::write(root.join("home/.env"), "KEY=1").expect("env");
        std::fs::hard_link(root.join("home/.env"), root.join("alias")).expect("link");
        let protected = Protected::new(&root.join("home"), None);
        let meta = std::fs::metadata(root.join("alias")).expect("meta");
        assert!(protected.is_home_file(&meta));
    }
}
