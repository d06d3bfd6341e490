//! A session's goal and last usage report in the store: round trips, clearing, patches that
//! leave them alone, and a store written before they existed.

use heron_store::{ListQuery, NewSession, SessionPatch, Store};
use rusqlite::Connection;
use serde_json::json;

async fn open_temp() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path().join("heron.db")).await.expect("open store");
    (dir, store)
}

#[tokio::test]
async fn goal_and_usage_round_trip_and_clear() {
    let (_dir, store) = open_temp().await;
    let created = store.create_session(NewSession::in_dir("/w")).await.expect("create");
    assert_eq!((created.goal.clone(), created.usage.clone()), (None, None));
    let patch = SessionPatch {
        goal: Some(Some(json!({ "objective": "ship", "status": "active" }))),
        usage: Some(Some(json!({ "used": 10, "size": 100 }))),
        ..SessionPatch::default()
    };
    let updated = store.update_session(&created.id, patch).await.expect("update");
    assert_eq!(updated.goal, Some(json!({ "objective": "ship", "status": "active" })));
    assert_eq!(store.session(&created.id).await.expect("read"), Some(updated.clone()));
    let listed = store.list_sessions(ListQuery { limit: 10, ..ListQuery::default() }).await.expect("list");
    assert_eq!(listed.sessions[0].usage, Some(json!({ "used": 10, "size": 100 })));

    let cleared = store
        .update_session(&created.id, SessionPatch { goal: Some(None), ..SessionPatch::default() })
        .await
        .expect("clear");
    assert_eq!(cleared.goal, None);
    assert_eq!(cleared.usage, updated.usage, "clearing the goal leaves the usage");
}

#[tokio::test]
async fn other_patches_leave_goal_and_usage_alone() {
    let (_dir, store) = open_temp().await;
    let created = store.create_session(NewSession::in_dir("/w")).await.expect("create");
    let patch = SessionPatch { goal: Some(Some(json!({ "objective": "x" }))), ..SessionPatch::default() };
    store.update_session(&created.id, patch).await.expect("set goal");
    let patch = SessionPatch { settings: Some(json!({ "mode": "goal" })), ..SessionPatch::default() };
    let updated = store.update_session(&created.id, patch).await.expect("settings");
    assert_eq!(updated.goal, Some(json!({ "objective": "x" })));
}

#[tokio::test]
async fn a_store_from_before_goals_opens_with_its_sessions_and_no_goals() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("heron.db");
    {
        // Schema version 1, as the first release wrote it.
        let conn = Connection::open(&path).expect("raw open");
        conn.execute_batch(
            "CREATE TABLE sessions (id TEXT PRIMARY KEY NOT NULL, cwd TEXT NOT NULL,
                 additional_directories TEXT NOT NULL DEFAULT '[]', title TEXT,
                 settings TEXT NOT NULL DEFAULT '{}', parent_id TEXT,
                 created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
             CREATE TABLE events (session_id TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL,
                 payload TEXT NOT NULL, at TEXT NOT NULL, UNIQUE (session_id, seq));
             CREATE TABLE inbox_items (id TEXT PRIMARY KEY NOT NULL, session_id TEXT NOT NULL,
                 position INTEGER NOT NULL, prompt TEXT NOT NULL, status TEXT NOT NULL, error TEXT,
                 created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
             INSERT INTO sessions (id, cwd, created_at, updated_at)
                 VALUES ('old', '/w', '2025-01-01T00:00:00.000Z', '2025-01-01T00:00:00.000Z');
             PRAGMA user_version = 1;",
        )
        .expect("seed");
    }
    let store = Store::open(&path).await.expect("migrates");
    let old = store.session("old").await.expect("read").expect("kept");
    assert_eq!((old.cwd.as_str(), old.goal, old.usage), ("/w", None, None));
}
