//! `_heron/session/steer` over ACP: input delivered to a running turn (recorded, echoed as a
//! user message, seen by the model's next request), input queued while no turn runs (it
//! opens the next prompt), input a cancelled turn never showed, and validation.

use crate::support;
use crate::support::{Editor, update_kind};
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
    assert_eq!(answer_of(&mut before, "steer")["result"]["outcome"], "delivered");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(transcript(&before), ["tool", "user:Use tabs", "agent:Adjusted."]);

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
    assert_eq!(answer_of(&mut before, "steer")["result"]["outcome"], "delivered");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(transcript(&before), ["agent: done.", "user:Shorter", "agent:Adjusted."]);
    editor.close().await;
}

#[tokio::test]
async fn a_steer_with_no_turn_running_is_queued_and_opens_the_next_prompt() {
    let mut editor = start(SLOW_ANSWER);
    let session = editor.new_session().await;
    let answer = editor.ask(json!("steer"), "_heron/session/steer", text(&session, "Be brief")).await;
    assert_eq!(answer["result"]["outcome"], "queued", "{answer}");
    editor.expect_silence().await;
    let (before, _) = editor.prompt(json!("p"), &session, "Explain").await;
    // The steer is shown (the editor did not send it as this prompt); the prompt is not echoed.
    assert_eq!(transcript(&before), ["user:Be brief", "agent:Working done."]);
    editor.close().await;
}

#[tokio::test]
async fn a_steer_a_cancelled_turn_never_showed_opens_the_next_prompt() {
    let mut editor = start(SLOW_ANSWER);
    let session = editor.new_session().await;
    start_turn(&mut editor, &session).await;
    let answer = editor.ask(json!("steer"), "_heron/session/steer", text(&session, "Stop that")).await;
    assert_eq!(answer["result"]["outcome"], "delivered", "{answer}");
    editor
        .send_json(
            json!({ "jsonrpc": "2.0", "method": "session/cancel", "params": { "sessionId": session } }),
        )
        .await;
    let (before, answer) = editor.until_answer(&json!("p")).await;
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    assert!(!transcript(&before).iter().any(|l| l == "user:Stop that"), "{before:#?}");
    let (before, _) = editor.prompt(json!("p2"), &session, "Again").await;
    assert_eq!(transcript(&before)[..2], ["user:Stop that", "agent:Adjusted."]);
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
    assert_eq!(answer["error"]["code"], -32002, "{answer}");
    // Nothing refused was kept for later.
    let (before, _) = editor.prompt(json!("p"), &session, "Explain").await;
    assert_eq!(transcript(&before)[0], "agent:Working done.", "no refused steer opened the prompt");
    editor.close().await;
}
