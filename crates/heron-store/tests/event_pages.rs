//! Reading a log in bounded pages decoded from the rows' text: every event once, in order,
//! whatever the page size; rows that are not JSON fail clearly; rows of another shape are
//! handed back for the caller to skip.

use heron_store::{NewSession, PageBudget, Store, StoreError};
use serde_json::{Value, json};
use tempfile::TempDir;

async fn session_with(events: usize) -> (TempDir, Store, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path().join("heron.db")).await.expect("open store");
    let id = store.create_session(NewSession::in_dir("/w")).await.expect("create").id;
    let batch: Vec<(&str, Value)> =
        (1..=events).map(|n| ("k", json!({ "n": n, "pad": "x".repeat(40) }))).collect();
    store.append_events(&id, batch).await.expect("append");
    (dir, store, id)
}

/// Reads the whole log with `budget`, returning each row's seq and the size of each page.
async fn read_all(store: &Store, id: &str, budget: PageBudget) -> Result<(Vec<u64>, Vec<usize>), StoreError> {
    let (mut seen, mut pages, mut after) = (Vec::new(), Vec::new(), Some(0));
    while let Some(from) = after {
        let page = store.decode_events(id, from, budget, |text| serde_json::from_str::<Value>(text)).await?;
        pages.push(page.rows.len());
        for (seq, row) in page.rows {
            let value = row.expect("every row is JSON");
            assert_eq!(value["n"], json!(seq), "the row decoded is the row of that seq");
            seen.push(seq);
        }
        after = page.next_after;
    }
    Ok((seen, pages))
}

#[tokio::test]
async fn a_log_longer_than_one_page_is_read_whole_and_in_order() {
    let (_dir, store, id) = session_with(1_234).await;
    let (seen, pages) =
        read_all(&store, &id, PageBudget { rows: 500, bytes: usize::MAX }).await.expect("read");
    assert_eq!(seen, (1..=1_234).collect::<Vec<_>>());
    assert_eq!(pages, [500, 500, 234]);
}

#[tokio::test]
async fn a_page_ends_once_its_rows_reach_the_byte_budget() {
    let (_dir, store, id) = session_with(100).await;
    // Each payload is about 60 bytes, so 200 bytes takes four rows a page.
    let (seen, pages) = read_all(&store, &id, PageBudget { rows: 500, bytes: 200 }).await.expect("read");
    assert_eq!(seen, (1..=100).collect::<Vec<_>>());
    assert!(pages.iter().all(|&rows| rows <= 4), "{pages:?}");
    assert!(pages.len() >= 25, "{pages:?}");
    // A budget smaller than one row still makes progress, one row a page.
    let (seen, _) = read_all(&store, &id, PageBudget { rows: 500, bytes: 1 }).await.expect("read");
    assert_eq!(seen.len(), 100);
}

#[tokio::test]
async fn an_unknown_session_has_one_empty_last_page() {
    let (_dir, store, _id) = session_with(3).await;
    let page = store
        .decode_events("nobody", 0, PageBudget::default(), |text| serde_json::from_str::<Value>(text))
        .await;
    let page = page.expect("read");
    assert!(page.rows.is_empty() && page.next_after.is_none(), "{page:?}");
}

/// Overwrites the payload of event `seq` with a raw SQL value.
fn overwrite_payload(dir: &TempDir, id: &str, seq: u64, value: &str) {
    let conn = rusqlite::Connection::open(dir.path().join("heron.db")).expect("raw open");
    let sql = format!("UPDATE events SET payload = {value} WHERE session_id = ?1 AND seq = ?2");
    let changed = conn.execute(&sql, rusqlite::params![id, seq as i64]).expect("overwrite");
    assert_eq!(changed, 1);
}

#[tokio::test]
async fn a_row_that_is_not_json_mid_log_fails_naming_its_seq_and_nothing_of_it() {
    let (dir, store, id) = session_with(1_200).await;
    overwrite_payload(&dir, &id, 700, "'{\"n\": 700, \"secret\": \"hunter2\" '");
    let err = read_all(&store, &id, PageBudget::default()).await.expect_err("a corrupt row fails the read");
    let StoreError::Corrupt(reason) = &err else { panic!("{err:?}") };
    assert!(reason.contains("event 700") && reason.contains("not valid JSON"), "{reason}");
    assert!(
        !reason.contains("hunter2") && reason.len() < 200,
        "the reason is short and quotes nothing: {reason}"
    );
}

#[tokio::test]
async fn a_row_that_is_not_text_or_not_utf8_fails_clearly() {
    for (value, expected) in [("x'00ff'", "not text"), ("CAST(x'7b22ff7d' AS TEXT)", "not UTF-8")] {
        let (dir, store, id) = session_with(10).await;
        overwrite_payload(&dir, &id, 4, value);
        let err = read_all(&store, &id, PageBudget::default()).await.expect_err("fails");
        let StoreError::Corrupt(reason) = &err else { panic!("{err:?}") };
        assert!(reason.contains("event 4") && reason.contains(expected), "{value}: {reason}");
    }
}

#[tokio::test]
async fn a_row_of_another_shape_is_handed_back_as_its_own_error() {
    let (dir, store, id) = session_with(5).await;
    overwrite_payload(&dir, &id, 2, "'\"a string\"'");
    #[derive(Debug, serde::Deserialize)]
    struct Row {
        n: u64,
    }
    let page =
        store.decode_events(&id, 0, PageBudget::default(), |text| serde_json::from_str::<Row>(text)).await;
    let rows = page.expect("the read goes on").rows;
    let read: Vec<(u64, Option<u64>)> =
        rows.iter().map(|(seq, row)| (*seq, row.as_ref().ok().map(|r| r.n))).collect();
    assert_eq!(read, [(1, Some(1)), (2, None), (3, Some(3)), (4, Some(4)), (5, Some(5))]);
}

#[tokio::test]
async fn a_row_past_the_stores_bound_fails_the_read_without_being_taken_whole() {
    let (dir, store, id) = session_with(10).await;
    let past = i64::from(heron_store::MAX_ROW_BYTES) + 1;
    // Made inside SQLite, by a connection with its own (larger) bound: a store from elsewhere.
    overwrite_payload(&dir, &id, 4, &format!("printf('%.*c', {past}, 'x')"));
    let err = read_all(&store, &id, PageBudget::default()).await.expect_err("refused");
    let StoreError::Corrupt(reason) = &err else { panic!("{err:?}") };
    assert!(reason.contains("larger than the store takes"), "{reason}");
    // The rows before it still read, and the store serves on.
    let first = store.events(&id, 0, 3).await.expect("the first rows");
    assert_eq!(first.len(), 3);
}
