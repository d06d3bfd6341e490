//! What the editor saw finish survives `kill -9` of the agent mid-turn, and a resume with
//! other workspace roots while the session is open is refused.

use crate::support;
use std::io::{BufRead, BufReader, Write};

use serde_json::{Value, json};

/// A turn that finishes one tool call, then hangs in the model for a minute.
const SCRIPT: &str = r#"{"steps":[{"text":"Planning."},{"tool_call":{"name":"todo_write","arguments":{"todos":[{"content":"survive","status":"pending"}]}}}]}
{"steps":[{"text":"Still "},{"delay_ms":60000},{"text":"thinking."}]}
"#;

fn spawn(home: &std::path::Path) -> std::process::Child {
    support::spawn_heron(home, &["--model", "t/m"])
}

fn send(child: &mut std::process::Child, message: Value) {
    let stdin = child.stdin.as_mut().expect("stdin");
    writeln!(stdin, "{message}").expect("write");
    stdin.flush().expect("flush");
}

#[test]
fn a_finished_tool_call_survives_kill_9_mid_turn() {
    let dirs = support::scripted_home("t", "", SCRIPT);
    let mut child = spawn(&dirs.home());
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut next =
        || -> Value { serde_json::from_str(&lines.next().expect("a line").expect("read")).expect("json") };
    send(&mut child, json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}));
    assert_eq!(next()["id"], 1);
    send(
        &mut child,
        json!({"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":dirs.ws(),"mcpServers":[]}}),
    );
    let sid = next()["result"]["sessionId"].as_str().expect("session").to_owned();
    send(
        &mut child,
        json!({"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":sid,"prompt":[{"type":"text","text":"go"}]}}),
    );
    // Wait until the editor has seen the tool call finish and the next answer start.
    loop {
        let message = next();
        let update = &message["params"]["update"];
        if update["sessionUpdate"] == "agent_message_chunk" && update["content"]["text"] == "Still " {
            break;
        }
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");

    let mut child = spawn(&dirs.home());
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut next =
        || -> Value { serde_json::from_str(&lines.next().expect("a line").expect("read")).expect("json") };
    send(&mut child, json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}));
    assert_eq!(next()["id"], 1);
    send(
        &mut child,
        json!({"jsonrpc":"2.0","id":2,"method":"session/load","params":{"sessionId":sid,"cwd":dirs.ws(),"mcpServers":[]}}),
    );
    let mut replayed = Vec::new();
    loop {
        let message = next();
        if message["id"] == 2 {
            assert!(message["result"].is_object(), "{message}");
            break;
        }
        if message["method"] == "session/update" {
            replayed.push(message["params"]["update"].clone());
        }
    }
    let kinds: Vec<&str> = replayed.iter().filter_map(|u| u["sessionUpdate"].as_str()).collect();
    assert!(kinds.contains(&"user_message_chunk"), "{kinds:?}");
    assert!(kinds.contains(&"plan"), "the finished plan survives: {kinds:?}");
    assert!(
        replayed.iter().any(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] == "completed"),
        "the finished tool call survives: {replayed:?}"
    );
    let _ = child.kill();
    let _ = child.wait();
}

#[tokio::test]
async fn resuming_an_open_session_with_other_roots_is_refused() {
    let mut editor = support::start();
    let sid = editor.new_session().await;
    let other = editor.dirs.other("extra");
    let cwd = editor.dirs.ws();
    let answer = editor
        .ask(
            json!("r"),
            "session/resume",
            json!({ "sessionId": sid, "cwd": cwd, "mcpServers": [], "additionalDirectories": [other] }),
        )
        .await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert_eq!(answer["error"]["data"]["code"], "acp.additional_directories.session_open");
    editor.close().await;
}

#[tokio::test]
async fn slash_commands_run_without_the_model_and_change_the_mode() {
    let mut editor = support::start();
    let sid = editor.new_session().await;
    let (seen, answer) = editor.prompt(json!("s"), &sid, "/mode plan").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    assert!(seen.iter().any(|m| m["params"]["update"]["sessionUpdate"] == "current_mode_update"
        && m["params"]["update"]["currentModeId"] == "plan"));
    assert!(
        !seen.iter().any(|m| m["params"]["update"]["sessionUpdate"] == "user_message_chunk"),
        "no model turn"
    );
    editor.close().await;
}

#[tokio::test]
async fn an_image_prompt_is_saved_under_attachments_and_replayed() {
    let mut editor = support::start();
    let sid = editor.new_session().await;
    // A 1x1 PNG.
    let png =
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
    let prompt = json!({ "sessionId": sid, "prompt": [
        { "type": "text", "text": "what is this?" },
        { "type": "image", "mimeType": "image/png", "data": png }
    ] });
    let (_, answer) = editor.exchange(json!("img"), "session/prompt", prompt).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let dir = std::path::Path::new(&editor.dirs.ws()).join(".heron").join("attachments");
    let saved: Vec<_> = std::fs::read_dir(&dir).expect("attachments dir").collect();
    assert_eq!(saved.len(), 1, "one image saved in {}", dir.display());
    let (replay, loaded) = editor
        .exchange(
            json!("load"),
            "session/load",
            json!({ "sessionId": sid, "cwd": editor.dirs.ws(), "mcpServers": [] }),
        )
        .await;
    assert!(loaded["result"].is_object(), "{loaded}");
    let image = replay
        .iter()
        .find(|m| m["params"]["update"]["content"]["type"] == "image")
        .expect("the image is replayed");
    assert_eq!(image["params"]["update"]["content"]["data"], png);
    editor.close().await;
}

/// `kill -9` while `write_file` replaces a 3 MiB file, at a spread of moments: every time
/// the file is either the old one or the new one, never a mix or a truncation.
#[test]
fn kill_9_during_a_write_leaves_the_old_file_or_the_new_one() {
    let new = "n".repeat(3 << 20);
    let call = json!({"steps": [{"tool_call": {"name": "write_file", "arguments": {"path": "big.txt", "content": new}}}]});
    let script = format!("{call}\n{}\n", json!({"steps": [{"text": "Done."}]}));
    let dirs = support::scripted_home("t", "", &script);
    let file = std::path::Path::new(&dirs.ws()).join("big.txt");
    let old = "old line\n".repeat(100_000);
    let mut outcomes = (0, 0);
    for delay_ms in [0u64, 1, 2, 4, 8, 16] {
        std::fs::write(&file, &old).expect("the old file");
        let mut child =
            support::spawn_heron(&dirs.home(), &["--model", "t/m", "--permission-mode", "bypassPermissions"]);
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut next = || -> Value {
            serde_json::from_str(&lines.next().expect("a line").expect("read")).expect("json")
        };
        send(
            &mut child,
            json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}),
        );
        assert_eq!(next()["id"], 1);
        send(
            &mut child,
            json!({"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":dirs.ws(),"mcpServers":[]}}),
        );
        let sid = next()["result"]["sessionId"].as_str().expect("session").to_owned();
        send(
            &mut child,
            json!({"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":sid,"prompt":[{"type":"text","text":"go"}]}}),
        );
        // The call is about to run once it is announced.
        while next()["params"]["update"]["sessionUpdate"] != "tool_call" {}
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        child.kill().expect("SIGKILL");
        child.wait().expect("reaped");
        let now = std::fs::read(&file).expect("the file is there");
        if now == old.as_bytes() {
            outcomes.0 += 1;
        } else {
            assert!(now == new.as_bytes(), "after {delay_ms} ms: {} bytes, neither old nor new", now.len());
            outcomes.1 += 1;
        }
    }
    eprintln!("killed before the rename {} times, after it {} times", outcomes.0, outcomes.1);
}
