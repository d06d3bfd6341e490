//! Where tests lay out directories that the OS sandbox must tell apart from the temp folder
//! it lets every command write: a home or an "outside" directory under /tmp would be
//! writable through that rule, and a refused write there would prove nothing.

use std::path::{Path, PathBuf};

/// The build's temp folder, unless the checkout itself lives in a temp folder (a clone under
/// /tmp), in which case a scratch folder in the user's home.
pub fn dir() -> PathBuf {
    let build = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let temp = [std::env::temp_dir(), PathBuf::from("/tmp")];
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    if !temp.iter().any(|t| canonical(&build).starts_with(canonical(t))) {
        return build;
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).expect("HOME, for a scratch folder outside /tmp");
    let scratch = home.join(".heron-sandbox-tests");
    std::fs::create_dir_all(&scratch).expect("scratch folder");
    scratch
}
