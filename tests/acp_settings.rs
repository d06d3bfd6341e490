//! Session settings over ACP, end to end: `session/set_config_option`, the legacy
//! `session/set_mode` and `session/set_model`, the `--permission-mode` ceiling, and
//! settings kept across a restart.

use crate::support;
use std::sync::Arc;

use crate::support::{Dirs, Editor, update_kind};
use heron::cli::acp::AcpArgs;
use serde_json::{Value, json};

/// Two scripted models: `a/m` answers "one"; `b/m` plays "forgot" as a first answer and
/// "remembered" as a second, so it shows whether the conversation so far came along.
fn two_models() -> Arc<Dirs> {
    let config = support::scripted_provider("a", "a.jsonl") + &support::scripted_provider("b", "b.jsonl");
    support::dirs_with(&[
        ("config.toml", &config),
        ("a.jsonl", "{\"steps\": [{\"text\": \"one\"}]}\n"),
        ("b.jsonl", "{\"steps\": [{\"text\": \"forgot\"}]}\n{\"steps\": [{\"text\": \"remembered\"}]}\n"),
    ])
}

fn model_a() -> AcpArgs {
    AcpArgs { model: Some("a/m".into()), ..support::demo_args() }
}

fn set_option(session: &str, option: &str, value: &str) -> Value {
    json!({ "sessionId": session, "configId": option, "value": value })
}

/// The current value of every option, as `id=value` in list order.
fn current(options: &Value) -> Vec<String> {
    options
        .as_array()
        .unwrap_or_else(|| panic!("not a configOptions list: {options}"))
        .iter()
        .map(|o| format!("{}={}", o["id"].as_str().unwrap_or("?"), o["currentValue"].as_str().unwrap_or("?")))
        .collect()
}

/// The value ids `option` offers.
fn offered(options: &Value, option: &str) -> Vec<String> {
    let option = options
        .as_array()
        .and_then(|all| all.iter().find(|o| o["id"] == option))
        .unwrap_or_else(|| panic!("no {option} in {options}"));
    option["options"]
        .as_array()
        .expect("flat options")
        .iter()
        .map(|v| v["value"].as_str().unwrap().to_owned())
        .collect()
}

/// `session/load` of `session` in the workspace: (replayed updates, answer).
async fn load(editor: &mut Editor, session: &str) -> (Vec<Value>, Value) {
    let cwd = editor.dirs.ws();
    editor
        .exchange(
            json!("load"),
            "session/load",
            json!({ "sessionId": session, "cwd": cwd, "mcpServers": [] }),
        )
        .await
}

#[tokio::test]
async fn an_unknown_config_option_is_invalid_params() {
    let mut editor = support::start();
    let session = editor.new_session().await;
    let answer =
        editor.ask(json!(1), "session/set_config_option", set_option(&session, "colour", "blue")).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert_eq!(answer["error"]["data"]["path"], "configId", "{answer}");
    editor.close().await;
}

#[tokio::test]
async fn an_unknown_config_value_is_invalid_params_and_changes_nothing() {
    let mut editor = support::start();
    let session = editor.new_session().await;
    let answer = editor
        .ask(json!(1), "session/set_config_option", set_option(&session, "agent_preset", "turbo"))
        .await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert_eq!(answer["error"]["data"]["path"], "value", "{answer}");
    let (_, loaded) = load(&mut editor, &session).await;
    assert!(current(&loaded["result"]["configOptions"]).contains(&"agent_preset=balanced".to_owned()));
    editor.close().await;
}

#[tokio::test]
async fn changing_the_model_keeps_history_and_the_other_settings_and_answers_every_option() {
    let mut editor = support::start_in(model_a(), two_models());
    let session = editor.new_session().await;
    let (_, answer) = editor.prompt(json!("p1"), &session, "first").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    for (n, (option, value)) in
        [("agent_preset", "delivery"), ("tool_approval", "auto")].into_iter().enumerate()
    {
        let answer =
            editor.ask(json!(n), "session/set_config_option", set_option(&session, option, value)).await;
        assert!(answer["result"]["configOptions"].is_array(), "{answer}");
    }
    let (notes, answer) = editor
        .exchange(json!("model"), "session/set_config_option", set_option(&session, "model", "b/m"))
        .await;
    assert!(notes.is_empty(), "the answer carries the options: {notes:#?}");
    assert_eq!(
        current(&answer["result"]["configOptions"]),
        ["mode=normal", "model=b/m", "effort=auto", "agent_preset=delivery", "tool_approval=auto"]
    );
    assert!(offered(&answer["result"]["configOptions"], "model").contains(&"a/m".to_owned()), "{answer}");
    // The new model sees the conversation so far: it plays its second answer.
    let (before, answer) = editor.prompt(json!("p2"), &session, "second").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let text: String = before
        .iter()
        .filter(|m| update_kind(m) == Some("agent_message_chunk"))
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert_eq!(text, "remembered");
    editor.close().await;
}

#[tokio::test]
async fn the_legacy_work_mode_economy_is_the_light_preset() {
    let mut editor = support::start();
    let session = editor.new_session().await;
    let answer =
        editor.ask(json!(1), "session/set_config_option", set_option(&session, "work_mode", "economy")).await;
    assert!(
        current(&answer["result"]["configOptions"]).contains(&"agent_preset=light".to_owned()),
        "{answer}"
    );
    editor.close().await;
}

#[tokio::test]
async fn set_mode_plan_announces_the_current_mode() {
    let mut editor = support::start();
    let session = editor.new_session().await;
    let (notes, answer) = editor
        .exchange(json!(1), "session/set_mode", json!({ "sessionId": session, "modeId": "plan" }))
        .await;
    assert_eq!(answer["result"], json!({}), "{answer}");
    let mode_updates: Vec<&Value> = notes
        .iter()
        .filter(|m| update_kind(m) == Some("current_mode_update"))
        .map(|m| &m["params"])
        .collect();
    assert_eq!(
        mode_updates,
        [
            &json!({ "sessionId": session, "update": { "sessionUpdate": "current_mode_update", "currentModeId": "plan" } })
        ]
    );
    let options =
        notes.iter().find(|m| update_kind(m) == Some("config_option_update")).expect("config update");
    assert!(current(&options["params"]["update"]["configOptions"]).contains(&"mode=plan".to_owned()));
    editor.close().await;
}

#[tokio::test]
async fn set_mode_to_the_current_mode_succeeds() {
    let mut editor = support::start();
    let session = editor.new_session().await;
    let (_, answer) = editor
        .exchange(json!(1), "session/set_mode", json!({ "sessionId": session, "modeId": "normal" }))
        .await;
    assert_eq!(answer["result"], json!({}), "{answer}");
    editor.close().await;
}

#[tokio::test]
async fn set_mode_config_option_plan_announces_the_current_mode() {
    let mut editor = support::start();
    let session = editor.new_session().await;
    let (notes, answer) =
        editor.exchange(json!(1), "session/set_config_option", set_option(&session, "mode", "plan")).await;
    assert!(current(&answer["result"]["configOptions"]).contains(&"mode=plan".to_owned()), "{answer}");
    let modes: Vec<&Value> = notes
        .iter()
        .filter(|m| update_kind(m) == Some("current_mode_update"))
        .map(|m| &m["params"]["update"]["currentModeId"])
        .collect();
    assert_eq!(modes, [&json!("plan")]);
    editor.close().await;
}

#[tokio::test]
async fn the_legacy_mode_auto_means_tool_approval_yolo() {
    let mut editor = support::start();
    let session = editor.new_session().await;
    let (notes, answer) = editor
        .exchange(json!(1), "session/set_mode", json!({ "sessionId": session, "modeId": "auto" }))
        .await;
    assert_eq!(answer["result"], json!({}), "{answer}");
    let options =
        notes.iter().rfind(|m| update_kind(m) == Some("config_option_update")).expect("config update");
    let values = current(&options["params"]["update"]["configOptions"]);
    assert!(
        values.contains(&"tool_approval=yolo".to_owned()) && values.contains(&"mode=normal".to_owned()),
        "{values:?}"
    );
    editor.close().await;
}

#[tokio::test]
async fn set_mode_with_an_unknown_mode_is_invalid_params_naming_mode_id() {
    let mut editor = support::start();
    let session = editor.new_session().await;
    let (_, answer) = editor
        .exchange(json!(1), "session/set_mode", json!({ "sessionId": session, "modeId": "warp" }))
        .await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert_eq!(answer["error"]["data"]["path"], "modeId", "{answer}");
    editor.close().await;
}

#[tokio::test]
async fn set_model_with_an_unknown_model_is_invalid_params_naming_model_id() {
    let mut editor = support::start();
    let session = editor.new_session().await;
    let (_, answer) = editor
        .exchange(json!(1), "session/set_model", json!({ "sessionId": session, "modelId": "nope/m" }))
        .await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert_eq!(answer["error"]["data"]["path"], "modelId", "{answer}");
    editor.close().await;
}

#[tokio::test]
async fn under_permission_mode_auto_yolo_is_neither_offered_nor_accepted() {
    let mut editor =
        support::start_with(AcpArgs { permission_mode: Some("auto".into()), ..support::demo_args() });
    editor.ask(json!("init"), "initialize", json!({ "protocolVersion": 1 })).await;
    let cwd = editor.dirs.ws();
    let created = editor.open_session(json!("new"), &cwd).await;
    let options = &created["result"]["configOptions"];
    assert!(current(options).contains(&"tool_approval=auto".to_owned()), "{created}");
    assert_eq!(offered(options, "tool_approval"), ["readOnly", "dontAsk", "ask", "auto"]);
    let session = created["result"]["sessionId"].as_str().expect("sessionId");
    let answer =
        editor.ask(json!(1), "session/set_config_option", set_option(session, "tool_approval", "yolo")).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert_eq!(answer["error"]["data"]["code"], "acp.tool_approval.above_ceiling", "{answer}");
    assert_eq!(answer["error"]["data"]["ceiling"], "auto", "{answer}");
    editor.close().await;
}

#[tokio::test]
async fn the_legacy_set_model_changes_the_model() {
    let mut editor = support::start_in(model_a(), two_models());
    let session = editor.new_session().await;
    let (notes, answer) = editor
        .exchange(json!(1), "session/set_model", json!({ "sessionId": session, "modelId": "b/m" }))
        .await;
    assert_eq!(answer["result"], json!({}), "{answer}");
    let options =
        notes.iter().rfind(|m| update_kind(m) == Some("config_option_update")).expect("config update");
    assert!(current(&options["params"]["update"]["configOptions"]).contains(&"model=b/m".to_owned()));
    let (_, loaded) = load(&mut editor, &session).await;
    assert!(current(&loaded["result"]["configOptions"]).contains(&"model=b/m".to_owned()), "{loaded}");
    editor.close().await;
}

#[tokio::test]
async fn settings_survive_a_restart() {
    let mut first = support::start_in(model_a(), two_models());
    let session = first.new_session().await;
    let changes =
        [("mode", "plan"), ("model", "b/m"), ("agent_preset", "delivery"), ("tool_approval", "readOnly")];
    for (n, (option, value)) in changes.into_iter().enumerate() {
        let (_, answer) =
            first.exchange(json!(n), "session/set_config_option", set_option(&session, option, value)).await;
        assert!(answer["result"].is_object(), "{answer}");
    }
    let dirs = first.dirs.clone();
    first.close().await;

    let mut second = support::start_in(model_a(), dirs);
    second.ask(json!("init"), "initialize", json!({ "protocolVersion": 1 })).await;
    let (_, loaded) = load(&mut second, &session).await;
    assert_eq!(
        current(&loaded["result"]["configOptions"]),
        ["mode=plan", "model=b/m", "effort=auto", "agent_preset=delivery", "tool_approval=readOnly"]
    );
    assert_eq!(loaded["result"]["modes"]["currentModeId"], "plan", "{loaded}");
    second.close().await;
}

/// A session saved at yolo by an agent without a ceiling; returns (its id, the dirs).
async fn saved_at_yolo() -> (String, Arc<Dirs>) {
    let mut first = support::start();
    let session = first.new_session().await;
    let answer =
        first.ask(json!(1), "session/set_config_option", set_option(&session, "tool_approval", "yolo")).await;
    assert!(
        current(&answer["result"]["configOptions"]).contains(&"tool_approval=yolo".to_owned()),
        "{answer}"
    );
    let dirs = first.dirs.clone();
    first.close().await;
    (session, dirs)
}

fn ask_ceiling() -> AcpArgs {
    AcpArgs { permission_mode: Some("ask".into()), ..support::demo_args() }
}

#[tokio::test]
async fn a_session_saved_at_yolo_reopens_at_the_ask_ceiling() {
    let (session, dirs) = saved_at_yolo().await;
    let mut second = support::start_in(ask_ceiling(), dirs);
    second.ask(json!("init"), "initialize", json!({ "protocolVersion": 1 })).await;
    let (_, loaded) = load(&mut second, &session).await;
    let options = &loaded["result"]["configOptions"];
    assert!(current(options).contains(&"tool_approval=ask".to_owned()), "{loaded}");
    assert_eq!(offered(options, "tool_approval"), ["readOnly", "dontAsk", "ask"]);
    second.close().await;
}

#[tokio::test]
async fn a_fork_of_a_session_saved_at_yolo_opens_at_the_ask_ceiling() {
    let (session, dirs) = saved_at_yolo().await;
    let mut second = support::start_in(ask_ceiling(), dirs);
    second.ask(json!("init"), "initialize", json!({ "protocolVersion": 1 })).await;
    let cwd = second.dirs.ws();
    let forked = second.ask(json!("f"), "session/fork", json!({ "sessionId": session, "cwd": cwd })).await;
    assert!(
        current(&forked["result"]["configOptions"]).contains(&"tool_approval=ask".to_owned()),
        "{forked}"
    );
    second.close().await;
}

/// The settings a turn started with hold until it ends: a model chosen while it waits on
/// the user is the next turn's (the invariant in `docs/architecture.md`: settings change at
/// once, outside the actor, and a turn reads them only when it starts).
#[tokio::test]
async fn a_model_chosen_during_a_turn_is_the_next_turns() {
    let write =
        json!({ "tool_call": { "name": "write_file", "arguments": { "path": "x.txt", "content": "x" } } });
    let config = support::scripted_provider("a", "a.jsonl") + &support::scripted_provider("b", "b.jsonl");
    let a = format!("{}\n{}\n", json!({ "steps": [write] }), json!({ "steps": [{ "text": "a finished" }] }));
    let b = ["b0", "b1", "b2"].map(|t| json!({ "steps": [{ "text": t }] }).to_string()).join("\n") + "\n";
    let dirs = support::dirs_with(&[("config.toml", &config), ("a.jsonl", &a), ("b.jsonl", &b)]);
    let mut editor = support::start_in(model_a(), dirs);
    let session = editor.new_session().await;
    let prompt = json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "write" }] });
    editor.send_request(json!("p1"), "session/prompt", prompt).await;
    let asked = loop {
        let message = editor.recv().await;
        if message["method"] == "session/request_permission" {
            break message;
        }
    };
    editor.send_request(json!("m"), "session/set_config_option", set_option(&session, "model", "b/m")).await;
    let mut text = String::new();
    let mut allowed = false;
    loop {
        let message = editor.recv().await;
        if message["id"] == "m" && message.get("method").is_none() {
            assert!(
                current(&message["result"]["configOptions"]).contains(&"model=b/m".to_owned()),
                "{message}"
            );
            let allow = json!({ "outcome": { "outcome": "selected", "optionId": "allow_once" } });
            editor.send_json(json!({ "jsonrpc": "2.0", "id": asked["id"], "result": allow })).await;
            allowed = true;
        }
        if update_kind(&message) == Some("agent_message_chunk") {
            text.push_str(message["params"]["update"]["content"]["text"].as_str().unwrap_or_default());
        }
        if message["id"] == "p1" && message.get("method").is_none() {
            assert_eq!(message["result"]["stopReason"], "end_turn", "{message}");
            break;
        }
    }
    assert!(allowed, "the model was chosen while the turn waited");
    assert_eq!(text, "a finished", "the running turn kept the model it started with");
    let (before, _) = editor.prompt(json!("p2"), &session, "again").await;
    let next: String = before
        .iter()
        .filter(|m| update_kind(m) == Some("agent_message_chunk"))
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert_eq!(next, "b2", "the next turn is the new model's");
    editor.close().await;
}
