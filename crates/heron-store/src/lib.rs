//! The session store: SQLite-backed sessions, their append-only event logs and prompt inboxes.
//!
//! The store knows nothing of ACP. Event payloads, session settings and inbox prompts are opaque
//! JSON that the session module defines; the store keeps them intact and in order.
//!
//! # Concurrency and durability
//!
//! A [`Store`] owns one SQLite connection behind a mutex and is cheap to clone. Every call runs
//! on tokio's blocking pool, so waiting on a lock held by another process never stalls the
//! runtime. Several processes may share one file: the database runs in WAL mode, every write is
//! a `BEGIN IMMEDIATE` transaction (writers queue on the file lock, up to [`BUSY_TIMEOUT`]), and
//! per-session sequence numbers are allocated inside that transaction.
//!
//! A write is committed when its method returns. With `synchronous=NORMAL` in WAL mode a
//! committed write survives the process being killed at any point; a power loss may drop the
//! last few commits but never corrupts the file.
//!
//! # Timestamps
//!
//! `created_at`, `updated_at` and event `at` are RFC 3339 UTC strings with millisecond
//! precision (`2025-01-31T12:00:00.123Z`). They have a fixed width, so text order is time order.

#![deny(missing_docs)]
// A `pub` item is the crate's API or it is narrowed to where it is used.
#![warn(unreachable_pub)]

mod events;
mod inbox;
mod inspect;
mod schema;
mod sessions;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use rusqlite::{Connection, OpenFlags};

pub use events::{DecodedPage, EventRecord, EventTotals, MAX_EVENTS_LIMIT, PageBudget};
pub use inbox::{
    Enqueued, INBOX_CAPACITY, INBOX_SESSION_BYTES, INBOX_STORE_BYTES, InboxIntent, InboxItem, InboxState,
    InboxStatus, InboxTally, NewInboxItem, Placement, Recovery,
};
pub use inspect::{StoreHealth, inspect};
pub use schema::SCHEMA_VERSION;
pub use sessions::{ListQuery, MAX_LIST_LIMIT, NewSession, Page, SessionPatch, SessionRecord};

/// How long a write waits for another connection (or process) to release the file lock.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The page cache of the connection, in KiB (SQLite's default is 2,000). Heron appends to
/// the end of one session's log and reads a session front to back, so the pages worth
/// keeping are the few interior pages of the tables and indexes; a long message written in
/// 1 MiB pieces otherwise fills the whole default cache with overflow pages that are never
/// read again, and that memory stays with the process.
const CACHE_KIB: u32 = 512;

/// A failure of the store. Messages name ids and versions but never payload contents.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The session or inbox item does not exist.
    #[error("{entity} {id:?} not found")]
    NotFound {
        /// What was looked up: `"session"` or `"inbox item"`.
        entity: &'static str,
        /// The id that was looked up.
        id: String,
    },
    /// A session with this id already exists.
    #[error("session {0:?} already exists")]
    AlreadyExists(String),
    /// The inbox item is not in the status the change needs; nothing was changed.
    #[error("inbox item {id:?} is {status}")]
    WrongStatus {
        /// The item.
        id: String,
        /// Its status.
        status: InboxStatus,
    },
    /// The session's inbox holds as many items as it may, none of them finished; nothing
    /// was added.
    #[error("the inbox is full: it holds {capacity} items and none has finished")]
    InboxFull {
        /// The most items it may hold.
        capacity: usize,
    },
    /// The inbox's stored prompts fill their byte budget (the session's, or every
    /// session's together) and no finished item can make room.
    #[error("the inbox is full: its prompts hold their budget of {limit} bytes and none has finished")]
    InboxBytesFull {
        /// The budget, in bytes.
        limit: usize,
        /// Whether it is the budget of every session's inbox together.
        all_sessions: bool,
    },
    /// A list cursor was malformed or was issued for a different query.
    #[error("the list cursor is malformed or belongs to a different query")]
    BadCursor,
    /// The database was written by a newer Heron; it is left untouched.
    #[error(
        "the store has schema version {found}, newer than the {supported} this build supports; \
         upgrade Heron or point it at another store file"
    )]
    TooNew {
        /// The `user_version` found in the file.
        found: i64,
        /// The newest schema version this build knows.
        supported: i64,
    },
    /// The file is damaged (SQLite found a malformed page, or it is not a database at
    /// all), or a stored value could not be decoded.
    #[error("corrupt store data: {0}")]
    Corrupt(String),
    /// The file cannot be used now: locked by another process past [`BUSY_TIMEOUT`],
    /// read-only, on a full disk, or failing to read or write.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// SQLite reported another error.
    #[error("sqlite: {0}")]
    Sqlite(String),
    /// Creating the store's directory or file failed.
    #[error("store i/o: {0}")]
    Io(String),
    /// The blocking task running the query panicked or was cancelled.
    #[error("store task failed: {0}")]
    Task(String),
}

/// What kind of failure a [`StoreError`] is, for callers that answer each kind differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreErrorKind {
    /// The file is damaged: trying again will not help; it needs repair or replacing.
    Corrupt,
    /// The file cannot be used now (busy, read-only, full, failing I/O, or from a newer
    /// Heron); it may work later or elsewhere.
    Unavailable,
    /// Anything else, including the outcomes a caller handles itself (not found, bad
    /// cursor, wrong status, a full inbox).
    Other,
}

impl StoreError {
    /// What kind of failure this is.
    pub fn kind(&self) -> StoreErrorKind {
        match self {
            StoreError::Corrupt(_) => StoreErrorKind::Corrupt,
            StoreError::Unavailable(_) | StoreError::Io(_) | StoreError::TooNew { .. } => {
                StoreErrorKind::Unavailable
            }
            StoreError::NotFound { .. }
            | StoreError::AlreadyExists(_)
            | StoreError::WrongStatus { .. }
            | StoreError::InboxFull { .. }
            | StoreError::InboxBytesFull { .. }
            | StoreError::BadCursor
            | StoreError::Sqlite(_)
            | StoreError::Task(_) => StoreErrorKind::Other,
        }
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(err: rusqlite::Error) -> Self {
        use rusqlite::ErrorCode;
        // rusqlite's messages carry SQL text and constraint names, never bound values.
        let message = err.to_string();
        match err.sqlite_error_code() {
            Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => StoreError::Corrupt(message),
            Some(ErrorCode::TooBig) => {
                StoreError::Corrupt(format!("a value is larger than the store takes ({MAX_ROW_BYTES} bytes)"))
            }
            Some(
                ErrorCode::DatabaseBusy
                | ErrorCode::DatabaseLocked
                | ErrorCode::ReadOnly
                | ErrorCode::DiskFull
                | ErrorCode::SystemIoFailure
                | ErrorCode::CannotOpen
                | ErrorCode::PermissionDenied
                | ErrorCode::FileLockingProtocolFailed,
            ) => StoreError::Unavailable(message),
            _ => StoreError::Sqlite(message),
        }
    }
}

/// The largest value or row the store reads or writes, in bytes: twice the largest message
/// line Heron reads (64 MiB), so every row built from one fits.
pub const MAX_ROW_BYTES: i32 = 128 * 1024 * 1024;

/// A handle on the store file. Clones share one connection.
#[derive(Clone)]
pub struct Store {
    conn: Arc<Mutex<Connection>>,
    path: Arc<PathBuf>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish_non_exhaustive()
    }
}

impl Store {
    /// Opens (creating if needed) the store at `path` and brings its schema up to date.
    ///
    /// A database from a newer Heron is refused with [`StoreError::TooNew`] before anything
    /// in it is changed.
    pub async fn open(path: impl AsRef<Path>) -> Result<Store, StoreError> {
        Store::open_waiting(path, BUSY_TIMEOUT).await
    }

    /// [`Store::open`] where every write (and the open itself) waits at most `busy` for a
    /// lock another connection holds, instead of [`BUSY_TIMEOUT`]; past it the write fails
    /// with [`StoreError::Unavailable`]. Tests cross the wait with a short one.
    pub async fn open_waiting(path: impl AsRef<Path>, busy: Duration) -> Result<Store, StoreError> {
        let path = path.as_ref().to_path_buf();
        tokio::task::spawn_blocking(move || Store::open_blocking_waiting(&path, busy))
            .await
            .map_err(|err| StoreError::Task(err.to_string()))?
    }

    /// [`Store::open`] for callers outside an async runtime (it blocks the thread).
    ///
    /// Two processes opening a fresh file at once can meet where SQLite answers "busy"
    /// without waiting on its busy handler (one switches the file to WAL while the other
    /// reads its header); such an open is tried again, within [`BUSY_TIMEOUT`].
    pub fn open_blocking(path: &Path) -> Result<Store, StoreError> {
        Store::open_blocking_waiting(path, BUSY_TIMEOUT)
    }

    fn open_blocking_waiting(path: &Path, busy: Duration) -> Result<Store, StoreError> {
        let deadline = std::time::Instant::now() + busy;
        loop {
            match Self::open_once(path, busy) {
                // SQLite's own text for SQLITE_BUSY.
                Err(StoreError::Unavailable(reason))
                    if reason.contains("database is locked") && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                opened => return opened,
            }
        }
    }

    fn open_once(path: &Path, busy: Duration) -> Result<Store, StoreError> {
        create_private_file(path)?;
        let mut conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(busy)?;
        // A row larger than any Heron writes is refused, read or written, with SQLite's
        // "too big" error, rather than taken whole into memory (a store from elsewhere).
        conn.set_limit(rusqlite::limits::Limit::SQLITE_LIMIT_LENGTH, MAX_ROW_BYTES)?;
        // Refuse a newer schema before any pragma below writes to the file header.
        schema::refuse_newer(&conn)?;
        let mode: String = conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            tracing::warn!(%mode, "the store could not switch to WAL; concurrent access will be slower");
        }
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "foreign_keys", true)?;
        // Negative: a size in KiB rather than in pages.
        conn.pragma_update(None, "cache_size", -i64::from(CACHE_KIB))?;
        schema::migrate(&mut conn)?;
        Ok(Store { conn: Arc::new(Mutex::new(conn)), path: Arc::new(path.to_path_buf()) })
    }

    /// The file this store was opened on.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs SQLite's `integrity_check`; any finding is reported as [`StoreError::Corrupt`].
    pub async fn check_integrity(&self) -> Result<(), StoreError> {
        self.run(|conn| {
            let mut stmt = conn.prepare("PRAGMA integrity_check")?;
            let findings =
                stmt.query_map([], |row| row.get::<_, String>(0))?.collect::<Result<Vec<_>, _>>()?;
            match findings.as_slice() {
                [only] if only == "ok" => Ok(()),
                _ => Err(StoreError::Corrupt(findings.join("; "))),
            }
        })
        .await
    }

    /// Runs `work` on the blocking pool with the connection locked.
    async fn run<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let conn = Arc::clone(&self.conn);
        tokio::task::spawn_blocking(move || {
            // A panic mid-call dropped its transaction, which rolled back: the connection is
            // still consistent, so a poisoned lock is safe to reuse.
            let mut guard = conn.lock().unwrap_or_else(PoisonError::into_inner);
            work(&mut guard)
        })
        .await
        .map_err(|err| StoreError::Task(err.to_string()))?
    }
}

/// Creates the parent directories and, if missing, the database file readable only by its owner.
fn create_private_file(path: &Path) -> Result<(), StoreError> {
    let io = |what: &str, err: std::io::Error| StoreError::Io(format!("{what} {}: {err}", path.display()));
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|err| io("creating the directory of", err))?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // SQLite gives its -wal and -shm files the same mode as the database file.
        options.mode(0o600);
    }
    options.open(path).map(drop).map_err(|err| io("creating", err))
}

/// The last millisecond [`now`] gave, since the Unix epoch.
static LAST_MILLIS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The current time as an RFC 3339 UTC string with millisecond precision, strictly later
/// than any this process gave before: two writes in one millisecond, or a wall clock set
/// back, still order as they were made (lists sort by these), and tests need no sleep to
/// tell two writes apart.
fn now() -> String {
    use std::sync::atomic::Ordering;
    let wall = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| u64::try_from(since.as_millis()).unwrap_or(u64::MAX));
    let next = |last: u64| wall.max(last.saturating_add(1));
    let millis = match LAST_MILLIS.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |last| Some(next(last))) {
        Ok(last) | Err(last) => next(last),
    };
    humantime::format_rfc3339_millis(SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(millis))
        .to_string()
}

/// Decodes a stored JSON column, describing a failure by its location only.
fn decode_json<T: serde::de::DeserializeOwned>(
    text: &str,
    what: impl FnOnce() -> String,
) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|err| {
        StoreError::Corrupt(format!(
            "{} is not valid JSON (line {}, column {})",
            what(),
            err.line(),
            err.column()
        ))
    })
}

/// Encodes a JSON value for storage (a `Value` or a list of strings always encodes).
fn encode_json(value: &impl serde::Serialize) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|err| StoreError::Corrupt(format!("unencodable value: {err}")))
}

#[cfg(test)]
mod tests {
    #[test]
    fn timestamps_strictly_increase_even_within_one_millisecond() {
        let stamps: Vec<String> = (0..1000).map(|_| super::now()).collect();
        assert!(stamps.windows(2).all(|pair| pair[0] < pair[1]), "{:?}", &stamps[..3]);
    }

    use super::*;

    #[tokio::test]
    async fn the_connection_keeps_a_small_page_cache() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path().join("heron.db")).await.expect("open");
        let kib: i64 = store
            .run(|conn| Ok(conn.pragma_query_value(None, "cache_size", |row| row.get(0))?))
            .await
            .expect("cache_size");
        assert_eq!(kib, -i64::from(CACHE_KIB));
    }
}
