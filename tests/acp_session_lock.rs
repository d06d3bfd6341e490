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
