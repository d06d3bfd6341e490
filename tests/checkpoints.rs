//! Checkpoints over the adapter: a three-turn session that writes, edits and runs a command
//! is rewound to turn 1. Each restore is asked about with the diff it makes; a file someone
//! changed since Heron wrote it is asked about on its own and kept when refused; what the
//! command did is listed as not undone; `/undo` then undoes the rewind itself; and a
//! `session/load` replays the restores as they ran.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::turns::{select, start};
use crate::support::{self, Editor, update_kind};

/// Turn 1 creates a.txt; turn 2 edits it and creates b.txt; turn 3 creates c.txt and runs
/// a command that makes d.txt.
const SCRIPT: &str = r#"{"steps": [{"tool_call": {"name": "write_file", "arguments": {"path": "a.txt", "content": "one\n"}}}]}
{"steps": [{"text": "Turn one done."}]}
{"steps": [{"tool_call": {"name": "edit_file", "arguments": {"path": "a.txt", "old_string": "one", "new_string": "two"}}}, {"tool_call": {"name": "write_file", "arguments": {"path": "b.txt", "content": "bee\n"}}}]}
{"steps": [{"text": "Turn two done."}]}
{"steps": [{"tool_call": {"name": "write_file", "arguments": {"path": "c.txt", "content": "sea\n"}}}, {"tool_call": {"name": "run_command", "arguments": {"command": "echo hi > d.txt"}}}]}
{"steps": [{"text": "Turn three done."}]}
"#;

fn file(editor: &Editor, name: &str) -> Option<String> {
    std::fs::read_to_string(Path::new(&editor.dirs.ws()).join(name)).ok()
}

/// Sends `text` as a prompt and answers each permission request with `choose` (given the
/// request); returns every message before the answer, and the answer.
async fn turn(
    editor: &mut Editor,
    session: &str,
    id: &str,
    text: &str,
    choose: impl Fn(&Value) -> &'static str,
) -> (Vec<Value>, Value) {
    let params = json!({ "sessionId": session, "prompt": [{ "type": "text", "text": text }] });
    request(editor, id, "session/prompt", params, choose).await
}

/// Sends a request and answers each permission request with `choose` (given the request);
/// returns every message before the answer, and the answer.
async fn request(
    editor: &mut Editor,
    id: &str,
    method: &str,
    params: Value,
    choose: impl Fn(&Value) -> &'static str,
) -> (Vec<Value>, Value) {
    editor.send_request(json!(id), method, params).await;
    let mut seen = Vec::new();
    loop {
        let message = editor.recv_within(Duration::from_secs(30)).await;
        if message["id"] == id && message.get("method").is_none() {
            return (seen, message);
        }
        if message["method"] == "session/request_permission" {
            let reply = json!({ "jsonrpc": "2.0", "id": message["id"], "result": select(choose(&message)) });
            editor.send_json(reply).await;
        }
        seen.push(message);
    }
}

fn asked(seen: &[Value]) -> Vec<&Value> {
    seen.iter().filter(|m| m["method"] == "session/request_permission").collect()
}

fn title(request: &Value) -> &str {
    request["params"]["toolCall"]["title"].as_str().unwrap_or_default()
}

/// The text the turn's agent message chunks carry.
fn said(seen: &[Value]) -> String {
    seen.iter()
        .filter(|m| update_kind(m) == Some("agent_message_chunk"))
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect()
}

#[tokio::test]
async fn a_three_turn_session_rewound_to_turn_one_asks_each_restore_and_keeps_anothers_edit() {
    let mut editor = start(SCRIPT, "", support::demo_args());
    let session = editor.new_session().await;
    for (n, id) in ["t1", "t2", "t3"].into_iter().enumerate() {
        let (_, answer) = turn(&mut editor, &session, id, "go", |_| "allow_once").await;
        assert_eq!(answer["result"]["stopReason"], "end_turn", "turn {}: {answer}", n + 1);
    }
    assert_eq!(file(&editor, "a.txt").as_deref(), Some("two\n"));
    // Someone else changes b.txt after Heron wrote it.
    std::fs::write(Path::new(&editor.dirs.ws()).join("b.txt"), "mine\n").expect("an edit of one's own");

    let (seen, answer) = turn(&mut editor, &session, "rw", "/rewind 1", |request| {
        if title(request).contains("changed since") { "reject_once" } else { "allow_once" }
    })
    .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let requests = asked(&seen);
    let titles: Vec<&str> = requests.iter().map(|r| title(r)).collect();
    assert_eq!(requests.len(), 3, "one request per file: {titles:?}");
    let a = requests.iter().find(|r| title(r).contains("a.txt")).expect("a.txt is asked about");
    let diff = &a["params"]["toolCall"]["content"][0];
    assert_eq!(
        (diff["type"].as_str(), diff["oldText"].as_str(), diff["newText"].as_str()),
        (Some("diff"), Some("two\n"), Some("one\n")),
        "{a}"
    );
    assert!(titles.iter().any(|t| t.contains("b.txt") && t.contains("changed since")), "{titles:?}");
    assert!(titles.iter().any(|t| t.contains("Remove") && t.contains("c.txt")), "{titles:?}");
    assert_eq!(file(&editor, "a.txt").as_deref(), Some("one\n"), "put back");
    assert_eq!(file(&editor, "b.txt").as_deref(), Some("mine\n"), "another's edit is kept when refused");
    assert_eq!(file(&editor, "c.txt"), None, "made after turn 1: removed");
    assert_eq!(file(&editor, "d.txt").as_deref(), Some("hi\n"), "a command's work is not undone");
    let text = said(&seen);
    assert!(text.contains("Rewound the files to the end of turn 1 (of 3)"), "{text}");
    assert!(text.contains("Not restored") && text.contains("echo hi > d.txt"), "{text}");
    let made = Path::new(&editor.dirs.ws()).join("d.txt").display().to_string();
    assert!(text.contains(&format!("Changed by a command, cannot undo: {made}")), "{text}");
    let by_commands: Vec<&str> = text.lines().filter(|l| l.starts_with("- Changed by a command")).collect();
    assert_eq!(by_commands.len(), 1, "c.txt, written by Heron in the same turn, is not a command's: {text}");

    // /undo undoes the last turn: the rewind itself.
    let (_, answer) = turn(&mut editor, &session, "un", "/undo", |_| "allow_once").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(file(&editor, "a.txt").as_deref(), Some("two\n"));
    assert_eq!(file(&editor, "c.txt").as_deref(), Some("sea\n"));
    let dirs = editor.dirs.clone();
    editor.close().await;

    // A load replays the restores as they ran.
    let args = heron::cli::acp::AcpArgs { model: Some("t/m".into()), ..support::demo_args() };
    let mut editor = support::start_in(args, dirs);
    editor.ask(json!("init"), "initialize", json!({ "protocolVersion": 1 })).await;
    let cwd = editor.dirs.ws();
    let (replayed, loaded) = editor
        .call(json!("load"), "session/load", json!({ "sessionId": session, "cwd": cwd, "mcpServers": [] }))
        .await;
    assert!(loaded.get("result").is_some(), "{loaded}");
    let restores = replayed
        .iter()
        .filter(|m| update_kind(m) == Some("tool_call"))
        .filter(|m| {
            m["params"]["update"]["title"]
                .as_str()
                .is_some_and(|t| t.starts_with("Restore") || t.starts_with("Remove"))
        })
        .count();
    assert_eq!(restores, 5, "three restores of the rewind, two of the undo");
    editor.close().await;
}

#[tokio::test]
async fn a_rewind_past_the_finished_turns_or_before_any_says_so_and_changes_nothing() {
    let mut editor = start(SCRIPT, "", support::demo_args());
    let session = editor.new_session().await;
    let (seen, answer) = turn(&mut editor, &session, "u", "/undo", |_| "allow_once").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(said(&seen).contains("no turn has finished yet"), "{}", said(&seen));
    let (seen, _) = turn(&mut editor, &session, "r", "/rewind two", |_| "allow_once").await;
    assert!(said(&seen).contains("takes a turn number"), "{seen:?}");
    let (seen, _) = turn(&mut editor, &session, "r9", "/rewind 9", |_| "allow_once").await;
    assert!(said(&seen).contains("0 finished turns"), "{}", said(&seen));
    editor.close().await;
}

/// `_heron/session/rewind` is advertised, and does what `/rewind N` does: each restore asked
/// with its diff, the rewind's message streamed and repeated in the answer.
#[tokio::test]
async fn the_vendor_method_rewinds_like_the_slash_command_and_answers_with_the_summary() {
    let mut editor = start(SCRIPT, "", support::demo_args());
    let session = editor.new_session().await;
    for id in ["t1", "t2"] {
        let (_, answer) = turn(&mut editor, &session, id, "go", |_| "allow_once").await;
        assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    }
    assert_eq!(
        (file(&editor, "a.txt").as_deref(), file(&editor, "b.txt").as_deref()),
        (Some("two\n"), Some("bee\n"))
    );

    let params = json!({ "sessionId": session, "turn": 1 });
    let (seen, answer) = request(&mut editor, "rw", "_heron/session/rewind", params, |_| "allow_once").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let requests = asked(&seen);
    assert_eq!(requests.len(), 2, "one request per file");
    let a = requests.iter().find(|r| title(r).contains("a.txt")).expect("a.txt is asked about");
    let diff = &a["params"]["toolCall"]["content"][0];
    assert_eq!((diff["oldText"].as_str(), diff["newText"].as_str()), (Some("two\n"), Some("one\n")), "{a}");
    assert_eq!(file(&editor, "a.txt").as_deref(), Some("one\n"));
    assert_eq!(file(&editor, "b.txt"), None, "made after turn 1: removed");
    let summary = answer["result"]["summary"].as_str().unwrap_or_default();
    assert!(summary.contains("Rewound the files to the end of turn 1 (of 2)"), "{answer}");
    assert_eq!(summary, said(&seen), "the answer repeats the streamed message");

    // Past the finished turns: said, nothing changed, nothing asked.
    let params = json!({ "sessionId": session, "turn": 9 });
    let (seen, answer) = request(&mut editor, "far", "_heron/session/rewind", params, |_| "allow_once").await;
    assert!(asked(&seen).is_empty(), "{seen:?}");
    let summary = answer["result"]["summary"].as_str().unwrap_or_default();
    assert!(summary.starts_with("Nothing was rewound"), "{answer}");
    assert_eq!(file(&editor, "a.txt").as_deref(), Some("one\n"));
    editor.close().await;
}
