//! Reading extension folders and files: a folder only when it is a real one (no symlink on
//! the way), at most [`MAX_ENTRIES`] of its entries, and files through the tools' own
//! opener (`fsio`): regular files only, every component opened without following a
//! symlink, at most [`MAX_FILE_BYTES`], UTF-8, and never a file of Heron's home under
//! another name (a hard link). Everything here blocks.

use std::path::{Path, PathBuf};

use super::{MAX_FILE_BYTES, Problem};
use crate::tools::fsio::{self, FileError};
use crate::tools::protected::Protected;

/// The most entries of one folder looked at; a folder of millions is not walked.
pub(super) const MAX_ENTRIES: usize = 1000;

/// What an entry of a folder is, without following it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    File,
    Dir,
    Symlink,
    Other,
}

/// One entry of a folder.
#[derive(Debug, Clone)]
pub(super) struct Entry {
    /// Its name, which is UTF-8 (others are reported and left out).
    pub(super) name: String,
    pub(super) path: PathBuf,
    pub(super) kind: Kind,
}

/// The entries of the folder `dir`, by name; `None` when there is no such folder or it
/// cannot be used (then a problem says why). `dir` is refused when a symlink leads to it.
pub(super) fn list(dir: &Path, problems: &mut Vec<Problem>) -> Option<Vec<Entry>> {
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            problems.push(Problem::new(dir, format!("cannot be read: {e}")));
            return None;
        }
        Ok(meta) if meta.file_type().is_symlink() => {
            problems.push(Problem::new(dir, "is a symlink; extensions are read from real folders only"));
            return None;
        }
        Ok(meta) if !meta.is_dir() => {
            problems.push(Problem::new(dir, "is not a folder"));
            return None;
        }
        Ok(_) => {}
    }
    // A symlink higher up (`.heron` itself) leads somewhere the user did not look.
    if std::fs::canonicalize(dir).ok().as_deref() != Some(dir) {
        problems.push(Problem::new(
            dir,
            "is reached through a symlink; extensions are read from real folders only",
        ));
        return None;
    }
    let reading = match std::fs::read_dir(dir) {
        Ok(reading) => reading,
        Err(e) => {
            problems.push(Problem::new(dir, format!("cannot be listed: {e}")));
            return None;
        }
    };
    let mut entries = Vec::new();
    for (seen, entry) in reading.enumerate() {
        if seen == MAX_ENTRIES {
            problems.push(Problem::new(
                dir,
                format!("holds more than {MAX_ENTRIES} entries; the rest are not read"),
            ));
            break;
        }
        let Ok(entry) = entry else { continue };
        let path = entry.path();
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            problems.push(Problem::new(&path, "has a name that is not UTF-8"));
            continue;
        };
        let kind = match entry.file_type() {
            Ok(t) if t.is_symlink() => Kind::Symlink,
            Ok(t) if t.is_file() => Kind::File,
            Ok(t) if t.is_dir() => Kind::Dir,
            _ => Kind::Other,
        };
        entries.push(Entry { name, path, kind });
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Some(entries)
}

/// The text of the file `path` (absolute, with no symlink on the way), or why it cannot be
/// used.
pub(super) fn read_text(path: &Path, protected: &Protected) -> Result<String, String> {
    read_text_within(path, MAX_FILE_BYTES, protected)
}

/// [`read_text`] with a cap of `cap` bytes.
pub(super) fn read_text_within(path: &Path, cap: u64, protected: &Protected) -> Result<String, String> {
    let refuse = |meta: &std::fs::Metadata| fsio::other_name_refusal(protected, meta, path);
    let bytes = match fsio::read_capped(path, cap, refuse) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Err("disappeared while it was read".to_owned()),
        // Whatever the link leads to (a file, nothing, itself): extensions follow none.
        Err(
            FileError::Changed(_)
            | FileError::SymlinkLoop(_)
            | FileError::Dangling { .. }
            | FileError::LinkToSpecial { .. },
        ) => {
            return Err(
                "is a symlink or is reached through one; extensions are read from real files only".into()
            );
        }
        Err(FileError::TooLarge { cap, .. }) => return Err(format!("is larger than {} KiB", cap / 1024)),
        Err(FileError::NotRegular { kind, .. }) => return Err(format!("is a {kind}, not a regular file")),
        Err(FileError::Protected(_)) => {
            return Err(
                "is another name for a file of Heron's home, which is never read as an extension".into()
            );
        }
        Err(other) => return Err(other.to_string()),
    };
    String::from_utf8(bytes).map_err(|_| "is not UTF-8 text".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical_tempdir() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = std::fs::canonicalize(dir.path()).expect("canonical");
        (dir, path)
    }

    #[test]
    fn a_symlinked_folder_is_refused_and_said_so() {
        let (_keep, root) = canonical_tempdir();
        std::fs::create_dir(root.join("real")).expect("dir");
        std::os::unix::fs::symlink(root.join("real"), root.join("link")).expect("link");
        let mut problems = Vec::new();
        assert!(list(&root.join("link"), &mut problems).is_none());
        assert!(problems[0].message.contains("symlink"), "{problems:?}");
        assert!(list(&root.join("missing"), &mut problems).is_none());
        assert_eq!(problems.len(), 1, "a missing folder is no problem");
    }

    #[test]
    fn a_folder_past_the_entry_limit_is_listed_to_the_limit_and_reported() {
        let (_keep, root) = canonical_tempdir();
        let dir = root.join("commands");
        std::fs::create_dir(&dir).expect("dir");
        for n in 0..MAX_ENTRIES {
            std::fs::write(dir.join(format!("c{n}.md")), "").expect("write");
        }
        let mut problems = Vec::new();
        let listed = list(&dir, &mut problems).expect("a folder");
        assert_eq!((listed.len(), problems.len()), (MAX_ENTRIES, 0), "at the limit all are read");

        std::fs::write(dir.join("one-more.md"), "").expect("write");
        let listed = list(&dir, &mut problems).expect("a folder");
        assert_eq!(listed.len(), MAX_ENTRIES, "the entries past the limit are not read");
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].message.contains("more than 1000 entries"), "{problems:?}");
    }

    #[test]
    fn a_file_is_read_only_when_regular_small_and_text() {
        let (_keep, root) = canonical_tempdir();
        let protected = Protected::new(&root.join("home"), None);
        std::fs::write(root.join("ok.md"), "hello").expect("write");
        assert_eq!(read_text(&root.join("ok.md"), &protected).as_deref(), Ok("hello"));
        std::fs::write(root.join("big.md"), vec![b'a'; MAX_FILE_BYTES as usize + 1]).expect("write");
        assert!(read_text(&root.join("big.md"), &protected).expect_err("too big").contains("larger"));
        std::fs::write(root.join("bin.md"), [0xff, 0xfe]).expect("write");
        assert!(read_text(&root.join("bin.md"), &protected).expect_err("binary").contains("UTF-8"));
        std::os::unix::fs::symlink(root.join("ok.md"), root.join("link.md")).expect("link");
        assert!(read_text(&root.join("link.md"), &protected).expect_err("link").contains("symlink"));
        let fifo = std::ffi::CString::new(root.join("fifo.md").display().to_string()).expect("path");
        // SAFETY: a NUL-terminated path; mkfifo only creates the node.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        assert!(read_text(&root.join("fifo.md"), &protected).expect_err("fifo").contains("FIFO"));
    }

    #[test]
    fn a_hard_link_to_a_file_of_the_home_is_refused() {
        let (_keep, root) = canonical_tempdir();
        let home = root.join("home");
        std::fs::create_dir(&home).expect("home");
        std::fs::write(home.join(".env"), "KEY=secret").expect("env");
        std::fs::hard_link(home.join(".env"), root.join("innocent.md")).expect("link");
        let protected = Protected::new(&home, None);
        let refused = read_text(&root.join("innocent.md"), &protected).expect_err("refused");
        assert!(refused.contains("Heron's home"), "{refused}");
    }
}
