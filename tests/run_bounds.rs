//! `heron run`'s bounds on the agent it drives, over the real binary and the scripted fake
//! agent: a message line past the client's limit, more requests at once than it handles,
//! and a file larger than it reads for the agent.

use serde_json::{Value, json};

use crate::support::Dirs;
use crate::support::run::{Run, error_of, run_fake};

/// The client's bounds (`crates/heron-client/src/lib.rs`, `files.rs`), as the agent sees them.
const MAX_LINE_BYTES: usize = 32 * 1024 * 1024;
const MAX_IN_FLIGHT: usize = 64;
const MAX_READ_BYTES: u64 = 16 * 1024 * 1024;

fn read(path: &str) -> Value {
    json!(["call", "fs/read_text_file", {"sessionId": "$SESSION", "path": path}])
}

#[test]
fn an_agent_line_past_the_limit_is_refused_and_the_next_one_is_served() {
    let dirs = Dirs::new();
    std::fs::write(dirs.ws_path().join("a.txt"), "after").expect("fixture");
    let plan = json!({"steps": [["long_line", MAX_LINE_BYTES + 1], read(&dirs.at("a.txt"))]});
    let finished = run_fake(&dirs, &plan, "");
    assert!(finished.status.success(), "{finished:?}");
    let received: Vec<Value> = dirs.events("received").into_iter().map(|e| e["message"].clone()).collect();
    let refusal = received.iter().find(|m| m["error"]["code"] == -32600).expect("the line is refused");
    assert_eq!(refusal["id"], Value::Null, "{refusal}");
    assert_eq!(refusal["error"]["data"]["maxLineBytes"], MAX_LINE_BYTES, "{refusal}");
    assert_eq!(received.iter().filter(|m| m["error"]["code"] == -32600).count(), 1, "once: {received:?}");
    let replies = dirs.replies();
    assert_eq!(replies[0]["result"]["content"], "after", "the next line is served: {replies:?}");
}

#[test]
fn past_the_in_flight_limit_the_agents_next_request_waits_for_one_to_end() {
    let dirs = Dirs::new();
    std::fs::write(dirs.ws_path().join("a.txt"), "read").expect("fixture");
    let options = json!([{"optionId": "ok", "name": "Allow", "kind": "allow_once"},
        {"optionId": "no", "name": "Reject", "kind": "reject_once"}]);
    // Questions wait for the user, so they hold every slot; the read comes after them.
    let mut requests: Vec<Value> = (0..MAX_IN_FLIGHT)
        .map(|i| {
            json!(["session/request_permission", {"sessionId": "$SESSION",
                "toolCall": {"toolCallId": format!("c{i}")}, "options": options}])
        })
        .collect();
    requests.push(json!(["fs/read_text_file", {"sessionId": "$SESSION", "path": dirs.at("a.txt")}]));
    let agent = dirs.fake_agent(&json!({"steps": [["burst", requests]]}));
    let mut run = Run::start(&dirs, &["--agent", &agent, "go"], "");
    dirs.wait_for("sent_all");
    // Answering one question frees one slot: only then is the read taken.
    run.type_line("n");
    let finished = run.finish();
    assert!(finished.status.success(), "{finished:?}");
    let replies = dirs.events("reply");
    assert_eq!(replies.len(), MAX_IN_FLIGHT + 1, "every request is answered: {replies:?}");
    assert_eq!(replies[0]["method"], "session/request_permission", "{:?}", replies[0]);
    assert_eq!(replies[0]["reply"]["result"]["outcome"]["optionId"], "no", "{:?}", replies[0]);
    let read = replies.iter().find(|r| r["method"] == "fs/read_text_file").expect("the read is answered");
    assert_eq!(read["reply"]["result"]["content"], "read", "{read}");
}

#[test]
fn a_file_past_the_read_limit_is_refused_naming_the_limit() {
    let dirs = Dirs::new();
    // Sparse: as large as asked, without writing it.
    let large = std::fs::File::create(dirs.ws_path().join("large.txt")).expect("create");
    large.set_len(MAX_READ_BYTES + 1).expect("grow");
    std::fs::write(dirs.ws_path().join("small.txt"), "small").expect("fixture");
    let plan = json!({"steps": [read(&dirs.at("large.txt")), read(&dirs.at("small.txt"))]});
    let finished = run_fake(&dirs, &plan, "");
    assert!(finished.status.success(), "{finished:?}");
    let replies = dirs.replies();
    // Only the error is shown on failure: a file read by mistake would fill the report.
    let error = error_of(&replies[0]);
    assert_eq!(error["code"], -32602, "{error}");
    assert_eq!(error["data"]["path"], "path", "{error}");
    let reason = error["data"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains(&format!("larger than the {MAX_READ_BYTES} bytes")), "{reason}");
    assert_eq!(replies[1]["result"]["content"], "small", "the next read is served: {}", replies[1]);
}
