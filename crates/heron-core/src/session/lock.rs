//! "A session is open in one process at a time": an advisory lock per session, a
//! non-blocking exclusive `flock` on `locks/<id>.lock` beside the store file. The open
//! session holds it; closing the session releases it, and so does the kernel when the
//! process dies, however it dies, so a crash never leaves a session locked.
//!
//! Lock files are never removed: unlinking a file another process is about to lock would
//! let two processes each lock a different file of the same name.

use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How often, and how far apart, a held lock is tried again before the session is called
/// open elsewhere: half a second in all, longer than a sandboxed command takes from fork to
/// exec on a loaded machine, short enough for an editor's request.
const RETRIES: u32 = 20;
const RETRY_PAUSE: Duration = Duration::from_millis(25);

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

impl SessionLock {
    /// [`SessionLock::acquire`], trying a lock found held again for a moment. A command this
    /// process starts shares the lock's open file description from its fork until its exec
    /// closes it (the descriptor is close-on-exec), and a `flock` belongs to the
    /// description: a session this process has just closed looks held by that child for as
    /// long as the sandbox takes to set up. Blocks for up to half a second.
    pub(crate) fn acquire_patiently(dir: &Path, id: &str) -> Result<SessionLock, LockError> {
        acquire_retrying(dir, id, RETRIES, RETRY_PAUSE)
    }
}

fn acquire_retrying(dir: &Path, id: &str, retries: u32, pause: Duration) -> Result<SessionLock, LockError> {
    let mut taken = SessionLock::acquire(dir, id);
    for _ in 0..retries {
        if !matches!(taken, Err(LockError::Held)) {
            break;
        }
        std::thread::sleep(pause);
        taken = SessionLock::acquire(dir, id);
    }
    taken
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
    fn a_lock_a_forked_child_still_shares_is_taken_once_the_child_lets_go() {
        let dir = tempfile::tempdir().expect("tempdir");
        let closed = SessionLock::acquire(dir.path(), "s1").expect("free");
        // What a fork leaves a child until its exec: the same open file description.
        let childs_copy = closed._file.try_clone().expect("dup");
        drop(closed);
        // Tried once, the session this process just closed looks held.
        assert!(matches!(acquire_retrying(dir.path(), "s1", 0, RETRY_PAUSE), Err(LockError::Held)));
        let exec = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            drop(childs_copy);
        });
        assert!(SessionLock::acquire_patiently(dir.path(), "s1").is_ok(), "taken once the copy is closed");
        exec.join().expect("join");
    }

    #[test]
    fn a_lock_held_for_good_is_still_refused_after_the_retries() {
        let dir = tempfile::tempdir().expect("tempdir");
        let _other = SessionLock::acquire(dir.path(), "s1").expect("free");
        let refused = acquire_retrying(dir.path(), "s1", 3, Duration::from_millis(1));
        assert!(matches!(refused, Err(LockError::Held)));
    }

    #[test]
    fn a_session_id_never_leaves_the_lock_directory() {
        let dir = Path::new("/locks");
        assert_eq!(lock_path(dir, "../../etc/passwd"), dir.join("______etc_passwd.lock"));
        assert!(!held_elsewhere(dir, "no-such-session"));
    }
}
