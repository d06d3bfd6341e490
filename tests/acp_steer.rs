//! `_heron/session/steer` over ACP: guidance committed to the store before its answer;
//! accepted for a running turn (recorded, echoed as a user message, seen by the model's next
//! request, replayed by `session/load` as the user's words, also after a restart); a
//! follow-up when no turn runs; held as a follow-up when a cancelled turn never applied it
//! or the process died first; and validation.

use crate::support;
use crate::support::{Editor, Process, update_kind};
use serde_json::{Value, json};

/// A first step that takes a while, then a tool call; then an answer.
const STEP_THEN_ANSWER: &str = r#"{"steps": [{"text": "Working"}, {"delay_ms": 800}, {"tool_call": {"name": "todo_write", "arguments": {"todos": [{"content": "Do it", "status": "in_progress"}]}}}]}
{"steps": [{"text": "Adjusted."}]}
{"steps": [{"text": "Third."}]}
"#;

/// A first answer that takes a while and ends the turn; then another answer.
const SLOW_ANSWER: &str = r#"{"steps": [{"text": "Working"}, {"delay_ms": 800}, {"text": " done."}]}
{"steps": [{"text": "Adjusted."}]}
{"steps": [{"text": "Third."}]}
"#;

fn start(script: &str) -> Editor {
    support::start_scripted("s", script)
}

fn text(session: &str, text: &str) -> Value {
    json!({ "sessionId": session, "prompt": [{ "type": "text", "text": text }] })
}

/// Sends a prompt and waits for its first agent message chunk: the turn is running.
async fn start_turn(editor: &mut Editor, session: &str) {
    editor.send_request(json!("p"), "session/prompt", text(session, "Go")).await;
    loop {
        if update_kind(&editor.recv().await) == Some("agent_message_chunk") {
            return;
        }
    }
}

/// Takes the answer to `id` out of `messages`.
fn answer_of(messages: &mut Vec<Value>, id: &str) -> Value {
    let at = messages
        .iter()
        .position(|m| m["id"] == id && m.get("method").is_none())
        .unwrap_or_else(|| panic!("no answer to {id}: {messages:#?}"));
    messages.remove(at)
}

/// What the updates in `messages` show, in order: `user:TEXT`, `agent:TEXT`, `tool`.
fn transcript(messages: &[Value]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for message in messages {
        let update = &message["params"]["update"];
        let line = match update_kind(message) {
            Some("user_message_chunk") => {
                format!("user:{}", update["content"]["text"].as_str().unwrap_or(""))
            }
            Some("agent_message_chunk") => {
                format!("agent:{}", update["content"]["text"].as_str().unwrap_or(""))
            }
            Some("tool_call") => "tool".to_owned(),
            _ => continue,
        };
        // Chunks of one message read as one line.
        match out.last_mut() {
            Some(last) if last.starts_with("agent:") && line.starts_with("agent:") => {
                last.push_str(&line["agent:".len()..]);
            }
            _ => out.push(line),
        }
    }
    out
}

#[tokio::test]
async fn a_steer_during_a_turn_is_delivered_and_the_model_sees_it_next() {
    let mut editor = start(STEP_THEN_ANSWER);
    let session = editor.new_session().await;
    start_turn(&mut editor, &session).await;
    editor.send_request(json!("steer"), "_heron/session/steer", text(&session, "Use tabs")).await;
    let (mut before, answer) = editor.until_answer(&json!("p")).await;
    let steered = answer_of(&mut before, "steer");
    assert_eq!(steered["result"]["disposition"], "steer_accepted", "{steered}");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(transcript(&before), ["tool", "user:Use tabs", "agent:Adjusted."]);
    // The guidance is an inbox item, applied.
    let item = json!({ "sessionId": session, "itemId": steered["result"]["itemId"] });
    let got = editor.ask(json!("get"), "_heron/inbox/get", item).await;
    let got = &got["result"]["item"];
    assert_eq!((got["intent"].as_str(), got["status"].as_str()), (Some("steer"), Some("done")), "{got}");

    // The steer is in the conversation where the model read it.
    let cwd = editor.dirs.ws();
    let params = json!({ "sessionId": session, "cwd": cwd, "mcpServers": [] });
    let (replayed, _) = editor.exchange(json!("load"), "session/load", params).await;
    assert_eq!(
        transcript(&replayed),
        ["user:Go", "agent:Working", "tool", "user:Use tabs", "agent:Adjusted."]
    );
    editor.close().await;
}

#[tokio::test]
async fn a_steer_as_the_model_finishes_still_gets_an_answer() {
    let mut editor = start(SLOW_ANSWER);
    let session = editor.new_session().await;
    start_turn(&mut editor, &session).await;
    editor.send_request(json!("steer"), "_heron/session/steer", text(&session, "Shorter")).await;
    let (mut before, answer) = editor.until_answer(&json!("p")).await;
    assert_eq!(answer_of(&mut before, "steer")["result"]["disposition"], "steer_accepted");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(transcript(&before), ["agent: done.", "user:Shorter", "agent:Adjusted."]);
    editor.close().await;
}

/// Reads messages up to the agent chunk `last`, which ends a turn of the script.
async fn until_chunk(editor: &mut Editor, last: &str) -> Vec<Value> {
    let mut seen = Vec::new();
    loop {
        let message = editor.recv().await;
        let done = update_kind(&message) == Some("agent_message_chunk")
            && message["params"]["update"]["content"]["text"] == last;
        seen.push(message);
        if done {
            return seen;
        }
    }
}

#[tokio::test]
async fn a_steer_with_no_turn_running_becomes_a_followup_that_runs() {
    let mut editor = start(SLOW_ANSWER);
    let session = editor.new_session().await;
    let (before, answer) =
        editor.exchange(json!("steer"), "_heron/session/steer", text(&session, "Be brief")).await;
    assert_eq!(answer["result"]["disposition"], "queued_followup", "{answer}");
    assert!(transcript(&before).is_empty(), "it starts only after the answer: {before:#?}");
    // It runs as a turn of its own, shown as the user's words (the editor did not send it
    // as a prompt).
    let seen = until_chunk(&mut editor, " done.").await;
    assert_eq!(transcript(&seen), ["user:Be brief", "agent:Working done."]);
    let item = json!({ "sessionId": session, "itemId": answer["result"]["itemId"] });
    let got = editor.ask(json!("get"), "_heron/inbox/get", item).await;
    assert_eq!(got["result"]["item"]["intent"], "followup", "{got}");
    editor.close().await;
}

#[tokio::test]
async fn a_steer_a_cancelled_turn_never_applied_is_held_as_a_followup() {
    let mut editor = start(SLOW_ANSWER);
    let session = editor.new_session().await;
    start_turn(&mut editor, &session).await;
    let answer = editor.ask(json!("steer"), "_heron/session/steer", text(&session, "Stop that")).await;
    assert_eq!(answer["result"]["disposition"], "steer_accepted", "{answer}");
    editor
        .send_json(
            json!({ "jsonrpc": "2.0", "method": "session/cancel", "params": { "sessionId": session } }),
        )
        .await;
    let (before, answer) = editor.until_answer(&json!("p")).await;
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    assert!(!transcript(&before).iter().any(|l| l == "user:Stop that"), "{before:#?}");
    // The stop is not followed by a new turn: the guidance waits, the inbox paused.
    let listed = editor.ask(json!("l"), "_heron/inbox/list", json!({ "sessionId": session })).await;
    let item = &listed["result"]["items"][0];
    assert_eq!(
        (item["intent"].as_str(), item["status"].as_str()),
        (Some("followup"), Some("queued")),
        "{listed}"
    );
    assert_eq!(
        (listed["result"]["paused"].as_bool(), listed["result"]["recovered"].as_bool()),
        (Some(true), Some(false))
    );
    editor.expect_silence().await;
    let (before, _) = editor.prompt(json!("p2"), &session, "Again").await;
    assert_eq!(transcript(&before), ["agent:Adjusted."], "a prompt does not take it along");
    let resume = json!({ "sessionId": session, "paused": false });
    editor.ask(json!("r"), "_heron/inbox/setPaused", resume).await;
    let seen = until_chunk(&mut editor, "Third.").await;
    assert_eq!(transcript(&seen), ["user:Stop that", "agent:Third."]);
    editor.close().await;
}

#[tokio::test]
async fn steering_input_is_checked_like_a_prompt() {
    let mut editor = start(SLOW_ANSWER);
    let session = editor.new_session().await;
    let audio = json!({ "sessionId": session, "prompt": [{ "type": "audio", "mimeType": "audio/wav", "data": "AAAA" }] });
    let answer = editor.ask(json!(1), "_heron/session/steer", audio).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert_eq!(answer["error"]["data"]["path"], "prompt[0]", "{answer}");
    let empty = json!({ "sessionId": session, "prompt": [] });
    let answer = editor.ask(json!(2), "_heron/session/steer", empty).await;
    assert_eq!(
        (answer["error"]["code"].as_i64(), answer["error"]["data"]["path"].as_str()),
        (Some(-32602), Some("prompt"))
    );
    let answer = editor.ask(json!(3), "_heron/session/steer", text("nope", "hi")).await;
    assert_eq!(
        (answer["error"]["code"].as_i64(), answer["error"]["data"]["path"].as_str()),
        (Some(-32602), Some("sessionId")),
        "{answer}"
    );
    assert_eq!(answer["error"]["data"]["sessionId"], "nope", "{answer}");
    // Nothing refused was kept.
    let listed = editor.ask(json!(4), "_heron/inbox/list", json!({ "sessionId": session })).await;
    assert_eq!(listed["result"]["items"], json!([]), "{listed}");
    editor.close().await;
}

/// A first step that takes a minute unless cancelled; then answers.
const ENDLESS_FIRST: &str = r#"{"steps": [{"text": "Working"}, {"delay_ms": 60000}, {"text": " done."}]}
{"steps": [{"text": "Applied."}]}
"#;

fn spawn(dirs: &support::Dirs) -> Process {
    support::Process::spawn(&dirs.home(), &["--model", "s/m"])
}

fn is_user_text(message: &Value, text: &str) -> bool {
    update_kind(message) == Some("user_message_chunk")
        && message["params"]["update"]["content"]["text"] == text
}

#[test]
fn a_steer_committed_before_the_agent_died_is_recovered_as_a_held_followup() {
    let dirs = support::scripted_home("s", "", ENDLESS_FIRST);
    let mut agent = spawn(&dirs);
    let session = agent.new_session(&dirs.ws());
    agent.send(
        json!({ "jsonrpc": "2.0", "id": "p", "method": "session/prompt", "params": text(&session, "Go") }),
    );
    agent.until(|m| update_kind(m) == Some("agent_message_chunk"));
    let answer = agent.request(json!("steer"), "_heron/session/steer", text(&session, "Use tabs"));
    assert_eq!(answer["result"]["disposition"], "steer_accepted", "{answer}");
    let item = answer["result"]["itemId"].clone();
    // The answer came after the commit: killing the agent now loses nothing.
    agent.child.kill().expect("SIGKILL");
    agent.child.wait().expect("reaped");

    let mut agent = spawn(&dirs);
    agent.request(json!(1), "initialize", json!({ "protocolVersion": 1 }));
    let resume = json!({ "sessionId": session, "cwd": dirs.ws(), "mcpServers": [] });
    agent.request(json!(2), "session/resume", resume);
    let listed = agent.request(json!(3), "_heron/inbox/list", json!({ "sessionId": session }));
    let result = &listed["result"];
    assert_eq!(
        (result["paused"].as_bool(), result["recovered"].as_bool()),
        (Some(true), Some(true)),
        "{listed}"
    );
    let held = &result["items"][0];
    assert_eq!(held["itemId"], item, "{listed}");
    assert_eq!(
        (held["intent"].as_str(), held["status"].as_str(), held["preview"].as_str()),
        (Some("followup"), Some("queued"), Some("Use tabs")),
        "{listed}"
    );
    agent.request(json!(4), "_heron/inbox/setPaused", json!({ "sessionId": session, "paused": false }));
    agent.until(|m| is_user_text(m, "Use tabs"));
}

#[test]
fn applied_steering_is_replayed_as_the_users_words_after_a_restart() {
    let dirs = support::scripted_home("s", "", STEP_THEN_ANSWER);
    let mut agent = spawn(&dirs);
    let session = agent.new_session(&dirs.ws());
    agent.send(
        json!({ "jsonrpc": "2.0", "id": "p", "method": "session/prompt", "params": text(&session, "Go") }),
    );
    agent.until(|m| update_kind(m) == Some("agent_message_chunk"));
    let answer = agent.request(json!("steer"), "_heron/session/steer", text(&session, "Use tabs"));
    assert_eq!(answer["result"]["disposition"], "steer_accepted", "{answer}");
    let ended = agent.until(|m| m["id"] == "p");
    assert_eq!(ended["result"]["stopReason"], "end_turn", "{ended}");
    agent.close_input();
    assert!(agent.exited_within(support::PROCESS_WAIT).is_some(), "the agent quits");

    let mut agent = spawn(&dirs);
    agent.request(json!(1), "initialize", json!({ "protocolVersion": 1 }));
    let load = json!({ "sessionId": session, "cwd": dirs.ws(), "mcpServers": [] });
    agent.send(json!({ "jsonrpc": "2.0", "id": 2, "method": "session/load", "params": load }));
    let mut replayed = Vec::new();
    loop {
        let message = agent.next();
        if message["id"] == 2 {
            break;
        }
        replayed.push(message);
    }
    assert_eq!(
        transcript(&replayed),
        ["user:Go", "agent:Working", "tool", "user:Use tabs", "agent:Adjusted."]
    );
}
