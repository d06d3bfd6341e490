//! What a client may hold waiting in a session: prompts sent faster than turns end are
//! queued up to a byte budget (16 MiB a session, 48 MiB over all sessions), and a prompt
//! past it is refused at once with -32602 `prompt.queue_full` and the limit, so a flood
//! cannot grow the process without bound; what was queued before it still runs, and
//! cancelling gives the budget back. The durable inbox is held to bytes the same way.

use serde_json::{Value, json};

use crate::support::{self, Editor};

const MIB: usize = 1024 * 1024;

/// A model whose first turn writes a file, so the turn waits on the user's permission.
fn waiting() -> Editor {
    let write =
        json!({ "tool_call": { "name": "write_file", "arguments": { "path": "x.txt", "content": "x" } } });
    support::start_scripted("s", &format!("{}\n", json!({ "steps": [write] })))
}

fn prompt(session: &str, text: String) -> Value {
    json!({ "sessionId": session, "prompt": [{ "type": "text", "text": text }] })
}

/// Reads until `wanted` answers to the ids in `ids` came; returns them by id.
async fn answers(editor: &mut Editor, ids: &[String], wanted: usize) -> Vec<(String, Value)> {
    let mut seen = Vec::new();
    while seen.len() < wanted {
        let message = editor.recv().await;
        if let Some(id) = message["id"].as_str().filter(|id| ids.iter().any(|i| i == id))
            && message.get("method").is_none()
        {
            seen.push((id.to_owned(), message));
        }
    }
    seen
}

/// Sends a request and waits for its answer as long as storing megabytes may take on a
/// loaded machine (the editor's `ask` allows two seconds).
async fn ask_slowly(editor: &mut Editor, id: Value, method: &str, params: Value) -> Value {
    editor.send_request(id.clone(), method, params).await;
    loop {
        let message = editor.recv_within(std::time::Duration::from_secs(30)).await;
        if message["id"] == id && message.get("method").is_none() {
            return message;
        }
    }
}

#[tokio::test]
async fn prompts_past_the_sessions_byte_budget_are_refused_and_the_queue_goes_on() {
    let mut editor = waiting();
    let session = editor.new_session().await;
    editor.send_request(json!("first"), "session/prompt", prompt(&session, "write it".into())).await;
    loop {
        if editor.recv().await["method"] == "session/request_permission" {
            break;
        }
    }
    // The turn waits on the user; 20 prompts of 1 MiB arrive meanwhile.
    let ids: Vec<String> = (0..20).map(|n| format!("q{n}")).collect();
    for id in &ids {
        editor.send_request(json!(id), "session/prompt", prompt(&session, "y".repeat(MIB))).await;
    }
    // 15 fit beside the first prompt in 16 MiB; the other 5 are refused at once.
    let refused = answers(&mut editor, &ids, 5).await;
    let refused_ids: Vec<&str> = refused.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(refused_ids, ["q15", "q16", "q17", "q18", "q19"], "the last ones, in order");
    for (_, answer) in &refused {
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
        assert_eq!(answer["error"]["data"]["code"], "prompt.queue_full", "{answer}");
        assert_eq!(answer["error"]["data"]["limit"], 16 * MIB, "{answer}");
        assert_eq!(answer["error"]["data"]["scope"], "session", "{answer}");
    }
    // Cancelling ends the running turn and every queued prompt, and gives the budget back.
    editor
        .send_json(
            json!({ "jsonrpc": "2.0", "method": "session/cancel", "params": { "sessionId": session } }),
        )
        .await;
    let mut queued: Vec<String> = ids[..15].to_vec();
    queued.push("first".into());
    let ended = answers(&mut editor, &queued, queued.len()).await;
    for (id, answer) in &ended {
        assert_eq!(answer["result"]["stopReason"], "cancelled", "{id}: {answer}");
    }
    let (_, again) = editor.prompt(json!("again"), &session, &"z".repeat(MIB)).await;
    assert!(again["result"]["stopReason"].is_string(), "it ran, not refused: {again}");
}

/// The durable inbox holds prompts by bytes too: 32 MiB of stored prompts a session (and
/// 256 MiB over every session); past it an enqueue is refused with -32602
/// `inbox.bytes_full` and the limit, and deleting an item makes room again.
#[tokio::test]
async fn the_inbox_refuses_prompts_past_its_byte_budget_and_deleting_makes_room() {
    let mut editor = support::start_scripted("s", &format!("{}\n", json!({ "steps": [{ "text": "ok" }] })));
    let session = editor.new_session().await;
    let call = |method: &str, params: Value| {
        let mut params = params;
        params["sessionId"] = json!(session);
        (format!("_heron/inbox/{method}"), params)
    };
    let (method, params) = call("setPaused", json!({ "paused": true }));
    ask_slowly(&mut editor, json!("pause"), &method, params).await;
    let item = |text: String| json!({ "prompt": [{ "type": "text", "text": text }] });
    let mut kept = Vec::new();
    for n in 0..3 {
        let (method, params) = call("enqueue", item("i".repeat(10 * MIB)));
        let answer = ask_slowly(&mut editor, json!(n), &method, params).await;
        kept.push(answer["result"]["itemId"].as_str().unwrap_or_else(|| panic!("{answer}")).to_owned());
    }
    for (id, size) in [("over", 10 * MIB), ("huge", 60 * MIB)] {
        let (method, params) = call("enqueue", item("o".repeat(size)));
        let refused = ask_slowly(&mut editor, json!(id), &method, params).await;
        assert_eq!(refused["error"]["code"], -32602, "{refused}");
        assert_eq!(refused["error"]["data"]["code"], "inbox.bytes_full", "{refused}");
        assert_eq!(refused["error"]["data"]["limit"], 32 * MIB, "{refused}");
    }
    let (method, params) = call("delete", json!({ "itemId": kept[0] }));
    let deleted = ask_slowly(&mut editor, json!("del"), &method, params).await;
    assert!(deleted.get("error").is_none(), "{deleted}");
    let (method, params) = call("enqueue", item("a".repeat(10 * MIB)));
    let again = ask_slowly(&mut editor, json!("again"), &method, params).await;
    assert!(again["result"]["itemId"].is_string(), "room was made: {again}");
}

/// The process's budget, over all sessions, in a process of its own (the in-process tests
/// share one): three sessions each queue 15 MiB behind a turn waiting on the user, and a
/// fourth session's 15 MiB passes 48 MiB and is refused naming the process's scope.
#[test]
fn prompts_past_the_process_byte_budget_are_refused_whatever_the_session() {
    use crate::support::Process;
    let write =
        json!({ "tool_call": { "name": "write_file", "arguments": { "path": "x.txt", "content": "x" } } });
    let dirs = support::scripted_home("s", "", &format!("{}\n", json!({ "steps": [write] })));
    let mut heron = Process::spawn(&dirs.home(), &["--model", "s/m"]);
    heron.request(json!("init"), "initialize", json!({ "protocolVersion": 1 }));
    let mut sessions = Vec::new();
    for n in 0..4 {
        let opened = heron.request(
            json!(format!("new{n}")),
            "session/new",
            json!({ "cwd": dirs.ws(), "mcpServers": [] }),
        );
        let session = opened["result"]["sessionId"].as_str().expect("a session").to_owned();
        heron.send_prompt(json!(format!("first{n}")), &session, "write it");
        heron.until(|m| m["method"] == "session/request_permission");
        sessions.push(session);
    }
    for (n, session) in sessions.iter().enumerate() {
        heron.send(json!({ "jsonrpc": "2.0", "id": format!("big{n}"), "method": "session/prompt",
                           "params": prompt(session, "y".repeat(15 * MIB)) }));
    }
    let refused = heron.until(|m| m["id"] == "big3" && m.get("method").is_none());
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert_eq!(refused["error"]["data"]["code"], "prompt.queue_full", "{refused}");
    assert_eq!(refused["error"]["data"]["limit"], 48 * MIB, "{refused}");
    assert_eq!(refused["error"]["data"]["scope"], "process", "{refused}");
}
