//! Slash commands over ACP v2: Heron's own commands advertised and run as a turn the v2
//! way, one asked for mid-turn shown as its own turn after that turn, and custom commands
//! and `/compact` queued as turns under the prompt's message id.

use std::path::Path;
use std::time::Duration;

use heron::acp::negotiate::Protocol;
use serde_json::{Value, json};

use crate::acp_v2::{LONG, WRITE, position, state, until_idle, v2_args, v2_session};
use crate::support;

#[tokio::test]
async fn heron_s_own_commands_are_advertised_and_run_here_as_a_turn_the_v2_way() {
    let mut editor = support::start_in(v2_args("s", Protocol::V2), support::scripted_home("s", "", WRITE));
    let session = v2_session(&mut editor).await;
    let advertised = editor.recv_within(Duration::from_secs(10)).await;
    let commands = &advertised["params"]["update"];
    assert_eq!(commands["sessionUpdate"], "available_commands_update", "{advertised}");
    let names: Vec<&str> = commands["availableCommands"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert!(names.contains(&"mode") && names.contains(&"help"), "{names:?}");

    let prompt = json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "/mode plan" }] });
    editor.send_request(json!(2), "session/prompt", prompt).await;
    let seen = until_idle(&mut editor, None).await;
    let answer = &seen[position(&seen, |m| m["id"] == 2)];
    let message_id = &answer["result"]["messageId"];
    let user = position(&seen, |m| m["params"]["update"]["sessionUpdate"] == "user_message");
    assert_eq!(&seen[user]["params"]["update"]["messageId"], message_id);
    assert_eq!(seen[user]["params"]["update"]["content"][0]["text"], "/mode plan");
    assert!(position(&seen, |m| state(m) == Some("running")) < user);
    let reply = position(&seen, |m| m["params"]["update"]["sessionUpdate"] == "agent_message");
    assert!(reply > user);
    let options = position(&seen, |m| m["params"]["update"]["sessionUpdate"] == "config_option_update");
    let mode = seen[options]["params"]["update"]["configOptions"]
        .as_array()
        .and_then(|o| o.iter().find(|o| o["configId"] == "mode"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(mode["currentValue"], "plan", "{mode}");
    assert_eq!(seen.last().expect("idle")["params"]["update"]["stopReason"], "end_turn");
    editor.close().await;
}

/// A command asked for while a turn runs is a turn of its own after that turn's `idle`,
/// never a `running`/`idle` pair or a message inside it.
#[tokio::test]
async fn a_command_asked_for_mid_turn_is_shown_as_its_own_turn_after_it() {
    let mut editor = support::start_in(v2_args("s", Protocol::V2), support::scripted_home("s", "", LONG));
    let session = v2_session(&mut editor).await;
    let prompt = json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "Work" }] });
    editor.send_request(json!(2), "session/prompt", prompt).await;
    let mut seen = Vec::new();
    while !seen.iter().any(|m: &Value| m["params"]["update"].to_string().contains("Working")) {
        seen.push(editor.recv_within(Duration::from_secs(20)).await);
    }
    let status = json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "/status" }] });
    let (before, answer) = editor.exchange(json!(3), "session/prompt", status).await;
    assert!(answer["result"]["messageId"].is_string(), "{answer}");
    seen.extend(before);
    let cancel = json!({ "jsonrpc": "2.0", "method": "session/cancel", "params": { "sessionId": session } });
    editor.send_json(cancel).await;
    seen.extend(until_idle(&mut editor, None).await);
    seen.extend(until_idle(&mut editor, None).await);
    let shown: Vec<String> = seen
        .iter()
        .filter_map(|m| {
            let update = &m["params"]["update"];
            match update["sessionUpdate"].as_str()? {
                "state_update" => Some(format!("{} {}", update["state"], update["stopReason"])),
                "user_message" => Some(format!("user {}", update["content"][0]["text"])),
                _ => None,
            }
        })
        .collect();
    assert_eq!(
        shown,
        [
            "\"running\" null",
            "user \"Work\"",
            "\"idle\" \"cancelled\"",
            "\"running\" null",
            "user \"/status\"",
            "\"idle\" \"end_turn\""
        ],
        "{seen:#?}"
    );
    editor.close().await;
}

#[tokio::test]
async fn custom_commands_and_compact_queue_as_turns_shown_under_the_prompts_id() {
    let script = r#"{"steps":[{"text":"Looks fine."}]}
{"steps":[{"text":"A summary."}]}
"#;
    let mut editor = support::start_in(v2_args("s", Protocol::V2), support::scripted_home("s", "", script));
    let commands = Path::new(&editor.dirs.ws()).join(".heron/commands");
    std::fs::create_dir_all(&commands).expect("commands dir");
    let review = "---\ndescription: Review files\nargument-hint: <files>\n---\nReview $ARGUMENTS for bugs.\n";
    std::fs::write(commands.join("review.md"), review).expect("command file");
    let session = v2_session(&mut editor).await;
    for (id, line) in [(2, "/review src"), (3, "/compact")] {
        let prompt = json!({ "sessionId": session, "prompt": [{ "type": "text", "text": line }] });
        let answer = editor.ask(json!(id), "session/prompt", prompt).await;
        let message_id = answer["result"]["messageId"].clone();
        assert!(message_id.is_string(), "{answer}");
        let seen = until_idle(&mut editor, None).await;
        let user = position(&seen, |m| m["params"]["update"]["sessionUpdate"] == "user_message");
        assert_eq!(seen[user]["params"]["update"]["messageId"], message_id, "{line}: {}", seen[user]);
        assert_eq!(seen[user]["params"]["update"]["content"][0]["text"], line, "shown as typed");
        assert!(position(&seen, |m| state(m) == Some("running")) < user, "{line}");
        assert_eq!(seen.last().expect("idle")["params"]["update"]["stopReason"], "end_turn", "{line}");
    }
    editor.close().await;
}
