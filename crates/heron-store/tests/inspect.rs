//! The read-only look at a store file that `heron doctor` takes.

use heron_store::{SCHEMA_VERSION, Store, StoreError, StoreErrorKind, StoreHealth, inspect};
use rusqlite::Connection;

#[test]
fn a_missing_store_is_reported_and_not_created() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("heron.db");
    assert_eq!(inspect(&path).expect("looked"), StoreHealth::Missing);
    assert!(!path.exists(), "the look must not create the file");
}

#[tokio::test]
async fn a_store_heron_wrote_is_healthy_and_left_as_it_was() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("heron.db");
    drop(Store::open(&path).await.expect("open"));
    let before = std::fs::read(&path).expect("read");
    assert_eq!(inspect(&path).expect("looked"), StoreHealth::Healthy { schema_version: SCHEMA_VERSION });
    assert_eq!(std::fs::read(&path).expect("read"), before, "the look must not write");
}

#[test]
fn a_file_that_is_not_a_database_is_corrupt() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("heron.db");
    std::fs::write(&path, b"this is not a database, only bytes in its place\n".repeat(200)).expect("write");
    let err = inspect(&path).expect_err("garbage");
    assert_eq!(err.kind(), StoreErrorKind::Corrupt, "{err}");
}

#[test]
fn a_store_from_a_newer_heron_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("heron.db");
    Connection::open(&path).expect("raw open").execute_batch("PRAGMA user_version = 99;").expect("seed");
    assert_eq!(inspect(&path), Err(StoreError::TooNew { found: 99, supported: SCHEMA_VERSION }));
}

#[test]
fn a_directory_in_its_place_is_unavailable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("heron.db");
    std::fs::create_dir(&path).expect("dir");
    assert_eq!(inspect(&path).expect_err("a directory").kind(), StoreErrorKind::Unavailable);
}

#[tokio::test]
async fn a_store_with_damaged_pages_is_corrupt() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("heron.db");
    drop(Store::open(&path).await.expect("open"));
    let mut bytes = std::fs::read(&path).expect("read");
    assert!(bytes.len() > 8192, "a fresh store has more than two pages");
    // Keep the header page, so the file still opens as a database; scramble the next one.
    for (i, byte) in bytes[4096..8192].iter_mut().enumerate() {
        *byte = (i % 251) as u8;
    }
    std::fs::write(&path, &bytes).expect("write");
    let err = inspect(&path).expect_err("damaged");
    assert_eq!(err.kind(), StoreErrorKind::Corrupt, "{err}");
}
