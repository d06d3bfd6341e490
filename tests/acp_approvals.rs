//! Approvals the user can judge, over the protocol: the permission request carries the
//! whole call (title, kind, resolved locations, arguments, and the diff or the command),
//! the pending card shows the diff before the question, and what runs is what was shown.

use serde_json::{Value, json};

use crate::support::turns::{
    final_status, new_session, prompt_answering, prompt_replying, requests, select, start, written,
};
use crate::support::{self, update_kind};

/// One `edit_file` call on `notes.txt`, then a closing message.
const EDIT: &str = r#"{"steps":[{"tool_call":{"name":"edit_file","arguments":{"path":"notes.txt","old_string":"two","new_string":"TWO"}}}]}
{"steps":[{"text":"Done."}]}
"#;

fn ws_file(editor: &support::Editor, name: &str) -> std::path::PathBuf {
    std::path::Path::new(&editor.dirs.ws()).join(name)
}

/// The diff content of a message's tool call (a request's `toolCall`, or an update).
fn diff_of(call: &Value) -> Option<&Value> {
    call["content"].as_array()?.iter().find(|c| c["type"] == "diff")
}

#[tokio::test]
async fn an_edit_asks_with_the_whole_call_and_its_diff_before_anything_is_written() {
    let mut editor = start(EDIT, "", support::demo_args());
    let file = ws_file(&editor, "notes.txt");
    std::fs::write(&file, "one\ntwo\nthree\n").expect("write");
    let sid = new_session(&mut editor, json!({})).await;
    let mut on_disk_when_asked = None;
    let (seen, answer) = prompt_answering(&mut editor, &sid, |_| {
        on_disk_when_asked = std::fs::read_to_string(&file).ok();
        Some(select("allow_once"))
    })
    .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let asked = requests(&seen, "session/request_permission");
    assert_eq!(asked.len(), 1);
    let call = &asked[0]["params"]["toolCall"];
    assert_eq!(call["toolCallId"], "call_0_0");
    assert_eq!(call["name"], "edit_file");
    assert_eq!(call["title"], "Edit notes.txt");
    assert_eq!(call["kind"], "edit");
    assert_eq!(call["locations"], json!([{ "path": file.display().to_string() }]));
    assert_eq!(call["rawInput"]["old_string"], "two");
    let diff = diff_of(call).unwrap_or_else(|| panic!("no diff in {call}"));
    assert_eq!(diff["path"], file.display().to_string());
    assert_eq!(diff["oldText"], "one\ntwo\nthree\n");
    assert_eq!(diff["newText"], "one\nTWO\nthree\n", "exactly what will be written");
    assert_eq!(on_disk_when_asked.as_deref(), Some("one\ntwo\nthree\n"), "asked before writing");
    // The card showed the diff before the question went out.
    let at = |pred: &dyn Fn(&Value) -> bool| seen.iter().position(pred);
    let shown =
        at(&|m| update_kind(m) == Some("tool_call_update") && diff_of(&m["params"]["update"]).is_some())
            .expect("a pending update with the diff");
    assert_eq!(seen[shown]["params"]["update"]["status"], "pending");
    let question = at(&|m| m["method"] == "session/request_permission").expect("asked");
    assert!(shown < question, "diff at {shown}, question at {question}");
    assert_eq!(written(&editor, "notes.txt").as_deref(), Some("one\nTWO\nthree\n"));
    editor.close().await;
}

#[tokio::test]
async fn a_rejected_edit_leaves_the_file_untouched_and_fails_the_call() {
    let mut editor = start(EDIT, "", support::demo_args());
    std::fs::write(ws_file(&editor, "notes.txt"), "one\ntwo\n").expect("write");
    let sid = new_session(&mut editor, json!({})).await;
    let (seen, _) = prompt_answering(&mut editor, &sid, |_| Some(select("reject_once"))).await;
    assert_eq!(final_status(&seen).as_deref(), Some("failed"));
    assert_eq!(written(&editor, "notes.txt").as_deref(), Some("one\ntwo\n"));
    editor.close().await;
}

#[tokio::test]
async fn a_file_changed_while_the_user_decided_is_not_overwritten_with_a_stale_diff() {
    let mut editor = start(EDIT, "", support::demo_args());
    let file = ws_file(&editor, "notes.txt");
    std::fs::write(&file, "one\ntwo\n").expect("write");
    let sid = new_session(&mut editor, json!({})).await;
    let (seen, _) = prompt_answering(&mut editor, &sid, |_| {
        // The user (or their formatter) changes the file while the question is open.
        std::fs::write(&file, "one\ntwo\nadded meanwhile\n").expect("write");
        Some(select("allow_once"))
    })
    .await;
    assert_eq!(final_status(&seen).as_deref(), Some("failed"));
    let said = serde_json::to_string(&seen).expect("json");
    assert!(said.contains("changed after the change was shown for approval"), "{said}");
    assert_eq!(written(&editor, "notes.txt").as_deref(), Some("one\ntwo\nadded meanwhile\n"));
    editor.close().await;
}

#[tokio::test]
async fn an_edit_that_cannot_apply_fails_without_asking() {
    let mut editor = start(EDIT, "", support::demo_args());
    std::fs::write(ws_file(&editor, "notes.txt"), "no match here\n").expect("write");
    let sid = new_session(&mut editor, json!({})).await;
    let (seen, _) = prompt_answering(&mut editor, &sid, |_| Some(select("allow_once"))).await;
    assert!(requests(&seen, "session/request_permission").is_empty(), "nothing to approve");
    assert_eq!(final_status(&seen).as_deref(), Some("failed"));
    editor.close().await;
}

#[tokio::test]
async fn a_command_asks_with_its_line_and_its_cwd() {
    let script = r#"{"steps":[{"tool_call":{"name":"run_command","arguments":{"command":"echo hi && echo there"}}}]}
{"steps":[{"text":"Done."}]}
"#;
    let mut editor = start(script, "", support::demo_args());
    let sid = new_session(&mut editor, json!({})).await;
    let (seen, _) = prompt_answering(&mut editor, &sid, |_| Some(select("reject_once"))).await;
    let asked = requests(&seen, "session/request_permission");
    let call = &asked.first().expect("asked")["params"]["toolCall"];
    assert_eq!(call["kind"], "execute");
    assert_eq!(call["title"], "Run echo hi && echo there");
    assert_eq!(call["rawInput"]["command"], "echo hi && echo there");
    let text = call["content"][0]["content"]["text"].as_str().unwrap_or_default();
    assert!(text.contains("echo hi && echo there") && text.contains(&editor.dirs.ws()), "{call}");
    editor.close().await;
}

/// Each shape an editor's error comes in: a plain message, and the TypeScript SDK's answer to
/// a thrown error ("Internal error" with the text in `data.details`); and each request it can
/// fail: a write, a read for `read_file`, a read before a change, creating a terminal.
#[tokio::test]
async fn an_error_the_editor_gives_reaches_the_model_with_its_message() {
    for error in [
        json!({ "code": -32603, "message": "disk full (client says)" }),
        json!({ "code": -32603, "message": "Internal error", "data": { "details": "disk full (client says)" } }),
    ] {
        editor_write_fails_with(error.clone()).await;
        editor_read_for_view_fails_with(error.clone()).await;
        editor_read_for_change_fails_with(error.clone()).await;
        editor_terminal_fails_with(error).await;
    }
}

/// What the model was told about each tool call, from the session's transcript.
fn told_the_model(answer: &Value) -> Vec<String> {
    let path = answer["result"]["_meta"]["heron"]["transcriptPath"].as_str().expect("a transcript path");
    std::fs::read_to_string(path)
        .expect("the transcript")
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("JSON"))
        .filter(|event| event["kind"] == "tool_result")
        .map(|event| event["for_model"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// A session whose model makes `call` (a tool call step), then says it is done, with the
/// editor offering `capabilities`; every approval is given.
async fn one_call(call: Value, capabilities: Value) -> (support::Editor, String) {
    let script = format!(
        "{}\n{}\n",
        json!({ "steps": [{ "tool_call": call }] }),
        json!({ "steps": [{ "text": "Done." }] })
    );
    let args = heron::cli::acp::AcpArgs {
        permission_mode: Some("bypassPermissions".into()),
        ..support::demo_args()
    };
    let mut editor = start(&script, "", args);
    let sid = new_session(&mut editor, capabilities).await;
    (editor, sid)
}

async fn editor_write_fails_with(error: Value) {
    let call = json!({ "name": "write_file", "arguments": { "path": "note.txt", "content": "hello\n" } });
    let (mut editor, sid) =
        one_call(call, json!({ "fs": { "readTextFile": true, "writeTextFile": true } })).await;
    let (seen, answer) = prompt_replying(&mut editor, &sid, |request| {
        (request["method"] == "fs/write_text_file").then(|| json!({ "error": error.clone() }))
    })
    .await;
    assert_eq!(final_status(&seen).as_deref(), Some("failed"));
    let said = serde_json::to_string(&seen).expect("json");
    assert!(said.contains("disk full (client says)"), "{said}");
    let told = told_the_model(&answer);
    assert!(
        told[0].contains("the editor could not write") && told[0].contains("disk full (client says)"),
        "{told:?}"
    );
    editor.close().await;
}

/// `read_file` shows the disk copy when the editor cannot read, and says so: the model reads
/// the editor's message and that an unsaved buffer may differ.
async fn editor_read_for_view_fails_with(error: Value) {
    let call = json!({ "name": "read_file", "arguments": { "path": "notes.txt" } });
    let (mut editor, sid) = one_call(call, json!({ "fs": { "readTextFile": true } })).await;
    let file = ws_file(&editor, "notes.txt");
    std::fs::write(&file, "saved text\n").expect("write");
    let (seen, answer) = prompt_replying(&mut editor, &sid, |request| {
        (request["method"] == "fs/read_text_file").then(|| json!({ "error": error.clone() }))
    })
    .await;
    assert_eq!(requests(&seen, "fs/read_text_file").len(), 1, "the editor was asked first");
    assert_eq!(final_status(&seen).as_deref(), Some("completed"));
    let told = told_the_model(&answer);
    let expected = format!("the editor could not read {}: ", file.display());
    assert!(told[0].contains(&expected) && told[0].contains("disk full (client says)"), "{told:?}");
    assert!(told[0].contains("copy saved on disk") && told[0].contains("saved text"), "{told:?}");
    let said = serde_json::to_string(&seen).expect("json");
    assert!(said.contains(&expected), "the user sees it too: {said}");
    editor.close().await;
}

/// A change is never worked out against the disk copy when the editor, which may hold
/// unsaved text, cannot read the file: nothing is asked, nothing is written.
async fn editor_read_for_change_fails_with(error: Value) {
    let call = json!({ "name": "edit_file", "arguments": { "path": "notes.txt", "old_string": "two", "new_string": "TWO" } });
    let (mut editor, sid) =
        one_call(call, json!({ "fs": { "readTextFile": true, "writeTextFile": true } })).await;
    let file = ws_file(&editor, "notes.txt");
    std::fs::write(&file, "one\ntwo\n").expect("write");
    let (seen, answer) = prompt_replying(&mut editor, &sid, |request| {
        (request["method"] == "fs/read_text_file").then(|| json!({ "error": error.clone() }))
    })
    .await;
    assert_eq!(final_status(&seen).as_deref(), Some("failed"));
    assert!(requests(&seen, "fs/write_text_file").is_empty(), "nothing was written through the editor");
    assert_eq!(std::fs::read_to_string(&file).expect("read"), "one\ntwo\n", "nor on disk");
    let told = told_the_model(&answer);
    let expected = format!("the editor could not read {}: ", file.display());
    assert!(told[0].contains(&expected) && told[0].contains("disk full (client says)"), "{told:?}");
    assert!(told[0].contains("Nothing was changed"), "{told:?}");
    editor.close().await;
}

async fn editor_terminal_fails_with(error: Value) {
    let call = json!({ "name": "run_command", "arguments": { "command": "echo hi" } });
    let (mut editor, sid) = one_call(call, json!({ "terminal": true })).await;
    let (seen, answer) = prompt_replying(&mut editor, &sid, |request| {
        (request["method"] == "terminal/create").then(|| json!({ "error": error.clone() }))
    })
    .await;
    assert_eq!(final_status(&seen).as_deref(), Some("failed"));
    let told = told_the_model(&answer);
    assert!(
        told[0].contains("the editor could not start the command")
            && told[0].contains("disk full (client says)"),
        "{told:?}"
    );
    editor.close().await;
}

#[tokio::test]
async fn a_read_outside_the_roots_asks_naming_the_resolved_target_not_the_link() {
    let script = r#"{"steps":[{"tool_call":{"name":"read_file","arguments":{"path":"shortcut.txt"}}}]}
{"steps":[{"text":"Done."}]}
"#;
    let mut editor = start(script, "", support::demo_args());
    let outside = tempfile::tempdir().expect("outside");
    let target = std::fs::canonicalize(outside.path()).expect("canonical").join("elsewhere.txt");
    std::fs::write(&target, "far away\n").expect("write");
    std::os::unix::fs::symlink(&target, ws_file(&editor, "shortcut.txt")).expect("link");
    let sid = new_session(&mut editor, json!({})).await;
    let (seen, _) = prompt_answering(&mut editor, &sid, |_| Some(select("reject_once"))).await;
    let asked = requests(&seen, "session/request_permission");
    let call = &asked.first().expect("an outside read asks")["params"]["toolCall"];
    let shown = target.display().to_string();
    assert_eq!(call["title"], format!("Read {shown}"), "{call}");
    assert_eq!(call["locations"], json!([{ "path": shown }]), "{call}");
    assert_eq!(final_status(&seen).as_deref(), Some("failed"), "rejected, so not read");
    editor.close().await;
}

/// A file that does not exist is not asked of the editor, not even to work out the diff the
/// question shows (acpx printed every such miss as an error); the diff says `oldText: null`.
#[tokio::test]
async fn creating_a_file_through_the_editor_reads_nothing_and_diffs_against_null() {
    let script = r#"{"steps":[{"tool_call":{"name":"write_file","arguments":{"path":"fresh.txt","content":"new\n"}}}]}
{"steps":[{"text":"Done."}]}
"#;
    let mut editor = start(script, "", support::demo_args());
    let sid =
        new_session(&mut editor, json!({ "fs": { "readTextFile": true, "writeTextFile": true } })).await;
    let (seen, answer) = prompt_answering(&mut editor, &sid, |request| match request["method"].as_str() {
        Some("fs/write_text_file") => Some(json!({})),
        Some("session/request_permission") => Some(select("allow_once")),
        _ => None,
    })
    .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let reads = requests(&seen, "fs/read_text_file");
    assert!(reads.is_empty(), "a new file is not read through the editor: {reads:?}");
    assert_eq!(requests(&seen, "fs/write_text_file").len(), 1);
    let asked = requests(&seen, "session/request_permission");
    let diff = diff_of(&asked.first().expect("asked")["params"]["toolCall"]).expect("the diff");
    let diff = diff.as_object().expect("an object");
    assert_eq!(diff.get("oldText"), Some(&Value::Null), "oldText is there, and null: {diff:?}");
    assert_eq!(diff.get("newText"), Some(&json!("new\n")));
    editor.close().await;
}

/// ACP tells a client to answer its open permission requests `cancelled` after it sends
/// `session/cancel`; Heron has withdrawn the request by then, and the late answer is
/// expected, not a warning in the editor's log.
#[test]
fn a_late_cancelled_answer_after_session_cancel_logs_no_warning() {
    let script = r#"{"steps":[{"tool_call":{"name":"write_file","arguments":{"path":"note.txt","content":"hello\n"}}}]}
{"steps":[{"text":"Done."}]}
"#;
    let dirs = support::scripted_home("t", "", script);
    let mut heron = support::Launch::acp(&dirs.home(), &["--model", "t/m"]).capture_stderr().start();
    let sid = heron.new_session(&dirs.ws());
    let prompt = json!({ "sessionId": sid, "prompt": [{ "type": "text", "text": "go" }] });
    heron.send(json!({ "jsonrpc": "2.0", "id": "p", "method": "session/prompt", "params": prompt }));
    let asked = loop {
        let message = heron.next();
        if message["method"] == "session/request_permission" {
            break message["id"].clone();
        }
    };
    heron.send(json!({ "jsonrpc": "2.0", "method": "session/cancel", "params": { "sessionId": sid } }));
    loop {
        let message = heron.next();
        if message["id"] == "p" && message.get("method").is_none() {
            assert_eq!(message["result"]["stopReason"], "cancelled", "{message}");
            break;
        }
    }
    heron.send(json!({ "jsonrpc": "2.0", "id": asked, "result": { "outcome": { "outcome": "cancelled" } } }));
    // Answered after the late answer was read: it has been dealt with by then.
    let listed = heron.request(json!("list"), "session/list", json!({}));
    assert!(listed["result"]["sessions"].is_array(), "{listed}");
    let logged = heron.finish(std::time::Duration::from_secs(10)).stderr;
    assert!(!logged.contains("WARN"), "the late answer was logged as a warning:\n{logged}");
    assert!(!written_in(&dirs.ws(), "note.txt"), "the cancelled write did not run");
}

fn written_in(ws: &str, name: &str) -> bool {
    std::path::Path::new(ws).join(name).exists()
}
