//! Opening the store: file creation, pragmas and schema migrations.

use std::path::Path;
use std::time::{Duration, Instant};

use heron_store::{BUSY_TIMEOUT, ListQuery, NewSession, SCHEMA_VERSION, Store, StoreError, StoreErrorKind};
use rusqlite::Connection;

fn raw_pragma(path: &Path, pragma: &str) -> String {
    let conn = Connection::open(path).expect("raw open");
    conn.query_row(&format!("PRAGMA {pragma}"), [], |row| row.get::<_, rusqlite::types::Value>(0))
        .map(|value| match value {
            rusqlite::types::Value::Integer(n) => n.to_string(),
            rusqlite::types::Value::Text(text) => text,
            other => format!("{other:?}"),
        })
        .expect("pragma")
}

#[tokio::test]
async fn fresh_store_gets_the_current_schema_version() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("heron.db");
    drop(Store::open(&path).await.expect("open"));
    assert_eq!(raw_pragma(&path, "user_version"), SCHEMA_VERSION.to_string());
}

#[tokio::test]
async fn store_runs_in_wal_mode() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("heron.db");
    drop(Store::open(&path).await.expect("open"));
    assert_eq!(raw_pragma(&path, "journal_mode"), "wal");
}

#[tokio::test]
async fn reopening_keeps_the_version_and_the_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("heron.db");
    let store = Store::open(&path).await.expect("first open");
    let created = store.create_session(NewSession::in_dir("/w")).await.expect("create");
    drop(store);
    let store = Store::open(&path).await.expect("second open");
    assert_eq!(store.session(&created.id).await.expect("read"), Some(created));
    assert_eq!(raw_pragma(&path, "user_version"), SCHEMA_VERSION.to_string());
}

#[tokio::test]
async fn store_from_a_newer_version_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("heron.db");
    {
        let conn = Connection::open(&path).expect("raw open");
        conn.execute_batch("CREATE TABLE future (x); PRAGMA user_version = 99;").expect("seed");
    }
    let before = std::fs::read(&path).expect("read file");
    let err = Store::open(&path).await.expect_err("newer schema");
    assert_eq!(err, StoreError::TooNew { found: 99, supported: SCHEMA_VERSION });
    assert!(err.to_string().contains("99"), "{err}");
    assert_eq!(std::fs::read(&path).expect("read file"), before, "the file must not change");
}

#[tokio::test]
async fn open_creates_missing_parent_directories() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("a/b/heron.db");
    Store::open(&path).await.expect("open");
    assert!(path.is_file());
}

#[cfg(unix)]
#[tokio::test]
async fn new_store_file_is_readable_only_by_its_owner() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("heron.db");
    let store = Store::open(&path).await.expect("open");
    store.create_session(NewSession::in_dir("/w")).await.expect("write something");
    for file in [path.clone(), dir.path().join("heron.db-wal")] {
        let mode = std::fs::metadata(&file).expect("metadata").permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{}", file.display());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_opening_a_fresh_file_at_once_both_succeed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("heron.db");
    let (a, b) = tokio::join!(Store::open(&path), Store::open(&path));
    let (a, b) = (a.expect("open a"), b.expect("open b"));
    let created = a.create_session(NewSession::in_dir("/w")).await.expect("create");
    assert!(b.session(&created.id).await.expect("read").is_some());
}

#[tokio::test]
async fn a_write_past_the_wait_for_another_process_lock_fails_unavailable_and_the_next_one_works() {
    assert_eq!(BUSY_TIMEOUT, Duration::from_secs(5), "the production wait");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("heron.db");
    let busy = Duration::from_millis(200);
    let store = Store::open_waiting(&path, busy).await.expect("open");
    // Another process's writer, holding the file's write lock.
    let other = Connection::open(&path).expect("another connection");
    other.execute_batch("BEGIN IMMEDIATE").expect("take the write lock");
    let started = Instant::now();
    let refused = store.create_session(NewSession::in_dir("/w")).await.expect_err("locked");
    let waited = started.elapsed();
    assert_eq!(refused.kind(), StoreErrorKind::Unavailable, "{refused}");
    assert!(refused.to_string().contains("database is locked"), "{refused}");
    assert!(waited >= busy, "the write waited for the lock first: {waited:?}");
    assert!(waited < BUSY_TIMEOUT, "the caller's wait, not the default: {waited:?}");
    other.execute_batch("COMMIT").expect("release");
    let created = store.create_session(NewSession::in_dir("/w")).await.expect("written once released");
    assert!(store.session(&created.id).await.expect("read").is_some());
}

#[tokio::test]
async fn integrity_check_passes_on_a_healthy_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path().join("heron.db")).await.expect("open");
    store.check_integrity().await.expect("healthy");
}

/// Overwrites every page after the first (the header and schema) with garbage.
fn damage_every_page_but_the_first(path: &Path) {
    let mut bytes = std::fs::read(path).expect("read the file");
    let page = 4096;
    assert!(bytes.len() > page, "the file has more than its first page");
    bytes[page..].iter_mut().enumerate().for_each(|(i, b)| *b = (i % 251) as u8 ^ 0x5a);
    std::fs::write(path, bytes).expect("write the damage");
}

#[tokio::test]
async fn a_damaged_page_is_reported_as_corrupt() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("heron.db");
    let store = Store::open(&path).await.expect("open");
    store.create_session(NewSession::in_dir("/w")).await.expect("create");
    // Dropping the last handle checkpoints the log into the file and removes it.
    drop(store);
    damage_every_page_but_the_first(&path);
    let store = Store::open(&path).await.expect("the header still opens");
    let err = store.list_sessions(ListQuery::default()).await.expect_err("the page is damaged");
    assert_eq!(err.kind(), StoreErrorKind::Corrupt, "{err:?}");
}

#[tokio::test]
async fn a_file_that_is_not_a_database_is_reported_as_corrupt() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("heron.db");
    std::fs::write(&path, vec![0x42u8; 8192]).expect("write junk");
    let err = Store::open(&path).await.expect_err("junk");
    assert_eq!(err.kind(), StoreErrorKind::Corrupt, "{err:?}");
}

#[test]
fn store_handle_is_cloneable_and_shareable_across_threads() {
    fn assert_shareable<T: Clone + Send + Sync + 'static>() {}
    assert_shareable::<Store>();
}
