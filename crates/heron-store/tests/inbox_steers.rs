//! What the inbox keeps beyond its order: idempotency keys, its capacity, steers (placed
//! next, never claimed, applied once with their event, turned into follow-ups), and the
//! migration that added them to existing stores.

use std::sync::Arc;

use heron_store::{
    INBOX_SESSION_BYTES, INBOX_STORE_BYTES, InboxIntent, InboxItem, InboxStatus, NewInboxItem, NewSession,
    Placement, Store, StoreError,
};
use serde_json::{Value, json};
use tempfile::TempDir;

async fn open_with_session() -> (TempDir, Store, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path().join("heron.db")).await.expect("open store");
    let id = store.create_session(NewSession::in_dir("/w")).await.expect("create").id;
    (dir, store, id)
}

fn text(t: &str) -> Value {
    json!({ "text": t })
}

fn texts(items: &[InboxItem]) -> Vec<String> {
    items.iter().map(|item| item.prompt["text"].as_str().unwrap_or("?").to_owned()).collect()
}

fn keyed(t: &str, key: &str) -> NewInboxItem {
    NewInboxItem { idempotency_key: Some(key.to_owned()), ..NewInboxItem::followup(text(t)) }
}

fn steer(t: &str) -> NewInboxItem {
    NewInboxItem { intent: InboxIntent::Steer, placement: Placement::Next, ..NewInboxItem::followup(text(t)) }
}

async fn add(store: &Store, session: &str, new: NewInboxItem) -> InboxItem {
    store.inbox_enqueue(session, new).await.expect("enqueue").item
}

#[tokio::test]
async fn an_enqueue_with_a_known_key_returns_the_first_item_and_adds_nothing() {
    let (dir, store, session) = open_with_session().await;
    let first = store.inbox_enqueue(&session, keyed("a", "k1")).await.expect("first");
    assert!(!first.idempotent);
    assert_eq!(first.item.idempotency_key.as_deref(), Some("k1"));
    drop(store);
    // Keys are kept with the item, so a retry after a restart still finds it.
    let store = Store::open(dir.path().join("heron.db")).await.expect("reopen");
    let again = store.inbox_enqueue(&session, keyed("a, sent again", "k1")).await.expect("retry");
    assert!(again.idempotent);
    assert_eq!(again.item, first.item);
    let other = store.inbox_enqueue(&session, keyed("b", "k2")).await.expect("other key");
    assert!(!other.idempotent);
    assert_eq!(texts(&store.inbox_list(&session).await.expect("list")), ["a", "b"]);
}

#[tokio::test]
async fn keys_belong_to_one_session() {
    let (_dir, store, a) = open_with_session().await;
    let b = store.create_session(NewSession::in_dir("/w")).await.expect("create b").id;
    let in_a = add(&store, &a, keyed("a", "same")).await;
    let in_b = store.inbox_enqueue(&b, keyed("b", "same")).await.expect("b");
    assert!(!in_b.idempotent);
    assert_ne!(in_a.id, in_b.item.id);
}

#[tokio::test]
async fn a_full_inbox_makes_room_by_removing_its_oldest_finished_item() {
    let (_dir, store, session) = open_with_session().await;
    let small = |t: &str| NewInboxItem { capacity: 3, ..NewInboxItem::followup(text(t)) };
    let a = add(&store, &session, small("a")).await;
    let b = add(&store, &session, small("b")).await;
    add(&store, &session, small("c")).await;
    store.inbox_set_status(&b.id, InboxStatus::Done, None, None).await.expect("b done");
    // The store's timestamps strictly increase: a finishes later.
    store.inbox_set_status(&a.id, InboxStatus::Done, None, None).await.expect("a done");
    add(&store, &session, small("d")).await;
    let items = store.inbox_list(&session).await.expect("list");
    assert_eq!(texts(&items), ["a", "c", "d"], "b finished first, so it went first");
    assert_eq!(items.iter().map(|i| i.position).collect::<Vec<_>>(), [0, 1, 2]);
}

/// The budget of every session's inbox together, crossed with small budgets (the defaults,
/// 32 MiB a session and 256 MiB in all, are pinned first).
#[tokio::test]
async fn the_inboxes_together_refuse_past_the_stores_byte_budget_and_keep_what_is_queued() {
    let defaults = NewInboxItem::followup(text("x"));
    assert_eq!((defaults.session_bytes, defaults.store_bytes), (INBOX_SESSION_BYTES, INBOX_STORE_BYTES));
    assert_eq!((INBOX_SESSION_BYTES, INBOX_STORE_BYTES), (32 << 20, 256 << 20));
    let (_dir, store, a) = open_with_session().await;
    let b = store.create_session(NewSession::in_dir("/w")).await.expect("create b").id;
    // `{"text":"…"}` stores 11 bytes around its text.
    let sized = |bytes: usize| NewInboxItem {
        session_bytes: 600,
        store_bytes: 1000,
        ..NewInboxItem::followup(text(&"x".repeat(bytes - 11)))
    };
    add(&store, &a, sized(500)).await;
    let first_of_b = add(&store, &b, sized(400)).await;
    let refused = store.inbox_enqueue(&b, sized(200)).await.expect_err("1,100 bytes in all");
    assert_eq!(refused, StoreError::InboxBytesFull { limit: 1000, all_sessions: true });
    assert_eq!(store.inbox_list(&a).await.expect("a").len(), 1, "what is queued stays");
    assert_eq!(store.inbox_list(&b).await.expect("b").len(), 1, "what is queued stays");
    let refused = store.inbox_enqueue(&a, sized(200)).await.expect_err("700 bytes in a");
    assert_eq!(refused, StoreError::InboxBytesFull { limit: 600, all_sessions: false });
    // A finished item of the session makes room in both budgets.
    store.inbox_set_status(&first_of_b.id, InboxStatus::Done, None, None).await.expect("done");
    add(&store, &b, sized(200)).await;
    assert_eq!(store.inbox_list(&b).await.expect("b").len(), 1, "the finished item made room");
}

#[tokio::test]
async fn a_full_inbox_with_nothing_finished_refuses_but_still_answers_a_known_key() {
    let (_dir, store, session) = open_with_session().await;
    let small = |new: NewInboxItem| NewInboxItem { capacity: 2, ..new };
    add(&store, &session, small(keyed("a", "k"))).await;
    let failed = add(&store, &session, small(NewInboxItem::followup(text("b")))).await;
    store.inbox_set_status(&failed.id, InboxStatus::Failed, Some("boom"), None).await.expect("failed");
    let refused = store.inbox_enqueue(&session, small(NewInboxItem::followup(text("c")))).await;
    assert_eq!(refused.expect_err("full"), StoreError::InboxFull { capacity: 2 });
    let retried = store.inbox_enqueue(&session, small(keyed("a", "k"))).await.expect("known key");
    assert!(retried.idempotent);
    assert_eq!(store.inbox_list(&session).await.expect("list").len(), 2, "a failed item is kept");
}

#[tokio::test]
async fn steers_go_before_the_first_queued_followup_and_are_never_claimed() {
    let (_dir, store, session) = open_with_session().await;
    let done = add(&store, &session, NewInboxItem::followup(text("done"))).await;
    store.inbox_set_status(&done.id, InboxStatus::Done, None, None).await.expect("done");
    add(&store, &session, NewInboxItem::followup(text("later"))).await;
    add(&store, &session, steer("s1")).await;
    add(&store, &session, steer("s2")).await;
    assert_eq!(texts(&store.inbox_list(&session).await.expect("list")), ["done", "s1", "s2", "later"]);
    let claimed = store.inbox_claim_next(&session).await.expect("claim").expect("a follow-up waits");
    assert_eq!(claimed.prompt, text("later"));
    assert_eq!(texts(&store.inbox_pending_steers(&session).await.expect("pending")), ["s1", "s2"]);
}

#[tokio::test]
async fn applying_a_steer_marks_it_done_and_logs_its_event_exactly_once() {
    let (_dir, store, session) = open_with_session().await;
    let s = add(&store, &session, steer("use tabs")).await;
    let payload: Arc<str> = r#"{"text":"use tabs"}"#.into();
    let seq = store.inbox_apply_steer(&s.id, "user_message", payload.clone()).await.expect("apply");
    assert_eq!(seq, Some(1));
    let again = store.inbox_apply_steer(&s.id, "user_message", payload).await.expect("apply again");
    assert_eq!(again, None, "an applied steer is not applied twice");
    assert_eq!(store.event_count(&session).await.expect("count"), 1);
    let item = store.inbox_get(&s.id).await.expect("get").expect("kept");
    assert_eq!((item.status, item.intent), (InboxStatus::Done, InboxIntent::Steer));
    assert!(store.inbox_pending_steers(&session).await.expect("pending").is_empty());
}

#[tokio::test]
async fn a_deleted_steer_is_not_applied() {
    let (_dir, store, session) = open_with_session().await;
    let s = add(&store, &session, steer("never mind")).await;
    store.inbox_delete(&s.id).await.expect("delete");
    let applied = store.inbox_apply_steer(&s.id, "user_message", "{}".into()).await.expect("apply");
    assert_eq!(applied, None);
    assert_eq!(store.event_count(&session).await.expect("count"), 0);
}

#[tokio::test]
async fn steers_a_turn_left_become_followups_and_a_stop_pauses_the_inbox() {
    let (_dir, store, session) = open_with_session().await;
    add(&store, &session, steer("unseen")).await;
    assert_eq!(store.inbox_steers_to_followups(&session, true).await.expect("turn"), 1);
    let state = store.inbox_state(&session).await.expect("state");
    assert_eq!((state.items[0].intent, state.items[0].status), (InboxIntent::Followup, InboxStatus::Queued));
    assert!(state.paused && !state.recovered, "{state:?}");
    store.inbox_set_paused(&session, false).await.expect("resume");
    assert_eq!(store.inbox_steers_to_followups(&session, true).await.expect("none left"), 0);
    assert!(!store.inbox_state(&session).await.expect("state").paused, "nothing turned, nothing paused");
}

#[tokio::test]
async fn recovery_turns_unapplied_steers_into_followups() {
    let (_dir, store, session) = open_with_session().await;
    add(&store, &session, steer("committed, never applied")).await;
    let recovery = store.inbox_recover(&session, "interrupted").await.expect("recover");
    assert_eq!((recovery.interrupted, recovery.steers), (0, 1));
    let state = store.inbox_state(&session).await.expect("state");
    assert_eq!(state.items[0].intent, InboxIntent::Followup);
    assert!(state.paused && state.recovered, "{state:?}");
}

/// Takes a current store file back to schema 3, the last one without intents and keys.
fn downgrade_to_schema_3(path: &std::path::Path) {
    let conn = rusqlite::Connection::open(path).expect("raw open");
    conn.execute_batch(
        "DROP TRIGGER events_bytes_in;
         DROP TRIGGER events_bytes_out;
         ALTER TABLE sessions DROP COLUMN history_bytes;
         DROP INDEX inbox_by_idempotency_key;
         ALTER TABLE inbox_items DROP COLUMN intent;
         ALTER TABLE inbox_items DROP COLUMN idempotency_key;
         ALTER TABLE sessions DROP COLUMN inbox_recovered;
         PRAGMA user_version = 3;",
    )
    .expect("downgrade");
}

#[tokio::test]
async fn a_store_from_before_intents_keeps_its_items_as_followups() {
    let (dir, store, session) = open_with_session().await;
    let kept = add(&store, &session, NewInboxItem::followup(text("from before"))).await;
    drop(store);
    let path = dir.path().join("heron.db");
    downgrade_to_schema_3(&path);
    let store = Store::open(&path).await.expect("migrate");
    let item = store.inbox_get(&kept.id).await.expect("get").expect("kept");
    assert_eq!(
        (item.intent, item.idempotency_key, item.prompt),
        (InboxIntent::Followup, None, text("from before"))
    );
    assert!(!store.inbox_state(&session).await.expect("state").recovered);
    assert!(!store.inbox_enqueue(&session, keyed("new", "k")).await.expect("keyed").idempotent);
}

#[tokio::test]
async fn the_tally_counts_items_by_status_and_intent_without_reading_prompts() {
    let (_dir, store, session) = open_with_session().await;
    add(&store, &session, NewInboxItem::followup(text("a"))).await;
    add(&store, &session, NewInboxItem::followup(text("b"))).await;
    add(&store, &session, steer("s")).await;
    store.inbox_set_paused(&session, true).await.expect("pause");
    let mut tally = store.inbox_tally(&session).await.expect("tally");
    tally.counts.sort_by_key(|(_, intent, _)| intent.as_str());
    assert_eq!(
        tally.counts,
        [(InboxStatus::Queued, InboxIntent::Followup, 2), (InboxStatus::Queued, InboxIntent::Steer, 1)]
    );
    assert!(tally.paused);
    assert!(matches!(store.inbox_tally("ghost").await, Err(StoreError::NotFound { .. })));
}
