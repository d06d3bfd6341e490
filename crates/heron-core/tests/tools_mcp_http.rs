//! MCP servers reached by URL, against real servers of the Python `mcp` package on
//! loopback (`tests/fixtures/mcp_http_server.py`): tool calls over streamable HTTP and
//! legacy SSE, the editor's headers sent, a 401 reported with its status and no secret, a
//! server slow to start seen connecting and then ready, and elicitations reaching the
//! editor only as it allows and only answers that fit going back.

use std::sync::Arc;
use std::time::Duration;

use crate::support::mcp_python::HttpServer;
use crate::support::{Dirs, FakeEditor, Script};
use heron_core::tools::editor::{Elicitation, ElicitationAnswer, ElicitationModes, FieldKind};
use heron_core::tools::mcp::{McpHub, ServerSpec, ServerState, TransportSpec};
use heron_core::tools::{Tool, ToolEnv};
use heron_core::types::ToolStatus;
use serde_json::{Value, json};

fn http(url: String, headers: &[(&str, &str)]) -> ServerSpec {
    let headers = headers.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    ServerSpec { name: "web".into(), transport: TransportSpec::Http { url, headers } }
}

fn sse(url: String) -> ServerSpec {
    ServerSpec { name: "legacy".into(), transport: TransportSpec::Sse { url, headers: Vec::new() } }
}

async fn started(spec: ServerSpec, dirs: &Dirs) -> Arc<McpHub> {
    let hub = McpHub::start(vec![spec], dirs.ws(), dirs.policy());
    tokio::time::timeout(Duration::from_secs(40), hub.started()).await.expect("the server settles in time");
    hub
}

fn tool(hub: &McpHub, name: &str) -> Arc<dyn Tool> {
    hub.tools()
        .into_iter()
        .find(|t| t.spec().name.ends_with(name))
        .unwrap_or_else(|| panic!("no tool {name}: {:?}", hub.statuses()))
}

async fn call(hub: &McpHub, name: &str, env: &ToolEnv) -> heron_core::tools::Outcome {
    let tool = tool(hub, name);
    let arguments = if name == "echo" { json!({ "text": "ping" }) } else { json!({}) };
    let prepared = tool.prepare(&arguments.to_string(), env).expect("arguments are an object");
    tool.run(prepared, env.clone()).await
}

#[tokio::test]
async fn a_tool_is_called_over_streamable_http() {
    let Some(server) = HttpServer::start(&[]) else { return };
    server.wait_listening();
    let dirs = Dirs::new();
    let hub = started(http(server.url("/mcp"), &[]), &dirs).await;
    let status = &hub.statuses()[0];
    assert_eq!((&status.state, status.transport), (&ServerState::Ready, "http"), "{status:?}");
    let outcome = call(&hub, "echo", &dirs.env()).await;
    assert_eq!((outcome.status, outcome.for_model.as_str()), (ToolStatus::Completed, "ping"));
    hub.shutdown().await;
}

#[tokio::test]
async fn a_tool_is_called_over_legacy_sse() {
    let Some(server) = HttpServer::start(&["--transport", "sse"]) else { return };
    server.wait_listening();
    let dirs = Dirs::new();
    let hub = started(sse(server.url("/sse")), &dirs).await;
    assert_eq!(hub.statuses()[0].state, ServerState::Ready, "{:?}", hub.statuses());
    let outcome = call(&hub, "echo", &dirs.env()).await;
    assert_eq!((outcome.status, outcome.for_model.as_str()), (ToolStatus::Completed, "ping"));
    hub.shutdown().await;
}

#[tokio::test]
async fn the_editors_headers_reach_the_server_and_a_401_is_reported_without_them() {
    let Some(server) = HttpServer::start(&["--require-header", "X-Api-Key=k-right-1"]) else { return };
    server.wait_listening();
    let dirs = Dirs::new();
    let hub = started(http(server.url("/mcp"), &[("X-Api-Key", "k-right-1")]), &dirs).await;
    assert_eq!(hub.statuses()[0].state, ServerState::Ready, "{:?}", hub.statuses());
    hub.shutdown().await;

    let hub = started(http(server.url("/mcp?token=q-secret-2"), &[("X-Api-Key", "k-wrong-3")]), &dirs).await;
    let status = &hub.statuses()[0];
    assert_eq!(status.http_status, Some(401), "{status:?}");
    let ServerState::Failed(reason) = &status.state else { panic!("not failed: {status:?}") };
    assert!(!reason.contains("k-wrong-3") && !reason.contains("q-secret-2"), "{reason}");
    assert!(!format!("{status:?}{hub:?}").contains("k-wrong-3"));
    hub.shutdown().await;
}

#[tokio::test]
async fn an_sse_server_that_answers_401_is_failed_with_its_status() {
    let Some(server) = HttpServer::start(&["--transport", "sse", "--status", "401"]) else { return };
    server.wait_listening();
    let dirs = Dirs::new();
    let hub = started(sse(server.url("/sse")), &dirs).await;
    let status = &hub.statuses()[0];
    assert!(matches!(status.state, ServerState::Failed(_)) && status.http_status == Some(401), "{status:?}");
    hub.shutdown().await;
}

#[tokio::test]
async fn a_server_slow_to_start_is_connecting_then_ready() {
    let Some(server) = HttpServer::start(&["--delay", "2"]) else { return };
    let dirs = Dirs::new();
    let hub = McpHub::start(vec![http(server.url("/mcp"), &[])], dirs.ws(), dirs.policy());
    // The wait is what is tested: a refused first try, a few hundred ms in, must leave the
    // server connecting rather than failed.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(hub.statuses()[0].state, ServerState::Connecting, "{:?}", hub.statuses());
    tokio::time::timeout(Duration::from_secs(40), hub.started()).await.expect("it settles");
    assert_eq!(hub.statuses()[0].state, ServerState::Ready, "{:?}", hub.statuses());
    hub.shutdown().await;
}

async fn elicited(script: Script) -> (Value, FakeEditor) {
    let server = HttpServer::start(&[]).expect("checked by the caller");
    server.wait_listening();
    let dirs = Dirs::new();
    let hub = started(http(server.url("/mcp"), &[]), &dirs).await;
    let editor = FakeEditor::new(script);
    hub.attach(Arc::new(editor.clone()));
    let outcome = call(&hub, "ask_color", &dirs.env()).await;
    hub.shutdown().await;
    let answer = serde_json::from_str(&outcome.for_model).unwrap_or_else(|_| panic!("{}", outcome.for_model));
    (answer, editor)
}

fn accept(content: Value) -> ElicitationAnswer {
    ElicitationAnswer::Accept(content.as_object().cloned().expect("an object"))
}

#[tokio::test]
async fn a_form_reaches_the_editor_cleaned_and_its_answer_the_server() {
    if crate::support::mcp_python::python().is_none() {
        return;
    }
    let script = Script { elicited: accept(json!({ "color": "green", "note": "hi" })), ..Script::full() };
    let (answer, editor) = elicited(script).await;
    assert_eq!(answer, json!({ "action": "accept", "color": "green", "note": "hi" }));
    let shown = editor.elicitations();
    let [Elicitation::Form { message, fields }] = shown.as_slice() else { panic!("one form: {shown:?}") };
    assert_eq!(message, "MCP server asks: Which color?");
    let color = fields.iter().find(|f| f.name == "color").expect("color");
    assert_eq!(
        color.kind,
        FieldKind::Choice { options: vec!["red".into(), "green".into(), "blue".into()], default: None }
    );
}

#[tokio::test]
async fn an_answer_outside_the_forms_enum_declines_it() {
    if crate::support::mcp_python::python().is_none() {
        return;
    }
    let script = Script { elicited: accept(json!({ "color": "purple", "note": "hi" })), ..Script::full() };
    let (answer, _) = elicited(script).await;
    assert_eq!(answer, json!({ "action": "decline" }));
}

/// A4: a form the editor never answered within its wait (the adapter fails the call and
/// tells the editor to stop) declines the server's elicitation, and the tool call ends.
#[tokio::test]
async fn a_form_past_the_editors_wait_is_declined_to_the_server() {
    if crate::support::mcp_python::python().is_none() {
        return;
    }
    let failed = Some("no answer within 600 s".to_owned());
    let script =
        Script { elicited: accept(json!({ "color": "red" })), elicit_error: failed, ..Script::full() };
    let (answer, editor) = elicited(script).await;
    assert_eq!(answer, json!({ "action": "decline" }));
    assert_eq!(editor.elicitations().len(), 1, "the form was shown");
}

#[tokio::test]
async fn an_editor_without_forms_is_never_shown_one() {
    if crate::support::mcp_python::python().is_none() {
        return;
    }
    let modes = ElicitationModes { form: false, url: true };
    let script = Script { elicitation: modes, elicited: accept(json!({ "color": "red" })), ..Script::full() };
    let (answer, editor) = elicited(script).await;
    assert_eq!(answer, json!({ "action": "decline" }));
    assert!(editor.elicitations().is_empty());
}
