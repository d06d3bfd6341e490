//! "A session is open in one process at a time": an advisory lock per session, a
//! non-blocking exclusive `flock` on `locks/<id>.lock` beside the store file. The open
//! session holds it; closing the session releases it, and so does the kernel when the
//! process dies, however it dies, so a crash never leaves a session locked.
//!
//! Lock files are never removed: unlinking a file another process is about to lock would
//! let two processes each lock a different file of the same name.

use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};

/// The lock of one open session, released when dropped.
#[derive(Debug)]
pub(crate) struct SessionLock {
    // Held only for its lock; the descriptor is close-on-exec, so no tool's or MCP
    // server's process inherits it and keeps the session locked after Heron is gone.
    _file: File,
}

/// Why a session could not be locked.
#[derive(Debug)]
pub(crate) enum LockError {
    /// Another process holds it.
    Held,
    /// The lock file could not be made or locked.
    Io(std::io::Error),
}

/// The directory of the lock files of the store at `store_file`.
pub(crate) fn locks_dir(store_file: &Path) -> PathBuf {
    store_file.with_file_name("locks")
}

/// Where the lock of session `id` lives. Session ids are Heron's own UUIDs, but a name that
/// reaches a path is never trusted to stay inside its directory.
fn lock_path(dir: &Path, id: &str) -> PathBuf {
    let safe: String =
        id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    dir.join(format!("{safe}.lock"))
}

impl SessionLock {
    /// Takes the lock of session `id` without waiting. Blocking file I/O: call it off the
    /// async threads.
    pub(crate) fn acquire(dir: &Path, id: &str) -> Result<SessionLock, LockError> {
        create_private_dir(dir).map_err(LockError::Io)?;
        let mut options = std::fs::OpenOptions::new();
        options.read(true).write(true).create(true).truncate(false);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let file = options.open(lock_path(dir, id)).map_err(LockError::Io)?;
        match file.try_lock() {
            Ok(()) => Ok(SessionLock { _file: file }),
            Err(TryLockError::WouldBlock) => Err(LockError::Held),
            Err(TryLockError::Error(err)) => Err(LockError::Io(err)),
        }
    }
}

/// Whether another process holds the lock of session `id` now. A probe, not a claim: it
/// takes a shared lock for an instant, so a process opening the session at that very
/// moment may be refused once, and it never creates a lock file.
pub(crate) fn held_elsewhere(dir: &Path, id: &str) -> bool {
    let Ok(file) = File::open(lock_path(dir, id)) else { return false };
    matches!(file.try_lock_shared(), Err(TryLockError::WouldBlock))
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_refuses_a_second_holder_until_it_is_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = SessionLock::acquire(dir.path(), "s1").expect("free");
        assert!(matches!(SessionLock::acquire(dir.path(), "s1"), Err(LockError::Held)));
        assert!(held_elsewhere(dir.path(), "s1"));
        assert!(SessionLock::acquire(dir.path(), "s2").is_ok(), "one lock per session");
        drop(first);
        assert!(!held_elsewhere(dir.path(), "s1"));
        assert!(SessionLock::acquire(dir.path(), "s1").is_ok());
    }

    #[test]
    fn a_session_id_never_leaves_the_lock_directory() {
        let dir = Path::new("/locks");
        assert_eq!(lock_path(dir, "../../etc/passwd"), dir.join("______etc_passwd.lock"));
        assert!(!held_elsewhere(dir, "no-such-session"));
    }
}
