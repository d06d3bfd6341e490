//! MCP servers against a small real server on stdio (`tests/fixtures/mcp_server.py`):
//! starting, listing tools under model-safe names, calls with results, errors, secrets
//! scrubbed, environment passed, cancellation, failures explained with the server's
//! stderr, and the whole process group stopped with the hub.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::{Dirs, text_of, wait_until_none_runs};
use heron_core::secret::Secret;
use heron_core::tools::mcp::{McpHub, ServerSpec, ServerState, TransportSpec};
use heron_core::tools::{Tool, ToolEnv};
use heron_core::types::{ToolKind, ToolStatus};
use serde_json::{Value, json};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/mcp_server.py")
}

fn server(name: &str, env: &[(&str, &str)]) -> ServerSpec {
    ServerSpec {
        name: name.to_owned(),
        transport: TransportSpec::Stdio {
            command: PathBuf::from("python3"),
            args: vec![fixture().display().to_string()],
            env: env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
        },
    }
}

async fn started(specs: Vec<ServerSpec>, dirs: &Dirs) -> Arc<McpHub> {
    let hub = McpHub::start(specs, dirs.ws(), dirs.policy());
    tokio::time::timeout(Duration::from_secs(40), hub.started()).await.expect("servers settle in time");
    hub
}

fn tool(hub: &McpHub, name: &str) -> Arc<dyn Tool> {
    hub.tools()
        .into_iter()
        .find(|t| t.spec().name == name)
        .unwrap_or_else(|| panic!("no tool {name}: {:?}", hub.statuses()))
}

async fn run(tool: &Arc<dyn Tool>, arguments: Value, env: &ToolEnv) -> heron_core::tools::Outcome {
    let prepared = tool.prepare(&arguments.to_string(), env).expect("arguments are an object");
    tool.run(prepared, env.clone()).await
}

#[tokio::test]
async fn a_stdio_server_offers_its_tools_and_answers_calls() {
    let dirs = Dirs::new();
    let hub = started(vec![server("fake", &[])], &dirs).await;
    let status = &hub.statuses()[0];
    assert_eq!((status.state.clone(), status.transport, status.tool_count), (ServerState::Ready, "stdio", 6));
    let mut names: Vec<String> = hub.tools().iter().map(|t| t.spec().name).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "mcp__fake__ask_many",
            "mcp__fake__echo",
            "mcp__fake__env",
            "mcp__fake__fail",
            "mcp__fake__slow",
            "mcp__fake__spawn"
        ]
    );
    let echo = tool(&hub, "mcp__fake__echo");
    let spec = echo.spec();
    assert_eq!(spec.parameters["properties"]["text"]["type"], "string");
    assert!(spec.description.contains("Echoes its text.") && spec.description.contains("`fake`"));
    assert_eq!(echo.kind(), ToolKind::Other, "a server's tool is gated like a command");

    let env = dirs.env();
    let prepared = echo.prepare(r#"{"text": "hello"}"#, &env).expect("valid");
    assert_eq!(prepared.title, "fake: echo");
    let outcome = echo.run(prepared, env.clone()).await;
    assert_eq!((outcome.status, outcome.for_model.as_str()), (ToolStatus::Completed, "hello"));
    assert_eq!(text_of(&outcome), "hello");
    assert_eq!(outcome.raw_output.expect("raw output")["content"][0]["text"], "hello");

    let failed = run(&tool(&hub, "mcp__fake__fail"), json!({}), &env).await;
    assert_eq!((failed.status, failed.for_model.as_str()), (ToolStatus::Failed, "it went wrong"));
    hub.shutdown().await;
}

#[tokio::test]
async fn bad_arguments_fail_before_the_server_is_asked() {
    let dirs = Dirs::new();
    let hub = started(vec![server("fake", &[])], &dirs).await;
    let echo = tool(&hub, "mcp__fake__echo");
    let env = dirs.env();
    assert!(echo.prepare("[1, 2]", &env).expect_err("not an object").contains("JSON object"));
    assert!(echo.prepare("{oops", &env).expect_err("not JSON").contains("not valid JSON"));
    hub.shutdown().await;
}

#[tokio::test]
async fn the_editors_environment_reaches_the_server_and_secrets_never_come_back() {
    let dirs = Dirs::new();
    let hub = started(vec![server("fake", &[("FAKE_TOKEN", "tok-123")])], &dirs).await;
    let env = dirs.env();
    let read = run(&tool(&hub, "mcp__fake__env"), json!({"name": "FAKE_TOKEN"}), &env).await;
    assert_eq!(read.for_model, "tok-123");
    let env = ToolEnv { secrets: Arc::new(vec![Secret::new("sk-live-987654")]), ..env };
    let echoed = run(&tool(&hub, "mcp__fake__echo"), json!({"text": "key sk-live-987654"}), &env).await;
    assert_eq!(echoed.for_model, "key ***");
    assert!(!echoed.raw_output.expect("raw").to_string().contains("sk-live-987654"));
    // The spec's Debug output shows variable names, never values.
    let shown = format!("{:?}", server("fake", &[("FAKE_TOKEN", "tok-123")]));
    assert!(shown.contains("FAKE_TOKEN") && !shown.contains("tok-123"), "{shown}");
    hub.shutdown().await;
}

#[tokio::test]
async fn a_cancelled_call_ends_at_once() {
    let dirs = Dirs::new();
    let hub = started(vec![server("fake", &[])], &dirs).await;
    let env = dirs.env();
    let cancel = env.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        cancel.cancel();
    });
    let began = Instant::now();
    let outcome = run(&tool(&hub, "mcp__fake__slow"), json!({}), &env).await;
    assert_eq!((outcome.status, outcome.for_model.as_str()), (ToolStatus::Failed, "cancelled"));
    assert!(began.elapsed() < Duration::from_secs(5), "took {:?}", began.elapsed());
    hub.shutdown().await;
}

#[tokio::test]
async fn servers_that_cannot_start_say_why_and_the_others_still_work() {
    let dirs = Dirs::new();
    let missing = ServerSpec {
        name: "missing".into(),
        transport: TransportSpec::Stdio {
            command: PathBuf::from("/nonexistent/mcp-server"),
            args: Vec::new(),
            env: Vec::new(),
        },
    };
    // Nothing listens on port 1 of loopback.
    let http = ServerSpec {
        name: "remote".into(),
        transport: TransportSpec::Http { url: "ftp://127.0.0.1:1/mcp".into(), headers: Vec::new() },
    };
    let specs = vec![server("crashy", &[("MCP_FAKE_MODE", "crash")]), missing, http, server("fake", &[])];
    let hub = started(specs, &dirs).await;
    let statuses = hub.statuses();
    let reason = |i: usize| match &statuses[i].state {
        ServerState::Failed(reason) => reason.clone(),
        other => panic!("{} is {other:?}", statuses[i].name),
    };
    assert!(reason(0).contains("missing configuration"), "the server's stderr explains it: {}", reason(0));
    assert!(reason(1).contains("cannot start `/nonexistent/mcp-server`"), "{}", reason(1));
    assert!(reason(2).contains("http or https"), "{}", reason(2));
    assert_eq!(statuses[3].state, ServerState::Ready);
    assert!(hub.tools().iter().all(|t| t.spec().name.starts_with("mcp__fake__")));
    hub.shutdown().await;
}

#[tokio::test]
async fn two_servers_with_one_name_get_distinct_tool_names() {
    let dirs = Dirs::new();
    let hub = started(vec![server("fake", &[]), server("fake", &[])], &dirs).await;
    let names: Vec<String> = hub.statuses().iter().map(|s| s.name.clone()).collect();
    assert_eq!(names, ["fake", "fake-2"]);
    assert!(hub.tools().iter().any(|t| t.spec().name == "mcp__fake-2__echo"));
    hub.shutdown().await;
}

#[cfg(unix)]
#[tokio::test]
async fn shutting_down_stops_the_server_and_what_it_spawned() {
    let dirs = Dirs::new();
    // The server and its grandchild carry the marker in their command lines: the pids they
    // report are their pid namespace's where they have one.
    let marker = format!("heron-mcp-marker-{}", uuid::Uuid::new_v4().simple());
    let mut spec = server("fake", &[("HERON_TEST_MARKER", &marker)]);
    if let TransportSpec::Stdio { args, .. } = &mut spec.transport {
        args.push(marker.clone());
    }
    let hub = started(vec![spec], &dirs).await;
    let spawned = run(&tool(&hub, "mcp__fake__spawn"), json!({}), &dirs.env()).await;
    assert!(spawned.for_model.contains("grandchild"), "{}", spawned.for_model);
    hub.shutdown().await;
    wait_until_none_runs(&marker, "the MCP server or its grandchild");
    assert!(hub.tools().is_empty());
    assert!(matches!(hub.statuses()[0].state, ServerState::Failed(_)));
}

/// A server whose tool list never ends, with vast descriptions and schemas, is held to
/// bounds: its list is read for a few pages and at most 200 tools, a description to 4 KiB,
/// and a tool whose schema passes 64 KiB is not offered; the server is still ready.
#[tokio::test]
async fn a_flood_of_tools_is_held_to_the_lists_bounds() {
    let dirs = Dirs::new();
    let hub = started(vec![server("flood", &[("MCP_FAKE_MODE", "flood")])], &dirs).await;
    let status = &hub.statuses()[0];
    assert_eq!(status.state, ServerState::Ready, "{status:?}");
    let specs: Vec<_> = hub.tools().iter().map(|t| t.spec()).collect();
    assert!(specs.len() <= 200, "{} tools offered", specs.len());
    assert!(specs.len() >= 150, "the first pages are kept: {}", specs.len());
    assert!(specs.iter().all(|s| s.name != "mcp__flood__huge"), "the vast schema is not offered");
    assert!(specs.iter().all(|s| s.description.len() < 5 * 1024), "descriptions are held to their bound");
    hub.shutdown().await;
}
