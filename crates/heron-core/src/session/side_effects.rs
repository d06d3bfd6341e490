//! What a turn's commands changed: the workspace's files stamped (size, times, inode) just
//! before the turn's first command runs and again at its end; a file whose stamp moved and
//! that Heron's own file tools did not write meanwhile was changed by a command, which no
//! rewind can undo. Only turns that run a command pay for it, and only a walk with one
//! `lstat` a file: nothing is read. Bounded: past [`MAX_FILES`] files the check is skipped
//! and says so. The walk is the search tools' (ignored and hidden files left out, links not
//! followed). The stamp is a change detector, not a defence: it only decides what a rewind
//! lists (a change time cannot be set back from user space, so a command cannot hide a
//! change by restoring a file's modification time).

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use tokio_util::sync::CancellationToken;

use crate::tools::protected::Protected;
use crate::tools::walk::{self, Links, Seen};

/// The most files a workspace may hold for its changes to be checked.
pub const MAX_FILES: usize = 20_000;
/// The most changed files one turn lists (the count says how many more).
pub const MAX_LISTED: usize = 200;

/// How recently a file may have changed for its stamp alone not to be trusted: file times
/// tick coarsely (a few milliseconds), so a write just after a stamp can leave it as it was.
/// Such a file is also hashed, as git does with the files its index calls racy.
const RACY: std::time::Duration = std::time::Duration::from_secs(2);
/// The most bytes one stamping reads to hash such files; past it they are stamped only.
const MAX_RACY_BYTES: u64 = 16 * 1024 * 1024;

/// What tells one version of a file from another without reading it, and its content's
/// hash when the stamp alone cannot (a file changed just before it was stamped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    len: u64,
    modified: (i64, i64),
    changed: (i64, i64),
    inode: u64,
    content: Option<u64>,
}

/// The workspace's files at one moment, or why they were not stamped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Snapshot {
    /// Each file's stamp, by path.
    Stamped(BTreeMap<PathBuf, Stamp>),
    /// Why the check was skipped.
    Skipped(String),
}

/// Stamps the files under `root` (blocking: run it off the async threads); a file `earlier`
/// hashed is hashed again, so the two can be told apart.
pub fn take(
    root: &Path,
    protected: &Protected,
    cancel: &CancellationToken,
    earlier: Option<&Snapshot>,
) -> Snapshot {
    take_bounded(root, protected, cancel, earlier, MAX_FILES)
}

/// [`take`] with its file bound given.
pub fn take_bounded(
    root: &Path,
    protected: &Protected,
    cancel: &CancellationToken,
    earlier: Option<&Snapshot>,
    most: usize,
) -> Snapshot {
    let hashed_before = |path: &Path| match earlier {
        Some(Snapshot::Stamped(files)) => files.get(path).is_some_and(|stamp| stamp.content.is_some()),
        _ => false,
    };
    let recent = std::time::SystemTime::now() - RACY;
    let mut racy_bytes = 0u64;
    let mut files = BTreeMap::new();
    let mut over = false;
    let walked = walk::files(root, None, cancel, None, protected, Links::Skip, |seen| {
        let Seen::File(path) = seen else { return ControlFlow::Continue(()) };
        if files.len() >= most {
            over = true;
            return ControlFlow::Break(());
        }
        // A file gone between the walk and its stamp is not there: the next stamp says so.
        let Ok(meta) = std::fs::symlink_metadata(path) else { return ControlFlow::Continue(()) };
        let changed_at = std::time::UNIX_EPOCH
            + std::time::Duration::new(
                meta.ctime().max(0).unsigned_abs(),
                meta.ctime_nsec().clamp(0, 999_999_999) as u32,
            );
        let racy = changed_at >= recent || hashed_before(path);
        let content = if racy && racy_bytes + meta.len() <= MAX_RACY_BYTES {
            racy_bytes += meta.len();
            hash(path, meta.len())
        } else {
            None
        };
        let stamp = Stamp {
            len: meta.len(),
            modified: (meta.mtime(), meta.mtime_nsec()),
            changed: (meta.ctime(), meta.ctime_nsec()),
            inode: meta.ino(),
            content,
        };
        files.insert(path.to_path_buf(), stamp);
        ControlFlow::Continue(())
    });
    if over {
        Snapshot::Skipped(format!("the workspace holds more than {most} files"))
    } else if !walked.finished {
        Snapshot::Skipped("the turn was cancelled".into())
    } else {
        Snapshot::Stamped(files)
    }
}

/// The hash of a file's first `len` bytes (one more tells it grew); `None` if unreadable.
fn hash(path: &Path, len: u64) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    use std::io::Read;
    let mut content = Vec::new();
    std::fs::File::open(path).ok()?.take(len + 1).read_to_end(&mut content).ok()?;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    content.hash(&mut hasher);
    Some(hasher.finish())
}

/// The files that differ between `before` and `after` (made, changed or removed), leaving
/// out `written` (Heron's own changes); or why that cannot be told.
pub fn changed(before: &Snapshot, after: &Snapshot, written: &[&str]) -> Result<Vec<String>, String> {
    let (before, after) = match (before, after) {
        (Snapshot::Stamped(before), Snapshot::Stamped(after)) => (before, after),
        (Snapshot::Skipped(why), _) | (_, Snapshot::Skipped(why)) => return Err(why.clone()),
    };
    let mut paths: Vec<&PathBuf> = before.keys().chain(after.keys()).collect();
    paths.sort();
    paths.dedup();
    Ok(paths
        .into_iter()
        .filter(|path| before.get(*path) != after.get(*path))
        .map(|path| path.display().to_string())
        .filter(|path| !written.contains(&path.as_str()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(dir: &Path, earlier: Option<&Snapshot>) -> Snapshot {
        take(dir, &Protected::default(), &CancellationToken::new(), earlier)
    }

    #[test]
    fn made_changed_and_removed_files_are_found_and_heron_s_own_left_out() {
        let dir = tempfile::tempdir().expect("a directory");
        let path = |name: &str| dir.path().join(name);
        std::fs::write(path("kept.txt"), "same").expect("write");
        std::fs::write(path("edited.txt"), "one").expect("write");
        std::fs::write(path("gone.txt"), "bye").expect("write");
        let before = snapshot(dir.path(), None);
        // Same size, and within the file times' tick: only the content tells.
        std::fs::write(path("edited.txt"), "two").expect("write");
        std::fs::remove_file(path("gone.txt")).expect("remove");
        std::fs::write(path("made.txt"), "new").expect("write");
        std::fs::write(path("heron.txt"), "by a tool").expect("write");
        let after = snapshot(dir.path(), Some(&before));
        let heron = path("heron.txt").display().to_string();
        let found = changed(&before, &after, &[heron.as_str()]).expect("both stamped");
        let names: Vec<_> = found
            .iter()
            .filter_map(|p| Path::new(p).file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        assert_eq!(names, ["edited.txt", "gone.txt", "made.txt"]);
    }

    #[test]
    fn a_workspace_past_the_file_bound_is_not_stamped() {
        let dir = tempfile::tempdir().expect("a directory");
        for n in 0..=10 {
            std::fs::write(dir.path().join(format!("{n}.txt")), "x").expect("write");
        }
        let stamp =
            |dir: &Path| take_bounded(dir, &Protected::default(), &CancellationToken::new(), None, 10);
        let why = match stamp(dir.path()) {
            Snapshot::Skipped(why) => why,
            Snapshot::Stamped(files) => panic!("{} files stamped past the bound", files.len()),
        };
        assert_eq!(why, "the workspace holds more than 10 files");
        std::fs::remove_file(dir.path().join("0.txt")).expect("remove");
        assert!(matches!(stamp(dir.path()), Snapshot::Stamped(files) if files.len() == 10));
    }

    #[test]
    fn a_skipped_check_says_why() {
        let skipped = Snapshot::Skipped("the workspace holds more than 5000 files".into());
        let stamped = Snapshot::Stamped(BTreeMap::new());
        assert_eq!(changed(&skipped, &stamped, &[]), Err("the workspace holds more than 5000 files".into()));
        let dir = tempfile::tempdir().expect("a directory");
        let cancel = CancellationToken::new();
        cancel.cancel();
        assert!(matches!(take(dir.path(), &Protected::default(), &cancel, None), Snapshot::Skipped(_)));
    }
}
