//! `_heron/session/reloadExtensions` and `--safe-mode` over ACP: a reload makes a new
//! provider's model usable and picks up new commands and plugins, a broken `config.toml`
//! keeps everything and names its line, a reload asked for during a turn is queued once and
//! runs after it (its failure told by the session status), and safe mode starts no
//! extension at all.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::{self, Editor, update_kind};
use heron::cli::acp::AcpArgs;
use serde_json::{Value, json};

fn write(dir: impl AsRef<Path>, name: &str, text: &str) {
    let path = dir.as_ref().join(name);
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("folder");
    std::fs::write(&path, text).expect("write");
}

fn fixture() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp_server.py").display().to_string()
}

/// An agent whose model `s/m` plays `script`.
fn start(script: &str) -> Editor {
    support::start_scripted("s", script)
}

/// `initialize` and `session/new`, and the commands update after it; the session id.
async fn open(editor: &mut Editor, servers: Value) -> String {
    editor.request(json!("init"), "initialize", json!({ "protocolVersion": 1 })).await;
    let cwd = editor.dirs.ws();
    let answer =
        editor.request(json!("new"), "session/new", json!({ "cwd": cwd, "mcpServers": servers })).await;
    let update = editor.recv().await;
    assert_eq!(update_kind(&update), Some("available_commands_update"), "{update}");
    answer["result"]["sessionId"].as_str().unwrap_or_else(|| panic!("{answer}")).to_owned()
}

fn reload_params(session: &str) -> Value {
    json!({ "sessionId": session })
}

fn names(commands: &Value) -> Vec<String> {
    commands.as_array().into_iter().flatten().filter_map(|c| c["name"].as_str().map(str::to_owned)).collect()
}

fn set_model(session: &str, model: &str) -> Value {
    json!({ "sessionId": session, "configId": "model", "value": model })
}

fn agent_text(messages: &[Value]) -> String {
    messages
        .iter()
        .filter(|m| update_kind(m) == Some("agent_message_chunk"))
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect()
}

#[tokio::test]
async fn a_reload_makes_a_new_providers_model_usable_and_lists_new_commands() {
    let mut editor = start("{\"steps\": [{\"text\": \"Old provider.\"}]}\n");
    let session = open(&mut editor, json!([])).await;
    let refused = editor.ask(json!(1), "session/set_config_option", set_model(&session, "fresh/m")).await;
    assert!(refused.get("error").is_some(), "fresh/m is not configured yet: {refused}");

    let config = format!(
        "{}{}",
        support::scripted_provider("s", "s.jsonl"),
        support::scripted_provider("fresh", "fresh.jsonl")
    );
    editor.dirs.write_home("config.toml", &config);
    editor.dirs.write_home("fresh.jsonl", "{\"steps\": [{\"text\": \"From the fresh provider.\"}]}\n");
    write(editor.dirs.ws(), ".heron/commands/ship.md", "Ship it.\n");
    let answer = editor.request(json!(2), "_heron/session/reloadExtensions", reload_params(&session)).await;
    let result = &answer["result"];
    assert!(result.get("queued").is_none(), "it ran at once: {answer}");
    assert!(names(&result["availableCommands"]).contains(&"ship".to_owned()), "{answer}");
    assert_eq!(result["mcpServers"], json!([]));
    // Then the editor is told: the commands, and the models, which changed.
    let commands = editor.recv().await;
    assert_eq!(update_kind(&commands), Some("available_commands_update"), "{commands}");
    assert!(names(&commands["params"]["update"]["availableCommands"]).contains(&"ship".to_owned()));
    let options = editor.recv().await;
    assert_eq!(update_kind(&options), Some("config_option_update"), "{options}");
    assert!(options.to_string().contains("fresh/m"), "{options}");

    let chosen = editor.ask(json!(3), "session/set_config_option", set_model(&session, "fresh/m")).await;
    assert!(chosen.get("result").is_some(), "{chosen}");
    let (before, answer) = editor.prompt(json!(4), &session, "Hello").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(agent_text(&before), "From the fresh provider.");
    editor.close().await;
}

#[tokio::test]
async fn a_broken_config_keeps_the_old_runtime_and_names_the_file_and_line() {
    let mut editor = start("{\"steps\": [{\"text\": \"Still here.\"}]}\n");
    let session = open(&mut editor, json!([])).await;
    let broken = format!("{}bogus_key = 1\n", support::scripted_provider("s", "s.jsonl"));
    editor.dirs.write_home("config.toml", &broken);
    write(editor.dirs.ws(), ".heron/commands/ship.md", "Ship it.\n");
    let answer = editor.request(json!(1), "_heron/session/reloadExtensions", reload_params(&session)).await;
    let error = &answer["error"];
    assert_eq!(error["code"], -32603, "{answer}");
    assert_eq!(error["data"]["code"], "extensions.reload_failed", "{answer}");
    assert_eq!(error["data"]["line"], 5, "{answer}");
    assert!(error["data"]["file"].as_str().is_some_and(|f| f.ends_with("config.toml")), "{answer}");
    assert!(error["data"]["reason"].as_str().is_some_and(|r| r.contains("bogus_key")), "{answer}");
    editor.expect_silence().await;
    // Nothing changed: the new command file was not taken, and the old model still serves.
    let (before, answer) = editor.prompt(json!(2), &session, "/ship").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(agent_text(&before), "Still here.");
    let status = editor.request(json!(3), "_heron/session/reloadExtensions", reload_params(&session)).await;
    assert!(status.get("error").is_some(), "a second try fails the same way: {status}");
    editor.close().await;
}

#[tokio::test]
async fn a_reload_during_a_turn_is_queued_once_and_runs_after_it() {
    let mut editor =
        start("{\"steps\": [{\"text\": \"Working\"}, {\"delay_ms\": 1500}, {\"text\": \" done.\"}]}\n");
    let session = open(&mut editor, json!([])).await;
    let prompt = json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "Work" }] });
    editor.send_request(json!("p"), "session/prompt", prompt).await;
    loop {
        if update_kind(&editor.recv().await) == Some("agent_message_chunk") {
            break;
        }
    }
    for id in ["r1", "r2"] {
        let answer =
            editor.request(json!(id), "_heron/session/reloadExtensions", reload_params(&session)).await;
        assert_eq!(answer["result"]["queued"], true, "{answer}");
        assert!(!names(&answer["result"]["availableCommands"]).contains(&"late".to_owned()), "{answer}");
    }
    // Written after both asks: only a reload that runs after the turn can see it.
    write(editor.dirs.ws(), ".heron/commands/late.md", "Arrived late.\n");
    loop {
        let message = editor.recv_within(Duration::from_secs(10)).await;
        assert_ne!(update_kind(&message), Some("available_commands_update"), "not during the turn");
        if message["id"] == "p" {
            assert_eq!(message["result"]["stopReason"], "end_turn", "{message}");
            break;
        }
    }
    let commands = editor.recv_within(Duration::from_secs(10)).await;
    assert_eq!(update_kind(&commands), Some("available_commands_update"), "{commands}");
    assert!(names(&commands["params"]["update"]["availableCommands"]).contains(&"late".to_owned()));
    let options = editor.recv().await;
    assert_eq!(update_kind(&options), Some("config_option_update"), "{options}");
    // Exactly one reload ran: a request sent now is answered next, after anything a second
    // reload would have sent.
    let after = editor.request(json!("after"), "_heron/session/status", reload_params(&session)).await;
    assert!(after["result"].is_object(), "nothing came before the answer: {after}");
    editor.close().await;
}

#[tokio::test]
async fn a_queued_reload_that_fails_is_told_in_the_status_and_changes_nothing() {
    let mut editor =
        start("{\"steps\": [{\"text\": \"Working\"}, {\"delay_ms\": 1500}, {\"text\": \" done.\"}]}\n");
    let session = editor.new_session_with(support::wanting_status(json!({}))).await;
    let prompt = json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "Work" }] });
    editor.send_request(json!("p"), "session/prompt", prompt).await;
    loop {
        if update_kind(&editor.recv().await) == Some("agent_message_chunk") {
            break;
        }
    }
    let answer = editor.request(json!("r"), "_heron/session/reloadExtensions", reload_params(&session)).await;
    assert_eq!(answer["result"]["queued"], true, "{answer}");
    // Broken before the turn ends: the queued reload reads it.
    let broken = format!("{}bogus_key = 1\n", support::scripted_provider("s", "s.jsonl"));
    editor.dirs.write_home("config.toml", &broken);
    let deadline = Instant::now() + Duration::from_secs(10);
    // The reload runs once the turn has ended, and is told after the turn's answer.
    let mut answered = false;
    let told = loop {
        let message = editor.recv_within(Duration::from_secs(10)).await;
        assert_ne!(update_kind(&message), Some("available_commands_update"), "nothing changed: {message}");
        answered |= message["id"] == "p";
        let reload = &message["params"]["status"]["extensions"]["lastReload"];
        if message["method"] == "_heron/session/status_update" && !reload.is_null() {
            assert!(answered, "the reload was told before the answer of the turn it waited for");
            break reload.clone();
        }
        assert!(Instant::now() < deadline, "the failure was never told");
    };
    assert_eq!((told["outcome"].as_str(), told["queued"].as_bool()), (Some("failed"), Some(true)), "{told}");
    assert_eq!(told["error"]["line"], 5, "{told}");
    assert!(told["error"]["file"].as_str().is_some_and(|f| f.ends_with("config.toml")), "{told}");
    assert!(told["error"]["reason"].as_str().is_some_and(|r| r.contains("bogus_key")), "{told}");
    // A status read tells it too, to a client that did not watch.
    let status = editor.request(json!("s"), "_heron/session/status", json!({ "sessionId": session })).await;
    assert_eq!(status["result"]["status"]["extensions"]["lastReload"], told, "{status}");
    editor.close().await;
}

#[tokio::test]
async fn a_reload_starts_a_new_plugins_servers() {
    let mut editor = start("{\"steps\": [{\"text\": \"Hi.\"}]}\n");
    let session = open(&mut editor, json!([])).await;
    let plugin = format!("[mcp_servers.fake]\ncommand = \"python3\"\nargs = [{:?}]\n", fixture());
    write(editor.dirs.home(), "plugins/docs/plugin.toml", &plugin);
    let answer = editor.request(json!(1), "_heron/session/reloadExtensions", reload_params(&session)).await;
    let servers = answer["result"]["mcpServers"].as_array().cloned().unwrap_or_else(|| panic!("{answer}"));
    assert_eq!(servers.len(), 1, "{answer}");
    assert_eq!(servers[0]["name"], "docs:fake");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status = editor.ask(json!("st"), "_heron/session/mcpStatus", reload_params(&session)).await;
        let state = status["result"]["servers"][0]["status"].clone();
        if state == "ready" {
            break;
        }
        assert!(state == "connecting" && Instant::now() < deadline, "{status}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    editor.close().await;
}

#[tokio::test]
async fn reloading_an_unknown_session_is_not_found() {
    let mut editor = start("{\"steps\": [{\"text\": \"Hi.\"}]}\n");
    editor.request(json!("init"), "initialize", json!({ "protocolVersion": 1 })).await;
    let answer = editor.request(json!(1), "_heron/session/reloadExtensions", reload_params("nope")).await;
    assert_eq!(answer["error"]["code"], -32002, "{answer}");
    editor.close().await;
}

#[tokio::test]
async fn safe_mode_reads_no_commands_or_plugins_and_starts_no_mcp_server() {
    let dirs = support::scripted_home("s", "", "{\"steps\": [{\"text\": \"Hi.\"}]}\n");
    write(dirs.ws(), ".heron/commands/review.md", "Review.\n");
    write(dirs.home(), "commands/standup.md", "Standup.\n");
    let plugin = format!(
        "[actions.go]\nprompt = \"Go\"\n\n[mcp_servers.fake]\ncommand = \"python3\"\nargs = [{:?}]\n",
        fixture()
    );
    write(dirs.home(), "plugins/docs/plugin.toml", &plugin);
    let args = AcpArgs { safe_mode: true, ..support::scripted_args("s") };
    let mut editor = support::start_in(args, dirs);
    editor.request(json!("init"), "initialize", json!({ "protocolVersion": 1 })).await;
    let cwd = editor.dirs.ws();
    let editor_server = json!({ "name": "fake", "command": "python3", "args": [fixture()], "env": [] });
    let answer = editor
        .request(json!("new"), "session/new", json!({ "cwd": cwd, "mcpServers": [editor_server] }))
        .await;
    let session = answer["result"]["sessionId"].as_str().unwrap_or_else(|| panic!("{answer}")).to_owned();
    let approval = answer["result"]["configOptions"]
        .as_array()
        .and_then(|o| o.iter().find(|o| o["id"] == "tool_approval"))
        .cloned();
    assert_eq!(
        approval.expect("tool approval")["currentValue"],
        "ask",
        "safe mode no longer means read-only"
    );
    let update = editor.recv().await;
    let listed = names(&update["params"]["update"]["availableCommands"]);
    assert_eq!(
        listed,
        ["help", "status", "mode", "model", "approval", "mcp", "undo", "rewind", "compact"],
        "only Heron's own (`/mcp` too: the session has servers, disabled): {update}"
    );
    // A server is `connecting` from the moment it is started: no wait would show more.
    let status = editor.ask(json!(1), "_heron/session/mcpStatus", reload_params(&session)).await;
    assert_eq!(
        status["result"]["servers"],
        json!([{ "name": "fake", "status": "disabled", "tools": 0, "transport": "stdio" }]),
        "{status}"
    );
    let reloaded = editor.request(json!(2), "_heron/session/reloadExtensions", reload_params(&session)).await;
    assert_eq!(
        names(&reloaded["result"]["availableCommands"]).len(),
        9,
        "a reload reads none either: {reloaded}"
    );
    assert_eq!(reloaded["result"]["mcpServers"][0]["status"], "disabled");
    editor.close().await;
}
