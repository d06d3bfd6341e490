//! Why a file could not be used, told as what is there: a refusal names the link, the
//! device or the component at fault, so the model (or the user) learns what the path is,
//! not only that it failed. The file system is asked again (stat, readlink) only to word a
//! refusal; nothing here opens a file, and what it finds changes no decision.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::tools::walk::shown_name;

/// Why a file could not be used, as a message for the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FileError {
    /// Nothing is at the path.
    #[error("{0} does not exist")]
    Missing(String),
    /// The path names a directory.
    #[error("{0} is a directory")]
    Directory(String),
    /// The path names a FIFO, socket or device.
    #[error("{path} is a {kind}, not a regular file; tools only read and write regular files")]
    NotRegular {
        /// The path.
        path: String,
        /// What it is instead.
        kind: &'static str,
    },
    /// A component of the path changed into a symlink after it was checked.
    #[error("{0} changed while it was being opened (a symlink appeared on the way); refusing to follow it")]
    Changed(String),
    /// The path is (or goes through) a symlink that leads back to itself.
    #[error("{0} is a symlink loop (too many levels of symbolic links); it leads to no file")]
    SymlinkLoop(String),
    /// The path is a symlink whose target does not exist.
    #[error("{path} is a symlink to {target}, which does not exist")]
    Dangling {
        /// The path.
        path: String,
        /// What the link names, as it names it.
        target: String,
    },
    /// The path is a symlink that leads to a FIFO, socket or device (`/dev/stdin`).
    #[error(
        "{path} is a symlink to {target}, a {kind}, not a regular file; tools only read and write regular files"
    )]
    LinkToSpecial {
        /// The path.
        path: String,
        /// What the chain of links ends at, as the last link names it.
        target: String,
        /// What it is.
        kind: &'static str,
    },
    /// A component on the way is a file, not a directory.
    #[error("{0} is not a directory, so nothing is below it")]
    NotADirectory(String),
    /// The path holds a NUL byte, which no file name can.
    #[error("{0} holds a NUL byte, which no file name can; name the file without it")]
    NulByte(String),
    /// The file holds more than the cap.
    #[error("{path} is larger than the {cap} bytes a tool reads whole; use grep to find what you need")]
    TooLarge {
        /// The path.
        path: String,
        /// The cap, in bytes.
        cap: u64,
    },
    /// The file is one no tool may read (another name for a file of Heron's home).
    #[error(
        "{0} is another name for a file of Heron's home, which holds the user's keys; no tool may read it"
    )]
    Protected(String),
    /// The file is another name (a hard link) of one of the user's credential files, which
    /// are read only by their own path, after asking.
    #[error(
        "{0} is another name (a hard link) of one of the user's credential files; it is not read under \
         this name (read the credential file by its own path, which asks the user first)"
    )]
    CredentialLink(String),
    /// The file's permissions do not let this user write it: replacing it by a rename
    /// would ignore that, so it is left alone.
    #[error("{0} is read-only (its permissions do not let it be written); it was left unchanged")]
    ReadOnly(String),
    /// Any other failure of the system.
    #[error("{path}: {reason}")]
    Io {
        /// The path.
        path: String,
        /// What the system said.
        reason: String,
    },
}

pub(super) fn io_error(path: &Path, err: &std::io::Error) -> FileError {
    let shown = path.display().to_string();
    match err.raw_os_error() {
        Some(libc::ENOENT) => FileError::Missing(shown),
        Some(libc::ELOOP) => symlink_error(path),
        Some(libc::EISDIR) => FileError::Directory(shown),
        Some(libc::ENOTDIR) => FileError::NotADirectory(shown),
        _ => FileError::Io { path: shown, reason: err.to_string() },
    }
}

/// Why `path`, a symlink met where none was expected (an open without following, or a
/// lookup that gave up), cannot be used. `roots` followed every link it could, so one left
/// is a loop, dangles, leads to something that is not a file (`/dev/stdin` to a pipe), or
/// appeared after the path was checked; only the last is a change, and each is told as
/// what it is. The file system is asked again only to word the refusal: whatever it says
/// now, nothing is followed.
fn symlink_error(path: &Path) -> FileError {
    let shown = path.display().to_string();
    match std::fs::metadata(path) {
        Err(err) if err.raw_os_error() == Some(libc::ELOOP) => FileError::SymlinkLoop(first_loop(path)),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            FileError::Dangling { path: shown, target: last_target(path) }
        }
        Ok(meta) if !meta.is_file() && !meta.is_dir() => {
            FileError::LinkToSpecial { path: shown, target: last_target(path), kind: kind_of(meta.mode()) }
        }
        _ => FileError::Changed(shown),
    }
}

/// The shortest prefix of `path` that is a symlink loop, so the refusal names the link
/// itself rather than a file below it.
fn first_loop(path: &Path) -> String {
    let mut prefixes: Vec<&Path> = path.ancestors().collect();
    prefixes.reverse();
    let looping = prefixes
        .into_iter()
        .find(|p| std::fs::metadata(p).is_err_and(|e| e.raw_os_error() == Some(libc::ELOOP)))
        .unwrap_or(path);
    looping.display().to_string()
}

/// What the chain of symlinks starting at `path` ends at, as the last link names it (a
/// `/proc` fd link names a pipe `pipe:[123]`, which is no path). Bounded like the kernel's
/// own lookup.
fn last_target(path: &Path) -> String {
    const MAX_HOPS: usize = 40;
    let mut link = path.to_path_buf();
    let mut named = String::new();
    for _ in 0..MAX_HOPS {
        let Ok(target) = std::fs::read_link(&link) else { break };
        let next = match link.parent() {
            Some(parent) if target.is_relative() => parent.join(&target),
            _ => target.clone(),
        };
        named = target.display().to_string();
        if !std::fs::symlink_metadata(&next).is_ok_and(|m| m.file_type().is_symlink()) {
            if std::fs::symlink_metadata(&next).is_ok() {
                named = next.display().to_string();
            }
            break;
        }
        link = next;
    }
    shown_name(&named)
}

/// Why the component `at` of a directory path could not be opened as a directory: a
/// symlink (see [`symlink_error`]) or a file.
pub(super) fn link_or_file(at: &Path) -> FileError {
    match std::fs::symlink_metadata(at) {
        Ok(meta) if meta.file_type().is_symlink() => symlink_error(at),
        Ok(_) => FileError::NotADirectory(at.display().to_string()),
        // Gone since the open failed: it changed.
        Err(_) => FileError::Changed(at.display().to_string()),
    }
}

fn kind_of(mode: u32) -> &'static str {
    match mode & libc::S_IFMT {
        libc::S_IFIFO => "FIFO",
        libc::S_IFSOCK => "socket",
        libc::S_IFCHR => "character device",
        libc::S_IFBLK => "block device",
        libc::S_IFLNK => "symlink",
        _ => "special file",
    }
}

/// Refuses anything but a regular file.
pub(super) fn regular(path: &Path, meta: &std::fs::Metadata) -> Result<(), FileError> {
    if meta.is_file() {
        return Ok(());
    }
    if meta.is_dir() {
        return Err(FileError::Directory(path.display().to_string()));
    }
    Err(FileError::NotRegular { path: path.display().to_string(), kind: kind_of(meta.mode()) })
}

/// Why the opened file at `path` may not be read under that name, if it is another name of
/// a protected file (`Protected::other_name`).
pub(crate) fn other_name_refusal(
    protected: &crate::tools::protected::Protected,
    meta: &std::fs::Metadata,
    path: &std::path::Path,
) -> Option<FileError> {
    use crate::tools::protected::OtherName;
    protected.other_name(meta, path).map(|name| match name {
        OtherName::Home => FileError::Protected(path.display().to_string()),
        OtherName::Credential => FileError::CredentialLink(path.display().to_string()),
    })
}
