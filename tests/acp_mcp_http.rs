//! MCP servers reached by URL, given over ACP, against real servers of the Python `mcp`
//! package on loopback (`tests/fixtures/mcp_http_server.py`): the model calls a tool over
//! streamable HTTP and over SSE, both header shapes reach the server, a refused server is
//! `failed` with its `httpStatus` and no secret, a slow one is `connecting` then `ready`,
//! and a server's elicitation becomes `elicitation/create` only in a mode the editor
//! advertised, with only fitting answers going back to the server.

use std::time::{Duration, Instant};

use crate::support::mcp_python::{HttpServer, python};
use crate::support::playing::play;
use crate::support::{self, Editor};
use serde_json::{Value, json};

/// A model that calls `tool` of the server `web`, then ends its turn.
fn calling(tool: &str, arguments: Value) -> String {
    let call = json!({ "steps": [{ "tool_call": { "name": format!("mcp__web__{tool}"), "arguments": arguments } }] });
    format!("{call}\n{}\n", json!({ "steps": [{ "text": "Done." }] }))
}

fn remote(kind: &str, url: String, headers: Value) -> Value {
    json!({ "type": kind, "name": "web", "url": url, "headers": headers })
}

async fn session_with(editor: &mut Editor, capabilities: Value, servers: Value) -> Result<String, Value> {
    let params = json!({ "protocolVersion": 1, "clientCapabilities": capabilities });
    editor.ask(json!("init"), "initialize", params).await;
    let cwd = editor.dirs.ws();
    let answer = editor.ask(json!("new"), "session/new", json!({ "cwd": cwd, "mcpServers": servers })).await;
    answer["result"]["sessionId"].as_str().map(str::to_owned).ok_or(answer)
}

async fn status(editor: &mut Editor, session: &str) -> Value {
    let answer = editor.ask(json!("st"), "_heron/session/mcpStatus", json!({ "sessionId": session })).await;
    answer["result"]["servers"][0].clone()
}

/// The status of the session's server once it is no longer connecting.
async fn settled(editor: &mut Editor, session: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let server = status(editor, session).await;
        if server["status"] != "connecting" || Instant::now() > deadline {
            return server;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Prompts and plays the editor until the answer (see [`play`]): the elicitations seen and
/// the text of the call, when it completed.
async fn prompt(editor: &mut Editor, session: &str, reply: impl Fn(&Value) -> Value) -> (Vec<Value>, String) {
    let played = play(editor, session, reply).await;
    let output = match played.finished["status"].as_str() {
        Some("completed") => played.finished["content"][0]["content"]["text"].as_str().unwrap_or_default(),
        _ => "",
    };
    (played.asked, output.to_owned())
}

#[tokio::test]
async fn the_model_calls_a_tool_over_streamable_http() {
    let Some(server) = HttpServer::start(&[]) else { return };
    server.wait_listening();
    let mut editor = support::start_scripted("s", &calling("echo", json!({ "text": "over http" })));
    let session =
        session_with(&mut editor, json!({}), json!([remote("http", server.url("/mcp"), json!([]))]))
            .await
            .expect("session");
    let ready = settled(&mut editor, &session).await;
    assert_eq!(ready, json!({ "name": "web", "status": "ready", "tools": 3, "transport": "http" }));
    let (_, output) = prompt(&mut editor, &session, |_| json!({ "action": "decline" })).await;
    assert_eq!(output, "over http");
    editor.close().await;
}

#[tokio::test]
async fn the_model_calls_a_tool_over_sse() {
    let Some(server) = HttpServer::start(&["--transport", "sse"]) else { return };
    server.wait_listening();
    let mut editor = support::start_scripted("s", &calling("echo", json!({ "text": "over sse" })));
    let session = session_with(&mut editor, json!({}), json!([remote("sse", server.url("/sse"), json!([]))]))
        .await
        .expect("session");
    assert_eq!(settled(&mut editor, &session).await["status"], "ready");
    let (_, output) = prompt(&mut editor, &session, |_| json!({ "action": "decline" })).await;
    assert_eq!(output, "over sse");
    editor.close().await;
}

#[tokio::test]
async fn headers_as_a_list_or_as_an_object_reach_the_server() {
    let Some(server) = HttpServer::start(&["--require-header", "X-Api-Key=k-right-1"]) else { return };
    server.wait_listening();
    for headers in
        [json!([{ "name": "X-Api-Key", "value": "k-right-1" }]), json!({ "X-Api-Key": "k-right-1" })]
    {
        let mut editor = support::start_scripted("s", &calling("echo", json!({ "text": "x" })));
        let servers = json!([remote("http", server.url("/mcp"), headers.clone())]);
        let session = session_with(&mut editor, json!({}), servers).await.expect("session");
        assert_eq!(settled(&mut editor, &session).await["status"], "ready", "headers {headers}");
        editor.close().await;
    }
}

#[tokio::test]
async fn a_refused_server_is_failed_with_its_http_status_and_no_secret() {
    let Some(server) = HttpServer::start(&["--require-header", "X-Api-Key=k-right-1"]) else { return };
    server.wait_listening();
    let mut editor = support::start_scripted("s", &calling("echo", json!({ "text": "x" })));
    let headers = json!({ "X-Api-Key": "k-wrong-2" });
    let session = session_with(&mut editor, json!({}), json!([remote("http", server.url("/mcp"), headers)]))
        .await
        .expect("session");
    let failed = settled(&mut editor, &session).await;
    assert_eq!(
        (failed["status"].as_str(), failed["httpStatus"].as_u64()),
        (Some("failed"), Some(401)),
        "{failed}"
    );
    assert_eq!(failed["error"], "the server answered HTTP 401 (Unauthorized)");
    assert!(!failed.to_string().contains("k-wrong-2"));
    editor.close().await;
}

#[tokio::test]
async fn a_server_slow_to_start_is_connecting_then_ready() {
    let Some(server) = HttpServer::start(&["--delay", "2"]) else { return };
    let mut editor = support::start_scripted("s", &calling("echo", json!({ "text": "x" })));
    let session =
        session_with(&mut editor, json!({}), json!([remote("http", server.url("/mcp"), json!([]))]))
            .await
            .expect("session");
    assert_eq!(status(&mut editor, &session).await["status"], "connecting");
    assert_eq!(settled(&mut editor, &session).await["status"], "ready");
    editor.close().await;
}

#[tokio::test]
async fn a_url_that_is_not_http_is_invalid_params_naming_it() {
    let mut editor = support::start_scripted("s", &calling("echo", json!({ "text": "x" })));
    let servers = json!([remote("sse", "file:///etc/passwd".into(), json!([]))]);
    let refused = session_with(&mut editor, json!({}), servers).await.expect_err("refused");
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert_eq!(refused["error"]["data"]["path"], "mcpServers[0].url", "{refused}");
    editor.close().await;
}

/// The tool's answer when the editor (with `capabilities`) answers every elicitation with
/// `reply`, and the elicitations it was shown.
async fn elicited(tool: &str, capabilities: Value, reply: Value) -> Option<(Value, Vec<Value>)> {
    python()?;
    let server = HttpServer::start(&[])?;
    server.wait_listening();
    let mut editor = support::start_scripted("s", &calling(tool, json!({})));
    let session =
        session_with(&mut editor, capabilities, json!([remote("http", server.url("/mcp"), json!([]))]))
            .await
            .expect("session");
    assert_eq!(settled(&mut editor, &session).await["status"], "ready");
    let (asked, output) = prompt(&mut editor, &session, |_| reply.clone()).await;
    editor.close().await;
    Some((serde_json::from_str(&output).unwrap_or_else(|_| panic!("{output}")), asked))
}

const FORMS: &str = r#"{"elicitation": {"form": {}}}"#;

#[tokio::test]
async fn a_servers_form_reaches_the_editor_and_its_answer_the_server() {
    let capabilities: Value = serde_json::from_str(FORMS).expect("json");
    let reply = json!({ "action": "accept", "content": { "color": "green", "note": "hi" } });
    let Some((answer, asked)) = elicited("ask_color", capabilities, reply).await else { return };
    assert_eq!(answer, json!({ "action": "accept", "color": "green", "note": "hi" }));
    let [form] = asked.as_slice() else { panic!("one form: {asked:?}") };
    assert_eq!(form["mode"], "form");
    assert_eq!(form["message"], "MCP server asks: Which color?");
    assert_eq!(form["requestedSchema"]["properties"]["color"]["enum"], json!(["red", "green", "blue"]));
}

#[tokio::test]
async fn an_answer_outside_the_forms_enum_declines_it() {
    let capabilities: Value = serde_json::from_str(FORMS).expect("json");
    let reply = json!({ "action": "accept", "content": { "color": "purple", "note": "hi" } });
    let Some((answer, asked)) = elicited("ask_color", capabilities, reply).await else { return };
    assert_eq!((answer, asked.len()), (json!({ "action": "decline" }), 1));
}

#[tokio::test]
async fn a_page_is_offered_only_to_an_editor_that_advertised_url() {
    let reply = json!({ "action": "accept" });
    // `url: null` advertises nothing.
    let forms_only = json!({ "elicitation": { "form": {}, "url": null } });
    let Some((answer, asked)) = elicited("sign_in", forms_only, reply.clone()).await else { return };
    assert_eq!((answer, asked.len()), (json!({ "action": "decline" }), 0));

    let pages = json!({ "elicitation": { "url": {} } });
    let Some((answer, asked)) = elicited("sign_in", pages, reply).await else { return };
    assert_eq!(answer, json!({ "action": "accept" }));
    let [page] = asked.as_slice() else { panic!("one page: {asked:?}") };
    assert_eq!(
        (page["mode"].as_str(), page["url"].as_str()),
        (Some("url"), Some("https://auth.example.invalid/login"))
    );
    assert_eq!(page["elicitationId"], "login-1");
}

#[tokio::test]
async fn an_editor_without_forms_is_never_shown_one() {
    let Some((answer, asked)) = elicited("ask_color", json!({}), json!({ "action": "accept" })).await else {
        return;
    };
    assert_eq!((answer, asked.len()), (json!({ "action": "decline" }), 0));
}

#[tokio::test]
async fn a_session_awaits_input_while_a_servers_form_waits_on_the_user() {
    let Some(server) = HttpServer::start(&[]) else { return };
    server.wait_listening();
    let mut editor = support::start_scripted("s", &calling("ask_color", json!({})));
    let capabilities = support::wanting_status(json!({ "elicitation": { "form": {} } }));
    let servers = json!([remote("http", server.url("/mcp"), json!([]))]);
    let session = session_with(&mut editor, capabilities, servers).await.expect("session");
    assert_eq!(settled(&mut editor, &session).await["status"], "ready");
    let params = json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "Use the server" }] });
    editor.send_request(json!("p"), "session/prompt", params).await;
    let states = |messages: &[Value]| -> Vec<String> {
        messages
            .iter()
            .filter(|m| m["method"] == "_heron/session/status_update")
            .map(|m| m["params"]["status"]["state"].as_str().unwrap_or("?").to_owned())
            .collect()
    };
    let mut before = Vec::new();
    loop {
        let message = editor.recv_within(Duration::from_secs(40)).await;
        match message["method"].as_str() {
            Some("session/request_permission") => {
                let allow = json!({ "outcome": { "outcome": "selected", "optionId": "allow_once" } });
                editor.send_json(json!({ "jsonrpc": "2.0", "id": message["id"], "result": allow })).await;
            }
            Some("elicitation/create") => {
                // The status said so before the form was shown.
                assert_eq!(states(&before).last().map(String::as_str), Some("awaiting_input"), "{before:#?}");
                let reply = json!({ "action": "accept", "content": { "color": "red", "note": "hi" } });
                editor.send_json(json!({ "jsonrpc": "2.0", "id": message["id"], "result": reply })).await;
                break;
            }
            _ => before.push(message),
        }
    }
    let (after, answer) = editor.until_answer(&json!("p")).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(states(&after), ["running", "idle"], "back to running once answered");
    editor.close().await;
}
