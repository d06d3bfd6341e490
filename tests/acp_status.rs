//! `_heron/session/status` and `_heron/session/status_update` over ACP: the snapshot's
//! fields, updates only for a client that asked and only on a real change, the states a
//! turn goes through (running, awaiting permission or input, idle), and usage after a reload.

use crate::support;
use std::time::Duration;

use crate::support::{Editor, update_kind};
use heron::cli::acp::AcpArgs;
use serde_json::{Value, json};

const STATUS_UPDATE: &str = "_heron/session/status_update";

use crate::support::wanting_status as wanting_updates;

async fn open(editor: &mut Editor, capabilities: Value) -> String {
    editor.new_session_with(capabilities).await
}

fn scripted(script: &str, permission_mode: Option<&str>) -> Editor {
    let args = AcpArgs { permission_mode: permission_mode.map(str::to_owned), ..support::scripted_args("s") };
    support::start_in(args, support::scripted_home("s", "", script))
}

fn states(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["method"] == STATUS_UPDATE)
        .map(|m| m["params"]["status"]["state"].as_str().unwrap_or("?").to_owned())
        .collect()
}

#[tokio::test]
async fn the_snapshot_of_a_new_session_is_idle_with_its_settings() {
    let mut editor = support::start();
    let session = editor.new_session().await;
    let answer = editor.ask(json!(1), "_heron/session/status", json!({ "sessionId": session })).await;
    let status = &answer["result"]["status"];
    assert_eq!(status["state"], "idle", "{answer}");
    assert_eq!(status["currentModeId"], "normal");
    assert_eq!(status["modelId"], "demo/demo");
    assert_eq!(status["approvalPosture"], "ask");
    assert_eq!(status["inbox"], json!({ "queued": 0, "running": 0, "failed": 0, "paused": false }));
    assert!(status["updatedAt"].as_str().is_some_and(|t| t.ends_with('Z')), "{status}");
    for absent in ["goal", "contextUsage", "turnStartedAt"] {
        assert!(status.get(absent).is_none(), "{absent} is absent: {status}");
    }
    editor.close().await;
}

#[tokio::test]
async fn a_client_that_did_not_ask_gets_no_status_updates() {
    let mut editor = support::start();
    let session = editor.new_session().await;
    let (before, _) = editor.prompt(json!("p"), &session, "Look around").await;
    assert!(states(&before).is_empty(), "{before:#?}");
    editor.ask(json!(1), "session/set_mode", json!({ "sessionId": session, "modeId": "plan" })).await;
    editor.expect_silence().await;
    editor.close().await;
}

#[tokio::test]
async fn a_turn_goes_running_then_idle_before_its_answer() {
    let mut editor = support::start();
    let session = open(&mut editor, wanting_updates(json!({}))).await;
    let (before, answer) = editor.prompt(json!("p"), &session, "Look around").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    let seen = states(&before);
    assert_eq!(seen.first().map(String::as_str), Some("running"), "{seen:?}");
    assert_eq!(seen.last().map(String::as_str), Some("idle"), "{seen:?}");
    let first_update = before.iter().position(|m| update_kind(m).is_some());
    let first_status = before.iter().position(|m| m["method"] == STATUS_UPDATE);
    assert!(first_status < first_update, "running comes before the turn's updates");
    let running = before.iter().find(|m| m["method"] == STATUS_UPDATE).expect("a status update");
    assert!(running["params"]["status"]["turnStartedAt"].is_string(), "{running}");
    assert_eq!(running["params"]["sessionId"], json!(session));
    // Each update is a real change: no two in a row are the same but for the timestamp.
    let snapshots: Vec<Value> = before
        .iter()
        .filter(|m| m["method"] == STATUS_UPDATE)
        .map(|m| {
            let mut status = m["params"]["status"].clone();
            status["updatedAt"] = Value::Null;
            status
        })
        .collect();
    assert!(snapshots.windows(2).all(|w| w[0] != w[1]), "{snapshots:#?}");
    editor.expect_silence().await;
    editor.close().await;
}

#[tokio::test]
async fn the_versioned_opt_in_gets_status_updates_too() {
    let mut editor = support::start();
    let asking = json!({ "_meta": { "heron": { "statusUpdates": { "supported": true } } } });
    let session = open(&mut editor, asking).await;
    let (before, _) = editor.prompt(json!("p"), &session, "Look around").await;
    assert_eq!(states(&before).first().map(String::as_str), Some("running"), "{before:#?}");
    editor.close().await;
}

#[tokio::test]
async fn usage_shows_in_the_status() {
    let mut editor = support::start();
    let session = open(&mut editor, wanting_updates(json!({}))).await;
    let (before, _) = editor.prompt(json!("p"), &session, "Look around").await;
    let last = before.iter().rfind(|m| m["method"] == STATUS_UPDATE).expect("a status update");
    assert_eq!(last["params"]["status"]["contextUsage"], json!({ "used": 1280, "size": 128000 }));
    // The demo model has no price: the quote says the cost is not complete.
    let quote = &last["params"]["status"]["costQuote"];
    assert_eq!(
        (quote["costComplete"].clone(), quote["currency"].clone()),
        (json!(false), Value::Null),
        "{quote}"
    );
    assert_eq!(quote["tokens"]["inputTokens"], 1200, "{quote}");
    editor.close().await;
}

#[tokio::test]
async fn the_cost_quote_prices_cached_tokens_and_adds_up_over_turns() {
    let script = r#"{"steps":[{"text":"One."},{"usage":{"input":1000,"output":100,"cached":800}}]}
{"steps":[{"text":"Two."},{"usage":{"input":1000,"output":100,"cached":800}}]}
"#;
    let provider =
        "[providers.s.prices.m]\ninput = 2.0\noutput = 8.0\ncached_input = 0.5\ncurrency = \"EUR\"\n";
    let home = support::scripted_home("s", "", script);
    let config = std::fs::read_to_string(home.home().join("config.toml")).expect("config");
    home.write_home("config.toml", &format!("{config}context_window = 10000\n{provider}"));
    let mut editor = support::start_in(support::scripted_args("s"), home);
    let session = open(&mut editor, json!({})).await;
    editor.prompt(json!("p1"), &session, "one").await;
    editor.prompt(json!("p2"), &session, "two").await;
    let answer = editor.ask(json!(1), "_heron/session/status", json!({ "sessionId": session })).await;
    let quote = &answer["result"]["status"]["costQuote"];
    // Per request: 200 plain input at 2.0, 800 cached at 0.5, 100 output at 8.0 per million.
    let total = quote["totalCost"].as_f64().expect("a total");
    assert!((total - 2.0 * 0.0016).abs() < 1e-12, "{quote}");
    assert_eq!((quote["currency"].as_str(), quote["costComplete"].as_bool()), (Some("EUR"), Some(true)));
    assert_eq!(quote["tokens"]["cachedReadTokens"], 1600, "{quote}");
    editor.close().await;
}

/// A scripted model `s/m` priced at 2.0 in and 8.0 out per million tokens (EUR), with
/// `window` as its context window when given, that reports `usage` for each of two turns.
fn priced(window: Option<u64>) -> Editor {
    let script = r#"{"steps":[{"text":"One."},{"usage":{"input":1000,"output":100}}]}
{"steps":[{"text":"Two."},{"usage":{"input":1000,"output":100}}]}
"#;
    let home = support::scripted_home("s", "", script);
    let config = std::fs::read_to_string(home.home().join("config.toml")).expect("config");
    let window = window.map(|w| format!("context_window = {w}\n")).unwrap_or_default();
    let prices = "[providers.s.prices.m]\ninput = 2.0\noutput = 8.0\ncurrency = \"EUR\"\n";
    home.write_home("config.toml", &format!("{config}{window}{prices}"));
    support::start_in(support::scripted_args("s"), home)
}

/// One request's cost: 1,000 input tokens at 2.0 and 100 output at 8.0 per million.
const ONE_REQUEST: f64 = (1000.0 * 2.0 + 100.0 * 8.0) / 1e6;

#[tokio::test]
async fn each_usage_update_carries_the_sessions_cost_so_far_with_its_currency() {
    let mut editor = priced(Some(10_000));
    let session = open(&mut editor, json!({})).await;
    for (turn, requests) in [("one", 1.0), ("two", 2.0)] {
        let (before, _) = editor.prompt(json!(turn), &session, turn).await;
        let usage = before.iter().rfind(|m| update_kind(m) == Some("usage_update")).expect("a usage_update");
        let update = &usage["params"]["update"];
        assert_eq!(
            (update["size"].as_u64(), update["used"].as_u64()),
            (Some(10_000), Some(1100)),
            "{update}"
        );
        let cost = update["cost"].as_object().expect("a cost");
        assert_eq!(cost.keys().collect::<Vec<_>>(), ["amount", "currency"], "{update}");
        assert_eq!(cost["currency"], "EUR");
        let amount = cost["amount"].as_f64().expect("an amount");
        assert!((amount - requests * ONE_REQUEST).abs() < 1e-12, "after turn {turn}: {update}");
    }
    editor.close().await;
}

#[tokio::test]
async fn without_a_context_window_the_cost_still_counts_in_the_status_and_no_meter_is_sent() {
    let mut editor = priced(None);
    let session = open(&mut editor, wanting_updates(json!({}))).await;
    let (first, _) = editor.prompt(json!("p1"), &session, "one").await;
    let (second, _) = editor.prompt(json!("p2"), &session, "two").await;
    // ACP's usage_update must carry the window's `size`: with none known there is none.
    for before in [&first, &second] {
        assert!(!before.iter().any(|m| update_kind(m) == Some("usage_update")), "{before:#?}");
    }
    let pushed = second.iter().rfind(|m| m["method"] == STATUS_UPDATE).expect("a status update");
    let answer = editor.ask(json!(1), "_heron/session/status", json!({ "sessionId": session })).await;
    for status in [&pushed["params"]["status"], &answer["result"]["status"]] {
        assert!(status.get("contextUsage").is_none(), "no meter without a window: {status}");
        let quote = &status["costQuote"];
        let total = quote["totalCost"].as_f64().unwrap_or_else(|| panic!("a total: {status}"));
        assert!((total - 2.0 * ONE_REQUEST).abs() < 1e-12, "{quote}");
        assert_eq!((quote["currency"].as_str(), quote["costComplete"].as_bool()), (Some("EUR"), Some(true)));
        assert_eq!(
            (quote["tokens"]["inputTokens"].as_u64(), quote["tokens"]["outputTokens"].as_u64()),
            (Some(2000), Some(200))
        );
    }
    editor.close().await;
}

#[tokio::test]
async fn waiting_on_permission_shows_awaiting_permission_before_the_question() {
    let script = r#"{"steps":[{"tool_call":{"name":"write_file","arguments":{"path":"note.txt","content":"hi\n"}}}]}
{"steps":[{"text":"Done."}]}
"#;
    let mut editor = scripted(script, None);
    let session = open(&mut editor, wanting_updates(json!({}))).await;
    let (before, _) = editor.prompt(json!("p"), &session, "Write").await;
    let asked = before
        .iter()
        .position(|m| m["method"] == "session/request_permission")
        .unwrap_or_else(|| panic!("no permission request: {before:#?}"));
    assert_eq!(states(&before[..asked]).last().map(String::as_str), Some("awaiting_permission"));
    assert_eq!(states(&before[asked..]), ["running", "idle"]);
    editor.close().await;
}

#[tokio::test]
async fn waiting_on_a_question_shows_awaiting_input() {
    let script = r#"{"steps":[{"tool_call":{"name":"question","arguments":{"question":"Tabs?"}}}]}
{"steps":[{"text":"Noted."}]}
"#;
    // Questions run without a permission question first.
    let mut editor = scripted(script, Some("bypassPermissions"));
    let session = open(&mut editor, wanting_updates(json!({ "elicitation": { "form": {} } }))).await;
    let params = json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "Ask me" }] });
    editor.send_request(json!("p"), "session/prompt", params).await;
    let mut seen = Vec::new();
    loop {
        let message = editor.recv_within(Duration::from_secs(5)).await;
        if message["method"] == "elicitation/create" {
            let answer = json!({ "action": "accept", "content": { "answer": "yes" } });
            editor.send_json(json!({ "jsonrpc": "2.0", "id": message["id"], "result": answer })).await;
            break;
        }
        seen.push(message);
    }
    assert_eq!(states(&seen).last().map(String::as_str), Some("awaiting_input"), "{seen:#?}");
    let (after, answer) = editor.until_answer(&json!("p")).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    assert_eq!(states(&after), ["running", "idle"]);
    editor.close().await;
}

#[tokio::test]
async fn a_mode_change_sends_one_update_and_the_same_mode_again_sends_none() {
    let mut editor = support::start();
    let session = open(&mut editor, wanting_updates(json!({}))).await;
    let params = json!({ "sessionId": session, "modeId": "plan" });
    let (before, _) = editor.exchange(json!(1), "session/set_mode", params.clone()).await;
    let updates: Vec<&Value> = before.iter().filter(|m| m["method"] == STATUS_UPDATE).collect();
    assert_eq!(updates.len(), 1, "{before:#?}");
    assert_eq!(updates[0]["params"]["status"]["currentModeId"], "plan");
    let (before, _) = editor.exchange(json!(2), "session/set_mode", params).await;
    assert!(states(&before).is_empty(), "nothing changed: {before:#?}");
    let option = json!({ "sessionId": session, "configId": "tool_approval", "value": "auto" });
    let (before, _) = editor.exchange(json!(3), "session/set_config_option", option).await;
    let update = before.iter().find(|m| m["method"] == STATUS_UPDATE).expect("a posture change is an update");
    assert_eq!(update["params"]["status"]["approvalPosture"], "auto");
    editor.close().await;
}

#[tokio::test]
async fn load_ends_its_replay_with_the_stored_usage_and_resume_sends_it_after_its_answer() {
    let mut editor = support::start();
    let session = editor.new_session().await;
    editor.prompt(json!("p"), &session, "Look around").await;
    let dirs = editor.dirs.clone();
    editor.close().await;
    let used = |m: &Value| (m["params"]["update"]["used"].as_u64(), m["params"]["update"]["size"].as_u64());
    let params = json!({ "sessionId": session, "cwd": dirs.ws(), "mcpServers": [] });

    let mut editor = support::start_in(support::demo_args(), dirs.clone());
    editor.ask(json!("init"), "initialize", json!({ "protocolVersion": 1 })).await;
    let (replayed, _) = editor.exchange(json!("load"), "session/load", params.clone()).await;
    let last = replayed.last().expect("a replay");
    assert_eq!(update_kind(last), Some("usage_update"), "{replayed:#?}");
    assert_eq!(used(last), (Some(1280), Some(128000)));
    editor.close().await;

    let mut editor = support::start_in(support::demo_args(), dirs);
    editor.ask(json!("init"), "initialize", json!({ "protocolVersion": 1 })).await;
    let (before, answer) = editor.exchange(json!("resume"), "session/resume", params).await;
    assert!(answer["result"].is_object(), "{answer}");
    assert!(before.is_empty(), "a resume replays nothing: {before:#?}");
    let usage = loop {
        let message = editor.recv().await;
        if update_kind(&message) == Some("usage_update") {
            break message;
        }
    };
    assert_eq!(used(&usage), (Some(1280), Some(128000)));
    editor.close().await;
}

#[tokio::test]
async fn a_session_without_usage_sends_none_after_load() {
    let mut editor = support::start();
    let session = editor.new_session().await;
    let cwd = editor.dirs.ws();
    let params = json!({ "sessionId": session, "cwd": cwd, "mcpServers": [] });
    editor.exchange(json!("load"), "session/load", params).await;
    let next = editor.recv().await;
    assert_eq!(update_kind(&next), Some("available_commands_update"), "{next}");
    editor.expect_silence().await;
    editor.close().await;
}
