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

/// The names in `dir`, sorted.
fn names(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("list")
        .map(|entry| entry.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn the_look_leaves_no_wal_or_shm_file_beside_a_closed_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("heron.db");
    drop(Store::open(&path).await.expect("open"));
    assert_eq!(names(dir.path()), ["heron.db"], "a closed store has no side files");
    assert_eq!(inspect(&path).expect("looked"), StoreHealth::Healthy { schema_version: SCHEMA_VERSION });
    assert_eq!(names(dir.path()), ["heron.db"], "the look must create nothing");
}

/// The look opens the file through a `file:` URI; a folder name holding what a URI gives a
/// meaning (`?`, `#`, `%`, a space) must still name the same file.
#[tokio::test]
async fn a_store_in_a_folder_with_uri_characters_in_its_name_is_found() {
    let dir = tempfile::tempdir().expect("tempdir");
    let folder = dir.path().join("a b?c#d%20e");
    std::fs::create_dir(&folder).expect("folder");
    let path = folder.join("heron.db");
    drop(Store::open(&path).await.expect("open"));
    assert_eq!(inspect(&path).expect("looked"), StoreHealth::Healthy { schema_version: SCHEMA_VERSION });
    assert_eq!(names(&folder), ["heron.db"]);
    assert_eq!(names(dir.path()), ["a b?c#d%20e"], "nothing made beside the folder either");
}

#[tokio::test]
async fn a_store_in_use_is_looked_at_through_its_own_side_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("heron.db");
    let open = Store::open(&path).await.expect("open");
    let before = names(dir.path());
    assert_eq!(before, ["heron.db", "heron.db-shm", "heron.db-wal"], "an open store in WAL mode");
    assert_eq!(inspect(&path).expect("looked"), StoreHealth::Healthy { schema_version: SCHEMA_VERSION });
    assert_eq!(names(dir.path()), before);
    drop(open);
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
