//! The store's per-session event log: appends, paging, counting and forking.

use heron_store::{NewSession, Store, StoreError};
use serde_json::{Value, json};
use tempfile::TempDir;

async fn open_with_session() -> (TempDir, Store, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path().join("heron.db")).await.expect("open store");
    let id = store.create_session(NewSession::in_dir("/w")).await.expect("create").id;
    (dir, store, id)
}

#[tokio::test]
async fn appended_events_get_seqs_from_one() {
    let (_dir, store, id) = open_with_session().await;
    for expected in 1..=3 {
        let seq = store.append_event(&id, "user", &json!({"n": expected})).await.expect("append");
        assert_eq!(seq, expected);
    }
}

#[tokio::test]
async fn events_read_back_with_kind_payload_and_time() {
    let (_dir, store, id) = open_with_session().await;
    let payload = json!({"text": "héllo", "nested": [1, {"a": null}], "big": u64::MAX});
    store.append_event(&id, "agent_message", &payload).await.expect("append");
    let events = store.events(&id, 0, 10).await.expect("events");
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].seq, 1);
    assert_eq!(events[0].kind, "agent_message");
    assert_eq!(events[0].payload, payload);
    humantime::parse_rfc3339(&events[0].at).expect("RFC 3339 time");
}

#[tokio::test]
async fn seqs_are_per_session() {
    let (_dir, store, a) = open_with_session().await;
    let b = store.create_session(NewSession::in_dir("/w")).await.expect("create b").id;
    store.append_event(&a, "k", &json!(1)).await.expect("a1");
    store.append_event(&a, "k", &json!(2)).await.expect("a2");
    assert_eq!(store.append_event(&b, "k", &json!(1)).await.expect("b1"), 1);
}

#[tokio::test]
async fn batch_append_assigns_consecutive_seqs_in_order() {
    let (_dir, store, id) = open_with_session().await;
    store.append_event(&id, "first", &json!(0)).await.expect("append");
    let batch = vec![("a", json!(1)), ("b", json!(2)), ("c", json!(3))];
    let seqs = store.append_events(&id, batch).await.expect("batch");
    assert_eq!(seqs, [2, 3, 4]);
    let kinds: Vec<String> =
        store.events(&id, 1, 10).await.expect("events").into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds, ["a", "b", "c"]);
}

#[tokio::test]
async fn appending_bumps_the_session_updated_at() {
    let (_dir, store, id) = open_with_session().await;
    let before = store.session(&id).await.expect("read").expect("exists").updated_at;
    store.append_event(&id, "k", &json!({})).await.expect("append");
    let after = store.session(&id).await.expect("read").expect("exists").updated_at;
    assert!(after > before, "{after} > {before}");
}

#[tokio::test]
async fn appending_to_an_unknown_session_is_not_found() {
    let (_dir, store, _id) = open_with_session().await;
    let err = store.append_event("ghost", "k", &json!({})).await.expect_err("unknown session");
    assert!(matches!(err, StoreError::NotFound { .. }), "{err:?}");
}

#[tokio::test]
async fn large_payloads_bound_in_place_read_back_whole_among_small_ones() {
    let (_dir, store, id) = open_with_session().await;
    let big = json!({ "text": "é漢🦀".repeat(100_000) });
    let batch = vec![
        ("small".to_owned(), std::sync::Arc::<str>::from(json!({ "n": 1 }).to_string())),
        ("big".to_owned(), std::sync::Arc::<str>::from(big.to_string())),
        ("small".to_owned(), std::sync::Arc::<str>::from(json!({ "n": 2 }).to_string())),
    ];
    assert_eq!(store.append_events_json(&id, batch).await.expect("append"), vec![1, 2, 3]);
    let events = store.events(&id, 0, 10).await.expect("events");
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["small", "big", "small"]);
    assert_eq!(events[1].payload, big);
    assert_eq!(events[2].payload, json!({ "n": 2 }));
    let ghost = vec![("big".to_owned(), std::sync::Arc::<str>::from(big.to_string()))];
    store.append_events_json("ghost", ghost).await.expect_err("unknown session");
    assert_eq!(store.event_count("ghost").await.expect("count"), 0);
}

#[tokio::test]
async fn failed_batch_leaves_no_events_behind() {
    let (_dir, store, _id) = open_with_session().await;
    let batch = vec![("a", json!(1)), ("b", json!(2))];
    store.append_events("ghost", batch).await.expect_err("unknown session");
    assert_eq!(store.event_count("ghost").await.expect("count"), 0);
}

#[tokio::test]
async fn events_page_from_after_seq_up_to_limit() {
    let (_dir, store, id) = open_with_session().await;
    let batch: Vec<(&str, Value)> = (1..=10).map(|n| ("k", json!(n))).collect();
    store.append_events(&id, batch).await.expect("batch");
    let page = store.events(&id, 4, 3).await.expect("page");
    let seqs: Vec<u64> = page.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [5, 6, 7]);
    assert!(store.events(&id, 10, 3).await.expect("past the end").is_empty());
}

#[tokio::test]
async fn event_count_counts_the_log() {
    let (_dir, store, id) = open_with_session().await;
    assert_eq!(store.event_count(&id).await.expect("empty count"), 0);
    store.append_events(&id, [("a", json!(1)), ("b", json!(2))]).await.expect("batch");
    assert_eq!(store.event_count(&id).await.expect("count"), 2);
}

/// The bytes are those of the stored JSON text, not its characters: what a load reads.
#[tokio::test]
async fn event_totals_count_the_log_and_the_bytes_of_its_payloads() {
    let (_dir, store, id) = open_with_session().await;
    assert_eq!(store.event_totals(&id).await.expect("empty"), heron_store::EventTotals::default());
    store.append_events(&id, [("a", json!("é")), ("b", json!(12))]).await.expect("batch");
    let totals = store.event_totals(&id).await.expect("totals");
    // `"é"` is four bytes of text (three characters), `12` two.
    assert_eq!((totals.count, totals.bytes), (2, 6));
    assert_eq!(store.event_totals("ghost").await.expect("unknown").bytes, 0);
}

/// The byte total the schema keeps follows every way rows come: appends, a fork's copy,
/// and a store from before the total (schema 4), which the migration backfills.
#[tokio::test]
async fn the_byte_total_follows_appends_forks_and_a_store_from_before_it() {
    let (dir, store, id) = open_with_session().await;
    store.append_events(&id, [("a", json!("é")), ("b", json!(12))]).await.expect("batch");
    let fork = store.fork_session(&id, NewSession::in_dir("/f")).await.expect("fork").id;
    assert_eq!(store.event_totals(&fork).await.expect("fork").bytes, 6);
    store.append_events(&fork, [("c", json!("xyz"))]).await.expect("more");
    assert_eq!(store.event_totals(&fork).await.expect("fork").bytes, 11);
    assert_eq!(store.event_totals(&id).await.expect("source").bytes, 6);
    drop(store);
    let path = dir.path().join("heron.db");
    let conn = rusqlite::Connection::open(&path).expect("raw open");
    conn.execute_batch(
        "DROP TRIGGER events_bytes_in;
         DROP TRIGGER events_bytes_out;
         ALTER TABLE sessions DROP COLUMN history_bytes;
         PRAGMA user_version = 4;",
    )
    .expect("back to schema 4");
    drop(conn);
    let store = Store::open(&path).await.expect("migrates");
    assert_eq!(store.event_totals(&id).await.expect("backfilled").bytes, 6);
    assert_eq!(store.event_totals(&fork).await.expect("backfilled").bytes, 11);
    store.append_events(&id, [("d", json!(1))]).await.expect("after");
    assert_eq!(store.event_totals(&id).await.expect("kept on").bytes, 7);
}

#[tokio::test]
async fn ten_thousand_events_load_completely_through_paging() {
    let (_dir, store, id) = open_with_session().await;
    for chunk in 0..10 {
        let batch: Vec<(&str, Value)> = (0..1000)
            .map(|n| ("tool_call_update", json!({"n": chunk * 1000 + n, "out": "x".repeat(64)})))
            .collect();
        store.append_events(&id, batch).await.expect("batch");
    }
    assert_eq!(store.event_count(&id).await.expect("count"), 10_000);
    let mut after = 0;
    let mut loaded = 0_u64;
    loop {
        let page = store.events(&id, after, 333).await.expect("page");
        let Some(last) = page.last() else { break };
        for event in &page {
            loaded += 1;
            assert_eq!(event.seq, loaded, "seqs are dense and in order");
            assert_eq!(event.payload["n"], json!(loaded - 1));
        }
        after = last.seq;
    }
    assert_eq!(loaded, 10_000);
}

#[tokio::test]
async fn fork_copies_every_event_and_records_its_parent() {
    let (_dir, store, source) = open_with_session().await;
    store.append_events(&source, [("user", json!("a")), ("agent", json!("b"))]).await.expect("batch");
    let fork = store
        .fork_session(&source, NewSession { title: Some("fork".to_owned()), ..NewSession::in_dir("/f") })
        .await
        .expect("fork");
    assert_eq!(fork.parent_id.as_deref(), Some(source.as_str()));
    assert_eq!(fork.cwd, "/f");
    assert_eq!(fork.title.as_deref(), Some("fork"));
    let original = store.events(&source, 0, 100).await.expect("source events");
    let copied = store.events(&fork.id, 0, 100).await.expect("fork events");
    assert_eq!(copied, original);
}

#[tokio::test]
async fn fork_does_not_inherit_roots_or_settings() {
    let (_dir, store, _id) = open_with_session().await;
    let source = store
        .create_session(NewSession {
            additional_directories: vec!["/extra".to_owned()],
            settings: json!({"mode": "plan"}),
            ..NewSession::in_dir("/w")
        })
        .await
        .expect("create");
    let fork = store.fork_session(&source.id, NewSession::in_dir("/w")).await.expect("fork");
    assert!(fork.additional_directories.is_empty());
    assert_eq!(fork.settings, json!({}));
}

#[tokio::test]
async fn fork_and_source_diverge_afterwards() {
    let (_dir, store, source) = open_with_session().await;
    store.append_event(&source, "user", &json!("shared")).await.expect("append");
    let fork = store.fork_session(&source, NewSession::in_dir("/w")).await.expect("fork").id;
    assert_eq!(store.append_event(&fork, "user", &json!("fork only")).await.expect("fork append"), 2);
    assert_eq!(store.append_event(&source, "user", &json!("source only")).await.expect("src append"), 2);
    store.delete_session(&source).await.expect("delete source");
    let events = store.events(&fork, 0, 10).await.expect("fork events");
    let payloads: Vec<Value> = events.into_iter().map(|e| e.payload).collect();
    assert_eq!(payloads, [json!("shared"), json!("fork only")]);
}

#[tokio::test]
async fn forking_an_unknown_session_is_not_found_and_creates_nothing() {
    let (_dir, store, _id) = open_with_session().await;
    let new = NewSession { id: Some("would-be".to_owned()), ..NewSession::in_dir("/w") };
    let err = store.fork_session("ghost", new).await.expect_err("unknown source");
    assert!(matches!(err, StoreError::NotFound { .. }), "{err:?}");
    assert_eq!(store.session("would-be").await.expect("read"), None);
}
