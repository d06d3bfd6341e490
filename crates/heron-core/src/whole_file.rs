//! Reading a file Heron takes whole (its config and `.env`, a model script, a transcript,
//! a file of MCP servers) within a byte bound. Checking a file's size and then reading it
//! is not a bound: the file can grow in between, and a FIFO reports no size and never
//! ends. So the bound is on the read itself, and only a regular file is read at all. Unlike
//! the workspace's reads (`tools::fsio`), a symlink is followed: these are files the user
//! names or keeps in their own folders, which dotfile managers often link.

use std::fmt;
use std::fs::File;
use std::io::Read;
use std::path::Path;

/// Why a file was not read.
#[derive(Debug)]
pub enum WholeFileError {
    /// Nothing is there.
    NotFound,
    /// A folder, a FIFO, a device or a socket: never read.
    NotAFile,
    /// The file holds more than the bound.
    TooLarge {
        /// The bound, in bytes.
        cap: u64,
    },
    /// Its bytes are not UTF-8 text.
    NotText,
    /// The system refused (permissions, a failing disk).
    Io(std::io::Error),
}

impl fmt::Display for WholeFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotFound => f.write_str("it does not exist"),
            Self::NotAFile => f.write_str("it is not a regular file"),
            Self::TooLarge { cap } => write!(f, "it is larger than {cap} bytes, the most read"),
            Self::NotText => f.write_str("it is not UTF-8 text"),
            Self::Io(error) => write!(f, "it cannot be read: {error}"),
        }
    }
}

impl std::error::Error for WholeFileError {}

/// The bytes of the regular file at `path`, at most `cap` of them.
pub fn read_bytes(path: &Path, cap: u64) -> Result<Vec<u8>, WholeFileError> {
    let file = open(path)?;
    let meta = file.metadata().map_err(WholeFileError::Io)?;
    if !meta.is_file() {
        return Err(WholeFileError::NotAFile);
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len().min(cap)).unwrap_or(0));
    // One byte past the bound tells a file that is too large from one exactly at it.
    file.take(cap.saturating_add(1)).read_to_end(&mut bytes).map_err(WholeFileError::Io)?;
    if bytes.len() as u64 > cap {
        return Err(WholeFileError::TooLarge { cap });
    }
    Ok(bytes)
}

/// The text of the regular file at `path`, at most `cap` bytes of it.
pub fn read_text(path: &Path, cap: u64) -> Result<String, WholeFileError> {
    String::from_utf8(read_bytes(path, cap)?).map_err(|_| WholeFileError::NotText)
}

/// Opens `path` for reading without waiting: opening a FIFO with no writer would block
/// until one comes, before its kind could be checked.
fn open(path: &Path) -> Result<File, WholeFileError> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    options.open(path).map_err(|error| match error.kind() {
        std::io::ErrorKind::NotFound => WholeFileError::NotFound,
        _ => WholeFileError::Io(error),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_read_up_to_its_bound_and_refused_one_byte_past_it() {
        let dir = tempfile::tempdir().expect("temp");
        let path = dir.path().join("f");
        std::fs::write(&path, "abcd").expect("write");
        assert_eq!(read_text(&path, 4).expect("at the bound"), "abcd");
        assert!(matches!(read_text(&path, 3), Err(WholeFileError::TooLarge { cap: 3 })));
        assert!(matches!(read_text(&dir.path().join("none"), 4), Err(WholeFileError::NotFound)));
        std::fs::write(&path, [0xff, 0xfe]).expect("write");
        assert!(matches!(read_text(&path, 4), Err(WholeFileError::NotText)));
        assert!(matches!(read_text(dir.path(), 4), Err(WholeFileError::NotAFile)));
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_without_waiting_for_a_writer_and_a_link_is_followed() {
        let dir = tempfile::tempdir().expect("temp");
        let fifo = dir.path().join("fifo");
        let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: a valid NUL-terminated path and a plain mode.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        assert!(matches!(read_text(&fifo, 1024), Err(WholeFileError::NotAFile)));
        let target = dir.path().join("target");
        std::fs::write(&target, "linked").expect("write");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).expect("link");
        assert_eq!(read_text(&link, 1024).expect("followed"), "linked");
    }
}
