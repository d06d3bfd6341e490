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
/// a thrown error ("Internal error" with the text in `data.details`).
#[tokio::test]
async fn an_error_the_editor_gives_reaches_the_model_with_its_message() {
    for error in [
        json!({ "code": -32603, "message": "disk full (client says)" }),
        json!({ "code": -32603, "message": "Internal error", "data": { "details": "disk full (client says)" } }),
    ] {
        editor_write_fails_with(error).await;
    }
}

async fn editor_write_fails_with(error: Value) {
    let script = r#"{"steps":[{"tool_call":{"name":"write_file","arguments":{"path":"note.txt","content":"hello\n"}}}]}
{"steps":[{"text":"Done."}]}
"#;
    let args = heron::cli::acp::AcpArgs {
        permission_mode: Some("bypassPermissions".into()),
        ..support::demo_args()
    };
    let mut editor = start(script, "", args);
    let sid =
        new_session(&mut editor, json!({ "fs": { "readTextFile": true, "writeTextFile": true } })).await;
    let (seen, _) = prompt_replying(&mut editor, &sid, |request| {
        (request["method"] == "fs/write_text_file").then(|| json!({ "error": error.clone() }))
    })
    .await;
    assert_eq!(final_status(&seen).as_deref(), Some("failed"));
    let said = serde_json::to_string(&seen).expect("json");
    assert!(said.contains("disk full (client says)"), "{said}");
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
