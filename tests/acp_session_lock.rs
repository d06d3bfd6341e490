//! A session is open in one process at a time: a second `heron acp` on the same HERON_HOME
//! is refused the session the first has open (-32002, `data.code` `session.open_elsewhere`)
//! for loading and for prompts, and may open it once the first has exited.

use crate::support::{self, Process};
use serde_json::{Value, json};

fn assert_open_elsewhere(answer: &Value, session: &str) {
    let error = &answer["error"];
    assert_eq!(error["code"], -32002, "{answer}");
    assert_eq!(error["data"]["code"], "session.open_elsewhere", "{answer}");
    assert_eq!(error["data"]["sessionId"], session, "{answer}");
}

#[test]
fn a_session_open_in_one_process_is_refused_in_another_until_the_first_exits() {
    let dirs = support::Dirs::new();
    let mut first = Process::spawn(&dirs.home(), &["--model", "demo/demo"]);
    let session = first.new_session(&dirs.ws());
    let mut second = Process::spawn(&dirs.home(), &["--model", "demo/demo"]);
    second.request(json!(0), "initialize", json!({ "protocolVersion": 1 }));
    let load = json!({ "sessionId": session, "cwd": dirs.ws(), "mcpServers": [] });

    let loaded = second.request(json!(1), "session/load", load.clone());
    assert_open_elsewhere(&loaded, &session);
    let prompt = json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "hello" }] });
    let prompted = second.request(json!(2), "session/prompt", prompt);
    assert_open_elsewhere(&prompted, &session);

    first.close_input();
    assert!(first.exited_within(support::PROCESS_WAIT).is_some(), "the first exits at EOF");
    let loaded = second.request(json!(3), "session/load", load);
    assert!(loaded["result"].is_object(), "the session opens once the first is gone: {loaded}");
}

/// The ids `session/list` answers.
fn listed(process: &mut Process, id: u64) -> Vec<String> {
    let answer = process.request(json!(id), "session/list", json!({}));
    let sessions = answer["result"]["sessions"].as_array().cloned().unwrap_or_default();
    sessions.iter().filter_map(|s| s["sessionId"].as_str().map(str::to_owned)).collect()
}

#[test]
fn a_session_open_in_one_process_cannot_be_deleted_from_another() {
    let dirs = support::Dirs::new();
    let mut first = Process::spawn(&dirs.home(), &["--model", "demo/demo"]);
    let session = first.new_session(&dirs.ws());
    let kept = first.new_session(&dirs.ws());
    let mut second = Process::spawn(&dirs.home(), &["--model", "demo/demo"]);
    second.request(json!(0), "initialize", json!({ "protocolVersion": 1 }));

    let deleted = second.request(json!(1), "session/delete", json!({ "sessionId": session }));
    assert_open_elsewhere(&deleted, &session);
    let ids = listed(&mut second, 2);
    assert!(ids.contains(&session) && ids.contains(&kept), "both sessions are kept: {ids:?}");

    // An unknown id is still nothing to delete, and deletes nothing else.
    let unknown = json!({ "sessionId": "00000000-0000-0000-0000-000000000000" });
    let deleted = second.request(json!(3), "session/delete", unknown);
    assert!(deleted["result"].is_object(), "{deleted}");
    assert_eq!(listed(&mut second, 4).len(), 2);

    // Once the first has exited, the session is whole, and the second's to delete.
    first.close_input();
    assert!(first.exited_within(support::PROCESS_WAIT).is_some(), "the first exits at EOF");
    let load = json!({ "sessionId": session, "cwd": dirs.ws(), "mcpServers": [] });
    let loaded = second.request(json!(5), "session/load", load);
    assert!(loaded["result"].is_object(), "{loaded}");
    let deleted = second.request(json!(6), "session/delete", json!({ "sessionId": session }));
    assert!(deleted["result"].is_object(), "{deleted}");
    assert_eq!(listed(&mut second, 7), vec![kept]);
}
