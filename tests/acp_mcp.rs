//! MCP servers given over ACP: the model sees and calls their tools, `_heron/session/
//! mcpStatus` reports each server (ready, or failed with the reason), a malformed entry is
//! invalid params naming it, and closing the session or ending the connection stops the
//! server.

use crate::support;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::{Editor, update_kind};
use heron::cli::acp::AcpArgs;
use serde_json::{Value, json};

const ECHO_THEN_ANSWER: &str = r#"{"steps": [{"tool_call": {"name": "mcp__fake__echo", "arguments": {"text": "ping"}}}]}
{"steps": [{"text": "Done."}]}
"#;

fn fixture() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp_server.py").display().to_string()
}

fn fake(name: &str) -> Value {
    json!({ "name": name, "command": "python3", "args": [fixture()], "env": [] })
}

/// A fake server whose command line carries `marker`, to find its process.
fn marked(name: &str, marker: &str) -> Value {
    json!({ "name": name, "command": "python3", "args": [fixture(), marker], "env": [] })
}

fn start() -> Editor {
    support::start_scripted("s", ECHO_THEN_ANSWER)
}

async fn session_with(editor: &mut Editor, servers: Value) -> String {
    editor.ask(json!("init"), "initialize", json!({ "protocolVersion": 1 })).await;
    let cwd = editor.dirs.ws();
    let answer = editor.ask(json!("new"), "session/new", json!({ "cwd": cwd, "mcpServers": servers })).await;
    answer["result"]["sessionId"].as_str().unwrap_or_else(|| panic!("no session: {answer}")).to_owned()
}

/// Asks for the servers' status until none is connecting.
async fn settled(editor: &mut Editor, session: &str) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let answer =
            editor.ask(json!("st"), "_heron/session/mcpStatus", json!({ "sessionId": session })).await;
        let servers = answer["result"]["servers"].as_array().cloned().unwrap_or_else(|| panic!("{answer}"));
        if servers.iter().all(|s| s["status"] != "connecting") || Instant::now() > deadline {
            return servers;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The processes whose command line carries `marker`.
fn server_pids(marker: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker))
        })
        .collect()
}

#[tokio::test]
async fn the_model_calls_a_servers_tool_after_the_user_allows_it() {
    let mut editor = start();
    let session = session_with(&mut editor, json!([fake("fake")])).await;
    let (before, answer) = editor.prompt(json!("p"), &session, "Use the server").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let call = before.iter().find(|m| update_kind(m) == Some("tool_call")).expect("a tool call");
    assert_eq!(call["params"]["update"]["title"], "fake: echo");
    assert_eq!(call["params"]["update"]["kind"], "other");
    assert!(before.iter().any(|m| m["method"] == "session/request_permission"), "it is asked about");
    let done = before
        .iter()
        .find(|m| {
            update_kind(m) == Some("tool_call_update") && m["params"]["update"]["status"] == "completed"
        })
        .expect("the call completes");
    assert_eq!(done["params"]["update"]["content"][0]["content"]["text"], "ping");
    editor.close().await;
}

#[tokio::test]
async fn status_reports_ready_servers_and_why_the_others_failed() {
    let mut editor = start();
    let missing = json!({ "name": "gone", "command": "/nonexistent/server", "args": [], "env": [] });
    let session = session_with(&mut editor, json!([fake("fake"), missing])).await;
    let servers = settled(&mut editor, &session).await;
    assert_eq!(servers[0], json!({ "name": "fake", "status": "ready", "tools": 6, "transport": "stdio" }));
    assert_eq!((servers[1]["status"].as_str(), servers[1]["tools"].as_u64()), (Some("failed"), Some(0)));
    assert!(
        servers[1]["error"].as_str().is_some_and(|e| e.contains("/nonexistent/server")),
        "{}",
        servers[1]
    );
    editor.close().await;
}

#[tokio::test]
async fn env_given_as_an_object_is_taken_like_a_list() {
    let mut editor = start();
    let server =
        json!({ "name": "fake", "command": "python3", "args": [fixture()], "env": { "FAKE_TOKEN": "t" } });
    let session = session_with(&mut editor, json!([server])).await;
    let servers = settled(&mut editor, &session).await;
    assert_eq!(servers[0]["status"], "ready", "{}", servers[0]);
    editor.close().await;
}

#[tokio::test]
async fn a_server_without_a_command_is_invalid_params_naming_it() {
    let mut editor = start();
    editor.ask(json!("init"), "initialize", json!({ "protocolVersion": 1 })).await;
    let cwd = editor.dirs.ws();
    let servers = json!([fake("fake"), { "name": "blank", "command": " ", "args": [], "env": [] }]);
    let answer = editor.ask(json!("new"), "session/new", json!({ "cwd": cwd, "mcpServers": servers })).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert_eq!(answer["error"]["data"]["path"], "mcpServers[1].command", "{answer}");
    editor.close().await;
}

#[tokio::test]
async fn more_servers_than_a_session_starts_are_refused_whole_and_the_connection_serves_on() {
    let mut editor = start();
    editor.ask(json!("init"), "initialize", json!({ "protocolVersion": 1 })).await;
    let cwd = editor.dirs.ws();
    // Commands that do not exist: had any been started, the list would not have been
    // refused whole.
    let many: Vec<Value> = (0..=64)
        .map(|i| json!({ "name": format!("s{i}"), "command": "/nonexistent/server", "args": [], "env": [] }))
        .collect();
    let answer = editor.ask(json!("new"), "session/new", json!({ "cwd": cwd, "mcpServers": many })).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert_eq!(answer["error"]["data"]["path"], "mcpServers", "{answer}");
    assert_eq!(answer["error"]["data"]["limit"], 64, "{answer}");
    let at_limit = &many[..64];
    let answer =
        editor.ask(json!("new2"), "session/new", json!({ "cwd": cwd, "mcpServers": at_limit })).await;
    assert!(answer["result"]["sessionId"].is_string(), "64 servers are taken: {answer}");
    editor.close().await;
}

/// A server that sends the user more requests than a person answers at once: four reach
/// the editor, the fifth is refused at once with why, and the session goes on.
#[tokio::test]
async fn a_server_that_floods_the_user_with_forms_has_four_waiting_and_the_rest_refused() {
    let script = r#"{"steps": [{"tool_call": {"name": "mcp__fake__ask_many", "arguments": {"count": 5}}}]}
{"steps": [{"text": "Done."}]}
"#;
    let mut editor = support::start_scripted("s", script);
    let params = json!({ "protocolVersion": 1, "clientCapabilities": { "elicitation": { "form": {} } } });
    editor.ask(json!("init"), "initialize", params).await;
    let cwd = editor.dirs.ws();
    let answer =
        editor.ask(json!("new"), "session/new", json!({ "cwd": cwd, "mcpServers": [fake("fake")] })).await;
    let session = answer["result"]["sessionId"].as_str().expect("a session").to_owned();
    assert_eq!(settled(&mut editor, &session).await[0]["status"], "ready");
    let params = json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "Ask" }] });
    editor.send_request(json!("p"), "session/prompt", params).await;
    let (mut shown, mut output) = (0, String::new());
    loop {
        let message = editor.recv_within(Duration::from_secs(30)).await;
        if message["id"] == "p" && message.get("method").is_none() {
            assert_eq!(message["result"]["stopReason"], "end_turn", "{message}");
            break;
        }
        match message["method"].as_str() {
            // Never answered: the four stay waiting while the fifth is refused.
            Some("elicitation/create") => shown += 1,
            Some("session/request_permission") => {
                let result = json!({ "outcome": { "outcome": "selected", "optionId": "allow_once" } });
                editor.send_json(json!({ "jsonrpc": "2.0", "id": message["id"], "result": result })).await;
            }
            _ => {}
        }
        let update = &message["params"]["update"];
        if update_kind(&message) == Some("tool_call_update") && update["status"] == "completed" {
            output = update["content"][0]["content"]["text"].as_str().unwrap_or_default().to_owned();
        }
    }
    assert_eq!(shown, 4, "four requests reach the editor");
    assert!(output.contains("4 requests of this server already wait on the user"), "{output}");
    editor.close().await;
}

/// A server that goes away in the middle of a session is told to the user when it goes
/// (a notice, and a failed status), not at the model's next call of its tools.
#[tokio::test]
async fn a_server_that_dies_mid_session_is_a_notice_and_a_failed_status() {
    let mut editor = start();
    let params = json!({ "protocolVersion": 1, "clientCapabilities": { "session": { "notices": {} } } });
    editor.ask(json!("init"), "initialize", params).await;
    let cwd = editor.dirs.ws();
    let server = json!({ "name": "fake", "command": "python3", "args": [fixture()],
                         "env": [{ "name": "MCP_FAKE_EXIT_AFTER_CALL", "value": "1" }] });
    let answer = editor.ask(json!("new"), "session/new", json!({ "cwd": cwd, "mcpServers": [server] })).await;
    let session = answer["result"]["sessionId"].as_str().expect("a session").to_owned();
    assert_eq!(settled(&mut editor, &session).await[0]["status"], "ready");
    let params = json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "ping" }] });
    editor.send_request(json!("p"), "session/prompt", params).await;
    let mut notice = Value::Null;
    let mut ended = false;
    while notice.is_null() || !ended {
        let message = editor.recv_within(Duration::from_secs(20)).await;
        if message["method"] == "session/request_permission" {
            let result = json!({ "outcome": { "outcome": "selected", "optionId": "allow_once" } });
            editor.send_json(json!({ "jsonrpc": "2.0", "id": message["id"], "result": result })).await;
        }
        if message["id"] == "p" && message.get("method").is_none() {
            ended = true;
        }
        if update_kind(&message) == Some("notice") {
            notice = message["params"]["update"].clone();
        }
    }
    let title = notice["title"].as_str().unwrap_or_default();
    assert!(title.contains("`fake`") && title.contains("not available"), "{notice}");
    assert!(notice["description"].as_str().is_some_and(|d| d.contains("exited")), "{notice}");
    let status = editor.ask(json!("st"), "_heron/session/mcpStatus", json!({ "sessionId": session })).await;
    assert_eq!(status["result"]["servers"][0]["status"], "failed", "{status}");
    editor.close().await;
}

#[tokio::test]
async fn unknown_sessions_have_no_mcp_status() {
    let mut editor = start();
    editor.ask(json!("init"), "initialize", json!({ "protocolVersion": 1 })).await;
    let answer = editor.ask(json!(1), "_heron/session/mcpStatus", json!({ "sessionId": "nope" })).await;
    assert_eq!(answer["error"]["code"], -32002, "{answer}");
    editor.close().await;
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn closing_the_session_and_ending_the_connection_stop_the_servers() {
    let mut editor = start();
    // The workspace path is unique to this test: it marks this test's servers.
    let marker = editor.dirs.ws();
    let first = session_with(&mut editor, json!([marked("fake", &marker)])).await;
    settled(&mut editor, &first).await;
    let cwd = editor.dirs.ws();
    let second = editor
        .ask(json!("new2"), "session/new", json!({ "cwd": cwd, "mcpServers": [marked("fake", &marker)] }))
        .await;
    let second = second["result"]["sessionId"].as_str().expect("second session").to_owned();
    settled(&mut editor, &second).await;
    let running = server_pids(&marker);
    assert!(running.len() >= 2, "both servers run: {running:?}");
    let gone = |pids: &[i32]| {
        pids.iter()
            .all(|p| std::fs::read_to_string(format!("/proc/{p}/stat")).map_or(true, |s| s.contains(") Z ")))
    };

    let closed = editor.ask(json!("c"), "session/close", json!({ "sessionId": first })).await;
    assert!(closed.get("result").is_some(), "{closed}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while server_pids(&marker).len() >= running.len() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(server_pids(&marker).len(), running.len() - 1, "closing one session stops exactly its server");

    editor.close().await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while !gone(&running) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(gone(&running), "no server outlives the connection: {:?}", server_pids(&marker));
}

/// A call of a failed server's tool tells the model the server's state and why, not that
/// no such tool exists.
#[tokio::test]
async fn the_model_is_told_a_failed_servers_state_when_it_calls_its_tool() {
    let script = r#"{"steps": [{"tool_call": {"name": "mcp__memory__create_entities", "arguments": {}}}]}
{"steps": [{"text": "Done."}]}
"#;
    let mut editor = support::start_scripted("s", script);
    let broken = json!({ "name": "memory", "command": "/nonexistent/server-memory", "args": [], "env": [] });
    let session = session_with(&mut editor, json!([broken])).await;
    settled(&mut editor, &session).await;
    let (before, answer) = editor.prompt(json!("p"), &session, "Remember this").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let failed = before
        .iter()
        .find(|m| update_kind(m) == Some("tool_call_update") && m["params"]["update"]["status"] == "failed")
        .unwrap_or_else(|| panic!("the call failed: {before:?}"));
    let said = failed["params"]["update"].to_string();
    assert!(said.contains("the MCP server `memory` is not running"), "{said}");
    assert!(said.contains("/nonexistent/server-memory"), "the reason: {said}");
    assert!(!said.contains("There is no tool called"), "{said}");
}

/// A server's log messages at warning and above reach the user as notices; below that,
/// only Heron's log. (The fixture server logs what its `log` tool is given.)
#[tokio::test]
async fn a_servers_warnings_and_errors_are_notices_and_its_info_is_not() {
    let call = |level: &str, data: &str| {
        let args = json!({ "level": level, "data": data });
        json!({ "steps": [{ "tool_call": { "name": "mcp__fake__log", "arguments": args } }] }).to_string()
    };
    let script = format!(
        "{}\n{}\n{}\n{}\n",
        call("info", "just so you know"),
        call("error", "the index is corrupt"),
        json!({ "steps": [{ "text": "Done." }] }),
        json!({ "steps": [{ "text": "Again." }] })
    );
    let mut editor = support::start_in(
        AcpArgs { permission_mode: Some("bypassPermissions".into()), ..support::scripted_args("s") },
        support::scripted_home("s", "", &script),
    );
    let params = json!({ "protocolVersion": 1, "clientCapabilities": { "session": { "notices": {} } } });
    editor.ask(json!("init"), "initialize", params).await;
    let cwd = editor.dirs.ws();
    let logging = json!({
        "name": "fake", "command": "python3", "args": [fixture()], "env": [{ "name": "MCP_FAKE_LOG", "value": "1" }]
    });
    let answer =
        editor.ask(json!("new"), "session/new", json!({ "cwd": cwd, "mcpServers": [logging] })).await;
    let session = answer["result"]["sessionId"].as_str().unwrap_or_else(|| panic!("{answer}")).to_owned();
    settled(&mut editor, &session).await;
    let (before, answer) = editor.prompt(json!("p"), &session, "Log twice").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    // The notice may follow the turn's answer: the next turn's messages include it then.
    let (after, _) = editor.prompt(json!("p2"), &session, "Again").await;
    let notices: Vec<String> = before
        .iter()
        .chain(&after)
        .filter(|m| update_kind(m) == Some("notice") || m["params"]["update"]["sessionUpdate"] == "notice")
        .map(|m| m["params"]["update"].to_string())
        .collect();
    assert!(
        notices.iter().any(
            |n| n.contains("The MCP server `fake` logged an error") && n.contains("the index is corrupt")
        ),
        "{notices:?}"
    );
    assert!(!notices.iter().any(|n| n.contains("just so you know")), "{notices:?}");
}
