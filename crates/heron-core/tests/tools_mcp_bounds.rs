//! MCP servers that cross a bound of what Heron takes from them (the MCP rows of
//! `docs/bounds.md`): a stdio line past rmcp's 16 MiB, an HTTP answer or an SSE event past
//! 4 MiB, a server that never answers `initialize`, one that never lists its prompts, one
//! that never lets go when closed, and a prompt, a resource and a resource list past their
//! caps. The hub is given short waits ([`McpLimits`]), so each crossing takes a moment; the
//! production waits are pinned apart. Past each bound the server is failed with a reason,
//! or ready with what fit, and the other servers of the hub keep working.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::server_mock::{Answer, MockServer, Seen};
use crate::support::{Dirs, wait_until_none_runs};
use heron_core::tools::mcp::{McpHub, McpLimits, STARTUP_TIMEOUT, ServerSpec, ServerState, TransportSpec};
use heron_core::tools::{Tool, ToolEnv};
use heron_core::types::ToolStatus;
use serde_json::{Value, json};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/mcp_server.py")
}

/// The fixture server as `name`, misbehaving as `mode` says (see the fixture), with `env`.
fn fake(name: &str, mode: &str, env: &[(&str, &str)]) -> ServerSpec {
    let mut vars: Vec<(String, String)> = vec![("MCP_FAKE_MODE".into(), mode.into())];
    vars.extend(env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    let args = vec![fixture().display().to_string()];
    ServerSpec {
        name: name.into(),
        transport: TransportSpec::Stdio { command: "python3".into(), args, env: vars },
    }
}

/// Waits short enough to cross in a test, long enough for a Python server to start on a
/// busy machine.
const SHORT: McpLimits = McpLimits {
    startup: Duration::from_secs(2),
    offers: Duration::from_millis(300),
    close: Duration::from_millis(300),
    post: Duration::from_millis(300),
    connect: Duration::from_secs(2),
};

async fn started(specs: Vec<ServerSpec>, dirs: &Dirs) -> Arc<McpHub> {
    started_within(specs, dirs, SHORT).await
}

async fn started_within(specs: Vec<ServerSpec>, dirs: &Dirs, limits: McpLimits) -> Arc<McpHub> {
    let hub = McpHub::start_within(specs, dirs.ws(), dirs.policy(), limits);
    tokio::time::timeout(Duration::from_secs(10), hub.started()).await.expect("the servers settle in time");
    hub
}

fn state(hub: &McpHub, name: &str) -> ServerState {
    let statuses = hub.statuses();
    statuses
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no {name}: {statuses:?}"))
        .state
        .clone()
}

fn failure(hub: &McpHub, name: &str) -> String {
    match state(hub, name) {
        ServerState::Failed(reason) => reason,
        other => panic!("{name} is {other:?}, not failed"),
    }
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

/// The waits sessions use, which the tests here shorten.
#[test]
fn the_production_waits_are_thirty_ten_one_and_a_half_thirty_and_ten_seconds() {
    let limits = McpLimits::default();
    assert_eq!(limits.startup, STARTUP_TIMEOUT);
    assert_eq!(
        (limits.startup, limits.offers, limits.close, limits.post, limits.connect),
        (
            Duration::from_secs(30),
            Duration::from_secs(10),
            Duration::from_millis(1500),
            Duration::from_secs(30),
            Duration::from_secs(10)
        )
    );
}

/// M1: a line past rmcp's 16 MiB is dropped, not buffered, and the connection stays: a
/// server that sends the real answer after it is ready and answers calls; one that sends
/// nothing else is failed at the startup wait, saying so; the others keep working.
#[tokio::test]
async fn a_stdio_line_past_16_mib_is_dropped_and_only_its_server_is_failed() {
    let dirs = Dirs::new();
    let specs = vec![
        fake("dropped", "oversize", &[]),
        fake("recovers", "oversize", &[("MCP_FAKE_THEN", "answer")]),
        fake("fine", "", &[]),
    ];
    let hub = started(specs, &dirs).await;
    let reason = failure(&hub, "dropped");
    assert!(reason.contains("did not start within 2 s"), "{reason}");
    assert_eq!(state(&hub, "recovers"), ServerState::Ready);
    assert_eq!(state(&hub, "fine"), ServerState::Ready);
    let env = dirs.env();
    let echoed = run(&tool(&hub, "mcp__recovers__echo"), json!({ "text": "still here" }), &env).await;
    assert_eq!((echoed.status, echoed.for_model.as_str()), (ToolStatus::Completed, "still here"));
    let echoed = run(&tool(&hub, "mcp__fine__echo"), json!({ "text": "hi" }), &env).await;
    assert_eq!(echoed.for_model, "hi");
    hub.shutdown().await;
}

/// A streamable HTTP server whose `initialize` result carries `padding` bytes of
/// instructions, and that lists no tools.
fn padded_http_server(padding: usize) -> MockServer {
    MockServer::start(move |_, seen: &Seen| {
        if seen.request_line.starts_with("GET") {
            return Answer::Status(405, String::new());
        }
        let id = seen.body["id"].clone();
        match seen.body["method"].as_str() {
            Some("initialize") => Answer::Status(
                200,
                json!({ "jsonrpc": "2.0", "id": id, "result": {
                    "protocolVersion": seen.body["params"]["protocolVersion"],
                    "capabilities": { "tools": {} },
                    "serverInfo": { "name": "padded", "version": "1" },
                    "instructions": "i".repeat(padding),
                } })
                .to_string(),
            ),
            Some("tools/list") => Answer::Status(
                200,
                json!({ "jsonrpc": "2.0", "id": id, "result": { "tools": [] } }).to_string(),
            ),
            _ => Answer::Status(202, String::new()),
        }
    })
}

/// M2: an HTTP answer past 4 MiB (rmcp's own default would take 16) fails its server, as
/// does a legacy SSE event past 4 MiB; an answer under it is taken; the others keep working.
#[tokio::test]
async fn an_http_answer_or_sse_event_past_4_mib_fails_only_its_server() {
    let dirs = Dirs::new();
    let big = padded_http_server(5 * 1024 * 1024);
    let under = padded_http_server(3 * 1024 * 1024);
    let event = format!("event: endpoint\ndata: /messages?{}\n\n", "e".repeat(5 * 1024 * 1024));
    let sse = MockServer::start(move |_, _: &Seen| Answer::Stream(event.clone()));
    let http = |name: &str, server: &MockServer| ServerSpec {
        name: name.into(),
        transport: TransportSpec::Http { url: format!("{}/mcp", server.origin), headers: Vec::new() },
    };
    let legacy = ServerSpec {
        name: "legacy".into(),
        transport: TransportSpec::Sse { url: format!("{}/sse", sse.origin), headers: Vec::new() },
    };
    let specs = vec![http("big", &big), http("under", &under), legacy, fake("fine", "", &[])];
    let hub = started(specs, &dirs).await;
    let reason = failure(&hub, "big");
    assert!(reason.contains("exceeded the maximum size of 4194304 bytes"), "{reason}");
    assert_eq!(state(&hub, "under"), ServerState::Ready);
    let reason = failure(&hub, "legacy");
    assert!(reason.contains("over the size limit"), "{reason}");
    assert_eq!(state(&hub, "fine"), ServerState::Ready);
    hub.shutdown().await;
}

/// A legacy SSE server that names its endpoint on a stream it keeps open, and never
/// answers a POST: each connection is held until Heron closes it.
fn sse_server_that_never_answers_a_post() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let origin = format!("http://{}", listener.local_addr().expect("addr"));
    std::thread::spawn(move || {
        for socket in listener.incoming() {
            let Ok(mut socket) = socket else { return };
            std::thread::spawn(move || {
                use std::io::{Read, Write};
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                if head.starts_with(b"GET") {
                    let stream = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n\
                                  event: endpoint\ndata: /messages\n\n";
                    let _ = socket.write_all(stream.as_bytes()).and_then(|()| socket.flush());
                }
                // Held, unanswered, until Heron lets go.
                while matches!(socket.read(&mut buf), Ok(n) if n > 0) {}
            });
        }
    });
    format!("{origin}/sse")
}

/// M3: a POST to a legacy SSE server that never answers fails at the POST wait, well
/// before the startup wait, with a reason that says so.
#[tokio::test]
async fn a_legacy_post_that_never_answers_fails_at_the_post_wait() {
    let dirs = Dirs::new();
    let url = sse_server_that_never_answers_a_post();
    let spec =
        ServerSpec { name: "silent".into(), transport: TransportSpec::Sse { url, headers: Vec::new() } };
    let hub = started(vec![spec, fake("fine", "", &[])], &dirs).await;
    let reason = failure(&hub, "silent");
    assert!(!reason.contains("did not answer within") && reason.contains("timed out"), "{reason}");
    assert_eq!(state(&hub, "fine"), ServerState::Ready);
    hub.shutdown().await;
}

/// M4: a server that never answers `initialize` is failed at the startup wait, naming it;
/// a URL that refuses connections is tried until then and failed with the refusal; the
/// other server is ready.
#[tokio::test]
async fn a_server_that_never_starts_is_failed_at_the_startup_wait() {
    let dirs = Dirs::new();
    let port =
        std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a port").port();
    let refusing = ServerSpec {
        name: "refusing".into(),
        transport: TransportSpec::Http { url: format!("http://127.0.0.1:{port}/mcp"), headers: Vec::new() },
    };
    let began = Instant::now();
    let hub = started(vec![fake("mute", "mute", &[]), refusing, fake("fine", "", &[])], &dirs).await;
    assert!(began.elapsed() < Duration::from_secs(8), "the short wait held: {:?}", began.elapsed());
    let reason = failure(&hub, "mute");
    assert!(reason.contains("did not start within 2 s"), "{reason}");
    let reason = failure(&hub, "refusing");
    assert!(reason.contains("could not be reached"), "{reason}");
    assert_eq!(state(&hub, "fine"), ServerState::Ready);
    hub.shutdown().await;
}

/// M4: a connection that never completes (a listener whose queue is full drops the
/// handshake) is cut at the connect wait, not left to the startup wait: the server fails
/// saying it could not be reached, and the other server is ready.
#[tokio::test]
async fn a_connection_that_never_completes_is_cut_at_the_connect_wait() {
    let dirs = Dirs::new();
    let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
    socket.bind(std::net::SocketAddr::from(([127, 0, 0, 1], 0))).expect("bound");
    let address = socket.local_addr().expect("its address");
    // A queue of one, filled and never accepted: the next handshake is dropped.
    let _listener = socket.listen(0).expect("listening");
    let _queued = tokio::net::TcpStream::connect(address).await.expect("the one queued connection");
    let _waiting = tokio::spawn(tokio::net::TcpStream::connect(address));
    let probe =
        tokio::time::timeout(Duration::from_millis(300), tokio::net::TcpStream::connect(address)).await;
    assert!(probe.is_err(), "the setup needs a connect that hangs: {probe:?}");
    let hanging = ServerSpec {
        name: "hanging".into(),
        transport: TransportSpec::Http { url: format!("http://{address}/mcp"), headers: Vec::new() },
    };
    let limits = McpLimits { startup: Duration::from_secs(3), connect: Duration::from_millis(100), ..SHORT };
    let hub = started_within(vec![hanging, fake("fine", "", &[])], &dirs, limits).await;
    let reason = failure(&hub, "hanging");
    assert!(reason.contains("could not be reached"), "{reason}");
    assert!(
        !reason.contains("did not start within"),
        "the connect wait cut it, not the startup wait: {reason}"
    );
    assert_eq!(state(&hub, "fine"), ServerState::Ready);
    hub.shutdown().await;
}

/// M5: a server that says it has prompts and resources and never lists them is ready with
/// its tools once the offers wait is over, offering no prompt and no resource.
#[tokio::test]
async fn a_server_that_never_lists_its_offers_is_ready_with_its_tools() {
    let dirs = Dirs::new();
    let began = Instant::now();
    let hub = started(vec![fake("stalled", "stalled_offers", &[])], &dirs).await;
    assert!(began.elapsed() < Duration::from_secs(8), "the short wait held: {:?}", began.elapsed());
    assert_eq!(state(&hub, "stalled"), ServerState::Ready);
    assert!(hub.prompts().is_empty());
    let names: Vec<String> = hub.tools().iter().map(|t| t.spec().name).collect();
    assert!(names.contains(&"mcp__stalled__echo".to_owned()), "{names:?}");
    assert!(!names.contains(&"read_mcp_resource".to_owned()), "{names:?}");
    hub.shutdown().await;
}

/// M6: a server that ignores the end of its input and SIGTERM does not hold the hub's
/// shutdown past the close wait (rmcp alone would wait 3 s, then 3 more): its process group
/// is killed.
#[cfg(unix)]
#[tokio::test]
async fn a_server_that_never_lets_go_is_killed_after_the_close_wait() {
    let dirs = Dirs::new();
    let marker = format!("heron-mcp-stubborn-{}", uuid::Uuid::new_v4().simple());
    let mut spec = fake("stubborn", "stubborn", &[]);
    if let TransportSpec::Stdio { args, .. } = &mut spec.transport {
        args.push(marker.clone());
    }
    let hub = started(vec![spec], &dirs).await;
    assert_eq!(state(&hub, "stubborn"), ServerState::Ready);
    let began = Instant::now();
    hub.shutdown().await;
    assert!(began.elapsed() < Duration::from_millis(2500), "shutdown took {:?}", began.elapsed());
    wait_until_none_runs(&marker, "the server that ignored its close");
}

/// M13 and M14: a prompt and a resource of 300 KiB come back cut at 256 KiB with a note;
/// `read_mcp_resource` names 40 of the 45 resources listed and says how many more there are.
#[tokio::test]
async fn a_prompt_and_a_resource_past_256_kib_are_cut_and_a_long_list_is_named_in_part() {
    const CAP: usize = 256 * 1024;
    const NOTE: &str = "\n[cut: the rest was longer than Heron reads]";
    let dirs = Dirs::new();
    let hub = started(vec![fake("offers", "offers", &[])], &dirs).await;
    assert_eq!(state(&hub, "offers"), ServerState::Ready);

    let prompt = hub.get_prompt("offers", "big", serde_json::Map::new()).await.expect("the prompt expands");
    assert_eq!(prompt.len(), CAP + NOTE.len());
    assert!(prompt.ends_with(NOTE) && prompt[..CAP].bytes().all(|b| b == b'b'));

    let read = tool(&hub, "read_mcp_resource");
    let description = read.spec().description;
    assert_eq!(description.matches("\n- server `offers`: mem://r").count(), 40, "{description}");
    assert!(description.contains("mem://r39 (r39)") && !description.contains("mem://r40"), "{description}");
    assert!(description.ends_with("\n- and 5 more"), "{description}");
    let outcome = run(&read, json!({ "server": "offers", "uri": "mem://r0" }), &dirs.env()).await;
    assert_eq!(outcome.status, ToolStatus::Completed);
    assert_eq!(outcome.for_model.len(), CAP + NOTE.len());
    assert!(outcome.for_model.ends_with(NOTE));
    hub.shutdown().await;
}
