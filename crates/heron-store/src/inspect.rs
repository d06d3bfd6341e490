//! A read-only look at a store file, for `heron doctor`: whether it is there, opens as a
//! database, has a schema this build can use, and passes SQLite's `quick_check`.
//! Invariant: nothing is created, migrated or written; a missing file stays missing, and no
//! `-wal` or `-shm` file appears beside it.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use crate::{SCHEMA_VERSION, StoreError};

/// What [`inspect`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreHealth {
    /// There is no file yet; Heron creates it on first use.
    Missing,
    /// The file opens and SQLite's check found nothing wrong.
    Healthy {
        /// The file's schema version (older ones are brought up to date on open).
        schema_version: i64,
    },
}

/// The most problems `quick_check` lists: one already says the file is damaged, and a badly
/// damaged file could otherwise list one per page.
const MAX_FINDINGS: u32 = 10;

/// How long the look waits on a lock another process holds. Readers do not block in WAL
/// mode, so only a rollback journal being written makes it wait.
const LOOK_BUSY_TIMEOUT: Duration = Duration::from_secs(2);

/// Looks at the store file at `path` without changing it. A damaged file is
/// [`StoreError::Corrupt`]; one from a newer Heron is [`StoreError::TooNew`], which Heron
/// would refuse to open.
///
/// It runs `quick_check`, not `integrity_check`: both read every page, but `quick_check`
/// skips matching each index against its table, which is what makes the full check slow
/// on a large file, and a check meant to answer in seconds should not take minutes.
pub fn inspect(path: &Path) -> Result<StoreHealth, StoreError> {
    let metadata = match std::fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(StoreHealth::Missing),
        Err(err) => return Err(StoreError::Unavailable(format!("{}: {err}", path.display()))),
    };
    if !metadata.is_file() {
        return Err(StoreError::Unavailable(format!("{} is not a regular file", path.display())));
    }
    let conn = open_without_side_files(path)?;
    conn.busy_timeout(LOOK_BUSY_TIMEOUT)?;
    // The first read of the header is where a file that is not a database is found out.
    let schema_version: i64 = conn.query_row("PRAGMA user_version", [], |row| row.get(0))?;
    if schema_version > SCHEMA_VERSION {
        return Err(StoreError::TooNew { found: schema_version, supported: SCHEMA_VERSION });
    }
    let mut stmt = conn.prepare(&format!("PRAGMA quick_check({MAX_FINDINGS})"))?;
    let findings = stmt.query_map([], |row| row.get::<_, String>(0))?.collect::<Result<Vec<_>, _>>()?;
    match findings.as_slice() {
        [only] if only == "ok" => Ok(StoreHealth::Healthy { schema_version }),
        // SQLite's findings name pages and tables, never stored values.
        _ => Err(StoreError::Corrupt(findings.join("; "))),
    }
}

/// Opens `path` read-only without creating its `-wal` and `-shm` files. Heron's store is in
/// WAL mode, and a plain read-only open of a WAL database creates both (and cannot remove
/// them when it closes), so a look would leave two files behind.
///
/// Every connection to a WAL database keeps the `-shm` file, and the last one to close
/// removes it with the `-wal`. So when both are there, a Heron is using the store (or one
/// died holding it): the plain read-only open takes part in its locking and creates nothing.
/// When they are not, nothing has the file open and it is not changing, so it is opened
/// `immutable`: no locks, no side files. A Heron that starts during the look writes its
/// changes to a new `-wal` first, which this look does not read, and copies them into the
/// file only after a thousand pages or when it closes.
fn open_without_side_files(path: &Path) -> Result<Connection, StoreError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let beside = |suffix: &str| {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        std::path::PathBuf::from(name).exists()
    };
    if beside("-wal") && beside("-shm") {
        return Ok(Connection::open_with_flags(path, flags)?);
    }
    let uri = format!("file:{}?mode=ro&immutable=1", uri_path(path));
    Ok(Connection::open_with_flags(uri, flags | OpenFlags::SQLITE_OPEN_URI)?)
}

/// `path` for a `file:` URI: every byte but unreserved ones and `/` percent-encoded, so a
/// `?`, `#` or `%` in a folder name (or bytes that are not UTF-8) reach SQLite as they are.
fn uri_path(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::new();
    for &byte in path.as_os_str().as_bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'/' | b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}
