//! Paths as the kernel resolves them, and the user's folders every layer protects: below
//! the config, the OS sandbox and the tools, which all judge paths by these. Invariant: a
//! path is resolved the way the kernel walks it (a symlink followed where it stands, so a
//! `..` after it leaves the folder it points to), and nothing here decides what is allowed.

use std::path::{Component, Path, PathBuf};

/// The credential stores developers keep under their home, folders and files: read only
/// after asking, never written. A folder is named where everything in it is a secret or
/// steers one (`.ssh`, `.gnupg`); a file where its folder also holds what tools rewrite
/// freely (`.kube/cache`, `.docker/buildx`). The table in docs/security.md lists them.
pub const CREDENTIAL_STORES: [&str; 24] = [
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".config/gh/hosts.yml",
    ".config/hub",
    ".config/git/credentials",
    ".git-credentials",
    ".netrc",
    ".docker/config.json",
    ".kube/config",
    ".npmrc",
    ".yarnrc.yml",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".terraform.d/credentials.tfrc.json",
    ".vault-token",
    ".password-store",
    ".local/share/keyrings",
    ".config/op",
    ".pgpass",
    ".my.cnf",
];

/// The credential stores under `user_home` (whether they exist or not): what the OS
/// sandbox keeps read-only when a write root contains them, and what the tools ask before
/// reading.
pub fn credential_folders(user_home: &Path) -> Vec<PathBuf> {
    CREDENTIAL_STORES.iter().map(|store| user_home.join(store)).collect()
}

/// The user's home, from `$HOME`.
pub(crate) fn user_home() -> Option<PathBuf> {
    std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from)
}

/// Resolves `path` against `base` as the kernel walks it: absolute, each existing
/// component's symlinks followed before the next component (a `..` included) is taken, the
/// part that does not exist appended with its `..` collapsed.
pub fn resolve_against(base: &Path, path: &str) -> PathBuf {
    let joined = if Path::new(path).is_absolute() { PathBuf::from(path) } else { base.join(path) };
    // `out` is canonical up to its last `unresolved` components, which do not exist.
    let mut out = PathBuf::new();
    let mut unresolved = 0usize;
    for component in joined.components() {
        match component {
            Component::Prefix(p) => out.push(p.as_os_str()),
            Component::RootDir => out.push(Component::RootDir.as_os_str()),
            Component::CurDir => {}
            // The canonical part's parent is the directory the kernel's `..` reaches; in the
            // part that does not exist there is nothing to follow.
            Component::ParentDir => {
                out.pop();
                unresolved = unresolved.saturating_sub(1);
            }
            Component::Normal(name) => {
                out.push(name);
                if unresolved > 0 {
                    unresolved += 1;
                    continue;
                }
                match std::fs::symlink_metadata(&out) {
                    // A directory or file of a canonical directory: canonical already.
                    Ok(meta) if !meta.file_type().is_symlink() => {}
                    // A link is followed whole (its own `..` too); one that cannot be (it
                    // dangles or loops) stays as written, for the checks to refuse.
                    Ok(_) => match std::fs::canonicalize(&out) {
                        Ok(target) => out = target,
                        Err(_) => unresolved = 1,
                    },
                    Err(_) => unresolved = 1,
                }
            }
        }
    }
    out
}
