//! The inbox's enqueue and listing contract over ACP: idempotency keys (a retry returns the
//! first item, also after a restart; bounded keys), intents (`steer` during a turn is
//! accepted and applied once), listings that carry metadata and never prompt bodies, and a
//! full inbox refused with its capacity.

use crate::support;
use std::sync::Arc;

use crate::support::{Dirs, Editor, update_kind};
use serde_json::{Value, json};

/// A first answer that takes a while, then a tool call; then an answer.
const STEP_THEN_ANSWER: &str = r#"{"steps": [{"text": "Working"}, {"delay_ms": 800}, {"tool_call": {"name": "todo_write", "arguments": {"todos": [{"content": "Do it", "status": "in_progress"}]}}}]}
{"steps": [{"text": "Adjusted."}]}
"#;

fn dirs() -> Arc<Dirs> {
    support::scripted_home("s", "", STEP_THEN_ANSWER)
}

async fn open(dirs: Arc<Dirs>) -> (Editor, String) {
    let mut editor = support::start_in(support::scripted_args("s"), dirs);
    let session = editor.new_session().await;
    (editor, session)
}

fn text(t: &str) -> Value {
    json!([{ "type": "text", "text": t }])
}

/// Calls `_heron/inbox/{method}` on `session` with `params` added; returns the whole answer.
async fn inbox(editor: &mut Editor, method: &str, session: &str, params: Value) -> Value {
    let mut params = params;
    params["sessionId"] = json!(session);
    editor.ask(json!(method), &format!("_heron/inbox/{method}"), params).await
}

async fn pause(editor: &mut Editor, session: &str) {
    let answer = inbox(editor, "setPaused", session, json!({ "paused": true })).await;
    assert_eq!(answer["result"]["paused"], true, "{answer}");
}

fn invalid_at(answer: &Value, path: &str) {
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert_eq!(answer["error"]["data"]["path"], path, "{answer}");
}

#[tokio::test]
async fn a_retried_enqueue_with_its_key_returns_the_same_item_and_adds_nothing_even_after_a_restart() {
    let dirs = dirs();
    let (mut editor, session) = open(dirs.clone()).await;
    pause(&mut editor, &session).await;
    let keyed = json!({ "prompt": text("Fix the build"), "idempotencyKey": "editor-7f3a" });
    let first = inbox(&mut editor, "enqueue", &session, keyed.clone()).await;
    let result = &first["result"];
    assert_eq!(
        (result["disposition"].as_str(), result["idempotent"].as_bool(), result["paused"].as_bool()),
        (Some("queued_followup"), Some(false), Some(true)),
        "{first}"
    );
    assert_eq!((result["position"].as_u64(), result["status"].as_str()), (Some(0), Some("queued")));
    let again = inbox(&mut editor, "enqueue", &session, keyed.clone()).await;
    assert_eq!(again["result"]["itemId"], first["result"]["itemId"], "{again}");
    assert_eq!(again["result"]["idempotent"], true, "{again}");
    editor.close().await;

    let mut editor = support::start_in(support::scripted_args("s"), dirs.clone());
    editor.request(json!("init"), "initialize", json!({ "protocolVersion": 1 })).await;
    let resume = json!({ "sessionId": session, "cwd": dirs.ws(), "mcpServers": [] });
    editor.ask(json!("resume"), "session/resume", resume).await;
    let retried = inbox(&mut editor, "enqueue", &session, keyed).await;
    assert_eq!(retried["result"]["itemId"], first["result"]["itemId"], "the key is stored: {retried}");
    assert_eq!(retried["result"]["idempotent"], true, "{retried}");
    let listed = inbox(&mut editor, "list", &session, json!({})).await;
    let items = listed["result"]["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(items.len(), 1, "one item however often it was sent: {listed}");
    assert_eq!(items[0]["idempotencyKey"], "editor-7f3a", "{listed}");
    editor.close().await;
}

#[tokio::test]
async fn an_empty_or_overlong_key_or_an_unknown_intent_is_refused_naming_the_field() {
    let (mut editor, session) = open(dirs()).await;
    pause(&mut editor, &session).await;
    for key in [String::new(), "k".repeat(129)] {
        let params = json!({ "prompt": text("x"), "idempotencyKey": key });
        let answer = inbox(&mut editor, "enqueue", &session, params).await;
        invalid_at(&answer, "idempotencyKey");
    }
    let longest = json!({ "prompt": text("x"), "idempotencyKey": "k".repeat(128) });
    let answer = inbox(&mut editor, "enqueue", &session, longest).await;
    assert_eq!(answer["result"]["idempotent"], false, "128 bytes is allowed: {answer}");
    // The schema check names the field by its JSON pointer.
    let answer =
        inbox(&mut editor, "enqueue", &session, json!({ "prompt": text("x"), "intent": "urgent" })).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert_eq!(answer["error"]["data"]["pointer"], "/intent", "{answer}");
    let listed = inbox(&mut editor, "list", &session, json!({})).await;
    assert_eq!(listed["result"]["items"].as_array().map(Vec::len), Some(1), "only the valid one: {listed}");
    editor.close().await;
}

#[tokio::test]
async fn listings_carry_previews_and_sizes_and_never_prompt_bodies() {
    let (mut editor, session) = open(dirs()).await;
    pause(&mut editor, &session).await;
    let long_line = "word ".repeat(100);
    let prompt = json!([
        { "type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo=" },
        { "type": "text", "text": format!("\n  {long_line}\nsecond line") },
    ]);
    let enqueued = inbox(&mut editor, "enqueue", &session, json!({ "prompt": prompt })).await;
    let item_id = enqueued["result"]["itemId"].clone();
    inbox(&mut editor, "enqueue", &session, json!({ "prompt": text("Short") })).await;

    let listed = inbox(&mut editor, "list", &session, json!({})).await;
    let result = &listed["result"];
    assert_eq!(
        (result["capacity"].as_u64(), result["recovered"].as_bool()),
        (Some(500), Some(false)),
        "{listed}"
    );
    let first = &result["items"][0];
    assert!(first.get("prompt").is_none(), "no prompt body in a listing: {first}");
    let preview = first["preview"].as_str().unwrap_or_default();
    assert!(preview.starts_with("word word") && preview.ends_with('…') && preview.len() <= 120, "{preview}");
    // 8 bytes of PNG signature, and the text: 3 + 500 + 12 bytes.
    assert_eq!(first["promptBytes"], 8 + 3 + 500 + 12, "{first}");
    assert_eq!(first["intent"], "followup", "{first}");
    let refreshed = inbox(&mut editor, "refresh", &session, json!({})).await;
    let moved = inbox(&mut editor, "move", &session, json!({ "itemId": item_id, "position": 1 })).await;
    for listing in [&refreshed, &moved] {
        let items = listing["result"]["items"].as_array().cloned().unwrap_or_default();
        assert_eq!(items.len(), 2, "{listing}");
        assert!(items.iter().all(|i| i.get("prompt").is_none()), "{listing}");
    }
    assert_eq!(moved["result"]["items"][0]["preview"], "Short", "{moved}");

    let got = inbox(&mut editor, "get", &session, json!({ "itemId": item_id })).await;
    let item = &got["result"]["item"];
    assert_eq!(item["prompt"][1]["text"], format!("\n  {long_line}\nsecond line"), "get has it all: {got}");
    assert_eq!(item["preview"], first["preview"], "{got}");
    editor.close().await;
}

#[tokio::test]
async fn a_steer_enqueued_during_a_turn_is_accepted_once_however_often_it_is_retried() {
    let (mut editor, session) = open(dirs()).await;
    let params = json!({ "sessionId": session, "prompt": text("Go") });
    editor.send_request(json!("p"), "session/prompt", params).await;
    loop {
        if update_kind(&editor.recv().await) == Some("agent_message_chunk") {
            break;
        }
    }
    let steer = json!({ "prompt": text("Use tabs"), "intent": "steer", "idempotencyKey": "s-1" });
    let first = inbox(&mut editor, "enqueue", &session, steer.clone()).await;
    assert_eq!(first["result"]["disposition"], "steer_accepted", "{first}");
    let again = inbox(&mut editor, "enqueue", &session, steer).await;
    assert_eq!(
        (again["result"]["itemId"].clone(), again["result"]["idempotent"].as_bool()),
        (first["result"]["itemId"].clone(), Some(true))
    );
    let (before, answer) = editor.until_answer(&json!("p")).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let shown: Vec<&Value> = before
        .iter()
        .filter(|m| update_kind(m) == Some("user_message_chunk"))
        .map(|m| &m["params"]["update"]["content"]["text"])
        .collect();
    assert_eq!(shown, [&json!("Use tabs")], "applied once: {before:#?}");
    let got = inbox(&mut editor, "get", &session, json!({ "itemId": first["result"]["itemId"] })).await;
    assert_eq!(
        (got["result"]["item"]["intent"].as_str(), got["result"]["item"]["status"].as_str()),
        (Some("steer"), Some("done"))
    );
    editor.close().await;
}

#[tokio::test]
async fn a_full_inbox_with_nothing_finished_is_refused_with_its_capacity() {
    let (mut editor, session) = open(dirs()).await;
    pause(&mut editor, &session).await;
    for n in 0..500 {
        let answer =
            inbox(&mut editor, "enqueue", &session, json!({ "prompt": text(&format!("item {n}")) })).await;
        assert!(answer["result"].is_object(), "{answer}");
    }
    let refused = inbox(&mut editor, "enqueue", &session, json!({ "prompt": text("one too many") })).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert_eq!(refused["error"]["data"]["code"], "inbox.full", "{refused}");
    assert_eq!(refused["error"]["data"]["capacity"], 500, "{refused}");
    editor.close().await;
}
