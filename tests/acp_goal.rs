//! Goal mode over ACP, end to end: continuations until the model calls `finish_goal`, the
//! continuation cap, `_heron/session/goal/pause` mid-goal and `resume`, their errors, and
//! the goal kept across a restart.

use crate::support;
use std::sync::Arc;

use crate::support::{Dirs, Editor, update_kind};
use heron::cli::acp::AcpArgs;
use serde_json::{Value, json};

/// Two steps, then `finish_goal`, then a closing word.
const FINISHES: &str = r#"{"steps": [{"text": "Step one."}]}
{"steps": [{"text": "Step two."}]}
{"steps": [{"tool_call": {"name": "finish_goal", "arguments": {"status": "completed", "summary": "Both steps done."}}}]}
{"steps": [{"text": "All done."}]}
"#;

/// A model that never finishes.
const ENDLESS: &str = r#"{"steps": [{"text": "a"}]}
{"steps": [{"text": "b"}]}
{"steps": [{"text": "c"}]}
{"steps": [{"text": "d"}]}
{"steps": [{"text": "e"}]}
{"steps": [{"text": "f"}]}
"#;

/// A first step that takes a while and calls a tool, so a pause lands mid-step.
const SLOW_STEP: &str = r#"{"steps": [{"text": "Working"}, {"delay_ms": 800}, {"tool_call": {"name": "todo_write", "arguments": {"todos": [{"content": "Do it", "status": "in_progress"}]}}}]}
{"steps": [{"text": "Next step."}]}
{"steps": [{"text": "Another step."}]}
{"steps": [{"text": "And another."}]}
"#;

fn dirs(script: &str, config: &str) -> Arc<Dirs> {
    support::scripted_home("g", config, script)
}

fn args() -> AcpArgs {
    support::scripted_args("g")
}

/// A session in goal mode, on a fresh agent playing `script`.
async fn goal_session(script: &str, config: &str) -> (Editor, String) {
    let mut editor = support::start_in(args(), dirs(script, config));
    let session = editor.new_session().await;
    let answer = editor
        .ask(json!("mode"), "session/set_mode", json!({ "sessionId": session, "modeId": "goal" }))
        .await;
    assert!(answer["result"].is_object(), "{answer}");
    (editor, session)
}

async fn status(editor: &mut Editor, session: &str) -> Value {
    let answer = editor.ask(json!("status"), "_heron/session/status", json!({ "sessionId": session })).await;
    answer["result"]["status"].clone()
}

/// The `goalContinuation` numbers of the continuation messages among `messages`.
fn continuations(messages: &[Value]) -> Vec<u64> {
    messages
        .iter()
        .filter(|m| update_kind(m) == Some("user_message_chunk"))
        .filter_map(|m| m["params"]["update"]["_meta"]["heron"]["goalContinuation"].as_u64())
        .collect()
}

/// The agent's streamed text, joined.
fn agent_text(messages: &[Value]) -> String {
    messages
        .iter()
        .filter(|m| update_kind(m) == Some("agent_message_chunk"))
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect()
}

#[tokio::test]
async fn goal_mode_continues_until_the_model_calls_finish_goal() {
    let (mut editor, session) = goal_session(FINISHES, "").await;
    let (before, answer) = editor.prompt(json!("p"), &session, "Do both steps").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(continuations(&before), [1, 2]);
    assert_eq!(agent_text(&before), "Step one.Step two.All done.");
    let call = before
        .iter()
        .find(|m| update_kind(m) == Some("tool_call"))
        .unwrap_or_else(|| panic!("no finish_goal call: {before:#?}"));
    assert_eq!(call["params"]["update"]["kind"], "think");
    let goal = &status(&mut editor, &session).await["goal"];
    assert_eq!(goal["objective"], "Do both steps");
    assert_eq!(goal["status"], "completed");
    assert_eq!(goal["continuationCount"], 2);
    editor.close().await;
}

#[tokio::test]
async fn the_continuation_cap_stops_with_max_turn_requests_and_the_goal_stays_active() {
    let (mut editor, session) = goal_session(ENDLESS, "max_goal_continuations = 2\n").await;
    let (before, answer) = editor.prompt(json!("p"), &session, "Never done").await;
    assert_eq!(answer["result"]["stopReason"], "max_turn_requests", "{answer}");
    assert_eq!(continuations(&before), [1, 2]);
    assert_eq!(agent_text(&before), "abc");
    let goal = status(&mut editor, &session).await["goal"].clone();
    assert_eq!((goal["status"].as_str(), goal["continuationCount"].as_u64()), (Some("active"), Some(2)));

    // The next prompt is more input toward the same goal, with a fresh allowance.
    let (before, answer) = editor.prompt(json!("p2"), &session, "Keep going").await;
    assert_eq!(answer["result"]["stopReason"], "max_turn_requests", "{answer}");
    assert_eq!(continuations(&before), [3, 4]);
    let goal = status(&mut editor, &session).await["goal"].clone();
    assert_eq!(goal["objective"], "Never done", "an active goal is not replaced");
    editor.close().await;
}

#[tokio::test]
async fn pausing_mid_goal_ends_the_prompt_after_its_step_with_end_turn() {
    let (mut editor, session) = goal_session(SLOW_STEP, "").await;
    let params = json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "Work" }] });
    editor.send_request(json!("p"), "session/prompt", params).await;
    loop {
        if update_kind(&editor.recv().await) == Some("agent_message_chunk") {
            break;
        }
    }
    editor.send_request(json!("pause"), "_heron/session/goal/pause", json!({ "sessionId": session })).await;
    let (mut before, answer) = editor.until_answer(&json!("p")).await;
    let paused = before
        .iter()
        .position(|m| m["id"] == "pause")
        .map(|at| before.remove(at))
        .unwrap_or_else(|| panic!("the pause is answered while the step runs: {before:#?}"));
    assert_eq!(paused["result"]["goal"]["status"], "paused", "{paused}");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(before.iter().any(|m| update_kind(m) == Some("plan")), "the running step finished: {before:#?}");
    assert!(continuations(&before).is_empty(), "no continuation after a pause: {before:#?}");
    assert_eq!(agent_text(&before), "", "no model request after the step");
    let now = status(&mut editor, &session).await;
    assert_eq!((now["state"].as_str(), now["goal"]["status"].as_str()), (Some("paused"), Some("paused")));
    editor.close().await;
}

#[tokio::test]
async fn resuming_makes_the_goal_active_and_the_next_prompt_continues_it() {
    let (mut editor, session) = goal_session(ENDLESS, "max_goal_continuations = 1\n").await;
    editor.prompt(json!("p"), &session, "The objective").await;
    let paused = editor.ask(json!(1), "_heron/session/goal/pause", json!({ "sessionId": session })).await;
    assert_eq!(paused["result"]["goal"]["status"], "paused", "{paused}");
    let resumed = editor.ask(json!(2), "_heron/session/goal/resume", json!({ "sessionId": session })).await;
    assert_eq!(resumed["result"]["goal"]["status"], "active", "{resumed}");
    // Resuming starts nothing by itself.
    editor.expect_silence().await;
    assert_eq!(status(&mut editor, &session).await["state"], "idle");
    let (before, _) = editor.prompt(json!("p2"), &session, "Go on").await;
    assert_eq!(continuations(&before), [2]);
    let goal = status(&mut editor, &session).await["goal"].clone();
    assert_eq!(
        (goal["objective"].as_str(), goal["status"].as_str()),
        (Some("The objective"), Some("active"))
    );
    editor.close().await;
}

#[tokio::test]
async fn a_prompt_with_a_paused_goal_states_a_new_one() {
    let (mut editor, session) = goal_session(ENDLESS, "max_goal_continuations = 0\n").await;
    editor.prompt(json!("p"), &session, "First").await;
    editor.ask(json!(1), "_heron/session/goal/pause", json!({ "sessionId": session })).await;
    editor.prompt(json!("p2"), &session, "Second").await;
    let goal = status(&mut editor, &session).await["goal"].clone();
    assert_eq!((goal["objective"].as_str(), goal["status"].as_str()), (Some("Second"), Some("active")));
    editor.close().await;
}

#[tokio::test]
async fn pause_and_resume_without_a_goal_answer_the_guides_codes() {
    let (mut editor, session) = goal_session(ENDLESS, "").await;
    for (method, code) in [("_heron/session/goal/pause", -32011), ("_heron/session/goal/resume", -32010)] {
        let answer = editor.ask(json!(method), method, json!({ "sessionId": session })).await;
        assert_eq!(answer["error"]["code"], code, "{answer}");
        assert_eq!(answer["error"]["data"]["code"], "goal.none", "{answer}");
    }
    editor.close().await;
}

#[tokio::test]
async fn a_finished_goal_cannot_be_paused_or_resumed() {
    let (mut editor, session) = goal_session(FINISHES, "").await;
    editor.prompt(json!("p"), &session, "Do both steps").await;
    let answer = editor.ask(json!(1), "_heron/session/goal/resume", json!({ "sessionId": session })).await;
    assert_eq!(answer["error"]["code"], -32010, "{answer}");
    assert_eq!(answer["error"]["data"]["code"], "goal.ended", "{answer}");
    assert_eq!(answer["error"]["data"]["status"], "completed", "{answer}");
    let answer = editor.ask(json!(2), "_heron/session/goal/pause", json!({ "sessionId": session })).await;
    assert_eq!(answer["error"]["code"], -32011, "{answer}");
    assert_eq!(answer["error"]["data"]["code"], "goal.ended", "{answer}");
    editor.close().await;
}

#[tokio::test]
async fn goal_methods_on_an_unknown_session_are_not_found() {
    let mut editor = support::start();
    editor.new_session().await;
    for method in ["_heron/session/goal/pause", "_heron/session/goal/resume", "_heron/session/status"] {
        let answer = editor.ask(json!(method), method, json!({ "sessionId": "nope" })).await;
        assert_eq!(answer["error"]["code"], -32002, "{answer}");
        assert_eq!(answer["error"]["data"]["sessionId"], "nope", "{answer}");
    }
    editor.close().await;
}

#[tokio::test]
async fn finish_goal_is_refused_outside_goal_mode() {
    let script = r#"{"steps": [{"tool_call": {"name": "finish_goal", "arguments": {"status": "completed", "summary": "x"}}}]}
{"steps": [{"text": "ok"}]}
"#;
    let mut editor = support::start_in(args(), dirs(script, ""));
    let session = editor.new_session().await;
    let (before, answer) = editor.prompt(json!("p"), &session, "Hi").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let result = before
        .iter()
        .rfind(|m| update_kind(m) == Some("tool_call_update"))
        .unwrap_or_else(|| panic!("no result: {before:#?}"));
    assert_eq!(result["params"]["update"]["status"], "failed", "{result}");
    assert!(status(&mut editor, &session).await.get("goal").is_none(), "normal mode sets no goal");
    editor.close().await;
}

#[tokio::test]
async fn the_goal_survives_a_restart_and_shows_in_the_session_list() {
    let dirs = dirs(ENDLESS, "max_goal_continuations = 1\n");
    let mut editor = support::start_in(args(), dirs.clone());
    let session = editor.new_session().await;
    editor.ask(json!("mode"), "session/set_mode", json!({ "sessionId": session, "modeId": "goal" })).await;
    editor.prompt(json!("p"), &session, "Keep me").await;
    editor.close().await;

    let mut editor = support::start_in(args(), dirs);
    editor.ask(json!("init"), "initialize", json!({ "protocolVersion": 1 })).await;
    let listed = editor.ask(json!("list"), "session/list", json!({})).await;
    let goal = &listed["result"]["sessions"][0]["_meta"]["heron"]["goal"];
    assert_eq!((goal["objective"].as_str(), goal["continuationCount"].as_u64()), (Some("Keep me"), Some(1)));
    let cwd = editor.dirs.ws();
    editor
        .ask(json!("resume"), "session/resume", json!({ "sessionId": session, "cwd": cwd, "mcpServers": [] }))
        .await;
    let goal = status(&mut editor, &session).await["goal"].clone();
    assert_eq!((goal["objective"].as_str(), goal["status"].as_str()), (Some("Keep me"), Some("active")));
    editor.close().await;
}
