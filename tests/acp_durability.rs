//! What the editor saw finish survives `kill -9` of the agent mid-turn, and a resume with
//! other workspace roots while the session is open is refused.

use crate::support::{self, Process};

use serde_json::{Value, json};

/// A turn that finishes one tool call, then hangs in the model for a minute.
const SCRIPT: &str = r#"{"steps":[{"text":"Planning."},{"tool_call":{"name":"todo_write","arguments":{"todos":[{"content":"survive","status":"pending"}]}}}]}
{"steps":[{"text":"Still "},{"delay_ms":60000},{"text":"thinking."}]}
"#;

fn spawn(home: &std::path::Path) -> Process {
    Process::spawn(home, &["--model", "t/m"])
}

#[test]
fn a_finished_tool_call_survives_kill_9_mid_turn() {
    let dirs = support::scripted_home("t", "", SCRIPT);
    let mut heron = spawn(&dirs.home());
    let sid = start_turn(&mut heron, &dirs.ws());
    // Wait until the editor has seen the tool call finish and the next answer start.
    heron.until(|message| {
        let update = &message["params"]["update"];
        update["sessionUpdate"] == "agent_message_chunk" && update["content"]["text"] == "Still "
    });
    heron.child.kill().expect("SIGKILL");
    heron.child.wait().expect("reaped");

    let mut heron = spawn(&dirs.home());
    heron.request(json!(1), "initialize", json!({"protocolVersion": 1}));
    heron.send(json!({"jsonrpc":"2.0","id":2,"method":"session/load","params":{"sessionId":sid,"cwd":dirs.ws(),"mcpServers":[]}}));
    let mut replayed = Vec::new();
    let loaded = heron.until_answer(&json!(2), |_, message| {
        if message["method"] == "session/update" {
            replayed.push(message["params"]["update"].clone());
        }
    });
    assert!(loaded["result"].is_object(), "{loaded}");
    let kinds: Vec<&str> = replayed.iter().filter_map(|u| u["sessionUpdate"].as_str()).collect();
    assert!(kinds.contains(&"user_message_chunk"), "{kinds:?}");
    assert!(kinds.contains(&"plan"), "the finished plan survives: {kinds:?}");
    assert!(
        replayed.iter().any(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] == "completed"),
        "the finished tool call survives: {replayed:?}"
    );
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
    assert_eq!(answer["error"]["data"]["path"], "additionalDirectories", "{answer}");
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

/// A 1x1 PNG, base64.
const PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

fn image_prompt(sid: &str) -> Value {
    json!({ "sessionId": sid, "prompt": [
        { "type": "text", "text": "what is this?" },
        { "type": "image", "mimeType": "image/png", "data": PNG }
    ] })
}

#[tokio::test]
async fn a_heron_symlink_in_the_repository_does_not_take_attachments_outside() {
    let mut editor = support::start();
    let ws = std::path::PathBuf::from(editor.dirs.ws());
    let outside = tempfile::tempdir().expect("outside");
    std::os::unix::fs::symlink(outside.path(), ws.join(".heron")).expect("link .heron out");
    let sid = editor.new_session().await;
    let (_, answer) = editor.exchange(json!("img"), "session/prompt", image_prompt(&sid)).await;
    assert_eq!(answer["error"]["data"]["code"], "turn_failed", "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("outside the session folder"), "{answer}");
    let landed: Vec<_> = walk(outside.path());
    assert!(landed.is_empty(), "nothing is written through the link: {landed:?}");
    // The connection and the session keep serving.
    let (_, answer) = editor.prompt(json!("hello"), &sid, "hello").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    editor.close().await;
}

#[tokio::test]
async fn an_attachment_swapped_for_a_link_or_a_fifo_is_not_read_back() {
    let mut editor = support::start();
    let sid = editor.new_session().await;
    let (_, answer) = editor.exchange(json!("img"), "session/prompt", image_prompt(&sid)).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let dir = std::path::Path::new(&editor.dirs.ws()).join(".heron").join("attachments");
    let saved = std::fs::read_dir(&dir).expect("attachments").next().expect("one").expect("entry").path();
    let secret = tempfile::NamedTempFile::new().expect("secret");
    std::fs::write(secret.path(), "top-secret-bytes").expect("write secret");
    for swap in ["link", "fifo"] {
        std::fs::remove_file(&saved).expect("remove");
        if swap == "link" {
            std::os::unix::fs::symlink(secret.path(), &saved).expect("symlink");
        } else {
            let made = std::process::Command::new("mkfifo").arg(&saved).status().expect("mkfifo runs");
            assert!(made.success(), "mkfifo");
        }
        let load = json!({ "sessionId": sid, "cwd": editor.dirs.ws(), "mcpServers": [] });
        let (replay, loaded) = editor.exchange(json!(format!("load-{swap}")), "session/load", load).await;
        assert!(loaded["result"].is_object(), "{swap}: {loaded}");
        let shown = serde_json::to_string(&replay).expect("json");
        assert!(!shown.contains(&base64_of("top-secret-bytes")), "{swap}: the linked file is not replayed");
        assert!(shown.contains("no longer available"), "{swap}: {shown}");
        // The next model request reads the history's images again: it must not hang or send the file.
        let (_, answer) = editor.prompt(json!(format!("next-{swap}")), &sid, "and now?").await;
        assert_eq!(answer["result"]["stopReason"], "end_turn", "{swap}: {answer}");
    }
    editor.close().await;
}

fn base64_of(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir).into_iter().flatten().flatten().map(|e| e.path()).collect()
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
        let mut heron =
            Process::spawn(&dirs.home(), &["--model", "t/m", "--permission-mode", "bypassPermissions"]);
        start_turn(&mut heron, &dirs.ws());
        // The call is about to run once it is announced.
        heron.until(|message| message["params"]["update"]["sessionUpdate"] == "tool_call");
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        heron.child.kill().expect("SIGKILL");
        heron.child.wait().expect("reaped");
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

/// Initializes, opens a session in `ws` and prompts it with "go"; the session's id.
fn start_turn(heron: &mut Process, ws: &str) -> String {
    let sid = heron.new_session(ws);
    heron.send_prompt(json!(3), &sid, "go");
    sid
}
