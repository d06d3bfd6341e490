//! An editor that plays one turn to its answer the way the MCP tests need: it allows each
//! permission request once and answers each `elicitation/create` as the test says, and
//! keeps what the test asserts on (the elicitations, the finished call).

use std::time::Duration;

use serde_json::{Value, json};

use super::{Editor, update_kind};

/// What the editor saw during one turn.
pub struct Played {
    /// The `elicitation/create` requests' params, in order.
    pub asked: Vec<Value>,
    /// The last finished (not pending, not running) `tool_call_update`.
    pub finished: Value,
}

/// Prompts "Use the server" as `p` and plays the editor until the answer, which must end
/// the turn `end_turn`: permission is allowed once, each `elicitation/create` is answered
/// with `reply(request)`.
pub async fn play(editor: &mut Editor, session: &str, reply: impl Fn(&Value) -> Value) -> Played {
    let params = json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "Use the server" }] });
    editor.send_request(json!("p"), "session/prompt", params).await;
    let (mut asked, mut finished) = (Vec::new(), Value::Null);
    loop {
        let message = editor.recv_within(Duration::from_secs(60)).await;
        if message["id"] == "p" && message.get("method").is_none() {
            assert_eq!(message["result"]["stopReason"], "end_turn", "{message}");
            return Played { asked, finished };
        }
        let answer = match message["method"].as_str() {
            Some("session/request_permission") => {
                Some(json!({ "outcome": { "outcome": "selected", "optionId": "allow_once" } }))
            }
            Some("elicitation/create") => {
                asked.push(message["params"].clone());
                Some(reply(&message["params"]))
            }
            _ => None,
        };
        if let Some(result) = answer {
            editor.send_json(json!({ "jsonrpc": "2.0", "id": message["id"], "result": result })).await;
        }
        let update = &message["params"]["update"];
        if update_kind(&message) == Some("tool_call_update")
            && update["status"].as_str().is_some_and(|s| s != "in_progress" && s != "pending")
        {
            finished = update.clone();
        }
    }
}
