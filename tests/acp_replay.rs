//! `session/load` of a history longer than one page of the store: every event replays once
//! and in order, a second load of the open session replays the same, the session then takes
//! prompts; a row that is not JSON in the middle fails the load clearly and opens nothing.

use std::sync::Arc;

use heron_core::config::Home;
use heron_core::session::event::Event;
use heron_store::{NewSession, Store};
use serde_json::{Value, json};

use crate::support::{self, Dirs, update_kind};

/// More than one page (`PageBudget::default()` reads 500 rows).
const EVENTS: usize = 1_234;

/// Stores a session in `dirs` whose log is `EVENTS` agent messages, `message 0` on; the
/// row at `corrupt_seq`, if any, holds text that is not JSON. Returns the session id.
async fn stored_session(dirs: &Arc<Dirs>, corrupt_seq: Option<u64>) -> String {
    let store = Store::open(Home::at(dirs.home()).db_path()).await.expect("open the store");
    let id = store.create_session(NewSession::in_dir(dirs.ws())).await.expect("create").id;
    for n in 0..EVENTS {
        let seq = n as u64 + 1;
        let text = if corrupt_seq == Some(seq) {
            r#"{"kind": "agent_message", "message_id": "m", "text": "cut"#.to_owned()
        } else {
            let event = Event::AgentMessage { message_id: format!("m{n}"), text: format!("message {n}") };
            serde_json::to_string(&event).expect("encode")
        };
        store
            .append_events_json(&id, vec![("agent_message".to_owned(), Arc::from(text))])
            .await
            .expect("append");
    }
    id
}

fn load(id: &str, dirs: &Dirs) -> Value {
    json!({ "sessionId": id, "cwd": dirs.ws(), "mcpServers": [] })
}

/// The texts of the agent messages among `notes`, in order.
fn message_texts(notes: &[Value]) -> Vec<String> {
    notes
        .iter()
        .filter(|note| update_kind(note) == Some("agent_message_chunk"))
        .map(|note| note["params"]["update"]["content"]["text"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn a_load_longer_than_one_page_replays_every_event_once_in_order() {
    let dirs = Dirs::new();
    let id = stored_session(&dirs, None).await;
    let mut editor = support::start_in(support::demo_args(), dirs.clone());
    editor.ask(json!("init"), "initialize", json!({ "protocolVersion": 1 })).await;
    let expected: Vec<String> = (0..EVENTS).map(|n| format!("message {n}")).collect();

    let (notes, answer) = editor.exchange(json!("load"), "session/load", load(&id, &dirs)).await;
    assert!(answer["result"]["configOptions"].is_array(), "{answer}");
    assert_eq!(message_texts(&notes), expected);

    // Loaded again while open, the replay reads the store the same way.
    let (again, answer) = editor.exchange(json!("again"), "session/load", load(&id, &dirs)).await;
    assert!(answer["result"].is_object(), "{answer}");
    assert_eq!(message_texts(&again), expected);

    let (_, answer) = editor.prompt(json!("p"), &id, "Look around").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    editor.close().await;
}

#[tokio::test]
async fn a_row_that_is_not_json_mid_history_fails_the_load_and_opens_nothing() {
    let dirs = Dirs::new();
    let id = stored_session(&dirs, Some(800)).await;
    let mut editor = support::start_in(support::demo_args(), dirs.clone());
    editor.ask(json!("init"), "initialize", json!({ "protocolVersion": 1 })).await;

    let (notes, answer) = editor.exchange(json!("load"), "session/load", load(&id, &dirs)).await;
    let error = &answer["error"];
    assert_eq!(error["code"], -32603, "{answer}");
    assert_eq!(error["data"]["code"], "store.corrupt", "{answer}");
    let reason = error["data"]["reason"].as_str().unwrap_or_else(|| panic!("a reason: {answer}"));
    assert!(reason.contains("event 800") && reason.contains("not valid JSON"), "{reason}");
    assert!(!reason.contains("cut") && reason.len() <= 512, "the reason quotes nothing stored: {reason}");
    // What came before the bad row may have been shown; nothing after it was.
    let shown = message_texts(&notes);
    assert!(shown.len() < 800, "{} messages shown", shown.len());
    assert!(shown.iter().enumerate().all(|(n, text)| *text == format!("message {n}")), "in order");

    let params = json!({ "sessionId": id, "prompt": [{ "type": "text", "text": "hi" }] });
    let (_, answer) = editor.exchange(json!("p"), "session/prompt", params).await;
    assert!(answer["error"].is_object(), "the session did not open: {answer}");
    editor.close().await;
}
