//! The acp conformance profile, what ACP v1 asks of any agent: the format's `requires` (a
//! scenario the agent does not advertise is skipped) and `ignore` (messages an agent may send
//! anywhere) in memory.

use heron::conformance::Replayed;
use heron::conformance::format::requirement_met;
use serde_json::json;

use crate::conformance::replay_text;

const INITIALIZE: &str = concat!(
    r#"{"send": {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}}"#,
    "\n",
    r#"{"expect": {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1, "...": "..."}}}"#,
    "\n",
);

/// A scenario that loads a session once initialize is answered, if the agent advertises it.
fn needs_load_session() -> String {
    format!(
        "{}\n{INITIALIZE}{}\n{}\n",
        r#"{"scenario": "needs loadSession", "timeout_ms": 50, "requires": ["agentCapabilities.loadSession"]}"#,
        r#"{"send": {"jsonrpc": "2.0", "id": 1, "method": "session/load", "params": {}}}"#,
        r#"{"expect": {"jsonrpc": "2.0", "id": 1, "result": "{...}"}}"#,
    )
}

#[test]
fn a_scenario_the_agent_does_not_advertise_is_skipped_before_anything_more_is_sent() {
    let text = needs_load_session();
    // Nothing is canned for session/load: had it gone out, the replay would time out and fail.
    let refusing = r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":false}}}"#;
    assert_eq!(
        replay_text(&text, &[&[refusing]]).expect("skipped, not failed"),
        Replayed::Skipped("the agent does not advertise agentCapabilities.loadSession".into())
    );
    let silent = r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}"#;
    assert!(matches!(replay_text(&text, &[&[silent]]), Ok(Replayed::Skipped(_))), "absent counts as not");
    let serving = r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}"#;
    let loaded = r#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
    assert_eq!(replay_text(&text, &[&[serving], &[loaded]]).expect("runs"), Replayed::Passed);
}

#[test]
fn requirements_read_empty_objects_as_advertised_and_bang_as_must_not() {
    let init = json!({ "agentCapabilities": { "loadSession": false, "sessionCapabilities": { "list": {} } } });
    assert!(requirement_met("agentCapabilities.sessionCapabilities.list", &init));
    assert!(!requirement_met("agentCapabilities.sessionCapabilities.close", &init));
    assert!(!requirement_met("agentCapabilities.loadSession", &init));
    assert!(requirement_met("!agentCapabilities.loadSession", &init));
    assert!(!requirement_met("!agentCapabilities.sessionCapabilities.list", &init));
}

#[test]
fn a_header_requiring_what_no_initialize_answered_fails() {
    let text = format!(
        "{}\n{}\n{}\n",
        r#"{"scenario": "no initialize", "timeout_ms": 50, "requires": ["agentCapabilities.loadSession"]}"#,
        r#"{"send": {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {}}}"#,
        r#"{"expect": {"jsonrpc": "2.0", "id": 1, "result": "{...}"}}"#,
    );
    let failure = replay_text(&text, &[&[r#"{"jsonrpc":"2.0","id":1,"result":{}}"#]]).expect_err("unknowable");
    assert!(failure.summary.contains("no `initialize` request"), "{failure}");
}

#[test]
fn ignored_messages_are_passed_over_anywhere_and_others_still_fail() {
    let text = format!(
        "{}\n{}\n{}\n{}\n{}\n",
        r#"{"scenario": "an agent's own updates", "timeout_ms": 50, "ignore": [{"jsonrpc": "2.0", "method": "session/update", "params": "{...}"}]}"#,
        r#"{"send": {"jsonrpc": "2.0", "id": 1, "method": "session/prompt", "params": {}}}"#,
        r#"{"expect": {"jsonrpc": "2.0", "method": "session/update", "params": {"update": {"text": "wanted"}}}}"#,
        r#"{"expect": {"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "$ANY_STRING"}}}"#,
        r#"{"send": {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {}}}"#,
    );
    let update = |text: &str| {
        format!(r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"update":{{"text":"{text}"}}}}}}"#)
    };
    let (other, wanted) = (update("other"), update("wanted"));
    let answer = r#"{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}"#;
    // Before, between and after the expectations; an ignored kind is still matched when expected.
    let passes = replay_text(&text, &[&[&other, &wanted, &other, answer], &[&other]]);
    assert_eq!(passes.expect("the updates are passed over"), Replayed::Passed);
    let notice = r#"{"jsonrpc":"2.0","method":"_x/notice","params":{}}"#;
    let failure = replay_text(&text, &[&[notice, &wanted, answer], &[]]).expect_err("not ignored");
    assert!(failure.summary.contains("does not match"), "{failure}");
    let failure = replay_text(&text, &[&[&wanted, answer], &[notice]]).expect_err("not ignored");
    assert!(failure.summary.contains("does not expect"), "{failure}");
}
