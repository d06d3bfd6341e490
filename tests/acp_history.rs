//! The bytes of history an open session holds, through the real binary with a budget a
//! test reaches (`--max-history-bytes`): a session whose history grew past it finishes its
//! turn and refuses the next prompt with -32602 `session.history_full`, the limit, the
//! size and the scope; closed, it is refused on loading the same way, its history kept;
//! and the connection serves on.

use serde_json::json;

use crate::support::{self, PROCESS_WAIT, Process};

#[test]
fn a_session_past_its_history_budget_is_refused_with_the_code_and_the_connection_serves_on() {
    let answer = format!("{}\n", json!({ "steps": [{ "text": "Noted, and answered." }] }));
    let dirs = support::scripted_home("s", "", &answer.repeat(4));
    let mut heron = Process::spawn(&dirs.home(), &["--model", "s/m", "--max-history-bytes", "200"]);
    let session = heron.new_session(&dirs.ws());
    let prompt = |heron: &mut Process, id: &str, session: &str| {
        heron.send_prompt(json!(id), session, "go on");
        heron.until_answer(&json!(id), |_, _| {})
    };
    let first = prompt(&mut heron, "first", &session);
    assert_eq!(first["result"]["stopReason"], "end_turn", "the turn that crosses the budget ends: {first}");

    let refused = prompt(&mut heron, "second", &session);
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let data = &refused["error"]["data"];
    assert_eq!(data["code"], "session.history_full", "{refused}");
    assert_eq!(data["limit"], 200, "{refused}");
    assert_eq!(data["scope"], "session", "{refused}");
    let size = data["size"].as_u64().unwrap_or_else(|| panic!("a size: {refused}"));
    assert!(size > 200, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("start a new session"), "the user is told what to do: {message}");

    // Closed, it does not open again here, and its stored history is untouched.
    let closed = heron.request(json!("close"), "session/close", json!({ "sessionId": session }));
    assert!(closed.get("result").is_some(), "{closed}");
    let load = json!({ "sessionId": session, "cwd": dirs.ws(), "mcpServers": [] });
    let reload = heron.request(json!("load"), "session/load", load);
    assert_eq!(reload["error"]["data"]["code"], "session.history_full", "{reload}");
    assert_eq!(reload["error"]["data"]["size"], size, "nothing was stored since: {reload}");

    // The connection serves on: a new session runs its prompt.
    let fresh = heron.request(json!("new2"), "session/new", json!({ "cwd": dirs.ws(), "mcpServers": [] }));
    let fresh = fresh["result"]["sessionId"].as_str().unwrap_or_else(|| panic!("{fresh}")).to_owned();
    let ran = prompt(&mut heron, "third", &fresh);
    assert_eq!(ran["result"]["stopReason"], "end_turn", "{ran}");
    heron.close_input();
    assert!(heron.exited_within(PROCESS_WAIT).is_some(), "heron exits on EOF");
}
