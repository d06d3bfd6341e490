//! Notices over the real binary, against a loopback model server that answers 503 once: the
//! retry is told as a `notice` while it waits to a client that advertised `session.notices`,
//! and as an agent message opening the session's next turn to one that did not. (An MCP
//! server that fails is in `conformance/notice_live.ndjson` and `notice_deferred.ndjson`.)

use serde_json::{Value, json};

use crate::support::server_mock::{Answer, MockServer, sse};
use crate::support::servers::{delta, finish};
use crate::support::{Dirs, Process};

/// A server whose first request is refused with 503, and whose every later one answers
/// `text`.
fn overloaded_once(text: &'static str) -> MockServer {
    MockServer::start(move |n, _| {
        if n == 0 {
            Answer::Status(503, json!({ "error": { "message": "the server is overloaded" } }).to_string())
        } else {
            Answer::Stream(sse(&[delta(json!({ "content": text })), finish("stop")]))
        }
    })
}

/// `heron acp` with its model at `server` (one retry allowed), initialized with
/// `capabilities`, and a session.
fn started(server: &MockServer, capabilities: Value) -> (Process, String, std::sync::Arc<Dirs>) {
    let dirs = Dirs::new();
    let config = format!(
        "default_model = \"net/m\"\n[providers.net]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodels = [\"m\"]\nmax_retries = 1\n",
        server.origin
    );
    dirs.write_home("config.toml", &config);
    let mut heron = Process::spawn(&dirs.home(), &[]);
    heron.request(
        json!(0),
        "initialize",
        json!({ "protocolVersion": 1, "clientCapabilities": capabilities }),
    );
    let answer = heron.request(json!(1), "session/new", json!({ "cwd": dirs.ws(), "mcpServers": [] }));
    let session = answer["result"]["sessionId"].as_str().unwrap_or_else(|| panic!("{answer}")).to_owned();
    (heron, session, dirs)
}

/// Prompts and returns every session update of the turn, and the answer.
fn turn(heron: &mut Process, session: &str, id: &str) -> (Vec<Value>, Value) {
    heron.send_prompt(json!(id), session, "Hello");
    let mut updates = Vec::new();
    loop {
        let message = heron.next();
        if message["id"] == id && message.get("method").is_none() {
            return (updates, message);
        }
        if message["method"] == "session/update" {
            updates.push(message["params"]["update"].clone());
        }
    }
}

fn kinds(updates: &[Value]) -> Vec<&str> {
    updates.iter().filter_map(|u| u["sessionUpdate"].as_str()).collect()
}

#[test]
fn a_retried_model_request_is_a_notice_while_it_waits_for_a_client_that_shows_notices() {
    let server = overloaded_once("Hello.");
    let (mut heron, session, _dirs) = started(&server, json!({ "session": { "notices": {} } }));
    let (updates, answer) = turn(&mut heron, &session, "p");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let at =
        updates.iter().position(|u| u["sessionUpdate"] == "notice").unwrap_or_else(|| panic!("{updates:?}"));
    let notice = &updates[at];
    assert_eq!(notice["severity"], "warning", "{notice}");
    let title = notice["title"].as_str().unwrap_or_default();
    assert!(
        title.starts_with("The model request failed; trying again in ")
            && title.ends_with("(attempt 2 of 2)"),
        "{title}"
    );
    assert!(notice["description"].as_str().is_some_and(|d| d.contains("503")), "{notice}");
    let answered =
        updates.iter().position(|u| u["content"]["text"] == "Hello.").expect("the answer streamed");
    assert!(at < answered, "told while it waited, before the retry answered: {:?}", kinds(&updates));
    assert_eq!(server.seen().len(), 2);
}

#[test]
fn without_notices_a_retry_opens_the_next_turn_as_an_agent_message_once() {
    let server = overloaded_once("Hello.");
    let (mut heron, session, _dirs) = started(&server, json!({}));
    let (first, answer) = turn(&mut heron, &session, "p1");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(!kinds(&first).contains(&"notice"), "a notice it did not ask for: {first:?}");
    let said = |updates: &[Value]| -> Vec<String> {
        updates
            .iter()
            .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
            .filter_map(|u| u["content"]["text"].as_str().map(str::to_owned))
            .collect()
    };
    assert_eq!(said(&first), ["Hello."], "the turn it happened in is left as it was");
    let (second, _) = turn(&mut heron, &session, "p2");
    let second_said = said(&second);
    assert!(
        second_said
            .first()
            .is_some_and(|text| text.starts_with("[Warning] The model request failed; trying again")),
        "{second_said:?}"
    );
    let (third, _) = turn(&mut heron, &session, "p3");
    assert_eq!(said(&third), ["Hello."], "once");
}
