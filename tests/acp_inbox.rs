//! The durable inbox over ACP: items run in order as turns when the session is idle and
//! stream to the editor; prompts go first; pause and resume; the rules and errors of
//! update, move, delete and retry; paging; status counts; and the inbox across restarts.

use crate::support;
use std::sync::Arc;

use crate::support::{Dirs, Editor, Process, update_kind};
use heron::cli::acp::AcpArgs;
use serde_json::{Value, json};

fn dirs(script: &str) -> Arc<Dirs> {
    support::scripted_home("s", "", script)
}

fn args() -> AcpArgs {
    support::scripted_args("s")
}

/// A fresh agent playing `script`, and a session on it whose client asked for status updates.
async fn start(script: &str) -> (Editor, String) {
    let mut editor = support::start_in(args(), dirs(script));
    let session = open(&mut editor).await;
    (editor, session)
}

/// As [`start`], with each answer played in request order whatever the conversation holds
/// (a failed request leaves nothing in it to count).
async fn start_sequential(script: &str) -> (Editor, String) {
    let config = format!("{}playback = \"sequential\"\n", support::scripted_provider("s", "s.jsonl"));
    let dirs = support::dirs_with(&[("config.toml", &config), ("s.jsonl", script)]);
    let mut editor = support::start_in(args(), dirs);
    let session = open(&mut editor).await;
    (editor, session)
}

async fn open(editor: &mut Editor) -> String {
    editor.new_session_with(support::wanting_status(json!({}))).await
}

async fn initialize(editor: &mut Editor) {
    let caps = json!({ "_meta": { "heron": { "statusUpdates": true } } });
    editor
        .ask(json!("init"), "initialize", json!({ "protocolVersion": 1, "clientCapabilities": caps }))
        .await;
}

fn text(t: &str) -> Value {
    json!([{ "type": "text", "text": t }])
}

/// Calls an inbox method on `session` with `params` added; returns the whole answer.
async fn inbox(editor: &mut Editor, method: &str, session: &str, params: Value) -> Value {
    let mut params = params;
    params["sessionId"] = json!(session);
    editor.ask(json!(method), &format!("_heron/inbox/{method}"), params).await
}

async fn enqueue(editor: &mut Editor, session: &str, prompt: &str) -> String {
    let answer = inbox(editor, "enqueue", session, json!({ "prompt": text(prompt) })).await;
    answer["result"]["itemId"].as_str().unwrap_or_else(|| panic!("no item: {answer}")).to_owned()
}

async fn set_paused(editor: &mut Editor, session: &str, paused: bool) {
    let answer = inbox(editor, "setPaused", session, json!({ "paused": paused })).await;
    assert_eq!(answer["result"]["paused"], paused, "{answer}");
}

/// (prompt preview, status) of every item, in queue order.
async fn items(editor: &mut Editor, session: &str) -> Vec<(String, String)> {
    let answer = inbox(editor, "refresh", session, json!({})).await;
    answer["result"]["items"]
        .as_array()
        .unwrap_or_else(|| panic!("no items: {answer}"))
        .iter()
        .map(|item| {
            let prompt = item["preview"].as_str().unwrap_or("?").to_owned();
            (prompt, item["status"].as_str().unwrap_or("?").to_owned())
        })
        .collect()
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected.iter().map(|(a, b)| ((*a).to_owned(), (*b).to_owned())).collect()
}

/// Reads messages up to and including the first one `done` accepts.
async fn read_until(editor: &mut Editor, done: impl Fn(&Value) -> bool) -> Vec<Value> {
    let mut seen = Vec::new();
    loop {
        let message = editor.recv_within(std::time::Duration::from_secs(5)).await;
        if update_kind(&message) == Some("available_commands_update") {
            continue;
        }
        let last = done(&message);
        seen.push(message);
        if last {
            return seen;
        }
    }
}

/// The inbox counts of a status update, if `message` is one.
fn counts(message: &Value) -> Option<&Value> {
    (message["method"] == "_heron/session/status_update").then(|| &message["params"]["status"]["inbox"])
}

/// A status update of an idle session with nothing running or queued in its inbox.
fn drained(message: &Value) -> bool {
    counts(message).is_some_and(|c| c["queued"] == 0 && c["running"] == 0)
        && message["params"]["status"]["state"] == "idle"
}

/// The text of every user message among `messages`, in order.
fn user_texts(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| update_kind(m) == Some("user_message_chunk"))
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str().map(str::to_owned))
        .collect()
}

fn agent_text(messages: &[Value]) -> String {
    messages
        .iter()
        .filter(|m| update_kind(m) == Some("agent_message_chunk"))
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect()
}

fn is_chunk(message: &Value, text: &str) -> bool {
    update_kind(message) == Some("agent_message_chunk")
        && message["params"]["update"]["content"]["text"] == text
}

fn invalid_item(answer: &Value, code: &str) {
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert_eq!(answer["error"]["data"]["code"], code, "{answer}");
    assert_eq!(answer["error"]["data"]["path"], "itemId", "{answer}");
}

const TWO_ANSWERS: &str = r#"{"steps": [{"text": "First answer."}]}
{"steps": [{"text": "Second answer."}]}
{"steps": [{"text": "Third answer."}]}
"#;

/// A first answer slow enough to act during it.
const SLOW_FIRST: &str = r#"{"steps": [{"text": "Working"}, {"delay_ms": 800}, {"text": " done."}]}
{"steps": [{"text": "Second answer."}]}
{"steps": [{"text": "Third answer."}]}
"#;

/// A first answer that takes a minute unless cancelled.
const ENDLESS_FIRST: &str = r#"{"steps": [{"text": "Working"}, {"delay_ms": 60000}, {"text": " done."}]}
{"steps": [{"text": "Next."}]}
"#;

#[tokio::test]
async fn queued_items_run_in_order_when_idle_and_stream_to_the_editor() {
    let (mut editor, session) = start(TWO_ANSWERS).await;
    set_paused(&mut editor, &session, true).await;
    enqueue(&mut editor, &session, "Do A").await;
    enqueue(&mut editor, &session, "Do B").await;
    editor.expect_silence().await;
    set_paused(&mut editor, &session, false).await;
    let seen = read_until(&mut editor, drained).await;
    assert_eq!(user_texts(&seen), ["Do A", "Do B"]);
    assert_eq!(agent_text(&seen), "First answer.Second answer.");
    let states: Vec<&str> = seen.iter().filter_map(|m| m["params"]["status"]["state"].as_str()).collect();
    assert_eq!(states, ["running", "idle", "running", "idle"], "{seen:#?}");
    assert_eq!(items(&mut editor, &session).await, pairs(&[("Do A", "done"), ("Do B", "done")]));
    editor.close().await;
}

#[tokio::test]
async fn an_item_enqueued_while_idle_starts_after_its_answer() {
    let (mut editor, session) = start(TWO_ANSWERS).await;
    let (before, answer) = editor
        .exchange(json!("e"), "_heron/inbox/enqueue", json!({ "sessionId": session, "prompt": text("Go") }))
        .await;
    assert_eq!(answer["result"]["status"], "queued", "{answer}");
    assert!(user_texts(&before).is_empty(), "nothing ran before the answer: {before:#?}");
    let seen = read_until(&mut editor, drained).await;
    assert_eq!((user_texts(&seen), agent_text(&seen)), (vec!["Go".to_owned()], "First answer.".to_owned()));
    editor.close().await;
}

/// Changes an editor pipelines (sent in one burst, none waiting for the one before) are
/// applied and answered in the order they were asked for, whatever order their store
/// writes would finish in: each enqueue lands behind the one asked before it.
#[tokio::test]
async fn pipelined_changes_are_applied_and_answered_in_the_order_asked() {
    let (mut editor, session) = start(TWO_ANSWERS).await;
    set_paused(&mut editor, &session, true).await;
    const BURST: usize = 24;
    let mut burst = String::new();
    for n in 0..BURST {
        let params = json!({ "sessionId": session, "prompt": text(&format!("item {n}")) });
        let line = json!({ "jsonrpc": "2.0", "id": n, "method": "_heron/inbox/enqueue", "params": params });
        burst.push_str(&format!("{line}\n"));
    }
    editor.send(burst.trim_end()).await;
    let mut answers = Vec::new();
    while answers.len() < BURST {
        let message = editor.recv_within(std::time::Duration::from_secs(10)).await;
        if message.get("id").is_some() && message.get("method").is_none() {
            answers.push((message["id"].clone(), message["result"]["position"].clone()));
        }
    }
    let expected: Vec<(Value, Value)> = (0..BURST).map(|n| (json!(n), json!(n))).collect();
    assert_eq!(answers, expected, "(id, position) as answered");
    let queued: Vec<String> =
        items(&mut editor, &session).await.into_iter().map(|(prompt, _)| prompt).collect();
    let asked: Vec<String> = (0..BURST).map(|n| format!("item {n}")).collect();
    assert_eq!(queued, asked);
    editor.close().await;
}

#[tokio::test]
async fn an_item_with_an_image_is_echoed_with_the_image_it_carries() {
    // A whole PNG signature and header start: the bytes are checked against the type.
    let png =
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
    let (mut editor, session) = start(TWO_ANSWERS).await;
    let prompt = json!([
        { "type": "text", "text": "What is this?" },
        { "type": "image", "mimeType": "image/png", "data": png },
    ]);
    let answer = inbox(&mut editor, "enqueue", &session, json!({ "prompt": prompt })).await;
    assert_eq!(answer["result"]["status"], "queued", "{answer}");
    let seen = read_until(&mut editor, drained).await;
    let shown: Vec<&Value> = seen
        .iter()
        .filter(|m| update_kind(m) == Some("user_message_chunk"))
        .map(|m| &m["params"]["update"]["content"])
        .collect();
    assert_eq!(shown.len(), 2, "the text and the image: {seen:#?}");
    assert_eq!(shown[0]["text"], "What is this?");
    assert_eq!(shown[1]["type"], "image", "{:#}", shown[1]);
    assert_eq!(shown[1]["mimeType"], "image/png");
    assert_eq!(shown[1]["data"], png, "the image as sent, read back from where it was saved");
    editor.close().await;
}

#[tokio::test]
async fn a_prompt_during_inbox_work_runs_before_the_next_item() {
    let (mut editor, session) = start(SLOW_FIRST).await;
    set_paused(&mut editor, &session, true).await;
    enqueue(&mut editor, &session, "Item A").await;
    enqueue(&mut editor, &session, "Item B").await;
    set_paused(&mut editor, &session, false).await;
    let mut seen = read_until(&mut editor, |m| is_chunk(m, "Working")).await;
    let (during, answer) = editor.prompt(json!("p"), &session, "From the editor").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    seen.extend(during);
    seen.extend(read_until(&mut editor, drained).await);
    // Inbox items are shown as user messages; the editor's own prompt is not echoed back.
    assert_eq!(user_texts(&seen), ["Item A", "Item B"]);
    assert_eq!(agent_text(&seen), "Working done.Second answer.Third answer.");
    editor.close().await;
}

#[tokio::test]
async fn a_paused_inbox_keeps_its_items_until_resumed() {
    let (mut editor, session) = start(TWO_ANSWERS).await;
    set_paused(&mut editor, &session, true).await;
    enqueue(&mut editor, &session, "Later").await;
    editor.expect_silence().await;
    let listed = inbox(&mut editor, "list", &session, json!({})).await;
    assert_eq!(listed["result"]["paused"], true, "{listed}");
    assert_eq!(listed["result"]["items"][0]["status"], "queued", "{listed}");
    set_paused(&mut editor, &session, false).await;
    let seen = read_until(&mut editor, drained).await;
    assert_eq!(user_texts(&seen), ["Later"]);
    editor.close().await;
}

#[tokio::test]
async fn pausing_during_an_item_lets_it_finish_and_holds_the_next() {
    let (mut editor, session) = start(SLOW_FIRST).await;
    set_paused(&mut editor, &session, true).await;
    enqueue(&mut editor, &session, "A").await;
    enqueue(&mut editor, &session, "B").await;
    set_paused(&mut editor, &session, false).await;
    read_until(&mut editor, |m| is_chunk(m, "Working")).await;
    set_paused(&mut editor, &session, true).await;
    let seen = read_until(&mut editor, |m| m["params"]["status"]["state"] == "idle").await;
    assert_eq!(agent_text(&seen), " done.", "the running item finished");
    editor.expect_silence().await;
    assert_eq!(items(&mut editor, &session).await, pairs(&[("A", "done"), ("B", "queued")]));
    editor.close().await;
}

#[tokio::test]
async fn queued_items_can_be_updated_moved_and_enqueued_at_a_place() {
    let (mut editor, session) = start(TWO_ANSWERS).await;
    set_paused(&mut editor, &session, true).await;
    let a = enqueue(&mut editor, &session, "A").await;
    enqueue(&mut editor, &session, "B").await;
    let c = enqueue(&mut editor, &session, "C").await;
    let updated = inbox(&mut editor, "update", &session, json!({ "itemId": a, "prompt": text("A2") })).await;
    assert_eq!(updated["result"]["item"]["prompt"], text("A2"), "{updated}");
    let moved = inbox(&mut editor, "move", &session, json!({ "itemId": c, "position": 0 })).await;
    let order: Vec<(&str, u64)> = moved["result"]["items"]
        .as_array()
        .unwrap_or_else(|| panic!("{moved}"))
        .iter()
        .filter_map(|i| Some((i["preview"].as_str()?, i["position"].as_u64()?)))
        .collect();
    assert_eq!(order, [("C", 0), ("A2", 1), ("B", 2)]);
    let between =
        inbox(&mut editor, "enqueue", &session, json!({ "prompt": text("Z"), "position": 1 })).await;
    assert_eq!(between["result"]["position"], 1, "{between}");
    let far = inbox(&mut editor, "enqueue", &session, json!({ "prompt": text("Y"), "position": 99 })).await;
    assert_eq!(far["result"]["position"], 4, "past the end appends: {far}");
    let last = inbox(&mut editor, "move", &session, json!({ "itemId": c, "position": 99 })).await;
    assert_eq!(last["result"]["items"][4]["itemId"], c.as_str(), "past the end moves last: {last}");
    let expected = [("Z", "queued"), ("A2", "queued"), ("B", "queued"), ("Y", "queued"), ("C", "queued")];
    assert_eq!(items(&mut editor, &session).await, pairs(&expected));
    editor.close().await;
}

#[tokio::test]
async fn an_item_that_ran_can_no_longer_be_updated_or_moved() {
    let (mut editor, session) = start(TWO_ANSWERS).await;
    let item = enqueue(&mut editor, &session, "Once").await;
    read_until(&mut editor, drained).await;
    let refused =
        inbox(&mut editor, "update", &session, json!({ "itemId": item, "prompt": text("Twice") })).await;
    invalid_item(&refused, "inbox.item_not_queued");
    assert_eq!(refused["error"]["data"]["status"], "done", "{refused}");
    let refused = inbox(&mut editor, "move", &session, json!({ "itemId": item, "position": 0 })).await;
    invalid_item(&refused, "inbox.item_not_queued");
    let got = inbox(&mut editor, "get", &session, json!({ "itemId": item })).await;
    assert_eq!(got["result"]["item"]["prompt"], text("Once"), "unchanged: {got}");
    editor.close().await;
}

#[tokio::test]
async fn a_failed_item_can_be_retried_and_nothing_else_can() {
    let script = r#"{"steps": [{"text": "Starting"}, {"error": "upstream overloaded"}]}
{"steps": [{"text": "Recovered."}]}
"#;
    let (mut editor, session) = start_sequential(script).await;
    let item = enqueue(&mut editor, &session, "Try").await;
    read_until(&mut editor, |m| m["params"]["status"]["state"] == "idle").await;
    let got = inbox(&mut editor, "get", &session, json!({ "itemId": item })).await;
    assert_eq!(got["result"]["item"]["status"], "failed", "{got}");
    let error = got["result"]["item"]["error"].as_str().unwrap_or_default();
    assert!(error.contains("upstream overloaded"), "{got}");
    let status = editor.ask(json!("s"), "_heron/session/status", json!({ "sessionId": session })).await;
    assert_eq!(status["result"]["status"]["inbox"]["failed"], 1, "{status}");

    let retried = inbox(&mut editor, "retry", &session, json!({ "itemId": item })).await;
    assert_eq!(retried["result"]["item"]["status"], "queued", "{retried}");
    assert!(retried["result"]["item"].get("error").is_none(), "the error is cleared: {retried}");
    let seen = read_until(&mut editor, drained).await;
    assert_eq!(agent_text(&seen), "Recovered.");
    let refused = inbox(&mut editor, "retry", &session, json!({ "itemId": item })).await;
    invalid_item(&refused, "inbox.item_not_failed");
    assert_eq!(refused["error"]["data"]["status"], "done", "{refused}");
    editor.close().await;
}

#[tokio::test]
async fn deleting_a_running_item_cancels_its_turn_and_the_inbox_goes_on() {
    let (mut editor, session) = start(ENDLESS_FIRST).await;
    set_paused(&mut editor, &session, true).await;
    let slow = enqueue(&mut editor, &session, "Slow").await;
    enqueue(&mut editor, &session, "Next").await;
    set_paused(&mut editor, &session, false).await;
    read_until(&mut editor, |m| is_chunk(m, "Working")).await;
    let answer = inbox(&mut editor, "delete", &session, json!({ "itemId": slow })).await;
    assert!(answer["result"].is_object(), "{answer}");
    let seen = read_until(&mut editor, drained).await;
    assert_eq!(user_texts(&seen), ["Next"], "the next item ran");
    assert_eq!(items(&mut editor, &session).await, pairs(&[("Next", "done")]));
    let gone = inbox(&mut editor, "get", &session, json!({ "itemId": slow })).await;
    invalid_item(&gone, "inbox.item_not_found");
    editor.close().await;
}

#[tokio::test]
async fn session_cancel_during_an_item_cancels_it_and_pauses_the_inbox() {
    let (mut editor, session) = start(ENDLESS_FIRST).await;
    set_paused(&mut editor, &session, true).await;
    enqueue(&mut editor, &session, "Slow").await;
    enqueue(&mut editor, &session, "Next").await;
    set_paused(&mut editor, &session, false).await;
    read_until(&mut editor, |m| is_chunk(m, "Working")).await;
    editor
        .send_json(
            json!({ "jsonrpc": "2.0", "method": "session/cancel", "params": { "sessionId": session } }),
        )
        .await;
    let seen = read_until(&mut editor, |m| m["params"]["status"]["state"] == "idle").await;
    let last = counts(seen.last().unwrap_or(&Value::Null)).cloned().unwrap_or_default();
    assert_eq!(last, json!({ "queued": 1, "running": 0, "failed": 0, "paused": true }));
    editor.expect_silence().await;
    assert_eq!(items(&mut editor, &session).await, pairs(&[("Slow", "cancelled"), ("Next", "queued")]));
    editor.close().await;
}

#[tokio::test]
async fn status_counts_follow_the_inbox_and_reach_the_client_before_the_answer() {
    let (mut editor, session) = start(TWO_ANSWERS).await;
    let params = json!({ "sessionId": session, "paused": true });
    let (notes, _) = editor.call(json!(1), "_heron/inbox/setPaused", params).await;
    let paused = notes.iter().filter_map(counts).next_back().cloned();
    assert_eq!(paused, Some(json!({ "queued": 0, "running": 0, "failed": 0, "paused": true })));
    let params = json!({ "sessionId": session, "prompt": text("A") });
    let (notes, _) = editor.call(json!(2), "_heron/inbox/enqueue", params).await;
    assert_eq!(notes.iter().filter_map(counts).next_back().map(|c| c["queued"].clone()), Some(json!(1)));
    let status = editor.ask(json!(3), "_heron/session/status", json!({ "sessionId": session })).await;
    let inbox_counts = &status["result"]["status"]["inbox"];
    assert_eq!(*inbox_counts, json!({ "queued": 1, "running": 0, "failed": 0, "paused": true }), "{status}");
    editor.close().await;
}

#[tokio::test]
async fn list_pages_in_queue_order_with_an_opaque_cursor() {
    let (mut editor, session) = start(TWO_ANSWERS).await;
    set_paused(&mut editor, &session, true).await;
    for n in 0..55 {
        enqueue(&mut editor, &session, &format!("item {n}")).await;
    }
    let first = inbox(&mut editor, "list", &session, json!({})).await;
    let page = first["result"]["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(page.len(), 50, "{first}");
    let cursor = first["result"]["nextCursor"].as_str().unwrap_or_else(|| panic!("{first}")).to_owned();
    let second = inbox(&mut editor, "list", &session, json!({ "cursor": cursor })).await;
    let rest = second["result"]["items"].as_array().cloned().unwrap_or_default();
    assert!(second["result"].get("nextCursor").is_none_or(Value::is_null), "last page: {second}");
    let positions: Vec<u64> = page.iter().chain(&rest).filter_map(|i| i["position"].as_u64()).collect();
    assert_eq!(positions, (0..55).collect::<Vec<u64>>());
    assert_eq!(rest[4]["preview"], "item 54");
    assert_eq!(items(&mut editor, &session).await.len(), 55, "refresh is not paginated");

    let bad = inbox(&mut editor, "list", &session, json!({ "cursor": "not-a-cursor" })).await;
    assert_eq!(
        (bad["error"]["code"].as_i64(), bad["error"]["data"]["path"].as_str()),
        (Some(-32602), Some("cursor"))
    );
    let cwd = editor.dirs.ws();
    let other = editor.open_session(json!("new2"), &cwd).await;
    let other = other["result"]["sessionId"].as_str().unwrap_or_default().to_owned();
    let foreign = inbox(&mut editor, "list", &other, json!({ "cursor": cursor })).await;
    assert_eq!(foreign["error"]["data"]["path"], "cursor", "another session's cursor: {foreign}");
    editor.close().await;
}

#[tokio::test]
async fn unknown_sessions_items_and_bad_prompts_are_refused() {
    let (mut editor, session) = start(TWO_ANSWERS).await;
    let ghost = json!({ "itemId": "ghost", "prompt": text("x"), "position": 0, "paused": true });
    for method in ["enqueue", "list", "get", "update", "delete", "move", "setPaused", "retry", "refresh"] {
        let answer = inbox(&mut editor, method, "nope", ghost.clone()).await;
        assert_eq!(answer["error"]["code"], -32002, "{method}: {answer}");
        assert_eq!(answer["error"]["data"]["sessionId"], "nope", "{method}: {answer}");
    }
    for method in ["get", "update", "delete", "move", "retry"] {
        let answer = inbox(&mut editor, method, &session, ghost.clone()).await;
        invalid_item(&answer, "inbox.item_not_found");
    }
    let audio = json!([{ "type": "audio", "mimeType": "audio/wav", "data": "AAAA" }]);
    let answer = inbox(&mut editor, "enqueue", &session, json!({ "prompt": audio })).await;
    assert_eq!(
        (answer["error"]["code"].as_i64(), answer["error"]["data"]["path"].as_str()),
        (Some(-32602), Some("prompt[0]"))
    );
    let answer = inbox(&mut editor, "enqueue", &session, json!({ "prompt": [] })).await;
    assert_eq!(
        (answer["error"]["code"].as_i64(), answer["error"]["data"]["path"].as_str()),
        (Some(-32602), Some("prompt"))
    );
    assert!(items(&mut editor, &session).await.is_empty(), "nothing refused was kept");
    editor.close().await;
}

#[tokio::test]
async fn items_and_the_pause_survive_a_restart() {
    let dirs = dirs(TWO_ANSWERS);
    let mut editor = support::start_in(args(), dirs.clone());
    let session = open(&mut editor).await;
    set_paused(&mut editor, &session, true).await;
    enqueue(&mut editor, &session, "Kept").await;
    editor.close().await;

    let mut editor = support::start_in(args(), dirs);
    initialize(&mut editor).await;
    let cwd = editor.dirs.ws();
    let params = json!({ "sessionId": session, "cwd": cwd, "mcpServers": [] });
    editor.ask(json!("resume"), "session/resume", params).await;
    assert_eq!(items(&mut editor, &session).await, pairs(&[("Kept", "queued")]));
    let status = editor.ask(json!("s"), "_heron/session/status", json!({ "sessionId": session })).await;
    assert_eq!(status["result"]["status"]["inbox"]["paused"], true, "{status}");
    editor.expect_silence().await;
    set_paused(&mut editor, &session, false).await;
    let seen = read_until(&mut editor, drained).await;
    assert_eq!(user_texts(&seen), ["Kept"]);
    editor.close().await;
}

#[tokio::test]
async fn on_reopening_an_interrupted_item_is_failed_and_the_queue_runs_on() {
    let dirs = dirs(ENDLESS_FIRST);
    let mut editor = support::start_in(args(), dirs.clone());
    let session = open(&mut editor).await;
    set_paused(&mut editor, &session, true).await;
    enqueue(&mut editor, &session, "Slow").await;
    enqueue(&mut editor, &session, "Next").await;
    set_paused(&mut editor, &session, false).await;
    read_until(&mut editor, |m| is_chunk(m, "Working")).await;
    // The editor quits mid-item.
    editor.close().await;

    let mut editor = support::start_in(args(), dirs);
    initialize(&mut editor).await;
    let cwd = editor.dirs.ws();
    let params = json!({ "sessionId": session, "cwd": cwd, "mcpServers": [] });
    editor.ask(json!("resume"), "session/resume", params).await;
    // Whether the quitting process recorded the interruption itself or the reopening one
    // finds the item still running depends on how far shutdown got; found on reopening, it
    // is recovered, and the inbox waits paused for the user to look first.
    let params = json!({ "sessionId": session });
    let (mut seen, listed) = editor.exchange(json!("list"), "_heron/inbox/list", params).await;
    if listed["result"]["paused"] == true {
        assert_eq!(listed["result"]["recovered"], true, "paused only by recovery: {listed}");
        set_paused(&mut editor, &session, false).await;
    }
    if !seen.iter().any(drained) {
        seen.extend(read_until(&mut editor, drained).await);
    }
    assert_eq!(user_texts(&seen), ["Next"], "the queued item runs once the inbox runs");
    let answer = inbox(&mut editor, "refresh", &session, json!({})).await;
    let slow = &answer["result"]["items"][0];
    assert_eq!(slow["status"], "failed", "{answer}");
    assert!(slow["error"].as_str().is_some_and(|e| e.starts_with("interrupted")), "{answer}");
    editor.close().await;
}

/// The real `heron acp` on `home`, the way an editor starts it.
fn spawn(home: &std::path::Path) -> Process {
    Process::spawn(home, &["--model", "s/m"])
}

#[test]
fn an_item_running_when_the_agent_is_killed_is_failed_and_its_inbox_opens_paused() {
    let dirs = dirs(ENDLESS_FIRST);
    let mut agent = spawn(&dirs.home());
    agent.request(json!(1), "initialize", json!({ "protocolVersion": 1 }));
    let opened = agent.request(json!(2), "session/new", json!({ "cwd": dirs.ws(), "mcpServers": [] }));
    let session = opened["result"]["sessionId"].as_str().expect("session").to_owned();
    // Paused while both are queued, so the slow one starts only once both are in.
    agent.request(json!(3), "_heron/inbox/setPaused", json!({ "sessionId": session, "paused": true }));
    let slow = agent.request(
        json!(4),
        "_heron/inbox/enqueue",
        json!({ "sessionId": session, "prompt": text("Slow") }),
    );
    let slow = slow["result"]["itemId"].as_str().expect("item").to_owned();
    agent.request(json!(5), "_heron/inbox/enqueue", json!({ "sessionId": session, "prompt": text("Next") }));
    agent.request(json!(6), "_heron/inbox/setPaused", json!({ "sessionId": session, "paused": false }));
    agent.until(|m| is_chunk(m, "Working"));
    agent.child.kill().expect("SIGKILL");
    agent.child.wait().expect("reaped");

    let mut agent = spawn(&dirs.home());
    agent.request(json!(1), "initialize", json!({ "protocolVersion": 1 }));
    agent.request(
        json!(2),
        "session/resume",
        json!({ "sessionId": session, "cwd": dirs.ws(), "mcpServers": [] }),
    );
    let got = agent.request(json!(3), "_heron/inbox/get", json!({ "sessionId": session, "itemId": slow }));
    let item = &got["result"]["item"];
    assert_eq!(item["status"], "failed", "{got}");
    assert_eq!(item["error"], "interrupted: Heron stopped while this item ran", "{got}");
    // Recovered: nothing starts until the user has looked and resumed.
    let listed = agent.request(json!(4), "_heron/inbox/list", json!({ "sessionId": session }));
    assert_eq!(
        (listed["result"]["paused"].as_bool(), listed["result"]["recovered"].as_bool()),
        (Some(true), Some(true)),
        "{listed}"
    );
    assert_eq!(listed["result"]["items"][1]["status"], "queued", "{listed}");
    let resumed =
        agent.request(json!(5), "_heron/inbox/setPaused", json!({ "sessionId": session, "paused": false }));
    assert_eq!(resumed["result"]["paused"], false, "{resumed}");
    let next = agent.until(|m| update_kind(m) == Some("user_message_chunk"));
    assert_eq!(next["params"]["update"]["content"]["text"], "Next", "the queue runs on once resumed: {next}");
    let listed = agent.request(json!(6), "_heron/inbox/list", json!({ "sessionId": session }));
    assert_eq!(listed["result"]["recovered"], false, "resuming clears the mark: {listed}");
}
