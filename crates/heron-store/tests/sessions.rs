//! Session records in the store: round trips, updates, deletes and paginated listing.

use std::collections::HashSet;

use heron_store::{ListQuery, NewSession, SessionPatch, Store, StoreError};
use serde_json::json;
use tempfile::TempDir;

async fn open_temp() -> (TempDir, Store) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path().join("heron.db")).await.expect("open store");
    (dir, store)
}

fn session_in(cwd: &str) -> NewSession {
    NewSession::in_dir(cwd)
}

async fn list_all(store: &Store, cwd: Option<&str>, limit: usize) -> Vec<String> {
    let mut ids = Vec::new();
    let mut cursor = None;
    loop {
        let page = store
            .list_sessions(ListQuery { cwd: cwd.map(str::to_owned), cursor, limit })
            .await
            .expect("list page");
        assert!(
            !(page.sessions.is_empty() && page.next_cursor.is_some()),
            "an empty page must not carry a cursor"
        );
        ids.extend(page.sessions.into_iter().map(|s| s.id));
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return ids,
        }
    }
}

#[tokio::test]
async fn created_session_reads_back_with_every_field() {
    let (_dir, store) = open_temp().await;
    let new = NewSession {
        id: Some("s-1".to_owned()),
        cwd: "/work/a".to_owned(),
        additional_directories: vec!["/work/b".to_owned(), "/work/c".to_owned()],
        title: Some("Fix the parser".to_owned()),
        settings: json!({"model": "m", "mode": "plan"}),
    };
    let created = store.create_session(new).await.expect("create");
    assert_eq!(created.id, "s-1");
    assert_eq!(created.additional_directories, ["/work/b", "/work/c"]);
    assert_eq!(created.settings, json!({"model": "m", "mode": "plan"}));
    assert_eq!(created.parent_id, None);
    assert_eq!(created.created_at, created.updated_at);
    assert_eq!(store.session("s-1").await.expect("read"), Some(created));
}

#[tokio::test]
async fn timestamps_are_rfc3339_utc_with_milliseconds() {
    let (_dir, store) = open_temp().await;
    let created = store.create_session(session_in("/w")).await.expect("create");
    let at = &created.created_at;
    assert_eq!(at.len(), "2025-01-31T12:00:00.123Z".len(), "{at}");
    assert!(at.ends_with('Z') && at.as_bytes()[19] == b'.', "{at}");
    humantime::parse_rfc3339(at).expect("parses as RFC 3339");
}

#[tokio::test]
async fn session_without_chosen_id_gets_a_unique_one() {
    let (_dir, store) = open_temp().await;
    let a = store.create_session(session_in("/w")).await.expect("create a");
    let b = store.create_session(session_in("/w")).await.expect("create b");
    assert!(!a.id.is_empty());
    assert_ne!(a.id, b.id);
}

#[tokio::test]
async fn creating_a_taken_id_fails_and_keeps_the_original() {
    let (_dir, store) = open_temp().await;
    let first = NewSession { id: Some("dup".to_owned()), ..session_in("/first") };
    store.create_session(first).await.expect("create");
    let second = NewSession { id: Some("dup".to_owned()), ..session_in("/second") };
    let err = store.create_session(second).await.expect_err("duplicate id");
    assert_eq!(err, StoreError::AlreadyExists("dup".to_owned()));
    let kept = store.session("dup").await.expect("read").expect("exists");
    assert_eq!(kept.cwd, "/first");
}

#[tokio::test]
async fn sessions_created_together_are_all_there_or_none_is() {
    let (_dir, store) = open_temp().await;
    let news = (0..3).map(|n| session_in(&format!("/w{n}"))).collect();
    let ids = store.create_sessions(news).await.expect("create three");
    for (n, id) in ids.iter().enumerate() {
        let record = store.session(id).await.expect("read").expect("created");
        assert_eq!(record.cwd, format!("/w{n}"));
    }
    let clash = vec![session_in("/new"), NewSession { id: Some(ids[0].clone()), ..session_in("/again") }];
    let err = store.create_sessions(clash).await.expect_err("one id is taken");
    assert_eq!(err, StoreError::AlreadyExists(ids[0].clone()));
    let page = store.list_sessions(ListQuery { limit: 10, ..ListQuery::default() }).await.expect("list");
    assert_eq!(page.sessions.len(), 3, "the failed batch created nothing");
}

#[tokio::test]
async fn unknown_session_reads_as_none() {
    let (_dir, store) = open_temp().await;
    assert_eq!(store.session("nope").await.expect("read"), None);
}

#[tokio::test]
async fn update_changes_only_the_patched_fields_and_bumps_updated_at() {
    let (_dir, store) = open_temp().await;
    let created = store
        .create_session(NewSession { title: Some("old".to_owned()), ..session_in("/w") })
        .await
        .expect("create");
    let patch = SessionPatch { settings: Some(json!({"mode": "code"})), ..SessionPatch::default() };
    let updated = store.update_session(&created.id, patch).await.expect("update");
    assert_eq!(updated.settings, json!({"mode": "code"}));
    assert_eq!(updated.title.as_deref(), Some("old"));
    assert_eq!(updated.cwd, "/w");
    assert_eq!(updated.created_at, created.created_at);
    assert!(updated.updated_at > created.updated_at, "{} > {}", updated.updated_at, created.updated_at);
}

#[tokio::test]
async fn update_can_clear_the_title_and_replace_roots() {
    let (_dir, store) = open_temp().await;
    let created = store
        .create_session(NewSession {
            title: Some("t".to_owned()),
            additional_directories: vec!["/x".to_owned()],
            ..session_in("/w")
        })
        .await
        .expect("create");
    let patch = SessionPatch {
        title: Some(None),
        cwd: Some("/v".to_owned()),
        additional_directories: Some(vec![]),
        ..SessionPatch::default()
    };
    let updated = store.update_session(&created.id, patch).await.expect("update");
    assert_eq!(updated.title, None);
    assert_eq!(updated.cwd, "/v");
    assert!(updated.additional_directories.is_empty());
    assert_eq!(store.session(&created.id).await.expect("read"), Some(updated));
}

#[tokio::test]
async fn updating_an_unknown_session_is_not_found() {
    let (_dir, store) = open_temp().await;
    let err = store.update_session("ghost", SessionPatch::default()).await.expect_err("unknown");
    assert!(matches!(err, StoreError::NotFound { .. }), "{err:?}");
}

#[tokio::test]
async fn delete_removes_the_session() {
    let (_dir, store) = open_temp().await;
    let created = store.create_session(session_in("/w")).await.expect("create");
    assert!(store.delete_session(&created.id).await.expect("delete"));
    assert_eq!(store.session(&created.id).await.expect("read"), None);
    assert!(list_all(&store, None, 10).await.is_empty());
}

#[tokio::test]
async fn deleting_an_unknown_or_deleted_session_succeeds() {
    let (_dir, store) = open_temp().await;
    let created = store.create_session(session_in("/w")).await.expect("create");
    store.delete_session(&created.id).await.expect("first delete");
    assert!(!store.delete_session(&created.id).await.expect("second delete"));
    assert!(!store.delete_session("never-existed").await.expect("unknown delete"));
}

#[tokio::test]
async fn delete_cascades_to_events_and_inbox() {
    let (_dir, store) = open_temp().await;
    let created = store.create_session(session_in("/w")).await.expect("create");
    store.append_event(&created.id, "user", &json!({"text": "hi"})).await.expect("append");
    let later = heron_store::NewInboxItem::followup(json!({"text": "later"}));
    let item = store.inbox_enqueue(&created.id, later).await.expect("enqueue").item;
    store.delete_session(&created.id).await.expect("delete");
    assert_eq!(store.event_count(&created.id).await.expect("count"), 0);
    assert!(store.events(&created.id, 0, 100).await.expect("events").is_empty());
    assert_eq!(store.inbox_get(&item.id).await.expect("inbox get"), None);
    assert!(store.inbox_list(&created.id).await.expect("inbox list").is_empty());
}

#[tokio::test]
async fn list_is_most_recently_updated_first() {
    let (_dir, store) = open_temp().await;
    // The store's timestamps strictly increase: no wait is needed to order these.
    let a = store.create_session(session_in("/w")).await.expect("a");
    let b = store.create_session(session_in("/w")).await.expect("b");
    store.append_event(&a.id, "user", &json!({})).await.expect("touch a");
    assert_eq!(list_all(&store, None, 10).await, [a.id, b.id]);
}

#[tokio::test]
async fn paging_over_250_sessions_returns_each_exactly_once_in_order() {
    let (_dir, store) = open_temp().await;
    let mut created = HashSet::new();
    for i in 0..250 {
        let record = store.create_session(session_in(&format!("/w/{}", i % 3))).await.expect("create");
        created.insert(record.id);
    }
    let mut pages = Vec::new();
    let mut cursor = None;
    loop {
        let page = store.list_sessions(ListQuery { cwd: None, cursor, limit: 7 }).await.expect("page");
        assert!(page.sessions.len() <= 7);
        pages.extend(page.sessions);
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(pages.len(), 250);
    let seen: HashSet<String> = pages.iter().map(|s| s.id.clone()).collect();
    assert_eq!(seen, created);
    let in_order = pages.windows(2).all(|w| (&w[0].updated_at, &w[0].id) > (&w[1].updated_at, &w[1].id));
    assert!(in_order, "pages must follow (updated_at, id) descending");
}

#[tokio::test]
async fn last_page_has_no_cursor_even_when_exactly_full() {
    let (_dir, store) = open_temp().await;
    for _ in 0..10 {
        store.create_session(session_in("/w")).await.expect("create");
    }
    let first = store.list_sessions(ListQuery { limit: 5, ..ListQuery::default() }).await.expect("first");
    let cursor = first.next_cursor.expect("a second page exists");
    let second = store
        .list_sessions(ListQuery { cursor: Some(cursor), limit: 5, ..ListQuery::default() })
        .await
        .expect("second");
    assert_eq!(second.sessions.len(), 5);
    assert_eq!(second.next_cursor, None);
}

#[tokio::test]
async fn cwd_filter_is_applied_before_paging() {
    let (_dir, store) = open_temp().await;
    let mut wanted = HashSet::new();
    for i in 0..250 {
        let cwd = if i % 10 == 0 { "/wanted" } else { "/other" };
        let record = store.create_session(session_in(cwd)).await.expect("create");
        if cwd == "/wanted" {
            wanted.insert(record.id);
        }
    }
    // `list_all` also asserts that no page is empty while carrying a cursor.
    let ids = list_all(&store, Some("/wanted"), 4).await;
    assert_eq!(ids.len(), 25);
    assert_eq!(ids.into_iter().collect::<HashSet<_>>(), wanted);
}

#[tokio::test]
async fn list_with_no_match_is_an_empty_last_page() {
    let (_dir, store) = open_temp().await;
    store.create_session(session_in("/w")).await.expect("create");
    let page = store
        .list_sessions(ListQuery { cwd: Some("/elsewhere".to_owned()), cursor: None, limit: 10 })
        .await
        .expect("list");
    assert!(page.sessions.is_empty());
    assert_eq!(page.next_cursor, None);
}

#[tokio::test]
async fn sessions_created_between_pages_do_not_disturb_later_pages() {
    let (_dir, store) = open_temp().await;
    let mut original = HashSet::new();
    for _ in 0..30 {
        original.insert(store.create_session(session_in("/w")).await.expect("create").id);
    }
    // Later sessions are strictly newer (the store's timestamps strictly increase), so none
    // sorts after the cursor.
    let mut seen = Vec::new();
    let mut cursor = None;
    loop {
        let page = store.list_sessions(ListQuery { cwd: None, cursor, limit: 4 }).await.expect("page");
        seen.extend(page.sessions.into_iter().map(|s| s.id));
        store.create_session(session_in("/w")).await.expect("concurrent create");
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(seen.len(), 30, "only the sessions that existed before paging began");
    assert_eq!(seen.into_iter().collect::<HashSet<_>>(), original);
}

#[tokio::test]
async fn malformed_cursor_is_rejected() {
    let (_dir, store) = open_temp().await;
    for cursor in ["not base64 !!", "", "eyJmb28iOjF9", "bm90IGpzb24"] {
        let err = store
            .list_sessions(ListQuery { cursor: Some(cursor.to_owned()), limit: 5, ..ListQuery::default() })
            .await
            .expect_err(cursor);
        assert_eq!(err, StoreError::BadCursor, "cursor {cursor:?}");
    }
}

#[tokio::test]
async fn cursor_from_a_different_cwd_filter_is_rejected() {
    let (_dir, store) = open_temp().await;
    for _ in 0..3 {
        store.create_session(session_in("/a")).await.expect("create");
    }
    let page = store
        .list_sessions(ListQuery { cwd: Some("/a".to_owned()), cursor: None, limit: 1 })
        .await
        .expect("list");
    let cursor = page.next_cursor.expect("more pages");
    let err = store
        .list_sessions(ListQuery { cwd: Some("/b".to_owned()), cursor: Some(cursor.clone()), limit: 1 })
        .await
        .expect_err("foreign cursor");
    assert_eq!(err, StoreError::BadCursor);
    let err = store
        .list_sessions(ListQuery { cwd: None, cursor: Some(cursor), limit: 1 })
        .await
        .expect_err("cursor without its filter");
    assert_eq!(err, StoreError::BadCursor);
}

#[tokio::test]
async fn page_size_is_capped_and_never_zero() {
    let (_dir, store) = open_temp().await;
    for _ in 0..3 {
        store.create_session(session_in("/w")).await.expect("create");
    }
    let page = store.list_sessions(ListQuery { limit: 0, ..ListQuery::default() }).await.expect("list");
    assert_eq!(page.sessions.len(), 1);
    assert!(page.next_cursor.is_some());
}
