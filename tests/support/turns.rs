//! Prompt turns over the in-process editor on a scripted model `t/m`, answering the
//! agent's own requests (permission questions, file reads) the way a test says.

use std::time::Duration;

use heron::cli::acp::AcpArgs;
use serde_json::{Value, json};

use super::{Editor, update_kind};

/// A fresh agent whose model `t/m` plays `script`, with `extra_config` in `config.toml`.
pub fn start(script: &str, extra_config: &str, args: AcpArgs) -> Editor {
    super::start_in(
        AcpArgs { model: Some("t/m".into()), ..args },
        super::scripted_home("t", extra_config, script),
    )
}

/// `initialize` with `capabilities`, then `session/new` in the workspace; the session id.
pub async fn new_session(editor: &mut Editor, capabilities: Value) -> String {
    editor.new_session_with(capabilities).await
}

/// Sends a prompt and answers every request the agent makes with `respond` (which sees the
/// request and returns the reply's `result`, or `None` to leave it unanswered). Returns
/// (all messages before the answer, the answer).
pub async fn prompt_answering(
    editor: &mut Editor,
    session: &str,
    mut respond: impl FnMut(&Value) -> Option<Value>,
) -> (Vec<Value>, Value) {
    prompt_replying(editor, session, |request| respond(request).map(|result| json!({ "result": result })))
        .await
}

/// [`prompt_answering`] where `respond` gives the whole reply: `{"result": ...}` or
/// `{"error": ...}`.
pub async fn prompt_replying(
    editor: &mut Editor,
    session: &str,
    mut respond: impl FnMut(&Value) -> Option<Value>,
) -> (Vec<Value>, Value) {
    let id = json!("p");
    editor
        .send_request(
            id.clone(),
            "session/prompt",
            json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "go" }] }),
        )
        .await;
    let mut seen = Vec::new();
    loop {
        let message = editor.recv_within(Duration::from_secs(5)).await;
        if message.get("id") == Some(&id) && message.get("method").is_none() {
            return (seen, message);
        }
        if message.get("method").is_some()
            && message.get("id").is_some()
            && let Some(mut reply) = respond(&message)
        {
            reply["jsonrpc"] = json!("2.0");
            reply["id"] = message["id"].clone();
            editor.send_json(reply).await;
        }
        seen.push(message);
    }
}

/// The result of a permission answer choosing `option`.
pub fn select(option: &str) -> Value {
    json!({ "outcome": { "outcome": "selected", "optionId": option } })
}

/// The agent's requests of `method` among `messages`.
pub fn requests<'a>(messages: &'a [Value], method: &str) -> Vec<&'a Value> {
    messages.iter().filter(|m| m["method"] == method).collect()
}

/// The status the last tool call update among `messages` gave.
pub fn final_status(messages: &[Value]) -> Option<String> {
    messages
        .iter()
        .rev()
        .filter(|m| update_kind(m) == Some("tool_call_update"))
        .find_map(|m| m["params"]["update"]["status"].as_str())
        .map(str::to_owned)
}

/// The text of `name` in the editor's workspace, if it is there.
pub fn written(editor: &Editor, name: &str) -> Option<String> {
    std::fs::read_to_string(std::path::Path::new(&editor.dirs.ws()).join(name)).ok()
}
