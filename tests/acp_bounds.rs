//! What one model reply's tool calls may cost, over the protocol: how many of them run,
//! how large an edit may make a file, how much of a diff is shown and stored, and how
//! many bytes their results hold together. Each bound fails what passes it with a message
//! the model reads, and never leaves a file half changed.

use serde_json::{Value, json};

use crate::support::turns::{final_status, new_session, prompt_answering, requests, select, start, written};
use crate::support::{self, update_kind};

const MIB: usize = 1024 * 1024;

fn yolo() -> heron::cli::acp::AcpArgs {
    heron::cli::acp::AcpArgs { permission_mode: Some("bypassPermissions".into()), ..support::demo_args() }
}

fn ws_file(editor: &support::Editor, name: &str) -> std::path::PathBuf {
    std::path::Path::new(&editor.dirs.ws()).join(name)
}

/// One step of the script making `calls`, then a closing message.
fn script(calls: &[Value]) -> String {
    let steps: Vec<Value> = calls.iter().map(|call| json!({ "tool_call": call })).collect();
    format!("{}\n{}\n", json!({ "steps": steps }), json!({ "steps": [{ "text": "Done." }] }))
}

/// The finished tool call updates, in order: (id, status, text of their content).
fn results(seen: &[Value]) -> Vec<(String, String, String)> {
    seen.iter()
        .filter(|m| update_kind(m) == Some("tool_call_update"))
        .map(|m| &m["params"]["update"])
        .filter(|u| u["status"] == "completed" || u["status"] == "failed")
        .map(|u| {
            let text: String = u["content"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["content"]["text"].as_str())
                .collect();
            let status = u["status"].as_str().unwrap_or_default().to_owned();
            (u["toolCallId"].as_str().unwrap_or_default().to_owned(), status, text)
        })
        .collect()
}

/// The diff content of a tool call (a request's `toolCall`, or an update).
fn diff_of(call: &Value) -> Option<&Value> {
    call["content"].as_array()?.iter().find(|c| c["type"] == "diff")
}

fn largest_message(seen: &[Value]) -> usize {
    seen.iter().map(|m| m.to_string().len()).max().unwrap_or(0)
}

#[tokio::test]
async fn a_replace_all_whose_result_would_pass_the_write_cap_fails_and_leaves_the_file() {
    let call = json!({ "name": "edit_file", "arguments": {
        "path": "f.txt", "old_string": "a", "new_string": "b".repeat(256), "replace_all": true } });
    let mut editor = start(&script(&[call]), "", yolo());
    let file = ws_file(&editor, "f.txt");
    std::fs::write(&file, "a".repeat(2 * MIB)).expect("write");
    let sid = new_session(&mut editor, json!({})).await;
    let (seen, answer) = prompt_answering(&mut editor, &sid, |_| None).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let results = results(&seen);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].1, "failed");
    assert!(results[0].2.contains("536870912 bytes") && results[0].2.contains("67108864"), "{results:?}");
    assert_eq!(std::fs::metadata(&file).map(|m| m.len()).ok(), Some(2 * MIB as u64), "unchanged");
    assert!(largest_message(&seen) < 64 * 1024, "{} bytes", largest_message(&seen));
    editor.close().await;
}

#[tokio::test]
async fn an_edit_of_a_large_file_asks_with_its_changed_lines_only_and_runs_as_shown() {
    // Two one-word edits, far apart, of a 6 MiB file: the question, the card and the result
    // show the two changed lines with their context, not the file twice.
    let first = json!({ "name": "edit_file", "arguments": {
        "path": "big.txt", "old_string": "line 100 of text\n", "new_string": "LINE 100\n" } });
    let second = json!({ "name": "edit_file", "arguments": {
        "path": "big.txt", "old_string": "line 400000 of text\n", "new_string": "LINE 400000\n" } });
    let mut editor = start(&script(&[first, second]), "", support::demo_args());
    let file = ws_file(&editor, "big.txt");
    let text: String = (0..420_000).map(|i| format!("line {i} of text\n")).collect();
    assert!(text.len() > 6 * MIB);
    std::fs::write(&file, &text).expect("write");
    let sid = new_session(&mut editor, json!({})).await;
    let (seen, answer) = prompt_answering(&mut editor, &sid, |_| Some(select("allow_once"))).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let asked = requests(&seen, "session/request_permission");
    assert_eq!(asked.len(), 2);
    let call = &asked[0]["params"]["toolCall"];
    let diff = diff_of(call).unwrap_or_else(|| panic!("no diff in {call}"));
    let (old, new) = (diff["oldText"].as_str().expect("old"), diff["newText"].as_str().expect("new"));
    assert!(old.len() + new.len() < 4096, "{} bytes shown", old.len() + new.len());
    assert!(old.contains("line 100 of text\n") && new.contains("LINE 100\n") && !new.contains("line 100 of"));
    assert!(old.contains("unchanged lines not shown"), "{old}");
    let notice = call["content"].to_string();
    assert!(notice.contains("only the changed lines are shown"), "{notice}");
    let edited =
        text.replace("line 100 of text\n", "LINE 100\n").replace("line 400000 of text\n", "LINE 400000\n");
    assert_eq!(written(&editor, "big.txt").as_deref(), Some(edited.as_str()), "both edits made");
    assert!(largest_message(&seen) < 64 * 1024, "{} bytes in one message", largest_message(&seen));
    // What the store keeps, replayed, is the clipped diff too.
    editor.ask(json!("close"), "session/close", json!({ "sessionId": sid })).await;
    let load = json!({ "sessionId": sid, "cwd": editor.dirs.ws(), "mcpServers": [] });
    editor.send_request(json!("load"), "session/load", load).await;
    let (replayed, loaded) = editor.until_answer(&json!("load")).await;
    assert!(loaded["result"].is_object(), "{loaded}");
    assert!(largest_message(&replayed) < 64 * 1024, "{} bytes replayed", largest_message(&replayed));
    editor.close().await;
}

#[tokio::test]
async fn a_change_too_large_to_show_is_not_asked_about_and_changes_nothing() {
    // Every one of 700,000 lines changes: 2.7 MiB of changed lines cannot be shown.
    let call = json!({ "name": "edit_file", "arguments": {
        "path": "f.txt", "old_string": "a", "new_string": "bb", "replace_all": true } });
    let mut editor = start(&script(&[call]), "", support::demo_args());
    let file = ws_file(&editor, "f.txt");
    let text = "a\n".repeat(700_000);
    std::fs::write(&file, &text).expect("write");
    let sid = new_session(&mut editor, json!({})).await;
    let (seen, answer) = prompt_answering(&mut editor, &sid, |_| Some(select("allow_once"))).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(requests(&seen, "session/request_permission").is_empty(), "not asked");
    assert_eq!(final_status(&seen).as_deref(), Some("failed"));
    let said = results(&seen)[0].2.clone();
    assert!(said.contains("too large to show for approval") && said.contains("smaller steps"), "{said}");
    assert_eq!(written(&editor, "f.txt").as_deref(), Some(text.as_str()), "unchanged");
    editor.close().await;
}

#[tokio::test]
async fn only_the_allowed_calls_of_a_reply_run_and_the_next_one_says_so() {
    let calls: Vec<Value> = (0..6)
        .map(
            |i| json!({ "name": "write_file", "arguments": { "path": format!("f{i}.txt"), "content": "x" } }),
        )
        .collect();
    let mut editor = start(&script(&calls), "max_tool_calls_per_reply = 3\n", yolo());
    let sid = new_session(&mut editor, json!({})).await;
    let (seen, answer) = prompt_answering(&mut editor, &sid, |_| None).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let results = results(&seen);
    let statuses: Vec<&str> = results.iter().map(|(_, status, _)| status.as_str()).collect();
    assert_eq!(statuses, ["completed", "completed", "completed", "failed"], "{results:?}");
    assert!(results[3].2.contains("more than 3 tool calls") && results[3].2.contains("did not run"));
    let made: Vec<bool> = (0..6).map(|i| written(&editor, &format!("f{i}.txt")).is_some()).collect();
    assert_eq!(made, [true, true, true, false, false, false]);
    let announced = seen.iter().filter(|m| update_kind(m) == Some("tool_call")).count();
    assert_eq!(announced, 4, "the calls after the one that failed were never read");
    editor.close().await;
}

#[tokio::test]
async fn the_results_of_one_reply_are_clipped_past_their_budget_with_a_note() {
    let read = json!({ "name": "read_file", "arguments": { "path": "f.txt" } });
    let mut editor =
        start(&script(&[read.clone(), read.clone(), read]), "max_tool_result_bytes = 40000\n", yolo());
    std::fs::write(ws_file(&editor, "f.txt"), "0123456789\n".repeat(1000)).expect("write");
    let sid = new_session(&mut editor, json!({})).await;
    let (seen, answer) = prompt_answering(&mut editor, &sid, |_| None).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let results = results(&seen);
    assert_eq!(results.len(), 3);
    assert!(!results[0].2.contains("max_tool_result_bytes"), "the first fits whole");
    for (_, status, text) in &results[1..] {
        assert_eq!(status, "completed");
        assert!(text.contains("are not shown") && text.contains("max_tool_result_bytes"), "{text}");
    }
    let shown: usize = results.iter().map(|(_, _, text)| text.len()).sum();
    assert!(shown < 40_000, "{shown} bytes shown");
    editor.close().await;
}

#[tokio::test]
async fn tool_call_arguments_count_toward_the_reply_cap() {
    let call = json!({ "name": "write_file", "arguments": { "path": "f.txt", "content": "y".repeat(5000) } });
    let mut editor = start(&script(&[call]), "max_reply_bytes = 4096\n", yolo());
    let sid = new_session(&mut editor, json!({})).await;
    let (_, answer) = prompt_answering(&mut editor, &sid, |_| None).await;
    assert_eq!(answer["result"]["stopReason"], "max_tokens", "{answer}");
    assert_eq!(written(&editor, "f.txt"), None, "the call of a cut reply does not run");
    editor.close().await;
}

/// A model that never stops calling tools is held to its preset's model requests: `light`
/// allows 8 in a turn, and the turn ends `max_turn_requests` after them.
#[tokio::test]
async fn a_model_that_never_stops_calling_tools_ends_at_its_presets_request_cap() {
    let list = json!({ "tool_call": { "name": "list_files", "arguments": { "path": "." } } });
    let line = json!({ "steps": [list] }).to_string();
    let script = format!("{}\n", vec![line; 20].join("\n"));
    let mut editor = start(&script, "", support::demo_args());
    let session = new_session(&mut editor, json!({})).await;
    let set = json!({ "sessionId": session, "configId": "agent_preset", "value": "light" });
    let chosen = editor.ask(json!("preset"), "session/set_config_option", set).await;
    assert!(chosen.get("result").is_some(), "{chosen}");
    let (seen, answer) = prompt_answering(&mut editor, &session, |_| Some(select("allow_once"))).await;
    assert_eq!(answer["result"]["stopReason"], "max_turn_requests", "{answer}");
    let calls = seen.iter().filter(|m| update_kind(m) == Some("tool_call")).count();
    assert_eq!(calls, 8, "one call per model request, and 8 requests");
}
