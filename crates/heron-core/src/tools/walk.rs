//! Walking a directory tree for the search tools the way a developer would: `.gitignore`
//! and friends respected (with or without a git repository), hidden files and `.git`
//! skipped, symlinks not followed, entries in sorted order. Stops as soon as cancelled.

use std::ops::ControlFlow;
use std::path::Path;

use globset::{Glob, GlobMatcher};
use tokio_util::sync::CancellationToken;

use super::FileWitness;

/// Compiles a glob pattern; the `Err` is a message for the model.
pub(crate) fn glob(pattern: &str) -> Result<GlobMatcher, String> {
    Glob::new(pattern)
        .map(|g| g.compile_matcher())
        .map_err(|e| format!("invalid glob pattern {pattern:?}: {e}"))
}

/// Calls `visit` with every file under `root` (or `root` itself when it is a file) whose
/// path relative to `root` matches `filter`, in sorted order, until `visit` breaks or
/// `cancel` fires; `witness` sees each file first. Returns `false` when cancelled.
pub(crate) fn files(
    root: &Path,
    filter: Option<&GlobMatcher>,
    cancel: &CancellationToken,
    witness: Option<&dyn FileWitness>,
    mut visit: impl FnMut(&Path) -> ControlFlow<()>,
) -> bool {
    let walker = ignore::WalkBuilder::new(root)
        .hidden(true)
        .git_ignore(true)
        .git_exclude(true)
        .ignore(true)
        .parents(true)
        .require_git(false)
        .follow_links(false)
        .filter_entry(|entry| entry.file_name() != ".git")
        .sort_by_file_name(|a, b| a.cmp(b))
        .build();
    for entry in walker {
        if cancel.is_cancelled() {
            return false;
        }
        let Ok(entry) = entry else { continue };
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let path = entry.path();
        if let Some(filter) = filter {
            let relative = path.strip_prefix(root).ok().filter(|r| !r.as_os_str().is_empty());
            let name = relative.unwrap_or_else(|| Path::new(path.file_name().unwrap_or_default()));
            if !filter.is_match(name) {
                continue;
            }
        }
        if let Some(witness) = witness {
            witness.before_use(path);
        }
        if visit(path).is_break() {
            break;
        }
    }
    true
}
