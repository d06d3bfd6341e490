//! The store's per-session inbox: a durable, densely numbered prompt queue.

use heron_store::{InboxItem, InboxStatus, NewInboxItem, NewSession, Placement, Store, StoreError};
use serde_json::{Value, json};
use tempfile::TempDir;

async fn open_with_session() -> (TempDir, Store, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path().join("heron.db")).await.expect("open store");
    let id = store.create_session(NewSession::in_dir("/w")).await.expect("create").id;
    (dir, store, id)
}

fn texts(items: &[InboxItem]) -> Vec<String> {
    items.iter().map(|item| item.prompt["text"].as_str().unwrap_or("?").to_owned()).collect()
}

fn positions(items: &[InboxItem]) -> Vec<u32> {
    items.iter().map(|item| item.position).collect()
}

/// Enqueues a follow-up at `position` (`None`: last).
async fn enqueue(store: &Store, session: &str, prompt: Value, position: Option<u32>) -> InboxItem {
    let placement = position.map_or(Placement::End, Placement::At);
    let new = NewInboxItem { placement, ..NewInboxItem::followup(prompt) };
    store.inbox_enqueue(session, new).await.expect("enqueue").item
}

async fn enqueue_texts(store: &Store, session: &str, texts: &[&str]) -> Vec<InboxItem> {
    let mut items = Vec::new();
    for text in texts {
        items.push(enqueue(store, session, json!({"text": text}), None).await);
    }
    items
}

#[tokio::test]
async fn enqueued_item_reads_back_queued() {
    let (_dir, store, session) = open_with_session().await;
    let item = enqueue(&store, &session, json!({"text": "a"}), None).await;
    assert_eq!(item.session_id, session);
    assert_eq!(item.position, 0);
    assert_eq!(item.status, InboxStatus::Queued);
    assert_eq!(item.error, None);
    assert_eq!(store.inbox_get(&item.id).await.expect("get"), Some(item));
}

#[tokio::test]
async fn enqueue_without_position_appends() {
    let (_dir, store, session) = open_with_session().await;
    enqueue_texts(&store, &session, &["a", "b", "c"]).await;
    let items = store.inbox_list(&session).await.expect("list");
    assert_eq!(texts(&items), ["a", "b", "c"]);
    assert_eq!(positions(&items), [0, 1, 2]);
}

#[tokio::test]
async fn enqueue_at_a_position_shifts_later_items() {
    let (_dir, store, session) = open_with_session().await;
    enqueue_texts(&store, &session, &["a", "b"]).await;
    enqueue(&store, &session, json!({"text": "front"}), Some(0)).await;
    enqueue(&store, &session, json!({"text": "far"}), Some(99)).await;
    let items = store.inbox_list(&session).await.expect("list");
    assert_eq!(texts(&items), ["front", "a", "b", "far"]);
    assert_eq!(positions(&items), [0, 1, 2, 3]);
}

#[tokio::test]
async fn enqueue_to_an_unknown_session_is_not_found() {
    let (_dir, store, _session) = open_with_session().await;
    let err = store.inbox_enqueue("ghost", NewInboxItem::followup(json!({}))).await.expect_err("unknown");
    assert!(matches!(err, StoreError::NotFound { .. }), "{err:?}");
}

#[tokio::test]
async fn update_prompt_replaces_the_prompt() {
    let (_dir, store, session) = open_with_session().await;
    let item = enqueue(&store, &session, json!({"text": "a"}), None).await;
    let updated = store.inbox_update_prompt(&item.id, json!({"text": "b"}), None).await.expect("update");
    assert_eq!(updated.prompt, json!({"text": "b"}));
    assert_eq!(store.inbox_get(&item.id).await.expect("get"), Some(updated));
}

#[tokio::test]
async fn set_status_records_status_and_error() {
    let (_dir, store, session) = open_with_session().await;
    let item = enqueue(&store, &session, json!({"text": "a"}), None).await;
    let failed = store
        .inbox_set_status(&item.id, InboxStatus::Failed, Some("provider timed out"), None)
        .await
        .expect("set");
    assert_eq!(failed.status, InboxStatus::Failed);
    assert_eq!(failed.error.as_deref(), Some("provider timed out"));
    let retried = store.inbox_set_status(&item.id, InboxStatus::Queued, None, None).await.expect("set");
    assert_eq!(retried.error, None);
}

#[tokio::test]
async fn changing_an_unknown_item_is_not_found() {
    let (_dir, store, _session) = open_with_session().await;
    let status = store.inbox_set_status("ghost", InboxStatus::Done, None, None).await.expect_err("status");
    let prompt = store.inbox_update_prompt("ghost", json!({}), None).await.expect_err("prompt");
    let moved = store.inbox_move("ghost", 0, None).await.expect_err("move");
    for err in [status, prompt, moved] {
        assert!(matches!(err, StoreError::NotFound { .. }), "{err:?}");
    }
}

#[tokio::test]
async fn delete_closes_the_gap_and_is_idempotent() {
    let (_dir, store, session) = open_with_session().await;
    let items = enqueue_texts(&store, &session, &["a", "b", "c"]).await;
    assert!(store.inbox_delete(&items[1].id).await.expect("delete"));
    assert!(!store.inbox_delete(&items[1].id).await.expect("delete again"));
    let left = store.inbox_list(&session).await.expect("list");
    assert_eq!(texts(&left), ["a", "c"]);
    assert_eq!(positions(&left), [0, 1]);
}

#[tokio::test]
async fn move_reorders_and_renumbers_densely() {
    let (_dir, store, session) = open_with_session().await;
    let items = enqueue_texts(&store, &session, &["a", "b", "c", "d"]).await;
    let moved = store.inbox_move(&items[3].id, 1, None).await.expect("move up");
    assert_eq!(texts(&moved), ["a", "d", "b", "c"]);
    assert_eq!(positions(&moved), [0, 1, 2, 3]);
    let moved = store.inbox_move(&items[0].id, 99, None).await.expect("move to end");
    assert_eq!(texts(&moved), ["d", "b", "c", "a"]);
    assert_eq!(positions(&moved), [0, 1, 2, 3]);
    assert_eq!(store.inbox_list(&session).await.expect("list"), moved);
}

#[tokio::test]
async fn next_queued_skips_items_in_other_states() {
    let (_dir, store, session) = open_with_session().await;
    let items = enqueue_texts(&store, &session, &["a", "b", "c"]).await;
    store.inbox_set_status(&items[0].id, InboxStatus::Running, None, None).await.expect("running");
    let next = store.inbox_next_queued(&session).await.expect("next").expect("one is queued");
    assert_eq!(next.id, items[1].id);
}

#[tokio::test]
async fn next_queued_is_none_when_nothing_waits() {
    let (_dir, store, session) = open_with_session().await;
    assert_eq!(store.inbox_next_queued(&session).await.expect("empty"), None);
    let item = enqueue(&store, &session, json!({"text": "a"}), None).await;
    store.inbox_set_status(&item.id, InboxStatus::Done, None, None).await.expect("done");
    assert_eq!(store.inbox_next_queued(&session).await.expect("all done"), None);
}

#[tokio::test]
async fn queues_of_different_sessions_are_separate() {
    let (_dir, store, a) = open_with_session().await;
    let b = store.create_session(NewSession::in_dir("/w")).await.expect("create b").id;
    enqueue_texts(&store, &a, &["a1", "a2"]).await;
    let first_of_b = enqueue(&store, &b, json!({"text": "b1"}), None).await;
    assert_eq!(first_of_b.position, 0);
    assert_eq!(texts(&store.inbox_list(&b).await.expect("list b")), ["b1"]);
}

#[tokio::test]
async fn a_guarded_change_leaves_an_item_in_another_status_alone() {
    let (_dir, store, session) = open_with_session().await;
    let items = enqueue_texts(&store, &session, &["a", "b"]).await;
    store.inbox_set_status(&items[0].id, InboxStatus::Running, None, None).await.expect("running");
    let wrong = |err: StoreError| matches!(err, StoreError::WrongStatus { ref status, .. } if *status == InboxStatus::Running);
    let prompt =
        store.inbox_update_prompt(&items[0].id, json!({"text": "z"}), Some(InboxStatus::Queued)).await;
    assert!(prompt.is_err_and(wrong));
    let moved = store.inbox_move(&items[0].id, 1, Some(InboxStatus::Queued)).await;
    assert!(moved.is_err_and(wrong));
    let retried =
        store.inbox_set_status(&items[0].id, InboxStatus::Queued, None, Some(InboxStatus::Failed)).await;
    assert!(retried.is_err_and(wrong));
    let unchanged = store.inbox_get(&items[0].id).await.expect("get").expect("still there");
    assert_eq!(
        (unchanged.status, unchanged.position, &unchanged.prompt),
        (InboxStatus::Running, 0, &json!({"text": "a"}))
    );
    let updated =
        store.inbox_update_prompt(&items[1].id, json!({"text": "y"}), Some(InboxStatus::Queued)).await;
    assert_eq!(updated.expect("b is queued").prompt, json!({"text": "y"}));
}

#[tokio::test]
async fn claim_takes_the_first_queued_item_and_marks_it_running() {
    let (_dir, store, session) = open_with_session().await;
    let items = enqueue_texts(&store, &session, &["a", "b"]).await;
    store.inbox_set_status(&items[0].id, InboxStatus::Done, None, None).await.expect("done");
    let claimed = store.inbox_claim_next(&session).await.expect("claim").expect("b waits");
    assert_eq!((claimed.id.as_str(), claimed.status), (items[1].id.as_str(), InboxStatus::Running));
    assert_eq!(store.inbox_claim_next(&session).await.expect("claim again"), None, "nothing else waits");
}

#[tokio::test]
async fn a_paused_inbox_yields_nothing_to_claim_and_the_flag_is_stored() {
    let (dir, store, session) = open_with_session().await;
    enqueue_texts(&store, &session, &["a"]).await;
    store.inbox_set_paused(&session, true).await.expect("pause");
    assert_eq!(store.inbox_claim_next(&session).await.expect("claim"), None);
    drop(store);
    let store = Store::open(dir.path().join("heron.db")).await.expect("reopen");
    let state = store.inbox_state(&session).await.expect("state");
    assert!(state.paused, "the flag survives a reopen");
    assert_eq!(texts(&state.items), ["a"]);
    store.inbox_set_paused(&session, false).await.expect("resume");
    assert!(store.inbox_claim_next(&session).await.expect("claim").is_some());
}

#[tokio::test]
async fn recovery_fails_running_items_with_the_reason_and_pauses_the_inbox() {
    let (_dir, store, session) = open_with_session().await;
    let items = enqueue_texts(&store, &session, &["a", "b"]).await;
    store.inbox_claim_next(&session).await.expect("claim");
    let recovery = store.inbox_recover(&session, "interrupted").await.expect("recover");
    assert_eq!((recovery.interrupted, recovery.steers), (1, 0));
    let state = store.inbox_state(&session).await.expect("state");
    let statuses: Vec<(InboxStatus, Option<&str>)> =
        state.items.iter().map(|i| (i.status, i.error.as_deref())).collect();
    assert_eq!(statuses, [(InboxStatus::Failed, Some("interrupted")), (InboxStatus::Queued, None)]);
    assert_eq!(state.items[0].id, items[0].id);
    assert!(state.paused && state.recovered, "held back until the user looks: {state:?}");
    store.inbox_set_paused(&session, false).await.expect("resume");
    let state = store.inbox_state(&session).await.expect("state");
    assert!(!state.paused && !state.recovered, "resuming clears the mark: {state:?}");
}

#[tokio::test]
async fn recovering_an_inbox_with_nothing_left_unfinished_changes_nothing() {
    let (_dir, store, session) = open_with_session().await;
    enqueue_texts(&store, &session, &["a"]).await;
    assert!(!store.inbox_recover(&session, "interrupted").await.expect("recover").any());
    let state = store.inbox_state(&session).await.expect("state");
    assert!(!state.paused && !state.recovered, "{state:?}");
}

#[tokio::test]
async fn paused_flag_and_state_of_an_unknown_session_are_not_found() {
    let (_dir, store, _session) = open_with_session().await;
    for err in [
        store.inbox_set_paused("ghost", true).await.expect_err("pause"),
        store.inbox_state("ghost").await.expect_err("state"),
        store.inbox_claim_next("ghost").await.expect_err("claim"),
    ] {
        assert!(matches!(err, StoreError::NotFound { .. }), "{err:?}");
    }
}

#[derive(Debug, Clone)]
enum Op {
    Enqueue(Option<u32>),
    Delete(usize),
    Move(usize, u32),
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        proptest::option::of(0_u32..8).prop_map(Op::Enqueue),
        (0_usize..8).prop_map(Op::Delete),
        ((0_usize..8), (0_u32..8)).prop_map(|(i, to)| Op::Move(i, to)),
    ]
}

/// Applies `ops` to the store and to a plain `Vec` model, checking they agree after each step.
async fn check_against_model(ops: Vec<Op>) {
    let (_dir, store, session) = open_with_session().await;
    let mut model: Vec<String> = Vec::new();
    for (step, op) in ops.into_iter().enumerate() {
        match op {
            Op::Enqueue(position) => {
                let item = enqueue(&store, &session, json!({"step": step}), position).await;
                let at = position.map_or(model.len(), |p| (p as usize).min(model.len()));
                model.insert(at, item.id);
            }
            Op::Delete(index) if index < model.len() => {
                assert!(store.inbox_delete(&model.remove(index)).await.expect("delete"));
            }
            Op::Move(index, to) if index < model.len() => {
                let id = model.remove(index);
                model.insert((to as usize).min(model.len()), id.clone());
                store.inbox_move(&id, to, None).await.expect("move");
            }
            Op::Delete(_) | Op::Move(..) => {}
        }
        let items = store.inbox_list(&session).await.expect("list");
        let ids: Vec<&str> = items.iter().map(|item| item.id.as_str()).collect();
        assert_eq!(ids, model, "order after step {step}");
        assert_eq!(positions(&items), (0..model.len() as u32).collect::<Vec<_>>(), "dense after step {step}");
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]
    #[test]
    fn inbox_order_matches_a_simple_list_model(ops in proptest::collection::vec(op(), 1..24)) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        runtime.block_on(check_against_model(ops));
    }
}
