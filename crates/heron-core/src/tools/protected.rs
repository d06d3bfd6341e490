//! The paths no tool reaches whatever the posture or the user's answers: Heron's own home
//! (`HERON_HOME`: API keys, config, the store), and the credential folders under the
//! user's home, which tools may read only after asking and never write.
//!
//! A path is judged after it was resolved (symlinks followed), both against the protected
//! folder as given and as resolved the same way, so neither a symlink to it nor a folder
//! that does not exist yet (under a symlinked one too) slips through. A hard link elsewhere
//! to a file directly in Heron's home, or to a file of a credential store, is caught by its
//! inode when it is opened.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::paths::{credential_folders, user_home};

/// Whose file an opened file is another name of (`Protected::other_name`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtherName {
    /// A file of Heron's home.
    Home,
    /// A file of one of the user's credential stores.
    Credential,
}

/// What a session's tools may never touch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Protected {
    /// Heron's home, as given and canonicalized.
    home: Vec<PathBuf>,
    /// The files directly in Heron's home, by (device, inode).
    home_files: HashSet<(u64, u64)>,
    /// The user's credential stores, as given and canonicalized.
    credentials: Vec<PathBuf>,
    /// The files of the credential stores, by (device, inode).
    credential_files: HashSet<(u64, u64)>,
}

/// How deep and how far the credential stores are walked for their files' inodes: they
/// hold a few files each (`.ssh`, `.gnupg/private-keys-v1.d`), and a store that holds more
/// (a password store of thousands) must not make every session slow to open.
const STORE_DEPTH: usize = 3;
const STORE_FILES: usize = 1024;

/// The (device, inode) of the regular files in `stores` (files, or folders walked
/// `STORE_DEPTH` deep), at most `STORE_FILES` of them. Symlinks are not followed.
fn store_files(stores: &[PathBuf]) -> HashSet<(u64, u64)> {
    let mut found = HashSet::new();
    let mut pending: Vec<(PathBuf, usize)> = stores.iter().map(|store| (store.clone(), 0)).collect();
    while let Some((path, depth)) = pending.pop() {
        if found.len() >= STORE_FILES {
            break;
        }
        let Ok(meta) = std::fs::symlink_metadata(&path) else { continue };
        if meta.is_file() {
            found.insert((meta.dev(), meta.ino()));
        } else if meta.is_dir() && depth < STORE_DEPTH {
            let entries = std::fs::read_dir(&path).into_iter().flatten().filter_map(Result::ok);
            pending.extend(entries.take(STORE_FILES).map(|entry| (entry.path(), depth + 1)));
        }
    }
    found
}

/// Both spellings of an absolute path: resolved as the kernel walks it, and as given. A
/// folder that does not exist yet is resolved up to its part that does: a credential store
/// not made yet under a symlinked folder (`~/.config` a link elsewhere) is named where it
/// would be made, which is where a tool's path to it resolves.
fn spellings(path: &Path) -> Vec<PathBuf> {
    let mut out = Vec::with_capacity(2);
    match path.to_str() {
        Some(text) => out.push(crate::paths::resolve_against(Path::new("/"), text)),
        None => out.extend(std::fs::canonicalize(path)),
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
        let stores = user_home.map(credential_folders).unwrap_or_default();
        let credential_files = store_files(&stores);
        let credentials = stores.iter().flat_map(|store| spellings(store)).collect();
        Self { home, home_files, credentials, credential_files }
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

    /// Whether the opened file at `path` is another name of a protected file: of a file of
    /// Heron's home, or of a credential file (a hard link in the workspace to
    /// `~/.ssh/id_ed25519`). The credential file's own path is judged by the path checks,
    /// which ask first.
    pub fn other_name(&self, meta: &std::fs::Metadata, path: &Path) -> Option<OtherName> {
        let key = (meta.dev(), meta.ino());
        if self.home_files.contains(&key) {
            return Some(OtherName::Home);
        }
        (self.credential_files.contains(&key) && !self.is_credentials(path)).then_some(OtherName::Credential)
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
    fn a_credential_store_not_made_yet_under_a_symlinked_folder_is_caught_where_it_would_be() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = std::fs::canonicalize(dir.path()).expect("canonical");
        let (user, elsewhere) = (root.join("user"), root.join("elsewhere"));
        std::fs::create_dir_all(&user).expect("user home");
        std::fs::create_dir_all(&elsewhere).expect("the link's target");
        std::os::unix::fs::symlink(&elsewhere, user.join(".config")).expect("~/.config a link");
        let protected = Protected::new(&root.join("heron"), Some(&user));
        // `~/.config/gcloud` does not exist: a tool's path into it resolves through the link.
        let resolved = crate::paths::resolve_against(&user, ".config/gcloud/credentials.db");
        assert_eq!(resolved, elsewhere.join("gcloud/credentials.db"));
        assert!(protected.is_credentials(&resolved), "caught where it would be made");
        assert!(protected.is_credentials(&user.join(".config/gcloud/credentials.db")), "and as given");
        assert!(!protected.is_credentials(&elsewhere.join("other")));
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

    #[test]
    fn a_hard_link_to_a_credential_file_is_refused_under_its_other_name_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let user = std::fs::canonicalize(dir.path()).expect("canonical");
        std::fs::create_dir_all(user.join(".ssh")).expect("ssh");
        std::fs::write(user.join(".ssh/id_ed25519"), "PRIVATE").expect("key");
        std::fs::create_dir_all(user.join(".docker")).expect("docker");
        std::fs::write(user.join(".docker/config.json"), "{}").expect("auths");
        std::fs::create_dir_all(user.join("ws")).expect("ws");
        std::fs::hard_link(user.join(".ssh/id_ed25519"), user.join("ws/notes.txt")).expect("link");
        std::fs::hard_link(user.join(".docker/config.json"), user.join("ws/d.json")).expect("link");
        std::fs::write(user.join("ws/plain.txt"), "hello").expect("plain");
        let protected = Protected::new(&user.join("heron"), Some(&user));
        let judged = |name: &str| {
            let path = user.join(name);
            protected.other_name(&std::fs::metadata(&path).expect("meta"), &path)
        };
        assert_eq!(judged("ws/notes.txt"), Some(OtherName::Credential));
        assert_eq!(judged("ws/d.json"), Some(OtherName::Credential));
        assert!(judged("ws/plain.txt").is_none());
        // The file's own path is left to the path checks, which ask.
        assert!(judged(".ssh/id_ed25519").is_none());
        assert!(protected.is_credentials(&user.join(".docker/config.json")));
        assert!(!protected.is_credentials(&user.join(".docker/buildx")));
    }

    #[test]
    fn a_credential_store_is_walked_three_levels_and_1024_files_deep_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = std::fs::canonicalize(dir.path()).expect("canonical").join("store");
        let inode = |path: &Path| {
            let meta = std::fs::symlink_metadata(path).expect("meta");
            (meta.dev(), meta.ino())
        };
        std::fs::create_dir_all(store.join("a/b/c")).expect("dirs");
        std::fs::write(store.join("a/b/three"), "k").expect("file");
        std::fs::write(store.join("a/b/c/four"), "k").expect("file");
        let found = store_files(std::slice::from_ref(&store));
        assert!(found.contains(&inode(&store.join("a/b/three"))), "three levels down is looked at");
        assert!(!found.contains(&inode(&store.join("a/b/c/four"))), "four levels down is not");

        let many = store.join("many");
        std::fs::create_dir(&many).expect("dir");
        for n in 0..STORE_FILES + 50 {
            std::fs::write(many.join(n.to_string()), "k").expect("file");
        }
        assert_eq!(store_files(&[many]).len(), STORE_FILES, "the files past the limit are not looked at");
    }
}
